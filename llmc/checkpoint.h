// Model and training-state files. One format for both: a 1 KiB header of int32 slots, then FP32
// parameters (the tensor order of the model's family: llmc/gpt2_config.h, llmc/llama_config.h), then, for a training
// state, AdamW m and v, then the AdaHOP state, then the GEMM algorithm table (which cuBLASLt algorithm each GEMM shape
// runs, llmc/matmul.cuh: a resumed run computes with the same ones). Every section carries a CRC-32 (llmc/crc32.h)
// that is verified on load, and parameters and moments must be finite (the second moments also >= 0), when loaded
// and before they are written: a corrupt file is refused with an error naming the file and the section, and a
// diverged state is never written. Files are written to PATH.tmp, flushed, fsync'ed and renamed, so a crash never
// leaves half a file; a write that fails (a full disk) removes PATH.tmp before it stops the run.
//
// Header slots (int32, little endian; int64 values take two slots, low word first):
//   0 magic 20261202      1 version 2           2 contents: 1 = params, 3 = params + optimizer state,
//                                               7 = params + optimizer state + AdaHOP state,
//                                               15 = the same + the GEMM algorithm table
//   3 model family (0 = GPT-2, 1 = LLaMA)       4 max_seq_len  5 vocab_size  6 padded_vocab_size
//   7 num_layers  8 num_heads  9 channels      10-11 step (optimizer steps done)
//  12-13 number of parameters (checked against the shape)   14-15 seed the run was started with
//  16-17 number of int32 words of AdaHOP state (llmc/adahop.h), stored after m and v
//  18 num_kv_heads  19 hidden (LLaMA only; zero for GPT-2)
//  20-21 total batch in tokens of the run that wrote a training state (0: not recorded)
//  22-23 number of int32 words of the GEMM algorithm table, stored last (zero without it)
//  24 CRC-32 of this header with slot 24 zero     25 CRC-32 of the parameters
//  26 CRC-32 of m then v (zero without them)      27 CRC-32 of the AdaHOP words (zero without them)
//  28 CRC-32 of the GEMM algorithm words (zero without them)
//  32-63  data loader state, 16 int64 (llmc/dataloader.h)    64-71 host RNG state, 4 uint64
//  72-231 trainer words: state a trainer keeps across a resume (its spike guard, llmc/spike_guard.h)
//  29-31, 232-255 reserved, zero
// Version 1 files (the same layout without the checksums) are refused: re-export them from their source.
//
// Training states of a run live in its output directory as state_<step, 8 digits>.bin; checkpoint_find_valid picks
// the newest one that passes every check, checkpoint_prune keeps the newest K.
#ifndef LLMC_CHECKPOINT_H
#define LLMC_CHECKPOINT_H

#include <stdarg.h>
#include <stdint.h>
#include <math.h>
#include <fcntl.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>
#include "utils.h"
#include "crc32.h"
#include "gpt2_config.h"
#include "llama_config.h"
#include "model_config.h"
#include "dataloader.h"

#define CKPT_MAGIC 20261202
#define CKPT_VERSION 2
#define CKPT_HEADER_INTS 256
#define CKPT_PARAMS 1
#define CKPT_OPTIMIZER 2
#define CKPT_ADAHOP 4
#define CKPT_GEMM_ALGOS 8
#define CKPT_DATA_STATE_LEN DATALOADER_STATE_LEN
#define CKPT_TRAINER_SLOT 72
#define CKPT_TRAINER_WORDS 160
#define CKPT_MAX_ADAHOP_WORDS (1 << 28)
#define CKPT_MAX_GEMM_WORDS (1 << 20)
#define CKPT_ERR_LEN 1024

// the checksummed sections, in file order; slot 24 + s holds the CRC of section s
enum { CKPT_SEC_HEADER, CKPT_SEC_PARAMS, CKPT_SEC_OPTIMIZER, CKPT_SEC_ADAHOP, CKPT_SEC_GEMM_ALGOS, CKPT_SECTIONS };
#define CKPT_CRC_SLOT 24
static const char* const ckpt_section_names[CKPT_SECTIONS] = {"header", "parameters", "optimizer state", "AdaHOP state",
                                                               "GEMM algorithms"};

typedef struct {
    int family;                   // FAMILY_GPT2 or FAMILY_LLAMA (llmc/model_config.h): which shape below is set
    GPT2Config config;
    LlamaConfig llama;
    int contents;                 // CKPT_PARAMS, or CKPT_PARAMS | CKPT_OPTIMIZER (| CKPT_ADAHOP (| CKPT_GEMM_ALGOS))
    int64_t step;
    int64_t seed;
    int64_t adahop_words;         // with CKPT_ADAHOP: int32 words of AdaHOP state after m and v
    int64_t gemm_words;           // with CKPT_GEMM_ALGOS: int32 words of the GEMM algorithm table after the AdaHOP state
    int64_t total_batch;          // tokens per optimizer step of the run (0: not recorded)
    int64_t data_state[CKPT_DATA_STATE_LEN];
    uint64_t rng_state[4];
    int32_t trainer_words[CKPT_TRAINER_WORDS];
    // set when read: the file (errors name it) and the stored CRC of each section
    const char* path;
    uint32_t crc[CKPT_SECTIONS];
} CheckpointHeader;

static inline void ckpt_put64(int32_t* h, int slot, int64_t v) {
    uint64_t u = (uint64_t)v;
    h[slot] = (int32_t)(uint32_t)(u & 0xffffffffu);
    h[slot + 1] = (int32_t)(uint32_t)(u >> 32);
}
static inline int64_t ckpt_get64(const int32_t* h, int slot) {
    return (int64_t)(((uint64_t)(uint32_t)h[slot + 1] << 32) | (uint64_t)(uint32_t)h[slot]);
}

// formats an error into err[CKPT_ERR_LEN]; returns -1 (the failure value of the checking functions below)
static inline int ckpt_fail(char* err, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, CKPT_ERR_LEN, fmt, ap);
    va_end(ap);
    return -1;
}

// the model of a header, as the trainer's flat shape
static inline ModelConfig checkpoint_model(const CheckpointHeader* ck) {
    return ck->family == FAMILY_LLAMA ? model_from_llama(&ck->llama) : model_from_gpt2(&ck->config);
}

// sets the family and shape of a header from the trainer's flat shape
static inline void checkpoint_set_model(CheckpointHeader* ck, const ModelConfig* c) {
    ck->family = c->family;
    ck->config = model_gpt2(c);
    ck->llama = model_llama(c);
}

// parameters of the header's model
static inline size_t ckpt_num_params(const CheckpointHeader* ck) {
    ModelConfig c = checkpoint_model(ck);
    return model_num_params(&c);
}

// bytes of each section after the header (zero for a section the contents do not have)
static inline void ckpt_section_bytes(const CheckpointHeader* ck, size_t bytes[CKPT_SECTIONS]) {
    size_t n = ckpt_num_params(ck);
    bytes[CKPT_SEC_HEADER] = CKPT_HEADER_INTS * sizeof(int32_t);
    bytes[CKPT_SEC_PARAMS] = n * sizeof(float);
    bytes[CKPT_SEC_OPTIMIZER] = (ck->contents & CKPT_OPTIMIZER) ? 2 * n * sizeof(float) : 0;
    bytes[CKPT_SEC_ADAHOP] = (ck->contents & CKPT_ADAHOP) ? (size_t)ck->adahop_words * sizeof(int32_t) : 0;
    bytes[CKPT_SEC_GEMM_ALGOS] = (ck->contents & CKPT_GEMM_ALGOS) ? (size_t)ck->gemm_words * sizeof(int32_t) : 0;
}

// the CRC of the header words h with slot CKPT_CRC_SLOT counted as zero
static inline uint32_t ckpt_header_crc(const int32_t* h) {
    int32_t copy[CKPT_HEADER_INTS];
    memcpy(copy, h, sizeof(copy));
    copy[CKPT_CRC_SLOT] = 0;
    return crc32_update(0, copy, sizeof(copy));
}

// fsyncs the directory that holds path, so a rename into it survives a crash
static inline void ckpt_sync_dir(const char* path) {
    const char* slash = strrchr(path, '/');
    char dir[4096];
    if (slash == NULL) { snprintf(dir, sizeof(dir), "."); }
    else { snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path == 0 ? 1 : slash - path), path); }
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) { fsync(fd); close(fd); }   // best effort: some file systems refuse fsync on a directory
}

// the header words of ck with the section CRCs crc[1..3] and the header's own CRC
static inline void ckpt_fill_header(int32_t* h, const CheckpointHeader* ck, const uint32_t crc[CKPT_SECTIONS]) {
    memset(h, 0, CKPT_HEADER_INTS * sizeof(int32_t));
    h[0] = CKPT_MAGIC; h[1] = CKPT_VERSION; h[2] = ck->contents; h[3] = ck->family;
    ModelConfig c = checkpoint_model(ck);
    h[4] = c.max_seq_len; h[5] = c.vocab_size; h[6] = c.padded_vocab_size;
    h[7] = c.num_layers; h[8] = c.num_heads; h[9] = c.channels;
    if (c.family == FAMILY_LLAMA) { h[18] = c.num_kv_heads; h[19] = c.hidden; }
    ckpt_put64(h, 10, ck->step);
    ckpt_put64(h, 12, (int64_t)ckpt_num_params(ck));
    ckpt_put64(h, 14, ck->seed);
    ckpt_put64(h, 16, (ck->contents & CKPT_ADAHOP) ? ck->adahop_words : 0);
    ckpt_put64(h, 20, ck->total_batch);
    ckpt_put64(h, 22, (ck->contents & CKPT_GEMM_ALGOS) ? ck->gemm_words : 0);
    for (int i = 0; i < CKPT_DATA_STATE_LEN; i++) { ckpt_put64(h, 32 + 2 * i, ck->data_state[i]); }
    for (int i = 0; i < 4; i++) { ckpt_put64(h, 64 + 2 * i, (int64_t)ck->rng_state[i]); }
    memcpy(h + CKPT_TRAINER_SLOT, ck->trainer_words, sizeof(ck->trainer_words));
    for (int s = CKPT_SEC_PARAMS; s < CKPT_SECTIONS; s++) { h[CKPT_CRC_SLOT + s] = (int32_t)crc[s]; }
    h[CKPT_CRC_SLOT] = (int32_t)ckpt_header_crc(h);
}

// what the floats of a span must be: nothing (not floats), finite (parameters, AdamW m), finite and >= 0 (AdamW v,
// whose square root divides the update: a negative one turns the weights into NaN)
enum { CKPT_ANY, CKPT_FINITE, CKPT_FINITE_NONNEG };

// the index of the first float of f[0..n) that breaks `rule`, or n
static inline size_t ckpt_first_bad_value(const float* f, size_t n, int rule) {
    if (rule == CKPT_ANY) { return n; }
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(f[i]) || (rule == CKPT_FINITE_NONNEG && f[i] < 0.0f)) { return i; }
    }
    return n;
}

// the rule of span `part` of section sec (the optimizer state is m then v)
static inline int ckpt_value_rule(int sec, int part) {
    if (sec == CKPT_SEC_PARAMS) { return CKPT_FINITE; }
    if (sec == CKPT_SEC_OPTIMIZER) { return part == 0 ? CKPT_FINITE : CKPT_FINITE_NONNEG; }
    return CKPT_ANY;
}

// writes header + params (+ m, v when contents has CKPT_OPTIMIZER) (+ the AdaHOP words with CKPT_ADAHOP) (+ the GEMM
// algorithm words with CKPT_GEMM_ALGOS) atomically
static inline void checkpoint_write_state(const char* path, const CheckpointHeader* ck, const float* params, const float* m,
                                          const float* v, const int32_t* adahop, const int32_t* gemm) {
    if ((ck->contents & CKPT_ADAHOP) && adahop == NULL) { die("checkpoint_write_state: contents say AdaHOP state but none was given"); }
    if ((ck->contents & CKPT_GEMM_ALGOS) && gemm == NULL && ck->gemm_words > 0) {
        die("checkpoint_write_state: contents say GEMM algorithms but none were given");
    }
    size_t bytes[CKPT_SECTIONS];
    ckpt_section_bytes(ck, bytes);
    uint32_t crc[CKPT_SECTIONS] = {0};
    crc[CKPT_SEC_PARAMS] = crc32_update(0, params, bytes[CKPT_SEC_PARAMS]);
    if (ck->contents & CKPT_OPTIMIZER) {
        crc[CKPT_SEC_OPTIMIZER] = crc32_update(crc32_update(0, m, bytes[CKPT_SEC_PARAMS]), v, bytes[CKPT_SEC_PARAMS]);
    }
    if (ck->contents & CKPT_ADAHOP) { crc[CKPT_SEC_ADAHOP] = crc32_update(0, adahop, bytes[CKPT_SEC_ADAHOP]); }
    if (gemm != NULL && bytes[CKPT_SEC_GEMM_ALGOS] > 0) { crc[CKPT_SEC_GEMM_ALGOS] = crc32_update(0, gemm, bytes[CKPT_SEC_GEMM_ALGOS]); }
    int32_t h[CKPT_HEADER_INTS];
    ckpt_fill_header(h, ck, crc);

    size_t n = bytes[CKPT_SEC_PARAMS] / sizeof(float);
    const float* spans[3] = {params, m, v};
    const int sections[3] = {CKPT_SEC_PARAMS, CKPT_SEC_OPTIMIZER, CKPT_SEC_OPTIMIZER};
    for (int i = 0; i < ((ck->contents & CKPT_OPTIMIZER) ? 3 : 1); i++) {
        size_t bad = ckpt_first_bad_value(spans[i], n, ckpt_value_rule(sections[i], i == 2));
        if (bad < n) {
            die("not writing checkpoint '%s' of step %lld: %s %zu is %g (the state diverged); the older checkpoints stay",
                path, (long long)ck->step, i == 0 ? "parameter" : i == 1 ? "AdamW m" : "AdamW v", bad, (double)spans[i][bad]);
        }
    }
    const void* data[6] = {h, params, m, v, adahop, gemm};
    size_t sizes[6] = {sizeof(h), bytes[CKPT_SEC_PARAMS], bytes[CKPT_SEC_OPTIMIZER] / 2, bytes[CKPT_SEC_OPTIMIZER] / 2,
                       bytes[CKPT_SEC_ADAHOP], gemm != NULL ? bytes[CKPT_SEC_GEMM_ALGOS] : 0};
    char tmp[4200];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) { die("checkpoint path '%s' is too long", path); }
    FILE* fp = fopen_regular(tmp, "wb");
    if (fp == NULL) { die("cannot write checkpoint '%s': %s", tmp, fopen_regular_error(errno)); }
    int ok = 1;
    for (int i = 0; i < 6 && ok; i++) { ok = sizes[i] == 0 || fwrite(data[i], 1, sizes[i], fp) == sizes[i]; }
    ok = ok && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    int saved_errno = errno;
    if (fclose(fp) != 0 && ok) { ok = 0; saved_errno = errno; }
    if (!ok) {
        remove(tmp);   // a full disk stays full otherwise, and the next run could not even probe the directory
        die("cannot write checkpoint '%s': %s (the older checkpoints stay)", tmp, strerror(saved_errno));
    }
    if (rename(tmp, path) != 0) { saved_errno = errno; remove(tmp); die("cannot rename '%s' into place: %s", tmp, strerror(saved_errno)); }
    ckpt_sync_dir(path);
}

static inline void checkpoint_write(const char* path, const CheckpointHeader* ck, const float* params, const float* m,
                                    const float* v) {
    if (ck->contents & (CKPT_ADAHOP | CKPT_GEMM_ALGOS)) { die("checkpoint_write: AdaHOP state and GEMM algorithms need checkpoint_write_state"); }
    checkpoint_write_state(path, ck, params, m, v, NULL, NULL);
}

// the model shape of header h into ck (family, and config or llama); fails on an unknown family, a family other
// than want (unless want is -1) or an invalid shape (dimensions bounded before any size is computed)
static inline int ckpt_read_shape(const char* path, const int32_t* h, int want, CheckpointHeader* ck, char* err) {
    ModelConfig c = {h[3], h[4], h[5], h[6], h[7], h[8], h[18], h[9], h[19]};
    if (c.family != FAMILY_LLAMA && c.family != FAMILY_GPT2) {
        return ckpt_fail(err, "checkpoint '%s': model family %d is not supported by this build (0 = GPT-2, 1 = LLaMA)", path, c.family);
    }
    if (want >= 0 && c.family != want) {
        return ckpt_fail(err, "checkpoint '%s' is of model family %d (%s); this program reads family %d (%s) only", path,
                         c.family, family_names[c.family], want, family_names[want]);
    }
    if (c.family == FAMILY_GPT2 && (h[18] != 0 || h[19] != 0)) {
        return ckpt_fail(err, "checkpoint '%s': a GPT-2 header with LLaMA fields (slots 18, 19: %d, %d): corrupt", path, h[18], h[19]);
    }
    const char* problem = NULL;
    if (c.family == FAMILY_GPT2) {
        GPT2Config g = model_gpt2(&c);
        problem = gpt2_config_problem(&g);   // bounds C before hidden = 4C
        c.num_kv_heads = c.num_heads;
        if (!problem) { c.hidden = 4 * c.channels; }
    }
    if (!problem) { problem = model_config_problem(&c); }
    if (problem) { return ckpt_fail(err, "checkpoint '%s' has an invalid model shape: %s", path, problem); }
    checkpoint_set_model(ck, &c);
    return 0;
}

// checks the header words h of the file `path` of `size` bytes and fills *ck; returns 0, or -1 with err set
static inline int ckpt_parse_header(const char* path, const int32_t* h, long size, int want, CheckpointHeader* ck, char* err) {
    if (h[0] != CKPT_MAGIC) { return ckpt_fail(err, "'%s' is not a checkpoint of this engine (magic %d, expected %d)", path, h[0], CKPT_MAGIC); }
    if (h[1] != CKPT_VERSION) {
        return ckpt_fail(err, "checkpoint '%s' has version %d; this build reads version %d only (version 1 had no checksums)",
                         path, h[1], CKPT_VERSION);
    }
    uint32_t crc = ckpt_header_crc(h);
    if ((uint32_t)h[CKPT_CRC_SLOT] != crc) {
        return ckpt_fail(err, "checkpoint '%s': section 'header' fails its CRC-32 check (stored %08x, computed %08x): corrupt",
                         path, (uint32_t)h[CKPT_CRC_SLOT], crc);
    }
    const int state = CKPT_PARAMS | CKPT_OPTIMIZER | CKPT_ADAHOP;
    if (h[2] != CKPT_PARAMS && h[2] != (CKPT_PARAMS | CKPT_OPTIMIZER) && h[2] != state && h[2] != (state | CKPT_GEMM_ALGOS)) {
        return ckpt_fail(err, "checkpoint '%s': unknown contents flags %d", path, h[2]);
    }
    memset(ck, 0, sizeof(*ck));
    ck->path = path;
    ck->contents = h[2];
    if (ckpt_read_shape(path, h, want, ck, err) != 0) { return -1; }
    ck->step = ckpt_get64(h, 10);
    ck->seed = ckpt_get64(h, 14);
    ck->adahop_words = ckpt_get64(h, 16);
    ck->total_batch = ckpt_get64(h, 20);
    ck->gemm_words = ckpt_get64(h, 22);
    if (ck->total_batch < 0) { return ckpt_fail(err, "checkpoint '%s': invalid total batch %lld", path, (long long)ck->total_batch); }
    if (ck->step < 0 || ck->step > INT32_MAX) { return ckpt_fail(err, "checkpoint '%s': invalid step %lld", path, (long long)ck->step); }
    if (ck->adahop_words < 0 || ck->adahop_words > CKPT_MAX_ADAHOP_WORDS || (!(ck->contents & CKPT_ADAHOP) && ck->adahop_words != 0)) {
        return ckpt_fail(err, "checkpoint '%s': invalid AdaHOP state size %lld", path, (long long)ck->adahop_words);
    }
    if (ck->gemm_words < 0 || ck->gemm_words > CKPT_MAX_GEMM_WORDS || (!(ck->contents & CKPT_GEMM_ALGOS) && ck->gemm_words != 0)) {
        return ckpt_fail(err, "checkpoint '%s': invalid GEMM algorithm table size %lld", path, (long long)ck->gemm_words);
    }
    int64_t nparams = ckpt_get64(h, 12);
    if (nparams != (int64_t)ckpt_num_params(ck)) {
        return ckpt_fail(err, "checkpoint '%s' says %lld parameters, its shape implies %zu", path, (long long)nparams, ckpt_num_params(ck));
    }
    for (int i = 0; i < CKPT_DATA_STATE_LEN; i++) { ck->data_state[i] = ckpt_get64(h, 32 + 2 * i); }
    for (int i = 0; i < 4; i++) { ck->rng_state[i] = (uint64_t)ckpt_get64(h, 64 + 2 * i); }
    memcpy(ck->trainer_words, h + CKPT_TRAINER_SLOT, sizeof(ck->trainer_words));
    for (int s = 0; s < CKPT_SECTIONS; s++) { ck->crc[s] = (uint32_t)h[CKPT_CRC_SLOT + s]; }
    size_t bytes[CKPT_SECTIONS];
    ckpt_section_bytes(ck, bytes);
    size_t expected = 0;
    for (int s = 0; s < CKPT_SECTIONS; s++) { expected += bytes[s]; }
    if ((size_t)size != expected) {
        return ckpt_fail(err, "checkpoint '%s' is %ld bytes, its header implies %zu (truncated or corrupt)", path, size, expected);
    }
    return 0;
}

// opens path for reading as a regular file (a directory, FIFO or device is refused) and reads its header into *ck;
// returns the file positioned at the params, or NULL with err set
static inline FILE* ckpt_try_open(const char* path, int want, CheckpointHeader* ck, char* err) {
    FILE* fp = fopen_regular(path, "rb");
    if (fp == NULL) { ckpt_fail(err, "cannot open checkpoint '%s': %s", path, fopen_regular_error(errno)); return NULL; }
    struct stat st;
    int32_t h[CKPT_HEADER_INTS];
    if (fstat(fileno(fp), &st) != 0) {
        ckpt_fail(err, "checkpoint '%s': %s", path, strerror(errno));
    } else if (st.st_size < (off_t)sizeof(h)) {
        ckpt_fail(err, "checkpoint '%s' is %lld bytes, shorter than its %zu-byte header", path, (long long)st.st_size, sizeof(h));
    } else if (fread(h, sizeof(h), 1, fp) != 1) {
        ckpt_fail(err, "checkpoint '%s': cannot read its header: %s", path, strerror(errno));
    } else if (ckpt_parse_header(path, h, (long)st.st_size, want, ck, err) == 0) {
        return fp;
    }
    fclose(fp);
    return NULL;
}

// reads `bytes` bytes of a section into dst (NULL: through a scratch buffer, only checked), extending *crc; every
// float must keep `rule`. Returns 0, or -1 with err set
static inline int ckpt_read_span(FILE* fp, const CheckpointHeader* ck, int sec, void* dst, size_t bytes, int rule,
                                 uint32_t* crc, char* err) {
    const size_t chunk = (size_t)1 << 22;
    unsigned char* scratch = dst ? NULL : (unsigned char*)malloc_check(chunk);
    size_t done = 0;
    int rc = 0;
    while (done < bytes && rc == 0) {
        size_t k = bytes - done < chunk ? bytes - done : chunk;
        unsigned char* at = dst ? (unsigned char*)dst + done : scratch;
        if (fread(at, 1, k, fp) != k) {
            rc = ckpt_fail(err, "checkpoint '%s': section '%s' is truncated", ck->path, ckpt_section_names[sec]);
            break;
        }
        *crc = crc32_update(*crc, at, k);
        const float* f = (const float*)at;
        size_t n = k / sizeof(float), bad = ckpt_first_bad_value(f, n, rule);
        if (bad < n) {
            rc = ckpt_fail(err, "checkpoint '%s': section '%s' holds %s value (%g) at float %zu", ck->path, ckpt_section_names[sec],
                           isfinite(f[bad]) ? "a negative second-moment" : "a non-finite", (double)f[bad], (done / sizeof(float)) + bad);
        }
        done += k;
    }
    free(scratch);
    return rc;
}

// compares a section's computed CRC with the stored one
static inline int ckpt_check_crc(const CheckpointHeader* ck, int sec, uint32_t crc, char* err) {
    if (crc == ck->crc[sec]) { return 0; }
    return ckpt_fail(err, "checkpoint '%s': section '%s' fails its CRC-32 check (stored %08x, computed %08x): corrupt",
                     ck->path, ckpt_section_names[sec], ck->crc[sec], crc);
}

// reads section sec (parameters, optimizer state = m then v, AdaHOP state, GEMM algorithms) into parts[0..nparts) of part_bytes each
// (NULL parts: checked only) and verifies it
static inline int ckpt_read_section(FILE* fp, const CheckpointHeader* ck, int sec, void* const* parts, int nparts,
                                    size_t part_bytes, char* err) {
    uint32_t crc = 0;
    for (int i = 0; i < nparts; i++) {
        if (ckpt_read_span(fp, ck, sec, parts ? parts[i] : NULL, part_bytes, ckpt_value_rule(sec, i), &crc, err) != 0) { return -1; }
    }
    return ckpt_check_crc(ck, sec, crc, err);
}

// verifies every section of the file `path` (model family want, -1 = either); 0 when valid, else -1 with err set
// (err holds CKPT_ERR_LEN bytes). *ck receives the header; its path points to `path`
static inline int checkpoint_check(const char* path, int want, CheckpointHeader* ck, char* err) {
    FILE* fp = ckpt_try_open(path, want, ck, err);
    if (fp == NULL) { return -1; }
    size_t bytes[CKPT_SECTIONS];
    ckpt_section_bytes(ck, bytes);
    int rc = ckpt_read_section(fp, ck, CKPT_SEC_PARAMS, NULL, 1, bytes[CKPT_SEC_PARAMS], err);
    if (rc == 0 && bytes[CKPT_SEC_OPTIMIZER] > 0) { rc = ckpt_read_section(fp, ck, CKPT_SEC_OPTIMIZER, NULL, 2, bytes[CKPT_SEC_PARAMS], err); }
    if (rc == 0 && bytes[CKPT_SEC_ADAHOP] > 0) { rc = ckpt_read_section(fp, ck, CKPT_SEC_ADAHOP, NULL, 1, bytes[CKPT_SEC_ADAHOP], err); }
    if (rc == 0 && bytes[CKPT_SEC_GEMM_ALGOS] > 0) {
        rc = ckpt_read_section(fp, ck, CKPT_SEC_GEMM_ALGOS, NULL, 1, bytes[CKPT_SEC_GEMM_ALGOS], err);
    }
    fclose(fp);
    return rc;
}

// opens a checkpoint of model family `want` (-1: either), validates its header and size, fills *ck; returns the
// file positioned at the params. Any inconsistency is a clear error and exit(1).
static inline FILE* ckpt_open_family(const char* path, int want, CheckpointHeader* ck) {
    char err[CKPT_ERR_LEN];
    FILE* fp = ckpt_try_open(path, want, ck, err);
    if (fp == NULL) { die("%s", err); }
    return fp;
}

// opens a checkpoint of either family (the GPU trainer)
static inline FILE* checkpoint_open_model(const char* path, CheckpointHeader* ck) { return ckpt_open_family(path, -1, ck); }

// opens a GPT-2 checkpoint (the CPU programs); a file of another family is a clear error
static inline FILE* checkpoint_open(const char* path, CheckpointHeader* ck) { return ckpt_open_family(path, FAMILY_GPT2, ck); }

// reads and verifies the payload after checkpoint_open; m and v may be NULL when not wanted (their section, the
// AdaHOP state and the GEMM algorithms are then verified and skipped; with m and v, a file with AdaHOP state continues with
// checkpoint_read_adahop and checkpoint_read_gemm_algos). A corrupt section is a clear error and exit(1)
static inline void checkpoint_read_payload(FILE* fp, const CheckpointHeader* ck, float* params, float* m, float* v) {
    char err[CKPT_ERR_LEN];
    size_t bytes[CKPT_SECTIONS];
    ckpt_section_bytes(ck, bytes);
    void* p[1] = {params};
    if (ckpt_read_section(fp, ck, CKPT_SEC_PARAMS, p, 1, bytes[CKPT_SEC_PARAMS], err) != 0) { die("%s", err); }
    if ((m == NULL) != (v == NULL)) { die("checkpoint_read_payload: need both m and v, or neither"); }
    if (!(ck->contents & CKPT_OPTIMIZER)) { return; }
    void* mv[2] = {m, v};
    if (ckpt_read_section(fp, ck, CKPT_SEC_OPTIMIZER, m ? mv : NULL, 2, bytes[CKPT_SEC_PARAMS], err) != 0) { die("%s", err); }
    if (m != NULL) { return; }
    for (int sec = CKPT_SEC_ADAHOP; sec < CKPT_SECTIONS; sec++) {
        if (bytes[sec] > 0 && ckpt_read_section(fp, ck, sec, NULL, 1, bytes[sec], err) != 0) { die("%s", err); }
    }
}

// the parameters (fresh memory) of the checkpoint at path, of model family `want` (-1: either), its header in *ck;
// the rest of the file is verified and skipped
static inline float* checkpoint_load_params(const char* path, int want, CheckpointHeader* ck) {
    FILE* fp = ckpt_open_family(path, want, ck);
    float* params = (float*)malloc_check(ckpt_num_params(ck) * sizeof(float));
    checkpoint_read_payload(fp, ck, params, NULL, NULL);
    fclose_check(fp);
    return params;
}

// reads and verifies int32 section sec (AdaHOP state or GEMM algorithms, the contents flag `flag`, nwords words) into words
static inline void ckpt_read_words(FILE* fp, const CheckpointHeader* ck, int sec, int flag, int64_t nwords, int32_t* words) {
    if (!(ck->contents & flag)) { die("checkpoint '%s' has no %s", ck->path, ckpt_section_names[sec]); }
    char err[CKPT_ERR_LEN];
    void* p[1] = {words};
    if (ckpt_read_section(fp, ck, sec, p, 1, (size_t)nwords * sizeof(int32_t), err) != 0) { die("%s", err); }
}

// reads and verifies the AdaHOP words that follow m and v (after checkpoint_read_payload read params, m and v)
static inline void checkpoint_read_adahop(FILE* fp, const CheckpointHeader* ck, int32_t* words) {
    ckpt_read_words(fp, ck, CKPT_SEC_ADAHOP, CKPT_ADAHOP, ck->adahop_words, words);
}

// reads and verifies the GEMM algorithm words that follow the AdaHOP words (after checkpoint_read_adahop)
static inline void checkpoint_read_gemm_algos(FILE* fp, const CheckpointHeader* ck, int32_t* words) {
    ckpt_read_words(fp, ck, CKPT_SEC_GEMM_ALGOS, CKPT_GEMM_ALGOS, ck->gemm_words, words);
}

// the step of a training-state file name: "state_" then the step in at least 8 digits, exactly as the trainers
// write it ("%08d": no sign, no extra leading zero), then ".bin"; -1 for any other name (a left-over ".tmp",
// "state_999.bin", "state_00000010.bin.bak")
static inline int64_t checkpoint_name_step(const char* name) {
    size_t len = strlen(name);
    if (len < 18 || len > 20 || strncmp(name, "state_", 6) != 0 || strcmp(name + len - 4, ".bin") != 0) { return -1; }
    int64_t step = 0;
    for (size_t i = 6; i < len - 4; i++) {
        if (name[i] < '0' || name[i] > '9') { return -1; }
        step = step * 10 + (name[i] - '0');
    }
    char canon[32];
    snprintf(canon, sizeof(canon), "state_%08lld.bin", (long long)step);
    return step <= INT32_MAX && strcmp(canon, name) == 0 ? step : -1;
}

static inline int ckpt_cmp_desc(const void* a, const void* b) {
    int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
    return (x < y) - (x > y);
}

// the steps of the training-state files in dir, newest first, into a fresh array *steps; returns their number
// (0 when dir is missing or has none)
static inline int checkpoint_list(const char* dir, int64_t** steps) {
    *steps = NULL;
    DIR* d = opendir(dir);
    if (!d) { return 0; }
    int n = 0, cap = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        int64_t step = checkpoint_name_step(e->d_name);
        if (step < 0) { continue; }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t* grown = (int64_t*)realloc(*steps, (size_t)cap * sizeof(int64_t));
            if (!grown) { die("out of memory listing the checkpoints of '%s'", dir); }
            *steps = grown;
        }
        (*steps)[n++] = step;
    }
    closedir(d);
    if (n > 0) { qsort(*steps, (size_t)n, sizeof(int64_t), ckpt_cmp_desc); }
    return n;
}

static inline void checkpoint_state_path(char* path, size_t len, const char* dir, int64_t step) {
    snprintf(path, len, "%s/state_%08lld.bin", dir, (long long)step);
}

// the newest training state in dir that passes every check (checkpoint_check, family want, the step of its name);
// newer ones that fail are skipped with a warning naming them and why. Returns 0 with path set, or -1 if none
static inline int checkpoint_find_valid(const char* dir, int want, char* path, size_t path_len) {
    int64_t* steps;
    int n = checkpoint_list(dir, &steps);
    int found = -1;
    char err[CKPT_ERR_LEN];
    for (int i = 0; i < n && found < 0; i++) {
        checkpoint_state_path(path, path_len, dir, steps[i]);
        CheckpointHeader ck;
        if (checkpoint_check(path, want, &ck, err) != 0) {
            fprintf(stderr, "warning: skipping checkpoint: %s\n", err);
        } else if (!(ck.contents & CKPT_OPTIMIZER)) {
            fprintf(stderr, "warning: skipping checkpoint '%s': it holds no optimizer state\n", path);
        } else if (ck.step != steps[i]) {
            fprintf(stderr, "warning: skipping checkpoint '%s': its header says step %lld\n", path, (long long)ck.step);
        } else {
            found = 0;
        }
    }
    free(steps);
    return found;
}

// the training state a -y 1 run resumes from: the newest valid one in dir (checkpoint_find_valid); returns 0 with
// path set, or -1 when dir holds no training state at all (a fresh start). Dies when it holds some but none is
// valid, rather than start afresh beside them
static inline int checkpoint_find_resume(const char* dir, int want, char* path, size_t path_len) {
    if (checkpoint_find_valid(dir, want, path, path_len) == 0) { return 0; }
    int64_t* steps;
    int n = checkpoint_list(dir, &steps);
    free(steps);
    if (n > 0) {
        die("resume: none of the %d training states in '%s' is valid (see the warnings above); move them away to start "
            "afresh", n, dir);
    }
    return -1;
}

// rolling checkpoints: after `newest` (the file of step newest_step) was written to dir, keeps it and the keep - 1
// newest states before it and deletes the older ones; keep <= 0 keeps all. Nothing is deleted unless `newest`
// itself passes checkpoint_check, so the only valid state is never removed. Files of later steps (left by a run that
// was resumed from an earlier state) are left alone: this run overwrites them as it reaches their steps
static inline void checkpoint_prune(const char* dir, const char* newest, int64_t newest_step, int keep) {
    if (keep <= 0) { return; }
    char err[CKPT_ERR_LEN];
    CheckpointHeader ck;
    if (checkpoint_check(newest, -1, &ck, err) != 0) {
        fprintf(stderr, "warning: the checkpoint just written does not verify, keeping all older ones: %s\n", err);
        return;
    }
    int64_t* steps;
    int n = checkpoint_list(dir, &steps);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (steps[i] > newest_step) { continue; }
        if (kept++ < keep) { continue; }
        char path[4096];
        checkpoint_state_path(path, sizeof(path), dir, steps[i]);
        if (remove(path) != 0) { fprintf(stderr, "warning: cannot remove old checkpoint '%s': %s\n", path, strerror(errno)); }
    }
    free(steps);
}

// fails unless two configs describe the same model
static inline void checkpoint_require_config(const char* path, const GPT2Config* have, const GPT2Config* want) {
    if (memcmp(have, want, sizeof(GPT2Config)) != 0) {
        die("checkpoint '%s' is for a model L=%d C=%d NH=%d V=%d maxT=%d, but this run wants L=%d C=%d NH=%d V=%d maxT=%d",
            path, have->num_layers, have->channels, have->num_heads, have->vocab_size, have->max_seq_len,
            want->num_layers, want->channels, want->num_heads, want->vocab_size, want->max_seq_len);
    }
}

#endif
