#!/usr/bin/env bash
# Throughput and memory of every precision mode of the block linears against bf16, same GPU, same run, T=1024.
# tok/s is the mean over steps 6..STEPS (after AdaHOP's 3 calibration steps, with re-classification off, so
# the steady state is timed); GiB is what the trainer allocates (all of it up front: the peak); "saved inputs"
# is what the block linears keep from forward to backward (train_gpt2_adahop.cu, model_saved_input_bytes).
# Usage: dev/bench_modes.sh [model:batch ...]   (model = a trainer -e preset: d12, llama:d12, ...; a bare depth N
# means dN; default d12:64 d24:32 d48:16; STEPS=15, MODES="bf16 mxfp4 hadamard adahop"; a mode written MODE+A runs
# with -A 1, the MLP pre-activation recomputed in the backward pass, MODE+A2 with -A 2, the qkv output too, MODE+H
# with -H 1, the LM head through AdaHOP too (B*T*50304 < 2^31: B <= 41), MODE+M<n> with -M n, the classifier in
# chunks of n tokens (0: all at once), e.g. MODES="bf16 adahop adahop+A", or MODES="bf16 adahop adahop+H" RESULTS=build dev/bench_modes.sh d12:32 llama:d12:32).
# The table goes to the terminal and, when every run succeeded, to dev/results/bench_modes.md (RESULTS=folder
# elsewhere); a failed run is a FAILED row and exit status 1. MFU = the trainer's model FLOPs per token x tok/s / its
# GPU peak (989 TFLOP/s), the same model work in every mode.
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/test/nccl_path.sh ./train_gpt2_adahop   # NCCL may live only in PyTorch's wheels
source dev/bench_common.sh
command="$0${*:+ $*}"
configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=(d12:64 d24:32 d48:16)
steps=${STEPS:-15}
modes=(${MODES:-bf16 mxfp4 hadamard adahop})
for mode in "${modes[@]}"; do
    [[ $mode =~ ^(bf16|mxfp4|hadamard|adahop)(\+A2?|\+H|\+M[0-9]+)*$ ]] ||
        { echo "bench_modes.sh: mode '$mode' is not bf16, mxfp4, hadamard or adahop with optional +A / +A2 / +H / +M<n>" >&2; exit 2; }
done
failed=0
out=${OUT:-build}/bench_modes
mkdir -p "$out"
table="$out/table.md"
echo "| model | B | mode | tok/s | / bf16 | MFU | GiB allocated | / bf16 | saved inputs GiB | bf16 / mode |" > "$table"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|" >> "$table"
for cfg in "${configs[@]}"; do
    model=${cfg%:*}; b=${cfg##*:}
    [[ $model =~ ^[0-9]+$ ]] && model="d$model"
    name=${model//:/_}
    base_tok=""; base_mem=""; base_saved=""
    for mode in "${modes[@]}"; do
        log="$out/${name}_${mode}.txt"
        flags=(-p "${mode%%+*}")
        [[ $mode == *+A2* ]] && flags+=(-A 2)
        [[ $mode == *+A* && $mode != *+A2* ]] && flags+=(-A 1)
        [[ $mode == *+H* ]] && flags+=(-H 1)
        [[ $mode =~ \+M([0-9]+) ]] && flags+=(-M "${BASH_REMATCH[1]}")
        if ! bench_train "$log" ./train_gpt2_adahop "$model" "$b" "$steps" "${flags[@]}"; then
            echo "$model $mode FAILED:"; tail -n 3 "$log"
            echo "| $model | $b | $mode | FAILED | - | - | - | - | - | - |" >> "$table"
            failed=1; continue
        fi
        tok=$(bench_tok_mean "$log" $((b * 1024)))
        [ -n "$tok" ] || { echo "$model $mode: no step times in $log"; failed=1; }
        mem=$(sed -n 's/^summary:.*| \([0-9.]*\) GiB allocated.*/\1/p' "$log")
        mfu=$(bench_mfu "$log" "$tok")
        saved=$(sed -n 's/^saved inputs of the block linears: \([0-9.]*\) GiB/\1/p' "$log")
        [ "$mode" = bf16 ] && { base_tok=$tok; base_mem=$mem; base_saved=$saved; }
        ratios=$(awk -v t="$tok" -v bt="$base_tok" -v m="$mem" -v bm="$base_mem" -v s="$saved" -v bs="$base_saved" 'BEGIN {
                     r = (t > 0 && bt > 0) ? sprintf("%.2f", t / bt) : "-"; q = (m > 0 && bm > 0) ? sprintf("%.2f", m / bm) : "-";
                     u = (s > 0 && bs > 0) ? sprintf("%.2f", bs / s) : "-"; print r, q, u }')
        read -r rt rm rs <<< "$ratios"
        echo "| $model | $b | $mode | ${tok:--} | $rt | $mfu | ${mem:--} | $rm | ${saved:--} | $rs |" >> "$table"
        echo "$model B=$b $mode: $tok tok/s ($rt), $mem GiB ($rm), saved inputs $saved GiB ($rs)"
        [ "$mode" = adahop ] && grep "^counts:" "$log" | tail -n 1
    done
done
echo
cat "$table"
[ $failed -eq 0 ] || { echo "a run failed: the results table is not written"; exit 1; }
results=${RESULTS:-dev/results}
mkdir -p "$results"
stamp=$(bench_stamp "$command")
{ echo "# Throughput and memory per precision mode"; echo
  echo "$stamp; MODES=\"${modes[*]}\", T=1024, tok/s = mean of steps 6-$steps."; echo
  cat "$table"; } > "$results/bench_modes.md"
echo "written to $results/bench_modes.md"
