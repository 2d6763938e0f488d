# tests/hardened.mk -- the hardened build in make test (included by
# tests/tests.mk): build/hardened/libhakmem.so for tests/suite_hardened.sh,
# tests/suite_attack.sh and tests/suite_programs.sh; test_hardened is built
# as every tests/test_*.c is.
TEST_DEPS += $(BUILD)/hardened/libhakmem.so $(BUILD)/hardened/$(SONAME) $(TEST_OUT)/test_hardened
# test_memcheck: the checked copies (suite_hardened.sh runs it under every build)
TEST_DEPS += $(TEST_OUT)/test_memcheck
