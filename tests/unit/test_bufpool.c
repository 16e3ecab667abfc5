/* test_bufpool.c — the reused host buffers of the binary path (daemon/bufpool.c).
 *
 * Sizes are drawn afresh each run (seed printed by testutil): a put buffer
 * comes back to a get that fits (the same memory, no new allocation), the
 * smallest that fits is chosen, idle buffers past io_buffer_bytes are
 * freed rather than kept (0 keeps none), and the counters say so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/bufpool.h"
#include "testutil.h"

static void test_reuse_and_best_fit(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed());
    _Atomic int64_t max_idle = INT64_C(1) << 30;
    bufpool *p = bufpool_new(&max_idle, false);
    size_t small = (size_t)tu_rng_range(&r, 1, 1 << 20), large = (size_t)tu_rng_range(&r, 5 << 20, 9 << 20);
    bufpool_buf *a = bufpool_get(p, small), *b = bufpool_get(p, large);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a->cap >= small && b->cap >= large);
    memset(a->ptr, 1, small); /* the memory is there */
    memset(b->ptr, 2, large);
    void *pa = a->ptr, *pb = b->ptr;
    bufpool_put(b);
    bufpool_put(a);
    size_t idle, made;
    bufpool_stats(p, &idle, &made);
    assert_int_equal(made, 2);
    assert_int_equal(idle, a->cap + b->cap);
    bufpool_buf *c = bufpool_get(p, small); /* the smallest that fits: a's */
    assert_ptr_equal(c->ptr, pa);
    bufpool_buf *d = bufpool_get(p, large - 1);
    assert_ptr_equal(d->ptr, pb);
    bufpool_buf *e = bufpool_get(p, large + (16 << 20)); /* none fits: a new one */
    assert_non_null(e);
    bufpool_stats(p, &idle, &made);
    assert_int_equal(made, 3);
    assert_int_equal(idle, 0);
    bufpool_put(c);
    bufpool_put(d);
    bufpool_put(e);
    bufpool_put(NULL);
    bufpool_free(p);
}

/* Idle buffers beyond the bound are freed, and a bound of 0 keeps none. */
static void test_idle_bound(void **state)
{
    (void)state;
    _Atomic int64_t max_idle = 3 << 20;
    bufpool *p = bufpool_new(&max_idle, false);
    bufpool_buf *a = bufpool_get(p, 2 << 20), *b = bufpool_get(p, 2 << 20);
    bufpool_put(a);
    bufpool_put(b); /* 4 MiB idle would pass 3 MiB: freed */
    size_t idle, made;
    bufpool_stats(p, &idle, &made);
    assert_int_equal(idle, 2 << 20);
    atomic_store(&max_idle, 0);
    bufpool_buf *c = bufpool_get(p, 1);
    bufpool_put(c);
    bufpool_stats(p, &idle, &made);
    assert_int_equal(idle, 0);
    assert_int_equal(made, 2);
    bufpool_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reuse_and_best_fit),
        cmocka_unit_test(test_idle_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
