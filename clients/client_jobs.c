/* client_jobs.c — the jobs resource: GET and DELETE /v1/jobs/{id}, and
 * waiting for a job to end with long polls, GET /v1/jobs/{id}?wait=S
 * (docs/api.md): no sleeping between polls, the daemon answers the moment
 * the job ends.
 *
 * A bench and an async solve answer with the job they started;
 * spmvc_take_job_id() reads its id for them (client_spmv.c,
 * client_solve.c). A failed job carries its own error, which becomes the
 * handle's message.
 */
#include "client_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The longest long poll the daemon takes (?wait=S, S in 0..60). */
#define SPMVC_JOB_WAIT_MAX_MS 60000L

/* The job id an answer names ({"job_id"}, {"job":{"id"}} or {"id"}) into
 * id (cap bytes); PROTOCOL when it names none. `what` names the call. */
spmv_client_status spmvc_take_job_id(spmv_client *h, const response *r, const char *what, char *id, size_t cap)
{
    const char *jid = json_string_value(json_object_get(r->json, "job_id"));
    if (!jid) jid = json_string_value(json_object_get(json_object_get(r->json, "job"), "id"));
    if (!jid) jid = json_string_value(json_object_get(r->json, "id"));
    if (!jid || !*jid || strlen(jid) >= cap)
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the %s answer (HTTP %ld) names no job id", what, r->status);
    snprintf(id, cap, "%s", jid);
    return SPMV_CLIENT_OK;
}

void spmv_client_job_free(spmv_client_job *j)
{
    if (!j)
        return;
    free(j->result);
    free(j->json);
    free(j);
}

/* The job's own error message, if it carries one as a string or as
 * {"code","message"}. */
static void job_error(spmv_client *h, const json_t *root)
{
    const json_t *e = json_object_get(root, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "message"));
    if (code)
        snprintf(h->errcode, sizeof h->errcode, "%s", code);
    spmvc_fail(h, SPMV_CLIENT_ERR_JOB_FAILED, "%s", msg ? msg : "the job failed without a message");
}

static spmv_client_status parse_job(spmv_client *h, const json_t *root, spmv_client_job *j)
{
    const json_t *job = json_is_object(json_object_get(root, "job")) ? json_object_get(root, "job") : root;
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *state = json_string_value(json_object_get(job, "state"));
    double p = spmvc_json_num(json_object_get(job, "progress"), 0);
    const json_t *result = json_object_get(job, "result");

    if (!id || strlen(id) >= sizeof j->id || !state || strlen(state) >= sizeof j->state)
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the job answer lacks an id or a state");
    if (!(p >= 0 && p <= 1))
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "job progress %g is outside 0..1", p);
    snprintf(j->id, sizeof j->id, "%s", id);
    snprintf(j->state, sizeof j->state, "%s", state);
    j->progress = p;
    if ((result && !json_is_null(result) && !(j->result = spmvc_dump_json(result))) ||
        !(j->json = spmvc_dump_json(root)))
        return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    return SPMV_CLIENT_OK;
}

/* A job answer into a fresh spmv_client_job. */
static spmv_client_status job_from_json(spmv_client *h, const json_t *root, spmv_client_job **out)
{
    spmv_client_job *j = calloc(1, sizeof *j);
    spmv_client_status st = j ? parse_job(h, root, j) : spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (st == SPMV_CLIENT_OK)
        *out = j;
    else
        spmv_client_job_free(j);
    return st;
}

/* GET /v1/jobs/{id}, with wait_ms > 0 a long poll (?wait=S): the daemon
 * answers when the job ends or S seconds pass, whichever is first. */
static spmv_client_status job_poll(spmv_client *h, const char *job_id, long wait_ms, spmv_client_job **out)
{
    spmv_client_status st;

    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, job_id, "job")) != SPMV_CLIENT_OK) return st;
    request req = {.method = "GET", .collection = "jobs", .id = job_id, .want_json = true, .hold_ms = wait_ms};
    if (wait_ms > 0) {
        char secs[32];
        snprintf(secs, sizeof secs, "%.3f", (double)wait_ms / 1000);
        spmvc_query_add(h, &req, "wait", secs);
    }
    response r;
    if ((st = spmvc_request(h, &req, &r)) == SPMV_CLIENT_OK && (st = job_from_json(h, r.json, out)) == SPMV_CLIENT_OK &&
        strcmp((*out)->state, "failed") == 0)
        job_error(h, r.json);
    spmvc_response_clear(&r);
    return st;
}

spmv_client_status spmv_client_job_get(spmv_client *h, const char *job_id, spmv_client_job **out)
{
    return job_poll(h, job_id, 0, out);
}

static bool job_finished(const spmv_client_job *j)
{
    return strcmp(j->state, "done") == 0 || strcmp(j->state, "failed") == 0 ||
           strcmp(j->state, "succeeded") == 0 || strcmp(j->state, "cancelled") == 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A daemon that predates long polls answers ?wait= at once: when a poll
 * came back in under half its wait with the job still running, the next
 * one is paced instead of sent straight away (a daemon with long polls
 * never gets here: it holds each poll until the job ends or the wait
 * passes). */
static void pace_old_daemon(double asked_at, long wait_ms)
{
    double held = now_ms() - asked_at;
    if (held >= wait_ms / 2.0)
        return;
    long ms = wait_ms < 250 ? wait_ms : 250;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Waits with long polls of at most `slice_ms` each, calling `progress`
 * after every one; see spmvclient.h. */
spmv_client_status spmv_client_job_wait(spmv_client *h, const char *job_id, long interval_ms,
                                        spmv_client_progress_fn progress, void *user, spmv_client_job **out)
{
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    long slice_ms = !progress ? SPMVC_JOB_WAIT_MAX_MS : interval_ms > 0 ? interval_ms : 1000;
    if (slice_ms > SPMVC_JOB_WAIT_MAX_MS) slice_ms = SPMVC_JOB_WAIT_MAX_MS;
    for (;;) {
        spmv_client_job *j;
        double asked_at = now_ms();
        spmv_client_status st = job_poll(h, job_id, slice_ms, &j);
        if (st != SPMV_CLIENT_OK)
            return st;
        if (progress && progress(user, (uint64_t)(j->progress * 1000 + 0.5), 1000)) {
            spmv_client_job_free(j);
            return spmvc_fail(h, SPMV_CLIENT_ERR_ABORTED, "stopped waiting for job %s", job_id);
        }
        if (job_finished(j)) {
            *out = j;
            if (strcmp(j->state, "done") == 0 || strcmp(j->state, "succeeded") == 0)
                return SPMV_CLIENT_OK;
            if (!h->errmsg[0])
                spmvc_fail(h, SPMV_CLIENT_ERR_JOB_FAILED, "job %s ended %s", job_id, j->state);
            return SPMV_CLIENT_ERR_JOB_FAILED;
        }
        spmv_client_job_free(j);
        pace_old_daemon(asked_at, slice_ms);
    }
}

spmv_client_status spmv_client_job_cancel(spmv_client *h, const char *job_id, spmv_client_job **out)
{
    spmv_client_status st;

    if (out) *out = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, job_id, "job")) != SPMV_CLIENT_OK) return st;
    request req = {.method = "DELETE", .collection = "jobs", .id = job_id};
    response r;
    /* 204: cancelled with nothing to say; else the job as it stands */
    if ((st = spmvc_request(h, &req, &r)) == SPMV_CLIENT_OK && r.status != 204 && out &&
        (st = spmvc_parse_body(h, &r, &r.json)) == SPMV_CLIENT_OK)
        st = job_from_json(h, r.json, out);
    spmvc_response_clear(&r);
    return st;
}
