#!/usr/bin/env bash
# The CPU reference trains the default tiny GPT-2 (L2 C64, B 4, T 64) for 20 steps in each precision mode of the
# block linears (bf16 = FP32, and emulated mxfp4, hadamard, adahop with a 5-step calibration and a
# re-classification every 10 steps over 3, calibrating in plain MXFP4 and in IHT): every train loss must be finite
# and the loss must fall by more than 1.0 nat in each mode; adahop must print its strategy table after calibration.
set -uo pipefail
cd "$(dirname "$0")/../.."
passed=0; failed=0
for run in bf16 mxfp4 hadamard adahop "adahop -C plain"; do
    mode=${run%% *}; extra=${run#"$mode"}
    if [ "$mode" = adahop ]; then extra="-w 5 -R 10 -W 3$extra"; fi
    log=$(./train_gpt2 -x 20 -v 0 -g 0 -p $mode $extra 2>&1)
    losses=$(echo "$log" | sed -n 's/.*train loss \([^ ]*\) .*/\1/p')
    first=$(echo "$losses" | head -1); last=$(echo "$losses" | tail -1)
    finite=$(echo "$losses" | awk 'BEGIN { ok = 1 } !/^-?[0-9]+\.[0-9]+$/ { ok = 0 } END { print ok }')   # not nan / inf
    echo "$run: train loss $first -> $last over $(echo "$losses" | wc -l) steps"
    if [ "$(echo "$losses" | wc -l)" -eq 20 ] && [ "$finite" = 1 ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(a - b > 1.0) }'; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); echo "FAIL $run: need 20 finite losses falling by more than 1.0"; echo "$log" | tail -5
    fi
    if [ "$mode" = adahop ]; then
        echo "adahop: $(echo "$log" | grep -c '^adahop step') strategy changes logged"
        if echo "$log" | grep -q "adahop strategies"; then passed=$((passed + 1))
        else failed=$((failed + 1)); echo "FAIL adahop: no strategy table after calibration"; fi
    fi
done
echo "cpu_modes_smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
