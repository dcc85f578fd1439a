// The producers that emit operands (dev/cuda/fused_operands.cuh) against the path they replace: GELU, SwiGLU, LayerNorm
// and RMSNorm forward (the norms with and without the residual add), and GELU and SwiGLU backward (the fc / gate-up
// linear's output gradient; GELU's in place, as gelu_backward runs), emitting their BF16 output, the row-wise E4M3
// operand with its row scales and inexact-block count, the row-wise MXFP4 codes, x^T in MXFP4 and the column sums of
// squares, each compared bit for bit with gelu_forward / swiglu_forward / layernorm_forward / rmsnorm_forward /
// gelu_backward / swiglu_backward followed by the separate quantizers (quantize_operands_separate:
// mx_quantize_rows_e4m3, mx_quantize_rows and mx_quantize_cols), and the norms' residual sum, mean and rstd with
// theirs, on random, outlier-heavy, zero, huge + tiny and NaN/Inf inputs, at shapes with a lone 32-token strip,
// partial 256-channel chunks and the MLP widths of every preset, for each strategy
// combination with round-to-nearest and stochastic rounding (a different seed for the rows and for x^T, as the dX and
// dW GEMMs have). Every emitted buffer starts as a different byte pattern than its reference, so a missed write
// fails. Unsupported shapes, an in-place SwiGLU backward and a norm's residual add without its sum exit with a
// message.
#include "llmc/cuda_common.cuh"
#include "llmc/mxfp4.cuh"
#include "llmc/gelu.cuh"
#include "llmc/swiglu.cuh"
#include "llmc/layernorm.cuh"
#include "llmc/rmsnorm.cuh"
#include "dev/cuda/fused_operands.cuh"
#include "dev/cuda/fused_reference.cuh"
#include "llmc/llama_config.h"
#include "dev/cuda/test_compare.cuh"

enum { DATA_GAUSS, DATA_HEAVY, DATA_TOKEN_OUTLIERS, DATA_CHANNEL_OUTLIERS, DATA_ZEROS, DATA_HUGE_TINY, DATA_NONFINITE, NUM_DATA };
static const char* data_names[NUM_DATA] = {"gaussian", "heavy-tailed", "token outliers", "channel outliers", "zeros",
                                           "huge + tiny", "NaN/Inf"};

// a BF16-representable producer input [N x C] of the given kind
static float* make_input(int kind, int N, int C) {
    size_t n = (size_t)N * C;
    float* x = (float*)malloc_check(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        float g = 2.0f * rng_normal(&rng);
        if (kind == DATA_HEAVY) { g /= sqrtf(0.02f + rng_uniform(&rng)); }
        x[i] = g;
    }
    for (int r = 0; r < N; r++) {
        for (int c = 0; c < C; c++) {
            float* v = &x[(size_t)r * C + c];
            if (kind == DATA_TOKEN_OUTLIERS && r % 7 == 0) { *v *= 30.0f; }
            if (kind == DATA_CHANNEL_OUTLIERS && c % 37 == 3) { *v *= 30.0f; }
            // zero blocks along both layouts (signed zeros: GELU keeps the sign), a zero token and a zero channel
            bool zero = (c / 32) % 3 == 1 || (r / 32 + c) % 5 == 0 || r == 1 || c == 2;
            if (kind == DATA_ZEROS && zero) { *v = (c % 2) ? -0.0f : 0.0f; }
            // blocks of very different scales in one row: E4M3 blocks below the exact range
            if (kind == DATA_HUGE_TINY) { *v *= (c / 64 + r) % 2 ? 1e30f : 1e-30f; }
        }
    }
    if (kind == DATA_NONFINITE) { x[5] = NAN; x[n / 2] = INFINITY; x[n - 1] = -INFINITY; x[n / 3] = -INFINITY; }
    for (size_t i = 0; i < n; i++) { x[i] = __bfloat162float(__float2bfloat16(x[i])); }
    return x;
}

// a norm's input a [N x C] of the given kind: make_input's, except huge + tiny, whose blocks the norm would bring to
// one scale: there a Gaussian with every fourth token 1e30 times larger (its squares overflow: rstd 0)
static float* make_norm_input(int kind, int N, int C) {
    if (kind != DATA_HUGE_TINY) { return make_input(kind, N, C); }
    float* x = make_input(DATA_GAUSS, N, C);
    for (int r = 3; r < N; r += 4) {
        for (int c = 0; c < C; c++) { x[(size_t)r * C + c] = __bfloat162float(__float2bfloat16(x[(size_t)r * C + c] * 1e30f)); }
    }
    return x;
}

// a norm's weight (or, with is_bias, its bias) [C] for inputs of the given kind: around 1 (0), with zero channel
// blocks and a zero channel (weight 0, bias 0: zero blocks in both layouts) for the zeros, and channel blocks 1e20
// and 1e-20 times larger for huge + tiny (blocks of very different scales in one output row)
static float* make_norm_param(int kind, int C, bool is_bias) {
    float* w = (float*)malloc_check((size_t)C * sizeof(float));
    for (int c = 0; c < C; c++) {
        float v = (is_bias ? 0.0f : 1.0f) + 0.2f * rng_normal(&rng);
        if (kind == DATA_ZEROS && (is_bias || (c / 32) % 3 == 1 || c == 2)) { v = 0.0f; }
        if (kind == DATA_HUGE_TINY) { v *= (c / 64) % 2 ? 1e20f : 1e-20f; }
        w[c] = __bfloat162float(__float2bfloat16(v));
    }
    return w;
}

// what one test asks the producer to emit
typedef struct {
    const char* name;
    int bf16, e4m3_rows, row_codes, row_hadamard, cols, col_hadamard, col_sq, stochastic, rule;
} EmitCase;

// every output buffer of one side (fused or reference), filled with `fill` bytes
typedef struct {
    floatX* bf16;
    E4M3Operand rows;
    MXOperand row_codes, cols;
    float *col_sq, *scratch;
    floatX* res;            // a norm's residual sum a + b [N x C]
    float *mean, *rstd;     // a norm's row statistics [N]
} EmitBuffers;

static EmitBuffers buffers_alloc(int N, int C, uint8_t fill) {
    EmitBuffers b;
    b.bf16 = (floatX*)device_malloc((size_t)N * C * sizeof(floatX), "BF16 output");
    b.rows = e4m3_operand_alloc(N, C);
    b.row_codes = mx_operand_alloc(N, C);
    b.cols = mx_operand_alloc(C, N);
    b.col_sq = (float*)device_malloc((size_t)C * sizeof(float), "column sums of squares");
    b.scratch = (float*)device_malloc(mx_col_sq_scratch_floats(N, C) * sizeof(float), "column square partials");
    b.res = (floatX*)device_malloc((size_t)N * C * sizeof(floatX), "residual sum");
    b.mean = (float*)device_malloc((size_t)N * sizeof(float), "row means");
    b.rstd = (float*)device_malloc((size_t)N * sizeof(float), "row rstd");
    cudaCheck(cudaMemset(b.res, fill, (size_t)N * C * sizeof(floatX)));
    cudaCheck(cudaMemset(b.mean, fill, (size_t)N * sizeof(float)));
    cudaCheck(cudaMemset(b.rstd, fill, (size_t)N * sizeof(float)));
    cudaCheck(cudaMemset(b.bf16, fill, (size_t)N * C * sizeof(floatX)));
    cudaCheck(cudaMemset(b.rows.values, fill, (size_t)N * C));
    cudaCheck(cudaMemset(b.rows.row_scale, fill, (size_t)N * sizeof(float)));
    cudaCheck(cudaMemset(b.row_codes.codes, fill, (size_t)N * C / 2));
    cudaCheck(cudaMemset(b.row_codes.scales, fill, (size_t)N * C / 32));
    cudaCheck(cudaMemset(b.cols.codes, fill, (size_t)N * C / 2));
    cudaCheck(cudaMemset(b.cols.scales, fill, (size_t)N * C / 32));
    cudaCheck(cudaMemset(b.col_sq, fill, (size_t)C * sizeof(float)));
    return b;
}

static void buffers_free(EmitBuffers* b) {
    e4m3_operand_free(&b->rows);
    mx_operand_free(&b->row_codes);
    mx_operand_free(&b->cols);
    void* bufs[] = {b->bf16, b->col_sq, b->scratch, b->res, b->mean, b->rstd};
    for (int i = 0; i < 6; i++) { cudaCheck(cudaFree(bufs[i])); }
}

// the OperandEmit of a case over buffers b; with_row_codes: the row codes whatever the case asks
static OperandEmit emit_of(const EmitCase* k, EmitBuffers* b, bool with_row_codes) {
    OperandEmit e;
    memset(&e, 0, sizeof(e));
    e.bf16 = k->bf16 ? b->bf16 : NULL;
    e.rows = k->e4m3_rows ? &b->rows : NULL;
    e.row_codes = k->row_codes || with_row_codes ? &b->row_codes : NULL;
    MXQuantOptions ro = {k->row_hadamard, k->rule, k->stochastic, 0x5EED1};
    MXQuantOptions co = {k->col_hadamard, k->rule, k->stochastic, 0x5EED2};
    e.row_opt = ro;
    e.col_opt = co;
    e.cols = k->cols ? &b->cols : NULL;
    e.col_sq = k->col_sq ? b->col_sq : NULL;
    e.col_sq_scratch = k->col_sq ? b->scratch : NULL;
    return e;
}

// 1 if `bytes` device bytes at got and want are equal; prints the first difference
static int same_bytes(const char* what, const void* got, const void* want, size_t bytes) {
    uint8_t *g = (uint8_t*)download(got, bytes), *w = (uint8_t*)download(want, bytes);
    size_t i = 0;
    while (i < bytes && g[i] == w[i]) { i++; }
    if (i < bytes) { printf("  %s: byte %zu of %zu: fused 0x%02x, separate 0x%02x\n", what, i, bytes, g[i], w[i]); }
    free(g); free(w);
    return i == bytes;
}

enum { PRODUCER_GELU, PRODUCER_SWIGLU, PRODUCER_GELU_BACKWARD, PRODUCER_SWIGLU_BACKWARD, PRODUCER_LAYERNORM,
       PRODUCER_RMSNORM, NUM_PRODUCERS };
static const char* producer_names[NUM_PRODUCERS] = {"GELU", "SwiGLU", "GELU backward", "SwiGLU backward", "LayerNorm",
                                                    "RMSNorm"};
static bool is_norm(int producer) { return producer == PRODUCER_LAYERNORM || producer == PRODUCER_RMSNORM; }

// a producer's inputs for an output [N x C]: inp is GELU's [N x C], SwiGLU's gate/up [N x 2C], a backward
// producer's forward input ([N x C]: GELU's, or SwiGLU's gate/up of H = C/2 pairs) or a norm's a [N x C]; grad
// (backward only) the gradient of the forward's output ([N x C] for GELU, [N x C/2] for SwiGLU); a norm's residual
// b [N x C] (NULL: none), weight and bias [C]
typedef struct { const floatX *inp, *grad, *b, *weight, *bias; } ProducerInputs;

static floatX* device_input(float* x, size_t n) {
    floatX* d = to_device_bf16(x, n);
    free(x);
    return d;
}

// the inputs of producer p with output [N x C], of the given kind; a norm's with its residual b. A backward
// producer's output gets the kind from the gradient: huge + tiny forward inputs would only overflow it.
static ProducerInputs make_inputs(int p, int kind, int N, int C) {
    ProducerInputs in = {NULL, NULL, NULL, NULL, NULL};
    if (is_norm(p)) {
        in.inp = device_input(make_norm_input(kind, N, C), (size_t)N * C);
        in.b = device_input(make_norm_input(kind, N, C), (size_t)N * C);
        in.weight = device_input(make_norm_param(kind, C, false), C);
        in.bias = device_input(make_norm_param(kind, C, true), C);
        return in;
    }
    int inp_cols = p == PRODUCER_SWIGLU ? 2 * C : C;
    int grad_cols = p == PRODUCER_GELU_BACKWARD ? C : p == PRODUCER_SWIGLU_BACKWARD ? C / 2 : 0;
    int inp_kind = grad_cols && kind == DATA_HUGE_TINY ? DATA_GAUSS : kind;
    in.inp = device_input(make_input(inp_kind, N, inp_cols), (size_t)N * inp_cols);
    if (grad_cols) { in.grad = device_input(make_input(kind, N, grad_cols), (size_t)N * grad_cols); }
    return in;
}

static void free_inputs(ProducerInputs* in) {
    const floatX* bufs[] = {in->inp, in->grad, in->b, in->weight, in->bias};
    for (int i = 0; i < 5; i++) { cudaCheck(cudaFree((void*)bufs[i])); }
}

// copies GELU backward's gradient [N x C] into out, which the backward then overwrites in place
static void copy_grad(floatX* out, const ProducerInputs* in, int N, int C) {
    cudaCheck(cudaMemcpy(out, in->grad, (size_t)N * C * sizeof(floatX), cudaMemcpyDeviceToDevice));
}

// the fused producer emitting e (and a norm's residual sum and statistics into o); GELU backward in place, on a copy
// of the gradient in o->bf16, where e keeps the BF16 output
static void run_fused(int producer, const OperandEmit* e, EmitBuffers* o, const ProducerInputs* in, int N, int C) {
    floatX* res = in->b ? o->res : NULL;
    switch (producer) {
    case PRODUCER_GELU: gelu_forward_emit(e, in->inp, N, C, 0); break;
    case PRODUCER_SWIGLU: swiglu_forward_emit(e, in->inp, N, C, 0); break;
    case PRODUCER_GELU_BACKWARD:
        if (e->bf16) { copy_grad(e->bf16, in, N, C); }
        gelu_backward_emit(e, e->bf16 ? e->bf16 : in->grad, in->inp, N, C, 0);
        break;
    case PRODUCER_SWIGLU_BACKWARD: swiglu_backward_emit(e, in->grad, in->inp, N, C / 2, 0); break;
    case PRODUCER_LAYERNORM:
        layernorm_forward_emit(e, o->mean, o->rstd, res, in->inp, in->b, in->weight, in->bias, N, C, 0);
        break;
    default: rmsnorm_forward_emit(e, o->rstd, res, in->inp, in->b, in->weight, N, C, LLAMA_RMS_EPS, 0);
    }
}

// the producer's own kernel writing o->bf16 (and a norm's residual sum and statistics); GELU backward in place
static void run_unfused(int producer, EmitBuffers* o, const ProducerInputs* in, int N, int C) {
    floatX* res = in->b ? o->res : NULL;
    switch (producer) {
    case PRODUCER_GELU: gelu_forward(o->bf16, in->inp, (long)N * C, 0); break;
    case PRODUCER_SWIGLU: swiglu_forward(o->bf16, in->inp, N, C, 0); break;
    case PRODUCER_GELU_BACKWARD:
        copy_grad(o->bf16, in, N, C);
        gelu_backward(o->bf16, in->inp, (long)N * C, 0);
        break;
    case PRODUCER_SWIGLU_BACKWARD: swiglu_backward(o->bf16, in->grad, in->inp, N, C / 2, 0); break;
    case PRODUCER_LAYERNORM:
        layernorm_forward(o->bf16, o->mean, o->rstd, res, in->inp, in->b, in->weight, in->bias, N, C, 0);
        break;
    default: rmsnorm_forward(o->bf16, o->rstd, res, in->inp, in->b, in->weight, N, C, LLAMA_RMS_EPS, 0);
    }
}

// the fused producer (output [N x C], inputs as make_inputs makes them) against the producer's own kernel + the
// separate quantizers, for one input and case
static void test_case(int producer, const EmitCase* k, int kind, const ProducerInputs* in, int N, int C) {
    EmitBuffers fused = buffers_alloc(N, C, 0xA5), ref = buffers_alloc(N, C, 0x5A);
    cudaCheck(cudaMemset(fused.rows.inexact_blocks, 0, sizeof(unsigned long long)));
    cudaCheck(cudaMemset(ref.rows.inexact_blocks, 0, sizeof(unsigned long long)));
    OperandEmit fe = emit_of(k, &fused, k->e4m3_rows);   // the E4M3 rows are made from the row codes
    OperandEmit re = emit_of(k, &ref, false);
    re.bf16 = ref.bf16;
    run_fused(producer, &fe, &fused, in, N, C);
    run_unfused(producer, &ref, in, N, C);
    quantize_operands_separate(&re, ref.bf16, N, C, 0);
    size_t n = (size_t)N * C;
    int ok = 1;
    if (k->bf16) { ok &= same_bytes("BF16 output", fused.bf16, ref.bf16, n * sizeof(floatX)); }
    if (k->e4m3_rows) {
        ok &= same_bytes("E4M3 rows", fused.rows.values, ref.rows.values, n);
        ok &= same_bytes("row scales", fused.rows.row_scale, ref.rows.row_scale, (size_t)N * sizeof(float));
        ok &= same_bytes("inexact E4M3 blocks", fused.rows.inexact_blocks, ref.rows.inexact_blocks, sizeof(unsigned long long));
    }
    if (k->row_codes) {
        ok &= same_bytes("row codes", fused.row_codes.codes, ref.row_codes.codes, n / 2);
        ok &= same_bytes("row scale bytes", fused.row_codes.scales, ref.row_codes.scales, n / 32);
    }
    if (k->cols) {
        ok &= same_bytes("x^T codes", fused.cols.codes, ref.cols.codes, n / 2);
        ok &= same_bytes("x^T scale bytes", fused.cols.scales, ref.cols.scales, n / 32);
    }
    if (k->col_sq) { ok &= same_bytes("column sums of squares", fused.col_sq, ref.col_sq, (size_t)C * sizeof(float)); }
    if (is_norm(producer)) { ok &= same_bytes("rstd", fused.rstd, ref.rstd, (size_t)N * sizeof(float)); }
    if (producer == PRODUCER_LAYERNORM) { ok &= same_bytes("mean", fused.mean, ref.mean, (size_t)N * sizeof(float)); }
    if (in->b) { ok &= same_bytes("residual sum", fused.res, ref.res, n * sizeof(floatX)); }
    CHECK(ok, "%s%s, %s %dx%d, %s: the fused producer differs from the producer + the separate quantizers",
          producer_names[producer], in->b ? " + residual" : "", data_names[kind], N, C, k->name);
    buffers_free(&fused);
    buffers_free(&ref);
}

static const EmitCase cases[] = {
    // name                                       bf16 e4m3 codes rowH cols colH sq  SR  rule
    {"plain forward, plain dW",                      1, 1, 0, 0, 1, 0, 0, 0, MX_SCALE_OCP},
    {"IHT forward, IHT dW, no BF16",                 0, 1, 0, 1, 1, 1, 0, 0, MX_SCALE_OCP},
    {"IHT forward + codes, IHT dW + OE sums",        1, 1, 1, 1, 1, 1, 1, 0, MX_SCALE_OCP},
    {"plain forward, IHT dW + OE sums, no BF16",     0, 1, 0, 0, 1, 1, 1, 0, MX_SCALE_OCP},
    {"IHT forward + codes, plain dW",                1, 1, 1, 1, 1, 0, 0, 0, MX_SCALE_OCP},
    {"IHT forward only",                             0, 1, 0, 1, 0, 0, 0, 0, MX_SCALE_OCP},
    {"plain dW + OE sums only",                      1, 0, 0, 0, 1, 0, 1, 0, MX_SCALE_OCP},
    {"exact path: MXFP4 rows (IHT), plain dW",       0, 0, 1, 1, 1, 0, 0, 0, MX_SCALE_OCP},
    {"stochastic rounding, round-up rule, all",      1, 1, 1, 1, 1, 1, 1, 1, MX_SCALE_ROUNDUP},
    // the gradients' stochastic rounding (OCP rule), row and x^T seeds apart as the dX and dW GEMMs' are
    {"SR: plain dX, plain dW",                       1, 1, 0, 0, 1, 0, 0, 1, MX_SCALE_OCP},
    {"SR: IHT dX, IHT dW + OE sums, no BF16",        0, 1, 0, 1, 1, 1, 1, 1, MX_SCALE_OCP},
    {"SR: plain dX + codes, IHT dW",                 1, 1, 1, 0, 1, 1, 0, 1, MX_SCALE_OCP},
    {"SR: exact path, MXFP4 rows (IHT), plain dW",   0, 0, 1, 1, 1, 0, 0, 1, MX_SCALE_OCP},
    {"SR: IHT dX only",                              0, 1, 0, 1, 0, 0, 0, 1, MX_SCALE_OCP},
    {"BF16 only",                                    1, 0, 0, 0, 0, 0, 0, 0, MX_SCALE_OCP},
};

// shapes in the emitter's constraints (N, C multiples of 32): a lone 32-token strip in the last 64-token block
// (96, 160, 32), partial 256-channel chunks (160, 800, 3104, 5504), GPT-2 MLP widths d12 (3072), d24 (4096) and
// d48 (6400), LLaMA d24's gate/up 2H (5504),
// many blocks (1056 x 1024). SwiGLU backward's H = C/2 puts the gate/up boundary inside a 32-block at 160, 800, 3104.
static const int shapes[][2] = {{64, 256}, {96, 160}, {32, 800}, {160, 3072}, {96, 4096}, {64, 6400}, {96, 3104},
                                {64, 5504}, {1056, 1024}};
// the norms' widths: GPT-2 d12 (768), d24 (1024), d48 (1600), LLaMA-small d8 (448) and d12 (640), a partial chunk
// (800), and 512, at token counts with a lone 32-token strip (32, 96, 160, 1056) and two strips (64)
static const int norm_shapes[][2] = {{96, 768}, {64, 768}, {32, 1024}, {160, 1600}, {96, 800}, {1056, 512}, {96, 448}, {160, 640}};

static OperandEmit no_emit(void) { OperandEmit e; memset(&e, 0, sizeof(e)); return e; }
static void bad_tokens(void) { OperandEmit e = no_emit(); gelu_forward_emit(&e, NULL, 40, 256, 0); }
static void bad_channels(void) { OperandEmit e = no_emit(); gelu_forward_emit(&e, NULL, 64, 48, 0); }
static void bad_rows_shape(void) {
    OperandEmit e = no_emit();
    E4M3Operand rows = {64, 512, NULL, NULL, NULL, NULL};
    e.rows = &rows;
    gelu_forward_emit(&e, NULL, 64, 256, 0);
}
static void bad_cols_shape(void) {
    OperandEmit e = no_emit();
    MXOperand cols = {64, 256, NULL, NULL};
    e.cols = &cols;
    gelu_forward_emit(&e, NULL, 64, 256, 0);
}
static void sums_without_cols(void) {
    OperandEmit e = no_emit();
    float sums;
    e.col_sq = &sums;
    gelu_forward_emit(&e, NULL, 64, 256, 0);
}
static void swiglu_backward_in_place(void) {
    OperandEmit e = no_emit();
    floatX* fch = (floatX*)(uintptr_t)0x100000;   // never read: the overlap is refused before any launch
    e.bf16 = fch;
    swiglu_backward_emit(&e, fch + 64 * 256, fch, 64, 128, 0);
}
static void residual_without_sum(void) {
    OperandEmit e = no_emit();
    layernorm_forward_emit(&e, NULL, NULL, NULL, NULL, (const floatX*)16, NULL, NULL, 64, 256, 0);
}
static void rms_residual_without_sum(void) {
    OperandEmit e = no_emit();
    rmsnorm_forward_emit(&e, NULL, NULL, NULL, (const floatX*)16, NULL, 64, 256, LLAMA_RMS_EPS, 0);
}
static void rows_without_codes(void) {
    OperandEmit e = no_emit();
    E4M3Operand rows = {64, 256, NULL, NULL, NULL, NULL};
    e.rows = &rows;
    gelu_forward_emit(&e, NULL, 64, 256, 0);
}

int main(void) {
    CHECK(child_fails_with(bad_tokens, "must be positive multiples of 32"), "N=40 tokens is refused with a clear message");
    CHECK(child_fails_with(bad_channels, "must be positive multiples of 32"), "C=48 channels is refused with a clear message");
    CHECK(child_fails_with(bad_rows_shape, "the E4M3 operand is 64 x 512"), "a mis-shaped E4M3 operand is refused");
    CHECK(child_fails_with(bad_cols_shape, "the column operand (x^T) is 64 x 256, want 256 x 64"), "a mis-shaped x^T is refused");
    CHECK(child_fails_with(sums_without_cols, "need the column operand"), "column sums without x^T are refused");
    CHECK(child_fails_with(swiglu_backward_in_place, "cannot be written in place"),
          "an in-place SwiGLU backward emit is refused");
    CHECK(child_fails_with(residual_without_sum, "layernorm_forward_emit: the residual add (b given) needs res_out"),
          "a LayerNorm residual add without res_out is refused");
    CHECK(child_fails_with(rms_residual_without_sum, "rmsnorm_forward_emit: the residual add (b given) needs res_out"),
          "an RMSNorm residual add without res_out is refused");
    CHECK(child_fails_with(rows_without_codes, "give row_codes"), "E4M3 rows without their row codes are refused");
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: the fused operand tests need one"); }
    seed_fresh_rng();
    int ncases = (int)(sizeof(cases) / sizeof(cases[0]));
    for (int p = 0; p < NUM_PRODUCERS; p++) {
        bool norm = is_norm(p);
        const int(*sh)[2] = norm ? norm_shapes : shapes;
        int nshapes = norm ? (int)(sizeof(norm_shapes) / sizeof(norm_shapes[0])) : (int)(sizeof(shapes) / sizeof(shapes[0]));
        for (int kind = 0; kind < NUM_DATA; kind++) {
            for (int s = 0; s < nshapes; s++) {
                int N = sh[s][0], C = sh[s][1];
                ProducerInputs in = make_inputs(p, kind, N, C);
                const floatX* b = in.b;
                for (int residual = 0; residual <= (int)norm; residual++) {
                    in.b = residual ? b : NULL;
                    for (int k = 0; k < ncases; k++) { test_case(p, &cases[k], kind, &in, N, C); }
                }
                in.b = b;
                free_inputs(&in);
            }
            printf("  %-15s %-16s: %d checks so far, %d failed\n", producer_names[p], data_names[kind],
                   tests_passed + tests_failed, tests_failed);
        }
    }
    return test_summary("test_fused_operands");
}
