/* amg.c — smoothed aggregation AMG: the setup and the host V-cycle
 * (amg.h says what the algorithm is).
 *
 * The setup's products (A T, A P, R (A P)) are the engine's own SpMSpM
 * (cpu.spmspm.omp, sorted CSR out) in spmv_amg_host_products, or whatever
 * hook the caller passes to spmv_amg_setup_with (the GPU's, from
 * engine/precond.c, so this file stays free of CUDA); strength, aggregation and the
 * tentative prolongator are linear passes over a level's rows. The
 * aggregation is PyAMG's "standard" one, serial (three passes: a root and
 * its whole unaggregated neighbourhood; leftovers join a neighbouring
 * aggregate; what remains forms new aggregates), so a hierarchy is the
 * same whatever the number of threads; or, asked for, mis2 (amg.h), the
 * parallel one a GPU's setup runs, its reference here. An isolated node (no strong
 * neighbour: a Dirichlet row) is in no aggregate: the smoother alone
 * handles it, as in PyAMG.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "amg.h"
#include "formats.h"

#define MAX_K 16
#define RHO_ITERS SPMV_AMG_RHO_ITERS

void spmv_amg_defaults(spmv_amg_options *o)
{
    memset(o, 0, sizeof *o);
    o->max_levels = 10;
    o->max_coarse = 500;
    o->strength = 0.0;
    o->smoother = SPMV_AMG_CHEBYSHEV;
    o->presmooth = o->postsmooth = 1;
    o->degree = 2;
    o->block_size = 1;
}

int spmv_amg_check_options(const spmv_amg_options *o, int32_t rows, spmv_error *err)
{
    const char *bad = o->max_levels < 1 || o->max_levels > 32           ? "max_levels must be 1..32"
                      : o->max_coarse < 1 || o->max_coarse > 10000     ? "max_coarse must be 1..10000"
                      : !(o->strength >= 0.0 && o->strength < 1.0)     ? "strength must be in [0, 1)"
                      : o->presmooth < 0 || o->presmooth > 10          ? "presmooth must be 0..10"
                      : o->postsmooth < 0 || o->postsmooth > 10        ? "postsmooth must be 0..10"
                      : o->degree < 1 || o->degree > 10                ? "degree must be 1..10"
                      : o->block_size < 1 || o->block_size > 8         ? "block_size must be 1..8"
                      : rows % o->block_size                           ? "the rows are not a multiple of block_size"
                      : o->near_nullspace && (o->nullspace_k < 1 || o->nullspace_k > MAX_K)
                          ? "near_nullspace must have 1..16 columns"
                          : NULL;
    if (bad)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg: %s", bad);
    if ((unsigned)o->smoother > SPMV_AMG_JACOBI)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg: unknown smoother %d", (int)o->smoother);
    if ((unsigned)o->aggregation > SPMV_AMG_AGG_MIS2)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg: unknown aggregation %d", (int)o->aggregation);
    return SPMV_OK;
}

const char *spmv_amg_aggregation_name(spmv_amg_aggregation a)
{
    return a == SPMV_AMG_AGG_MIS2 ? "mis2" : a == SPMV_AMG_AGG_STANDARD ? "standard" : "auto";
}

const char *spmv_amg_phase_name(spmv_amg_phase p)
{
    static const char *const names[SPMV_AMG_PHASES] = {
        [SPMV_AMG_STRENGTH] = "strength",  [SPMV_AMG_AGGREGATE] = "aggregation", [SPMV_AMG_TENTATIVE] = "tentative",
        [SPMV_AMG_AT] = "A*T",             [SPMV_AMG_SMOOTH] = "smoothing",      [SPMV_AMG_TRANSPOSE] = "R=P^T",
        [SPMV_AMG_AP] = "A*P",             [SPMV_AMG_RAP] = "R*(A*P)",           [SPMV_AMG_COPY] = "device copies",
        [SPMV_AMG_LEVEL] = "diag+rho",     [SPMV_AMG_COARSE] = "coarse inverse",
    };
    return (unsigned)p < SPMV_AMG_PHASES ? names[p] : "?";
}

/* ------------------------------------------------------------ CSR */

static int csr_alloc(spmv_csr *m, int32_t rows, int32_t cols, int64_t nnz, spmv_error *err)
{
    int st = SPMV_OK;
    memset(m, 0, sizeof *m);
    m->rows = rows;
    m->cols = cols;
    m->nnz = nnz;
    m->dtype = SPMV_FLOAT64;
    m->row_ptr = spmv_array_alloc((int64_t)rows + 1, sizeof(int32_t), &st);
    m->col = spmv_array_alloc(nnz, sizeof(int32_t), &st);
    m->val = spmv_array_alloc(nnz, sizeof(double), &st);
    if (!m->row_ptr || !m->col || !m->val) {
        spmv_csr_free(m);
        return spmv_error_set(err, st ? st : SPMV_ERR_NOMEM, 0, "amg: out of memory for a %d x %d matrix of %lld "
                              "entries", rows, cols, (long long)nnz);
    }
    return SPMV_OK;
}

/* A float64 copy of a (32-bit offsets). */
static int csr_to_f64(const spmv_csr *a, spmv_csr *out, spmv_error *err)
{
    int st = csr_alloc(out, a->rows, a->cols, a->nnz, err);
    if (st)
        return st;
    memcpy(out->row_ptr, a->row_ptr, ((size_t)a->rows + 1) * sizeof(int32_t));
    memcpy(out->col, a->col, (size_t)a->nnz * sizeof(int32_t));
    double *v = out->val;
    for (int64_t i = 0; i < a->nnz; i++)
        v[i] = spmv_val_get(a->val, a->dtype, i);
    return SPMV_OK;
}

/* out = a^T (columns sorted: rows are visited in order). */
static int csr_transpose(const spmv_csr *a, spmv_csr *out, spmv_error *err)
{
    int st = csr_alloc(out, a->cols, a->rows, a->nnz, err);
    if (st)
        return st;
    int32_t *rp = out->row_ptr;
    memset(rp, 0, ((size_t)a->cols + 1) * sizeof(int32_t));
    for (int64_t p = 0; p < a->nnz; p++)
        rp[a->col[p] + 1]++;
    for (int32_t j = 0; j < a->cols; j++)
        rp[j + 1] += rp[j];
    int32_t *next = malloc(((size_t)a->cols + 1) * sizeof(int32_t));
    if (!next) {
        spmv_csr_free(out);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory for a transpose");
    }
    memcpy(next, rp, ((size_t)a->cols + 1) * sizeof(int32_t));
    const double *av = a->val;
    double *ov = out->val;
    for (int32_t i = 0; i < a->rows; i++)
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++) {
            int32_t q = next[a->col[p]]++;
            out->col[q] = i;
            ov[q] = av[p];
        }
    free(next);
    return SPMV_OK;
}

/* c = a * b with the engine's parallel SpMSpM. */
static int csr_mult(const spmv_csr *a, const spmv_csr *b, spmv_csr *c, spmv_error *err)
{
    return spmv_cpu_spmspm(spmv_kernel_find("cpu.spmspm.omp"), a, b, NULL, 0, 1, c, NULL, err);
}

/* y = A x over the rows, in parallel. */
static void csr_apply(const spmv_csr *a, const double *x, double *y)
{
    const double *v = a->val;
#pragma omp parallel for schedule(static) if (a->nnz > 50000)
    for (int32_t i = 0; i < a->rows; i++) {
        double s = 0;
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)
            s += v[p] * x[a->col[p]];
        y[i] = s;
    }
}

/* ------------------------------------------------------- the diagonal */

static int diag_inv(const spmv_csr *a, double **out, spmv_error *err)
{
    double *d = malloc(((size_t)a->rows + 1) * sizeof *d);
    if (!d)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the diagonal");
    const double *v = a->val;
    for (int32_t i = 0; i < a->rows; i++) {
        double di = 0;
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)
            if (a->col[p] == i)
                di += v[p];
        if (di == 0.0 || !isfinite(di)) {
            free(d);
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "row %d has a %s diagonal (%g): smoothing in "
                                  "D^-1 A needs a non-zero diagonal", i, di == 0.0 ? "zero" : "non-finite", di);
        }
        d[i] = 1.0 / di;
    }
    *out = d;
    return SPMV_OK;
}

/* The largest eigenvalue of the symmetric tridiagonal (alpha, beta) of
 * order k, by bisection on its Sturm sequence. */
static double tridiag_max(const double *alpha, const double *beta, int k)
{
    double lo = alpha[0], hi = alpha[0];
    for (int i = 0; i < k; i++) {
        double r = (i ? fabs(beta[i - 1]) : 0) + (i + 1 < k ? fabs(beta[i]) : 0);
        lo = fmin(lo, alpha[i] - r);
        hi = fmax(hi, alpha[i] + r);
    }
    for (int it = 0; it < 100 && hi - lo > 1e-12 * fmax(fabs(hi), 1.0); it++) {
        double mid = 0.5 * (lo + hi), q = 1.0;
        int below = 0; /* eigenvalues below mid */
        for (int i = 0; i < k; i++) {
            q = alpha[i] - mid - (i ? beta[i - 1] * beta[i - 1] / q : 0.0);
            if (q == 0.0)
                q = -1e-300;
            below += q < 0;
        }
        if (below == k)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* Power iteration on D^-1 A, for a diagonal that is not positive. */
static double power_radius(const spmv_csr *a, const double *dinv, double *u, double *w)
{
    int32_t n = a->rows;
    for (int32_t i = 0; i < n; i++)
        u[i] = spmv_amg_start_value(i);
    double lambda = 0;
    for (int it = 0; it < 4 * RHO_ITERS; it++) {
        csr_apply(a, u, w);
        double nw = 0, nu = 0;
        for (int32_t i = 0; i < n; i++) {
            w[i] *= dinv[i];
            nw += w[i] * w[i];
            nu += u[i] * u[i];
        }
        if (nw == 0.0)
            return 1.0;
        lambda = sqrt(nw / nu);
        double s = 1.0 / sqrt(nw);
        for (int32_t i = 0; i < n; i++)
            u[i] = w[i] * s;
    }
    return lambda * 1.05;
}

/* x·y summed in fixed chunks of DOT_CHUNK values, the chunks in parallel
 * and their sums in order: the same bits whatever the number of threads,
 * so a hierarchy is the same on every run. */
#define DOT_CHUNK 32768

static double chunk_dot(int64_t lo, int64_t hi, const double *x, const double *y)
{
    double s = 0;
    for (int64_t i = lo; i < hi; i++)
        s += x[i] * y[i];
    return s;
}

static double det_dot(int32_t n, const double *x, const double *y)
{
    int64_t nc = ((int64_t)n + DOT_CHUNK - 1) / DOT_CHUNK;
    double *part = nc > 1 ? malloc((size_t)nc * sizeof *part) : NULL, s = 0;
    if (!part) { /* one chunk, or no memory: the chunks one after the other, the same sums */
        for (int64_t c = 0; c < nc; c++)
            s += chunk_dot(c * DOT_CHUNK, c + 1 < nc ? (c + 1) * DOT_CHUNK : n, x, y);
        return s;
    }
#pragma omp parallel for schedule(static) if (nc > 4)
    for (int64_t c = 0; c < nc; c++)
        part[c] = chunk_dot(c * DOT_CHUNK, c + 1 < nc ? (c + 1) * DOT_CHUNK : n, x, y);
    for (int64_t c = 0; c < nc; c++)
        s += part[c];
    free(part);
    return s;
}

/* One Lanczos step on S = D^-1/2 A D^-1/2: t = S v - beta_prev p,
 * made orthogonal to v; alpha (t·v before) and ||t||. sd: sqrt(dinv). */
static void lanczos_step(const spmv_csr *a, const double *sd, const double *v, const double *p, double beta_prev,
                         double *w, double *t, double *alpha, double *beta)
{
    int32_t n = a->rows;
#pragma omp parallel for schedule(static) if (n > 50000)
    for (int32_t i = 0; i < n; i++)
        w[i] = v[i] * sd[i];
    csr_apply(a, w, t);
#pragma omp parallel for schedule(static) if (n > 50000)
    for (int32_t i = 0; i < n; i++)
        t[i] = t[i] * sd[i] - beta_prev * p[i];
    double al = det_dot(n, t, v);
#pragma omp parallel for schedule(static) if (n > 50000)
    for (int32_t i = 0; i < n; i++)
        t[i] -= al * v[i];
    *alpha = al;
    *beta = sqrt(det_dot(n, t, t));
}

/* The spectral radius of D^-1 A: RHO_ITERS steps of Lanczos on the
 * similar D^-1/2 A D^-1/2 (symmetric for a symmetric A with a positive
 * diagonal), whose largest Ritz value comes to the top eigenvalue far
 * faster than power iteration does, from a fixed start (the same
 * hierarchy every time); a little over it, as the Ritz value is below. */
double spmv_amg_spectral_radius(const spmv_csr *a, const double *dinv, double *u, double *w)
{
    int32_t n = a->rows;
    for (int32_t i = 0; i < n; i++)
        if (!(dinv[i] > 0))
            return power_radius(a, dinv, u, w);
    double *buf = malloc((size_t)(n ? n : 1) * 3 * sizeof *buf);
    if (!buf)
        return power_radius(a, dinv, u, w);
    double *sd = buf, *p = buf + n, *t = buf + 2 * (size_t)n, *v = u;
    double alpha[RHO_ITERS], beta[RHO_ITERS], beta_prev = 0;
#pragma omp parallel for schedule(static) if (n > 50000)
    for (int32_t i = 0; i < n; i++) {
        sd[i] = sqrt(dinv[i]);
        p[i] = 0.0;
        v[i] = spmv_amg_start_value(i);
    }
    double nv = sqrt(det_dot(n, v, v));
#pragma omp parallel for schedule(static) if (n > 50000)
    for (int32_t i = 0; i < n; i++)
        v[i] /= nv;
    int k = 0;
    while (k < RHO_ITERS && k < n) {
        lanczos_step(a, sd, v, p, beta_prev, w, t, &alpha[k], &beta[k]);
        if (beta[k++] <= 1e-12 * fabs(alpha[0]))
            break; /* an invariant subspace: T's eigenvalues are exact */
        double *old = p;
        p = v;
        v = t;
        t = old;
        double bk = beta[k - 1];
#pragma omp parallel for schedule(static) if (n > 50000)
        for (int32_t i = 0; i < n; i++)
            v[i] /= bk;
        beta_prev = bk;
    }
    free(buf);
    return spmv_amg_ritz_max(alpha, beta, k);
}

double spmv_amg_ritz_max(const double *alpha, const double *beta, int k)
{
    return k ? tridiag_max(alpha, beta, k) * 1.05 : 1.0;
}

/* ------------------------------------------------------------ strength */

/* The strong graph between nodes (a node is block_size rows): S has an
 * edge I-J (J != I) where the block's Frobenius norm is at least theta
 * times the geometric mean of the diagonal blocks' norms. Pattern only
 * (S->val unused). */
typedef struct graph {
    int32_t n;
    int32_t *ptr, *adj;
} graph;

static void graph_free(graph *g)
{
    free(g->ptr);
    free(g->adj);
    memset(g, 0, sizeof *g);
}

/* Node I's block norms squared, by column node, merged from its rows into
 * (cols, norms) sorted by column node; returns how many. */
static int32_t node_row(const spmv_csr *a, int32_t b, int32_t I, int32_t *cols, double *norms)
{
    int32_t m = 0;
    const double *v = a->val;
    if (b == 1) { /* a scalar row with its columns strictly increasing (the usual CSR): as it is */
        for (int32_t p = a->row_ptr[I]; p < a->row_ptr[I + 1]; p++) {
            if (m > 0 && cols[m - 1] >= a->col[p]) {
                m = 0; /* out of order or repeated: the merge below */
                break;
            }
            cols[m] = a->col[p];
            norms[m++] = v[p] * v[p];
        }
        if (m == a->row_ptr[I + 1] - a->row_ptr[I])
            return m;
    }
    for (int32_t r = I * b; r < I * b + b; r++)
        for (int32_t p = a->row_ptr[r]; p < a->row_ptr[r + 1]; p++) {
            int32_t J = a->col[p] / b, q = m;
            while (q > 0 && cols[q - 1] > J) /* insertion: rows are sorted, so this stays short */
                q--;
            if (q > 0 && cols[q - 1] == J) {
                norms[q - 1] += v[p] * v[p];
                continue;
            }
            memmove(cols + q + 1, cols + q, (size_t)(m - q) * sizeof *cols);
            memmove(norms + q + 1, norms + q, (size_t)(m - q) * sizeof *norms);
            cols[q] = J;
            norms[q] = v[p] * v[p];
            m++;
        }
    return m;
}

/* Whether node I's entry (J, nrm) is a strong edge. */
static bool strong(int32_t I, int32_t J, double nrm, const double *dn, double t2)
{
    return J != I && nrm > 0.0 && nrm >= t2 * sqrt(dn[I] * dn[J]);
}

/* In parallel over the nodes, each thread with its own scratch: the
 * diagonal blocks' norms, then each node's count of strong edges, then
 * (after a prefix sum) the edges themselves, in the serial pass's order. */
static int strength(const spmv_csr *a, int32_t b, double theta, graph *g, spmv_error *err)
{
    int32_t n = a->rows / b;
    int32_t width = 0;
#pragma omp parallel for schedule(static) reduction(max : width) if (n > 20000)
    for (int32_t I = 0; I < n; I++) {
        int32_t w = a->row_ptr[I * b + b] - a->row_ptr[I * b];
        width = w > width ? w : width;
    }
    int nt = omp_get_max_threads();
    size_t slot = (size_t)width + 1;
    double *dn = malloc(((size_t)n + 1) * sizeof *dn), *norms = malloc(slot * nt * sizeof *norms);
    int32_t *cols = malloc(slot * nt * sizeof *cols);
    g->n = n;
    g->ptr = calloc((size_t)n + 1, sizeof *g->ptr);
    g->adj = NULL;
    int st = SPMV_OK;
    double t2 = theta * theta;
    if (!dn || !norms || !cols || !g->ptr) {
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory for the strength graph");
        goto out;
    }
#pragma omp parallel num_threads(nt) if (n > 20000)
    {
        int32_t *mc = cols + slot * omp_get_thread_num();
        double *mn = norms + slot * omp_get_thread_num();
#pragma omp for schedule(static)
        for (int32_t I = 0; I < n; I++) { /* the diagonal blocks' norms */
            int32_t m = node_row(a, b, I, mc, mn);
            dn[I] = 0;
            for (int32_t q = 0; q < m; q++)
                if (mc[q] == I)
                    dn[I] = mn[q];
        }
#pragma omp for schedule(static)
        for (int32_t I = 0; I < n; I++) { /* the strong edges' count */
            int32_t m = node_row(a, b, I, mc, mn), c = 0;
            for (int32_t q = 0; q < m; q++)
                c += strong(I, mc[q], mn[q], dn, t2);
            g->ptr[I + 1] = c;
        }
#pragma omp single
        { /* the offsets, and room for the edges (the barrier after it: every thread sees g->adj) */
            for (int32_t I = 0; I < n; I++)
                g->ptr[I + 1] += g->ptr[I];
            g->adj = malloc(((size_t)g->ptr[n] + 1) * sizeof *g->adj);
        }
        if (g->adj) {
#pragma omp for schedule(static)
            for (int32_t I = 0; I < n; I++) { /* the edges */
                int32_t m = node_row(a, b, I, mc, mn), e = g->ptr[I];
                for (int32_t q = 0; q < m; q++)
                    if (strong(I, mc[q], mn[q], dn, t2))
                        g->adj[e++] = mc[q];
            }
        }
    }
    if (!g->adj)
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory for the strength graph");
out:
    free(dn);
    free(norms);
    free(cols);
    if (st)
        graph_free(g);
    return st;
}

/* --------------------------------------------------------- aggregation */

/* PyAMG's standard aggregation: agg[I] is node I's aggregate, or -1 for an
 * isolated node. Returns the number of aggregates. */
static int32_t aggregate(const graph *g, int32_t *agg)
{
    int32_t n = g->n, next = 1;
    const int32_t isolated = INT32_MIN;
    memset(agg, 0, (size_t)n * sizeof *agg); /* 0: not yet; > 0: pass-1 aggregate + 1; < 0: joined in pass 2 */
    for (int32_t i = 0; i < n; i++) { /* pass 1: a root and its whole unaggregated neighbourhood */
        if (agg[i])
            continue;
        bool neighbours = false, taken = false;
        for (int32_t p = g->ptr[i]; p < g->ptr[i + 1] && !taken; p++) {
            neighbours = true;
            taken = agg[g->adj[p]] != 0;
        }
        if (!neighbours) {
            agg[i] = isolated;
        } else if (!taken) {
            agg[i] = next;
            for (int32_t p = g->ptr[i]; p < g->ptr[i + 1]; p++)
                agg[g->adj[p]] = next;
            next++;
        }
    }
    for (int32_t i = 0; i < n; i++) /* pass 2: join a neighbouring pass-1 aggregate */
        if (!agg[i])
            for (int32_t p = g->ptr[i]; p < g->ptr[i + 1]; p++)
                if (agg[g->adj[p]] > 0) {
                    agg[i] = -agg[g->adj[p]];
                    break;
                }
    next--;
    for (int32_t i = 0; i < n; i++) { /* pass 3: what remains forms new aggregates */
        int32_t a = agg[i];
        if (a == isolated) {
            agg[i] = -1;
        } else if (a > 0) {
            agg[i] = a - 1;
        } else if (a < 0) {
            agg[i] = -a - 1;
        } else {
            agg[i] = next;
            for (int32_t p = g->ptr[i]; p < g->ptr[i + 1]; p++)
                if (!agg[g->adj[p]])
                    agg[g->adj[p]] = -(next + 1);
            next++;
        }
    }
    return next;
}

/* mis2 (amg.h, spmv_amg_mis2): each round is the device's, step for step
 * (engine/gpu/amg_build.cu), every step reading only the step before. */
enum { MIS_OUT = 0, MIS_UNDECIDED = 1, MIS_ROOT = 2 };

/* out[i] = the largest of in[i] and in[j] over i's neighbours. */
static void mis_spread(int32_t n, const int32_t *ptr, const int32_t *adj, const uint64_t *in, uint64_t *out)
{
#pragma omp parallel for schedule(static) if (n > 50000)
    for (int32_t i = 0; i < n; i++) {
        uint64_t m = in[i];
        for (int32_t p = ptr[i]; p < ptr[i + 1]; p++)
            m = in[adj[p]] > m ? in[adj[p]] : m;
        out[i] = m;
    }
}

/* The rounds: state[i] ends MIS_ROOT or MIS_OUT. */
static int32_t mis_rounds(int32_t n, const int32_t *ptr, const int32_t *adj, uint8_t *state, uint64_t *t, uint64_t *u)
{
    int32_t rounds = 0;
    for (int64_t undecided = 1; undecided; rounds++) {
        for (int32_t i = 0; i < n; i++)
            t[i] = spmv_amg_mis2_key(state[i], i);
        mis_spread(n, ptr, adj, t, u);
        mis_spread(n, ptr, adj, u, t);
        undecided = 0;
        for (int32_t i = 0; i < n; i++) {
            if (state[i] != MIS_UNDECIDED)
                continue;
            if (t[i] == spmv_amg_mis2_key(MIS_UNDECIDED, i))
                state[i] = MIS_ROOT;
            else if (t[i] >> 62 == MIS_ROOT)
                state[i] = MIS_OUT;
            else
                undecided++;
        }
    }
    return rounds;
}

/* The neighbour of i whose agg[] is at least `min` with the largest key,
 * or -1. */
static int32_t mis_best(const int32_t *ptr, const int32_t *adj, const int32_t *agg, int32_t i, int32_t min)
{
    int32_t best = -1;
    for (int32_t p = ptr[i]; p < ptr[i + 1]; p++) {
        int32_t j = adj[p];
        if (agg[j] >= min && (best < 0 || spmv_amg_mis2_key(0, j) > spmv_amg_mis2_key(0, best)))
            best = j;
    }
    return best;
}

int spmv_amg_mis2(int32_t n, const int32_t *ptr, const int32_t *adj, int32_t *agg, int32_t *naggs, int32_t *rounds,
                  spmv_error *err)
{
    uint8_t *state = malloc((size_t)n + 1);
    uint64_t *t = malloc(((size_t)n + 1) * sizeof *t), *u = malloc(((size_t)n + 1) * sizeof *u);
    if (!state || !t || !u) {
        free(state);
        free(t);
        free(u);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory for the aggregation of %d nodes", n);
    }
    for (int32_t i = 0; i < n; i++)
        state[i] = ptr[i + 1] > ptr[i] ? MIS_UNDECIDED : MIS_OUT;
    *rounds = mis_rounds(n, ptr, adj, state, t, u);
    int32_t next = 0;
    for (int32_t i = 0; i < n; i++) /* roots numbered; -2: to join one; -1: isolated */
        agg[i] = state[i] == MIS_ROOT ? next++ : ptr[i + 1] > ptr[i] ? -2 : -1;
    for (int32_t i = 0; i < n; i++) /* next to a root (only roots are >= 0 yet, and stay so) */
        if (agg[i] == -2) {
            int32_t j = mis_best(ptr, adj, agg, i, 0);
            agg[i] = j < 0 ? -2 : -(agg[j] + 3); /* marked, so this pass reads only roots */
        }
    for (int32_t i = 0; i < n; i++)
        if (agg[i] <= -3)
            agg[i] = -agg[i] - 3;
    for (int32_t i = 0; i < n; i++) /* next to those: marked the same way */
        if (agg[i] == -2) {
            int32_t j = mis_best(ptr, adj, agg, i, 0);
            agg[i] = j < 0 ? -2 : -(agg[j] + 3);
        }
    for (int32_t i = 0; i < n; i++)
        agg[i] = agg[i] <= -3 ? -agg[i] - 3 : agg[i] == -2 ? next++ : agg[i];
    *naggs = next;
    free(state);
    free(t);
    free(u);
    return SPMV_OK;
}

/* ---------------------------------------------- tentative prolongator */

/* T (rows x naggs*k) and the coarse candidates Bc (naggs*k x k,
 * column-major): on each aggregate's rows, B = Q R by modified
 * Gram-Schmidt; Q's columns are T's, R is the aggregate's rows of Bc. A
 * column that is (numerically) dependent on the ones before it is left
 * zero. Rows of isolated nodes are zero in T. */
typedef struct agg_rows {
    int32_t *start, *rows; /* rows of aggregate a: rows[start[a] .. start[a+1]) */
} agg_rows;

static int group_rows(const int32_t *agg, int32_t nodes, int32_t b, int32_t naggs, agg_rows *g, spmv_error *err)
{
    g->start = calloc((size_t)naggs + 1, sizeof *g->start);
    g->rows = malloc(((size_t)nodes * b + 1) * sizeof *g->rows);
    if (!g->start || !g->rows)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory for the aggregates");
    for (int32_t I = 0; I < nodes; I++)
        if (agg[I] >= 0)
            g->start[agg[I] + 1] += b;
    for (int32_t a = 0; a < naggs; a++)
        g->start[a + 1] += g->start[a];
    int32_t *fill = malloc(((size_t)naggs + 1) * sizeof *fill);
    if (!fill)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory for the aggregates");
    memcpy(fill, g->start, ((size_t)naggs + 1) * sizeof *fill);
    for (int32_t I = 0; I < nodes; I++)
        for (int32_t c = 0; c < b && agg[I] >= 0; c++)
            g->rows[fill[agg[I]]++] = I * b + c;
    free(fill);
    return SPMV_OK;
}

/* Q R of one aggregate's m x k block (q: m x k column-major, in place),
 * r: k x k upper triangular, column-major. */
static void qr_block(double *q, int32_t m, int32_t k, double *r)
{
    memset(r, 0, (size_t)k * k * sizeof *r);
    for (int32_t j = 0; j < k; j++) {
        double *qj = q + (size_t)j * m, before = 0, nrm = 0;
        for (int32_t i = 0; i < m; i++)
            before += qj[i] * qj[i];
        for (int32_t l = 0; l < j; l++) {
            const double *ql = q + (size_t)l * m;
            double d = 0;
            for (int32_t i = 0; i < m; i++)
                d += ql[i] * qj[i];
            r[(size_t)j * k + l] = d;
            for (int32_t i = 0; i < m; i++)
                qj[i] -= d * ql[i];
        }
        for (int32_t i = 0; i < m; i++)
            nrm += qj[i] * qj[i];
        nrm = sqrt(nrm);
        if (nrm <= 1e-10 * sqrt(before) || nrm == 0.0) { /* dependent: a zero column */
            memset(qj, 0, (size_t)m * sizeof *qj);
            continue;
        }
        r[(size_t)j * k + j] = nrm;
        for (int32_t i = 0; i < m; i++)
            qj[i] /= nrm;
    }
}

static int tentative(const double *B, int32_t rows, int32_t k, const agg_rows *g, int32_t naggs, spmv_csr *T,
                     double **Bc, spmv_error *err)
{
    int32_t max_m = 0;
    for (int32_t a = 0; a < naggs; a++)
        max_m = g->start[a + 1] - g->start[a] > max_m ? g->start[a + 1] - g->start[a] : max_m;
    int st = csr_alloc(T, rows, naggs * k, (int64_t)g->start[naggs] * k, err);
    if (st)
        return st;
    double *q = malloc(((size_t)max_m * k + 1) * sizeof *q), *r = malloc((size_t)k * k * sizeof *r);
    *Bc = calloc((size_t)naggs * k * k + 1, sizeof **Bc);
    if (!q || !r || !*Bc) {
        free(q);
        free(r);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory for the prolongator");
    }
    /* row offsets first: a row of an aggregate holds k entries (its
     * aggregate's columns), an isolated node's row none */
    memset(T->row_ptr, 0, ((size_t)rows + 1) * sizeof(int32_t));
    for (int32_t p = 0; p < g->start[naggs]; p++)
        T->row_ptr[g->rows[p] + 1] = k;
    for (int32_t i = 0; i < rows; i++)
        T->row_ptr[i + 1] += T->row_ptr[i];
    double *tv = T->val;
    int64_t nk = (int64_t)naggs * k;
    for (int32_t a = 0; a < naggs; a++) {
        int32_t s = g->start[a], m = g->start[a + 1] - s;
        for (int32_t j = 0; j < k; j++)
            for (int32_t i = 0; i < m; i++)
                q[(size_t)j * m + i] = B[(size_t)j * rows + g->rows[s + i]];
        qr_block(q, m, k, r);
        for (int32_t j = 0; j < k; j++)
            for (int32_t l = 0; l < k; l++) /* Bc's row a*k + l, column j */
                (*Bc)[j * nk + (int64_t)a * k + l] = r[(size_t)j * k + l];
        for (int32_t i = 0; i < m; i++) {
            int32_t e = T->row_ptr[g->rows[s + i]];
            for (int32_t j = 0; j < k; j++) {
                T->col[e + j] = a * k + j;
                tv[e + j] = q[(size_t)j * m + i];
            }
        }
    }
    free(q);
    free(r);
    return SPMV_OK;
}

/* ----------------------------------------------------- smoothed P, A_c */

/* P = T - omega D^-1 (A T) in place of A T, on its pattern (which holds
 * T's: A's diagonal is non-zero). */
static void smooth_prolongator(const double *dinv, double omega, const spmv_csr *T, spmv_csr *P)
{
    double *pv = P->val;
    const double *tv = T->val;
#pragma omp parallel for schedule(static) if (P->nnz > 50000)
    for (int32_t i = 0; i < P->rows; i++) {
        int32_t t = T->row_ptr[i], te = T->row_ptr[i + 1];
        for (int32_t p = P->row_ptr[i]; p < P->row_ptr[i + 1]; p++) {
            double v = -omega * dinv[i] * pv[p];
            while (t < te && T->col[t] < P->col[p])
                t++;
            if (t < te && T->col[t] == P->col[p])
                v += tv[t];
            pv[p] = v;
        }
    }
}

/* Adds the time since *t0 to ms[phase] and restarts the clock. */
static void lap(double *ms, spmv_amg_phase phase, double *t0)
{
    double t = spmv_now_ms();
    if (ms)
        ms[phase] += t - *t0;
    *t0 = t;
}

int spmv_amg_host_products(void *arg, const spmv_csr *A, const double *dinv, double omega, const spmv_csr *T,
                           spmv_csr *P, spmv_csr *R, spmv_csr *Ac, double *ms, spmv_error *err)
{
    (void)arg;
    spmv_csr AP = {0};
    double t0 = spmv_now_ms();
    int st = csr_mult(A, T, P, err);
    if (st)
        return st;
    lap(ms, SPMV_AMG_AT, &t0);
    smooth_prolongator(dinv, omega, T, P);
    lap(ms, SPMV_AMG_SMOOTH, &t0);
    if ((st = csr_transpose(P, R, err)))
        return st;
    lap(ms, SPMV_AMG_TRANSPOSE, &t0);
    if ((st = csr_mult(A, P, &AP, err)))
        return st;
    lap(ms, SPMV_AMG_AP, &t0);
    st = csr_mult(R, &AP, Ac, err);
    lap(ms, SPMV_AMG_RAP, &t0);
    spmv_csr_free(&AP);
    return st;
}

/* The near-nullspace of level 0: the caller's, or the constant per block
 * component (block_size columns). */
static double *candidates(const spmv_amg_options *o, int32_t rows, int32_t *k)
{
    *k = o->near_nullspace ? o->nullspace_k : o->block_size;
    double *B = malloc(((size_t)rows * *k + 1) * sizeof *B);
    if (!B)
        return NULL;
    if (o->near_nullspace) {
        memcpy(B, o->near_nullspace, (size_t)rows * *k * sizeof *B);
        return B;
    }
    for (int32_t j = 0; j < *k; j++)
        for (int32_t i = 0; i < rows; i++)
            B[(size_t)j * rows + i] = i % o->block_size == j ? 1.0 : 0.0;
    return B;
}

/* One coarsening step: level l's A (with its dinv and rho) gives P, R and
 * the next A; B (level l's candidates, k columns) becomes the next level's.
 * *done when the level cannot coarsen (no aggregate, or too few fewer). */
static int coarsen(spmv_amg *h, const spmv_amg_products *prod, int32_t l, int32_t b, double **B, int32_t k,
                   bool *done, spmv_error *err)
{
    spmv_amg_level *lv = &h->lv[l], *next = &h->lv[l + 1];
    graph g = {0};
    agg_rows ag = {0};
    spmv_csr T = {0};
    double *Bc = NULL, *ms = h->phase_ms, t0 = spmv_now_ms();
    int32_t *agg = NULL;
    int st = strength(&lv->A, b, h->o.strength, &g, err);
    lap(ms, SPMV_AMG_STRENGTH, &t0);
    if (st)
        goto out;
    if (!(agg = malloc(((size_t)g.n + 1) * sizeof *agg))) {
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory for the aggregates");
        goto out;
    }
    int32_t naggs = 0, rounds = 0;
    if (h->o.aggregation != SPMV_AMG_AGG_MIS2)
        naggs = aggregate(&g, agg);
    else if ((st = spmv_amg_mis2(g.n, g.ptr, g.adj, agg, &naggs, &rounds, err)))
        goto out;
    lap(ms, SPMV_AMG_AGGREGATE, &t0);
    *done = naggs == 0 || (int64_t)naggs * k >= (int64_t)lv->A.rows * 9 / 10;
    if (*done)
        goto out;
    if ((st = group_rows(agg, g.n, b, naggs, &ag, err)) ||
        (st = tentative(*B, lv->A.rows, k, &ag, naggs, &T, &Bc, err)))
        goto out;
    lap(ms, SPMV_AMG_TENTATIVE, &t0);
    if ((st = prod->fn(prod->arg, &lv->A, lv->dinv, 4.0 / 3.0 / lv->rho, &T, &lv->P, &lv->R, &next->A, ms, err)))
        goto out;
    free(*B);
    *B = Bc;
    Bc = NULL;
out:
    if (st) /* what a hook left of the next level (not yet counted in nlevels) */
        spmv_csr_free(&next->A);
    graph_free(&g);
    free(ag.start);
    free(ag.rows);
    free(agg);
    free(Bc);
    spmv_csr_free(&T);
    return st;
}

/* What a level needs besides A: 1/diag, rho, the work vectors. */
static int level_ready(spmv_amg_level *lv, spmv_error *err)
{
    size_t n = (size_t)lv->A.rows + 1;
    int st = diag_inv(&lv->A, &lv->dinv, err);
    if (st)
        return st;
    lv->r = malloc(n * sizeof(double));
    lv->x = malloc(n * sizeof(double));
    lv->b = malloc(n * sizeof(double));
    lv->d = malloc(n * sizeof(double));
    if (!lv->r || !lv->x || !lv->b || !lv->d)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory for the cycle's vectors");
    lv->rho = spmv_amg_spectral_radius(&lv->A, lv->dinv, lv->r, lv->d);
    return SPMV_OK;
}

/* The coarsest level's dense inverse by Gauss-Jordan with partial
 * pivoting; a pivot that vanishes (a singular coarse operator, e.g. a pure
 * Neumann problem) leaves its row and column zero: a generalised inverse. */
int spmv_amg_dense_inverse(const spmv_csr *A, double **out, spmv_error *err)
{
    int32_t n = A->rows;
    *out = NULL;
    double *a = calloc((size_t)n * n + 1, sizeof *a), *inv = calloc((size_t)n * n + 1, sizeof *inv);
    int32_t *skip = calloc((size_t)n + 1, sizeof *skip);
    if (!a || !inv || !skip) {
        free(a);
        free(inv);
        free(skip);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory for the coarse inverse (%d rows)", n);
    }
    double amax = 0;
    for (int32_t i = 0; i < n; i++) {
        inv[(size_t)i * n + i] = 1.0;
        for (int32_t p = A->row_ptr[i]; p < A->row_ptr[i + 1]; p++) {
            a[(size_t)i * n + A->col[p]] = ((const double *)A->val)[p];
            amax = fmax(amax, fabs(((const double *)A->val)[p]));
        }
    }
    for (int32_t c = 0; c < n; c++) {
        int32_t piv = c;
        for (int32_t i = c + 1; i < n; i++)
            if (fabs(a[(size_t)i * n + c]) > fabs(a[(size_t)piv * n + c]))
                piv = i;
        if (fabs(a[(size_t)piv * n + c]) <= 1e-13 * amax) {
            skip[c] = 1;
            continue;
        }
        for (int32_t j = 0; j < n && piv != c; j++) {
            double t = a[(size_t)c * n + j];
            a[(size_t)c * n + j] = a[(size_t)piv * n + j];
            a[(size_t)piv * n + j] = t;
            t = inv[(size_t)c * n + j];
            inv[(size_t)c * n + j] = inv[(size_t)piv * n + j];
            inv[(size_t)piv * n + j] = t;
        }
        double d = 1.0 / a[(size_t)c * n + c];
        for (int32_t j = 0; j < n; j++) {
            a[(size_t)c * n + j] *= d;
            inv[(size_t)c * n + j] *= d;
        }
        for (int32_t i = 0; i < n; i++) {
            double f = a[(size_t)i * n + c];
            if (i == c || f == 0.0)
                continue;
            for (int32_t j = 0; j < n; j++) {
                a[(size_t)i * n + j] -= f * a[(size_t)c * n + j];
                inv[(size_t)i * n + j] -= f * inv[(size_t)c * n + j];
            }
        }
    }
    for (int32_t c = 0; c < n; c++) /* a skipped pivot: its row and column out of the inverse */
        for (int32_t j = 0; j < n && skip[c]; j++)
            inv[(size_t)c * n + j] = inv[(size_t)j * n + c] = 0.0;
    free(a);
    free(skip);
    *out = inv;
    return SPMV_OK;
}

static int coarse_inverse(spmv_amg *h, spmv_error *err)
{
    h->coarse_n = h->lv[h->nlevels - 1].A.rows;
    return spmv_amg_dense_inverse(&h->lv[h->nlevels - 1].A, &h->coarse_inv, err);
}

/* --------------------------------------------------------------- setup */

void spmv_amg_level_free(spmv_amg_level *lv)
{
    spmv_csr_free(&lv->A);
    spmv_csr_free(&lv->P);
    spmv_csr_free(&lv->R);
    free(lv->dinv);
    free(lv->r);
    free(lv->x);
    free(lv->b);
    free(lv->d);
    memset(lv, 0, sizeof *lv);
}

void spmv_amg_free(spmv_amg *h)
{
    if (!h)
        return;
    for (int32_t l = 0; l < h->nlevels; l++)
        spmv_amg_level_free(&h->lv[l]);
    free(h->lv);
    free(h->coarse_inv);
    free(h->kwork);
    free(h);
}

static int64_t csr_bytes(const spmv_csr *m)
{
    return m->row_ptr ? ((int64_t)m->rows + 1) * 4 + m->nnz * 12 : 0;
}

static void complexities(spmv_amg *h)
{
    double nnz = 0, rows = 0;
    h->bytes = (int64_t)h->coarse_n * h->coarse_n * 8;
    for (int32_t l = 0; l < h->nlevels; l++) {
        const spmv_amg_level *lv = &h->lv[l];
        nnz += (double)lv->A.nnz;
        rows += lv->A.rows;
        h->bytes += (l ? csr_bytes(&lv->A) : 0) + csr_bytes(&lv->P) + csr_bytes(&lv->R) +
                    5 * ((int64_t)lv->A.rows + 1) * 8;
    }
    h->operator_complexity = nnz / (double)(h->lv[0].A.nnz ? h->lv[0].A.nnz : 1);
    h->grid_complexity = rows / (double)(h->lv[0].A.rows ? h->lv[0].A.rows : 1);
}

static int check_matrix(const spmv_csr *a, spmv_error *err)
{
    if (!a || a->rows != a->cols)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "amg needs a square matrix%s", a ? "" : " (none given)");
    if (spmv_csr_wide(a))
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "amg: a matrix of %lld non-zeros (64-bit row offsets) is "
                              "beyond its 32-bit indices", (long long)a->nnz);
    return SPMV_OK;
}

int spmv_amg_level_init(const spmv_csr *a, spmv_amg_level *lv, spmv_error *err)
{
    memset(lv, 0, sizeof *lv);
    int st = check_matrix(a, err);
    if (st || (st = csr_to_f64(a, &lv->A, err)) || (st = level_ready(lv, err)))
        spmv_amg_level_free(lv);
    return st;
}

int spmv_amg_setup(const spmv_csr *a, const spmv_amg_options *opt, spmv_amg **out, spmv_error *err)
{
    return spmv_amg_setup_with(a, opt, NULL, out, err);
}

int spmv_amg_setup_with(const spmv_csr *a, const spmv_amg_options *opt, const spmv_amg_products *products,
                        spmv_amg **out, spmv_error *err)
{
    static const spmv_amg_products host = {spmv_amg_host_products, NULL};
    const spmv_amg_products *prod = products && products->fn ? products : &host;
    double t0 = spmv_now_ms(), tp;
    spmv_amg_options o;
    if (opt)
        o = *opt;
    else
        spmv_amg_defaults(&o);
    *out = NULL;
    int st = check_matrix(a, err);
    if (st || (st = spmv_amg_check_options(&o, a->rows, err)))
        return st;
    spmv_amg *h = calloc(1, sizeof *h);
    int32_t k = 0;
    double *B = NULL;
    if (!h || !(h->lv = calloc((size_t)o.max_levels, sizeof *h->lv)) || !(B = candidates(&o, a->rows, &k))) {
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg: out of memory");
        goto fail;
    }
    h->o = o;
    h->o.near_nullspace = NULL; /* the caller's array is not kept */
    if (h->o.aggregation == SPMV_AMG_AGG_AUTO) /* the host's choice (a GPU's is mis2: spmv_gpu_amg_build) */
        h->o.aggregation = SPMV_AMG_AGG_STANDARD;
    h->nlevels = 1;
    if ((st = csr_to_f64(a, &h->lv[0].A, err)))
        goto fail;
    for (int32_t l = 0;; l++) {
        bool done = false;
        tp = spmv_now_ms();
        st = level_ready(&h->lv[l], err);
        lap(h->phase_ms, SPMV_AMG_LEVEL, &tp);
        if (st)
            goto fail;
        if (l + 1 >= o.max_levels || h->lv[l].A.rows <= o.max_coarse)
            break;
        if ((st = coarsen(h, prod, l, l == 0 ? o.block_size : k, &B, k, &done, err)))
            goto fail;
        if (done)
            break;
        h->nlevels++;
    }
    tp = spmv_now_ms();
    st = coarse_inverse(h, err);
    lap(h->phase_ms, SPMV_AMG_COARSE, &tp);
    if (st)
        goto fail;
    free(B);
    complexities(h);
    h->setup_ms = spmv_now_ms() - t0;
    *out = h;
    return SPMV_OK;
fail:
    free(B);
    spmv_amg_free(h);
    return st;
}

/* --------------------------------------------------------------- cycle */

/* r = b - A x */
static void residual(const spmv_csr *a, const double *b, const double *x, double *r)
{
    const double *v = a->val;
#pragma omp parallel for schedule(static) if (a->nnz > 50000)
    for (int32_t i = 0; i < a->rows; i++) {
        double s = b[i];
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)
            s -= v[p] * x[a->col[p]];
        r[i] = s;
    }
}

/* One Chebyshev sweep on A x = b: the polynomial of degree `degree` in
 * D^-1 A that is smallest on [rho/30, 1.1 rho] (Saad, Iterative Methods,
 * alg. 12.1); `zero`: x is zero on entry (the first residual is b). */
void spmv_amg_chebyshev(spmv_amg_level *lv, int32_t degree, const double *b, double *x, bool zero)
{
    int32_t n = lv->A.rows;
    double *r = lv->r, *d = lv->d;
    if (zero)
        memcpy(r, b, (size_t)n * sizeof *r);
    else
        residual(&lv->A, b, x, r);
    double hi = 1.1 * lv->rho, lo = lv->rho / 30.0;
    double theta = (hi + lo) / 2, delta = (hi - lo) / 2, sigma = theta / delta, rk = 1.0 / sigma;
    for (int32_t i = 0; i < n; i++) {
        d[i] = lv->dinv[i] * r[i] / theta;
        x[i] = (zero ? 0.0 : x[i]) + d[i];
    }
    for (int32_t j = 1; j < degree; j++) {
        double rn = 1.0 / (2.0 * sigma - rk);
        residual(&lv->A, b, x, r);
#pragma omp parallel for schedule(static) if (n > 50000)
        for (int32_t i = 0; i < n; i++) {
            d[i] = rn * rk * d[i] + 2.0 * rn / delta * lv->dinv[i] * r[i];
            x[i] += d[i];
        }
        rk = rn;
    }
}

/* `sweeps` smoothing sweeps on A x = b; `zero`: x is zero on entry.
 * Damped Jacobi: x += 4/3 / rho D^-1 (b - A x); Chebyshev: the sweep
 * above. */
static void smooth(const spmv_amg *h, spmv_amg_level *lv, const double *b, double *x, int32_t sweeps, bool zero)
{
    int32_t n = lv->A.rows;
    double *r = lv->r;
    for (int32_t s = 0; s < sweeps; s++, zero = false) {
        if (h->o.smoother == SPMV_AMG_CHEBYSHEV) {
            spmv_amg_chebyshev(lv, h->o.degree, b, x, zero);
            continue;
        }
        if (zero)
            memcpy(r, b, (size_t)n * sizeof *r);
        else
            residual(&lv->A, b, x, r);
        double w = 4.0 / 3.0 / lv->rho;
        for (int32_t i = 0; i < n; i++)
            x[i] = (zero ? 0.0 : x[i]) + w * lv->dinv[i] * r[i];
    }
}

static void cycle(spmv_amg *h, int32_t l, const double *b, double *x)
{
    spmv_amg_level *lv = &h->lv[l];
    int32_t n = lv->A.rows;
    if (l == h->nlevels - 1) {
        for (int32_t i = 0; i < n; i++) {
            double s = 0;
            for (int32_t j = 0; j < n; j++)
                s += h->coarse_inv[(size_t)i * n + j] * b[j];
            x[i] = s;
        }
        return;
    }
    spmv_amg_level *next = &h->lv[l + 1];
    if (h->o.presmooth)
        smooth(h, lv, b, x, h->o.presmooth, true);
    else
        memset(x, 0, (size_t)n * sizeof *x);
    residual(&lv->A, b, x, lv->r);
    csr_apply(&lv->R, lv->r, next->b);
    cycle(h, l + 1, next->b, next->x);
    csr_apply(&lv->P, next->x, lv->r);
    for (int32_t i = 0; i < n; i++)
        x[i] += lv->r[i];
    smooth(h, lv, b, x, h->o.postsmooth, false);
}

void spmv_amg_vcycle(spmv_amg *h, const double *r, double *z) { cycle(h, 0, r, z); }

/* ------------------------------------------------ the cycle on k columns
 *
 * spmv_amg_vcycle_k: the cycle above on a block of k columns, each product
 * one pass over the operator for all k (an SpMM), each vector step one
 * loop over the block. Inside the cycle the blocks are interleaved (row i's
 * k values side by side, at i * k), so a non-zero's k products read one
 * run of x; the caller's column-major r and z are transposed on the way in
 * and out. Every column's arithmetic is the one-column cycle's, operation
 * for operation, so each column of z is what spmv_amg_vcycle gives for
 * that column alone, bit for bit. */

#define KC 8 /* columns a row's pass carries at once */

/* One level's n x k blocks of the k-column cycle (h->kwork), interleaved. */
typedef struct kblock {
    double *r, *x, *b, *d;
} kblock;

/* Row i of y = b - A x (b given) or y = A x (b NULL) on columns j0 ..
 * j0 + kc of interleaved blocks of k columns; kc is KC or fewer (a
 * constant where inlined: the sums stay in registers). */
static inline void row_mm(const spmv_csr *a, int32_t i, int32_t k, int32_t j0, int32_t kc, const double *b,
                          const double *x, double *y)
{
    const double *v = a->val;
    double s[KC];
    for (int32_t c = 0; c < kc; c++)
        s[c] = b ? b[(size_t)i * k + j0 + c] : 0.0;
    for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++) {
        double av = v[p];
        const double *xc = x + (size_t)a->col[p] * k + j0;
        if (b)
            for (int32_t c = 0; c < kc; c++)
                s[c] -= av * xc[c];
        else
            for (int32_t c = 0; c < kc; c++)
                s[c] += av * xc[c];
    }
    for (int32_t c = 0; c < kc; c++)
        y[(size_t)i * k + j0 + c] = s[c];
}

/* y = b - A x (b given) or y = A x (b NULL) on interleaved blocks of k
 * columns: row by row, KC columns at a time. */
static void csr_mm(const spmv_csr *a, int32_t k, const double *b, const double *x, double *y)
{
#pragma omp parallel for schedule(static) if (a->nnz * k > 50000)
    for (int32_t i = 0; i < a->rows; i++)
        for (int32_t j0 = 0; j0 < k; j0 += KC) {
            if (k - j0 >= KC)
                row_mm(a, i, k, j0, KC, b, x, y);
            else
                row_mm(a, i, k, j0, k - j0, b, x, y);
        }
}

/* spmv_amg_chebyshev on k interleaved columns, w's r and d its work
 * blocks. */
static void chebyshev_k(const spmv_amg_level *lv, int32_t degree, int32_t k, const double *b, double *x, bool zero,
                        const kblock *w)
{
    size_t n = (size_t)lv->A.rows;
    double *r = w->r, *d = w->d;
    if (zero)
        memcpy(r, b, n * (size_t)k * sizeof *r);
    else
        csr_mm(&lv->A, k, b, x, r);
    double hi = 1.1 * lv->rho, lo = lv->rho / 30.0;
    double theta = (hi + lo) / 2, delta = (hi - lo) / 2, sigma = theta / delta, rk = 1.0 / sigma;
    for (size_t i = 0; i < n; i++)
        for (size_t o = i * (size_t)k, e = o + (size_t)k; o < e; o++) {
            d[o] = lv->dinv[i] * r[o] / theta;
            x[o] = (zero ? 0.0 : x[o]) + d[o];
        }
    for (int32_t s = 1; s < degree; s++) {
        double rn = 1.0 / (2.0 * sigma - rk);
        csr_mm(&lv->A, k, b, x, r);
#pragma omp parallel for schedule(static) if (n * (size_t)k > 50000)
        for (size_t i = 0; i < n; i++)
            for (size_t o = i * (size_t)k, e = o + (size_t)k; o < e; o++) {
                d[o] = rn * rk * d[o] + 2.0 * rn / delta * lv->dinv[i] * r[o];
                x[o] += d[o];
            }
        rk = rn;
    }
}

/* smooth() on k interleaved columns. */
static void smooth_k(const spmv_amg *h, const spmv_amg_level *lv, int32_t k, const double *b, double *x,
                     int32_t sweeps, bool zero, const kblock *w)
{
    size_t n = (size_t)lv->A.rows;
    double *r = w->r;
    for (int32_t s = 0; s < sweeps; s++, zero = false) {
        if (h->o.smoother == SPMV_AMG_CHEBYSHEV) {
            chebyshev_k(lv, h->o.degree, k, b, x, zero, w);
            continue;
        }
        if (zero)
            memcpy(r, b, n * (size_t)k * sizeof *r);
        else
            csr_mm(&lv->A, k, b, x, r);
        double om = 4.0 / 3.0 / lv->rho;
        for (size_t i = 0; i < n; i++)
            for (size_t o = i * (size_t)k, e = o + (size_t)k; o < e; o++)
                x[o] = (zero ? 0.0 : x[o]) + om * lv->dinv[i] * r[o];
    }
}

/* The coarse solve x = inv b on k interleaved columns (each column's sum
 * in the one-column order). */
static void coarse_k(const spmv_amg *h, int32_t k, const double *b, double *x)
{
    size_t n = (size_t)h->coarse_n, kk = (size_t)k;
#pragma omp parallel for schedule(static) if (n * n * kk > 250000)
    for (size_t i = 0; i < n; i++) {
        double *xi = x + i * kk;
        for (size_t j = 0; j < kk; j++)
            xi[j] = 0.0;
        for (size_t c = 0; c < n; c++) {
            double a = h->coarse_inv[i * n + c];
            const double *bc = b + c * kk;
            for (size_t j = 0; j < kk; j++)
                xi[j] += a * bc[j];
        }
    }
}

static void cycle_k(const spmv_amg *h, const kblock *w, int32_t l, int32_t k, const double *b, double *x)
{
    const spmv_amg_level *lv = &h->lv[l];
    size_t n = (size_t)lv->A.rows;
    if (l == h->nlevels - 1) {
        coarse_k(h, k, b, x);
        return;
    }
    const kblock *next = &w[l + 1];
    if (h->o.presmooth)
        smooth_k(h, lv, k, b, x, h->o.presmooth, true, &w[l]);
    else
        memset(x, 0, n * (size_t)k * sizeof *x);
    csr_mm(&lv->A, k, b, x, w[l].r);
    csr_mm(&lv->R, k, NULL, w[l].r, next->b);
    cycle_k(h, w, l + 1, k, next->b, next->x);
    csr_mm(&lv->P, k, NULL, next->x, w[l].r);
    for (size_t i = 0; i < n * (size_t)k; i++)
        x[i] += w[l].r[i];
    smooth_k(h, lv, k, b, x, h->o.postsmooth, false, &w[l]);
}

/* Column-major (column j at j * n) to interleaved (row i at i * k), or
 * back. */
static void interleave(size_t n, int32_t k, const double *in, double *out, bool back)
{
#pragma omp parallel for schedule(static) if (n * (size_t)k > 200000)
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < (size_t)k; j++) {
            if (back)
                out[j * n + i] = in[i * (size_t)k + j];
            else
                out[i * (size_t)k + j] = in[j * n + i];
        }
}

void spmv_amg_chebyshev_k(const spmv_amg_level *lv, int32_t degree, int32_t k, const double *b, double *x, double *r,
                          double *d, double *bi, double *xi)
{
    size_t n = (size_t)lv->A.rows;
    interleave(n, k, b, bi, false);
    chebyshev_k(lv, degree, k, bi, xi, true, &(kblock){.r = r, .d = d});
    interleave(n, k, xi, x, true);
}

/* The work blocks of a k-column cycle: h->kwork grown to 4 blocks a
 * level, carved into w. */
static int kwork(spmv_amg *h, int32_t k, kblock *w, spmv_error *err)
{
    int64_t need = 0;
    for (int32_t l = 0; l < h->nlevels; l++)
        need += 4 * (int64_t)h->lv[l].A.rows * k;
    if (need > h->kwork_len) {
        double *p = realloc(h->kwork, (size_t)(need ? need : 1) * sizeof *p);
        if (!p)
            return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg cycle: out of memory for %d columns' work", k);
        h->kwork = p;
        h->kwork_len = need;
    }
    double *p = h->kwork;
    for (int32_t l = 0; l < h->nlevels; l++) {
        size_t nk = (size_t)h->lv[l].A.rows * k;
        w[l] = (kblock){p, p + nk, p + 2 * nk, p + 3 * nk};
        p += 4 * nk;
    }
    return SPMV_OK;
}

int spmv_amg_vcycle_k(spmv_amg *h, int32_t k, const double *r, double *z, spmv_error *err)
{
    if (k < 1)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg cycle: %d columns", k);
    kblock w[32];
    int st = kwork(h, k, w, err);
    if (st)
        return st;
    size_t n = (size_t)h->lv[0].A.rows;
    interleave(n, k, r, w[0].b, false); /* level 0's b and x blocks are free: the cycle's own */
    cycle_k(h, w, 0, k, w[0].b, w[0].x);
    interleave(n, k, w[0].x, z, true);
    return SPMV_OK;
}

/* ------------------------------------------------------------ elasticity */

void spmv_amg_rigid_body(int64_t n, const double *xyz, double *out)
{
    int64_t rows = 3 * n;
    memset(out, 0, (size_t)(6 * rows) * sizeof *out);
    for (int64_t i = 0; i < n; i++) {
        double x = xyz[3 * i], y = xyz[3 * i + 1], z = xyz[3 * i + 2];
        for (int c = 0; c < 3; c++) /* translations */
            out[c * rows + 3 * i + c] = 1.0;
        /* rotations about z, x, y: (-y, x, 0), (0, -z, y), (z, 0, -x) */
        out[3 * rows + 3 * i] = -y;
        out[3 * rows + 3 * i + 1] = x;
        out[4 * rows + 3 * i + 1] = -z;
        out[4 * rows + 3 * i + 2] = y;
        out[5 * rows + 3 * i] = z;
        out[5 * rows + 3 * i + 2] = -x;
    }
}
