#!/usr/bin/env python3
"""CPU test of dev/bench_sdpa.py's --ours part and of dev/ab_flash.sh (no GPU): the parser of test_flash_wgmma's
bench table (rows of the three passes kept, headers, other tables and non-numbers left out), the medians over rounds
of a fake test_flash_wgmma (a shell script that prints another table each round), a failing or silent binary stopping
with a clear error, the combined table's ratios, and --ours with another --T refused; ab_flash.sh with two fake
builds: each build's median wgmma ms over the rounds and its ratio to the first's. Prints "N passed, N failed"; exits
1 on a failure."""
import os
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_sdpa  # noqa: E402
from pycheck import check, summary  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "bench_sdpa.py")
AB_FLASH = os.path.join(os.path.dirname(__file__), "..", "ab_flash.sh")


def table(mma, wg):
    """a test_flash_wgmma bench table of one shape with these forward / backward ms"""
    rows = ["", "| B, T, NH, HS | pass | mma.sync ms | TFLOP/s | wgmma ms | TFLOP/s | speed-up |", "|---|---|---:|---:|---:|---:|---:|"]
    for p, (a, b) in zip(("forward", "backward"), zip(mma, wg)):
        rows.append(f"| 32, 1024, 16, 64 | {p} | {a:.3f} | 200 | {b:.3f} | 240 | {a / b:.2f}x |")
    rows.append(f"| 32, 1024, 16, 64 | forward + backward | {sum(mma):.3f} | | {sum(wg):.3f} | | 1.30x |")
    return "\n".join(rows) + "\n"


def fake_binary(tmp, tables, exit_code=0):
    """a script printing tables[k] on its k-th call with 'bench-only' (a counter file beside it)"""
    for k, t in enumerate(tables):
        with open(os.path.join(tmp, f"table{k}"), "w") as f:
            f.write(t)
    path = os.path.join(tmp, "fake_flash")
    with open(path, "w") as f:
        f.write(f"""#!/bin/sh
[ "$1" = bench-only ] || exit 9
n=$(cat {tmp}/count 2>/dev/null || echo 0); echo $((n + 1)) > {tmp}/count
cat {tmp}/table$n 2>/dev/null
exit {exit_code}
""")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def main():
    text = table((0.30, 1.00), (0.25, 0.80)) + "| 1 | 2 |\n| 32, 1024, 16, 64 | forward | n/a | 1 | 2 | 3 | 4 |\nnoise\n"
    rows = bench_sdpa.parse_bench(text)
    check(rows == {("32, 1024, 16, 64", "forward"): (0.30, 0.25), ("32, 1024, 16, 64", "backward"): (1.00, 0.80),
                   ("32, 1024, 16, 64", "forward + backward"): (1.30, 1.05)},
          "parse_bench keeps the three passes' mma.sync and wgmma ms, leaves out headers and bad rows", str(rows))
    check(bench_sdpa.parse_bench("no table here\n") == {}, "parse_bench of text without a table is empty")

    with tempfile.TemporaryDirectory() as tmp:
        fake = fake_binary(tmp, [table((0.30, 1.00), (0.25, 0.80)), table((0.50, 1.20), (0.20, 0.90)),
                                 table((0.40, 1.10), (0.30, 1.00))])
        ours = bench_sdpa.run_ours(fake, 3)
        want = {"forward": (0.40, 0.25), "backward": (1.10, 0.90), "forward + backward": (1.50, 1.10)}
        got = {k[1]: tuple(round(x, 6) for x in v) for k, v in ours.items()}
        check(got == want, "run_ours: per pass the medians over 3 rounds", str(got))

    for name, tables, code in (("exits non-zero", [table((0.3, 1.0), (0.25, 0.8))], 1), ("prints no table", ["nothing\n"], 0)):
        with tempfile.TemporaryDirectory() as tmp:
            fake = fake_binary(tmp, tables, code)
            try:
                bench_sdpa.run_ours(fake, 1)
                msg = None
            except SystemExit as e:
                msg = str(e.code)
            check(msg is not None and "bench-only failed" in msg, f"run_ours stops with an error when the binary {name}", str(msg))
    try:
        bench_sdpa.run_ours("/nonexistent/test_flash_wgmma", 1)
        msg = None
    except SystemExit as e:
        msg = str(e.code)
    check(msg is not None and "cannot run" in msg, "run_ours stops with an error when the binary does not exist", str(msg))

    ours = {("32, 1024, 16, 64", "forward"): (0.30, 0.25), ("32, 1024, 16, 64", "backward"): (1.00, 0.80)}
    sdpa = {("32, 1024, 16, 64", "forward"): 0.50, ("32, 1024, 16, 64", "backward"): 1.20}
    lines = bench_sdpa.combined_table(ours, sdpa)
    check(len(lines) == 4 and lines[2] == "| 32, 1024, 16, 64 | forward | 0.300 | 0.250 | 0.500 | 1.20x | 2.00x |"
          and lines[3] == "| 32, 1024, 16, 64 | backward | 1.000 | 0.800 | 1.200 | 1.25x | 1.50x |",
          "combined_table: ms and the wgmma speed-ups over mma.sync and SDPA", "\n".join(lines))
    check(len(bench_sdpa.combined_table(ours, {})) == 2, "combined_table leaves out shapes SDPA did not time")

    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "a"))
        os.mkdir(os.path.join(tmp, "b"))
        base = fake_binary(os.path.join(tmp, "a"), [table((0.30, 1.00), (0.20, 0.80)), table((0.30, 1.00), (0.24, 0.80))])
        new = fake_binary(os.path.join(tmp, "b"), [table((0.30, 1.00), (0.10, 0.40)), table((0.30, 1.00), (0.12, 0.40))])
        done = subprocess.run(["bash", AB_FLASH, base, new], capture_output=True, text=True,
                              env=dict(os.environ, REPS="2", PYTHON=sys.executable))
        fwd = next((ln for ln in done.stdout.splitlines() if "| forward |" in ln), "")
        check(done.returncode == 0 and fwd.replace(" ", "") == "|32,1024,16,64|forward|0.300|0.220|1.000x|0.110|2.000x|",
              "ab_flash.sh: medians over 2 rounds and the ratios to the first build", done.stdout + done.stderr)

    done = subprocess.run([sys.executable, SCRIPT, "--ours", "x", "--T", "512"], capture_output=True, text=True)
    check(done.returncode != 0 and "T = 1024" in done.stderr, "--ours with --T 512 is refused", done.stderr)
    done = subprocess.run([sys.executable, SCRIPT, "--rounds", "0"], capture_output=True, text=True)
    check(done.returncode != 0 and "must be positive" in done.stderr, "--rounds 0 is refused", done.stderr)
    return summary("test_bench_sdpa")


if __name__ == "__main__":
    sys.exit(main())
