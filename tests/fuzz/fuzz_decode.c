/* fuzz_decode.c -- the input format of hakmem's fuzzer (fuzz_internal.h):
 * bytes into the arguments of operations.
 *
 * Input format.  Every byte string is a valid input: bytes are read one
 * operation at a time, and reads past the end give 0 and end the run.  An
 * operation is one opcode byte (modulo OP_COUNT, see fz_op_names) followed by
 * its arguments:
 *   slot   1 byte, one of FZ_SLOTS live-block slots (an allocation into a
 *          slot that holds a block first frees that block)
 *   size   1 byte whose top 3 bits pick a range (fz_size: tiny, direct,
 *          small, medium, large, near a size class or page size, huge,
 *          enormous), then 0..2 more bytes
 *   align  1 byte: a power of two 1..4 MiB, or one of a table of invalid or
 *          extreme alignments (fz_align)
 *   n      1 byte: calloc/reallocarray's element count (the size is divided
 *          by it), or one of a table of overflowing pairs
 * The opcode byte is read by fz_run (fuzz_interp.c); each operation reads
 * its own arguments with the functions here. */
#include "fuzz_internal.h"

typedef struct fz_reader_s { const uint8_t *p, *end; bool done; } fz_reader_t;
static fz_reader_t rd;
uint8_t fz_u8(void) {
    if (rd.p >= rd.end) { rd.done = true; return 0; }
    return *rd.p++;
}
unsigned fz_u16(void) { unsigned a = fz_u8(); return (a << 8) | fz_u8(); }
void fz_read_start(const uint8_t *data, size_t size) {
    rd.p = data;
    rd.end = data + size;
    rd.done = false;
}
bool fz_read_done(void) { return rd.done; }

/* hakmem's size classes: 16..128 step 16, then 8 per power of two */
size_t fz_class_size(unsigned c) {
    if (c < 8) return (size_t)(c + 1) * 16;
    unsigned k = 7 + (c - 8) / 8, j = (c - 8) % 8;
    return ((size_t)1 << k) + (size_t)(j + 1) * ((size_t)1 << (k - 3));
}

static const size_t fz_special_sizes[] = {
    4096, 8192, 16384, 65536 - 768, 65536, 128 * KiB, 256 * KiB, 512 * KiB, 1 * MiB,
    2 * MiB - 768, 2 * MiB, 2 * MiB + 4096, 4 * MiB - 768, 4 * MiB, 4 * MiB + 1, 3 * MiB,
};
#define NSPECIAL (sizeof fz_special_sizes / sizeof fz_special_sizes[0])
static const size_t fz_enormous[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4095, SIZE_MAX - 2 * MiB, SIZE_MAX / 2 + 1, PTRDIFF_MAX,
    PTRDIFF_MAX - 4095, (size_t)1 << 62, (size_t)1 << 48, (size_t)1 << 47, ((size_t)1 << 46) + 1,
    (size_t)1 << 46, ((size_t)1 << 46) - 4096, (size_t)1 << 44, (size_t)1 << 40, ((size_t)64 << 30) + 1,
};
#define NENORMOUS (sizeof fz_enormous / sizeof fz_enormous[0])

size_t fz_size(void) {
    unsigned b = fz_u8(), lo = b & 31;
    switch (b >> 5) {
    case 0: return lo;                                               /* 0..31 */
    case 1: return ((lo << 8) | fz_u8()) % 2049;                     /* direct: 0..2048 */
    case 2: return (lo << 8) | fz_u8();                              /* small: 0..8191 */
    case 3: return 8192 + (size_t)((lo << 8) | fz_u8()) * 7;         /* medium: 8..64 KiB */
    case 4: return 64 * KiB + ((((size_t)lo << 16) | fz_u16()) % (2 * MiB - 64 * KiB + 1)); /* large */
    case 5: {                                                        /* near a boundary */
        unsigned v = fz_u8();
        if (lo < 24) {
            size_t s = fz_class_size(v % 120) + (lo % 5);
            return s >= 2 ? s - 2 : s;
        }
        return fz_special_sizes[v % NSPECIAL] + lo - 28;
    }
    case 6: return 2 * MiB - 4096 + ((((size_t)lo << 16) | fz_u16()) * 2) % (4 * MiB + 4096); /* huge */
    default: return fz_enormous[lo % NENORMOUS];
    }
}

static const size_t fz_special_aligns[] = {
    0, 2, 3, 4, 5, 6, 12, 20, 24, 33, 48, 100, 4097, 12288, 65535, 65537, MiB + 1, 3 * MiB,
    8 * MiB, (size_t)1 << 30, (size_t)1 << 40, SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 2, SIZE_MAX,
};
#define NSPECIAL_ALIGN (sizeof fz_special_aligns / sizeof fz_special_aligns[0])
size_t fz_align(void) {
    unsigned b = fz_u8();
    if (b < 184) return (size_t)1 << (b % 23);                       /* 1..4 MiB */
    return fz_special_aligns[(b - 184) % NSPECIAL_ALIGN];
}

/* calloc / reallocarray: count and element size from a byte and a size */
static const size_t fz_overflow_pairs[][2] = {
    { SIZE_MAX, 2 }, { (size_t)1 << 32, (size_t)1 << 32 }, { SIZE_MAX / 2 + 1, 2 }, { 3, SIZE_MAX / 3 + 1 },
    { 1, SIZE_MAX }, { SIZE_MAX, 1 }, { SIZE_MAX, 0 }, { 0, SIZE_MAX }, { 65537, (size_t)1 << 48 },
    { (size_t)1 << 20, (size_t)1 << 27 }, { 16, PTRDIFF_MAX / 8 }, { 2, PTRDIFF_MAX / 2 + 1 },
    { 4096, (size_t)1 << 40 }, { 1, 0 }, { 0, 0 }, { 7, ((size_t)1 << 61) + 1 },
};
void fz_count_size(size_t *n, size_t *size) {
    unsigned b = fz_u8();
    size_t s = fz_size();
    if (b >= 240) {
        *n = fz_overflow_pairs[b - 240][0];
        *size = fz_overflow_pairs[b - 240][1];
        return;
    }
    *n = b & 31;
    *size = *n ? s / *n : s;
}
