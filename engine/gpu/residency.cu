/* residency.cu — what a device matrix holds, and letting go of it.
 *
 * The byte counts of every format (what GB/s and the descriptor's
 * device_memory report), the least-recently-used eviction of formats that
 * are neither CSR nor pinned when a build needs room, the padding rule the
 * worker sets before each task, the context's list of the matrices it
 * holds, and freeing a matrix (gpu_matrix_destroy: every tracked
 * allocation, whatever state a failed upload left it in).
 */
#include <stdlib.h>
#include <string.h>

#include "gpu.cuh"

/* --------------------------------------------------------- byte counts */

size_t gpu_hll_bytes(const spmv_gpu_matrix *m, const struct gpu_hll *h)
{
    if (!h->hack_size)
        return 0;
    return (size_t)h->nslices * 4 + ((size_t)h->nslices + 1) * 8 + (size_t)h->slots * (4 + gpu_vsize(m));
}

size_t gpu_hyb_bytes(const spmv_gpu_matrix *m, const struct gpu_hyb *h)
{
    size_t vs = gpu_vsize(m);
    return h->built ? (size_t)h->ell.slots * (4 + vs) + (size_t)h->coo_nnz * (8 + vs) : 0;
}

size_t gpu_format_bytes(const spmv_gpu_matrix *m, spmv_format f)
{
    size_t vs = gpu_vsize(m), nnz = (size_t)m->nnz;
    if (!(m->formats & f))
        return 0;
    switch (f) {
    case SPMV_FMT_CSR: return ((size_t)m->rows + 1) * (m->row_ptr64 ? 8 : 4) + nnz * (4 + vs);
    case SPMV_FMT_COO: return nnz * (8 + vs);
    case SPMV_FMT_ELL: return (size_t)m->ell.slots * (4 + vs);
    case SPMV_FMT_HLL: return gpu_hll_bytes(m, &m->hll);
    case SPMV_FMT_HYB: return gpu_hyb_bytes(m, &m->hyb);
    case SPMV_FMT_PCSR: return gpu_pcsr_bytes(m);
    case SPMV_FMT_PSELL: return gpu_psell_bytes(m);
    case SPMV_FMT_SPSELL: return gpu_spsell_bytes(m);
    case SPMV_FMT_PBSR: return gpu_pbsr_bytes(m);
    default: return 0;
    }
}

double gpu_format_padding(const spmv_gpu_matrix *m, spmv_format f)
{
    int64_t slots = m->slots[gpu_cat_of(f)];
    if (!(m->formats & f) || m->nnz == 0)
        return 1.0;
    bool padded = f == SPMV_FMT_ELL || f == SPMV_FMT_HLL || f == SPMV_FMT_HYB || f == SPMV_FMT_PSELL ||
                  f == SPMV_FMT_SPSELL;
    return padded ? (double)slots / (double)m->nnz
               : 1.0;
}

/* Read by any thread (the descriptor, /metrics) while the owner's thread
 * may be changing them: every field read here is atomic. */
extern "C" size_t spmv_gpu_matrix_bytes(const spmv_gpu_matrix *m)
{
    size_t b = 0;
    if (m)
        for (int c = 0; c < GPU_CATS; c++)
            b += m->cat_bytes[c];
    return b;
}

extern "C" void spmv_gpu_matrix_usage(const spmv_gpu_matrix *m, spmv_gpu_usage *u)
{
    memset(u, 0, sizeof *u);
    if (!m)
        return;
    u->formats = m->formats;
    for (unsigned i = 0; i < SPMV_FORMAT_COUNT; i++) {
        u->bytes[i] = m->cat_bytes[i];
        u->padding[i] = gpu_format_padding(m, (spmv_format)(1u << i));
        u->convert_ms[i] = m->convert_ms[i];
    }
    u->transpose = m->cat_bytes[GPU_CAT_TRANSPOSE];
    u->other = m->cat_bytes[GPU_CAT_OTHER];
    u->total = spmv_gpu_matrix_bytes(m);
}

/* ------------------------------------------------------------- eviction */

void gpu_drop_format(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_format f)
{
    if (f == SPMV_FMT_CSR)
        return;
    cudaStreamSynchronize(ctx->stream); /* nothing queued may still read it */
    gpu_sparse_cache_drop(ctx, m, f);
    switch (f) {
    case SPMV_FMT_COO:
        gpu_release_ptr(ctx, m, &m->coo_row);
        break;
    case SPMV_FMT_ELL:
        gpu_free_ell(ctx, m, &m->ell);
        break;
    case SPMV_FMT_HLL:
        gpu_free_hll(ctx, m, &m->hll);
        gpu_free_hll(ctx, m, &m->hll_alt);
        break;
    case SPMV_FMT_HYB:
        gpu_free_hyb(ctx, m, &m->hyb);
        gpu_free_hyb(ctx, m, &m->hyb_alt);
        break;
    case SPMV_FMT_PCSR:
        gpu_free_pcsr(ctx, m);
        break;
    case SPMV_FMT_PSELL:
        gpu_free_psell(ctx, m);
        break;
    case SPMV_FMT_SPSELL:
        gpu_free_spsell(ctx, m);
        break;
    case SPMV_FMT_PBSR:
        gpu_free_pbsr(ctx, m);
        break;
    default:
        return;
    }
    m->slots[gpu_cat_of(f)] = 0;
    m->formats &= ~(unsigned)f;
}

/* Whether format f of m may be evicted now: derived, held (its bytes),
 * not pinned, not read by the running call. */
static bool evictable(const spmv_gpu_matrix *m, spmv_format f)
{
    return f != SPMV_FMT_CSR && !(m->pinned & f) && !(m->busy & f) && m->cat_bytes[gpu_cat_of(f)] > 0;
}

bool gpu_evict(spmv_gpu_ctx *ctx)
{
    /* one format per call: the caller checks the room again and calls again */
    spmv_gpu_matrix *victim = NULL;
    spmv_format vf = SPMV_FMT_CSR;
    uint64_t oldest = UINT64_MAX;
    for (spmv_gpu_matrix *m : ctx->mats)
        for (unsigned i = 0; i < SPMV_FORMAT_COUNT; i++) {
            spmv_format f = (spmv_format)(1u << i);
            if (evictable(m, f) && m->last_use[i] < oldest) {
                oldest = m->last_use[i];
                victim = m;
                vf = f;
            }
        }
    if (!victim)
        return false;
    gpu_drop_format(ctx, victim, vf);
    ctx->evictions++;
    return true;
}

extern "C" void spmv_gpu_matrix_trim(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, unsigned keep)
{
    if (!ctx || !m)
        return;
    cudaSetDevice(ctx->device);
    for (unsigned i = 0; i < SPMV_FORMAT_COUNT; i++) {
        spmv_format f = (spmv_format)(1u << i);
        if (!(keep & f) && evictable(m, f))
            gpu_drop_format(ctx, m, f);
    }
}

extern "C" int spmv_gpu_ctx_set_limits(spmv_gpu_ctx *ctx, const spmv_format_limits *lim)
{
    if (!ctx || !lim || !(lim->max_padding >= 0) || lim->max_format_bytes < 0)
        return SPMV_ERR_INVALID;
    ctx->limits = *lim;
    return SPMV_OK;
}

static void ctx_forget(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m)
{
    for (size_t i = 0; i < ctx->mats.size(); i++)
        if (ctx->mats[i] == m) {
            ctx->mats[i] = ctx->mats.back();
            ctx->mats.pop_back();
            return;
        }
}

int gpu_ctx_adopt(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    try {
        ctx->mats.push_back(m);
    } catch (...) {
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of host memory listing a resident matrix");
    }
    return SPMV_OK;
}

/* ----------------------------------------------------------------- free */

void gpu_matrix_destroy(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m)
{
    if (!m)
        return;
    cudaSetDevice(ctx->device);
    cudaStreamSynchronize(ctx->stream);
    ctx_forget(ctx, m);
    if (m->tex_x)
        cudaDestroyTextureObject(m->tex_x);
    if (m->transpose)
        gpu_matrix_destroy(ctx, m->transpose);
    gpu_sparse_cache_free(ctx, m);
    gpu_adaptive_free(ctx, m);
    while (!m->allocs.empty())
        gpu_release(ctx, m, m->allocs.back().ptr);
    cudaGetLastError();
    delete m;
}

extern "C" void spmv_gpu_matrix_free(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m)
{
    if (ctx)
        gpu_matrix_destroy(ctx, m);
}
