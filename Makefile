# Thin wrapper for the two README commands; the build itself is CMake.
BUILD      ?= build
BUILD_SAN  ?= build-san
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps configure build run test test-fast san clean format bench-dcp

all: build

deps:
	@bash scripts/setup-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

run: build
	@bash scripts/run-main.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	$(MAKE) san

# Same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
san: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DATTN_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(BUILD_SAN) -j$(JOBS)
	cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ATTN_SANITIZED=1 \
	  ctest --output-on-failure -j$(JOBS)

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

format:
	bash tests/format_check.sh --fix

clean:
	rm -rf $(BUILD) $(BUILD_SAN)

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
