#!/usr/bin/env bash
# Trains 20 steps with a checkpoint at step 10, resumes a second run from that checkpoint, and checks
# that steps 11..20 log identical losses and gradient norms and that the model (family, shape) is the same.
# Needs a GPU. usage: resume_test.sh [INIT]   INIT is the trainer's -e: d6 (GPT-2, the default) or e.g. llama:d8
set -euo pipefail
cd "$(dirname "$0")/../.."
init=${1:-d6}
a=build/resume_${init//:/_}_a b=build/resume_${init//:/_}_b
rm -rf "$a" "$b"
args=(-e "$init" -b 8 -t 128 -d 2048 -x 20 -u 5 -v 0 -s 0 -n 10)
./train_gpt2_adahop "${args[@]}" -o "$a" > "$a.out"
mkdir -p "$b"
cp "$a/state_00000010.bin" "$b/"
./train_gpt2_adahop "${args[@]}" -o "$b" -y 1 > "$b.out"
grep -q "resumed from $b/state_00000010.bin at step 10" "$b.out" || { echo "resume: the second run did not resume"; exit 1; }
[ "$(head -1 "$a.out")" == "$(head -1 "$b.out")" ] || { echo "resume: the model differs: $(head -1 "$b.out")"; exit 1; }
strip_time() { grep '^s:' "$1" | sed 's/ tok\/s:.*//'; }
want=$(strip_time "$a/main.log" | awk -F'[: ]' '$2 > 10')
got=$(strip_time "$b/main.log")
if [ "$want" == "$got" ] && [ -n "$got" ]; then
    echo "resume: steps 11..20 identical ($(echo "$got" | wc -l) lines): 1 passed, 0 failed"
else
    echo "resume: MISMATCH"; diff <(echo "$want") <(echo "$got") || true
    echo "resume: 0 passed, 1 failed"; exit 1
fi
cmp -s "$a/state_00000020.bin" "$b/state_00000020.bin" && echo "resume: final checkpoints identical" \
    || { echo "resume: final checkpoints differ"; exit 1; }
