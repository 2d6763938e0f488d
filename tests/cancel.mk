# tests/cancel.mk -- the test of tests/suite_cancel.sh (included by
# tests/tests.mk): build/tests/test_cancel_malloc, tests.mk's plain build of
# tests/test_cancel_malloc.c (no allocation function is a cancellation
# point, issue 36), run under the release, debug and hardened libraries;
# so make test builds the hardened library as well (tests/hardened.mk).
TEST_DEPS += $(TEST_OUT)/test_cancel_malloc $(BUILD)/hardened/libhakmem.so $(BUILD)/hardened/$(SONAME)
