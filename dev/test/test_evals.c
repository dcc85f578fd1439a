// Tests of llmc/evals.h on small eval files written here: parsing (shared contexts, shared completions), the batch
// rows (inputs, targets, the completion's positions, left truncation, padding to the alignment), the scoring rule
// (acc by summed loss, acc_norm by mean loss, masking of the non-completion positions, last-word accuracy and
// perplexity), the argmax flags, a whole run through a fake model callback, and the errors of bad files and -E.
#include <unistd.h>
#include "llmc/evals.h"
#include "dev/test/test_common.h"

static char tmpdir[] = "/tmp/test_evals_XXXXXX";
static char choice_path[4096], lastword_path[4096], bad_path[4096];

// writes an eval file of `kind` named `name` with the words after the header
static void write_eval(const char* path, const char* name, int kind, int examples, int longest, const int32_t* w, int nw) {
    int32_t h[EVAL_HEADER_INTS] = {0};
    h[0] = EVAL_MAGIC; h[1] = EVAL_VERSION; h[2] = kind; h[3] = examples; h[4] = 3; h[5] = longest; h[6] = 100; h[7] = nw;
    memcpy(h + EVAL_NAME_SLOT, name, strlen(name));
    FILE* fp = fopen_check(path, "wb");
    fwrite_check(h, sizeof(int32_t), EVAL_HEADER_INTS, fp);
    fwrite_check(w, sizeof(int32_t), (size_t)nw, fp);
    fclose_check(fp);
}

// example 0: context [1 2 3], completions [4] [5 6] [7 8 9], label 2; example 1: contexts [10 11] [12], completion
// [13 14], label 0
static const int32_t choice_words[] = {2, 3, 1, 3, 3, 1, 2, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                       0, 2, 2, 1, 2, 1, 2, 10, 11, 12, 13, 14};
// examples: [20 21] + [22 23], [30] + [31]
static const int32_t lastword_words[] = {0, 1, 1, 1, 2, 2, 20, 21, 22, 23, 0, 1, 1, 1, 1, 1, 30, 31};

static void test_parse(void) {
    EvalTask t;
    eval_task_read(choice_path, &t);
    CHECK(strcmp(t.name, "choice") == 0 && t.kind == EVAL_CHOICE && t.num_examples == 2 && t.num_rows == 5,
          "parse: name %s kind %d examples %d rows %d", t.name, t.kind, t.num_examples, t.num_rows);
    const EvalExample* e0 = &t.examples[0];
    const EvalExample* e1 = &t.examples[1];
    CHECK(e0->label == 2 && e0->num_candidates == 3 && e0->context_len[2] == 3 && e0->context[2][0] == 1 &&
          e0->completion_len[1] == 2 && e0->completion[1][1] == 6 && e0->completion[2][2] == 9, "parse: example 0");
    CHECK(e1->label == 0 && e1->context_len[0] == 2 && e1->context[1][0] == 12 && e1->completion_len[1] == 2 &&
          e1->completion[0] == e1->completion[1], "parse: example 1 shares its completion");
    CHECK(t.longest == 6 && t.row_example[3] == 1 && t.row_candidate[3] == 0, "parse: longest %d, row map", t.longest);
    eval_task_free(&t);
}

static void test_batches(void) {
    EvalTask t;
    eval_task_read(choice_path, &t);
    EvalBatch b;
    eval_batch_init(&b, 2, 8, 4);
    int rows = eval_batch_fill(&b, &t, 1);   // rows (0,1) = [1 2 3 5 6] and (0,2) = [1 2 3 7 8 9]
    CHECK(rows == 2 && b.T_used == 8, "batch: %d rows of %d positions (widest 5, align 4)", rows, b.T_used);
    const int want_in[16] = {1, 2, 3, 5, 0, 0, 0, 0, 1, 2, 3, 7, 8, 0, 0, 0};
    const int want_tg[16] = {2, 3, 5, 6, 0, 0, 0, 0, 2, 3, 7, 8, 9, 0, 0, 0};
    CHECK(memcmp(b.inputs, want_in, sizeof(want_in)) == 0 && memcmp(b.targets, want_tg, sizeof(want_tg)) == 0,
          "batch: inputs and targets of rows 1, 2");
    CHECK(b.comp_start[0] == 2 && b.comp_len[0] == 2 && b.comp_start[1] == 2 && b.comp_len[1] == 3, "batch: completion positions");
    rows = eval_batch_fill(&b, &t, 4);   // the last row alone: [12 13 14]; the second row is padding
    CHECK(rows == 1 && b.T_used == 4 && b.inputs[0] == 12 && b.targets[1] == 14 && b.comp_start[0] == 0 &&
          b.inputs[4] == 0 && b.targets[7] == 0, "batch: last row %d, T_used %d", rows, b.T_used);
    eval_batch_free(&b);

    eval_batch_init(&b, 1, 3, 32);   // T = 3: row (0,2) keeps its last 4 tokens [3 7 8 9]
    eval_batch_fill(&b, &t, 2);
    CHECK(b.T_used == 3 && b.inputs[0] == 3 && b.inputs[2] == 8 && b.targets[0] == 7 && b.targets[2] == 9 &&
          b.comp_start[0] == 0 && b.comp_len[0] == 3, "batch: left truncation to T=3 (T_used %d, start %d)", b.T_used, b.comp_start[0]);
    eval_batch_free(&b);
    eval_task_free(&t);
}

// losses of a fake model: 100 on every position (masked out unless a completion covers it), and each completion
// token of row r the loss row_token_loss[r]; argmax flags 1 except row 0 of the last-word file's first token
static const float row_token_loss[5] = {2.0f, 1.2f, 1.0f, 0.5f, 1.0f};
static void fake_forward(void* model, const EvalBatch* b, float* losses, float* argmax) {
    (void)model;
    for (int r = 0; r < b->rows; r++) {
        for (int i = 0; i < b->T_used; i++) {
            float* l = losses + (size_t)r * b->T_used + i;
            int in_comp = i >= b->comp_start[r] && i < b->comp_start[r] + b->comp_len[r];
            *l = in_comp ? row_token_loss[b->first_row + r] : 100.0f;
            argmax[(size_t)r * b->T_used + i] = (b->first_row + r == 0 && i == b->comp_start[r]) ? 0.0f : 1.0f;
        }
    }
}

static void test_scores(void) {
    EvalTask t;
    eval_task_read(choice_path, &t);
    EvalModel em = {fake_forward, NULL, 2, 8, 4};
    EvalResult r = eval_task_run(&t, &em);
    // example 0: sums 2.0, 2.4, 3.0 (acc picks 0, wrong), means 2.0, 1.2, 1.0 (acc_norm picks 2, right);
    // example 1: sums 1.0, 2.0 (both pick 0, right)
    CHECK(fabs(r.acc - 0.5) < 1e-12 && fabs(r.acc_norm - 1.0) < 1e-12 && r.ppl == 0.0 && r.num_examples == 2,
          "choice scores: acc %.3f (want 0.5) acc_norm %.3f (want 1)", r.acc, r.acc_norm);
    eval_task_free(&t);

    eval_task_read(lastword_path, &t);
    r = eval_task_run(&t, &em);
    // example 0: 2 tokens of 2.0 (not all argmax), example 1: 1 token of 1.2 (argmax)
    double ppl = exp((4.0 + 1.2) / 2.0);
    CHECK(fabs(r.acc - 0.5) < 1e-12 && fabs(r.ppl - ppl) < 1e-5 * ppl, "last-word scores: acc %.3f ppl %.5f (want %.5f)", r.acc, r.ppl, ppl);
    eval_task_free(&t);
}

static void test_argmax_flags(void) {
    // 3 rows, V = 3, Vp = 4 (column 3 is padding and never counts)
    const float logits[12] = {1, 2, 0, 9,   5, 5, 1, 9,   0, 1, 3, 9};
    const int targets[3] = {1, 0, 0};
    float flags[3];
    eval_argmax_flags_cpu(flags, logits, targets, 3, 3, 4);
    CHECK(flags[0] == 1.0f && flags[1] == 1.0f && flags[2] == 0.0f, "argmax flags %g %g %g (want 1 1 0: a tie counts)", flags[0], flags[1], flags[2]);
}

static void read_bad(void) { EvalTask t; eval_task_read(bad_path, &t); }
static void load_nothing(void) { EvalSuite s; eval_suite_load(&s, "/nonexistent_folder_of_evals/*.bin", 100, 64); }
static void load_big_vocab(void) { EvalSuite s; eval_suite_load(&s, tmpdir, 50, 64); }
static void load_short_T(void) { EvalSuite s; eval_suite_load(&s, tmpdir, 100, 2); }   // a choice completion has 3 tokens

static void test_errors(void) {
    write_eval(bad_path, "bad", EVAL_CHOICE, 2, 6, choice_words, 20);   // the header's words, but the second example is cut
    CHECK(child_fails_with(read_bad, "ends inside an example"), "a cut example is a clear error");
    int32_t w[sizeof(choice_words) / 4];
    memcpy(w, choice_words, sizeof(w));
    w[0] = 3;   // label 3 of 3 candidates
    write_eval(bad_path, "bad", EVAL_CHOICE, 2, 6, w, (int)(sizeof(w) / 4));
    CHECK(child_fails_with(read_bad, "inconsistent"), "a label outside the candidates is a clear error");
    FILE* fp = fopen_check(bad_path, "ab");
    fputc(0, fp);
    fclose_check(fp);
    CHECK(child_fails_with(read_bad, "its header implies"), "a file of the wrong size is a clear error");
    unlink(bad_path);
    CHECK(child_fails_with(load_nothing, "names no eval file"), "-E naming no file is a clear error");
    CHECK(child_fails_with(load_big_vocab, "vocab"), "eval tokens beyond the model's vocab are a clear error");
    CHECK(child_fails_with(load_short_T, "does not fit the sequence length T=2"), "a completion longer than -t is refused at load");
    const char* bad_names[5] = {"bad\nname", "two words", "a:b", "a-b", ""};
    for (int i = 0; i < 5; i++) {
        write_eval(bad_path, bad_names[i], EVAL_CHOICE, 2, 6, choice_words, (int)(sizeof(choice_words) / 4));
        CHECK(child_fails_with(read_bad, "task name"), "task name %d (a newline, a space, a colon, a dash, empty) is refused", i);
    }
    write_eval(bad_path, "ok_Name_2", EVAL_CHOICE, 2, 6, choice_words, (int)(sizeof(choice_words) / 4));
    CHECK(!child_fails_with(read_bad, ""), "a name of letters, digits and _ is read");
    unlink(bad_path);

    EvalSuite s;
    eval_suite_load(&s, tmpdir, 100, 64);
    CHECK(s.num_tasks == 2 && strcmp(s.tasks[0].name, "choice") == 0, "-E folder: %d tasks", s.num_tasks);
    eval_suite_free(&s);
}

int main(void) {
    if (mkdtemp(tmpdir) == NULL) { die("cannot make a temporary folder"); }
    snprintf(choice_path, sizeof(choice_path), "%s/choice.bin", tmpdir);
    snprintf(lastword_path, sizeof(lastword_path), "%s/lastword.bin", tmpdir);
    snprintf(bad_path, sizeof(bad_path), "%s/bad.bin", tmpdir);
    write_eval(choice_path, "choice", EVAL_CHOICE, 2, 6, choice_words, (int)(sizeof(choice_words) / 4));
    write_eval(lastword_path, "lastword", EVAL_LASTWORD, 2, 4, lastword_words, (int)(sizeof(lastword_words) / 4));
    test_parse();
    test_batches();
    test_scores();
    test_argmax_flags();
    test_errors();
    unlink(choice_path);
    unlink(lastword_path);
    rmdir(tmpdir);
    return test_summary("test_evals");
}
