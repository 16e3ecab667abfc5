/* bench-spmspm.c — the SpMSpM benchmark table (C = A*B, B thin).
 *
 * For each A of a seeded generated set (engine/gen.c: Poisson 3-D, uniform
 * rows, power-law rows; sized by --scale) and each width of B (default 32
 * and 512 columns), B is a seeded random A.cols x width matrix with
 * `--b-per-row` entries per row (10% of its rows empty). Every available
 * SpMSpM kernel runs `--runs` timed times after `--warmup`: the GPU ones
 * with A and B resident on GPU 0, cpu.spmspm.omp on the host. Each C is
 * compared with cusparse.spgemm's (or, without a GPU, cpu.spmspm.serial's):
 * identical structure and max |c - ref| / max |ref|. It prints one
 * Markdown table per (A, width): median ms, GFLOP/s (2 flops per
 * multiply-add), C's non-zeros, and the speed relative to cusparse.spgemm
 * and to gpu.spmspm.thread_row's default (the SpMSpM study's kernel 0, the
 * study's baseline): its median over the kernel's. A kernel with an
 * algorithm parameter (`output`, `accumulate`) has a row per value. Asserts nothing on timings; the exit
 * status is non-zero only when a kernel fails or disagrees.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmv.h"

#define MAX_WIDTHS 8

typedef struct opts {
    int32_t runs, warmup, b_per_row;
    double scale;
    uint64_t seed;
    int32_t widths[MAX_WIDTHS];
    int nwidths;
    spmv_dtype dtype;
    const char *only;
} opts;

static void usage(FILE *to)
{
    fprintf(to, "usage: bench-spmspm [--runs N] [--warmup N] [--scale F] [--widths 32,512] [--b-per-row N]\n"
                "                    [--dtype float64|float32] [--seed S] [--only NAME]\n"
                "  --scale     multiplies the sizes of A (default 1: about 2 M rows each)\n");
}

static int parse_widths(const char *s, opts *o)
{
    char *end;
    o->nwidths = 0;
    while (*s && o->nwidths < MAX_WIDTHS) {
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > (1 << 24))
            return -1;
        o->widths[o->nwidths++] = (int32_t)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return o->nwidths > 0 ? 0 : -1;
}

static int parse_opts(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"runs", required_argument, 0, 'r'},  {"warmup", required_argument, 0, 'w'},
        {"scale", required_argument, 0, 's'}, {"widths", required_argument, 0, 'c'},
        {"b-per-row", required_argument, 0, 'b'}, {"dtype", required_argument, 0, 'd'},
        {"seed", required_argument, 0, 'S'},  {"only", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0},
    };
    int c;
    *o = (opts){.runs = 10, .warmup = 2, .b_per_row = 4, .scale = 1, .seed = 42, .nwidths = 2,
                .widths = {32, 512}, .dtype = SPMV_FLOAT64};
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'r': o->runs = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 's': o->scale = atof(optarg); break;
        case 'b': o->b_per_row = atoi(optarg); break;
        case 'S': o->seed = strtoull(optarg, NULL, 0); break;
        case 'o': o->only = optarg; break;
        case 'c':
            if (parse_widths(optarg, o)) return -1;
            break;
        case 'd':
            if (spmv_dtype_parse(optarg, &o->dtype)) return -1;
            break;
        case 'h': usage(stdout); exit(0);
        default: return -1;
        }
    }
    if (o->runs < 1 || o->warmup < 0 || o->b_per_row < 1 || !(o->scale > 0))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ operands */

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A random rows x cols B with up to per_row sorted distinct columns a row. */
static int thin_b(int32_t rows, int32_t cols, int32_t per_row, uint64_t seed, spmv_coo *out, spmv_error *err)
{
    int32_t k = per_row < cols ? per_row : cols;
    int64_t n = 0;
    int st = spmv_coo_alloc(out, rows, cols, (int64_t)rows * k, SPMV_FLOAT64, err);
    if (st)
        return st;
    for (int32_t i = 0; i < rows; i++) {
        if (mix(&seed) % 10 == 0)
            continue; /* an empty row */
        int32_t stride = cols / k, start = (int32_t)(mix(&seed) % (uint64_t)stride);
        for (int32_t e = 0; e < k; e++) { /* one column per stride: sorted and distinct */
            out->row[n] = i;
            out->col[n] = e * stride + (int32_t)((start + mix(&seed) % 2) % stride);
            ((double *)out->val)[n++] = (double)(mix(&seed) >> 11) / 9007199254740992.0 * 2 - 1;
        }
    }
    out->nnz = n;
    return SPMV_OK;
}

/* -------------------------------------------------------------- kernels */

#define MAX_ROWS 32

typedef struct row {
    const spmv_kernel *k;
    spmv_params p;
    char label[96]; /* the kernel, and its algorithm parameter when one is set */
    spmv_stats st;
    spmv_csr c;
    int rc;
    char why[200];
} row;

static void run_kernel(spmv_gpu_ctx *ctx, spmv_gpu_matrix *ga, spmv_gpu_matrix *gb, const spmv_csr *a,
                       const spmv_csr *b, const opts *o, row *r)
{
    spmv_error err = {0};
    if (r->k->device == SPMV_DEVICE_GPU)
        r->rc = spmv_gpu_spmspm(ctx, r->k, ga, gb, &r->p, o->warmup, o->runs, &r->c, &r->st, &err);
    else
        r->rc = spmv_cpu_spmspm(r->k, a, b, &r->p, o->warmup, o->runs, &r->c, &r->st, &err);
    if (r->rc)
        snprintf(r->why, sizeof r->why, "%.190s", err.message);
}

/* The algorithm parameters whose every value the table times (the
 * default's row comes first, then one row per other value). */
static const spmv_param_id variant_params[] = {SPMV_PARAM_OUTPUT, SPMV_PARAM_ACCUMULATE};

/* Rows for kernel k: its defaults, then each other value of a parameter
 * in variant_params it takes. Returns how many were added. */
static int add_rows(const spmv_kernel *k, row *rows, int room)
{
    int n = 0;
    if (room < 1)
        return 0;
    memset(&rows[0], 0, sizeof rows[0]);
    rows[0].k = k;
    snprintf(rows[0].label, sizeof rows[0].label, "%s", k->name);
    n = 1;
    for (size_t v = 0; v < sizeof variant_params / sizeof variant_params[0]; v++) {
        const spmv_param_desc *d = spmv_param_get(variant_params[v]);
        if (!(k->params & (1u << variant_params[v])))
            continue;
        snprintf(rows[0].label, sizeof rows[0].label, "%s %s=%d", k->name, d->name, d->def);
        for (int32_t x = d->min; x <= d->max && n < room; x++) {
            if (x == d->def)
                continue;
            memset(&rows[n], 0, sizeof rows[n]);
            rows[n].k = k;
            rows[n].p.v[variant_params[v]] = x;
            snprintf(rows[n].label, sizeof rows[n].label, "%s %s=%d", k->name, d->name, x);
            n++;
        }
    }
    return n;
}

/* `base` (gpu.spmspm.thread_row with its defaults, the study's kernel 0)
 * is the second speedup column's baseline, as the study's tables are. */
static int print_table(const char *name, const spmv_csr *a, const spmv_csr *b, row *rows, int n, int ref, int base)
{
    int bad = 0;
    double ref_ms = ref >= 0 && rows[ref].rc == 0 ? rows[ref].st.median_ms : NAN;
    double base_ms = base >= 0 && rows[base].rc == 0 ? rows[base].st.median_ms : NAN;
    printf("\n### %s (%d x %d, %" PRId64 " nnz) x B %d x %d (%" PRId64 " nnz), %s\n\n", name, a->rows, a->cols,
           a->nnz, b->rows, b->cols, b->nnz, spmv_dtype_name(a->dtype));
    /* the kernel-0 column only where kernel 0 ran (a GPU) */
    const char *bcol = base >= 0 ? " |" : "", *bsep = base >= 0 ? " ---: |" : "";
    printf("| kernel | median ms | GFLOP/s | C nnz | vs %s |%s%s max rel. diff |\n"
           "| --- | ---: | ---: | ---: | ---: |%s ---: |\n",
           ref >= 0 ? rows[ref].label : "-", base >= 0 ? " vs " : "", base >= 0 ? rows[base].label : "", bsep);
    for (int i = 0; i < n; i++) {
        row *r = &rows[i];
        double e = 0;
        spmv_error err;
        if (r->rc) {
            printf("| `%s` | failed: %s | | | | |%s\n", r->label, r->why, bcol);
            bad++;
            continue;
        }
        if (ref >= 0 && rows[ref].rc == 0 && spmv_csr_compare(&r->c, &rows[ref].c, &e, &err) != SPMV_OK) {
            printf("| `%s` | %.4f | structure differs: %s | | | |%s\n", r->label, r->st.median_ms, err.message, bcol);
            bad++;
            continue;
        }
        bad += e > (a->dtype == SPMV_FLOAT32 ? 1e-4 : 1e-10);
        printf("| `%s` | %.4f | %.2f | %" PRId64 " | %.2fx |", r->label, r->st.median_ms, r->st.gflops, r->c.nnz,
               ref_ms / r->st.median_ms);
        if (base >= 0)
            printf(" %.2fx |", base_ms / r->st.median_ms);
        printf(" %.1e |\n", e);
    }
    fflush(stdout);
    return bad;
}

static int bench_pair(spmv_gpu_ctx *ctx, const char *name, const spmv_coo *ca, const spmv_coo *cb, const opts *o)
{
    spmv_csr a = {0}, b = {0};
    spmv_gpu_matrix *ga = NULL, *gb = NULL;
    spmv_error err;
    row rows[MAX_ROWS];
    int n = 0, ref = -1, base = -1, bad = 0;
    memset(rows, 0, sizeof rows);
    if (spmv_coo_to_csr(ca, o->dtype, &a, &err) || spmv_coo_to_csr(cb, o->dtype, &b, &err) ||
        (ctx && (spmv_gpu_matrix_upload(ctx, ca, o->dtype, SPMV_FMT_CSR, 32, &ga, NULL, &err) ||
                 spmv_gpu_matrix_upload(ctx, cb, o->dtype, SPMV_FMT_CSR, 32, &gb, NULL, &err)))) {
        fprintf(stderr, "bench-spmspm: %s: %s\n", name, err.message);
        bad = 1;
        goto done;
    }
    for (size_t i = 0; i < spmv_kernel_count() && n < MAX_ROWS; i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        if (k->op != SPMV_OP_SPMSPM || strcmp(k->name, "cpu.spmspm.serial") == 0 ||
            (k->device == SPMV_DEVICE_GPU && !ctx))
            continue;
        int added = add_rows(k, &rows[n], MAX_ROWS - n);
        if (strcmp(k->name, ctx ? "cusparse.spgemm" : "cpu.spmspm.omp") == 0)
            ref = n;
        if (strcmp(k->name, "gpu.spmspm.thread_row") == 0)
            base = n;
        for (int j = 0; j < added; j++)
            run_kernel(ctx, ga, gb, &a, &b, o, &rows[n + j]);
        n += added;
    }
    bad = print_table(name, &a, &b, rows, n, ref, base);
done:
    for (int i = 0; i < n; i++)
        spmv_csr_free(&rows[i].c);
    spmv_gpu_matrix_free(ctx, ga);
    spmv_gpu_matrix_free(ctx, gb);
    spmv_csr_free(&a);
    spmv_csr_free(&b);
    return bad;
}

int main(int argc, char **argv)
{
    opts o;
    spmv_gpu_ctx *ctx = NULL;
    spmv_error err;
    const char *why = NULL;
    int bad = 0;
    if (parse_opts(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    if (spmv_gpu_count(&why) > 0 && spmv_gpu_ctx_new(0, 0, &ctx, &err) != SPMV_OK)
        fprintf(stderr, "bench-spmspm: GPU 0: %s\n", err.message);
    printf("## SpMSpM: C = A*B, B thin (%d per row, 10%% empty rows), %d runs after %d warm-up, seed %" PRIu64 "\n",
           o.b_per_row, o.runs, o.warmup, o.seed);
    if (!ctx)
        printf("\nNo GPU (%s): CPU kernels only, compared with cpu.spmspm.omp.\n", why ? why : "context failed");
    int64_t side = (int64_t)(128 * cbrt(o.scale)), n = (int64_t)(2000000 * o.scale);
    const struct { const char *name; spmv_gen_spec spec; } set[] = {
        {"poisson3d", {SPMV_GEN_POISSON3D, side > 2 ? side : 2, 0, 0, o.seed}},
        {"uniform", {SPMV_GEN_UNIFORM, n > 1 ? n : 1, 16, 0, o.seed}},
        {"powerlaw", {SPMV_GEN_POWERLAW, n > 1 ? n : 1, 8, 0, o.seed}},
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) {
        spmv_coo ca;
        if (o.only && !strstr(set[i].name, o.only))
            continue;
        if (spmv_gen(&set[i].spec, &ca, &err)) {
            fprintf(stderr, "bench-spmspm: %s: %s\n", set[i].name, err.message);
            bad++;
            continue;
        }
        for (int w = 0; w < o.nwidths; w++) {
            spmv_coo cb;
            if (thin_b(ca.cols, o.widths[w], o.b_per_row, o.seed + (uint64_t)w, &cb, &err)) {
                fprintf(stderr, "bench-spmspm: B: %s\n", err.message);
                bad++;
                continue;
            }
            bad += bench_pair(ctx, set[i].name, &ca, &cb, &o);
            spmv_coo_free(&cb);
        }
        spmv_coo_free(&ca);
    }
    spmv_gpu_ctx_free(ctx);
    return bad ? 1 : 0;
}
