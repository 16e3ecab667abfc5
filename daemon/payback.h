/* payback.h — what building a format costs a matrix, when it pays, and
 * when `auto` may build a packed one (issue 30).
 *
 * Each matrix keeps the best measured time of a kernel reading each of its
 * formats, on the host and on its GPU (every one-column op-n product and
 * every tuning run feeds it), and counts its products. The formats' build
 * times are kept where they are built (spmv_matrix.convert_ms on the host,
 * spmv_gpu_usage.convert_ms on a GPU). From these the descriptor shows
 * each format's payback (engine/payback.c), and `auto` leaves the packed
 * formats (SPMV_FMT_PACKED) it would have to build out of its candidates
 * until the products repay them (config auto_build, auto_build_products;
 * docs/api.md, "auto").
 */
#ifndef SPMVD_PAYBACK_H
#define SPMVD_PAYBACK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/store.h"
#include "spmv.h"

/* Where a format is held: the host, or the matrix's GPU. */
enum { PAYBACK_HOST = 0, PAYBACK_DEVICE = 1 };

/* The configuration's rule (auto_build, auto_build_products). */
typedef struct payback_policy {
    bool eager;             /* auto_build "eager": nothing deferred */
    uint64_t products_min;  /* auto_build_products */
} payback_policy;

/* After a kernel ran on m: `products` more products counted (none for a
 * tuning run), and a one-column op-n run's median kept as its format's best
 * on `where` if it is lower (timed false: not a timing to keep). */
void payback_note_run(matrix *m, const spmv_kernel *k, uint64_t products, bool timed, double median_ms);

/* The packed formats `auto` leaves out of its candidates for m on `where`
 * now: those m's structure can hold (matrix_formats_fit: SPSELL only when
 * exactly symmetric, PBSR only with complete b x b blocks; auto never
 * tries the others' kernels on m) that are not in `held` and whose
 * products do not repay them yet (each one's measured payback, from
 * convert_ms and the best times, when there is one; one measured not
 * faster stays out; else policy->products_min). */
unsigned payback_deferred(const payback_policy *policy, matrix *m, int where, unsigned held,
                          const double convert_ms[SPMV_FORMAT_COUNT]);

/* m's values changed: its best times no longer hold. */
void payback_forget(matrix *m);

/* m's best times on `where` (0: none), copied under its lock. */
void payback_best(matrix *m, int where, double best[SPMV_FORMAT_COUNT]);

/* Adds to a descriptor's format entry: conversion_ms, best_ms, payback and
 * payback_reason (docs/api.md, "Formats on demand"), from payback_best's
 * times and the format's build time (0: not timed). */
void payback_json(json_t *entry, const double best[SPMV_FORMAT_COUNT], spmv_format f, double convert_ms);

#endif
