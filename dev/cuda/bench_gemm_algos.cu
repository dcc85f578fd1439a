// The GPT-2 trainer's BF16 GEMMs (the block linears' forward, dX and dW, and the classifier's, as llmc/matmul.cuh
// runs them) at d12 B64, d24 B32 and d48 B16 (T = 1024): cuBLASLt's first choice (the trainer's -a 0) against the
// fastest of its heuristic list (what -a 1 picks by timing), each GEMM's time weighted by how often a step runs it.
// Says how much of a step the choice by timing can win.
// Usage: build/bench_gemm_algos [repeats]
#include "dev/cuda/bench_common.cuh"

#define MAX_ALGOS 16

typedef struct { const char* name; int m, n, k; bool trans_a, trans_b, d_fp32, bias; float beta; int per_step; } GemmShape;

// the time of the first choice and of the fastest heuristic algorithm of one GEMM shape, in ms; prints a line
static void time_shape(const GemmShape* s, floatX* a, floatX* b, floatX* bias, void* d, int reps, float* first_ms, float* best_ms) {
    GemmSpec g = matmul_spec(d, s->d_fp32, a, b, s->bias ? bias : NULL, s->m, s->n, s->k, s->trans_a, s->trans_b, s->beta,
                             gemm_single);
    GemmPlan p = gemm_plan_create(&g);
    cublasLtMatmulHeuristicResult_t algos[MAX_ALGOS];
    int found = gemm_plan_algos(&p, algos, MAX_ALGOS), best = 0;
    float times[MAX_ALGOS];
    for (int i = 0; i < found; i++) {
        times[i] = time_ms([&] { gemm_plan_run(&p, &g, &algos[i].algo, 0); }, reps);
        if (times[i] < times[best]) { best = i; }
    }
    gemm_plan_destroy(&p);
    if (found == 0) { die("cuBLASLt has no algorithm for %s", s->name); }
    double tflops = 2.0 * s->m * (double)s->n * s->k / (times[0] * 1e9);
    printf("  %-14s m %5d n %5d k %5d  x%-3d first %7.3f ms (%4.0f TFLOP/s)  best rank %2d of %2d %7.3f ms  %5.3fx\n", s->name,
           s->m, s->n, s->k, s->per_step, times[0], tflops, best, found, times[best], times[0] / times[best]);
    *first_ms = times[0];
    *best_ms = times[best];
}

int main(int argc, char** argv) {
    int reps = bench_start(argc, argv);
    struct { const char* name; int L, B, C; } models[] = {{"d12 B64", 12, 64, 768}, {"d24 B32", 24, 32, 1024}, {"d48 B16", 48, 16, 1600}};
    const int T = 1024, V = 50304;
    for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
        int L = models[mi].L, N = models[mi].B * T, C = models[mi].C;
        printf("%s: N %d, C %d, %d layers\n", models[mi].name, N, C, L);
        // forward y = x W^T (+ b): m = OC, n = N, k = IC; dX = dy W: m = IC, n = N, k = OC; dW += x^T dy: m = IC, n = OC, k = N
        struct { const char* name; int ic, oc, per_step; bool bias; } lin[] = {
            {"qkv", C, 3 * C, L, true}, {"attproj", C, C, L, true}, {"fc", C, 4 * C, L, true}, {"fcproj", 4 * C, C, L, true},
            {"head", C, V, 1, false}};
        int nlin = sizeof(lin) / sizeof(lin[0]);
        long max_elems = (long)N * V;
        floatX *a = random_bf16(max_elems, 1, 0.05f), *b = random_bf16(max_elems, 2, 1.0f), *bias = random_bf16(V, 3, 0.1f);
        void* d = NULL;
        cudaCheck(cudaMalloc(&d, max_elems * sizeof(float)));
        cudaCheck(cudaMemset(d, 0, max_elems * sizeof(float)));
        double step_first = 0.0, step_best = 0.0;
        char name[3][32];
        for (int i = 0; i < nlin; i++) {
            snprintf(name[0], 32, "%s fwd", lin[i].name);
            snprintf(name[1], 32, "%s dX", lin[i].name);
            snprintf(name[2], 32, "%s dW", lin[i].name);
            GemmShape shapes[3] = {
                {name[0], lin[i].oc, N, lin[i].ic, true, false, false, lin[i].bias, 0.0f, lin[i].per_step},
                {name[1], lin[i].ic, N, lin[i].oc, false, false, false, false, 0.0f, lin[i].per_step},
                {name[2], lin[i].ic, lin[i].oc, N, false, true, true, false, 1.0f, lin[i].per_step}};
            for (int j = 0; j < 3; j++) {
                float first, best;
                time_shape(&shapes[j], a, b, bias, d, reps, &first, &best);
                step_first += first * shapes[j].per_step;
                step_best += best * shapes[j].per_step;
            }
        }
        printf("  a step's GEMMs: first choices %.1f ms, fastest choices %.1f ms (%.3fx)\n", step_first, step_best,
               step_first / step_best);
        cudaCheck(cudaFree(a));
        cudaCheck(cudaFree(b));
        cudaCheck(cudaFree(bias));
        cudaCheck(cudaFree(d));
    }
    return 0;
}
