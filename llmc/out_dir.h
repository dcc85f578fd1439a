// The output directory of a training run (-o): created with its parents when missing and probed for writing before
// the first step, so a bad -o (a file, a read-only place) stops the run at once with a clear error. The process that
// writes there (rank 0) also locks it for its lifetime, so a second run on the same directory stops at once instead of
// overwriting the first's checkpoints; removes the temporary files a killed run left (a full disk would stay full);
// and decides what happens to another run's files there (out_dir_open's mode, the trainers' -y).
#ifndef LLMC_OUT_DIR_H
#define LLMC_OUT_DIR_H

#include <sys/stat.h>
#include <sys/file.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include "utils.h"
#include "checkpoint.h"

// what a run does with the training states and logs of another run in its -o directory (the trainers' -y)
enum {
    OUT_DIR_FRESH = 0,     // start afresh and refuse them: they would be overwritten, and a later -y 1 would resume them
    OUT_DIR_RESUME = 1,    // they are this run's: resume from its newest valid training state
    OUT_DIR_REPLACE = 2,   // delete them, then start afresh
};

// the logs a trainer writes to its -o directory, beside the training states
static const char* const out_dir_logs[] = {"main.log", "main.jsonl"};
#define OUT_DIR_NUM_LOGS 2

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

// takes the lock file dir/.lock for this process's lifetime (released by the kernel when it ends, also by kill -9);
// dies naming the process that holds it
static inline void out_dir_lock(const char* dir) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) { die("output directory '%s': cannot create its lock file: %s", dir, strerror(errno)); }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char holder[32] = "unknown";
        ssize_t got = errno == EWOULDBLOCK ? pread(fd, holder, sizeof(holder) - 1, 0) : -1;
        if (got > 0) { holder[got] = '\0'; holder[strcspn(holder, "\n")] = '\0'; }
        die("output directory '%s' is in use by another run (process %s): two runs there would overwrite each other's "
            "checkpoints and logs; wait for it to end or choose another -o", dir, holder);
    }
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        die("output directory '%s': cannot write its lock file: %s", dir, strerror(errno));
    }
    // fd stays open: the lock lives as long as the process
}

// whether a file name in the -o directory is a temporary file of a trainer: a checkpoint being written
// (state_<step>.bin.tmp) or a write probe (out_dir_prepare)
static inline int out_dir_is_temporary(const char* name) {
    size_t len = strlen(name);
    if (strncmp(name, ".write_probe.", 13) == 0) { return 1; }
    if (len < 5 || strcmp(name + len - 4, ".tmp") != 0 || len - 4 >= 64) { return 0; }
    char base[64];
    memcpy(base, name, len - 4);
    base[len - 4] = '\0';
    return checkpoint_name_step(base) >= 0;
}

// removes the temporary files a killed or failed run left in dir (only under the lock: no other run writes there)
static inline void out_dir_remove_temporaries(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) { die("output directory '%s': %s", dir, strerror(errno)); }
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        if (!out_dir_is_temporary(e->d_name)) { continue; }
        char path[4400];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (remove(path) != 0) { die("cannot remove the stale temporary file '%s': %s", path, strerror(errno)); }
        printf("removed the stale temporary file %s (left by a run that did not finish writing it)\n", path);
    }
    closedir(d);
}

// the files of a run in dir: its training states and logs, named in `names` (comma-separated, at most len bytes);
// returns their number. With `remove_them`, deletes them (dies on failure)
static inline int out_dir_run_files(const char* dir, char* names, size_t len, int remove_them) {
    int64_t* steps;
    int n_states = checkpoint_list(dir, &steps), count = 0;
    names[0] = '\0';
    for (int i = 0; i < n_states + OUT_DIR_NUM_LOGS; i++) {
        char path[4200], name[64];
        if (i < n_states) { snprintf(name, sizeof(name), "state_%08lld.bin", (long long)steps[i]); }
        else { snprintf(name, sizeof(name), "%s", out_dir_logs[i - n_states]); }
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (access(path, F_OK) != 0) { continue; }
        if (remove_them && remove(path) != 0) { die("cannot remove '%s': %s", path, strerror(errno)); }
        if (count < 4) { snprintf(names + strlen(names), len - strlen(names), "%s%s", count ? ", " : "", name); }
        else if (count == 4) { snprintf(names + strlen(names), len - strlen(names), ", ..."); }
        count++;
    }
    free(steps);
    return count;
}

// Opens the -o directory for this process: created and probed (out_dir_prepare) on every rank; the process that
// writes there (owner: rank 0) first takes its lock and removes stale temporary files, then handles another run's
// states and logs as `mode` says (OUT_DIR_FRESH refuses them, OUT_DIR_REPLACE deletes them, OUT_DIR_RESUME keeps them)
static inline void out_dir_open(const char* dir, int mode, int owner) {
    out_dir_create(dir);
    if (owner) {
        out_dir_lock(dir);
        out_dir_remove_temporaries(dir);
    }
    out_dir_prepare(dir);
    if (!owner || mode == OUT_DIR_RESUME) { return; }
    char names[512];
    int n = out_dir_run_files(dir, names, sizeof(names), mode == OUT_DIR_REPLACE);
    if (n > 0 && mode == OUT_DIR_FRESH) {
        die("output directory '%s' holds another run's files (%s): resume that run with -y 1, start afresh there with -y 2 "
            "(deletes them), or choose another -o", dir, names);
    }
    if (n > 0) { printf("-y 2: removed the %d files of an earlier run in %s (%s)\n", n, dir, names); }
}

#endif
