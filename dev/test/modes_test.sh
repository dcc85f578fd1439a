#!/usr/bin/env bash
# 10 steps of one model in every precision of the block linears, same data and seed (needs a GPU):
# every loss finite, and the step-10 loss of mxfp4 / hadamard / adahop (both GEMM paths) within 3% of bf16.
# AdaHOP runs with a 5-step calibration and a re-classification at step 8, so the strategy table is exercised.
# mxfp4 and adahop then run twice with the same flags: their step-10 checkpoints must be equal byte for byte, strategy
# changes included (what paired comparisons rely on).
# adahop runs with the recipe flags (-Q roundup, -Q ocp,bump7, -B 1,1, -T 0.5, -T 0.5:fwd): another loss, within 3%
# of bf16.
# Then the LM head in low precision (-H 1) and the bf16-forward validation of a quantized run (-f 1): see below.
# usage: modes_test.sh [INIT]   INIT is the trainer's -e: d12 (GPT-2 124M, the default) or e.g. llama:d12
set -uo pipefail
cd "$(dirname "$0")/../.."
source dev/test/run_checks.sh
start_checks modes_test "${1:-d12}"
common=(-e "$init" -b 16 -t 1024 -x 10 -u 2 -l 6e-4 -v 0 -s 0 -w 5 -R 4 -W 2 -a 0)   # -a 0: runs compared bit for bit
declare -A final
for mode in bf16 mxfp4 hadamard adahop adahop:exact; do
    p=${mode%%:*}; path=fast; [[ $mode == *:exact ]] && path=exact
    log="$out/${p}_${path}.txt"
    if ./train_gpt2_adahop "${common[@]}" -p "$p" -P "$path" > "$log" 2>&1; then
        final[$mode]=$(sed -n 's/^step *10\/10 | loss \([0-9.]*\).*/\1/p' "$log")
        echo "$mode: losses $(sed -n 's/^step *\([0-9]*\)\/10 | loss \([0-9.]*\).*/\2/p' "$log" | tr '\n' ' ')"
    else
        echo "$mode: FAILED"; tail -5 "$log"; final[$mode]=""
    fi
done
grep -A30 "AdaHOP" "$out/adahop_fast.txt" | head -40
for mode in mxfp4 hadamard adahop adahop:exact; do
    awk -v a="${final[$mode]:-nan}" -v b="${final[bf16]:-nan}" 'BEGIN { exit !(a == a + 0 && b == b + 0 && (a - b < 0.03 * b) && (b - a < 0.03 * b)) }'
    result "$mode step-10 loss ${final[$mode]:-none} within 3% of bf16 ${final[bf16]:-none}" $?
done
# the recipe flags take effect (another loss than adahop's) and train as well: block-scale rules (-Q), the first and
# last blocks in BF16 (-B), the second half of the steps in BF16 (-T), or only its forward GEMMs (-T F:fwd)
for flags in "-Q roundup" "-Q ocp,bump7" "-B 1,1" "-T 0.5" "-T 0.5:fwd"; do
    log="$out/adahop_${flags//[ ,:.-]/_}.txt"
    ./train_gpt2_adahop "${common[@]}" -p adahop $flags > "$log" 2>&1 || { echo "adahop $flags: FAILED"; tail -5 "$log"; }
    loss=$(sed -n 's/^step *10\/10 | loss \([0-9.]*\).*/\1/p' "$log")
    awk -v a="${loss:-nan}" -v o="${final[adahop]:-nan}" -v b="${final[bf16]:-nan}" \
        'BEGIN { exit !(a == a + 0 && b == b + 0 && a != o && (a - b < 0.03 * b) && (b - a < 0.03 * b)) }'
    result "adahop $flags: step-10 loss ${loss:-none} differs from adahop's ${final[adahop]:-none}, within 3% of bf16" $?
done
for mode in mxfp4 adahop; do   # two runs of the same flags: step-10 checkpoints (weights, AdamW, AdaHOP state) equal byte for byte
    for run in 1 2; do
        rm -rf "$out/ck_${mode}_$run"
        ./train_gpt2_adahop "${common[@]}" -p "$mode" -P fast -o "$out/ck_${mode}_$run" -n 10 > "$out/${mode}_$run.txt" 2>&1 ||
            echo "$mode run $run: FAILED"
    done
    cmp -s "$out/ck_${mode}_1/state_00000010.bin" "$out/ck_${mode}_2/state_00000010.bin"
    result "$mode: two runs of the same flags (-a 0) give the same (present) step-10 checkpoint" $?
    rm -rf "$out/ck_${mode}_1" "$out/ck_${mode}_2"
done
# -H 1: the LM head runs through AdaHOP too. Its loss stays within 3% of bf16, differs from the same run with a
# BF16 head (the head really is quantized), adahop prints the head's table line; a checkpoint with the head does
# not resume without it, -H 1 changes nothing in bf16, and -H refuses a micro-batch whose logits exceed 2^31 values,
# before the first step.
for mode in hadamard adahop; do
    log="$out/${mode}_head.txt"
    rm -rf "$out/ck_${mode}_head"
    if ./train_gpt2_adahop "${common[@]}" -p "$mode" -H 1 -o "$out/ck_${mode}_head" -n 10 > "$log" 2>&1; then
        head_loss=$(sed -n 's/^step *10\/10 | loss \([0-9.]*\).*/\1/p' "$log")
    else
        echo "$mode -H 1: FAILED"; tail -5 "$log"; head_loss=""
    fi
    awk -v a="${head_loss:-nan}" -v b="${final[bf16]:-nan}" -v c="${final[$mode]:-nan}" \
        'BEGIN { exit !(a == a + 0 && b == b + 0 && a - b < 0.03 * b && b - a < 0.03 * b && a != c) }'
    result "$mode -H 1 step-10 loss ${head_loss:-none} within 3% of bf16 ${final[bf16]:-none} and unlike the BF16 head's ${final[$mode]:-none}" $?
done
grep -q "^lm_head | " "$out/adahop_head.txt"
result "adahop -H 1 prints the head's strategy line: $(grep "^lm_head | " "$out/adahop_head.txt" | tail -1)" $?
expect_error() {   # what, expected message, trainer flags...
    local what=$1 msg=$2; shift 2
    local log="$out/error.txt"
    ! ./train_gpt2_adahop "$@" > "$log" 2>&1 && grep -q "$msg" "$log" && ! grep -q "^step *1/" "$log"
    local status=$?
    result "$what: an error '$msg' before the first step" $status
    [ $status -eq 0 ] || tail -3 "$log"
}
expect_error "resume of a -H 1 checkpoint with -H 0" "resume with the same -H" "${common[@]}" -x 12 -p adahop -H 0 -o "$out/ck_adahop_head" -y 1
./train_gpt2_adahop "${common[@]}" -p bf16 -H 1 > "$out/bf16_head.txt" 2>&1
bf16_head=$(sed -n 's/^step *10\/10 | loss \([0-9.]*\).*/\1/p' "$out/bf16_head.txt")
[ -n "$bf16_head" ] && [ "$bf16_head" = "${final[bf16]}" ]
result "-H 1 with -p bf16 changes nothing: step-10 loss ${bf16_head:-none} = bf16's ${final[bf16]:-none}" $?
expect_error "-H 1 with 48 x 1024 x padded vocab logits" "flag -H: the LM head's operands" "${common[@]}" -b 48 -p adahop -H 1
rm -rf "$out/ck_hadamard_head" "$out/ck_adahop_head"
# -f 1: a quantized run's bf16-forward val loss is its weights through the bf16 forward, so the number a bf16 run of
# its step-10 checkpoint validates (-e the checkpoint, -x 0), bit for bit
for mode in hadamard adahop; do
    rm -rf "$out/ck_${mode}_vlb"
    ./train_gpt2_adahop "${common[@]}" -p "$mode" -v 10 -m 1 -o "$out/ck_${mode}_vlb" -n 10 > "$out/${mode}_vlb.txt" 2>&1
    in_run=$(sed -n 's/^step *10 | val loss [0-9.]* | bf16 forward \([0-9.]*\)$/\1/p' "$out/${mode}_vlb.txt")
    ./train_gpt2_adahop "${common[@]}" -e "$out/ck_${mode}_vlb/state_00000010.bin" -x 0 -p bf16 -v 1 -m 1 > "$out/${mode}_vlb_x0.txt" 2>&1
    alone=$(sed -n 's/^step *0 | val loss \([0-9.]*\)$/\1/p' "$out/${mode}_vlb_x0.txt")
    [ -n "$in_run" ] && [ "$in_run" = "$alone" ]
    result "$mode: the bf16-forward val loss at step 10 (${in_run:-none}) = a bf16 run's of its checkpoint (-x 0: ${alone:-none})" $?
    rm -rf "$out/ck_${mode}_vlb"
done
finish_checks modes_test
