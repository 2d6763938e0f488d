# tests/options.mk -- the builds of tests/test_options.c for tests/suite_options.sh
# (included by tests/tests.mk; built by make test-bins and make test).  The
# plain build (every tests/test_*.c gets one) has no hakmem_conf; these have one:
#   test_options_conf      preloaded; exports hakmem_conf (--export-dynamic-symbol),
#                          as docs/options.md says a preloaded program must
#   test_options_conf_bad  the same with a hakmem_conf full of mistakes
#   test_options_linked    linked with build/libhakmem.so (rpath): the link exports it
#   test_options_static    linked with build/libhakmem.a
OPTIONS_CONF := "verbose=yes, segment_cache=7,HUGE_CACHE_MB=1g,purge_lazy=on,profile=speed"
OPTIONS_CONF_BAD := "sample_byte=1,stats=maybe,nonsense,profile=fast,profile_at_exit=x, ,purge_delay_ms=10,HAKMEM_SEGMENT_CACHE=5k"
OPTIONS_BINS := $(TEST_OUT)/test_options_conf $(TEST_OUT)/test_options_conf_bad \
                $(TEST_OUT)/test_options_linked $(TEST_OUT)/test_options_static

$(TEST_OUT)/test_options_conf: tests/test_options.c $(TEST_HDRS) include/hakmem.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O2 -DTEST_CONF='$(OPTIONS_CONF)' -Wl,--export-dynamic-symbol=hakmem_conf $< -o $@
$(TEST_OUT)/test_options_conf_bad: tests/test_options.c $(TEST_HDRS) include/hakmem.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O2 -DTEST_CONF='$(OPTIONS_CONF_BAD)' -Wl,--export-dynamic-symbol=hakmem_conf $< -o $@
$(TEST_OUT)/test_options_linked: tests/test_options.c $(TEST_HDRS) include/hakmem.h $(BUILD)/libhakmem.so $(BUILD)/$(SONAME)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O2 -DTEST_CONF='$(OPTIONS_CONF)' $< -o $@ -L$(BUILD) -lhakmem -Wl,-rpath,$(abspath $(BUILD))
$(TEST_OUT)/test_options_static: tests/test_options.c $(TEST_HDRS) include/hakmem.h $(BUILD)/libhakmem.a
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O2 -DTEST_CONF='$(OPTIONS_CONF)' $< $(TEST_STATIC_LIB) -o $@ -pthread -ldl

TEST_DEPS += $(TEST_OUT)/test_options $(OPTIONS_BINS)
test-bins: $(OPTIONS_BINS)
