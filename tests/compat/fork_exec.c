/* fork_exec.c -- fork, exec, system and posix_spawn from a process whose
 * threads are busy allocating.  Run under LD_PRELOAD=libhakmem.so.
 *
 * usage: fork_exec PREFIX          run every check (PASS/FAIL lines)
 *        fork_exec --child         exit 0 if hakmem serves malloc here (the
 *                                  exec'd child inherits LD_PRELOAD) and a
 *                                  little churn works
 * Checks: fork_churn (fork x40 while two threads allocate; the child
 * allocates and frees without deadlock, bounded by alarm()), exec_true
 * (fork + execl /bin/true), exec_self (fork + exec of this program with
 * --child), vfork_exec, posix_spawn_self, system_true. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static const char *prefix, *self;
static int failures;
static atomic_int stop;

static int hakmem_here(void) {
    int (*owns)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "hakmem_owns");
    void *p = malloc(48);
    int r = owns && owns(p) == 1;
    free(p);
    return r;
}

static int churn(int rounds) {
    void *v[256] = { 0 };
    unsigned x = 7;
    for (int i = 0; i < rounds; i++) {
        x = x * 1103515245u + 12345u;
        unsigned k = (x >> 8) & 255;
        free(v[k]);
        size_t n = 1 + (x >> 12) % (k < 8 ? 600000 : 3000);
        v[k] = malloc(n);
        if (!v[k]) return 1;
        memset(v[k], (int)k, n < 64 ? n : 64);
    }
    for (int k = 0; k < 256; k++) free(v[k]);
    return 0;
}

static void *busy(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) churn(2000);
    return NULL;
}

static void report(const char *name, int st, const char *what) {
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) { printf("PASS %s.%s\n", prefix, name); return; }
    failures++;
    if (WIFSIGNALED(st))
        printf("FAIL %s.%s: %s killed by signal %d (%s)%s\n", prefix, name, what, WTERMSIG(st),
               strsignal(WTERMSIG(st)), WTERMSIG(st) == SIGALRM ? " -- deadlock after fork?" : "");
    else printf("FAIL %s.%s: %s exited %d\n", prefix, name, what, WEXITSTATUS(st));
}

static int wait_for(pid_t pid) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return st;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--child") == 0) {
        if (!hakmem_here()) { fprintf(stderr, "fork_exec --child: hakmem not in charge\n"); return 1; }
        return churn(20000);
    }
    prefix = argc > 1 ? argv[1] : "fork_exec";
    self = argv[0];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!hakmem_here()) { printf("FAIL %s.preloaded: hakmem does not serve malloc\n", prefix); return 1; }

    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, busy, NULL);

    int bad = 0, st = 0;
    for (int i = 0; i < 40 && !bad; i++) {
        pid_t pid = fork();
        if (pid == 0) { alarm(10); _exit(churn(5000) || !hakmem_here()); }
        st = wait_for(pid);
        bad = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    report("fork_churn", st, "child");

    pid_t pid = fork();
    if (pid == 0) { execl("/bin/true", "true", (char *)NULL); _exit(127); }
    report("exec_true", wait_for(pid), "/bin/true");

    pid = fork();
    if (pid == 0) { churn(1000); execl(self, self, "--child", (char *)NULL); _exit(127); }
    report("exec_self", wait_for(pid), "exec'd child");

    pid = vfork();
    if (pid == 0) { execl(self, self, "--child", (char *)NULL); _exit(127); }
    report("vfork_exec", wait_for(pid), "vfork+exec'd child");

    char *args[] = { (char *)self, "--child", NULL };
    int rc = posix_spawn(&pid, self, NULL, NULL, args, environ);
    if (rc != 0) { printf("FAIL %s.posix_spawn_self: posix_spawn: %s\n", prefix, strerror(rc)); failures++; }
    else report("posix_spawn_self", wait_for(pid), "spawned child");

    st = system("/bin/true");
    report("system_true", st, "system(\"/bin/true\")");

    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    return failures ? 1 : 0;
}
