/* spmv-gen.c — writes a seeded generated matrix as a Matrix Market file.
 *
 *   spmv-gen --kind K --n N [--per-row P] [--dense-len L] [--seed S] [--gzip | --npz[=stored]] --out FILE
 *   spmv-gen --kind random --rows M --cols N --nnz Z [--seed S] ... --out FILE
 *
 * The matrix comes from spmv_gen() (engine/gen.c), the file from
 * spmv_mm_write_file() (coordinate real general, full precision). With
 * --gzip the text is written to FILE.tmp first and then compressed through
 * zlib into FILE, so the engine's writer stays the one place that formats
 * Matrix Market text. --npz writes SciPy's .npz instead (save_npz's CSR
 * layout through spmv_npz_write_file: members deflated, or stored with
 * --npz=stored), the binary upload for large matrices. It prints
 * "rows R cols C nnz Z" on success; benchmark
 * scripts and the GPU benchmark use it to make their inputs.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "spmv.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: spmv-gen --kind K --n N [--per-row P] [--dense-len L] [--seed S] [--gzip | --npz[=stored]]\n"
            "                --out FILE\n"
            "       spmv-gen --kind random --rows M --cols N --nnz Z [--seed S] [--gzip | --npz[=stored]] --out FILE\n"
            "  K: poisson2d (n^2 rows), poisson3d (n^3 rows), stencil27 (n^3 rows), uniform, powerlaw,\n"
            "     graph_uniform, graph_powerlaw (their patterns, every value 1),\n"
            "     banded_dense_row, lp (n x 2n), band (entries by formula: spmv_band_value),\n"
            "     random (M x N, exactly Z entries at uniformly random places, values in [-1, 1))\n"
            "  --per-row   non-zeros per row (uniform, lp), mean (powerlaw), band width (banded, band);\n"
            "              default 16 (lp: 4)\n"
            "  --dense-len length of the dense row of banded_dense_row (default n/2, 0: none)\n"
            "  --seed      PRNG seed (default 1)\n"
            "  --gzip      write FILE gzip-compressed\n"
            "  --npz       write SciPy's .npz (CSR, members deflated; --npz=stored: not compressed)\n");
}

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s == '-')
        return -1;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

/* Compresses `from` into `to` and removes `from`. */
static int gzip_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    gzFile out = NULL;
    char buf[1 << 16];
    size_t got;
    int rc = -1;

    if (!in)
        goto fail;
    out = gzopen(to, "wb6");
    if (!out)
        goto fail;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0)
        if (gzwrite(out, buf, (unsigned)got) != (int)got)
            goto fail;
    if (ferror(in))
        goto fail;
    rc = 0;
fail:
    if (out && gzclose(out) != Z_OK)
        rc = -1;
    if (in)
        fclose(in);
    if (rc == 0)
        remove(from);
    return rc;
}

typedef struct gen_args {
    spmv_gen_spec spec;
    const char *out;
    int gzip;
    int npz;            /* 0: Matrix Market; 1: .npz deflated; 2: .npz stored */
    int have_kind, have_n, have_per_row, have_dense_len, have_rows, have_cols, have_nnz;
} gen_args;

/* A count option into *out (at least lo); *seen set. */
static int count_opt(const char *name, const char *arg, int64_t lo, int64_t hi, int64_t *out, int *seen)
{
    if (parse_i64(arg, out) != 0 || *out < lo || *out > hi) {
        fprintf(stderr, "spmv-gen: --%s wants an integer in [%lld, %lld], got '%s'\n", name, (long long)lo,
                (long long)hi, arg);
        return -1;
    }
    *seen = 1;
    return 0;
}

/* One option; -1 after printing why it is wrong. */
static int parse_opt(int c, gen_args *a)
{
    int64_t v;
    switch (c) {
    case 'k':
        if (spmv_gen_kind_parse(optarg, &a->spec.kind) != SPMV_OK) {
            fprintf(stderr, "spmv-gen: unknown kind '%s'\n", optarg);
            return -1;
        }
        a->have_kind = 1;
        return 0;
    case 'n': return count_opt("n", optarg, 1, INT64_MAX, &a->spec.n, &a->have_n);
    case 'R': return count_opt("rows", optarg, 1, INT32_MAX, &a->spec.n, &a->have_rows);
    case 'C':
        if (count_opt("cols", optarg, 1, INT32_MAX, &v, &a->have_cols) != 0)
            return -1;
        a->spec.per_row = (int32_t)v; /* random's columns (spmv_gen_spec) */
        return 0;
    case 'Z': return count_opt("nnz", optarg, 0, INT64_MAX, &a->spec.dense_len, &a->have_nnz); /* random's nnz */
    case 'p':
        if (count_opt("per-row", optarg, 0, INT32_MAX, &v, &a->have_per_row) != 0)
            return -1;
        a->spec.per_row = (int32_t)v;
        return 0;
    case 'd': return count_opt("dense-len", optarg, 0, INT64_MAX, &a->spec.dense_len, &a->have_dense_len);
    case 's':
        if (parse_u64(optarg, &a->spec.seed) != 0) {
            fprintf(stderr, "spmv-gen: --seed wants an unsigned integer, got '%s'\n", optarg);
            return -1;
        }
        return 0;
    case 'o': a->out = optarg; return 0;
    case 'z': a->gzip = 1; return 0;
    case 'N':
        if (optarg && strcmp(optarg, "stored") != 0 && strcmp(optarg, "deflated") != 0) {
            fprintf(stderr, "spmv-gen: --npz takes stored or deflated, not '%s'\n", optarg);
            return -1;
        }
        a->npz = optarg && strcmp(optarg, "stored") == 0 ? 2 : 1;
        return 0;
    case 'h': usage(stdout); exit(0);
    default: return -1;
    }
}

/* The options that go together: random takes --rows, --cols and --nnz and
 * nothing of the others' shape; the others --n. */
static int check_shape_opts(const gen_args *a)
{
    bool random = a->spec.kind == SPMV_GEN_RANDOM;
    if (random && (a->have_n || a->have_per_row || a->have_dense_len || !a->have_rows || !a->have_cols ||
                   !a->have_nnz)) {
        fprintf(stderr, "spmv-gen: --kind random takes --rows, --cols and --nnz (not --n, --per-row, --dense-len)\n");
        return -1;
    }
    if (!random && (a->have_rows || a->have_cols || a->have_nnz)) {
        fprintf(stderr, "spmv-gen: --rows, --cols and --nnz are for --kind random only\n");
        return -1;
    }
    if (!random && !a->have_n) {
        fprintf(stderr, "spmv-gen: --n is required\n");
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, gen_args *a)
{
    static const struct option opts[] = {
        {"kind", required_argument, 0, 'k'},      {"n", required_argument, 0, 'n'},
        {"per-row", required_argument, 0, 'p'},   {"dense-len", required_argument, 0, 'd'},
        {"seed", required_argument, 0, 's'},      {"out", required_argument, 0, 'o'},
        {"gzip", no_argument, 0, 'z'},            {"help", no_argument, 0, 'h'},
        {"npz", optional_argument, 0, 'N'},       {"rows", required_argument, 0, 'R'},
        {"cols", required_argument, 0, 'C'},      {"nnz", required_argument, 0, 'Z'},
        {0, 0, 0, 0},
    };
    int c;
    memset(a, 0, sizeof *a);
    a->spec.seed = 1;
    while ((c = getopt_long(argc, argv, "k:n:p:d:s:o:zh", opts, NULL)) != -1)
        if (parse_opt(c, a) != 0)
            return -1;
    if (a->gzip && a->npz) {
        fprintf(stderr, "spmv-gen: --gzip and --npz exclude each other (an .npz compresses its members)\n");
        return -1;
    }
    if (optind != argc || !a->have_kind || !a->out) {
        fprintf(stderr, "spmv-gen: --kind and --out are required\n");
        return -1;
    }
    if (check_shape_opts(a) != 0)
        return -1;
    spmv_gen_defaults(&a->spec, a->have_per_row, a->have_dense_len, true);
    return 0;
}

int main(int argc, char **argv)
{
    gen_args a;
    spmv_coo m;
    spmv_error err = {0};
    char *tmp = NULL;
    int rc = 1;

    memset(&m, 0, sizeof m);
    if (parse_args(argc, argv, &a) != 0) {
        usage(stderr);
        return 2;
    }
    if (spmv_gen(&a.spec, &m, &err) != SPMV_OK) {
        fprintf(stderr, "spmv-gen: %s\n", err.message);
        goto fail;
    }
    const char *path = a.out;
    if (a.npz) {
        if (spmv_npz_write_file(a.out, &m, a.npz == 1, &err) != SPMV_OK) {
            fprintf(stderr, "spmv-gen: %s\n", err.message);
            goto fail;
        }
        printf("rows %" PRId32 " cols %" PRId32 " nnz %" PRId64 "\n", m.rows, m.cols, m.nnz);
        rc = 0;
        goto fail;
    }
    if (a.gzip) {
        size_t len = strlen(a.out) + sizeof ".tmp";
        if (!(tmp = malloc(len)))
            goto fail;
        snprintf(tmp, len, "%s.tmp", a.out);
        path = tmp;
    }
    if (spmv_mm_write_file(path, &m, &err) != SPMV_OK) {
        fprintf(stderr, "spmv-gen: %s: %s\n", path, err.message);
        goto fail;
    }
    if (a.gzip && gzip_file(tmp, a.out) != 0) {
        fprintf(stderr, "spmv-gen: compressing into %s failed\n", a.out);
        remove(tmp);
        goto fail;
    }
    printf("rows %" PRId32 " cols %" PRId32 " nnz %" PRId64 "\n", m.rows, m.cols, m.nnz);
    rc = 0;
fail:
    free(tmp);
    spmv_coo_free(&m);
    return rc;
}
