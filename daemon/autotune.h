/* autotune.h — the daemon's side of the `auto` kernel (issue 5).
 *
 * engine/tune.c picks a kernel for a matrix; this keeps the choice with
 * the matrix: in memory (matrix.tuned, under the matrix's lock) and on disk
 * as a side file <state_dir>/<id>.tune (JSON, written to a temp file and
 * renamed), so a restart reuses it instead of tuning again. The matrix
 * file format is unchanged: an older daemon ignores the side file, a
 * damaged or stale one (kernel unknown here, other device) is ignored and
 * the matrix is tuned afresh. Tuning runs on the worker that owns the
 * matrix's device (the GPU worker for a resident matrix, the CPU worker
 * otherwise), inside a task, so it never overlaps another kernel there.
 */
#ifndef SPMVD_AUTOTUNE_H
#define SPMVD_AUTOTUNE_H

#include <jansson.h>
#include <stdbool.h>

#include "daemon/queue.h"
#include "daemon/store.h"
#include "spmv.h"

struct spmvd;
struct worker;

#define AUTOTUNE_SUFFIX ".tune"

/* The worker that tunes and runs `auto` for m: its GPU's, or the CPU's. */
struct worker *autotune_worker(struct spmvd *d, matrix *m);

/* On w's thread: m's choice, from memory, the side file, or (force, or
 * none yet) tuned now within the configured budget and stored. *out gets
 * a copy; out->source says which ("cached", "stored", "tuned"). */
int autotune_get(struct spmvd *d, struct worker *w, matrix *m, bool force, matrix_tuning *out, spmv_error *err);

/* The same for a block of k columns (k > 1 cached in memory per k). */
int autotune_get_k(struct spmvd *d, struct worker *w, matrix *m, int32_t k, matrix_tuning *out, spmv_error *err);

/* {"kernel","params","median_ms","tuning_ms","tuning_runs","timed","candidates","budget_hit","source"} */
json_t *autotune_json(const matrix_tuning *t);

/* POST /tune as a worker task: tune_run (the task body) tunes m afresh on
 * the worker it runs on (autotune_worker's) and keeps the outcome here. */
typedef struct tune_task {
    task base;
    struct spmvd *d;
    matrix *m;
    matrix_tuning tuned;
    int rc;
    spmv_error err;
    char worker_name[16];
} tune_task;
void tune_run(task *t, struct worker *w);

/* m's values changed (PUT .../values): every choice forgotten, in memory
 * and its side file, so the next `auto` call tunes again. On the worker
 * that tunes m (autotune_worker's), which runs no tuning meanwhile. */
void autotune_forget(struct spmvd *d, matrix *m);

/* Unlinks <dir>/<id>.tune if present (the matrix was deleted). */
void autotune_remove(const char *dir, const char *id);

#endif
