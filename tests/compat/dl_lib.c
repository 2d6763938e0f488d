/* dl_lib.c -- a plug-in for dl_main.c: allocates and frees on its own, and
 * frees what the main program hands it.  Loaded with dlopen (optionally
 * RTLD_DEEPBIND), so its malloc/free references are bound through its own
 * lookup scope. */
#define _GNU_SOURCE 1
#include <stdlib.h>
#include <string.h>

/* a block the library allocates; filled with a pattern the caller checks */
char *lib_alloc(size_t n, int fill) {
    char *p = malloc(n);
    if (p) memset(p, fill, n);
    return p;
}

/* free a block (from either side) after checking its pattern; -1 on mismatch */
int lib_free_checked(char *p, size_t n, int fill) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (char)fill) return -1;
    free(p);
    return 0;
}

/* churn inside the library: allocate, grow, free; returns a checksum */
unsigned long lib_churn(int rounds) {
    unsigned long sum = 0;
    for (int r = 0; r < rounds; r++) {
        char *s = strdup("plug-in string");
        char *g = realloc(NULL, 16);
        for (size_t n = 32; n <= 65536; n *= 2) {
            g = realloc(g, n);
            g[n - 1] = (char)n;
            sum += (unsigned char)g[n - 1];
        }
        void *a = aligned_alloc(256, 1024);
        sum += ((unsigned long)a & 255) == 0;
        free(a);
        free(g);
        sum += strlen(s);
        free(s);
    }
    return sum;
}

/* the address of the allocator this library's calls are bound to */
void *lib_malloc_address(void) { return (void *)&malloc; }
