// Token shard loader: serves batches of B x T int32 inputs and next-token targets from llm.c shards
// (int32 header[256] = {20240520 magic, 1 version, number of tokens}, then uint16 tokens), named by a glob.
//
// A shard is cut into chunks of world_size * B * T tokens; rank r reads the B * T + 1 tokens that start
// at r * B * T inside a chunk, so the ranks read disjoint slices. Only those tokens are read per batch
// (fseek + fread), so shards may be GBs; every token of every shard is checked against the vocabulary once, at
// init, so a bad token stops the run before its first step. With shuffle = 1 the order of the shards and the
// order of the chunks inside each shard are permuted afresh every epoch by an Rng seeded from (seed, epoch[, shard]),
// so the position (epoch, shard, chunk) is the whole state: a checkpoint stores it and continues exactly.
#ifndef LLMC_DATALOADER_H
#define LLMC_DATALOADER_H

#include <stdint.h>
#include <glob.h>
#include "utils.h"
#include "rand.h"

#define DATALOADER_STATE_LEN 16   // int64 words of a loader's position (dataloader_get_state); checkpoints store them

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256
#define DATALOADER_STATE_TAG 0x444c0001   // "DL", state layout version 1

typedef struct {
    // public: the current batch, B * T each
    int B, T;
    int* inputs;
    int* targets;
    // configuration
    int rank, world_size, shuffle, vocab_size;
    uint64_t seed;
    // the shards, in glob (sorted) order
    glob_t glob_result;
    int num_shards;
    int64_t* shard_tokens;
    int64_t total_tokens;
    // position: the next batch is chunk_order[chunk_pos] of shard shard_order[shard_pos] in epoch `epoch`;
    // chunk_pos == num_chunks means the shard is used up and next_batch moves to the next shard or epoch
    int64_t epoch;
    int shard_pos;
    int64_t chunk_pos;
    int* shard_order;
    int* chunk_order;       // for the current shard
    int64_t num_chunks;     // of the current shard
    FILE* fp;               // the current shard
    uint16_t* buffer;       // B * T + 1 tokens
} DataLoader;

static inline const char* dataloader_shard_name(const DataLoader* dl, int shard) { return dl->glob_result.gl_pathv[shard]; }

static inline int64_t dataloader_chunk_tokens(const DataLoader* dl) { return (int64_t)dl->world_size * dl->B * dl->T; }

// every rank reads B*T+1 tokens of each chunk; the last token may belong to the next chunk
static inline int64_t dataloader_shard_chunks(const DataLoader* dl, int shard) {
    return (dl->shard_tokens[shard] - 1) / dataloader_chunk_tokens(dl);
}

// opens a shard, checks its header and size; returns the number of tokens, the file positioned after the header
static inline int64_t shard_open(const char* path, FILE** out) {
    FILE* fp = fopen_check(path, "rb");
    long size = file_size(fp);
    int32_t h[SHARD_HEADER_INTS];
    if (size < (long)sizeof(h)) { die("shard '%s' is %ld bytes, shorter than its %zu-byte header (truncated?)", path, size, sizeof(h)); }
    fread_check(h, sizeof(int32_t), SHARD_HEADER_INTS, fp, "shard header");
    if (h[0] != SHARD_MAGIC) { die("shard '%s': bad magic %d, expected %d (is this a token shard?)", path, h[0], SHARD_MAGIC); }
    if (h[1] != SHARD_VERSION) { die("shard '%s': unsupported version %d, this build reads version %d", path, h[1], SHARD_VERSION); }
    if (h[2] <= 0) { die("shard '%s': header says %d tokens, must be positive", path, h[2]); }
    long expected = (long)sizeof(h) + (long)h[2] * (long)sizeof(uint16_t);
    if (size < expected) { die("shard '%s' is %ld bytes, its header says %d tokens = %ld bytes (truncated)", path, size, h[2], expected); }
    if (size > expected) { die("shard '%s' is %ld bytes, its header says %d tokens = %ld bytes (token count mismatch)", path, size, h[2], expected); }
    *out = fp;
    return h[2];
}

// reads every token of an open shard (positioned after its header) in chunks; dies naming the shard, the token offset
// and its byte offset at the first token >= vocab_size, so a bad token stops the run before its first step
static inline void shard_scan_tokens(const char* path, FILE* fp, int64_t num_tokens, int vocab_size) {
    const size_t chunk = (size_t)1 << 20;
    uint16_t* buf = (uint16_t*)malloc_check(chunk * sizeof(uint16_t));
    for (int64_t done = 0; done < num_tokens;) {
        size_t k = num_tokens - done < (int64_t)chunk ? (size_t)(num_tokens - done) : chunk;
        fread_check(buf, sizeof(uint16_t), k, fp, path);
        uint16_t max = 0;
        for (size_t i = 0; i < k; i++) { max = buf[i] > max ? buf[i] : max; }
        if (max >= vocab_size) {
            size_t i = 0;
            while (buf[i] < vocab_size) { i++; }
            long long at = (long long)(done + (int64_t)i);
            die("shard '%s': token %d at token offset %lld (byte offset %lld) is >= vocab_size %d", path, buf[i], at,
                (long long)(SHARD_HEADER_INTS * sizeof(int32_t)) + 2 * at, vocab_size);
        }
        done += (int64_t)k;
    }
    free(buf);
}

static inline void dataloader_seed_rng(const DataLoader* dl, Rng* rng, int64_t stream) {
    uint64_t x = dl->seed;
    x = splitmix64(&x) ^ (uint64_t)dl->epoch;
    x = splitmix64(&x) ^ (uint64_t)stream;
    rng_seed(rng, splitmix64(&x));
}

// fills order[0..n) with 0..n-1, permuted when shuffling (stream picks an independent permutation)
static inline void dataloader_order(const DataLoader* dl, int* order, int n, int64_t stream) {
    for (int i = 0; i < n; i++) { order[i] = i; }
    if (dl->shuffle) {
        Rng rng;
        dataloader_seed_rng(dl, &rng, stream);
        rng_shuffle_int(&rng, order, n);
    }
}

// opens the shard at shard_pos of this epoch and lays out its chunk order
static inline void dataloader_load_shard(DataLoader* dl) {
    int shard = dl->shard_order[dl->shard_pos];
    if (dl->fp) { fclose_check(dl->fp); }
    shard_open(dataloader_shard_name(dl, shard), &dl->fp);
    dl->num_chunks = dataloader_shard_chunks(dl, shard);
    free(dl->chunk_order);
    dl->chunk_order = (int*)malloc_check((size_t)dl->num_chunks * sizeof(int));
    dataloader_order(dl, dl->chunk_order, (int)dl->num_chunks, 1 + (int64_t)shard);
}

// moves to (epoch, shard_pos, chunk_pos), recomputing the permutations
static inline void dataloader_seek(DataLoader* dl, int64_t epoch, int shard_pos, int64_t chunk_pos) {
    dl->epoch = epoch;
    dl->shard_pos = shard_pos;
    dl->chunk_pos = chunk_pos;
    dataloader_order(dl, dl->shard_order, dl->num_shards, 0);
    dataloader_load_shard(dl);
}

static inline void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank, int world_size,
                                   int shuffle, uint64_t seed, int vocab_size) {
    if (B <= 0 || T <= 0) { die("dataloader: B=%d and T=%d must be positive", B, T); }
    if (world_size <= 0 || rank < 0 || rank >= world_size) { die("dataloader: rank %d is not in 0..world_size-1 (world_size %d)", rank, world_size); }
    if (vocab_size <= 0 || vocab_size > 65536) { die("dataloader: vocab_size %d does not fit uint16 tokens", vocab_size); }
    memset(dl, 0, sizeof(*dl));
    dl->B = B; dl->T = T; dl->rank = rank; dl->world_size = world_size;
    dl->shuffle = shuffle != 0; dl->seed = seed; dl->vocab_size = vocab_size;
    int rc = glob(pattern, 0, NULL, &dl->glob_result);
    if (rc == GLOB_NOMATCH) { die("dataloader: no files match the pattern '%s'", pattern); }
    if (rc != 0) { die("dataloader: glob failed on the pattern '%s' (code %d)", pattern, rc); }
    if (dl->glob_result.gl_pathc > INT32_MAX) { die("dataloader: the pattern '%s' matches too many files", pattern); }
    dl->num_shards = (int)dl->glob_result.gl_pathc;
    dl->shard_tokens = (int64_t*)malloc_check((size_t)dl->num_shards * sizeof(int64_t));
    int64_t need = dataloader_chunk_tokens(dl) + 1;
    for (int i = 0; i < dl->num_shards; i++) {
        FILE* fp;
        dl->shard_tokens[i] = shard_open(dataloader_shard_name(dl, i), &fp);
        shard_scan_tokens(dataloader_shard_name(dl, i), fp, dl->shard_tokens[i], vocab_size);
        fclose_check(fp);
        if (dl->shard_tokens[i] < need) {
            die("shard '%s' has %lld tokens, fewer than the %lld one batch needs (world_size %d x B %d x T %d + 1)",
                dataloader_shard_name(dl, i), (long long)dl->shard_tokens[i], (long long)need, world_size, B, T);
        }
        dl->total_tokens += dl->shard_tokens[i];
    }
    size_t n = (size_t)B * T;
    dl->inputs = (int*)malloc_check(n * sizeof(int));
    dl->targets = (int*)malloc_check(n * sizeof(int));
    dl->buffer = (uint16_t*)malloc_check((n + 1) * sizeof(uint16_t));
    dl->shard_order = (int*)malloc_check((size_t)dl->num_shards * sizeof(int));
    dataloader_seek(dl, 0, 0, 0);
}

static inline void dataloader_reset(DataLoader* dl) { dataloader_seek(dl, 0, 0, 0); }

// epoch of the batch served last (0 before the first batch); it turns to 1 with the first batch of the second epoch
static inline int64_t dataloader_epoch(const DataLoader* dl) { return dl->epoch; }

static inline size_t dataloader_batches_per_epoch(const DataLoader* dl) {
    size_t n = 0;
    for (int i = 0; i < dl->num_shards; i++) { n += (size_t)dataloader_shard_chunks(dl, i); }
    return n;
}

static inline void dataloader_next_batch(DataLoader* dl) {
    if (dl->chunk_pos == dl->num_chunks) {
        if (dl->shard_pos + 1 < dl->num_shards) { dataloader_seek(dl, dl->epoch, dl->shard_pos + 1, 0); }
        else { dataloader_seek(dl, dl->epoch + 1, 0, 0); }
    }
    const char* path = dataloader_shard_name(dl, dl->shard_order[dl->shard_pos]);
    size_t n = (size_t)dl->B * dl->T;
    int64_t start = (int64_t)dl->chunk_order[dl->chunk_pos] * dataloader_chunk_tokens(dl) + (int64_t)dl->rank * (int64_t)n;
    fseek_check(dl->fp, (long)(SHARD_HEADER_INTS * sizeof(int32_t) + (size_t)start * sizeof(uint16_t)), SEEK_SET);
    fread_check(dl->buffer, sizeof(uint16_t), n + 1, dl->fp, path);
    for (size_t i = 0; i <= n; i++) {
        if (dl->buffer[i] >= dl->vocab_size) {
            die("shard '%s': token %d at token offset %lld is >= vocab_size %d", path, dl->buffer[i],
                (long long)(start + (int64_t)i), dl->vocab_size);
        }
    }
    for (size_t i = 0; i < n; i++) {
        dl->inputs[i] = dl->buffer[i];
        dl->targets[i] = dl->buffer[i + 1];
    }
    dl->chunk_pos++;
}

// state layout: 0 tag, 1 num_shards, 2 total_tokens, 3 B, 4 T, 5 world_size, 6 shuffle, 7 seed,
// 8 epoch, 9 shard_pos, 10 chunk_pos, 11-15 zero
static inline void dataloader_get_state(const DataLoader* dl, int64_t state[DATALOADER_STATE_LEN]) {
    memset(state, 0, DATALOADER_STATE_LEN * sizeof(int64_t));
    state[0] = DATALOADER_STATE_TAG;
    state[1] = dl->num_shards; state[2] = dl->total_tokens;
    state[3] = dl->B; state[4] = dl->T; state[5] = dl->world_size;
    state[6] = dl->shuffle; state[7] = (int64_t)dl->seed;
    state[8] = dl->epoch; state[9] = dl->shard_pos; state[10] = dl->chunk_pos;
}

static inline void dataloader_require(int64_t saved, int64_t have, const char* what) {
    if (saved != have) {
        die("dataloader state is for another configuration: it has %s = %lld, this loader has %lld", what,
            (long long)saved, (long long)have);
    }
}

static inline void dataloader_set_state(DataLoader* dl, const int64_t state[DATALOADER_STATE_LEN]) {
    if (state[0] != DATALOADER_STATE_TAG) {
        die("dataloader state: unknown tag 0x%llx, expected 0x%x (no data loader state saved?)", (unsigned long long)state[0],
            DATALOADER_STATE_TAG);
    }
    dataloader_require(state[1], dl->num_shards, "number of shards");
    dataloader_require(state[2], dl->total_tokens, "total tokens of the shards");
    dataloader_require(state[3], dl->B, "B");
    dataloader_require(state[4], dl->T, "T");
    dataloader_require(state[5], dl->world_size, "world_size");
    dataloader_require(state[6], dl->shuffle, "shuffle");
    if (dl->shuffle) { dataloader_require(state[7], (int64_t)dl->seed, "seed"); }
    int64_t epoch = state[8], shard_pos = state[9], chunk_pos = state[10];
    if (epoch < 0 || shard_pos < 0 || shard_pos >= dl->num_shards || chunk_pos < 0) {
        die("dataloader state: position epoch %lld, shard %lld, chunk %lld is out of range", (long long)epoch,
            (long long)shard_pos, (long long)chunk_pos);
    }
    dataloader_seek(dl, epoch, (int)shard_pos, 0);
    if (chunk_pos > dl->num_chunks) {
        die("dataloader state: chunk %lld is past the %lld chunks of the shard", (long long)chunk_pos, (long long)dl->num_chunks);
    }
    dl->chunk_pos = chunk_pos;
}

static inline void dataloader_free(DataLoader* dl) {
    if (dl->fp) { fclose_check(dl->fp); }
    globfree(&dl->glob_result);
    free(dl->shard_tokens);
    free(dl->shard_order);
    free(dl->chunk_order);
    free(dl->inputs);
    free(dl->targets);
    free(dl->buffer);
    memset(dl, 0, sizeof(*dl));
}

#endif
