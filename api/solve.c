/* solve.c — POST /v1/matrices/{id}/solve: a Krylov solve next to the matrix.
 *
 * The HTTP face of engine/krylov.c (docs/api.md, "Solvers"). Two
 * encodings, as for spmv. JSON: b and x0 inline (numbers) or resident
 * vectors, options beside them, the answer x in the body (JSON, or binary
 * with Accept: application/octet-stream) or in a resident vector (`x_out`).
 * Binary (Content-Type: application/octet-stream): the body is b (k
 * columns with ?k=, then x0 the same way with ?x0=body) as little-endian
 * values of the matrix dtype, the options are in the query string, and x
 * comes back the same way with the report in the X-SpMV-Solve header (the
 * residual histories after x in the body with ?history=true: a header
 * line of thousands of numbers would pass clients' header limits). A JSON
 * request answered in binary keeps the history in the header unless it
 * asks "history": true, as it did before binary bodies.
 *
 * A client on the same host may hand b over and take x back in
 * shared-memory regions (daemon/shm.h): "b": {"shm", "offset"} with "k"
 * columns, "x_out": {"shm", "offset"} (?b_shm=&b_offset=, ?x_shm=&x_offset=
 * in the binary form, whose body is then empty, or x0 alone). b is read
 * (pread, through the object's descriptor) once the request is checked,
 * bounded like a body by max_body_bytes; x is written the same way once
 * the solve is done, and the answer is the JSON report with
 * "x": {"shm", "offset"}.
 *
 * k columns are k solves in turn on the worker (daemon/solve.c), each
 * with its own report under "columns". The operator is one kernel of the
 * catalogue (default `auto`, tuned once per matrix) on the matrix's device,
 * run by the daemon's worker, so a GPU solve moves no vector over PCIe
 * between iterations. Everything is checked on the HTTP thread; a
 * breakdown or maxit is a 200 whose `stop` says why. The request waits for
 * the solve by default; with "async": true it is a job that reports its
 * iteration and residual (GET /v1/jobs/{id}?wait=S waits for it), and
 * DELETE /v1/jobs/{id} stops it at the next iteration.
 *
 * A sharded matrix (issue 32) solves on the cluster worker, every MPI rank
 * iterating on its rows (cluster/solve.c); what it does not take yet is a
 * 422 naming it (sharded_check), and the answer's "cluster" has each
 * rank's time split.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/decode.h"
#include "daemon/autotune.h"
#include "daemon/solve.h"

typedef struct solve_req {
    solve_task s;          /* what runs on the worker (daemon/solve.h) */
    request *r;            /* NULL when async */
    bool binary_in;        /* b (and x0) in the body as raw values, the options in the query */
    bool x0_in_body;       /* binary: x0 follows b in the body (?x0=body) */
    bool binary_out;       /* x in the answer as raw values (binary in, or Accept: application/octet-stream) */
    bool history_out;      /* binary answer: the residual histories follow x (?history=true) */
    bool history_header;   /* a JSON request's binary answer without "history": the history stays in
                            * X-SpMV-Solve, as before binary bodies (the C client reads it there) */
    int64_t body_limit;
    shm_operand bs, xs;    /* b and x in shared-memory regions (reg NULL: not) */
    char shm_name[2][SHM_NAME_MAX + 1]; /* b's and x's regions as the request names them ("": none) */
    int64_t shm_offset[2];
} solve_req;

static solve_req *T(request *r) { return r->state; }

static void solve_free(solve_req *t)
{
    if (!t)
        return;
    solve_release(&t->s);
    shm_operand_close(&t->bs);
    shm_operand_close(&t->xs);
    free(t);
}


/* ------------------------------------------------------------ checking */

/* An operand: inline values (into *vals, *k columns) or a resident vector
 * (into *v, one column). */
static int operand(request *r, const json_t *o, const char *key, bool required, void **vals, int32_t *k, rvec **v)
{
    solve_req *t = T(r);
    const json_t *j = json_object_get(o, key);
    char id[40];
    api_fail f = {0};
    int32_t n = t->s.m->host.rows;
    if (!j || json_is_null(j)) {
        if (required) {
            api_error(r, 400, "invalid_request", "`%s` is missing", key);
            return -1;
        }
        return 0;
    }
    int ref = api_vector_ref(j, key, id, &f);
    if (ref < 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        return -1;
    }
    if (ref == 0) {
        int64_t len;
        if (!vals) {
            api_error(r, 400, "invalid_request", "`%s` must be {\"vector\": \"<id>\"}", key);
            return -1;
        }
        if (api_values_from_json(j, n, t->s.m->host.dtype, key, vals, &len, k, &f)) {
            api_error(r, f.status, f.code, "%s", f.message);
            return -1;
        }
        return 0;
    }
    if (t->s.m->shards) { /* not yet: b and x0 travel inline (or binary), x in the answer */
        api_error(r, 422, "unsupported_matrix", "matrix %s is sharded across the MPI ranks; its solves take `%s` "
                  "inline (or in a binary body), not as a resident vector", t->s.m->meta.id, key);
        return -1;
    }
    if (!(*v = vstore_get(r->d->vectors, id))) {
        api_error(r, 404, "vector_not_found", "`%s`: no vector %s (deleted, expired or never created)", key, id);
        return -1;
    }
    if ((*v)->w != t->s.w) {
        api_error(r, 409, "wrong_device", "`%s`: vector %s is on %s but the solve runs on %s (where its kernel runs); "
                  "vectors are never copied between devices", key, id, (*v)->w->name, t->s.w ? t->s.w->name : "no device");
        return -1;
    }
    if ((*v)->v.dtype != t->s.m->host.dtype || (*v)->v.n != n || (*v)->v.k != 1) {
        api_error(r, 400, "shape_mismatch", "`%s`: vector %s is %lld x %d %s; the solve needs %d x 1 %s", key, id,
                  (long long)(*v)->v.n, (*v)->v.k, spmv_dtype_name((*v)->v.dtype), n,
                  spmv_dtype_name(t->s.m->host.dtype));
        return -1;
    }
    return 0;
}

/* The method and its options: method, tol, maxit, restart, preconditioner. */
static int decode_options(request *r, const json_t *o)
{
    solve_req *t = T(r);
    const char *method = json_object_get(o, "method") ? json_string_value(json_object_get(o, "method")) : "cg";
    if (!method || spmv_solve_method_parse(method, &t->s.o.method) != SPMV_OK) {
        api_error(r, 400, "invalid_request", "`method` must be \"cg\", \"bicgstab\", \"gmres\" or \"minres\"");
        return -1;
    }
    json_t *tol = json_object_get(o, "tol"), *maxit = json_object_get(o, "maxit"), *restart = json_object_get(o, "restart");
    t->s.o.tol = tol ? json_number_value(tol) : 1e-8;
    if ((tol && !json_is_number(tol)) || !isfinite(t->s.o.tol) || t->s.o.tol <= 0) {
        api_error(r, 400, "invalid_request", "`tol` must be a finite number > 0 (the relative residual to reach)");
        return -1;
    }
    if (t->s.o.tol < spmv_solve_min_tol(t->s.m->host.dtype)) {
        api_error(r, 400, "invalid_request", "`tol` %g is below what %s can reach: at least %.2g (10 eps)", t->s.o.tol,
                  matrix_dtype_name(t->s.m), spmv_solve_min_tol(t->s.m->host.dtype));
        return -1;
    }
    int64_t max_it = atomic_load(&r->d->limits.max_solve_iterations);
    if (maxit && (!json_is_integer(maxit) || json_integer_value(maxit) < 1 || json_integer_value(maxit) > max_it)) {
        api_error(r, 400, "invalid_request", "`maxit` must be an integer in 1..%lld (max_solve_iterations)",
                  (long long)max_it);
        return -1;
    }
    t->s.o.maxit = maxit ? (int32_t)json_integer_value(maxit) : (int32_t)(max_it < 1000 ? max_it : 1000);
    if (restart && (!json_is_integer(restart) || json_integer_value(restart) < 1 ||
                    json_integer_value(restart) > SPMV_GMRES_RESTART_MAX)) {
        api_error(r, 400, "invalid_request", "`restart` must be an integer in 1..%d", SPMV_GMRES_RESTART_MAX);
        return -1;
    }
    t->s.o.restart = restart ? (int32_t)json_integer_value(restart) : 0;
    return 0;
}

/* "preconditioner": "none" | "jacobi" (the diagonal, as before objects),
 * another type's name (inline, its defaults), {"type", options} (inline),
 * or {"id": ...} or the id alone (a resident one, which must live on the
 * solve's device; the binary form's query can only say the id).
 * Read after the kernel: the worker decides where an inline one is built. */
static int decode_precond(request *r, const json_t *o)
{
    solve_req *t = T(r);
    const json_t *p = json_object_get(o, "preconditioner");
    const char *name = json_string_value(p);
    if (!p || (name && strcmp(name, "none") == 0))
        return 0;
    if (name && strcmp(name, "jacobi") == 0) {
        t->s.jacobi = true;
        return 0;
    }
    json_t *spec = name && store_id_valid(name) ? json_pack("{s:s}", "id", name) /* a resident one's id */
                   : name ? json_pack("{s:s}", "type", name) : json_incref((json_t *)p);
    const char *id = json_string_value(json_object_get(spec, "id"));
    int rc = -1;
    if (!json_is_object(spec))
        api_error(r, 400, "invalid_request", "`preconditioner` must be a type's name, {\"type\": ..., options} or "
                  "{\"id\": ...}");
    else if (id && json_object_size(spec) != 1)
        api_error(r, 400, "invalid_request", "`preconditioner` {\"id\"} names a resident one: no other options");
    else if (id && !(t->s.pc = preconds_get(t->s.m, id)))
        api_error(r, 404, "not_found", "matrix %s has no preconditioner %s", t->s.m->meta.id, id);
    else if (id && t->s.pc->w != t->s.w)
        api_error(r, 409, "wrong_device", "preconditioner %s lives on %s; this solve runs on %s: pick a kernel of %s",
                  id, t->s.pc->w->name, t->s.w ? t->s.w->name : "no device", t->s.pc->w->name);
    else if (id || api_precond_options(r, spec, t->s.m, t->s.w, NULL, &t->s.pc_opts, &t->s.pc_src) == 0)
        rc = 0;
    t->s.pc_inline = rc == 0 && !id;
    json_decref(spec);
    return rc;
}

/* The operator's kernel (default auto, tuned for the matrix) and the worker it runs on. */
static int decode_kernel(request *r, const json_t *o)
{
    solve_req *t = T(r);
    const char *kn = json_string_value(json_object_get(o, "kernel"));
    if (json_object_get(o, "kernel") && !kn) {
        api_error(r, 400, "invalid_request", "`kernel` must be a kernel name");
        return -1;
    }
    if (t->s.m->shards) { /* the ranks' shards: a kernel of their device, or auto (each rank tunes its own) */
        t->s.w = r->d->cluster_worker;
        if (!(t->s.k = api_sharded_kernel(r, kn, t->s.m)))
            return -1;
        spmv_error err = {0};
        if (!spmv_kernel_is_auto(t->s.k) && spmv_params_resolve(t->s.k, NULL, &t->s.p, &err) != SPMV_OK) {
            api_error(r, 400, "invalid_parameter", "%s", err.message);
            return -1;
        }
        return 0;
    }
    t->s.k = spmv_kernel_find(kn ? kn : "auto");
    if (spmv_kernel_is_auto(t->s.k)) {
        t->s.is_auto = true;
        t->s.w = autotune_worker(r->d, t->s.m);
    } else {
        if (api_kernel_check(r, t->s.k, kn, SPMV_OP_SPMV, t->s.m, "it") != 0)
            return -1;
        t->s.w = spmvd_worker_for(r->d, t->s.m, t->s.k);
        spmv_error err = {0};
        if (spmv_params_resolve(t->s.k, NULL, &t->s.p, &err) != SPMV_OK) {
            api_error(r, 400, "invalid_parameter", "%s", err.message);
            return -1;
        }
    }
    return 0;
}

/* b and x0 of a binary request: views into the body (b's k columns, then
 * x0's with ?x0=body), which lives as long as a synchronous request; an
 * async one copies them (solve_end). */
static int body_operands(request *r)
{
    solve_req *t = T(r);
    bool b_in_body = !t->shm_name[0][0];
    size_t col = (size_t)t->s.m->host.rows * spmv_dtype_size(t->s.m->host.dtype);
    size_t want = col * (size_t)t->s.ncols * ((b_in_body ? 1 : 0) + (t->x0_in_body ? 1 : 0));
    if (r->body_len != want) {
        api_error(r, 400, "shape_mismatch", "the body has %zu bytes; %s as %d column%s of %d %s values is %zu bytes",
                  r->body_len, b_in_body ? (t->x0_in_body ? "b then x0" : "b") : t->x0_in_body ? "x0 (b is in a region)"
                  : "nothing (b is in a region)", t->s.ncols, t->s.ncols == 1 ? "" : "s",
                  t->s.m->host.rows, spmv_dtype_name(t->s.m->host.dtype), want);
        return -1;
    }
    t->s.b_vals = b_in_body ? r->body : NULL;
    t->s.x0_vals = t->x0_in_body ? r->body + (b_in_body ? col * (size_t)t->s.ncols : 0) : NULL;
    t->s.vals_borrowed = true;
    return 0;
}

/* b and x in shared-memory regions: the JSON body's {"shm": name,
 * "offset": bytes} (the binary form's ?b_shm= and ?x_shm= are in
 * shm_name already, query_shm_operands), the names checked and kept, b's
 * columns from "k" (JSON; the query's ?k= is read before). 0, or -1
 * answered. */
static int shm_refs(request *r, const json_t *o)
{
    solve_req *t = T(r);
    api_fail f = {0};
    const json_t *k = json_object_get(o, "k");
    if (api_shm_ref(json_object_get(o, "b"), "b", t->shm_name[0], &t->shm_offset[0], &f) < 0 ||
        api_shm_ref(json_object_get(o, "x_out"), "x_out", t->shm_name[1], &t->shm_offset[1], &f) < 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        return -1;
    }
    if (k && !t->shm_name[0][0]) {
        api_error(r, 400, "invalid_request", "`k` is for a b in a shared-memory region; an inline b carries its own "
                  "columns");
        return -1;
    }
    if (k && (!json_is_integer(k) || json_integer_value(k) < 1 || json_integer_value(k) > SPMV_MAX_K)) {
        api_error(r, 400, "invalid_request", "`k` must be an integer in 1..%d (the columns of b)", SPMV_MAX_K);
        return -1;
    }
    if ((t->shm_name[0][0] || t->shm_name[1][0]) && !api_shm_enabled(r))
        return -1;
    if (t->shm_name[0][0] && !t->binary_in)
        t->s.ncols = k ? (int32_t)json_integer_value(k) : 1;
    return 0;
}

/* The regions of shm_refs, once b's columns are known: found, in bounds
 * (b's and x's n x k values), aligned and POSIX (a CUDA region is GPU
 * memory: products only), referenced until the request is freed, and
 * what they hold bounded by max_body_bytes as a body's would be. Nothing
 * is read yet (read_shm_b). 0, or -1 answered. */
static int shm_open_operands(request *r)
{
    solve_req *t = T(r);
    char msg[512];
    if (!t->shm_name[0][0] && !t->shm_name[1][0])
        return 0;
    size_t vs = spmv_dtype_size(t->s.m->host.dtype), bytes = (size_t)t->s.m->host.rows * (size_t)t->s.ncols * vs;
    int64_t limit = atomic_load(&r->d->limits.max_body_bytes);
    if ((int64_t)bytes > limit) {
        api_error(r, 413, "too_large", "%s of %d column%s of %d %s values is %zu bytes, over the limit of %" PRId64
                  " bytes (max_body_bytes)", t->shm_name[0][0] ? "b" : "x", t->s.ncols, t->s.ncols == 1 ? "" : "s",
                  t->s.m->host.rows, spmv_dtype_name(t->s.m->host.dtype), bytes, limit);
        return -1;
    }
    shm_operand *ops[2] = {&t->bs, &t->xs};
    for (int i = 0; i < 2; i++) {
        if (!t->shm_name[i][0])
            continue;
        int st = shm_operand_open(r->d->shm, t->shm_name[i], t->shm_offset[i], bytes, vs, i ? "x" : "b", ops[i], msg,
                                  sizeof msg);
        if (st != SHM_OK) {
            api_shm_error(r, st, msg);
            return -1;
        }
        if (shm_operand_device(ops[i])) {
            api_error(r, 400, "invalid_request", "`%s`: region %s is GPU memory (a CUDA region), which serves "
                      "products; a solve reads b and writes x in a POSIX region", i ? "x_out" : "b", t->shm_name[i]);
            return -1;
        }
    }
    return 0;
}

/* b from its region into the task's own values, once everything else is checked. 0, or -1 answered. */
static int read_shm_b(request *r)
{
    solve_req *t = T(r);
    char msg[512];
    if (!t->bs.reg)
        return 0;
    void *b = malloc(t->bs.bytes ? t->bs.bytes : 1);
    if (!b) {
        api_error(r, 500, "out_of_memory", "out of memory for b's %zu bytes", t->bs.bytes);
        return -1;
    }
    int st = shm_operand_read(&t->bs, b, msg, sizeof msg);
    if (st != SHM_OK) {
        free(b);
        api_shm_error(r, st, msg);
        return -1;
    }
    if (t->s.vals_borrowed && t->s.x0_vals) { /* x0 from the body: the task's own too, as b is now */
        void *x0 = malloc(t->bs.bytes ? t->bs.bytes : 1);
        if (!x0) {
            free(b);
            api_error(r, 500, "out_of_memory", "out of memory for x0's %zu bytes", t->bs.bytes);
            return -1;
        }
        memcpy(x0, t->s.x0_vals, t->bs.bytes);
        t->s.x0_vals = x0;
    }
    t->s.vals_borrowed = false;
    t->s.b_vals = b;
    return 0;
}

/* b, x0 and x_out (inline values or resident vectors on the solve's device); a zero diagonal
 * under Jacobi is refused here, not after queueing: it is the client's mistake. */
static int decode_operands(request *r, const json_t *o)
{
    solve_req *t = T(r);
    int32_t kb = 1, kx = 0;
    if (shm_refs(r, o))
        return -1;
    bool b_shm = t->shm_name[0][0] != '\0';
    if (t->binary_in ? body_operands(r) || operand(r, o, "x0", false, NULL, NULL, &t->s.x0v)
                     : (!b_shm && operand(r, o, "b", true, &t->s.b_vals, &kb, &t->s.bv)) ||
                           operand(r, o, "x0", false, &t->s.x0_vals, &kx, &t->s.x0v))
        return -1;
    if (!t->shm_name[1][0] && operand(r, o, "x_out", false, NULL, NULL, &t->s.xout))
        return -1;
    if (!t->binary_in && !b_shm)
        t->s.ncols = kb;
    kb = t->s.ncols;
    if (shm_open_operands(r))
        return -1;
    if (kx && kx != kb) {
        api_error(r, 400, "shape_mismatch", "`x0` has %d columns and `b` %d", kx, kb);
        return -1;
    }
    if (t->s.ncols > 1 && (t->s.x0v || t->s.xout)) {
        api_error(r, 400, "invalid_request", "with %d columns, x0 and x travel inline: resident vectors are one column",
                  t->s.ncols);
        return -1;
    }
    if (t->s.xout && t->s.bv && t->s.xout == t->s.bv) {
        api_error(r, 400, "invalid_request", "`x_out` and `b` are the same vector");
        return -1;
    }
    if (t->s.jacobi) { /* refused here, not after queueing: a zero diagonal is the client's mistake */
        spmv_error err = {0};
        matrix *m = t->s.m;
        unsigned gen = atomic_load(&m->values_gen);
        void *d = malloc((size_t)(m->host.rows ? m->host.rows : 1) * spmv_dtype_size(m->host.dtype));
        int jrc = d ? spmv_csr_inv_diag(&m->host.csr, d, &err) : SPMV_ERR_NOMEM;
        if (jrc != SPMV_OK) {
            free(d);
            api_error(r, 400, "invalid_request", "%s", d ? err.message : "out of memory");
            return -1;
        }
        if (!(gen & 1u) && atomic_load(&m->values_gen) == gen) { /* the worker takes it, unless values change */
            t->s.dinv_host = d;
            t->s.dinv_gen = gen;
        } else
            free(d);
    }
    return read_shm_b(r);
}

/* What a solve on a sharded matrix does not take yet, each a 422 naming
 * it: k right-hand sides, a resident preconditioner (resident vectors:
 * operand), a type other than the three that shard without
 * communication, and block_jacobi blocks that straddle two ranks. A
 * failed cluster is a 503 at once. 0, or -1 answered. */
static int sharded_check(request *r)
{
    solve_req *t = T(r);
    const matrix *m = t->s.m;
    const cluster_shard_info *info;
    int n = cluster_matrix_shards(m->shards, &info);
    spmv_precond_type pt = t->s.pc_inline ? t->s.pc_opts.type : SPMV_PRECOND_NONE;
    const char *what = t->s.ncols > 1 ? "k right-hand sides (one column a solve)"
                       : t->s.pc ? "a resident preconditioner (name its type inline)"
                       : pt != SPMV_PRECOND_NONE && pt != SPMV_PRECOND_JACOBI && pt != SPMV_PRECOND_BLOCK_JACOBI &&
                               pt != SPMV_PRECOND_CHEBYSHEV ? spmv_precond_type_name(pt)
                                                            : NULL;
    if (what) {
        api_error(r, 422, "unsupported_matrix", "matrix %s is sharded across %d ranks; its solves take CG, BiCGSTAB, "
                  "GMRES or MINRES with b (and x0) inline, one column, and the preconditioners none, jacobi, "
                  "block_jacobi or chebyshev (each rank's on its diagonal block); not %s", m->meta.id, n, what);
        return -1;
    }
    for (int q = 0; pt == SPMV_PRECOND_BLOCK_JACOBI && q < n; q++)
        if ((info[q].row_end - info[q].row_begin) % t->s.pc_opts.block_size) {
            api_error(r, 422, "unsupported_matrix", "matrix %s is sharded; rank %d holds rows %d..%d, which blocks of "
                      "%d rows do not tile: block_jacobi's blocks must not straddle two ranks", m->meta.id, q,
                      info[q].row_begin, info[q].row_end, t->s.pc_opts.block_size);
            return -1;
        }
    if (cluster_failed(r->d->cluster)) {
        api_error(r, 503, "cluster_failed", "matrix %s is sharded and the cluster has failed: %s", m->meta.id,
                  cluster_failed(r->d->cluster));
        return -1;
    }
    return 0;
}

/* The options of either encoding, as one object; 1 when async, 0 when
 * not, -1 answered. */
static int decode_object(request *r, const json_t *o)
{
    solve_req *t = T(r);
    if (t->s.m->host.rows != t->s.m->host.cols) {
        api_error(r, 400, "shape_mismatch", "solve needs a square matrix; %s is %d x %d", t->s.m->meta.id,
                  t->s.m->host.rows, t->s.m->host.cols);
        return -1;
    }
    if (decode_options(r, o) || decode_kernel(r, o) || decode_precond(r, o))
        return -1;
    json_t *async = json_object_get(o, "async"), *history = json_object_get(o, "history");
    if ((async && !json_is_boolean(async)) || (history && !json_is_boolean(history))) {
        api_error(r, 400, "invalid_request", "`%s` must be true or false",
                  async && !json_is_boolean(async) ? "async" : "history");
        return -1;
    }
    if (decode_operands(r, o) || (t->s.m->shards && sharded_check(r)))
        return -1;
    const char *accept = api_header_in(r, MHD_HTTP_HEADER_ACCEPT);
    t->binary_out = !t->s.xout && !t->xs.reg && (t->binary_in || (accept && strstr(accept, "application/octet-stream")));
    t->history_out = t->binary_out && json_is_true(history);
    t->history_header = t->binary_out && !t->binary_in && !history;
    return json_is_true(async) ? 1 : 0;
}

static int decode_json(request *r)
{
    static const char *const keys[] = {"method", "restart", "b", "x0", "tol", "maxit", "preconditioner", "kernel",
                                       "x_out", "async", "history", "k", NULL};
    json_error_t jerr;
    if (!api_json_body_fits(r))
        return -1;
    json_t *o = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o || !json_is_object(o)) {
        api_error(r, 400, "invalid_json", "body must be a JSON object%s%s", o ? "" : ": ", o ? "" : jerr.text);
        json_decref(o);
        return -1;
    }
    int rc = api_known_fields(r, o, keys) ? -1 : decode_object(r, o);
    json_decref(o);
    return rc;
}

/* One query value as the JSON a body would hold: 'i' an integer, 'f' a
 * number, 'b' a boolean, 'v' {"vector": id}, else a string; NULL with the
 * 400 answered. */
static json_t *query_value(request *r, const char *key, const char *v, char type)
{
    char *end = NULL;
    json_t *j = NULL;
    if (type == 'i') {
        long long x = strtoll(v, &end, 10);
        j = end != v && !*end ? json_integer(x) : NULL;
    } else if (type == 'f') {
        double x = strtod(v, &end);
        j = end != v && !*end ? json_real(x) : NULL;
    } else if (type == 'b') {
        j = !strcmp(v, "true") || !strcmp(v, "1") ? json_true() : !strcmp(v, "false") || !strcmp(v, "0") ? json_false() : NULL;
    } else {
        j = type == 'v' ? json_pack("{s:s}", "vector", v) : json_string(v);
    }
    if (!j)
        api_error(r, 400, "invalid_parameter", "`%s` must be %s, not \"%s\"", key,
                  type == 'i' ? "an integer" : type == 'f' ? "a number" : type == 'b' ? "true or false" : "a string", v);
    return j;
}

/* The query keys of a binary solve and their types (query_value); b is
 * the body, and x0=body says x0 follows it there. */
static const struct {
    const char *key;
    char type;
} query_keys[] = {
    {"method", 's'}, {"tol", 'f'}, {"maxit", 'i'}, {"restart", 'i'}, {"preconditioner", 's'}, {"kernel", 's'},
    {"x0", 'v'}, {"x_out", 'v'}, {"async", 'b'}, {"history", 'b'},
};

/* The columns of a binary request (?k=, default 1); 0 when malformed. */
static int32_t query_k(request *r)
{
    const char *ks = api_query(r, "k");
    char *end = NULL;
    long long k = ks ? strtoll(ks, &end, 10) : 1;
    return !ks || (end != ks && !*end && k >= 1 && k <= SPMV_MAX_K) ? (int32_t)k : 0;
}

static const char *lookup_query(void *ctx, const char *key) { return api_query(ctx, key); }

/* ?b_shm=NAME&b_offset=BYTES and ?x_shm=&x_offset= into shm_name and
 * shm_offset, as spmv's operands are read (api_query_shm). 0, or -1
 * answered. */
static int query_shm_operands(request *r)
{
    solve_req *t = T(r);
    api_fail f = {0};
    if (api_query_shm(lookup_query, r, "b", t->shm_name[0], &t->shm_offset[0], &f) ||
        api_query_shm(lookup_query, r, "x", t->shm_name[1], &t->shm_offset[1], &f)) {
        api_error(r, f.status, f.code, "%s", f.message);
        return -1;
    }
    if (t->shm_name[1][0] && api_query(r, "x_out")) {
        api_error(r, 400, "invalid_request", "x goes into a vector (?x_out=) or a region (?x_shm=), not both");
        return -1;
    }
    return 0;
}

/* A binary request: the query string as the object a JSON body would be. */
static int decode_query(request *r)
{
    solve_req *t = T(r);
    json_t *o = json_object();
    int rc = -1;
    if (!o) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return -1;
    }
    for (size_t i = 0; i < sizeof query_keys / sizeof query_keys[0]; i++) {
        const char *v = api_query(r, query_keys[i].key);
        if (!v || (strcmp(query_keys[i].key, "x0") == 0 && strcmp(v, "body") == 0))
            continue;
        json_t *j = query_value(r, query_keys[i].key, v, query_keys[i].type);
        if (!j)
            goto out;
        json_object_set_new(o, query_keys[i].key, j);
    }
    if (query_shm_operands(r) != 0)
        goto out;
    if (!(t->s.ncols = query_k(r))) {
        api_error(r, 400, "invalid_parameter", "`k` must be an integer in 1..%d (the columns of b), not \"%s\"",
                  SPMV_MAX_K, api_query(r, "k"));
        goto out;
    }
    rc = decode_object(r, o);
out:
    json_decref(o);
    return rc;
}

/* ------------------------------------------------------------ answers */

/* One column's report: stop, iterations, relres, the residual history (or
 * its length when it goes in a binary body), time, products. */
static json_t *column_json(const spmv_solve_result *s, bool history_inline)
{
    json_t *stop = json_pack("{s:s, s:s}", "reason", spmv_solve_stop_name(s->stop), "detail", s->detail);
    if (stop && s->stop == SPMV_STOP_BREAKDOWN)
        json_object_set_new(stop, "value", api_json_real(s->breakdown_value));
    json_t *o = json_pack("{s:b, s:o, s:i, s:o, s:{s:o, s:o, s:o, s:o}, s:i, s:b}", "converged",
                          s->stop == SPMV_STOP_CONVERGED, "stop", stop, "iterations", s->iterations, "relres",
                          api_json_real(s->relres), "time", "total_ms", api_json_real(s->total_ms), "spmv_ms",
                          api_json_real(s->spmv_ms), "vector_ms", api_json_real(s->vector_ms), "setup_ms",
                          api_json_real(s->setup_ms), "spmv_calls", s->spmv_calls, "fused", s->fused);
    if (o && history_inline) {
        json_t *hist = json_array();
        for (int32_t i = 0; i < s->history_len; i++)
            json_array_append_new(hist, api_json_real(s->history[i]));
        json_object_set_new(o, "residual_history", hist);
    } else if (o) {
        json_object_set_new(o, "residual_history_len", json_integer(s->history_len));
    }
    return o;
}

/* k columns: each one's report under "columns", and the whole: converged
 * when every column did, iterations and times summed, the worst relres. */
static json_t *columns_json(const solve_req *t, bool history_inline)
{
    json_t *cols = json_array();
    bool all = true;
    long long its = 0, calls = 0, longest = 0;
    double worst = 0, total = 0, spmv = 0, vec = 0, setup = 0;
    for (int32_t c = 0; c < t->s.ncols; c++) {
        const spmv_solve_result *s = &t->s.res[c];
        json_array_append_new(cols, column_json(s, history_inline));
        all = all && s->stop == SPMV_STOP_CONVERGED;
        its += s->iterations;
        longest = s->iterations > longest ? s->iterations : longest;
        calls += s->spmv_calls;
        worst = isnan(s->relres) || s->relres > worst ? s->relres : worst;
        total += s->total_ms, spmv += s->spmv_ms, vec += s->vector_ms, setup += s->setup_ms;
    }
    if (t->s.lockstep) { /* one call for all k: its time once, each column's share of the products summed */
        total = t->s.res[0].total_ms;
        vec = total - spmv - setup > 0 ? total - spmv - setup : 0;
    }
    json_t *o = json_pack("{s:i, s:b, s:I, s:o, s:{s:o, s:o, s:o, s:o}, s:I, s:o, s:b}", "k", t->s.ncols, "converged",
                          all, "iterations", (json_int_t)its, "relres", api_json_real(worst), "time", "total_ms",
                          api_json_real(total), "spmv_ms", api_json_real(spmv), "vector_ms", api_json_real(vec),
                          "setup_ms", api_json_real(setup), "spmv_calls", (json_int_t)calls, "columns", cols,
                          "lockstep", t->s.lockstep);
    if (o && t->s.lockstep) { /* the lockstep's own count: the longest column's; fused: every column's scalars on
                               * the device (krylov_fused_block) */
        json_object_set_new(o, "lockstep_iterations", json_integer(longest));
        json_object_set_new(o, "fused", json_boolean(t->s.res[0].fused));
    }
    return o;
}

/* A sharded solve's split: each rank's compute (its products), exchange
 * (their halo), reductions (the dots' and norms' all-gathers, with the
 * waits for slower ranks in them), preconditioner and whole time; and at
 * the top the slowest rank's of each. */
static json_t *cluster_json(const solve_req *t)
{
    const cluster_solve_stats *s = &t->s.cst;
    const cluster_shard_info *info;
    int n = cluster_matrix_shards(t->s.m->shards, &info);
    json_t *ranks = json_array();
    double cp = 0, ex = 0, rd = 0;
    for (int q = 0; q < n && q < s->nranks && q < CLUSTER_SOLVE_REPORT_RANKS; q++) {
        const cluster_solve_rank *k = &s->rank[q];
        cp = k->compute_ms > cp ? k->compute_ms : cp;
        ex = k->exchange_ms > ex ? k->exchange_ms : ex;
        rd = k->reduce_ms > rd ? k->reduce_ms : rd;
        json_array_append_new(ranks, json_pack("{s:i, s:s, s:s, s:[i,i], s:s, s:i, s:o, s:o, s:o, s:I, s:o, s:o, s:o}",
                                               "rank", q, "host", info[q].host, "device", info[q].device, "rows",
                                               info[q].row_begin, info[q].row_end, "kernel", k->kernel, "iterations",
                                               k->iterations, "compute_ms", api_json_real(k->compute_ms), "exchange_ms",
                                               api_json_real(k->exchange_ms), "reduce_ms", api_json_real(k->reduce_ms),
                                               "reductions", (json_int_t)k->reductions, "precond_ms",
                                               api_json_real(k->precond_ms), "precond_setup_ms",
                                               api_json_real(k->precond_setup_ms), "total_ms",
                                               api_json_real(k->total_ms)));
    }
    return json_pack("{s:i, s:I, s:o, s:o, s:o, s:o}", "ranks", n, "halo_values", (json_int_t)s->halo_values,
                     "compute_ms", api_json_real(cp), "exchange_ms", api_json_real(ex), "reduce_ms", api_json_real(rd),
                     "per_rank", ranks);
}

static json_t *result_json(const solve_req *t, bool history_inline)
{
    json_t *o = t->s.ncols > 1 ? columns_json(t, history_inline) : column_json(&t->s.res[0], history_inline);
    if (!o)
        return NULL;
    json_object_set_new(json_object_get(o, "time"), "queue_ms", api_json_real(t->s.queue_ms));
    json_object_set_new(o, "method", json_string(spmv_solve_method_name(t->s.o.method)));
    bool each_rank_tuned = t->s.m->shards && spmv_kernel_is_auto(t->s.k);
    json_object_set_new(o, "kernel", json_string(each_rank_tuned ? t->s.cst.kernel : t->s.k->name));
    if (!each_rank_tuned) /* auto on shards: each rank's own choice and parameters (cluster.per_rank) */
        json_object_set_new(o, "params", api_params_json(t->s.k, &t->s.p, t->s.m));
    if (t->s.m->shards)
        json_object_set_new(o, "cluster", cluster_json(t));
    json_object_set_new(o, "matrix", json_string(t->s.m->meta.id));
    json_object_set_new(o, "device", json_string(t->s.w->name));
    if (t->s.xout)
        json_object_set_new(o, "x", json_pack("{s:s}", "vector", t->s.xout->id));
    if (t->xs.reg)
        json_object_set_new(o, "x", json_pack("{s:s, s:I}", "shm", t->xs.reg->name, "offset", (json_int_t)t->xs.offset));
    json_object_set_new(o, "preconditioner", json_string(t->s.pc          ? spmv_precond_type_name(t->s.pc->o.type)
                                                         : t->s.pc_inline ? spmv_precond_type_name(t->s.pc_opts.type)
                                                         : t->s.jacobi    ? "jacobi"
                                                                          : "none"));
    if (t->s.pc) /* the object: which, and whether this solve paid its setup */
        json_object_set_new(o, "preconditioner_object",
                            json_pack("{s:s, s:b, s:b, s:o}", "id", t->s.pc->id, "inline", t->s.pc->inline_cache,
                                      "built", t->s.pc_built, "setup_ms",
                                      api_json_real(t->s.pc_built ? t->s.pc->setup_ms : 0.0)));
    return o;
}

/* {"x":[...], <rest>}, or the rest alone when x went into a vector. */
static char *json_answer(const solve_req *t, size_t *len)
{
    return api_json_values_answer("x", t->s.m->host.dtype, t->s.x, t->s.m->host.rows, t->s.ncols,
                                  result_json(t, true), len);
}

/* x as raw values, then (history_out) each column's residual history as
 * float64 values; the report in X-SpMV-Solve. */
static void binary_answer(request *r)
{
    solve_req *t = T(r);
    size_t xbytes = (size_t)t->s.m->host.rows * (size_t)t->s.ncols * spmv_dtype_size(t->s.m->host.dtype), hist = 0;
    for (int32_t c = 0; t->history_out && c < t->s.ncols; c++)
        hist += (size_t)t->s.res[c].history_len * sizeof(double);
    if (hist) { /* grown in place where the allocator can (large blocks are remapped, not copied) */
        char *body = realloc(t->s.x, xbytes + hist);
        if (!body) {
            api_error(r, 500, "out_of_memory", "out of memory writing the answer");
            return;
        }
        t->s.x = body;
        for (int32_t c = 0; c < t->s.ncols; c++) {
            memcpy(body + xbytes, t->s.res[c].history, (size_t)t->s.res[c].history_len * sizeof(double));
            xbytes += (size_t)t->s.res[c].history_len * sizeof(double);
        }
    }
    json_t *hdr = result_json(t, t->history_header);
    api_bytes(r, 200, "application/octet-stream", t->s.x, xbytes);
    t->s.x = NULL;
    api_header_json(r, "X-SpMV-Solve", hdr);
}

/* A sharded solve that failed because the cluster did (a rank lost
 * mid-solve): 503 cluster_failed, as a sharded product's. */
static bool cluster_lost(const solve_req *t)
{
    return t->s.m->shards && t->s.rc == SPMV_ERR_UNAVAILABLE && !atomic_load(&t->s.d->draining) &&
           cluster_failed(t->s.d->cluster);
}

/* x into its region (pwrite through the object's descriptor), the
 * values then dropped: the answer says where x went. SHM_OK, or the
 * status with msg. */
static int write_shm_x(solve_req *t, char *msg, size_t msglen)
{
    if (!t->xs.reg || t->s.rc != SPMV_OK)
        return SHM_OK;
    if (!t->s.x) {
        snprintf(msg, msglen, "no x to write into region %s", t->xs.reg->name);
        return SHM_IO;
    }
    int st = shm_operand_write(&t->xs, t->s.x, msg, msglen);
    free(t->s.x);
    t->s.x = NULL;
    return st;
}

static void answer(request *r)
{
    solve_req *t = T(r);
    char msg[512];
    int st = write_shm_x(t, msg, sizeof msg);
    if (st != SHM_OK) {
        api_shm_error(r, st, msg);
        return;
    }
    if (t->s.rc != SPMV_OK) {
        if (cluster_lost(t))
            api_error(r, 503, "cluster_failed", "%s", t->s.err.message);
        else
            api_error_task(r, t->s.rc, &t->s.err);
        return;
    }
    if (t->binary_out) {
        binary_answer(r);
        return;
    }
    size_t len;
    char *text = json_answer(t, &len);
    api_json_text(r, text, len);
}

static void solve_finish(task *base, int status)
{
    solve_req *t = (solve_req *)base;
    api_task_status(status, &t->s.rc, &t->s.err);
    if (t->r) {
        api_task_done(t->r);
        return;
    }
    if (cluster_lost(t)) { /* the job says so as the synchronous answer would */
        job_finish(t->s.job, 503, api_error_body("cluster_failed", t->s.err.message));
        solve_free(t);
        return;
    }
    char msg[512];
    int st = write_shm_x(t, msg, sizeof msg);
    if (st != SHM_OK) {
        const char *code;
        int http = api_shm_status(st, &code);
        job_finish(t->s.job, http, api_error_body(code, msg));
        solve_free(t);
        return;
    }
    size_t len = 0;
    char *text = t->s.rc == SPMV_OK ? json_answer(t, &len) : NULL; /* before len is read */
    api_job_finish_answer(t->s.d, t->s.job, t->s.rc, &t->s.err, text, len);
    solve_free(t);
}

/* ------------------------------------------------------------ route */

/* max_body_bytes, and for a binary body twice b's (and x0's) exact size
 * plus 4 KiB (a body a little off still gets the 400 that names both). */
static int64_t body_limit(request *r, const solve_req *t)
{
    int64_t limit = atomic_load(&r->d->limits.max_body_bytes);
    if (!t->binary_in)
        return limit;
    int64_t k = query_k(r) ? query_k(r) : 1;
    int64_t shape = 4096 + 2 * (t->x0_in_body ? 2 : 1) * k * (int64_t)t->s.m->host.rows *
                               (int64_t)spmv_dtype_size(t->s.m->host.dtype);
    return shape < limit ? shape : limit;
}

static void solve_begin(request *r)
{
    solve_req *t = calloc(1, sizeof *t);
    if (!t) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    t->s.d = r->d;
    r->state = t;
    if (!(t->s.m = api_get_matrix(r)))
        return;
    const char *ct = api_header_in(r, MHD_HTTP_HEADER_CONTENT_TYPE), *x0 = api_query(r, "x0");
    t->binary_in = ct && strncasecmp(ct, "application/octet-stream", 24) == 0;
    t->x0_in_body = t->binary_in && x0 && strcmp(x0, "body") == 0;
    t->body_limit = body_limit(r, t);
    if (api_check_content_length(r, t->body_limit, "max_body_bytes") && t->binary_in)
        api_body_pooled(r, t->body_limit);
}

static void solve_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, T(r)->body_limit, "max_body_bytes");
}

/* An async request outlives its body: b and x0 become the task's own. */
static int own_values(request *r)
{
    solve_req *t = T(r);
    if (!t->s.vals_borrowed)
        return 0;
    size_t bytes = (size_t)t->s.m->host.rows * (size_t)t->s.ncols * spmv_dtype_size(t->s.m->host.dtype);
    void *b = malloc(bytes ? bytes : 1), *x0 = t->s.x0_vals ? malloc(bytes ? bytes : 1) : NULL;
    if (!b || (t->s.x0_vals && !x0)) {
        free(b);
        free(x0);
        api_error(r, 500, "out_of_memory", "out of memory");
        return -1;
    }
    memcpy(b, t->s.b_vals, bytes);
    if (x0)
        memcpy(x0, t->s.x0_vals, bytes);
    t->s.b_vals = b;
    t->s.x0_vals = x0;
    t->s.vals_borrowed = false;
    return 0;
}

static void solve_end(request *r)
{
    solve_req *t = T(r);
    int async = t->binary_in ? decode_query(r) : decode_json(r);
    if (async < 0)
        return;
    /* x inline as JSON (an answer or a job's result) is bounded before the solve runs */
    if ((async || !t->binary_out) && !t->s.xout && !t->xs.reg && !api_json_values_fit(r, t->s.m->host.rows, 1, "x"))
        return;
    t->s.base.run = solve_run;
    t->s.base.sliced = true; /* iteration by iteration: products queued meanwhile run between two */
    t->s.base.finish = solve_finish;
    if (!async) {
        t->r = r;
        api_submit_and_suspend(r, t->s.w, &t->s.base);
        return;
    }
    if (own_values(r) == 0)
        api_submit_async(r, t->s.w, &t->s.base, &t->s.job, "solve", t->s.m->meta.id);
}

static void solve_cleanup(request *r)
{
    solve_free(T(r));
    r->state = NULL;
}

/* A binary solve's options (query_keys) and its columns. */
static const char *const solve_query[] = {"method", "tol", "maxit", "restart", "preconditioner", "kernel", "x0",
                                          "x_out", "async", "history", "k", "b_shm", "b_offset", "x_shm", "x_offset",
                                          NULL};

const route_handlers api_solve_post = {
    .begin = solve_begin, .body = solve_body, .end = solve_end, .resumed = answer, .cleanup = solve_cleanup,
    .accepts_body = true,
    .body_kind = API_BODY_JSON_OR_BINARY,
    .query = solve_query,
};
