#!/usr/bin/env bash
# Whole-step training throughput of train_gpt2_adahop and of the PyTorch reference (dev/bench_torch_gpt2.py:
# BF16 autocast, torch.compile, flash SDPA, fused AdamW) on the same GPU in the same run, T=1024; when torchao is
# importable, also PyTorch with torchao's float8 training of the block linears (tensorwise and rowwise recipes).
# Usage: [PREC=bf16|mxfp4|hadamard|adahop] dev/bench_gpt2.sh [depth:batch ...]   (default 12:64 24:32 48:16;
# PREC, the precision of our block linears, defaults to bf16). Needs a GPU and PyTorch. The table goes to the
# terminal and, when both sides ran every model, to dev/results/bench_gpt2.md (RESULTS=folder elsewhere); a failure
# is a "-" in the table and exit status 1. MFU = model FLOPs per token (the trainer's count, attention included) x
# tok/s / the trainer's GPU peak (989 TFLOP/s), the same model work for both (PyTorch's needs our run's log).
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/test/nccl_path.sh ./train_gpt2_adahop   # NCCL may live only in PyTorch's wheels
source dev/bench_common.sh
command="$0${*:+ $*}"
PYTHON=${PYTHON:-python3}
configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=(12:64 24:32 48:16)
out=${OUT:-build}/bench
mkdir -p "$out"
steps=${STEPS:-20}
prec=${PREC:-bf16}
rm -f "$out/torch.jsonl"
recipes=(bf16)
$PYTHON -c 'import torchao.float8' 2> /dev/null && recipes+=(float8_tensorwise float8_rowwise)
declare -A ours ours_mem torch torch_mem logs
failed=0
for cfg in "${configs[@]}"; do
    d=${cfg%%:*}; b=${cfg##*:}
    log="$out/ours_d${d}.txt"
    logs[$cfg]=$log
    ./train_gpt2_adahop -e "d$d" -b "$b" -t 1024 -x "$steps" -u 0 -v 0 -s 0 -p "$prec" > "$log" 2>&1 || failed=1
    ours[$cfg]=$(sed -n 's/^summary: \([0-9]*\) tok\/s.*/\1/p' "$log")
    ours_mem[$cfg]=$(sed -n 's/^summary:.*| \([0-9.]*\) GiB allocated.*/\1/p' "$log")
    [ -n "${ours[$cfg]}" ] || failed=1
    echo "ours d$d B=$b: ${ours[$cfg]:-FAILED} tok/s, ${ours_mem[$cfg]:-?} GiB"; tail -n 2 "$log"
done
depths=(); batches=()
for cfg in "${configs[@]}"; do depths+=("${cfg%%:*}"); batches+=("${cfg##*:}"); done
$PYTHON dev/bench_torch_gpt2.py --depth "${depths[@]}" --batch "${batches[@]}" --seq 1024 --warmup 5 --steps "$steps" \
    --recipe "${recipes[@]}" --json "$out/torch.jsonl" > "$out/torch.txt" 2>&1 || { echo "PyTorch benchmark failed: see $out/torch.txt"; failed=1; }
# torch_field RECIPE DEPTH FIELD FORMAT: FIELD of the PyTorch run of RECIPE at DEPTH, if it ran
torch_field() {
    $PYTHON -c "import json; [print('$4' % r['$3']) for r in map(json.loads, open('$out/torch.jsonl'))
                 if r.get('recipe') == '$1' and r.get('depth') == $2 and r.get('status') == 'ok']" 2>/dev/null | head -1
}
for cfg in "${configs[@]}"; do
    d=${cfg%%:*}
    for r in "${recipes[@]}"; do
        torch[$r,$cfg]=$(torch_field "$r" "$d" tok_s %d)
        torch_mem[$r,$cfg]=$(torch_field "$r" "$d" peak_GiB %.2f)
    done
done
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }'; }
table() {
    local f8=0; [ ${#recipes[@]} -gt 1 ] && f8=1
    echo -n "| model | B | ours ($prec) tok/s | ours MFU | ours GiB | PyTorch bf16 tok/s | PyTorch MFU | PyTorch GiB | ours / PyTorch |"
    [ $f8 -eq 1 ] && echo -n " float8 tensorwise tok/s | GiB | ours / it | float8 rowwise tok/s | GiB | ours / it |"
    echo; echo -n "|---|---|---:|---:|---:|---:|---:|---:|---:|"; [ $f8 -eq 1 ] && echo -n "---:|---:|---:|---:|---:|---:|"; echo
    for cfg in "${configs[@]}"; do
        d=${cfg%%:*}; b=${cfg##*:}
        echo -n "| d$d | $b | ${ours[$cfg]:--} | $(bench_mfu "${logs[$cfg]}" "${ours[$cfg]}") | ${ours_mem[$cfg]:--} |" \
             "${torch[bf16,$cfg]:--} | $(bench_mfu "${logs[$cfg]}" "${torch[bf16,$cfg]}") | ${torch_mem[bf16,$cfg]:--} |" \
             "$(ratio "${ours[$cfg]}" "${torch[bf16,$cfg]}") |"
        if [ $f8 -eq 1 ]; then
            for r in float8_tensorwise float8_rowwise; do
                echo -n " ${torch[$r,$cfg]:--} | ${torch_mem[$r,$cfg]:--} | $(ratio "${ours[$cfg]}" "${torch[$r,$cfg]}") |"
            done
        fi
        echo
    done
}
echo
table
for cfg in "${configs[@]}"; do for r in "${recipes[@]}"; do [ -n "${torch[$r,$cfg]}" ] || failed=1; done; done
[ $failed -eq 0 ] || { echo "a run failed: the results table is not written"; exit 1; }
results=${RESULTS:-dev/results}
mkdir -p "$results"
stamp=$(bench_stamp "$command")
{ echo "# Whole-step throughput: train_gpt2_adahop ($prec) against PyTorch"; echo
  echo "$stamp; T=1024, $steps steps each."; echo; table; } > "$results/bench_gpt2.md"
echo "written to $results/bench_gpt2.md"
