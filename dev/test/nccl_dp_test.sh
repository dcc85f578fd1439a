#!/usr/bin/env bash
# The NCCL data-parallel layer (build/test_nccl_dp) at world size 1 and, on a machine with several GPUs, at the
# world size of its GPU count: one process per GPU through a rendezvous file in a fresh folder, rank 0 in the
# foreground. Every rank must pass. Needs a GPU. usage: nccl_dp_test.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source dev/test/nccl_path.sh ./build/test_nccl_dp
./build/test_nccl_dp || exit 1
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$gpus" -lt 2 ]; then echo "test_nccl_dp: 1 GPU, world size 1 only"; exit 0; fi
dir=$(mktemp -d)
pids=()
for ((r = 1; r < gpus; r++)); do
    timeout 300 ./build/test_nccl_dp --rank $r --world "$gpus" --rendezvous "$dir/rdz" > "$dir/rank$r.txt" 2>&1 &
    pids+=($!)
done
timeout 300 ./build/test_nccl_dp --rank 0 --world "$gpus" --rendezvous "$dir/rdz"
rc=$?
for ((r = 1; r < gpus; r++)); do
    wait "${pids[$((r - 1))]}" || { rc=1; echo "rank $r failed:"; tail -5 "$dir/rank$r.txt"; }
done
rm -rf "$dir"
[ $rc -eq 0 ] && echo "test_nccl_dp: world size $gpus passed on every rank"
exit $rc
