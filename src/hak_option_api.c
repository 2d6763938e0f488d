/* hak_option_api.c -- hakmem_option_set and hakmem_option_get, an entry
 * point: the options are read first (hak_process_init), so a value set here
 * is never overwritten by the start-up's.  The table and its rules are
 * hak_options.c's; docs/options.md, "Setting options from the program". */
#include "hak_internal.h"

HAK_EXPORT int hakmem_option_set(const char *name, const char *value) {
    hak_process_init();
    int e = hak_option_set(name, value);
    if (e) { errno = e; return -1; }
    return 0;
}

HAK_EXPORT int hakmem_option_get(const char *name, long *value) {
    hak_process_init();
    int e = hak_option_get(name, value);
    if (e) { errno = e; return -1; }
    return 0;
}
