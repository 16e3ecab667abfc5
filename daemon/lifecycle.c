/* lifecycle.c — the daemon's start-up, signal loop and shutdown.
 *
 * The program's main (api/main.c) calls these in order around the HTTP
 * server, which is the one thing of the start-up that is not the daemon's:
 * spmvd_boot, spmvd_open, (the server starts), spmvd_reload, spmvd_serve,
 * spmvd_drain, (the server stops accepting), spmvd_stop_workers, (the
 * server answers what is open), spmvd_close.
 *
 * Start-up order matters for systemd and for clients: configuration (exit
 * 2 on any invalid key), workers (the CPU one, then one per usable GPU),
 * the HTTP server (so /v1/health and /v1/ready answer during the reload),
 * the store reload (STATUS= lines, EXTEND_TIMEOUT_USEC= while it runs),
 * and only then ready: /v1/ready turns 200 and READY=1 goes out.
 *
 * Signals are blocked in every thread and taken here with sigtimedwait,
 * so no handler runs in async-signal context. SIGHUP re-reads the
 * configuration and applies what can change at run time (log level,
 * limits, queue depth). SIGTERM drains: stop accepting, answer queued jobs
 * 503, let running ones finish, answer every open request, exit 0. The
 * loop's tick also sends the watchdog ping while every worker is alive and
 * sweeps expired jobs.
 *
 * Under mpirun (issue 16) every rank starts here: MPI is initialised once
 * the signals are blocked (so its threads inherit the mask), rank 0 goes on
 * to be the daemon, with a cluster worker for sharded matrices, and every
 * other rank serves rank 0's commands (cluster_rank_loop) and exits when
 * rank 0 says so. Without mpirun nothing of this happens.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/memory.h"
#include "daemon/notify.h"

static int fail_config(const char *msg)
{
    fprintf(stderr, "spmvd: %s\n", msg);
    return 2;
}

/* The systemd credential a unit passes the token as (LoadCredential=
 * spmvd-token:/etc/spmvd/token, or SetCredentialEncrypted=): read from
 * $CREDENTIALS_DIRECTORY when auth_token_file names no file. */
#define TOKEN_CREDENTIAL "spmvd-token"

/* The token's first line, trailing whitespace dropped; `what` names the
 * source in messages. */
static int read_token_from(spmvd *d, const char *path, const char *what, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read %s: %s", what, path, strerror(errno));
        return -1;
    }
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    n = strlen(buf);
    while (n && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = '\0';
    if (n < 16) {
        snprintf(err, errlen, "%s: %s holds a token of %zu characters; use at least 16", what, path, n);
        return -1;
    }
    d->auth_token = strdup(buf);
    d->auth_token_len = n;
    return d->auth_token ? 0 : -1;
}

/* auth_token_file when set, else the systemd credential when present. */
static int read_token(spmvd *d, char *err, size_t errlen)
{
    if (d->cfg.auth_token_file)
        return read_token_from(d, d->cfg.auth_token_file, "config key `auth_token_file`", err, errlen);
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    char path[4096];
    if (!dir || !*dir || snprintf(path, sizeof path, "%s/%s", dir, TOKEN_CREDENTIAL) >= (int)sizeof path ||
        access(path, F_OK) != 0)
        return 0;
    return read_token_from(d, path, "systemd credential " TOKEN_CREDENTIAL, err, errlen);
}

/* ------------------------------------------------------------ workers */

static int start_workers(spmvd *d)
{
    spmv_error err = {0};
    for (int i = 0; i < (int)d->cfg.upload_workers; i++) {
        worker *w = worker_upload_new(d, i, (size_t)d->cfg.queue_depth);
        if (!w || w->ops->start(w, &err) != SPMV_OK) {
            log_error("cannot start upload worker %d: %s", i, err.message);
            worker_free(w);
            return -1;
        }
        d->loaders[d->nloaders++] = w;
    }
    d->cpu = worker_cpu_new(d, (size_t)d->cfg.queue_depth);
    if (!d->cpu || d->cpu->ops->start(d->cpu, &err) != SPMV_OK) {
        log_error("cannot start the CPU worker: %s", err.message);
        return -1;
    }
    bool all;
    int list[CONFIG_MAX_DEVICES], nlist;
    char why[256];
    config_parse_devices(d->cfg.devices, &all, list, &nlist, why, sizeof why);
    const char *reason = NULL;
    int count = spmv_gpu_count(&reason);
    if (count <= 0) {
        snprintf(d->gpu_reason, sizeof d->gpu_reason, "%s", reason ? reason : "no usable GPU on this host");
        log_info("no GPU: %s; serving CPU kernels only", d->gpu_reason);
        return 0;
    }
    if (!all && nlist == 0) {
        snprintf(d->gpu_reason, sizeof d->gpu_reason, "GPUs disabled by configuration (devices = \"%s\")", d->cfg.devices);
        log_info("%s", d->gpu_reason);
        return 0;
    }
    for (int i = 0; i < (all ? count : nlist); i++) {
        int dev = all ? i : list[i];
        if (dev >= count) {
            log_warn("config key `devices`: GPU %d does not exist (this host has %d); skipped", dev, count);
            continue;
        }
        worker *w = worker_gpu_new(d, dev, (size_t)d->cfg.device_reserve_bytes, (size_t)d->cfg.queue_depth);
        memset(&err, 0, sizeof err);
        if (!w || w->ops->start(w, &err) != SPMV_OK) {
            log_warn("GPU %d unusable, skipped: %s", dev, err.message);
            worker_free(w);
            continue;
        }
        d->gpus[d->ngpus++] = w;
    }
    if (d->ngpus == 0)
        snprintf(d->gpu_reason, sizeof d->gpu_reason, "no GPU could be opened (see the log)");
    return 0;
}

/* Rank 0 under mpirun: the cluster worker, the one thread that calls MPI. */
static int start_cluster_worker(spmvd *d)
{
    spmv_error err = {0};
    if (!d->cluster)
        return 0;
    d->cluster_worker = worker_cluster_new(d, (size_t)d->cfg.queue_depth);
    if (!d->cluster_worker || d->cluster_worker->ops->start(d->cluster_worker, &err) != SPMV_OK) {
        log_error("cannot start the cluster worker: %s", err.message);
        worker_free(d->cluster_worker);
        d->cluster_worker = NULL;
        return -1;
    }
    log_info("cluster: rank 0 of %d on %s; sharded uploads (shard=true) go to every rank", cluster_size(d->cluster),
             cluster_host(d->cluster));
    return 0;
}

void spmvd_stop_workers(spmvd *d)
{
    /* first: a running ingest may still hand its load to a device's worker */
    for (int i = 0; i < d->nloaders; i++)
        d->loaders[i]->ops->stop(d->loaders[i]);
    if (d->cluster_worker) /* sends shutdown to every rank */
        d->cluster_worker->ops->stop(d->cluster_worker);
    if (d->cpu)
        d->cpu->ops->stop(d->cpu);
    for (int i = 0; i < d->ngpus; i++)
        d->gpus[i]->ops->stop(d->gpus[i]);
}

static void free_workers(spmvd *d)
{
    for (int i = 0; i < d->nloaders; i++)
        worker_free(d->loaders[i]);
    d->nloaders = 0;
    worker_free(d->cluster_worker);
    d->cluster_worker = NULL;
    worker_free(d->cpu);
    for (int i = 0; i < d->ngpus; i++)
        worker_free(d->gpus[i]);
    d->cpu = NULL;
    d->ngpus = 0;
}

/* ------------------------------------------------------------- reload */

typedef struct reload_ctx {
    spmvd *d;
    double last_status_ms;
} reload_ctx;

typedef struct gpu_load {
    matrix *m;
    spmv_error err;
} gpu_load;

typedef struct shard_load {
    matrix *m;
    bool gpu;
    spmv_error err;
} shard_load;

static int shard_load_fn(worker *w, void *arg)
{
    shard_load *s = arg;
    return worker_cluster_load(w, s->m, s->gpu, true, &s->err);
}

/* A sharded matrix is re-sharded over the ranks of this job, whatever
 * their number when it was stored (a rank whose own shard file holds the
 * shard it would be sent reads it from there: cluster/shardfile.c);
 * without a cluster it is served whole from the host, with a warning. */
static void reload_shards(spmvd *d, matrix *m)
{
    if (!d->cluster_worker) {
        log_warn("store: %s was sharded; spmvd runs without mpirun now, so it is held whole on the host", m->meta.id);
        return;
    }
    shard_load s = {.m = m, .gpu = m->meta.device != MATFILE_DEVICE_HOST && d->ngpus > 0};
    if (spmvd_call_on_worker(d->cluster_worker, shard_load_fn, &s) != SPMV_OK)
        log_warn("store: %s could not be sharded (%s); it is held whole on the host", m->meta.id, s.err.message);
    else
        log_info("store: %s sharded over %d ranks", m->meta.id, cluster_size(d->cluster));
}

static int gpu_load_fn(worker *w, void *arg)
{
    gpu_load *g = arg;
    return w->ops->matrix_load(w, g->m, &g->err);
}

/* Puts a reloaded matrix back on a GPU (the one it was on if that one is
 * in use, else the one with the most free memory); on failure it stays on
 * the host, with a log line. */
static void reload_to_gpu(spmvd *d, matrix *m)
{
    worker *w = spmvd_pick_gpu(d, m->meta.device);
    if (!w)
        w = spmvd_pick_gpu(d, -1);
    gpu_load g = {.m = m};
    if (!w) {
        log_warn("store: %s was on a GPU; none here, kept on the host", m->meta.id);
        m->meta.device = MATFILE_DEVICE_HOST;
        return;
    }
    int rc = spmvd_call_on_worker(w, gpu_load_fn, &g);
    if (rc != SPMV_OK)
        log_warn("store: %s stays on the host: %s", m->meta.id, g.err.message);
}

static int reload_one(void *ctx, const matfile_meta *meta, spmv_csr *csr, spmv_error *err)
{
    reload_ctx *rc = ctx;
    spmvd *d = rc->d;
    matrix *m;
    bool on_gpu = meta->device != MATFILE_DEVICE_HOST && !meta->sharded;
    spmv_format_limits lim = spmvd_format_limits(d);
    int st = matrix_new_from_csr(meta, csr, on_gpu || meta->sharded ? SPMV_FMT_CSR : meta->formats, &lim, &m, err);
    if (st != SPMV_OK)
        return st;
    if (on_gpu)
        reload_to_gpu(d, m);
    if (meta->sharded)
        reload_shards(d, m);
    store_adopt(d->store, m);
    matrix_unref(m);
    return SPMV_OK;
}

/* A stored matrix is admitted as an upload is, before its arrays are
 * read: a file stored before the bounds, or under a larger
 * max_matrix_bytes, or too large for the memory the host has now, is
 * skipped and kept (so a restart never loops into the OOM killer). */
static int reload_admit(void *ctx, const matfile_meta *meta, int64_t csr_bytes, int64_t peak, spmv_error *err)
{
    reload_ctx *rc = ctx;
    int64_t held = 0;
    char what[96];
    snprintf(what, sizeof what, "stored matrix %s", meta->id);
    int st = memory_admit_matrix(rc->d, csr_bytes, peak, what, &held, err);
    memory_release(rc->d, &held); /* one at a time: the check is all */
    return st;
}

static void reload_progress(void *ctx, size_t done, size_t total)
{
    reload_ctx *rc = ctx;
    double now = spmv_now_ms();
    /* every file near the end, else at most four lines a second */
    if (done == total || now - rc->last_status_ms > 250.0) {
        notify_status("loaded %zu/%zu matrices", done, total);
        notify_extend_timeout(30ULL * 1000000ULL);
        rc->last_status_ms = now;
    }
}

static void reload_store(spmvd *d)
{
    reload_ctx rc = {.d = d, .last_status_ms = spmv_now_ms()};
    double t0 = spmv_now_ms();
    notify_status("loading stored matrices from %s", d->cfg.state_dir);
    size_t n = store_reload(d->store, reload_admit, reload_one, reload_progress, &rc);
    log_info("store: %zu matrices loaded from %s in %.1f ms", n, d->cfg.state_dir, spmv_now_ms() - t0);
}

/* ------------------------------------------------------------- signals */

/* Shared-memory regions are pinned for DMA when there is a GPU to do it. */
static int pin_region(void *p, size_t n, char *why, size_t whylen)
{
    spmv_error err = {0};
    int rc = spmv_gpu_host_pin(p, n, &err);
    if (rc != SPMV_OK) {
        snprintf(why, whylen, "%s", err.message);
        log_warn("shared-memory region of %zu bytes not pinned (copies go through pread/pwrite): %s", n, err.message);
    }
    return rc == SPMV_OK ? 0 : -1;
}

static int ipc_open(int device, const void *handle, void **dptr, size_t *bytes, char *why, size_t whylen)
{
    spmv_error err = {0};
    int rc = spmv_gpu_ipc_open(device, handle, dptr, bytes, &err);
    if (rc != SPMV_OK)
        snprintf(why, whylen, "%s", err.message);
    return rc == SPMV_OK ? 0 : -1;
}

static void reload_config(spmvd *d, int argc, char **argv)
{
    spmvd_config c;
    char err[512];
    notify_reloading();
    if (config_load(&c, argc, argv, err, sizeof err) != 0) {
        log_error("SIGHUP: configuration not reloaded: %s", err);
        config_free(&c);
        notify_ready();
        return;
    }
    spmvd_limits_from_config(&d->limits, &c);
    spmvd_vlimits_from_config(&d->vlimits, &c);
    if (!c.allow_shm && d->shm) {
        size_t n = shm_clear(d->shm);
        if (n)
            log_warn("SIGHUP: allow_shm is off: %zu shared-memory region%s unregistered", n, n == 1 ? "" : "s");
    }
    queue_set_capacity(&d->cpu->queue, (size_t)c.queue_depth);
    for (int i = 0; i < d->nloaders; i++)
        queue_set_capacity(&d->loaders[i]->queue, (size_t)c.queue_depth);
    for (int i = 0; i < d->ngpus; i++)
        queue_set_capacity(&d->gpus[i]->queue, (size_t)c.queue_depth);
    /* at warn so it shows under any level but error; the new level applies after it */
    log_warn("SIGHUP: configuration reloaded: log_level=%s max_upload_bytes=%lld max_body_bytes=%lld max_runs=%lld "
             "queue_depth=%lld job_retention=%lld max_rows=%lld max_nnz=%lld (other keys need a restart)",
             c.log_level, (long long)c.max_upload_bytes, (long long)c.max_body_bytes, (long long)c.max_runs,
             (long long)c.queue_depth, (long long)c.job_retention, (long long)c.max_rows, (long long)c.max_nnz);
    log_set_level((log_level)log_level_parse(c.log_level));
    config_free(&c);
    notify_ready();
}

static bool workers_alive(spmvd *d, double stale_ms)
{
    if (!worker_alive(d->cpu, stale_ms))
        return false;
    for (int i = 0; i < d->nloaders; i++)
        if (!worker_alive(d->loaders[i], stale_ms))
            return false;
    for (int i = 0; i < d->ngpus; i++)
        if (!worker_alive(d->gpus[i], stale_ms))
            return false;
    return true;
}

void spmvd_serve(spmvd *d, int argc, char **argv)
{
    uint64_t wd_usec = notify_watchdog_usec();
    double wd_ms = (double)wd_usec / 1000.0;
    double tick_ms = wd_usec ? wd_ms / 4 : 1000.0;
    if (tick_ms > 1000.0)
        tick_ms = 1000.0;
    if (tick_ms < 10.0)
        tick_ms = 10.0;
    double last_ping = 0, stale_ms = wd_ms > 1000.0 ? wd_ms : 1000.0;
    for (;;) {
        struct timespec ts = {(time_t)(tick_ms / 1000.0), (long)((tick_ms - 1000.0 * (long)(tick_ms / 1000.0)) * 1e6)};
        int sig = sigtimedwait(&d->signals, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            log_info("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            return;
        }
        if (sig == SIGHUP)
            reload_config(d, argc, argv);
        double now = spmv_now_ms();
        if (wd_usec && now - last_ping >= wd_ms / 3) {
            if (workers_alive(d, stale_ms)) {
                notify_watchdog();
                last_ping = now;
            } else {
                log_error("a worker is stuck: withholding the watchdog ping");
            }
        }
        jobs_sweep(d->jobs, (double)atomic_load(&d->limits.job_retention));
        size_t expired = vstore_sweep(d->vectors, (double)atomic_load(&d->vlimits.ttl_s));
        if (expired)
            log_info("%zu resident vector%s expired (vector_ttl_s %lld)", expired, expired == 1 ? "" : "s",
                     (long long)atomic_load(&d->vlimits.ttl_s));
    }
}

/* ------------------------------------------------------------- the job */

static void cluster_log(int level, const char *msg)
{
    if (level == 0)
        log_error("cluster: %s", msg);
    else if (level == 1)
        log_warn("cluster: %s", msg);
    else
        log_info("cluster: %s", msg);
}

/* Under mpirun: MPI up (signals already blocked). 0 and d->cluster set (or
 * NULL for a job of one process without MPI support), or -1 with the
 * reason logged. */
static int join_job(spmvd *d, int *argc, char ***argv)
{
    if (!cluster_launched())
        return 0;
    static char shard_dir[4200]; /* each rank's own shard files (ranks > 0) */
    snprintf(shard_dir, sizeof shard_dir, "%s/shards", d->cfg.state_dir);
    cluster_options o = {.timeout_ms = (double)d->cfg.cluster_timeout_ms,
                         .heartbeat_ms = (double)d->cfg.cluster_heartbeat_ms,
                         .tune_budget_ms = (int32_t)d->cfg.tune_budget_ms,
                         .tune_max_runs = (int32_t)d->cfg.tune_max_runs,
                         .limits = spmvd_format_limits(d),
                         .log = cluster_log,
                         .shard_dir = shard_dir,
                         .halo_ipc = strcmp(d->cfg.cluster_halo, "nccl") != 0,
                         .pulse_ms = (int32_t)d->cfg.cluster_pulse_ms,
                         .pulse_addr = d->cfg.cluster_pulse_addr,
                         .no_local_liveness = !d->cfg.cluster_local_liveness};
    spmv_error err = {0};
    if (cluster_init(argc, argv, &o, &d->cluster, &err) != SPMV_OK) {
        if (cluster_launched_size() == 1) {
            log_warn("started by mpirun with one process, without a cluster: %s", err.message);
            return 0;
        }
        log_error("started by mpirun with %d processes, but: %s", cluster_launched_size(), err.message);
        return -1;
    }
    return 0;
}

/* rank0.pid in the state directory: what a systemd unit's ExecStop signals
 * to stop the whole job cleanly (docs/cluster.md). */
static void write_pid_file(spmvd *d, bool remove)
{
    char path[4096];
    if (!d->cluster || snprintf(path, sizeof path, "%s/rank0.pid", d->cfg.state_dir) >= (int)sizeof path)
        return;
    if (remove) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        log_warn("cluster: cannot write %s: %s", path, strerror(errno));
        return;
    }
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
}

static int check_config(spmvd *d)
{
    char *text = config_to_json(&d->cfg);
    printf("%s\n", text ? text : "{}");
    free(text);
    const char *file = d->cfg.config_file;
    fprintf(stderr, "spmvd: configuration OK%s%s%s\n", file ? " (" : "", file ? file : "", file ? ")" : "");
    return 0;
}

/* Everything before the daemon's state exists: configuration, help and
 * version, the token, --check-config, the limits, the signals (blocked
 * here, so every thread made later inherits the mask) and, under mpirun,
 * the job: a rank other than 0 serves rank 0 until told to stop. -1 to go
 * on, or the exit status. */
int spmvd_boot(spmvd *d, int *argc, char ***argv)
{
    char err[512];
    log_init();
    d->started_ms = spmv_now_ms();
    if (config_load(&d->cfg, *argc, *argv, err, sizeof err) != 0)
        return fail_config(err);
    if (d->cfg.show_help) {
        config_print_help((*argv)[0]);
        return 0;
    }
    if (d->cfg.show_version) {
#ifdef SPMV_HAVE_CUDA
        printf("spmvd %s (CUDA build)\n", SPMV_VERSION);
#else
        printf("spmvd %s (CPU-only build)\n", SPMV_VERSION);
#endif
        return 0;
    }
    if (read_token(d, err, sizeof err) != 0)
        return fail_config(err);
    if (d->cfg.check_only)
        return check_config(d);
    log_set_level((log_level)log_level_parse(d->cfg.log_level));
    spmvd_limits_from_config(&d->limits, &d->cfg);
    spmvd_vlimits_from_config(&d->vlimits, &d->cfg);
    sigemptyset(&d->signals);
    sigaddset(&d->signals, SIGTERM);
    sigaddset(&d->signals, SIGINT);
    sigaddset(&d->signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &d->signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (join_job(d, argc, argv) != 0)
        return 2;
    if (d->cluster && cluster_rank(d->cluster) > 0) { /* not the daemon: rank 0's hands */
        int rc = cluster_rank_loop(d->cluster);
        cluster_finish(d->cluster);
        config_free(&d->cfg);
        free(d->auth_token);
        return rc;
    }
    return -1;
}

/* The store, registries, metrics (counting requests by the server's
 * `routes`) and workers; 0, or -1 logged. */
int spmvd_open(spmvd *d, const char *const *routes, size_t nroutes)
{
    spmv_error serr = {0};
    log_info("spmvd %s starting (state %s, %lld HTTP threads)", SPMV_VERSION, d->cfg.state_dir,
             (long long)d->cfg.threads);
    if (store_open(d->cfg.state_dir, &d->store, &serr) != SPMV_OK) {
        log_error("%s", serr.message);
        return -1;
    }
    d->jobs = jobs_new();
    d->vectors = vstore_new();
    d->metrics = metrics_new(routes, nroutes);
    if (!d->jobs || !d->vectors || !d->metrics || start_workers(d) != 0 || start_cluster_worker(d) != 0)
        return -1;
    write_pid_file(d, false);
    shm_pin_hooks pin = {pin_region, spmv_gpu_host_unpin, ipc_open, spmv_gpu_ipc_close};
    if (!(d->shm = shm_registry_new(d->ngpus > 0 ? &pin : NULL)) ||
        !(d->iobufs = bufpool_new(&d->limits.io_buffer_bytes, d->ngpus > 0)))
        return -1;
    return 0;
}

/* The stored matrices back (the server already answers /v1/health and
 * /v1/ready meanwhile), then ready. */
void spmvd_reload(spmvd *d)
{
    reload_store(d);
    atomic_store(&d->ready, true);
    notify_ready();
    log_info("ready: %zu matrices, %d GPU(s)", store_count(d->store), d->ngpus);
}

/* SIGTERM taken: no new work from here on. */
void spmvd_drain(spmvd *d)
{
    atomic_store(&d->draining, true);
    jobs_wake_all(d->jobs); /* long polls answer now, not at their deadline */
    notify_stopping();
}

/* Frees what spmvd_open made (any part of it), once the workers stopped. */
void spmvd_close(spmvd *d)
{
    shm_registry_free(d->shm); /* unpinned while the GPU contexts live; no task holds a region now */
    bufpool_free(d->iobufs);
    free_workers(d);
    store_close(d->store);
    jobs_free(d->jobs);
    vstore_free(d->vectors);
    metrics_free(d->metrics);
    free(d->auth_token);
    write_pid_file(d, true);
    config_free(&d->cfg);
    cluster_finish(d->cluster);
}
