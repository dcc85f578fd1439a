// Reading helpers for the binary test files (dev/test/reference_file.h, dev/test/adahop_case_file.h), C and C++:
// the int32 header with its magic and version checked, the size the header implies, and arrays read into fresh memory.
#ifndef DEV_TEST_FILE_H
#define DEV_TEST_FILE_H

#include "llmc/utils.h"

// opens the file `path` of kind `kind` (e.g. "reference file") and reads its header of n int32 into h; dies unless the
// file holds the header, h[0] == magic and h[1] == version. *size = the file's size in bytes
static inline FILE* test_file_open(const char* path, const char* kind, int32_t* h, int n, int magic, int version, long* size) {
    FILE* fp = fopen_check(path, "rb");
    *size = file_size(fp);
    if (*size < (long)(n * sizeof(int32_t))) { die("%s '%s' is %ld bytes, shorter than its header", kind, path, *size); }
    fread_check(h, sizeof(int32_t), (size_t)n, fp, kind);
    if (h[0] != magic) { die("'%s' is not a %s (magic %d, expected %d)", path, kind, h[0], magic); }
    if (h[1] != version) { die("%s '%s' has version %d; this build reads version %d", kind, path, h[1], version); }
    return fp;
}

// dies unless the file `path` of kind `kind` has the size (bytes) its header implies
static inline void test_file_check_size(const char* path, const char* kind, long size, long expected) {
    if (size != expected) { die("%s '%s' is %ld bytes, its header implies %ld (truncated or corrupt)", kind, path, size, expected); }
}

// count items of `size` bytes read from fp into fresh memory (`what` names them in errors)
static inline void* fread_new(FILE* fp, size_t size, size_t count, const char* what) {
    void* p = malloc_check(size * count);
    fread_check(p, size, count, fp, what);
    return p;
}

#endif
