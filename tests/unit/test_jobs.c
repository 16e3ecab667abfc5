/* test_jobs.c — the job registry's long polls (daemon/jobs.c, jobs_wait).
 *
 * A waiter is woken exactly once: by job_finish for its job, by the
 * registry's timer at its deadline, or by jobs_wake_all (drain); never
 * after jobs_unwait; never armed for a finished job, a zero wait or a
 * draining registry. Deadlines are drawn afresh (seed printed by
 * testutil); the bounds on waiting are loose: they tell woken from not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "daemon/jobs.h"
#include "spmv.h"
#include "testutil.h"

static void count_wake(void *arg) { atomic_fetch_add((_Atomic int *)arg, 1); }

/* Waits up to secs for *n to reach want; its value then. */
static int await(_Atomic int *n, int want, double secs)
{
    double t0 = spmv_now_ms();
    while (atomic_load(n) < want && spmv_now_ms() - t0 < secs * 1000.0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(n);
}

static void test_woken_by_finish(void **state)
{
    (void)state;
    job_registry *r = jobs_new();
    job *j = jobs_create(r, "solve", NULL);
    _Atomic int n = 0;
    job_waiter w;
    assert_int_equal(jobs_wait(r, j, 30.0, count_wake, &n, &w), 1);
    assert_true(w.armed);
    assert_int_equal(atomic_load(&n), 0);
    job_finish(j, 200, json_object());
    assert_int_equal(atomic_load(&n), 1); /* on the finishing thread, before job_finish returns */
    assert_false(w.armed);
    jobs_unwait(r, &w); /* harmless once woken */
    assert_int_equal(jobs_wait(r, j, 30.0, count_wake, &n, &w), 0); /* finished: answer now */
    assert_false(w.armed);
    job_unref(j);
    jobs_free(r);
    assert_int_equal(atomic_load(&n), 1);
}

static void test_woken_at_deadline(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, tu_seed());
    job_registry *r = jobs_new();
    job *j = jobs_create(r, "bench", NULL);
    _Atomic int early = 0, late = 0;
    job_waiter we, wl;
    double ms = (double)tu_rng_range(&g, 20, 120);
    assert_int_equal(jobs_wait(r, j, 30.0, count_wake, &late, &wl), 1); /* armed first, due last */
    double t0 = spmv_now_ms();
    assert_int_equal(jobs_wait(r, j, ms / 1000.0, count_wake, &early, &we), 1);
    assert_int_equal(await(&early, 1, 10.0), 1);
    double took = spmv_now_ms() - t0;
    assert_true(took >= ms - 1.0);
    assert_int_equal(atomic_load(&late), 0); /* the other waiter keeps waiting */
    assert_true(wl.armed);
    jobs_unwait(r, &wl);
    assert_false(wl.armed);
    job_finish(j, 200, json_object());
    assert_int_equal(atomic_load(&late), 0); /* disarmed: never woken */
    job_unref(j);
    jobs_free(r);
}

static void test_unwait_and_drain(void **state)
{
    (void)state;
    job_registry *r = jobs_new();
    job *j = jobs_create(r, "spmv", NULL);
    _Atomic int a = 0, b = 0, c = 0;
    job_waiter wa, wb, wc;
    assert_int_equal(jobs_wait(r, j, 0.0, count_wake, &a, &wa), 0); /* no wait: answer now */
    assert_int_equal(jobs_wait(r, j, 0.05, count_wake, &a, &wa), 1);
    jobs_unwait(r, &wa);
    assert_int_equal(await(&a, 1, 0.3), 0); /* past its deadline, not woken */
    assert_int_equal(jobs_wait(r, j, 60.0, count_wake, &b, &wb), 1);
    jobs_wake_all(r);
    assert_int_equal(atomic_load(&b), 1);
    assert_int_equal(jobs_wait(r, j, 60.0, count_wake, &c, &wc), 0); /* draining: answer now */
    job_finish(j, 200, json_object());
    assert_int_equal(atomic_load(&b) + atomic_load(&c), 1);
    job_unref(j);
    jobs_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_woken_by_finish),
        cmocka_unit_test(test_woken_at_deadline),
        cmocka_unit_test(test_unwait_and_drain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
