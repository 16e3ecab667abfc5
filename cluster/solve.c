/* solve.c — a Krylov solve across the ranks: every rank runs the same loop.
 *
 * One command (CMD_SOLVE) from rank 0 carries the method, its options,
 * the kernel and the preconditioner, and each rank's rows of b (and x0).
 * Every rank, rank 0 included, then runs the engine's own solver
 * (spmv_solve, engine/krylov.c) on its rows, with three hooks of its own:
 *
 *   - the operator: the halo exchange and the shard's product
 *     (cluster_local_apply, the code a sharded product runs, y not
 *     poisoned first);
 *   - the reduction: each dot or norm's partial sum on every rank,
 *     gathered by all of them with MPI_Iallgather and added in rank order,
 *     so that every rank holds the same bits and takes the same branch
 *     (an MPI_Allreduce promises that only as advice to implementors);
 *   - the preconditioner: set up by each rank on its diagonal block (the
 *     shard's local block), so its apply needs no communication.
 *
 * On GPU shards whose GPUs reach each other (CUDA IPC, one host), every
 * method takes the engine's fused path instead, as on one GPU
 * (engine/krylov_fused.c): each iteration's products are queued on the
 * GPU (cluster_local_queue: the exchange, the local product, the boundary
 * rows) and every dot is summed across the ranks by the fused kernels
 * themselves (spmv_gpu_allsum, engine/comm.h), so no iteration waits for
 * the host; the hosts share one reduction a check (each rank's wish to
 * stop). The time split then counts the queued products at the first
 * timed one's time on the GPU, and the reductions' time is the time the
 * GPU waited in them for the other ranks.
 *
 * Nothing waits without a deadline: the halo exchange is reqs_wait's, and
 * a reduction polls MPI_Test against cluster_timeout_ms, then marks the
 * cluster failed (its buffers are then never freed: the collective may
 * still write them). A rank lost mid-solve thus ends the solve on every
 * rank still alive within about one cluster_timeout_ms, and on rank 0
 * (which answers) as soon as its look at the ranks sees it (liveness.c:
 * an exited process, a pulse silent past cluster_heartbeat_ms), in a
 * reduction's wait or the fused path's (watch).
 *
 * Before the first iteration every rank says, in one reduction, whether
 * its setup (kernel, preconditioner, vectors) worked, so a rank that
 * cannot start does not leave the others waiting in the loop. Rank 0's
 * progress callback may stop the solve: its wish travels in one more slot
 * of the next reduction, and every rank stops at the same iteration. At
 * the end each rank sends rank 0 its rows of x and its time split.
 */
#ifdef SPMV_HAVE_MPI

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/internal.h"

#define MAX_REDUCE 7              /* values one reduction sums (the engine asks for one) */
#define SLOTS (MAX_REDUCE + 1)    /* ... and the stop flag */

/* What each rank sends back: its time split, reductions and iterations. */
enum { T_COMPUTE, T_EXCHANGE, T_REDUCE, T_PRECOND, T_PC_SETUP, T_TOTAL, T_REDUCTIONS, T_ITERATIONS, SOLVE_TIMES };

/* One rank's part of a solve. */
typedef struct dsolve {
    cluster *c;
    cluster_local *l;
    spmv_gpu_ctx *ctx;            /* the shard's GPU; NULL on the host */
    spmv_device_kind dev;
    const spmv_kernel *k, *ran;
    spmv_params p;
    spmv_precond *pc;
    spmv_precond_binding bind;
    spmv_vec b, x;
    double *send, *recv;          /* a reduction's buffers (kept when one is abandoned) */
    bool abandoned;
    int stop_wish, stop_seen;     /* rank 0's progress asked to stop; the ranks learnt it */
    int (*progress)(void *ctx, int32_t it, double relres);
    void *progress_ctx;
    int32_t timed;                /* products run by apply (the others were queued by device_apply) */
    double one_device;            /* the first timed product's time on the GPU (CUDA events) */
    double t[SOLVE_TIMES];
} dsolve;

/* ------------------------------------------------------------ the hooks */

/* Completes a collective by the deadline, polling as reqs_wait does
 * (yielding first, then napping) and, as it does, looking at the ranks
 * now and then (rank 0: an exited process, a silent pulse). */
static int coll_wait(cluster *c, MPI_Request *req, const char *what, spmv_error *err)
{
    double start = spmv_now_ms(), look = 0;
    long sleep_ns = 20000;
    for (long polls = 0;; polls++) {
        int done = 0, mrc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (mrc != MPI_SUCCESS)
            return cluster_fail(c, err, "rank %d: %s: MPI reported error %d (a rank is gone?)", c->rank, what, mrc);
        if (done)
            return SPMV_OK;
        double waited = spmv_now_ms() - start;
        int lost = polls > 200 && cluster_liveness_due(c, waited, &look) ? cluster_liveness_look(c, what, err) : SPMV_OK;
        if (lost != SPMV_OK) /* a rank on this host exited, or its pulse went silent (rank 0) */
            return lost;
        if (waited > c->o.timeout_ms)
            return cluster_fail(c, err, "rank %d: %s: not every rank took part within %.0f ms (cluster_timeout_ms); "
                                "the cluster is marked failed", c->rank, what, c->o.timeout_ms);
        if (polls > 200 && waited < 2000.0) {
            sched_yield();
        } else if (polls > 200) {
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL);
            if (sleep_ns < 1000000)
                sleep_ns *= 2;
        }
    }
}

/* v[0..n) summed over the ranks, in rank order, on every rank; the stop
 * wish rides along. */
static int reduce(void *ctx, double *v, int32_t n, spmv_error *err)
{
    dsolve *d = ctx;
    cluster *c = d->c;
    if (n < 1 || n > MAX_REDUCE)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "a distributed reduction of %d values (at most %d)", n,
                              MAX_REDUCE);
    if (d->abandoned)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the cluster has failed: %s", c->failed_msg);
    double t0 = spmv_now_ms();
    memset(d->send, 0, SLOTS * sizeof *d->send);
    memcpy(d->send, v, (size_t)n * sizeof *v);
    d->send[MAX_REDUCE] = d->stop_wish;
    MPI_Request req;
    int mrc = MPI_Iallgather(d->send, SLOTS, MPI_DOUBLE, d->recv, SLOTS, MPI_DOUBLE, c->comm, &req);
    int rc = mrc == MPI_SUCCESS ? coll_wait(c, &req, "the solve's reduction", err)
                                : cluster_fail(c, err, "rank %d: MPI_Iallgather failed (error %d)", c->rank, mrc);
    if (rc != SPMV_OK) {
        d->abandoned = mrc == MPI_SUCCESS; /* the collective may still write its buffers */
        spmv_gpu_allsum_stop(c->allsum);   /* and the GPU's waits for the others end now (a fused solve) */
        cluster_local_stop(c, d->l);
        return rc;
    }
    for (int32_t i = 0; i < n; i++) {
        v[i] = 0;
        for (int q = 0; q < c->size; q++)
            v[i] += d->recv[(size_t)q * SLOTS + (size_t)i];
    }
    for (int q = 0; q < c->size; q++)
        d->stop_seen |= d->recv[(size_t)q * SLOTS + MAX_REDUCE] != 0;
    d->t[T_REDUCE] += spmv_now_ms() - t0;
    d->t[T_REDUCTIONS] += 1;
    return SPMV_OK;
}

/* y = A x on the rows of this rank: the halo exchange and the shard's
 * product, timed as a sharded product's run. */
static int apply(void *ctx, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err)
{
    dsolve *d = ctx;
    double run = 0, compute = 0, comm = 0, device = 0;
    cluster_run_times t = {&run, &compute, &comm, &device};
    int rc = cluster_local_apply(d->c, d->l, d->k, &d->p, x, y, &t, &d->ran, err);
    d->t[T_COMPUTE] += compute;
    d->t[T_EXCHANGE] += comm;
    if (d->timed++ == 0)
        d->one_device = device;
    *ms = run;
    return rc;
}

/* The fused path's waits for its GPU's status: the cluster failed, or a
 * look at the ranks (liveness.c: an exited process, a silent pulse; rank
 * 0) finds one lost: the GPU's waits for the other ranks (the sums, the
 * halo) end, and the solve with this error. */
static int watch(void *ctx, double waited_ms, double *next_ms, spmv_error *err)
{
    dsolve *d = ctx;
    cluster *c = d->c;
    int rc = cluster_watch(c, "a solve on the GPUs", waited_ms, next_ms, err);
    if (rc != SPMV_OK) {
        spmv_gpu_allsum_stop(c->allsum);
        cluster_local_stop(c, d->l);
    }
    return rc;
}

/* The fused path's product: queued on the shard's GPU, not waited for. */
static int device_apply(void *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    dsolve *d = ctx;
    return cluster_local_queue(d->c, d->l, d->k, &d->p, x, y, err);
}

static int precond(void *ctx, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    dsolve *d = ctx;
    double t0 = spmv_now_ms();
    int rc = spmv_precond_apply_cb(&d->bind, r, z, err);
    d->t[T_PRECOND] += spmv_now_ms() - t0;
    return rc;
}

/* After an iteration: rank 0's progress may wish to stop; every rank
 * stops once a reduction has told them all. */
static int progress(void *ctx, int32_t it, double relres)
{
    dsolve *d = ctx;
    if (d->progress && d->progress(d->progress_ctx, it, relres))
        d->stop_wish = 1;
    return d->stop_seen;
}

/* ------------------------------------------------------- one rank's part */

/* The kernel, the preconditioner on the diagonal block, b and x on the
 * shard's device. */
static int part_setup(dsolve *d, const cmd_header *h, const void *b, const void *x0, spmv_error *err)
{
    cluster *c = d->c;
    const cluster_shard *s = cluster_local_shard(d->l);
    int32_t rows = s->row_end - s->row_begin;
    spmv_dtype dt = (spmv_dtype)h->dtype;
    if (!(d->k = spmv_kernel_find(h->kernel)))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "rank %d knows no kernel %s", c->rank, h->kernel);
    memcpy(d->p.v, h->params, sizeof d->p.v);
    if (strncmp(cluster_local_device(d->l), "gpu", 3) == 0) {
        int rc = cluster_gpu(c, &d->ctx, err);
        if (rc != SPMV_OK)
            return rc;
        d->dev = SPMV_DEVICE_GPU;
    }
    int rc = spmv_vec_alloc(d->ctx, d->dev, dt, rows, 1, &d->b, err);
    if (rc == SPMV_OK && (rc = spmv_vec_alloc(d->ctx, d->dev, dt, rows, 1, &d->x, err)) == SPMV_OK && rows)
        rc = spmv_vec_write(d->ctx, &d->b, b, err);
    if (rc == SPMV_OK && rows)
        rc = x0 ? spmv_vec_write(d->ctx, &d->x, x0, err) : spmv_vec_fill(d->ctx, &d->x, 0.0, err);
    if (rc == SPMV_OK && h->pc_type != SPMV_PRECOND_NONE) {
        spmv_precond_options po;
        spmv_precond_defaults(&po, (spmv_precond_type)h->pc_type);
        po.block_size = h->pc_block > 0 ? h->pc_block : po.block_size;
        po.degree = h->pc_degree > 0 ? h->pc_degree : po.degree;
        double t0 = spmv_now_ms();
        spmv_error pe = {0};
        if ((rc = spmv_precond_setup(d->ctx, cluster_local_csr(d->l), &po, &d->pc, &pe)) != SPMV_OK)
            spmv_error_set(err, rc, 0, "rank %d (rows %d..%d; its block's rows are numbered from 0): %.400s", c->rank,
                           s->row_begin, s->row_end, pe.message);
        d->t[T_PC_SETUP] = spmv_now_ms() - t0;
        d->bind = (spmv_precond_binding){d->ctx, d->pc, {0}};
    }
    if (rc == SPMV_OK && d->ctx)
        rc = spmv_vec_sync(d->ctx, err);
    return rc;
}

static void part_free(dsolve *d)
{
    spmv_vec_free(d->ctx, &d->b);
    spmv_vec_free(d->ctx, &d->x);
    spmv_precond_free(d->ctx, d->pc);
    if (!d->abandoned) {
        free(d->send);
        free(d->recv);
    }
}

/* The fused path's sums on the GPUs (every method, on GPU shards
 * only): made once, by every rank at the same solve, since every rank
 * runs every solve and learnt all_gpu from the same reduction. NULL where
 * the ranks cannot reach each other's memory: the solve sums on the
 * hosts. */
static int fused_sums(dsolve *d, bool all_gpu, const spmv_allsum_dev **out, spmv_error *err)
{
    cluster *c = d->c;
    *out = NULL;
    if (!all_gpu)
        return SPMV_OK;
    if (!c->allsum_tried) {
        c->allsum_tried = true;
        if (spmv_gpu_allsum_new(c->nccl, true, &c->allsum, err) != SPMV_OK)
            return cluster_fail(c, err, "rank %d: %s", c->rank, err->message);
    }
    *out = spmv_gpu_allsum_dev(c->allsum);
    return SPMV_OK;
}

/* The queued products' time (each the first timed one's time on the GPU,
 * as the fused path counts spmv_ms; their exchange runs on the GPU beside
 * the local product, inside it) and the device's sums: how many, and the
 * time it waited in them for the other ranks. */
static int fused_times(dsolve *d, const spmv_solve_result *res, unsigned sums0, double waited0, spmv_error *err)
{
    unsigned sums = 0;
    double waited = 0;
    int32_t queued = res->spmv_calls - d->timed;
    d->t[T_COMPUTE] += queued * d->one_device;
    int rc = spmv_gpu_allsum_stats(d->c->allsum, &sums, &waited, err);
    d->t[T_REDUCE] += waited - waited0;
    d->t[T_REDUCTIONS] += sums - sums0;
    return rc;
}

/* The engine's solve on this rank's rows (all: the fused path's sums on
 * the GPUs, or NULL), then x's rows to the host. */
static int part_solve(dsolve *d, const cmd_header *h, const spmv_allsum_dev *all, void *x, spmv_solve_result *res,
                      spmv_error *err)
{
    cluster *c = d->c;
    const cluster_shard *s = cluster_local_shard(d->l);
    int32_t rows = s->row_end - s->row_begin;
    spmv_linop a = {rows, rows, d, apply};
    spmv_solve_options o = {.method = (spmv_solve_method)h->method, .restart = h->restart, .tol = h->tol,
                            .maxit = h->maxit, .progress = progress, .progress_ctx = d, .reduce = reduce,
                            .reduce_ctx = d, .allsum = all, .device_apply = all ? device_apply : NULL,
                            .watch = watch, .watch_ctx = d};
    if (d->pc) {
        o.precond = precond;
        o.precond_ctx = d;
    }
    unsigned sums0 = 0;
    double waited0 = 0;
    int rc = all ? spmv_gpu_allsum_stats(c->allsum, &sums0, &waited0, err) : SPMV_OK;
    if (rc == SPMV_OK)
        rc = spmv_solve(d->ctx, &a, &d->b, &d->x, &o, res, err);
    if (rc != SPMV_OK && all && spmv_gpu_allsum_failed(c->allsum)) /* its sums may never come: the job cannot go on */
        return cluster_fail(c, err, "rank %d: %s", c->rank, err->message);
    if (rc == SPMV_OK && rows && (rc = spmv_vec_read(d->ctx, &d->x, x, err)) == SPMV_OK)
        rc = spmv_vec_sync(d->ctx, err);
    if (rc == SPMV_OK && res->fused)
        rc = fused_times(d, res, sums0, waited0, err);
    d->t[T_ITERATIONS] = res->iterations;
    return rc;
}

/* The solve on this rank's rows: x (its rows on the host) and res; the
 * times into d->t. *skipped: another rank could not set up, so none ran
 * (SPMV_OK: this rank did nothing wrong). */
static int part_run(cluster *c, cluster_local *l, const cmd_header *h, const void *b, const void *x0, void *x,
                    dsolve *d, spmv_solve_result *res, bool *skipped, spmv_error *err)
{
    double t0 = spmv_now_ms();
    *skipped = false;
    d->c = c;
    d->l = l;
    d->dev = SPMV_DEVICE_CPU;
    d->send = calloc(SLOTS, sizeof *d->send);
    d->recv = calloc((size_t)c->size * SLOTS, sizeof *d->recv);
    if (!d->send || !d->recv) /* the others wait for this rank's reduction: the job cannot go on */
        return cluster_fail(c, err, "rank %d: out of memory for a solve's reductions", c->rank);
    spmv_error serr = {0};
    int src = l ? part_setup(d, h, b, x0, &serr)
                : spmv_error_set(&serr, SPMV_ERR_NOT_FOUND, 0, "rank %d holds no shard of %s", c->rank, h->id);
    /* the first reduction: did every rank set up, and is every shard on a GPU with a communicator? */
    double v[2] = {src != SPMV_OK, d->dev != SPMV_DEVICE_GPU || !c->nccl};
    int rc = reduce(d, v, 2, err);
    const spmv_allsum_dev *all = NULL;
    if (rc == SPMV_OK && src != SPMV_OK) {
        *err = serr;
        rc = src;
    } else if (rc == SPMV_OK && v[0] > 0) {
        *skipped = true;
    } else if (rc == SPMV_OK && (rc = fused_sums(d, v[1] == 0, &all, err)) == SPMV_OK) {
        rc = part_solve(d, h, all, x, res, err);
    }
    d->t[T_TOTAL] = spmv_now_ms() - t0;
    return rc;
}

/* Ranks > 0: the command's b (and x0), the part, then the reply, x and
 * the times always go back (unless the cluster failed), so rank 0 never
 * waits for a message that will not come. */
void cluster_solve_command(cluster *c, const cmd_header *h, cmd_reply *rep)
{
    spmv_error err = {0};
    void *in = NULL, *x = NULL;
    cluster_local *l = cluster_table_find(c, h->id);
    size_t vs = spmv_dtype_size(h->dtype == SPMV_FLOAT32 ? SPMV_FLOAT32 : SPMV_FLOAT64), rows = 0;
    if (cmd_take_payload(c, h->payload, &in, &err) != SPMV_OK)
        return; /* a lost payload failed the cluster */
    if (l)
        rows = (size_t)(cluster_local_shard(l)->row_end - cluster_local_shard(l)->row_begin);
    bool x0 = h->flags & CMD_FLAG_X0, skipped;
    dsolve d = {0};
    spmv_solve_result res = {0};
    int rc = SPMV_OK;
    if (l && h->payload != rows * vs * (x0 ? 2 : 1))
        l = NULL, rc = spmv_error_set(&err, SPMV_ERR_SHAPE, 0, "rank %d: %llu bytes of b for %zu rows", c->rank,
                                      (unsigned long long)h->payload, rows);
    if (!(x = malloc(rows ? rows * vs : 1)))
        l = NULL, rc = spmv_error_set(&err, SPMV_ERR_NOMEM, 0, "rank %d: out of memory for x", c->rank);
    spmv_error perr = {0};
    int prc = part_run(c, l, h, in, x0 ? (char *)in + rows * vs : NULL, x, &d, &res, &skipped, &perr);
    if (rc == SPMV_OK && prc != SPMV_OK) {
        rc = prc;
        err = perr;
    }
    part_free(&d);
    spmv_solve_result_free(&res);
    if (!cluster_failed(c)) {
        snprintf(rep->kernel, sizeof rep->kernel, "%s", d.ran ? d.ran->name : h->kernel);
        rep->status = rc;
        snprintf(rep->message, sizeof rep->message, "%s", rc ? err.message : "");
        req_list r;
        reqs_init(&r);
        if (reqs_send(c, &r, rep, sizeof *rep, 0, TAG_REPLY, &err) != SPMV_OK ||
            reqs_send(c, &r, x, rc == SPMV_OK && !skipped ? rows * vs : 0, 0, TAG_Y, &err) != SPMV_OK ||
            reqs_send(c, &r, d.t, sizeof d.t, 0, TAG_TIMES, &err) != SPMV_OK ||
            reqs_wait(c, &r, "sending x", &err) != SPMV_OK)
            fprintf(stderr, "spmvd rank %d: %s\n", c->rank, err.message);
        reqs_free(&r);
    } else {
        fprintf(stderr, "spmvd rank %d: the solve stopped: %s\n", c->rank, c->failed_msg);
    }
    free(in);
    free(x);
}

/* --------------------------------------------------- rank 0's command */

/* The checks before any rank is told. */
static int solve_check(cluster *c, const cluster_matrix *m, const cluster_solve_args *a, spmv_error *err)
{
    if (cluster_failed(c))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the cluster has failed: %s", c->failed_msg);
    if (m->rows != m->cols)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "solve needs a square matrix; %s is %d x %d", m->id, m->rows,
                              m->cols);
    if (m->nranks != c->size)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "matrix %s is cut over %d ranks; the job has %d", m->id,
                              m->nranks, c->size);
    if (!a->k || !a->b || !a->x)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "a distributed solve needs a kernel, b and x");
    if (!spmv_kernel_is_auto(a->k) && (a->k->device == SPMV_DEVICE_GPU) != m->gpu)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s runs on %s, but the shards of %s are on %s",
                              a->k->name, a->k->device == SPMV_DEVICE_GPU ? "a GPU" : "the host", m->id,
                              m->gpu ? "the ranks' GPUs" : "the ranks' hosts");
    spmv_precond_type t = a->pc.type;
    if (t != SPMV_PRECOND_NONE && t != SPMV_PRECOND_JACOBI && t != SPMV_PRECOND_BLOCK_JACOBI &&
        t != SPMV_PRECOND_CHEBYSHEV)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "preconditioner %s does not run distributed: jacobi, "
                              "block_jacobi and chebyshev do (each rank on its diagonal block)",
                              spmv_precond_type_name(t));
    return SPMV_OK;
}

static void solve_header(cluster *c, const cluster_matrix *m, const cluster_solve_args *a, cmd_header *h)
{
    cmd_init(c, h, CMD_SOLVE, m->id);
    snprintf(h->kernel, sizeof h->kernel, "%s", a->k->name);
    if (a->p)
        memcpy(h->params, a->p->v, sizeof h->params);
    h->dtype = m->dtype;
    h->flags = a->x0 ? CMD_FLAG_X0 : 0;
    h->method = (int32_t)a->o.method;
    h->maxit = a->o.maxit;
    h->restart = a->o.restart;
    h->tol = a->o.tol;
    h->pc_type = (int32_t)a->pc.type;
    h->pc_block = a->pc.block_size;
    h->pc_degree = a->pc.degree;
}

/* The command to every other rank with its rows of b (and x0), packed
 * into pay[q], which the caller frees once sent. */
static int solve_post(cluster *c, const cluster_matrix *m, const cluster_solve_args *a, cmd_header *hs, void **pay,
                      spmv_error *err)
{
    size_t vs = spmv_dtype_size(m->dtype);
    req_list r;
    reqs_init(&r);
    int rc = SPMV_OK;
    for (int q = 1; q < m->nranks && rc == SPMV_OK; q++) {
        size_t off = (size_t)m->row_begin[q] * vs, len = (size_t)(m->row_begin[q + 1] - m->row_begin[q]) * vs;
        hs[q] = hs[0];
        hs[q].payload = len * (a->x0 ? 2 : 1);
        if (!(pay[q] = malloc(hs[q].payload ? hs[q].payload : 1))) {
            rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the ranks' b");
            break;
        }
        memcpy(pay[q], (const char *)a->b + off, len);
        if (a->x0)
            memcpy((char *)pay[q] + len, (const char *)a->x0 + off, len);
        rc = cmd_post(c, &r, &hs[q], pay[q], q, err);
    }
    if (rc == SPMV_OK)
        rc = reqs_wait(c, &r, "sending b", err);
    reqs_free(&r);
    return rc;
}

/* Every other rank's reply, rows of x and times. */
static int solve_gather(cluster *c, const cluster_matrix *m, void *x, cmd_reply *rep, double *times, spmv_error *err)
{
    size_t vs = spmv_dtype_size(m->dtype);
    req_list r;
    reqs_init(&r);
    int rc = SPMV_OK;
    for (int q = 1; q < m->nranks && rc == SPMV_OK; q++) {
        size_t rows = (size_t)(m->row_begin[q + 1] - m->row_begin[q]);
        if ((rc = reqs_recv(c, &r, &rep[q], sizeof rep[q], q, TAG_REPLY, err)) == SPMV_OK &&
            (rc = reqs_recv(c, &r, (char *)x + (size_t)m->row_begin[q] * vs, rows * vs, q, TAG_Y, err)) == SPMV_OK)
            rc = reqs_recv(c, &r, times + (size_t)q * SOLVE_TIMES, SOLVE_TIMES * sizeof *times, q, TAG_TIMES, err);
    }
    if (rc == SPMV_OK)
        rc = reqs_wait(c, &r, "gathering x", err);
    reqs_free(&r);
    return rc;
}

static void solve_stats(const cluster_matrix *m, const cmd_reply *rep, const double *times, const dsolve *own,
                        const cluster_solve_args *a, cluster_solve_stats *st)
{
    st->nranks = m->nranks;
    snprintf(st->kernel, sizeof st->kernel, "%s", own->ran ? own->ran->name : a->k->name);
    for (int q = 0; q < m->nranks; q++) {
        st->halo_values += m->info[q].halo_recv;
        if (q >= CLUSTER_SOLVE_REPORT_RANKS)
            continue;
        const double *t = q == 0 ? own->t : times + (size_t)q * SOLVE_TIMES;
        cluster_solve_rank *r = &st->rank[q];
        *r = (cluster_solve_rank){t[T_COMPUTE], t[T_EXCHANGE], t[T_REDUCE], t[T_PRECOND], t[T_PC_SETUP], t[T_TOTAL],
                                  (int64_t)t[T_REDUCTIONS], (int32_t)t[T_ITERATIONS], ""};
        snprintf(r->kernel, sizeof r->kernel, "%s", q == 0 ? st->kernel : rep[q].kernel);
    }
}

int cluster_solve(cluster *c, cluster_matrix *m, const cluster_solve_args *a, spmv_solve_result *res,
                  cluster_solve_stats *st, spmv_error *err)
{
    memset(res, 0, sizeof *res);
    memset(st, 0, sizeof *st);
    int rc = solve_check(c, m, a, err);
    if (rc != SPMV_OK)
        return rc;
    size_t vs = spmv_dtype_size(m->dtype), n0 = (size_t)m->row_begin[0] * vs;
    cmd_reply *rep = cmd_replies(c, err);
    cmd_header *hs = calloc((size_t)c->size, sizeof *hs);
    void **pay = calloc((size_t)c->size, sizeof *pay);
    double *times = calloc((size_t)c->size * SOLVE_TIMES, sizeof *times);
    dsolve own = {.progress = a->progress, .progress_ctx = a->progress_ctx};
    if (!rep || !hs || !pay || !times) {
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a distributed solve");
        goto out;
    }
    /* GPU shards reduce and exchange over NCCL: its communicator first, as a product makes it */
    if (m->gpu && !c->nccl && (rc = cluster_nccl_round(c, rep, err)) != SPMV_OK)
        goto out;
    solve_header(c, m, a, &hs[0]);
    if ((rc = solve_post(c, m, a, hs, pay, err)) != SPMV_OK)
        goto out;
    spmv_error own_err = {0};
    bool skipped;
    int own_rc = part_run(c, m->own, &hs[0], (const char *)a->b + n0, a->x0 ? (const char *)a->x0 + n0 : NULL,
                          (char *)a->x + n0, &own, res, &skipped, &own_err);
    if (cluster_failed(c)) { /* a rank is lost: nothing more comes from the ranks */
        rc = spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%.500s",
                            own_rc != SPMV_OK && own_err.message[0] ? own_err.message : c->failed_msg);
        goto out;
    }
    if ((rc = solve_gather(c, m, a->x, rep, times, err)) != SPMV_OK)
        goto out;
    if (own_rc != SPMV_OK)
        rc = spmv_error_set(err, own_rc, 0, "rank 0: %.500s", own_err.message);
    else if ((rc = cmd_check(c, rep, hs[0].seq, err)) == SPMV_OK && skipped)
        rc = spmv_error_set(err, SPMV_ERR_INVALID, 0, "a rank could not set up the solve but said nothing");
    if (rc == SPMV_OK)
        solve_stats(m, rep, times, &own, a, st);
out:
    if (rc != SPMV_OK)
        spmv_solve_result_free(res);
    part_free(&own);
    for (int q = 0; pay && q < c->size; q++)
        free(pay[q]);
    free(pay);
    free(rep);
    free(hs);
    free(times);
    return rc;
}

#endif /* SPMV_HAVE_MPI */
