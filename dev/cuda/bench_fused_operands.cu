// Benchmark of the producers that emit operands (llmc/fused_operands.cuh): GELU forward writing the fc projection's
// operands in the same pass (gelu_forward_emit) against gelu_forward followed by the separate quantizers
// (quantize_operands_separate: the E4M3 forward operand, x^T in MXFP4, the OE column sums), at the MLP shapes of
// GPT-2 d24 (N = 32768 tokens, 4C = 4096), d12 (N = 65536, 4C = 3072) and d48 (N = 16384, 4C = 6400: above the
// one-pass quantizer's K limit, the separate path quantizes, then converts), the same for SwiGLU at LLaMA-small
// d24 (N = 32768, H = 2752), and for the norms with the residual add in front (the qkv and fc / gate-up inputs):
// LayerNorm at GPT-2 d12 (65536 x 768), d24 (32768 x 1024), d48 (16384 x 1600), RMSNorm at LLaMA-small d24
// (32768 x 1024); for the strategy combinations the trainer runs, and the fused producer with the rows' E4M3 made by
// a second pass over their MXFP4 codes (mx_to_e4m3) instead of in shared memory. The separate path always writes the
// BF16 output (its quantizers read it back); the fused one only where the row says so. Prints median ms and
// separate / fused (> 1: the fused producer is faster).
// Usage: build/bench_fused_operands [repeats]
#include "llmc/cuda_common.cuh"
#include "dev/cuda/bench_common.cuh"
#include "llmc/mxfp4.cuh"
#include "llmc/gelu.cuh"
#include "llmc/fused_operands.cuh"
#include "llmc/llama_config.h"

// one row of the table: the forward operand's Hadamard and how the fused producer makes it E4M3 (staged codes in shared
// memory, or MXFP4 codes written and then mx_to_e4m3: the second-pass alternative), x^T (with its Hadamard), the OE
// column sums, the BF16 output kept
typedef struct { const char* name; int row_hadamard, rows_via_codes, cols, col_hadamard, col_sq, bf16; } BenchCase;

int main(int argc, char** argv) {
    int reps = bench_start(argc, argv);
    // the producer's output is N x C; SwiGLU reads N x 2C, a norm a and b N x C (and writes their sum)
    enum { GELU, SWIGLU, LAYERNORM, RMSNORM };
    struct { int N, C, producer; const char* what; } shapes[] = {
        {32768, 4096, GELU, "GELU, d24"}, {65536, 3072, GELU, "GELU, d12"}, {16384, 6400, GELU, "GELU, d48"},
        {32768, 2752, SWIGLU, "SwiGLU, llama:d24"}, {65536, 768, LAYERNORM, "residual + LayerNorm, d12"},
        {32768, 1024, LAYERNORM, "residual + LayerNorm, d24"}, {16384, 1600, LAYERNORM, "residual + LayerNorm, d48"},
        {32768, 1024, RMSNORM, "residual + RMSNorm, llama:d24"}};
    BenchCase cases[] = {
        {"IHT forward, IHT dW, BF16 kept", 1, 0, 1, 1, 0, 1},
        {"IHT forward, IHT dW, no BF16", 1, 0, 1, 1, 0, 0},
        {"IHT forward, IHT dW + OE column sums, no BF16", 1, 0, 1, 1, 1, 0},
        {"plain forward, plain dW, no BF16", 0, 0, 1, 0, 0, 0},
        {"IHT forward only, no BF16", 1, 0, 0, 0, 0, 0},
        {"IHT forward as MXFP4 codes + mx_to_e4m3, IHT dW, no BF16", 1, 1, 1, 1, 0, 0},
    };
    printf("\n| producer output N x C | operands | producer alone ms | separate ms | fused ms | separate / fused |\n"
           "|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int N = shapes[s].N, C = shapes[s].C, producer = shapes[s].producer;
        long n = (long)N * C;
        floatX* inp = random_bf16(producer == SWIGLU ? 2 * n : n, 1, 3.0f);
        floatX* out = (floatX*)device_malloc(n * sizeof(floatX), "producer output");
        bool norm = producer == LAYERNORM || producer == RMSNORM;   // its residual, weight, bias, their sum, statistics
        floatX *resid = NULL, *weight = NULL, *bias = NULL, *res = NULL;
        float *mean = NULL, *rstd = NULL;
        if (norm) {
            resid = random_bf16(n, 2, 3.0f);
            weight = random_bf16(C, 3, 1.0f);
            bias = random_bf16(C, 4, 1.0f);
            res = (floatX*)device_malloc(n * sizeof(floatX), "residual sum");
            mean = (float*)device_malloc(N * sizeof(float), "row means");
            rstd = (float*)device_malloc(N * sizeof(float), "row rstd");
        }
        E4M3Operand rows = e4m3_operand_alloc(N, C);
        MXOperand row_codes = mx_operand_alloc(N, C), cols = mx_operand_alloc(C, N);
        float* col_sq = (float*)device_malloc((size_t)C * sizeof(float), "column sums of squares");
        float* scratch = (float*)device_malloc(mx_col_sq_scratch_floats(N, C) * sizeof(float), "column square partials");
        auto produce = [&] {
            if (producer == GELU) { gelu_forward(out, inp, n, 0); }
            if (producer == SWIGLU) { swiglu_forward(out, inp, N, C, 0); }
            if (producer == LAYERNORM) { layernorm_forward(out, mean, rstd, res, inp, resid, weight, bias, N, C, 0); }
            if (producer == RMSNORM) { rmsnorm_forward(out, rstd, res, inp, resid, weight, N, C, LLAMA_RMS_EPS, 0); }
        };
        auto produce_emit = [&](const OperandEmit* e) {
            if (producer == GELU) { gelu_forward_emit(e, inp, N, C, 0); }
            if (producer == SWIGLU) { swiglu_forward_emit(e, inp, N, C, 0); }
            if (producer == LAYERNORM) { layernorm_forward_emit(e, mean, rstd, res, inp, resid, weight, bias, N, C, 0); }
            if (producer == RMSNORM) { rmsnorm_forward_emit(e, rstd, res, inp, resid, weight, N, C, LLAMA_RMS_EPS, 0); }
        };
        float producer_ms = time_ms(produce, reps);
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            const BenchCase* b = &cases[k];
            OperandEmit e;   // what the separate path writes (and the fused one, unless the rows go via codes)
            memset(&e, 0, sizeof(e));
            MXQuantOptions ro = {b->row_hadamard, MX_SCALE_OCP, 0, 0}, co = {b->col_hadamard, MX_SCALE_OCP, 0, 0};
            e.rows = &rows;
            e.row_opt = ro;
            e.cols = b->cols ? &cols : NULL;
            e.col_opt = co;
            e.col_sq = b->col_sq ? col_sq : NULL;
            e.col_sq_scratch = b->col_sq ? scratch : NULL;
            e.bf16 = b->bf16 ? out : NULL;
            OperandEmit fe = e;
            if (b->rows_via_codes) { fe.rows = NULL; fe.row_codes = &row_codes; }
            if (C > MX_E4M3_ONE_PASS_MAX_K) { e.row_codes = &row_codes; }   // the separate path's codes pass through it
            float fused_ms = time_ms([&] {
                produce_emit(&fe);
                if (b->rows_via_codes) { mx_to_e4m3(&rows, &row_codes, 0); }
            }, reps);
            float separate_ms = time_ms([&] {
                produce();
                quantize_operands_separate(&e, out, N, C, 0);
            }, reps);
            printf("| %d x %d (%s) | %s | %.3f | %.3f | %.3f | %.2fx |\n", N, C, shapes[s].what, b->name, producer_ms, separate_ms,
                   fused_ms, separate_ms / fused_ms);
        }
        e4m3_operand_free(&rows);
        mx_operand_free(&row_codes);
        mx_operand_free(&cols);
        void* bufs[] = {inp, out, col_sq, scratch, resid, weight, bias, res, mean, rstd};
        for (int i = 0; i < 10; i++) { cudaCheck(cudaFree(bufs[i])); }
    }
    matmul_free();
    return 0;
}
