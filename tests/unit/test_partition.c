/* test_partition.c — cluster/partition.c on one process (issue 16).
 *
 * The layout and the shards a sharded matrix is made of, checked without
 * MPI: every row in exactly one block; each block's non-zeros within one
 * row's worth of nnz/nranks; the local and off-diagonal blocks together
 * exactly the block's rows of A; ghost lists ascending, outside the owned
 * range and exactly the columns the rows use; each rank's send list to a
 * peer exactly that peer's ghosts from it. Then the product the ranks
 * compute, simulated here (each rank's x entries, its ghosts fetched from
 * the owners through the send lists, local plus off-diagonal product),
 * must equal cpu.csr.serial's y on random matrices of every test shape
 * (drawn afresh, seed printed) and on the shared real matrices, for 1 to 7
 * ranks; and a shard survives its wire form, while damaged wire forms are
 * refused. Every shard's interior (cluster_shard_interior: the rows a GPU
 * shard multiplies while the halo moves) is checked against its
 * definition, and a 2-D grid's shards all split with the grid lines at
 * their ends as the edge. The MPI side is tests/mpi/mpi_cluster.c.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/cluster.h"
#include "spmv.h"
#include "testutil.h"

#define MAX_RANKS 7

static void check_layout(const spmv_csr *a, const cluster_layout *l)
{
    assert_int_equal(l->row_begin[0], 0);
    assert_int_equal(l->row_begin[l->nranks], a->rows);
    assert_int_equal(l->col_begin[0], 0);
    assert_int_equal(l->col_begin[l->nranks], a->cols);
    int64_t target = a->nnz / l->nranks, slack = tu_longest_row(a) + 1;
    for (int r = 0; r < l->nranks; r++) {
        assert_true(l->row_begin[r] <= l->row_begin[r + 1]);
        assert_true(l->col_begin[r] <= l->col_begin[r + 1]);
        int64_t nnz = a->row_ptr[l->row_begin[r + 1]] - a->row_ptr[l->row_begin[r]];
        if (llabs(nnz - target) > slack)
            fail_msg("rank %d of %d holds %lld non-zeros; nnz/nranks is %lld, longest row %lld", r, l->nranks,
                     (long long)nnz, (long long)target, (long long)slack - 1);
    }
    for (int32_t j = 0; j < a->cols; j++) {
        int o = cluster_layout_col_owner(l, j);
        assert_true(j >= l->col_begin[o] && j < l->col_begin[o + 1]);
    }
}

/* Local + off-diagonal block of s are exactly rows [rb, re) of a. */
static void check_blocks(const spmv_csr *a, const cluster_shard *s)
{
    size_t vs = spmv_dtype_size(a->dtype);
    const cluster_halo *h = &s->halo;
    assert_int_equal(h->recv_off[h->nranks], h->nghost);
    for (int32_t g = 1; g < h->nghost; g++)
        assert_true(h->ghost_col[g] > h->ghost_col[g - 1]);
    char *used = calloc((size_t)(h->nghost ? h->nghost : 1), 1);
    assert_non_null(used);
    for (int32_t i = s->row_begin; i < s->row_end; i++) {
        int32_t li = i - s->row_begin;
        int64_t kl = s->local.row_ptr[li], ko = s->off.row_ptr[li];
        for (int64_t k = a->row_ptr[i]; k < a->row_ptr[i + 1]; k++) {
            int32_t j = a->col[k];
            if (j >= s->col_begin && j < s->col_end) {
                assert_true(kl < s->local.row_ptr[li + 1]);
                assert_int_equal(s->local.col[kl] + s->col_begin, j);
                assert_memory_equal((char *)s->local.val + kl * vs, (char *)a->val + k * vs, vs);
                kl++;
            } else {
                assert_true(ko < s->off.row_ptr[li + 1]);
                int32_t g = s->off.col[ko];
                assert_true(g >= 0 && g < h->nghost);
                assert_int_equal(h->ghost_col[g], j);
                used[g] = 1;
                assert_memory_equal((char *)s->off.val + ko * vs, (char *)a->val + k * vs, vs);
                ko++;
            }
        }
        assert_int_equal(kl, s->local.row_ptr[li + 1]);
        assert_int_equal(ko, s->off.row_ptr[li + 1]);
    }
    for (int32_t g = 0; g < h->nghost; g++) /* no ghost the rows do not read */
        if (!used[g])
            fail_msg("rank %d: ghost column %d is not read by its rows", s->rank, h->ghost_col[g]);
    free(used);
}

/* Every send list is the receiver's ghosts from the sender, in order. */
static void check_sends(const cluster_layout *l, const cluster_shard *sh)
{
    for (int p = 0; p < l->nranks; p++)
        for (int q = 0; q < l->nranks; q++) {
            const cluster_halo *hp = &sh[p].halo, *hq = &sh[q].halo;
            int32_t ns = hp->send_off[q + 1] - hp->send_off[q], nr = hq->recv_off[p + 1] - hq->recv_off[p];
            assert_int_equal(ns, p == q ? 0 : nr);
            for (int32_t e = 0; e < ns; e++) {
                int32_t g = hq->ghost_col[hq->recv_off[p] + e];
                assert_int_equal(cluster_layout_col_owner(l, g), p);
                assert_int_equal(hp->send_idx[hp->send_off[q] + e] + l->col_begin[p], g);
            }
        }
}

/* What the ranks compute, in one process: x split by owner, each rank's
 * ghosts copied from the owners' x through their send lists. */
static void simulate(const spmv_csr *a, const cluster_shard *sh, int n, const void *x, void *y)
{
    size_t vs = spmv_dtype_size(a->dtype);
    const spmv_kernel *k = spmv_kernel_find("cpu.csr.serial");
    for (int r = 0; r < n; r++) {
        const cluster_shard *s = &sh[r];
        int32_t rows = s->row_end - s->row_begin;
        void *ghost = tu_vector_alloc(a->dtype, s->halo.nghost), *tmp = tu_vector_alloc(a->dtype, rows);
        for (int p = 0; p < n; p++) { /* rank p sends r its entries */
            const cluster_halo *hp = &sh[p].halo;
            for (int32_t e = hp->send_off[r]; e < hp->send_off[r + 1]; e++)
                memcpy((char *)ghost + (size_t)(s->halo.recv_off[p] + e - hp->send_off[r]) * vs,
                       (const char *)x + (size_t)(sh[p].col_begin + hp->send_idx[e]) * vs, vs);
        }
        spmv_matrix loc = {.rows = rows, .cols = s->local.cols, .nnz = s->local.nnz, .dtype = a->dtype,
                           .hack_size = 32, .formats = SPMV_FMT_CSR, .csr = s->local};
        spmv_matrix off = loc;
        off.cols = s->off.cols;
        off.nnz = s->off.nnz;
        off.csr = s->off;
        void *yr = (char *)y + (size_t)s->row_begin * vs;
        spmv_error err;
        if (rows) {
            assert_int_equal(spmv_cpu_run(k, &loc, NULL, (const char *)x + (size_t)s->col_begin * vs, yr, 0, 1, NULL,
                                          &err), SPMV_OK);
            assert_int_equal(spmv_cpu_run(k, &off, NULL, ghost, tmp, 0, 1, NULL, &err), SPMV_OK);
            for (int32_t i = 0; i < rows; i++) {
                if (a->dtype == SPMV_FLOAT64)
                    ((double *)yr)[i] += ((double *)tmp)[i];
                else
                    ((float *)yr)[i] += ((float *)tmp)[i];
            }
        }
        free(ghost);
        free(tmp);
    }
}

/* cluster_shard_interior against its definition: the interior reads no
 * ghost, starts on a multiple of 64 rows, holds an entry, leaves at most a
 * quarter of the rows to the edge, and is the longest ghost-free run
 * (rounded); a shard it refuses breaks one of those or reads no ghost.
 * Returns whether it split. */
static bool check_interior(const cluster_shard *s, const char *what)
{
    const spmv_csr *a = &s->local, *o = &s->off;
    int32_t lo = -1, hi = -1, rows = a->rows, best_lo = 0, best_hi = 0;
    bool split = cluster_shard_interior(s, &lo, &hi);
    for (int32_t i = 0, start = 0; i <= rows; i++) /* the longest run without a ghost, by brute force */
        if (i == rows || o->row_ptr[i + 1] > o->row_ptr[i]) {
            if (i - start > best_hi - best_lo) {
                best_lo = start;
                best_hi = i;
            }
            start = i + 1;
        }
    int32_t rounded = (best_lo + 63) / 64 * 64;
    bool want = rows > 0 && o->nnz > 0 && best_hi > rounded && rows - (best_hi - rounded) <= rows / 4 &&
                a->row_ptr[best_hi] > a->row_ptr[rounded];
    if (split != want)
        fail_msg("%s, rank %d: interior %s, expected %s (rows %d, longest ghost-free run [%d, %d))", what, s->rank,
                 split ? "split" : "not split", want ? "split" : "not", rows, best_lo, best_hi);
    if (!split)
        return false;
    assert_int_equal(lo, rounded);
    assert_int_equal(hi, best_hi);
    assert_int_equal(lo % 64, 0);
    for (int32_t i = lo; i < hi; i++)
        if (o->row_ptr[i + 1] > o->row_ptr[i])
            fail_msg("%s, rank %d: interior row %d reads a ghost", what, s->rank, i);
    return true;
}

static void check_matrix(const spmv_csr *a, const char *what)
{
    for (int n = 1; n <= MAX_RANKS; n++) {
        cluster_layout l;
        cluster_shard sh[MAX_RANKS];
        spmv_error err;
        assert_int_equal(cluster_layout_balance(a, n, &l, &err), SPMV_OK);
        check_layout(a, &l);
        if (cluster_shards_build(a, &l, sh, &err) != SPMV_OK)
            fail_msg("%s, %d ranks: %s", what, n, err.message);
        int64_t nnz = 0;
        for (int r = 0; r < n; r++) {
            check_blocks(a, &sh[r]);
            check_interior(&sh[r], what);
            nnz += cluster_shard_nnz(&sh[r]);
        }
        assert_int_equal(nnz, a->nnz);
        check_sends(&l, sh);
        /* the product, y poisoned first, against the reference */
        tu_rng rng;
        tu_rng_init(&rng, tu_seed() + (uint64_t)n);
        void *x = tu_vector_alloc(a->dtype, a->cols), *y = tu_vector_alloc(a->dtype, a->rows),
             *ref = tu_vector_alloc(a->dtype, a->rows);
        tu_random_vector(&rng, a->dtype, a->cols, x);
        tu_poison(y, a->dtype, a->rows);
        simulate(a, sh, n, x, y);
        spmv_reference(a, x, ref);
        char w[160];
        snprintf(w, sizeof w, "%s on %d ranks", what, n);
        TU_ASSERT_CLOSE(w, a->dtype, y, a->dtype, ref, a->rows, TU_NORM_INF, a->dtype == SPMV_FLOAT64 ? 1e-12 : 1e-5);
        free(x);
        free(y);
        free(ref);
        for (int r = 0; r < n; r++)
            cluster_shard_free(&sh[r]);
        cluster_layout_free(&l);
    }
}

static void test_random_shapes(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed());
    for (int s = 0; s < TU_SHAPE_COUNT; s++)
        for (int d = 0; d < 2; d++) {
            spmv_coo coo;
            spmv_csr a;
            spmv_error err;
            spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
            tu_random_coo(&rng, (tu_shape)s, 300 + (int32_t)tu_rng_range(&rng, 0, 200), dt, &coo);
            assert_int_equal(spmv_coo_to_csr(&coo, dt, &a, &err), SPMV_OK);
            char what[96];
            snprintf(what, sizeof what, "%s %s", tu_shape_name((tu_shape)s), spmv_dtype_name(dt));
            check_matrix(&a, what);
            spmv_csr_free(&a);
            spmv_coo_free(&coo);
        }
}

static void test_real_matrices(void **state)
{
    (void)state;
    tu_expected *e;
    size_t n;
    assert_int_equal(tu_expected_load(&e, &n), 0);
    for (size_t i = 0; i < n; i++) {
        char path[512];
        char rel[160];
        snprintf(rel, sizeof rel, "real/%s", e[i].file);
        spmv_coo coo;
        spmv_csr a;
        spmv_error err;
        assert_int_equal(spmv_mm_read_file(tu_matrices_path(path, sizeof path, rel), NULL, &coo, NULL, &err), SPMV_OK);
        assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &a, &err), SPMV_OK);
        check_matrix(&a, e[i].file);
        spmv_csr_free(&a);
        spmv_coo_free(&coo);
    }
    tu_expected_free(e, n);
}

/* a's layout over n ranks and their shards (the test fails if either is
 * refused). */
static void shard_all(const spmv_csr *a, int n, cluster_layout *l, cluster_shard *sh)
{
    spmv_error err;
    assert_int_equal(cluster_layout_balance(a, n, l, &err), SPMV_OK);
    assert_int_equal(cluster_shards_build(a, l, sh, &err), SPMV_OK);
}

/* A 2-D grid's shards (2 to 7 ranks): every one split, its edge the grid
 * lines that read a neighbour's (one at each inner end) and the rows the
 * rounding to 64 moves; a random graph's shards read ghosts from every
 * part of them and none splits. */
static void test_interior(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0x1e7);
    int32_t g = 150 + (int32_t)tu_rng_range(&rng, 0, 100);
    spmv_gen_spec spec = {SPMV_GEN_POISSON2D, g, 0, 0, tu_seed()};
    spmv_coo coo;
    spmv_csr a;
    spmv_error err;
    assert_int_equal(spmv_gen(&spec, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &a, &err), SPMV_OK);
    for (int n = 2; n <= MAX_RANKS; n++) {
        cluster_layout l;
        cluster_shard sh[MAX_RANKS];
        shard_all(&a, n, &l, sh);
        for (int r = 0; r < n; r++) {
            char what[64];
            snprintf(what, sizeof what, "%d x %d grid on %d ranks", g, g, n);
            if (!check_interior(&sh[r], what))
                fail_msg("%s: rank %d's shard (%d rows) is not split", what, r, sh[r].local.rows);
            int32_t lo, hi;
            cluster_shard_interior(&sh[r], &lo, &hi);
            int32_t edge = sh[r].local.rows - (hi - lo), lines = (r > 0) + (r < n - 1);
            if (edge < lines * g || edge > lines * g + 63)
                fail_msg("%s: rank %d's edge is %d rows, expected %d grid lines and at most 63 more", what, r, edge,
                         lines);
            cluster_shard_free(&sh[r]);
        }
        cluster_layout_free(&l);
    }
    spmv_csr_free(&a);
    spmv_coo_free(&coo);
    spmv_gen_spec gs = {SPMV_GEN_GRAPH_UNIFORM, 20000, 8, 0, tu_seed()};
    assert_int_equal(spmv_gen(&gs, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &a, &err), SPMV_OK);
    cluster_layout l;
    cluster_shard sh[4];
    shard_all(&a, 4, &l, sh);
    for (int r = 0; r < 4; r++) {
        if (check_interior(&sh[r], "a uniform random graph on 4 ranks"))
            fail_msg("rank %d of a random graph's shards split", r);
        cluster_shard_free(&sh[r]);
    }
    cluster_layout_free(&l);
    spmv_csr_free(&a);
    spmv_coo_free(&coo);
}

/* A shard through its wire form comes back equal; damaged forms are refused. */
static void test_wire(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed() ^ 0x77);
    spmv_coo coo;
    spmv_csr a;
    spmv_error err;
    tu_random_coo(&rng, TU_SHAPE_POWER_LAW, 400, SPMV_FLOAT64, &coo);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &a, &err), SPMV_OK);
    cluster_layout l;
    cluster_shard sh[3];
    shard_all(&a, 3, &l, sh);
    for (int r = 0; r < 3; r++) {
        void *buf;
        size_t len;
        cluster_shard back;
        assert_int_equal(cluster_shard_pack(&sh[r], &buf, &len, &err), SPMV_OK);
        assert_int_equal(cluster_shard_unpack(buf, len, &back, &err), SPMV_OK);
        assert_int_equal(back.row_begin, sh[r].row_begin);
        assert_int_equal(back.col_end, sh[r].col_end);
        assert_int_equal(back.local.nnz, sh[r].local.nnz);
        assert_int_equal(back.off.nnz, sh[r].off.nnz);
        assert_memory_equal(back.off.col, sh[r].off.col, (size_t)sh[r].off.nnz * 4);
        assert_memory_equal(back.halo.send_idx, sh[r].halo.send_idx, (size_t)sh[r].halo.nsend * 4);
        cluster_shard_free(&back);
        /* truncated, and one byte flipped at many places: refused or equal, never a crash */
        assert_int_not_equal(cluster_shard_unpack(buf, len - 1, &back, &err), SPMV_OK);
        for (size_t at = 0; at < len; at += 1 + len / 97) {
            ((unsigned char *)buf)[at] ^= 0x5a;
            if (cluster_shard_unpack(buf, len, &back, &err) == SPMV_OK)
                cluster_shard_free(&back);
            ((unsigned char *)buf)[at] ^= 0x5a;
        }
        free(buf);
        /* both blocks keep each row's columns strictly increasing (a GPU
         * copy sorts nothing); a shard whose row is out of order is refused */
        const spmv_csr *blk[2] = {&sh[r].local, &sh[r].off};
        int32_t swap_at = -1;
        for (int b = 0; b < 2; b++)
            for (int32_t i = 0; i < blk[b]->rows; i++)
                for (int32_t k = blk[b]->row_ptr[i] + 1; k < blk[b]->row_ptr[i + 1]; k++) {
                    assert_true(blk[b]->col[k] > blk[b]->col[k - 1]);
                    if (b == 0 && swap_at < 0)
                        swap_at = k;
                }
        assert_true(swap_at > 0);
        int32_t *c = sh[r].local.col, t = c[swap_at];
        c[swap_at] = c[swap_at - 1];
        c[swap_at - 1] = t;
        assert_int_equal(cluster_shard_pack(&sh[r], &buf, &len, &err), SPMV_OK);
        assert_int_equal(cluster_shard_unpack(buf, len, &back, &err), SPMV_ERR_CORRUPT);
        c[swap_at - 1] = c[swap_at];
        c[swap_at] = t;
        free(buf);
    }
    for (int r = 0; r < 3; r++)
        cluster_shard_free(&sh[r]);
    cluster_layout_free(&l);
    spmv_csr_free(&a);
    spmv_coo_free(&coo);
}

int main(void)
{
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_real_matrices),
        cmocka_unit_test(test_wire),
        cmocka_unit_test(test_interior),
    };
    return cmocka_run_group_tests_name("partition", tests, NULL, NULL);
}
