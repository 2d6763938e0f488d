/* fuzz_ops.h -- the operation interpreter of hakmem's fuzzer (fuzz_interp.c
 * and the files fuzz_internal.h lists), shared by the libFuzzer target
 * (fuzz_target.c) and the replay driver (fuzz_replay.c).  The input format
 * is described at the top of fuzz_decode.c, the operations at the top of
 * fuzz_interp.c, the model at the top of fuzz_model.c. */
#ifndef HAK_FUZZ_OPS_H
#define HAK_FUZZ_OPS_H

#include <stddef.h>
#include <stdint.h>

/* Start the helper threads and resolve hakmem's extras.  Call once. */
void fz_init(void);

/* Replay driver: on SIGABRT that fz_run's checks did not raise (hakmem
 * stopping the program, a sanitizer), print the input and operation and
 * keep the input in $FZ_CRASH_FILE.  (libFuzzer does both itself.) */
void fz_report_aborts(void);

/* Run one input: decode it into operations, check every result against the
 * model, then free everything that is still live and wait for the helper
 * threads to finish their queues.  A mismatch prints "fuzz: FAIL ..." and
 * aborts (so libFuzzer keeps the input as a crash). */
void fz_run(const uint8_t *data, size_t size);

/* Name of the input being run, for failure messages (may be NULL). */
void fz_set_input_name(const char *name);

/* Print every operation to stderr as it is decoded. */
void fz_set_trace(int on);

/* 1 if hakmem serves the allocations (hakmem_owns is there and says so). */
int fz_hakmem_serves(void);

/* Operations run so far, all inputs (for the replay driver's summary). */
void fz_print_counts(void);

#endif /* HAK_FUZZ_OPS_H */
