"""fork_thread_join.py NAME -- a Python program whose fork happens in a thread
other than the main one (the idea of CPython's ThreadJoinOnShutdown test 3,
written anew for suite_programs.sh, issue 28).

In the child the forking thread is the only one; Python makes it the child's
main thread.  It starts a helper thread that joins the parent's main thread
(already stopped in the child: the join returns at once), joins the helper
and returns.  Nothing else runs in the child, so it must exit (status 0).
The parent waits up to 10 s for that, then kills the child.
Prints "PASS NAME" or "FAIL NAME: reason"; exit status 0 or 1.
Run with PYTHONMALLOC=malloc: every object is a malloc call.
"""
import os
import signal
import sys
import threading
import time

NAME = sys.argv[1] if len(sys.argv) > 1 else "fork_thread_join"
LIMIT_S = 10.0
original_main = threading.current_thread()
result = []


def in_child():
    data = [str(i) * 50 for i in range(20000)]      # some malloc/free churn
    del data
    helper = threading.Thread(target=original_main.join)
    helper.start()
    helper.join()
    os.write(1, b"# child: helper joined, returning from the forking thread\n")


def forker():
    pid = os.fork()
    if pid == 0:
        in_child()
        return                                      # the child's last thread ends here
    end = time.monotonic() + LIMIT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            result.append("the child still ran %g s after its last thread returned" % LIMIT_S)
            return
        time.sleep(0.01)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        result.append("the child ended with %d" % code)


t = threading.Thread(target=forker)
t.start()
t.join()
if result:
    print("FAIL %s: %s" % (NAME, result[0]), flush=True)
    sys.exit(1)
print("PASS %s" % NAME, flush=True)
