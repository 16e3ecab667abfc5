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
 * GPUs and multiplies with GPU kernels (the halo through CUDA IPC, or over
 * NCCL with MPI_CLUSTER_HALO=nccl: the answer must say which) and auto; the
 * case is skipped, with the reason, elsewhere. Distributed vectors (x and
 * y kept on the ranks, BLAS-1 on their slices) are checked the same way,
 * on the ranks' hosts and, where there are GPUs, on them. Distributed
 * solves (cluster_solve: every rank iterating on its rows) of every method
 * with and without each preconditioner that shards are checked against
 * the true residual and the same solve on one process, on shifted Poisson
 * matrices of random sizes; a preconditioner whose setup fails on a rank
 * must leave the cluster healthy and the ranks in step. The pulse (every
 * rank's datagram to rank 0, cluster/pulse.c) is heard from every rank.
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <mpi.h>

#include "cluster/cluster.h"
#include "formats.h"
#include "spmv.h"
#include "tests/unit/testutil.h"

static cluster *C;
static uint64_t seed;
static bool halo_ipc;        /* the GPU shards' halo through CUDA IPC (MPI_CLUSTER_HALO unset or "auto") */
static int printed_exchange; /* the halo's way printed once */
static int rank_, size_;

/* CPU SpMV kernels, then auto. */
static const spmv_kernel *kernels[16];
static int nkernels;

static void list_kernels(void)
{
    for (size_t i = 0; i < spmv_kernel_count() && nkernels < 15; i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        /* not PBSR's: the shards of these matrices hold no b x b blocks, so it refuses them (test_cpu_kernels) */
        if (k->device == SPMV_DEVICE_CPU && k->op == SPMV_OP_SPMV && k->format != SPMV_FMT_PBSR)
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

/* max |y - ref| over rows [rb, re) (y holds just those), against the larger
 * of ||ref|| and || |A||x| || there: a row whose terms cancel is judged by
 * its terms, as the kernel tests judge it (a float32 row of a thousand
 * terms summed in another order differs by more than 1e-5 of a small sum). */
static double scaled_err(const spmv_csr *a, const void *x, const void *y, const void *ref, int32_t rb, int32_t re)
{
    double diff = 0, scale = 0;
    for (int32_t i = rb; i < re; i++) {
        double t = 0;
        for (int64_t k = spmv_csr_row_begin(a, i); k < spmv_csr_row_begin(a, i + 1); k++)
            t += fabs(spmv_val_get(a->val, a->dtype, k) * spmv_val_get(x, a->dtype, a->col[k]));
        double r = spmv_val_get(ref, a->dtype, i), v = spmv_val_get(y, a->dtype, i - rb), d = fabs(v - r);
        scale = fmax(scale, fmax(fabs(r), t));
        diff = d > diff || isnan(d) ? d : diff;
    }
    return scale > 0 ? diff / scale : diff;
}

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
    /* a symmetric matrix cut the same way in rows and columns: this rank's local block is symmetric */
    bool sym_block = a->rows == a->cols && cb == rb && l.col_begin[rank_ + 1] == re && spmv_csr_symmetric(a);
    tu_rng rng;
    tu_rng_init(&rng, seed ^ (uint64_t)a->nnz);
    void *x = tu_vector_alloc(a->dtype, a->cols), *ref = tu_vector_alloc(a->dtype, a->rows),
         *y = tu_vector_alloc(a->dtype, re - rb);
    tu_random_vector(&rng, a->dtype, a->cols, x);
    spmv_reference(a, x, ref);
    for (int i = 0; i < nkernels; i++) {
        const spmv_kernel *k = kernels[i], *ran = NULL;
        double run[2], cp[2], cm[2], dv[2] = {-1, -1};
        cluster_run_times t = {run, cp, cm, dv};
        tu_poison(y, a->dtype, re - rb);
        int rc = cluster_local_spmv(C, loc, k, NULL, (char *)x + (size_t)cb * vs, y, 1, 2, &t, &ran, &err);
        if (rc == SPMV_ERR_LIMIT) /* a padded format the padding rule refuses on this shard */
            continue;
        if (rc == SPMV_ERR_UNAVAILABLE && k->format == SPMV_FMT_SPSELL && !sym_block && strstr(err.message, "symmetric"))
            continue; /* SPSELL: an exactly symmetric local block only (the off-diagonal block runs PSELL) */
        if (rc != SPMV_OK) {
            fprintf(stderr, "rank %d: %s, %s: %s\n", rank_, what, k->name, err.message);
            bad++;
            continue;
        }
        double e = scaled_err(a, x, y, ref, rb, re);
        /* a GPU run's device time (CUDA events) lies inside its host-clock time; a host run has none */
        bool dev_ok = (ran ? ran : k)->device == SPMV_DEVICE_GPU ? dv[1] > 0 && dv[1] <= run[1] * 1.05 + 0.01 : dv[1] == 0;
        if (!(e <= bound(a->dtype)) || !(run[1] >= 0 && cp[1] >= 0 && cm[1] >= 0) || !dev_ok) {
            if (!dev_ok)
                fprintf(stderr, "rank %d: %s, %s: device time %g ms against the run's %g ms\n", rank_, what, k->name,
                        dv[1], run[1]);
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
        int rc = cluster_spmv(C, m, kernels[i], &(spmv_params){{0}}, &(cluster_operands){.x = x, .y = y, .alpha = 1}, 1, 3,
                              &st, &err);
        if (rc == SPMV_ERR_LIMIT)
            continue;
        if (rc == SPMV_ERR_UNAVAILABLE && kernels[i]->format == SPMV_FMT_SPSELL && !spmv_csr_symmetric(a) &&
            strstr(err.message, "symmetric"))
            continue; /* SPSELL: exactly symmetric local blocks only (the off-diagonal blocks run PSELL) */
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
    assert_int_equal(cluster_spmv(C, m, g, &(spmv_params){{0}}, &(cluster_operands){.x = x, .y = y, .alpha = 1}, 0, 1, &st,
                                  &err), SPMV_ERR_UNAVAILABLE);
    assert_null(cluster_failed(C));
    assert_int_equal(cluster_ping(C, &err), SPMV_OK);
    /* the heartbeat: the first waits cluster_timeout_ms, the next cluster_heartbeat_ms; idle ranks answer both */
    assert_int_equal(cluster_heartbeat(C, &err), SPMV_OK);
    assert_int_equal(cluster_heartbeat(C, &err), SPMV_OK);
    assert_null(cluster_failed(C));
    cluster_unload(C, m);
    free(x);
    free(y);
    free(ref);
}

/* gpu_commands_on expects every shard to be split (a grid's). */
static bool gpu_split_wanted;

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
    int n = cluster_matrix_shards(m, &info), split = 0;
    for (int r = 0; r < n; r++) {
        if (strncmp(info[r].device, "gpu", 3) != 0)
            fail_msg("%s: rank %d's shard is on %s, not a GPU", what, r, info[r].device);
        int32_t rows = info[r].row_end - info[r].row_begin;
        if (info[r].edge_rows < 0 || info[r].edge_rows > rows / 4)
            fail_msg("%s: rank %d's shard of %d rows has %d edge rows (at most a quarter)", what, r, rows,
                     info[r].edge_rows);
        split += info[r].edge_rows > 0;
    }
    if (gpu_split_wanted && split < n) /* a grid's shards all split */
        fail_msg("%s: %d of %d shards split into interior and edge", what, split, n);
    print_message("# %s: %d of %d GPU shards split into interior and edge rows\n", what, split, n);
    tu_rng rng;
    tu_rng_init(&rng, seed + 5);
    void *x = tu_vector_alloc(a->dtype, a->cols), *y = tu_vector_alloc(a->dtype, a->rows),
         *ref = tu_vector_alloc(a->dtype, a->rows);
    tu_random_vector(&rng, a->dtype, a->cols, x);
    spmv_reference(a, x, ref);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        cluster_spmv_stats st;
        tu_poison(y, a->dtype, a->rows);
        int rc = cluster_spmv(C, m, spmv_kernel_find(names[i]), &(spmv_params){{0}},
                              &(cluster_operands){.x = x, .y = y, .alpha = 1}, 1, 3, &st, &err);
        if (rc == SPMV_ERR_LIMIT)
            continue;
        if (rc != SPMV_OK)
            fail_msg("%s, %s on GPUs: %s", what, names[i], err.message);
        char w[160];
        snprintf(w, sizeof w, "%s, %s (ran %s) on %d GPUs, halo over %s", what, names[i], st.kernel, size_,
                 st.exchange ? st.exchange : "?");
        TU_ASSERT_CLOSE(w, a->dtype, y, a->dtype, ref, a->rows, TU_NORM_INF, a->dtype == SPMV_FLOAT64 ? 1e-12 : 1e-5);
        /* one host, GPUs that reach each other: CUDA IPC unless NCCL is asked for (MPI_CLUSTER_HALO=nccl) */
        const char *want = halo_ipc ? "ipc" : "nccl";
        if (size_ > 1 && (!st.exchange || strcmp(st.exchange, want) != 0))
            fail_msg("%s: the halo moved over %s, expected %s", w, st.exchange ? st.exchange : "(nothing)", want);
        if (i == 0 && !printed_exchange++)
            print_message("# GPU shards' halo over %s\n", st.exchange);
    }
    cluster_unload(C, m);
    free(x);
    free(y);
    free(ref);
}

/* Distributed vectors on a (gpu: GPU-) sharded matrix: every way of giving
 * x and y against the reference, BLAS-1 against host arithmetic, and the
 * refusals, the cluster healthy after them. */
static void vectors_on(const spmv_csr *a, const char *what, bool gpu)
{
    spmv_error err;
    cluster_matrix *m;
    cluster_vec *xv = NULL, *yv = NULL, *wv = NULL;
    if (cluster_load(C, "00000000-0000-4000-8000-000000000003", a, gpu, &m, &err) != SPMV_OK)
        fail_msg("%s: cluster_load: %s", what, err.message);
    if (cluster_vec_new(C, m, false, "00000000-0000-4000-8000-0000000000a1", &xv, &err) != SPMV_OK ||
        cluster_vec_new(C, m, true, "00000000-0000-4000-8000-0000000000a2", &yv, &err) != SPMV_OK ||
        cluster_vec_new(C, m, true, "00000000-0000-4000-8000-0000000000a3", &wv, &err) != SPMV_OK)
        fail_msg("%s: cluster_vec_new: %s", what, err.message);
    const cluster_shard_info *info;
    cluster_matrix_shards(m, &info);
    for (int r = 0; r < size_; r++)
        assert_string_equal(cluster_vec_device(yv, r), info[r].device);
    tu_rng rng;
    tu_rng_init(&rng, seed + 7);
    spmv_dtype dt = a->dtype;
    size_t vs = spmv_dtype_size(dt);
    void *x = tu_vector_alloc(dt, a->cols), *y0 = tu_vector_alloc(dt, a->rows), *y = tu_vector_alloc(dt, a->rows),
         *ref = tu_vector_alloc(dt, a->rows), *back = tu_vector_alloc(dt, a->cols);
    tu_random_vector(&rng, dt, a->cols, x);
    tu_random_vector(&rng, dt, a->rows, y0);
    spmv_reference(a, x, ref);
    const spmv_kernel *k = spmv_kernel_find(gpu ? "gpu.csr.vector" : "cpu.csr.serial");
    char w[200];
    /* scatter and gather are exact */
    tu_poison(back, dt, a->cols);
    if (cluster_vec_write(C, xv, x, &err) != SPMV_OK || cluster_vec_read(C, xv, back, &err) != SPMV_OK)
        fail_msg("%s: scatter/gather: %s", what, err.message);
    assert_memory_equal(back, x, (size_t)a->cols * vs);
    /* x and y distributed: y = 2*A*x - 0.5*y0 */
    cluster_spmv_stats st;
    if (cluster_vec_write(C, yv, y0, &err) != SPMV_OK ||
        cluster_spmv(C, m, k, &(spmv_params){{0}}, &(cluster_operands){.xv = xv, .yv = yv, .alpha = 2, .beta = -0.5},
                     1, 3, &st, &err) != SPMV_OK)
        fail_msg("%s: product on distributed vectors: %s", what, err.message);
    tu_poison(y, dt, a->rows);
    assert_int_equal(cluster_vec_read(C, yv, y, &err), SPMV_OK);
    void *want = tu_vector_alloc(dt, a->rows);
    for (int32_t i = 0; i < a->rows; i++) {
        if (dt == SPMV_FLOAT64)
            ((double *)want)[i] = 2 * ((double *)ref)[i] - 0.5 * ((double *)y0)[i];
        else
            ((float *)want)[i] = 2 * ((float *)ref)[i] - 0.5f * ((float *)y0)[i];
    }
    snprintf(w, sizeof w, "%s, %s, x and y distributed, alpha 2 beta -0.5, %d ranks", what, k->name, size_);
    TU_ASSERT_CLOSE(w, dt, y, dt, want, a->rows, TU_NORM_INF, bound(dt) * 4);
    /* inline x, distributed y (alpha 1, beta 0: y overwritten) */
    assert_int_equal(cluster_vec_op(C, CLUSTER_VOP_FILL, NAN, yv, 0, NULL, NULL, &err), SPMV_OK);
    if (cluster_spmv(C, m, spmv_kernel_find("auto"), &(spmv_params){{0}}, &(cluster_operands){.x = x, .yv = yv, .alpha = 1},
                     0, 2, &st, &err) != SPMV_OK)
        fail_msg("%s: inline x, vector y: %s", what, err.message);
    tu_poison(y, dt, a->rows);
    assert_int_equal(cluster_vec_read(C, yv, y, &err), SPMV_OK);
    snprintf(w, sizeof w, "%s, auto (ran %s), inline x, distributed y", what, st.kernel);
    TU_ASSERT_CLOSE(w, dt, y, dt, ref, a->rows, TU_NORM_INF, bound(dt));
    /* distributed x, y gathered */
    tu_poison(y, dt, a->rows);
    if (cluster_spmv(C, m, k, &(spmv_params){{0}}, &(cluster_operands){.xv = xv, .y = y, .alpha = 1}, 0, 1, &st,
                     &err) != SPMV_OK)
        fail_msg("%s: vector x, inline y: %s", what, err.message);
    snprintf(w, sizeof w, "%s, %s, distributed x, y gathered", what, k->name);
    TU_ASSERT_CLOSE(w, dt, y, dt, ref, a->rows, TU_NORM_INF, bound(dt));
    /* BLAS-1 against host arithmetic on the same values: w = y0; w = 3*yv + w; dot, nrm2, scal, copy. The
     * reference is yv as read back, not the host's product: the two differ by the product's rounding, which
     * on a row that cancels is large against the entry itself. */
    double dot = 0, nrm = 0, got = 0, yy = 0;
    void *yvals = tu_vector_alloc(dt, a->rows);
    assert_int_equal(cluster_vec_read(C, yv, yvals, &err), SPMV_OK);
    assert_int_equal(cluster_vec_write(C, wv, y0, &err), SPMV_OK);
    assert_int_equal(cluster_vec_op(C, CLUSTER_VOP_AXPY, 3, yv, 0, wv, NULL, &err), SPMV_OK);
    assert_int_equal(cluster_vec_read(C, wv, want, &err), SPMV_OK);
    for (int32_t i = 0; i < a->rows; i++) {
        double r = dt == SPMV_FLOAT64 ? ((double *)yvals)[i] : ((float *)yvals)[i];
        double z = dt == SPMV_FLOAT64 ? ((double *)y0)[i] : ((float *)y0)[i];
        double v = dt == SPMV_FLOAT64 ? ((double *)want)[i] : ((float *)want)[i];
        double e = 3 * r + z;
        if (fabs(v - e) > bound(dt) * 8 * (1 + fabs(e)))
            fail_msg("%s: axpy entry %d: %.17g, host %.17g", what, i, v, e);
        dot += v * r;
        nrm += v * v;
        yy += r * r;
    }
    assert_int_equal(cluster_vec_op(C, CLUSTER_VOP_DOT, 0, wv, 0, yv, &got, &err), SPMV_OK);
    if (fabs(got - dot) > 1e-9 * (1 + fabs(dot)) * (dt == SPMV_FLOAT64 ? 1 : 1e4))
        fail_msg("%s: dot %.17g, host %.17g", what, got, dot);
    assert_int_equal(cluster_vec_op(C, CLUSTER_VOP_NRM2, 0, wv, 0, NULL, &got, &err), SPMV_OK);
    if (fabs(got - sqrt(nrm)) > 1e-9 * (1 + sqrt(nrm)) * (dt == SPMV_FLOAT64 ? 1 : 1e4))
        fail_msg("%s: nrm2 %.17g, host %.17g", what, got, sqrt(nrm));
    assert_int_equal(cluster_vec_op(C, CLUSTER_VOP_COPY, 0, yv, 0, wv, NULL, &err), SPMV_OK);
    assert_int_equal(cluster_vec_op(C, CLUSTER_VOP_SCAL, -2, wv, 0, NULL, NULL, &err), SPMV_OK);
    assert_int_equal(cluster_vec_op(C, CLUSTER_VOP_AXPBY, 1, wv, 2, yv, NULL, &err), SPMV_OK); /* yv = -2y + 2y = 0 */
    assert_int_equal(cluster_vec_op(C, CLUSTER_VOP_NRM2, 0, yv, 0, NULL, &got, &err), SPMV_OK);
    if (got != 0)
        fail_msg("%s: copy, scal -2, axpby 1/2 left nrm2 %.17g (of %.17g), not 0", what, got, sqrt(yy));
    /* refusals: nothing runs, the cluster stays healthy */
    assert_int_equal(cluster_spmv(C, m, k, &(spmv_params){{0}}, &(cluster_operands){.xv = wv, .yv = wv, .alpha = 1}, 0,
                                  1, &st, &err), a->rows == a->cols ? SPMV_ERR_INVALID : SPMV_ERR_SHAPE);
    if (a->rows != a->cols) {
        assert_int_equal(cluster_spmv(C, m, k, &(spmv_params){{0}}, &(cluster_operands){.xv = yv, .yv = wv,
                                      .alpha = 1}, 0, 1, &st, &err), SPMV_ERR_SHAPE);
        assert_int_equal(cluster_vec_op(C, CLUSTER_VOP_DOT, 0, xv, 0, yv, &got, &err), SPMV_ERR_SHAPE);
    }
    assert_int_equal(cluster_spmv(C, m, k, &(spmv_params){{0}}, &(cluster_operands){.x = x, .y = y, .alpha = 2}, 0, 1,
                                  &st, &err), SPMV_ERR_INVALID);
    assert_null(cluster_failed(C));
    assert_int_equal(cluster_ping(C, &err), SPMV_OK);
    cluster_vec_free(C, xv);
    cluster_vec_free(C, yv);
    cluster_vec_free(C, wv);
    cluster_unload(C, m);
    free(x);
    free(y0);
    free(y);
    free(ref);
    free(back);
    free(want);
    free(yvals);
}

static void host_vectors_on(const spmv_csr *a, const char *what) { vectors_on(a, what, false); }
static void gpu_vectors_on(const spmv_csr *a, const char *what) { vectors_on(a, what, true); }

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

/* ------------------------------------------------ distributed solves */

/* A g x g grid's 5-point Laplacian with a random positive shift on the
 * diagonal (so symmetric positive definite), float64, columns sorted. */
static void shifted_poisson(tu_rng *rng, int32_t g, spmv_csr *a)
{
    int32_t n = g * g;
    int64_t cap = 5 * (int64_t)n;
    memset(a, 0, sizeof *a);
    a->rows = a->cols = n;
    a->dtype = SPMV_FLOAT64;
    a->row_ptr = calloc((size_t)n + 1, sizeof *a->row_ptr);
    a->col = malloc((size_t)cap * sizeof *a->col);
    a->val = malloc((size_t)cap * sizeof(double));
    assert_non_null(a->row_ptr);
    assert_non_null(a->col);
    assert_non_null(a->val);
    int64_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t r = i / g, c = i % g, nb[5] = {i - g, i - 1, i, i + 1, i + g};
        bool in[5] = {r > 0, c > 0, true, c < g - 1, r < g - 1};
        for (int e = 0; e < 5; e++)
            if (in[e]) {
                a->col[k] = nb[e];
                ((double *)a->val)[k++] = e == 2 ? 4.0 + 0.5 * tu_rng_uniform(rng) : -1.0;
            }
        a->row_ptr[i + 1] = (int32_t)k;
    }
    a->nnz = k;
}

/* ||b - A x|| / ||b|| on the host. */
static double true_relres(const spmv_csr *a, const double *b, const double *x)
{
    double *ax = malloc((size_t)a->rows * sizeof *ax), rr = 0, bb = 0;
    assert_non_null(ax);
    spmv_reference(a, x, ax);
    for (int32_t i = 0; i < a->rows; i++) {
        rr += (b[i] - ax[i]) * (b[i] - ax[i]);
        bb += b[i] * b[i];
    }
    free(ax);
    return sqrt(rr / bb);
}

static int whole_apply(void *ctx, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err)
{
    (void)err;
    *ms = 0;
    spmv_reference(ctx, x->data, y->data);
    return SPMV_OK;
}

/* The same solve on one process (the engine's, A whole): its iterations
 * and x. */
static int32_t whole_solve(const spmv_csr *a, spmv_solve_method method, spmv_precond_type pt, const double *b,
                           double *x)
{
    spmv_vec bv = {.device = SPMV_DEVICE_CPU, .dtype = SPMV_FLOAT64, .n = a->rows, .k = 1, .data = (void *)b};
    spmv_vec xv = {.device = SPMV_DEVICE_CPU, .dtype = SPMV_FLOAT64, .n = a->rows, .k = 1, .data = x};
    spmv_linop op = {a->rows, a->rows, (void *)a, whole_apply};
    spmv_solve_options o = {.method = method, .tol = 1e-10, .maxit = 2000};
    spmv_precond *pc = NULL;
    spmv_precond_options po;
    spmv_precond_binding bind;
    spmv_error err;
    spmv_solve_result res;
    memset(x, 0, (size_t)a->rows * sizeof *x);
    if (pt != SPMV_PRECOND_NONE) {
        spmv_precond_defaults(&po, pt);
        assert_int_equal(spmv_precond_setup(NULL, a, &po, &pc, &err), SPMV_OK);
        bind = (spmv_precond_binding){NULL, pc, {0}};
        o.precond = spmv_precond_apply_cb;
        o.precond_ctx = &bind;
    }
    assert_int_equal(spmv_solve(NULL, &op, &bv, &xv, &o, &res, &err), SPMV_OK);
    int32_t its = res.stop == SPMV_STOP_CONVERGED ? res.iterations : -1;
    spmv_solve_result_free(&res);
    spmv_precond_free(NULL, pc);
    return its;
}

/* A solve's b of n values drawn from the run's seed ^ salt ^ n, and room
 * for its x and the whole solve's (*x, *xw). */
static double *solve_vectors(int32_t n, uint64_t salt, double **x, double **xw)
{
    tu_rng rng;
    tu_rng_init(&rng, seed ^ salt ^ (uint64_t)n);
    double *b = malloc((size_t)n * sizeof *b);
    *x = malloc((size_t)n * sizeof **x);
    *xw = malloc((size_t)n * sizeof **xw);
    assert_true(b && *x && *xw);
    for (int32_t i = 0; i < n; i++)
        b[i] = tu_rng_value(&rng);
    return b;
}

/* cluster_solve of every method, with and without preconditioners,
 * against the residual and the whole solve; then setups that fail on the
 * ranks leave the cluster healthy and in step. */
static void solve_on(const spmv_csr *a, const char *what)
{
    static const spmv_precond_type pts[] = {SPMV_PRECOND_NONE, SPMV_PRECOND_JACOBI, SPMV_PRECOND_BLOCK_JACOBI,
                                            SPMV_PRECOND_CHEBYSHEV};
    cluster_matrix *m;
    spmv_error err;
    spmv_solve_result res;
    cluster_solve_stats st;
    if (cluster_load(C, "00000000-0000-4000-8000-000000000005", a, false, &m, &err) != SPMV_OK)
        fail_msg("%s: cluster_load: %s", what, err.message);
    int32_t n = a->rows;
    double *x, *xw, *b = solve_vectors(n, 0, &x, &xw);
    for (int meth = SPMV_SOLVE_CG; meth <= SPMV_SOLVE_MINRES; meth++)
        for (size_t p = 0; p < sizeof pts / sizeof *pts; p++) {
            cluster_solve_args s = {.k = spmv_kernel_find(meth & 1 ? "cpu.csr.omp" : "cpu.csr.serial"),
                                    .o = {.method = (spmv_solve_method)meth, .tol = 1e-10, .maxit = 2000}, .b = b,
                                    .x = x};
            spmv_precond_defaults(&s.pc, pts[p]);
            int rc = cluster_solve(C, m, &s, &res, &st, &err);
            const char *mn = spmv_solve_method_name((spmv_solve_method)meth), *pn = spmv_precond_type_name(pts[p]);
            if (rc != SPMV_OK)
                fail_msg("%s, %s, %s: %s", what, mn, pn, err.message);
            double rr = true_relres(a, b, x);
            int32_t its = res.iterations, wits = pts[p] <= SPMV_PRECOND_JACOBI ? whole_solve(a, meth, pts[p], b, xw) : 0;
            /* the ranks' sums round in another order than the whole solve's: the iterations
             * differ by a few, BiCGSTAB's (whose residual does not fall monotonically) by more:
             * 51 against 44 seen on a 625-row shifted Poisson with Jacobi */
            bool same_its = st.nranks == size_;
            for (int q = 0; q < size_; q++)
                same_its = same_its && st.rank[q].iterations == its && st.rank[q].reductions == st.rank[0].reductions;
            if (res.stop != SPMV_STOP_CONVERGED || !(rr <= 1.001e-10) || fabs(rr - res.relres) > 1e-6 * rr || !same_its ||
                (pts[p] <= SPMV_PRECOND_JACOBI &&
                 (wits < 0 || abs(wits - its) > 2 + wits / (meth == SPMV_SOLVE_BICGSTAB ? 5 : 10))))
                fail_msg("%s, %s, %s: stop %s after %d iterations (whole: %d), true relres %g, reported %g, ranks in "
                         "step %d (seed %llu)", what, mn, pn, spmv_solve_stop_name(res.stop), its, wits, rr, res.relres,
                         same_its, (unsigned long long)seed);
            spmv_solve_result_free(&res);
        }
    /* refused before any rank runs, and a setup failing on a rank: an error, the cluster healthy */
    cluster_solve_args s = {.k = spmv_kernel_find("cpu.csr.serial"), .o = {.tol = 1e-10, .maxit = 100}, .b = b, .x = x};
    spmv_precond_defaults(&s.pc, SPMV_PRECOND_AMG);
    assert_int_equal(cluster_solve(C, m, &s, &res, &st, &err), SPMV_ERR_INVALID);
    spmv_precond_defaults(&s.pc, SPMV_PRECOND_BLOCK_JACOBI);
    const cluster_shard_info *info;
    cluster_matrix_shards(m, &info);
    for (s.pc.block_size = 2; s.pc.block_size <= 8; s.pc.block_size++) {
        bool tiles = true;
        for (int q = 0; q < size_; q++)
            tiles = tiles && (info[q].row_end - info[q].row_begin) % s.pc.block_size == 0;
        if (!tiles)
            break;
    }
    if (s.pc.block_size <= 8 && cluster_solve(C, m, &s, &res, &st, &err) == SPMV_OK)
        fail_msg("%s: block_jacobi of %d rows straddling ranks solved", what, s.pc.block_size);
    assert_null(cluster_failed(C));
    spmv_precond_defaults(&s.pc, SPMV_PRECOND_NONE);
    assert_int_equal(cluster_solve(C, m, &s, &res, &st, &err), SPMV_OK); /* the ranks are still in step */
    spmv_solve_result_free(&res);
    free(b);
    free(x);
    free(xw);
    cluster_unload(C, m);
}

/* The pulse (cluster/pulse.c): every rank > 0 sends rank 0 a datagram
 * every cluster_pulse_ms (50 here) from a thread of its own; rank 0 keeps
 * each rank's last-seen time. Every rank is heard within a second, again
 * and again, and the ages stay under the bound; rank 0 and ranks out of
 * range have none, nor has a job of one process. */
static void test_pulse(void **state)
{
    (void)state;
    double age = 0;
    int64_t count = 0;
    assert_int_equal(cluster_pulse_heard(C, 0, &age, &count), -1);
    assert_int_equal(cluster_pulse_heard(C, size_, &age, &count), -1);
    if (size_ == 1) {
        assert_int_equal(cluster_pulse_heard(C, 1, &age, &count), -1);
        return;
    }
    for (int p = 1; p < size_; p++) {
        int64_t first = -1;
        double t0 = spmv_now_ms();
        /* heard at least three times: the thread keeps sending */
        while (spmv_now_ms() - t0 < 3000) {
            assert_int_equal(cluster_pulse_heard(C, p, &age, &count), 0);
            if (first < 0 && count > 0)
                first = count;
            if (first > 0 && count >= first + 3)
                break;
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
        printf("# rank %d: %lld pulses heard, the last %.1f ms ago\n", p, (long long)count, age);
        assert_true(first > 0 && count >= first + 3);
        assert_true(age >= 0 && age < 1000);
    }
    assert_int_equal(cluster_heartbeat(C, &(spmv_error){0}), SPMV_OK);
    assert_null(cluster_failed(C));
}

/* on(a, what) for count shifted Poisson matrices of lo..hi squared rows,
 * drawn from the run's seed ^ salt. */
static void each_poisson(uint64_t salt, int count, int32_t lo, int32_t hi, void (*on)(const spmv_csr *, const char *))
{
    tu_rng rng;
    tu_rng_init(&rng, seed ^ salt);
    for (int i = 0; i < count; i++) {
        spmv_csr a;
        char what[64];
        int32_t g = (int32_t)tu_rng_range(&rng, lo, hi);
        shifted_poisson(&rng, g, &a);
        snprintf(what, sizeof what, "shifted Poisson %d x %d", g, g);
        on(&a, what);
        spmv_csr_free(&a);
    }
}

static void test_solve(void **state)
{
    (void)state;
    each_poisson(0x501e, 3, 12, 40, solve_on);
}

/* cluster_solve on GPU shards: every method takes the fused path, its
 * dots summed across the ranks by the kernels, where the halo goes
 * through CUDA IPC (MPI_CLUSTER_HALO=nccl: the host's loop); each against the true residual and the whole solve on the
 * host, every rank at the same iteration with the same reductions. */
static void gpu_solve_on(const spmv_csr *a, const char *what)
{
    static const spmv_precond_type pts[] = {SPMV_PRECOND_NONE, SPMV_PRECOND_JACOBI};
    static const spmv_solve_method ms[] = {SPMV_SOLVE_CG, SPMV_SOLVE_BICGSTAB, SPMV_SOLVE_GMRES, SPMV_SOLVE_MINRES};
    cluster_matrix *m;
    spmv_error err;
    spmv_solve_result res;
    cluster_solve_stats st;
    if (cluster_load(C, "00000000-0000-4000-8000-000000000006", a, true, &m, &err) != SPMV_OK)
        fail_msg("%s: cluster_load on the GPUs: %s", what, err.message);
    int32_t n = a->rows;
    double *x, *xw, *b = solve_vectors(n, 0x9e5, &x, &xw);
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
        for (size_t p = 0; p < sizeof pts / sizeof *pts; p++) {
            spmv_solve_method meth = ms[mi];
            cluster_solve_args s = {.k = spmv_kernel_find("gpu.csr.vector"),
                                    .o = {.method = meth, .tol = 1e-10, .maxit = 2000}, .b = b, .x = x};
            spmv_precond_defaults(&s.pc, pts[p]);
            for (int32_t i = 0; i < n; i++)
                x[i] = NAN; /* poisoned: every row of x must come back */
            int rc = cluster_solve(C, m, &s, &res, &st, &err);
            const char *mn = spmv_solve_method_name(meth), *pn = spmv_precond_type_name(pts[p]);
            if (rc != SPMV_OK)
                fail_msg("%s on the GPUs, %s, %s: %s", what, mn, pn, err.message);
            double rr = true_relres(a, b, x);
            int32_t its = res.iterations, wits = whole_solve(a, meth, pts[p], b, xw);
            bool fused = halo_ipc, same_its = st.nranks == size_;
            for (int q = 0; q < size_; q++)
                same_its = same_its && st.rank[q].iterations == its && st.rank[q].reductions == st.rank[0].reductions &&
                           (!fused || st.rank[q].reductions >= its);
            printf("# %s on %d GPUs, %s, %s: %d iterations (whole, host: %d), true relres %.3g, fused %d, "
                   "reductions %lld, reduce %.3f ms\n", what, size_, mn, pn, its, wits, rr, res.fused,
                   (long long)st.rank[0].reductions, st.rank[0].reduce_ms);
            if (res.stop != SPMV_STOP_CONVERGED || !(rr <= 1.001e-10) || res.fused != fused || !same_its || wits < 0 ||
                abs(wits - its) > 2 + wits / (meth == SPMV_SOLVE_BICGSTAB ? 5 : 10))
                fail_msg("%s on the GPUs, %s, %s: stop %s after %d iterations (whole: %d), true relres %g, fused %d "
                         "(want %d), ranks in step %d (seed %llu)", what, mn, pn, spmv_solve_stop_name(res.stop), its,
                         wits, rr, res.fused, fused, same_its, (unsigned long long)seed);
            spmv_solve_result_free(&res);
        }
    assert_null(cluster_failed(C));
    free(b);
    free(x);
    free(xw);
    cluster_unload(C, m);
}

static void test_gpu_solve(void **state)
{
    (void)state;
    const char *why = NULL;
    if (spmv_gpu_count(&why) <= 0) {
        print_message("# SKIP no GPU on rank 0: %s\n", why ? why : "none");
        skip();
    }
    each_poisson(0x6501e, 2, 20, 60, gpu_solve_on);
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
    /* a grid whose shards' boundary rows are a line at each end: split, the edge beside the interior */
    tu_rng rng;
    tu_rng_init(&rng, seed ^ 0x5b1);
    spmv_csr a;
    shifted_poisson(&rng, 48 + (int32_t)tu_rng_range(&rng, 0, 32), &a);
    gpu_split_wanted = size_ > 1;
    gpu_commands_on(&a, "shifted Poisson grid");
    gpu_split_wanted = false;
    spmv_csr_free(&a);
}

static void test_commands(void **state)
{
    (void)state;
    each_matrix(seed ^ 0xc0ffee, commands_on);
}

static void test_vectors(void **state)
{
    (void)state;
    each_matrix(seed ^ 0x7ec, host_vectors_on);
}

static void test_gpu_vectors(void **state)
{
    (void)state;
    const char *why = NULL;
    if (spmv_gpu_count(&why) <= 0) {
        print_message("# SKIP no GPU on rank 0: %s\n", why ? why : "none");
        skip();
    }
    each_matrix(seed ^ 0x7ed, gpu_vectors_on);
}

int main(int argc, char **argv)
{
    sigset_t set; /* as the daemon: the rank loop takes these with sigtimedwait */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    const char *halo = getenv("MPI_CLUSTER_HALO"); /* "nccl": the GPU shards' halo over NCCL, as cluster_halo says */
    halo_ipc = !halo || strcmp(halo, "nccl") != 0;
    cluster_options o = {.timeout_ms = 60000, .tune_budget_ms = 200, .limits = spmv_format_limits_default(),
                         .halo_ipc = halo_ipc, .pulse_ms = 50};
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
        const struct CMUnitTest cmds[] = {cmocka_unit_test(test_commands), cmocka_unit_test(test_gpu_commands),
                                          cmocka_unit_test(test_vectors), cmocka_unit_test(test_gpu_vectors),
                                          cmocka_unit_test(test_solve), cmocka_unit_test(test_gpu_solve),
                                          cmocka_unit_test(test_pulse)};
        snprintf(name, sizeof name, "cluster_commands_np%d", size_);
        rc |= _cmocka_run_group_tests(name, cmds, 7, NULL, NULL);
        cluster_shutdown(C);
    } else {
        rc |= cluster_rank_loop(C);
    }
    cluster_finish(C);
    return rc ? 1 : 0;
}
