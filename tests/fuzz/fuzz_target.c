/* fuzz_target.c -- the libFuzzer entry points: each input is one run of the
 * operation interpreter (fuzz_ops.h) against hakmem compiled in with
 * -DHAK_NO_OVERRIDE, ASan, UBSan and the HAK_DEBUG consistency checks.
 * Built by tests/fuzz.mk (clang -fsanitize=fuzzer,address,undefined). */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_ops.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_run(data, size);
    return 0;
}
