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
 * comparison; `--mis2` makes the host's setup aggregate with mis2. A
 * benchmark: it asserts nothing.
 */
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

/* The whole setup on GPU 0 (spmv_gpu_amg_build): its levels and phases. */
static int device_build(spmv_gpu_ctx *ctx, const spmv_csr *a, const spmv_amg_options *o)
{
    spmv_error err = {0};
    spmv_gpu_amg *g = NULL;
    spmv_amg_summary s;
    int st = spmv_gpu_amg_build(ctx, a, o, SPMV_FLOAT64, &g, &s, &err);
    if (st) {
        fprintf(stderr, "amg-profile: the GPU build: %s\n", err.message);
        return st;
    }
    spmv_gpu_amg_free(ctx, g);
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

int main(int argc, char **argv)
{
    const char *path = NULL;
    int runs = 1;
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
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            path = NULL, argc = 0;
    }
    if (!path || runs < 1) {
        fprintf(stderr, "usage: amg-profile [--gpu | --build] [--mis2] [--runs N] MATRIX.npz|MATRIX.mtx\n");
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
        st = device_build(ctx, &a, &o);
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
out:
    spmv_amg_free(h);
    spmv_csr_free(&a);
    if (ctx)
        spmv_gpu_ctx_free(ctx);
    return st ? 1 : 0;
}
