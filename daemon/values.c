/* values.c — a stored matrix's new values (daemon/values.h has the walk).
 *
 * The file comes first, under its temporary name: if it cannot be
 * written nothing changes. The memory changes on the matrix's worker; only
 * then is the file renamed into place, so a failed task leaves the old
 * values in both. A rename that fails after the memory changed is the one
 * case left: logged, and the answer says the values are changed until a
 * restart (500 io_error naming the step).
 */
#include <string.h>

#include "daemon/autotune.h"
#include "daemon/preconds.h"
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/values.h"

bool values_begin(values_task *t, spmvd *d, matrix *m)
{
    bool idle = false;
    memset(t, 0, sizeof *t);
    t->d = d;
    t->m = matrix_ref(m);
    t->staged.fd = -1;
    t->w = autotune_worker(d, m);
    t->claimed = atomic_compare_exchange_strong(&m->values_changing, &idle, true);
    return t->claimed;
}

int values_prepare(values_task *t, void *body, size_t len, spmv_error *err)
{
    matrix *m = t->m;
    size_t vs = spmv_dtype_size(m->host.dtype), want = (size_t)m->host.nnz * vs;
    if (len != want)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "the body has %zu bytes; matrix %s takes its %lld non-zeros' "
                              "values as %s, %zu bytes", len, m->meta.id, (long long)m->host.nnz,
                              spmv_dtype_name(m->host.dtype), want);
    spmv_csr view = m->host.csr; /* the pattern is never changed: read from any thread */
    view.val = body;
    if (m->meta.mixed) {
        int rc = spmv_csr_round_to_float32(&view, err);
        if (rc != SPMV_OK)
            return rc;
    }
    t->val = body;
    pthread_mutex_lock(&m->lock);
    t->meta = m->meta;
    pthread_mutex_unlock(&m->lock);
    t->meta.generated = false; /* the file now holds the arrays, not a recipe */
    t->meta.symmetric = spmv_csr_symmetric(&view); /* new values may make or break it */
    t->meta.symmetry_known = true;
    return spmv_csr_sha256(&view, t->meta.sha256);
}

int values_stage(values_task *t, spmv_error *err)
{
    spmv_csr view = t->m->host.csr;
    view.val = t->val;
    double t0 = spmv_now_ms();
    int rc = matfile_stage(store_dir(t->d->store), &t->meta, &view, NULL, &t->staged, err);
    t->meta.store_ms = spmv_now_ms() - t0;
    if (rc != SPMV_OK)
        log_error("values of %s: %s", t->m->meta.id, err->message);
    return rc;
}

void values_run(task *base, worker *w)
{
    values_task *t = (values_task *)base;
    matrix *m = t->m;
    atomic_fetch_add(&m->values_gen, 1);
    t->rc = w->ops->matrix_set_values(w, m, t->val, &t->err);
    atomic_fetch_add(&m->values_gen, 1);
    autotune_forget(t->d, m);
    preconds_values_changed(m);
    pthread_mutex_lock(&m->lock);
    memcpy(m->meta.sha256, t->meta.sha256, sizeof m->meta.sha256);
    m->meta.symmetric = t->meta.symmetric;
    m->meta.generated = false;
    pthread_mutex_unlock(&m->lock);
}

int values_commit(values_task *t, int status, spmv_error *err)
{
    if (status == SPMV_OK && t->rc != SPMV_OK) {
        status = t->rc;
        *err = t->err;
    }
    if (status != SPMV_OK) {
        matfile_discard(&t->staged);
        if (t->rc != SPMV_OK) /* the host may hold the new values, the device not: logged for the operator */
            log_error("values of %s: %s (the stored file keeps the old values)", t->m->meta.id, err->message);
        return status;
    }
    int rc = matfile_commit(store_dir(t->d->store), &t->staged, NULL, NULL, err);
    if (rc != SPMV_OK)
        log_error("values of %s: %s: the new values are in memory, the stored file keeps the old ones (a restart "
                  "brings them back)", t->m->meta.id, err->message);
    else
        log_info("values of %s \"%s\": %lld replaced, file rewritten (%.1f ms)", t->m->meta.id, t->m->meta.name,
                 (long long)t->m->host.nnz, t->meta.store_ms);
    return rc;
}

void values_release(values_task *t)
{
    if (!t->m)
        return;
    matfile_discard(&t->staged);
    if (t->claimed)
        atomic_store(&t->m->values_changing, false);
    matrix_unref(t->m);
    t->m = NULL;
}
