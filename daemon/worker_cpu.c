/* worker_cpu.c — the CPU worker: one thread running OpenMP kernels.
 *
 * One queue for every CPU kernel because an OpenMP kernel uses all cores:
 * two at once would spoil both timings. The host CSR is always held; a
 * kernel reading another format gets it built on first use, under the
 * padding rule (engine/limits.c), and cached in the matrix under its lock
 * (the descriptor then lists it). The cache of such formats across all
 * matrices is bounded by host_format_bytes: before a build would pass it,
 * the least recently used formats that no kernel is reading and that the
 * upload did not pin are freed; the transpose that op t builds is one of
 * them. An HLL with a hack size other than the
 * matrix's is left to the engine, which builds a scratch copy per call
 * rather than growing the cache without bound.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/memory.h"
#include "daemon/worker.h"

static _Atomic uint64_t host_tick; /* orders host format uses (LRU) */

#define TRANSPOSE SPMV_FORMAT_COUNT /* evict_one's index of the transpose */

/* The least recently used host format or transpose nobody reads now,
 * across every matrix, freed; false when there is none. */
static bool evict_one(spmvd *d)
{
    matrix **list, *victim = NULL;
    size_t n;
    int vi = -1;
    uint64_t oldest = UINT64_MAX;
    if (!d || !d->store || store_list(d->store, &list, &n) != SPMV_OK)
        return false;
    for (size_t j = 0; j < n; j++) {
        matrix *m = list[j];
        unsigned pinned = matrix_host_pinned(m);
        pthread_mutex_lock(&m->lock);
        for (int i = 0; i < SPMV_FORMAT_COUNT; i++) {
            unsigned f = 1u << i;
            if ((m->host.formats & f) && !(pinned & f) && m->host_busy[i] == 0 && m->host_use[i] < oldest) {
                oldest = m->host_use[i];
                victim = m;
                vi = i;
            }
        }
        if (m->host_t && m->host_t_busy == 0 && m->host_t_use < oldest) {
            oldest = m->host_t_use;
            victim = m;
            vi = TRANSPOSE;
        }
        pthread_mutex_unlock(&m->lock);
    }
    if (victim) {
        pthread_mutex_lock(&victim->lock);
        if (vi == TRANSPOSE)
            memory_trim(matrix_drop_transpose(victim)); /* unless someone started reading it meanwhile */
        else if (victim->host_busy[vi] == 0)
            spmv_matrix_drop_format(&victim->host, (spmv_format)(1u << vi));
        pthread_mutex_unlock(&victim->lock);
        if (d->metrics)
            metrics_host_eviction(d->metrics);
    }
    store_list_free(list, n);
    return victim != NULL;
}

/* Frees least recently used host formats until `need` more bytes fit in
 * host_format_bytes (as far as formats not in use allow). */
static void make_room(spmvd *d, int64_t need)
{
    int64_t budget = d ? atomic_load(&d->limits.host_format_bytes) : 0;
    if (budget <= 0 || !d->store)
        return;
    for (;;) {
        matrix **list;
        size_t n;
        int64_t total = 0;
        if (store_list(d->store, &list, &n) != SPMV_OK)
            return;
        for (size_t j = 0; j < n; j++)
            total += (int64_t)matrix_host_cache_bytes(list[j]);
        store_list_free(list, n);
        if (total + need <= budget || !evict_one(d))
            return;
    }
}

/* The format k reads, built under the padding rule if missing (after
 * making room in the host format cache), marked in use. */
int worker_cpu_acquire(spmvd *d, matrix *m, const spmv_kernel *k, const spmv_params *p, spmv_matrix *snap,
                       spmv_error *err)
{
    int rc = SPMV_OK;
    int32_t hack = p ? p->v[SPMV_PARAM_HACK_SIZE] : 0;
    int i = spmv_format_index(k->format);
    pthread_mutex_lock(&m->lock);
    bool other_hack = k->format == SPMV_FMT_HLL && hack != 0 && hack != m->host.hack_size;
    bool build = !(m->host.formats & k->format) && !other_hack;
    if (d)
        m->host.limits = spmvd_format_limits(d);
    int64_t slots = 0, bytes = 0;
    if (build)
        rc = spmv_format_plan(&m->host.csr, k->format, m->host.hack_size, &slots, &bytes, err);
    if (rc == SPMV_OK && build)
        rc = spmv_format_check(&m->host.limits, k->format, m->host.nnz, slots, bytes, err);
    pthread_mutex_unlock(&m->lock);
    if (rc != SPMV_OK)
        return rc;
    if (build)
        make_room(d, bytes);
    pthread_mutex_lock(&m->lock);
    if (!(m->host.formats & k->format) && !other_hack)
        rc = spmv_matrix_add_format(&m->host, k->format, err);
    if (rc == SPMV_OK) {
        m->host_use[i] = atomic_fetch_add(&host_tick, 1) + 1;
        m->host_busy[i]++;
        *snap = m->host; /* valid while host_busy holds the format */
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void worker_cpu_release(matrix *m, const spmv_kernel *k)
{
    pthread_mutex_lock(&m->lock);
    m->host_busy[spmv_format_index(k->format)]--;
    pthread_mutex_unlock(&m->lock);
}

/* Whether Aᵀ may be built: its CSR (the columns become the rows) within
 * max_format_bytes, room made for it in the host format cache, and the
 * build (the CSR and a 64-bit count a column) within the host's memory. */
static int transpose_admit(spmvd *d, matrix *m, spmv_error *err)
{
    int64_t cols = m->host.cols, nnz = m->host.nnz;
    int64_t bytes = (cols + 1) * 4 + nnz * (4 + (int64_t)spmv_dtype_size(m->host.dtype));
    int64_t most = d ? atomic_load(&d->limits.max_format_bytes) : 0, room = d ? memory_room(d) : INT64_MAX;
    if (most > 0 && bytes > most)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "the transpose of %s (op t) would take %lld bytes, over "
                              "max_format_bytes (%lld)", m->meta.id, (long long)bytes, (long long)most);
    make_room(d, bytes);
    if (bytes + (cols + 1) * 8 > room)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "the transpose of %s (op t) would take %lld bytes to build; "
                              "the host can give %lld", m->meta.id, (long long)(bytes + (cols + 1) * 8),
                              (long long)room);
    return SPMV_OK;
}

/* Aᵀ on the host for CPU kernels: built on first use (after
 * transpose_admit) and kept in the host format cache, counted in the
 * matrix's host bytes and evicted as a format built on demand is; marked
 * in use (host_t_busy) until worker_host_run is done with it. */
static int host_transpose(spmvd *d, matrix *m, spmv_matrix *snap, spmv_error *err)
{
    int rc = SPMV_OK;
    pthread_mutex_lock(&m->lock);
    bool missing = !m->host_t;
    pthread_mutex_unlock(&m->lock);
    if (missing && (rc = transpose_admit(d, m, err)) != SPMV_OK)
        return rc;
    pthread_mutex_lock(&m->lock);
    if (!m->host_t) {
        spmv_matrix *t = calloc(1, sizeof *t);
        if (!t)
            rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the transpose of %s", m->meta.id);
        else if ((rc = spmv_matrix_transpose(&m->host, t, err)) != SPMV_OK)
            free(t);
        else
            m->host_t = t;
    }
    if (rc == SPMV_OK) {
        m->host_t_use = atomic_fetch_add(&host_tick, 1) + 1;
        m->host_t_busy++;
        *snap = *m->host_t;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* The host matrix a CPU kernel runs on, with the formats it reads; *held
 * says whether host_operand_release must release it after. */
static int host_operand(spmvd *d, const worker_run_args *a, spmv_matrix *snap, bool *held)
{
    *held = false;
    if (a->trans && a->k->format != SPMV_FMT_CSR)
        return spmv_error_set(a->err, SPMV_ERR_INVALID, 0, "op t runs CSR kernels on the host (cpu.csr.*), not %s",
                              a->k->name);
    int rc = a->trans ? host_transpose(d, a->m, snap, a->err) : worker_cpu_acquire(d, a->m, a->k, a->p, snap, a->err);
    *held = rc == SPMV_OK;
    return rc;
}

static void host_operand_release(const worker_run_args *a)
{
    if (!a->trans) {
        worker_cpu_release(a->m, a->k);
        return;
    }
    pthread_mutex_lock(&a->m->lock);
    a->m->host_t_busy--;
    pthread_mutex_unlock(&a->m->lock);
}

int worker_host_run(worker *w, const worker_run_args *a)
{
    if (a->k->device != SPMV_DEVICE_CPU)
        return spmv_error_set(a->err, SPMV_ERR_UNAVAILABLE, 0, "matrix %s is not resident on %s", a->m->meta.id,
                              w->name);
    if (a->xs) /* daemon/batch.c packs a block for a CPU kernel */
        return spmv_error_set(a->err, SPMV_ERR_INVALID, 0, "%s: a batch of separate operands runs on a GPU kernel",
                              a->k->name);
    spmv_matrix snap;
    bool held;
    int rc = host_operand(w->d, a, &snap, &held);
    if (rc != SPMV_OK)
        return rc;
    if (a->apply)
        rc = spmv_cpu_apply(a->k, &snap, a->p, a->apply, a->xv, a->yv, a->st, a->axpby_ms, a->err);
    else if (a->ncols == 1 && !a->trans)
        rc = spmv_cpu_run(a->k, &snap, a->p, a->x, a->y, a->warmup, a->runs, a->st, a->err);
    else
        rc = spmv_cpu_run_k(a->k, &snap, a->p, a->ncols, a->x, a->y, a->warmup, a->runs, a->st, a->err);
    if (held)
        host_operand_release(a);
    return rc;
}

/* After tuning: the host formats neither pinned nor the winner's go. */
void worker_cpu_trim(matrix *m, unsigned keep)
{
    unsigned pinned = matrix_host_pinned(m);
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < SPMV_FORMAT_COUNT; i++) {
        unsigned f = 1u << i;
        if ((m->host.formats & f) && !(pinned & f) && !(keep & f) && m->host_busy[i] == 0)
            spmv_matrix_drop_format(&m->host, (spmv_format)f);
    }
    pthread_mutex_unlock(&m->lock);
}

int worker_host_set_values(matrix *m, const void *val, spmv_error *err)
{
    unsigned pinned = matrix_host_pinned(m);
    int rc = SPMV_OK;
    pthread_mutex_lock(&m->lock);
    memcpy(m->host.csr.val, val, (size_t)m->host.nnz * spmv_dtype_size(m->host.dtype));
    for (int i = 0; i < SPMV_FORMAT_COUNT; i++) /* each holds its own copy of the old values */
        if ((m->host.formats & (1u << i)) && (1u << i) != SPMV_FMT_CSR)
            spmv_matrix_drop_format(&m->host, (spmv_format)(1u << i));
    if (m->host_t) {
        spmv_matrix_free(m->host_t);
        free(m->host_t);
        m->host_t = NULL;
    }
    for (unsigned f = SPMV_FMT_COO; f <= SPMV_FMT_LAST && rc != SPMV_ERR_NOMEM; f <<= 1)
        if ((pinned & f) && f != SPMV_FMT_CSR) {
            rc = spmv_matrix_add_format(&m->host, (spmv_format)f, err);
            rc = rc == SPMV_ERR_UNAVAILABLE && f == SPMV_FMT_SPSELL ? SPMV_OK : rc; /* new values not symmetric */
        }
    pthread_mutex_unlock(&m->lock);
    return rc == SPMV_ERR_LIMIT || rc == SPMV_ERR_UNSUPPORTED ? SPMV_OK : rc; /* not built, as at upload */
}

static int cpu_set_values(worker *w, matrix *m, const void *val, spmv_error *err)
{
    (void)w;
    return worker_host_set_values(m, val, err);
}

static int cpu_matrix_load(worker *w, matrix *m, spmv_error *err)
{
    (void)w; (void)m; (void)err;
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

static const worker_ops cpu_ops = {
    .kind = "cpu",
    WORKER_GENERIC_OPS,
    .matrix_load = cpu_matrix_load,
    .matrix_set_values = cpu_set_values,
    .matrix_release = cpu_matrix_release,
    .vec_release = cpu_vec_release,
    .run = worker_host_run,
};

worker *worker_cpu_new(struct spmvd *d, size_t queue_depth)
{
    return worker_alloc(d, &cpu_ops, "cpu", -1, queue_depth);
}
