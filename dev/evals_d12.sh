#!/usr/bin/env bash
# The export and evals on a trained model, end to end on one GPU: trains GPT-2 d12 (AdaHOP, T=1024, 600 steps of
# 32 x 1024 tokens) on TRAIN_SHARD with the downstream evals every 300 steps and at the end, plots the run
# (scripts/plot_losses.py: losses and evals), then checks its final state against transformers:
# dev/test/evals_gpu_test.sh (every task's score within 0.2 points of dev/eval_hf.py on the export) and
# dev/test/export_gpu_test.py (logits). dev/RESULTS.md's evals table comes from this script on the first 12M tokens of
# the Gutenberg corpus:
#   python3 dev/data/tokenize_text.py CORPUS/gutenberg_train_00.txt.xz --val-input CORPUS/gutenberg_val.txt.xz \
#       --out-dir gutenberg12 --prefix gutenberg --shard-tokens 12000000
#   dev/evals_d12.sh gutenberg12/gutenberg_train_000000.bin 'gutenberg12/gutenberg_val_*.bin' data/evals
# usage: dev/evals_d12.sh TRAIN_SHARDS VAL_SHARDS EVAL_DIR [OUT_DIR]   (OUT_DIR default build/evals_d12; EVAL_DIR:
#        dev/data/prepare_evals.py's files)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
train=${1:?usage: $0 TRAIN_SHARDS VAL_SHARDS EVAL_DIR [OUT_DIR]}; val=${2:?}; evals=${3:?}; out=${4:-build/evals_d12}
source dev/test/nccl_path.sh ./train_gpt2_adahop
./train_gpt2_adahop -e d12 -b 32 -t 1024 -x 600 -u 60 -l 1.5e-3 -i "$train" -j "$val" -v 100 -m 20 -s 0 \
    -V 300 -E "$evals" -o "$out" -n 600 -y 1
$PYTHON scripts/plot_losses.py "$out" -o "$out/losses.png"
bash dev/test/evals_gpu_test.sh "$out/state_00000600.bin" "$evals"
$PYTHON dev/test/export_gpu_test.py "$out/state_00000600.bin"
