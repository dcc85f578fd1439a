// Small FP32 CPU trainer for GPT-2 on top of the reference model in llmc/gpt2_cpu.h. It exists to show the
// CPU model learns: it trains a tiny model on token files and prints the loss per step.
//
// -p picks the precision of the block linears (qkv, attention projection, MLP up and down; all three GEMMs):
// bf16 (default: the FP32 reference itself), mxfp4 (plain MXFP4), hadamard (IHT + MXFP4 everywhere) or adahop
// (plain MXFP4 for -w steps while the outlier patterns are recorded, then per-GEMM strategies by majority vote,
// re-voted every -R steps over the -W steps before; llmc/adahop.h). MXFP4 is emulated in float storage
// (llmc/adahop_cpu.h); it needs C and B*T to be multiples of 32.
//
// build: gcc -O2 -std=gnu11 -Wall -Wextra -fopenmp -I. train_gpt2.c -o build/train_gpt2 -lm
// run:   OMP_NUM_THREADS=2 ./build/train_gpt2 -e L2C64H4 -b 4 -t 64 -x 40
//
// -E scores the model on downstream evals (llmc/evals.h; files of dev/data/prepare_evals.py) every -V steps and at
// the end, in the -p precision: -x 0 scores a model file without training.
//
// -e picks the model: a model/checkpoint file (llmc/checkpoint.h; only its parameters are used), a depth
// preset "d6" / "d12" / "d24" / "d36" / "d48", or a spec "L<layers>C<channels>H<heads>" such as L2C64H4.
// Presets and specs use the GPT-2 vocab (V 50257, Vp 50304), max_seq_len 1024 and GPT-2 init from -r.
//
// Runs like the GPU trainer: -o DIR gets main.log and training states state_%08d.bin (every -n steps and at the
// end; -N keeps the newest K), -y 1 resumes from the newest valid one exactly. Everything is checked before the
// first step; a NaN/Inf loss stops the run without writing a checkpoint of the diverged state; SIGTERM, SIGINT,
// SIGHUP and SIGQUIT finish the step, write a checkpoint and exit with 128 + the signal (llmc/stop_signal.h).
#include <time.h>
#include "llmc/utils.h"
#include "llmc/cli.h"
#include "llmc/out_dir.h"
#include "llmc/stop_signal.h"
#include "llmc/spike_guard.h"
#include "llmc/rand.h"
#include "llmc/gpt2_config.h"
#include "llmc/checkpoint.h"
#include "llmc/gpt2_cpu.h"
#include "llmc/sampler.h"
#include "llmc/dataloader.h"
#include "llmc/tokenizer.h"
#include "llmc/evals.h"

#define GPT2_VOCAB 50257
#define GPT2_EOT 50256
#define SPEC_MAX_SEQ_LEN 1024
#define MAX_BATCH_TOKENS (1 << 24)   // B*T: keeps every activation size product far inside 64 bits

typedef struct {
    const char* train_pattern;
    const char* val_pattern;
    const char* model;
    const char* out_dir;        // main.log and training states; NULL = neither
    const char* tokenizer;
    const char* evals;           // -E: eval files (a folder or a glob), NULL = none
    int eval_every;
    int B, T, max_steps, val_every, val_batches, checkpoint_every, keep_checkpoints, resume, gen_tokens;
    int precision, calib_steps, calib_strategy, reclass_every, reclass_window, oe_k;
    float lr, weight_decay, grad_clip, skip_loss_z, skip_norm_z;
    uint64_t seed;
    int64_t data_seed;           // -D: the training data order; -1 = the seed of -r
} TrainArgs;

_Static_assert(SPIKE_GUARD_WORDS <= CKPT_TRAINER_WORDS, "the spike guard must fit a checkpoint's trainer words");

// prints the flags
static void usage(const char* prog) {
    printf(
        "usage: %s [options]\n"
        "  -i <path>  train token files pattern (default data/tinyshakespeare_train.bin)\n"
        "  -j <path>  val token files pattern (default data/tinyshakespeare_val.bin)\n"
        "  -e <str>   model: checkpoint file, depth preset d6..d48, or L<l>C<c>H<h> spec (default L2C64H4)\n"
        "  -o <dir>   output directory: main.log and training states state_<step>.bin (default: none)\n"
        "  -n <int>   write a training state every n steps to the -o dir, besides the one at the end (default 0)\n"
        "  -N <int>   keep only the newest N training states, 0 = all (default 0)\n"
        "  -y <0|1|2> the -o dir's training states and logs: 0 = start afresh, refusing a dir that holds another\n"
        "             run's; 1 = resume from the newest valid training state (afresh when there is none); 2 = delete\n"
        "             another run's, then start afresh (default 0)\n"
        "  -z <path>  token decoding file for the samples (default data/gpt2_tokenizer.bin)\n"
        "  -b <int>   batch size B (default 4)\n"
        "  -t <int>   sequence length T (default 64)\n"
        "  -x <int>   training steps (default 40)\n"
        "  -l <float> learning rate (default 3e-3)\n"
        "  -c <float> weight decay (default 0.0)\n"
        "  -k <float> gradient clip norm, 0 = none (default 1.0)\n"
        "  -r <int>   seed for init and sampling (default 1337)\n"
        "  -D <int>   seed of the training data order, one permutation of all sequences per epoch (default: -r)\n"
        "  -v <int>   val loss every n steps, 0 = never (default 10)\n"
        "  -m <int>   val batches per evaluation (default 4)\n"
        "  -g <int>   tokens to sample at the end, 0 = none (default 32)\n"
        "  -E <path>  downstream eval files: a folder of them or a glob (dev/data/prepare_evals.py) (default: none)\n"
        "  -V <int>   run the evals every n steps too, 0 = only at the end (default 0)\n"
        "  -p <mode>  block linears: bf16 (FP32 here) | mxfp4 | hadamard | adahop, emulated (default bf16)\n"
        "  -w <int>   AdaHOP calibration steps before the first strategy vote (default 30)\n"
        "  -C <str>   precision of the calibration steps: iht (with the Hadamard) | plain (MXFP4, as in the paper) (default iht)\n"
        "  -R <int>   AdaHOP re-classification every R steps, 0 = never (default 0)\n"
        "  -W <int>   steps of pattern statistics before each re-classification (default 5)\n"
        "  -K <int>   rows/columns taken out by outlier extraction, at most the operand's (default 64)\n"
        "  -L <float> skip the update of a step whose loss z-score over the last 64 steps exceeds this, 0 = off (default 0)\n"
        "  -Z <float> the same for the gradient norm, 0 = off (default 0)\n"
        "  -h         this help\n", prog);
}

// parses argv into *a (defaults first)
static void parse_args(int argc, char** argv, TrainArgs* a) {
    a->train_pattern = "data/tinyshakespeare_train.bin";
    a->val_pattern = "data/tinyshakespeare_val.bin";
    a->model = "L2C64H4";
    a->out_dir = NULL;
    a->tokenizer = "data/gpt2_tokenizer.bin";
    a->evals = NULL; a->eval_every = 0;
    a->B = 4; a->T = 64; a->max_steps = 40; a->val_every = 10; a->val_batches = 4;
    a->checkpoint_every = 0; a->keep_checkpoints = 0; a->resume = 0; a->gen_tokens = 32;
    a->lr = 3e-3f; a->weight_decay = 0.0f; a->grad_clip = 1.0f; a->seed = 1337; a->data_seed = -1; a->skip_loss_z = 0.0f; a->skip_norm_z = 0.0f;
    a->precision = PREC_BF16; a->calib_steps = 30; a->calib_strategy = STRAT_IHT; a->reclass_every = 0; a->reclass_window = 5; a->oe_k = 64;
    cli_handle_help(argc, argv, usage);
    for (int i = 1; i < argc; i += 2) {
        const char* f = argv[i];
        const char* v = cli_flag_value(argc, argv, i, usage);
        switch (argv[i][1]) {
            case 'i': a->train_pattern = v; break;
            case 'j': a->val_pattern = v; break;
            case 'e': a->model = v; break;
            case 'o': a->out_dir = v; break;
            case 'n': a->checkpoint_every = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'N': a->keep_checkpoints = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'y': a->resume = (int)parse_int(f, v, OUT_DIR_FRESH, OUT_DIR_REPLACE); break;
            case 'z': a->tokenizer = v; break;
            case 'b': a->B = (int)parse_int(f, v, 1, 1 << 16); break;
            case 't': a->T = (int)parse_int(f, v, 1, 1 << 16); break;
            case 'x': a->max_steps = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'l': a->lr = parse_float(f, v, 0.0f, 10.0f); break;
            case 'c': a->weight_decay = parse_float(f, v, 0.0f, 10.0f); break;
            case 'k': a->grad_clip = parse_float(f, v, 0.0f, 1e30f); break;
            case 'r': a->seed = (uint64_t)parse_int(f, v, 0, 0x7fffffffffffffffL); break;
            case 'D': a->data_seed = parse_int(f, v, 0, 0x7fffffffffffffffL); break;
            case 'v': a->val_every = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'm': a->val_batches = (int)parse_int(f, v, 1, 1 << 30); break;
            case 'g': a->gen_tokens = (int)parse_int(f, v, 0, 1 << 16); break;
            case 'E': a->evals = v; break;
            case 'V': a->eval_every = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'p':
                a->precision = precision_from_name(v);
                if (a->precision < 0) { die("flag -p: '%s' is not one of bf16, mxfp4, hadamard, adahop", v); }
                break;
            case 'w': a->calib_steps = (int)parse_int(f, v, 1, 1 << 30); break;
            case 'C': a->calib_strategy = calib_strategy_from_flag(v); break;
            case 'R': a->reclass_every = (int)parse_int(f, v, 0, 1 << 30); break;
            case 'W': a->reclass_window = (int)parse_int(f, v, 1, 1 << 30); break;
            case 'K': a->oe_k = (int)parse_int(f, v, 1, 1 << 20); break;
            case 'L': a->skip_loss_z = parse_float(f, v, 0.0f, 1e6f); break;
            case 'Z': a->skip_norm_z = parse_float(f, v, 0.0f, 1e6f); break;
            default: usage(argv[0]); die("unknown flag %s", f);
        }
    }
    if (a->B <= 0 || a->T <= 0 || a->max_steps < 0 || a->val_batches <= 0) { die("need B > 0, T > 0, -x >= 0, -m > 0"); }
    if (a->eval_every > 0 && a->evals == NULL) { die("flag -V: periodic evals need the eval files (-E)"); }
    if ((int64_t)a->B * a->T > MAX_BATCH_TOKENS) {
        die("flags -b, -t: B*T = %lld tokens is more than this trainer's %d per step", (long long)a->B * a->T, MAX_BATCH_TOKENS);
    }
    if ((a->checkpoint_every > 0 || a->keep_checkpoints > 0 || a->resume) && a->out_dir == NULL) {
        die("checkpoints (-n, -N) and resume (-y) need an output directory (-o)");
    }
    if (a->reclass_every > 0 && a->reclass_window > a->reclass_every) {
        die("flag -W: the statistics window (%d) cannot exceed the re-classification interval -R (%d)", a->reclass_window, a->reclass_every);
    }
    if (a->data_seed < 0) { a->data_seed = (int64_t)a->seed; }
    if (a->precision != PREC_BF16 && (a->B * a->T) % 32 != 0) { die("MXFP4 needs B*T (%d) to be a multiple of 32", a->B * a->T); }
}

// the config and initial parameters named by -e (a checkpoint path, "d<depth>" or "L<l>C<c>H<h>")
static float* load_model(const char* spec, uint64_t seed, GPT2Config* c) {
    int L, C, H, depth;
    char extra;
    if (sscanf(spec, "L%dC%dH%d%c", &L, &C, &H, &extra) == 3) {
        c->num_layers = L; c->channels = C; c->num_heads = H; c->max_seq_len = SPEC_MAX_SEQ_LEN;
        c->vocab_size = GPT2_VOCAB; c->padded_vocab_size = round_up(GPT2_VOCAB, 128);
    } else if (sscanf(spec, "d%d%c", &depth, &extra) == 1) {
        if (gpt2_config_from_depth(depth, SPEC_MAX_SEQ_LEN, GPT2_VOCAB, c) != 0) { die("unknown depth preset '%s' (d6, d12, d24, d36, d48)", spec); }
    } else {
        CheckpointHeader ck;
        float* params = checkpoint_load_params(spec, FAMILY_GPT2, &ck);
        *c = ck.config;
        return params;
    }
    const char* problem = gpt2_config_problem(c);
    if (problem) { die("model spec '%s': %s", spec, problem); }
    float* params = (float*)malloc_check(gpt2_num_params(c) * sizeof(float));
    gpt2_init_params(c, params, seed);
    return params;
}

// milliseconds since an arbitrary fixed point
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// mean loss over the first n batches of the val loader
static float val_loss(GPT2CPU* m, DataLoader* dl, int n) {
    double sum = 0.0;
    dataloader_reset(dl);
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(dl);
        gpt2cpu_forward(m, dl->inputs, dl->targets, dl->B, dl->T);
        sum += m->mean_loss;
    }
    return (float)(sum / n);
}

// a training state of `step` steps in dir (params, AdamW m and v, AdaHOP state, data position, RNG), then
// rolling deletion of the older ones (-N)
static void save_state(const TrainArgs* a, const GPT2CPU* m, const AdahopState* adahop, const SpikeGuard* guard, int step,
                       const DataLoader* train, const Rng* rng) {
    CheckpointHeader ck;
    memset(&ck, 0, sizeof(ck));
    ck.config = m->config;
    ck.contents = CKPT_PARAMS | CKPT_OPTIMIZER | CKPT_ADAHOP;
    ck.step = step;
    ck.seed = (int64_t)a->seed;
    ck.adahop_words = (int64_t)adahop_state_words(adahop);
    dataloader_get_state(train, ck.data_state);
    memcpy(ck.rng_state, rng->s, sizeof(rng->s));
    spike_guard_save(guard, ck.trainer_words);
    int32_t* words = (int32_t*)malloc_check((size_t)ck.adahop_words * sizeof(int32_t));
    adahop_save(adahop, words);
    char path[4096];
    checkpoint_state_path(path, sizeof(path), a->out_dir, step);
    checkpoint_write_state(path, &ck, m->params_memory, m->m_memory, m->v_memory, words, NULL);
    free(words);
    printf("checkpoint: %s\n", path);
    checkpoint_prune(a->out_dir, path, step, a->keep_checkpoints);
}

// the run's state from the training state at path: parameters, AdamW m and v (into m), AdaHOP state, spike guard,
// data position, RNG; returns the step it was written after
static int load_state(const char* path, GPT2CPU* m, AdahopState* adahop, SpikeGuard* guard, DataLoader* train, Rng* rng) {
    CheckpointHeader ck;
    FILE* fp = checkpoint_open(path, &ck);
    checkpoint_require_config(path, &ck.config, &m->config);
    if (ck.contents != (CKPT_PARAMS | CKPT_OPTIMIZER | CKPT_ADAHOP)) { die("'%s' is not a training state of this trainer", path); }
    checkpoint_read_payload(fp, &ck, m->params_memory, m->m_memory, m->v_memory);
    int32_t* words = (int32_t*)malloc_check((size_t)ck.adahop_words * sizeof(int32_t));
    checkpoint_read_adahop(fp, &ck, words);
    fclose_check(fp);
    adahop_load(adahop, words, (size_t)ck.adahop_words);
    free(words);
    dataloader_set_state(train, ck.data_state);
    memcpy(rng->s, ck.rng_state, sizeof(rng->s));
    spike_guard_load(guard, ck.trainer_words, path);
    return (int)ck.step;
}

// the eval forward pass (an EvalForwardFn): per-position losses and greedy-argmax flags of the batch. It runs all B
// rows of T positions (T_used = T here), the shape the activations were allocated for, whatever ran first
static void cpu_eval_forward(void* model, const EvalBatch* b, float* losses, float* argmax) {
    GPT2CPU* m = (GPT2CPU*)model;
    gpt2cpu_forward(m, b->inputs, b->targets, b->B, b->T_used);
    size_t n = (size_t)b->rows * b->T_used;
    memcpy(losses, m->acts.losses, n * sizeof(float));
    eval_argmax_flags_cpu(argmax, m->acts.logits, b->targets, (int)n, m->config.vocab_size, m->config.padded_vocab_size);
}

// samples n tokens after an EOT token and prints them (decoded when the tokenizer loaded)
static void generate(GPT2CPU* m, const Tokenizer* tok, int n, Rng* rng) {
    int* gen = (int*)malloc_check((size_t)n * sizeof(int));
    const GPT2Config* c = &m->config;
    for (int t = 0; t < n; t++) { gen[t] = c->vocab_size > GPT2_EOT ? GPT2_EOT : 0; }
    printf("generated: ");
    for (int t = 1; t < n; t++) {
        gpt2cpu_forward(m, gen, NULL, 1, n);   // causal: the filler after t does not change position t-1
        gen[t] = sample_softmax(m->acts.logits + (size_t)(t - 1) * c->padded_vocab_size, c->vocab_size, 1.0f, rng_uniform(rng));
        if (tok->init_ok) { safe_print_token(tokenizer_decode(tok, (uint32_t)gen[t])); }
        else { printf("%d ", gen[t]); }
    }
    printf("\n");
    free(gen);
}

// the newest valid training state of the -o dir for -y 1 (a warning names each newer one skipped), "" if none
static void find_resume(const TrainArgs* a, char* path, size_t len) {
    path[0] = '\0';
    if (a->resume != OUT_DIR_RESUME) { return; }
    if (checkpoint_find_resume(a->out_dir, FAMILY_GPT2, path, len) != 0) {
        printf("resume: no training state in %s, starting fresh\n", a->out_dir);
        path[0] = '\0';
    }
}

// the -o dir's main.log: appended to on a resume, else started afresh
static FILE* open_log(const TrainArgs* a, int resumed) {
    if (!a->out_dir) { return NULL; }
    char path[4200];
    snprintf(path, sizeof(path), "%s/main.log", a->out_dir);
    return fopen_check(path, resumed ? "a" : "w");
}

int main(int argc, char** argv) {
    TrainArgs a;
    parse_args(argc, argv, &a);
    stop_signal_install();
    if (a.out_dir) { out_dir_open(a.out_dir, a.resume, 1); }
    char resume_path[4096];
    find_resume(&a, resume_path, sizeof(resume_path));
    GPT2Config c;
    float* params = load_model(a.model, a.seed, &c);
    if (a.T > c.max_seq_len) { die("-t %d exceeds the model's max_seq_len %d", a.T, c.max_seq_len); }
    GPT2CPU m;
    gpt2cpu_build(&m, &c, params);
    free(params);
    printf("model %s: L=%d C=%d NH=%d V=%d Vp=%d maxT=%d, %zu params\n", a.model, c.num_layers, c.channels,
           c.num_heads, c.vocab_size, c.padded_vocab_size, c.max_seq_len, m.num_params);
    if (a.precision != PREC_BF16 && c.channels % 32 != 0) { die("MXFP4 needs the channels (%d) to be a multiple of 32", c.channels); }
    AdahopState adahop;
    adahop_init(&adahop, a.precision, c.num_layers, a.calib_steps, a.calib_strategy, a.reclass_every, a.reclass_window, a.oe_k);
    gpt2cpu_set_precision(&m, &adahop);
    printf("block linears: %s\n", a.precision == PREC_BF16 ? "bf16 mode = FP32" : precision_names[a.precision]);
    if (a.precision == PREC_ADAHOP) {
        printf("AdaHOP: %d calibration steps of %s MXFP4, re-classification every %d steps over %d steps, OE k=%d\n",
               a.calib_steps, adahop_strategy_names[a.calib_strategy], a.reclass_every, a.reclass_window, a.oe_k);
    }

    DataLoader train, val;
    dataloader_init(&train, a.train_pattern, a.B, a.T, 1, (uint64_t)a.data_seed, c.vocab_size);
    dataloader_init(&val, a.val_pattern, a.B, a.T, 0, 0, c.vocab_size);
    Tokenizer tok;
    tokenizer_init(&tok, a.tokenizer);
    tokenizer_require_vocab(&tok, a.tokenizer, c.vocab_size);
    Rng rng;
    rng_seed(&rng, a.seed);
    EvalSuite evals = {0, NULL};
    if (a.evals) { eval_suite_load(&evals, a.evals, c.vocab_size, a.T); }
    EvalModel eval_model = {cpu_eval_forward, &m, a.B, a.T, a.T};   // rows of T positions: the training batch's buffers
    SpikeGuard guard;
    spike_guard_init(&guard, a.skip_loss_z, a.skip_norm_z);
    int start_step = resume_path[0] ? load_state(resume_path, &m, &adahop, &guard, &train, &rng) : 0;
    if (start_step > a.max_steps) {
        die("resume: '%s' is at step %d, past -x %d: the run is longer than asked (raise -x to continue it)", resume_path,
            start_step, a.max_steps);
    }
    if (resume_path[0]) { printf("resumed from %s at step %d\n", resume_path, start_step); }
    FILE* logf = open_log(&a, start_step > 0);
    printf("B=%d T=%d steps=%d lr=%g wd=%g clip=%g seed=%llu data seed=%lld\n", a.B, a.T, a.max_steps, a.lr, a.weight_decay,
           a.grad_clip, (unsigned long long)a.seed, (long long)a.data_seed);

    for (int step = start_step + 1; step <= a.max_steps; step++) {
        double t0 = now_ms();
        dataloader_next_batch(&train);
        m.stats_now = adahop_wants_stats(&adahop, step - 1);   // AdaHOP counts 0-based steps
        gpt2cpu_forward(&m, train.inputs, train.targets, a.B, a.T);
        gpt2cpu_zero_grad(&m);
        gpt2cpu_backward(&m);
        m.stats_now = 0;
        float norm = spike_guard_on(&guard) ? grad_norm_cpu(m.grads_memory, m.num_params) : 0.0f;
        int skipped = spike_guard_on(&guard) && isfinite(m.mean_loss) && isfinite(norm) &&
                      spike_guard_skip(&guard, step, m.mean_loss, norm, stdout, logf);
        if (!skipped) { norm = gpt2cpu_update(&m, a.lr, 0.9f, 0.95f, 1e-8f, a.weight_decay, a.grad_clip, step); }
        if (!isfinite(m.mean_loss) || !isfinite(norm)) {
            die("step %d: loss %f, grad norm %f: training diverged; no checkpoint of it was written%s%s (lower the "
                "learning rate -l, or check the data)", step, m.mean_loss, norm, a.out_dir ? ", the last one in " : "",
                a.out_dir ? a.out_dir : "");
        }
        printf("step %4d/%d | train loss %.6f | norm %.4f | %.1f ms\n", step, a.max_steps, m.mean_loss, norm, now_ms() - t0);
        if (logf) { fprintf(logf, "s:%d tl:%.6f norm:%.4f\n", step, m.mean_loss, norm); fflush(logf); }
        if (adahop_end_step(&adahop, step - 1, stdout) > 0) { adahop_print_table(&adahop, stdout); }
        if (a.val_every > 0 && (step % a.val_every == 0 || step == a.max_steps)) {
            float vl = val_loss(&m, &val, a.val_batches);
            printf("val loss %.6f\n", vl);
            if (logf) { fprintf(logf, "s:%d vl:%.6f\n", step, vl); fflush(logf); }
        }
        int stop = stop_signal_received();
        if (a.out_dir && ((a.checkpoint_every > 0 && step % a.checkpoint_every == 0) || step == a.max_steps || stop)) {
            save_state(&a, &m, &adahop, &guard, step, &train, &rng);
        }
        if (stop) {
            fprintf(stderr, "stopped by signal %d after step %d%s%s\n", stop, step, a.out_dir ? ": resume with -y 1 from " : "",
                    a.out_dir ? a.out_dir : " (no -o: nothing saved)");
            exit(128 + stop);
        }
        if (a.evals && a.eval_every > 0 && step % a.eval_every == 0 && step < a.max_steps) { eval_suite_run(&evals, step, &eval_model, logf, NULL); }
    }
    if (a.evals) { eval_suite_run(&evals, a.max_steps, &eval_model, logf, NULL); }
    if (a.gen_tokens > 1) { generate(&m, &tok, a.gen_tokens < a.T ? a.gen_tokens : a.T, &rng); }

    eval_suite_free(&evals);
    if (logf) { fclose_check(logf); }
    tokenizer_free(&tok);
    dataloader_free(&train);
    dataloader_free(&val);
    gpt2cpu_free(&m);
    adahop_free(&adahop);
    return 0;
}
