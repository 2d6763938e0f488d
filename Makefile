# hakmem build.  Variants (documented in docs/build.md):
#   make            release: build/libhakmem.so (and libhakmem.so.0, a link to it), build/libhakmem.a
#   make debug      debug:   build/debug/libhakmem.so, .a (-O0 -g, internal consistency checks)
#   make stats      stats:   build/stats/libhakmem.so (counts every allocation and free per class)
#   make hardened   hardened: build/hardened/libhakmem.so (canaries, zero on free, quarantine,
#                   guard pages: docs/security.md, "The hardened build")
#   make test       the whole test suite (tests/run_tests.sh), ends with "N passed, N failed"
#   make bench      the allocator comparison (bench/run.py); QUICK=1 for a short run
#   make attack     the attack suite under hakmem, glibc and the peers: misuse caught
#                   per family (mk/attack.mk, tests/attack/, docs/security.md)
#   make ARCH=aarch64   cross-build for 64-bit Arm into build/aarch64/ (docs/build.md);
#                   any CC whose target is not the host's builds into build/<arch>/
#   make test-aarch64   the aarch64 suite under qemu (tests/aarch64.mk)
CC      ?= cc
CXX     ?= c++
CROSS_aarch64 ?= aarch64-linux-gnu-
ifneq ($(filter aarch64 arm64,$(ARCH)),)
ifeq ($(origin CC),default)
CC  := $(CROSS_aarch64)gcc
endif
ifeq ($(origin CXX),default)
CXX := $(CROSS_aarch64)g++
endif
endif
# the target's architecture when it is not the host's (else empty)
TARGET_ARCH_NAME := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine 2>/dev/null)))
CROSS_ARCH := $(filter-out $(firstword $(subst -, ,$(shell cc -dumpmachine 2>/dev/null))),$(TARGET_ARCH_NAME))
BUILD   := build$(if $(CROSS_ARCH),/$(CROSS_ARCH))
SRCS    := $(wildcard src/*.c)
HDRS    := $(wildcard src/*.h src/arch/*.h) include/hakmem.h
CFLAGS_BASE := -std=gnu11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -ftls-model=initial-exec \
               -fno-semantic-interposition -fno-builtin-malloc -fno-stack-protector -fexceptions \
               -Wall -Wextra -Wno-unused-parameter -Iinclude -Isrc -pthread
CFLAGS_RELEASE := -O2 -DNDEBUG -g
CFLAGS_DEBUG   := -O0 -g3 -DHAK_DEBUG=1
CFLAGS_STATS   := -O2 -g -DNDEBUG -DHAK_STATS_FULL=1
CFLAGS_HARDENED := -O2 -g -DNDEBUG -DHAK_HARDENED=1
LDLIBS_LIB := -pthread -ldl
# the soname (mk/install.mk checks that it matches HAKMEM_VERSION_MAJOR)
SONAME  := libhakmem.so.0

REL_OBJS := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(SRCS))
DBG_OBJS := $(patsubst src/%.c,$(BUILD)/debug/obj/%.o,$(SRCS))
STA_OBJS := $(patsubst src/%.c,$(BUILD)/stats/obj/%.o,$(SRCS))
HRD_OBJS := $(patsubst src/%.c,$(BUILD)/hardened/obj/%.o,$(SRCS))

.PHONY: all release debug stats hardened test bench clean soak
all: release
release: $(BUILD)/libhakmem.so $(BUILD)/$(SONAME) $(BUILD)/libhakmem.a
debug: $(BUILD)/debug/libhakmem.so $(BUILD)/debug/$(SONAME) $(BUILD)/debug/libhakmem.a
stats: $(BUILD)/stats/libhakmem.so $(BUILD)/stats/$(SONAME)
hardened: $(BUILD)/hardened/libhakmem.so $(BUILD)/hardened/$(SONAME)

$(BUILD)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS_RELEASE) $(EXTRA_CFLAGS) -c $< -o $@
$(BUILD)/stats/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS_STATS) $(EXTRA_CFLAGS) -c $< -o $@
$(BUILD)/stats/libhakmem.so: $(STA_OBJS)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-z,nodelete -o $@ $^ $(LDLIBS_LIB)
$(BUILD)/hardened/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS_HARDENED) $(EXTRA_CFLAGS) -c $< -o $@
$(BUILD)/hardened/libhakmem.so: $(HRD_OBJS)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-z,nodelete -o $@ $^ $(LDLIBS_LIB)
$(BUILD)/debug/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS_DEBUG) $(EXTRA_CFLAGS) -c $< -o $@

$(BUILD)/libhakmem.so: $(REL_OBJS)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-z,nodelete -o $@ $^ $(LDLIBS_LIB)
# the static libraries leave out hak_dlopen.o (no dlopen in a static link)
$(BUILD)/libhakmem.a: $(REL_OBJS)
	rm -f $@ && ar rcs $@ $(filter-out %/hak_dlopen.o,$^)
$(BUILD)/debug/libhakmem.so: $(DBG_OBJS)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-z,nodelete -o $@ $^ $(LDLIBS_LIB)
$(BUILD)/debug/libhakmem.a: $(DBG_OBJS)
	rm -f $@ && ar rcs $@ $(filter-out %/hak_dlopen.o,$^)
# each libhakmem.so (the file itself) gets a link named after its soname, the
# name that programs linked with -lhakmem ask the loader for: build/ then
# works with -Wl,-rpath or LD_LIBRARY_PATH like an installed library
$(BUILD)/$(SONAME) $(BUILD)/debug/$(SONAME) $(BUILD)/stats/$(SONAME) $(BUILD)/hardened/$(SONAME): %/$(SONAME): %/libhakmem.so
	ln -sfn libhakmem.so $@

-include tests/tests.mk
-include bench/bench.mk
-include mk/install.mk
-include mk/compat.mk
-include mk/attack.mk

# make soak: minutes-long run per profile, RSS drift and syscalls per op (bench/soak.sh)
soak: release $(BUILD)/bench/soak
	bash bench/soak.sh

clean:
	rm -rf $(BUILD)
