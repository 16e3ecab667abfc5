/* stats.c — timing statistics and the byte counts behind GB/s.
 *
 * Kernels are timed per run (spmv_now_ms around each call on the CPU, CUDA
 * events on the GPU); this file turns the list of times into the figures
 * the API reports. Throughput uses the median, which one preempted run
 * cannot move, unless the caller asks for the mean (spmv_stats_use: the
 * rates are kept as one run's flops and bytes, so either time divides
 * them). The byte count per format is the minimum traffic of one
 * SpMV (every array of the format once, x once, y once), the convention of
 * the SpMV literature; docs/kernels.md writes the formulas down and they
 * must stay in step with spmv_kernel_bytes below.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "formats.h"
#include "spmv.h"

double spmv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void spmv_stats_compute(double *times_ms, int32_t runs, int32_t warmup,
                        int64_t flops, int64_t bytes, spmv_stats *out)
{
    *out = (spmv_stats){.runs = runs > 0 ? runs : 0, .warmup = warmup};
    if (runs <= 0 || !times_ms)
        return;
    qsort(times_ms, (size_t)runs, sizeof *times_ms, cmp_double);
    double sum = 0;
    for (int32_t i = 0; i < runs; i++)
        sum += times_ms[i];
    double mean = sum / runs, ss = 0;
    for (int32_t i = 0; i < runs; i++)
        ss += (times_ms[i] - mean) * (times_ms[i] - mean);
    out->mean_ms = mean;
    out->stddev_ms = runs > 1 ? sqrt(ss / (runs - 1)) : 0.0;
    out->min_ms = times_ms[0];
    out->max_ms = times_ms[runs - 1];
    out->median_ms = runs % 2 ? times_ms[runs / 2] : 0.5 * (times_ms[runs / 2 - 1] + times_ms[runs / 2]);
    out->flops = flops;
    out->bytes = bytes;
    spmv_stats_use(out, SPMV_STAT_MEDIAN);
}

double spmv_stats_ms(const spmv_stats *s, spmv_stat which)
{
    return which == SPMV_STAT_MEAN ? s->mean_ms : s->median_ms;
}

void spmv_stats_use(spmv_stats *s, spmv_stat which)
{
    double ms = spmv_stats_ms(s, which);
    s->stat = which;
    s->gflops = ms > 0 ? (double)s->flops / (ms * 1e6) : 0.0;
    s->gbps = ms > 0 ? (double)s->bytes / (ms * 1e6) : 0.0;
}

const char *spmv_stat_name(spmv_stat s)
{
    return s == SPMV_STAT_MEAN ? "mean" : "median";
}

int spmv_stat_parse(const char *name, spmv_stat *out)
{
    if (name && strcmp(name, "median") == 0)
        *out = SPMV_STAT_MEDIAN;
    else if (name && strcmp(name, "mean") == 0)
        *out = SPMV_STAT_MEAN;
    else
        return SPMV_ERR_INVALID;
    return SPMV_OK;
}

/* ----------------------------------------------------------- byte counts */

static int64_t csr_bytes(const spmv_matrix *m, int64_t vs)
{
    return ((int64_t)m->rows + 1) * (spmv_csr_wide(&m->csr) ? 8 : 4) + m->nnz * (4 + vs);
}

static int64_t ell_bytes(int64_t width, int64_t rows, int64_t vs)
{
    return width * rows * (4 + vs);
}

/* HLL slots of m's CSR in slices of hack_size (the HLL that the kernel
 * would build), plus the offset and width tables. */
static int64_t hll_bytes(const spmv_matrix *m, int32_t hack_size, int64_t vs)
{
    if (hack_size < 1)
        hack_size = SPMV_HACK_SIZE_DEFAULT;
    int64_t slots = 0, nslices = 0;
    if ((m->formats & SPMV_FMT_HLL) && m->hll.hack_size == hack_size) {
        slots = m->hll.slice_off[m->hll.nslices];
        nslices = m->hll.nslices;
    } else {
        for (int64_t r0 = 0; r0 < m->rows; r0 += hack_size, nslices++) {
            int32_t w = 0;
            for (int64_t i = r0; i < m->rows && i < r0 + hack_size; i++)
                if (m->csr.row_ptr[i + 1] - m->csr.row_ptr[i] > w)
                    w = m->csr.row_ptr[i + 1] - m->csr.row_ptr[i];
            slots += (int64_t)w * hack_size;
        }
    }
    return slots * (4 + vs) + (nslices + 1) * 8 + nslices * 4;
}

/* HYB's parts as held, or as spmv_csr_to_hyb's automatic width builds them. */
static int64_t hyb_bytes(const spmv_matrix *m, int64_t vs)
{
    if (m->formats & SPMV_FMT_HYB)
        return ell_bytes(m->hyb.ell.width, m->rows, vs) + m->hyb.coo.nnz * (8 + vs);
    spmv_hyb h;
    if (spmv_csr_to_hyb(&m->csr, -1, &h, NULL) != SPMV_OK)
        return 0;
    int64_t b = ell_bytes(h.ell.width, m->rows, vs) + h.coo.nnz * (8 + vs);
    spmv_hyb_free(&h);
    return b;
}

/* A packed format's own bytes as held, or as its conversion would hold
 * them (spmv_format_plan computes them the way the conversion does,
 * without building it). */
static int64_t packed_bytes(const spmv_matrix *m, spmv_format f)
{
    int64_t slots = 0, bytes = 0;
    if (f == SPMV_FMT_PCSR && (m->formats & f))
        return (int64_t)spmv_pcsr_info(&m->pcsr).bytes;
    if (f == SPMV_FMT_PSELL && (m->formats & f))
        return (int64_t)spmv_psell_info(&m->psell).bytes;
    if (f == SPMV_FMT_SPSELL && (m->formats & f))
        return (int64_t)spmv_spsell_info(&m->spsell).bytes;
    if (f == SPMV_FMT_PBSR && (m->formats & f))
        return (int64_t)spmv_pbsr_info(&m->pbsr).bytes;
    return spmv_format_plan(&m->csr, f, SPMV_PSELL_C, &slots, &bytes, NULL) == SPMV_OK ? bytes : 0;
}

static int64_t format_bytes(spmv_format f, const spmv_matrix *m, int32_t hack_size)
{
    int64_t vs = (int64_t)spmv_dtype_size(m->dtype);
    if (spmv_csr_wide(&m->csr) && !spmv_format_takes_wide(f)) /* never built from a wide CSR */
        return 0;
    switch (f) {
    case SPMV_FMT_CSR: return csr_bytes(m, vs);
    case SPMV_FMT_COO: return m->nnz * (8 + vs);
    case SPMV_FMT_ELL:
        return ell_bytes((m->formats & SPMV_FMT_ELL) ? m->ell.width : spmv_csr_max_row(&m->csr), m->rows, vs);
    case SPMV_FMT_HLL: return hll_bytes(m, hack_size, vs);
    case SPMV_FMT_HYB: return hyb_bytes(m, vs);
    case SPMV_FMT_PCSR: return ((int64_t)m->rows + 1) * 4 + packed_bytes(m, f); /* it reads the CSR's row_ptr */
    case SPMV_FMT_PSELL:
    case SPMV_FMT_SPSELL: return packed_bytes(m, f);
    case SPMV_FMT_PBSR: return packed_bytes(m, f); /* 0 for a matrix without blocks: its kernels refuse it */
    }
    return 0;
}

int64_t spmv_kernel_bytes(const spmv_kernel *k, const spmv_matrix *m)
{
    if (!k || !m)
        return 0;
    int64_t vs = (int64_t)spmv_dtype_size(m->dtype);
    int32_t hack = (m->formats & SPMV_FMT_HLL) ? m->hll.hack_size : m->hack_size;
    return format_bytes(k->format, m, hack) + ((int64_t)m->cols + m->rows) * vs;
}

double spmv_max_rel_err(spmv_dtype dtype, const void *y, const void *ref, int32_t n)
{
    double ref_inf = 0, diff = 0;
    for (int32_t i = 0; i < n; i++) {
        double a = spmv_val_get(y, dtype, i), b = spmv_val_get(ref, dtype, i);
        if (!isfinite(b)) {
            /* a NaN or an infinity in the reference (A or x holds one): matched
             * only by the same non-finite value */
            bool same = isnan(b) ? isnan(a) : a == b;
            if (!same)
                return INFINITY;
            continue;
        }
        if (!isfinite(a))
            return INFINITY;
        if (fabs(b) > ref_inf)
            ref_inf = fabs(b);
        if (fabs(a - b) > diff)
            diff = fabs(a - b);
    }
    return diff / fmax(ref_inf, DBL_MIN);
}
