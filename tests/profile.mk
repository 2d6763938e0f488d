# tests/profile.mk -- the build of tests/test_profile.c for tests/suite_profile.sh
# (included by tests/tests.mk): -rdynamic so that the leak report (dladdr)
# names the test's functions, -O1 so that each site stays a function of its own.
$(TEST_OUT)/test_profile: tests/test_profile.c $(TEST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O1 -rdynamic $< -o $@ -ldl
TEST_DEPS += $(TEST_OUT)/test_profile

# two builds of the plug-in tests/unwind_lib.S (frames of 24 and 56 bytes) for
# test_profile's "reload" case (profile.reload): an unwind rule cached for
# one must not be used for the other loaded at its address
$(TEST_OUT)/unwind_lib%.so: tests/unwind_lib.S
	@mkdir -p $(dir $@)
	$(CC) -shared -DHAK_FRAME=$* $< -o $@
TEST_DEPS += $(TEST_OUT)/unwind_lib24.so $(TEST_OUT)/unwind_lib56.so
