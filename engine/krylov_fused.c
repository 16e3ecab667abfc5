/* krylov_fused.c — CG, BiCGSTAB, GMRES and MINRES with their scalars on the GPU.
 *
 * The host-scalar loops of krylov.c and minres.c wait for the device at
 * every dot product. Here the host only queues work: each iteration is the
 * operator's device_apply (a product queued on the context's stream, not
 * waited for) and a few kernels of engine/gpu/krylov_fused.cu, each one
 * pass over the vectors that also forms the dots the next step needs and,
 * in its last block, the next scalars and the stop flag. The host queues a
 * chunk of check_every iterations (GMRES: one restart cycle), then the
 * copy of the device's scalars and history into pinned memory, and reads
 * the copy of the chunk before while this one runs; so it learns the
 * residual every check_every iterations and the GPU never waits for it.
 *
 * Stopping is the device's: once a kernel sets the flag the rest of the
 * queued chunk does nothing (its products still run, on work vectors, and
 * are counted), and x is exactly the iterate of the stop. Then the host
 * does what the host path does: a breakdown is worded the same, maxit is
 * maxit, and a recurrence that met tol is checked against the true
 * residual b - A x, restarting from it on a miss (GMRES computes its true
 * residual on the device at each cycle's end).
 *
 * CG on one process, where n fits (spmv_gpu_fz_one_pass), runs its
 * vector work as one cooperative kernel an iteration (FZ_CG_ITER: q and r
 * held in registers across two grid-wide syncs) instead of three.
 *
 * With no callback preconditioner (none or Jacobi, which the kernels apply
 * themselves), the first chunk is captured as a CUDA graph and every chunk
 * replays it; a capture that fails is tried once more after a chunk
 * queued directly (an operator that makes a texture over its x on first
 * use cannot be captured doing it), then falls back to queuing each
 * chunk. Where other work shares the device between two checks (the
 * daemon's short requests), the operator's device_epoch says when what
 * the graph reads may have moved: that chunk is queued afresh and the
 * next one captured again. MINRES's three Lanczos vectors and three
 * directions rotate through fixed buffers, so its chunks are a multiple of
 * three iterations and a graph starts and ends at one phase.
 *
 * spmv_ms: the products are not timed one by one here; the first product
 * (the initial residual, through the operator's timed apply) gives the
 * time of one, and each queued product adds it.
 *
 * k columns of CG (krylov_fused_block, the daemon's lockstep): one
 * product of the n x k directions and CG's kernels once for all columns
 * an iteration, each column with its own scalars and stop in one device
 * block (the kernels take the column from the grid's y); the host reads
 * every column's status in one copy a chunk and settles each column as
 * one column's solve does.
 *
 * Distributed (options' reduce and allsum: every method on the GPU
 * shards of one host, cluster/solve.c): every process runs this same
 * loop on its rows, and each kernel's sums are summed across the
 * processes by the kernel itself (fz_allsum, krylov_fused.cu), so every
 * process computes the same scalars and stops at the same iteration.
 * The host's dots (the start, the true residual) go through reduce; so
 * does, once a check, nothing but the processes' wishes to stop (a
 * cancel), so every one cancels after the same chunk. No graph (the
 * operator's exchange takes its number from the host), and the status is
 * polled with the options' watch asking whether every process is still
 * there.
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "krylov_fused.h"
#include "krylov_impl.h"

typedef struct fused fused;

/* Whether a chunk runs as a CUDA graph (one column's solve and the k
 * columns of CG alike): captured once, replayed while what it reads stays
 * where it was (the operator's device_epoch), dropped when that moves (the
 * chunk then queued afresh, the next one captured again); a capture that
 * fails is tried once more after a queued chunk (an operator that makes
 * something on first use cannot be captured doing it). */
typedef struct chunk_graph {
    bool graph;                /* the chunk is a graph */
    bool try_graph;            /* capture the next chunk */
    bool recapture;            /* the graph was dropped: capture the chunk after this one */
    bool retried;              /* a failed first capture was tried again */
    uint64_t epoch;            /* the operator's device_epoch when the graph was captured */
} chunk_graph;

/* What differs by method: queue one chunk; restart from the residual in
 * *from (norm rnorm) after a miss of the true residual. */
typedef struct fz_method {
    int32_t period;            /* chunk lengths are multiples of it */
    bool pipelined;            /* queue the next chunk before reading this one */
    int (*chunk)(fused *f);
    int (*start)(fused *f, spmv_vec *from, double rnorm);
} fz_method;

struct fused {
    solve_state *s;
    const fz_method *m;
    const spmv_vec *b;
    spmv_vec *x;
    spmv_gpu_fz *z;
    int32_t col;               /* this solve's column of z (k columns of CG at once: krylov_fused_block) */
    int32_t chunk;             /* iterations a chunk queues (GMRES: the restart m) */
    int32_t seen;              /* iterations recorded so far (the device's count at the last read) */
    double ms1;                /* one product's time */
    const spmv_vec *d;         /* Jacobi's 1/diag, or NULL */
    bool cb;                   /* a callback preconditioner (never in a graph) */
    chunk_graph g;
    bool one;                  /* CG: FZ_CG_ITER, one kernel after the product */
    int32_t per_chunk;         /* products a replay runs */
    spmv_vec *v[8];            /* the method's vectors (below) */
    spmv_vec basis;            /* GMRES's V, m+1 columns */
    int phase;                 /* MINRES's rotation */
};

#define KRUN(f, op, i, j, ...) \
    spmv_gpu_fz_run((f)->s->ctx, (f)->z, (op), (i), (j), (const spmv_vec *const[]){__VA_ARGS__}, (f)->s->err)

/* y = A x queued, counted. */
static int dev_apply(fused *f, const spmv_vec *x, spmv_vec *y)
{
    solve_state *s = f->s;
    s->res->spmv_calls++;
    s->res->spmv_ms += f->ms1;
    return s->o->device_apply(s->a->ctx, x, y, s->err);
}

static int callback(fused *f, const spmv_vec *r, spmv_vec *z)
{
    return f->s->o->precond(f->s->o->precond_ctx, r, z, f->s->err);
}

/* The scalars of a fresh (re)start: the count so far, the limits. */
static fz_scalars fresh(const fused *f)
{
    fz_scalars sc;
    memset(&sc, 0, sizeof sc);
    sc.it = f->seen;
    sc.maxit = f->s->o->maxit;
    sc.live = 1;
    sc.thresh = f->s->o->tol * f->s->bnorm;
    sc.bnorm = f->s->bnorm;
    return sc;
}

static int put(fused *f, const fz_scalars *sc) { return spmv_gpu_fz_put_col(f->s->ctx, f->z, f->col, sc, f->s->err); }

/* ------------------------------------------------------------------ CG */

enum { CG_R, CG_P, CG_Q, CG_Z };

/* p = z = M⁻¹r, rz = r·z. */
static int cg_start(fused *f, spmv_vec *from, double rnorm)
{
    solve_state *s = f->s;
    spmv_vec *r = f->v[CG_R], *p = f->v[CG_P];
    int st;
    (void)rnorm;
    if (from != r)
        TRY(spmv_vec_copy(s->ctx, from, r, s->err));
    fz_scalars sc = fresh(f);
    TRY(krylov_precond(s, r, p));
    TRY(krylov_dot(s, r, p, &sc.rz));
    return put(f, &sc);
}

static int cg_chunk(fused *f)
{
    spmv_vec *r = f->v[CG_R], *p = f->v[CG_P], *q = f->v[CG_Q], *z = f->cb ? f->v[CG_Z] : NULL;
    int st;
    for (int32_t k = 0; k < f->chunk; k++) {
        TRY(dev_apply(f, p, q));
        if (f->one) {
            TRY(KRUN(f, FZ_CG_ITER, 0, 0, p, q, r, f->d, f->x));
            continue;
        }
        TRY(KRUN(f, FZ_CG_PQ, 0, 0, p, q));
        TRY(KRUN(f, FZ_CG_R, f->cb, 0, q, r, f->d));
        if (f->cb) {
            TRY(callback(f, r, z));
            TRY(KRUN(f, FZ_CG_RZ, 0, 0, r, z));
        }
        TRY(KRUN(f, FZ_CG_P, 0, 0, r, f->d, z, p, f->x));
    }
    return SPMV_OK;
}

static const fz_method cg_method = {1, true, cg_chunk, cg_start};

/* ------------------------------------------------------------ BiCGSTAB */

enum { BI_R, BI_R0, BI_P, BI_V, BI_T, BI_PH, BI_SH };

/* r0 = r, p = v = 0, rho = alpha = omega = 1, rho_new = r·r: beta = rho_new. */
static int bi_start(fused *f, spmv_vec *from, double rnorm)
{
    solve_state *s = f->s;
    int st;
    if (from != f->v[BI_R])
        TRY(spmv_vec_copy(s->ctx, from, f->v[BI_R], s->err));
    TRY(spmv_vec_copy(s->ctx, f->v[BI_R], f->v[BI_R0], s->err));
    TRY(spmv_vec_fill(s->ctx, f->v[BI_P], 0.0, s->err));
    TRY(spmv_vec_fill(s->ctx, f->v[BI_V], 0.0, s->err));
    fz_scalars sc = fresh(f);
    sc.rho = sc.alpha = sc.omega = 1.0;
    sc.rho_new = sc.beta = rnorm * rnorm;
    return put(f, &sc);
}

static int bi_chunk(fused *f)
{
    spmv_vec **v = f->v, *ph = v[BI_PH], *sh = v[BI_SH];
    const spmv_vec *jd = f->d; /* Jacobi: the kernels write ph and sh */
    int st;
    for (int32_t k = 0; k < f->chunk; k++) {
        TRY(KRUN(f, FZ_BI_P, 0, 0, v[BI_R], v[BI_V], v[BI_P], jd ? ph : NULL, jd));
        if (f->cb)
            TRY(callback(f, v[BI_P], ph));
        TRY(dev_apply(f, ph, v[BI_V]));
        TRY(KRUN(f, FZ_BI_ALPHA, 0, 0, v[BI_R0], v[BI_V]));
        TRY(KRUN(f, FZ_BI_S, 0, 0, v[BI_R], v[BI_V], f->x, ph, jd ? sh : NULL, jd));
        if (f->cb)
            TRY(callback(f, v[BI_R], sh));
        TRY(dev_apply(f, sh, v[BI_T]));
        TRY(KRUN(f, FZ_BI_OMEGA, 0, 0, v[BI_T], v[BI_R]));
        TRY(KRUN(f, FZ_BI_END, 0, 0, f->x, v[BI_R], v[BI_T], sh, v[BI_R0]));
    }
    return SPMV_OK;
}

static const fz_method bi_method = {1, true, bi_chunk, bi_start};

/* -------------------------------------------------------------- MINRES */

/* R[3] hold r1, r2, y and W[3] w1, w2, w; at phase p, r1 = R[p], r2 =
 * R[p+1], y = R[p+2] (mod 3), and the same for w. */
enum { MR_R0, MR_R1, MR_R2, MR_W0, MR_W1, MR_W2, MR_V };

static spmv_vec *mr_r(fused *f, int k) { return f->v[MR_R0 + (f->phase + k) % 3]; }
static spmv_vec *mr_w(fused *f, int k) { return f->v[MR_W0 + (f->phase + k) % 3]; }

/* From the residual in R[0]: r2 = r1, z = M⁻¹r2, beta1 = sqrt(r2·z), v =
 * z / beta1, directions zero, phase 0. */
static int mr_start(fused *f, spmv_vec *from, double rnorm)
{
    solve_state *s = f->s;
    spmv_gpu_ctx *c = s->ctx;
    int st;
    f->phase = 0;
    spmv_vec *r1 = mr_r(f, 0), *r2 = mr_r(f, 1), *z = krylov_preconditioned(s) ? mr_r(f, 2) : r2;
    if (from != r1)
        TRY(spmv_vec_copy(c, from, r1, s->err));
    TRY(spmv_vec_copy(c, r1, r2, s->err));
    if (z != r2)
        TRY(krylov_precond(s, r2, z));
    fz_scalars sc = fresh(f);
    double rz;
    TRY(krylov_dot(s, r2, z, &rz)); /* distributed: summed over the processes */
    if (!(rz > 0.0) || !isfinite(rz)) {
        krylov_breakdown(s, KRYLOV_BD_MINRES_M, rz, f->seen);
        sc.live = 0;
        sc.stop = FZ_BREAKDOWN;
        return put(f, &sc);
    }
    sc.mbeta = sc.phibar = sqrt(rz);
    sc.cs = -1.0;
    sc.scale = rnorm / sc.mbeta;
    TRY(spmv_vec_axpby(c, 1.0 / sc.mbeta, z, 0.0, f->v[MR_V], s->err));
    for (int k = 0; k < 3; k++)
        TRY(spmv_vec_fill(c, mr_w(f, k), 0.0, s->err));
    return put(f, &sc);
}

static int mr_chunk(fused *f)
{
    spmv_vec *v = f->v[MR_V];
    const spmv_vec *jd = f->d;
    int st;
    for (int32_t k = 0; k < f->chunk; k++) {
        spmv_vec *r1 = mr_r(f, 0), *r2 = mr_r(f, 1), *y = mr_r(f, 2);
        TRY(dev_apply(f, v, y));
        TRY(KRUN(f, FZ_MR_ALFA, 0, 0, y, r1, v));
        TRY(KRUN(f, FZ_MR_BETA, f->cb, 0, y, r2, jd));
        f->phase = (f->phase + 1) % 3; /* r1, r2, y = r2, y, r1 */
        if (f->cb) {
            TRY(callback(f, mr_r(f, 1), mr_r(f, 2)));
            TRY(KRUN(f, FZ_MR_RZ, 0, 0, mr_r(f, 1), mr_r(f, 2)));
        }
        TRY(KRUN(f, FZ_MR_WXV, 0, 0, v, mr_w(f, 2), mr_w(f, 0), mr_w(f, 1), f->x, mr_r(f, 1), jd,
                 f->cb ? mr_r(f, 2) : NULL));
    }
    return SPMV_OK;
}

static const fz_method mr_method = {3, true, mr_chunk, mr_start};

/* --------------------------------------------------------------- GMRES */

enum { GM_R, GM_ZT };

static spmv_vec gm_col(const fused *f, int32_t j)
{
    spmv_vec c = f->basis;
    c.n = f->b->n;
    c.data = (char *)f->basis.data + (size_t)j * (size_t)c.n * spmv_dtype_size(c.dtype);
    return c;
}

static int gm_start(fused *f, spmv_vec *from, double rnorm)
{
    int st;
    if (from != f->v[GM_R])
        TRY(spmv_vec_copy(f->s->ctx, from, f->v[GM_R], f->s->err));
    fz_scalars sc = fresh(f);
    sc.rnorm = rnorm;
    TRY(put(f, &sc));
    return KRUN(f, FZ_GM_START, 0, 0, f->v[GM_R], &f->basis, f->d ? f->v[GM_ZT] : NULL, f->d);
}

/* Column j: V[j+1] = A M⁻¹ V[j], orthogonalised and scaled. */
static int gm_arnoldi(fused *f, int32_t j)
{
    spmv_vec vj = gm_col(f, j), vn = gm_col(f, j + 1);
    const spmv_vec *in = f->cb || f->d ? f->v[GM_ZT] : &vj;
    int st;
    if (f->cb)
        TRY(callback(f, &vj, f->v[GM_ZT]));
    TRY(dev_apply(f, in, &vn));
    for (int32_t i = 0; i <= j + 1; i++)
        TRY(KRUN(f, FZ_GM_MGS, i, j, &f->basis));
    return KRUN(f, FZ_GM_SCALE, 0, j, &f->basis, f->d ? f->v[GM_ZT] : NULL, f->d);
}

/* One cycle: m columns (those after the cycle's end do nothing), x += M⁻¹
 * V y, the true residual, the next cycle's start. */
static int gm_chunk(fused *f)
{
    spmv_vec *r = f->v[GM_R], *zt = f->v[GM_ZT];
    int st;
    for (int32_t j = 0; j < f->chunk; j++)
        TRY(gm_arnoldi(f, j));
    TRY(KRUN(f, FZ_GM_SOLVE, 0, 0, NULL));
    if (f->cb) {
        TRY(KRUN(f, FZ_GM_UPDATE, 1, 0, &f->basis, zt, NULL));
        TRY(callback(f, zt, r));
        TRY(KRUN(f, FZ_GM_ADD, 0, 0, r, f->x));
    } else
        TRY(KRUN(f, FZ_GM_UPDATE, 0, 0, &f->basis, f->x, f->d));
    TRY(dev_apply(f, f->x, r));
    TRY(KRUN(f, FZ_GM_RESID, 0, 0, f->b, r));
    return KRUN(f, FZ_GM_START, 0, 0, r, &f->basis, f->d ? zt : NULL, f->d);
}

static const fz_method gm_method = {1, false, gm_chunk, gm_start};

/* ------------------------------------------------------------ the loop */

/* Captures one chunk as the graph (false: it cannot be; chunks are then
 * queued one by one). The products counted while capturing run at each
 * replay instead. */
static bool capture(fused *f)
{
    spmv_solve_result *res = f->s->res;
    spmv_error scratch = {0}, *err = f->s->err;
    int32_t calls = res->spmv_calls;
    double ms = res->spmv_ms;
    int phase = f->phase;
    if (spmv_gpu_fz_capture_begin(f->s->ctx, f->z, &scratch))
        return false;
    f->s->err = &scratch; /* a refusal to be captured is not the solve's error */
    int st = f->m->chunk(f);
    f->s->err = err;
    f->per_chunk = res->spmv_calls - calls;
    res->spmv_calls = calls;
    res->spmv_ms = ms;
    f->phase = phase; /* nothing ran: a chunk that failed half-way must not move it */
    return spmv_gpu_fz_capture_end(f->s->ctx, f->z, st == SPMV_OK, &scratch) == SPMV_OK;
}

/* Before a chunk: a graph that may read memory that moved is dropped;
 * true when this chunk is to be captured. */
static bool graph_due(chunk_graph *g, const fused *f)
{
    const spmv_solve_options *o = f->s->o;
    uint64_t epoch = o->device_epoch ? o->device_epoch(f->s->a->ctx) : 0;
    if (g->graph && epoch != g->epoch) {
        spmv_gpu_fz_uncapture(f->s->ctx, f->z);
        g->graph = false;
        g->recapture = true;
    } else if (g->recapture) {
        g->recapture = false;
        g->try_graph = true;
    }
    if (!g->try_graph)
        return false;
    g->try_graph = false;
    g->epoch = epoch;
    return true;
}

/* After a capture (ok: it holds the chunk). */
static void graph_captured(chunk_graph *g, bool ok)
{
    g->graph = ok;
    if (!ok && !g->retried) {
        g->retried = true;
        g->recapture = true;
    }
}

static int run_chunk(fused *f)
{
    if (graph_due(&f->g, f)) {
        graph_captured(&f->g, capture(f));
        if (f->g.graph) {
            f->s->res->graph = true;
            f->s->res->captures++;
        }
    }
    if (!f->g.graph)
        return f->m->chunk(f);
    f->s->res->spmv_calls += f->per_chunk;
    f->s->res->spmv_ms += f->per_chunk * f->ms1;
    return spmv_gpu_fz_replay(f->s->ctx, f->z, f->s->err);
}

/* Records the iterations a status copy holds beyond those seen; true when
 * the progress callback cancels (the rest are recorded without it). */
static bool consume(fused *f, const fz_scalars *sc, const double *hist)
{
    solve_state *s = f->s;
    const spmv_solve_options *o = s->o;
    spmv_solve_options quiet = *o;
    quiet.progress = NULL;
    if (s->res->stop == SPMV_STOP_CANCELLED)
        s->o = &quiet;
    bool cancel = false;
    for (; f->seen < sc->it; f->seen++) {
        int32_t it = f->seen + 1;
        if (krylov_record(s, it, hist[it % f->chunk]) && !cancel) {
            cancel = true;
            s->o = &quiet;
        }
    }
    s->o = o;
    return cancel;
}

/* The breakdowns' words, as the host path has them (enum fz_what). */
static const char *const bd_names[] = {
    [FZ_BD_PAP] = "p·Ap (the matrix is not positive definite)",
    [FZ_BD_RZ] = "r·z",
    [FZ_BD_RHO] = "rho = r0·r",
    [FZ_BD_R0V] = "r0·v",
    [FZ_BD_TT] = "t·t",
    [FZ_BD_OMEGA] = "omega",
    [FZ_BD_MR_RZ] = KRYLOV_BD_MINRES_M,
    [FZ_BD_GAMMA] = KRYLOV_BD_MINRES_GAMMA,
    [FZ_BD_HESS] = "the Hessenberg column norm",
};

/* What the device's stop means, once all that was queued is done.
 * *again: the true residual missed tol and the method restarted from it. */
static int settle(fused *f, const fz_scalars *sc, bool *again)
{
    solve_state *s = f->s;
    int st;
    *again = false;
    if (s->res->stop == SPMV_STOP_CANCELLED) { /* the iterations done by the cancel's check count */
        snprintf(s->res->detail, sizeof s->res->detail, "cancelled after %d iterations", s->res->iterations);
        return SPMV_OK;
    }
    if (sc->stop == FZ_BREAKDOWN && sc->what == FZ_BD_PEER)
        return spmv_error_set(s->err, SPMV_ERR_UNAVAILABLE, 0,
                              "a sum across the ranks at iteration %d got no answer within %.0f ms: a rank is lost "
                              "or hung", sc->bd_it + 1, s->o->allsum ? s->o->allsum->timeout_ns / 1e6 : 0.0);
    if (sc->stop == FZ_BREAKDOWN && (unsigned)sc->what < sizeof bd_names / sizeof *bd_names)
        krylov_breakdown(s, bd_names[sc->what], sc->value, sc->bd_it);
    if (sc->stop != FZ_CONVERGED)
        return SPMV_OK;
    krylov_converged(s, sc->rnorm);
    if (f->m == &gm_method) /* GMRES's rnorm is the true residual already */
        return SPMV_OK;
    double rnorm;
    TRY(krylov_truly_converged(s, f->b, f->x, f->v[0], again));
    if ((*again = !*again) == false)
        return SPMV_OK;
    TRY(krylov_nrm2(s, f->v[0], &rnorm));
    TRY(f->m->start(f, f->v[0], rnorm));
    *again = s->res->stop != SPMV_STOP_BREAKDOWN;
    return SPMV_OK;
}

/* The status copy of slot: waited for on its event, or, with a watch (a
 * distributed solve: is every process still there?), polled, the watch
 * asked meanwhile (busy for 2 ms, then 20 us naps: a chunk takes a few
 * milliseconds). */
static int status(fused *f, int slot, const fz_scalars **sc, const double **hist)
{
    solve_state *s = f->s;
    const spmv_solve_options *o = s->o;
    double since = spmv_now_ms(), next = 0;
    int st;
    for (bool ready = !o->watch; !ready;) {
        TRY(spmv_gpu_fz_poll(s->ctx, f->z, slot, &ready, s->err));
        if (ready)
            break;
        double waited = spmv_now_ms() - since;
        TRY(o->watch(o->watch_ctx, waited, &next, s->err));
        if (waited < 2.0) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    return spmv_gpu_fz_wait_col(s->ctx, f->z, slot, f->col, sc, hist, s->err);
}

/* Chunks until the device stops: each one's status is read while the next
 * runs (pipelined methods), or right after it (GMRES's cycles). */
static int drive(fused *f)
{
    solve_state *s = f->s;
    const fz_scalars *sc;
    const double *hist;
    int st, posted = 0, read = 0;
    for (;;) {
        TRY(run_chunk(f));
        TRY(spmv_gpu_fz_post(s->ctx, f->z, posted++ & 1, s->err));
        if (f->m->pipelined && posted - read < 2)
            continue;
        TRY(status(f, read++ & 1, &sc, &hist));
        s->res->checks++;
        bool lost = sc->stop == FZ_BREAKDOWN && sc->what == FZ_BD_PEER; /* settle says so; the others are not there */
        if (s->o->reduce && !lost) { /* distributed: the ranks' wishes to stop, shared before any acts on one */
            double none = 0;
            TRY(s->o->reduce(s->o->reduce_ctx, &none, 1, s->err));
        }
        int32_t before = f->seen;
        bool cancel = consume(f, sc, hist);
        if (sc->stop == FZ_RUNNING && !cancel && f->seen == before)
            return spmv_error_set(s->err, SPMV_ERR_DEVICE, 0, "fused solver: a chunk made no iteration at %d", before);
        if (sc->stop == FZ_RUNNING && !cancel)
            continue;
        while (read < posted) { /* the chunk queued after it: empty, or run on by a cancel */
            TRY(status(f, read++ & 1, &sc, &hist));
            consume(f, sc, hist);
        }
        bool again;
        TRY(settle(f, sc, &again));
        if (!again)
            return SPMV_OK;
        posted = read = 0;
    }
}

/* ----------------------------------------------------------- the solve */

bool krylov_fused_eligible(const solve_state *s, const spmv_vec *b)
{
    const spmv_solve_options *o = s->o;
    bool sums = !o->reduce || o->allsum;
    return s->ctx && o->device_apply && sums && b->device == SPMV_DEVICE_GPU; /* distributed otherwise: host scalars */
}

/* The method, its chunk, its vectors and the device block. */
static int setup(fused *f)
{
    solve_state *s = f->s;
    const spmv_solve_options *o = s->o;
    static const fz_method *const methods[] = {&cg_method, &bi_method, &gm_method, &mr_method};
    static const int nvec[] = {3, 5, 2, 7};
    int st, nv = nvec[o->method];
    f->m = methods[o->method];
    f->chunk = o->check_every > 0 ? o->check_every : SPMV_CHECK_EVERY_DEFAULT;
    f->chunk = (f->chunk + f->m->period - 1) / f->m->period * f->m->period;
    if (o->method == SPMV_SOLVE_GMRES) {
        f->chunk = o->restart > 0 ? o->restart : SPMV_GMRES_RESTART_DEFAULT;
        f->chunk = f->chunk < o->maxit ? f->chunk : o->maxit;
        TRY(spmv_vec_alloc(s->ctx, SPMV_DEVICE_GPU, f->b->dtype, f->b->n * (f->chunk + 1), 1, &f->basis, s->err));
    }
    if ((o->method == SPMV_SOLVE_CG && f->cb) || (o->method == SPMV_SOLVE_BICGSTAB && krylov_preconditioned(s)))
        nv += o->method == SPMV_SOLVE_CG ? 1 : 2;
    for (int k = 0; k < nv; k++)
        TRY(krylov_work(s, f->b, &f->v[k]));
    if (o->method == SPMV_SOLVE_BICGSTAB && !krylov_preconditioned(s)) {
        f->v[BI_PH] = f->v[BI_P];
        f->v[BI_SH] = f->v[BI_R];
    }
    return spmv_gpu_fz_new(s->ctx, f->b->n, f->chunk, o->method == SPMV_SOLVE_GMRES ? f->chunk : 0,
                           o->reduce ? o->allsum : NULL, &f->z, s->err);
}

int krylov_fused(solve_state *s, const spmv_vec *b, spmv_vec *x)
{
    fused f = {.s = s, .b = b, .x = x};
    f.cb = s->o->precond != NULL;
    f.d = f.cb ? NULL : s->o->inv_diag;
    f.g.try_graph = !f.cb && !s->o->no_graph && !s->o->reduce; /* distributed: each exchange's number from the host */
    s->res->fused = true;
    double rnorm;
    int st = setup(&f);
    f.one = s->res->one_pass = !st && s->o->method == SPMV_SOLVE_CG && !f.cb && !s->o->reduce &&
                               !s->o->no_one_pass && spmv_gpu_fz_one_pass(f.z);
    if (!st && !(st = krylov_residual(s, b, x, f.v[0])) && !(st = krylov_nrm2(s, f.v[0], &rnorm))) {
        f.ms1 = s->res->spmv_ms; /* the first product, timed */
        if (!krylov_record(s, 0, rnorm / s->bnorm) && !krylov_converged(s, rnorm) &&
            !(st = f.m->start(&f, f.v[0], rnorm)) && s->res->stop != SPMV_STOP_BREAKDOWN)
            st = drive(&f);
    }
    if (st)
        spmv_vec_sync(s->ctx, s->err); /* nothing queued may outlive the vectors */
    spmv_gpu_fz_free(s->ctx, f.z);
    spmv_vec_free(s->ctx, &f.basis);
    return st;
}

/* ------------------------------------------------- the GPU operator */

int spmv_gpu_op_apply(void *op, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err)
{
    spmv_gpu_op *g = op;
    spmv_apply_args a = {1.0, 0.0, 0, 1};
    spmv_stats st;
    int rc = spmv_gpu_apply(g->ctx, g->kernel, g->m, g->params, &a, x, y, &st, NULL, err);
    *ms = rc == SPMV_OK ? st.median_ms : 0;
    return rc;
}

int spmv_gpu_op_device_apply(void *op, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    spmv_gpu_op *g = op;
    return spmv_gpu_launch(g->ctx, g->kernel, g->m, g->params, x, y, err);
}

/* -------------------------------------------------- k columns of CG */

/* CG on k columns at once, fused (krylov_fused_block): one product of the
 * n x k directions an iteration (the operator's device_apply on k
 * columns), then CG's kernels once for all k (the grid's y is the column:
 * spmv_gpu_fz_new_k), each column with its own scalars, history and stop
 * in the device block, as one column's solve has them; a chunk of
 * check_every iterations captured as one graph, one status copy a chunk
 * for every column. A column stopped on the device idles in the kernels;
 * the host settles it as one column's solve does (a true residual that
 * missed restarts it). */
typedef struct fblock {
    int32_t k, nlive;
    fused *f;                  /* one a column: its state, device block and column views */
    bool *live;                /* the column still iterates, as far as the host knows */
    spmv_vec R, P, Q, Z;       /* n x k */
    spmv_vec *X;               /* the answers, n x k */
    spmv_vec *views;           /* 6 a column: b x r p q z */
    double ms1;                /* one product of the block */
    chunk_graph g;             /* column 0's device block holds the graph */
} fblock;

/* Each running column's share of one product of the block. */
static void block_count(fblock *bk, int32_t products)
{
    for (int32_t j = 0; j < bk->k; j++)
        if (bk->live[j]) {
            bk->f[j].s->res->spmv_calls += products;
            bk->f[j].s->res->spmv_ms += products * bk->ms1 / bk->nlive;
        }
}

/* One chunk: an iteration is the block's product and CG's kernels once
 * for every column (the grid's y); a column that has stopped on the
 * device idles in them. */
static int block_chunk(fblock *bk)
{
    fused *f0 = &bk->f[0];
    const spmv_solve_options *o = f0->s->o;
    spmv_vec *z = f0->cb ? &bk->Z : NULL;
    int st;
    for (int32_t it = 0; it < f0->chunk; it++) {
        TRY(o->device_apply(f0->s->a->ctx, &bk->P, &bk->Q, f0->s->err));
        TRY(KRUN(f0, FZ_CG_PQ, 0, 0, &bk->P, &bk->Q));
        TRY(KRUN(f0, FZ_CG_R, f0->cb, 0, &bk->Q, &bk->R, f0->d));
        if (f0->cb) { /* the preconditioner on the running columns at once, then their r·z */
            TRY(o->precond_k(o->precond_ctx, &bk->R, &bk->Z, bk->live, f0->s->err));
            TRY(KRUN(f0, FZ_CG_RZ, 0, 0, &bk->R, &bk->Z));
        }
        TRY(KRUN(f0, FZ_CG_P, 0, 0, &bk->R, f0->d, z, &bk->P, bk->X));
    }
    return SPMV_OK;
}

/* The chunk as the graph (column 0's device block holds it), or queued. */
static int block_run_chunk(fblock *bk)
{
    fused *f0 = &bk->f[0];
    if (graph_due(&bk->g, f0)) {
        spmv_error scratch = {0}, *err = f0->s->err;
        bool ok = false;
        if (spmv_gpu_fz_capture_begin(f0->s->ctx, f0->z, &scratch) == SPMV_OK) {
            f0->s->err = &scratch; /* a refusal to be captured is not the solve's error */
            int st = block_chunk(bk);
            f0->s->err = err;
            ok = spmv_gpu_fz_capture_end(f0->s->ctx, f0->z, st == SPMV_OK, &scratch) == SPMV_OK;
        }
        graph_captured(&bk->g, ok);
        for (int32_t j = 0; j < bk->k && bk->g.graph; j++) {
            bk->f[j].s->res->graph = true;
            bk->f[j].s->res->captures++;
        }
    }
    block_count(bk, f0->chunk);
    if (!bk->g.graph)
        return block_chunk(bk);
    return spmv_gpu_fz_replay(f0->s->ctx, f0->z, f0->s->err);
}

/* Every running column's status copy of slot, read and recorded; *stop:
 * one of them stopped (or a cancel). */
static int block_read(fblock *bk, int slot, const fz_scalars **sc, bool *stop)
{
    const double *hist;
    int st;
    *stop = false;
    TRY(status(&bk->f[0], slot, &sc[0], &hist)); /* one copy holds every column's */
    for (int32_t j = 0; j < bk->k; j++) {
        if (!bk->live[j])
            continue;
        fused *f = &bk->f[j];
        TRY(spmv_gpu_fz_wait_col(f->s->ctx, f->z, slot, j, &sc[j], &hist, f->s->err));
        f->s->res->checks++;
        int32_t before = f->seen;
        bool cancel = consume(f, sc[j], hist);
        if (sc[j]->stop == FZ_RUNNING && !cancel && f->seen == before)
            return spmv_error_set(f->s->err, SPMV_ERR_DEVICE, 0, "fused solver: a chunk made no iteration at %d",
                                  before);
        *stop = *stop || cancel || sc[j]->stop != FZ_RUNNING;
    }
    return SPMV_OK;
}

/* After a stop, nothing queued: each stopped column settled (done, or
 * restarted from its true residual); a cancel stops them all. */
static int block_settle(fblock *bk, const fz_scalars **sc)
{
    bool cancel = false;
    int st;
    for (int32_t j = 0; j < bk->k; j++)
        cancel = cancel || (bk->live[j] && bk->f[j].s->res->stop == SPMV_STOP_CANCELLED);
    for (int32_t j = 0; j < bk->k; j++) {
        if (!bk->live[j])
            continue;
        fused *f = &bk->f[j];
        if (cancel)
            f->s->res->stop = SPMV_STOP_CANCELLED;
        bool again = false;
        if (cancel || sc[j]->stop != FZ_RUNNING)
            TRY(settle(f, sc[j], &again));
        if (cancel || (sc[j]->stop != FZ_RUNNING && !again)) { /* its kernels idle from now on */
            bk->live[j] = false;
            bk->nlive--;
        }
    }
    return SPMV_OK;
}

/* Chunks until every column has stopped: statuses read while the next
 * chunk runs; on a stop, what is queued drains, then the settling. */
static int block_drive(fblock *bk)
{
    fused *f0 = &bk->f[0];
    const fz_scalars **sc = calloc((size_t)bk->k, sizeof *sc);
    int st = sc ? SPMV_OK : spmv_error_set(f0->s->err, SPMV_ERR_NOMEM, 0, "out of memory for %d columns", bk->k);
    int posted = 0, read = 0;
    while (st == SPMV_OK && bk->nlive > 0) {
        bool stop = false;
        if ((st = block_run_chunk(bk)))
            break;
        st = spmv_gpu_fz_post(f0->s->ctx, f0->z, posted & 1, f0->s->err);
        posted++;
        if (st || posted - read < 2 || (st = block_read(bk, read++ & 1, sc, &stop)) || !stop)
            continue;
        while (!st && read < posted) /* the chunk queued after it */
            st = block_read(bk, read++ & 1, sc, &stop);
        if (!st)
            st = block_settle(bk, sc);
        posted = read = 0;
    }
    free(sc);
    return st;
}

/* The block's vectors and each column's state, views and device block. */
static int block_setup(fblock *bk, solve_state *s, const spmv_vec *b, spmv_vec *x)
{
    const spmv_solve_options *o = s[0].o;
    spmv_gpu_ctx *c = s[0].ctx;
    int32_t chunk = o->check_every > 0 ? o->check_every : SPMV_CHECK_EVERY_DEFAULT;
    int st;
    bool cb = o->precond != NULL;
    bk->f = calloc((size_t)bk->k, sizeof *bk->f);
    bk->views = calloc((size_t)bk->k * 6, sizeof *bk->views);
    if (!bk->f || !bk->views)
        return spmv_error_set(s[0].err, SPMV_ERR_NOMEM, 0, "out of memory for %d columns", bk->k);
    TRY(spmv_vec_alloc(c, SPMV_DEVICE_GPU, b->dtype, b->n, bk->k, &bk->R, s[0].err));
    TRY(spmv_vec_alloc(c, SPMV_DEVICE_GPU, b->dtype, b->n, bk->k, &bk->P, s[0].err));
    TRY(spmv_vec_alloc(c, SPMV_DEVICE_GPU, b->dtype, b->n, bk->k, &bk->Q, s[0].err));
    if (cb)
        TRY(spmv_vec_alloc(c, SPMV_DEVICE_GPU, b->dtype, b->n, bk->k, &bk->Z, s[0].err));
    for (int32_t j = 0; j < bk->k; j++) {
        fused *f = &bk->f[j];
        spmv_vec *v = bk->views + 6 * (size_t)j;
        v[0] = spmv_vec_column(b, j);
        v[1] = spmv_vec_column(x, j);
        v[2] = spmv_vec_column(&bk->R, j);
        v[3] = spmv_vec_column(&bk->P, j);
        v[4] = spmv_vec_column(&bk->Q, j);
        v[5] = cb ? spmv_vec_column(&bk->Z, j) : v[2];
        *f = (fused){.s = &s[j], .m = &cg_method, .b = &v[0], .x = &v[1], .chunk = chunk, .cb = cb,
                     .d = cb ? NULL : o->inv_diag};
        f->v[CG_R] = &v[2];
        f->v[CG_P] = &v[3];
        f->v[CG_Q] = &v[4];
        f->v[CG_Z] = &v[5];
        f->col = j;
        s[j].res->fused = bk->live[j]; /* a column answered before (b = 0) ran nothing */
    }
    bk->X = x;
    TRY(spmv_gpu_fz_new_k(c, b->n, bk->k, chunk, 0, NULL, &bk->f[0].z, s[0].err));
    for (int32_t j = 0; j < bk->k; j++) { /* every column idles in the kernels until its start */
        bk->f[j].z = bk->f[0].z;
        TRY(put(&bk->f[j], &(fz_scalars){.stop = FZ_CONVERGED}));
    }
    return SPMV_OK;
}

/* R = B - A X (one product of the block, timed), each running column's
 * start, or its answer when its x0 already meets tol. */
static int block_start(fblock *bk, const spmv_vec *b, spmv_vec *x)
{
    solve_state *s0 = bk->f[0].s;
    int32_t n0 = bk->nlive;
    int st;
    TRY(s0->a->apply(s0->a->ctx, x, &bk->Q, &bk->ms1, s0->err));
    TRY(spmv_vec_copy(s0->ctx, b, &bk->R, s0->err));
    TRY(spmv_vec_axpy(s0->ctx, -1.0, &bk->Q, &bk->R, s0->err));
    for (int32_t j = 0; j < bk->k; j++) {
        fused *f = &bk->f[j];
        double rnorm;
        if (!bk->live[j])
            continue;
        f->s->res->spmv_calls++;
        f->s->res->spmv_ms += bk->ms1 / n0;
        TRY(krylov_nrm2(f->s, f->v[CG_R], &rnorm));
        bool done = krylov_record(f->s, 0, rnorm / f->s->bnorm) || krylov_converged(f->s, rnorm);
        if (!done)
            TRY(cg_start(f, f->v[CG_R], rnorm));
        if (done || f->s->res->stop == SPMV_STOP_BREAKDOWN) {
            bk->live[j] = false;
            bk->nlive--;
        }
    }
    return SPMV_OK;
}

static void block_free(fblock *bk)
{
    spmv_gpu_ctx *c = bk->f ? bk->f[0].s->ctx : NULL;
    if (bk->f)
        spmv_gpu_fz_free(c, bk->f[0].z);
    spmv_vec_free(c, &bk->R);
    spmv_vec_free(c, &bk->P);
    spmv_vec_free(c, &bk->Q);
    spmv_vec_free(c, &bk->Z);
    free(bk->f);
    free(bk->views);
    free(bk->live);
}

bool krylov_fused_block_eligible(const solve_state *s, const spmv_vec *b)
{
    const spmv_solve_options *o = s->o;
    return krylov_fused_eligible(s, b) && !o->reduce && o->method == SPMV_SOLVE_CG && (!o->precond || o->precond_k);
}

int krylov_fused_block(solve_state *s, int32_t k, const spmv_vec *b, spmv_vec *x, const bool *running)
{
    fblock bk = {.k = k, .live = calloc((size_t)k, sizeof(bool))};
    if (!bk.live)
        return spmv_error_set(s[0].err, SPMV_ERR_NOMEM, 0, "out of memory for %d columns", k);
    for (int32_t j = 0; j < k; j++)
        bk.nlive += bk.live[j] = running[j];
    bk.g.try_graph = !s[0].o->precond && !s[0].o->no_graph;
    int st = block_setup(&bk, s, b, x);
    if (!st && !(st = block_start(&bk, b, x)))
        st = block_drive(&bk);
    if (st)
        spmv_vec_sync(s[0].ctx, s[0].err); /* nothing queued may outlive the vectors */
    block_free(&bk);
    return st;
}
