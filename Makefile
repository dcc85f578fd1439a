# Build and test. `make test` runs every CPU test, compiles and links every CUDA program for sm_90a (in parallel,
# JOBS at a time), on a machine with an NVIDIA GPU runs the GPU tests too, and ends with the list of tests it
# skipped and why. `make train` trains on the embedded data.
CC ?= gcc
NVCC ?= nvcc
# the one Python interpreter of every script and test make runs (they read $PYTHON)
PYTHON ?= python3
export PYTHON
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CFLAGS = -O2 -std=gnu11 -Wall -Wextra -I.
OMPFLAGS = $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo -fopenmp)
# sm_90a: Hopper with its architecture-specific instructions (wgmma: llmc/wgmma.cuh); the binaries run on H100 / H200
GENCODE = -gencode arch=compute_90a,code=sm_90a
NVCCFLAGS = -O3 -std=c++17 -I. $(GENCODE) -Xcompiler -Wall -Xcompiler -fopenmp
NVLIBS = -lcublasLt -lcublas -lgomp
# the data-parallel layer (llmc/nccl_dp.cuh) links NCCL, and OpenMPI when mpicc works (optional: without it,
# ranks meet through a rendezvous file); only the programs that use it get these flags
DP_NVCCFLAGS =
DP_LIBS = -lnccl
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
ifneq ($(MPI_CFLAGS),)
DP_NVCCFLAGS += -DUSE_MPI $(filter -I% -D%,$(MPI_CFLAGS))
DP_LIBS += $(filter -L% -l%,$(shell mpicc --showme:link 2>/dev/null))
endif
BUILD = build

HOST_HEADERS = $(wildcard llmc/*.h) dev/test/test_common.h dev/test/test_rand.h dev/test/test_file.h dev/test/test_shard.h
CUDA_HEADERS = $(wildcard llmc/*.cuh llmc/sm100/*.cuh)
CPU_TESTS = $(BUILD)/test_host_utils $(BUILD)/test_dataloader $(BUILD)/test_tokenizer $(BUILD)/test_gpt2_layers \
            $(BUILD)/test_mxfp4 $(BUILD)/test_adahop_cpu $(BUILD)/test_adahop_state $(BUILD)/test_cpu_modes \
            $(BUILD)/test_zero $(BUILD)/test_rendezvous
CPU_TESTS += $(BUILD)/test_llama_cpu $(BUILD)/test_evals
# the CUPTI kernel profiler is built when the toolkit has CUPTI (in include/ and lib64/, or in extras/CUPTI/)
CUDA_ROOT = $(abspath $(dir $(shell command -v $(NVCC)))..)
PROFILER = $(if $(wildcard $(CUDA_ROOT)/include/cupti.h $(CUDA_ROOT)/extras/CUPTI/include/cupti.h),$(BUILD)/libkernel_profile.so $(BUILD)/test_kernel_profile)
CUDA_PROGRAMS = train_gpt2_adahop test_gpt2cu $(BUILD)/test_kernels $(BUILD)/test_mxfp4_gpu $(BUILD)/bench_mxfp4 \
                $(BUILD)/test_adahop_linear_gpu $(BUILD)/test_flash_attention $(BUILD)/bench_attention $(BUILD)/test_nccl_dp \
                $(BUILD)/bench_fp8_scaling $(BUILD)/test_llama_kernels $(BUILD)/test_fused_operands $(BUILD)/bench_fused_operands $(BUILD)/model_logits_gpu \
                $(BUILD)/test_flash_wgmma $(BUILD)/bench_gelu_epilogue $(BUILD)/bench_classifier $(BUILD)/bench_gemm_algos

.PHONY: all cpu cuda test test-cpu test-python test-gpu test-profiler test-gpu-if-present skip-summary train clean
all: cpu cuda
cpu: train_gpt2 test_gpt2 $(CPU_TESTS) $(BUILD)/bench_quant_error $(BUILD)/test_adahop_case $(BUILD)/model_logits $(BUILD)/train_gpt2_asan
cuda: $(CUDA_PROGRAMS) $(PROFILER)

$(BUILD):
	mkdir -p $(BUILD)

# ---- CPU: reference model, its trainer and tests
train_gpt2: train_gpt2.c $(HOST_HEADERS)
	$(CC) $(CFLAGS) $(OMPFLAGS) $< -o $@ -lm
test_gpt2: test_gpt2.c dev/test/reference_file.h dev/test/reference_checks.h $(HOST_HEADERS)
	$(CC) $(CFLAGS) $(OMPFLAGS) $< -o $@ -lm
$(BUILD)/test_%: dev/test/test_%.c $(HOST_HEADERS) | $(BUILD)
	$(CC) $(CFLAGS) $(OMPFLAGS) $< -o $@ -lm
$(BUILD)/test_llama_cpu: dev/test/reference_file.h dev/test/reference_checks.h
$(BUILD)/test_adahop_case: dev/test/test_adahop_case.c dev/test/adahop_case_file.h $(HOST_HEADERS) | $(BUILD)
	$(CC) $(CFLAGS) $(OMPFLAGS) $< -o $@ -lm
# the CPU reference's logits of a model file of either family (the oracle of dev/test/test_export_hf.py)
$(BUILD)/model_logits: dev/test/model_logits.c dev/test/logits_file.h $(HOST_HEADERS) | $(BUILD)
	$(CC) $(CFLAGS) $(OMPFLAGS) $< -o $@ -lm

# the CPU trainer under AddressSanitizer and UndefinedBehaviorSanitizer, for the input fuzzer (dev/test/fuzz_trainer.py)
$(BUILD)/train_gpt2_asan: train_gpt2.c $(HOST_HEADERS) | $(BUILD)
	$(CC) -O1 -g -std=gnu11 -Wall -Wextra -Wno-unknown-pragmas -I. -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	    -fno-omit-frame-pointer $< -o $@ -lm
$(BUILD)/bench_quant_error: dev/bench_quant_error.c $(HOST_HEADERS) | $(BUILD)
	$(CC) $(CFLAGS) $(OMPFLAGS) $< -o $@ -lm

# ---- CUDA: the trainer, the model test and the kernel tests (compile and link anywhere nvcc exists)
train_gpt2_adahop test_gpt2cu $(BUILD)/test_nccl_dp $(BUILD)/model_logits_gpu: NVCCFLAGS += $(DP_NVCCFLAGS)
train_gpt2_adahop test_gpt2cu $(BUILD)/test_nccl_dp $(BUILD)/model_logits_gpu: NVLIBS += $(DP_LIBS)
# the trainer records the commit of its sources in main.jsonl: the last commit that changed train_gpt2_adahop.cu or
# llmc/ ("-dirty": they have uncommitted changes), so that commits elsewhere (docs, scripts, tests) leave the identity
# of the trainer, which paired runs must share, as it was
TRAINER_SOURCES = train_gpt2_adahop.cu llmc
BUILD_COMMIT := $(shell c=$$(git log -1 --format=%h --abbrev=7 -- $(TRAINER_SOURCES) 2>/dev/null); [ -n "$$c" ] && \
    { git diff --quiet HEAD -- $(TRAINER_SOURCES) && echo $$c || echo $$c-dirty; } || echo unknown)
train_gpt2_adahop: NVCCFLAGS += -DBUILD_COMMIT='"$(BUILD_COMMIT)"'
train_gpt2_adahop: train_gpt2_adahop.cu $(HOST_HEADERS) $(CUDA_HEADERS)
	$(NVCC) $(NVCCFLAGS) $< -o $@ $(NVLIBS)
test_gpt2cu: test_gpt2.cu train_gpt2_adahop.cu dev/test/reference_file.h $(HOST_HEADERS) $(CUDA_HEADERS)
	$(NVCC) $(NVCCFLAGS) $< -o $@ $(NVLIBS)
# the trainer's logits of a model file (dev/test/export_gpu_test.py)
$(BUILD)/model_logits_gpu: train_gpt2_adahop.cu dev/test/logits_file.h
$(BUILD)/%: dev/cuda/%.cu $(HOST_HEADERS) $(CUDA_HEADERS) $(wildcard dev/test/*.h dev/cuda/*.cuh) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) $< -o $@ $(NVLIBS)
# the CUPTI kernel profiler that dev/profile_step.sh loads into the trainer (CUDA_INJECTION64_PATH), and its CPU test
$(BUILD)/libkernel_profile.so: dev/cuda/kernel_profile.c | $(BUILD)
	$(CC) $(CFLAGS) -fPIC -shared -I$(CUDA_ROOT)/include -I$(CUDA_ROOT)/extras/CUPTI/include $< -o $@ \
	    -L$(CUDA_ROOT)/lib64 -L$(CUDA_ROOT)/extras/CUPTI/lib64 -lcupti
$(BUILD)/test_kernel_profile: dev/cuda/test_kernel_profile.c dev/cuda/kernel_profile.c dev/test/test_common.h | $(BUILD)
	$(CC) $(CFLAGS) -I$(CUDA_ROOT)/include -I$(CUDA_ROOT)/extras/CUPTI/include $< -o $@ \
	    -L$(CUDA_ROOT)/lib64 -L$(CUDA_ROOT)/extras/CUPTI/lib64 -lcupti

# ---- tests
# A test that cannot run here (a missing package, no GPU) says so and appends "what: why" to the file
# $TEST_SKIP_LOG names: one file per test target, build/skipped_<target>.txt, listed at the end of `make test`.
SKIP_LOG = $(abspath $(BUILD))/skipped
test-cpu: export TEST_SKIP_LOG = $(SKIP_LOG)_cpu.txt
test-python: export TEST_SKIP_LOG = $(SKIP_LOG)_python.txt
test-gpu: export TEST_SKIP_LOG = $(SKIP_LOG)_gpu.txt

# the Python requirements, installed once per interpreter (the stamp's name comes from its path); a numpy the
# interpreter already has stays as it is (PyTorch and other compiled packages were built against it), the other
# packages are picked to fit it
PYTHON_DEPS = $(BUILD)/.python-deps-$(shell $(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null | cksum | cut -d' ' -f1)
$(PYTHON_DEPS): dev/data/requirements.txt scripts/requirements.txt dev/requirements.txt | $(BUILD)
	@$(PYTHON) -c 'import numpy; print("numpy==" + numpy.__version__)' > $@.constraints 2>/dev/null || : > $@.constraints
	$(PYTHON) -m pip install -q -c $@.constraints -r dev/data/requirements.txt -r scripts/requirements.txt -r dev/requirements.txt && touch $@ \
	    || echo "warning: could not install the Python requirements into $(PYTHON)"

test-cpu: cpu $(BUILD)/train_gpt2_asan
	@rm -f $$TEST_SKIP_LOG
	@for t in $(CPU_TESTS); do echo "== $$t"; ./$$t || exit 1; done
	@echo "== test_gpt2 (CPU reference vs PyTorch fixture)"; ./test_gpt2
	@echo "== CPU reference trains a tiny model"; bash dev/test/cpu_train_smoke.sh
	@echo "== CPU reference trains in every precision mode"; bash dev/test/cpu_modes_smoke.sh
	@echo "== the data order is -D's, whatever -r (CPU trainer)"; bash dev/test/cpu_data_seed_test.sh
	@echo "== the -o directory: another run's files refused (-y 2 replaces them), locked, stale temporaries removed; SIGHUP/SIGQUIT; FIFOs refused (CPU trainer)"; bash dev/test/run_dir_test.sh
	@echo "== AdaHOP linear: PyTorch oracle vs C reference"; bash dev/test/adahop_cases.sh
	@echo "== dev/ab_trainers.sh with fake trainers"; bash dev/test/ab_trainers_test.sh
	@echo "== fuzzed shards, checkpoints, tokenizer files and flags vs the CPU trainer under ASan + UBSan"; \
	 $(PYTHON) dev/test/fuzz_trainer.py --trainer $(BUILD)/train_gpt2_asan
	@echo "== SIGTERM and a kill -9 loop during checkpointing, each resumed with -y 1 (CPU trainer, spike skipping on)"; \
	 $(PYTHON) dev/test/fuzz_trainer.py --write-data $(BUILD)/tiny_data && OMP_NUM_THREADS=1 STEPS=300 WORK=$(BUILD)/signal_resume \
	 bash dev/test/signal_resume_test.sh ./train_gpt2 -e dev/test/fixtures/tiny_model.bin -i $(BUILD)/tiny_data/train.bin \
	 -j $(BUILD)/tiny_data/val.bin -z $(BUILD)/tiny_data/tok.bin -b 2 -t 16 -g 0 -L 1.5 -Z 2
	@echo "== a diverging run stops at the NaN/Inf loss, its newest checkpoint intact (CPU trainer)"; \
	 OMP_NUM_THREADS=1 WORK=$(BUILD)/nan_guard bash dev/test/nan_guard_test.sh ./train_gpt2 -e dev/test/fixtures/tiny_model.bin \
	 -i $(BUILD)/tiny_data/train.bin -j $(BUILD)/tiny_data/val.bin -b 2 -t 16 -g 0 -l 10 -c 10

# the GPT-2 BPE ranks for the tests that tokenize, when the repository has them
RANKS_ARG = $(if $(wildcard data/gpt2.tiktoken),--ranks data/gpt2.tiktoken)
test-python: $(PYTHON_DEPS) $(BUILD)/model_logits train_gpt2
	@rm -f $$TEST_SKIP_LOG
	@echo "== dev/data/test_tokenize_text.py"; $(PYTHON) dev/data/test_tokenize_text.py
	@echo "== dev/test/test_doc_links.py (every relative link, #anchor and code-span path of the Markdown files resolves)"; $(PYTHON) dev/test/test_doc_links.py
	@echo "== dev/test/test_plot_losses.py (plot_losses.py on synthetic logs)"; $(PYTHON) dev/test/test_plot_losses.py
	@echo "== dev/test/test_run_modes.py (run_modes.sh and long_runs.sh with a fake trainer)"; $(PYTHON) dev/test/test_run_modes.py
	@echo "== dev/test/test_bench_sdpa.py (bench_sdpa.py --ours and ab_flash.sh with fake test_flash_wgmma builds)"; $(PYTHON) dev/test/test_bench_sdpa.py
	@echo "== dev/test/test_export_hf.py (Hugging Face export vs the CPU reference)"; \
	 $(PYTHON) dev/test/test_export_hf.py $(RANKS_ARG)
	@echo "== dev/test/test_evals.py (prepare_evals.py; train_gpt2 -E vs dev/eval_hf.py on the exported model)"; \
	 $(PYTHON) dev/test/test_evals.py $(RANKS_ARG)
	@echo "== dev/test/test_reference_mixed.py (the PyTorch oracles in mixed precision, test_gpt2cu -s's input)"; \
	 $(PYTHON) dev/test/test_reference_mixed.py
	@echo "== dev/test/fuzz_tools.py (malformed inputs and output paths vs export_hf, prepare_evals, tokenize_text, eval_hf, plot_losses)"; \
	 $(PYTHON) dev/test/fuzz_tools.py

test-gpu: cuda
	@rm -f $$TEST_SKIP_LOG
	bash dev/test/run_gpu_tests.sh

test-profiler: $(PROFILER) | $(BUILD)
	@rm -f $(SKIP_LOG)_profiler.txt; \
	 if [ -n "$(PROFILER)" ]; then echo "== test_kernel_profile (the CUPTI profiler's table, no GPU)"; ./$(BUILD)/test_kernel_profile; \
	 else echo "test_kernel_profile: no CUPTI headers in $(CUDA_ROOT), kernel profiler not built" | tee $(SKIP_LOG)_profiler.txt; fi

test-gpu-if-present: | $(BUILD)
	@if nvidia-smi -L >/dev/null 2>&1; then $(MAKE) --no-print-directory test-gpu; \
	 else echo "GPU tests: no NVIDIA GPU here (the CUDA programs were compiled and linked for sm_90a)" | tee $(SKIP_LOG)_gpu.txt; fi

skip-summary:
	@if cat $(SKIP_LOG)_*.txt 2>/dev/null | grep -q .; then echo "== skipped:"; cat $(SKIP_LOG)_*.txt | sed 's/^/  /'; \
	 else echo "== no tests skipped"; fi

# builds everything JOBS at a time (each target's output kept together), then runs the tests one after the other;
# the list of skipped tests is printed whether or not a test failed
test: | $(BUILD)
	@rm -f $(SKIP_LOG)_*.txt
	@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target cpu cuda
	@$(MAKE) --no-print-directory -j1 test-cpu test-python test-profiler test-gpu-if-present; status=$$?; \
	 $(MAKE) --no-print-directory skip-summary; exit $$status

train: train_gpt2_adahop
	./train_gpt2_adahop

clean:
	rm -rf $(BUILD) train_gpt2 test_gpt2 train_gpt2_adahop test_gpt2cu
