// Tests of llmc/dataloader.h on small synthetic shards in a temporary folder: the sequences of the concatenated
// stream and the target shift (across shard ends too), sequential order and epoch wrap-around, the shuffled order
// (every sequence once per epoch, reproducible, new every epoch and seed; the permutation itself a bijection with
// even marginals), the same stream at every B and for every cut of the corpus into shards, exact continuation from a
// saved state (at another B too), and every bad input and state.
// Token j of the stream has the value 1000 + j (the shards are cuts of it), so an input says where it was read.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "llmc/dataloader.h"
#include "dev/test/test_common.h"
#include "dev/test/test_shard.h"

#define VOCAB 5000
#define TEST_B 2
#define TEST_T 4
#define FIRST_TOKEN 1000
#define NSHARDS 3
static const int shard_sizes[NSHARDS] = {41, 33, 50};   // 124 tokens: (124 - 1) / 4 = 30 sequences, 15 batches of 2
#define STREAM_TOKENS 124
#define EPOCH_SEQS 30

static char tmpdir[] = "/tmp/test_dataloader_XXXXXX";
static char pattern[4096];

static void path_in_tmp(char* out, size_t len, const char* name) { snprintf(out, len, "%s/%s", tmpdir, name); }

// writes dir/name holding tokens first .. first + n - 1 of the stream (the cut of the corpus a shard holds)
static void write_stream_cut(const char* dir, const char* name, int first, int n) {
    write_token_shard(dir, name, n, FIRST_TOKEN + first);
}

// writes the stream cut at `sizes` (n shards) as <prefix>_00.bin ...; the glob of them into glob_out
static void write_cut(const char* prefix, const int* sizes, int n, char* glob_out, size_t len) {
    int first = 0;
    for (int s = 0; s < n; s++) {
        char name[64];
        snprintf(name, sizeof(name), "%s_%02d.bin", prefix, s);
        write_stream_cut(tmpdir, name, first, sizes[s]);
        first += sizes[s];
    }
    snprintf(glob_out, len, "%s/%s_*.bin", tmpdir, prefix);
}

static void init_loader(DataLoader* dl, int B, int shuffle, uint64_t seed) {
    dataloader_init(dl, pattern, B, TEST_T, shuffle, seed, VOCAB);
}

// the sequence row b of the batch holds (inputs = stream tokens [k T, k T + T), targets one later), or -1
static int64_t row_sequence(const DataLoader* dl, int b) {
    const int* in = dl->inputs + (size_t)b * dl->T;
    const int* tg = dl->targets + (size_t)b * dl->T;
    int64_t start = in[0] - FIRST_TOKEN;
    if (start < 0 || start % dl->T != 0) { return -1; }
    for (int t = 0; t < dl->T; t++) {
        if (in[t] != in[0] + t || tg[t] != in[0] + t + 1) { return -1; }
    }
    return start / dl->T;
}

// the sequences of the next n batches of dl, B per batch, into seqs[n * B]
static void read_sequences(DataLoader* dl, int64_t* seqs, int n) {
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(dl);
        for (int b = 0; b < dl->B; b++) { seqs[(size_t)i * dl->B + b] = row_sequence(dl, b); }
    }
}

static int is_permutation(const int64_t* seqs, int64_t n) {
    char* seen = (char*)calloc_check((size_t)n, 1);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) { ok = seqs[i] >= 0 && seqs[i] < n && !seen[seqs[i]]++; }
    free(seen);
    return ok;
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
    dataloader_init(&dl, glob_pattern, TEST_B, TEST_T, 0, 0, VOCAB);
    dataloader_free(&dl);
}

// a shard that turns bad after init (rewritten on disk) is still caught when its batch is read
static void child_read_all_rewritten(const char* glob_pattern) {
    DataLoader dl;
    dataloader_init(&dl, glob_pattern, TEST_B, TEST_T, 0, 0, VOCAB);
    write_token_shard(tmpdir, "bad.bin", 100, VOCAB - 50);
    for (int i = 0; i < 100; i++) { dataloader_next_batch(&dl); }
    dataloader_free(&dl);
}

static int64_t saved_state[DATALOADER_STATE_LEN];
static char other_pattern[4096];   // the glob of child_set_state's "other" data

// loads saved_state into a loader configured by `config`: "" the test shards, "T8", "seed9", "other" (other_pattern)
static void child_set_state(const char* config) {
    DataLoader dl;
    int T = strcmp(config, "T8") == 0 ? 8 : TEST_T;
    uint64_t seed = strcmp(config, "seed9") == 0 ? 9 : 1;
    dataloader_init(&dl, strcmp(config, "other") == 0 ? other_pattern : pattern, TEST_B, T, 1, seed, VOCAB);
    dataloader_set_state(&dl, saved_state);
    dataloader_free(&dl);
}

static void child_state_seed(const char* unused) {
    (void)unused;
    dataloader_state_seed(saved_state);
}

// --- tests

// sequence k is stream tokens [4k, 4k + 4]: in order, across shard ends, epoch after epoch (also when an epoch ends
// inside a batch)
static void test_sequential(void) {
    DataLoader dl;
    init_loader(&dl, TEST_B, 0, 0);
    CHECK(dl.B == TEST_B && dl.T == TEST_T && dl.num_shards == NSHARDS && dl.total_tokens == STREAM_TOKENS, "loader shape");
    CHECK(dl.num_sequences == EPOCH_SEQS && dataloader_batches_per_epoch(&dl) == EPOCH_SEQS / TEST_B,
          "sequences %lld, batches per epoch %zu", (long long)dl.num_sequences, dataloader_batches_per_epoch(&dl));
    int ok = 1, epochs = 1;
    for (int i = 0; i < 2 * EPOCH_SEQS / TEST_B; i++) {
        dataloader_next_batch(&dl);
        for (int b = 0; b < TEST_B; b++) { ok &= row_sequence(&dl, b) == (i * TEST_B + b) % EPOCH_SEQS; }
        epochs &= dataloader_epoch(&dl) == (i * TEST_B) / EPOCH_SEQS;
    }
    CHECK(ok, "two epochs of batches read sequences 0, 1, 2, ... in order (sequence 10 spans shards 0 and 1)");
    CHECK(epochs, "dataloader_epoch counts the epochs");
    dataloader_reset(&dl);
    dataloader_next_batch(&dl);
    CHECK(row_sequence(&dl, 0) == 0 && dataloader_epoch(&dl) == 0, "reset goes back to the start");
    dataloader_free(&dl);
    DataLoader wide;   // B = 4: 7.5 batches an epoch, so batch 7 ends epoch 0 and starts epoch 1
    init_loader(&wide, 4, 0, 0);
    int64_t seqs[4 * 8];
    read_sequences(&wide, seqs, 8);
    CHECK(seqs[28] == 28 && seqs[29] == 29 && seqs[30] == 0 && seqs[31] == 1 && dataloader_epoch(&wide) == 1,
          "a batch across the epoch end: sequences 28 29 0 1 (got %lld %lld %lld %lld)", (long long)seqs[28],
          (long long)seqs[29], (long long)seqs[30], (long long)seqs[31]);
    dataloader_free(&wide);
}

// the permutation of [0, n) for several n: a bijection; across seeds every element lands everywhere about equally
static void test_permutation(void) {
    const int64_t sizes[] = {1, 2, 3, 5, 16, 17, 100, 1023, 4096, 65537, (1 << 20) + 3};
    int bijective = 1;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        int64_t n = sizes[k];
        SequencePermutation p = sequence_permutation(77, 3, n);
        int64_t* image = (int64_t*)malloc_check((size_t)n * sizeof(int64_t));
        for (int64_t i = 0; i < n; i++) { image[i] = sequence_permute(&p, i); }
        bijective &= is_permutation(image, n);
        free(image);
    }
    CHECK(bijective, "sequence_permute is a bijection of [0, n) for n = 1 .. 2^20 + 3");
    enum { N = 64, DRAWS = 4096 };   // each of the N x N (element, place) cells is expected DRAWS / N = 64 times
    static int count[N][N];
    for (int d = 0; d < DRAWS; d++) {
        SequencePermutation p = sequence_permutation(1000 + d, d % 7, N);
        for (int i = 0; i < N; i++) { count[i][sequence_permute(&p, i)]++; }
    }
    double chi2 = 0.0, dof = (N - 1) * (N - 1);   // ~ dof +- sqrt(2 dof) = 3969 +- 89 for uniform places
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) { chi2 += (count[i][j] - 64.0) * (count[i][j] - 64.0) / 64.0; }
    }
    CHECK(chi2 / dof > 0.9 && chi2 / dof < 1.1, "element-to-place counts over %d seeds: chi^2 / dof = %.3f, within 1 +- 0.1 "
          "(4.5 sd)", DRAWS, chi2 / dof);
}

static void test_shuffle(void) {
    DataLoader a, b, c;
    init_loader(&a, TEST_B, 1, 1234);
    init_loader(&b, TEST_B, 1, 1234);
    init_loader(&c, TEST_B, 1, 99);
    int n = EPOCH_SEQS / TEST_B;
    int64_t sa[3 * EPOCH_SEQS], sb[3 * EPOCH_SEQS], sc[EPOCH_SEQS];
    read_sequences(&a, sa, 3 * n);
    read_sequences(&b, sb, 3 * n);
    read_sequences(&c, sc, n);
    for (int e = 0; e < 3; e++) { CHECK(is_permutation(sa + e * EPOCH_SEQS, EPOCH_SEQS), "epoch %d reads every sequence once", e); }
    CHECK(memcmp(sa, sb, sizeof(sa)) == 0, "same seed, same order over 3 epochs");
    CHECK(memcmp(sa, sa + EPOCH_SEQS, sizeof(sc)) != 0, "epoch 1 is shuffled differently from epoch 0");
    CHECK(memcmp(sa + EPOCH_SEQS, sa + 2 * EPOCH_SEQS, sizeof(sc)) != 0, "epoch 2 differs from epoch 1");
    CHECK(memcmp(sa, sc, sizeof(sc)) != 0, "another seed gives another order");
    CHECK(dataloader_epoch(&a) == 2, "epoch after 3 epochs of batches: %lld", (long long)dataloader_epoch(&a));
    int sequential = 1;
    for (int i = 1; i < EPOCH_SEQS; i++) { sequential &= sa[i] > sa[i - 1]; }
    CHECK(!sequential, "shuffled order is not the sequential one");
    int shards_mixed = 0;   // the shards' sequences interleave within the epoch, not one shard after the other
    for (int i = 1; i < EPOCH_SEQS; i++) { shards_mixed += (sa[i] * TEST_T < 41) != (sa[i - 1] * TEST_T < 41); }
    CHECK(shards_mixed > 2, "shard 0's sequences are spread over the epoch (%d changes of shard)", shards_mixed);
    dataloader_reset(&a);
    int64_t again[EPOCH_SEQS];
    read_sequences(&a, again, n);
    CHECK(memcmp(again, sa, sizeof(again)) == 0, "reset replays epoch 0");
    dataloader_free(&a); dataloader_free(&b); dataloader_free(&c);
}

// loaders of the same seed at B = 1, 2, 3, 4, 7 read one stream of sequences, B at a time, over three epochs
static void test_same_stream_at_every_b(void) {
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        int64_t want[3 * EPOCH_SEQS];
        DataLoader one;
        init_loader(&one, 1, shuffle, 5);
        read_sequences(&one, want, 3 * EPOCH_SEQS);
        dataloader_free(&one);
        const int bs[] = {2, 3, 4, 7};
        for (int k = 0; k < 4; k++) {
            int B = bs[k], n = (3 * EPOCH_SEQS + B - 1) / B;
            int64_t* got = (int64_t*)malloc_check((size_t)n * B * sizeof(int64_t));
            DataLoader dl;
            init_loader(&dl, B, shuffle, 5);
            read_sequences(&dl, got, n);
            CHECK(memcmp(got, want, sizeof(want)) == 0, "shuffle=%d: B=%d reads the sequences of B=1 in the same order", shuffle, B);
            dataloader_free(&dl);
            free(got);
        }
    }
}

// the same stream cut into 1, 2 or 5 shards: the same batches, the same state
static void test_same_stream_for_every_cut(void) {
    static const int one[] = {124}, two[] = {70, 54}, five[] = {1, 40, 3, 60, 20};
    const int* cuts[] = {one, two, five};
    const int counts[] = {1, 2, 5};
    const char* names[] = {"cut1", "cut2", "cut5"};
    int64_t want[2 * EPOCH_SEQS], want_state[DATALOADER_STATE_LEN];
    DataLoader ref;
    init_loader(&ref, 3, 1, 8);
    read_sequences(&ref, want, 2 * EPOCH_SEQS / 3);
    dataloader_get_state(&ref, want_state);
    dataloader_free(&ref);
    for (int k = 0; k < 3; k++) {
        char glob_pattern[4096];
        write_cut(names[k], cuts[k], counts[k], glob_pattern, sizeof(glob_pattern));
        DataLoader dl;
        dataloader_init(&dl, glob_pattern, 3, TEST_T, 1, 8, VOCAB);
        int64_t got[2 * EPOCH_SEQS], state[DATALOADER_STATE_LEN];
        read_sequences(&dl, got, 2 * EPOCH_SEQS / 3);
        dataloader_get_state(&dl, state);
        CHECK(dl.num_shards == counts[k] && memcmp(got, want, sizeof(want)) == 0 && memcmp(state, want_state, sizeof(state)) == 0,
              "the stream cut into %d shards: the batches and state of the 3-shard cut", counts[k]);
        dataloader_free(&dl);
    }
}

// for every stopping point over two epochs: save, load into a fresh loader (of the same B, or of another), the next
// sequences are identical
static void test_state(void) {
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        int mismatches = 0, other_b = 0;
        for (int stop = 0; stop <= 2 * EPOCH_SEQS / TEST_B; stop++) {
            DataLoader run, resumed, wide;
            init_loader(&run, TEST_B, shuffle, 1);
            init_loader(&resumed, TEST_B, shuffle, 1);
            init_loader(&wide, 2 * TEST_B, shuffle, 1);
            for (int i = 0; i < stop; i++) { dataloader_next_batch(&run); }
            int64_t state[DATALOADER_STATE_LEN];
            dataloader_get_state(&run, state);
            dataloader_next_batch(&resumed);   // the state must override any position
            dataloader_set_state(&resumed, state);
            dataloader_set_state(&wide, state);
            int64_t a[2 * (EPOCH_SEQS + 4)], b[2 * (EPOCH_SEQS + 4)], w[2 * (EPOCH_SEQS + 4)];
            read_sequences(&run, a, EPOCH_SEQS + 4);
            read_sequences(&resumed, b, EPOCH_SEQS + 4);
            read_sequences(&wide, w, (EPOCH_SEQS + 4) / 2);
            mismatches += memcmp(a, b, sizeof(a)) != 0 || dataloader_epoch(&run) != dataloader_epoch(&resumed);
            other_b += memcmp(a, w, sizeof(a)) != 0;
            dataloader_free(&run); dataloader_free(&resumed); dataloader_free(&wide);
        }
        CHECK(mismatches == 0, "shuffle=%d: resumed loaders match the uninterrupted one (%d mismatched stops)", shuffle, mismatches);
        CHECK(other_b == 0, "shuffle=%d: a state resumed at B=%d continues the same stream (%d mismatched stops)", shuffle,
              2 * TEST_B, other_b);
    }
}

static void test_bad_state(void) {
    DataLoader dl;
    init_loader(&dl, TEST_B, 1, 1);
    for (int i = 0; i < 6; i++) { dataloader_next_batch(&dl); }
    dataloader_get_state(&dl, saved_state);
    dataloader_free(&dl);
    CHECK(dataloader_state_seed(saved_state) == 1, "the state names its data seed");
    CHECK(fails_with(child_set_state, "T8", "another configuration: it has T = 4, this loader has 8"), "state for another T");
    CHECK(fails_with(child_set_state, "seed9", "data seed = 1, this loader has 9"), "state for another data seed");
    static const int same_size[] = {124};   // as many tokens, other values: another corpus
    char name[64];
    snprintf(name, sizeof(name), "other_00.bin");
    write_token_shard(tmpdir, name, same_size[0], 2000);
    snprintf(other_pattern, sizeof(other_pattern), "%s/other_*.bin", tmpdir);
    CHECK(fails_with(child_set_state, "other", "is for other data: the shards hold as many tokens (124) but other ones"),
          "state for other data of the same size");
    write_token_shard(tmpdir, name, 200, FIRST_TOKEN);
    CHECK(fails_with(child_set_state, "other", "it has total tokens of the shards = 124, this loader has 200"),
          "state for data of another size");
    saved_state[6] = -3;
    CHECK(fails_with(child_set_state, "", "position -3 is negative"), "state with a negative position");
    saved_state[0] = DATALOADER_STATE_TAG_V1;
    CHECK(fails_with(child_set_state, "", "layout 1 (shards and their chunks permuted separately)"), "state of layout 1");
    CHECK(fails_with(child_state_seed, "", "layout 1"), "the data seed of a layout-1 state");
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
    CHECK(fails_with(child_init, bad_pattern, "hold 8 tokens, fewer than the 9 one batch needs"), "shards too small for one batch");
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
    CHECK(fails_with(child_init, bad_pattern, "dir.bin' (mode rb): a directory, not a regular file"), "a directory matched as a shard is named");
    rmdir(bad_pattern);
    if (mkfifo(bad_pattern, 0600) != 0) { die("mkfifo %s failed", bad_pattern); }
    CHECK(fails_with(child_init, bad_pattern, "dir.bin' (mode rb): not a regular file (a FIFO"), "a FIFO matched as a shard is refused, not waited on");
    unlink(bad_pattern);
    char none[4096];
    path_in_tmp(none, sizeof(none), "nothing_*.bin");
    CHECK(fails_with(child_init, none, "no files match the pattern"), "glob without a match");
    CHECK(fails_with(child_init, none, "nothing_*.bin"), "the message names the pattern");
}

// more shards than the loader keeps open: each sequence still reads right
static void test_many_shards(void) {
    int sizes[DATALOADER_MAX_OPEN + 9];
    for (int i = 0; i < DATALOADER_MAX_OPEN + 9; i++) { sizes[i] = 3 + i % 5; }
    char glob_pattern[4096];
    write_cut("many", sizes, DATALOADER_MAX_OPEN + 9, glob_pattern, sizeof(glob_pattern));
    DataLoader dl;
    dataloader_init(&dl, glob_pattern, 5, TEST_T, 1, 3, VOCAB);
    int n = (int)(2 * dl.num_sequences / 5);
    int64_t* seqs = (int64_t*)malloc_check((size_t)n * 5 * sizeof(int64_t));
    read_sequences(&dl, seqs, n);
    int ok = 1;
    for (int i = 0; i < n * 5; i++) { ok &= seqs[i] >= 0 && seqs[i] < dl.num_sequences; }
    CHECK(ok && is_permutation(seqs, dl.num_sequences), "%d shards (%d open at most): every sequence reads its tokens",
          DATALOADER_MAX_OPEN + 9, DATALOADER_MAX_OPEN);
    free(seqs);
    dataloader_free(&dl);
}

int main(void) {
    if (mkdtemp(tmpdir) == NULL) { die("mkdtemp failed: %s", strerror(errno)); }
    write_cut("shard", shard_sizes, NSHARDS, pattern, sizeof(pattern));
    test_sequential();
    test_permutation();
    test_shuffle();
    test_same_stream_at_every_b();
    test_same_stream_for_every_cut();
    test_state();
    test_bad_state();
    test_bad_shards();
    test_many_shards();
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) { printf("warning: could not remove %s\n", tmpdir); }
    return test_summary("test_dataloader");
}
