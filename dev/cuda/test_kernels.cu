// GPU kernels against the FP32 CPU reference (llmc/gpt2_cpu.h) on fresh random inputs and on adversarial
// ones. Inputs are rounded to BF16 before both sides see them, so differences come from BF16 outputs and
// summation order only. Tolerance per element: |gpu - cpu| <= atol + rtol |cpu|, with rtol = 2^-6 (two BF16
// ulps) for BF16 outputs and 1e-4 for FP32 accumulators; atol is stated per test relative to the data scale and
// passed as an absolute value (compare_abs, dev/cuda/test_compare.cuh).
// Also checks that the kernels are deterministic (two runs, identical bits). Needs a GPU.
#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"
#include "llmc/encoder.cuh"
#include "llmc/layernorm.cuh"
#include "dev/cuda/attention_cublaslt.cuh"
#include "llmc/gelu.cuh"
#include "llmc/outliers.cuh"
#include "llmc/classifier.cuh"
#include "dev/cuda/classifier_scalar.cuh"
#include "llmc/adamw.cuh"
#include "llmc/gpt2_cpu.h"
#include "dev/cuda/test_compare.cuh"

static float* scratch;   // column sums / norm scratch on the device

static void test_encoder(int B, int T, int C, int V) {
    printf("encoder B=%d T=%d C=%d V=%d\n", B, T, C, V);
    size_t BT = (size_t)B * T;
    float *wte = host_random((size_t)V * C, 0.5f), *wpe = host_random((size_t)T * C, 0.5f), *dout = host_random(BT * C, 1.0f);
    int* inp = (int*)malloc_check(BT * sizeof(int));
    for (size_t i = 0; i < BT; i++) { inp[i] = (int)rng_below(&rng, i % 5 == 0 ? 3 : V); }   // many repeats
    float* out = host_zeros(BT * C);
    encoder_forward_cpu(out, inp, wte, wpe, B, T, C);
    floatX *d_wte = to_device_bf16(wte, (size_t)V * C), *d_wpe = to_device_bf16(wpe, (size_t)T * C), *d_out = to_device_bf16(out, BT * C);
    int* d_inp = to_device_int(inp, BT);
    cudaCheck(cudaMemset(d_out, 0xff, BT * C * sizeof(floatX)));   // poison: every element must be written
    encoder_forward(d_out, d_inp, d_wte, d_wpe, B, T, C, 0);
    compare_abs("encoder forward", from_device_bf16(d_out, BT * C), out, BT * C, 0.0f, 1.0f / 128);

    // backward accumulates into non-zero gradients
    float *dwte = host_random((size_t)V * C, 1.0f), *dwpe = host_random((size_t)T * C, 1.0f);
    float *d_dwte = to_device_f32(dwte, (size_t)V * C), *d_dwpe = to_device_f32(dwpe, (size_t)T * C);
    encoder_backward_cpu(dwte, dwpe, dout, inp, B, T, C);
    int *counts = (int*)malloc_check(V * sizeof(int)), *groups = (int*)malloc_check((3 * BT + 1) * sizeof(int));
    int u = encoder_group_positions(inp, (int)BT, V, counts, groups, groups + BT, groups + 2 * BT + 1);
    int* d_groups = to_device_int(groups, 3 * BT + 1);
    floatX* d_dout = to_device_bf16(dout, BT * C);
    encoder_backward(d_dwte, d_dwpe, d_dout, d_groups, d_groups + BT, d_groups + 2 * BT + 1, u, B, T, C, 0);
    compare_abs("encoder backward dwte", from_device_f32(d_dwte, (size_t)V * C), dwte, (size_t)V * C, 1e-4f, 1e-4f);
    compare_abs("encoder backward dwpe", from_device_f32(d_dwpe, (size_t)T * C), dwpe, (size_t)T * C, 1e-4f, 1e-4f);
    free(wte); free(wpe); free(dout); free(inp); free(out); free(dwte); free(dwpe); free(counts); free(groups);
    cudaFree(d_wte); cudaFree(d_wpe); cudaFree(d_out); cudaFree(d_inp); cudaFree(d_dwte); cudaFree(d_dwpe);
    cudaFree(d_groups); cudaFree(d_dout);
}

// LayerNorm with and without the fused residual, forward and backward; scale sets the input magnitude
static void test_layernorm(int N, int C, float scale, bool zero_rows) {
    printf("layernorm N=%d C=%d scale=%g%s\n", N, C, scale, zero_rows ? " (with all-zero rows)" : "");
    size_t n = (size_t)N * C;
    float *a = host_random(n, scale), *b = host_random(n, scale), *w = host_random(C, 1.0f), *bias = host_random(C, 1.0f);
    if (zero_rows) { for (int c = 0; c < C; c++) { a[c] = 0.0f; b[c] = 0.0f; } }
    float *res = host_zeros(n), *out = host_zeros(n), *mean = host_zeros(N), *rstd = host_zeros(N);
    for (size_t i = 0; i < n; i++) { res[i] = __bfloat162float(__float2bfloat16(a[i] + b[i])); }   // residual stream is BF16
    layernorm_forward_cpu(out, mean, rstd, res, w, bias, 1, N, C);
    floatX *d_a = to_device_bf16(a, n), *d_b = to_device_bf16(b, n), *d_w = to_device_bf16(w, C), *d_bias = to_device_bf16(bias, C);
    floatX *d_out = to_device_bf16(out, n), *d_res = to_device_bf16(out, n);
    float *d_mean = to_device_f32(mean, N), *d_rstd = to_device_f32(rstd, N);
    cudaCheck(cudaMemset(d_out, 0xff, n * sizeof(floatX)));
    layernorm_forward(d_out, d_mean, d_rstd, d_res, d_a, d_b, d_w, d_bias, N, C, 0);
    compare_abs("residual + layernorm: residual", from_device_bf16(d_res, n), res, n, 0.0f, 0.0f);
    compare_abs("residual + layernorm: out", from_device_bf16(d_out, n), out, n, 1e-2f, 1.0f / 64);
    compare_abs("residual + layernorm: mean", from_device_f32(d_mean, N), mean, N, 1e-5f * scale, 1e-4f);
    compare_abs("residual + layernorm: rstd", from_device_f32(d_rstd, N), rstd, N, 0.0f, 1e-3f);

    // backward: dinp accumulates into a BF16 buffer, dweight/dbias into FP32
    // the column sums of the new dinp (the bias gradient layernorm_backward sums too) start from random values;
    // the GPU sums dinp rounded to BF16: within 2^-8 of the column's sum of |dinp|
    float *dout = host_random(n, 1.0f), *dinp = host_random(n, 1.0f), *dw = host_random(C, 1.0f), *db = host_random(C, 1.0f);
    float *dsum = host_random(C, 1.0f), *abs_sum = host_zeros(C);
    floatX *d_dout = to_device_bf16(dout, n), *d_dinp = to_device_bf16(dinp, n);
    float *d_dw = to_device_f32(dw, C), *d_db = to_device_f32(db, C), *d_dsum = to_device_f32(dsum, C);
    layernorm_backward_cpu(dinp, dw, db, dout, res, w, mean, rstd, 1, N, C);
    for (int j = 0; j < C; j++) {
        double sum = dsum[j];
        for (int r = 0; r < N; r++) { sum += dinp[(size_t)r * C + j]; abs_sum[j] += fabsf(dinp[(size_t)r * C + j]); }
        dsum[j] = (float)sum;
    }
    layernorm_backward(d_dinp, d_dw, d_db, d_dsum, scratch, d_dout, d_res, d_mean, d_rstd, d_w, N, C, 0);
    float dinp_scale = 0.0f, max_abs_sum = 0.0f;
    for (size_t i = 0; i < n; i++) { dinp_scale = fmaxf(dinp_scale, fabsf(dinp[i])); }
    for (int j = 0; j < C; j++) { max_abs_sum = fmaxf(max_abs_sum, abs_sum[j]); }
    compare_abs("layernorm backward dinp", from_device_bf16(d_dinp, n), dinp, n, 1e-2f * dinp_scale, 1.0f / 64);
    compare_abs("layernorm backward dweight", from_device_f32(d_dw, C), dw, C, 1e-3f * sqrtf((float)N), 1e-3f);
    compare_abs("layernorm backward dbias", from_device_f32(d_db, C), db, C, 1e-4f * sqrtf((float)N), 1e-4f);
    compare_abs("layernorm backward dinp column sums", from_device_f32(d_dsum, C), dsum, C, max_abs_sum / 256, 1e-4f);
    free(a); free(b); free(w); free(bias); free(res); free(out); free(mean); free(rstd); free(dout); free(dinp); free(dw); free(db);
    free(dsum); free(abs_sum);
    void* bufs[] = {d_a, d_b, d_w, d_bias, d_out, d_res, d_mean, d_rstd, d_dout, d_dinp, d_dw, d_db, d_dsum};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
}

// the LayerNorm input gradient row by row, one warp per row: the unfused form of layernorm_backward's column-sum pass
__global__ void layernorm_dinp_rowwise_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const float* mean,
                                              const float* rstd, const floatX* weight, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) { return; }
    float mu = mean[row], rs = rstd[row];
    const floatX *dr = dout + (size_t)row * C, *xr = inp + (size_t)row * C;
    float2 gm = layernorm_row_grad_means(dr, xr, weight, mu, rs, C);
    floatX* dir = dinp + (size_t)row * C;
    for (int c = (threadIdx.x % 32) * 8; c < C; c += 32 * 8) {
        x128 dv = load128(dr + c), xv = load128(xr + c), wv = load128(weight + c), iv = load128(dir + c);
        for (int i = 0; i < 8; i++) {
            iv[i] = (floatX)((float)iv[i] + layernorm_dinp_term((float)dv[i] * (float)wv[i], ((float)xv[i] - mu) * rs, rs, gm));
        }
        store128(dir + c, iv);
    }
}

// layernorm_backward (its input gradient, weight and bias gradients and the column sums of the new input gradient in
// one column-sum pass) bit for bit against the unfused path: the row-wise input gradient, column_sums<LAYERNORM> and
// bias_backward of the new input gradient, every FP32 sum starting from random values. The CPU comparison is
// test_layernorm's. scale multiplies the LayerNorm input; nan_row puts NaN in the last row of dout.
static void test_layernorm_backward_fused(int N, int C, float scale, bool nan_row) {
    printf("layernorm backward fused N=%d C=%d scale=%g%s\n", N, C, scale, nan_row ? ", NaN row" : "");
    size_t n = (size_t)N * C;
    float *x = host_random(n, scale), *w = host_random(C, 1.0f), *bias = host_random(C, 1.0f), *dout = host_random(n, 1.0f);
    float *dinp = host_random(n, 1.0f), *sums = host_random(3 * C, 1.0f);
    if (nan_row) { for (int j = 0; j < C; j++) { dout[(size_t)(N - 1) * C + j] = NAN; } }
    floatX *d_x = to_device_bf16(x, n), *d_w = to_device_bf16(w, C), *d_bias = to_device_bf16(bias, C);
    floatX *d_dout = to_device_bf16(dout, n), *d_fused = to_device_bf16(dinp, n), *d_unfused = to_device_bf16(dinp, n);
    floatX* d_y = to_device_bf16(dinp, n);
    float *d_fused_sums = to_device_f32(sums, 3 * C), *d_unfused_sums = to_device_f32(sums, 3 * C);
    float *d_mean = (float*)device_malloc(N * sizeof(float), "mean"), *d_rstd = (float*)device_malloc(N * sizeof(float), "rstd");
    layernorm_forward(d_y, d_mean, d_rstd, NULL, d_x, NULL, d_w, d_bias, N, C, 0);
    layernorm_backward(d_fused, d_fused_sums, d_fused_sums + C, d_fused_sums + 2 * C, scratch, d_dout, d_x, d_mean, d_rstd,
                       d_w, N, C, 0);
    layernorm_dinp_rowwise_kernel<<<ceil_div(N, 8), 256>>>(d_unfused, d_dout, d_x, d_mean, d_rstd, d_w, N, C);
    cudaCheckLaunch();
    ColsumRows rows = {d_x, d_mean, d_rstd, NULL, NULL, NULL};
    column_sums<COLSUM_LAYERNORM>({{d_unfused_sums, d_unfused_sums + C, NULL}}, scratch, d_dout, rows, N, C, 0);
    bias_backward(d_unfused_sums + 2 * C, scratch, d_unfused, N, C, 0);
    compare_bits("dinp: fused = row-wise", d_fused, d_unfused, n * sizeof(floatX));
    compare_bits("dweight: fused = column_sums<LAYERNORM>", d_fused_sums, d_unfused_sums, C * sizeof(float));
    compare_bits("dbias: fused = column_sums<LAYERNORM>", d_fused_sums + C, d_unfused_sums + C, C * sizeof(float));
    compare_bits("dinp sums: fused = bias_backward", d_fused_sums + 2 * C, d_unfused_sums + 2 * C, C * sizeof(float));
    if (nan_row) {   // NaN in the last row's dinp and in every sum, the other rows finite
        float *got = from_device_bf16(d_fused, n), *got_sums = from_device_f32(d_fused_sums, 3 * C);
        int finite_rows = 0, nan_last = 0, nan_sums = 0;
        for (int r = 0; r < N - 1; r++) {
            bool finite = true;
            for (int j = 0; j < C; j++) { finite = finite && isfinite(got[(size_t)r * C + j]); }
            finite_rows += finite;
        }
        for (int j = 0; j < C; j++) { nan_last += isnan(got[(size_t)(N - 1) * C + j]); }
        for (int j = 0; j < 3 * C; j++) { nan_sums += isnan(got_sums[j]); }
        CHECK(finite_rows == N - 1 && nan_last == C && nan_sums == 3 * C,
              "NaN row: %d of %d other rows finite, %d of %d NaN in the row, %d of %d NaN sums", finite_rows, N - 1, nan_last,
              C, nan_sums, 3 * C);
        free(got); free(got_sums);
    }
    free(x); free(w); free(bias); free(dout); free(dinp); free(sums);
    void* bufs[] = {d_x, d_w, d_bias, d_dout, d_fused, d_unfused, d_y, d_fused_sums, d_unfused_sums, d_mean, d_rstd};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
}

static void test_linear(int N, int IC, int OC) {
    printf("linear N=%d IC=%d OC=%d\n", N, IC, OC);
    size_t ni = (size_t)N * IC, no = (size_t)N * OC, nw = (size_t)OC * IC;
    float *inp = host_random(ni, 1.0f), *w = host_random(nw, 0.05f), *bias = host_random(OC, 0.1f), *out = host_zeros(no);
    matmul_forward_cpu(out, inp, w, bias, 1, N, IC, OC);
    floatX *d_inp = to_device_bf16(inp, ni), *d_w = to_device_bf16(w, nw), *d_bias = to_device_bf16(bias, OC);
    floatX* d_out = (floatX*)device_malloc(no * sizeof(floatX), "out");
    cudaCheck(cudaMemset(d_out, 0xff, no * sizeof(floatX)));
    linear_forward(d_out, d_inp, d_w, d_bias, N, IC, OC, 0);
    float atol = 2e-3f * sqrtf((float)IC) * 0.05f;
    compare_abs("linear forward", from_device_bf16(d_out, no), out, no, atol, 1.0f / 64);

    float *dout = host_random(no, 1.0f), *dinp = host_zeros(ni), *dw = host_random(nw, 1.0f), *db = host_random(OC, 1.0f);
    floatX *d_dout = to_device_bf16(dout, no), *d_dinp = (floatX*)device_malloc(ni * sizeof(floatX), "dinp");
    float *d_dw = to_device_f32(dw, nw), *d_db = to_device_f32(db, OC);
    matmul_backward_cpu(dinp, dw, db, dout, inp, w, 1, N, IC, OC);
    linear_backward(d_dinp, d_dw, d_db, scratch, d_dout, d_inp, d_w, N, IC, OC, 0);
    compare_abs("linear backward dinp", from_device_bf16(d_dinp, ni), dinp, ni, 2e-3f * sqrtf((float)OC) * 0.05f, 1.0f / 64);
    compare_abs("linear backward dweight", from_device_f32(d_dw, nw), dw, nw, 1e-4f * sqrtf((float)N), 1e-4f);
    compare_abs("linear backward dbias", from_device_f32(d_db, OC), db, OC, 1e-4f * sqrtf((float)N), 1e-4f);
    free(inp); free(w); free(bias); free(out); free(dout); free(dinp); free(dw); free(db);
    cudaFree(d_inp); cudaFree(d_w); cudaFree(d_bias); cudaFree(d_out); cudaFree(d_dout); cudaFree(d_dinp); cudaFree(d_dw); cudaFree(d_db);
}

// GEMM algorithms by timing (llmc/matmul.cuh, GEMM_ALGO_TIMED): the timing runs leave an accumulating GEMM's D as it
// was (dW = D0 + x^T dy against the CPU reference), the table's algorithm runs again bit for bit, the saved table
// loads back to the same bits and refuses another cuBLASLt version or a malformed size, and first choices are not saved
static void test_gemm_timed(int N, int IC, int OC) {
    printf("GEMM algorithms by timing N=%d IC=%d OC=%d\n", N, IC, OC);
    size_t ni = (size_t)N * IC, no = (size_t)N * OC, nw = (size_t)OC * IC;
    float *inp = host_random(ni, 1.0f), *dout = host_random(no, 1.0f), *w = host_random(nw, 0.05f);
    float *dw0 = host_random(nw, 1.0f), *dw = (float*)malloc_check(nw * sizeof(float)), *out = host_zeros(no);
    float *dinp = host_zeros(ni), *db = host_zeros(OC);
    memcpy(dw, dw0, nw * sizeof(float));
    matmul_backward_cpu(dinp, dw, db, dout, inp, w, 1, N, IC, OC);
    matmul_forward_cpu(out, inp, w, NULL, 1, N, IC, OC);
    floatX *d_inp = to_device_bf16(inp, ni), *d_dout = to_device_bf16(dout, no), *d_w = to_device_bf16(w, nw);
    float* d_dw = to_device_f32(dw0, nw);
    floatX* d_out = (floatX*)device_malloc(no * sizeof(floatX), "out");
    gemm_algo_table_clear(GEMM_ALGO_TIMED);
    matmul(d_dw, true, d_inp, d_dout, NULL, IC, OC, N, false, true, 1.0f, gemm_single, 0);   // timed, then run once
    float* first = from_device_f32(d_dw, nw);
    compare_abs("timed dweight (D0 + x^T dy)", from_device_f32(d_dw, nw), dw, nw, 1e-4f * sqrtf((float)N), 1e-4f);
    linear_forward(d_out, d_inp, d_w, NULL, N, IC, OC, 0);
    compare_abs("timed forward", from_device_bf16(d_out, no), out, no, 2e-3f * sqrtf((float)IC) * 0.05f, 1.0f / 64);
    CHECK(gemm_algo_entries() == 2 && gemm_timed_entries() == 2, "two timed entries (%d, %d timed)", gemm_algo_entries(),
          gemm_timed_entries());

    size_t n = gemm_algo_table_words();
    int32_t* words = (int32_t*)malloc_check(n * sizeof(int32_t));
    int32_t* again = (int32_t*)malloc_check(n * sizeof(int32_t));
    gemm_algo_table_save(words);
    gemm_algo_table_clear(GEMM_ALGO_FIRST);
    char why[256] = "";
    CHECK(gemm_algo_table_load(words, n, why, sizeof(why)) == 0 && gemm_algo_entries() == 2, "the saved table loads: %s", why);
    gemm_algo_table_save(again);
    CHECK(memcmp(words, again, n * sizeof(int32_t)) == 0, "the loaded table saves the same words");
    cudaCheck(cudaMemcpy(d_dw, dw0, nw * sizeof(float), cudaMemcpyHostToDevice));
    matmul(d_dw, true, d_inp, d_dout, NULL, IC, OC, N, false, true, 1.0f, gemm_single, 0);
    float* loaded = from_device_f32(d_dw, nw);
    CHECK(memcmp(first, loaded, nw * sizeof(float)) == 0, "the loaded table's algorithm gives the timed run's bits");

    words[0] += 1;
    CHECK(gemm_algo_table_load(words, n, why, sizeof(why)) != 0 && strstr(why, "cuBLASLt") && gemm_algo_entries() == 0,
          "a table of another cuBLASLt version is refused (%s)", why);
    words[0] -= 1;
    CHECK(gemm_algo_table_load(words, n - 1, why, sizeof(why)) != 0 && strstr(why, "malformed"), "a short table is refused (%s)", why);
    CHECK(gemm_algo_table_load(words, 2, why, sizeof(why)) != 0, "a table shorter than its header is refused");
    linear_forward(d_out, d_inp, d_w, NULL, N, IC, OC, 0);
    CHECK(gemm_algo_entries() == 1 && gemm_algo_table_words() == GEMM_TABLE_HEADER_WORDS, "a first choice is not saved");
    gemm_algo_table_clear(GEMM_ALGO_FIRST);
    free(inp); free(dout); free(w); free(dw0); free(dw); free(out); free(dinp); free(db); free(first); free(loaded);
    free(words); free(again);
    void* bufs[] = {d_inp, d_dout, d_w, d_dw, d_out};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
}

// rows 0..rows-1 of a [rows+1 x cols] host tensor got (freed) compared with compare_abs; its last row must be all NaN
static void compare_rows_nan_last(const char* what, float* got, const float* want, int rows, int cols, double atol, float rtol) {
    int nan_last = 0;
    for (int j = 0; j < cols; j++) { nan_last += isnan(got[(size_t)rows * cols + j]); }
    printf("  %-38s last row NaN in %d of %d\n", what, nan_last, cols);
    CHECK(nan_last == cols, "%s: a NaN input row gave %d NaN outputs of %d", what, nan_last, cols);
    compare_abs(what, got, want, (size_t)rows * cols, atol, rtol);
}

// The fc linear with cuBLASLt's GELU epilogues (llmc/matmul.cuh; GPT-2's MLP shapes, not yet used by the trainer): forward
// act = gelu(inp W^T + bias) with the pre-activation in aux, backward dinp = (dout W) * gelu'(pre) against the FP32
// CPU reference fed the same BF16 pre-activation. cuBLASLt's GELU (FP32 tanh form) is not ours (the sigmoid form of
// llmc/gelu.cuh), so fused and unfused paths differ by BF16 rounding, not bit for bit: act and dinp take the linear's
// tolerance times max |gelu'| (1.13) plus the BF16 rtol. scale multiplies the input; nan_row puts NaN in the last
// input row (and the last row of dout), which must come out NaN there and leave the other rows exact.
static void test_linear_gelu(int N, int IC, int OC, float scale, bool nan_row) {
    printf("linear + GELU epilogue N=%d IC=%d OC=%d input scale %g%s\n", N, IC, OC, scale, nan_row ? ", NaN row" : "");
    size_t ni = (size_t)N * IC, no = (size_t)N * OC, nw = (size_t)OC * IC;
    float *inp = host_random(ni, scale), *w = host_random(nw, 0.05f), *bias = host_random(OC, 0.1f);
    if (nan_row) { for (int j = 0; j < IC; j++) { inp[(size_t)(N - 1) * IC + j] = NAN; } }
    float *pre = host_zeros(no), *act = host_zeros(no);
    matmul_forward_cpu(pre, inp, w, bias, 1, N, IC, OC);
    gelu_forward_cpu(act, pre, no);
    floatX *d_inp = to_device_bf16(inp, ni), *d_w = to_device_bf16(w, nw), *d_bias = to_device_bf16(bias, OC);
    floatX *d_pre = (floatX*)device_malloc(no * sizeof(floatX), "pre"), *d_act = (floatX*)device_malloc(no * sizeof(floatX), "act");
    GemmSpec fwd = matmul_spec(d_act, false, d_w, d_inp, d_bias, OC, N, IC, true, false, 0.0f, gemm_single);
    fwd.epilogue = GEMM_EPILOGUE_GELU;
    fwd.aux = d_pre;
    cublaslt_gemm(&fwd, 0);
    double atol = 2e-3 * sqrt((double)IC) * 0.05 * scale;
    int rows = nan_row ? N - 1 : N;
    if (nan_row) {
        compare_rows_nan_last("forward pre-activation (aux)", from_device_bf16(d_pre, no), pre, rows, OC, atol, 1.0f / 64);
        compare_rows_nan_last("forward gelu", from_device_bf16(d_act, no), act, rows, OC, 1.13 * atol, 1.0f / 64);
    } else {
        compare_abs("forward pre-activation (aux)", from_device_bf16(d_pre, no), pre, no, atol, 1.0f / 64);
        compare_abs("forward gelu", from_device_bf16(d_act, no), act, no, 1.13 * atol, 1.0f / 64);
        // the unfused path (plain GEMM, then llmc/gelu.cuh) on the same device inputs, for the size of the difference
        floatX *d_pre2 = (floatX*)device_malloc(no * sizeof(floatX), "pre2"), *d_act2 = (floatX*)device_malloc(no * sizeof(floatX), "act2");
        linear_forward(d_pre2, d_inp, d_w, d_bias, N, IC, OC, 0);
        gelu_forward(d_act2, d_pre2, (long)no, 0);
        float* unfused = from_device_bf16(d_act2, no);
        compare_abs("forward gelu against the unfused path", from_device_bf16(d_act, no), unfused, no, 1.13 * atol, 1.0f / 64);
        free(unfused);
        cudaFree(d_pre2); cudaFree(d_act2);
    }

    // backward through a GELU in front of this linear: gpre [N x IC] is that GELU's (BF16) pre-activation
    float *dout = host_random(no, 1.0f), *gpre = host_random(ni, 3.0f), *dlin = host_zeros(ni), *dx = host_zeros(ni);
    float *dw = host_zeros(nw), *db = host_zeros(OC);
    if (nan_row) { for (int j = 0; j < OC; j++) { dout[(size_t)(N - 1) * OC + j] = NAN; } }
    matmul_backward_cpu(dlin, dw, db, dout, inp, w, 1, N, IC, OC);
    gelu_backward_cpu(dx, gpre, dlin, ni);
    floatX *d_dout = to_device_bf16(dout, no), *d_gpre = to_device_bf16(gpre, ni);
    floatX* d_dx = (floatX*)device_malloc(ni * sizeof(floatX), "dx");
    GemmSpec bwd = matmul_spec(d_dx, false, d_w, d_dout, NULL, IC, N, OC, false, false, 0.0f, gemm_single);
    bwd.epilogue = GEMM_EPILOGUE_DGELU;
    bwd.aux = d_gpre;
    cublaslt_gemm(&bwd, 0);
    double atol_b = 1.13 * 2e-3 * sqrt((double)OC) * 0.05;
    if (nan_row) { compare_rows_nan_last("backward dinp * gelu'", from_device_bf16(d_dx, ni), dx, rows, IC, atol_b, 1.0f / 64); }
    else { compare_abs("backward dinp * gelu'", from_device_bf16(d_dx, ni), dx, ni, atol_b, 1.0f / 64); }
    free(inp); free(w); free(bias); free(pre); free(act); free(dout); free(gpre); free(dlin); free(dx); free(dw); free(db);
    cudaFree(d_inp); cudaFree(d_w); cudaFree(d_bias); cudaFree(d_pre); cudaFree(d_act); cudaFree(d_dout); cudaFree(d_gpre);
    cudaFree(d_dx);
}

static void test_attention(int B, int T, int C, int NH, float scale) {
    printf("attention B=%d T=%d C=%d NH=%d input scale %g\n", B, T, C, NH, scale);
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    float *qkv = host_random(nqkv, scale), *out = host_zeros(nout), *att = host_zeros(natt);
    attention_forward_cpu(out, att, qkv, B, T, C, NH);
    floatX* d_qkv = to_device_bf16(qkv, nqkv);
    floatX *d_out = (floatX*)device_malloc(nout * 2, "o"), *d_att = (floatX*)device_malloc(natt * 2, "att");
    floatX* d_qkvr = (floatX*)device_malloc(nqkv * 2, "qkvr");
    float* d_scores = (float*)device_malloc(natt * 4, "scores");
    floatX *d_yr = (floatX*)device_malloc(nout * 2, "yr"), *d_dqkvr = (floatX*)device_malloc(nqkv * 2, "dqkvr");
    floatX* d_dqkv = (floatX*)device_malloc(nqkv * 2, "dqkv");
    cudaCheck(cudaMemset(d_out, 0xff, nout * 2));
    cudaCheck(cudaMemset(d_att, 0xff, natt * 2));
    attention_forward(d_out, d_att, d_qkvr, d_scores, d_yr, d_qkv, B, T, C, NH, 0);
    compare_abs("attention forward probabilities", from_device_bf16(d_att, natt), att, natt, 2e-3f, 1.0f / 32);
    compare_abs("attention forward out", from_device_bf16(d_out, nout), out, nout, 2e-2f * scale, 1.0f / 32);

    float *dout = host_random(nout, 1.0f), *dqkv = host_zeros(nqkv);
    attention_backward_cpu(dqkv, dout, qkv, att, B, T, C, NH);
    floatX* d_dout = to_device_bf16(dout, nout);
    attention_backward(d_dqkv, d_qkvr, d_dqkvr, (floatX*)d_scores, d_yr, d_dout, d_qkv, d_att, B, T, C, NH, 0);
    float mx = 0.0f;
    for (size_t i = 0; i < nqkv; i++) { mx = fmaxf(mx, fabsf(dqkv[i])); }
    compare_abs("attention backward dqkv", from_device_bf16(d_dqkv, nqkv), dqkv, nqkv, 2e-2f * mx, 1.0f / 32);
    free(qkv); free(out); free(att); free(dout); free(dqkv);
    cudaFree(d_qkv); cudaFree(d_out); cudaFree(d_att); cudaFree(d_qkvr); cudaFree(d_scores); cudaFree(d_yr);
    cudaFree(d_dqkvr); cudaFree(d_dqkv); cudaFree(d_dout);
}

static void test_gelu(size_t n) {
    printf("gelu n=%zu\n", n);
    float *x = host_random(n, 3.0f), *y = host_zeros(n), *dout = host_random(n, 1.0f), *dx = host_zeros(n);
    gelu_forward_cpu(y, x, n);
    gelu_backward_cpu(dx, x, dout, n);
    floatX *d_x = to_device_bf16(x, n), *d_y = (floatX*)device_malloc(n * 2, "y"), *d_d = to_device_bf16(dout, n);
    gelu_forward(d_y, d_x, (long)n, 0);
    gelu_backward(d_d, d_x, (long)n, 0);
    compare_abs("gelu forward", from_device_bf16(d_y, n), y, n, 1e-3f, 1.0f / 64);
    compare_abs("gelu backward", from_device_bf16(d_d, n), dx, n, 1e-3f, 1.0f / 64);
    free(x); free(y); free(dout); free(dx);
    cudaFree(d_x); cudaFree(d_y); cudaFree(d_d);
}

// GPT-2's GELU backward fused with the fc bias's column sums (gelu_backward_bias_grad, llmc/column_sums.cuh) against
// gelu_backward + bias_backward on the same device inputs, bit for bit (the gradient and the bias gradient, which
// starts from random values: the sums are added), and against the CPU reference: the gradient within 1e-3 + 2^-6
// relative as test_gelu, the bias gradient within 2^-8 of its column's sum of |g| (the GPU sums the BF16-rounded g).
// scale multiplies the pre-activations; nan_row puts NaN in the last row of the pre-activation: NaN in that row's
// gradient and in every bias gradient, the other rows exact.
static void test_gelu_bias_grad(int N, int C, float scale, bool nan_row) {
    printf("gelu backward + bias gradient N=%d C=%d pre-activation scale %g%s\n", N, C, scale, nan_row ? ", NaN row" : "");
    size_t n = (size_t)N * C;
    float *pre = host_random(n, scale), *d = host_random(n, 1.0f), *dbias0 = host_random(C, 1.0f);
    if (nan_row) { for (int j = 0; j < C; j++) { pre[(size_t)(N - 1) * C + j] = NAN; } }
    float *g = host_zeros(n), *dbias = (float*)malloc_check(C * sizeof(float)), *abs_sum = host_zeros(C);
    gelu_backward_cpu(g, pre, d, n);
    for (int j = 0; j < C; j++) {
        double sum = dbias0[j];
        for (int r = 0; r < N; r++) { sum += g[(size_t)r * C + j]; abs_sum[j] += fabsf(g[(size_t)r * C + j]); }
        dbias[j] = (float)sum;
    }
    floatX *d_pre = to_device_bf16(pre, n), *d_fused = to_device_bf16(d, n), *d_unfused = to_device_bf16(d, n);
    float *d_db_fused = to_device_f32(dbias0, C), *d_db_unfused = to_device_f32(dbias0, C);
    gelu_backward_bias_grad(d_fused, d_db_fused, scratch, d_pre, N, C, 0);
    gelu_backward(d_unfused, d_pre, (long)n, 0);
    bias_backward(d_db_unfused, scratch, d_unfused, N, C, 0);
    compare_bits("gradient: fused = gelu_backward", d_fused, d_unfused, n * sizeof(floatX));
    compare_bits("bias gradient: fused = bias_backward", d_db_fused, d_db_unfused, C * sizeof(float));
    double max_abs_sum = 0.0;
    for (int j = 0; j < C; j++) { max_abs_sum = fmax(max_abs_sum, abs_sum[j]); }
    if (nan_row) {
        compare_rows_nan_last("gradient", from_device_bf16(d_fused, n), g, N - 1, C, 1e-3, 1.0f / 64);
        float* got = from_device_f32(d_db_fused, C);
        int nans = 0;
        for (int j = 0; j < C; j++) { nans += isnan(got[j]); }
        CHECK(nans == C, "bias gradient: a NaN row gave %d NaN sums of %d", nans, C);
        free(got);
    } else {
        compare_abs("gradient", from_device_bf16(d_fused, n), g, n, 1e-3, 1.0f / 64);
        compare_abs("bias gradient", from_device_f32(d_db_fused, C), dbias, C, max_abs_sum / 256, 1e-4f);
    }
    free(pre); free(d); free(dbias0); free(g); free(dbias); free(abs_sum);
    void* bufs[] = {d_pre, d_fused, d_unfused, d_db_fused, d_db_unfused};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
}

typedef void (*CrossEntropyFn)(floatX* logits, float* losses, const int* targets, int N, int V, int Vp, float dloss,
                               cudaStream_t stream);

// the cross-entropy `ce` (named `name`) on logits spread * N(0, 1) in BF16 (spread 0: all zero)
static void test_classifier(const char* name, CrossEntropyFn ce, int N, int V, int Vp, float spread, bool poison_nan) {
    printf("%s N=%d V=%d Vp=%d logits %g * N(0,1)%s\n", name, N, V, Vp, spread, poison_nan ? " (one NaN logit)" : "");
    size_t n = (size_t)N * Vp;
    float *logits = host_random(n, spread), *probs = host_zeros(n), *losses = host_zeros(N), *dlog = host_zeros(n), *dl = host_zeros(N);
    for (int r = 0; r < N; r++) { for (int j = V; j < Vp; j++) { logits[(size_t)r * Vp + j] = 1e4f; } }  // padding must be ignored
    int* targets = (int*)malloc_check(N * sizeof(int));
    for (int r = 0; r < N; r++) { targets[r] = (int)rng_below(&rng, V); }
    if (poison_nan) { logits[3] = NAN; }
    float dloss = 1.0f / N;
    softmax_crossentropy_forward_cpu(losses, probs, logits, targets, 1, N, V, Vp);
    for (int r = 0; r < N; r++) { dl[r] = dloss; }
    crossentropy_softmax_backward_cpu(dlog, dl, probs, targets, 1, N, V, Vp);
    floatX* d_logits = to_device_bf16(logits, n);
    int* d_targets = to_device_int(targets, N);
    float* prior = host_random(N, 1.0f);
    float* d_losses = to_device_f32(prior, N);   // losses accumulate over micro-steps
    for (int r = 0; r < N; r++) { losses[r] += prior[r]; }
    ce(d_logits, d_losses, d_targets, N, V, Vp, dloss, 0);
    float* got = from_device_f32(d_losses, N);
    if (poison_nan) {
        CHECK(isnan(got[0]) && !isnan(got[1]), "a NaN logit gives a NaN loss for its row only (got %g, %g)", got[0], got[1]);
        free(got);
    } else {
        compare_abs("cross-entropy losses", got, losses, N, 1e-4f, 1e-4f);
        compare_abs("cross-entropy dlogits (incl. padding = 0)", from_device_bf16(d_logits, n), dlog, n, 1e-3f * dloss, 1.0f / 64);
    }
    free(logits); free(probs); free(losses); free(dlog); free(dl); free(targets); free(prior);
    cudaFree(d_logits); cudaFree(d_targets); cudaFree(d_losses);
}

static void test_adamw_and_norm(size_t n) {
    printf("adamw + global norm n=%zu\n", n);
    float *p = host_random(n, 0.1f), *g = host_random(n, 0.01f), *m = host_random(n, 0.001f), *v = host_zeros(n);
    for (size_t i = 0; i < n; i++) { v[i] = fabsf(m[i]) * 0.01f; }
    float *d_p = to_device_f32(p, n), *d_g = to_device_f32(g, n), *d_m = to_device_f32(m, n), *d_v = to_device_f32(v, n);
    floatX* d_pb = (floatX*)device_malloc(n * 2, "params");
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) { ss += (double)g[i] * g[i]; }
    global_norm(scratch, d_g, n, 0);
    float* norm = from_device_f32(scratch + norm_blocks, 1);
    CHECK(fabs(norm[0] - sqrt(ss)) <= 1e-5 * sqrt(ss), "global norm %.7g vs %.7g", norm[0], sqrt(ss));
    free(norm);
    float scale = 0.5f;
    for (size_t i = 0; i < n; i++) { g[i] *= scale; }
    adamw_update_cpu(p, g, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7);
    adamw_update(d_pb, d_p, d_g, d_m, d_v, n, 1e-3f, 0.9f, 0.95f, 7, 1e-8f, 0.1f, scale, 0);
    float* got_bf16 = from_device_bf16(d_pb, n);
    compare_abs("adamw master weights", from_device_f32(d_p, n), p, n, 1e-7f, 1e-5f);
    compare_abs("adamw m", from_device_f32(d_m, n), m, n, 1e-9f, 1e-5f);
    compare_abs("adamw v", from_device_f32(d_v, n), v, n, 1e-12f, 1e-5f);
    compare_abs("adamw BF16 copy", got_bf16, p, n, 0.0f, 1.0f / 256);
    free(p); free(g); free(m); free(v);
    cudaFree(d_p); cudaFree(d_g); cudaFree(d_m); cudaFree(d_v); cudaFree(d_pb);
}

// AdamW's 4-wide kernel (what adamw_update runs on aligned tensors of a multiple of 4) against the 1-wide one on the
// same inputs, bit for bit in the master weights, m, v and the BF16 copy; the gradients include zeros, 1e30 and a NaN
static void test_adamw_vector(size_t n) {
    printf("adamw 4-wide = 1-wide n=%zu\n", n);
    float *p = host_random(n, 0.1f), *g = host_random(n, 0.01f), *m = host_random(n, 0.001f), *v = host_zeros(n);
    for (size_t i = 0; i < n; i++) { v[i] = fabsf(m[i]) * 0.01f; }
    for (size_t i = 0; i < n; i += 97) { g[i] = 0.0f; }
    g[5] = 1e30f; g[n - 2] = NAN;
    float *wide[4], *narrow[4], *host[4] = {p, g, m, v};
    for (int k = 0; k < 4; k++) { wide[k] = to_device_f32(host[k], n); narrow[k] = to_device_f32(host[k], n); }
    floatX *pb_wide = (floatX*)device_malloc(n * 2, "params"), *pb_narrow = (floatX*)device_malloc(n * 2, "params");
    AdamWStep a = {1e-3f, 0.9f, 0.95f, 1.0f - powf(0.9f, 7.0f), 1.0f - powf(0.95f, 7.0f), 1e-8f, 0.1f, 0.5f};
    adamw_kernel<4><<<ceil_div((long)(n / 4), 256), 256>>>(pb_wide, wide[0], wide[1], wide[2], wide[3], n, a);
    adamw_kernel<1><<<ceil_div((long)n, 512), 512>>>(pb_narrow, narrow[0], narrow[1], narrow[2], narrow[3], n, a);
    cudaCheckLaunch();
    compare_bits("adamw master: 4-wide = 1-wide", wide[0], narrow[0], n * sizeof(float));
    compare_bits("adamw m: 4-wide = 1-wide", wide[2], narrow[2], n * sizeof(float));
    compare_bits("adamw v: 4-wide = 1-wide", wide[3], narrow[3], n * sizeof(float));
    compare_bits("adamw BF16 copy: 4-wide = 1-wide", pb_wide, pb_narrow, n * sizeof(floatX));
    for (int k = 0; k < 4; k++) { free(host[k]); cudaCheck(cudaFree(wide[k])); cudaCheck(cudaFree(narrow[k])); }
    cudaCheck(cudaFree(pb_wide));
    cudaCheck(cudaFree(pb_narrow));
}

// the whole backward path must give identical bits on a repeat: check column sums and the encoder backward
static void test_determinism(int N, int C) {
    printf("determinism N=%d C=%d\n", N, C);
    size_t n = (size_t)N * C;
    float* x = host_random(n, 1.0f);
    floatX* d_x = to_device_bf16(x, n);
    float *d_a = (float*)device_malloc(C * 4, "a"), *d_b = (float*)device_malloc(C * 4, "b");
    cudaCheck(cudaMemset(d_a, 0, C * 4));
    cudaCheck(cudaMemset(d_b, 0, C * 4));
    bias_backward(d_a, scratch, d_x, N, C, 0);
    bias_backward(d_b, scratch, d_x, N, C, 0);
    float *a = from_device_f32(d_a, C), *b = from_device_f32(d_b, C);
    CHECK(memcmp(a, b, C * sizeof(float)) == 0, "column sums differ between two identical runs");
    free(x); free(a); free(b);
    cudaFree(d_x); cudaFree(d_a); cudaFree(d_b);
}

// the channel recomputations of the AdaHOP backward (k channels of a LayerNorm / GELU output, channel-major)
// against the full forward output gathered at the same channels: bit for bit, on random channel indices
static void test_channel_recompute(int N, int C, int k) {
    printf("channel recompute N=%d C=%d k=%d\n", N, C, k);
    size_t n = (size_t)N * C;
    float *x = host_random(n, 4.0f), *w = host_random(C, 1.0f), *bias = host_random(C, 1.0f);
    int* idx = (int*)malloc_check(k * sizeof(int));
    for (int j = 0; j < k; j++) { idx[j] = (int)rng_below(&rng, (uint64_t)C); }
    floatX *d_x = to_device_bf16(x, n), *d_w = to_device_bf16(w, C), *d_bias = to_device_bf16(bias, C);
    floatX *d_full = (floatX*)device_malloc(n * sizeof(floatX), "full"), *d_ch = (floatX*)device_malloc((size_t)k * N * sizeof(floatX), "channels");
    floatX* d_want = (floatX*)device_malloc((size_t)k * N * sizeof(floatX), "gathered");
    float *d_mean = (float*)device_malloc(N * sizeof(float), "mean"), *d_rstd = (float*)device_malloc(N * sizeof(float), "rstd");
    int* d_idx = to_device_int(idx, k);
    const char* names[2] = {"layernorm channels (bit for bit)", "gelu channels (bit for bit)"};
    for (int op = 0; op < 2; op++) {
        if (op == 0) {
            layernorm_forward(d_full, d_mean, d_rstd, NULL, d_x, NULL, d_w, d_bias, N, C, 0);
            layernorm_forward_channels(d_ch, d_x, d_mean, d_rstd, d_w, d_bias, d_idx, k, N, C, 0);
        } else {
            gelu_forward(d_full, d_x, (long)n, 0);
            gelu_forward_channels(d_ch, d_x, d_idx, k, N, C, 0);
        }
        gather_cols_kernel<<<ceil_div((long)k * N, 256), 256>>>(d_want, d_full, d_idx, k, N, C);
        cudaCheckLaunch();
        float* want = from_device_bf16(d_want, (size_t)k * N);
        compare_abs(names[op], from_device_bf16(d_ch, (size_t)k * N), want, (size_t)k * N, 0.0f, 0.0f);
        free(want);
    }
    free(x); free(w); free(bias); free(idx);
    void* bufs[] = {d_x, d_w, d_bias, d_full, d_ch, d_want, d_mean, d_rstd, d_idx};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
}

int main(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: the kernel tests need one"); }
    seed_fresh_rng();
    matmul_init();
    scratch = (float*)device_malloc(column_sums_scratch_bytes(4 * 1600), "scratch");
    test_encoder(2, 24, 64, 50);
    test_encoder(4, 64, 768, 1000);
    test_layernorm(37, 64, 1.0f, false);
    test_layernorm(256, 768, 1.0f, true);
    test_layernorm(100, 1600, 300.0f, false);
    test_layernorm_backward_fused(1000, 768, 1.0f, false);
    test_layernorm_backward_fused(37, 776, 1.0f, false);      // rows fewer than the chunks, columns not a multiple of 256
    test_layernorm_backward_fused(4097, 1600, 1.0f, false);   // d48's width
    test_layernorm_backward_fused(300, 1024, 300.0f, false);  // huge inputs
    test_layernorm_backward_fused(65, 1024, 1.0f, true);
    test_linear(64, 64, 192);
    test_linear(512, 768, 2304);
    test_linear(200, 3072, 768);
    test_gemm_timed(512, 768, 2304);
    test_gemm_timed(200, 64, 192);
    test_linear_gelu(37, 64, 192, 1.0f, false);
    test_linear_gelu(512, 768, 3072, 1.0f, false);
    test_linear_gelu(200, 3072, 768, 1.0f, false);
    test_linear_gelu(64, 768, 3072, 0.0f, false);
    test_linear_gelu(64, 768, 3072, 300.0f, false);
    test_linear_gelu(65, 256, 1024, 1.0f, true);
    test_attention(2, 64, 128, 4, 1.0f);
    test_attention(1, 24, 64, 2, 6.0f);
    test_attention(2, 256, 768, 12, 2.0f);
    test_gelu(8 * 1000);
    test_gelu_bias_grad(1000, 3072, 3.0f, false);
    test_gelu_bias_grad(37, 776, 1.0f, false);      // rows fewer than the chunks, columns not a multiple of 256
    test_gelu_bias_grad(4097, 6400, 1.0f, false);   // d48's fc width
    test_gelu_bias_grad(300, 1024, 300.0f, false);  // huge pre-activations: gelu' is 0 or 1
    test_gelu_bias_grad(65, 3072, 1.0f, true);
    test_channel_recompute(96, 768, 64);
    test_channel_recompute(200, 3072, 7);
    struct { const char* name; CrossEntropyFn ce; } ces[] = {{"softmax_crossentropy", softmax_crossentropy},
                                                               {"softmax_crossentropy_scalar", softmax_crossentropy_scalar}};
    for (size_t i = 0; i < sizeof(ces) / sizeof(ces[0]); i++) {
        test_classifier(ces[i].name, ces[i].ce, 64, 1000, 1024, 4.0f, false);
        test_classifier(ces[i].name, ces[i].ce, 8, 50257, 50304, 4.0f, false);
        test_classifier(ces[i].name, ces[i].ce, 4, 50304, 50304, 80.0f, false);   // no padding; most exponentials underflow
        test_classifier(ces[i].name, ces[i].ce, 16, 7, 8, 4.0f, false);           // fewer 16-byte vectors than threads
        test_classifier(ces[i].name, ces[i].ce, 4, 3000, 3072, 0.0f, false);      // all equal: loss ln(V)
        test_classifier(ces[i].name, ces[i].ce, 4, 100, 128, 4.0f, true);
    }
    test_adamw_and_norm(1000003);   // the 1-wide kernel
    test_adamw_and_norm(1000000);   // the 4-wide kernel
    test_adamw_vector(1000000);
    test_determinism(4096, 768);
    matmul_free();
    return test_summary("test_kernels");
}
