/* loader_plugin.c -- a plug-in for test_loader_lock's "dlopen" case (built
 * by tests/loader.mk).  Its constructor runs inside dlopen, which holds the
 * dynamic loader's lock meanwhile, and calls loader_test_in_ctor -- defined
 * and exported (-rdynamic) by the test -- which keeps it there until another
 * thread has made its sampled allocations. */
void loader_test_in_ctor(void);

__attribute__((constructor)) static void loader_plugin_ctor(void)
{
    loader_test_in_ctor();
}
