// Plain-C reference of the AdaHOP tensor operations (host only; also compiles as C++ for the GPU tests):
// MXFP4 quantization along rows / along columns (transposed output), with the inner Hadamard transform and
// stochastic rounding as options; dequantization; the exact E4M3 re-expression with one FP32 scale per row
// (ADAHOP.md section 9); outlier-pattern statistics and classification (section 4); top-k outlier selection
// and FP64 reference products, plain and with outlier extraction (section 6); the emulated AdaHOP GEMM of the
// CPU trainer (float storage, any strategy, operands given in either orientation). The strategy table and the
// controller are in adahop.h.
// Layout of an MXTensor: [rows x K], K contiguous; block j of row r covers elements r*K + 32j .. r*K + 32j + 31.
#ifndef LLMC_ADAHOP_CPU_H
#define LLMC_ADAHOP_CPU_H

#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include "utils.h"
#include "mxfp4.h"
#include "adahop.h"

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

// out [rows x K] = MXFP4 of the rows x K view of x whose element (r, k) is x[r * rs + k * ks], in blocks of 32 along K
// (`who` names the caller in errors)
static inline void quantize_view_cpu(const char* who, MXTensor* out, const float* x, int rows, int K, long rs, long ks,
                                     int hadamard, int rule, int stochastic, uint64_t seed) {
    mx_check_shape_cpu(who, rows, K);
    mx_check_out_cpu(who, out, rows, K);
    long nblocks = (long)rows * K / 32;
    #pragma omp parallel for
    for (long b = 0; b < nblocks; b++) {
        long r = b / (K / 32), k0 = (b % (K / 32)) * 32;
        float v[32];
        for (int i = 0; i < 32; i++) { v[i] = x[r * rs + (k0 + i) * ks]; }
        quantize_block_cpu(out, b, v, hadamard, rule, stochastic, seed);
    }
}

// out [R x K] = MXFP4 of x [R x K] (row-major) in blocks of 32 along its rows
static inline void quantize_rows_cpu(MXTensor* out, const float* x, int R, int K, int hadamard, int rule, int stochastic,
                                     uint64_t seed) {
    quantize_view_cpu("quantize_rows_cpu", out, x, R, K, K, 1, hadamard, rule, stochastic, seed);
}

// out [C x R] = MXFP4 of transpose(x) for x [R x C] row-major: blocks of 32 consecutive rows of one column
static inline void quantize_cols_cpu(MXTensor* out, const float* x, int R, int C, int hadamard, int rule, int stochastic,
                                     uint64_t seed) {
    quantize_view_cpu("quantize_cols_cpu", out, x, C, R, 1, C, hadamard, rule, stochastic, seed);
}

// out [rows x K] = the values of q (exact; NaN blocks give NaNs)
static inline void dequantize_cpu(float* out, const MXTensor* q) {
    long nblocks = (long)q->rows * q->K / 32;
    for (long b = 0; b < nblocks; b++) { mx_dequantize_block(q->codes + b * 16, q->scales[b], out + b * 32); }
}

// a GEMM operand in NT form [rows x K] (K = the reduction axis), stored as such (trans = 0) or as its
// transpose [K x rows] row-major (trans = 1)
typedef struct { const float* p; int rows, K, trans; } NTOperand;

// element (r, k) of the NT form of op
static inline float nt_at(NTOperand op, int r, int k) {
    return op.trans ? op.p[(size_t)k * op.rows + r] : op.p[(size_t)r * op.K + k];
}

// out [n x K] = the rows idx[0..n) of the NT form of op (rows 0..n-1 when idx is NULL)
static inline void nt_gather_rows(float* out, NTOperand op, const int* idx, int n) {
    for (int i = 0; i < n; i++) {
        int r = idx != NULL ? idx[i] : i;
        for (int k = 0; k < op.K; k++) { out[(size_t)i * op.K + k] = nt_at(op, r, k); }
    }
}

// out [rows x K] = the dequantized MXFP4 of op's NT form quantized along K (round to nearest, block Hadamard
// first if asked): quantize_rows_cpu of the stored rows, or quantize_cols_cpu of a transposed store
static inline void nt_fake_quant(float* out, NTOperand op, int hadamard, int rule) {
    MXTensor q = mxtensor_alloc(op.rows, op.K);
    if (op.trans) { quantize_cols_cpu(&q, op.p, op.K, op.rows, hadamard, rule, 0, 0); }
    else { quantize_rows_cpu(&q, op.p, op.rows, op.K, hadamard, rule, 0, 0); }
    dequantize_cpu(out, &q);
    mxtensor_free(&q);
}

// E4M3 re-expression (ADAHOP.md section 9) with one FP32 scale per group of `group` elements along K (a multiple
// of 32 dividing K; group = K: one scale per row, as cuBLASLt's per-row scaling takes; group = 128: its VEC128
// scaling): per group, emax = the largest block exponent (NaN blocks ignored, -127 if there is none),
// scale[r * (K / group) + g] = 2^(emax - 6), element = e4m3(code value * 2^(e - emax + 6)). For blocks with
// e >= emax - 14 the shift e - emax + 6 lies in [-8, 6], where every E2M1 value times 2^shift is an E4M3 value,
// so e4m3_decode(element) * scale equals the dequantized value bit for bit. Returns the number of blocks with
// e < emax - 14, whose small elements round to E4M3 subnormals or 0.
static inline int to_e4m3_groups_cpu(uint8_t* e4m3, float* scale, const MXTensor* q, int group) {
    if (group % 32 != 0 || group <= 0 || q->K % group != 0) { die("to_e4m3_groups_cpu: group %d must be a multiple of 32 dividing K=%d", group, q->K); }
    int nb = q->K / 32, bpg = group / 32, inexact = 0;
    for (int r = 0; r < q->rows; r++) {
        for (int g = 0; g < q->K / group; g++) {
            const uint8_t* s = q->scales + (size_t)r * nb + (size_t)g * bpg;
            int emax = 0;   // as a scale byte
            for (int j = 0; j < bpg; j++) { if (s[j] != 0xFF && s[j] > emax) { emax = s[j]; } }
            scale[(size_t)r * (q->K / group) + g] = ldexpf(1.0f, emax - 127 - 6);
            for (int j = 0; j < bpg; j++) {
                inexact += s[j] < emax - 14;   // a NaN block (0xFF) is never below
                for (int i = 0; i < 32; i++) {
                    size_t n = (size_t)r * q->K + (size_t)g * group + 32 * j + i;
                    float v = s[j] == 0xFF ? NAN : ldexpf(e2m1_decode((uint8_t)(q->codes[n / 2] >> (4 * (n % 2)))), s[j] - emax + 6);
                    e4m3[n] = e4m3_encode(v);
                }
            }
        }
    }
    return inexact;
}

// the per-row re-expression: one scale per row (to_e4m3_groups_cpu with group = K)
static inline int to_e4m3_rows_cpu(uint8_t* e4m3, float* row_scale, const MXTensor* q) {
    return to_e4m3_groups_cpu(e4m3, row_scale, q, q->K);
}

// ---------------------------------------------------------------------------------------------------------
// Outlier patterns (ADAHOP.md section 4; the classification itself is llmc/adahop.h's classify_pattern)

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

// Row / Column / None of x [R x C] with ratio ADAHOP_TAU
static inline int tensor_pattern_cpu(const float* x, int R, int C) {
    double* row_var = (double*)malloc_check((size_t)R * sizeof(double));
    double* col_var = (double*)malloc_check((size_t)C * sizeof(double));
    row_col_variance_cpu(x, R, C, row_var, col_var);
    int p = classify_pattern(row_var, col_var, R, C, ADAHOP_TAU);
    free(row_var);
    free(col_var);
    return p;
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

// the FP64 squared L2 norms of the rows of x [R x C] (R of them), or of its columns with columns = 1 (C of them),
// in a new array
static inline double* norms_sq_cpu(const float* x, int R, int C, int columns) {
    double* sq = (double*)calloc_check((size_t)(columns ? C : R), sizeof(double));
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) { double v = x[(size_t)r * C + c]; sq[columns ? c : r] += v * v; }
    }
    return sq;
}

// idx = the k rows of x [R x C] with the largest L2 norm, ascending
static inline void topk_rows_cpu(const float* x, int R, int C, int k, int* idx) {
    double* sq = norms_sq_cpu(x, R, C, 0);
    topk_of_norms(sq, R, k, idx);
    free(sq);
}

// idx = the k columns of x [R x C] with the largest L2 norm, ascending
static inline void topk_cols_cpu(const float* x, int R, int C, int k, int* idx) {
    double* sq = norms_sq_cpu(x, R, C, 1);
    topk_of_norms(sq, C, k, idx);
    free(sq);
}

// idx = the k rows of op's NT form with the largest L2 norm, ascending
static inline void nt_topk_rows(NTOperand op, int k, int* idx) {
    if (op.trans) { topk_cols_cpu(op.p, op.K, op.rows, k, idx); }
    else { topk_rows_cpu(op.p, op.rows, op.K, k, idx); }
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
    NTOperand a = {A, M, K, 0}, b = {B, N, K, 0};
    float* da = (float*)malloc_check((size_t)M * K * sizeof(float));
    float* db = (float*)malloc_check((size_t)N * K * sizeof(float));
    nt_fake_quant(da, a, hadamard, rule);
    nt_fake_quant(db, b, hadamard, rule);
    gemm_nt_f64(out, da, db, M, N, K);
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
// plain MXFP4, IHT + MXFP4, IHT + OE on k rows of A or on k columns of B^T (= rows of B, done as the transposed
// product), or the unquantized product (STRAT_BF16)
static inline void adahop_gemm_nt_ref(double* out, const float* A, const float* B, int M, int N, int K, int strategy,
                                      int k, int rule) {
    if (strategy == STRAT_IHT || strategy == STRAT_PLAIN) { mx_gemm_nt_ref(out, A, B, M, N, K, strategy == STRAT_IHT, rule); }
    else if (strategy == STRAT_IHT_OE_ROWS_A) { oe_rows_gemm_nt_ref(out, A, B, M, N, K, k, rule); }
    else if (strategy == STRAT_IHT_OE_ROWS_B) {
        double* t = (double*)malloc_check((size_t)N * M * sizeof(double));
        oe_rows_gemm_nt_ref(t, B, A, N, M, K, k, rule);
        for (int i = 0; i < M; i++) { for (int j = 0; j < N; j++) { out[(size_t)i * N + j] = t[(size_t)j * M + i]; } }
        free(t);
    }
    else if (strategy == STRAT_BF16) { gemm_nt_f64(out, A, B, M, N, K); }
    else { die("adahop_gemm_nt_ref: unknown strategy %d", strategy); }
}

// ---------------------------------------------------------------------------------------------------------
// Emulated AdaHOP GEMM (the CPU trainer's block linears)

// outlier extraction on min(oe_k, x.rows) rows of x's NT form (largest L2 norm): zeroes those rows of qx, its
// quantized copy (blocks lie within rows, so this equals zeroing before quantization), and returns their
// unquantized product with the unquantized, untransformed y as ext [k x y.rows]; idx gets the rows, *k their count
static inline double* oe_extract_cpu(float* qx, NTOperand x, NTOperand y, int oe_k, int* idx, int* k) {
    *k = oe_k < x.rows ? oe_k : x.rows;
    nt_topk_rows(x, *k, idx);
    float* xr = (float*)malloc_check((size_t)*k * x.K * sizeof(float));
    float* yf = (float*)malloc_check((size_t)y.rows * y.K * sizeof(float));
    double* ext = (double*)malloc_check((size_t)*k * y.rows * sizeof(double));
    nt_gather_rows(xr, x, idx, *k);
    nt_gather_rows(yf, y, NULL, y.rows);
    for (int i = 0; i < *k; i++) { memset(qx + (size_t)idx[i] * x.K, 0, (size_t)x.K * sizeof(float)); }
    gemm_nt_f64(ext, xr, yf, *k, y.rows, x.K);
    free(xr); free(yf);
    return ext;
}

// out [M x N] (+= when accumulate, else =) the product of NT operands a [M x K] and b [N x K] (out = A B^T)
// under `strategy`, emulated: both operands MXFP4 (round to nearest, OCP rule; block Hadamard unless
// STRAT_PLAIN), products accumulated in double; OE on rows of A or on rows of b (= columns of B^T in the [K x N]
// orientation) with k = min(oe_k, rows), those rows / columns of out taken from the unquantized product;
// STRAT_BF16 = the unquantized product
static inline void adahop_gemm_nt_cpu(float* out, int accumulate, NTOperand a, NTOperand b, int strategy, int oe_k) {
    int M = a.rows, N = b.rows, K = a.K;
    if (b.K != K) { die("adahop_gemm_nt_cpu: operands have K = %d and %d", a.K, b.K); }
    if (strategy < 0 || strategy >= NUM_STRATEGIES) { die("adahop_gemm_nt_cpu: unknown strategy %d", strategy); }
    float* qa = (float*)malloc_check((size_t)M * K * sizeof(float));
    float* qb = (float*)malloc_check((size_t)N * K * sizeof(float));
    double* t = (double*)malloc_check((size_t)M * N * sizeof(double));
    if (strategy == STRAT_BF16) { nt_gather_rows(qa, a, NULL, M); nt_gather_rows(qb, b, NULL, N); }
    else {
        nt_fake_quant(qa, a, strategy != STRAT_PLAIN, MX_SCALE_OCP);
        nt_fake_quant(qb, b, strategy != STRAT_PLAIN, MX_SCALE_OCP);
    }
    int rows_a = strategy == STRAT_IHT_OE_ROWS_A, k = 0;
    int* idx = (int*)malloc_check((size_t)(M > N ? M : N) * sizeof(int));
    double* ext = NULL;
    if (rows_a) { ext = oe_extract_cpu(qa, a, b, oe_k, idx, &k); }
    if (strategy == STRAT_IHT_OE_ROWS_B) { ext = oe_extract_cpu(qb, b, a, oe_k, idx, &k); }
    gemm_nt_f64(t, qa, qb, M, N, K);
    int n = rows_a ? N : M;   // ext is [k x n]; its row i is row idx[i] of t (OE on A) or column idx[i] (OE on b)
    for (int i = 0; i < k; i++) {
        for (int j = 0; j < n; j++) { t[rows_a ? (size_t)idx[i] * N + j : (size_t)j * N + idx[i]] = ext[(size_t)i * n + j]; }
    }
    for (size_t i = 0; i < (size_t)M * N; i++) { out[i] = (float)((accumulate ? out[i] : 0.0) + t[i]); }
    free(qa); free(qb); free(t); free(idx); free(ext);
}

#endif
