#!/usr/bin/env bash
# The loss comparisons of dev/RESULTS.md ("Loss at 0.3B tokens"): one named set of runs, each 600 steps of 524,288
# tokens (315M tokens, 2.3 epochs of the corpus below), T=1024, validation on all 5M held-out tokens every 50 steps
# (through the run's forward and, for the quantized modes, the bf16 forward), the downstream evals at the end,
# checkpoints every 100 steps. Every run of every set reads the same data order (-D 1337) with deterministic GEMM
# algorithms (-a 0), so runs of one family and B are paired by construction; each mode runs at the init seeds 1337,
# 42 and 7 (--seeds picks others). run_modes.sh trains a set in resumable pieces, seed by seed, so call this again
# until it exits 0; a set can span sessions as long as every piece runs the same trainer build (the pieces' main.jsonl
# record it, plot_losses.py checks it). On a machine with several GPUs, run_modes.sh's --gpus trains a set's runs side
# by side, and sets can run beside each other on other GPUs (each run has its own lock), e.g. on 8 GPUs:
#   scripts/long_runs.sh gpt2 ROOT --gpus 0,1,2,3,4,5 --minutes 9 & scripts/long_runs.sh gpt2_frozen ROOT --gpus 6,7 --minutes 9 & wait
#
# The corpus (once; CORPUS = the folder of the raw text files named below): the
# held-out Gutenberg books first, so the 5M validation tokens are those 1.24M plus the first 3.76M of the training
# books; 136M training tokens remain (Gutenberg 00-04 and the four Debian texts), one stream for the loader however
# it is cut into shards:
#   python3 dev/data/tokenize_text.py $CORPUS/gutenberg_val.txt.xz $CORPUS/gutenberg_train_0*.txt.xz \
#       $CORPUS/debian_*.txt.xz --val-tokens 5000000 --out-dir data/long --prefix long
#   python3 dev/data/prepare_evals.py --ranks data/gpt2.tiktoken --out data/evals --hellaswag ... (its -h)
set -uo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
    cat <<EOF
Usage: scripts/long_runs.sh SET ROOT [run_modes.sh options, e.g. --minutes 9 --modes bf16 --seeds 42]

Trains the runs of SET in ROOT/SET/<mode>_s<seed> through scripts/run_modes.sh; call again until it exits 0.
Every run gets -C iht (AdaHOP's calibration precision; -C plain in the *_cplain sets), whatever the trainer's default,
data seed 1337 and -a 0. Each set runs its modes at the init seeds 1337, 42, 7, seed by seed.
  SET   gpt2          GPT-2 d12, B=64: bf16, mxfp4, hadamard, adahop
        llama         LLaMA-small llama:d12, B=64: the same modes
        gpt2_frozen   GPT-2 d12 adahop with -R 0: strategies frozen after the calibration vote (pairs with gpt2's bf16)
        llama_frozen  llama:d12 adahop with -R 0
        gpt2_cplain   GPT-2 d12 adahop with -C plain: the calibration steps in plain MXFP4 (the paper's) instead of IHT
        llama_cplain  llama:d12 adahop with -C plain
        gpt2_head     GPT-2 d12 at B=32: adahop with -H 1 (the LM head through AdaHOP too; -H needs B*T*50304 < 2^31)
                      and its bf16 baseline at the same B
        llama_head    llama:d12 at B=32: adahop with -H 1 and bf16
        d24           GPT-2 d24, B=32: bf16 and adahop
  ROOT  parent of the sets' folders
Environment: DATA folder of long_train_*.bin / long_val_*.bin (default data/long), EVALS folder of the eval files
(default data/evals). Every other argument goes to run_modes.sh (see its -h), before its '--'; a --modes there
replaces the set's modes, a --seeds its seeds (e.g. 'llama ROOT --modes bf16 --seeds 42' trains one run), and the
set's flags stay.
Exit status: run_modes.sh's (0 all finished, 3 runs remain, 1 a trainer failed, 2 bad usage).
EOF
}

[ $# -ge 1 ] && { [ "$1" = -h ] || [ "$1" = --help ]; } && { usage; exit 0; }
[ $# -ge 2 ] || { usage >&2; exit 2; }
set_name=$1 root=$2
shift 2
data=${DATA:-data/long} evals=${EVALS:-data/evals}
common=(-t 1024 -d 524288 -x 600 -l 6e-4 -u 30 -q 0.1 -v 50 -m -1 -f 1 -n 100 -s 0 -a 0 -E "$evals" -V 0
        -i "$data/long_train_*.bin" -j "$data/long_val_*.bin")
modes=() seeds=(--seeds 1337,42,7) data_seed=(--data-seed 1337)
case $set_name in
    gpt2)         flags=(-e d12 -b 64) ;;
    llama)        flags=(-e llama:d12 -b 64) ;;
    gpt2_frozen)  modes=(--modes adahop); flags=(-e d12 -b 64 -R 0) ;;
    llama_frozen) modes=(--modes adahop); flags=(-e llama:d12 -b 64 -R 0) ;;
    gpt2_cplain)  modes=(--modes adahop); flags=(-e d12 -b 64); calib=plain ;;
    llama_cplain) modes=(--modes adahop); flags=(-e llama:d12 -b 64); calib=plain ;;
    gpt2_head)    modes=(--modes bf16,adahop); flags=(-e d12 -b 32 -H 1) ;;
    llama_head)   modes=(--modes bf16,adahop); flags=(-e llama:d12 -b 32 -H 1) ;;
    d24)          modes=(--modes bf16,adahop); flags=(-e d24 -b 32) ;;
    *) echo "long_runs.sh: error: unknown SET '$set_name' (see -h)" >&2; exit 2 ;;
esac
# the calibration precision is always passed, so that a set means the same with a trainer of another default
flags+=(-C "${calib:-iht}")
# the caller's --modes / --seeds pick runs of the set: the set's own choice then steps aside
for a in "$@"; do
    case $a in --modes) modes=() ;; --seeds|--seed) seeds=() ;; --data-seed) data_seed=() ;; esac
done
exec "$SCRIPT_DIR/run_modes.sh" --root "$root/$set_name" "${modes[@]}" "${seeds[@]}" "${data_seed[@]}" "$@" -- "${flags[@]}" "${common[@]}"
