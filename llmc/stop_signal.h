// SIGTERM, SIGINT, SIGHUP (the terminal or session closed) and SIGQUIT as a request to stop: the handler only records
// the signal; the training loop checks stop_signal_received() after each step, writes a checkpoint (when it has an
// output directory) and exits with 128 + the signal number, so a preempted job resumes with -y 1. A second signal of the same kind takes its default
// action (the process ends at once).
#ifndef LLMC_STOP_SIGNAL_H
#define LLMC_STOP_SIGNAL_H

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_signal_number = 0;

static void stop_signal_handler(int sig) { stop_signal_number = sig; }

static inline void stop_signal_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = stop_signal_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    const int stop_signals[4] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
    for (int i = 0; i < 4; i++) { sigaction(stop_signals[i], &sa, NULL); }
}

// the signal received since stop_signal_install (one of the four above), or 0
static inline int stop_signal_received(void) { return (int)stop_signal_number; }

#endif
