/* test_gpu.c — the GPU backend (engine/gpu/): every GPU kernel, both dtypes,
 * the parameter edges, the device conversions and device-memory accounting.
 *
 * Run by `make gpu-test` (and by bundle/run.sh on the GPU host). On a host
 * without a GPU every case is skipped with spmv_gpu_count()'s reason, so
 * `make test` passes there and says why.
 *
 * Kernels: every GPU kernel of the registry x float64/float32 x each
 * combination of the parameter edges it takes (block_size 32 and 1024,
 * hack_size 1 and 64, alg 1 and 2, threads per row auto/2/32, nnz_per_wg
 * default and 64, gpu.csr.adaptive's row_blocks 1 and 2, gpu.hll's x_cache
 * 1 (texture) and 2 (__ldg), gpu.hyb's width auto/1/3 and launches 1 and 2,
 * gpu.coo.scoo's lanes default (4)/1/32;
 * the quick subsets keep every combination, on fewer matrices) on every
 * ../shared/matrices/real/ matrix and on random matrices drawn afresh (the
 * seed is printed; SPMV_SEED repeats a run): testutil's shapes (empty rows,
 * a full row, power-law rows, 1x1, n x 1, 1 x n, no non-zeros), the empty
 * shapes 0 x 5, 5 x 0 and 0 x 0, and one row of 100 000 entries. y is poisoned with NaN before each run (the backend
 * also poisons its device y). The reference is cpu.csr.serial
 * (spmv_reference) in float64 on the same values (for float32, the values
 * and x rounded to float32 first). The error is max_i |y_i - ref_i| over
 * max_i sum_j |a_ij x_j|, the scale rounding errors grow with whatever the
 * cancellation in y (a plain relative error fails correct float32 kernels
 * on rows that sum to nearly 0); float64 must stay under 1e-12 and float32
 * under 1e-5, both widened by sqrt(longest row / 100) past 100 entries
 * (the rounding error of a sum grows with the square root of its length).
 *
 * Kernels run on matrices uploaded as CSR alone: each builds its format on
 * first use, and after every kernel the context's used bytes must equal
 * the matrix's (per category) plus the scratch, and come back after the
 * free. A kernel whose format the padding rule refuses must answer
 * SPMV_ERR_LIMIT exactly when the host's plan of that format says so
 * (test_padding_rule: a matrix with one full row, a power-law matrix);
 * test_lazy_eviction squeezes the device with a reserve so that one ELL
 * must evict another, least recently used first, never a pinned one.
 *
 * Conversions: the device CSR, COO, ELL, HLL and HYB, downloaded, must equal
 * the host conversions (spmv_coo_to_csr, spmv_csr_to_ell/_hll/_hyb) entry by
 * entry and bit for bit; a shuffled COO with split duplicates must sort and
 * sum on the device to the host's CSR.
 *
 * SPMV_GPU_QUICK=1 keeps a small subset (for compute-sanitizer runs), =2 a
 * smaller one;
 * SPMV_GPU_ONLY=pattern runs only the cases whose name matches.
 * A table "# kernel dtype passed failed" is printed at the end of each
 * kernel case.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmv.h"
#include "testutil.h"

#define F64_BOUND 1e-12
#define F32_BOUND 1e-5
#define DENSE_LEN 100000
#define MAX_TALLY 64

static struct {
    size_t base_used; /* what the context holds besides the matrix under test (vectors of other cases: none) */
} fx;

/* Passes and failures per kernel and dtype, for the log. */
static struct tally {
    const char *kernel;
    int pass[2], fail[2];
} tallies[MAX_TALLY];

static struct tally *tally_of(const char *kernel)
{
    for (int i = 0; i < MAX_TALLY; i++) {
        if (!tallies[i].kernel)
            tallies[i].kernel = kernel;
        if (strcmp(tallies[i].kernel, kernel) == 0)
            return &tallies[i];
    }
    return &tallies[MAX_TALLY - 1];
}

static void print_tallies(const char *title)
{
    print_message("# %s: kernel dtype passed failed\n", title);
    for (int i = 0; i < MAX_TALLY && tallies[i].kernel; i++)
        for (int d = 0; d < 2; d++)
            print_message("# %-22s %-8s %5d %5d %s\n", tallies[i].kernel, spmv_dtype_name((spmv_dtype)d),
                          tallies[i].pass[d], tallies[i].fail[d], tallies[i].fail[d] ? "FAIL" : "ok");
    memset(tallies, 0, sizeof tallies);
}

/* ------------------------------------------------------------ matrices */

/* Loads one real matrix by file name (float64 COO). */
static void load_real(const char *file, spmv_coo *out)
{
    char rel[256], path[4096];
    spmv_error err;
    snprintf(rel, sizeof rel, "real/%s", file);
    tu_matrices_path(path, sizeof path, rel);
    if (spmv_mm_read_file(path, NULL, out, NULL, &err) != SPMV_OK)
        fail_msg("%s: %s", path, err.message);
}

/* The random matrices: testutil's shapes, the empty shapes 0 x 5, 5 x 0
 * and 0 x 0, and (not in the quick subset) one row of DENSE_LEN. */
#define EMPTY_SHAPES 3
static int random_count(void) { return TU_SHAPE_COUNT + EMPTY_SHAPES + (TG.quick ? 0 : 1); }

static void random_matrix(int i, spmv_coo *out, char *label, size_t len)
{
    if (i >= TU_SHAPE_COUNT && i < TU_SHAPE_COUNT + EMPTY_SHAPES) {
        static const int32_t shape[EMPTY_SHAPES][2] = {{0, 5}, {5, 0}, {0, 0}};
        const int32_t *sh = shape[i - TU_SHAPE_COUNT];
        spmv_error err;
        assert_int_equal(spmv_coo_alloc(out, sh[0], sh[1], 0, SPMV_FLOAT64, &err), SPMV_OK);
        snprintf(label, len, "empty %d x %d", sh[0], sh[1]);
        return;
    }
    int32_t n = TG.quick > 1 ? 100 : TG.quick ? 300 : 3000;
    if (i < TU_SHAPE_COUNT) {
        tu_random_coo(&TG.rng, (tu_shape)i, n, SPMV_FLOAT64, out);
        snprintf(label, len, "random %s (%d x %d, %lld nnz)", tu_shape_name((tu_shape)i), out->rows, out->cols,
                 (long long)out->nnz);
        return;
    }
    tu_gen g = {.rows = 1000, .cols = DENSE_LEN + 20000, .mean_per_row = 4, .empty_row_frac = 0.2,
                .dense_rows = 1, .dense_len = DENSE_LEN};
    tu_random_coo_gen(&TG.rng, &g, SPMV_FLOAT64, out);
    snprintf(label, len, "random dense row of %d (%d x %d, %lld nnz)", DENSE_LEN, out->rows, out->cols,
             (long long)out->nnz);
}

/* ------------------------------------------------------------- kernels */

/* The reference problem of one matrix in one dtype: x in dtype, and y of
 * cpu.csr.serial in float64 over the values as the dtype holds them. */
struct problem {
    spmv_dtype dt;
    void *x;
    double *yref;
    double scale;    /* max_i sum_j |a_ij x_j|: what rounding errors scale with */
    int32_t max_row;
    const spmv_coo *coo;   /* the matrix (the host's padding plan) */
};

/* max_i sum_j |a_ij| |x_j| over a float64 CSR. */
static double abs_scale(const spmv_csr *a, const double *x)
{
    const double *v = a->val;
    double worst = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        double s = 0;
        for (int32_t k = a->row_ptr[i]; k < a->row_ptr[i + 1]; k++)
            s += fabs(v[k]) * fabs(x[a->col[k]]);
        worst = fmax(worst, s);
    }
    return worst;
}

/* max_i |y_i - ref_i| / scale; +Inf for any NaN (an unwritten output). */
static double scaled_err(const struct problem *p, const void *y, int32_t n)
{
    double worst = 0;
    for (int32_t i = 0; i < n; i++) {
        double v = p->dt == SPMV_FLOAT32 ? (double)((const float *)y)[i] : ((const double *)y)[i];
        if (isnan(v))
            return INFINITY;
        worst = fmax(worst, fabs(v - p->yref[i]));
    }
    return worst / fmax(p->scale, 1e-300);
}

static void problem_make(const spmv_coo *coo, spmv_dtype dt, struct problem *p)
{
    spmv_coo in_dt, rounded;
    spmv_csr csr;
    spmv_error err;
    p->dt = dt;
    p->coo = coo;
    p->x = tu_vector_alloc(dt, coo->cols);
    tu_random_vector(&TG.rng, dt, coo->cols, p->x);
    double *x64 = tu_vector_alloc(SPMV_FLOAT64, coo->cols);
    tu_vector_convert(p->x, dt, x64, SPMV_FLOAT64, coo->cols);
    if (spmv_coo_convert(coo, dt, &in_dt, &err) || spmv_coo_convert(&in_dt, SPMV_FLOAT64, &rounded, &err) ||
        spmv_coo_to_csr(&rounded, SPMV_FLOAT64, &csr, &err))
        fail_msg("reference: %s", err.message);
    p->yref = tu_vector_alloc(SPMV_FLOAT64, coo->rows);
    spmv_reference(&csr, x64, p->yref);
    p->scale = abs_scale(&csr, x64);
    p->max_row = tu_longest_row(&csr);
    spmv_csr_free(&csr);
    spmv_coo_free(&in_dt);
    spmv_coo_free(&rounded);
    free(x64);
}

static void problem_free(struct problem *p)
{
    free(p->x);
    free(p->yref);
}

/* Parameter edges per parameter (0 = default). */
static int edges(const spmv_kernel *k, spmv_param_id id, int32_t *v)
{
    if (!(k->params & (1u << id))) {
        v[0] = 0;
        return 1;
    }
    switch (id) {
    case SPMV_PARAM_BLOCK_SIZE: v[0] = 32; v[1] = 1024; return 2;
    case SPMV_PARAM_HACK_SIZE: v[0] = 1; v[1] = 64; return 2;
    case SPMV_PARAM_ALG: v[0] = 1; v[1] = 2; return 2;
    case SPMV_PARAM_THREADS: v[0] = 0; v[1] = 2; v[2] = 32; return 3;
    case SPMV_PARAM_NNZ_PER_WG: v[0] = 0; v[1] = 64; return 2;
    case SPMV_PARAM_X_CACHE: v[0] = 1; v[1] = 2; return 2;
    case SPMV_PARAM_WIDTH: v[0] = 0; v[1] = 1; v[2] = 3; return 3;
    case SPMV_PARAM_LAUNCHES: v[0] = 1; v[1] = 2; return 2;
    case SPMV_PARAM_ROW_BLOCKS: v[0] = 1; v[1] = 2; return 2;
    case SPMV_PARAM_LANES: v[0] = 0; v[1] = 1; v[2] = 32; return 3;
    case SPMV_PARAM_PATTERNS: v[0] = 1; v[1] = 2; return 2;
    default: v[0] = 0; return 1;
    }
}

/* Whether the host plans the format k reads (HLL at p's hack size) past
 * the context's padding rule: the device must then refuse it too. */
static bool host_rule_refuses(const struct problem *pb, const spmv_kernel *k, const spmv_params *p)
{
    spmv_csr csr;
    spmv_error err;
    int64_t slots = 0, bytes = 0;
    int32_t hack = p->v[SPMV_PARAM_HACK_SIZE] ? p->v[SPMV_PARAM_HACK_SIZE] : 32;
    spmv_format_limits lim = spmv_format_limits_default();
    if (spmv_coo_to_csr(pb->coo, pb->dt, &csr, &err) != SPMV_OK)
        return false;
    bool refused = spmv_format_plan(&csr, k->format, hack, &slots, &bytes, &err) == SPMV_OK &&
                   spmv_format_check(&lim, k->format, csr.nnz, slots, bytes, &err) == SPMV_ERR_LIMIT;
    spmv_csr_free(&csr);
    return refused;
}

/* Whether the host finds complete b x b blocks in the matrix (PBSR's
 * kernels refuse a matrix without them, test_pbsr). */
static bool host_has_blocks(const struct problem *pb)
{
    spmv_csr csr;
    spmv_error err;
    if (spmv_coo_to_csr(pb->coo, pb->dt, &csr, &err) != SPMV_OK)
        return false;
    bool blocks = spmv_csr_block_size(&csr, NULL) > 0;
    spmv_csr_free(&csr);
    return blocks;
}

/* Whether the matrix of pb, in its dtype, is square and exactly
 * symmetric: gpu.spsell runs on it, else answers SPMV_ERR_UNAVAILABLE. */
static bool host_symmetric(const struct problem *pb)
{
    spmv_csr csr;
    spmv_error err;
    if (spmv_coo_to_csr(pb->coo, pb->dt, &csr, &err) != SPMV_OK)
        return false;
    bool sym = spmv_csr_symmetric(&csr);
    spmv_csr_free(&csr);
    return sym;
}

/* Every byte counted: after a kernel the context holds exactly the
 * matrix's bytes (formats, transpose, buffers) plus its scratch, and the
 * matrix's categories add up to its total. */
static bool accounting_ok(const char *label, const spmv_kernel *k, spmv_gpu_matrix *gm)
{
    spmv_gpu_info info;
    spmv_gpu_usage u;
    if (spmv_gpu_ctx_info(TG.ctx, &info) != SPMV_OK)
        return false;
    spmv_gpu_matrix_usage(gm, &u);
    size_t sum = u.transpose + u.other;
    for (int b = 0; b < SPMV_FORMAT_COUNT; b++)
        sum += u.bytes[b];
    if (info.mem_used_by_spmvd != u.total + info.mem_scratch + fx.base_used || sum != u.total) {
        print_message("# FAIL accounting after %s on %s: used_by_spmvd %zu, matrix %zu (categories %zu) + scratch "
                      "%zu + before %zu\n",
                      k->name, label, info.mem_used_by_spmvd, u.total, sum, info.mem_scratch, fx.base_used);
        return false;
    }
    return true;
}

/* One run of k with p; returns true when y matches the reference. */
static bool run_one(const char *label, const spmv_kernel *k, spmv_gpu_matrix *gm, const spmv_coo *coo,
                    const struct problem *pb, const spmv_params *p, void *y)
{
    spmv_error err;
    spmv_stats st;
    char ps[256];
    spmv_params_format(k, p, ps, sizeof ps);
    tu_poison(y, pb->dt, coo->rows);
    int rc = spmv_gpu_run(TG.ctx, k, gm, p, pb->x, y, 1, 2, &st, &err);
    if (rc == SPMV_ERR_LIMIT && host_rule_refuses(pb, k, p)) {
        print_message("# refused by the padding rule, as the host's plan says: %s on %s\n", k->name, label);
        return accounting_ok(label, k, gm);
    }
    if (k->format == SPMV_FMT_SPSELL && !host_symmetric(pb)) { /* its own error, nothing held */
        bool ok = rc == SPMV_ERR_UNAVAILABLE && strstr(err.message, "symmetric");
        if (!ok)
            print_message("# FAIL %s on %s (not symmetric): %s, not the refusal\n", k->name, label,
                          rc ? err.message : "ran");
        return ok && accounting_ok(label, k, gm);
    }
    if (rc == SPMV_ERR_UNSUPPORTED && k->format == SPMV_FMT_PBSR && !host_has_blocks(pb)) /* test_pbsr runs it */
        return strstr(err.message, "blocks") && accounting_ok(label, k, gm);
    if (rc != SPMV_OK) {
        print_message("# FAIL %s %s %s on %s: %s (%s)\n", k->name, spmv_dtype_name(pb->dt), ps, label, err.message,
                      spmv_strerror(rc));
        return false;
    }
    bool f64 = pb->dt == SPMV_FLOAT64;
    double bound = (f64 ? F64_BOUND : F32_BOUND) * fmax(1.0, sqrt(pb->max_row / 100.0));
    double e = scaled_err(pb, y, coo->rows);
    if (!(e <= bound)) {
        print_message("# FAIL %s %s %s on %s: relative error %.3g > %.3g\n", k->name, spmv_dtype_name(pb->dt), ps,
                      label, e, bound);
        return false;
    }
    return accounting_ok(label, k, gm);
}

/* Every GPU kernel x parameter edge on one matrix in one dtype. */
static int check_kernels(const char *label, const spmv_coo *coo, spmv_dtype dt)
{
    struct problem pb;
    spmv_gpu_matrix *gm = NULL;
    spmv_gpu_upload_stats us;
    spmv_error err;
    int failures = 0;
    spmv_gpu_info before, after;
    problem_make(coo, dt, &pb);
    void *y = tu_vector_alloc(dt, coo->rows);
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &before), SPMV_OK);
    fx.base_used = before.mem_used_by_spmvd - before.mem_scratch;
    /* CSR only: every other format is built by its first kernel */
    if (spmv_gpu_matrix_upload(TG.ctx, coo, dt, SPMV_FMT_CSR, 32, &gm, &us, &err) != SPMV_OK) {
        print_message("# FAIL upload of %s in %s: %s\n", label, spmv_dtype_name(dt), err.message);
        failures++;
        goto done;
    }
    if (us.formats != SPMV_FMT_CSR) {
        print_message("# FAIL upload of %s holds formats 0x%x, not CSR alone\n", label, us.formats);
        failures++;
    }
    for (size_t i = 0; i < spmv_kernel_count(); i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        int32_t e[SPMV_PARAM_COUNT][3];
        int n[SPMV_PARAM_COUNT];
        if (k->device != SPMV_DEVICE_GPU || k->op != SPMV_OP_SPMV) /* SpMSpM: test_gpu_spmspm.c */
            continue;
        if (spmv_kernel_is_auto(k)) /* a choice among these kernels, not one: test_tune.c */
            continue;
        struct tally *t = tally_of(k->name);
        for (int id = 0; id < SPMV_PARAM_COUNT; id++)
            n[id] = edges(k, (spmv_param_id)id, e[id]);
        /* every combination of the edges: an odometer over the parameters */
        int at[SPMV_PARAM_COUNT] = {0};
        for (;;) {
            spmv_params p = {{0}};
            for (int id = 0; id < SPMV_PARAM_COUNT; id++)
                p.v[id] = e[id][at[id]];
            bool ok = run_one(label, k, gm, coo, &pb, &p, y);
            if (ok)
                t->pass[dt]++;
            else
                t->fail[dt]++;
            failures += !ok;
            int id = 0;
            while (id < SPMV_PARAM_COUNT && ++at[id] == n[id])
                at[id++] = 0;
            if (id == SPMV_PARAM_COUNT)
                break;
        }
    }
done:
    spmv_gpu_matrix_free(TG.ctx, gm);
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &after), SPMV_OK);
    if (after.mem_used_by_spmvd - after.mem_scratch != fx.base_used) {
        print_message("# FAIL %s: %zu bytes held after the matrix was freed, %zu before it\n", label,
                      after.mem_used_by_spmvd - after.mem_scratch, fx.base_used);
        failures++;
    }
    problem_free(&pb);
    free(y);
    return failures;
}

static size_t real_count(size_t n)
{
    size_t keep = TG.quick > 1 ? 1 : TG.quick ? 4 : n;
    return keep < n ? keep : n;
}

static void test_kernels_real(void **state)
{
    (void)state;
    TU_NEED_GPU();
    tu_expected *ex = NULL;
    size_t n = 0;
    int failures = 0;
    assert_int_equal(tu_expected_load(&ex, &n), 0);
    assert_true(n > 0);
    for (size_t i = 0; i < real_count(n); i++) {
        spmv_coo coo;
        load_real(ex[i].file, &coo);
        for (int d = 0; d < 2; d++)
            failures += check_kernels(ex[i].file, &coo, (spmv_dtype)d);
        spmv_coo_free(&coo);
    }
    tu_expected_free(ex, n);
    print_tallies("real matrices");
    assert_int_equal(failures, 0);
}

static void test_kernels_random(void **state)
{
    (void)state;
    TU_NEED_GPU();
    int failures = 0;
    for (int i = 0; i < random_count(); i++) {
        spmv_coo coo;
        char label[160];
        random_matrix(i, &coo, label, sizeof label);
        for (int d = 0; d < 2; d++)
            failures += check_kernels(label, &coo, (spmv_dtype)d);
        spmv_coo_free(&coo);
    }
    print_tallies("random matrices");
    assert_int_equal(failures, 0);
}

/* ---------------------------------------------------------- conversions */

static bool same_csr(const char *what, const spmv_csr *h, const spmv_csr *d)
{
    size_t vs = spmv_dtype_size(h->dtype);
    if (h->rows != d->rows || h->cols != d->cols || h->nnz != d->nnz) {
        print_message("# FAIL %s CSR shape %dx%d/%lld vs device %dx%d/%lld\n", what, h->rows, h->cols,
                      (long long)h->nnz, d->rows, d->cols, (long long)d->nnz);
        return false;
    }
    return tu_same_bytes(what, h->row_ptr, d->row_ptr, ((size_t)h->rows + 1) * 4) &&
           tu_same_bytes(what, h->col, d->col, (size_t)h->nnz * 4) &&
           tu_same_bytes(what, h->val, d->val, (size_t)h->nnz * vs);
}

static bool same_ell(const char *what, const spmv_ell *h, const spmv_ell *d)
{
    size_t slots = (size_t)h->width * h->rows, vs = spmv_dtype_size(h->dtype);
    if (h->width != d->width || h->rows != d->rows) {
        print_message("# FAIL %s ELL width %d vs device %d\n", what, h->width, d->width);
        return false;
    }
    return tu_same_bytes(what, h->col, d->col, slots * 4) && tu_same_bytes(what, h->val, d->val, slots * vs);
}

static bool same_hll(const char *what, const spmv_hll *h, const spmv_hll *d)
{
    size_t vs = spmv_dtype_size(h->dtype);
    if (h->nslices != d->nslices || h->hack_size != d->hack_size ||
        h->slice_off[h->nslices] != d->slice_off[d->nslices]) {
        print_message("# FAIL %s HLL %d slices of %d vs device %d of %d\n", what, h->nslices, h->hack_size,
                      d->nslices, d->hack_size);
        return false;
    }
    size_t slots = (size_t)h->slice_off[h->nslices];
    return tu_same_bytes(what, h->slice_off, d->slice_off, ((size_t)h->nslices + 1) * 8) &&
           tu_same_bytes(what, h->slice_width, d->slice_width, (size_t)h->nslices * 4) &&
           tu_same_bytes(what, h->col, d->col, slots * 4) && tu_same_bytes(what, h->val, d->val, slots * vs);
}

static bool same_pcsr(const char *what, const spmv_pcsr *h, const spmv_pcsr *d)
{
    if (h->idx_bytes != d->idx_bytes || h->wide_nnz != d->wide_nnz) {
        print_message("# FAIL %s PCSR %d-byte columns, %lld wide vs device %d, %lld\n", what, h->idx_bytes,
                      (long long)h->wide_nnz, d->idx_bytes, (long long)d->wide_nnz);
        return false;
    }
    bool narrow = h->idx_bytes < 4;
    return tu_same_bytes(what, h->idx, d->idx, (size_t)h->nnz * h->idx_bytes) &&
           (!narrow || (tu_same_bytes(what, h->base, d->base, (size_t)h->rows * 4) &&
                        tu_same_bytes(what, h->wide_col, d->wide_col, (size_t)h->wide_nnz * 4))) &&
           tu_same_values(what, &h->v, &d->v, h->nnz, spmv_dtype_size(h->dtype));
}

/* What the packed formats of the matrices checked so far chose (test_packed
 * asserts every mode and width was exercised). */
static struct {
    int vcode[SPMV_VCODE_COUNT];
    int pcsr_idx[5];
    int psell_idx[5];
    int psell_uniform; /* slices of one value a slot */
} seen;

static void note_packed(const spmv_matrix *dm, spmv_format f)
{
    if (f == SPMV_FMT_PCSR) {
        seen.vcode[dm->pcsr.v.mode]++;
        seen.pcsr_idx[dm->pcsr.idx_bytes]++;
    } else if (f == SPMV_FMT_PSELL) {
        seen.vcode[dm->psell.v.mode]++;
        for (int32_t s = 0; s < dm->psell.nslices; s++) {
            int64_t w = dm->psell.slot_off[s + 1] - dm->psell.slot_off[s];
            seen.psell_idx[dm->psell.idx_bytes[s]] = 1;
            seen.psell_uniform += w > 0 && dm->psell.val_off[s + 1] - dm->psell.val_off[s] == w;
        }
    }
}

/* How check_conversions puts the matrix on the device: the COO (staged,
 * checked, sorted there), the host CSR in dt (the daemon's upload), the
 * float64 host CSR cast to dt on the device (float32 only). */
enum upload_via { VIA_COO, VIA_CSR, VIA_CSR_CAST, VIA_COUNT };
static const char *const via_name[VIA_COUNT] = {"from COO", "from CSR", "from float64 CSR"};

static int upload_via(enum upload_via via, const spmv_coo *coo, const spmv_csr *hcsr, spmv_dtype dt,
                      spmv_gpu_matrix **gm, spmv_gpu_upload_stats *us, spmv_error *err)
{
    if (via == VIA_COO)
        return spmv_gpu_matrix_upload(TG.ctx, coo, dt, SPMV_FMT_ALL, 32, gm, us, err);
    if (via == VIA_CSR)
        return spmv_gpu_matrix_upload_csr(TG.ctx, hcsr, dt, SPMV_FMT_ALL, 32, gm, us, err);
    spmv_csr wide;
    int rc = spmv_coo_to_csr(coo, SPMV_FLOAT64, &wide, err);
    if (rc == SPMV_OK)
        rc = spmv_gpu_matrix_upload_csr(TG.ctx, &wide, dt, SPMV_FMT_ALL, 32, gm, us, err);
    spmv_csr_free(&wide);
    return rc;
}

/* Uploads coo in dt every way and compares every device format with the
 * host's. */
static int check_conversions(const char *label, const spmv_coo *coo, spmv_dtype dt)
{
    spmv_coo hcoo;
    spmv_csr hcsr;
    spmv_ell hell;
    spmv_hll hhll;
    spmv_hyb hhyb;
    spmv_pcsr hpcsr;
    spmv_psell hpsell;
    spmv_gpu_matrix *gm = NULL;
    spmv_error err;
    int failures = 0;
    char what[256];
    memset(&hpsell, 0, sizeof hpsell);
    if (spmv_coo_convert(coo, dt, &hcoo, &err) || spmv_coo_to_csr(coo, dt, &hcsr, &err) ||
        spmv_csr_to_ell(&hcsr, 0, &hell, &err) || spmv_csr_to_hll(&hcsr, 32, &hhll, &err) ||
        spmv_csr_to_hyb(&hcsr, -1, &hhyb, &err) || spmv_csr_to_pcsr(&hcsr, NULL, &hpcsr, &err))
        fail_msg("host conversions of %s: %s", label, err.message);
    {
        /* PSELL under the default rule: refused where the host's plan says */
        spmv_format_limits lim = spmv_format_limits_default();
        int rc = spmv_csr_to_psell(&hcsr, &lim, &hpsell, &err);
        if (rc != SPMV_OK && rc != SPMV_ERR_LIMIT)
            fail_msg("host PSELL of %s: %s", label, err.message);
    }
    for (int via = 0; via < VIA_COUNT; via++) {
    if (via == VIA_CSR_CAST && dt == SPMV_FLOAT64)
        continue;
    spmv_gpu_upload_stats us;
    if (upload_via((enum upload_via)via, coo, &hcsr, dt, &gm, &us, &err) != SPMV_OK)
        fail_msg("upload of %s %s: %s", label, via_name[via], err.message);
    static const spmv_format fmts[] = {SPMV_FMT_CSR, SPMV_FMT_COO,  SPMV_FMT_ELL,  SPMV_FMT_HLL,
                                       SPMV_FMT_HYB, SPMV_FMT_PCSR, SPMV_FMT_PSELL};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        spmv_matrix dm;
        bool ok;
        snprintf(what, sizeof what, "%s %s %s %s", label, spmv_dtype_name(dt), spmv_format_name(fmts[i]),
                 via_name[via]);
        int64_t slots = 0, bytes = 0;
        spmv_format_limits lim = spmv_format_limits_default();
        bool refused = spmv_format_plan(&hcsr, fmts[i], 32, &slots, &bytes, &err) == SPMV_OK &&
                       spmv_format_check(&lim, fmts[i], hcsr.nnz, slots, bytes, &err) == SPMV_ERR_LIMIT;
        if (refused != !(us.formats & fmts[i])) {
            print_message("# FAIL %s: held %d, the host's padding plan refuses it %d\n", what,
                          !!(us.formats & fmts[i]), refused);
            failures++;
        }
        if (refused) {
            print_message("# %s not built at upload (padding rule), as planned\n", what);
            continue;
        }
        if (spmv_gpu_matrix_download(TG.ctx, gm, fmts[i], &dm, &err) != SPMV_OK) {
            print_message("# FAIL download %s: %s\n", what, err.message);
            failures++;
            continue;
        }
        switch (fmts[i]) {
        case SPMV_FMT_COO: ok = tu_coo_equal(&hcoo, &dm.coo); break;
        case SPMV_FMT_ELL: ok = same_ell(what, &hell, &dm.ell); break;
        case SPMV_FMT_HLL: ok = same_hll(what, &hhll, &dm.hll); break;
        case SPMV_FMT_HYB: ok = same_ell(what, &hhyb.ell, &dm.hyb.ell) && tu_coo_equal(&hhyb.coo, &dm.hyb.coo); break;
        case SPMV_FMT_PCSR: ok = same_pcsr(what, &hpcsr, &dm.pcsr); break;
        case SPMV_FMT_PSELL: ok = tu_same_psell(what, &hpsell, &dm.psell); break;
        default: ok = same_csr(what, &hcsr, &dm.csr); break;
        }
        note_packed(&dm, fmts[i]);
        if (!ok)
            print_message("# FAIL %s: device conversion differs from the host's\n", what);
        failures += !ok;
        spmv_matrix_free(&dm);
    }
    spmv_gpu_matrix_free(TG.ctx, gm);
    gm = NULL;
    }
    spmv_coo_free(&hcoo);
    spmv_csr_free(&hcsr);
    spmv_ell_free(&hell);
    spmv_hll_free(&hhll);
    spmv_hyb_free(&hhyb);
    spmv_pcsr_free(&hpcsr);
    spmv_psell_free(&hpsell);
    return failures;
}

static void test_conversions_real(void **state)
{
    (void)state;
    TU_NEED_GPU();
    tu_expected *ex = NULL;
    size_t n = 0;
    int failures = 0;
    assert_int_equal(tu_expected_load(&ex, &n), 0);
    for (size_t i = 0; i < real_count(n); i++) {
        spmv_coo coo;
        load_real(ex[i].file, &coo);
        for (int d = 0; d < 2; d++)
            failures += check_conversions(ex[i].file, &coo, (spmv_dtype)d);
        spmv_coo_free(&coo);
    }
    tu_expected_free(ex, n);
    assert_int_equal(failures, 0);
}

static void test_conversions_random(void **state)
{
    (void)state;
    TU_NEED_GPU();
    int failures = 0;
    /* Not the dense-row matrix: its ELL is 10^8 slots, too big to download. */
    for (int i = 0; i < TU_SHAPE_COUNT + EMPTY_SHAPES; i++) {
        spmv_coo coo;
        char label[160];
        random_matrix(i, &coo, label, sizeof label);
        for (int d = 0; d < 2; d++)
            failures += check_conversions(label, &coo, (spmv_dtype)d);
        spmv_coo_free(&coo);
    }
    assert_int_equal(failures, 0);
}

/* The packed formats on matrices chosen to take every value mode and
 * every column width (a generated Poisson: two values, slices of 1 and 2
 * bytes; graphs: one value, columns of 4 bytes; random values rounded to
 * 1/500 (U16) or to 1/40 (U8) on a band with a dense row (PCSR's wide-row
 * fallback, PSELL slices of 1 and 4 bytes); plain random: RAW, rounded to
 * float32: F32 in float64): the device
 * builds equal the host's bit for bit and every GPU kernel, gpu.pcsr and
 * gpu.psell with them, matches the reference. */
static void quantize(spmv_coo *c, double steps)
{
    double *v = c->val;
    for (int64_t k = 0; k < c->nnz; k++)
        v[k] = steps < 0 ? (double)(float)v[k] : round(v[k] * steps) / steps;
}

static void test_packed(void **state)
{
    (void)state;
    TU_NEED_GPU();
    int failures = 0;
    uint64_t seed = tu_rng_next(&TG.rng);
    int32_t side = TG.quick ? 40 : 300;
    struct {
        spmv_gen_spec spec;
        double steps; /* values rounded to 1/steps; -1: to float32 (a mixed upload's); 0: as generated */
    } mats[] = {
        {{SPMV_GEN_POISSON2D, side, 0, 0, seed}, 0},
        {{SPMV_GEN_STENCIL27, TG.quick ? 8 : 30, 0, 0, seed}, 0},
        {{SPMV_GEN_GRAPH_UNIFORM, side * side, 16, 0, seed}, 0},
        {{SPMV_GEN_GRAPH_POWERLAW, side * side, 8, 0, seed}, 0},
        {{SPMV_GEN_BANDED_DENSE_ROW, side * side, 16, TG.quick ? 200 : 70000, seed}, 500},
        {{SPMV_GEN_BANDED_DENSE_ROW, side * side, 16, TG.quick ? 200 : 70000, seed}, 40},
        {{SPMV_GEN_UNIFORM, side * side, 8, 0, seed}, 0},
        {{SPMV_GEN_UNIFORM, side * side, 8, 0, seed}, -1},
    };
    memset(&seen, 0, sizeof seen);
    print_message("# packed matrices: seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        spmv_coo coo;
        spmv_error err;
        char label[160];
        assert_int_equal(spmv_gen(&mats[i].spec, &coo, &err), SPMV_OK);
        if (mats[i].steps != 0)
            quantize(&coo, mats[i].steps);
        snprintf(label, sizeof label, "%s n=%lld (values /%g)", spmv_gen_kind_name(mats[i].spec.kind),
                 (long long)mats[i].spec.n, mats[i].steps);
        for (int d = 0; d < 2; d++) {
            failures += check_conversions(label, &coo, (spmv_dtype)d);
            failures += check_kernels(label, &coo, (spmv_dtype)d);
        }
        spmv_coo_free(&coo);
    }
    { /* every full PSELL slice diagonal (0 bytes of indices), 27 slots: groups of 8 and the rest;
       * then its values made uniform (one a slot: slot k of slice s holds 1 + (27s + k)/3, so
       * U16, or RAW past 65 536 slots) */
        spmv_coo coo;
        tu_diagonal_coo(&TG.rng, TG.quick ? 1000 : 100000, 27, 3000, SPMV_FLOAT64, &coo);
        for (int pass = 0; pass < 2; pass++) {
            const char *label = pass ? "diagonal band, uniform values" : "diagonal band";
            for (int64_t k = 0, at = 0; pass && k < coo.nnz; k++, at++) {
                if (k > 0 && coo.row[k] != coo.row[k - 1])
                    at = 0;
                ((double *)coo.val)[k] = 1.0 + (double)(coo.row[k] / SPMV_PSELL_C * 27 + at) / 3.0;
            }
            for (int d = 0; d < 2; d++) {
                failures += check_conversions(label, &coo, (spmv_dtype)d);
                failures += check_kernels(label, &coo, (spmv_dtype)d);
            }
        }
        spmv_coo_free(&coo);
    }
    print_tallies("packed matrices");
    print_message("# values seen: raw %d const %d u8 %d u16 %d f32 %d; PCSR columns 1/2/4 bytes %d/%d/%d; PSELL slices "
                  "0/1/2/4 bytes %d/%d/%d/%d, uniform %d\n",
                  seen.vcode[SPMV_VCODE_RAW], seen.vcode[SPMV_VCODE_CONST], seen.vcode[SPMV_VCODE_U8],
                  seen.vcode[SPMV_VCODE_U16], seen.vcode[SPMV_VCODE_F32], seen.pcsr_idx[1], seen.pcsr_idx[2], seen.pcsr_idx[4],
                  seen.psell_idx[0], seen.psell_idx[1], seen.psell_idx[2], seen.psell_idx[4], seen.psell_uniform);
    assert_true(seen.psell_idx[0]); /* the diagonal band's, quick or not */
    assert_true(seen.psell_uniform > 0); /* 2-D Poisson's interior, quick or not */
    if (!TG.quick) { /* the small quick matrices span less */
        for (int m = 0; m < SPMV_VCODE_COUNT; m++)
            assert_true(seen.vcode[m] > 0);
        assert_true(seen.pcsr_idx[1] && seen.pcsr_idx[2] && seen.pcsr_idx[4]);
        assert_true(seen.psell_idx[1] && seen.psell_idx[2] && seen.psell_idx[4]);
    }
    assert_int_equal(failures, 0);
}

/* gpu.psell's slice patterns (docs/kernels.md "Slice patterns"): where
 * diagonal uniform slices share their offsets and values (2-D and 3-D
 * Poisson and the 27-point stencil, sides with interior slices) the device
 * finds patterns that at least half the host's diagonal slices follow (at
 * most all of them), and the product with them (`patterns` 1) equals the
 * one without (2) bit for bit and the reference; a random graph has no
 * diagonal slice, a band of distinct values no uniform one: neither gets
 * a pattern. Both dtypes. */
static int pattern_case(const char *label, const spmv_coo *coo, spmv_dtype dt, bool want)
{
    struct problem pb;
    spmv_gpu_matrix *gm = NULL;
    spmv_csr csr;
    spmv_psell hp;
    spmv_error err;
    spmv_stats st;
    spmv_format_limits lim = spmv_format_limits_default();
    const spmv_kernel *k = spmv_kernel_find("gpu.psell");
    int failures = 0;
    int64_t diag = 0;
    problem_make(coo, dt, &pb);
    assert_int_equal(spmv_coo_to_csr(coo, dt, &csr, &err), SPMV_OK);
    assert_int_equal(spmv_csr_to_psell(&csr, &lim, &hp, &err), SPMV_OK);
    for (int32_t s = 0; s < hp.nslices; s++)
        diag += hp.idx_bytes[s] == 0 && hp.slot_off[s + 1] > hp.slot_off[s] && (int64_t)(s + 1) * SPMV_PSELL_C <= coo->rows;
    void *y1 = tu_vector_alloc(dt, coo->rows), *y2 = tu_vector_alloc(dt, coo->rows);
    size_t yb = (size_t)coo->rows * spmv_dtype_size(dt);
    assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, coo, dt, SPMV_FMT_CSR, 32, &gm, NULL, &err), SPMV_OK);
    spmv_params p = {{0}};
    tu_poison(y1, dt, coo->rows);
    int rc = spmv_gpu_run(TG.ctx, k, gm, &p, pb.x, y1, 1, 2, &st, &err);
    int32_t npat = -1;
    int64_t covered = -1;
    spmv_gpu_matrix_psell_patterns(gm, &npat, &covered);
    /* the bytes a run counts (its GB/s) are the PSELL's allocations, its patterns' included, plus x and y */
    spmv_gpu_usage u;
    spmv_gpu_matrix_usage(gm, &u);
    int64_t counted = rc ? 0 : st.bytes - ((int64_t)coo->rows + coo->cols) * (int64_t)spmv_dtype_size(dt);
    if (!rc && counted != (int64_t)u.bytes[__builtin_ctz(SPMV_FMT_PSELL)]) {
        print_message("# FAIL %s %s: a run counts %lld PSELL bytes, its allocations hold %zu (%d patterns)\n", label,
                      spmv_dtype_name(dt), (long long)counted, u.bytes[__builtin_ctz(SPMV_FMT_PSELL)], npat);
        failures++;
    }
    p.v[SPMV_PARAM_PATTERNS] = 2;
    tu_poison(y2, dt, coo->rows);
    int rc2 = rc ? rc : spmv_gpu_run(TG.ctx, k, gm, &p, pb.x, y2, 1, 2, &st, &err);
    double bound = (dt == SPMV_FLOAT64 ? F64_BOUND : F32_BOUND) * fmax(1.0, sqrt(pb.max_row / 100.0));
    double e = rc2 ? INFINITY : scaled_err(&pb, y1, coo->rows);
    print_message("# patterns %s %s: %d, %lld of %lld diagonal slices (%d slices); error %.3g\n", label,
                  spmv_dtype_name(dt), npat, (long long)covered, (long long)diag, hp.nslices, e);
    if (rc || rc2) {
        print_message("# FAIL gpu.psell on %s: %s\n", label, err.message);
        failures++;
    } else if (memcmp(y1, y2, yb) != 0 || !(e <= bound)) {
        print_message("# FAIL gpu.psell on %s: with patterns %s the one without, error %.3g (bound %.3g)\n", label,
                      memcmp(y1, y2, yb) ? "differs from" : "equals", e, bound);
        failures++;
    } else if (want ? npat < 1 || covered * 2 < diag || covered > diag : npat != 0 || covered != 0) {
        print_message("# FAIL %s: %d patterns, %lld slices following one (diagonal slices %lld)\n", label, npat,
                      (long long)covered, (long long)diag);
        failures++;
    }
    spmv_gpu_matrix_free(TG.ctx, gm);
    spmv_psell_free(&hp);
    spmv_csr_free(&csr);
    free(y1);
    free(y2);
    problem_free(&pb);
    return failures;
}

static void test_psell_patterns(void **state)
{
    (void)state;
    TU_NEED_GPU();
    int failures = 0;
    uint64_t seed = tu_rng_next(&TG.rng);
    /* sides of at least 66: a line's 64 interior rows hold a whole slice (none at 64, or at 34: every slice
     * holds an edge row); 128: lines a multiple of the sample's windows */
    struct {
        spmv_gen_spec spec;
        bool want;
    } mats[] = {
        {{SPMV_GEN_POISSON2D, TG.quick ? 130 : 520, 0, 0, seed}, true},
        {{SPMV_GEN_POISSON3D, TG.quick ? 66 : 98, 0, 0, seed}, true},
        /* 65 536 slices: the sample's windows of 16 slices (4 lines) each start with a boundary row */
        {{SPMV_GEN_POISSON3D, TG.quick ? 66 : 128, 0, 0, seed}, true},
        {{SPMV_GEN_STENCIL27, 66, 0, 0, seed}, true},
        {{SPMV_GEN_GRAPH_UNIFORM, TG.quick ? 5000 : 200000, 8, 0, seed}, false},
    };
    print_message("# slice patterns: seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        spmv_coo coo;
        spmv_error err;
        assert_int_equal(spmv_gen(&mats[i].spec, &coo, &err), SPMV_OK);
        for (int d = 0; d < 2; d++)
            failures += pattern_case(spmv_gen_kind_name(mats[i].spec.kind), &coo, (spmv_dtype)d, mats[i].want);
        spmv_coo_free(&coo);
    }
    spmv_coo band;
    tu_diagonal_coo(&TG.rng, TG.quick ? 3000 : 300000, 9, 500, SPMV_FLOAT64, &band);
    for (int d = 0; d < 2; d++)
        failures += pattern_case("diagonal band, distinct values", &band, (spmv_dtype)d, false);
    spmv_coo_free(&band);
    assert_int_equal(failures, 0);
}

/* A shuffled COO where every third entry is split into two halves (exact
 * in both dtypes) must come out of the device sorted and summed. */
/* gpu.spsell on exactly symmetric matrices (test_cpu_kernels.c's: test
 * shapes made symmetric, stencils with every pair's value distinct as a
 * finite-volume matrix, the generator's values, a palette): every GPU
 * kernel against the reference (poisoned y, check_kernels), and the
 * SPSELL the device holds equal to the host's (engine/packed.c) byte for
 * byte, with mirrored slices (their source tables, which gpu.spsell reads
 * for every lower value, among the index bytes). */
static bool same_spsell(const char *what, const spmv_spsell *h, const spmv_spsell *d)
{
    return tu_same_psell(what, &h->p, &d->p) && h->nmirrored == d->nmirrored &&
           tu_same_bytes(what, h->mirror, d->mirror, (size_t)h->p.nslices);
}

static int check_spsell_upload(const char *label, const spmv_coo *coo, spmv_dtype dt, int32_t *mirrored)
{
    spmv_csr hcsr;
    spmv_spsell hs;
    spmv_matrix dm;
    spmv_gpu_matrix *gm = NULL;
    spmv_error err;
    spmv_format_limits lim = spmv_format_limits_default();
    int failures = 0;
    if (spmv_coo_to_csr(coo, dt, &hcsr, &err) || spmv_csr_to_spsell(&hcsr, &lim, &hs, &err))
        fail_msg("host SPSELL of %s: %s", label, err.message);
    *mirrored = hs.nmirrored;
    if (spmv_gpu_matrix_upload_csr(TG.ctx, &hcsr, dt, SPMV_FMT_CSR | SPMV_FMT_SPSELL, 32, &gm, NULL, &err) !=
        SPMV_OK)
        fail_msg("upload of %s with SPSELL: %s", label, err.message);
    if (spmv_gpu_matrix_download(TG.ctx, gm, SPMV_FMT_SPSELL, &dm, &err) != SPMV_OK) {
        print_message("# FAIL download SPSELL of %s: %s\n", label, err.message);
        failures++;
    } else {
        failures += !same_spsell(label, &hs, &dm.spsell);
        spmv_matrix_free(&dm);
    }
    spmv_gpu_matrix_free(TG.ctx, gm);
    spmv_spsell_free(&hs);
    spmv_csr_free(&hcsr);
    return failures;
}

static void test_spsell(void **state)
{
    (void)state;
    TU_NEED_GPU();
    static const struct {
        spmv_gen_kind kind;
        int64_t n;
        int32_t distinct; /* -1: the generator's values; 0: every pair distinct */
    } gens[] = {{SPMV_GEN_POISSON3D, 50, 0},  {SPMV_GEN_POISSON3D, 50, -1}, {SPMV_GEN_POISSON3D, 37, 100},
                {SPMV_GEN_POISSON2D, 90, 0},  {SPMV_GEN_STENCIL27, 45, 0}};
    int failures = 0;
    for (int i = 0; i < TU_SHAPE_COUNT; i++) {
        spmv_coo pat, coo;
        char label[96];
        int32_t mirrored;
        tu_random_coo(&TG.rng, (tu_shape)i, 300, SPMV_FLOAT64, &pat);
        tu_symmetric_coo(&TG.rng, &pat, i % 2 ? 50 : 0, &coo);
        snprintf(label, sizeof label, "symmetric %s (%d x %d)", tu_shape_name((tu_shape)i), coo.rows, coo.cols);
        for (int d = 0; d < 2; d++)
            failures += check_kernels(label, &coo, (spmv_dtype)d) + check_spsell_upload(label, &coo, (spmv_dtype)d,
                                                                                         &mirrored);
        spmv_coo_free(&pat);
        spmv_coo_free(&coo);
    }
    for (size_t c = 0; c < sizeof gens / sizeof gens[0]; c++) {
        spmv_gen_spec g = {gens[c].kind, gens[c].n, 0, 0, 1};
        spmv_coo pat, coo;
        char label[96];
        int32_t mirrored = 0;
        spmv_gen_defaults(&g, false, false, false);
        assert_int_equal(spmv_gen(&g, &pat, NULL), SPMV_OK);
        if (gens[c].distinct >= 0)
            tu_symmetric_coo(&TG.rng, &pat, gens[c].distinct, &coo);
        else
            assert_int_equal(spmv_coo_copy(&pat, &coo, NULL), SPMV_OK);
        snprintf(label, sizeof label, "symmetric %s n=%lld values %d", spmv_gen_kind_name(gens[c].kind),
                 (long long)gens[c].n, gens[c].distinct);
        for (int d = 0; d < 2; d++) {
            failures += check_kernels(label, &coo, (spmv_dtype)d) + check_spsell_upload(label, &coo, (spmv_dtype)d,
                                                                                         &mirrored);
            if (mirrored == 0) {
                print_message("# FAIL %s: no slice mirrored\n", label);
                failures++;
            }
        }
        spmv_coo_free(&pat);
        spmv_coo_free(&coo);
    }
    print_tallies("symmetric matrices");
    assert_int_equal(failures, 0);
}

static void test_unsorted_duplicates(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_coo coo, messy;
    spmv_error err;
    tu_random_coo(&TG.rng, TU_SHAPE_RANDOM, TG.quick ? 200 : 2000, SPMV_FLOAT64, &coo);
    int64_t extra = (coo.nnz + 2) / 3;
    assert_int_equal(spmv_coo_alloc(&messy, coo.rows, coo.cols, coo.nnz + extra, SPMV_FLOAT64, &err), SPMV_OK);
    const double *v = coo.val;
    double *mv = messy.val;
    int64_t w = 0;
    for (int64_t k = 0; k < coo.nnz; k++) {
        bool split = k % 3 == 0;
        messy.row[w] = coo.row[k];
        messy.col[w] = coo.col[k];
        mv[w++] = split ? v[k] * 0.5 : v[k];
        if (split) {
            messy.row[w] = coo.row[k];
            messy.col[w] = coo.col[k];
            mv[w++] = v[k] * 0.5;
        }
    }
    assert_int_equal(w, messy.nnz);
    for (int64_t k = messy.nnz - 1; k > 0; k--) {
        int64_t j = tu_rng_range(&TG.rng, 0, k);
        int32_t tr = messy.row[k], tc = messy.col[k];
        double tv = mv[k];
        messy.row[k] = messy.row[j];
        messy.col[k] = messy.col[j];
        mv[k] = mv[j];
        messy.row[j] = tr;
        messy.col[j] = tc;
        mv[j] = tv;
    }
    for (int d = 0; d < 2; d++) {
        spmv_csr want;
        spmv_matrix got;
        spmv_gpu_matrix *gm = NULL;
        assert_int_equal(spmv_coo_to_csr(&coo, (spmv_dtype)d, &want, &err), SPMV_OK);
        if (spmv_gpu_matrix_upload(TG.ctx, &messy, (spmv_dtype)d, SPMV_FMT_CSR, 0, &gm, NULL, &err) != SPMV_OK)
            fail_msg("upload of the shuffled COO: %s", err.message);
        assert_int_equal(spmv_gpu_matrix_download(TG.ctx, gm, SPMV_FMT_CSR, &got, &err), SPMV_OK);
        assert_true(same_csr("shuffled COO with duplicates", &want, &got.csr));
        spmv_matrix_free(&got);
        spmv_csr_free(&want);
        spmv_gpu_matrix_free(TG.ctx, gm);
    }
    spmv_coo_free(&messy);
    spmv_coo_free(&coo);
}

/* ------------------------------------------------------- memory, errors */

static void test_info(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_gpu_info info;
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &info), SPMV_OK);
    print_message("# GPU 0: %s, compute capability %d.%d, %d SMs, %zu MiB total, %zu MiB free\n", info.name,
                  info.cc_major, info.cc_minor, info.sm_count, info.mem_total >> 20, info.mem_free >> 20);
    assert_true(info.name[0] != '\0');
    assert_true(info.mem_total > 0 && info.mem_free <= info.mem_total);
    assert_true(info.sm_count > 0);
}

/* A reserve larger than the device refuses every upload and leaves no
 * bytes held; a reserve that lets the CSR fit but not an HLL with a row of
 * 100 000 entries fails mid-upload and still leaves nothing. */
static void test_memory_refused(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_gpu_ctx *c = NULL;
    spmv_gpu_info info;
    spmv_gpu_matrix *gm = NULL;
    spmv_error err;
    spmv_coo coo;
    tu_gen g = {.rows = 2000, .cols = DENSE_LEN, .mean_per_row = 4, .dense_rows = 1, .dense_len = DENSE_LEN};
    tu_random_coo_gen(&TG.rng, &g, SPMV_FLOAT64, &coo);
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &info), SPMV_OK);

    assert_int_equal(spmv_gpu_ctx_new(0, info.mem_total, &c, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload(c, &coo, SPMV_FLOAT64, SPMV_FMT_CSR, 0, &gm, NULL, &err),
                     SPMV_ERR_DEVICE_MEMORY);
    print_message("# refused as expected: %s\n", err.message);
    assert_null(gm);
    spmv_csr csr;
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &csr, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload_csr(c, &csr, SPMV_FLOAT64, SPMV_FMT_CSR, 0, &gm, NULL, &err),
                     SPMV_ERR_DEVICE_MEMORY);
    print_message("# refused as expected from the CSR: %s\n", err.message);
    assert_null(gm);
    spmv_csr_free(&csr);
    assert_int_equal(spmv_gpu_ctx_info(c, &info), SPMV_OK);
    assert_int_equal(info.mem_used_by_spmvd, 0);
    spmv_gpu_ctx_free(c);

    /* HLL slices of 1024 rows x 100 000 x 12 bytes = 1.2 GB; leave 256 MiB:
     * the CSR fits, the HLL does not, and nothing stays behind. (An ELL
     * that does not fit is skipped instead: test_ell_skipped.) */
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &info), SPMV_OK);
    assert_int_equal(spmv_gpu_ctx_new(0, info.mem_free - ((size_t)256 << 20), &c, &err), SPMV_OK);
    spmv_format_limits unbounded = {.max_padding = 0}; /* memory, not the padding rule, refuses here */
    assert_int_equal(spmv_gpu_ctx_set_limits(c, &unbounded), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload(c, &coo, SPMV_FLOAT64, SPMV_FMT_CSR | SPMV_FMT_HLL, 1024, &gm, NULL, &err),
                     SPMV_ERR_DEVICE_MEMORY);
    print_message("# refused mid-upload as expected: %s\n", err.message);
    assert_null(gm);
    assert_int_equal(spmv_gpu_ctx_info(c, &info), SPMV_OK);
    assert_int_equal(info.mem_used_by_spmvd, 0);
    /* The CSR alone fits, and freeing it gives every byte back. */
    assert_int_equal(spmv_gpu_matrix_upload(c, &coo, SPMV_FLOAT64, SPMV_FMT_CSR, 0, &gm, NULL, &err), SPMV_OK);
    assert_true(spmv_gpu_matrix_bytes(gm) > 0);
    assert_int_equal(spmv_gpu_ctx_info(c, &info), SPMV_OK);
    assert_int_equal(info.mem_used_by_spmvd, spmv_gpu_matrix_bytes(gm));
    spmv_gpu_matrix_free(c, gm);
    assert_int_equal(spmv_gpu_ctx_info(c, &info), SPMV_OK);
    assert_int_equal(info.mem_used_by_spmvd, 0);
    spmv_gpu_ctx_free(c);
    spmv_coo_free(&coo);
}

static void test_upload_stats(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_coo coo;
    spmv_gpu_matrix *gm = NULL;
    spmv_gpu_upload_stats st;
    spmv_error err;
    tu_random_coo(&TG.rng, TU_SHAPE_POWER_LAW, 5000, SPMV_FLOAT64, &coo);
    spmv_format_limits unbounded = {.max_padding = 0}, def = spmv_format_limits_default(); /* a pinned HLL, whatever it pads */
    assert_int_equal(spmv_gpu_ctx_set_limits(TG.ctx, &unbounded), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, &coo, SPMV_FLOAT32, SPMV_FMT_CSR | SPMV_FMT_HLL, 64, &gm, &st,
                                            &err),
                     SPMV_OK);
    assert_int_equal(spmv_gpu_ctx_set_limits(TG.ctx, &def), SPMV_OK);
    assert_int_equal(st.formats, SPMV_FMT_CSR | SPMV_FMT_HLL);
    assert_int_equal(st.bytes[1], ((size_t)coo.rows + 1) * 4 + (size_t)coo.nnz * 8);
    assert_true(st.bytes[3] > 0 && st.padding[3] >= 1.0);
    assert_int_equal(st.bytes[0], 0);
    assert_true(st.transfer_ms >= 0 && st.convert_ms >= 0);
    print_message("# upload %lld nnz: transfer %.3f ms, convert %.3f ms, HLL padding %.3f\n", (long long)coo.nnz,
                  st.transfer_ms, st.convert_ms, st.padding[3]);
    spmv_gpu_matrix_free(TG.ctx, gm);
    /* the same from the host CSR in float32: the same bytes per format */
    spmv_gpu_upload_stats cs;
    spmv_csr csr;
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT32, &csr, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_ctx_set_limits(TG.ctx, &unbounded), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload_csr(TG.ctx, &csr, SPMV_FLOAT32, SPMV_FMT_CSR | SPMV_FMT_HLL, 64, &gm, &cs,
                                                &err),
                     SPMV_OK);
    assert_int_equal(spmv_gpu_ctx_set_limits(TG.ctx, &def), SPMV_OK);
    assert_int_equal(cs.formats, st.formats);
    for (int i = 0; i < SPMV_FORMAT_COUNT; i++)
        assert_int_equal(cs.bytes[i], st.bytes[i]);
    print_message("# upload from the CSR: transfer %.3f ms, convert %.3f ms\n", cs.transfer_ms, cs.convert_ms);
    spmv_gpu_matrix_free(TG.ctx, gm);
    spmv_csr_free(&csr);
    spmv_coo_free(&coo);
}

/* The padding rule on the device: a matrix with one full row and a
 * power-law matrix. Each padded format's kernels run or answer
 * SPMV_ERR_LIMIT exactly as the host's plan of that format decides, a
 * refusal allocates nothing (the bytes held do not move), a pinned format
 * the rule refuses is skipped at upload, and the other kernels still
 * answer right. */
static void test_padding_rule(void **state)
{
    (void)state;
    TU_NEED_GPU();
    static const char *const padded[] = {"gpu.ell", "gpu.hll", "cusparse.sell", "gpu.hyb", "gpu.coo.atomic"};
    for (int shape = 0; shape < 2; shape++) {
        spmv_coo coo;
        spmv_gpu_matrix *gm = NULL;
        spmv_gpu_upload_stats us;
        spmv_gpu_info before, after;
        spmv_error err;
        struct problem pb;
        const char *label = shape ? "power-law" : "one full row";
        if (shape == 0) {
            tu_gen g = {.rows = 20000, .cols = 20000, .mean_per_row = 3, .dense_rows = 1, .dense_len = 20000};
            tu_random_coo_gen(&TG.rng, &g, SPMV_FLOAT64, &coo);
        } else {
            tu_random_coo(&TG.rng, TU_SHAPE_POWER_LAW, 200000, SPMV_FLOAT64, &coo);
        }
        problem_make(&coo, SPMV_FLOAT64, &pb);
        void *y = tu_vector_alloc(SPMV_FLOAT64, coo.rows);
        assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &before), SPMV_OK);
        fx.base_used = before.mem_used_by_spmvd - before.mem_scratch;
        if (spmv_gpu_matrix_upload(TG.ctx, &coo, SPMV_FLOAT64, SPMV_FMT_ALL, 32, &gm, &us, &err) != SPMV_OK)
            fail_msg("upload: %s", err.message);
        int refusals = 0;
        spmv_params none = {{0}};
        /* a first product makes the x and y buffers: a refusal must add nothing after that */
        assert_true(run_one(label, spmv_kernel_find("gpu.csr.scalar"), gm, &coo, &pb, &none, y));
        for (size_t i = 0; i < sizeof padded / sizeof padded[0]; i++) {
            const spmv_kernel *k = spmv_kernel_find(padded[i]);
            bool refuse = host_rule_refuses(&pb, k, &none);
            assert_int_equal(!(us.formats & k->format), refuse); /* pinned, skipped at upload iff refused */
            size_t held = spmv_gpu_matrix_bytes(gm);
            int rc = spmv_gpu_run(TG.ctx, k, gm, NULL, pb.x, y, 0, 1, NULL, &err);
            if (refuse) {
                refusals++;
                assert_int_equal(rc, SPMV_ERR_LIMIT);
                assert_non_null(strstr(err.message, "max_padding"));
                assert_int_equal(spmv_gpu_matrix_bytes(gm), held);
                print_message("# %s, %s refused as planned: %s\n", label, k->name, err.message);
            } else {
                assert_true(run_one(label, k, gm, &coo, &pb, &none, y));
            }
        }
        assert_true(refusals > 0); /* both shapes pad ELL far past 3 slots per non-zero */
        assert_true(run_one(label, spmv_kernel_find("gpu.csr.vector"), gm, &coo, &pb, &none, y));
        spmv_gpu_matrix_free(TG.ctx, gm);
        assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &after), SPMV_OK);
        assert_int_equal(after.mem_used_by_spmvd - after.mem_scratch, before.mem_used_by_spmvd - before.mem_scratch);
        free(y);
        problem_free(&pb);
        spmv_coo_free(&coo);
    }
}

/* Formats on first use, evicted least recently used first when the
 * device is short: a reserve leaves room for two CSRs and one ELL, so
 * building B's ELL evicts A's; A's ELL is rebuilt on its next use and
 * answers right; a pinned format is never evicted (a build that would need
 * it gone fails with SPMV_ERR_DEVICE_MEMORY instead); the transpose counts
 * in its matrix's bytes; every byte comes back. */
static void test_lazy_eviction(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_gpu_ctx *c = NULL;
    spmv_gpu_info info, start;
    spmv_gpu_matrix *a = NULL, *b = NULL;
    spmv_gpu_usage ua, ub;
    spmv_error err;
    spmv_coo coo;
    struct problem pb;
    tu_gen g = {.rows = 1000000, .cols = 1000000, .mean_per_row = 8};
    tu_random_coo_gen(&TG.rng, &g, SPMV_FLOAT64, &coo);
    problem_make(&coo, SPMV_FLOAT64, &pb);
    void *y = tu_vector_alloc(SPMV_FLOAT64, coo.rows);
    spmv_params none = {{0}};
    const spmv_kernel *ell = spmv_kernel_find("gpu.ell"), *csr = spmv_kernel_find("gpu.csr.vector");

    assert_int_equal(spmv_gpu_ctx_new(0, 0, &c, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload(c, &coo, SPMV_FLOAT64, SPMV_FMT_CSR, 0, &a, NULL, &err), SPMV_OK);
    spmv_gpu_matrix_usage(a, &ua);
    assert_int_equal(ua.formats, SPMV_FMT_CSR);
    assert_true(ua.total == ua.bytes[1] + ua.other && ua.transpose == 0);
    assert_int_equal(spmv_gpu_run(c, ell, a, &none, pb.x, y, 0, 1, NULL, &err), SPMV_OK);
    spmv_gpu_matrix_usage(a, &ua);
    size_t ell_bytes = ua.bytes[2];
    assert_true(ell_bytes > 0 && (ua.formats & SPMV_FMT_ELL));
    spmv_gpu_matrix_free(c, a);
    spmv_gpu_ctx_free(c);

    /* room for A (CSR + ELL + buffers), B's CSR and buffers, and half an ELL more */
    assert_int_equal(spmv_gpu_ctx_new(0, 0, &c, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_ctx_info(c, &info), SPMV_OK);
    size_t need = 2 * (ua.total - ell_bytes) + ell_bytes + ell_bytes / 2 + ((size_t)64 << 20);
    spmv_gpu_ctx_free(c);
    assert_int_equal(spmv_gpu_ctx_new(0, info.mem_free - need, &c, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_ctx_info(c, &start), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload(c, &coo, SPMV_FLOAT64, SPMV_FMT_CSR, 0, &a, NULL, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload(c, &coo, SPMV_FLOAT64, SPMV_FMT_CSR, 0, &b, NULL, &err), SPMV_OK);
    /* A's ELL, then B's: the second needs the first gone */
    pb.coo = &coo;
    assert_int_equal(spmv_gpu_run(c, ell, a, &none, pb.x, y, 0, 1, NULL, &err), SPMV_OK);
    tu_poison(y, SPMV_FLOAT64, coo.rows);
    if (spmv_gpu_run(c, ell, b, &none, pb.x, y, 0, 1, NULL, &err) != SPMV_OK)
        fail_msg("B's ELL did not evict A's: %s", err.message);
    assert_true(scaled_err(&pb, y, coo.rows) <= F64_BOUND);
    spmv_gpu_matrix_usage(a, &ua);
    spmv_gpu_matrix_usage(b, &ub);
    assert_false(ua.formats & SPMV_FMT_ELL);
    assert_int_equal(ua.bytes[2], 0);
    assert_true(ub.formats & SPMV_FMT_ELL);
    assert_int_equal(spmv_gpu_ctx_info(c, &info), SPMV_OK);
    assert_true(info.evictions >= 1);
    print_message("# %llu eviction(s): B's ELL of %zu bytes took the room of A's\n",
                  (unsigned long long)info.evictions, ell_bytes);
    /* A's ELL again: rebuilt (evicting B's), and right */
    tu_poison(y, SPMV_FLOAT64, coo.rows);
    assert_int_equal(spmv_gpu_run(c, ell, a, &none, pb.x, y, 0, 1, NULL, &err), SPMV_OK);
    assert_true(scaled_err(&pb, y, coo.rows) <= F64_BOUND);
    assert_int_equal(spmv_gpu_ctx_info(c, &info), SPMV_OK);
    assert_int_equal(info.mem_used_by_spmvd,
                     start.mem_used_by_spmvd + spmv_gpu_matrix_bytes(a) + spmv_gpu_matrix_bytes(b) +
                         (info.mem_scratch - start.mem_scratch));
    spmv_gpu_matrix_free(c, b);

    /* pinned: B uploaded with its ELL pinned; A's ELL (not pinned) is what goes
     * when B needs room, and a second pinned ELL does not fit at all */
    assert_int_equal(spmv_gpu_matrix_upload(c, &coo, SPMV_FLOAT64, SPMV_FMT_CSR | SPMV_FMT_ELL, 0, &b, NULL, &err),
                     SPMV_OK);
    spmv_gpu_matrix_usage(a, &ua);
    spmv_gpu_matrix_usage(b, &ub);
    assert_false(ua.formats & SPMV_FMT_ELL);
    assert_true(ub.formats & SPMV_FMT_ELL);
    spmv_gpu_matrix *third = NULL;
    assert_int_equal(spmv_gpu_matrix_upload(c, &coo, SPMV_FLOAT64, SPMV_FMT_CSR | SPMV_FMT_ELL, 0, &third, NULL, &err),
                     SPMV_ERR_DEVICE_MEMORY);
    assert_null(third);
    print_message("# a pinned ELL is never evicted: %s\n", err.message);
    spmv_gpu_matrix_usage(b, &ub);
    assert_true(ub.formats & SPMV_FMT_ELL);
    /* trim keeps pinned formats and what it is told to keep */
    assert_int_equal(spmv_gpu_run(c, csr, a, &none, pb.x, y, 0, 1, NULL, &err), SPMV_OK);
    spmv_gpu_matrix_trim(c, b, 0);
    spmv_gpu_matrix_usage(b, &ub);
    assert_true(ub.formats & SPMV_FMT_ELL);
    spmv_gpu_matrix_free(c, b);
    /* the transpose counts in its matrix */
    spmv_gpu_matrix *t = NULL;
    if (spmv_gpu_matrix_transpose(c, a, &t, &err) != SPMV_OK)
        fail_msg("transpose: %s", err.message);
    spmv_gpu_matrix_usage(a, &ua);
    assert_true(ua.transpose > 0 && ua.transpose == spmv_gpu_matrix_bytes(t));
    assert_int_equal(ua.total, spmv_gpu_matrix_bytes(a));
    spmv_gpu_matrix_free(c, a);
    assert_int_equal(spmv_gpu_ctx_info(c, &info), SPMV_OK);
    assert_int_equal(info.mem_used_by_spmvd - info.mem_scratch, start.mem_used_by_spmvd - start.mem_scratch);
    spmv_gpu_ctx_free(c);
    free(y);
    problem_free(&pb);
    spmv_coo_free(&coo);
}

static void test_bad_requests(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_coo coo;
    spmv_gpu_matrix *gm = NULL;
    spmv_error err;
    tu_random_coo(&TG.rng, TU_SHAPE_RANDOM, 100, SPMV_FLOAT64, &coo);
    assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, &coo, SPMV_FLOAT64, SPMV_FMT_CSR, 0, &gm, NULL, &err), SPMV_OK);
    void *x = tu_vector_alloc(SPMV_FLOAT64, coo.cols), *y = tu_vector_alloc(SPMV_FLOAT64, coo.rows);
    tu_random_vector(&TG.rng, SPMV_FLOAT64, coo.cols, x);
    spmv_params p = {{0}};
    p.v[SPMV_PARAM_BLOCK_SIZE] = 33;
    assert_int_equal(spmv_gpu_run(TG.ctx, spmv_kernel_find("gpu.csr.scalar"), gm, &p, x, y, 0, 1, NULL, &err),
                     SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_run(TG.ctx, spmv_kernel_find("cpu.csr.serial"), gm, NULL, x, y, 0, 1, NULL, &err),
                     SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_run(TG.ctx, spmv_kernel_find("gpu.csr.scalar"), gm, NULL, x, y, 0, 0, NULL, &err),
                     SPMV_ERR_INVALID);
    /* An index outside the shape is refused, and nothing stays on the device. */
    spmv_gpu_info before, after;
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &before), SPMV_OK);
    coo.col[coo.nnz / 2] = coo.cols + 5;
    spmv_gpu_matrix *bad = NULL;
    assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, &coo, SPMV_FLOAT64, SPMV_FMT_ALL, 0, &bad, NULL, &err),
                     SPMV_ERR_INVALID);
    assert_null(bad);
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &after), SPMV_OK);
    assert_int_equal(before.mem_used_by_spmvd, after.mem_used_by_spmvd);
    /* A host CSR whose row pointers decrease, or do not end at nnz, is
     * refused before anything is allocated. */
    coo.col[coo.nnz / 2] = 0;
    spmv_coo_free(&coo);
    tu_random_coo(&TG.rng, TU_SHAPE_RANDOM, 100, SPMV_FLOAT64, &coo);
    spmv_csr csr;
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &csr, &err), SPMV_OK);
    int32_t keep = csr.row_ptr[csr.rows / 2];
    csr.row_ptr[csr.rows / 2] = csr.row_ptr[csr.rows / 2 + 1] + 1;
    assert_int_equal(spmv_gpu_matrix_upload_csr(TG.ctx, &csr, SPMV_FLOAT64, SPMV_FMT_ALL, 0, &bad, NULL, &err),
                     SPMV_ERR_INVALID);
    print_message("# refused: %s\n", err.message);
    csr.row_ptr[csr.rows / 2] = keep;
    csr.row_ptr[csr.rows]--;
    assert_int_equal(spmv_gpu_matrix_upload_csr(TG.ctx, &csr, SPMV_FLOAT64, SPMV_FMT_ALL, 0, &bad, NULL, &err),
                     SPMV_ERR_INVALID);
    print_message("# refused: %s\n", err.message);
    assert_null(bad);
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &after), SPMV_OK);
    assert_int_equal(before.mem_used_by_spmvd, after.mem_used_by_spmvd);
    csr.row_ptr[csr.rows]++;
    spmv_csr_free(&csr);
    free(x);
    free(y);
    spmv_gpu_matrix_free(TG.ctx, gm);
    spmv_coo_free(&coo);
}

/* New values on the same pattern (PUT .../values): every format built
 * before (ELL, the transpose, cuSPARSE's analyses) goes, the pinned HLL is
 * built again, and every kernel then multiplies the new values. */
/* gpu.pbsr against cpu.csr.serial on random matrices of complete b x b
 * blocks for each b (values raw, u8 and const; block columns of 1 and 2
 * bytes and wide block rows; empty block rows), both dtypes, threads
 * auto/1/4/32 and block_size 32/1024, y poisoned first. x holds an Inf
 * at a column some rows have no entry in: those rows must stay finite and
 * within the bound, the others infinite as the reference's. The device's
 * PBSR, downloaded, is the host's (the same COO, b, width and mode).
 * Then a matrix without blocks: SPMV_ERR_UNSUPPORTED saying why, nothing
 * allocated, the same answer again (remembered), skipped at upload. */
/* gpu.pbsr's y (dtype pb->dt) against ref (float64, x with an Inf):
 * rows whose reference is finite within the bound, the others the same
 * infinity (or NaN). */
static bool pbsr_close(const char *label, const struct problem *pb, int32_t threads, int32_t block, const void *y,
                       const double *ref)
{
    int32_t rows = pb->coo->rows, bad = -1;
    double *y64 = tu_vector_alloc(SPMV_FLOAT64, rows), worst = 0;
    double bound = (pb->dt == SPMV_FLOAT64 ? F64_BOUND : F32_BOUND) * fmax(1.0, sqrt(pb->max_row / 100.0));
    tu_vector_convert(y, pb->dt, y64, SPMV_FLOAT64, rows);
    for (int32_t i = 0; i < rows; i++) {
        if (!isfinite(ref[i])) {
            if (y64[i] != ref[i] && !(isnan(ref[i]) && isnan(y64[i])))
                bad = i;
        } else if (!isfinite(y64[i])) {
            bad = i;
        } else {
            worst = fmax(worst, fabs(y64[i] - ref[i]) / fmax(pb->scale, 1e-300));
        }
    }
    bool ok = bad < 0 && worst <= bound;
    if (!ok)
        print_message("# FAIL gpu.pbsr %s threads=%d block_size=%d on %s: row %d %.17g (reference %.17g), error %.3g > "
                      "%.3g (SPMV_SEED=%llu)\n", spmv_dtype_name(pb->dt), threads, block, label, bad,
                      bad >= 0 ? y64[bad] : 0.0, bad >= 0 ? ref[bad] : 0.0, worst, bound,
                      (unsigned long long)tu_seed());
    free(y64);
    return ok;
}

/* New values on the same pattern (spmv_gpu_matrix_set_values drops the
 * PBSR; the next gpu.pbsr builds it again from the new CSR): y right. */
static bool pbsr_new_values(const char *label, spmv_gpu_matrix *gm, const struct problem *pb, spmv_csr *c64,
                            const double *x64, double *ref)
{
    spmv_error err;
    void *val = tu_vector_alloc(pb->dt, c64->nnz), *y = tu_vector_alloc(pb->dt, c64->rows);
    tu_random_vector(&TG.rng, pb->dt, c64->nnz, val);
    tu_vector_convert(val, pb->dt, c64->val, SPMV_FLOAT64, c64->nnz);
    spmv_reference(c64, x64, ref);
    bool ok = spmv_gpu_matrix_set_values(TG.ctx, gm, val, &err) == SPMV_OK;
    tu_poison(y, pb->dt, c64->rows);
    ok = ok && spmv_gpu_run(TG.ctx, spmv_kernel_find("gpu.pbsr"), gm, NULL, pb->x, y, 0, 1, NULL, &err) == SPMV_OK;
    if (!ok)
        print_message("# FAIL gpu.pbsr after new values on %s: %s\n", label, err.message);
    ok = ok && pbsr_close(label, pb, 0, 256, y, ref);
    free(val);
    free(y);
    return ok;
}

static int pbsr_check(const char *label, const spmv_coo *coo, spmv_dtype dt)
{
    const spmv_kernel *k = spmv_kernel_find("gpu.pbsr");
    spmv_gpu_matrix *gm = NULL;
    spmv_gpu_info before;
    spmv_error err;
    struct problem pb;
    int failures = 0;
    problem_make(coo, dt, &pb);
    int32_t inf_col = coo->col[coo->nnz - 1];
    double *x64 = tu_vector_alloc(SPMV_FLOAT64, coo->cols), *ref = tu_vector_alloc(SPMV_FLOAT64, coo->rows);
    spmv_csr csr;
    if (spmv_coo_to_csr(coo, dt, &csr, &err))
        fail_msg("%s: %s", label, err.message);
    if (dt == SPMV_FLOAT32)
        ((float *)pb.x)[inf_col] = INFINITY;
    else
        ((double *)pb.x)[inf_col] = INFINITY;
    tu_vector_convert(pb.x, dt, x64, SPMV_FLOAT64, coo->cols);
    spmv_csr c64;
    spmv_coo in_dt;
    if (spmv_coo_convert(coo, dt, &in_dt, &err) || spmv_coo_to_csr(&in_dt, SPMV_FLOAT64, &c64, &err))
        fail_msg("%s: %s", label, err.message);
    spmv_reference(&c64, x64, ref);
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &before), SPMV_OK);
    fx.base_used = before.mem_used_by_spmvd - before.mem_scratch;
    if (spmv_gpu_matrix_upload(TG.ctx, coo, dt, SPMV_FMT_CSR, 32, &gm, NULL, &err) != SPMV_OK)
        fail_msg("upload of %s: %s", label, err.message);
    static const int32_t threads[] = {0, 1, 4, 32}, blocks[] = {32, 1024};
    void *y = tu_vector_alloc(dt, coo->rows);
    for (size_t t = 0; t < 4; t++)
        for (size_t b = 0; b < 2; b++) {
            spmv_params p = {{0}};
            p.v[SPMV_PARAM_THREADS] = threads[t];
            p.v[SPMV_PARAM_BLOCK_SIZE] = blocks[b];
            tu_poison(y, dt, coo->rows);
            if (spmv_gpu_run(TG.ctx, k, gm, &p, pb.x, y, 1, 2, NULL, &err) != SPMV_OK) {
                print_message("# FAIL gpu.pbsr on %s: %s\n", label, err.message);
                failures++;
                continue;
            }
            failures += !pbsr_close(label, &pb, threads[t], blocks[b], y, ref);
            failures += !accounting_ok(label, k, gm);
        }
    /* the device's PBSR is the host's */
    spmv_matrix dm;
    spmv_pbsr hp;
    spmv_coo a, b2;
    if (spmv_gpu_matrix_download(TG.ctx, gm, SPMV_FMT_PBSR, &dm, &err) || spmv_csr_to_pbsr(&csr, NULL, &hp, &err) ||
        spmv_pbsr_to_coo(&dm.pbsr, &a, &err) || spmv_pbsr_to_coo(&hp, &b2, &err))
        fail_msg("PBSR of %s: %s", label, err.message);
    if (!tu_coo_equal(&a, &b2) || dm.pbsr.b != hp.b || dm.pbsr.idx_bytes != hp.idx_bytes || dm.pbsr.v.mode != hp.v.mode) {
        print_message("# FAIL %s: the device's PBSR differs from the host's\n", label);
        failures++;
    }
    spmv_coo_free(&a);
    spmv_coo_free(&b2);
    spmv_pbsr_free(&hp);
    spmv_matrix_free(&dm);
    failures += !pbsr_new_values(label, gm, &pb, &c64, x64, ref);
    spmv_gpu_matrix_free(TG.ctx, gm);
    spmv_csr_free(&csr);
    spmv_csr_free(&c64);
    spmv_coo_free(&in_dt);
    free(x64);
    free(ref);
    free(y);
    problem_free(&pb);
    return failures;
}

static void test_pbsr(void **state)
{
    (void)state;
    TU_NEED_GPU();
    static const int32_t bs[] = {2, 3, 4, 6};
    static const struct { int32_t bcols, per_row, span, palette; } cases[] = {
        {2000, 24, 200, 0}, {40000, 6, 20000, 0}, {2000, 8, 100, 60}, {500, 4, 50, 1},
    };
    int failures = 0;
    int32_t brows = TG.quick ? 300 : 3000;
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            spmv_coo coo;
            char label[160];
            tu_block_coo(&TG.rng, brows, cases[c].bcols, bs[i], cases[c].per_row, cases[c].span, SPMV_FLOAT64, &coo);
            if (cases[c].palette)
                tu_palette_values(&TG.rng, &coo, cases[c].palette);
            snprintf(label, sizeof label, "blocks b=%d case %zu (%d x %d, %lld nnz)", bs[i], c, coo.rows, coo.cols,
                     (long long)coo.nnz);
            for (int d = 0; d < 2; d++)
                failures += pbsr_check(label, &coo, (spmv_dtype)d);
            spmv_coo_free(&coo);
        }
    /* without blocks: refused, saying why, nothing held, the answer remembered */
    spmv_coo coo;
    spmv_gpu_matrix *gm = NULL;
    spmv_gpu_upload_stats us;
    spmv_error err;
    tu_random_coo(&TG.rng, TU_SHAPE_RANDOM, 300, SPMV_FLOAT64, &coo);
    void *x = tu_vector_alloc(SPMV_FLOAT64, coo.cols), *y = tu_vector_alloc(SPMV_FLOAT64, coo.rows);
    tu_random_vector(&TG.rng, SPMV_FLOAT64, coo.cols, x);
    assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, &coo, SPMV_FLOAT64, SPMV_FMT_CSR | SPMV_FMT_PBSR, 32, &gm, &us,
                                            &err), SPMV_OK);
    assert_int_equal(us.formats, SPMV_FMT_CSR); /* skipped at upload, not an error */
    size_t held = spmv_gpu_matrix_bytes(gm);
    for (int twice = 0; twice < 2; twice++) {
        assert_int_equal(spmv_gpu_run(TG.ctx, spmv_kernel_find("gpu.pbsr"), gm, NULL, x, y, 0, 1, NULL, &err),
                         SPMV_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.message, "b x b blocks"));
    }
    assert_true(spmv_gpu_matrix_bytes(gm) >= held); /* x and y buffers may come; no PBSR bytes */
    spmv_gpu_usage u;
    spmv_gpu_matrix_usage(gm, &u);
    assert_int_equal(u.bytes[spmv_format_index(SPMV_FMT_PBSR)], 0);
    print_message("# gpu.pbsr without blocks: %s\n", err.message);
    spmv_gpu_matrix_free(TG.ctx, gm);
    free(x);
    free(y);
    spmv_coo_free(&coo);
    assert_int_equal(failures, 0);
}

static void test_set_values(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_coo coo, next;
    spmv_csr csr;
    spmv_gpu_matrix *gm = NULL, *gt = NULL;
    spmv_gpu_upload_stats us;
    spmv_gpu_usage u;
    spmv_error err;
    struct problem pb;
    int failures = 0;
    tu_random_coo(&TG.rng, TU_SHAPE_RANDOM, 3000, SPMV_FLOAT64, &coo);
    assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, &coo, SPMV_FLOAT64, SPMV_FMT_CSR | SPMV_FMT_HLL, 32, &gm, &us, &err),
                     SPMV_OK);
    void *y = tu_vector_alloc(SPMV_FLOAT64, coo.rows);
    problem_make(&coo, SPMV_FLOAT64, &pb);
    for (size_t i = 0; i < spmv_kernel_count(); i++) { /* every format built once, the old values in it */
        const spmv_kernel *k = spmv_kernel_at(i);
        spmv_params p = {{0}};
        spmv_stats st;
        if (k->device == SPMV_DEVICE_GPU && k->op == SPMV_OP_SPMV && !spmv_kernel_is_auto(k))
            spmv_gpu_run(TG.ctx, k, gm, &p, pb.x, y, 0, 1, &st, &err);
    }
    assert_int_equal(spmv_gpu_matrix_transpose(TG.ctx, gm, &gt, &err), SPMV_OK);
    problem_free(&pb);
    assert_int_equal(spmv_coo_convert(&coo, SPMV_FLOAT64, &next, &err), SPMV_OK);
    for (int64_t k = 0; k < next.nnz; k++)
        ((double *)next.val)[k] = tu_rng_value(&TG.rng);
    assert_int_equal(spmv_coo_to_csr(&next, SPMV_FLOAT64, &csr, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_set_values(TG.ctx, gm, csr.val, &err), SPMV_OK);
    spmv_gpu_matrix_usage(gm, &u);
    assert_int_equal(u.formats, SPMV_FMT_CSR | SPMV_FMT_HLL);
    assert_int_equal(u.transpose, 0);
    problem_make(&next, SPMV_FLOAT64, &pb);
    for (size_t i = 0; i < spmv_kernel_count(); i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        spmv_params p = {{0}};
        if (k->device == SPMV_DEVICE_GPU && k->op == SPMV_OP_SPMV && !spmv_kernel_is_auto(k))
            failures += !run_one("new values", k, gm, &next, &pb, &p, y);
    }
    assert_int_equal(failures, 0);
    problem_free(&pb);
    free(y);
    spmv_csr_free(&csr);
    spmv_coo_free(&next);
    spmv_coo_free(&coo);
    spmv_gpu_matrix_free(TG.ctx, gm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_values),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_conversions_real),
        cmocka_unit_test(test_conversions_random),
        cmocka_unit_test(test_packed),
        cmocka_unit_test(test_spsell),
        cmocka_unit_test(test_psell_patterns),
        cmocka_unit_test(test_pbsr),
        cmocka_unit_test(test_unsorted_duplicates),
        cmocka_unit_test(test_upload_stats),
        cmocka_unit_test(test_kernels_real),
        cmocka_unit_test(test_kernels_random),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_padding_rule),
        cmocka_unit_test(test_lazy_eviction),
        cmocka_unit_test(test_memory_refused),
    };
    /* SPMV_GPU_ONLY=pattern runs the matching cases alone (cmocka's filter). */
    return tu_gpu_run("gpu", tests);
}
