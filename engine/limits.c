/* limits.c — the one padding rule every derived format obeys.
 *
 * A padded format's size is decided by the matrix's shape, not by its
 * non-zeros: one row as long as the matrix is wide makes an ELL of rows x
 * cols slots, a power-law matrix's HLL can pad ten times. Every place that
 * builds a format (the host's spmv_matrix_add_format, the CPU kernels'
 * scratch copies, the device conversions of engine/gpu/convert.cu, at
 * upload, on first use, while tuning and in the benches) asks
 * spmv_format_check first, with the slots it is about to allocate, so the
 * rule is the same everywhere and nothing is allocated past it. The host
 * side plans from the CSR's row lengths (spmv_format_plan; the packed
 * formats' bytes also need their columns and distinct values, counted in
 * engine/packed.c); the device computes the same counts on the device
 * before its big allocations.
 *
 * A ratio alone refuses too much on small matrices: one row of 200 in an
 * 822-row matrix of 4726 non-zeros (bp_1200) makes an ELL of 2 MB, padding
 * 35. So a format past the ratio is still built when its bytes stay within
 * padding_allowance_bytes (the daemon's default 256 MiB) and, for a host
 * format, within half the host's available memory (MemAvailable); a
 * device's conversions check the device's free memory themselves. The
 * 26 GB ELL of a band with one dense row stays refused by both.
 */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "formats.h"
#include "spmv.h"

spmv_format_limits spmv_format_limits_default(void)
{
    spmv_format_limits l = {SPMV_MAX_PADDING_DEFAULT, 0, 0, true};
    return l;
}

/* The host's available memory in bytes (MemAvailable; the free pages where
 * /proc is not mounted), -1 when neither says. */
static int64_t host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (kb >= 0)
        return (int64_t)kb * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (int64_t)pages * size : -1;
}

/* Past the ratio: built if within padding_allowance_bytes and, for a host
 * format, half the host's available memory. */
static int allowance_check(const spmv_format_limits *lim, spmv_format f, int64_t nnz, int64_t slots, int64_t bytes,
                           double allowed, spmv_error *err)
{
    double ratio = nnz > 0 ? (double)slots / (double)nnz : 0.0;
    if (bytes > lim->padding_allowance_bytes)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                              "the %s format of this matrix would hold %lld slots for %lld non-zeros (padding "
                              "%.2f, %lld bytes); max_padding %.2f allows %.0f slots and padding_allowance_bytes "
                              "%lld bytes: not built (use a CSR kernel, or raise max_padding or "
                              "padding_allowance_bytes)",
                              spmv_format_name(f), (long long)slots, (long long)nnz, ratio, (long long)bytes,
                              lim->max_padding, floor(allowed), (long long)lim->padding_allowance_bytes);
    int64_t avail = lim->host_memory ? host_available() : -1;
    if (avail >= 0 && bytes > avail / 2)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                              "the %s format of this matrix would hold %lld bytes (%lld slots for %lld non-zeros, "
                              "past max_padding %.2f): within padding_allowance_bytes but over half the host's "
                              "available memory (%lld bytes): not built",
                              spmv_format_name(f), (long long)bytes, (long long)slots, (long long)nnz,
                              lim->max_padding, (long long)avail);
    return SPMV_OK;
}

int spmv_format_check(const spmv_format_limits *lim, spmv_format f, int64_t nnz, int64_t slots, int64_t bytes,
                      spmv_error *err)
{
    if (!lim)
        return SPMV_OK;
    double allowed = lim->max_padding * (double)nnz + (double)SPMV_PADDING_SLACK;
    double ratio = nnz > 0 ? (double)slots / (double)nnz : 0.0;
    int st;
    if (lim->max_padding > 0 && (double)slots > allowed && lim->padding_allowance_bytes <= 0)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                              "the %s format of this matrix would hold %lld slots for %lld non-zeros (padding "
                              "%.2f, %lld bytes); max_padding %.2f allows %.0f slots: not built (use a CSR kernel, "
                              "or raise max_padding or padding_allowance_bytes)",
                              spmv_format_name(f), (long long)slots, (long long)nnz, ratio, (long long)bytes,
                              lim->max_padding, floor(allowed));
    if (lim->max_padding > 0 && (double)slots > allowed &&
        (st = allowance_check(lim, f, nnz, slots, bytes, allowed, err)) != SPMV_OK)
        return st;
    if (lim->max_format_bytes > 0 && bytes > lim->max_format_bytes)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                              "the %s format of this matrix would hold %lld bytes (%lld slots for %lld non-zeros), "
                              "above max_format_bytes %lld: not built",
                              spmv_format_name(f), (long long)bytes, (long long)slots, (long long)nnz,
                              (long long)lim->max_format_bytes);
    return SPMV_OK;
}

/* Slots of an HLL in slices of `hack` rows: per slice its longest row
 * times hack. */
static int64_t hll_slots(const spmv_csr *a, int32_t hack)
{
    int64_t slots = 0;
    for (int64_t r0 = 0; r0 < a->rows; r0 += hack) {
        int64_t r1 = r0 + hack < a->rows ? r0 + hack : a->rows, w = 0;
        for (int64_t i = r0; i < r1; i++)
            if ((int64_t)a->row_ptr[i + 1] - a->row_ptr[i] > w)
                w = (int64_t)a->row_ptr[i + 1] - a->row_ptr[i];
        slots += w * hack;
    }
    return slots;
}

int spmv_format_plan(const spmv_csr *a, spmv_format f, int32_t hack, int64_t *slots, int64_t *bytes, spmv_error *err)
{
    int64_t vs = (int64_t)spmv_dtype_size(a->dtype), s = 0, b = 0;
    int st;
    if (!spmv_format_takes_wide(f) && (st = spmv_csr_need_narrow(a, spmv_format_name(f), err)))
        return st;
    switch (f) {
    case SPMV_FMT_CSR:
        s = a->nnz;
        b = ((int64_t)a->rows + 1) * (spmv_csr_wide(a) ? 8 : 4) + a->nnz * (4 + vs);
        break;
    case SPMV_FMT_COO:
        s = a->nnz;
        b = a->nnz * (8 + vs);
        break;
    case SPMV_FMT_ELL:
        s = (int64_t)spmv_csr_max_row(a) * a->rows;
        b = s * (4 + vs);
        break;
    case SPMV_FMT_HLL: {
        if (hack < 1)
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "hack_size %d: must be at least 1", hack);
        int64_t ns = ((int64_t)a->rows + hack - 1) / hack;
        s = hll_slots(a, hack);
        b = s * (4 + vs) + ns * 4 + (ns + 1) * 8;
        break;
    }
    case SPMV_FMT_HYB: {
        int32_t w = 0;
        if ((st = spmv_hyb_auto_width(a, &w, err)))
            return st;
        int64_t rest = 0;
        for (int32_t i = 0; i < a->rows; i++) {
            int64_t len = (int64_t)a->row_ptr[i + 1] - a->row_ptr[i];
            rest += len > w ? len - w : 0;
        }
        s = (int64_t)w * a->rows + rest;
        b = (int64_t)w * a->rows * (4 + vs) + rest * (8 + vs);
        break;
    }
    case SPMV_FMT_PCSR:
        if ((st = spmv_pcsr_plan(a, &s, &b, err)))
            return st;
        break;
    case SPMV_FMT_PSELL:
        if ((st = spmv_psell_plan(a, &s, &b, err)))
            return st;
        break;
    case SPMV_FMT_SPSELL:
        if ((st = spmv_spsell_plan(a, &s, &b, err)))
            return st;
        break;
    case SPMV_FMT_PBSR:
        if ((st = spmv_pbsr_plan(a, &s, &b, err)))
            return st;
        break;
    default:
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "unknown format bit 0x%x", (unsigned)f);
    }
    *slots = s;
    *bytes = b;
    return SPMV_OK;
}
