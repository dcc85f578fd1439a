// Downstream evals scored by the model itself: reads the eval token files of dev/data/prepare_evals.py, builds the
// batches of candidate rows, and turns the model's per-token losses into task scores (llm.c's HellaSwag scoring).
// Host code, C11 and C++ (the GPU trainer includes it); the model's forward pass comes in as a callback.
//
// Eval file, little endian: int32 header[256]: [0] 20261204 magic, [1] 1 version, [2] kind (0 = multiple choice,
// 1 = last word), [3] examples, [4] most candidates of an example, [5] longest candidate (context + completion
// tokens), [6] vocab size of the tokenizer, [7] number of int32 words after the header, [16..31] the task name
// (64 bytes, NUL padded). Then per example: label, K candidates, NC contexts (1 or K), NP completions (1 or K),
// NC context lengths, NP completion lengths, the NC contexts' tokens, the NP completions' tokens. Candidate k is
// context min(k, NC-1) followed by completion min(k, NP-1).
//
// Scoring: a candidate's row is its context + completion; the model reads row[:-1] with targets row[1:], and the
// candidate's loss is the sum of the target losses over the completion tokens. A row longer than T + 1 tokens keeps
// its last T + 1 (the context is cut from the left). Multiple choice: acc = the candidate of least summed loss is
// the label, acc_norm = the same with the mean loss per completion token (ties go to the lower index). Last word
// (one candidate): acc = every completion token is the greedy argmax of its logits, ppl = exp(mean over examples of
// the summed completion loss). Both kinds: ll = the mean over examples of the gold completion's summed log-likelihood
// (nats; minus its summed loss), a continuous score that still moves where the accuracies sit at chance.
#ifndef LLMC_EVALS_H
#define LLMC_EVALS_H

#include <glob.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "utils.h"
#include "jsonlog.h"

#define EVAL_MAGIC 20261204
#define EVAL_VERSION 1
#define EVAL_HEADER_INTS 256
#define EVAL_MAX_CANDIDATES 8
#define EVAL_NAME_SLOT 16
#define EVAL_NAME_BYTES 64
enum { EVAL_CHOICE = 0, EVAL_LASTWORD = 1 };

typedef struct {
    int label, num_candidates;
    const int32_t* context[EVAL_MAX_CANDIDATES];      // tokens of candidate k's context (into EvalTask.words)
    const int32_t* completion[EVAL_MAX_CANDIDATES];
    int context_len[EVAL_MAX_CANDIDATES], completion_len[EVAL_MAX_CANDIDATES];
} EvalExample;

typedef struct {
    char name[EVAL_NAME_BYTES];
    int kind;                   // EVAL_CHOICE or EVAL_LASTWORD
    int num_examples, longest, vocab_size;
    int num_rows;               // candidates of all examples: one batch row each
    int *row_example, *row_candidate;
    int32_t* words;             // the file after the header
    EvalExample* examples;
} EvalTask;

// one batch of candidate rows, rows x T_used positions packed with stride T_used
typedef struct {
    int B, T;                   // capacity: rows, positions per row
    int align;                  // T_used is a multiple of align, or T
    int rows, first_row, T_used;
    int *inputs, *targets;      // [B * T]
    int *comp_start, *comp_len; // [B] the completion's target positions in each row
} EvalBatch;

// per candidate row: summed completion loss, and whether every completion token was the argmax
typedef struct {
    double* sum_loss;
    int* all_argmax;
} EvalScores;

typedef struct {
    double acc, acc_norm, ppl;  // ppl: last word only (0 otherwise)
    double gold_ll;             // mean log-likelihood of the gold completion (nats, summed over its tokens)
    int num_examples;
} EvalResult;

// the next n words of the task's word stream, or a clear error if the file ends first
static inline const int32_t* eval_take(const char* path, const int32_t* words, size_t total, size_t* at, size_t n) {
    if (*at + n > total) { die("eval file '%s' ends inside an example (truncated or corrupt)", path); }
    const int32_t* p = words + *at;
    *at += n;
    return p;
}

// parses one example at *at; dies on a count, length or label out of range
static inline void eval_parse_example(const char* path, int index, const int32_t* w, size_t total, size_t* at,
                                      int vocab, EvalExample* ex) {
    const int32_t* head = eval_take(path, w, total, at, 4);
    int label = head[0], k = head[1], nc = head[2], np = head[3];
    if (k < 1 || k > EVAL_MAX_CANDIDATES || (nc != 1 && nc != k) || (np != 1 && np != k) || label < 0 || label >= k) {
        die("eval file '%s', example %d: %d candidates, %d contexts, %d completions, label %d are inconsistent", path, index, k, nc, np, label);
    }
    const int32_t* lens = eval_take(path, w, total, at, (size_t)(nc + np));
    const int32_t* starts[2 * EVAL_MAX_CANDIDATES];
    for (int i = 0; i < nc + np; i++) {
        if (lens[i] < 1 || lens[i] > (1 << 20)) { die("eval file '%s', example %d: a segment of %d tokens", path, index, lens[i]); }
        starts[i] = eval_take(path, w, total, at, (size_t)lens[i]);
        for (int j = 0; j < lens[i]; j++) {
            if (starts[i][j] < 0 || starts[i][j] >= vocab) { die("eval file '%s', example %d: token %d outside the vocab %d", path, index, starts[i][j], vocab); }
        }
    }
    ex->label = label;
    ex->num_candidates = k;
    for (int c = 0; c < k; c++) {
        int ci = nc == 1 ? 0 : c, pi = np == 1 ? 0 : c;
        ex->context[c] = starts[ci];
        ex->context_len[c] = lens[ci];
        ex->completion[c] = starts[nc + pi];
        ex->completion_len[c] = lens[nc + pi];
    }
}

// whether a task name can stand in main.log's "<task>:<score>" fields and as a JSON key: letters, digits and _
static inline int eval_name_ok(const char* name) {
    if (name[0] == '\0') { return 0; }
    for (const char* c = name; *c; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_')) {
            return 0;
        }
    }
    return 1;
}

// reads and validates an eval file; any problem is a one-line error naming the file and exit(1)
static inline void eval_task_read(const char* path, EvalTask* t) {
    FILE* fp = fopen_check(path, "rb");
    long size = file_size(fp);
    int32_t h[EVAL_HEADER_INTS];
    if (size < (long)sizeof(h)) { die("eval file '%s' is %ld bytes, shorter than its header", path, size); }
    fread_check(h, sizeof(int32_t), EVAL_HEADER_INTS, fp, "eval header");
    if (h[0] != EVAL_MAGIC) { die("'%s' is not an eval file (magic %d, expected %d; see dev/data/prepare_evals.py)", path, h[0], EVAL_MAGIC); }
    if (h[1] != EVAL_VERSION) { die("eval file '%s' has version %d; this build reads version %d", path, h[1], EVAL_VERSION); }
    if ((h[2] != EVAL_CHOICE && h[2] != EVAL_LASTWORD) || h[3] <= 0 || h[6] <= 0 || h[7] < 0) {
        die("eval file '%s': invalid header (kind %d, %d examples, vocab %d)", path, h[2], h[3], h[6]);
    }
    if (size != (long)sizeof(h) + (long)h[7] * 4) { die("eval file '%s' is %ld bytes, its header implies %ld (truncated or corrupt)", path, size, (long)sizeof(h) + (long)h[7] * 4); }
    memset(t, 0, sizeof(*t));
    memcpy(t->name, h + EVAL_NAME_SLOT, EVAL_NAME_BYTES);
    t->name[EVAL_NAME_BYTES - 1] = '\0';
    if (!eval_name_ok(t->name)) {
        die("eval file '%s': its task name is empty or holds a character outside A-Z a-z 0-9 _ (the name is a column of "
            "main.log's eval lines)", path);
    }
    t->kind = h[2]; t->num_examples = h[3]; t->vocab_size = h[6];
    t->words = (int32_t*)malloc_check((size_t)h[7] * sizeof(int32_t) + 1);
    fread_check(t->words, sizeof(int32_t), (size_t)h[7], fp, "eval examples");
    fclose_check(fp);
    t->examples = (EvalExample*)malloc_check((size_t)t->num_examples * sizeof(EvalExample));
    size_t at = 0;
    for (int e = 0; e < t->num_examples; e++) {
        EvalExample* ex = &t->examples[e];
        eval_parse_example(path, e, t->words, (size_t)h[7], &at, t->vocab_size, ex);
        if (t->kind == EVAL_LASTWORD && ex->num_candidates != 1) { die("eval file '%s', example %d: a last-word task has one candidate", path, e); }
        t->num_rows += ex->num_candidates;
        for (int c = 0; c < ex->num_candidates; c++) {
            int len = ex->context_len[c] + ex->completion_len[c];
            if (len > t->longest) { t->longest = len; }
        }
    }
    if (at != (size_t)h[7]) { die("eval file '%s': %zu words after the last example", path, (size_t)h[7] - at); }
    t->row_example = (int*)malloc_check((size_t)t->num_rows * sizeof(int));
    t->row_candidate = (int*)malloc_check((size_t)t->num_rows * sizeof(int));
    int r = 0;
    for (int e = 0; e < t->num_examples; e++) {
        for (int c = 0; c < t->examples[e].num_candidates; c++, r++) { t->row_example[r] = e; t->row_candidate[r] = c; }
    }
}

static inline void eval_task_free(EvalTask* t) {
    free(t->words); free(t->examples); free(t->row_example); free(t->row_candidate);
    memset(t, 0, sizeof(*t));
}

static inline void eval_batch_init(EvalBatch* b, int B, int T, int align) {
    memset(b, 0, sizeof(*b));
    b->B = B; b->T = T; b->align = align;
    b->inputs = (int*)malloc_check((size_t)B * T * sizeof(int));
    b->targets = (int*)malloc_check((size_t)B * T * sizeof(int));
    b->comp_start = (int*)malloc_check((size_t)B * sizeof(int));
    b->comp_len = (int*)malloc_check((size_t)B * sizeof(int));
}

static inline void eval_batch_free(EvalBatch* b) {
    free(b->inputs); free(b->targets); free(b->comp_start); free(b->comp_len);
    memset(b, 0, sizeof(*b));
}

// positions a row of n tokens (n - 1 inputs) takes in a batch of T positions
static inline int eval_row_positions(int n, int T) { return n - 1 < T ? n - 1 : T; }

// fills b with the candidate rows first_row.. of t (up to b->B of them); returns the rows filled. Each row's tokens
// are the last min(n, T + 1) of its context + completion; positions after them, and the B - rows rows after the
// filled ones, read token 0 and are not scored.
static inline int eval_batch_fill(EvalBatch* b, const EvalTask* t, int first_row) {
    int rows = t->num_rows - first_row < b->B ? t->num_rows - first_row : b->B;
    int widest = 1;
    for (int r = 0; r < rows; r++) {
        const EvalExample* ex = &t->examples[t->row_example[first_row + r]];
        int c = t->row_candidate[first_row + r];
        int n = eval_row_positions(ex->context_len[c] + ex->completion_len[c], b->T);
        if (n > widest) { widest = n; }
    }
    int Tu = (widest + b->align - 1) / b->align * b->align;
    b->T_used = Tu < b->T ? Tu : b->T;
    b->rows = rows;
    b->first_row = first_row;
    memset(b->inputs, 0, (size_t)b->B * b->T_used * sizeof(int));   // rows after `rows` too: a model may run all B
    memset(b->targets, 0, (size_t)b->B * b->T_used * sizeof(int));
    for (int r = 0; r < rows; r++) {
        const EvalExample* ex = &t->examples[t->row_example[first_row + r]];
        int c = t->row_candidate[first_row + r];
        int nc = ex->context_len[c], np = ex->completion_len[c];
        if (np > b->T) { die("eval task %s: a completion of %d tokens does not fit T=%d", t->name, np, b->T); }
        int n = nc + np, skip = n - 1 > b->T ? n - 1 - b->T : 0;   // tokens cut from the left of the context
        int* in = b->inputs + (size_t)r * b->T_used;
        int* tg = b->targets + (size_t)r * b->T_used;
        for (int i = skip; i < n; i++) {
            int tok = i < nc ? ex->context[c][i] : ex->completion[c][i - nc];
            if (i < n - 1) { in[i - skip] = tok; }
            if (i > skip) { tg[i - skip - 1] = tok; }
        }
        b->comp_start[r] = nc - 1 - skip;
        b->comp_len[r] = np;
    }
    return rows;
}

// greedy-argmax flags of N rows of logits: flags[i] = 1 when logits[i, targets[i]] is the largest of the V real
// columns (ties count), else 0; logits rows have stride Vp
static inline void eval_argmax_flags_cpu(float* flags, const float* logits, const int* targets, int N, int V, int Vp) {
    for (int i = 0; i < N; i++) {
        const float* row = logits + (size_t)i * Vp;
        float target = row[targets[i]];
        int best = 1;
        for (int j = 0; j < V && best; j++) { best = row[j] <= target; }
        flags[i] = (float)best;
    }
}

static inline void eval_scores_init(EvalScores* s, const EvalTask* t) {
    s->sum_loss = (double*)calloc_check((size_t)t->num_rows, sizeof(double));
    s->all_argmax = (int*)calloc_check((size_t)t->num_rows, sizeof(int));
}

static inline void eval_scores_free(EvalScores* s) {
    free(s->sum_loss); free(s->all_argmax);
    memset(s, 0, sizeof(*s));
}

// adds the batch's per-position losses [rows * T_used] (and argmax flags, or NULL) into the candidates' scores
static inline void eval_scores_add(EvalScores* s, const EvalBatch* b, const float* losses, const float* argmax) {
    for (int r = 0; r < b->rows; r++) {
        const float* l = losses + (size_t)r * b->T_used + b->comp_start[r];
        const float* a = argmax ? argmax + (size_t)r * b->T_used + b->comp_start[r] : NULL;
        double sum = 0.0;
        int all = 1;
        for (int i = 0; i < b->comp_len[r]; i++) {
            sum += l[i];
            if (a && a[i] == 0.0f) { all = 0; }
        }
        s->sum_loss[b->first_row + r] = sum;
        s->all_argmax[b->first_row + r] = all;
    }
}

// the task's scores from its candidates' losses
static inline EvalResult eval_result(const EvalTask* t, const EvalScores* s) {
    EvalResult res = {0.0, 0.0, 0.0, 0.0, t->num_examples};
    double correct = 0.0, correct_norm = 0.0, loss = 0.0, gold_loss = 0.0;
    int r = 0;
    for (int e = 0; e < t->num_examples; e++) {
        const EvalExample* ex = &t->examples[e];
        int best = 0, best_norm = 0;
        for (int c = 0; c < ex->num_candidates; c++) {
            double sum = s->sum_loss[r + c], mean = sum / ex->completion_len[c];
            if (sum < s->sum_loss[r + best]) { best = c; }
            if (mean < s->sum_loss[r + best_norm] / ex->completion_len[best_norm]) { best_norm = c; }
        }
        gold_loss += s->sum_loss[r + ex->label];
        if (t->kind == EVAL_LASTWORD) {
            correct += s->all_argmax[r];
            loss += s->sum_loss[r];
        } else {
            correct += best == ex->label;
            correct_norm += best_norm == ex->label;
        }
        r += ex->num_candidates;
    }
    res.acc = correct / t->num_examples;
    res.acc_norm = t->kind == EVAL_LASTWORD ? res.acc : correct_norm / t->num_examples;
    res.ppl = t->kind == EVAL_LASTWORD ? exp(loss / t->num_examples) : 0.0;
    res.gold_ll = -gold_loss / t->num_examples;
    return res;
}

// the model's forward pass over one batch: per-position target losses [rows * T_used] and greedy-argmax flags
// (the same layout) into the given host arrays
typedef void (*EvalForwardFn)(void* model, const EvalBatch* b, float* losses, float* argmax);

// the model side of a scoring run: its forward pass, and the batch shape it takes (B rows of up to T positions,
// T_used a multiple of align or T)
typedef struct {
    EvalForwardFn forward;
    void* model;
    int B, T, align;
} EvalModel;

// scores task t
static inline EvalResult eval_task_run(const EvalTask* t, const EvalModel* em) {
    int B = em->B, T = em->T;
    EvalBatch b;
    eval_batch_init(&b, B, T, em->align);
    EvalScores s;
    eval_scores_init(&s, t);
    float* losses = (float*)malloc_check((size_t)B * T * sizeof(float));
    float* argmax = (float*)malloc_check((size_t)B * T * sizeof(float));
    for (int row = 0; row < t->num_rows; row += b.rows) {
        eval_batch_fill(&b, t, row);
        em->forward(em->model, &b, losses, argmax);
        eval_scores_add(&s, &b, losses, argmax);
    }
    EvalResult res = eval_result(t, &s);
    free(losses); free(argmax);
    eval_scores_free(&s);
    eval_batch_free(&b);
    return res;
}

// a set of eval tasks, named by -E: a folder (its *.bin files) or a glob pattern
typedef struct {
    int num_tasks;
    EvalTask* tasks;
} EvalSuite;

// reads every eval file that spec names; dies when it names none, when a task's tokens exceed the model's vocab, or
// when a completion is longer than the sequence length T (found before training, not at the first eval)
static inline void eval_suite_load(EvalSuite* suite, const char* spec, int vocab_size, int T) {
    char pattern[4096];
    struct stat st;
    if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) { snprintf(pattern, sizeof(pattern), "%s/*.bin", spec); }
    else { snprintf(pattern, sizeof(pattern), "%s", spec); }
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) { die("flag -E: '%s' names no eval file", spec); }
    if (rc != 0) { die("flag -E: glob failed on '%s' (code %d)", pattern, rc); }
    suite->num_tasks = (int)g.gl_pathc;
    suite->tasks = (EvalTask*)malloc_check(g.gl_pathc * sizeof(EvalTask));
    for (size_t i = 0; i < g.gl_pathc; i++) {
        eval_task_read(g.gl_pathv[i], &suite->tasks[i]);
        if (suite->tasks[i].vocab_size > vocab_size) {
            die("eval file '%s' has tokens of a %d-token vocab, the model has %d", g.gl_pathv[i], suite->tasks[i].vocab_size, vocab_size);
        }
        const EvalTask* t = &suite->tasks[i];
        for (int e = 0; e < t->num_examples; e++) {
            for (int c = 0; c < t->examples[e].num_candidates; c++) {
                if (t->examples[e].completion_len[c] > T) {
                    die("eval file '%s', example %d: a completion of %d tokens does not fit the sequence length T=%d (-t)",
                        g.gl_pathv[i], e, t->examples[e].completion_len[c], T);
                }
            }
        }
    }
    globfree(&g);
}

static inline void eval_suite_free(EvalSuite* suite) {
    for (int i = 0; i < suite->num_tasks; i++) { eval_task_free(&suite->tasks[i]); }
    free(suite->tasks);
    memset(suite, 0, sizeof(*suite));
}

// runs every task after `step` optimizer steps; prints one line per task; when log is not NULL writes one line
// "s:<step> <task>:<score> <task>_ll:<gold log-likelihood> ..." (score: acc_norm, last word: acc, and <task>_ppl after
// its _ll) to it, and when jsonl is not NULL one "eval" event with the same fields,
// {"event":"eval","step":<step>,"<task>":<score>,"<task>_ll":...,...} (llmc/jsonlog.h)
static inline void eval_suite_run(const EvalSuite* suite, int step, const EvalModel* em, FILE* log, FILE* jsonl) {
    JsonLine j;
    jsonl_begin(&j, "eval");
    jsonl_int(&j, "step", step);
    if (log) { fprintf(log, "s:%d", step); }
    for (int i = 0; i < suite->num_tasks; i++) {
        const EvalTask* t = &suite->tasks[i];
        EvalResult r = eval_task_run(t, em);
        char ll_key[EVAL_NAME_BYTES + 8], ppl_key[EVAL_NAME_BYTES + 8];
        snprintf(ll_key, sizeof(ll_key), "%s_ll", t->name);
        snprintf(ppl_key, sizeof(ppl_key), "%s_ppl", t->name);
        int lastword = t->kind == EVAL_LASTWORD;
        double score = lastword ? r.acc : r.acc_norm;
        if (lastword) {
            printf("step %5d | eval %-12s acc %.4f gold ll %.4f ppl %.3f (%d examples)\n", step, t->name, r.acc, r.gold_ll, r.ppl,
                   r.num_examples);
        } else {
            printf("step %5d | eval %-12s acc_norm %.4f acc %.4f gold ll %.4f (%d examples)\n", step, t->name, r.acc_norm, r.acc,
                   r.gold_ll, r.num_examples);
        }
        if (log) { fprintf(log, " %s:%.6f %s:%.6f", t->name, score, ll_key, r.gold_ll); }
        if (log && lastword) { fprintf(log, " %s:%.6f", ppl_key, r.ppl); }
        jsonl_number(&j, t->name, score);
        jsonl_number(&j, ll_key, r.gold_ll);
        if (lastword) { jsonl_number(&j, ppl_key, r.ppl); }
    }
    if (log) { fprintf(log, "\n"); fflush(log); }
    jsonl_end(&j, jsonl);
}

#endif
