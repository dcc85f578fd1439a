// The AdaHOP controller (host C, shared by the CPU reference and the GPU trainer): the precision of the block
// linears, the strategy table (docs/adahop.md section 5), and the choice of a strategy per (linear, GEMM) by majority
// vote over recorded outlier patterns (section 7): a calibration of `calib_steps` steps in plain MXFP4 (the
// reference; `calib_strategy` STRAT_IHT runs them with the Hadamard instead), then (ours) a re-classification
// every `reclass_every` steps over the `reclass_window` steps before it.
//
// Steps are 0-based optimizer steps. Per step the trainer asks adahop_wants_stats(); if it says yes, it records
// the patterns of x, W and dY of every linear with adahop_record(); after the update it calls adahop_end_step(),
// which votes at the end of calibration (step calib_steps - 1) and at every re-classification point
// (step kR - 1 with kR > calib_steps). The log lines name the 1-based step just finished (the trainers print
// "step s/max" with s = step + 1). A linear's index is layer * NUM_LINEAR_KINDS + kind; with adahop_include_head the
// LM head is one more linear after the blocks, index num_layers * NUM_LINEAR_KINDS (logged as "layer <num_layers> lm_head").
#ifndef LLMC_ADAHOP_H
#define LLMC_ADAHOP_H

#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include "utils.h"

enum { PATTERN_NONE = 0, PATTERN_ROW = 1, PATTERN_COL = 2, NUM_PATTERNS = 3 };
enum { STRAT_IHT = 0, STRAT_IHT_OE_ROWS_A = 1, STRAT_IHT_OE_ROWS_B = 2, STRAT_BF16 = 3, STRAT_PLAIN = 4, NUM_STRATEGIES = 5 };
enum { GEMM_FWD = 0, GEMM_DX = 1, GEMM_DW = 2, NUM_GEMMS = 3 };
enum { PREC_BF16 = 0, PREC_MXFP4 = 1, PREC_HADAMARD = 2, PREC_ADAHOP = 3, NUM_PRECISIONS = 4 };
enum { LIN_QKV = 0, LIN_ATTPROJ = 1, LIN_FC = 2, LIN_FCPROJ = 3, NUM_LINEAR_KINDS = 4 };
enum { TENSOR_X = 0, TENSOR_W = 1, TENSOR_DY = 2, NUM_TENSORS = 3 };

static const char* const precision_names[NUM_PRECISIONS] = {"bf16", "mxfp4", "hadamard", "adahop"};
static const char* const adahop_strategy_names[NUM_STRATEGIES] = {"iht", "iht+oe_rows_a", "iht+oe_rows_b", "bf16", "plain"};
static const char adahop_strategy_codes[NUM_STRATEGIES] = {'I', 'R', 'C', 'B', 'P'};
static const char adahop_pattern_codes[NUM_PATTERNS] = {'N', 'R', 'C'};
static const char* const adahop_linear_names[NUM_LINEAR_KINDS] = {"qkv", "attproj", "fc", "fcproj"};
static const char* const adahop_gemm_names[NUM_GEMMS] = {"fwd", "dx", "dw"};

typedef struct {
    int precision, num_layers, num_linears, calib_steps, calib_strategy, reclass_every, reclass_window, oe_k;
    int calibrated;   // 1 once the first vote is done (adahop precision); before it every GEMM runs calib_strategy
    // per linear, allocated for num_layers * NUM_LINEAR_KINDS + 1 (room for the LM head, adahop_include_head):
    int* votes;       // [num_linears][NUM_TENSORS][NUM_PATTERNS] patterns recorded since the last vote
    int* pattern;     // [num_linears][NUM_TENSORS] pattern of the last vote (PATTERN_NONE before the first)
    int* strategy;    // [num_linears][NUM_GEMMS] voted strategy, dW rule applied (STRAT_PLAIN before the first)
    uint8_t* bf16_gemms;   // [num_linears] bit g set: GEMM g of the linear runs in BF16 whatever the strategy (the
                           // trainer's -B and -T set it from the flags and the step; not part of the saved state)
    const char* const* linear_names;   // [NUM_LINEAR_KINDS] for the logs and the table (adahop_linear_names by default)
} AdahopState;

#define ADAHOP_MAGIC 0x41484F50   // "AHOP": first word of the serialized state
#define ADAHOP_HEADER_WORDS 9     // magic, the 7 settings of adahop_init, calibrated

// PREC_* of a name in precision_names, -1 if unknown
static inline int precision_from_name(const char* name) {
    for (int i = 0; i < NUM_PRECISIONS; i++) { if (strcmp(name, precision_names[i]) == 0) { return i; } }
    return -1;
}

// the calibration strategy named by the value of flag -C ("plain" or "iht"); dies on any other name
static inline int calib_strategy_from_flag(const char* value) {
    if (strcmp(value, adahop_strategy_names[STRAT_PLAIN]) == 0) { return STRAT_PLAIN; }
    if (strcmp(value, adahop_strategy_names[STRAT_IHT]) == 0) { return STRAT_IHT; }
    die("flag -C: '%s' is not one of plain, iht", value);
    return -1;
}

#define ADAHOP_TAU 2.0   // ratio of the normalised CVs that makes a tensor Row or Column

// coefficient of variation std / mean of v[0..n); -1 when the mean is not positive (degenerate)
static inline double coeff_of_variation(const double* v, int n) {
    double m = 0.0, s = 0.0;
    for (int i = 0; i < n; i++) { m += v[i]; }
    m /= n;
    for (int i = 0; i < n; i++) { s += (v[i] - m) * (v[i] - m); }
    return m > 0.0 ? sqrt(s / n) / m : -1.0;
}

// Row / Column / None from the row and column variances of an [R x C] tensor: the CVs normalised by the
// i.i.d. Gaussian values sqrt(2/(C-1)) and sqrt(2/(R-1)), compared with ratio tau. Degenerate -> None.
static inline int classify_pattern(const double* row_var, const double* col_var, int R, int C, double tau) {
    if (R < 2 || C < 2) { return PATTERN_NONE; }
    double cv_row = coeff_of_variation(row_var, R), cv_col = coeff_of_variation(col_var, C);
    if (cv_row < 0.0 || cv_col < 0.0) { return PATTERN_NONE; }
    double n_row = cv_row / sqrt(2.0 / (C - 1)), n_col = cv_col / sqrt(2.0 / (R - 1));
    if (n_row > tau * n_col) { return PATTERN_ROW; }
    if (n_col > tau * n_row) { return PATTERN_COL; }
    return PATTERN_NONE;
}

// the pattern of the transposed tensor (Row <-> Column)
static inline int pattern_transpose(int p) { return p == PATTERN_ROW ? PATTERN_COL : (p == PATTERN_COL ? PATTERN_ROW : p); }

// strategy of a GEMM from the patterns of A as [M x K] and of B as [K x N] (docs/adahop.md section 5)
static inline int adahop_strategy(int pattern_a, int pattern_b) {
    if (pattern_a == PATTERN_COL && pattern_b == PATTERN_COL) { return STRAT_BF16; }
    if (pattern_b == PATTERN_COL) { return STRAT_IHT_OE_ROWS_B; }
    if (pattern_a == PATTERN_ROW && pattern_b == PATTERN_NONE) { return STRAT_IHT_OE_ROWS_A; }
    return STRAT_IHT;
}

// (pattern of A, pattern of B) of the GEMMs GEMM_FWD, GEMM_DX, GEMM_DW of a linear layer y = x W^T, from the
// patterns of x [N x Cin], W [Cout x Cin] and dY [N x Cout]: forward (x, W^T), dX (dY, W), dW (dY^T, x)
static inline void linear_gemm_patterns(int px, int pw, int pdy, int pa[3], int pb[3]) {
    pa[GEMM_FWD] = px;                     pb[GEMM_FWD] = pattern_transpose(pw);
    pa[GEMM_DX] = pdy;                     pb[GEMM_DX] = pw;
    pa[GEMM_DW] = pattern_transpose(pdy);  pb[GEMM_DW] = px;
}

// the strategy of `gemm` from the patterns of x, W, dY; for dW, OE on rows of dY^T becomes plain IHT (the saved
// x exists only in MXFP4, docs/adahop.md section 6)
static inline int adahop_gemm_strategy(const int patterns[NUM_TENSORS], int gemm) {
    int pa[NUM_GEMMS], pb[NUM_GEMMS];
    linear_gemm_patterns(patterns[TENSOR_X], patterns[TENSOR_W], patterns[TENSOR_DY], pa, pb);
    int s = adahop_strategy(pa[gemm], pb[gemm]);
    return gemm == GEMM_DW && s == STRAT_IHT_OE_ROWS_A ? STRAT_IHT : s;
}

// a state for num_layers blocks, nothing recorded, not calibrated; dies on invalid settings; calib_strategy is
// STRAT_PLAIN (the paper's calibration, docs/adahop.md section 7) or STRAT_IHT
static inline void adahop_init(AdahopState* st, int precision, int num_layers, int calib_steps, int calib_strategy,
                               int reclass_every, int reclass_window, int oe_k) {
    if (precision < 0 || precision >= NUM_PRECISIONS) { die("adahop_init: unknown precision %d", precision); }
    if (num_layers < 1) { die("adahop_init: num_layers %d must be >= 1", num_layers); }
    if (calib_steps < 1) { die("adahop_init: calibration steps %d must be >= 1", calib_steps); }
    if (calib_strategy != STRAT_PLAIN && calib_strategy != STRAT_IHT) {
        die("adahop_init: calibration strategy %d must be plain (%d) or iht (%d)", calib_strategy, STRAT_PLAIN, STRAT_IHT);
    }
    if (reclass_every < 0) { die("adahop_init: re-classification interval %d must be >= 0 (0 = off)", reclass_every); }
    if (reclass_every > 0 && (reclass_window < 1 || reclass_window > reclass_every)) {
        die("adahop_init: re-classification window %d must be in [1, %d] (the interval)", reclass_window, reclass_every);
    }
    if (oe_k < 1) { die("adahop_init: outlier extraction k %d must be >= 1", oe_k); }
    memset(st, 0, sizeof(*st));
    st->precision = precision;
    st->num_layers = num_layers;
    st->num_linears = num_layers * NUM_LINEAR_KINDS;
    st->calib_steps = calib_steps;
    st->calib_strategy = calib_strategy;
    st->reclass_every = reclass_every;
    st->reclass_window = reclass_window;
    st->oe_k = oe_k;
    st->linear_names = adahop_linear_names;
    int room = st->num_linears + 1;   // the arrays have room for the LM head (adahop_include_head)
    st->votes = (int*)calloc_check((size_t)room * NUM_TENSORS * NUM_PATTERNS, sizeof(int));
    st->pattern = (int*)calloc_check((size_t)room * NUM_TENSORS, sizeof(int));   // PATTERN_NONE
    st->strategy = (int*)malloc_check((size_t)room * NUM_GEMMS * sizeof(int));
    st->bf16_gemms = (uint8_t*)calloc_check((size_t)room, sizeof(uint8_t));
    for (int i = 0; i < room * NUM_GEMMS; i++) { st->strategy[i] = STRAT_PLAIN; }
}

// 1 if the LM head is a linear of the state (adahop_include_head): linear num_layers * NUM_LINEAR_KINDS, after the blocks
static inline int adahop_has_head(const AdahopState* st) { return st->num_linears > st->num_layers * NUM_LINEAR_KINDS; }

// adds the LM head as one more linear after the blocks, in the room adahop_init left for it (its votes, pattern and
// strategies are those of a fresh linear)
static inline void adahop_include_head(AdahopState* st) {
    if (adahop_has_head(st)) { die("adahop_include_head: the state has its LM head already"); }
    st->num_linears++;
}

// index of the LM head's linear (adahop_include_head)
static inline int adahop_head_index(const AdahopState* st) { return st->num_layers * NUM_LINEAR_KINDS; }

// frees the arrays of st
static inline void adahop_free(AdahopState* st) {
    free(st->votes);
    free(st->pattern);
    free(st->strategy);
    free(st->bf16_gemms);
    memset(st, 0, sizeof(*st));
}

// dies unless linear and index (a GEMM or a tensor, n of them) are in range
static inline void adahop_check_linear(const AdahopState* st, const char* what, int linear, int index, int n) {
    if (linear < 0 || linear >= st->num_linears || index < 0 || index >= n) {
        die("%s: linear %d (of %d) or index %d (of %d) out of range", what, linear, st->num_linears, index, n);
    }
}

// the strategy of GEMM `gemm` of linear `linear` under the state's precision
static inline int adahop_strategy_of(const AdahopState* st, int linear, int gemm) {
    adahop_check_linear(st, "adahop_strategy_of", linear, gemm, NUM_GEMMS);
    if ((st->bf16_gemms[linear] >> gemm) & 1) { return STRAT_BF16; }
    switch (st->precision) {
        case PREC_BF16: return STRAT_BF16;
        case PREC_MXFP4: return STRAT_PLAIN;
        case PREC_HADAMARD: return STRAT_IHT;
        default: return st->calibrated ? st->strategy[linear * NUM_GEMMS + gemm] : st->calib_strategy;
    }
}

// 1 if step ends a re-classification interval after calibration (a vote follows it), else 0
static inline int adahop_is_reclass_end(const AdahopState* st, int step) {
    return st->reclass_every > 0 && (step + 1) % st->reclass_every == 0 && step + 1 > st->calib_steps;
}

// 1 if the patterns should be recorded at this step: calibration, or the window before a re-classification
static inline int adahop_wants_stats(const AdahopState* st, int step) {
    if (st->precision != PREC_ADAHOP || step < 0) { return 0; }
    if (step < st->calib_steps) { return 1; }
    if (st->reclass_every == 0) { return 0; }
    int next = (step / st->reclass_every + 1) * st->reclass_every;   // the first point kR after step
    return next > st->calib_steps && next - step <= st->reclass_window;
}

// counts one observation of `pattern` for tensor `tensor` of linear `linear`
static inline void adahop_record(AdahopState* st, int linear, int tensor, int pattern) {
    adahop_check_linear(st, "adahop_record", linear, tensor, NUM_TENSORS);
    if (pattern < 0 || pattern >= NUM_PATTERNS) { die("adahop_record: unknown pattern %d", pattern); }
    st->votes[(linear * NUM_TENSORS + tensor) * NUM_PATTERNS + pattern]++;
}

// the majority pattern of votes[NUM_PATTERNS]; ties go to PATTERN_NONE if it is tied, else the lower enum;
// `previous` when nothing was recorded
static inline int adahop_majority(const int* votes, int previous) {
    int best = PATTERN_NONE;
    for (int p = 1; p < NUM_PATTERNS; p++) { if (votes[p] > votes[best]) { best = p; } }
    return votes[best] > 0 ? best : previous;
}

// the strategy in effect of every (linear, GEMM), into out[num_linears * NUM_GEMMS]
static inline void adahop_effective_strategies(const AdahopState* st, int* out) {
    for (int i = 0; i < st->num_linears * NUM_GEMMS; i++) { out[i] = adahop_strategy_of(st, i / NUM_GEMMS, i % NUM_GEMMS); }
}

#define ADAHOP_CHANGE_TEXT_MAX 128
// one strategy change in the logs' words: "layer <l> <linear> <gemm>: <before> -> <after>" (the LM head: layer
// num_layers, linear "lm_head")
static inline void adahop_change_text(const AdahopState* st, int linear, int gemm, int before, int after, char* buf, size_t n) {
    const char* name = linear == adahop_head_index(st) ? "lm_head" : st->linear_names[linear % NUM_LINEAR_KINDS];
    snprintf(buf, n, "layer %d %s %s: %s -> %s", linear / NUM_LINEAR_KINDS, name, adahop_gemm_names[gemm],
             adahop_strategy_names[before], adahop_strategy_names[after]);
}

// the table cell of a linear: strategy codes of fwd/dx/dw, a space, voted patterns of x/W/dY; counts each strategy
static inline void adahop_table_cell(const AdahopState* st, int lin, char cell[NUM_GEMMS + NUM_TENSORS + 2], int counts[NUM_STRATEGIES]) {
    for (int g = 0; g < NUM_GEMMS; g++) {
        int s = adahop_strategy_of(st, lin, g);
        cell[g] = adahop_strategy_codes[s];
        counts[s]++;
    }
    cell[NUM_GEMMS] = ' ';
    for (int t = 0; t < NUM_TENSORS; t++) { cell[NUM_GEMMS + 1 + t] = adahop_pattern_codes[st->pattern[lin * NUM_TENSORS + t]]; }
    cell[NUM_GEMMS + NUM_TENSORS + 1] = '\0';
}

// votes every (linear, tensor), derives the strategies, clears the votes; logs and counts the changed GEMMs
static inline int adahop_vote(AdahopState* st, int step, FILE* log) {
    int changes = 0;
    for (int lin = 0; lin < st->num_linears; lin++) {
        int* pat = st->pattern + lin * NUM_TENSORS;
        for (int t = 0; t < NUM_TENSORS; t++) { pat[t] = adahop_majority(st->votes + (lin * NUM_TENSORS + t) * NUM_PATTERNS, pat[t]); }
        for (int g = 0; g < NUM_GEMMS; g++) {
            int before = adahop_strategy_of(st, lin, g), after = adahop_gemm_strategy(pat, g);
            st->strategy[lin * NUM_GEMMS + g] = after;
            if (before == after) { continue; }
            changes++;
            if (log) {
                char text[ADAHOP_CHANGE_TEXT_MAX];
                adahop_change_text(st, lin, g, before, after, text, sizeof(text));
                fprintf(log, "adahop step %d %s\n", step + 1, text);
            }
        }
    }
    memset(st->votes, 0, (size_t)st->num_linears * NUM_TENSORS * NUM_PATTERNS * sizeof(int));
    st->calibrated = 1;
    if (log) { fflush(log); }
    return changes;
}

// 1 if a strategy vote follows the update of `step`: the end of calibration or of a re-classification interval,
// in adahop precision
static inline int adahop_is_vote_step(const AdahopState* st, int step) {
    return st->precision == PREC_ADAHOP && (step == st->calib_steps - 1 || adahop_is_reclass_end(st, step));
}

// after the update of `step`: votes at the end of calibration and at re-classification points; returns the
// number of GEMMs whose strategy changed (0 at other steps and for the fixed precisions)
static inline int adahop_end_step(AdahopState* st, int step, FILE* log) {
    return adahop_is_vote_step(st, step) ? adahop_vote(st, step, log) : 0;
}

// prints one line per layer (per linear: strategy codes of fwd/dx/dw, voted patterns of x/W/dY), the LM head's
// line when it is a linear of the state, a legend, and how many GEMMs run each strategy
static inline void adahop_print_table(const AdahopState* st, FILE* fp) {
    int counts[NUM_STRATEGIES] = {0};
    fprintf(fp, "adahop strategies (%s%s):\nlayer", precision_names[st->precision],
            st->precision == PREC_ADAHOP && !st->calibrated ? ", calibrating" : "");
    for (int k = 0; k < NUM_LINEAR_KINDS; k++) { fprintf(fp, " | %-*s", k + 1 < NUM_LINEAR_KINDS ? 7 : 0, st->linear_names[k]); }
    fprintf(fp, "\n");
    for (int l = 0; l < st->num_layers; l++) {
        fprintf(fp, "%5d", l);
        for (int k = 0; k < NUM_LINEAR_KINDS; k++) {
            char cell[NUM_GEMMS + NUM_TENSORS + 2];
            adahop_table_cell(st, l * NUM_LINEAR_KINDS + k, cell, counts);
            fprintf(fp, " | %s", cell);
        }
        fprintf(fp, "\n");
    }
    if (adahop_has_head(st)) {
        char cell[NUM_GEMMS + NUM_TENSORS + 2];
        adahop_table_cell(st, adahop_head_index(st), cell, counts);
        fprintf(fp, "lm_head | %s\n", cell);
    }
    fprintf(fp, "legend: fwd/dx/dw strategy P=plain I=iht R=iht+oe rows of A C=iht+oe cols of B B=bf16, "
                "then voted pattern of x/W/dY N=none R=row C=column\ncounts:");
    for (int s = 0; s < NUM_STRATEGIES; s++) { fprintf(fp, " %s %d%s", adahop_strategy_names[s], counts[s], s + 1 < NUM_STRATEGIES ? "," : "\n"); }
}

// FNV-1a hash of the strategy array: the same on every rank of a data-parallel run, logged when strategies change
static inline uint32_t adahop_strategy_checksum(const AdahopState* st) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < st->num_linears * NUM_GEMMS; i++) { h = (h ^ (uint32_t)st->strategy[i]) * 16777619u; }
    return h;
}

// number of int32 words adahop_save writes
static inline size_t adahop_state_words(const AdahopState* st) {
    return ADAHOP_HEADER_WORDS + (size_t)st->num_linears * (NUM_TENSORS * NUM_PATTERNS + NUM_TENSORS + NUM_GEMMS);
}

// the header words: magic, settings, calibrated
static inline void adahop_header(const AdahopState* st, int32_t h[ADAHOP_HEADER_WORDS]) {
    int32_t v[ADAHOP_HEADER_WORDS] = {ADAHOP_MAGIC, st->precision, st->num_layers, st->calib_steps, st->calib_strategy,
                                      st->reclass_every, st->reclass_window, st->oe_k, st->calibrated};
    memcpy(h, v, sizeof(v));
}

// the arrays of st in serialization order (votes, patterns, strategies) and their lengths
static inline void adahop_arrays(const AdahopState* st, int* arrays[3], size_t sizes[3]) {
    arrays[0] = st->votes;    sizes[0] = (size_t)st->num_linears * NUM_TENSORS * NUM_PATTERNS;
    arrays[1] = st->pattern;  sizes[1] = (size_t)st->num_linears * NUM_TENSORS;
    arrays[2] = st->strategy; sizes[2] = (size_t)st->num_linears * NUM_GEMMS;
}

// writes the whole state (settings, calibration flag, votes in progress, patterns, strategies) to words
static inline void adahop_save(const AdahopState* st, int32_t* words) {
    int* arrays[3];
    size_t sizes[3];
    adahop_header(st, words);
    adahop_arrays(st, arrays, sizes);
    words += ADAHOP_HEADER_WORDS;
    for (int a = 0; a < 3; a++) {
        for (size_t i = 0; i < sizes[a]; i++) { words[i] = arrays[a][i]; }
        words += sizes[a];
    }
}

// dies unless every value of v[0..n) lies in [0, hi)
static inline void adahop_check_range(const char* what, const int* v, size_t n, int hi) {
    for (size_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= hi) { die("adahop_load: corrupt AdaHOP state: %s %d at %zu is outside [0, %d)", what, v[i], i, hi); }
    }
}

// restores a state saved by adahop_save into st (initialised with the same settings); dies on any mismatch
static inline void adahop_load(AdahopState* st, const int32_t* words, size_t n) {
    static const char* const fields[ADAHOP_HEADER_WORDS - 1] = {"magic", "precision", "num_layers",
        "calibration steps (-w)", "calibration strategy (-C)", "re-classification interval (-R)", "re-classification window (-W)",
        "outlier extraction k (-K)"};
    size_t one_linear = NUM_TENSORS * NUM_PATTERNS + NUM_TENSORS + NUM_GEMMS, want_n = adahop_state_words(st);
    if (n != want_n && (n + one_linear == want_n || n == want_n + one_linear)) {
        die("adahop_load: the saved AdaHOP state %s the LM head, this run %s: resume with the same -H", n > want_n ? "has" : "lacks",
            adahop_has_head(st) ? "has it" : "does not");
    }
    if (n != want_n) {
        die("adahop_load: the saved AdaHOP state has %zu words, this run needs %zu (a different model depth?)", n, want_n);
    }
    int32_t want[ADAHOP_HEADER_WORDS];
    adahop_header(st, want);
    for (int i = 0; i < ADAHOP_HEADER_WORDS - 1; i++) {
        if (words[i] != want[i]) {
            die("adahop_load: the saved AdaHOP state has %s %d, this run %d (resume with the same settings)", fields[i],
                (int)words[i], (int)want[i]);
        }
    }
    int* arrays[3];
    size_t sizes[3];
    int calibrated = words[ADAHOP_HEADER_WORDS - 1];
    adahop_check_range("calibrated flag", &calibrated, 1, 2);
    st->calibrated = calibrated;
    adahop_arrays(st, arrays, sizes);
    words += ADAHOP_HEADER_WORDS;
    for (int a = 0; a < 3; a++) {
        for (size_t i = 0; i < sizes[a]; i++) { arrays[a][i] = words[i]; }
        words += sizes[a];
    }
    adahop_check_range("vote count", st->votes, sizes[0], INT32_MAX);
    adahop_check_range("pattern", st->pattern, sizes[1], NUM_PATTERNS);
    adahop_check_range("strategy", st->strategy, sizes[2], NUM_STRATEGIES);
}

#endif
