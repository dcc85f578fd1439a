#!/usr/bin/env bash
# Trains 20 steps with a checkpoint at step 10, resumes a second run from that checkpoint, and checks
# that steps 11..20 log identical losses and gradient norms and that the model (family, shape) is the same.
# The resumed run gives no -d: the total batch (2048, twice the default B*T) comes from the checkpoint. Then the same
# with stochastic rounding of the gradients (-S 1), the resumed run started with another seed (-r 7): the
# checkpoint's seed must drive everything, the rounding included. The first runs choose their GEMM algorithms by timing
# (-a 1, the default); the resumed runs must take them from the checkpoint.
# Needs a GPU. usage: resume_test.sh [INIT]   INIT is the trainer's -e: d6 (GPT-2, the default) or e.g. llama:d8
set -euo pipefail
cd "$(dirname "$0")/../.."
init=${1:-d6}
args=(-e "$init" -b 8 -t 128 -x 20 -u 5 -v 0 -s 0 -n 10)
strip_time() { grep '^s:' "$1" | sed 's/ tok\/s:.*//'; }

# check_resume NAME FIRST_FLAGS RESUME_FLAGS: trains with FIRST_FLAGS, resumes a copy of its step-10 checkpoint with
# RESUME_FLAGS, and compares steps 11..20 and the final checkpoints
check_resume() {
    local name=$1 first=$2 again=$3
    local a=build/resume_${init//:/_}_${name}_a b=build/resume_${init//:/_}_${name}_b
    rm -rf "$a" "$b"
    ./train_gpt2_adahop "${args[@]}" $first -o "$a" > "$a.out"
    mkdir -p "$b"
    cp "$a/state_00000010.bin" "$b/"
    ./train_gpt2_adahop "${args[@]}" $again -o "$b" -y 1 > "$b.out"
    grep -q "resumed from $b/state_00000010.bin at step 10" "$b.out" || { echo "resume $name: the second run did not resume"; exit 1; }
    grep -q "GEMM algorithms: [1-9][0-9]* configurations from the checkpoint" "$b.out" ||
        { echo "resume $name: the GEMM algorithms were not taken from the checkpoint"; exit 1; }
    local model_line='^[A-Za-z0-9-]*: L=[0-9]* C='   # the trainer's model line, "<family>: L=.. C=.. ..."
    [ "$(grep -m1 "$model_line" "$a.out")" == "$(grep -m1 "$model_line" "$b.out")" ] ||
        { echo "resume $name: the model differs: $(grep -m1 "$model_line" "$b.out")"; exit 1; }
    local want got
    want=$(strip_time "$a/main.log" | awk -F'[: ]' '$2 > 10')
    got=$(strip_time "$b/main.log")
    if [ "$want" == "$got" ] && [ -n "$got" ]; then
        echo "resume $name: steps 11..20 identical ($(echo "$got" | wc -l) lines)"
    else
        echo "resume $name: MISMATCH"; diff <(echo "$want") <(echo "$got") || true
        echo "resume: 0 passed, 1 failed"; exit 1
    fi
    cmp -s "$a/state_00000020.bin" "$b/state_00000020.bin" && echo "resume $name: final checkpoints identical" \
        || { echo "resume $name: final checkpoints differ"; exit 1; }
}

check_resume plain "-d 2048" ""
check_resume sr "-d 2048 -S 1 -r 1337" "-S 1 -r 7"
echo "resume: 2 passed, 0 failed"
