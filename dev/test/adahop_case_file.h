// Reader for the AdaHOP linear-layer case files written by dev/adahop_linear_ref.py (C and C++).
//
// One linear y = x W^T with x [N x Cin], W [Cout x Cin], dY [N x Cout]; its three GEMMs in NT form
// out = A B^T, both operands [rows x K] quantized in 32-blocks along K:
//   g = 0 fwd: A = x    [N x Cin],  B = W   [Cout x Cin] -> y  [N x Cout]
//   g = 1 dx : A = dY   [N x Cout], B = W^T [Cin x Cout] -> dX [N x Cin]
//   g = 2 dw : A = dY^T [Cout x N], B = x^T [Cin x N]    -> dW [Cout x Cin]
// Strategies: 0 IHT, 1 IHT + OE on rows of A, 2 IHT + OE on rows of B (output columns), 3 BF16, 4 plain MXFP4.
// With stochastic = 1 only the A operands of dx and dw (dY) use stochastic rounding, with seed
// s_g = mx_mix64(seed ^ g) for A (B would use s_g ^ 0xB); the SR index is row * K + k of the NT layout.
//
// Format, little endian:
//   int32 header[256]: [0]=20261204 magic, [1]=1 version, [2]=N, [3]=Cin, [4]=Cout, [5..7]=strategies
//     fwd/dx/dw, [8]=oe_k, [9]=scale rule (0 OCP, 1 round-up), [10]=stochastic (0/1), [11]=input kind
//     (0 gaussian, 1 row outliers, 2 column outliers, 3 heavy tails, 4 extremes; informational),
//     [12..13]=seed (int64, low word then high word), [14..16]=OE index counts k of fwd/dx/dw
//     (min(oe_k, rows of the extracted operand) under strategies 1 / 2, else 0); other slots zero.
//   float32 x [N*Cin], W [Cout*Cin], dY [N*Cout]          (bfloat16 values)
//   float32 y [N*Cout], dX [N*Cin], dW [Cout*Cin]          (float64 products rounded to float32)
//   for g in (fwd, dx, dw), operand in (A, B): uint8 codes [rows*K/2], uint8 scales [rows*K/32]
//     (element 2i in the low nibble; E8M0 scales; both empty when strategy g is BF16)
//   for g in (fwd, dx, dw): int32 OE indices [k_g], ascending
#ifndef DEV_TEST_ADAHOP_CASE_FILE_H
#define DEV_TEST_ADAHOP_CASE_FILE_H

#include "llmc/utils.h"
#include "dev/test/test_file.h"

#define CASE_MAGIC 20261204
#define CASE_VERSION 1
#define CASE_HEADER_INTS 256
#define CASE_STRAT_PLAIN 4      // 0..3 are STRAT_IHT, STRAT_IHT_OE_ROWS_A, STRAT_IHT_OE_ROWS_B, STRAT_BF16

typedef struct {
    int N, Cin, Cout;
    int strategy[3];            // fwd, dx, dw
    int oe_k, rule, stochastic, kind;
    uint64_t seed;
    float *x, *W, *dY;          // inputs
    float *y, *dX, *dW;         // reference outputs
    int rows[3][2], K[3];       // NT-form operand shapes: operand o of GEMM g is rows[g][o] x K[g]
    uint8_t* codes[3][2];       // [rows*K/2] or NULL (BF16)
    uint8_t* scales[3][2];      // [rows*K/32] or NULL (BF16)
    int k[3];                   // OE index counts
    int* idx[3];                // [k[g]] or NULL
} AdahopCase;

static const char* const case_gemm_names[3] = {"fwd", "dx", "dw"};

// reads and validates a case file; any problem is a clear error and exit(1)
static inline void adahop_case_read(const char* path, AdahopCase* c) {
    int32_t h[CASE_HEADER_INTS];
    long size;
    FILE* fp = test_file_open(path, "case file", h, CASE_HEADER_INTS, CASE_MAGIC, CASE_VERSION, &size);
    memset(c, 0, sizeof(*c));
    c->N = h[2]; c->Cin = h[3]; c->Cout = h[4];
    if (c->N <= 0 || c->Cin <= 0 || c->Cout <= 0 || c->N % 32 || c->Cin % 32 || c->Cout % 32) {
        die("case file '%s': N=%d Cin=%d Cout=%d must be positive multiples of 32", path, c->N, c->Cin, c->Cout);
    }
    c->oe_k = h[8]; c->rule = h[9]; c->stochastic = h[10]; c->kind = h[11];
    c->seed = (uint64_t)(uint32_t)h[12] | ((uint64_t)(uint32_t)h[13] << 32);
    if (c->oe_k <= 0) { die("case file '%s': oe_k=%d must be positive", path, c->oe_k); }
    if (c->rule != 0 && c->rule != 1) { die("case file '%s': unknown scale rule %d", path, c->rule); }
    if (c->stochastic != 0 && c->stochastic != 1) { die("case file '%s': stochastic=%d must be 0 or 1", path, c->stochastic); }
    int N = c->N, Cin = c->Cin, Cout = c->Cout;
    int rows[3][2] = {{N, Cout}, {N, Cin}, {Cout, Cin}}, K[3] = {Cin, Cout, N};
    long expected = (long)sizeof(h) + 4L * (2L * ((long)N * Cin + (long)Cout * Cin + (long)N * Cout));
    for (int g = 0; g < 3; g++) {
        int s = h[5 + g];
        if (s < 0 || s > CASE_STRAT_PLAIN) { die("case file '%s': %s strategy %d is not in 0..4", path, case_gemm_names[g], s); }
        c->strategy[g] = s;
        c->K[g] = K[g];
        c->rows[g][0] = rows[g][0];
        c->rows[g][1] = rows[g][1];
        int want_k = s == 1 ? (c->oe_k < rows[g][0] ? c->oe_k : rows[g][0])
                   : s == 2 ? (c->oe_k < rows[g][1] ? c->oe_k : rows[g][1]) : 0;
        if (h[14 + g] != want_k) {
            die("case file '%s': %s has %d OE indices, strategy %d with oe_k=%d implies %d", path, case_gemm_names[g],
                h[14 + g], s, c->oe_k, want_k);
        }
        c->k[g] = want_k;
        if (s != 3) { expected += (long)(rows[g][0] + rows[g][1]) * K[g] / 32 * 17; }   // 16 code bytes + 1 scale per block
        expected += 4L * want_k;
    }
    test_file_check_size(path, "case file", size, expected);
    size_t nx = (size_t)N * Cin, nw = (size_t)Cout * Cin, ndy = (size_t)N * Cout;
    c->x = (float*)fread_new(fp, sizeof(float), nx, "case x");
    c->W = (float*)fread_new(fp, sizeof(float), nw, "case W");
    c->dY = (float*)fread_new(fp, sizeof(float), ndy, "case dY");
    c->y = (float*)fread_new(fp, sizeof(float), ndy, "case y");
    c->dX = (float*)fread_new(fp, sizeof(float), nx, "case dX");
    c->dW = (float*)fread_new(fp, sizeof(float), nw, "case dW");
    for (int g = 0; g < 3; g++) {
        if (c->strategy[g] == 3) { continue; }
        for (int o = 0; o < 2; o++) {
            size_t n = (size_t)c->rows[g][o] * c->K[g];
            c->codes[g][o] = (uint8_t*)fread_new(fp, 1, n / 2, "case operand codes");
            c->scales[g][o] = (uint8_t*)fread_new(fp, 1, n / 32, "case operand scales");
        }
    }
    for (int g = 0; g < 3; g++) {
        if (c->k[g] == 0) { continue; }
        c->idx[g] = (int*)fread_new(fp, sizeof(int), (size_t)c->k[g], "case OE indices");
        int lim = c->rows[g][c->strategy[g] == 1 ? 0 : 1];
        for (int j = 0; j < c->k[g]; j++) {
            if (c->idx[g][j] < 0 || c->idx[g][j] >= lim || (j > 0 && c->idx[g][j] <= c->idx[g][j - 1])) {
                die("case file '%s': %s OE index %d at %d is out of range [0, %d) or not ascending", path,
                    case_gemm_names[g], c->idx[g][j], j, lim);
            }
        }
    }
    fclose_check(fp);
}

// frees what adahop_case_read allocated
static inline void adahop_case_free(AdahopCase* c) {
    free(c->x); free(c->W); free(c->dY);
    free(c->y); free(c->dX); free(c->dW);
    for (int g = 0; g < 3; g++) {
        for (int o = 0; o < 2; o++) { free(c->codes[g][o]); free(c->scales[g][o]); }
        free(c->idx[g]);
    }
    memset(c, 0, sizeof(*c));
}

#endif
