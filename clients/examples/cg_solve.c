/* cg_solve.c — conjugate gradient on a matrix that lives in spmvd, three ways.
 *
 *   cg_solve [--url URL] [--mode local|resident|server] [--kernel K] [--tol T]
 *            [--maxit N] [--iters N] [--x-out FILE] [--json] (MATRIX.mtx | --matrix-id ID)
 *
 * The example of what the service is for: a solver whose matrix stays
 * resident in the daemon. It uploads the matrix (float64) or takes one
 * already there (--matrix-id), sets b = A·1 with one binary spmv, and
 * solves A x = b by plain (unpreconditioned) conjugate gradient in one of
 * three modes:
 *
 *   local     the vectors live here; every A·p is one binary spmv request
 *             (p out, Ap back) and the dots and axpys run here.
 *   resident  x, r, p and Ap are vectors resident in the daemon, made
 *             `like` the matrix; each iteration is exactly two /v1/ops
 *             requests that carry only scalars:
 *               1: [p = r + beta·p,] Ap = A·p, pap = p·Ap
 *               2: x += alpha·p, r -= alpha·Ap, rr = r·r
 *             alpha = rr/pap and beta = rr_new/rr are computed here, and
 *             the p update waits for the next iteration's first request.
 *   server    b uploaded once as a binary vector, then one POST
 *             /v1/matrices/{id}/solve with method cg (x back in binary).
 *
 * It prints the recursive residual per iteration, where the time went
 * (total, per iteration, inside requests — network and HTTP, the daemon's
 * queue, the daemon's work — against the client's own arithmetic) and,
 * last, the TRUE relative residual ||b - A x|| / ||b|| from one more spmv:
 *
 *   converged in N iterations, relative residual R
 *
 * With --json one more line follows: the same numbers as one JSON object,
 * for scripts. --iters N runs exactly N iterations whatever the residual
 * (tol 0; in server mode the smallest tol the daemon takes for float64,
 * SERVER_TOL_MIN, which no few iterations reach, and maxit N), for
 * benchmarks: the last line then reads "ran N iterations, ...".
 *
 * The matrix must be symmetric positive definite; CG stops with an error
 * when p·Ap <= 0 shows it is not. An uploaded matrix and every vector made
 * here are deleted at exit; a --matrix-id matrix is left alone.
 * Exit status: 0 converged (or ran its --iters), 1 usage, 2 did not
 * converge or not SPD, 3 the daemon refused or could not be reached (its
 * message is printed).
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

/* The smallest tol the daemon's /solve takes for a float64 matrix: 10 eps
 * (below it the residual is rounding noise, and the request is a 400). */
#define SERVER_TOL_MIN 2.3e-15

enum mode { MODE_LOCAL, MODE_RESIDENT, MODE_SERVER };
static const char *const mode_names[] = {"local", "resident", "server"};

typedef struct solver {
    spmv_client *h;
    const char *id;
    const char *kernel;
    size_t n;
    enum mode mode;
    double tol;               /* 0: run exactly maxit iterations */
    long maxit;
    /* time split of the solve, in ms */
    double total_ms;          /* wall time of the solve (setup included) */
    double request_ms;        /* inside HTTP exchanges, client side */
    double queue_ms;          /* the daemon's queue, as it reports it */
    double daemon_ms;         /* the daemon's work: kernel runs, ops steps, the solve */
    double client_ms;         /* the client's own arithmetic */
    long requests;
    long iterations;
    const char *stop;         /* "converged", "maxit", "iters", "breakdown" */
} solver;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void report(const solver *s, const char *what, spmv_client_status st)
{
    fprintf(stderr, "cg_solve: %s: %s: %s\n", what, spmv_client_strerror(st), spmv_client_errmsg(s->h));
}

/* y = A·x on the daemon, one run, no warm-up: CG needs the product, not a
 * benchmark. Books the time split when `book`. */
static spmv_client_status apply(solver *s, const double *x, double *y, bool book)
{
    spmv_client_spmv_options o = {.kernel = s->kernel, .runs = 1, .warmup = -1};
    spmv_client_spmv_result r;
    spmv_client_status st = spmv_client_multiply(s->h, s->id, SPMV_CLIENT_FLOAT64, x, s->n, y, s->n, &o, &r);
    if (st != SPMV_CLIENT_OK) {
        report(s, "spmv", st);
        return st;
    }
    if (book) {
        s->requests++;
        s->request_ms += r.request_ms;
        if (isfinite(r.queue_ms)) s->queue_ms += r.queue_ms;
        if (isfinite(r.stats.mean_ms)) s->daemon_ms += r.stats.mean_ms * (r.stats.runs > 0 ? r.stats.runs : 1);
    }
    return SPMV_CLIENT_OK;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* After an iteration: prints the residual, decides whether to stop. */
static bool done_after(solver *s, long k, double rr, double bnorm)
{
    s->iterations = k;
    printf("iter %5ld  residual %.6e\n", k, sqrt(rr) / bnorm);
    if (s->tol > 0 && sqrt(rr) / bnorm < s->tol) {
        s->stop = "converged";
        return true;
    }
    if (k == s->maxit) {
        s->stop = s->tol > 0 ? "maxit" : "iters";
        return true;
    }
    return false;
}

static bool positive_curvature(solver *s, double pap, long k)
{
    if (pap > 0)
        return true;
    fprintf(stderr, "cg_solve: p.Ap = %g at iteration %ld: the matrix is not positive definite\n", pap, k);
    s->stop = "breakdown";
    return false;
}

/* ------------------------------------------------------------------ local */

/* Returns 0 solved (or ran its iterations), 2 not, 3 daemon. */
static int solve_local(solver *s, const double *b, double *x, double bnorm)
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
    double rr = dot(r, r, n);
    rc = 2;
    for (long k = 1; k <= s->maxit; k++) {
        if (apply(s, p, ap, true) != SPMV_CLIENT_OK) {
            rc = 3;
            goto done;
        }
        double t0 = now_ms(), pap = dot(p, ap, n);
        if (!positive_curvature(s, pap, k))
            goto done;
        double alpha = rr / pap;
        for (size_t i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * ap[i];
        }
        double rr_new = dot(r, r, n), beta = rr_new / rr;
        rr = rr_new;
        for (size_t i = 0; i < n; i++) p[i] = r[i] + beta * p[i];
        s->client_ms += now_ms() - t0;
        if (done_after(s, k, rr, bnorm))
            break;
    }
    rc = strcmp(s->stop, "maxit") == 0 ? 2 : 0;
done:
    free(r);
    free(p);
    free(ap);
    return rc;
}

/* --------------------------------------------------------------- resident */

/* One /v1/ops request; books its time. */
static spmv_client_status run_ops(solver *s, const spmv_client_ops *ops, spmv_client_ops_result **res)
{
    spmv_client_status st = spmv_client_ops_run(s->h, ops, res);
    if (st != SPMV_CLIENT_OK) {
        report(s, "ops", st);
        return st;
    }
    s->requests++;
    s->request_ms += (*res)->request_ms;
    if (isfinite((*res)->queue_ms)) s->queue_ms += (*res)->queue_ms;
    if (isfinite((*res)->total_ms)) s->daemon_ms += (*res)->total_ms;
    return SPMV_CLIENT_OK;
}

/* A resident vector like the matrix: b's values, or zeros. Books its time. */
static spmv_client_status make_vector(solver *s, const double *values, spmv_client_vector **v)
{
    spmv_client_vector_options o = {.like = s->id};
    double t0 = now_ms();
    spmv_client_status st = values ? spmv_client_vector_create(s->h, SPMV_CLIENT_FLOAT64, values, s->n, &o, v)
                                   : spmv_client_vector_fill(s->h, 0, 0.0, &o, v);
    s->request_ms += now_ms() - t0;
    s->requests++;
    if (st != SPMV_CLIENT_OK)
        report(s, "creating a vector", st);
    return st;
}

static int solve_resident(solver *s, const double *b, double *x, double bnorm)
{
    spmv_client_vector *vx = NULL, *vr = NULL, *vp = NULL, *vap = NULL;
    spmv_client_ops *ops = spmv_client_ops_new();
    spmv_client_ops_result *res = NULL;
    int rc = 3;

    if (!ops) {
        fprintf(stderr, "cg_solve: out of memory\n");
        return 3;
    }
    if (make_vector(s, NULL, &vx) != SPMV_CLIENT_OK || make_vector(s, b, &vr) != SPMV_CLIENT_OK ||
        make_vector(s, b, &vp) != SPMV_CLIENT_OK || make_vector(s, NULL, &vap) != SPMV_CLIENT_OK)
        goto done;
    double rr = dot(b, b, s->n), beta = 0;
    rc = 2;
    for (long k = 1; k <= s->maxit; k++) {
        /* request 1: the previous iteration's p update, Ap = A·p, p·Ap */
        double t0 = now_ms();
        spmv_client_ops_clear(ops);
        if (k > 1)
            spmv_client_ops_axpby(ops, 1.0, vr->id, beta, vp->id);
        spmv_client_ops_spmv(ops, s->id, vp->id, vap->id, 1.0, 0.0, 'n', s->kernel);
        spmv_client_ops_dot(ops, vp->id, vap->id, "pap");
        s->client_ms += now_ms() - t0;
        if (run_ops(s, ops, &res) != SPMV_CLIENT_OK) {
            rc = 3;
            goto done;
        }
        double pap = spmv_client_ops_result_get(res, "pap", 0);
        spmv_client_ops_result_free(res);
        res = NULL;
        if (!positive_curvature(s, pap, k))
            goto done;
        /* request 2: x += alpha·p, r -= alpha·Ap, r·r */
        t0 = now_ms();
        double alpha = rr / pap;
        spmv_client_ops_clear(ops);
        spmv_client_ops_axpy(ops, alpha, vp->id, vx->id);
        spmv_client_ops_axpy(ops, -alpha, vap->id, vr->id);
        spmv_client_ops_dot(ops, vr->id, vr->id, "rr");
        s->client_ms += now_ms() - t0;
        if (run_ops(s, ops, &res) != SPMV_CLIENT_OK) {
            rc = 3;
            goto done;
        }
        double rr_new = spmv_client_ops_result_get(res, "rr", 0);
        spmv_client_ops_result_free(res);
        res = NULL;
        if (!isfinite(rr_new)) {
            fprintf(stderr, "cg_solve: the daemon's r.r is %g at iteration %ld\n", rr_new, k);
            rc = 3;
            goto done;
        }
        t0 = now_ms();
        beta = rr_new / rr;
        rr = rr_new;
        s->client_ms += now_ms() - t0;
        if (done_after(s, k, rr, bnorm))
            break;
    }
    rc = strcmp(s->stop, "maxit") == 0 ? 2 : 0;
done:
    /* x comes home for the true residual and --x-out. */
    if (vx && rc != 3) {
        spmv_client_status st = spmv_client_vector_read(s->h, vx->id, SPMV_CLIENT_FLOAT64, x, s->n, NULL);
        if (st != SPMV_CLIENT_OK) {
            report(s, "reading x", st);
            rc = 3;
        }
    }
    spmv_client_vector *vs[] = {vx, vr, vp, vap};
    for (int i = 0; i < 4; i++) {
        if (vs[i] && spmv_client_vector_delete(s->h, vs[i]->id) != SPMV_CLIENT_OK)
            fprintf(stderr, "cg_solve: deleting vector %s: %s\n", vs[i]->id, spmv_client_errmsg(s->h));
        spmv_client_vector_free(vs[i]);
    }
    spmv_client_ops_free(ops);
    return rc;
}

/* ----------------------------------------------------------------- server */

/* b goes up once as a binary vector (a JSON array of millions of numbers
 * would cost more than the solve), x comes back binary. */
static int solve_server(solver *s, const double *b, double *x)
{
    spmv_client_vector_options like = {.like = s->id};
    spmv_client_vector *vb = NULL;
    double t0 = now_ms();
    spmv_client_status st = spmv_client_vector_create(s->h, SPMV_CLIENT_FLOAT64, b, s->n, &like, &vb);
    if (st != SPMV_CLIENT_OK) {
        report(s, "vector b", st);
        return 3;
    }
    double b_ms = now_ms() - t0;
    spmv_client_solve_options o = {.method = "cg", .tol = s->tol > 0 ? s->tol : SERVER_TOL_MIN, .maxit = s->maxit,
                                   .kernel = s->kernel, .b_vector = vb->id};
    spmv_client_solve_result *r = NULL;
    st = spmv_client_solve(s->h, s->id, &o, x, s->n, &r);
    spmv_client_vector_delete(s->h, vb->id);
    spmv_client_vector_free(vb);
    if (st != SPMV_CLIENT_OK) {
        report(s, "solve", st);
        return 3;
    }
    for (size_t i = 0; i < r->nhistory; i++)
        if (i > 0) printf("iter %5zu  residual %.6e\n", i, r->history[i]);
    s->requests = 3; /* b up, the solve, b's delete */
    s->request_ms = r->request_ms + b_ms;
    s->queue_ms = isfinite(r->queue_ms) ? r->queue_ms : 0;
    s->daemon_ms = isfinite(r->total_ms) ? r->total_ms : 0;
    s->iterations = (long)r->iterations;
    int rc = 0;
    if (strcmp(r->stop_reason, "converged") == 0) {
        s->stop = "converged";
    } else if (strcmp(r->stop_reason, "maxit") == 0) {
        s->stop = s->tol > 0 ? "maxit" : "iters";
        rc = s->tol > 0 ? 2 : 0;
    } else {
        fprintf(stderr, "cg_solve: the daemon's solve stopped: %s: %s\n", r->stop_reason, r->stop_detail);
        s->stop = "breakdown";
        rc = 2;
    }
    spmv_client_solve_result_free(r);
    return rc;
}

/* ----------------------------------------------------------------- report */

static void print_time_split(const solver *s)
{
    double net = s->request_ms - s->queue_ms - s->daemon_ms;
    double total = s->total_ms > 0 ? s->total_ms : 1;
    long it = s->iterations > 0 ? s->iterations : 1;
    printf("time: mode %s, %ld iterations, %ld requests, %.3f ms in all, %.4f ms per iteration\n",
           mode_names[s->mode], s->iterations, s->requests, s->total_ms, s->total_ms / (double)it);
    printf("  requests      %10.3f ms  %5.1f%%\n", s->request_ms, 100 * s->request_ms / total);
    printf("    network+http %9.3f ms  %5.1f%%\n", net, 100 * net / total);
    printf("    queue        %9.3f ms  %5.1f%%\n", s->queue_ms, 100 * s->queue_ms / total);
    printf("    kernel       %9.3f ms  %5.1f%%  (the daemon's work: %s)\n", s->daemon_ms, 100 * s->daemon_ms / total,
           s->mode == MODE_LOCAL ? "spmv runs" : s->mode == MODE_RESIDENT ? "ops steps" : "the whole solve");
    printf("  client        %10.3f ms  %5.1f%%  (arithmetic here)\n", s->client_ms, 100 * s->client_ms / total);
}

static void print_json_line(const solver *s, double relres)
{
    long it = s->iterations > 0 ? s->iterations : 1;
    printf("{\"mode\":\"%s\",\"kernel\":\"%s\",\"n\":%zu,\"iterations\":%ld,\"stop\":\"%s\",\"requests\":%ld,"
           "\"total_ms\":%.6g,\"per_iteration_ms\":%.6g,\"request_ms\":%.6g,\"queue_ms\":%.6g,\"daemon_ms\":%.6g,"
           "\"client_ms\":%.6g,\"relres\":%.6g}\n",
           mode_names[s->mode], s->kernel ? s->kernel : "auto", s->n, s->iterations, s->stop, s->requests,
           s->total_ms, s->total_ms / (double)it, s->request_ms, s->queue_ms, s->daemon_ms, s->client_ms,
           isfinite(relres) ? relres : -1.0);
}

/* ||b - A x|| / ||b||, with one more spmv; NAN when the call fails. */
static double true_residual(solver *s, const double *b, const double *x)
{
    double *ax = malloc(s->n * sizeof *ax), num = 0, den = 0;
    if (!ax || apply(s, x, ax, false) != SPMV_CLIENT_OK) {
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
    fprintf(stderr,
            "usage: cg_solve [--url URL] [--mode local|resident|server] [--kernel K] [--tol T] [--maxit N]\n"
            "                [--iters N] [--x-out FILE] [--json] (MATRIX.mtx | --matrix-id ID)\n"
            "  --url        daemon address (default $SPMVD_URL, else $SPMV_URL, else http://127.0.0.1:8080)\n"
            "  --mode       local: vectors here, one binary spmv per iteration (default);\n"
            "               resident: x, r, p, Ap in the daemon, two /v1/ops requests per iteration;\n"
            "               server: one /solve request\n"
            "  --kernel     kernel for A*p (default: the daemon's choice)\n"
            "  --tol        stop when the recursive residual ||r||/||b|| is under T (default 1e-10)\n"
            "  --maxit      at most N iterations (default 10000)\n"
            "  --iters      run exactly N iterations whatever the residual (tol 0), for benchmarks\n"
            "  --matrix-id  solve with a matrix already on the daemon (left there) instead of uploading\n"
            "  --x-out      write x, one value per line, 17 significant digits\n"
            "  --json       end with one line of JSON: the iterations and the time split\n"
            "The token, if the daemon needs one, comes from $SPMV_TOKEN.\n");
    return 1;
}

/* Sets b = A·1, solves in the chosen mode, reports, writes x. */
static int solve(solver *s, const char *x_out, bool json)
{
    double *ones = malloc(s->n * sizeof *ones), *b = malloc(s->n * sizeof *b), *x = calloc(s->n, sizeof *x);
    int rc = 3;
    if (!ones || !b || !x) {
        fprintf(stderr, "cg_solve: out of memory for n = %zu\n", s->n);
        goto done;
    }
    for (size_t i = 0; i < s->n; i++) ones[i] = 1.0;
    if (apply(s, ones, b, false) != SPMV_CLIENT_OK) /* b = A·1, so x = 1 is the answer */
        goto done;
    double bnorm = sqrt(dot(b, b, s->n));
    s->stop = "converged";
    printf("iter %5d  residual %.6e\n", 0, bnorm > 0 ? 1.0 : 0.0);
    double t0 = now_ms();
    if (bnorm == 0) /* x = 0 solves it exactly */
        rc = 0;
    else if (s->mode == MODE_LOCAL)
        rc = solve_local(s, b, x, bnorm);
    else if (s->mode == MODE_RESIDENT)
        rc = solve_resident(s, b, x, bnorm);
    else
        rc = solve_server(s, b, x);
    s->total_ms = now_ms() - t0;
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
    else if (strcmp(s->stop, "iters") == 0)
        printf("ran %ld iterations, relative residual %.3e\n", s->iterations, res);
    else if (rc == 0)
        printf("converged in %ld iterations, relative residual %.3e\n", s->iterations, res);
    else
        printf("did not converge in %ld iterations, relative residual %.3e\n", s->iterations, res);
    if (json && rc != 3)
        print_json_line(s, res);
done:
    free(ones);
    free(b);
    free(x);
    return rc;
}

/* The command line beyond the solver's own settings. */
typedef struct cli {
    const char *url, *x_out, *matrix_id, *path;
    bool json;
} cli;

/* Reads the command line into *s and *a; 0, or usage()'s exit status. */
static int parse_args(int argc, char **argv, solver *s, cli *a)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},   {"kernel", required_argument, NULL, 'k'},
        {"tol", required_argument, NULL, 't'},   {"maxit", required_argument, NULL, 'm'},
        {"x-out", required_argument, NULL, 'o'}, {"mode", required_argument, NULL, 'M'},
        {"iters", required_argument, NULL, 'i'}, {"matrix-id", required_argument, NULL, 'I'},
        {"json", no_argument, NULL, 'j'},        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long iters = 0;
    char *end;
    int opt;

    a->url = NULL;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 'u': a->url = optarg; break;
        case 'k': s->kernel = optarg; break;
        case 't':
            s->tol = strtod(optarg, &end);
            if (*end || !(s->tol > 0 && s->tol < 1)) return usage();
            break;
        case 'm':
            s->maxit = strtol(optarg, &end, 10);
            if (*end || s->maxit < 1) return usage();
            break;
        case 'i':
            iters = strtol(optarg, &end, 10);
            if (*end || iters < 1) return usage();
            break;
        case 'M':
            if (strcmp(optarg, "local") == 0) s->mode = MODE_LOCAL;
            else if (strcmp(optarg, "resident") == 0) s->mode = MODE_RESIDENT;
            else if (strcmp(optarg, "server") == 0) s->mode = MODE_SERVER;
            else return usage();
            break;
        case 'I': a->matrix_id = optarg; break;
        case 'o': a->x_out = optarg; break;
        case 'j': a->json = true; break;
        default: return usage();
        }
    }
    if (optind != argc - (a->matrix_id ? 0 : 1)) return usage();
    a->path = a->matrix_id ? NULL : argv[optind];
    if (iters) {
        s->tol = 0;
        s->maxit = iters;
    }
    if (!a->url || !*a->url) a->url = spmv_client_default_url(); /* $SPMVD_URL, else $SPMV_URL */
    return 0;
}

/* The matrix to solve with: --matrix-id's, or the file uploaded as float64. */
static spmv_client_status open_matrix(solver *s, const cli *a, spmv_client_matrix **m)
{
    spmv_client_upload_options uo = {.dtype = "float64"};
    const char *what = a->matrix_id ? a->matrix_id : a->path;
    spmv_client_status st = a->matrix_id ? spmv_client_describe(s->h, a->matrix_id, m)
                                         : spmv_client_upload_file(s->h, a->path, &uo, m);
    if (st != SPMV_CLIENT_OK) {
        fprintf(stderr, "cg_solve: %s: %s: %s\n", what, spmv_client_strerror(st), spmv_client_errmsg(s->h));
        return st;
    }
    printf("%s %s as %s: %" PRId64 " x %" PRId64 ", %" PRId64 " non-zeros, mode %s\n",
           a->matrix_id ? "using" : "uploaded", what, (*m)->id, (*m)->rows, (*m)->cols, (*m)->nnz,
           mode_names[s->mode]);
    return SPMV_CLIENT_OK;
}

/* Solves with m when CG can: square, of a size this host can hold, float64. */
static int solve_matrix(solver *s, const spmv_client_matrix *m, const cli *a)
{
    if (m->rows != m->cols || m->rows < 1 || (uint64_t)m->rows > SIZE_MAX / sizeof(double)) {
        fprintf(stderr, "cg_solve: CG needs a square matrix of a size this host can hold\n");
        return 2;
    }
    if (m->dtype != SPMV_CLIENT_FLOAT64) {
        fprintf(stderr, "cg_solve: matrix %s is float32; cg_solve works in float64\n", m->id);
        return 2;
    }
    s->id = m->id;
    s->n = (size_t)m->rows;
    return solve(s, a->x_out, a->json);
}

int main(int argc, char **argv)
{
    solver s = {.tol = 1e-10, .maxit = 10000};
    cli a = {0};
    spmv_client_matrix *m = NULL;
    spmv_client_status st;
    int rc;

    if ((rc = parse_args(argc, argv, &s, &a)) != 0) return rc;
    spmv_client_options co = {.token = getenv("SPMV_TOKEN")};
    if (!(s.h = spmv_client_new(a.url, &co, &st))) {
        fprintf(stderr, "cg_solve: %s: %s\n", a.url, spmv_client_strerror(st));
        return 1;
    }
    rc = 3;
    if (open_matrix(&s, &a, &m) == SPMV_CLIENT_OK) {
        rc = solve_matrix(&s, m, &a);
        if (!a.matrix_id && (st = spmv_client_delete(s.h, m->id)) != SPMV_CLIENT_OK)
            fprintf(stderr, "cg_solve: deleting %s: %s: %s\n", m->id, spmv_client_strerror(st),
                    spmv_client_errmsg(s.h));
    }
    spmv_client_matrix_free(m);
    spmv_client_free(s.h);
    return rc;
}
