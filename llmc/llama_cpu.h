// FP32 CPU reference of the LLaMA-style model of llmc/llama_config.h (forward, backward, AdamW), in the style and
// with the conventions of llmc/gpt2_cpu.h, whose matmul, block linears, attention, cross-entropy and AdamW it
// reuses. Compiles as C11 and as C++; OpenMP where it pays. Every *_backward_cpu accumulates (+=) into its
// gradient outputs, except rope_backward_cpu, which transforms its gradient in place like rope_forward_cpu.
//
// Block: x += o(attention(rope(qkv(rmsnorm(x))))); x += down(silu(gate(rmsnorm(x))) * up(rmsnorm(x))).
// Precision (llamacpu_set_precision): the 4 fused block linears run through block_linear_*_cpu with the AdaHOP
// state in the slots of GPT-2's 4 linears: LIN_QKV = qkv, LIN_ATTPROJ = o, LIN_FC = gate+up, LIN_FCPROJ = down.
// Embedding, LM head, attention, RoPE, norms, SwiGLU, loss and AdamW always stay FP32.
#ifndef LLMC_LLAMA_CPU_H
#define LLMC_LLAMA_CPU_H

#include <math.h>
#include <stddef.h>
#include <string.h>
#include "utils.h"
#include "llama_config.h"
#include "adahop.h"
#include "gpt2_cpu.h"

// ----------------------------------------------------------------------------------------------
// layers

// out = inp * rstd * weight per row of C with rstd = 1 / sqrt(mean(inp^2) + 1e-5); saves rstd [B*T]
static inline void rmsnorm_forward_cpu(float* out, float* rstd, const float* inp, const float* weight, int B, int T, int C) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float* x = inp + (size_t)bt * C;
        float* o = out + (size_t)bt * C;
        float ss = 0.0f;
        for (int i = 0; i < C; i++) { ss += x[i] * x[i]; }
        float s = 1.0f / sqrtf(ss / C + LLAMA_RMS_EPS);
        for (int i = 0; i < C; i++) { o[i] = x[i] * s * weight[i]; }
        rstd[bt] = s;
    }
}

// rmsnorm gradients: dinp += (dnorm - norm * mean(dnorm * norm)) * rstd with dnorm = weight * dout, dweight +=
// norm * dout (serial over rows: dweight is shared)
static inline void rmsnorm_backward_cpu(float* dinp, float* dweight, const float* dout, const float* inp,
                                        const float* weight, const float* rstd, int B, int T, int C) {
    for (int bt = 0; bt < B * T; bt++) {
        const float* d = dout + (size_t)bt * C;
        const float* x = inp + (size_t)bt * C;
        float* dx = dinp + (size_t)bt * C;
        float s = rstd[bt], dnorm_norm_mean = 0.0f;
        for (int i = 0; i < C; i++) { dnorm_norm_mean += weight[i] * d[i] * x[i] * s; }
        dnorm_norm_mean /= C;
        for (int i = 0; i < C; i++) {
            float norm = x[i] * s;
            dweight[i] += norm * d[i];
            dx[i] += (weight[i] * d[i] - norm * dnorm_norm_mean) * s;
        }
    }
}

// the RoPE table: cos_t[t, i], sin_t[t, i] of the angle t * theta^(-2i/HS) for t < maxT, i < HS/2 (in double)
static inline void rope_table_cpu(float* cos_t, float* sin_t, int maxT, int HS, double theta) {
    for (int t = 0; t < maxT; t++) {
        for (int i = 0; i < HS / 2; i++) {
            double angle = t * pow(theta, -2.0 * i / HS);
            cos_t[(size_t)t * (HS / 2) + i] = (float)cos(angle);
            sin_t[(size_t)t * (HS / 2) + i] = (float)sin(angle);
        }
    }
}

// rotates in place the first nh heads (HS channels each) of every row of x [B*T rows of `stride` floats] by the
// angles of the row's position t: (x_i, x_{i+HS/2}) -> (x_i cos - x_{i+HS/2} sin, x_{i+HS/2} cos + x_i sin) for
// i < HS/2 (HF LLaMA rotate-half); sign -1 rotates by the opposite angles (the transposed rotation)
static inline void rope_rotate_cpu(float* x, const float* cos_t, const float* sin_t, int B, int T, int nh, int HS,
                                   int stride, float sign) {
    int half = HS / 2;
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float* c = cos_t + (size_t)(bt % T) * half;
        const float* s = sin_t + (size_t)(bt % T) * half;
        for (int h = 0; h < nh; h++) {
            float* v = x + (size_t)bt * stride + (size_t)h * HS;
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half], sn = sign * s[i];
                v[i] = a * c[i] - b * sn;
                v[i + half] = b * c[i] + a * sn;
            }
        }
    }
}

// RoPE forward in place on the first nh heads of every row of x (see rope_rotate_cpu)
static inline void rope_forward_cpu(float* x, const float* cos_t, const float* sin_t, int B, int T, int nh, int HS, int stride) {
    rope_rotate_cpu(x, cos_t, sin_t, B, T, nh, HS, stride, 1.0f);
}

// RoPE backward in place: dx holds d(out) on entry and d(in) = R^T d(out) on exit (RoPE is an orthogonal rotation R)
static inline void rope_backward_cpu(float* dx, const float* cos_t, const float* sin_t, int B, int T, int nh, int HS, int stride) {
    rope_rotate_cpu(dx, cos_t, sin_t, B, T, nh, HS, stride, -1.0f);
}

// out[n, j] = silu(g) * u with g = inp[n, j] (gate) and u = inp[n, H + j] (up) for inp [N, 2H], out [N, H];
// silu(g) = g / (1 + exp(-g))
static inline void swiglu_forward_cpu(float* out, const float* inp, size_t N, int H) {
    #pragma omp parallel for
    for (long n = 0; n < (long)N; n++) {
        const float* g = inp + (size_t)n * 2 * H;
        float* o = out + (size_t)n * H;
        for (int j = 0; j < H; j++) { o[j] = g[j] / (1.0f + expf(-g[j])) * g[H + j]; }
    }
}

// swiglu gradients: dgate += dout * u * silu'(g) with silu'(g) = sig(g) (1 + g (1 - sig(g))), dup += dout * silu(g)
static inline void swiglu_backward_cpu(float* dinp, const float* inp, const float* dout, size_t N, int H) {
    #pragma omp parallel for
    for (long n = 0; n < (long)N; n++) {
        const float* g = inp + (size_t)n * 2 * H;
        const float* d = dout + (size_t)n * H;
        float* dg = dinp + (size_t)n * 2 * H;
        for (int j = 0; j < H; j++) {
            float sig = 1.0f / (1.0f + expf(-g[j]));
            dg[j] += d[j] * g[H + j] * sig * (1.0f + g[j] * (1.0f - sig));
            dg[H + j] += d[j] * g[j] * sig;
        }
    }
}

// ----------------------------------------------------------------------------------------------
// model

// pointers into one block of parameters (or gradients), in the llama_param_sizes() order
typedef struct {
    float *wte, *rms1w, *qkvw, *attprojw, *rms2w, *gateupw, *downw, *rmsfw, *lmheadw;
} LlamaCPUParams;

#define LLAMACPU_NUM_ACTS 20
// pointers into one block of activations (or their gradients); per-layer tensors are stacked over L.
// qkv holds q and k after RoPE (what attention saw); its gradient is taken back through RoPE in place.
typedef struct {
    float *encoded, *rms1, *rms1_rstd, *qkv, *atty, *att, *attproj, *residual2, *rms2, *rms2_rstd;
    float *gateup, *swiglu, *down, *residual3, *rmsf, *rmsf_rstd, *logits, *probs, *losses, *dlosses;
} LlamaCPUActs;

typedef struct {
    LlamaConfig config;
    size_t param_sizes[NUM_LLAMA_PARAMETER_TENSORS];
    size_t num_params;
    float* params_memory;           // all parameters, llama_param_sizes() layout
    float* grads_memory;            // d(mean loss)/d(params), same layout
    float* m_memory;                // AdamW first moment
    float* v_memory;                // AdamW second moment
    LlamaCPUParams params, grads;
    float* rope_cos;                // [maxT, HS/2] RoPE table
    float* rope_sin;
    BatchCPU batch;                 // activation buffers and the last forward's batch
    LlamaCPUActs acts, grad_acts;
    float mean_loss;                // -1 when the last forward had no targets
    AdahopState* adahop;            // precision of the block linears; NULL = FP32 (not owned)
    int stats_now;                  // record the patterns of x, W, dY into adahop in forward/backward
} LlamaCPU;

// points the 9 named tensors into memory laid out by sizes
static inline void llamacpu_point_params(LlamaCPUParams* p, float* memory, const size_t* sizes) {
    float** ptrs[NUM_LLAMA_PARAMETER_TENSORS] = {&p->wte, &p->rms1w, &p->qkvw, &p->attprojw, &p->rms2w, &p->gateupw,
                                                 &p->downw, &p->rmsfw, &p->lmheadw};
    point_tensors_cpu(ptrs, sizes, NUM_LLAMA_PARAMETER_TENSORS, memory);
}

// sizes of the activation tensors for a (B, T) batch, in LlamaCPUActs order
static inline void llamacpu_act_sizes(const LlamaConfig* c, int B, int T, size_t sizes[LLAMACPU_NUM_ACTS]) {
    size_t L = c->num_layers, C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size, H = c->hidden;
    size_t BT = (size_t)B * T, QKV = llama_qkv_channels(c);
    size_t s[LLAMACPU_NUM_ACTS] = {BT * C, L * BT * C, L * BT, L * BT * QKV, L * BT * C, L * B * NH * T * T,
        L * BT * C, L * BT * C, L * BT * C, L * BT, L * BT * 2 * H, L * BT * H, L * BT * C, L * BT * C,
        BT * C, BT, BT * Vp, BT * Vp, BT, BT};
    memcpy(sizes, s, sizeof(s));
}

// points the named activation tensors into memory laid out for (B, T)
static inline void llamacpu_point_acts(LlamaCPUActs* a, float* memory, const LlamaConfig* c, int B, int T) {
    float** ptrs[LLAMACPU_NUM_ACTS] = {&a->encoded, &a->rms1, &a->rms1_rstd, &a->qkv, &a->atty, &a->att, &a->attproj,
        &a->residual2, &a->rms2, &a->rms2_rstd, &a->gateup, &a->swiglu, &a->down, &a->residual3, &a->rmsf,
        &a->rmsf_rstd, &a->logits, &a->probs, &a->losses, &a->dlosses};
    size_t sizes[LLAMACPU_NUM_ACTS];
    llamacpu_act_sizes(c, B, T, sizes);
    point_tensors_cpu(ptrs, sizes, LLAMACPU_NUM_ACTS, memory);
}

// total activation floats for (B, T)
static inline size_t llamacpu_num_acts(const LlamaConfig* c, int B, int T) {
    size_t sizes[LLAMACPU_NUM_ACTS];
    llamacpu_act_sizes(c, B, T, sizes);
    return sum_sizes_cpu(sizes, LLAMACPU_NUM_ACTS);
}

// builds a model of shape *config with a copy of params (llama_num_params floats); zero grads and moments
static inline void llamacpu_build(LlamaCPU* m, const LlamaConfig* config, const float* params) {
    const char* problem = llama_config_problem(config);
    if (problem) { die("llamacpu_build: invalid model shape: %s", problem); }
    memset(m, 0, sizeof(*m));
    m->config = *config;
    llama_param_sizes(config, m->param_sizes);
    m->num_params = llama_num_params(config);
    alloc_param_memory_cpu(m->num_params, params, &m->params_memory, &m->grads_memory, &m->m_memory, &m->v_memory);
    llamacpu_point_params(&m->params, m->params_memory, m->param_sizes);
    llamacpu_point_params(&m->grads, m->grads_memory, m->param_sizes);
    size_t half = (size_t)(config->channels / config->num_heads) / 2;
    m->rope_cos = (float*)malloc_check((size_t)config->max_seq_len * half * sizeof(float));
    m->rope_sin = (float*)malloc_check((size_t)config->max_seq_len * half * sizeof(float));
    rope_table_cpu(m->rope_cos, m->rope_sin, config->max_seq_len, config->channels / config->num_heads, LLAMA_ROPE_THETA);
    m->mean_loss = -1.0f;
}

// runs the block linears under st (NULL = FP32, the bf16 behaviour); the caller owns st
static inline void llamacpu_set_precision(LlamaCPU* m, AdahopState* st) {
    check_precision_cpu("llamacpu_set_precision", st, m->config.num_layers);
    m->adahop = st;
}

// forward pass; targets may be NULL (then mean_loss = -1). Probabilities and logits stay in m->acts
static inline void llamacpu_forward(LlamaCPU* m, const int* inputs, const int* targets, int B, int T) {
    const LlamaConfig* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, NKV = c->num_kv_heads, HS = C / NH, H = c->hidden;
    int QKV = llama_qkv_channels(c), V = c->vocab_size, Vp = c->padded_vocab_size;
    batch_begin_forward_cpu(&m->batch, "llamacpu_forward", llamacpu_num_acts(c, B, T), inputs, targets, B, T, c->max_seq_len, V);
    llamacpu_point_acts(&m->acts, m->batch.acts_memory, c, B, T);
    LlamaCPUParams p = m->params;
    LlamaCPUActs a = m->acts;
    AdahopState* st = m->adahop;
    int rec = m->stats_now;
    size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;

    encoder_forward_cpu(a.encoded, inputs, p.wte, NULL, B, T, C);
    for (int l = 0; l < L; l++) {
        const float* res = l == 0 ? a.encoded : a.residual3 + (l - 1) * BTC;
        float* rms1 = a.rms1 + l * BTC;
        float* qkv = a.qkv + l * BT * QKV;
        float* atty = a.atty + l * BTC;
        float* attproj = a.attproj + l * BTC;
        float* res2 = a.residual2 + l * BTC;
        float* rms2 = a.rms2 + l * BTC;
        float* gateup = a.gateup + l * BT * 2 * H;
        float* swiglu = a.swiglu + l * BT * H;
        float* down = a.down + l * BTC;
        int lin = l * NUM_LINEAR_KINDS;
        rmsnorm_forward_cpu(rms1, a.rms1_rstd + l * BT, res, p.rms1w + l * C, B, T, C);
        block_linear_forward_cpu(st, rec, lin + LIN_QKV, qkv, rms1, p.qkvw + (size_t)l * QKV * C, NULL, B, T, C, QKV);
        rope_forward_cpu(qkv, m->rope_cos, m->rope_sin, B, T, NH + NKV, HS, QKV);
        attention_gqa_forward_cpu(atty, a.att + (size_t)l * B * NH * T * T, qkv, B, T, C, NH, NKV);
        block_linear_forward_cpu(st, rec, lin + LIN_ATTPROJ, attproj, atty, p.attprojw + (size_t)l * C * C, NULL, B, T, C, C);
        residual_forward_cpu(res2, res, attproj, BTC);
        rmsnorm_forward_cpu(rms2, a.rms2_rstd + l * BT, res2, p.rms2w + l * C, B, T, C);
        block_linear_forward_cpu(st, rec, lin + LIN_FC, gateup, rms2, p.gateupw + (size_t)l * 2 * H * C, NULL, B, T, C, 2 * H);
        swiglu_forward_cpu(swiglu, gateup, BT, H);
        block_linear_forward_cpu(st, rec, lin + LIN_FCPROJ, down, swiglu, p.downw + (size_t)l * C * H, NULL, B, T, H, C);
        residual_forward_cpu(a.residual3 + l * BTC, res2, down, BTC);
    }
    rmsnorm_forward_cpu(a.rmsf, a.rmsf_rstd, a.residual3 + (L - 1) * BTC, p.rmsfw, B, T, C);
    matmul_forward_cpu(a.logits, a.rmsf, p.lmheadw, NULL, B, T, C, Vp);
    m->mean_loss = loss_forward_cpu(a.losses, a.probs, a.logits, targets, B, T, V, Vp);
}

// sets the parameter gradients to zero (llamacpu_backward accumulates into them)
static inline void llamacpu_zero_grad(LlamaCPU* m) {
    memset(m->grads_memory, 0, m->num_params * sizeof(float));
}

// backward pass of the last forward (which needs targets): grads += d(mean loss)/d(params)
static inline void llamacpu_backward(LlamaCPU* m) {
    const LlamaConfig* c = &m->config;
    int B = m->batch.B, T = m->batch.T;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, NKV = c->num_kv_heads, HS = C / NH, H = c->hidden;
    int QKV = llama_qkv_channels(c), V = c->vocab_size, Vp = c->padded_vocab_size;
    batch_begin_backward_cpu(&m->batch, "llamacpu_backward", llamacpu_num_acts(c, B, T), m->mean_loss);
    llamacpu_point_acts(&m->grad_acts, m->batch.grad_acts_memory, c, B, T);
    LlamaCPUParams p = m->params, g = m->grads;
    LlamaCPUActs a = m->acts, d = m->grad_acts;
    AdahopState* st = m->adahop;
    int rec = m->stats_now;
    size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;

    loss_backward_cpu(d.logits, d.dlosses, a.probs, m->batch.targets, B, T, V, Vp);
    matmul_backward_cpu(d.rmsf, g.lmheadw, NULL, d.logits, a.rmsf, p.lmheadw, B, T, C, Vp);
    rmsnorm_backward_cpu(d.residual3 + (L - 1) * BTC, g.rmsfw, d.rmsf, a.residual3 + (L - 1) * BTC, p.rmsfw, a.rmsf_rstd, B, T, C);
    for (int l = L - 1; l >= 0; l--) {
        const float* res = l == 0 ? a.encoded : a.residual3 + (l - 1) * BTC;
        float* dres = l == 0 ? d.encoded : d.residual3 + (l - 1) * BTC;
        size_t o = l * BTC, oqkv = l * BT * QKV, oh = l * BT * H;
        int lin = l * NUM_LINEAR_KINDS;
        // SwiGLU MLP and its residual
        residual_backward_cpu(d.residual2 + o, d.down + o, d.residual3 + o, BTC);
        block_linear_backward_cpu(st, rec, lin + LIN_FCPROJ, d.swiglu + oh, g.downw + (size_t)l * C * H, NULL, d.down + o,
                                  a.swiglu + oh, p.downw + (size_t)l * C * H, B, T, H, C);
        swiglu_backward_cpu(d.gateup + 2 * oh, a.gateup + 2 * oh, d.swiglu + oh, BT, H);
        block_linear_backward_cpu(st, rec, lin + LIN_FC, d.rms2 + o, g.gateupw + (size_t)l * 2 * H * C, NULL, d.gateup + 2 * oh,
                                  a.rms2 + o, p.gateupw + (size_t)l * 2 * H * C, B, T, C, 2 * H);
        rmsnorm_backward_cpu(d.residual2 + o, g.rms2w + l * C, d.rms2 + o, a.residual2 + o, p.rms2w + l * C,
                             a.rms2_rstd + l * BT, B, T, C);
        // attention and its residual
        residual_backward_cpu(dres, d.attproj + o, d.residual2 + o, BTC);
        block_linear_backward_cpu(st, rec, lin + LIN_ATTPROJ, d.atty + o, g.attprojw + (size_t)l * C * C, NULL, d.attproj + o,
                                  a.atty + o, p.attprojw + (size_t)l * C * C, B, T, C, C);
        attention_gqa_backward_cpu(d.qkv + oqkv, d.atty + o, a.qkv + oqkv, a.att + (size_t)l * B * NH * T * T, B, T, C, NH, NKV);
        rope_backward_cpu(d.qkv + oqkv, m->rope_cos, m->rope_sin, B, T, NH + NKV, HS, QKV);
        block_linear_backward_cpu(st, rec, lin + LIN_QKV, d.rms1 + o, g.qkvw + (size_t)l * QKV * C, NULL, d.qkv + oqkv,
                                  a.rms1 + o, p.qkvw + (size_t)l * QKV * C, B, T, C, QKV);
        rmsnorm_backward_cpu(dres, g.rms1w + l * C, d.rms1 + o, res, p.rms1w + l * C, a.rms1_rstd + l * BT, B, T, C);
    }
    encoder_backward_cpu(g.wte, NULL, d.encoded, m->batch.inputs, B, T, C);
}

// clips the gradients to global norm grad_clip (when > 0), then one AdamW step (1-based step), decaying
// only the tensors llama_param_decays() names; returns the gradient norm before clipping
static inline float llamacpu_update(LlamaCPU* m, float lr, float beta1, float beta2, float eps,
                                    float weight_decay, float grad_clip, int step) {
    return clip_adamw_cpu(m->params_memory, m->grads_memory, m->m_memory, m->v_memory, m->param_sizes,
                          NUM_LLAMA_PARAMETER_TENSORS, llama_param_decays, lr, beta1, beta2, eps, weight_decay, grad_clip, step);
}

// frees everything llamacpu_build and llamacpu_forward allocated
static inline void llamacpu_free(LlamaCPU* m) {
    free_param_memory_cpu(m->params_memory, m->grads_memory, m->m_memory, m->v_memory);
    free(m->rope_cos);
    free(m->rope_sin);
    batch_free_cpu(&m->batch);
    memset(m, 0, sizeof(*m));
}

#endif
