/* info.c — the small read-only routes: health, ready, info, kernels,
 * metrics, and the job status route.
 *
 * Each answers on the first call from state the daemon already holds; none
 * touches a queue, so they stay fast while workers are busy (a health
 * check must not wait behind a benchmark). The one that waits, a job's
 * long poll (?wait=S), waits on the job registry, not on a queue.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"

static void health_begin(request *r)
{
    api_json(r, 200, json_pack("{s:s, s:s, s:f}", "status", "ok", "version", SPMV_VERSION,
                               "uptime_s", (spmv_now_ms() - r->d->started_ms) / 1000.0));
}

static void ready_begin(request *r)
{
    if (atomic_load(&r->d->draining))
        api_error_shutting_down(r);
    else if (!atomic_load(&r->d->ready))
        api_error(r, 503, "not_ready", "the daemon is still loading its stored matrices");
    else if (r->d->cluster && cluster_failed(r->d->cluster)) /* a rank died or hangs (issue 16) */
        api_error(r, 503, "cluster_failed", "the cluster has failed: %s", cluster_failed(r->d->cluster));
    else
        api_json(r, 200, json_pack("{s:s, s:I}", "status", "ready", "matrices",
                                   (json_int_t)store_count(r->d->store)));
}

static json_t *device_json(worker *w)
{
    worker_info info;
    w->ops->info(w, &info);
    json_t *o = json_pack("{s:s, s:s, s:I, s:I}", "name", info.name, "kind", info.kind,
                          "queue_depth", (json_int_t)info.queue_depth, "tasks_run", (json_int_t)info.tasks_run);
    if (!o)
        return NULL;
    if (info.gpu < 0) {
        json_object_set_new(o, "cores", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    } else if (info.have_gpu_info) {
        const spmv_gpu_info *g = &info.gpu_info;
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
        json_object_set_new(o, "index", json_integer(info.gpu));
        json_object_set_new(o, "model", json_string(g->name));
        json_object_set_new(o, "compute_capability", json_string(cc));
        json_object_set_new(o, "sm_count", json_integer(g->sm_count));
        json_object_set_new(o, "memory_total", json_integer((json_int_t)g->mem_total));
        json_object_set_new(o, "memory_free", json_integer((json_int_t)g->mem_free));
        json_object_set_new(o, "memory_used", json_integer((json_int_t)(g->mem_total - g->mem_free)));
        json_object_set_new(o, "memory_used_by_spmvd", json_integer((json_int_t)g->mem_used_by_spmvd));
        json_object_set_new(o, "memory_scratch", json_integer((json_int_t)g->mem_scratch));
        json_object_set_new(o, "format_evictions", json_integer((json_int_t)g->evictions));
    }
    return o;
}

/* The deadlines of slow clients (api/conns.c), added to `limits`. */
static json_t *with_deadlines(json_t *o, const spmvd_config *c)
{
    json_object_set_new(o, "header_timeout_s", json_integer((json_int_t)c->header_timeout_s));
    json_object_set_new(o, "body_timeout_s", json_integer((json_int_t)c->body_timeout_s));
    json_object_set_new(o, "body_min_rate", json_integer((json_int_t)c->body_min_rate));
    return o;
}

static json_t *limits_json(spmvd *d)
{
    const spmvd_limits *l = &d->limits;
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                     "max_upload_bytes", (json_int_t)atomic_load(&l->max_upload_bytes),
                     "max_body_bytes", (json_int_t)atomic_load(&l->max_body_bytes),
                     "max_rows", (json_int_t)atomic_load(&l->max_rows),
                     "max_nnz", (json_int_t)atomic_load(&l->max_nnz),
                     "max_runs", (json_int_t)atomic_load(&l->max_runs),
                     "queue_depth", (json_int_t)atomic_load(&d->cpu->queue.capacity),
                     "job_retention_s", (json_int_t)atomic_load(&l->job_retention),
                     "max_connections", (json_int_t)d->cfg.max_connections,
                     "per_ip_connections", (json_int_t)d->cfg.per_ip_connections,
                     "vector_ttl_s", (json_int_t)atomic_load(&d->vlimits.ttl_s),
                     "max_vector_bytes", (json_int_t)atomic_load(&d->vlimits.max_bytes),
                     "max_vectors", (json_int_t)atomic_load(&d->vlimits.max_count),
                     "max_ops_steps", (json_int_t)atomic_load(&l->max_ops_steps),
                     "max_solve_iterations", (json_int_t)atomic_load(&l->max_solve_iterations),
                     "connection_timeout_s", (json_int_t)d->cfg.connection_timeout,
                     "max_padding", (json_int_t)atomic_load(&l->max_padding),
                     "max_format_bytes", (json_int_t)atomic_load(&l->max_format_bytes),
                     "padding_allowance_bytes", (json_int_t)atomic_load(&l->padding_allowance_bytes),
                     "host_format_bytes", (json_int_t)atomic_load(&l->host_format_bytes));
    /* the memory bounds (issue 33), resolved: a 0 in the configuration is shown as what it was sized to */
    if (o) {
        json_object_set_new(o, "max_matrix_bytes", json_integer((json_int_t)atomic_load(&l->max_matrix_bytes)));
        json_object_set_new(o, "max_spmspm_nnz", json_integer((json_int_t)atomic_load(&l->max_spmspm_nnz)));
        json_object_set_new(o, "max_job_result_bytes", json_integer((json_int_t)atomic_load(&l->max_job_result_bytes)));
        json_object_set_new(o, "batch_window_us", json_integer((json_int_t)atomic_load(&l->batch_window_us)));
    }
    return o ? with_deadlines(o, &d->cfg) : NULL;
}

static void info_begin(request *r)
{
    spmvd *d = r->d;
#ifdef SPMV_HAVE_CUDA
    const bool cuda = true;
#else
    const bool cuda = false;
#endif
    json_t *devices = json_array();
    json_array_append_new(devices, device_json(d->cpu));
    for (int i = 0; i < d->ngpus; i++)
        json_array_append_new(devices, device_json(d->gpus[i]));
    json_t *o = json_pack("{s:s, s:{s:b, s:b}, s:b, s:f, s:I, s:o, s:o, s:b}",
                          "version", SPMV_VERSION,
                          "build", "cuda", cuda, "tls", MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES,
                          "ready", atomic_load(&d->ready),
                          "uptime_s", (spmv_now_ms() - d->started_ms) / 1000.0,
                          "matrices", (json_int_t)store_count(d->store),
                          "devices", devices,
                          "limits", limits_json(d),
                          "auth", d->auth_token != NULL);
    if (o && d->ngpus == 0)
        json_object_set_new(o, "gpu_unavailable_reason", json_string(d->gpu_reason));
    if (o && d->cluster) { /* under mpirun: the job and its state */
        const char *why = cluster_failed(d->cluster);
        json_t *cl = json_pack("{s:i, s:s, s:s, s:I, s:I, s:I}", "ranks", cluster_size(d->cluster), "host",
                               cluster_host(d->cluster), "state", why ? "failed" : "ok", "timeout_ms",
                               (json_int_t)d->cfg.cluster_timeout_ms, "heartbeat_ms",
                               (json_int_t)d->cfg.cluster_heartbeat_ms, "queue_depth",
                               (json_int_t)(d->cluster_worker ? queue_depth(&d->cluster_worker->queue) : 0));
        if (cl)
            json_object_set_new(cl, "halo", json_string(d->cfg.cluster_halo));
        if (cl)
            json_object_set_new(cl, "pulse_ms", json_integer((json_int_t)d->cfg.cluster_pulse_ms));
        if (cl && why)
            json_object_set_new(cl, "error", json_string(why));
        json_object_set_new(o, "cluster", cl);
    }
    if (o) { /* resident vectors per device: {"cpu": {"count", "bytes"}, "gpu0": ...} */
        json_t *vec = json_object();
        worker *ws[CONFIG_MAX_DEVICES + 1];
        int nw = 0;
        ws[nw++] = d->cpu;
        for (int i = 0; i < d->ngpus; i++)
            ws[nw++] = d->gpus[i];
        for (int i = 0; i < nw; i++) {
            size_t n = 0, b = 0;
            vstore_usage(d->vectors, ws[i], &n, &b);
            json_object_set_new(vec, ws[i]->name, json_pack("{s:I, s:I}", "count", (json_int_t)n, "bytes", (json_int_t)b));
        }
        json_object_set_new(o, "vectors", vec);
    }
    if (o && d->shm && d->iobufs) { /* shared-memory regions, and the binary path's buffers */
        size_t idle = 0, made = 0;
        bufpool_stats(d->iobufs, &idle, &made);
        json_object_set_new(o, "shm", json_pack("{s:b, s:I, s:I}", "enabled", atomic_load(&d->limits.allow_shm) != 0,
                                                "regions", (json_int_t)shm_count(d->shm), "max_regions",
                                                (json_int_t)atomic_load(&d->limits.max_shm_regions)));
        json_object_set_new(o, "io_buffers", json_pack("{s:b, s:I, s:I, s:I}", "pinned", d->ngpus > 0, "idle_bytes",
                                                       (json_int_t)idle, "allocated", (json_int_t)made, "max_idle_bytes",
                                                       (json_int_t)atomic_load(&d->limits.io_buffer_bytes)));
    }
    api_json(r, 200, o);
}

static json_t *params_json(const spmv_kernel *k)
{
    json_t *a = json_array();
    for (int id = 0; id < SPMV_PARAM_COUNT; id++) {
        if (!(k->params & (1u << id)))
            continue;
        const spmv_param_desc *p = spmv_param_get((spmv_param_id)id);
        json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:i, s:s}", "name", p->name, "default", p->def,
                                           "min", p->min, "max", p->max, "doc", p->doc));
    }
    return a;
}

static void kernels_begin(request *r)
{
    json_t *list = json_array();
    for (size_t i = 0; i < spmv_kernel_count(); i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        const char *reason = NULL;
        bool avail = spmvd_kernel_available(r->d, k, &reason);
        /* auto runs on the matrix's device: the host's CPU when no GPU is in use */
        bool cpu = k->device == SPMV_DEVICE_CPU || (spmv_kernel_is_auto(k) && r->d->ngpus == 0);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:b}", "name", k->name, "op", spmv_op_name(k->op),
                              "device", cpu ? "cpu" : "gpu",
                              "format", spmv_format_name(k->format), "summary", k->summary,
                              "params", params_json(k), "available", avail);
        if (o && !avail)
            json_object_set_new(o, "reason", json_string(reason));
        if (o && k->op == SPMV_OP_SPMV) /* columns of x one call multiplies (SpMM when > 1) */
            json_object_set_new(o, "max_k", json_integer(spmv_kernel_max_k(k)));
        json_array_append_new(list, o);
    }
    api_json(r, 200, json_pack("{s:o}", "kernels", list));
}

static void metrics_begin(request *r)
{
    char *text = metrics_render(r->d->metrics, r->d);
    if (!text) {
        api_error(r, 500, "out_of_memory", "out of memory rendering metrics");
        return;
    }
    api_bytes(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
}

/* GET /v1/jobs/{id}?wait=S: a long poll. The request is suspended until the
 * job ends or S seconds pass (jobs_wait: the finishing worker, the
 * registry's timer or the drain resumes it), then answered with the job
 * as it stands. Without wait, or for a finished job, at once. */
typedef struct job_get {
    job *j;
    double wait_s;
    job_waiter w;
} job_get;

static job *find_job(request *r)
{
    spmvd *d = r->d;
    jobs_sweep(d->jobs, (double)atomic_load(&d->limits.job_retention));
    job *j = jobs_get(d->jobs, r->id);
    if (!j)
        api_error(r, 404, "not_found", "no job %s (unknown, or finished more than %lld s ago)", r->id,
                  (long long)atomic_load(&d->limits.job_retention));
    return j;
}

/* A job as its text: a result kept as text is never parsed back. */
static void job_answer_text(request *r, job *j)
{
    size_t len = 0;
    char *text = job_to_text(j, &len);
    if (text)
        api_bytes(r, 200, "application/json", text, len);
    else
        api_error(r, 500, "out_of_memory", "out of memory writing the job");
}

static void job_begin(request *r)
{
    const char *ws = api_query(r, "wait");
    double wait_s = 0;
    if (ws) {
        char *end;
        wait_s = strtod(ws, &end);
        if (end == ws || *end || !(wait_s >= 0 && wait_s <= API_JOB_WAIT_MAX_S)) {
            api_error(r, 400, "invalid_parameter", "`wait` must be a number of seconds in 0..%d, not \"%s\"",
                      API_JOB_WAIT_MAX_S, ws);
            return;
        }
    }
    job *j = find_job(r);
    if (!j)
        return;
    if (!(wait_s > 0)) {
        job_answer_text(r, j);
        job_unref(j);
        return;
    }
    job_get *g = calloc(1, sizeof *g);
    if (!g) {
        job_unref(j);
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    *g = (job_get){.j = j, .wait_s = wait_s};
    r->state = g; /* job_end waits, or answers at once */
}

static void job_answer(request *r)
{
    job_get *g = r->state;
    job_answer_text(r, g->j);
}

static void job_wake(void *arg) { api_task_done(arg); }

static bool job_arm(request *r, void *ctx)
{
    job_get *g = ctx;
    return jobs_wait(r->d->jobs, g->j, g->wait_s, job_wake, r, &g->w) == 1;
}

static void job_end(request *r)
{
    if (!api_suspend(r, job_arm, r->state))
        job_answer(r); /* finished already, no wait, or draining */
}

static void job_cleanup(request *r)
{
    job_get *g = r->state;
    if (!g)
        return;
    jobs_unwait(r->d->jobs, &g->w);
    job_unref(g->j);
    free(g);
    r->state = NULL;
}

static void jobs_begin(request *r)
{
    spmvd *d = r->d;
    jobs_sweep(d->jobs, (double)atomic_load(&d->limits.job_retention));
    json_t *a = jobs_to_json(d->jobs);
    if (!a) {
        api_error(r, 500, "out_of_memory", "out of memory listing the jobs");
        return;
    }
    api_json(r, 200, json_pack("{s:I, s:o}", "count", (json_int_t)json_array_size(a), "jobs", a));
}

static void job_delete_begin(request *r)
{
    spmvd *d = r->d;
    job *j = find_job(r);
    if (!j)
        return;
    int rc = job_cancel(j);
    if (rc == 1) { /* finished: the record goes */
        jobs_drop(d->jobs, r->id);
        api_bytes(r, 204, NULL, NULL, 0);
    } else if (rc < 0) {
        api_error(r, 409, "not_cancellable", "job %s is running and cannot stop part-way (only solves, between "
                  "iterations, and benches, between kernels, do); it ends after its runs", r->id);
    } else
        api_json(r, 202, job_to_json(j));
    job_unref(j);
}

const route_handlers api_job_delete = {.begin = job_delete_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_health_get = {.begin = health_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_ready_get = {.begin = ready_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_info_get = {.begin = info_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_kernels_get = {.begin = kernels_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_metrics_get = {.begin = metrics_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
static const char *const job_query[] = {"wait", NULL};
const route_handlers api_job_get = {.begin = job_begin, .end = job_end, .resumed = job_answer, .cleanup = job_cleanup,
                                    .body_kind = API_BODY_NONE, .query = job_query};
const route_handlers api_jobs_get = {.begin = jobs_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
