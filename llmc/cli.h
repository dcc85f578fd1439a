// Command-line values: integers and floats checked for syntax and range, with a clear error naming the flag.
#ifndef LLMC_CLI_H
#define LLMC_CLI_H

#include <errno.h>
#include <stdlib.h>
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

#endif
