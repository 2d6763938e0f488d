# tests/hostile.mk -- the programs of tests/suite_hostile.sh (included by
# tests/tests.mk; built by make test and make test-bins), both from
# tests/hostile.c:
#   build/tests/hostile              the launcher: no /proc, a PID namespace
#                                    of its own, every signal blocked, a file
#                                    limit (tests.mk's plain rule, as every
#                                    tests/*.c program)
#   build/tests/hostile_seccomp.so   preloaded after the allocator: kills the
#                                    process on open, openat and openat2 once
#                                    start-up is over (seccomp filter)
HOSTILE_BINS := $(TEST_OUT)/hostile $(TEST_OUT)/hostile_seccomp.so

$(TEST_OUT)/hostile_seccomp.so: tests/hostile.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -shared -fPIC -DHOSTILE_SECCOMP_SO $< -o $@ -ldl

TEST_DEPS += $(HOSTILE_BINS)
test-bins: $(HOSTILE_BINS)
