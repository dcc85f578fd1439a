// Tests of llmc/rendezvous.h and llmc/agreement.h with 2-4 forked processes as the ranks of a run (no GPU): the
// join, the agreement round and the id broadcast in any start order; a disagreement in one field stops every rank
// with the field and the ranks named; a rank that dies (die(), a plain exit, SIGKILL) stops the others with its
// cause within a few poll intervals, whether they wait in a round or poll like the training watchdog; an early
// failure (a world size other than rank 0's) stops the others at once, whether they joined or still wait for the
// announcement, and a run on the same path then works; a second process for a rank stops naming the first, during
// the rendezvous (every rank stops) and after it (the run goes on); a stopped rank (SIGSTOP) is named by the others
// after the heartbeat bound, while a slow rank and a suspended run are not stopped; a rank that never starts is a
// timeout on the others; files left by a failed run are cleaned up and their stale id never read; and the flag,
// launcher and GPU checks. Heartbeat scenarios use a bound of 0.5 s and run in a second process next to the others.
#include <signal.h>
#include <stddef.h>
#include "llmc/rendezvous.h"
#include "llmc/agreement.h"
#include "dev/test/test_common.h"

#define MAX_RANKS 4
#define FAILURE_BOUND_S 3.0   // the others must stop this soon after a rank failed (poll interval: 10 ms)
#define SILENT_S 5.0          // the heartbeat bound of the scenarios that do not test it
#define SHORT_SILENT_S 0.5    // ... and of those that do (a heartbeat every 0.1 s)
#define FINISH_US 200000      // ranks that trained wait this long without polling before they exit (see train)

static char tmpdir[] = "/tmp/test_rendezvous_XXXXXX";
static char path[RENDEZVOUS_PATH_MAX];
static const unsigned char payload[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};

enum { FAIL_NONE, FAIL_DIE, FAIL_EXIT, FAIL_KILL, FAIL_STOP };
enum { AT_AGREEMENT, AT_TRAINING };

// what the ranks of one scenario do
typedef struct {
    int world;
    int world_of[MAX_RANKS];           // the world size this rank is started with (0: world)
    double timeout_s;
    double silent_s;                   // every rank's heartbeat bound
    double start_delay_s[MAX_RANKS];   // before joining
    int absent_rank;                   // never starts (-1: none)
    int fail_rank, fail_kind, fail_at; // an injected failure (fail_kind FAIL_NONE: none)
    int differ_rank[MAX_RANKS];        // these ranks change `differ_field` (1 = changed)
    size_t differ_field;               // index into RunAgreement
    double train_s;                    // how long ranks poll for failures after the id, as the watchdog does
    int dup_rank;                      // a second process joins as this rank (-1: none) ...
    double dup_delay_s;                // ... this long after the others started
    int slow_rank;                     // this rank works slow_s without polling before the agreement (-1: none)
    double slow_s;
    double remove_rounds_at_s;         // rank 0 removes P and the round files this long into training, as the trainer
                                       // does once the communicator is up (0: never)
    double suspend_at_s, suspend_s;    // the whole run is stopped (SIGSTOP) this long after the start, for suspend_s
} Scenario;

static Scenario sc;

// the outcome of every rank's process, and at index world that of the duplicate
typedef struct { int status[MAX_RANKS + 1]; char err[MAX_RANKS + 1][2048]; pid_t pid[MAX_RANKS + 1]; double seconds; } Outcome;

static RunAgreement base_agreement(void) {
    RunAgreement a;
    memset(&a, 0, sizeof(a));
    a.world_size = sc.world; a.family = 0; a.num_layers = 6; a.channels = 384; a.micro_batch = 8; a.seq_len = 256;
    a.total_batch = 8192; a.max_steps = 20; a.lr = agreement_double(1e-3); a.seed = 1337;
    return a;
}

// FAIL_STOP: run_world continues the process once the others ended; it then goes on and meets their report
static void inject_failure(int rank) {
    if (sc.fail_kind == FAIL_DIE) { die("injected failure on rank %d", rank); }
    if (sc.fail_kind == FAIL_EXIT) { exit(3); }
    if (sc.fail_kind == FAIL_KILL) { raise(SIGKILL); }
    if (sc.fail_kind == FAIL_STOP) { raise(SIGSTOP); }
}

// polls for failures for train_s, as the watchdog does (counted polls, so that a suspended run goes on polling when
// it resumes); rank 0 removes the rounds on the way when the scenario says. Then waits FINISH_US without polling, so
// that no rank sees another one's exit at the end as a failure (the trainer's final barrier).
static void train(Rendezvous* rz, int rank) {
    int polls = (int)(sc.train_s * 1e6 / RENDEZVOUS_POLL_US), remove_at = (int)(sc.remove_rounds_at_s * 1e6 / RENDEZVOUS_POLL_US);
    for (int i = 0; i < polls; i++) {
        if (rank == sc.fail_rank && sc.fail_at == AT_TRAINING && i == 10) { inject_failure(rank); }
        if (rank == 0 && remove_at > 0 && i == remove_at) { rendezvous_remove_rounds(rz); }
        rendezvous_check_peers(rz);
        usleep(RENDEZVOUS_POLL_US);
    }
    if (polls > 0) { usleep(FINISH_US); }
}

// one rank of the scenario after `delay` s: join, agree, receive the id, poll for failures; exit code 0 when all
// went well
static void rank_main(int rank, double delay) {
    usleep((useconds_t)(delay * 1e6));
    Rendezvous rz;
    rendezvous_open(&rz, path, rank, sc.world_of[rank] > 0 ? sc.world_of[rank] : sc.world, sc.timeout_s, sc.silent_s);
    if (rank == sc.fail_rank && sc.fail_at == AT_AGREEMENT) { usleep(100000); inject_failure(rank); }
    if (rank == sc.slow_rank) { usleep((useconds_t)(sc.slow_s * 1e6)); }
    RunAgreement mine = base_agreement(), all[MAX_RANKS];
    if (sc.differ_rank[rank]) { ((int64_t*)&mine)[sc.differ_field] += 1000 + rank; }
    rendezvous_allgather(&rz, RDZ_AGREE, &mine, all, sizeof(mine));
    run_agreement_check(all, sc.world);
    unsigned char id[sizeof(payload)];
    memset(id, 0, sizeof(id));
    if (rank == 0) { memcpy(id, payload, sizeof(id)); }
    rendezvous_broadcast(&rz, RDZ_ID, id, sizeof(id));
    if (memcmp(id, payload, sizeof(id)) != 0) { die("rank %d received another id", rank); }
    train(&rz, rank);
    rendezvous_close(&rz);
    exit(0);
}

// process p's stderr (from fd) and exit code (-signal when killed) into *o; a process that may stop (SIGSTOP) is
// continued first
static void collect(Outcome* o, int p, int fd, int may_stop) {
    int status = 0, stopped = 0;
    if (may_stop && waitpid(o->pid[p], &status, WUNTRACED) == o->pid[p] && WIFSTOPPED(status)) {
        stopped = 1;
        kill(o->pid[p], SIGCONT);
    }
    ssize_t got = 0, n;
    while ((n = read(fd, o->err[p] + got, sizeof(o->err[p]) - 1 - (size_t)got)) > 0) { got += n; }
    close(fd);
    if (!may_stop || stopped) { waitpid(o->pid[p], &status, 0); }
    o->status[p] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// stops every process of the run for sc.suspend_s, sc.suspend_at_s after the start (a job that is suspended)
static void suspend_all(const Outcome* o, int procs) {
    usleep((useconds_t)(sc.suspend_at_s * 1e6));
    for (int p = 0; p < procs; p++) { if (o->pid[p] > 0) { kill(o->pid[p], SIGSTOP); } }
    usleep((useconds_t)(sc.suspend_s * 1e6));
    for (int p = 0; p < procs; p++) { if (o->pid[p] > 0) { kill(o->pid[p], SIGCONT); } }
}

// runs the scenario's ranks (and its duplicate, as process `world`) as forked processes; their exit codes
// (-signal when killed) and stderr into *o. A rank that stops itself is continued once the others ended.
static void run_world(Outcome* o) {
    int fds[MAX_RANKS + 1][2];
    int procs = sc.world + (sc.dup_rank >= 0), stop_rank = sc.fail_kind == FAIL_STOP ? sc.fail_rank : -1;
    memset(o, 0, sizeof(*o));
    double t0 = rendezvous_now();
    fflush(stdout);
    for (int p = 0; p < procs; p++) {
        o->pid[p] = -1;
        if (p == sc.absent_rank) { continue; }
        if (pipe(fds[p]) != 0) { die("pipe failed"); }
        o->pid[p] = fork();
        if (o->pid[p] == 0) {
            dup2(fds[p][1], 2);
            for (int k = 0; k <= p; k++) { if (o->pid[k] != -1) { close(fds[k][0]); } }
            if (p == sc.world) { rank_main(sc.dup_rank, sc.dup_delay_s); }
            rank_main(p, sc.start_delay_s[p]);
        }
        close(fds[p][1]);
    }
    if (sc.suspend_s > 0.0) { suspend_all(o, procs); }
    for (int p = 0; p < procs; p++) {
        if (o->pid[p] != -1 && p != stop_rank) { collect(o, p, fds[p][0], 0); }
    }
    if (stop_rank >= 0) { collect(o, stop_rank, fds[stop_rank][0], 1); }
    o->seconds = rendezvous_now() - t0;
}

static void new_scenario(const char* name, int world) {
    memset(&sc, 0, sizeof(sc));
    sc.world = world;
    sc.timeout_s = 20.0;
    sc.silent_s = SILENT_S;
    sc.absent_rank = -1;
    sc.fail_rank = -1;
    sc.dup_rank = -1;
    sc.slow_rank = -1;
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
}

// 1 when every rank except `skip` exited non-zero with `expect` in its stderr; prints the others
static int others_fail_with(const Outcome* o, int skip, const char* expect) {
    int ok = 1;
    for (int r = 0; r < sc.world; r++) {
        if (r == skip) { continue; }
        if (o->status[r] == 0 || strstr(o->err[r], expect) == NULL) {
            printf("  rank %d: status %d, stderr: %s\n", r, o->status[r], o->err[r]);
            ok = 0;
        }
    }
    return ok;
}

// number of files in the temporary folder that belong to the channel of `path` (P or P.*)
static int channel_files_left(void) {
    const char* base = strrchr(path, '/') + 1;
    DIR* d = opendir(tmpdir);
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) { n += strcmp(e->d_name, base) == 0 || rendezvous_is_channel_file(e->d_name, base); }
    closedir(d);
    return n;
}

// after a successful run: rank 0's clean-up (done in the trainer once NCCL is up, with the run's nonce, here P's)
// leaves nothing
static void remove_rounds_as_rank0(void) {
    Rendezvous rz;
    RendezvousHeader h;
    memset(&rz, 0, sizeof(rz));
    rz.path = path; rz.world = sc.world;
    if (rendezvous_read(path, &h, NULL, 0, NULL)) { rz.nonce = h.nonce; }
    rendezvous_remove_rounds(&rz);
}

static void test_success(void) {
    new_scenario("ok", 3);
    sc.start_delay_s[0] = 0.3;   // ranks 1 and 2 start first and wait for rank 0
    Outcome o;
    run_world(&o);
    CHECK(o.status[0] == 0 && o.status[1] == 0 && o.status[2] == 0, "3 ranks, rank 0 last: join, agree and get the id "
          "(status %d %d %d, stderr: %s%s%s)", o.status[0], o.status[1], o.status[2], o.err[0], o.err[1], o.err[2]);
    CHECK(channel_files_left() == 1 + 3 + 3 + 1, "before clean-up: P, 3 join and 3 agreement files, rank 0's id file "
          "(%d files)", channel_files_left());
    remove_rounds_as_rank0();
    CHECK(channel_files_left() == 0, "rank 0's clean-up removes every file of the run (%d left)", channel_files_left());

    new_scenario("ok4", 4);
    sc.start_delay_s[3] = 0.2; sc.start_delay_s[1] = 0.1;
    run_world(&o);
    CHECK(o.status[0] == 0 && o.status[1] == 0 && o.status[2] == 0 && o.status[3] == 0, "4 ranks in another start order");
    remove_rounds_as_rank0();
}

static void test_disagreement(void) {
    new_scenario("differ", 4);
    sc.differ_rank[2] = sc.differ_rank[3] = 1;
    sc.differ_field = offsetof(RunAgreement, total_batch) / sizeof(int64_t);
    Outcome o;
    run_world(&o);
    CHECK(others_fail_with(&o, -1, "the ranks disagree on total_batch, total batch (-d, or the checkpoint's): rank 0 has "
                                   "8192, rank 2 has 9194 (ranks that differ from rank 0: 2, 3)"),
          "ranks 2 and 3 with another total batch: all 4 ranks stop naming the field, the values and the ranks");
    remove_rounds_as_rank0();

    new_scenario("resume", 2);
    sc.differ_rank[1] = 1;
    sc.differ_field = offsetof(RunAgreement, resume_step) / sizeof(int64_t);
    run_world(&o);
    CHECK(others_fail_with(&o, -1, "disagree on resume_step"), "rank 1 resumes, rank 0 starts fresh: both stop");
    remove_rounds_as_rank0();

    new_scenario("seed", 3);
    sc.differ_rank[1] = 1;
    sc.differ_field = offsetof(RunAgreement, seed) / sizeof(int64_t);
    run_world(&o);
    CHECK(others_fail_with(&o, -1, "disagree on seed, seed (-r, or the checkpoint's): rank 0 has 1337, rank 1 has 2338"),
          "3 ranks, rank 1 with another seed: all stop");
    remove_rounds_as_rank0();
}

// runs a scenario where `rank` fails in `kind` at `at`; checks that every other rank stops with `expect`, soon
static void check_failure_reaches_all(const char* name, int world, int rank, int kind, int at, const char* expect, const char* what) {
    new_scenario(name, world);
    sc.fail_rank = rank; sc.fail_kind = kind; sc.fail_at = at;
    sc.train_s = 10.0;   // the others would poll this long without the failure
    Outcome o;
    run_world(&o);
    int failed_itself = o.status[rank] != 0;
    CHECK(failed_itself && others_fail_with(&o, rank, expect) && o.seconds < 0.3 + FAILURE_BOUND_S,
          "%s: every other rank stops with the cause within %.1f s (took %.2f s)", what, FAILURE_BOUND_S, o.seconds);
    rendezvous_remove_channel_files(path);
    rendezvous_unlink(path);
}

static void test_failures(void) {
    check_failure_reaches_all("die_agree", 3, 1, FAIL_DIE, AT_AGREEMENT, "rank 1 stopped: injected failure on rank 1",
                              "rank 1 dies before the agreement");
    check_failure_reaches_all("die_train", 4, 3, FAIL_DIE, AT_TRAINING, "rank 3 stopped: injected failure on rank 3",
                              "rank 3 dies while the others train");
    check_failure_reaches_all("exit_train", 3, 0, FAIL_EXIT, AT_TRAINING, "rank 0 stopped: it exited before the end of the run",
                              "rank 0 exits (not through die) while the others train");
    check_failure_reaches_all("kill_train", 2, 1, FAIL_KILL, AT_TRAINING, "rank 1 (process",
                              "rank 1 is killed (SIGKILL, no message) while rank 0 trains");
    check_failure_reaches_all("kill_agree", 3, 2, FAIL_KILL, AT_AGREEMENT, "is gone without a message",
                              "rank 2 is killed before the agreement");

    new_scenario("absent", 3);
    sc.absent_rank = 2;
    sc.timeout_s = 0.5;
    Outcome o;
    run_world(&o);
    CHECK(others_fail_with(&o, 2, "rank 2 of 3 did not join") && o.seconds < 0.5 + FAILURE_BOUND_S,
          "a rank that never starts: ranks 0 and 1 stop after the timeout (%.2f s for 0.5 s)", o.seconds);
    rendezvous_remove_channel_files(path);
    rendezvous_unlink(path);
}

// Rank 2 of 3 is started with world size 4, rank 0 `rank0_delay` s and rank 2 `rank2_delay` s after rank 1: rank 2
// stops on rank 0's announcement, and the other ranks stop with its cause, soon (not at the timeout), whether they
// joined already or still waited for the announcement; a new run on the same path then works, its rank 1 first
static void check_world_mismatch(const char* name, double rank0_delay, double rank2_delay, const char* what) {
    new_scenario(name, 3);
    sc.world_of[2] = 4;
    sc.start_delay_s[0] = rank0_delay; sc.start_delay_s[2] = rank2_delay;
    sc.timeout_s = 5.0;
    double delay = rank0_delay > rank2_delay ? rank0_delay : rank2_delay;
    Outcome o;
    run_world(&o);
    int failed_itself = o.status[2] != 0 && strstr(o.err[2], "world size mismatch: rank 0 announced a run of world size 3") != NULL;
    if (!failed_itself) { printf("  rank 2: status %d, stderr: %s\n", o.status[2], o.err[2]); }
    CHECK(failed_itself && others_fail_with(&o, 2, "rank 2 stopped: world size mismatch") && o.seconds < delay + FAILURE_BOUND_S,
          "%s: ranks 0 and 1 stop with rank 2's cause within %.1f s (took %.2f s for a timeout of %.0f s)", what,
          FAILURE_BOUND_S, o.seconds, sc.timeout_s);
    new_scenario(name, 2);
    sc.start_delay_s[0] = 0.2;
    run_world(&o);
    CHECK(o.status[0] == 0 && o.status[1] == 0, "%s: then a run of 2 ranks on the same path works, rank 1 first (stderr: %s%s)",
          what, o.err[0], o.err[1]);
    remove_rounds_as_rank0();
}

// rank 0 of a run of 2, after 0.2 s: announces it and reports a failure, the error file first, so that no reader sees
// the announcement before the failure
static void announce_failed_run_later(void) {
    usleep(200000);
    char name[RENDEZVOUS_PATH_MAX + 64];
    RendezvousError e;
    memset(&e, 0, sizeof(e));
    e.who = rendezvous_self();
    snprintf(e.text, sizeof(e.text), "injected early failure");
    uint64_t nonce = 0x9abc;
    rendezvous_name(name, path, "error", -1);
    rendezvous_write_check(name, 0, nonce, &e, sizeof(e.who) + strlen(e.text));
    int64_t at_ns = rendezvous_wall_ns();
    rendezvous_write_check(path, 2, nonce, &at_ns, sizeof(at_ns));
}

static void join_as_rank1_of_2_waiting(void) {
    Rendezvous rz;
    rendezvous_open(&rz, path, 1, 2, 3.0, SILENT_S);
}

static void test_early_failures(void) {
    check_world_mismatch("world_late", 0.0, 0.3, "rank 2 of 3 starts with -G 4 after ranks 0 and 1 joined");
    check_world_mismatch("world_early", 0.2, 0.0, "ranks 1 and 2 of 3 (-G 4) wait for rank 0's announcement");

    // the P of an earlier run of world size 4 that failed: a rank 1 of 2 that starts first waits for the new P
    new_scenario("stale_world", 2);
    uint64_t old = 0x5678;
    char name[RENDEZVOUS_PATH_MAX + 64];
    rendezvous_write_check(path, 4, old, NULL, 0);
    rendezvous_name(name, path, "error", -1);
    rendezvous_write_check(name, 3, old, "stale", 5);
    sc.start_delay_s[0] = 0.3;
    Outcome o;
    run_world(&o);
    CHECK(o.status[0] == 0 && o.status[1] == 0, "a failed run of world size 4 left P: rank 1 of a run of 2 that starts "
          "before rank 0 joins the new run (stderr: %s%s)", o.err[0], o.err[1]);
    remove_rounds_as_rank0();

    // rank 1 waits; its run is announced after it began and has failed before it could read the announcement
    new_scenario("failed_first", 2);
    fflush(stdout);
    pid_t writer = fork();
    if (writer == 0) { announce_failed_run_later(); _exit(0); }
    double t0 = rendezvous_now();
    CHECK(child_fails_with(join_as_rank1_of_2_waiting, "rank 1 of 2 stops: rank 0 stopped: injected early failure"),
          "a run announced after rank 1 began, failed before rank 1 read it: rank 1 stops with its cause");
    CHECK(rendezvous_now() - t0 < 2.0, "soon, not at the 3 s timeout (%.2f s)", rendezvous_now() - t0);
    waitpid(writer, NULL, 0);
    rendezvous_remove_channel_files(path);
    rendezvous_unlink(path);
}

// Rank `rank` of a run of `world` gets a second process, `delay` s after the others started (rank 0 `rank0_delay`
// s after them): the one that joins second stops naming the first one's process id, and every rank of the run stops
// with that cause, soon
static void check_duplicate(const char* name, int world, int rank, double delay, double rank0_delay, const char* what) {
    new_scenario(name, world);
    sc.dup_rank = rank; sc.dup_delay_s = delay; sc.start_delay_s[0] = rank0_delay;
    sc.train_s = 5.0;   // the ranks would poll this long without the failure
    Outcome o;
    run_world(&o);
    char first_is_orig[128], first_is_dup[128];   // the message of the process that came second
    snprintf(first_is_orig, sizeof(first_is_orig), "rank %d is claimed twice: process %d joined", rank, (int)o.pid[rank]);
    snprintf(first_is_dup, sizeof(first_is_dup), "rank %d is claimed twice: process %d joined", rank, (int)o.pid[world]);
    int named = (o.status[world] != 0 && strstr(o.err[world], first_is_orig) != NULL) ||
                (o.status[rank] != 0 && strstr(o.err[rank], first_is_dup) != NULL);
    if (!named) { printf("  duplicate: status %d, stderr: %s\n", o.status[world], o.err[world]); }
    CHECK(named && o.status[world] != 0 && others_fail_with(&o, -1, "claimed twice") && o.seconds < delay + rank0_delay + FAILURE_BOUND_S,
          "%s: the second stops naming the first's process id, every rank stops with that cause (%.2f s)", what, o.seconds);
    rendezvous_remove_channel_files(path);
    rendezvous_unlink(path);
}

static void test_duplicates(void) {
    check_duplicate("dup1", 2, 1, 0.2, 0.0, "a second rank 1 while the run trains");
    check_duplicate("dup0", 3, 0, 0.2, 0.0, "a second rank 0 while the run trains");
    check_duplicate("dup_race", 2, 1, 0.0, 0.2, "two rank 1 processes that wait for rank 0 and join at once");
}

// A second process for rank `rank` of 2 starts once rank 0 removed P and the round files (the run trains): it stops
// naming the first one's process id, without touching the run, which ends well and leaves no file
static void check_duplicate_in_training(const char* name, int rank, const char* what) {
    new_scenario(name, 2);
    sc.dup_rank = rank; sc.dup_delay_s = 0.2;
    sc.remove_rounds_at_s = 0.05; sc.train_s = 0.5; sc.silent_s = SHORT_SILENT_S; sc.timeout_s = 2.0;
    Outcome o;
    run_world(&o);
    char expect[128];
    snprintf(expect, sizeof(expect), "rank %d is claimed twice: process %d runs as rank %d", rank, (int)o.pid[rank], rank);
    int named = o.status[2] != 0 && strstr(o.err[2], expect) != NULL;
    if (!named) { printf("  duplicate: status %d, stderr: %s\n", o.status[2], o.err[2]); }
    CHECK(named && o.status[0] == 0 && o.status[1] == 0 && channel_files_left() == 0, "%s: it stops naming the first's "
          "process id, the run ends well, no file is left (status %d %d, %d files; stderr: %s%s)", what, o.status[0],
          o.status[1], channel_files_left(), o.err[0], o.err[1]);
}

// rank `rank` of 3 is stopped (SIGSTOP) at `at`: the others stop naming it once its heartbeat was still for the bound,
// and it stops with their report once it is continued
static void check_stopped_rank(const char* name, int rank, int at, const char* what) {
    new_scenario(name, 3);
    sc.fail_rank = rank; sc.fail_kind = FAIL_STOP; sc.fail_at = at;
    sc.silent_s = SHORT_SILENT_S; sc.timeout_s = 5.0; sc.train_s = 5.0;
    Outcome o;
    run_world(&o);
    char expect[128];
    snprintf(expect, sizeof(expect), "rank %d (process %d) sent no heartbeat for %.1f s", rank, (int)o.pid[rank], sc.silent_s);
    int told = o.status[rank] != 0 && strstr(o.err[rank], "sent no heartbeat") != NULL;
    if (!told) { printf("  rank %d: status %d, stderr: %s\n", rank, o.status[rank], o.err[rank]); }
    CHECK(others_fail_with(&o, rank, expect) && told && o.seconds < 0.1 + sc.silent_s + FAILURE_BOUND_S, "%s: the others "
          "stop naming it after %.1f s without its heartbeat, and so does it once continued (took %.2f s; the timeout is "
          "%.0f s)", what, sc.silent_s, o.seconds, sc.timeout_s);
    rendezvous_remove_channel_files(path);
    rendezvous_unlink(path);
}

static void test_heartbeats(void) {
    check_stopped_rank("stop_train", 1, AT_TRAINING, "rank 1 is stopped (SIGSTOP) while the others train");
    check_stopped_rank("stop_agree", 2, AT_AGREEMENT, "rank 2 is stopped before the agreement");

    new_scenario("slow", 3);
    sc.slow_rank = 1; sc.slow_s = 0.3 + SHORT_SILENT_S;
    sc.silent_s = SHORT_SILENT_S;
    Outcome o;
    run_world(&o);
    CHECK(o.status[0] == 0 && o.status[1] == 0 && o.status[2] == 0, "a rank busy for longer than the heartbeat bound (a long "
          "step) while the others wait: it beats, the run goes on (stderr: %s%s%s)", o.err[0], o.err[1], o.err[2]);
    remove_rounds_as_rank0();

    new_scenario("suspend", 3);
    sc.silent_s = SHORT_SILENT_S; sc.train_s = 0.4;
    sc.suspend_at_s = 0.2; sc.suspend_s = 0.3 + SHORT_SILENT_S;
    run_world(&o);
    CHECK(o.status[0] == 0 && o.status[1] == 0 && o.status[2] == 0, "the whole run stopped for longer than the bound (a "
          "suspended job) goes on when continued (stderr: %s%s%s)", o.err[0], o.err[1], o.err[2]);
    remove_rounds_as_rank0();

    check_duplicate_in_training("dup1_train", 1, "a second rank 1 after the rendezvous");
    check_duplicate_in_training("dup0_train", 0, "a second rank 0 after the rendezvous");
}

// writes a rendezvous file named P<suffix> with tag and nonce
static void write_stale(const char* suffix, int tag, uint64_t nonce) {
    char name[RENDEZVOUS_PATH_MAX + 64];
    snprintf(name, sizeof(name), "%s%s", path, suffix);
    rendezvous_write_check(name, tag, nonce, "stale", 5);
}

static void announce_as_rank0(void) {
    Rendezvous rz;
    memset(&rz, 0, sizeof(rz));
    rz.path = path; rz.world = 2; rz.timeout_s = 1.0;
    rendezvous_announce(&rz);
}

static void join_as_rank1_of_2(void) {
    Rendezvous rz;
    rendezvous_open(&rz, path, 1, 2, 0.3, SILENT_S);
}

static void test_leftovers(void) {
    // a failed run left P, its error file, join and round files: a rank 1 that starts first must not join it
    new_scenario("stale", 2);
    uint64_t old = 0x1234;
    char stale_p[RENDEZVOUS_PATH_MAX + 64];
    snprintf(stale_p, sizeof(stale_p), "%s", path);
    rendezvous_write_check(stale_p, 2, old, NULL, 0);
    write_stale(".error", 1, old);
    write_stale(".joined.1", 1, old);
    write_stale(".joined.7", 7, old);
    write_stale(".agree.0", 0, old);
    write_stale(".id.0.tmp4242", 0, old);
    sc.start_delay_s[0] = 0.3;
    Outcome o;
    run_world(&o);
    CHECK(o.status[0] == 0 && o.status[1] == 0, "after a failed run on the same path (rank 1 first): both ranks join the "
          "new run (stderr: %s%s)", o.err[0], o.err[1]);
    remove_rounds_as_rank0();
    CHECK(channel_files_left() == 0, "rank 0 removed the failed run's files (%d left)", channel_files_left());

    // a run killed without a report left every file, its id included: a rank 1 that starts first stops at once
    // instead of reading that id, because the process of rank 0's join record is gone
    new_scenario("killed_run", 2);
    pid_t dead = fork();
    if (dead == 0) { _exit(0); }
    waitpid(dead, NULL, 0);
    RendezvousPeer stale_peer = rendezvous_self();
    stale_peer.pid = dead;
    char name[RENDEZVOUS_PATH_MAX + 64];
    rendezvous_write_check(path, 2, old, NULL, 0);
    snprintf(name, sizeof(name), "%s.joined.0.%016llx", path, (unsigned long long)old);
    rendezvous_write_check(name, 0, old, &stale_peer, sizeof(stale_peer));
    write_stale(".id.0", 0, old);
    double t0 = rendezvous_now();
    CHECK(child_fails_with(join_as_rank1_of_2, "rank 0 (process"), "the files of a killed run: rank 1 stops, naming rank 0 as gone");
    CHECK(rendezvous_now() - t0 < 0.3, "at once, not after the timeout (%.2f s)", rendezvous_now() - t0);
    rendezvous_remove_channel_files(path);
    rendezvous_unlink(path);

    // a stale P whose run reported no failure may be live: refused
    new_scenario("live", 2);
    rendezvous_write_check(path, 2, old, NULL, 0);
    CHECK(child_fails_with(announce_as_rank0, "already exists"), "rank 0 refuses a P that no failure report explains");
    rendezvous_unlink(path);

    // a P for another world size, and a file that is no rendezvous file
    rendezvous_write_check(path, 4, old, NULL, 0);
    CHECK(child_fails_with(join_as_rank1_of_2, "world size mismatch: rank 0 announced a run of world size 4"),
          "a P for another world size is refused");
    FILE* fp = fopen_check(path, "wb");
    fwrite_check("garbage!garbage!", 1, 16, fp);
    fclose_check(fp);
    CHECK(child_fails_with(join_as_rank1_of_2, "not a rendezvous file"), "a foreign file is refused");
    rendezvous_unlink(path);
    CHECK(child_fails_with(join_as_rank1_of_2, "no announcement from rank 0"), "no rank 0: a clear timeout");

    const char* yes[] = {"rdz.joined.3", "rdz.agree.12", "rdz.id.0", "rdz.error", "rdz.tmp77", "rdz.joined.3.tmp12", "rdz.error.tmp9",
                         "rdz.joined.3.00000000deadbeef", "rdz.joined.0.0123456789abcdef.tmp5"};
    const char* no[] = {"rdz", "rdz.cfg", "rdzx.joined.1", "rdz.joined.", "rdz.joined.x", "rdz.error.tmp", "other.error",
                        "rdz.joined.3.deadbeef", "rdz.joined.3.0123456789ABCDEF"};
    int ok = 1;
    for (int i = 0; i < 9; i++) { ok &= rendezvous_is_channel_file(yes[i], "rdz") && !rendezvous_is_channel_file(no[i], "rdz"); }
    CHECK(ok, "the clean-up removes exactly the channel's own file names");
}

static void test_agreement_text(void) {
    sc.world = 2;
    RunAgreement all[2] = {base_agreement(), base_agreement()};
    char msg[1024] = "";
    CHECK(!run_agreement_mismatch(all, 2, msg, sizeof(msg)), "equal records agree");
    all[1].lr = agreement_double(2e-3);
    CHECK(run_agreement_mismatch(all, 2, msg, sizeof(msg)) && strstr(msg, "on lr, -l: rank 0 has 0.001, rank 1 has 0.002"),
          "a learning rate is printed as a number: %s", msg);
    all[1].max_steps = 7;
    CHECK(run_agreement_mismatch(all, 2, msg, sizeof(msg)) && strstr(msg, "on max_steps"), "the first differing field is named: %s", msg);
    all[1] = all[0];
    all[1].init_hash = 1;
    CHECK(run_agreement_mismatch(all, 2, msg, sizeof(msg)) && strstr(msg, "init_hash"), "the last field is checked too: %s", msg);
    CHECK(agreement_hash("abcdefghi", 9) != agreement_hash("abcdefghj", 9) && agreement_hash("ab", 2) == agreement_hash("ab", 2),
          "the hash sees the tail bytes and is deterministic");
}

static int flag_rank, flag_world, mpi_rank, mpi_world;
static const char* flag_path;
static void resolve(void) {
    int rank, world;
    rendezvous_resolve(flag_rank, flag_world, flag_path, mpi_rank, mpi_world, &rank, &world);
}

// rendezvous_resolve in a child with these inputs; 1 if it died with `expect`
static int resolve_fails_with(int fr, int fw, const char* p, int mr, int mw, const char* expect) {
    flag_rank = fr; flag_world = fw; flag_path = p; mpi_rank = mr; mpi_world = mw;
    return child_fails_with(resolve, expect);
}

// 1 when rendezvous_resolve accepts the inputs and gives rank `want_rank` of `want_world`
static int resolves_to(int fr, int fw, const char* p, int mr, int mw, int want_rank, int want_world) {
    int rank = -7, world = -7;
    rendezvous_resolve(fr, fw, p, mr, mw, &rank, &world);
    return rank == want_rank && world == want_world;
}

static void test_resolve(void) {
    CHECK(resolves_to(-1, -1, NULL, 0, 0, 0, 1), "no flags, no mpirun: rank 0 of 1");
    CHECK(resolves_to(0, 1, "/tmp/x", 0, 0, 0, 1), "world size 1 with a file");
    CHECK(resolves_to(3, 4, "/tmp/x", 0, 0, 3, 4), "rank 3 of 4 with a file");
    CHECK(resolves_to(-1, -1, NULL, 2, 4, 2, 4), "mpirun alone decides");
    CHECK(resolves_to(2, 4, NULL, 2, 4, 2, 4), "flags that agree with mpirun");
    CHECK(resolve_fails_with(-1, 2, NULL, 0, 4, "world size mismatch: the flag says 2, mpirun started 4"), "world size flag vs mpirun");
    CHECK(resolve_fails_with(1, -1, NULL, 0, 4, "rank mismatch"), "rank flag vs MPI");
    CHECK(resolve_fails_with(-1, -1, "/tmp/x", 0, 4, "given under mpirun"), "a rendezvous file under mpirun");
    CHECK(resolve_fails_with(-1, 0, NULL, 0, 0, "world size 0 is invalid"), "world size 0");
    CHECK(resolve_fails_with(-1, -5, NULL, 0, 0, "world size -5 is invalid"), "negative world size");
    CHECK(resolve_fails_with(-3, 2, "/tmp/x", 0, 0, "rank -3 is invalid"), "negative rank");
    CHECK(resolve_fails_with(2, 2, "/tmp/x", 0, 0, "rank 2 is not in 0..1"), "rank == world size");
    CHECK(resolve_fails_with(1, -1, NULL, 0, 0, "rank 1 is not in 0..0"), "a rank without a world size");
    CHECK(resolve_fails_with(-1, 2, "/tmp/x", 0, 0, "give every process its rank"), "a world size without a rank");
    CHECK(resolve_fails_with(1, 2, NULL, 0, 0, "needs a rendezvous file"), "world size 2 without mpirun or a file");
}

static int dev_local_rank, dev_local_world, dev_visible;
static void check_devices(void) { rendezvous_check_devices(dev_local_rank, dev_local_world, dev_visible); }
static int launch_have_mpi, launch_with_flags;
static void refuse_launch(void) { rendezvous_refuse_unknown_launch(launch_have_mpi, launch_with_flags); }

static void clear_launcher_env(void) {
    const char* vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                          "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "PALS_LOCAL_RANKID", "SLURM_STEP_NUM_TASKS",
                          "SLURM_PROCID", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) { unsetenv(vars[i]); }
}

static void test_devices_and_launchers(void) {
    rendezvous_check_devices(1, 2, 2);   // enough GPUs: returns
    rendezvous_check_devices(0, 1, 8);
    dev_local_rank = 2; dev_local_world = 4; dev_visible = 2;
    CHECK(child_fails_with(check_devices, "runs 4 data-parallel processes, one per GPU, but only 2 GPUs are visible"), "too few GPUs");
    dev_visible = 0;
    CHECK(child_fails_with(check_devices, "only 0 GPUs are visible"), "no GPU");

    clear_launcher_env();
    CHECK(rendezvous_mpirun_world() == 0 && rendezvous_launcher_world() == 0, "not under mpirun");
    CHECK(rendezvous_launcher_local_rank() == -1, "no launcher: no local rank");
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    CHECK(rendezvous_mpirun_world() == 4, "OpenMPI's job size");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("PMI_SIZE", "3", 1);
    CHECK(rendezvous_mpirun_world() == 3, "MPICH's job size");
    clear_launcher_env();
    const char* local_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "PALS_LOCAL_RANKID"};
    int ok = 1;
    for (int i = 0; i < 5; i++) {
        setenv(local_vars[i], "3", 1);
        ok &= rendezvous_launcher_local_rank() == 3;
        unsetenv(local_vars[i]);
    }
    CHECK(ok, "the local rank from each launcher's variable");

    setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    setenv("SLURM_PROCID", "2", 1);
    CHECK(rendezvous_launcher_world() == 4, "srun's task count");
    launch_have_mpi = 0; launch_with_flags = 0;
    CHECK(child_fails_with(refuse_launch, "started by srun as task 2 of 4, but this build has no MPI"), "srun without MPI: refused");
    launch_with_flags = 1;
    rendezvous_refuse_unknown_launch(0, 1);   // the rank flags tie the tasks together: accepted
    rendezvous_refuse_unknown_launch(1, 0);   // MPI will see the launch: accepted (dp_launch checks MPI's world)
    clear_launcher_env();
    setenv("SLURM_STEP_NUM_TASKS", "1", 1);
    rendezvous_refuse_unknown_launch(0, 0);   // one task: a plain run
    clear_launcher_env();
    setenv("PMIX_RANK", "1", 1);
    launch_with_flags = 0;
    CHECK(child_fails_with(refuse_launch, "started by a PMIx launcher (PMIX_RANK=1)"), "a PMIx launch without MPI: refused");
    clear_launcher_env();
}

// Runs fn in a forked process while the caller goes on with other tests (the heartbeat scenarios mostly wait, so the
// test takes less time this way); returns the read end of the pipe that its check counts come back through
static int start_concurrently(void (*fn)(void)) {
    int fd[2];
    if (pipe(fd) != 0) { die("pipe failed"); }
    fflush(stdout);
    if (fork() == 0) {
        close(fd[0]);
        tests_passed = tests_failed = 0;
        fn();
        int counts[2] = {tests_passed, tests_failed};
        if (write(fd[1], counts, sizeof(counts)) != (ssize_t)sizeof(counts)) { _exit(1); }
        fflush(stdout);
        _exit(0);
    }
    close(fd[1]);
    return fd[0];
}

// adds the check counts of the process start_concurrently started (its pipe fd) once it is done
static void join_concurrently(int fd) {
    int counts[2] = {0, 1};   // a process that wrote nothing counts as one failure
    if (read(fd, counts, sizeof(counts)) != (ssize_t)sizeof(counts)) { printf("FAIL: the concurrent tests sent no counts\n"); }
    close(fd);
    while (wait(NULL) > 0) {}
    tests_passed += counts[0];
    tests_failed += counts[1];
}

int main(void) {
    if (mkdtemp(tmpdir) == NULL) { die("cannot create a temporary directory"); }
    int heartbeats = start_concurrently(test_heartbeats);
    test_agreement_text();
    test_success();
    test_disagreement();
    test_failures();
    test_early_failures();
    test_duplicates();
    join_concurrently(heartbeats);
    test_leftovers();
    test_resolve();
    test_devices_and_launchers();
    rendezvous_remove_channel_files(path);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0) { printf("warning: could not remove %s\n", tmpdir); }
    return test_summary("test_rendezvous");
}
