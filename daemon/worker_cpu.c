/* worker_cpu.c — the CPU worker: one thread running OpenMP kernels.
 *
 * One queue for every CPU kernel because an OpenMP kernel uses all cores:
 * two at once would spoil both timings. The host CSR is always held; a
 * kernel reading another format gets it built once, on first use, and
 * cached in the matrix under its lock (the descriptor then lists it). An
 * HLL with a hack size other than the matrix's is left to the engine, which
 * builds a scratch copy per call rather than growing the cache without
 * bound.
 */
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/worker.h"

/* ELL slots allowed when caching an ELL: beyond this padding the cache
 * would cost more than the matrix itself many times over. */
static int64_t ell_slot_bound(const matrix *m)
{
    return 16 * m->host.nnz + (INT64_C(1) << 24);
}

static int ensure_format(matrix *m, const spmv_kernel *k, const spmv_params *p, spmv_matrix *snap,
                         spmv_error *err)
{
    int rc = SPMV_OK;
    int32_t hack = p->v[SPMV_PARAM_HACK_SIZE];
    pthread_mutex_lock(&m->lock);
    bool other_hack = k->format == SPMV_FMT_HLL && hack != 0 && hack != m->host.hack_size;
    if (!(m->host.formats & k->format) && !other_hack) {
        rc = spmv_matrix_add_format(&m->host, k->format, ell_slot_bound(m), err);
        if (rc == SPMV_OK && !(m->host.formats & k->format))
            rc = spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                                "the %s format of this matrix would need more than %lld slots of padding",
                                spmv_format_name(k->format), (long long)ell_slot_bound(m));
    }
    *snap = m->host; /* formats only grow, so a shallow copy stays valid */
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int worker_cpu_snapshot(matrix *m, const spmv_kernel *k, spmv_matrix *snap, spmv_error *err)
{
    spmv_params none;
    memset(&none, 0, sizeof none);
    return ensure_format(m, k, &none, snap, err);
}

int worker_cpu_spmv(matrix *m, const spmv_kernel *k, const spmv_params *p,
                    const void *x, void *y, int32_t warmup, int32_t runs,
                    spmv_stats *st, spmv_error *err)
{
    spmv_matrix snap;
    int rc = ensure_format(m, k, p, &snap, err);
    if (rc != SPMV_OK)
        return rc;
    return spmv_cpu_run(k, &snap, p, x, y, warmup, runs, st, err);
}

static int cpu_matrix_load(worker *w, matrix *m, const spmv_coo *coo, spmv_error *err)
{
    (void)w; (void)m; (void)coo; (void)err;
    return SPMV_OK; /* the host copy is the CPU's copy */
}

static void cpu_matrix_release(worker *w, void *dev)
{
    (void)w; (void)dev;
}

static void cpu_vec_release(worker *w, const spmv_vec *v)
{
    (void)w;
    spmv_vec copy = *v;
    spmv_vec_free(NULL, &copy);
}

static int cpu_spmv(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p,
                    const void *x, void *y, int32_t warmup, int32_t runs,
                    spmv_stats *st, spmv_error *err)
{
    (void)w;
    return worker_cpu_spmv(m, k, p, x, y, warmup, runs, st, err);
}

static const worker_ops cpu_ops = {
    .kind = "cpu",
    .start = worker_generic_start,
    .submit = worker_generic_submit,
    .stop = worker_generic_stop,
    .info = worker_generic_info,
    .matrix_load = cpu_matrix_load,
    .matrix_release = cpu_matrix_release,
    .vec_release = cpu_vec_release,
    .spmv = cpu_spmv,
};

worker *worker_cpu_new(struct spmvd *d, size_t queue_depth)
{
    return worker_alloc(d, &cpu_ops, "cpu", -1, queue_depth);
}
