/* kernels.h — the CPU kernels, one call = one y = A*x, untimed.
 *
 * engine/cpu/csr.c, ell.c, hll.c, pcsr.c, psell.c and pbsr.c implement these for
 * both dtypes (the matrix's dtype picks the variant; x and y are of that
 * dtype and every sum is accumulated in it: float32 kernels accumulate in
 * float, as a float32 GPU kernel does). engine/cpu/run.c prepares what they need (the
 * format, a row partition, scratch) outside the timed region and times
 * them. Internal to the engine.
 */
#ifndef SPMV_CPU_KERNELS_H
#define SPMV_CPU_KERNELS_H

#include "spmv.h"

/* Whether k is one of the CPU SpMSpM kernels (engine/cpu/spmspm.c). */
bool spmv_cpu_spmspm_bound(const spmv_kernel *k);
/* cpu.spmspm.hash, one whole product into a fresh *c (engine/cpu/
 * spmspm_hash.c): A's entries as COO triplets (arow[p], a->col[p],
 * a->val[p]) times B's rows, summed in a hash map keyed by i * cols(B) + j. */
int spmv_cpu_spmspm_hash(const spmv_csr *a, const int32_t *arow, const spmv_csr *b, spmv_csr *c, spmv_error *err);

/* cpu.csr.serial: row by row, one thread (also spmv_reference). */
void spmv_cpu_csr_serial(const spmv_csr *a, const void *x, void *y);

/* cpu.csr.chunked (docs/kernels.md, the studies' items #2): x in column ranges of
 * `span` columns (spmv_chunked_width); one pass over all rows per range,
 * each pass adding the row's entries in that range (contiguous, since rows
 * are sorted by column, and found from the row's cursor) to y. `cursor` is
 * scratch of a->rows entries. ceil(cols/span) passes: the caller bounds
 * them (spmv_kernel_work). */
void spmv_cpu_csr_chunked(const spmv_csr *a, int64_t span, int32_t *cursor, const void *x, void *y);

/* cpu.csr.omp: bounds[0..nparts] splits the rows so that each part holds
 * about nnz/nparts non-zeros (first row whose row_ptr reaches t*nnz/nparts,
 * binary search); computed once per call, outside the timed loop. */
void spmv_cpu_csr_partition(const spmv_csr *a, int32_t nparts, int32_t *bounds);
void spmv_cpu_csr_omp(const spmv_csr *a, int32_t nparts, const int32_t *bounds, const void *x, void *y);

/* cpu.ell.omp and cpu.hll.omp; threads 0 means all OpenMP threads.
 * cpu.hll.omp's schedule: 1 (or 0) static, each thread one contiguous
 * range of about nslices/threads slices (docs/kernels.md, the studies' items #4); 2 dynamic, groups
 * of slices to whichever thread is free. */
void spmv_cpu_ell_omp(const spmv_ell *e, int32_t threads, const void *x, void *y);
void spmv_cpu_hll_omp(const spmv_hll *h, int32_t threads, int32_t schedule, const void *x, void *y);

/* cpu.pcsr.omp: bounds as cpu.csr.omp's (the PCSR's row_ptr is the CSR's,
 * so spmv_cpu_csr_partition of the CSR serves). */
void spmv_cpu_pcsr_omp(const spmv_pcsr *a, int32_t nparts, const int32_t *bounds, const void *x, void *y);
/* cpu.psell.omp; threads 0 means all OpenMP threads. */
void spmv_cpu_psell_omp(const spmv_psell *a, int32_t threads, const void *x, void *y);
/* cpu.spsell.omp (the CPU reference of SPSELL); threads 0: all. */
void spmv_cpu_spsell_omp(const spmv_spsell *a, int32_t threads, const void *x, void *y);
/* cpu.pbsr.omp: `threads` (at least 1) equal ranges of block rows. */
void spmv_cpu_pbsr_omp(const spmv_pbsr *a, int32_t threads, const void *x, void *y);

#endif /* SPMV_CPU_KERNELS_H */
