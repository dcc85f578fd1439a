// The wgmma instances of the flash attention kernels (llmc/flash_attention.cuh, WG = true; head size 64) against the
// FP32 CPU reference (attention_gqa_forward_cpu / _backward_cpu of llmc/gpt2_cpu.h and a CPU log-sum-exp) and
// against the mma.sync instances, on fresh random BF16 inputs: multi-head and grouped-query, T not a multiple of the
// tiles, large magnitudes, all-zero input; two runs give identical bits. Tolerances as test_flash_attention: out 1e-2
// of the largest |want| + 1/64 relative, dqkv 2e-2 + 1/32, lse 2e-5. With the argument "bench" it then prints the
// forward and backward times of both instances at the GPT-2 shapes (median of 20).
// Needs an sm_90 GPU; built for sm_90a (Makefile).
#include "llmc/cuda_common.cuh"
#include "llmc/flash_attention.cuh"
#include "llmc/gpt2_cpu.h"
#include "dev/cuda/test_compare.cuh"
#include "dev/cuda/bench_common.cuh"

// lse[b, h, t] = log sum_{t2 <= t} exp(scale q_t . k_t2) with k of kv head h / (NH / NKV)
static void lse_cpu(float* lse, const float* qkv, int B, int T, int NH, int NKV, int hs) {
    size_t stride = (size_t)(NH + 2 * NKV) * hs;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* q = qkv + ((size_t)b * T + t) * stride + h * hs;
                double mx = -INFINITY, sum = 0.0;
                for (int pass = 0; pass < 2; pass++) {
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float* k = qkv + ((size_t)b * T + t2) * stride + (NH + h / (NH / NKV)) * hs;
                        float dot = 0.0f;
                        for (int i = 0; i < hs; i++) { dot += q[i] * k[i]; }
                        if (pass == 0) { mx = fmax(mx, dot * scale); } else { sum += exp((double)(dot * scale) - mx); }
                    }
                }
                lse[((size_t)b * NH + h) * T + t] = (float)(mx + log(sum));
            }
        }
    }
}

// out, lse, dqkv of one instance (wgmma or mma.sync), run twice: the two runs must give identical bits
template <bool WG>
static void run_instance(floatX* d_out, float* d_lse, floatX* d_dqkv, const floatX* d_qkv, const floatX* d_dout, float* d_delta,
                         int B, int T, int NH, int NKV, size_t nout, size_t nlse, size_t nqkv) {
    floatX *out2 = (floatX*)device_malloc(nout * 2, "out2"), *dqkv2 = (floatX*)device_malloc(nqkv * 2, "dqkv2");
    float* lse2 = (float*)device_malloc(nlse * 4, "lse2");
    void* poisoned[] = {d_out, d_dqkv, d_lse};   // every element must be written
    size_t bytes[] = {nout * 2, nqkv * 2, nlse * 4};
    for (int i = 0; i < 3; i++) { cudaCheck(cudaMemset(poisoned[i], 0xff, bytes[i])); }
    flash_attention_forward_hs<64, WG>(d_out, d_lse, d_qkv, B, T, NH, NKV, 0);
    flash_attention_backward_hs<64, WG>(d_dqkv, d_delta, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, 0);
    flash_attention_forward_hs<64, WG>(out2, lse2, d_qkv, B, T, NH, NKV, 0);
    flash_attention_backward_hs<64, WG>(dqkv2, d_delta, d_dout, d_qkv, out2, lse2, B, T, NH, NKV, 0);
    const char* name = WG ? "wgmma" : "mma.sync";
    char what[64];
    snprintf(what, sizeof(what), "%s out: two runs", name);
    compare_bits(what, d_out, out2, nout * 2);
    snprintf(what, sizeof(what), "%s dqkv: two runs", name);
    compare_bits(what, d_dqkv, dqkv2, nqkv * 2);
    cudaCheck(cudaFree(out2)); cudaCheck(cudaFree(dqkv2)); cudaCheck(cudaFree(lse2));
}

static void test_wgmma(int B, int T, int NH, int NKV, float scale) {
    const int HS = 64, C = NH * HS;
    printf("wgmma attention B=%d T=%d NH=%d NKV=%d input scale %g\n", B, T, NH, NKV, scale);
    size_t nqkv = (size_t)B * T * (NH + 2 * NKV) * HS, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T, nlse = (size_t)B * NH * T;
    float *qkv = scale == 0.0f ? host_zeros(nqkv) : host_random(nqkv, scale), *out = host_zeros(nout), *att = host_zeros(natt);
    float *lse = host_zeros(nlse), *dout = host_random(nout, 1.0f), *dqkv = host_zeros(nqkv);
    attention_gqa_forward_cpu(out, att, qkv, B, T, C, NH, NKV);
    lse_cpu(lse, qkv, B, T, NH, NKV, HS);
    attention_gqa_backward_cpu(dqkv, dout, qkv, att, B, T, C, NH, NKV);
    floatX *d_qkv = to_device_bf16(qkv, nqkv), *d_dout = to_device_bf16(dout, nout);
    floatX *d_out = (floatX*)device_malloc(nout * 2, "out"), *d_ref = (floatX*)device_malloc(nout * 2, "mma.sync out");
    floatX *d_dqkv = (floatX*)device_malloc(nqkv * 2, "dqkv"), *d_ref_dqkv = (floatX*)device_malloc(nqkv * 2, "mma.sync dqkv");
    float *d_lse = (float*)device_malloc(nlse * 4, "lse"), *d_ref_lse = (float*)device_malloc(nlse * 4, "mma.sync lse");
    float* d_delta = (float*)device_malloc(flash_attention_delta_floats(B, T, NH) * 4, "delta");
    run_instance<true>(d_out, d_lse, d_dqkv, d_qkv, d_dout, d_delta, B, T, NH, NKV, nout, nlse, nqkv);
    run_instance<false>(d_ref, d_ref_lse, d_ref_dqkv, d_qkv, d_dout, d_delta, B, T, NH, NKV, nout, nlse, nqkv);
    compare("wgmma out vs CPU", from_device_bf16(d_out, nout), out, nout, 1e-2f, 1.0f / 64);
    compare("wgmma lse vs CPU", from_device_f32(d_lse, nlse), lse, nlse, 2e-5f, 0.0f);
    compare("wgmma dqkv vs CPU", from_device_bf16(d_dqkv, nqkv), dqkv, nqkv, 2e-2f, 1.0f / 32);
    float* ref = from_device_bf16(d_ref, nout);
    compare("wgmma out vs mma.sync", from_device_bf16(d_out, nout), ref, nout, 1e-2f, 1.0f / 64);
    float* ref_dqkv = from_device_bf16(d_ref_dqkv, nqkv);
    compare("wgmma dqkv vs mma.sync", from_device_bf16(d_dqkv, nqkv), ref_dqkv, nqkv, 2e-2f, 1.0f / 32);
    void *a = download(d_dqkv, nqkv * 2), *r = download(d_ref_dqkv, nqkv * 2);
    printf("  backward bits: wgmma %s mma.sync\n", memcmp(a, r, nqkv * 2) == 0 ? "==" : "!=");
    free(a); free(r); free(ref); free(ref_dqkv);
    free(qkv); free(out); free(att); free(lse); free(dout); free(dqkv);
    void* bufs[] = {d_qkv, d_dout, d_out, d_ref, d_dqkv, d_ref_dqkv, d_lse, d_ref_lse, d_delta};
    for (int i = 0; i < 9; i++) { cudaCheck(cudaFree(bufs[i])); }
}

// forward and backward ms of both instances at the GPT-2 shapes (T = 1024, head size 64); TFLOP/s of the causal half
static void bench(int reps) {
    printf("\n| B, T, NH | pass | mma.sync ms | TFLOP/s | wgmma ms | TFLOP/s | speed-up |\n|---|---|---:|---:|---:|---:|---:|\n");
    int shapes[][3] = {{64, 1024, 12}, {32, 1024, 16}, {16, 1024, 25}};
    for (int i = 0; i < 3; i++) {
        int B = shapes[i][0], T = shapes[i][1], NH = shapes[i][2];
        size_t nqkv = (size_t)B * T * 3 * NH * 64, nout = (size_t)B * T * NH * 64;
        floatX *qkv = random_bf16(nqkv, 1, 2.0f), *dout = random_bf16(nout, 2, 2.0f);
        floatX *out = (floatX*)device_malloc(nout * 2, "out"), *dqkv = (floatX*)device_malloc(nqkv * 2, "dqkv");
        float *lse = (float*)device_malloc((size_t)B * NH * T * 4, "lse"), *delta = (float*)device_malloc((size_t)B * NH * T * 4, "delta");
        double fwd = 4.0 * B * NH * (double)T * T * 64 / 2, bwd = 2.5 * fwd;
        float f0 = time_ms([&] { flash_attention_forward_hs<64, false>(out, lse, qkv, B, T, NH, NH, 0); }, reps);
        float b0 = time_ms([&] { flash_attention_backward_hs<64, false>(dqkv, delta, dout, qkv, out, lse, B, T, NH, NH, 0); }, reps);
        float f1 = time_ms([&] { flash_attention_forward_hs<64, true>(out, lse, qkv, B, T, NH, NH, 0); }, reps);
        float b1 = time_ms([&] { flash_attention_backward_hs<64, true>(dqkv, delta, dout, qkv, out, lse, B, T, NH, NH, 0); }, reps);
        printf("| %d, %d, %d | forward | %.3f | %.0f | %.3f | %.0f | %.2fx |\n", B, T, NH, f0, fwd / f0 / 1e9, f1, fwd / f1 / 1e9, f0 / f1);
        printf("| %d, %d, %d | backward | %.3f | %.0f | %.3f | %.0f | %.2fx |\n", B, T, NH, b0, bwd / b0 / 1e9, b1, bwd / b1 / 1e9, b0 / b1);
        void* bufs[] = {qkv, dout, out, dqkv, lse, delta};
        for (int k = 0; k < 6; k++) { cudaCheck(cudaFree(bufs[k])); }
    }
}

int main(int argc, char** argv) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: the wgmma attention test needs one"); }
    seed_fresh_rng();
    test_wgmma(2, 64, 2, 2, 1.0f);
    test_wgmma(1, 200, 4, 4, 1.0f);      // T not a multiple of the tiles
    test_wgmma(1, 8, 1, 1, 1.0f);        // the smallest T
    test_wgmma(2, 1024, 12, 12, 1.0f);
    test_wgmma(2, 256, 12, 12, 8.0f);    // large magnitudes: nearly one-hot probabilities
    test_wgmma(2, 192, 2, 2, 0.0f);      // all-zero qkv: uniform probabilities, dq = dk = 0
    test_wgmma(2, 200, 10, 5, 1.0f);     // grouped-query, groups of 2
    test_wgmma(1, 256, 16, 4, 1.0f);     // groups of 4
    test_wgmma(1, 136, 8, 1, 8.0f);      // one kv head, large magnitudes
    if (argc > 1 && strcmp(argv[1], "bench") == 0) { bench(20); }
    return test_summary("test_flash_wgmma");
}
