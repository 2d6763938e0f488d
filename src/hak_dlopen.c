/* hak_dlopen.c -- libgcc's unwinder for heap profiles, loaded on demand:
 * dlopen("libgcc_s.so.1") and its two functions.  Called by hak_unwind_load
 * from the heap profile's constructor only, never from an allocation: dlopen
 * and dlsym take the dynamic loader's lock (hak_unwind.c).  In the shared
 * library only: the static library leaves this object out (Makefile), so
 * that a static program's link references no dlopen (the linker warns about
 * one); hak_unwind.c calls it through a weak reference, NULL there. */
#include "hak_internal.h"
#include <dlfcn.h>

const char *hak_dlopen_unwinder(void **backtrace, void **get_ip) {
    void *lib = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return dlerror();
    *backtrace = dlsym(lib, "_Unwind_Backtrace");
    *get_ip = dlsym(lib, "_Unwind_GetIP");
    return *backtrace && *get_ip ? NULL : "libgcc_s.so.1 lacks the unwinder's functions";
}
