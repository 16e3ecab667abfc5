/* bench-gpu.c — the GPU benchmark report (`make bench-gpu`, issue 5).
 *
 * One run measures, on GPU 0 and in this order:
 *   1. the device-to-device copy bandwidth (cudaMemcpy of a 2 GiB buffer,
 *      bytes read + written, median of 20), the ceiling every kernel's GB/s
 *      is compared with;
 *   2. the large set: five seeded generated matrices (engine/gen.c) of
 *      0.7-1.6 GB of CSR each in float64, many times the 50 MB L2, built in
 *      memory; then every matrix of the real set (small: the launch-bound
 *      regime). For each matrix x dtype the matrix is uploaded once and
 *      every GPU SpMV kernel of the registry runs with its parameter sweep
 *      (block sizes 32..1024, hack sizes, cuSPARSE algorithms, lanes per
 *      row, and beside each study's form the project's variant: gpu.hll
 *      x_cache 2, gpu.hyb launches 2, gpu.csr.adaptive row_blocks 2, gpu.psell
 *      patterns 2 (no slice patterns);
 *      gpu.coo.scoo's lanes 1..32): median (--stat mean: mean) of >= 50 timed runs after warm-up
 *      (spmv_gpu_run, CUDA events
 *      around each launch), y checked against spmv_reference; `auto` tunes
 *      (engine/tune.c) and its choice is timed like the others.
 *   3. per matrix the best verified kernel, and the geometric mean over the
 *      large set of best cuSPARSE time / best time, per dtype.
 * The reference is "best cuSPARSE": the fastest verified of everything
 * cuSPARSE offers here (CSR ALG1 and ALG2, COO ALG1 and ALG2, SELL at slice
 * heights 16, 32 and 64), all run first on each matrix; every ratio is
 * against it (issue 14: beating ALG1 alone is not beating cuSPARSE). Each
 * row also shows its physical floor: the kernel's own bytes at the copy
 * bandwidth of step 1.
 * Bytes of a kernel = the arrays of its format as held on the device + x
 * once + y once (spmv_stats.gbps). It prints markdown and, with --csv, one
 * line per timed kernel for tools/plot-bench.py. It asserts nothing about
 * speed; the exit status is non-zero only if something could not run or a
 * kernel's y disagreed with the reference (such rows are marked FAIL).
 */
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spmv.h"

#ifdef SPMV_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* ------------------------------------------------------------- options */

typedef struct bench_opts {
    int32_t runs, warmup;
    uint64_t seed;
    double scale;           /* multiplies the generated sizes */
    const char *only;       /* matrices whose name holds this */
    const char *real_dir;   /* NULL: no real matrices */
    const char *csv;        /* per-kernel lines for the plots */
    double deadline_s;      /* stop starting new matrices past this */
    int quick;              /* fewer block sizes */
    spmv_stat stat;         /* the time of a row (median or mean of its runs) */
} bench_opts;

static void usage(FILE *to)
{
    fprintf(to, "usage: bench-gpu [--runs N] [--warmup N] [--seed S] [--scale F] [--only NAME]\n"
                "                 [--real DIR | --no-real] [--csv FILE] [--deadline S] [--quick] [--stat S]\n"
                "  --runs      timed runs per kernel configuration (default 50)\n"
                "  --stat      median or mean: the statistic of the runs each row's time and\n"
                "              GB/s come from (default median)\n"
                "  --scale     multiplies the generated matrix sizes (default 1)\n"
                "  --real      folder of Matrix Market files (default $SPMV_ROOT/../shared/matrices/real)\n"
                "  --deadline  seconds after which no further matrix is started (default 300)\n"
                "  --quick     block size 256 only\n");
}

static int parse_opts(int argc, char **argv, bench_opts *o, char *real_buf, size_t real_len)
{
    static const struct option lo[] = {
        {"runs", required_argument, 0, 'r'},  {"warmup", required_argument, 0, 'w'},
        {"seed", required_argument, 0, 's'},  {"scale", required_argument, 0, 'x'},
        {"only", required_argument, 0, 'o'},  {"real", required_argument, 0, 'R'},
        {"no-real", no_argument, 0, 'N'},     {"csv", required_argument, 0, 'c'},
        {"deadline", required_argument, 0, 'd'}, {"quick", no_argument, 0, 'q'},
        {"stat", required_argument, 0, 'S'},  {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *root = getenv("SPMV_ROOT");
    *o = (bench_opts){50, 5, 20261122, 1.0, NULL, NULL, NULL, 300, 0, SPMV_STAT_MEDIAN};
    snprintf(real_buf, real_len, "%s/../shared/matrices/real", root ? root : ".");
    o->real_dir = real_buf;
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'r': o->runs = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 's': o->seed = strtoull(optarg, NULL, 10); break;
        case 'x': o->scale = atof(optarg); break;
        case 'o': o->only = optarg; break;
        case 'R': o->real_dir = optarg; break;
        case 'N': o->real_dir = NULL; break;
        case 'c': o->csv = optarg; break;
        case 'd': o->deadline_s = atof(optarg); break;
        case 'q': o->quick = 1; break;
        case 'S':
            if (spmv_stat_parse(optarg, &o->stat) != SPMV_OK) {
                fprintf(stderr, "bench-gpu: --stat takes median or mean, not '%s'\n", optarg);
                return -1;
            }
            break;
        case 'h': usage(stdout); exit(0);
        default: return -1;
        }
    }
    if (o->runs < 1 || o->runs > 100000 || o->warmup < 0 || o->warmup > 1000 || !(o->scale > 0) ||
        o->scale > 4)
        return -1;
    return 0;
}

/* ------------------------------------------------------ copy bandwidth */

/* Device-to-device copy of a 2 GiB buffer, bytes read + written, median
 * of 20 copies after 3 warm-up ones. 0 when CUDA is absent or fails. */
static double copy_bandwidth(void)
{
#ifdef SPMV_HAVE_CUDA
    size_t bytes = (size_t)1 << 31;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double t[20], gbps = 0;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaMemset(a, 0x3c, bytes) != cudaSuccess || cudaEventCreate(&e0) != cudaSuccess ||
        cudaEventCreate(&e1) != cudaSuccess)
        goto done;
    for (int i = 0; i < 23; i++) {
        float ms = 0;
        cudaEventRecord(e0, 0);
        cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1, 0);
        if (cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
            goto done;
        if (i >= 3)
            t[i - 3] = ms;
    }
    for (int i = 1; i < 20; i++) /* insertion sort: 20 values */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double s = t[j];
            t[j] = t[j - 1];
            t[j - 1] = s;
        }
    gbps = 2.0 * (double)bytes / ((t[9] + t[10]) / 2.0 * 1e-3) / 1e9;
done:
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return gbps;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------ matrices */

typedef struct bench_matrix {
    char name[96];
    int large;              /* counts in the geometric mean */
    spmv_gen_spec spec;     /* generated, or: */
    char path[512];         /* read from a file */
} bench_matrix;

#define MAX_MATRICES 64

static size_t large_set(double scale, uint64_t seed, bench_matrix *set)
{
    int64_t p2 = (int64_t)(4096 * sqrt(scale)), p3 = (int64_t)(256 * cbrt(scale));
    int64_t s27 = (int64_t)(160 * cbrt(scale)) > 1 ? (int64_t)(160 * cbrt(scale)) : 1;
    int64_t n4 = (int64_t)(4000000 * scale) > 1 ? (int64_t)(4000000 * scale) : 1;
    int64_t d2 = (int64_t)(2000000 * scale) > 1 ? (int64_t)(2000000 * scale) : 1;
    bench_matrix g[] = {
        {"poisson2d_4096", 1, {SPMV_GEN_POISSON2D, p2, 0, 0, seed}, ""},
        {"poisson3d_256", 1, {SPMV_GEN_POISSON3D, p3, 0, 0, seed}, ""},
        {"uniform_4M_x32", 1, {SPMV_GEN_UNIFORM, n4, 32, 0, seed}, ""},
        {"powerlaw_4M", 1, {SPMV_GEN_POWERLAW, n4, 16, 0, seed}, ""},
        {"banded_dense_row_4M", 1, {SPMV_GEN_BANDED_DENSE_ROW, n4, 14, d2, seed}, ""},
        /* issue 14: what people upload beside PDE matrices */
        {"stencil27_160", 1, {SPMV_GEN_STENCIL27, s27, 0, 0, seed}, ""},
        {"graph_uniform_4M_x32", 1, {SPMV_GEN_GRAPH_UNIFORM, n4, 32, 0, seed}, ""},
        {"graph_powerlaw_4M", 1, {SPMV_GEN_GRAPH_POWERLAW, n4, 16, 0, seed}, ""},
    };
    memcpy(set, g, sizeof g);
    return sizeof g / sizeof g[0];
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int cmp_matrix_name(const void *a, const void *b)
{
    return strcmp(((const bench_matrix *)a)->name, ((const bench_matrix *)b)->name);
}

static size_t real_set(const char *dir, bench_matrix *set, size_t room)
{
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *de;
    size_t n = 0;
    if (!d)
        return 0;
    while ((de = readdir(d)) && n < room) {
        if (!has_suffix(de->d_name, ".mtx") && !has_suffix(de->d_name, ".mtx.gz"))
            continue;
        memset(&set[n], 0, sizeof set[n]);
        snprintf(set[n].name, sizeof set[n].name, "%.*s", (int)(strcspn(de->d_name, ".")), de->d_name);
        snprintf(set[n].path, sizeof set[n].path, "%s/%s", dir, de->d_name);
        n++;
    }
    closedir(d);
    qsort(set, n, sizeof *set, cmp_matrix_name);
    return n;
}

static int load_matrix(const bench_matrix *bm, spmv_coo *coo, spmv_error *err)
{
    if (bm->path[0])
        return spmv_mm_read_file(bm->path, NULL, coo, NULL, err);
    return spmv_gen(&bm->spec, coo, err);
}

/* ------------------------------------------------------------- vectors */


/* ------------------------------------------------------------- configs */

typedef struct config {
    const spmv_kernel *k;
    spmv_params p;
} config;

#define MAX_CONFIGS 256

/* Where a configuration the sweep does not run is reported, with the
 * reason (the registry's refusal): stdout once before the table, NULL
 * while the sweep is rebuilt per matrix. */
static FILE *skip_notes;

static void add_config(config *c, size_t *n, const spmv_kernel *k, spmv_param_id id, int32_t v)
{
    spmv_error err = {0};
    if (*n >= MAX_CONFIGS) {
        if (skip_notes)
            fprintf(skip_notes, "- `%s` %s %d: not run, past the sweep's %d configurations\n", k->name,
                    id < SPMV_PARAM_COUNT ? spmv_param_get(id)->name : "default", v, MAX_CONFIGS);
        return;
    }
    memset(&c[*n], 0, sizeof c[*n]);
    c[*n].k = k;
    if (id < SPMV_PARAM_COUNT)
        c[*n].p.v[id] = v;
    if (spmv_params_resolve(k, &c[*n].p, NULL, &err) == SPMV_OK)
        (*n)++;
    else if (skip_notes)
        fprintf(skip_notes, "- `%s` %s %d: not run: %s\n", k->name,
                id < SPMV_PARAM_COUNT ? spmv_param_get(id)->name : "default", v, err.message);
}

static int is_cusparse(const spmv_kernel *k) { return strncmp(k->name, "cusparse.", 9) == 0; }

static void sweep_kernel(const bench_opts *o, config *c, size_t *n, const spmv_kernel *k);

/* The sweep: cuSPARSE's configurations first (cusparse.csr ALG1 leading),
 * so "best cuSPARSE", which every ratio is against, is known before the
 * others run; *ncusp says how many they are. */
static size_t sweep(const bench_opts *o, config *c, size_t *ncusp)
{
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < spmv_kernel_count(); i++) {
            const spmv_kernel *k = spmv_kernel_at(i);
            if (k->device != SPMV_DEVICE_GPU || k->op != SPMV_OP_SPMV || spmv_kernel_is_auto(k) ||
                is_cusparse(k) != (pass == 0))
                continue;
            sweep_kernel(o, c, &n, k);
        }
        if (pass == 0)
            *ncusp = n;
    }
    return n;
}

/* One kernel: block sizes 32..1024 at the other defaults, then each
 * other parameter's values at block size 256. Every kernel that takes
 * block_size accepts all six (the registry's range is 32..1024 in
 * multiples of 32, and no launch needs more than one warp a block:
 * gpu.csr.adaptive's block reduction and gpu.coo.sliced's shared slice
 * scale with the block, test_gpu runs each kernel at 32 and 1024); one
 * the registry refuses is listed with its reason before the table. */
static void sweep_kernel(const bench_opts *o, config *c, size_t *np, const spmv_kernel *k)
{
    static const int32_t bs[] = {32, 64, 128, 256, 512, 1024}, hack[] = {16, 32, 64}, lanes[] = {1, 2, 4, 8, 16, 32};
    size_t n = *np;
    unsigned ps = k->params;
    if (ps & (1u << SPMV_PARAM_ALG)) /* ALG1 by name: cusparse.csr ALG1 is the first row, the old baseline */
        add_config(c, &n, k, SPMV_PARAM_ALG, 1);
    else if (!(ps & (1u << SPMV_PARAM_BLOCK_SIZE)))
        add_config(c, &n, k, SPMV_PARAM_COUNT, 0);
    else
        for (size_t b = 0; b < sizeof bs / sizeof *bs; b++)
            if (!o->quick || bs[b] == 256)
                add_config(c, &n, k, SPMV_PARAM_BLOCK_SIZE, bs[b]);
    if (ps & (1u << SPMV_PARAM_HACK_SIZE))
        for (size_t h = 0; h < sizeof hack / sizeof *hack; h++)
            if (hack[h] != 32)
                add_config(c, &n, k, SPMV_PARAM_HACK_SIZE, hack[h]);
    if (ps & (1u << SPMV_PARAM_ALG))
        add_config(c, &n, k, SPMV_PARAM_ALG, 2);
    if (ps & (1u << SPMV_PARAM_THREADS))
        for (size_t t = 0; t < sizeof lanes / sizeof *lanes; t++)
            add_config(c, &n, k, SPMV_PARAM_THREADS, lanes[t]);
    /* the project's own variants beside the studies' forms (the defaults) */
    if (ps & (1u << SPMV_PARAM_X_CACHE))
        add_config(c, &n, k, SPMV_PARAM_X_CACHE, 2);
    if (ps & (1u << SPMV_PARAM_LAUNCHES))
        add_config(c, &n, k, SPMV_PARAM_LAUNCHES, 2);
    if (ps & (1u << SPMV_PARAM_ROW_BLOCKS))
        add_config(c, &n, k, SPMV_PARAM_ROW_BLOCKS, 2);
    if (ps & (1u << SPMV_PARAM_LANES))
        for (size_t t = 0; t < sizeof lanes / sizeof *lanes; t++)
            if (lanes[t] != 4)
                add_config(c, &n, k, SPMV_PARAM_LANES, lanes[t]);
    if (ps & (1u << SPMV_PARAM_PATTERNS)) /* gpu.psell without its slice patterns, beside the default */
        add_config(c, &n, k, SPMV_PARAM_PATTERNS, 2);
    *np = n;
}

/* ------------------------------------------------------------- results */

typedef struct outcome {
    double ms, gbps, err;
    int ok, ran;
    int32_t runs;
} outcome;

typedef struct summary {
    char matrix[96];
    spmv_dtype dt;
    int large;
    double alg1_ms, best_ms, auto_ms, cusp_ms; /* cusp: best cuSPARSE */
    char best[192], auto_pick[320], cusp[192];
} summary;

/* An HLL of a heavy-tailed matrix pads each slice to its longest row (the
 * power-law one would take tens of GB); past this it is skipped. */
#define HLL_BUDGET_BYTES ((int64_t)8 << 30)

static int64_t hll_bytes(const spmv_csr *a, int32_t hack)
{
    int64_t slots = 0;
    for (int64_t r0 = 0; r0 < a->rows; r0 += hack) {
        int64_t r1 = r0 + hack < a->rows ? r0 + hack : a->rows, w = 0;
        for (int64_t r = r0; r < r1; r++)
            if (a->row_ptr[r + 1] - a->row_ptr[r] > w)
                w = a->row_ptr[r + 1] - a->row_ptr[r];
        slots += w * hack;
    }
    return slots * (int64_t)(4 + spmv_dtype_size(a->dtype));
}

typedef struct run_ctx {
    spmv_gpu_ctx *ctx;
    spmv_gpu_matrix *gm;
} run_ctx;

static int run_gpu(void *c, const spmv_kernel *k, const spmv_params *p, const void *x, void *y, int32_t warmup,
                   int32_t runs, spmv_stats *st, spmv_error *err)
{
    run_ctx *r = c;
    return spmv_gpu_run(r->ctx, k, r->gm, p, x, y, warmup, runs, st, err);
}

/* Times one configuration: a probe (one warm-up, one timed run, y
 * checked), then warm-up + timed runs. A configuration slower than 5 ms
 * gets 5 timed runs, one slower than 20 ms only the probe: such rows say
 * "runs reduced" (the row-per-thread kernels on a 2 M-entry row take a
 * second a run, and would eat the device time of the whole benchmark). */
static void time_config(const bench_opts *o, run_ctx *rc, const config *c, const spmv_csr *a, const void *x,
                        void *y, const void *ref, double bound, outcome *out, char *why, size_t why_len)
{
    spmv_stats st;
    spmv_error err = {0};
    int32_t runs = a->nnz < 100000 ? 4 * o->runs : o->runs;
    size_t ybytes = (size_t)(a->rows > 0 ? a->rows : 1) * spmv_dtype_size(a->dtype);
    memset(out, 0, sizeof *out);
    memset(y, 0xff, ybytes);
    if (spmv_gpu_run(rc->ctx, c->k, rc->gm, &c->p, x, y, 1, 1, &st, &err) != SPMV_OK) {
        snprintf(why, why_len, "%s", err.message);
        return;
    }
    if (st.median_ms <= 20.0) {
        if (st.median_ms > 5.0)
            runs = 5;
        memset(y, 0xff, ybytes);
        if (spmv_gpu_run(rc->ctx, c->k, rc->gm, &c->p, x, y, st.median_ms > 5.0 ? 1 : o->warmup, runs, &st, &err) !=
            SPMV_OK) {
            snprintf(why, why_len, "%s", err.message);
            return;
        }
    } else {
        runs = 1;
    }
    spmv_stats_use(&st, o->stat);
    out->ran = 1;
    out->runs = runs;
    out->ms = spmv_stats_ms(&st, o->stat);
    out->gbps = st.gbps;
    out->err = spmv_max_rel_err(a->dtype, y, ref, a->rows);
    out->ok = out->err <= bound;
}

/* The physical floor of a run: its own bytes (format + x + y, as GB/s
 * counts them) at the copy bandwidth. */
static double floor_ms(const outcome *r, double copy) { return copy > 0 ? r->ms * r->gbps / copy : 0; }

static void print_row(FILE *csv, const bench_matrix *bm, spmv_dtype dt, const config *c, const outcome *r,
                      double copy, double alg1, double cusp, const bench_opts *o, const char *why)
{
    char ps[128];
    spmv_params_format(c->k, &c->p, ps, sizeof ps);
    printf("| %s | %s | %s | %s |", bm->name, spmv_dtype_name(dt), c->k->name, ps[0] ? ps : "default");
    if (!r->ran) {
        printf(" skipped: %s | | | | | | |\n", why);
        return;
    }
    printf(" %.4f | %.4f | %.0f | %.0f%% | %.2fx | %.1e%s |%s\n", r->ms, floor_ms(r, copy), r->gbps,
           copy > 0 ? 100.0 * r->gbps / copy : 0, cusp > 0 ? cusp / r->ms : 0, r->err, r->ok ? "" : " FAIL",
           r->runs < o->runs ? " runs reduced (slow)" : "");
    if (csv)
        fprintf(csv, "%s,%s,%s,%s,%.6f,%.2f,%.4f,%.4f,%.3e,%s,%.4f,%.6f\n", bm->name, spmv_dtype_name(dt), c->k->name,
                ps[0] ? ps : "default", r->ms, r->gbps, copy > 0 ? r->gbps / copy : 0, alg1 > 0 ? alg1 / r->ms : 0,
                r->err, r->ok ? "ok" : "FAIL", cusp > 0 ? cusp / r->ms : 0, floor_ms(r, copy));
    fflush(stdout);
}

/* `auto` on this matrix: tune, then time the winner like the others. */
static void bench_auto(const bench_opts *o, run_ctx *rc, const bench_matrix *bm, const spmv_csr *a, const void *x,
                       void *y, const void *ref, double bound, double copy, summary *sm, FILE *csv, int *fails)
{
    spmv_tune_options to = {SPMV_DEVICE_GPU, 5000, 0, 10, o->seed, 1, 0};
    spmv_tune_result tr;
    spmv_error err = {0};
    config c;
    outcome r;
    char why[512] = "", ps[128];
    if (spmv_tune(a, &to, run_gpu, rc, &tr, &err) != SPMV_OK) {
        printf("| %s | %s | auto | | skipped: %s | | | | | | |\n", bm->name, spmv_dtype_name(a->dtype), err.message);
        return;
    }
    c.k = tr.kernel;
    c.p = tr.params;
    time_config(o, rc, &c, a, x, y, ref, bound, &r, why, sizeof why);
    spmv_params_format(tr.kernel, &tr.params, ps, sizeof ps);
    snprintf(sm->auto_pick, sizeof sm->auto_pick, "%s %s (tuned in %.0f ms, %d runs, %d/%d timed)", tr.kernel->name,
             ps, tr.cost_ms, tr.runs, tr.timed, tr.candidates);
    printf("| %s | %s | **auto** → %s | %s |", bm->name, spmv_dtype_name(a->dtype), tr.kernel->name,
           ps[0] ? ps : "default");
    if (!r.ran) {
        printf(" skipped: %s | | | | | | |\n", why);
        return;
    }
    printf(" %.4f | %.4f | %.0f | %.0f%% | %.2fx | %.1e%s | tuning %.0f ms, %d runs\n", r.ms, floor_ms(&r, copy),
           r.gbps, copy > 0 ? 100.0 * r.gbps / copy : 0, sm->cusp_ms > 0 ? sm->cusp_ms / r.ms : 0, r.err,
           r.ok ? "" : " FAIL", tr.cost_ms, tr.runs);
    if (csv)
        fprintf(csv, "%s,%s,auto,%s %s,%.6f,%.2f,%.4f,%.4f,%.3e,%s,%.4f,%.6f\n", bm->name, spmv_dtype_name(a->dtype),
                tr.kernel->name, ps, r.ms, r.gbps, copy > 0 ? r.gbps / copy : 0,
                sm->alg1_ms > 0 ? sm->alg1_ms / r.ms : 0, r.err, r.ok ? "ok" : "FAIL",
                sm->cusp_ms > 0 ? sm->cusp_ms / r.ms : 0, floor_ms(&r, copy));
    *fails += !r.ok;
    if (r.ok)
        sm->auto_ms = r.ms;
}

/* Every configuration on one matrix in one dtype. */
static int bench_dtype(const bench_opts *o, spmv_gpu_ctx *ctx, const bench_matrix *bm, const spmv_coo *coo,
                       spmv_dtype dt, double copy, summary *sm, FILE *csv, int *fails)
{
    static config cfg[MAX_CONFIGS];
    spmv_matrix m;
    spmv_error err = {0};
    spmv_gpu_upload_stats us;
    run_ctx rc = {ctx, NULL};
    void *x = NULL, *y = NULL, *ref = NULL;
    static outcome res[MAX_CONFIGS];
    static char whys[MAX_CONFIGS][512];
    size_t ncusp = 0, vs = spmv_dtype_size(dt), n = sweep(o, cfg, &ncusp);
    int rc_ = -1;
    memset(&m, 0, sizeof m);
    memset(sm, 0, sizeof *sm);
    snprintf(sm->matrix, sizeof sm->matrix, "%s", bm->name);
    sm->dt = dt;
    sm->large = bm->large;
    if (spmv_matrix_build(coo, dt, SPMV_FMT_CSR, SPMV_HACK_SIZE_DEFAULT, 0, &m, &err) != SPMV_OK)
        goto fail;
    x = malloc((size_t)(m.cols > 0 ? m.cols : 1) * vs);
    y = malloc((size_t)(m.rows > 0 ? m.rows : 1) * vs);
    ref = malloc((size_t)(m.rows > 0 ? m.rows : 1) * vs);
    if (!x || !y || !ref)
        goto fail;
    spmv_random_vector(dt, m.cols, o->seed ^ 0x5eedull, x);
    spmv_reference(&m.csr, x, ref);
    double t0 = spmv_now_ms();
    if (spmv_gpu_matrix_upload(ctx, coo, dt, SPMV_FMT_CSR, SPMV_HACK_SIZE_DEFAULT, &rc.gm, &us, &err) != SPMV_OK)
        goto fail;
    fprintf(stderr, "bench-gpu: %s %s uploaded in %.0f ms\n", bm->name, spmv_dtype_name(dt), spmv_now_ms() - t0);
    int32_t max_row = 0;
    for (int32_t r = 0; r < m.rows; r++)
        if (m.csr.row_ptr[r + 1] - m.csr.row_ptr[r] > max_row)
            max_row = m.csr.row_ptr[r + 1] - m.csr.row_ptr[r];
    /* summation order differs between kernels (atomics, chunks) */
    double bound = (dt == SPMV_FLOAT32 ? 1e-3 : 1e-10) * fmax(1.0, sqrt(max_row / 100.0));
    int hll_ok = hll_bytes(&m.csr, 16) <= HLL_BUDGET_BYTES;
    for (size_t i = 0; i < n; i++) {
        outcome *r = &res[i];
        char *why = whys[i];
        why[0] = '\0';
        if (cfg[i].k->format == SPMV_FMT_HLL && !hll_ok) {
            memset(r, 0, sizeof *r);
            snprintf(why, sizeof whys[i], "HLL over the %.0f GB budget (%.1f GB at hack 16)",
                     (double)HLL_BUDGET_BYTES / 1e9, (double)hll_bytes(&m.csr, 16) / 1e9);
        } else {
            time_config(o, &rc, &cfg[i], &m.csr, x, y, ref, bound, r, why, sizeof whys[i]);
        }
        if (i == 0 && r->ran && r->ok)
            sm->alg1_ms = r->ms;
        *fails += r->ran && !r->ok;
        char ps[128];
        spmv_params_format(cfg[i].k, &cfg[i].p, ps, sizeof ps);
        if (i < ncusp && r->ran && r->ok && (sm->cusp_ms <= 0 || r->ms < sm->cusp_ms)) {
            sm->cusp_ms = r->ms;
            snprintf(sm->cusp, sizeof sm->cusp, "%s %s", cfg[i].k->name, ps);
        }
        if (r->ran && r->ok && (sm->best_ms <= 0 || r->ms < sm->best_ms)) {
            sm->best_ms = r->ms;
            snprintf(sm->best, sizeof sm->best, "%s %s", cfg[i].k->name, ps);
        }
        /* cuSPARSE's rows wait until the best of them is known */
        if (i + 1 == ncusp)
            for (size_t j = 0; j < ncusp; j++)
                print_row(csv, bm, dt, &cfg[j], &res[j], copy, sm->alg1_ms, sm->cusp_ms, o, whys[j]);
        else if (i >= ncusp)
            print_row(csv, bm, dt, &cfg[i], r, copy, sm->alg1_ms, sm->cusp_ms, o, why);
    }
    bench_auto(o, &rc, bm, &m.csr, x, y, ref, bound, copy, sm, csv, fails);
    rc_ = 0;
fail:
    if (rc_)
        fprintf(stderr, "bench-gpu: %s %s: %s\n", bm->name, spmv_dtype_name(dt), err.message);
    spmv_gpu_matrix_free(ctx, rc.gm);
    free(x);
    free(y);
    free(ref);
    spmv_matrix_free(&m);
    return rc_;
}

/* The sweep once, before the table, listing each configuration it leaves
 * out and why (add_config); a line says so when it leaves out none. */
static void print_left_out(const bench_opts *o)
{
    static config probe[MAX_CONFIGS];
    size_t ncusp = 0;
    char *notes = NULL;
    size_t len = 0;
    skip_notes = open_memstream(&notes, &len);
    sweep(o, probe, &ncusp);
    if (skip_notes)
        fclose(skip_notes);
    skip_notes = NULL;
    if (notes && len)
        printf("Configurations the sweep leaves out:\n\n%s\n", notes);
    else
        printf("The sweep runs every block size 32..1024 of every kernel taking one%s.\n\n",
               o->quick ? " (--quick: 256 only)" : "");
    free(notes);
}

/* ------------------------------------------------------------- summary */

static void print_summary(const summary *s, size_t n)
{
    printf("\n## Best kernel per matrix (ratio = best cuSPARSE time / time)\n\n"
           "| matrix | dtype | ALG1 ms | best cuSPARSE | best cuSPARSE ms | best kernel | best ms | best / best cuSPARSE | "
           "auto picked | auto ms | auto / best cuSPARSE |\n"
           "| --- | --- | ---: | --- | ---: | --- | ---: | ---: | --- | ---: | ---: |\n");
    for (size_t i = 0; i < n; i++)
        printf("| %s | %s | %.4f | %s | %.4f | %s | %.4f | %.2fx | %s | %.4f | %.2fx |\n", s[i].matrix,
               spmv_dtype_name(s[i].dt), s[i].alg1_ms, s[i].cusp, s[i].cusp_ms, s[i].best, s[i].best_ms,
               s[i].best_ms > 0 ? s[i].cusp_ms / s[i].best_ms : 0, s[i].auto_pick, s[i].auto_ms,
               s[i].auto_ms > 0 ? s[i].cusp_ms / s[i].auto_ms : 0);
    printf("\n## Geometric mean over the large set (against best cuSPARSE)\n\n"
           "| dtype | matrices | best / best cuSPARSE | auto / best cuSPARSE | auto min |\n"
           "| --- | ---: | ---: | ---: | ---: |\n");
    for (int d = 0; d < 2; d++) {
        double lb = 0, la = 0, amin = 1e30;
        int cnt = 0, acnt = 0;
        for (size_t i = 0; i < n; i++) {
            if (!s[i].large || (int)s[i].dt != d || s[i].cusp_ms <= 0 || s[i].best_ms <= 0)
                continue;
            lb += log(s[i].cusp_ms / s[i].best_ms);
            cnt++;
            if (s[i].auto_ms > 0) {
                la += log(s[i].cusp_ms / s[i].auto_ms);
                amin = fmin(amin, s[i].cusp_ms / s[i].auto_ms);
                acnt++;
            }
        }
        printf("| %s | %d | %.3fx | %.3fx | %.3fx |\n", spmv_dtype_name((spmv_dtype)d), cnt, cnt ? exp(lb / cnt) : 0,
               acnt ? exp(la / acnt) : 0, acnt ? amin : 0);
    }
}

int main(int argc, char **argv)
{
    bench_opts o;
    char real_buf[512];
    static bench_matrix set[MAX_MATRICES];
    static summary sums[2 * MAX_MATRICES];
    size_t nset, nsum = 0;
    spmv_gpu_ctx *ctx = NULL;
    spmv_gpu_info info;
    spmv_error err = {0};
    const char *why = NULL;
    FILE *csv = NULL;
    int fails = 0, rc = 1;
    double t0 = spmv_now_ms(), copy;
    time_t now = time(NULL);

    if (parse_opts(argc, argv, &o, real_buf, sizeof real_buf) != 0) {
        usage(stderr);
        return 2;
    }
    if (spmv_gpu_count(&why) <= 0) {
        fprintf(stderr, "bench-gpu: needs a GPU: %s\n", why ? why : "none found");
        return 3;
    }
    if (spmv_gpu_ctx_new(0, 0, &ctx, &err) != SPMV_OK || spmv_gpu_ctx_info(ctx, &info) != SPMV_OK) {
        fprintf(stderr, "bench-gpu: %s\n", err.message);
        goto done;
    }
    if (o.csv && !(csv = fopen(o.csv, "w"))) {
        perror(o.csv);
        goto done;
    }
    if (csv)
        fprintf(csv, "matrix,dtype,kernel,params,%s_ms,gbps,frac_copy,vs_alg1,max_rel_err,status,vs_best_cusparse,"
                "floor_ms\n", spmv_stat_name(o.stat));
    copy = copy_bandwidth();
    printf("# spmvd GPU benchmark\n\n%s, GPU 0: %s (cc %d.%d, %d SMs, %.0f GiB), %s", SPMV_VERSION, info.name,
           info.cc_major, info.cc_minor, info.sm_count, (double)info.mem_total / 1073741824.0, ctime(&now));
    printf("\nDevice-to-device copy (2 GiB, read + write): **%.0f GB/s**\n\n", copy);
    printf("The %s of %d timed runs after %d warm-up (4x the runs under 100k non-zeros); seed %" PRIu64
           ", scale %g. Ratio = best cuSPARSE time / time (> 1: faster than every cuSPARSE format and algorithm "
           "tried on that matrix: CSR ALG1/ALG2, COO ALG1/ALG2, SELL 16/32/64); floor = the kernel's own bytes "
           "at the copy bandwidth.\n\n",
           spmv_stat_name(o.stat), o.runs, o.warmup, o.seed, o.scale);
    print_left_out(&o);
    nset = large_set(o.scale, o.seed, set);
    nset += real_set(o.real_dir, set + nset, MAX_MATRICES - nset);
    printf("| matrix | dtype | kernel | params | %s ms | floor ms | GB/s | %% of copy | vs best cuSPARSE | max rel err | "
           "note |\n| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n", spmv_stat_name(o.stat));
    for (size_t i = 0; i < nset; i++) {
        spmv_coo coo;
        if (o.only && !strstr(set[i].name, o.only))
            continue;
        if ((spmv_now_ms() - t0) / 1000.0 > o.deadline_s) {
            printf("| %s | | | | not run: past the %.0f s deadline | | | | | | |\n", set[i].name, o.deadline_s);
            continue;
        }
        if (load_matrix(&set[i], &coo, &err) != SPMV_OK) {
            fprintf(stderr, "bench-gpu: %s: %s\n", set[i].name, err.message);
            goto done;
        }
        fprintf(stderr, "bench-gpu: %s: %d x %d, %" PRId64 " nnz\n", set[i].name, coo.rows, coo.cols, coo.nnz);
        for (int d = 0; d < 2; d++)
            if (bench_dtype(&o, ctx, &set[i], &coo, (spmv_dtype)d, copy, &sums[nsum], csv, &fails) == 0)
                nsum++;
        spmv_coo_free(&coo);
    }
    print_summary(sums, nsum);
    printf("\nTotal run time %.0f s; %d verification failures.\n", (spmv_now_ms() - t0) / 1000.0, fails);
    rc = fails ? 1 : 0;
done:
    if (csv)
        fclose(csv);
    spmv_gpu_ctx_free(ctx);
    return rc;
}
