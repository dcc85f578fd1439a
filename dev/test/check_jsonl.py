#!/usr/bin/env python3
"""Checks a GPU trainer run directory's main.jsonl against its main.log (dev/test/jsonl_test.sh runs it):
every line is a JSON object with an "event"; the first is a "run" event that names the GPU, the build commit, the
init and data seeds and whose flops_per_token equals the count recomputed here from its model fields (6 x matmul
weights + 12 L T C); every step's loss, lr and grad norm equal main.log's "s:<step> tl:" line, and in a quantized run
on the fast path it counts the inexact E4M3 blocks (a count >= 0); every val loss (and the bf16-forward val loss of a
quantized run) its "s:<step> vl:<loss> [vlb:<loss>]" line,
the strategy changes its "adahop step" lines, every "eval" event's scores its "s:<step> <task>:<score> ..." line
(-E); MFU = flops_per_token x tok_s / (world_size x peak_flops); steps 1..max_steps are all there.
Usage: check_jsonl.py RUN_DIR. Prints "N passed, M failed"; exits 1 on a failure.
"""
import json
import math
import os
import re
import sys

from pycheck import check, summary


def close(a, b, tol):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


def text_log(path):
    train, val, val_bf16, changes, evals = {}, {}, {}, set(), {}
    for line in open(path):
        m = re.match(r"^s:(\d+)((?: (?!tl:|vl:|vlb:)[A-Za-z0-9_]+:\S+)+)\s*$", line)
        if m:
            evals[int(m.group(1))] = {k: float(v) for k, v in (kv.split(":", 1) for kv in m.group(2).split())}
        m = re.match(r"^s:(\d+) tl:(\S+) lr:(\S+) norm:(\S+)", line)
        if m:
            train[int(m.group(1))] = tuple(float(x) for x in m.group(2, 3, 4))
        m = re.match(r"^s:(\d+) vl:(\S+)(?: vlb:(\S+))?", line)
        if m:
            val[int(m.group(1))] = float(m.group(2))
            if m.group(3):
                val_bf16[int(m.group(1))] = float(m.group(3))
        m = re.match(r"^adahop step (\d+) (.*?)\s*$", line)
        if m:
            changes.add((int(m.group(1)), m.group(2)))
    return train, val, val_bf16, changes, evals


def flops_per_token(run):
    L, C, NH, NKV, H, V, T = (run[k] for k in ("layers", "channels", "heads", "kv_heads", "hidden", "vocab", "T"))
    qkv = (NH + 2 * NKV) * (C // NH)
    fc = 2 * H if run["family"] == "LLaMA" else H
    return 6 * (L * (C * qkv + C * C + C * fc + H * C) + V * C) + 12 * L * T * C


def main(d):
    lines = open(os.path.join(d, "main.jsonl")).read().splitlines()
    events = [json.loads(x) for x in lines]
    check(all(isinstance(e, dict) and "event" in e for e in events), f"{len(events)} lines, each a JSON object with an event")
    run = events[0] if events else {}
    check(run.get("event") == "run", "the first line is the run event", str(run))
    for key in ("gpu", "build_commit"):
        check(isinstance(run.get(key), str) and run[key].strip() != "", f"the run event's {key} ({run.get(key)})", str(run))
    for key in ("seed", "data_seed", "timed_gemms"):
        check(isinstance(run.get(key), int) and run[key] >= 0, f"the run event's {key} ({run.get(key)})", str(run))
    check(close(run.get("flops_per_token"), flops_per_token(run), 1e-8), "flops_per_token = 6 x matmul weights + 12 L T C",
          f"{run.get('flops_per_token')} vs {flops_per_token(run)}")
    steps = {e["step"]: e for e in events if e["event"] == "step"}
    vals = {e["step"]: e["val_loss"] for e in events if e["event"] == "val"}
    vals_bf16 = {e["step"]: e["val_loss_bf16"] for e in events if e["event"] == "val" and "val_loss_bf16" in e}
    train, val, val_bf16, changes, evals = text_log(os.path.join(d, "main.log"))
    jevals = {e["step"]: {k: v for k, v in e.items() if k not in ("event", "step")} for e in events if e["event"] == "eval"}
    check(sorted(steps) == list(range(1, run.get("max_steps", -1) + 1)) and sorted(steps) == sorted(train),
          f"steps 1..{run.get('max_steps')}, as in main.log", f"{sorted(steps)[:3]}..{sorted(steps)[-3:]}")
    bad = [s for s, e in steps.items() if s not in train or not (close(e["loss"], train[s][0], 1e-6)
           and close(e["lr"], train[s][1], 1e-6) and close(e["grad_norm"], train[s][2], 1e-4))]
    check(not bad, "loss, lr and grad norm of every step equal main.log's", f"steps {bad[:5]}")
    check(sorted(vals) == sorted(val) and all(close(vals[s], val[s], 1e-6) for s in vals), "val losses equal main.log's",
          f"{vals} vs {val}")
    quantized = run.get("precision") != "bf16"
    check(sorted(vals_bf16) == sorted(val_bf16) and all(close(vals_bf16[s], val_bf16[s], 1e-6) for s in vals_bf16) and
          (sorted(vals_bf16) == sorted(vals) if quantized else not vals_bf16),
          f"bf16-forward val losses equal main.log's, at every val step of a quantized run ({len(vals_bf16)})",
          f"{vals_bf16} vs {val_bf16}")
    counts = [e.get("inexact_blocks") for e in steps.values()]
    check(all(isinstance(c, int) and c >= 0 for c in counts) if quantized else all(c is None for c in counts),
          "every step of a quantized run counts its inexact E4M3 blocks, a bf16 run none", f"{counts[:5]}")
    check(sorted(jevals) == sorted(evals) and all(sorted(jevals[s]) == sorted(evals[s]) and
          all(close(jevals[s][k], evals[s][k], 1e-5) for k in evals[s]) for s in evals),
          f"{len(evals)} eval events, their scores equal main.log's eval lines", f"{jevals} vs {evals}")
    jchanges = {(s, t) for s, e in steps.items() for t in e.get("strategy_changes", [])}
    check(jchanges == changes and (run.get("precision") != "adahop" or changes), f"{len(changes)} strategy changes as in main.log",
          f"{sorted(jchanges ^ changes)[:4]}")
    peak, world = run.get("peak_flops", math.nan), run.get("world_size", 1)
    check(all(close(e["mfu"], run.get("flops_per_token", 0) * e["tok_s"] / (world * peak), 1e-6) for e in steps.values()),
          "mfu = flops_per_token x tok_s / (world x peak)")
    check(all(0 < e["mfu"] < 1 and e["mem_gib"] > 0 for e in steps.values()), "0 < MFU < 1 and memory > 0 at every step")
    return summary("check_jsonl")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isfile(os.path.join(sys.argv[1], "main.jsonl")):
        sys.exit("usage: check_jsonl.py RUN_DIR   (a run directory of train_gpt2_adahop -o, with main.jsonl and main.log)")
    sys.exit(main(sys.argv[1]))
