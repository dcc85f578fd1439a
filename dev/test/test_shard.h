// Token shards for the data tests (the format of llmc/dataloader.h), written into a test's temporary directory.
#ifndef DEV_TEST_SHARD_H
#define DEV_TEST_SHARD_H

#include <stdio.h>
#include "llmc/utils.h"
#include "llmc/dataloader.h"

// writes the shard dir/name with header {magic, version, header_count} and the n tokens first + i
static inline void write_test_shard(const char* dir, const char* name, int magic, int version, int header_count, int n, int first) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int32_t h[SHARD_HEADER_INTS] = {0};
    h[0] = magic; h[1] = version; h[2] = header_count;
    uint16_t* tokens = (uint16_t*)malloc_check((size_t)n * sizeof(uint16_t));
    for (int i = 0; i < n; i++) { tokens[i] = (uint16_t)(first + i); }
    FILE* fp = fopen_check(path, "wb");
    fwrite_check(h, sizeof(int32_t), SHARD_HEADER_INTS, fp);
    fwrite_check(tokens, sizeof(uint16_t), (size_t)n, fp);
    fclose_check(fp);
    free(tokens);
}

// writes a valid shard dir/name of the n tokens first + i
static inline void write_token_shard(const char* dir, const char* name, int n, int first) {
    write_test_shard(dir, name, SHARD_MAGIC, SHARD_VERSION, n, n, first);
}

#endif
