/* tune.c — the `auto` kernel: per-matrix choice of kernel and parameters.
 *
 * No kernel wins on every matrix (docs/benchmarks/gpu.md): cuSPARSE leads
 * on some shapes, gpu.csr.light with one lane count on others, a sliced
 * ELL on regular stencils. So `auto` times the candidates on the matrix
 * itself and keeps the fastest one whose y agrees with spmv_reference.
 *
 * The loop is bounded two ways: a wall-time budget (o->budget_ms) and a
 * count of kernel runs (o->max_runs, probes and warm-ups included). Each
 * candidate is first probed with one run; a probe slower than twice the
 * best median so far cannot win and is not timed further (the row-per-
 * thread kernels on a matrix with a dense row take 100x longer), and a
 * candidate is timed in full only if the probe says its runs fit in what
 * is left of the budget. Candidates go in the order of how often they won
 * in docs/benchmarks/gpu.md, so a short budget still tries the likely
 * winners: cuSPARSE CSR first (the baseline auto must never lose to), the
 * two gpu.csr.light forms, the sliced ELLs (Poisson), then the rest.
 * A candidate whose work per run is pathological for this matrix
 * (spmv_kernel_work_excessive: cpu.csr.chunked's passes over the rows of a
 * wide matrix) is not tried at all: its one probe could outlast the budget.
 * The caller supplies the runner, so the same loop tunes a GPU-resident
 * matrix (spmv_gpu_run) or a host one (spmv_cpu_run), and may leave out
 * the kernels of some formats (skip_formats: the daemon defers a packed
 * format until the matrix's products repay building it).
 *
 * `auto` must never fail where some kernel works (issue 14): until one
 * candidate has verified, the time budget stops nothing, and a candidate
 * whose full timing does not fit is judged on its probe (the probe's y is
 * checked against the reference like a timed run's, its time stands as the
 * median). So a budget too small for any full timing costs at most one run
 * per candidate and still picks one; max_runs stays a hard bound on runs.
 *
 * Where nothing wins, auto picks the baseline: cuSPARSE on a GPU (its best
 * format and algorithm among the candidates), cpu.csr.omp on the host. A
 * candidate of ours is kept only if it beats the best verified baseline
 * by TUNE_MARGIN; a median a percent lower is as likely the timing's
 * noise as a real gain, and losing to cuSPARSE by a percent is what
 * issue 14 forbids.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "spmv.h"

/* One candidate: a kernel name and the parameters it is tried with. */
typedef struct tune_candidate {
    const char *kernel;
    spmv_param_id param;  /* SPMV_PARAM_COUNT: defaults only */
    int32_t value;
} tune_candidate;

/* How much faster than the best baseline another kernel must be. */
#define TUNE_MARGIN 1.03

/* The baseline kernels: cuSPARSE's, and the host's default. */
static bool tune_is_baseline(const spmv_kernel *k)
{
    return strncmp(k->name, "cusparse.", 9) == 0 || strcmp(k->name, "cpu.csr.omp") == 0;
}

#define NONE SPMV_PARAM_COUNT

static const tune_candidate gpu_candidates[] = {
    {"cusparse.csr", SPMV_PARAM_ALG, 1},
    {"gpu.csr.spmm", NONE, 0},  /* one column or k: only it and cuSPARSE take blocks */
    {"gpu.csr.light", NONE, 0},
    {"gpu.csr.binned", NONE, 0},
    {"cusparse.sell", SPMV_PARAM_HACK_SIZE, 64},
    {"cusparse.sell", NONE, 0},
    {"gpu.psell", NONE, 0},    /* the packed formats: fewer bytes (issue 14) */
    {"gpu.spsell", NONE, 0},   /* exactly symmetric matrices only (skipped on others) */
    {"gpu.pcsr", NONE, 0},
    {"gpu.ell", SPMV_PARAM_BLOCK_SIZE, 128},
    {"gpu.csr.light", SPMV_PARAM_THREADS, 1},
    {"gpu.csr.light", SPMV_PARAM_THREADS, 2},
    {"gpu.csr.light", SPMV_PARAM_THREADS, 4},
    {"gpu.csr.light", SPMV_PARAM_THREADS, 8},
    {"gpu.csr.light", SPMV_PARAM_THREADS, 16},
    {"gpu.csr.light", SPMV_PARAM_THREADS, 32},
    {"gpu.csr.light", SPMV_PARAM_BLOCK_SIZE, 128},
    {"cusparse.csr", SPMV_PARAM_ALG, 2},
    {"gpu.csr.adaptive", SPMV_PARAM_BLOCK_SIZE, 512},
    {"cusparse.coo", SPMV_PARAM_ALG, 1},
    {"gpu.csr.vector", NONE, 0},
    {"gpu.hll", NONE, 0},
    {"gpu.psell", SPMV_PARAM_BLOCK_SIZE, 128},
    {"gpu.psell", SPMV_PARAM_THREADS, 2}, /* wide slices (3-D elasticity's 73 slots): more warps in flight */
    {"gpu.psell", SPMV_PARAM_THREADS, 4},
    {"gpu.pcsr", SPMV_PARAM_THREADS, 1},
    {"gpu.pcsr", SPMV_PARAM_THREADS, 4},
    {"gpu.pcsr", SPMV_PARAM_THREADS, 32},
    {"gpu.pbsr", NONE, 0},     /* only on matrices of complete blocks (tune_fits) */
    {"gpu.pbsr", SPMV_PARAM_THREADS, 8},
};

static const tune_candidate cpu_candidates[] = {
    {"cpu.csr.omp", NONE, 0},
    {"cpu.csr.serial", NONE, 0},
    {"cpu.ell.omp", NONE, 0},
    {"cpu.hll.omp", NONE, 0},
    {"cpu.hll.omp", SPMV_PARAM_SCHEDULE, 2},
    {"cpu.psell.omp", NONE, 0},
    {"cpu.spsell.omp", NONE, 0},
    {"cpu.pcsr.omp", NONE, 0},
    {"cpu.csr.chunked", NONE, 0},
    {"cpu.pbsr.omp", NONE, 0},
};

bool spmv_kernel_is_auto(const spmv_kernel *k) { return k && strcmp(k->name, "auto") == 0; }

void spmv_params_format(const spmv_kernel *k, const spmv_params *p, char *buf, size_t len)
{
    size_t used = 0;
    if (!len)
        return;
    buf[0] = '\0';
    for (int id = 0; k && p && id < SPMV_PARAM_COUNT; id++) {
        if (!(k->params & (1u << id)) || p->v[id] == 0 || used >= len)
            continue;
        int n = snprintf(buf + used, len - used, "%s%s=%" PRId32, used ? "," : "",
                         spmv_param_get((spmv_param_id)id)->name, p->v[id]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}


static void tune_poison(spmv_dtype dt, int64_t n, void *y)
{
    memset(y, 0xff, (size_t)n * spmv_dtype_size(dt)); /* all bits set: NaN in both dtypes */
}

/* The error a correct kernel stays under: summation order differs between
 * kernels (chunks, atomics), so the bound grows with the longest row. */
static double tune_bound(const spmv_csr *a)
{
    int32_t max_row = spmv_csr_max_row(a);
    double base = a->dtype == SPMV_FLOAT32 ? 1e-4 : 1e-12;
    return base * fmax(1.0, sqrt(max_row / 100.0)) * 100.0;
}

typedef struct tune_state {
    const spmv_csr *a;
    const spmv_tune_options *o;
    spmv_tune_run_fn run;
    void *ctx;
    void *x, *y, *ref;
    double t0, bound, best_ms;
    int32_t runs_per;
    spmv_tune_result *res;
    const spmv_kernel *base_k; /* the best verified baseline kernel, its parameters and median */
    spmv_params base_p;
    double base_ms;
    int symmetric;             /* 0 not asked yet, 1 exactly symmetric, -1 not */
    int32_t block_size;        /* spmv_csr_block_size of a; -1 until asked */
} tune_state;

static bool tune_over(const tune_state *s, int32_t more_runs, double more_ms)
{
    if (s->o->max_runs > 0 && s->res->runs + more_runs > s->o->max_runs)
        return true;
    return spmv_now_ms() - s->t0 + more_ms > s->o->budget_ms;
}

/* y (k columns) against the reference, within the bound; NaN fails. */
static bool tune_verified(const tune_state *s)
{
    double err = 0;
    size_t col = (size_t)s->a->rows * spmv_dtype_size(s->a->dtype);
    for (int32_t j = 0; j < s->o->k; j++) {
        double ce = spmv_max_rel_err(s->a->dtype, (char *)s->y + j * col, (char *)s->ref + j * col, s->a->rows);
        if (!(ce <= err))
            err = ce; /* NaN sticks */
    }
    return err <= s->bound;
}

static void tune_keep(tune_state *s, const spmv_kernel *k, const spmv_params *p, double ms)
{
    if (tune_is_baseline(k) && (!s->base_k || ms < s->base_ms)) {
        s->base_k = k;
        s->base_p = *p;
        s->base_ms = ms;
    }
    if (s->best_ms <= 0 || ms < s->best_ms) {
        s->best_ms = ms;
        s->res->kernel = k;
        s->res->params = *p;
        s->res->median_ms = ms;
    }
}

/* Whether k's format can hold the matrix at all: SPSELL only an exactly
 * symmetric matrix, PBSR only a matrix of complete blocks (each found once
 * per tuning, O(nnz)), so another matrix costs no probe and no conversion
 * attempt (on a GPU, the CSR's trip to the host). */
static bool tune_fits(tune_state *s, const spmv_kernel *k)
{
    if (k->format == SPMV_FMT_SPSELL) {
        if (s->symmetric == 0)
            s->symmetric = spmv_csr_symmetric(s->a) ? 1 : -1;
        return s->symmetric > 0;
    }
    if (k->format != SPMV_FMT_PBSR)
        return true;
    if (s->block_size < 0)
        s->block_size = spmv_csr_wide(s->a) ? 0 : spmv_csr_block_size(s->a, NULL);
    return s->block_size > 0;
}

/* Probes and, if it can win and fits, times one candidate. Returns false
 * when the budget stops the loop. */
static bool tune_one(tune_state *s, const tune_candidate *c)
{
    const spmv_kernel *k = spmv_kernel_find(c->kernel);
    spmv_params p;
    spmv_stats st;
    spmv_error e;
    if (!k || !spmv_kernel_available(k, NULL) || spmv_kernel_max_k(k) < s->o->k || (k->format & s->o->skip_formats))
        return true;
    if (!tune_fits(s, k))
        return true;
    memset(&p, 0, sizeof p);
    if (c->param != NONE)
        p.v[c->param] = c->value;
    if (spmv_params_resolve(k, &p, NULL, &e) != SPMV_OK)
        return true;
    /* cpu.csr.chunked's passes on a wide matrix: one probe could take
     * minutes, and a run that costs 16x the product cannot win */
    if (spmv_kernel_work_excessive(spmv_kernel_work(k, &p, s->a->rows, s->a->cols, s->a->nnz), s->a->rows, s->a->nnz))
        return true;
    bool none_yet = !s->res->kernel; /* then only max_runs stops the loop */
    if (s->o->max_runs > 0 && s->res->runs + 1 > s->o->max_runs)
        return false;
    if (!none_yet && tune_over(s, 1, 0))
        return false;
    double p0 = spmv_now_ms();
    s->res->runs += 1;
    tune_poison(s->a->dtype, (int64_t)s->a->rows * s->o->k, s->y);
    if (s->run(s->ctx, k, &p, s->x, s->y, 0, 1, &st, &e) != SPMV_OK)
        return true; /* refused here (a format too large, ...): not a candidate */
    double probe_ms = spmv_now_ms() - p0;
    if (s->best_ms > 0 && st.median_ms > 2.0 * s->best_ms)
        return true;
    int32_t n = 2 + s->runs_per;
    if (tune_over(s, n, st.median_ms * n + probe_ms)) {
        if (!none_yet)
            return false;
        if (!tune_verified(s))
            return true; /* wrong: the next one may do */
        tune_keep(s, k, &p, st.median_ms); /* judged on its probe: the first that works */
        return false;
    }
    tune_poison(s->a->dtype, (int64_t)s->a->rows * s->o->k, s->y);
    s->res->runs += n;
    if (s->run(s->ctx, k, &p, s->x, s->y, 2, s->runs_per, &st, &e) != SPMV_OK)
        return true;
    s->res->timed++;
    if (!tune_verified(s))
        return true; /* wrong answer: never chosen */
    tune_keep(s, k, &p, st.median_ms);
    return true;
}

int spmv_tune(const spmv_csr *a, const spmv_tune_options *opt, spmv_tune_run_fn run, void *ctx,
              spmv_tune_result *out, spmv_error *err)
{
    spmv_tune_options o = {SPMV_DEVICE_GPU, 0, 0, 0, 0, 1, 0};
    tune_state s;
    const tune_candidate *list;
    size_t n, vs;
    int st = SPMV_OK;

    if (!a || !run || !out)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "tune: missing matrix, runner or result");
    if (opt)
        o = *opt;
    if (!(o.budget_ms > 0))
        o.budget_ms = SPMV_TUNE_BUDGET_MS;
    if (o.runs <= 0)
        o.runs = 10;
    if (o.max_runs < 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "tune: max_runs %d is negative", o.max_runs);
    if (o.k <= 0)
        o.k = 1;
    if (o.k > SPMV_MAX_K)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "tune: k %d is over %d", o.k, SPMV_MAX_K);
    memset(out, 0, sizeof *out);
    memset(&s, 0, sizeof s);
    list = o.device == SPMV_DEVICE_GPU ? gpu_candidates : cpu_candidates;
    n = o.device == SPMV_DEVICE_GPU ? sizeof gpu_candidates / sizeof *list : sizeof cpu_candidates / sizeof *list;
    out->candidates = (int32_t)n;
    s = (tune_state){.a = a, .o = &o, .run = run, .ctx = ctx, .t0 = spmv_now_ms(), .runs_per = o.runs, .res = out,
                    .block_size = -1};
    vs = spmv_dtype_size(a->dtype);
    s.x = malloc((size_t)(a->cols > 0 ? a->cols : 1) * vs * (size_t)o.k);
    s.y = malloc((size_t)(a->rows > 0 ? a->rows : 1) * vs * (size_t)o.k);
    s.ref = malloc((size_t)(a->rows > 0 ? a->rows : 1) * vs * (size_t)o.k);
    if (!s.x || !s.y || !s.ref) {
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "tune: vectors of %d and %d values", a->cols, a->rows);
        goto fail;
    }
    /* x deterministic from the seed, never zero-filled (zeros would hide
     * unwritten rows) */
    for (int32_t j = 0; j < o.k; j++) { /* one column of x (and of the reference) per k */
        void *xj = (char *)s.x + (size_t)j * a->cols * vs, *rj = (char *)s.ref + (size_t)j * a->rows * vs;
        spmv_random_vector(a->dtype, a->cols, (o.seed ? o.seed : 0x7u) + (uint64_t)j * UINT64_C(0x9E3779B97F4A7C15), xj);
        spmv_reference(a, xj, rj);
    }
    s.bound = tune_bound(a);
    for (size_t i = 0; i < n; i++)
        if (!tune_one(&s, &list[i])) {
            out->budget_hit = true;
            break;
        }
    out->cost_ms = spmv_now_ms() - s.t0;
    if (out->kernel && s.base_k && !tune_is_baseline(out->kernel) && out->median_ms * TUNE_MARGIN > s.base_ms) {
        out->kernel = s.base_k; /* not clearly faster: the baseline */
        out->params = s.base_p;
        out->median_ms = s.base_ms;
    }
    if (!out->kernel)
        st = spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0,
                            "auto: no candidate kernel ran and verified (%d tried, %d runs of max_runs %d)",
                            (int)n, out->runs, o.max_runs);
fail:
    free(s.x);
    free(s.y);
    free(s.ref);
    return st;
}
