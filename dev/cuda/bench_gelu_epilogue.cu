// The GPT-2 MLP's GELU inside cuBLASLt's GEMM epilogues (llmc/matmul.cuh) against the GEMM followed by our GELU
// kernel (llmc/gelu.cuh), at the fc shapes of d12 B64, d24 B32 and d48 B16 (T = 1024):
//   forward:  fc GEMM + bias, then gelu_forward            vs  GELU_AUX_BIAS (writes gelu and the pre-activation)
//   backward: fc-projection dX GEMM, then gelu_backward    vs  DGELU (the product times gelu'(pre-activation))
// For each fused form, every algorithm of cuBLASLt's heuristic list is timed (rank 0 is what the trainer runs), with
// its configuration (tile, stages, split-K, cluster shape ids), and the plain GEMM's first choice run with the epilogue.
// Usage: build/bench_gelu_epilogue [repeats]
#include "dev/cuda/bench_common.cuh"
#include "llmc/gelu.cuh"

#define MAX_ALGOS 8

// "tile T stages S splitK K cluster C" of an algorithm, into buf
static const char* algo_config(const cublasLtMatmulAlgo_t* algo, char* buf, size_t n) {
    uint32_t tile = 0, stages = 0;
    int32_t splitk = 0;
    uint16_t cluster = 0;
    size_t written;
    cublasCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &written));
    cublasCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &written));
    cublasCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &written));
    cublasCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster), &written));
    snprintf(buf, n, "tile %u stages %u splitK %d cluster %u", tile, stages, splitk, (unsigned)cluster);
    return buf;
}

// times every heuristic algorithm of g and prints each against base_ms
static void time_algos(const char* what, const GemmSpec* g, float base_ms, int reps) {
    GemmPlan p = gemm_plan_create(g);
    cublasLtMatmulHeuristicResult_t algos[MAX_ALGOS];
    int found = gemm_plan_algos(&p, algos, MAX_ALGOS);
    char cfg[96];
    for (int i = 0; i < found; i++) {
        float ms = time_ms([&] { gemm_plan_run(&p, g, &algos[i].algo, 0); }, reps);
        printf("  %-26s rank %d  %7.3f ms  %5.2fx   (%s)\n", what, i, ms, base_ms / ms, algo_config(&algos[i].algo, cfg, sizeof(cfg)));
    }
    if (found == 0) { printf("  %-26s cuBLASLt has no algorithm\n", what); }
    gemm_plan_destroy(&p);
}

// the first choice's configuration of the plain GEMM g, then the fused GEMM `fused` run with that same algorithm
// where cuBLASLt accepts it for the epilogue (cublasLtMatmulAlgoCheck), timed against base_ms
static void time_plain_choice(const char* what, const GemmSpec* g, const GemmSpec* fused, float base_ms, int reps) {
    GemmPlan p = gemm_plan_create(g), pf = gemm_plan_create(fused);
    cublasLtMatmulHeuristicResult_t first, check;
    char cfg[96];
    if (gemm_plan_algos(&p, &first, 1) == 1) {
        printf("  %-26s (%s)\n", what, algo_config(&first.algo, cfg, sizeof(cfg)));
        if (cublasLtMatmulAlgoCheck(cublaslt_handle, pf.desc, pf.la, pf.lb, pf.ld, pf.ld, &first.algo, &check) == CUBLAS_STATUS_SUCCESS &&
            check.workspaceSize <= cublaslt_workspace_size) {
            float ms = time_ms([&] { gemm_plan_run(&pf, fused, &first.algo, 0); }, reps);
            printf("  %-26s %7.3f ms  %5.2fx   (the plain GEMM's algorithm with the epilogue)\n", "  fused, same algorithm", ms, base_ms / ms);
        } else {
            printf("  %-26s cuBLASLt rejects the plain GEMM's algorithm with the epilogue\n", "  fused, same algorithm");
        }
    }
    gemm_plan_destroy(&p);
    gemm_plan_destroy(&pf);
}

int main(int argc, char** argv) {
    int reps = bench_start(argc, argv);
    struct { const char* name; int N, C, H; } shapes[] = {{"d12 B64", 65536, 768, 3072}, {"d24 B32", 32768, 1024, 4096},
                                                           {"d48 B16", 16384, 1600, 6400}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int N = shapes[s].N, C = shapes[s].C, H = shapes[s].H;
        long nh = (long)N * H;
        printf("%s: N %d, C %d, hidden %d\n", shapes[s].name, N, C, H);
        floatX *x = random_bf16((long)N * C, 1, 1.0f), *w_fc = random_bf16((long)H * C, 2, 0.05f), *b_fc = random_bf16(H, 3, 0.1f);
        floatX *w_proj = random_bf16((long)C * H, 4, 0.05f), *dout = random_bf16((long)N * C, 5, 1.0f);
        floatX *pre = random_bf16(nh, 6, 2.0f), *act = random_bf16(nh, 7, 1.0f), *d = random_bf16(nh, 8, 1.0f);

        // forward: pre = x W_fc^T + b, act = gelu(pre)
        GemmSpec plain = matmul_spec(pre, false, w_fc, x, b_fc, H, N, C, true, false, 0.0f, gemm_single);
        float gemm_ms = time_ms([&] { cublaslt_gemm(&plain, 0); }, reps);
        float base = time_ms([&] { cublaslt_gemm(&plain, 0); gelu_forward(act, pre, nh, 0); }, reps);
        printf("  forward GEMM alone          %7.3f ms\n  forward GEMM + gelu_forward %7.3f ms\n", gemm_ms, base);
        GemmSpec fused = plain;
        fused.d = act;
        fused.epilogue = GEMM_EPILOGUE_GELU;
        fused.aux = pre;
        time_plain_choice("forward plain GEMM", &plain, &fused, base, reps);
        time_algos("forward GELU_AUX_BIAS", &fused, base, reps);

        // backward: d = (dout W_proj) * gelu'(pre)
        GemmSpec plain_dx = matmul_spec(d, false, w_proj, dout, NULL, H, N, C, false, false, 0.0f, gemm_single);
        gemm_ms = time_ms([&] { cublaslt_gemm(&plain_dx, 0); }, reps);
        base = time_ms([&] { cublaslt_gemm(&plain_dx, 0); gelu_backward(d, pre, nh, 0); }, reps);
        printf("  dX GEMM alone               %7.3f ms\n  dX GEMM + gelu_backward     %7.3f ms\n", gemm_ms, base);
        GemmSpec fused_dx = plain_dx;
        fused_dx.epilogue = GEMM_EPILOGUE_DGELU;
        fused_dx.aux = pre;
        time_plain_choice("dX plain GEMM", &plain_dx, &fused_dx, base, reps);
        time_algos("backward DGELU", &fused_dx, base, reps);
        floatX* bufs[] = {x, w_fc, b_fc, w_proj, dout, pre, act, d};
        for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
    }
    matmul_free();
    return 0;
}
