#!/usr/bin/env bash
# GPU test of the downstream evals (llmc/evals.h, train_gpt2_adahop -E/-V) against the independent scorer
# dev/eval_hf.py on the exported model:
#   1. the trainer scores MODEL standalone (-x 0 -E, BF16) and logs "s:0 <task>:<score> ..." to main.log;
#   2. dev/export_hf.py exports MODEL (bf16) and dev/eval_hf.py scores it in transformers (FP32 compute on the GPU);
#      every task's score (acc_norm; LAMBADA acc) agrees within 0.2 points or one example (a near tie may flip between
#      BF16 and FP32), its gold log-likelihood within 1%,
#      LAMBADA perplexity within 2%;
#   3. a short d6 run with -V 5 -x 10 logs the evals at steps 0, 5 and 10, every task on each line, writes the same
#      scores as "eval" events into main.jsonl (dev/test/check_jsonl.py), and scripts/plot_losses.py tabulates the
#      last eval of the run.
# usage: dev/test/evals_gpu_test.sh MODEL.bin EVAL_DIR   (EVAL_DIR: files of dev/data/prepare_evals.py;
#        MODEL: a trained d12 model or training state, e.g. the state_*.bin of a run with -o)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
model=${1:?usage: $0 MODEL.bin EVAL_DIR}; evals=${2:?usage: $0 MODEL.bin EVAL_DIR}
out=build/evals_gpu_test
rm -rf "$out"; mkdir -p "$out"
source dev/test/nccl_path.sh ./train_gpt2_adahop

./train_gpt2_adahop -e "$model" -x 0 -p bf16 -b 16 -t 1024 -v 0 -s 0 -E "$evals" -o "$out/ours"
$PYTHON dev/export_hf.py "$model" "$out/hf" --dtype bf16
$PYTHON dev/eval_hf.py "$out/hf" "$evals" --max-len 1024 --batch 32 --device cuda --dtype float32 --json "$out/hf.json"
$PYTHON - "$out/ours/main.log" "$out/hf.json" <<'PY'
import json, sys
line = [l for l in open(sys.argv[1]) if l.startswith("s:0 ")][-1].split()[1:]
ours = {k: float(v) for k, v in (kv.split(":") for kv in line)}
hf = json.load(open(sys.argv[2]))
fails = 0
for task, r in sorted(hf.items()):
    theirs = r["acc_norm"]
    tol = max(0.002, 1.0 / r["examples"])   # 0.2 points, or one example: a near tie may flip between BF16 and FP32
    ok = task in ours and abs(ours[task] - theirs) <= tol + 1e-9
    print(f"{'ok  ' if ok else 'FAIL'} {task:<11} engine {ours.get(task, float('nan')):.4f} transformers {theirs:.4f} "
          f"(diff {100 * (ours.get(task, 0) - theirs):+.2f} points, tol {100 * tol:.2f})")
    fails += not ok
    ll = ours.get(task + "_ll", float("nan"))
    ok = abs(ll - r["ll"]) <= 0.01 * abs(r["ll"])
    print(f"{'ok  ' if ok else 'FAIL'} {task}_ll  engine {ll:.4f} transformers {r['ll']:.4f} (gold log-likelihood, tol 1%)")
    fails += not ok
    if task + "_ppl" in ours:
        ok = abs(ours[task + "_ppl"] / r["ppl"] - 1) <= 0.02
        print(f"{'ok  ' if ok else 'FAIL'} {task}_ppl  engine {ours[task + '_ppl']:.3f} transformers {r['ppl']:.3f} (tol 2%)")
        fails += not ok
if len(hf) < 5:
    print(f"FAIL only {len(hf)} tasks in the eval folder (want the 5 of prepare_evals.py)")
    fails += 1
print(f"evals vs transformers: {'all agree' if not fails else f'{fails} failed'}")
sys.exit(1 if fails else 0)
PY

./train_gpt2_adahop -e d6 -x 10 -V 5 -p bf16 -b 8 -t 256 -v 0 -s 0 -E "$evals" -o "$out/periodic" > "$out/periodic.txt"
tasks=$(ls "$evals"/*.bin | wc -l)
lines=$(grep -cE "^s:(0|5|10) .*_ppl:" "$out/periodic/main.log" || true)
keys=$(grep -E "^s:10 .*_ppl:" "$out/periodic/main.log" | grep -oE " [a-z_]+:" | grep -vcE "_(ppl|ll):" || true)
echo "periodic evals: $lines eval lines at steps 0, 5, 10 (want 3), $keys tasks on the last (want $tasks)"
[ "$lines" -eq 3 ] && [ "$keys" -eq "$tasks" ] || { echo "evals_gpu_test: periodic evals missing (lines or tasks)"; exit 1; }
$PYTHON dev/test/check_jsonl.py "$out/periodic"
$PYTHON scripts/plot_losses.py "$out/periodic" --no-plot | tee "$out/periodic_table.txt"
awk 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i }
    $1 ~ /^periodic/ && col["eval_step"] && $col["eval_step"] == "10" { found = 1 } END { exit !found }' "$out/periodic_table.txt" ||
    { echo "evals_gpu_test: plot_losses.py shows no eval step 10 for the run"; exit 1; }
echo "evals_gpu_test: all parts passed"
