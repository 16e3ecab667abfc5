/* krylov.c — CG, BiCGSTAB and restarted GMRES on the engine's vector calls.
 *
 * Every vector operation is an spmv_vec_* call and every product the
 * caller's operator, so these loops run unchanged on host vectors and on a
 * GPU's (krylov.h says how they stop). The preconditioner is Jacobi or
 * none: CG applies it as PCG (z = D^-1 r, so the residual tested is the
 * true r); BiCGSTAB and GMRES apply it on the right (A D^-1 u = b, x =
 * D^-1 u), so their residual is b - A*x too and one tolerance means the
 * same thing for all three, as in SciPy.
 *
 * The time split: `spmv_ms` is the sum of the operator's own times, `setup`
 * the work vectors and the first residual, `vector` the rest (BLAS-1 and
 * the waits of dots for the device).
 *
 * A distributed solve runs these same loops on every MPI rank's rows
 * (cluster/solve.c): each dot and norm is krylov_dot / krylov_nrm2, which
 * sum the ranks' parts through the options' reduce hook, and the operator
 * exchanges the halo.
 *
 * MINRES is engine/minres.c, and the fused path of all four methods on a GPU
 * (scalars on the device) engine/krylov_fused.c; spmv_solve dispatches to
 * them, and they share this file's state and helpers (engine/krylov_impl.h).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "krylov_impl.h"

static const char *const method_names[] = {"cg", "bicgstab", "gmres", "minres"};
#define NMETHODS ((int)(sizeof method_names / sizeof *method_names))
static const char *const stop_names[] = {"converged", "maxit", "breakdown", "cancelled"};

const char *spmv_solve_method_name(spmv_solve_method m)
{
    return (unsigned)m < NMETHODS ? method_names[m] : "?";
}

int spmv_solve_method_parse(const char *name, spmv_solve_method *out)
{
    for (int i = 0; name && i < NMETHODS; i++)
        if (strcasecmp(name, method_names[i]) == 0) {
            *out = (spmv_solve_method)i;
            return SPMV_OK;
        }
    return SPMV_ERR_INVALID;
}

const char *spmv_solve_stop_name(spmv_solve_stop s)
{
    return (unsigned)s < 4 ? stop_names[s] : "?";
}

void spmv_solve_result_free(spmv_solve_result *res)
{
    if (res) {
        free(res->history);
        res->history = NULL;
        res->history_len = 0;
    }
}

/* a_ii of row i (a binary search: the CSR contract), 0 where it has none. */
static double csr_diag(const spmv_csr *a, int32_t i)
{
    int64_t p = spmv_csr_find(a, i, i);
    if (p < 0)
        return 0.0;
    return a->dtype == SPMV_FLOAT64 ? ((const double *)a->val)[p] : ((const float *)a->val)[p];
}

int spmv_csr_inv_diag(const spmv_csr *a, void *out, spmv_error *err)
{
    if (a->rows != a->cols)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "Jacobi needs a square matrix, not %d x %d", a->rows, a->cols);
    for (int32_t i = 0; i < a->rows; i++) { /* one thread: the API's threads run it too */
        double d = csr_diag(a, i);
        if (d == 0.0 || !isfinite(d))
            return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                                  "Jacobi needs a non-zero finite diagonal: row %d (0-based) has a_ii = %g", i, d);
        if (a->dtype == SPMV_FLOAT64)
            ((double *)out)[i] = 1.0 / d;
        else
            ((float *)out)[i] = (float)(1.0 / d);
    }
    return SPMV_OK;
}

/* ------------------------------------------------------------ the state */

static int work(solve_state *s, const spmv_vec *like, spmv_vec **out)
{
    if (s->nw == MAX_WORK)
        return spmv_error_set(s->err, SPMV_ERR_INVALID, 0, "solver: too many work vectors");
    spmv_vec *v = &s->w[s->nw];
    int st = spmv_vec_alloc(s->ctx, like->device, like->dtype, like->n, 1, v, s->err);
    if (st == SPMV_OK) {
        s->nw++;
        *out = v;
    }
    return st;
}

static int apply(solve_state *s, const spmv_vec *x, spmv_vec *y)
{
    double ms = 0;
    int st = s->a->apply(s->a->ctx, x, y, &ms, s->err);
    s->res->spmv_ms += ms;
    s->res->spmv_calls++;
    return st;
}

/* x·y over the whole vector: this process's part, summed over the ranks
 * of a distributed solve by the options' reduce hook (every rank gets the
 * same bits, so every rank takes the same branch after it). */
int krylov_dot(solve_state *s, const spmv_vec *x, const spmv_vec *y, double *out)
{
    int st = spmv_vec_dot(s->ctx, x, y, out, s->err);
    if (st == SPMV_OK && s->o->reduce)
        st = s->o->reduce(s->o->reduce_ctx, out, 1, s->err);
    return st;
}

/* ||x||: spmv_vec_nrm2's scaled norm on one process; distributed, the
 * root of the summed squares (a norm that over- or underflows there was
 * refused with b, check_scale). */
int krylov_nrm2(solve_state *s, const spmv_vec *x, double *out)
{
    if (!s->o->reduce)
        return spmv_vec_nrm2(s->ctx, x, out, s->err);
    int st = krylov_dot(s, x, x, out);
    if (st == SPMV_OK)
        *out = sqrt(*out);
    return st;
}

static void breakdown(solve_state *s, const char *what, double value, int32_t it);

/* Records the relative residual of iteration `it`; non-zero when the
 * caller cancels, or when it is not finite (a breakdown: every norm and
 * dot carries NaN and Inf, so one in A, x0 or an iterate shows here, and
 * nothing after can undo it). */
static int record(solve_state *s, int32_t it, double relres)
{
    spmv_solve_result *r = s->res;
    if (r->history_len == s->hist_cap) {
        int32_t cap = s->hist_cap ? 2 * s->hist_cap : 64;
        double *h = realloc(r->history, (size_t)cap * sizeof *h);
        if (!h)
            return spmv_error_set(s->err, SPMV_ERR_NOMEM, 0, "out of memory for the residual history");
        r->history = h;
        s->hist_cap = cap;
    }
    r->history[r->history_len++] = relres;
    r->iterations = it;
    if (!isfinite(relres)) {
        breakdown(s, "non-finite: the residual norm ||r|| / ||b||", relres, it - 1);
        return 1;
    }
    if (it > 0 && s->o->progress && s->o->progress(s->o->progress_ctx, it, relres)) {
        r->stop = SPMV_STOP_CANCELLED;
        snprintf(r->detail, sizeof r->detail, "cancelled after %d iterations", it);
        return 1;
    }
    return 0;
}

static void breakdown(solve_state *s, const char *what, double value, int32_t it)
{
    s->res->stop = SPMV_STOP_BREAKDOWN;
    s->res->breakdown_value = value;
    snprintf(s->res->detail, sizeof s->res->detail, "breakdown: %s = %.17g at iteration %d", what, value, it + 1);
}

/* Whether the residual norm meets tol; marks the stop when it does. */
static bool converged(solve_state *s, double rnorm)
{
    bool yes = rnorm <= s->o->tol * s->bnorm;
    if (yes && s->res->stop == SPMV_STOP_MAXIT)
        s->res->stop = SPMV_STOP_CONVERGED;
    return yes;
}

/* The recurrence says converged: is the true residual b - A*x there too?
 * Recurrences drift from it (rounding, loss of orthogonality), so a method
 * stops only when the true one agrees; otherwise tmp holds b - A*x, the
 * caller restarts from it, and the stop is back to "not yet". */
static int truly_converged(solve_state *s, const spmv_vec *b, const spmv_vec *x, spmv_vec *tmp, bool *yes);

static bool preconditioned(const solve_state *s) { return s->o->inv_diag || s->o->precond; }

/* z = M^-1 r: the preconditioner's, D^-1 r (Jacobi), or z = r. */
static int precond(solve_state *s, const spmv_vec *r, spmv_vec *z)
{
    if (s->o->precond)
        return s->o->precond(s->o->precond_ctx, r, z, s->err);
    int st = spmv_vec_copy(s->ctx, r, z, s->err);
    if (st == SPMV_OK && s->o->inv_diag)
        st = spmv_vec_mul(s->ctx, s->o->inv_diag, z, s->err);
    return st;
}

/* r = b - A*x */
static int residual(solve_state *s, const spmv_vec *b, const spmv_vec *x, spmv_vec *r)
{
    int st = apply(s, x, r);
    if (st == SPMV_OK)
        st = spmv_vec_axpby(s->ctx, 1.0, b, -1.0, r, s->err);
    return st;
}

static int truly_converged(solve_state *s, const spmv_vec *b, const spmv_vec *x, spmv_vec *tmp, bool *yes)
{
    double tn;
    int st = residual(s, b, x, tmp);
    if (st == SPMV_OK)
        st = krylov_nrm2(s, tmp, &tn);
    *yes = st == SPMV_OK && tn <= s->o->tol * s->bnorm;
    if (st == SPMV_OK && !*yes)
        s->res->stop = SPMV_STOP_MAXIT; /* not converged after all: go on */
    return st;
}

/* The helpers under the names the other solver files call (krylov_impl.h). */
int krylov_work(solve_state *s, const spmv_vec *like, spmv_vec **out) { return work(s, like, out); }
int krylov_apply(solve_state *s, const spmv_vec *x, spmv_vec *y) { return apply(s, x, y); }
int krylov_residual(solve_state *s, const spmv_vec *b, const spmv_vec *x, spmv_vec *r)
{
    return residual(s, b, x, r);
}
int krylov_precond(solve_state *s, const spmv_vec *r, spmv_vec *z) { return precond(s, r, z); }
bool krylov_preconditioned(const solve_state *s) { return preconditioned(s); }
int krylov_record(solve_state *s, int32_t it, double relres) { return record(s, it, relres); }
void krylov_breakdown(solve_state *s, const char *what, double value, int32_t it) { breakdown(s, what, value, it); }
bool krylov_converged(solve_state *s, double rnorm) { return converged(s, rnorm); }
int krylov_truly_converged(solve_state *s, const spmv_vec *b, const spmv_vec *x, spmv_vec *tmp, bool *yes)
{
    return truly_converged(s, b, x, tmp, yes);
}

/* ------------------------------------------------------------------ CG */

static int cg(solve_state *s, const spmv_vec *b, spmv_vec *x)
{
    spmv_gpu_ctx *c = s->ctx;
    spmv_error *e = s->err;
    spmv_vec *r, *z, *p, *q;
    double rz, rnorm;
    int st;
    TRY(work(s, b, &r));
    TRY(work(s, b, &p));
    TRY(work(s, b, &q));
    z = r;
    if (preconditioned(s))
        TRY(work(s, b, &z));
    TRY(residual(s, b, x, r));
    TRY(krylov_nrm2(s, r, &rnorm));
    if (record(s, 0, rnorm / s->bnorm) || converged(s, rnorm))
        return SPMV_OK;
    TRY(precond(s, r, z));
    TRY(spmv_vec_copy(c, z, p, e));
    TRY(krylov_dot(s, r, z, &rz));
    for (int32_t it = 0; it < s->o->maxit; it++) {
        double pq;
        TRY(apply(s, p, q));
        TRY(krylov_dot(s, p, q, &pq));
        if (!(pq > 0.0) || !isfinite(pq)) {
            breakdown(s, "p·Ap (the matrix is not positive definite)", pq, it);
            return SPMV_OK;
        }
        double alpha = rz / pq;
        TRY(spmv_vec_axpy(c, alpha, p, x, e));
        TRY(spmv_vec_axpy(c, -alpha, q, r, e));
        TRY(krylov_nrm2(s, r, &rnorm));
        if (record(s, it + 1, rnorm / s->bnorm))
            return SPMV_OK;
        bool restart = false;
        if (converged(s, rnorm)) {
            bool yes;
            TRY(truly_converged(s, b, x, q, &yes));
            if (yes)
                return SPMV_OK;
            TRY(spmv_vec_copy(c, q, r, e)); /* residual replacement, then a fresh direction */
            restart = true;
        }
        double rz_new;
        if (preconditioned(s)) {
            TRY(precond(s, r, z));
            TRY(krylov_dot(s, r, z, &rz_new));
        } else
            rz_new = rnorm * rnorm;
        if (rz == 0.0 || !isfinite(rz_new)) {
            breakdown(s, "r·z", rz_new, it);
            return SPMV_OK;
        }
        TRY(spmv_vec_axpby(c, 1.0, z, restart ? 0.0 : rz_new / rz, p, e)); /* p = z + beta p */
        rz = rz_new;
    }
    return SPMV_OK;
}

/* ------------------------------------------------------------ BiCGSTAB */

typedef struct bicg {
    spmv_vec *r, *r0, *p, *v, *t, *ph, *sh;
    double rho, alpha, omega;
} bicg;

/* A fresh start from the true residual in t (or r itself when t is r):
 * r = r0 = t, no directions. */
static int bicg_restart(solve_state *s, bicg *q, const spmv_vec *from)
{
    int st;
    if (from != q->r)
        TRY(spmv_vec_copy(s->ctx, from, q->r, s->err));
    TRY(spmv_vec_copy(s->ctx, q->r, q->r0, s->err));
    TRY(spmv_vec_fill(s->ctx, q->p, 0.0, s->err));
    TRY(spmv_vec_fill(s->ctx, q->v, 0.0, s->err));
    q->rho = q->alpha = q->omega = 1.0;
    return SPMV_OK;
}

/* rnorm met tol: checked against the true residual (into t). *stop: the
 * solve is done; else q restarts from it. */
static int bicg_check(solve_state *s, bicg *q, const spmv_vec *b, spmv_vec *x, bool *stop)
{
    int st;
    TRY(truly_converged(s, b, x, q->t, stop));
    return *stop ? SPMV_OK : bicg_restart(s, q, q->t);
}

/* The first half-step: p, v = A M⁻¹p, alpha; r becomes s. *stop on a
 * breakdown. */
static int bicg_half(solve_state *s, bicg *q, spmv_vec *x, double rho_new, int32_t it, bool *stop)
{
    spmv_gpu_ctx *c = s->ctx;
    spmv_error *e = s->err;
    double r0v;
    int st;
    double beta = (rho_new / q->rho) * (q->alpha / q->omega);
    TRY(spmv_vec_axpy(c, -q->omega, q->v, q->p, e)); /* p = r + beta (p - omega v) */
    TRY(spmv_vec_axpby(c, 1.0, q->r, beta, q->p, e));
    if (preconditioned(s))
        TRY(precond(s, q->p, q->ph));
    TRY(apply(s, q->ph, q->v));
    TRY(krylov_dot(s, q->r0, q->v, &r0v));
    if ((*stop = r0v == 0.0 || !isfinite(r0v))) {
        breakdown(s, "r0·v", r0v, it);
        return SPMV_OK;
    }
    q->alpha = rho_new / r0v;
    TRY(spmv_vec_axpy(c, -q->alpha, q->v, q->r, e)); /* r is now s */
    return spmv_vec_axpy(c, q->alpha, q->ph, x, e);
}

/* The second half-step: t = A M⁻¹s, omega, x and r. *stop on a breakdown. */
static int bicg_stab(solve_state *s, bicg *q, spmv_vec *x, int32_t it, bool *stop)
{
    spmv_gpu_ctx *c = s->ctx;
    spmv_error *e = s->err;
    double ts, tt;
    int st;
    if (preconditioned(s))
        TRY(precond(s, q->r, q->sh));
    TRY(apply(s, q->sh, q->t));
    TRY(krylov_dot(s, q->t, q->r, &ts));
    TRY(krylov_dot(s, q->t, q->t, &tt));
    if ((*stop = tt == 0.0 || !isfinite(tt))) {
        breakdown(s, "t·t", tt, it);
        return SPMV_OK;
    }
    q->omega = ts / tt;
    TRY(spmv_vec_axpy(c, q->omega, q->sh, x, e));
    return spmv_vec_axpy(c, -q->omega, q->t, q->r, e);
}

static int bicg_setup(solve_state *s, bicg *q, const spmv_vec *b)
{
    int st;
    TRY(work(s, b, &q->r));
    TRY(work(s, b, &q->r0));
    TRY(work(s, b, &q->p));
    TRY(work(s, b, &q->v));
    TRY(work(s, b, &q->t));
    q->ph = q->p;
    q->sh = q->r;
    if (preconditioned(s)) {
        TRY(work(s, b, &q->ph));
        TRY(work(s, b, &q->sh));
    }
    return SPMV_OK;
}

static int bicgstab(solve_state *s, const spmv_vec *b, spmv_vec *x)
{
    bicg q;
    double rnorm;
    bool stop = false;
    int st;
    TRY(bicg_setup(s, &q, b));
    TRY(residual(s, b, x, q.r));
    TRY(krylov_nrm2(s, q.r, &rnorm));
    if (record(s, 0, rnorm / s->bnorm) || converged(s, rnorm))
        return SPMV_OK;
    TRY(bicg_restart(s, &q, q.r));
    for (int32_t it = 0; it < s->o->maxit; it++) {
        double rho_new;
        TRY(krylov_dot(s, q.r0, q.r, &rho_new));
        if (rho_new == 0.0 || !isfinite(rho_new)) {
            breakdown(s, "rho = r0·r", rho_new, it);
            return SPMV_OK;
        }
        TRY(bicg_half(s, &q, x, rho_new, it, &stop));
        if (stop)
            return SPMV_OK;
        TRY(krylov_nrm2(s, q.r, &rnorm));
        if (converged(s, rnorm)) {
            TRY(bicg_check(s, &q, b, x, &stop));
            if (stop)
                record(s, it + 1, rnorm / s->bnorm);
            if (stop)
                return SPMV_OK;
            continue;
        }
        TRY(bicg_stab(s, &q, x, it, &stop));
        if (stop)
            return SPMV_OK;
        TRY(krylov_nrm2(s, q.r, &rnorm));
        if (record(s, it + 1, rnorm / s->bnorm))
            return SPMV_OK;
        if (converged(s, rnorm)) {
            TRY(bicg_check(s, &q, b, x, &stop));
            if (stop)
                return SPMV_OK;
            continue;
        }
        if (q.omega == 0.0) {
            breakdown(s, "omega", q.omega, it);
            return SPMV_OK;
        }
        q.rho = rho_new;
    }
    return SPMV_OK;
}

/* --------------------------------------------------------------- GMRES */

/* Restarted GMRES(m), right-preconditioned, modified Gram-Schmidt, Givens
 * rotations on the host. The basis is m+1 vectors of the solve's device. */
typedef struct gmres_state {
    int32_t m;
    spmv_vec *r, *zt, *V;
    int32_t nv;                /* basis vectors allocated */
    double *h, *cs, *sn, *g, *y;
} gmres_state;

#define H(i, j) q->h[(size_t)(j) * (q->m + 1) + (i)]

static int gmres_setup(solve_state *s, gmres_state *q, const spmv_vec *b)
{
    int32_t m = q->m;
    int st;
    TRY(work(s, b, &q->r));
    TRY(work(s, b, &q->zt));
    q->V = calloc((size_t)m + 1, sizeof *q->V);
    q->h = calloc((size_t)(m + 1) * m, sizeof *q->h);
    q->cs = calloc((size_t)m, sizeof *q->cs);
    q->sn = calloc((size_t)m, sizeof *q->sn);
    q->g = calloc((size_t)m + 1, sizeof *q->g);
    q->y = calloc((size_t)m, sizeof *q->y);
    if (!q->V || !q->h || !q->cs || !q->sn || !q->g || !q->y)
        return spmv_error_set(s->err, SPMV_ERR_NOMEM, 0, "out of memory for GMRES(%d)", m);
    for (; q->nv <= m; q->nv++)
        TRY(spmv_vec_alloc(s->ctx, b->device, b->dtype, b->n, 1, &q->V[q->nv], s->err));
    return SPMV_OK;
}

static void gmres_free(solve_state *s, gmres_state *q)
{
    for (int32_t i = 0; i < q->nv; i++)
        spmv_vec_free(s->ctx, &q->V[i]);
    free(q->V);
    free(q->h);
    free(q->cs);
    free(q->sn);
    free(q->g);
    free(q->y);
}

/* Column j of the Arnoldi process: V[j+1] = A M⁻¹ V[j] orthogonalised
 * against V[0..j] (H's column), *hn its norm before scaling. */
static int arnoldi(solve_state *s, gmres_state *q, int32_t j, double *hn)
{
    spmv_gpu_ctx *c = s->ctx;
    int st;
    const spmv_vec *in = &q->V[j];
    if (preconditioned(s)) {
        TRY(precond(s, &q->V[j], q->zt));
        in = q->zt;
    }
    TRY(apply(s, in, &q->V[j + 1]));
    for (int32_t i = 0; i <= j; i++) {
        TRY(krylov_dot(s, &q->V[i], &q->V[j + 1], &H(i, j)));
        TRY(spmv_vec_axpy(c, -H(i, j), &q->V[i], &q->V[j + 1], s->err));
    }
    TRY(krylov_nrm2(s, &q->V[j + 1], hn));
    H(j + 1, j) = *hn;
    return SPMV_OK;
}

/* The earlier rotations on H's column j, then its own, which zeroes
 * H(j+1, j) and updates g. false on a zero or non-finite column. */
static bool givens(gmres_state *q, int32_t j, double *den)
{
    for (int32_t i = 0; i < j; i++) {
        double t = q->cs[i] * H(i, j) + q->sn[i] * H(i + 1, j);
        H(i + 1, j) = -q->sn[i] * H(i, j) + q->cs[i] * H(i + 1, j);
        H(i, j) = t;
    }
    *den = hypot(H(j, j), H(j + 1, j));
    if (*den == 0.0 || !isfinite(*den))
        return false;
    q->cs[j] = H(j, j) / *den;
    q->sn[j] = H(j + 1, j) / *den;
    H(j, j) = *den;
    H(j + 1, j) = 0.0;
    q->g[j + 1] = -q->sn[j] * q->g[j];
    q->g[j] = q->cs[j] * q->g[j];
    return true;
}

/* x += M⁻¹ V y, y from the triangular system H y = g of `used` columns. */
static int gmres_update(solve_state *s, gmres_state *q, int32_t used, spmv_vec *x)
{
    spmv_gpu_ctx *c = s->ctx;
    int st;
    for (int32_t i = used - 1; i >= 0; i--) {
        double t = q->g[i];
        for (int32_t k = i + 1; k < used; k++)
            t -= H(i, k) * q->y[k];
        q->y[i] = t / H(i, i);
    }
    TRY(spmv_vec_fill(c, q->zt, 0.0, s->err));
    for (int32_t i = 0; i < used; i++)
        TRY(spmv_vec_axpy(c, q->y[i], &q->V[i], q->zt, s->err));
    if (!preconditioned(s))
        return spmv_vec_axpy(c, 1.0, q->zt, x, s->err);
    TRY(precond(s, q->zt, q->r)); /* r is free until the caller recomputes the residual */
    return spmv_vec_axpy(c, 1.0, q->r, x, s->err);
}

/* One cycle of at most m Arnoldi steps from r (norm rnorm), x updated;
 * *it counts the iterations. */
static int gmres_cycle(solve_state *s, gmres_state *q, double rnorm, int32_t *it, spmv_vec *x)
{
    int st;
    int32_t used = 0;
    TRY(spmv_vec_copy(s->ctx, q->r, &q->V[0], s->err));
    TRY(spmv_vec_scal(s->ctx, 1.0 / rnorm, &q->V[0], s->err));
    memset(q->g, 0, (size_t)(q->m + 1) * sizeof *q->g);
    q->g[0] = rnorm;
    for (int32_t j = 0; j < q->m && *it < s->o->maxit; j++) {
        double hn, den;
        TRY(arnoldi(s, q, j, &hn));
        if (!givens(q, j, &den)) {
            breakdown(s, "the Hessenberg column norm", den, *it);
            break;
        }
        used = j + 1;
        double est = fabs(q->g[j + 1]);
        if (record(s, ++*it, est / s->bnorm))
            break;
        if (converged(s, est) || hn == 0.0) /* hn == 0: lucky breakdown, the solution is exact */
            break;
        TRY(spmv_vec_scal(s->ctx, 1.0 / hn, &q->V[j + 1], s->err));
    }
    return gmres_update(s, q, used, x);
}

static int gmres(solve_state *s, const spmv_vec *b, spmv_vec *x)
{
    gmres_state q = {.m = s->o->restart > 0 ? s->o->restart : SPMV_GMRES_RESTART_DEFAULT};
    if (q.m > s->o->maxit)
        q.m = s->o->maxit;
    double rnorm;
    int32_t it = 0;
    int st = gmres_setup(s, &q, b);
    if (!st && !(st = residual(s, b, x, q.r)) && !(st = krylov_nrm2(s, q.r, &rnorm)) &&
        !record(s, 0, rnorm / s->bnorm) && !converged(s, rnorm)) {
        while (it < s->o->maxit) {
            if ((st = gmres_cycle(s, &q, rnorm, &it, x)))
                break;
            if (s->res->stop == SPMV_STOP_CANCELLED || s->res->stop == SPMV_STOP_BREAKDOWN)
                break;
            /* the true residual decides, whatever the estimate said; else restart from it */
            s->res->stop = SPMV_STOP_MAXIT;
            if ((st = residual(s, b, x, q.r)) || (st = krylov_nrm2(s, q.r, &rnorm)) ||
                converged(s, rnorm))
                break;
        }
    }
    gmres_free(s, &q);
    return st;
}

#undef H

/* ---------------------------------------------------------------- solve */

double spmv_solve_min_tol(spmv_dtype dtype)
{
    return 10.0 * (dtype == SPMV_FLOAT32 ? (double)FLT_EPSILON : DBL_EPSILON);
}

/* Whether the method's squares of residual norms stay normal float64
 * numbers from ||b|| down to tol ||b||: a b of 1e-320 (subnormal) makes
 * every r·r zero, which CG would read as "not positive definite". */
static int check_scale(double bnorm, double tol, spmv_error *err)
{
    if (tol * bnorm < sqrt(DBL_MIN))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "b is too small to solve: ||b|| = %.3g, and at tol %g the "
                              "squared residual norms the method forms (down to (tol ||b||)^2, tol ||b|| = %.3g < "
                              "%.3g) underflow float64's smallest normal number %.3g; scale b (and x0) up", bnorm, tol,
                              tol * bnorm, sqrt(DBL_MIN), DBL_MIN);
    if (bnorm > sqrt(DBL_MAX) / 4)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "b is too large to solve: ||b|| = %.3g, and its square "
                              "overflows float64; scale b (and x0) down", bnorm);
    return SPMV_OK;
}

static int check_args(const spmv_linop *a, const spmv_vec *b, const spmv_vec *x, const spmv_solve_options *o,
                      spmv_error *err)
{
    if (!a || !a->apply || !b || !x || !o)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "solve: missing operator, b, x or options");
    if (a->rows != a->cols)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "solve needs a square matrix, not %lld x %lld",
                              (long long)a->rows, (long long)a->cols);
    if (b->n != a->rows || x->n != a->rows || b->k != 1 || x->k != 1)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "solve: b and x need %lld values in one column (b %lld x %d, x %lld x %d)",
                              (long long)a->rows, (long long)b->n, b->k, (long long)x->n, x->k);
    if (b->device != x->device || b->dtype != x->dtype)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "solve: b and x must share device and dtype");
    if (!isfinite(o->tol) || o->tol <= 0.0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "tol must be finite and > 0, not %g", o->tol);
    if (o->tol < spmv_solve_min_tol(b->dtype))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "tol %g is below what %s can reach: at least %.2g (10 eps)",
                              o->tol, spmv_dtype_name(b->dtype), spmv_solve_min_tol(b->dtype));
    if (o->maxit < 1)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "maxit must be at least 1, not %d", o->maxit);
    if (o->restart < 0 || o->restart > SPMV_GMRES_RESTART_MAX)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "restart must be 1..%d, not %d", SPMV_GMRES_RESTART_MAX,
                              o->restart);
    if (o->check_every < 0 || o->check_every > SPMV_CHECK_EVERY_MAX)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "check_every must be 1..%d (0: %d), not %d",
                              SPMV_CHECK_EVERY_MAX, SPMV_CHECK_EVERY_DEFAULT, o->check_every);
    if ((unsigned)o->method > SPMV_SOLVE_MINRES)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "unknown solver method %d", (int)o->method);
    return SPMV_OK;
}

int krylov_begin(solve_state *s, const spmv_vec *b, spmv_vec *x, bool *zero_b)
{
    spmv_solve_result *res = s->res;
    int st;
    *zero_b = false;
    res->stop = SPMV_STOP_MAXIT;
    if ((st = krylov_nrm2(s, b, &s->bnorm)))
        return st;
    if (s->bnorm == 0.0) { /* A x = 0: x = 0 is the answer */
        *zero_b = true;
        if ((st = spmv_vec_fill(s->ctx, x, 0.0, s->err)) == SPMV_OK) {
            res->stop = SPMV_STOP_CONVERGED;
            snprintf(res->detail, sizeof res->detail, "b is zero: x = 0");
            record(s, 0, 0.0);
        }
        return st;
    }
    if (!isfinite(s->bnorm))
        return spmv_error_set(s->err, SPMV_ERR_INVALID, 0, "b holds a non-finite value (||b|| = %g)", s->bnorm);
    return check_scale(s->bnorm, s->o->tol, s->err);
}

void krylov_conclude(solve_state *s, double rnorm)
{
    spmv_solve_result *res = s->res;
    const spmv_solve_options *o = s->o;
    res->relres = rnorm / s->bnorm;
    if (res->stop != SPMV_STOP_CANCELLED && rnorm <= o->tol * s->bnorm) {
        /* maxit's last step or a breakdown right at the answer still converged */
        if (res->stop == SPMV_STOP_BREAKDOWN)
            res->detail[0] = '\0';
        res->stop = SPMV_STOP_CONVERGED;
    }
    if (res->stop == SPMV_STOP_CONVERGED && !res->detail[0])
        snprintf(res->detail, sizeof res->detail, "||b - Ax|| / ||b|| = %.3g <= tol %.3g after %d iterations",
                 res->relres, o->tol, res->iterations);
    else if (res->stop == SPMV_STOP_MAXIT)
        snprintf(res->detail, sizeof res->detail, "maxit %d reached with ||b - Ax|| / ||b|| = %.3g > tol %.3g",
                 o->maxit, res->relres, o->tol);
}

int krylov_check(const spmv_linop *a, const spmv_vec *b, const spmv_vec *x, const spmv_solve_options *o,
                 spmv_error *err)
{
    return check_args(a, b, x, o, err);
}

int spmv_solve(spmv_gpu_ctx *ctx, const spmv_linop *a, const spmv_vec *b, spmv_vec *x,
               const spmv_solve_options *o, spmv_solve_result *res, spmv_error *err)
{
    memset(res, 0, sizeof *res);
    int st = check_args(a, b, x, o, err);
    if (st)
        return st;
    double t0 = spmv_now_ms();
    solve_state s = {.ctx = ctx, .a = a, .o = o, .res = res, .err = err};
    bool zero_b;
    if ((st = krylov_begin(&s, b, x, &zero_b)) || zero_b)
        goto done;
    res->setup_ms = spmv_now_ms() - t0;
    if (krylov_fused_eligible(&s, b)) /* scalars on the device (krylov_fused.c) */
        st = krylov_fused(&s, b, x);
    else switch (o->method) {
    case SPMV_SOLVE_CG: st = cg(&s, b, x); break;
    case SPMV_SOLVE_BICGSTAB: st = bicgstab(&s, b, x); break;
    case SPMV_SOLVE_GMRES: st = gmres(&s, b, x); break;
    case SPMV_SOLVE_MINRES: st = krylov_minres(&s, b, x); break;
    }
    if (st)
        goto done;
    /* the answer's own residual, recomputed: never the recurrence's word */
    spmv_vec *r = NULL;
    double rnorm = NAN;
    if ((st = work(&s, b, &r)) || (st = residual(&s, b, x, r)) || (st = krylov_nrm2(&s, r, &rnorm)))
        goto done;
    krylov_conclude(&s, rnorm);
done:
    for (int i = 0; i < s.nw; i++)
        spmv_vec_free(ctx, &s.w[i]);
    res->total_ms = spmv_now_ms() - t0;
    res->vector_ms = res->total_ms - res->spmv_ms - res->setup_ms;
    if (res->vector_ms < 0)
        res->vector_ms = 0;
    if (st)
        spmv_solve_result_free(res);
    return st;
}
