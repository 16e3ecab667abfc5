/* test_memory.c — the host memory a request reserves before it allocates
 * (daemon/memory.c, issue 33).
 *
 * MemAvailable and MemTotal are read; a reservation is admitted when it
 * fits 90 % of MemAvailable less what is reserved already, so two
 * requests that would each fit alone do not both get the same room (the
 * check and the reservation are one step); released room is there again;
 * a matrix past max_matrix_bytes is refused naming the key, before any
 * reservation. Only the daemon's counters are used: nothing is allocated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/daemon.h"
#include "daemon/memory.h"

static void test_reserve(void **state)
{
    (void)state;
    static spmvd d; /* only its counters and limits are read */
    spmv_error err = {0};
    int64_t avail = memory_available(), total = memory_total(), held = 0, other = 0;
    assert_true(avail > 0 && total >= avail);
    int64_t room = memory_room(&d), part = room / 10 * 6;
    assert_true(room > 0 && room <= avail);
    assert_int_equal(memory_reserve(&d, part, "the first", &held, &err), SPMV_OK);
    assert_int_equal(held, part);
    /* the same again does not fit what is left (unless the host freed a fifth of its memory meanwhile) */
    assert_int_equal(memory_reserve(&d, part, "the second", &other, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "the second needs"));
    assert_non_null(strstr(err.message, "requests in flight hold"));
    assert_int_equal(other, 0);
    memory_release(&d, &held);
    assert_int_equal(held, 0);
    assert_int_equal(atomic_load(&d.mem_reserved), 0);
    assert_int_equal(memory_reserve(&d, part, "the second", &other, &err), SPMV_OK);
    memory_release(&d, &other);
    /* max_matrix_bytes first, the reservation untouched */
    atomic_store(&d.limits.max_matrix_bytes, 1000);
    assert_int_equal(memory_admit_matrix(&d, 1001, 10, "a matrix", &held, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "max_matrix_bytes (1000)"));
    assert_int_equal(held, 0);
    assert_int_equal(memory_admit_matrix(&d, 1000, 10, "a matrix", &held, &err), SPMV_OK);
    assert_int_equal(held, 10);
    memory_release(&d, &held);
    memory_trim(MEMORY_TRIM_BYTES); /* gives back what it can; nothing to check but that it returns */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve),
    };
    return cmocka_run_group_tests_name("memory", tests, NULL, NULL);
}
