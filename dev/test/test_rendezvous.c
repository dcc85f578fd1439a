// Tests of llmc/rendezvous.h: the id exchange between two processes (fork; the reader polling before and after
// the writer), the timeout with a clear error, refusal of a stale or foreign file, the atomic write, and the
// checks of rank / world size flags against each other, against mpirun, and against the visible GPUs.
#include <sys/stat.h>
#include "llmc/rendezvous.h"
#include "dev/test/test_common.h"

static char tmpdir[] = "/tmp/test_rendezvous_XXXXXX";
static char path[4096];
static const unsigned char payload[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
static double wait_timeout;   // of the waits run in child processes

// reads the id from path (world size 2) with a 10 s timeout; exit code 0 when it is the payload
static int read_matches(void) {
    unsigned char got[sizeof(payload)];
    rendezvous_wait(path, 2, got, (int)sizeof(got), 10.0);
    return memcmp(got, payload, sizeof(payload)) == 0 ? 0 : 1;
}

// exit status of a child that waits for the id while this process publishes it after delay_us
static int exchange(useconds_t delay_us) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) { _exit(read_matches()); }
    usleep(delay_us);
    rendezvous_publish(path, 2, payload, (int)sizeof(payload));
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// a child that reads the id and joins (rank 1 of 2) after delay_us while this process waits for it as rank 0;
// returns 1 when both sides succeed
static int join_exchange(useconds_t delay_us) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        usleep(delay_us);
        int ok = read_matches() == 0;
        rendezvous_join(path, 1);
        _exit(ok ? 0 : 1);
    }
    rendezvous_publish(path, 2, payload, (int)sizeof(payload));
    rendezvous_wait_joined(path, 2, 10.0);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void wait_for_joins(void) { rendezvous_wait_joined(path, 3, wait_timeout); }

// rank 0 waits for every other rank to join, and stops with a clear error naming a rank that never comes
static void test_join(void) {
    snprintf(path, sizeof(path), "%s/join", tmpdir);
    CHECK(join_exchange(200000), "rank 0 waits until rank 1 has read the id and joined");
    char joined[4200];
    snprintf(joined, sizeof(joined), "%s.joined.1", path);
    CHECK(access(joined, F_OK) == 0, "rank 1's join file exists until rank 0 removes it");
    rendezvous_remove(path, 2);
    CHECK(access(joined, F_OK) != 0 && access(path, F_OK) != 0, "removing the rendezvous removes the join files");
    wait_timeout = 0.3;
    rendezvous_join(path, 1);   // rank 1 of 3 joined, rank 2 never starts
    CHECK(child_fails_with(wait_for_joins, "rank 2 of 3 did not join"), "a rank that never starts: a clear timeout on rank 0");
    rendezvous_remove(path, 3);
}

static void test_exchange(void) {
    snprintf(path, sizeof(path), "%s/id", tmpdir);
    CHECK(exchange(200000) == 0, "a reader that polls before the writer gets the id");
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0, "no temporary file left behind");
    CHECK(read_matches() == 0, "a reader that comes after the writer gets the id at once");
    rendezvous_remove(path, 2);
    rendezvous_remove(path, 2);   // a missing file is fine
    CHECK(access(path, F_OK) != 0, "the file is removed, and removing it again is fine");
}

static void wait_for_id(void) {
    unsigned char got[sizeof(payload)];
    rendezvous_wait(path, 2, got, (int)sizeof(got), wait_timeout);
}
static void publish_id(void) { rendezvous_publish(path, 2, payload, (int)sizeof(payload)); }

static void write_raw(const void* data, size_t n) {
    FILE* fp = fopen_check(path, "wb");
    fwrite_check(data, 1, n, fp);
    fclose_check(fp);
}

static void test_failures(void) {
    snprintf(path, sizeof(path), "%s/never", tmpdir);
    wait_timeout = 0.3;
    double t0 = rendezvous_now();
    CHECK(child_fails_with(wait_for_id, "rendezvous timed out"), "no writer: a clear timeout error");
    double dt = rendezvous_now() - t0;
    CHECK(dt >= 0.3 && dt < 3.0, "the timeout took %.2f s for a limit of 0.3 s", dt);

    snprintf(path, sizeof(path), "%s/other", tmpdir);
    wait_timeout = 5.0;
    rendezvous_publish(path, 4, payload, (int)sizeof(payload));
    CHECK(child_fails_with(wait_for_id, "is for world size 4"), "a file for another world size is refused");
    CHECK(child_fails_with(publish_id, "already exists"), "rank 0 does not overwrite a file left by an earlier run");
    rendezvous_remove(path, 2);
    rendezvous_publish(path, 2, payload, 8);
    CHECK(child_fails_with(wait_for_id, "an id of 8 bytes"), "an id of another size is refused");
    rendezvous_remove(path, 2);
    write_raw("garbage!garbage!", 16);
    CHECK(child_fails_with(wait_for_id, "not a rendezvous file"), "a foreign file is refused");
    write_raw("ab", 2);
    CHECK(child_fails_with(wait_for_id, "not a rendezvous file"), "a truncated file is refused");
    rendezvous_remove(path, 2);
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

static void test_devices_and_mpirun(void) {
    rendezvous_check_devices(1, 2, 2);   // enough GPUs: returns
    rendezvous_check_devices(0, 1, 8);
    dev_local_rank = 2; dev_local_world = 4; dev_visible = 2;
    CHECK(child_fails_with(check_devices, "runs 4 data-parallel processes, one per GPU, but only 2 GPUs are visible"), "too few GPUs");
    dev_visible = 0;
    CHECK(child_fails_with(check_devices, "only 0 GPUs are visible"), "no GPU");

    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_SIZE");
    CHECK(rendezvous_mpirun_world() == 0, "not under mpirun");
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    CHECK(rendezvous_mpirun_world() == 4, "OpenMPI's job size");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("PMI_SIZE", "3", 1);
    CHECK(rendezvous_mpirun_world() == 3, "MPICH's job size");
    unsetenv("PMI_SIZE");
}

int main(void) {
    if (mkdtemp(tmpdir) == NULL) { die("cannot create a temporary directory"); }
    test_exchange();
    test_failures();
    test_join();
    test_resolve();
    test_devices_and_mpirun();
    if (rmdir(tmpdir) != 0) { printf("warning: could not remove %s\n", tmpdir); }
    return test_summary("test_rendezvous");
}
