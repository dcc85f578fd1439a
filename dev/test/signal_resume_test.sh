#!/usr/bin/env bash
# Preemption tests of a trainer (./train_gpt2 on the CPU, ./train_gpt2_adahop on the GPU; both take -o -n -N -y -x -v):
#  1. SIGTERM in the middle of a run: the trainer finishes its step, writes a checkpoint and exits with 143 (128 + 15)
#     and a message; a -y 1 run then reaches the end with the per-step losses and the final training state (byte for
#     byte) of an uninterrupted run.
#  2. kill -9 loop: a run that writes a checkpoint every step and keeps the newest 2 (-N 2) is killed KILLS times at
#     random moments (fixed seed), each time restarted with -y 1: every restart must resume from a valid checkpoint
#     no older than the previous one, the losses of replayed steps must repeat exactly, and the final state must
#     equal the uninterrupted run's byte for byte.
# usage: signal_resume_test.sh TRAINER [ARGS...]   ARGS: the model, data and batch flags of both runs
# env: STEPS (optimizer steps, default 24), KILLS (default 6), KILL_MS (a kill comes 0..KILL_MS ms after the restarted
# run logs its first step, default 300), WORK (scratch directory, default build/signal_resume)
set -uo pipefail
[ $# -ge 1 ] && [ -x "$1" ] || { echo "usage: $0 TRAINER [ARGS...] (TRAINER must be an executable)"; exit 2; }
trainer=$1; shift
args=("$@")
steps=${STEPS:-24}; kills=${KILLS:-6}; delay_ms=${KILL_MS:-300}; work=${WORK:-build/signal_resume}
rm -rf "$work"; mkdir -p "$work"
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
state() { printf '%s/state_%08d.bin' "$1" "$2"; }
# the train-loss lines of a main.log without timings, each distinct line once, in step order
losses() { grep '^s:[0-9]* tl:' "$1/main.log" | sed 's/ tok\/s:.*//' | sort -u -t: -k2,2n -k2; }
# the number of train-loss lines in dir $1's main.log
logged() { cat "$1/main.log" 2>/dev/null | grep -c '^s:[0-9]* tl:'; }
# waits until dir $1's main.log holds more than $2 train-loss lines or process $3 ends (at most 600 s)
wait_logged() {
    for _ in $(seq 12000); do
        [ "$(logged "$1")" -gt "$2" ] && return 0
        kill -0 "$3" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
# the step a run resumed from (0: started fresh), from its stdout $1
resumed_step() { sed -n 's/^resumed from .* at step \([0-9]*\)$/\1/p' "$1" | head -1 | grep . || echo 0; }

echo "== reference: $steps uninterrupted steps"
"$trainer" "${args[@]}" -x "$steps" -v 0 -o "$work/ref" -n "$steps" > "$work/ref.out" 2>&1 \
    || { echo "the reference run failed:"; tail -5 "$work/ref.out"; echo "signal_resume_test: 0 passed, 1 failed"; exit 1; }
[ -f "$(state "$work/ref" "$steps")" ] || { echo "the reference run wrote no final state"; exit 1; }

echo "== SIGTERM once 3 steps are logged, then -y 1"
d=$work/term
"$trainer" "${args[@]}" -x "$steps" -v 0 -o "$d" -n "$steps" > "$d.out" 2> "$d.err" &
pid=$!
wait_logged "$d" 2 "$pid"
kill -TERM "$pid"
wait "$pid"; rc=$?
last=$(grep '^s:[0-9]* tl:' "$d/main.log" | tail -1 | sed 's/^s:\([0-9]*\) .*/\1/')
[ "$rc" -eq 143 ] && ok "SIGTERM: exit status 143" || bad "SIGTERM: exit status $rc, expected 143"
grep -q "stopped by signal 15 after step $last" "$d.err" && ok "SIGTERM: message names the signal and step $last" \
    || bad "SIGTERM: no 'stopped by signal 15 after step $last' on stderr: $(cat "$d.err")"
[ -f "$(state "$d" "$last")" ] && ok "SIGTERM: checkpoint of step $last written" || bad "SIGTERM: no checkpoint of step $last"
[ "$last" -lt "$steps" ] || bad "SIGTERM: the run ended before the signal (raise STEPS)"
"$trainer" "${args[@]}" -x "$steps" -v 0 -o "$d" -n "$steps" -y 1 > "$d.resume.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] && [ "$(resumed_step "$d.resume.out")" = "$last" ] && ok "SIGTERM: -y 1 resumed at step $last and finished" \
    || bad "SIGTERM: the resumed run (status $rc) did not resume at step $last: $(tail -3 "$d.resume.out")"
[ "$(losses "$d")" == "$(losses "$work/ref")" ] && ok "SIGTERM: losses of all $steps steps equal the uninterrupted run's" \
    || { bad "SIGTERM: losses differ"; diff <(losses "$work/ref") <(losses "$d") | head -5; }
cmp -s "$(state "$d" "$steps")" "$(state "$work/ref" "$steps")" && ok "SIGTERM: final state identical byte for byte" \
    || bad "SIGTERM: final state differs from the uninterrupted run's"

echo "== kill -9 loop: $kills kills at random moments, each followed by -y 1"
d=$work/kill
RANDOM=20261203
prev=0; torn=0; skipped=0
for i in $(seq "$kills"); do
    out=$work/kill_$i.out
    before=$(logged "$d")
    stdbuf -oL "$trainer" "${args[@]}" -x "$steps" -v 0 -o "$d" -n 1 -N 2 -y 1 > "$out" 2>&1 &   # lines survive kill -9
    pid=$!
    wait_logged "$d" "$before" "$pid" || true   # resumed and training: this run logged a step
    sleep "$(printf '%d.%03d' $((RANDOM % 1000 * delay_ms / 1000 / 1000)) $((RANDOM % 1000 * delay_ms / 1000 % 1000)))"
    kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    r=$(resumed_step "$out")
    if [ "$r" -lt "$prev" ]; then bad "kill $i: resumed at step $r, before the previous resume at $prev"; fi
    skipped=$((skipped + $(grep -c "skipping checkpoint" "$out")))
    ls "$d"/*.tmp > /dev/null 2>&1 && torn=$((torn + 1))
    echo "kill $i: resumed at step $r, killed after step $(grep '^s:[0-9]* tl:' "$d/main.log" | tail -1 | sed 's/^s:\([0-9]*\) .*/\1/')"
    prev=$r
done
out=$work/kill_final.out
"$trainer" "${args[@]}" -x "$steps" -v 0 -o "$d" -n 1 -N 2 -y 1 > "$out" 2>&1; rc=$?
r=$(resumed_step "$out")
[ "$rc" -eq 0 ] && [ "$r" -ge "$prev" ] && ok "kill -9: every restart resumed from a valid checkpoint ($kills kills, $torn during a checkpoint write, $skipped invalid files skipped), the last at step $r" \
    || bad "kill -9: the final run (status $rc) resumed at step $r (previous $prev): $(tail -3 "$out")"
dups=$(losses "$d" | cut -d' ' -f1 | uniq -d | head -3)
[ -z "$dups" ] && [ "$(losses "$d")" == "$(losses "$work/ref")" ] && ok "kill -9: replayed steps repeat their losses exactly; all equal the uninterrupted run's" \
    || { bad "kill -9: losses differ (steps logged with different values: ${dups:-none})"; diff <(losses "$work/ref") <(losses "$d") | head -5; }
cmp -s "$(state "$d" "$steps")" "$(state "$work/ref" "$steps")" && ok "kill -9: final state identical byte for byte" \
    || bad "kill -9: final state differs from the uninterrupted run's"
n=$(ls "$d"/state_*.bin | wc -l)
[ "$n" -le 2 ] && ok "kill -9: -N 2 left $n states" || bad "kill -9: -N 2 left $n states: $(ls "$d")"

echo "signal_resume_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
