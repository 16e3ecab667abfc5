/* test_mmio.c — the Matrix Market reader against its specification.
 *
 * What docs/matrix-market.md promises, checked: every file of
 * ../shared/matrices/real/ loads with expected.json's shape and nnz (and
 * its values reproduce the peer's y = A*x); every conformance file is
 * accepted or refused as the matrices README and the decision table say,
 * refusals naming the line; streaming in random chunk sizes (down to one
 * byte), gzip (compressed here with zlib), and the parallel block reader
 * all give bit-identical results and identical errors to a whole serial
 * read; the number parser agrees with strtod bit for bit on random and
 * tricky inputs; expansion, duplicate summing and array layout are checked
 * entry by entry on small hand-written files; the writer round-trips; and
 * every input the fuzzer once crashed on (tests/fuzz/regressions/fuzz_mmio/) now
 * ends in a clean success or a clean error. Random inputs use the run's
 * seed (printed; SPMV_SEED repeats it).
 */
#include <dirent.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "mmio_internal.h"
#include "spmv.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

typedef struct buf {
    char *data;
    size_t len, cap;
} buf;

static void buf_add(buf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof tmp);
    buf_add(b, tmp, (size_t)n);
}

static bool load_file(const char *path, buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char tmp[65536];
    size_t n;
    memset(b, 0, sizeof *b);
    buf_add(b, "", 0);
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        buf_add(b, tmp, n);
    fclose(f);
    return true;
}

static const spmv_mm_options SERIAL = {.threads = 1};
static const spmv_mm_options TWO_THREADS = {.threads = 2};

static int read_text(const char *text, const spmv_mm_options *o, spmv_coo *m, spmv_mm_info *info,
                     spmv_error *err)
{
    return spmv_mm_read_buffer(text, strlen(text), o, m, info, err);
}

static int read_text_len(const char *text, size_t len, const spmv_mm_options *o, spmv_coo *m, spmv_error *err)
{
    return spmv_mm_read_buffer(text, len, o, m, NULL, err);
}

/* Feeds data in chunks: sizes drawn from [1, max_chunk], with runs of
 * one-byte chunks; then finishes. */
static int read_chunked(const void *data, size_t len, const spmv_mm_options *o, size_t block, tu_rng *rng,
                        size_t max_chunk, spmv_coo *m, spmv_mm_info *info, spmv_error *err)
{
    spmv_mm_reader *r;
    int st = spmv_mm_reader_new(o, &r, err);
    if (st)
        return st;
    if (block)
        assert_int_equal(spmv_mm_reader_set_block_size(r, block), SPMV_OK);
    const char *p = data;
    size_t off = 0;
    while (off < len && !st) {
        size_t n = tu_rng_range(rng, 0, 3) == 0 ? 1 : (size_t)tu_rng_range(rng, 1, (int64_t)max_chunk);
        if (n > len - off)
            n = len - off;
        st = spmv_mm_reader_feed(r, p + off, n, err);
        off += n;
    }
    if (!st)
        st = spmv_mm_reader_finish(r, m, info, err);
    spmv_mm_reader_free(r);
    return st;
}

/* A refusal must say where: err.line >= 1 and the message begins with
 * "line <err.line>: ". */
static void assert_names_line(const char *what, const spmv_error *err)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "line %lld: ", (long long)err->line);
    if (err->line < 1 || strncmp(err->message, prefix, strlen(prefix)) != 0)
        fail_msg("%s: error does not name its line (line %lld): %s", what, (long long)err->line, err->message);
}

static void assert_sorted_unique(const spmv_coo *m)
{
    for (int64_t k = 0; k < m->nnz; k++) {
        assert_true(m->row[k] >= 0 && m->row[k] < m->rows);
        assert_true(m->col[k] >= 0 && m->col[k] < m->cols);
        if (k > 0)
            assert_true(m->row[k - 1] < m->row[k] || (m->row[k - 1] == m->row[k] && m->col[k - 1] < m->col[k]));
    }
}

static double coo_value(const spmv_coo *m, int64_t k) { return ((const double *)m->val)[k]; }

/* Entries expected in a small matrix, in sorted order. */
typedef struct ent {
    int32_t i, j;
    double v;
} ent;

static void assert_entries(const char *what, const spmv_coo *m, const ent *want, int64_t n)
{
    if (m->nnz != n)
        fail_msg("%s: nnz %lld, expected %lld", what, (long long)m->nnz, (long long)n);
    for (int64_t k = 0; k < n; k++)
        if (m->row[k] != want[k].i || m->col[k] != want[k].j || coo_value(m, k) != want[k].v ||
            signbit(coo_value(m, k)) != signbit(want[k].v))
            fail_msg("%s: entry %lld is (%d, %d, %.17g), expected (%d, %d, %.17g)", what, (long long)k, m->row[k],
                     m->col[k], coo_value(m, k), want[k].i, want[k].j, want[k].v);
}

/* Reads text that must load, checking shape and entries. */
static void expect_matrix(const char *what, const char *text, int32_t rows, int32_t cols, const ent *want,
                          int64_t n, int64_t duplicates)
{
    spmv_coo m;
    spmv_mm_info info;
    spmv_error err;
    if (read_text(text, &SERIAL, &m, &info, &err) != SPMV_OK)
        fail_msg("%s: refused: %s", what, err.message);
    assert_int_equal(m.rows, rows);
    assert_int_equal(m.cols, cols);
    assert_int_equal(m.dtype, SPMV_FLOAT64);
    assert_entries(what, &m, want, n);
    assert_int_equal(info.duplicates, duplicates);
    spmv_coo_free(&m);
}

/* Reads text that must be refused with status at line, message holding
 * `needle`. */
static void expect_error(const char *what, const char *text, int status, int64_t line, const char *needle)
{
    spmv_coo m;
    spmv_error err;
    int st = read_text(text, &SERIAL, &m, NULL, &err);
    if (st == SPMV_OK) {
        spmv_coo_free(&m);
        fail_msg("%s: accepted, expected status %d at line %lld", what, status, (long long)line);
    }
    if (st != status || err.status != status || err.line != line || !strstr(err.message, needle))
        fail_msg("%s: got status %d line %lld \"%s\", expected status %d line %lld with \"%s\"", what, st,
                 (long long)err.line, err.message, status, (long long)line, needle);
    assert_names_line(what, &err);
}

/* ------------------------------------------------------------ real/ */

/* y = A*x straight from the COO, for comparing with expected.json. */
static void coo_times_x(const spmv_coo *m, double *y)
{
    double *x = malloc(((size_t)m->cols + 1) * sizeof *x);
    assert_non_null(x);
    tu_expected_x(SPMV_FLOAT64, m->cols, x);
    for (int32_t i = 0; i < m->rows; i++)
        y[i] = 0.0;
    for (int64_t k = 0; k < m->nnz; k++)
        y[m->row[k]] += coo_value(m, k) * x[m->col[k]];
    free(x);
}

static void test_real_files(void **state)
{
    (void)state;
    tu_expected *e;
    size_t n;
    assert_int_equal(tu_expected_load(&e, &n), 0);
    assert_true(n >= 19);
    for (size_t f = 0; f < n; f++) {
        char rel[200], path[512];
        spmv_coo m;
        spmv_mm_info info;
        spmv_error err;
        snprintf(rel, sizeof rel, "real/%s", e[f].file);
        tu_matrices_path(path, sizeof path, rel);
        if (spmv_mm_read_file(path, &SERIAL, &m, &info, &err) != SPMV_OK)
            fail_msg("%s: %s", e[f].file, err.message);
        if (m.rows != e[f].rows || m.cols != e[f].cols || m.nnz != e[f].nnz)
            fail_msg("%s: %d x %d nnz %lld, expected.json says %lld x %lld nnz %lld", e[f].file, m.rows, m.cols,
                     (long long)m.nnz, (long long)e[f].rows, (long long)e[f].cols, (long long)e[f].nnz);
        assert_sorted_unique(&m);
        assert_false(info.gzip);
        double *y = malloc(((size_t)m.rows + 1) * sizeof *y);
        assert_non_null(y);
        coo_times_x(&m, y);
        TU_ASSERT_CLOSE(e[f].file, SPMV_FLOAT64, y, SPMV_FLOAT64, e[f].y, m.rows, TU_NORM_INF, 1e-12);
        free(y);
        spmv_coo_free(&m);
    }
    tu_expected_free(e, n);
}

/* ------------------------------------------------------- conformance/ */

typedef struct verdict {
    const char *file;      /* path under conformance/ */
    int status;            /* SPMV_OK: must load */
    int64_t line;          /* the line a refusal names */
    const char *needle;    /* in the message */
} verdict;

/* Files with a precise expectation. The rest follow the folder's rule. */
static const verdict verdicts[] = {
    {"invalid/invalid_bad_banner.mtx", SPMV_ERR_PARSE, 1, "bad banner"},
    {"invalid/invalid_bad_banner_2.mtx", SPMV_ERR_PARSE, 1, "bad banner"},
    {"invalid/invalid_bad_field.mtx", SPMV_ERR_PARSE, 1, "unknown field"},
    {"invalid/invalid_bad_format.mtx", SPMV_ERR_PARSE, 1, "unknown format"},
    {"invalid/invalid_bad_object.mtx", SPMV_ERR_PARSE, 1, "unknown object"},
    {"invalid/invalid_bad_symmetry.mtx", SPMV_ERR_PARSE, 1, "unknown symmetry"},
    {"invalid/invalid_bad_value.mtx", SPMV_ERR_PARSE, 3, "malformed value 'not_a_double'"},
    {"invalid/invalid_dimensions_out_of_range_1.mtx", SPMV_ERR_PARSE, 3, "rows must not be negative"},
    {"invalid/invalid_dimensions_out_of_range_2.mtx", SPMV_ERR_PARSE, 3, "columns must not be negative"},
    {"invalid/invalid_dimensions_out_of_range_3.mtx", SPMV_ERR_PARSE, 3, "entries must not be negative"},
    {"invalid/invalid_indices_out_of_range_1.mtx", SPMV_ERR_PARSE, 5, "row index 5000 is out of range: expected 1 to 7"},
    {"invalid/invalid_indices_out_of_range_2.mtx", SPMV_ERR_PARSE, 6, "column index 2000 is out of range"},
    {"invalid/invalid_indices_out_of_range_3.mtx", SPMV_ERR_PARSE, 5, "row index 0 is out of range"},
    {"invalid/invalid_indices_out_of_range_4.mtx", SPMV_ERR_PARSE, 6, "column index 0 is out of range"},
    {"invalid/invalid_indices_out_of_range_5.mtx", SPMV_ERR_PARSE, 5, "row index -1 is out of range"},
    {"invalid/invalid_indices_out_of_range_6.mtx", SPMV_ERR_PARSE, 6, "column index -2 is out of range"},
    {"invalid/invalid_matrix_coord_too_long.mtx", SPMV_ERR_PARSE, 7, "more entries than the 3 declared on line 3"},
    {"invalid/invalid_truncated_header_1.mtx", SPMV_ERR_PARSE, 3, "missing size line"},
    {"invalid/invalid_truncated_header_2.mtx", SPMV_ERR_PARSE, 1, "ends before the symmetry"},
    {"invalid/invalid_truncated_line_1.mtx", SPMV_ERR_PARSE, 5, "expected 3 fields (row column value), found 2"},
    {"invalid/invalid_truncated_line_2.mtx", SPMV_ERR_PARSE, 5, "expected 3 fields (row column value), found 1"},
    {"invalid/invalid_truncated_lines.mtx", SPMV_ERR_PARSE, 4, "too few entries: the input ended after 2 of the 12"},
    {"overflow/overflow_dim_gt_int64.mtx", SPMV_ERR_LIMIT, 2, "overflows int64"},
    {"overflow/overflow_index_gt_int64.mtx", SPMV_ERR_PARSE, 6, "row index 19223372036854775808 is out of range"},
    {"overflow/overflow_value_gt_complex128.mtx", SPMV_ERR_UNSUPPORTED, 1, "complex values are not supported"},
    {"overflow/overflow_value_gt_float128.mtx", SPMV_ERR_PARSE, 4, "1E9999 overflows float64"},
    {"overflow/overflow_value_gt_float64.mtx", SPMV_ERR_PARSE, 4, "1E310 overflows float64"},
    {"overflow/overflow_value_gt_int64.mtx", SPMV_ERR_PARSE, 6, "19223372036854775808 overflows int64"},
    /* Valid for spmvd (32-bit indices, int64 integers): documented exceptions. */
    {"overflow/overflow_index_gt_int8.mtx", SPMV_OK, 0, NULL},
    {"overflow/overflow_value_gt_int32.mtx", SPMV_OK, 0, NULL},
    /* 1E310 does not fit float64: refused like overflow/'s twin. */
    {"long_double/longdouble_array.mtx", SPMV_ERR_PARSE, 4, "1E310 overflows float64"},
    {"long_double/longdouble_coordinate.mtx", SPMV_ERR_PARSE, 4, "1E310 overflows float64"},
    {"scipy_crashes/dim_over_32_bit.mtx", SPMV_ERR_LIMIT, 3, "over the limit of 2147483647"},
    /* The permissive decisions (docs/matrix-market.md). */
    {"permissive/permissive_banner_leading_spaces_eye3.mtx", SPMV_OK, 0, NULL},
    {"permissive/permissive_banner_one_percent_eye3.mtx", SPMV_ERR_PARSE, 1, "one percent sign"},
    {"permissive/permissive_lines_indented.mtx", SPMV_OK, 0, NULL},
    {"permissive/windows_lineendings_nist_ex1_more_freeformat.mtx", SPMV_OK, 0, NULL},
};

static const verdict *find_verdict(const char *rel)
{
    for (size_t k = 0; k < sizeof verdicts / sizeof verdicts[0]; k++)
        if (strcmp(verdicts[k].file, rel) == 0)
            return &verdicts[k];
    return NULL;
}

/* The banner's object and field, for the folder rules. */
static void banner_words(const char *path, bool *vector, bool *complex)
{
    char line[256] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    for (char *c = line; *c; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    *vector = strstr(line, " vector") != NULL;
    *complex = strstr(line, " complex") != NULL;
}

static void check_conformance_file(const char *dir, const char *name, int *checked)
{
    char rel[300], path[600], what[400];
    snprintf(rel, sizeof rel, "%s%s%s", dir, *dir ? "/" : "", name);
    snprintf(what, sizeof what, "conformance/%s", rel);
    tu_matrices_path(path, sizeof path, what);

    const verdict *v = find_verdict(rel);
    verdict rule = {rel, SPMV_OK, 0, NULL};
    bool vector, complex;
    banner_words(path, &vector, &complex);
    if (!v) {
        if (strcmp(dir, "invalid") == 0 || strcmp(dir, "overflow") == 0)
            rule = (verdict){rel, -1, -1, ""};            /* refused, any status, naming a line */
        else if (vector)
            rule = (verdict){rel, SPMV_ERR_UNSUPPORTED, 1, "vector objects are not supported: spmvd stores matrices"};
        else if (complex)
            rule = (verdict){rel, SPMV_ERR_UNSUPPORTED, 1, "complex values are not supported"};
        v = &rule;
    }

    spmv_coo m;
    spmv_mm_info info;
    spmv_error err;
    int st = spmv_mm_read_file(path, &SERIAL, &m, &info, &err);
    if (v->status == SPMV_OK) {
        if (st != SPMV_OK)
            fail_msg("%s: refused (%s), expected to load", what, err.message);
        assert_sorted_unique(&m);
        assert_true(info.symmetry != SPMV_MM_GENERAL || m.nnz <= info.entries);
        spmv_coo_free(&m);
    } else {
        if (st == SPMV_OK) {
            spmv_coo_free(&m);
            fail_msg("%s: accepted, expected a refusal", what);
        }
        assert_names_line(what, &err);
        if ((v->status != -1 && st != v->status) || (v->line != -1 && err.line != v->line) ||
            !strstr(err.message, v->needle))
            fail_msg("%s: got status %d \"%s\", expected status %d line %lld with \"%s\"", what, st, err.message,
                     v->status, (long long)v->line, v->needle);
    }
    (*checked)++;
}

static void check_conformance_dir(const char *dir, int *checked)
{
    char path[600];
    char rel[300];
    snprintf(rel, sizeof rel, "conformance/%s", dir);
    tu_matrices_path(path, sizeof path, rel);
    DIR *d = opendir(path);
    if (!d)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len > 4 && strcmp(de->d_name + len - 4, ".mtx") == 0)
            check_conformance_file(dir, de->d_name, checked);
    }
    closedir(d);
}

static void test_conformance(void **state)
{
    (void)state;
    static const char *const dirs[] = {"", "symmetry", "symmetry_array", "graphblas", "long_double", "misc",
                                       "permissive", "invalid", "overflow", "scipy_crashes"};
    int checked = 0;
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++)
        check_conformance_dir(dirs[k], &checked);
    printf("# %d conformance files checked\n", checked);
    assert_true(checked >= 100);
}

/* The two overflow/ files spmvd accepts, with their values. */
static void test_overflow_exceptions(void **state)
{
    (void)state;
    char path[600];
    spmv_coo m;
    spmv_error err;
    tu_matrices_path(path, sizeof path, "conformance/overflow/overflow_value_gt_int32.mtx");
    assert_int_equal(spmv_mm_read_file(path, &SERIAL, &m, NULL, &err), SPMV_OK);
    static const ent big[] = {{1, 1, 8589934592.0}};
    assert_entries("overflow_value_gt_int32", &m, big, 1);
    spmv_coo_free(&m);
    tu_matrices_path(path, sizeof path, "conformance/overflow/overflow_index_gt_int8.mtx");
    assert_int_equal(spmv_mm_read_file(path, &SERIAL, &m, NULL, &err), SPMV_OK);
    static const ent row300[] = {{299, 0, 1.0}};
    assert_entries("overflow_index_gt_int8", &m, row300, 1);
    spmv_coo_free(&m);
}

/* ------------------------------------------------------- streaming */

static void test_stream_chunks(void **state)
{
    (void)state;
    tu_expected *e;
    size_t n;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0x5eed1);
    assert_int_equal(tu_expected_load(&e, &n), 0);
    for (size_t f = 0; f < n; f++) {
        char rel[200], path[512];
        buf text;
        spmv_coo whole, parts;
        spmv_mm_info iw, ip;
        spmv_error err;
        snprintf(rel, sizeof rel, "real/%s", e[f].file);
        tu_matrices_path(path, sizeof path, rel);
        assert_true(load_file(path, &text));
        assert_int_equal(spmv_mm_read_buffer(text.data, text.len, &SERIAL, &whole, &iw, &err), SPMV_OK);
        /* Small files byte by byte; all in random chunks up to 64 KiB. */
        size_t maxes[2] = {text.len < 100000 ? 1 : 7, 65536};
        for (int k = 0; k < 2; k++) {
            if (read_chunked(text.data, text.len, &SERIAL, 0, &rng, maxes[k], &parts, &ip, &err) != SPMV_OK)
                fail_msg("%s in chunks of at most %zu: %s", e[f].file, maxes[k], err.message);
            if (!tu_coo_equal(&whole, &parts))
                fail_msg("%s: chunked read differs from the whole read", e[f].file);
            assert_int_equal(iw.lines, ip.lines);
            assert_int_equal(iw.duplicates, ip.duplicates);
            spmv_coo_free(&parts);
        }
        spmv_coo_free(&whole);
        free(text.data);
    }
    tu_expected_free(e, n);
}

static void gzip_compress(const buf *in, buf *out, int level)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    memset(out, 0, sizeof *out);
    out->cap = deflateBound(&zs, in->len) + 16;
    out->data = malloc(out->cap);
    assert_non_null(out->data);
    zs.next_in = (Bytef *)in->data;
    zs.avail_in = (uInt)in->len;
    zs.next_out = (Bytef *)out->data;
    zs.avail_out = (uInt)out->cap;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    out->len = zs.total_out;
    deflateEnd(&zs);
}

static void test_gzip(void **state)
{
    (void)state;
    static const char *const files[] = {"bcsstk13.mtx", "lp_afiro.mtx", "pushpull.mtx", "karate.mtx"};
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0x9219);
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char rel[200], path[512];
        buf text, gz;
        spmv_coo plain, m;
        spmv_mm_info info;
        spmv_error err;
        snprintf(rel, sizeof rel, "real/%s", files[f]);
        tu_matrices_path(path, sizeof path, rel);
        assert_true(load_file(path, &text));
        assert_int_equal(spmv_mm_read_buffer(text.data, text.len, &SERIAL, &plain, NULL, &err), SPMV_OK);
        gzip_compress(&text, &gz, 6);
        assert_true(gz.len > 2 && (unsigned char)gz.data[0] == 0x1f && (unsigned char)gz.data[1] == 0x8b);

        /* Whole, in chunks (1-byte ones split the magic), and with threads. */
        assert_int_equal(spmv_mm_read_buffer(gz.data, gz.len, &SERIAL, &m, &info, &err), SPMV_OK);
        assert_true(info.gzip);
        assert_true(tu_coo_equal(&plain, &m));
        spmv_coo_free(&m);
        assert_int_equal(read_chunked(gz.data, gz.len, &SERIAL, 0, &rng, 4096, &m, &info, &err), SPMV_OK);
        assert_true(info.gzip && tu_coo_equal(&plain, &m));
        spmv_coo_free(&m);
        assert_int_equal(read_chunked(gz.data, gz.len, &TWO_THREADS, 65536, &rng, 50000, &m, &info, &err),
                         SPMV_OK);
        assert_true(tu_coo_equal(&plain, &m));
        spmv_coo_free(&m);

        /* Truncated anywhere: an error that says so (or, cut inside the
         * text's first lines, any clean refusal), never a matrix. */
        for (int cut = 0; cut < 8; cut++) {
            size_t len = (size_t)tu_rng_range(&rng, 1, (int64_t)gz.len - 1);
            if (cut == 0)
                len = gz.len - 1;   /* only the trailer's last byte missing */
            int st = read_chunked(gz.data, len, &SERIAL, 0, &rng, 8192, &m, &info, &err);
            if (st == SPMV_OK) {
                spmv_coo_free(&m);
                fail_msg("%s: gzip cut at %zu of %zu bytes was accepted", files[f], len, gz.len);
            }
            assert_names_line("truncated gzip", &err);
            if (len > 64 && !strstr(err.message, "gzip"))
                fail_msg("%s: gzip cut at %zu: message does not mention gzip: %s", files[f], len, err.message);
        }

        /* Two members in a row are one stream (as gunzip reads them);
         * trailing garbage is not. */
        buf two = {0};
        buf_add(&two, gz.data, gz.len);
        buf empty_gz, nothing = {0};
        buf_add(&nothing, "", 0);
        gzip_compress(&nothing, &empty_gz, 1);
        buf_add(&two, empty_gz.data, empty_gz.len);
        assert_int_equal(spmv_mm_read_buffer(two.data, two.len, &SERIAL, &m, &info, &err), SPMV_OK);
        assert_true(tu_coo_equal(&plain, &m));
        spmv_coo_free(&m);
        buf_add(&two, "garbage", 7);
        assert_int_equal(spmv_mm_read_buffer(two.data, two.len, &SERIAL, &m, &info, &err), SPMV_ERR_PARSE);
        assert_non_null(strstr(err.message, "gzip"));

        /* A flipped byte in the deflate data: corrupt, refused. */
        gz.data[gz.len / 2] ^= 0x55;
        if (spmv_mm_read_buffer(gz.data, gz.len, &SERIAL, &m, &info, &err) == SPMV_OK)
            spmv_coo_free(&m);   /* a flip can survive inflate only if the CRC check misses it: never */
        else
            assert_names_line("corrupt gzip", &err);

        free(two.data);
        free(empty_gz.data);
        free(nothing.data);
        free(gz.data);
        free(text.data);
        spmv_coo_free(&plain);
    }
}

/* A random coordinate file with everything the data section may hold:
 * comments and blank lines, tabs and runs of blanks, CRLF, values in many
 * spellings, duplicates. */
static void random_text(tu_rng *rng, buf *b, int32_t rows, int32_t cols, int64_t entries, const char *field,
                        const char *symmetry)
{
    bool pattern = strcmp(field, "pattern") == 0, integer = strcmp(field, "integer") == 0;
    bool sym = strcmp(symmetry, "general") != 0;
    memset(b, 0, sizeof *b);
    buf_printf(b, "%%%%MatrixMarket matrix coordinate %s %s\n%% random\n\n%d %d %lld\n", field, symmetry, rows,
               cols, (long long)entries);
    for (int64_t k = 0; k < entries; k++) {
        int64_t i = tu_rng_range(rng, 1, rows), j = tu_rng_range(rng, 1, cols);
        if (sym && j > i) {
            int64_t t = i;
            i = j;
            j = t;
        }
        if (tu_rng_range(rng, 0, 50) == 0)
            buf_printf(b, tu_rng_range(rng, 0, 1) ? "%% a comment inside the data\n" : "\n");
        const char *sep = tu_rng_range(rng, 0, 9) == 0 ? " \t " : " ";
        buf_printf(b, "%lld%s%lld", (long long)i, sep, (long long)j);
        if (!pattern) {
            double v = tu_rng_value(rng);
            switch (integer ? 5 : tu_rng_range(rng, 0, 4)) {
            case 0: buf_printf(b, " %.17g", v); break;
            case 1: buf_printf(b, " %.6e", v * 1e10); break;
            case 2: buf_printf(b, " %.3f", v * 100); break;
            case 3: buf_printf(b, " %.17g", v * 1e-300); break;
            case 4: buf_printf(b, " %.17G", v * 1e200); break;
            default: buf_printf(b, " %lld", (long long)tu_rng_range(rng, -1000000, 1000000)); break;
            }
        }
        bool crlf = tu_rng_range(rng, 0, 7) == 0;
        buf_add(b, crlf ? "\r\n" : "\n", crlf ? 2 : 1);
    }
}

static void test_threads_match_serial(void **state)
{
    (void)state;
    static const char *const kinds[][2] = {
        {"real", "general"}, {"integer", "symmetric"}, {"pattern", "skew-symmetric"}, {"real", "hermitian"},
    };
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0x7472);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        buf text;
        spmv_coo serial, par;
        spmv_mm_info is, ip;
        spmv_error err;
        int32_t n = (int32_t)tu_rng_range(&rng, 1000, 20000);
        random_text(&rng, &text, n, n, 70000, kinds[k][0], kinds[k][1]);   /* over 2^16: the parallel build */
        if (spmv_mm_read_buffer(text.data, text.len, &SERIAL, &serial, &is, &err) != SPMV_OK)
            fail_msg("%s %s: %s", kinds[k][0], kinds[k][1], err.message);
        assert_sorted_unique(&serial);
        /* Blocks of 96 KiB: the ~2 MB text spans many of them. */
        if (read_chunked(text.data, text.len, &TWO_THREADS, 96 << 10, &rng, 300000, &par, &ip, &err) != SPMV_OK)
            fail_msg("%s %s, 2 threads: %s", kinds[k][0], kinds[k][1], err.message);
        assert_true(tu_coo_equal(&serial, &par));
        assert_int_equal(is.lines, ip.lines);
        assert_int_equal(is.duplicates, ip.duplicates);
        spmv_coo_free(&par);

        /* The same error, at the same line, from both: a bad value at a
         * random line, then one entry too many. */
        char *bad = strdup(text.data);
        assert_non_null(bad);
        size_t at = (size_t)tu_rng_range(&rng, (int64_t)text.len / 3, (int64_t)text.len / 2);
        while (bad[at] != '\n')
            at++;
        bad[at + 1] = 'x';   /* the next line starts with a letter */
        spmv_error es, ep;
        spmv_coo m;
        int s1 = spmv_mm_read_buffer(bad, text.len, &SERIAL, &m, NULL, &es);
        int s2 = read_chunked(bad, text.len, &TWO_THREADS, 96 << 10, &rng, 300000, &m, NULL, &ep);
        assert_int_equal(s1, SPMV_ERR_PARSE);
        assert_int_equal(s2, s1);
        assert_int_equal(es.line, ep.line);
        assert_string_equal(es.message, ep.message);
        free(bad);

        buf more = {0};
        buf_add(&more, text.data, text.len);
        buf_add(&more, "1 1 1\n", 6);
        s1 = spmv_mm_read_buffer(more.data, more.len, &SERIAL, &m, NULL, &es);
        s2 = read_chunked(more.data, more.len, &TWO_THREADS, 96 << 10, &rng, 300000, &m, NULL, &ep);
        assert_int_equal(s1, SPMV_ERR_PARSE);
        assert_int_equal(s2, s1);
        assert_int_equal(es.line, ep.line);
        assert_int_equal(es.line, is.lines + 1);
        assert_non_null(strstr(es.message, "more entries than"));
        assert_string_equal(es.message, ep.message);
        free(more.data);

        spmv_coo_free(&serial);
        free(text.data);
    }
}

/* spmv_mm_read_file with threads reads straight into its blocks: a file
 * over one 16 MiB block, checked against the serial read. */
static void test_read_file_threads(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0xf11e);
    buf text;
    random_text(&rng, &text, 200000, 150000, 700000, "real", "general");
    assert_true(text.len > (size_t)17 << 20);
    char path[] = "/tmp/spmv-test-mmio-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_true(write(fd, text.data, text.len) == (ssize_t)text.len);
    close(fd);
    spmv_coo serial, par;
    spmv_mm_info is, ip;
    spmv_error err;
    if (spmv_mm_read_file(path, &SERIAL, &serial, &is, &err) != SPMV_OK)
        fail_msg("serial: %s", err.message);
    if (spmv_mm_read_file(path, &TWO_THREADS, &par, &ip, &err) != SPMV_OK)
        fail_msg("2 threads: %s", err.message);
    assert_true(tu_coo_equal(&serial, &par));
    assert_int_equal(is.lines, ip.lines);
    assert_int_equal(is.duplicates, ip.duplicates);
    spmv_coo_free(&serial);
    spmv_coo_free(&par);
    unlink(path);
    free(text.data);
}

/* An upload's entry arrays grow block by block through the streaming
 * reader, as the daemon feeds it: with the daemon's explicit limits and
 * two threads, an input of several 16 MiB blocks must read the same as
 * serially. (Regression: the huge-page advice split a mapping whose size
 * was not a whole number of pages, and the next mremap failed with
 * EFAULT, "out of memory after 1064392 entries".) */
static void test_stream_growth(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0x6e0);
    buf text;
    random_text(&rng, &text, 300000, 300000, 1500000, "real", "general");
    assert_true(text.len > (size_t)40 << 20);
    const spmv_mm_options daemon_like = {.max_rows = INT32_MAX, .max_cols = INT32_MAX, .max_nnz = INT32_MAX, .threads = 2};
    spmv_coo serial, par;
    spmv_error err;
    if (read_text_len(text.data, text.len, &SERIAL, &serial, &err) != SPMV_OK)
        fail_msg("serial: %s", err.message);
    if (read_chunked(text.data, text.len, &daemon_like, 0, &rng, 65536, &par, NULL, &err) != SPMV_OK)
        fail_msg("streamed, 2 threads: %s", err.message);
    assert_true(tu_coo_equal(&serial, &par));
    spmv_coo_free(&par);
    const spmv_mm_options daemon_serial = {.max_rows = INT32_MAX, .max_cols = INT32_MAX, .max_nnz = INT32_MAX, .threads = 1};
    if (read_chunked(text.data, text.len, &daemon_serial, 0, &rng, 65536, &par, NULL, &err) != SPMV_OK)
        fail_msg("streamed, 1 thread: %s", err.message);
    assert_true(tu_coo_equal(&serial, &par));
    spmv_coo_free(&serial);
    spmv_coo_free(&par);
    free(text.data);
}

/* ------------------------------------------------------ number parser */

static locale_t c_locale(void)
{
    locale_t loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    assert_non_null(loc);
    return loc;
}

/* One token against strtod: same bits, or both overflowing. */
static void check_real(const char *s, locale_t loc)
{
    double mine = 0, ref;
    mm_num_result res;
    const char *end = spmv_mm_parse_real(s, s + strlen(s), &mine, &res, loc);
    char *rend;
    errno = 0;
    ref = strtod_l(s, &rend, loc);
    bool overflow = errno == ERANGE && isinf(ref);
    if (overflow) {
        if (res != MM_NUM_OVERFLOW)
            fail_msg("'%s': strtod overflows, parser says %d (%.17g)", s, res, mine);
        return;
    }
    if (res != MM_NUM_OK || *end != '\0' || *rend != '\0')
        fail_msg("'%s': parser result %d, stopped at '%s' (strtod stopped at '%s')", s, res, end, rend);
    if (memcmp(&mine, &ref, sizeof mine) != 0 && !(isnan(mine) && isnan(ref)))
        fail_msg("'%s': parser %.17g (%a), strtod %.17g (%a)", s, mine, mine, ref, ref);
}

static void test_number_edges(void **state)
{
    (void)state;
    static const char *const edges[] = {
        "0", "-0", "+0", "0.0", "-0.0", "00000", ".5", "5.", "-.5", "+1", "1e0", "1E+0", "1e-0",
        "4.9406564584124654e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "1e-324", "1e-400",
        "2.2250738585072011e-308", "2.2250738585072014e-308", "2.2250738585072012e-308",
        "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "1e308", "1e309",
        "-1e309", "1E310", "1E9999", "1e99999999999999999999", "1e-99999999999999999999",
        "9007199254740992", "9007199254740993", "9007199254740994", "9007199254740995",
        "9007199254740993.0000000000000000001", "18446744073709551615", "18446744073709551616",
        "9999999999999999999", "10000000000000000000", "99999999999999999999999",
        "0.1", "0.2", "0.3", "0.12345678901234567", "-0.51021629239304755", "3.141592653589793238462643383279",
        "2.718281828459045", "1.0000000000000002", "1.00000000000000011102230246251565404236316680908203125",
        "1.00000000000000011102230246251565404236316680908203124",
        "1.00000000000000011102230246251565404236316680908203126",
        "123456789012345678e-27", "123456789012345678e27", "1234567890123456789e-27", "7.2057594037927933e16",
        "0.000000000000000000000000000001", "1e22", "1e23", "1e-22", "1e-23", "8.98846567431158e307",
        "inf", "-inf", "Infinity", "-INFINITY", "nan", "NaN", "-nan",
    };
    locale_t loc = c_locale();
    for (size_t k = 0; k < sizeof edges / sizeof edges[0]; k++)
        check_real(edges[k], loc);

    static const char *const malformed[] = {"", "-", "+", ".", "-.", "e5", "1e", "1e+", "1e-", "x", "--1", "+-1"};
    for (size_t k = 0; k < sizeof malformed / sizeof malformed[0]; k++) {
        double v;
        mm_num_result res;
        const char *s = malformed[k];
        spmv_mm_parse_real(s, s + strlen(s), &v, &res, loc);
        if (res != MM_NUM_MALFORMED)
            fail_msg("'%s' parsed as a number", s);
    }
    /* A token that stops early: the caller sees a non-delimiter. */
    static const char *const stops[] = {"1.2.3", "0x10", "1e5x", "infx", "12abc", "1,5"};
    for (size_t k = 0; k < sizeof stops / sizeof stops[0]; k++) {
        double v;
        mm_num_result res;
        const char *s = stops[k];
        const char *end = spmv_mm_parse_real(s, s + strlen(s), &v, &res, loc);
        assert_true(res != MM_NUM_OK || *end != '\0');
    }
    freelocale(loc);
}

static void test_number_random(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0xf10a7);
    locale_t loc = c_locale();
    char s[128];
    for (int k = 0; k < 300000; k++) {
        uint64_t bits = tu_rng_next(&rng);
        double d;
        memcpy(&d, &bits, sizeof d);
        if (!isfinite(d))
            continue;
        switch (k % 6) {
        case 0: snprintf(s, sizeof s, "%.17g", d); break;                       /* any double, shortest-ish */
        case 1: snprintf(s, sizeof s, "%.*e", (int)tu_rng_range(&rng, 0, 25), d); break;
        case 2: snprintf(s, sizeof s, "%.17g", tu_rng_value(&rng)); break;      /* the benchmark's values */
        case 3: snprintf(s, sizeof s, "%.*f", (int)tu_rng_range(&rng, 0, 20), tu_rng_value(&rng) * 1e6); break;
        case 4: {   /* random digit strings: up to 24 digits, random point and exponent */
            int nd = (int)tu_rng_range(&rng, 1, 24), pt = (int)tu_rng_range(&rng, 0, nd), w = 0;
            if (tu_rng_range(&rng, 0, 1))
                s[w++] = '-';
            for (int i = 0; i < nd; i++) {
                if (i == pt && pt > 0)
                    s[w++] = '.';
                s[w++] = (char)('0' + tu_rng_range(&rng, 0, 9));
            }
            snprintf(s + w, sizeof s - (size_t)w, "e%d", (int)tu_rng_range(&rng, -340, 320));
            break;
        }
        default: {  /* near-midpoints: a double plus half an ulp, printed long */
            double up = nextafter(d, INFINITY);
            long double mid = ((long double)d + (long double)up) / 2;
            snprintf(s, sizeof s, "%.*Le", (int)tu_rng_range(&rng, 16, 22), mid);
            break;
        }
        }
        check_real(s, loc);
    }
    freelocale(loc);
}

static void test_int64_parser(void **state)
{
    (void)state;
    static const struct { const char *s; mm_num_result res; int64_t v; } cases[] = {
        {"0", MM_NUM_OK, 0}, {"-0", MM_NUM_OK, 0}, {"+7", MM_NUM_OK, 7}, {"007", MM_NUM_OK, 7},
        {"9223372036854775807", MM_NUM_OK, INT64_MAX}, {"-9223372036854775808", MM_NUM_OK, INT64_MIN},
        {"9223372036854775808", MM_NUM_OVERFLOW, 0}, {"-9223372036854775809", MM_NUM_OVERFLOW, 0},
        {"19223372036854775808", MM_NUM_OVERFLOW, 0}, {"99999999999999999999999", MM_NUM_OVERFLOW, 0},
        {"", MM_NUM_MALFORMED, 0}, {"-", MM_NUM_MALFORMED, 0}, {"x1", MM_NUM_MALFORMED, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t v = -1;
        mm_num_result res;
        spmv_mm_parse_int64(cases[k].s, &v, &res);
        if (res != cases[k].res || (res == MM_NUM_OK && v != cases[k].v))
            fail_msg("'%s': result %d value %lld", cases[k].s, res, (long long)v);
    }
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0x1264);
    for (int k = 0; k < 100000; k++) {
        char s[40];
        int64_t want = (int64_t)tu_rng_next(&rng) >> tu_rng_range(&rng, 0, 62), v;
        mm_num_result res;
        snprintf(s, sizeof s, "%lld", (long long)want);
        const char *end = spmv_mm_parse_int64(s, &v, &res);
        assert_int_equal(res, MM_NUM_OK);
        assert_true(*end == '\0');
        assert_true(v == want);
    }
}

/* ------------------------------------------------- small hand-written */

#define MM "%%MatrixMarket matrix "
#define N(a) (int64_t)(sizeof(a) / sizeof((a)[0]))

static void test_symmetry_expansion(void **state)
{
    (void)state;
    static const ent sym[] = {{0, 0, 1}, {0, 2, 10}, {1, 2, 20}, {2, 0, 10}, {2, 1, 20}, {2, 2, 30}};
    expect_matrix("symmetric", MM "coordinate real symmetric\n3 3 4\n1 1 1\n3 1 10\n3 2 20\n3 3 30\n", 3, 3, sym,
                  N(sym), 0);
    expect_matrix("hermitian (real)", MM "coordinate real hermitian\n3 3 4\n1 1 1\n3 1 10\n3 2 20\n3 3 30\n", 3, 3,
                  sym, N(sym), 0);
    /* Skew: the mirror negated; a diagonal entry is kept once, as given. */
    static const ent skew[] = {{0, 2, -10}, {1, 2, -20}, {2, 0, 10}, {2, 1, 20}, {2, 2, 30}};
    expect_matrix("skew", MM "coordinate real skew-symmetric\n3 3 3\n3 1 10\n3 2 20\n3 3 30\n", 3, 3, skew, N(skew),
                  0);
    static const ent pat[] = {{0, 1, 1}, {1, 0, 1}, {1, 1, 1}};
    expect_matrix("pattern symmetric", MM "coordinate pattern symmetric\n2 2 2\n2 1\n2 2\n", 2, 2, pat, N(pat), 0);
    /* An upper-triangle entry is mirrored too; meeting its twin, they sum. */
    static const ent upper[] = {{0, 1, 5}, {1, 0, 5}};
    expect_matrix("upper triangle", MM "coordinate real symmetric\n2 2 2\n1 2 2\n2 1 3\n", 2, 2, upper, N(upper), 2);
    static const ent integer[] = {{0, 0, -3}, {0, 1, 9223372036854775807.0}, {1, 0, 9223372036854775807.0}};
    expect_matrix("integer symmetric", MM "coordinate integer symmetric\n2 2 2\n1 1 -3\n2 1 9223372036854775807\n", 2, 2,
                  integer, N(integer), 0);
    expect_error("non-square symmetric", MM "coordinate real symmetric\n2 3 0\n", SPMV_ERR_PARSE, 2, "must be square");
}

static void test_duplicates_and_zeros(void **state)
{
    (void)state;
    /* Duplicates sum in file order; explicit zeros, and sums that cancel
     * to zero, stay; -0.0 keeps its sign. */
    static const ent want[] = {{0, 0, 0.0}, {0, 2, 6}, {1, 1, -0.0}, {2, 0, 0.0}, {2, 2, 1.5}};
    expect_matrix("duplicates",
                  MM "coordinate real general\n3 3 9\n"
                     "1 3 1\n3 3 1.5\n1 3 2\n1 1 0\n2 2 -0.0\n1 3 3\n3 1 1e300\n3 1 -1e300\n3 1 0\n",
                  3, 3, want, N(want), 4);
    /* An unsorted row longer than the insertion-sort cutoff. */
    buf b = {0};
    const char *head = MM "coordinate real general\n1 100 100\n";
    buf_add(&b, head, strlen(head));
    for (int j = 100; j >= 1; j--)
        buf_printf(&b, "1 %d %d\n", j, j);
    ent rev[100];
    for (int j = 0; j < 100; j++)
        rev[j] = (ent){0, j, j + 1};
    expect_matrix("reversed long row", b.data, 1, 100, rev, 100, 0);
    free(b.data);
    /* Far more rows than entries: sorted without a per-row table. */
    static const ent tall[] = {{5, 0, 2}, {2000000000, 1, 1}, {2147483646, 0, 3}};
    expect_matrix("tall", MM "coordinate real general\n2147483647 2 4\n2147483647 1 3\n2000000001 2 1\n6 1 1\n6 1 1\n",
                  2147483647, 2, tall, N(tall), 1);
}

static void test_array_layout(void **state)
{
    (void)state;
    static const ent gen[] = {{0, 0, 1}, {0, 1, 4}, {1, 0, 2}, {1, 1, 5}, {2, 0, 3}, {2, 1, 0}};
    expect_matrix("array general", MM "array real general\n3 2\n1\n2\n3\n4\n5\n0\n", 3, 2, gen, N(gen), 0);
    /* Symmetric: lower triangle by columns, (1,1) (2,1) (3,1) (2,2) (3,2) (3,3). */
    static const ent sym[] = {{0, 0, 1}, {0, 1, 2}, {0, 2, 3}, {1, 0, 2}, {1, 1, 4},
                              {1, 2, 5}, {2, 0, 3}, {2, 1, 5}, {2, 2, 6}};
    expect_matrix("array symmetric", MM "array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n", 3, 3, sym, N(sym), 0);
    /* Skew: strictly lower by columns, (2,1) (3,1) (3,2); no diagonal. */
    static const ent skew[] = {{0, 1, -1}, {0, 2, -2}, {1, 0, 1}, {1, 2, -3}, {2, 0, 2}, {2, 1, 3}};
    expect_matrix("array skew", MM "array integer skew-symmetric\n3 3\n1\n2\n3\n", 3, 3, skew, N(skew), 0);
    expect_error("array too long", MM "array real general\n1 2\n1\n2\n3\n", SPMV_ERR_PARSE, 5, "more values than the 2");
    expect_error("array too short", MM "array real general\n2 2\n1\n2\n3\n", SPMV_ERR_PARSE, 5, "too few entries");
    expect_error("array two per line", MM "array real general\n2 1\n1 2\n", SPMV_ERR_PARSE, 3,
                 "expected 1 field (value), found 2");
    expect_error("array pattern", MM "array pattern general\n2 1\n", SPMV_ERR_PARSE, 1, "needs the 'coordinate'");
    static const ent empty[] = {{0, 0, 0}};
    expect_matrix("array 0 x 5", MM "array real general\n0 5\n", 0, 5, empty, 0, 0);
}

static void test_syntax(void **state)
{
    (void)state;
    static const ent one[] = {{1, 0, 2.5}};
    /* Case, blanks, tabs, CRLF, comments and blank lines everywhere. */
    expect_matrix("case and blanks",
                  "%%matrixmarket MATRIX Coordinate REAL General\r\n% c\r\n\r\n  \t\r\n 2\t 2   1 \r\n"
                  "% inside\r\n\r\n\t2 \t1   2.5\t\r\n\r\n% after\r\n",
                  2, 2, one, 1, 0);
    expect_matrix("double field, no final newline", MM "coordinate double general\n2 2 1\n2 1 25e-1", 2, 2, one, 1, 0);
    expect_matrix("CR line ends", MM "coordinate real general\r% mac\r2 2 1\r2 1 2.5\r", 2, 2, one, 1, 0);
    expect_matrix("byte order mark", "\xEF\xBB\xBF" MM "coordinate real general\n2 2 1\n2 1 2.5\n", 2, 2, one, 1, 0);
    static const ent pat[] = {{0, 1, 1.0}};
    expect_matrix("pattern", MM "coordinate pattern general\n1 2 1\n1 2\n", 1, 2, pat, 1, 0);
    static const ent specials[] = {{0, 0, INFINITY}, {0, 1, -INFINITY}};
    expect_matrix("inf", MM "coordinate real general\n1 2 2\n1 1 inf\n1 2 -Infinity\n", 1, 2, specials, 2, 0);
    expect_matrix("empty matrix", MM "coordinate real general\n0 0 0\n", 0, 0, one, 0, 0);

    expect_error("empty input", "", SPMV_ERR_PARSE, 1, "the input is empty");
    expect_error("blank first line", "\n" MM "coordinate real general\n", SPMV_ERR_PARSE, 1, "expected the banner");
    expect_error("vector", "%%MatrixMarket vector coordinate real general\n", SPMV_ERR_UNSUPPORTED, 1,
                 "spmvd stores matrices");
    expect_error("complex", MM "coordinate complex general\n", SPMV_ERR_UNSUPPORTED, 1, "complex");
    expect_error("extra banner word", MM "coordinate real general x\n", SPMV_ERR_PARSE, 1, "unexpected 'x'");
    expect_error("size line letters", MM "coordinate real general\n% c\n2 two 1\n", SPMV_ERR_PARSE, 3,
                 "bad size line");
    expect_error("size line short", MM "coordinate real general\n2 2\n", SPMV_ERR_PARSE, 2, "found 2 fields");
    expect_error("size line long", MM "coordinate real general\n2 2 1 1\n", SPMV_ERR_PARSE, 2, "found more");
    expect_error("no size line", MM "coordinate real general\n% only comments\n\n", SPMV_ERR_PARSE, 4,
                 "missing size line");
    expect_error("malformed index", MM "coordinate real general\n2 2 1\n1x 1 1\n", SPMV_ERR_PARSE, 3,
                 "malformed row index '1x'");
    expect_error("malformed value", MM "coordinate real general\n2 2 1\n1 1 1.5.2\n", SPMV_ERR_PARSE, 3,
                 "malformed value '1.5.2'");
    expect_error("hex value", MM "coordinate real general\n2 2 1\n1 1 0x10\n", SPMV_ERR_PARSE, 3, "malformed value");
    expect_error("integer field, real value", MM "coordinate integer general\n2 2 1\n1 1 1.5\n", SPMV_ERR_PARSE, 3,
                 "the field is integer");
    expect_error("pattern with value", MM "coordinate pattern general\n2 2 1\n1 1 1\n", SPMV_ERR_PARSE, 3,
                 "expected 2 fields (row column), found 3");
    expect_error("value overflow", MM "coordinate real general\n2 2 2\n1 1 1\n\n2 2 -1e400\n", SPMV_ERR_PARSE, 5,
                 "-1e400 overflows float64");
    expect_error("too few, comments after", MM "coordinate real general\n2 2 2\n1 1 1\n% end\n", SPMV_ERR_PARSE, 4,
                 "after 1 of the 2 entries declared on line 2");
    expect_error("too many", MM "coordinate real general\n2 2 0\n1 1 1\n", SPMV_ERR_PARSE, 3,
                 "more entries than the 0 declared on line 2");
    /* A NUL byte is no blank: the value is malformed (and shown as '?'). */
    static const char nul[] = MM "coordinate real general\n2 2 1\n1 1 1\0\n";
    spmv_coo m;
    spmv_error err;
    assert_int_equal(spmv_mm_read_buffer(nul, sizeof nul - 1, &SERIAL, &m, NULL, &err), SPMV_ERR_PARSE);
    assert_int_equal(err.line, 3);
    assert_non_null(strstr(err.message, "malformed value '1?'"));
}

static void test_limits(void **state)
{
    (void)state;
    spmv_coo m;
    spmv_error err;
    /* Declared counts are checked before anything is allocated. */
    expect_error("nnz over 32 bits", MM "coordinate real general\n10 10 3000000000\n", SPMV_ERR_LIMIT, 2,
                 "3000000000 entries is over the limit of 2147483647");
    expect_error("cols over 32 bits", MM "coordinate real general\n1 2147483648 0\n", SPMV_ERR_LIMIT, 2,
                 "2147483648 columns is over the limit");
    expect_error("array over 32 bits", MM "array real general\n65536 65536\n", SPMV_ERR_LIMIT, 2, "array entries");
    /* The configured limits. */
    spmv_mm_options small = {.max_rows = 10, .max_cols = 20, .max_nnz = 5, .threads = 1};
    const char *big = MM "coordinate real general\n11 2 0\n";
    assert_int_equal(read_text(big, &small, &m, NULL, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "11 rows is over the limit of 10 (max_rows)"));
    assert_int_equal(err.line, 2);
    const char *sym = MM "coordinate real symmetric\n4 4 4\n2 1 1\n3 1 1\n4 1 1\n4 4 1\n";
    assert_int_equal(read_text(sym, &small, &m, NULL, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "7 entries after symmetric expansion are over the limit of 5 (max_nnz)"));
    assert_names_line("expansion limit", &err);
    spmv_mm_options neg = {.max_rows = -1, .threads = 1};
    spmv_mm_reader *r;
    assert_int_equal(spmv_mm_reader_new(&neg, &r, &err), SPMV_ERR_INVALID);
}

/* Lines longer than a parallel block, and a long first line fed byte by
 * byte: read once, in linear time (each once hung the reader). */
static void test_long_lines(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0x1096);
    buf b = {0};
    const char *head = MM "coordinate real general\n3 3 2\n1 1 1\n%";
    buf_add(&b, head, strlen(head));
    for (int k = 0; k < 300000; k++)
        buf_add(&b, "long comment ", 13);
    buf_add(&b, "\n3 3 2\n", 7);
    static const ent want[] = {{0, 0, 1}, {2, 2, 2}};
    for (int threads = 1; threads <= 2; threads++) {
        spmv_mm_options o = {.threads = threads};
        spmv_coo m;
        spmv_error err;
        if (read_chunked(b.data, b.len, &o, 4096, &rng, 100000, &m, NULL, &err) != SPMV_OK)
            fail_msg("%d threads: %s", threads, err.message);
        assert_entries("long comment line", &m, want, 2);
        spmv_coo_free(&m);
    }
    free(b.data);

    /* 1.1 MB without a line end, one byte at a time: refused at 1 MiB. */
    spmv_mm_reader *r;
    spmv_error err;
    int st = SPMV_OK;
    assert_int_equal(spmv_mm_reader_new(NULL, &r, &err), SPMV_OK);
    for (int k = 0; k < 1100000 && !st; k++)
        st = spmv_mm_reader_feed(r, "x", 1, &err);
    assert_int_equal(st, SPMV_ERR_PARSE);
    assert_non_null(strstr(err.message, "first line is longer than 1048576 bytes"));
    assert_int_equal(err.line, 1);
    spmv_mm_reader_free(r);
}

/* After an error every call repeats it; after finish, feeding is refused. */
static void test_reader_lifecycle(void **state)
{
    (void)state;
    spmv_mm_reader *r;
    spmv_error err, again;
    spmv_coo m;
    assert_int_equal(spmv_mm_reader_new(NULL, &r, &err), SPMV_OK);
    const char *bad = MM "coordinate real general\n2 2 1\n3 1 1\n";
    assert_int_equal(spmv_mm_reader_feed(r, bad, strlen(bad), &err), SPMV_ERR_PARSE);
    assert_int_equal(spmv_mm_reader_feed(r, "1 1 1\n", 6, &again), SPMV_ERR_PARSE);
    assert_string_equal(err.message, again.message);
    assert_int_equal(spmv_mm_reader_finish(r, &m, NULL, &again), SPMV_ERR_PARSE);
    assert_int_equal(again.line, 3);
    spmv_mm_reader_free(r);

    const char *good = MM "coordinate real general\n2 2 1\n2 1 1\n";
    assert_int_equal(spmv_mm_reader_new(NULL, &r, &err), SPMV_OK);
    assert_int_equal(spmv_mm_reader_feed(r, good, strlen(good), &err), SPMV_OK);
    assert_int_equal(spmv_mm_reader_finish(r, &m, NULL, &err), SPMV_OK);
    assert_int_equal(spmv_mm_reader_feed(r, "x", 1, &err), SPMV_ERR_INVALID);
    spmv_coo_free(&m);
    spmv_mm_reader_free(r);
    spmv_mm_reader_free(NULL);

    assert_int_equal(spmv_mm_read_file("/nonexistent/m.mtx", NULL, &m, NULL, &err), SPMV_ERR_IO);
    assert_string_equal(spmv_mm_field_name(SPMV_MM_PATTERN), "pattern");
    assert_string_equal(spmv_mm_symmetry_name(SPMV_MM_SKEW_SYMMETRIC), "skew-symmetric");
}

static void test_writer_round_trip(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0x3717);
    char path[] = "/tmp/spmv-test-mmio-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (int shape = 0; shape < TU_SHAPE_COUNT; shape++) {
        for (int dt = 0; dt < 2; dt++) {
            spmv_coo a, b, a64;
            spmv_error err;
            spmv_mm_info info;
            tu_random_coo(&rng, (tu_shape)shape, 300, dt ? SPMV_FLOAT32 : SPMV_FLOAT64, &a);
            if (spmv_mm_write_file(path, &a, &err) != SPMV_OK)
                fail_msg("write: %s", err.message);
            if (spmv_mm_read_file(path, &SERIAL, &b, &info, &err) != SPMV_OK)
                fail_msg("read back %s: %s", tu_shape_name((tu_shape)shape), err.message);
            assert_int_equal(spmv_coo_convert(&a, SPMV_FLOAT64, &a64, &err), SPMV_OK);
            if (!tu_coo_equal(&a64, &b))
                fail_msg("%s %s: round trip differs", tu_shape_name((tu_shape)shape), dt ? "float32" : "float64");
            assert_int_equal(info.duplicates, 0);
            spmv_coo_free(&a);
            spmv_coo_free(&a64);
            spmv_coo_free(&b);
        }
    }
    spmv_coo bad = {.rows = 2, .cols = 2, .nnz = 1};
    int32_t r = 5, c = 0;
    double v = 1;
    bad.row = &r;
    bad.col = &c;
    bad.val = &v;
    spmv_error err;
    assert_int_equal(spmv_mm_write_file(path, &bad, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_mm_write_file("/nonexistent/dir/m.mtx", &bad, &err), SPMV_ERR_INVALID);
    bad.row[0] = 1;
    assert_int_equal(spmv_mm_write_file("/nonexistent/dir/m.mtx", &bad, &err), SPMV_ERR_IO);
    unlink(path);
}

/* ------------------------------------------------- fuzz regressions */

/* Replays one input exactly as tests/fuzz/fuzz_mmio.c reads it: two bytes
 * that cut the rest into three chunks, a byte of options, then the data;
 * the chunked read must agree with a one-piece serial read. */
static void replay_fuzz_input(const char *name, const unsigned char *data, size_t size)
{
    if (size < 3)
        return;
    unsigned char a = data[0], b = data[1], flags = data[2];
    data += 3;
    size -= 3;
    size_t cuts[4] = {0, size ? a % (size + 1) : 0, 0, size};
    cuts[2] = cuts[1] + (size - cuts[1] ? b % (size - cuts[1] + 1) : 0);
    spmv_mm_options o = {.threads = (flags & 1) ? 2 : 1}, serial;
    if (flags & 2)
        o.max_rows = o.max_cols = o.max_nnz = 1 + (flags >> 4);
    serial = o;
    serial.threads = 1;

    spmv_coo whole, parts;
    spmv_error e1, e2;
    spmv_mm_reader *r;
    int s1 = spmv_mm_read_buffer(data, size, &serial, &whole, NULL, &e1);
    int s2 = spmv_mm_reader_new(&o, &r, &e2);
    assert_int_equal(s2, SPMV_OK);
    if (o.threads > 1)
        spmv_mm_reader_set_block_size(r, 4096);
    for (int k = 0; k < 3 && !s2; k++)
        s2 = spmv_mm_reader_feed(r, data + cuts[k], cuts[k + 1] - cuts[k], &e2);
    if (!s2)
        s2 = spmv_mm_reader_finish(r, &parts, NULL, &e2);
    spmv_mm_reader_free(r);
    if (s1 != s2)
        fail_msg("%s: whole read status %d (%s), chunked %d (%s)", name, s1, s1 ? e1.message : "ok", s2,
                 s2 ? e2.message : "ok");
    if (s1 == SPMV_OK) {
        assert_sorted_unique(&whole);
        assert_true(tu_coo_equal(&whole, &parts));
        spmv_coo_free(&whole);
        spmv_coo_free(&parts);
    } else {
        assert_names_line(name, &e1);
        if (e1.line != e2.line || strcmp(e1.message, e2.message) != 0)
            fail_msg("%s: whole read says \"%s\", chunked \"%s\"", name, e1.message, e2.message);
    }
}

static void test_fuzz_regressions(void **state)
{
    (void)state;
    const char *root = getenv("SPMV_ROOT");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/regressions/fuzz_mmio", root && *root ? root : ".");
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open %s: %s", dir, strerror(errno));
    struct dirent *de;
    int count = 0;
    while ((de = readdir(d))) {
        char path[1200];
        buf in;
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || !load_file(path, &in))
            continue;
        replay_fuzz_input(de->d_name, (const unsigned char *)in.data, in.len);
        free(in.data);
        count++;
    }
    closedir(d);
    printf("# %d fuzz regressions replayed\n", count);
    assert_true(count > 0);
}

int main(void)
{
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_files),
        cmocka_unit_test(test_conformance),
        cmocka_unit_test(test_overflow_exceptions),
        cmocka_unit_test(test_stream_chunks),
        cmocka_unit_test(test_gzip),
        cmocka_unit_test(test_threads_match_serial),
        cmocka_unit_test(test_read_file_threads),
        cmocka_unit_test(test_number_edges),
        cmocka_unit_test(test_number_random),
        cmocka_unit_test(test_int64_parser),
        cmocka_unit_test(test_symmetry_expansion),
        cmocka_unit_test(test_duplicates_and_zeros),
        cmocka_unit_test(test_array_layout),
        cmocka_unit_test(test_syntax),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_long_lines),
        cmocka_unit_test(test_stream_growth),
        cmocka_unit_test(test_reader_lifecycle),
        cmocka_unit_test(test_writer_round_trip),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return cmocka_run_group_tests_name("mmio", tests, NULL, NULL);
}
