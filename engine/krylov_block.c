/* krylov_block.c — k right-hand sides with one A in lockstep
 * (spmv_solve_block, engine/krylov.h).
 *
 * CG on k systems at once: each column keeps its own CG — its scalars,
 * its stop, its residual history and report, one solve_state each, so it
 * records, stops and words its messages as spmv_solve does — and the k
 * products of an iteration are one product of the n x k direction block
 * (an SpMM: one pass over A for all k). A column that has stopped leaves
 * its direction zero and stops counting iterations while the others go
 * on. The preconditioner is applied column by column (engine/precond.h
 * takes one column). The answer's residuals are recomputed at the end
 * with one more SpMM, as spmv_solve recomputes its own.
 *
 * Other methods, one column, and the fused path go to spmv_solve column
 * after column: the block is CG's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "krylov_impl.h"

typedef struct block {
    solve_state *s;            /* one per column */
    int32_t k;
    bool *active;
    double *rz;
    spmv_vec R, Z, P, Q;       /* n x k; Z is R without a preconditioner */
    bool own_z;
} block;

/* Column j of v, as a one-column vector over the same memory. */
static spmv_vec col(const spmv_vec *v, int32_t j)
{
    spmv_vec c = *v;
    c.k = 1;
    c.data = (char *)v->data + (size_t)j * (size_t)v->n * spmv_dtype_size(v->dtype);
    return c;
}

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
 * leave it alone. */
static int retire(block *bk, int32_t j)
{
    spmv_vec p = col(&bk->P, j);
    bk->active[j] = false;
    return spmv_vec_fill(bk->s[0].ctx, &p, 0.0, bk->s[0].err);
}

/* z = M^-1 r, r·z and the new direction for column j (beta 0: restart). */
static int direction(block *bk, int32_t j, double rnorm, bool first, bool restart)
{
    solve_state *s = &bk->s[j];
    spmv_vec r = col(&bk->R, j), z = col(&bk->Z, j), p = col(&bk->P, j);
    double rz_new = rnorm * rnorm;
    int st;
    if (krylov_preconditioned(s)) {
        TRY(krylov_precond(s, &r, &z));
        TRY(spmv_vec_dot(s->ctx, &r, &z, &rz_new, s->err));
    }
    if (!first && (bk->rz[j] == 0.0 || !isfinite(rz_new))) {
        krylov_breakdown(s, "r·z", rz_new, s->res->iterations - 1);
        return retire(bk, j);
    }
    if (first || restart) /* a fresh direction: p's memory may hold anything before */
        TRY(spmv_vec_copy(s->ctx, &z, &p, s->err));
    else
        TRY(spmv_vec_axpby(s->ctx, 1.0, &z, rz_new / bk->rz[j], &p, s->err));
    bk->rz[j] = rz_new;
    return SPMV_OK;
}

/* One CG step of column j after Q = A P: x, r, the history, the stop. */
static int step(block *bk, int32_t j, const spmv_vec *b, spmv_vec *x, int32_t it)
{
    solve_state *s = &bk->s[j];
    spmv_vec p = col(&bk->P, j), q = col(&bk->Q, j), r = col(&bk->R, j), bj = col(b, j), xj = col(x, j);
    double pq, rnorm;
    int st;
    TRY(spmv_vec_dot(s->ctx, &p, &q, &pq, s->err));
    if (!(pq > 0.0) || !isfinite(pq)) {
        krylov_breakdown(s, "p·Ap (the matrix is not positive definite)", pq, it);
        return retire(bk, j);
    }
    double alpha = bk->rz[j] / pq;
    TRY(spmv_vec_axpy(s->ctx, alpha, &p, &xj, s->err));
    TRY(spmv_vec_axpy(s->ctx, -alpha, &q, &r, s->err));
    TRY(spmv_vec_nrm2(s->ctx, &r, &rnorm, s->err));
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
    }
    return direction(bk, j, rnorm, false, restart);
}

/* R = B - A X, each column's start (or its answer when b = 0 or x0 is). */
static int start(block *bk, const spmv_vec *b, spmv_vec *x)
{
    int st;
    spmv_gpu_ctx *c = bk->s[0].ctx;
    TRY(block_apply(bk, x, &bk->Q));
    TRY(spmv_vec_copy(c, b, &bk->R, bk->s[0].err));
    TRY(spmv_vec_axpy(c, -1.0, &bk->Q, &bk->R, bk->s[0].err));
    for (int32_t j = 0; j < bk->k; j++) {
        if (!bk->active[j]) {
            TRY(retire(bk, j));
            continue;
        }
        spmv_vec r = col(&bk->R, j);
        double rnorm;
        TRY(spmv_vec_nrm2(c, &r, &rnorm, bk->s[j].err));
        if (krylov_record(&bk->s[j], 0, rnorm / bk->s[j].bnorm) || krylov_converged(&bk->s[j], rnorm))
            TRY(retire(bk, j));
        else
            TRY(direction(bk, j, rnorm, true, false));
    }
    return SPMV_OK;
}

/* The answers' residuals, recomputed with one product; each column's report. */
static int conclude(block *bk, const spmv_vec *b, const spmv_vec *x)
{
    int st;
    spmv_gpu_ctx *c = bk->s[0].ctx;
    TRY(bk->s[0].a->apply(bk->s[0].a->ctx, x, &bk->Q, &(double){0}, bk->s[0].err));
    TRY(spmv_vec_copy(c, b, &bk->R, bk->s[0].err));
    TRY(spmv_vec_axpy(c, -1.0, &bk->Q, &bk->R, bk->s[0].err));
    for (int32_t j = 0; j < bk->k; j++) {
        spmv_vec r = col(&bk->R, j);
        double rnorm;
        TRY(spmv_vec_nrm2(c, &r, &rnorm, bk->s[j].err));
        if (bk->s[j].bnorm > 0)
            krylov_conclude(&bk->s[j], rnorm);
    }
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

/* Every column begun (its ||b||; b = 0 answered); then the lockstep. */
static int lockstep(block *bk, const spmv_vec *b, spmv_vec *x)
{
    int st;
    for (int32_t j = 0; j < bk->k; j++) {
        spmv_vec bj = col(b, j), xj = col(x, j);
        bool zero_b;
        TRY(krylov_begin(&bk->s[j], &bj, &xj, &zero_b));
        bk->active[j] = !zero_b;
    }
    TRY(block_alloc(bk, b));
    TRY(start(bk, b, x));
    for (int32_t it = 0; it < bk->s[0].o->maxit; it++) {
        bool any = false;
        for (int32_t j = 0; j < bk->k && !any; j++)
            any = bk->active[j];
        if (!any)
            break;
        TRY(block_apply(bk, &bk->P, &bk->Q));
        for (int32_t j = 0; j < bk->k; j++)
            if (bk->active[j])
                TRY(step(bk, j, b, x, it));
    }
    return conclude(bk, b, x);
}

/* One column at a time through spmv_solve. */
static int column_by_column(spmv_gpu_ctx *ctx, const spmv_linop *a, const spmv_vec *b, spmv_vec *x,
                            const spmv_solve_options *o, spmv_solve_result *res, spmv_error *err)
{
    for (int32_t j = 0; j < b->k; j++) {
        spmv_vec bj = col(b, j), xj = col(x, j);
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
    spmv_vec b0 = col(b, 0), x0 = col(x, 0);
    int st = krylov_check(a, &b0, &x0, o, err);
    if (st)
        return st;
    solve_state probe = {.ctx = ctx, .a = a, .o = o};
    if (b->k == 1 || o->method != SPMV_SOLVE_CG || krylov_fused_eligible(&probe, &b0))
        return column_by_column(ctx, a, b, x, o, res, err);
    double t0 = spmv_now_ms();
    block bk = {.k = b->k, .s = calloc((size_t)b->k, sizeof *bk.s), .active = calloc((size_t)b->k, sizeof(bool)),
                .rz = calloc((size_t)b->k, sizeof(double))};
    if (!bk.s || !bk.active || !bk.rz) {
        free(bk.s);
        free(bk.active);
        free(bk.rz);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for %d columns", b->k);
    }
    for (int32_t j = 0; j < b->k; j++) {
        memset(&res[j], 0, sizeof res[j]);
        bk.s[j] = (solve_state){.ctx = ctx, .a = a, .o = o, .res = &res[j], .err = err};
    }
    st = lockstep(&bk, b, x);
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
