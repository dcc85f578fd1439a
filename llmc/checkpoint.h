// Model and training-state files. One format for both: a 1 KiB header of int32 slots, then FP32
// parameters (the tensor order of the model's family: llmc/gpt2_config.h, llmc/llama_config.h), then, for a training state, AdamW m and v.
// Files are written to PATH.tmp, flushed, fsync'ed and renamed, so a crash never leaves half a file.
//
// Header slots (int32, little endian; int64 values take two slots, low word first):
//   0 magic 20261202      1 version 1           2 contents: 1 = params, 3 = params + optimizer state,
//                                               7 = params + optimizer state + AdaHOP state
//   3 model family (0 = GPT-2, 1 = LLaMA)       4 max_seq_len  5 vocab_size  6 padded_vocab_size
//   7 num_layers  8 num_heads  9 channels      10-11 step (optimizer steps done)
//  12-13 number of parameters (checked against the shape)   14-15 seed the run was started with
//  16-17 number of int32 words of AdaHOP state (llmc/adahop.h), stored after m and v
//  18 num_kv_heads  19 hidden (LLaMA only; zero for GPT-2, so GPT-2 files are those of earlier builds)
//  20-21 total batch in tokens of the run that wrote a training state (0: not recorded)
//  32-63  data loader state, 16 int64 (llmc/dataloader.h)    64-71 host RNG state, 4 uint64
//  72-255 reserved, zero
#ifndef LLMC_CHECKPOINT_H
#define LLMC_CHECKPOINT_H

#include <stdint.h>
#include <unistd.h>
#include <dirent.h>
#include "utils.h"
#include "gpt2_config.h"
#include "llama_config.h"
#include "model_config.h"
#include "dataloader.h"

#define CKPT_MAGIC 20261202
#define CKPT_VERSION 1
#define CKPT_HEADER_INTS 256
#define CKPT_PARAMS 1
#define CKPT_OPTIMIZER 2
#define CKPT_ADAHOP 4
#define CKPT_DATA_STATE_LEN DATALOADER_STATE_LEN

typedef struct {
    int family;                   // FAMILY_GPT2 or FAMILY_LLAMA (llmc/model_config.h): which shape below is set
    GPT2Config config;
    LlamaConfig llama;
    int contents;                 // CKPT_PARAMS, or CKPT_PARAMS | CKPT_OPTIMIZER
    int64_t step;
    int64_t seed;
    int64_t adahop_words;         // with CKPT_ADAHOP: int32 words of AdaHOP state after m and v
    int64_t total_batch;          // tokens per optimizer step of the run (0: not recorded)
    int64_t data_state[CKPT_DATA_STATE_LEN];
    uint64_t rng_state[4];
} CheckpointHeader;

static inline void ckpt_put64(int32_t* h, int slot, int64_t v) {
    uint64_t u = (uint64_t)v;
    h[slot] = (int32_t)(uint32_t)(u & 0xffffffffu);
    h[slot + 1] = (int32_t)(uint32_t)(u >> 32);
}
static inline int64_t ckpt_get64(const int32_t* h, int slot) {
    return (int64_t)(((uint64_t)(uint32_t)h[slot + 1] << 32) | (uint64_t)(uint32_t)h[slot]);
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

// payload bytes after the header
static inline size_t ckpt_payload_bytes(const CheckpointHeader* ck) {
    size_t n = ckpt_num_params(ck);
    size_t floats = (ck->contents & CKPT_OPTIMIZER) ? 3 * n : n;
    return floats * sizeof(float) + ((ck->contents & CKPT_ADAHOP) ? (size_t)ck->adahop_words * sizeof(int32_t) : 0);
}

// writes header + params (+ m, v when contents has CKPT_OPTIMIZER) (+ the AdaHOP words with CKPT_ADAHOP) atomically
static inline void checkpoint_write_with_adahop(const char* path, const CheckpointHeader* ck, const float* params,
                                                const float* m, const float* v, const int32_t* adahop) {
    int32_t h[CKPT_HEADER_INTS];
    memset(h, 0, sizeof(h));
    h[0] = CKPT_MAGIC; h[1] = CKPT_VERSION; h[2] = ck->contents; h[3] = ck->family;
    ModelConfig c = checkpoint_model(ck);
    h[4] = c.max_seq_len; h[5] = c.vocab_size; h[6] = c.padded_vocab_size;
    h[7] = c.num_layers; h[8] = c.num_heads; h[9] = c.channels;
    if (c.family == FAMILY_LLAMA) { h[18] = c.num_kv_heads; h[19] = c.hidden; }
    size_t n = ckpt_num_params(ck);
    ckpt_put64(h, 10, ck->step);
    ckpt_put64(h, 12, (int64_t)n);
    ckpt_put64(h, 14, ck->seed);
    ckpt_put64(h, 16, (ck->contents & CKPT_ADAHOP) ? ck->adahop_words : 0);
    ckpt_put64(h, 20, ck->total_batch);
    for (int i = 0; i < CKPT_DATA_STATE_LEN; i++) { ckpt_put64(h, 32 + 2 * i, ck->data_state[i]); }
    for (int i = 0; i < 4; i++) { ckpt_put64(h, 64 + 2 * i, (int64_t)ck->rng_state[i]); }

    size_t len = strlen(path);
    char* tmp = (char*)malloc_check(len + 5);
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);
    FILE* fp = fopen_check(tmp, "wb");
    fwrite_check(h, sizeof(int32_t), CKPT_HEADER_INTS, fp);
    fwrite_check(params, sizeof(float), n, fp);
    if (ck->contents & CKPT_OPTIMIZER) {
        fwrite_check(m, sizeof(float), n, fp);
        fwrite_check(v, sizeof(float), n, fp);
    }
    if (ck->contents & CKPT_ADAHOP) {
        if (adahop == NULL) { die("checkpoint_write_with_adahop: contents say AdaHOP state but none was given"); }
        fwrite_check(adahop, sizeof(int32_t), (size_t)ck->adahop_words, fp);
    }
    if (fflush(fp) != 0 || fsync(fileno(fp)) != 0) { die("cannot flush checkpoint '%s': %s", tmp, strerror(errno)); }
    fclose_check(fp);
    if (rename(tmp, path) != 0) { die("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno)); }
    free(tmp);
}

static inline void checkpoint_write(const char* path, const CheckpointHeader* ck, const float* params, const float* m,
                                    const float* v) {
    if (ck->contents & CKPT_ADAHOP) { die("checkpoint_write: AdaHOP state needs checkpoint_write_with_adahop"); }
    checkpoint_write_with_adahop(path, ck, params, m, v, NULL);
}

// the model shape of header h into ck (family, and config or llama); dies on an unknown family, a family other
// than want (unless want is -1) or an invalid shape
static inline void ckpt_read_shape(const char* path, const int32_t* h, int want, CheckpointHeader* ck) {
    ModelConfig c = {h[3], h[4], h[5], h[6], h[7], h[8], h[18], h[9], h[19]};
    if (c.family != FAMILY_LLAMA && c.family != FAMILY_GPT2) {
        die("checkpoint '%s': model family %d is not supported by this build (0 = GPT-2, 1 = LLaMA)", path, c.family);
    }
    if (want >= 0 && c.family != want) {
        die("checkpoint '%s' is of model family %d (%s); this program reads family %d (%s) only", path, c.family,
            family_names[c.family], want, family_names[want]);
    }
    if (c.family == FAMILY_GPT2 && (h[18] != 0 || h[19] != 0)) {
        die("checkpoint '%s': a GPT-2 header with LLaMA fields (slots 18, 19: %d, %d): corrupt", path, h[18], h[19]);
    }
    if (c.family == FAMILY_GPT2) { c.num_kv_heads = c.num_heads; c.hidden = 4 * c.channels; }
    const char* problem = model_config_problem(&c);
    if (problem) { die("checkpoint '%s' has an invalid model shape: %s", path, problem); }
    checkpoint_set_model(ck, &c);
}

// opens a checkpoint of model family `want` (-1: either), validates its header and size, fills *ck; returns the
// file positioned at the params. Any inconsistency is a clear error and exit(1).
static inline FILE* ckpt_open_family(const char* path, int want, CheckpointHeader* ck) {
    FILE* fp = fopen_check(path, "rb");
    int32_t h[CKPT_HEADER_INTS];
    long size = file_size(fp);
    if (size < (long)sizeof(h)) { die("checkpoint '%s' is %ld bytes, shorter than its %zu-byte header", path, size, sizeof(h)); }
    fread_check(h, sizeof(int32_t), CKPT_HEADER_INTS, fp, "checkpoint header");
    if (h[0] != CKPT_MAGIC) { die("'%s' is not a checkpoint of this engine (magic %d, expected %d)", path, h[0], CKPT_MAGIC); }
    if (h[1] != CKPT_VERSION) { die("checkpoint '%s' has version %d; this build reads version %d", path, h[1], CKPT_VERSION); }
    if (h[2] != CKPT_PARAMS && h[2] != (CKPT_PARAMS | CKPT_OPTIMIZER) && h[2] != (CKPT_PARAMS | CKPT_OPTIMIZER | CKPT_ADAHOP)) {
        die("checkpoint '%s': unknown contents flags %d", path, h[2]);
    }
    memset(ck, 0, sizeof(*ck));
    ck->contents = h[2];
    ckpt_read_shape(path, h, want, ck);
    ck->step = ckpt_get64(h, 10);
    ck->seed = ckpt_get64(h, 14);
    ck->adahop_words = ckpt_get64(h, 16);
    ck->total_batch = ckpt_get64(h, 20);
    if (ck->total_batch < 0) { die("checkpoint '%s': invalid total batch %lld", path, (long long)ck->total_batch); }
    if (ck->adahop_words < 0 || ck->adahop_words > (1 << 28)) { die("checkpoint '%s': invalid AdaHOP state size %lld", path, (long long)ck->adahop_words); }
    int64_t nparams = ckpt_get64(h, 12);
    if (nparams != (int64_t)ckpt_num_params(ck)) {
        die("checkpoint '%s' says %lld parameters, its shape implies %zu", path, (long long)nparams, ckpt_num_params(ck));
    }
    for (int i = 0; i < CKPT_DATA_STATE_LEN; i++) { ck->data_state[i] = ckpt_get64(h, 32 + 2 * i); }
    for (int i = 0; i < 4; i++) { ck->rng_state[i] = (uint64_t)ckpt_get64(h, 64 + 2 * i); }
    long expected = (long)sizeof(h) + (long)ckpt_payload_bytes(ck);
    if (size != expected) { die("checkpoint '%s' is %ld bytes, its header implies %ld (truncated or corrupt)", path, size, expected); }
    return fp;
}

// opens a checkpoint of either family (the GPU trainer)
static inline FILE* checkpoint_open_model(const char* path, CheckpointHeader* ck) { return ckpt_open_family(path, -1, ck); }

// opens a GPT-2 checkpoint (the CPU programs); a file of another family is a clear error
static inline FILE* checkpoint_open(const char* path, CheckpointHeader* ck) { return ckpt_open_family(path, FAMILY_GPT2, ck); }

// reads the payload after checkpoint_open; m and v may be NULL when not wanted
static inline void checkpoint_read_payload(FILE* fp, const CheckpointHeader* ck, float* params, float* m, float* v) {
    size_t n = ckpt_num_params(ck);
    fread_check(params, sizeof(float), n, fp, "checkpoint parameters");
    if ((ck->contents & CKPT_OPTIMIZER) && (m || v)) {
        if (!m || !v) { die("checkpoint_read_payload: need both m and v"); }
        fread_check(m, sizeof(float), n, fp, "checkpoint AdamW m");
        fread_check(v, sizeof(float), n, fp, "checkpoint AdamW v");
    }
}

// reads the AdaHOP words that follow m and v (after checkpoint_read_payload read params, m and v)
static inline void checkpoint_read_adahop(FILE* fp, const CheckpointHeader* ck, int32_t* words) {
    if (!(ck->contents & CKPT_ADAHOP)) { die("checkpoint has no AdaHOP state"); }
    fread_check(words, sizeof(int32_t), (size_t)ck->adahop_words, fp, "checkpoint AdaHOP state");
}

// path of the newest training state "state_<step>.bin" (step digits only, nothing after ".bin": a left-over
// "state_<step>.bin.tmp" of an interrupted write does not count) in dir; returns 0, or -1 if there is none
static inline int checkpoint_find_latest(const char* dir, char* path, size_t path_len) {
    DIR* d = opendir(dir);
    if (!d) { return -1; }
    long best = -1;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        const char* name = e->d_name;
        size_t len = strlen(name);
        if (len < 11 || strncmp(name, "state_", 6) != 0 || strcmp(name + len - 4, ".bin") != 0) { continue; }
        long step = 0;
        int digits = 1;
        for (size_t i = 6; i < len - 4; i++) {
            if (name[i] < '0' || name[i] > '9') { digits = 0; break; }
            step = step * 10 + (name[i] - '0');
        }
        if (digits && step > best) { best = step; }
    }
    closedir(d);
    if (best < 0) { return -1; }
    snprintf(path, path_len, "%s/state_%08ld.bin", dir, best);
    return 0;
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
