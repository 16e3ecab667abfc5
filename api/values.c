/* values.c — PUT /v1/matrices/{id}/values: new values on the same pattern.
 *
 * The body is the nnz values in CSR order, little-endian, of the matrix's
 * dtype (float64 for dtype mixed, rounded to float32 as at upload), so its
 * Content-Length is known exactly: anything else is refused before the
 * body is read (400 naming both lengths), and past max_upload_bytes it is
 * 413 naming the key. The body becomes the values without a copy; the
 * daemon (daemon/values.h) writes the file, then changes the matrix on its
 * worker; the answer is the descriptor, with the new sha256.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "api/api.h"
#include "daemon/values.h"

typedef struct values_req {
    values_task t;              /* first: the task's finish finds the request */
    request *r;
    int64_t want;               /* the body's exact length */
} values_req;

static values_req *V(request *r) { return r->state; }

static void values_begin_route(request *r)
{
    values_req *q = calloc(1, sizeof *q);
    if (!q) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    r->state = q;
    q->r = r;
    q->t.staged.fd = -1;
    matrix *m = api_get_matrix(r);
    if (!m || api_refuse_sharded(r, m, "PUT .../values")) {
        matrix_unref(m);
        return;
    }
    bool free_to_go = values_begin(&q->t, r->d, m);
    matrix_unref(m);
    if (!free_to_go) {
        api_error(r, 409, "busy", "the values of matrix %s are being replaced by another request; send this one after "
                  "it", r->id);
        return;
    }
    q->want = q->t.m->host.nnz * (int64_t)spmv_dtype_size(q->t.m->host.dtype);
    int64_t limit = atomic_load(&r->d->limits.max_upload_bytes);
    const char *cl = api_header_in(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoll(cl, NULL, 10) != q->want && strtoll(cl, NULL, 10) <= limit) {
        api_error(r, 400, "shape_mismatch", "the body has %s bytes; matrix %s takes its %" PRId64 " non-zeros' values "
                  "as %s, %" PRId64 " bytes", cl, r->id, q->t.m->host.nnz, spmv_dtype_name(q->t.m->host.dtype), q->want);
        values_release(&q->t); /* the claim goes with the answer, not after it is sent */
    } else if (api_check_content_length(r, limit, "max_upload_bytes"))
        api_body_pooled(r, q->want);
    else
        values_release(&q->t);
}

static void values_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, V(r)->want, "the matrix's non-zeros' values");
}

static void values_finish(task *base, int status)
{
    values_req *q = (values_req *)base;
    api_task_status(status, &q->t.rc, &q->t.err);
    api_task_done(q->r);
}

static void values_end(request *r)
{
    values_req *q = V(r);
    spmv_error err = {0};
    int rc = values_prepare(&q->t, r->body, r->body_len, &err);
    if (rc == SPMV_OK)
        rc = values_stage(&q->t, &err);
    if (rc != SPMV_OK) {
        api_error(r, rc == SPMV_ERR_INVALID ? 400 : rc == SPMV_ERR_LIMIT ? 422 : 500,
                  rc == SPMV_ERR_INVALID ? "shape_mismatch" : rc == SPMV_ERR_LIMIT ? "too_large" : "io_error", "%s",
                  err.message);
        values_release(&q->t);
        return;
    }
    if (!q->t.w->ops->matrix_set_values) {
        api_error(r, 422, "unsupported_matrix", "matrix %s lives on %s, whose matrices take no new values", r->id,
                  q->t.w->name);
        values_release(&q->t);
        return;
    }
    q->t.base.run = values_run;
    q->t.base.finish = values_finish;
    api_submit_and_suspend(r, q->t.w, &q->t.base);
}

static void values_resumed(request *r)
{
    values_req *q = V(r);
    spmv_error err = {0};
    int rc = values_commit(&q->t, SPMV_OK, &err);
    json_t *desc = rc == SPMV_OK ? api_matrix_json(r->d, q->t.m) : NULL;
    /* the matrix is free for the next change before the client hears of
     * this one: the cleanup runs only once the answer is sent, and a
     * client's next PUT may come before it */
    values_release(&q->t);
    if (rc != SPMV_OK)
        api_error_task(r, rc, &err);
    else
        api_json(r, 200, desc);
}

static void values_cleanup(request *r)
{
    values_req *q = V(r);
    if (!q)
        return;
    values_release(&q->t);
    free(q);
    r->state = NULL;
}

const route_handlers api_values_put = {
    .begin = values_begin_route,
    .body = values_body,
    .end = values_end,
    .resumed = values_resumed,
    .cleanup = values_cleanup,
    .accepts_body = true,
    .body_kind = API_BODY_BINARY,
    .query = api_no_query,
};
