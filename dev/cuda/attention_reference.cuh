// The FP32 CPU reference of causal grouped-query attention that the flash attention tests compare against: fresh
// random qkv (scale 0: all zeros) and dout, then out, the probabilities, the log-sum-exp of every query row and dqkv
// (attention_gqa_forward_cpu / _backward_cpu of llmc/gpt2_cpu.h and attention_lse_cpu here).
#ifndef DEV_CUDA_ATTENTION_REFERENCE_CUH
#define DEV_CUDA_ATTENTION_REFERENCE_CUH

#include "llmc/gpt2_cpu.h"
#include "dev/cuda/test_compare.cuh"

// lse[b, h, t] = log sum_{t2 <= t} exp(scale q_t . k_t2), k of kv head h / (NH / NKV), the dot products as in
// attention_gqa_forward_cpu
static void attention_lse_cpu(float* lse, const float* qkv, int B, int T, int NH, int NKV, int hs) {
    size_t stride = (size_t)(NH + 2 * NKV) * hs;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* q = qkv + ((size_t)b * T + t) * stride + h * hs;
                float* s = (float*)malloc_check((size_t)(t + 1) * sizeof(float));
                float mx = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* k = qkv + ((size_t)b * T + t2) * stride + (NH + h / (NH / NKV)) * hs;
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

// one case's inputs and CPU results, host FP32, and the inputs on the device in BF16; n*: element counts
typedef struct {
    float *qkv, *dout, *out, *att, *lse, *dqkv;
    floatX *d_qkv, *d_dout;
    size_t nqkv, nout, nlse;
} AttentionReference;

static AttentionReference attention_reference(int B, int T, int NH, int NKV, int HS, float scale) {
    AttentionReference r;
    int C = NH * HS;
    r.nqkv = (size_t)B * T * (NH + 2 * NKV) * HS;
    r.nout = (size_t)B * T * C;
    r.nlse = (size_t)B * NH * T;
    size_t natt = (size_t)B * NH * T * T;
    r.qkv = scale == 0.0f ? host_zeros(r.nqkv) : host_random(r.nqkv, scale);
    r.out = host_zeros(r.nout);
    r.att = host_zeros(natt);
    r.lse = host_zeros(r.nlse);
    r.dout = host_random(r.nout, 1.0f);
    r.dqkv = host_zeros(r.nqkv);
    attention_gqa_forward_cpu(r.out, r.att, r.qkv, B, T, C, NH, NKV);
    attention_lse_cpu(r.lse, r.qkv, B, T, NH, NKV, HS);
    attention_gqa_backward_cpu(r.dqkv, r.dout, r.qkv, r.att, B, T, C, NH, NKV);
    r.d_qkv = to_device_bf16(r.qkv, r.nqkv);
    r.d_dout = to_device_bf16(r.dout, r.nout);
    return r;
}

static void attention_reference_free(AttentionReference* r) {
    free(r->qkv); free(r->dout); free(r->out); free(r->att); free(r->lse); free(r->dqkv);
    cudaCheck(cudaFree(r->d_qkv));
    cudaCheck(cudaFree(r->d_dout));
}

#endif
