#!/usr/bin/env bash
# The CPU reference trains a tiny GPT-2 (L2 C64) on the embedded tinyshakespeare shards for 25 steps:
# the train loss must fall by more than 1.0 nat and every loss must be finite.
set -euo pipefail
cd "$(dirname "$0")/../.."
log=$(./train_gpt2 -x 25 -v 0 -g 0)
losses=$(echo "$log" | sed -n 's/.*train loss \([-0-9.naif]*\).*/\1/p')
first=$(echo "$losses" | head -1); last=$(echo "$losses" | tail -1)
echo "CPU reference: train loss $first -> $last over $(echo "$losses" | wc -l) steps"
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(a == a + 0 && b == b + 0 && a - b > 1.0) }'; then
    echo "cpu_train_smoke: 1 passed, 0 failed"
else
    echo "cpu_train_smoke: 0 passed, 1 failed"; exit 1
fi
