/* jsondump.h — JSON text as the API writes it (daemon/jsondump.c). */
#ifndef SPMVD_JSONDUMP_H
#define SPMVD_JSONDUMP_H

#include <stddef.h>

#include <jansson.h>

/* v as compact JSON: reals shortest-exact, measurements (*_ms, *_s, gflops,
 * gbps, speedup, ratio_cusparse, efficiency) to six significant digits.
 * malloc'd text (its length in *len when len is not NULL), or NULL. */
char *spmvd_json_dump(const json_t *v, size_t *len);

#endif
