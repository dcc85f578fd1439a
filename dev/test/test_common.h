// Minimal test harness for the C tests: CHECK counts passes and failures, test_summary prints
// "N passed, N failed" and returns the process exit code; child_fails_with runs code that should die.
#ifndef DEV_TEST_COMMON_H
#define DEV_TEST_COMMON_H

#include <stdio.h>
#include <string.h>
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

static int tests_passed = 0, tests_failed = 0;

#define CHECK(cond, ...) do { \
    if (cond) { tests_passed++; } \
    else { tests_failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } \
} while (0)

static inline int test_summary(const char* name) {
    printf("%s: %d passed, %d failed\n", name, tests_passed, tests_failed);
    return tests_failed == 0 ? 0 : 1;
}

// runs fn in a forked child with its stderr captured; returns 1 if the child exited non-zero and its stderr
// contains `expect` (with expect "", 1 for any non-zero exit); otherwise prints the child's status and stderr
static inline int child_fails_with(void (*fn)(void), const char* expect) {
    int fd[2];
    if (pipe(fd) != 0) { return 0; }
    fflush(stdout);   // the child's exit() must not print the parent's buffered output again
    pid_t pid = fork();
    if (pid == 0) { dup2(fd[1], 2); close(fd[0]); fn(); _exit(0); }
    close(fd[1]);
    char buf[4096] = {0};
    ssize_t got = 0, r;
    while ((r = read(fd[0], buf + got, sizeof(buf) - 1 - got)) > 0) { got += r; }
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) != 0 && strstr(buf, expect) != NULL;
    if (!ok && expect[0] != 0) { printf("  child status %d, stderr: %s\n", status, buf); }
    return ok;
}

#endif
