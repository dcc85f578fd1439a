// The AdaHOP GPU kernels against the C reference (llmc/adahop_cpu.h) on fresh random and adversarial inputs:
// MXFP4 codes and scales bit for bit (rows, columns, with/without Hadamard, every scale rule, RNE and SR),
// dequantization and E4M3 re-expression bit for bit, the one-pass BF16 -> E4M3 row quantizer, both GEMM paths
// against an FP64 product of the dequantized operands, the Hadamard's error reduction on in-block outliers,
// outlier statistics and classification, top-k and outlier extraction. Unsupported shapes exit with a message.
#include <float.h>
#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"
#include "llmc/mxfp4.cuh"
#include "llmc/outliers.cuh"
#include "llmc/sm100/mxfp4_gemm.cuh"
#include "llmc/adahop_cpu.h"
#include "llmc/rand.h"
#include "dev/test/test_common.h"
#include "dev/cuda/test_transfer.cuh"

static Rng rng;

enum { DATA_GAUSS, DATA_HEAVY, DATA_ROW_OUTLIERS, DATA_COL_OUTLIERS, DATA_ZERO_BLOCKS, DATA_NONFINITE, DATA_HUGE_TINY,
       DATA_TINY_ROWS, DATA_SCALE_SPREAD, NUM_DATA };
static const char* data_names[NUM_DATA] = {"gaussian", "heavy-tailed", "row outliers", "column outliers",
                                           "all-zero blocks", "NaN/Inf", "huge + tiny", "tiny rows", "scale spread"};

// a BF16-representable [R x C] test tensor of the given kind
static float* make_data(int kind, int R, int C) {
    size_t n = (size_t)R * C;
    float* x = (float*)malloc_check(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        float g = rng_normal(&rng);
        if (kind == DATA_HEAVY) { g /= sqrtf(0.02f + rng_uniform(&rng)); }
        x[i] = g;
    }
    if (kind == DATA_ROW_OUTLIERS) { for (int r = 0; r < R; r += 7) { for (int c = 0; c < C; c++) { x[(size_t)r * C + c] *= 30.0f; } } }
    if (kind == DATA_COL_OUTLIERS) { for (int r = 0; r < R; r++) { for (int c = 3; c < C; c += 37) { x[(size_t)r * C + c] *= 30.0f; } } }
    if (kind == DATA_ZERO_BLOCKS) { for (size_t i = 0; i < n; i++) { if ((i / 32) % 3 == 1) { x[i] = (i % 2) ? -0.0f : 0.0f; } } }
    if (kind == DATA_NONFINITE) { x[5] = NAN; x[n / 2] = INFINITY; x[n - 1] = -INFINITY; }
    if (kind == DATA_HUGE_TINY) {
        for (size_t i = 0; i < n; i++) { x[i] *= (i / 64) % 2 ? 1e30f : 1e-30f; }
    }
    // rows of tiny values only: a third of the rows near 2^-128 (BF16 subnormals), a third near 2^-110 (normals), the
    // rest at 1; row 1 has 2^-135 (mostly BF16 zeros) in its first half
    if (kind == DATA_TINY_ROWS) {
        for (int r = 0; r < R; r++) {
            float f = r % 3 == 0 ? 0x1p-128f : r % 3 == 1 ? 0x1p-110f : 1.0f;
            for (int c = 0; c < C; c++) { x[(size_t)r * C + c] *= r == 1 && c < C / 2 ? 0x1p-135f : f; }
        }
    }
    // rows scaled from 2^-40 to 2^39, every fifth block of a row 1e-4 of the others (about 2^-13: E4M3 blocks at the
    // edge of what the row scale leaves them)
    if (kind == DATA_SCALE_SPREAD) {
        for (int r = 0; r < R; r++) {
            float f = ldexpf(1.0f, (r * 37) % 80 - 40);
            for (int c = 0; c < C; c++) { x[(size_t)r * C + c] *= (c / 32) % 5 == 0 ? f * 1e-4f : f; }
        }
    }
    for (size_t i = 0; i < n; i++) { x[i] = __bfloat162float(__float2bfloat16(x[i])); }
    return x;
}

static MXTensor host_tensor(int rows, int K) {
    MXTensor t;
    t.rows = rows; t.K = K;
    t.codes = (uint8_t*)malloc_check((size_t)rows * K / 2);
    t.scales = (uint8_t*)malloc_check((size_t)rows * K / 32);
    return t;
}

// 1 if the device operand equals the host one bit for bit; prints the first difference
static int same_operand(const char* what, const MXOperand* d, const MXTensor* h) {
    size_t nc = (size_t)h->rows * h->K / 2, ns = (size_t)h->rows * h->K / 32;
    uint8_t* codes = (uint8_t*)download(d->codes, nc);
    uint8_t* scales = (uint8_t*)download(d->scales, ns);
    int ok = 1;
    for (size_t i = 0; i < ns && ok; i++) { if (scales[i] != h->scales[i]) { printf("  %s: scale %zu: gpu 0x%02x cpu 0x%02x\n", what, i, scales[i], h->scales[i]); ok = 0; } }
    for (size_t i = 0; i < nc && ok; i++) { if (codes[i] != h->codes[i]) { printf("  %s: code byte %zu: gpu 0x%02x cpu 0x%02x\n", what, i, codes[i], h->codes[i]); ok = 0; } }
    free(codes); free(scales);
    return ok;
}

// quantization along rows and columns, dequantization, E4M3 (two-step and fused) for one input and options
static void test_quantize(int kind, int R, int C, MXQuantOptions opt) {
    char what[160];
    snprintf(what, sizeof(what), "%s %dx%d H=%d rule=%s SR=%d", data_names[kind], R, C, opt.hadamard,
             mx_scale_rule_names[opt.rule], opt.stochastic);
    float* x = make_data(kind, R, C);
    floatX* dx = to_device_bf16(x, (size_t)R * C);
    // along rows (K = C)
    MXTensor h = host_tensor(R, C);
    quantize_rows_cpu(&h, x, R, C, opt.hadamard, opt.rule, opt.stochastic, opt.seed);
    MXOperand d = mx_operand_alloc(R, C);
    mx_quantize_rows(&d, dx, R, C, opt, 0);
    CHECK(same_operand("rows", &d, &h), "%s: quantize rows differs from the reference", what);
    // dequantize: BF16 holds every MXFP4 value exactly
    float* deq = (float*)malloc_check((size_t)R * C * sizeof(float));
    dequantize_cpu(deq, &h);
    floatX* ddeq = (floatX*)device_malloc((size_t)R * C * sizeof(floatX), "deq");
    mx_dequantize(ddeq, &d, 0);
    floatX* gdeq = (floatX*)download(ddeq, (size_t)R * C * sizeof(floatX));
    int deq_ok = 1;
    for (size_t i = 0; i < (size_t)R * C; i++) {
        float g = __bfloat162float(gdeq[i]);
        if (!(g == deq[i] || (isnan(g) && isnan(deq[i])))) { deq_ok = 0; }
    }
    CHECK(deq_ok, "%s: dequantize differs from the reference", what);
    // E4M3 re-expression, two-step and fused
    uint8_t* he = (uint8_t*)malloc_check((size_t)R * C);
    float* hs = (float*)malloc_check(R * sizeof(float));
    int h_inexact = to_e4m3_rows_cpu(he, hs, &h);
    E4M3Operand e2 = e4m3_operand_alloc(R, C);
    mx_to_e4m3(&e2, &d, 0);
    uint8_t* g2 = (uint8_t*)download(e2.values, (size_t)R * C);
    float* s2 = (float*)download(e2.row_scale, R * sizeof(float));
    unsigned long long* c2 = (unsigned long long*)download(e2.inexact_blocks, sizeof(unsigned long long));
    CHECK(memcmp(g2, he, (size_t)R * C) == 0 && memcmp(s2, hs, R * sizeof(float)) == 0 && *c2 == (unsigned long long)h_inexact,
          "%s: MXFP4 -> E4M3 differs from the reference (inexact blocks gpu %llu cpu %d)", what, *c2, h_inexact);
    if (C <= MX_E4M3_ONE_PASS_MAX_K) {   // the one-pass quantizer: the same E4M3 bytes, row scales and count
        E4M3Operand e1 = e4m3_operand_alloc(R, C);
        mx_quantize_rows_e4m3(&e1, dx, R, C, opt, 0);
        uint8_t* g1 = (uint8_t*)download(e1.values, (size_t)R * C);
        float* s1 = (float*)download(e1.row_scale, R * sizeof(float));
        unsigned long long* c1 = (unsigned long long*)download(e1.inexact_blocks, sizeof(unsigned long long));
        size_t first = 0;
        while (first < (size_t)R * C && g1[first] == he[first]) { first++; }
        CHECK(first == (size_t)R * C && memcmp(s1, hs, R * sizeof(float)) == 0 && *c1 == (unsigned long long)h_inexact,
              "%s: one-pass quantize -> E4M3 differs from the reference (first byte %zu: gpu 0x%02x cpu 0x%02x; "
              "inexact blocks gpu %llu cpu %d)", what, first, first < (size_t)R * C ? g1[first] : 0,
              first < (size_t)R * C ? he[first] : 0, *c1, h_inexact);
        free(g1); free(s1); free(c1);
        e4m3_operand_free(&e1);
    }
    // along columns (K = R), transposed output
    if (R % 32 == 0 && C % 8 == 0) {
        MXTensor ht = host_tensor(C, R);
        quantize_cols_cpu(&ht, x, R, C, opt.hadamard, opt.rule, opt.stochastic, opt.seed);
        MXOperand dt = mx_operand_alloc(C, R);
        mx_quantize_cols(&dt, dx, R, C, opt, NULL, NULL, 0);
        CHECK(same_operand("cols", &dt, &ht), "%s: quantize columns differs from the reference", what);
        // the same with the column sums of squares on the way: same codes, sums within FP32 rounding of FP64 ones
        MXOperand dn = mx_operand_alloc(C, R);
        float* dsq = (float*)device_malloc(C * sizeof(float), "column squares");
        float* dpart = (float*)device_malloc(mx_col_sq_scratch_floats(R, C) * sizeof(float), "column square partials");
        mx_quantize_cols(&dn, dx, R, C, opt, dsq, dpart, 0);
        float* gsq = (float*)download(dsq, C * sizeof(float));
        float* xb = from_device_bf16(dx, (size_t)R * C);
        int sq_ok = 1;
        for (int c = 0; c < C; c++) {
            double want = 0.0;
            for (int r = 0; r < R; r++) { want += (double)xb[(size_t)r * C + c] * xb[(size_t)r * C + c]; }
            // FP32 overflows above FLT_MAX (Inf expected) and loses squares below 1e-30 (tiny values)
            int ok = isnan(want) ? isnan(gsq[c]) : want > FLT_MAX ? isinf(gsq[c]) : fabs(gsq[c] - want) <= 1e-5 * want + 1e-30;
            sq_ok &= ok;
        }
        CHECK(same_operand("cols with norms", &dn, &ht) && sq_ok, "%s: quantize columns with the column sums of squares "
              "differs (codes or sums)", what);
        free(gsq); free(xb);
        mx_operand_free(&dn);
        cudaCheck(cudaFree(dsq)); cudaCheck(cudaFree(dpart));
        mxtensor_free(&ht);
        mx_operand_free(&dt);
    }
    free(x); free(deq); free(gdeq); free(he); free(hs); free(g2); free(s2); free(c2);
    mxtensor_free(&h);
    mx_operand_free(&d); e4m3_operand_free(&e2);
    cudaCheck(cudaFree(dx)); cudaCheck(cudaFree(ddeq));
}

static double rel_frob_f32_f64(const float* got, const double* want, size_t n) {
    double d2 = 0.0, r2 = 0.0;
    for (size_t i = 0; i < n; i++) { double d = got[i] - want[i]; d2 += d * d; r2 += want[i] * want[i]; }
    return sqrt(d2 / (r2 > 0 ? r2 : 1.0));
}

// A (M x K) and B (N x K) on the device in bf16 and quantized to MXFP4 rows, with the exact GEMM path's bf16 scratch
typedef struct {
    floatX *a, *b, *scratch_a, *scratch_b;
    MXOperand qa, qb;
} QuantizedPair;

static QuantizedPair quantized_pair(const float* a, const float* b, int M, int N, int K, MXQuantOptions opt) {
    QuantizedPair p;
    p.a = to_device_bf16(a, (size_t)M * K);
    p.b = to_device_bf16(b, (size_t)N * K);
    p.scratch_a = (floatX*)device_malloc((size_t)M * K * 2, "a scratch");
    p.scratch_b = (floatX*)device_malloc((size_t)N * K * 2, "b scratch");
    p.qa = mx_operand_alloc(M, K);
    p.qb = mx_operand_alloc(N, K);
    mx_quantize_rows(&p.qa, p.a, M, K, opt, 0);
    mx_quantize_rows(&p.qb, p.b, N, K, opt, 0);
    return p;
}

// out (fp32, M x N) = dequantized A times dequantized B^T through the exact path
static void quantized_pair_exact_gemm(float* out, QuantizedPair* p) {
    mx_gemm_exact(out, true, &p->qa, &p->qb, p->scratch_a, p->scratch_b, NULL, 0.0f, 0);
}

static void quantized_pair_free(QuantizedPair* p) {
    mx_operand_free(&p->qa);
    mx_operand_free(&p->qb);
    void* bufs[] = {p->a, p->b, p->scratch_a, p->scratch_b};
    for (int i = 0; i < 4; i++) { cudaCheck(cudaFree(bufs[i])); }
}

// both GEMM paths against the FP64 product of the dequantized operands; returns ||Q(A)Q(B)^T - AB^T|| / ||AB^T||
static double test_gemm(int kind, int M, int N, int K, int hadamard) {
    float *a = make_data(kind, M, K), *b = make_data(DATA_GAUSS, N, K);
    MXQuantOptions opt = {hadamard, MX_SCALE_OCP, 0, 0};
    MXTensor ha = host_tensor(M, K), hb = host_tensor(N, K);
    quantize_rows_cpu(&ha, a, M, K, hadamard, MX_SCALE_OCP, 0, 0);
    quantize_rows_cpu(&hb, b, N, K, hadamard, MX_SCALE_OCP, 0, 0);
    float *qa = (float*)malloc_check((size_t)M * K * 4), *qb = (float*)malloc_check((size_t)N * K * 4);
    dequantize_cpu(qa, &ha);
    dequantize_cpu(qb, &hb);
    double *want = (double*)malloc_check((size_t)M * N * 8), *exact = (double*)malloc_check((size_t)M * N * 8);
    gemm_nt_f64(want, qa, qb, M, N, K);
    gemm_nt_f64(exact, a, b, M, N, K);
    QuantizedPair p = quantized_pair(a, b, M, N, K, opt);
    float* dout = (float*)device_malloc((size_t)M * N * 4, "out");
    quantized_pair_exact_gemm(dout, &p);
    float* got_exact = (float*)download(dout, (size_t)M * N * 4);
    E4M3Operand ea = e4m3_operand_alloc(M, K), eb = e4m3_operand_alloc(N, K);
    mx_to_e4m3(&ea, &p.qa, 0);
    mx_to_e4m3(&eb, &p.qb, 0);
    mx_gemm_fast(dout, true, &ea, &eb, NULL, 0.0f, 0);
    float* got_fast = (float*)download(dout, (size_t)M * N * 4);
    // the dW GEMM's variant: unit-scale FP8 GEMM, row scales after; beta = 0, then beta = 1 onto a prior output
    float* part = (float*)device_malloc((size_t)M * N * 4, "unit-scale product");
    mx_gemm_fast_scales_after(dout, 0.0f, &ea, &eb, part, 0);
    float* got_after = (float*)download(dout, (size_t)M * N * 4);
    float* prior = make_data(DATA_GAUSS, M, N);
    double* want_acc = (double*)malloc_check((size_t)M * N * 8);
    for (size_t i = 0; i < (size_t)M * N; i++) { want_acc[i] = (double)prior[i] + want[i]; }
    float* dprior = to_device_f32(prior, (size_t)M * N);
    mx_gemm_fast_scales_after(dprior, 1.0f, &ea, &eb, part, 0);
    float* got_acc = (float*)download(dprior, (size_t)M * N * 4);
    unsigned long long* ia = (unsigned long long*)download(ea.inexact_blocks, sizeof(unsigned long long));
    unsigned long long* ib = (unsigned long long*)download(eb.inexact_blocks, sizeof(unsigned long long));
    double e_exact = rel_frob_f32_f64(got_exact, want, (size_t)M * N), e_fast = rel_frob_f32_f64(got_fast, want, (size_t)M * N);
    double e_after = rel_frob_f32_f64(got_after, want, (size_t)M * N), e_acc = rel_frob_f32_f64(got_acc, want_acc, (size_t)M * N);
    double fast_tol = *ia + *ib ? 1e-3 : 1e-5;
    CHECK(e_after < fast_tol && e_acc < fast_tol, "fast path with the scales after the GEMM: error %.2e (beta 0), %.2e "
          "(beta 1) above %.0e", e_after, e_acc, fast_tol);
    free(got_after); free(prior); free(want_acc); free(got_acc);
    cudaCheck(cudaFree(part)); cudaCheck(cudaFree(dprior));
    double q_err = 0.0, r2 = 0.0;
    for (size_t i = 0; i < (size_t)M * N; i++) { double d = want[i] - exact[i]; q_err += d * d; r2 += exact[i] * exact[i]; }
    q_err = sqrt(q_err / r2);
    printf("  gemm %-16s %dx%dx%d H=%d: exact path %.2e, fast path %.2e (scales after: %.2e, accumulating %.2e) vs FP64 of "
           "the MXFP4 operands (inexact blocks %llu+%llu); MXFP4 itself moves the product by %.3f\n", data_names[kind], M, N, K,
           hadamard, e_exact, e_fast, e_after, e_acc, *ia, *ib, q_err);
    CHECK(e_exact < 1e-5, "exact GEMM path error %.2e above 1e-5", e_exact);
    CHECK(e_fast < fast_tol, "fast GEMM path error %.2e above tolerance", e_fast);
    free(a); free(b); free(qa); free(qb); free(want); free(exact); free(got_exact); free(got_fast); free(ia); free(ib);
    mxtensor_free(&ha); mxtensor_free(&hb);
    quantized_pair_free(&p); e4m3_operand_free(&ea); e4m3_operand_free(&eb);
    cudaCheck(cudaFree(dout));
    return q_err;
}

static void test_stats_and_classifier(void) {
    int R = 512, C = 256;
    int kinds[3] = {DATA_GAUSS, DATA_ROW_OUTLIERS, DATA_COL_OUTLIERS};
    int expect[3] = {PATTERN_NONE, PATTERN_ROW, PATTERN_COL};
    float *rv = (float*)device_malloc(R * 4, "rv"), *rs = (float*)device_malloc(R * 4, "rs");
    float *cv = (float*)device_malloc(C * 4, "cv"), *cs = (float*)device_malloc(C * 4, "cs"), *csum = (float*)device_malloc(C * 4, "csum");
    float* scratch = (float*)device_malloc(column_sums_scratch_bytes(C), "scratch");
    for (int t = 0; t < 3; t++) {
        float* x = make_data(kinds[t], R, C);
        floatX* dx = to_device_bf16(x, (size_t)R * C);
        outlier_stats(rv, rs, cv, cs, csum, scratch, dx, R, C, 0);
        float *grv = (float*)download(rv, R * 4), *gcv = (float*)download(cv, C * 4);
        double *hrv = (double*)malloc_check(R * 8), *hcv = (double*)malloc_check(C * 8);
        row_col_variance_cpu(x, R, C, hrv, hcv);
        double worst = 0.0;
        for (int i = 0; i < R; i++) { worst = fmax(worst, fabs(grv[i] - hrv[i]) / hrv[i]); }
        for (int i = 0; i < C; i++) { worst = fmax(worst, fabs(gcv[i] - hcv[i]) / hcv[i]); }
        CHECK(worst < 1e-3, "%s: row/column variances off by %.2e (relative)", data_names[kinds[t]], worst);
        double *grvd = (double*)malloc_check(R * 8), *gcvd = (double*)malloc_check(C * 8);
        for (int i = 0; i < R; i++) { grvd[i] = grv[i]; }
        for (int i = 0; i < C; i++) { gcvd[i] = gcv[i]; }
        int got = classify_pattern(grvd, gcvd, R, C, 2.0), want = classify_pattern(hrv, hcv, R, C, 2.0);
        printf("  classifier: %-16s -> %d (reference %d, expected %d), variance error %.1e\n", data_names[kinds[t]], got, want, expect[t], worst);
        CHECK(got == expect[t] && want == expect[t], "%s classified %d (reference %d), expected %d", data_names[kinds[t]], got, want, expect[t]);
        free(x); free(grv); free(gcv); free(hrv); free(hcv); free(grvd); free(gcvd);
        cudaCheck(cudaFree(dx));
    }
    void* bufs[] = {rv, rs, cv, cs, csum, scratch};
    for (int i = 0; i < 6; i++) { cudaCheck(cudaFree(bufs[i])); }
}

// top-k of rows: clearly separated norms, exact ties (identical rows), a NaN row, k = 1 and k = n
static void test_topk(int R, int C, int k) {
    float* x = make_data(DATA_GAUSS, R, C);
    for (int r = 0; r < R; r++) { for (int c = 0; c < C; c++) { x[(size_t)r * C + c] = (float)((r * 37) % 11) + (r % 5 == 0 ? 0.0f : 0.25f); } }
    float* dsq = (float*)device_malloc(R * 4, "sq");
    float* dvar = (float*)device_malloc(R * 4, "var");
    floatX* dx = to_device_bf16(x, (size_t)R * C);
    row_stats_kernel<<<ceil_div(R, 8), 256>>>(dvar, dsq, dx, R, C);
    cudaCheckLaunch();
    int* didx = (int*)device_malloc(k * 4, "idx");
    topk_rows(didx, dsq, R, k, 0);
    int* got = (int*)download(didx, k * 4);
    int* want = (int*)malloc_check(k * 4);
    topk_rows_cpu(x, R, C, k, want);
    CHECK(memcmp(got, want, k * 4) == 0, "top-%d of %d rows differs from the reference (first: gpu %d cpu %d)", k, R, got[0], want[0]);
    free(x); free(got); free(want);
    cudaCheck(cudaFree(dsq)); cudaCheck(cudaFree(dvar)); cudaCheck(cudaFree(dx)); cudaCheck(cudaFree(didx));
}

// outlier extraction on rows of A: Q(A_clean H) Q(H^T B) + A_out B vs the FP64 product; must beat plain IHT
static void test_outlier_extraction(int M, int N, int K, int k) {
    float *a = make_data(DATA_ROW_OUTLIERS, M, K), *b = make_data(DATA_GAUSS, N, K);
    double* exact = (double*)malloc_check((size_t)M * N * 8);
    gemm_nt_f64(exact, a, b, M, N, K);
    MXQuantOptions opt = {1, MX_SCALE_OCP, 0, 0};
    QuantizedPair p = quantized_pair(a, b, M, N, K, opt);
    float *dvar = (float*)device_malloc(M * 4, "var"), *dsq = (float*)device_malloc(M * 4, "sq");
    row_stats_kernel<<<ceil_div(M, 8), 256>>>(dvar, dsq, p.a, M, K);
    cudaCheckLaunch();
    int* didx = (int*)device_malloc(k * 4, "idx");
    topk_rows(didx, dsq, M, k, 0);
    float* dout = (float*)device_malloc((size_t)M * N * 4, "out");
    quantized_pair_exact_gemm(dout, &p);
    float* plain = (float*)download(dout, (size_t)M * N * 4);
    mx_zero_rows(&p.qa, didx, k, 0);
    quantized_pair_exact_gemm(dout, &p);
    floatX* ga = (floatX*)device_malloc((size_t)k * K * 2, "gathered");
    gather_rows_kernel<<<ceil_div((long)k * K / 8, 256), 256>>>(ga, p.a, didx, k, K);
    cudaCheckLaunch();
    float* part = (float*)device_malloc((size_t)k * N * 4, "part");
    matmul(part, true, p.b, ga, NULL, N, k, K, true, false, 0.0f, gemm_single, 0);
    scatter_add_kernel<float><<<ceil_div((long)k * N, 256), 256>>>(dout, part, didx, k, M, N, true);
    cudaCheckLaunch();
    float* oe = (float*)download(dout, (size_t)M * N * 4);
    double e_plain = rel_frob_f32_f64(plain, exact, (size_t)M * N), e_oe = rel_frob_f32_f64(oe, exact, (size_t)M * N);
    printf("  outlier extraction (k=%d rows of %d with outliers every 7th row): IHT %.4f -> IHT + OE %.4f\n", k, M, e_plain, e_oe);
    CHECK(e_oe < 0.8 * e_plain, "OE did not reduce the error: %.4f vs %.4f", e_oe, e_plain);
    free(a); free(b); free(exact); free(plain); free(oe);
    quantized_pair_free(&p);
    void* bufs[] = {dvar, dsq, didx, dout, ga, part};
    for (int i = 0; i < 6; i++) { cudaCheck(cudaFree(bufs[i])); }
}

// the Blackwell native FP4 GEMM vs the exact path; only where the GPU is sm_100 or newer
static void test_native_sm100(int M, int N, int K) {
    int major;
    cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    if (major < 10) { test_skip("test_mxfp4_gpu native MXFP4 GEMM", "needs sm_100, this GPU is sm_%d0", major); return; }
    float *a = make_data(DATA_GAUSS, M, K), *b = make_data(DATA_GAUSS, N, K);
    MXQuantOptions opt = {1, MX_SCALE_OCP, 0, 0};
    QuantizedPair p = quantized_pair(a, b, M, N, K, opt);
    uint8_t *ta = (uint8_t*)device_malloc(mx_tiled_scales_bytes(M, K), "ta"), *tb = (uint8_t*)device_malloc(mx_tiled_scales_bytes(N, K), "tb");
    floatX* dn = (floatX*)device_malloc((size_t)M * N * 2, "native");
    float* de = (float*)device_malloc((size_t)M * N * 4, "exact");
    mx_gemm_native_sm100(dn, &p.qa, &p.qb, ta, tb, 0);
    quantized_pair_exact_gemm(de, &p);
    floatX* gn = (floatX*)download(dn, (size_t)M * N * 2);
    float* ge = (float*)download(de, (size_t)M * N * 4);
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < (size_t)M * N; i++) { double d = __bfloat162float(gn[i]) - ge[i]; d2 += d * d; r2 += (double)ge[i] * ge[i]; }
    printf("  native MXFP4 GEMM vs exact path: %.2e\n", sqrt(d2 / r2));
    CHECK(sqrt(d2 / r2) < 1e-2, "native MXFP4 GEMM differs from the exact path");
    free(a); free(b); free(gn); free(ge);
    quantized_pair_free(&p);
    void* bufs[] = {ta, tb, dn, de};
    for (int i = 0; i < 4; i++) { cudaCheck(cudaFree(bufs[i])); }
}

// counts the floats v of the encoder's domain (finite, |v| < 8 * 2^e; bit patterns first + thread) where the
// quantizers' encoder at block exponent e and the shared reference e2m1_encode_rne(ldexpf(v, -e)) disagree
__global__ void encoder_mismatch_kernel(unsigned long long* mismatches, uint32_t first, int e) {
    uint32_t bits = first + blockIdx.x * blockDim.x + threadIdx.x;
    float v = __uint_as_float(bits);
    MXScaledEncoder k = mx_scaled_encoder(e);
    bool domain = !mx_nonfinite(v) && fabsf(v) < ldexpf(8.0f, e);
    int bad = domain && e2m1_encode_scaled(&k, v) != e2m1_encode_rne(ldexpf(v, -e));
    bad = __reduce_add_sync(0xffffffffu, bad);
    if (threadIdx.x % 32 == 0 && bad) { atomicAdd(mismatches, (unsigned long long)bad); }
}

// every block exponent e in [-127, 126] times every float bit pattern (those of the domain count)
static void test_encoder_exhaustive(void) {
    unsigned long long* d;
    cudaCheck(cudaMalloc(&d, sizeof(*d)));
    cudaCheck(cudaMemset(d, 0, sizeof(*d)));
    for (int e = -127; e <= 126; e++) {
        for (uint64_t first = 0; first < (1ull << 32); first += 1ull << 30) {
            encoder_mismatch_kernel<<<(1u << 30) / 256, 256>>>(d, (uint32_t)first, e);
            cudaCheckLaunch();
        }
    }
    unsigned long long h = 0;
    cudaCheck(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
    cudaCheck(cudaFree(d));
    printf("  E2M1 encoder vs reference on all 2^32 float patterns x all 254 block exponents: %llu mismatches\n", h);
    CHECK(h == 0, "the quantizers' E2M1 encoder differs from the reference on %llu (e, v) pairs", h);
}

static void bad_rows_shape(void) { MXOperand op = {4, 48, NULL, NULL}; MXQuantOptions o = {0, 0, 0, 0}; mx_quantize_rows(&op, NULL, 4, 48, o, 0); }
static void bad_cols_shape(void) { MXOperand op = {16, 40, NULL, NULL}; MXQuantOptions o = {0, 0, 0, 0}; mx_quantize_cols(&op, NULL, 40, 16, o, NULL, NULL, 0); }
static void bad_one_pass_k(void) {
    MXQuantOptions o = {0, 0, 0, 0};
    E4M3Operand e = {4, 32800, NULL, NULL, NULL, NULL};
    mx_quantize_rows_e4m3(&e, NULL, 4, 32800, o, 0);
}

int main(void) {
    CHECK(child_fails_with(bad_rows_shape, "multiple of 32"), "K=48 is refused with a clear message");
    CHECK(child_fails_with(bad_cols_shape, "multiple of 32"), "R=40 for column quantization is refused with a clear message");
    CHECK(child_fails_with(bad_one_pass_k, "K=32800 is above 32768"), "K above the one-pass quantizer's limit is refused with a clear message");
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: the MXFP4 tests need one"); }
    uint64_t seed = (uint64_t)time(NULL);
    rng_seed(&rng, seed);
    printf("seed %llu\n", (unsigned long long)seed);
    matmul_init();
    test_encoder_exhaustive();
    // the one-pass E4M3 quantizer packs K / 32 threads a row into CTAs of about 256: 96 and 160 (3 and 5 blocks: a
    // warp holds parts of up to 12 rows), 1600 (50 blocks: rows straddle warps, 6 idle threads), 1024 and 3072 (whole
    // warps), 6400 (one row of 200 threads a CTA), 3 x 32768 (the longest rows, 1024 threads); 37 x 160: 185 blocks,
    // a partly filled last warp in the one-thread-per-block kernels and a partly filled CTA (rows only: 37 % 32 != 0)
    int shapes[8][2] = {{96, 256}, {64, 96}, {200, 1024}, {40, 3072}, {64, 6400}, {37, 160}, {3, 32768}, {45, 1600}};
    for (int kind = 0; kind < NUM_DATA; kind++) {
        for (int s = 0; s < 8; s++) {
            for (int h = 0; h < 2; h++) {
                for (int rule = 0; rule < MX_NUM_SCALE_RULES; rule++) {
                    for (int sr = 0; sr < 2; sr++) {
                        MXQuantOptions opt = {h, rule, sr, seed + 17};
                        test_quantize(kind, shapes[s][0], shapes[s][1], opt);
                    }
                }
            }
        }
    }
    printf("quantization: %d checks so far, %d failed\n", tests_passed + tests_failed, tests_failed);
    double no_h = test_gemm(DATA_COL_OUTLIERS, 256, 192, 512, 0);
    double with_h = test_gemm(DATA_COL_OUTLIERS, 256, 192, 512, 1);
    CHECK(with_h < no_h, "Hadamard did not reduce the error on in-block (column) outliers: %.4f vs %.4f", with_h, no_h);
    test_gemm(DATA_GAUSS, 128, 256, 1024, 1);
    test_gemm(DATA_HEAVY, 128, 256, 1024, 0);
    test_gemm(DATA_HUGE_TINY, 64, 64, 256, 0);
    test_stats_and_classifier();
    test_topk(1000, 64, 64);
    test_topk(300, 32, 1);
    test_topk(64, 32, 64);
    test_outlier_extraction(512, 256, 512, 64);
    test_native_sm100(256, 256, 512);
    matmul_free();
    return test_summary("test_mxfp4_gpu");
}
