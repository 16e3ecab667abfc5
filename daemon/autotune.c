/* autotune.c — the `auto` kernel's choice, kept with each matrix.
 *
 * See autotune.h. The choice lives in three places, looked up in order:
 * the matrix's memory (matrix.tuned), the side file <state_dir>/<id>.tune
 * (so a restart does not tune again), and a fresh spmv_tune run on the
 * worker's own thread within tune_budget_ms / tune_max_runs. A side file
 * is trusted only if its kernel exists in this build, runs on the device
 * the matrix is on now, and its parameters still resolve; anything else is
 * ignored (and overwritten by the next tuning), never an error.
 *
 * A packed format the matrix does not hold yet is left out of the
 * candidates until its products repay building it (daemon/payback.h); the
 * choice remembers what it left out (`deferred`: only formats the matrix
 * can hold, never SPSELL of one not symmetric or PBSR of one without
 * blocks), and is tuned again on the first call after one of those formats
 * becomes due or gets built by a call that named its kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/autotune.h"
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/payback.h"
#include "fileio.h"
#include "daemon/worker.h"

struct worker *autotune_worker(spmvd *d, matrix *m) { return m->dev ? m->dev_worker : d->cpu; }

static spmv_device_kind device_of(const matrix *m) { return m->dev ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU; }

static int side_path(const char *dir, const char *id, const char *suffix, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s%s%s", dir, id, AUTOTUNE_SUFFIX, suffix);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

void autotune_remove(const char *dir, const char *id)
{
    char path[4096];
    if (side_path(dir, id, "", path, sizeof path) == 0 && unlink(path) != 0 && errno != ENOENT)
        log_warn("auto: cannot remove %s: %s", path, strerror(errno));
}

static json_t *params_json(const spmv_kernel *k, const spmv_params *p)
{
    json_t *o = json_object();
    for (int id = 0; o && id < SPMV_PARAM_COUNT; id++)
        if (k->params & (1u << id))
            json_object_set_new(o, spmv_param_get((spmv_param_id)id)->name, json_integer(p->v[id]));
    return o;
}

static json_t *formats_list(unsigned mask)
{
    json_t *a = json_array();
    for (int i = 0; a && i < SPMV_FORMAT_COUNT; i++)
        if (mask & (1u << i))
            json_array_append_new(a, json_string(spmv_format_name((spmv_format)(1u << i))));
    return a;
}

json_t *autotune_json(const matrix_tuning *t)
{
    if (!t->valid)
        return json_null();
    return json_pack("{s:s, s:o, s:f, s:f, s:i, s:i, s:i, s:b, s:s, s:o}", "kernel", t->kernel->name, "params",
                     params_json(t->kernel, &t->params), "median_ms", t->median_ms, "tuning_ms", t->cost_ms,
                     "tuning_runs", t->runs, "timed", t->timed, "candidates", t->candidates, "budget_hit",
                     t->budget_hit, "source", t->source ? t->source : "cached", "deferred",
                     formats_list(t->deferred));
}

/* --------------------------------------------------------- side file */

/* o as compact JSON into a new file at path, fsynced; 0 or -1 (errno). */
static int write_synced(const json_t *o, const char *path)
{
    char *text = json_dumps(o, JSON_COMPACT);
    int fd = text ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    size_t len = text ? strlen(text) : 0, done = 0;
    while (fd >= 0 && done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    int rc = fd >= 0 && done == len && fsync(fd) == 0 ? 0 : -1;
    if (fd >= 0 && close(fd) != 0)
        rc = -1;
    free(text);
    return rc;
}

static void store_side_file(const char *dir, const matrix *m, const matrix_tuning *t)
{
    char path[4096], tmp[4096];
    json_t *o = autotune_json(t);
    if (!o || side_path(dir, m->meta.id, "", path, sizeof path) || side_path(dir, m->meta.id, ".tmp", tmp, sizeof tmp))
        goto done;
    json_object_set_new(o, "device", json_string(device_of(m) == SPMV_DEVICE_GPU ? "gpu" : "cpu"));
    json_object_del(o, "source");
    /* written and fsynced before the rename: after a crash the name holds
     * the old choice or the new one, never an empty file */
    if (write_synced(o, tmp) != 0 || rename(tmp, path) != 0) {
        log_warn("auto: cannot store the choice for %s in %s: %s", m->meta.id, path, strerror(errno));
        unlink(tmp);
        goto done;
    }
    spmv_sync_dir(dir);
done:
    json_decref(o);
}

/* The side file's choice if it is usable for m now; false otherwise. */
static bool load_side_file(const char *dir, matrix *m, matrix_tuning *out)
{
    char path[4096];
    const char *kname = NULL, *dev = NULL;
    json_t *o = NULL, *params = NULL;
    bool ok = false;
    memset(out, 0, sizeof *out);
    if (side_path(dir, m->meta.id, "", path, sizeof path) || !(o = json_load_file(path, 0, NULL)))
        return false;
    if (json_unpack(o, "{s:s, s:o, s:F, s:F, s:i, s:i, s:i, s:b, s:s}", "kernel", &kname, "params", &params,
                    "median_ms", &out->median_ms, "tuning_ms", &out->cost_ms, "tuning_runs", &out->runs, "timed",
                    &out->timed, "candidates", &out->candidates, "budget_hit", &out->budget_hit, "device", &dev) != 0)
        goto done;
    out->kernel = spmv_kernel_find(kname);
    if (!out->kernel || spmv_kernel_is_auto(out->kernel) || out->kernel->op != SPMV_OP_SPMV ||
        out->kernel->device != device_of(m) || strcmp(dev, device_of(m) == SPMV_DEVICE_GPU ? "gpu" : "cpu") != 0 ||
        !json_is_object(params))
        goto done;
    for (int id = 0; id < SPMV_PARAM_COUNT; id++) {
        json_t *v = json_object_get(params, spmv_param_get((spmv_param_id)id)->name);
        if (v && json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX)
            out->params.v[id] = (int32_t)json_integer_value(v);
    }
    ok = spmv_params_resolve(out->kernel, &out->params, NULL, NULL) == SPMV_OK;
    json_t *deferred = json_object_get(o, "deferred"); /* absent in an older file: nothing deferred */
    unsigned mask = 0, fit = matrix_formats_fit(m); /* an older file may name one m cannot hold */
    size_t i;
    json_t *name;
    json_array_foreach(deferred, i, name)
        if (json_is_string(name) && spmv_formats_parse(json_string_value(name), &mask, NULL) == SPMV_OK)
            out->deferred |= mask & SPMV_FMT_PACKED & fit;
done:
    if (!ok)
        log_info("auto: ignoring %s (unusable for this matrix here; it will be tuned again)", path);
    json_decref(o);
    out->valid = ok;
    out->source = "stored";
    return ok;
}

/* ------------------------------------------------------------ tuning */

typedef struct tune_ctx {
    worker *w;
    matrix *m;
    int32_t k;
} tune_ctx;

static int run_on_worker(void *c, const spmv_kernel *k, const spmv_params *p, const void *x, void *y,
                         int32_t warmup, int32_t runs, spmv_stats *st, spmv_error *err)
{
    tune_ctx *t = c;
    worker_heartbeat(t->w); /* tuning is one long task: say we are alive */
    worker_run_args a = {.m = t->m, .k = k, .p = p, .warmup = warmup, .runs = runs, .ncols = t->k, .x = x, .y = y,
                         .st = st, .err = err, .tuning = true}; /* timed, not a product */
    return worker_run(t->w, &a);
}

/* The packed formats auto may not build for m yet (daemon/payback.h). */
static unsigned deferred_now(spmvd *d, matrix *m)
{
    payback_policy pol = {d->cfg.auto_build && strcmp(d->cfg.auto_build, "eager") == 0,
                          (uint64_t)d->cfg.auto_build_products};
    if (m->dev) {
        spmv_gpu_usage u;
        matrix_device_usage(m, &u);
        return payback_deferred(&pol, m, PAYBACK_DEVICE, u.formats, u.convert_ms);
    }
    double convert_ms[SPMV_FORMAT_COUNT];
    pthread_mutex_lock(&m->lock);
    unsigned held = m->host.formats;
    memcpy(convert_ms, m->host.convert_ms, sizeof convert_ms);
    pthread_mutex_unlock(&m->lock);
    return payback_deferred(&pol, m, PAYBACK_HOST, held, convert_ms);
}

/* A choice that left out a format auto may build now (it became due, or a
 * call built it) is tuned again. */
static bool stale(spmvd *d, matrix *m, const matrix_tuning *t)
{
    return t->deferred && (t->deferred & ~deferred_now(d, m));
}

static int tune_now(spmvd *d, worker *w, matrix *m, int32_t ncols, matrix_tuning *out, spmv_error *err)
{
    spmv_tune_options o = {device_of(m), (double)d->cfg.tune_budget_ms, (int32_t)d->cfg.tune_max_runs, 10, 0, ncols, 0};
    spmv_tune_result r;
    tune_ctx c = {w, m, ncols};
    o.skip_formats = deferred_now(d, m);
    uint64_t seed = 0;
    for (const char *s = m->meta.id; *s; s++) /* x from the id: the same matrix is tuned on the same x */
        seed = seed * 131 + (unsigned char)*s;
    o.seed = seed;
    /* what the matrix held before: the upload's pinned formats and those
     * the user's own calls built, which tuning leaves as it found them */
    spmv_gpu_usage dev_before;
    matrix_device_usage(m, &dev_before);
    pthread_mutex_lock(&m->lock);
    unsigned host_before = m->host.formats;
    pthread_mutex_unlock(&m->lock);
    int rc = spmv_tune(&m->host.csr, &o, run_on_worker, &c, &r, err);
    /* Tuning built a format per candidate; only the winner's stays (and
     * what was there before): the rest would hold memory no call reads. */
    unsigned keep = rc == SPMV_OK ? (unsigned)r.kernel->format : 0u;
    if (m->dev)
        spmv_gpu_matrix_trim(worker_gpu_ctx(w), m->dev, keep | dev_before.formats);
    worker_cpu_trim(m, keep | host_before);
    if (rc != SPMV_OK)
        return rc;
    memset(out, 0, sizeof *out);
    *out = (matrix_tuning){true, r.kernel, r.params, r.median_ms, r.cost_ms, r.runs, r.timed, r.candidates,
                           r.budget_hit, "tuned", o.skip_formats};
    log_info("auto: %s tuned in %.0f ms (%d runs, %d of %d candidates timed%s): %s, median %.4f ms", m->meta.id,
             r.cost_ms, r.runs, r.timed, r.candidates, r.budget_hit ? ", budget reached" : "", r.kernel->name,
             r.median_ms);
    return SPMV_OK;
}

int autotune_get(spmvd *d, worker *w, matrix *m, bool force, matrix_tuning *out, spmv_error *err)
{
    matrix_tuning t;
    pthread_mutex_lock(&m->lock);
    t = m->tuned;
    pthread_mutex_unlock(&m->lock);
    if (!force && t.valid && t.kernel->device == device_of(m) && !stale(d, m, &t)) {
        *out = t;
        out->source = "cached";
        return SPMV_OK;
    }
    if (force || !load_side_file(store_dir(d->store), m, &t) || stale(d, m, &t)) {
        int rc = tune_now(d, w, m, 1, &t, err);
        if (rc != SPMV_OK)
            return rc;
        store_side_file(store_dir(d->store), m, &t);
    }
    pthread_mutex_lock(&m->lock);
    m->tuned = t;
    pthread_mutex_unlock(&m->lock);
    *out = t;
    return SPMV_OK;
}

/* Choices for k > 1 stay in memory only (a few per matrix; the oldest
 * slot is reused): a restart tunes a block size again on its first use. */
int autotune_get_k(spmvd *d, worker *w, matrix *m, int32_t ncols, matrix_tuning *out, spmv_error *err)
{
    if (ncols <= 1)
        return autotune_get(d, w, m, false, out, err);
    int n = (int)(sizeof m->tuned_k / sizeof m->tuned_k[0]);
    unsigned due = deferred_now(d, m);
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < n; i++)
        if (m->tuned_k[i].valid && m->tuned_k_cols[i] == ncols && m->tuned_k[i].kernel->device == device_of(m) &&
            !(m->tuned_k[i].deferred & ~due)) {
            *out = m->tuned_k[i];
            out->source = "cached";
            pthread_mutex_unlock(&m->lock);
            return SPMV_OK;
        }
    pthread_mutex_unlock(&m->lock);
    matrix_tuning t;
    int rc = tune_now(d, w, m, ncols, &t, err);
    if (rc != SPMV_OK)
        return rc;
    pthread_mutex_lock(&m->lock);
    int slot = 0;
    for (int i = 0; i < n; i++)
        if (!m->tuned_k[i].valid) {
            slot = i;
            break;
        } else if (i == n - 1)
            slot = (int)(ncols % n);
    m->tuned_k[slot] = t;
    m->tuned_k_cols[slot] = ncols;
    pthread_mutex_unlock(&m->lock);
    *out = t;
    return SPMV_OK;
}

void autotune_forget(spmvd *d, matrix *m)
{
    pthread_mutex_lock(&m->lock);
    memset(&m->tuned, 0, sizeof m->tuned);
    memset(m->tuned_k, 0, sizeof m->tuned_k);
    memset(m->tuned_k_cols, 0, sizeof m->tuned_k_cols);
    pthread_mutex_unlock(&m->lock);
    payback_forget(m); /* the packed formats' times depend on the values */
    autotune_remove(store_dir(d->store), m->meta.id);
}

void tune_run(task *base, worker *w)
{
    tune_task *t = (tune_task *)base;
    snprintf(t->worker_name, sizeof t->worker_name, "%s", w->name);
    t->rc = autotune_get(t->d, w, t->m, true, &t->tuned, &t->err);
}
