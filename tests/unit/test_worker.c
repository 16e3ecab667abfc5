/* test_worker.c — the watchdog's view of a worker and the slices of long
 * tasks (daemon/worker.c).
 *
 * worker_alive: an idle worker is alive while its loop ticks; a task is
 * trusted WORKER_TASK_GRACE_MS from its start or its last slice, so a long
 * task that keeps ending slices is alive however old it is (issue 33: the
 * watchdog killed a 14-minute ops batch), and one whose last slice is older
 * than the grace is stuck.
 *
 * worker_slice, called on the worker's thread between two slices: it runs
 * the short tasks waiting (in their order), leaves sliced ones queued, and
 * says nothing of draining without a daemon. No thread is started: the
 * test plays the worker's thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/worker.h"

static const worker_ops test_ops = {.kind = "test"};

static void test_alive_while_slices_end(void **state)
{
    (void)state;
    worker *w = worker_alloc(NULL, &test_ops, "t", -1, 8);
    assert_non_null(w);
    long long now = (long long)spmv_now_ms(), grace = (long long)WORKER_TASK_GRACE_MS;
    worker_heartbeat(w);
    assert_true(worker_alive(w, 1000.0)); /* idle, ticking */
    atomic_store(&w->heartbeat_ms, now - 5000);
    assert_false(worker_alive(w, 1000.0)); /* idle loop stopped ticking */

    atomic_store(&w->task_started_ms, now - 1000);
    assert_true(worker_alive(w, 1000.0)); /* a young task */
    atomic_store(&w->task_started_ms, now - grace - 100000);
    assert_false(worker_alive(w, 1000.0)); /* old, no slice ever ended: stuck */
    atomic_store(&w->slice_ms, now - 2000);
    assert_true(worker_alive(w, 1000.0)); /* old but its last slice ended 2 s ago: busy */
    atomic_store(&w->slice_ms, now - grace - 1000);
    assert_false(worker_alive(w, 1000.0)); /* one slice running past the grace: stuck */
    worker_free(w);
}

typedef struct probe {
    task base;
    int id;
    int *order;
    int *n;
    bool finished;
    int status;
} probe;

static void probe_run(task *t, worker *w)
{
    (void)w;
    probe *p = (probe *)t;
    p->order[(*p->n)++] = p->id;
}

static void probe_finish(task *t, int status)
{
    probe *p = (probe *)t;
    p->finished = true;
    p->status = status;
}

static void test_slice_runs_short_tasks(void **state)
{
    (void)state;
    worker *w = worker_alloc(NULL, &test_ops, "t", -1, 8);
    assert_non_null(w);
    int order[8], n = 0;
    probe p[4];
    memset(p, 0, sizeof p);
    for (int i = 0; i < 4; i++) {
        p[i] = (probe){.base = {.run = probe_run, .finish = probe_finish, .sliced = i == 1}, .id = i, .order = order,
                       .n = &n};
        assert_int_equal(queue_push(&w->queue, &p[i].base, false), 0);
    }
    long long before = (long long)spmv_now_ms() - 1;
    atomic_store(&w->task_started_ms, before - 10); /* the long task this slice belongs to */
    assert_false(worker_slice(w)); /* no daemon: never draining */
    assert_int_equal(n, 3);
    assert_int_equal(order[0], 0);
    assert_int_equal(order[1], 2);
    assert_int_equal(order[2], 3);
    assert_true(p[0].finished && p[2].finished && p[3].finished);
    assert_false(p[1].finished);
    assert_int_equal(queue_depth(&w->queue), 1); /* the sliced one keeps its place */
    assert_true(atomic_load(&w->slice_ms) >= before);
    assert_int_equal(atomic_load(&w->task_started_ms), before - 10); /* the outer task's start is put back */
    bool closed;
    assert_ptr_equal(queue_pop(&w->queue, 0, &closed), &p[1].base);
    worker_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alive_while_slices_end),
        cmocka_unit_test(test_slice_runs_short_tasks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
