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
#include "daemon/log.h"

typedef struct tune_task {
    task base;
    request *r;
    spmvd *d;
    matrix *m;
    matrix_tuning tuned;
    int rc;
    spmv_error err;
    char worker_name[16];
} tune_task;

static tune_task *TT(request *r) { return r->state; }

static void tune_begin(request *r)
{
    tune_task *t = calloc(1, sizeof *t);
    if (!t) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    t->d = r->d;
    r->state = t;
    t->m = api_get_matrix(r); /* answers 404 itself */
    api_refuse_sharded(r, t->m, "/tune");
}

static void tune_run(task *base, worker *w)
{
    tune_task *t = (tune_task *)base;
    snprintf(t->worker_name, sizeof t->worker_name, "%s", w->name);
    t->rc = autotune_get(t->d, w, t->m, true, &t->tuned, &t->err);
}

static void tune_finish(task *base, int status)
{
    tune_task *t = (tune_task *)base;
    if (status != SPMV_OK) {
        t->rc = status;
        spmv_error_set(&t->err, status, 0, "the daemon is shutting down");
    }
    api_task_done(t->r);
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
    t->r = r;
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
    free(t);
    r->state = NULL;
}

const route_handlers api_tune_post = {
    .begin = tune_begin,
    .end = tune_end,
    .resumed = tune_answer,
    .cleanup = tune_cleanup,
    .accepts_body = false,
};
