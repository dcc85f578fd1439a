// Flash attention (llmc/flash_attention.cuh) against the FP32 CPU reference (llmc/gpt2_cpu.h, plus a CPU lse here)
// and against the cuBLASLt attention of llmc/attention.cuh, on fresh random inputs rounded to BF16 before both
// sides see them: head sizes 64 and 128, T not a multiple of the tiles, large-magnitude and all-zero inputs.
// Tolerance per element: |got - want| <= atol + rtol |want|, with atol relative to the largest |want| of the
// tensor: out 1e-2 (rtol 1/64), dqkv 2e-2 (rtol 1/32), lse 2e-5 (FP32, rtol 0); against the cuBLASLt attention,
// whose BF16 probabilities carry their own rounding, out 1e-2 and dqkv 2e-2 with rtol 1/32. Also: the forward and
// the backward run twice give identical bits, and unsupported shapes are refused. Needs a GPU.
#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"
#include "llmc/attention.cuh"
#include "llmc/flash_attention.cuh"
#include "llmc/gpt2_cpu.h"
#include "dev/cuda/test_compare.cuh"

// lse[b, h, t] = log sum_{t2 <= t} exp(scale q_t . k_t2), the dot products as in attention_forward_cpu
static void lse_cpu(float* lse, const float* qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                float* s = (float*)malloc_check((size_t)(t + 1) * sizeof(float));
                float mx = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    float dot = 0.0f;
                    for (int i = 0; i < hs; i++) { dot += q[i] * k[i]; }
                    s[t2] = dot * scale;
                    mx = fmaxf(mx, s[t2]);
                }
                double sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) { sum += exp((double)s[t2] - mx); }
                lse[((size_t)b * NH + h) * T + t] = (float)(mx + log(sum));
                free(s);
            }
        }
    }
}

// out and dqkv of the cuBLASLt attention of llmc/attention.cuh, downloaded
static void gpu_reference(float** out, float** dqkv, const floatX* d_qkv, const floatX* d_dout, int B, int T, int C, int NH) {
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    floatX *d_out = (floatX*)device_malloc(nout * 2, "out"), *d_att = (floatX*)device_malloc(natt * 2, "att");
    floatX *d_qkvr = (floatX*)device_malloc(nqkv * 2, "qkvr"), *d_dqkvr = (floatX*)device_malloc(nqkv * 2, "dqkvr");
    floatX *d_yr = (floatX*)device_malloc(nout * 2, "yr"), *d_dqkv = (floatX*)device_malloc(nqkv * 2, "dqkv");
    float* d_scores = (float*)device_malloc(natt * 4, "scores");
    attention_forward(d_out, d_att, d_qkvr, d_scores, d_yr, d_qkv, B, T, C, NH, 0);
    attention_backward(d_dqkv, d_qkvr, d_dqkvr, (floatX*)d_scores, d_yr, d_dout, d_qkv, d_att, B, T, C, NH, 0);
    *out = from_device_bf16(d_out, nout);
    *dqkv = from_device_bf16(d_dqkv, nqkv);
    void* bufs[] = {d_out, d_att, d_qkvr, d_dqkvr, d_yr, d_dqkv, d_scores};
    for (int i = 0; i < 7; i++) { cudaCheck(cudaFree(bufs[i])); }
}

static void test_flash(int B, int T, int C, int NH, float scale) {
    printf("flash attention B=%d T=%d C=%d NH=%d (head size %d) input scale %g\n", B, T, C, NH, C / NH, scale);
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T, nlse = (size_t)B * NH * T;
    float *qkv = scale == 0.0f ? host_zeros(nqkv) : host_random(nqkv, scale), *out = host_zeros(nout), *att = host_zeros(natt);
    float *lse = host_zeros(nlse), *dout = host_random(nout, 1.0f), *dqkv = host_zeros(nqkv);
    attention_forward_cpu(out, att, qkv, B, T, C, NH);
    lse_cpu(lse, qkv, B, T, C, NH);
    attention_backward_cpu(dqkv, dout, qkv, att, B, T, C, NH);

    floatX *d_qkv = to_device_bf16(qkv, nqkv), *d_dout = to_device_bf16(dout, nout);
    floatX *d_out = (floatX*)device_malloc(nout * 2, "out"), *d_out2 = (floatX*)device_malloc(nout * 2, "out2");
    floatX *d_dqkv = (floatX*)device_malloc(nqkv * 2, "dqkv"), *d_dqkv2 = (floatX*)device_malloc(nqkv * 2, "dqkv2");
    float *d_lse = (float*)device_malloc(nlse * 4, "lse"), *d_lse2 = (float*)device_malloc(nlse * 4, "lse2");
    float* d_delta = (float*)device_malloc(flash_attention_delta_floats(B, T, NH) * 4, "delta");
    void* poisoned[] = {d_out, d_out2, d_dqkv, d_dqkv2, d_lse, d_lse2};   // every element must be written
    size_t bytes[] = {nout * 2, nout * 2, nqkv * 2, nqkv * 2, nlse * 4, nlse * 4};
    for (int i = 0; i < 6; i++) { cudaCheck(cudaMemset(poisoned[i], 0xff, bytes[i])); }

    flash_attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, 0);
    flash_attention_backward(d_dqkv, d_delta, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0);
    flash_attention_forward(d_out2, d_lse2, d_qkv, B, T, C, NH, 0);
    flash_attention_backward(d_dqkv2, d_delta, d_dout, d_qkv, d_out2, d_lse2, B, T, C, NH, 0);
    void *o1 = download(d_out, nout * 2), *o2 = download(d_out2, nout * 2), *l1 = download(d_lse, nlse * 4), *l2 = download(d_lse2, nlse * 4);
    void *g1 = download(d_dqkv, nqkv * 2), *g2 = download(d_dqkv2, nqkv * 2);
    CHECK(memcmp(o1, o2, nout * 2) == 0 && memcmp(l1, l2, nlse * 4) == 0, "forward: two runs give different bits");
    CHECK(memcmp(g1, g2, nqkv * 2) == 0, "backward: two runs give different bits");
    free(o1); free(o2); free(l1); free(l2); free(g1); free(g2);

    float *flash_out = from_device_bf16(d_out, nout), *flash_dqkv = from_device_bf16(d_dqkv, nqkv);
    compare("flash forward out vs CPU", from_device_bf16(d_out, nout), out, nout, 1e-2f, 1.0f / 64);
    compare("flash forward lse vs CPU", from_device_f32(d_lse, nlse), lse, nlse, 2e-5f, 0.0f);
    compare("flash backward dqkv vs CPU", from_device_bf16(d_dqkv, nqkv), dqkv, nqkv, 2e-2f, 1.0f / 32);
    float *ref_out, *ref_dqkv;
    gpu_reference(&ref_out, &ref_dqkv, d_qkv, d_dout, B, T, C, NH);
    compare("flash out vs cuBLASLt attention", flash_out, ref_out, nout, 1e-2f, 1.0f / 32);
    compare("flash dqkv vs cuBLASLt attention", flash_dqkv, ref_dqkv, nqkv, 2e-2f, 1.0f / 32);

    free(qkv); free(out); free(att); free(lse); free(dout); free(dqkv); free(ref_out); free(ref_dqkv);
    void* bufs[] = {d_qkv, d_dout, d_out, d_out2, d_dqkv, d_dqkv2, d_lse, d_lse2, d_delta};
    for (int i = 0; i < 9; i++) { cudaCheck(cudaFree(bufs[i])); }
}

static void forward_head_size_96(void) { flash_attention_forward(NULL, NULL, NULL, 1, 64, 96, 1, 0); }
static void backward_t_60(void) { flash_attention_backward(NULL, NULL, NULL, NULL, NULL, NULL, 1, 60, 768, 12, 0); }

static void test_unsupported_shapes(void) {
    printf("unsupported shapes are refused\n");
    int ok[][3] = {{8, 64, 1}, {64, 128, 2}, {200, 256, 4}, {1024, 768, 12}, {1024, 1600, 25}, {136, 256, 2}};
    int bad[][3] = {{64, 768, 24}, {64, 96, 1}, {64, 192, 1}, {64, 770, 12}, {60, 768, 12}, {100, 768, 12}, {0, 768, 12}, {64, 768, 0}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        CHECK(flash_attention_unsupported(ok[i][0], ok[i][1], ok[i][2]) == NULL, "T=%d C=%d NH=%d is supported", ok[i][0], ok[i][1], ok[i][2]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK(flash_attention_unsupported(bad[i][0], bad[i][1], bad[i][2]) != NULL, "T=%d C=%d NH=%d is refused", bad[i][0], bad[i][1], bad[i][2]);
    }
    // the public entry points die before touching the GPU (run before CUDA is initialized, so forking is safe)
    CHECK(child_fails_with(forward_head_size_96, "flash attention: head size C/NH must be 64 or 128"), "head size 96 dies");
    CHECK(child_fails_with(backward_t_60, "flash attention: sequence length T must be a positive multiple of 8"), "T=60 dies");
}

int main(void) {
    test_unsupported_shapes();
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: the flash attention tests need one"); }
    seed_fresh_rng();
    matmul_init();
    test_flash(2, 64, 128, 2, 1.0f);
    test_flash(1, 200, 256, 4, 1.0f);      // T not a multiple of the tiles
    test_flash(1, 8, 64, 1, 1.0f);         // the smallest T
    test_flash(2, 1024, 768, 12, 1.0f);
    test_flash(2, 136, 256, 2, 1.0f);      // head size 128, T not a multiple of the tiles
    test_flash(1, 512, 512, 4, 1.0f);      // head size 128
    test_flash(2, 256, 768, 12, 8.0f);     // large magnitudes: nearly one-hot probabilities
    test_flash(1, 128, 256, 2, 8.0f);
    test_flash(2, 192, 128, 2, 0.0f);      // all-zero qkv: uniform probabilities, dq = dk = 0
    matmul_free();
    return test_summary("test_flash_attention");
}
