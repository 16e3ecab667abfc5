/* fuzz_shard.c — libFuzzer target: a shard's wire form (cluster/partition.c).
 *
 * A rank > 0 unpacks what rank 0 sends it and, at a restart, what its own
 * shard file holds (cluster/shardfile.c): input it must not trust. A
 * valid shard is a narrow target for blind mutation, so the input is read
 * as a recipe:
 *   byte 0     rows (1..32), byte 1 cols (1..32), byte 2 ranks (1..4) and
 *              which rank's shard is damaged;
 *   4 bytes a row: the row's columns as a bit mask (a CSR with sorted
 *              columns, values from the positions);
 *   the rest, 3 bytes each: damage, the byte at (b0 | b1 << 8) mod length
 *              xor'd with b2 (the third byte 0: truncate the form there).
 * The matrix is cut over the ranks (cluster_layout_balance,
 * cluster_shards_build) and every shard packed; the chosen one is damaged
 * and unpacked. Undamaged, it must come back equal (packed again, the same
 * bytes). Damaged, unpack must give SPMV_OK or an error status with a
 * message, never a crash or a read past the buffer; a shard it accepts
 * must be sound (the CSR contract in both blocks, the halo plan inside its
 * ranges) and pack back to exactly the damaged bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"

static void csr_sound(const spmv_csr *m, int32_t rows, int32_t cols)
{
    if (m->rows != rows || m->cols != cols || m->row_ptr[0] != 0 || m->row_ptr[rows] != m->nnz)
        __builtin_trap();
    for (int32_t i = 0; i < rows; i++)
        for (int32_t k = m->row_ptr[i]; k < m->row_ptr[i + 1]; k++)
            if (m->col[k] < 0 || m->col[k] >= cols || (k > m->row_ptr[i] && m->col[k] <= m->col[k - 1]))
                __builtin_trap();
}

static void shard_sound(const cluster_shard *s)
{
    const cluster_halo *h = &s->halo;
    int32_t rows = s->row_end - s->row_begin, own = s->col_end - s->col_begin;
    if (rows < 0 || own < 0 || h->nranks != s->nranks || h->recv_off[h->nranks] != h->nghost ||
        h->send_off[h->nranks] != h->nsend)
        __builtin_trap();
    csr_sound(&s->local, rows, own);
    csr_sound(&s->off, rows, h->nghost);
    for (int32_t g = 0; g < h->nghost; g++)
        if (h->ghost_col[g] < 0 || h->ghost_col[g] >= s->cols || (g && h->ghost_col[g] <= h->ghost_col[g - 1]))
            __builtin_trap();
    for (int32_t e = 0; e < h->nsend; e++)
        if (h->send_idx[e] < 0 || h->send_idx[e] >= own)
            __builtin_trap();
}

/* s packs to exactly len bytes equal to buf. */
static void packs_to(const cluster_shard *s, const void *buf, size_t len)
{
    void *again = NULL;
    size_t n = 0;
    spmv_error err = {0};
    if (cluster_shard_pack(s, &again, &n, &err) != SPMV_OK || n != len || memcmp(again, buf, len) != 0)
        __builtin_trap();
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    int32_t rows = 1 + data[0] % 32, cols = 1 + data[1] % 32;
    int nranks = 1 + data[2] % 4, victim = (data[2] >> 2) % nranks;
    size_t at = 3;
    spmv_csr a = {.rows = rows, .cols = cols, .dtype = SPMV_FLOAT64};
    a.row_ptr = calloc((size_t)rows + 1, sizeof *a.row_ptr);
    a.col = malloc((size_t)rows * (size_t)cols * sizeof *a.col);
    double *val = malloc((size_t)rows * (size_t)cols * sizeof *val);
    a.val = val;
    if (!a.row_ptr || !a.col || !val)
        abort();
    for (int32_t i = 0; i < rows; i++) {
        uint32_t mask = 0;
        for (int b = 0; b < 4; b++)
            mask |= (uint32_t)(at < size ? data[at++] : 0) << (8 * b);
        a.row_ptr[i + 1] = a.row_ptr[i];
        for (int32_t j = 0; j < cols; j++)
            if (mask >> j & 1u) {
                a.col[a.row_ptr[i + 1]] = j;
                val[a.row_ptr[i + 1]++] = 1.0 + i * cols + j;
            }
    }
    a.nnz = a.row_ptr[rows];
    cluster_layout l;
    cluster_shard *sh = calloc((size_t)nranks, sizeof *sh);
    spmv_error err = {0};
    if (!sh || cluster_layout_balance(&a, nranks, &l, &err) != SPMV_OK || cluster_shards_build(&a, &l, sh, &err) != SPMV_OK)
        __builtin_trap(); /* a sound matrix always cuts */
    void *buf = NULL;
    size_t len = 0;
    if (cluster_shard_pack(&sh[victim], &buf, &len, &err) != SPMV_OK)
        __builtin_trap();
    bool damaged = false;
    for (; at + 3 <= size && len > 0; at += 3) {
        size_t pos = ((size_t)data[at] | (size_t)data[at + 1] << 8) % len;
        if (data[at + 2] == 0)
            len = pos; /* truncated there */
        else
            ((uint8_t *)buf)[pos] ^= data[at + 2];
        damaged = true;
    }
    cluster_shard back;
    memset(&err, 0, sizeof err);
    int st = cluster_shard_unpack(buf, len, &back, &err);
    if (!damaged && st != SPMV_OK)
        __builtin_trap(); /* its own form refused */
    if (st != SPMV_OK) {
        if (st > 0 || !err.message[0])
            __builtin_trap(); /* an error without its status or its message */
    } else {
        shard_sound(&back);
        packs_to(&back, buf, len);
        cluster_shard_free(&back);
    }
    free(buf);
    for (int r = 0; r < nranks; r++)
        cluster_shard_free(&sh[r]);
    free(sh);
    cluster_layout_free(&l);
    free(a.row_ptr);
    free(a.col);
    free(val);
    return 0;
}
