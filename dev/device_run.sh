#!/usr/bin/env bash
# One call on the GPU machine: build (unless the carried binaries load), GPU tests, a short training run on
# the embedded data, then the throughput benchmark; logs go to $OUT (or build/out; all of them also packed into
# $OUT/all_logs.tgz), a short table comes last.
# Usage: dev/device_run.sh [tests] [train] [bench] [kbench] [modes]   (default: the first four; kbench = MXFP4
# kernel benchmark, fused operand producer benchmark and FP8 scaling / algorithm benchmark,
# modes = dev/bench_modes.sh: tok/s and memory of every precision mode at d12/d24/d48,
# reclass = dev/reclass_study.sh on the shards in carry/gut/, carried with the call; profile = dev/profile_step.sh,
# GPU time per kernel group for bf16 and adahop, at d12 or with the trainer flags in PROFILE_FLAGS)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/out}; export OUT
mkdir -p "$OUT" build
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(tests train bench kbench)
want() { [[ " ${parts[*]} " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
source dev/test/nccl_path.sh ./train_gpt2_adahop   # the trainer links NCCL, which may live only in PyTorch's wheels
for bin in train_gpt2_adahop test_gpt2cu build/test_kernels build/test_mxfp4_gpu build/bench_mxfp4 build/test_fused_operands \
           build/bench_fused_operands; do
    if [ ! -x "$bin" ] || ldd "$bin" | grep -q "not found"; then
        echo "building CUDA programs here"; make -j16 cuda > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
        break
    fi
done
status_tests="not run"; status_train="not run"
if want tests; then
    bash dev/test/run_gpu_tests.sh > "$OUT/gpu_tests.log" 2>&1 && status_tests="PASS" || status_tests="FAIL"
    grep -E "FAIL|passed,|gemm|outlier|classifier|native|resume" "$OUT/gpu_tests.log" | head -60
fi
if want train; then
    timeout 300 ./train_gpt2_adahop -o build/default_run > "$OUT/train_default.log" 2>&1 && status_train="PASS" || status_train="FAIL"
    grep -E "^step +(1|50|100|150|200)/|val loss" "$OUT/train_default.log" | head -20
    sed -n '/---- sample ----/,/^-----/p' "$OUT/train_default.log" | tail -4
fi
if want kbench; then
    ./build/bench_mxfp4 > "$OUT/bench_mxfp4.log" 2>&1 || echo "bench_mxfp4 failed"
    ./build/bench_fp8_scaling > "$OUT/bench_fp8_scaling.log" 2>&1 || echo "bench_fp8_scaling failed"
    ./build/bench_fused_operands > "$OUT/bench_fused_operands.log" 2>&1 || echo "bench_fused_operands failed"
fi
if want bench; then bash dev/bench_gpt2.sh > "$OUT/bench.log" 2>&1; fi
if want modes; then bash dev/bench_modes.sh ${MODES_CONFIGS:-} > "$OUT/bench_modes.log" 2>&1; fi
if want profile; then for p in bf16 adahop; do bash dev/profile_step.sh $p ${PROFILE_FLAGS:-} > "$OUT/profile_$p.log" 2>&1; done; fi
if want reclass; then bash dev/reclass_study.sh "carry/gut/*train*.bin" "carry/gut/*val*.bin" ${RECLASS_ARGS:-} > "$OUT/reclass.log" 2>&1; fi
echo
echo "==== summary ($(date -u +%F))"
echo "GPU: $(cat "$OUT/gpu.txt")"
echo "GPU tests: $status_tests   ($(grep -h 'passed,' "$OUT/gpu_tests.log" 2>/dev/null | tr '\n' ';'))"
echo "default training run: $status_train   first/last train loss: $(grep -E '^step +[0-9]+/' "$OUT/train_default.log" 2>/dev/null | sed -n '1p;$p' | awk '{print $5}' | tr '\n' ' ')"
[ -f "$OUT/bench_mxfp4.log" ] && grep '^|' "$OUT/bench_mxfp4.log"
[ -f "$OUT/bench_fp8_scaling.log" ] && grep '^|' "$OUT/bench_fp8_scaling.log"
[ -f "$OUT/bench.log" ] && sed -n '/^| model/,$p' "$OUT/bench.log"
[ -f "$OUT/bench_modes.log" ] && sed -n '/^| model/,$p' "$OUT/bench_modes.log"
[ -f "$OUT/reclass.log" ] && cat "$OUT/reclass.log"
for p in bf16 adahop; do [ -f "$OUT/profile_$p.log" ] && sed -n '1,/^top 20/p' "$OUT/profile_$p.log"; done
# every log in one file: the device tool brings back only a few files from $OUT, none nested deeply
tar czf "$OUT/all_logs.tgz" -C "$OUT" --exclude=all_logs.tgz . 2>/dev/null
exit 0
