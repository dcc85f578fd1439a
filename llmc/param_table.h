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

// total floats of all tensors
static inline size_t param_table_total(const ParamTable* t) {
    size_t n = 0;
    for (int i = 0; i < t->num_tensors; i++) { n += t->sizes[i]; }
    return n;
}

#endif
