/* run.c — spmv_cpu_run: prepares, runs and times one CPU kernel.
 *
 * Everything a kernel needs that is not y = A*x itself happens here, before
 * the clock starts: parameters are resolved against the registry, a format
 * the matrix does not hold (or an HLL of another hack_size) is built into
 * scratch, the row partition of cpu.csr.omp and cpu.pcsr.omp and the
 * cpu.csr.chunked cursors are made once. Then `warmup` untimed runs and
 * `runs` timed ones, each timed alone with the monotonic clock;
 * engine/stats.c turns the times into the reported statistics. The registry (engine/registry.c) lists the
 * kernels, each naming its implementation (spmv_impl); run_once binds the
 * CPU ones.
 */
#include <string.h>

#include "formats.h"
#include "kernels.h"
#include "spmv.h"

#define MAX_RUNS 1000000
/* A scratch ELL, HLL, PCSR, PSELL or PBSR obeys the matrix's padding rule
 * (m->limits, engine/limits.c): one long row must not make cpu.ell.omp
 * allocate the machine away. */

/* The CPU SpMV kernels' bindings: the registry entry's impl (spmv.h), one
 * case each in run_once. */
static bool cpu_spmv_impl(spmv_impl i)
{
    switch (i) {
    case SPMV_IMPL_CPU_CSR_SERIAL: case SPMV_IMPL_CPU_CSR_CHUNKED: case SPMV_IMPL_CPU_CSR_OMP:
    case SPMV_IMPL_CPU_ELL_OMP: case SPMV_IMPL_CPU_HLL_OMP: case SPMV_IMPL_CPU_PCSR_OMP: case SPMV_IMPL_CPU_PSELL_OMP:
    case SPMV_IMPL_CPU_SPSELL_OMP:
    case SPMV_IMPL_CPU_PBSR_OMP:
        return true;
    default:
        return false;
    }
}

bool spmv_cpu_kernel_bound(const spmv_kernel *k)
{
    return k && k->device == SPMV_DEVICE_CPU &&
           (k->op == SPMV_OP_SPMV ? cpu_spmv_impl(k->impl) : spmv_cpu_spmspm_bound(k));
}

static spmv_impl impl_of(const spmv_kernel *k) { return cpu_spmv_impl(k->impl) ? k->impl : SPMV_IMPL_NONE; }

/* What one call needs, set up before timing. `view` is the caller's matrix
 * with scratch formats swapped in; scratch is what this call owns. */
typedef struct cpu_plan {
    spmv_impl impl;
    spmv_params par;
    int32_t threads;
    spmv_matrix view;
    spmv_ell ell;
    spmv_hll hll;
    spmv_pcsr pcsr;
    spmv_psell psell;
    spmv_spsell spsell;
    spmv_pbsr pbsr;
    int32_t *bounds;   /* cpu.csr.omp, cpu.pcsr.omp: threads+1 row boundaries */
    int32_t *cursor;   /* cpu.csr.chunked: per-row position */
    double *times;
} cpu_plan;

static void plan_free(cpu_plan *pl)
{
    spmv_ell_free(&pl->ell);
    spmv_hll_free(&pl->hll);
    spmv_pcsr_free(&pl->pcsr);
    spmv_psell_free(&pl->psell);
    spmv_spsell_free(&pl->spsell);
    spmv_pbsr_free(&pl->pbsr);
    free(pl->bounds);
    free(pl->cursor);
    free(pl->times);
}

static int prepare_format(cpu_plan *pl, const spmv_matrix *m, spmv_error *err)
{
    int st = SPMV_OK;
    if (pl->impl == SPMV_IMPL_CPU_ELL_OMP && !(m->formats & SPMV_FMT_ELL)) {
        int64_t slots = 0, bytes = 0;
        if ((st = spmv_format_plan(&m->csr, SPMV_FMT_ELL, 0, &slots, &bytes, err)) ||
            (st = spmv_format_check(&m->limits, SPMV_FMT_ELL, m->nnz, slots, bytes, err)) ||
            (st = spmv_csr_to_ell(&m->csr, 0, &pl->ell, err)))
            return st;
        pl->view.ell = pl->ell;
        pl->view.formats |= SPMV_FMT_ELL;
    }
    /* The packed conversions ask the padding rule themselves. */
    if (pl->impl == SPMV_IMPL_CPU_PCSR_OMP && !(m->formats & SPMV_FMT_PCSR)) {
        if ((st = spmv_csr_to_pcsr(&m->csr, &m->limits, &pl->pcsr, err)))
            return st;
        pl->view.pcsr = pl->pcsr;
        pl->view.formats |= SPMV_FMT_PCSR;
    }
    if (pl->impl == SPMV_IMPL_CPU_PSELL_OMP && !(m->formats & SPMV_FMT_PSELL)) {
        if ((st = spmv_csr_to_psell(&m->csr, &m->limits, &pl->psell, err)))
            return st;
        pl->view.psell = pl->psell;
        pl->view.formats |= SPMV_FMT_PSELL;
    }
    if (pl->impl == SPMV_IMPL_CPU_SPSELL_OMP && !(m->formats & SPMV_FMT_SPSELL)) {
        if ((st = spmv_csr_to_spsell(&m->csr, &m->limits, &pl->spsell, err)))
            return st; /* SPMV_ERR_UNAVAILABLE: not square and exactly symmetric */
        pl->view.spsell = pl->spsell;
        pl->view.formats |= SPMV_FMT_SPSELL;
    }
    /* A matrix without complete blocks: SPMV_ERR_UNSUPPORTED saying why. */
    if (pl->impl == SPMV_IMPL_CPU_PBSR_OMP && !(m->formats & SPMV_FMT_PBSR)) {
        if ((st = spmv_csr_to_pbsr(&m->csr, &m->limits, &pl->pbsr, err)))
            return st;
        pl->view.pbsr = pl->pbsr;
        pl->view.formats |= SPMV_FMT_PBSR;
    }
    if (pl->impl == SPMV_IMPL_CPU_HLL_OMP) {
        /* hack_size 0 (the default): the matrix's own HLL, if it holds one. */
        int32_t hs = pl->par.v[SPMV_PARAM_HACK_SIZE];
        if (hs == 0)
            hs = (m->formats & SPMV_FMT_HLL) ? m->hll.hack_size : m->hack_size;
        if (hs < 1)
            hs = SPMV_HACK_SIZE_DEFAULT;
        if (!(m->formats & SPMV_FMT_HLL) || m->hll.hack_size != hs) {
            int64_t slots = 0, bytes = 0;
            if ((st = spmv_format_plan(&m->csr, SPMV_FMT_HLL, hs, &slots, &bytes, err)) ||
                (st = spmv_format_check(&m->limits, SPMV_FMT_HLL, m->nnz, slots, bytes, err)) ||
                (st = spmv_csr_to_hll(&m->csr, hs, &pl->hll, err)))
                return st;
            pl->view.hll = pl->hll;
            pl->view.formats |= SPMV_FMT_HLL;
        }
        if (pl->view.hll.hack_size > spmv_param_get(SPMV_PARAM_HACK_SIZE)->max)
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "hack_size %d out of range 1..%d",
                                  pl->view.hll.hack_size, spmv_param_get(SPMV_PARAM_HACK_SIZE)->max);
        pl->view.hack_size = pl->view.hll.hack_size;
    }
    return st;
}

static int prepare_scratch(cpu_plan *pl, const spmv_matrix *m, int32_t runs, spmv_error *err)
{
    int st = SPMV_OK;
    if (!(pl->times = spmv_array_alloc(runs, sizeof(double), &st)))
        goto fail;
    if (pl->impl == SPMV_IMPL_CPU_CSR_OMP || pl->impl == SPMV_IMPL_CPU_PCSR_OMP) {
        if (!(pl->bounds = spmv_array_alloc((int64_t)pl->threads + 1, sizeof(int32_t), &st)))
            goto fail;
        spmv_cpu_csr_partition(&m->csr, pl->threads, pl->bounds);
    }
    if (pl->impl == SPMV_IMPL_CPU_CSR_CHUNKED && !(pl->cursor = spmv_array_alloc(m->rows, sizeof(int32_t), &st)))
        goto fail;
    return SPMV_OK;
fail:
    return spmv_error_set(err, st, 0, "cannot allocate kernel scratch (%s)", spmv_strerror(st));
}

static int check_call(const spmv_kernel *k, const spmv_matrix *m, const void *x, void *y,
                      int32_t warmup, int32_t runs, spmv_error *err)
{
    if (!k || k->device != SPMV_DEVICE_CPU)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s is not a CPU kernel", k ? k->name : "(null)");
    if (k->op != SPMV_OP_SPMV)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s computes C = A*B (%s), not y = A*x", k->name,
                              spmv_op_name(k->op));
    if (impl_of(k) == SPMV_IMPL_NONE)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s has no CPU implementation", k->name);
    if (!m || !(m->formats & SPMV_FMT_CSR) || (!m->csr.row_ptr && !m->csr.row_ptr64))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "matrix holds no CSR");
    if (impl_of(k) != SPMV_IMPL_CPU_CSR_SERIAL && impl_of(k) != SPMV_IMPL_CPU_CSR_OMP &&
        impl_of(k) != SPMV_IMPL_CPU_PSELL_OMP && spmv_csr_need_narrow(&m->csr, k->name, err))
        return SPMV_ERR_LIMIT;
    if (!x || !y)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "x and y are required");
    if (runs < 1 || runs > MAX_RUNS || warmup < 0 || warmup > MAX_RUNS)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                              "runs %d (range 1..%d) or warmup %d (range 0..%d) out of range",
                              runs, MAX_RUNS, warmup, MAX_RUNS);
    return SPMV_OK;
}

static void run_once(const cpu_plan *pl, const void *x, void *y)
{
    const spmv_matrix *v = &pl->view;
    switch (pl->impl) {
    case SPMV_IMPL_CPU_CSR_SERIAL: spmv_cpu_csr_serial(&v->csr, x, y); break;
    case SPMV_IMPL_CPU_CSR_CHUNKED:
        spmv_cpu_csr_chunked(&v->csr, spmv_chunked_width(&pl->par, v->csr.cols), pl->cursor, x, y);
        break;
    case SPMV_IMPL_CPU_CSR_OMP: spmv_cpu_csr_omp(&v->csr, pl->threads, pl->bounds, x, y); break;
    case SPMV_IMPL_CPU_ELL_OMP: spmv_cpu_ell_omp(&v->ell, pl->threads, x, y); break;
    case SPMV_IMPL_CPU_HLL_OMP: spmv_cpu_hll_omp(&v->hll, pl->threads, pl->par.v[SPMV_PARAM_SCHEDULE], x, y); break;
    case SPMV_IMPL_CPU_PCSR_OMP: spmv_cpu_pcsr_omp(&v->pcsr, pl->threads, pl->bounds, x, y); break;
    case SPMV_IMPL_CPU_PSELL_OMP: spmv_cpu_psell_omp(&v->psell, pl->threads, x, y); break;
    case SPMV_IMPL_CPU_SPSELL_OMP: spmv_cpu_spsell_omp(&v->spsell, pl->threads, x, y); break;
    case SPMV_IMPL_CPU_PBSR_OMP: spmv_cpu_pbsr_omp(&v->pbsr, pl->threads, x, y); break;
    default: break;
    }
}

int spmv_cpu_run(const spmv_kernel *k, const spmv_matrix *m, const spmv_params *p,
                 const void *x, void *y, int32_t warmup, int32_t runs,
                 spmv_stats *stats, spmv_error *err)
{
    cpu_plan pl;
    memset(&pl, 0, sizeof pl);
    int st = check_call(k, m, x, y, warmup, runs, err);
    if (st || (st = spmv_params_resolve(k, p, &pl.par, err)))
        return st;
    pl.impl = impl_of(k);
    pl.view = *m;
    pl.threads = spmv_cpu_threads(pl.par.v[SPMV_PARAM_THREADS], m->nnz); /* small work: one thread */
    if ((st = prepare_format(&pl, m, err)) || (st = prepare_scratch(&pl, m, runs, err)))
        goto done;

    for (int32_t i = 0; i < warmup; i++)
        run_once(&pl, x, y);
    for (int32_t i = 0; i < runs; i++) {
        double t0 = spmv_now_ms();
        run_once(&pl, x, y);
        pl.times[i] = spmv_now_ms() - t0;
    }
    if (stats)
        spmv_stats_compute(pl.times, runs, warmup, 2 * m->nnz, spmv_kernel_bytes(k, &pl.view), stats);
done:
    plan_free(&pl);
    return st;
}
