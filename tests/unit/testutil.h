/* testutil.h — helpers shared by the unit tests (cmocka).
 *
 * What every kernel or format test needs and should do the same way: one
 * seed per run, from SPMV_SEED or time^pid, printed so a failure can be
 * repeated; a small seeded generator (tu_rng) and random sparse matrices
 * in the shapes that break kernels (empty rows, one dense row, 1x1, n x 1,
 * 1 x n, no non-zeros, power-law rows); NaN poisoning of outputs;
 * relative-error comparison against a reference; and the shared test
 * matrices with their peer answers (../shared/matrices/real/expected.json,
 * read with jansson). Linked into every test binary (Makefile:
 * TEST_SUPPORT_SRCS).
 */
#ifndef SPMV_TESTUTIL_H
#define SPMV_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spmv.h"

/* ------------------------------------------------------------------ seed */

/* The run's seed: SPMV_SEED if set (decimal or 0x hex), else time ^ pid.
 * Printed as a TAP comment ("# seed ... SPMV_SEED=N repeats this run") on
 * the first call; later calls return the same value. */
uint64_t tu_seed(void);

/* splitmix64: tiny, seedable, good enough for test data. */
typedef struct tu_rng {
    uint64_t state;
} tu_rng;

void tu_rng_init(tu_rng *r, uint64_t seed);
/* The most entries in one row of a. */
int32_t tu_longest_row(const spmv_csr *a);
uint64_t tu_rng_next(tu_rng *r);
double tu_rng_uniform(tu_rng *r);             /* [0, 1) */
double tu_rng_value(tu_rng *r);               /* [-1, 1), never exactly 0 */
int64_t tu_rng_range(tu_rng *r, int64_t lo, int64_t hi); /* [lo, hi] */

/* ------------------------------------------------------ random matrices */

/* A random matrix recipe. Row lengths are uniform in [0, 2*mean_per_row]
 * (or power-law with that mean), capped at cols; a fraction of rows is
 * forced empty; `dense_rows` rows (spread over the matrix) get `dense_len`
 * entries each. Values are uniform in [-1, 1). */
typedef struct tu_gen {
    int32_t rows, cols;
    double mean_per_row;
    double empty_row_frac;
    bool power_law;
    int32_t dense_rows;
    int32_t dense_len;
} tu_gen;

/* Sorted, duplicate-free COO of `dtype` as the recipe says; asserts on
 * allocation failure (cmocka). */
void tu_random_coo_gen(tu_rng *r, const tu_gen *g, spmv_dtype dtype, spmv_coo *out);

/* The shapes every kernel is tested on; `n` sizes them (rows, or the long
 * side). */
typedef enum tu_shape {
    TU_SHAPE_RANDOM,       /* n x (4n/3), ~8 per row, 10% empty rows */
    TU_SHAPE_EMPTY_ROWS,   /* n x n, 60% empty rows */
    TU_SHAPE_DENSE_ROW,    /* n x n, ~4 per row plus one full row */
    TU_SHAPE_POWER_LAW,    /* n x n, power-law row lengths, mean 6 */
    TU_SHAPE_1X1,          /* 1 x 1 with one entry */
    TU_SHAPE_COLUMN,       /* n x 1, most rows hold their entry */
    TU_SHAPE_ROW,          /* 1 x n, about half full */
    TU_SHAPE_NO_NONZEROS,  /* n x n, nnz 0 */
    TU_SHAPE_COUNT
} tu_shape;

const char *tu_shape_name(tu_shape s);
void tu_random_coo(tu_rng *r, tu_shape shape, int32_t n, spmv_dtype dtype, spmv_coo *out);

/* Rows of about `per_row` distinct columns each inside a window of
 * span + 1 columns at a random offset, both ends of the window always
 * taken: a row of two or more entries spans exactly `span` (the packed
 * formats' index widths turn on it). Values uniform in [-1, 1). */
void tu_window_coo(tu_rng *r, int32_t rows, int32_t cols, int32_t per_row, int32_t span, spmv_dtype dtype,
                   spmv_coo *out);
/* Every row on the same diagonals: row i holds columns i + off[k] for up
 * to w distinct random offsets in [0, max_off] (a repeated draw is
 * dropped; rows + max_off columns), so every full 32-row PSELL slice is
 * diagonal (engine/spmv.h). */
void tu_diagonal_coo(tu_rng *r, int32_t rows, int32_t w, int32_t max_off, spmv_dtype dtype, spmv_coo *out);
/* A matrix of complete b x b blocks (PBSR's, engine/spmv.h): the block
 * pattern is tu_window_coo's on brows x bcols (per_row blocks a block row
 * within a window of span + 1 block columns), about one block row in 8
 * left empty, every block stored whole with random values. */
void tu_block_coo(tu_rng *r, int32_t brows, int32_t bcols, int32_t b, int32_t per_row, int32_t span,
                  spmv_dtype dtype, spmv_coo *out);
/* Replaces m's values by `distinct` values, each used at least once where
 * nnz allows: value k is (k even ? 1 : -1) * (k/2 + 1) / 4, exact in both
 * dtypes (so the packed formats' value tables are predictable). */
void tu_palette_values(tu_rng *r, spmv_coo *m, int32_t distinct);
/* An exactly symmetric float64 COO (n x n, n the larger side of
 * `pattern`) on the pattern of pattern + patternᵀ, entry (i, j) and (j, i)
 * one value drawn from r: every pair its own value (distinct 0, as a
 * finite-volume matrix with random coefficients) or one of `distinct`
 * (tu_palette_values's). */
void tu_symmetric_coo(tu_rng *r, const spmv_coo *pattern, int32_t distinct, spmv_coo *out);

/* -------------------------------------------------------------- vectors */

/* n values of dtype (never NULL, even for n == 0; free with free()). */
void *tu_vector_alloc(spmv_dtype dtype, int64_t n);
void tu_random_vector(tu_rng *r, spmv_dtype dtype, int64_t n, void *out);
/* x[j] = 1 + (j mod 7)/8, the x of expected.json (exact in both dtypes). */
void tu_expected_x(spmv_dtype dtype, int64_t n, void *out);
/* Fills v with quiet NaN, so a kernel that skips an output is caught. */
void tu_poison(void *v, spmv_dtype dtype, int64_t n);
/* Copies n values, converting between dtypes. */
void tu_vector_convert(const void *in, spmv_dtype din, void *out, spmv_dtype dout, int64_t n);

/* ---------------------------------------------------------- comparison */

typedef enum tu_norm { TU_NORM_INF, TU_NORM_2 } tu_norm;

/* max_i |y_i - ref_i| / max(||ref||, tiny), in double whatever the dtypes
 * (so a float32 y can be compared with a float64 reference). Any NaN in y
 * (or a NaN/Inf mismatch) gives +Inf. */
double tu_rel_err(spmv_dtype ydt, const void *y, spmv_dtype rdt, const void *ref, int64_t n, tu_norm norm);

/* Fails the current cmocka test (printing what, the error, the bound, the
 * first bad index and the seed) if tu_rel_err exceeds bound. */
#define TU_ASSERT_CLOSE(what, ydt, y, rdt, ref, n, norm, bound) \
    tu_assert_close_at((what), (ydt), (y), (rdt), (ref), (n), (norm), (bound), __FILE__, __LINE__)
void tu_assert_close_at(const char *what, spmv_dtype ydt, const void *y, spmv_dtype rdt, const void *ref,
                        int64_t n, tu_norm norm, double bound, const char *file, int line);

/* The same check with an explicit denominator: fails if
 * max_i |y_i - ref_i| / scale exceeds bound. */
#define TU_ASSERT_CLOSE_SCALED(what, ydt, y, rdt, ref, n, scale, bound) \
    tu_assert_close_scaled_at((what), (ydt), (y), (rdt), (ref), (n), (scale), (bound), __FILE__, __LINE__)
void tu_assert_close_scaled_at(const char *what, spmv_dtype ydt, const void *y, spmv_dtype rdt, const void *ref,
                               int64_t n, double scale, double bound, const char *file, int line);

/* Norm of ref, and of |A|·|x| (out, rows values, computed in double from
 * the COO): rounding errors of y = A·x scale with |A|·|x|, not with y, so
 * a row whose sum cancels to nearly 0 needs this as its yardstick. */
double tu_vector_norm(spmv_dtype dtype, const void *v, int64_t n, tu_norm norm);
void tu_abs_product(const spmv_coo *a, spmv_dtype xdt, const void *x, double *out);

/* Whether two COOs are identical (shape, dtype, entries and value bits);
 * prints the first difference when not. */
bool tu_coo_equal(const spmv_coo *a, const spmv_coo *b);

/* ------------------------------------------------------ shared matrices */

/* $SPMV_ROOT/../shared/matrices/<rel> (SPMV_ROOT defaults to "."); returns
 * buf. */
const char *tu_matrices_path(char *buf, size_t len, const char *rel);

/* One entry of real/expected.json. */
typedef struct tu_expected {
    char file[128];                /* "bcsstk13.mtx" */
    int64_t rows, cols, nnz, max_row;
    double y_norm2;
    double *y;                     /* rows values */
} tu_expected;

/* Loads every entry, sorted by file name; 0 on success, -1 (with a message
 * printed) if the file is missing or malformed. */
int tu_expected_load(tu_expected **out, size_t *count);
void tu_expected_free(tu_expected *e, size_t count);

/* The GPU tests' context: device 0, or NULL with *reason saying why (no
 * GPU in this build or host, or a context that could not be made). */
spmv_gpu_ctx *tu_gpu_open(const char **reason);

/* ------------------------------------------------------- array equality */

/* n bytes of a and b equal; else false, printing "# FAIL what" and the
 * first byte that differs. */
bool tu_same_bytes(const char *what, const void *a, const void *b, size_t n);
/* Bytes a value entry takes in `mode` (value size vs). */
size_t tu_code_size(spmv_vcode mode, size_t vs);
/* Two packed value arrays of n entries: mode, table and codes equal. */
bool tu_same_values(const char *what, const spmv_packed_values *h, const spmv_packed_values *d, int64_t n,
                    size_t vs);
/* Two PSELLs array for array (the host's and a device's, or two builds). */
bool tu_same_psell(const char *what, const spmv_psell *h, const spmv_psell *d);

/* What every GPU test file shares (test_gpu*.c): the context (NULL when
 * this host has none, with the reason), a generator seeded by tu_seed(),
 * and SPMV_GPU_QUICK (0 full, 1 subset, 2 smaller subset). tu_gpu_setup
 * and tu_gpu_teardown are the cmocka group's setup and teardown; each
 * case begins with TU_NEED_GPU(), which skips it, with the reason, when
 * there is no GPU. SPMV_GPU_ONLY filters the cases (tu_gpu_run). */
typedef struct tu_gpu {
    spmv_gpu_ctx *ctx;
    const char *reason;
    tu_rng rng;
    int quick;
} tu_gpu;
extern tu_gpu TG;
int tu_gpu_setup(void **state);
int tu_gpu_teardown(void **state);
#define TU_NEED_GPU()                                            \
    do {                                                         \
        if (!TG.ctx) {                                           \
            print_message("# SKIP no GPU: %s\n", TG.reason);     \
            skip();                                              \
        }                                                        \
    } while (0)
/* cmocka_run_group_tests_name with tu_gpu_setup/teardown and the
 * SPMV_GPU_ONLY filter. */
#define tu_gpu_run(name, tests)                                                 \
    (getenv("SPMV_GPU_ONLY") ? cmocka_set_test_filter(getenv("SPMV_GPU_ONLY")) : (void)0, \
     cmocka_run_group_tests_name(name, tests, tu_gpu_setup, tu_gpu_teardown))

#endif /* SPMV_TESTUTIL_H */
