// The model of a GPU training run, of either family: GPT-2 (llmc/gpt2_config.h) or LLaMA-small
// (llmc/llama_config.h), as one flat shape for the trainer and its checkpoints. A GPT-2 has num_kv_heads =
// num_heads and hidden = 4C (its MLP width), so the widths below hold for both families.
// Presets for -e: "dN" is the GPT-2 of depth N, "llama:dN" the LLaMA of depth N.
#ifndef LLMC_MODEL_CONFIG_H
#define LLMC_MODEL_CONFIG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "utils.h"
#include "param_table.h"
#include "gpt2_config.h"
#include "llama_config.h"

enum { FAMILY_GPT2 = 0, FAMILY_LLAMA = 1, NUM_FAMILIES = 2 };
static const char* const family_names[NUM_FAMILIES] = {"GPT-2", "LLaMA"};

typedef struct {
    int family;             // FAMILY_*
    int max_seq_len;        // maxT
    int vocab_size;         // V
    int padded_vocab_size;  // Vp
    int num_layers;         // L
    int num_heads;          // NH query heads, head size C / NH
    int num_kv_heads;       // NKV key/value heads (GPT-2: NH)
    int channels;           // C
    int hidden;             // MLP hidden width H (GPT-2: 4C)
} ModelConfig;

static inline ModelConfig model_from_gpt2(const GPT2Config* g) {
    ModelConfig c = {FAMILY_GPT2, g->max_seq_len, g->vocab_size, g->padded_vocab_size, g->num_layers, g->num_heads,
                     g->num_heads, g->channels, 4 * g->channels};
    return c;
}

static inline ModelConfig model_from_llama(const LlamaConfig* l) {
    ModelConfig c = {FAMILY_LLAMA, l->max_seq_len, l->vocab_size, l->padded_vocab_size, l->num_layers, l->num_heads,
                     l->num_kv_heads, l->channels, l->hidden};
    return c;
}

static inline GPT2Config model_gpt2(const ModelConfig* c) {
    GPT2Config g = {c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_layers, c->num_heads, c->channels};
    return g;
}

static inline LlamaConfig model_llama(const ModelConfig* c) {
    LlamaConfig l = {c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_layers, c->num_heads, c->num_kv_heads,
                     c->channels, c->hidden};
    return l;
}

// rows of the fused qkv weight, (NH + 2 NKV) HS: 3C for GPT-2
static inline int model_qkv_channels(const ModelConfig* c) {
    return (c->num_heads + 2 * c->num_kv_heads) * (c->channels / c->num_heads);
}

// outputs of the first MLP linear: fc (4C) for GPT-2, the fused gate/up (2H) for LLaMA
static inline int model_fc_channels(const ModelConfig* c) { return c->family == FAMILY_LLAMA ? 2 * c->hidden : c->hidden; }

// the widest row of a block linear's output, and of the scratch that holds them: max(fc, qkv) (GPT-2: 4C)
static inline int model_widest_linear(const ModelConfig* c) {
    int fc = model_fc_channels(c), qkv = model_qkv_channels(c);
    return fc > qkv ? fc : qkv;
}

// weights that take part in a matrix multiply per token: the block linears (qkv, attention projection, MLP in and
// out) of every layer and the LM head over the real vocabulary (the padding columns are not model work);
// embedding lookups, norms and biases are left out
static inline double model_matmul_params(const ModelConfig* c) {
    double C = c->channels;
    double per_layer = C * (model_qkv_channels(c) + c->channels + model_fc_channels(c)) + (double)c->hidden * C;
    return c->num_layers * per_layer + (double)c->vocab_size * C;
}

// model FLOPs of training on one token at sequence length T (forward + backward, PaLM's accounting):
// 6 per matmul weight (2 forward, 2 for dX, 2 for dW), plus attention's two products, QK^T and (scores)V, each
// 2 T C FLOPs per token and layer forward (all NH query heads of size C / NH, the causal mask not discounted), so
// 3 x 4 T C = 12 T C per layer with the backward. The FLOPs of a step are this times its tokens; MFU divides
// their rate by the GPU's peak.
static inline double model_flops_per_token(const ModelConfig* c, int T) {
    return 6.0 * model_matmul_params(c) + 12.0 * c->num_layers * (double)T * c->channels;
}

// checks the family and the invariants of its shape; returns NULL when fine, else a message
static inline const char* model_config_problem(const ModelConfig* c) {
    if (c->family == FAMILY_LLAMA) {
        LlamaConfig l = model_llama(c);
        return llama_config_problem(&l);
    }
    if (c->family != FAMILY_GPT2) { return "unknown model family"; }
    GPT2Config g = model_gpt2(c);
    const char* problem = gpt2_config_problem(&g);   // first: it bounds C, so 4C below cannot overflow
    if (problem) { return problem; }
    if (c->num_kv_heads != c->num_heads || c->hidden != 4 * c->channels) { return "a GPT-2 has NKV = NH and hidden = 4C"; }
    return NULL;
}

// the parameter tensors of the model's family
static inline void model_param_table(const ModelConfig* c, ParamTable* t) {
    if (c->family == FAMILY_LLAMA) {
        LlamaConfig l = model_llama(c);
        llama_param_table(&l, t);
    } else {
        GPT2Config g = model_gpt2(c);
        gpt2_param_table(&g, t);
    }
}

static inline size_t model_num_params(const ModelConfig* c) {
    ParamTable t;
    model_param_table(c, &t);
    return param_table_total(&t);
}

// the family's init (gpt2_init_params, llama_init_params)
static inline void model_init_params(const ModelConfig* c, float* params, uint64_t seed) {
    if (c->family == FAMILY_LLAMA) {
        LlamaConfig l = model_llama(c);
        llama_init_params(&l, params, seed);
    } else {
        GPT2Config g = model_gpt2(c);
        gpt2_init_params(&g, params, seed);
    }
}

// whether an -e value names a preset ("dN", "llama:..."), not a file
static inline int model_is_preset_name(const char* name) {
    return (name[0] == 'd' || strncmp(name, "llama:", 6) == 0) && strchr(name, '/') == NULL;
}

// the preset "dN" (GPT-2) or "llama:dN" (LLaMA) with max_seq_len and vocab_size; returns 0, or -1 if it is none
static inline int model_config_from_preset(const char* name, int max_seq_len, int vocab_size, ModelConfig* c) {
    int llama = strncmp(name, "llama:", 6) == 0;
    const char* d = llama ? name + 6 : name;
    if (d[0] != 'd') { return -1; }
    char* end;
    long depth = strtol(d + 1, &end, 10);
    if (end == d + 1 || *end != '\0') { return -1; }
    GPT2Config g;
    LlamaConfig l;
    if (llama && llama_config_from_depth((int)depth, max_seq_len, vocab_size, &l) == 0) { *c = model_from_llama(&l); return 0; }
    if (!llama && gpt2_config_from_depth((int)depth, max_seq_len, vocab_size, &g) == 0) { *c = model_from_gpt2(&g); return 0; }
    return -1;
}

// fails unless two configs describe the same model
static inline void model_require_config(const char* path, const ModelConfig* have, const ModelConfig* want) {
    if (memcmp(have, want, sizeof(ModelConfig)) != 0) {
        die("'%s' holds a %s L=%d C=%d NH=%d NKV=%d H=%d V=%d maxT=%d, but this run wants a %s L=%d C=%d NH=%d NKV=%d "
            "H=%d V=%d maxT=%d", path, family_names[have->family], have->num_layers, have->channels, have->num_heads,
            have->num_kv_heads, have->hidden, have->vocab_size, have->max_seq_len, family_names[want->family],
            want->num_layers, want->channels, want->num_heads, want->num_kv_heads, want->hidden, want->vocab_size,
            want->max_seq_len);
    }
}

#endif
