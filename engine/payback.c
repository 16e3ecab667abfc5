/* payback.c — how many products repay building a format.
 *
 * A format other than CSR costs a conversion (timed when it is built, on
 * the host by spmv_matrix_add_format, on a GPU by gpu_ensure_format) and
 * saves, on each product, the difference between the best CSR kernel's
 * time and the best time of a kernel reading the format. Their ratio,
 * rounded up, is the number of products after which the conversion has
 * paid for itself. The daemon shows it in a matrix's descriptor and
 * `auto` uses the same measure to decide when a packed format is worth
 * building (docs/api.md, "Formats on demand" and "auto").
 *
 * Never a negative or infinite count: a format that is not faster, or
 * faster by so little that no realistic number of products repays it,
 * says so; a missing time says "not measured".
 */
#include <math.h>

#include "spmv.h"

/* A gain this small against the conversion (2^53 products) is no gain:
 * the count would not even be an exact JSON integer. */
#define PAYBACK_MAX 9007199254740992.0

static bool measured(double ms) { return isfinite(ms) && ms > 0; }

spmv_payback_status spmv_payback(spmv_format f, double convert_ms, double csr_ms, double format_ms,
                                 int64_t *products)
{
    *products = 0;
    if (f == SPMV_FMT_CSR)
        return SPMV_PAYBACK_BASELINE;
    if (!measured(convert_ms) || !measured(csr_ms) || !measured(format_ms))
        return SPMV_PAYBACK_NOT_MEASURED;
    if (!(format_ms < csr_ms))
        return SPMV_PAYBACK_NOT_FASTER;
    double n = ceil(convert_ms / (csr_ms - format_ms));
    if (!(n < PAYBACK_MAX))
        return SPMV_PAYBACK_NOT_FASTER;
    *products = n < 1 ? 1 : (int64_t)n;
    return SPMV_PAYBACK_REPAID;
}

const char *spmv_payback_reason(spmv_payback_status s)
{
    switch (s) {
    case SPMV_PAYBACK_REPAID: return NULL;
    case SPMV_PAYBACK_NOT_MEASURED: return "not measured";
    case SPMV_PAYBACK_NOT_FASTER: return "not faster";
    case SPMV_PAYBACK_BASELINE: return "baseline";
    }
    return "not measured";
}
