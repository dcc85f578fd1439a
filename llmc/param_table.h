// The parameter tensors of a model family as the generic code sees them (the GPU trainer, ZeRO-1 sharding,
// gradient buckets, AdamW): how many tensors, their sizes in flat-vector order, which decay, which are stacked
// over the layers, and their names. Each family fills one (gpt2_param_table, llama_param_table).
#ifndef LLMC_PARAM_TABLE_H
#define LLMC_PARAM_TABLE_H

#include <stddef.h>

#define MAX_PARAM_TENSORS 16

typedef struct {
    int num_tensors;
    int num_layers;                      // L: per-layer tensors hold L equal slices, one per block
    size_t sizes[MAX_PARAM_TENSORS];     // floats of each tensor, stored back to back in this order
    int decays[MAX_PARAM_TENSORS];       // 1: AdamW weight decay applies
    int per_layer[MAX_PARAM_TENSORS];    // 1: stacked over the L blocks (gradient bucket of its block)
    const char* const* names;
} ParamTable;

// bounds of the model dimensions that files and flags may ask for: within them every parameter and activation
// size product (e.g. L x 12 C^2, B x T x Vp) fits in 64 bits, so a corrupt header cannot wrap a size
#define MODEL_MAX_LAYERS 1024
#define MODEL_MAX_CHANNELS 65536
#define MODEL_MAX_HIDDEN (4 * MODEL_MAX_CHANNELS)
#define MODEL_MAX_SEQ_LEN (1 << 20)
#define MODEL_MAX_VOCAB (1 << 24)

// NULL when every dimension lies within the bounds above (and heads within the channels), else a message
static inline const char* model_dims_problem(int layers, int channels, int heads, int kv_heads, int hidden, int max_seq_len,
                                             int vocab, int padded_vocab) {
    if (layers <= 0 || channels <= 0 || heads <= 0 || kv_heads <= 0 || hidden <= 0 || max_seq_len <= 0 || vocab <= 0 ||
        padded_vocab <= 0)
        return "all model dimensions must be positive";
    if (layers > MODEL_MAX_LAYERS || channels > MODEL_MAX_CHANNELS || heads > channels || kv_heads > heads ||
        hidden > MODEL_MAX_HIDDEN || max_seq_len > MODEL_MAX_SEQ_LEN || vocab > MODEL_MAX_VOCAB || padded_vocab > MODEL_MAX_VOCAB)
        return "a dimension is out of bounds (layers <= 1024, channels <= 65536, heads <= channels, hidden <= 262144, "
               "max_seq_len <= 2^20, vocab <= 2^24)";
    return NULL;
}

// total floats of all tensors
static inline size_t param_table_total(const ParamTable* t) {
    size_t n = 0;
    for (int i = 0; i < t->num_tensors; i++) { n += t->sizes[i]; }
    return n;
}

#endif
