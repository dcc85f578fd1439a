// Command-line values: integers and floats checked for syntax and range, with a clear error naming the flag.
#ifndef LLMC_CLI_H
#define LLMC_CLI_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "utils.h"

static inline long parse_int(const char* flag, const char* s, long lo, long hi) {
    char* end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s || v < lo || v > hi) { die("flag %s: '%s' is not an integer in [%ld, %ld]", flag, s, lo, hi); }
    return v;
}

static inline float parse_float(const char* flag, const char* s, float lo, float hi) {
    char* end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno != 0 || *end != '\0' || end == s || !(v >= lo && v <= hi)) { die("flag %s: '%s' is not a number in [%g, %g]", flag, s, lo, hi); }
    return v;
}

// prints the usage and exits 0 when -h or --help is anywhere on the command line
static inline void cli_handle_help(int argc, char** argv, void (*usage)(const char* prog)) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) { usage(argv[0]); exit(EXIT_SUCCESS); }
    }
}

// argv[i] must be a flag "-x" followed by a value; returns the value (clear error otherwise)
static inline const char* cli_flag_value(int argc, char** argv, int i, void (*usage)(const char* prog)) {
    const char* f = argv[i];
    if (f[0] != '-' || strlen(f) != 2) { usage(argv[0]); die("unknown argument '%s'", f); }
    if (i + 1 >= argc) { die("flag %s needs a value (see -h)", f); }
    return argv[i + 1];
}

#endif
