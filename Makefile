# Thin wrapper for the two README commands; the build itself is CMake.
BUILD      ?= build
BUILD_SAN  ?= build-san
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps configure build run test test-fast san clean format parity

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

# libattn against vLLM itself (opt-in, never part of `test`): makes a venv
# with vllm==0.32.0 from PyPI on first use, answers the seeded cases
# with vLLM's own selection code, compares `attn select --json`, and
# rewrites the CI case file. See docs/vllm-parity.md.
PARITY_ARGS ?=
parity: build
	python3 tools/vllm-parity/parity.py --attn $(BUILD)/bin/attn \
	  --write-cases tests/data/vllm-0.32.0-cases.json $(PARITY_ARGS)

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
