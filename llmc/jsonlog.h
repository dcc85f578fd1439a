// JSON Lines logging: a run's events as one flat JSON object per line, with string, integer, number and
// string-list fields, so scripts read the log back without parsing text (scripts/plot_losses.py reads the
// trainer's <out_dir>/main.jsonl). Usage: jsonl_begin(&j, "step"); jsonl_int(&j, "step", 10); ...; jsonl_end(&j, fp).
// Keys and string values are escaped; non-finite numbers become null.
#ifndef LLMC_JSONLOG_H
#define LLMC_JSONLOG_H

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <math.h>
#include "utils.h"

typedef struct {
    char* text;        // the line so far, grown as needed
    size_t len, cap;
    int fields;        // fields written: a comma precedes every one after the first
} JsonLine;

// appends printf-formatted text to the line
static inline void jsonl_append(JsonLine* j, const char* fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(j->text ? j->text + j->len : NULL, j->cap - j->len, fmt, ap);
        va_end(ap);
        if (n < 0) { die("jsonl: cannot format '%s'", fmt); }
        if (j->len + (size_t)n < j->cap) { j->len += (size_t)n; return; }
        j->cap = 2 * (j->len + (size_t)n + 1);
        j->text = (char*)realloc(j->text, j->cap);
        if (!j->text) { die("jsonl: out of memory for a line of %zu bytes", j->cap); }
    }
}

// appends s as a JSON string: quotes, backslashes and control characters escaped, other bytes as they are (UTF-8)
static inline void jsonl_quoted(JsonLine* j, const char* s) {
    jsonl_append(j, "\"");
    for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
        if (*p == '"' || *p == '\\') { jsonl_append(j, "\\%c", *p); }
        else if (*p == '\n') { jsonl_append(j, "\\n"); }
        else if (*p < 0x20) { jsonl_append(j, "\\u%04x", *p); }
        else { jsonl_append(j, "%c", *p); }
    }
    jsonl_append(j, "\"");
}

// appends the key of the next field, escaped like a string value (keys may be data, e.g. an eval task's name)
static inline void jsonl_key(JsonLine* j, const char* key) {
    if (j->fields++) { jsonl_append(j, ","); }
    jsonl_quoted(j, key);
    jsonl_append(j, ":");
}

// starts a line {"event":"<event>"
static inline void jsonl_begin(JsonLine* j, const char* event) {
    j->text = NULL;
    j->len = j->cap = 0;
    j->fields = 0;
    jsonl_append(j, "{");
    jsonl_key(j, "event");
    jsonl_quoted(j, event);
}

static inline void jsonl_int(JsonLine* j, const char* key, long long v) { jsonl_key(j, key); jsonl_append(j, "%lld", v); }

// a number with 9 significant digits (a float round-trips); NaN and Inf, which JSON lacks, as null
static inline void jsonl_number(JsonLine* j, const char* key, double v) {
    jsonl_key(j, key);
    if (isfinite(v)) { jsonl_append(j, "%.9g", v); } else { jsonl_append(j, "null"); }
}

static inline void jsonl_string(JsonLine* j, const char* key, const char* v) { jsonl_key(j, key); jsonl_quoted(j, v); }

static inline void jsonl_string_list(JsonLine* j, const char* key, const char* const* items, int n) {
    jsonl_key(j, key);
    jsonl_append(j, "[");
    for (int i = 0; i < n; i++) {
        if (i > 0) { jsonl_append(j, ","); }
        jsonl_quoted(j, items[i]);
    }
    jsonl_append(j, "]");
}

// closes the object, writes it as one line to fp (when not NULL) and flushes; frees the line
static inline void jsonl_end(JsonLine* j, FILE* fp) {
    jsonl_append(j, "}\n");
    if (fp) {
        fwrite_check(j->text, 1, j->len, fp);
        fflush(fp);
    }
    free(j->text);
    j->text = NULL;
    j->len = j->cap = 0;
}

#endif
