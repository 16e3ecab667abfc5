/* bench.c — POST /v1/matrices/{id}/bench: many kernels, one x, a table.
 *
 * A job by default (202 + /v1/jobs/{id}, waited for with ?wait=S): a sweep
 * can take minutes; with "async": false the request waits and the table is
 * the answer (200), as a script timing a few kernels wants. The body
 * is optional JSON: {"kernels":[...] (default: every kernel available for
 * this matrix), "runs" (10), "warmup" (2), "block_sizes" (32..1024, powers
 * of two), "hack_sizes" (16, 32, 64), "threads" (the CPU kernels' thread
 * counts, a list or "sweep" for 1..the host's threads; default: not
 * swept), "stat" ("median" or "mean"), "verify" (true), "seed"}. Each
 * kernel runs once per combination of the swept parameters it takes, on
 * one random x drawn from the seed (reported, so a run can be repeated).
 * cpu.csr.serial always runs first: it is the baseline of every "speedup"
 * and of a CPU row's "efficiency" (speedup / the threads it ran on); a
 * default sweep skips cpu.csr.chunked where its passes make it
 * pathological (excessive, below) and PBSR's kernels on a matrix without
 * complete blocks (one pass over its pattern, stopping at the first
 * incomplete block row), and every entry counts at its own work
 * against max_request_work;
 * "ratio_cusparse" compares with cusparse.csr when that ran too. All of
 * them, the rates and "best" are at the statistic "stat" names (the
 * median unless asked).
 *
 * `auto` is benched like a kernel wherever it serves spmv, a CPU-only host
 * included: its row times the kernel and parameters the tuner chose for
 * this matrix (tuning first, on this worker, when nothing was chosen yet),
 * carries the choice under "auto", and is never the "best" (it repeats a
 * row of the table).
 *
 * The whole sweep is one task on the matrix's device worker (its GPU for a
 * GPU-resident matrix, else the CPU queue), so it never overlaps another
 * job on that device; CPU kernels of a GPU matrix's sweep run on that
 * GPU's worker thread, a documented trade-off (they may overlap a CPU
 * queue job). Progress is reported after every run.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/decode.h"
#include "daemon/bench.h"
#include "daemon/log.h"

/* --------------------------------------------------------- planning */

/* The swept parameters, in the order their loops nest. */
static const spmv_param_id swept[3] = {SPMV_PARAM_BLOCK_SIZE, SPMV_PARAM_HACK_SIZE, SPMV_PARAM_THREADS};

/* The values a bench sweeps: per swept parameter a list (n 0: none). */
typedef struct bench_sweep {
    const int32_t *v[3];
    size_t n[3];
} bench_sweep;

/* Whether k's parameter `id` is swept: k takes it, and for `threads` k is
 * a CPU kernel (gpu.csr.vector's `threads` are lanes per row, not a team). */
static bool sweeps(const spmv_kernel *k, const bench_sweep *s, int i)
{
    if (!s->n[i] || !(k->params & (1u << swept[i])))
        return false;
    return swept[i] != SPMV_PARAM_THREADS || k->device == SPMV_DEVICE_CPU;
}

/* How many entries kernel k makes: the product of its swept lists. */
static size_t combos(const spmv_kernel *k, const bench_sweep *s)
{
    size_t n = 1;
    for (int i = 0; i < 3; i++)
        if (sweeps(k, s, i))
            n *= s->n[i];
    return n;
}

/* Appends every sweep combination of kernel k. */
static int plan_kernel(bench_task *b, const spmv_kernel *k, const bench_sweep *s, size_t cap)
{
    size_t n[3];
    for (int i = 0; i < 3; i++)
        n[i] = sweeps(k, s, i) ? s->n[i] : 1;
    for (size_t a = 0; a < n[0]; a++)
        for (size_t h = 0; h < n[1]; h++)
            for (size_t t = 0; t < n[2]; t++) {
                if (b->nentries >= cap)
                    return -1;
                bench_entry *e = &b->entries[b->nentries++];
                size_t at[3] = {a, h, t};
                memset(e, 0, sizeof *e);
                e->k = k;
                for (int i = 0; i < 3; i++)
                    if (sweeps(k, s, i))
                        e->p.v[swept[i]] = s->v[i][at[i]];
            }
    return 0;
}

static bool kernel_usable(request *r, matrix *m, const spmv_kernel *k, const char **why)
{
    if (!spmvd_kernel_available(r->d, k, why))
        return false;
    if (k->device == SPMV_DEVICE_GPU && !m->dev && !spmv_kernel_is_auto(k)) {
        *why = "the matrix is held on the host only";
        return false;
    }
    if (k->format == SPMV_FMT_SPSELL && !matrix_symmetric(m)) {
        *why = "it reads SPSELL, built only for an exactly symmetric matrix, and this one is not";
        return false;
    }
    return true;
}

/* A default sweep (no kernel list) leaves out a kernel whose work a run at
 * its defaults is pathological (spmv_kernel_work_excessive: cpu.csr.chunked
 * with span 8 on a wide matrix); naming it runs it. */
static bool excessive(const matrix *m, const spmv_kernel *k, const char **why)
{
    const spmv_matrix *h = &m->host;
    if (!spmv_kernel_work_excessive(spmv_kernel_work(k, NULL, h->rows, h->cols, h->nnz), h->rows, h->nnz))
        return false;
    *why = "its passes over the rows at the default span cost over 16 times a product's work on this matrix "
           "(name it in \"kernels\" to run it anyway)";
    return true;
}

static const spmv_kernel *requested(const bench_req *q, size_t i)
{
    return q->nkernels ? q->kernels[i] : spmv_kernel_at(i);
}

static int plan(request *r, bench_task *b, const bench_req *q)
{
    const bench_sweep s = {{q->block_sizes, q->hack_sizes, q->threads}, {q->nblock_sizes, q->nhack_sizes, q->nthreads}};
    const bench_sweep none = {{NULL, NULL, NULL}, {0, 0, 0}};
    size_t n = q->nkernels ? q->nkernels : spmv_kernel_count(), cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += combos(requested(q, i), &s);
    b->entries = calloc(cap, sizeof *b->entries);
    b->skipped = json_array();
    if (!b->entries || !b->skipped)
        return -1;
    /* the baseline first */
    plan_kernel(b, spmv_kernel_find("cpu.csr.serial"), &none, cap);
    for (size_t i = 0; i < n; i++) {
        const spmv_kernel *k = requested(q, i);
        const char *why = NULL;
        if (strcmp(k->name, "cpu.csr.serial") == 0 || k->op != SPMV_OP_SPMV)
            continue;
        if (!kernel_usable(r, b->m, k, &why)) {
            json_array_append_new(b->skipped, json_pack("{s:s, s:s}", "kernel", k->name, "reason", why));
            continue;
        }
        if (!q->nkernels && excessive(b->m, k, &why)) {
            json_array_append_new(b->skipped, json_pack("{s:s, s:s}", "kernel", k->name, "reason", why));
            continue;
        }
        spmv_error nb; /* PBSR's kernels refuse a matrix without blocks: a default sweep says why instead */
        if (!q->nkernels && k->format == SPMV_FMT_PBSR && spmv_csr_block_size(&b->m->host.csr, &nb) == 0) {
            json_array_append_new(b->skipped, json_pack("{s:s, s:s}", "kernel", k->name, "reason", nb.message));
            continue;
        }
        if (plan_kernel(b, k, &s, cap) != 0)
            return -1;
    }
    return 0;
}

/* The whole sweep's work: every entry at its kernel's work a run. */
static int64_t plan_work(const bench_task *b)
{
    const spmv_matrix *h = &b->m->host;
    int64_t total = 0, runs = (int64_t)b->runs + b->warmup;
    for (size_t i = 0; i < b->nentries; i++) {
        int64_t w = spmv_kernel_work(b->entries[i].k, &b->entries[i].p, h->rows, h->cols, h->nnz);
        if (w > (INT64_MAX - total) / (runs > 0 ? runs : 1))
            return INT64_MAX;
        total += w * runs;
    }
    return total;
}

/* -------------------------------------------------------------- table */

/* A bench and the request waiting for it ("async": false; r NULL for a
 * job), with what the table is written at. bench_task first: bench_free
 * frees the whole. */
typedef struct bench_call {
    bench_task b;
    request *r;
    int status;            /* the answer, for the request: built by the finish */
    json_t *answer;
    spmv_stat stat;        /* the statistic of speedup, efficiency, best and the rates */
    json_t *threads;       /* the thread counts swept, or NULL */
} bench_call;

static double tolerance(spmv_dtype dt) { return dt == SPMV_FLOAT32 ? 1e-4 : 1e-10; }

/* The comparisons of one row with the baseline and cuSPARSE (ms at the
 * bench's statistic; base_ms, cus_ms <= 0 when those did not run). */
static void ratios_json(json_t *o, const bench_entry *e, double ms, double base_ms, double cus_ms)
{
    double speedup = base_ms > 0 && ms > 0 ? base_ms / ms : NAN;
    json_object_set_new(o, "speedup", api_json_real(speedup));
    if (e->threads > 0) { /* a CPU row: its team, and the speedup a thread of it */
        json_object_set_new(o, "threads_used", json_integer(e->threads));
        if (base_ms > 0)
            json_object_set_new(o, "efficiency", api_json_real(speedup / e->threads));
    }
    if (cus_ms > 0)
        json_object_set_new(o, "ratio_cusparse", api_json_real(ms > 0 ? cus_ms / ms : NAN));
}

static json_t *entry_json(const bench_call *c, const bench_entry *e, double base_ms, double cus_ms)
{
    const bench_task *b = &c->b;
    const spmv_kernel *ran = e->ran ? e->ran : e->k;
    json_t *params = api_params_json(ran, &e->p, b->m);
    json_t *o = json_pack("{s:s, s:s, s:o}", "kernel", e->k->name,
                          "device", ran->device == SPMV_DEVICE_CPU ? "cpu" : "gpu", "params", params);
    if (o && e->ran && e->ran != e->k && e->tuned.valid)
        json_object_set_new(o, "auto", autotune_json(&e->tuned));
    if (e->rc != SPMV_OK) {
        json_object_set_new(o, "error", json_string(e->error));
        return o;
    }
    spmv_stats s = e->st;
    spmv_stats_use(&s, c->stat);
    json_object_set_new(o, "stats", api_stats_json(&s));
    ratios_json(o, e, spmv_stats_ms(&s, c->stat), base_ms, cus_ms);
    if (b->verify) {
        json_object_set_new(o, "max_rel_err", api_json_real(e->max_rel_err));
        json_object_set_new(o, "verified", json_boolean(e->max_rel_err <= tolerance(b->m->host.dtype)));
    }
    return o;
}

/* {"kernel", "params", "median_ms", "mean_ms"} of the fastest verified row
 * at the bench's statistic. */
static json_t *best_json(const bench_task *b, const bench_entry *best)
{
    return json_pack("{s:s, s:o, s:o, s:o}", "kernel", best->k->name, "params",
                     api_params_json(best->ran ? best->ran : best->k, &best->p, b->m), "median_ms",
                     api_json_real(best->st.median_ms), "mean_ms", api_json_real(best->st.mean_ms));
}

static json_t *table_json(const bench_call *c)
{
    const bench_task *b = &c->b;
    double base_ms = -1, cus_ms = -1, best_ms = INFINITY;
    const bench_entry *best = NULL;
    for (size_t i = 0; i < b->nentries; i++) {
        const bench_entry *e = &b->entries[i];
        double ms = spmv_stats_ms(&e->st, c->stat);
        if (e->rc != SPMV_OK)
            continue;
        if (strcmp(e->k->name, "cpu.csr.serial") == 0)
            base_ms = ms;
        if (strcmp(e->k->name, "cusparse.csr") == 0 && (cus_ms < 0 || ms < cus_ms))
            cus_ms = ms;
        if (ms < best_ms && !spmv_kernel_is_auto(e->k) && (!b->verify || e->max_rel_err <= tolerance(b->m->host.dtype))) {
            best_ms = ms;
            best = e;
        }
    }
    json_t *rows = json_array();
    for (size_t i = 0; i < b->nentries; i++)
        json_array_append_new(rows, entry_json(c, &b->entries[i], base_ms, cus_ms));
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:i, s:i, s:s, s:b, s:I, s:s, s:o, s:O}", "matrix", b->m->meta.id,
                          "dtype", matrix_dtype_name(b->m), "rows", (json_int_t)b->m->host.rows,
                          "cols", (json_int_t)b->m->host.cols, "nnz", (json_int_t)b->m->host.nnz, "runs", b->runs,
                          "warmup", b->warmup, "stat", spmv_stat_name(c->stat), "verify", b->verify,
                          "seed", (json_int_t)(b->seed & INT64_MAX), "baseline", "cpu.csr.serial", "results", rows,
                          "skipped", b->skipped);
    if (o && c->threads)
        json_object_set(o, "threads", c->threads);
    if (o && best)
        json_object_set_new(o, "best", best_json(b, best));
    return o;
}

static void bench_call_free(bench_call *c)
{
    if (!c)
        return;
    json_decref(c->answer);
    json_decref(c->threads);
    bench_free(&c->b);
}

static void bench_finish(task *base, int status)
{
    bench_call *c = (bench_call *)base;
    bench_task *b = &c->b;
    int http = 200;
    json_t *body;
    if (status != SPMV_OK) {
        http = 503;
        body = api_error_body("shutting_down", "the daemon shut down before the bench ran");
    } else if (!(body = table_json(c))) {
        http = 500;
        body = api_error_body("out_of_memory", "out of memory writing the table");
    } else {
        log_info("bench: %s: %zu runs done", b->m->meta.id, b->nentries);
    }
    if (c->r) {
        c->status = http;
        c->answer = body;
        api_task_done(c->r);
        return;
    }
    job_finish(b->job, http, body);
    bench_call_free(c);
}

/* A synchronous bench's answer, on an HTTP thread once resumed. */
static void bench_answer(request *r)
{
    bench_call *c = r->state;
    json_t *body = c->answer;
    c->answer = NULL;
    if (body)
        api_json(r, c->status, body);
    else
        api_error(r, 500, "out_of_memory", "out of memory writing the table");
}

/* ------------------------------------------------------------ request */

/* A bench body holds a few lists of names and sizes: 1 MiB is plenty. */
static int64_t bench_body_limit(request *r)
{
    int64_t limit = atomic_load(&r->d->limits.max_body_bytes);
    return limit < (1 << 20) ? limit : (1 << 20);
}

static const char *bench_limit_key(request *r)
{
    return bench_body_limit(r) < (1 << 20) ? "max_body_bytes" : "a bench body's fixed 1 MiB";
}

static void bench_begin(request *r)
{
    if (!api_check_content_length(r, bench_body_limit(r), bench_limit_key(r)))
        return;
    bench_call *c = calloc(1, sizeof *c);
    if (!c) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    bench_task *b = &c->b;
    r->state = c;
    b->d = r->d;
    b->m = api_get_matrix(r);
    api_refuse_sharded(r, b->m, "/bench");
}

static void bench_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, bench_body_limit(r), bench_limit_key(r));
}

/* "threads": "sweep" as 1..the host's OpenMP threads (what a CPU kernel's
 * default team is); the counts swept kept for the table. 0, or -1
 * answered. */
static int resolve_threads(request *r, bench_call *c, bench_req *q)
{
    if (q->threads_sweep) {
        int32_t n = spmv_cpu_threads(0, INT64_MAX);
        if (n > API_BENCH_MAX_THREADS) {
            api_error(r, 400, "invalid_request", "`threads`: \"sweep\" would run 1..%d threads, more than the %d "
                      "counts a bench sweeps; give the counts as a list", n, API_BENCH_MAX_THREADS);
            return -1;
        }
        for (int32_t t = 1; t <= n; t++)
            q->threads[t - 1] = t;
        q->nthreads = (size_t)n;
    }
    if (q->nthreads && !(c->threads = json_array())) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return -1;
    }
    for (size_t i = 0; i < q->nthreads; i++)
        json_array_append_new(c->threads, json_integer(q->threads[i]));
    return 0;
}

static void bench_end(request *r)
{
    bench_call *c = r->state;
    bench_task *b = &c->b;
    bench_req q;
    api_fail f = {0};
    if (api_decode_bench_json(r->body, r->body_len, atomic_load(&r->d->limits.max_runs), &q, &f) != 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        return;
    }
    if (resolve_threads(r, c, &q) != 0)
        return;
    c->stat = q.stat;
    b->runs = q.runs;
    b->warmup = q.warmup;
    b->verify = q.verify;
    b->seed = q.seed ? q.seed : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)b;
    b->seed &= INT64_MAX;
    if (plan(r, b, &q) != 0) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    /* cumulative: every combination of the sweep runs runs + warmup times,
     * each at its kernel's work (cpu.csr.chunked's passes included) */
    int64_t work = plan_work(b), max_work = atomic_load(&r->d->limits.max_request_work);
    if (work > max_work) {
        api_error(r, 400, "too_much_work",
                  "the sweep's %zu kernel and parameter combinations, %d runs each, come to %" PRId64 " units of "
                  "work (a multiply-add per entry of the %" PRId64 ", plus the rows once per pass of "
                  "cpu.csr.chunked), over max_request_work (%" PRId64 " multiply-adds); ask for fewer runs or kernels",
                  b->nentries, b->runs + b->warmup, work, b->m->host.nnz, max_work);
        return;
    }
    worker *w = b->m->dev ? b->m->dev_worker : r->d->cpu;
    b->base.run = bench_run;
    b->base.sliced = true; /* kernel by kernel */
    b->base.finish = bench_finish;
    if (!q.async) {
        c->r = r;
        api_submit_and_suspend(r, w, &b->base);
        return;
    }
    api_submit_async(r, w, &b->base, &b->job, "bench", b->m->meta.id);
}

static void bench_cleanup(request *r)
{
    bench_call_free(r->state);
    r->state = NULL;
}

const route_handlers api_bench_post = {
    .begin = bench_begin,
    .body = bench_body,
    .end = bench_end,
    .resumed = bench_answer,
    .cleanup = bench_cleanup,
    .accepts_body = true,
    .body_kind = API_BODY_JSON,
    .query = api_no_query,
};
