/* mmio_write.c — writes a COO as a Matrix Market file.
 *
 * The generator (build/spmv-gen) and the tests write matrices with this;
 * the output is always "coordinate real general", 1-based, one entry per
 * line, values with 17 significant digits so that reading the file back
 * gives the same float64 bits (float32 values are widened, which is exact).
 * Non-finite values are written as inf, -inf and nan, which the reader
 * accepts. Errors name the path and the system's reason.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "spmv.h"

#define WRITE_BUFFER ((size_t)1 << 20)

static double value_at(const spmv_coo *m, int64_t k)
{
    return m->dtype == SPMV_FLOAT32 ? (double)((const float *)m->val)[k] : ((const double *)m->val)[k];
}

/* The indices by hand: fprintf's format parsing costs as much as the
 * digits, and a big matrix is millions of lines. v is 1..2^31. */
static size_t format_index(char *out, int64_t v)
{
    char tmp[24];
    size_t n = 0, k = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    while (n > 0)
        out[k++] = tmp[--n];
    return k;
}

static int check_coo(const spmv_coo *m, spmv_error *err)
{
    if (m->rows < 0 || m->cols < 0 || m->nnz < 0 || (m->nnz > 0 && (!m->row || !m->col || !m->val)))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "cannot write an invalid COO (%d x %d, %lld non-zeros)",
                              m->rows, m->cols, (long long)m->nnz);
    for (int64_t k = 0; k < m->nnz; k++)
        if (m->row[k] < 0 || m->row[k] >= m->rows || m->col[k] < 0 || m->col[k] >= m->cols)
            return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                                  "cannot write COO entry %lld at (%d, %d): outside the %d x %d matrix",
                                  (long long)k, m->row[k], m->col[k], m->rows, m->cols);
    return SPMV_OK;
}

int spmv_mm_write_file(const char *path, const spmv_coo *m, spmv_error *err)
{
    int st = check_coo(m, err);
    if (st)
        return st;
    FILE *f = fopen(path, "w");
    if (!f)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "cannot create %s: %s", path, strerror(errno));
    setvbuf(f, NULL, _IOFBF, WRITE_BUFFER);
    fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%% written by spmvd %s\n%d %d %lld\n",
            SPMV_VERSION, m->rows, m->cols, (long long)m->nnz);
    for (int64_t k = 0; k < m->nnz; k++) {
        char line[96];
        size_t n = format_index(line, m->row[k] + 1);
        line[n++] = ' ';
        n += format_index(line + n, m->col[k] + 1);
        line[n++] = ' ';
        n += (size_t)snprintf(line + n, sizeof line - n, "%.17g\n", value_at(m, k));
        fwrite(line, 1, n, f);
    }
    bool failed = ferror(f) != 0;
    int saved = errno;
    if (fclose(f) != 0 && !failed) {
        failed = true;
        saved = errno;
    }
    if (failed)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "cannot write %s: %s", path, strerror(saved));
    return SPMV_OK;
}
