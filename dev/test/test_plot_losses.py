#!/usr/bin/env python3
"""CPU test of scripts/plot_losses.py (no GPU): synthetic logs of 5 runs (bf16, mxfp4, hadamard, adahop with seed 1337, bf16 with seed 42): adahop
has only a main.jsonl, hadamard a main.jsonl (resumed on another GPU) and a main.log with other numbers (main.jsonl
must win), the others a main.log; without --allow-unpaired they are refused (runs without run events: exit 1), with
it the output starts with the UNPAIRED mark and the checks below run on it: the PNG is written and non-empty, the
printed gaps to bf16, gap %, gap/spread, the seed-to-seed spread, the EMA train loss, the AdaHOP change counts and
the median tok/s and MFU equal the values computed here; the evals (adahop: main.jsonl "eval" events, mxfp4:
main.log eval lines, hadamard: a main.jsonl without eval events, so main.log's eval lines) fill the eval columns
with each run's last scores, n/a for the bf16 runs, and a fourth figure panel (the PNG is four panels wide); eval
events win over main.log's eval lines; the Markdown table is written under the UNPAIRED mark; the gap to bf16 of the
run's own seed (another folder: adahop seed 42 against bf16 seed 42, a run without a bf16 of its seed n/a);
--changes lists the AdaHOP changes per step and GEMM kind; --gap-steps prints (and adds to the Markdown) the gap in
% along the run at the steps given (against the reference where a run's seed has no bf16 run), '-' where a run has
no val loss, and refuses a bad list; a main.jsonl run takes its mode and seed from its run event and leaves out a
last line still being written; missing and empty logs, a bad JSON line and an eval line with a non-number stop with
a clear error; so do, as one file:line line, a main.log loss that is not a number, a tok_s that is a list, an
infinite step and a strategy change with a line separator (quoted); a --markdown that is a folder or a FIFO is
refused, a failed run keeps an earlier --markdown file, and --ema outside [0, 1) is a one-line usage error.

Paired statistics: 4 modes x 3 init seeds (main.jsonl with full run events, one commit, GPU, B, T and data seed,
timed_gemms 0; val_loss_bf16 in the quantized runs; known gaps to bf16) pass the pairing check, and every printed
statistic equals the one computed here with the statistics module and a t table: per run the window steps and
points, the mean paired gap, its SE and % (quantized and BF16 forward, AdaHOP against Hadamard too); per mode the
mean over the seeds, its 95% interval absolute and in %, excludes 0 (yes and no both occur) and the seeds needed;
the bf16 init-seed spread; the Markdown section; --window 200 averages 5 points instead of 3, a negative --window is
a usage error; a second adahop run of a seed (named to sort first) is left out and named, the statistics
unchanged; one seed per mode prints "one seed: no interval"; the table's inexact_blocks (summed over the steps)
and the eval columns (each task's accuracy and its _ll, the Markdown caption naming _ll). Refused with exit 1, one
line naming the field, the runs and their values and --allow-unpaired: another build commit, another GPU, another
B, another data seed, timed_gemms 1, a run whose pieces differ in commit, a run without run events (main.log);
--allow-unpaired goes on with the UNPAIRED mark first in the output and the Markdown, and a run of main.log only
(vl and vlb lines) gives the same statistics. In-process: t(0.975, df) for known df and the seeds needed beyond
the t table; the figure's gap panel draws per mode the mean gap over the seeds with the 95% band and the single
seeds as thin lines, the eval panel only the accuracies, and the title starts with the UNPAIRED mark. Without
matplotlib the plotting checks are skipped (with a message) and the tables are checked with --no-plot.

Prints "N passed, N failed"; exits 1 on a failure.
"""
import contextlib
import importlib.util
import io
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile

from pycheck import check, run, summary
from skip_log import skip

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLOT = os.path.join(ROOT, "scripts", "plot_losses.py")


# ---------------------------------------------------------------------------- plot_losses.py
FINAL_VAL = {"bf16_s1337": 3.2500, "mxfp4_s1337": 3.3100, "hadamard_s1337": 3.2800, "adahop_s1337": 3.2650,
             "bf16_s42": 3.2580}
ALL_VAL = {**FINAL_VAL, "adahop_s42": 3.2700}   # adahop_s42 only in the same-seed check's folder
OFFSET = {k: v - 3.25 for k, v in ALL_VAL.items()}
STEPS, VAL_EVERY, EMA = 200, 50, 0.8
ADAHOP_LINES = [(31, 0, "qkv", "fwd", "plain", "iht"), (31, 0, "qkv", "dx", "plain", "iht"),   # llmc/adahop.h names
                (31, 3, "fc", "dw", "plain", "iht+oe_rows_a"), (31, 5, "attproj", "fwd", "plain", "iht"),
                (131, 3, "fc", "dw", "iht+oe_rows_a", "iht")]

EVALS = {100: {"hellaswag": 0.2634, "lambada": 0.1250, "lambada_ppl": 80.12},
         200: {"hellaswag": 0.2871, "lambada": 0.2000, "lambada_ppl": 40.50}}
EVAL_SHIFT = {"adahop_s1337": 0.0, "mxfp4_s1337": 0.01, "hadamard_s1337": 0.02}   # the runs with evals
PNG_WIDTH = {3: 18 * 110, 4: 24 * 110}   # pixels of the figure with 3 and with 4 panels (figsize x dpi)


def evals_of(name, s):
    """name's eval scores at step s (none for a run without evals)"""
    return {k: v + EVAL_SHIFT[name] for k, v in EVALS[s].items()} if name in EVAL_SHIFT and s in EVALS else {}


def eval_line(name, s):
    """main.log's eval line of name at step s, "" when there is none"""
    scores = evals_of(name, s)
    return f"s:{s}" + "".join(f" {k}:{v:.6f}" for k, v in scores.items()) + "\n" if scores else ""


def train_loss(name, s):
    return 3.3 + 7.6 * math.exp(-s / 30.0) + OFFSET[name] + 0.01 * math.sin(s * 1.7 + len(name))


def val_loss(name, s):
    return 3.25 + 7.6 * math.exp(-s / 30.0) + OFFSET[name]


def write_log(d, name):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "main.log"), "w") as f:
        for s in range(0, STEPS + 1):
            if s % VAL_EVERY == 0:
                v = ALL_VAL[name] if s == STEPS else val_loss(name, s)
                f.write(f"s:{s} vl:{v:.6f}\n")
            f.write(eval_line(name, s))
            if name.startswith("adahop"):
                for a in ADAHOP_LINES:
                    if a[0] == s + 1:
                        f.write("adahop step %d layer %d %s %s: %s -> %s\n" % a)
            if s < STEPS:
                f.write(f"s:{s + 1} tl:{train_loss(name, s + 1):.6f} lr:1.000000e-03 norm:0.5000 tok/s:1000 mem_gib:1.000\n")
            if s == 100 and name == "mxfp4_s1337":   # a resumed piece logging steps 99..100 again: the last value counts
                f.write(f"s:99 tl:{train_loss(name, 99):.6f} lr:1.000000e-03 norm:0.5000 tok/s:1000 mem_gib:1.000\n")
                f.write("s:100 vl:99.0\n")
                f.write(f"s:100 vl:{val_loss(name, 100):.6f}\n")


def write_jsonl(d, name, run_event, with_evals=True, resumed_on=None):
    """name's run as the trainer's main.jsonl: tok/s 1000 + step, MFU 0.25 + step / 1000; the strategy changes of
    an adahop run in their step's event; its evals as "eval" events when with_evals; with resumed_on, a second run
    event (a resumed piece) on that GPU after step 100; a last line cut off mid-write"""
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "main.jsonl"), "w") as f:
        f.write(json.dumps({"event": "run", "family": "GPT-2", "flops_per_token": 1e9, **run_event}) + "\n")
        for s in range(0, STEPS + 1):
            if s % VAL_EVERY == 0:
                v = ALL_VAL[name] if s == STEPS else val_loss(name, s)
                f.write(json.dumps({"event": "val", "step": s, "val_loss": float(f"{v:.6f}")}) + "\n")
            if with_evals and evals_of(name, s):
                f.write(json.dumps({"event": "eval", "step": s, **evals_of(name, s)}) + "\n")
            if s == STEPS:
                break
            if s == 100 and resumed_on:
                f.write(json.dumps({"event": "run", "family": "GPT-2", "flops_per_token": 1e9, **run_event,
                                    "gpu": resumed_on, "start_step": 100}) + "\n")
            ev = {"event": "step", "step": s + 1, "loss": float(f"{train_loss(name, s + 1):.6f}"), "lr": 1e-3,
                  "grad_norm": 0.5, "tok_s": 1000.0 + s + 1, "mfu": 0.25 + (s + 1) / 1000, "mem_gib": 1.0}
            changes = ["layer %d %s %s: %s -> %s" % a[1:] for a in ADAHOP_LINES if a[0] == s + 1 and name.startswith("adahop")]
            if changes:
                ev.update(strategies="0badc0de", strategy_changes=changes)
            f.write(json.dumps(ev) + "\n")
        f.write('{"event": "step", "step": 999, "lo')


GPU_FIRST, GPU_RESUMED = "NVIDIA H100 80GB HBM3", "NVIDIA H200"   # the cards of write_run's main.jsonl runs
JSONL_TOK_S, JSONL_MFU = 1101, 35.1   # the medians over steps 2..200 of write_jsonl's tok/s and MFU (in %)


def write_run(d, name):
    """adahop: main.jsonl only; hadamard: main.jsonl without eval events and a main.log whose losses are all wrong
    (its eval lines are right); others: main.log"""
    mode, seed = name.split("_s")
    if name.startswith("adahop") or name.startswith("hadamard"):
        write_jsonl(d, name, {"precision": mode, "seed": int(seed), "gpu": GPU_FIRST}, with_evals=name.startswith("adahop"),
                    resumed_on=GPU_RESUMED if name.startswith("hadamard") else None)
    if not name.startswith("adahop"):
        write_log(d, name)
    if name.startswith("hadamard"):
        log = os.path.join(d, "main.log")
        text = open(log).read()
        open(log, "w").write(re.sub(r"(tl|vl):(\S+)", lambda m: f"{m.group(1)}:{float(m.group(2)) + 1:.6f}", text))


def expected_ema(name):
    s_, out = 0.0, None
    for i, st in enumerate(range(1, STEPS + 1)):
        x = float(f"{train_loss(name, st):.6f}")
        s_ = EMA * s_ + (1 - EMA) * x
        out = s_ / (1 - EMA ** (i + 1))
    return out


def first_table(out):
    """the lines of the printed output up to the first empty one: the final-loss table and its lines"""
    return out.split("\n\n", 1)[0].splitlines()


def parse_table(out):
    rows = {}
    for line in first_table(out):
        f = line.split()
        if f and f[0].replace("(ref)", "") in FINAL_VAL:
            rows[f[0].replace("(ref)", "")] = f
    return rows


def num(cell):
    return float(cell.rstrip("%*"))


def test_plot(tmp, have_mpl):
    root = os.path.join(tmp, "runs")
    for name in FINAL_VAL:
        write_run(os.path.join(root, name), name)
    png, md = os.path.join(tmp, "out", "losses.png"), os.path.join(tmp, "losses.md")
    cmd = [sys.executable, PLOT, root, "--ema", str(EMA), "--markdown", md]
    rc, out, err = run(cmd + ["--no-plot"])
    check(rc == 1 and "not a paired comparison: run event: none in bf16_s1337, bf16_s42, mxfp4_s1337" in err
          and "--allow-unpaired" in err and "Traceback" not in err,
          "runs without run events (main.log only): refused, exit 1, without --allow-unpaired", err)
    cmd += ["--allow-unpaired"] + (["-o", png] if have_mpl else ["--no-plot"])
    rc, out, err = run(cmd)
    print(out)
    check(rc == 0, "plot_losses.py --allow-unpaired on 5 synthetic runs exits 0", err)
    check(out.startswith("UNPAIRED (run event: none in bf16_s1337, bf16_s42, mxfp4_s1337 ")
          and "gpu: the pieces of hadamard_s1337 differ (NVIDIA H100 80GB HBM3, NVIDIA H200)" in out.splitlines()[0],
          "--allow-unpaired: the first line is the UNPAIRED mark naming the runs without run events and the run "
          "resumed on another GPU", out[:600])
    if have_mpl:
        ok = os.path.isfile(png) and os.path.getsize(png) > 1000
        head = open(png, "rb").read(24) if ok else b""
        check(ok and head[:8] == b"\x89PNG\r\n\x1a\n", "PNG written, non-empty, PNG signature", png)
        width = int.from_bytes(head[16:20], "big") if ok else 0   # the IHDR chunk's width
        check(width == PNG_WIDTH[4], f"runs with evals: the figure has the eval panel ({width} px wide, 4 panels "
              f"{PNG_WIDTH[4]})")
    rows = parse_table(out)
    check(len(rows) == 5, "table has a row per run", str(sorted(rows)))
    spread = abs(FINAL_VAL["bf16_s42"] - FINAL_VAL["bf16_s1337"])
    ref = FINAL_VAL["bf16_s1337"]
    m = re.search(r"seed-to-seed spread \(([^)]*)\): ([0-9.]+) \(([0-9.]+)%\)", out)
    check(m is not None and abs(float(m.group(2)) - spread) < 0.6e-4 and abs(float(m.group(3)) - 100 * spread / ref) < 0.006,
          f"printed seed-to-seed spread = {spread:.4f} ({100 * spread / ref:.2f}%)", m.group(0) if m else out)
    for name, v in FINAL_VAL.items():
        f = rows.get(name)
        if not f:
            check(False, f"row of {name}")
            continue
        gap, pct = v - ref, 100 * (v - ref) / ref
        got_val, got_gap, got_pct = num(f[6]), num(f[7]), num(f[8])
        ok = abs(got_val - v) < 0.6e-4 and abs(got_gap - gap) < 0.6e-4 and abs(got_pct - pct) < 0.006
        if name != "bf16_s1337":
            ok = ok and abs(num(f[9]) - gap / spread) < 0.006
        check(ok, f"{name}: val {v:.4f}, gap {gap:+.4f}, {pct:+.2f}%, gap/spread {gap / spread:+.2f}", " ".join(f))
        check(abs(num(f[4]) - expected_ema(name)) < 0.6e-4, f"{name}: train EMA {expected_ema(name):.4f}", f[4])
        check(f[3] == str(STEPS) and f[5] == str(STEPS), f"{name}: steps and val step {STEPS}", " ".join(f))
    a = rows.get("adahop_s1337", [""] * 12)
    check(a[10] == str(len(ADAHOP_LINES)) and a[11] == "2", f"adahop: {len(ADAHOP_LINES)} strategy changes at 2 steps", " ".join(a))
    for name in FINAL_VAL:
        f = rows.get(name, [""] * 16)
        want = [str(JSONL_TOK_S), str(JSONL_MFU)] if name[:4] in ("adah", "hada") else ["1000", "n/a"]
        check(f[12:14] == want, f"{name}: median tok/s and MFU % {want}", " ".join(f))
        want = "-" if name.startswith("bf16") else f"{100 * (FINAL_VAL[name] - ref) / ref:+.2f}%"   # seed 1337's bf16
        check(f[14] == want, f"{name}: gap to bf16 of the same seed {want}", " ".join(f))
        want = {"adah": "H100_80GB_HBM3", "hada": "H100_80GB_HBM3+H200"}.get(name[:4], "n/a")   # main.log: no GPU
        check(f[15] == want, f"{name}: gpu {want} (each piece's card, from main.jsonl's run events)", " ".join(f))
        last = evals_of(name, STEPS)
        want = ([str(STEPS), f"{last['hellaswag']:.4f}", f"{last['lambada']:.4f}", f"{last['lambada_ppl']:.2f}"]
                if last else ["n/a"] * 4)
        check(f[17:] == want, f"{name}: eval columns (eval_step hellaswag lambada lambada_ppl) {want}", " ".join(f))
    check(rows.get("bf16_s1337", [""])[0].endswith("(ref)"), "bf16_s1337 is the reference")
    mdtext = open(md).read() if os.path.isfile(md) else ""
    md_table = mdtext.split("\n\n")[1] if mdtext.count("\n\n") > 1 else ""
    check(mdtext.startswith("**UNPAIRED (run event: none in") and md_table.startswith("| run |")
          and md_table.count("\n| ") == 5 and "seed-to-seed spread" in mdtext,
          "Markdown table written (--markdown), under the UNPAIRED mark", mdtext[:300])

    # --gap-steps: the gap in % along the run, each run against bf16 of its seed, bf16 seed 42 against the reference;
    # "-" at a step without a val loss (75); values from the logs' rounded val losses
    def logged_val(name, s):
        return float(f"{ALL_VAL[name] if s == STEPS else val_loss(name, s):.6f}")
    gap_steps = [50, 75, 100, STEPS]
    rc, out, err = run([sys.executable, PLOT, root, "--no-plot", "--allow-unpaired", "--markdown", md, "--gap-steps",
                        "200,100,75,50"])
    below = out.split("along the run:", 1)[1] if "along the run:" in out else ""
    got = {ln.split()[0]: ln.split()[1:] for ln in below.splitlines()[3:] if ln.split() and not ln.startswith("wrote ")}
    want = {name: ["bf16_s1337"] + [f"{100 * (logged_val(name, s) - logged_val('bf16_s1337', s)) / logged_val('bf16_s1337', s):+.2f}%"
                                     if s % VAL_EVERY == 0 else "-" for s in gap_steps]
            for name in FINAL_VAL if name != "bf16_s1337"}
    check(rc == 0 and below.splitlines()[1].split() == ["run", "against"] + [str(s) for s in gap_steps] and got == want,
          "--gap-steps: gap % per run against bf16 of its seed at the sorted steps, '-' without a val loss, no row "
          "for the reference", out + err)
    mdtext = open(md).read() if os.path.isfile(md) else ""
    check(f"| adahop_s1337 | bf16_s1337 | {' | '.join(want['adahop_s1337'][1:])} |" in mdtext,
          "--gap-steps: the table is added to --markdown", mdtext[-600:])
    for bad in ("5x", "-50", ","):
        rc, out, err = run([sys.executable, PLOT, root, "--no-plot", "--gap-steps", bad])
        check(rc == 2 and "--gap-steps" in err and "Traceback" not in err, f"--gap-steps {bad}: usage error, exit 2", err)

    # the gap to bf16 of the run's own seed (another data order) beside the gap to the reference; n/a without one
    paired = os.path.join(tmp, "paired")
    for name in ("bf16_s1337", "bf16_s42", "adahop_s42", "mxfp4_s1337"):
        write_run(os.path.join(paired, name), name)
    shutil.rmtree(os.path.join(paired, "bf16_s1337"))   # mxfp4 seed 1337 has no bf16 of its seed now
    write_run(os.path.join(paired, "bf16_s7"), "bf16_s1337")
    rc, out, err = run([sys.executable, PLOT, paired, "--no-plot", "--allow-unpaired", "--ref", "bf16_s7"])
    rows_p = {ln.split()[0]: ln.split() for ln in first_table(out) if ln.split() and ln.split()[0][:4] in ("adah", "mxfp")}
    want_same = f"{100 * (ALL_VAL['adahop_s42'] - FINAL_VAL['bf16_s42']) / FINAL_VAL['bf16_s42']:+.2f}%"
    want_ref = f"{100 * (ALL_VAL['adahop_s42'] - FINAL_VAL['bf16_s1337']) / FINAL_VAL['bf16_s1337']:+.2f}%"
    a42, m = rows_p.get("adahop_s42", [""] * 15), rows_p.get("mxfp4_s1337", [""] * 15)
    check(rc == 0 and a42[8] == want_ref and a42[14] == want_same and m[14] == "n/a",
          f"gap_same_seed_%: adahop_s42 {want_same} against bf16_s42 (gap_% {want_ref} against the reference); "
          "mxfp4_s1337 without a bf16 of its seed: n/a", out + err)
    rc, out, err = run([sys.executable, PLOT, paired, "--no-plot", "--allow-unpaired", "--ref", "bf16_s7", "--gap-steps",
                        str(STEPS)])
    below = out.split("along the run:", 1)[1] if "along the run:" in out else ""
    against = {ln.split()[0]: ln.split()[1] for ln in below.splitlines()[3:] if len(ln.split()) == 3}
    check(rc == 0 and against == {"bf16_s42": "bf16_s7", "adahop_s42": "bf16_s42", "mxfp4_s1337": "bf16_s7"},
          "--gap-steps: a run against bf16 of its seed, the reference where its seed has none (as the figure's gap "
          "panel), other bf16 runs against the reference", out + err)

    # --changes: per step the GEMMs that changed and where they went, by GEMM kind, then every change
    ch = os.path.join(tmp, "changes.md")
    rc, out, err = run([sys.executable, PLOT, root, "--no-plot", "--allow-unpaired", "--changes", ch])
    text = open(ch).read() if os.path.isfile(ch) else ""
    want_summary = ["| 31 | 4 | iht 2 | iht 1 | iht+oe_rows_a 1 |", "| 131 | 1 |  |  | iht 1 |"]
    want_detail = ["| %d | %d | %s | %s | %s | %s |" % a for a in sorted(ADAHOP_LINES)]
    check(rc == 0 and all(x in text.splitlines() for x in want_summary + want_detail),
          "--changes: per-step summary by GEMM kind and every change of the adahop run", text + err)
    check(text.count("## ") == 1 and "## adahop_s1337" in text, "--changes: only the run with changes has a section", text)
    text_only = os.path.join(tmp, "text_only", "adahop_s1337")   # the changes from main.log's "adahop step" lines
    write_log(text_only, "adahop_s1337")
    rc, out, err = run([sys.executable, PLOT, text_only, "--no-plot", "--changes", ch])
    text = open(ch).read() if os.path.isfile(ch) else ""
    row = next((ln.split() for ln in out.splitlines() if ln.startswith("adahop_s1337")), [""] * 12)
    check(rc == 0 and row[10:12] == [str(len(ADAHOP_LINES)), "2"] and all(x in text.splitlines() for x in want_summary + want_detail),
          f"main.log only: {len(ADAHOP_LINES)} changes at 2 steps, the same --changes tables", out + text + err)
    rc, out, err = run([sys.executable, PLOT, os.path.join(root, "bf16_s1337"), "--no-plot", "--changes", ch])
    check(rc == 0 and open(ch).read().startswith("no AdaHOP strategy changes"), "--changes without changes says so", err)

    # eval events win over main.log's eval lines; a run without evals has no eval panel nor columns
    both = os.path.join(tmp, "both", "adahop_s1337")
    write_jsonl(both, "adahop_s1337", {"precision": "adahop", "seed": 1337})
    write_log(both, "mxfp4_s1337")
    rc, out, err = run([sys.executable, PLOT, both, "--no-plot"])
    row = next((ln.split() for ln in out.splitlines() if ln.startswith("adahop_s1337")), [])
    check(rc == 0 and row[-3:-1] == [f"{EVALS[STEPS]['hellaswag']:.4f}", f"{EVALS[STEPS]['lambada']:.4f}"],
          "main.jsonl's eval events win over main.log's eval lines", out + err)
    plain = os.path.join(tmp, "plain")
    write_run(os.path.join(plain, "bf16_s1337"), "bf16_s1337")
    rc, out, err = run([sys.executable, PLOT, plain, "--no-plot"] if not have_mpl else
                       [sys.executable, PLOT, plain, "-o", os.path.join(tmp, "plain.png")])
    check(rc == 0 and "eval_step" not in out, "a run without evals: no eval columns", out + err)
    if have_mpl:
        width = int.from_bytes(open(os.path.join(tmp, "plain.png"), "rb").read(24)[16:20], "big")
        check(width == PNG_WIDTH[3], f"a run without evals: three panels ({width} px wide, want {PNG_WIDTH[3]})")
        check("Warning" not in err, "a lone bf16 run: no plotting warnings (its gap panel gets no empty legend)", err)
    bad_eval = os.path.join(tmp, "bad_eval", "bf16_s1")
    write_run(bad_eval, "bf16_s1337")
    with open(os.path.join(bad_eval, "main.log"), "a") as f:
        f.write("s:200 hellaswag:0.25 lambada:oops\n")
    rc, out, err = run([sys.executable, PLOT, bad_eval, "--no-plot"])
    check(rc == 2 and "eval line with a non-number" in err and "Traceback" not in err,
          "an eval line with a non-number: clear error, exit 2", err)

    # a single run directory and a main.jsonl or main.log path are accepted too
    rc, out, err = run([sys.executable, PLOT, os.path.join(root, "adahop_s1337", "main.jsonl"),
                        os.path.join(root, "bf16_s1337", "main.log"), "--no-plot", "--allow-unpaired"])
    check(rc == 0 and "adahop_s1337" in out and "+0.0150" in out, "run dirs / main.jsonl / main.log paths as arguments", out + err)

    # a main.jsonl run named neither <mode>_s<seed> nor by run_modes.sh: mode and seed from its run event
    named = os.path.join(tmp, "named", "myrun")
    write_jsonl(named, "mxfp4_s1337", {"precision": "mxfp4", "seed": 7})
    rc, out, err = run([sys.executable, PLOT, named, "--no-plot"])
    row = next((ln.split() for ln in out.splitlines() if ln.startswith("myrun")), [])
    check(rc == 0 and row[1:4] == ["mxfp4", "7", str(STEPS)], "main.jsonl: mode and seed from the run event", out + err)

    # a line that is not an event: the file and line are named
    bad = os.path.join(tmp, "badjson")
    os.makedirs(bad)
    open(os.path.join(bad, "main.jsonl"), "w").write('{"event": "val", "step": 0, "val_loss": 11.0}\n{"event": "step", "step": 1}\n')
    rc, out, err = run([sys.executable, PLOT, bad, "--no-plot"])
    check(rc == 2 and "main.jsonl:2" in err and "Traceback" not in err, "a step event without a loss: file:line error, exit 2", err)
    open(os.path.join(bad, "main.jsonl"), "w").write('{"event": "val", "step": 0, "val_loss": 11.0}\nnot json\n')
    rc, out, err = run([sys.executable, PLOT, bad, "--no-plot"])
    check(rc == 2 and "main.jsonl:2" in err and "Traceback" not in err, "a line that is not JSON: file:line error, exit 2", err)

    # errors: missing log, empty log, bad --ema
    miss = os.path.join(tmp, "nolog")
    os.makedirs(miss)
    rc, out, err = run([sys.executable, PLOT, miss, "--no-plot"])
    check(rc == 2 and "no main.jsonl or main.log in" in err and "Traceback" not in err, "missing logs: clear error, exit 2", err)
    rc, out, err = run([sys.executable, PLOT, os.path.join(tmp, "does_not_exist"), "--no-plot"])
    check(rc == 2 and "does not exist" in err, "missing directory: clear error, exit 2", err)
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    open(os.path.join(empty, "main.log"), "w").close()
    rc, out, err = run([sys.executable, PLOT, empty, "--no-plot"])
    check(rc == 2 and "has no" in err and "Traceback" not in err, "empty main.log: clear error, exit 2", err)
    rc, out, err = run([sys.executable, PLOT, root, "--ema", "1.5", "--no-plot"])
    check(rc == 2 and err.startswith("plot_losses.py: error: --ema") and err.count("\n") == 1,
          "--ema outside [0, 1): a one-line usage error", err)

    # a main.log number that does not parse, or a strategy change that is not one: the file and line are named
    bad_log = os.path.join(tmp, "bad_log", "bf16_s1")
    write_run(bad_log, "bf16_s1337")
    with open(os.path.join(bad_log, "main.log"), "a") as f:
        f.write("s:201 tl:abc lr:0.001\n")
    rc, out, err = run([sys.executable, PLOT, bad_log, "--no-plot"])
    check(rc == 2 and err.count("\n") == 1 and "main.log:" in err and "'s:201 tl:abc lr:0.001'" in err,
          "a main.log loss that is not a number: a one-line file:line error, exit 2", err)
    open(os.path.join(bad, "main.jsonl"), "w").write('{"event": "step", "step": 1, "loss": 1, "tok_s": [1]}\n')
    rc, out, err = run([sys.executable, PLOT, bad, "--no-plot"])
    check(rc == 2 and err.count("\n") == 1 and "main.jsonl:1" in err, "a tok_s that is a list: file:line error", err)
    open(os.path.join(bad, "main.jsonl"), "w").write('{"event": "step", "step": 1e400, "loss": 1}\n')
    rc, out, err = run([sys.executable, PLOT, bad, "--no-plot"])
    check(rc == 2 and err.count("\n") == 1 and "main.jsonl:1" in err and "OverflowError" in err,
          "a step of 1e400 (infinite): file:line error", err)
    open(os.path.join(bad, "main.jsonl"), "w").write('{"event": "step", "step": 1, "loss": 1, '
                                                     '"strategy_changes": ["a\\u2028b"]}\n')
    rc, out, err = run([sys.executable, PLOT, bad, "--no-plot"])
    check(rc == 2 and len(err.splitlines()) == 1 and "\\u2028" in err,
          "a strategy change with a line separator: one line, the text quoted", err)

    # --markdown: a folder or a FIFO is refused before the logs are read (a FIFO blocked the write), and an earlier
    # file stays as it was when the run fails
    md_dir, md_fifo, md_file = (os.path.join(tmp, n) for n in ("md_dir", "md.fifo", "earlier.md"))
    os.makedirs(md_dir)
    os.mkfifo(md_fifo)
    for md, what in ((md_dir, "is a directory"), (md_fifo, "is not a regular file")):
        rc, out, err = run([sys.executable, PLOT, root, "--no-plot", "--allow-unpaired", "--markdown", md], timeout=30)
        check(rc == 2 and err.count("\n") == 1 and what in err, f"--markdown that {what}: one-line error, exit 2", err)
    with open(md_file, "w") as f:
        f.write("earlier")
    rc, out, err = run([sys.executable, PLOT, bad_log, "--no-plot", "--markdown", md_file])
    check(rc == 2 and open(md_file).read() == "earlier" and sorted(os.listdir(tmp)).count("earlier.md") == 1,
          "a failed run keeps the earlier --markdown file", err)
    rc, out, err = run([sys.executable, PLOT, "-h"])
    check(rc == 0 and "--markdown" in out, "-h prints the usage")


# ---------------------------------------------------------------------------- paired statistics
STAT_SEEDS = (1337, 42, 7)   # init seeds, all on data seed 1337
STAT_STEPS, STAT_EVERY = 600, 50
SEED_OFF = {1337: 0.0, 42: 0.004, 7: -0.003}   # the bf16 init-seed spread
GAP = {"mxfp4": {1337: 0.060, 42: 0.055, 7: 0.065}, "hadamard": {1337: 0.004, 42: -0.002, 7: 0.006},
       "adahop": {1337: 0.010, 42: 0.012, 7: 0.011}}   # val loss minus bf16 of the seed, before the wiggle
GAP_BF16 = {"mxfp4": {1337: 0.020, 42: 0.025, 7: 0.018}, "hadamard": {1337: 0.002, 42: -0.0005, 7: 0.0025},
            "adahop": {1337: 0.003, 42: 0.002, 7: 0.004}}   # the same through the BF16 forward
RUN_EVENT = {"gpu": GPU_FIRST, "build_commit": "9151574", "family": "GPT-2", "layers": 12, "channels": 768,
             "heads": 12, "kv_heads": 12, "hidden": 3072, "vocab": 50257, "params": 124475904, "B": 64, "T": 1024,
             "tokens_per_step": 524288, "micro_steps": 8, "world_size": 1, "lm_head_lowp": 0, "data_seed": 1337,
             "timed_gemms": 0, "start_step": 0, "max_steps": STAT_STEPS, "flops_per_token": 1e9, "peak_flops": 989e12}
STAT_EVALS = {"hellaswag": 0.2500, "hellaswag_ll": -76.3, "lambada": 0.0500, "lambada_ll": -10.85, "lambada_ppl": 515.6}
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
        20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
        29: 2.045, 30: 2.042}   # t(0.975, df) from the printed tables


def stat_val(mode, seed, s):
    """the logged val loss of <mode>_s<seed> at step s"""
    v = 3.2 + 7.6 * math.exp(-s / 100.0) + SEED_OFF[seed] + 0.002 * math.sin(s / 37.0 + seed)
    if mode != "bf16":
        v += GAP[mode][seed] + 0.001 * math.cos(s / 23.0 + seed + len(mode))
    return round(v, 6)


def stat_val_bf16(mode, seed, s):
    """the logged bf16-forward val loss (val_loss_bf16 / vlb) of a quantized run"""
    return round(stat_val("bf16", seed, s) + GAP_BF16[mode][seed] + 0.0007 * math.sin(s / 29.0 + seed + len(mode)), 6)


def bf16_forward(mode, seed, s):
    """the bf16-forward val loss the statistics use: a bf16 run's own val loss"""
    return stat_val(mode, seed, s) if mode == "bf16" else stat_val_bf16(mode, seed, s)


def stat_inexact(mode, s):
    """the inexact_blocks of a step event (quantized runs only)"""
    return None if mode == "bf16" else s // 10


def write_stat_run(root, mode, seed, event=None, piece2=None, text=False):
    """<root>/<mode>_s<seed>: main.jsonl with the full run event (its fields replaced by event), a step event every
    10 steps, a val event every STAT_EVERY steps (val_loss_bf16 in quantized runs), the evals at the end; piece2:
    a second piece's run event from step 300 on with these fields replaced; text: main.log only, the same values"""
    d = os.path.join(root, f"{mode}_s{seed}")
    os.makedirs(d, exist_ok=True)
    ev = {"event": "run", **RUN_EVENT, "precision": mode, "seed": seed, **(event or {})}
    lines = [] if text else [json.dumps(ev)]
    for s in range(0, STAT_STEPS + 1, 10):
        if s == 300 and piece2:
            lines.append(json.dumps({**ev, "start_step": 300, **piece2}))
        if s > 0:
            step = {"event": "step", "step": s, "loss": 3.3 + 7.6 * math.exp(-s / 100.0), "tok_s": 1000.0, "mfu": 0.3}
            if stat_inexact(mode, s) is not None:
                step["inexact_blocks"] = stat_inexact(mode, s)
            lines.append(f"s:{s} tl:{step['loss']:.6f} lr:1.0e-03 norm:0.5 tok/s:1000 mem_gib:1.0" if text
                         else json.dumps(step))
        if s % STAT_EVERY == 0:
            val = {"event": "val", "step": s, "val_loss": stat_val(mode, seed, s)}
            if mode != "bf16":
                val["val_loss_bf16"] = stat_val_bf16(mode, seed, s)
            lines.append(f"s:{s} vl:{val['val_loss']:.6f}" + (f" vlb:{val['val_loss_bf16']:.6f}" if mode != "bf16" else "")
                         if text else json.dumps(val))
    lines.append(f"s:{STAT_STEPS}" + "".join(f" {k}:{v:.6f}" for k, v in STAT_EVALS.items()) if text
                 else json.dumps({"event": "eval", "step": STAT_STEPS, **STAT_EVALS}))
    with open(os.path.join(d, "main.log" if text else "main.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write_stat_set(root, modes=("bf16", "mxfp4", "hadamard", "adahop"), seeds=STAT_SEEDS):
    for mode in modes:
        for seed in seeds:
            write_stat_run(root, mode, seed)


def want_run_gap(x, y, window):
    """(first step, last step, points, mean, se, mean in %) of the paired gap x(s) - y(s) over the window"""
    steps = [s for s in range(0, STAT_STEPS + 1, STAT_EVERY) if s >= STAT_STEPS - window]
    gaps = [x(s) - y(s) for s in steps]
    mean = statistics.mean(gaps)
    return (steps[0], steps[-1], len(steps), mean, statistics.stdev(gaps) / math.sqrt(len(gaps)),
            100 * mean / statistics.mean([y(s) for s in steps]))


def want_needed(mean, sd):
    """the fewest seeds n with t(0.975, n-1) sd / sqrt(n) < |mean|, by trying n = 2, 3, ..."""
    return next(n for n in range(2, 31) if T975[n - 1] * sd / math.sqrt(n) < abs(mean))


def series(mode, forward):
    """the val loss of <mode>_s<seed> at step s as f(seed, s), through the run's own forward or the BF16 one"""
    return (lambda seed, s: stat_val(mode, seed, s)) if forward == "quantized" else \
        (lambda seed, s: bf16_forward(mode, seed, s))


def want_statistics(window):
    """(per-run rows, per-mode rows) as dicts keyed (run, against, forward) and (comparison, forward)"""
    runs, modes = {}, {}
    for mode, base in [("mxfp4", "bf16"), ("hadamard", "bf16"), ("adahop", "bf16"), ("adahop", "hadamard")]:
        for forward in ("quantized", "bf16"):
            x, y = series(mode, forward), series(base, forward)
            per = {seed: want_run_gap(lambda s: x(seed, s), lambda s: y(seed, s), window) for seed in STAT_SEEDS}
            for seed, g in per.items():
                runs[(f"{mode}_s{seed}", f"{base}_s{seed}", forward)] = g
            gaps, pcts = [g[3] for g in per.values()], [g[5] for g in per.values()]
            mean, sd = statistics.mean(gaps), statistics.stdev(gaps)
            half = T975[2] * sd / math.sqrt(3)
            pct_half = T975[2] * statistics.stdev(pcts) / math.sqrt(3)
            excl = abs(mean) > half
            modes[(f"{mode}-{base}", forward)] = {"mean": mean, "lo": mean - half, "hi": mean + half,
                                                   "pct": statistics.mean(pcts), "pct_lo": statistics.mean(pcts) - pct_half,
                                                   "pct_hi": statistics.mean(pcts) + pct_half, "excludes": excl,
                                                   "needed": None if excl else want_needed(mean, sd)}
    return runs, modes


def stat_section(out, title):
    """the rows of the printed statistics table under the line `title...:`, split at two or more spaces"""
    lines = out.split(title, 1)[1].splitlines()[3:] if title in out else []
    rows = []
    for ln in lines:
        if not ln.startswith(("mxfp4", "hadamard", "adahop")):
            break
        rows.append(re.split(r"\s{2,}", ln.strip()))
    return rows


def close(cell, want, digits):
    """the printed number equals want to the printed digits"""
    try:
        return abs(float(cell.rstrip("%")) - want) <= 0.6 * 10 ** -digits
    except ValueError:
        return False


def interval_cell(cell, lo, hi, digits):
    m = re.fullmatch(r"\[(\S+), (\S+)\]", cell)
    return bool(m) and close(m.group(1), lo, digits) and close(m.group(2), hi, digits)


def check_statistics(out, window, what):
    """the printed per-run and per-mode statistics equal want_statistics(window)"""
    want_runs, want_modes = want_statistics(window)
    rows = stat_section(out, "per run: ")
    got = {tuple(r[:3]): r[3:] for r in rows}
    check(sorted(got) == sorted(want_runs), f"{what}: a per-run row per quantized run and forward (and adahop "
          f"against hadamard), {len(want_runs)} rows", str(sorted(got)))
    bad = []
    for key, (first, last, n, mean, se, pct) in want_runs.items():
        cells = got.get(key, [""] * 5)
        if not (cells[0] == f"{first}..{last}" and cells[1] == str(n) and close(cells[2], mean, 5)
                and close(cells[3], se, 5) and close(cells[4], pct, 3) and cells[4].endswith("%")):
            bad.append(f"{key}: {cells}, want {first}..{last} {n} {mean:+.5f} {se:.5f} {pct:+.3f}%")
    check(not bad, f"{what}: per run the window steps and points, the mean paired gap, its SE and the gap in %, "
          "quantized and bf16 forward", "\n     ".join(bad))
    got = {tuple(r[:2]): r[2:] for r in stat_section(out, "per mode: ")}
    check(sorted(got) == sorted(want_modes), f"{what}: a per-mode row per comparison and forward", str(sorted(got)))
    bad = []
    for key, w in want_modes.items():
        cells = got.get(key, [""] * 7)
        ok = (cells[0] == "3" and close(cells[1], w["mean"], 5) and interval_cell(cells[2], w["lo"], w["hi"], 5)
              and close(cells[3], w["pct"], 3) and interval_cell(cells[4].replace("%", ""), w["pct_lo"], w["pct_hi"], 3)
              and cells[5] == ("yes" if w["excludes"] else "no") and cells[6] == ("-" if w["excludes"] else str(w["needed"])))
        if not ok:
            bad.append(f"{key}: {cells}, want {w}")
    check(not bad, f"{what}: per mode the mean over 3 seeds, its 95% interval (t, df 2) absolute and in %, excludes 0 "
          "and the seeds needed", "\n     ".join(bad))


def test_statistics(tmp, have_mpl):
    root = os.path.join(tmp, "stats")
    write_stat_set(root)
    md = os.path.join(tmp, "stats.md")
    rc, out, err = run([sys.executable, PLOT, root, "--no-plot", "--markdown", md])
    print(out)
    paired_out = out
    check(rc == 0 and not out.startswith("UNPAIRED") and "paired statistics (late window: the last 100 steps" in out,
          "4 modes x 3 seeds with matching run events: paired (no UNPAIRED mark), statistics printed", out[:300] + err)
    check_statistics(out, 100, "statistics")
    excl = {tuple(r[:2]): r[7] for r in stat_section(out, "per mode: ") if len(r) == 9}
    check(excl.get(("mxfp4-bf16", "quantized")) == "yes" and excl.get(("hadamard-bf16", "quantized")) == "no"
          and excl.get(("adahop-hadamard", "quantized")) == "no",
          "excludes 0 both ways: mxfp4 - bf16 yes; hadamard - bf16 and adahop - hadamard no", str(excl))
    means = [statistics.mean([stat_val("bf16", seed, s) for s in (500, 550, 600)]) for seed in sorted(STAT_SEEDS)]
    sd = statistics.stdev(means)
    m = re.search(r"bf16 init-seed spread at data seed 1337: sd (\S+) \((\S+)%\) over 3 val points 500\.\.600 of 3 "
                  r"seeds \(bf16_s7 (\S+), bf16_s42 (\S+), bf16_s1337 (\S+)\); min\.\.max (\S+)\.\.(\S+)$", out, re.M)
    check(m is not None and close(m.group(1), sd, 5) and close(m.group(2), 100 * sd / statistics.mean(means), 3)
          and all(close(m.group(3 + i), means[i], 5) for i in range(3))
          and close(m.group(6), min(means), 5) and close(m.group(7), max(means), 5),
          f"bf16 init-seed spread at the fixed data order: sd {sd:.5f} of the seeds' window means, min..max",
          m.group(0) if m else out[-1500:])
    check("autocorrelated, so this SE is a lower bound" in out, "the caption says the window SE is a lower bound")
    mdtext = open(md).read() if os.path.isfile(md) else ""
    row = next((r for r in stat_section(out, "per mode: ") if r[:2] == ["hadamard-bf16", "bf16"]), [])
    check("paired statistics (late window: the last 100 steps' val points):" in mdtext and "| " + " | ".join(row) + " |" in mdtext.splitlines()
          and "| adahop_s7 | hadamard_s7 | quantized |" in mdtext and "lower bound" in mdtext,
          "--markdown: the statistics section with the per-run and per-mode rows", mdtext[-2500:])

    # --window: the points averaged
    rc, out, err = run([sys.executable, PLOT, root, "--no-plot", "--window", "200"])
    check(rc == 0 and "last 200 steps" in out, "--window 200 runs", err)
    check_statistics(out, 200, "--window 200")
    rc, out, err = run([sys.executable, PLOT, root, "--no-plot", "--window", "-5"])
    check(rc == 2 and "--window -5: must be >= 0" in err and "Traceback" not in err, "--window -5: usage error, exit 2",
          err)

    # the main table: the inexact E4M3 blocks and the evals' gold log-likelihoods beside the accuracies
    table = first_table(paired_out)
    header = table[0].split() if table else []
    row = next((ln.split() for ln in table if ln.startswith("mxfp4_s42")), [])
    b16 = next((ln.split() for ln in table if ln.startswith("bf16_s42")), [])
    cells = dict(zip(header, row))
    inexact = sum(stat_inexact("mxfp4", s) for s in range(10, STAT_STEPS + 1, 10))
    check(cells.get("inexact_blocks") == str(inexact) and dict(zip(header, b16)).get("inexact_blocks") == "-",
          f"inexact_blocks: summed over the steps ({inexact}), '-' for bf16", table[0] + "\n" + " ".join(row))
    want = ["eval_step", "hellaswag", "hellaswag_ll", "lambada", "lambada_ll", "lambada_ppl"]
    vals = [str(STAT_STEPS)] + [f"{STAT_EVALS[k]:.2f}" if k.endswith("_ppl") else f"{STAT_EVALS[k]:.4f}" for k in want[1:]]
    caption = "<task>_ll the mean log-likelihood of the gold completion in nats"
    check(header[-6:] == want and row[-6:] == vals and caption in mdtext,
          "eval columns: per task the accuracy and its _ll (gold log-likelihood), the Markdown says what _ll is",
          " ".join(header[-6:]) + "\n" + " ".join(row[-6:]))

    # a second adahop run of seed 42 (another flag, named so that it sorts first): left out, the statistics unchanged
    variant = os.path.join(tmp, "variant")
    shutil.copytree(root, variant)
    write_stat_run(os.path.join(tmp, "variant_run"), "hadamard", 42, {"precision": "adahop"})
    shutil.move(os.path.join(tmp, "variant_run", "hadamard_s42"), os.path.join(variant, "adahop_a_s42"))
    rc, out, err = run([sys.executable, PLOT, variant, "--no-plot"])
    check(rc == 0 and "left out of the statistics: adahop_a_s42 (they take adahop_s42 as the adahop run of seed 42)"
          in out, "a second run of a mode and seed: left out of the statistics, named", out[-1500:] + err)
    check_statistics(out, 100, "with a variant run")

    # a single init seed per mode: no interval
    one = os.path.join(tmp, "one_seed")
    write_stat_set(one, ("bf16", "mxfp4"), (1337,))
    rc, out, err = run([sys.executable, PLOT, one, "--no-plot"])
    row = next((r for r in stat_section(out, "per mode: ") if r[:2] == ["mxfp4-bf16", "quantized"]), [])
    check(rc == 0 and row[2:3] == ["1"] and row[4] == "one seed: no interval" and row[-2:] == ["n/a", "n/a"]
          and "bf16 init-seed spread: n/a" in out, "one seed: 'one seed: no interval', excludes_0 and seeds "
          "needed n/a, no bf16 spread", " | ".join(row) + err)

    # the refusals: one clear line, exit 1, naming the field, the runs and their values, and --allow-unpaired
    cases = [("another build commit", {"build_commit": "abcdef0"}, None, "build_commit: 9151574 (bf16_s1337), abcdef0 (mxfp4_s1337)"),
             ("another GPU", {"gpu": "NVIDIA H200"}, None, f"gpu: {GPU_FIRST} (bf16_s1337), NVIDIA H200 (mxfp4_s1337)"),
             ("another B", {"B": 32}, None, "B: 64 (bf16_s1337), 32 (mxfp4_s1337)"),
             ("another data seed", {"data_seed": 42}, None, "data_seed: 1337 (bf16_s1337), 42 (mxfp4_s1337)"),
             ("timed_gemms 1", {"timed_gemms": 1}, None, "timed_gemms: 0 (bf16_s1337), 1 (mxfp4_s1337), must be 0"),
             ("pieces of another commit", None, {"build_commit": "abcdef0"},
              "build_commit: the pieces of mxfp4_s1337 differ (9151574, abcdef0)"),
             ("no run events (main.log)", None, None, "run event: none in mxfp4_s1337")]
    for i, (what, event, piece2, text) in enumerate(cases):
        d = os.path.join(tmp, f"refuse{i}")
        write_stat_run(d, "bf16", 1337)
        write_stat_run(d, "mxfp4", 1337, event, piece2, text=what.startswith("no run events"))
        rc, out, err = run([sys.executable, PLOT, d, "--no-plot"])
        check(rc == 1 and err.startswith("plot_losses.py: error: not a paired comparison: ") and text in err
              and "--allow-unpaired" in err and err.count("\n") == 1 and "Traceback" not in err and not out,
              f"{what}: refused, exit 1, '{text}'", err)

    # --allow-unpaired goes on and marks the output, the Markdown and the figure title
    d = os.path.join(tmp, "refuse2")
    rc, out, err = run([sys.executable, PLOT, d, "--no-plot", "--allow-unpaired", "--markdown", md])
    mdtext = open(md).read() if os.path.isfile(md) else ""
    check(rc == 0 and out.splitlines()[0] == "UNPAIRED (B: 64 (bf16_s1337), 32 (mxfp4_s1337))"
          and mdtext.startswith("**UNPAIRED (B: 64 (bf16_s1337), 32 (mxfp4_s1337))**") and "per mode: " in out,
          "--allow-unpaired: goes on, 'UNPAIRED (B: ...)' the first line of the output and of the Markdown",
          out[:300] + err)
    # a run of main.log only (vl and vlb lines) among the others: the same statistics, marked UNPAIRED
    mixed = os.path.join(tmp, "mixed")
    write_stat_set(mixed)
    shutil.rmtree(os.path.join(mixed, "mxfp4_s42"))
    write_stat_run(mixed, "mxfp4", 42, text=True)
    rc, out, err = run([sys.executable, PLOT, mixed, "--no-plot", "--allow-unpaired"])
    check(rc == 0 and out.startswith("UNPAIRED (run event: none in mxfp4_s42"), "main.log only: UNPAIRED with "
          "--allow-unpaired", out[:300] + err)
    check_statistics(out, 100, "main.log vl/vlb lines")
    if have_mpl:
        test_figure(tmp, root, d)


def load_plot_losses():
    """scripts/plot_losses.py as a module"""
    spec = importlib.util.spec_from_file_location("plot_losses", PLOT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def figure_of(mod, argv):
    """the matplotlib figure that plot_losses.py's main(argv) saves"""
    from matplotlib.figure import Figure
    saved, save = [], Figure.savefig
    Figure.savefig = lambda self, *a, **k: saved.append(self)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            mod.main(argv)
    except SystemExit:   # a usage error
        pass
    finally:
        Figure.savefig = save
    return saved[0] if saved else None


def test_t975():
    mod = load_plot_losses()
    t = getattr(mod, "t975", None)
    want = {1: 12.706, 2: 4.303, 4: 2.776, 30: 2.042, 40: 2.021, 120: 1.980, 10 ** 6: 1.960}
    got = {df: t(df) for df in want} if t else {}
    check(t is not None and all(abs(got[df] - v) < 0.6e-3 for df, v in want.items()),
          f"t(0.975, df) without scipy: {want}", str(got))
    needed = getattr(mod, "seeds_needed", None)
    n = needed(0.001, 0.01) if needed else 0   # about (1.96 * 0.01 / 0.001)^2 = 384 seeds: beyond the exact table
    check(n > 385 and t(n - 1) * 0.01 / math.sqrt(n) < 0.001 <= t(n - 2) * 0.01 / math.sqrt(n - 1)
          and needed(0.0, 0.01) is None, f"seeds needed beyond the t table: the fewest n ({n}); mean 0: none")


def test_figure(tmp, root, unpaired_root):
    """in-process: the gap panel's per-mode mean over the seeds with its band, the eval panel's accuracies only,
    the UNPAIRED mark in the title"""
    from matplotlib.colors import to_rgb
    mod = load_plot_losses()
    png = os.path.join(tmp, "stats.png")
    fig = figure_of(mod, [root, "-o", png])
    axes = fig.axes if fig else []
    gap = axes[2] if len(axes) == 4 else None
    steps = list(range(0, STAT_STEPS + 1, STAT_EVERY))
    bad = []
    for mode in ("mxfp4", "hadamard", "adahop"):
        gaps = [[stat_val(mode, seed, s) - stat_val("bf16", seed, s) for seed in STAT_SEEDS] for s in steps]
        mean = [statistics.mean(g) for g in gaps]
        half = [T975[2] * statistics.stdev(g) / math.sqrt(3) for g in gaps]
        line = next((ln for ln in gap.lines if ln.get_label().startswith(f"{mode} − bf16")), None) if gap else None
        if line is None or list(line.get_xdata()) != steps or \
                any(abs(y - m) > 1e-9 for y, m in zip(line.get_ydata(), mean)):
            bad.append(f"{mode}: mean line")
            continue
        band = [c for c in gap.collections if tuple(c.get_facecolor()[0][:3]) == to_rgb(line.get_color())]
        ys = [v[1] for c in band for p in c.get_paths() for v in p.vertices]
        if not band or abs(min(ys) - min(m - h for m, h in zip(mean, half))) > 2e-5 or \
                abs(max(ys) - max(m + h for m, h in zip(mean, half))) > 2e-5:   # T975 to 3 decimals
            bad.append(f"{mode}: band {min(ys) if ys else None}..{max(ys) if ys else None}")
    thin = [ln for ln in gap.lines if ln.get_linewidth() == 0.7] if gap else []
    check(gap is not None and not bad and len(thin) == 9,
          "figure: the gap panel draws per mode the mean gap over the 3 seeds with the 95% interval as a band, the "
          "9 single runs as thin lines", "; ".join(bad) + f"; {len(thin)} thin lines")
    legend = axes[3].get_legend() if len(axes) == 4 else None
    labels = [t.get_text() for t in legend.get_texts()] if legend else []
    check(labels == ["hellaswag", "lambada"], "figure: the eval panel plots the accuracies only (no _ll, no _ppl)",
          str(labels))
    fig = figure_of(mod, [unpaired_root, "-o", png, "--allow-unpaired", "--title", "GPT-2 d12"])
    title = fig._suptitle.get_text() if fig and fig._suptitle else ""
    check(title == "UNPAIRED (B: 64 (bf16_s1337), 32 (mxfp4_s1337))\nGPT-2 d12",
          "figure: the UNPAIRED mark above the --title", title)


def main():
    have_mpl = importlib.util.find_spec("matplotlib") is not None
    if not have_mpl:
        skip("dev/test/test_plot_losses.py PNG and figure checks", "matplotlib is not installed "
             "(pip install -r scripts/requirements.txt); the table is checked with --no-plot")
    tmp = tempfile.mkdtemp(prefix="test_plot_losses_")
    try:
        test_plot(tmp, have_mpl)
        test_statistics(tmp, have_mpl)
        test_t975()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary("test_plot_losses")


if __name__ == "__main__":
    sys.exit(main())
