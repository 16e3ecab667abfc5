/* minres.c — MINRES (Paige & Saunders, 1975) on the engine's vector calls.
 *
 * For symmetric A that may be indefinite, where CG breaks down: the
 * Lanczos process builds an orthonormal basis of the Krylov space (v) and
 * a QR factorisation of its tridiagonal matrix by plane rotations (cs, sn)
 * is updated one column per iteration, so x moves along the directions w
 * that minimise ||b - A x|| over the space. This is SciPy's minres
 * without the shift and the norm estimates; the preconditioner must be
 * symmetric positive definite (M^-1 r with r·M^-1 r > 0, else the solve
 * stops as a breakdown). The recurrence's residual is phibar, the norm
 * ||r||_{M^-1}; scaled by ||r0|| / ||r0||_{M^-1} it is the estimate of
 * ||b - A x|| the history records and the stop rule tests (exact without
 * a preconditioner). When it meets tol the true residual decides, as for
 * the other methods, and a miss restarts the process from it.
 *
 * The three Lanczos vectors (r1, r2, y) and the three directions (w1, w2,
 * w) rotate through fixed buffers instead of being copied.
 */
#include <math.h>

#include "krylov_impl.h"

typedef struct mr {
    spmv_vec *r1, *r2, *y, *v, *w, *w1, *w2;
    double beta, oldb, dbar, epsln, phibar, cs, sn, scale;
} mr;

static void rotate3(spmv_vec **a, spmv_vec **b, spmv_vec **c)
{
    spmv_vec *t = *a;
    *a = *b;
    *b = *c;
    *c = t;
}

/* z = M^-1 r2: y when preconditioned, r2 itself otherwise. */
static spmv_vec *mr_z(solve_state *s, mr *q) { return krylov_preconditioned(s) ? q->y : q->r2; }

/* From the residual in r1 (norm rnorm): r2 = r1, z = M^-1 r1, beta1 =
 * sqrt(r1·z), directions zero. *bad on a preconditioner that is not
 * positive definite (the stop is marked). */
static int mr_start(solve_state *s, mr *q, double rnorm, int32_t it, bool *bad)
{
    spmv_gpu_ctx *c = s->ctx;
    double rz;
    int st;
    TRY(spmv_vec_copy(c, q->r1, q->r2, s->err));
    if (krylov_preconditioned(s))
        TRY(krylov_precond(s, q->r2, q->y));
    TRY(krylov_dot(s, q->r2, mr_z(s, q), &rz));
    if ((*bad = !(rz > 0.0) || !isfinite(rz))) {
        krylov_breakdown(s, KRYLOV_BD_MINRES_M, rz, it);
        return SPMV_OK;
    }
    q->beta = sqrt(rz);
    q->oldb = 0.0;
    q->dbar = q->epsln = q->sn = 0.0;
    q->cs = -1.0;
    q->phibar = q->beta;
    q->scale = rnorm / q->beta;
    TRY(spmv_vec_fill(c, q->w, 0.0, s->err));
    TRY(spmv_vec_fill(c, q->w1, 0.0, s->err));
    return spmv_vec_fill(c, q->w2, 0.0, s->err);
}

/* The Lanczos step: v = z / beta, y = A v - (beta/oldb) r1 - (alfa/beta) r2,
 * then r1, r2 = r2, y and z = M^-1 r2. *alfa = v·A v. */
static int mr_lanczos(solve_state *s, mr *q, double *alfa)
{
    spmv_gpu_ctx *c = s->ctx;
    spmv_error *e = s->err;
    int st;
    TRY(spmv_vec_axpby(c, 1.0 / q->beta, mr_z(s, q), 0.0, q->v, e));
    TRY(krylov_apply(s, q->v, q->y));
    if (q->oldb != 0.0)
        TRY(spmv_vec_axpy(c, -q->beta / q->oldb, q->r1, q->y, e));
    TRY(krylov_dot(s, q->v, q->y, alfa));
    TRY(spmv_vec_axpy(c, -*alfa / q->beta, q->r2, q->y, e));
    rotate3(&q->r1, &q->r2, &q->y); /* y's buffer (the old r1) is free */
    return krylov_preconditioned(s) ? krylov_precond(s, q->r2, q->y) : SPMV_OK;
}

/* The rotations of the QR factorisation for the column (alfa, beta_new),
 * then w and x. *gamma is the new diagonal (0: breakdown). */
static int mr_update(solve_state *s, mr *q, double alfa, double beta_new, spmv_vec *x, double *gamma)
{
    spmv_gpu_ctx *c = s->ctx;
    spmv_error *e = s->err;
    int st;
    double oldeps = q->epsln;
    double delta = q->cs * q->dbar + q->sn * alfa;
    double gbar = q->sn * q->dbar - q->cs * alfa;
    q->epsln = q->sn * beta_new;
    q->dbar = -q->cs * beta_new;
    *gamma = hypot(gbar, beta_new);
    if (*gamma == 0.0 || !isfinite(*gamma))
        return SPMV_OK;
    q->cs = gbar / *gamma;
    q->sn = beta_new / *gamma;
    double phi = q->cs * q->phibar;
    q->phibar *= q->sn;
    rotate3(&q->w1, &q->w2, &q->w); /* w's buffer (the old w1) is free */
    TRY(spmv_vec_axpby(c, 1.0 / *gamma, q->v, 0.0, q->w, e));
    TRY(spmv_vec_axpy(c, -oldeps / *gamma, q->w1, q->w, e));
    TRY(spmv_vec_axpy(c, -delta / *gamma, q->w2, q->w, e));
    return spmv_vec_axpy(c, phi, q->w, x, e);
}

/* One iteration; *stop when the solve is over (a breakdown, a cancel, the
 * true residual met), else the process may have restarted from it. */
static int mr_iteration(solve_state *s, mr *q, const spmv_vec *b, spmv_vec *x, int32_t it, bool *stop)
{
    double alfa, rz, gamma;
    int st;
    TRY(mr_lanczos(s, q, &alfa));
    TRY(krylov_dot(s, q->r2, mr_z(s, q), &rz));
    if ((*stop = rz < 0.0 || !isfinite(rz) || !isfinite(alfa))) {
        krylov_breakdown(s, KRYLOV_BD_MINRES_M, rz, it);
        return SPMV_OK;
    }
    double beta_new = sqrt(rz);
    TRY(mr_update(s, q, alfa, beta_new, x, &gamma));
    if ((*stop = gamma == 0.0 || !isfinite(gamma))) {
        krylov_breakdown(s, KRYLOV_BD_MINRES_GAMMA, gamma, it);
        return SPMV_OK;
    }
    q->oldb = q->beta;
    q->beta = beta_new;
    double est = q->phibar * q->scale;
    if ((*stop = krylov_record(s, it + 1, est / s->bnorm)))
        return SPMV_OK;
    if (!krylov_converged(s, est) && beta_new != 0.0) /* beta 0: the space is invariant, x is exact */
        return SPMV_OK;
    TRY(krylov_truly_converged(s, b, x, q->r1, stop));
    if (*stop)
        return SPMV_OK;
    double rnorm; /* restart from the true residual, now in r1 */
    TRY(krylov_nrm2(s, q->r1, &rnorm));
    return mr_start(s, q, rnorm, it, stop);
}

int krylov_minres(solve_state *s, const spmv_vec *b, spmv_vec *x)
{
    mr q = {0};
    double rnorm;
    bool stop = false;
    int st;
    spmv_vec **bufs[] = {&q.r1, &q.r2, &q.y, &q.v, &q.w, &q.w1, &q.w2};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        TRY(krylov_work(s, b, bufs[i]));
    TRY(krylov_residual(s, b, x, q.r1));
    TRY(krylov_nrm2(s, q.r1, &rnorm));
    if (krylov_record(s, 0, rnorm / s->bnorm) || krylov_converged(s, rnorm))
        return SPMV_OK;
    TRY(mr_start(s, &q, rnorm, 0, &stop));
    for (int32_t it = 0; it < s->o->maxit && !stop; it++)
        TRY(mr_iteration(s, &q, b, x, it, &stop));
    return SPMV_OK;
}
