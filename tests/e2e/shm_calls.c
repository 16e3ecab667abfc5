/* shm_calls.c — the shared-memory calls of libspmvclient against a live daemon, as TAP.
 *
 *   shm_calls URL [URL_WITHOUT_SHM]
 *
 * Run by tests/e2e/shm_clients.sh, which starts a daemon with allow_shm (URL) and,
 * when it can, one without (URL_WITHOUT_SHM). This program creates its own
 * POSIX shared-memory objects (mode 0600, names holding its pid, unlinked
 * at exit whatever happens) and checks: register, get, list, unregister
 * and their refusals (a name registered twice, a missing object, a window
 * past the object's end, names the library refuses before sending);
 * products with x and y in regions, each way round with inline operands,
 * Aᵀ·x, a float32 matrix, against y computed here in plain C from a random
 * matrix drawn afresh from a printed seed (SPMV_SEED repeats one), the
 * region's y poisoned with NaN beforehand; resident vectors made from,
 * written from and read into the region; the operand errors (past the
 * region, unaligned, unknown region, verify); a region whose object was
 * shrunk or unlinked (state, 410 shm_gone); and 403 shm_disabled from the
 * daemon without allow_shm. Solves (spmv_client_solve_shm) with b read
 * from the region and x written into it or into a buffer, each x checked
 * by its true residual in plain C, and their refusals. Prints "ok N - ..." lines and the plan last.
 */
#include "spmvclient.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client_tap.h"

/* A refusal: the status, the HTTP status and the server's error code. */
static void expect_refusal(spmv_client *h, spmv_client_status st, spmv_client_status want, long http,
                           const char *code, const char *what)
{
    bool ok = st == want && spmv_client_http_status(h) == http && strcmp(spmv_client_errcode(h), code) == 0;
    if (!check(ok, "%s: HTTP %ld %s", what, http, code)) diag(h, st);
}

/* y = op(A)·x in double, from the entries as uploaded. */
static void reference(const coo *m, char op, const double *x, double *y)
{
    int64_t ny = op == 't' ? m->cols : m->rows;
    for (int64_t i = 0; i < ny; i++) y[i] = 0;
    for (int64_t k = 0; k < m->nnz; k++) {
        if (op == 't') y[m->c[k]] += m->v[k] * x[m->r[k]];
        else y[m->r[k]] += m->v[k] * x[m->c[k]];
    }
}


/* ---------------------------------------------------- shared-memory objects */

/* Objects this program made, unlinked at exit. */
static char made[8][64];
static int nmade;

static void unlink_made(void)
{
    for (int i = 0; i < nmade; i++) shm_unlink(made[i]);
}

/* A fresh object of `bytes` bytes, mode 0600, mapped; NULL on failure. */
static void *object_new(const char *name, size_t bytes, int *fd_out)
{
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return NULL;
    if (nmade < 8) snprintf(made[nmade++], sizeof made[0], "%s", name);
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)bytes) == 0) p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return NULL;
    }
    *fd_out = fd;
    return p;
}

/* ------------------------------------------------------------ the checks */

static void regions(spmv_client *h, const char *name, uint64_t size, const char *pid_tag)
{
    spmv_client_shm *r = NULL, *g = NULL;
    spmv_client_shm_list *l = NULL;
    char missing[96], bad[256];

    spmv_client_status st = spmv_client_shm_register(h, name, 0, size, &r);
    if (check(st == SPMV_CLIENT_OK && r, "shm_register %s, %" PRIu64 " bytes", name, size)) {
        check(strcmp(r->name, name) == 0 && r->offset == 0 && r->size == size, "descriptor: name, offset 0, size");
        check(r->object_bytes == size, "descriptor: object_bytes %" PRIu64 " (the object's size)", r->object_bytes);
        check(strcmp(r->state, "ok") == 0, "descriptor: state \"%s\" is ok", r->state);
        check(r->pinned == 0 || r->pinned == 1, "descriptor: pinned is a boolean (%d)", r->pinned);
        check(spmv_client_http_status(h) == 201, "register answers 201 (got %ld)", spmv_client_http_status(h));
    } else {
        diag(h, st);
    }
    spmv_client_shm_free(r);

    st = spmv_client_shm_get(h, name, &g);
    if (check(st == SPMV_CLIENT_OK && g && strcmp(g->name, name) == 0 && g->size == size, "shm_get %s", name))
        check(strcmp(g->state, "ok") == 0 && g->uses == 0, "shm_get: state ok, uses 0 (got %s, %" PRId64 ")",
              g->state, g->uses);
    else
        diag(h, st);
    spmv_client_shm_free(g);

    st = spmv_client_shm_regions(h, &l);
    bool listed = false;
    for (size_t i = 0; st == SPMV_CLIENT_OK && i < l->count; i++)
        listed = listed || (strcmp(l->items[i].name, name) == 0 && l->items[i].size == size);
    if (!check(st == SPMV_CLIENT_OK && listed, "shm_regions lists %s", name)) diag(h, st);
    spmv_client_shm_list_free(l);

    st = spmv_client_shm_register(h, name, 0, size, NULL);
    expect_refusal(h, st, SPMV_CLIENT_ERR_CONFLICT, 409, "shm_exists", "registering a name twice");

    snprintf(missing, sizeof missing, "spmvd-test-%s-missing", pid_tag);
    st = spmv_client_shm_register(h, missing, 0, 64, NULL);
    expect_refusal(h, st, SPMV_CLIENT_ERR_NOT_FOUND, 404, "shm_not_found", "registering a missing object");

    /* The window past the object's end: the object is another name's. */
    snprintf(bad, sizeof bad, "%s-past", name);
    int fd;
    void *p = object_new(bad, 4096, &fd);
    if (check(p != NULL, "a second object for the window checks")) {
        st = spmv_client_shm_register(h, bad, 0, 4097, NULL);
        expect_refusal(h, st, SPMV_CLIENT_ERR_BAD_REQUEST, 400, "out_of_range", "size 4097 of a 4096-byte object");
        st = spmv_client_shm_register(h, bad, 4000, 97, NULL);
        expect_refusal(h, st, SPMV_CLIENT_ERR_BAD_REQUEST, 400, "out_of_range", "offset 4000 + size 97 past 4096");
        EXPECT(h, spmv_client_shm_register(h, bad, 4000, 96, NULL), SPMV_CLIENT_OK,
               "offset 4000 + size 96 (exactly to the end) registers");
        EXPECT(h, spmv_client_shm_unregister(h, bad), SPMV_CLIENT_OK, "and unregisters");
        munmap(p, 4096);
        close(fd);
    }

    /* A made-up CUDA IPC handle: a daemon without a GPU answers 409, one
     * with a GPU 400 (the driver refuses it). */
    unsigned char handle[SPMV_CLIENT_CUDA_IPC_HANDLE_BYTES] = {1, 2, 3};
    st = spmv_client_shm_register_cuda(h, "spmvd-test-cuda", handle, "gpu0", 0, 64, NULL);
    if (!check((st == SPMV_CLIENT_ERR_CONFLICT && spmv_client_http_status(h) == 409) ||
                   (st == SPMV_CLIENT_ERR_BAD_REQUEST && spmv_client_http_status(h) == 400),
               "a made-up CUDA IPC handle is refused (%ld %s)", spmv_client_http_status(h), spmv_client_errcode(h)))
        diag(h, st);

    /* Refused here, before anything is sent (http_status 0). */
    static const char *const bad_names[] = {"a/b", "../x", ".hidden", "", "sp ace"};
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
        st = spmv_client_shm_register(h, bad_names[i], 0, 64, NULL);
        check(st == SPMV_CLIENT_ERR_INVALID && spmv_client_http_status(h) == 0,
              "name \"%s\" refused before sending", bad_names[i]);
    }
    char long_name[202];
    memset(long_name, 'a', 201);
    long_name[201] = '\0';
    check(spmv_client_shm_register(h, long_name, 0, 64, NULL) == SPMV_CLIENT_ERR_INVALID,
          "a 201-character name refused before sending");
    check(spmv_client_shm_register(h, name, 0, 0, NULL) == SPMV_CLIENT_ERR_INVALID, "size 0 refused before sending");
}

/* Products with x and/or y in region `name` (x at byte 0, y after it). */
static void products(spmv_client *h, const char *name, double *base, const coo *m, const char *mid)
{
    size_t rows = (size_t)m->rows, cols = (size_t)m->cols, nmax = rows > cols ? rows : cols;
    double *x = base, *y = base + nmax;   /* room for either op */
    uint64_t yoff = nmax * sizeof(double);
    double *ref = malloc(nmax * sizeof *ref), *xin = malloc(nmax * sizeof *xin), *yout = malloc(nmax * sizeof *yout);
    spmv_client_shm_ref xr = {.name = name, .offset = 0}, yr = {.name = name, .offset = yoff};
    spmv_client_product_result res;
    spmv_client_status st;
    if (!ref || !xin || !yout) {
        check(false, "memory for the products");
        goto out;
    }

    /* x and y in the region. */
    for (size_t j = 0; j < cols; j++) x[j] = uniform();
    for (size_t i = 0; i < nmax; i++) y[i] = NAN;
    reference(m, 'n', x, ref);
    spmv_client_operands a = {.dtype = SPMV_CLIENT_FLOAT64};
    st = spmv_client_spmv_shm(h, mid, &a, &xr, &yr, NULL, &res);
    if (check(st == SPMV_CLIENT_OK, "spmv_shm: x and y in the region")) {
        double e = rel_err(y, ref, rows);
        check(e < 1e-12, "y in the region = A*x (rel err %.3g)", e);
        check(*res.spmv.kernel && res.spmv.stats.runs >= 1, "statistics came back (kernel %s, %d runs)",
              res.spmv.kernel, res.spmv.stats.runs);
    } else {
        diag(h, st);
    }

    /* x in the region, y inline. */
    for (size_t j = 0; j < cols; j++) x[j] = uniform();
    for (size_t i = 0; i < rows; i++) yout[i] = NAN;
    reference(m, 'n', x, ref);
    a = (spmv_client_operands){.dtype = SPMV_CLIENT_FLOAT64, .y = yout, .ny = rows};
    st = spmv_client_spmv_shm(h, mid, &a, &xr, NULL, NULL, &res);
    if (check(st == SPMV_CLIENT_OK, "spmv_shm: x in the region, y inline"))
        check(rel_err(yout, ref, rows) < 1e-12, "inline y = A*x (rel err %.3g)", rel_err(yout, ref, rows));
    else
        diag(h, st);

    /* x inline, y in the region. */
    for (size_t j = 0; j < cols; j++) xin[j] = uniform();
    for (size_t i = 0; i < nmax; i++) y[i] = NAN;
    reference(m, 'n', xin, ref);
    a = (spmv_client_operands){.dtype = SPMV_CLIENT_FLOAT64, .x = xin, .nx = cols};
    st = spmv_client_spmv_shm(h, mid, &a, NULL, &yr, NULL, &res);
    if (check(st == SPMV_CLIENT_OK, "spmv_shm: x inline, y in the region"))
        check(rel_err(y, ref, rows) < 1e-12, "y in the region = A*x (rel err %.3g)", rel_err(y, ref, rows));
    else
        diag(h, st);

    /* Aᵀ·x: x has rows values, y cols. */
    for (size_t i = 0; i < rows; i++) x[i] = uniform();
    for (size_t i = 0; i < nmax; i++) y[i] = NAN;
    reference(m, 't', x, ref);
    a = (spmv_client_operands){.dtype = SPMV_CLIENT_FLOAT64, .op = 't'};
    st = spmv_client_spmv_shm(h, mid, &a, &xr, &yr, NULL, &res);
    if (check(st == SPMV_CLIENT_OK, "spmv_shm op t: x and y in the region"))
        check(rel_err(y, ref, cols) < 1e-12, "y in the region = A^T*x (rel err %.3g)", rel_err(y, ref, cols));
    else
        diag(h, st);

    spmv_client_shm *g = NULL;
    if (spmv_client_shm_get(h, name, &g) == SPMV_CLIENT_OK)
        check(g->uses >= 4, "uses counts the products (%" PRId64 " >= 4)", g->uses);
    else
        check(false, "shm_get after the products");
    spmv_client_shm_free(g);

    /* The operand errors. */
    a = (spmv_client_operands){.dtype = SPMV_CLIENT_FLOAT64};
    spmv_client_shm_ref past = {.name = name, .offset = yoff + 8};
    st = spmv_client_spmv_shm(h, mid, &a, &xr, &past, NULL, &res);
    expect_refusal(h, st, SPMV_CLIENT_ERR_BAD_REQUEST, 400, "out_of_range", "y 8 bytes too far runs past the region");
    check(strstr(spmv_client_errmsg(h), "y") != NULL, "the message names the operand: %s", spmv_client_errmsg(h));
    spmv_client_shm_ref odd = {.name = name, .offset = 4};
    st = spmv_client_spmv_shm(h, mid, &a, &odd, &yr, NULL, &res);
    expect_refusal(h, st, SPMV_CLIENT_ERR_BAD_REQUEST, 400, "invalid_request", "x_offset 4 is not a multiple of 8");
    spmv_client_shm_ref nobody = {.name = "spmvd-test-never-registered", .offset = 0};
    st = spmv_client_spmv_shm(h, mid, &a, &nobody, &yr, NULL, &res);
    expect_refusal(h, st, SPMV_CLIENT_ERR_NOT_FOUND, 404, "shm_not_found", "x in a region never registered");
    spmv_client_spmv_options verify = {.verify = 1};
    st = spmv_client_spmv_shm(h, mid, &a, &xr, &yr, &verify, &res);
    check(st == SPMV_CLIENT_ERR_BAD_REQUEST && spmv_client_http_status(h) == 400, "verify with operands in a region is a 400");

    /* Refused here: x given two ways, y given none. */
    a = (spmv_client_operands){.dtype = SPMV_CLIENT_FLOAT64, .x = xin, .nx = cols};
    check(spmv_client_spmv_shm(h, mid, &a, &xr, &yr, NULL, &res) == SPMV_CLIENT_ERR_INVALID &&
              spmv_client_http_status(h) == 0, "x inline and in a region: refused before sending");
    a = (spmv_client_operands){.dtype = SPMV_CLIENT_FLOAT64};
    check(spmv_client_spmv_shm(h, mid, &a, &xr, NULL, NULL, &res) == SPMV_CLIENT_ERR_INVALID,
          "no y at all: refused before sending");
    check(spmv_client_spmv_shm(h, mid, &a, NULL, NULL, NULL, &res) == SPMV_CLIENT_ERR_INVALID,
          "spmv_shm without a region: refused");
out:
    free(ref), free(xin), free(yout);
}

/* A float32 matrix: values in the region are 4 bytes each. */
/* ||b - A x|| / ||b||, A the coo's entries; INFINITY when x holds NaN. */
static double relres(const coo *m, const double *x, const double *b)
{
    double *ax = malloc((size_t)m->rows * sizeof *ax), num = 0, den = 0;
    if (!ax) return INFINITY;
    reference(m, 'n', x, ax);
    for (int64_t i = 0; i < m->rows; i++) {
        num += (b[i] - ax[i]) * (b[i] - ax[i]);
        den += b[i] * b[i];
    }
    free(ax);
    return isnan(num) ? INFINITY : sqrt(num / den);
}

/* spmv_client_solve_shm: b read from the region and x written into it on
 * a 12 x 12 grid's Laplacian (SPD, uploaded here), each x checked by its
 * true residual, x poisoned first; one and two columns, x back into a
 * buffer, inline b with x into the region, and the refusals. The region
 * holds 2 * 301 doubles: b's columns from 0, x's from 301. */
static void solves(spmv_client *h, const char *name, double *base)
{
    enum { G = 12, N = G * G, XAT = 301 };
    coo L = {.rows = N, .cols = N, .nnz = 5 * N - 4 * G};
    L.r = malloc((size_t)L.nnz * sizeof *L.r), L.c = malloc((size_t)L.nnz * sizeof *L.c);
    L.v = malloc((size_t)L.nnz * sizeof *L.v);
    double *b = base, *x = base + XAT, xbuf[N], bin[N];
    spmv_client_matrix *mat = NULL;
    spmv_client_solve_result *res = NULL;
    char *text = NULL;
    size_t len = 0;
    int64_t k = 0;
    for (int64_t i = 0; L.r && L.c && L.v && i < N; i++) {
        int64_t a = i / G, c = i % G;
        int64_t nb[5][2] = {{i, 4}, {a > 0 ? i - G : -1, -1}, {a < G - 1 ? i + G : -1, -1}, {c > 0 ? i - 1 : -1, -1},
                            {c < G - 1 ? i + 1 : -1, -1}};
        for (int j = 0; j < 5; j++)
            if (nb[j][0] >= 0) L.r[k] = i, L.c[k] = nb[j][0], L.v[k] = (double)nb[j][1], k++;
    }
    if (!check(k == L.nnz && (text = matrix_market(&L, &len, "shm_calls solves")) &&
                   spmv_client_upload_memory(h, text, len, NULL, &mat) == SPMV_CLIENT_OK,
               "upload the %d x %d Laplacian of a %d x %d grid", N, N, G, G))
        goto out;
    spmv_client_shm_ref br = {.name = name, .offset = 0}, xr = {.name = name, .offset = XAT * sizeof(double)};
    spmv_client_solve_options o = {.preconditioner = "jacobi"};
    spmv_client_status st;

    for (int i = 0; i < 2 * N; i++) b[i] = uniform();
    for (int i = 0; i < 2 * N; i++) x[i] = NAN;
    st = spmv_client_solve_shm(h, mat->id, &o, &br, 0, &xr, NULL, 0, &res);
    if (check(st == SPMV_CLIENT_OK && res->converged && !res->has_x, "solve_shm: b and x in the region (%s)",
              res ? res->stop_reason : "-")) {
        double e = relres(&L, x, b);
        check(e <= 1.01e-8, "x in the region solves A x = b (relres %.3g)", e);
        check(isnan(x[N]), "nothing written past x");
    } else {
        diag(h, st);
    }
    spmv_client_solve_result_free(res), res = NULL;

    for (int i = 0; i < 2 * N; i++) x[i] = NAN;
    st = spmv_client_solve_shm(h, mat->id, &o, &br, 2, &xr, NULL, 0, &res);
    if (check(st == SPMV_CLIENT_OK && res->converged, "solve_shm: k = 2 columns of b, x into the region")) {
        double e0 = relres(&L, x, b), e1 = relres(&L, x + N, b + N);
        check(e0 <= 1.01e-8 && e1 <= 1.01e-8, "each column of x solves its b (relres %.3g, %.3g)", e0, e1);
    } else {
        diag(h, st);
    }
    spmv_client_solve_result_free(res), res = NULL;

    for (int i = 0; i < N; i++) xbuf[i] = NAN;
    st = spmv_client_solve_shm(h, mat->id, &o, &br, 1, NULL, xbuf, N, &res);
    if (check(st == SPMV_CLIENT_OK && res->has_x, "solve_shm: b in the region, x into the caller's buffer")) {
        double e = relres(&L, xbuf, b);
        check(e <= 1.01e-8 && res->nhistory > 0, "x solves A x = b (relres %.3g), history of %zu", e, res->nhistory);
    } else {
        diag(h, st);
    }
    spmv_client_solve_result_free(res), res = NULL;

    for (int i = 0; i < N; i++) bin[i] = uniform(), x[i] = NAN;
    spmv_client_solve_options oi = {.b = bin, .nb = N};
    st = spmv_client_solve_shm(h, mat->id, &oi, NULL, 0, &xr, NULL, 0, &res);
    if (check(st == SPMV_CLIENT_OK && res->converged, "solve_shm: inline b, x into the region")) {
        double e = relres(&L, x, bin);
        check(e <= 1.01e-8, "x solves A x = b (relres %.3g)", e);
    } else {
        diag(h, st);
    }
    spmv_client_solve_result_free(res), res = NULL;

    /* refusals, before sending and from the daemon */
    spmv_client_shm_ref nowhere = {.name = "spmvd-test-never-registered", .offset = 0}, bad = {.name = "../x"};
    EXPECT(h, spmv_client_solve_shm(h, mat->id, &oi, NULL, 0, NULL, NULL, 0, &res), SPMV_CLIENT_ERR_INVALID,
           "solve_shm with neither b nor x in a region: INVALID");
    EXPECT(h, spmv_client_solve_shm(h, mat->id, &oi, &br, 0, &xr, NULL, 0, &res), SPMV_CLIENT_ERR_INVALID,
           "b both inline and in a region: INVALID");
    EXPECT(h, spmv_client_solve_shm(h, mat->id, &oi, NULL, 2, &xr, NULL, 0, &res), SPMV_CLIENT_ERR_INVALID,
           "k = 2 with an inline b: INVALID");
    EXPECT(h, spmv_client_solve_shm(h, mat->id, &o, &br, 0, &xr, xbuf, N, &res), SPMV_CLIENT_ERR_INVALID,
           "x both in a region and a buffer: INVALID");
    EXPECT(h, spmv_client_solve_shm(h, mat->id, &o, &br, 0, NULL, NULL, 0, &res), SPMV_CLIENT_ERR_INVALID,
           "b in a region, x with no place to go: INVALID");
    EXPECT(h, spmv_client_solve_shm(h, mat->id, &o, &bad, 0, &xr, NULL, 0, &res), SPMV_CLIENT_ERR_INVALID,
           "a region name the library refuses: INVALID");
    st = spmv_client_solve_shm(h, mat->id, &o, &nowhere, 0, &xr, NULL, 0, &res);
    expect_refusal(h, st, SPMV_CLIENT_ERR_NOT_FOUND, 404, "shm_not_found", "solve_shm naming an unknown region");
    spmv_client_shm_ref past = {.name = name, .offset = 2 * 301 * sizeof(double) - 8};
    st = spmv_client_solve_shm(h, mat->id, &o, &past, 0, &xr, NULL, 0, &res);
    expect_refusal(h, st, SPMV_CLIENT_ERR_BAD_REQUEST, 400, "out_of_range", "solve_shm with b past the region");
out:
    spmv_client_solve_result_free(res);
    if (mat) spmv_client_delete(h, mat->id);
    spmv_client_matrix_free(mat);
    free(text);
    coo_free(&L);
}

static void float32_product(spmv_client *h, const char *name, void *base, const coo *m, const char *text, size_t len)
{
    spmv_client_upload_options uo = {.name = "shm_calls_f32", .dtype = "float32"};
    spmv_client_matrix *mf = NULL;
    spmv_client_status st = spmv_client_upload_memory(h, text, len, &uo, &mf);
    if (!check(st == SPMV_CLIENT_OK && mf->dtype == SPMV_CLIENT_FLOAT32, "upload the matrix as float32")) {
        diag(h, st);
        spmv_client_matrix_free(mf);
        return;
    }
    size_t rows = (size_t)m->rows, cols = (size_t)m->cols;
    float *x = base, *y = (float *)base + cols;
    double *xd = malloc(cols * sizeof *xd), *ref = malloc(rows * sizeof *ref), *yd = malloc(rows * sizeof *yd);
    for (size_t j = 0; xd && j < cols; j++) xd[j] = x[j] = (float)uniform();
    for (size_t i = 0; i < rows; i++) y[i] = NAN;
    if (xd && ref && yd) {
        reference(m, 'n', xd, ref);
        spmv_client_operands a = {.dtype = SPMV_CLIENT_FLOAT32};
        spmv_client_shm_ref xr = {.name = name, .offset = 0}, yr = {.name = name, .offset = cols * sizeof(float)};
        st = spmv_client_spmv_shm(h, mf->id, &a, &xr, &yr, NULL, NULL);
        if (check(st == SPMV_CLIENT_OK, "float32 spmv_shm: x and y in the region")) {
            for (size_t i = 0; i < rows; i++) yd[i] = y[i];
            double e = rel_err(yd, ref, rows);
            check(e < 1e-5, "float32 y in the region = A*x (rel err %.3g)", e);
        } else {
            diag(h, st);
        }
    }
    free(xd), free(ref), free(yd);
    spmv_client_delete(h, mf->id);
    spmv_client_matrix_free(mf);
}

/* Resident vectors from and into the region: x from the pages, y = A·x
 * resident, y written back into the pages. */
static void vectors(spmv_client *h, const char *name, double *base, const coo *m, const char *mid)
{
    size_t rows = (size_t)m->rows, cols = (size_t)m->cols;
    double *x = base, *y = base + (rows > cols ? rows : cols), *ref = malloc(rows * sizeof *ref);
    spmv_client_vector *xv = NULL, *yv = NULL, *d = NULL;
    spmv_client_shm_ref xr = {.name = name, .offset = 0};
    spmv_client_shm_ref yr = {.name = name, .offset = (uint64_t)(y - base) * sizeof(double)};
    spmv_client_vector_options like = {.like = mid}, rows_like = {.like = mid, .side = "rows"};
    spmv_client_status st;
    if (!ref) return;
    for (size_t j = 0; j < cols; j++) x[j] = uniform();
    reference(m, 'n', x, ref);
    st = spmv_client_vector_create_shm(h, &xr, 0, &like, &xv);
    if (!check(st == SPMV_CLIENT_OK && xv->n == (int64_t)cols, "vector_create_shm: x from the region, n from like")) {
        diag(h, st);
        goto out;
    }
    double *back = malloc(cols * sizeof *back);
    if (back && spmv_client_vector_read(h, xv->id, SPMV_CLIENT_FLOAT64, back, cols, NULL) == SPMV_CLIENT_OK)
        check(memcmp(back, x, cols * sizeof *back) == 0, "the vector holds the region's values bit for bit");
    else
        check(false, "read the vector back");
    free(back);
    EXPECT(h, spmv_client_vector_fill(h, 0, 0.0, &rows_like, &yv), SPMV_CLIENT_OK, "a resident y like the rows");
    if (!yv) goto out;
    spmv_client_operands a = {.dtype = SPMV_CLIENT_FLOAT64, .x_vector = xv->id, .y_vector = yv->id};
    EXPECT(h, spmv_client_spmv(h, mid, &a, NULL, NULL), SPMV_CLIENT_OK, "y = A*x on resident vectors");
    for (size_t i = 0; i < rows; i++) y[i] = NAN;
    st = spmv_client_vector_read_shm(h, yv->id, &yr, &d);
    if (check(st == SPMV_CLIENT_OK && d && strcmp(d->id, yv->id) == 0, "vector_read_shm: y into the region"))
        check(rel_err(y, ref, rows) < 1e-12, "y in the region = A*x (rel err %.3g)", rel_err(y, ref, rows));
    else
        diag(h, st);
    spmv_client_vector_free(d);
    d = NULL;
    for (size_t j = 0; j < cols; j++) x[j] = uniform();
    st = spmv_client_vector_write_shm(h, xv->id, &xr, &d);
    if (check(st == SPMV_CLIENT_OK && d, "vector_write_shm: x again from the region")) {
        double *again = malloc(cols * sizeof *again);
        if (again && spmv_client_vector_read(h, xv->id, SPMV_CLIENT_FLOAT64, again, cols, NULL) == SPMV_CLIENT_OK)
            check(memcmp(again, x, cols * sizeof *again) == 0, "the vector holds the new values");
        free(again);
    } else {
        diag(h, st);
    }
    spmv_client_shm_ref past = {.name = name, .offset = yr.offset + 8};
    st = spmv_client_vector_read_shm(h, yv->id, &past, NULL);
    expect_refusal(h, st, SPMV_CLIENT_ERR_BAD_REQUEST, 400, "out_of_range", "vector_read_shm past the region");
    spmv_client_shm_ref bad = {.name = "a/b"};
    check(spmv_client_vector_write_shm(h, xv->id, &bad, NULL) == SPMV_CLIENT_ERR_INVALID,
          "vector_write_shm with a bad region name: refused before sending");
out:
    if (xv) spmv_client_vector_delete(h, xv->id);
    if (yv) spmv_client_vector_delete(h, yv->id);
    spmv_client_vector_free(xv);
    spmv_client_vector_free(yv);
    spmv_client_vector_free(d);
    free(ref);
}

/* A region whose object was shrunk, and one whose object was unlinked. */
static void gone(spmv_client *h, const char *pid_tag, const char *mid, const coo *m)
{
    char name[96];
    int fd;
    size_t bytes = (size_t)(m->rows + m->cols) * sizeof(double);
    spmv_client_operands a = {.dtype = SPMV_CLIENT_FLOAT64};
    spmv_client_shm *g = NULL;

    snprintf(name, sizeof name, "spmvd-test-%s-shrunk", pid_tag);
    void *p = object_new(name, bytes, &fd);
    if (!check(p && spmv_client_shm_register(h, name, 0, bytes, NULL) == SPMV_CLIENT_OK, "register %s", name))
        return;
    spmv_client_shm_ref xr = {.name = name, .offset = 0}, yr = {.name = name, .offset = (uint64_t)m->cols * 8};
    munmap(p, bytes);
    check(ftruncate(fd, 64) == 0, "shrink the object to 64 bytes");
    if (spmv_client_shm_get(h, name, &g) == SPMV_CLIENT_OK)
        check(strcmp(g->state, "shrunk") == 0, "state after the shrink is \"shrunk\" (got \"%s\")", g->state);
    else
        check(false, "shm_get after the shrink");
    spmv_client_shm_free(g);
    g = NULL;
    spmv_client_status st = spmv_client_spmv_shm(h, mid, &a, &xr, &yr, NULL, NULL);
    expect_refusal(h, st, SPMV_CLIENT_ERR_HTTP, 410, "shm_gone", "a product on a shrunk object");
    EXPECT(h, spmv_client_shm_unregister(h, name), SPMV_CLIENT_OK, "unregister the shrunk region");
    close(fd);

    snprintf(name, sizeof name, "spmvd-test-%s-unlinked", pid_tag);
    p = object_new(name, bytes, &fd);
    if (!check(p && spmv_client_shm_register(h, name, 0, bytes, NULL) == SPMV_CLIENT_OK, "register %s", name))
        return;
    xr.name = yr.name = name;
    shm_unlink(name);
    if (spmv_client_shm_get(h, name, &g) == SPMV_CLIENT_OK)
        check(strcmp(g->state, "unlinked") == 0, "state after shm_unlink is \"unlinked\" (got \"%s\")", g->state);
    else
        check(false, "shm_get after shm_unlink");
    spmv_client_shm_free(g);
    st = spmv_client_spmv_shm(h, mid, &a, &xr, &yr, NULL, NULL);
    expect_refusal(h, st, SPMV_CLIENT_ERR_HTTP, 410, "shm_gone", "a product on an unlinked object");
    EXPECT(h, spmv_client_shm_unregister(h, name), SPMV_CLIENT_OK, "unregister the unlinked region");
    munmap(p, bytes);
    close(fd);
}

static void disabled(const char *url, const char *name)
{
    spmv_client *h = spmv_client_new(url, NULL, NULL);
    spmv_client_shm_list *l = NULL;
    spmv_client_status st = spmv_client_shm_register(h, name, 0, 64, NULL);
    expect_refusal(h, st, SPMV_CLIENT_ERR_UNAUTHORIZED, 403, "shm_disabled", "register without allow_shm");
    st = spmv_client_shm_regions(h, &l);
    expect_refusal(h, st, SPMV_CLIENT_ERR_UNAUTHORIZED, 403, "shm_disabled", "list without allow_shm");
    spmv_client_shm_list_free(l);
    st = spmv_client_shm_unregister(h, name);
    expect_refusal(h, st, SPMV_CLIENT_ERR_UNAUTHORIZED, 403, "shm_disabled", "unregister without allow_shm");

    /* an operand naming a region, on a matrix of that daemon */
    const char *mm = "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 2\n";
    spmv_client_matrix *m = NULL;
    if (spmv_client_upload_memory(h, mm, strlen(mm), NULL, &m) == SPMV_CLIENT_OK) {
        spmv_client_operands a = {.dtype = SPMV_CLIENT_FLOAT64};
        spmv_client_shm_ref r = {.name = name, .offset = 0}, yr = {.name = name, .offset = 16};
        st = spmv_client_spmv_shm(h, m->id, &a, &r, &yr, NULL, NULL);
        expect_refusal(h, st, SPMV_CLIENT_ERR_UNAUTHORIZED, 403, "shm_disabled", "spmv naming a region without allow_shm");
        spmv_client_delete(h, m->id);
    } else {
        check(false, "upload to the daemon without allow_shm");
    }
    spmv_client_matrix_free(m);
    spmv_client_free(h);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: shm_calls URL [URL_WITHOUT_SHM]\n");
        return 2;
    }
    const char *seed_env = getenv("SPMV_SEED");
    uint64_t seed = seed_env && *seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid();
    rng_state = seed;
    printf("# seed %" PRIu64 " (SPMV_SEED=%" PRIu64 " repeats it)\n", seed, seed);
    atexit(unlink_made);

    char tag[32], name[96];
    snprintf(tag, sizeof tag, "%d", (int)getpid());
    snprintf(name, sizeof name, "spmvd-test-%s-a", tag);
    spmv_client *h = spmv_client_new(argv[1], NULL, NULL);
    coo m = {0};
    size_t len = 0;
    char *text = NULL;
    spmv_client_matrix *mat = NULL;
    int fd = -1;
    if (!h || !random_coo(&m, 301, 203, 5) || !(text = matrix_market(&m, &len, "shm_calls"))) {
        printf("not ok 1 - setup (memory)\n1..1\n");
        return 1;
    }
    size_t nmax = 301, bytes = 2 * nmax * sizeof(double);
    double *base = object_new(name, bytes, &fd);
    if (!check(base != NULL, "created /dev/shm/%s (0600, %zu bytes)", name, bytes)) goto done;

    regions(h, name, bytes, tag);
    spmv_client_status st = spmv_client_upload_memory(h, text, len, NULL, &mat);
    if (check(st == SPMV_CLIENT_OK, "upload a random 301 x 203 matrix")) {
        products(h, name, base, &m, mat->id);
        solves(h, name, base);
        float32_product(h, name, base, &m, text, len);
        vectors(h, name, base, &m, mat->id);
        gone(h, tag, mat->id, &m);
    } else {
        diag(h, st);
    }

    EXPECT(h, spmv_client_shm_unregister(h, name), SPMV_CLIENT_OK, "shm_unregister %s", name);
    spmv_client_shm *after = NULL;
    st = spmv_client_shm_get(h, name, &after);
    spmv_client_shm_free(after);
    expect_refusal(h, st, SPMV_CLIENT_ERR_NOT_FOUND, 404, "shm_not_found", "get after unregister");
    st = spmv_client_shm_unregister(h, name);
    expect_refusal(h, st, SPMV_CLIENT_ERR_NOT_FOUND, 404, "shm_not_found", "unregister twice");
    if (mat) {
        spmv_client_operands a = {.dtype = SPMV_CLIENT_FLOAT64};
        spmv_client_shm_ref r = {.name = name, .offset = 0}, yr = {.name = name, .offset = nmax * 8};
        st = spmv_client_spmv_shm(h, mat->id, &a, &r, &yr, NULL, NULL);
        expect_refusal(h, st, SPMV_CLIENT_ERR_NOT_FOUND, 404, "shm_not_found", "spmv naming an unregistered region");
    }
    spmv_client_shm_list *l = NULL;
    if (spmv_client_shm_regions(h, &l) == SPMV_CLIENT_OK) {
        bool left = false;
        for (size_t i = 0; i < l->count; i++) left = left || strstr(l->items[i].name, tag) != NULL;
        check(!left, "no region of this run is left registered");
    }
    spmv_client_shm_list_free(l);

    if (argc == 3)
        disabled(argv[2], name);
done:
    if (mat) spmv_client_delete(h, mat->id);
    spmv_client_matrix_free(mat);
    if (base) munmap(base, bytes);
    if (fd >= 0) close(fd);
    free(text);
    free(m.r), free(m.c), free(m.v);
    spmv_client_free(h);
    printf("1..%d\n", tests);
    return failures ? 1 : 0;
}
