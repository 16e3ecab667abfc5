/* csr.c — the CSR format: freeing, byte count, dtype change, CSR -> COO,
 * the content hash.
 *
 * CSR is the format every matrix is held in (spmv_matrix always has it) and
 * the source of every other conversion (ell.c, hll.c, hyb.c read it); going
 * back to COO is the inverse of spmv_coo_to_csr and is what the round-trip
 * tests compare.
 */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "formats.h"
#include "spmv.h"

void spmv_csr_free(spmv_csr *m)
{
    if (!m)
        return;
    free(m->row_ptr);
    free(m->row_ptr64);
    free(m->col);
    free(m->val);
    memset(m, 0, sizeof *m);
}

spmv_format_info spmv_csr_info(const spmv_csr *m)
{
    return spmv_info_of(((size_t)m->rows + 1) * (m->row_ptr64 ? sizeof(int64_t) : sizeof(int32_t)) +
                            (size_t)m->nnz * (sizeof(int32_t) + spmv_dtype_size(m->dtype)),
                        0, 0);
}

int spmv_csr_widen(spmv_csr *a, spmv_error *err)
{
    if (a->row_ptr64)
        return SPMV_OK;
    int st = SPMV_OK;
    int64_t *p = spmv_array_alloc((int64_t)a->rows + 1, sizeof(int64_t), &st);
    if (!p)
        return spmv_error_set(err, st, 0, "cannot allocate %lld 64-bit row offsets (%s)", (long long)a->rows + 1,
                              spmv_strerror(st));
    for (int64_t i = 0; i <= a->rows; i++)
        p[i] = a->row_ptr[i];
    free(a->row_ptr);
    a->row_ptr = NULL;
    a->row_ptr64 = p;
    return SPMV_OK;
}

int spmv_csr_need_narrow(const spmv_csr *a, const char *what, spmv_error *err)
{
    if (!a->row_ptr64)
        return SPMV_OK;
    return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                          "%s: this matrix has 64-bit row offsets (%lld non-zeros%s), which only CSR and PSELL hold and "
                          "only cpu.csr.serial, cpu.csr.omp, cpu.psell.omp, gpu.csr.vector, cusparse.csr and "
                          "gpu.psell read", what,
                          (long long)a->nnz, a->nnz > INT32_MAX ? ", past INT32_MAX" : ", as the upload asked");
}

int spmv_csr_to_coo(const spmv_csr *in, spmv_coo *out, spmv_error *err)
{
    int st = spmv_csr_need_narrow(in, "CSR to COO", err);
    if (!st)
        st = spmv_check_shape(in->rows, in->cols, in->nnz, err);
    if (st)
        return st;
    if ((st = spmv_coo_alloc(out, in->rows, in->cols, in->nnz, in->dtype, err)))
        return st;
    for (int32_t i = 0; i < in->rows; i++)
        for (int32_t k = in->row_ptr[i]; k < in->row_ptr[i + 1]; k++)
            out->row[k] = i;
    memcpy(out->col, in->col, (size_t)in->nnz * sizeof(int32_t));
    memcpy(out->val, in->val, (size_t)in->nnz * spmv_dtype_size(in->dtype));
    return SPMV_OK;
}

bool spmv_float32_overflows(double v) { return isfinite(v) && isinf((float)v); }

int64_t spmv_float32_overflow_at(const double *v, int64_t n)
{
    int64_t first = n;
#pragma omp parallel for reduction(min : first) schedule(static)
    for (int64_t k = 0; k < n; k++)
        if (k < first && spmv_float32_overflows(v[k]))
            first = k;
    return first < n ? first : -1;
}

int spmv_csr_round_to_float32(spmv_csr *m, spmv_error *err)
{
    if (m->dtype != SPMV_FLOAT64)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "rounding to float32: the CSR holds %s, not float64",
                              spmv_dtype_name(m->dtype));
    double *v = m->val;
    for (int32_t i = 0; i < m->rows; i++)
        for (int64_t k = spmv_csr_row_begin(m, i); k < spmv_csr_row_begin(m, i + 1); k++) {
            if (spmv_float32_overflows(v[k]))
                return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                                      "dtype mixed: entry (%d, %d) = %.17g is outside float32's range (|v| <= %.9g)",
                                      i + 1, m->col[k] + 1, v[k], (double)FLT_MAX);
            v[k] = (double)(float)v[k];
        }
    return SPMV_OK;
}

int spmv_csr_to_dtype(spmv_csr *m, spmv_dtype dtype, spmv_error *err)
{
    int st = SPMV_OK;
    if (m->dtype == dtype)
        return SPMV_OK;
    void *val = spmv_array_alloc(m->nnz, spmv_dtype_size(dtype), &st);
    if (!val)
        return spmv_error_set(err, st, 0, "cannot allocate %lld %s values (%s)", (long long)m->nnz,
                              spmv_dtype_name(dtype), spmv_strerror(st));
    const int64_t n = m->nnz;
    if (dtype == SPMV_FLOAT32) {
        const double *in = m->val;
        float *out = val;
#pragma omp parallel for schedule(static)
        for (int64_t k = 0; k < n; k++)
            out[k] = (float)in[k];
    } else {
        const float *in = m->val;
        double *out = val;
#pragma omp parallel for schedule(static)
        for (int64_t k = 0; k < n; k++)
            out[k] = in[k];
    }
    free(m->val);
    m->val = val;
    m->dtype = dtype;
    return SPMV_OK;
}

/* The offsets go through the digest as int64 whatever the CSR holds, in
 * slices of this many. */
#define HASH_SLICE 8192

int spmv_csr_sha256(const spmv_csr *m, unsigned char out[32])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    int64_t head[2] = {m->rows, m->cols}, wide[HASH_SLICE];
    ok = ok && EVP_DigestUpdate(ctx, head, sizeof head);
    for (int64_t i = 0; ok && i <= m->rows; i += HASH_SLICE) {
        int64_t n = m->rows + 1 - i < HASH_SLICE ? m->rows + 1 - i : HASH_SLICE;
        for (int64_t j = 0; j < n; j++)
            wide[j] = spmv_csr_row_begin(m, i + j);
        ok = EVP_DigestUpdate(ctx, wide, (size_t)n * sizeof wide[0]);
    }
    ok = ok && EVP_DigestUpdate(ctx, m->col, (size_t)m->nnz * sizeof(int32_t)) &&
         EVP_DigestUpdate(ctx, m->val, (size_t)m->nnz * spmv_dtype_size(m->dtype)) &&
         EVP_DigestFinal_ex(ctx, out, NULL);
    EVP_MD_CTX_free(ctx);
    return ok ? SPMV_OK : SPMV_ERR_NOMEM;
}

void spmv_sha256_hex(const unsigned char sum[32], char hex[65])
{
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", sum[i]);
}

/* ------------------------------------------------------------ symmetry */

int64_t spmv_csr_find(const spmv_csr *a, int64_t i, int32_t j)
{
    int64_t lo = spmv_csr_row_begin(a, i), hi = spmv_csr_row_begin(a, i + 1);
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a->col[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < spmv_csr_row_begin(a, i + 1) && a->col[lo] == j ? lo : -1;
}

/* Every entry above the diagonal has its mirror with the same bits, and
 * there are as many below as above: then the mirror map (injective) is
 * onto, and A equals its transpose. */
bool spmv_csr_symmetric(const spmv_csr *a)
{
    if (a->rows != a->cols)
        return false;
    size_t vs = spmv_dtype_size(a->dtype);
    int64_t upper = 0, lower = 0;
    _Atomic bool broken = false;
#pragma omp parallel for schedule(dynamic, 1024) reduction(+ : upper, lower)
    for (int64_t i = 0; i < a->rows; i++) {
        if (atomic_load_explicit(&broken, memory_order_relaxed))
            continue;
        for (int64_t p = spmv_csr_row_begin(a, i); p < spmv_csr_row_begin(a, i + 1); p++) {
            int32_t j = a->col[p];
            if (j < i) {
                lower++;
                continue;
            }
            if (j == i)
                continue;
            upper++;
            int64_t q = spmv_csr_find(a, j, (int32_t)i);
            if (q < 0 || memcmp((const char *)a->val + (size_t)p * vs, (const char *)a->val + (size_t)q * vs, vs)) {
                atomic_store_explicit(&broken, true, memory_order_relaxed);
                break;
            }
        }
    }
    return !atomic_load(&broken) && upper == lower;
}
