/* client_tap.h — what the libspmvclient test drivers share (client_calls.c,
 * shm_calls.c): TAP lines with a running count, the handle's error detail as
 * diagnostics, and random matrices in COO drawn from a splitmix64 stream
 * (seeded by the driver, printed), written as Matrix Market text. Header
 * only: each driver is one program.
 */
#ifndef SPMVD_CLIENT_TAP_H
#define SPMVD_CLIENT_TAP_H

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "spmvclient.h"

static int tests, failures;

__attribute__((format(printf, 2, 3)))
static inline bool check(bool cond, const char *fmt, ...)
{
    va_list ap;
    printf("%s %d - ", cond ? "ok" : "not ok", ++tests);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (!cond) failures++;
    return cond;
}

/* Prints the handle's error detail as TAP diagnostics. */
static inline void diag(spmv_client *h, spmv_client_status st)
{
    printf("#   status %d (%s), http %ld, code '%s', message '%s'\n", st, spmv_client_strerror(st),
           spmv_client_http_status(h), spmv_client_errcode(h), spmv_client_errmsg(h));
}

#define EXPECT(h, call, want, ...)                                                                   \
    do {                                                                                             \
        spmv_client_status st_ = (call);                                                             \
        if (!check(st_ == (want), __VA_ARGS__)) diag((h), st_);                                      \
    } while (0)

/* ---------------------------------------------------------- random matrix */

typedef struct coo {
    int64_t rows, cols, nnz;
    int64_t *r, *c;
    double *v;
} coo;

static uint64_t rng_state;
static inline uint64_t rng(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static inline double uniform(void) { return (double)(rng() >> 11) / 9007199254740992.0 * 2 - 1; }

/* A random general matrix with a few entries per row, no duplicates needed
 * (the reader sums them, and so does reference_y). */
static inline bool random_coo(coo *m, int64_t rows, int64_t cols, int per_row)
{
    m->rows = rows, m->cols = cols, m->nnz = rows * per_row;
    m->r = malloc((size_t)m->nnz * sizeof *m->r);
    m->c = malloc((size_t)m->nnz * sizeof *m->c);
    m->v = malloc((size_t)m->nnz * sizeof *m->v);
    if (!m->r || !m->c || !m->v) return false;
    for (int64_t k = 0; k < m->nnz; k++) {
        m->r[k] = k / per_row;
        m->c[k] = (int64_t)(rng() % (uint64_t)cols);
        m->v[k] = uniform();
    }
    return true;
}

static inline void coo_free(coo *m)
{
    free(m->r), free(m->c), free(m->v);
}

static inline char *matrix_market(const coo *m, size_t *len, const char *who)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) return NULL;
    fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%% %s\n", who);
    fprintf(f, "%" PRId64 " %" PRId64 " %" PRId64 "\n", m->rows, m->cols, m->nnz);
    for (int64_t k = 0; k < m->nnz; k++)
        fprintf(f, "%" PRId64 " %" PRId64 " %.17g\n", m->r[k] + 1, m->c[k] + 1, m->v[k]);
    fclose(f);
    return text;
}


static inline double rel_err(const double *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i])) return INFINITY;
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}


#endif
