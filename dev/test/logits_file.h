// The token and logits files of the export tests (dev/test/test_export_hf.py, dev/test/export_gpu_test.py), read
// and written by build/model_logits (CPU reference) and build/model_logits_gpu (the trainer's forward pass):
//   tokens: int32 B, int32 T, then int32 tokens[B*T]
//   logits: float32 logits[B*T*V] (the real vocab columns only)
#ifndef DEV_TEST_LOGITS_FILE_H
#define DEV_TEST_LOGITS_FILE_H

#include "llmc/utils.h"

// reads the token file: *B, *T and B*T tokens (fresh memory); dies on a bad shape or size
static inline int* logits_file_read_tokens(const char* path, int* B, int* T) {
    FILE* fp = fopen_check(path, "rb");
    long size = file_size(fp);
    int32_t bt[2];
    if (size < (long)sizeof(bt)) { die("token file '%s' is %ld bytes, shorter than its B, T header", path, size); }
    fread_check(bt, sizeof(int32_t), 2, fp, "token file header");
    if (bt[0] <= 0 || bt[1] <= 0 || size != (long)sizeof(bt) + (long)bt[0] * bt[1] * (long)sizeof(int32_t)) {
        die("token file '%s': B=%d T=%d does not match its %ld bytes", path, bt[0], bt[1], size);
    }
    *B = bt[0]; *T = bt[1];
    int* tokens = (int*)malloc_check((size_t)bt[0] * bt[1] * sizeof(int));
    fread_check(tokens, sizeof(int), (size_t)bt[0] * bt[1], fp, "tokens");
    fclose_check(fp);
    return tokens;
}

// writes rows of Vp logits as rows of their first V columns
static inline void logits_file_write(const char* path, const float* logits, size_t rows, int V, int Vp) {
    FILE* fp = fopen_check(path, "wb");
    for (size_t r = 0; r < rows; r++) { fwrite_check(logits + r * Vp, sizeof(float), (size_t)V, fp); }
    fclose_check(fp);
}

#endif
