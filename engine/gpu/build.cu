/* build.cu — the formats a device matrix holds beside its CSR, built there.
 *
 * ELL, HLL and HYB are filled from the CSR, one thread per row, in the
 * layouts engine/spmv.h documents (column-major, padding column -1 value 0;
 * HLL slices of hack_size rows with a row stride of hack_size, last slice
 * padded, which is also cuSPARSE's sliced-ELL layout); COO's row array is
 * expanded from the row pointers. An ELL too big to be worth it is skipped
 * at upload (ell_worth_building). HYB's width is the host's rule
 * (engine/hyb.c): the 2/3 quantile of the row lengths, found here by
 * sorting the row lengths on the device. gpu_ensure_format builds a format
 * on first use under the padding rule (the packed ones in
 * engine/gpu/packed.cu), evicting others when memory is short
 * (engine/gpu/residency.cu); gpu_get_hll keeps HLLs of other hack sizes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>

#include "gpu.cuh"

/* ------------------------------------------------------------- kernels */


__global__ void rows_from_csr(int32_t rows, const int32_t *__restrict__ rp, int32_t *__restrict__ row)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < rows)
        for (int32_t k = rp[i]; k < rp[i + 1]; k++)
            row[k] = (int32_t)i;
}

__global__ void row_lengths(int32_t rows, const int32_t *__restrict__ rp, int32_t *__restrict__ len)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < rows)
        len[i] = rp[i + 1] - rp[i];
}

/* The first `width` entries of each row into a column-major block with row
 * stride `stride`; slots past a row's length are padding. */
template <typename T>
__global__ void ell_fill(int32_t rows, int32_t width, int64_t stride, const int32_t *__restrict__ rp,
                         const int32_t *__restrict__ col, const T *__restrict__ val, int32_t *__restrict__ ecol,
                         T *__restrict__ eval)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    int32_t start = rp[i], len = rp[i + 1] - start;
    for (int32_t k = 0; k < width; k++) {
        int64_t slot = (int64_t)k * stride + i;
        bool real = k < len;
        ecol[slot] = real ? col[start + k] : GPU_PAD_COL;
        eval[slot] = real ? val[start + k] : (T)0;
    }
}

/* Per slice: its width (longest row) and its slot count width*hack. */
__global__ void hll_slice_widths(int32_t rows, int32_t hack, int32_t nslices, const int32_t *__restrict__ rp,
                                 int32_t *__restrict__ width, int64_t *__restrict__ slots)
{
    int64_t s = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (s > nslices)
        return;
    if (s == nslices) {
        slots[s] = 0; /* becomes the total after the exclusive scan */
        return;
    }
    int64_t r0 = s * hack, r1 = r0 + hack < rows ? r0 + hack : rows;
    int32_t w = 0;
    for (int64_t r = r0; r < r1; r++)
        w = max(w, rp[r + 1] - rp[r]);
    width[s] = w;
    slots[s] = (int64_t)w * hack;
}

/* One thread per row of the padded slices (nslices * hack threads). */
template <typename T>
__global__ void hll_fill(int32_t rows, int32_t hack, int32_t nslices, const int32_t *__restrict__ rp,
                         const int32_t *__restrict__ col, const T *__restrict__ val,
                         const int32_t *__restrict__ width, const int64_t *__restrict__ off,
                         int32_t *__restrict__ hcol, T *__restrict__ hval)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= (int64_t)nslices * hack)
        return;
    int64_t s = i / hack, r = i % hack;
    int32_t start = 0, len = 0;
    if (i < rows) {
        start = rp[i];
        len = rp[i + 1] - start;
    }
    int32_t w = width[s];
    int64_t base = off[s] + r;
    for (int32_t k = 0; k < w; k++) {
        int64_t slot = base + (int64_t)k * hack;
        bool real = k < len;
        hcol[slot] = real ? col[start + k] : GPU_PAD_COL;
        hval[slot] = real ? val[start + k] : (T)0;
    }
}

__global__ void hyb_counts(int32_t rows, int32_t width, const int32_t *__restrict__ rp, int32_t *__restrict__ cnt)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < rows) {
        int32_t len = rp[i + 1] - rp[i];
        cnt[i] = len > width ? len - width : 0;
    } else if (i == rows) {
        cnt[i] = 0;
    }
}

template <typename T>
__global__ void hyb_fill_coo(int32_t rows, int32_t width, const int32_t *__restrict__ rp,
                             const int32_t *__restrict__ col, const T *__restrict__ val,
                             const int32_t *__restrict__ off, int32_t *__restrict__ crow,
                             int32_t *__restrict__ ccol, T *__restrict__ cval)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    int32_t o = off[i];
    for (int32_t k = rp[i] + width; k < rp[i + 1]; k++, o++) {
        crow[o] = (int32_t)i;
        ccol[o] = col[k];
        cval[o] = val[k];
    }
}

/* ------------------------------------------------------ ELL, HLL, HYB */

/* `check`: apply the padding rule (plain ELL; HYB checks its two parts
 * together before filling either). */
template <typename T>
static int fill_ell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int32_t width, struct gpu_ell *e, const char *what,
                    bool check, spmv_error *err)
{
    size_t cb = 0, vb = 0;
    int st;
    e->width = width;
    e->slots = (int64_t)width * m->rows;
    if ((st = gpu_array_bytes(e->slots, 4, &cb, err, what)) || (st = gpu_array_bytes(e->slots, sizeof(T), &vb, err, what)))
        return st;
    if (check && (st = spmv_format_check(&ctx->limits, SPMV_FMT_ELL, m->nnz, e->slots, (int64_t)(cb + vb), err)))
        return st;
    if ((st = gpu_alloc(ctx, m, (void **)&e->col, cb, what, err)) ||
        (st = gpu_alloc(ctx, m, &e->val, vb, what, err)))
        return st;
    if (e->slots == 0)
        return SPMV_OK;
    ell_fill<<<FILL_GRID(m->rows), 0, ctx->stream>>>(m->rows, width, (int64_t)m->rows, m->row_ptr, m->col,
                                                    (const T *)m->val, e->col, (T *)e->val);
    return gpu_check_launch(err, "ell_fill");
}

void gpu_free_ell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, struct gpu_ell *e)
{
    gpu_release_ptr(ctx, m, &e->col);
    gpu_release_ptr(ctx, m, &e->val);
    memset(e, 0, sizeof *e);
}

void gpu_free_hll(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, struct gpu_hll *h)
{
    gpu_release_ptr(ctx, m, &h->slice_off);
    gpu_release_ptr(ctx, m, &h->slice_width);
    gpu_release_ptr(ctx, m, &h->slice_off32);
    gpu_release_ptr(ctx, m, &h->col);
    gpu_release_ptr(ctx, m, &h->val);
    memset(h, 0, sizeof *h);
}

void gpu_free_hyb(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, struct gpu_hyb *h)
{
    gpu_free_ell(ctx, m, &h->ell);
    gpu_release_ptr(ctx, m, &h->row);
    gpu_release_ptr(ctx, m, &h->col);
    gpu_release_ptr(ctx, m, &h->val);
    memset(h, 0, sizeof *h);
}

template <typename T>
static int fill_hll(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int32_t hack, struct gpu_hll *h, spmv_error *err)
{
    int64_t *counts = NULL;
    int64_t ns = ((int64_t)m->rows + hack - 1) / hack;
    size_t cb = 0, vb = 0;
    int st;
    h->hack_size = hack;
    h->nslices = (int32_t)ns;
    if ((st = gpu_alloc(ctx, m, (void **)&h->slice_width, ns * 4, "HLL slice widths", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&h->slice_off, (ns + 1) * 8, "HLL slice offsets", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&counts, (ns + 1) * 8, "HLL slice sizes", err)))
        goto done;
    hll_slice_widths<<<FILL_GRID(ns + 1), 0, ctx->stream>>>(m->rows, hack, (int32_t)ns, m->row_ptr, h->slice_width,
                                                           counts);
    if ((st = gpu_check_launch(err, "hll_slice_widths")))
        goto done;
    if ((st = gpu_cub_run(ctx, m, "HLL offset scan", err, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, counts, h->slice_off, (int)(ns + 1), ctx->stream);
         })))
        goto done;
    if ((st = gpu_copy_to_host(ctx, &h->slots, h->slice_off + ns, 8, "reading the HLL size", err)))
        goto done;
    if ((st = gpu_array_bytes(h->slots, 4, &cb, err, "HLL")) || (st = gpu_array_bytes(h->slots, sizeof(T), &vb, err, "HLL")) ||
        (st = spmv_format_check(&ctx->limits, SPMV_FMT_HLL, m->nnz, h->slots,
                                (int64_t)(cb + vb) + ns * 4 + (ns + 1) * 8, err)) ||
        (st = gpu_alloc(ctx, m, (void **)&h->col, cb, "HLL columns", err)) ||
        (st = gpu_alloc(ctx, m, &h->val, vb, "HLL values", err)))
        goto done;
    if (h->slots > 0) {
        hll_fill<<<FILL_GRID(ns * hack), 0, ctx->stream>>>(m->rows, hack, (int32_t)ns, m->row_ptr, m->col,
                                                          (const T *)m->val, h->slice_width, h->slice_off, h->col,
                                                          (T *)h->val);
        st = gpu_check_launch(err, "hll_fill");
    }
done:
    gpu_release(ctx, m, counts);
    return st;
}

/* HYB's automatic width, as engine/hyb.c: the smallest width holding at
 * least ceil(2 rows / 3) rows whole, i.e. the (ceil(2 rows/3))-th smallest
 * row length. */
static int hyb_width(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int32_t *width, spmv_error *err)
{
    int32_t *len = NULL, *sorted = NULL;
    int64_t need = ((int64_t)m->rows * 2 + 2) / 3;
    int st;
    *width = 0;
    if (need <= 0)
        return SPMV_OK;
    if ((st = gpu_alloc(ctx, m, (void **)&len, (size_t)m->rows * 4, "row lengths", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&sorted, (size_t)m->rows * 4, "row lengths", err)))
        goto done;
    row_lengths<<<FILL_GRID(m->rows), 0, ctx->stream>>>(m->rows, m->row_ptr, len);
    if ((st = gpu_check_launch(err, "row_lengths")))
        goto done;
    if ((st = gpu_cub_run(ctx, m, "row length sort", err, [&](void *t, size_t &b) {
             return cub::DeviceRadixSort::SortKeys(t, b, len, sorted, (int)m->rows, 0, 32, ctx->stream);
         })))
        goto done;
    st = gpu_copy_to_host(ctx, width, sorted + need - 1, 4, "reading the HYB width", err);
done:
    gpu_release_each(ctx, m, {len, sorted});
    return st;
}

/* The HYB of ELL width `want` (0: the automatic width) into h. */
template <typename T>
static int fill_hyb(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int32_t want, struct gpu_hyb *h, spmv_error *err)
{
    int32_t *cnt = NULL, *off = NULL, width = want < m->max_row ? want : m->max_row, total = 0;
    int64_t n1 = (int64_t)m->rows + 1;
    int st;
    if (want == 0 && (st = hyb_width(ctx, m, &width, err)))
        goto done;
    if ((st = gpu_alloc(ctx, m, (void **)&cnt, n1 * 4, "HYB counts", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&off, n1 * 4, "HYB offsets", err)))
        goto done;
    hyb_counts<<<FILL_GRID(n1), 0, ctx->stream>>>(m->rows, width, m->row_ptr, cnt);
    if ((st = gpu_check_launch(err, "hyb_counts")))
        goto done;
    if ((st = gpu_cub_run(ctx, m, "HYB offset scan", err, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, cnt, off, (int)n1, ctx->stream);
         })))
        goto done;
    if ((st = gpu_copy_to_host(ctx, &total, off + m->rows, 4, "reading the HYB COO size", err)))
        goto done;
    /* the padding rule on both parts, before either is allocated */
    if ((st = spmv_format_check(&ctx->limits, SPMV_FMT_HYB, m->nnz, (int64_t)width * m->rows + total,
                                (int64_t)width * m->rows * (int64_t)(4 + sizeof(T)) + (int64_t)total * (8 + sizeof(T)),
                                err)) ||
        (st = fill_ell<T>(ctx, m, width, &h->ell, "HYB ELL part", false, err)))
        goto done;
    h->coo_nnz = total;
    if ((st = gpu_alloc(ctx, m, (void **)&h->row, (size_t)total * 4, "HYB COO rows", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&h->col, (size_t)total * 4, "HYB COO columns", err)) ||
        (st = gpu_alloc(ctx, m, &h->val, (size_t)total * sizeof(T), "HYB COO values", err)))
        goto done;
    if (total > 0 && m->rows > 0) {
        hyb_fill_coo<<<FILL_GRID(m->rows), 0, ctx->stream>>>(m->rows, width, m->row_ptr, m->col, (const T *)m->val,
                                                            off, h->row, h->col, (T *)h->val);
        st = gpu_check_launch(err, "hyb_fill_coo");
    }
    h->built = st == SPMV_OK;
done:
    gpu_release_each(ctx, m, {cnt, off});
    return st;
}

static int build_coo_rows(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    int st = spmv_format_check(&ctx->limits, SPMV_FMT_COO, m->nnz, m->nnz, m->nnz * 4, err);
    if (!st)
        st = gpu_alloc(ctx, m, (void **)&m->coo_row, (size_t)m->nnz * 4, "COO rows", err);
    if (st || m->rows == 0 || m->nnz == 0)
        return st;
    rows_from_csr<<<FILL_GRID(m->rows), 0, ctx->stream>>>(m->rows, m->row_ptr, m->coo_row);
    return gpu_check_launch(err, "rows_from_csr");
}

int gpu_sync_stream(spmv_gpu_ctx *ctx, spmv_error *err, const char *what)
{
    cudaError_t e = cudaStreamSynchronize(ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, what);
}

int gpu_ensure_format(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_format f, spmv_error *err)
{
    int st = SPMV_OK;
    if (m->formats & f) {
        gpu_touch(ctx, m, f);
        return SPMV_OK;
    }
    if (!spmv_format_takes_wide(f) && (st = gpu_need_narrow(m, spmv_format_name(f), err)))
        return st;
    bool f64 = m->dtype == SPMV_FLOAT64;
    gpu_cat_scope scope(m, gpu_cat_of(f));
    /* the conversion's time, what its payback repays: from a quiet stream
     * (an upload's CSR may still be converting) to the sync below */
    if (f != SPMV_FMT_CSR && f != SPMV_FMT_HLL && (st = gpu_sync_stream(ctx, err, "before a build")))
        return st;
    double t0 = spmv_now_ms();
    switch (f) {
    case SPMV_FMT_CSR:
        return SPMV_OK;
    case SPMV_FMT_COO:
        st = build_coo_rows(ctx, m, err);
        break;
    case SPMV_FMT_ELL:
        st = f64 ? fill_ell<double>(ctx, m, m->max_row, &m->ell, "ELL", true, err)
                 : fill_ell<float>(ctx, m, m->max_row, &m->ell, "ELL", true, err);
        if (st)
            gpu_free_ell(ctx, m, &m->ell);
        break;
    case SPMV_FMT_HLL: {
        struct gpu_hll *h = NULL;
        return gpu_get_hll(ctx, m, m->hack_size, &h, err);
    }
    case SPMV_FMT_HYB:
        st = f64 ? fill_hyb<double>(ctx, m, 0, &m->hyb, err) : fill_hyb<float>(ctx, m, 0, &m->hyb, err);
        if (st)
            gpu_free_hyb(ctx, m, &m->hyb);
        break;
    case SPMV_FMT_PCSR:
        if ((st = gpu_build_pcsr(ctx, m, err)))
            gpu_free_pcsr(ctx, m);
        break;
    case SPMV_FMT_PSELL:
        if ((st = gpu_build_psell(ctx, m, err)))
            gpu_free_psell(ctx, m);
        break;
    case SPMV_FMT_SPSELL:
        if ((st = gpu_build_spsell(ctx, m, err)))
            gpu_free_spsell(ctx, m);
        break;
    case SPMV_FMT_PBSR:
        if ((st = gpu_build_pbsr(ctx, m, err)))
            gpu_free_pbsr(ctx, m);
        break;
    default:
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "unknown format %u", (unsigned)f);
    }
    if (!st)
        st = gpu_sync_stream(ctx, err, spmv_format_name(f));
    if (!st) {
        m->slots[gpu_cat_of(f)] = f == SPMV_FMT_ELL     ? m->ell.slots
                                  : f == SPMV_FMT_HYB   ? m->hyb.ell.slots + m->hyb.coo_nnz
                                  : f == SPMV_FMT_PSELL ? m->psell.slots
                                  : f == SPMV_FMT_SPSELL ? m->spsell.slots
                                                        : m->nnz;
        m->formats |= f;
        m->convert_ms[gpu_cat_of(f)] = fmax(spmv_now_ms() - t0, 1e-6); /* 0 means not timed */
        gpu_touch(ctx, m, f);
    }
    return st;
}

int gpu_get_hll(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int32_t hack, struct gpu_hll **out, spmv_error *err)
{
    int st;
    if ((st = gpu_need_narrow(m, "HLL", err)))
        return st;
    if (hack < 1 || hack > 1024)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "hack_size %d out of range 1..1024", hack);
    if (m->hll.hack_size == hack || m->hll_alt.hack_size == hack) {
        *out = m->hll.hack_size == hack ? &m->hll : &m->hll_alt;
        gpu_touch(ctx, m, SPMV_FMT_HLL);
        return SPMV_OK;
    }
    gpu_cat_scope scope(m, gpu_cat_of(SPMV_FMT_HLL));
    /* The upload's HLL slot if it is empty and this is its hack size; else
     * the one cached other size, replaced. */
    struct gpu_hll *h = hack == m->hack_size ? &m->hll : &m->hll_alt;
    if ((st = gpu_sync_stream(ctx, err, "HLL rebuild")))
        return st;
    double t0 = spmv_now_ms();
    gpu_free_hll(ctx, m, h);
    st = m->dtype == SPMV_FLOAT64 ? fill_hll<double>(ctx, m, hack, h, err) : fill_hll<float>(ctx, m, hack, h, err);
    if (!st)
        st = gpu_sync_stream(ctx, err, "HLL build");
    if (st) {
        gpu_free_hll(ctx, m, h);
        return st;
    }
    if (h == &m->hll) { /* the other hack size's copy counts under HLL's bytes, not as held */
        m->slots[gpu_cat_of(SPMV_FMT_HLL)] = h->slots;
        m->formats |= SPMV_FMT_HLL;
        m->convert_ms[gpu_cat_of(SPMV_FMT_HLL)] = fmax(spmv_now_ms() - t0, 1e-6);
    }
    gpu_touch(ctx, m, SPMV_FMT_HLL);
    *out = h;
    return SPMV_OK;
}

int gpu_get_hyb(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int32_t width, struct gpu_hyb **out, spmv_error *err)
{
    int st;
    if (width < 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "HYB width %d is negative", width);
    if (width == 0 || ((m->formats & SPMV_FMT_HYB) && m->hyb.ell.width == (width < m->max_row ? width : m->max_row))) {
        if ((st = gpu_ensure_format(ctx, m, SPMV_FMT_HYB, err)))
            return st;
        *out = &m->hyb;
        return SPMV_OK;
    }
    if ((st = gpu_need_narrow(m, "HYB", err)))
        return st;
    if (width > m->max_row)
        width = m->max_row;
    struct gpu_hyb *h = &m->hyb_alt;
    if (!h->built || h->ell.width != width) {
        /* another width: it replaces the cached one, and counts under
         * HYB's bytes, not as the format held */
        gpu_cat_scope scope(m, gpu_cat_of(SPMV_FMT_HYB));
        if ((st = gpu_sync_stream(ctx, err, "HYB rebuild")))
            return st;
        gpu_free_hyb(ctx, m, h);
        st = m->dtype == SPMV_FLOAT64 ? fill_hyb<double>(ctx, m, width, h, err)
                                      : fill_hyb<float>(ctx, m, width, h, err);
        if (!st)
            st = gpu_sync_stream(ctx, err, "HYB build");
        if (st) {
            gpu_free_hyb(ctx, m, h);
            return st;
        }
    }
    gpu_touch(ctx, m, SPMV_FMT_HYB);
    *out = h;
    return SPMV_OK;
}
