// Tests of the AdaHOP controller (llmc/adahop.h): precision names, the fixed strategies of bf16 / mxfp4 /
// hadamard, majority votes with ties, the calibration boundary, the re-classification windows for several
// intervals and windows, the change log, the dW OE-rows rule, the strategy table, the LM head as one more linear
// (votes, log, table, save/load), save/load round trips that
// continue with identical decisions, the strategy checksum, and the clear errors of bad settings and mismatched
// saved states.
//
// build: gcc -O2 -std=gnu11 -Wall -Wextra -fopenmp -I. dev/test/test_adahop_state.c -o build/test_adahop_state -lm
#include "llmc/utils.h"
#include "llmc/adahop.h"
#include "dev/test/test_common.h"

// records `n` votes of pattern p for tensor t of linear lin
static void vote(AdahopState* st, int lin, int t, int p, int n) {
    for (int i = 0; i < n; i++) { adahop_record(st, lin, t, p); }
}

// records the patterns x, W, dY once for linear lin
static void vote3(AdahopState* st, int lin, int px, int pw, int pdy) {
    vote(st, lin, TENSOR_X, px, 1);
    vote(st, lin, TENSOR_W, pw, 1);
    vote(st, lin, TENSOR_DY, pdy, 1);
}

// 1 if every vote counter of st is zero
static int votes_clear(const AdahopState* st) {
    for (int i = 0; i < st->num_linears * NUM_TENSORS * NUM_PATTERNS; i++) { if (st->votes[i] != 0) { return 0; } }
    return 1;
}

// the whole text written to a temporary file by fn(st, fp), into buf
static void capture(char* buf, size_t size, void (*fn)(AdahopState*, FILE*), AdahopState* st) {
    FILE* fp = tmpfile();
    if (fp == NULL) { die("tmpfile failed"); }
    fn(st, fp);
    rewind(fp);
    size_t n = fread(buf, 1, size - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

static void print_table_fn(AdahopState* st, FILE* fp) { adahop_print_table(st, fp); }

// names <-> PREC_* values
static void test_names(void) {
    for (int p = 0; p < NUM_PRECISIONS; p++) { CHECK(precision_from_name(precision_names[p]) == p, "precision name %s", precision_names[p]); }
    CHECK(precision_from_name("fp8") == -1 && precision_from_name("") == -1 && precision_from_name("BF16") == -1, "unknown names give -1");
}

// bf16, mxfp4 and hadamard give one fixed strategy everywhere, never want statistics and never vote
static void test_fixed_precisions(void) {
    int want[3] = {STRAT_BF16, STRAT_PLAIN, STRAT_IHT};
    for (int p = PREC_BF16; p <= PREC_HADAMARD; p++) {
        AdahopState st;
        adahop_init(&st, p, 3, 2, STRAT_PLAIN, 4, 2, 8);
        int same = 1, stats = 0, changes = 0;
        for (int step = 0; step < 20; step++) {
            stats += adahop_wants_stats(&st, step);
            vote3(&st, 0, PATTERN_COL, PATTERN_ROW, PATTERN_ROW);
            changes += adahop_end_step(&st, step, NULL);
            for (int lin = 0; lin < st.num_linears; lin++) {
                for (int g = 0; g < NUM_GEMMS; g++) { same &= adahop_strategy_of(&st, lin, g) == want[p]; }
            }
        }
        CHECK(same, "%s: every GEMM must run %s", precision_names[p], adahop_strategy_names[want[p]]);
        CHECK(stats == 0 && changes == 0, "%s: no statistics (%d) and no strategy changes (%d)", precision_names[p], stats, changes);
        adahop_free(&st);
    }
}

// bf16_gemms (the trainer's -B / -T) puts exactly the GEMMs of its bits in BF16, in every precision and before and
// after the first vote; the voted strategies underneath are unchanged and come back when the bits are cleared
static void test_bf16_override(void) {
    for (int p = 0; p < NUM_PRECISIONS; p++) {
        AdahopState st;
        adahop_init(&st, p, 2, 1, STRAT_PLAIN, 0, 1, 8);
        int before[2 * NUM_LINEAR_KINDS * NUM_GEMMS];
        adahop_effective_strategies(&st, before);
        st.bf16_gemms[1] = 1 << GEMM_DX;
        st.bf16_gemms[5] = (1 << GEMM_FWD) | (1 << GEMM_DW);
        int ok = 1;
        for (int lin = 0; lin < st.num_linears; lin++) {
            for (int g = 0; g < NUM_GEMMS; g++) {
                int want = (st.bf16_gemms[lin] >> g) & 1 ? STRAT_BF16 : before[lin * NUM_GEMMS + g];
                ok &= adahop_strategy_of(&st, lin, g) == want;
            }
        }
        CHECK(ok, "%s: only the GEMMs of bf16_gemms run in BF16", precision_names[p]);
        memset(st.bf16_gemms, 0, (size_t)st.num_linears);
        int after[2 * NUM_LINEAR_KINDS * NUM_GEMMS];
        adahop_effective_strategies(&st, after);
        CHECK(memcmp(before, after, sizeof(before)) == 0, "%s: cleared bits give the strategies back", precision_names[p]);
        adahop_free(&st);
    }
}

// majority per (linear, tensor); ties -> None if tied, else the lower enum; no votes -> the previous pattern
static void test_majority(void) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 2, 1, STRAT_PLAIN, 0, 1, 4);
    struct { int none, row, col, want; } cases[] = {
        {0, 3, 1, PATTERN_ROW}, {1, 0, 2, PATTERN_COL}, {2, 2, 0, PATTERN_NONE}, {0, 2, 2, PATTERN_ROW},
        {3, 3, 3, PATTERN_NONE}, {1, 2, 2, PATTERN_ROW}, {2, 1, 2, PATTERN_NONE}, {0, 0, 0, PATTERN_NONE}};
    int n = (int)(sizeof(cases) / sizeof(cases[0]));
    for (int i = 0; i < n; i++) {
        int lin = i / NUM_TENSORS, t = i % NUM_TENSORS;
        vote(&st, lin, t, PATTERN_NONE, cases[i].none);
        vote(&st, lin, t, PATTERN_ROW, cases[i].row);
        vote(&st, lin, t, PATTERN_COL, cases[i].col);
    }
    adahop_end_step(&st, 0, NULL);
    for (int i = 0; i < n; i++) {
        CHECK(st.pattern[i] == cases[i].want, "votes none %d row %d col %d -> %d, want %d", cases[i].none, cases[i].row,
              cases[i].col, st.pattern[i], cases[i].want);
    }
    CHECK(votes_clear(&st), "a vote clears the counters");
    adahop_free(&st);
    // no votes keeps the previous pattern (R = 2: re-classification at steps 1, 3, ...)
    adahop_init(&st, PREC_ADAHOP, 1, 1, STRAT_PLAIN, 2, 1, 4);
    vote(&st, LIN_FC, TENSOR_X, PATTERN_COL, 1);
    adahop_end_step(&st, 0, NULL);
    adahop_end_step(&st, 1, NULL);
    CHECK(st.pattern[LIN_FC * NUM_TENSORS + TENSOR_X] == PATTERN_COL, "a vote without observations keeps the pattern");
    adahop_free(&st);
}

// the calibration strategy (plain MXFP4 or IHT) until the end of calibration (step calib - 1), the voted
// strategies after it
static void test_calibration_boundary(int calib_strategy) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 1, 3, calib_strategy, 0, 1, 4);
    int plain = 1, no_vote = 1;
    for (int step = 0; step < 2; step++) {
        vote3(&st, LIN_QKV, PATTERN_COL, PATTERN_ROW, PATTERN_NONE);
        no_vote &= adahop_end_step(&st, step, NULL) == 0 && !st.calibrated;
        for (int g = 0; g < NUM_GEMMS; g++) { plain &= adahop_strategy_of(&st, LIN_QKV, g) == calib_strategy; }
    }
    CHECK(plain && no_vote, "before the last calibration step: %s, no vote", adahop_strategy_names[calib_strategy]);
    vote3(&st, LIN_QKV, PATTERN_COL, PATTERN_ROW, PATTERN_NONE);
    int changes = adahop_end_step(&st, 2, NULL);
    // x Column, W Row, dY None: fwd (Col, Col) -> BF16; dX (None, Row) -> IHT; dW (None, Col) -> OE cols of B
    CHECK(st.calibrated && adahop_strategy_of(&st, LIN_QKV, GEMM_FWD) == STRAT_BF16
          && adahop_strategy_of(&st, LIN_QKV, GEMM_DX) == STRAT_IHT
          && adahop_strategy_of(&st, LIN_QKV, GEMM_DW) == STRAT_IHT_OE_ROWS_B, "voted strategies after calibration");
    // the linears without observations vote None everywhere = IHT: under IHT calibration only qkv's fwd and dW change
    int want_changes = calib_strategy == STRAT_IHT ? 2 : NUM_LINEAR_KINDS * NUM_GEMMS;
    CHECK(changes == want_changes, "GEMMs that leave %s at calibration: %d, want %d", adahop_strategy_names[calib_strategy],
          changes, want_changes);
    CHECK(adahop_end_step(&st, 3, NULL) == 0 && adahop_end_step(&st, 100, NULL) == 0, "no further votes with R = 0");
    adahop_free(&st);
}

// the definition: calibration steps, or the w steps before a point kR > calib
static int want_stats_ref(int calib, int R, int w, int step) {
    if (step < calib) { return 1; }
    for (int k = 1; R > 0 && k * R <= step + w; k++) { if (k * R > calib && k * R - w <= step && step < k * R) { return 1; } }
    return 0;
}

// windows and vote points for several (calib, R, w)
static void test_windows(void) {
    int cfg[][3] = {{30, 0, 5}, {30, 500, 10}, {5, 10, 3}, {30, 32, 5}, {3, 4, 4}, {10, 10, 2}, {1, 1, 1}, {7, 3, 2}};
    for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
        int calib = cfg[c][0], R = cfg[c][1], w = cfg[c][2];
        AdahopState st;
        adahop_init(&st, PREC_ADAHOP, 1, calib, STRAT_PLAIN, R, w, 4);
        int stats_ok = 1, votes_ok = 1;
        for (int step = 0; step < 1200; step++) {
            stats_ok &= adahop_wants_stats(&st, step) == want_stats_ref(calib, R, w, step);
            vote(&st, 0, TENSOR_X, PATTERN_ROW, 1);
            adahop_end_step(&st, step, NULL);
            int point = step == calib - 1 || (R > 0 && (step + 1) % R == 0 && step + 1 > calib);
            votes_ok &= votes_clear(&st) == point;
        }
        CHECK(stats_ok, "calib %d R %d W %d: the steps that want statistics", calib, R, w);
        CHECK(votes_ok, "calib %d R %d W %d: votes exactly at calib - 1 and kR - 1 > calib - 1", calib, R, w);
        adahop_free(&st);
    }
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 1, 5, STRAT_PLAIN, 10, 3, 4);
    int steps[] = {0, 4, 5, 6, 7, 9, 10, 16, 17, 19, 20};
    int want[] = {1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0};
    for (int i = 0; i < 11; i++) { CHECK(adahop_wants_stats(&st, steps[i]) == want[i], "calib 5 R 10 W 3: step %d", steps[i]); }
    adahop_free(&st);
}

// one log line per changed GEMM, in the documented format
static void test_change_log(void) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 2, 2, STRAT_PLAIN, 4, 2, 4);
    FILE* fp = tmpfile();
    for (int lin = 0; lin < st.num_linears; lin++) { vote3(&st, lin, PATTERN_NONE, PATTERN_NONE, PATTERN_NONE); }
    adahop_end_step(&st, 0, fp);
    int n = adahop_end_step(&st, 1, fp);   // calibration: all 24 GEMMs plain -> iht
    // steps 2, 3: layer 1 fc gets x Column -> its dW becomes OE on columns of B, fwd stays IHT (Col, None)
    vote3(&st, 1 * NUM_LINEAR_KINDS + LIN_FC, PATTERN_COL, PATTERN_NONE, PATTERN_NONE);
    int n2 = adahop_end_step(&st, 3, fp);
    rewind(fp);
    char line[256], first[256] = "", last[256] = "";
    int lines = 0;
    while (fgets(line, sizeof(line), fp)) { if (lines++ == 0) { strcpy(first, line); } strcpy(last, line); }
    fclose(fp);
    CHECK(n == 24 && n2 == 1 && lines == 25, "changes %d + %d, log lines %d (want 24 + 1, 25)", n, n2, lines);
    CHECK(strcmp(first, "adahop step 2 layer 0 qkv fwd: plain -> iht\n") == 0, "first line: %s", first);
    CHECK(strcmp(last, "adahop step 4 layer 1 fc dw: iht -> iht+oe_rows_b\n") == 0, "last line: %s", last);
    adahop_free(&st);
}

// dW never extracts rows of dY^T; fwd and dX keep OE on rows of A
static void test_dw_rule(void) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 1, 1, STRAT_PLAIN, 0, 1, 4);
    vote3(&st, LIN_ATTPROJ, PATTERN_ROW, PATTERN_NONE, PATTERN_ROW);   // x Row, W None, dY Row
    vote3(&st, LIN_FC, PATTERN_NONE, PATTERN_NONE, PATTERN_COL);       // dY Column: dW A = flip(dY) = Row, B = x None
    adahop_end_step(&st, 0, NULL);
    int pa[3], pb[3];
    linear_gemm_patterns(PATTERN_NONE, PATTERN_NONE, PATTERN_COL, pa, pb);
    CHECK(adahop_strategy(pa[GEMM_DW], pb[GEMM_DW]) == STRAT_IHT_OE_ROWS_A, "the table itself says OE rows of A for this dW");
    CHECK(adahop_strategy_of(&st, LIN_FC, GEMM_DW) == STRAT_IHT, "dW: OE on rows of dY^T becomes IHT");
    CHECK(adahop_strategy_of(&st, LIN_ATTPROJ, GEMM_FWD) == STRAT_IHT_OE_ROWS_A
          && adahop_strategy_of(&st, LIN_ATTPROJ, GEMM_DX) == STRAT_IHT_OE_ROWS_A, "fwd and dX keep OE on rows of A");
    adahop_free(&st);
}

// the table: one line per layer with codes and patterns, a legend, the counts
static void test_table(void) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 2, 1, STRAT_PLAIN, 0, 1, 4);
    char buf[4096];
    capture(buf, sizeof(buf), print_table_fn, &st);
    CHECK(strstr(buf, "calibrating") && strstr(buf, "    1 | PPP NNN | PPP NNN | PPP NNN | PPP NNN\n")
          && strstr(buf, "counts: iht 0, iht+oe_rows_a 0, iht+oe_rows_b 0, bf16 0, plain 24\n"), "table before calibration:\n%s", buf);
    vote3(&st, LIN_QKV, PATTERN_COL, PATTERN_ROW, PATTERN_NONE);
    adahop_end_step(&st, 0, NULL);
    capture(buf, sizeof(buf), print_table_fn, &st);
    CHECK(strstr(buf, "    0 | BIC CRN | III NNN | III NNN | III NNN\n") && strstr(buf, "legend:")
          && strstr(buf, "counts: iht 22, iht+oe_rows_a 0, iht+oe_rows_b 1, bf16 1, plain 0\n"), "table after calibration:\n%s", buf);
    adahop_free(&st);
}

static void change_log_fn(AdahopState* st, FILE* fp) { adahop_end_step(st, 0, fp); }

// the LM head as one more linear (adahop_include_head): index num_layers * 4, votes and strategies like a block
// linear's, logged as "layer <num_layers> lm_head", its own table line, saved and loaded with the rest
static void test_head(void) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 2, 1, STRAT_PLAIN, 0, 1, 4);
    adahop_include_head(&st);
    int head = adahop_head_index(&st);
    CHECK(adahop_has_head(&st) == 1 && st.num_linears == 9 && head == 8, "2 layers + head: 9 linears, head index %d", head);
    CHECK(adahop_strategy_of(&st, head, GEMM_FWD) == STRAT_PLAIN && adahop_strategy_of(&st, head, GEMM_DW) == STRAT_PLAIN
          && st.pattern[head * NUM_TENSORS + TENSOR_DY] == PATTERN_NONE, "the head starts in calibration, plain, pattern none");
    vote3(&st, head, PATTERN_COL, PATTERN_NONE, PATTERN_NONE);   // x Column (outlier channels), W None, dY None
    char buf[4096];
    capture(buf, sizeof(buf), change_log_fn, &st);
    CHECK(adahop_strategy_of(&st, head, GEMM_FWD) == STRAT_IHT && adahop_strategy_of(&st, head, GEMM_DX) == STRAT_IHT
          && adahop_strategy_of(&st, head, GEMM_DW) == STRAT_IHT_OE_ROWS_B, "the head's vote: fwd and dX IHT, dW OE on x's channels");
    CHECK(strstr(buf, "adahop step 1 layer 2 lm_head dw: plain -> iht+oe_rows_b\n")
          && strstr(buf, "adahop step 1 layer 1 fcproj dw: plain -> iht\n"), "change log names the head 'layer 2 lm_head':\n%s", buf);
    capture(buf, sizeof(buf), print_table_fn, &st);
    CHECK(strstr(buf, "    1 | III NNN | III NNN | III NNN | III NNN\nlm_head | IIC CNN\n")
          && strstr(buf, "counts: iht 26, iht+oe_rows_a 0, iht+oe_rows_b 1, bf16 0, plain 0\n"), "table with the head's line:\n%s", buf);
    size_t n = adahop_state_words(&st);
    int32_t* words = (int32_t*)malloc_check(n * sizeof(int32_t));
    adahop_save(&st, words);
    AdahopState back;
    adahop_init(&back, PREC_ADAHOP, 2, 1, STRAT_PLAIN, 0, 1, 4);
    adahop_include_head(&back);
    adahop_load(&back, words, n);
    CHECK(n == adahop_state_words(&back) && adahop_strategy_checksum(&back) == adahop_strategy_checksum(&st)
          && adahop_strategy_of(&back, head, GEMM_DW) == STRAT_IHT_OE_ROWS_B, "save / load with the head: %zu words, same strategies", n);
    free(words);
    adahop_free(&back);
    adahop_free(&st);
}

// a deterministic pseudo-random pattern stream
static int next_pattern(uint32_t* s) { *s = *s * 1664525u + 1013904223u; return (int)((*s >> 16) % NUM_PATTERNS); }

// runs st from step `from` to `to` with the pattern stream *s, recording where stats are wanted; returns a
// checksum of all strategies and change counts along the way
static long run_steps(AdahopState* st, int from, int to, uint32_t* s) {
    long sum = 0;
    for (int step = from; step < to; step++) {
        if (adahop_wants_stats(st, step)) {
            for (int lin = 0; lin < st->num_linears; lin++) {
                for (int t = 0; t < NUM_TENSORS; t++) { adahop_record(st, lin, t, next_pattern(s)); }
            }
        }
        sum = sum * 31 + adahop_end_step(st, step, NULL);
        for (int lin = 0; lin < st->num_linears; lin++) {
            for (int g = 0; g < NUM_GEMMS; g++) { sum = (sum * 7 + adahop_strategy_of(st, lin, g)) % 1000000007L; }
        }
    }
    return sum;
}

// a state saved mid-window (votes in progress) and loaded into a fresh one decides exactly like the original
static void test_round_trip(void) {
    int splits[] = {2, 12, 18, 27};   // in calibration, after it, inside a window, just before a vote
    for (int i = 0; i < 4; i++) {
        AdahopState a, b;
        adahop_init(&a, PREC_ADAHOP, 3, 10, STRAT_PLAIN, 6, 4, 16);
        adahop_init(&b, PREC_ADAHOP, 3, 10, STRAT_PLAIN, 6, 4, 16);
        uint32_t s = 12345;
        run_steps(&a, 0, splits[i], &s);
        size_t n = adahop_state_words(&a);
        int32_t* words = (int32_t*)malloc_check(n * sizeof(int32_t));
        adahop_save(&a, words);
        adahop_load(&b, words, n);
        int32_t* wl = (int32_t*)malloc_check(n * sizeof(int32_t));
        adahop_save(&b, wl);
        CHECK(memcmp(wl, words, n * sizeof(int32_t)) == 0 && b.calibrated == a.calibrated, "load restores every word (step %d)", splits[i]);
        free(wl);
        uint32_t s2 = s;
        long ra = run_steps(&a, splits[i], 80, &s), rb = run_steps(&b, splits[i], 80, &s2);
        int32_t* wa = (int32_t*)malloc_check(n * sizeof(int32_t));
        int32_t* wb = (int32_t*)malloc_check(n * sizeof(int32_t));
        adahop_save(&a, wa);
        adahop_save(&b, wb);
        CHECK(ra == rb && memcmp(wa, wb, n * sizeof(int32_t)) == 0, "resume at step %d: identical decisions and state", splits[i]);
        CHECK(adahop_strategy_checksum(&a) == adahop_strategy_checksum(&b), "resume at step %d: same strategy checksum", splits[i]);
        free(words); free(wa); free(wb);
        adahop_free(&a); adahop_free(&b);
    }
}

// the strategy checksum: a fixed value for a fresh state, changed by any single strategy, and by its position
static void test_checksum(void) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 2, 10, STRAT_PLAIN, 0, 1, 16);
    uint32_t fresh = adahop_strategy_checksum(&st), want = 2166136261u;
    for (int i = 0; i < st.num_linears * NUM_GEMMS; i++) { want = (want ^ STRAT_PLAIN) * 16777619u; }
    CHECK(fresh == want, "fresh state: checksum %08x, FNV-1a of %d plain strategies %08x", fresh, st.num_linears * NUM_GEMMS, want);
    st.strategy[5] = STRAT_IHT;
    uint32_t at5 = adahop_strategy_checksum(&st);
    st.strategy[5] = STRAT_PLAIN;
    st.strategy[6] = STRAT_IHT;
    uint32_t at6 = adahop_strategy_checksum(&st);
    CHECK(at5 != fresh && at6 != fresh && at5 != at6, "one changed strategy changes the checksum (%08x %08x %08x)", fresh, at5, at6);
    adahop_free(&st);
}

// ---- errors (each runs in a forked child)

static int32_t* saved_words;
static size_t saved_n;

// a saved adahop state of 2 layers, calib 30, R 100, W 5, k 64, in saved_words
static void make_saved(void) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 2, 30, STRAT_PLAIN, 100, 5, 64);
    saved_n = adahop_state_words(&st);
    saved_words = (int32_t*)malloc_check(saved_n * sizeof(int32_t));
    adahop_save(&st, saved_words);
    adahop_free(&st);
}

// loads saved_words into a state built with these settings
static void load_into(int precision, int layers, int calib, int calib_strategy, int R, int W, int k) {
    AdahopState st;
    adahop_init(&st, precision, layers, calib, calib_strategy, R, W, k);
    adahop_load(&st, saved_words, saved_n);
}

static void load_layers(void) { load_into(PREC_ADAHOP, 3, 30, STRAT_PLAIN, 100, 5, 64); }
// saved_words (no head) into a state with the head, and a state with the head into one without
static void load_head_missing(void) {
    AdahopState st;
    adahop_init(&st, PREC_ADAHOP, 2, 30, STRAT_PLAIN, 100, 5, 64);
    adahop_include_head(&st);
    adahop_load(&st, saved_words, saved_n);
}
static void load_head_extra(void) {
    AdahopState with, without;
    adahop_init(&with, PREC_ADAHOP, 2, 30, STRAT_PLAIN, 100, 5, 64);
    adahop_include_head(&with);
    size_t n = adahop_state_words(&with);
    int32_t* words = (int32_t*)malloc_check(n * sizeof(int32_t));
    adahop_save(&with, words);
    adahop_init(&without, PREC_ADAHOP, 2, 30, STRAT_PLAIN, 100, 5, 64);
    adahop_load(&without, words, n);
}
static void head_twice(void) { AdahopState st; adahop_init(&st, PREC_ADAHOP, 1, 30, STRAT_PLAIN, 10, 5, 64); adahop_include_head(&st); adahop_include_head(&st); }
static void load_precision(void) { load_into(PREC_HADAMARD, 2, 30, STRAT_PLAIN, 100, 5, 64); }
static void load_calib(void) { load_into(PREC_ADAHOP, 2, 20, STRAT_PLAIN, 100, 5, 64); }
static void load_reclass(void) { load_into(PREC_ADAHOP, 2, 30, STRAT_PLAIN, 50, 5, 64); }
static void load_window(void) { load_into(PREC_ADAHOP, 2, 30, STRAT_PLAIN, 100, 4, 64); }
static void load_k(void) { load_into(PREC_ADAHOP, 2, 30, STRAT_PLAIN, 100, 5, 32); }
static void load_calib_strategy(void) { load_into(PREC_ADAHOP, 2, 30, STRAT_IHT, 100, 5, 64); }
static void load_short(void) { saved_n--; load_into(PREC_ADAHOP, 2, 30, STRAT_PLAIN, 100, 5, 64); }
static void load_magic(void) { saved_words[0] = 7; load_into(PREC_ADAHOP, 2, 30, STRAT_PLAIN, 100, 5, 64); }
static void load_corrupt(void) { saved_words[saved_n - 1] = 9; load_into(PREC_ADAHOP, 2, 30, STRAT_PLAIN, 100, 5, 64); }
static void init_calib0(void) { AdahopState st; adahop_init(&st, PREC_ADAHOP, 2, 0, STRAT_PLAIN, 0, 1, 64); }
static void init_calib_strategy(void) { AdahopState st; adahop_init(&st, PREC_ADAHOP, 2, 30, STRAT_BF16, 0, 1, 64); }
static void flag_calib_strategy(void) { calib_strategy_from_flag("hadamard"); }
static void init_window(void) { AdahopState st; adahop_init(&st, PREC_ADAHOP, 2, 30, STRAT_PLAIN, 10, 11, 64); }
static void init_window0(void) { AdahopState st; adahop_init(&st, PREC_ADAHOP, 2, 30, STRAT_PLAIN, 10, 0, 64); }
static void init_reclass(void) { AdahopState st; adahop_init(&st, PREC_ADAHOP, 2, 30, STRAT_PLAIN, -1, 5, 64); }
static void init_k(void) { AdahopState st; adahop_init(&st, PREC_ADAHOP, 2, 30, STRAT_PLAIN, 10, 5, 0); }
static void init_precision(void) { AdahopState st; adahop_init(&st, 4, 2, 30, STRAT_PLAIN, 10, 5, 64); }
static void init_layers(void) { AdahopState st; adahop_init(&st, PREC_ADAHOP, 0, 30, STRAT_PLAIN, 10, 5, 64); }
static void record_bad(void) { AdahopState st; adahop_init(&st, PREC_ADAHOP, 1, 30, STRAT_PLAIN, 10, 5, 64); adahop_record(&st, 4, 0, 0); }
static void record_pattern(void) { AdahopState st; adahop_init(&st, PREC_ADAHOP, 1, 30, STRAT_PLAIN, 10, 5, 64); adahop_record(&st, 0, 0, 3); }

static void test_errors(void) {
    make_saved();
    CHECK(child_fails_with(load_layers, "has 129 words, this run needs 189"), "a different depth dies");
    CHECK(child_fails_with(load_head_missing, "the saved AdaHOP state lacks the LM head, this run has it: resume with the same -H"),
          "a state without the head into a run with it dies");
    CHECK(child_fails_with(load_head_extra, "the saved AdaHOP state has the LM head, this run does not: resume with the same -H"),
          "a state with the head into a run without it dies");
    CHECK(child_fails_with(head_twice, "has its LM head already"), "adding the head twice dies");
    CHECK(child_fails_with(load_precision, "has precision 3, this run 2"), "a different precision dies");
    CHECK(child_fails_with(load_calib, "calibration steps (-w) 30, this run 20"), "a different calibration dies");
    CHECK(child_fails_with(load_calib_strategy, "calibration strategy (-C) 4, this run 0"), "a different -C dies");
    CHECK(child_fails_with(load_reclass, "re-classification interval (-R) 100, this run 50"), "a different -R dies");
    CHECK(child_fails_with(load_window, "re-classification window (-W) 5, this run 4"), "a different -W dies");
    CHECK(child_fails_with(load_k, "outlier extraction k (-K) 64, this run 32"), "a different k dies");
    CHECK(child_fails_with(load_short, "words"), "a truncated state dies");
    CHECK(child_fails_with(load_magic, "has magic 7"), "a wrong magic dies");
    CHECK(child_fails_with(load_corrupt, "corrupt AdaHOP state: strategy 9"), "a corrupt strategy dies");
    CHECK(child_fails_with(init_calib0, "calibration steps 0 must be >= 1"), "calib 0 dies");
    CHECK(child_fails_with(init_calib_strategy, "calibration strategy 3 must be plain (4) or iht (0)"), "calibration in bf16 dies");
    CHECK(child_fails_with(flag_calib_strategy, "flag -C: 'hadamard' is not one of plain, iht"), "an unknown -C value dies");
    CHECK(calib_strategy_from_flag("plain") == STRAT_PLAIN && calib_strategy_from_flag("iht") == STRAT_IHT, "-C plain / iht");
    CHECK(child_fails_with(init_window, "window 11 must be in [1, 10]"), "window > R dies");
    CHECK(child_fails_with(init_window0, "window 0 must be in [1, 10]"), "window 0 dies");
    CHECK(child_fails_with(init_reclass, "interval -1 must be >= 0"), "negative R dies");
    CHECK(child_fails_with(init_k, "k 0 must be >= 1"), "k 0 dies");
    CHECK(child_fails_with(init_precision, "unknown precision 4"), "unknown precision dies");
    CHECK(child_fails_with(init_layers, "num_layers 0"), "0 layers dies");
    CHECK(child_fails_with(record_bad, "adahop_record: linear 4 (of 4)"), "linear out of range dies");
    CHECK(child_fails_with(record_pattern, "unknown pattern 3"), "unknown pattern dies");
    free(saved_words);
}

int main(void) {
    test_names();
    test_fixed_precisions();
    test_bf16_override();
    test_majority();
    test_calibration_boundary(STRAT_PLAIN);
    test_calibration_boundary(STRAT_IHT);
    test_windows();
    test_change_log();
    test_dw_rule();
    test_table();
    test_head();
    test_round_trip();
    test_checksum();
    test_errors();
    return test_summary("test_adahop_state");
}
