/* metrics.c — Prometheus counters and the /metrics exposition.
 *
 * Requests are counted in a fixed table [route][status] of atomics (status
 * codes are < 600), so counting is one relaxed increment and needs no
 * lock; kernel times per kernel name likewise, indexed by the registry
 * position. Rendering walks the tables and asks the store, the workers and
 * the job registry for the gauges.
 *
 * Two Prometheus histograms sit beside the totals, for latency alerts:
 * spmvd_request_duration_seconds{route} (one observation per answered
 * request) and spmvd_kernel_duration_seconds{kernel} (one observation per
 * timed run, at the mean time per run of its batch: the engine reports a
 * batch's statistics, not each run's time). Each is a fixed bucket table
 * of atomics counted per bucket and summed into the cumulative `le`
 * series when rendered, so observing stays one relaxed increment.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/metrics.h"

#define MAX_STATUS 600

/* ------------------------------------------------------- histograms */

/* Upper bounds in seconds; +Inf is implicit (the last slot). */
static const double request_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                        0.1,    0.25,  0.5,    1,     2.5,  5,     10};
static const double kernel_bounds[] = {1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5, 1};
#define REQUEST_BUCKETS (sizeof request_bounds / sizeof *request_bounds + 1)
#define KERNEL_BUCKETS (sizeof kernel_bounds / sizeof *kernel_bounds + 1)
#define MAX_BUCKETS 16
#define BATCH_PARTS 5
_Static_assert(REQUEST_BUCKETS <= MAX_BUCKETS && KERNEL_BUCKETS <= MAX_BUCKETS, "histogram bucket table too small");

/* One labelled series: per-bucket counts (not cumulative), the observation
 * count and the sum in nanoseconds. */
typedef struct histogram {
    _Atomic unsigned long long bucket[MAX_BUCKETS];
    _Atomic unsigned long long count;
    _Atomic unsigned long long sum_ns;
} histogram;

static size_t bucket_of(const double *bounds, size_t nbounds, double seconds)
{
    size_t i = 0;
    while (i < nbounds && !(seconds <= bounds[i]))
        i++;
    return i; /* nbounds: +Inf (also NaN) */
}

static void histogram_observe(histogram *h, const double *bounds, size_t nbounds, double seconds,
                              unsigned long long times)
{
    if (!(seconds >= 0))
        seconds = 0;
    atomic_fetch_add_explicit(&h->bucket[bucket_of(bounds, nbounds, seconds)], times, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, times, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, (unsigned long long)(seconds * 1e9 * (double)times), memory_order_relaxed);
}

/* The _bucket, _sum and _count lines of one series. _count is written as
 * the +Inf bucket (the sum of the per-bucket counts read for this scrape),
 * so a scrape racing an observation is still monotone with +Inf == _count;
 * h->count only says whether the series has been observed at all. */
static void histogram_render(FILE *f, const char *name, const char *label, const char *value, const histogram *h,
                             const double *bounds, size_t nbounds)
{
    unsigned long long cum = 0;
    for (size_t i = 0; i <= nbounds; i++) {
        cum += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        if (i < nbounds)
            fprintf(f, "%s_bucket{%s=\"%s\",le=\"%g\"} %llu\n", name, label, value, bounds[i], cum);
        else
            fprintf(f, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %llu\n", name, label, value, cum);
    }
    fprintf(f, "%s_sum{%s=\"%s\"} %.9f\n", name, label, value,
            (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9);
    fprintf(f, "%s_count{%s=\"%s\"} %llu\n", name, label, value, cum);
}

struct metrics {
    const char *const *routes;
    size_t nroutes;
    _Atomic unsigned long long requests[METRICS_MAX_ROUTES][MAX_STATUS];
    _Atomic unsigned long long request_us[METRICS_MAX_ROUTES];
    size_t nkernels;
    _Atomic unsigned long long *kernel_runs;
    _Atomic unsigned long long *kernel_ns;
    _Atomic unsigned long long upload_bytes;
    _Atomic unsigned long long host_evictions;
    _Atomic unsigned long long batches, batched_products; /* dynamic batching (daemon/batch.c) */
    _Atomic unsigned long long batch_part_ns[BATCH_PARTS]; /* their time by part (batch_parts) */
    histogram request_hist[METRICS_MAX_ROUTES]; /* spmvd_request_duration_seconds{route} */
    histogram *kernel_hist;                     /* spmvd_kernel_duration_seconds{kernel}, nkernels + 1 */
};

/* The parts of a batch's time (spmv_batch_times), as /metrics names them. */
static const char *const batch_parts[BATCH_PARTS] = {"h2d", "layout", "spmm", "d2h", "host"};

metrics *metrics_new(const char *const *routes, size_t nroutes)
{
    metrics *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->routes = routes;
    m->nroutes = nroutes < METRICS_MAX_ROUTES ? nroutes : METRICS_MAX_ROUTES;
    m->nkernels = spmv_kernel_count();
    m->kernel_runs = calloc(m->nkernels + 1, sizeof *m->kernel_runs);
    m->kernel_ns = calloc(m->nkernels + 1, sizeof *m->kernel_ns);
    m->kernel_hist = calloc(m->nkernels + 1, sizeof *m->kernel_hist);
    if (!m->kernel_runs || !m->kernel_ns || !m->kernel_hist) {
        metrics_free(m);
        return NULL;
    }
    return m;
}

void metrics_free(metrics *m)
{
    if (!m)
        return;
    free(m->kernel_runs);
    free(m->kernel_ns);
    free(m->kernel_hist);
    free(m);
}

void metrics_request(metrics *m, size_t route, int status, double ms)
{
    if (!m || route >= m->nroutes || status < 0 || status >= MAX_STATUS)
        return;
    atomic_fetch_add_explicit(&m->requests[route][status], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->request_us[route], (unsigned long long)(ms * 1000.0), memory_order_relaxed);
    histogram_observe(&m->request_hist[route], request_bounds, REQUEST_BUCKETS - 1, ms / 1e3, 1);
}

void metrics_kernel(metrics *m, const char *kernel, double ms_per_run, int runs)
{
    for (size_t i = 0; m && i < m->nkernels; i++)
        if (strcmp(spmv_kernel_at(i)->name, kernel) == 0) {
            atomic_fetch_add(&m->kernel_runs[i], (unsigned long long)runs);
            atomic_fetch_add(&m->kernel_ns[i], (unsigned long long)(ms_per_run * runs * 1e6));
            if (runs > 0)
                histogram_observe(&m->kernel_hist[i], kernel_bounds, KERNEL_BUCKETS - 1, ms_per_run / 1e3,
                                  (unsigned long long)runs);
            return;
        }
}

void metrics_upload(metrics *m, size_t bytes)
{
    if (m)
        atomic_fetch_add(&m->upload_bytes, bytes);
}

void metrics_batch(metrics *m, int products, const spmv_batch_times *bt)
{
    if (!m)
        return;
    atomic_fetch_add(&m->batches, 1);
    atomic_fetch_add(&m->batched_products, (unsigned long long)products);
    double ms[BATCH_PARTS] = {bt->h2d_ms, bt->layout_ms, bt->spmm_ms, bt->d2h_ms, bt->host_ms};
    for (int i = 0; i < BATCH_PARTS; i++)
        if (ms[i] > 0)
            atomic_fetch_add(&m->batch_part_ns[i], (unsigned long long)(ms[i] * 1e6));
}

void metrics_host_eviction(metrics *m)
{
    if (m)
        atomic_fetch_add(&m->host_evictions, 1);
}

static void render_requests(metrics *m, FILE *f)
{
    fputs("# HELP spmvd_requests_total HTTP requests answered, by route and status.\n"
          "# TYPE spmvd_requests_total counter\n", f);
    for (size_t r = 0; r < m->nroutes; r++)
        for (int s = 0; s < MAX_STATUS; s++) {
            unsigned long long n = atomic_load(&m->requests[r][s]);
            if (n)
                fprintf(f, "spmvd_requests_total{route=\"%s\",status=\"%d\"} %llu\n", m->routes[r], s, n);
        }
    fputs("# HELP spmvd_request_seconds_total Time spent answering requests, by route.\n"
          "# TYPE spmvd_request_seconds_total counter\n", f);
    for (size_t r = 0; r < m->nroutes; r++) {
        unsigned long long us = atomic_load(&m->request_us[r]);
        if (us)
            fprintf(f, "spmvd_request_seconds_total{route=\"%s\"} %.6f\n", m->routes[r], (double)us / 1e6);
    }
}

static void render_request_histogram(metrics *m, FILE *f)
{
    fputs("# HELP spmvd_request_duration_seconds Time from a request's first byte to its answer, by route.\n"
          "# TYPE spmvd_request_duration_seconds histogram\n", f);
    for (size_t r = 0; r < m->nroutes; r++)
        if (atomic_load(&m->request_hist[r].count))
            histogram_render(f, "spmvd_request_duration_seconds", "route", m->routes[r], &m->request_hist[r],
                             request_bounds, REQUEST_BUCKETS - 1);
}

static void render_kernel_histogram(metrics *m, FILE *f)
{
    fputs("# HELP spmvd_kernel_duration_seconds Time of one timed kernel run (its batch's mean), by kernel.\n"
          "# TYPE spmvd_kernel_duration_seconds histogram\n", f);
    for (size_t i = 0; i < m->nkernels; i++)
        if (atomic_load(&m->kernel_hist[i].count))
            histogram_render(f, "spmvd_kernel_duration_seconds", "kernel", spmv_kernel_at(i)->name, &m->kernel_hist[i],
                             kernel_bounds, KERNEL_BUCKETS - 1);
}

/* The four series every worker has (queue depth, queue wait, tasks, busy
 * time), each with its HELP and TYPE, then one line per worker. */
static void render_worker_series(FILE *f, const worker_info *info, int n)
{
    static const char *const names[4] = {"spmvd_queue_depth", "spmvd_queue_wait_seconds_total", "spmvd_tasks_total",
                                         "spmvd_worker_busy_seconds_total"};
    static const char *const types[4] = {"gauge", "counter", "counter", "counter"};
    static const char *const help[4] = {
        "Tasks waiting in a device queue.", "Time tasks waited in a queue before running.",
        "Tasks a device worker ran.", "Time a device worker spent running tasks."};
    for (int which = 0; which < 4; which++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", names[which], help[which], names[which], types[which]);
        for (int i = 0; i < n; i++) {
            fprintf(f, "%s{device=\"%s\"} ", names[which], info[i].name);
            if (which == 0)
                fprintf(f, "%zu\n", info[i].queue_depth);
            else if (which == 2)
                fprintf(f, "%llu\n", info[i].tasks_run);
            else
                fprintf(f, "%.6f\n", (which == 1 ? info[i].queue_wait_ms_sum : info[i].busy_ms) / 1e3);
        }
    }
}

static void render_workers(FILE *f, spmvd *d)
{
    worker *all[CONFIG_MAX_DEVICES + 1];
    int n = 0;
    if (d->cpu)
        all[n++] = d->cpu;
    for (int i = 0; i < d->ngpus; i++)
        all[n++] = d->gpus[i];
    worker_info info[CONFIG_MAX_DEVICES + 1];
    for (int i = 0; i < n; i++)
        all[i]->ops->info(all[i], &info[i]);
    render_worker_series(f, info, n);
    fputs("# HELP spmvd_device_memory_bytes GPU memory (total, free, used by spmvd matrices).\n"
          "# TYPE spmvd_device_memory_bytes gauge\n", f);
    for (int i = 0; i < n; i++) {
        if (!info[i].have_gpu_info)
            continue;
        fprintf(f, "spmvd_device_memory_bytes{device=\"%s\",kind=\"total\"} %zu\n", info[i].name, info[i].gpu_info.mem_total);
        fprintf(f, "spmvd_device_memory_bytes{device=\"%s\",kind=\"free\"} %zu\n", info[i].name, info[i].gpu_info.mem_free);
        fprintf(f, "spmvd_device_memory_bytes{device=\"%s\",kind=\"used_by_spmvd\"} %zu\n", info[i].name,
                info[i].gpu_info.mem_used_by_spmvd);
        fprintf(f, "spmvd_device_memory_bytes{device=\"%s\",kind=\"scratch\"} %zu\n", info[i].name,
                info[i].gpu_info.mem_scratch);
    }
    fputs("# HELP spmvd_format_evictions_total Derived formats freed to make room, least recently used first.\n"
          "# TYPE spmvd_format_evictions_total counter\n", f);
    for (int i = 0; i < n; i++)
        if (info[i].have_gpu_info)
            fprintf(f, "spmvd_format_evictions_total{device=\"%s\"} %llu\n", info[i].name,
                    (unsigned long long)info[i].gpu_info.evictions);
    fprintf(f, "spmvd_format_evictions_total{device=\"host\"} %llu\n", d->metrics ? atomic_load(&d->metrics->host_evictions) : 0ULL);
}

static void render_matrices(FILE *f, spmvd *d)
{
    matrix **list;
    size_t n;
    if (!d->store || store_list(d->store, &list, &n) != SPMV_OK)
        return;
    size_t count[CONFIG_MAX_DEVICES + 1] = {0}, bytes[CONFIG_MAX_DEVICES + 1] = {0};
    size_t host_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        host_bytes += matrix_host_bytes(list[i]);
        int slot = 0;
        if (list[i]->dev_worker && list[i]->dev)
            for (int g = 0; g < d->ngpus; g++)
                if (d->gpus[g] == list[i]->dev_worker)
                    slot = g + 1;
        count[slot]++;
        if (slot)
            bytes[slot] += spmv_gpu_matrix_bytes(list[i]->dev);
    }
    store_list_free(list, n);
    fputs("# HELP spmvd_matrices Matrices held, by the device they run on (cpu: host only).\n"
          "# TYPE spmvd_matrices gauge\n", f);
    fprintf(f, "spmvd_matrices{device=\"cpu\"} %zu\n", count[0]);
    for (int g = 0; g < d->ngpus; g++)
        fprintf(f, "spmvd_matrices{device=\"%s\"} %zu\n", d->gpus[g]->name, count[g + 1]);
    fputs("# HELP spmvd_matrix_bytes Bytes of matrix storage resident, per device (host: every host copy).\n"
          "# TYPE spmvd_matrix_bytes gauge\n", f);
    fprintf(f, "spmvd_matrix_bytes{device=\"host\"} %zu\n", host_bytes);
    for (int g = 0; g < d->ngpus; g++)
        fprintf(f, "spmvd_matrix_bytes{device=\"%s\"} %zu\n", d->gpus[g]->name, bytes[g + 1]);
}

/* Resident vectors per device: count and bytes of values (daemon/vectors.c). */
static void render_vectors(FILE *f, spmvd *d)
{
    static const char *const names[2] = {"spmvd_vectors", "spmvd_vector_bytes"};
    static const char *const help[2] = {
        "Resident vectors held, by device (deleted ones a task still uses included).",
        "Bytes of resident vector values, by device."};
    if (!d->vectors)
        return;
    for (int which = 0; which < 2; which++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", names[which], help[which], names[which]);
        for (int g = -1; g < d->ngpus; g++) {
            worker *w = g < 0 ? d->cpu : d->gpus[g];
            size_t n = 0, b = 0;
            vstore_usage(d->vectors, w, &n, &b);
            fprintf(f, "%s{device=\"%s\"} %zu\n", names[which], w->name, which ? b : n);
        }
    }
}

static void render_kernels(metrics *m, FILE *f)
{
    fputs("# HELP spmvd_kernel_runs_total Timed kernel runs, by kernel.\n# TYPE spmvd_kernel_runs_total counter\n", f);
    for (size_t i = 0; i < m->nkernels; i++) {
        unsigned long long n = atomic_load(&m->kernel_runs[i]);
        if (n)
            fprintf(f, "spmvd_kernel_runs_total{kernel=\"%s\"} %llu\n", spmv_kernel_at(i)->name, n);
    }
    fputs("# HELP spmvd_kernel_seconds_total Time in timed kernel runs, by kernel.\n"
          "# TYPE spmvd_kernel_seconds_total counter\n", f);
    for (size_t i = 0; i < m->nkernels; i++) {
        unsigned long long ns = atomic_load(&m->kernel_ns[i]);
        if (atomic_load(&m->kernel_runs[i]))
            fprintf(f, "spmvd_kernel_seconds_total{kernel=\"%s\"} %.9f\n", spmv_kernel_at(i)->name, (double)ns / 1e9);
    }
}

char *metrics_render(metrics *m, struct spmvd *d)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fprintf(f, "# HELP spmvd_ready Whether the daemon is ready (store reloaded, workers up).\n"
               "# TYPE spmvd_ready gauge\nspmvd_ready %d\n", atomic_load(&d->ready) ? 1 : 0);
    fprintf(f, "# HELP spmvd_uptime_seconds Seconds since start.\n# TYPE spmvd_uptime_seconds gauge\n"
               "spmvd_uptime_seconds %.3f\n", (spmv_now_ms() - d->started_ms) / 1e3);
    render_requests(m, f);
    render_request_histogram(m, f);
    render_workers(f, d);
    render_kernels(m, f);
    render_kernel_histogram(m, f);
    render_matrices(f, d);
    render_vectors(f, d);
    if (d->jobs) {
        static const char *const states[] = {"queued", "running", "done", "failed"};
        size_t counts[4];
        jobs_count(d->jobs, counts);
        fputs("# HELP spmvd_jobs Asynchronous jobs held, by state.\n# TYPE spmvd_jobs gauge\n", f);
        for (int i = 0; i < 4; i++)
            fprintf(f, "spmvd_jobs{state=\"%s\"} %zu\n", states[i], counts[i]);
    }
    fprintf(f, "# HELP spmvd_upload_bytes_total Matrix upload bytes received.\n"
               "# TYPE spmvd_upload_bytes_total counter\nspmvd_upload_bytes_total %llu\n",
            atomic_load(&m->upload_bytes));
    fprintf(f, "# HELP spmvd_batches_total SpMMs run by dynamic batching (batch_window_us), each of two or more products.\n"
               "# TYPE spmvd_batches_total counter\nspmvd_batches_total %llu\n"
               "# HELP spmvd_batched_products_total Products answered from those SpMMs.\n"
               "# TYPE spmvd_batched_products_total counter\nspmvd_batched_products_total %llu\n",
            atomic_load(&m->batches), atomic_load(&m->batched_products));
    fputs("# HELP spmvd_batch_part_seconds_total Time of those SpMMs by part: h2d (x to the device), layout (X to rows, "
          "Y to columns on the device), spmm, d2h (y to the answers), host (the rest, packing for a CPU kernel).\n"
          "# TYPE spmvd_batch_part_seconds_total counter\n",
          f);
    for (int i = 0; i < BATCH_PARTS; i++)
        fprintf(f, "spmvd_batch_part_seconds_total{part=\"%s\"} %.6f\n", batch_parts[i],
                (double)atomic_load(&m->batch_part_ns[i]) / 1e9);
    fclose(f);
    return text;
}
