/* mmio_lines.c — the data lines of a Matrix Market file.
 *
 * After the header, a file is one line per entry, and this is where the
 * reader spends its time. spmv_mm_parse_range takes a range of complete
 * lines (a chunk's, or one thread's share of a parallel block) and appends
 * the entries to growable arrays. Each line first goes through a short
 * scanner for the plain case (digits, blanks, one number parse); anything
 * else (a sign on an index, an index out of range, a malformed or
 * overflowing number, a missing or extra field) falls back to the careful
 * per-line parser, which either accepts the line after all or says
 * precisely what was expected. The range's parser knows nothing of line
 * numbers beyond the range: errors carry the 0-based line within it, and
 * mmio.c adds where the range started.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "mmio_internal.h"

#define MM_MIN_CAP 4096                      /* first allocation of entries */
#define MM_TOKEN_SHOWN 40                    /* bytes of a bad token quoted */

static inline bool is_blank(char c) { return mm_is_blank(c); }
static inline bool is_digit(char c) { return (unsigned char)(c - '0') < 10; }

static inline const char *skip_blank(const char *p)
{
    while (is_blank(*p))
        p++;
    return p;
}

/* Copies [s, e) for quoting in a message: printable ASCII only (messages
 * end up in JSON, which needs valid UTF-8), shortened with "...". */
const char *spmv_mm_show(char *buf, size_t size, const char *s, const char *e)
{
    size_t n = (size_t)(e - s), k = 0;
    bool cut = n > MM_TOKEN_SHOWN;
    if (cut)
        n = MM_TOKEN_SHOWN;
    for (; k < n && k + 4 < size; k++)
        buf[k] = (s[k] >= 0x20 && s[k] < 0x7f) ? s[k] : '?';
    if (cut && k + 4 <= size) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

bool spmv_mm_next_token(const char **s, const char *e, const char **ts, const char **te)
{
    const char *p = *s;
    while (p < e && is_blank(*p))
        p++;
    if (p == e)
        return false;
    *ts = p;
    while (p < e && !is_blank(*p))
        p++;
    *te = p;
    *s = p;
    return true;
}

/* -------------------------------------------------------------- entries */

/* The entry arrays live in anonymous mappings of their own, so growing
 * one is a mremap, which moves page tables instead of copying (and faulting
 * in again) data already read: an upload's arrays double a dozen times.
 * Sanitizer builds use malloc, whose overflows AddressSanitizer sees. */
#if defined(__SANITIZE_ADDRESS__)
#define MM_USE_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MM_USE_MALLOC 1
#endif
#endif

/* Mappings are sized in whole pages. The huge-page advice covers whole
 * pages only; were the last page partial, the advice would split the
 * mapping into two areas, and mremap cannot grow a range spanning two
 * (it fails with EFAULT: seen on uploads past a million entries). */
static size_t map_len(size_t bytes)
{
    const size_t page = 4096;
    return bytes > SIZE_MAX - (page - 1) ? SIZE_MAX & ~(page - 1) : (bytes + page - 1) & ~(page - 1);
}

static void *array_resize(void *p, size_t old_bytes, size_t new_bytes)
{
#ifdef MM_USE_MALLOC
    (void)old_bytes;
    return realloc(p, new_bytes);
#else
    void *q = p ? mremap(p, map_len(old_bytes), map_len(new_bytes), MREMAP_MAYMOVE)
                : mmap(NULL, map_len(new_bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return q == MAP_FAILED ? NULL : q;
#endif
}

static void array_release(void *p, size_t bytes)
{
    if (!p)
        return;
#ifdef MM_USE_MALLOC
    (void)bytes;
    free(p);
#else
    munmap(p, map_len(bytes));
#endif
}

static bool grow_array(void **p, int64_t old_cap, int64_t cap, size_t size)
{
    void *q = array_resize(*p, (size_t)old_cap * size, (size_t)cap * size);
    if (!q)
        return false;
    spmv_mm_advise_huge(q, map_len((size_t)cap * size));
    *p = q;
    return true;
}

static void shrink_array(void **p, int64_t cap, int64_t old, size_t size)
{
    if (old == 0) {
        array_release(*p, (size_t)cap * size);
        *p = NULL;
        return;
    }
    void *q = array_resize(*p, (size_t)cap * size, (size_t)old * size);
    if (q)
        *p = q;
}

/* Makes room for `cap` entries; all three arrays or none (a failure puts
 * back the ones already grown, so e->cap stays their one size). */
int spmv_mm_entries_reserve(mm_entries *e, int64_t cap, bool with_index)
{
    const int64_t old = e->cap;
    if (cap <= old)
        return SPMV_OK;
    if ((uint64_t)cap > SIZE_MAX / sizeof(double))
        return SPMV_ERR_NOMEM;
    if (!grow_array((void **)&e->val, old, cap, sizeof(double)))
        return SPMV_ERR_NOMEM;
    if (with_index && !grow_array((void **)&e->row, old, cap, sizeof(int32_t))) {
        shrink_array((void **)&e->val, cap, old, sizeof(double));
        return SPMV_ERR_NOMEM;
    }
    if (with_index && !grow_array((void **)&e->col, old, cap, sizeof(int32_t))) {
        shrink_array((void **)&e->val, cap, old, sizeof(double));
        shrink_array((void **)&e->row, cap, old, sizeof(int32_t));
        return SPMV_ERR_NOMEM;
    }
    e->cap = cap;
    return SPMV_OK;
}

/* Doubles the arrays' capacity, never beyond `limit` (the count the header
 * declared), so a header's count is never trusted for one big allocation:
 * memory follows the entries actually read. */
int spmv_mm_entries_grow(mm_entries *e, int64_t limit, bool with_index)
{
    int64_t cap = e->cap < MM_MIN_CAP ? MM_MIN_CAP : (e->cap > INT64_MAX / 2 ? INT64_MAX : e->cap * 2);
    return spmv_mm_entries_reserve(e, cap > limit ? limit : cap, with_index);
}

void spmv_mm_entries_free(mm_entries *e)
{
    array_release(e->row, (size_t)e->cap * sizeof(int32_t));
    array_release(e->col, (size_t)e->cap * sizeof(int32_t));
    array_release(e->val, (size_t)e->cap * sizeof(double));
    memset(e, 0, sizeof *e);
}

/* ---------------------------------------------------------- data lines */

static const char *field_list(const mm_header *h)
{
    if (h->format == SPMV_MM_ARRAY)
        return "1 field (value)";
    return h->field == SPMV_MM_PATTERN ? "2 fields (row column)" : "3 fields (row column value)";
}

/* Checks one index token; on success stores the 0-based index. */
static bool parse_index_token(const char *ts, const char *te, int64_t limit, const char *what,
                              int32_t *out, int64_t line, mm_perr *pe)
{
    char shown[64];
    int64_t v = 0;
    mm_num_result res;
    const char *q = spmv_mm_parse_int64(ts, &v, &res);
    if (q != te || res == MM_NUM_MALFORMED) {
        spmv_error_set(pe, SPMV_ERR_PARSE, line, "malformed %s index '%s': expected an integer from 1 to %lld",
                       what, spmv_mm_show(shown, sizeof shown, ts, te), (long long)limit);
        return false;
    }
    if (res == MM_NUM_OVERFLOW || v < 1 || v > limit) {
        spmv_error_set(pe, SPMV_ERR_PARSE, line, "%s index %s is out of range: expected 1 to %lld", what,
                       spmv_mm_show(shown, sizeof shown, ts, te), (long long)limit);
        return false;
    }
    *out = (int32_t)(v - 1);
    return true;
}

/* Checks one value token of the header's field. */
static bool parse_value_token(const mm_ctx *c, const char *ts, const char *te, double *out,
                              int64_t line, mm_perr *pe)
{
    char shown[64];
    mm_num_result res;
    const char *q;
    if (c->h.field == SPMV_MM_INTEGER) {
        int64_t v = 0;
        q = spmv_mm_parse_int64(ts, &v, &res);
        *out = (double)v;
    } else {
        q = spmv_mm_parse_real(ts, te, out, &res, c->c_locale);
    }
    if (q != te || res == MM_NUM_MALFORMED) {
        spmv_error_set(pe, SPMV_ERR_PARSE, line, "malformed value '%s': expected %s",
                       spmv_mm_show(shown, sizeof shown, ts, te),
                       c->h.field == SPMV_MM_INTEGER ? "an integer (the field is integer)" : "a real number");
        return false;
    }
    if (res == MM_NUM_OVERFLOW) {
        if (c->h.field == SPMV_MM_INTEGER)
            spmv_error_set(pe, SPMV_ERR_PARSE, line, "integer value %s overflows int64",
                           spmv_mm_show(shown, sizeof shown, ts, te));
        else
            spmv_error_set(pe, SPMV_ERR_PARSE, line,
                           "value %s overflows float64 (largest finite magnitude 1.8e308)",
                           spmv_mm_show(shown, sizeof shown, ts, te));
        return false;
    }
    return true;
}

/* The careful parser of one data line [ls, '\n']: every field checked with
 * a message saying what was expected. Stores the entry at e->n (room has
 * been made) and returns the next line, or NULL with *pe filled. */
static const char *slow_line(const mm_ctx *c, const char *ls, const char *end, mm_entries *e,
                             int64_t line, mm_perr *pe)
{
    const char *eol = memchr(ls, '\n', (size_t)(end - ls));   /* exists: lines are complete */
    const char *ts[4], *te[4], *s = ls;
    int want = c->h.format == SPMV_MM_ARRAY ? 1 : (c->h.field == SPMV_MM_PATTERN ? 2 : 3);
    int64_t n = 0;
    const char *a, *b;
    while (spmv_mm_next_token(&s, eol, &a, &b)) {
        if (n < 4) {
            ts[n] = a;
            te[n] = b;
        }
        n++;
    }
    if (n != want) {
        spmv_error_set(pe, SPMV_ERR_PARSE, line, "expected %s, found %lld", field_list(&c->h), (long long)n);
        return NULL;
    }
    double v = 1.0;
    int64_t k = e->n;
    if (c->h.format == SPMV_MM_ARRAY) {
        if (!parse_value_token(c, ts[0], te[0], &v, line, pe))
            return NULL;
    } else {
        int32_t i, j;
        if (!parse_index_token(ts[0], te[0], c->h.rows, "row", &i, line, pe) ||
            !parse_index_token(ts[1], te[1], c->h.cols, "column", &j, line, pe))
            return NULL;
        if (want == 3 && !parse_value_token(c, ts[2], te[2], &v, line, pe))
            return NULL;
        e->row[k] = i;
        e->col[k] = j;
    }
    e->val[k] = v;
    e->n = k + 1;
    return eol + 1;
}

/* Up to 10 digits: enough for any index of a 32-bit matrix; anything else
 * (a sign, more digits, no digit) is left to the careful parser. */
static inline const char *fast_index(const char *p, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = p;
    while (is_digit(*p))
        v = v * 10 + (uint64_t)(*p++ - '0');
    if (p == s || p - s > 10)
        return NULL;
    *out = v;
    return p;
}

/* A value of the header's field (integer or real) at p, as a double;
 * returns the end of its text, *res says whether it parsed. */
static inline const char *fast_value(const mm_ctx *c, const char *p, const char *end, double *v, mm_num_result *res)
{
    if (c->h.field != SPMV_MM_INTEGER)
        return spmv_mm_parse_real(p, end, v, res, c->c_locale);
    int64_t iv;
    p = spmv_mm_parse_int64(p, &iv, res);
    *v = (double)iv;
    return p;
}

/* The hot path: one plain coordinate line at p (leading blanks skipped).
 * Returns the next line, or NULL if the careful parser must look. */
static inline const char *fast_coord_line(const mm_ctx *c, const char *p, const char *end, mm_entries *e)
{
    uint64_t i, j;
    double v = 1.0;
    if (!(p = fast_index(p, &i)) || !is_blank(*p))
        return NULL;
    if (!(p = fast_index(skip_blank(p), &j)))
        return NULL;
    if (i - 1 >= (uint64_t)c->h.rows || j - 1 >= (uint64_t)c->h.cols)
        return NULL;   /* also catches index 0, which wraps */
    if (c->h.field != SPMV_MM_PATTERN) {
        mm_num_result res;
        if (!is_blank(*p))
            return NULL;
        p = fast_value(c, skip_blank(p), end, &v, &res);
        if (res != MM_NUM_OK)
            return NULL;
    }
    p = skip_blank(p);
    if (*p != '\n')
        return NULL;
    int64_t k = e->n++;
    e->row[k] = (int32_t)(i - 1);
    e->col[k] = (int32_t)(j - 1);
    e->val[k] = v;
    return p + 1;
}

static inline const char *fast_array_line(const mm_ctx *c, const char *p, const char *end, mm_entries *e)
{
    mm_num_result res;
    double v;
    p = fast_value(c, p, end, &v, &res);
    if (res != MM_NUM_OK || *(p = skip_blank(p)) != '\n')
        return NULL;
    e->val[e->n++] = v;
    return p + 1;
}

static void too_many(const mm_ctx *c, int64_t line, mm_perr *pe)
{
    if (c->h.format == SPMV_MM_ARRAY)
        spmv_error_set(pe, SPMV_ERR_PARSE, line,
                       "more values than the %lld that the %lld x %lld %s array on line %lld holds",
                       (long long)c->h.entries, (long long)c->h.rows, (long long)c->h.cols,
                       spmv_mm_symmetry_name(c->h.symmetry), (long long)c->h.size_line);
    else
        spmv_error_set(pe, SPMV_ERR_PARSE, line, "more entries than the %lld declared on line %lld",
                       (long long)c->h.entries, (long long)c->h.size_line);
}

int spmv_mm_parse_range(const mm_ctx *c, const char *p, const char *end, mm_entries *e,
                        int64_t limit, int64_t *lines, mm_perr *pe)
{
    const bool array = c->h.format == SPMV_MM_ARRAY;
    int64_t line = 0;
    int st = SPMV_OK;
    while (p < end) {
        const char *ls = p;
        p = skip_blank(p);
        if (*p == '\n' || *p == '%') {       /* blank line or comment */
            p = (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
            line++;
            continue;
        }
        if (e->n == e->cap) {
            if (e->cap >= limit) {
                too_many(c, line, pe);
                st = pe->status;
                break;
            }
            if (spmv_mm_entries_grow(e, limit, !array)) {
                spmv_error_set(pe, SPMV_ERR_NOMEM, line, "out of memory after %lld entries", (long long)e->n);
                st = pe->status;
                break;
            }
        }
        const char *q = array ? fast_array_line(c, p, end, e) : fast_coord_line(c, p, end, e);
        if (!q && !(q = slow_line(c, ls, end, e, line, pe))) {
            st = pe->status;
            break;
        }
        p = q;
        line++;
    }
    *lines = line;
    return st;
}
