// How the processes of a data-parallel run find their place and each other, in plain C (no CUDA): this process's
// rank and world size (flags, mpirun, or a refused launcher), its GPU, and, without MPI, a channel through files
// that all processes of the node can see, which ties them to one run and tells every rank when one fails.
//
// The file channel, for the rendezvous path P given to every rank:
//   P                 rank 0's announcement: the world size, this run's nonce (random, 64 bits) and its time
//   P.<round>.<rank>  one rank's record of a round (join: its process id; agree: what must match; id: rank 0's
//                     communicator id), tagged with the nonce: files of another run are never read as this run's.
//                     The join record's name ends in .<nonce> (16 hex digits) and it is created with link(), which
//                     refuses an existing name; rank 0 writes its own before P.
//   P.alive.<rank>    the rank's heartbeat from its join to rendezvous_close, tagged with the nonce: its process id
//                     and a count that a thread of the rank adds 1 to every RENDEZVOUS_BEAT_US (written in place)
//   P.error           written by a rank that stops: its rank, its process id, the nonce and the cause
// Every other file is written to NAME.tmp<pid> and renamed (the join record: linked), so a reader never sees half a
// file. Rank 0 starts by removing what an earlier run left behind: its round, heartbeat and error files always, P
// itself only when that run's error file says it failed (P without one may belong to a running job: refused), and
// nothing while rank 0 of a run that trains on the path (its P is gone by then) still beats. A rank > 0 waits for a
// P whose run reported no failure and takes its nonce; P is read again after its error file was looked for, and rank
// 0 removes a failed run's P before that error file, so a P that rank 0 is replacing is never taken. Should P be
// replaced while the rank waits for the others (one removed by hand), it joins again.
// Every wait polls every RENDEZVOUS_POLL_US, stops with the cause when another rank of this run wrote P.error, a
// joined process of this node is gone or a rank's heartbeat stalled, and stops with a clear error after the timeout.
// Failures are reported under the nonce of the run this rank knows: rank 0's from its announcement on, a rank > 0's
// from the moment it read the announcement, before it joined. A rank > 0 that finds P of a failed run announced
// after it began stops with that run's cause (its run failed before this rank read the announcement); a failed P
// announced before it began is taken for an earlier run's and waited past. From its announcement on until
// rendezvous_close, a rank that stops through die() writes P.error with die's message, one that exits any other way
// writes a generic cause, and one that stops on what it found (a process gone, a heartbeat stalled) writes that;
// a rank that stops on another rank's report does not repeat it. So the others (rendezvous_peer_problem, polled
// during training by the watchdog of llmc/nccl_dp.cuh) stop too. Rank 0 removes P and the round files once the
// communicator exists; each rank removes its heartbeat file in rendezvous_close; P.error is removed by the next
// run's rank 0.
//
// What this guarantees to the ranks that share P (every message one line, every exit non-zero):
//   A second process for a rank stops with "rank R is claimed twice: process PID ...", naming the first one. While
//     the run is announced (until its communicator exists) it reports that, and every rank of the run stops within
//     a poll interval; later it finds the rank's heartbeat advancing and stops alone, leaving the run alone.
//   An early failure (a world size other than rank 0's, any error after the announcement was read) stops every rank
//     that joined or waits for that announcement within a poll interval (10 ms in the rounds, the watchdog's 0.1 s
//     during training), not at the timeout; an error file of an earlier run never stops a new one. A rank that fails
//     before it read an announcement (no run to tell), or one that starts only after its run was announced and
//     failed (it cannot tell that P from an earlier run's), leaves the others, or itself, to the timeout.
//   A rank that stops running (SIGSTOP, a debugger: every thread of it stops) stops the others, naming it, once its
//     heartbeat has not advanced for silent_s (the trainer: RENDEZVOUS_SILENT_S). Silence counts only over the
//     observer's own polls: a pause of the observer longer than silent_s / 4 (the whole job suspended) starts the
//     count again. Progress means that the process runs, not that its steps advance: a rank that is merely slow (a
//     long step, a checkpoint, an evaluation) beats on and is never stopped, nor is one whose main thread hangs while
//     its heartbeat thread runs (the others then wait in NCCL for it).
#ifndef LLMC_RENDEZVOUS_H
#define LLMC_RENDEZVOUS_H

#include <stdint.h>
#include <stddef.h>
#include <time.h>
#include <pthread.h>
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>
#include <sys/stat.h>
#include "utils.h"

#define RENDEZVOUS_MAGIC 0x335a4452   // "RDZ3"
#define RENDEZVOUS_TIMEOUT_S 120.0
#define RENDEZVOUS_POLL_US 10000
#define RENDEZVOUS_BEAT_US 100000     // how often a rank's heartbeat thread adds 1 to its count in P.alive.<rank>
#define RENDEZVOUS_SILENT_S 60.0      // the trainer's bound: a rank whose count stays this long stops the run
#define RENDEZVOUS_PATH_MAX 1024
#define RENDEZVOUS_ERROR_MAX 1024

// the rounds of a run, in order, then the heartbeat file; their names are the file name parts
enum { RDZ_JOIN, RDZ_AGREE, RDZ_ID, RDZ_NUM_ROUNDS, RDZ_ALIVE = RDZ_NUM_ROUNDS, RDZ_NUM_PARTS };
static const char* const rendezvous_round_names[RDZ_NUM_PARTS] = {"joined", "agree", "id", "alive"};
// what rendezvous_peer_problem found
enum { RDZ_NO_PROBLEM, RDZ_REPORTED, RDZ_OBSERVED };   // reported: another rank's P.error; observed: by this rank

typedef struct { int32_t magic, tag; uint64_t nonce; } RendezvousHeader;   // tag: world size (P) or rank
typedef struct { int64_t pid, pid_ns; } RendezvousPeer;                      // pid_ns: inode of /proc/self/ns/pid
typedef struct { RendezvousPeer who; uint64_t count; } RendezvousAlive;      // P.alive.<rank>: its heartbeat
typedef struct { uint64_t count; double at_s; } RendezvousHeard;            // a rank's last count, and when it changed

typedef struct {
    const char* path;        // P
    int rank, world;
    uint64_t nonce;          // this run's
    double timeout_s;        // of every wait
    int64_t opened_ns;       // when rendezvous_open began, on the clock of P's announcement time
    RendezvousPeer* peers;   // world entries, from the join round
    int reported;            // this rank wrote P.error already
    int closed;              // the run finished: exiting is no failure
    double silent_s;         // a rank whose heartbeat count stays this long stops the run
    RendezvousHeard* heard;  // world entries, from the join round on: the heartbeats seen
    double last_poll_s;      // when rendezvous_peer_problem last looked at them
    int beat_fd;             // this rank's P.alive.<rank>, written by beat_thread while heard is set
    volatile int beat_stop;
    pthread_t beat_thread;
} Rendezvous;

static Rendezvous* rendezvous_open_channel = NULL;   // the channel die() and exit() report through

// ----------------------------------------------------------------------------
// ranks and devices

// seconds on the monotonic clock
static inline double rendezvous_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// nanoseconds since the epoch (CLOCK_REALTIME): the clock that the processes of a node share
static inline int64_t rendezvous_wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// the integer value of environment variable `name`, or `fallback` when it is not set
static inline int rendezvous_env_int(const char* name, int fallback) {
    const char* v = getenv(name);
    return v != NULL && v[0] != '\0' ? atoi(v) : fallback;
}

// size of the job when this process was started by mpirun (OpenMPI, or MPICH/PMI), else 0
static inline int rendezvous_mpirun_world(void) {
    static const char* const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (int i = 0; i < 2; i++) {
        int w = rendezvous_env_int(vars[i], 0);
        if (w > 0) { return w; }
    }
    return 0;
}

// this process's index among the processes of its node as the launcher set it (OpenMPI, MPICH/Hydra, MVAPICH,
// Slurm, PALS), or -1 when no launcher says; read before MPI_Init so that the GPU is chosen first
static inline int rendezvous_launcher_local_rank(void) {
    static const char* const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                                       "SLURM_LOCALID", "PALS_LOCAL_RANKID"};
    for (int i = 0; i < 5; i++) {
        int r = rendezvous_env_int(vars[i], -1);
        if (r >= 0) { return r; }
    }
    return -1;
}

// Dies when a launcher started several processes that this program would not see as one run: srun (Slurm job
// step of several tasks) or a PMIx launcher other than mpirun, without mpirun's variables and without the rank
// flags (with_flags) that tie the processes together through a rendezvous file. Every task would otherwise run
// as rank 0 of 1 and write the same output. With MPI (have_mpi), MPI_Init may see those launches; dp_launch checks
// its world against them.
static inline void rendezvous_refuse_unknown_launch(int have_mpi, int with_flags) {
    if (rendezvous_mpirun_world() > 0 || with_flags || have_mpi) { return; }
    int srun_tasks = rendezvous_env_int("SLURM_STEP_NUM_TASKS", 0);
    if (srun_tasks > 1) {
        die("started by srun as task %d of %d, but this build has no MPI: rebuild with MPI (srun --mpi=pmix), or "
            "start one process per GPU with the rank, world size and rendezvous flags", rendezvous_env_int("SLURM_PROCID", 0), srun_tasks);
    }
    if (getenv("PMIX_RANK") != NULL) {
        die("started by a PMIx launcher (PMIX_RANK=%d), but this build has no MPI: rebuild with MPI, or start one process "
            "per GPU with the rank, world size and rendezvous flags", rendezvous_env_int("PMIX_RANK", 0));
    }
}

// the number of processes the launcher started (mpirun, srun), or 0 when none says
static inline int rendezvous_launcher_world(void) {
    int w = rendezvous_mpirun_world();
    return w > 0 ? w : rendezvous_env_int("SLURM_STEP_NUM_TASKS", 0);
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

// ----------------------------------------------------------------------------
// files of the channel

// P.<part>.<rank> (rank < 0: P.<part>, part NULL: P) into out
static inline void rendezvous_name(char* out, const char* path, const char* part, int rank) {
    if (part == NULL) { snprintf(out, RENDEZVOUS_PATH_MAX + 64, "%s", path); }
    else if (rank < 0) { snprintf(out, RENDEZVOUS_PATH_MAX + 64, "%s.%s", path, part); }
    else { snprintf(out, RENDEZVOUS_PATH_MAX + 64, "%s.%s.%d", path, part, rank); }
}

// path.tmp<pid> into tmp: one per process, since ranks may write the same file (P.error) at once
static inline void rendezvous_tmp_name(char* tmp, const char* path) {
    snprintf(tmp, RENDEZVOUS_PATH_MAX + 96, "%s.tmp%d", path, (int)getpid());
}

// writes {magic, tag, nonce} and data[0 .. bytes) to the file tmp and flushes it to disk; 0 or errno
static inline int rendezvous_write_file(const char* tmp, int tag, uint64_t nonce, const void* data, size_t bytes) {
    FILE* fp = fopen(tmp, "wb");
    if (fp == NULL) { return errno; }
    RendezvousHeader h = {RENDEZVOUS_MAGIC, tag, nonce};
    int ok = fwrite(&h, sizeof(h), 1, fp) == 1 && (bytes == 0 || fwrite(data, 1, bytes, fp) == bytes) &&
             fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    int err = ok ? 0 : errno;
    if (fclose(fp) != 0 && ok) { err = errno; }
    return err;
}

// the same record written to path atomically (path.tmp<pid>, renamed); 0 or errno
static inline int rendezvous_write(const char* path, int tag, uint64_t nonce, const void* data, size_t bytes) {
    char tmp[RENDEZVOUS_PATH_MAX + 96];
    rendezvous_tmp_name(tmp, path);
    int err = rendezvous_write_file(tmp, tag, nonce, data, bytes);
    if (err == 0 && rename(tmp, path) != 0) { err = errno; }
    return err;
}

// the same, dying with a clear message on failure
static inline void rendezvous_write_check(const char* path, int tag, uint64_t nonce, const void* data, size_t bytes) {
    int err = rendezvous_write(path, tag, nonce, data, bytes);
    if (err != 0) { die("cannot write rendezvous file '%s': %s", path, strerror(err)); }
}

// Reads path's header into *h and up to max bytes of data (the count into *got when not NULL); returns 1, or 0
// while the file does not exist. Dies on a file that is not a rendezvous file.
static inline int rendezvous_read(const char* path, RendezvousHeader* h, void* data, size_t max, size_t* got) {
    FILE* fp = fopen(path, "rb");
    if (fp == NULL && errno == ENOENT) { return 0; }
    if (fp == NULL) { die("cannot open rendezvous file '%s': %s", path, strerror(errno)); }
    if (fread(h, sizeof(*h), 1, fp) != 1 || h->magic != RENDEZVOUS_MAGIC) { die("'%s' is not a rendezvous file of this build", path); }
    size_t n = max > 0 ? fread(data, 1, max, fp) : 0;
    fclose(fp);
    if (got != NULL) { *got = n; }
    return 1;
}

// the record of P.error: the process that stopped, then the cause (the file's rest)
typedef struct { RendezvousPeer who; char text[RENDEZVOUS_ERROR_MAX + 1]; } RendezvousError;

// 1 when P.error names nonce: a rank of that run stopped; its rank and record go to *rank and *e (when not NULL)
static inline int rendezvous_error_of(const char* path, uint64_t nonce, int* rank, RendezvousError* e) {
    char name[RENDEZVOUS_PATH_MAX + 64];
    RendezvousError record;
    RendezvousHeader h;
    size_t got = 0;
    memset(&record, 0, sizeof(record));
    rendezvous_name(name, path, "error", -1);
    if (!rendezvous_read(name, &h, &record, sizeof(record) - 1, &got) || h.nonce != nonce) { return 0; }
    ((char*)&record)[got] = '\0';   // the text ends where the file does
    if (rank != NULL) { *rank = h.tag; }
    if (e != NULL) { *e = record; }
    return 1;
}

// unlinks name, dying on any failure other than its absence
static inline void rendezvous_unlink(const char* name) {
    if (unlink(name) != 0 && errno != ENOENT) { die("cannot remove rendezvous file '%s': %s", name, strerror(errno)); }
}

// 1 when s is one or more decimal digits, optionally followed by '.' and 16 hexadecimal digits (a nonce)
static inline int rendezvous_rank_part(const char* s) {
    if (*s < '0' || *s > '9') { return 0; }
    while (*s >= '0' && *s <= '9') { s++; }
    if (*s == '\0') { return 1; }
    return s[0] == '.' && strlen(s + 1) == 16 && strspn(s + 1, "0123456789abcdef") == 16;
}

// 1 when s is one or more decimal digits
static inline int rendezvous_all_digits(const char* s) {
    if (*s == '\0') { return 0; }
    while (*s >= '0' && *s <= '9') { s++; }
    return *s == '\0';
}

// 1 when `name` (a directory entry) is one of the files P.* of the channel for the file name `base` of P:
// base.<round>.<rank>[.<nonce>], base.error, or one of those (or base) with .tmp<pid> appended
static inline int rendezvous_is_channel_file(const char* name, const char* base) {
    size_t nb = strlen(base);
    if (strncmp(name, base, nb) != 0 || name[nb] != '.') { return 0; }
    char rest[RENDEZVOUS_PATH_MAX];
    snprintf(rest, sizeof(rest), "%s", name + nb);   // ".<round>.<rank>", ".error", each maybe with ".tmp<pid>"
    char* tmp = strstr(rest, ".tmp");
    if (tmp != NULL && rendezvous_all_digits(tmp + 4)) { *tmp = '\0'; }
    if (rest[0] == '\0' || strcmp(rest, ".error") == 0) { return 1; }
    for (int r = 0; r < RDZ_NUM_PARTS; r++) {
        size_t nr = strlen(rendezvous_round_names[r]);
        if (strncmp(rest + 1, rendezvous_round_names[r], nr) == 0 && rest[nr + 1] == '.' && rendezvous_rank_part(rest + nr + 2)) {
            return 1;
        }
    }
    return 0;
}

// removes every file P.* of the channel (not P): whatever runs on this path left behind
static inline void rendezvous_remove_channel_files(const char* path) {
    char dir[RENDEZVOUS_PATH_MAX], name[RENDEZVOUS_PATH_MAX + 260];
    snprintf(dir, sizeof(dir), "%s", path);
    char* slash = strrchr(dir, '/');
    const char* base = slash ? slash + 1 : path;
    if (slash == dir) { dir[1] = '\0'; }
    else if (slash) { *slash = '\0'; }
    else { snprintf(dir, sizeof(dir), "."); }
    DIR* d = opendir(dir);
    if (d == NULL) { die("cannot list the directory '%s' of rendezvous file '%s': %s", dir, path, strerror(errno)); }
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        if (!rendezvous_is_channel_file(e->d_name, base)) { continue; }
        snprintf(name, sizeof(name), "%s/%s", dir, e->d_name);
        rendezvous_unlink(name);
    }
    closedir(d);
}

// ----------------------------------------------------------------------------
// failures: reported through P.error, noticed by every wait and by the watchdog

// this process as a peer: its pid and pid namespace (peers are checked only inside the same namespace)
static inline RendezvousPeer rendezvous_self(void) {
    RendezvousPeer p = {(int64_t)getpid(), 0};
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0) { p.pid_ns = (int64_t)st.st_ino; }
    return p;
}

// writes P.error with this rank, this process and the cause unless this rank reported already or knows no run to
// tell (it read no announcement yet); never dies
static inline void rendezvous_report(Rendezvous* rz, const char* cause) {
    if (rz->reported || rz->nonce == 0) { return; }
    rz->reported = 1;
    char name[RENDEZVOUS_PATH_MAX + 64];
    rendezvous_name(name, rz->path, "error", -1);
    RendezvousError e;
    e.who = rendezvous_self();
    size_t n = strlen(cause);
    n = n < RENDEZVOUS_ERROR_MAX ? n : RENDEZVOUS_ERROR_MAX;
    memcpy(e.text, cause, n);
    if (rendezvous_write(name, rz->rank, rz->nonce, &e, sizeof(e.who) + n) != 0) {
        fprintf(stderr, "rank %d: could not write '%s' to tell the other ranks\n", rz->rank, name);
    }
}

static inline void rendezvous_die_hook(const char* message) {
    if (rendezvous_open_channel != NULL) { rendezvous_report(rendezvous_open_channel, message); }
}

static inline void rendezvous_exit_hook(void) {
    Rendezvous* rz = rendezvous_open_channel;
    if (rz != NULL && !rz->closed) { rendezvous_report(rz, "it exited before the end of the run (its stderr has the cause)"); }
}

// 1 when process pid no longer runs: it does not exist, or it is a zombie its parent has not reaped yet
static inline int rendezvous_process_gone(pid_t pid) {
    if (kill(pid, 0) != 0) { return errno == ESRCH; }
    char name[64], stat_line[512];
    snprintf(name, sizeof(name), "/proc/%d/stat", (int)pid);
    FILE* fp = fopen(name, "r");
    if (fp == NULL) { return 0; }
    size_t n = fread(stat_line, 1, sizeof(stat_line) - 1, fp);
    fclose(fp);
    stat_line[n] = '\0';
    const char* end = strrchr(stat_line, ')');   // "pid (name) state ...": the name may hold spaces and parentheses
    return end != NULL && end[1] == ' ' && (end[2] == 'Z' || end[2] == 'X');
}

// 1 when p is a process of this pid namespace (the only ones this process can see) that no longer runs
static inline int rendezvous_peer_gone(const RendezvousPeer* p) {
    RendezvousPeer self = rendezvous_self();
    return p->pid > 0 && p->pid_ns != 0 && p->pid_ns == self.pid_ns && rendezvous_process_gone((pid_t)p->pid);
}

// 1 when p is this process
static inline int rendezvous_peer_is_self(const RendezvousPeer* p) {
    RendezvousPeer self = rendezvous_self();
    return p->pid == self.pid && p->pid_ns == self.pid_ns;
}

// ----------------------------------------------------------------------------
// heartbeats: every rank's thread counts in P.alive.<rank> from its join to rendezvous_close

// reads P.alive.<rank> into *h and *a; 1, or 0 while it does not exist
static inline int rendezvous_read_alive(const char* path, int rank, RendezvousHeader* h, RendezvousAlive* a) {
    char name[RENDEZVOUS_PATH_MAX + 64];
    size_t got = 0;
    rendezvous_name(name, path, rendezvous_round_names[RDZ_ALIVE], rank);
    return rendezvous_read(name, h, a, sizeof(*a), &got) && got == sizeof(*a);
}

// 1 when a process beats in P.alive.<rank> (its count changes within a few beats): it is that rank of a run that has
// joined on this path and runs; that process into *who
static inline int rendezvous_beating(const char* path, int rank, RendezvousPeer* who) {
    RendezvousHeader h;
    RendezvousAlive before, after;
    if (!rendezvous_read_alive(path, rank, &h, &before)) { return 0; }
    usleep(3 * RENDEZVOUS_BEAT_US);
    if (!rendezvous_read_alive(path, rank, &h, &after) || after.count == before.count) { return 0; }
    *who = after.who;
    return 1;
}

// Where no run is announced: dies when a running process is this rank of a run that joined on this path already (P
// and the rounds are gone once its communicator exists), naming it; not reported: that run itself is fine
static inline void rendezvous_refuse_beating(const Rendezvous* rz) {
    RendezvousPeer other;
    if (!rendezvous_beating(rz->path, rz->rank, &other)) { return; }
    die("rank %d is claimed twice: process %lld runs as rank %d of a run through '%s' (its heartbeat file advances); this "
        "process (%lld) stops (were two processes started with the same rank? or use a fresh path)", rz->rank,
        (long long)other.pid, rz->rank, rz->path, (long long)rendezvous_self().pid);
}

// the heartbeat thread: adds 1 to this rank's count in P.alive.<rank> every RENDEZVOUS_BEAT_US until rendezvous_close
// (a process that is stopped, SIGSTOP or a debugger, stops beating with all its threads)
static inline void* rendezvous_beat_main(void* arg) {
    Rendezvous* rz = (Rendezvous*)arg;
    uint64_t count = 0;
    int warned = 0;
    while (!rz->beat_stop) {
        count++;
        ssize_t n = pwrite(rz->beat_fd, &count, sizeof(count), sizeof(RendezvousHeader) + offsetof(RendezvousAlive, count));
        if (n != (ssize_t)sizeof(count) && !warned) {
            fprintf(stderr, "rank %d: cannot write its heartbeat to '%s.alive.%d': %s (the other ranks will stop the run)\n",
                    rz->rank, rz->path, rz->rank, n < 0 ? strerror(errno) : "short write");
            warned = 1;
        }
        usleep(RENDEZVOUS_BEAT_US);
    }
    return NULL;
}

// after the join: writes P.alive.<rank> (this process, count 0), starts the thread that beats there, and watches every
// other rank's heartbeat from now on
static inline void rendezvous_start_heartbeat(Rendezvous* rz) {
    char name[RENDEZVOUS_PATH_MAX + 64];
    rendezvous_name(name, rz->path, rendezvous_round_names[RDZ_ALIVE], rz->rank);
    RendezvousAlive a = {rendezvous_self(), 0};
    rendezvous_write_check(name, rz->rank, rz->nonce, &a, sizeof(a));
    rz->beat_fd = open(name, O_WRONLY);
    if (rz->beat_fd < 0) { die("cannot open rendezvous file '%s': %s", name, strerror(errno)); }
    rz->heard = (RendezvousHeard*)malloc_check((size_t)rz->world * sizeof(RendezvousHeard));
    rz->last_poll_s = rendezvous_now();
    for (int r = 0; r < rz->world; r++) { rz->heard[r].count = 0; rz->heard[r].at_s = rz->last_poll_s; }
    if (pthread_create(&rz->beat_thread, NULL, rendezvous_beat_main, rz) != 0) { die("cannot start the rendezvous heartbeat thread"); }
}

// The first other rank whose heartbeat count has not changed for rz->silent_s, or -1. Silence is counted only over
// this process's own polls: polls more than a quarter of the bound apart (this process did not run, e.g. the whole
// job was suspended, or did other work) start every count again, so a pause as long as the bound never counts.
static inline int rendezvous_silent_rank(Rendezvous* rz) {
    if (rz->heard == NULL) { return -1; }
    double now = rendezvous_now();
    int restart = now - rz->last_poll_s > rz->silent_s / 4, silent = -1;
    rz->last_poll_s = now;
    for (int r = 0; r < rz->world; r++) {
        RendezvousHeader h;
        RendezvousAlive a;
        if (r == rz->rank) { continue; }
        if (rendezvous_read_alive(rz->path, r, &h, &a) && h.nonce == rz->nonce && a.count != rz->heard[r].count) {
            rz->heard[r].count = a.count;
            rz->heard[r].at_s = now;
        }
        if (restart) { rz->heard[r].at_s = now; }
        if (silent < 0 && now - rz->heard[r].at_s > rz->silent_s) { silent = r; }
    }
    return silent;
}

// Fills msg (RENDEZVOUS_ERROR_MAX + 64 bytes) and returns RDZ_REPORTED when another rank of this run reported a
// failure, RDZ_OBSERVED when a process that joined from this node is gone or a rank sent no heartbeat for
// rz->silent_s, else RDZ_NO_PROBLEM. Cheap enough to poll every few milliseconds, from one thread at a time.
static inline int rendezvous_peer_problem(Rendezvous* rz, char* msg) {
    int gone = -1;
    for (int r = 0; rz->peers != NULL && r < rz->world && gone < 0; r++) {
        if (r != rz->rank && rendezvous_peer_gone(&rz->peers[r])) { gone = r; }
    }
    int rank = -1;   // read after the process check: a rank that reported and exited is found with its message
    RendezvousError e;
    if (rendezvous_error_of(rz->path, rz->nonce, &rank, &e) && !rendezvous_peer_is_self(&e.who)) {
        snprintf(msg, RENDEZVOUS_ERROR_MAX + 64, "rank %d stopped: %s", rank, e.text);
        return RDZ_REPORTED;
    }
    if (gone >= 0) {
        snprintf(msg, RENDEZVOUS_ERROR_MAX + 64, "rank %d (process %lld) is gone without a message (killed?)", gone,
                 (long long)rz->peers[gone].pid);
        return RDZ_OBSERVED;
    }
    int silent = rendezvous_silent_rank(rz);
    if (silent >= 0) {
        snprintf(msg, RENDEZVOUS_ERROR_MAX + 64, "rank %d (process %lld) sent no heartbeat for %.1f s: it is stopped "
                 "(SIGSTOP, a debugger) or hung", silent, (long long)rz->peers[silent].pid, rz->silent_s);
        return RDZ_OBSERVED;
    }
    return RDZ_NO_PROBLEM;
}

// dies with the cause when rendezvous_peer_problem finds one; die() reports what this rank observed, not what another
// rank reported already
static inline void rendezvous_check_peers(Rendezvous* rz) {
    char msg[RENDEZVOUS_ERROR_MAX + 64];
    int problem = rendezvous_peer_problem(rz, msg);
    if (problem == RDZ_NO_PROBLEM) { return; }
    if (problem == RDZ_REPORTED) { rz->reported = 1; }
    die("rank %d of %d stops: %s", rz->rank, rz->world, msg);
}

// ----------------------------------------------------------------------------
// the rounds

// the file of rank's record of `round` in this run: P.<round>.<rank>, for the join round with the nonce appended
// (one name per run and rank, created only once: a second process for the rank finds it)
static inline void rendezvous_record_name(char* out, const Rendezvous* rz, int round, int rank) {
    rendezvous_name(out, rz->path, rendezvous_round_names[round], rank);
    size_t n = strlen(out);
    if (round == RDZ_JOIN) { snprintf(out + n, RENDEZVOUS_PATH_MAX + 64 - n, ".%016llx", (unsigned long long)rz->nonce); }
}

// dies because the join record `name` of this rank exists: another process joined this run as this rank
static inline void rendezvous_die_claimed(const Rendezvous* rz, const char* name) {
    RendezvousHeader h;
    RendezvousPeer other = {-1, 0}, self = rendezvous_self();
    rendezvous_read(name, &h, &other, sizeof(other), NULL);
    if (rendezvous_peer_gone(&other)) {
        die("rank %d of the run in '%s' was joined by process %lld, which is gone (killed?): start the whole run again",
            rz->rank, rz->path, (long long)other.pid);
    }
    die("rank %d is claimed twice: process %lld joined the run in '%s' as rank %d first; this process (%lld) stops "
        "(were two processes started with the same rank?)", rz->rank, (long long)other.pid, rz->path, rz->rank, (long long)self.pid);
}

// Creates this rank's join record (this process) for this run; link() refuses an existing name, so of two processes
// that join a run as one rank the second dies here, naming the first
static inline void rendezvous_claim(const Rendezvous* rz) {
    char name[RENDEZVOUS_PATH_MAX + 64], tmp[RENDEZVOUS_PATH_MAX + 96];
    RendezvousPeer self = rendezvous_self();
    rendezvous_record_name(name, rz, RDZ_JOIN, rz->rank);
    rendezvous_tmp_name(tmp, name);
    int err = rendezvous_write_file(tmp, rz->rank, rz->nonce, &self, sizeof(self));
    if (err == 0 && link(tmp, name) != 0) { err = errno; }
    unlink(tmp);
    if (err == EEXIST) { rendezvous_die_claimed(rz, name); }
    if (err != 0) { die("cannot write rendezvous file '%s': %s", name, strerror(err)); }
}

// Reads rank `from`'s record of `round` into data[0 .. bytes) when it exists with this run's nonce; returns 1, else 0.
// Dies on a record of another size.
static inline int rendezvous_try_record(const Rendezvous* rz, int round, int from, void* data, size_t bytes) {
    char name[RENDEZVOUS_PATH_MAX + 64];
    rendezvous_record_name(name, rz, round, from);
    RendezvousHeader h;
    size_t got = 0;
    if (!rendezvous_read(name, &h, data, bytes, &got) || h.nonce != rz->nonce) { return 0; }
    if (h.tag != from || got != bytes) {
        die("rendezvous file '%s' holds %zu bytes for rank %d; this build expects %zu bytes for rank %d", name, got, h.tag, bytes, from);
    }
    return 1;
}

// The announcement in P: 1 with its header (nonce, world size) into *h, its time into *at_ns and into *failed whether
// its run reported a failure; 0 while there is no P. P is read again after its error file was looked for: rank 0
// removes a failed run's P before that error file, so an announcement read then is not one whose error file just went.
static inline int rendezvous_read_announcement(const char* path, RendezvousHeader* h, int64_t* at_ns, int* failed) {
    RendezvousHeader again;
    *at_ns = 0;
    if (!rendezvous_read(path, h, at_ns, sizeof(*at_ns), NULL)) { return 0; }
    *failed = rendezvous_error_of(path, h->nonce, NULL, NULL);
    return rendezvous_read(path, &again, NULL, 0, NULL) && again.nonce == h->nonce;
}

// 1 when P no longer announces this run: rank 0 replaced it, or is replacing it
static inline int rendezvous_replaced(const Rendezvous* rz) {
    RendezvousHeader h;
    int64_t at_ns;
    int failed;
    return !rendezvous_read_announcement(rz->path, &h, &at_ns, &failed) || h.nonce != rz->nonce;
}

// Waits until every rank in from[0 .. count) has written its record of `round`, copying them to
// data + k * bytes; polls for failures. Returns 1, or 0 when this rank (> 0) must join again because rank 0
// replaced P (only in the join round). Dies after the timeout naming the first missing rank.
static inline int rendezvous_gather(Rendezvous* rz, int round, const int* from, int count, void* data, size_t bytes) {
    double t0 = rendezvous_now();
    for (int k = 0; k < count; k++) {
        while (!rendezvous_try_record(rz, round, from[k], (char*)data + (size_t)k * bytes, bytes)) {
            rendezvous_check_peers(rz);
            if (round == RDZ_JOIN && rz->rank > 0 && rendezvous_replaced(rz)) { return 0; }
            if (rendezvous_now() - t0 > rz->timeout_s) {
                if (round == RDZ_JOIN) {
                    die("rendezvous timed out: rank %d of %d did not join through '%s' within %.1f s (was it started, with "
                        "the same rendezvous path and world size %d?)", from[k], rz->world, rz->path, rz->timeout_s, rz->world);
                }
                die("rendezvous timed out: rank %d of %d sent nothing for round '%s' through '%s' within %.1f s",
                    from[k], rz->world, rendezvous_round_names[round], rz->path, rz->timeout_s);
            }
            usleep(RENDEZVOUS_POLL_US);
        }
    }
    return 1;
}

// every rank's record of `round`: writes mine (bytes) and returns when all[r * bytes ..] holds rank r's, r < world
static inline void rendezvous_allgather(Rendezvous* rz, int round, const void* mine, void* all, size_t bytes) {
    char name[RENDEZVOUS_PATH_MAX + 64];
    rendezvous_record_name(name, rz, round, rz->rank);
    rendezvous_write_check(name, rz->rank, rz->nonce, mine, bytes);
    int* ranks = (int*)malloc_check((size_t)rz->world * sizeof(int));
    for (int r = 0; r < rz->world; r++) { ranks[r] = r; }
    rendezvous_gather(rz, round, ranks, rz->world, all, bytes);
    free(ranks);
}

// rank 0's data[0 .. bytes) of `round` on every rank
static inline void rendezvous_broadcast(Rendezvous* rz, int round, void* data, size_t bytes) {
    char name[RENDEZVOUS_PATH_MAX + 64];
    int zero = 0;
    rendezvous_record_name(name, rz, round, 0);
    if (rz->rank == 0) { rendezvous_write_check(name, 0, rz->nonce, data, bytes); }
    else { rendezvous_gather(rz, round, &zero, 1, data, bytes); }
}

// a fresh 64-bit nonce, never 0
static inline uint64_t rendezvous_new_nonce(void) {
    uint64_t n = 0;
    FILE* fp = fopen("/dev/urandom", "rb");
    if (fp == NULL || fread(&n, sizeof(n), 1, fp) != 1) { n = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid() << 20; }
    if (fp != NULL) { fclose(fp); }
    return n == 0 ? 1 : n;
}

// Rank 0, when P announces a run that reported no failure: when a running process joined that run as rank 0, this is
// a second rank 0 of it and dies reporting that to the run (its nonce); else dies without touching the run
static inline void rendezvous_refuse(Rendezvous* rz, uint64_t nonce) {
    char name[RENDEZVOUS_PATH_MAX + 64];
    RendezvousHeader h;
    RendezvousPeer first;
    rz->nonce = nonce;
    rendezvous_record_name(name, rz, RDZ_JOIN, 0);
    if (rendezvous_read(name, &h, &first, sizeof(first), NULL) && !rendezvous_peer_gone(&first)) { rendezvous_die_claimed(rz, name); }
    rz->nonce = 0;
    die("rendezvous file '%s' already exists and no rank of its run reported a failure: another run may be using "
        "it (or one was killed): remove it or use a fresh path", rz->path);
}

// rank 0: removes what earlier runs left (refusing a P that may be live, or the path of a run that trains), joins
// this run and announces it in P
static inline void rendezvous_announce(Rendezvous* rz) {
    RendezvousHeader h;
    if (rendezvous_read(rz->path, &h, NULL, 0, NULL)) {
        if (!rendezvous_error_of(rz->path, h.nonce, NULL, NULL)) { rendezvous_refuse(rz, h.nonce); }
        rendezvous_unlink(rz->path);   // left by a run that failed
    } else {
        rendezvous_refuse_beating(rz);   // its heartbeat files are among those removed next
    }
    rendezvous_remove_channel_files(rz->path);
    rz->nonce = rendezvous_new_nonce();
    rendezvous_claim(rz);   // before P, so that a second rank 0 that reads P finds the first one's record
    int64_t at_ns = rendezvous_wall_ns();
    rendezvous_write_check(rz->path, rz->world, rz->nonce, &at_ns, sizeof(at_ns));
}

// Ranks > 0: waits for the announcement of a run in P and takes its nonce, so that from here on this rank's failures
// are reported to that run; the first is a world size other than the announced one. A run that failed is waited past
// when it was announced before this process began (an earlier run's P), and stops this rank with its cause when it
// was announced after that: it is this rank's run, failed before this rank read its announcement.
static inline void rendezvous_await_announcement(Rendezvous* rz) {
    double t0 = rendezvous_now();
    RendezvousHeader h;
    int64_t at_ns;
    int failed = 0, looked = 0;
    for (;;) {
        int found = rendezvous_read_announcement(rz->path, &h, &at_ns, &failed);
        if (found && !failed) { break; }
        if (found && at_ns > rz->opened_ns) { rz->nonce = h.nonce; rendezvous_check_peers(rz); }
        if (!found && !looked) { rendezvous_refuse_beating(rz); looked = 1; }   // no announcement: is this rank training?
        if (rendezvous_now() - t0 > rz->timeout_s) {
            die("rendezvous timed out: no announcement from rank 0 in '%s' after %.1f s (is rank 0 running, with the same "
                "path?)", rz->path, rz->timeout_s);
        }
        usleep(RENDEZVOUS_POLL_US);
    }
    rz->nonce = h.nonce;
    if (h.tag != rz->world) {
        die("world size mismatch: rank 0 announced a run of world size %d in '%s', this process (rank %d) has world size %d",
            h.tag, rz->path, rz->rank, rz->world);
    }
}

// Joins the run on path as rank `rank` of `world`: rank 0 cleans up and announces it, the others wait for that,
// then every rank waits for all the others (their process ids into rz->peers; a joined process of this node that is
// gone, as in the files of a run killed without a report, stops this rank at once). Dies after timeout_s seconds,
// and when a running process is this rank of a run on path already. From the announcement until rendezvous_close,
// die() and exit() on this rank are reported to the others; from the join on, this rank beats in P.alive.<rank>
// and a rank whose heartbeat stays silent_s is a problem (rendezvous_peer_problem).
static inline void rendezvous_open(Rendezvous* rz, const char* path, int rank, int world, double timeout_s, double silent_s) {
    memset(rz, 0, sizeof(*rz));
    if (strlen(path) >= RENDEZVOUS_PATH_MAX) { die("rendezvous path '%s' is too long", path); }
    rz->path = path; rz->rank = rank; rz->world = world; rz->timeout_s = timeout_s; rz->silent_s = silent_s;
    rz->opened_ns = rendezvous_wall_ns();
    RendezvousPeer* peers = (RendezvousPeer*)malloc_check((size_t)world * sizeof(RendezvousPeer));
    int* ranks = (int*)malloc_check((size_t)world * sizeof(int));
    for (int r = 0; r < world; r++) { ranks[r] = r; }
    rendezvous_open_channel = rz;
    die_hook = rendezvous_die_hook;
    static int exit_hook_set = 0;
    if (!exit_hook_set && atexit(rendezvous_exit_hook) == 0) { exit_hook_set = 1; }
    char name[RENDEZVOUS_PATH_MAX + 64];
    if (rank == 0) { rendezvous_announce(rz); }   // which writes rank 0's join record
    for (;;) {
        if (rank > 0) { rendezvous_await_announcement(rz); rendezvous_claim(rz); }
        if (rendezvous_gather(rz, RDZ_JOIN, ranks, world, peers, sizeof(RendezvousPeer))) { break; }
        rendezvous_record_name(name, rz, RDZ_JOIN, rank);   // rank 0 replaced P: this record is of no run
        rendezvous_unlink(name);
    }
    free(ranks);
    rz->peers = peers;
    rendezvous_check_peers(rz);   // a join record of a process that is gone: files of a run killed without a report
    rendezvous_start_heartbeat(rz);
}

// rank 0, once every rank has read every round: removes P and the round files (P.error stays until the next run)
static inline void rendezvous_remove_rounds(const Rendezvous* rz) {
    if (rz->rank != 0) { return; }
    char name[RENDEZVOUS_PATH_MAX + 64];
    rendezvous_unlink(rz->path);
    for (int round = 0; round < RDZ_NUM_ROUNDS; round++) {
        for (int r = 0; r < rz->world; r++) {
            rendezvous_record_name(name, rz, round, r);
            rendezvous_unlink(name);
        }
    }
}

// stops the heartbeat thread and removes this rank's P.alive.<rank>
static inline void rendezvous_stop_heartbeat(Rendezvous* rz) {
    char name[RENDEZVOUS_PATH_MAX + 64];
    rz->beat_stop = 1;
    pthread_join(rz->beat_thread, NULL);
    close(rz->beat_fd);
    rendezvous_name(name, rz->path, rendezvous_round_names[RDZ_ALIVE], rz->rank);
    rendezvous_unlink(name);
    free(rz->heard);
    rz->heard = NULL;
}

// the run finished: exiting is no longer a failure to report, and the heartbeat stops
static inline void rendezvous_close(Rendezvous* rz) {
    rz->closed = 1;
    if (rendezvous_open_channel == rz) { rendezvous_open_channel = NULL; die_hook = NULL; }
    if (rz->heard != NULL) { rendezvous_stop_heartbeat(rz); }
    free(rz->peers);
    rz->peers = NULL;
}

#endif
