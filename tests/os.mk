# tests/os.mk -- test builds for tests/suite_os.sh (included by tests/tests.mk).
#
#   build/tests/test_os                 (tests.mk's plain build of tests/test_os.c)
#   build/tests/os/test_os_lowmap       tests/test_os.c with hakmem compiled in
#   build/tests/os/test_os_lowmap_debug   (-DHAK_NO_OVERRIDE, hakmem_* names via
#                                       hak_prefix.h) and HAK_TEST_ADDRESS_BITS=40:
#                                       a region map of 1 TiB, so that ordinary
#                                       mmap results (0x7f...) fall outside it.
#                                       Release (-O1 -DNDEBUG) and HAK_DEBUG=1.
# Both are in TEST_DEPS (make test) and test-bins.

OS_LOWMAP_BITS := 40
OS_LOWMAP_CFLAGS = $(CFLAGS_BASE) -g -DHAK_NO_OVERRIDE -DHAK_TEST_ADDRESS_BITS=$(OS_LOWMAP_BITS) \
                   $(EXTRA_CFLAGS)
OS_REL_OBJS := $(patsubst src/%.c,$(TEST_OUT)/os/obj/%.o,$(SRCS))
OS_DBG_OBJS := $(patsubst src/%.c,$(TEST_OUT)/os/debug/obj/%.o,$(SRCS))
OS_BINS := $(TEST_OUT)/test_os $(TEST_OUT)/os/test_os_lowmap $(TEST_OUT)/os/test_os_lowmap_debug

.SECONDARY: $(OS_REL_OBJS) $(OS_DBG_OBJS)

$(TEST_OUT)/os/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(OS_LOWMAP_CFLAGS) -O1 -DNDEBUG -c $< -o $@
$(TEST_OUT)/os/debug/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(OS_LOWMAP_CFLAGS) -O0 -DHAK_DEBUG=1 -c $< -o $@

$(TEST_OUT)/os/test_os_lowmap: tests/test_os.c $(TEST_HDRS) tests/hak_prefix.h $(OS_REL_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O1 -DHAK_TEST_LOWMAP=$(OS_LOWMAP_BITS) $(TEST_PREFIX) $< $(OS_REL_OBJS) -o $@ -ldl
$(TEST_OUT)/os/test_os_lowmap_debug: tests/test_os.c $(TEST_HDRS) tests/hak_prefix.h $(OS_DBG_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O1 -DHAK_TEST_LOWMAP=$(OS_LOWMAP_BITS) $(TEST_PREFIX) $< $(OS_DBG_OBJS) -o $@ -ldl

TEST_DEPS += $(OS_BINS)
test-bins: $(OS_BINS)
