/* matrix.c — a matrix as the host holds it: CSR plus the formats asked for.
 *
 * The daemon's store and the CPU kernels work on spmv_matrix: one dtype,
 * CSR always (every other format is built from it), the rest on demand,
 * each under the padding rule (engine/limits.c) kept in m->limits. A
 * format the rule refuses is skipped rather than failing the build: one
 * long row should not make a matrix unusable, only the kernels of that
 * format (which then build nothing and say why at run time).
 *
 * Every format array is allocated here (spmv_array_alloc). A large matrix
 * streams through the TLB at 4 KiB a page: an SpMV over a matrix past the
 * last-level cache measured 6-14% faster with its arrays on 2 MiB
 * transparent huge pages, which Debian's default THP mode ("madvise")
 * grants only to memory that asks, so large arrays ask.
 */
#include <math.h>
#include <string.h>
#include <sys/mman.h>

#include "formats.h"
#include "spmv.h"

#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN (2 * HUGE_PAGE) /* below this the rounding would waste too much */

int spmv_check_shape(int32_t rows, int32_t cols, int64_t nnz, spmv_error *err)
{
    if (rows < 0 || cols < 0 || nnz < 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                              "negative shape: %d rows, %d columns, %lld non-zeros",
                              rows, cols, (long long)nnz);
    if (nnz > INT32_MAX)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                              "%lld non-zeros exceed the limit of %d (32-bit indices)",
                              (long long)nnz, INT32_MAX);
    return SPMV_OK;
}

void *spmv_array_alloc(int64_t n, size_t size, int *status)
{
    if (n < 0 || (uint64_t)n > (SIZE_MAX - HUGE_PAGE) / size) {
        *status = SPMV_ERR_LIMIT;
        return NULL;
    }
    size_t bytes = (size_t)n * size;
    void *p = NULL;
    if (bytes >= HUGE_MIN) {
        size_t rounded = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        if (posix_memalign(&p, HUGE_PAGE, rounded) == 0)
            (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: fine if refused */
        else
            p = NULL;
    } else {
        p = malloc(bytes ? bytes : 1);
    }
    if (!p)
        *status = SPMV_ERR_NOMEM;
    return p;
}

void spmv_matrix_free(spmv_matrix *m)
{
    if (!m)
        return;
    spmv_csr_free(&m->csr);
    spmv_coo_free(&m->coo);
    spmv_ell_free(&m->ell);
    spmv_hll_free(&m->hll);
    spmv_hyb_free(&m->hyb);
    spmv_pcsr_free(&m->pcsr);
    spmv_psell_free(&m->psell);
    spmv_spsell_free(&m->spsell);
    spmv_pbsr_free(&m->pbsr);
    memset(m, 0, sizeof *m);
}

int spmv_matrix_add_format(spmv_matrix *m, spmv_format f, spmv_error *err)
{
    int64_t slots = 0, bytes = 0;
    int st = SPMV_OK;
    if (m->formats & f)
        return SPMV_OK;
    if (f == SPMV_FMT_CSR)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "matrix has no CSR to build from");
    if (!spmv_format_takes_wide(f) && (st = spmv_csr_need_narrow(&m->csr, spmv_format_name(f), err)))
        return st;
    /* The packed conversions plan and ask the rule themselves (their plan
     * counts the distinct values, which they then keep): not twice here. */
    bool packed = (f & SPMV_FMT_PACKED) != 0;
    if (!packed && ((st = spmv_format_plan(&m->csr, f, m->hack_size, &slots, &bytes, err)) ||
                    (st = spmv_format_check(&m->limits, f, m->nnz, slots, bytes, err))))
        return st;
    double t0 = spmv_now_ms(); /* the conversion's time: what its payback repays (engine/payback.c) */
    switch (f) {
    case SPMV_FMT_COO:
        st = spmv_csr_to_coo(&m->csr, &m->coo, err);
        break;
    case SPMV_FMT_ELL:
        st = spmv_csr_to_ell(&m->csr, 0, &m->ell, err);
        break;
    case SPMV_FMT_HLL:
        st = spmv_csr_to_hll(&m->csr, m->hack_size, &m->hll, err);
        break;
    case SPMV_FMT_HYB:
        st = spmv_csr_to_hyb(&m->csr, -1, &m->hyb, err);
        break;
    case SPMV_FMT_PCSR:
        st = spmv_csr_to_pcsr(&m->csr, &m->limits, &m->pcsr, err);
        break;
    case SPMV_FMT_PSELL:
        st = spmv_csr_to_psell(&m->csr, &m->limits, &m->psell, err);
        break;
    case SPMV_FMT_SPSELL:
        st = spmv_csr_to_spsell(&m->csr, &m->limits, &m->spsell, err);
        break;
    case SPMV_FMT_PBSR:
        st = spmv_csr_to_pbsr(&m->csr, &m->limits, &m->pbsr, err);
        break;
    default:
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "unknown format bit 0x%x", (unsigned)f);
    }
    if (st == SPMV_OK) {
        m->formats |= f;
        m->convert_ms[spmv_format_index(f)] = fmax(spmv_now_ms() - t0, 1e-6); /* 0 means not timed */
    }
    return st;
}

void spmv_matrix_drop_format(spmv_matrix *m, spmv_format f)
{
    if (f == SPMV_FMT_CSR || !(m->formats & f))
        return;
    switch (f) {
    case SPMV_FMT_COO: spmv_coo_free(&m->coo); break;
    case SPMV_FMT_ELL: spmv_ell_free(&m->ell); break;
    case SPMV_FMT_HLL: spmv_hll_free(&m->hll); break;
    case SPMV_FMT_HYB: spmv_hyb_free(&m->hyb); break;
    case SPMV_FMT_PCSR: spmv_pcsr_free(&m->pcsr); break;
    case SPMV_FMT_PSELL: spmv_psell_free(&m->psell); break;
    case SPMV_FMT_SPSELL: spmv_spsell_free(&m->spsell); break;
    case SPMV_FMT_PBSR: spmv_pbsr_free(&m->pbsr); break;
    default: return;
    }
    m->formats &= ~(unsigned)f;
}

size_t spmv_matrix_format_bytes(const spmv_matrix *m, unsigned mask)
{
    size_t b = 0;
    mask &= m->formats;
    if (mask & SPMV_FMT_CSR)
        b += spmv_csr_info(&m->csr).bytes;
    if (mask & SPMV_FMT_COO)
        b += spmv_coo_info(&m->coo).bytes;
    if (mask & SPMV_FMT_ELL)
        b += spmv_ell_info(&m->ell).bytes;
    if (mask & SPMV_FMT_HLL)
        b += spmv_hll_info(&m->hll).bytes;
    if (mask & SPMV_FMT_HYB)
        b += spmv_hyb_info(&m->hyb).bytes;
    if (mask & SPMV_FMT_PCSR)
        b += spmv_pcsr_info(&m->pcsr).bytes; /* its row_ptr is the CSR's, counted there */
    if (mask & SPMV_FMT_PSELL)
        b += spmv_psell_info(&m->psell).bytes;
    if (mask & SPMV_FMT_SPSELL)
        b += spmv_spsell_info(&m->spsell).bytes;
    if (mask & SPMV_FMT_PBSR)
        b += spmv_pbsr_info(&m->pbsr).bytes;
    return b;
}

int spmv_matrix_build(const spmv_coo *coo, spmv_dtype dtype, unsigned formats,
                      int32_t hack_size, const spmv_format_limits *lim,
                      spmv_matrix *out, spmv_error *err)
{
    int st;
    memset(out, 0, sizeof *out);
    if (hack_size == 0)
        hack_size = SPMV_HACK_SIZE_DEFAULT;
    if (hack_size < 1)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "hack_size %d: must be at least 1", hack_size);
    if (formats & ~(unsigned)SPMV_FMT_ALL)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "unknown format bits 0x%x", formats);
    if ((st = spmv_coo_to_csr(coo, dtype, &out->csr, err)))
        return st;
    out->rows = out->csr.rows;
    out->cols = out->csr.cols;
    out->nnz = out->csr.nnz;
    out->dtype = dtype;
    out->hack_size = hack_size;
    out->formats = SPMV_FMT_CSR;
    if (lim)
        out->limits = *lim;
    for (unsigned bit = 1; bit <= SPMV_FMT_LAST; bit <<= 1) {
        if (!(formats & bit) || bit == SPMV_FMT_CSR)
            continue;
        st = spmv_matrix_add_format(out, (spmv_format)bit, err);
        /* Past the padding rule, PBSR without blocks or SPSELL of a matrix
         * not symmetric: skipped, not an error, the bit stays clear. */
        if (st == SPMV_ERR_LIMIT || st == SPMV_ERR_UNSUPPORTED ||
            (st == SPMV_ERR_UNAVAILABLE && bit == SPMV_FMT_SPSELL))
            continue;
        if (st)
            goto fail;
    }
    return SPMV_OK;
fail:
    spmv_matrix_free(out);
    return st;
}
