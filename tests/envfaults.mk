# tests/envfaults.mk -- issue 36's environment faults (included by tests/tests.mk).
#
#   build/tests/test_env_faults   tests.mk's plain build of tests/test_env_faults.c,
#                                 run by tests/suite_envfaults.sh (as root: it makes
#                                 PID and mount namespaces) under the release,
#                                 debug and hardened libraries
#   make bench-thread-start       bench/thread_start.sh: 4,000 thread starts under
#                                 glibc and hakmem in six environments (normal, no
#                                 /proc, PID namespace with the parent's /proc,
#                                 seccomp kill on open, all signals blocked, no free
#                                 file descriptor); not part of make test or make
#                                 bench (docs/benchmarks.md, "Thread start-up")
#                                 THREADS=N REPS=N ENVS="normal pidns" narrow it.

TEST_DEPS += $(TEST_OUT)/test_env_faults $(BUILD)/hardened/libhakmem.so

.PHONY: bench-thread-start
bench-thread-start: release $(BUILD)/bench/thread_start
	bash bench/thread_start.sh
