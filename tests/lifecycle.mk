# tests/lifecycle.mk -- test builds of the library for tests/suite_lifecycle.sh
# (included by tests/tests.mk; built by make test-bins and make test).
#
#   build/tests/lifecycle/tag/libhakmem.so     release flags, heap tags counted from
#                                              LC_TAG_START (HAK_TEST_TAG_START), so that a
#                                              few dozen threads run out of region-map tags
#   build/tests/lifecycle/tagdbg/libhakmem.so  the same with the debug build's consistency checks
#   build/tests/lifecycle/nokey/libhakmem.so   release flags, pthread_key_create treated as
#                                              failed (HAK_TEST_NO_THREAD_KEY): the fallback
#                                              thread-exit handler
# Each has its own object directory, like the asan/tsan/vg builds.

LC_OUT := $(TEST_OUT)/lifecycle
LC_TAG_START := 0x7ff0
LC_VARIANTS := tag tagdbg nokey
LC_CFLAGS_tag := $(CFLAGS_RELEASE) -DHAK_TEST_TAG_START=$(LC_TAG_START)
LC_CFLAGS_tagdbg := $(CFLAGS_DEBUG) -DHAK_TEST_TAG_START=$(LC_TAG_START)
LC_CFLAGS_nokey := $(CFLAGS_RELEASE) -DHAK_TEST_NO_THREAD_KEY=1
LC_LIBS := $(foreach v,$(LC_VARIANTS),$(LC_OUT)/$(v)/libhakmem.so)

define LC_VARIANT_RULES
LC_OBJS_$(1) := $$(patsubst src/%.c,$$(LC_OUT)/$(1)/obj/%.o,$$(SRCS))
.SECONDARY: $$(LC_OBJS_$(1))
$$(LC_OUT)/$(1)/obj/%.o: src/%.c $$(HDRS)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS_BASE) $$(LC_CFLAGS_$(1)) $$(EXTRA_CFLAGS) -c $$< -o $$@
$$(LC_OUT)/$(1)/libhakmem.so: $$(LC_OBJS_$(1))
	$$(CC) -shared -Wl,-soname,libhakmem.so.0 -Wl,-z,nodelete -o $$@ $$^ $$(LDLIBS_LIB)
endef
$(foreach v,$(LC_VARIANTS),$(eval $(call LC_VARIANT_RULES,$(v))))

.PHONY: lifecycle-libs
lifecycle-libs: $(LC_LIBS) $(TEST_OUT)/test_lifecycle
test-bins: $(LC_LIBS)
TEST_DEPS += $(LC_LIBS) $(TEST_OUT)/test_lifecycle
