/* amg-profile.c — where the AMG setup's time goes (issue 29).
 *
 * Reads a square matrix (.npz as scipy.sparse.save_npz writes it, or a
 * Matrix Market file; tools/solve_problems.py's fv_diffusion(n) makes the
 * issue's finite-volume problem), builds the smoothed aggregation
 * hierarchy `--runs` times with the default options and prints, for the
 * last build, the setup's time split by phase (spmv_amg's phase_ms:
 * strength, aggregation, tentative prolongator, A*T, smoothing, R = P^T,
 * A*P, R*(A*P), device copies, 1/diag and rho, coarse inverse) as a
 * Markdown table, with the levels' sizes. `--gpu` runs the products on
 * GPU 0 (spmv_gpu_amg_products), the rest on the host. `--build` builds
 * the whole hierarchy on GPU 0 (spmv_gpu_amg_build, mis2 aggregation: what
 * a GPU preconditioner does since) and, after it, the host's with mis2 for
 * comparison; `--mis2` makes the host's setup aggregate with mis2.
 * `--cycles N` (with `--build`) then times N V-cycles of the device's
 * hierarchy on a random r (the seed printed), each waited for, as a
 * solve applies them: level 0 by the hierarchy's own cuSPARSE copy, then
 * by the kernel a solve lends (gpu.psell, spmv_gpu_amg_vcycle_with); the
 * last lent cycle runs between cudaProfilerStart and Stop, so `ncu
 * --profile-from-start off` lists that one cycle's kernels.
 * `--operators K1,K2,...` then times each kernel of the catalogue named
 * on the host hierarchy's operators (every level's A below level 0 but the
 * coarsest, P and R of the levels above it), uploaded to GPU 0 as float64
 * CSR: the median of 30 runs each, and the time the device took to build
 * PSELL and PCSR from the CSR, so a cycle's cuSPARSE products can be
 * weighed against the packed formats and what they cost to make. A benchmark: it asserts nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amg.h"

static int load(const char *path, spmv_csr *a, spmv_error *err)
{
    size_t n = strlen(path);
    if (n > 4 && !strcmp(path + n - 4, ".npz"))
        return spmv_npz_read_file_csr(path, NULL, a, NULL, err);
    spmv_coo coo = {0};
    int st = spmv_mm_read_file(path, NULL, &coo, NULL, err);
    if (!st)
        st = spmv_coo_to_csr(&coo, SPMV_FLOAT64, a, err);
    spmv_coo_free(&coo);
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* n V-cycles of g on a random r, each waited for, level 0 by fine (NULL:
 * the hierarchy's copy); the median ms; the last one profiled if asked. */
static int time_cycles(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_gpu_product *fine, const spmv_vec *r,
                       spmv_vec *z, int n, bool profile, double *median, spmv_error *err)
{
    double *ms = calloc((size_t)n, sizeof *ms);
    int st = ms ? SPMV_OK : spmv_error_set(err, SPMV_ERR_NOMEM, 0, "cycle times");
    for (int i = -3; !st && i < n; i++) { /* three warm-ups: the lent kernel's format, cuSPARSE's buffers */
        if (profile && i == n - 1)
            st = spmv_gpu_profile(ctx, true, err);
        double t0 = spmv_now_ms();
        if (!st && !(st = spmv_gpu_amg_vcycle_with(ctx, g, fine, r, z, err)))
            st = spmv_vec_sync(ctx, err);
        if (!st && i >= 0)
            ms[i] = spmv_now_ms() - t0;
        if (!st && profile && i == n - 1)
            st = spmv_gpu_profile(ctx, false, err);
    }
    if (!st) {
        qsort(ms, (size_t)n, sizeof *ms, cmp_double);
        *median = ms[n / 2];
    }
    free(ms);
    return st;
}

/* The V-cycle's time both ways (--cycles). */
static int cycles(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_csr *a, int n, spmv_error *err)
{
    unsigned seed = (unsigned)spmv_now_ms();
    printf("cycles: r random, seed %u\n", seed);
    srand(seed);
    double *h = malloc(sizeof(double) * (size_t)a->rows);
    spmv_vec r = {0}, z = {0};
    spmv_gpu_matrix *gm = NULL;
    spmv_params p = {{0}};
    int st = h ? SPMV_OK : spmv_error_set(err, SPMV_ERR_NOMEM, 0, "r");
    for (int32_t i = 0; !st && i < a->rows; i++)
        h[i] = rand() / (double)RAND_MAX - 0.5;
    if (!st && !(st = spmv_vec_alloc(ctx, SPMV_DEVICE_GPU, SPMV_FLOAT64, a->rows, 1, &r, err)) &&
        !(st = spmv_vec_write(ctx, &r, h, err)))
        st = spmv_vec_alloc(ctx, SPMV_DEVICE_GPU, SPMV_FLOAT64, a->rows, 1, &z, err);
    if (!st)
        st = spmv_gpu_matrix_upload_csr(ctx, a, SPMV_FLOAT64, SPMV_FMT_CSR, SPMV_HACK_SIZE_DEFAULT, &gm, NULL, err);
    spmv_gpu_product fine = {gm, spmv_kernel_find("gpu.psell"), &p};
    double own = 0, lent = 0;
    if (!st && !(st = time_cycles(ctx, g, NULL, &r, &z, n, false, &own, err)))
        st = time_cycles(ctx, g, &fine, &r, &z, n, true, &lent, err);
    if (!st)
        printf("\n| V-cycle, level 0 by | median ms of %d |\n|---|---:|\n| the hierarchy's cuSPARSE CSR | %.3f |\n"
               "| gpu.psell (lent; the last one profiled) | %.3f |\n\n", n, own, lent);
    spmv_gpu_matrix_free(ctx, gm);
    spmv_vec_free(ctx, &r);
    spmv_vec_free(ctx, &z);
    free(h);
    return st;
}

/* The whole setup on GPU 0 (spmv_gpu_amg_build): its levels and phases;
 * then n V-cycles timed (cycles) when n > 0. */
static int device_build(spmv_gpu_ctx *ctx, const spmv_csr *a, const spmv_amg_options *o, int n)
{
    spmv_error err = {0};
    spmv_gpu_amg *g = NULL;
    spmv_amg_summary s;
    int st = spmv_gpu_amg_build(ctx, a, o, SPMV_FLOAT64, &g, &s, &err);
    if (st) {
        fprintf(stderr, "amg-profile: the GPU build: %s\n", err.message);
        return st;
    }
    if (n > 0 && (st = cycles(ctx, g, a, n, &err)))
        fprintf(stderr, "amg-profile: the cycles: %s\n", err.message);
    spmv_gpu_amg_free(ctx, g);
    if (st)
        return st;
    printf("GPU build (spmv_gpu_amg_build, mis2): %d levels, operator complexity %.3f\n\n", s.nlevels,
           s.operator_complexity);
    printf("| level | rows | nnz(A) | mis2 rounds |\n|---:|---:|---:|---:|\n");
    for (int32_t l = 0; l < s.nlevels; l++)
        printf("| %d | %d | %lld | %d |\n", l, s.rows[l], (long long)s.nnz[l], s.rounds[l]);
    printf("\n| phase | ms | share |\n|---|---:|---:|\n");
    for (int p = 0; p < SPMV_AMG_PHASES; p++)
        printf("| %s | %.1f | %.1f%% |\n", spmv_amg_phase_name((spmv_amg_phase)p), s.phase_ms[p],
               100.0 * s.phase_ms[p] / s.setup_ms);
    printf("| total (setup_ms) | %.1f | |\n\n", s.setup_ms);
    return SPMV_OK;
}

/* One operator on GPU 0, every kernel of the comma list `kernels`: a row
 * of a Markdown table (median ms; y checked against cpu.csr.serial's). */
static int time_operator(spmv_gpu_ctx *ctx, const char *what, const spmv_csr *m, const char *kernels,
                         spmv_error *err)
{
    spmv_gpu_matrix *gm = NULL;
    double *x = malloc(sizeof(double) * (size_t)(m->cols > 0 ? m->cols : 1)),
           *y = malloc(sizeof(double) * (size_t)(m->rows > 0 ? m->rows : 1)),
           *ref = malloc(sizeof(double) * (size_t)(m->rows > 0 ? m->rows : 1));
    int st = x && y && ref ? SPMV_OK : spmv_error_set(err, SPMV_ERR_NOMEM, 0, "operator vectors");
    for (int32_t i = 0; !st && i < m->cols; i++)
        x[i] = rand() / (double)RAND_MAX - 0.5;
    if (!st) {
        spmv_reference(m, x, ref);
        st = spmv_gpu_matrix_upload_csr(ctx, m, SPMV_FLOAT64, SPMV_FMT_CSR, SPMV_HACK_SIZE_DEFAULT, &gm, NULL, err);
    }
    if (!st)
        printf("| %s | %d | %lld |", what, m->rows, (long long)m->nnz);
    char list[512];
    snprintf(list, sizeof list, "%s", kernels);
    for (char *save = NULL, *k = strtok_r(list, ",", &save); !st && k; k = strtok_r(NULL, ",", &save)) {
        const spmv_kernel *kk = spmv_kernel_find(k);
        spmv_stats stats;
        spmv_params p = {{0}};
        for (int32_t i = 0; i < m->rows; i++)
            y[i] = NAN;
        spmv_error kerr = {0};
        if (!kk || spmv_gpu_run(ctx, kk, gm, &p, x, y, 5, 30, &stats, &kerr)) {
            printf(" - (%s) |", kk ? kerr.message : "no such kernel");
            continue;
        }
        double worst = 0, scale = 0;
        for (int32_t i = 0; i < m->rows; i++) {
            worst = fmax(worst, fabs(y[i] - ref[i]));
            scale = fmax(scale, fabs(ref[i]));
        }
        printf(" %.4f%s |", stats.median_ms, worst <= 1e-12 * (scale > 0 ? scale : 1) ? "" : " (WRONG)");
    }
    if (!st) { /* what the packed formats cost to build from the CSR, on the device */
        spmv_gpu_usage u;
        spmv_gpu_matrix_usage(gm, &u);
        printf(" %.1f / %.1f |\n", u.convert_ms[spmv_format_index(SPMV_FMT_PSELL)],
               u.convert_ms[spmv_format_index(SPMV_FMT_PCSR)]);
    }
    spmv_gpu_matrix_free(ctx, gm);
    free(x);
    free(y);
    free(ref);
    return st;
}

/* --operators: the host hierarchy's operators, each kernel. */
static int operators(spmv_gpu_ctx *ctx, const spmv_amg *h, const char *kernels, spmv_error *err)
{
    printf("\n| operator | rows | nnz | %s | PSELL / PCSR build ms |\n|---|---:|---:|", kernels);
    for (const char *c = kernels; *c; c++)
        if (*c == ',')
            printf("---:|");
    printf("---:|---:|\n");
    int st = SPMV_OK;
    char what[32];
    for (int32_t l = 0; !st && l < h->nlevels - 1; l++) {
        if (l > 0) {
            snprintf(what, sizeof what, "A%d", l);
            st = time_operator(ctx, what, &h->lv[l].A, kernels, err);
        }
        snprintf(what, sizeof what, "R%d", l);
        if (!st)
            st = time_operator(ctx, what, &h->lv[l].R, kernels, err);
        snprintf(what, sizeof what, "P%d", l);
        if (!st)
            st = time_operator(ctx, what, &h->lv[l].P, kernels, err);
    }
    return st;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int runs = 1, ncycles = 0;
    const char *kernels = NULL;
    bool gpu = false, build = false, mis2 = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gpu"))
            gpu = true;
        else if (!strcmp(argv[i], "--build"))
            build = mis2 = true;
        else if (!strcmp(argv[i], "--mis2"))
            mis2 = true;
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cycles") && i + 1 < argc)
            ncycles = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--operators") && i + 1 < argc)
            kernels = argv[++i];
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            path = NULL, argc = 0;
    }
    if (!path || runs < 1 || ncycles < 0 || (ncycles && !build) || (kernels && !build)) {
        fprintf(stderr, "usage: amg-profile [--gpu | --build [--cycles N] [--operators K1,K2,...]] [--mis2] [--runs N] "
                        "MATRIX.npz|MATRIX.mtx\n");
        return 2;
    }
    spmv_error err = {0};
    spmv_csr a = {0};
    spmv_gpu_ctx *ctx = NULL;
    spmv_amg *h = NULL;
    int st = load(path, &a, &err);
    if (!st && (gpu || build))
        st = spmv_gpu_ctx_new(0, 0, &ctx, &err);
    spmv_amg_products prod = {spmv_gpu_amg_products, ctx};
    spmv_amg_options o;
    spmv_amg_defaults(&o);
    o.aggregation = mis2 ? SPMV_AMG_AGG_MIS2 : SPMV_AMG_AGG_STANDARD;
    for (int r = 0; !st && build && r < runs; r++)
        st = device_build(ctx, &a, &o, r == runs - 1 ? ncycles : 0);
    for (int r = 0; !st && r < runs; r++) {
        spmv_amg_free(h);
        h = NULL;
        st = spmv_amg_setup_with(&a, &o, gpu ? &prod : NULL, &h, &err);
    }
    if (st) {
        fprintf(stderr, "amg-profile: %s\n", err.message);
        goto out;
    }
    printf("%s: %d rows, %lld non-zeros, %s aggregation, products on the %s; %d levels, operator complexity %.3f\n\n",
           path, a.rows, (long long)a.nnz, mis2 ? "mis2" : "standard", gpu ? "GPU" : "host", h->nlevels,
           h->operator_complexity);
    printf("| level | rows | nnz(A) | nnz(P) |\n|---:|---:|---:|---:|\n");
    for (int32_t l = 0; l < h->nlevels; l++)
        printf("| %d | %d | %lld | %lld |\n", l, h->lv[l].A.rows, (long long)h->lv[l].A.nnz,
               (long long)h->lv[l].P.nnz);
    printf("\n| phase | ms | share |\n|---|---:|---:|\n");
    for (int p = 0; p < SPMV_AMG_PHASES; p++)
        printf("| %s | %.1f | %.1f%% |\n", spmv_amg_phase_name((spmv_amg_phase)p), h->phase_ms[p],
               100.0 * h->phase_ms[p] / h->setup_ms);
    printf("| total (setup_ms) | %.1f | |\n", h->setup_ms);
    if (kernels && (st = operators(ctx, h, kernels, &err)))
        fprintf(stderr, "amg-profile: the operators: %s\n", err.message);
out:
    spmv_amg_free(h);
    spmv_csr_free(&a);
    if (ctx)
        spmv_gpu_ctx_free(ctx);
    return st ? 1 : 0;
}
