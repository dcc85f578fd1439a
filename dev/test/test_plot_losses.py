#!/usr/bin/env python3
"""CPU test of scripts/plot_losses.py (no GPU): synthetic logs of 5 runs (bf16, mxfp4, hadamard, adahop with seed 1337, bf16 with seed 42): adahop
has only a main.jsonl, hadamard a main.jsonl and a main.log with other numbers (main.jsonl must win), the others a
main.log; the PNG is written and non-empty, the printed gaps to bf16, gap %, gap/spread, the seed-to-seed spread,
the EMA train loss, the AdaHOP change counts and the median tok/s and MFU equal the values computed here; the evals
(adahop: main.jsonl "eval" events, mxfp4: main.log eval lines, hadamard: a main.jsonl without eval events, so
main.log's eval lines) fill the eval columns with each run's last scores, n/a for the bf16 runs, and a fourth
figure panel (the PNG is four panels wide); eval events win over main.log's eval lines; the Markdown table is
written; the gap to bf16 of the run's own seed (another folder: adahop seed 42 against bf16 seed 42, a run without
a bf16 of its seed n/a); --changes lists the AdaHOP changes per step and GEMM kind; --gap-steps prints (and adds to
the Markdown) the gap in % along the run at the steps given (against the reference where a run's seed has no bf16
run), '-' where a run has no val loss, and refuses a bad list; a main.jsonl run takes its mode and seed from its
run event and leaves out a last line still being written; missing and empty logs, a bad JSON line and an eval line
with a non-number stop with a clear error. Without matplotlib the plotting checks are skipped (with a message) and
the table is checked with --no-plot.

Prints "N passed, N failed"; exits 1 on a failure.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

from pycheck import check, summary
from skip_log import skip

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLOT = os.path.join(ROOT, "scripts", "plot_losses.py")


def run(cmd, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


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


def parse_table(out):
    rows = {}
    for line in out.splitlines():
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
    cmd += ["-o", png] if have_mpl else ["--no-plot"]
    rc, out, err = run(cmd)
    print(out)
    check(rc == 0, "plot_losses.py on 5 synthetic runs exits 0", err)
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
        check(f[16:] == want, f"{name}: eval columns (eval_step hellaswag lambada lambada_ppl) {want}", " ".join(f))
    check(rows.get("bf16_s1337", [""])[0].endswith("(ref)"), "bf16_s1337 is the reference")
    mdtext = open(md).read() if os.path.isfile(md) else ""
    check(mdtext.startswith("| run |") and mdtext.count("\n| ") == 5 and "seed-to-seed spread" in mdtext,
          "Markdown table written (--markdown)", mdtext[:300])

    # --gap-steps: the gap in % along the run, each run against bf16 of its seed, bf16 seed 42 against the reference;
    # "-" at a step without a val loss (75); values from the logs' rounded val losses
    def logged_val(name, s):
        return float(f"{ALL_VAL[name] if s == STEPS else val_loss(name, s):.6f}")
    gap_steps = [50, 75, 100, STEPS]
    rc, out, err = run([sys.executable, PLOT, root, "--no-plot", "--markdown", md, "--gap-steps", "200,100,75,50"])
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
    rc, out, err = run([sys.executable, PLOT, paired, "--no-plot", "--ref", "bf16_s7"])
    rows_p = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.split() and ln.split()[0][:4] in ("adah", "mxfp")}
    want_same = f"{100 * (ALL_VAL['adahop_s42'] - FINAL_VAL['bf16_s42']) / FINAL_VAL['bf16_s42']:+.2f}%"
    want_ref = f"{100 * (ALL_VAL['adahop_s42'] - FINAL_VAL['bf16_s1337']) / FINAL_VAL['bf16_s1337']:+.2f}%"
    a42, m = rows_p.get("adahop_s42", [""] * 15), rows_p.get("mxfp4_s1337", [""] * 15)
    check(rc == 0 and a42[8] == want_ref and a42[14] == want_same and m[14] == "n/a",
          f"gap_same_seed_%: adahop_s42 {want_same} against bf16_s42 (gap_% {want_ref} against the reference); "
          "mxfp4_s1337 without a bf16 of its seed: n/a", out + err)
    rc, out, err = run([sys.executable, PLOT, paired, "--no-plot", "--ref", "bf16_s7", "--gap-steps", str(STEPS)])
    below = out.split("along the run:", 1)[1] if "along the run:" in out else ""
    against = {ln.split()[0]: ln.split()[1] for ln in below.splitlines()[3:] if len(ln.split()) == 3}
    check(rc == 0 and against == {"bf16_s42": "bf16_s7", "adahop_s42": "bf16_s42", "mxfp4_s1337": "bf16_s7"},
          "--gap-steps: a run against bf16 of its seed, the reference where its seed has none (as the figure's gap "
          "panel), other bf16 runs against the reference", out + err)

    # --changes: per step the GEMMs that changed and where they went, by GEMM kind, then every change
    ch = os.path.join(tmp, "changes.md")
    rc, out, err = run([sys.executable, PLOT, root, "--no-plot", "--changes", ch])
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
                        os.path.join(root, "bf16_s1337", "main.log"), "--no-plot"])
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
    check(rc == 2 and "--ema" in err, "--ema outside [0, 1): error", err)
    rc, out, err = run([sys.executable, PLOT, "-h"])
    check(rc == 0 and "--markdown" in out, "-h prints the usage")


def main():
    try:
        import matplotlib  # noqa: F401
        have_mpl = True
    except ImportError:
        have_mpl = False
        skip("dev/test/test_plot_losses.py PNG checks", "matplotlib is not installed "
             "(pip install -r scripts/requirements.txt); the table is checked with --no-plot")
    tmp = tempfile.mkdtemp(prefix="test_plot_losses_")
    try:
        test_plot(tmp, have_mpl)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary("test_plot_losses")


if __name__ == "__main__":
    sys.exit(main())
