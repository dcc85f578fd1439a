/*
Kernel profile: GPU time per kernel of any CUDA program, through CUPTI's activity API, for machines without nsys.
The CUDA driver loads it into the program when CUDA_INJECTION64_PATH names it and calls InitializeInjection; every
kernel, memcpy ("memcpy HtoD", "memcpy DtoH", ...) and memset ("memset") is timed on the GPU (end - start) and, at
exit, one line per name is written, largest total first: total_ns<TAB>count<TAB>name (kernel names mangled).
Build: make build/libkernel_profile.so
Use:   CUDA_INJECTION64_PATH=$PWD/build/libkernel_profile.so KERNEL_PROFILE_OUT=prof.tsv ./train_gpt2_adahop ...
       (out: $KERNEL_PROFILE_OUT, default stderr; libcupti.so.13 must be on the loader's path: dev/profile_step.sh
       finds it and prints the table per step and per group)
cupti_ok             prints a failed CUPTI call with its result string; returns whether it succeeded
profile_add          adds one record's time to its name's entry (open addressing; the name is copied)
record_name          the table name of a kernel, memcpy or memset record, NULL for other kinds
buffer_requested     hands CUPTI an empty aligned buffer
buffer_completed     adds a filled buffer's records to the table, then frees it
by_total_desc        qsort order: total time, largest first
profile_write        writes the table, sorted, to a stream
at_exit              flushes CUPTI's buffers and writes the table to $KERNEL_PROFILE_OUT (or stderr)
InitializeInjection  the driver's entry point: buffer callbacks, activity kinds, at_exit
*/
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cupti.h>

#define MAX_NAMES 4096                  // distinct names kept; the table has twice as many slots
#define BUFFER_BYTES (8u << 20)

typedef struct { char* name; unsigned long long total_ns, count; } Entry;
static Entry table[2 * MAX_NAMES], sorted[MAX_NAMES];
static int num_names = 0, overflowed = 0;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static int cupti_ok(CUptiResult r, const char* what) {
    if (r == CUPTI_SUCCESS) { return 1; }
    const char* s = "unknown error";
    cuptiGetResultString(r, &s);
    fprintf(stderr, "kernel_profile: %s failed: %s\n", what, s);
    return 0;
}

static void profile_add(const char* name, unsigned long long ns) {
    unsigned long long h = 1469598103934665603ull;   // FNV-1a
    for (const char* c = name; *c; c++) { h = (h ^ (unsigned char)*c) * 1099511628211ull; }
    size_t i = h % (2 * MAX_NAMES);
    while (table[i].name && strcmp(table[i].name, name) != 0) { i = (i + 1) % (2 * MAX_NAMES); }
    if (!table[i].name) {
        if (num_names == MAX_NAMES) {
            if (!overflowed) { fprintf(stderr, "kernel_profile: more than %d distinct names: the rest are not counted\n", MAX_NAMES); }
            overflowed = 1;
            return;
        }
        if (!(table[i].name = strdup(name))) { return; }
        num_names++;
    }
    table[i].total_ns += ns;
    table[i].count++;
}

static const char* record_name(const CUpti_Activity* rec, unsigned long long* ns) {
    static const char* copies[] = {[CUPTI_ACTIVITY_MEMCPY_KIND_HTOD] = "memcpy HtoD", [CUPTI_ACTIVITY_MEMCPY_KIND_DTOH] = "memcpy DtoH",
                                   [CUPTI_ACTIVITY_MEMCPY_KIND_DTOD] = "memcpy DtoD", [CUPTI_ACTIVITY_MEMCPY_KIND_HTOH] = "memcpy HtoH",
                                   [CUPTI_ACTIVITY_MEMCPY_KIND_PTOP] = "memcpy PtoP"};
    if (rec->kind == CUPTI_ACTIVITY_KIND_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        const CUpti_ActivityKernel10* k = (const CUpti_ActivityKernel10*)rec;
        *ns = k->end > k->start ? k->end - k->start : 0;
        return k->name ? k->name : "(unnamed kernel)";
    }
    if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const CUpti_ActivityMemcpy6* m = (const CUpti_ActivityMemcpy6*)rec;
        *ns = m->end > m->start ? m->end - m->start : 0;
        return m->copyKind < sizeof(copies) / sizeof(copies[0]) && copies[m->copyKind] ? copies[m->copyKind] : "memcpy other";
    }
    if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const CUpti_ActivityMemset4* m = (const CUpti_ActivityMemset4*)rec;
        *ns = m->end > m->start ? m->end - m->start : 0;
        return "memset";
    }
    return NULL;
}

static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
    if (!*buffer) { fprintf(stderr, "kernel_profile: out of host memory for a CUPTI buffer: records are dropped\n"); }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
    (void)size;
    CUpti_Activity* rec = NULL;
    pthread_mutex_lock(&table_lock);
    for (;;) {
        CUptiResult r = cuptiActivityGetNextRecord(buffer, valid, &rec);
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED || !cupti_ok(r, "cuptiActivityGetNextRecord")) { break; }
        unsigned long long ns;
        const char* name = record_name(rec, &ns);
        if (name) { profile_add(name, ns); }
    }
    pthread_mutex_unlock(&table_lock);
    size_t dropped = 0;
    if (cupti_ok(cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped), "cuptiActivityGetNumDroppedRecords") && dropped) {
        fprintf(stderr, "kernel_profile: CUPTI dropped %zu records: the table is incomplete\n", dropped);
    }
    free(buffer);
}

static int by_total_desc(const void* a, const void* b) {
    const Entry *x = a, *y = b;
    return (x->total_ns < y->total_ns) - (x->total_ns > y->total_ns);
}

static void profile_write(FILE* f) {
    pthread_mutex_lock(&table_lock);
    int n = 0;
    for (int i = 0; i < 2 * MAX_NAMES; i++) { if (table[i].name) { sorted[n++] = table[i]; } }
    qsort(sorted, n, sizeof(Entry), by_total_desc);
    for (int i = 0; i < n; i++) { fprintf(f, "%llu\t%llu\t%s\n", sorted[i].total_ns, sorted[i].count, sorted[i].name); }
    pthread_mutex_unlock(&table_lock);
}

static void at_exit(void) {
    cupti_ok(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    const char* path = getenv("KERNEL_PROFILE_OUT");
    FILE* f = path && *path ? fopen(path, "w") : stderr;
    if (!f) { fprintf(stderr, "kernel_profile: cannot write %s: the table goes to stderr\n", path); f = stderr; }
    profile_write(f);
    if (f != stderr && fclose(f) != 0) { fprintf(stderr, "kernel_profile: error writing %s\n", path); }
}

int InitializeInjection(void) {
    if (!cupti_ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks")) { return 0; }
    int ok = cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable(CONCURRENT_KERNEL)");
    ok &= cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "cuptiActivityEnable(MEMCPY)");
    ok &= cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "cuptiActivityEnable(MEMSET)");
    if (atexit(at_exit) != 0) { fprintf(stderr, "kernel_profile: atexit failed: no table will be written\n"); }
    return ok;
}
