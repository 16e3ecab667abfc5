/* npz.c — SciPy's .npz sparse matrices (scipy.sparse.save_npz) read with libzip.
 *
 * A .npz is a zip archive of NumPy .npy members: `format` (a 0-d byte or
 * unicode string: csr, csc or coo), `shape` (two integers), `data`, and
 * `indices` + `indptr` (CSR: indptr per row; CSC: per column) or `row` +
 * `col` (COO; SciPy's n-d COO arrays write `coords`, 2 x nnz, instead);
 * SciPy's sparse arrays add `_is_array`, which is ignored.
 * Members may be stored or deflated (save_npz's `compressed`); a stored
 * one's elements are read through a window on the archive, without the
 * checksum libzip's file reads compute (open_window says why). Each .npy
 * member is a magic, a version, a header (a Python dict literal giving
 * `descr`, `fortran_order` and `shape`) and the array's bytes.
 *
 * Every member is read in chunks straight into the entries the Matrix
 * Market reader's build step takes (0-based int32 row and column, float64
 * value), converting each chunk as it comes: no member is ever held whole
 * as bytes. Everything that sizes an allocation (shape, lengths) is checked
 * against the reader's limits and against the member's real size before
 * anything is allocated, and every index is range-checked, so a bad archive
 * gets the same kind of answer a bad Matrix Market file gets: which member,
 * which entry, which limit. The build (mmio_build.c) then sorts by row and
 * column and sums duplicates, exactly as for Matrix Market input.
 *
 * The upload takes the matrix as a host CSR (spmv_npz_read_*_csr), and a
 * CSR archive is one already: its indices, indptr and data are read
 * straight into the CSR's col, row_ptr and val (int32 indices and float64
 * values in place, chunk by chunk, checked where they land), with the same
 * checks in the same member order as above, so a bad archive gets the
 * same answer either way. One pass then checks that each row's columns
 * strictly increase; a row that does not (unsorted, or a duplicate), a CSC
 * or a COO archive goes the COO way above and through spmv_coo_to_csr.
 * The direct way holds the matrix once, in its final arrays: no entries,
 * no sort, no copy.
 */
#include <endian.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>
#include <zip.h>

#include "formats.h"
#include "mmio_internal.h"
#include "spmv.h"

#if __BYTE_ORDER != __LITTLE_ENDIAN
#error "npz.c reads little-endian arrays with plain casts: a big-endian host needs byte swaps here"
#endif

#define NPY_HEADER_MAX 65536
#define CHUNK 65536 /* elements converted at a time */
#define DEFLATE_RATIO 1032u /* the most bytes one deflated byte can become (RFC 1951: a 258-byte match in under 2 bits) */

bool spmv_npz_magic(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    return len >= 4 && p[0] == 'P' && p[1] == 'K' && ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6));
}

/* One .npy member, open, positioned at its first element. */
typedef struct npy {
    const char *name;      /* "indices.npy" */
    zip_file_t *f;         /* the member, or */
    zip_source_t *win;     /* its elements (stored members: npy_open says why) */
    char kind;             /* 'f' float, 'i' signed, 'u' unsigned, 'b' bool, 'S' bytes, 'U' unicode */
    int size;              /* bytes per element */
    int ndim;
    int64_t shape[2];
    int64_t n;             /* elements */
} npy;

static int npz_fail(spmv_error *err, int st, const char *member, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int npz_fail(spmv_error *err, int st, const char *member, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return spmv_error_set(err, st, 0, "npz member %s: %s", member, msg);
}

/* Reads exactly len bytes; SPMV_ERR_PARSE naming the member when it ends early. */
static int read_exact(npy *a, void *buf, size_t len, spmv_error *err)
{
    size_t got = 0;
    while (got < len) {
        zip_int64_t n = a->win ? zip_source_read(a->win, (char *)buf + got, len - got)
                               : zip_fread(a->f, (char *)buf + got, len - got);
        if (n < 0)
            return npz_fail(err, SPMV_ERR_PARSE, a->name, "cannot be read (%s)",
                            a->win ? zip_error_strerror(zip_source_error(a->win)) : zip_file_strerror(a->f));
        if (n == 0)
            return npz_fail(err, SPMV_ERR_PARSE, a->name, "ends after %zu of %zu bytes", got, len);
        got += (size_t)n;
    }
    return SPMV_OK;
}

/* The text after `key` in a .npy header dict, or NULL. */
static const char *dict_value(const char *h, const char *key)
{
    const char *p = strstr(h, key);
    if (!p)
        return NULL;
    p += strlen(key);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
}

/* Parses the header dict: descr, fortran_order, shape (at most 2-d). */
static int parse_header(npy *a, const char *h, spmv_error *err)
{
    const char *d = dict_value(h, "'descr'"), *fo = dict_value(h, "'fortran_order'"), *sh = dict_value(h, "'shape'");
    if (!d || !fo || !sh || *d != '\'')
        return npz_fail(err, SPMV_ERR_PARSE, a->name, "the .npy header lacks descr, fortran_order or shape");
    char dt[17] = {0}; /* the descr without its quotes, for messages */
    for (int i = 0; i < 16 && d[i + 1] && d[i + 1] != '\''; i++)
        dt[i] = d[i + 1];
    char order = d[1], kind = d[2];
    char *end = NULL;
    long size = strtol(d + 3, &end, 10);
    if (!end || *end != '\'' || size < 1 || size > 64)
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "dtype %s is not a plain number or string type", dt);
    if (order == '>' && size > 1)
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "big-endian dtype %s: save the matrix little-endian", dt);
    if (order != '<' && order != '|' && order != '=')
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "dtype %s is not supported", dt);
    if (!strchr("fiubSU", kind) || kind == 0)
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "dtype %s (complex, object or other) is not supported", dt);
    if ((kind == 'f' && size != 4 && size != 8) || ((kind == 'i' || kind == 'u') && size != 1 && size != 2 &&
                                                       size != 4 && size != 8) || (kind == 'b' && size != 1))
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "dtype %s is not supported", dt);
    a->kind = kind;
    a->size = (int)size;
    bool fortran = strncmp(fo, "True", 4) == 0;
    if (*sh != '(')
        return npz_fail(err, SPMV_ERR_PARSE, a->name, "shape is not a tuple");
    const char *p = sh + 1;
    a->ndim = 0;
    a->n = 1;
    while (*p && *p != ')') {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0)
            return npz_fail(err, SPMV_ERR_PARSE, a->name, "shape %.40s is not a tuple of sizes", sh);
        if (a->ndim == 2)
            return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "has more than 2 dimensions");
        if (a->n > 0 && v > INT64_MAX / a->n)
            return npz_fail(err, SPMV_ERR_LIMIT, a->name, "shape %.40s overflows", sh);
        a->shape[a->ndim++] = v;
        a->n *= v;
        p = end;
    }
    if (fortran && a->ndim > 1)
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "is in Fortran order");
    return SPMV_OK;
}

static void npy_close(npy *a)
{
    if (a->f)
        zip_fclose(a->f);
    a->f = NULL;
    if (a->win) {
        zip_source_close(a->win);
        zip_source_free(a->win);
    }
    a->win = NULL;
}

/* A stored member's elements are read through a window on the archive
 * rather than through zip_fopen's file: libzip checksums every byte read
 * through the file (three fifths of the time spent reading a large stored
 * member) but compares the sum only when a read reaches the member's end,
 * which this reader, reading the declared elements and no further, never
 * asks for. The window reads the same bytes, without the sum. Anything
 * else (deflated, encrypted, a string, or a window libzip refuses) reads
 * on through the file. */
static void open_window(zip_t *za, npy *a, const zip_stat_t *zs, size_t at)
{
    if (a->n == 0 || a->kind == 'S' || a->kind == 'U' || !(zs->valid & ZIP_STAT_INDEX) || !(zs->valid & ZIP_STAT_SIZE) || !(zs->valid & ZIP_STAT_COMP_METHOD) ||
        zs->comp_method != ZIP_CM_STORE || !(zs->valid & ZIP_STAT_ENCRYPTION_METHOD) ||
        zs->encryption_method != ZIP_EM_NONE)
        return;
    zip_source_t *w = zip_source_zip(za, za, zs->index, 0, at, (zip_int64_t)a->n * a->size);
    if (!w)
        return;
    if (zip_source_open(w) != 0) {
        zip_source_free(w);
        return;
    }
    zip_fclose(a->f);
    a->f = NULL;
    a->win = w;
}

static int npy_open_header(zip_t *za, const char *name, npy *a, spmv_error *err);

/* The bytes a member's elements may take after its .npy header (`head`
 * bytes), from the bytes really in the archive rather than the size its
 * directory claims: a stored member's size is its compressed size, a
 * deflated one's at most DEFLATE_RATIO times it, and the compressed bytes
 * lie within the archive (ZIP_CHECKCONS at open checks that). */
static int member_bytes(const npy *a, const zip_stat_t *zs, size_t head, uint64_t *holds, spmv_error *err)
{
    const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if ((zs->valid & need) != need)
        return npz_fail(err, SPMV_ERR_PARSE, a->name, "has no sizes in the archive's directory");
    uint64_t most;
    if (zs->comp_method == ZIP_CM_STORE)
        most = zs->comp_size;
    else if (zs->comp_method == ZIP_CM_DEFLATE)
        most = zs->comp_size > UINT64_MAX / DEFLATE_RATIO ? UINT64_MAX : zs->comp_size * DEFLATE_RATIO;
    else
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "is compressed by method %d: only stored and deflated "
                        "members are read", (int)zs->comp_method);
    if (zs->size > most)
        return npz_fail(err, SPMV_ERR_PARSE, a->name, "claims %llu bytes, more than its %llu compressed bytes can "
                        "hold (%llu at most)", (unsigned long long)zs->size, (unsigned long long)zs->comp_size,
                        (unsigned long long)most);
    *holds = zs->size > head ? zs->size - head : 0;
    return SPMV_OK;
}

/* Opens member `name` and reads its .npy header; checks the member's
 * uncompressed size holds n * size bytes after it. Closed again on failure. */
static int npy_open(zip_t *za, const char *name, npy *a, spmv_error *err)
{
    int st = npy_open_header(za, name, a, err);
    if (st)
        npy_close(a);
    return st;
}

static int npy_open_header(zip_t *za, const char *name, npy *a, spmv_error *err)
{
    memset(a, 0, sizeof *a);
    a->name = name;
    zip_stat_t zs;
    zip_stat_init(&zs);
    if (zip_stat(za, name, 0, &zs) != 0 || !(a->f = zip_fopen(za, name, 0)))
        return npz_fail(err, SPMV_ERR_PARSE, name, "missing from the archive (%s)", zip_strerror(za));
    unsigned char pre[10];
    int st = read_exact(a, pre, 10, err);
    if (st)
        return st;
    if (memcmp(pre, "\x93NUMPY", 6) != 0)
        return npz_fail(err, SPMV_ERR_PARSE, name, "is not a .npy array (no \\x93NUMPY magic)");
    size_t hlen, pre_len;
    if (pre[6] == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
        pre_len = 10;
    } else if (pre[6] == 2 || pre[6] == 3) {
        unsigned char more[2];
        if ((st = read_exact(a, more, 2, err)))
            return st;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)more[0] << 16 | (size_t)more[1] << 24;
        pre_len = 12;
    } else {
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, name, ".npy format version %d is not supported", pre[6]);
    }
    if (hlen == 0 || hlen > NPY_HEADER_MAX)
        return npz_fail(err, SPMV_ERR_LIMIT, name, "header of %zu bytes (at most %d)", hlen, NPY_HEADER_MAX);
    char *h = malloc(hlen + 1);
    if (!h)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory reading %s", name);
    if (!(st = read_exact(a, h, hlen, err))) {
        h[hlen] = '\0';
        st = parse_header(a, h, err);
    }
    free(h);
    if (st)
        return st;
    uint64_t holds = 0;
    if ((st = member_bytes(a, &zs, pre_len + hlen, &holds, err)))
        return st;
    if ((uint64_t)a->n > holds / (uint64_t)a->size)
        return npz_fail(err, SPMV_ERR_PARSE, name, "declares %lld elements of %d bytes but holds %llu bytes",
                        (long long)a->n, a->size, (unsigned long long)holds);
    open_window(za, a, &zs, pre_len + hlen);
    return SPMV_OK;
}

/* Element i of a chunk of raw little-endian bytes, as int64 / double. */
static int64_t raw_int(const npy *a, const unsigned char *p)
{
    uint64_t v = 0;
    for (int b = a->size - 1; b >= 0; b--)
        v = v << 8 | p[b];
    if (a->kind == 'i' && a->size < 8 && (v >> (a->size * 8 - 1)) & 1)
        v |= ~UINT64_C(0) << (a->size * 8); /* sign-extend */
    return (int64_t)v;
}

static double raw_double(const npy *a, const unsigned char *p)
{
    if (a->kind == 'f' && a->size == 8) {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    if (a->kind == 'f') {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    if (a->kind == 'u' && a->size == 8)
        return (double)(uint64_t)raw_int(a, p);
    return (double)raw_int(a, p);
}

/* n raw elements into ints or doubles: the common dtypes by plain casts
 * (little-endian host), the rest byte by byte. */
static void convert(const npy *a, const unsigned char *raw, int64_t n, int64_t *iv, double *dv)
{
    if (dv && a->kind == 'f' && a->size == 8) {
        memcpy(dv, raw, (size_t)n * 8);
    } else if (dv && a->kind == 'f' && a->size == 4) {
        const float *f = (const float *)raw;
        for (int64_t i = 0; i < n; i++)
            dv[i] = f[i];
    } else if (iv && a->kind == 'i' && a->size == 4) {
        const int32_t *v = (const int32_t *)raw;
        for (int64_t i = 0; i < n; i++)
            iv[i] = v[i];
    } else if (iv && a->kind == 'i' && a->size == 8) {
        memcpy(iv, raw, (size_t)n * 8);
    } else {
        for (int64_t i = 0; i < n; i++) {
            if (dv)
                dv[i] = raw_double(a, raw + i * a->size);
            else
                iv[i] = raw_int(a, raw + i * a->size);
        }
    }
}

/* Reads the member's n elements in chunks, handing each converted chunk
 * (ints or doubles, as asked) to `use`. */
typedef int (*chunk_fn)(void *ctx, const npy *a, int64_t off, const int64_t *iv, const double *dv, int64_t n,
                        spmv_error *err);

static int read_chunks(npy *a, bool as_double, chunk_fn use, void *ctx, spmv_error *err)
{
    unsigned char *raw = malloc((size_t)CHUNK * (size_t)a->size);
    int64_t *iv = as_double ? NULL : malloc(CHUNK * sizeof *iv);
    double *dv = as_double ? malloc(CHUNK * sizeof *dv) : NULL;
    int st = SPMV_OK;
    if (!raw || (!iv && !dv)) {
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory reading %s", a->name);
        goto done;
    }
    for (int64_t off = 0; off < a->n && !st; off += CHUNK) {
        int64_t n = a->n - off < CHUNK ? a->n - off : CHUNK;
        if ((st = read_exact(a, raw, (size_t)n * (size_t)a->size, err)))
            break;
        convert(a, raw, n, iv, dv);
        st = use(ctx, a, off, iv, dv, n, err);
    }
done:
    free(raw);
    free(iv);
    free(dv);
    return st;
}

/* ------------------------------------------------------------ members */

static int need_int_1d(const npy *a, int64_t len, const char *what, spmv_error *err)
{
    if (a->kind != 'i' && a->kind != 'u')
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "%s must be integers, not dtype kind '%c'", what, a->kind);
    if (a->ndim != 1 || a->n != len)
        return npz_fail(err, SPMV_ERR_PARSE, a->name, "holds %lld %s; the matrix needs %lld", (long long)a->n, what,
                        (long long)len);
    return SPMV_OK;
}

/* format.npy: a 0-d string "csr", "csc" or "coo". */
static int read_format(zip_t *za, char out[4], spmv_error *err)
{
    npy a;
    int st = npy_open(za, "format.npy", &a, err);
    unsigned char raw[64] = {0};
    if (!st && ((a.kind != 'S' && a.kind != 'U') || a.ndim != 0 || (size_t)a.size * (a.kind == 'U' ? 4 : 1) > sizeof raw))
        st = npz_fail(err, SPMV_ERR_PARSE, a.name, "is not a 0-d string");
    size_t bytes = (size_t)a.size * (a.kind == 'U' ? 4 : 1);
    if (!st)
        st = read_exact(&a, raw, bytes, err);
    npy_close(&a);
    if (st)
        return st;
    char s[17] = {0};
    for (size_t i = 0, k = 0; k < 16 && i < bytes; i += a.kind == 'U' ? 4 : 1) /* UTF-32LE: low byte */
        if (raw[i])
            s[k++] = (char)raw[i];
    if (strcmp(s, "csr") && strcmp(s, "csc") && strcmp(s, "coo"))
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, "format.npy", "sparse format \"%s\" (csr, csc and coo are read)", s);
    memcpy(out, s, 4);
    return SPMV_OK;
}

typedef struct shape_ctx {
    int64_t v[2];
} shape_ctx;

static int take_shape(void *ctx, const npy *a, int64_t off, const int64_t *iv, const double *dv, int64_t n,
                      spmv_error *err)
{
    (void)a; (void)dv; (void)err;
    for (int64_t i = 0; i < n; i++)
        ((shape_ctx *)ctx)->v[off + i] = iv[i];
    return SPMV_OK;
}

/* Fills one index array of the entries (row or col) from a member, each
 * value checked against its bound. */
typedef struct index_ctx {
    int32_t *dst;
    int64_t bound;
    const char *dim;
} index_ctx;

static int index_outside(const npy *a, int64_t k, int64_t v, const index_ctx *c, spmv_error *err)
{
    return npz_fail(err, SPMV_ERR_PARSE, a->name, "entry %lld is %lld, outside 0..%lld (%s)", (long long)k,
                    (long long)v, (long long)c->bound - 1, c->dim);
}

static int take_index(void *ctx, const npy *a, int64_t off, const int64_t *iv, const double *dv, int64_t n,
                      spmv_error *err)
{
    (void)dv;
    index_ctx *c = ctx;
    for (int64_t i = 0; i < n; i++) {
        if (iv[i] < 0 || iv[i] >= c->bound)
            return index_outside(a, off + i, iv[i], c, err);
        c->dst[off + i] = (int32_t)iv[i];
    }
    return SPMV_OK;
}

/* coords.npy of SciPy's n-d COO arrays: a 2 x nnz array, C order: the row
 * indices, then the column indices. */
typedef struct coords_ctx {
    index_ctx row, col;
    int64_t nnz;
} coords_ctx;

static int take_coords(void *ctx, const npy *a, int64_t off, const int64_t *iv, const double *dv, int64_t n,
                       spmv_error *err)
{
    coords_ctx *c = ctx;
    int st = SPMV_OK;
    while (n > 0 && !st) { /* a chunk may straddle the two rows */
        bool first = off < c->nnz;
        int64_t take = first && off + n > c->nnz ? c->nnz - off : n;
        st = take_index(first ? &c->row : &c->col, a, first ? off : off - c->nnz, iv, dv, take, err);
        off += take;
        iv += take;
        n -= take;
    }
    return st;
}

static int need_coords(const npy *a, int64_t nnz, const char *what, spmv_error *err)
{
    (void)what;
    if (a->kind != 'i' && a->kind != 'u')
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "coordinates must be integers, not dtype kind '%c'",
                        a->kind);
    if (a->ndim != 2 || a->shape[0] != 2 || a->shape[1] != nnz)
        return npz_fail(err, SPMV_ERR_PARSE, a->name, "is not 2 x %lld (2-d COO coordinates for the values)",
                        (long long)nnz);
    return SPMV_OK;
}

static int take_values(void *ctx, const npy *a, int64_t off, const int64_t *iv, const double *dv, int64_t n,
                       spmv_error *err)
{
    (void)a; (void)iv; (void)err;
    memcpy((double *)ctx + off, dv, (size_t)n * sizeof *dv);
    return SPMV_OK;
}

/* indptr: monotone from 0 to nnz; expands into the major index of each entry. */
typedef struct ptr_ctx {
    int32_t *major;        /* row (CSR) or col (CSC) of every entry; the direct read: row_ptr */
    int64_t nnz, prev;
    int64_t *major64;      /* the direct read of a wide CSR: row_ptr64 */
} ptr_ctx;

/* Pointer k is v: 0 first, then non-decreasing up to nnz. */
static int check_ptr(const npy *a, int64_t k, int64_t v, int64_t prev, int64_t nnz, spmv_error *err)
{
    if (k == 0 && v != 0)
        return npz_fail(err, SPMV_ERR_PARSE, a->name, "entry 0 is %lld, not 0", (long long)v);
    if (v < prev || v > nnz)
        return npz_fail(err, SPMV_ERR_PARSE, a->name, "entry %lld is %lld: not within %lld..%lld (non-decreasing, "
                        "at most nnz)", (long long)k, (long long)v, (long long)prev, (long long)nnz);
    return SPMV_OK;
}

/* After the last pointer of a chunk: the last one must be nnz. */
static int check_ptr_end(const npy *a, int64_t end, int64_t prev, int64_t nnz, spmv_error *err)
{
    if (end == a->n && prev != nnz)
        return npz_fail(err, SPMV_ERR_PARSE, a->name, "ends at %lld, not at nnz %lld", (long long)prev,
                        (long long)nnz);
    return SPMV_OK;
}

/* The pointers of one chunk, each checked, then expanded into the major
 * index of the entries it opens (expand: the COO read) or kept as they are
 * (the CSR's row_ptr in the direct read, or a wide CSR's row_ptr64). */
static int store_ptrs(ptr_ctx *c, const npy *a, int64_t off, const int64_t *iv, int64_t n, bool expand,
                      spmv_error *err)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t k = off + i, v = iv[i];
        int st = check_ptr(a, k, v, c->prev, c->nnz, err);
        if (st)
            return st;
        if (expand)
            for (int64_t p = c->prev; p < v; p++)
                c->major[p] = (int32_t)(k - 1);
        else if (c->major64)
            c->major64[k] = v;
        else
            c->major[k] = (int32_t)v;
        c->prev = v;
    }
    return check_ptr_end(a, off + n, c->prev, c->nnz, err);
}

static int take_ptr(void *ctx, const npy *a, int64_t off, const int64_t *iv, const double *dv, int64_t n,
                    spmv_error *err)
{
    (void)dv;
    return store_ptrs(ctx, a, off, iv, n, true, err);
}

static int take_row_ptr(void *ctx, const npy *a, int64_t off, const int64_t *iv, const double *dv, int64_t n,
                        spmv_error *err)
{
    (void)dv;
    return store_ptrs(ctx, a, off, iv, n, false, err);
}

static int read_member(zip_t *za, const char *name, bool as_double, chunk_fn use, void *ctx,
                       int (*check)(const npy *, int64_t, const char *, spmv_error *), int64_t len, const char *what,
                       spmv_error *err)
{
    npy a;
    int st = npy_open(za, name, &a, err);
    if (!st && check)
        st = check(&a, len, what, err);
    if (!st)
        st = read_chunks(&a, as_double, use, ctx, err);
    npy_close(&a);
    return st;
}

static int check_data(const npy *a, int64_t len, const char *what, spmv_error *err)
{
    (void)what;
    if (a->kind == 'S' || a->kind == 'U')
        return npz_fail(err, SPMV_ERR_UNSUPPORTED, a->name, "values must be numbers, not strings");
    if (a->ndim != 1 || a->n != len)
        return npz_fail(err, SPMV_ERR_PARSE, a->name, "holds %lld values; the index arrays hold %lld", (long long)a->n,
                        (long long)len);
    return SPMV_OK;
}

/* ------------------------------------------------------------- reader */

static int64_t limit_or(int64_t v) { return v > 0 && v < INT32_MAX ? v : INT32_MAX; }
/* Entries: up to max_nnz (0: INT32_MAX), past INT32_MAX in a CSR archive only. */
static int64_t nnz_limit(int64_t v) { return v > 0 ? v : INT32_MAX; }

/* What the small members say, checked against the limits before anything
 * is sized from it. */
typedef struct npz_head {
    char layout[4];
    int64_t rows, cols, nnz;
} npz_head;

static int threads_of(const spmv_mm_options *opts);

/* The caller's say on the declared sizes (spmv_mm_options.admit), before
 * anything is allocated from them. Past INT32_MAX entries only the direct
 * read can hold the matrix, and it holds the CSR alone. */
static int admit(const spmv_mm_options *opts, const npz_head *h, spmv_error *err)
{
    if (!opts->admit)
        return SPMV_OK;
    spmv_mm_declared d;
    spmv_mm_declare(h->rows, h->cols, h->nnz, threads_of(opts), &d);
    if (h->nnz > INT32_MAX)
        d.peak_bytes = d.csr_bytes;
    return opts->admit(opts->admit_ctx, &d, err);
}

static int read_head(zip_t *za, const spmv_mm_options *opts, npz_head *h, spmv_error *err)
{
    shape_ctx shape = {{-1, -1}};
    npy a;
    int st;
    if ((st = read_format(za, h->layout, err)))
        return st;
    if ((st = npy_open(za, "shape.npy", &a, err)) || (st = need_int_1d(&a, 2, "sizes", err)) ||
        (st = read_chunks(&a, false, take_shape, &shape, err))) {
        npy_close(&a);
        return st;
    }
    npy_close(&a);
    int64_t rows = shape.v[0], cols = shape.v[1];
    if (rows < 0 || cols < 0)
        return npz_fail(err, SPMV_ERR_PARSE, "shape.npy", "shape %lld x %lld is negative", (long long)rows,
                        (long long)cols);
    if (rows > limit_or(opts->max_rows) || cols > limit_or(opts->max_cols))
        return npz_fail(err, SPMV_ERR_LIMIT, "shape.npy", "shape %lld x %lld is over the limit of %lld rows and %lld "
                        "columns (max_rows)", (long long)rows, (long long)cols, (long long)limit_or(opts->max_rows),
                        (long long)limit_or(opts->max_cols));
    /* nnz from data's header, checked before anything is allocated from it */
    if ((st = npy_open(za, "data.npy", &a, err)))
        return st;
    int64_t nnz = a.n;
    npy_close(&a);
    if (nnz > nnz_limit(opts->max_nnz))
        return npz_fail(err, SPMV_ERR_LIMIT, "data.npy", "%lld entries are over the limit of %lld (max_nnz)",
                        (long long)nnz, (long long)nnz_limit(opts->max_nnz));
    if (nnz > rows * cols + SPMV_MM_DUPLICATE_SLACK) /* both at most INT32_MAX: no overflow */
        return npz_fail(err, SPMV_ERR_LIMIT, "data.npy", "%lld entries, more than the %lld positions of a %lld x %lld "
                        "matrix (and %d duplicates): only duplicates could fill them", (long long)nnz,
                        (long long)(rows * cols), (long long)rows, (long long)cols, SPMV_MM_DUPLICATE_SLACK);
    h->rows = rows;
    h->cols = cols;
    h->nnz = nnz;
    return admit(opts, h, err);
}

static void set_info(spmv_npz_info *info, const npz_head *h, int64_t duplicates, bool direct)
{
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    memcpy(info->layout, h->layout, 4);
    info->rows = h->rows;
    info->cols = h->cols;
    info->entries = h->nnz;
    info->duplicates = duplicates;
    info->direct = direct;
}

static int threads_of(const spmv_mm_options *opts)
{
    return opts->threads > 0 ? opts->threads : omp_get_max_threads(); /* 0: all, as the reader's */
}

/* Every layout into the Matrix Market reader's entries, then its build:
 * the sorted, duplicate-free float64 COO. */
static int read_coo(zip_t *za, const spmv_mm_options *opts, const npz_head *hd, spmv_coo *out, spmv_npz_info *info,
                    spmv_error *err)
{
    const int64_t rows = hd->rows, cols = hd->cols, nnz = hd->nnz;
    mm_entries e = {0};
    int st;
    if ((st = spmv_mm_entries_reserve(&e, nnz > 0 ? nnz : 1, true)))
        return spmv_error_set(err, st, 0, "out of memory for %lld npz entries", (long long)nnz);
    e.n = nnz;
    bool csr = strcmp(hd->layout, "csr") == 0, csc = strcmp(hd->layout, "csc") == 0;
    if (csr || csc) {
        index_ctx ix = {csr ? e.col : e.row, csr ? cols : rows, csr ? "cols" : "rows"};
        ptr_ctx pc = {csr ? e.row : e.col, nnz, 0, NULL};
        int64_t major = csr ? rows : cols;
        st = read_member(za, "indices.npy", false, take_index, &ix, need_int_1d, nnz, "indices", err);
        if (!st)
            st = read_member(za, "indptr.npy", false, take_ptr, &pc, need_int_1d, major + 1, "pointers", err);
    } else {
        index_ctx ir = {e.row, rows, "rows"}, ic = {e.col, cols, "cols"};
        if (zip_name_locate(za, "row.npy", 0) < 0 && zip_name_locate(za, "coords.npy", 0) >= 0) {
            coords_ctx cc = {{e.row, rows, "rows"}, {e.col, cols, "cols"}, nnz};
            st = read_member(za, "coords.npy", false, take_coords, &cc, need_coords, nnz, "coordinates", err);
        } else {
            st = read_member(za, "row.npy", false, take_index, &ir, need_int_1d, nnz, "row indices", err);
            if (!st)
                st = read_member(za, "col.npy", false, take_index, &ic, need_int_1d, nnz, "column indices", err);
        }
    }
    if (!st)
        st = read_member(za, "data.npy", true, take_values, e.val, check_data, nnz, "values", err);
    if (!st) {
        mm_header h = {.format = SPMV_MM_COORDINATE, .field = SPMV_MM_REAL, .symmetry = SPMV_MM_GENERAL,
                       .rows = rows, .cols = cols, .entries = nnz, .max_nnz = limit_or(opts->max_nnz)};
        int64_t dups = 0;
        st = spmv_mm_build_coo(&h, &e, threads_of(opts), out, &dups, err);
        if (!st)
            set_info(info, hd, dups, false);
    }
    spmv_mm_entries_free(&e);
    return st;
}

static int read_archive(zip_t *za, const spmv_mm_options *opts, spmv_coo *out, spmv_npz_info *info,
                        spmv_error *err)
{
    spmv_mm_options none = {0};
    npz_head h;
    int st = read_head(za, opts ? opts : &none, &h, err);
    return st ? st : read_coo(za, opts ? opts : &none, &h, out, info, err);
}

/* ------------------------------------------------------ straight to CSR */

#define NOT_DIRECT 1 /* read_direct: a row is unsorted or has a duplicate (statuses are <= 0) */

/* indices.npy into col: int32 read in place, in chunks, each checked
 * where it landed (while in cache); other dtypes through the converting
 * chunks. The same checks and messages as take_index. */
static int read_indices_direct(zip_t *za, int32_t *col, int64_t nnz, int64_t cols, spmv_error *err)
{
    npy a;
    index_ctx ix = {col, cols, "cols"};
    int st = npy_open(za, "indices.npy", &a, err);
    if (!st)
        st = need_int_1d(&a, nnz, "indices", err);
    if (!st && a.kind == 'i' && a.size == 4) {
        for (int64_t off = 0; off < nnz && !st; off += CHUNK) {
            int64_t n = nnz - off < CHUNK ? nnz - off : CHUNK;
            if ((st = read_exact(&a, col + off, (size_t)n * sizeof *col, err)))
                break;
            bool bad = false; /* one vectorisable pass; the entry is looked for only when one is bad */
            for (int64_t i = 0; i < n; i++)
                bad |= (uint32_t)col[off + i] >= (uint64_t)cols;
            for (int64_t i = 0; bad && i < n; i++)
                if ((uint32_t)col[off + i] >= (uint64_t)cols) {
                    st = index_outside(&a, off + i, col[off + i], &ix, err);
                    break;
                }
        }
    } else if (!st) {
        st = read_chunks(&a, false, take_index, &ix, err);
    }
    npy_close(&a);
    return st;
}

/* data.npy into val: float64 read in place, in chunks (libzip checks each
 * chunk's CRC while it is in cache), other dtypes converted. */
static int read_values_direct(zip_t *za, double *val, int64_t nnz, spmv_error *err)
{
    npy a;
    int st = npy_open(za, "data.npy", &a, err);
    if (!st)
        st = check_data(&a, nnz, "values", err);
    if (!st && a.kind == 'f' && a.size == 8) {
        for (int64_t off = 0; off < nnz && !st; off += CHUNK) {
            int64_t n = nnz - off < CHUNK ? nnz - off : CHUNK;
            st = read_exact(&a, val + off, (size_t)n * sizeof *val, err);
        }
    } else if (!st) {
        st = read_chunks(&a, true, take_values, val, err);
    }
    npy_close(&a);
    return st;
}

/* Whether every row's columns strictly increase: sorted, no duplicates. */
static bool rows_strictly_increasing(const spmv_csr *c, int threads)
{
    bool ok = true;
#pragma omp parallel for num_threads(threads > 1 ? threads : 1) reduction(&& : ok) schedule(dynamic, 16384)
    for (int64_t i = 0; i < c->rows; i++) {
        bool row_ok = true;
        for (int64_t k = spmv_csr_row_begin(c, i) + 1; k < spmv_csr_row_begin(c, i + 1); k++)
            row_ok &= c->col[k - 1] < c->col[k];
        ok = ok && row_ok;
    }
    return ok;
}

/* A CSR archive into the CSR's own arrays: indices, indptr (the members
 * and checks of read_coo, in its order), the row check, then data.
 * NOT_DIRECT, with nothing kept, when a row is unsorted or has a
 * duplicate. */
static int read_direct(zip_t *za, const spmv_mm_options *opts, const npz_head *h, spmv_csr *out, spmv_error *err)
{
    int st = SPMV_OK;
    spmv_csr c = {.rows = (int32_t)h->rows, .cols = (int32_t)h->cols, .nnz = h->nnz, .dtype = SPMV_FLOAT64};
    ptr_ctx pc = {NULL, h->nnz, 0, NULL};
    bool wide = h->nnz > INT32_MAX || opts->offsets64;
    size_t ps = wide ? sizeof(int64_t) : sizeof(int32_t);
    void *ptr = spmv_array_alloc(h->rows + 1, ps, &st);
    if (wide)
        c.row_ptr64 = ptr;
    else
        c.row_ptr = ptr;
    c.col = spmv_array_alloc(h->nnz, sizeof(int32_t), &st);
    c.val = spmv_array_alloc(h->nnz, sizeof(double), &st);
    if (!ptr || !c.col || !c.val) {
        st = spmv_error_set(err, st, 0, "out of memory for %lld npz entries", (long long)h->nnz);
        goto fail;
    }
    spmv_mm_prefault(ptr, ((size_t)c.rows + 1) * ps, threads_of(opts));
    spmv_mm_prefault(c.col, (size_t)c.nnz * sizeof(int32_t), threads_of(opts));
    spmv_mm_prefault(c.val, (size_t)c.nnz * sizeof(double), threads_of(opts));
    pc.major = c.row_ptr;
    pc.major64 = c.row_ptr64;
    if ((st = read_indices_direct(za, c.col, h->nnz, h->cols, err)) ||
        (st = read_member(za, "indptr.npy", false, take_row_ptr, &pc, need_int_1d, h->rows + 1, "pointers", err)))
        goto fail;
    if (!rows_strictly_increasing(&c, threads_of(opts))) {
        st = NOT_DIRECT;
        goto fail;
    }
    if ((st = read_values_direct(za, c.val, h->nnz, err)))
        goto fail;
    *out = c;
    return SPMV_OK;
fail:
    spmv_csr_free(&c);
    return st;
}

static int read_archive_csr(zip_t *za, const spmv_mm_options *opts, spmv_csr *out, spmv_npz_info *info,
                            spmv_error *err)
{
    spmv_mm_options none = {0};
    spmv_coo coo;
    npz_head h;
    if (!opts)
        opts = &none;
    int st = read_head(za, opts, &h, err);
    if (st)
        return st;
    bool csr = strcmp(h.layout, "csr") == 0;
    if (csr && (st = read_direct(za, opts, &h, out, err)) != NOT_DIRECT) {
        if (!st)
            set_info(info, &h, 0, true);
        return st;
    }
    if (h.nnz > INT32_MAX) /* only the direct read holds 64-bit offsets */
        return npz_fail(err, SPMV_ERR_LIMIT, csr ? "indices.npy" : "format.npy",
                        "%lld entries, past INT32_MAX: such an archive must be a CSR (format csr) whose rows' columns "
                        "strictly increase (SciPy: A.tocsr(); A.sum_duplicates(); A.sort_indices())%s",
                        (long long)h.nnz, csr ? "; a row here is unsorted or holds a duplicate" : "");
    if ((st = read_coo(za, opts, &h, &coo, info, err)))
        return st;
    st = spmv_coo_to_csr(&coo, SPMV_FLOAT64, out, err);
    spmv_coo_free(&coo);
    return st;
}

static int open_failed(int zerr, const char *what, spmv_error *err)
{
    if (zerr == ZIP_ER_EXISTS) /* ZIP_CHECKCONS: two members of one name */
        return spmv_error_set(err, SPMV_ERR_PARSE, 0, "npz: %s holds a member twice under one name: which one is the "
                              "matrix would be a guess", what);
    zip_error_t ze;
    zip_error_init_with_code(&ze, zerr);
    int st = spmv_error_set(err, SPMV_ERR_PARSE, 0, "npz: %s is not a readable zip archive (%s)", what,
                            zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return st;
}

/* Each member read must be there once: with two of a name, which one is
 * the matrix is a guess (NumPy's reader takes the last, libzip's lookup
 * the first), so the archive is refused rather than read either way. */
static int members_unique(zip_t *za, spmv_error *err)
{
    static const char *const read[] = {"format.npy", "shape.npy", "data.npy", "indices.npy", "indptr.npy",
                                       "row.npy", "col.npy", "coords.npy"};
    int seen[sizeof read / sizeof read[0]] = {0};
    zip_int64_t n = zip_get_num_entries(za, 0);
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, 0);
        for (size_t k = 0; name && k < sizeof read / sizeof read[0]; k++)
            if (strcmp(name, read[k]) == 0 && seen[k]++)
                return npz_fail(err, SPMV_ERR_PARSE, read[k], "is in the archive twice: which one is the matrix "
                                "would be a guess");
    }
    return SPMV_OK;
}

static int open_file(const char *path, zip_t **za, spmv_error *err)
{
    int zerr = 0;
    *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    if (!*za)
        return open_failed(zerr, "the file", err);
    int st = members_unique(*za, err);
    if (st) {
        zip_discard(*za);
        *za = NULL;
    }
    return st;
}

static int open_buffer(const void *data, size_t len, zip_t **za, spmv_error *err)
{
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(data, len, 0, &ze);
    if (!src) {
        zip_error_fini(&ze);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "npz: out of memory");
    }
    *za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (!*za) {
        int code = zip_error_code_zip(&ze);
        zip_source_free(src);
        zip_error_fini(&ze);
        return open_failed(code, "the body", err);
    }
    zip_error_fini(&ze);
    int st = members_unique(*za, err); /* zip_discard frees src too */
    if (st) {
        zip_discard(*za);
        *za = NULL;
    }
    return st;
}

/* One archive, opened from the file `path` (from_file) or from the
 * buffer data/len, read into the COO coo or, where csr is given, into the
 * CSR csr; the archive is closed again either way. */
static int read_npz(bool from_file, const char *path, const void *data, size_t len, const spmv_mm_options *opts,
                    spmv_coo *coo, spmv_csr *csr, spmv_npz_info *info, spmv_error *err)
{
    zip_t *za;
    if (csr)
        memset(csr, 0, sizeof *csr);
    else
        memset(coo, 0, sizeof *coo);
    int st = from_file ? open_file(path, &za, err) : open_buffer(data, len, &za, err);
    if (st)
        return st;
    st = csr ? read_archive_csr(za, opts, csr, info, err) : read_archive(za, opts, coo, info, err);
    zip_discard(za);
    return st;
}

int spmv_npz_read_file(const char *path, const spmv_mm_options *opts, spmv_coo *out, spmv_npz_info *info,
                       spmv_error *err)
{
    return read_npz(true, path, NULL, 0, opts, out, NULL, info, err);
}

int spmv_npz_read_buffer(const void *data, size_t len, const spmv_mm_options *opts, spmv_coo *out,
                         spmv_npz_info *info, spmv_error *err)
{
    return read_npz(false, NULL, data, len, opts, out, NULL, info, err);
}

int spmv_npz_read_file_csr(const char *path, const spmv_mm_options *opts, spmv_csr *out, spmv_npz_info *info,
                           spmv_error *err)
{
    return read_npz(true, path, NULL, 0, opts, NULL, out, info, err);
}

int spmv_npz_read_buffer_csr(const void *data, size_t len, const spmv_mm_options *opts, spmv_csr *out,
                             spmv_npz_info *info, spmv_error *err)
{
    return read_npz(false, NULL, data, len, opts, NULL, out, info, err);
}

/* ------------------------------------------------------------- writer */

/* One .npy member (version 1.0, little-endian) from n elements of `descr`
 * in `data`, added to za under `name`: its header (kept in *keep until
 * zip_close, for the caller to free) and the data as two fragments, the
 * data read where it is, never copied. */
static int add_npy(zip_t *za, const char *name, const char *descr, const char *shape, const void *data, size_t bytes,
                   bool compress, void **keep, spmv_error *err)
{
    char dict[128];
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    size_t hlen = ((size_t)dl + 1 + 10 + 63) / 64 * 64 - 10; /* header padded so data starts 64-aligned */
    unsigned char *buf = malloc(10 + hlen);
    if (!buf)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory writing %s", name);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memset(buf + 10, ' ', hlen);
    memcpy(buf + 10, dict, (size_t)dl);
    buf[10 + hlen - 1] = '\n';
    *keep = buf;
    zip_buffer_fragment_t frag[2] = {{buf, 10 + hlen}, {(zip_uint8_t *)(uintptr_t)data, bytes}};
    zip_source_t *src = zip_source_buffer_fragment(za, frag, bytes ? 2 : 1, 0);
    zip_int64_t idx = src ? zip_file_add(za, name, src, ZIP_FL_OVERWRITE) : -1;
    if (idx < 0) {
        if (src)
            zip_source_free(src);
        return spmv_error_set(err, SPMV_ERR_IO, 0, "npz: cannot add %s (%s)", name, zip_strerror(za));
    }
    zip_set_file_compression(za, (zip_uint64_t)idx, compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
    return SPMV_OK;
}

/* save_npz's CSR layout from the arrays as they are: row offsets of 32 or
 * 64 bits (ptr64), int32 columns, values in dtype. */
static int write_csr(const char *path, int64_t rows, int64_t cols, int64_t nnz, const void *ptr, bool ptr64,
                     const int32_t *col, const void *val, spmv_dtype dtype, bool compress, spmv_error *err)
{
    int zerr = 0, st = SPMV_OK;
    void *keep[5] = {NULL, NULL, NULL, NULL, NULL};
    char n1[40], nn[40];
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    if (!za)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "npz: cannot create %s (libzip error %d)", path, zerr);
    int64_t shp[2] = {rows, cols};
    snprintf(n1, sizeof n1, "(%lld,)", (long long)rows + 1);
    snprintf(nn, sizeof nn, "(%lld,)", (long long)nnz);
    if ((st = add_npy(za, "format.npy", "|S3", "()", "csr", 3, compress, &keep[0], err)) ||
        (st = add_npy(za, "shape.npy", "<i8", "(2,)", shp, sizeof shp, compress, &keep[1], err)) ||
        (st = add_npy(za, "indptr.npy", ptr64 ? "<i8" : "<i4", n1, ptr, ((size_t)rows + 1) * (ptr64 ? 8 : 4), compress,
                      &keep[2], err)) ||
        (st = add_npy(za, "indices.npy", "<i4", nn, col, (size_t)nnz * 4, compress, &keep[3], err)) ||
        (st = add_npy(za, "data.npy", dtype == SPMV_FLOAT32 ? "<f4" : "<f8", nn, val,
                      (size_t)nnz * spmv_dtype_size(dtype), compress, &keep[4], err)))
        goto done;
    if (zip_close(za) != 0) {
        st = spmv_error_set(err, SPMV_ERR_IO, 0, "npz: cannot write %s (%s)", path, zip_strerror(za));
        zip_discard(za);
    }
    za = NULL;
done:
    if (za)
        zip_discard(za);
    for (int i = 0; i < 5; i++)
        free(keep[i]);
    return st;
}

int spmv_npz_write_file(const char *path, const spmv_coo *m, bool compress, spmv_error *err)
{
    int32_t *ptr = calloc((size_t)m->rows + 1, sizeof *ptr);
    if (!ptr)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory writing %s", path);
    for (int64_t k = 0; k < m->nnz; k++) /* the COO is sorted by row: CSR is its row counts */
        ptr[m->row[k] + 1]++;
    for (int32_t i = 0; i < m->rows; i++)
        ptr[i + 1] += ptr[i];
    int st = write_csr(path, m->rows, m->cols, m->nnz, ptr, false, m->col, m->val, m->dtype, compress, err);
    free(ptr);
    return st;
}

int spmv_npz_write_csr_file(const char *path, const spmv_csr *m, bool compress, spmv_error *err)
{
    bool wide = spmv_csr_wide(m);
    return write_csr(path, m->rows, m->cols, m->nnz, wide ? (const void *)m->row_ptr64 : (const void *)m->row_ptr, wide,
                     m->col, m->val, m->dtype, compress, err);
}
