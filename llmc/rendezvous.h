// How the processes of a data-parallel run find their place, in plain C: this process's rank and the world
// size from the flags (checked against mpirun's view when started by it), a GPU for every process of the node,
// and, without MPI, the exchange of the communicator id through a file all processes of the node can see.
// Rank 0 writes the file atomically (PATH.tmp, fsync, rename) and refuses to overwrite one left by an earlier
// run; the other ranks poll for it and stop with a clear error after a timeout instead of hanging. Every other
// rank then writes PATH.joined.<rank>, and rank 0 waits for all of them (with the same timeout) before the
// communicator is set up, so that a rank that never started is an error on rank 0 too, not a hang inside NCCL.
// Rank 0 removes the files once every rank has joined the communicator.
// File: int32 {RENDEZVOUS_MAGIC, world size, payload bytes}, then the payload.
#ifndef LLMC_RENDEZVOUS_H
#define LLMC_RENDEZVOUS_H

#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include "utils.h"

#define RENDEZVOUS_MAGIC 0x315a4452   // "RDZ1"
#define RENDEZVOUS_TIMEOUT_S 120.0
#define RENDEZVOUS_POLL_US 10000

// size of the job when this process was started by mpirun (OpenMPI, or MPICH/PMI), else 0
static inline int rendezvous_mpirun_world(void) {
    static const char* const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (int i = 0; i < 2; i++) {
        const char* v = getenv(vars[i]);
        if (v != NULL) { return atoi(v); }
    }
    return 0;
}

// Sets *rank and *world from the flags (-1 = not given) and, under mpirun (mpi_world > 0), MPI's rank and size;
// dies with a clear message when the flags are invalid, incomplete or disagree with MPI.
static inline void rendezvous_resolve(int flag_rank, int flag_world, const char* path, int mpi_rank, int mpi_world,
                                      int* rank, int* world) {
    if (flag_world == 0 || flag_world < -1) { die("world size %d is invalid: it must be at least 1", flag_world); }
    if (flag_rank < -1) { die("rank %d is invalid: it must be at least 0", flag_rank); }
    if (mpi_world > 0) {
        if (flag_world != -1 && flag_world != mpi_world) {
            die("world size mismatch: the flag says %d, mpirun started %d processes", flag_world, mpi_world);
        }
        if (flag_rank != -1 && flag_rank != mpi_rank) { die("rank mismatch: the flag says %d, MPI says %d", flag_rank, mpi_rank); }
        if (path != NULL) { die("rendezvous file '%s' given under mpirun, which sets up the communicator itself: drop it", path); }
        *rank = mpi_rank;
        *world = mpi_world;
        return;
    }
    *world = flag_world == -1 ? 1 : flag_world;
    *rank = flag_rank == -1 ? 0 : flag_rank;
    if (*rank >= *world) { die("rank %d is not in 0..%d (world size %d)", *rank, *world - 1, *world); }
    if (*world > 1 && flag_rank == -1) { die("world size %d without mpirun: give every process its rank", *world); }
    if (*world > 1 && path == NULL) { die("world size %d without mpirun needs a rendezvous file shared by the processes", *world); }
}

// dies unless the node has a GPU for each of its local_world processes (this one is local rank local_rank)
static inline void rendezvous_check_devices(int local_rank, int local_world, int visible) {
    if (visible < local_world) {
        die("this node runs %d data-parallel processes, one per GPU, but only %d GPUs are visible (this is local rank "
            "%d; check CUDA_VISIBLE_DEVICES)", local_world, visible, local_rank);
    }
}

// writes the record for `world` ranks with the payload data[0 .. bytes) to path, atomically
static inline void rendezvous_publish(const char* path, int world, const void* data, int bytes) {
    if (access(path, F_OK) == 0) { die("rendezvous file '%s' already exists (left by an earlier run?): remove it or use a fresh path", path); }
    size_t len = strlen(path);
    char* tmp = (char*)malloc_check(len + 5);
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);
    FILE* fp = fopen_check(tmp, "wb");
    int32_t h[3] = {RENDEZVOUS_MAGIC, world, bytes};
    fwrite_check(h, sizeof(int32_t), 3, fp);
    fwrite_check(data, 1, (size_t)bytes, fp);
    if (fflush(fp) != 0 || fsync(fileno(fp)) != 0) { die("cannot flush rendezvous file '%s': %s", tmp, strerror(errno)); }
    fclose_check(fp);
    if (rename(tmp, path) != 0) { die("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno)); }
    free(tmp);
}

// reads the record at path into data[0 .. bytes) and checks it; returns 1, or 0 while the file does not exist yet
static inline int rendezvous_try_read(const char* path, int world, void* data, int bytes) {
    FILE* fp = fopen(path, "rb");
    if (fp == NULL && errno == ENOENT) { return 0; }
    if (fp == NULL) { die("cannot open rendezvous file '%s': %s", path, strerror(errno)); }
    int32_t h[3];
    if (fread(h, sizeof(int32_t), 3, fp) != 3 || h[0] != RENDEZVOUS_MAGIC) { die("'%s' is not a rendezvous file", path); }
    if (h[1] != world) { die("rendezvous file '%s' is for world size %d, this process has world size %d", path, h[1], world); }
    if (h[2] != bytes) { die("rendezvous file '%s' holds an id of %d bytes, this build expects %d bytes", path, h[2], bytes); }
    fread_check(data, 1, (size_t)bytes, fp, "rendezvous id");
    fclose_check(fp);
    return 1;
}

// seconds on the monotonic clock
static inline double rendezvous_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// polls path until rank 0 has published the record, then reads it; dies after timeout_s seconds without one
static inline void rendezvous_wait(const char* path, int world, void* data, int bytes, double timeout_s) {
    double t0 = rendezvous_now();
    while (!rendezvous_try_read(path, world, data, bytes)) {
        if (rendezvous_now() - t0 > timeout_s) {
            die("rendezvous timed out: no id from rank 0 in '%s' after %.1f s (is rank 0 running, with the same path?)", path, timeout_s);
        }
        usleep(RENDEZVOUS_POLL_US);
    }
}

// the name of rank r's join file: path.joined.r (the caller frees it)
static inline char* rendezvous_join_path(const char* path, int rank) {
    size_t n = strlen(path) + 32;
    char* p = (char*)malloc_check(n);
    snprintf(p, n, "%s.joined.%d", path, rank);
    return p;
}

// rank > 0, after reading the id: tells rank 0 that this rank is there (an empty file path.joined.rank)
static inline void rendezvous_join(const char* path, int rank) {
    char* p = rendezvous_join_path(path, rank);
    fclose_check(fopen_check(p, "wb"));
    free(p);
}

// rank 0: waits until ranks 1 .. world-1 have joined; dies after timeout_s seconds naming the first missing rank
static inline void rendezvous_wait_joined(const char* path, int world, double timeout_s) {
    double t0 = rendezvous_now();
    for (int r = 1; r < world; r++) {
        char* p = rendezvous_join_path(path, r);
        while (access(p, F_OK) != 0) {
            if (rendezvous_now() - t0 > timeout_s) {
                die("rendezvous timed out: rank %d of %d did not join through '%s' within %.1f s (was it started, with "
                    "the same -F path and -G %d?)", r, world, path, timeout_s, world);
            }
            usleep(RENDEZVOUS_POLL_US);
        }
        free(p);
    }
}

// deletes the id file and the join files of a world of `world` ranks; missing files are fine
static inline void rendezvous_remove(const char* path, int world) {
    if (unlink(path) != 0 && errno != ENOENT) { die("cannot remove rendezvous file '%s': %s", path, strerror(errno)); }
    for (int r = 1; r < world; r++) {
        char* p = rendezvous_join_path(path, r);
        if (unlink(p) != 0 && errno != ENOENT) { die("cannot remove rendezvous file '%s': %s", p, strerror(errno)); }
        free(p);
    }
}

#endif
