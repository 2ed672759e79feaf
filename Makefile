# The two commands of the README's quick start. Both install missing packages (scripts/setup.sh),
# configure a Release build in build/ and build it.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: demo test build setup clean bench

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Runs the openb comparison of all six policies on the default trace; prints a table and the
# path of the HTML report.
demo: build
	@$(BUILD)/estuary openb-compare --out out/demo

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	@$(BUILD)/bench/estuary_bench

clean:
	rm -rf $(BUILD) out
