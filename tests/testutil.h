/* testutil.h -- small helpers shared by the C tests; none of them allocates
 * (they run between allocator calls under test), but freed_last_comes_back,
 * whose job it is. */
#ifndef HAK_TEST_UTIL_H
#define HAK_TEST_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* xorshift64: a fixed-seed sequence of pseudo-random numbers */
__attribute__((unused)) static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* resident set in KiB, from /proc/self/statm; -1 if unreadable */
__attribute__((unused)) static long rss_kib(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    long size = 0, res = 0;
    if (sscanf(buf, "%ld %ld", &size, &res) != 2)
        return -1;
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* malloc(size), free it and malloc(size) again: 1 if the second block is
 * the first (the block freed last comes straight back), 0 if it is another,
 * -1 if a malloc failed.  The second block is freed too. */
__attribute__((unused)) static int freed_last_comes_back(size_t size)
{
    char *a = malloc(size);
    if (!a)
        return -1;
    free(a);
    char *c = malloc(size);
    if (!c)
        return -1;
    free(c);
    return c == a;
}

#endif
