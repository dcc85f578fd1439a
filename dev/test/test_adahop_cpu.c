// CPU tests of llmc/adahop_cpu.h, the tensor-level AdaHOP reference: row / column quantization (the column
// form is the row form of the transpose, bit for bit, for every option), exact round trips, stochastic
// rounding over a tensor, the E4M3 re-expression, pattern statistics and classification, the strategy
// table, top-k, the reference products with outlier extraction, and the refusal of unsupported shapes.
#include "llmc/utils.h"
#include "llmc/rand.h"
#include "llmc/adahop_cpu.h"
#include "dev/test/test_common.h"

static Rng rng;

// a fresh [R x C] Gaussian tensor; rows (cols) with index % every == 1 scaled by `factor` when every > 0
static float* gaussian(int R, int C, int row_every, int col_every, float factor) {
    float* x = (float*)malloc_check((size_t)R * C * sizeof(float));
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) {
            float f = (row_every > 0 && r % row_every == 1) || (col_every > 0 && c % col_every == 1) ? factor : 1.0f;
            x[(size_t)r * C + c] = rng_normal(&rng) * f;
        }
    }
    return x;
}

// 1 if the two tensors hold the same codes and scales
static int same_tensor(const MXTensor* a, const MXTensor* b) {
    size_t n = (size_t)a->rows * a->K;
    return a->rows == b->rows && a->K == b->K && memcmp(a->codes, b->codes, n / 2) == 0 && memcmp(a->scales, b->scales, n / 32) == 0;
}

// relative Frobenius distance of got from want
static double rel_err(const double* got, const double* want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) { num += (got[i] - want[i]) * (got[i] - want[i]); den += want[i] * want[i]; }
    return sqrt(num / den);
}

static void test_rows_cols(void) {
    int R = 96, C = 160;
    float* x = gaussian(R, C, 0, 0, 1.0f);
    x[5] = NAN; x[C * 40 + 7] = INFINITY;                       // NaN / Inf blocks in both layouts
    for (int r = 64; r < 96; r++) { x[(size_t)r * C + 3] = 0.0f; }   // an all-zero column block
    float* xt = (float*)malloc_check((size_t)R * C * sizeof(float));
    for (int r = 0; r < R; r++) { for (int c = 0; c < C; c++) { xt[(size_t)c * R + r] = x[(size_t)r * C + c]; } }
    MXTensor a = mxtensor_alloc(C, R), b = mxtensor_alloc(C, R);
    for (int opt = 0; opt < 8; opt++) {
        int h = opt & 1, rule = (opt >> 1) & 1, sr = opt >> 2;
        quantize_cols_cpu(&a, x, R, C, h, rule, sr, 1234);
        quantize_rows_cpu(&b, xt, C, R, h, rule, sr, 1234);
        CHECK(same_tensor(&a, &b), "quantize_cols != quantize_rows of the transpose (hadamard %d rule %d sr %d)", h, rule, sr);
    }
    CHECK(a.scales[5 * R / 32] == 0xFF && a.scales[(7 * R + 32) / 32] == 0xFF && a.scales[(3 * R + 64) / 32] == 0x00, "NaN, Inf and zero blocks land where expected");
    MXTensor c = mxtensor_alloc(R, C);   // rows: block by block equal to mx_quantize_block on the (transformed) data
    quantize_rows_cpu(&c, x, R, C, 1, MX_SCALE_OCP, 1, 77);
    int ok = 1;
    for (int blk = 0; blk < R * C / 32; blk++) {
        float v[32];
        uint8_t p[16];
        memcpy(v, x + blk * 32, sizeof(v));
        hadamard32(v);
        ok &= mx_quantize_block(v, MX_SCALE_OCP, 1, 77, (uint64_t)blk * 32, p) == c.scales[blk] && memcmp(p, c.codes + blk * 16, 16) == 0;
    }
    CHECK(ok, "quantize_rows_cpu = Hadamard + mx_quantize_block per block, SR index = output index");
    mxtensor_free(&a); mxtensor_free(&b); mxtensor_free(&c);
    free(x); free(xt);
}

static void test_exact_round_trip(void) {
    int R = 64, K = 256;
    float* x = (float*)malloc_check((size_t)R * K * sizeof(float));
    for (int i = 0; i < R * K; i++) {   // grid values, each block holding a 4 or a 6 so that its scale is e
        int e = (int)((i / 32) % 200) - 100;
        int code = i % 32 == 0 ? 6 + (int)rng_below(&rng, 2) : (int)rng_below(&rng, 16);
        x[i] = ldexpf(e2m1_decode((uint8_t)code), e);
    }
    MXTensor q = mxtensor_alloc(R, K), q2 = mxtensor_alloc(R, K);
    float* d = (float*)malloc_check((size_t)R * K * sizeof(float));
    for (int rule = 0; rule < 2; rule++) {
        quantize_rows_cpu(&q, x, R, K, 0, rule, 0, 0);
        dequantize_cpu(d, &q);
        CHECK(memcmp(d, x, (size_t)R * K * sizeof(float)) == 0, "grid values round-trip bit for bit (rule %d)", rule);
        quantize_rows_cpu(&q2, d, R, K, 0, rule, 1, 5);
        CHECK(same_tensor(&q, &q2), "requantizing dequantized values (even with SR) is the identity (rule %d)", rule);
    }
    mxtensor_free(&q); mxtensor_free(&q2);
    free(x); free(d);
}

static void test_sr_tensor(void) {
    int R = 32, K = 64, draws = 4000;
    float* x = gaussian(R, K, 0, 0, 1.0f);
    double* mean = (double*)calloc_check((size_t)R * K, sizeof(double));
    float* d = (float*)malloc_check((size_t)R * K * sizeof(float));
    MXTensor q = mxtensor_alloc(R, K);
    for (int s = 0; s < draws; s++) {
        quantize_rows_cpu(&q, x, R, K, 0, MX_SCALE_ROUNDUP, 1, (uint64_t)s);
        dequantize_cpu(d, &q);
        for (int i = 0; i < R * K; i++) { mean[i] += d[i] / draws; }
    }
    double worst = 0.0;   // bias relative to the element's block step: std of the mean <= 1 / (2 sqrt(draws)) steps
    for (int i = 0; i < R * K; i++) {
        double step = ldexp(2.0, q.scales[i / 32] - 127);   // largest grid step of the block
        worst = fmax(worst, fabs(mean[i] - x[i]) / step);
    }
    CHECK(worst < 5.0 * 0.5 / sqrt(draws), "SR over a tensor is unbiased: worst |mean - x| = %.4f block steps", worst);
    mxtensor_free(&q);
    free(x); free(mean); free(d);
}

// the E4M3 re-expression with one scale per `group` elements of a row (group = K: per row): exact for the blocks
// within 14 binades of their group's largest, close for the others, NaN blocks -> E4M3 NaN, the count of inexact
// blocks, and the scale of an all-zero group
static void test_e4m3_groups(int group) {
    int R = 8, K = 32 * 40, G = K / group;
    printf("E4M3 re-expression, one scale per %d elements\n", group);
    float* x = gaussian(R, K, 0, 0, 1.0f);
    for (int i = 0; i < R * K; i++) { x[i] = ldexpf(x[i], (int)((i / 32) % 40) * (i / K % 2 ? -1 : 1) / 2); }   // 20 binades
    for (int i = 0; i < 32; i++) { x[3 * K + 64 + i] = i == 3 ? NAN : 1e30f; }   // a NaN block must not set emax
    for (int i = 0; i < K; i++) { x[5 * K + i] = 0.0f; }                         // an all-zero row
    MXTensor q = mxtensor_alloc(R, K);
    quantize_rows_cpu(&q, x, R, K, 1, MX_SCALE_OCP, 0, 0);
    float *deq = (float*)malloc_check((size_t)R * K * sizeof(float)), *sc = (float*)malloc_check((size_t)R * G * sizeof(float));
    uint8_t* e8 = (uint8_t*)malloc_check((size_t)R * K);
    dequantize_cpu(deq, &q);
    int inexact = to_e4m3_groups_cpu(e8, sc, &q, group), counted = 0, exact_ok = 1, close_ok = 1, nan_ok = 1, exact_blocks = 0;
    for (int r = 0; r < R; r++) {
        for (int g = 0; g < G; g++) {
            const uint8_t* s = q.scales + (size_t)r * K / 32 + g * group / 32;
            float gs = sc[r * G + g];
            int emax = 0;
            for (int j = 0; j < group / 32; j++) { if (s[j] != 0xFF && s[j] > emax) { emax = s[j]; } }
            exact_ok &= gs == (float)ldexp(1.0, emax - 127 - 6);
            for (int j = 0; j < group / 32; j++) {
                for (int i = 0; i < 32; i++) {
                    size_t n = (size_t)r * K + (size_t)g * group + 32 * j + i;
                    float back = e4m3_decode(e8[n]) * gs;
                    if (s[j] == 0xFF) { nan_ok &= e8[n] == 0x7F; }
                    else if (s[j] >= emax - 14) { exact_ok &= memcmp(&back, &deq[n], 4) == 0; }
                    else { close_ok &= fabs((double)back - deq[n]) <= ldexp(gs, -10); }
                }
                counted += s[j] != 0xFF && s[j] < emax - 14;
                exact_blocks += s[j] != 0xFF && s[j] >= emax - 14;
            }
        }
    }
    CHECK(exact_ok, "group %d: blocks with e >= emax - 14: e4m3_decode * scale == dequantized value bit for bit", group);
    CHECK(nan_ok && q.scales[3 * K / 32 + 2] == 0xFF, "group %d: NaN blocks give E4M3 NaN (0x7F)", group);
    CHECK(close_ok, "group %d: blocks below emax - 14 are within half an E4M3 subnormal step", group);
    CHECK(inexact == counted && exact_blocks > inexact, "group %d: inexact block count %d (want %d, exact %d)", group, inexact, counted, exact_blocks);
    CHECK(group < K || inexact > 0, "per row: the 20-binade rows have inexact blocks (%d)", inexact);
    CHECK(sc[5 * G] == (float)ldexp(1.0, -133), "group %d: all-zero group: emax = -127, scale 2^-133", group);
    printf("  %d of %d blocks outside the exact range\n", inexact, R * K / 32);
    mxtensor_free(&q);
    free(x); free(deq); free(sc); free(e8);
}

static void test_patterns(void) {
    float small[6] = {1, 2, 3, 4, 6, 8};   // 2 x 3
    double rv[2], cv[3];
    row_col_variance_cpu(small, 2, 3, rv, cv);
    CHECK(fabs(rv[0] - 2.0 / 3) < 1e-12 && fabs(rv[1] - 8.0 / 3) < 1e-12 && fabs(cv[0] - 2.25) < 1e-12 && fabs(cv[2] - 6.25) < 1e-12,
          "population variances of a 2 x 3 example");
    int R = 256, C = 512;
    float *none = gaussian(R, C, 0, 0, 1.0f), *rows = gaussian(R, C, 61, 0, 20.0f), *cols = gaussian(R, C, 0, 97, 20.0f);
    CHECK(tensor_pattern_cpu(none, R, C) == PATTERN_NONE, "Gaussian -> None");
    CHECK(tensor_pattern_cpu(rows, R, C) == PATTERN_ROW, "a few rows x20 -> Row");
    CHECK(tensor_pattern_cpu(cols, R, C) == PATTERN_COL, "a few columns x20 -> Column");
    float* t = (float*)malloc_check((size_t)R * C * sizeof(float));
    for (int r = 0; r < R; r++) { for (int c = 0; c < C; c++) { t[(size_t)c * R + r] = rows[(size_t)r * C + c]; } }
    CHECK(tensor_pattern_cpu(t, C, R) == PATTERN_COL, "the transpose of a Row tensor -> Column");
    for (int i = 0; i < R * C; i++) { t[i] = 3.0f; }
    CHECK(tensor_pattern_cpu(t, R, C) == PATTERN_NONE && tensor_pattern_cpu(t, 1, C) == PATTERN_NONE, "constant or single-row tensors -> None");
    CHECK(pattern_transpose(PATTERN_ROW) == PATTERN_COL && pattern_transpose(PATTERN_COL) == PATTERN_ROW
          && pattern_transpose(PATTERN_NONE) == PATTERN_NONE, "pattern_transpose");
    free(none); free(rows); free(cols); free(t);
}

static void test_strategies(void) {
    int pats[3] = {PATTERN_ROW, PATTERN_NONE, PATTERN_COL};   // table rows: A; columns: B (ADAHOP.md section 5)
    int table[3][3] = {{STRAT_IHT, STRAT_IHT_OE_ROWS_A, STRAT_IHT_OE_ROWS_B},
                       {STRAT_IHT, STRAT_IHT, STRAT_IHT_OE_ROWS_B},
                       {STRAT_IHT, STRAT_IHT, STRAT_BF16}};
    for (int a = 0; a < 3; a++) {
        for (int b = 0; b < 3; b++) {
            CHECK(adahop_strategy(pats[a], pats[b]) == table[a][b], "strategy(A %d, B %d) = %d, want %d", pats[a], pats[b],
                  adahop_strategy(pats[a], pats[b]), table[a][b]);
        }
    }
    int pa[3], pb[3];
    linear_gemm_patterns(PATTERN_COL, PATTERN_ROW, PATTERN_ROW, pa, pb);   // x Column, W Row, dY Row
    CHECK(pa[GEMM_FWD] == PATTERN_COL && pb[GEMM_FWD] == PATTERN_COL, "forward = (x, flip(W))");
    CHECK(pa[GEMM_DX] == PATTERN_ROW && pb[GEMM_DX] == PATTERN_ROW, "dX = (dY, W)");
    CHECK(pa[GEMM_DW] == PATTERN_COL && pb[GEMM_DW] == PATTERN_COL, "dW = (flip(dY), x)");
    CHECK(adahop_strategy(pa[GEMM_FWD], pb[GEMM_FWD]) == STRAT_BF16 && adahop_strategy(pa[GEMM_DX], pb[GEMM_DX]) == STRAT_IHT,
          "strategies of that layer");
}

static void test_topk(void) {
    float x[6 * 2] = {1, 0, 0, 3, 2, 2, 0, 3, -3, 0, 0, 0.5f};   // row norms^2: 1, 9, 8, 9, 9, 0.25
    int idx[3];
    topk_rows_cpu(x, 6, 2, 3, idx);
    CHECK(idx[0] == 1 && idx[1] == 3 && idx[2] == 4, "top-3 rows with ties -> lower indices, ascending (%d %d %d)", idx[0], idx[1], idx[2]);
    topk_rows_cpu(x, 6, 2, 1, idx);
    CHECK(idx[0] == 1, "top-1 row");
    float xt[2 * 6];
    for (int r = 0; r < 6; r++) { for (int c = 0; c < 2; c++) { xt[c * 6 + r] = x[r * 2 + c]; } }
    topk_cols_cpu(xt, 2, 6, 3, idx);
    CHECK(idx[0] == 1 && idx[1] == 3 && idx[2] == 4, "top-3 columns of the transpose");
    int all[6];
    topk_rows_cpu(x, 6, 2, 6, all);
    CHECK(all[0] == 0 && all[5] == 5, "k = n selects everything");
}

static void test_products(void) {
    float a[2 * 3] = {1, 2, 3, -1, 0.5f, 4}, b[2 * 3] = {2, 0, 1, 1, 1, 1};
    double out[4];
    gemm_nt_f64(out, a, b, 2, 2, 3);
    CHECK(out[0] == 5 && out[1] == 6 && out[2] == 2 && out[3] == 3.5, "gemm_nt_f64 on a 2 x 2 example");
    int M = 128, N = 96, K = 256, k = 8;
    float *A = gaussian(M, K, 16, 0, 30.0f), *B = gaussian(N, K, 12, 0, 30.0f);
    double *exact = (double*)malloc_check((size_t)M * N * 8), *iht = (double*)malloc_check((size_t)M * N * 8);
    double *oe = (double*)malloc_check((size_t)M * N * 8), *ref = (double*)malloc_check((size_t)M * N * 8);
    gemm_nt_f64(exact, A, B, M, N, K);
    adahop_gemm_nt_ref(iht, A, B, M, N, K, STRAT_IHT, k, MX_SCALE_OCP);
    mx_gemm_nt_ref(ref, A, B, M, N, K, 1, MX_SCALE_OCP);
    CHECK(memcmp(iht, ref, (size_t)M * N * 8) == 0, "STRAT_IHT = Hadamard + MXFP4 product");
    adahop_gemm_nt_ref(oe, A, B, M, N, K, STRAT_IHT_OE_ROWS_A, k, MX_SCALE_OCP);
    int rows_exact = 1, rest_same = 1;   // outlier rows are 1, 17, ..., 113 (8 rows)
    for (int i = 1; i < M; i += 16) { for (int j = 0; j < N; j++) { rows_exact &= oe[(size_t)i * N + j] == exact[(size_t)i * N + j]; } }
    float* clean = (float*)malloc_check((size_t)M * K * sizeof(float));
    memcpy(clean, A, (size_t)M * K * sizeof(float));
    for (int i = 1; i < M; i += 16) { memset(clean + (size_t)i * K, 0, K * sizeof(float)); }
    mx_gemm_nt_ref(ref, clean, B, M, N, K, 1, MX_SCALE_OCP);
    for (int i = 0; i < M; i++) { for (int j = 0; j < N && i % 16 != 1; j++) { rest_same &= oe[(size_t)i * N + j] == ref[(size_t)i * N + j]; } }
    CHECK(rows_exact && rest_same, "OE on rows of A: extracted rows exact, the others from Q(A_clean H) Q(H^T B)");
    double e_iht = rel_err(iht, exact, (size_t)M * N), e_oe = rel_err(oe, exact, (size_t)M * N);
    CHECK(e_oe < 0.5 * e_iht, "OE on row outliers reduces the error: %.4f -> %.4f", e_iht, e_oe);
    adahop_gemm_nt_ref(oe, A, B, M, N, K, STRAT_IHT_OE_ROWS_B, k, MX_SCALE_OCP);
    int cols_exact = 1;   // outlier rows of B [N x K] are 1, 13, ..., 85 (8 rows) = columns of B^T
    for (int i = 0; i < M; i++) { for (int j = 1; j < N; j += 12) { cols_exact &= oe[(size_t)i * N + j] == exact[(size_t)i * N + j]; } }
    CHECK(cols_exact, "OE on columns of B: extracted columns exact");
    adahop_gemm_nt_ref(oe, A, B, M, N, K, STRAT_BF16, k, MX_SCALE_OCP);
    CHECK(memcmp(oe, exact, (size_t)M * N * 8) == 0, "STRAT_BF16 = the unquantized product");
    free(A); free(B); free(exact); free(iht); free(oe); free(ref); free(clean);
}

static void rows_k48(void) { MXTensor t = {4, 48, NULL, NULL}; float x[4 * 48] = {0}; quantize_rows_cpu(&t, x, 4, 48, 0, 0, 0, 0); }
static void rows_r0(void) { MXTensor t = {0, 32, NULL, NULL}; float x[32] = {0}; quantize_rows_cpu(&t, x, 0, 32, 0, 0, 0, 0); }
static void cols_r40(void) { MXTensor t = {16, 40, NULL, NULL}; float x[40 * 16] = {0}; quantize_cols_cpu(&t, x, 40, 16, 0, 0, 0, 0); }
static void rows_wrong_out(void) { MXTensor t = mxtensor_alloc(4, 64); float x[4 * 32] = {0}; quantize_rows_cpu(&t, x, 4, 32, 0, 0, 0, 0); }
static void alloc_k20(void) { mxtensor_alloc(2, 20); }
static void topk_too_many(void) { float x[4] = {0}; int idx[5]; topk_rows_cpu(x, 2, 2, 5, idx); }
static void bad_strategy(void) { double o[1]; float a[32] = {0}; adahop_gemm_nt_ref(o, a, a, 1, 1, 32, 9, 1, 0); }

static void test_shapes(void) {
    CHECK(child_fails_with(rows_k48, "K=48 must be a multiple of 32"), "quantize_rows_cpu refuses K=48");
    CHECK(child_fails_with(rows_r0, "rows=0"), "quantize_rows_cpu refuses R=0");
    CHECK(child_fails_with(cols_r40, "K=40 must be a multiple of 32"), "quantize_cols_cpu refuses R=40");
    CHECK(child_fails_with(rows_wrong_out, "output is 4 x 64, want 4 x 32"), "quantize_rows_cpu refuses a wrong output shape");
    CHECK(child_fails_with(alloc_k20, "K=20 must be a multiple of 32"), "mxtensor_alloc refuses K=20");
    CHECK(child_fails_with(topk_too_many, "k=5 must be in [1, 2]"), "top-k refuses k > n");
    CHECK(child_fails_with(bad_strategy, "unknown strategy 9"), "unknown strategy is refused");
}

int main(void) {
    rng_seed(&rng, 2026);
    test_rows_cols();
    test_exact_round_trip();
    test_sr_tensor();
    test_e4m3_groups(32 * 40);
    test_e4m3_groups(128);
    test_e4m3_groups(32);
    test_patterns();
    test_strategies();
    test_topk();
    test_products();
    test_shapes();
    return test_summary("test_adahop_cpu");
}
