// CPU tests of the host-side pieces of the trainer: checkpoint files (round trip and every kind of bad file:
// checksums per section, bounds, non-finite values), the choice of the newest valid training state and rolling
// deletion, the spike guard, the learning-rate schedule, the sampler, the token grouping of the embedding backward,
// the RNG and GPT-2 init; LLaMA model files; the model FLOPs per token (MFU) and the JSON Lines writer.
#include <sys/stat.h>
#include <sys/resource.h>
#include <signal.h>
#include "llmc/checkpoint.h"
#include "llmc/schedule.h"
#include "llmc/sampler.h"
#include "llmc/token_groups.h"
#include "llmc/model_config.h"
#include "llmc/jsonlog.h"
#include "llmc/spike_guard.h"
#include "dev/test/test_common.h"

static char tmpdir[] = "/tmp/test_host_utils_XXXXXX";

static GPT2Config tiny_config(void) {
    GPT2Config c = {32, 100, 128, 2, 4, 64};
    return c;
}

static const char* open_path;
static int open_any_family;   // 1: checkpoint_open_model (the GPU trainer), 0: checkpoint_open (GPT-2 only)

// opens and reads the whole checkpoint at open_path, as a resume does (run in a child by open_fails_with)
static void open_checkpoint(void) {
    CheckpointHeader ck;
    FILE* fp = open_any_family ? checkpoint_open_model(open_path, &ck) : checkpoint_open(open_path, &ck);
    size_t n = ckpt_num_params(&ck);
    float* p = (float*)malloc_check(3 * n * sizeof(float));
    int with_moments = (ck.contents & CKPT_OPTIMIZER) != 0;
    checkpoint_read_payload(fp, &ck, p, with_moments ? p + n : NULL, with_moments ? p + 2 * n : NULL);
    if (ck.contents & CKPT_ADAHOP) {
        int32_t* words = (int32_t*)malloc_check((size_t)ck.adahop_words * sizeof(int32_t));
        checkpoint_read_adahop(fp, &ck, words);
        free(words);
    }
    if (ck.contents & CKPT_GEMM_ALGOS) {
        int32_t* words = (int32_t*)malloc_check((size_t)ck.gemm_words * sizeof(int32_t) + 1);
        checkpoint_read_gemm_algos(fp, &ck, words);
        free(words);
    }
    free(p);
    fclose(fp);
}

// reads only the parameters of the checkpoint at open_path, as -e FILE does (run in a child)
static void read_params_only(void) {
    CheckpointHeader ck;
    free(checkpoint_load_params(open_path, -1, &ck));
}

// runs checkpoint_open on path in a child; returns 1 if the child exited non-zero with `expect` in stderr
static int open_fails_with(const char* path, const char* expect) {
    open_path = path;
    return child_fails_with(open_checkpoint, expect);
}

static void write_bytes(const char* path, const void* data, size_t n) {
    FILE* fp = fopen_check(path, "wb");
    fwrite_check(data, 1, n, fp);
    fclose_check(fp);
}

// the first `size` bytes of the file at path, in a fresh buffer
static unsigned char* read_bytes(const char* path, size_t size) {
    unsigned char* raw = (unsigned char*)malloc_check(size);
    FILE* fp = fopen_check(path, "rb");
    fread_check(raw, 1, size, fp, "checkpoint");
    fclose_check(fp);
    return raw;
}

// reads the training state at path: its header into *back, params, m and v into q[0 .. 3n), its AdaHOP words and,
// when it has them, its GEMM algorithm words
static void read_state(const char* path, CheckpointHeader* back, float* q, size_t n, int32_t* adahop, int32_t* gemm) {
    FILE* fp = checkpoint_open(path, back);
    checkpoint_read_payload(fp, back, q, q + n, q + 2 * n);
    checkpoint_read_adahop(fp, back, adahop);
    if (back->contents & CKPT_GEMM_ALGOS) { checkpoint_read_gemm_algos(fp, back, gemm); }
    fclose_check(fp);
}

// writes raw (size bytes) to path with header slot `slot` set to value; reseal: the header CRC is recomputed, so
// the checks behind it see the change
static void write_with_slot_crc(const char* path, unsigned char* raw, size_t size, int slot, int32_t value, int reseal) {
    int32_t* h = (int32_t*)raw;
    int32_t saved = h[slot], saved_crc = h[CKPT_CRC_SLOT];
    h[slot] = value;
    if (reseal) { h[CKPT_CRC_SLOT] = (int32_t)ckpt_header_crc(h); }
    write_bytes(path, raw, size);
    h[slot] = saved;
    h[CKPT_CRC_SLOT] = saved_crc;
}

// writes raw with a header slot changed and the header CRC recomputed
static void write_with_slot(const char* path, unsigned char* raw, size_t size, int slot, int32_t value) {
    write_with_slot_crc(path, raw, size, slot, value, 1);
}

// writes raw with the byte at `at` xor-ed with `mask`
static void write_flipped(const char* path, unsigned char* raw, size_t size, size_t at, unsigned char mask) {
    raw[at] ^= mask;
    write_bytes(path, raw, size);
    raw[at] ^= mask;
}

// the file at path (size bytes) truncated by a word, or with a bit of its last section (named `section`) flipped, is
// refused, also by a params-only reader; returns its bytes. `bad`: where the corrupt copies go
static unsigned char* check_last_section(const char* path, const char* bad, size_t size, const char* section) {
    unsigned char* raw = read_bytes(path, size);
    char expect[128];
    snprintf(expect, sizeof(expect), "section '%s' fails", section);
    write_bytes(bad, raw, size - 4);
    CHECK(open_fails_with(bad, "truncated or corrupt"), "a truncated %s is refused", section);
    write_flipped(bad, raw, size, size - 3, 0x04);
    CHECK(open_fails_with(bad, expect), "a flipped bit of the %s is refused", section);
    open_path = bad;
    CHECK(child_fails_with(read_params_only, expect), "a params-only reader verifies the %s it skips", section);
    return raw;
}

// writes raw with float `index` of the payload set to value and the CRC of its section (slot) recomputed over
// [start, start + len) bytes of raw
static void write_float_resealed(const char* path, unsigned char* raw, size_t size, size_t index, float value, int slot,
                                 size_t start, size_t len) {
    float saved;
    unsigned char* at = raw + 1024 + index * sizeof(float);
    int32_t* h = (int32_t*)raw;
    int32_t saved_sec = h[slot], saved_crc = h[CKPT_CRC_SLOT];
    memcpy(&saved, at, sizeof(float));
    memcpy(at, &value, sizeof(float));
    h[slot] = (int32_t)crc32_update(0, raw + start, len);
    h[CKPT_CRC_SLOT] = (int32_t)ckpt_header_crc(h);
    write_bytes(path, raw, size);
    memcpy(at, &saved, sizeof(float));
    h[slot] = saved_sec;
    h[CKPT_CRC_SLOT] = saved_crc;
}

static void test_checkpoint(void) {
    GPT2Config c = tiny_config();
    size_t n = gpt2_num_params(&c);
    float* p = (float*)malloc_check(3 * n * sizeof(float));
    gpt2_init_params(&c, p, 42);
    for (size_t i = 0; i < 2 * n; i++) { p[n + i] = (float)i * 0.5f; }
    CheckpointHeader ck;
    memset(&ck, 0, sizeof(ck));
    ck.config = c; ck.contents = CKPT_PARAMS | CKPT_OPTIMIZER; ck.step = INT32_MAX - 5; ck.seed = -7; ck.total_batch = 3LL << 33;
    for (int i = 0; i < DATALOADER_STATE_LEN; i++) { ck.data_state[i] = (int64_t)i * -1000000007LL; }
    for (int i = 0; i < 4; i++) { ck.rng_state[i] = 0xF0F0F0F0F0F0F0F0ULL >> i; }
    char path[256];
    snprintf(path, sizeof(path), "%s/state.bin", tmpdir);
    checkpoint_write(path, &ck, p, p + n, p + 2 * n);
    char tmp_path[300];
    snprintf(tmp_path, sizeof(tmp_path), "%s.tmp", path);
    CHECK(access(tmp_path, F_OK) != 0, "temporary file left behind after an atomic write");

    CheckpointHeader back;
    FILE* fp = checkpoint_open(path, &back);
    float* q = (float*)malloc_check(3 * n * sizeof(float));
    checkpoint_read_payload(fp, &back, q, q + n, q + 2 * n);
    fclose_check(fp);
    CHECK(memcmp(&back.config, &c, sizeof(c)) == 0, "config round trip");
    CHECK(back.step == ck.step && back.seed == ck.seed, "step/seed round trip: %lld %lld", (long long)back.step, (long long)back.seed);
    CHECK(back.total_batch == ck.total_batch, "total batch round trip: %lld", (long long)back.total_batch);
    CHECK(memcmp(back.data_state, ck.data_state, sizeof(ck.data_state)) == 0, "data state round trip");
    CHECK(memcmp(back.rng_state, ck.rng_state, sizeof(ck.rng_state)) == 0, "rng state round trip");
    CHECK(memcmp(p, q, 3 * n * sizeof(float)) == 0, "payload round trip bit for bit");

    // corrupt variants of the same file
    size_t size = 1024 + 3 * n * sizeof(float);
    unsigned char* raw = read_bytes(path, size);
    char bad[256];
    snprintf(bad, sizeof(bad), "%s/bad.bin", tmpdir);
    int32_t* h = (int32_t*)raw;
    int32_t saved;

    saved = h[0]; h[0] = 12345; write_bytes(bad, raw, size); h[0] = saved;
    CHECK(open_fails_with(bad, "not a checkpoint"), "bad magic is refused");
    saved = h[1]; h[1] = 99; write_bytes(bad, raw, size); h[1] = saved;
    CHECK(open_fails_with(bad, "version 99"), "bad version is refused");
    write_with_slot(bad, raw, size, 1, 1);
    CHECK(open_fails_with(bad, "version 1; this build reads version 2"), "a version 1 file (no checksums) is refused");
    write_bytes(bad, raw, size - 4);
    CHECK(open_fails_with(bad, "truncated or corrupt"), "truncated payload is refused");
    write_bytes(bad, raw, 100);
    CHECK(open_fails_with(bad, "shorter than its"), "truncated header is refused");
    write_with_slot_crc(bad, raw, size, 10, 11, 0);
    CHECK(open_fails_with(bad, "section 'header' fails its CRC-32"), "a changed step without its header CRC is refused");
    write_with_slot_crc(bad, raw, size, 40, 5, 0);
    CHECK(open_fails_with(bad, "section 'header'"), "a changed data loader state is refused");
    write_with_slot(bad, raw, size, 9, 65);
    CHECK(open_fails_with(bad, "invalid model shape"), "channels not divisible by heads is refused");
    write_with_slot(bad, raw, size, 9, 1 << 30);
    CHECK(open_fails_with(bad, "out of bounds"), "channels 2^30 is refused before any size is computed");
    write_with_slot(bad, raw, 1024, 9, 1 << 30);
    CHECK(open_fails_with(bad, "out of bounds"), "a 1 KiB file claiming channels 2^30 is refused");
    write_with_slot(bad, raw, size, 7, 1 << 30);
    CHECK(open_fails_with(bad, "out of bounds"), "layers 2^30 is refused");
    write_with_slot(bad, raw, size, 7, 3);
    CHECK(open_fails_with(bad, "parameters"), "shape/parameter-count mismatch is refused");
    write_with_slot(bad, raw, size, 3, 1);
    CHECK(open_fails_with(bad, "family"), "unknown model family is refused");
    write_with_slot(bad, raw, size, 11, -1);
    CHECK(open_fails_with(bad, "invalid step"), "a negative step is refused");
    CHECK(open_fails_with("/nonexistent/ckpt.bin", "cannot open"), "missing file is refused");
    CHECK(open_fails_with(tmpdir, "not a regular file"), "a directory is refused, named");
    size_t params_at = 1024, moments_at = 1024 + n * sizeof(float);
    write_flipped(bad, raw, size, params_at + 4 * 17 + 1, 0x10);
    CHECK(open_fails_with(bad, "section 'parameters' fails its CRC-32"), "a flipped parameter bit is refused");
    write_flipped(bad, raw, size, moments_at + 4 * n + 3, 0x01);
    CHECK(open_fails_with(bad, "section 'optimizer state' fails"), "a flipped bit of v is refused");
    write_float_resealed(bad, raw, size, 5, NAN, CKPT_CRC_SLOT + CKPT_SEC_PARAMS, params_at, n * sizeof(float));
    CHECK(open_fails_with(bad, "non-finite"), "a NaN parameter with a matching CRC is refused");
    write_float_resealed(bad, raw, size, n + 3, INFINITY, CKPT_CRC_SLOT + CKPT_SEC_OPTIMIZER, moments_at, 2 * n * sizeof(float));
    CHECK(open_fails_with(bad, "non-finite"), "an infinite moment with a matching CRC is refused");
    write_float_resealed(bad, raw, size, 2 * n + 7, -1.0f, CKPT_CRC_SLOT + CKPT_SEC_OPTIMIZER, moments_at, 2 * n * sizeof(float));
    CHECK(open_fails_with(bad, "negative second-moment"), "a negative AdamW v with a matching CRC is refused (it would train into NaN)");
    write_float_resealed(bad, raw, size, n + 7, -1.0f, CKPT_CRC_SLOT + CKPT_SEC_OPTIMIZER, moments_at, 2 * n * sizeof(float));
    CHECK(!open_fails_with(bad, ""), "a negative AdamW m is a valid state");
    char err[CKPT_ERR_LEN];
    CheckpointHeader checked;
    write_flipped(bad, raw, size, moments_at + 8, 0x80);
    CHECK(checkpoint_check(bad, -1, &checked, err) != 0 && strstr(err, "optimizer state"), "checkpoint_check names the section: %s", err);
    write_bytes(bad, raw, size);
    CHECK(!open_fails_with(bad, ""), "the intact copy opens");
    CHECK(checkpoint_check(bad, -1, &checked, err) == 0, "checkpoint_check accepts the intact copy");
    free(raw);

    // with AdaHOP state after m and v
    int32_t words[5] = {7, -1, 0x12345678, 0, 42}, back_words[5] = {0};
    ck.contents = CKPT_PARAMS | CKPT_OPTIMIZER | CKPT_ADAHOP;
    ck.adahop_words = 5;
    snprintf(path, sizeof(path), "%s/state_adahop.bin", tmpdir);
    checkpoint_write_state(path, &ck, p, p + n, p + 2 * n, words, NULL);
    read_state(path, &back, q, n, back_words, NULL);
    CHECK(back.adahop_words == 5 && memcmp(words, back_words, sizeof(words)) == 0, "AdaHOP words round trip");
    free(check_last_section(path, bad, 1024 + 3 * n * sizeof(float) + 5 * sizeof(int32_t), "AdaHOP state"));

    // with the GEMM algorithm table after the AdaHOP words
    int32_t gemm[3] = {-5, 0x7fffffff, 9}, back_gemm[3] = {0};
    ck.contents = CKPT_PARAMS | CKPT_OPTIMIZER | CKPT_ADAHOP | CKPT_GEMM_ALGOS;
    ck.gemm_words = 3;
    snprintf(path, sizeof(path), "%s/state_gemm.bin", tmpdir);
    checkpoint_write_state(path, &ck, p, p + n, p + 2 * n, words, gemm);
    memset(back_words, 0, sizeof(back_words));
    read_state(path, &back, q, n, back_words, back_gemm);
    CHECK(back.gemm_words == 3 && memcmp(gemm, back_gemm, sizeof(gemm)) == 0 && memcmp(words, back_words, sizeof(words)) == 0,
          "GEMM algorithm words round trip after the AdaHOP words");
    size = 1024 + 3 * n * sizeof(float) + 8 * sizeof(int32_t);
    raw = check_last_section(path, bad, size, "GEMM algorithms");
    write_with_slot(bad, raw, size, 2, CKPT_PARAMS | CKPT_GEMM_ALGOS);
    CHECK(open_fails_with(bad, "unknown contents flags"), "GEMM algorithms without the optimizer and AdaHOP state are refused");
    write_with_slot(bad, raw, size, 22, CKPT_MAX_GEMM_WORDS + 1);
    CHECK(open_fails_with(bad, "invalid GEMM algorithm table size"), "an oversized GEMM algorithm table is refused");
    ck.contents = CKPT_PARAMS | CKPT_OPTIMIZER | CKPT_ADAHOP | CKPT_GEMM_ALGOS;
    ck.gemm_words = 0;
    snprintf(path, sizeof(path), "%s/state_gemm_empty.bin", tmpdir);
    checkpoint_write_state(path, &ck, p, p + n, p + 2 * n, words, NULL);
    read_state(path, &back, q, n, back_words, NULL);
    CHECK((back.contents & CKPT_GEMM_ALGOS) && back.gemm_words == 0, "an empty GEMM algorithm table round trips");
    free(raw); free(p); free(q);
}

// a LLaMA model file: round trip of the family and shape through checkpoint_open_model, refused by the GPT-2-only
// checkpoint_open; an unknown family, a corrupt NKV and LLaMA fields in a GPT-2 header are refused

static CheckpointHeader write_header;
static const float* write_payload;
static char write_target[300];

// writes the training state write_payload (params, m, v) to write_target (run in a child)
static void write_guarded_state(void) {
    size_t n = ckpt_num_params(&write_header);
    checkpoint_write(write_target, &write_header, write_payload, write_payload + n, write_payload + 2 * n);
}

// the same, with files limited to 4 KiB: every write past it fails with EFBIG, as on a full disk
static void write_state_disk_full(void) {
    struct rlimit limit = {4096, 4096};
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &limit);
    write_guarded_state();
}

// opens the checkpoint at open_path with a deadline: a FIFO must be refused, not waited on
static void open_checkpoint_with_deadline(void) {
    alarm(20);
    open_checkpoint();
}

// 1 when path names no file
static int missing(const char* path) { return access(path, F_OK) != 0; }

// a state that would not load is never written (NaN/Inf weights or moments, negative v), a write that fails leaves
// no temporary file behind, and an earlier checkpoint of the same name survives both; a FIFO is refused at once
static void test_checkpoint_write_guards(void) {
    GPT2Config c = tiny_config();
    size_t n = gpt2_num_params(&c);
    float* p = (float*)malloc_check(3 * n * sizeof(float));
    gpt2_init_params(&c, p, 7);
    for (size_t i = 0; i < 2 * n; i++) { p[n + i] = 0.25f; }
    memset(&write_header, 0, sizeof(write_header));
    write_header.config = c; write_header.contents = CKPT_PARAMS | CKPT_OPTIMIZER; write_header.step = 12;
    write_payload = p;
    snprintf(write_target, sizeof(write_target), "%s/guarded.bin", tmpdir);
    char tmp[320];
    snprintf(tmp, sizeof(tmp), "%s.tmp", write_target);
    CHECK(!child_fails_with(write_guarded_state, "") && !missing(write_target), "a finite state is written");
    char err[CKPT_ERR_LEN];
    CheckpointHeader ck;
    const size_t bad_at[4] = {3, n - 1, n + 5, 2 * n + 9};
    const float bad_value[4] = {NAN, INFINITY, -INFINITY, -0.5f};
    const char* what[4] = {"a NaN parameter", "an infinite parameter", "an infinite m", "a negative v"};
    for (int k = 0; k < 4; k++) {
        float saved = p[bad_at[k]];
        p[bad_at[k]] = bad_value[k];
        write_header.step = 13;
        CHECK(child_fails_with(write_guarded_state, "the state diverged"), "%s is not written", what[k]);
        p[bad_at[k]] = saved;
        CHECK(missing(tmp) && checkpoint_check(write_target, -1, &ck, err) == 0 && ck.step == 12,
              "after %s the earlier checkpoint is intact (step %lld) and no temporary file is left", what[k], (long long)ck.step);
    }
    write_header.step = 14;
    CHECK(child_fails_with(write_state_disk_full, "cannot write checkpoint"), "a write on a full disk stops the run");
    CHECK(missing(tmp), "a write that failed removes its temporary file (the disk would stay full)");
    CHECK(checkpoint_check(write_target, -1, &ck, err) == 0 && ck.step == 12, "the earlier checkpoint survives a failed write");
    char fifo[300];
    snprintf(fifo, sizeof(fifo), "%s/fifo.bin", tmpdir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    open_path = fifo;
    CHECK(child_fails_with(open_checkpoint_with_deadline, "not a regular file"), "a FIFO as checkpoint is refused at once");
    CHECK(checkpoint_check(fifo, -1, &ck, err) != 0 && strstr(err, "not a regular file"), "checkpoint_check refuses a FIFO: %s", err);
    remove(fifo);
    free(p);
}
static void test_checkpoint_llama(void) {
    LlamaConfig c = {32, 100, 128, 2, 4, 2, 64, 192};
    ModelConfig mc = model_from_llama(&c);
    size_t n = llama_num_params(&c), size = 1024 + n * sizeof(float);
    float* p = (float*)malloc_check(n * sizeof(float));
    float* q = (float*)malloc_check(n * sizeof(float));
    llama_init_params(&c, p, 42);
    CheckpointHeader ck, back;
    memset(&ck, 0, sizeof(ck));
    checkpoint_set_model(&ck, &mc);
    ck.contents = CKPT_PARAMS;
    char path[256], bad[256];
    snprintf(path, sizeof(path), "%s/llama.bin", tmpdir);
    snprintf(bad, sizeof(bad), "%s/llama_bad.bin", tmpdir);
    checkpoint_write(path, &ck, p, NULL, NULL);
    FILE* fp = checkpoint_open_model(path, &back);
    checkpoint_read_payload(fp, &back, q, NULL, NULL);
    fclose_check(fp);
    ModelConfig got = checkpoint_model(&back);
    CHECK(back.family == FAMILY_LLAMA && memcmp(&got, &mc, sizeof(mc)) == 0, "LLaMA family and shape round trip");
    CHECK(memcmp(p, q, n * sizeof(float)) == 0, "LLaMA parameters round trip bit for bit");
    CHECK(model_num_params(&got) == n, "LLaMA parameter count");
    open_any_family = 0;
    CHECK(open_fails_with(path, "reads family 0"), "checkpoint_open (GPT-2 only) refuses a LLaMA file");
    open_any_family = 1;
    unsigned char* raw = read_bytes(path, size);
    write_with_slot(bad, raw, size, 3, 7);
    CHECK(open_fails_with(bad, "model family 7"), "unknown model family is refused");
    write_with_slot(bad, raw, size, 18, 3);
    CHECK(open_fails_with(bad, "num_kv_heads"), "NKV not dividing NH is refused");
    write_with_slot(bad, raw, size, 19, 0);
    CHECK(open_fails_with(bad, "invalid model shape"), "hidden 0 is refused");
    write_with_slot(bad, raw, size, 3, 0);
    CHECK(open_fails_with(bad, "corrupt"), "a GPT-2 header with LLaMA fields is refused");
    write_bytes(bad, raw, size);
    CHECK(!open_fails_with(bad, ""), "the intact LLaMA copy opens");
    open_any_family = 0;
    free(raw); free(p); free(q);
}

// writes a valid training state of step `step` as dir/state_<step>.bin, or under `name` when it is not NULL
static void write_state(const char* dir, const char* name, int64_t step) {
    GPT2Config c = tiny_config();
    size_t n = gpt2_num_params(&c);
    float* p = (float*)calloc_check(3 * n, sizeof(float));
    CheckpointHeader ck;
    memset(&ck, 0, sizeof(ck));
    ck.config = c; ck.contents = CKPT_PARAMS | CKPT_OPTIMIZER; ck.step = step;
    char path[400];
    if (name) { snprintf(path, sizeof(path), "%s/%s", dir, name); }
    else { checkpoint_state_path(path, sizeof(path), dir, step); }
    checkpoint_write(path, &ck, p, p + n, p + 2 * n);
    free(p);
}

// names of training states: only the trainers' own "state_%08d.bin" counts
static void test_state_names(void) {
    CHECK(checkpoint_name_step("state_00000010.bin") == 10, "state_00000010.bin is step 10");
    CHECK(checkpoint_name_step("state_123456789.bin") == 123456789, "9-digit steps count");
    CHECK(checkpoint_name_step("state_999.bin") == -1, "state_999.bin (not 8 digits) does not count");
    CHECK(checkpoint_name_step("state_000000999.bin") == -1, "an extra leading zero does not count");
    CHECK(checkpoint_name_step("state_00000010.bin.tmp") == -1, "a .tmp does not count");
    CHECK(checkpoint_name_step("state_-0000010.bin") == -1 && checkpoint_name_step("state_+0000010.bin") == -1, "signs do not count");
    CHECK(checkpoint_name_step("state_99999999999.bin") == -1, "steps beyond int32 do not count");
    CHECK(checkpoint_name_step("state_0000001x.bin") == -1, "non-digits do not count");
}

static char resume_dir[400];

// checkpoint_find_resume for a LLaMA run in resume_dir (run in a child)
static void resume_llama(void) {
    char found[500];
    checkpoint_find_resume(resume_dir, FAMILY_LLAMA, found, sizeof(found));
}

static void test_find_valid(void) {
    char dir[300], path[400], found[400];
    snprintf(dir, sizeof(dir), "%s/ckpts", tmpdir);
    CHECK(checkpoint_find_valid(dir, -1, found, sizeof(found)) == -1, "missing directory: no checkpoint");
    if (mkdir(dir, 0755) != 0) { die("mkdir %s failed", dir); }
    CHECK(checkpoint_find_valid(dir, -1, found, sizeof(found)) == -1, "empty directory: no checkpoint");
    write_state(dir, NULL, 10);
    write_state(dir, NULL, 20);
    const char* junk[] = {"state_00000030.bin.tmp", "state_x0000040.bin", "main.log", "state_00000025.bak", "state_999.bin"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, junk[i]);
        write_bytes(path, "x", 1);
    }
    checkpoint_state_path(path, sizeof(path), dir, 20);
    CHECK(checkpoint_find_valid(dir, -1, found, sizeof(found)) == 0 && strcmp(found, path) == 0,
          "newest valid state is step 20 (.tmp, state_999.bin and other names are ignored), got %s", found);
    checkpoint_state_path(path, sizeof(path), dir, 30);
    write_bytes(path, "truncated", 9);
    write_state(dir, "state_00000040.bin", 39);   // its header disagrees with its name
    checkpoint_state_path(path, sizeof(path), dir, 50);
    if (mkdir(path, 0755) != 0) { die("mkdir %s failed", path); }
    checkpoint_state_path(path, sizeof(path), dir, 20);
    CHECK(checkpoint_find_valid(dir, -1, found, sizeof(found)) == 0 && strcmp(found, path) == 0,
          "falls back past a directory, a wrong step and a truncated file to step 20, got %s", found);
    CHECK(checkpoint_find_valid(dir, FAMILY_LLAMA, found, sizeof(found)) == -1, "no state of another family is taken");
    snprintf(resume_dir, sizeof(resume_dir), "%s", dir);
    CHECK(child_fails_with(resume_llama, "none of the 5 training states"), "-y 1 with states but none valid stops");
    CHECK(checkpoint_find_resume(dir, FAMILY_GPT2, found, sizeof(found)) == 0, "-y 1 takes the newest valid one");
    snprintf(resume_dir, sizeof(resume_dir), "%s/empty", tmpdir);
    CHECK(checkpoint_find_resume(resume_dir, -1, found, sizeof(found)) == -1, "-y 1 in a folder without states starts afresh");
    // rolling: keep the newest 2 up to the new step; later steps are left alone
    write_state(dir, NULL, 25);
    checkpoint_state_path(path, sizeof(path), dir, 25);
    checkpoint_prune(dir, path, 25, 2);
    int64_t* steps;
    int n = checkpoint_list(dir, &steps);
    CHECK(n == 5 && steps[0] == 50 && steps[1] == 40 && steps[2] == 30 && steps[3] == 25 && steps[4] == 20,
          "prune keeps 25 and 20, deletes 10 and leaves the later 30, 40, 50 (%d left)", n);
    free(steps);
    checkpoint_state_path(path, sizeof(path), dir, 25);
    write_bytes(path, "corrupt", 7);
    checkpoint_prune(dir, path, 25, 1);
    n = checkpoint_list(dir, &steps);
    CHECK(n == 5, "nothing is deleted when the newest state does not verify (%d left)", n);
    free(steps);
    write_state(dir, NULL, 25);
    checkpoint_prune(dir, path, 25, 0);
    n = checkpoint_list(dir, &steps);
    CHECK(n == 5, "keep 0 keeps all (%d left)", n);
    free(steps);
}

static int32_t corrupt_guard_words[SPIKE_GUARD_WORDS];

// loads corrupt_guard_words (run in a child)
static void load_corrupt_guard(void) {
    SpikeGuard g;
    spike_guard_init(&g, 1.0f, 1.0f);
    spike_guard_load(&g, corrupt_guard_words, "ckpt.bin");
}

// spike skipping: z-scores against a full window, thresholds, every value entering its window, and the windows'
// round trip through checkpoint words (the same decisions after a reload)
static void test_spike_guard(void) {
    SpikeGuard g, off;
    spike_guard_init(&g, 2.5f, 0.0f);
    spike_guard_init(&off, 0.0f, 0.0f);
    CHECK(spike_guard_on(&g) && !spike_guard_on(&off), "-L alone turns the guard on, 0 and 0 leave it off");
    int early = 0;
    for (int i = 0; i < SPIKE_WINDOW; i++) { early += spike_guard_skip(&g, i + 1, (i % 2) ? 3.0f : 1.0f, 1.0f, NULL, NULL); }
    CHECK(early == 0, "no skip while the window fills (%d)", early);
    // the window holds 1, 3, 1, 3, ...: mean 2, std 1, so a loss of 5 has z = 3
    CHECK(fabs(spike_window_z(&g.loss, 5.0f) - 3.0) < 1e-6, "z of 5 over {1, 3}: %f", spike_window_z(&g.loss, 5.0f));
    SpikeGuard copy;
    int32_t words[SPIKE_GUARD_WORDS];
    spike_guard_save(&g, words);
    spike_guard_init(&copy, 2.5f, 0.0f);
    spike_guard_load(&copy, words, "test");
    CHECK(spike_guard_skip(&g, 65, 5.0f, 1.0f, NULL, NULL) == 1, "a loss z-score 3 > 2.5 is skipped");
    CHECK(spike_guard_skip(&copy, 65, 5.0f, 1.0f, NULL, NULL) == 1, "the reloaded guard decides the same");
    CHECK(memcmp(&g, &copy, sizeof(g)) == 0, "the skipped value entered both windows alike");
    SpikeGuard loose;
    spike_guard_init(&loose, 3.5f, 0.0f);
    spike_guard_load(&loose, words, "test");
    CHECK(spike_guard_skip(&loose, 65, 5.0f, 1.0f, NULL, NULL) == 0, "z 3 < 3.5 is not skipped");
    CHECK(spike_guard_skip(&g, 66, 2.0f, 1.0f, NULL, NULL) == 0, "an ordinary loss is not skipped");
    SpikeGuard norm_only;
    spike_guard_init(&norm_only, 0.0f, 2.0f);
    for (int i = 0; i < SPIKE_WINDOW; i++) { spike_guard_skip(&norm_only, i + 1, 1.0f, (i % 2) ? 1.5f : 0.5f, NULL, NULL); }
    CHECK(spike_guard_skip(&norm_only, 65, 100.0f, 2.5f, NULL, NULL) == 1, "a grad norm z-score 3 > 2 is skipped (-Z)");
    CHECK(spike_guard_skip(&norm_only, 66, 100.0f, 1.0f, NULL, NULL) == 0, "the loss is not judged with -L 0");
    memcpy(corrupt_guard_words, words, sizeof(words));
    corrupt_guard_words[1] = SPIKE_WINDOW;
    CHECK(child_fails_with(load_corrupt_guard, "ckpt.bin: spike guard window 0"), "a window position out of range is refused");
    memcpy(corrupt_guard_words, words, sizeof(words));
    float nan = NAN;
    memcpy(corrupt_guard_words + SPIKE_WINDOW_WORDS + 5, &nan, sizeof(nan));
    CHECK(child_fails_with(load_corrupt_guard, "non-finite"), "a NaN in a window is refused");
}

static void test_schedule(void) {
    float peak = 1e-3f;
    CHECK(fabsf(lr_schedule(0, 100, 10, peak, 0.1f) - peak / 10) < 1e-9f, "first warmup step is peak/warmup");
    CHECK(fabsf(lr_schedule(9, 100, 10, peak, 0.1f) - peak) < 1e-9f, "warmup ends at the peak");
    CHECK(fabsf(lr_schedule(10, 100, 10, peak, 0.1f) - peak) < 1e-9f, "decay starts at the peak");
    CHECK(fabsf(lr_schedule(100, 100, 10, peak, 0.1f) - 0.1f * peak) < 1e-9f, "decay ends at final fraction");
    CHECK(fabsf(lr_schedule(55, 100, 10, peak, 0.0f) - 0.5f * peak) < 1e-7f, "cosine midpoint is half");
    int monotone = 1;
    for (int s = 11; s <= 100; s++) { monotone &= lr_schedule(s, 100, 10, peak, 0.1f) <= lr_schedule(s - 1, 100, 10, peak, 0.1f); }
    CHECK(monotone, "decay is monotone");
}

static void test_sampler(void) {
    float logits[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    CHECK(sample_softmax(logits, 4, 1.0f, 0.0f) == 0, "coin 0 -> first");
    CHECK(sample_softmax(logits, 4, 1.0f, 0.30f) == 1, "coin 0.30 of uniform 4 -> index 1");
    CHECK(sample_softmax(logits, 4, 1.0f, 0.999999f) == 3, "coin near 1 -> last");
    float peaked[3] = {-1000.0f, 50.0f, -1000.0f};
    CHECK(sample_softmax(peaked, 3, 1.0f, 0.01f) == 1 && sample_softmax(peaked, 3, 1.0f, 0.99f) == 1, "a dominant logit always wins");
    // frequencies follow the softmax
    float l2[2] = {0.0f, logf(3.0f)};
    Rng r;
    rng_seed(&r, 5);
    int ones = 0;
    for (int i = 0; i < 40000; i++) { ones += sample_softmax(l2, 2, 1.0f, rng_uniform(&r)); }
    CHECK(fabs(ones / 40000.0 - 0.75) < 0.01, "empirical p(1) = %.4f, expected 0.75", ones / 40000.0);
}

static void test_token_groups(void) {
    int V = 50, BT = 500;
    int* inp = (int*)malloc_check(BT * sizeof(int));
    int *counts = (int*)malloc_check(V * sizeof(int)), *tokens = (int*)malloc_check(BT * sizeof(int));
    int *offsets = (int*)malloc_check((BT + 1) * sizeof(int)), *pos = (int*)malloc_check(BT * sizeof(int));
    Rng r;
    rng_seed(&r, 11);
    for (int i = 0; i < BT; i++) { inp[i] = (int)rng_below(&r, 37) * (i % 3 == 0 ? 1 : 0) + (i % 7); }
    int u = encoder_group_positions(inp, BT, V, counts, tokens, offsets, pos);
    int ok = offsets[0] == 0 && offsets[u] == BT;
    int* seen = (int*)calloc_check(BT, sizeof(int));
    for (int k = 0; k < u; k++) {
        ok &= k == 0 || tokens[k] > tokens[k - 1];
        for (int p = offsets[k]; p < offsets[k + 1]; p++) {
            ok &= inp[pos[p]] == tokens[k];
            ok &= p == offsets[k] || pos[p] > pos[p - 1];
            seen[pos[p]]++;
        }
    }
    for (int i = 0; i < BT; i++) { ok &= seen[i] == 1; }
    CHECK(ok, "grouping is a stable partition of the positions by increasing token");
    free(inp); free(counts); free(tokens); free(offsets); free(pos); free(seen);
}

static void test_rng_and_init(void) {
    Rng a, b;
    rng_seed(&a, 1); rng_seed(&b, 1);
    int same = 1;
    for (int i = 0; i < 100; i++) { same &= rng_u64(&a) == rng_u64(&b); }
    CHECK(same, "same seed, same stream");
    double s = 0, s2 = 0;
    int n = 200000;
    for (int i = 0; i < n; i++) { double x = rng_normal(&a); s += x; s2 += x * x; }
    CHECK(fabs(s / n) < 0.01 && fabs(s2 / n - 1.0) < 0.01, "normal draws: mean %.4f var %.4f", s / n, s2 / n);
    GPT2Config c = tiny_config();
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(&c, sizes);
    float* p = (float*)malloc_check(gpt2_num_params(&c) * sizeof(float));
    gpt2_init_params(&c, p, 3);
    float* t = p;
    int ok = 1;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        double ss = 0;
        for (size_t i = 0; i < sizes[k]; i++) { ss += (double)t[i] * t[i]; }
        double rms = sqrt(ss / sizes[k]);
        if (k == P_LN1W || k == P_LN2W || k == P_LNFW) { ok &= fabs(rms - 1.0) < 1e-9; }
        else if (k == P_WTE) { ok &= t[(size_t)c.vocab_size * c.channels] == 0.0f && t[sizes[k] - 1] == 0.0f; }
        else if (k == P_ATTPROJW || k == P_FCPROJW) { ok &= fabs(rms - 0.01) < 0.002; }   // 0.02 / sqrt(2L), L = 2
        else if (gpt2_param_decays(k)) { ok &= fabs(rms - 0.02) < 0.002; }
        else { ok &= rms == 0.0; }
        t += sizes[k];
    }
    CHECK(ok, "GPT-2 init: unit norms, zero biases and padded rows, std 0.02 and 0.02/sqrt(2L)");
    free(p);
}

// model_flops_per_token against a count of every weight matrix by hand, for a tiny model of each family
static void test_flops(void) {
    int T = 32;
    ModelConfig g = {FAMILY_GPT2, 32, 100, 128, 2, 4, 4, 64, 256};   // L=2 C=64 NH=4 V=100
    double gpt2_layer = 192 * 64 + 64 * 64 + 256 * 64 + 64 * 256;    // qkv, attention projection, fc, fc projection
    double gpt2_matmul = 2 * gpt2_layer + 100 * 64;                  // + the LM head over the real vocabulary
    CHECK(model_matmul_params(&g) == gpt2_matmul, "GPT-2 matmul weights %.0f, by hand %.0f", model_matmul_params(&g), gpt2_matmul);
    double attention = 2 * 3 * (2 * T * 64 + 2 * T * 64);   // 2 layers x 3 (forward, backward) x (QK^T + AV)
    CHECK(model_flops_per_token(&g, T) == 6 * gpt2_matmul + attention, "GPT-2 FLOPs per token %.0f, by hand %.0f",
          model_flops_per_token(&g, T), 6 * gpt2_matmul + attention);
    ModelConfig l = {FAMILY_LLAMA, 32, 100, 128, 2, 4, 2, 64, 96};   // L=2 C=64 NH=4 NKV=2 (head 16) H=96
    double llama_layer = (4 + 2 + 2) * 16 * 64 + 64 * 64 + 2 * 96 * 64 + 64 * 96;   // q+k+v, o, gate/up, down
    double llama_matmul = 2 * llama_layer + 100 * 64;
    CHECK(model_matmul_params(&l) == llama_matmul, "LLaMA matmul weights %.0f, by hand %.0f", model_matmul_params(&l), llama_matmul);
    CHECK(model_flops_per_token(&l, T) == 6 * llama_matmul + attention, "LLaMA FLOPs per token %.0f, by hand %.0f",
          model_flops_per_token(&l, T), 6 * llama_matmul + attention);
    CHECK(model_flops_per_token(&g, 2 * T) - model_flops_per_token(&g, T) == attention, "only attention grows with T");
}

// the text of every field kind, escaping, null for non-finite numbers, a line longer than the first buffer
static void test_jsonl(void) {
    char path[512];
    snprintf(path, sizeof(path), "%s/events.jsonl", tmpdir);
    FILE* fp = fopen_check(path, "w");
    JsonLine j;
    jsonl_begin(&j, "step");
    jsonl_int(&j, "step", 10);
    jsonl_number(&j, "loss", 3.25);
    jsonl_number(&j, "bad", NAN);
    jsonl_string(&j, "name", "a\"b\\c\nd\001");
    const char* items[2] = {"x", "y z"};
    jsonl_string_list(&j, "changes", items, 2);
    jsonl_string_list(&j, "none", items, 0);
    jsonl_int(&j, "k\"ey", 1);
    jsonl_end(&j, fp);
    char long_value[5001];
    memset(long_value, 'v', 5000);
    long_value[5000] = '\0';
    jsonl_begin(&j, "long");
    jsonl_string(&j, "value", long_value);
    jsonl_end(&j, fp);
    jsonl_begin(&j, "unwritten");
    jsonl_end(&j, NULL);
    fclose_check(fp);
    fp = fopen_check(path, "r");
    char line[8192];
    const char* want = "{\"event\":\"step\",\"step\":10,\"loss\":3.25,\"bad\":null,\"name\":\"a\\\"b\\\\c\\nd\\u0001\","
                       "\"changes\":[\"x\",\"y z\"],\"none\":[],\"k\\\"ey\":1}\n";
    CHECK(fgets(line, sizeof(line), fp) && strcmp(line, want) == 0, "jsonl fields: got %s", line);
    CHECK(fgets(line, sizeof(line), fp) && strlen(line) == strlen("{\"event\":\"long\",\"value\":\"\"}\n") + 5000 &&
          strstr(line, long_value) != NULL, "jsonl long line: %zu bytes", strlen(line));
    CHECK(fgets(line, sizeof(line), fp) == NULL, "jsonl: a line ended without a file writes nothing");
    fclose_check(fp);
}

int main(void) {
    if (mkdtemp(tmpdir) == NULL) { die("mkdtemp failed"); }
    test_checkpoint();
    test_checkpoint_write_guards();
    test_checkpoint_llama();
    test_state_names();
    test_find_valid();
    test_spike_guard();
    test_schedule();
    test_sampler();
    test_token_groups();
    test_rng_and_init();
    test_flops();
    test_jsonl();
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0) { printf("warning: could not remove %s\n", tmpdir); }
    return test_summary("test_host_utils");
}
