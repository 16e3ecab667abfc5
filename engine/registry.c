/* registry.c — the kernel catalogue: the one table of kernels and their
 * parameters.
 *
 * Everything that lists kernels reads this table: GET /v1/kernels, the
 * docs (tools/spmv-kernels.c prints docs/kernels.md's catalogue from it and
 * test_registry checks the two agree), the benchmark sweeps and the tests.
 * Each entry names its implementation (spmv_impl), which its backend binds:
 * engine/cpu/run.c and engine/cpu/spmspm.c the CPU kernels, engine/gpu/run.cu
 * and engine/gpu/spmspm.cu the GPU ones (spmv_cpu_kernel_bound and
 * spmv_gpu_kernel_bound say whether a kernel is bound; test_registry checks
 * every one is). Parameters are validated here, once, so every
 * caller refuses a bad value with the same message.
 */
#include <string.h>

#include "registry.h"
#include "spmv.h"

#define P(id) (1u << (id))
#define BS P(SPMV_PARAM_BLOCK_SIZE)

static const spmv_param_desc params[SPMV_PARAM_COUNT] = {
    [SPMV_PARAM_BLOCK_SIZE] = {"block_size", 256, 32, 1024,
                               "GPU threads per block, a multiple of 32 (the warp size)"},
    [SPMV_PARAM_HACK_SIZE] = {"hack_size", 0, 1, 1024,
                              "rows per HLL / sliced-ELL slice (0 = the matrix's own, set at upload, 32 unless "
                              "given there)"},
    [SPMV_PARAM_CHUNK] = {"chunk", 0, 1, 65536,
                          "cpu.csr.chunked, the count form of `span`: x split into `chunk` chunks of "
                          "ceil(cols/chunk) columns (0 = not given: `span` rules); never with `span`"},
    [SPMV_PARAM_ALG] = {"alg", 1, 1, 2, "cuSPARSE SpMV algorithm: 1 = ALG1, 2 = ALG2"},
    [SPMV_PARAM_THREADS] = {"threads", 0, 0, 1024,
                            "CPU: OpenMP threads (0 = all); gpu.csr.vector: threads per row "
                            "(0 = from the mean row length, else a power of two 2..32); gpu.psell: warps per "
                            "slice, so threads per row (0 or 1: one)"},
    [SPMV_PARAM_NNZ_PER_WG] = {"nnz_per_wg", 2048, 64, 1048576,
                               "gpu.csr.adaptive: non-zeros per row block (work group)"},
    [SPMV_PARAM_SPAN] = {"span", 8, 1, INT32_MAX,
                         "cpu.csr.chunked: chunk width over x in columns (the CSR study's span, docs/kernels.md); one pass over the "
                         "rows per chunk, ceil(cols/span) passes, each counted in max_request_work"},
    [SPMV_PARAM_SCHEDULE] = {"schedule", 1, 1, 2,
                             "cpu.hll.omp: 1 = static (each thread one contiguous, equal range of slices, "
                             "as the HLL study), 2 = dynamic (groups of 8 slices handed to whichever thread is free)"},
    [SPMV_PARAM_OUTPUT] = {"output", 1, 1, 2,
                           "gpu.spmspm.thread_row and block_row, how C's entries find their place: 1 = atomic (the "
                           "SpMSpM study's kernels 0 and 1: one global atomic counter hands each entry a slot, C "
                           "comes out as unordered COO triplets and is sorted into CSR), 2 = scan (a count pass, a "
                           "scan of the row counts, each row written in place in order)"},
    [SPMV_PARAM_ACCUMULATE] = {"accumulate", 1, 1, 2,
                               "gpu.spmspm.warp_nnz, where products are summed: 1 = shared (the SpMSpM study's "
                               "kernel 3: a block per row of A, a shared-memory row accumulator of 32 columns, the "
                               "first warp writing), 2 = sort (every product written, then a radix sort and a "
                               "reduce-by-key)"},
    [SPMV_PARAM_X_CACHE] = {"x_cache", 1, 1, 2,
                            "gpu.hll: how x is read: 1 = through the texture cache (tex1Dfetch on a texture object, "
                            "as the HLL study), 2 = through the read-only data cache (__ldg)"},
    [SPMV_PARAM_WIDTH] = {"width", 0, 1, INT32_MAX,
                          "gpu.hyb: entries per row in the ELL part, the rest of a longer row in the COO part "
                          "(0 = the smallest width holding two thirds of the rows whole; clamped to the longest row)"},
    [SPMV_PARAM_LAUNCHES] = {"launches", 1, 1, 2,
                             "gpu.hyb: 1 = one kernel, the ELL rows and the COO entries both added atomically into a "
                             "zeroed y (the HYB study's atomic case), 2 = the ELL kernel writes y, then the COO "
                             "entries are added atomically"},
    [SPMV_PARAM_ROW_BLOCKS] = {"row_blocks", 1, 1, 2,
                               "gpu.csr.adaptive: 1 = the study's row blocks (rows gathered while their non-zeros fit "
                               "`nnz_per_wg`, a longer row alone), 2 = blocks starting at bins of `nnz_per_wg` "
                               "non-zeros, every 1024 rows and around long rows"},
    [SPMV_PARAM_LANES] = {"lanes", 4, 1, 32,
                          "gpu.coo.scoo: shared-memory lanes per row (thread t adds into lane t mod `lanes`); a slice "
                          "holds 16 KiB / (`lanes` x value size) rows, so fewer lanes, taller slices"},
    [SPMV_PARAM_PATTERNS] = {"patterns", 1, 1, 2,
                             "gpu.psell with one warp a slice: 1 = a diagonal slice that follows one of the "
                             "matrix's slice patterns (the same offsets from its first row and, uniform, the same "
                             "values as many others) reads them from shared memory, not from its bases and values; "
                             "2 = every slice from its own arrays (the sums are the same either way)"},
};

static const spmv_kernel kernels[] = {
    {"cpu.csr.serial", SPMV_DEVICE_CPU, SPMV_FMT_CSR, 0,
     "one thread, row by row; the reference and the speedup baseline", SPMV_OP_SPMV, SPMV_MAX_K,
     SPMV_IMPL_CPU_CSR_SERIAL},
    {"cpu.csr.chunked", SPMV_DEVICE_CPU, SPMV_FMT_CSR, P(SPMV_PARAM_SPAN) | P(SPMV_PARAM_CHUNK),
     "one thread; x in chunks of `span` columns (or `chunk` chunks), a cursor per row, one pass over the rows "
     "per chunk adding each row's entries in that chunk, so a pass reads only its chunk of x (temporal locality)",
     SPMV_OP_SPMV, 1, SPMV_IMPL_CPU_CSR_CHUNKED},
    {"cpu.csr.omp", SPMV_DEVICE_CPU, SPMV_FMT_CSR, P(SPMV_PARAM_THREADS),
     "OpenMP; rows split statically so each thread gets an equal share of non-zeros "
     "(binary search on row_ptr)", SPMV_OP_SPMV, SPMV_MAX_K, SPMV_IMPL_CPU_CSR_OMP},
    {"cpu.ell.omp", SPMV_DEVICE_CPU, SPMV_FMT_ELL, P(SPMV_PARAM_THREADS),
     "OpenMP over blocks of rows of the column-major ELL", SPMV_OP_SPMV, 1, SPMV_IMPL_CPU_ELL_OMP},
    {"cpu.hll.omp", SPMV_DEVICE_CPU, SPMV_FMT_HLL,
     P(SPMV_PARAM_HACK_SIZE) | P(SPMV_PARAM_THREADS) | P(SPMV_PARAM_SCHEDULE),
     "OpenMP over HLL slices: by default each thread one contiguous, equal range of slices; `schedule` 2 hands "
     "out groups of 8 slices dynamically", SPMV_OP_SPMV, 1, SPMV_IMPL_CPU_HLL_OMP},
    {"cpu.pcsr.omp", SPMV_DEVICE_CPU, SPMV_FMT_PCSR, P(SPMV_PARAM_THREADS),
     "OpenMP over rows of the packed CSR, split as cpu.csr.omp splits them: 1/2-byte column deltas from a "
     "per-row base (wide rows' columns apart), values as codes into a table of the distinct values, or none "
     "when every value is equal", SPMV_OP_SPMV, 1, SPMV_IMPL_CPU_PCSR_OMP},
    {"cpu.psell.omp", SPMV_DEVICE_CPU, SPMV_FMT_PSELL, P(SPMV_PARAM_THREADS),
     "OpenMP over the 32-row slices of the packed sliced ELL: column indices of 0 (diagonal slice), 1, 2 or 4 "
     "bytes per slice (deltas from a per-slot base), values packed as in cpu.pcsr.omp (one a slot in a uniform "
     "slice)", SPMV_OP_SPMV, 1, SPMV_IMPL_CPU_PSELL_OMP},
    {"cpu.spsell.omp", SPMV_DEVICE_CPU, SPMV_FMT_SPSELL, P(SPMV_PARAM_THREADS),
     "OpenMP over the slices of the symmetric packed sliced ELL (exactly symmetric square matrices only): "
     "cpu.psell.omp's slices, and mirrored diagonal slices that store only their diagonal and upper values and "
     "read each lower value from the earlier row that stores it", SPMV_OP_SPMV, 1, SPMV_IMPL_CPU_SPSELL_OMP},
    {"gpu.csr.scalar", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS, "one thread per row", SPMV_OP_SPMV, 1,
     SPMV_IMPL_GPU_CSR_SCALAR},
    {"gpu.csr.warp_buffer", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS,
     "one warp per row, the 32 partial sums through a global buffer, reduced there by the warp as a tree",
     SPMV_OP_SPMV, 1,
     SPMV_IMPL_GPU_CSR_WARP_BUFFER},
    {"gpu.csr.vector", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS | P(SPMV_PARAM_THREADS),
     "`threads` threads per row (a power of two 2..32, 0: chosen from the mean row length), "
     "shuffle reduction, read-only loads", SPMV_OP_SPMV, 1, SPMV_IMPL_GPU_CSR_VECTOR},
    {"gpu.csr.tiled", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS, "per-warp shared-memory tiles of x (tile 128)", SPMV_OP_SPMV, 1,
     SPMV_IMPL_GPU_CSR_TILED},
    {"gpu.csr.texture", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS, "thread per row, x read through a texture object", SPMV_OP_SPMV, 1,
     SPMV_IMPL_GPU_CSR_TEXTURE},
    {"gpu.csr.adaptive", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS | P(SPMV_PARAM_NNZ_PER_WG) | P(SPMV_PARAM_ROW_BLOCKS),
     "row blocks gathering rows while their non-zeros fit `nnz_per_wg`: CSR-Stream (several threads per row, "
     "tree in shared memory) / CSR-Vector (a row of up to 64, one warp) / CSR-VectorL (a longer row, the block; "
     "past 4 `nnz_per_wg`, blocks and atomics); `row_blocks` 2: the earlier binned form", SPMV_OP_SPMV, 1,
     SPMV_IMPL_GPU_CSR_ADAPTIVE},
    {"gpu.csr.merge", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS,
     "merge-path split of rows and non-zeros, equal work per thread", SPMV_OP_SPMV, 1, SPMV_IMPL_GPU_CSR_MERGE},
    {"gpu.ell", SPMV_DEVICE_GPU, SPMV_FMT_ELL, BS, "thread per row over the column-major ELL", SPMV_OP_SPMV, 1,
     SPMV_IMPL_GPU_ELL},
    {"gpu.hll", SPMV_DEVICE_GPU, SPMV_FMT_HLL, BS | P(SPMV_PARAM_HACK_SIZE) | P(SPMV_PARAM_X_CACHE),
     "thread per row over HLL slices, x through the texture cache (`x_cache` 2: the read-only cache)", SPMV_OP_SPMV,
     1, SPMV_IMPL_GPU_HLL},
    {"gpu.coo.atomic", SPMV_DEVICE_GPU, SPMV_FMT_COO, BS, "thread per non-zero, atomic adds into y", SPMV_OP_SPMV, 1,
     SPMV_IMPL_GPU_COO_ATOMIC},
    {"gpu.coo.sliced", SPMV_DEVICE_GPU, SPMV_FMT_COO, BS, "sliced COO with shared-memory accumulation", SPMV_OP_SPMV, 1,
     SPMV_IMPL_GPU_COO_SLICED},
    {"gpu.coo.scoo", SPMV_DEVICE_GPU, SPMV_FMT_COO, BS | P(SPMV_PARAM_LANES),
     "sliced COO (SCOO): the row-sorted COO in slices of rows whose accumulator of `lanes` lanes per row fits 16 "
     "KiB of shared memory, blocks per slice adding their entries there (shared atomics, lane = thread mod "
     "`lanes`), lanes summed per row into y", SPMV_OP_SPMV, 1, SPMV_IMPL_GPU_SCOO},
    {"gpu.hyb", SPMV_DEVICE_GPU, SPMV_FMT_HYB, BS | P(SPMV_PARAM_WIDTH) | P(SPMV_PARAM_LAUNCHES),
     "ELL part of `width` entries per row (thread per row) plus COO part, in one launch both added atomically "
     "into y (`launches` 2: the ELL kernel writes y, then the COO atomics)", SPMV_OP_SPMV, 1, SPMV_IMPL_GPU_HYB},
    {"cusparse.csr", SPMV_DEVICE_GPU, SPMV_FMT_CSR, P(SPMV_PARAM_ALG),
     "cuSPARSE generic SpMV on CSR; buffer and preprocessing done once per matrix", SPMV_OP_SPMV, SPMV_MAX_K,
     SPMV_IMPL_CUSPARSE_CSR},
    {"cusparse.coo", SPMV_DEVICE_GPU, SPMV_FMT_COO, P(SPMV_PARAM_ALG), "cuSPARSE generic SpMV on COO", SPMV_OP_SPMV, 1,
     SPMV_IMPL_CUSPARSE_COO},
    {"cusparse.sell", SPMV_DEVICE_GPU, SPMV_FMT_HLL, P(SPMV_PARAM_HACK_SIZE),
     "cuSPARSE generic SpMV on sliced ELL (cusparseCreateSlicedEll)", SPMV_OP_SPMV, 1, SPMV_IMPL_CUSPARSE_SELL},
    {"gpu.csr.light", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS | P(SPMV_PARAM_THREADS),
     "`threads` lanes per row (1..32, 0: from the mean row length), streaming loads of the matrix so x "
     "stays in L2, rows over 8192 entries cut into 4096-entry chunks (one block each, atomics)", SPMV_OP_SPMV, 1,
     SPMV_IMPL_GPU_CSR_LIGHT},
    {"gpu.csr.binned", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS,
     "gpu.csr.light with rows binned by length (1, 2, 4, 8, 16 or 32 lanes per row, one launch per bin, "
     "a row list per bin), long rows chunked", SPMV_OP_SPMV, 1, SPMV_IMPL_GPU_CSR_BINNED},
    {"gpu.csr.spmm", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS,
     "SpMM: a warp per row, all k columns of x in one pass over A (register tiles of up to 8 columns)",
     SPMV_OP_SPMV, SPMV_MAX_K, SPMV_IMPL_GPU_CSR_SPMM},
    {"gpu.pcsr", SPMV_DEVICE_GPU, SPMV_FMT_PCSR, BS | P(SPMV_PARAM_THREADS),
     "packed CSR (built on first use): 1/2-byte column deltas from a per-row base, values as 1/2-byte codes "
     "into a table of the distinct values (none when all are equal); `threads` lanes per row (1..32, 0: from "
     "the mean row length)", SPMV_OP_SPMV, 1, SPMV_IMPL_GPU_PCSR},
    {"gpu.psell", SPMV_DEVICE_GPU, SPMV_FMT_PSELL, BS | P(SPMV_PARAM_THREADS) | P(SPMV_PARAM_PATTERNS),
     "packed sliced ELL (built on first use): a warp per 32-row slice, 1/2-byte column deltas from a base "
     "per slice and slot (none in a diagonal slice), values as codes into a table kept in shared memory (one a "
     "slot in a uniform slice, none when all are equal); diagonal slices that share their offsets (a "
     "stencil's) read them from a pattern in shared memory (`patterns` 1, 2: not); `threads` 2..32 (a power of two): "
     "that many warps a slice, each a contiguous part of its slots, the parts' sums added in order (0 or 1: "
     "one warp, the slots in order)",
     SPMV_OP_SPMV, 1, SPMV_IMPL_GPU_PSELL},
    {"gpu.spsell", SPMV_DEVICE_GPU, SPMV_FMT_SPSELL, BS,
     "symmetric packed sliced ELL (exactly symmetric square matrices only; built on the host on first use and "
     "uploaded): gpu.psell's warp per slice, mirrored diagonal slices storing only their diagonal and upper "
     "values, each lower value read from the earlier row that stores it",
     SPMV_OP_SPMV, 1, SPMV_IMPL_GPU_SPSELL},
    {"auto", SPMV_DEVICE_GPU, SPMV_FMT_CSR, 0,
     "tunes on first use (or POST /v1/matrices/{id}/tune): times candidate kernels x parameters of the "
     "matrix's device within a budget, keeps the fastest verified one with the matrix (the best cuSPARSE "
     "candidate on a GPU, cpu.csr.omp on the host, unless another is 3 % faster; engine/tune.c)",
     SPMV_OP_SPMV, SPMV_MAX_K, SPMV_IMPL_AUTO},
    /* SpMSpM, C = A*B (engine/spmspm.c, cpu/spmspm.c, gpu/spmspm.cu) */
    {"cpu.spmspm.serial", SPMV_DEVICE_CPU, SPMV_FMT_CSR, 0,
     "C = A*B row by row, dense accumulator over B's columns (sort and merge when B is wide); the reference",
     SPMV_OP_SPMSPM, 1, SPMV_IMPL_CPU_SPMSPM_SERIAL},
    {"cpu.spmspm.omp", SPMV_DEVICE_CPU, SPMV_FMT_CSR, P(SPMV_PARAM_THREADS),
     "C = A*B, rows of A over OpenMP threads, a dense accumulator per thread", SPMV_OP_SPMSPM, 1,
     SPMV_IMPL_CPU_SPMSPM_OMP},
    {"cpu.spmspm.hash", SPMV_DEVICE_CPU, SPMV_FMT_CSR, 0,
     "C = A*B as the SpMSpM study's sequential baseline (docs/kernels.md): A's entries as COO triplets, each times B's row (CSR), "
     "summed into a hash map keyed by i*cols(B)+j, sorted into C at the end; one thread",
     SPMV_OP_SPMSPM, 1, SPMV_IMPL_CPU_SPMSPM_HASH},
    {"gpu.spmspm.thread_row", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS | P(SPMV_PARAM_OUTPUT),
     "C = A*B, a thread per row of A, output columns in chunks of 32 with a private accumulator; `output` 1: each "
     "entry's slot from one global atomic counter (COO triplets, then sorted), 2: count pass and scan",
     SPMV_OP_SPMSPM, 1, SPMV_IMPL_GPU_SPMSPM_THREAD_ROW},
    {"gpu.spmspm.block_row", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS | P(SPMV_PARAM_OUTPUT),
     "C = A*B, a block per row of A, shared-memory accumulator over column chunks (shared atomics); `output` 1: "
     "each entry's slot from one global atomic counter (COO triplets, then sorted), 2: count pass and scan",
     SPMV_OP_SPMSPM, 1, SPMV_IMPL_GPU_SPMSPM_BLOCK_ROW},
    {"gpu.spmspm.block_counter", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS,
     "C = A*B as block_row, output through a block-private counter and one global atomic per block, "
     "then a segmented sort", SPMV_OP_SPMSPM, 1, SPMV_IMPL_GPU_SPMSPM_BLOCK_COUNTER},
    {"gpu.spmspm.warp_nnz", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS | P(SPMV_PARAM_ACCUMULATE),
     "C = A*B, a warp per non-zero of A walking B's row coalesced; `accumulate` 1: a block per row of A, products "
     "summed in a shared row accumulator of 32 columns, the first warp writing with ballot/popc and one global "
     "atomic per chunk (COO triplets, then sorted); 2: every product written (ballot/popc, one atomic per warp "
     "per 32 products), then sort and reduce", SPMV_OP_SPMSPM, 1, SPMV_IMPL_GPU_SPMSPM_WARP_NNZ},
    {"gpu.spmspm.warp_nnz_wide", SPMV_DEVICE_GPU, SPMV_FMT_CSR, BS,
     "C = A*B as warp_nnz `accumulate` 1 with column chunks of 512, every warp of the block writing its 32-column "
     "part (ballot/popc, one global atomic per warp per part); COO triplets, then sorted",
     SPMV_OP_SPMSPM, 1, SPMV_IMPL_GPU_SPMSPM_WARP_NNZ_WIDE},
    {"cusparse.spgemm", SPMV_DEVICE_GPU, SPMV_FMT_CSR, 0,
     "C = A*B with cuSPARSE generic SpGEMM (work estimation, compute, copy)", SPMV_OP_SPMSPM, 1,
     SPMV_IMPL_CUSPARSE_SPGEMM},
    /* Packed block CSR (engine/pbsr.c): matrices of complete b x b blocks only */
    {"cpu.pbsr.omp", SPMV_DEVICE_CPU, SPMV_FMT_PBSR, P(SPMV_PARAM_THREADS),
     "OpenMP over block rows of the packed block CSR (b x b blocks, b = 6, 4, 3 or 2 detected, complete blocks "
     "only: a matrix without them is refused): one 1/2-byte block-column delta per block from a per-block-row "
     "base, values packed as in cpu.pcsr.omp; sums in cpu.csr.serial's order", SPMV_OP_SPMV, 1,
     SPMV_IMPL_CPU_PBSR_OMP},
    {"gpu.pbsr", SPMV_DEVICE_GPU, SPMV_FMT_PBSR, BS | P(SPMV_PARAM_THREADS),
     "packed block CSR (built on the host on first use, complete b x b blocks only): `threads` lanes per block "
     "row (1..32, 0: from the mean blocks a block row), a lane per block with b sums, its b values of x read "
     "once, the b*b value components coalesced across the lanes, shuffle reduction", SPMV_OP_SPMV, 1,
     SPMV_IMPL_GPU_PBSR},
};

#define NKERNELS (sizeof kernels / sizeof kernels[0])

const spmv_param_desc *spmv_param_get(spmv_param_id id)
{
    return (unsigned)id < SPMV_PARAM_COUNT ? &params[id] : NULL;
}

const char *spmv_op_name(spmv_op op) { return op == SPMV_OP_SPMSPM ? "spmspm" : "spmv"; }

size_t spmv_kernel_count(void) { return NKERNELS; }

const spmv_kernel *spmv_kernel_at(size_t i) { return i < NKERNELS ? &kernels[i] : NULL; }

const spmv_kernel *spmv_kernel_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < NKERNELS; i++)
        if (strcmp(kernels[i].name, name) == 0)
            return &kernels[i];
    return NULL;
}

bool spmv_kernel_available(const spmv_kernel *k, const char **reason)
{
    const char *why = NULL;
    if (!k) {
        why = "no such kernel";
    } else if (spmv_kernel_is_auto(k)) {
        /* auto chooses among the kernels that can run where the matrix is
         * held (the CPU ones for a host-held matrix), so it always runs. */
    } else if (k->device == SPMV_DEVICE_GPU) {
        const char *gpu_why = NULL;
        if (spmv_gpu_count(&gpu_why) <= 0)
            why = gpu_why ? gpu_why : "no usable GPU on this host";
    }
    if (reason)
        *reason = why;
    return why == NULL;
}

/* Rules beyond a plain range, per kernel. */
static int check_special(const spmv_kernel *k, const spmv_params *r, spmv_error *err)
{
    int32_t bs = r->v[SPMV_PARAM_BLOCK_SIZE];
    if ((k->params & BS) && bs % 32 != 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                              "%s: block_size %d is not a multiple of 32 (range 32..1024)", k->name, bs);
    int32_t t = r->v[SPMV_PARAM_THREADS];
    if (k->impl == SPMV_IMPL_GPU_CSR_VECTOR && t != 0 && (t < 2 || t > 32 || (t & (t - 1))))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                              "%s: threads %d per row must be 0 (auto) or a power of two in 2..32",
                              k->name, t);
    if ((k->impl == SPMV_IMPL_GPU_CSR_LIGHT || k->impl == SPMV_IMPL_GPU_PCSR || k->impl == SPMV_IMPL_GPU_PBSR ||
         k->impl == SPMV_IMPL_GPU_PSELL) &&
        t != 0 && (t > 32 || (t & (t - 1))))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                              "%s: threads %d per row must be 0 (auto) or a power of two in 1..32", k->name, t);
    return SPMV_OK;
}

/* cpu.csr.chunked takes its width as `span` or as a count `chunk`, one of
 * the two: given `chunk`, the default span does not apply. */
static int resolve_chunked(const spmv_kernel *k, const spmv_params *p, spmv_params *r, spmv_error *err)
{
    if (k->impl != SPMV_IMPL_CPU_CSR_CHUNKED || !p || p->v[SPMV_PARAM_CHUNK] == 0)
        return SPMV_OK;
    if (p->v[SPMV_PARAM_SPAN] != 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                              "%s: give span (chunk width, %d given) or chunk (number of chunks, %d given), not both",
                              k->name, p->v[SPMV_PARAM_SPAN], p->v[SPMV_PARAM_CHUNK]);
    r->v[SPMV_PARAM_SPAN] = 0;
    return SPMV_OK;
}

int spmv_params_resolve(const spmv_kernel *k, const spmv_params *p, spmv_params *resolved, spmv_error *err)
{
    spmv_params r;
    memset(&r, 0, sizeof r);
    if (!k)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "no kernel given");
    for (int id = 0; id < SPMV_PARAM_COUNT; id++) {
        const spmv_param_desc *d = &params[id];
        int32_t v = p ? p->v[id] : 0;
        bool takes = (k->params & P(id)) != 0;
        if (v != 0 && !takes)
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s takes no parameter %s (given %d)",
                                  k->name, d->name, v);
        if (!takes)
            continue;
        if (v == 0)
            v = d->def; /* a default of 0 stays 0: the kernel chooses */
        if (v != 0 && (v < d->min || v > d->max))
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: %s %d out of range %d..%d",
                                  k->name, d->name, v, d->min, d->max);
        r.v[id] = v;
    }
    int st = check_special(k, &r, err);
    if (st == SPMV_OK)
        st = resolve_chunked(k, p, &r, err);
    if (st == SPMV_OK && resolved)
        *resolved = r;
    return st;
}

/* ----------------------------------------------------------------- work */

int64_t spmv_chunked_width(const spmv_params *p, int32_t cols)
{
    int64_t span = p ? p->v[SPMV_PARAM_SPAN] : 0, chunks = p ? p->v[SPMV_PARAM_CHUNK] : 0;
    if (span <= 0 && chunks > 0)
        span = ((int64_t)cols + chunks - 1) / chunks;
    if (span <= 0 && chunks <= 0)
        span = params[SPMV_PARAM_SPAN].def;
    return span < 1 ? 1 : span;
}

int64_t spmv_kernel_work(const spmv_kernel *k, const spmv_params *p, int32_t rows, int32_t cols, int64_t nnz)
{
    int64_t base = nnz > rows ? nnz : rows;
    if (base < 1)
        base = 1;
    if (!k || k->impl != SPMV_IMPL_CPU_CSR_CHUNKED || cols <= 0)
        return base;
    int64_t w = spmv_chunked_width(p, cols), passes = ((int64_t)cols + w - 1) / w;
    /* passes <= 2^31 and rows < 2^31: the product fits in 62 bits */
    int64_t extra = (passes - 1) * (int64_t)rows;
    return extra > INT64_MAX - base ? INT64_MAX : base + extra;
}

bool spmv_kernel_work_excessive(int64_t work, int32_t rows, int64_t nnz)
{
    int64_t base = nnz > rows ? nnz : rows;
    if (base < 1)
        base = 1;
    return work > SPMV_WORK_EXCESS_FLOOR && work / SPMV_WORK_EXCESS > base;
}

/* ------------------------------------------------------------- markdown */

static void markdown_params(FILE *out, unsigned mask)
{
    const char *sep = "";
    if (!mask)
        fputs("none", out);
    for (int id = 0; id < SPMV_PARAM_COUNT; id++)
        if (mask & P(id)) {
            fprintf(out, "%s`%s` %d (%d..%d)", sep, params[id].name, params[id].def, params[id].min,
                    params[id].max);
            sep = ", ";
        }
}

void spmv_registry_markdown(FILE *out)
{
    fprintf(out, "%s\n\n", SPMV_REGISTRY_MD_BEGIN);
    fputs("| kernel | op | device | format | columns k | parameters: default (range) | what it does |\n", out);
    fputs("| --- | --- | --- | --- | --- | --- | --- |\n", out);
    for (size_t i = 0; i < NKERNELS; i++) {
        const spmv_kernel *k = &kernels[i];
        fprintf(out, "| `%s` | %s | %s | %s | ", k->name, spmv_op_name(k->op),
                k->device == SPMV_DEVICE_CPU ? "cpu" : "gpu", spmv_format_name(k->format));
        if (k->op == SPMV_OP_SPMV && spmv_kernel_max_k(k) > 1)
            fprintf(out, "1..%d | ", spmv_kernel_max_k(k));
        else
            fputs("1 | ", out);
        markdown_params(out, k->params);
        fprintf(out, " | %s |\n", k->summary);
    }
    fputs("\n| parameter | default | range | meaning |\n| --- | --- | --- | --- |\n", out);
    for (int id = 0; id < SPMV_PARAM_COUNT; id++)
        fprintf(out, "| `%s` | %d | %d..%d | %s |\n", params[id].name, params[id].def, params[id].min,
                params[id].max, params[id].doc);
    fprintf(out, "\n%s\n", SPMV_REGISTRY_MD_END);
}

int32_t spmv_kernel_max_k(const spmv_kernel *k)
{
    return k && k->max_k > 1 ? k->max_k : 1;
}

int64_t spmv_kernel_bytes_k(const spmv_kernel *k, const spmv_matrix *m, int32_t ncols)
{
    if (!k || !m)
        return 0;
    int64_t vs = (int64_t)spmv_dtype_size(m->dtype);
    int64_t vectors = ((int64_t)m->cols + m->rows) * vs;
    return spmv_kernel_bytes(k, m) + (ncols > 1 ? (int64_t)(ncols - 1) * vectors : 0);
}
