// Plain-C reference of the AdaHOP tensor operations (host only; also compiles as C++ for the GPU tests):
// MXFP4 quantization along rows / along columns (transposed output), with the inner Hadamard transform and
// stochastic rounding as options; dequantization; the exact E4M3 re-expression with one FP32 scale per row
// (ADAHOP.md section 9); outlier-pattern statistics and classification (section 4); the strategy table
// (section 5); top-k outlier selection and FP64 reference products, plain and with outlier extraction (6).
// Layout of an MXTensor: [rows x K], K contiguous; block j of row r covers elements r*K + 32j .. r*K + 32j + 31.
#ifndef LLMC_ADAHOP_CPU_H
#define LLMC_ADAHOP_CPU_H

#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include "utils.h"
#include "mxfp4.h"

typedef struct {
    int rows, K;
    uint8_t* codes;    // rows * K / 2 bytes, element 2i in the low nibble
    uint8_t* scales;   // rows * K / 32 E8M0 bytes
} MXTensor;

// ---------------------------------------------------------------------------------------------------------
// MXFP4 tensors

// dies unless rows > 0 and K is a positive multiple of 32
static inline void mx_check_shape_cpu(const char* what, int rows, int K) {
    if (rows <= 0 || K <= 0 || K % 32 != 0) {
        die("%s: K=%d must be a multiple of 32 (K = the quantized axis) and rows=%d positive", what, K, rows);
    }
}

// an MXTensor of rows x K with uninitialized codes and scales
static inline MXTensor mxtensor_alloc(int rows, int K) {
    mx_check_shape_cpu("mxtensor_alloc", rows, K);
    MXTensor t;
    t.rows = rows;
    t.K = K;
    t.codes = (uint8_t*)malloc_check((size_t)rows * K / 2);
    t.scales = (uint8_t*)malloc_check((size_t)rows * K / 32);
    return t;
}

// frees the buffers of t
static inline void mxtensor_free(MXTensor* t) {
    free(t->codes);
    free(t->scales);
    t->codes = NULL;
    t->scales = NULL;
}

// dies unless out is rows x K
static inline void mx_check_out_cpu(const char* what, const MXTensor* out, int rows, int K) {
    if (out->rows != rows || out->K != K) { die("%s: output is %d x %d, want %d x %d", what, out->rows, out->K, rows, K); }
}

// quantizes block b of out (32 values, Hadamard first if asked); block b starts at output index 32 b
static inline void quantize_block_cpu(MXTensor* out, long b, float v[32], int hadamard, int rule, int stochastic,
                                      uint64_t seed) {
    if (hadamard) { hadamard32(v); }
    out->scales[b] = mx_quantize_block(v, rule, stochastic, seed, (uint64_t)b * 32, out->codes + b * 16);
}

// out [R x K] = MXFP4 of x [R x K] (row-major) in blocks of 32 along its rows
static inline void quantize_rows_cpu(MXTensor* out, const float* x, int R, int K, int hadamard, int rule, int stochastic,
                                     uint64_t seed) {
    mx_check_shape_cpu("quantize_rows_cpu", R, K);
    mx_check_out_cpu("quantize_rows_cpu", out, R, K);
    long nblocks = (long)R * K / 32;
    #pragma omp parallel for
    for (long b = 0; b < nblocks; b++) {
        float v[32];
        memcpy(v, x + b * 32, sizeof(v));
        quantize_block_cpu(out, b, v, hadamard, rule, stochastic, seed);
    }
}

// out [C x R] = MXFP4 of transpose(x) for x [R x C] row-major: blocks of 32 consecutive rows of one column
static inline void quantize_cols_cpu(MXTensor* out, const float* x, int R, int C, int hadamard, int rule, int stochastic,
                                     uint64_t seed) {
    mx_check_shape_cpu("quantize_cols_cpu", C, R);
    mx_check_out_cpu("quantize_cols_cpu", out, C, R);
    long nblocks = (long)R * C / 32;
    #pragma omp parallel for
    for (long b = 0; b < nblocks; b++) {
        long c = b / (R / 32), r0 = (b % (R / 32)) * 32;
        float v[32];
        for (int i = 0; i < 32; i++) { v[i] = x[(r0 + i) * C + c]; }
        quantize_block_cpu(out, b, v, hadamard, rule, stochastic, seed);
    }
}

// out [rows x K] = the values of q (exact; NaN blocks give NaNs)
static inline void dequantize_cpu(float* out, const MXTensor* q) {
    long nblocks = (long)q->rows * q->K / 32;
    for (long b = 0; b < nblocks; b++) { mx_dequantize_block(q->codes + b * 16, q->scales[b], out + b * 32); }
}

// E4M3 re-expression (ADAHOP.md section 9): per row, emax = the largest block exponent (NaN blocks ignored,
// -127 if there is none), row_scale[r] = 2^(emax - 6), element = e4m3(code value * 2^(e - emax + 6)).
// For blocks with e >= emax - 14 the shift e - emax + 6 lies in [-8, 6], where every E2M1 value times 2^shift
// is an E4M3 value, so e4m3_decode(element) * row_scale[r] equals the dequantized value bit for bit. Returns
// the number of blocks with e < emax - 14, whose small elements round to E4M3 subnormals or 0.
static inline int to_e4m3_rows_cpu(uint8_t* e4m3, float* row_scale, const MXTensor* q) {
    int nb = q->K / 32, inexact = 0;
    for (int r = 0; r < q->rows; r++) {
        const uint8_t* s = q->scales + (size_t)r * nb;
        int emax = 0;   // as a scale byte
        for (int j = 0; j < nb; j++) { if (s[j] != 0xFF && s[j] > emax) { emax = s[j]; } }
        row_scale[r] = ldexpf(1.0f, emax - 127 - 6);
        for (int j = 0; j < nb; j++) {
            inexact += s[j] < emax - 14;   // a NaN block (0xFF) is never below
            for (int i = 0; i < 32; i++) {
                size_t n = (size_t)r * q->K + 32 * j + i;
                float v = s[j] == 0xFF ? NAN : ldexpf(e2m1_decode((uint8_t)(q->codes[n / 2] >> (4 * (n % 2)))), s[j] - emax + 6);
                e4m3[n] = e4m3_encode(v);
            }
        }
    }
    return inexact;
}

// ---------------------------------------------------------------------------------------------------------
// Outlier patterns (ADAHOP.md section 4) and strategies (section 5)

enum { PATTERN_NONE = 0, PATTERN_ROW = 1, PATTERN_COL = 2 };
enum { STRAT_IHT = 0, STRAT_IHT_OE_ROWS_A = 1, STRAT_IHT_OE_COLS_B = 2, STRAT_BF16 = 3 };
enum { GEMM_FWD = 0, GEMM_DX = 1, GEMM_DW = 2 };

// population variances of the rows (over columns) and of the columns (over rows) of x [R x C], in double
static inline void row_col_variance_cpu(const float* x, int R, int C, double* row_var, double* col_var) {
    double* col_mean = (double*)calloc_check((size_t)C, sizeof(double));
    for (int c = 0; c < C; c++) { col_var[c] = 0.0; }
    for (int r = 0; r < R; r++) {
        const float* xr = x + (size_t)r * C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++) { m += xr[c]; col_mean[c] += xr[c]; }
        m /= C;
        for (int c = 0; c < C; c++) { v += (xr[c] - m) * (xr[c] - m); }
        row_var[r] = v / C;
    }
    for (int c = 0; c < C; c++) { col_mean[c] /= R; }
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) { double d = x[(size_t)r * C + c] - col_mean[c]; col_var[c] += d * d; }
    }
    for (int c = 0; c < C; c++) { col_var[c] /= R; }
    free(col_mean);
}

// coefficient of variation std / mean of v[0..n); -1 when the mean is not positive (degenerate)
static inline double coeff_of_variation(const double* v, int n) {
    double m = 0.0, s = 0.0;
    for (int i = 0; i < n; i++) { m += v[i]; }
    m /= n;
    for (int i = 0; i < n; i++) { s += (v[i] - m) * (v[i] - m); }
    return m > 0.0 ? sqrt(s / n) / m : -1.0;
}

// Row / Column / None from the row and column variances of an [R x C] tensor: the CVs normalised by the
// i.i.d. Gaussian values sqrt(2/(C-1)) and sqrt(2/(R-1)), compared with ratio tau. Degenerate -> None.
static inline int classify_pattern_cpu(const double* row_var, const double* col_var, int R, int C, double tau) {
    if (R < 2 || C < 2) { return PATTERN_NONE; }
    double cv_row = coeff_of_variation(row_var, R), cv_col = coeff_of_variation(col_var, C);
    if (cv_row < 0.0 || cv_col < 0.0) { return PATTERN_NONE; }
    double n_row = cv_row / sqrt(2.0 / (C - 1)), n_col = cv_col / sqrt(2.0 / (R - 1));
    if (n_row > tau * n_col) { return PATTERN_ROW; }
    if (n_col > tau * n_row) { return PATTERN_COL; }
    return PATTERN_NONE;
}

// the pattern of the transposed tensor (Row <-> Column)
static inline int pattern_transpose(int p) { return p == PATTERN_ROW ? PATTERN_COL : (p == PATTERN_COL ? PATTERN_ROW : p); }

// strategy of a GEMM from the patterns of A as [M x K] and of B as [K x N] (ADAHOP.md section 5)
static inline int adahop_strategy(int pattern_a, int pattern_b) {
    if (pattern_a == PATTERN_COL && pattern_b == PATTERN_COL) { return STRAT_BF16; }
    if (pattern_b == PATTERN_COL) { return STRAT_IHT_OE_COLS_B; }
    if (pattern_a == PATTERN_ROW && pattern_b == PATTERN_NONE) { return STRAT_IHT_OE_ROWS_A; }
    return STRAT_IHT;
}

// (pattern of A, pattern of B) of the GEMMs GEMM_FWD, GEMM_DX, GEMM_DW of a linear layer y = x W^T, from the
// patterns of x [N x Cin], W [Cout x Cin] and dY [N x Cout]: forward (x, W^T), dX (dY, W), dW (dY^T, x)
static inline void linear_gemm_patterns(int px, int pw, int pdy, int pa[3], int pb[3]) {
    pa[GEMM_FWD] = px;                     pb[GEMM_FWD] = pattern_transpose(pw);
    pa[GEMM_DX] = pdy;                     pb[GEMM_DX] = pw;
    pa[GEMM_DW] = pattern_transpose(pdy);  pb[GEMM_DW] = px;
}

// ---------------------------------------------------------------------------------------------------------
// Outlier extraction (ADAHOP.md section 6) and reference products

typedef struct { double key; int i; } TopkItem;

// orders by key descending, then index ascending
static inline int topk_item_cmp(const void* a, const void* b) {
    const TopkItem *x = (const TopkItem*)a, *y = (const TopkItem*)b;
    if (x->key != y->key) { return x->key > y->key ? -1 : 1; }
    return x->i - y->i;
}

// ascending int order
static inline int int_cmp(const void* a, const void* b) { return *(const int*)a - *(const int*)b; }

// idx[0..k) = the k indices of the largest squared norms sq[0..n) (ties -> lower index; NaN counts as +Inf),
// sorted ascending
static inline void topk_of_norms(const double* sq, int n, int k, int* idx) {
    if (k <= 0 || k > n) { die("topk: k=%d must be in [1, %d]", k, n); }
    TopkItem* items = (TopkItem*)malloc_check((size_t)n * sizeof(TopkItem));
    for (int i = 0; i < n; i++) { items[i].key = isnan(sq[i]) ? INFINITY : sq[i]; items[i].i = i; }
    qsort(items, (size_t)n, sizeof(TopkItem), topk_item_cmp);
    for (int j = 0; j < k; j++) { idx[j] = items[j].i; }
    qsort(idx, (size_t)k, sizeof(int), int_cmp);
    free(items);
}

// idx = the k rows of x [R x C] with the largest L2 norm, ascending
static inline void topk_rows_cpu(const float* x, int R, int C, int k, int* idx) {
    double* sq = (double*)calloc_check((size_t)R, sizeof(double));
    for (int r = 0; r < R; r++) { for (int c = 0; c < C; c++) { double v = x[(size_t)r * C + c]; sq[r] += v * v; } }
    topk_of_norms(sq, R, k, idx);
    free(sq);
}

// idx = the k columns of x [R x C] with the largest L2 norm, ascending
static inline void topk_cols_cpu(const float* x, int R, int C, int k, int* idx) {
    double* sq = (double*)calloc_check((size_t)C, sizeof(double));
    for (int r = 0; r < R; r++) { for (int c = 0; c < C; c++) { double v = x[(size_t)r * C + c]; sq[c] += v * v; } }
    topk_of_norms(sq, C, k, idx);
    free(sq);
}

// out [M x N] = A [M x K] B^T for B given as [N x K], accumulated in double
static inline void gemm_nt_f64(double* out, const float* A, const float* B, int M, int N, int K) {
    #pragma omp parallel for
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++) { s += (double)A[(size_t)i * K + k] * B[(size_t)j * K + k]; }
            out[(size_t)i * N + j] = s;
        }
    }
}

// out [M x N] = Q(A) Q(B)^T in double: both operands [. x K] quantized along K with round-to-nearest, after
// the block Hadamard transform if asked (H H^T = I, so no inverse transform is needed)
static inline void mx_gemm_nt_ref(double* out, const float* A, const float* B, int M, int N, int K, int hadamard, int rule) {
    MXTensor qa = mxtensor_alloc(M, K), qb = mxtensor_alloc(N, K);
    float* da = (float*)malloc_check((size_t)M * K * sizeof(float));
    float* db = (float*)malloc_check((size_t)N * K * sizeof(float));
    quantize_rows_cpu(&qa, A, M, K, hadamard, rule, 0, 0);
    quantize_rows_cpu(&qb, B, N, K, hadamard, rule, 0, 0);
    dequantize_cpu(da, &qa);
    dequantize_cpu(db, &qb);
    gemm_nt_f64(out, da, db, M, N, K);
    mxtensor_free(&qa); mxtensor_free(&qb);
    free(da); free(db);
}

// out [M x N] = Q(A_clean H) Q(H^T B) with A_clean = A with its k largest-norm rows zeroed, then those rows
// of out overwritten by the unquantized product of A's rows with B (B given as [N x K])
static inline void oe_rows_gemm_nt_ref(double* out, const float* A, const float* B, int M, int N, int K, int k, int rule) {
    int* idx = (int*)malloc_check((size_t)k * sizeof(int));
    topk_rows_cpu(A, M, K, k, idx);
    float* clean = (float*)malloc_check((size_t)M * K * sizeof(float));
    memcpy(clean, A, (size_t)M * K * sizeof(float));
    for (int j = 0; j < k; j++) { memset(clean + (size_t)idx[j] * K, 0, (size_t)K * sizeof(float)); }
    mx_gemm_nt_ref(out, clean, B, M, N, K, 1, rule);
    for (int j = 0; j < k; j++) { gemm_nt_f64(out + (size_t)idx[j] * N, A + (size_t)idx[j] * K, B, 1, N, K); }
    free(idx); free(clean);
}

// out [M x N] = the AdaHOP product of A [M x K] and B^T (B given as [N x K]) under `strategy`, in double:
// IHT + MXFP4, IHT + OE on k rows of A or on k columns of B^T (= rows of B, done as the transposed product),
// or the unquantized product (STRAT_BF16)
static inline void adahop_gemm_nt_ref(double* out, const float* A, const float* B, int M, int N, int K, int strategy,
                                      int k, int rule) {
    if (strategy == STRAT_IHT) { mx_gemm_nt_ref(out, A, B, M, N, K, 1, rule); }
    else if (strategy == STRAT_IHT_OE_ROWS_A) { oe_rows_gemm_nt_ref(out, A, B, M, N, K, k, rule); }
    else if (strategy == STRAT_IHT_OE_COLS_B) {
        double* t = (double*)malloc_check((size_t)N * M * sizeof(double));
        oe_rows_gemm_nt_ref(t, B, A, N, M, K, k, rule);
        for (int i = 0; i < M; i++) { for (int j = 0; j < N; j++) { out[(size_t)i * N + j] = t[(size_t)j * M + i]; } }
        free(t);
    }
    else if (strategy == STRAT_BF16) { gemm_nt_f64(out, A, B, M, N, K); }
    else { die("adahop_gemm_nt_ref: unknown strategy %d", strategy); }
}

#endif
