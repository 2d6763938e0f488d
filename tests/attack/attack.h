/* attack.h -- shared by the attack programs of tests/attack/ (C and C++).
 *
 * Every program is one driver for a family of misuse, the case chosen by
 * argv (tests/attack/cases.tsv lists them and what "caught" means).  A
 * program first prints "ALLOCATOR <path>": the file mapped at malloc's
 * address in /proc/self/maps, so the runner can prove which allocator
 * served.  Then it commits the misuse and gives the allocator chances to
 * notice (frees, allocations); it prints "SURVIVED" when it reaches the end
 * unharmed (for the leak cases: when the data leaked), "OK" when a
 * correctness check held.  Output goes through write(2), unbuffered, so a
 * crash loses nothing, and nothing here allocates.
 */
#ifndef HAK_ATTACK_H
#define HAK_ATTACK_H

#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ATTACK_SETUP_FAILED 3   /* exit status: the attack could not be set up */

#ifdef __cplusplus
#define ATTACK_FN static inline
#else
#define ATTACK_FN static inline __attribute__((unused))
#endif

ATTACK_FN void attack_say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 1)
        n = (int)sizeof buf - 1;
    if (n > 0 && write(1, buf, (size_t)n) < 0)
        _exit(2);
}

/* keep the compiler from reasoning about (or removing) an access */
ATTACK_FN void attack_keep(const void *p) { __asm__ volatile("" : : "g"(p) : "memory"); }

ATTACK_FN void attack_setup_failed(const char *what)
{
    attack_say("SETUP-FAILED %s\n", what);
    _exit(ATTACK_SETUP_FAILED);
}

/* the mapping of /proc/self/maps that holds ADDR: its line into LINE */
ATTACK_FN int attack_mapping_of(const void *addr, char *line, size_t cap)
{
    static char buf[1 << 18];
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t len = 0;
    ssize_t r;
    while (len < sizeof buf - 1 && (r = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)r;
    close(fd);
    buf[len] = '\0';
    uintptr_t a = (uintptr_t)addr;
    for (char *s = buf; *s;) {
        char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        unsigned long lo, hi;
        if (sscanf(s, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) {
            if (n >= cap)
                n = cap - 1;
            memcpy(line, s, n);
            line[n] = '\0';
            return 1;
        }
        s = e ? e + 1 : s + n;
    }
    return 0;
}

/* "ALLOCATOR <path of the file that holds malloc>" */
ATTACK_FN void attack_begin(void)
{
    void *(*volatile m)(size_t) = malloc;
    char line[512];
    const char *path = "?";
    if (attack_mapping_of((const void *)m, line, sizeof line)) {
        char *slash = strchr(line, '/');
        if (slash)
            path = slash;
    }
    attack_say("ALLOCATOR %s\n", path);
}

ATTACK_FN void attack_survived(void)
{
    attack_say("SURVIVED\n");
    exit(0);
}

/* the secret of the leak cases: a byte pattern no pointer or size holds */
#define ATTACK_SECRET 0xa5u

ATTACK_FN void attack_fill_secret(void *p, size_t n) { memset(p, (int)ATTACK_SECRET, n); }

/* does any whole aligned 8-byte word of the secret remain in P[0, N)? */
ATTACK_FN int attack_secret_left(const volatile unsigned char *p, size_t n)
{
    for (size_t w = 0; w + 8 <= n; w += 8) {
        size_t k = 0;
        while (k < 8 && p[w + k] == ATTACK_SECRET)
            k++;
        if (k == 8)
            return 1;
    }
    return 0;
}

ATTACK_FN size_t attack_size_arg(int argc, char **argv, int i)
{
    if (argc <= i)
        attack_setup_failed("missing size argument");
    return (size_t)strtoull(argv[i], NULL, 0);
}

#endif
