// LLaMA-style model shapes on the GPT-2 tokenizer: RMSNorm, rotary position embeddings, SwiGLU MLP, grouped-query
// attention, no biases, untied input embedding and LM head. The depth presets, the parameter tensor layout shared
// by the CPU reference (llmc/llama_cpu.h) and the PyTorch reference (dev/reference_llama.py), and the init.
//
// Per layer the 7 logical linears are stored as 4 fused matrices, [out, in] like torch nn.Linear:
//   qkvw     [(NH + 2 NKV) HS, C]  rows: NH query heads, NKV key heads, NKV value heads (HS = C / NH)
//   attprojw [C, C]                 the output projection o
//   gateupw  [2 H, C]               rows: H of the gate projection, then H of the up projection
//   downw    [C, H]
#ifndef LLMC_LLAMA_CONFIG_H
#define LLMC_LLAMA_CONFIG_H

#include <stddef.h>
#include <string.h>
#include <math.h>
#include "utils.h"
#include "rand.h"
#include "gpt2_config.h"   // round_up, init_normal_cpu, ParamTable

#define LLAMA_RMS_EPS 1e-5f
#define LLAMA_ROPE_THETA 10000.0

typedef struct {
    int max_seq_len;        // maxT: longest sequence (RoPE has no position parameters)
    int vocab_size;         // V: real tokens (50257 for the GPT-2 tokenizer)
    int padded_vocab_size;  // Vp: V rounded up to a multiple of 128 (rows of wte and of the LM head)
    int num_layers;         // L
    int num_heads;          // NH query heads; head size HS = C / NH
    int num_kv_heads;       // NKV key/value heads, dividing NH (NKV = NH: multi-head attention)
    int channels;           // C
    int hidden;             // H: SwiGLU hidden size
} LlamaConfig;

// the 9 parameter tensors, stored back to back in this order
enum { LL_WTE, LL_RMS1W, LL_QKVW, LL_ATTPROJW, LL_RMS2W, LL_GATEUPW, LL_DOWNW, LL_RMSFW, LL_LMHEADW,
       NUM_LLAMA_PARAMETER_TENSORS };

static const char* const llama_param_names[NUM_LLAMA_PARAMETER_TENSORS] = {
    "wte", "rms1w", "qkvw", "attprojw", "rms2w", "gateupw", "downw", "rmsfw", "lmheadw"};

// the 4 fused block linears in the AdaHOP slots LIN_QKV, LIN_ATTPROJ, LIN_FC, LIN_FCPROJ (llmc/adahop.h)
static const char* const llama_linear_names[4] = {"qkv", "o", "gate/up", "down"};

// the SwiGLU hidden size of the presets: 8C/3 rounded up to a multiple of 64
static inline int llama_hidden_of(int channels) { return round_up((8 * channels + 2) / 3, 64); }

// rows of the fused qkv weight: (NH + 2 NKV) HS
static inline int llama_qkv_channels(const LlamaConfig* c) {
    return (c->num_heads + 2 * c->num_kv_heads) * (c->channels / c->num_heads);
}

// returns 0 and fills *c for a known depth, -1 otherwise. Head size 64; parameters with V = 50257 (Vp = 50304):
//   d8:  C 448,  NH 7,  NKV 7, H 1216:  64,576,960 (~60M; embeddings 45.1M of it)
//   d12: C 640,  NH 10, NKV 5, H 1728: 118,963,840 (~125M; embeddings 64.4M)
//   d24: C 1024, NH 16, NKV 4, H 2752: 368,886,784 (~350M; embeddings 103.0M)
static inline int llama_config_from_depth(int depth, int max_seq_len, int vocab_size, LlamaConfig* c) {
    int channels, kv_heads;
    switch (depth) {
        case 8:  channels = 448;  kv_heads = 7; break;
        case 12: channels = 640;  kv_heads = 5; break;
        case 24: channels = 1024; kv_heads = 4; break;
        default: return -1;
    }
    c->max_seq_len = max_seq_len;
    c->vocab_size = vocab_size;
    c->padded_vocab_size = round_up(vocab_size, 128);
    c->num_layers = depth;
    c->num_heads = channels / 64;
    c->num_kv_heads = kv_heads;
    c->channels = channels;
    c->hidden = llama_hidden_of(channels);
    return 0;
}

// checks the invariants the model relies on; returns NULL when fine, else a message
static inline const char* llama_config_problem(const LlamaConfig* c) {
    const char* dims = model_dims_problem(c->num_layers, c->channels, c->num_heads, c->num_kv_heads, c->hidden,
                                          c->max_seq_len, c->vocab_size, c->padded_vocab_size);
    if (dims) return dims;
    if (c->channels % c->num_heads != 0) return "channels must be a multiple of num_heads";
    if ((c->channels / c->num_heads) % 2 != 0) return "the head size channels / num_heads must be even (RoPE rotates pairs)";
    if (c->num_heads % c->num_kv_heads != 0) return "num_kv_heads must divide num_heads";
    if (c->hidden % 32 != 0) return "hidden must be a multiple of 32";
    if (c->padded_vocab_size < c->vocab_size || c->padded_vocab_size % 128 != 0)
        return "padded_vocab_size must be >= vocab_size and a multiple of 128";
    return NULL;
}

// number of floats of each parameter tensor
static inline void llama_param_sizes(const LlamaConfig* c, size_t sizes[NUM_LLAMA_PARAMETER_TENSORS]) {
    size_t C = c->channels, L = c->num_layers, Vp = c->padded_vocab_size, H = c->hidden, QKV = llama_qkv_channels(c);
    sizes[LL_WTE] = Vp * C;          sizes[LL_RMS1W] = L * C;
    sizes[LL_QKVW] = L * QKV * C;    sizes[LL_ATTPROJW] = L * C * C;
    sizes[LL_RMS2W] = L * C;         sizes[LL_GATEUPW] = L * 2 * H * C;
    sizes[LL_DOWNW] = L * C * H;     sizes[LL_RMSFW] = C;
    sizes[LL_LMHEADW] = Vp * C;
}

// total number of parameters
static inline size_t llama_num_params(const LlamaConfig* c) {
    size_t sizes[NUM_LLAMA_PARAMETER_TENSORS], n = 0;
    llama_param_sizes(c, sizes);
    for (int i = 0; i < NUM_LLAMA_PARAMETER_TENSORS; i++) { n += sizes[i]; }
    return n;
}

// 1 for the matrices that AdamW decays (embedding, LM head and the four block matrices), 0 for the norm weights
static inline int llama_param_decays(int tensor) {
    return tensor != LL_RMS1W && tensor != LL_RMS2W && tensor != LL_RMSFW;
}

// the LLaMA tensors for the generic code: per-layer tensors are rms1w .. downw
static inline void llama_param_table(const LlamaConfig* c, ParamTable* t) {
    t->num_tensors = NUM_LLAMA_PARAMETER_TENSORS;
    t->num_layers = c->num_layers;
    t->names = llama_param_names;
    llama_param_sizes(c, t->sizes);
    for (int i = 0; i < NUM_LLAMA_PARAMETER_TENSORS; i++) {
        t->decays[i] = llama_param_decays(i);
        t->per_layer[i] = i >= LL_RMS1W && i <= LL_DOWNW;
    }
}

// init: N(0, 0.02) for matrices, the residual output projections (attprojw, downw) N(0, 0.02/sqrt(2L)), unit norm
// weights, zero padded vocab rows of wte and the LM head; each value depends only on (seed, its index)
static inline void llama_init_params(const LlamaConfig* c, float* params, uint64_t seed) {
    size_t sizes[NUM_LLAMA_PARAMETER_TENSORS];
    llama_param_sizes(c, sizes);
    float residual_std = 0.02f / sqrtf(2.0f * (float)c->num_layers);
    size_t base = 0;
    for (int t = 0; t < NUM_LLAMA_PARAMETER_TENSORS; t++) {
        long n = (long)sizes[t];
        float* p = params + base;
        if (!llama_param_decays(t)) {
            for (long i = 0; i < n; i++) { p[i] = 1.0f; }
        } else {
            float std = (t == LL_ATTPROJW || t == LL_DOWNW) ? residual_std : 0.02f;
            long real = (t == LL_WTE || t == LL_LMHEADW) ? (long)c->vocab_size * c->channels : n;
            init_normal_cpu(p, n, real, std, seed, base);
        }
        base += (size_t)n;
    }
}

#endif
