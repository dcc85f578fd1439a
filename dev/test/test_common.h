// Minimal test harness for the C tests: CHECK counts passes and failures, test_summary prints
// "N passed, N failed" and returns the process exit code; test_skip reports a check that cannot run here;
// child_fails_with runs code that should die;
// close_enough and check_scalar_rel compare against an oracle; fd_worst_ratio checks a gradient by finite differences.
#ifndef DEV_TEST_COMMON_H
#define DEV_TEST_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
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

// prints "what: SKIP: why" and appends that line to the file $TEST_SKIP_LOG names, if set (`make test` lists
// those lines at its end)
static inline void test_skip(const char* what, const char* why_fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, why_fmt);
    vsnprintf(why, sizeof(why), why_fmt, ap);
    va_end(ap);
    printf("  %s: SKIP: %s\n", what, why);
    const char* path = getenv("TEST_SKIP_LOG");
    FILE* log = path && path[0] ? fopen(path, "a") : NULL;
    if (log) { fprintf(log, "%s: %s\n", what, why); fclose(log); }
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

// max |x[i]| over n values
static inline float max_abs_f32(const float* x, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) { if (fabsf(x[i]) > m) { m = fabsf(x[i]); } }
    return m;
}

// 1 when every |got - ref| <= atol + rtol |ref|; prints the max abs and rel errors when verbose
static inline int close_enough(const char* name, const float* got, const float* ref, size_t n, float atol, float rtol, int verbose) {
    double max_abs_err = 0.0, max_rel_err = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        if (err > max_abs_err) { max_abs_err = err; }
        if (fabs(ref[i]) > atol && err / fabs(ref[i]) > max_rel_err) { max_rel_err = err / fabs(ref[i]); }
        if (!(err <= atol + rtol * fabs(ref[i]))) { bad++; }
    }
    if (verbose) {
        printf("%-9s n=%-7zu max abs err %.3e  max rel err %.3e (|ref| > atol)  tol %.1e + %.0e|ref|  %s\n",
               name, n, max_abs_err, max_rel_err, atol, rtol, bad ? "FAIL" : "ok");
    }
    return bad == 0;
}

// compares one scalar with a relative tolerance, printing both, and counts the check
static inline void check_scalar_rel(const char* name, float got, float ref, float rtol) {
    float err = fabsf(got - ref);
    printf("%-9s got %.7f ref %.7f  abs err %.3e  rel err %.3e  tol rel %.0e\n", name, got, ref, err, err / fabsf(ref), rtol);
    CHECK(err <= rtol * fabsf(ref), "%s: %f vs reference %f", name, got, ref);
}

typedef double (*objective_fn)(void* ctx);

// worst |numeric - analytic| / (atol + rtol |numeric|) over the n entries of x, numeric = the central difference
// (f(x + h) - f(x - h)) / 2h of objective f, analytic = grad; prints it when verbose
static inline double fd_worst_ratio(const char* name, objective_fn f, void* ctx, float* x, const float* grad, size_t n,
                                    float h, double atol, double rtol, int verbose) {
    double worst = 0.0, max_err = 0.0;
    for (size_t i = 0; i < n; i++) {
        float saved = x[i];
        x[i] = saved + h;
        double plus = f(ctx);
        x[i] = saved - h;
        double minus = f(ctx);
        x[i] = saved;
        double num = (plus - minus) / (2.0 * h);
        double err = fabs(num - grad[i]);
        double ratio = err / (atol + rtol * fabs(num));
        if (err > max_err) { max_err = err; }
        if (ratio > worst) { worst = ratio; }
    }
    if (verbose) { printf("%-22s n=%-4zu max abs err %.3e  worst err/tol %.3f  %s\n", name, n, max_err, worst, worst <= 1.0 ? "within tol" : "OVER TOL"); }
    return worst;
}

#endif
