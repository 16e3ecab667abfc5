/* jobs.c — the registry of asynchronous jobs.
 *
 * A list under one mutex, like the store, and for the same reason: the
 * number of live jobs is bounded by the queues plus the retention window.
 * Each job has its own mutex for the fields a worker writes while a client
 * reads (state, result); progress is an atomic so a bench can report it
 * after every kernel without taking a lock.
 *
 * Long polls: the waiters of every job are one list under the registry's
 * waiter lock (a few dozen at most: each is an open connection), woken by
 * job_finish for their job or by the timer thread at their deadline. The
 * timer is a thread of its own rather than the main loop's tick (up to a
 * second late) or a worker (busy with the very job being waited for): it
 * sleeps on a condition variable until the earliest deadline, so a wait of
 * S seconds answers within a millisecond of S. Lock order: waiter lock,
 * then a job's lock; job_finish takes them one after the other, never
 * both, so the two cannot deadlock.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/jobs.h"
#include "daemon/jsondump.h"
#include "daemon/memory.h"
#include "daemon/store.h"
#include "spmv.h"

struct job {
    char id[MATFILE_ID_LEN + 1];
    char kind[16];
    char matrix_id[MATFILE_ID_LEN + 1];
    pthread_mutex_t lock;
    job_state state;
    _Atomic double progress;
    _Atomic bool cancel;         /* DELETE asked: a task stops at its next check */
    _Atomic long long iteration; /* solves: the last iteration reported (-1: none) */
    _Atomic double relres;
    int http_status;
    json_t *body;
    char *text;                  /* a result kept as its JSON text (job_finish_text), or NULL */
    size_t text_len;
    bool counted;                /* text_len counts in the registry's result_bytes */
    double created_ms, started_ms, finished_ms;  /* monotonic */
    time_t created_wall;
    _Atomic int refs;
    job_registry *reg;           /* to wake its waiters when it finishes */
    job *next;
};

struct job_registry {
    pthread_mutex_t lock;
    job *head;
    /* long polls */
    pthread_mutex_t wait_lock;
    pthread_cond_t wait_cond;    /* on CLOCK_MONOTONIC: a new waiter, or stop */
    job_waiter *waiters;
    bool draining, stopping;
    pthread_t timer;
    _Atomic int64_t result_bytes; /* the text of the listed jobs' results */
};

/* A job leaves the registry (swept, dropped, the registry freed): its
 * result no longer counts, whoever still holds a reference. */
static void unlisted(job_registry *r, job *j)
{
    pthread_mutex_lock(&j->lock);
    if (j->counted)
        atomic_fetch_sub(&r->result_bytes, (int64_t)j->text_len);
    j->counted = false;
    pthread_mutex_unlock(&j->lock);
}


static const char *const state_names[] = {"queued", "running", "done", "failed"};

static void *timer_main(void *arg);

job_registry *jobs_new(void)
{
    job_registry *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->wait_cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->wait_lock, NULL);
    if (pthread_create(&r->timer, NULL, timer_main, r) != 0) {
        pthread_cond_destroy(&r->wait_cond);
        pthread_mutex_destroy(&r->wait_lock);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
    }
    return r;
}

void jobs_free(job_registry *r)
{
    if (!r)
        return;
    jobs_wake_all(r);
    pthread_mutex_lock(&r->wait_lock);
    r->stopping = true;
    pthread_cond_signal(&r->wait_cond);
    pthread_mutex_unlock(&r->wait_lock);
    pthread_join(r->timer, NULL);
    pthread_cond_destroy(&r->wait_cond);
    pthread_mutex_destroy(&r->wait_lock);
    job *j = r->head;
    while (j) {
        job *next = j->next;
        unlisted(r, j);
        job_unref(j);
        j = next;
    }
    pthread_mutex_destroy(&r->lock);
    free(r);
}

job *jobs_create(job_registry *r, const char *kind, const char *matrix_id)
{
    job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    store_new_id(j->id);
    snprintf(j->kind, sizeof j->kind, "%s", kind);
    snprintf(j->matrix_id, sizeof j->matrix_id, "%s", matrix_id ? matrix_id : "");
    pthread_mutex_init(&j->lock, NULL);
    j->state = JOB_QUEUED;
    atomic_store(&j->iteration, -1);
    j->created_ms = spmv_now_ms();
    j->created_wall = time(NULL);
    atomic_store(&j->refs, 2);
    j->reg = r;
    pthread_mutex_lock(&r->lock);
    j->next = r->head;
    r->head = j;
    pthread_mutex_unlock(&r->lock);
    return j;
}

job *jobs_get(job_registry *r, const char *id)
{
    job *found = NULL;
    pthread_mutex_lock(&r->lock);
    for (job *j = r->head; j; j = j->next)
        if (strcmp(j->id, id) == 0) {
            atomic_fetch_add(&j->refs, 1);
            found = j;
            break;
        }
    pthread_mutex_unlock(&r->lock);
    return found;
}

job *job_ref(job *j)
{
    atomic_fetch_add(&j->refs, 1);
    return j;
}

void job_unref(job *j)
{
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1)
        return;
    json_decref(j->body);
    size_t freed = j->text ? j->text_len : 0;
    free(j->text);
    pthread_mutex_destroy(&j->lock);
    free(j);
    memory_trim(freed);
}

const char *job_id(const job *j) { return j->id; }

void job_set_running(job *j)
{
    pthread_mutex_lock(&j->lock);
    j->state = JOB_RUNNING;
    j->started_ms = spmv_now_ms();
    pthread_mutex_unlock(&j->lock);
}

void job_set_progress(job *j, double fraction)
{
    if (fraction < 0)
        fraction = 0;
    if (fraction > 1)
        fraction = 1;
    atomic_store(&j->progress, fraction);
}

void job_set_iteration(job *j, long long iteration, double relres)
{
    atomic_store(&j->relres, relres);
    atomic_store(&j->iteration, iteration);
}

bool job_cancelled(job *j) { return j && atomic_load(&j->cancel); }

int job_cancel(job *j)
{
    pthread_mutex_lock(&j->lock);
    job_state st = j->state;
    int rc = 0;
    if (st == JOB_DONE || st == JOB_FAILED)
        rc = 1;
    else if (st == JOB_RUNNING && strcmp(j->kind, "solve") != 0 && strcmp(j->kind, "bench") != 0)
        rc = -1;
    else
        atomic_store(&j->cancel, true);
    pthread_mutex_unlock(&j->lock);
    return rc;
}

bool jobs_drop(job_registry *r, const char *id)
{
    job *found = NULL;
    pthread_mutex_lock(&r->lock);
    for (job **link = &r->head; *link; link = &(*link)->next)
        if (strcmp((*link)->id, id) == 0) {
            found = *link;
            *link = found->next;
            break;
        }
    pthread_mutex_unlock(&r->lock);
    if (found)
        unlisted(r, found);
    job_unref(found);
    return found != NULL;
}

static bool job_finished(job *j)
{
    pthread_mutex_lock(&j->lock);
    bool done = j->state == JOB_DONE || j->state == JOB_FAILED;
    pthread_mutex_unlock(&j->lock);
    return done;
}

/* Unlinks and wakes the waiters that `hit` picks (one job's, the overdue,
 * or all); the waiter lock is held. Returns the earliest deadline left. */
static double wake_where(job_registry *r, bool (*hit)(const job_waiter *w, const void *ctx), const void *ctx)
{
    double earliest = INFINITY;
    job_waiter **link = &r->waiters;
    while (*link) {
        job_waiter *w = *link;
        if (hit(w, ctx)) {
            *link = w->next;
            w->armed = false;
            w->next = NULL;
            w->wake(w->arg);
        } else {
            if (w->deadline_ms < earliest)
                earliest = w->deadline_ms;
            link = &w->next;
        }
    }
    return earliest;
}

static bool of_job(const job_waiter *w, const void *ctx) { return w->j == ctx; }
static bool overdue(const job_waiter *w, const void *ctx) { return w->deadline_ms <= *(const double *)ctx; }
static bool any(const job_waiter *w, const void *ctx)
{
    (void)w;
    (void)ctx;
    return true;
}

/* The job's end: its outcome (a body, or a result's text) set under its
 * lock, then its waiters woken, so a woken poll sees all of it. */
static void finish(job *j, int http_status, json_t *body, char *text, size_t len)
{
    pthread_mutex_lock(&j->lock);
    j->state = http_status < 300 ? JOB_DONE : JOB_FAILED;
    j->http_status = http_status;
    json_decref(j->body);
    j->body = body;
    if (text) {
        j->text = text;
        j->text_len = len;
        j->counted = true;
    }
    j->finished_ms = spmv_now_ms();
    if (j->state == JOB_DONE)
        atomic_store(&j->progress, 1.0);
    pthread_mutex_unlock(&j->lock);
    pthread_mutex_lock(&j->reg->wait_lock);
    wake_where(j->reg, of_job, j);
    pthread_mutex_unlock(&j->reg->wait_lock);
}

void job_finish(job *j, int http_status, json_t *body) { finish(j, http_status, body, NULL, 0); }

int jobs_wait(job_registry *r, job *j, double wait_s, job_wake_fn wake, void *arg, job_waiter *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_lock(&r->wait_lock);
    /* checked under the waiter lock: a job_finish after this check wakes w */
    bool now = r->draining || job_finished(j) || !(wait_s > 0);
    if (!now) {
        *w = (job_waiter){.j = j, .deadline_ms = spmv_now_ms() + wait_s * 1000.0, .wake = wake, .arg = arg,
                          .armed = true, .next = r->waiters};
        r->waiters = w;
        pthread_cond_signal(&r->wait_cond); /* perhaps the earliest deadline now */
    }
    pthread_mutex_unlock(&r->wait_lock);
    return now ? 0 : 1;
}

void jobs_unwait(job_registry *r, job_waiter *w)
{
    pthread_mutex_lock(&r->wait_lock);
    if (w->armed)
        for (job_waiter **link = &r->waiters; *link; link = &(*link)->next)
            if (*link == w) {
                *link = w->next;
                w->armed = false;
                break;
            }
    pthread_mutex_unlock(&r->wait_lock);
}

void jobs_wake_all(job_registry *r)
{
    pthread_mutex_lock(&r->wait_lock);
    r->draining = true;
    wake_where(r, any, NULL);
    pthread_mutex_unlock(&r->wait_lock);
}

/* The timer thread: wakes each waiter at its deadline. */
static void *timer_main(void *arg)
{
    job_registry *r = arg;
    pthread_mutex_lock(&r->wait_lock);
    while (!r->stopping) {
        double now = spmv_now_ms();
        double next = wake_where(r, overdue, &now);
        if (isinf(next)) {
            pthread_cond_wait(&r->wait_cond, &r->wait_lock);
            continue;
        }
        struct timespec ts = {(time_t)(next / 1000.0), 0};
        ts.tv_nsec = (long)((next - 1000.0 * (double)ts.tv_sec) * 1e6);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->wait_cond, &r->wait_lock, &ts);
    }
    pthread_mutex_unlock(&r->wait_lock);
    return NULL;
}

bool job_finish_text(job_registry *r, job *j, char *text, size_t len, int64_t budget)
{
    int64_t used = atomic_load(&r->result_bytes);
    do {
        if ((int64_t)len > budget - used) {
            free(text);
            return false;
        }
    } while (!atomic_compare_exchange_weak(&r->result_bytes, &used, used + (int64_t)len));
    finish(j, 200, NULL, text, len);
    return true;
}

int64_t jobs_result_bytes(job_registry *r) { return atomic_load(&r->result_bytes); }

/* The job's fields but its result (or error). Under j->lock. */
static json_t *envelope(job *j)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:f, s:f}", "id", j->id, "kind", j->kind,
                          "state", state_names[j->state], "progress", atomic_load(&j->progress),
                          "age_s", (spmv_now_ms() - j->created_ms) / 1000.0);
    if (o && j->matrix_id[0])
        json_object_set_new(o, "matrix", json_string(j->matrix_id));
    if (o && atomic_load(&j->iteration) >= 0) { /* a solve's progress */
        json_object_set_new(o, "iteration", json_integer(atomic_load(&j->iteration)));
        double rr = atomic_load(&j->relres);
        json_object_set_new(o, "relres", isfinite(rr) ? json_real(rr) : json_string(isnan(rr) ? "NaN" : "Infinity"));
    }
    if (o && atomic_load(&j->cancel))
        json_object_set_new(o, "cancel_requested", json_true());
    if (o && j->started_ms > 0)
        json_object_set_new(o, "queue_ms", json_real(j->started_ms - j->created_ms));
    if (o && j->finished_ms > 0) {
        json_object_set_new(o, "run_ms", json_real(j->finished_ms - (j->started_ms > 0 ? j->started_ms : j->created_ms)));
        json_object_set_new(o, "status", json_integer(j->http_status));
    }
    return o;
}

json_t *job_to_json(job *j)
{
    pthread_mutex_lock(&j->lock);
    json_t *o = envelope(j);
    if (o && j->finished_ms > 0) {
        if (j->state == JOB_DONE && j->text) {
            json_t *t = json_loadb(j->text, j->text_len, JSON_DECODE_ANY, NULL);
            json_object_set_new(o, "result", t ? t : json_null());
        } else if (j->state == JOB_DONE) {
            json_object_set(o, "result", j->body ? j->body : json_null());
        } else {
            /* an error body is {"error":{code,message}}: show its inside */
            json_t *inner = json_object_get(j->body, "error");
            json_object_set(o, "error", inner ? inner : json_null());
        }
    }
    pthread_mutex_unlock(&j->lock);
    return o;
}

json_t *jobs_to_json(job_registry *r)
{
    json_t *a = json_array();
    pthread_mutex_lock(&r->lock);
    for (job *j = r->head; j && a; j = j->next) {
        json_t *o = job_to_json(j);
        json_object_del(o, "result");
        json_array_append_new(a, o);
    }
    pthread_mutex_unlock(&r->lock);
    return a;
}

char *job_to_text(job *j, size_t *len)
{
    pthread_mutex_lock(&j->lock);
    if (!j->text || j->state != JOB_DONE) {
        pthread_mutex_unlock(&j->lock);
        json_t *o = job_to_json(j);
        char *s = o ? spmvd_json_dump(o, NULL) : NULL, *nl;
        json_decref(o);
        *len = s ? strlen(s) : 0;
        if (s && (nl = realloc(s, *len + 2))) { /* a trailing newline, as every answer has */
            s = nl;
            s[(*len)++] = '\n';
            s[*len] = '\0';
        }
        return s;
    }
    json_t *o = envelope(j);
    char *head = o ? spmvd_json_dump(o, NULL) : NULL; /* {...}: the result goes before its '}' */
    json_decref(o);
    size_t hl = head ? strlen(head) : 0, tl = j->text_len;
    while (tl > 0 && (j->text[tl - 1] == '\n' || j->text[tl - 1] == ' '))
        tl--;
    char *s = head ? malloc(hl + tl + 16) : NULL;
    if (s) {
        memcpy(s, head, hl - 1);
        *len = hl - 1;
        *len += (size_t)sprintf(s + *len, "%s\"result\":", hl > 2 ? "," : "");
        memcpy(s + *len, j->text, tl);
        *len += tl;
        s[(*len)++] = '}';
        s[(*len)++] = '\n';
        s[*len] = '\0';
    }
    pthread_mutex_unlock(&j->lock);
    free(head);
    return s;
}

size_t jobs_sweep(job_registry *r, double retention_s)
{
    double now = spmv_now_ms();
    size_t left = 0;
    job *dead = NULL;
    pthread_mutex_lock(&r->lock);
    job **link = &r->head;
    while (*link) {
        job *j = *link;
        pthread_mutex_lock(&j->lock);
        bool expired = j->finished_ms > 0 && now - j->finished_ms > retention_s * 1000.0;
        pthread_mutex_unlock(&j->lock);
        if (expired) {
            *link = j->next;
            j->next = dead;
            dead = j;
        } else {
            link = &j->next;
            left++;
        }
    }
    pthread_mutex_unlock(&r->lock);
    while (dead) {
        job *next = dead->next;
        unlisted(r, dead);
        job_unref(dead);
        dead = next;
    }
    return left;
}

void jobs_count(job_registry *r, size_t counts[4])
{
    memset(counts, 0, 4 * sizeof counts[0]);
    pthread_mutex_lock(&r->lock);
    for (job *j = r->head; j; j = j->next) {
        pthread_mutex_lock(&j->lock);
        counts[j->state]++;
        pthread_mutex_unlock(&j->lock);
    }
    pthread_mutex_unlock(&r->lock);
}
