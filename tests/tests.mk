# tests/tests.mk -- test binaries and `make test`; included by the top-level
# Makefile (before bench/bench.mk, which appends to TEST_DEPS).
#
#   make test        install missing Debian packages (tools/install-deps.sh),
#                    build the library, the bench deps and every test binary,
#                    then run tests/run_tests.sh (last line "N passed, N failed")
#   make test-bins   only build the test binaries (with the stats library and
#                    the attack programs, which suites use too)
#
# Binaries (all in build/tests/):
#   test_api, test_stress           plain builds: run on glibc or under LD_PRELOAD
#                                   (every tests/test_*.c is built this way)
#   test_api_static, test_stress_static
#                                   linked with build/libhakmem.a (whole archive)
#   test_cxx, check_preload         helpers for suite_programs.sh
#   hang_blocked                    blocks every signal and sleeps: suite_crash.sh's
#                                   test of the harness's time limit
#   asan/test_api, asan/test_stress hakmem built -DHAK_NO_OVERRIDE with ASan+UBSan
#                                   (and HAK_DEBUG=1 consistency checks),
#   tsan/test_stress                resp. TSan; tests use hakmem_* via hak_prefix.h
#   vg/test_api, vg/test_stress     same prefix build without sanitizer, for valgrind

TEST_OUT := $(BUILD)/tests
TEST_HDRS := $(filter-out tests/hak_prefix.h,$(wildcard tests/*.h))
TEST_NOBUILTIN := $(foreach f,malloc calloc realloc free reallocarray posix_memalign \
                    aligned_alloc memalign valloc pvalloc malloc_usable_size,-fno-builtin-$(f))
# -Wno-*: the tests deliberately use blocks after a failed realloc and pass
# impossible sizes.
TEST_CFLAGS := -std=gnu11 -D_GNU_SOURCE -Iinclude -g -Wall -Wextra -Wno-unused-parameter \
               -Wno-use-after-free -Wno-alloc-size-larger-than $(TEST_NOBUILTIN) -pthread
TEST_CXXFLAGS := -std=c++17 -O2 -g -Wall -Wextra -fsized-deallocation -faligned-new \
                 -fno-allocation-dce -pthread
TEST_STATIC_LIB := -Wl,--whole-archive $(BUILD)/libhakmem.a -Wl,--no-whole-archive

# sanitizer / valgrind builds of the allocator: hakmem_* names only
TEST_PREFIX := -include tests/hak_prefix.h -Iinclude
TEST_ASAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
TEST_TSAN := -fsanitize=thread
TEST_HAK_CFLAGS = $(CFLAGS_BASE) -O1 -g -DHAK_NO_OVERRIDE $(EXTRA_CFLAGS)
TEST_ASAN_OBJS := $(patsubst src/%.c,$(TEST_OUT)/asan/obj/%.o,$(SRCS))
TEST_TSAN_OBJS := $(patsubst src/%.c,$(TEST_OUT)/tsan/obj/%.o,$(SRCS))
TEST_VG_OBJS := $(patsubst src/%.c,$(TEST_OUT)/vg/obj/%.o,$(SRCS))

# keep the objects (they would otherwise be intermediate files of the pattern rules)
.SECONDARY: $(TEST_ASAN_OBJS) $(TEST_TSAN_OBJS) $(TEST_VG_OBJS)

# every tests/test_*.c gets a plain build (test_api, test_stress, test_misuse, ...)
TEST_BINS := $(patsubst tests/%.c,$(TEST_OUT)/%,$(wildcard tests/test_*.c)) \
             $(TEST_OUT)/test_api_static $(TEST_OUT)/test_stress_static \
             $(TEST_OUT)/test_cxx $(TEST_OUT)/check_preload $(TEST_OUT)/unit_blocktest \
             $(TEST_OUT)/hang_blocked \
             $(TEST_OUT)/asan/test_api $(TEST_OUT)/asan/test_stress \
             $(TEST_OUT)/tsan/test_stress $(TEST_OUT)/vg/test_api $(TEST_OUT)/vg/test_stress

$(TEST_OUT)/%: tests/%.c $(TEST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O2 $< -o $@ -ldl
$(TEST_OUT)/%_static: tests/%.c $(TEST_HDRS) $(BUILD)/libhakmem.a
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O2 -rdynamic $< $(TEST_STATIC_LIB) -o $@ -pthread -ldl
# white-box: the block test's arithmetic, against src/ (no allocator linked in)
$(TEST_OUT)/unit_blocktest: tests/unit_blocktest.c src/hak_size.c $(HDRS) $(TEST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -O2 -g -Wall -Wextra -Wno-unused-parameter \
	    -Wno-unused-function tests/unit_blocktest.c src/hak_size.c -o $@ -pthread
$(TEST_OUT)/test_cxx: tests/test_cxx.cc
	@mkdir -p $(dir $@)
	$(CXX) $(TEST_CXXFLAGS) $< -o $@ -ldl

$(TEST_OUT)/asan/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_HAK_CFLAGS) -DHAK_DEBUG=1 $(TEST_ASAN) -c $< -o $@
$(TEST_OUT)/tsan/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_HAK_CFLAGS) $(TEST_TSAN) -c $< -o $@
$(TEST_OUT)/vg/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_HAK_CFLAGS) -c $< -o $@

$(TEST_OUT)/asan/%: tests/%.c $(TEST_HDRS) tests/hak_prefix.h $(TEST_ASAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O1 $(TEST_ASAN) $(TEST_PREFIX) $< $(TEST_ASAN_OBJS) -o $@ -ldl
$(TEST_OUT)/tsan/%: tests/%.c $(TEST_HDRS) tests/hak_prefix.h $(TEST_TSAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O1 $(TEST_TSAN) $(TEST_PREFIX) $< $(TEST_TSAN_OBJS) -o $@ -ldl
$(TEST_OUT)/vg/%: tests/%.c $(TEST_HDRS) tests/hak_prefix.h $(TEST_VG_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O1 $(TEST_PREFIX) $< $(TEST_VG_OBJS) -o $@ -ldl

.PHONY: test test-run test-bins
test-bins: $(TEST_BINS)

# Step 1 installs missing packages (quiet no-op when all are present), then a
# sub-make builds and runs everything, so a fresh Debian box needs only `make`.
test:
	@bash tools/install-deps.sh --quiet
	@$(MAKE) --no-print-directory test-run

# TEST_DEPS is extended by bench/bench.mk, included after this file: expand
# it only when the prerequisites are needed.
.SECONDEXPANSION:
test-run: release debug $$(TEST_DEPS) $$(TEST_BINS)
	bash tests/run_tests.sh

# the stats build and the misuse tests (suite_misuse.sh)
TEST_DEPS += $(BUILD)/stats/libhakmem.so $(BUILD)/stats/$(SONAME) $(TEST_OUT)/test_misuse $(TEST_OUT)/test_stale_keys
test-bins: $(BUILD)/stats/libhakmem.so $(BUILD)/stats/$(SONAME)

# Further test makefiles (tests/*.mk), one per concern: each adds its binaries
# to TEST_DEPS and documents its own targets.
-include $(sort $(filter-out tests/tests.mk,$(wildcard tests/*.mk)))
