/* gpu.cuh — what the GPU backend's files share: the device context, the
 * resident matrix, tracked device allocations and the kernel entry points.
 *
 * The public side (engine/spmv.h) sees spmv_gpu_ctx and spmv_gpu_matrix as
 * opaque handles; this header defines them. One context per device, owned
 * by one thread (the daemon's GPU worker): it holds the stream every call
 * is queued on, the cuSPARSE handle bound to that stream, a counter of the
 * device bytes spmvd holds (for the reserve check and /v1/info) and a
 * scratch buffer that kernels needing temporary space (merge carries, the
 * warp buffer) grow on demand.
 *
 * A resident matrix keeps the CSR always (row_ptr, col, val: the arrays
 * every other format is built from on the device), and the other formats
 * on request or on first use. Its device COO is the row index array alone:
 * column and value arrays are the CSR's (same order), so COO costs 4 bytes
 * per non-zero on the device, not 8 + value size. Every device allocation
 * of a matrix goes through gpu_alloc(), which checks the reserve first and
 * records the block, so gpu_matrix_destroy() frees everything whatever
 * state a failed upload stopped in.
 *
 * Kernel files (csr.cu, csr_adaptive.cu, csr_merge.cu, ell.cu, coo.cu,
 * cusparse.cu) each export launchers with the gpu_launch_fn signature;
 * run.cu maps the registry's kernel names to them. A faster kernel slots in
 * as one more launcher and one more table row.
 */
#ifndef SPMV_GPU_CUH
#define SPMV_GPU_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <stdint.h>
#include <atomic>
#include <initializer_list>
#include <vector>

#include "spmv.h"

#define GPU_WARP 32
#define GPU_FULL_MASK 0xffffffffu
/* Column of a padding slot in ELL, HLL and HYB (engine/formats.h SPMV_PAD_COL). */
#define GPU_PAD_COL (-1)

/* --------------------------------------------------------------- context */

/* The k-column reductions (blas.cu): at most GPU_RED_BLOCKS blocks a
 * column, two sums each, their partials, results and one counter a column
 * in the context's reduction area of GPU_RED_BYTES. */
#define GPU_RED_BLOCKS 256
#define GPU_RED_RESULTS (1 + 2 * SPMV_MAX_K)
#define GPU_RED_PARTS (2 * SPMV_MAX_K * GPU_RED_BLOCKS)
#define GPU_RED_BYTES ((GPU_RED_RESULTS + GPU_RED_PARTS) * sizeof(double) + SPMV_MAX_K * sizeof(unsigned))

struct spmv_gpu_ctx {
    int device;
    size_t reserve;          /* bytes kept free on the device */
    size_t used;             /* bytes spmvd holds on this device (all matrices + scratch) */
    cudaStream_t stream;
    cusparseHandle_t sparse;
    cudaEvent_t ev_start, ev_stop;
    char name[128];
    int cc_major, cc_minor, sm_count;
    int tex1d_linear_max;    /* elements a linear texture may span */
    size_t tex_align;        /* the alignment a linear texture's base needs (bytes) */
    void *scratch;           /* grown by gpu_scratch() */
    size_t scratch_bytes;
    cublasHandle_t blas;     /* BLAS-1 of resident vectors (blas.cu), made on first use, on `stream` */
    /* The reductions' device area (blas.cu, GPU_RED_BYTES, made on first
     * use, counted in scratch): dev_scalar[0] the one-column scalar, then
     * the k-column reductions' results, block partials and counters. */
    double *dev_scalar;
    spmv_format_limits limits; /* the padding rule every device build obeys (engine/limits.c) */
    /* Matrices resident here (transposes included), for eviction: when an
     * allocation would eat into the reserve, derived formats that are not
     * pinned and not read by the running call are freed, least recently
     * used first (gpu_evict, convert.cu). */
    std::vector<struct spmv_gpu_matrix *> mats;
    uint64_t tick;           /* advances on every use of a format */
    uint64_t evictions;      /* formats evicted so far */
    void *batch;             /* dynamic batching's device block (batch.cu), grown to the widest batch */
    size_t batch_bytes;
};

/* ------------------------------------------------------- device formats */

struct gpu_ell {
    int32_t width;
    int64_t slots;           /* width * rows */
    int32_t *col;
    void *val;
};

struct gpu_hll {
    int32_t hack_size;       /* 0: not built */
    int32_t nslices;
    int64_t slots;           /* slice_off[nslices] */
    int64_t *slice_off;
    int32_t *slice_width;
    int32_t *slice_off32;    /* cuSPARSE's SELL takes 32-bit offsets; built on first use */
    int32_t *col;
    void *val;
};

struct gpu_hyb {
    bool built;
    struct gpu_ell ell;
    int64_t coo_nnz;
    int32_t *row, *col;
    void *val;
};

/* The packed formats (engine/spmv.h spmv_pcsr, spmv_psell; built and run
 * in packed.cu): the same arrays as the host's, on the device. */
struct gpu_packed_values {
    spmv_vcode mode;
    int32_t ntable;
    void *table;             /* ntable values */
    void *data;              /* per entry: values (RAW) or 1/2-byte codes; NULL for CONST */
};

struct gpu_pcsr {
    int32_t idx_bytes;       /* 0: not built; 1, 2 or 4 */
    int32_t *base;           /* rows (NULL for 4); row_ptr is the CSR's */
    void *idx;
    int64_t wide_nnz;
    int32_t *wide_col;
    struct gpu_packed_values v;
};

/* A PSELL's slice patterns (packed.cu, docs/kernels.md "Slice patterns"):
 * diagonal uniform slices whose slots sit at the same offsets from the
 * slice's first row and hold the same values share one pattern; gpu.psell
 * reads a pattern slice's offsets and values from shared memory, not from
 * the slice's bases and value entries, so its gathers of x wait for one
 * round of loads (the header), not two. Derived on the device from
 * the PSELL once it is built; the format's arrays are untouched. */
#define GPU_PAT_MAX 8     /* patterns a matrix */
#define GPU_PAT_SLOTS 128 /* slots over all its patterns (the kernel's shared copy) */
#define GPU_PAT_NONE 255  /* pid of a slice that follows none */
struct gpu_psell_patterns {
    int32_t n;                      /* 0: none, pid NULL */
    int32_t start[GPU_PAT_MAX + 1]; /* pattern p: slots start[p] .. start[p+1] of off and val */
    int64_t slices;                 /* slices that follow one */
    uint8_t *pid;                   /* nslices: the slice's pattern or GPU_PAT_NONE */
    int32_t *off;                   /* start[n]: a slot's column minus the slice's first row */
    void *val;                      /* start[n]: a slot's value */
};

struct gpu_psell {
    int32_t nslices;         /* slices of SPMV_PSELL_C rows */
    int64_t slots;           /* 0 with nslices 0: not built */
    bool built;
    int64_t *slot_off, *idx_off, *val_off;
    int64_t nvals;           /* value entries: val_off[nslices] */
    uint8_t *idx_bytes;
    int32_t *base;
    uint8_t *idx;
    int64_t idx_total;       /* idx_off[nslices] */
    struct gpu_packed_values v;
    struct gpu_psell_patterns pat;
};

/* SPSELL (engine/spmv.h spmv_spsell): PSELL's arrays plus the mirror flags,
 * built on the host and uploaded (packed.cu); idx (idx_total bytes) holds
 * the mirrored slices' source tables among the column entries. */
struct gpu_spsell {
    bool built;
    int32_t nslices;
    int32_t nmirrored;
    int64_t slots, nvals, idx_total;
    int64_t *slot_off, *idx_off, *val_off;
    uint8_t *idx_bytes, *mirror;
    int32_t *base;
    uint8_t *idx;
    struct gpu_packed_values v;
};

/* PBSR (engine/spmv.h spmv_pbsr; pbsr.cu): built on the host from a copy
 * of the resident CSR and uploaded, the host's arrays as they are. */
struct gpu_pbsr {
    int32_t b;               /* 0: not built; else 2, 3, 4 or 6 */
    int32_t brows;
    int64_t nblocks;
    int32_t *block_ptr;      /* brows + 1 */
    int32_t idx_bytes;
    int32_t *base;           /* brows (NULL for 4) */
    void *idx;
    int64_t wide_nnz;
    int32_t *wide_col;
    struct gpu_packed_values v;
    char refused[512];       /* why the matrix has no blocks, once found (its pattern never changes); "" until then */
};

/* gpu.csr.adaptive's row blocks (csr_adaptive.cu), cached per nnz_per_wg. */
struct gpu_row_block {
    int32_t row_begin, row_end;  /* rows [row_begin, row_end) */
    int32_t nz_begin, nz_end;    /* non-zeros this block covers */
};

struct gpu_adaptive {
    int32_t nnz_per_wg;          /* 0: not built */
    int32_t rule;                /* row_blocks: 1 the study's gathering, 2 bins of nnz_per_wg */
    int32_t nblocks;
    bool has_chunks;             /* some long row is split across blocks (atomics: zero y first) */
    struct gpu_row_block *blocks;
};

struct gpu_sparse_cache;         /* cusparse.cu */

/* gpu.csr.light's cache (csr_fast.cu): long rows cut into chunks. */
struct gpu_fast_chunk {
    int32_t row, begin, end;     /* non-zeros [begin, end) of row */
};

struct gpu_fast {
    bool built;
    int32_t threads;             /* lanes per row chosen from the mean row length */
    int32_t nchunks;
    struct gpu_fast_chunk *chunks; /* tracked allocation */
    /* gpu.csr.binned: rows grouped by length into FAST_BINS bins (lanes per
     * row 1, 2, 4, 8, 16, 32); bin b is rows[bin_off[b] .. bin_off[b+1]) */
    bool binned;
    int32_t bin_off[7];
    int32_t *rows;               /* tracked allocation; NULL when one bin holds every row in order */
};

/* What a device allocation of a matrix is counted as: its format (index
 * log2(SPMV_FMT_*)), its transpose's arrays, or "other" (x and y buffers,
 * cuSPARSE buffers, kernel caches, staging during upload). */
enum { GPU_CAT_TRANSPOSE = SPMV_FORMAT_COUNT, GPU_CAT_OTHER = SPMV_FORMAT_COUNT + 1, GPU_CATS = SPMV_FORMAT_COUNT + 2 };

static inline int gpu_cat_of(spmv_format f) { return spmv_format_index(f); }

struct gpu_alloc_rec {
    void *ptr;
    size_t bytes;
    int cat;
};

struct spmv_gpu_matrix {
    int32_t rows, cols;
    int64_t nnz;
    spmv_dtype dtype;
    int32_t hack_size;           /* of the HLL built at upload */
    std::atomic<unsigned> formats; /* SPMV_FMT_* held now (read by other threads: spmv_gpu_matrix_usage) */
    unsigned pinned;             /* CSR and the upload's formats: never evicted */
    unsigned busy;               /* formats the running call reads: never evicted under it */
    uint64_t last_use[SPMV_FORMAT_COUNT];        /* ctx->tick of each format's last use (LRU eviction) */
    int cat = GPU_CAT_OTHER;     /* GPU_CAT_* new allocations count under */
    struct spmv_gpu_matrix *parent; /* for a transpose: the matrix it belongs to */
    int32_t max_row;             /* longest row */

    int32_t *row_ptr, *col;      /* CSR, always (row_ptr NULL when row_ptr64 holds the offsets) */
    int64_t *row_ptr64;          /* 64-bit row offsets: nnz past INT32_MAX (or asked for); NULL otherwise */
    void *val;
    int32_t *coo_row;            /* COO: this plus col/val above */
    struct gpu_ell ell;
    struct gpu_hll hll;          /* the upload's hack_size */
    struct gpu_hll hll_alt;      /* the last other hack_size asked for */
    struct gpu_hyb hyb;          /* the automatic width's */
    struct gpu_hyb hyb_alt;      /* the last other width asked for (gpu.hyb `width`) */
    struct gpu_pcsr pcsr;
    struct gpu_psell psell;
    struct gpu_spsell spsell;
    struct gpu_pbsr pbsr;

    void *x, *y;                 /* operand buffers, cols and rows values */
    struct gpu_adaptive adaptive;
    struct gpu_fast fast;        /* gpu.csr.light (csr_fast.cu) */
    struct gpu_sparse_cache *sparse;
    cudaTextureObject_t tex_x;   /* 0: not created */
    const void *tex_x_ptr;       /* the x buffer tex_x reads */
    int32_t tex_x_off;           /* x[0]'s element in tex_x: its base is x aligned down to ctx->tex_align */
    struct spmv_gpu_matrix *transpose; /* Aᵀ, built on first use (spmv_gpu_matrix_transpose) */

    std::vector<gpu_alloc_rec> allocs;
    size_t bytes;                /* sum of allocs */
    std::atomic<size_t> cat_bytes[GPU_CATS]; /* allocs by category (transpose: its bytes) */
    std::atomic<int64_t> slots[SPMV_FORMAT_COUNT];           /* slots of each padded format held (padding ratio) */
    std::atomic<double> convert_ms[SPMV_FORMAT_COUNT];       /* wall time of each format's last build (0: not timed) */
};

/* SPMV_ERR_LIMIT naming `what` when m holds 64-bit row offsets (past
 * INT32_MAX non-zeros): every reader of the 32-bit ones refuses through it. */
static inline int gpu_need_narrow(const struct spmv_gpu_matrix *m, const char *what, spmv_error *err)
{
    if (!m->row_ptr64)
        return SPMV_OK;
    return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                          "%s reads 32-bit row offsets; this matrix holds %lld non-zeros with 64-bit ones (past %d or "
                          "as the upload asked): gpu.csr.vector, cusparse.csr and gpu.psell take it, one column at a "
                          "time", what, (long long)m->nnz, INT32_MAX);
}

/* Counts the allocations made in its scope under category `cat` of m. */
struct gpu_cat_scope {
    struct spmv_gpu_matrix *m;
    int saved;
    gpu_cat_scope(struct spmv_gpu_matrix *mm, int cat) : m(mm), saved(mm->cat) { m->cat = cat; }
    ~gpu_cat_scope() { m->cat = saved; }
};

/* ---------------------------------------------------------------- errors */

/* Maps a CUDA error to SPMV_ERR_DEVICE_MEMORY (allocation) or
 * SPMV_ERR_DEVICE, with "what: CUDA's text" in err. Clears the non-sticky
 * last error so one failed allocation does not fail the next launch. */
int gpu_cuda_error(cudaError_t e, spmv_error *err, const char *what);
int gpu_sparse_error(cusparseStatus_t s, spmv_error *err, const char *what);

/* The launch check every kernel launch is followed by. */
int gpu_check_launch(spmv_error *err, const char *kernel);

/* ----------------------------------------------------------- allocation */

/* Allocates `bytes` on ctx's device for matrix m, refusing with
 * SPMV_ERR_DEVICE_MEMORY when it would eat into the reserve. Zero bytes
 * gives NULL and success. */
int gpu_alloc(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, void **out, size_t bytes, const char *what,
              spmv_error *err);
/* Counts block p of m (from gpu_alloc) under another category. */
void gpu_retag(spmv_gpu_matrix *m, const void *p, int cat);
/* Frees the least recently used derived format (not pinned, not busy)
 * across every matrix of ctx; false when there is none. Callers loop until
 * what they need fits. */
bool gpu_evict(spmv_gpu_ctx *ctx);
/* Lists m among ctx's resident matrices (eviction walks them); a matrix
 * is forgotten when destroyed. */
int gpu_ctx_adopt(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err);
/* Frees one derived format of m (and the cuSPARSE descriptors wrapping it). */
void gpu_drop_format(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_format f);
/* Marks format f of m used now (LRU). */
static inline void gpu_touch(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_format f)
{
    m->last_use[gpu_cat_of(f)] = ++ctx->tick;
}
/* Frees one block gpu_alloc() gave m (NULL is a no-op) and sets *p to NULL. */
void gpu_release(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, void *p);
template <typename P> static inline void gpu_release_ptr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, P **p)
{
    gpu_release(ctx, m, (void *)*p);
    *p = NULL;
}
/* gpu_release of each pointer listed (NULL ones skipped): the scratch a
 * build frees on every way out. */
static inline void gpu_release_each(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, std::initializer_list<void *> ps)
{
    for (void *p : ps)
        gpu_release(ctx, m, p);
}
/* At least `bytes` of context scratch (contents undefined). */
int gpu_scratch(spmv_gpu_ctx *ctx, size_t bytes, void **out, spmv_error *err);

/* Runs a CUB device algorithm f(temp, bytes): asks its temporary-storage
 * size, allocates it on m (tracked, so the reserve applies), runs it on
 * ctx's stream, waits, frees it. */
template <typename F>
static int gpu_cub_run(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const char *what, spmv_error *err, F f)
{
    size_t bytes = 0;
    void *tmp = NULL;
    cudaError_t e = f((void *)NULL, bytes);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, what);
    int st = gpu_alloc(ctx, m, &tmp, bytes ? bytes : 16, what, err);
    if (st)
        return st;
    e = f(tmp, bytes);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(ctx->stream);
    gpu_release(ctx, m, tmp);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, what);
}

/* A host copy of m's CSR (freshly allocated; nothing left on failure):
 * what a format built on the host starts from (PBSR, pbsr.cu). */
int gpu_download_csr(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_csr *c, spmv_error *err);
/* Copies device bytes to the host on ctx's stream and waits. */
int gpu_copy_to_host(spmv_gpu_ctx *ctx, void *dst, const void *src, size_t bytes, const char *what,
                     spmv_error *err);

/* Ends a span timed from ctx->ev_start (recorded on ctx's stream):
 * records ev_stop, waits for it and puts the milliseconds between in *ms. */
static inline cudaError_t gpu_timed_stop(spmv_gpu_ctx *ctx, float *ms)
{
    cudaError_t e;
    if ((e = cudaEventRecord(ctx->ev_stop, ctx->stream)) != cudaSuccess ||
        (e = cudaEventSynchronize(ctx->ev_stop)) != cudaSuccess)
        return e;
    return cudaEventElapsedTime(ms, ctx->ev_start, ctx->ev_stop);
}

/* Overflow-checked n * size. */
static inline int gpu_array_bytes(int64_t n, size_t size, size_t *out, spmv_error *err, const char *what)
{
    if (n < 0 || (uint64_t)n > SIZE_MAX / size)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "%s: %lld elements overflow the address space", what,
                              (long long)n);
    *out = (size_t)n * size;
    return SPMV_OK;
}

/* Grid of `threads` threads in blocks of `block` (at least one block). */
static inline unsigned gpu_grid(int64_t threads, int block)
{
    int64_t g = (threads + block - 1) / block;
    return (unsigned)(g < 1 ? 1 : g);
}

/* ------------------------------------------------- formats on the device */

void gpu_matrix_destroy(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m);
/* A matrix over device CSR arrays it borrows (32-bit offsets, values of
 * dtype): the catalogue's kernels run on it and build their formats from
 * it (its own allocations, freed with it); the arrays stay the caller's and
 * must outlive it. Not listed with the context (never evicted). */
int gpu_matrix_view(spmv_gpu_ctx *ctx, int32_t rows, int32_t cols, int64_t nnz, spmv_dtype dtype, int32_t *row_ptr,
                    int32_t *col, void *val, spmv_gpu_matrix **out, spmv_error *err);
/* Builds a format the matrix lacks (ELL, HYB, COO rows), no-op if held. */
int gpu_ensure_format(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_format f, spmv_error *err);
/* The HLL of `hack_size`: the upload's, the cached other one, or a fresh
 * build replacing the cached other one. */
int gpu_get_hll(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int32_t hack_size, struct gpu_hll **out,
                spmv_error *err);
/* The HYB of ELL width `width` (0: the automatic one, the HYB format;
 * else clamped to the longest row): the held one when its width is that,
 * the cached other one, or a fresh build replacing the cached other one. */
int gpu_get_hyb(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int32_t width, struct gpu_hyb **out, spmv_error *err);
/* The packed formats (packed.cu): build (under the padding rule, tracked
 * allocations, nothing left on failure), free, bytes as held (PCSR without
 * the CSR's row_ptr it reads). */
int gpu_build_pcsr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err);
int gpu_build_psell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err);
void gpu_free_pcsr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m);
void gpu_free_psell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m);
int gpu_build_spsell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err); /* SPMV_ERR_UNAVAILABLE: not symmetric */
void gpu_free_spsell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m);
size_t gpu_spsell_bytes(const spmv_gpu_matrix *m);
size_t gpu_pcsr_bytes(const spmv_gpu_matrix *m);
/* What gpu.pcsr reads once: the CSR's row_ptr (and its col/val where borrowed) plus its own arrays. */
size_t gpu_pcsr_read_bytes(const spmv_gpu_matrix *m);
size_t gpu_psell_bytes(const spmv_gpu_matrix *m);
/* PBSR (pbsr.cu): built on the host from a download of the CSR, then
 * uploaded (SPMV_ERR_UNSUPPORTED, remembered, for a matrix without
 * blocks); free; bytes as held (all its own). */
int gpu_build_pbsr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err);
void gpu_free_pbsr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m);
size_t gpu_pbsr_bytes(const spmv_gpu_matrix *m);
/* Device bytes of one format as held (COO counts its shared col/val). */
size_t gpu_format_bytes(const spmv_gpu_matrix *m, spmv_format f);
size_t gpu_hll_bytes(const spmv_gpu_matrix *m, const struct gpu_hll *h);
size_t gpu_hyb_bytes(const spmv_gpu_matrix *m, const struct gpu_hyb *h);

/* ------------------------------------------------------------- kernels */

/* One launch of a kernel: everything it reads, resolved. */
struct gpu_launch {
    spmv_gpu_ctx *ctx;
    spmv_gpu_matrix *m;
    spmv_params p;               /* resolved (defaults filled in) */
    int block;                   /* block_size, multiple of 32 */
    const void *x;               /* the operands of this launch: the matrix's own buffers or */
    void *y;                     /* resident vectors (spmv_gpu_apply) */
    int32_t ncols;               /* columns of x and y (SpMM kernels; 1 otherwise) */
    struct gpu_spmm *spmm;       /* cuSPARSE SpMM descriptors of this call (spmm.cu) */
    struct gpu_hll *hll;         /* the HLL of p's hack_size (HLL kernels) */
    struct gpu_hyb *hyb;         /* the HYB of p's width (gpu.hyb) */
    bool xrow;                   /* SpMM: x row-major (leading dimension ncols), batch.cu's layout;
                                  * y too for cuSPARSE, column-major for gpu.csr.spmm */
};

/* x[i] through the texture cache (a texture object over x, made by
 * gpu_tex_x_prepare): float as it is, float64 read as int2 and
 * reassembled (textures hold no doubles). */
template <typename T> __device__ __forceinline__ T gpu_tex_x(cudaTextureObject_t t, int32_t i);
template <> __device__ __forceinline__ float gpu_tex_x<float>(cudaTextureObject_t t, int32_t i)
{
    return tex1Dfetch<float>(t, i);
}
template <> __device__ __forceinline__ double gpu_tex_x<double>(cudaTextureObject_t t, int32_t i)
{
    int2 v = tex1Dfetch<int2>(t, i);
    return __hiloint2double(v.y, v.x);
}

/* prepare: runs once per call before warm-up (builds caches, formats);
 * launch: queues one y = A*x on ctx->stream, checking the launch. */
typedef int (*gpu_prepare_fn)(struct gpu_launch *l, spmv_error *err);
typedef int (*gpu_launch_fn)(struct gpu_launch *l, spmv_error *err);

int gpu_csr_scalar(struct gpu_launch *l, spmv_error *err);
int gpu_csr_warp_buffer(struct gpu_launch *l, spmv_error *err);
int gpu_csr_vector(struct gpu_launch *l, spmv_error *err);
int gpu_csr_tiled(struct gpu_launch *l, spmv_error *err);
int gpu_csr_texture_prepare(struct gpu_launch *l, spmv_error *err);
/* The texture object over l->x (m->tex_x), made on first need; `kernel`
 * names the caller in errors (csr.cu). */
int gpu_tex_x_prepare(struct gpu_launch *l, const char *kernel, spmv_error *err);
int gpu_hll_prepare(struct gpu_launch *l, spmv_error *err);
int gpu_csr_texture(struct gpu_launch *l, spmv_error *err);
int gpu_csr_adaptive_prepare(struct gpu_launch *l, spmv_error *err);
int gpu_csr_adaptive(struct gpu_launch *l, spmv_error *err);
int gpu_csr_merge(struct gpu_launch *l, spmv_error *err);
int gpu_csr_light_prepare(struct gpu_launch *l, spmv_error *err);
int gpu_csr_light(struct gpu_launch *l, spmv_error *err);
int gpu_csr_binned_prepare(struct gpu_launch *l, spmv_error *err);
int gpu_csr_binned(struct gpu_launch *l, spmv_error *err);
int gpu_ell_run(struct gpu_launch *l, spmv_error *err);
int gpu_hll_run(struct gpu_launch *l, spmv_error *err);
int gpu_hyb_run(struct gpu_launch *l, spmv_error *err);
int gpu_coo_atomic(struct gpu_launch *l, spmv_error *err);
int gpu_coo_sliced(struct gpu_launch *l, spmv_error *err);
int gpu_scoo(struct gpu_launch *l, spmv_error *err);
int gpu_cusparse_csr_prepare(struct gpu_launch *l, spmv_error *err);
int gpu_cusparse_csr(struct gpu_launch *l, spmv_error *err);
int gpu_cusparse_coo_prepare(struct gpu_launch *l, spmv_error *err);
int gpu_cusparse_coo(struct gpu_launch *l, spmv_error *err);
int gpu_cusparse_sell_prepare(struct gpu_launch *l, spmv_error *err);
int gpu_cusparse_sell(struct gpu_launch *l, spmv_error *err);
int gpu_pcsr_run(struct gpu_launch *l, spmv_error *err);
int gpu_psell_run(struct gpu_launch *l, spmv_error *err);
int gpu_spsell_run(struct gpu_launch *l, spmv_error *err);
int gpu_pbsr_run(struct gpu_launch *l, spmv_error *err);
/* y += A*x for nnz COO triplets (atomics; gpu.coo.atomic and HYB's COO part). */
int gpu_coo_atomic_add(struct gpu_launch *l, int64_t nnz, const int32_t *row, const int32_t *col, const void *val,
                       spmv_error *err);
/* SpMM (k > 1 columns, column-major x and y): gpu.csr.spmm (spmm.cu) and
 * cuSPARSE's SpMM behind cusparse.csr (cusparse.cu). */
int gpu_csr_spmm(struct gpu_launch *l, spmv_error *err);
int gpu_cusparse_csr_spmm(struct gpu_launch *l, spmv_error *err);
int gpu_cusparse_spmm_prepare(struct gpu_launch *l, spmv_error *err);
void gpu_cusparse_spmm_free(struct gpu_launch *l);
/* What spmv_gpu_apply does before its timed runs, for a caller that times
 * its own (batch.cu): the launch of GPU kernel k on m for ncols columns of
 * device operands x, y (x row-major when xrow), the kernel's format built
 * if missing (*fmt_bytes its bytes), its prepare step or the cuSPARSE SpMM
 * descriptors made; *fn is the launcher. m->busy gets the formats read:
 * the caller saves m->busy before and puts it back after, and calls
 * gpu_cusparse_spmm_free(l). */
int gpu_launch_prepare(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                       const void *x, void *y, int32_t ncols, bool xrow, struct gpu_launch *l, gpu_launch_fn *fn,
                       size_t *fmt_bytes, spmv_error *err);
/* Device memory that belongs to no matrix (vectors, temporaries), counted
 * in ctx->used and kept out of the reserve. */
int gpu_ctx_alloc(spmv_gpu_ctx *ctx, void **out, size_t bytes, const char *what, spmv_error *err);
void gpu_ctx_free(spmv_gpu_ctx *ctx, void *p, size_t bytes);
/* Frees a matrix's cuSPARSE descriptors (buffers are tracked allocations). */
void gpu_sparse_cache_free(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m);
/* Frees the descriptors that wrap format f's arrays (COO, HLL), before f is freed. */
void gpu_sparse_cache_drop(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_format f);
/* Frees the adaptive row blocks. */
void gpu_adaptive_free(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m);
/* ctx's cuBLAS handle, made on first use on its stream (blas.cu). */
int gpu_blas_handle(spmv_gpu_ctx *ctx, spmv_error *err);
/* Whether k is one of the GPU SpMSpM kernels (gpu/spmspm.cu binds it). */
bool gpu_spmspm_bound(const spmv_kernel *k);

/* ------------------------------------------- conversion helpers (host) */

/* The block of the fill and conversion kernels (transfer.cu, build.cu). */
#define FILL_BLOCK 256
#define FILL_GRID(n) gpu_grid((n), FILL_BLOCK), FILL_BLOCK

/* A grid-stride kernel's grid: enough blocks to fill the device, no more
 * than the work needs. */
static inline unsigned gpu_stride_grid(const spmv_gpu_ctx *ctx, int64_t n)
{
    int64_t want = (n + FILL_BLOCK - 1) / FILL_BLOCK, cap = (int64_t)ctx->sm_count * 32;
    return (unsigned)(want < 1 ? 1 : want < cap ? want : cap);
}

static inline size_t gpu_vsize(const spmv_gpu_matrix *m) { return spmv_dtype_size(m->dtype); }

/* Waits for the context's stream: SPMV_OK, or the CUDA error as `what`. */
int gpu_sync_stream(spmv_gpu_ctx *ctx, spmv_error *err, const char *what);
/* The device ELL, HLL and HYB freed, their bytes untracked (build.cu). */
void gpu_free_ell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, struct gpu_ell *e);
void gpu_free_hll(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, struct gpu_hll *h);
void gpu_free_hyb(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, struct gpu_hyb *h);
/* The padding ratio of format f as held (residency.cu). */
double gpu_format_padding(const spmv_gpu_matrix *m, spmv_format f);

/* ------------------------------- operators of solver objects (devcsr.cu) */

/* Every array of a solver object (AMG hierarchy, preconditioner) is at
 * least one byte, an empty one too: a pointer is NULL only when never
 * allocated, and a free gives back what was taken (gpu_nz on both sides). */
static inline size_t gpu_nz(size_t bytes) { return bytes ? bytes : 1; }
/* gpu_ctx_alloc of gpu_nz(bytes), added to *count (the object's bytes). */
int gpu_alloc_counted(spmv_gpu_ctx *ctx, void **p, size_t bytes, size_t *count, const char *what, spmv_error *err);
/* n float64 host values to dst on the device as dtype (converted on the
 * host); waits when it converted, so the staging can go. */
int gpu_put_values(spmv_gpu_ctx *ctx, void *dst, const double *src, int64_t n, spmv_dtype dtype, spmv_error *err);
/* out = in, n values converted from one dtype to the other (a copy when
 * the same), on ctx's stream. */
int gpu_cast(spmv_gpu_ctx *ctx, const void *in, spmv_dtype from, void *out, spmv_dtype to, int64_t n,
             spmv_error *err);

/* A CSR a solver object owns on the device (not a resident matrix: no
 * formats, no eviction), float64 or float32, with its cuSPARSE descriptor
 * and an SpMV buffer made on first use. */
struct gpu_dcsr {
    int32_t rows, cols;
    int64_t nnz;
    spmv_dtype dtype;
    int32_t *row_ptr, *col;
    void *val;
    cusparseSpMatDescr_t descr;
    void *buf;
    size_t buf_bytes;
    void *mm_buf;          /* gpu_dcsr_mm's SpMM buffer, grown for more columns */
    size_t mm_buf_bytes;
};

/* Copies float64 host CSR h (32-bit offsets) to d, values as dtype. */
int gpu_dcsr_copy(spmv_gpu_ctx *ctx, const spmv_csr *h, spmv_dtype dtype, struct gpu_dcsr *d, size_t *count,
                  spmv_error *err);
/* y = alpha M x + beta y with cuSPARSE, x and y of M's dtype. */
int gpu_dcsr_mv(spmv_gpu_ctx *ctx, struct gpu_dcsr *m, double alpha, const void *x, double beta, void *y,
                size_t *count, spmv_error *err);
/* The same on k columns at once: x (cols x k) and y (rows x k)
 * column-major, one cuSPARSE SpMM (k = 1: gpu_dcsr_mv). */
int gpu_dcsr_mm(spmv_gpu_ctx *ctx, struct gpu_dcsr *m, int32_t k, double alpha, const void *x, double beta, void *y,
                size_t *count, spmv_error *err);
void gpu_dcsr_free(spmv_gpu_ctx *ctx, struct gpu_dcsr *m);

/* ------------------------------------------------------ device helpers */

template <typename T> struct gpu_dtype_of;
template <> struct gpu_dtype_of<double> { static const spmv_dtype value = SPMV_FLOAT64; };
template <> struct gpu_dtype_of<float> { static const spmv_dtype value = SPMV_FLOAT32; };

/* Sum over the `width` lanes of a group of a warp (width a power of two);
 * every lane of the warp must call it. */
template <typename T> __device__ __forceinline__ T gpu_group_sum(T v, int width)
{
    for (int off = width / 2; off > 0; off /= 2)
        v += __shfl_down_sync(GPU_FULL_MASK, v, off, width);
    return v;
}

#endif /* SPMV_GPU_CUH */
