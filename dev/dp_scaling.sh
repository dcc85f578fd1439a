#!/usr/bin/env bash
# Data-parallel scaling on a machine with 2 GPUs: GPT-2 d24, T=1024, the same total batch on 1 and on 2 GPUs, in
# bf16 and adahop.
# Prints per mode: the largest relative difference of the train losses of the first STEPS steps (2 GPUs vs 1),
# tok/s on 1 and 2 GPUs (mean over steps 11..STEPS) and their ratio, how many AdaHOP votes the trainer's cross-rank
# strategy check passed; then the same 2-rank run started by mpirun (when the trainer links OpenMPI), and a
# checkpoint written at world size 2 resumed at world size 1. Data: the embedded default shards.
# Usage: dev/dp_scaling.sh   (env: STEPS=50 B=16 TOTAL=262144 TOL=1e-3 MODES="bf16 adahop")
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/test/nccl_path.sh ./train_gpt2_adahop
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$gpus" -lt 2 ]; then echo "dp_scaling.sh: needs 2 GPUs, this machine has $gpus"; exit 2; fi
steps=${STEPS:-50}; B=${B:-16}; total=${TOTAL:-262144}; tol=${TOL:-1e-3}
out=${OUT:-build}/dp_scaling
rm -rf "$out"; mkdir -p "$out"
args=(-e d24 -b "$B" -t 1024 -d "$total" -x "$steps" -u 10 -v 0 -s 0 -n "$steps")

# run DIR FLAGS...: one process into DIR
run() { local dir=$1; shift; timeout 580 ./train_gpt2_adahop "${args[@]}" -o "$dir" "$@" > "$dir.txt" 2>&1 || { tail -3 "$dir.txt"; return 1; }; }
# run2 DIR FLAGS...: 2 ranks through a rendezvous file, rank 0 writes DIR
run2() {
    local dir=$1; shift
    timeout 580 ./train_gpt2_adahop "${args[@]}" -o "$dir" "$@" -G 2 -I 1 -F "$dir.rdz" > "$dir.rank1.txt" 2>&1 &
    local pid=$!
    run "$dir" "$@" -G 2 -I 0 -F "$dir.rdz"; local rc=$?
    wait $pid || { tail -3 "$dir.rank1.txt"; return 1; }
    return $rc
}
# losses DIR: "step loss" per train line of DIR/main.log
losses() { sed -n 's/^s:\([0-9]*\) tl:\([^ ]*\).*/\1 \2/p' "$1/main.log"; }
# max_rel A B: the largest relative difference of the train losses of two runs at the steps both logged, and how many
max_rel() { awk 'NR == FNR { a[$1] = $2; next } ($1 in a) { d = ($2 - a[$1]) / a[$1]; d = d < 0 ? -d : d; if (d > m) m = d; n++ }
                 END { printf "%.2e %d", m, n }' <(losses "$1") <(losses "$2"); }
# tok_s DIR: mean tok/s over steps 11.. of DIR/main.log
tok_s() { sed -n 's/^s:\([0-9]*\) .*tok\/s:\([0-9]*\).*/\1 \2/p' "$1/main.log" | awk '$1 > 10 { s += $2; n++ } END { printf "%.0f", n ? s / n : 0 }'; }

echo "| mode | 1 GPU tok/s | 2 GPUs tok/s | 2 / 1 | largest relative loss difference (steps) | votes checked on both ranks |" > "$out/table.md"
echo "|---|---|---|---|---|---|" >> "$out/table.md"
for mode in ${MODES:-bf16 adahop}; do
    run "$out/${mode}_1" -p "$mode" || { echo "$mode: 1-GPU run failed"; continue; }
    run2 "$out/${mode}_2" -p "$mode" || { echo "$mode: 2-GPU run failed"; continue; }
    t1=$(tok_s "$out/${mode}_1"); t2=$(tok_s "$out/${mode}_2")
    read -r rel n <<< "$(max_rel "$out/${mode}_1" "$out/${mode}_2")"
    checked=$(grep -c "AdaHOP strategies [0-9a-f]* on all 2 ranks" "$out/${mode}_2.txt"; true)
    ratio=$(awk -v a="$t2" -v b="$t1" 'BEGIN { printf "%.2f", b > 0 ? a / b : 0 }')
    echo "| $mode | $t1 | $t2 | $ratio | $rel ($n) | $checked |" >> "$out/table.md"
    ok=$(awk -v r="$rel" -v t="$tol" 'BEGIN { print (r <= t) ? "within" : "ABOVE" }')
    echo "$mode: 2 GPUs / 1 GPU = $ratio ($t2 / $t1 tok/s); losses $ok $tol over $n steps (largest $rel); strategy checks $checked"
done

if command -v mpirun > /dev/null && ldd ./train_gpt2_adahop | grep -q libmpi; then
    timeout 580 mpirun --allow-run-as-root -np 2 ./train_gpt2_adahop "${args[@]}" -p adahop -o "$out/adahop_mpi" > "$out/adahop_mpi.txt" 2>&1 &&
        echo "mpirun: 2 ranks, adahop, largest relative loss difference to 1 GPU $(max_rel "$out/adahop_1" "$out/adahop_mpi")" ||
        { echo "mpirun launch failed:"; tail -3 "$out/adahop_mpi.txt"; }
else
    echo "mpirun launch skipped: needs mpirun and a trainer built with OpenMPI (make train_gpt2_adahop with mpicc's flags)"
fi

# a world-size-2 checkpoint (step STEPS/2) resumed at world size 1 continues as the 2-GPU run did
half=$((steps / 2))
mkdir -p "$out/resume_2to1"
args=(-e d24 -b "$B" -t 1024 -d "$total" -x "$steps" -u 10 -v 0 -s 0 -n "$half")
run2 "$out/adahop_2h" -p adahop && cp "$out/adahop_2h/state_$(printf %08d "$half").bin" "$out/resume_2to1/" &&
    run "$out/resume_2to1" -p adahop -y 1 &&
    echo "resume 2 -> 1 GPU at step $half: largest relative loss difference over the remaining steps $(max_rel "$out/adahop_2h" "$out/resume_2to1")" ||
    echo "resume 2 -> 1 GPU failed"
echo; cat "$out/table.md"
