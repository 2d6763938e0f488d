# tests/report.mk -- misuse reports (issue 37; included by tests/tests.mk;
# built by make test and make test-bins):
#   build/tests/test_misuse_linked   tests/test_misuse.c linked with
#                                    build/libhakmem.a (hakmem's functions in
#                                    the program, so a report's stack leaves
#                                    them out by name) and with libgcc_s (the
#                                    unwinder the stacks need: the static
#                                    library has no dlopen of it)
REPORT_BINS := $(TEST_OUT)/test_misuse_linked

$(TEST_OUT)/test_misuse_linked: tests/test_misuse.c $(TEST_HDRS) $(BUILD)/libhakmem.a
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O2 $< $(TEST_STATIC_LIB) -o $@ -pthread -ldl -Wl,--no-as-needed -lgcc_s

TEST_DEPS += $(REPORT_BINS)
test-bins: $(REPORT_BINS)
