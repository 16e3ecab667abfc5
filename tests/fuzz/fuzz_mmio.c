/* fuzz_mmio.c — libFuzzer target for the Matrix Market reader.
 *
 * Built by `make fuzz` (mk/fuzz.mk) with clang -fsanitize=fuzzer,address,
 * undefined and seeded with the conformance files. The first two bytes of
 * an input choose where the rest is split into three chunks (so numbers,
 * CRLF pairs and the gzip magic get cut), the third byte picks the options
 * (a row/column/nnz limit, one thread or two with 4 KiB blocks). Beyond
 * "no crash, no leak, no undefined behaviour" the target checks what the
 * API promises: a success is a sorted duplicate-free COO inside its shape;
 * a refusal names its line ("line N: ..."); and the chunked (and possibly
 * parallel) read agrees exactly with a one-piece serial read. Any input
 * that ever failed here is kept in tests/fuzz/regressions/fuzz_mmio/, which
 * tests/unit/test_mmio.c replays.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mmio_internal.h"
#include "spmv.h"

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "fuzz_mmio: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                    \
        }                                                                               \
    } while (0)

static int read_in_three(const uint8_t *d, size_t n, size_t cut1, size_t cut2, const spmv_mm_options *o,
                         spmv_coo *m, spmv_error *err)
{
    spmv_mm_reader *r;
    int st = spmv_mm_reader_new(o, &r, err);
    if (st)
        return st;
    if (o->threads > 1)
        spmv_mm_reader_set_block_size(r, 4096);
    size_t cuts[4] = {0, cut1, cut2, n};
    for (int k = 0; k < 3 && !st; k++)
        st = spmv_mm_reader_feed(r, d + cuts[k], cuts[k + 1] - cuts[k], err);
    if (!st)
        st = spmv_mm_reader_finish(r, m, NULL, err);
    spmv_mm_reader_free(r);
    return st;
}

static void check_coo(const spmv_coo *m)
{
    for (int64_t k = 0; k < m->nnz; k++) {
        CHECK(m->row[k] >= 0 && m->row[k] < m->rows && m->col[k] >= 0 && m->col[k] < m->cols);
        if (k > 0)
            CHECK(m->row[k - 1] < m->row[k] || (m->row[k - 1] == m->row[k] && m->col[k - 1] < m->col[k]));
    }
}

static void check_names_line(const spmv_error *err)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "line %lld: ", (long long)err->line);
    CHECK(err->line >= 1 && strncmp(err->message, prefix, strlen(prefix)) == 0);
}

static bool same_coo(const spmv_coo *a, const spmv_coo *b)
{
    size_t n = (size_t)a->nnz;
    return a->rows == b->rows && a->cols == b->cols && a->nnz == b->nnz &&
           memcmp(a->row, b->row, n * sizeof(int32_t)) == 0 && memcmp(a->col, b->col, n * sizeof(int32_t)) == 0 &&
           memcmp(a->val, b->val, n * sizeof(double)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    uint8_t a = data[0], b = data[1], flags = data[2];
    data += 3;
    size -= 3;
    size_t cut1 = size ? a % (size + 1) : 0;
    size_t cut2 = cut1 + (size - cut1 ? b % (size - cut1 + 1) : 0);
    spmv_mm_options o = {.threads = (flags & 1) ? 2 : 1};
    if (flags & 2)
        o.max_rows = o.max_cols = o.max_nnz = 1 + (flags >> 4);

    spmv_coo whole, parts;
    spmv_error e1, e2;
    spmv_mm_options serial = o;
    serial.threads = 1;
    int s1 = spmv_mm_read_buffer(data, size, &serial, &whole, NULL, &e1);
    int s2 = read_in_three(data, size, cut1, cut2, &o, &parts, &e2);
    CHECK(s1 == s2);
    if (s1 == SPMV_OK) {
        check_coo(&whole);
        CHECK(same_coo(&whole, &parts));
        spmv_coo_free(&whole);
        spmv_coo_free(&parts);
    } else {
        check_names_line(&e1);
        CHECK(e1.status == s1 && e1.line == e2.line && strcmp(e1.message, e2.message) == 0);
    }
    return 0;
}
