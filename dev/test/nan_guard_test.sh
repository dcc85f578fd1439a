#!/usr/bin/env bash
# The NaN/Inf guard of a trainer (./train_gpt2 or ./train_gpt2_adahop): a run made to diverge (ARGS must make it, e.g.
# -l 10 -c 10: weight decay multiplies the matrices by 1 - 100 every step) with a checkpoint every step must stop with
# exit status 1 and "training diverged", write no checkpoint of the diverged step or later, and leave its newest
# checkpoint valid: a -y 1 run resumes from exactly that file without skipping any.
# usage: nan_guard_test.sh TRAINER [ARGS...]   env: WORK (scratch directory, default build/nan_guard)
set -uo pipefail
[ $# -ge 1 ] && [ -x "$1" ] || { echo "usage: $0 TRAINER [ARGS...] (TRAINER must be an executable)"; exit 2; }
trainer=$1; shift
work=${WORK:-build/nan_guard}
rm -rf "$work"; mkdir -p "$work"
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
d=$work/run
"$trainer" "$@" -x 1000 -v 0 -n 1 -o "$d" > "$work/run.out" 2> "$work/run.err"; rc=$?
diverged=$(sed -n 's/.*error: step \([0-9]*\): loss .*training diverged.*/\1/p' "$work/run.err")
[ "$rc" -eq 1 ] && [ -n "$diverged" ] && ok "the run stopped at step $diverged with exit status 1 and 'training diverged'" \
    || { bad "exit status $rc, no 'training diverged' on stderr: $(tail -2 "$work/run.err")"; diverged=0; }
newest=$(ls "$d"/state_*.bin 2>/dev/null | tail -1)
last=$((10#$(basename "${newest:-state_0.bin}" .bin | sed 's/state_//')))
[ -n "$newest" ] && [ "$last" -lt "$diverged" ] && ok "newest checkpoint is step $last, before the diverged step" \
    || bad "newest checkpoint '${newest:-none}' is not before the diverged step $diverged"
"$trainer" "$@" -x "$last" -v 0 -o "$d" -y 1 > "$work/resume.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] && grep -q "resumed from $newest at step $last" "$work/resume.out" && ! grep -q "skipping checkpoint" "$work/resume.out" \
    && ok "-y 1 resumes from $newest, no checkpoint skipped" || bad "the resume (status $rc) did not take $newest: $(tail -3 "$work/resume.out")"
echo "nan_guard_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
