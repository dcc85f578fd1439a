#!/usr/bin/env bash
# Same-run attention speed of builds of dev/cuda/test_flash_wgmma.cu (e.g. main's kernels against a change's): REPS
# rounds in which every binary prints its bench table in turn ("bench-only": median of 20 per pass), so that drifts
# of the machine fall on all of them alike. Prints, per shape and pass, each binary's wgmma ms (median over the
# rounds) and its ratio to the first binary's, and the same for the mma.sync kernels of the first binary.
# Usage: [REPS=3] dev/ab_flash.sh BIN1 BIN2 [BIN ...]
#   e.g. dev/ab_flash.sh build/test_flash_wgmma_main build/test_flash_wgmma
# Exit status: 0 when every run printed its table, 1 otherwise, 2 on bad usage.
set -uo pipefail
usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] && { [ "$1" = -h ] || [ "$1" = --help ]; } && { usage; exit 0; }
[ $# -ge 2 ] || { usage >&2; exit 2; }
for bin in "$@"; do [ -x "$bin" ] || { echo "ab_flash.sh: '$bin' is not an executable file" >&2; exit 2; }; done
reps=${REPS:-3}
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "ab_flash.sh: REPS must be >= 1 (got '$reps')" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
for ((rep = 1; rep <= reps; rep++)); do
    for i in $(seq 0 $(($# - 1))); do
        bin=${@:$((i + 1)):1}
        if ! "$bin" bench-only > "$out/$i.$rep" 2>&1 || ! grep -q '^| [0-9]' "$out/$i.$rep"; then
            echo "ab_flash.sh: $bin bench-only failed (round $rep):" >&2; tail -5 "$out/$i.$rep" >&2; failed=1
        fi
    done
done
PYTHONPATH="$(dirname "$0")${PYTHONPATH:+:$PYTHONPATH}" ${PYTHON:-python3} - "$out" "$reps" "$@" <<'PY'
import statistics, sys
from bench_sdpa import parse_bench   # (shape, pass) -> (mma.sync ms, wgmma ms) of a bench table
out, reps, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def table(i, rep):
    try:
        with open(f"{out}/{i}.{rep}") as f:
            return parse_bench(f.read())
    except OSError:
        return {}
runs = [[table(i, r) for r in range(1, reps + 1)] for i in range(len(bins))]
keys = [k for k in runs[0][0]] if runs[0] and runs[0][0] else []
def med(i, k, col):
    v = [t[k][col] for t in runs[i] if k in t]
    return statistics.median(v) if v else None
print(f"wgmma ms, median of {reps} rounds (each a median of 20); ratio = first binary's ms / this one's")
print("| B, T, NH, HS | pass | mma.sync (" + bins[0] + ") | " + " | ".join(f"{b} | ratio" for b in bins) + " |")
print("|---|---|---:|" + "---:|---:|" * len(bins))
for k in keys:
    base = med(0, k, 1)
    cells = []
    for i in range(len(bins)):
        m = med(i, k, 1)
        cells += ["n/a", ""] if m is None else [f"{m:.3f}", f"{base / m:.3f}x" if base else ""]
    ms = med(0, k, 0)
    print(f"| {k[0]} | {k[1]} | {ms:.3f} | " + " | ".join(cells) + " |")
PY
exit $failed
