# mk/compat.mk -- helper programs for tests/suite_compat.sh and
# tests/suite_env.sh, built into build/compat/.  Works included from the
# top-level Makefile (-include mk/compat.mk) or on its own:
#     make -f mk/compat.mk compat-bins      (needs build/libhakmem.{so,a})
BUILD ?= build
CC ?= cc
COMPAT_OUT := $(BUILD)/compat
COMPAT_NOBUILTIN := $(foreach f,malloc calloc realloc free aligned_alloc posix_memalign,-fno-builtin-$(f))
COMPAT_CFLAGS := -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Wno-unused-parameter \
                 -Wno-deprecated-declarations -Wno-use-after-free -Wno-alloc-size-larger-than \
                 $(COMPAT_NOBUILTIN) -Iinclude -pthread
COMPAT_WHOLE := -Wl,--whole-archive $(BUILD)/libhakmem.a -Wl,--no-whole-archive

COMPAT_BINS := $(COMPAT_OUT)/libc_internal $(COMPAT_OUT)/libc_internal_static \
               $(COMPAT_OUT)/glibc_api $(COMPAT_OUT)/glibc_api_static \
               $(COMPAT_OUT)/dl_main $(COMPAT_OUT)/dl_lib.so $(COMPAT_OUT)/dl_lib_linked.so \
               $(COMPAT_OUT)/fork_exec $(COMPAT_OUT)/oom $(COMPAT_OUT)/thp

.PHONY: compat-bins
compat-bins: $(COMPAT_BINS)

# plain dynamic builds: run with and without LD_PRELOAD
$(COMPAT_OUT)/%: tests/compat/%.c include/hakmem.h
	@mkdir -p $(dir $@)
	$(CC) $(COMPAT_CFLAGS) $< -o $@ -ldl

# fully static (gcc -static): hakmem must serve libc's internal allocations too
$(COMPAT_OUT)/%_static: tests/compat/%.c include/hakmem.h $(BUILD)/libhakmem.a
	@mkdir -p $(dir $@)
	$(CC) $(COMPAT_CFLAGS) -static $< $(COMPAT_WHOLE) -o $@

$(COMPAT_OUT)/dl_lib.so: tests/compat/dl_lib.c
	@mkdir -p $(dir $@)
	$(CC) $(COMPAT_CFLAGS) -shared -fPIC $< -o $@

# the same plug-in with libhakmem as a dependency of its own: under
# RTLD_DEEPBIND its local lookup scope then finds hakmem before libc
$(COMPAT_OUT)/lib/libhakmem.so.0: $(BUILD)/libhakmem.so
	@mkdir -p $(dir $@)
	ln -sf ../../libhakmem.so $@
$(COMPAT_OUT)/dl_lib_linked.so: tests/compat/dl_lib.c $(COMPAT_OUT)/lib/libhakmem.so.0
	@mkdir -p $(dir $@)
	$(CC) $(COMPAT_CFLAGS) -shared -fPIC $< -o $@ -Wl,--no-as-needed -L$(COMPAT_OUT)/lib \
	    -l:libhakmem.so.0 -Wl,-rpath,'$$ORIGIN/lib'

# `make test` builds them too when this file is included by the top-level Makefile
TEST_DEPS += compat-bins
