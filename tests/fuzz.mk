# tests/fuzz.mk -- hakmem's fuzzer (tests/fuzz/, docs/build.md "The fuzzer");
# included by tests/tests.mk.
#
#   make fuzz [FUZZ_SECONDS=300] [FUZZ_ARGS=...]
#                   run libFuzzer for FUZZ_SECONDS on the committed corpus
#                   (tests/fuzz/corpus, read only) and its own working corpus
#                   (build/fuzz/corpus); crashes go to build/fuzz/artifacts/
#   make fuzz-merge add the working corpus's inputs that reach new coverage
#                   to tests/fuzz/corpus (keep it to a few dozen small files)
#   make fuzz-bins  build everything below
#
# Binaries (build/tests/fuzz/), each with the operation interpreter FUZZ_OPS
# (tests/fuzz/fuzz_internal.h says which file does what):
#   fuzz_hakmem     libFuzzer target: clang -fsanitize=fuzzer,address,undefined,
#                   hakmem compiled in (-DHAK_NO_OVERRIDE, HAK_DEBUG=1, with
#                   coverage instrumentation), hakmem_* names (hak_prefix.h)
#   replay_asan     replay driver (tests/fuzz/fuzz_replay.c) with tests.mk's
#                   ASan+UBSan objects (HAK_DEBUG=1)
#   replay_tsan     the same with the TSan objects
#   replay          plain build: glibc, or hakmem under LD_PRELOAD
# make test builds the replay drivers, and fuzz_hakmem when clang can build
# a libFuzzer program (tools/install-deps.sh installs clang and
# libclang-rt-14-dev); tests/suite_fuzz.sh runs them.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 300
FUZZ_ARGS ?=
FUZZ_OUT := $(TEST_OUT)/fuzz
FUZZ_WORK := $(BUILD)/fuzz
FUZZ_OPS := $(addprefix tests/fuzz/,fuzz_interp.c fuzz_decode.c fuzz_model.c fuzz_helpers.c \
              fuzz_api.c fuzz_report.c)
FUZZ_SRCS := $(FUZZ_OPS) tests/fuzz/fuzz_ops.h tests/fuzz/fuzz_internal.h
FUZZ_BIN := $(FUZZ_OUT)/fuzz_hakmem
FUZZ_REPLAYS := $(FUZZ_OUT)/replay_asan $(FUZZ_OUT)/replay_tsan $(FUZZ_OUT)/replay
FUZZ_CFLAGS := -std=gnu11 -D_GNU_SOURCE -Iinclude -g -Wall -Wextra -Wno-unused-parameter \
               -Wno-deprecated-declarations $(TEST_NOBUILTIN) -pthread
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_HAK_OBJS := $(patsubst src/%.c,$(FUZZ_OUT)/obj/%.o,$(SRCS))
# libFuzzer's options for make fuzz and make test (suite_fuzz.sh has its own)
FUZZ_RUN_OPTS := -rss_limit_mb=3072 -timeout=30 -max_len=4096 -print_final_stats=1

# "yes" when clang links a libFuzzer program (evaluated only when needed)
FUZZ_CLANG_OK = $(shell printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' | \
                  $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1 && echo yes)

.SECONDARY: $(FUZZ_HAK_OBJS)

$(FUZZ_OUT)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CFLAGS_BASE) -O1 -g -DHAK_NO_OVERRIDE -DHAK_DEBUG=1 $(EXTRA_CFLAGS) $(FUZZ_SAN) \
	    -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_BIN): tests/fuzz/fuzz_target.c $(FUZZ_SRCS) tests/hak_prefix.h $(FUZZ_HAK_OBJS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -O1 $(FUZZ_SAN) -fsanitize=fuzzer $(TEST_PREFIX) tests/fuzz/fuzz_target.c \
	    $(FUZZ_OPS) $(FUZZ_HAK_OBJS) -o $@ -ldl

$(FUZZ_OUT)/replay_asan: tests/fuzz/fuzz_replay.c $(FUZZ_SRCS) tests/hak_prefix.h $(TEST_ASAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) -O1 $(TEST_ASAN) $(TEST_PREFIX) tests/fuzz/fuzz_replay.c $(FUZZ_OPS) \
	    $(TEST_ASAN_OBJS) -o $@ -ldl
$(FUZZ_OUT)/replay_tsan: tests/fuzz/fuzz_replay.c $(FUZZ_SRCS) tests/hak_prefix.h $(TEST_TSAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) -O1 $(TEST_TSAN) $(TEST_PREFIX) tests/fuzz/fuzz_replay.c $(FUZZ_OPS) \
	    $(TEST_TSAN_OBJS) -o $@ -ldl
$(FUZZ_OUT)/replay: tests/fuzz/fuzz_replay.c $(FUZZ_SRCS)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) -O2 tests/fuzz/fuzz_replay.c $(FUZZ_OPS) -o $@ -ldl

.PHONY: fuzz fuzz-merge fuzz-bins
fuzz-bins: $(FUZZ_REPLAYS) $(FUZZ_BIN)

fuzz: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_WORK)/corpus $(FUZZ_WORK)/artifacts
	$(FUZZ_BIN) $(FUZZ_RUN_OPTS) -max_total_time=$(FUZZ_SECONDS) \
	    -artifact_prefix=$(FUZZ_WORK)/artifacts/ $(FUZZ_ARGS) $(FUZZ_WORK)/corpus tests/fuzz/corpus

fuzz-merge: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_WORK)/corpus
	$(FUZZ_BIN) $(FUZZ_RUN_OPTS) -merge=1 tests/fuzz/corpus $(FUZZ_WORK)/corpus

TEST_DEPS += $(FUZZ_REPLAYS) $(if $(FUZZ_CLANG_OK),$(FUZZ_BIN))
test-bins: $(FUZZ_REPLAYS)
