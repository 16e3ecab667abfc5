/* rank.c — rank 0's commands and the other ranks' command loop.
 *
 * Rank 0 is the only one that decides: every collective step starts as a
 * command it sends to each rank (a fixed cmd_header, then the payload the
 * command carries), and every rank answers with a cmd_reply (plus, for a
 * product, its rows of y and its per-run times). Rank 0 issues commands
 * from one thread, one at a time, so every rank sees them in the same
 * order and the sharded products of two requests never interleave. Rank
 * 0 takes part in each command itself, with the same code the others run.
 *
 * The other ranks wait for the next command polling, with naps, and
 * check three things between polls: a `shutdown` (exit, finalising MPI
 * when the cluster is healthy), a SIGTERM to themselves (ignored while
 * rank 0 talks: rank 0 stops the job), and silence — rank 0 pings at each
 * idle tick (250 ms), so no command for RANK_SILENCE_MS means rank 0 is
 * gone (killed, or it marked the cluster failed and stopped talking), and
 * the rank exits rather than wait forever.
 */
#ifdef SPMV_HAVE_MPI

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/internal.h"

/* Silence from rank 0 after which a rank gives up on it: at least this,
 * and three cluster_timeout_ms. */
#define RANK_SILENCE_MS 10000.0


static void say(cluster *c, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(cluster *c, int level, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->o.log)
        c->o.log(level, msg);
    else
        fprintf(stderr, "spmvd rank %d: %s\n", c->rank, msg);
}

/* ---------------------------------------------------- rank 0: commands */

void cmd_init(cluster *c, cmd_header *h, uint32_t op, const char *id)
{
    memset(h, 0, sizeof *h);
    h->magic = CMD_MAGIC;
    h->op = op;
    h->seq = ++c->seq;
    if (id)
        snprintf(h->id, sizeof h->id, "%s", id);
}

int cmd_post(cluster *c, req_list *r, const cmd_header *h, const void *payload, int p, spmv_error *err)
{
    int rc = reqs_send(c, r, h, sizeof *h, p, TAG_CMD, err);
    if (rc == SPMV_OK && h->payload)
        rc = reqs_send(c, r, payload, h->payload, p, TAG_PAYLOAD, err);
    return rc;
}

int cmd_check(cluster *c, const cmd_reply *rep, uint64_t seq, spmv_error *err)
{
    for (int p = 1; p < c->size; p++) {
        if (rep[p].seq != seq)
            return cluster_fail(c, err, "rank %d answered command %llu with %llu: the ranks are out of step", p,
                                (unsigned long long)seq, (unsigned long long)rep[p].seq);
    }
    for (int p = 1; p < c->size; p++)
        if (rep[p].status != SPMV_OK)
            return spmv_error_set(err, rep[p].status, 0, "rank %d: %.480s", p, rep[p].message);
    return SPMV_OK;
}

int cmd_round_trip(cluster *c, const cmd_header *h, cmd_reply *rep, const char *what, spmv_error *err)
{
    if (cluster_failed(c))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the cluster has failed: %s", c->failed_msg);
    req_list r;
    reqs_init(&r);
    int rc = SPMV_OK;
    for (int p = 1; p < c->size && rc == SPMV_OK; p++)
        if ((rc = cmd_post(c, &r, h, NULL, p, err)) == SPMV_OK)
            rc = reqs_recv(c, &r, &rep[p], sizeof rep[p], p, TAG_REPLY, err);
    if (rc == SPMV_OK)
        rc = reqs_wait(c, &r, what, err);
    reqs_free(&r);
    return rc == SPMV_OK ? cmd_check(c, rep, h->seq, err) : rc;
}

static int round_trip(cluster *c, uint32_t op, uint32_t flags, const char *id, cmd_reply *rep, const char *what,
                      spmv_error *err)
{
    cmd_header h;
    cmd_init(c, &h, op, id);
    h.flags = flags;
    return cmd_round_trip(c, &h, rep, what, err);
}

cmd_reply *cmd_replies(cluster *c, spmv_error *err)
{
    cmd_reply *rep = calloc((size_t)c->size, sizeof *rep);
    if (!rep)
        spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for %d replies", c->size);
    return rep;
}

int cluster_ping(cluster *c, spmv_error *err)
{
    cmd_reply *rep = cmd_replies(c, err);
    if (!rep)
        return SPMV_ERR_NOMEM;
    int rc = round_trip(c, CMD_PING, 0, NULL, rep, "ping", err);
    free(rep);
    return rc;
}

void cluster_shutdown(cluster *c)
{
    static cmd_header h; /* sends may still be pending when a failed cluster gives up on them */
    bool healthy = !cluster_failed(c);
    cmd_init(c, &h, CMD_SHUTDOWN, NULL);
    h.flags = healthy ? CMD_FLAG_FINALIZE : 0;
    req_list r;
    reqs_init(&r);
    spmv_error err = {0};
    int rc = SPMV_OK;
    for (int p = 1; p < c->size && rc == SPMV_OK; p++)
        rc = cmd_post(c, &r, &h, NULL, p, &err);
    if (rc == SPMV_OK && healthy)
        rc = reqs_wait(c, &r, "shutdown", &err);
    if (rc != SPMV_OK)
        say(c, 1, "shutdown: %s", err.message);
    reqs_free(&r);
}

int cluster_matrix_shards(const cluster_matrix *m, const cluster_shard_info **out)
{
    *out = m->info;
    return m->nranks;
}

int cluster_matrix_nranks(const cluster_matrix *m) { return m->nranks; }

static void matrix_free(cluster *c, cluster_matrix *m)
{
    if (!m)
        return;
    cluster_local_free(c, m->own);
    free(m->row_begin);
    free(m->col_begin);
    free(m->info);
    free(m);
}

static void shard_info(cluster_shard_info *in, const cluster_shard *s, const char *device, const char *host,
                       size_t bytes)
{
    in->rank = s->rank;
    in->row_begin = s->row_begin;
    in->row_end = s->row_end;
    in->nnz = cluster_shard_nnz(s);
    in->halo_recv = s->halo.nghost;
    in->halo_send = s->halo.nsend;
    snprintf(in->device, sizeof in->device, "%s", device);
    snprintf(in->host, sizeof in->host, "%s", host);
    in->bytes = bytes;
}

/* Sends rank p its shard and waits until it is on its way. With
 * try_file (a restart) rank p is first told the shard's length and CRC-32
 * only, says whether its own file holds exactly that (shardfile.c), and is
 * sent the shard only if not. */
static int send_shard(cluster *c, const cmd_header *base, const cluster_shard *s, int p, bool try_file,
                      spmv_error *err)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = cluster_shard_pack(s, &buf, &len, err);
    if (rc != SPMV_OK)
        return rc;
    cmd_header h = *base;
    h.payload = len;
    cmd_reply first = {.status = SPMV_ERR_NOT_FOUND};
    req_list r;
    reqs_init(&r);
    if (try_file) {
        h.flags |= CMD_FLAG_TRY_FILE;
        h.payload = 0;
        h.file_len = len;
        h.file_crc = shard_crc(buf, len);
        if ((rc = cmd_post(c, &r, &h, NULL, p, err)) == SPMV_OK &&
            (rc = reqs_recv(c, &r, &first, sizeof first, p, TAG_REPLY, err)) == SPMV_OK)
            rc = reqs_wait(c, &r, "asking for a shard file", err);
        if (rc == SPMV_OK && first.seq != h.seq)
            rc = cluster_fail(c, err, "rank %d answered command %llu with %llu: the ranks are out of step", p,
                              (unsigned long long)h.seq, (unsigned long long)first.seq);
        if (rc == SPMV_OK && first.status != SPMV_OK)
            rc = reqs_send(c, &r, buf, len, p, TAG_PAYLOAD, err);
    } else {
        rc = cmd_post(c, &r, &h, buf, p, err);
    }
    if (rc == SPMV_OK && first.status != SPMV_OK)
        rc = reqs_wait(c, &r, "sending a shard", err);
    reqs_free(&r);
    free(buf);
    return rc;
}

/* m's shape and layout (taken from l). */
static void describe(cluster_matrix *m, const char *id, const spmv_csr *a, bool gpu, cluster_layout *l)
{
    snprintf(m->id, sizeof m->id, "%s", id);
    m->nranks = l->nranks;
    SPMV_COPY_SHAPE(m, a);
    m->gpu = gpu;
    m->row_begin = l->row_begin;
    m->col_begin = l->col_begin;
    l->row_begin = l->col_begin = NULL;
}

/* Rank 0's own shard, on its GPU when the matrix's shards are. */
static int own_shard(cluster *c, cluster_matrix *m, cluster_shard *sh, spmv_error *err)
{
    shard_info(&m->info[0], sh, "cpu", c->host, 0);
    int rc = cluster_local_new(c, sh, m->dtype, &m->own, err);
    if (rc == SPMV_OK && m->gpu)
        rc = cluster_local_to_gpu(c, m->own, err);
    if (m->own) {
        snprintf(m->info[0].device, sizeof m->info[0].device, "%s", cluster_local_device(m->own));
        m->info[0].bytes = cluster_local_bytes(m->own);
        m->info[0].edge_rows = cluster_local_edge_rows(m->own);
    }
    return rc;
}

/* Every other rank's answer to the load, and where its shard went. */
static int load_replies(cluster *c, cluster_matrix *m, cmd_reply *rep, spmv_error *err)
{
    req_list r;
    int rc = SPMV_OK;
    reqs_init(&r);
    for (int p = 1; p < c->size && rc == SPMV_OK; p++)
        rc = reqs_recv(c, &r, &rep[p], sizeof rep[p], p, TAG_REPLY, err);
    if (rc == SPMV_OK)
        rc = reqs_wait(c, &r, "loading shards", err);
    reqs_free(&r);
    for (int p = 1; p < c->size && rc == SPMV_OK; p++) {
        snprintf(m->info[p].device, sizeof m->info[p].device, "%s", rep[p].device);
        snprintf(m->info[p].host, sizeof m->info[p].host, "%s", rep[p].host);
        m->info[p].bytes = rep[p].bytes;
        m->info[p].from_file = rep[p].from_file != 0;
        m->info[p].edge_rows = rep[p].edge_rows;
    }
    return rc;
}

static int load_shards(cluster *c, const char *id, const spmv_csr *a, bool gpu, bool try_files, cluster_matrix **out,
                       spmv_error *err)
{
    *out = NULL;
    if (cluster_failed(c))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the cluster has failed: %s", c->failed_msg);
    cluster_layout l;
    cluster_shard *shards = NULL;
    cmd_reply *rep = NULL;
    cluster_matrix *m = calloc(1, sizeof *m);
    int rc = cluster_layout_balance(a, c->size, &l, err);
    if (rc != SPMV_OK) {
        free(m);
        return rc;
    }
    if (!m || !(shards = calloc((size_t)c->size, sizeof *shards)) || !(rep = cmd_replies(c, err)) ||
        !(m->info = calloc((size_t)c->size, sizeof *m->info))) {
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for %d shards", c->size);
        goto out;
    }
    describe(m, id, a, gpu, &l);
    if ((rc = cluster_shards_build(a, &(cluster_layout){c->size, a->rows, a->cols, a->nnz, m->row_begin, m->col_begin},
                                   shards, err)) != SPMV_OK)
        goto out;
    cmd_header h;
    cmd_init(c, &h, CMD_LOAD, id);
    h.dtype = a->dtype;
    h.flags = gpu ? CMD_FLAG_GPU : 0;
    /* one shard in flight at a time: rank 0 holds the matrix and its
     * shards, not also every packed copy */
    for (int p = 1; p < c->size && rc == SPMV_OK; p++) {
        shard_info(&m->info[p], &shards[p], "?", "?", 0);
        rc = send_shard(c, &h, &shards[p], p, try_files, err);
        cluster_shard_free(&shards[p]);
    }
    if (rc != SPMV_OK)
        goto out;
    spmv_error own_err = {0};
    int own_rc = own_shard(c, m, &shards[0], &own_err);
    if ((rc = load_replies(c, m, rep, err)) != SPMV_OK)
        goto out;
    if (own_rc != SPMV_OK) {
        *err = own_err;
        rc = spmv_error_set(err, own_rc, 0, "rank 0: %.500s", own_err.message);
    } else {
        rc = cmd_check(c, rep, h.seq, err);
    }
    if (rc != SPMV_OK && !cluster_failed(c)) { /* the ranks that took theirs drop them */
        cmd_reply *drop = cmd_replies(c, &own_err);
        if (drop)
            round_trip(c, CMD_FREE, 0, id, drop, "freeing shards", &own_err);
        free(drop);
    }
out:
    if (shards) {
        for (int p = 0; p < c->size; p++)
            cluster_shard_free(&shards[p]);
        free(shards);
    }
    free(rep);
    cluster_layout_free(&l);
    if (rc != SPMV_OK)
        matrix_free(c, m);
    else
        *out = m;
    return rc;
}

int cluster_load(cluster *c, const char *id, const spmv_csr *a, bool gpu, cluster_matrix **out, spmv_error *err)
{
    return load_shards(c, id, a, gpu, false, out, err);
}

int cluster_reload(cluster *c, const char *id, const spmv_csr *a, bool gpu, cluster_matrix **out, spmv_error *err)
{
    return load_shards(c, id, a, gpu, c->o.shard_dir != NULL, out, err);
}

void cluster_matrix_forget(cluster_matrix *m)
{
    if (m)
        atomic_store(&m->forget, true);
}

void cluster_unload(cluster *c, cluster_matrix *m)
{
    if (!m)
        return;
    spmv_error err = {0};
    cmd_reply *rep = cluster_failed(c) ? NULL : cmd_replies(c, &err);
    if (rep && round_trip(c, CMD_FREE, atomic_load(&m->forget) ? CMD_FLAG_FORGET : 0, m->id, rep, "freeing shards", &err) != SPMV_OK)
        say(c, 1, "freeing the shards of %s: %s", m->id, err.message);
    free(rep);
    matrix_free(c, m);
}

/* Bytes a sharded product moves once: the matrix's CSR arrays, x and y. */
static int64_t product_bytes(const cluster_matrix *m)
{
    int64_t vs = (int64_t)spmv_dtype_size(m->dtype);
    return ((int64_t)m->rows + 1) * 4 + m->nnz * (4 + vs) + ((int64_t)m->rows + m->cols) * vs;
}

/* The per-run times of every rank into the answer: each run as long as its
 * slowest rank; compute and communication the slowest rank's, averaged. */
static void combine_times(cluster_matrix *m, double *times, int32_t runs, int32_t warmup, cluster_spmv_stats *out)
{
    double *slowest = times, *slowest_dev = times + 3 * (size_t)runs; /* reuse rank 0's run_ms and device_ms rows */
    double compute = 0, comm = 0;
    bool device = m->gpu;
    for (int32_t i = 0; i < runs; i++) {
        double run = 0, cp = 0, cm = 0, dv = 0;
        for (int p = 0; p < m->nranks; p++) {
            const double *t = times + (size_t)p * CLUSTER_TIME_ROWS * (size_t)runs;
            run = t[i] > run ? t[i] : run;
            cp = t[runs + i] > cp ? t[runs + i] : cp;
            cm = t[2 * runs + i] > cm ? t[2 * runs + i] : cm;
            dv = t[3 * runs + i] > dv ? t[3 * runs + i] : dv;
            device = device && t[3 * runs + i] > 0; /* a host shard (or a rank with nothing timed) has none */
        }
        slowest[i] = run;
        slowest_dev[i] = dv;
        compute += cp;
        comm += cm;
    }
    out->compute_ms = compute / runs;
    out->comm_ms = comm / runs;
    spmv_stats_compute(slowest, runs, warmup, 2 * m->nnz, product_bytes(m), &out->st);
    memset(&out->device, 0, sizeof out->device);
    if (device)
        spmv_stats_compute(slowest_dev, runs, warmup, 2 * m->nnz, product_bytes(m), &out->device);
}

/* CMD_NCCL: the communicator over every rank's GPU, made together (the
 * first sharded product or solve on GPU shards). */
int cluster_nccl_round(cluster *c, cmd_reply *rep, spmv_error *err)
{
    cmd_header h;
    cmd_init(c, &h, CMD_NCCL, NULL);
    req_list r;
    reqs_init(&r);
    int rc = SPMV_OK;
    for (int p = 1; p < c->size && rc == SPMV_OK; p++)
        rc = cmd_post(c, &r, &h, NULL, p, err);
    if (rc == SPMV_OK)
        rc = reqs_wait(c, &r, "starting NCCL", err);
    spmv_error own_err = {0};
    int own_rc = rc == SPMV_OK ? cluster_nccl_setup(c, &own_err) : rc;
    for (int p = 1; p < c->size && rc == SPMV_OK; p++)
        rc = reqs_recv(c, &r, &rep[p], sizeof rep[p], p, TAG_REPLY, err);
    if (rc == SPMV_OK)
        rc = reqs_wait(c, &r, "starting NCCL", err);
    reqs_free(&r);
    if (rc != SPMV_OK)
        return rc;
    if (own_rc != SPMV_OK)
        return spmv_error_set(err, own_rc, 0, "rank 0: %.500s", own_err.message);
    return cmd_check(c, rep, h.seq, err);
}

/* The operands of a product, checked against m before any rank is told. */
static int operands_check(const cluster_matrix *m, const cluster_operands *io, spmv_error *err)
{
    char why[512];
    if (!io->xv == !io->x || !io->yv == !io->y)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "a product takes x and y each either inline or a vector");
    if (io->xv && !cluster_vec_fits(io->xv, m, false, why, sizeof why))
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "x: %s", why);
    if (io->yv && !cluster_vec_fits(io->yv, m, true, why, sizeof why))
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "y: %s", why);
    if (io->xv && io->xv == io->yv)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "x and y are the same vector: y = A*x in place is not defined");
    if (!io->yv && (io->alpha != 1.0 || io->beta != 0.0))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "alpha and beta take a vector y");
    return SPMV_OK;
}

/* The product's command to every other rank, each with its x entries
 * (hs[0] is rank 0's own copy of the header). */
static int spmv_post(cluster *c, const cluster_matrix *m, const spmv_kernel *k, const spmv_params *p,
                     const cluster_operands *io, int32_t warmup, int32_t runs, cmd_header *hs, req_list *r,
                     spmv_error *err)
{
    size_t vs = spmv_dtype_size(m->dtype);
    int rc = SPMV_OK;
    cmd_init(c, &hs[0], CMD_SPMV, m->id);
    snprintf(hs[0].kernel, sizeof hs[0].kernel, "%s", k->name);
    memcpy(hs[0].params, p->v, sizeof hs[0].params);
    hs[0].warmup = warmup;
    hs[0].runs = runs;
    hs[0].dtype = m->dtype;
    hs[0].flags = (io->xv ? CMD_FLAG_XVEC : 0) | (io->yv ? CMD_FLAG_YVEC : 0);
    if (io->xv)
        snprintf(hs[0].xid, sizeof hs[0].xid, "%s", cluster_vec_id(io->xv));
    if (io->yv)
        snprintf(hs[0].yid, sizeof hs[0].yid, "%s", cluster_vec_id(io->yv));
    hs[0].alpha = io->yv ? io->alpha : 1.0;
    hs[0].beta = io->yv ? io->beta : 0.0;
    for (int q = 1; q < m->nranks && rc == SPMV_OK; q++) {
        hs[q] = hs[0];
        hs[q].payload = io->xv ? 0 : (uint64_t)(m->col_begin[q + 1] - m->col_begin[q]) * vs;
        rc = cmd_post(c, r, &hs[q], io->xv ? NULL : (const char *)io->x + (size_t)m->col_begin[q] * vs, q, err);
    }
    return rc == SPMV_OK ? reqs_wait(c, r, "sending x", err) : rc;
}

/* Every other rank's reply, its rows of y (unless y is a vector) and its
 * times. */
static int spmv_gather(cluster *c, const cluster_matrix *m, const cluster_operands *io, int32_t runs, cmd_reply *rep,
                       double *times, req_list *r, spmv_error *err)
{
    size_t vs = spmv_dtype_size(m->dtype);
    int rc = SPMV_OK;
    for (int q = 1; q < m->nranks && rc == SPMV_OK; q++) {
        size_t rows = (size_t)(m->row_begin[q + 1] - m->row_begin[q]);
        if ((rc = reqs_recv(c, r, &rep[q], sizeof rep[q], q, TAG_REPLY, err)) == SPMV_OK && !io->yv)
            rc = reqs_recv(c, r, (char *)io->y + (size_t)m->row_begin[q] * vs, rows * vs, q, TAG_Y, err);
        if (rc == SPMV_OK)
            rc = reqs_recv(c, r, times + (size_t)q * CLUSTER_TIME_ROWS * (size_t)runs,
                           CLUSTER_TIME_ROWS * (size_t)runs * sizeof *times, q, TAG_TIMES, err);
    }
    return rc == SPMV_OK ? reqs_wait(c, r, "gathering y", err) : rc;
}

int cluster_spmv(cluster *c, cluster_matrix *m, const spmv_kernel *k, const spmv_params *p,
                 const cluster_operands *io, int32_t warmup, int32_t runs, cluster_spmv_stats *out, spmv_error *err)
{
    const void *x = io->x;
    void *y = io->y;
    memset(out, 0, sizeof *out);
    if (cluster_failed(c))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the cluster has failed: %s", c->failed_msg);
    if (runs < 1 || warmup < 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "runs %d / warmup %d out of range", runs, warmup);
    bool is_auto = spmv_kernel_is_auto(k);
    if (!is_auto && (k->device == SPMV_DEVICE_GPU) != m->gpu)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s runs on %s, but the shards of %s are on %s", k->name,
                              k->device == SPMV_DEVICE_GPU ? "a GPU" : "the host", m->id,
                              m->gpu ? "the ranks' GPUs" : "the ranks' hosts");
    int rc = operands_check(m, io, err);
    if (rc != SPMV_OK)
        return rc;
    size_t vs = spmv_dtype_size(m->dtype);
    cmd_reply *rep = cmd_replies(c, err);
    cmd_header *hs = calloc((size_t)m->nranks, sizeof *hs);
    double *times = calloc((size_t)m->nranks * CLUSTER_TIME_ROWS * (size_t)runs, sizeof *times);
    req_list r;
    reqs_init(&r);
    if (!rep || !hs || !times) {
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a sharded product");
        goto out;
    }
    if (m->gpu && !c->nccl && (rc = cluster_nccl_round(c, rep, err)) != SPMV_OK)
        goto out;
    if ((rc = spmv_post(c, m, k, p, io, warmup, runs, hs, &r, err)) != SPMV_OK)
        goto out;
    /* rank 0's own part, exchanging with the others */
    const spmv_kernel *ran = NULL;
    spmv_error own_err = {0};
    cluster_run_times t0 = {times, times + runs, times + 2 * (size_t)runs, times + 3 * (size_t)runs};
    int own_rc = cluster_local_product(c, m->own, k, p, io->xv ? NULL : (const char *)x + (size_t)m->col_begin[0] * vs,
                                       io->xv ? cluster_vec_slice(c, cluster_vec_id(io->xv)) : NULL,
                                       io->yv ? NULL : (char *)y + (size_t)m->row_begin[0] * vs,
                                       io->yv ? cluster_vec_slice(c, cluster_vec_id(io->yv)) : NULL, hs[0].alpha,
                                       hs[0].beta, warmup, runs, &t0, &ran, &own_err);
    if (cluster_failed(c)) {
        *err = own_err;
        rc = SPMV_ERR_UNAVAILABLE;
        goto out;
    }
    double g0 = spmv_now_ms();
    rc = spmv_gather(c, m, io, runs, rep, times, &r, err);
    out->gather_ms = io->yv ? 0 : spmv_now_ms() - g0; /* a vector y is not gathered: only replies came */
    if (rc != SPMV_OK)
        goto out;
    if (own_rc != SPMV_OK) {
        rc = spmv_error_set(err, own_rc, 0, "rank 0: %.500s", own_err.message);
        goto out;
    }
    if ((rc = cmd_check(c, rep, hs[0].seq, err)) != SPMV_OK)
        goto out;
    combine_times(m, times, runs, warmup, out);
    snprintf(out->kernel, sizeof out->kernel, "%s", ran ? ran->name : k->name);
    for (int q = 0; q < m->nranks && q < 8; q++)
        snprintf(out->kernels[q], sizeof out->kernels[q], "%s", q == 0 ? out->kernel : rep[q].kernel);
    for (int q = 0; q < m->nranks; q++)
        out->halo_values += m->info[q].halo_recv;
    out->exchange = cluster_local_exchange(m->own);
out:
    reqs_free(&r);
    free(rep);
    free(hs);
    free(times);
    return rc;
}

/* ----------------------------------------------- ranks > 0: the loop */

typedef struct rank_state {
    cluster *c;
    cmd_header h;
    cmd_reply rep;
} rank_state;

static cluster_local *table_find(cluster *c, const char *id, local_entry ***link)
{
    local_entry **pp = &c->table;
    for (; *pp; pp = &(*pp)->next)
        if (strncmp((*pp)->id, id, sizeof (*pp)->id) == 0) {
            if (link)
                *link = pp;
            return (*pp)->l;
        }
    return NULL;
}

cluster_local *cluster_table_find(cluster *c, const char *id) { return table_find(c, id, NULL); }

static void table_drop(cluster *c, const char *id)
{
    local_entry **pp;
    if (table_find(c, id, &pp)) {
        local_entry *e = *pp;
        *pp = e->next;
        cluster_local_free(c, e->l);
        free(e);
    }
}

int cmd_take_payload(cluster *c, size_t len, void **out, spmv_error *err)
{
    *out = malloc(len ? len : 1);
    if (!*out)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a payload of %zu bytes", len);
    if (len == 0) /* post_cmd sends no payload message then */
        return SPMV_OK;
    req_list r;
    reqs_init(&r);
    int rc = reqs_recv(c, &r, *out, len, 0, TAG_PAYLOAD, err);
    if (rc == SPMV_OK)
        rc = reqs_wait(c, &r, "receiving a command's payload", err);
    reqs_free(&r);
    if (rc != SPMV_OK) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* The shard of a CMD_LOAD: from this rank's file when rank 0 asks whether
 * it holds it (a restart) and it does, else the payload rank 0 sends. */
static int shard_bytes(rank_state *s, void **buf, size_t *len, bool *from_file, spmv_error *err)
{
    cluster *c = s->c;
    *buf = NULL;
    *len = s->h.payload;
    *from_file = false;
    if (!(s->h.flags & CMD_FLAG_TRY_FILE))
        return cmd_take_payload(c, *len, buf, err);
    spmv_error ferr = {0};
    *len = s->h.file_len;
    *from_file = shard_file_read(c, s->h.id, s->h.file_len, s->h.file_crc, buf, &ferr) == SPMV_OK;
    if (*from_file)
        say(c, 2, "shard of %s: read from this rank's file", s->h.id);
    else
        say(c, 2, "shard of %s: %s; rank 0 sends it", s->h.id, ferr.message);
    cmd_reply first = s->rep;
    first.status = *from_file ? SPMV_OK : SPMV_ERR_NOT_FOUND;
    req_list r;
    reqs_init(&r);
    int rc = reqs_send(c, &r, &first, sizeof first, 0, TAG_REPLY, err);
    if (rc == SPMV_OK)
        rc = reqs_wait(c, &r, "answering for a shard file", err);
    reqs_free(&r);
    if (rc == SPMV_OK && !*from_file)
        rc = cmd_take_payload(c, *len, buf, err);
    if (rc != SPMV_OK) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

static int do_load(rank_state *s, spmv_error *err)
{
    cluster *c = s->c;
    void *buf;
    size_t len;
    bool from_file;
    cluster_shard sh;
    cluster_local *l = NULL;
    int rc = shard_bytes(s, &buf, &len, &from_file, err);
    if (rc != SPMV_OK)
        return rc;
    rc = cluster_shard_unpack(buf, len, &sh, err);
    if (rc == SPMV_OK && !from_file && c->o.shard_dir) { /* kept for a restart with this many ranks */
        spmv_error werr = {0};
        if (shard_file_write(c, s->h.id, buf, len, &werr) != SPMV_OK)
            say(c, 1, "shard of %s not kept on disk: %s", s->h.id, werr.message);
    }
    free(buf);
    if (rc != SPMV_OK)
        return rc;
    if (sh.rank != c->rank || sh.nranks != c->size || (int)sh.local.dtype != s->h.dtype)
        rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "rank %d was sent the shard of rank %d of %d", c->rank, sh.rank,
                            sh.nranks);
    if (rc == SPMV_OK)
        rc = cluster_local_new(c, &sh, sh.local.dtype, &l, err);
    cluster_shard_free(&sh);
    if (rc == SPMV_OK && (s->h.flags & CMD_FLAG_GPU))
        rc = cluster_local_to_gpu(c, l, err);
    local_entry *e = NULL;
    if (rc == SPMV_OK && !(e = calloc(1, sizeof *e)))
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory");
    if (rc != SPMV_OK || !e) {
        cluster_local_free(c, l);
        return rc;
    }
    table_drop(c, s->h.id);
    snprintf(e->id, sizeof e->id, "%s", s->h.id);
    e->l = l;
    e->next = c->table;
    c->table = e;
    snprintf(s->rep.device, sizeof s->rep.device, "%s", cluster_local_device(l));
    s->rep.bytes = cluster_local_bytes(l);
    s->rep.from_file = from_file;
    s->rep.edge_rows = cluster_local_edge_rows(l);
    return SPMV_OK;
}

/* A product: the reply, y and the times always go back, so rank 0 never
 * waits for messages that will not come. */
static void do_spmv(rank_state *s)
{
    cluster *c = s->c;
    spmv_error err = {0};
    void *x = NULL, *y = NULL;
    double *times = NULL;
    size_t rows = 0, vs = spmv_dtype_size(s->h.dtype == SPMV_FLOAT32 ? SPMV_FLOAT32 : SPMV_FLOAT64);
    int32_t runs = s->h.runs;
    cluster_local *l = table_find(c, s->h.id, NULL);
    const spmv_kernel *k = spmv_kernel_find(s->h.kernel), *ran = NULL;
    bool xvec = s->h.flags & CMD_FLAG_XVEC, yvec = s->h.flags & CMD_FLAG_YVEC;
    spmv_vec *xs = NULL, *ys = NULL;
    int rc = cmd_take_payload(c, s->h.payload, &x, &err);
    if (rc != SPMV_OK)
        return; /* a lost payload failed the cluster: nothing more to say */
    if (!l)
        rc = spmv_error_set(&err, SPMV_ERR_NOT_FOUND, 0, "rank %d holds no shard of %s", c->rank, s->h.id);
    else if (!k)
        rc = spmv_error_set(&err, SPMV_ERR_INVALID, 0, "rank %d knows no kernel %s", c->rank, s->h.kernel);
    else if (runs < 1 || runs > 1000000 || s->h.warmup < 0 || s->h.warmup > 1000000)
        rc = spmv_error_set(&err, SPMV_ERR_INVALID, 0, "runs %d / warmup %d out of range", runs, s->h.warmup);
    else if (!xvec && s->h.payload != (uint64_t)(cluster_local_shard(l)->col_end - cluster_local_shard(l)->col_begin) * vs)
        rc = spmv_error_set(&err, SPMV_ERR_SHAPE, 0, "rank %d: x has %llu bytes, the shard owns %d entries", c->rank,
                            (unsigned long long)s->h.payload,
                            cluster_local_shard(l)->col_end - cluster_local_shard(l)->col_begin);
    else if ((xvec && !(xs = cluster_vec_slice(c, s->h.xid))) || (yvec && !(ys = cluster_vec_slice(c, s->h.yid))))
        rc = spmv_error_set(&err, SPMV_ERR_NOT_FOUND, 0, "rank %d holds no vector %s", c->rank,
                            xvec && !xs ? s->h.xid : s->h.yid);
    if (rc == SPMV_OK) {
        rows = (size_t)(cluster_local_shard(l)->row_end - cluster_local_shard(l)->row_begin);
        y = yvec ? NULL : calloc(rows ? rows : 1, vs);
        times = calloc(CLUSTER_TIME_ROWS * (size_t)runs, sizeof *times);
        if ((!y && !yvec) || !times)
            rc = spmv_error_set(&err, SPMV_ERR_NOMEM, 0, "rank %d: out of memory for y", c->rank);
    }
    if (rc == SPMV_OK) {
        spmv_params p;
        memcpy(p.v, s->h.params, sizeof p.v);
        cluster_run_times t = {times, times + runs, times + 2 * (size_t)runs, times + 3 * (size_t)runs};
        rc = cluster_local_product(c, l, k, &p, xvec ? NULL : x, xs, y, ys, s->h.alpha, s->h.beta, s->h.warmup, runs,
                                   &t, &ran, &err);
        if (cluster_failed(c)) { /* the exchange lost a peer: rank 0 has given up on this product too */
            say(c, 0, "%s", err.message);
            goto out;
        }
    }
    s->rep.status = rc;
    snprintf(s->rep.message, sizeof s->rep.message, "%s", rc ? err.message : "");
    snprintf(s->rep.kernel, sizeof s->rep.kernel, "%s", ran ? ran->name : "");
    req_list r;
    reqs_init(&r);
    if ((rc = reqs_send(c, &r, &s->rep, sizeof s->rep, 0, TAG_REPLY, &err)) == SPMV_OK &&
        (yvec || (rc = reqs_send(c, &r, y ? y : (void *)&s->rep, y ? rows * vs : 0, 0, TAG_Y, &err)) == SPMV_OK) &&
        (rc = reqs_send(c, &r, times ? (void *)times : (void *)&s->rep,
                        times ? CLUSTER_TIME_ROWS * (size_t)runs * sizeof *times : 0, 0,
                        TAG_TIMES, &err)) == SPMV_OK)
        rc = reqs_wait(c, &r, "sending y", &err);
    reqs_free(&r);
    if (rc != SPMV_OK)
        say(c, 0, "%s", err.message);
out:
    free(x);
    free(y);
    free(times);
}

void cmd_reply_send(cluster *c, cmd_reply *rep, int rc, const spmv_error *err)
{
    spmv_error e = {0};
    rep->status = rc;
    snprintf(rep->message, sizeof rep->message, "%s", rc ? err->message : "");
    req_list r;
    reqs_init(&r);
    if (reqs_send(c, &r, rep, sizeof *rep, 0, TAG_REPLY, &e) != SPMV_OK ||
        reqs_wait(c, &r, "replying to rank 0", &e) != SPMV_OK)
        say(c, 0, "%s", e.message);
    reqs_free(&r);
}

static void reply(rank_state *s, int rc, const spmv_error *err) { cmd_reply_send(s->c, &s->rep, rc, err); }

/* Waits for the next command; false when rank 0 is gone. */
static bool next_command(rank_state *s, const sigset_t *sigs, double *sigterm_at)
{
    cluster *c = s->c;
    MPI_Request req;
    if (MPI_Irecv(&s->h, sizeof s->h, MPI_BYTE, 0, TAG_CMD, c->comm, &req) != MPI_SUCCESS)
        return false;
    double silence = 3 * c->o.timeout_ms > RANK_SILENCE_MS ? 3 * c->o.timeout_ms : RANK_SILENCE_MS;
    double since = spmv_now_ms(), last_sig = 0;
    long sleep_ns = 20000;
    for (long polls = 0;; polls++) {
        int done = 0;
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return false;
        if (done)
            return true;
        double now = spmv_now_ms();
        if (now - last_sig > 100.0) {
            last_sig = now;
            struct timespec zero = {0, 0};
            int sig = sigtimedwait(sigs, NULL, &zero);
            if ((sig == SIGTERM || sig == SIGINT) && *sigterm_at == 0) {
                *sigterm_at = now;
                say(c, 2, "%s: waiting for rank 0 to stop the job", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            }
        }
        if (now - since > silence || (*sigterm_at > 0 && now - *sigterm_at > c->o.timeout_ms)) {
            MPI_Cancel(&req);
            MPI_Request_free(&req);
            cluster_fail(c, NULL, "no command from rank 0 for %.0f ms", now - since);
            say(c, 0, "no word from rank 0 for %.0f ms: it is gone; exiting", now - since);
            return false;
        }
        if (polls > 200) {
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL);
            if (sleep_ns < 1000000)
                sleep_ns *= 2;
        }
    }
}

int cluster_rank_loop(cluster *c)
{
    rank_state s = {.c = c};
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    double sigterm_at = 0;
    say(c, 2, "rank %d of %d on %s: serving rank 0's commands", c->rank, c->size, c->host);
    while (next_command(&s, &sigs, &sigterm_at)) {
        spmv_error err = {0};
        int rc = SPMV_OK;
        memset(&s.rep, 0, sizeof s.rep);
        s.rep.seq = s.h.seq;
        s.rep.rank = c->rank;
        snprintf(s.rep.host, sizeof s.rep.host, "%s", c->host);
        if (s.h.magic != CMD_MAGIC) {
            cluster_fail(c, NULL, "a command without the magic number");
            say(c, 0, "rank 0 sent a malformed command; exiting");
            return 1;
        }
        switch (s.h.op) {
        case CMD_PING:
            reply(&s, SPMV_OK, &err);
            break;
        case CMD_LOAD:
            rc = do_load(&s, &err);
            if (!cluster_failed(c))
                reply(&s, rc, &err);
            break;
        case CMD_SPMV:
            do_spmv(&s);
            break;
        case CMD_FREE:
            table_drop(c, s.h.id);
            if (s.h.flags & CMD_FLAG_FORGET)
                shard_file_remove(c, s.h.id);
            reply(&s, SPMV_OK, &err);
            break;
        case CMD_NCCL:
            rc = cluster_nccl_setup(c, &err);
            if (!cluster_failed(c))
                reply(&s, rc, &err);
            break;
        case CMD_VNEW:
        case CMD_VFREE:
        case CMD_VWRITE:
        case CMD_VREAD:
        case CMD_VOP:
            cluster_vec_command(c, &s.h, &s.rep);
            break;
        case CMD_SOLVE:
            cluster_solve_command(c, &s.h, &s.rep);
            break;
        case CMD_SHUTDOWN:
            if (!(s.h.flags & CMD_FLAG_FINALIZE))
                cluster_fail(c, NULL, "rank 0 stopped a failed cluster");
            say(c, 2, "shutdown from rank 0");
            return 0;
        default:
            rc = spmv_error_set(&err, SPMV_ERR_INVALID, 0, "unknown command %u", s.h.op);
            reply(&s, rc, &err);
        }
        if (cluster_failed(c)) {
            say(c, 0, "the cluster failed: %s", c->failed_msg);
            /* keep serving: rank 0 decides; silence from it ends the loop */
        }
    }
    return 1;
}

#endif /* SPMV_HAVE_MPI */
