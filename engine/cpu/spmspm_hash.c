/* spmspm_hash.c — cpu.spmspm.hash: the SpMSpM study's sequential baseline.
 *
 * The study's first C = A*B, kept as it describes it (docs/kernels.md,
 * "The studies' items" #17): A as COO triplets (i, k, a_ik), B as CSR; each
 * triplet multiplies row k of B, and every product a_ik * b_kj is added
 * into a hash map keyed by the flattened index i * cols(B) + j; at the end
 * the keys are turned back into (i, j) and C comes out of the map. Here
 * the map is an open-addressing table (linear probing, power-of-two size at
 * least twice the most entries C can have, so probes stay short), and C is
 * handed back sorted as CSR like every SpMSpM kernel's, by one sort of the
 * map's entries by key: the flattened key orders by row, then column. The
 * triplets come in A's row order, so each (i, j) sums its products in the
 * order cpu.spmspm.serial does: the same C, bitwise.
 *
 * One thread, as the study's baseline; A's row index per entry (its COO
 * rows) is made by engine/cpu/spmspm.c before the clock starts. The study
 * moved on to CSR x CSR with a dense row accumulator (cpu.spmspm.serial)
 * because this is slower: a hash and a probe per product, and a sort.
 */
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "kernels.h"

#define EMPTY UINT64_MAX

static uint64_t slot_of(uint64_t key, uint64_t mask)
{
    return (key * UINT64_C(0x9E3779B97F4A7C15)) >> 17 & mask;
}

/* The table's slots: a power of two at least twice `most`, at least 16. */
static uint64_t table_size(int64_t most)
{
    uint64_t n = 16;
    while (n < (uint64_t)most * 2)
        n <<= 1;
    return n;
}

#define DEFINE_HASH(T, SFX)                                                                              \
    typedef struct entry_##SFX {                                                                         \
        uint64_t key;                                                                                    \
        T val;                                                                                           \
    } entry_##SFX;                                                                                       \
                                                                                                         \
    static int cmp_entry_##SFX(const void *x, const void *y)                                             \
    {                                                                                                    \
        uint64_t p = ((const entry_##SFX *)x)->key, q = ((const entry_##SFX *)y)->key;                   \
        return (p > q) - (p < q);                                                                        \
    }                                                                                                    \
                                                                                                         \
    /* Every product into the table; returns the distinct keys. */                                       \
    static int64_t accumulate_##SFX(const spmv_csr *a, const int32_t *arow, const spmv_csr *b,           \
                                    uint64_t *keys, T *vals, uint64_t mask)                              \
    {                                                                                                    \
        const T *av = a->val, *bv = b->val;                                                              \
        int64_t n = 0;                                                                                   \
        for (int64_t p = 0; p < a->nnz; p++) {                                                           \
            int32_t k = a->col[p];                                                                       \
            uint64_t base = (uint64_t)arow[p] * (uint64_t)b->cols;                                       \
            for (int32_t q = b->row_ptr[k]; q < b->row_ptr[k + 1]; q++) {                                \
                uint64_t key = base + (uint64_t)b->col[q], s = slot_of(key, mask);                       \
                while (keys[s] != EMPTY && keys[s] != key)                                               \
                    s = (s + 1) & mask;                                                                  \
                if (keys[s] == EMPTY) {                                                                  \
                    keys[s] = key;                                                                       \
                    vals[s] = av[p] * bv[q];                                                             \
                    n++;                                                                                 \
                } else {                                                                                 \
                    vals[s] += av[p] * bv[q];                                                            \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
        return n;                                                                                        \
    }                                                                                                    \
                                                                                                         \
    /* The table's n entries, sorted by key, into C (allocated here). */                                 \
    static int table_to_csr_##SFX(const uint64_t *keys, const T *vals, uint64_t size, int64_t n,         \
                                  int32_t bcols, spmv_csr *c)                                            \
    {                                                                                                    \
        int st = SPMV_OK;                                                                                \
        entry_##SFX *e = spmv_array_alloc(n > 0 ? n : 1, sizeof *e, &st);                                \
        if (!e || !(c->col = spmv_array_alloc(n, sizeof(int32_t), &st)) ||                               \
            !(c->val = spmv_array_alloc(n, sizeof(T), &st))) {                                           \
            free(e);                                                                                     \
            return st ? st : SPMV_ERR_NOMEM;                                                             \
        }                                                                                                \
        int64_t m = 0;                                                                                   \
        for (uint64_t s = 0; s < size; s++)                                                              \
            if (keys[s] != EMPTY)                                                                        \
                e[m++] = (entry_##SFX){keys[s], vals[s]};                                                \
        qsort(e, (size_t)n, sizeof *e, cmp_entry_##SFX);                                                 \
        for (int64_t p = 0; p < n; p++) {                                                                \
            c->row_ptr[e[p].key / (uint64_t)bcols + 1]++;                                                \
            c->col[p] = (int32_t)(e[p].key % (uint64_t)bcols);                                           \
            ((T *)c->val)[p] = e[p].val;                                                                 \
        }                                                                                                \
        for (int32_t i = 0; i < c->rows; i++)                                                            \
            c->row_ptr[i + 1] += c->row_ptr[i];                                                          \
        c->nnz = n;                                                                                      \
        free(e);                                                                                         \
        return SPMV_OK;                                                                                  \
    }

DEFINE_HASH(double, f64)
DEFINE_HASH(float, f32)

/* The most entries C can have: the products, and no more than rows x cols. */
static int64_t most_entries(const spmv_csr *a, const spmv_csr *b)
{
    int64_t madds = spmv_spmspm_madds(a, b), cells = (int64_t)a->rows * b->cols;
    return madds < cells ? madds : cells;
}

int spmv_cpu_spmspm_hash(const spmv_csr *a, const int32_t *arow, const spmv_csr *b, spmv_csr *c, spmv_error *err)
{
    bool f32 = a->dtype == SPMV_FLOAT32;
    uint64_t size = table_size(most_entries(a, b));
    int st = SPMV_OK;
    memset(c, 0, sizeof *c);
    c->rows = a->rows;
    c->cols = b->cols;
    c->dtype = a->dtype;
    uint64_t *keys = spmv_array_alloc((int64_t)size, sizeof *keys, &st);
    void *vals = keys ? spmv_array_alloc((int64_t)size, spmv_dtype_size(a->dtype), &st) : NULL;
    if (!vals || !(c->row_ptr = spmv_array_alloc((int64_t)a->rows + 1, sizeof(int32_t), &st)))
        goto fail;
    memset(keys, 0xff, size * sizeof *keys); /* EMPTY everywhere */
    memset(c->row_ptr, 0, ((size_t)a->rows + 1) * sizeof(int32_t));
    int64_t n = f32 ? accumulate_f32(a, arow, b, keys, vals, size - 1) : accumulate_f64(a, arow, b, keys, vals, size - 1);
    if (n > INT32_MAX) {
        st = SPMV_ERR_LIMIT;
        goto fail;
    }
    st = f32 ? table_to_csr_f32(keys, vals, size, n, b->cols, c) : table_to_csr_f64(keys, vals, size, n, b->cols, c);
    if (st)
        goto fail;
    free(keys);
    free(vals);
    return SPMV_OK;
fail:
    free(keys);
    free(vals);
    spmv_csr_free(c);
    return spmv_error_set(err, st, 0, "cpu.spmspm.hash: cannot hold C = A*B (%d rows, a table of %llu slots): %s",
                          a->rows, (unsigned long long)size, spmv_strerror(st));
}
