#!/usr/bin/env python3
"""CPU test of scripts/run_modes.sh and scripts/long_runs.sh (no GPU).

run_modes.sh: flag errors, --dry-run (every mode at every init seed, seed by seed, one data seed and -a 0 for all),
and a fake trainer (a Python script given by --trainer or ADAHOP_TRAINER, with the real trainer's log, checkpoint
and resume behaviour) trained in pieces by --steps and by --minutes: the pieces add up to exactly the log of one
uninterrupted run, finished runs are skipped (detected from main.log), a run started with other flags is refused,
a failing trainer is reported, a second invocation on a running run is refused while another run of the same root
trains beside it; --gpus: bad lists refused, the runs side by side on the listed GPUs (never two at once on one
GPU) with the logs of runs trained alone, and with --minutes pieces that add up the same. long_runs.sh: each set's
runs and flags (--dry-run). Prints "N passed, N failed"; exits 1 on a failure.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from pycheck import check, run, summary

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN_MODES = os.path.join(ROOT, "scripts", "run_modes.sh")


FAKE_TRAINER = r'''#!PYTHON
# Fake train_gpt2_adahop: the real trainer's main.log and main.jsonl (a run event per piece), checkpoint
# (state_%08d.bin via .tmp) and -y 1 resume behaviour, losses a pure function of (mode, seed, step). FAKE_STEP_SLEEP: seconds per step; FAKE_FAIL=1: exit 1.
# FAKE_SPANS: a file that gets "<run dir> <CUDA_VISIBLE_DEVICES> <start time> <end time>" when the trainer ends.
import math, os, re, sys, time
t_begin = time.time()
a = dict(zip(sys.argv[1::2], sys.argv[2::2]))
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\n")
if os.environ.get("FAKE_FAIL") == "1":
    print("error: flag -i: no shard matches 'nope*'"); sys.exit(1)
out, x, n, v = a.get("-o"), int(a.get("-x", 200)), int(a.get("-n", 0)), int(a.get("-v", 50))
mode, seed = a.get("-p", "adahop"), int(a.get("-r", 1337))
sleep = float(os.environ.get("FAKE_STEP_SLEEP", "0"))
start = 0
if a.get("-y") == "1" and out and os.path.isdir(out):
    st = [int(m.group(1)) for f in os.listdir(out) for m in [re.match(r"state_(\d+)\.bin$", f)] if m]
    start = max(st) if st else 0
os.makedirs(out, exist_ok=True)
log = open(os.path.join(out, "main.log"), "a" if start > 0 else "w")
jl = open(os.path.join(out, "main.jsonl"), "a" if start > 0 else "w")
jl.write('{"event":"run","start_step":%d}\n' % start); jl.flush()
off = {"bf16": 0.0, "mxfp4": 0.05, "hadamard": 0.03, "adahop": 0.01}[mode] + 0.001 * (seed % 7)
for step in range(start, x + 1):
    last = step == x
    if n > 0 and step > start and (step % n == 0 or last):
        p = os.path.join(out, "state_%08d.bin" % step)
        open(p + ".tmp", "w").write("ckpt %d\n" % step); os.rename(p + ".tmp", p)
    if v > 0 and (step % v == 0 or last):
        log.write("s:%d vl:%.6f\n" % (step, 3 + 8 * math.exp(-step / 10) + off)); log.flush()
        jl.write('{"event":"val","step":%d,"val_loss":%.6f}\n' % (step, 3 + 8 * math.exp(-step / 10) + off)); jl.flush()
    if "-E" in a and ((int(a.get("-V", 0)) > 0 and step % int(a["-V"]) == 0) or last):
        log.write("s:%d hellaswag:%.6f\n" % (step, 0.25 + step / 1000)); log.flush()
        jl.write('{"event":"eval","step":%d,"hellaswag":%.6f}\n' % (step, 0.25 + step / 1000)); jl.flush()
    if last:
        break
    time.sleep(sleep)
    if mode == "adahop" and step + 1 == 3:
        log.write("adahop step 3 layer 0 qkv fwd: MXFP4 -> IHT\n")
    log.write("s:%d tl:%.6f lr:1.0e-03 norm:0.5 tok/s:%d mem_gib:1.000\n" % (step + 1, 3 + 8 * math.exp(-(step + 1) / 10) + off, 1000 + step))
    log.flush()
    jl.write('{"event":"step","step":%d,"loss":%.6f,"tok_s":%d}\n' % (step + 1, 3 + 8 * math.exp(-(step + 1) / 10) + off, 1000 + step))
    jl.flush()
if os.environ.get("FAKE_SPANS"):
    with open(os.environ["FAKE_SPANS"], "a") as f:
        f.write("%s %s %.3f %.3f\n" % (out, os.environ.get("CUDA_VISIBLE_DEVICES", "-"), t_begin, time.time()))
'''


def events(d):
    """the step and val lines of d/main.jsonl (the run events differ between one run and its pieces)"""
    return [ln for ln in open(os.path.join(d, "main.jsonl")) if not ln.startswith('{"event":"run"')]


def json_steps(d):
    return [json.loads(ln)["step"] for ln in events(d) if ln.startswith('{"event":"step"')]


def test_run_modes(tmp):
    fake = os.path.join(tmp, "fake_trainer.py")
    with open(fake, "w") as f:
        f.write(FAKE_TRAINER.replace("PYTHON", sys.executable))
    os.chmod(fake, 0o755)
    calls = os.path.join(tmp, "calls.txt")
    env = {"FAKE_CALLS": calls, "FAKE_STEP_SLEEP": "0.02"}
    rm = ["bash", RUN_MODES]

    def ncalls():
        return sum(1 for _ in open(calls)) if os.path.exists(calls) else 0

    # argument handling
    rc, out, err = run(rm + ["-h"])
    check(rc == 0 and "Usage" in out and "--minutes" in out, "run_modes.sh -h prints the usage")
    for args, msg, what in [
            ([], "--root DIR is required", "missing --root"),
            (["--root", tmp, "--bogus"], "unknown argument '--bogus'", "unknown flag"),
            (["--root", tmp, "--modes", "bf16,fp8"], "'fp8' is not one of", "bad --modes"),
            (["--root", tmp, "--steps", "0"], "--steps '0'", "bad --steps"),
            (["--root", tmp, "--minutes", "abc"], "--minutes 'abc'", "bad --minutes"),
            (["--root", tmp, "--seed"], "--seed needs a value", "flag without value"),
            (["--root", tmp, "--seeds", "1,2,1"], "names a seed twice", "a seed twice in --seeds"),
            (["--root", tmp, "--seeds", "1,x"], "--seeds: 'x' is not", "bad --seeds"),
            (["--root", tmp, "--data-seed", "-3"], "--data-seed '-3'", "bad --data-seed"),
            (["--root", tmp, "--", "-D", "5"], "set by run_modes.sh", "trainer flag -D refused"),
            (["--root", tmp, "--", "-r", "5"], "set by run_modes.sh", "trainer flag -r refused"),
            (["--root", tmp, "--", "-o", "x"], "set by run_modes.sh", "trainer flag -o refused"),
            (["--root", tmp, "--", "-p", "bf16"], "set by run_modes.sh", "trainer flag -p refused"),
            (["--root", tmp, "--", "-x"], "needs a value", "trainer flag without value"),
            (["--root", tmp, "--", "-J", "1"], "unknown trainer flag -J", "unknown trainer flag"),
            (["--root", tmp, "--", "-x", "ten"], "-x 'ten'", "bad -x"),
            (["--root", tmp, "--steps", "5", "--", "-x", "10"], "pass a checkpoint interval", "--steps without -n"),
            (["--root", tmp, "--steps", "2", "--", "-x", "10", "-n", "4"], "smaller than the checkpoint interval", "--steps < -n"),
            (["--root", tmp, "--trainer", os.path.join(tmp, "missing_bin")], "not found or not executable", "missing trainer binary")]:
        rc, out, err = run(rm + args, env={"ADAHOP_TRAINER": fake, **env})
        check(rc == 2 and msg in err, f"run_modes.sh error: {what}", f"rc={rc} stderr={err.strip()}")
    rc, out, err = run(rm + ["--root", os.path.join(tmp, "x")], env={"ADAHOP_TRAINER": os.path.join(tmp, "nope"), **env})
    check(rc == 2 and "make train_gpt2_adahop" in err, "missing trainer (ADAHOP_TRAINER): says how to build it", err)

    # dry run: one command per run, nothing executed
    root = os.path.join(tmp, "r1")
    rc, out, err = run(rm + ["--root", root, "--seeds", "1337,42", "--dry-run", "--trainer", fake, "--", "-x", "10", "-n", "2"], env=env)
    cmds = [l for l in out.splitlines() if "fake_trainer.py" in l]
    want = [f"-x 10 -n 2 -a 0 -p {m} -r {s} -D 1337 -o {root}/{m}_s{s} -y 1" for s in (1337, 42)
            for m in ("bf16", "mxfp4", "hadamard", "adahop")]
    check(rc == 0 and len(cmds) == 8 and all(w in c for w, c in zip(want, cmds)) and ncalls() == 0 and not os.path.exists(root),
          "--dry-run prints 8 commands (4 modes at seed 1337, then at 42; data seed 1337 and -a 0 for all), runs nothing",
          out + err)
    rc, out, err = run(rm + ["--root", root, "--modes", "bf16", "--data-seed", "9", "--dry-run", "--trainer", fake, "--",
                             "-x", "10", "-a", "1"], env=env)
    check(rc == 0 and "-x 10 -a 1 -p bf16 -r 1337 -D 9 -o" in out and "-a 0" not in out,
          "--data-seed 9 gives -D 9; an -a of the flags stays, without another", out + err)

    # the reference: one uninterrupted run per mode
    targs = ["-x", "10", "-n", "2", "-v", "5", "-s", "0", "-E", "evals", "-V", "4"]   # evals at the piece ends 4 and 8
    ref, ref_json = {}, {}
    for m, s in [("bf16", 1337), ("adahop", 1337), ("bf16", 42), ("adahop", 42)]:
        d = os.path.join(tmp, "ref", f"{m}_s{s}")
        subprocess.run([fake] + targs + ["-p", m, "-r", str(s), "-o", d], env={**os.environ, **env}, check=True)
        ref[f"{m}_s{s}"] = open(os.path.join(d, "main.log")).read()
        ref_json[f"{m}_s{s}"] = events(d)

    # pieces of 4 steps: 10 steps = 3 invocations; the 4th finds everything finished
    base = rm + ["--root", root, "--modes", "bf16,adahop", "--seeds", "1337,42", "--steps", "4", "--keep", "1", "--poll", "0.05",
                 "--trainer", fake, "--"] + targs
    codes = []
    for k in range(3):   # 0.1 s per step: a 2-step checkpoint interval outlasts the 0.05 s poll
        rc, out, err = run(base, env={**env, "FAKE_STEP_SLEEP": "0.1"})
        codes.append(rc)
        print(f"  [invocation {k + 1}] " + out.replace("\n", "\n  "))
        if k < 2:
            ok = True
            for name in ref:
                d = os.path.join(root, name)
                steps = [int(x.split()[0][2:]) for x in open(os.path.join(d, "main.log")) if " tl:" in x]
                ckpts = sorted(f for f in os.listdir(d) if f.startswith("state_"))
                ok = ok and steps and steps[-1] == 4 * (k + 1) and ckpts == ["state_%08d.bin" % (4 * (k + 1))]
                ok = ok and json_steps(d)[-1] == 4 * (k + 1)
            check(ok, f"invocation {k + 1}: every run stopped at step {4 * (k + 1)}, logs cut there, older checkpoints deleted (--keep 1)")
    check(codes == [3, 3, 0], "exit status 3 (runs remain), 3, then 0 (all finished)", str(codes))
    same = all(open(os.path.join(root, n, "main.log")).read() == ref[n] for n in ref)
    check(same, "3 pieces add up to exactly the main.log of one uninterrupted run (each run)")
    same = all(events(os.path.join(root, n)) == ref_json[n] for n in ref)
    check(same, "3 pieces add up to exactly the main.jsonl steps, vals and evals of one uninterrupted run (each run)")
    n0 = ncalls()
    rc, out, err = run(base, env=env)
    check(rc == 0 and out.count("already finished") == 4 and ncalls() == n0, "4th invocation: all 4 runs 'already finished', trainer not started", out)

    # finished detection from main.log alone (no checkpoints, written by hand)
    d = os.path.join(tmp, "r2", "mxfp4_s1337")
    os.makedirs(d)
    open(os.path.join(d, "main.log"), "w").write(ref["bf16_s1337"])
    n0 = ncalls()
    rc, out, err = run(rm + ["--root", os.path.join(tmp, "r2"), "--modes", "mxfp4", "--trainer", fake, "--"] + targs, env=env)
    check(rc == 0 and "already finished" in out and ncalls() == n0, "finished run detected from main.log (final train + val line)", out + err)
    lines = ref["bf16_s1337"].splitlines(True)
    for cut, what in [("s:10 vl:", "val"), ("s:10 hellaswag:", "eval")]:
        open(os.path.join(d, "main.log"), "w").write("".join(l for l in lines if not l.startswith(cut)))
        rc, out, err = run(rm + ["--root", os.path.join(tmp, "r2"), "--modes", "mxfp4", "--dry-run", "--trainer", fake, "--"] + targs, env=env)
        check(rc == 0 and "already finished" not in out and "-p mxfp4" in out, f"main.log without the final {what} line: not finished", out)

    # other trainer flags for a started run: refused
    rc, out, err = run(rm + ["--root", root, "--modes", "bf16", "--trainer", fake, "--", "-x", "12", "-n", "2", "-v", "5", "-s", "0"], env=env)
    check(rc == 1 and "other trainer flags" in err, "a run started with other flags is refused (exit 1)", out + err)

    # a failing trainer is reported
    rc, out, err = run(rm + ["--root", os.path.join(tmp, "r3"), "--modes", "bf16", "--trainer", fake, "--"] + targs,
                       env={**env, "FAKE_FAIL": "1"})
    check(rc == 1 and "trainer exited with status 1" in err and "no shard matches" in err, "failing trainer: status and its last lines", err)

    # a second invocation on the same root is refused; SIGTERM stops the trainer and cuts the log to the checkpoint
    root5 = os.path.join(tmp, "r5")
    cmd5 = rm + ["--root", root5, "--modes", "bf16", "--poll", "0.05", "--trainer", fake, "--", "-x", "100", "-n", "4", "-s", "0"]
    first = subprocess.Popen(cmd5, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **env, "FAKE_STEP_SLEEP": "0.05"})
    d5 = os.path.join(root5, "bf16_s1337")
    for _ in range(200):   # until the first checkpoints exist
        if os.path.exists(os.path.join(d5, "state_00000008.bin")):
            break
        time.sleep(0.05)
    rc, out, err = run(cmd5, env=env)
    check(rc == 2 and "another run_modes.sh is working on" in err, "a second invocation on the same root is refused", err)
    rc, out, err = run(rm + ["--root", root5, "--modes", "mxfp4", "--trainer", fake, "--", "-x", "4", "-n", "4", "-s", "0"], env=env)
    check(rc == 0 and "mxfp4_s1337: finished" in out, "another run on the same root trains beside a running one (a lock a run)", out + err)
    first.terminate()
    out1, err1 = first.communicate(timeout=30)
    steps = [int(x.split()[0][2:]) for x in open(os.path.join(d5, "main.log")) if " tl:" in x]
    ck = max(int(f[6:14]) for f in os.listdir(d5) if re.match(r"state_\d+\.bin$", f))
    alive = shutil.which("pgrep") is not None and \
        subprocess.run(["pgrep", "-f", f"-o {d5} -y 1"], capture_output=True).returncode == 0
    check(first.returncode == 130 and "interrupted" in err1 and steps[-1] == ck and json_steps(d5)[-1] == ck and not alive,
          f"SIGTERM: exit 130, trainer stopped, main.log and main.jsonl cut at checkpoint {ck}",
          f"rc={first.returncode} {err1} steps={steps[-3:]} json={json_steps(d5)[-3:]} alive={alive}")

    # wall-clock pieces: 40 steps of 0.05 s, 1.5 s per invocation; all pieces add up to one run
    root4 = os.path.join(tmp, "r4")
    targs4 = ["-x", "40", "-n", "4", "-v", "8", "-s", "0"]
    subprocess.run([fake] + targs4 + ["-p", "bf16", "-r", "1337", "-o", os.path.join(tmp, "ref4")],
                   env={**os.environ, **env, "FAKE_STEP_SLEEP": "0"}, check=True)
    ref4 = open(os.path.join(tmp, "ref4", "main.log")).read()
    ref4_json = events(os.path.join(tmp, "ref4"))
    codes, times, consistent = [], [], True
    for _ in range(20):
        t0 = time.time()
        rc, out, err = run(rm + ["--root", root4, "--modes", "bf16", "--minutes", "0.025", "--poll", "0.05", "--trainer", fake,
                                 "--"] + targs4, env={**env, "FAKE_STEP_SLEEP": "0.05"})
        times.append(time.time() - t0)
        codes.append(rc)
        d = os.path.join(root4, "bf16_s1337")
        if rc == 3:   # log ends at the newest checkpoint
            steps = [int(x.split()[0][2:]) for x in open(os.path.join(d, "main.log")) if " tl:" in x]
            ck = max(int(f[6:14]) for f in os.listdir(d) if re.match(r"state_\d+\.bin$", f))
            consistent = consistent and steps[-1] == ck
        if rc != 3:
            break
    print(f"  --minutes pieces: exit codes {codes}, seconds {[round(t, 1) for t in times]}")
    check(codes[-1] == 0 and len(codes) >= 2 and all(c == 3 for c in codes[:-1]), "--minutes: several pieces, then finished", str(codes))
    check(max(times) < 1.5 + 3.0, "--minutes 0.025: every invocation ends near its 1.5 s budget", str(times))
    check(consistent, "--minutes: after each piece main.log ends at the newest checkpoint")
    check(open(os.path.join(root4, "bf16_s1337", "main.log")).read() == ref4 and events(os.path.join(root4, "bf16_s1337")) == ref4_json,
          "--minutes pieces add up to exactly one uninterrupted run (main.log and main.jsonl)")


def test_run_modes_gpus(tmp):
    """run_modes.sh --gpus: the runs side by side, one a GPU, never two at once on one GPU; the same logs as one at a time"""
    fake = os.path.join(tmp, "fake_trainer.py")   # written by test_run_modes
    rm = ["bash", RUN_MODES]
    env = {"FAKE_CALLS": os.path.join(tmp, "calls_gpus.txt"), "FAKE_STEP_SLEEP": "0"}
    for gpus, msg in [("0,x", "'x' is not a device number"), ("1,1", "names a device twice"), ("", "--gpus is empty")]:
        rc, out, err = run(rm + ["--root", tmp, "--gpus", gpus, "--trainer", fake], env=env)
        check(rc == 2 and msg in err, f"--gpus '{gpus}' refused", f"rc={rc} {err}")
    targs = ["-x", "10", "-n", "5", "-v", "5", "-s", "0"]
    runs = [(m, s) for s in (1337, 42, 7) for m in ("bf16", "mxfp4")]
    ref = {}
    for m, s in runs:
        d = os.path.join(tmp, "ref_gpus", f"{m}_s{s}")
        subprocess.run([fake] + targs + ["-p", m, "-r", str(s), "-o", d], env={**os.environ, **env}, check=True)
        ref[f"{m}_s{s}"] = open(os.path.join(d, "main.log")).read()
    root = os.path.join(tmp, "r_gpus")
    sel = ["--modes", "bf16,mxfp4", "--seeds", "1337,42,7"]   # 6 runs
    rc, out, err = run(rm + ["--root", root] + sel + ["--gpus", "3,5", "--dry-run", "--trainer", fake, "--"] + targs, env=env)
    check(rc == 0 and out.count("fake_trainer.py") == 6 and out.count("GPU 3:") == 3 and out.count("GPU 5:") == 3
          and not os.path.exists(root), "--gpus --dry-run: the 6 commands, GPUs taken in turn, nothing run", out + err)
    spans = os.path.join(tmp, "spans.txt")
    rc, out, err = run(rm + ["--root", root] + sel + ["--gpus", "3,5,7", "--poll", "0.05", "--trainer", fake, "--"] + targs,
                       env={**env, "FAKE_STEP_SLEEP": "0.1", "FAKE_SPANS": spans})
    print("  " + out.replace("\n", "\n  "))
    check(rc == 0 and out.count("run_modes.sh exited with status 0") == 6, "--gpus 3,5,7: 6 runs finished, exit 0", out + err)
    same = all(open(os.path.join(root, n, "main.log")).read() == ref[n] for n in ref)
    check(same, "--gpus: every run's main.log as when trained alone")
    sp = [ln.split() for ln in open(spans)] if os.path.exists(spans) else []
    devices = {d for _, d, _, _ in sp}
    overlap_same = any(a[1] == b[1] and float(a[2]) < float(b[3]) and float(b[2]) < float(a[3])
                       for i, a in enumerate(sp) for b in sp[i + 1:])
    most = max((sum(1 for b in sp if float(b[2]) <= float(a[2]) < float(b[3])) for a in sp), default=0)
    check(len(sp) == 6 and devices <= {"3", "5", "7"} and not overlap_same and 2 <= most <= 3,
          "--gpus: each run on one of GPUs 3, 5, 7, never two at once on a GPU, 2-3 at a time",
          f"spans={sp} most={most}")
    rc, out, err = run(rm + ["--root", root] + sel + ["--gpus", "0,1", "--trainer", fake, "--"] + targs, env=env)
    check(rc == 0 and out.count("already finished") == 6, "--gpus again: every run already finished", out + err)
    # --minutes bounds the whole invocation: pieces (exit 3) until every run is finished, the logs as one run's
    root2, targs2 = os.path.join(tmp, "r_gpus2"), ["-x", "30", "-n", "4", "-v", "8", "-s", "0"]
    ref2 = {}
    for m in ["bf16", "adahop"]:
        d = os.path.join(tmp, "ref_gpus2", f"{m}_s1337")
        subprocess.run([fake] + targs2 + ["-p", m, "-r", "1337", "-o", d], env={**os.environ, **env}, check=True)
        ref2[f"{m}_s1337"] = open(os.path.join(d, "main.log")).read()
    codes = []
    for _ in range(20):
        rc, out, err = run(rm + ["--root", root2, "--modes", "bf16,adahop", "--gpus", "0,1", "--minutes", "0.02", "--poll", "0.05",
                                 "--trainer", fake, "--"] + targs2, env={**env, "FAKE_STEP_SLEEP": "0.05"})
        codes.append(rc)
        if rc != 3:
            break
    same = all(open(os.path.join(root2, n, "main.log")).read() == ref2[n] for n in ref2)
    check(len(codes) >= 2 and codes[-1] == 0 and all(c == 3 for c in codes[:-1]) and same,
          "--gpus --minutes: pieces (exit 3), then finished; each main.log as one uninterrupted run", str(codes))


def test_long_runs(tmp):
    """scripts/long_runs.sh: each set's runs and flags through run_modes.sh --dry-run; --modes / --seeds pick runs; bad sets"""
    fake = os.path.join(tmp, "fake_trainer.py")   # written by test_run_modes; --dry-run never starts it
    lr = ["bash", os.path.join(ROOT, "scripts", "long_runs.sh")]
    env = {"DATA": "/d", "EVALS": "/e"}

    def commands(args):
        rc, out, err = run(lr + args + ["--dry-run", "--trainer", fake], env=env)
        return rc, [c for c in out.splitlines() if "fake_trainer.py" in c], out + err

    rc, cmds, out = commands(["llama", tmp])
    flags = "-e llama:d12 -b 64 -C iht -t 1024 -d 524288 -x 600 -l 6e-4 -u 30 -q 0.1 -v 50 -m -1 -f 1 -n 100 -s 0 -a 0 -E /e " \
            "-V 0 -i /d/long_train_\\*.bin -j /d/long_val_\\*.bin"
    runs = [(m, s) for s in (1337, 42, 7) for m in ("bf16", "mxfp4", "hadamard", "adahop")]
    check(rc == 0 and len(cmds) == 12 and all(flags in c and f"-p {m} -r {s} -D 1337 -o {tmp}/llama/{m}_s{s} -y 1" in c
                                              for c, (m, s) in zip(cmds, runs)),
          "long_runs.sh llama: 4 modes x init seeds 1337, 42, 7, seed by seed, data seed 1337, the set's flags", out)
    rc, cmds, out = commands(["gpt2_head", tmp])
    check(rc == 0 and len(cmds) == 6 and all("-e d12 -b 32 -H 1 " in c for c in cmds) and "-p bf16 -r 1337 " in cmds[0]
          and "-p adahop -r 1337 " in cmds[1], "long_runs.sh gpt2_head: bf16 and adahop with -H 1 at B=32, 3 seeds", out)
    rc, cmds, out = commands(["llama_frozen", tmp])
    check(rc == 0 and len(cmds) == 3 and all("-b 64 -R 0 " in c and "-p adahop" in c for c in cmds),
          "long_runs.sh llama_frozen: adahop with -R 0, 3 seeds", out)
    rc, cmds, out = commands(["gpt2_cplain", tmp])
    check(rc == 0 and len(cmds) == 3 and all("-b 64 -C plain " in c for c in cmds), "long_runs.sh gpt2_cplain: adahop with -C plain", out)
    rc, cmds, out = commands(["gpt2", tmp, "--modes", "adahop", "--seeds", "42"])
    check(rc == 0 and len(cmds) == 1 and "-p adahop -r 42 -D 1337" in cmds[0], "long_runs.sh gpt2 --modes adahop --seeds 42: that run alone", out)
    rc, cmds, out = commands(["gpt2", tmp, "--data-seed", "5", "--modes", "bf16"])
    check(rc == 0 and len(cmds) == 3 and all("-D 5 " in c for c in cmds), "long_runs.sh gpt2 --data-seed 5: the caller's data seed", out)
    rc, out, err = run(lr + ["gpt2", tmp, "--gpus", "2,3", "--dry-run", "--trainer", fake], env=env)
    check(rc == 0 and out.count("fake_trainer.py") == 12 and out.count("GPU 2:") == 6 and "-e d12 -b 64 " in out,
          "long_runs.sh gpt2 --gpus 2,3: the set's 12 runs spread over GPUs 2 and 3", out + err)
    rc, out, err = run(lr + ["gpt3", tmp], env=env)
    check(rc == 2 and "unknown SET 'gpt3'" in err, "long_runs.sh: an unknown set is refused (exit 2)", err)
    rc, out, err = run(lr + ["-h"])
    check(rc == 0 and "llama_head" in out, "long_runs.sh -h lists the sets")


def main():
    tmp = tempfile.mkdtemp(prefix="test_run_modes_")
    try:
        test_run_modes(tmp)
        test_run_modes_gpus(tmp)
        test_long_runs(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary("test_run_modes")


if __name__ == "__main__":
    sys.exit(main())
