/* krylov_block.c — k right-hand sides with one A in lockstep
 * (spmv_solve_block, engine/krylov.h).
 *
 * CG on k systems at once: each column keeps its own CG — its scalars,
 * its stop, its residual history and report, one solve_state each, so it
 * records, stops and words its messages as spmv_solve does — and the k
 * products of an iteration are one product of the n x k direction block
 * (an SpMM: one pass over A for all k). The vector steps run on the k
 * columns at once too (the k-column calls of engine/spmv.h, spmv_vec_*_k,
 * each column with its own scalar): an iteration is the SpMM, one
 * reduction for the k p·q, two updates (x, r), Jacobi's D^-1 r, one
 * reduction for the k ||r|| and r·z together, and one update of the
 * directions — on a GPU six launches and two waits for the host
 * whatever k is, where column by column it was k of each. A column that
 * has stopped leaves its direction zero (the SpMM leaves it alone), stops
 * counting iterations, and is masked off in the k-column calls, so the
 * others go on and each column's arithmetic is its own CG's: on the host
 * the calls run the one-column loops, and the iterations, history and x
 * are spmv_solve's bit for bit (where those loops run serially: an OpenMP
 * team's reductions may add in another order). A preconditioner callback
 * (AMG, ...) is applied to the running columns at once when the options
 * carry its k-column form (precond_k: engine/precond.h's
 * spmv_precond_apply_k, AMG's V-cycle with every product an SpMM of the
 * block), else column by column; the rare residual replacement of a
 * column is preconditioned alone. The answer's residuals are
 * recomputed at the end with one more SpMM, as spmv_solve recomputes its
 * own.
 *
 * On the fused path (a GPU operator with device_apply) the same lockstep
 * runs with every column's scalars on the device (krylov_fused_block,
 * engine/krylov_fused.c): one product of the block and each column's
 * kernels an iteration, a chunk of them a CUDA graph, the host reading the
 * columns' statuses every check_every iterations; the columns are begun
 * and concluded here as above. Other methods, and a callback
 * preconditioner without a k-column form on the fused path, go to
 * spmv_solve column after column: the block is CG's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "krylov_impl.h"

typedef struct block {
    solve_state *s;            /* one per column */
    int32_t k;
    bool *active;              /* the columns still iterating: the k-column calls' mask */
    double *rz;                /* r·z of each column's current direction */
    double *sc, *pq, *rnorm, *rznew; /* one reduction's or one update's k scalars */
    spmv_vec R, Z, P, Q;       /* n x k; Z is R without a preconditioner */
    bool own_z;
} block;

/* Y = A X, the k columns in one product, its time shared by the columns
 * still running. */
static int block_apply(block *bk, const spmv_vec *x, spmv_vec *y)
{
    const spmv_linop *a = bk->s[0].a;
    double ms = 0;
    int st = a->apply(a->ctx, x, y, &ms, bk->s[0].err);
    int32_t on = 0;
    for (int32_t j = 0; j < bk->k; j++)
        on += bk->active[j];
    for (int32_t j = 0; j < bk->k && st == SPMV_OK; j++)
        if (bk->active[j]) {
            bk->s[j].res->spmv_ms += ms / on;
            bk->s[j].res->spmv_calls++;
        }
    return st;
}

/* Column j stops: its direction becomes zero, so the block's products
 * leave it alone, and the k-column calls mask it off. */
static int retire(block *bk, int32_t j)
{
    spmv_vec p = spmv_vec_column(&bk->P, j);
    bk->active[j] = false;
    return spmv_vec_fill(bk->s[0].ctx, &p, 0.0, bk->s[0].err);
}

/* Z = M^-1 R for the running columns: Jacobi in one call for all of them;
 * a preconditioner with a k-column callback (precond_k: AMG's V-cycle on
 * the block) in one call too; else the callback column by column. */
static int block_precond(block *bk)
{
    solve_state *s = &bk->s[0];
    int st;
    if (!s->o->precond)
        return spmv_vec_diag_k(s->ctx, s->o->inv_diag, &bk->R, &bk->Z, bk->active, s->err);
    if (s->o->precond_k)
        return s->o->precond_k(s->o->precond_ctx, &bk->R, &bk->Z, bk->active, s->err);
    for (int32_t j = 0; j < bk->k; j++)
        if (bk->active[j]) {
            spmv_vec r = spmv_vec_column(&bk->R, j), z = spmv_vec_column(&bk->Z, j);
            TRY(krylov_precond(&bk->s[j], &r, &z));
        }
    return SPMV_OK;
}

/* ||r_j|| of every running column into bk->rnorm and, under a
 * preconditioner (Z = M^-1 R first) or when `dot` asks, r_j·z_j into
 * bk->rznew: one reduction. (CG's first r·z is a dot even with z = r, its
 * later ones ||r||^2: spmv_solve's arithmetic.) */
static int block_norms(block *bk, bool dot)
{
    solve_state *s = &bk->s[0];
    int st;
    if (krylov_preconditioned(s))
        TRY(block_precond(bk));
    else if (!dot)
        return spmv_vec_nrm2_dot_k(s->ctx, &bk->R, NULL, bk->active, bk->rnorm, NULL, s->err);
    return spmv_vec_nrm2_dot_k(s->ctx, &bk->R, &bk->Z, bk->active, bk->rnorm, bk->rznew, s->err);
}

/* After column j's x and r moved: its history, its stop, and the scalar
 * of its next direction into bk->sc[j] (0: a fresh one, p = z). */
static int finish(block *bk, int32_t j, const spmv_vec *b, spmv_vec *x, int32_t it)
{
    solve_state *s = &bk->s[j];
    spmv_vec q = spmv_vec_column(&bk->Q, j), r = spmv_vec_column(&bk->R, j), z = spmv_vec_column(&bk->Z, j);
    spmv_vec bj = spmv_vec_column(b, j), xj = spmv_vec_column(x, j);
    double rnorm = bk->rnorm[j], rz_new = bk->rznew[j];
    int st;
    if (krylov_record(s, it + 1, rnorm / s->bnorm))
        return retire(bk, j);
    bool restart = false;
    if (krylov_converged(s, rnorm)) {
        bool yes;
        TRY(krylov_truly_converged(s, &bj, &xj, &q, &yes));
        if (yes)
            return retire(bk, j);
        TRY(spmv_vec_copy(s->ctx, &q, &r, s->err)); /* residual replacement, then a fresh direction */
        restart = true;
        if (krylov_preconditioned(s)) { /* z and r·z of the replaced r: this column alone */
            TRY(krylov_precond(s, &r, &z));
            TRY(spmv_vec_dot(s->ctx, &r, &z, &rz_new, s->err));
        }
    }
    if (!krylov_preconditioned(s))
        rz_new = rnorm * rnorm;
    if (bk->rz[j] == 0.0 || !isfinite(rz_new)) {
        krylov_breakdown(s, "r·z", rz_new, it);
        return retire(bk, j);
    }
    bk->sc[j] = restart ? 0.0 : rz_new / bk->rz[j];
    bk->rz[j] = rz_new;
    return SPMV_OK;
}

/* One iteration of every running column after Q = A P: p·q, x and r
 * (one reduction, two k-column updates), ||r|| and r·z (one reduction),
 * each column's stop, the new directions (one update). */
static int iterate(block *bk, const spmv_vec *b, spmv_vec *x, int32_t it)
{
    spmv_gpu_ctx *c = bk->s[0].ctx;
    spmv_error *e = bk->s[0].err;
    int st;
    TRY(spmv_vec_dot_k(c, &bk->P, &bk->Q, bk->active, bk->pq, e));
    for (int32_t j = 0; j < bk->k; j++) {
        if (!bk->active[j])
            continue;
        double pq = bk->pq[j];
        if (!(pq > 0.0) || !isfinite(pq)) {
            krylov_breakdown(&bk->s[j], "p·Ap (the matrix is not positive definite)", pq, it);
            TRY(retire(bk, j));
            continue;
        }
        bk->sc[j] = bk->rz[j] / pq;
    }
    TRY(spmv_vec_axpy_k(c, bk->sc, &bk->P, x, bk->active, e));   /* x += alpha p */
    for (int32_t j = 0; j < bk->k; j++)
        bk->sc[j] = -bk->sc[j];
    TRY(spmv_vec_axpy_k(c, bk->sc, &bk->Q, &bk->R, bk->active, e)); /* r -= alpha q */
    TRY(block_norms(bk, false));
    for (int32_t j = 0; j < bk->k; j++)
        if (bk->active[j])
            TRY(finish(bk, j, b, x, it));
    return spmv_vec_xpay_k(c, &bk->Z, bk->sc, &bk->P, bk->active, e); /* p = z + beta p */
}

/* R = B - A X, each column's start (or its answer when b = 0 or x0 is),
 * and the first directions P = Z. */
static int start(block *bk, const spmv_vec *b, spmv_vec *x)
{
    int st;
    spmv_gpu_ctx *c = bk->s[0].ctx;
    TRY(block_apply(bk, x, &bk->Q));
    TRY(spmv_vec_copy(c, b, &bk->R, bk->s[0].err));
    TRY(spmv_vec_axpy(c, -1.0, &bk->Q, &bk->R, bk->s[0].err));
    for (int32_t j = 0; j < bk->k; j++)
        if (!bk->active[j])
            TRY(retire(bk, j));
    TRY(block_norms(bk, true));
    for (int32_t j = 0; j < bk->k; j++) {
        if (!bk->active[j])
            continue;
        double rnorm = bk->rnorm[j];
        if (krylov_record(&bk->s[j], 0, rnorm / bk->s[j].bnorm) || krylov_converged(&bk->s[j], rnorm)) {
            TRY(retire(bk, j));
            continue;
        }
        bk->rz[j] = bk->rznew[j];
        bk->sc[j] = 0.0;
    }
    return spmv_vec_xpay_k(c, &bk->Z, bk->sc, &bk->P, bk->active, bk->s[0].err);
}

/* The answers' residuals, recomputed with one product and one reduction;
 * each column's report. */
static int conclude(block *bk, const spmv_vec *b, const spmv_vec *x)
{
    int st;
    spmv_gpu_ctx *c = bk->s[0].ctx;
    TRY(bk->s[0].a->apply(bk->s[0].a->ctx, x, &bk->Q, &(double){0}, bk->s[0].err));
    TRY(spmv_vec_copy(c, b, &bk->R, bk->s[0].err));
    TRY(spmv_vec_axpy(c, -1.0, &bk->Q, &bk->R, bk->s[0].err));
    TRY(spmv_vec_nrm2_dot_k(c, &bk->R, NULL, NULL, bk->rnorm, NULL, bk->s[0].err));
    for (int32_t j = 0; j < bk->k; j++)
        if (bk->s[j].bnorm > 0)
            krylov_conclude(&bk->s[j], bk->rnorm[j]);
    return SPMV_OK;
}

static int block_alloc(block *bk, const spmv_vec *b)
{
    spmv_gpu_ctx *c = bk->s[0].ctx;
    spmv_error *e = bk->s[0].err;
    int st;
    TRY(spmv_vec_alloc(c, b->device, b->dtype, b->n, b->k, &bk->R, e));
    TRY(spmv_vec_alloc(c, b->device, b->dtype, b->n, b->k, &bk->P, e));
    TRY(spmv_vec_alloc(c, b->device, b->dtype, b->n, b->k, &bk->Q, e));
    bk->own_z = krylov_preconditioned(&bk->s[0]);
    if (bk->own_z)
        TRY(spmv_vec_alloc(c, b->device, b->dtype, b->n, b->k, &bk->Z, e));
    else
        bk->Z = bk->R;
    return SPMV_OK;
}

static void block_free(block *bk)
{
    spmv_gpu_ctx *c = bk->s[0].ctx;
    spmv_vec_free(c, &bk->R);
    spmv_vec_free(c, &bk->P);
    spmv_vec_free(c, &bk->Q);
    if (bk->own_z)
        spmv_vec_free(c, &bk->Z);
    for (int32_t j = 0; j < bk->k; j++)
        for (int i = 0; i < bk->s[j].nw; i++)
            spmv_vec_free(c, &bk->s[j].w[i]);
}

/* Every column begun: its ||b||, b = 0 answered (not active). */
static int begin(block *bk, const spmv_vec *b, spmv_vec *x)
{
    int st;
    for (int32_t j = 0; j < bk->k; j++) {
        spmv_vec bj = spmv_vec_column(b, j), xj = spmv_vec_column(x, j);
        bool zero_b;
        TRY(krylov_begin(&bk->s[j], &bj, &xj, &zero_b));
        bk->active[j] = !zero_b;
    }
    return SPMV_OK;
}

/* Every column begun (its ||b||; b = 0 answered); then the lockstep. */
static int lockstep(block *bk, const spmv_vec *b, spmv_vec *x)
{
    int st;
    TRY(begin(bk, b, x));
    TRY(block_alloc(bk, b));
    TRY(start(bk, b, x));
    for (int32_t it = 0; it < bk->s[0].o->maxit; it++) {
        bool any = false;
        for (int32_t j = 0; j < bk->k && !any; j++)
            any = bk->active[j];
        if (!any)
            break;
        TRY(block_apply(bk, &bk->P, &bk->Q));
        TRY(iterate(bk, b, x, it));
    }
    return conclude(bk, b, x);
}

/* The same on the fused path (engine/krylov_fused.c's
 * krylov_fused_block): the columns begun here, iterated there, their
 * answers' residuals recomputed here. */
static int fused_lockstep(block *bk, const spmv_vec *b, spmv_vec *x)
{
    int st;
    spmv_gpu_ctx *c = bk->s[0].ctx;
    TRY(begin(bk, b, x));
    TRY(krylov_fused_block(bk->s, bk->k, b, x, bk->active));
    TRY(spmv_vec_alloc(c, b->device, b->dtype, b->n, b->k, &bk->R, bk->s[0].err));
    TRY(spmv_vec_alloc(c, b->device, b->dtype, b->n, b->k, &bk->Q, bk->s[0].err));
    return conclude(bk, b, x);
}

/* One column at a time through spmv_solve. */
static int column_by_column(spmv_gpu_ctx *ctx, const spmv_linop *a, const spmv_vec *b, spmv_vec *x,
                            const spmv_solve_options *o, spmv_solve_result *res, spmv_error *err)
{
    for (int32_t j = 0; j < b->k; j++) {
        spmv_vec bj = spmv_vec_column(b, j), xj = spmv_vec_column(x, j);
        int st = spmv_solve(ctx, a, &bj, &xj, o, &res[j], err);
        if (st) {
            for (int32_t i = 0; i < j; i++)
                spmv_solve_result_free(&res[i]);
            return st;
        }
    }
    return SPMV_OK;
}

int spmv_solve_block(spmv_gpu_ctx *ctx, const spmv_linop *a, const spmv_vec *b, spmv_vec *x,
                     const spmv_solve_options *o, spmv_solve_result *res, spmv_error *err)
{
    if (!b || !x || b->k != x->k || b->k < 1)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "solve: b and x need the same number of columns (b %d, x %d)",
                              b ? b->k : 0, x ? x->k : 0);
    if (o && o->reduce && b->k > 1)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "solve: k columns do not run distributed (one column a solve)");
    spmv_vec b0 = spmv_vec_column(b, 0), x0 = spmv_vec_column(x, 0);
    int st = krylov_check(a, &b0, &x0, o, err);
    if (st)
        return st;
    solve_state probe = {.ctx = ctx, .a = a, .o = o};
    bool fused = krylov_fused_block_eligible(&probe, &b0);
    if (b->k == 1 || o->method != SPMV_SOLVE_CG || (!fused && krylov_fused_eligible(&probe, &b0)))
        return column_by_column(ctx, a, b, x, o, res, err);
    double t0 = spmv_now_ms();
    block bk = {.k = b->k, .s = calloc((size_t)b->k, sizeof *bk.s), .active = calloc((size_t)b->k, sizeof(bool)),
                .rz = calloc(5 * (size_t)b->k, sizeof(double))};
    if (!bk.s || !bk.active || !bk.rz) {
        free(bk.s);
        free(bk.active);
        free(bk.rz);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for %d columns", b->k);
    }
    bk.sc = bk.rz + b->k;
    bk.pq = bk.sc + b->k;
    bk.rnorm = bk.pq + b->k;
    bk.rznew = bk.rnorm + b->k;
    for (int32_t j = 0; j < b->k; j++) {
        memset(&res[j], 0, sizeof res[j]);
        bk.s[j] = (solve_state){.ctx = ctx, .a = a, .o = o, .res = &res[j], .err = err};
    }
    st = fused ? fused_lockstep(&bk, b, x) : lockstep(&bk, b, x);
    block_free(&bk);
    double total = spmv_now_ms() - t0;
    for (int32_t j = 0; j < b->k; j++) {
        res[j].total_ms = total;
        res[j].vector_ms = fmax(0.0, total - res[j].spmv_ms - res[j].setup_ms);
        if (st)
            spmv_solve_result_free(&res[j]);
    }
    free(bk.s);
    free(bk.active);
    free(bk.rz);
    return st;
}
