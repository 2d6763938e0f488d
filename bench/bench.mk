# bench/bench.mk -- benchmark workloads and `make bench` (included by ../Makefile).
#   make bench            full comparison (5 interleaved repetitions, up to 20 for
#                         a workload whose verdict is open; about 7 min: 6 min 37 s and 6 min 40 s on fresh clones, 2026-11-25)
#   make bench QUICK=1    short comparison (3 repetitions, < 3 min; verdicts by the
#                         t interval where the difference is large: docs/benchmarks.md)
#   make bench PEERS="name=/path/lib.so ..."
#                         add preloadable allocators (e.g. mimalloc 3.x,
#                         snmalloc, rpmalloc built from source) to every table,
#                         chart and verdict; combines with QUICK=1
#   make bench-bins       only build the workload programs into $(BUILD)/bench/
#   make bench-snapshot   copy the last run's results (build/bench/results/) into
#                         results/, the committed snapshot; runs nothing
# make bench writes only under $(BUILD)/ (results: $(BUILD)/bench/results/), so
# it leaves the git tree clean; results/ changes only through bench-snapshot.
# Workloads are plain C programs calling malloc/free; every allocator runs the
# same binary (peers and hakmem via LD_PRELOAD), see docs/benchmarks.md.
BENCH_DIR    := $(BUILD)/bench
BENCH_NAMES  := random_mixed larson prodcons thread_churn churn_mixed false_sharing \
                realloc_growth large_blocks large_heap fragmentation request_arena
BENCH_BINS   := $(addprefix $(BENCH_DIR)/,$(BENCH_NAMES))
BENCH_CFLAGS := -std=gnu11 -D_GNU_SOURCE -O2 -g -pthread -Wall -Wextra -Wno-unused-parameter
BENCH_LDLIBS := -pthread -ldl -lm
BENCH_PY     := /usr/bin/python3

$(BENCH_DIR)/%: bench/%.c bench/bench_common.h bench/bench.mk include/hakmem.h
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) $< -o $@ $(BENCH_LDLIBS)

.PHONY: bench-bins bench-setup bench-snapshot
bench-bins: $(BENCH_BINS)

# Installs missing peers (mimalloc, jemalloc, tcmalloc, matplotlib, strace)
# with apt-get when run as root; otherwise fails naming what is missing.
bench-setup:
	@sh bench/setup.sh

bench: release $(BENCH_BINS) bench-setup
	$(BENCH_PY) bench/run.py $(if $(QUICK),--quick,--until-verdict 20)$(if $(strip $(PEERS)), --peers '$(strip $(PEERS))')

bench-snapshot:
	$(BENCH_PY) bench/run.py --snapshot

# tests/suite_bench.sh smoke-runs every workload binary.
TEST_DEPS += $(BENCH_BINS)
