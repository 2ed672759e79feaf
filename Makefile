# The two commands of the README's quick start. Both install missing packages (scripts/setup.sh),
# configure a Release build in build/ and build it.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: demo test test-long test-sanitize build setup clean bench

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Runs the openb comparison of all six policies on the default trace; prints a table and the
# path of the HTML report.
SHARED ?= ../shared
OPENB ?= $(SHARED)/traces/openb

demo: build
	@$(BUILD)/estuary openb --nodes $(OPENB)/openb_node_list_gpu_node.csv \
	  --pods $(OPENB)/openb_pod_list_default.csv --policy all --seeds 42-51 --tune 1.3 \
	  --reference $(SHARED)/reference/openb_expected_alloc.csv --out out/demo

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long

# The longer checks left out of `make test` (label long): the one-engine comparison and history
# replay over 20 more seeds.
test-long: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L long

# The whole suite under AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer, in its own
# build folder (slow on 2 cores: not part of CI). Any sanitizer report fails the test it occurs in.
SANITIZE_BUILD ?= build-sanitize
test-sanitize: setup
	@cmake -S . -B $(SANITIZE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DESTUARY_SANITIZE=ON \
	  -DESTUARY_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(SANITIZE_BUILD) -j $(JOBS)
	@cd $(SANITIZE_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

bench: build
	@$(BUILD)/bench/estuary_bench

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) out
