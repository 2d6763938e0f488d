/* fuzz_report.c -- how hakmem's fuzzer reports (fuzz_internal.h): a
 * mismatch ("fuzz: FAIL" naming the input, the operation and the thread,
 * then abort), an abort that hakmem or a sanitizer raised, and the trace of
 * every operation.  Messages are put together on the stack and written
 * with write(2): the heap may be what is broken. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_internal.h"

static const char *fz_input_name;
const uint8_t *fz_input;
size_t fz_input_len;
static int fz_trace_on;
_Atomic unsigned long fz_op_index;
_Atomic int fz_op_code = -1;
_Thread_local const char *fz_thread = "main";
static _Atomic int fz_failed;              /* fz_fail is reporting */
static const char *fz_crash_file;          /* $FZ_CRASH_FILE, for the abort handler */

void fz_set_input_name(const char *name) { fz_input_name = name; }
void fz_set_trace(int on) { fz_trace_on = on; }

static void fz_write(const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w; n -= (size_t)w;
    }
}

/* Ends a message whose first n bytes are in buf with fmt, a newline, and
 * writes it.  No allocation: the heap may be what is broken. */
static void fz_vline(char *buf, size_t cap, int n, const char *fmt, va_list ap) {
    if (n < 0 || n >= (int)cap) n = 0;
    int m = vsnprintf(buf + n, cap - (size_t)n - 1, fmt, ap);
    if (m < 0) m = 0;
    n += m;
    if (n > (int)cap - 2) n = (int)cap - 2;
    buf[n++] = '\n';
    fz_write(buf, (size_t)n);
}

/* Keeps the input being replayed in the file crash (open/write/close only,
 * so that the abort handler can call it too). */
static bool fz_save_input(const char *crash) {
    if (!crash || !fz_input) return false;
    int fd = open(crash, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return false;
    size_t left = fz_input_len;
    const uint8_t *q = fz_input;
    while (left > 0) {
        ssize_t w = write(fd, q, left);
        if (w <= 0) break;
        q += w; left -= (size_t)w;
    }
    close(fd);
    return true;
}

void fz_fail(const char *fmt, ...) {
    char buf[1024];
    int op = atomic_load(&fz_op_code);
    int n = snprintf(buf, sizeof buf, "fuzz: FAIL %s%s%sop #%lu (%s, %s thread): ",
                     fz_input_name ? "input " : "", fz_input_name ? fz_input_name : "",
                     fz_input_name ? " " : "",
                     atomic_load(&fz_op_index), op >= 0 && op < OP_COUNT ? fz_op_names[op] : "cleanup",
                     fz_thread);
    va_list ap;
    va_start(ap, fmt);
    fz_vline(buf, sizeof buf, n, fmt, ap);
    va_end(ap);
    const char *crash = getenv("FZ_CRASH_FILE");
    if (fz_save_input(crash)) {
        fz_write("fuzz: input written to ", 23);
        fz_write(crash, strlen(crash));
        fz_write("\n", 1);
    }
    atomic_store(&fz_failed, 1);
    abort();
}

/* SIGABRT from anything but fz_fail (hakmem's own checks, a sanitizer's
 * abort): name the input and the operation, keep the input in
 * $FZ_CRASH_FILE.  Async-signal-safe: write, open, close only. */
static void fz_put(char **o, const char *end, const char *s) {
    while (*s && *o < end) *(*o)++ = *s++;
}
static void fz_abort_handler(int sig) {
    (void)sig;
    if (atomic_load(&fz_failed)) return;      /* fz_fail has said it all */
    char buf[768], *o = buf, num[24], *n = num + sizeof num;
    const char *end = buf + sizeof buf - 1;
    unsigned long k = atomic_load(&fz_op_index);
    *--n = 0;
    do { *--n = (char)('0' + k % 10); k /= 10; } while (k);
    int op = atomic_load(&fz_op_code);
    fz_put(&o, end, "fuzz: aborted in ");
    if (fz_input_name) { fz_put(&o, end, "input "); fz_put(&o, end, fz_input_name); fz_put(&o, end, " "); }
    fz_put(&o, end, "op #");
    fz_put(&o, end, n);
    fz_put(&o, end, " (");
    fz_put(&o, end, op >= 0 && op < OP_COUNT ? fz_op_names[op] : "cleanup");
    fz_put(&o, end, ", ");
    fz_put(&o, end, fz_thread);
    fz_put(&o, end, " thread)\n");
    fz_write(buf, (size_t)(o - buf));
    fz_save_input(fz_crash_file);
}

void fz_report_aborts(void) {
    fz_crash_file = getenv("FZ_CRASH_FILE");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fz_abort_handler;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGABRT, &sa, NULL);
}

void fz_tr(const char *fmt, ...) {
    if (!fz_trace_on) return;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "fuzz: #%lu ", atomic_load(&fz_op_index));
    va_list ap;
    va_start(ap, fmt);
    fz_vline(buf, sizeof buf, n, fmt, ap);
    va_end(ap);
}
