/* tune.c — POST /v1/matrices/{id}/tune: choose the `auto` kernel now.
 *
 * Tunes the matrix afresh (even if it has a choice) on the worker of its
 * device, within the configured budget (tune_budget_ms, tune_max_runs),
 * stores the choice with the matrix (daemon/autotune.c: memory and the
 * <id>.tune side file) and answers it:
 *   {"matrix": id, "device": "gpu0", "auto": {"kernel", "params",
 *    "median_ms", "tuning_ms", "tuning_runs", "timed", "candidates",
 *    "budget_hit", "source": "tuned"}}
 * A body, if any, is ignored. Later spmv calls with "kernel":"auto" use the
 * choice without tuning again, across restarts too.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "daemon/autotune.h"

typedef struct tune_req {
    tune_task t;          /* what runs on the worker (daemon/autotune.h) */
    request *r;
} tune_req;

static tune_task *TT(request *r) { return r->state ? &((tune_req *)r->state)->t : NULL; }

static void tune_begin(request *r)
{
    tune_req *q = calloc(1, sizeof *q);
    if (!q) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    tune_task *t = &q->t;
    t->d = r->d;
    r->state = q;
    t->m = api_get_matrix(r); /* answers 404 itself */
    api_refuse_sharded(r, t->m, "/tune");
}

static void tune_finish(task *base, int status)
{
    tune_req *q = (tune_req *)base;
    api_task_status(status, &q->t.rc, &q->t.err);
    api_task_done(q->r);
}

static void tune_end(request *r)
{
    tune_task *t = TT(r);
    if (!t || !t->m)
        return;
    worker *w = autotune_worker(r->d, t->m);
    if (!w) {
        api_error(r, 409, "kernel_unavailable", "no worker holds matrix %s", t->m->meta.id);
        return;
    }
    ((tune_req *)r->state)->r = r;
    t->base.run = tune_run;
    t->base.finish = tune_finish;
    api_submit_and_suspend(r, w, &t->base);
}

static void tune_answer(request *r)
{
    tune_task *t = TT(r);
    if (t->rc != SPMV_OK) {
        api_error_spmv(r, t->rc, &t->err);
        return;
    }
    api_json(r, 200, json_pack("{s:s, s:s, s:o}", "matrix", t->m->meta.id, "device", t->worker_name, "auto",
                               autotune_json(&t->tuned)));
}

static void tune_cleanup(request *r)
{
    tune_task *t = TT(r);
    if (t)
        matrix_unref(t->m);
    free(r->state);
    r->state = NULL;
}

const route_handlers api_tune_post = {
    .begin = tune_begin,
    .end = tune_end,
    .resumed = tune_answer,
    .cleanup = tune_cleanup,
    .accepts_body = false,
    .body_kind = API_BODY_NONE,
    .query = api_no_query,
};
