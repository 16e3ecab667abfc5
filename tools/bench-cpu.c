/* bench-cpu.c — the CPU benchmark report (`make bench-cpu`).
 *
 * One run measures, on this machine and in this order:
 *   1. the memory bandwidth, with an OpenMP STREAM triad a[i] = b[i] + s*c[i]
 *      over arrays larger than the last-level cache (3 arrays x 8 bytes
 *      counted per element, best of several passes, as STREAM reports it);
 *   2. every CPU kernel of the registry, float64 and float32, on a set of
 *      seeded generated matrices (engine/gen.c) built in memory, most of
 *      them several times the size of the LLC: median (--stat mean: mean)
 *      of >= 20 timed runs after a fixed warm-up (spmv_cpu_run), each y
 *      checked against cpu.csr.serial. Each kernel taking `threads` runs
 *      at every count of the sweep (default 1..the OpenMP threads), and
 *      cpu.hll.omp at every hack size crossed with them; every row has its
 *      speedup over cpu.csr.serial and its efficiency, that speedup per
 *      thread (the studies' measure, not the kernel against itself at one
 *      thread);
 *   3. the Matrix Market reader's throughput on a generated file of at least
 *      150 MB, with one parsing thread and with all cores.
 * It prints markdown (the tables docs/benchmarks/cpu.md is made from) and
 * asserts nothing: a missed goal is reported, never an error. The exit
 * status is non-zero only when something could not run at all or a kernel's
 * result disagrees with the reference.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spmv.h"

/* ------------------------------------------------------------- options */

#define MAX_SWEEP 64

typedef struct bench_opts {
    int32_t runs, warmup;
    spmv_stat stat;      /* the statistic of a row's time, rates and ratios */
    int32_t threads[MAX_SWEEP], hack_sizes[MAX_SWEEP];
    int nthreads, nhack_sizes;
    uint64_t seed;
    double scale;        /* multiplies the matrix sizes (quick checks: 0.05) */
    const char *only;    /* comma-separated names: run only the matrices named */
    const char *kernels; /* comma-separated names: run only these kernels (serial always) */
    const char *tmpdir;
    int64_t reader_mb;   /* target size of the reader's file; 0 skips it */
    int skip_kernels;
} bench_opts;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: bench-cpu [--runs N] [--warmup N] [--stat median|mean] [--threads LIST]\n"
            "                 [--hack-sizes LIST] [--seed S] [--scale F] [--only NAME]\n"
            "                 [--reader-mb MB] [--no-kernels] [--tmpdir DIR]\n"
            "  --runs      timed runs per kernel (default 20, at least 20 reported as the goal)\n"
            "  --warmup    untimed runs before them (default 3)\n"
            "  --stat      the statistic of the timed runs each row reports (default median)\n"
            "  --threads   thread counts of the kernels taking `threads` (comma-separated;\n"
            "              default 1,2,...,the OpenMP threads)\n"
            "  --hack-sizes cpu.hll.omp's slice heights, crossed with --threads (default 16,32,64)\n"
            "  --scale     multiplies the matrix sizes (default 1; 0.05 for a smoke run)\n"
            "  --only      only these matrices (comma-separated names, e.g. poisson2d,lp)\n"
            "  --kernels   only these kernels (comma-separated; cpu.csr.serial always runs)\n"
            "  --reader-mb size of the reader's generated file (default 160; 0 skips it)\n"
            "  --no-kernels skip the kernel table (triad and reader only)\n"
            "  --tmpdir    where the reader's file goes (default $TMPDIR or /tmp)\n");
}

/* "1,2,4": 1 to MAX_SWEEP integers in [lo, hi]. */
static int int_list(const char *s, int32_t lo, int32_t hi, int32_t *out, int *n)
{
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < lo || v > hi || *n == MAX_SWEEP || (*end && *end != ','))
            return -1;
        out[(*n)++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

static int list_error(const char *opt, const char *arg, int32_t lo, int32_t hi)
{
    fprintf(stderr, "bench-cpu: %s wants 1 to %d comma-separated integers in %d..%d, not '%s'\n", opt, MAX_SWEEP, lo,
            hi, arg);
    return -1;
}

static int parse_opts(int argc, char **argv, bench_opts *o)
{
    static const struct option lo[] = {
        {"runs", required_argument, 0, 'r'},   {"warmup", required_argument, 0, 'w'},
        {"seed", required_argument, 0, 's'},   {"scale", required_argument, 0, 'x'},
        {"only", required_argument, 0, 'o'},   {"reader-mb", required_argument, 0, 'm'},
        {"kernels", required_argument, 0, 'k'},   {"stat", required_argument, 0, 'S'},
        {"threads", required_argument, 0, 'T'},   {"hack-sizes", required_argument, 0, 'H'},
        {"tmpdir", required_argument, 0, 't'}, {"no-kernels", no_argument, 0, 'K'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0},
    };
    int c;
    char *end;
    const char *t = getenv("TMPDIR");

    *o = (bench_opts){.runs = 20, .warmup = 3, .seed = 20261122, .scale = 1.0, .tmpdir = t && *t ? t : "/tmp",
                      .reader_mb = 160, .hack_sizes = {16, 32, 64}, .nhack_sizes = 3};
    o->nthreads = omp_get_max_threads() < MAX_SWEEP ? omp_get_max_threads() : MAX_SWEEP;
    for (int i = 0; i < o->nthreads; i++)
        o->threads[i] = i + 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        errno = 0;
        switch (c) {
        case 'S':
            if (spmv_stat_parse(optarg, &o->stat) != SPMV_OK) {
                fprintf(stderr, "bench-cpu: --stat takes median or mean, not '%s'\n", optarg);
                return -1;
            }
            continue;
        case 'T':
            if (int_list(optarg, 1, 1024, o->threads, &o->nthreads) != 0)
                return list_error("--threads", optarg, 1, 1024);
            continue;
        case 'H':
            if (int_list(optarg, 1, 1024, o->hack_sizes, &o->nhack_sizes) != 0)
                return list_error("--hack-sizes", optarg, 1, 1024);
            continue;
        case 'r': o->runs = (int32_t)strtol(optarg, &end, 10); break;
        case 'w': o->warmup = (int32_t)strtol(optarg, &end, 10); break;
        case 's': o->seed = strtoull(optarg, &end, 0); break;
        case 'x': o->scale = strtod(optarg, &end); break;
        case 'm': o->reader_mb = strtoll(optarg, &end, 10); break;
        case 'o': o->only = optarg; continue;
        case 'k': o->kernels = optarg; continue;
        case 't': o->tmpdir = optarg; continue;
        case 'K': o->skip_kernels = 1; continue;
        case 'h': usage(stdout); exit(0);
        default: return -1;
        }
        if (errno || *end) {
            fprintf(stderr, "bench-cpu: bad number '%s'\n", optarg);
            return -1;
        }
    }
    if (optind != argc || o->runs < 1 || o->runs > 100000 || o->warmup < 0 || o->warmup > 1000 ||
        !(o->scale > 0 && o->scale <= 4) || o->reader_mb < 0 || o->reader_mb > 4096) {
        fprintf(stderr, "bench-cpu: option out of range\n");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------- machine */

static void cpu_model(char *out, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(out, len, "unknown");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(out, len, "%s", colon + 2);
            out[strcspn(out, "\n")] = 0;
            break;
        }
    }
    fclose(f);
}

/* The last-level cache in bytes (glibc reads it from the CPU; 0 if unknown). */
static int64_t llc_bytes(void)
{
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l3 > 0 ? l3 : l2 > 0 ? l2 : 0;
}

/* The other users of the cores spoil the timings; say how busy it was. */
static void print_load(const char *when)
{
    char buf[128] = "unknown";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fgets(buf, sizeof buf, f))
            buf[strcspn(buf, "\n")] = 0;
        fclose(f);
    }
    printf("- load average %s: %s\n", when, buf);
}

static void print_machine(int64_t llc)
{
    char model[256];
    cpu_model(model, sizeof model);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    printf("## Machine\n\n");
    printf("- CPU: %s, %ld online cores, %d OpenMP threads\n", model, sysconf(_SC_NPROCESSORS_ONLN),
           omp_get_max_threads());
    printf("- last-level cache: %.0f MiB\n", (double)llc / 1048576.0);
    printf("- memory: %.1f GiB\n", (double)pages * (double)page / 1073741824.0);
    print_load("at the start");
    printf("\n");
}

/* -------------------------------------------------------------- triad */

typedef struct triad_result {
    double best_gbps, median_gbps;
    int64_t array_bytes;
} triad_result;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* STREAM triad over n doubles per array. The arrays are first touched by
 * the same static schedule that runs the loop, as STREAM does. */
static int triad(int64_t n, int passes, triad_result *out)
{
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    double *c = malloc((size_t)n * sizeof *c), *gbps = malloc((size_t)passes * sizeof *gbps);
    int rc = -1;
    if (!a || !b || !c || !gbps)
        goto fail;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    const double s = 3.0;
    for (int p = 0; p < passes; p++) {
        double t0 = spmv_now_ms();
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++)
            a[i] = b[i] + s * c[i];
        double ms = spmv_now_ms() - t0;
        gbps[p] = 3.0 * 8.0 * (double)n / (ms * 1e6);
    }
    /* Keep the result live so the loop cannot be dropped. */
    if (a[n / 2] != 7.0)
        fprintf(stderr, "bench-cpu: triad result wrong (%g)\n", a[n / 2]);
    qsort(gbps, (size_t)passes, sizeof *gbps, cmp_double);
    out->best_gbps = gbps[passes - 1];
    out->median_gbps = gbps[passes / 2];
    out->array_bytes = n * 8;
    rc = 0;
fail:
    free(a);
    free(b);
    free(c);
    free(gbps);
    return rc;
}

/* The triad at memory size (each array 2x the LLC, at least 256 MiB, at
 * most 2 GiB) and, for contrast, at a size that sits in the LLC. */
static int measure_triad(int64_t llc, triad_result *mem)
{
    int64_t bytes = 2 * llc;
    if (bytes < ((int64_t)256 << 20))
        bytes = (int64_t)256 << 20;
    if (bytes > ((int64_t)2 << 30))
        bytes = (int64_t)2 << 30;
    triad_result cached = {0};
    if (triad(bytes / 8, 10, mem) != 0)
        return -1;
    int64_t small = llc > 0 ? llc / 8 : ((int64_t)1 << 20);
    if (triad(small / 8, 50, &cached) != 0)
        return -1;
    printf("## Memory bandwidth (STREAM triad, %d threads)\n\n", omp_get_max_threads());
    printf("| arrays | bytes per array | best GB/s | median GB/s |\n| --- | ---: | ---: | ---: |\n");
    printf("| 3 x %.0f MiB (memory) | %" PRId64 " | %.1f | %.1f |\n", (double)mem->array_bytes / 1048576.0,
           mem->array_bytes, mem->best_gbps, mem->median_gbps);
    printf("| 3 x %.0f MiB (in LLC) | %" PRId64 " | %.1f | %.1f |\n\n", (double)cached.array_bytes / 1048576.0,
           cached.array_bytes, cached.best_gbps, cached.median_gbps);
    printf("Counted: 3 arrays x 8 bytes per element (write-allocate traffic not counted, as in STREAM).\n"
           "The %% of triad in the kernel table is against the memory-size triad re-measured just\n"
           "before each matrix (listed after the table).\n\n");
    return 0;
}

/* ------------------------------------------------------------ matrices */

/* Whether `name` is one of the comma-separated names in `list` (NULL: all). */
static int selected(const char *list, const char *name)
{
    size_t len = strlen(name);
    if (!list)
        return 1;
    for (const char *p = list; *p;) {
        size_t tok = strcspn(p, ",");
        if (tok == len && strncmp(p, name, len) == 0)
            return 1;
        p += tok + (p[tok] == ',');
    }
    return 0;
}

typedef struct bench_matrix {
    const char *name;
    spmv_gen_spec spec;
} bench_matrix;

/* Sizes: the CSR of each large matrix is about 1.4-1.6 GB in float64,
 * three times the 480 MiB LLC of the machine this was tuned on, so x and
 * the matrix cannot stay cached between runs. The shapes are issue 5's GPU
 * set (Poisson 3-D 256^3, uniform 4 M x 32, banded with a 2 M-entry row). */
static size_t bench_set(double scale, uint64_t seed, bench_matrix *set)
{
#define SC(v) ((int64_t)((double)(v) * scale) > 1 ? (int64_t)((double)(v) * scale) : 1)
    double side2 = sqrt(scale), side3 = cbrt(scale);
    int64_t p2 = (int64_t)(5000 * side2), p3 = (int64_t)(256 * side3);
    size_t k = 0;
    set[k++] = (bench_matrix){"poisson2d", {SPMV_GEN_POISSON2D, p2 > 2 ? p2 : 2, 0, 0, seed}};
    set[k++] = (bench_matrix){"poisson3d", {SPMV_GEN_POISSON3D, p3 > 2 ? p3 : 2, 0, 0, seed}};
    set[k++] = (bench_matrix){"uniform", {SPMV_GEN_UNIFORM, SC(4000000), 32, 0, seed}};
    set[k++] = (bench_matrix){"powerlaw", {SPMV_GEN_POWERLAW, SC(8000000), 16, 0, seed}};
    set[k++] = (bench_matrix){"banded_dense_row", {SPMV_GEN_BANDED_DENSE_ROW, SC(8000000), 14, SC(2000000), seed}};
    set[k++] = (bench_matrix){"lp", {SPMV_GEN_LP, 27, 3, 0, seed}};
#undef SC
    return k;
}

/* ------------------------------------------------------------- kernels */

typedef struct kernel_row {
    const spmv_kernel *k;
    spmv_stats st;
    double err;
    int ok;
    char why[160];
} kernel_row;

static void *vec_alloc(spmv_dtype dt, int64_t n)
{
    return malloc((size_t)(n > 0 ? n : 1) * spmv_dtype_size(dt));
}

static void vec_poison(spmv_dtype dt, int64_t n, void *v)
{
    for (int64_t i = 0; i < n; i++) {
        if (dt == SPMV_FLOAT32)
            ((float *)v)[i] = NAN;
        else
            ((double *)v)[i] = NAN;
    }
}

/* Timed runs: at least o->runs, more for tiny matrices so the median is
 * not at the clock's resolution. */
static int32_t runs_for(const bench_opts *o, int64_t nnz)
{
    return nnz < 100000 ? (o->runs > 2000 ? o->runs : 2000) : o->runs;
}

/* Scratch formats are built per call by spmv_cpu_run; an HLL of a
 * heavy-tailed matrix pads each 32-row slice to its longest row and can
 * reach ten times the CSR (15 GB for the power-law matrix). Past this
 * budget the kernel is reported as skipped instead. */
#define SCRATCH_BUDGET_BYTES ((int64_t)4 << 30)

/* Bytes of the HLL that spmv_cpu_run would build (slice width = longest
 * row of the slice), from row_ptr alone. */
static int64_t hll_bytes_for(const spmv_matrix *m, int32_t hack)
{
    int64_t slots = 0;
    for (int64_t r0 = 0; r0 < m->rows; r0 += hack) {
        int64_t r1 = r0 + hack < m->rows ? r0 + hack : m->rows, w = 0;
        for (int64_t r = r0; r < r1; r++) {
            int64_t len = (int64_t)m->csr.row_ptr[r + 1] - m->csr.row_ptr[r];
            w = len > w ? len : w;
        }
        slots += w * hack;
    }
    return slots * (int64_t)(4 + spmv_dtype_size(m->dtype));
}

/* Milliseconds with 4 significant digits: the tiny LP runs in microseconds. */
static void print_ms(double ms)
{
    printf(" %.4g |", ms);
}

/* What every row of one matrix in one dtype shares. serial_ms is the
 * baseline of the speedup and efficiency columns, set by cpu.csr.serial,
 * which runs first (on 32-bit offsets: the wide rows compare with it). */
typedef struct row_ctx {
    const bench_opts *o;
    const bench_matrix *bm;
    const spmv_matrix *m;
    const void *x, *ref;
    void *y;
    double triad_gbps, serial_ms;
    int *mismatches;
} row_ctx;

/* Why k with p is not timed on m (NULL: it is): unavailable here, an HLL
 * over the scratch budget, or cpu.csr.chunked whose passes over the rows
 * make it pathological (spmv_kernel_work_excessive). */
static const char *not_run(const spmv_kernel *k, const spmv_params *p, const spmv_matrix *m, char *why, size_t len)
{
    const char *reason = NULL;
    int32_t hack = p->v[SPMV_PARAM_HACK_SIZE] ? p->v[SPMV_PARAM_HACK_SIZE] : SPMV_HACK_SIZE_DEFAULT;
    if (!spmv_kernel_available(k, &reason)) {
        snprintf(why, len, "unavailable: %s", reason ? reason : "?");
        return why;
    }
    if (k->format == SPMV_FMT_HLL && hll_bytes_for(m, hack) > SCRATCH_BUDGET_BYTES) {
        snprintf(why, len, "skipped: its HLL (hack_size %d) would take %.1f GB, over the benchmark's %.1f GB scratch "
                 "budget", hack, (double)hll_bytes_for(m, hack) / 1e9, (double)SCRATCH_BUDGET_BYTES / 1e9);
        return why;
    }
    if (spmv_kernel_work_excessive(spmv_kernel_work(k, p, m->rows, m->cols, m->nnz), m->rows, m->nnz)) {
        int64_t w = spmv_chunked_width(p, m->cols);
        snprintf(why, len, "skipped: %" PRId64 " passes over the rows at span %" PRId64 " (16x a product's work)",
                 ((int64_t)m->cols + w - 1) / w, w);
        return why;
    }
    return NULL;
}

/* The threads k runs on with p: its `threads` (0: as spmv_cpu_run
 * resolves the default), one for a kernel without. */
static int32_t team(const spmv_kernel *k, const spmv_params *p, int64_t nnz)
{
    if (!(k->params & (1u << SPMV_PARAM_THREADS)))
        return 1;
    return spmv_cpu_threads(p->v[SPMV_PARAM_THREADS], nnz);
}

/* One kernel with parameters p on one matrix: a table row. */
static void bench_kernel(row_ctx *c, const spmv_kernel *k, const spmv_params *p)
{
    const spmv_matrix *m = c->m;
    bool wide = spmv_csr_wide(&m->csr);
    spmv_error err = {0};
    spmv_stats st;
    char ps[128], why[256];

    spmv_params_format(k, p, ps, sizeof ps);
    printf("| %s | %" PRId32 " | %" PRId64 " | %s%s | %s | %s |", c->bm->name, m->rows, m->nnz, k->name,
           wide ? " (64-bit offsets)" : "", spmv_dtype_name(m->dtype), ps[0] ? ps : "-");
    if (not_run(k, p, m, why, sizeof why)) {
        printf(" %s | | | | | | |\n", why);
        return;
    }
    vec_poison(m->dtype, m->rows, c->y);
    if (spmv_cpu_run(k, m, p, c->x, c->y, c->o->warmup, runs_for(c->o, m->nnz), &st, &err) != SPMV_OK) {
        printf(" skipped: %s | | | | | | |\n", err.message);
        fflush(stdout);
        return;
    }
    double e = spmv_max_rel_err(m->dtype, c->y, c->ref, m->rows);
    /* The kernels sum each row in the reference's order except where the
     * format reorders it (chunked passes); float32 rounding of another
     * order over a 2 M-entry row stays below 1e-3 of ||y||_inf, a wrong
     * result is of order 1. */
    double bound = m->dtype == SPMV_FLOAT32 ? 1e-3 : 1e-10;
    if (!(e <= bound))
        (*c->mismatches)++;
    spmv_stats_use(&st, c->o->stat);
    double ms = spmv_stats_ms(&st, c->o->stat);
    if (strcmp(k->name, "cpu.csr.serial") == 0 && !wide)
        c->serial_ms = ms;
    double speedup = c->serial_ms > 0 && ms > 0 ? c->serial_ms / ms : 0.0;
    print_ms(ms);
    printf(" %.2f | %.1f | %.0f%% | %.2fx | %.2f | %.1e%s |\n", st.gflops, st.gbps, 100.0 * st.gbps / c->triad_gbps,
           speedup, speedup / team(k, p, m->nnz), e, e <= bound ? "" : " MISMATCH");
    fflush(stdout);
}

/* k at every combination of the sweep it takes: --hack-sizes crossed
 * with --threads; once at its defaults when it takes neither. */
static void sweep_kernel(row_ctx *c, const spmv_kernel *k)
{
    bool th = k->params & (1u << SPMV_PARAM_THREADS), hs = k->params & (1u << SPMV_PARAM_HACK_SIZE);
    int nt = th ? c->o->nthreads : 1, nh = hs ? c->o->nhack_sizes : 1;
    for (int h = 0; h < nh; h++)
        for (int t = 0; t < nt; t++) {
            spmv_params p;
            memset(&p, 0, sizeof p);
            if (th)
                p.v[SPMV_PARAM_THREADS] = c->o->threads[t];
            if (hs)
                p.v[SPMV_PARAM_HACK_SIZE] = c->o->hack_sizes[h];
            bench_kernel(c, k, &p);
        }
}

/* Every CPU kernel on one matrix in one dtype, cpu.csr.serial first. */
static int bench_dtype(const bench_opts *o, const bench_matrix *bm, const spmv_coo *coo, spmv_dtype dt,
                       double triad_gbps, int *mismatches)
{
    const spmv_kernel *serial = spmv_kernel_find("cpu.csr.serial");
    spmv_matrix m;
    spmv_error err = {0};
    row_ctx c = {.o = o, .bm = bm, .m = &m, .triad_gbps = triad_gbps, .mismatches = mismatches};
    void *x = NULL, *ref = NULL;
    int rc = -1;

    memset(&m, 0, sizeof m);
    if (!serial) {
        fprintf(stderr, "bench-cpu: cpu.csr.serial is not in the registry\n");
        return -1;
    }
    if (spmv_matrix_build(coo, dt, SPMV_FMT_CSR, SPMV_HACK_SIZE_DEFAULT, 0, &m, &err) != SPMV_OK) {
        fprintf(stderr, "bench-cpu: %s %s: %s\n", bm->name, spmv_dtype_name(dt), err.message);
        goto fail;
    }
    c.x = x = vec_alloc(dt, m.cols);
    c.y = vec_alloc(dt, m.rows);
    c.ref = ref = vec_alloc(dt, m.rows);
    if (!x || !c.y || !ref)
        goto fail;
    spmv_random_vector(dt, m.cols, o->seed ^ 0x5eedull, x);
    spmv_reference(&m.csr, x, ref);

    sweep_kernel(&c, serial);
    for (size_t i = 0; i < spmv_kernel_count(); i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        if (k->device == SPMV_DEVICE_CPU && k->op == SPMV_OP_SPMV && k != serial && selected(o->kernels, k->name))
            sweep_kernel(&c, k);
    }
    /* the CSR kernels again on 64-bit row offsets (what a matrix past
     * INT32_MAX non-zeros holds): the price of the wider offsets, which
     * smaller matrices do not pay; cpu.csr.omp at the most threads swept */
    if (spmv_csr_widen(&m.csr, &err) != SPMV_OK) {
        fprintf(stderr, "bench-cpu: %s %s: %s\n", bm->name, spmv_dtype_name(dt), err.message);
        goto fail;
    }
    spmv_params none, most;
    memset(&none, 0, sizeof none);
    most = none;
    most.v[SPMV_PARAM_THREADS] = o->threads[o->nthreads - 1];
    bench_kernel(&c, serial, &none);
    if (selected(o->kernels, "cpu.csr.omp"))
        bench_kernel(&c, spmv_kernel_find("cpu.csr.omp"), &most);
    rc = 0;
fail:
    free(x);
    free(c.y);
    free(ref);
    spmv_matrix_free(&m);
    return rc;
}

/* The cores and the memory bus are shared with other work, whose load
 * changes over a run; so each matrix's "% of triad" is against a triad
 * measured just before its kernels (5 passes over the same arrays). */
static double triad_now(const triad_result *mem)
{
    triad_result t;
    return triad(mem->array_bytes / 8, 5, &t) == 0 ? t.best_gbps : mem->best_gbps;
}

static int bench_matrices(const bench_opts *o, int64_t llc, const triad_result *mem, int *mismatches)
{
    bench_matrix set[8];
    double triad_at[8] = {0};
    size_t count = bench_set(o->scale, o->seed, set);
    int rc = 0;

    printf("## The matrices\n\n| matrix | kind | n | per_row | dense_len | rows | cols | nnz | CSR MiB (f64) | x LLC | generated in ms |\n"
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    /* The descriptions go first (generation is quick), the table after, so
     * the table stays one block of markdown. */
    for (size_t i = 0; i < count; i++) {
        if (!selected(o->only, set[i].name))
            continue;
        spmv_coo coo;
        spmv_error err = {0};
        double t0 = spmv_now_ms();
        if (spmv_gen(&set[i].spec, &coo, &err) != SPMV_OK) {
            fprintf(stderr, "bench-cpu: %s: %s\n", set[i].name, err.message);
            return -1;
        }
        double ms = spmv_now_ms() - t0;
        double csr = (double)coo.nnz * 12.0 + ((double)coo.rows + 1) * 4.0;
        printf("| %s | %s | %" PRId64 " | %" PRId32 " | %" PRId64 " | %" PRId32 " | %" PRId32 " | %" PRId64
               " | %.0f | %.2f | %.0f |\n",
               set[i].name, spmv_gen_kind_name(set[i].spec.kind), set[i].spec.n, set[i].spec.per_row,
               set[i].spec.dense_len, coo.rows, coo.cols, coo.nnz, csr / 1048576.0,
               llc > 0 ? csr / (double)llc : 0.0, ms);
        spmv_coo_free(&coo);
    }
    printf("\n## Kernels (%s of %d timed runs after %d warm-up; 2000 runs for matrices under 100k non-zeros)\n\n",
           spmv_stat_name(o->stat), o->runs, o->warmup);
    printf("Threads swept:");
    for (int i = 0; i < o->nthreads; i++)
        printf("%s %d", i ? "," : "", o->threads[i]);
    printf("; cpu.hll.omp's hack sizes:");
    for (int i = 0; i < o->nhack_sizes; i++)
        printf("%s %d", i ? "," : "", o->hack_sizes[i]);
    printf(". Speedup = cpu.csr.serial's time / the row's, efficiency = speedup / the row's threads (1 for the\n"
           "serial kernels), both at the %s and against the serial CSR of the same matrix and dtype.\n\n",
           spmv_stat_name(o->stat));
    printf("| matrix | rows | nnz | kernel | dtype | params | %s ms | GFLOPS | GB/s | %% of triad | speedup vs "
           "cpu.csr.serial | efficiency vs cpu.csr.serial | max rel err |\n"
           "| --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
           spmv_stat_name(o->stat));
    fflush(stdout);
    for (size_t i = 0; i < count && rc == 0; i++) {
        if (!selected(o->only, set[i].name))
            continue;
        spmv_coo coo;
        spmv_error err = {0};
        if (spmv_gen(&set[i].spec, &coo, &err) != SPMV_OK) {
            fprintf(stderr, "bench-cpu: %s: %s\n", set[i].name, err.message);
            return -1;
        }
        triad_at[i] = triad_now(mem);
        rc = bench_dtype(o, &set[i], &coo, SPMV_FLOAT64, triad_at[i], mismatches);
        if (rc == 0)
            rc = bench_dtype(o, &set[i], &coo, SPMV_FLOAT32, triad_at[i], mismatches);
        spmv_coo_free(&coo);
    }
    printf("\nThe triad just before each matrix's kernels (the %% of triad column's base):\n\n"
           "| matrix | triad GB/s |\n| --- | ---: |\n");
    for (size_t i = 0; i < count; i++)
        if (triad_at[i] > 0)
            printf("| %s | %.1f |\n", set[i].name, triad_at[i]);
    printf("\n");
    return rc;
}

/* -------------------------------------------------------------- reader */

/* A uniform matrix with full-precision values takes 30-40 bytes a line
 * ("123456 123456 -0.12345678901234567\n"); n is chosen so the file is at
 * least the wanted size and the real size is measured after writing. */
static int write_reader_file(const bench_opts *o, const char *path, int64_t *bytes, double *write_ms)
{
    int64_t nnz = o->reader_mb * 1000000 / 30 + 1;
    int32_t per_row = 20;
    spmv_gen_spec spec = {SPMV_GEN_UNIFORM, nnz / per_row + 1, per_row, 0, o->seed};
    spmv_coo coo;
    spmv_error err = {0};
    struct stat sb;

    if (spmv_gen(&spec, &coo, &err) != SPMV_OK) {
        fprintf(stderr, "bench-cpu: reader file: %s\n", err.message);
        return -1;
    }
    double t0 = spmv_now_ms();
    int rc = spmv_mm_write_file(path, &coo, &err);
    *write_ms = spmv_now_ms() - t0;
    spmv_coo_free(&coo);
    if (rc != SPMV_OK) {
        fprintf(stderr, "bench-cpu: writing %s: %s\n", path, err.message);
        return -1;
    }
    if (stat(path, &sb) != 0)
        return -1;
    *bytes = (int64_t)sb.st_size;
    return 0;
}

/* Best of 3 reads of the file with `threads` parsing threads, in ms. */
static int time_read(const char *path, int32_t threads, double *best_ms, int64_t *nnz)
{
    spmv_mm_options opts;
    memset(&opts, 0, sizeof opts);
    opts.threads = threads;
    *best_ms = INFINITY;
    for (int i = 0; i < 3; i++) {
        spmv_coo coo;
        spmv_mm_info info;
        spmv_error err = {0};
        double t0 = spmv_now_ms();
        if (spmv_mm_read_file(path, &opts, &coo, &info, &err) != SPMV_OK) {
            fprintf(stderr, "bench-cpu: reading %s: %s\n", path, err.message);
            return -1;
        }
        double ms = spmv_now_ms() - t0;
        *nnz = coo.nnz;
        spmv_coo_free(&coo);
        if (ms < *best_ms)
            *best_ms = ms;
    }
    return 0;
}

static int bench_reader(const bench_opts *o)
{
    char dir[4096], path[4200];
    int64_t bytes = 0, nnz = 0;
    double write_ms = 0, ms1 = 0, msall = 0;
    int rc = -1;

    snprintf(dir, sizeof dir, "%s/bench-cpu.XXXXXX", o->tmpdir);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench-cpu: mkdtemp %s: %s\n", dir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/uniform.mtx", dir);
    if (write_reader_file(o, path, &bytes, &write_ms) != 0)
        goto done;
    /* One read first so the page cache holds the file for every timed
     * read alike: this measures parsing, not the disk. */
    if (time_read(path, 1, &ms1, &nnz) != 0 || time_read(path, 0, &msall, &nnz) != 0)
        goto done;
    double mb = (double)bytes / 1e6;
    printf("## Matrix Market reader (spmv_mm_read_file, best of 3, file in the page cache)\n\n");
    printf("File: generated uniform, %.1f MB, %" PRId64 " non-zeros, full-precision values "
           "(written by spmv_mm_write_file at %.0f MB/s).\n\n",
           mb, nnz, mb / (write_ms / 1000.0));
    printf("| threads | best s | MB/s | fast_matrix_market here | goal (1.5x) | reached |\n"
           "| ---: | ---: | ---: | ---: | ---: | --- |\n");
    printf("| 1 | %.3f | %.0f | 190 | 285 | %s |\n", ms1 / 1000.0, mb / (ms1 / 1000.0),
           mb / (ms1 / 1000.0) >= 285 ? "yes" : "no");
    printf("| %d (all) | %.3f | %.0f | 300 | 450 | %s |\n\n", omp_get_max_threads(), msall / 1000.0,
           mb / (msall / 1000.0), mb / (msall / 1000.0) >= 450 ? "yes" : "no");
    rc = 0;
done:
    remove(path);
    rmdir(dir);
    return rc;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    bench_opts o;
    triad_result mem;
    int mismatches = 0;
    int64_t llc = llc_bytes();
    double t0 = spmv_now_ms();

    if (parse_opts(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    printf("# spmvd CPU benchmark\n\n");
    print_machine(llc);
    if (measure_triad(llc, &mem) != 0) {
        fprintf(stderr, "bench-cpu: no memory for the triad arrays\n");
        return 1;
    }
    fflush(stdout);
    if (!o.skip_kernels && bench_matrices(&o, llc, &mem, &mismatches) != 0)
        return 1;
    if (o.reader_mb > 0 && bench_reader(&o) != 0)
        return 1;
    print_load("at the end");
    printf("\nTotal run time %.0f s, seed %" PRIu64 ", scale %g.\n", (spmv_now_ms() - t0) / 1000.0, o.seed, o.scale);
    if (mismatches) {
        fprintf(stderr, "bench-cpu: %d kernel results disagree with cpu.csr.serial\n", mismatches);
        return 1;
    }
    return 0;
}
