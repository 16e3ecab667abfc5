/* test_shm.c — the shared-memory regions' host copies (daemon/shm.c).
 *
 * Issue 33: "never grows it back" was a check before the copy and one
 * after, with pwrite between them; a client's ftruncate inside that window
 * was undone by the pieces still to write (2 trials in 12 regrew the
 * object to its old 268 MB). Here a thread shrinks the object to nothing
 * at a random moment while y is written into it over and over, 64 MiB (4
 * pieces) a time; once shrunk, the object must stay empty whatever the
 * writes in flight did, and the write that met it must say so (SHM_GONE).
 * Each trial draws its moment afresh (seed printed, SPMV_SEED repeats).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/shm.h"
#include "testutil.h"

#define BYTES ((size_t)64 << 20)
#define TRIALS 12

static tu_rng rng;

typedef struct shrinker {
    int fd;
    long delay_us;
    _Atomic bool done;
} shrinker;

static void *shrink_later(void *arg)
{
    shrinker *s = arg;
    usleep((useconds_t)s->delay_us);
    assert_int_equal(ftruncate(s->fd, 0), 0);
    atomic_store(&s->done, true);
    return NULL;
}

static void test_write_never_regrows(void **state)
{
    (void)state;
    char name[64], msg[512];
    snprintf(name, sizeof name, "spmvd-test-shm-%d", (int)getpid());
    char *src = malloc(BYTES);
    assert_non_null(src);
    memset(src, 0x5a, BYTES);
    int regrown = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        char path[80];
        snprintf(path, sizeof path, "/%s", name);
        int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t)BYTES), 0);
        shm_registry *reg = shm_registry_new(NULL);
        shm_region *r = NULL;
        assert_int_equal(shm_register(reg, name, 0, (int64_t)BYTES, 8, &r, msg, sizeof msg), SHM_OK);
        shm_operand o;
        assert_int_equal(shm_operand_open(reg, name, 0, BYTES, 8, "y", &o, msg, sizeof msg), SHM_OK);
        shrinker s = {.fd = fd, .delay_us = (long)tu_rng_range(&rng, 0, 20000)};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, shrink_later, &s), 0);
        shm_status st = SHM_OK;
        int writes = 0, after = 0;
        /* until a write meets the shrunk object (a regrown one would pass every check after: two more at most) */
        while (st == SHM_OK && !(atomic_load(&s.done) && after++ == 2)) {
            st = shm_operand_write(&o, src, msg, sizeof msg);
            writes++;
        }
        pthread_join(th, NULL);
        struct stat sb;
        assert_int_equal(fstat(fd, &sb), 0);
        print_message("# trial %d: shrunk after %ld us, %d writes, the last: %s; the object holds %lld bytes\n", trial,
                      s.delay_us, writes, msg, (long long)sb.st_size);
        regrown += sb.st_size != 0 || st != SHM_GONE;
        shm_operand_close(&o);
        shm_unref(r);
        shm_registry_free(reg);
        close(fd);
        shm_unlink(path);
    }
    free(src);
    assert_int_equal(regrown, 0);
}

int main(void)
{
    uint64_t seed = tu_seed();
    tu_rng_init(&rng, seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_never_regrows),
    };
    return cmocka_run_group_tests_name("shm", tests, NULL, NULL);
}
