#!/usr/bin/env python3
"""Loss curves, final-loss table and paired gap statistics of several train_gpt2_adahop runs.

Reads <run>/main.jsonl of each run (one JSON object per line: "run" at the start of each piece of the run with the
GPU, build commit, model, batch, precision and seeds, "step" with loss, tok_s, mfu, inexact_blocks and the
strategy_changes of a vote, "val" with val_loss and, in quantized runs, val_loss_bf16 (the same weights through the
BF16 forward), "eval" with the step and per task of -E its score and <task>_ll, the mean log-likelihood of the
gold completion), or, for runs without it, <run>/main.log (lines "s:<step> tl:<loss> lr:... norm:... tok/s:...
mem_gib:...", "s:<step> vl:<loss> [vlb:<bf16-forward loss>]", "adahop step <s> layer <l> <linear> <gemm>: <old>
-> <new>" and the evals "s:<step> <task>:<score> <task>_ll:<ll> ..."); a main.jsonl without eval events takes the
evals of main.log's eval lines.

Two or more runs must be a paired comparison: every run's run events (each piece of each run) share the build
commit, GPU, family, model shape, B, T, tokens per step and data seed, with timed_gemms 0; a mismatch, or a run
without run events (cannot be checked), stops with exit 1, unless --allow-unpaired, which goes on and marks the
output and the figure title UNPAIRED.

Draws one PNG with three panels: train loss (EMA-smoothed), val loss, and val loss minus the bf16 reference at the
same step (a quantized run minus bf16 of its own seed where there is one; per mode with two or more such seeds
their mean with the 95% interval across the seeds as a band, the single seeds as thin lines; the bf16
seed-to-seed spread as a band when two bf16 seeds exist), and a fourth with the eval accuracies over the steps
when a run has evals. Prints a table: final val loss per run, its gap to bf16 (absolute and %), the gap in units
of the seed-to-seed spread, the number of AdaHOP strategy changes, the median tok/s and MFU over the steps after
the first, the gap % to the bf16 run of the run's own seed (the seed also sets the data order), the inexact E4M3
blocks and, when a run has evals, the last eval step and its scores and log-likelihoods. Then the statistics over
a late window (the val points of the last --window steps): per run the paired gap to bf16 of the same init seed
(quantized and BF16 forward) with its standard error; per mode the mean over init seeds with its 95% interval (t
distribution), whether it excludes 0 and else how many seeds would; AdaHOP against Hadamard the same way; the
bf16 init-seed spread (sd of the bf16 seeds' window means). --markdown FILE writes the same tables as Markdown.

Arguments are run directories (holding main.jsonl or main.log) or roots whose subdirectories are runs, e.g. the
--root of scripts/run_modes.sh (runs named <mode>_s<seed>). See scripts/README.md.
"""
import importlib.util
import json
import math
import os
import re
import shlex
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dev", "data"))
import tool_files  # noqa: E402  (outputs under temporary names, one-line usage errors; standard library only)
from tool_files import FileProblem  # noqa: E402

MODES = ("bf16", "mxfp4", "hadamard", "adahop")
COLORS = {"bf16": "black", "mxfp4": "tab:red", "hadamard": "tab:blue", "adahop": "tab:green"}
VARIANT_COLORS = ["tab:purple", "tab:orange", "tab:brown", "tab:olive", "tab:cyan"]   # more runs of one mode
RE_TRAIN = re.compile(r"^s:(\d+) tl:(\S+)")
RE_TOK_S = re.compile(r" tok/s:(\S+)")
RE_VAL = re.compile(r"^s:(\d+) vl:(\S+)(?: vlb:(\S+))?")
RE_EVAL = re.compile(r"^s:(\d+)((?: (?!tl:|vl:)[A-Za-z0-9_]+:\S+)+)\s*$")   # the scores of one eval run
CHANGE = r"layer (\d+) (\S+) (\S+): (.+?) -> (.+?)\s*$"   # one strategy change, in both logs
RE_CHANGE = re.compile("^" + CHANGE)
RE_ADAHOP = re.compile(r"^adahop step (\d+) " + CHANGE)
LOGS = ("main.jsonl", "main.log")   # a run's logs, the first one present is read
RE_NAME = re.compile(r"^(?P<mode>bf16|mxfp4|hadamard|adahop)(?:[_-]s(?P<seed>\d+))?$")
# the run event fields that every piece of every run of a paired comparison shares, and those with a fixed value
PAIRED_FIELDS = ("build_commit", "gpu", "family", "layers", "channels", "heads", "kv_heads", "hidden", "B", "T",
                 "tokens_per_step", "data_seed", "timed_gemms")
REQUIRED = {"timed_gemms": 0}   # -a 1 picks the GEMM algorithms by timing: not the same numerics run to run
# t(0.975, df) of Student's t for df = 1..30; beyond, t975 expands around the normal quantile Z975
T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
        2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
        2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
Z975 = 1.959963985


class InputError(Exception):
    exit_status = 2


class UnpairedError(InputError):
    exit_status = 1


class Run:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(os.path.normpath(path))
        self.mode, self.seed = None, None
        self.train, self.val = {}, {}   # step -> loss; a step logged twice (resumed run) keeps the last value
        self.val_bf16 = {}              # step -> val loss of the weights through the BF16 forward (quantized runs)
        self.tok_s, self.mfu = {}, {}   # step -> tokens per second, model FLOPs utilisation (main.jsonl only)
        self.inexact = {}               # step -> inexact E4M3 blocks of its GEMMs (main.jsonl, quantized fast path)
        self.adahop = {}                # (step, layer, linear, gemm) -> (old, new)
        self.pieces = []                # main.jsonl's "run" events, one per piece of the run (resumes), in order
        self.evals = {}                 # step -> {task: score} (and <task>_ll: gold log-likelihood, <task>_ppl)

    @property
    def info(self):
        """the last piece's run event ({} without one): precision, seed, model, FLOPs per token"""
        return self.pieces[-1] if self.pieces else {}

    @property
    def label(self):
        return self.name if self.seed is None or str(self.seed) in self.name else f"{self.name} (seed {self.seed})"

    def last_val_step(self):
        return max(self.val) if self.val else None

    def final_val(self):
        return self.val[self.last_val_step()] if self.val else None

    def bf16_forward_val(self):
        """step -> val loss through the BF16 forward: val_loss_bf16 (vlb), a bf16 run's own val loss, {} in old logs"""
        return self.val_bf16 or (self.val if self.mode == "bf16" else {})

    def last_evals(self):
        """(step, {task: score}) of the last eval, or (None, {})"""
        return (max(self.evals), self.evals[max(self.evals)]) if self.evals else (None, {})

    def gpu_text(self):
        """the run's GPUs as one table cell: 'NVIDIA H100 80GB HBM3' -> 'H100_80GB_HBM3', pieces joined by '+'"""
        gpus = dict.fromkeys(str(p["gpu"]) for p in self.pieces if p.get("gpu"))
        short = [re.sub(r"^NVIDIA ", "", g).replace(" ", "_") for g in gpus]
        return "+".join(short) if short else "n/a"

    def adahop_change_steps(self):
        return len({k[0] for k in self.adahop})

    def add_change(self, step, change):
        """a strategy change at `step`: change = the five groups of a CHANGE match (layer, linear, GEMM, old, new)"""
        layer, linear, gemm, old, new = change
        self.adahop[(step, int(layer), linear, gemm)] = (old, new)


def median_after_first(values):
    """median of a step -> value map without its first step (warm-up); None when too few values"""
    first = min(values) if values else None
    v = sorted(x for s, x in values.items() if s != first and x is not None)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2 if v else None


def read_eval_line(run, log, line):
    """the scores of an eval line "s:<step> <task>:<score> ..." into run.evals; False for another line"""
    m = RE_EVAL.match(line)
    if not m:
        return False
    try:
        scores = {k: float(v) for k, v in (kv.split(":", 1) for kv in m.group(2).split())}
    except ValueError:
        raise InputError(f"{log}: eval line with a non-number: {line.strip()!r}")
    run.evals.setdefault(int(m.group(1)), {}).update(scores)
    return True


def read_text_evals(run, log):
    """the eval lines of main.log only (the evals of a main.jsonl without eval events)"""
    with open(log, errors="replace") as f:
        for line in f:
            read_eval_line(run, log, line)


def read_text_log(run, log):
    with open(log, errors="replace") as f:
        for no, line in enumerate(f, 1):
            try:
                read_text_line(run, log, line)
            except ValueError as e:
                raise InputError(f"{log}:{no}: not a train_gpt2_adahop log line ({e}): {line.strip()[:80]!r}")


def read_text_line(run, log, line):
    """one line of main.log into run; ValueError for a number that does not parse"""
    if read_eval_line(run, log, line):
        return
    m = RE_TRAIN.match(line)
    if m:
        run.train[int(m.group(1))] = float(m.group(2))
        t = RE_TOK_S.search(line)
        if t:
            run.tok_s[int(m.group(1))] = float(t.group(1))
        return
    m = RE_VAL.match(line)
    if m:
        run.val[int(m.group(1))] = float(m.group(2))
        if m.group(3):
            run.val_bf16[int(m.group(1))] = float(m.group(3))
        return
    m = RE_ADAHOP.match(line)
    if m:
        run.add_change(int(m.group(1)), m.groups()[1:])


def number_or_none(value):
    """float(value), None for None; TypeError or ValueError for a value that is not a number"""
    return None if value is None else float(value)


def read_json_log(run, log):
    """the events of main.jsonl; a last line without its newline (still being written) is left out"""
    with open(log, errors="replace") as f:
        lines = f.read().split("\n")[:-1]
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
            kind = ev.get("event")
            if kind == "step":
                s = int(ev["step"])
                run.train[s] = float(ev["loss"])
                run.tok_s[s], run.mfu[s] = number_or_none(ev.get("tok_s")), number_or_none(ev.get("mfu"))
                if ev.get("inexact_blocks") is not None:
                    run.inexact[s] = int(ev["inexact_blocks"])
                for text in ev.get("strategy_changes", []):
                    m = RE_CHANGE.match(text)
                    if not m:
                        raise ValueError(f"strategy change {text!r}")
                    run.add_change(s, m.groups())
            elif kind == "val":
                run.val[int(ev["step"])] = float(ev["val_loss"])
                if ev.get("val_loss_bf16") is not None:   # null: not finite
                    run.val_bf16[int(ev["step"])] = float(ev["val_loss_bf16"])
            elif kind == "eval":   # null: a non-finite score
                scores = {k: math.nan if v is None else float(v) for k, v in ev.items() if k not in ("event", "step")}
                run.evals.setdefault(int(ev["step"]), {}).update(scores)
            elif kind == "run":
                run.pieces.append(ev)
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as e:
            raise InputError(f"{log}:{no}: not a train_gpt2_adahop event ({type(e).__name__}: {e})")


def load_run(path):
    run = Run(path)
    log = next((os.path.join(path, n) for n in LOGS if os.path.isfile(os.path.join(path, n))), None)
    if log is None:
        raise InputError(f"no main.jsonl or main.log in {path}")
    (read_json_log if log.endswith(".jsonl") else read_text_log)(run, log)
    text_log = os.path.join(path, "main.log")
    if not run.evals and log.endswith(".jsonl") and os.path.isfile(text_log):
        read_text_evals(run, text_log)
    if not run.train and not run.val:
        raise InputError(f"{log} has no train or val losses (empty, or not a train_gpt2_adahop log)")
    # mode and seed: run_modes.sh records the trainer flags; else main.jsonl's run event; else the directory name
    # <mode>_s<seed>
    args_file = os.path.join(path, "run_modes.args")
    if os.path.isfile(args_file):
        try:
            toks = shlex.split(open(args_file).read())
            flags = dict(zip(toks[0::2], toks[1::2]))
            run.mode = flags.get("-p", run.mode)
            run.seed = int(flags["-r"]) if "-r" in flags else None
        except (ValueError, KeyError):
            pass
    run.mode = run.mode or run.info.get("precision")
    if run.seed is None and run.info.get("seed") is not None:
        run.seed = int(run.info["seed"])
    m = RE_NAME.match(run.name)
    if run.mode is None:
        run.mode = m.group("mode") if m else None
    if run.seed is None and m and m.group("seed"):
        run.seed = int(m.group("seed"))
    return run


def find_runs(paths):
    dirs = []
    def is_run(d):
        return any(os.path.exists(os.path.join(d, n)) for n in LOGS)
    for p in paths:
        if os.path.isfile(p) and os.path.basename(p) in LOGS:
            p = os.path.dirname(p) or "."
        if not os.path.exists(p):
            raise InputError(f"{p} does not exist")
        if not os.path.isdir(p):
            raise InputError(f"{p} is neither a run directory nor a main.jsonl / main.log")
        if is_run(p):
            dirs.append(p)
            continue
        subs = sorted(os.path.join(p, d) for d in os.listdir(p) if os.path.isdir(os.path.join(p, d)))
        found = [d for d in subs if is_run(d)]
        if not found:
            raise InputError(f"no main.jsonl or main.log in {p} nor in its subdirectories")
        for d in subs:
            if d not in found and RE_NAME.match(os.path.basename(d)):
                print(f"warning: {d}: no main.jsonl or main.log yet, left out", file=sys.stderr)
        dirs.extend(found)
    runs = [load_run(d) for d in dirs]
    names = [r.name for r in runs]
    for r in runs:   # the same run name under two roots: tell them apart by the parent directory
        if names.count(r.name) > 1:
            r.name = os.path.join(os.path.basename(os.path.dirname(os.path.normpath(r.path))), r.name)
    return runs


def grouped(values):
    """'v1 (run, run), v2 (run)' of a run name -> value map"""
    groups = {}
    for name, v in values.items():
        groups.setdefault(v, []).append(name)
    return ", ".join(f"{v} ({', '.join(names)})" for v, names in groups.items())


def pairing_problems(runs):
    """What keeps two or more runs from being a paired comparison, as 'field: values' texts ([] when they are one):
    a run without run events or with PAIRED_FIELDS missing in them (cannot be checked), a run whose pieces differ
    in a field, runs that differ in one, a REQUIRED field with another value"""
    if len(runs) < 2:
        return []
    problems = []
    blind = [r.name for r in runs if not r.pieces]
    if blind:
        problems.append(f"run event: none in {', '.join(blind)} (main.log only or an older main.jsonl: cannot be "
                        "checked)")
    for r in runs:
        missing = [f for f in PAIRED_FIELDS if any(f not in p for p in r.pieces)]
        if missing:
            problems.append(f"{', '.join(missing)}: not in the run events of {r.name} (an older trainer: cannot be "
                            "checked)")
    for field in PAIRED_FIELDS:
        per_run = {r.name: list(dict.fromkeys(p[field] for p in r.pieces if field in p)) for r in runs}
        for name, values in per_run.items():
            if len(values) > 1:
                problems.append(f"{field}: the pieces of {name} differ ({', '.join(map(str, values))})")
        single = {name: values[0] for name, values in per_run.items() if len(values) == 1}
        if len(set(single.values())) > 1 or (field in REQUIRED and set(single.values()) - {REQUIRED[field]}):
            problems.append(f"{field}: {grouped(single)}" + (f", must be {REQUIRED[field]}" if field in REQUIRED else ""))
    return problems


def order_runs(runs, ref):
    """The reference first, then mxfp4, hadamard, adahop, other modes, and the other bf16 seeds last."""
    order = {m: i for i, m in enumerate(MODES)}
    def key(r):
        rank = -1 if r is ref else (len(MODES) + 1 if r.mode == "bf16" else order.get(r.mode, len(MODES)))
        return (rank, r.seed if r.seed is not None else -1, r.name)
    return sorted(runs, key=key)


def ema(values, alpha):
    """Debiased exponential moving average (alpha = weight of the past, 0 = none)."""
    out, s = [], 0.0
    for i, x in enumerate(values):
        s = alpha * s + (1.0 - alpha) * x
        out.append(s / (1.0 - alpha ** (i + 1)) if alpha > 0 else x)
    return out


def pick_reference(runs, ref_name):
    if ref_name:
        for r in runs:
            if r.name == ref_name or os.path.normpath(r.path) == os.path.normpath(ref_name):
                return r
        raise InputError(f"--ref {ref_name}: no such run (runs: {', '.join(r.name for r in runs)})")
    bf16 = [r for r in runs if r.mode == "bf16"]
    if not bf16:
        return None
    others = [r.seed for r in runs if r.mode != "bf16" and r.seed is not None]
    if others:   # the bf16 run with the seed the other modes use
        common = max(set(others), key=others.count)
        for r in bf16:
            if r.seed == common:
                return r
    return bf16[0]


def val_gap(run, ref, s):
    """(gap, gap %) of run's val loss over ref's at step s (both have one there)"""
    gap = run.val[s] - ref.val[s]
    return gap, 100.0 * gap / ref.val[s]


def compare_val(run, ref):
    """(step, gap, gap %) at the last val step both runs have; None when there is none."""
    common = set(run.val) & set(ref.val)
    if not common:
        return None
    s = max(common)
    return (s,) + val_gap(run, ref, s)


def seed_spread(runs, ref):
    """Spread (max - min) of the val loss of the bf16 runs at their last common val step."""
    bf16 = [r for r in runs if r.mode == "bf16" and r.val]
    if len(bf16) < 2:
        return None
    common = set.intersection(*(set(r.val) for r in bf16))
    if not common:
        return None
    s = max(common)
    vals = [r.val[s] for r in bf16]
    spread = max(vals) - min(vals)
    base = ref.val.get(s, vals[0]) if ref else vals[0]
    return {"step": s, "spread": spread, "pct": 100.0 * spread / base, "runs": [r.name for r in bf16]}


def mul(x, k):
    return None if x is None else x * k


def fmt(x, spec, none="n/a"):
    return none if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def runs_by_seed(runs, mode):
    """seed -> the run of mode with that seed and val losses (the seed also sets the data order): the one named
    <mode>_s<seed> as run_modes.sh names it where there is one (not a variant with other flags), else the first"""
    def named(r):
        return os.path.basename(r.name) == f"{mode}_s{r.seed}"
    out = {}
    for r in runs:
        if r.mode == mode and r.val and (r.seed not in out or named(r) and not named(out[r.seed])):
            out[r.seed] = r
    return out


def gap_base(run, ref, bf16_of_seed):
    """the run a run's gap along the run is taken against: bf16 of its seed for a quantized run (the reference where
    its seed has none), the reference for a bf16 run (the seed-to-seed spread); None without a reference"""
    return bf16_of_seed.get(run.seed, ref) if run.mode != "bf16" else ref


def eval_columns(keys):
    """the eval keys in column order: per task its score, <task>_ll and <task>_ppl, then any others"""
    tasks = sorted(k for k in keys if not k.endswith(("_ll", "_ppl")))
    cols = [c for t in tasks for c in (t, t + "_ll", t + "_ppl") if c in keys]
    return cols + sorted(set(keys) - set(cols))


def accuracy_tasks(runs):
    """the tasks of the eval panel: the eval keys that are accuracies (not <task>_ll nor <task>_ppl)"""
    return sorted({k for r in runs for sc in r.evals.values() for k in sc if not k.endswith(("_ll", "_ppl"))})


def inexact_text(run):
    """the table cell of the run's inexact E4M3 blocks summed over its steps: '-' for bf16, n/a where not logged"""
    if run.inexact:
        return str(sum(run.inexact.values()))
    return "-" if run.mode == "bf16" else "n/a"


def build_table(runs, ref, spread, alpha):
    header = ["run", "mode", "seed", "steps", "train_ema", "val_step", "val_loss", "gap_to_bf16", "gap_%",
              "gap/spread", "adahop_changes", "change_steps", "tok/s", "mfu_%", "gap_same_seed_%", "gpu",
              "inexact_blocks"]
    eval_keys = eval_columns({k for r in runs for k in r.last_evals()[1]})
    if eval_keys:
        header += ["eval_step"] + eval_keys
    rows, notes = [], []
    bf16_of_seed = runs_by_seed(runs, "bf16")
    for r in runs:
        steps = sorted(r.train)
        tr = ema([r.train[s] for s in steps], alpha)[-1] if steps else None
        gap = pct = ratio = None
        cmp_note = ""
        if ref is not None and r is not ref and r.val:
            c = compare_val(r, ref)
            if c:
                s, gap, pct = c
                if s != r.last_val_step() or s != ref.last_val_step():
                    cmp_note = "*"
                    notes.append(f"(*) {r.name}: compared with {ref.name} at step {s}, the last val step both have")
                if spread and spread["spread"] > 0:
                    ratio = gap / spread["spread"]
        elif r is ref:
            gap, pct = 0.0, 0.0
        same_seed = "-"
        if r.mode != "bf16":
            c = compare_val(r, bf16_of_seed[r.seed]) if r.val and r.seed in bf16_of_seed else None
            same_seed = fmt(c[2], "+.2f") + "%" if c else "n/a"
        changes = len(r.adahop)
        rows.append([r.name + (" (ref)" if r is ref else ""), r.mode or "?", fmt(r.seed, "d", "?"),
                     fmt(max(steps) if steps else None, "d"), fmt(tr, ".4f"), fmt(r.last_val_step(), "d"),
                     fmt(r.final_val(), ".4f"), fmt(gap, "+.4f") + cmp_note, fmt(pct, "+.2f") + ("%" if pct is not None else ""),
                     fmt(ratio, "+.2f"), str(changes) if r.mode in ("adahop", None) or changes else "-",
                     str(r.adahop_change_steps()) if r.mode in ("adahop", None) or changes else "-",
                     fmt(median_after_first(r.tok_s), ".0f"), fmt(mul(median_after_first(r.mfu), 100), ".1f"),
                     same_seed, r.gpu_text(), inexact_text(r)])
        if eval_keys:
            step, scores = r.last_evals()
            rows[-1] += [fmt(step, "d")] + [fmt(scores.get(k), ".2f" if k.endswith("_ppl") else ".4f") for k in eval_keys]
    rows = [[c.replace(" (ref)", "(ref)") for c in row] for row in rows]   # cells without spaces
    lines = []
    if ref is None:
        lines.append("no bf16 run: gaps not computed (name a reference with --ref)")
    else:
        lines.append(f"reference: {ref.name} (final val {fmt(ref.final_val(), '.4f')} at step {ref.last_val_step()})")
    if spread:
        lines.append(f"bf16 seed-to-seed spread ({' vs '.join(spread['runs'])}, val at step {spread['step']}): "
                     f"{spread['spread']:.4f} ({spread['pct']:.2f}%)")
    else:
        lines.append("bf16 seed-to-seed spread: n/a (needs two bf16 runs with val losses; run_modes.sh --seeds)")
    return header, rows, lines, notes


def gap_along_run(runs, ref, steps):
    """Header and rows of the val loss gap in % at the given steps ("-" where a run or its base has no val loss),
    each run against its gap_base"""
    bf16_of_seed = runs_by_seed(runs, "bf16")
    gaps = []
    for r in runs:
        base = gap_base(r, ref, bf16_of_seed)
        if base is None or base is r or not r.val:
            continue
        gaps.append((r, base, {s: val_gap(r, base, s)[1] for s in steps if s in r.val and s in base.val}))
    header = ["run", "against"] + [str(s) for s in steps]
    rows = [[r.name, b.name] + [fmt(g[s], "+.2f") + "%" if s in g else "-" for s in steps] for r, b, g in gaps]
    return header, rows


def t975(df):
    """the 0.975 quantile of Student's t with df >= 1 degrees of freedom: T975 up to df 30, beyond it the
    Cornish-Fisher expansion around the normal quantile (within 1e-6 of the exact value there)"""
    if df <= len(T975):
        return T975[df - 1]
    z = Z975
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))


def seeds_needed(mean, sd):
    """the fewest seeds n whose 95% interval half width t975(n - 1) sd / sqrt(n) is below |mean| (sd: that of the
    seeds at hand); None when mean is 0"""
    if mean == 0:
        return None
    n = max(2, math.ceil((Z975 * sd / abs(mean)) ** 2))   # t975 > Z975: fewer seeds cannot do
    while t975(n - 1) * sd / math.sqrt(n) >= abs(mean):
        n += 1
    return n


def over_seeds(values):
    """mean of one value per seed, with (two or more seeds) their sd and the 95% interval half width
    t975(n - 1) sd / sqrt(n); sd and half None for one seed"""
    n, mean = len(values), statistics.fmean(values)
    sd = statistics.stdev(values) if n >= 2 else None
    return {"n": n, "mean": mean, "sd": sd, "half": None if sd is None else t975(n - 1) * sd / math.sqrt(n)}


def paired_gap(x, y, window):
    """the paired gap x - y of two step -> val loss maps over the late window (their common val steps from the last
    common one - window on): its mean, its standard error sd / sqrt(n) over the window's points (None for one), the
    mean in % of y's window mean, the window's first and last step and its points; None without a common step"""
    common = sorted(set(x) & set(y))
    if not common:
        return None
    steps = [s for s in common if s >= common[-1] - window]
    gaps = [x[s] - y[s] for s in steps]
    se = statistics.stdev(gaps) / math.sqrt(len(gaps)) if len(gaps) >= 2 else None
    mean = statistics.fmean(gaps)
    return {"mean": mean, "se": se, "pct": 100.0 * mean / statistics.fmean(y[s] for s in steps),
            "first": steps[0], "last": steps[-1], "n": len(steps)}


# the val losses the statistics compare: the run's own forward, and its weights through the BF16 forward
FORWARDS = (("quantized", lambda r: r.val), ("bf16", lambda r: r.bf16_forward_val()))


def comparisons(runs):
    """the (mode, base mode) pairs of the statistics: each quantized mode against bf16, adahop against hadamard"""
    modes = {r.mode for r in runs if r.mode}
    quantized = [m for m in MODES[1:] if m in modes] + sorted(modes - set(MODES))
    pairs = [(m, "bf16") for m in quantized] if "bf16" in modes else []
    return pairs + ([("adahop", "hadamard")] if {"adahop", "hadamard"} <= modes else [])


def paired_statistics(runs, window):
    """per comparison (mode, base mode) and forward: the runs of each init seed both modes have with their window
    gap (None without common val steps), and the mean over the seeds of the gaps and of the gaps in % (None when no
    seed has a gap)"""
    out = []
    for mode, base_mode in comparisons(runs):
        a, b = runs_by_seed(runs, mode), runs_by_seed(runs, base_mode)
        seeds = sorted(s for s in set(a) & set(b) if s is not None)
        if not seeds:
            continue
        for forward, series in FORWARDS:
            per_seed = [(a[s], b[s], paired_gap(series(a[s]), series(b[s]), window)) for s in seeds]
            gaps = [g for _, _, g in per_seed if g]
            out.append({"mode": mode, "base": base_mode, "forward": forward, "runs": per_seed,
                        "gap": over_seeds([g["mean"] for g in gaps]) if gaps else None,
                        "pct": over_seeds([g["pct"] for g in gaps]) if gaps else None})
    return out


def bf16_window_spread(runs, window):
    """the bf16 init seeds' val loss means over the late window of their common val steps, their sd and the data
    seed they share (None when they do not all name the same one); None below two seeds"""
    by_seed = runs_by_seed(runs, "bf16")
    bf16 = [by_seed[s] for s in sorted(s for s in by_seed if s is not None)]
    common = sorted(set.intersection(*(set(r.val) for r in bf16))) if len(bf16) >= 2 else []
    if not common:
        return None
    steps = [s for s in common if s >= common[-1] - window]
    means = [statistics.fmean(r.val[s] for s in steps) for r in bf16]
    data_seeds = {p.get("data_seed") for r in bf16 for p in r.pieces or [{}]}   # None: a run without run events
    return {"runs": bf16, "steps": steps, "means": means, "sd": statistics.stdev(means),
            "data_seed": data_seeds.pop() if len(data_seeds) == 1 else None}


def interval(summary, spec, unit=""):
    """the 95% interval cell of an over_seeds summary"""
    if summary["half"] is None:
        return "one seed: no interval"
    lo, hi = summary["mean"] - summary["half"], summary["mean"] + summary["half"]
    return f"[{format(lo, spec)}{unit}, {format(hi, spec)}{unit}]"


def excludes_zero(summary):
    """the excludes_0 and seeds_needed cells of an over_seeds summary of gaps"""
    if summary["half"] is None:
        return "n/a", "n/a"
    if abs(summary["mean"]) > summary["half"]:
        return "yes", "-"
    return "no", fmt(seeds_needed(summary["mean"], summary["sd"]), "d")


RUN_STATS_HEADER = ["run", "against", "forward", "window", "points", "gap", "se", "gap_%"]
MODE_STATS_HEADER = ["comparison", "forward", "seeds", "gap", "95%_interval", "gap_%", "95%_interval_%", "excludes_0",
                     "seeds_needed"]


def statistics_tables(runs, window):
    """the statistics as (title, header, rows) tables, and the lines under them: the bf16 init-seed spread, the runs
    left out, what the columns mean"""
    stats = paired_statistics(runs, window)
    run_rows, mode_rows = [], []
    for c in stats:
        for r, base, g in c["runs"]:
            if g:
                run_rows.append([r.name, base.name, c["forward"], f"{g['first']}..{g['last']}", str(g["n"]),
                                 format(g["mean"], "+.5f"), fmt(g["se"], ".5f"), format(g["pct"], "+.3f") + "%"])
        if c["gap"]:
            gap, pct = c["gap"], c["pct"]
            mode_rows.append([f"{c['mode']}-{c['base']}", c["forward"], str(gap["n"]), format(gap["mean"], "+.5f"),
                              interval(gap, "+.5f"), format(pct["mean"], "+.3f") + "%", interval(pct, "+.3f", "%"),
                              *excludes_zero(gap)])
    tables = []
    if run_rows:
        tables.append(("per run: paired gap to the run of the same init seed, mean over the late window",
                       RUN_STATS_HEADER, run_rows))
    if mode_rows:
        tables.append(("per mode: mean over the init seeds, 95% interval (t distribution)", MODE_STATS_HEADER,
                       mode_rows))
    lines = [spread_line(bf16_window_spread(runs, window))]
    used = {mode: runs_by_seed(runs, mode) for mode in {r.mode for r in runs}}
    lines += [f"left out of the statistics: {r.name} (they take {used[r.mode][r.seed].name} as the {r.mode} run of "
              f"seed {r.seed})" for r in runs if r.val and used[r.mode][r.seed] is not r]
    if not tables:
        return tables, ["no paired runs (a quantized run and a bf16 run of the same init seed)"] + lines
    return tables, lines + STATISTICS_NOTES


def spread_line(spread):
    """the printed bf16 init-seed spread of bf16_window_spread"""
    if spread is None:
        return "bf16 init-seed spread: n/a (needs two bf16 init seeds with common val steps)"
    data = f" at data seed {spread['data_seed']}" if spread["data_seed"] is not None else ""
    mean, steps = statistics.fmean(spread["means"]), spread["steps"]
    each = ", ".join(f"{r.name} {m:.5f}" for r, m in zip(spread["runs"], spread["means"]))
    return (f"bf16 init-seed spread{data}: sd {spread['sd']:.5f} ({100.0 * spread['sd'] / mean:.3f}%) over "
            f"{len(steps)} val points {steps[0]}..{steps[-1]} of {len(spread['runs'])} seeds ({each}); min..max "
            f"{min(spread['means']):.5f}..{max(spread['means']):.5f}")


STATISTICS_NOTES = [
    "late window: the val points of a pair's common val steps from its last common val step - W on (--window W)",
    "forward quantized: the val loss of the run's own forward; bf16: its weights through the BF16 forward "
    "(val_loss_bf16 / vlb; a bf16 run's own val loss; no bf16 rows for runs of older logs without it)",
    "se: sd / sqrt(n) over the window's points; these are autocorrelated, so this SE is a lower bound",
    "per mode: the mean over the init seeds of the per-run window gaps, 95% interval mean +- t(0.975, n-1) "
    "sd / sqrt(n) over the n seeds (gap_% likewise of the per-run gaps in %); excludes_0: of the absolute "
    "interval; seeds_needed: where it does not, the fewest seeds n with t(0.975, n-1) sd / sqrt(n) < |mean|, sd "
    "from the seeds at hand (n/a when the mean is 0)",
]


def gap_curves(runs):
    """per quantized mode with two or more init seeds that have a bf16 run: its runs, and at the val steps all of
    them and their bf16 runs have, the mean over the seeds of the gap to bf16 of the same seed and the 95% interval
    half width across the seeds"""
    bf16 = runs_by_seed(runs, "bf16")
    out = {}
    for mode, base_mode in comparisons(runs):
        paired = [r for seed, r in runs_by_seed(runs, mode).items() if seed is not None and seed in bf16]
        if base_mode != "bf16" or len(paired) < 2:
            continue
        steps = sorted(set.intersection(*(set(r.val) & set(bf16[r.seed].val) for r in paired)))
        if not steps:
            continue
        stats = [over_seeds([r.val[s] - bf16[r.seed].val[s] for r in paired]) for s in steps]
        out[mode] = {"runs": paired, "steps": steps, "mean": [x["mean"] for x in stats],
                     "half": [x["half"] for x in stats]}
    return out


GEMM_KINDS = ("fwd", "dx", "dw")   # llmc/adahop.h's GEMM names, in the order of the change tables' columns


def changes_markdown(runs):
    """Markdown of each run's AdaHOP strategy changes: per step, how many GEMMs changed and the strategies they moved
    to by GEMM kind (forward, dX, dW); then every change"""
    md = []
    for r in runs:
        if not r.adahop:
            continue
        md += [f"## {r.name}", "", "| step | GEMMs changed | forward | dX | dW |", "|---:|---:|---|---|---|"]
        for step in sorted({k[0] for k in r.adahop}):
            moved = {g: {} for g in GEMM_KINDS}
            for (s, _layer, _linear, gemm), (_old, new) in r.adahop.items():
                if s == step:
                    moved.setdefault(gemm, {})
                    moved[gemm][new] = moved[gemm].get(new, 0) + 1
            cells = [", ".join(f"{k} {n}" for k, n in sorted(moved[g].items())) for g in GEMM_KINDS]
            count = sum(n for m in moved.values() for n in m.values())
            md.append(f"| {step} | {count} | " + " | ".join(cells) + " |")
        md += ["", "| step | layer | linear | GEMM | from | to |", "|---:|---:|---|---|---|---|"]
        for (step, layer, linear, gemm), (old, new) in sorted(r.adahop.items()):
            md.append(f"| {step} | {layer} | {linear} | {gemm} | {old} | {new} |")
        md.append("")
    if not md:
        md = ["no AdaHOP strategy changes in these runs", ""]
    return "\n".join(md)


def text_table(header, rows):
    w = [max(len(x) for x in col) for col in zip(header, *rows)]
    out = ["  ".join(c.ljust(w[i]) if i < 2 else c.rjust(w[i]) for i, c in enumerate(row)) for row in [header] + rows]
    out.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(out)


def markdown_grid(header, rows, left):
    """the lines of a Markdown table: the first `left` columns left-aligned, the others right-aligned"""
    rule = "|" + "|".join("---" if i < left else "---:" for i in range(len(header))) + "|"
    return ["| " + " | ".join(header) + " |", rule] + ["| " + " | ".join(row) + " |" for row in rows]


def markdown_table(header, rows, lines, notes, alpha):
    md = markdown_grid(header, rows, 3)
    md += [""] + [f"- {x}" for x in lines + notes]
    md.append(f"- train_ema: EMA of the train loss (alpha {alpha}) at the last step; gap = val loss - reference at the "
              "same step; gap/spread = gap in units of the bf16 seed-to-seed spread; adahop_changes: strategy "
              "changes logged, change_steps: at how many steps; tok/s and mfu_% (model FLOPs utilisation, main.jsonl "
              "only): medians over the steps after the first; gap_same_seed_%: gap % to the bf16 run of the same "
              "seed (the seed also sets the data order), at the last val step both have; gpu: the GPU of each "
              "piece of the run (main.jsonl's run events; n/a in logs without it); inexact_blocks: the inexact "
              "E4M3 blocks of the GEMMs (rank 0's) summed over the steps (quantized runs on the fast path, "
              "main.jsonl); eval columns: the scores of the run's last eval (-E: acc_norm, LAMBADA accuracy), "
              "<task>_ll the mean log-likelihood of the gold completion in nats, <task>_ppl the perplexity")
    return "\n".join(md) + "\n"


def statistics_title(window):
    """the line above the statistics"""
    return f"paired statistics (late window: the last {window} steps' val points)"


def statistics_markdown(window, tables, lines):
    """the statistics_tables as Markdown, under their title"""
    md = ["", statistics_title(window) + ":", ""]
    for title, header, rows in tables:
        md += [f"{title}:", ""] + markdown_grid(header, rows, 2) + [""]
    return "\n".join(md + [f"- {x}" for x in lines]) + "\n"


def write_output(path, text):
    """writes text to path under a temporary name, renamed into place once complete (an earlier file stays as it was
    when the write fails)"""
    try:
        tool_files.write_files(os.path.dirname(path) or ".", {os.path.basename(path): [text.encode()]})
    except FileProblem as e:
        raise InputError(str(e))


def figure_title(title, unpaired):
    """the figure's title: the UNPAIRED mark (when there is one) above --title"""
    return "\n".join(x for x in (unpaired, title) if x)


def plot(runs, ref, spread, alpha, out, title, ymax, xmin, unpaired=""):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("matplotlib is not installed: pip install -r scripts/requirements.txt (or use --no-plot)")
    with_evals = any(r.evals for r in runs)
    fig, axes = plt.subplots(1, 4 if with_evals else 3, figsize=(24 if with_evals else 18, 5.5))
    ax_tr, ax_val, ax_gap = axes[:3]
    bf16_of_seed = runs_by_seed(runs, "bf16")
    curves = gap_curves(runs)
    in_curve = {r for c in curves.values() for r in c["runs"]}
    markers = "osD^vP*Xh"
    tasks = accuracy_tasks(runs)
    seen_bf16, seen, variants, mode_color = 0, set(), 0, {}
    for r in runs:
        color = COLORS.get(r.mode, None)
        if r.mode != "bf16" and (r.mode, r.seed) in seen:   # e.g. adahop with other flags: its own colour
            color = VARIANT_COLORS[variants % len(VARIANT_COLORS)]
            variants += 1
        seen.add((r.mode, r.seed))
        mode_color.setdefault(r.mode, color)
        style = "-" if ref is None or r.seed == ref.seed else "--"   # the reference's seed solid, other seeds dashed
        if r.mode == "bf16":
            style = "-" if r is ref or (ref is None and seen_bf16 == 0) else "--"
            if r is not ref:
                color = "tab:gray"
            seen_bf16 += 1
        steps = [s for s in sorted(r.train) if xmin is None or s >= xmin]
        if steps:
            raw = [r.train[s] for s in sorted(r.train)]
            sm = ema(raw, alpha)[len(raw) - len(steps):]
            if alpha > 0:
                ax_tr.plot(steps, [r.train[s] for s in steps], color=color, alpha=0.15, linewidth=0.6)
            ax_tr.plot(steps, sm, style, color=color, linewidth=1.3, label=r.label)
        vsteps = [s for s in sorted(r.val) if xmin is None or s >= xmin]
        if vsteps:
            ax_val.plot(vsteps, [r.val[s] for s in vsteps], style, marker="o", markersize=3, color=color, label=r.label)
        base = gap_base(r, ref, bf16_of_seed)
        if base is not None and r is not base:
            gs = [s for s in sorted(set(r.val) & set(base.val)) if xmin is None or s >= xmin]
            if gs and r in in_curve:   # a single seed of a mode's mean: a thin line
                ax_gap.plot(gs, [r.val[s] - base.val[s] for s in gs], style, color=color, linewidth=0.7, alpha=0.5)
            elif gs:
                label = r.label + ("" if base is ref else f" − {base.name}")
                ax_gap.plot(gs, [r.val[s] - base.val[s] for s in gs], style, marker="o", markersize=3, color=color,
                            label=label)
        for i, task in enumerate(tasks if with_evals else []):
            es = [s for s in sorted(r.evals) if task in r.evals[s] and (xmin is None or s >= xmin)]
            if es:
                axes[3].plot(es, [r.evals[s][task] for s in es], style, marker=markers[i % len(markers)], markersize=4,
                             color=color, label="_nolegend_")
    for mode, c in curves.items():   # per mode the mean gap over its seeds, the 95% interval across them as a band
        pts = [(s, m, h) for s, m, h in zip(c["steps"], c["mean"], c["half"]) if xmin is None or s >= xmin]
        steps = [s for s, _, _ in pts]
        color = mode_color.get(mode)
        ax_gap.plot(steps, [m for _, m, _ in pts], "-", marker="o", markersize=3, linewidth=2, color=color,
                    label=f"{mode} − bf16 of the seed: mean of {len(c['runs'])} seeds, 95% band")
        ax_gap.fill_between(steps, [m - h for _, m, h in pts], [m + h for _, m, h in pts], color=color, alpha=0.2,
                            linewidth=0)
    # the eval panel's legend names the tasks by marker; the runs keep the colours of the other panels' legends
    for i, task in enumerate(tasks if with_evals else []):
        axes[3].plot([], [], linestyle="none", marker=markers[i % len(markers)], color="black", label=task)
    if ref is not None:
        ax_gap.axhline(0.0, color="black", linewidth=0.8)
        if spread and spread["spread"] > 0:
            ax_gap.axhspan(-spread["spread"], spread["spread"], color="gray", alpha=0.15,
                           label=f"bf16 seed spread ±{spread['spread']:.4f}")
    ax_tr.set_title(f"train loss (EMA {alpha})" if alpha > 0 else "train loss")
    ax_val.set_title("val loss")
    ax_gap.set_title(f"val loss − {ref.name} (or − bf16 of the run's seed)" if ref else "val loss − bf16 (no bf16 run)")
    if with_evals:
        axes[3].set_title("downstream evals (acc_norm; LAMBADA: accuracy)")
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:   # a lone bf16 run's gap panel holds only the unlabelled zero line
            ax.legend(fontsize=8)
    if ymax == "auto":   # the first steps' loss (about 11) would hide the differences at the end
        last = max([max(r.train) for r in runs if r.train] + [max(r.val) for r in runs if r.val])
        tail = [y for ax in (ax_tr, ax_val) for ln in ax.lines for x, y in zip(ln.get_xdata(), ln.get_ydata())
                if x >= 0.1 * last and math.isfinite(y)]
        ymax = max(tail) if tail else None
    if ymax is not None and ymax != "none":
        for ax in (ax_tr, ax_val):
            ys = [y for ln in ax.lines for y in ln.get_ydata() if math.isfinite(y)]
            if ys and min(ys) < float(ymax):
                lo = min(ys)
                ax.set_ylim(lo - 0.03 * (float(ymax) - lo), float(ymax))
    if figure_title(title, unpaired):
        fig.suptitle(figure_title(title, unpaired), color="red" if unpaired else "black")
    fig.tight_layout()
    d = os.path.dirname(out)
    if d:
        os.makedirs(d, exist_ok=True)
    tmp = tool_files.temporary_name(out)
    try:
        fig.savefig(tmp, dpi=110, format=os.path.splitext(out)[1][1:] or "png")
        tool_files.put_in_place([(tmp, out)])
    except (OSError, ValueError, FileProblem) as e:   # ValueError: a file type matplotlib does not write
        raise InputError(f"cannot write '{out}': {e}")
    finally:
        tool_files.remove_quietly([tmp])
        plt.close(fig)


def main(argv=None):
    p = tool_files.ArgumentParser(
        "plot_losses.py", description="Plot train/val loss of train_gpt2_adahop runs, print final val loss gaps to bf16 and the paired "
        "gap statistics over init seeds.",
        epilog="Example: python3 scripts/plot_losses.py runs/gutenberg_d12 --markdown runs/gutenberg_d12/losses.md")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="run directory (with main.jsonl or main.log), one of those files, or a root of run directories")
    p.add_argument("-o", "--out", help="PNG file (default: <root>/losses.png for one root, else losses.png)")
    p.add_argument("--ema", type=float, default=0.9, metavar="A",
                   help="EMA weight of the past for the train loss, 0 <= A < 1, 0 = no smoothing (default 0.9)")
    p.add_argument("--markdown", metavar="FILE", help="also write the tables as Markdown to FILE")
    p.add_argument("--ref", metavar="RUN", help="reference run name (default: the bf16 run with the other modes' seed)")
    p.add_argument("--changes", metavar="FILE", help="also write each run's AdaHOP strategy changes as Markdown to FILE: "
                   "per step the GEMMs that changed and the strategies they moved to, then every change")
    p.add_argument("--gap-steps", metavar="LIST",
                   help="also print (and add to --markdown) the val loss gap in %% at these steps (comma-separated, "
                   "e.g. 100,200,300): each run against the bf16 run of its seed (the reference where the seed has "
                   "none), each other bf16 run against the reference")
    p.add_argument("--window", type=int, default=100, metavar="W",
                   help="late window of the statistics: the val points from each pair's last common val step - W "
                   "on (default 100 steps)")
    p.add_argument("--allow-unpaired", action="store_true",
                   help="go on when the runs are not a paired comparison (their run events differ in build commit, "
                   "GPU, family, model shape, B, T, tokens per step or data seed, timed_gemms is not 0, or a run has "
                   "no run events) and mark the output and figure title UNPAIRED; without it that stops with exit 1")
    p.add_argument("--no-plot", action="store_true", help="tables only (no matplotlib needed)")
    p.add_argument("--ymax", default="auto", help="upper limit of the train and val loss axes: a number, 'auto' "
                   "(default: the highest loss after the first 10%% of the steps) or 'none' (the full range)")
    p.add_argument("--xmin", type=int, help="plot from this step on")
    p.add_argument("--title", help="figure title")
    a = p.parse_args(argv)
    if a.ymax not in ("auto", "none"):
        try:
            a.ymax = float(a.ymax)
        except ValueError:
            p.error(f"--ymax {a.ymax}: a number, auto or none")
    gap_steps = []
    if a.gap_steps is not None:
        parts = [x.strip() for x in a.gap_steps.split(",")]
        if not all(x.isdecimal() for x in parts):
            p.error(f"--gap-steps {a.gap_steps}: comma-separated non-negative steps")
        gap_steps = sorted({int(x) for x in parts})
    if not 0.0 <= a.ema < 1.0:
        p.error(f"--ema {a.ema}: must be in [0, 1)")
    if a.window < 0:
        p.error(f"--window {a.window}: must be >= 0")
    out = None
    if not a.no_plot:
        out = a.out
        if out is None:
            one_root = (len(a.paths) == 1 and os.path.isdir(a.paths[0])
                        and not any(os.path.exists(os.path.join(a.paths[0], n)) for n in LOGS))
            out = os.path.join(a.paths[0], "losses.png") if one_root else "losses.png"
    try:
        if not a.no_plot and importlib.util.find_spec("matplotlib") is None:
            raise InputError("matplotlib is not installed: pip install -r scripts/requirements.txt (or use --no-plot)")
        for path in (a.markdown, a.changes, out):   # before the logs are read: a FIFO would block the write
            if path:
                try:
                    tool_files.check_output(path)
                except FileProblem as e:
                    raise InputError(str(e))
        runs = find_runs(a.paths)
        problems = pairing_problems(runs)
        if problems and not a.allow_unpaired:
            raise UnpairedError(f"not a paired comparison: {'; '.join(problems)}. --allow-unpaired compares them "
                                "anyway, marked UNPAIRED")
        unpaired = f"UNPAIRED ({'; '.join(problems)})" if problems else ""
        if unpaired:
            print(unpaired)
        ref = pick_reference(runs, a.ref)
        runs = order_runs(runs, ref)
        spread = seed_spread(runs, ref)
        header, rows, lines, notes = build_table(runs, ref, spread, a.ema)
        print(text_table(header, rows))
        for x in lines + notes:
            print(x)
        tables, stat_lines = statistics_tables(runs, a.window)
        print(f"\n{statistics_title(a.window)}:")
        for title, t_header, t_rows in tables:
            print(f"{title}:\n{text_table(t_header, t_rows)}")
        for x in stat_lines:
            print(x)
        gap_md = ""
        if gap_steps:
            gap_header, gap_rows = gap_along_run(runs, ref, gap_steps)
            print("\nval loss gap in % along the run:")
            gap_text = "no run has a bf16 run to compare with"
            print(text_table(gap_header, gap_rows) if gap_rows else gap_text)
            gap_md = ("\nVal loss gap along the run (% over the bf16 run of the same seed, or the reference where the "
                      "seed has none; other bf16 runs: over the reference):\n\n")
            gap_md += ("\n".join(markdown_grid(gap_header, gap_rows, 2)) if gap_rows else gap_text) + "\n"
        if a.markdown:
            write_output(a.markdown, (f"**{unpaired}**\n\n" if unpaired else "")
                         + markdown_table(header, rows, lines, notes, a.ema)
                         + statistics_markdown(a.window, tables, stat_lines) + gap_md)
            print(f"wrote {a.markdown}")
        if a.changes:
            write_output(a.changes, changes_markdown(runs))
            print(f"wrote {a.changes}")
        if out:
            plot(runs, ref, spread, a.ema, out, a.title, a.ymax, a.xmin, unpaired)
            print(f"wrote {out}")
    except InputError as e:
        print(f"plot_losses.py: error: {e}", file=sys.stderr)
        return e.exit_status
    return 0


if __name__ == "__main__":
    sys.exit(main())
