#!/usr/bin/env bash
# The CPU trainer's -o directory (llmc/out_dir.h; the GPU trainer runs the same code): a fresh run refuses a directory
# that holds another run's training states or main.log and leaves them as they were; -y 2 replaces them; a second
# run on a directory in use stops at once, naming the first's process; temporary files a killed run left are
# removed at start; a resume past -x is refused; SIGHUP and SIGQUIT stop the run as SIGTERM does (a checkpoint,
# exit 128 + signal); FIFOs as shard, model or checkpoint are refused at once instead of waited on.
set -uo pipefail
cd "$(dirname "$0")/../.."
source dev/test/run_checks.sh
start_checks run_dir_test cpu   # out = build/run_dir_test_cpu, emptied
train() { OMP_NUM_THREADS=1 timeout 60 ./train_gpt2 -v 0 -g 0 "$@"; }
sums() { (cd "$1" && sha256sum state_*.bin main.log 2>/dev/null); }
# wait_for FILE: until FILE exists (at most 30 s)
wait_for() { for _ in $(seq 300); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }

d=$out/run
train -x 4 -n 2 -o "$d" > /dev/null; result "a fresh run writes its states" $?
before=$(sums "$d")
msg=$(train -x 4 -n 2 -r 7 -o "$d" 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && [[ $msg == *"holds another run's files (state_00000004.bin, state_00000002.bin, main.log)"* ]] &&
    [[ $msg == *"-y 2"* ]] && [ "$(sums "$d")" = "$before" ]
result "a fresh run in a directory of another run is refused, its files untouched: $msg" $?
msg=$(train -x 2 -n 2 -r 7 -y 2 -o "$d" 2>&1); rc=$?
[ $rc -eq 0 ] && [[ $msg == *"removed the 3 files of an earlier run"* ]] && [ ! -e "$d/state_00000004.bin" ] &&
    [ -e "$d/state_00000002.bin" ] && [ "$(sums "$d")" != "$before" ]
result "-y 2 deletes the other run's states and log, then starts afresh" $?
msg=$(train -x 1 -r 7 -y 1 -o "$d" 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && [[ $msg == *"at step 2, past -x 1"* ]]; result "a resume past -x is refused: $msg" $?

l=$out/locked
OMP_NUM_THREADS=1 ./train_gpt2 -v 0 -g 0 -x 1000000 -o "$l" > "$out/locked.out" 2>&1 &
first=$!
wait_for "$l/main.log"
msg=$(train -x 2 -y 1 -o "$l" 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && [[ $msg == *"is in use by another run (process $first)"* ]]
result "a second run on a directory in use stops at once, naming the first: $msg" $?
for sig in HUP QUIT; do
    kill -$sig $first; wait $first; rc=$?
    num=$(kill -l $sig) want=$((128 + $(kill -l $sig)))
    step=$(sed -n "s/^stopped by signal $num after step \([0-9]*\).*/\1/p" "$out/locked.out")
    [ $rc -eq $want ] && [ -n "$step" ] && [ -e "$l/state_$(printf %08d "$step").bin" ]
    result "SIG$sig stops the run with a checkpoint of its last step (exit $rc, want $want; step ${step:-?})" $?
    OMP_NUM_THREADS=1 ./train_gpt2 -v 0 -g 0 -x 1000000 -y 1 -o "$l" > "$out/locked.out" 2>&1 &   # the next signal's run
    first=$!
    sleep 0.5
done
kill -TERM $first; wait $first

t=$out/stale
train -x 2 -n 2 -o "$t" > /dev/null
head -c 100000 /dev/zero > "$t/state_00000099.bin.tmp"
: > "$t/keep.tmp"
msg=$(train -x 4 -n 2 -y 1 -o "$t" 2>&1); rc=$?
[ $rc -eq 0 ] && [ ! -e "$t/state_00000099.bin.tmp" ] && [ -e "$t/keep.tmp" ] && [[ $msg == *"removed the stale temporary file"* ]] &&
    [[ $msg == *"resumed from $t/state_00000002.bin"* ]]
result "a checkpoint's temporary file left by a killed run is removed at start (other files stay)" $?

mkfifo "$out/fifo.bin"
for flag in -i -e; do
    msg=$(train -x 1 $flag "$out/fifo.bin" 2>&1 >/dev/null); rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && [[ $msg == *"not a regular file"* ]]; result "a FIFO as $flag is refused at once: $msg" $?
done
f=$out/fifo_dir
train -x 2 -n 2 -o "$f" > /dev/null
mv "$f/state_00000002.bin" "$f/state_00000001.bin" && mkfifo "$f/state_00000002.bin"
msg=$(train -x 4 -y 1 -o "$f" 2>&1 >/dev/null); rc=$?
[ $rc -ne 124 ] && [[ $msg == *"state_00000002.bin"*"not a regular file"* ]]; result "a FIFO among the checkpoints is skipped with a warning, not waited on" $?

finish_checks run_dir_test
