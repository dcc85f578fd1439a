// Checks an AdaHOP linear-layer case file written by dev/adahop_linear_ref.py (the PyTorch oracle) against the
// C reference llmc/adahop_cpu.h: for each GEMM (fwd, dx, dw) the OE indices must be identical, the quantized
// operands (codes and scales) equal bit for bit, and the output (y, dX, dW) within 1e-6 relative Frobenius
// error of the C product of the same operands (both are exact products, up to summation order); without
// stochastic rounding the output is also compared with adahop_gemm_nt_ref / mx_gemm_nt_ref.
// Usage: test_adahop_case CASE_FILE [CASE_FILE ...]
#include "llmc/adahop_cpu.h"
#include "dev/test/test_common.h"
#include "dev/test/adahop_case_file.h"

#define OUT_TOL 1e-6

// relative Frobenius error ||got - ref|| / ||ref|| (0 when both are zero, Inf when only ref is)
static double rel_fro(const float* got, const double* ref, size_t n) {
    double d = 0.0, r = 0.0;
    for (size_t i = 0; i < n; i++) { double e = (double)got[i] - ref[i]; d += e * e; r += ref[i] * ref[i]; }
    if (r == 0.0) { return d == 0.0 ? 0.0 : INFINITY; }
    return sqrt(d / r);
}

// same for two double arrays
static double rel_fro_dd(const double* got, const double* ref, size_t n) {
    double d = 0.0, r = 0.0;
    for (size_t i = 0; i < n; i++) { double e = got[i] - ref[i]; d += e * e; r += ref[i] * ref[i]; }
    if (r == 0.0) { return d == 0.0 ? 0.0 : INFINITY; }
    return sqrt(d / r);
}

// index of the first differing byte, or -1
static long first_diff(const uint8_t* a, const uint8_t* b, size_t n) {
    for (size_t i = 0; i < n; i++) { if (a[i] != b[i]) { return (long)i; } }
    return -1;
}

// dst [C x R] = transpose of src [R x C]
static float* transpose_copy(const float* src, int R, int C) {
    float* dst = (float*)malloc_check((size_t)R * C * sizeof(float));
    for (int r = 0; r < R; r++) { for (int c = 0; c < C; c++) { dst[(size_t)c * R + r] = src[(size_t)r * C + c]; } }
    return dst;
}

// a copy of src [R x C]
static float* copy_of(const float* src, int R, int C) {
    float* dst = (float*)malloc_check((size_t)R * C * sizeof(float));
    memcpy(dst, src, (size_t)R * C * sizeof(float));
    return dst;
}

// one NT-form operand of a GEMM as it sits in memory: src [R x C] row-major; the operand is src itself
// (transposed = 0, rows R, K C) or its transpose (transposed = 1, rows C, K R)
typedef struct { const float* src; int R, C, transposed; } SrcOperand;

// quantizes the operand (with `zero` rows of the NT form zeroed first) into q, the C way
static void quantize_operand(MXTensor* q, SrcOperand op, const int* zero, int nzero, int hadamard, int rule,
                             int stochastic, uint64_t seed) {
    float* s = copy_of(op.src, op.R, op.C);
    for (int j = 0; j < nzero; j++) {
        if (!op.transposed) { memset(s + (size_t)zero[j] * op.C, 0, (size_t)op.C * sizeof(float)); }
        else { for (int r = 0; r < op.R; r++) { s[(size_t)r * op.C + zero[j]] = 0.0f; } }
    }
    if (!op.transposed) { quantize_rows_cpu(q, s, op.R, op.C, hadamard, rule, stochastic, seed); }
    else { quantize_cols_cpu(q, s, op.R, op.C, hadamard, rule, stochastic, seed); }
    free(s);
}

// the k largest-norm rows of the operand's NT form (columns of src when transposed)
static void operand_topk(SrcOperand op, int k, int* idx) {
    if (!op.transposed) { topk_rows_cpu(op.src, op.R, op.C, k, idx); }
    else { topk_cols_cpu(op.src, op.R, op.C, k, idx); }
}

// checks GEMM g of the case
static void check_gemm(const AdahopCase* c, int g, const char* path) {
    const char* name = case_gemm_names[g];
    int N = c->N, Cin = c->Cin, Cout = c->Cout;
    SrcOperand ops[3][2] = {
        {{c->x, N, Cin, 0}, {c->W, Cout, Cin, 0}},
        {{c->dY, N, Cout, 0}, {c->W, Cout, Cin, 1}},
        {{c->dY, N, Cout, 1}, {c->x, N, Cin, 1}},
    };
    const float* file_out[3] = {c->y, c->dX, c->dW};
    int M = c->rows[g][0], Nn = c->rows[g][1], K = c->K[g], s = c->strategy[g];
    // NT forms of both operands (unquantized)
    float* nt[2];
    for (int o = 0; o < 2; o++) {
        SrcOperand op = ops[g][o];
        nt[o] = op.transposed ? transpose_copy(op.src, op.R, op.C) : copy_of(op.src, op.R, op.C);
    }
    double* out = (double*)malloc_check((size_t)M * Nn * sizeof(double));
    if (s == STRAT_BF16) {
        gemm_nt_f64(out, nt[0], nt[1], M, Nn, K);
    } else {
        int* idx = NULL;
        int k = c->k[g], oe_op = s == STRAT_IHT_OE_ROWS_A ? 0 : 1;
        if (k > 0) {
            idx = (int*)malloc_check((size_t)k * sizeof(int));
            operand_topk(ops[g][oe_op], k, idx);
            CHECK(memcmp(idx, c->idx[g], (size_t)k * sizeof(int)) == 0, "%s %s: the %d OE indices differ (C first %d, file first %d)",
                  path, name, k, idx[0], c->idx[g][0]);
        }
        uint64_t gseed = mx_mix64(c->seed ^ (uint64_t)g);
        float* deq[2];
        for (int o = 0; o < 2; o++) {
            int rows = c->rows[g][o];
            int sr = c->stochastic && g != GEMM_FWD && o == 0;
            MXTensor q = mxtensor_alloc(rows, K);
            quantize_operand(&q, ops[g][o], idx, o == oe_op ? k : 0, s != CASE_STRAT_PLAIN, c->rule, sr,
                             o == 0 ? gseed : gseed ^ 0xB);
            size_t n = (size_t)rows * K;
            long dc = first_diff(q.codes, c->codes[g][o], n / 2), ds = first_diff(q.scales, c->scales[g][o], n / 32);
            CHECK(dc < 0, "%s %s operand %c: code byte %ld differs (C 0x%02x, file 0x%02x)", path, name, "AB"[o], dc,
                  dc < 0 ? 0 : q.codes[dc], dc < 0 ? 0 : c->codes[g][o][dc]);
            CHECK(ds < 0, "%s %s operand %c: scale byte %ld differs (C 0x%02x, file 0x%02x)", path, name, "AB"[o], ds,
                  ds < 0 ? 0 : q.scales[ds], ds < 0 ? 0 : c->scales[g][o][ds]);
            deq[o] = (float*)malloc_check(n * sizeof(float));
            dequantize_cpu(deq[o], &q);
            mxtensor_free(&q);
        }
        gemm_nt_f64(out, deq[0], deq[1], M, Nn, K);
        if (s == STRAT_IHT_OE_ROWS_A) {
            for (int j = 0; j < k; j++) { gemm_nt_f64(out + (size_t)idx[j] * Nn, nt[0] + (size_t)idx[j] * K, nt[1], 1, Nn, K); }
        } else if (s == STRAT_IHT_OE_ROWS_B) {
            double* col = (double*)malloc_check((size_t)M * sizeof(double));
            for (int j = 0; j < k; j++) {
                gemm_nt_f64(col, nt[0], nt[1] + (size_t)idx[j] * K, M, 1, K);
                for (int i = 0; i < M; i++) { out[(size_t)i * Nn + idx[j]] = col[i]; }
            }
            free(col);
        }
        if (!c->stochastic || g == GEMM_FWD) {   // the library's composed references (round to nearest only)
            double* lib = (double*)malloc_check((size_t)M * Nn * sizeof(double));
            if (s == CASE_STRAT_PLAIN) { mx_gemm_nt_ref(lib, nt[0], nt[1], M, Nn, K, 0, c->rule); }
            else { adahop_gemm_nt_ref(lib, nt[0], nt[1], M, Nn, K, s, c->oe_k < (oe_op ? Nn : M) ? c->oe_k : (oe_op ? Nn : M), c->rule); }
            double e = rel_fro_dd(out, lib, (size_t)M * Nn);
            CHECK(e <= 1e-12, "%s %s: the C pieces and adahop_gemm_nt_ref differ by %.3g", path, name, e);
            free(lib);
        }
        free(deq[0]); free(deq[1]); free(idx);
    }
    double err = rel_fro(file_out[g], out, (size_t)M * Nn);
    CHECK(err <= OUT_TOL, "%s %s: output relative Frobenius error %.3g > %g", path, name, err, OUT_TOL);
    printf("  %-3s strategy %d k=%-3d %4d x %-4d K=%-4d output rel err %.3g\n", name, s, c->k[g], M, Nn, K, err);
    free(out); free(nt[0]); free(nt[1]);
}

// 1 if every value is a bfloat16 (low 16 bits zero)
static int all_bf16(const float* v, size_t n) {
    for (size_t i = 0; i < n; i++) { if (mx_float_bits(v[i]) & 0xFFFFu) { return 0; } }
    return 1;
}

int main(int argc, char** argv) {
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        printf("usage: %s CASE_FILE [CASE_FILE ...]\nchecks case files of dev/adahop_linear_ref.py against llmc/adahop_cpu.h\n", argv[0]);
        return argc < 2 ? 1 : 0;
    }
    for (int a = 1; a < argc; a++) {
        AdahopCase c;
        adahop_case_read(argv[a], &c);
        printf("%s: N=%d Cin=%d Cout=%d strategies %d,%d,%d oe_k=%d rule=%d sr=%d kind=%d seed=%llu\n", argv[a], c.N, c.Cin,
               c.Cout, c.strategy[0], c.strategy[1], c.strategy[2], c.oe_k, c.rule, c.stochastic, c.kind,
               (unsigned long long)c.seed);
        CHECK(all_bf16(c.x, (size_t)c.N * c.Cin) && all_bf16(c.W, (size_t)c.Cout * c.Cin) && all_bf16(c.dY, (size_t)c.N * c.Cout),
              "%s: inputs are not all bfloat16 values", argv[a]);
        for (int g = 0; g < 3; g++) { check_gemm(&c, g, argv[a]); }
        adahop_case_free(&c);
    }
    return test_summary("test_adahop_case");
}
