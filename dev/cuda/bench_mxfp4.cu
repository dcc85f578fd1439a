// Benchmarks of the MXFP4 kernels on the GPU, as ratios against ceilings measured in the same run:
//  1. achieved bandwidth of each quantize / dequantize / E4M3 kernel vs a device-to-device copy;
//  2. quantize + GEMM vs cuBLASLt BF16 at the linear-layer shapes of GPT-2 124M, 350M and 1.5B, for the exact path
//     (dequantize + BF16 GEMM) and the fast path (Hadamard + MXFP4 -> E4M3 in one pass as the trainer does it; then
//     FP8 tensor cores).
//     The activation operand's quantization is included; the weight operand is quantized outside the timed region.
//  3. the fast path's one-pass row quantizer (BF16 -> Hadamard -> E4M3) against the two-pass route (MXFP4 codes,
//     then mx_to_e4m3) at the trainer's row-major operand shapes.
// Prints tables. Usage: build/bench_mxfp4 [repeats [sections]], sections a comma-separated list of bandwidth, gemm,
// rows (default all three)
#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"
#include "dev/cuda/bench_common.cuh"
#include "llmc/mxfp4.cuh"

// the rows quantizer's structure without the E2M1 encoding: the same loads, block amax and scale byte, but the
// codes are only the sign bits. It shows how fast the rows kernel would be if encoding cost nothing (bench only).
// Traffic: reads 2 bytes, writes 0.53 bytes per element.
__global__ void rows_without_encoding_kernel(uint8_t* codes, uint8_t* scales, const floatX* x, long nblocks) {
    long b = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks) { return; }
    float v[32];
    mx_load32(v, x + b * 32);
    int bad;
    float amax = mx_block_amax(v, &bad);
    uint32_t w[4] = {0, 0, 0, 0};
    for (int j = 0; j < 32; j++) { w[j / 8] |= (__float_as_uint(v[j]) >> 31) << (4 * (j % 8) + 3); }
    reinterpret_cast<uint4*>(codes)[b] = make_uint4(w[0], w[1], w[2], w[3]);
    scales[b] = mx_scale_byte(bad ? 128 : mx_block_exponent(amax, MX_SCALE_OCP));
}

// 1. achieved bandwidth of the quantize / dequantize / E4M3 kernels against a device-to-device copy
static void bench_bandwidth(int reps) {
    const int R = 65536, K = 3072;
    long n = (long)R * K;
    floatX* x = random_bf16(n, 1, 1.0f);
    floatX* y = (floatX*)device_malloc(n * sizeof(floatX), "copy target");
    float copy_ms = time_ms([&] { cudaCheck(cudaMemcpyAsync(y, x, n * sizeof(floatX), cudaMemcpyDeviceToDevice)); }, reps);
    double copy_gbs = 2.0 * n * sizeof(floatX) / copy_ms / 1e6;
    printf("\ncopy ceiling: %.0f GB/s (bytes read + written, %.1f GB buffer)\n", copy_gbs, n * 2 / 1e9);
    MXOperand q = mx_operand_alloc(R, K), qt = mx_operand_alloc(K, R);
    E4M3Operand e8 = e4m3_operand_alloc(R, K);
    double mx_bytes = n * (2.0 + 0.5 + 1.0 / 32);   // BF16 in, codes + scales out
    struct { const char* name; double bytes; float ms; } rows[13];
    int nr = 0;
    for (int h = 0; h < 2; h++) {
        MXQuantOptions opt = {h, MX_SCALE_OCP, 0, 0};
        rows[nr++] = {h ? "quantize rows + Hadamard" : "quantize rows", mx_bytes,
                      time_ms([&] { mx_quantize_rows(&q, x, R, K, opt, 0); }, reps)};
        rows[nr++] = {h ? "quantize cols (transposed) + Hadamard" : "quantize cols (transposed)", mx_bytes,
                      time_ms([&] { mx_quantize_cols(&qt, x, R, K, opt, NULL, NULL, 0); }, reps)};
    }
    rows[nr++] = {"rows kernel without the E2M1 encoding (sign bits only): its memory-side ceiling", mx_bytes, time_ms([&] {
                      rows_without_encoding_kernel<<<ceil_div(n / 32, 256), 256>>>(q.codes, q.scales, x, n / 32); }, reps)};
    float* col_sq = (float*)device_malloc((size_t)K * sizeof(float), "column squares");
    float* col_part = (float*)device_malloc(mx_col_sq_scratch_floats(R, K) * sizeof(float), "column square partials");
    MXQuantOptions had = {1, MX_SCALE_OCP, 0, 0};
    rows[nr++] = {"quantize cols + Hadamard + column sums of squares (OE)", mx_bytes,
                  time_ms([&] { mx_quantize_cols(&qt, x, R, K, had, col_sq, col_part, 0); }, reps)};
    rows[nr++] = {"column sums of squares alone (the separate OE pass)", n * 2.0, time_ms([&] {
                      column_sums<COLSUM_SQUARES>({{col_sq, col_part, NULL}}, (float*)y, x, ColsumRows{}, R, K, 0); }, reps)};
    MXQuantOptions sr = {1, MX_SCALE_OCP, 1, 7};
    rows[nr++] = {"quantize rows + Hadamard + SR", mx_bytes, time_ms([&] { mx_quantize_rows(&q, x, R, K, sr, 0); }, reps)};
    rows[nr++] = {"dequantize to BF16", mx_bytes, time_ms([&] { mx_dequantize(y, &q, 0); }, reps)};
    rows[nr++] = {"MXFP4 -> E4M3 + row scales", n * (1.0 + 0.5 + 1.0 / 32), time_ms([&] { mx_to_e4m3(&e8, &q, 0); }, reps)};
    MXQuantOptions hopt = {1, MX_SCALE_OCP, 0, 0};
    rows[nr++] = {"one pass: BF16 -> Hadamard -> E4M3 + row scales", n * 3.0, time_ms([&] { mx_quantize_rows_e4m3(&e8, x, R, K, hopt, 0); }, reps)};
    printf("| kernel (%d x %d) | ms | GB/s | of copy ceiling |\n|---|---|---|---|\n", R, K);
    for (int i = 0; i < nr; i++) {
        double gbs = rows[i].bytes / rows[i].ms / 1e6;
        printf("| %s | %.3f | %.0f | %.0f%% |\n", rows[i].name, rows[i].ms, gbs, 100.0 * gbs / copy_gbs);
    }
    mx_operand_free(&q); mx_operand_free(&qt); e4m3_operand_free(&e8);
    cudaCheck(cudaFree(x)); cudaCheck(cudaFree(y)); cudaCheck(cudaFree(col_sq)); cudaCheck(cudaFree(col_part));

}

// 2. quantize + GEMM against cuBLASLt BF16, and the dW GEMMs's two ways of applying the row scales
static void bench_gemms(int reps) {
    // out [M x N] = A [M x K] (activation, quantized in the timed region) x B [N x K]^T (weight)
    struct { int M, N, K; const char* what; } shapes[] = {
        {65536, 2304, 768, "124M qkv"}, {65536, 3072, 768, "124M fc"}, {65536, 768, 3072, "124M fc proj"},
        {65536, 1024, 4096, "350M fc proj"}, {32768, 6400, 1600, "1.5B fc"}, {32768, 1600, 6400, "1.5B fc proj"},
        {768, 3072, 65536, "dW, K = tokens"}};
    printf("\n| GEMM M x N x K | BF16 ms | BF16 TFLOP/s | exact path ms | exact / BF16 | fast path ms | BF16 / fast (speed-up) | FP8 GEMM alone ms | BF16 / FP8 GEMM alone |\n|---|---|---|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int M = shapes[s].M, N = shapes[s].N, Kd = shapes[s].K;
        floatX *a = random_bf16((long)M * Kd, 2, 1.0f), *b = random_bf16((long)N * Kd, 3, 1.0f);
        floatX* out = (floatX*)device_malloc((size_t)M * N * sizeof(floatX), "out");
        floatX *abf = (floatX*)device_malloc((size_t)M * Kd * 2, "a bf16"), *bbf = (floatX*)device_malloc((size_t)N * Kd * 2, "b bf16");
        MXOperand qa = mx_operand_alloc(M, Kd), qb = mx_operand_alloc(N, Kd);
        E4M3Operand ea = e4m3_operand_alloc(M, Kd), eb = e4m3_operand_alloc(N, Kd);
        MXQuantOptions opt = {1, MX_SCALE_OCP, 0, 0};
        mx_quantize_rows(&qb, b, N, Kd, opt, 0);
        mx_to_e4m3(&eb, &qb, 0);
        mx_dequantize(bbf, &qb, 0);
        float bf16_ms = time_ms([&] { matmul(out, false, b, a, NULL, N, M, Kd, true, false, 0.0f, gemm_single, 0); }, reps);
        float exact_ms = time_ms([&] {
            mx_quantize_rows(&qa, a, M, Kd, opt, 0);
            mx_dequantize(abf, &qa, 0);
            matmul(out, false, bbf, abf, NULL, N, M, Kd, true, false, 0.0f, gemm_single, 0);
        }, reps);
        float fast_ms = time_ms([&] {   // the activation operand as the trainer prepares it (llmc/adahop_linear.cuh)
            mx_quantize_rows_e4m3(&ea, a, M, Kd, opt, 0);
            mx_gemm_fast(out, false, &ea, &eb, NULL, 0.0f, 0);
        }, reps);
        float fp8_only_ms = time_ms([&] { mx_gemm_fast(out, false, &ea, &eb, NULL, 0.0f, 0); }, reps);
        double flops = 2.0 * M * N * Kd;
        printf("| %d x %d x %d (%s) | %.3f | %.0f | %.3f | %.2f | %.3f | %.2fx | %.3f | %.2fx |\n", M, N, Kd, shapes[s].what, bf16_ms,
               flops / bf16_ms / 1e9, exact_ms, exact_ms / bf16_ms, fast_ms, bf16_ms / fast_ms, fp8_only_ms, bf16_ms / fp8_only_ms);
        void* bufs[] = {a, b, out, abf, bbf};
        for (int i = 0; i < 5; i++) { cudaCheck(cudaFree(bufs[i])); }
        mx_operand_free(&qa); mx_operand_free(&qb); e4m3_operand_free(&ea); e4m3_operand_free(&eb);
    }
    // the dW GEMMs (FP32 gradient output, accumulating, K = tokens) of GPT-2 124M / 350M / 1.5B: per-row scales in
    // cuBLASLt's epilogue against a unit-scale FP8 GEMM with the scales applied after it (what the trainer runs);
    // M x N = Cout x Cin as in adahop_linear_backward (A = dY^T, B = x^T)
    struct { int M, N, K; const char* what; } dw_shapes[] = {
        {768, 3072, 65536, "124M fc proj dW"}, {4096, 1024, 32768, "350M fc dW"}, {6400, 1600, 16384, "1.5B fc dW"}};
    printf("\n| dW GEMM M x N x K, FP32 output | BF16 ms | per-row scales in cuBLASLt: BF16 / FP8 | unit-scale FP8 + scales after: BF16 / FP8 |\n|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof(dw_shapes) / sizeof(dw_shapes[0]); s++) {
        int M = dw_shapes[s].M, N = dw_shapes[s].N, Kd = dw_shapes[s].K;
        floatX *a = random_bf16((long)M * Kd, 2, 1.0f), *b = random_bf16((long)N * Kd, 3, 1.0f);
        float *out = (float*)device_malloc((size_t)M * N * sizeof(float), "dW"), *part = (float*)device_malloc((size_t)M * N * sizeof(float), "part");
        cudaCheck(cudaMemset(out, 0, (size_t)M * N * sizeof(float)));
        MXOperand qa = mx_operand_alloc(M, Kd), qb = mx_operand_alloc(N, Kd);
        E4M3Operand ea = e4m3_operand_alloc(M, Kd), eb = e4m3_operand_alloc(N, Kd);
        MXQuantOptions opt = {1, MX_SCALE_OCP, 0, 0};
        mx_quantize_rows(&qa, a, M, Kd, opt, 0); mx_to_e4m3(&ea, &qa, 0);
        mx_quantize_rows(&qb, b, N, Kd, opt, 0); mx_to_e4m3(&eb, &qb, 0);
        float bf16_ms = time_ms([&] { matmul(out, true, b, a, NULL, N, M, Kd, true, false, 1.0f, gemm_single, 0); }, reps);
        float vec_ms = time_ms([&] { mx_gemm_fast(out, true, &ea, &eb, NULL, 1.0f, 0); }, reps);
        float after_ms = time_ms([&] { mx_gemm_fast_scales_after(out, 1.0f, &ea, &eb, part, 0); }, reps);
        printf("| %d x %d x %d (%s) | %.3f | %.2fx | %.2fx |\n", M, N, Kd, dw_shapes[s].what, bf16_ms, bf16_ms / vec_ms, bf16_ms / after_ms);
        void* bufs[] = {a, b, out, part};
        for (int i = 0; i < 4; i++) { cudaCheck(cudaFree(bufs[i])); }
        mx_operand_free(&qa); mx_operand_free(&qb); e4m3_operand_free(&ea); e4m3_operand_free(&eb);
    }
}

// 3. the fast path's one-pass row quantizer against the two-pass route
static void bench_row_quantizers(int reps) {
    // tokens x K of the forward / dX operands of GPT-2 124M (B=64), 350M (B=32), 1.5B (B=16)
    struct { int R, K; const char* what; } q_shapes[] = {
        {65536, 768, "124M C"}, {65536, 3072, "124M 4C"}, {32768, 1024, "350M C"}, {32768, 4096, "350M 4C"},
        {16384, 1600, "1.5B C"}, {16384, 6400, "1.5B 4C"}};
    printf("\n| rows x K, BF16 -> Hadamard -> E4M3 | codes + mx_to_e4m3 ms | one pass ms | two-pass / one pass |\n|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof(q_shapes) / sizeof(q_shapes[0]); s++) {
        int R = q_shapes[s].R, Kd = q_shapes[s].K;
        floatX* a = random_bf16((long)R * Kd, 4, 1.0f);
        MXOperand qa = mx_operand_alloc(R, Kd);
        E4M3Operand ea = e4m3_operand_alloc(R, Kd);
        MXQuantOptions opt = {1, MX_SCALE_OCP, 0, 0};
        float two_ms = time_ms([&] { mx_quantize_rows(&qa, a, R, Kd, opt, 0); mx_to_e4m3(&ea, &qa, 0); }, reps);
        float one_ms = time_ms([&] { mx_quantize_rows_e4m3(&ea, a, R, Kd, opt, 0); }, reps);
        printf("| %d x %d (%s) | %.3f | %.3f | %.2fx |\n", R, Kd, q_shapes[s].what, two_ms, one_ms, two_ms / one_ms);
        cudaCheck(cudaFree(a));
        mx_operand_free(&qa); e4m3_operand_free(&ea);
    }
}

int main(int argc, char** argv) {
    int reps = bench_start(argc, argv);
    const char* which = argc > 2 ? argv[2] : "bandwidth,gemm,rows";
    for (const char* w = which; *w;) {   // the comma-separated sections, in the order given
        size_t len = strcspn(w, ",");
        if (len == 9 && strncmp(w, "bandwidth", len) == 0) { bench_bandwidth(reps); }
        else if (len == 4 && strncmp(w, "gemm", len) == 0) { bench_gemms(reps); }
        else if (len == 4 && strncmp(w, "rows", len) == 0) { bench_row_quantizers(reps); }
        else { die("bench_mxfp4: unknown section '%.*s' (sections: bandwidth, gemm, rows)", (int)len, w); }
        w += len + (w[len] == ',');
    }
    matmul_free();
    return 0;
}
