/* check_preload.c -- report whether hakmem serves this process's malloc.
 *
 * usage: check_preload [release|debug|hardened]
 * Prints one line "hakmem: yes|no ..." and exits 0 only if hakmem_owns exists,
 * claims a freshly malloc'd block, and (if given) the build variant matches.
 * The suites run it under the same LD_PRELOAD as the real programs to prove
 * the preload took effect. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int (*owns)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "hakmem_owns");
    const char *(*variant)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "hakmem_build_variant");
    if (!owns) {
        printf("hakmem: no (hakmem_owns not found)\n");
        return 1;
    }
    void *p = malloc(123);
    int o = owns(p);
    const char *v = variant ? variant() : "?";
    printf("hakmem: %s owns(malloc(123))=%d variant=%s\n", o == 1 ? "yes" : "no", o, v);
    free(p);
    if (o != 1)
        return 1;
    if (argc > 1 && strcmp(argv[1], v) != 0)
        return 1;
    return 0;
}
