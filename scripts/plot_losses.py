#!/usr/bin/env python3
"""Loss curves and final-loss table of several train_gpt2_adahop runs.

Reads <run>/main.jsonl of each run (one JSON object per line: "run", "step" with loss, tok_s, mfu and the
strategy_changes of a vote, "val" with val_loss, "eval" with the step and one score per task of -E), or, for runs
without it, <run>/main.log (lines "s:<step> tl:<loss> lr:... norm:... tok/s:... mem_gib:...", "s:<step> vl:<loss>",
"adahop step <s> layer <l> <linear> <gemm>: <old> -> <new>" and the evals "s:<step> <task>:<score> ..."); a
main.jsonl without eval events takes the evals of main.log's eval lines. Draws one PNG with three panels: train
loss (EMA-smoothed), val loss, and val loss minus the bf16 reference at the same step (a quantized run minus bf16
of its own seed where there is one; the bf16 seed-to-seed spread as a band when two bf16 seeds exist), and a
fourth with the eval scores over the steps when a run has evals. Prints a table: final val loss per run, its gap
to bf16 (absolute and %), the gap in units of the seed-to-seed spread, the number of AdaHOP strategy changes, the
median tok/s and MFU over the steps after the first, the gap % to the bf16 run of the run's own seed (the seed
also sets the data order) and, when a run has evals, the last eval step and its scores; --markdown FILE writes
the same table as Markdown.

Arguments are run directories (holding main.jsonl or main.log) or roots whose subdirectories are runs, e.g. the
--root of scripts/run_modes.sh (runs named <mode>_s<seed>). See scripts/README.md.
"""
import argparse
import json
import math
import os
import re
import shlex
import sys

MODES = ("bf16", "mxfp4", "hadamard", "adahop")
COLORS = {"bf16": "black", "mxfp4": "tab:red", "hadamard": "tab:blue", "adahop": "tab:green"}
VARIANT_COLORS = ["tab:purple", "tab:orange", "tab:brown", "tab:olive", "tab:cyan"]   # more runs of one mode
RE_TRAIN = re.compile(r"^s:(\d+) tl:(\S+)")
RE_TOK_S = re.compile(r" tok/s:(\S+)")
RE_VAL = re.compile(r"^s:(\d+) vl:(\S+)")
RE_EVAL = re.compile(r"^s:(\d+)((?: (?!tl:|vl:)[A-Za-z0-9_]+:\S+)+)\s*$")   # the scores of one eval run
CHANGE = r"layer (\d+) (\S+) (\S+): (.+?) -> (.+?)\s*$"   # one strategy change, in both logs
RE_CHANGE = re.compile("^" + CHANGE)
RE_ADAHOP = re.compile(r"^adahop step (\d+) " + CHANGE)
LOGS = ("main.jsonl", "main.log")   # a run's logs, the first one present is read
RE_NAME = re.compile(r"^(?P<mode>bf16|mxfp4|hadamard|adahop)(?:[_-]s(?P<seed>\d+))?$")


class InputError(Exception):
    pass


class Run:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(os.path.normpath(path))
        self.mode, self.seed = None, None
        self.train, self.val = {}, {}   # step -> loss; a step logged twice (resumed run) keeps the last value
        self.tok_s, self.mfu = {}, {}   # step -> tokens per second, model FLOPs utilisation (main.jsonl only)
        self.adahop = {}                # (step, layer, linear, gemm) -> (old, new)
        self.info = {}                  # main.jsonl's "run" event: precision, seed, model, FLOPs per token
        self.gpus = []                  # the GPUs of the run's pieces (each piece's "run" event), in order, once each
        self.evals = {}                 # step -> {task: score} (and <task>_ppl: perplexity)

    @property
    def label(self):
        return self.name if self.seed is None or str(self.seed) in self.name else f"{self.name} (seed {self.seed})"

    def last_val_step(self):
        return max(self.val) if self.val else None

    def final_val(self):
        return self.val[self.last_val_step()] if self.val else None

    def last_evals(self):
        """(step, {task: score}) of the last eval, or (None, {})"""
        return (max(self.evals), self.evals[max(self.evals)]) if self.evals else (None, {})

    def gpu_text(self):
        """the run's GPUs as one table cell: 'NVIDIA H100 80GB HBM3' -> 'H100_80GB_HBM3', pieces joined by '+'"""
        short = [re.sub(r"^NVIDIA ", "", g).replace(" ", "_") for g in self.gpus]
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
        raise InputError(f"{log}: eval line with a non-number: {line.strip()}")
    run.evals.setdefault(int(m.group(1)), {}).update(scores)
    return True


def read_text_evals(run, log):
    """the eval lines of main.log only (the evals of a main.jsonl without eval events)"""
    with open(log, errors="replace") as f:
        for line in f:
            read_eval_line(run, log, line)


def read_text_log(run, log):
    with open(log, errors="replace") as f:
        for line in f:
            if read_eval_line(run, log, line):
                continue
            m = RE_TRAIN.match(line)
            if m:
                run.train[int(m.group(1))] = float(m.group(2))
                t = RE_TOK_S.search(line)
                if t:
                    run.tok_s[int(m.group(1))] = float(t.group(1))
                continue
            m = RE_VAL.match(line)
            if m:
                run.val[int(m.group(1))] = float(m.group(2))
                continue
            m = RE_ADAHOP.match(line)
            if m:
                run.add_change(int(m.group(1)), m.groups()[1:])


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
                run.tok_s[s], run.mfu[s] = ev.get("tok_s"), ev.get("mfu")
                for text in ev.get("strategy_changes", []):
                    m = RE_CHANGE.match(text)
                    if not m:
                        raise ValueError(f"strategy change '{text}'")
                    run.add_change(s, m.groups())
            elif kind == "val":
                run.val[int(ev["step"])] = float(ev["val_loss"])
            elif kind == "eval":   # null: a non-finite score
                scores = {k: math.nan if v is None else float(v) for k, v in ev.items() if k not in ("event", "step")}
                run.evals.setdefault(int(ev["step"]), {}).update(scores)
            elif kind == "run":
                run.info = ev
                if ev.get("gpu") and str(ev["gpu"]) not in run.gpus:
                    run.gpus.append(str(ev["gpu"]))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
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


def same_seed_bf16(runs):
    """seed -> the first bf16 run of that seed with val losses (the seed also sets the data order)"""
    out = {}
    for r in runs:
        if r.mode == "bf16" and r.val:
            out.setdefault(r.seed, r)
    return out


def gap_base(run, ref, bf16_of_seed):
    """the run a run's gap along the run is taken against: bf16 of its seed for a quantized run (the reference where
    its seed has none), the reference for a bf16 run (the seed-to-seed spread); None without a reference"""
    return bf16_of_seed.get(run.seed, ref) if run.mode != "bf16" else ref


def build_table(runs, ref, spread, alpha):
    header = ["run", "mode", "seed", "steps", "train_ema", "val_step", "val_loss", "gap_to_bf16", "gap_%",
              "gap/spread", "adahop_changes", "change_steps", "tok/s", "mfu_%", "gap_same_seed_%", "gpu"]
    eval_keys = sorted({k for r in runs for k in r.last_evals()[1]})
    if eval_keys:
        header += ["eval_step"] + eval_keys
    rows, notes = [], []
    bf16_of_seed = same_seed_bf16(runs)
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
                     same_seed, r.gpu_text()])
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
        lines.append("bf16 seed-to-seed spread: n/a (needs two bf16 runs with val losses; run_modes.sh --seed2)")
    return header, rows, lines, notes


def gap_along_run(runs, ref, steps):
    """Header and rows of the val loss gap in % at the given steps ("-" where a run or its base has no val loss),
    each run against its gap_base"""
    bf16_of_seed = same_seed_bf16(runs)
    gaps = []
    for r in runs:
        base = gap_base(r, ref, bf16_of_seed)
        if base is None or base is r or not r.val:
            continue
        gaps.append((r, base, {s: val_gap(r, base, s)[1] for s in steps if s in r.val and s in base.val}))
    header = ["run", "against"] + [str(s) for s in steps]
    rows = [[r.name, b.name] + [fmt(g[s], "+.2f") + "%" if s in g else "-" for s in steps] for r, b, g in gaps]
    return header, rows


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
              "piece of the run (main.jsonl's run events; n/a in logs without it); eval columns: the scores of "
              "the run's last eval (-E: acc_norm, LAMBADA accuracy and <task>_ppl perplexity)")
    return "\n".join(md) + "\n"


def plot(runs, ref, spread, alpha, out, title, ymax, xmin):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("matplotlib is not installed: pip install -r scripts/requirements.txt (or use --no-plot)")
    with_evals = any(r.evals for r in runs)
    fig, axes = plt.subplots(1, 4 if with_evals else 3, figsize=(24 if with_evals else 18, 5.5))
    ax_tr, ax_val, ax_gap = axes[:3]
    bf16_of_seed = same_seed_bf16(runs)
    markers = "osD^vP*Xh"
    tasks = sorted({k for r in runs for sc in r.evals.values() for k in sc if not k.endswith("_ppl")})
    seen_bf16, seen_modes, variants = 0, set(), 0
    for r in runs:
        color = COLORS.get(r.mode, None)
        if r.mode != "bf16" and r.mode in seen_modes:   # e.g. adahop with other flags: its own colour
            color = VARIANT_COLORS[variants % len(VARIANT_COLORS)]
            variants += 1
        seen_modes.add(r.mode)
        style = "-"
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
            if gs:
                label = r.label + ("" if base is ref else f" − {base.name}")
                ax_gap.plot(gs, [r.val[s] - base.val[s] for s in gs], style, marker="o", markersize=3, color=color,
                            label=label)
        for i, task in enumerate(tasks if with_evals else []):
            es = [s for s in sorted(r.evals) if task in r.evals[s] and (xmin is None or s >= xmin)]
            if es:
                axes[3].plot(es, [r.evals[s][task] for s in es], style, marker=markers[i % len(markers)], markersize=4,
                             color=color, label="_nolegend_")
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
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    d = os.path.dirname(out)
    if d:
        os.makedirs(d, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Plot train/val loss of train_gpt2_adahop runs and print final val loss gaps to bf16.",
        epilog="Example: python3 scripts/plot_losses.py runs/gutenberg_d12 --markdown runs/gutenberg_d12/losses.md")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="run directory (with main.jsonl or main.log), one of those files, or a root of run directories")
    p.add_argument("-o", "--out", help="PNG file (default: <root>/losses.png for one root, else losses.png)")
    p.add_argument("--ema", type=float, default=0.9, metavar="A",
                   help="EMA weight of the past for the train loss, 0 <= A < 1, 0 = no smoothing (default 0.9)")
    p.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown to FILE")
    p.add_argument("--ref", metavar="RUN", help="reference run name (default: the bf16 run with the other modes' seed)")
    p.add_argument("--changes", metavar="FILE", help="also write each run's AdaHOP strategy changes as Markdown to FILE: "
                   "per step the GEMMs that changed and the strategies they moved to, then every change")
    p.add_argument("--gap-steps", metavar="LIST",
                   help="also print (and add to --markdown) the val loss gap in %% at these steps (comma-separated, "
                   "e.g. 100,200,300): each run against the bf16 run of its seed (the reference where the seed has "
                   "none), each other bf16 run against the reference")
    p.add_argument("--no-plot", action="store_true", help="table only (no matplotlib needed)")
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
    try:
        if not a.no_plot:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise InputError("matplotlib is not installed: pip install -r scripts/requirements.txt (or use --no-plot)")
        runs = find_runs(a.paths)
        ref = pick_reference(runs, a.ref)
        runs = order_runs(runs, ref)
        spread = seed_spread(runs, ref)
        header, rows, lines, notes = build_table(runs, ref, spread, a.ema)
        print(text_table(header, rows))
        for x in lines + notes:
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
            with open(a.markdown, "w") as f:
                f.write(markdown_table(header, rows, lines, notes, a.ema) + gap_md)
            print(f"wrote {a.markdown}")
        if a.changes:
            with open(a.changes, "w") as f:
                f.write(changes_markdown(runs))
            print(f"wrote {a.changes}")
        if not a.no_plot:
            out = a.out
            if out is None:
                one_root = (len(a.paths) == 1 and os.path.isdir(a.paths[0])
                            and not any(os.path.exists(os.path.join(a.paths[0], n)) for n in LOGS))
                out = os.path.join(a.paths[0], "losses.png") if one_root else "losses.png"
            plot(runs, ref, spread, a.ema, out, a.title, a.ymax, a.xmin)
            print(f"wrote {out}")
    except InputError as e:
        print(f"plot_losses.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
