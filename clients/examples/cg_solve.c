/* cg_solve.c — conjugate gradient on a matrix that lives in spmvd.
 *
 *   cg_solve [--url URL] [--kernel K] [--tol T] [--maxit N] [--x-out FILE] MATRIX.mtx
 *
 * The example of what the service is for: a solver process that keeps only
 * vectors, while the matrix stays resident in the daemon. It uploads the
 * matrix (float64), sets b = A·1 with one spmv call, and solves A x = b by
 * plain (unpreconditioned) conjugate gradient, where every A·p is one
 * binary spmv call and the dot products and axpys are local. It prints the
 * recursive residual per iteration, where the time went (network and HTTP,
 * the daemon's queue, the kernel itself, local vector work) and, last, the
 * TRUE relative residual ||b - A x|| / ||b|| from one more spmv:
 *
 *   converged in N iterations, relative residual R
 *
 * The matrix must be symmetric positive definite; CG stops with an error
 * when p·Ap <= 0 shows it is not. The uploaded matrix is deleted at exit.
 * Exit status: 0 converged, 1 usage, 2 did not converge or not SPD, 3 the
 * daemon refused or could not be reached (its message is printed).
 */
#include "spmvclient.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct solver {
    spmv_client *h;
    const char *id;
    const char *kernel;
    size_t n;
    /* time split, all in ms, summed over every spmv call */
    double request_ms, queue_ms, kernel_ms, local_ms;
    long calls;
} solver;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* y = A·x on the daemon, one run, no warm-up: CG needs the product, not a
 * benchmark. Books the time split. */
static spmv_client_status apply(solver *s, const double *x, double *y)
{
    spmv_client_spmv_options o = {.kernel = s->kernel, .runs = 1, .warmup = -1};
    spmv_client_spmv_result r;
    spmv_client_status st = spmv_client_multiply(s->h, s->id, SPMV_CLIENT_FLOAT64, x, s->n, y, s->n, &o, &r);
    if (st != SPMV_CLIENT_OK) {
        fprintf(stderr, "cg_solve: spmv: %s: %s\n", spmv_client_strerror(st), spmv_client_errmsg(s->h));
        return st;
    }
    s->calls++;
    s->request_ms += r.request_ms;
    if (isfinite(r.queue_ms)) s->queue_ms += r.queue_ms;
    if (isfinite(r.stats.mean_ms)) s->kernel_ms += r.stats.mean_ms * (r.stats.runs > 0 ? r.stats.runs : 1);
    return SPMV_CLIENT_OK;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void print_time_split(const solver *s)
{
    double net = s->request_ms - s->queue_ms - s->kernel_ms;
    double total = s->request_ms + s->local_ms;
    if (total <= 0) total = 1;
    printf("time: %ld spmv calls, %.1f ms in all\n", s->calls, s->request_ms + s->local_ms);
    printf("  network+http %10.3f ms  %5.1f%%\n", net, 100 * net / total);
    printf("  queue        %10.3f ms  %5.1f%%\n", s->queue_ms, 100 * s->queue_ms / total);
    printf("  kernel       %10.3f ms  %5.1f%%\n", s->kernel_ms, 100 * s->kernel_ms / total);
    printf("  local        %10.3f ms  %5.1f%%\n", s->local_ms, 100 * s->local_ms / total);
}

/* The solve itself; x in, x out. Returns 0 converged, 2 not, 3 daemon. */
static int conjugate_gradient(solver *s, const double *b, double *x, double tol, long maxit, long *iters)
{
    size_t n = s->n;
    double *r = malloc(n * sizeof *r), *p = malloc(n * sizeof *p), *ap = malloc(n * sizeof *ap);
    int rc = 3;
    if (!r || !p || !ap) {
        fprintf(stderr, "cg_solve: out of memory\n");
        goto done;
    }
    memset(x, 0, n * sizeof *x);
    memcpy(r, b, n * sizeof *r);
    memcpy(p, b, n * sizeof *p);
    double bnorm = sqrt(dot(b, b, n)), rr = dot(r, r, n);
    *iters = 0;
    rc = 2;
    if (bnorm == 0) { /* x = 0 solves it exactly */
        rc = 0;
        goto done;
    }
    printf("iter %5d  residual %.6e\n", 0, sqrt(rr) / bnorm);
    for (long k = 1; k <= maxit; k++) {
        if (apply(s, p, ap) != SPMV_CLIENT_OK) {
            rc = 3;
            goto done;
        }
        double t0 = now_ms(), pap = dot(p, ap, n);
        if (!(pap > 0)) {
            fprintf(stderr, "cg_solve: p.Ap = %g at iteration %ld: the matrix is not positive definite\n", pap, k);
            goto done;
        }
        double alpha = rr / pap;
        for (size_t i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * ap[i];
        }
        double rr_new = dot(r, r, n), beta = rr_new / rr;
        rr = rr_new;
        for (size_t i = 0; i < n; i++) p[i] = r[i] + beta * p[i];
        s->local_ms += now_ms() - t0;
        *iters = k;
        printf("iter %5ld  residual %.6e\n", k, sqrt(rr) / bnorm);
        if (sqrt(rr) / bnorm < tol) {
            rc = 0;
            break;
        }
    }
done:
    free(r);
    free(p);
    free(ap);
    return rc;
}

/* ||b - A x|| / ||b||, with one more spmv; NAN when the call fails. */
static double true_residual(solver *s, const double *b, const double *x)
{
    double *ax = malloc(s->n * sizeof *ax), num = 0, den = 0;
    if (!ax || apply(s, x, ax) != SPMV_CLIENT_OK) {
        free(ax);
        return NAN;
    }
    for (size_t i = 0; i < s->n; i++) {
        num += (b[i] - ax[i]) * (b[i] - ax[i]);
        den += b[i] * b[i];
    }
    free(ax);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int write_x(const char *path, const double *x, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    for (size_t i = 0; i < n; i++) fprintf(f, "%.17g\n", x[i]);
    if (fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: cg_solve [--url URL] [--kernel K] [--tol T] [--maxit N] [--x-out FILE] MATRIX.mtx\n"
                    "  --url    daemon address (default $SPMV_URL, else http://127.0.0.1:8080)\n"
                    "  --kernel kernel for A*p (default: the daemon's choice)\n"
                    "  --tol    stop when the recursive residual ||r||/||b|| is under T (default 1e-10)\n"
                    "  --maxit  at most N iterations (default 10000)\n"
                    "  --x-out  write x, one value per line, 17 significant digits\n"
                    "The token, if the daemon needs one, comes from $SPMV_TOKEN.\n");
    return 1;
}

/* Uploads, solves, reports, writes x; the caller deletes the matrix. */
static int solve(solver *s, double tol, long maxit, const char *x_out)
{
    double *ones = malloc(s->n * sizeof *ones), *b = malloc(s->n * sizeof *b), *x = malloc(s->n * sizeof *x);
    long iters = 0;
    int rc = 3;
    if (!ones || !b || !x) {
        fprintf(stderr, "cg_solve: out of memory for n = %zu\n", s->n);
        goto done;
    }
    for (size_t i = 0; i < s->n; i++) ones[i] = 1.0;
    if (apply(s, ones, b) != SPMV_CLIENT_OK) /* b = A·1, so x = 1 is the answer */
        goto done;
    rc = conjugate_gradient(s, b, x, tol, maxit, &iters);
    if (rc == 3)
        goto done;
    double res = true_residual(s, b, x);
    print_time_split(s);
    if (x_out && write_x(x_out, x, s->n) != 0) {
        rc = 3;
        goto done;
    }
    if (isnan(res))
        rc = 3;
    else if (rc == 0)
        printf("converged in %ld iterations, relative residual %.3e\n", iters, res);
    else
        printf("did not converge in %ld iterations, relative residual %.3e\n", iters, res);
done:
    free(ones);
    free(b);
    free(x);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},   {"kernel", required_argument, NULL, 'k'},
        {"tol", required_argument, NULL, 't'},   {"maxit", required_argument, NULL, 'm'},
        {"x-out", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *url = getenv("SPMV_URL"), *x_out = NULL;
    double tol = 1e-10;
    long maxit = 10000;
    solver s = {0};
    char *end;
    int opt;

    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 'u': url = optarg; break;
        case 'k': s.kernel = optarg; break;
        case 't':
            tol = strtod(optarg, &end);
            if (*end || !(tol > 0 && tol < 1)) return usage();
            break;
        case 'm':
            maxit = strtol(optarg, &end, 10);
            if (*end || maxit < 1) return usage();
            break;
        case 'o': x_out = optarg; break;
        default: return usage();
        }
    }
    if (optind != argc - 1) return usage();
    if (!url || !*url) url = "http://127.0.0.1:8080";

    spmv_client_options co = {.token = getenv("SPMV_TOKEN")};
    spmv_client_status st;
    if (!(s.h = spmv_client_new(url, &co, &st))) {
        fprintf(stderr, "cg_solve: %s: %s\n", url, spmv_client_strerror(st));
        return 1;
    }
    spmv_client_upload_options uo = {.dtype = "float64"};
    spmv_client_matrix *m = NULL;
    int rc = 3;
    if ((st = spmv_client_upload_file(s.h, argv[optind], &uo, &m)) != SPMV_CLIENT_OK) {
        fprintf(stderr, "cg_solve: %s: %s: %s\n", argv[optind], spmv_client_strerror(st), spmv_client_errmsg(s.h));
        goto done;
    }
    printf("uploaded %s as %s: %" PRId64 " x %" PRId64 ", %" PRId64 " non-zeros\n", argv[optind], m->id, m->rows,
           m->cols, m->nnz);
    if (m->rows != m->cols || m->rows < 1 || (uint64_t)m->rows > SIZE_MAX / sizeof(double)) {
        fprintf(stderr, "cg_solve: CG needs a square matrix of a size this host can hold\n");
        rc = 2;
    } else {
        s.id = m->id;
        s.n = (size_t)m->rows;
        rc = solve(&s, tol, maxit, x_out);
    }
    if ((st = spmv_client_delete(s.h, m->id)) != SPMV_CLIENT_OK)
        fprintf(stderr, "cg_solve: deleting %s: %s: %s\n", m->id, spmv_client_strerror(st), spmv_client_errmsg(s.h));
done:
    spmv_client_matrix_free(m);
    spmv_client_free(s.h);
    return rc;
}
