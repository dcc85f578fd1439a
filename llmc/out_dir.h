// The output directory of a training run (-o): created with its parents when missing and probed for writing before
// the first step, so a bad -o (a file, a read-only place) stops the run at once with a clear error.
#ifndef LLMC_OUT_DIR_H
#define LLMC_OUT_DIR_H

#include <sys/stat.h>
#include <unistd.h>
#include "utils.h"

// mkdir -p dir; dies naming dir unless it is a directory afterwards
static inline void out_dir_create(const char* dir) {
    char path[4096];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof(path)) { die("output directory '%s': empty or too long a path", dir); }
    memcpy(path, dir, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (path[i] != '/' && path[i] != '\0') { continue; }
        char saved = path[i];
        path[i] = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) { die("cannot create output directory '%s': %s (at '%s')", dir, strerror(errno), path); }
        path[i] = saved;
    }
    struct stat st;
    if (stat(dir, &st) != 0) { die("output directory '%s': %s", dir, strerror(errno)); }
    if (!S_ISDIR(st.st_mode)) { die("output directory '%s' exists and is not a directory", dir); }
}

// creates dir (out_dir_create) and writes, flushes and removes a probe file in it; dies naming dir on any failure
static inline void out_dir_prepare(const char* dir) {
    out_dir_create(dir);
    char probe[4200];
    snprintf(probe, sizeof(probe), "%s/.write_probe.%ld", dir, (long)getpid());
    FILE* fp = fopen(probe, "wb");
    int ok = fp != NULL && fputc('x', fp) != EOF && fflush(fp) == 0;
    int saved_errno = errno;
    if (fp != NULL && fclose(fp) != 0) { ok = 0; saved_errno = errno; }
    remove(probe);
    if (!ok) { die("output directory '%s' is not writable: %s", dir, strerror(saved_errno)); }
}

#endif
