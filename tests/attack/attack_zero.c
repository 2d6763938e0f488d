/* attack_zero.c -- access to the block of a zero-size request.
 *   attack_zero CASE
 * CASE: read, write (byte 0), read16, write16 (16 bytes), calloc_write
 * (calloc(0, 1)), realloc_write (realloc(NULL, 0)), memalign_write
 * (posix_memalign(64, 0)), distinct (two malloc(0) must differ: "OK").
 * Caught: the program stops before "SURVIVED"; distinct: "OK" printed.
 */
#include "attack.h"

static void churn(void)
{
    void *q[16];
    for (int i = 0; i < 16; i++)
        q[i] = malloc(i & 1 ? 0 : 16);
    for (int i = 0; i < 16; i++)
        free(q[i]);
}

int main(int argc, char **argv)
{
    attack_begin();
    if (argc < 2)
        attack_setup_failed("usage: attack_zero CASE");
    const char *c = argv[1];
    volatile char *p;
    void *m = NULL;
    if (!strcmp(c, "calloc_write"))
        p = calloc(0, 1);
    else if (!strcmp(c, "realloc_write"))
        p = realloc(NULL, 0);
    else if (!strcmp(c, "memalign_write"))
        p = posix_memalign(&m, 64, 0) ? NULL : m;
    else
        p = malloc(0);
    if (!p)
        attack_setup_failed("zero-size request returned NULL");

    if (!strcmp(c, "distinct")) {
        void *q = malloc(0);
        if (q && q != (void *)p) {
            attack_say("OK\n");
            return 0;
        }
        attack_say("malloc(0) twice gave %p and %p\n", (void *)p, q);
        return 1;
    } else if (!strcmp(c, "read")) {
        attack_say("read %d\n", p[0]);
    } else if (!strcmp(c, "read16")) {
        int sum = 0;
        for (int i = 0; i < 16; i++)
            sum += p[i];
        attack_say("read %d\n", sum);
    } else if (!strcmp(c, "write16")) {
        for (int i = 0; i < 16; i++)
            p[i] = 0x41;
    } else {                                    /* write, *_write */
        p[0] = 0x41;
    }
    free((void *)p);
    churn();
    attack_survived();
}
