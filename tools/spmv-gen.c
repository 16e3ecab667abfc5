/* spmv-gen.c — writes a seeded generated matrix as a Matrix Market file.
 *
 *   spmv-gen --kind K --n N [--per-row P] [--dense-len L] [--seed S] [--gzip | --npz[=stored]] --out FILE
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
            "  K: poisson2d (n^2 rows), poisson3d (n^3 rows), stencil27 (n^3 rows), uniform, powerlaw,\n"
            "     graph_uniform, graph_powerlaw (their patterns, every value 1),\n"
            "     banded_dense_row, lp (n x 2n), band (entries by formula: spmv_band_value)\n"
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
    int have_kind, have_n, have_per_row, have_dense_len;
} gen_args;

static int parse_args(int argc, char **argv, gen_args *a)
{
    static const struct option opts[] = {
        {"kind", required_argument, 0, 'k'},      {"n", required_argument, 0, 'n'},
        {"per-row", required_argument, 0, 'p'},   {"dense-len", required_argument, 0, 'd'},
        {"seed", required_argument, 0, 's'},      {"out", required_argument, 0, 'o'},
        {"gzip", no_argument, 0, 'z'},            {"help", no_argument, 0, 'h'},
        {"npz", optional_argument, 0, 'N'},
        {0, 0, 0, 0},
    };
    int c;
    int64_t v;

    memset(a, 0, sizeof *a);
    a->spec.seed = 1;
    while ((c = getopt_long(argc, argv, "k:n:p:d:s:o:zh", opts, NULL)) != -1) {
        switch (c) {
        case 'k':
            if (spmv_gen_kind_parse(optarg, &a->spec.kind) != SPMV_OK) {
                fprintf(stderr, "spmv-gen: unknown kind '%s'\n", optarg);
                return -1;
            }
            a->have_kind = 1;
            break;
        case 'n':
            if (parse_i64(optarg, &a->spec.n) != 0 || a->spec.n < 1) {
                fprintf(stderr, "spmv-gen: --n wants a positive integer, got '%s'\n", optarg);
                return -1;
            }
            a->have_n = 1;
            break;
        case 'p':
            if (parse_i64(optarg, &v) != 0 || v < 0 || v > INT32_MAX) {
                fprintf(stderr, "spmv-gen: --per-row wants an integer in [0, %d], got '%s'\n", INT32_MAX, optarg);
                return -1;
            }
            a->spec.per_row = (int32_t)v;
            a->have_per_row = 1;
            break;
        case 'd':
            if (parse_i64(optarg, &a->spec.dense_len) != 0 || a->spec.dense_len < 0) {
                fprintf(stderr, "spmv-gen: --dense-len wants a non-negative integer, got '%s'\n", optarg);
                return -1;
            }
            a->have_dense_len = 1;
            break;
        case 's':
            if (parse_u64(optarg, &a->spec.seed) != 0) {
                fprintf(stderr, "spmv-gen: --seed wants an unsigned integer, got '%s'\n", optarg);
                return -1;
            }
            break;
        case 'o': a->out = optarg; break;
        case 'z': a->gzip = 1; break;
        case 'N':
            if (optarg && strcmp(optarg, "stored") != 0 && strcmp(optarg, "deflated") != 0) {
                fprintf(stderr, "spmv-gen: --npz takes stored or deflated, not '%s'\n", optarg);
                return -1;
            }
            a->npz = optarg && strcmp(optarg, "stored") == 0 ? 2 : 1;
            break;
        case 'h': usage(stdout); exit(0);
        default: return -1;
        }
    }
    if (a->gzip && a->npz) {
        fprintf(stderr, "spmv-gen: --gzip and --npz exclude each other (an .npz compresses its members)\n");
        return -1;
    }
    if (optind != argc || !a->have_kind || !a->have_n || !a->out) {
        fprintf(stderr, "spmv-gen: --kind, --n and --out are required\n");
        return -1;
    }
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
