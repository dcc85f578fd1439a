// GPT-2 model shapes: the depth presets, the parameter tensor layout shared by the CPU reference,
// the GPU trainer, the checkpoint files and the PyTorch reference script, and GPT-2 weight init.
#ifndef LLMC_GPT2_CONFIG_H
#define LLMC_GPT2_CONFIG_H

#include <stddef.h>
#include <string.h>
#include <math.h>
#include "utils.h"
#include "rand.h"
#include "param_table.h"

typedef struct {
    int max_seq_len;        // maxT: positions in wpe
    int vocab_size;         // V: real tokens (50257 for GPT-2)
    int padded_vocab_size;  // Vp: V rounded up to a multiple of 128 (rows of wte, columns of the logits)
    int num_layers;         // L
    int num_heads;          // NH
    int channels;           // C
} GPT2Config;

// the 16 parameter tensors, stored back to back in this order everywhere
enum { P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB, P_LN2W, P_LN2B,
       P_FCW, P_FCB, P_FCPROJW, P_FCPROJB, P_LNFW, P_LNFB, NUM_PARAMETER_TENSORS };

static const char* const gpt2_param_names[NUM_PARAMETER_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
    "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

static inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

// returns 0 and fills *c for a known depth, -1 otherwise
static inline int gpt2_config_from_depth(int depth, int max_seq_len, int vocab_size, GPT2Config* c) {
    int channels;
    switch (depth) {
        case 6:  channels = 384;  break;
        case 12: channels = 768;  break;
        case 24: channels = 1024; break;
        case 36: channels = 1280; break;
        case 48: channels = 1600; break;
        default: return -1;
    }
    c->max_seq_len = max_seq_len;
    c->vocab_size = vocab_size;
    c->padded_vocab_size = round_up(vocab_size, 128);
    c->num_layers = depth;
    c->channels = channels;
    c->num_heads = channels / 64;
    return 0;
}

// checks the invariants every kernel relies on; returns NULL when fine, else a message
static inline const char* gpt2_config_problem(const GPT2Config* c) {
    const char* dims = model_dims_problem(c->num_layers, c->channels, c->num_heads, c->num_heads, c->channels,
                                          c->max_seq_len, c->vocab_size, c->padded_vocab_size);
    if (dims) return dims;
    if (c->channels % c->num_heads != 0) return "channels must be a multiple of num_heads";
    if (c->padded_vocab_size < c->vocab_size || c->padded_vocab_size % 128 != 0)
        return "padded_vocab_size must be >= vocab_size and a multiple of 128";
    return NULL;
}

static inline void gpt2_param_sizes(const GPT2Config* c, size_t sizes[NUM_PARAMETER_TENSORS]) {
    size_t C = c->channels, L = c->num_layers, Vp = c->padded_vocab_size, T = c->max_seq_len;
    sizes[P_WTE] = Vp * C;       sizes[P_WPE] = T * C;
    sizes[P_LN1W] = L * C;       sizes[P_LN1B] = L * C;
    sizes[P_QKVW] = L * 3 * C * C; sizes[P_QKVB] = L * 3 * C;
    sizes[P_ATTPROJW] = L * C * C; sizes[P_ATTPROJB] = L * C;
    sizes[P_LN2W] = L * C;       sizes[P_LN2B] = L * C;
    sizes[P_FCW] = L * 4 * C * C; sizes[P_FCB] = L * 4 * C;
    sizes[P_FCPROJW] = L * C * 4 * C; sizes[P_FCPROJB] = L * C;
    sizes[P_LNFW] = C;           sizes[P_LNFB] = C;
}

static inline size_t gpt2_num_params(const GPT2Config* c) {
    size_t sizes[NUM_PARAMETER_TENSORS], n = 0;
    gpt2_param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { n += sizes[i]; }
    return n;
}

// 1 for the matrices that AdamW decays (wte, wpe and the four block linears), 0 for biases and norms
static inline int gpt2_param_decays(int tensor) {
    return tensor == P_WTE || tensor == P_WPE || tensor == P_QKVW || tensor == P_ATTPROJW ||
           tensor == P_FCW || tensor == P_FCPROJW;
}

// the GPT-2 tensors for the generic code: per-layer tensors are ln1w .. fcprojb
static inline void gpt2_param_table(const GPT2Config* c, ParamTable* t) {
    t->num_tensors = NUM_PARAMETER_TENSORS;
    t->num_layers = c->num_layers;
    t->names = gpt2_param_names;
    gpt2_param_sizes(c, t->sizes);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        t->decays[i] = gpt2_param_decays(i);
        t->per_layer[i] = i >= P_LN1W && i <= P_FCPROJB;
    }
}

// p[i] = std * normal_at(seed, base + i) for i < real, 0 for real <= i < n (zero padded rows)
static inline void init_normal_cpu(float* p, long n, long real, float std, uint64_t seed, size_t base) {
    #pragma omp parallel for
    for (long i = 0; i < n; i++) { p[i] = i < real ? std * normal_at(seed, base + (size_t)i) : 0.0f; }
}

// GPT-2 init: N(0, 0.02) for matrices, residual output projections scaled by 1/sqrt(2L), zero biases,
// unit norm weights, zero padded vocab rows. Each value depends only on (seed, its index), so the init is
// the same on any machine and runs in parallel.
static inline void gpt2_init_params(const GPT2Config* c, float* params, uint64_t seed) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(c, sizes);
    float residual_std = 0.02f / sqrtf(2.0f * (float)c->num_layers);
    size_t base = 0;
    for (int t = 0; t < NUM_PARAMETER_TENSORS; t++) {
        long n = (long)sizes[t];
        float* p = params + base;
        if (t == P_LN1W || t == P_LN2W || t == P_LNFW) {
            for (long i = 0; i < n; i++) { p[i] = 1.0f; }
        } else if (gpt2_param_decays(t)) {
            float std = (t == P_ATTPROJW || t == P_FCPROJW) ? residual_std : 0.02f;
            init_normal_cpu(p, n, t == P_WTE ? (long)c->vocab_size * c->channels : n, std, seed, base);
        } else {
            memset(p, 0, (size_t)n * sizeof(float));
        }
        base += (size_t)n;
    }
}

#endif
