/* test_store.c — the stored matrix files and the store (daemon/matfile.c,
 * daemon/store.c).
 *
 * Round trips of random CSR matrices in both dtypes, then damage of every
 * kind a disk or a crash can do (truncation, a flipped byte in the payload
 * or the header, a foreign file, a temp file left by a crash): each must be
 * caught, and at reload set aside in damaged/ while the good files load.
 * The staged write (an upload that writes while its GPU loads): a staged
 * file is only a temporary one until committed, a commit puts the newer
 * header in and lists the matrix, a discard or a failure leaves nothing.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "daemon/matfile.h"
#include "daemon/store.h"
#include "testutil.h"

static tu_rng rng;

static char *make_dir(void)
{
    char tmpl[] = "/tmp/spmvd-test-store-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void remove_tree(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void random_csr(spmv_dtype dt, int32_t n, spmv_csr *out)
{
    spmv_coo coo;
    spmv_error err;
    tu_random_coo(&rng, TU_SHAPE_RANDOM, n, SPMV_FLOAT64, &coo);
    assert_int_equal(spmv_coo_to_csr(&coo, dt, out, &err), SPMV_OK);
    spmv_coo_free(&coo);
}

static void meta_for(matfile_meta *m, const char *name)
{
    memset(m, 0, sizeof *m);
    store_new_id(m->id);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->symmetry = SPMV_MM_SYMMETRIC;
    m->formats = SPMV_FMT_CSR | SPMV_FMT_HLL;
    m->hack_size = 16;
    m->device = MATFILE_DEVICE_HOST;
    m->created = 1700000000;
    m->parse_ms = 1.25;
    m->store_ms = 0.5;
}

static void assert_csr_equal(const spmv_csr *a, const spmv_csr *b)
{
    assert_int_equal(a->rows, b->rows);
    assert_int_equal(a->cols, b->cols);
    assert_int_equal(a->nnz, b->nnz);
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(spmv_csr_wide(a), spmv_csr_wide(b));
    if (spmv_csr_wide(a))
        assert_memory_equal(a->row_ptr64, b->row_ptr64, ((size_t)a->rows + 1) * sizeof(int64_t));
    else
        assert_memory_equal(a->row_ptr, b->row_ptr, ((size_t)a->rows + 1) * sizeof(int32_t));
    if (a->nnz) {
        assert_memory_equal(a->col, b->col, (size_t)a->nnz * sizeof(int32_t));
        assert_memory_equal(a->val, b->val, (size_t)a->nnz * spmv_dtype_size(a->dtype));
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    char *dir = make_dir();
    for (int dt = 0; dt < 2; dt++) {
        for (int i = 0; i < 4; i++) {
            spmv_csr a, b;
            matfile_meta m, back;
            spmv_error err;
            char path[PATH_MAX];
            random_csr((spmv_dtype)dt, (int32_t)tu_rng_range(&rng, 1, 300), &a);
            if (i == 3) /* 64-bit row offsets (nnz past INT32_MAX, or offsets=64): kept so */
                assert_int_equal(spmv_csr_widen(&a, &err), SPMV_OK);
            meta_for(&m, "näme with spaces");
            m.mixed = dt == SPMV_FLOAT64 && i % 2; /* dtype "mixed": a float64 file with the flag */
            assert_int_equal(matfile_write(dir, &m, &a, &err), SPMV_OK);
            matfile_path(dir, m.id, path, sizeof path);
            assert_int_equal(matfile_read(path, NULL, NULL, &back, &b, &err), SPMV_OK);
            assert_csr_equal(&a, &b);
            assert_string_equal(back.id, m.id);
            assert_string_equal(back.name, m.name);
            assert_int_equal(back.symmetry, m.symmetry);
            assert_int_equal(back.formats, m.formats);
            assert_int_equal(back.hack_size, 16);
            assert_int_equal(back.mixed, m.mixed);
            assert_int_equal(back.created, m.created);
            assert_true(back.parse_ms == 1.25);
            spmv_csr_free(&a);
            spmv_csr_free(&b);
        }
    }
    remove_tree(dir);
    free(dir);
}

/* The content hash: its definition computed here (a hand-fed digest of
 * the same bytes), the same for 32- and 64-bit offsets, kept in the
 * header, and computed by matrix_new_from_csr for a file without one. */
static void test_sha256(void **state)
{
    (void)state;
    char *dir = make_dir();
    spmv_csr a, b;
    spmv_error err;
    unsigned char want[32], got[32], wide[32];
    random_csr(SPMV_FLOAT32, (int32_t)tu_rng_range(&rng, 1, 300), &a);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int64_t head[2] = {a.rows, a.cols};
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    EVP_DigestUpdate(ctx, head, sizeof head);
    for (int32_t i = 0; i <= a.rows; i++) {
        int64_t off = a.row_ptr[i];
        EVP_DigestUpdate(ctx, &off, sizeof off);
    }
    EVP_DigestUpdate(ctx, a.col, (size_t)a.nnz * 4);
    EVP_DigestUpdate(ctx, a.val, (size_t)a.nnz * 4);
    EVP_DigestFinal_ex(ctx, want, NULL);
    EVP_MD_CTX_free(ctx);
    assert_int_equal(spmv_csr_sha256(&a, got), SPMV_OK);
    assert_memory_equal(got, want, 32);
    char hex[65];
    spmv_sha256_hex(got, hex);
    assert_int_equal(strlen(hex), 64);

    matfile_meta m, back;
    char path[PATH_MAX];
    meta_for(&m, "hashed");
    memcpy(m.sha256, got, 32);
    m.has_sha256 = true;
    assert_int_equal(spmv_csr_widen(&a, &err), SPMV_OK);
    assert_int_equal(spmv_csr_sha256(&a, wide), SPMV_OK);
    assert_memory_equal(wide, want, 32);
    assert_int_equal(matfile_write(dir, &m, &a, &err), SPMV_OK);
    matfile_path(dir, m.id, path, sizeof path);
    assert_int_equal(matfile_read(path, NULL, NULL, &back, &b, &err), SPMV_OK);
    assert_true(back.has_sha256);
    assert_memory_equal(back.sha256, want, 32);
    spmv_csr_free(&b);

    m.has_sha256 = false; /* a file written before the hash: computed when the matrix is made */
    assert_int_equal(matfile_write(dir, &m, &a, &err), SPMV_OK);
    assert_int_equal(matfile_read(path, NULL, NULL, &back, &b, &err), SPMV_OK);
    assert_false(back.has_sha256);
    matrix *mx;
    assert_int_equal(matrix_new_from_csr(&back, &b, SPMV_FMT_CSR, NULL, &mx, &err), SPMV_OK);
    assert_true(mx->meta.has_sha256);
    assert_memory_equal(mx->meta.sha256, want, 32);
    matrix_unref(mx);
    spmv_csr_free(&a);
    remove_tree(dir);
    free(dir);
}

static void test_empty_matrix(void **state)
{
    (void)state;
    char *dir = make_dir();
    int32_t row_ptr[4] = {0, 0, 0, 0};
    spmv_csr a = {.rows = 3, .cols = 5, .nnz = 0, .row_ptr = row_ptr, .col = NULL, .val = NULL, .dtype = SPMV_FLOAT64};
    spmv_csr b;
    matfile_meta m, back;
    spmv_error err;
    char path[PATH_MAX];
    meta_for(&m, "empty");
    assert_int_equal(matfile_write(dir, &m, &a, &err), SPMV_OK);
    matfile_path(dir, m.id, path, sizeof path);
    assert_int_equal(matfile_read(path, NULL, NULL, &back, &b, &err), SPMV_OK);
    assert_int_equal(b.rows, 3);
    assert_int_equal(b.nnz, 0);
    spmv_csr_free(&b);
    remove_tree(dir);
    free(dir);
}

/* Writes one matrix and returns its path. */
static void write_one(const char *dir, matfile_meta *m, char *path, size_t len)
{
    spmv_csr a;
    spmv_error err;
    random_csr(SPMV_FLOAT64, 50, &a);
    meta_for(m, "victim");
    assert_int_equal(matfile_write(dir, m, &a, &err), SPMV_OK);
    spmv_csr_free(&a);
    matfile_path(dir, m->id, path, len);
}

/* Flips a bit of the byte at `at`; a negative `at` counts from the end. */
static void flip_byte(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    unsigned char c;
    struct stat st;
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    if (at < 0)
        at += st.st_size;
    assert_int_equal(pread(fd, &c, 1, at), 1);
    c ^= 0x10;
    assert_int_equal(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

static void expect_corrupt(const char *path, const char *why)
{
    matfile_meta m;
    spmv_csr b;
    spmv_error err = {0};
    int rc = matfile_read(path, NULL, NULL, &m, &b, &err);
    if (rc != SPMV_ERR_CORRUPT)
        fail_msg("%s: expected SPMV_ERR_CORRUPT, got %d (%s)", why, rc, err.message);
}

static void test_damage_detected(void **state)
{
    (void)state;
    char *dir = make_dir();
    char path[PATH_MAX];
    matfile_meta m;
    struct stat st;

    write_one(dir, &m, path, sizeof path);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size - 1), 0);
    expect_corrupt(path, "truncated by one byte");
    assert_int_equal(truncate(path, 100), 0);
    expect_corrupt(path, "truncated into the header");

    write_one(dir, &m, path, sizeof path);
    flip_byte(path, -3); /* a value */
    expect_corrupt(path, "flipped payload byte");

    write_one(dir, &m, path, sizeof path);
    flip_byte(path, 17); /* the row count */
    expect_corrupt(path, "flipped header byte");

    write_one(dir, &m, path, sizeof path);
    flip_byte(path, 0); /* the magic */
    expect_corrupt(path, "bad magic");

    write_one(dir, &m, path, sizeof path);
    int fd = open(path, O_WRONLY | O_APPEND);
    assert_int_equal(write(fd, "x", 1), 1);
    close(fd);
    expect_corrupt(path, "one byte too many");
    remove_tree(dir);
    free(dir);
}

static int load_into(void *ctx, const matfile_meta *meta, spmv_csr *csr, spmv_error *err)
{
    store *s = ctx;
    matrix *m;
    int rc = matrix_new_from_csr(meta, csr, meta->formats, NULL, &m, err);
    if (rc != SPMV_OK)
        return rc;
    store_adopt(s, m);
    matrix_unref(m);
    return SPMV_OK;
}

static size_t count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;
    assert_non_null(d);
    while ((e = readdir(d)))
        if (strlen(e->d_name) > strlen(suffix) && strcmp(e->d_name + strlen(e->d_name) - strlen(suffix), suffix) == 0)
            n++;
    closedir(d);
    return n;
}

/* A store with good and damaged files reloads the good ones, moves the
 * damaged ones to damaged/, removes a crash's temp file. */
static void test_store_reload(void **state)
{
    (void)state;
    char *dir = make_dir();
    char damaged[PATH_MAX], p1[PATH_MAX], p2[PATH_MAX], tmp[PATH_MAX];
    store *s;
    spmv_error err;
    matfile_meta m1, m2;
    matrix *good[3];

    assert_int_equal(store_open(dir, &s, &err), SPMV_OK);
    store *second;
    assert_int_equal(store_open(dir, &second, &err), SPMV_ERR_IO); /* locked by the first */
    for (int i = 0; i < 3; i++) {
        spmv_csr a;
        matfile_meta m;
        random_csr(i == 1 ? SPMV_FLOAT32 : SPMV_FLOAT64, 40 + i, &a);
        meta_for(&m, "good");
        assert_int_equal(matrix_new_from_csr(&m, &a, SPMV_FMT_CSR, NULL, &good[i], &err), SPMV_OK);
        assert_int_equal(store_insert(s, good[i], &err), SPMV_OK);
    }
    write_one(dir, &m1, p1, sizeof p1);
    write_one(dir, &m2, p2, sizeof p2);
    char ids[3][MATFILE_ID_LEN + 1];
    for (int i = 0; i < 3; i++) {
        snprintf(ids[i], sizeof ids[i], "%s", good[i]->meta.id);
        matrix_unref(good[i]);
    }
    store_close(s);
    struct stat st;
    assert_int_equal(stat(p1, &st), 0);
    assert_int_equal(truncate(p1, st.st_size / 2), 0);
    flip_byte(p2, -1);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, m1.id);
    FILE *f = fopen(tmp, "w");
    fputs("half a file", f);
    fclose(f);

    assert_int_equal(store_open(dir, &s, &err), SPMV_OK);
    assert_int_equal(store_reload(s, NULL, load_into, NULL, s), 3);
    assert_int_equal(store_count(s), 3);
    for (int i = 0; i < 3; i++) {
        matrix *m = store_get(s, ids[i]);
        assert_non_null(m);
        matrix_unref(m);
    }
    assert_null(store_get(s, m1.id));
    snprintf(damaged, sizeof damaged, "%s/damaged", dir);
    assert_int_equal(count_files(damaged, ".csr"), 2);
    assert_int_equal(count_files(dir, ".tmp"), 0);

    /* DELETE: the file goes, a second delete is not found */
    assert_int_equal(store_remove(s, ids[0], &err), SPMV_OK);
    assert_int_equal(store_remove(s, ids[0], &err), SPMV_ERR_NOT_FOUND);
    assert_int_equal(count_files(dir, ".csr"), 2);
    store_close(s);
    remove_tree(dir);
    free(dir);
}

/* matfile_stage, then matfile_commit with a newer meta (a matrix past one
 * checksummed slice, so the CRC runs across slices) or matfile_discard. */
static void test_staged_file(void **state)
{
    (void)state;
    char *dir = make_dir();
    char path[PATH_MAX];
    spmv_csr a, b;
    matfile_meta m, later, back;
    matfile_staged st;
    spmv_error err;
    tu_gen g = {.rows = 100000, .cols = 100000, .mean_per_row = 8};
    spmv_coo coo;
    tu_random_coo_gen(&rng, &g, SPMV_FLOAT64, &coo);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &a, &err), SPMV_OK);
    spmv_coo_free(&coo);
    assert_true(a.nnz * 12 > 3 * (2 << 20));
    meta_for(&m, "staged");
    assert_int_equal(matfile_stage(dir, &m, &a, NULL, &st, &err), SPMV_OK);
    assert_int_equal(count_files(dir, ".tmp"), 1);
    assert_int_equal(count_files(dir, ".csr"), 0);
    later = m;
    later.transfer_ms = 12.5;
    later.convert_ms = 3.25;
    later.device = 1;
    assert_int_equal(matfile_commit(dir, &st, &later, &a, &err), SPMV_OK);
    assert_int_equal(count_files(dir, ".tmp"), 0);
    matfile_path(dir, m.id, path, sizeof path);
    assert_int_equal(matfile_read(path, NULL, NULL, &back, &b, &err), SPMV_OK);
    assert_csr_equal(&a, &b);
    assert_true(back.transfer_ms == 12.5 && back.convert_ms == 3.25);
    assert_int_equal(back.device, 1);
    spmv_csr_free(&b);
    /* discarded: nothing left */
    meta_for(&m, "discarded");
    assert_int_equal(matfile_stage(dir, &m, &a, NULL, &st, &err), SPMV_OK);
    matfile_discard(&st);
    assert_int_equal(count_files(dir, ".tmp"), 0);
    assert_int_equal(count_files(dir, ".csr"), 1);
    /* abandoned (another thread's load failed): stops, nothing left */
    atomic_bool abandon;
    atomic_init(&abandon, true);
    meta_for(&m, "abandoned");
    assert_int_equal(matfile_stage(dir, &m, &a, &abandon, &st, &err), SPMV_ERR_UNAVAILABLE);
    assert_non_null(strstr(err.message, "abandoned"));
    assert_int_equal(count_files(dir, ".tmp"), 0);
    assert_int_equal(count_files(dir, ".csr"), 1);
    /* a directory that is not there: the create fails, nothing left */
    char gone[PATH_MAX];
    snprintf(gone, sizeof gone, "%s/gone", dir);
    assert_int_equal(matfile_stage(gone, &m, &a, NULL, &st, &err), SPMV_ERR_IO);
    assert_non_null(strstr(err.message, "create failed"));
    spmv_csr_free(&a);
    remove_tree(dir);
    free(dir);
}

/* store_stage, store_commit (the matrix listed, its header as it was at
 * the commit, store_ms in memory and 0 in the file as store_insert writes
 * it), store_discard (nothing listed, nothing left). */
static void test_store_staged(void **state)
{
    (void)state;
    char *dir = make_dir();
    char path[PATH_MAX];
    store *s;
    spmv_error err;
    matrix *m, *n;
    spmv_csr a;
    matfile_meta meta, back;
    store_staged st;
    assert_int_equal(store_open(dir, &s, &err), SPMV_OK);
    random_csr(SPMV_FLOAT64, 200, &a);
    meta_for(&meta, "gpu upload");
    assert_int_equal(matrix_new_from_csr(&meta, &a, SPMV_FMT_CSR, NULL, &m, &err), SPMV_OK);
    matfile_meta copy = m->meta;
    assert_int_equal(store_stage(s, &copy, &m->host.csr, NULL, &st, &err), SPMV_OK);
    assert_int_equal(store_count(s), 0);
    m->meta.transfer_ms = 7.5; /* as the GPU worker sets it meanwhile */
    assert_int_equal(store_commit(s, m, &st, &err), SPMV_OK);
    store_discard(&st); /* after a commit: nothing to do */
    assert_int_equal(store_count(s), 1);
    assert_true(m->meta.store_ms > 0);
    matfile_path(dir, m->meta.id, path, sizeof path);
    assert_int_equal(matfile_read(path, NULL, NULL, &back, &a, &err), SPMV_OK);
    assert_true(back.transfer_ms == 7.5 && back.store_ms == 0);
    spmv_csr_free(&a);
    random_csr(SPMV_FLOAT32, 100, &a);
    meta_for(&meta, "load failed");
    assert_int_equal(matrix_new_from_csr(&meta, &a, SPMV_FMT_CSR, NULL, &n, &err), SPMV_OK);
    copy = n->meta;
    assert_int_equal(store_stage(s, &copy, &n->host.csr, NULL, &st, &err), SPMV_OK);
    store_discard(&st);
    store_discard(&st);
    assert_int_equal(store_count(s), 1);
    assert_null(store_get(s, n->meta.id));
    assert_int_equal(count_files(dir, ".tmp"), 0);
    assert_int_equal(count_files(dir, ".csr"), 1);
    matrix_unref(n);
    matrix_unref(m);
    store_close(s);
    remove_tree(dir);
    free(dir);
}

/* A generated matrix is stored as its recipe: the file is the header
 * alone, a read builds the same CSR again (both offset widths, mixed
 * rounded), and a recipe that no longer gives the header's matrix, or
 * bytes after the header, are damage. */
static void test_recipe(void **state)
{
    (void)state;
    char *dir = make_dir();
    for (int v = 0; v < 3; v++) {
        spmv_gen_spec g = {.kind = v == 1 ? SPMV_GEN_POWERLAW : SPMV_GEN_BAND,
                           .n = tu_rng_range(&rng, 10, 2000), .per_row = (int32_t)tu_rng_range(&rng, 1, 9),
                           .seed = (uint64_t)tu_rng_range(&rng, 1, 1000)};
        spmv_csr a, b;
        matfile_meta m, back;
        spmv_error err;
        char path[PATH_MAX];
        struct stat st;
        assert_int_equal(spmv_gen_csr(&g, v == 2 ? SPMV_FLOAT32 : SPMV_FLOAT64, v == 0, INT64_MAX, &a, &err), SPMV_OK);
        if (v == 1)
            assert_int_equal(spmv_csr_round_to_float32(&a, &err), SPMV_OK);
        meta_for(&m, "generated");
        m.mixed = v == 1;
        m.generated = true;
        m.recipe = g;
        assert_int_equal(matfile_write(dir, &m, &a, &err), SPMV_OK);
        matfile_path(dir, m.id, path, sizeof path);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, MATFILE_HEADER_BYTES);
        assert_int_equal(matfile_read(path, NULL, NULL, &back, &b, &err), SPMV_OK);
        assert_true(back.generated && back.mixed == m.mixed);
        assert_int_equal(back.recipe.kind, g.kind);
        assert_int_equal(back.recipe.n, g.n);
        assert_int_equal(back.recipe.per_row, g.per_row);
        assert_int_equal(back.recipe.seed, g.seed);
        assert_csr_equal(&a, &b);
        spmv_csr_free(&b);
        /* the header's matrix must be the recipe's */
        a.nnz += 1;
        assert_int_equal(matfile_write(dir, &m, &a, &err), SPMV_OK);
        expect_corrupt(path, "a recipe giving fewer entries than the header's");
        a.nnz -= 1;
        assert_int_equal(matfile_write(dir, &m, &a, &err), SPMV_OK);
        int fd = open(path, O_WRONLY | O_APPEND);
        assert_int_equal(write(fd, "x", 1), 1);
        close(fd);
        expect_corrupt(path, "bytes after a recipe's header");
        /* a recipe of another shape than the header's is refused before a
         * row of it is counted (a power-law one of 2^31 - 1 rows would
         * take minutes to count) */
        m.recipe.n = v == 1 ? INT32_MAX : g.n + 1;
        assert_int_equal(matfile_write(dir, &m, &a, &err), SPMV_OK);
        expect_corrupt(path, "a recipe of another shape than the header's");
        spmv_csr_free(&a);
    }
    remove_tree(dir);
    free(dir);
}

static void test_ids(void **state)
{
    (void)state;
    char id[MATFILE_ID_LEN + 1];
    store_new_id(id);
    assert_true(store_id_valid(id));
    assert_false(store_id_valid(""));
    assert_false(store_id_valid("../../etc/passwd"));
    assert_false(store_id_valid("3F2504E0-4F89-11D3-9A0C-0305E82C3301")); /* upper case: not ours */
    assert_false(store_id_valid("3f2504e0-4f89-11d3-9a0c-0305e82c3301x"));
    assert_false(store_id_valid("3f2504e0-4f89-11d3-9a0c+0305e82c3301"));
    assert_false(store_id_valid("3f2504e0-4f89-11d3-9a0c-0305e82c330g"));
    assert_true(store_id_valid("3f2504e0-4f89-11d3-9a0c-0305e82c3301"));
}

int main(void)
{
    uint64_t seed = tu_seed();
    tu_rng_init(&rng, seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_empty_matrix),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_damage_detected),
        cmocka_unit_test(test_store_reload),
        cmocka_unit_test(test_staged_file),
        cmocka_unit_test(test_store_staged),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_recipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
