/* mmio_internal.h — what the Matrix Market reader's files share.
 *
 * The reader is split in four: mmio.c (the streaming front: gzip, chunks,
 * line ends, the header, serial and OpenMP block parsing), mmio_lines.c
 * (the data lines: the fast scanner and the careful parser behind it),
 * mmio_number.c (the exact number parsers on the hot path) and
 * mmio_build.c (expansion of symmetric input, the counting sort and
 * duplicate summing that turn the parsed entries into a sorted COO). Not part of the public API
 * (engine/spmv.h); the unit tests include it to test the number parser
 * against strtod and to force small parallel blocks.
 */
#ifndef SPMV_MMIO_INTERNAL_H
#define SPMV_MMIO_INTERNAL_H

#include <locale.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spmv.h"

/* ------------------------------------------------------ number parsing */

typedef enum mm_num_result {
    MM_NUM_OK = 0,
    MM_NUM_MALFORMED,   /* not a number of the Matrix Market syntax */
    MM_NUM_OVERFLOW,    /* finite syntax, but beyond float64 / int64 */
} mm_num_result;

/* Parses the real number starting at p: [+-] digits [. digits]
 * [(e|E) [+-] digits] (at least one digit before the exponent), or
 * inf, infinity, nan in any case, with an optional sign. The token ends at
 * the first byte that cannot continue it: the caller checks that byte is a
 * delimiter, and guarantees that such a byte exists and is readable (the
 * reader's lines end with '\n', C strings with NUL); digits are also read
 * 8 bytes at a time, but never at or past `end`. Returns the end
 * of the token; *res says whether it was a number. The result is the
 * correctly rounded float64 (the same as strtod): a Clinger fast path,
 * then an 80-bit extended path with a double-rounding check, then strtod_l
 * in the C locale `c_locale` for what is left. Underflow rounds to a
 * subnormal or zero as strtod does; overflow is MM_NUM_OVERFLOW. */
const char *spmv_mm_parse_real(const char *p, const char *end, double *out, mm_num_result *res,
                               locale_t c_locale);

/* Parses [+-] digits into an int64 with overflow checking, under the same
 * delimiter contract. */
const char *spmv_mm_parse_int64(const char *p, int64_t *out, mm_num_result *res);

/* --------------------------------------------------- reader internals */

/* Sets the size of the text blocks that a parallel reader (threads != 1)
 * parses at once (default 16 MiB; at least 4096 bytes). The tests use
 * small blocks to cover block boundaries with small inputs. */
int spmv_mm_reader_set_block_size(spmv_mm_reader *r, size_t bytes);

/* Parsed entries before the build: 0-based row and column (unused for
 * array format) and the value, in file order. */
typedef struct mm_entries {
    int32_t *row, *col;
    double *val;
    int64_t n, cap;
} mm_entries;

/* What the header said, resolved. */
typedef struct mm_header {
    spmv_mm_format format;
    spmv_mm_field field;
    spmv_mm_symmetry symmetry;
    int64_t rows, cols;
    int64_t entries;      /* entries the file must hold */
    int64_t size_line;    /* 1-based line of the size line */
    int64_t max_nnz;      /* limit on the output's nnz */
} mm_header;

/* What the line parsers need, read-only and shared by the threads. */
typedef struct mm_ctx {
    mm_header h;
    locale_t c_locale;
} mm_ctx;

/* An error found inside a range of lines, before the range's first line
 * number is known (parallel parts): `line` is 0-based within the range.
 * Set with spmv_error_set; the reader's message puts "line N: " before it. */
typedef spmv_error mm_perr;

static inline bool mm_is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* mmio_lines.c: the data lines. */

/* Parses the complete lines [p, end) (end[-1] is '\n') into e, which may
 * hold at most `limit` entries. *lines gets the number of lines consumed;
 * on error pe->line is the failing line's 0-based index in the range. */
int spmv_mm_parse_range(const mm_ctx *c, const char *p, const char *end, mm_entries *e,
                        int64_t limit, int64_t *lines, mm_perr *pe);
/* Grows e's arrays (doubling, never past `limit`); 0 or SPMV_ERR_NOMEM. */
int spmv_mm_entries_grow(mm_entries *e, int64_t limit, bool with_index);
/* Makes room for cap entries at once (no-op if there is); 0 or NOMEM. */
int spmv_mm_entries_reserve(mm_entries *e, int64_t cap, bool with_index);
void spmv_mm_entries_free(mm_entries *e);
/* Splits off the next blank-separated token of [*s, e); false at the end. */
bool spmv_mm_next_token(const char **s, const char *e, const char **ts, const char **te);
/* Copies [s, e) into buf for quoting in a message. */
const char *spmv_mm_show(char *buf, size_t size, const char *s, const char *e);

/* Asks the kernel for transparent huge pages on a large fresh array (Linux
 * madvise; a hint, ignored elsewhere or for small arrays): the reader fills
 * hundreds of MB at once, and 4 KiB page faults cost it a tenth of its time. */
void spmv_mm_advise_huge(void *p, size_t bytes);

/* Touches every page of a large fresh array from `threads` threads: the
 * kernel zeroes a page on its first touch, and an array filled by one
 * thread (the .npz reader's) would have it zero all of them alone. */
void spmv_mm_prefault(void *p, size_t bytes, int threads);

/* Builds the sorted, duplicate-free, expanded float64 COO from the parsed
 * entries (mmio_build.c). `threads` > 1 sorts rows in parallel. Counts the
 * summed duplicates into *duplicates. */
int spmv_mm_build_coo(const mm_header *h, const mm_entries *e, int threads,
                      spmv_coo *out, int64_t *duplicates, spmv_error *err);

#endif /* SPMV_MMIO_INTERNAL_H */
