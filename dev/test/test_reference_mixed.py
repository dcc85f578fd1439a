"""Tests the mixed-precision runs of the PyTorch oracles (dev/reference_gpt2.py and dev/reference_llama.py with
--dtype bfloat16), whose step losses set test_gpt2cu's per-step loss tolerance (-s): for a tiny model of each family,
the float64 and the bfloat16 run draw the same batch, the bfloat16 run's losses are finite, differ from the float64
ones (BF16 products took effect) and stay close to them at the first step (the same model), and a reference file
comes out of each run.

usage: python dev/test/test_reference_mixed.py   (from the repository root); needs torch (skips without it)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "dev", "test"))
from pycheck import check, summary  # noqa: E402
from skip_log import skip  # noqa: E402

HEADER_INTS = 256
FIRST_STEP_TOL = 0.05   # relative: a tiny model's first loss in BF16 products vs float64
MIN_DRIFT = 1e-5        # relative: below this over all steps, the bfloat16 run did not compute in BF16


def run(script, dtype, out):
    """one oracle run of a tiny model (10 AdamW steps) into the reference file out; returns (exit status, losses)"""
    cmd = [sys.executable, os.path.join(ROOT, "dev", script), "--preset", "tiny", "-B", "2", "-T", "16", "--seed", "1337",
           "--dtype", dtype, "--write-ref", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("losses ")]
    losses = np.array([float(v) for v in lines[0].split()[1:]]) if lines else np.array([])
    if p.returncode != 0:
        print(p.stderr[-2000:])
    return p.returncode, losses


def batch_bytes(path):
    """the inputs and targets of a reference file, as bytes"""
    with open(path, "rb") as f:
        h = np.frombuffer(f.read(HEADER_INTS * 4), dtype="<i4")
        return f.read(2 * int(h[2]) * int(h[3]) * 4)


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        skip("test_reference_mixed.py", "no torch in this Python")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        for script in ("reference_gpt2.py", "reference_llama.py"):
            f64, mixed = os.path.join(tmp, "f64.bin"), os.path.join(tmp, "mixed.bin")
            rc64, l64 = run(script, "float64", f64)
            rcm, lm = run(script, "bfloat16", mixed)
            check(rc64 == 0 and rcm == 0 and len(l64) == 10 and len(lm) == 10, f"{script}: float64 and bfloat16 runs, 10 losses each")
            if len(l64) != 10 or len(lm) != 10:
                continue
            check(batch_bytes(f64) == batch_bytes(mixed), f"{script}: both runs draw the same batch")
            rel = np.abs(lm - l64) / np.abs(l64)
            check(bool(np.all(np.isfinite(lm))), f"{script}: bfloat16 losses finite")
            check(rel.max() > MIN_DRIFT, f"{script}: bfloat16 losses differ from float64 (max rel. {rel.max():.2e})")
            check(rel[0] < FIRST_STEP_TOL, f"{script}: first loss within {FIRST_STEP_TOL:.0%} of float64 ({rel[0]:.2e})")
    return summary("test_reference_mixed")


if __name__ == "__main__":
    sys.exit(main())
