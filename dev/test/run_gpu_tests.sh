#!/usr/bin/env bash
# GPU tests (needs an NVIDIA GPU, PyTorch for the reference): kernels vs the CPU reference, the whole model
# vs the independent PyTorch GPT-2 (124M) and LLaMA-small (d12), every precision on both, bit-exact resume from a
# checkpoint (GPT-2 and LLaMA), preemption (SIGTERM, kill -9 during checkpointing), main.jsonl against main.log,
# and data-parallel training.
# Usage: dev/test/run_gpu_tests.sh [PART ...]   PART: one of the names below (default: every part, about 500 s on an
# H100), e.g. to split the suite over two shorter runs. Every selected part runs; the exit status is non-zero if any
# failed, 2 for an unknown part.
set -uo pipefail
cd "$(dirname "$0")/../.."
PARTS=(kernels flash nccl mxfp4 fused adahop gpt2 llama modes resume signal recompute chunks jsonl dp export evals)
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; echo "parts: ${PARTS[*]}"; exit 0; fi
for want in "$@"; do
    [[ " ${PARTS[*]} " == *" $want "* ]] || { echo "run_gpu_tests.sh: unknown part '$want' (parts: ${PARTS[*]})" >&2; exit 2; }
done
selected=("$@")
[ ${#selected[@]} -eq 0 ] && selected=("${PARTS[@]}")
# part NAME TITLE: whether part NAME was selected; prints its title when it was
part() {
    [[ " ${selected[*]} " == *" $1 "* ]] || return 1
    echo "== $2"
}
PYTHON=${PYTHON:-python3}
mkdir -p build/ref
failed=()
source dev/test/nccl_path.sh ./train_gpt2_adahop   # NCCL may live only in PyTorch's wheels

if part kernels "kernels vs CPU reference"; then
    ./build/test_kernels || failed+=(test_kernels)
    ./build/test_llama_kernels || failed+=(test_llama_kernels)
fi

if part flash "flash attention vs CPU reference and the cuBLASLt attention; its wgmma / TMA kernels (sm_90a) vs the CPU reference and the mma.sync ones"; then
    ./build/test_flash_attention || failed+=(test_flash_attention)
    ./build/test_flash_wgmma || failed+=(test_flash_wgmma)
fi

if part nccl "NCCL data-parallel layer at world size 1 and at the GPU count: collectives and ZeRO-1 AdamW vs the unsharded update"; then
    bash dev/test/nccl_dp_test.sh || failed+=(test_nccl_dp)
fi

if part mxfp4 "MXFP4 / AdaHOP kernels vs the C reference"; then
    ./build/test_mxfp4_gpu || failed+=(test_mxfp4_gpu)
fi

if part fused "producers that emit operands (GELU, SwiGLU, their backward, LayerNorm, RMSNorm) vs the producer + the separate quantizers, bit for bit"; then
    ./build/test_fused_operands || failed+=(test_fused_operands)
fi

if part adahop "AdaHOP linear layer vs the independent PyTorch implementation (fresh cases, generated on the GPU)"; then
    mkdir -p build/adahop_cases_gpu
    base=$(date +%s)
    echo "  (case i is drawn with seed $base + i: dev/adahop_linear_ref.py --seed S and the spec below replay it)"
    cases=()
    specs=("--strategies 0,0,0" "--strategies 1,1,2 --kind rows" "--strategies 2,2,2 --kind cols" "--strategies 4,4,4"
           "--strategies 3,3,3" "--strategies 1,2,0 --kind heavy" "--strategies 0,1,2 --kind extremes" "--strategies 2,0,1 --sr"
           "--strategies 1,1,1 -N 96 --cin 64 --cout 160 --oe-k 8" "--strategies 0,4,2 --kind cols")
    for i in "${!specs[@]}"; do
        f=build/adahop_cases_gpu/case$i.bin
        $PYTHON dev/adahop_linear_ref.py --seed $((base + i)) ${specs[$i]} --device cuda --out "$f" > /dev/null && cases+=("$f")
    done
    if [ ${#cases[@]} -eq ${#specs[@]} ]; then ./build/test_adahop_linear_gpu "${cases[@]}" || failed+=(test_adahop_linear_gpu)
    else failed+=(adahop_linear_ref.py); fi
fi

# each reference twice: float64 (what is compared) and mixed precision (how far a BF16 engine's step losses drift)
ref_args=(--preset d12 -B 4 -T 64 --device cuda --seed 1337 --lr 1e-4)
if part gpt2 "GPT-2 124M (d12) vs PyTorch reference"; then
    if $PYTHON dev/reference_gpt2.py "${ref_args[@]}" --dtype float64 --write-model build/ref/d12_model.bin \
            --write-ref build/ref/d12_ref.bin &&
       $PYTHON dev/reference_gpt2.py "${ref_args[@]}" --dtype bfloat16 --write-ref build/ref/d12_ref_mixed.bin; then
        ./test_gpt2cu -e build/ref/d12_model.bin -r build/ref/d12_ref.bin -s build/ref/d12_ref_mixed.bin || failed+=(test_gpt2cu)
    else
        failed+=(reference_gpt2.py)
    fi
fi

if part llama "LLaMA-small d12 (GQA, RoPE, SwiGLU) vs PyTorch reference"; then
    if $PYTHON dev/reference_llama.py "${ref_args[@]}" --dtype float64 --write-ref build/ref/llama_d12_ref.bin &&
       $PYTHON dev/reference_llama.py "${ref_args[@]}" --dtype bfloat16 --write-ref build/ref/llama_d12_ref_mixed.bin; then
        ./test_gpt2cu -r build/ref/llama_d12_ref.bin -s build/ref/llama_d12_ref_mixed.bin || failed+=(test_gpt2cu_llama)
    else
        failed+=(reference_llama.py)
    fi
fi

if part modes "10 steps of d12 in every precision"; then
    bash dev/test/modes_test.sh d12 || failed+=(modes_test)
fi

if part modes "10 steps of LLaMA-small d12 in every precision"; then
    bash dev/test/modes_test.sh llama:d12 || failed+=(modes_test_llama)
fi

if part resume "resume from a checkpoint gives the same losses bit for bit"; then
    bash dev/test/resume_test.sh d6 || failed+=(resume_test)
    bash dev/test/resume_test.sh llama:d8 || failed+=(resume_test_llama)
fi

if part signal "SIGTERM mid-run and a kill -9 loop during checkpointing: every -y 1 resume continues exactly; a NaN stops cleanly"; then
    STEPS=24 WORK=build/signal_resume_gpu bash dev/test/signal_resume_test.sh ./train_gpt2_adahop -e d6 -b 8 -t 128 -d 2048 -u 5 -s 0 -a 0 \
        || failed+=(signal_resume_test)
    WORK=build/nan_guard_gpu bash dev/test/nan_guard_test.sh ./train_gpt2_adahop -e d6 -b 8 -t 128 -u 0 -s 0 -l 10 -c 10 \
        || failed+=(nan_guard_test)
fi

if part recompute "-A 1 / -A 2 (MLP pre-activation / also qkv recomputed in the backward pass) give the same numbers with less memory"; then
    bash dev/test/recompute_test.sh d6 || failed+=(recompute_test)
    bash dev/test/recompute_test.sh llama:d8 || failed+=(recompute_test_llama)
fi

if part chunks "-M (the classifier in chunks of tokens): repeatable, the losses of -M 0 within tolerance, the logits' memory less"; then
    bash dev/test/head_chunk_test.sh d6 || failed+=(head_chunk_test)
    bash dev/test/head_chunk_test.sh llama:d8 || failed+=(head_chunk_test_llama)
fi

if part jsonl "main.jsonl: every event equals main.log's, FLOPs per token and MFU recomputed; plot_losses.py reads it"; then
    bash dev/test/jsonl_test.sh d6 || failed+=(jsonl_test)
    bash dev/test/jsonl_test.sh llama:d8 || failed+=(jsonl_test_llama)
fi

if part dp "data parallel: world size 1 through the DP flags equals a plain run; 2 ranks equal 1 rank with twice the accumulation"; then
    bash dev/test/dp_test.sh d6 || failed+=(dp_test)
    bash dev/test/dp_test.sh llama:d8 || failed+=(dp_test_llama)
fi

if part export "Hugging Face export: transformers' logits of trained d12 and llama:d12 equal the trainer's (BF16 tolerance)"; then
    mkdir -p build/export_gpu
    for init in d12 llama:d12; do
        dir=build/export_gpu/${init/:/_}
        rm -rf "$dir"
        ./train_gpt2_adahop -e $init -p bf16 -x 30 -b 8 -t 256 -v 0 -s 0 -n 30 -o $dir > $dir.log || failed+=(export_train_$init)
    done
    $PYTHON dev/test/export_gpu_test.py build/export_gpu/d12/state_00000030.bin build/export_gpu/llama_d12/state_00000030.bin \
        || failed+=(export_gpu_test)
fi

if [ -n "${EVAL_MODEL:-}" ] && [ -n "${EVAL_DIR:-}" ]; then
    if part evals "downstream evals: the trainer's scores of $EVAL_MODEL equal dev/eval_hf.py's within 0.2 points"; then
        bash dev/test/evals_gpu_test.sh "$EVAL_MODEL" "$EVAL_DIR" || failed+=(evals_gpu_test)
    fi
elif part evals "downstream evals vs dev/eval_hf.py: skipped (set EVAL_MODEL=<trained d12 state> EVAL_DIR=<prepare_evals.py output>)"; then
    echo "downstream evals vs dev/eval_hf.py: EVAL_MODEL / EVAL_DIR not set" >> "${TEST_SKIP_LOG:-/dev/null}"
fi

if [ ${#failed[@]} -gt 0 ]; then echo "GPU tests failed: ${failed[*]}"; exit 1; fi
echo "GPU tests: all parts passed (${selected[*]})"
