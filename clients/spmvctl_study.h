/* spmvctl_study.h — `spmvctl study`: a collection study through libspmvclient.
 *
 * spmvctl.c parses the command line and hands the options here; study.c
 * collects (uploads, benches, the thread sweep, SpMSpM) into results.json
 * and renders report.md and results.csv from it, the same tables, byte for
 * byte, that the Python package's spmvd.study renders from the same JSON.
 * --plot runs `python3 -m spmvd.study plot` for the PNGs.
 */
#ifndef SPMVCTL_STUDY_H
#define SPMVCTL_STUDY_H

#include "spmvclient.h"

#include <stdbool.h>

typedef struct study_options {
    const char *dir;          /* the folder of matrices (NULL with `from`) */
    const char *out;          /* the report folder */
    const char *from;         /* render an existing results.json instead of collecting */
    const char *kernels;      /* "a,b": SpMV kernels, NULL: every available one */
    const char *spmspm;       /* "a,b" or "none": SpMSpM kernels, NULL: every available one */
    const char *dtypes;       /* "float32,float64" (default) */
    const char *threads;      /* "1,2,4": the thread sweep's counts, NULL: 1, 2, 4 ... cores */
    const char *device;       /* the uploads' device, NULL: the daemon's choice */
    const char *url;          /* for the report */
    const char *command;      /* the command line as typed, for the report */
    int runs, warmup;
    long long max_nnz;        /* 0: no limit */
    bool plot;
} study_options;

/* Runs the study (or renders `from`); returns spmvctl's exit status. */
int spmvctl_study(spmv_client *h, const study_options *o);

/* spmvctl's exit status for a library status (spmvctl.c). */
int spmvctl_exit_for(spmv_client_status st);

#endif
