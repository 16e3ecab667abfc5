/* mmio_build.c — from parsed Matrix Market entries to the sorted COO.
 *
 * The reader (mmio.c) hands over the entries in file order; this file makes
 * the engine's interchange format out of them: symmetric and skew-symmetric
 * input expanded (the mirror of each off-diagonal entry added, negated for
 * skew), rows sorted, columns sorted within each row, duplicates summed in
 * file order, explicit zeros kept. It is on the upload's critical path, so
 * the row order comes from an O(nnz + rows) counting sort, rows are sorted
 * by insertion (short) or a stable merge sort (long), in parallel when the
 * reader has threads, and the one pass that sums duplicates also writes
 * the row indices; input that is already sorted (a general file whose
 * entries strictly increase) is copied as it is. A matrix with far more rows than entries (a header can
 * declare 2^31 - 1 rows for three entries) is sorted by comparison instead,
 * so memory follows the entries, not the header.
 *
 * Array files are dense: every value is an entry, laid out column-major
 * in the file; the output walks it in row-major order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "mmio_internal.h"

#define INSERTION_MAX 32           /* rows this short are sorted by insertion */
#define COUNTING_SLACK (1 << 20)   /* rows <= 4*nnz + this: counting sort */

#define HUGE_ADVICE_MIN ((size_t)8 << 20)

void spmv_mm_advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t page = 4096;
    if (!p || bytes < HUGE_ADVICE_MIN)
        return;
    uintptr_t b = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + bytes) & ~(page - 1);
    if (e > b)
        madvise((void *)b, e - b, MADV_HUGEPAGE);   /* a hint: failure changes nothing */
#else
    (void)p;
    (void)bytes;
#endif
}

void spmv_mm_prefault(void *p, size_t bytes, int threads)
{
    const size_t page = 4096;
    if (!p || bytes < HUGE_ADVICE_MIN || threads < 2)
        return;
    volatile char *c = p;
    const int64_t pages = (int64_t)((bytes + page - 1) / page);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < pages; i++)
        c[(size_t)i * page] = 0;
}

static void advise_coo(spmv_coo *m)
{
    spmv_mm_advise_huge(m->row, (size_t)m->nnz * sizeof(int32_t));
    spmv_mm_advise_huge(m->col, (size_t)m->nnz * sizeof(int32_t));
    spmv_mm_advise_huge(m->val, (size_t)m->nnz * sizeof(double));
}

/* A sort record: (row << 32 | col) or just col, and the value. */
typedef struct kv {
    uint64_t key;
    double val;
} kv;

/* Stable bottom-up merge sort of a[0..n) by key, using tmp[0..n). */
static void merge_sort(kv *a, kv *tmp, int64_t n)
{
    kv *src = a, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = src[j].key < src[i].key ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        kv *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
}

/* Sorts one row's columns (and values) stably. scratch holds 2*len kv. */
static void sort_row(int32_t *col, double *val, int64_t len, kv *scratch)
{
    int64_t k;
    for (k = 1; k < len && col[k - 1] <= col[k]; k++)
        ;
    if (k >= len)
        return;   /* already sorted: the common case for real files */
    if (len <= INSERTION_MAX) {
        for (k = 1; k < len; k++) {
            int32_t c = col[k];
            double v = val[k];
            int64_t j = k;
            for (; j > 0 && col[j - 1] > c; j--) {
                col[j] = col[j - 1];
                val[j] = val[j - 1];
            }
            col[j] = c;
            val[j] = v;
        }
        return;
    }
    for (k = 0; k < len; k++)
        scratch[k] = (kv){(uint64_t)(uint32_t)col[k], val[k]};
    merge_sort(scratch, scratch + len, len);
    for (k = 0; k < len; k++) {
        col[k] = (int32_t)scratch[k].key;
        val[k] = scratch[k].val;
    }
}

/* Sorts every row [ptr[i], ptr[i+1]); false if scratch memory failed. */
static bool sort_rows(const int64_t *ptr, int64_t rows, int32_t *col, double *val, int threads)
{
    int64_t longest = 0;
    for (int64_t i = 0; i < rows; i++)
        if (ptr[i + 1] - ptr[i] > longest)
            longest = ptr[i + 1] - ptr[i];
    bool ok = true;
#pragma omp parallel num_threads(threads > 1 ? threads : 1) reduction(&& : ok)
    {
        kv *scratch = longest > INSERTION_MAX ? malloc((size_t)longest * 2 * sizeof *scratch) : NULL;
        ok = longest <= INSERTION_MAX || scratch;
#pragma omp for schedule(dynamic, 4096)
        for (int64_t i = 0; i < rows; i++)
            if (ok)
                sort_row(col + ptr[i], val + ptr[i], ptr[i + 1] - ptr[i], scratch);
        free(scratch);
    }
    return ok;
}

/* Entries after expansion: each off-diagonal entry of a symmetric,
 * skew-symmetric or hermitian file also stands for its mirror. */
static int64_t expanded_count(const mm_header *h, const mm_entries *e)
{
    int64_t total = e->n;
    if (h->symmetry != SPMV_MM_GENERAL)
        for (int64_t k = 0; k < e->n; k++)
            total += e->row[k] != e->col[k];
    return total;
}

/* Copies the first nnz entries of *big into a COO of exactly nnz (after
 * duplicates were summed) and frees *big. */
static int shrink(const mm_header *h, spmv_coo *big, int64_t nnz, spmv_coo *out, spmv_error *err)
{
    int st = spmv_coo_alloc(out, (int32_t)h->rows, (int32_t)h->cols, nnz, SPMV_FLOAT64, err);
    if (!st) {
        memcpy(out->row, big->row, (size_t)nnz * sizeof(int32_t));
        memcpy(out->col, big->col, (size_t)nnz * sizeof(int32_t));
        memcpy(out->val, big->val, (size_t)nnz * sizeof(double));
    }
    spmv_coo_free(big);
    return st;
}

/* Counts the entries (and mirrors) of e[lo, hi) per row into cnt[row]. */
static void count_rows(const mm_entries *e, int64_t lo, int64_t hi, bool mirror, int64_t *cnt)
{
    for (int64_t k = lo; k < hi; k++) {
        cnt[e->row[k]]++;
        if (mirror && e->row[k] != e->col[k])
            cnt[e->col[k]]++;
    }
}

/* Writes e[lo, hi) (and mirrors) to the slots pos[row]++ of col and val. */
static void scatter_rows(const mm_entries *e, int64_t lo, int64_t hi, bool mirror, double sign, int64_t *pos,
                         int32_t *col, double *val)
{
    for (int64_t k = lo; k < hi; k++) {
        int32_t r = e->row[k], c = e->col[k];
        int64_t d = pos[r]++;
        col[d] = c;
        val[d] = e->val[k];
        if (mirror && r != c) {
            d = pos[c]++;
            col[d] = r;
            val[d] = sign * e->val[k];
        }
    }
}

/* Counting sort by row into m (allocated with `total` entries), then the
 * per-row sort and the pass that sums duplicates; returns the distinct
 * count or -1 when out of memory. The scatter is memory-latency bound
 * (rows land anywhere when a file lists its entries column by column), so
 * with threads each takes a contiguous slice of the entries with a row
 * histogram of its own; slots are handed out row by row, slice by slice,
 * which is exactly the serial order, so the result is bit-identical. */
static int64_t build_by_rows(const mm_header *h, const mm_entries *e, int threads, spmv_coo *m)
{
    const bool mirror = h->symmetry != SPMV_MM_GENERAL;
    const double sign = h->symmetry == SPMV_MM_SKEW_SYMMETRIC ? -1.0 : 1.0;
    const int64_t rows = h->rows, n = e->n;
    int nt = threads < 1 ? 1 : (threads > 8 ? 8 : threads);
    if (n < ((int64_t)1 << 16) || rows > n)
        nt = 1;   /* small, or histograms bigger than the entries: not worth it */
    int64_t *ptr = calloc((size_t)rows + 1, sizeof *ptr);
    int64_t *pos = calloc((size_t)nt * ((size_t)rows + 1), sizeof *pos);
    if (!ptr || !pos) {
        free(ptr);
        free(pos);
        return -1;
    }
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (int t = 0; t < nt; t++)
        count_rows(e, n * t / nt, n * (t + 1) / nt, mirror, pos + (size_t)t * ((size_t)rows + 1));
    /* Exclusive scan in (row, slice) order: pos[t][i] = first slot of the
     * entries of row i from slice t; ptr[i] = first slot of row i. */
    int64_t sum = 0;
    for (int64_t i = 0; i < rows; i++) {
        ptr[i] = sum;
        for (int t = 0; t < nt; t++) {
            int64_t *p = pos + (size_t)t * ((size_t)rows + 1) + i;
            int64_t c = *p;
            *p = sum;
            sum += c;
        }
    }
    ptr[rows] = sum;
    int32_t *col = m->col;
    double *val = m->val;
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (int t = 0; t < nt; t++)
        scatter_rows(e, n * t / nt, n * (t + 1) / nt, mirror, sign, pos + (size_t)t * ((size_t)rows + 1), col, val);
    free(pos);
    if (!sort_rows(ptr, rows, col, val, threads)) {
        free(ptr);
        return -1;
    }
    int64_t w = 0;
    for (int64_t i = 0; i < rows; i++) {
        int64_t first = w;
        for (int64_t k = ptr[i]; k < ptr[i + 1]; k++) {
            if (w > first && col[w - 1] == col[k]) {
                val[w - 1] += val[k];
            } else {
                m->row[w] = (int32_t)i;
                col[w] = col[k];
                val[w] = val[k];
                w++;
            }
        }
    }
    free(ptr);
    return w;
}

/* The same result by a stable sort on (row, col) keys: for matrices with
 * many more rows than entries. */
static int64_t build_by_keys(const mm_header *h, const mm_entries *e, int64_t total, spmv_coo *m)
{
    const bool mirror = h->symmetry != SPMV_MM_GENERAL;
    const double sign = h->symmetry == SPMV_MM_SKEW_SYMMETRIC ? -1.0 : 1.0;
    kv *a = malloc((size_t)total * 2 * sizeof *a + 1);
    if (!a)
        return -1;
    int64_t n = 0;
    for (int64_t k = 0; k < e->n; k++) {
        uint64_t r = (uint32_t)e->row[k], c = (uint32_t)e->col[k];
        a[n++] = (kv){r << 32 | c, e->val[k]};
        if (mirror && r != c)
            a[n++] = (kv){c << 32 | r, sign * e->val[k]};
    }
    merge_sort(a, a + total, total);
    int64_t w = 0;
    for (int64_t k = 0; k < total; k++) {
        if (w > 0 && a[w - 1].key == a[k].key) {
            a[w - 1].val += a[k].val;
            continue;
        }
        a[w++] = a[k];
    }
    for (int64_t k = 0; k < w; k++) {
        m->row[k] = (int32_t)(a[k].key >> 32);
        m->col[k] = (int32_t)(a[k].key & 0xffffffffu);
        ((double *)m->val)[k] = a[k].val;
    }
    free(a);
    return w;
}

/* Whether a general file's entries are already strictly increasing in
 * (row, col): then the COO is a plain copy. Files written by tools (and
 * the generator) usually are, and this skips every sorting pass. */
static bool already_sorted(const mm_header *h, const mm_entries *e, int threads)
{
    if (h->symmetry != SPMV_MM_GENERAL)
        return false;
    bool sorted = true;
#pragma omp parallel for num_threads(threads > 1 ? threads : 1) reduction(&& : sorted) schedule(static)
    for (int64_t k = 1; k < e->n; k++)
        sorted = sorted && (e->row[k - 1] < e->row[k] || (e->row[k - 1] == e->row[k] && e->col[k - 1] < e->col[k]));
    return sorted;
}

static int copy_sorted(const mm_header *h, const mm_entries *e, int threads, spmv_coo *out, spmv_error *err)
{
    int st = spmv_coo_alloc(out, (int32_t)h->rows, (int32_t)h->cols, e->n, SPMV_FLOAT64, err);
    if (st)
        return st;
    advise_coo(out);
    /* In slices, so that each thread first-touches (and copies) its part. */
    const int64_t slice = 1 << 16, nslices = (e->n + slice - 1) / slice;
#pragma omp parallel for num_threads(threads > 1 ? threads : 1) schedule(static)
    for (int64_t s = 0; s < nslices; s++) {
        int64_t k = s * slice, n = e->n - k < slice ? e->n - k : slice;
        memcpy(out->row + k, e->row + k, (size_t)n * sizeof(int32_t));
        memcpy(out->col + k, e->col + k, (size_t)n * sizeof(int32_t));
        memcpy((double *)out->val + k, e->val + k, (size_t)n * sizeof(double));
    }
    return SPMV_OK;
}

static int build_coordinate(const mm_header *h, const mm_entries *e, int threads, spmv_coo *out,
                            int64_t *duplicates, spmv_error *err)
{
    spmv_coo m;
    if (already_sorted(h, e, threads))
        return copy_sorted(h, e, threads, out, err);
    int64_t total = expanded_count(h, e);
    if (total > h->max_nnz)
        return spmv_error_set(err, SPMV_ERR_LIMIT, h->size_line,
                              "line %lld: %lld entries after symmetric expansion are over the limit of %lld (%s)",
                              (long long)h->size_line, (long long)total, (long long)h->max_nnz,
                              h->max_nnz == INT32_MAX ? "non-zeros must fit a 32-bit signed integer" : "max_nnz");
    int st = spmv_coo_alloc(&m, (int32_t)h->rows, (int32_t)h->cols, total, SPMV_FLOAT64, err);
    if (st)
        return st;
    advise_coo(&m);
    int64_t nnz = h->rows <= 4 * total + COUNTING_SLACK ? build_by_rows(h, e, threads, &m)
                                                        : build_by_keys(h, e, total, &m);
    if (nnz < 0) {
        spmv_coo_free(&m);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory sorting %lld entries", (long long)total);
    }
    *duplicates = total - nnz;
    if (nnz == total) {
        *out = m;
        return SPMV_OK;
    }
    return shrink(h, &m, nnz, out, err);
}

/* Index of (i, j), i >= j (i > j for skew), in a stored lower triangle
 * listed column by column. */
static int64_t triangle_index(int64_t n, int64_t i, int64_t j, bool skew)
{
    if (skew)
        return j * (n - 1) - j * (j - 1) / 2 + (i - j - 1);
    return j * n - j * (j - 1) / 2 + (i - j);
}

static int build_array(const mm_header *h, const mm_entries *e, spmv_coo *out, spmv_error *err)
{
    const int64_t rows = h->rows, cols = h->cols;
    const bool skew = h->symmetry == SPMV_MM_SKEW_SYMMETRIC;
    const bool general = h->symmetry == SPMV_MM_GENERAL;
    int64_t nnz = general ? rows * cols : (skew ? rows * (rows - 1) : rows * rows);
    int st = spmv_coo_alloc(out, (int32_t)rows, (int32_t)cols, nnz, SPMV_FLOAT64, err);
    if (st)
        return st;
    double *val = out->val;
    int64_t w = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            double v;
            if (general)
                v = e->val[j * rows + i];
            else if (i == j && skew)
                continue;   /* a skew diagonal is zero and not stored */
            else if (i >= j)
                v = e->val[triangle_index(rows, i, j, skew)];
            else
                v = (skew ? -1.0 : 1.0) * e->val[triangle_index(rows, j, i, skew)];
            out->row[w] = (int32_t)i;
            out->col[w] = (int32_t)j;
            val[w] = v;
            w++;
        }
    return SPMV_OK;
}

int spmv_mm_build_coo(const mm_header *h, const mm_entries *e, int threads,
                      spmv_coo *out, int64_t *duplicates, spmv_error *err)
{
    *duplicates = 0;
    if (h->format == SPMV_MM_ARRAY)
        return build_array(h, e, out, err);
    return build_coordinate(h, e, threads, out, duplicates, err);
}

/* The peak of a read, stage by stage, each as this file and the CSR
 * conversion allocate: the parsed entries (a row, a column and a float64
 * each) live until the COO is built; the build adds the COO and its sort's
 * scratch (the row histograms, a set per thread, or the key pairs twice
 * over) and, when duplicates are summed, the COO again at its final size;
 * then the COO and the CSR (32-bit offsets, as spmv_coo_to_csr makes them;
 * 64-bit past INT32_MAX entries) live together. Symmetric input is counted
 * expanded already. */
void spmv_mm_declare(int64_t rows, int64_t cols, int64_t entries, int threads, spmv_mm_declared *out)
{
    const int64_t entry = 2 * (int64_t)sizeof(int32_t) + (int64_t)sizeof(double);
    int nt = threads < 1 ? 1 : (threads > 8 ? 8 : threads);
    int64_t scratch = rows <= 4 * entries + COUNTING_SLACK ? (rows + 1) * 8 * (1 + nt) : entries * 2 * (int64_t)sizeof(kv);
    int64_t build = entries * entry * 3 + scratch;
    int64_t offset = entries > INT32_MAX ? 8 : 4;
    out->rows = rows;
    out->cols = cols;
    out->entries = entries;
    out->csr_bytes = (rows + 1) * offset + entries * (int64_t)(sizeof(int32_t) + sizeof(double));
    int64_t convert = entries * entry + out->csr_bytes;
    out->peak_bytes = build > convert ? build : convert;
}
