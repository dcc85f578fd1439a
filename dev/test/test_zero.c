// Tests of llmc/zero.h: shard sizes and ranges (world size 1, sizes not divisible, more ranks than aligned
// blocks, huge vectors, invalid inputs), slices of tensors inside a shard, taking shards of checkpoint vectors
// at one world size after saving at another, the GPT-2 and LLaMA gradient buckets, and the micro-batch split: with the
// DataLoader on real shard files, W ranks with accumulation A train on exactly the batches of one rank with
// accumulation W * A.
#include <sys/stat.h>
#include "llmc/zero.h"
#include "llmc/gpt2_config.h"
#include "llmc/llama_config.h"
#include "llmc/dataloader.h"
#include "dev/test/test_common.h"
#include "dev/test/test_shard.h"

static char tmpdir[] = "/tmp/test_zero_XXXXXX";

static void test_shard_examples(void) {
    ZeroShard s = zero_shard(1000, 1, 0);
    CHECK(s.start == 0 && s.size == 1024 && s.valid == 1000 && s.padded == 1024 && s.n == 1000,
          "n=1000 W=1: start %zu size %zu valid %zu padded %zu", s.start, s.size, s.valid, s.padded);
    s = zero_shard(1024, 1, 0);
    CHECK(s.size == 1024 && s.valid == 1024 && s.padded == 1024, "n=1024 W=1 needs no padding: size %zu", s.size);
    size_t want_valid[3] = {384, 384, 232};
    for (int r = 0; r < 3; r++) {
        s = zero_shard(1000, 3, r);
        CHECK(s.size == 384 && s.start == 384 * (size_t)r && s.valid == want_valid[r] && s.padded == 1152,
              "n=1000 W=3 rank %d: start %zu size %zu valid %zu padded %zu", r, s.start, s.size, s.valid, s.padded);
    }
    s = zero_shard(5, 8, 0);
    CHECK(s.size == 128 && s.valid == 5 && s.padded == 1024, "n=5 W=8 rank 0: size %zu valid %zu", s.size, s.valid);
    s = zero_shard(5, 8, 7);
    CHECK(s.start == 896 && s.valid == 0, "n=5 W=8 rank 7 is padding only: start %zu valid %zu", s.start, s.valid);
    s = zero_shard(1, 1, 0);
    CHECK(s.size == 128 && s.valid == 1, "n=1 W=1: size %zu valid %zu", s.size, s.valid);
}

// every shard has the same aligned size, the shards tile [0, padded), their valid parts tile [0, n), padding is minimal
static void check_shards(size_t n, int world) {
    size_t total_valid = 0, size0 = zero_shard(n, world, 0).size;
    int ok = size0 % ZERO_ALIGN == 0 && size0 * (size_t)world >= n && size0 < (n + world - 1) / world + ZERO_ALIGN;
    for (int r = 0; r < world; r++) {
        ZeroShard s = zero_shard(n, world, r);
        size_t want_valid = s.start >= n ? 0 : (n - s.start < size0 ? n - s.start : size0);
        ok = ok && s.size == size0 && s.start == (size_t)r * size0 && s.valid == want_valid && s.padded == size0 * world;
        total_valid += s.valid;
    }
    CHECK(ok && total_valid == n, "shards of n=%zu over W=%d: size %zu, valid parts add up to %zu", n, world, size0, total_valid);
}

static void test_shard_properties(void) {
    const size_t ns[] = {1, 2, 127, 128, 129, 1000, 12345, 124475904, 1557686400, (size_t)1 << 40};
    const int worlds[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 64, 1000};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        for (size_t j = 0; j < sizeof(worlds) / sizeof(worlds[0]); j++) { check_shards(ns[i], worlds[j]); }
    }
}

static size_t bad_n;
static int bad_world, bad_rank;
static void shard_bad(void) { zero_shard(bad_n, bad_world, bad_rank); }

// zero_shard(n, world, rank) in a child; 1 if it died with `expect`
static int shard_fails_with(size_t n, int world, int rank, const char* expect) {
    bad_n = n; bad_world = world; bad_rank = rank;
    return child_fails_with(shard_bad, expect);
}

static void test_shard_invalid(void) {
    CHECK(shard_fails_with(0, 1, 0, "empty"), "an empty vector is refused");
    CHECK(shard_fails_with(100, 0, 0, "world size 0"), "world size 0 is refused");
    CHECK(shard_fails_with(100, -2, 0, "world size -2"), "a negative world size is refused");
    CHECK(shard_fails_with(100, 2, -1, "rank -1"), "a negative rank is refused");
    CHECK(shard_fails_with(100, 2, 2, "rank 2"), "rank == world size is refused");
}

static void test_slice(void) {
    ZeroShard s = zero_shard(1000, 3, 1);   // [384, 768), all valid
    size_t lo = 0, len = 0;
    CHECK(zero_slice(&s, 400, 10, &lo, &len) && lo == 400 && len == 10, "tensor inside the shard: %zu+%zu", lo, len);
    CHECK(zero_slice(&s, 300, 100, &lo, &len) && lo == 384 && len == 16, "tensor across the start: %zu+%zu", lo, len);
    CHECK(zero_slice(&s, 700, 100, &lo, &len) && lo == 700 && len == 68, "tensor across the end: %zu+%zu", lo, len);
    CHECK(zero_slice(&s, 0, 1000, &lo, &len) && lo == 384 && len == 384, "tensor covering the shard: %zu+%zu", lo, len);
    CHECK(!zero_slice(&s, 0, 384, &lo, &len), "tensor ending at the start does not overlap");
    CHECK(!zero_slice(&s, 768, 100, &lo, &len), "tensor starting at the end does not overlap");
    CHECK(!zero_slice(&s, 500, 0, &lo, &len), "an empty tensor does not overlap");
    s = zero_shard(1000, 3, 2);   // [768, 1152), valid up to 1000
    CHECK(zero_slice(&s, 900, 100, &lo, &len) && lo == 900 && len == 100, "last tensor: %zu+%zu", lo, len);
    s = zero_shard(5, 8, 3);      // padding only
    CHECK(!zero_slice(&s, 0, 5, &lo, &len), "a padding-only shard has no slice");

    // random tensor layouts: over all shards the slices of every tensor tile it exactly
    Rng rng;
    rng_seed(&rng, 7);
    int ok = 1;
    for (int trial = 0; trial < 200; trial++) {
        int world = 1 + (int)rng_below(&rng, 12);
        size_t sizes[6], n = 0;
        for (int t = 0; t < 6; t++) { sizes[t] = rng_below(&rng, 700); n += sizes[t]; }
        if (n == 0) { continue; }
        size_t off = 0;
        for (int t = 0; t < 6; t++) {
            size_t covered = 0, next = off;
            for (int r = 0; r < world; r++) {
                ZeroShard sh = zero_shard(n, world, r);
                if (zero_slice(&sh, off, sizes[t], &lo, &len)) {
                    ok = ok && lo == next && lo >= sh.start && lo + len <= sh.start + sh.valid;
                    next = lo + len;
                    covered += len;
                }
            }
            ok = ok && covered == sizes[t];
            off += sizes[t];
        }
    }
    CHECK(ok, "slices of random tensor layouts tile every tensor across the shards");
}

// saving gathers the valid parts of the shards; loading at another world size takes new shards of that vector
static void test_checkpoint_resharding(void) {
    const size_t n = 1000;
    float* full = (float*)malloc_check(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { full[i] = 1.0f + 0.5f * (float)i; }
    const int worlds[] = {1, 2, 3, 7, 9};
    int ok = 1;
    for (int a = 0; a < 5; a++) {
        float* gathered = (float*)calloc_check(n, sizeof(float));
        for (int r = 0; r < worlds[a]; r++) {
            ZeroShard sh = zero_shard(n, worlds[a], r);
            float* shard = (float*)malloc_check(sh.size * sizeof(float));
            memset(shard, 0xff, sh.size * sizeof(float));
            zero_take_shard(shard, full, &sh);
            for (size_t j = sh.valid; j < sh.size; j++) { ok = ok && shard[j] == 0.0f; }
            memcpy(gathered + sh.start, shard, sh.valid * sizeof(float));
            free(shard);
        }
        ok = ok && memcmp(gathered, full, n * sizeof(float)) == 0;
        for (int b = 0; b < 5; b++) {
            for (int r = 0; r < worlds[b]; r++) {
                ZeroShard sh = zero_shard(n, worlds[b], r);
                float* shard = (float*)malloc_check(sh.size * sizeof(float));
                zero_take_shard(shard, gathered, &sh);
                for (size_t j = 0; j < sh.valid; j++) { ok = ok && shard[j] == full[sh.start + j]; }
                free(shard);
            }
        }
        free(gathered);
    }
    CHECK(ok, "shards saved at world sizes 1, 2, 3, 7, 9 gather to the full vector and re-shard at every other size");
    free(full);
}

static GPT2Config bucket_config = {16, 50, 128, 3, 2, 8};
static void bucket_bad(void) {
    ParamTable t;
    gpt2_param_table(&bucket_config, &t);
    FlatRange r[MAX_PARAM_TENSORS];
    bucket_ranges(&t, bad_rank, r);
}

// the buckets of t have per_block ranges each for blocks 0 .. L-1, `last` in bucket L, and cover every parameter once
static void check_bucket_cover(const char* family, const ParamTable* t, int per_block, int last) {
    size_t n = param_table_total(t);
    unsigned char* seen = (unsigned char*)calloc_check(n, 1);
    FlatRange r[MAX_PARAM_TENSORS];
    int counts_ok = 1;
    for (int b = 0; b <= t->num_layers; b++) {
        int k = bucket_ranges(t, b, r);
        counts_ok = counts_ok && k == (b < t->num_layers ? per_block : last);
        for (int i = 0; i < k; i++) {
            for (size_t j = 0; j < r[i].count; j++) { seen[r[i].offset + j]++; }
        }
    }
    int once = 1;
    for (size_t i = 0; i < n; i++) { once = once && seen[i] == 1; }
    CHECK(counts_ok, "%s: %d ranges per block bucket, %d in the last bucket", family, per_block, last);
    CHECK(once, "%s: the buckets cover every parameter exactly once", family);
    free(seen);
}

static void test_buckets(void) {
    const GPT2Config* c = &bucket_config;
    ParamTable t;
    gpt2_param_table(c, &t);
    size_t n = param_table_total(&t);
    check_bucket_cover("GPT-2", &t, 12, 4);
    FlatRange r[MAX_PARAM_TENSORS];
    size_t qkvw = t.sizes[P_WTE] + t.sizes[P_WPE] + t.sizes[P_LN1W] + t.sizes[P_LN1B];
    bucket_ranges(&t, 1, r);
    CHECK(r[2].offset == qkvw + 3 * 8 * 8 && r[2].count == 3 * 8 * 8, "block 1's qkvw: offset %zu count %zu", r[2].offset, r[2].count);
    bucket_ranges(&t, c->num_layers, r);
    CHECK(r[0].offset == 0 && r[0].count == t.sizes[P_WTE] && r[3].offset + r[3].count == n, "last bucket: wte first, lnfb last");
    LlamaConfig lc = {32, 100, 128, 2, 4, 2, 64, 192};
    ParamTable lt;
    llama_param_table(&lc, &lt);
    check_bucket_cover("LLaMA", &lt, 6, 3);
    bucket_ranges(&lt, 2, r);
    CHECK(r[2].offset + r[2].count == param_table_total(&lt) && r[2].count == lt.sizes[LL_LMHEADW],
          "LLaMA last bucket ends with the LM head");
    bad_rank = -1;
    CHECK(child_fails_with(bucket_bad, "bucket -1"), "bucket -1 is refused");
    bad_rank = 4;
    CHECK(child_fails_with(bucket_bad, "bucket 4"), "bucket L+1 is refused");
}

static long bad_total;
static void accum_bad(void) { dp_accum_steps(bad_total, 2, 4, bad_world); }

static void test_micro_split(void) {
    CHECK(dp_accum_steps(64, 2, 4, 1) == 8 && dp_accum_steps(64, 2, 4, 2) == 4 && dp_accum_steps(64, 2, 4, 8) == 1,
          "accumulation steps for 64 tokens of B*T = 8 at W = 1, 2, 8");
    bad_total = 64; bad_world = 3;
    CHECK(child_fails_with(accum_bad, "not a positive multiple of B*T*world"), "64 tokens do not split over 3 ranks");
    bad_total = 8; bad_world = 2;
    CHECK(child_fails_with(accum_bad, "not a positive multiple"), "8 tokens are less than one micro-batch per rank");
    bad_total = 64; bad_world = 0;
    CHECK(child_fails_with(accum_bad, "not a positive multiple"), "world size 0 is refused");
    int ok = 1;
    for (int world = 1; world <= 6; world++) {
        for (int accum = 1; accum <= 3; accum++) {
            int per_rank[6] = {0};
            for (long k = 0; k < (long)world * accum; k++) {
                int r = dp_micro_owner(k, world);
                ok = ok && r == (int)(k % world);
                per_rank[r]++;
            }
            for (int r = 0; r < world; r++) { ok = ok && per_rank[r] == accum; }
        }
    }
    CHECK(ok, "rank r owns micro-batches r, r+W, ...: exactly A per rank");
}

// Runs `steps` steps of W ranks with accumulation A the way the trainer does: each rank's loader reads every
// micro-batch, the rank trains the ones it owns. seq[step * W * A + k] = first token of global micro-batch k.
// Returns 1 when every rank trained exactly its micro-batches and all loaders end in the same state.
static int run_ranks(const char* pattern, int world, int accum, int steps, int* seq) {
    int G = world * accum, ok = 1;
    int64_t state0[DATALOADER_STATE_LEN];
    for (int r = 0; r < world; r++) {
        DataLoader dl;
        dataloader_init(&dl, pattern, 2, 4, 1, 42, 60000);
        int trained = 0;
        for (int s = 0; s < steps; s++) {
            for (int k = 0; k < G; k++) {
                dataloader_next_batch(&dl);
                if (dp_micro_owner(k, world) != r) { continue; }
                seq[s * G + k] = dl.inputs[0];
                trained++;
            }
        }
        int64_t state[DATALOADER_STATE_LEN];
        dataloader_get_state(&dl, state);
        if (r == 0) { memcpy(state0, state, sizeof(state)); }
        ok = ok && trained == steps * accum && memcmp(state, state0, sizeof(state)) == 0;
        dataloader_free(&dl);
    }
    return ok;
}

static void test_batches_match_single_rank(void) {
    write_token_shard(tmpdir, "a.bin", 203, 0);
    write_token_shard(tmpdir, "b.bin", 157, 10000);
    char pattern[4096];
    snprintf(pattern, sizeof(pattern), "%s/*.bin", tmpdir);
    const int layouts[][2] = {{2, 2}, {4, 1}, {2, 3}, {3, 2}, {6, 1}};
    const int steps = 13;   // more than an epoch of 44 micro-batches
    for (int i = 0; i < 5; i++) {
        int world = layouts[i][0], accum = layouts[i][1], G = world * accum;
        int* want = (int*)malloc_check((size_t)steps * G * sizeof(int));
        int* got = (int*)malloc_check((size_t)steps * G * sizeof(int));
        int ok = run_ranks(pattern, 1, G, steps, want) && run_ranks(pattern, world, accum, steps, got);
        CHECK(ok && memcmp(want, got, (size_t)steps * G * sizeof(int)) == 0,
              "W=%d A=%d trains on the batches of W=1 A=%d, in the same order, with identical loader states", world, accum, G);
        free(want);
        free(got);
    }
}

int main(void) {
    if (mkdtemp(tmpdir) == NULL) { die("cannot create a temporary directory"); }
    test_shard_examples();
    test_shard_properties();
    test_shard_invalid();
    test_slice();
    test_checkpoint_resharding();
    test_buckets();
    test_micro_split();
    test_batches_match_single_rank();
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0) { printf("warning: could not remove %s\n", tmpdir); }
    return test_summary("test_zero");
}
