// Data-parallel arithmetic in plain C: which micro-batches each rank trains on, how the flat parameter vector
// is cut into equal ZeRO-1 shards, and which flat ranges of a model (its ParamTable, llmc/param_table.h) form one
// gradient bucket of the backward pass.
//
// Micro-batches: every rank keeps the same single-rank DataLoader (rank 0 of world 1) and reads every
// micro-batch of a step; global micro-batch k (k = 0 .. world * accum - 1) is trained by rank dp_micro_owner(k),
// that is rank r takes micro-batches r, r + W, r + 2W, ... So the batches of a step and the loader state saved
// in a checkpoint do not depend on the world size: W ranks with accumulation A train on exactly what one rank
// with accumulation W * A does.
//
// Shards: the flat vector of n elements is padded to world * S elements, S = ceil(n / world) rounded up to a
// multiple of ZERO_ALIGN, so every shard has the same size. Rank r owns [r * S, (r + 1) * S); the part below n
// is real ("valid"), the rest is zero padding that no tensor uses. With world > n / ZERO_ALIGN the last shards
// can be padding only (valid = 0).
#ifndef LLMC_ZERO_H
#define LLMC_ZERO_H

#include <stddef.h>
#include <string.h>
#include "utils.h"
#include "param_table.h"

#define ZERO_ALIGN 128

typedef struct {
    size_t n;         // elements of the whole (unpadded) vector
    size_t start;     // first element of this rank's shard in the flat vector
    size_t size;      // elements per shard, the same on every rank, a multiple of ZERO_ALIGN
    size_t valid;     // elements of the shard below n; the rest is padding
    size_t padded;    // world * size: the length of the padded flat buffers (gradients, BF16 parameters)
} ZeroShard;

typedef struct { size_t offset, count; } FlatRange;

// elements per shard: ceil(n / world) rounded up to a multiple of ZERO_ALIGN
static inline size_t zero_shard_size(size_t n, int world) {
    size_t per_rank = (n + (size_t)world - 1) / (size_t)world;
    return (per_rank + ZERO_ALIGN - 1) / ZERO_ALIGN * ZERO_ALIGN;
}

// the shard of `rank` among `world` ranks of a flat vector of n elements
static inline ZeroShard zero_shard(size_t n, int world, int rank) {
    if (n == 0) { die("zero_shard: the vector to shard is empty"); }
    if (world < 1 || rank < 0 || rank >= world) { die("zero_shard: rank %d is not in 0..world-1 (world size %d)", rank, world); }
    ZeroShard sh;
    sh.n = n;
    sh.size = zero_shard_size(n, world);
    sh.start = (size_t)rank * sh.size;
    sh.valid = sh.start >= n ? 0 : (n - sh.start < sh.size ? n - sh.start : sh.size);
    sh.padded = (size_t)world * sh.size;
    return sh;
}

// the part of the flat range [offset, offset + count) inside the valid part of the shard: returns 1 and sets
// *lo (flat index) and *len when they overlap, else 0
static inline int zero_slice(const ZeroShard* sh, size_t offset, size_t count, size_t* lo, size_t* len) {
    size_t a = offset > sh->start ? offset : sh->start;
    size_t b_range = offset + count, b_shard = sh->start + sh->valid;
    size_t b = b_range < b_shard ? b_range : b_shard;
    if (a >= b) { return 0; }
    *lo = a;
    *len = b - a;
    return 1;
}

// shard[0 .. sh->size) = this rank's part of the full vector (sh->n elements), padding zeroed
static inline void zero_take_shard(float* shard, const float* full, const ZeroShard* sh) {
    memcpy(shard, full + sh->start, sh->valid * sizeof(float));
    memset(shard + sh->valid, 0, (sh->size - sh->valid) * sizeof(float));
}

// The flat ranges of gradient bucket b (0 .. L): bucket l < L holds block l's slice of every per-layer tensor
// (GPT-2: 12, LLaMA: 6), which the backward pass finishes at the end of layer l; bucket L holds the other tensors
// (GPT-2: wte, wpe, lnfw, lnfb; LLaMA: wte, rmsfw, lmheadw), final after the embedding backward.
// Fills out[] and returns the number of ranges.
static inline int bucket_ranges(const ParamTable* t, int bucket, FlatRange out[MAX_PARAM_TENSORS]) {
    int L = t->num_layers;
    if (bucket < 0 || bucket > L) { die("bucket_ranges: bucket %d is not in 0..%d", bucket, L); }
    size_t off = 0;
    int count = 0;
    for (int i = 0; i < t->num_tensors; i++) {
        if (t->per_layer[i] && bucket < L) {
            size_t layer_size = t->sizes[i] / (size_t)L;
            out[count].offset = off + (size_t)bucket * layer_size;
            out[count++].count = layer_size;
        } else if (!t->per_layer[i] && bucket == L) {
            out[count].offset = off;
            out[count++].count = t->sizes[i];
        }
        off += t->sizes[i];
    }
    return count;
}

// the rank that trains global micro-batch k of a step
static inline int dp_micro_owner(long k, int world) { return (int)(k % world); }

// micro-batches each rank runs per optimizer step for a total batch of total_tokens; dies unless B*T*world divides it
static inline int dp_accum_steps(long total_tokens, int B, int T, int world) {
    long per_round = (long)B * T * world;
    if (B < 1 || T < 1 || world < 1 || total_tokens < per_round || total_tokens % per_round != 0) {
        die("total batch of %ld tokens is not a positive multiple of B*T*world = %d*%d*%d = %ld tokens", total_tokens, B,
            T, world, per_round);
    }
    return (int)(total_tokens / per_round);
}

#endif
