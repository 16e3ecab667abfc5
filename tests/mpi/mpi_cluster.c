/* mpi_cluster.c — the sharded product across MPI ranks (issue 16).
 *
 * Run under mpirun (tests/run.sh: 1, 2 and 3 ranks, oversubscribed):
 *
 *   mpirun -np 3 --oversubscribe build/tests/mpi_cluster
 *
 * Part one runs on every rank at once: each rank takes its own shard of
 * the same matrix and every CPU kernel of the catalogue (and `auto`, which
 * tunes per shard) multiplies it, exchanging halos with the others; each
 * rank's rows of y, poisoned first, must equal cpu.csr.serial's. Random
 * matrices of every test shape are drawn afresh from one seed (rank 0's,
 * printed, sent to the others), plus the shared real matrices. Part two
 * drives the command protocol as the daemon does: rank 0 loads shards
 * onto every rank (cluster_load), multiplies (cluster_spmv) and frees
 * them, while the other ranks serve in cluster_rank_loop; then `shutdown`
 * ends their loops. Only rank 0 prints TAP; a failure on any rank fails
 * the case everywhere (counts are summed with MPI_Allreduce).
 *
 * Where rank 0 has a GPU (the 2-GPU host: mpirun -np 2, one rank per GPU,
 * NCCL_NVLS_ENABLE=0), part two also loads every matrix onto the ranks'
 * GPUs and multiplies with GPU kernels (the halo over NCCL) and auto; the
 * case is skipped, with the reason, elsewhere.
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <mpi.h>

#include "cluster/cluster.h"
#include "spmv.h"
#include "tests/unit/testutil.h"

static cluster *C;
static uint64_t seed;
static int rank_, size_;

/* CPU SpMV kernels, then auto. */
static const spmv_kernel *kernels[16];
static int nkernels;

static void list_kernels(void)
{
    for (size_t i = 0; i < spmv_kernel_count() && nkernels < 15; i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        if (k->device == SPMV_DEVICE_CPU && k->op == SPMV_OP_SPMV)
            kernels[nkernels++] = k;
    }
    kernels[nkernels++] = spmv_kernel_find("auto");
}

static int all_ranks_sum(int v)
{
    int s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

static double bound(spmv_dtype dt) { return dt == SPMV_FLOAT64 ? 1e-12 : 1e-5; }

/* Part one on matrix a (the same on every rank): failures on this rank. */
static int local_products(const spmv_csr *a, const char *what)
{
    int bad = 0;
    cluster_layout l;
    cluster_shard *sh = calloc((size_t)size_, sizeof *sh);
    cluster_local *loc = NULL;
    spmv_error err;
    if (!sh || cluster_layout_balance(a, size_, &l, &err) || cluster_shards_build(a, &l, sh, &err) ||
        cluster_local_new(C, &sh[rank_], a->dtype, &loc, &err)) {
        fprintf(stderr, "rank %d: %s: %s\n", rank_, what, err.message);
        abort(); /* the others would wait in the exchange: stop the job */
    }
    size_t vs = spmv_dtype_size(a->dtype);
    int32_t rb = l.row_begin[rank_], re = l.row_begin[rank_ + 1], cb = l.col_begin[rank_];
    tu_rng rng;
    tu_rng_init(&rng, seed ^ (uint64_t)a->nnz);
    void *x = tu_vector_alloc(a->dtype, a->cols), *ref = tu_vector_alloc(a->dtype, a->rows),
         *y = tu_vector_alloc(a->dtype, re - rb);
    tu_random_vector(&rng, a->dtype, a->cols, x);
    spmv_reference(a, x, ref);
    for (int i = 0; i < nkernels; i++) {
        const spmv_kernel *k = kernels[i], *ran = NULL;
        double run[2], cp[2], cm[2];
        cluster_run_times t = {run, cp, cm};
        tu_poison(y, a->dtype, re - rb);
        int rc = cluster_local_spmv(C, loc, k, NULL, (char *)x + (size_t)cb * vs, y, 1, 2, &t, &ran, &err);
        if (rc == SPMV_ERR_LIMIT) /* a padded format the padding rule refuses on this shard */
            continue;
        if (rc != SPMV_OK) {
            fprintf(stderr, "rank %d: %s, %s: %s\n", rank_, what, k->name, err.message);
            bad++;
            continue;
        }
        double e = tu_rel_err(a->dtype, y, a->dtype, (char *)ref + (size_t)rb * vs, re - rb, TU_NORM_INF);
        if (!(e <= bound(a->dtype)) || !(run[1] >= 0 && cp[1] >= 0 && cm[1] >= 0)) {
            fprintf(stderr, "rank %d: %s, %s (ran %s): rows %d..%d, max rel err %g (seed %llu)\n", rank_, what,
                    k->name, ran ? ran->name : "?", rb, re, e, (unsigned long long)seed);
            bad++;
        }
    }
    free(x);
    free(y);
    free(ref);
    cluster_local_free(C, loc);
    for (int r = 0; r < size_; r++)
        cluster_shard_free(&sh[r]);
    free(sh);
    cluster_layout_free(&l);
    return bad;
}

static void random_matrix(tu_rng *rng, int shape, int d, spmv_csr *a)
{
    spmv_coo coo;
    spmv_error err;
    spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
    tu_random_coo(rng, (tu_shape)shape, 200 + (int32_t)tu_rng_range(rng, 0, 300), dt, &coo);
    assert_int_equal(spmv_coo_to_csr(&coo, dt, a, &err), SPMV_OK);
    spmv_coo_free(&coo);
}

static int read_real(const char *file, spmv_csr *a)
{
    char path[512], rel[200];
    spmv_coo coo;
    spmv_error err;
    snprintf(rel, sizeof rel, "real/%s", file);
    if (spmv_mm_read_file(tu_matrices_path(path, sizeof path, rel), NULL, &coo, NULL, &err) != SPMV_OK ||
        spmv_coo_to_csr(&coo, SPMV_FLOAT64, a, &err) != SPMV_OK) {
        fprintf(stderr, "%s: %s\n", file, err.message);
        return -1;
    }
    spmv_coo_free(&coo);
    return 0;
}

static void test_local_random(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, seed);
    int bad = 0;
    for (int s = 0; s < TU_SHAPE_COUNT; s++)
        for (int d = 0; d < 2; d++) {
            spmv_csr a;
            char what[96];
            random_matrix(&rng, s, d, &a);
            snprintf(what, sizeof what, "%s %s", tu_shape_name((tu_shape)s), d ? "float32" : "float64");
            bad += local_products(&a, what);
            spmv_csr_free(&a);
        }
    bad = all_ranks_sum(bad);
    if (bad)
        fail_msg("%d kernel runs failed across %d ranks (stderr says which; seed %llu)", bad, size_,
                 (unsigned long long)seed);
}

static void test_local_real(void **state)
{
    (void)state;
    tu_expected *e;
    size_t n;
    assert_int_equal(tu_expected_load(&e, &n), 0);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        spmv_csr a;
        if (read_real(e[i].file, &a) != 0)
            abort();
        bad += local_products(&a, e[i].file);
        spmv_csr_free(&a);
    }
    tu_expected_free(e, n);
    bad = all_ranks_sum(bad);
    if (bad)
        fail_msg("%d kernel runs failed across %d ranks on the real matrices (stderr says which)", bad, size_);
}

/* ------------------------------------------------- part two (rank 0) */

/* cluster_load + cluster_spmv with every kernel against the reference. */
static void commands_on(const spmv_csr *a, const char *what)
{
    spmv_error err;
    cluster_matrix *m;
    if (cluster_load(C, "00000000-0000-4000-8000-000000000001", a, false, &m, &err) != SPMV_OK)
        fail_msg("%s: cluster_load: %s", what, err.message);
    const cluster_shard_info *info;
    int n = cluster_matrix_shards(m, &info);
    assert_int_equal(n, size_);
    int64_t nnz = 0;
    for (int r = 0; r < n; r++) {
        assert_int_equal(info[r].rank, r);
        assert_int_equal(info[r].row_begin, r ? info[r - 1].row_end : 0);
        assert_string_equal(info[r].device, "cpu");
        nnz += info[r].nnz;
    }
    assert_int_equal(info[n - 1].row_end, a->rows);
    assert_int_equal(nnz, a->nnz);
    tu_rng rng;
    tu_rng_init(&rng, seed + 3);
    void *x = tu_vector_alloc(a->dtype, a->cols), *y = tu_vector_alloc(a->dtype, a->rows),
         *ref = tu_vector_alloc(a->dtype, a->rows);
    tu_random_vector(&rng, a->dtype, a->cols, x);
    spmv_reference(a, x, ref);
    for (int i = 0; i < nkernels; i++) {
        cluster_spmv_stats st;
        tu_poison(y, a->dtype, a->rows);
        int rc = cluster_spmv(C, m, kernels[i], &(spmv_params){{0}}, x, y, 1, 3, &st, &err);
        if (rc == SPMV_ERR_LIMIT)
            continue;
        if (rc != SPMV_OK)
            fail_msg("%s, %s: %s", what, kernels[i]->name, err.message);
        char w[160];
        snprintf(w, sizeof w, "%s, %s (ran %s), %d ranks", what, kernels[i]->name, st.kernel, size_);
        TU_ASSERT_CLOSE(w, a->dtype, y, a->dtype, ref, a->rows, TU_NORM_INF, bound(a->dtype));
        assert_int_equal(st.st.runs, 3);
        assert_true(st.compute_ms >= 0 && st.comm_ms >= 0 && st.gather_ms >= 0);
        assert_true(st.st.median_ms >= st.compute_ms * 0.0);
    }
    /* a GPU kernel on host shards: refused, the cluster stays healthy */
    const spmv_kernel *g = spmv_kernel_find("gpu.csr.scalar");
    cluster_spmv_stats st;
    assert_int_equal(cluster_spmv(C, m, g, &(spmv_params){{0}}, x, y, 0, 1, &st, &err), SPMV_ERR_UNAVAILABLE);
    assert_null(cluster_failed(C));
    assert_int_equal(cluster_ping(C, &err), SPMV_OK);
    cluster_unload(C, m);
    free(x);
    free(y);
    free(ref);
}

/* The same on the ranks' GPUs: GPU kernels, the halo over NCCL. */
static void gpu_commands_on(const spmv_csr *a, const char *what)
{
    static const char *const names[] = {"gpu.csr.vector", "gpu.csr.scalar", "gpu.csr.adaptive", "cusparse.csr",
                                        "gpu.hll", "auto"};
    spmv_error err;
    cluster_matrix *m;
    if (cluster_load(C, "00000000-0000-4000-8000-000000000002", a, true, &m, &err) != SPMV_OK)
        fail_msg("%s: cluster_load on GPUs: %s", what, err.message);
    const cluster_shard_info *info;
    int n = cluster_matrix_shards(m, &info);
    for (int r = 0; r < n; r++)
        if (strncmp(info[r].device, "gpu", 3) != 0)
            fail_msg("%s: rank %d's shard is on %s, not a GPU", what, r, info[r].device);
    tu_rng rng;
    tu_rng_init(&rng, seed + 5);
    void *x = tu_vector_alloc(a->dtype, a->cols), *y = tu_vector_alloc(a->dtype, a->rows),
         *ref = tu_vector_alloc(a->dtype, a->rows);
    tu_random_vector(&rng, a->dtype, a->cols, x);
    spmv_reference(a, x, ref);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        cluster_spmv_stats st;
        tu_poison(y, a->dtype, a->rows);
        int rc = cluster_spmv(C, m, spmv_kernel_find(names[i]), &(spmv_params){{0}}, x, y, 1, 3, &st, &err);
        if (rc == SPMV_ERR_LIMIT)
            continue;
        if (rc != SPMV_OK)
            fail_msg("%s, %s on GPUs: %s", what, names[i], err.message);
        char w[160];
        snprintf(w, sizeof w, "%s, %s (ran %s) on %d GPUs", what, names[i], st.kernel, size_);
        TU_ASSERT_CLOSE(w, a->dtype, y, a->dtype, ref, a->rows, TU_NORM_INF, a->dtype == SPMV_FLOAT64 ? 1e-12 : 1e-5);
    }
    cluster_unload(C, m);
    free(x);
    free(y);
    free(ref);
}

/* fn on every random shape (drawn from salt) and every shared real matrix. */
static void each_matrix(uint64_t salt, void (*fn)(const spmv_csr *, const char *))
{
    tu_rng rng;
    tu_rng_init(&rng, salt);
    for (int s = 0; s < TU_SHAPE_COUNT; s++) {
        spmv_csr a;
        random_matrix(&rng, s, s & 1, &a);
        fn(&a, tu_shape_name((tu_shape)s));
        spmv_csr_free(&a);
    }
    tu_expected *e;
    size_t n;
    assert_int_equal(tu_expected_load(&e, &n), 0);
    for (size_t i = 0; i < n; i++) {
        spmv_csr a;
        assert_int_equal(read_real(e[i].file, &a), 0);
        fn(&a, e[i].file);
        spmv_csr_free(&a);
    }
    tu_expected_free(e, n);
}

static void test_gpu_commands(void **state)
{
    (void)state;
    const char *why = NULL;
    if (spmv_gpu_count(&why) <= 0) {
        print_message("# SKIP no GPU on rank 0: %s\n", why ? why : "none");
        skip();
    }
    each_matrix(seed ^ 0x6b0, gpu_commands_on);
}

static void test_commands(void **state)
{
    (void)state;
    each_matrix(seed ^ 0xc0ffee, commands_on);
}

int main(int argc, char **argv)
{
    sigset_t set; /* as the daemon: the rank loop takes these with sigtimedwait */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    cluster_options o = {.timeout_ms = 60000, .tune_budget_ms = 200, .limits = spmv_format_limits_default()};
    spmv_error err;
    if (cluster_init(&argc, &argv, &o, &C, &err) != SPMV_OK) {
        printf("1..1\nnot ok 1 - cluster_init: %s\n", err.message);
        return 1;
    }
    rank_ = cluster_rank(C);
    size_ = cluster_size(C);
    if (rank_ != 0 && !freopen("/dev/null", "w", stdout))
        return 1;
    if (rank_ == 0)
        seed = tu_seed();
    MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    list_kernels();
    char name[64];
    snprintf(name, sizeof name, "cluster_local_np%d", size_);
    const struct CMUnitTest local[] = {
        cmocka_unit_test(test_local_random),
        cmocka_unit_test(test_local_real),
    };
    int rc = _cmocka_run_group_tests(name, local, 2, NULL, NULL);
    if (rank_ == 0) {
        const struct CMUnitTest cmds[] = {cmocka_unit_test(test_commands), cmocka_unit_test(test_gpu_commands)};
        snprintf(name, sizeof name, "cluster_commands_np%d", size_);
        rc |= _cmocka_run_group_tests(name, cmds, 2, NULL, NULL);
        cluster_shutdown(C);
    } else {
        rc |= cluster_rank_loop(C);
    }
    cluster_finish(C);
    return rc ? 1 : 0;
}
