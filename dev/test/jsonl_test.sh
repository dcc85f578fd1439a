#!/usr/bin/env bash
# The GPU trainer's main.jsonl (needs a GPU): 16 steps of INIT in adahop with a 4-step calibration and a
# re-classification every 8 steps, validation every 4; dev/test/check_jsonl.py compares every event with
# main.log and recomputes the FLOPs per token and MFU; scripts/plot_losses.py reads the run from main.jsonl.
# usage: jsonl_test.sh [INIT]   INIT is the trainer's -e: d6 (the default) or e.g. llama:d8
set -uo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
init=${1:-d6}
out=${OUT:-build}/jsonl/${init//:/_}
rm -rf "$out" && mkdir -p "$out"
if ! ./train_gpt2_adahop -e "$init" -b 8 -t 256 -x 16 -u 2 -v 4 -m 2 -s 0 -w 4 -R 8 -W 2 -o "$out" > "$out/train.txt" 2>&1; then
    echo "jsonl_test $init: the trainer failed"; tail -5 "$out/train.txt"; exit 1
fi
grep -m 2 -e 'MFU' "$out/train.txt"
$PYTHON dev/test/check_jsonl.py "$out" || exit 1
$PYTHON scripts/plot_losses.py "$out" --no-plot | tee "$out/table.txt"
# the run's row has an MFU and a GPU (columns found by their header names)
awk -v run="${out##*/}" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i }
    $1 == run && col["mfu_%"] && col["gpu"] && $col["mfu_%"] != "n/a" && $col["gpu"] != "n/a" { found = 1 }
    END { exit !found }' "$out/table.txt" ||
    { echo "jsonl_test $init: plot_losses.py shows no MFU or no GPU for the run"; exit 1; }
echo "jsonl_test $init: passed"
