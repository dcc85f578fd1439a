// FP8 (E4M3) GEMMs through cuBLASLt on the GPT-2 linear shapes with two ways of scaling the operands:
// one FP32 scale per row of each operand (OUTER_VEC_32F, what the fast MXFP4 path uses: re-expressing
// MXFP4 in it needs the maximum block scale of the whole row first) and one FP32 scale per 128 elements along K
// (VEC128_32F on both operands: each 128-element group could be written on its own, in one pass). For each
// shape: whether cuBLASLt runs it, which scale layout it reads ([K/128 x rows] with rows fastest, or [rows x
// K/128]; found by comparing a corner of the output with a direct sum), and the time against BF16; for reference
// also one scale per tensor (SCALAR_32F, which cannot hold MXFP4 exactly), and whether another of cuBLASLt's
// heuristic algorithms than its first choice runs BF16 or per-row FP8 faster (the trainer takes the first).
// Usage: build/bench_fp8_scaling [repeats]
#include <cuda_fp8.h>
#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"
#include "dev/cuda/bench_common.cuh"

// x[i] = a hashed value in [-4, 4) as E4M3 (exact: a multiple of 1/8)
__global__ void fill_e4m3_kernel(__nv_fp8_e4m3* x, long n, uint32_t seed) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 0x2c1b3c6du; h ^= h >> 12;
    x[i] = __nv_fp8_e4m3((float)((int)(h % 64) - 32) / 8.0f);
}

// s[i] = a hashed power of two in [2^-3, 2^3], so that a wrong scale layout shows in the output
__global__ void fill_scales_kernel(float* s, long n, uint32_t seed) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    uint32_t h = (uint32_t)i * 2246822519u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    s[i] = exp2f((float)((int)(h % 7) - 3));
}

// out[i, j] = sum_k a[i, k] sa(i, k) b[j, k] sb(j, k) for i < rows_a, j < rows_b of a corner; the scale of row r,
// group g is s[g * rows + r] when rows_fastest, else s[r * groups + g]. Traffic: negligible (a 64 x 64 corner).
__global__ void corner_reference_kernel(float* out, const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b, const float* sa,
                                        const float* sb, int M, int N, int K, int corner, bool rows_fastest) {
    int i = blockIdx.x, j = threadIdx.x, groups = (K + 127) / 128;
    if (i >= corner || j >= corner) { return; }
    double acc = 0.0;
    for (int k = 0; k < K; k++) {
        int g = k / 128;
        float s_a = rows_fastest ? sa[(size_t)g * M + i] : sa[(size_t)i * groups + g];
        float s_b = rows_fastest ? sb[(size_t)g * N + j] : sb[(size_t)j * groups + g];
        acc += (double)(float)a[(size_t)i * K + k] * s_a * (double)(float)b[(size_t)j * K + k] * s_b;
    }
    out[i * corner + j] = (float)acc;
}

// largest |got - want| over the corner, relative to the largest |want|
static double corner_error(const floatX* d_out, int N, const float* d_ref, int corner) {
    float* ref = (float*)malloc_check((size_t)corner * corner * sizeof(float));
    floatX* got = (floatX*)malloc_check((size_t)corner * N * sizeof(floatX));
    cudaCheck(cudaMemcpy(ref, d_ref, (size_t)corner * corner * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(got, d_out, (size_t)corner * N * sizeof(floatX), cudaMemcpyDeviceToHost));
    double worst = 0.0, scale = 0.0;
    for (int i = 0; i < corner; i++) {
        for (int j = 0; j < corner; j++) {
            double w = ref[i * corner + j];
            scale = fmax(scale, fabs(w));
            worst = fmax(worst, fabs((double)(float)got[(size_t)i * N + j] - w));
        }
    }
    free(ref); free(got);
    return worst / (scale > 0.0 ? scale : 1.0);
}

#define BENCH_MAX_ALGOS 8
// the fastest of cuBLASLt's first BENCH_MAX_ALGOS heuristic algorithms for g: its time in ms (-1 when none runs) and
// its rank in the heuristic's order
static float fastest_algo_ms(const GemmSpec& g, int reps, int* rank) {
    GemmPlan p = gemm_plan_create(&g);
    cublasLtMatmulHeuristicResult_t algos[BENCH_MAX_ALGOS];
    int n = gemm_plan_algos(&p, algos, BENCH_MAX_ALGOS);
    float best = -1.0f;
    *rank = -1;
    for (int r = 0; r < n; r++) {
        float t = time_ms([&] { gemm_plan_run(&p, &g, &algos[r].algo, 0); }, reps);
        if (best < 0.0f || t < best) { best = t; *rank = r; }
    }
    gemm_plan_destroy(&p);
    return best;
}

int main(int argc, char** argv) {
    int reps = bench_start(argc, argv);
    // M = rows of A (tokens), N = rows of B (output features), K = the reduction
    const int shapes[][3] = {{65536, 2304, 768}, {65536, 3072, 768}, {65536, 768, 3072}, {32768, 1024, 4096},
                             {32768, 6400, 1600}, {32768, 1600, 6400}, {768, 3072, 65536}};
    const int corner = 64;
    printf("| M x N x K | BF16 ms | per-row scales / BF16 (time) | per-128 scales / BF16 (time) | per-128 scale layout |"
           " one scale per tensor / BF16 | fastest of 8 algorithms: BF16 ms (rank), per-row / that BF16 (rank) |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], groups = ceil_div(K, 128);
        __nv_fp8_e4m3* a = (__nv_fp8_e4m3*)device_malloc((size_t)M * K, "A");
        __nv_fp8_e4m3* b = (__nv_fp8_e4m3*)device_malloc((size_t)N * K, "B");
        float* sa = (float*)device_malloc((size_t)M * groups * sizeof(float), "A scales");
        float* sb = (float*)device_malloc((size_t)N * groups * sizeof(float), "B scales");
        floatX *out = (floatX*)device_malloc((size_t)M * N * sizeof(floatX), "out");
        floatX *a16 = (floatX*)device_malloc((size_t)M * K * sizeof(floatX), "A bf16"), *b16 = (floatX*)device_malloc((size_t)N * K * sizeof(floatX), "B bf16");
        float* ref = (float*)device_malloc((size_t)corner * corner * sizeof(float), "corner");
        fill_e4m3_kernel<<<ceil_div((long)M * K, 256), 256>>>(a, (long)M * K, 1);
        fill_e4m3_kernel<<<ceil_div((long)N * K, 256), 256>>>(b, (long)N * K, 2);
        fill_scales_kernel<<<ceil_div((long)M * groups, 256), 256>>>(sa, (long)M * groups, 3);
        fill_scales_kernel<<<ceil_div((long)N * groups, 256), 256>>>(sb, (long)N * groups, 4);
        cudaCheckLaunch();
        cudaCheck(cudaMemset(a16, 0, (size_t)M * K * sizeof(floatX)));
        cudaCheck(cudaMemset(b16, 0, (size_t)N * K * sizeof(floatX)));
        float t_bf16 = time_ms([&] { matmul(out, false, b16, a16, NULL, N, M, K, true, false, 0.0f, gemm_single, 0); }, reps);
        GemmSpec g = {.d = out, .d_type = CUDA_R_16BF, .a = b, .b = a, .ab_type = CUDA_R_8F_E4M3, .bias = NULL, .m = N, .n = M,
                      .k = K, .trans_a = true, .trans_b = false, .beta = 0.0f, .batch = gemm_single,
                      .scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, .a_scale = sb, .b_scale = sa,
                      .epilogue = GEMM_EPILOGUE_NONE};
        float t_row = cublaslt_gemm_try(&g, 0) ? time_ms([&] { cublaslt_gemm_try(&g, 0); }, reps) : -1.0f;
        g.scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        char layout[64] = "not run";
        float t_blk = -1.0f;
        if (cublaslt_gemm_try(&g, 0)) {
            double err[2];
            for (int rows_fastest = 0; rows_fastest < 2; rows_fastest++) {
                corner_reference_kernel<<<corner, corner>>>(ref, a, b, sa, sb, M, N, K, corner, rows_fastest);
                cudaCheckLaunch();
                err[rows_fastest] = corner_error(out, N, ref, corner);
            }
            int best = err[1] < err[0];
            snprintf(layout, sizeof(layout), "%s (rel. err %.1e; other %.1e)", best ? "[K/128 x rows]" : "[rows x K/128]",
                     err[best], err[!best]);
            t_blk = time_ms([&] { cublaslt_gemm_try(&g, 0); }, reps);
        }
        g.scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;   // sa[0], sb[0]
        float t_tensor = cublaslt_gemm_try(&g, 0) ? time_ms([&] { cublaslt_gemm_try(&g, 0); }, reps) : -1.0f;
        g.scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        GemmSpec g16 = {out, CUDA_R_16BF, b16, a16, CUDA_R_16BF, NULL, N, M, K, true, false, 0.0f, gemm_single, -1, NULL, NULL};
        int rank16, rank8;
        float t_bf16_best = fastest_algo_ms(g16, reps, &rank16), t_row_best = fastest_algo_ms(g, reps, &rank8);
        printf("| %d x %d x %d | %.3f | %s%.2f | %s%.2f | %s | %s%.2f | %.3f (%d), %.2f (%d) |\n", M, N, K, t_bf16,
               t_row < 0 ? "unsupported " : "", t_row / t_bf16, t_blk < 0 ? "unsupported " : "", t_blk / t_bf16, layout,
               t_tensor < 0 ? "unsupported " : "", t_tensor / t_bf16, t_bf16_best, rank16, t_row_best / t_bf16_best, rank8);
        void* bufs[] = {a, b, sa, sb, out, a16, b16, ref};
        for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
    }
    matmul_free();
    return 0;
}
