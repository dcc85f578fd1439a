// FP32 CPU reference of GPT-2 (forward, backward, AdamW), in the style of llm.c's train_gpt2.c.
// The per-layer *_cpu functions are the oracle for the GPU kernel tests, so this header compiles as C11
// and as C++ (nvcc): casted mallocs, no VLAs, no restrict. OpenMP pragmas are used where they pay.
//
// Conventions: activations are row-major [B, T, ...]; weights are [out, in] like torch nn.Linear;
// every *_backward_cpu ACCUMULATES (+=) into its gradient outputs, so callers zero them first.
//
// Precision (gpt2cpu_set_precision): with an AdahopState (llmc/adahop.h) the 4 linears of every block run their
// forward, dX and dW GEMMs in the strategy the state gives, emulated with llmc/adahop_cpu.h (MXFP4 values in
// float storage, round to nearest, OCP scale rule). STRAT_BF16 and no state at all (NULL) use the FP32 matmul
// below, bit for bit. Embeddings, LM head, attention, norms, GELU, loss and AdamW always stay FP32.
//
// The layers, the block linears (block_linear_*_cpu) and the model helpers before the GPT-2 model itself are
// shared with the LLaMA reference (llmc/llama_cpu.h): the encoder without position embedding (wpe NULL),
// grouped-query attention, linears without bias (bias NULL), the batch checks and buffers (BatchCPU), the parameter
// memory, the loss with its mean and gradient, and the clipped AdamW step.
#ifndef LLMC_GPT2_CPU_H
#define LLMC_GPT2_CPU_H

#include <math.h>
#include <stddef.h>
#include <string.h>
#include "utils.h"
#include "gpt2_config.h"
#include "adahop.h"
#include "adahop_cpu.h"

#define GELU_SCALE 0.7978845608028654f   // sqrt(2 / pi)

// ----------------------------------------------------------------------------------------------
// layers

// out[b,t,:] = wte[inp[b,t],:] + wpe[t,:] (wpe NULL: no position embedding)
static inline void encoder_forward_cpu(float* out, const int* inp, const float* wte, const float* wpe,
                                       int B, int T, int C) {
    for (int bt = 0; bt < B * T; bt++) {
        const float* wte_ix = wte + (size_t)inp[bt] * C;
        float* o = out + (size_t)bt * C;
        if (wpe == NULL) { memcpy(o, wte_ix, (size_t)C * sizeof(float)); continue; }
        const float* wpe_t = wpe + (size_t)(bt % T) * C;
        for (int i = 0; i < C; i++) { o[i] = wte_ix[i] + wpe_t[i]; }
    }
}

// dwte[inp[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:] unless dwpe is NULL (serial: rows of dwte may repeat)
static inline void encoder_backward_cpu(float* dwte, float* dwpe, const float* dout, const int* inp,
                                        int B, int T, int C) {
    for (int bt = 0; bt < B * T; bt++) {
        const float* d = dout + (size_t)bt * C;
        float* dwte_ix = dwte + (size_t)inp[bt] * C;
        for (int i = 0; i < C; i++) { dwte_ix[i] += d[i]; }
        if (dwpe == NULL) { continue; }
        float* dwpe_t = dwpe + (size_t)(bt % T) * C;
        for (int i = 0; i < C; i++) { dwpe_t[i] += d[i]; }
    }
}

// out = (inp - mean) * rstd * weight + bias per row of C, eps 1e-5; saves mean and rstd [B*T]
static inline void layernorm_forward_cpu(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int B, int T, int C) {
    for (int bt = 0; bt < B * T; bt++) {
        const float* x = inp + (size_t)bt * C;
        float m = 0.0f, v = 0.0f;
        for (int i = 0; i < C; i++) { m += x[i]; }
        m /= C;
        for (int i = 0; i < C; i++) { float d = x[i] - m; v += d * d; }
        v /= C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        float* o = out + (size_t)bt * C;
        for (int i = 0; i < C; i++) { o[i] = (x[i] - m) * s * weight[i] + bias[i]; }
        mean[bt] = m;
        rstd[bt] = s;
    }
}

// layernorm gradients: dinp +=, dweight +=, dbias += (serial over rows: dweight/dbias are shared)
static inline void layernorm_backward_cpu(float* dinp, float* dweight, float* dbias, const float* dout,
                                          const float* inp, const float* weight, const float* mean,
                                          const float* rstd, int B, int T, int C) {
    for (int bt = 0; bt < B * T; bt++) {
        const float* d = dout + (size_t)bt * C;
        const float* x = inp + (size_t)bt * C;
        float* dx = dinp + (size_t)bt * C;
        float m = mean[bt], s = rstd[bt];
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        for (int i = 0; i < C; i++) {
            float dnorm = weight[i] * d[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * (x[i] - m) * s;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s;
            float dnorm = weight[i] * d[i];
            dbias[i] += d[i];
            dweight[i] += norm * d[i];
            dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
}

// out[B*T, OC] = inp[B*T, C] @ weight[OC, C]^T + bias[OC]; bias may be NULL
static inline void matmul_forward_cpu(float* out, const float* inp, const float* weight, const float* bias,
                                      int B, int T, int C, int OC) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float* x = inp + (size_t)bt * C;
        float* o = out + (size_t)bt * OC;
        for (int oc = 0; oc < OC; oc++) {
            const float* w = weight + (size_t)oc * C;
            float sum = 0.0f;
            #pragma omp simd reduction(+:sum)
            for (int i = 0; i < C; i++) { sum += x[i] * w[i]; }
            o[oc] = sum + (bias != NULL ? bias[oc] : 0.0f);
        }
    }
}

// y[i] += a * x[i] for i < n
static inline void axpy_cpu(float* y, float a, const float* x, int n) {
    for (int i = 0; i < n; i++) { y[i] += a * x[i]; }
}

// dinp[B*T, C] += dout[B*T, OC] @ weight[OC, C]
static inline void matmul_backward_dinp_cpu(float* dinp, const float* dout, const float* weight, int B, int T, int C, int OC) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float* d = dout + (size_t)bt * OC;
        for (int oc = 0; oc < OC; oc++) { axpy_cpu(dinp + (size_t)bt * C, d[oc], weight + (size_t)oc * C, C); }
    }
}

// dweight[OC, C] += dout[B*T, OC]^T @ inp[B*T, C]
static inline void matmul_backward_dweight_cpu(float* dweight, const float* dout, const float* inp, int B, int T, int C, int OC) {
    #pragma omp parallel for
    for (int oc = 0; oc < OC; oc++) {
        float* dw = dweight + (size_t)oc * C;
        for (int bt = 0; bt < B * T; bt++) { axpy_cpu(dw, dout[(size_t)bt * OC + oc], inp + (size_t)bt * C, C); }
    }
}

// dbias[OC] += column sums of dout[B*T, OC] (FP32, in token order)
static inline void matmul_backward_dbias_cpu(float* dbias, const float* dout, int B, int T, int OC) {
    #pragma omp parallel for
    for (int oc = 0; oc < OC; oc++) {
        float db = 0.0f;
        for (int bt = 0; bt < B * T; bt++) { db += dout[(size_t)bt * OC + oc]; }
        dbias[oc] += db;
    }
}

// matmul gradients: dinp += dout @ weight, dweight += dout^T @ inp, dbias += column sums of dout (may be NULL)
static inline void matmul_backward_cpu(float* dinp, float* dweight, float* dbias, const float* dout,
                                       const float* inp, const float* weight, int B, int T, int C, int OC) {
    matmul_backward_dinp_cpu(dinp, dout, weight, B, T, C, OC);
    matmul_backward_dweight_cpu(dweight, dout, inp, B, T, C, OC);
    if (dbias != NULL) { matmul_backward_dbias_cpu(dbias, dout, B, T, OC); }
}

// causal grouped-query self-attention: inp [B,T,C+2*NKV*hs] holds NH query heads, then NKV key heads, then NKV
// value heads, of hs = C/NH channels each; query head h uses key/value head h/(NH/NKV). out [B,T,C]; att
// [B,NH,T,T] keeps the softmax probabilities (zero above the diagonal) for the backward pass
static inline void attention_gqa_forward_cpu(float* out, float* att, const float* inp, int B, int T, int C, int NH, int NKV) {
    int hs = C / NH, group = NH / NKV;
    size_t stride = (size_t)C + 2 * (size_t)NKV * hs, voff = (size_t)C + (size_t)NKV * hs;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                int kvh = h / group;
                const float* q = inp + ((size_t)b * T + t) * stride + h * hs;
                float* a = att + (((size_t)b * NH + h) * T + t) * T;
                float maxval = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* k = inp + ((size_t)b * T + t2) * stride + C + kvh * hs;
                    float dot = 0.0f;
                    for (int i = 0; i < hs; i++) { dot += q[i] * k[i]; }
                    a[t2] = dot * scale;
                    if (a[t2] > maxval) { maxval = a[t2]; }
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) { a[t2] = expf(a[t2] - maxval); sum += a[t2]; }
                for (int t2 = 0; t2 <= t; t2++) { a[t2] /= sum; }
                for (int t2 = t + 1; t2 < T; t2++) { a[t2] = 0.0f; }
                float* o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) { o[i] = 0.0f; }
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* v = inp + ((size_t)b * T + t2) * stride + voff + kvh * hs;
                    for (int i = 0; i < hs; i++) { o[i] += a[t2] * v[i]; }
                }
            }
        }
    }
}

// grouped-query attention gradient: dinp (layout of inp) += d(out)/d(inp) applied to dout, from the saved att
static inline void attention_gqa_backward_cpu(float* dinp, const float* dout, const float* inp, const float* att,
                                              int B, int T, int C, int NH, int NKV) {
    int hs = C / NH, group = NH / NKV;
    size_t stride = (size_t)C + 2 * (size_t)NKV * hs, voff = (size_t)C + (size_t)NKV * hs;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int kvh = 0; kvh < NKV; kvh++) {   // one (b, kv head) owns its k/v channels and its group's q channels: no races
            float* datt = (float*)malloc_check((size_t)T * sizeof(float));
            for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                for (int t = 0; t < T; t++) {
                    const float* a = att + (((size_t)b * NH + h) * T + t) * T;
                    const float* d = dout + ((size_t)b * T + t) * C + h * hs;
                    const float* q = inp + ((size_t)b * T + t) * stride + h * hs;
                    float* dq = dinp + ((size_t)b * T + t) * stride + h * hs;
                    float datt_dot_att = 0.0f;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float* v = inp + ((size_t)b * T + t2) * stride + voff + kvh * hs;
                        float* dv = dinp + ((size_t)b * T + t2) * stride + voff + kvh * hs;
                        float s = 0.0f;
                        for (int i = 0; i < hs; i++) { s += d[i] * v[i]; dv[i] += a[t2] * d[i]; }
                        datt[t2] = s;
                        datt_dot_att += s * a[t2];
                    }
                    for (int t2 = 0; t2 <= t; t2++) {
                        float dpre = a[t2] * (datt[t2] - datt_dot_att) * scale;
                        const float* k = inp + ((size_t)b * T + t2) * stride + C + kvh * hs;
                        float* dk = dinp + ((size_t)b * T + t2) * stride + C + kvh * hs;
                        for (int i = 0; i < hs; i++) { dq[i] += dpre * k[i]; dk[i] += dpre * q[i]; }
                    }
                }
            }
            free(datt);
        }
    }
}

// GPT-2 causal multi-head self-attention: inp = qkv [B,T,3C] (q, k, v slices), out [B,T,C], att [B,NH,T,T]
static inline void attention_forward_cpu(float* out, float* att, const float* inp, int B, int T, int C, int NH) {
    attention_gqa_forward_cpu(out, att, inp, B, T, C, NH, NH);
}

// GPT-2 attention gradient: dinp (dqkv [B,T,3C]) += d(out)/d(qkv) applied to dout, from the saved att
static inline void attention_backward_cpu(float* dinp, const float* dout, const float* inp, const float* att,
                                          int B, int T, int C, int NH) {
    attention_gqa_backward_cpu(dinp, dout, inp, att, B, T, C, NH, NH);
}

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise over N
static inline void gelu_forward_cpu(float* out, const float* inp, size_t N) {
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

// dinp += gelu'(inp) * dout, elementwise over N
static inline void gelu_backward_cpu(float* dinp, const float* inp, const float* dout, size_t N) {
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float th = tanhf(GELU_SCALE * (x + 0.044715f * x * x * x));
        float dth = (1.0f - th * th) * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += (0.5f * (1.0f + th) + 0.5f * x * dth) * dout[i];
    }
}

// out = inp1 + inp2, elementwise over N
static inline void residual_forward_cpu(float* out, const float* inp1, const float* inp2, size_t N) {
    for (size_t i = 0; i < N; i++) { out[i] = inp1[i] + inp2[i]; }
}

// dinp1 += dout, dinp2 += dout
static inline void residual_backward_cpu(float* dinp1, float* dinp2, const float* dout, size_t N) {
    for (size_t i = 0; i < N; i++) { dinp1[i] += dout[i]; dinp2[i] += dout[i]; }
}

// probs = softmax over the V real columns of logits [B*T, Vp] (padded columns of probs = 0);
// losses[bt] = -log probs[bt, targets[bt]] when targets is not NULL (then losses must be too)
static inline void softmax_crossentropy_forward_cpu(float* losses, float* probs, const float* logits,
                                                    const int* targets, int B, int T, int V, int Vp) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float* z = logits + (size_t)bt * Vp;
        float* p = probs + (size_t)bt * Vp;
        float maxval = -INFINITY;
        for (int i = 0; i < V; i++) { if (z[i] > maxval) { maxval = z[i]; } }
        double sum = 0.0;
        for (int i = 0; i < V; i++) { p[i] = expf(z[i] - maxval); sum += p[i]; }
        for (int i = 0; i < V; i++) { p[i] = (float)(p[i] / sum); }
        for (int i = V; i < Vp; i++) { p[i] = 0.0f; }
        if (targets != NULL) { losses[bt] = (float)(log(sum) - (double)(z[targets[bt]] - maxval)); }
    }
}

// dlogits[bt, i] += (probs[bt, i] - [i == target]) * dlosses[bt] over the V real columns (padded stay)
static inline void crossentropy_softmax_backward_cpu(float* dlogits, const float* dlosses, const float* probs,
                                                     const int* targets, int B, int T, int V, int Vp) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        float* dz = dlogits + (size_t)bt * Vp;
        const float* p = probs + (size_t)bt * Vp;
        float d = dlosses[bt];
        for (int i = 0; i < V; i++) { dz[i] += (p[i] - (i == targets[bt] ? 1.0f : 0.0f)) * d; }
    }
}

// one AdamW step (torch.optim.AdamW semantics) on n values; t is the 1-based step
static inline void adamw_update_cpu(float* params, const float* grads, float* m, float* v, size_t n,
                                    float lr, float beta1, float beta2, float eps, float weight_decay, int t) {
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float mhat = m[i] / bc1, vhat = v[i] / bc2;
        params[i] -= lr * weight_decay * params[i];
        params[i] -= lr * mhat / (sqrtf(vhat) + eps);
    }
}

// ----------------------------------------------------------------------------------------------
// block linears in a precision mode. st: the AdaHOP state (NULL = FP32, the bf16 behaviour); linear: its index
// layer * NUM_LINEAR_KINDS + kind; record: 1 records the patterns of x, W and dY into st

// the strategy of GEMM `gemm` of block linear `linear` (STRAT_BF16 without an AdaHOP state)
static inline int block_linear_strategy_cpu(const AdahopState* st, int linear, int gemm) {
    return st != NULL ? adahop_strategy_of(st, linear, gemm) : STRAT_BF16;
}

// records the pattern of tensor x [R x C] for `linear` when patterns are being collected
static inline void block_linear_record_cpu(AdahopState* st, int record, int linear, int tensor, const float* x, int R, int C) {
    if (st != NULL && record) { adahop_record(st, linear, tensor, tensor_pattern_cpu(x, R, C)); }
}

// block linear out[B*T, OC] = inp[B*T, C] @ weight[OC, C]^T + bias[OC] (bias may be NULL), its GEMM in the strategy of `linear`
static inline void block_linear_forward_cpu(AdahopState* st, int record, int linear, float* out, const float* inp,
                                            const float* weight, const float* bias, int B, int T, int C, int OC) {
    int N = B * T, s = block_linear_strategy_cpu(st, linear, GEMM_FWD);
    block_linear_record_cpu(st, record, linear, TENSOR_X, inp, N, C);
    block_linear_record_cpu(st, record, linear, TENSOR_W, weight, OC, C);
    if (s == STRAT_BF16) { matmul_forward_cpu(out, inp, weight, bias, B, T, C, OC); return; }
    NTOperand a = {inp, N, C, 0}, b = {weight, OC, C, 0};
    adahop_gemm_nt_cpu(out, 0, a, b, s, st->oe_k);
    if (bias == NULL) { return; }
    for (int bt = 0; bt < N; bt++) { for (int oc = 0; oc < OC; oc++) { out[(size_t)bt * OC + oc] += bias[oc]; } }
}

// gradients of a block linear (dinp, dweight, dbias +=; dbias may be NULL), the dX and dW GEMMs in the strategies of
// `linear`: dX = dY W as A = dY [B*T, OC], B^T = W^T [C, OC]; dW = dY^T x as A = dY^T [OC, B*T], B^T = x^T [C, B*T]
static inline void block_linear_backward_cpu(AdahopState* st, int record, int linear, float* dinp, float* dweight,
                                             float* dbias, const float* dout, const float* inp, const float* weight,
                                             int B, int T, int C, int OC) {
    int N = B * T, sdx = block_linear_strategy_cpu(st, linear, GEMM_DX), sdw = block_linear_strategy_cpu(st, linear, GEMM_DW);
    block_linear_record_cpu(st, record, linear, TENSOR_DY, dout, N, OC);
    if (sdx == STRAT_BF16) { matmul_backward_dinp_cpu(dinp, dout, weight, B, T, C, OC); }
    else {
        NTOperand a = {dout, N, OC, 0}, b = {weight, C, OC, 1};
        adahop_gemm_nt_cpu(dinp, 1, a, b, sdx, st->oe_k);
    }
    if (sdw == STRAT_BF16) { matmul_backward_dweight_cpu(dweight, dout, inp, B, T, C, OC); }
    else {
        NTOperand a = {dout, OC, N, 1}, b = {inp, C, N, 1};
        adahop_gemm_nt_cpu(dweight, 1, a, b, sdw, st->oe_k);
    }
    if (dbias != NULL) { matmul_backward_dbias_cpu(dbias, dout, B, T, OC); }
}

// ----------------------------------------------------------------------------------------------
// model helpers

// dies (naming `who`) unless B > 0, 0 < T <= maxT and every input and target (if any) token lies in [0, V)
static inline void check_batch_cpu(const char* who, const int* inputs, const int* targets, int B, int T, int maxT, int V) {
    if (B <= 0 || T <= 0 || T > maxT) { die("%s: need B > 0 and 0 < T <= %d, got B=%d T=%d", who, maxT, B, T); }
    for (int i = 0; i < B * T; i++) {
        if (inputs[i] < 0 || inputs[i] >= V) { die("%s: input token %d at %d is outside [0, %d)", who, inputs[i], i, V); }
        if (targets && (targets[i] < 0 || targets[i] >= V)) { die("%s: target token %d at %d is outside [0, %d)", who, targets[i], i, V); }
    }
}

// the batch side of a CPU model: activation buffers sized by its first forward, and a copy of the last batch
typedef struct {
    int alloc_B, alloc_T;           // activation buffers fit B <= alloc_B and T <= alloc_T (0 = not yet)
    float* acts_memory;
    float* grad_acts_memory;
    int* inputs;                    // copies of the last forward's batch
    int* targets;
    int B, T;                       // shape of the last forward
} BatchCPU;

// starts a forward pass (naming `who`) with n activation floats: checks the batch, allocates the buffers on the first
// call (later batches must fit in its B and T) and keeps a copy of the batch and its shape
static inline void batch_begin_forward_cpu(BatchCPU* b, const char* who, size_t n, const int* inputs, const int* targets,
                                           int B, int T, int maxT, int V) {
    check_batch_cpu(who, inputs, targets, B, T, maxT, V);
    if (b->acts_memory == NULL) {
        b->acts_memory = (float*)malloc_check(n * sizeof(float));
        b->grad_acts_memory = (float*)malloc_check(n * sizeof(float));
        b->inputs = (int*)malloc_check((size_t)B * T * sizeof(int));
        b->targets = (int*)malloc_check((size_t)B * T * sizeof(int));
        b->alloc_B = B;
        b->alloc_T = T;
    } else if (B > b->alloc_B || T > b->alloc_T) {
        die("%s: batch B=%d T=%d is larger than the B=%d T=%d the activations were allocated for", who, B, T, b->alloc_B, b->alloc_T);
    }
    b->B = B;
    b->T = T;
    memcpy(b->inputs, inputs, (size_t)B * T * sizeof(int));
    if (targets) { memcpy(b->targets, targets, (size_t)B * T * sizeof(int)); }
}

// starts a backward pass (naming `who`) with n activation floats: dies unless the last forward had targets
// (mean_loss >= 0), then zeroes the activation gradients
static inline void batch_begin_backward_cpu(BatchCPU* b, const char* who, size_t n, float mean_loss) {
    if (b->acts_memory == NULL || mean_loss < 0.0f) { die("%s: needs a forward pass with targets first", who); }
    memset(b->grad_acts_memory, 0, n * sizeof(float));
}

// frees the buffers batch_begin_forward_cpu allocated
static inline void batch_free_cpu(BatchCPU* b) {
    free(b->acts_memory);
    free(b->grad_acts_memory);
    free(b->inputs);
    free(b->targets);
}

// n floats each of parameters (a copy of init), of gradients and of the AdamW moments m and v, all but the parameters zero
static inline void alloc_param_memory_cpu(size_t n, const float* init, float** params, float** grads, float** m, float** v) {
    *params = (float*)malloc_check(n * sizeof(float));
    memcpy(*params, init, n * sizeof(float));
    *grads = (float*)calloc_check(n, sizeof(float));
    *m = (float*)calloc_check(n, sizeof(float));
    *v = (float*)calloc_check(n, sizeof(float));
}

// frees what alloc_param_memory_cpu allocated
static inline void free_param_memory_cpu(float* params, float* grads, float* m, float* v) {
    free(params);
    free(grads);
    free(m);
    free(v);
}

// sum of the n sizes
static inline size_t sum_sizes_cpu(const size_t* sizes, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) { total += sizes[i]; }
    return total;
}

// points *ptrs[i] at the i-th of the n tensors that lie back to back in memory, sizes[i] floats each
static inline void point_tensors_cpu(float** const* ptrs, const size_t* sizes, int n, float* memory) {
    for (int i = 0; i < n; i++) { *ptrs[i] = memory; memory += sizes[i]; }
}

// dies (naming `who`) unless st is NULL (FP32) or an AdaHOP state for num_layers layers
static inline void check_precision_cpu(const char* who, const AdahopState* st, int num_layers) {
    if (st != NULL && st->num_layers != num_layers) {
        die("%s: AdaHOP state for %d layers, model has %d", who, st->num_layers, num_layers);
    }
}

// probs and losses of logits [B*T, Vp] (see softmax_crossentropy_forward_cpu); returns the mean loss (accumulated
// in double), or -1 when targets is NULL
static inline float loss_forward_cpu(float* losses, float* probs, const float* logits, const int* targets,
                                     int B, int T, int V, int Vp) {
    softmax_crossentropy_forward_cpu(losses, probs, logits, targets, B, T, V, Vp);
    if (targets == NULL) { return -1.0f; }
    double sum = 0.0;
    for (int i = 0; i < B * T; i++) { sum += losses[i]; }
    return (float)(sum / (double)(B * T));
}

// gradient of the mean loss: dlosses = 1 / (B*T) and dlogits += its softmax cross-entropy gradient
static inline void loss_backward_cpu(float* dlogits, float* dlosses, const float* probs, const int* targets,
                                     int B, int T, int V, int Vp) {
    for (int i = 0; i < B * T; i++) { dlosses[i] = 1.0f / (float)(B * T); }
    crossentropy_softmax_backward_cpu(dlogits, dlosses, probs, targets, B, T, V, Vp);
}

// global L2 norm of n gradients
static inline float grad_norm_cpu(const float* grads, size_t n) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) { sum += (double)grads[i] * grads[i]; }
    return (float)sqrt(sum);
}

// clips the gradients of the num_tensors tensors (sizes[], back to back) to global norm grad_clip (when > 0), then
// one AdamW step (1-based step) decaying only the tensors t with decays(t); returns the norm before clipping
static inline float clip_adamw_cpu(float* params, float* grads, float* m, float* v, const size_t* sizes, int num_tensors,
                                   int (*decays)(int), float lr, float beta1, float beta2, float eps, float weight_decay,
                                   float grad_clip, int step) {
    size_t n = sum_sizes_cpu(sizes, num_tensors);
    float norm = grad_norm_cpu(grads, n);
    if (grad_clip > 0.0f && norm > grad_clip) {
        float scale = grad_clip / norm;
        for (size_t i = 0; i < n; i++) { grads[i] *= scale; }
    }
    size_t off = 0;
    for (int t = 0; t < num_tensors; t++) {
        float wd = decays(t) ? weight_decay : 0.0f;
        adamw_update_cpu(params + off, grads + off, m + off, v + off, sizes[t], lr, beta1, beta2, eps, wd, step);
        off += sizes[t];
    }
    return norm;
}

// ----------------------------------------------------------------------------------------------
// model

// pointers into one block of parameters (or gradients), in the gpt2_param_sizes() order
typedef struct {
    float *wte, *wpe, *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
    float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb, *lnfw, *lnfb;
} GPT2CPUParams;

#define GPT2CPU_NUM_ACTS 23
// pointers into one block of activations (or their gradients); per-layer tensors are stacked over L
typedef struct {
    float *encoded, *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att, *attproj, *residual2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *fcproj, *residual3;
    float *lnf, *lnf_mean, *lnf_rstd, *logits, *probs, *losses, *dlosses;
} GPT2CPUActs;

typedef struct {
    GPT2Config config;
    size_t param_sizes[NUM_PARAMETER_TENSORS];
    size_t num_params;
    float* params_memory;           // all parameters, our file layout
    float* grads_memory;            // d(mean loss)/d(params), same layout
    float* m_memory;                // AdamW first moment
    float* v_memory;                // AdamW second moment
    GPT2CPUParams params, grads;
    BatchCPU batch;                 // activation buffers and the last forward's batch
    GPT2CPUActs acts, grad_acts;
    float mean_loss;                // -1 when the last forward had no targets
    AdahopState* adahop;            // precision of the block linears; NULL = FP32 (not owned)
    int stats_now;                  // record the patterns of x, W, dY into adahop in forward/backward
} GPT2CPU;

// points the 16 named tensors into memory laid out by sizes
static inline void gpt2cpu_point_params(GPT2CPUParams* p, float* memory, const size_t* sizes) {
    float** ptrs[NUM_PARAMETER_TENSORS] = {&p->wte, &p->wpe, &p->ln1w, &p->ln1b, &p->qkvw, &p->qkvb,
        &p->attprojw, &p->attprojb, &p->ln2w, &p->ln2b, &p->fcw, &p->fcb, &p->fcprojw, &p->fcprojb,
        &p->lnfw, &p->lnfb};
    point_tensors_cpu(ptrs, sizes, NUM_PARAMETER_TENSORS, memory);
}

// sizes of the activation tensors for a (B, T) batch, in GPT2CPUActs order
static inline void gpt2cpu_act_sizes(const GPT2Config* c, int B, int T, size_t sizes[GPT2CPU_NUM_ACTS]) {
    size_t L = c->num_layers, C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size;
    size_t BT = (size_t)B * T;
    size_t s[GPT2CPU_NUM_ACTS] = {BT * C, L * BT * C, L * BT, L * BT, L * BT * 3 * C, L * BT * C,
        L * B * NH * T * T, L * BT * C, L * BT * C, L * BT * C, L * BT, L * BT, L * BT * 4 * C, L * BT * 4 * C,
        L * BT * C, L * BT * C, BT * C, BT, BT, BT * Vp, BT * Vp, BT, BT};
    memcpy(sizes, s, sizeof(s));
}

// points the named activation tensors into memory laid out for (B, T)
static inline void gpt2cpu_point_acts(GPT2CPUActs* a, float* memory, const GPT2Config* c, int B, int T) {
    float** ptrs[GPT2CPU_NUM_ACTS] = {&a->encoded, &a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv, &a->atty,
        &a->att, &a->attproj, &a->residual2, &a->ln2, &a->ln2_mean, &a->ln2_rstd, &a->fch, &a->fch_gelu,
        &a->fcproj, &a->residual3, &a->lnf, &a->lnf_mean, &a->lnf_rstd, &a->logits, &a->probs, &a->losses,
        &a->dlosses};
    size_t sizes[GPT2CPU_NUM_ACTS];
    gpt2cpu_act_sizes(c, B, T, sizes);
    point_tensors_cpu(ptrs, sizes, GPT2CPU_NUM_ACTS, memory);
}

// total activation floats for (B, T)
static inline size_t gpt2cpu_num_acts(const GPT2Config* c, int B, int T) {
    size_t sizes[GPT2CPU_NUM_ACTS];
    gpt2cpu_act_sizes(c, B, T, sizes);
    return sum_sizes_cpu(sizes, GPT2CPU_NUM_ACTS);
}

// builds a model of shape *config with a copy of params (gpt2_num_params floats); zero grads and moments
static inline void gpt2cpu_build(GPT2CPU* m, const GPT2Config* config, const float* params) {
    const char* problem = gpt2_config_problem(config);
    if (problem) { die("gpt2cpu_build: invalid model shape: %s", problem); }
    memset(m, 0, sizeof(*m));
    m->config = *config;
    gpt2_param_sizes(config, m->param_sizes);
    m->num_params = gpt2_num_params(config);
    alloc_param_memory_cpu(m->num_params, params, &m->params_memory, &m->grads_memory, &m->m_memory, &m->v_memory);
    gpt2cpu_point_params(&m->params, m->params_memory, m->param_sizes);
    gpt2cpu_point_params(&m->grads, m->grads_memory, m->param_sizes);
    m->mean_loss = -1.0f;
}

// runs the block linears under st (NULL = FP32, the bf16 behaviour); the caller owns st
static inline void gpt2cpu_set_precision(GPT2CPU* m, AdahopState* st) {
    check_precision_cpu("gpt2cpu_set_precision", st, m->config.num_layers);
    m->adahop = st;
}

// forward pass; targets may be NULL (then mean_loss = -1). Probabilities and logits stay in m->acts
static inline void gpt2cpu_forward(GPT2CPU* m, const int* inputs, const int* targets, int B, int T) {
    const GPT2Config* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, V = c->vocab_size, Vp = c->padded_vocab_size;
    batch_begin_forward_cpu(&m->batch, "gpt2cpu_forward", gpt2cpu_num_acts(c, B, T), inputs, targets, B, T, c->max_seq_len, V);
    gpt2cpu_point_acts(&m->acts, m->batch.acts_memory, c, B, T);
    GPT2CPUParams p = m->params;
    GPT2CPUActs a = m->acts;
    AdahopState* st = m->adahop;
    int rec = m->stats_now;
    size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;

    encoder_forward_cpu(a.encoded, inputs, p.wte, p.wpe, B, T, C);
    for (int l = 0; l < L; l++) {
        const float* res = l == 0 ? a.encoded : a.residual3 + (l - 1) * BTC;
        float* ln1 = a.ln1 + l * BTC;
        float* qkv = a.qkv + l * 3 * BTC;
        float* atty = a.atty + l * BTC;
        float* attproj = a.attproj + l * BTC;
        float* res2 = a.residual2 + l * BTC;
        float* ln2 = a.ln2 + l * BTC;
        float* fch = a.fch + l * 4 * BTC;
        float* fch_gelu = a.fch_gelu + l * 4 * BTC;
        float* fcproj = a.fcproj + l * BTC;
        layernorm_forward_cpu(ln1, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, res, p.ln1w + l * C, p.ln1b + l * C, B, T, C);
        int lin = l * NUM_LINEAR_KINDS;
        block_linear_forward_cpu(st, rec, lin + LIN_QKV, qkv, ln1, p.qkvw + (size_t)l * 3 * C * C, p.qkvb + l * 3 * C, B, T, C, 3 * C);
        attention_forward_cpu(atty, a.att + (size_t)l * B * NH * T * T, qkv, B, T, C, NH);
        block_linear_forward_cpu(st, rec, lin + LIN_ATTPROJ, attproj, atty, p.attprojw + (size_t)l * C * C, p.attprojb + l * C, B, T, C, C);
        residual_forward_cpu(res2, res, attproj, BTC);
        layernorm_forward_cpu(ln2, a.ln2_mean + l * BT, a.ln2_rstd + l * BT, res2, p.ln2w + l * C, p.ln2b + l * C, B, T, C);
        block_linear_forward_cpu(st, rec, lin + LIN_FC, fch, ln2, p.fcw + (size_t)l * 4 * C * C, p.fcb + l * 4 * C, B, T, C, 4 * C);
        gelu_forward_cpu(fch_gelu, fch, 4 * BTC);
        block_linear_forward_cpu(st, rec, lin + LIN_FCPROJ, fcproj, fch_gelu, p.fcprojw + (size_t)l * 4 * C * C, p.fcprojb + l * C, B, T, 4 * C, C);
        residual_forward_cpu(a.residual3 + l * BTC, res2, fcproj, BTC);
    }
    layernorm_forward_cpu(a.lnf, a.lnf_mean, a.lnf_rstd, a.residual3 + (L - 1) * BTC, p.lnfw, p.lnfb, B, T, C);
    matmul_forward_cpu(a.logits, a.lnf, p.wte, NULL, B, T, C, Vp);
    m->mean_loss = loss_forward_cpu(a.losses, a.probs, a.logits, targets, B, T, V, Vp);
}

// sets the parameter gradients to zero (gpt2cpu_backward accumulates into them)
static inline void gpt2cpu_zero_grad(GPT2CPU* m) {
    memset(m->grads_memory, 0, m->num_params * sizeof(float));
}

// backward pass of the last forward (which needs targets): grads += d(mean loss)/d(params)
static inline void gpt2cpu_backward(GPT2CPU* m) {
    const GPT2Config* c = &m->config;
    int B = m->batch.B, T = m->batch.T;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, V = c->vocab_size, Vp = c->padded_vocab_size;
    batch_begin_backward_cpu(&m->batch, "gpt2cpu_backward", gpt2cpu_num_acts(c, B, T), m->mean_loss);
    gpt2cpu_point_acts(&m->grad_acts, m->batch.grad_acts_memory, c, B, T);
    GPT2CPUParams p = m->params, g = m->grads;
    GPT2CPUActs a = m->acts, d = m->grad_acts;
    AdahopState* st = m->adahop;
    int rec = m->stats_now;
    size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;

    loss_backward_cpu(d.logits, d.dlosses, a.probs, m->batch.targets, B, T, V, Vp);
    matmul_backward_cpu(d.lnf, g.wte, NULL, d.logits, a.lnf, p.wte, B, T, C, Vp);
    layernorm_backward_cpu(d.residual3 + (L - 1) * BTC, g.lnfw, g.lnfb, d.lnf, a.residual3 + (L - 1) * BTC,
                           p.lnfw, a.lnf_mean, a.lnf_rstd, B, T, C);
    for (int l = L - 1; l >= 0; l--) {
        const float* res = l == 0 ? a.encoded : a.residual3 + (l - 1) * BTC;
        float* dres = l == 0 ? d.encoded : d.residual3 + (l - 1) * BTC;
        size_t o = l * BTC;
        int lin = l * NUM_LINEAR_KINDS;
        // fcproj and its residual
        residual_backward_cpu(d.residual2 + o, d.fcproj + o, d.residual3 + o, BTC);
        block_linear_backward_cpu(st, rec, lin + LIN_FCPROJ, d.fch_gelu + 4 * o, g.fcprojw + (size_t)l * 4 * C * C, g.fcprojb + l * C, d.fcproj + o,
                                  a.fch_gelu + 4 * o, p.fcprojw + (size_t)l * 4 * C * C, B, T, 4 * C, C);
        gelu_backward_cpu(d.fch + 4 * o, a.fch + 4 * o, d.fch_gelu + 4 * o, 4 * BTC);
        block_linear_backward_cpu(st, rec, lin + LIN_FC, d.ln2 + o, g.fcw + (size_t)l * 4 * C * C, g.fcb + l * 4 * C, d.fch + 4 * o,
                                  a.ln2 + o, p.fcw + (size_t)l * 4 * C * C, B, T, C, 4 * C);
        layernorm_backward_cpu(d.residual2 + o, g.ln2w + l * C, g.ln2b + l * C, d.ln2 + o, a.residual2 + o,
                               p.ln2w + l * C, a.ln2_mean + l * BT, a.ln2_rstd + l * BT, B, T, C);
        // attention and its residual
        residual_backward_cpu(dres, d.attproj + o, d.residual2 + o, BTC);
        block_linear_backward_cpu(st, rec, lin + LIN_ATTPROJ, d.atty + o, g.attprojw + (size_t)l * C * C, g.attprojb + l * C, d.attproj + o,
                                  a.atty + o, p.attprojw + (size_t)l * C * C, B, T, C, C);
        attention_backward_cpu(d.qkv + 3 * o, d.atty + o, a.qkv + 3 * o, a.att + (size_t)l * B * NH * T * T, B, T, C, NH);
        block_linear_backward_cpu(st, rec, lin + LIN_QKV, d.ln1 + o, g.qkvw + (size_t)l * 3 * C * C, g.qkvb + l * 3 * C, d.qkv + 3 * o,
                                  a.ln1 + o, p.qkvw + (size_t)l * 3 * C * C, B, T, C, 3 * C);
        layernorm_backward_cpu(dres, g.ln1w + l * C, g.ln1b + l * C, d.ln1 + o, res,
                               p.ln1w + l * C, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, B, T, C);
    }
    encoder_backward_cpu(g.wte, g.wpe, d.encoded, m->batch.inputs, B, T, C);
}

// clips the gradients to global norm grad_clip (when > 0), then one AdamW step (1-based step), decaying
// only the tensors gpt2_param_decays() names; returns the gradient norm before clipping
static inline float gpt2cpu_update(GPT2CPU* m, float lr, float beta1, float beta2, float eps,
                                   float weight_decay, float grad_clip, int step) {
    return clip_adamw_cpu(m->params_memory, m->grads_memory, m->m_memory, m->v_memory, m->param_sizes,
                          NUM_PARAMETER_TENSORS, gpt2_param_decays, lr, beta1, beta2, eps, weight_decay, grad_clip, step);
}

// frees everything gpt2cpu_build and gpt2cpu_forward allocated
static inline void gpt2cpu_free(GPT2CPU* m) {
    free_param_memory_cpu(m->params_memory, m->grads_memory, m->m_memory, m->v_memory);
    batch_free_cpu(&m->batch);
    memset(m, 0, sizeof(*m));
}

#endif
