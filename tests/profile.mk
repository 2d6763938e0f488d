# tests/profile.mk -- the build of tests/test_profile.c for tests/suite_profile.sh
# (included by tests/tests.mk): -rdynamic so that the leak report (dladdr)
# names the test's functions, -O1 so that each site stays a function of its own.
$(TEST_OUT)/test_profile: tests/test_profile.c $(TEST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O1 -rdynamic $< -o $@ -ldl
TEST_DEPS += $(TEST_OUT)/test_profile
