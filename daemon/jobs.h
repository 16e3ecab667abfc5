/* jobs.h — the user-visible jobs behind GET /v1/jobs/{id}.
 *
 * An asynchronous request (any spmv with "async": true, every bench) gets a
 * job record: an id, its state (queued, running, done, failed), a progress
 * fraction the worker updates as it goes, and when finished the result (or
 * the error) as JSON with the HTTP status it would have had. Finished jobs
 * are kept job_retention seconds, then swept. Results are kept as JSON
 * text, all of them together bounded by max_job_result_bytes. Records are reference counted
 * because the worker running one and a client reading it meet at any time.
 *
 * A client can wait for a job to end (GET /v1/jobs/{id}?wait=S, a long
 * poll): jobs_wait registers a waiter whose wake function is called exactly
 * once, when the job finishes (on the thread that finishes it), when its
 * deadline passes (on the registry's timer thread, the one thread jobs_new
 * starts), or when the daemon drains (jobs_wake_all), whichever is first.
 */
#ifndef SPMVD_JOBS_H
#define SPMVD_JOBS_H

#include <jansson.h>
#include <stdbool.h>

#include "daemon/matfile.h"

typedef enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_FAILED } job_state;

typedef struct job job;
typedef struct job_registry job_registry;

/* A wait for one job to end, in the waiter's own memory (a request's
 * state): filled by jobs_wait, read by nobody else. */
typedef void (*job_wake_fn)(void *arg);
typedef struct job_waiter {
    job *j;
    double deadline_ms;          /* monotonic, as spmv_now_ms */
    job_wake_fn wake;
    void *arg;
    bool armed;                  /* registered and not yet woken */
    struct job_waiter *next;
} job_waiter;

job_registry *jobs_new(void);
void jobs_free(job_registry *r);

/* A new queued job with two references (registry and caller). */
job *jobs_create(job_registry *r, const char *kind, const char *matrix_id);
/* A referenced job, or NULL (unknown or swept). */
job *jobs_get(job_registry *r, const char *id);
job *job_ref(job *j);
void job_unref(job *j);
const char *job_id(const job *j);

void job_set_running(job *j);
void job_set_progress(job *j, double fraction);
/* A solve's progress: the iteration reached and its relative residual. */
void job_set_iteration(job *j, long long iteration, double relres);
/* DELETE /v1/jobs/{id}: 0 when a cancel was asked (queued jobs never run;
 * a running solve stops at its next iteration, a bench before its next
 * kernel), 1 when the job is finished already (drop it), -1 when it runs
 * and cannot stop (an spmv, a tune). */
int job_cancel(job *j);
bool job_cancelled(job *j);   /* NULL: false */
/* Removes a job from the registry; false if unknown. */
bool jobs_drop(job_registry *r, const char *id);
/* Finishes with a result (status 2xx) or an error body; takes `body`. */
void job_finish(job *j, int http_status, json_t *body);
/* Finishes with a result as its JSON text (taken: freed on refusal too),
 * kept as text, not as a tree (a tree costs about twice the text's bytes
 * a value). The text of every listed job's result counts against
 * `budget` (max_job_result_bytes): false, the job untouched, when this
 * one would take the count past it. */
bool job_finish_text(job_registry *r, job *j, char *text, size_t len, int64_t budget);
/* The bytes the listed jobs' results hold (for /metrics and the tests). */
int64_t jobs_result_bytes(job_registry *r);
/* The job as the API shows it: id, kind, matrix, state, progress,
 * created/started/finished, and result or error once finished. */
json_t *job_to_json(job *j);
/* The same as JSON text, a result kept as text spliced in unparsed. */
char *job_to_text(job *j, size_t *len);

/* Every job held, newest first, as job_to_json shows it but without its
 * result (GET /v1/jobs/{id} has it): GET /v1/jobs. */
json_t *jobs_to_json(job_registry *r);

/* Waits for j to finish, at most wait_s seconds: 1 when w is armed (wake(arg)
 * is called exactly once later, on any thread, under the registry's waiter
 * lock: it must not call back into the registry), 0 when j is finished
 * already or the daemon drains (nothing is armed: answer now). */
int jobs_wait(job_registry *r, job *j, double wait_s, job_wake_fn wake, void *arg, job_waiter *w);
/* Disarms w if it is still armed; once it returns, wake is not running and
 * never will be. A waiter never armed (zeroed) is fine. */
void jobs_unwait(job_registry *r, job_waiter *w);
/* Wakes every waiter now, and every later jobs_wait answers 0 (drain). */
void jobs_wake_all(job_registry *r);

/* Drops finished jobs older than retention_s; returns how many remain. */
size_t jobs_sweep(job_registry *r, double retention_s);
/* Counts by state for /metrics. */
void jobs_count(job_registry *r, size_t counts[4]);

#endif
