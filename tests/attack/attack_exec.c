/* attack_exec.c -- an executable heap.
 *   attack_exec mapped SIZE     "SURVIVED" when the block's mapping is
 *                               executable already
 *   attack_exec mprotect SIZE   "SURVIVED" when the block's page can be made
 *                               executable and code written there runs
 * Caught: the program stops before "SURVIVED" (a refused mprotect counts).
 */
#include <sys/mman.h>
#include "attack.h"

int main(int argc, char **argv)
{
    attack_begin();
    if (argc < 3)
        attack_setup_failed("usage: attack_exec mapped|mprotect SIZE");
    size_t n = attack_size_arg(argc, argv, 2);
    unsigned char *p = malloc(n);
    if (!p)
        attack_setup_failed("malloc");
    memset(p, 0, n);
    if (!strcmp(argv[1], "mapped")) {
        char line[512];
        if (!attack_mapping_of(p, line, sizeof line))
            attack_setup_failed("block not in /proc/self/maps");
        attack_say("%s\n", line);
        char *perm = strchr(line, ' ');
        if (!perm || perm[3] != 'x')
            return 0;
    } else if (!strcmp(argv[1], "mprotect")) {
        long page = sysconf(_SC_PAGESIZE);
        unsigned char *start = (unsigned char *)((uintptr_t)p & ~(uintptr_t)(page - 1));
        if (mprotect(start, (size_t)(p + 1 - start), PROT_READ | PROT_WRITE | PROT_EXEC)) {
            attack_say("mprotect refused\n");
            return 0;
        }
#if defined(__x86_64__) || defined(__i386__)
        p[0] = 0xc3;                            /* ret */
#elif defined(__aarch64__)
        memcpy(p, "\xc0\x03\x5f\xd6", 4);       /* ret */
        __builtin___clear_cache((char *)p, (char *)p + 4);
#endif
        ((void (*)(void))(uintptr_t)p)();
    } else {
        attack_setup_failed("unknown case");
    }
    attack_survived();
}
