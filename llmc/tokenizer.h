// GPT-2 token decoding from llm.c's tokenizer file (dev/data/make_tokenizer_bin.py writes it):
// int32 header[256] = {20240328 magic, 2 version, vocab size, eot token}, then per token id a uint8
// length and that many bytes. Decoding only: the trainer prints samples with it.
#ifndef LLMC_TOKENIZER_H
#define LLMC_TOKENIZER_H

#include <stdint.h>
#include <ctype.h>
#include "utils.h"

#define TOKENIZER_MAGIC 20240328
#define TOKENIZER_VERSION 2
#define TOKENIZER_HEADER_INTS 256

typedef struct {
    int init_ok;          // 0 when the file was missing or too small a vocabulary: the caller prints token ids
    uint32_t vocab_size;
    int eot_token;
    char* pieces;         // every token's bytes, each followed by '\0'
    char** token_table;   // vocab_size pointers into pieces
} Tokenizer;

static inline void tokenizer_init(Tokenizer* t, const char* path) {
    memset(t, 0, sizeof(*t));
    FILE* fp = fopen_regular(path, "rb");
    if (fp == NULL && errno == ENOENT) {
        fprintf(stderr, "warning: cannot open tokenizer '%s' (%s); tokens will be printed as ids\n", path, strerror(errno));
        return;
    }
    if (fp == NULL) { die("tokenizer '%s': %s", path, fopen_regular_error(errno)); }
    long size = file_size(fp);
    int32_t h[TOKENIZER_HEADER_INTS];
    if (size < (long)sizeof(h)) { die("tokenizer '%s' is %ld bytes, shorter than its %zu-byte header (truncated?)", path, size, sizeof(h)); }
    fread_check(h, sizeof(int32_t), TOKENIZER_HEADER_INTS, fp, "tokenizer header");
    if (h[0] != TOKENIZER_MAGIC) { die("tokenizer '%s': bad magic %d, expected %d (is this a tokenizer file?)", path, h[0], TOKENIZER_MAGIC); }
    if (h[1] != TOKENIZER_VERSION) { die("tokenizer '%s': unsupported version %d, this build reads version %d", path, h[1], TOKENIZER_VERSION); }
    if (h[2] <= 0 || h[3] < 0 || h[3] >= h[2]) { die("tokenizer '%s': bad vocab size %d / eot token %d", path, h[2], h[3]); }
    t->vocab_size = (uint32_t)h[2];
    t->eot_token = h[3];
    // the body is vocab_size (length, bytes) records: exactly as many bytes as the '\0'-terminated strings
    size_t body = (size_t)(size - (long)sizeof(h));
    unsigned char* raw = (unsigned char*)malloc_check(body);
    fread_check(raw, 1, body, fp, "tokenizer body");
    fclose_check(fp);
    t->pieces = (char*)malloc_check(body);
    t->token_table = (char**)malloc_check(t->vocab_size * sizeof(char*));
    size_t at = 0;
    for (uint32_t i = 0; i < t->vocab_size; i++) {
        if (at >= body || at + 1 + raw[at] > body) { die("tokenizer '%s' is truncated: token %u of %u runs past the end", path, i, t->vocab_size); }
        size_t len = raw[at];
        t->token_table[i] = t->pieces + at;
        memcpy(t->pieces + at, raw + at + 1, len);
        t->pieces[at + len] = '\0';
        at += 1 + len;
    }
    if (at != body) { die("tokenizer '%s' has %zu bytes after its %u tokens (corrupt?)", path, body - at, t->vocab_size); }
    free(raw);
    t->init_ok = 1;
}

// drops the tokenizer (init_ok = 0, the caller prints token ids) with a warning when it has fewer tokens than the
// model's vocabulary, so that sampling never stops a run on a token the file cannot decode
static inline void tokenizer_require_vocab(Tokenizer* t, const char* path, int model_vocab) {
    if (!t->init_ok || (int64_t)t->vocab_size >= (int64_t)model_vocab) { return; }
    fprintf(stderr, "warning: tokenizer '%s' has %u tokens, fewer than the model's %d; samples are printed as token ids\n",
            path, t->vocab_size, model_vocab);
    free(t->pieces);
    free(t->token_table);
    memset(t, 0, sizeof(*t));
}

static inline const char* tokenizer_decode(const Tokenizer* t, uint32_t token) {
    if (!t->init_ok) { die("tokenizer_decode: the tokenizer was not loaded"); }
    if (token >= t->vocab_size) { die("tokenizer_decode: token %u is out of range (vocab size %u)", token, t->vocab_size); }
    return t->token_table[token];
}

static inline void tokenizer_free(Tokenizer* t) {
    free(t->pieces);
    free(t->token_table);
    memset(t, 0, sizeof(*t));
}

// prints a decoded piece, skipping control bytes other than whitespace; bytes >= 0x80 (parts of UTF-8
// characters, which GPT-2 tokens may split) pass through so consecutive pieces print the full character
static inline void safe_print_token(const char* piece) {
    if (piece == NULL) { return; }
    for (const unsigned char* p = (const unsigned char*)piece; *p; p++) {
        if (*p >= 0x80 || isprint(*p) || isspace(*p)) { putchar(*p); }
    }
}

#endif
