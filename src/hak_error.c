/* hak_error.c -- messages and fatal misuse reports.  Formats into a stack
 * buffer and write(2)s it: never allocates, so it is safe inside malloc.
 * A message longer than the buffer is cut and ends with HAK_CUT_MARK (so the
 * next message still starts a line of its own).  The write is the raw
 * system call (hak_os_write_err): a caller may hold a lock of hakmem's,
 * and glibc's write() is a cancellation point; the crash report, in a
 * signal handler, writes through it too. */
#include "hak_internal.h"
#include <stdarg.h>
#include <stdlib.h>

typedef struct hak_buf_s { char *s; size_t n, cap; bool cut; } hak_buf_t;

static void hak_buf_put(hak_buf_t *b, const char *s, size_t n) {
    while (n-- > 0) {
        if (b->n + 1 >= b->cap) { b->cut = true; return; }
        b->s[b->n++] = *s++;
    }
}
static void hak_buf_str(hak_buf_t *b, const char *s) {
    if (!s) s = "(null)";
    size_t n = 0; while (s[n]) n++;
    hak_buf_put(b, s, n);
}
static void hak_buf_uint(hak_buf_t *b, unsigned long long v, unsigned base, int min_digits) {
    char tmp[32]; int i = 0;
    do { tmp[i++] = "0123456789abcdef"[v % base]; v /= base; } while (v && i < 32);
    while (i < min_digits && i < 32) tmp[i++] = ' ';
    while (i > 0) hak_buf_put(b, &tmp[--i], 1);
}

/* Supports %s %d %ld %lld %u %lu %llu %zu %x %lx %p %%; width digits are
 * accepted and used as a minimum digit count. */
static void hak_vformat(hak_buf_t *b, const char *fmt, va_list ap) {
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') { hak_buf_put(b, f, 1); continue; }
        f++;
        int width = 0, longs = 0, zsize = 0;
        while (*f >= '0' && *f <= '9') width = width * 10 + (*f++ - '0');
        while (*f == 'l') { longs++; f++; }
        if (*f == 'z') { zsize = 1; f++; }
        switch (*f) {
        case 's': hak_buf_str(b, va_arg(ap, const char *)); break;
        case 'd': {
            long long v = longs >= 2 ? va_arg(ap, long long) : longs ? va_arg(ap, long) : va_arg(ap, int);
            if (v < 0) { hak_buf_put(b, "-", 1); v = -v; }
            hak_buf_uint(b, (unsigned long long)v, 10, width);
            break;
        }
        case 'u': case 'x': {
            unsigned long long v = zsize ? va_arg(ap, size_t) : longs >= 2 ? va_arg(ap, unsigned long long)
                                 : longs ? va_arg(ap, unsigned long) : va_arg(ap, unsigned);
            hak_buf_uint(b, v, *f == 'x' ? 16 : 10, width);
            break;
        }
        case 'p': hak_buf_str(b, "0x"); hak_buf_uint(b, (uintptr_t)va_arg(ap, void *), 16, 1); break;
        case '%': hak_buf_put(b, "%", 1); break;
        default: hak_buf_put(b, f - 1, 2); break;
        }
        if (!*f) break;
    }
}

#define HAK_CUT_MARK " [message cut]\n"

/* hak_message's formats into buf (cap > 0 bytes), NUL-terminated and cut
 * to fit; returns the length (the statistics report formats its lines with
 * it, hak_stats.c). */
size_t hak_vformat_to(char *buf, size_t cap, const char *fmt, va_list ap) {
    hak_buf_t b = { buf, 0, cap, false };
    hak_vformat(&b, fmt, ap);
    buf[b.n] = 0;
    return b.n;
}
size_t hak_format(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t n = hak_vformat_to(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

void hak_message(const char *fmt, ...) {
    char mem[1024];
    hak_buf_t b = { mem, 0, sizeof mem - (sizeof HAK_CUT_MARK - 1), false };
    va_list ap;
    va_start(ap, fmt);
    hak_vformat(&b, fmt, ap);
    va_end(ap);
    if (b.cut) {   /* the room kept for the mark */
        memcpy(mem + b.n, HAK_CUT_MARK, sizeof HAK_CUT_MARK - 1);
        b.n += sizeof HAK_CUT_MARK - 1;
    }
    hak_os_write_err(mem, b.n);
}

hak_report_hooks_t hak_report_hooks;   /* hak_internal.h: registered by hak_report.c */

/* A misuse: "hakmem: free(): double free of 0x...; aborting", the rest of
 * the report (hak_report.c: the block, the stacks, the next step), then
 * abort(). */
void hak_fatal(const char *op, const char *what, const void *p) {
    hak_message("hakmem: %s: %s %p; aborting\n", op, what, p);
    if (hak_report_hooks.misuse) hak_report_hooks.misuse(op, p);
    abort();
}
