# tests/aarch64.mk -- the aarch64 suite (tests/suite_aarch64.sh); included by
# tests/tests.mk in native builds only.
#
#   make test-aarch64   cross-build the libraries and the test programs for
#                       aarch64 (a sub-make with ARCH=aarch64, into
#                       build/aarch64/), then run suite_aarch64.sh: each
#                       program under qemu-aarch64-static, on this machine
#   make aarch64-bins   only build them
#
# `make test` builds them too when the cross tools are installed
# (gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
# qemu-user-static; tools/install-deps.sh installs them); without them the
# suite reports SKIP.
#
# Programs (build/aarch64/): libhakmem.{so,a}, debug/libhakmem.{so,a},
# hardened/libhakmem.so; tests/test_api, test_stress, test_misuse, test_cxx,
# test_hardened, test_api_static,
# test_stress_static; compat/glibc_api, compat/glibc_api_static,
# compat/libc_internal_static; tests/os/test_os_lowmap{,_debug} -- the same
# sources and rules as the native builds (tests.mk, mk/compat.mk, os.mk),
# with the cross compiler.

ifeq ($(CROSS_ARCH),)
A64_BUILD := build/aarch64
A64_BINS := $(addprefix $(A64_BUILD)/tests/,test_api test_stress test_misuse test_cxx \
                test_api_static test_stress_static test_hardened) \
            $(addprefix $(A64_BUILD)/compat/,glibc_api glibc_api_static libc_internal_static)
# the region-map tests of tests/os.mk with a 2^36 map: qemu's own mmap results
# (about 2^38) fall outside it, as 0x7f... ones do for the native 2^40 map
A64_LOWMAP_BITS := 36
A64_OS_BINS := $(addprefix $(A64_BUILD)/tests/os/,test_os_lowmap test_os_lowmap_debug)
A64_TOOLS := $(shell for t in $(CROSS_aarch64)gcc $(CROSS_aarch64)g++ qemu-aarch64-static; do command -v $$t; done 2>/dev/null | wc -l)

.PHONY: aarch64-bins test-aarch64
aarch64-bins:
	@$(MAKE) --no-print-directory ARCH=aarch64 OS_LOWMAP_BITS=$(A64_LOWMAP_BITS) release debug hardened \
	    $(A64_BINS) $(A64_OS_BINS)

test-aarch64: aarch64-bins
	TEST_SUITES=aarch64 bash tests/run_tests.sh

ifeq ($(strip $(A64_TOOLS)),3)
TEST_DEPS += aarch64-bins
endif
endif
