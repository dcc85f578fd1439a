// Flash attention (llmc/flash_attention.cuh) vs the cuBLASLt baseline (attention_cublaslt.cuh) at the GPT-2 shapes:
// forward and backward, median of `reps` runs (CUDA events, after 3 warm-ups). TFLOP/s count the causal half
// only, for both: forward 2 GEMMs (4 B NH T^2 HS / 2), backward 5 (10 B NH T^2 HS / 2: q k^T again, dO v^T,
// dv, dq, dk), although the cuBLASLt path computes the full T x T products. Prints a markdown table.
// Usage: build/bench_attention [repeats]
#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"
#include "dev/cuda/bench_common.cuh"
#include "dev/cuda/attention_cublaslt.cuh"
#include "llmc/flash_attention.cuh"

int main(int argc, char** argv) {
    int reps = bench_start(argc, argv);
    printf("\n");
    printf("| B, T, C, NH | pass | cuBLASLt ms | TFLOP/s | flash ms | TFLOP/s | speed-up |\n|---|---|---|---|---|---|---|\n");
    int shapes[][4] = {{64, 1024, 768, 12}, {32, 1024, 1024, 16}, {16, 1024, 1600, 25}};
    for (int s = 0; s < 3; s++) {
        int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], NH = shapes[s][3];
        size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
        floatX *qkv = random_bf16(nqkv, 1, 2.0f), *dout = random_bf16(nout, 2, 2.0f);
        floatX *out = (floatX*)device_malloc(nout * 2, "out"), *dqkv = (floatX*)device_malloc(nqkv * 2, "dqkv");
        floatX *att = (floatX*)device_malloc(natt * 2, "att"), *qkvr = (floatX*)device_malloc(nqkv * 2, "qkvr");
        floatX *dqkvr = (floatX*)device_malloc(nqkv * 2, "dqkvr"), *yr = (floatX*)device_malloc(nout * 2, "yr");
        float* scores = (float*)device_malloc(natt * 4, "scores");
        float *lse = (float*)device_malloc((size_t)B * NH * T * 4, "lse");
        float* delta = (float*)device_malloc(flash_attention_delta_floats(B, T, NH) * 4, "delta");
        float ref_fwd = time_ms([&] { attention_forward(out, att, qkvr, scores, yr, qkv, B, T, C, NH, 0); }, reps);
        float ref_bwd = time_ms([&] { attention_backward(dqkv, qkvr, dqkvr, (floatX*)scores, yr, dout, qkv, att, B, T, C, NH, 0); }, reps);
        float fl_fwd = time_ms([&] { flash_attention_forward(out, lse, qkv, B, T, NH, NH, C / NH, 0); }, reps);
        float fl_bwd = time_ms([&] { flash_attention_backward(dqkv, delta, dout, qkv, out, lse, B, T, NH, NH, C / NH, 0); }, reps);
        double fwd_flops = 4.0 * B * NH * (double)T * T * (C / NH) / 2, bwd_flops = 2.5 * fwd_flops;
        printf("| %d, %d, %d, %d | forward | %.3f | %.0f | %.3f | %.0f | %.2fx |\n", B, T, C, NH, ref_fwd, fwd_flops / ref_fwd / 1e9,
               fl_fwd, fwd_flops / fl_fwd / 1e9, ref_fwd / fl_fwd);
        printf("| %d, %d, %d, %d | backward | %.3f | %.0f | %.3f | %.0f | %.2fx |\n", B, T, C, NH, ref_bwd, bwd_flops / ref_bwd / 1e9,
               fl_bwd, bwd_flops / fl_bwd / 1e9, ref_bwd / fl_bwd);
        void* bufs[] = {qkv, dout, out, dqkv, att, qkvr, dqkvr, yr, scores, lse, delta};
        for (int i = 0; i < 11; i++) { cudaCheck(cudaFree(bufs[i])); }
    }
    matmul_free();
    return 0;
}
