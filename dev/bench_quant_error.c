// CPU benchmark of quantization error: relative Frobenius error ||A B^T - Q(A) Q(B)^T|| / ||A B^T|| of the
// MXFP4 variants for operands with different outlier structure, with the pattern AdaHOP's classifier sees and
// the strategy it would pick. Deterministic: the seed and sizes are printed.
// Build: gcc -O2 -std=gnu11 -Wall -Wextra -fopenmp -I. dev/bench_quant_error.c -o build/bench_quant_error -lm
#include "llmc/utils.h"
#include "llmc/rand.h"
#include "llmc/adahop_cpu.h"

enum { M = 256, N = 256, K = 1024, OE_K = 8, NUM_OUTLIERS = 4 };
static const uint64_t SEED = 1337;

enum { CASE_GAUSS, CASE_STUDENT, CASE_K_CHANNELS, CASE_ROWS, NUM_CASES };
static const char* case_names[NUM_CASES] = {"(a) Gaussian", "(b) Student-t (3 dof)", "(c) A: 4 K-channels x30",
                                            "(d) A: 4 rows x30"};
static const char* pattern_names[3] = {"None", "Row", "Col"};
static const char* strategy_names[4] = {"IHT", "IHT+OE rows A", "IHT+OE cols B", "BF16"};

// Student-t sample with 3 degrees of freedom: z / sqrt(chi2_3 / 3)
static float student_t3(Rng* r) {
    double chi2 = 0.0;
    for (int i = 0; i < 3; i++) { double g = rng_normal(r); chi2 += g * g; }
    return (float)(rng_normal(r) / sqrt(chi2 / 3.0));
}

// fills a [rows x K] operand: Gaussian or Student-t
static void fill(float* x, int rows, int heavy, Rng* r) {
    for (size_t i = 0; i < (size_t)rows * K; i++) { x[i] = heavy ? student_t3(r) : rng_normal(r); }
}

// relative Frobenius distance of got from want
static double rel_err(const double* got, const double* want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) { num += (got[i] - want[i]) * (got[i] - want[i]); den += want[i] * want[i]; }
    return sqrt(num / den);
}

int main(void) {
    Rng r;
    rng_seed(&r, SEED);
    float *A = (float*)malloc_check((size_t)M * K * sizeof(float)), *B = (float*)malloc_check((size_t)N * K * sizeof(float));
    double *exact = (double*)malloc_check((size_t)M * N * 8), *q = (double*)malloc_check((size_t)M * N * 8);
    printf("relative Frobenius error ||AB^T - Q(A)Q(B)^T|| / ||AB^T||, A [%d x %d], B [%d x %d] (both quantized along K=%d)\n",
           M, K, N, K, K);
    printf("seed %llu, OE k = %d rows of A, %d outlier channels/rows, round-to-nearest everywhere\n\n",
           (unsigned long long)SEED, OE_K, NUM_OUTLIERS);
    printf("%-24s | %9s | %9s | %9s | %9s | %-10s | %s\n", "operands", "MXFP4 OCP", "round-up", "IHT", "IHT + OE",
           "pattern A/B", "AdaHOP picks");
    for (int c = 0; c < NUM_CASES; c++) {
        fill(A, M, c == CASE_STUDENT, &r);
        fill(B, N, c == CASE_STUDENT, &r);
        for (int j = 0; j < NUM_OUTLIERS; j++) {
            int ch = 100 + 229 * j, row = 10 + 61 * j;
            if (c == CASE_K_CHANNELS) { for (int i = 0; i < M; i++) { A[(size_t)i * K + ch] *= 30.0f; } }
            if (c == CASE_ROWS) { for (int k = 0; k < K; k++) { A[(size_t)row * K + k] *= 30.0f; } }
        }
        gemm_nt_f64(exact, A, B, M, N, K);
        double err[4];
        mx_gemm_nt_ref(q, A, B, M, N, K, 0, MX_SCALE_OCP);
        err[0] = rel_err(q, exact, (size_t)M * N);
        mx_gemm_nt_ref(q, A, B, M, N, K, 0, MX_SCALE_ROUNDUP);
        err[1] = rel_err(q, exact, (size_t)M * N);
        adahop_gemm_nt_ref(q, A, B, M, N, K, STRAT_IHT, OE_K, MX_SCALE_OCP);
        err[2] = rel_err(q, exact, (size_t)M * N);
        adahop_gemm_nt_ref(q, A, B, M, N, K, STRAT_IHT_OE_ROWS_A, OE_K, MX_SCALE_OCP);
        err[3] = rel_err(q, exact, (size_t)M * N);
        int pa = tensor_pattern_cpu(A, M, K), pb = pattern_transpose(tensor_pattern_cpu(B, N, K));   // B^T as [K x N]
        char pats[32];
        snprintf(pats, sizeof(pats), "%s / %s", pattern_names[pa], pattern_names[pb]);
        printf("%-24s | %9.5f | %9.5f | %9.5f | %9.5f | %-11s | %s\n", case_names[c], err[0], err[1], err[2], err[3], pats,
               strategy_names[adahop_strategy(pa, pb)]);
    }
    free(A); free(B); free(exact); free(q);
    return 0;
}
