#!/usr/bin/env bash
# Data-parallel training (needs a GPU), 10 steps of d6 on the embedded data with AdaHOP's calibration vote at step 3
# and re-classifications at steps 4 and 8, total batch 2 x B x T:
#   world size 1 through the DP flags (-G 1 -I 0 -F), with the per-layer all-reduce (-O 1) and without (-O 0),
#   logs exactly what a plain run logs (losses, norms, val losses, strategy checksums: identical text), and
#   resuming from its step-5 checkpoint continues bit for bit (same log lines, same final checkpoint);
#   with 2+ GPUs: 2 ranks (rendezvous file) against 1 rank with twice the accumulation, and resuming across world
#   sizes (1 -> 2, 2 -> 1): numbers within 1e-4 relative (only the summation order of the all-reduce differs),
#   everything else (strategy checksums, AdaHOP change lines) identical, and after every vote the trainer's
#   cross-rank check of the strategies passed; the same 2 ranks started by mpirun when the
#   trainer was built with OpenMPI; ranks that disagree (steps, the resume decision) both stop before any NCCL work,
#   naming the field; a rank that dies for a known reason (a bad training shard, after the communicator exists) or is
#   killed (SIGKILL) in the middle of training stops the other rank with the cause within 60 s.
# usage: dp_test.sh [INIT]   INIT is the trainer's -e: d6 (GPT-2, the default) or e.g. llama:d8
set -uo pipefail
cd "$(dirname "$0")/../.."
source dev/test/nccl_path.sh ./train_gpt2_adahop
source dev/test/run_checks.sh
start_checks dp_test "${1:-}"
args=(-e "$init" -b 8 -t 256 -d 4096 -x 10 -u 2 -v 5 -m 4 -s 0 -w 3 -R 4 -W 2 -a 0)   # -a 0: runs compared bit for bit
tol=1e-4

# train DIR FLAGS...: one process into DIR (a fresh rendezvous file per run), its stdout in DIR.txt
train() {
    local dir=$1; shift
    timeout 200 ./train_gpt2_adahop "${args[@]}" -o "$dir" "$@" > "$dir.txt" 2>&1 || { tail -5 "$dir.txt"; return 1; }
}

# train2 DIR FLAGS...: 2 ranks on GPUs 0 and 1, rank 1 in the background; rank 0 writes DIR
train2() {
    local dir=$1; shift
    timeout 200 ./train_gpt2_adahop "${args[@]}" -o "$dir" "$@" -G 2 -I 1 -F "$dir.rdz" > "$dir.rank1.txt" 2>&1 &
    local pid=$!
    train "$dir" "$@" -G 2 -I 0 -F "$dir.rdz"
    local rc=$?
    wait $pid || { tail -5 "$dir.rank1.txt"; return 1; }
    return $rc
}

# both_stop NAME "RANK0 FLAGS" "RANK1 FLAGS" EXPECT: 2 ranks that must both exit non-zero (not by the timeout)
# within 60 s, each with EXPECT in its output
both_stop() {
    local dir=$out/$1 f0=$2 f1=$3 expect=$4 t0=$SECONDS
    timeout 200 ./train_gpt2_adahop "${args[@]}" $f1 -G 2 -I 1 -F "$dir.rdz" > "$dir.rank1.txt" 2>&1 &
    local pid=$!
    timeout 200 ./train_gpt2_adahop "${args[@]}" $f0 -G 2 -I 0 -F "$dir.rdz" > "$dir.txt" 2>&1
    local rc0=$?
    wait $pid
    local rc1=$? dt=$((SECONDS - t0))
    echo "  exit codes $rc0 and $rc1 after $dt s; rank 0: $(grep -h 'error' "$dir.txt" | head -1)"
    [ $rc0 -ne 0 ] && [ $rc0 -ne 124 ] && [ $rc1 -ne 0 ] && [ $rc1 -ne 124 ] && [ $dt -le 60 ] &&
        grep -qF "$expect" "$dir.txt" && grep -qF "$expect" "$dir.rank1.txt"
}

# killed_rank_stops_other NAME: rank 1 is killed (SIGKILL) once rank 0 has logged step 3; rank 0 must exit non-zero,
# naming rank 1 as gone, within 60 s
killed_rank_stops_other() {
    local dir=$out/$1
    ./train_gpt2_adahop "${args[@]}" -x 1000 -v 0 -G 2 -I 1 -F "$dir.rdz" > "$dir.rank1.txt" 2>&1 &
    local pid1=$!
    timeout 300 ./train_gpt2_adahop "${args[@]}" -x 1000 -v 0 -G 2 -I 0 -F "$dir.rdz" > "$dir.txt" 2>&1 &
    local pid0=$!
    for _ in $(seq 600); do grep -q "^step     3/" "$dir.txt" && break; sleep 0.2; done
    kill -9 $pid1
    local t0=$SECONDS
    wait $pid0
    local rc0=$? dt=$((SECONDS - t0))
    echo "  rank 0 exit code $rc0, $dt s after the kill: $(grep -h 'error' "$dir.txt" | head -1)"
    [ $rc0 -ne 0 ] && [ $rc0 -ne 124 ] && [ $dt -le 60 ] && grep -q "rank 1 (process [0-9]*) is gone" "$dir.txt"
}

# log_lines DIR [FROM]: main.log without throughput and memory, only the step lines after step FROM when given
log_lines() {
    log_numbers "$1" | awk -v from="${2:--1}" 'from < 0 || ($0 ~ /^s:/ && substr($1, 3) + 0 > from)'
}

# same_logs A B TOL [FROM]: the same lines; with TOL 0 identical, else numbers (key:value) within relative TOL plus
# one unit in their last printed digit, all other text identical
same_logs() {
    paste -d '\t' <(log_lines "$1" "${4:-}") <(log_lines "$2" "${4:-}") | awk -F'\t' -v tol="$3" '
        function numeric(s) { return s ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ }
        function last_digit(s) { return index(s, ".") && !index(s, "e") ? 10 ^ -(length(s) - index(s, ".")) : 0 }
        {
            lines++
            if (tol == 0) { bad += $1 != $2; next }
            na = split($1, a, " "); nb = split($2, b, " ")
            if (na != nb || na == 0) { bad++; next }
            for (i = 1; i <= na; i++) {
                ka = a[i]; va = ""; kb = b[i]; vb = ""
                if (index(a[i], ":")) { ka = substr(a[i], 1, index(a[i], ":") - 1); va = substr(a[i], index(a[i], ":") + 1) }
                if (index(b[i], ":")) { kb = substr(b[i], 1, index(b[i], ":") - 1); vb = substr(b[i], index(b[i], ":") + 1) }
                if (ka != kb) { bad++; continue }
                if (ka != "strategies" && numeric(va) && numeric(vb)) {
                    d = va - vb; d = d < 0 ? -d : d; m = va < 0 ? -va : va
                    rel = m > 0 ? d / m : d
                    if (rel > worst) { worst = rel }
                    if (d > tol * m + last_digit(va)) { bad++ }
                } else if (va != vb) { bad++ }
            }
        }
        END { printf "  %d lines, largest relative difference %.3g (tolerance %g), %d mismatches\n", lines, worst, tol, bad
              exit !(lines > 0 && bad == 0) }'
}

train "$out/plain"
result "plain run (W=1, 2 micro-steps)" $?
train "$out/dp1" -G 1 -I 0 -F "$out/dp1.rdz" -n 5
result "DP flags at world size 1, overlapped all-reduce, checkpoints at 5 and 10" $?
train "$out/dp1_o0" -G 1 -I 0 -F "$out/dp1_o0.rdz" -O 0
result "DP flags at world size 1, reduce-scatter after the backward pass (-O 0)" $?
same_logs "$out/plain" "$out/dp1" 0
result "-G 1 -I 0 -F (-O 1) logs exactly what the plain run logs" $?
same_logs "$out/plain" "$out/dp1_o0" 0
result "-G 1 -I 0 -F -O 0 logs exactly what the plain run logs" $?
grep -q " strategies:" "$out/plain/main.log"
result "the strategy checksum is logged when the strategies change" $?

mkdir -p "$out/resume1"
cp "$out/dp1/state_00000005.bin" "$out/resume1/"
train "$out/resume1" -G 1 -I 0 -F "$out/resume1.rdz" -y 1 -n 5 &&
    grep -q "resumed from $out/resume1/state_00000005.bin at step 5" "$out/resume1.txt"
result "resume through the DP path from the step-5 checkpoint" $?
same_logs "$out/dp1" "$out/resume1" 0 5
result "resumed steps 6..10 identical" $?
cmp -s "$out/dp1/state_00000010.bin" "$out/resume1/state_00000010.bin"
result "resumed final checkpoint identical" $?

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$gpus" -ge 2 ]; then
    train2 "$out/dp2" -n 5
    result "2 ranks through a rendezvous file" $?
    same_logs "$out/plain" "$out/dp2" $tol
    result "2 ranks vs 1 rank with twice the accumulation, within $tol relative" $?
    votes=$(grep -c "^adahop step" "$out/dp2/main.log"; true)
    agreed=$(grep -c "AdaHOP strategies [0-9a-f]* on all 2 ranks" "$out/dp2.txt"; true)
    echo "  AdaHOP strategy changes logged: $votes; votes after which the trainer checked both ranks' strategies: $agreed"
    [ "$agreed" -ge 3 ]
    result "after each of the 3 votes both ranks hold the same AdaHOP strategies (checked by the trainer)" $?
    mkdir -p "$out/resume_1to2" "$out/resume_2to1"
    cp "$out/dp1/state_00000005.bin" "$out/resume_1to2/"
    cp "$out/dp2/state_00000005.bin" "$out/resume_2to1/"
    train2 "$out/resume_1to2" -y 1 -O 0 && same_logs "$out/dp1" "$out/resume_1to2" $tol 5
    result "a 1-rank checkpoint resumed by 2 ranks (-O 0) continues within $tol" $?
    train "$out/resume_2to1" -y 1 && same_logs "$out/dp2" "$out/resume_2to1" $tol 5
    result "a 2-rank checkpoint resumed by 1 rank continues within $tol" $?
    both_stop differ_steps "-x 10" "-x 12" "the ranks disagree on max_steps, -x: rank 0 has 10, rank 1 has 12"
    result "ranks with different -x: both stop before any NCCL work, naming the field and the values" $?
    mkdir -p "$out/resume_mixed0" "$out/resume_mixed1"
    cp "$out/dp1/state_00000005.bin" "$out/resume_mixed0/"
    both_stop resume_mixed "-y 1 -o $out/resume_mixed0" "-y 1 -o $out/resume_mixed1" "the ranks disagree on resume_step"
    result "rank 0 resumes, rank 1 (no checkpoint in its -o) starts fresh: both stop" $?
    both_stop bad_shard "" "-i Makefile" "shard 'Makefile': bad magic"
    result "rank 1 dies on a bad training shard after the communicator exists: rank 0 stops with its cause" $?
    killed_rank_stops_other killed
    result "rank 1 killed during training: rank 0 stops, naming it" $?
    if command -v mpirun > /dev/null && ldd ./train_gpt2_adahop | grep -q libmpi; then
        mkdir -p "$out/mpi2"
        timeout 200 mpirun --allow-run-as-root -np 2 ./train_gpt2_adahop "${args[@]}" -o "$out/mpi2" > "$out/mpi2.txt" 2>&1 &&
            same_logs "$out/plain" "$out/mpi2" $tol
        result "2 ranks started by mpirun vs 1 rank with twice the accumulation, within $tol" $?
    else
        echo "dp_test $init: skipped: the mpirun launch needs mpirun and a trainer built with OpenMPI" | tee -a "${TEST_SKIP_LOG:-/dev/null}"
    fi
else
    echo "dp_test $init: skipped: the 2-rank part needs 2 GPUs, this machine has $gpus" | tee -a "${TEST_SKIP_LOG:-/dev/null}"
fi
finish_checks dp_test
