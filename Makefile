# The two commands of the README's quick start. Both install missing packages (scripts/setup.sh),
# configure a Release build in build/ and build it.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: demo demo-openb test test-long test-sanitize build setup clean bench install package

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# `make demo`: the embedded scenario (examples/demo.yaml: a generated cluster of 4,096 GPUs, two
# days of HP services, HP training gangs, LP elastic and spot jobs and node failures), estuary's
# configuration against the plain alternatives; prints a table and the path of out/demo/report.html.
# Where the public openb traces are (OPENB_DIR, default ../shared/traces/openb), it then also runs
# the FGD reproduction (`make demo-openb`).
DEMO_METRICS ?= hp_sched_delay_p90_s,hp_sched_delay_p99_s,idle_gpu_hours,gpu_alloc_pct_mean,modelled_util_pct,evictions_count,lp_jobs_finished_count,lp_jct_mean_s,jobs_pending_end_count
demo: build
	@$(BUILD)/estuary simulate examples/demo.yaml --out out/demo --table $(DEMO_METRICS)
	@if [ -f $(OPENB_DIR)/openb_node_list_gpu_node.csv ]; then \
	  echo; $(MAKE) --no-print-directory demo-openb-run; \
	else \
	  echo; echo "(the FGD reproduction needs the public openb traces in $(OPENB_DIR); README.md, \"Public traces\")"; \
	fi

# The FGD paper's openb comparison of all six policies on the default trace (10 seeds, tune 1.3),
# next to the published numbers when ../shared/reference has them; out/demo-openb/report.html.
SHARED ?= ../shared
OPENB_DIR ?= $(SHARED)/traces/openb
REFERENCE ?= $(SHARED)/reference/openb_expected_alloc.csv
demo-openb: build demo-openb-run

.PHONY: demo-openb-run
demo-openb-run:
	@$(BUILD)/estuary openb --nodes $(OPENB_DIR)/openb_node_list_gpu_node.csv \
	  --pods $(OPENB_DIR)/openb_pod_list_default.csv --policy all --seeds 42-51 --tune 1.3 \
	  $(if $(wildcard $(REFERENCE)),--reference $(REFERENCE)) --out out/demo-openb

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

# `make install`: the binary, bash completion, examples, docs, the default configuration
# (PREFIX/etc/estuary/config.yaml) and the systemd units under PREFIX (default /usr/local).
PREFIX ?= /usr/local
install: build
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	@cmake --install $(BUILD)

# `make package`: a Debian package (CPack) installing under /usr, its configuration in
# /etc/estuary; written to $(BUILD)/estuary_VERSION_ARCH.deb. The install prefix is a setting of
# the build folder: install and package set it each time (nothing recompiles for it).
package: build
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
	@cd $(BUILD) && cpack -G DEB

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) out
