// What every rank of a data-parallel run must agree on before any collective, and the check: ranks that differ in
// the model, the batch, the loop bounds and cadences (which collectives run when), the precision flags, the seed
// or the resume decision would mix shards of different runs or wait in collectives the others never start. Each
// rank fills a RunAgreement, the ranks exchange them (MPI_Allgather, or a round of the rendezvous file,
// llmc/rendezvous.h), and every rank runs run_agreement_check on all of them: it dies naming the first field that
// differs, its flag, and the ranks that disagree with rank 0.
#ifndef LLMC_AGREEMENT_H
#define LLMC_AGREEMENT_H

#include <stdint.h>
#include <string.h>
#include "utils.h"

// X(field, what it is or which flag sets it, 1 when it holds a double's bits)
#define RUN_AGREEMENT_FIELDS(X) \
    X(world_size, "world size", 0) X(family, "model family (-e)", 0) X(num_layers, "layers (-e)", 0) \
    X(channels, "channels (-e)", 0) X(num_heads, "heads (-e)", 0) X(num_kv_heads, "KV heads (-e)", 0) \
    X(hidden, "MLP width (-e)", 0) X(vocab_size, "vocabulary (-e)", 0) X(max_seq_len, "max sequence length (-e)", 0) \
    X(micro_batch, "-b", 0) X(seq_len, "-t", 0) X(total_batch, "total batch (-d, or the checkpoint's)", 0) \
    X(max_steps, "-x", 0) X(warmup, "-u", 0) X(val_every, "-v", 0) X(val_batches, "-m", 0) X(ckpt_every, "-n", 0) \
    X(lr, "-l", 1) X(final_lr_frac, "-q", 1) X(weight_decay, "-c", 1) X(grad_clip, "-k", 1) \
    X(precision, "-p", 0) X(gemm_path, "-P", 0) X(stochastic_grads, "-S", 0) X(calib_steps, "-w", 0) \
    X(calib_strategy, "-C", 0) X(reclass_every, "-R", 0) X(reclass_window, "-W", 0) X(oe_k, "-K", 0) X(scale_rules, "-Q", 0) \
    X(bf16_blocks, "-B", 0) X(bf16_tail, "-T", 1) X(bf16_tail_fwd, "-T (:fwd)", 0) \
    X(recompute, "-A", 0) X(lm_head, "-H", 0) X(overlap, "-O", 0) X(skip_loss_z, "-L", 1) X(skip_norm_z, "-Z", 1) \
    X(timed_gemms, "-a (of a fresh run)", 0) \
    X(seed, "seed (-r, or the checkpoint's)", 0) X(data_seed, "data seed (-D, or the checkpoint's)", 0) \
    X(resume_step, "resume step (0 = fresh start; -y, -o and the checkpoints found there)", 0) \
    X(data_state, "data loader state of the checkpoint (hash)", 0) \
    X(init_hash, "initial parameters (-e, or the checkpoint resumed; hash)", 0)

typedef struct {
#define RUN_AGREEMENT_MEMBER(field, what, is_double) int64_t field;
    RUN_AGREEMENT_FIELDS(RUN_AGREEMENT_MEMBER)
#undef RUN_AGREEMENT_MEMBER
} RunAgreement;

#define RUN_AGREEMENT_NUM_FIELDS (sizeof(RunAgreement) / sizeof(int64_t))

// a double as the bits of an int64 field
static inline int64_t agreement_double(double x) {
    int64_t bits;
    memcpy(&bits, &x, sizeof(bits));
    return bits;
}

// a 64-bit hash of bytes[0 .. n) (FNV-1a over 8-byte words, then the tail bytes): a short stand-in for state too
// large for one field, fast enough for a model's parameters (about 1 s for 6 GB)
static inline int64_t agreement_hash(const void* bytes, size_t n) {
    const unsigned char* p = (const unsigned char*)bytes;
    uint64_t h = 0xcbf29ce484222325ULL, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
    }
    for (; i < n; i++) { h = (h ^ p[i]) * 0x100000001b3ULL; }
    return (int64_t)h;
}

// field k's value in a, as text
static inline void agreement_value_text(const RunAgreement* a, size_t k, char* out, size_t n) {
    static const int is_double[] = {
#define RUN_AGREEMENT_KIND(field, what, d) d,
        RUN_AGREEMENT_FIELDS(RUN_AGREEMENT_KIND)
#undef RUN_AGREEMENT_KIND
    };
    int64_t v;
    memcpy(&v, (const char*)a + k * sizeof(int64_t), sizeof(v));
    if (is_double[k]) {
        double x;
        memcpy(&x, &v, sizeof(x));
        snprintf(out, n, "%g", x);
    } else {
        snprintf(out, n, "%lld", (long long)v);
    }
}

// Fills msg (n bytes) and returns 1 when the world records all[0 .. world) differ: the first field (in the order of
// RUN_AGREEMENT_FIELDS) where a rank differs from rank 0, rank 0's value, the first differing rank's, and every rank
// that differs from rank 0 in it; returns 0 when all agree.
static inline int run_agreement_mismatch(const RunAgreement* all, int world, char* msg, size_t n) {
    static const char* const names[] = {
#define RUN_AGREEMENT_NAME(field, what, d) #field,
        RUN_AGREEMENT_FIELDS(RUN_AGREEMENT_NAME)
#undef RUN_AGREEMENT_NAME
    };
    static const char* const whats[] = {
#define RUN_AGREEMENT_WHAT(field, what, d) what,
        RUN_AGREEMENT_FIELDS(RUN_AGREEMENT_WHAT)
#undef RUN_AGREEMENT_WHAT
    };
    for (size_t k = 0; k < RUN_AGREEMENT_NUM_FIELDS; k++) {
        size_t off = k * sizeof(int64_t);
        int first = -1;
        char ranks[256] = "";
        size_t used = 0;
        for (int r = 1; r < world; r++) {
            if (memcmp((const char*)&all[r] + off, (const char*)&all[0] + off, sizeof(int64_t)) == 0) { continue; }
            if (first < 0) { first = r; }
            if (used < sizeof(ranks) - 16) { used += (size_t)snprintf(ranks + used, sizeof(ranks) - used, "%s%d", used ? ", " : "", r); }
            else if (ranks[used - 1] != '.') { used += (size_t)snprintf(ranks + used, sizeof(ranks) - used, ", ..."); }
        }
        if (first < 0) { continue; }
        char v0[64], v1[64];
        agreement_value_text(&all[0], k, v0, sizeof(v0));
        agreement_value_text(&all[first], k, v1, sizeof(v1));
        snprintf(msg, n, "the ranks disagree on %s, %s: rank 0 has %s, rank %d has %s (ranks that differ from rank 0: %s)",
                 names[k], whats[k], v0, first, v1, ranks);
        return 1;
    }
    return 0;
}

// dies with run_agreement_mismatch's message unless all world records agree
static inline void run_agreement_check(const RunAgreement* all, int world) {
    char msg[1024];
    if (run_agreement_mismatch(all, world, msg, sizeof(msg))) { die("%s: every rank stops", msg); }
}

#endif
