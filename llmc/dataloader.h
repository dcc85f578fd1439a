// Token shard loader: serves batches of B x T int32 inputs and next-token targets from llm.c shards
// (int32 header[256] = {20240520 magic, 1 version, number of tokens}, then uint16 tokens), named by a glob.
//
// The shards, in glob (sorted) order, are one token stream; sequence k is its tokens [k T, k T + T] (T inputs and
// the T targets one token later), and an epoch is all (tokens - 1) / T sequences. A batch is the next B sequences of
// one endless stream of epochs: in order without shuffling, else in a permutation of all the epoch's sequences that
// is drawn afresh per epoch from (seed, epoch) (a Feistel network, so nothing is stored: dataloader_sequence). So
// what a batch holds does not depend on how the corpus is cut into shards, nor on B: two loaders of the same T and
// seed read the same sequences in the same order, B at a time (a batch may take the last sequences of one epoch and
// the first of the next). The position (sequences served) is the whole state: a checkpoint stores it with the
// seed, T and a hash of every token, and a resumed loader continues exactly, or refuses other data.
// Every token of every shard is checked against the vocabulary once, at init, so a bad token stops the run before
// its first step; a batch reads only its sequences (fseek + fread), so shards may be GBs.
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
#define DATALOADER_STATE_TAG 0x444c0002      // "DL", state layout version 2 (one sequence stream)
#define DATALOADER_STATE_TAG_V1 0x444c0001   // layout 1: shards and chunks permuted separately (no longer read)
#define DATALOADER_FEISTEL_ROUNDS 6
#define DATALOADER_MAX_OPEN 64                // shards held open at once; more are closed and reopened as read

// the per-epoch permutation of [0, n): a Feistel network on 2 * half_bits bits (4^half_bits >= n) with round keys
// from (seed, epoch), cycle-walked back into [0, n)
typedef struct {
    uint64_t keys[DATALOADER_FEISTEL_ROUNDS];
    int half_bits;
    int64_t n;
} SequencePermutation;

typedef struct {
    // public: the current batch, B * T each
    int B, T;
    int* inputs;
    int* targets;
    // configuration
    int shuffle, vocab_size;
    uint64_t seed;
    // the shards, in glob (sorted) order, and where each starts in the stream (shard_start[num_shards] = all tokens)
    glob_t glob_result;
    int num_shards;
    int64_t* shard_start;
    int64_t total_tokens;
    uint64_t token_hash;        // FNV-1a of the stream's tokens: the same data cut into other shards hashes the same
    int64_t num_sequences;      // per epoch
    // position: sequences served since the start of epoch 0
    int64_t position;
    SequencePermutation perm;   // of the epoch perm_epoch
    int64_t perm_epoch;
    FILE** files;               // per shard, opened at its first read (NULL: closed)
    int num_open;
    uint16_t* buffer;           // T + 1 tokens
} DataLoader;

static inline const char* dataloader_shard_name(const DataLoader* dl, int shard) { return dl->glob_result.gl_pathv[shard]; }

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

// reads every token of an open shard (positioned after its header) in chunks, hashing them into *hash (FNV-1a, one
// step per token); dies naming the shard, the token offset and its byte offset at the first token >= vocab_size, so
// a bad token stops the run before its first step
static inline void shard_scan_tokens(const char* path, FILE* fp, int64_t num_tokens, int vocab_size, uint64_t* hash) {
    const size_t chunk = (size_t)1 << 20;
    uint16_t* buf = (uint16_t*)malloc_check(chunk * sizeof(uint16_t));
    uint64_t h = *hash;
    for (int64_t done = 0; done < num_tokens;) {
        size_t k = num_tokens - done < (int64_t)chunk ? (size_t)(num_tokens - done) : chunk;
        fread_check(buf, sizeof(uint16_t), k, fp, path);
        uint16_t max = 0;
        for (size_t i = 0; i < k; i++) {
            max = buf[i] > max ? buf[i] : max;
            h = (h ^ buf[i]) * 0x100000001b3ULL;
        }
        if (max >= vocab_size) {
            size_t i = 0;
            while (buf[i] < vocab_size) { i++; }
            long long at = (long long)(done + (int64_t)i);
            die("shard '%s': token %d at token offset %lld (byte offset %lld) is >= vocab_size %d", path, buf[i], at,
                (long long)(SHARD_HEADER_INTS * sizeof(int32_t)) + 2 * at, vocab_size);
        }
        done += (int64_t)k;
    }
    *hash = h;
    free(buf);
}

// the permutation of epoch `epoch` of n sequences under seed
static inline SequencePermutation sequence_permutation(uint64_t seed, int64_t epoch, int64_t n) {
    SequencePermutation p;
    p.n = n;
    p.half_bits = 1;
    while (((int64_t)1 << (2 * p.half_bits)) < n) { p.half_bits++; }
    uint64_t x = seed;
    x = splitmix64(&x) ^ (uint64_t)epoch;
    for (int r = 0; r < DATALOADER_FEISTEL_ROUNDS; r++) { p.keys[r] = splitmix64(&x); }
    return p;
}

// the Feistel network: a bijection of [0, 4^half_bits)
static inline uint64_t sequence_feistel(const SequencePermutation* p, uint64_t x) {
    uint64_t mask = ((uint64_t)1 << p->half_bits) - 1, left = x >> p->half_bits, right = x & mask;
    for (int r = 0; r < DATALOADER_FEISTEL_ROUNDS; r++) {
        uint64_t z = right ^ p->keys[r];
        uint64_t f = splitmix64(&z) & mask;
        uint64_t next = left ^ f;
        left = right;
        right = next;
    }
    return (left << p->half_bits) | right;
}

// the permutation's image of i in [0, n): the Feistel network applied until it lands in [0, n) (cycle walking; the
// cycle through i returns to [0, n), so this ends, after under 4 steps on average since 4^half_bits < 4 n)
static inline int64_t sequence_permute(const SequencePermutation* p, int64_t i) {
    uint64_t x = (uint64_t)i;
    do { x = sequence_feistel(p, x); } while (x >= (uint64_t)p->n);
    return (int64_t)x;
}

// the sequence at stream position `pos` (sequences since the start of epoch 0)
static inline int64_t dataloader_sequence(DataLoader* dl, int64_t pos) {
    int64_t epoch = pos / dl->num_sequences, i = pos % dl->num_sequences;
    if (!dl->shuffle) { return i; }
    if (epoch != dl->perm_epoch) {
        dl->perm = sequence_permutation(dl->seed, epoch, dl->num_sequences);
        dl->perm_epoch = epoch;
    }
    return sequence_permute(&dl->perm, i);
}

// the shard holding stream token `token` (binary search over the shard starts)
static inline int dataloader_shard_of(const DataLoader* dl, int64_t token) {
    int lo = 0, hi = dl->num_shards - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (dl->shard_start[mid] <= token) { lo = mid; } else { hi = mid - 1; }
    }
    return lo;
}

static inline void dataloader_close_shards(DataLoader* dl) {
    for (int i = 0; i < dl->num_shards; i++) {
        if (dl->files[i]) { fclose_check(dl->files[i]); dl->files[i] = NULL; }
    }
    dl->num_open = 0;
}

// n stream tokens from `token` on into out, across shard ends; checks them against the vocabulary (a shard rewritten
// after init)
static inline void dataloader_read_tokens(DataLoader* dl, int64_t token, int64_t n, uint16_t* out) {
    while (n > 0) {
        int shard = dataloader_shard_of(dl, token);
        const char* path = dataloader_shard_name(dl, shard);
        if (!dl->files[shard]) {
            if (dl->num_open == DATALOADER_MAX_OPEN) { dataloader_close_shards(dl); }
            shard_open(path, &dl->files[shard]);
            dl->num_open++;
        }
        FILE* fp = dl->files[shard];
        int64_t offset = token - dl->shard_start[shard], k = dl->shard_start[shard + 1] - token;
        k = k < n ? k : n;
        fseek_check(fp, (long)(SHARD_HEADER_INTS * sizeof(int32_t) + (size_t)offset * sizeof(uint16_t)), SEEK_SET);
        fread_check(out, sizeof(uint16_t), (size_t)k, fp, path);
        for (int64_t i = 0; i < k; i++) {
            if (out[i] >= dl->vocab_size) {
                die("shard '%s': token %d at token offset %lld is >= vocab_size %d", path, out[i], (long long)(offset + i),
                    dl->vocab_size);
            }
        }
        token += k; n -= k; out += k;
    }
}

static inline void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int shuffle, uint64_t seed,
                                   int vocab_size) {
    if (B <= 0 || T <= 0) { die("dataloader: B=%d and T=%d must be positive", B, T); }
    if (vocab_size <= 0 || vocab_size > 65536) { die("dataloader: vocab_size %d does not fit uint16 tokens", vocab_size); }
    memset(dl, 0, sizeof(*dl));
    dl->B = B; dl->T = T;
    dl->shuffle = shuffle != 0; dl->seed = seed; dl->vocab_size = vocab_size;
    int rc = glob(pattern, 0, NULL, &dl->glob_result);
    if (rc == GLOB_NOMATCH) { die("dataloader: no files match the pattern '%s'", pattern); }
    if (rc != 0) { die("dataloader: glob failed on the pattern '%s' (code %d)", pattern, rc); }
    if (dl->glob_result.gl_pathc > INT32_MAX - 1) { die("dataloader: the pattern '%s' matches too many files", pattern); }
    dl->num_shards = (int)dl->glob_result.gl_pathc;
    dl->shard_start = (int64_t*)malloc_check(((size_t)dl->num_shards + 1) * sizeof(int64_t));
    dl->token_hash = 0xcbf29ce484222325ULL;
    for (int i = 0; i < dl->num_shards; i++) {
        FILE* fp;
        int64_t n = shard_open(dataloader_shard_name(dl, i), &fp);
        shard_scan_tokens(dataloader_shard_name(dl, i), fp, n, vocab_size, &dl->token_hash);
        fclose_check(fp);
        dl->shard_start[i] = dl->total_tokens;
        dl->total_tokens += n;
    }
    dl->shard_start[dl->num_shards] = dl->total_tokens;
    dl->num_sequences = (dl->total_tokens - 1) / T;
    if (dl->num_sequences < B) {
        die("the shards of '%s' hold %lld tokens, fewer than the %lld one batch needs (B %d x T %d + 1)", pattern,
            (long long)dl->total_tokens, (long long)B * T + 1, B, T);
    }
    size_t n = (size_t)B * T;
    dl->inputs = (int*)malloc_check(n * sizeof(int));
    dl->targets = (int*)malloc_check(n * sizeof(int));
    dl->buffer = (uint16_t*)malloc_check(((size_t)T + 1) * sizeof(uint16_t));
    dl->files = (FILE**)calloc_check((size_t)dl->num_shards, sizeof(FILE*));
    dl->perm_epoch = -1;
}

static inline void dataloader_reset(DataLoader* dl) { dl->position = 0; }

// epoch of the last sequence served (0 before the first batch); it turns to 1 with the first batch that reads a
// sequence of the second epoch
static inline int64_t dataloader_epoch(const DataLoader* dl) {
    return dl->position == 0 ? 0 : (dl->position - 1) / dl->num_sequences;
}

// whole batches of B sequences in one epoch
static inline size_t dataloader_batches_per_epoch(const DataLoader* dl) { return (size_t)(dl->num_sequences / dl->B); }

static inline void dataloader_next_batch(DataLoader* dl) {
    int T = dl->T;
    for (int b = 0; b < dl->B; b++) {
        int64_t seq = dataloader_sequence(dl, dl->position++);
        dataloader_read_tokens(dl, seq * T, T + 1, dl->buffer);
        for (int t = 0; t < T; t++) {
            dl->inputs[(size_t)b * T + t] = dl->buffer[t];
            dl->targets[(size_t)b * T + t] = dl->buffer[t + 1];
        }
    }
}

// state layout 2: 0 tag, 1 total tokens, 2 token hash, 3 T, 4 shuffle, 5 seed, 6 position, 7-15 zero. Neither B
// nor the cut into shards is part of it: the stream is the same at every B and for every cut.
static inline void dataloader_get_state(const DataLoader* dl, int64_t state[DATALOADER_STATE_LEN]) {
    memset(state, 0, DATALOADER_STATE_LEN * sizeof(int64_t));
    state[0] = DATALOADER_STATE_TAG;
    state[1] = dl->total_tokens; state[2] = (int64_t)dl->token_hash;
    state[3] = dl->T; state[4] = dl->shuffle; state[5] = (int64_t)dl->seed;
    state[6] = dl->position;
}


static inline void dataloader_require(int64_t saved, int64_t have, const char* what) {
    if (saved != have) {
        die("dataloader state is for another configuration: it has %s = %lld, this loader has %lld", what,
            (long long)saved, (long long)have);
    }
}

// dies unless state is of this build's layout
static inline void dataloader_check_state_tag(const int64_t state[DATALOADER_STATE_LEN]) {
    if (state[0] == DATALOADER_STATE_TAG_V1) {
        die("dataloader state of layout 1 (shards and their chunks permuted separately): this build reads one sequence "
            "stream and cannot continue that order; resume with the build that wrote it, or start the run afresh");
    }
    if (state[0] != DATALOADER_STATE_TAG) {
        die("dataloader state: unknown tag 0x%llx, expected 0x%x (no data loader state saved?)", (unsigned long long)state[0],
            DATALOADER_STATE_TAG);
    }
}

// the data-order seed a saved state was drawn with
static inline uint64_t dataloader_state_seed(const int64_t state[DATALOADER_STATE_LEN]) {
    dataloader_check_state_tag(state);
    return (uint64_t)state[5];
}

static inline void dataloader_set_state(DataLoader* dl, const int64_t state[DATALOADER_STATE_LEN]) {
    dataloader_check_state_tag(state);
    dataloader_require(state[1], dl->total_tokens, "total tokens of the shards");
    if ((uint64_t)state[2] != dl->token_hash) {
        die("dataloader state is for other data: the shards hold as many tokens (%lld) but other ones (token hash "
            "%016llx, the checkpoint's %016llx)", (long long)dl->total_tokens, (unsigned long long)dl->token_hash,
            (unsigned long long)state[2]);
    }
    dataloader_require(state[3], dl->T, "T");
    dataloader_require(state[4], dl->shuffle, "shuffle");
    if (dl->shuffle) { dataloader_require(state[5], (int64_t)dl->seed, "data seed"); }
    if (state[6] < 0) { die("dataloader state: position %lld is negative", (long long)state[6]); }
    dl->position = state[6];
}

static inline void dataloader_free(DataLoader* dl) {
    dataloader_close_shards(dl);
    free(dl->files);
    globfree(&dl->glob_result);
    free(dl->shard_start);
    free(dl->inputs);
    free(dl->targets);
    free(dl->buffer);
    memset(dl, 0, sizeof(*dl));
}

#endif
