// Tests of llmc/dataloader.h on small synthetic shards in a temporary folder: batch contents and the
// target shift, sequential order across shards, epoch wrap-around, shuffling (a permutation, reproducible,
// new every epoch), disjoint rank slices, exact continuation from a saved state, and every bad input.
// Token i of shard s has the value 1000 * s + i, so a batch's first token says where it was read.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "llmc/dataloader.h"
#include "dev/test/test_common.h"
#include "dev/test/test_shard.h"

#define VOCAB 5000
#define TEST_B 2
#define TEST_T 4
#define NSHARDS 3
static const int shard_sizes[NSHARDS] = {41, 33, 50};   // 5, 4 and 6 chunks of B*T = 8 (one token kept for the last target)
#define EPOCH_BATCHES 15

static char tmpdir[] = "/tmp/test_dataloader_XXXXXX";
static char pattern[4096];

static void path_in_tmp(char* out, size_t len, const char* name) { snprintf(out, len, "%s/%s", tmpdir, name); }

static void init_loader(DataLoader* dl, int rank, int world_size, int shuffle, uint64_t seed) {
    dataloader_init(dl, pattern, TEST_B, TEST_T, rank, world_size, shuffle, seed, VOCAB);
}

// the batch must be the TEST_B*TEST_T+1 consecutive tokens from inputs[0]
static int batch_is_contiguous(const DataLoader* dl) {
    for (int i = 0; i < TEST_B * TEST_T; i++) {
        if (dl->inputs[i] != dl->inputs[0] + i || dl->targets[i] != dl->inputs[0] + i + 1) { return 0; }
    }
    return 1;
}

// --- running a failing call in a child process

typedef void (*child_fn)(const char* arg);

// runs fn(arg) in a child; returns 1 if it exited non-zero with `expect` in its stderr
static int fails_with(child_fn fn, const char* arg, const char* expect) {
    int pipefd[2];
    if (pipe(pipefd) != 0) { return 0; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        fn(arg);
        _exit(0);
    }
    close(pipefd[1]);
    char buf[4096] = {0};
    ssize_t got = 0, r;
    while (got < (ssize_t)sizeof(buf) - 1 && (r = read(pipefd[0], buf + got, sizeof(buf) - 1 - got)) > 0) { got += r; }
    close(pipefd[0]);
    int status;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) != 0 && strstr(buf, expect) != NULL;
    if (!ok) { printf("  child status %d, expected '%s' in stderr: %s\n", status, expect, buf); }
    return ok;
}

static void child_init(const char* glob_pattern) {
    DataLoader dl;
    dataloader_init(&dl, glob_pattern, TEST_B, TEST_T, 0, 1, 0, 0, VOCAB);
    dataloader_free(&dl);
}

// a shard that turns bad after init (rewritten on disk) is still caught when its batch is read
static void child_read_all_rewritten(const char* glob_pattern) {
    DataLoader dl;
    dataloader_init(&dl, glob_pattern, TEST_B, TEST_T, 0, 1, 0, 0, VOCAB);
    write_token_shard(tmpdir, "bad.bin", 100, VOCAB - 50);
    for (int i = 0; i < 100; i++) { dataloader_next_batch(&dl); }
    dataloader_free(&dl);
}

static int64_t saved_state[DATALOADER_STATE_LEN];

// loads saved_state into a loader over the test shards configured by `config`: "B4", "world2", "seed9"
static void child_set_state(const char* config) {
    DataLoader dl;
    int b = strcmp(config, "B4") == 0 ? 4 : TEST_B;
    int world = strcmp(config, "world2") == 0 ? 2 : 1;
    uint64_t seed = strcmp(config, "seed9") == 0 ? 9 : 1;
    dataloader_init(&dl, pattern, b, TEST_T, 0, world, 1, seed, VOCAB);
    dataloader_set_state(&dl, saved_state);
    dataloader_free(&dl);
}

// --- tests

static void test_sequential(void) {
    DataLoader dl;
    init_loader(&dl, 0, 1, 0, 0);
    CHECK(dl.B == TEST_B && dl.T == TEST_T && dl.num_shards == NSHARDS, "loader shape");
    CHECK(dataloader_batches_per_epoch(&dl) == EPOCH_BATCHES, "batches per epoch %zu", dataloader_batches_per_epoch(&dl));
    for (int epoch = 0; epoch < 2; epoch++) {
        int batch = 0;
        for (int s = 0; s < NSHARDS; s++) {
            for (int c = 0; c < (shard_sizes[s] - 1) / (TEST_B * TEST_T); c++, batch++) {
                dataloader_next_batch(&dl);
                int want = 1000 * s + c * TEST_B * TEST_T;
                CHECK(dl.inputs[0] == want && batch_is_contiguous(&dl), "epoch %d batch %d starts at %d, want %d",
                      epoch, batch, dl.inputs[0], want);
                CHECK(dataloader_epoch(&dl) == epoch, "epoch %lld during epoch %d", (long long)dataloader_epoch(&dl), epoch);
            }
        }
        CHECK(batch == EPOCH_BATCHES, "epoch length %d", batch);
    }
    dataloader_reset(&dl);
    dataloader_next_batch(&dl);
    CHECK(dl.inputs[0] == 0 && dl.targets[TEST_B * TEST_T - 1] == TEST_B * TEST_T && dataloader_epoch(&dl) == 0, "reset goes back to the start");
    dataloader_free(&dl);
}

// fills starts[n] with the first token of n consecutive batches
static void read_starts(DataLoader* dl, int* starts, int n) {
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(dl);
        starts[i] = dl->inputs[0];
        if (!batch_is_contiguous(dl)) { starts[i] = -1; }
    }
}

static int is_permutation_of_all_chunks(const int* starts) {
    int seen[NSHARDS][8] = {{0}};
    for (int i = 0; i < EPOCH_BATCHES; i++) {
        int s = starts[i] / 1000, off = starts[i] % 1000;
        if (starts[i] < 0 || s >= NSHARDS || off % (TEST_B * TEST_T) != 0 || off / (TEST_B * TEST_T) >= (shard_sizes[s] - 1) / (TEST_B * TEST_T)) { return 0; }
        if (seen[s][off / (TEST_B * TEST_T)]++) { return 0; }
    }
    return 1;
}

static void test_shuffle(void) {
    DataLoader a, b, c;
    init_loader(&a, 0, 1, 1, 1234);
    init_loader(&b, 0, 1, 1, 1234);
    init_loader(&c, 0, 1, 1, 99);
    int sa[3 * EPOCH_BATCHES], sb[3 * EPOCH_BATCHES], sc[EPOCH_BATCHES];
    read_starts(&a, sa, 3 * EPOCH_BATCHES);
    read_starts(&b, sb, 3 * EPOCH_BATCHES);
    read_starts(&c, sc, EPOCH_BATCHES);
    for (int e = 0; e < 3; e++) { CHECK(is_permutation_of_all_chunks(sa + e * EPOCH_BATCHES), "epoch %d visits every chunk once", e); }
    CHECK(memcmp(sa, sb, sizeof(sa)) == 0, "same seed, same order over 3 epochs");
    CHECK(memcmp(sa, sa + EPOCH_BATCHES, sizeof(sc)) != 0, "epoch 1 is shuffled differently from epoch 0");
    CHECK(memcmp(sa + EPOCH_BATCHES, sa + 2 * EPOCH_BATCHES, sizeof(sc)) != 0, "epoch 2 differs from epoch 1");
    CHECK(memcmp(sa, sc, sizeof(sc)) != 0, "another seed gives another order");
    CHECK(dataloader_epoch(&a) == 2, "epoch after 3 epochs of batches: %lld", (long long)dataloader_epoch(&a));
    int sequential = 1;
    for (int i = 0; i < EPOCH_BATCHES; i++) { sequential &= i == 0 || sa[i] > sa[i - 1]; }
    CHECK(!sequential, "shuffled order is not the sequential one");
    dataloader_reset(&a);
    int again[EPOCH_BATCHES];
    read_starts(&a, again, EPOCH_BATCHES);
    CHECK(memcmp(again, sa, sizeof(again)) == 0, "reset replays epoch 0");
    dataloader_free(&a); dataloader_free(&b); dataloader_free(&c);
}

static void test_ranks(void) {
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        DataLoader r0, r1;
        init_loader(&r0, 0, 2, shuffle, 7);
        init_loader(&r1, 1, 2, shuffle, 7);
        size_t n = dataloader_batches_per_epoch(&r0);
        CHECK(n == 2 + 2 + 3 && dataloader_batches_per_epoch(&r1) == n, "batches per epoch with 2 ranks: %zu", n);
        int used[NSHARDS * 1000] = {0};
        int disjoint = 1, paired = 1;
        for (size_t i = 0; i < n; i++) {
            dataloader_next_batch(&r0);
            dataloader_next_batch(&r1);
            paired &= r1.inputs[0] == r0.inputs[0] + TEST_B * TEST_T && batch_is_contiguous(&r0) && batch_is_contiguous(&r1);
            for (int k = 0; k < TEST_B * TEST_T; k++) { disjoint &= used[r0.inputs[k]]++ == 0 && used[r1.inputs[k]]++ == 0; }
        }
        CHECK(disjoint, "shuffle=%d: ranks read disjoint tokens", shuffle);
        CHECK(paired, "shuffle=%d: rank 1 reads the slice after rank 0 in the same chunk", shuffle);
        dataloader_free(&r0); dataloader_free(&r1);
    }
}

// for every stopping point over two epochs: save, load into a fresh loader, the next batches are identical
static void test_state(void) {
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        int mismatches = 0;
        for (int stop = 0; stop <= 2 * EPOCH_BATCHES; stop++) {
            DataLoader run, resumed;
            init_loader(&run, 0, 1, shuffle, 1);
            init_loader(&resumed, 0, 1, shuffle, 1);
            for (int i = 0; i < stop; i++) { dataloader_next_batch(&run); }
            int64_t state[DATALOADER_STATE_LEN];
            dataloader_get_state(&run, state);
            dataloader_next_batch(&resumed);   // the state must override any position
            dataloader_set_state(&resumed, state);
            for (int i = 0; i < EPOCH_BATCHES + 3; i++) {
                dataloader_next_batch(&run);
                dataloader_next_batch(&resumed);
                mismatches += memcmp(run.inputs, resumed.inputs, TEST_B * TEST_T * sizeof(int)) != 0 ||
                              memcmp(run.targets, resumed.targets, TEST_B * TEST_T * sizeof(int)) != 0 ||
                              dataloader_epoch(&run) != dataloader_epoch(&resumed);
            }
            dataloader_free(&run); dataloader_free(&resumed);
        }
        CHECK(mismatches == 0, "shuffle=%d: resumed loaders match the uninterrupted one (%d mismatched batches)", shuffle, mismatches);
    }
}

static void test_bad_state(void) {
    DataLoader dl;
    init_loader(&dl, 0, 1, 1, 1);
    for (int i = 0; i < 6; i++) { dataloader_next_batch(&dl); }
    dataloader_get_state(&dl, saved_state);
    dataloader_free(&dl);
    CHECK(fails_with(child_set_state, "B4", "another configuration: it has B = 2, this loader has 4"), "state for another B");
    CHECK(fails_with(child_set_state, "world2", "world_size = 1, this loader has 2"), "state for another world_size");
    CHECK(fails_with(child_set_state, "seed9", "seed = 1, this loader has 9"), "state for another seed");
    saved_state[1] = 4;
    CHECK(fails_with(child_set_state, "", "number of shards = 4, this loader has 3"), "state for another shard set");
    saved_state[1] = NSHARDS;
    saved_state[10] = 99;
    CHECK(fails_with(child_set_state, "", "past the"), "state with a chunk position past the shard");
    memset(saved_state, 0, sizeof(saved_state));
    CHECK(fails_with(child_set_state, "", "unknown tag"), "empty state");
}

// writes dir/name: n valid tokens (i % 1000) except token 65535 at position `bad`
static void write_late_bad_token(const char* dir, const char* name, int n, int bad) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int32_t h[SHARD_HEADER_INTS] = {SHARD_MAGIC, SHARD_VERSION, n};
    uint16_t* tokens = (uint16_t*)malloc_check((size_t)n * sizeof(uint16_t));
    for (int i = 0; i < n; i++) { tokens[i] = (uint16_t)(i % 1000); }
    tokens[bad] = 65535;
    FILE* fp = fopen_check(path, "wb");
    fwrite_check(h, sizeof(int32_t), SHARD_HEADER_INTS, fp);
    fwrite_check(tokens, sizeof(uint16_t), (size_t)n, fp);
    fclose_check(fp);
    free(tokens);
}

// each bad shard sits alone in the folder, next to the good ones under another name
static void test_bad_shards(void) {
    char bad_pattern[4096];
    path_in_tmp(bad_pattern, sizeof(bad_pattern), "bad.bin");
    write_test_shard(tmpdir, "bad.bin", 12345, SHARD_VERSION, 100, 100, 0);
    CHECK(fails_with(child_init, bad_pattern, "bad magic 12345, expected 20240520 (is this a token shard?)"), "bad magic");
    write_test_shard(tmpdir, "bad.bin", SHARD_MAGIC, 7, 100, 100, 0);
    CHECK(fails_with(child_init, bad_pattern, "unsupported version 7"), "bad version");
    write_test_shard(tmpdir, "bad.bin", SHARD_MAGIC, SHARD_VERSION, 100, 60, 0);
    CHECK(fails_with(child_init, bad_pattern, "(truncated)"), "truncated shard");
    write_test_shard(tmpdir, "bad.bin", SHARD_MAGIC, SHARD_VERSION, 100, 120, 0);
    CHECK(fails_with(child_init, bad_pattern, "(token count mismatch)"), "shard with more tokens than its header says");
    write_test_shard(tmpdir, "bad.bin", SHARD_MAGIC, SHARD_VERSION, 0, 0, 0);
    CHECK(fails_with(child_init, bad_pattern, "must be positive"), "shard with zero tokens");
    FILE* fp = fopen_check(bad_pattern, "wb");
    fputs("hello", fp);
    fclose_check(fp);
    CHECK(fails_with(child_init, bad_pattern, "shorter than its 1024-byte header"), "tiny file");
    write_token_shard(tmpdir, "bad.bin", TEST_B * TEST_T, 0);
    CHECK(fails_with(child_init, bad_pattern, "fewer than the 9 one batch needs"), "shard too small for one batch");
    write_token_shard(tmpdir, "bad.bin", 100, VOCAB - 50);
    CHECK(fails_with(child_init, bad_pattern, "token 5000 at token offset 50 (byte offset 1124) is >= vocab_size 5000"),
          "token >= vocab_size, found at init");
    write_token_shard(tmpdir, "bad.bin", 100, 0);
    CHECK(fails_with(child_read_all_rewritten, bad_pattern, "token 5000 at token offset 50 is >= vocab_size 5000"),
          "a shard rewritten with a bad token after init is caught when its batch is read");
    write_late_bad_token(tmpdir, "bad.bin", (3 << 20) + 5, (2 << 20) + 7);
    CHECK(fails_with(child_init, bad_pattern, "token 65535 at token offset 2097159 "),
          "a bad token in the third megatoken of a shard stops init, before any batch is read");
    unlink(bad_pattern);
    path_in_tmp(bad_pattern, sizeof(bad_pattern), "dir.bin");
    if (mkdir(bad_pattern, 0755) != 0) { die("mkdir %s failed", bad_pattern); }
    CHECK(fails_with(child_init, bad_pattern, "dir.bin' is a directory"), "a directory matched as a shard is named");
    rmdir(bad_pattern);
    path_in_tmp(bad_pattern, sizeof(bad_pattern), "bad.bin");
    char none[4096];
    path_in_tmp(none, sizeof(none), "nothing_*.bin");
    CHECK(fails_with(child_init, none, "no files match the pattern"), "glob without a match");
    CHECK(fails_with(child_init, none, "nothing_*.bin"), "the message names the pattern");
}

int main(void) {
    if (mkdtemp(tmpdir) == NULL) { die("mkdtemp failed: %s", strerror(errno)); }
    for (int s = 0; s < NSHARDS; s++) {
        char name[64];
        snprintf(name, sizeof(name), "shard_%02d.bin", s);
        write_token_shard(tmpdir, name, shard_sizes[s], 1000 * s);
    }
    path_in_tmp(pattern, sizeof(pattern), "shard_*.bin");
    test_sequential();
    test_shuffle();
    test_ranks();
    test_state();
    test_bad_state();
    test_bad_shards();
    for (int s = 0; s < NSHARDS; s++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/shard_%02d.bin", tmpdir, s);
        unlink(path);
    }
    rmdir(tmpdir);
    return test_summary("test_dataloader");
}
