/* payback.c — the matrix's measured times, its payback per format and
 * auto's rule for the packed formats (daemon/payback.h).
 *
 * The times are the best median seen, not the last: a product's timing
 * and a tuning probe are both honest measurements of one kernel, and the
 * best one is what the format can do on this matrix. Only one-column op-n
 * runs count, so every time compares like with like (a block of k columns
 * or the transpose is another product). The products are counted apart
 * from the times, every product of every kind (blocks, solves' iterations,
 * op t), because each one would have read the packed format.
 */
#include <math.h>
#include <string.h>

#include "daemon/payback.h"

void payback_note_run(matrix *m, const spmv_kernel *k, uint64_t products, bool timed, double median_ms)
{
    if (products)
        atomic_fetch_add(&m->products, products);
    int i = spmv_format_index(k->format);
    if (!timed || i >= SPMV_FORMAT_COUNT || !isfinite(median_ms) || median_ms < 0)
        return;
    double ms = fmax(median_ms, 1e-6); /* 0 means none yet */
    int where = k->device == SPMV_DEVICE_GPU ? PAYBACK_DEVICE : PAYBACK_HOST;
    pthread_mutex_lock(&m->lock);
    if (m->best_ms[where][i] <= 0 || ms < m->best_ms[where][i])
        m->best_ms[where][i] = ms;
    pthread_mutex_unlock(&m->lock);
}

void payback_best(matrix *m, int where, double best[SPMV_FORMAT_COUNT])
{
    pthread_mutex_lock(&m->lock);
    memcpy(best, m->best_ms[where], sizeof m->best_ms[where]);
    pthread_mutex_unlock(&m->lock);
}

void payback_forget(matrix *m)
{
    pthread_mutex_lock(&m->lock);
    memset(m->best_ms, 0, sizeof m->best_ms);
    pthread_mutex_unlock(&m->lock);
}

/* Whether m's products repay building packed format f now. */
static bool repaid(const payback_policy *policy, uint64_t products, const double best[SPMV_FORMAT_COUNT],
                   spmv_format f, double convert_ms)
{
    int64_t n;
    int i = spmv_format_index(f), csr = spmv_format_index(SPMV_FMT_CSR);
    switch (spmv_payback(f, convert_ms, best[csr], best[i], &n)) {
    case SPMV_PAYBACK_REPAID:
        return products >= (uint64_t)n;
    case SPMV_PAYBACK_NOT_FASTER:
        return false; /* measured here and no faster than CSR: only when asked */
    default:
        return products >= policy->products_min;
    }
}

unsigned payback_deferred(const payback_policy *policy, matrix *m, int where, unsigned held,
                          const double convert_ms[SPMV_FORMAT_COUNT])
{
    if (policy->eager)
        return 0;
    double best[SPMV_FORMAT_COUNT];
    payback_best(m, where, best);
    uint64_t products = atomic_load(&m->products);
    unsigned candidates = SPMV_FMT_PACKED & matrix_formats_fit(m) & ~held; /* one m cannot hold is never built */
    unsigned deferred = 0;
    for (int i = 0; i < SPMV_FORMAT_COUNT; i++) {
        unsigned f = 1u << i;
        if ((candidates & f) && !repaid(policy, products, best, (spmv_format)f, convert_ms[i]))
            deferred |= f;
    }
    return deferred;
}

static json_t *ms_or_null(double ms) { return ms > 0 ? json_real(ms) : json_null(); }

void payback_json(json_t *entry, const double best[SPMV_FORMAT_COUNT], spmv_format f, double convert_ms)
{
    int64_t n;
    int i = spmv_format_index(f), csr = spmv_format_index(SPMV_FMT_CSR);
    spmv_payback_status s = spmv_payback(f, convert_ms, best[csr], best[i], &n);
    const char *reason = spmv_payback_reason(s);
    json_object_set_new(entry, "conversion_ms", f == SPMV_FMT_CSR ? json_null() : ms_or_null(convert_ms));
    json_object_set_new(entry, "best_ms", ms_or_null(best[i]));
    json_object_set_new(entry, "payback", s == SPMV_PAYBACK_REPAID ? json_integer((json_int_t)n) : json_null());
    json_object_set_new(entry, "payback_reason", reason ? json_string(reason) : json_null());
}
