/* mmio.c — the streaming Matrix Market reader.
 *
 * Bytes arrive in chunks of any size (an upload as it comes off the socket,
 * a file read in pieces). The reader sniffs the gzip magic (1f 8b) in the
 * first two bytes and, if present, inflates the stream piece by piece with
 * zlib. The text is cut into lines: a chunk's complete lines are parsed in
 * place, only the partial last line is carried over to the next chunk, so
 * the text is never held twice. With more than one thread the text is
 * gathered into blocks (16 MiB by default) cut at a newline instead, and
 * each block is split at newlines into ranges that OpenMP threads parse
 * straight into the entry arrays, at offsets from a prefix sum of the
 * ranges' line counts; the result and every error (with its exact line
 * number) are the same as the serial reader's.
 *
 * The banner, comments and size line are parsed here line by line; the
 * data lines go to mmio_lines.c in bulk, into growable arrays that never
 * exceed the count the header declared; mmio_build.c turns them into the
 * sorted COO.
 * docs/matrix-market.md lists every rule and message.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "mmio_internal.h"

#define MM_MAX_BANNER ((size_t)1 << 20)      /* longest first line accepted, bytes */
#define MM_ZBUF_SIZE ((size_t)256 << 10)     /* inflate output per step */
#define MM_BLOCK_DEFAULT ((size_t)16 << 20)  /* parallel block of text */
#define MM_BLOCK_MIN ((size_t)4096)
#define MM_PAR_MIN_BYTES ((size_t)64 << 10)  /* less text than this: one thread */
#define MM_PARTS_PER_THREAD 4                /* parallel block: ranges per thread */
#define MM_READ_CHUNK ((size_t)4 << 20)      /* spmv_mm_read_file's read size */

enum mm_state { ST_BANNER, ST_HEADER, ST_DATA, ST_FAILED, ST_FINISHED };
enum mm_input { IN_UNKNOWN, IN_PLAIN, IN_GZIP };
/* Line ends: '\n' (and "\r\n", the '\r' being a blank), or a lone '\r' as
 * old Mac files have; decided at the first line end of the input. */
enum mm_eol { EOL_UNKNOWN, EOL_LF, EOL_CR };

/* One range of a parallel block (a few per thread, handed out dynamically). */
typedef struct mm_part {
    const char *begin, *end;
    mm_entries ent;
    int64_t offset;             /* where its entries go in the reader's */
    int64_t lines;
    int status;
    mm_perr err;
} mm_part;

struct spmv_mm_reader {
    int64_t max_rows, max_cols, max_nnz;
    int (*admit)(void *ctx, const spmv_mm_declared *d, spmv_error *err);
    void *admit_ctx;
    int threads;
    size_t block_size;
    enum mm_state state;
    spmv_error error;           /* the error every call repeats once failed */

    enum mm_input input;
    bool magic_pending;         /* first byte was 0x1f, second not seen yet */
    bool zs_live;               /* inflateInit2 done */
    bool gz_member_ended;       /* the last gzip member is complete */
    int64_t gz_members;
    z_stream zs;
    unsigned char *zbuf;

    enum mm_eol eol;
    char *crbuf;                /* EOL_CR: text with '\r' turned into '\n' */
    char *text;                 /* serial: the partial last line; parallel: the block */
    size_t text_len, text_cap;
    size_t text_clean;          /* text[0, text_clean) searched already (no line end) */
    int64_t line;               /* complete lines consumed */

    int64_t size_hint;          /* spmv_mm_read_file: the file's size, 0 if unknown */
    mm_ctx ctx;
    mm_entries ent;
    mm_part *parts;
    int nparts;
};

/* ------------------------------------------------------------ helpers */

static inline bool is_blank(char c) { return mm_is_blank(c); }

/* Records the reader's sticky error "line N: <what>" and returns status. */
static int fail(spmv_mm_reader *r, spmv_error *err, int status, int64_t line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int fail(spmv_mm_reader *r, spmv_error *err, int status, int64_t line, const char *fmt, ...)
{
    char what[sizeof r->error.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (line < 1)
        line = 1;
    spmv_error_set(&r->error, status, line, "line %lld: %s", (long long)line, what);
    r->state = ST_FAILED;
    if (err)
        *err = r->error;
    return status;
}

static int repeat_error(const spmv_mm_reader *r, spmv_error *err)
{
    if (err)
        *err = r->error;
    return r->error.status;
}

static bool token_is(const char *ts, const char *te, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(te - ts) == n && strncasecmp(ts, word, n) == 0;
}

const char *spmv_mm_field_name(spmv_mm_field f)
{
    switch (f) {
    case SPMV_MM_REAL: return "real";
    case SPMV_MM_DOUBLE: return "double";
    case SPMV_MM_INTEGER: return "integer";
    case SPMV_MM_PATTERN: return "pattern";
    }
    return "unknown";
}

const char *spmv_mm_symmetry_name(spmv_mm_symmetry s)
{
    switch (s) {
    case SPMV_MM_GENERAL: return "general";
    case SPMV_MM_SYMMETRIC: return "symmetric";
    case SPMV_MM_SKEW_SYMMETRIC: return "skew-symmetric";
    case SPMV_MM_HERMITIAN: return "hermitian";
    }
    return "unknown";
}

/* ------------------------------------------------------------- header */

static int banner_too_long(spmv_mm_reader *r, spmv_error *err);

static int parse_banner(spmv_mm_reader *r, const char *s, const char *e, spmv_error *err)
{
    static const char *const formats[] = {"coordinate", "array"};
    static const char *const fields[] = {"real", "double", "integer", "pattern"};
    static const char *const syms[] = {"general", "symmetric", "skew-symmetric", "hermitian"};
    const int64_t line = r->line + 1;
    mm_header *h = &r->ctx.h;
    const char *ts, *te;
    char shown[64];
    int k;

    if ((size_t)(e - s) > MM_MAX_BANNER)
        return banner_too_long(r, err);
    if (e - s >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
        s += 3;   /* a UTF-8 byte order mark */
    if (!spmv_mm_next_token(&s, e, &ts, &te))
        return fail(r, err, SPMV_ERR_PARSE, line,
                    "expected the banner '%%%%MatrixMarket matrix <format> <field> <symmetry>', found an empty line");
    if (token_is(ts, te, "%MatrixMarket"))
        return fail(r, err, SPMV_ERR_PARSE, line,
                    "bad banner: '%%MatrixMarket' has one percent sign, expected '%%%%MatrixMarket'");
    if (!token_is(ts, te, "%%MatrixMarket"))
        return fail(r, err, SPMV_ERR_PARSE, line,
                    "bad banner: expected '%%%%MatrixMarket matrix <format> <field> <symmetry>', found '%s'",
                    spmv_mm_show(shown, sizeof shown, ts, e));

    if (!spmv_mm_next_token(&s, e, &ts, &te))
        return fail(r, err, SPMV_ERR_PARSE, line, "bad banner: it ends before the object 'matrix'");
    if (token_is(ts, te, "vector"))
        return fail(r, err, SPMV_ERR_UNSUPPORTED, line,
                    "vector objects are not supported: spmvd stores matrices");
    if (!token_is(ts, te, "matrix"))
        return fail(r, err, SPMV_ERR_PARSE, line, "bad banner: unknown object '%s', expected 'matrix'",
                    spmv_mm_show(shown, sizeof shown, ts, te));

    if (!spmv_mm_next_token(&s, e, &ts, &te))
        return fail(r, err, SPMV_ERR_PARSE, line,
                    "bad banner: it ends before the format ('coordinate' or 'array')");
    for (k = 0; k < 2 && !token_is(ts, te, formats[k]); k++)
        ;
    if (k == 2)
        return fail(r, err, SPMV_ERR_PARSE, line,
                    "bad banner: unknown format '%s', expected 'coordinate' or 'array'",
                    spmv_mm_show(shown, sizeof shown, ts, te));
    h->format = (spmv_mm_format)k;

    if (!spmv_mm_next_token(&s, e, &ts, &te))
        return fail(r, err, SPMV_ERR_PARSE, line,
                    "bad banner: it ends before the field ('real', 'double', 'integer' or 'pattern')");
    if (token_is(ts, te, "complex"))
        return fail(r, err, SPMV_ERR_UNSUPPORTED, line,
                    "complex values are not supported: spmvd stores real matrices (field 'complex')");
    for (k = 0; k < 4 && !token_is(ts, te, fields[k]); k++)
        ;
    if (k == 4)
        return fail(r, err, SPMV_ERR_PARSE, line,
                    "bad banner: unknown field '%s', expected 'real', 'double', 'integer' or 'pattern'",
                    spmv_mm_show(shown, sizeof shown, ts, te));
    h->field = (spmv_mm_field)k;

    if (!spmv_mm_next_token(&s, e, &ts, &te))
        return fail(r, err, SPMV_ERR_PARSE, line,
                    "bad banner: it ends before the symmetry ('general', 'symmetric', 'skew-symmetric' or 'hermitian')");
    for (k = 0; k < 4 && !token_is(ts, te, syms[k]); k++)
        ;
    if (k == 4)
        return fail(r, err, SPMV_ERR_PARSE, line,
                    "bad banner: unknown symmetry '%s', expected 'general', 'symmetric', 'skew-symmetric' or 'hermitian'",
                    spmv_mm_show(shown, sizeof shown, ts, te));
    h->symmetry = (spmv_mm_symmetry)k;

    if (spmv_mm_next_token(&s, e, &ts, &te))
        return fail(r, err, SPMV_ERR_PARSE, line, "bad banner: unexpected '%s' after the symmetry",
                    spmv_mm_show(shown, sizeof shown, ts, te));
    if (h->format == SPMV_MM_ARRAY && h->field == SPMV_MM_PATTERN)
        return fail(r, err, SPMV_ERR_PARSE, line,
                    "bad banner: the field 'pattern' needs the 'coordinate' format, not 'array'");
    r->state = ST_HEADER;
    return SPMV_OK;
}

/* The message names the reader option (the daemon's configuration key of
 * the same name) unless the limit is the format's own 32-bit one. */
static int check_limit(spmv_mm_reader *r, spmv_error *err, int64_t v, int64_t limit, const char *what, const char *key)
{
    if (v <= limit)
        return SPMV_OK;
    return fail(r, err, SPMV_ERR_LIMIT, r->line + 1, "%lld %s is over the limit of %lld (%s)", (long long)v, what,
                (long long)limit,
                limit == INT32_MAX ? "rows, columns and non-zeros must fit 32-bit signed integers" : key);
}

/* Counts an array's stored values and its entries after expansion; both
 * fit int64 since rows and cols are at most INT32_MAX here. */
static void array_counts(const mm_header *h, int64_t *stored, int64_t *expanded)
{
    int64_t n = h->rows;
    switch (h->symmetry) {
    case SPMV_MM_GENERAL:
        *stored = *expanded = h->rows * h->cols;
        break;
    case SPMV_MM_SKEW_SYMMETRIC:
        *stored = n * (n - 1) / 2;
        *expanded = n * (n - 1);
        break;
    default:
        *stored = n * (n + 1) / 2;
        *expanded = n * n;
        break;
    }
}

/* When the file's size is known and could hold every declared entry
 * (each takes at least 4 bytes, "1 1\n", or 2 in an array, "1\n"), the
 * arrays are reserved at once: no regrowth, and the pages not yet filled
 * cost nothing. Otherwise (uploads, gzip) they grow with the entries. */
static void reserve_entries(spmv_mm_reader *r)
{
    const mm_header *h = &r->ctx.h;
    int64_t min_bytes = h->format == SPMV_MM_ARRAY ? 2 : 4;
    if (r->size_hint <= 0 || r->input != IN_PLAIN || h->entries > r->size_hint / min_bytes)
        return;
    /* On failure growth is tried again, and reported, as entries come. */
    spmv_mm_entries_reserve(&r->ent, h->entries, h->format == SPMV_MM_COORDINATE);
}

/* The caller's say (spmv_mm_options.admit) on the declared sizes, before
 * anything is allocated from them. */
static int admit(spmv_mm_reader *r, int64_t expanded, spmv_error *err)
{
    if (!r->admit)
        return SPMV_OK;
    spmv_mm_declared d;
    spmv_error why = {0};
    spmv_mm_declare(r->ctx.h.rows, r->ctx.h.cols, expanded, r->threads, &d);
    int st = r->admit(r->admit_ctx, &d, &why);
    return st ? fail(r, err, st, r->line + 1, "%s", why.message) : SPMV_OK;
}

static int parse_size_line(spmv_mm_reader *r, const char *s, const char *e, spmv_error *err)
{
    static const char *const names[3] = {"rows", "columns", "entries"};
    mm_header *h = &r->ctx.h;
    const int64_t line = r->line + 1;
    const int want = h->format == SPMV_MM_COORDINATE ? 3 : 2;
    const char *expect = want == 3 ? "'rows columns entries'" : "'rows columns' (array format)";
    int64_t v[3] = {0, 0, 0};
    const char *ts, *te;
    char shown[64];
    int n = 0, st;

    for (; spmv_mm_next_token(&s, e, &ts, &te); n++) {
        if (n == want)
            return fail(r, err, SPMV_ERR_PARSE, line, "bad size line: expected %s, found more fields", expect);
        mm_num_result res;
        const char *q = spmv_mm_parse_int64(ts, &v[n], &res);
        if (q != te || res == MM_NUM_MALFORMED)
            return fail(r, err, SPMV_ERR_PARSE, line, "bad size line: expected %s, found '%s'", expect,
                        spmv_mm_show(shown, sizeof shown, ts, te));
        if (res == MM_NUM_OVERFLOW)
            return fail(r, err, SPMV_ERR_LIMIT, line, "the number of %s, %s, overflows int64", names[n],
                        spmv_mm_show(shown, sizeof shown, ts, te));
        if (v[n] < 0)
            return fail(r, err, SPMV_ERR_PARSE, line, "the number of %s must not be negative, found %lld",
                        names[n], (long long)v[n]);
    }
    if (n < want)
        return fail(r, err, SPMV_ERR_PARSE, line, "bad size line: expected %s, found %d field%s", expect, n,
                    n == 1 ? "" : "s");
    h->rows = v[0];
    h->cols = v[1];
    h->size_line = line;
    if ((st = check_limit(r, err, h->rows, r->max_rows, "rows", "max_rows")) ||
        (st = check_limit(r, err, h->cols, r->max_cols, "columns", "max_rows")))
        return st;
    if (h->symmetry != SPMV_MM_GENERAL && h->rows != h->cols)
        return fail(r, err, SPMV_ERR_PARSE, line, "a %s matrix must be square, found %lld x %lld",
                    spmv_mm_symmetry_name(h->symmetry), (long long)h->rows, (long long)h->cols);
    int64_t expanded;
    if (h->format == SPMV_MM_COORDINATE) {
        h->entries = v[2];
        if ((st = check_limit(r, err, h->entries, r->max_nnz, "entries", "max_nnz")))
            return st;
        if (h->entries > h->rows * h->cols + SPMV_MM_DUPLICATE_SLACK) /* both at most INT32_MAX: no overflow */
            return fail(r, err, SPMV_ERR_LIMIT, line, "%lld entries declared, more than the %lld positions of a %lld x "
                        "%lld matrix (and %d duplicates): only duplicates could fill them", (long long)h->entries,
                        (long long)(h->rows * h->cols), (long long)h->rows, (long long)h->cols,
                        SPMV_MM_DUPLICATE_SLACK);
        expanded = h->symmetry == SPMV_MM_GENERAL ? h->entries : 2 * h->entries;
        expanded = expanded < h->rows * h->cols ? expanded : h->rows * h->cols;
    } else {
        array_counts(h, &h->entries, &expanded);
        if ((st = check_limit(r, err, expanded, r->max_nnz, "array entries", "max_nnz")))
            return st;
    }
    if ((st = admit(r, expanded, err)))
        return st;
    reserve_entries(r);
    r->state = ST_DATA;
    return SPMV_OK;
}

/* One line before the data: the banner, a comment, a blank line or the
 * size line. [s, e) excludes the '\n'. */
static int header_line(spmv_mm_reader *r, const char *s, const char *e, spmv_error *err)
{
    if (r->state == ST_BANNER)
        return parse_banner(r, s, e, err);
    while (s < e && is_blank(*s))
        s++;
    if (s == e || *s == '%')
        return SPMV_OK;
    return parse_size_line(r, s, e, err);
}

/* ------------------------------------------------------ text and blocks */

static int parse_serial(spmv_mm_reader *r, const char *p, const char *end, spmv_error *err)
{
    mm_perr pe;
    int64_t lines = 0;
    int st = spmv_mm_parse_range(&r->ctx, p, end, &r->ent, r->ctx.h.entries, &lines, &pe);
    if (st)
        return fail(r, err, st, r->line + 1 + pe.line, "%s", pe.message);
    r->line += lines;
    return SPMV_OK;
}

static int ensure_parts(spmv_mm_reader *r)
{
    if (r->parts)
        return SPMV_OK;
    /* Several parts per thread, handed out dynamically: a thread that the
     * OS preempts (a busy host) holds up less of the block. */
    int nparts = r->threads > 64 ? 256 : r->threads * MM_PARTS_PER_THREAD;
    r->parts = calloc((size_t)nparts, sizeof *r->parts);
    if (!r->parts)
        return SPMV_ERR_NOMEM;
    r->nparts = nparts;
    return SPMV_OK;
}

/* Cuts [p, end) into nparts ranges that start at line starts. */
static void cut_parts(spmv_mm_reader *r, const char *p, const char *end)
{
    size_t len = (size_t)(end - p);
    const char *b = p;
    for (int t = 0; t < r->nparts; t++) {
        const char *c = t + 1 == r->nparts ? end : p + len / (size_t)r->nparts * (size_t)(t + 1);
        if (c < b)
            c = b;
        if (c < end && c > p && c[-1] != '\n') {
            const char *nl = memchr(c, '\n', (size_t)(end - c));
            c = nl ? nl + 1 : end;
        }
        r->parts[t].begin = b;
        r->parts[t].end = c;
        b = c;
    }
}

/* Appends the parts in order to r->ent. The first part that failed, or
 * that would pass the declared count, is parsed again serially from where
 * the good parts end, which yields exactly the serial reader's error. */
static int merge_parts(spmv_mm_reader *r, spmv_error *err)
{
    const bool with_index = r->ctx.h.format == SPMV_MM_COORDINATE;
    int t, good;
    int64_t total = r->ent.n;
    for (good = 0; good < r->nparts; good++) {
        mm_part *pt = &r->parts[good];
        if (pt->status || total + pt->ent.n > r->ctx.h.entries)
            break;
        total += pt->ent.n;
    }
    if (spmv_mm_entries_reserve(&r->ent, total, with_index))
        return fail(r, err, SPMV_ERR_NOMEM, r->line + 1, "out of memory after %lld entries", (long long)r->ent.n);
    int64_t base = r->ent.n;
    for (t = 0; t < good; t++) {
        r->parts[t].offset = base;
        base += r->parts[t].ent.n;
    }
    mm_entries *dst = &r->ent;
    const mm_part *parts = r->parts;
#pragma omp parallel for num_threads(r->threads) schedule(static, 1)
    for (t = 0; t < good; t++) {
        const mm_part *pt = &parts[t];
        int64_t k = pt->offset, n = pt->ent.n;
        if (n == 0)
            continue;   /* its arrays may never have been allocated */
        memcpy(dst->val + k, pt->ent.val, (size_t)n * sizeof(double));
        if (with_index) {
            memcpy(dst->row + k, pt->ent.row, (size_t)n * sizeof(int32_t));
            memcpy(dst->col + k, pt->ent.col, (size_t)n * sizeof(int32_t));
        }
    }
    for (t = 0; t < good; t++)
        r->line += r->parts[t].lines;
    r->ent.n = base;
    if (good < r->nparts) {
        int st = parse_serial(r, r->parts[good].begin, r->parts[good].end, err);
        if (st)
            return st;
        /* Not reached for consistent parsers; keep going if it is. */
        for (t = good + 1; t < r->nparts; t++)
            if ((st = parse_serial(r, r->parts[t].begin, r->parts[t].end, err)))
                return st;
    }
    return SPMV_OK;
}

/* Counts '\n' in [p, end), eight bytes at a time: a byte equal to '\n'
 * is a zero byte of x ^ 0x0a..0a, found with the carry-free SWAR test;
 * per-byte counts gather in byte lanes for up to 255 words, then sum. */
static int64_t count_lines(const char *p, const char *end)
{
    const uint64_t ones = 0x0101010101010101u, low7 = 0x7f7f7f7f7f7f7f7fu;
    int64_t n = 0;
    while (end - p >= 8) {
        uint64_t acc = 0;
        for (int k = 0; k < 255 && end - p >= 8; k++, p += 8) {
            uint64_t x;
            memcpy(&x, p, sizeof x);
            x ^= 0x0a0a0a0a0a0a0a0au;
            acc += (~(((x & low7) + low7) | x) >> 7) & ones;
        }
        acc = (acc & 0x00ff00ff00ff00ffu) + ((acc >> 8) & 0x00ff00ff00ff00ffu);
        n += (int64_t)((acc * 0x0001000100010001u) >> 48);
    }
    for (; p < end; p++)
        n += *p == '\n';
    return n;
}

/* A window of the reader's arrays for one part: its entries land in place. */
static mm_entries window(const mm_entries *e, int64_t offset, int64_t cap)
{
    mm_entries w = {
        .row = e->row ? e->row + offset : NULL,
        .col = e->col ? e->col + offset : NULL,
        .val = e->val + offset,
        .n = 0,
        .cap = cap,
    };
    return w;
}

/* The common case: every line of the block fits below the declared count,
 * so each part parses straight into the reader's arrays at an offset given
 * by the line counts before it (a line holds at most one entry), and the
 * gaps left by comment and blank lines are closed afterwards. Returns
 * false (nothing done) when the block does not fit that way. */
static bool parse_in_place(spmv_mm_reader *r, spmv_error *err, int *st)
{
    const mm_ctx *c = &r->ctx;
    mm_part *parts = r->parts;
    const int nparts = r->nparts;
    const bool with_index = c->h.format == SPMV_MM_COORDINATE;
    int64_t total = 0;
#pragma omp parallel for num_threads(r->threads) schedule(dynamic, 1) reduction(+ : total)
    for (int t = 0; t < nparts; t++) {
        parts[t].lines = count_lines(parts[t].begin, parts[t].end);
        total += parts[t].lines;
    }
    if (r->ent.n + total > c->h.entries)
        return false;   /* comments near the end, or too many entries */
    /* Doubling (within the declared count) keeps regrowth amortised. */
    int64_t need = r->ent.n + total, cap = r->ent.cap * 2 > need ? r->ent.cap * 2 : need;
    if (need > r->ent.cap &&
        spmv_mm_entries_reserve(&r->ent, cap < c->h.entries ? cap : c->h.entries, with_index)) {
        *st = fail(r, err, SPMV_ERR_NOMEM, r->line + 1, "out of memory after %lld entries", (long long)r->ent.n);
        return true;
    }
    int64_t off = r->ent.n;
    for (int t = 0; t < nparts; t++) {
        parts[t].offset = off;
        off += parts[t].lines;
    }
    mm_entries *e = &r->ent;
#pragma omp parallel for num_threads(r->threads) schedule(dynamic, 1)
    for (int t = 0; t < nparts; t++) {
        mm_entries w = window(e, parts[t].offset, parts[t].lines);
        int64_t lines;
        parts[t].status = spmv_mm_parse_range(c, parts[t].begin, parts[t].end, &w, parts[t].lines, &lines,
                                              &parts[t].err);
        parts[t].ent.n = w.n;
    }
    /* In order: close the gaps; the first failed part is parsed again
     * serially from its start, which gives the serial reader's error. */
    for (int t = 0; t < nparts; t++) {
        const mm_part *pt = &parts[t];
        if (pt->status) {
            *st = parse_serial(r, pt->begin, parts[nparts - 1].end, err);
            return true;
        }
        if (pt->offset != e->n && pt->ent.n > 0) {
            memmove(e->val + e->n, e->val + pt->offset, (size_t)pt->ent.n * sizeof(double));
            if (with_index) {
                memmove(e->row + e->n, e->row + pt->offset, (size_t)pt->ent.n * sizeof(int32_t));
                memmove(e->col + e->n, e->col + pt->offset, (size_t)pt->ent.n * sizeof(int32_t));
            }
        }
        e->n += pt->ent.n;
        r->line += pt->lines;
    }
    *st = SPMV_OK;
    return true;
}

static int parse_parallel(spmv_mm_reader *r, const char *p, const char *end, spmv_error *err)
{
    int st;
    if (ensure_parts(r))
        return fail(r, err, SPMV_ERR_NOMEM, r->line + 1, "out of memory for the parsing threads");
    cut_parts(r, p, end);
    if (parse_in_place(r, err, &st))
        return st;
    /* Otherwise each part parses into arrays of its own, appended after. */
    const mm_ctx *c = &r->ctx;
    mm_part *parts = r->parts;
    const int nparts = r->nparts;
#pragma omp parallel for num_threads(r->threads) schedule(dynamic, 1)
    for (int t = 0; t < nparts; t++) {
        parts[t].ent.n = 0;
        parts[t].status = spmv_mm_parse_range(c, parts[t].begin, parts[t].end, &parts[t].ent, INT64_MAX,
                                              &parts[t].lines, &parts[t].err);
    }
    return merge_parts(r, err);
}

/* Parses the complete lines [p, end): the header line by line, then the
 * data in bulk. */
static int parse_text(spmv_mm_reader *r, const char *p, const char *end, spmv_error *err)
{
    while (p < end && r->state != ST_DATA) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        int st = header_line(r, p, nl, err);
        if (st)
            return st;
        r->line++;
        p = nl + 1;
    }
    if (p == end)
        return SPMV_OK;
    /* Small amounts of text are not worth waking threads for (the bound
     * follows the block size so that small test blocks go parallel too). */
    size_t par_min = r->block_size / 2 < MM_PAR_MIN_BYTES ? r->block_size / 2 : MM_PAR_MIN_BYTES;
    if (r->threads > 1 && (size_t)(end - p) >= par_min)
        return parse_parallel(r, p, end, err);
    return parse_serial(r, p, end, err);
}

static int text_reserve(spmv_mm_reader *r, size_t n, spmv_error *err)
{
    if (r->text_len + n > r->text_cap) {
        size_t cap = r->text_cap ? r->text_cap : 4096;
        while (cap < r->text_len + n)
            cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t)
            return fail(r, err, SPMV_ERR_NOMEM, r->line + 1, "out of memory for the input text");
        r->text = t;
        r->text_cap = cap;
    }
    return SPMV_OK;
}

static int text_append(spmv_mm_reader *r, const char *p, size_t n, spmv_error *err)
{
    int st;
    if (n == 0)
        return SPMV_OK;
    if ((st = text_reserve(r, n, err)))
        return st;
    memcpy(r->text + r->text_len, p, n);
    r->text_len += n;
    return SPMV_OK;
}

/* Other lines may be as long as they like (the input's size is bounded by
 * the caller), but an input whose first line runs past 1 MiB is no Matrix
 * Market file: refused early, before much of it is buffered. */
static int banner_too_long(spmv_mm_reader *r, spmv_error *err)
{
    return fail(r, err, SPMV_ERR_PARSE, 1, "bad banner: the first line is longer than %zu bytes", MM_MAX_BANNER);
}

/* Parses the text buffer up to its last newline and keeps the rest. */
static int flush_text(spmv_mm_reader *r, spmv_error *err)
{
    /* r->text[0, text_clean) is known to hold no newline (the remainder of
     * the last flush, or a long line seen before): each byte is searched
     * once however long a line grows. */
    size_t from = r->text_clean;
    const char *nl = r->text_len > from ? memrchr(r->text + from, '\n', r->text_len - from) : NULL;
    if (!nl) {
        r->text_clean = r->text_len;
        return SPMV_OK;   /* one long line so far: the block grows */
    }
    size_t used = (size_t)(nl - r->text) + 1;
    int st = parse_text(r, r->text, r->text + used, err);
    if (st)
        return st;
    memmove(r->text, r->text + used, r->text_len - used);
    r->text_len -= used;
    r->text_clean = r->text_len;
    return SPMV_OK;
}

/* Serial: complete lines are parsed where they lie; the first one may
 * continue the carried partial line, the last partial one is carried. */
static int consume_serial(spmv_mm_reader *r, const char *p, size_t n, spmv_error *err)
{
    int st;
    if (r->text_len > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) + 1 : n;
        if ((st = text_append(r, p, take, err)))
            return st;
        p += take;
        n -= take;
        if (!nl)
            return SPMV_OK;
        if ((st = parse_text(r, r->text, r->text + r->text_len, err)))
            return st;
        r->text_len = r->text_clean = 0;
    }
    const char *last = n ? memrchr(p, '\n', n) : NULL;
    if (last) {
        size_t used = (size_t)(last - p) + 1;
        if ((st = parse_text(r, p, p + used, err)))
            return st;
        p += used;
        n -= used;
    }
    return text_append(r, p, n, err);
}

/* Parallel: text gathers into a block, parsed whenever it is full. */
static int consume_blocks(spmv_mm_reader *r, const char *p, size_t n, spmv_error *err)
{
    while (n > 0) {
        size_t room = r->text_len < r->block_size ? r->block_size - r->text_len : 0;
        if (room == 0)
            room = r->block_size;   /* a line longer than a block: the block grows */
        size_t take = n < room ? n : room;
        int st = text_append(r, p, take, err);
        if (st)
            return st;
        p += take;
        n -= take;
        if (r->text_len >= r->block_size && (st = flush_text(r, err)))
            return st;
    }
    return SPMV_OK;
}

static int consume_lines(spmv_mm_reader *r, const char *p, size_t n, spmv_error *err)
{
    return r->threads > 1 ? consume_blocks(r, p, n, err) : consume_serial(r, p, n, err);
}

#define MM_CRBUF_SIZE ((size_t)64 << 10)

/* A file whose lines end in a lone '\r': the rest of the reader sees
 * '\n' instead, through a small copy (such files are rare and small). */
static int consume_cr(spmv_mm_reader *r, const char *p, size_t n, spmv_error *err)
{
    if (!r->crbuf && !(r->crbuf = malloc(MM_CRBUF_SIZE)))
        return fail(r, err, SPMV_ERR_NOMEM, r->line + 1, "out of memory for the input text");
    while (n > 0) {
        size_t take = n < MM_CRBUF_SIZE ? n : MM_CRBUF_SIZE;
        for (size_t k = 0; k < take; k++)
            r->crbuf[k] = p[k] == '\r' ? '\n' : p[k];
        int st = consume_lines(r, r->crbuf, take, err);
        if (st)
            return st;
        p += take;
        n -= take;
    }
    return SPMV_OK;
}

/* Decides the line ends from the text gathered so far in r->text: the
 * first '\n', or a '\r' followed by something other than '\n', settles
 * it; `at_end` settles it anyway. */
static enum mm_eol sniff_eol(spmv_mm_reader *r, bool at_end)
{
    /* Resume where the last call stopped (one byte back, for a '\r' that
     * was last then), so that a long first line fed in small chunks is
     * scanned once. */
    size_t k = r->text_clean > 0 ? r->text_clean - 1 : 0;
    r->text_clean = r->text_len;
    for (; k < r->text_len; k++) {
        if (r->text[k] == '\n')
            return EOL_LF;
        if (r->text[k] == '\r' && k + 1 < r->text_len)
            return r->text[k + 1] == '\n' ? EOL_LF : EOL_CR;
    }
    return at_end ? EOL_LF : EOL_UNKNOWN;
}

static int consume_text(spmv_mm_reader *r, const char *p, size_t n, spmv_error *err);

/* Until the line ends are known the text gathers in r->text; then it is
 * replayed through the chosen path. */
static int consume_undecided(spmv_mm_reader *r, const char *p, size_t n, bool at_end, spmv_error *err)
{
    int st = text_append(r, p, n, err);
    if (st)
        return st;
    r->eol = sniff_eol(r, at_end);
    if (r->eol == EOL_UNKNOWN)
        return r->text_len > MM_MAX_BANNER + 1 ? banner_too_long(r, err) : SPMV_OK;
    char *held = r->text;
    size_t len = r->text_len;
    r->text = NULL;
    r->text_len = r->text_cap = r->text_clean = 0;
    st = consume_text(r, held, len, err);
    free(held);
    return st;
}

static int consume_text(spmv_mm_reader *r, const char *p, size_t n, spmv_error *err)
{
    switch (r->eol) {
    case EOL_UNKNOWN: return consume_undecided(r, p, n, false, err);
    case EOL_CR: return consume_cr(r, p, n, err);
    default: return consume_lines(r, p, n, err);
    }
}

/* ---------------------------------------------------------------- gzip */

static int gzip_start(spmv_mm_reader *r, spmv_error *err)
{
    r->zbuf = malloc(MM_ZBUF_SIZE);
    if (!r->zbuf)
        return fail(r, err, SPMV_ERR_NOMEM, 1, "out of memory for gzip decompression");
    memset(&r->zs, 0, sizeof r->zs);
    if (inflateInit2(&r->zs, 16 + MAX_WBITS) != Z_OK)   /* 16: gzip wrapper only */
        return fail(r, err, SPMV_ERR_NOMEM, 1, "cannot start gzip decompression");
    r->zs_live = true;
    r->input = IN_GZIP;
    return SPMV_OK;
}

/* Inflates n bytes and parses what comes out. Several gzip members in a
 * row (as `cat a.gz b.gz` makes) are one stream, as for gunzip. */
static int gzip_feed(spmv_mm_reader *r, const unsigned char *d, size_t n, spmv_error *err)
{
    z_stream *zs = &r->zs;
    while (n > 0) {
        uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
        zs->next_in = (Bytef *)d;
        zs->avail_in = piece;
        do {
            if (r->gz_member_ended) {
                if (zs->avail_in == 0)
                    break;
                inflateReset(zs);
                r->gz_member_ended = false;
            }
            zs->next_out = r->zbuf;
            zs->avail_out = (uInt)MM_ZBUF_SIZE;
            int zr = inflate(zs, Z_NO_FLUSH);
            size_t got = MM_ZBUF_SIZE - zs->avail_out;
            int st = got ? consume_text(r, (const char *)r->zbuf, got, err) : SPMV_OK;
            if (st)
                return st;
            if (zr == Z_STREAM_END) {
                r->gz_member_ended = true;
                r->gz_members++;
            } else if (zr == Z_BUF_ERROR) {
                break;   /* needs more input */
            } else if (zr != Z_OK) {
                if ((st = flush_text(r, err)))
                    return st;   /* the lines before the damage come first */
                return fail(r, err, SPMV_ERR_PARSE, r->line + 1, "%s (zlib: %s)",
                            r->gz_members ? "data after the end of the gzip stream is not gzip"
                                          : "the gzip stream is corrupt",
                            zs->msg ? zs->msg : "data error");
            }
        } while (zs->avail_in > 0 || zs->avail_out == 0);
        d += piece;
        n -= piece;
    }
    return SPMV_OK;
}

static int route(spmv_mm_reader *r, const unsigned char *d, size_t n, spmv_error *err)
{
    return r->input == IN_GZIP ? gzip_feed(r, d, n, err) : consume_text(r, (const char *)d, n, err);
}

/* ---------------------------------------------------------- public API */

int spmv_mm_reader_new(const spmv_mm_options *opts, spmv_mm_reader **out, spmv_error *err)
{
    spmv_mm_options o = {.threads = 1};
    if (opts)
        o = *opts;
    *out = NULL;
    if (o.max_rows < 0 || o.max_cols < 0 || o.max_nnz < 0 || o.threads < 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                              "reader options must not be negative (max_rows, max_cols, max_nnz, threads)");
    spmv_mm_reader *r = calloc(1, sizeof *r);
    if (!r)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the Matrix Market reader");
    r->max_rows = o.max_rows == 0 || o.max_rows > INT32_MAX ? INT32_MAX : o.max_rows;
    r->max_cols = o.max_cols == 0 || o.max_cols > INT32_MAX ? INT32_MAX : o.max_cols;
    r->max_nnz = o.max_nnz == 0 || o.max_nnz > INT32_MAX ? INT32_MAX : o.max_nnz;
    r->ctx.h.max_nnz = r->max_nnz;
    r->admit = o.admit;
    r->admit_ctx = o.admit_ctx;
#ifdef _OPENMP
    r->threads = o.threads == 0 ? omp_get_max_threads() : o.threads;
#else
    r->threads = 1;
#endif
    if (r->threads < 1)
        r->threads = 1;
    r->block_size = MM_BLOCK_DEFAULT;
    r->ctx.c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (!r->ctx.c_locale) {
        free(r);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "cannot create the C locale for number parsing");
    }
    *out = r;
    return SPMV_OK;
}

int spmv_mm_reader_set_block_size(spmv_mm_reader *r, size_t bytes)
{
    if (!r || r->line > 0 || r->text_len > 0 || r->input != IN_UNKNOWN)
        return SPMV_ERR_INVALID;
    r->block_size = bytes < MM_BLOCK_MIN ? MM_BLOCK_MIN : bytes;
    return SPMV_OK;
}

int spmv_mm_reader_feed(spmv_mm_reader *r, const void *data, size_t len, spmv_error *err)
{
    if (!r || (!data && len))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "spmv_mm_reader_feed: no reader or no data");
    if (r->state == ST_FAILED)
        return repeat_error(r, err);
    if (r->state == ST_FINISHED)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "the Matrix Market reader has already finished");
    const unsigned char *d = data;
    if (len == 0)
        return SPMV_OK;
    if (r->input == IN_UNKNOWN) {
        /* The gzip magic may arrive split over two calls. */
        if (!r->magic_pending && d[0] == 0x1f && len == 1) {
            r->magic_pending = true;
            return SPMV_OK;
        }
        bool gz = r->magic_pending ? d[0] == 0x8b : (d[0] == 0x1f && d[1] == 0x8b);
        int st = gz ? gzip_start(r, err) : SPMV_OK;
        if (st)
            return st;
        if (!gz)
            r->input = IN_PLAIN;
        if (r->magic_pending) {
            static const unsigned char magic0 = 0x1f;
            r->magic_pending = false;
            if ((st = route(r, &magic0, 1, err)))
                return st;
        }
    }
    return route(r, d, len, err);
}

/* The end of the input: the last line, then whether everything came. */
static int finish_input(spmv_mm_reader *r, spmv_error *err)
{
    int st;
    if (r->magic_pending) {   /* a one-byte input of 0x1f */
        static const char magic0 = 0x1f;
        r->magic_pending = false;
        r->input = IN_PLAIN;
        if ((st = consume_text(r, &magic0, 1, err)))
            return st;
    }
    /* Complete lines first (a parallel reader may hold a block of them),
     * so that a truncated stream reports the same error whatever the
     * chunking and thread count. */
    if (r->input == IN_GZIP && !r->gz_member_ended && (st = flush_text(r, err)))
        return st;
    if (r->input == IN_GZIP && !r->gz_member_ended)
        return fail(r, err, SPMV_ERR_PARSE, r->line + 1,
                    "the gzip stream is truncated: the input ended inside it");
    if (r->eol == EOL_UNKNOWN && (st = consume_undecided(r, NULL, 0, true, err)))
        return st;
    if (r->text_len > 0) {
        if (r->text[r->text_len - 1] != '\n' && (st = text_append(r, "\n", 1, err)))
            return st;
        if ((st = parse_text(r, r->text, r->text + r->text_len, err)))
            return st;
        r->text_len = 0;
    }
    const mm_header *h = &r->ctx.h;
    switch (r->state) {
    case ST_BANNER:
        return fail(r, err, SPMV_ERR_PARSE, 1,
                    "the input is empty: expected the banner '%%%%MatrixMarket matrix <format> <field> <symmetry>'");
    case ST_HEADER:
        return fail(r, err, SPMV_ERR_PARSE, r->line + 1,
                    "missing size line: the input ended before %s",
                    h->format == SPMV_MM_COORDINATE ? "'rows columns entries'" : "'rows columns'");
    default:
        break;
    }
    if (r->ent.n < h->entries)
        return fail(r, err, SPMV_ERR_PARSE, r->line,
                    "too few entries: the input ended after %lld of the %lld %s declared on line %lld",
                    (long long)r->ent.n, (long long)h->entries,
                    h->format == SPMV_MM_ARRAY ? "values" : "entries", (long long)h->size_line);
    return SPMV_OK;
}

int spmv_mm_reader_finish(spmv_mm_reader *r, spmv_coo *out, spmv_mm_info *info, spmv_error *err)
{
    if (!r || !out)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "spmv_mm_reader_finish: no reader or no output");
    if (r->state == ST_FAILED)
        return repeat_error(r, err);
    if (r->state == ST_FINISHED)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "the Matrix Market reader has already finished");
    int st = finish_input(r, err);
    if (st)
        return st;
    int64_t duplicates = 0;
    spmv_error berr;
    st = spmv_mm_build_coo(&r->ctx.h, &r->ent, r->threads, out, &duplicates, &berr);
    spmv_mm_entries_free(&r->ent);
    if (st) {
        r->error = berr;
        r->state = ST_FAILED;
        return repeat_error(r, err);
    }
    r->state = ST_FINISHED;
    if (info) {
        const mm_header *h = &r->ctx.h;
        info->format = h->format;
        info->field = h->field;
        info->symmetry = h->symmetry;
        info->rows = h->rows;
        info->cols = h->cols;
        info->entries = h->entries;
        info->lines = r->line;
        info->duplicates = duplicates;
        info->gzip = r->input == IN_GZIP;
    }
    return SPMV_OK;
}

void spmv_mm_reader_free(spmv_mm_reader *r)
{
    if (!r)
        return;
    if (r->zs_live)
        inflateEnd(&r->zs);
    free(r->zbuf);
    free(r->crbuf);
    free(r->text);
    spmv_mm_entries_free(&r->ent);
    for (int t = 0; t < r->nparts; t++)
        spmv_mm_entries_free(&r->parts[t].ent);
    free(r->parts);
    if (r->ctx.c_locale)
        freelocale(r->ctx.c_locale);
    free(r);
}

int spmv_mm_read_buffer(const void *data, size_t len, const spmv_mm_options *opts,
                        spmv_coo *out, spmv_mm_info *info, spmv_error *err)
{
    spmv_mm_reader *r;
    int st = spmv_mm_reader_new(opts, &r, err);
    if (st)
        return st;
    if (!(st = spmv_mm_reader_feed(r, data, len, err)))
        st = spmv_mm_reader_finish(r, out, info, err);
    spmv_mm_reader_free(r);
    return st;
}

int spmv_mm_read_file(const char *path, const spmv_mm_options *opts,
                      spmv_coo *out, spmv_mm_info *info, spmv_error *err)
{
    spmv_mm_reader *r = NULL;
    char *buf = NULL;
    int st, fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "cannot open %s: %s", path, strerror(errno));
    if ((st = spmv_mm_reader_new(opts, &r, err)))
        goto fail;
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
        r->size_hint = sb.st_size;
    buf = malloc(MM_READ_CHUNK);
    if (!buf) {
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for reading %s", path);
        goto fail;
    }
    for (;;) {
        /* A parallel reader of plain text reads straight into its block
         * (one copy less); anything else goes through feed. */
        bool direct = r->threads > 1 && r->input == IN_PLAIN && r->eol == EOL_LF && r->state != ST_FAILED;
        size_t room = direct ? r->block_size - (r->text_len < r->block_size ? r->text_len : 0) : MM_READ_CHUNK;
        if (direct && (st = text_reserve(r, room, err)))
            goto fail;
        ssize_t got = read(fd, direct ? r->text + r->text_len : buf, room);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            st = spmv_error_set(err, SPMV_ERR_IO, 0, "cannot read %s: %s", path, strerror(errno));
            goto fail;
        }
        if (got == 0)
            break;
        if (direct) {
            r->text_len += (size_t)got;
            st = r->text_len >= r->block_size ? flush_text(r, err) : SPMV_OK;
        } else {
            st = spmv_mm_reader_feed(r, buf, (size_t)got, err);
        }
        if (st)
            goto fail;
    }
    st = spmv_mm_reader_finish(r, out, info, err);
fail:
    free(buf);
    spmv_mm_reader_free(r);
    close(fd);
    return st;
}
