/* hang_blocked.c -- a program that blocks every signal it can and sleeps
 * for ever: the hang that tests/lib.sh's time limits must still end
 * (SIGTERM stays pending; only SIGKILL stops it).  Used by suite_crash.sh's
 * harness.* tests; prints "blocked" once its signals are blocked. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    puts("blocked");
    fflush(stdout);
    for (;;)
        pause();
}
