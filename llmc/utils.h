// Checked wrappers around the C library: every failure prints where and why, then exits non-zero.
#ifndef LLMC_UTILS_H
#define LLMC_UTILS_H

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

// called by die() with its message before the exit (NULL: nothing more), e.g. to tell the other processes of a
// data-parallel run why this one stops (llmc/rendezvous.h, llmc/nccl_dp.cuh)
static void (*die_hook)(const char* message) = NULL;

static inline void die_with_message(const char* message) {
    fprintf(stderr, "error: %s\n", message);
    void (*hook)(const char*) = die_hook;
    die_hook = NULL;   // a hook that dies itself does not recurse
    if (hook != NULL) { hook(message); }
    exit(EXIT_FAILURE);
}
#define die(...) do { char die_message_[8192]; snprintf(die_message_, sizeof(die_message_), __VA_ARGS__); \
                      die_with_message(die_message_); } while (0)

// fopen for regular files only: the file is opened without blocking (a FIFO would wait for its other end), checked
// with fstat, then switched back to blocking I/O. NULL with errno set when it fails: EISDIR for a directory, EINVAL
// for any other file that is not regular (a FIFO, device or socket)
static inline FILE* fopen_regular(const char* path, const char* mode) {
    int update = strchr(mode, '+') != NULL;
    int flags = mode[0] == 'r' ? (update ? O_RDWR : O_RDONLY)
                               : (update ? O_RDWR : O_WRONLY) | O_CREAT | (mode[0] == 'a' ? O_APPEND : 0);
    int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) { return NULL; }
    struct stat st;
    int err = fstat(fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (err == 0 && mode[0] == 'w' && ftruncate(fd, 0) != 0) { err = errno; }   // "w" truncates, once it is known regular
    if (err == 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) { err = errno; }
    FILE* fp = err == 0 ? fdopen(fd, mode) : NULL;
    if (fp == NULL) {
        if (err == 0) { err = errno; }
        close(fd);
        errno = err;
    }
    return fp;
}

// why fopen_regular failed, from its errno
static inline const char* fopen_regular_error(int err) {
    return err == EINVAL ? "not a regular file (a FIFO, device or socket)" : err == EISDIR ? "a directory, not a regular file"
                                                                                           : strerror(err);
}

// opens path (fopen_regular: a regular file, never waiting on a FIFO) or exits naming it
static inline FILE* fopen_check_(const char* path, const char* mode, const char* file, int line) {
    FILE* fp = fopen_regular(path, mode);
    if (fp == NULL) {
        fprintf(stderr, "error: cannot open '%s' (mode %s): %s [%s:%d]\n", path, mode, fopen_regular_error(errno), file, line);
        exit(EXIT_FAILURE);
    }
    return fp;
}
#define fopen_check(path, mode) fopen_check_(path, mode, __FILE__, __LINE__)

static inline void fread_check_(void* ptr, size_t size, size_t nmemb, FILE* fp, const char* what, const char* file, int line) {
    size_t got = fread(ptr, size, nmemb, fp);
    if (got != nmemb) {
        fprintf(stderr, "error: %s: expected %zu items of %zu bytes, read %zu (%s) [%s:%d]\n", what, nmemb, size, got,
                feof(fp) ? "file is truncated" : "read error", file, line);
        exit(EXIT_FAILURE);
    }
}
#define fread_check(ptr, size, nmemb, fp, what) fread_check_(ptr, size, nmemb, fp, what, __FILE__, __LINE__)

static inline void fwrite_check_(const void* ptr, size_t size, size_t nmemb, FILE* fp, const char* file, int line) {
    if (fwrite(ptr, size, nmemb, fp) != nmemb) {
        fprintf(stderr, "error: write failed: %s [%s:%d]\n", strerror(errno), file, line);
        exit(EXIT_FAILURE);
    }
}
#define fwrite_check(ptr, size, nmemb, fp) fwrite_check_(ptr, size, nmemb, fp, __FILE__, __LINE__)

static inline void fclose_check_(FILE* fp, const char* file, int line) {
    if (fclose(fp) != 0) {
        fprintf(stderr, "error: close failed: %s [%s:%d]\n", strerror(errno), file, line);
        exit(EXIT_FAILURE);
    }
}
#define fclose_check(fp) fclose_check_(fp, __FILE__, __LINE__)

static inline void fseek_check_(FILE* fp, long off, int whence, const char* file, int line) {
    if (fseek(fp, off, whence) != 0) {
        fprintf(stderr, "error: seek to %ld failed: %s [%s:%d]\n", off, strerror(errno), file, line);
        exit(EXIT_FAILURE);
    }
}
#define fseek_check(fp, off, whence) fseek_check_(fp, off, whence, __FILE__, __LINE__)

// size of an open file in bytes; the position is restored
static inline long file_size(FILE* fp) {
    long here = ftell(fp);
    fseek_check(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek_check(fp, here, SEEK_SET);
    return size;
}

static inline void* malloc_check_(size_t size, const char* file, int line) {
    void* p = malloc(size);
    if (p == NULL && size > 0) {
        fprintf(stderr, "error: host allocation of %zu bytes failed [%s:%d]\n", size, file, line);
        exit(EXIT_FAILURE);
    }
    return p;
}
#define malloc_check(size) malloc_check_(size, __FILE__, __LINE__)

static inline void* calloc_check_(size_t n, size_t size, const char* file, int line) {
    void* p = calloc(n, size);
    if (p == NULL && n * size > 0) {
        fprintf(stderr, "error: host allocation of %zu bytes failed [%s:%d]\n", n * size, file, line);
        exit(EXIT_FAILURE);
    }
    return p;
}
#define calloc_check(n, size) calloc_check_(n, size, __FILE__, __LINE__)

#endif
