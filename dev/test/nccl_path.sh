# Sourced by the GPU test scripts with a binary that links NCCL: when the loader cannot find libnccl for it (NCCL
# installed only inside PyTorch's wheels, nvidia-nccl), LD_LIBRARY_PATH gets the wheel's lib folder.
if ldd "$1" 2>/dev/null | grep -q "libnccl.*not found"; then
    nccl_lib=$(${PYTHON:-python3} -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
    export LD_LIBRARY_PATH="${nccl_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
