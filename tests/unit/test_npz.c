/* test_npz.c — the .npz reader (engine/npz.c) and writer.
 *
 * Round trips: random matrices of every testutil shape, drawn afresh (the
 * seed is printed), written by spmv_npz_write_file (members deflated and
 * stored) and read back by file and by buffer must give the identical COO.
 * Archives written here member by member with libzip cover what the writer
 * never makes: CSC and COO layouts (row/col, and n-d coords), int64 and uint16 indices, float32,
 * int and bool values, unicode format strings, .npy version 2, unsorted
 * entries and duplicates (summed, as the Matrix Market reader sums them).
 * Bad archives (not a zip, truncated, a member missing, an index outside
 * the shape, indptr not monotone or not ending at nnz, lengths that
 * disagree, a member shorter than its header says, big-endian, complex,
 * 3-d, an unknown sparse format, shapes over the limits), their members
 * deflated and stored, must fail with the status and a message naming the
 * member, the entry or the limit.
 * The CSR reader (spmv_npz_read_*_csr) must give exactly the CSR that
 * spmv_coo_to_csr makes of the COO reader's matrix, for every testutil
 * shape and both compressions, reading a CSR archive straight into the CSR
 * (info.direct) and falling back to the COO for CSC, COO and for a CSR
 * archive with an unsorted row or a duplicate; on every bad archive it
 * must fail with the same status and message as the COO reader.
 * SciPy's own files are checked end to end in tests/e2e/npz.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zip.h>

#include "spmv.h"
#include "testutil.h"

static char dir[64];

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

/* ------------------------------------------------- archives by hand */

typedef struct member {
    const char *name, *descr, *shape;
    const void *data;
    size_t bytes;
    int version;        /* .npy version (1 or 2) */
} member;

static void *blobs[16];
static int nblobs;
static bool stored_members; /* write_archive's members stored rather than deflated */

static void add_member(zip_t *za, const member *m)
{
    char dict[160];
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }\n", m->descr,
                      m->shape);
    size_t pre = m->version == 2 ? 12 : 10, total = pre + (size_t)dl + m->bytes;
    unsigned char *b = malloc(total);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)(m->version == 2 ? 2 : 1);
    b[7] = 0;
    b[8] = (unsigned char)dl;
    b[9] = 0;
    if (m->version == 2)
        b[10] = b[11] = 0;
    memcpy(b + pre, dict, (size_t)dl);
    if (m->bytes)
        memcpy(b + pre + dl, m->data, m->bytes);
    blobs[nblobs++] = b;
    zip_source_t *src = zip_source_buffer(za, b, total, 0);
    assert_non_null(src);
    zip_int64_t idx = zip_file_add(za, m->name, src, ZIP_FL_OVERWRITE);
    assert_true(idx >= 0);
    assert_int_equal(zip_set_file_compression(za, (zip_uint64_t)idx, stored_members ? ZIP_CM_STORE : ZIP_CM_DEFLATE, 0),
                     0);
}

/* Writes an archive of the given members to dir/name; returns its path. */
static const char *write_archive(const char *name, const member *ms, size_t n)
{
    static char path[128];
    int zerr = 0;
    path_of(path, sizeof path, name);
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    assert_non_null(za);
    nblobs = 0;
    for (size_t i = 0; i < n; i++)
        add_member(za, &ms[i]);
    assert_int_equal(zip_close(za), 0);
    for (int i = 0; i < nblobs; i++)
        free(blobs[i]);
    return path;
}

/* A 3 x 5 matrix in CSR: [[1,0,2,0,0],[0,0,0,0,0],[0,3,0,0,4]]. */
static const int64_t shape35[2] = {3, 5};
static const int32_t csr_ptr[4] = {0, 2, 2, 4}, csr_ind[4] = {0, 2, 1, 4};
static const double csr_val[4] = {1, 2, 3, 4};

#define M_FORMAT(s) {"format.npy", "|S3", "()", s, 3, 1}
#define M_SHAPE {"shape.npy", "<i8", "(2,)", shape35, sizeof shape35, 1}

static void expect_small(const spmv_coo *c)
{
    static const int32_t r[4] = {0, 0, 2, 2}, col[4] = {0, 2, 1, 4};
    assert_int_equal(c->rows, 3);
    assert_int_equal(c->cols, 5);
    assert_int_equal(c->nnz, 4);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(c->row[k], r[k]);
        assert_int_equal(c->col[k], col[k]);
        assert_true(((double *)c->val)[k] == csr_val[k]);
    }
}

static int read_path(const char *path, const spmv_mm_options *o, spmv_coo *c, spmv_npz_info *info, spmv_error *err)
{
    int st = spmv_npz_read_file(path, o, c, info, err);
    if (st)
        print_message("# %s: %s (%s)\n", path, err->message, spmv_strerror(st));
    return st;
}

/* One bad archive: expected status and a fragment of the message. */
static void expect_bad(const char *label, const member *ms, size_t n, const spmv_mm_options *o, int status,
                       const char *fragment)
{
    spmv_coo c;
    spmv_error err = {0};
    const char *path = write_archive("bad.npz", ms, n);
    int st = spmv_npz_read_file(path, o, &c, NULL, &err);
    print_message("# %s: %s\n", label, err.message);
    if (st != status || !strstr(err.message, fragment))
        fail_msg("%s: status %s, message \"%s\"; expected %s naming \"%s\"", label, spmv_strerror(st), err.message,
                 spmv_strerror(status), fragment);
    assert_null(c.row);
    /* the CSR reader: the same status and the same message */
    spmv_csr csr;
    spmv_error err2 = {0};
    int st2 = spmv_npz_read_file_csr(path, o, &csr, NULL, &err2);
    if (st2 != st || strcmp(err2.message, err.message) != 0)
        fail_msg("%s, CSR reader: status %s, message \"%s\"; the COO reader's: %s, \"%s\"", label,
                 spmv_strerror(st2), err2.message, spmv_strerror(st), err.message);
    assert_null(csr.row_ptr);
}

/* The CSR the COO reader's matrix makes, and the CSR reader's, from a file. */
static void read_both(const char *path, spmv_csr *via_coo, spmv_csr *direct, spmv_npz_info *info)
{
    spmv_coo c;
    spmv_error err;
    assert_int_equal(read_path(path, NULL, &c, NULL, &err), SPMV_OK);
    assert_int_equal(spmv_coo_to_csr(&c, SPMV_FLOAT64, via_coo, &err), SPMV_OK);
    spmv_coo_free(&c);
    int st = spmv_npz_read_file_csr(path, NULL, direct, info, &err);
    if (st)
        fail_msg("%s: %s (%s)", path, err.message, spmv_strerror(st));
}

/* Bit for bit: shape, row pointers, columns and values. */
static void expect_csr_identical(const spmv_csr *a, const spmv_csr *b)
{
    assert_int_equal(a->rows, b->rows);
    assert_int_equal(a->cols, b->cols);
    assert_int_equal(a->nnz, b->nnz);
    assert_int_equal(a->dtype, SPMV_FLOAT64);
    assert_int_equal(b->dtype, SPMV_FLOAT64);
    assert_memory_equal(a->row_ptr, b->row_ptr, ((size_t)a->rows + 1) * sizeof(int32_t));
    if (a->nnz) {
        assert_memory_equal(a->col, b->col, (size_t)a->nnz * sizeof(int32_t));
        assert_memory_equal(a->val, b->val, (size_t)a->nnz * sizeof(double));
    }
}

/* The whole file at path, in a fresh buffer (the test frees it). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* ----------------------------------------------------------- tests */

static void test_round_trip(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 0x4e5a);
    char path[128];
    path_of(path, sizeof path, "rt.npz");
    for (int s = 0; s < TU_SHAPE_COUNT; s++)
        for (int compress = 0; compress < 2; compress++) {
            spmv_coo a, b, c;
            spmv_error err;
            spmv_npz_info info;
            tu_random_coo(&r, (tu_shape)s, 200 + (int32_t)tu_rng_range(&r, 0, 300), SPMV_FLOAT64, &a);
            assert_int_equal(spmv_npz_write_file(path, &a, compress, &err), SPMV_OK);
            assert_int_equal(read_path(path, NULL, &b, &info, &err), SPMV_OK);
            assert_true(tu_coo_equal(&a, &b));
            assert_string_equal(info.layout, "csr");
            assert_int_equal(info.entries, a.nnz);
            assert_int_equal(info.duplicates, 0);
            /* the same bytes from memory */
            size_t len;
            char *buf = slurp(path, &len);
            assert_true(spmv_npz_magic(buf, len));
            assert_int_equal(spmv_npz_read_buffer(buf, len, NULL, &c, NULL, &err), SPMV_OK);
            assert_true(tu_coo_equal(&a, &c));
            free(buf);
            spmv_coo_free(&a);
            spmv_coo_free(&b);
            spmv_coo_free(&c);
        }
}

/* Every testutil shape, deflated and stored: the direct CSR read is the
 * COO reader's CSR, by file and by buffer. */
static void test_csr_direct(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 0xc5a);
    char path[128];
    path_of(path, sizeof path, "direct.npz");
    for (int s = 0; s < TU_SHAPE_COUNT; s++)
        for (int compress = 0; compress < 2; compress++) {
            spmv_coo a;
            spmv_csr want, got, from_buf;
            spmv_error err;
            spmv_npz_info info;
            tu_random_coo(&r, (tu_shape)s, 200 + (int32_t)tu_rng_range(&r, 0, 300), SPMV_FLOAT64, &a);
            assert_int_equal(spmv_npz_write_file(path, &a, compress, &err), SPMV_OK);
            read_both(path, &want, &got, &info);
            print_message("# %s, %s: %lld entries, direct %d\n", tu_shape_name((tu_shape)s),
                          compress ? "deflated" : "stored", (long long)a.nnz, info.direct);
            expect_csr_identical(&want, &got);
            assert_true(info.direct);
            assert_string_equal(info.layout, "csr");
            assert_int_equal(info.entries, a.nnz);
            assert_int_equal(info.duplicates, 0);
            size_t len;
            char *buf = slurp(path, &len);
            assert_int_equal(spmv_npz_read_buffer_csr(buf, len, NULL, &from_buf, NULL, &err), SPMV_OK);
            expect_csr_identical(&want, &from_buf);
            /* the same archive with 64-bit row offsets asked for (what an
             * archive past INT32_MAX entries gets): the same entries, wide */
            spmv_mm_options o64 = {.offsets64 = true};
            spmv_csr wide;
            assert_int_equal(spmv_npz_read_buffer_csr(buf, len, &o64, &wide, NULL, &err), SPMV_OK);
            assert_true(spmv_csr_wide(&wide) && !wide.row_ptr);
            assert_int_equal(wide.nnz, want.nnz);
            for (int32_t i = 0; i <= want.rows; i++)
                assert_int_equal(wide.row_ptr64[i], want.row_ptr[i]);
            if (want.nnz) {
                assert_memory_equal(wide.col, want.col, (size_t)want.nnz * sizeof(int32_t));
                assert_memory_equal(wide.val, want.val, (size_t)want.nnz * sizeof(double));
            }
            spmv_csr_free(&wide);
            free(buf);
            spmv_coo_free(&a);
            spmv_csr_free(&want);
            spmv_csr_free(&got);
            spmv_csr_free(&from_buf);
        }
}

/* Past one chunk (65536 elements): a large matrix read directly, and an
 * index outside the shape in a later chunk named by its entry, as the COO
 * reader names it. */
static void test_csr_direct_chunks(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 0xc4c);
    char path[128];
    path_of(path, sizeof path, "large.npz");
    spmv_coo a;
    spmv_csr want, got;
    spmv_error err;
    spmv_npz_info info;
    tu_random_coo(&r, TU_SHAPE_RANDOM, 30000, SPMV_FLOAT64, &a);
    assert_true(a.nnz > 3 * 65536);
    assert_int_equal(spmv_npz_write_file(path, &a, false, &err), SPMV_OK);
    read_both(path, &want, &got, &info);
    expect_csr_identical(&want, &got);
    assert_true(info.direct);
    /* the same arrays with one column index out of range in the third chunk */
    int64_t bad = 2 * 65536 + 7;
    int32_t keep = want.col[bad];
    want.col[bad] = want.cols;
    char ip[32], nn[32];
    snprintf(ip, sizeof ip, "(%d,)", want.rows + 1);
    snprintf(nn, sizeof nn, "(%lld,)", (long long)want.nnz);
    const int64_t shp[2] = {want.rows, want.cols};
    member ms[] = {M_FORMAT("csr"), {"shape.npy", "<i8", "(2,)", shp, sizeof shp, 1},
                   {"indptr.npy", "<i4", ip, want.row_ptr, ((size_t)want.rows + 1) * 4, 1},
                   {"indices.npy", "<i4", nn, want.col, (size_t)want.nnz * 4, 1},
                   {"data.npy", "<f8", nn, want.val, (size_t)want.nnz * 8, 1}};
    char fragment[128];
    snprintf(fragment, sizeof fragment, "indices.npy: entry %lld is %d, outside 0..%d (cols)", (long long)bad,
             want.cols, want.cols - 1);
    expect_bad("index outside, third chunk", ms, 5, NULL, SPMV_ERR_PARSE, fragment);
    want.col[bad] = keep;
    spmv_coo_free(&a);
    spmv_csr_free(&want);
    spmv_csr_free(&got);
}

/* What is read straight into the CSR and what goes through the COO: a CSR
 * archive in other dtypes (int64 indices, float32 values) directly; CSC,
 * COO, and a CSR archive with an unsorted row or a duplicate through the
 * COO, each giving the COO reader's CSR. */
static void csr_fallback(void)
{
    spmv_csr want, got;
    spmv_npz_info info;
    /* the 3 x 5 matrix with int64 indices and pointers, float32 values */
    const int64_t ptr64[4] = {0, 2, 2, 4}, ind64[4] = {0, 2, 1, 4};
    const float val32[4] = {1, 2, 3, 4};
    member wide[] = {M_FORMAT("csr"), M_SHAPE, {"indptr.npy", "<i8", "(4,)", ptr64, sizeof ptr64, 1},
                     {"indices.npy", "<i8", "(4,)", ind64, sizeof ind64, 1},
                     {"data.npy", "<f4", "(4,)", val32, sizeof val32, 1}};
    read_both(write_archive("wide.npz", wide, 5), &want, &got, &info);
    expect_csr_identical(&want, &got);
    assert_true(info.direct);
    assert_true(((double *)got.val)[3] == 4.0);
    spmv_csr_free(&want);
    spmv_csr_free(&got);
    /* row 2 unsorted: columns 4, 1 */
    const int32_t unsorted[4] = {0, 2, 4, 1};
    const double uval[4] = {1, 2, 4, 3};
    member un[] = {M_FORMAT("csr"), M_SHAPE, {"indptr.npy", "<i4", "(4,)", csr_ptr, sizeof csr_ptr, 1},
                   {"indices.npy", "<i4", "(4,)", unsorted, sizeof unsorted, 1},
                   {"data.npy", "<f8", "(4,)", uval, sizeof uval, 1}};
    read_both(write_archive("unsorted.npz", un, 5), &want, &got, &info);
    expect_csr_identical(&want, &got);
    assert_false(info.direct);
    assert_int_equal(got.col[2], 1);
    assert_true(((double *)got.val)[2] == 3.0);
    spmv_csr_free(&want);
    spmv_csr_free(&got);
    /* row 0 holds column 2 twice: summed */
    const int32_t dptr[4] = {0, 3, 3, 5}, dind[5] = {0, 2, 2, 1, 4};
    const double dval[5] = {1, 0.5, 1.5, 3, 4};
    member dup[] = {M_FORMAT("csr"), M_SHAPE, {"indptr.npy", "<i4", "(4,)", dptr, sizeof dptr, 1},
                    {"indices.npy", "<i4", "(5,)", dind, sizeof dind, 1},
                    {"data.npy", "<f8", "(5,)", dval, sizeof dval, 1}};
    read_both(write_archive("dup.npz", dup, 5), &want, &got, &info);
    expect_csr_identical(&want, &got);
    assert_false(info.direct);
    assert_int_equal(info.duplicates, 1);
    assert_int_equal(got.nnz, 4);
    assert_true(((double *)got.val)[1] == 2.0);
    spmv_csr_free(&want);
    spmv_csr_free(&got);
    /* CSC and COO layouts */
    const int32_t csc_ptr[6] = {0, 1, 2, 3, 3, 4}, csc_ind[4] = {0, 2, 0, 2};
    const double csc_val[4] = {1, 3, 2, 4};
    member csc[] = {M_FORMAT("csc"), M_SHAPE, {"indptr.npy", "<i4", "(6,)", csc_ptr, sizeof csc_ptr, 1},
                    {"indices.npy", "<i4", "(4,)", csc_ind, sizeof csc_ind, 1},
                    {"data.npy", "<f8", "(4,)", csc_val, sizeof csc_val, 1}};
    read_both(write_archive("csc32.npz", csc, 5), &want, &got, &info);
    expect_csr_identical(&want, &got);
    assert_false(info.direct);
    assert_string_equal(info.layout, "csc");
    spmv_csr_free(&want);
    spmv_csr_free(&got);
    const int32_t rr[4] = {2, 0, 2, 0}, cc[4] = {4, 2, 1, 0};
    const double vv[4] = {4, 2, 3, 1};
    member coo[] = {M_FORMAT("coo"), M_SHAPE, {"row.npy", "<i4", "(4,)", rr, sizeof rr, 1},
                    {"col.npy", "<i4", "(4,)", cc, sizeof cc, 1}, {"data.npy", "<f8", "(4,)", vv, sizeof vv, 1}};
    read_both(write_archive("coo32.npz", coo, 5), &want, &got, &info);
    expect_csr_identical(&want, &got);
    assert_false(info.direct);
    assert_string_equal(info.layout, "coo");
    spmv_csr_free(&want);
    spmv_csr_free(&got);
}

static void test_csr_fallback(void **state)
{
    (void)state;
    for (int stored = 0; stored < 2; stored++) {
        stored_members = stored;
        csr_fallback();
    }
    stored_members = false;
}

static void test_layouts_and_dtypes(void **state)
{
    (void)state;
    spmv_coo c;
    spmv_error err;
    spmv_npz_info info;
    /* CSC of the same matrix, int64 indices, float32 values, .npy v2, unicode format */
    const int64_t csc_ptr[6] = {0, 1, 2, 3, 3, 4}, csc_ind[4] = {0, 2, 0, 2};
    const float csc_val[4] = {1, 3, 2, 4};
    const uint32_t ucsc[3] = {'c', 's', 'c'};
    member csc[] = {{"format.npy", "<U3", "()", ucsc, sizeof ucsc, 2},
                    M_SHAPE,
                    {"indptr.npy", "<i8", "(6,)", csc_ptr, sizeof csc_ptr, 2},
                    {"indices.npy", "<i8", "(4,)", csc_ind, sizeof csc_ind, 1},
                    {"data.npy", "<f4", "(4,)", csc_val, sizeof csc_val, 1}};
    assert_int_equal(read_path(write_archive("csc.npz", csc, 5), NULL, &c, &info, &err), SPMV_OK);
    assert_string_equal(info.layout, "csc");
    expect_small(&c);
    spmv_coo_free(&c);
    /* COO, unsorted, with a duplicate split in two, uint16 indices, int values */
    const uint16_t rr[5] = {2, 0, 2, 0, 0}, cc[5] = {4, 2, 1, 0, 2};
    const int32_t vv[5] = {4, 1, 3, 1, 1};
    member coo[] = {M_FORMAT("coo"), M_SHAPE, {"row.npy", "<u2", "(5,)", rr, sizeof rr, 1},
                    {"col.npy", "<u2", "(5,)", cc, sizeof cc, 1}, {"data.npy", "<i4", "(5,)", vv, sizeof vv, 1},
                    {"_is_array.npy", "|b1", "()", "\1", 1, 1}};
    assert_int_equal(read_path(write_archive("coo.npz", coo, 6), NULL, &c, &info, &err), SPMV_OK);
    assert_string_equal(info.layout, "coo");
    assert_int_equal(info.duplicates, 1);
    expect_small(&c);
    spmv_coo_free(&c);
    /* COO as SciPy's n-d arrays write it: coords, 2 x nnz (rows, then columns) */
    const int64_t coords[10] = {2, 0, 2, 0, 0, 4, 2, 1, 0, 2};
    member nd[] = {M_FORMAT("coo"), M_SHAPE, {"coords.npy", "<i8", "(2, 5)", coords, sizeof coords, 1},
                   {"data.npy", "<i4", "(5,)", vv, sizeof vv, 1}};
    assert_int_equal(read_path(write_archive("coords.npz", nd, 4), NULL, &c, &info, &err), SPMV_OK);
    assert_int_equal(info.duplicates, 1);
    expect_small(&c);
    spmv_coo_free(&c);
    const int64_t bad_coords[10] = {2, 0, 2, 0, 0, 4, 2, 1, 0, 5};
    member ndbad[] = {M_FORMAT("coo"), M_SHAPE, {"coords.npy", "<i8", "(2, 5)", bad_coords, sizeof bad_coords, 1},
                      {"data.npy", "<i4", "(5,)", vv, sizeof vv, 1}};
    assert_int_equal(spmv_npz_read_file(write_archive("coords-bad.npz", ndbad, 4), NULL, &c, NULL, &err),
                     SPMV_ERR_PARSE);
    assert_non_null(strstr(err.message, "coords.npy: entry 4 is 5, outside 0..4 (cols)"));
    /* bool values (a pattern) */
    const unsigned char bv[4] = {1, 1, 1, 1};
    member pat[] = {M_FORMAT("csr"), M_SHAPE, {"indptr.npy", "<i4", "(4,)", csr_ptr, sizeof csr_ptr, 1},
                    {"indices.npy", "<i4", "(4,)", csr_ind, sizeof csr_ind, 1},
                    {"data.npy", "|b1", "(4,)", bv, sizeof bv, 1}};
    assert_int_equal(read_path(write_archive("pat.npz", pat, 5), NULL, &c, NULL, &err), SPMV_OK);
    assert_int_equal(c.nnz, 4);
    assert_true(((double *)c.val)[3] == 1.0);
    spmv_coo_free(&c);
}

/* Every bad archive, its members deflated, then stored (read through a
 * window on the archive: engine/npz.c, open_window). */
static void bad_archives(void)
{
    const int32_t bad_ind[4] = {0, 2, 7, 4}, bad_ptr[4] = {0, 3, 2, 4}, short_ptr[4] = {0, 2, 2, 3};
    const double big_endian[4] = {1, 2, 3, 4};
    const int64_t big[2] = {11, 5}, neg[2] = {-1, 5};
#define PTR(p) {"indptr.npy", "<i4", "(4,)", p, sizeof csr_ptr, 1}
#define IND(p) {"indices.npy", "<i4", "(4,)", p, sizeof csr_ind, 1}
#define DATA {"data.npy", "<f8", "(4,)", csr_val, sizeof csr_val, 1}
    member missing[] = {M_FORMAT("csr"), M_SHAPE, IND(csr_ind), DATA};
    expect_bad("indptr missing", missing, 4, NULL, SPMV_ERR_PARSE, "indptr.npy: missing");
    member out[] = {M_FORMAT("csr"), M_SHAPE, PTR(csr_ptr), IND(bad_ind), DATA};
    expect_bad("index outside", out, 5, NULL, SPMV_ERR_PARSE, "indices.npy: entry 2 is 7, outside 0..4 (cols)");
    member mono[] = {M_FORMAT("csr"), M_SHAPE, PTR(bad_ptr), IND(csr_ind), DATA};
    expect_bad("indptr decreasing", mono, 5, NULL, SPMV_ERR_PARSE, "indptr.npy: entry 2 is 2");
    member end[] = {M_FORMAT("csr"), M_SHAPE, PTR(short_ptr), IND(csr_ind), DATA};
    expect_bad("indptr short of nnz", end, 5, NULL, SPMV_ERR_PARSE, "ends at 3, not at nnz 4");
    member len[] = {M_FORMAT("csr"), M_SHAPE, PTR(csr_ptr), {"indices.npy", "<i4", "(3,)", csr_ind, 12, 1}, DATA};
    expect_bad("lengths disagree", len, 5, NULL, SPMV_ERR_PARSE, "holds 3 indices; the matrix needs 4");
    member trunc[] = {M_FORMAT("csr"), M_SHAPE, PTR(csr_ptr), IND(csr_ind),
                      {"data.npy", "<f8", "(4,)", csr_val, 24, 1}};
    expect_bad("member shorter than declared", trunc, 5, NULL, SPMV_ERR_PARSE, "declares 4 elements of 8 bytes");
    member be[] = {M_FORMAT("csr"), M_SHAPE, PTR(csr_ptr), IND(csr_ind),
                   {"data.npy", ">f8", "(4,)", big_endian, sizeof big_endian, 1}};
    expect_bad("big-endian", be, 5, NULL, SPMV_ERR_UNSUPPORTED, "big-endian");
    member cplx[] = {M_FORMAT("csr"), M_SHAPE, PTR(csr_ptr), IND(csr_ind),
                     {"data.npy", "<c16", "(2,)", csr_val, sizeof csr_val, 1}};
    expect_bad("complex", cplx, 5, NULL, SPMV_ERR_UNSUPPORTED, "data.npy");
    member nd[] = {M_FORMAT("csr"), M_SHAPE, PTR(csr_ptr), IND(csr_ind),
                   {"data.npy", "<f8", "(1, 2, 2)", csr_val, sizeof csr_val, 1}};
    expect_bad("3-d", nd, 5, NULL, SPMV_ERR_UNSUPPORTED, "more than 2 dimensions");
    member str[] = {M_FORMAT("csr"), M_SHAPE, PTR(csr_ptr), IND(csr_ind),
                    {"data.npy", "|S8", "(4,)", csr_val, sizeof csr_val, 1}};
    expect_bad("string values", str, 5, NULL, SPMV_ERR_UNSUPPORTED, "data.npy: values must be numbers");
    member bsr[] = {M_FORMAT("bsr"), M_SHAPE, PTR(csr_ptr), IND(csr_ind), DATA};
    expect_bad("bsr", bsr, 5, NULL, SPMV_ERR_UNSUPPORTED, "sparse format \"bsr\"");
    member over[] = {M_FORMAT("csr"), {"shape.npy", "<i8", "(2,)", big, sizeof big, 1}, PTR(csr_ptr), IND(csr_ind),
                     DATA};
    spmv_mm_options lim = {.max_rows = 10, .max_cols = 10, .max_nnz = 3};
    expect_bad("rows over the limit", over, 5, &lim, SPMV_ERR_LIMIT,
               "11 x 5 is over the limit of 10 rows and 10 columns (max_rows)");
    lim.max_rows = 100;
    member ok[] = {M_FORMAT("csr"), M_SHAPE, PTR(csr_ptr), IND(csr_ind), DATA};
    expect_bad("nnz over the limit", ok, 5, &lim, SPMV_ERR_LIMIT, "4 entries are over the limit of 3");
    member negs[] = {M_FORMAT("csr"), {"shape.npy", "<i8", "(2,)", neg, sizeof neg, 1}, PTR(csr_ptr), IND(csr_ind),
                     DATA};
    expect_bad("negative shape", negs, 5, NULL, SPMV_ERR_PARSE, "negative");

    /* not a zip; a zip cut in half */
    spmv_coo c;
    spmv_error err;
    assert_false(spmv_npz_magic("%%MatrixMarket", 14));
    assert_int_equal(spmv_npz_read_buffer("%%MatrixMarket matrix", 21, NULL, &c, NULL, &err), SPMV_ERR_PARSE);
    assert_non_null(strstr(err.message, "not a readable zip archive"));
    const char *p = write_archive("whole.npz", ok, 5);
    FILE *f = fopen(p, "rb");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_int_equal(spmv_npz_read_buffer(buf, n, NULL, &c, NULL, &err), SPMV_OK);
    spmv_coo_free(&c);
    for (size_t cut = 4; cut < n; cut += n / 7 + 1) {
        int st = spmv_npz_read_buffer(buf, cut, NULL, &c, NULL, &err);
        assert_int_equal(st, SPMV_ERR_PARSE);
        spmv_csr csr;
        assert_int_equal(spmv_npz_read_buffer_csr(buf, cut, NULL, &csr, NULL, &err), SPMV_ERR_PARSE);
        assert_null(csr.row_ptr);
    }
}

static void test_bad_archives(void **state)
{
    (void)state;
    for (int stored = 0; stored < 2; stored++) {
        print_message("# members %s\n", stored ? "stored" : "deflated");
        stored_members = stored;
        bad_archives();
    }
    stored_members = false;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_npz.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_csr_direct),
        cmocka_unit_test(test_csr_direct_chunks),
        cmocka_unit_test(test_csr_fallback),
        cmocka_unit_test(test_layouts_and_dtypes),
        cmocka_unit_test(test_bad_archives),
    };
    return cmocka_run_group_tests_name("npz", tests, setup, teardown);
}
