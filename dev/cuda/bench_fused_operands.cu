// Benchmark of the producers that emit operands (dev/cuda/fused_operands.cuh): GELU forward writing the fc projection's
// operands in the same pass (gelu_forward_emit) against gelu_forward followed by the separate quantizers
// (quantize_operands_separate: the E4M3 forward operand, x^T in MXFP4, the OE column sums), at the MLP shapes of
// GPT-2 d24 (N = 32768 tokens, 4C = 4096), d12 (N = 65536, 4C = 3072) and d48 (N = 16384, 4C = 6400), the same for
// SwiGLU at LLaMA-small
// d24 (N = 32768, H = 2752), and for the norms with the residual add in front (the qkv and fc / gate-up inputs):
// LayerNorm at GPT-2 d12 (65536 x 768), d24 (32768 x 1024), d48 (16384 x 1600), RMSNorm at LLaMA-small d24
// (32768 x 1024); and the backward producers of the fc / gate-up linear's output gradient the same way
// (gelu_backward_emit at d12 and d24, in place on the gradient as gelu_backward runs, whose values drift over the
// repeats while the kernels' costs do not depend on them; swiglu_backward_emit at llama:d24, 2H = 5504 wide), for the
// strategy combinations the trainer runs (with the gradients' stochastic rounding of -S 1). The fused time includes
// the E4M3 rows' second pass (mx_to_e4m3 over the emitted row codes) and the column sums' reduction. The separate path always writes the BF16 output (its quantizers read it back); the fused one only where the row says so.
// Prints median ms and separate / fused (> 1: the fused producer is faster).
// Usage: build/bench_fused_operands [repeats]
#include "llmc/cuda_common.cuh"
#include "dev/cuda/bench_common.cuh"
#include "llmc/mxfp4.cuh"
#include "llmc/gelu.cuh"
#include "llmc/swiglu.cuh"
#include "llmc/layernorm.cuh"
#include "llmc/rmsnorm.cuh"
#include "dev/cuda/fused_operands.cuh"
#include "dev/cuda/fused_reference.cuh"
#include "llmc/llama_config.h"

// one row of the table: the row-wise operand's Hadamard (the forward or dX GEMM's A), x^T (the dW GEMM's B or, of a gradient, A; with its Hadamard), the OE column sums, the BF16 output kept, stochastic
// rounding
typedef struct {
    const char* name;
    int row_hadamard, cols, col_hadamard, col_sq, bf16, stochastic;
} BenchCase;

enum { GELU, SWIGLU, GELU_BACKWARD, SWIGLU_BACKWARD, LAYERNORM, RMSNORM };

// a producer at one shape: its output N x C; its inputs: inp (GELU's [N x C], SwiGLU's [N x 2C], the backward's
// forward input [N x C], a norm's a [N x C]), grad (backward only: the gradient of the forward's output, [N x C] for
// GELU and [N x C/2] for SwiGLU), a norm's residual input resid [N x C], weight and bias [C]; where its own kernel
// writes (out; GELU backward: in place in grad) and a norm's residual sum res [N x C] and statistics mean, rstd [N]
typedef struct {
    int producer, N, C;
    floatX *inp, *grad, *out, *resid, *weight, *bias, *res;
    float *mean, *rstd;
} BenchProducer;

static bool is_norm(int producer) { return producer == LAYERNORM || producer == RMSNORM; }

static BenchProducer bench_producer_alloc(int producer, int N, int C) {
    long n = (long)N * C;
    BenchProducer p;
    memset(&p, 0, sizeof(p));
    p.producer = producer;
    p.N = N;
    p.C = C;
    p.inp = random_bf16(producer == SWIGLU ? 2 * n : n, 1, 3.0f);
    p.out = (floatX*)device_malloc(n * sizeof(floatX), "producer output");
    if (producer == GELU_BACKWARD || producer == SWIGLU_BACKWARD) {
        p.grad = random_bf16(producer == GELU_BACKWARD ? n : n / 2, 2, 1.0f);
    }
    if (is_norm(producer)) {
        p.resid = random_bf16(n, 2, 3.0f);
        p.weight = random_bf16(C, 3, 1.0f);
        p.bias = random_bf16(C, 4, 1.0f);
        p.res = (floatX*)device_malloc(n * sizeof(floatX), "residual sum");
        p.mean = (float*)device_malloc(N * sizeof(float), "row means");
        p.rstd = (float*)device_malloc(N * sizeof(float), "row rstd");
    }
    return p;
}

static void bench_producer_free(BenchProducer* p) {
    void* bufs[] = {p->inp, p->grad, p->out, p->resid, p->weight, p->bias, p->res, p->mean, p->rstd};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) { cudaCheck(cudaFree(bufs[i])); }
}

// where the producer's own kernel writes its BF16 output
static floatX* bench_output(const BenchProducer* p) { return p->producer == GELU_BACKWARD ? p->grad : p->out; }

// the producer's own kernel; returns its BF16 output
static const floatX* produce(const BenchProducer* p) {
    int N = p->N, C = p->C;
    switch (p->producer) {
    case GELU: gelu_forward(p->out, p->inp, (long)N * C, 0); break;
    case SWIGLU: swiglu_forward(p->out, p->inp, N, C, 0); break;
    case GELU_BACKWARD: gelu_backward(p->grad, p->inp, (long)N * C, 0); break;
    case SWIGLU_BACKWARD: swiglu_backward(p->out, p->grad, p->inp, N, C / 2, 0); break;
    case LAYERNORM:
        layernorm_forward(p->out, p->mean, p->rstd, p->res, p->inp, p->resid, p->weight, p->bias, N, C, 0);
        break;
    default: rmsnorm_forward(p->out, p->rstd, p->res, p->inp, p->resid, p->weight, N, C, LLAMA_RMS_EPS, 0);
    }
    return bench_output(p);
}

// the fused producer writing what e asks for (e->bf16, when given, is bench_output)
static void produce_emit(const BenchProducer* p, const OperandEmit* e) {
    int N = p->N, C = p->C;
    switch (p->producer) {
    case GELU: gelu_forward_emit(e, p->inp, N, C, 0); break;
    case SWIGLU: swiglu_forward_emit(e, p->inp, N, C, 0); break;
    case GELU_BACKWARD: gelu_backward_emit(e, p->grad, p->inp, N, C, 0); break;
    case SWIGLU_BACKWARD: swiglu_backward_emit(e, p->grad, p->inp, N, C / 2, 0); break;
    case LAYERNORM:
        layernorm_forward_emit(e, p->mean, p->rstd, p->res, p->inp, p->resid, p->weight, p->bias, N, C, 0);
        break;
    default: rmsnorm_forward_emit(e, p->rstd, p->res, p->inp, p->resid, p->weight, N, C, LLAMA_RMS_EPS, 0);
    }
}

int main(int argc, char** argv) {
    int reps = bench_start(argc, argv);
    // the producer's output is N x C
    struct { int N, C, producer; const char* what; } shapes[] = {
        {32768, 4096, GELU, "GELU, d24"}, {65536, 3072, GELU, "GELU, d12"}, {16384, 6400, GELU, "GELU, d48"},
        {32768, 2752, SWIGLU, "SwiGLU, llama:d24"}, {65536, 768, LAYERNORM, "residual + LayerNorm, d12"},
        {32768, 1024, LAYERNORM, "residual + LayerNorm, d24"}, {16384, 1600, LAYERNORM, "residual + LayerNorm, d48"},
        {32768, 1024, RMSNORM, "residual + RMSNorm, llama:d24"}, {65536, 3072, GELU_BACKWARD, "GELU backward, d12"},
        {32768, 4096, GELU_BACKWARD, "GELU backward, d24"},
        {32768, 5504, SWIGLU_BACKWARD, "SwiGLU backward, llama:d24"}};
    BenchCase cases[] = {
        {"IHT rows, IHT x^T, BF16 kept", 1, 1, 1, 0, 1, 0},
        {"IHT rows, IHT x^T, no BF16", 1, 1, 1, 0, 0, 0},
        {"IHT rows, IHT x^T, stochastic rounding, no BF16", 1, 1, 1, 0, 0, 1},
        {"IHT rows, IHT x^T + OE column sums, no BF16", 1, 1, 1, 1, 0, 0},
        {"plain rows, plain x^T, no BF16", 0, 1, 0, 0, 0, 0},
        {"IHT rows only, no BF16", 1, 0, 0, 0, 0, 0},
    };
    printf("\n| producer output N x C | operands | producer alone ms | separate ms | fused ms | separate / fused |\n"
           "|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int N = shapes[s].N, C = shapes[s].C, producer = shapes[s].producer;
        BenchProducer bp = bench_producer_alloc(producer, N, C);
        E4M3Operand rows = e4m3_operand_alloc(N, C);
        MXOperand row_codes = mx_operand_alloc(N, C), cols = mx_operand_alloc(C, N);
        float* col_sq = (float*)device_malloc((size_t)C * sizeof(float), "column sums of squares");
        float* scratch = (float*)device_malloc(mx_col_sq_scratch_floats(N, C) * sizeof(float), "column square partials");
        float producer_ms = time_ms([&] { produce(&bp); }, reps);
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            const BenchCase* b = &cases[k];
            OperandEmit e;   // what both paths write
            memset(&e, 0, sizeof(e));
            MXQuantOptions ro = {b->row_hadamard, MX_SCALE_OCP, b->stochastic, 1};
            MXQuantOptions co = {b->col_hadamard, MX_SCALE_OCP, b->stochastic, 2};
            e.rows = &rows;
            e.row_opt = ro;
            e.cols = b->cols ? &cols : NULL;
            e.col_opt = co;
            e.col_sq = b->col_sq ? col_sq : NULL;
            e.col_sq_scratch = b->col_sq ? scratch : NULL;
            e.bf16 = b->bf16 ? bench_output(&bp) : NULL;
            OperandEmit fe = e;
            fe.row_codes = &row_codes;   // the fused path's E4M3 rows are made from the row codes
            float fused_ms = time_ms([&] { produce_emit(&bp, &fe); }, reps);
            float separate_ms = time_ms([&] {
                quantize_operands_separate(&e, produce(&bp), N, C, 0);
            }, reps);
            printf("| %d x %d (%s) | %s | %.3f | %.3f | %.3f | %.2fx |\n", N, C, shapes[s].what, b->name, producer_ms, separate_ms,
                   fused_ms, separate_ms / fused_ms);
        }
        e4m3_operand_free(&rows);
        mx_operand_free(&row_codes);
        mx_operand_free(&cols);
        cudaCheck(cudaFree(col_sq));
        cudaCheck(cudaFree(scratch));
        bench_producer_free(&bp);
    }
    matmul_free();
    return 0;
}
