# tests/loader.mk -- the build of tests/test_loader_lock.c for
# tests/suite_loader.sh (included by tests/tests.mk): -rdynamic so that the
# plug-in's constructor finds the test's loader_test_in_ctor, and the plug-in
# itself (tests/loader_plugin.c), whose constructor runs inside dlopen with
# the loader's lock held.
$(TEST_OUT)/test_loader_lock: tests/test_loader_lock.c $(TEST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O1 -rdynamic $< -o $@ -ldl
$(TEST_OUT)/loader_plugin.so: tests/loader_plugin.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -O1 $< -o $@
test-bins: $(TEST_OUT)/loader_plugin.so
TEST_DEPS += $(TEST_OUT)/test_loader_lock $(TEST_OUT)/loader_plugin.so
