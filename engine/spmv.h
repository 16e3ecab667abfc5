/* spmv.h — the public C API of the spmvd compute engine.
 *
 * The engine is everything below the HTTP layer: the streaming Matrix Market
 * reader, the storage formats (COO, CSR, ELL, HLL, HYB, and the packed PCSR,
 * PSELL, SPSELL and PBSR) and the conversions between them, the kernel registry, the CPU
 * kernels, the GPU backend (CUDA stays behind this header: a build without
 * nvcc links engine/gpu/absent.c, which answers SPMV_ERR_UNAVAILABLE with
 * the reason), and timing statistics.
 *
 * Conventions (after libuv): every name starts with spmv_, functions return 0
 * (SPMV_OK) or a negative spmv_status, spmv_strerror() names a status, and a
 * caller-provided spmv_error carries the detail (what, where, which limit).
 * Indices are 0-based int32; counts that are multiplied are held in int64 so
 * arithmetic on them cannot overflow before it is checked. The engine keeps
 * no global mutable state: callers own every object they create.
 */
#ifndef SPMV_H
#define SPMV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPMV_VERSION "0.1.0"

/* Inline helpers shared by host code and CUDA kernels. */
#ifdef __CUDACC__
#define SPMV_HOST_DEVICE __host__ __device__
#else
#define SPMV_HOST_DEVICE
#endif


/* ---------------------------------------------------------------- status */

typedef enum spmv_status {
    SPMV_OK = 0,
    SPMV_ERR_NOMEM = -1,         /* host allocation failed */
    SPMV_ERR_INVALID = -2,       /* bad argument or parameter out of range */
    SPMV_ERR_PARSE = -3,         /* malformed Matrix Market input */
    SPMV_ERR_LIMIT = -4,         /* a size beyond a limit (32-bit, configured) */
    SPMV_ERR_UNSUPPORTED = -5,   /* complex values, vector objects, ... */
    SPMV_ERR_IO = -6,            /* read/write/fsync failed */
    SPMV_ERR_UNAVAILABLE = -7,   /* kernel or device not usable here */
    SPMV_ERR_DEVICE = -8,        /* CUDA or cuSPARSE call failed */
    SPMV_ERR_DEVICE_MEMORY = -9, /* would not fit in device memory */
    SPMV_ERR_CORRUPT = -10,      /* checksum, magic or version mismatch */
    SPMV_ERR_NOT_FOUND = -11,
    SPMV_ERR_SHAPE = -12,        /* operand shapes do not match */
} spmv_status;

const char *spmv_strerror(int status);

/* Detail for a failed call. `line` is the 1-based Matrix Market line the
 * error refers to, or 0 when no line applies. `message` is a complete
 * sentence fit for an API error body ("line 7: expected 3 fields ..."). */
typedef struct spmv_error {
    int status;
    int64_t line;
    char message[512];
} spmv_error;

/* Sets all fields of *err (if err is not NULL) and returns status. */
int spmv_error_set(spmv_error *err, int status, int64_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ----------------------------------------------------------------- dtype */

typedef enum spmv_dtype { SPMV_FLOAT64 = 0, SPMV_FLOAT32 = 1 } spmv_dtype;

size_t spmv_dtype_size(spmv_dtype dtype);            /* 8 or 4 */
const char *spmv_dtype_name(spmv_dtype dtype);       /* "float64" / "float32" */
int spmv_dtype_parse(const char *name, spmv_dtype *out); /* also "f64", "double", "f32", "float" */

/* --------------------------------------------------------------- formats */

typedef enum spmv_format {
    SPMV_FMT_COO = 1u << 0,
    SPMV_FMT_CSR = 1u << 1,
    SPMV_FMT_ELL = 1u << 2,
    SPMV_FMT_HLL = 1u << 3,
    SPMV_FMT_HYB = 1u << 4,
    SPMV_FMT_PCSR = 1u << 5,   /* packed CSR: compressed columns and values (spmv_pcsr) */
    SPMV_FMT_PSELL = 1u << 6,  /* packed sliced ELL: the same on 32-row slices (spmv_psell) */
    SPMV_FMT_SPSELL = 1u << 7, /* symmetric PSELL: mirrored slices store half their values (spmv_spsell) */
    SPMV_FMT_PBSR = 1u << 8,   /* packed block CSR: b x b blocks, one column delta a block (spmv_pbsr) */
} spmv_format;
#define SPMV_FMT_ALL (SPMV_FMT_COO | SPMV_FMT_CSR | SPMV_FMT_ELL | SPMV_FMT_HLL | SPMV_FMT_HYB | SPMV_FMT_PCSR | \
                      SPMV_FMT_PSELL | SPMV_FMT_SPSELL | SPMV_FMT_PBSR)
/* The last format bit: loops over the formats run up to it. */
#define SPMV_FMT_LAST SPMV_FMT_PBSR
/* The packed formats: compressed, slower to build than to read. `auto`
 * builds one only once the matrix's products repay it, or when asked
 * (docs/api.md, "auto"); a new packed format joins by its bit here. */
#define SPMV_FMT_PACKED (SPMV_FMT_PCSR | SPMV_FMT_PSELL | SPMV_FMT_SPSELL | SPMV_FMT_PBSR)
/* Number of formats: the length of per-format arrays. */
#define SPMV_FORMAT_COUNT 9

const char *spmv_format_name(spmv_format f);         /* "coo", "csr", ... */
/* log2 of the bit, 0..SPMV_FORMAT_COUNT-1: the index of per-format arrays
 * (bytes[SPMV_FORMAT_COUNT], ...); SPMV_FORMAT_COUNT for anything else. */
int spmv_format_index(spmv_format f);
/* Parses a comma-separated list ("csr,ell,hll") into a mask. */
int spmv_formats_parse(const char *list, unsigned *mask, spmv_error *err);

#define SPMV_HACK_SIZE_DEFAULT 32

/* Every matrix struct (the host formats, spmv_matrix, a cluster matrix,
 * the device's) carries rows, cols, nnz and dtype: this copies the four
 * from src to dst, whatever their two types. */
#define SPMV_COPY_SHAPE(dst, src)                                                                                  \
    ((dst)->rows = (src)->rows, (dst)->cols = (src)->cols, (dst)->nnz = (src)->nnz, (dst)->dtype = (src)->dtype)

/* COO: triplets sorted by row, then column, no duplicates (the reader sums
 * them). `val` holds nnz values of `dtype`. */
typedef struct spmv_coo {
    int32_t rows, cols;
    int64_t nnz;
    int32_t *row, *col;
    void *val;
    spmv_dtype dtype;
} spmv_coo;

/* CSR: row_ptr[rows+1], col[nnz] sorted within each row, val[nnz].
 *
 * A CSR whose non-zeros pass INT32_MAX (or one made so on request:
 * spmv_csr_widen) holds 64-bit row offsets in row_ptr64 instead, row_ptr
 * NULL, its columns staying 32-bit: it is "wide" (spmv_csr_wide). A
 * wide matrix is held as CSR and PSELL only (spmv_format_takes_wide: a
 * PSELL's slices carry 64-bit offsets of their own): spmv_reference,
 * cpu.csr.serial, cpu.csr.omp and cpu.psell.omp read it, and every other
 * conversion, kernel, transpose and partition answers SPMV_ERR_LIMIT
 * saying so (spmv_csr_need_narrow), as the GPU's 64-bit path does
 * (spmv_band_spec). */
typedef struct spmv_csr {
    int32_t rows, cols;
    int64_t nnz;
    int32_t *row_ptr;
    int32_t *col;
    void *val;
    spmv_dtype dtype;
    int64_t *row_ptr64;       /* rows + 1 offsets of a wide CSR, else NULL */
} spmv_csr;

/* The position of entry (i, j) in a CSR whose rows' columns increase (the
 * CSR contract), or -1: a binary search of row i. */
int64_t spmv_csr_find(const spmv_csr *a, int64_t i, int32_t j);

static inline bool spmv_csr_wide(const spmv_csr *a) { return a->row_ptr64 != NULL; }
/* Whether format f is built from a wide CSR: CSR itself and PSELL. */
static inline bool spmv_format_takes_wide(spmv_format f) { return f == SPMV_FMT_CSR || f == SPMV_FMT_PSELL; }
/* Row i's first entry, whichever offsets the CSR holds. */
static inline int64_t spmv_csr_row_begin(const spmv_csr *a, int64_t i)
{
    return a->row_ptr64 ? a->row_ptr64[i] : a->row_ptr[i];
}
/* The content hash of a CSR: SHA-256 over, in this order and
 * little-endian, rows and cols as two int64, the rows + 1 row offsets as
 * int64 (whether the CSR holds them in 32 or 64 bits), the nnz columns as
 * int32 and the nnz values as stored (float64 or float32). NumPy:
 * sha256(int64[rows, cols] + indptr as <i8 + indices as <i4 + data). */
int spmv_csr_sha256(const spmv_csr *m, unsigned char out[32]);
/* Whether A equals its transpose exactly: square, every entry (i, j)
 * mirrored by an entry (j, i) with the same value bit for bit. Needs each
 * row's columns sorted (every CSR the engine builds). O(nnz log row
 * length), on the OpenMP team; stops early at the first mismatch. */
bool spmv_csr_symmetric(const spmv_csr *a);
/* 64 lower-case hex digits and a NUL. */
void spmv_sha256_hex(const unsigned char sum[32], char hex[65]);
/* Makes a 32-bit CSR wide (64-bit offsets, the same entries); a no-op on a
 * wide one. */
int spmv_csr_widen(spmv_csr *a, spmv_error *err);
/* SPMV_OK for a 32-bit CSR; for a wide one SPMV_ERR_LIMIT naming `what`,
 * the non-zeros and what reads 64-bit offsets. */
int spmv_csr_need_narrow(const spmv_csr *a, const char *what, spmv_error *err);

/* ELL: width = longest row; column-major: entry k of row i is at
 * k*rows + i. Padding slots hold column -1 and value 0. */
typedef struct spmv_ell {
    int32_t rows, cols;
    int64_t nnz;
    int32_t width;
    int32_t *col;
    void *val;
    spmv_dtype dtype;
} spmv_ell;

/* HLL (hacked ELLPACK): rows in slices of hack_size; slice s covers rows
 * [s*hack_size, min((s+1)*hack_size, rows)) and is an ELL block of its own
 * width, column-major with a row stride of hack_size (the last slice is
 * padded to hack_size rows, as cuSPARSE's sliced ELL expects): entry k of
 * local row r of slice s is at slice_off[s] + k*hack_size + r. Padding slots
 * hold column -1 and value 0. slice_off has nslices+1 entries;
 * slice_off[s+1]-slice_off[s] = slice_width[s]*hack_size. */
typedef struct spmv_hll {
    int32_t rows, cols;
    int64_t nnz;
    int32_t hack_size;
    int32_t nslices;
    int64_t *slice_off;
    int32_t *slice_width;
    int32_t *col;
    void *val;
    spmv_dtype dtype;
} spmv_hll;

/* HYB: the first `ell.width` entries of every row in ELL, the rest in COO. */
typedef struct spmv_hyb {
    spmv_ell ell;
    spmv_coo coo;
} spmv_hyb;

/* Lossless value compression, shared by the packed formats (engine/packed.c,
 * docs/kernels.md "Packed formats"). The distinct values of the matrix,
 * compared bit for bit (so -0.0 and 0.0, or two NaNs with other payloads,
 * stay distinct), form `table`, in ascending order of their bit patterns
 * read as unsigned integers of the dtype's width; an entry stores its index
 * in the table. The mode is the one with the fewest bytes for the n entries
 * the format stores (PCSR: nnz; PSELL: its slots, padding included; ties:
 * the first listed): CONST (one distinct value: no per-entry storage;
 * pattern-only matrices), U8 (1-byte codes, at most 256 distinct), U16
 * (2-byte codes, at most 65 536), F32 (float64 matrices whose every value
 * survives float64 -> float32 -> float64 bit for bit, as a "mixed"
 * upload's do: the values as float32, no table), RAW (the values
 * themselves; also when nnz is 0). Bytes: CONST vs (the value size), U8
 * ntable*vs + n, U16 ntable*vs + 2n, F32 4n, RAW n*vs. The distinct values
 * are those of the real entries only: padding stores code 0 (RAW: +0.0,
 * F32: +0.0f) and adds nothing to the table. Arrays: RAW and F32 have
 * ntable 0 and table NULL, data n values (a 0-entry allocation, never
 * NULL, when n is 0); CONST has ntable 1 and data NULL; U8/U16 have both.
 * Host and device build the same arrays. */
typedef enum spmv_vcode {
    SPMV_VCODE_RAW = 0,
    SPMV_VCODE_CONST = 1,
    SPMV_VCODE_U8 = 2,
    SPMV_VCODE_U16 = 3,
    SPMV_VCODE_F32 = 4,
} spmv_vcode;
#define SPMV_VCODE_COUNT 5

const char *spmv_vcode_name(spmv_vcode mode);      /* "raw", "const", "u8", "u16", "f32" */
/* Bytes one entry takes in data (value_size: the dtype's): RAW the value,
 * F32 4, U8 1, U16 2, CONST 0. */
static inline SPMV_HOST_DEVICE size_t spmv_vcode_entry_bytes(spmv_vcode mode, size_t value_size)
{
    return mode == SPMV_VCODE_RAW   ? value_size
           : mode == SPMV_VCODE_F32 ? 4
           : mode == SPMV_VCODE_U8  ? 1
           : mode == SPMV_VCODE_U16 ? 2
                                    : 0;
}

typedef struct spmv_packed_values {
    spmv_vcode mode;
    int32_t ntable;           /* values in table (0 for RAW and F32) */
    void *table;              /* ntable values of the dtype */
    void *data;               /* per entry: RAW values of the dtype, U8 uint8_t or U16 uint16_t codes, F32 floats; CONST NULL */
} spmv_packed_values;

/* Packed CSR: the CSR's row_ptr (borrowed, not owned: a PCSR lives no
 * longer than the CSR it was built from) with columns stored as deltas
 * from a per-row base in `idx_bytes` (1 or 2) bytes, or as themselves
 * (idx_bytes 4, base NULL). With 1 or 2: base[i] >= 0 is row i's first
 * column and entry j of the row has column base[i] + idx[j]; a row whose
 * last column minus first passes 255 (65 535) is "wide": base[i] = -1 - w
 * and its columns are wide_col[w ...] (its idx entries are 0; wide rows
 * are laid out in row order). An empty row fits, with base 0. The width
 * is the one with the fewest bytes (ties: narrower), counting idx, base
 * and wide_col: nnz*w + rows*4 + wide_nnz(w)*4 for w = 1 or 2, nnz*4 for
 * 4. With 4, base and wide_col are NULL and wide_nnz 0; with 1 or 2,
 * wide_col is always allocated (a 0-entry allocation, never NULL, when no
 * row is wide). Values entry j. */
typedef struct spmv_pcsr {
    int32_t rows, cols;
    int64_t nnz;
    spmv_dtype dtype;
    const int32_t *row_ptr;   /* the CSR's */
    int32_t idx_bytes;        /* 1, 2 or 4 */
    int32_t *base;            /* rows entries (NULL when idx_bytes is 4) */
    void *idx;                /* nnz entries of idx_bytes */
    int64_t wide_nnz;         /* columns held in wide_col */
    int32_t *wide_col;
    spmv_packed_values v;
} spmv_pcsr;

/* Packed sliced ELL: slices of SPMV_PSELL_C rows (one warp), each an ELL
 * block of its own width (its longest row), column-major: slot k of local
 * row r of slice s is slot entry (slot_off[s] + k) * C + r. Column indices
 * of slice s are idx_bytes[s] bytes wide at idx + idx_off[s] + (k*C + r) *
 * idx_bytes[s]: with 1 or 2, the column is base[slot_off[s] + k] + the
 * entry (base: the smallest column in that slot of the slice's rows); with
 * 4, the column itself. An entry of all ones (0xff, 0xffff, -1) is padding
 * (rows shorter than the slice, rows past `rows` in the last slice): so a
 * slice takes 1 byte when every slot's columns span at most 254, 2 when at
 * most 65 534, else 4 (an empty slice, width 0: 1). base of a 4-byte
 * slice's slots is 0. A diagonal slice takes 0 bytes: C rows of one
 * length w > 0 whose slot k holds, in local row r, row 0's column plus r
 * (a stencil's interior: w shifted diagonals), so the column is base[slot]
 * + r, nothing is stored in idx and no entry is padding. Values: slice s's
 * start at value entry val_off[s]; a slice of width w > 0 whose every slot
 * holds one value in all its real entries (bit for bit: a constant-
 * coefficient stencil's interior) is uniform and stores one value per
 * slot, slot k's at val_off[s] + k (val_off[s+1] - val_off[s] = w);
 * another stores all C·w, slot k of row r at val_off[s] + k*C + r
 * (padding: code 0 or value +0.0). */
#define SPMV_PSELL_C 32
typedef struct spmv_psell {
    int32_t rows, cols;
    int64_t nnz;
    spmv_dtype dtype;
    int32_t nslices;
    int64_t slots;            /* slot_off[nslices] * C: entries with padding */
    int64_t *slot_off;        /* nslices + 1: cumulative slice widths */
    int64_t *idx_off;         /* nslices + 1: byte offset of each slice's indices */
    int64_t *val_off;         /* nslices + 1: value entries before each slice (v holds val_off[nslices]) */
    uint8_t *idx_bytes;       /* nslices: 0 (diagonal), 1, 2 or 4 */
    int32_t *base;            /* slot_off[nslices] */
    uint8_t *idx;             /* idx_off[nslices] bytes */
    spmv_packed_values v;     /* val_off[nslices] entries */
} spmv_psell;

/* Symmetric PSELL (docs/kernels.md "Symmetric PSELL"), built only from a
 * square, exactly symmetric CSR (spmv_csr_symmetric): PSELL's layout with
 * some diagonal slices "mirrored". Slice s is mirrored (mirror[s] = 1)
 * when it is diagonal, its offsets d_k = base[slot_off[s] + k] - s*C come
 * in pairs (d_k = -d_{w-1-k}, so slots k < w/2 hold the negative ones),
 * and for every negative offset -d each source row j = i - d of its rows
 * i holds exactly the same offsets (its w columns minus j), in whatever
 * slice j lies (mirrored or not, diagonal or not). A mirrored slice stores
 * values only for its slots k >= w/2 (offset >= 0): slot k's at
 * val_off[s] + (k - w/2)*C + r, or val_off[s] + (k - w/2) when uniform
 * (val_off[s+1] - val_off[s] = w - w/2). The value of row i = s*C + r in
 * slot k < w/2 (offset -d) is A[i][i-d] = A[i-d][i]: the value source row
 * j = i - d (slice t = j/C, local row j%C) stores in its slot q = w-1-k
 * (offset +d; j's (w-1-k)-th entry), at t's position for slot q as above
 * (q - k0 slots past val_off[t], k0 = w_t/2 when t is mirrored, else 0).
 * A mirrored slice, diagonal, has no column entries: its idx_off[s] ..
 * idx_off[s+1] bytes hold its source table instead, w/2 records of
 * SPMV_SPSELL_SRC_BYTES, record k (lower slot k) two int64 at idx +
 * idx_off[s] + 16k: src[0] for the source rows in slice t = base_k / C
 * (lanes r < C - base_k % C), src[1] for those in slice t + 1 (0 when no
 * row lies there, base_k % C = 0). Each is slot q's entry of local row 0
 * in that slice, so that the row at local row lr reads src + lr, or -1 -
 * that slot's one entry when the slice is uniform (every row reads it).
 * idx_off is a multiple of 16 (PSELL's: of 32). Other slices are
 * PSELL's. */
#define SPMV_SPSELL_SRC_BYTES 16
typedef struct spmv_spsell {
    spmv_psell p;             /* the arrays; val_off counts the values stored */
    uint8_t *mirror;          /* nslices: 1 mirrored, 0 as in PSELL */
    int32_t nmirrored;        /* slices with mirror 1 */
} spmv_spsell;

/* Packed block CSR (engine/pbsr.c, docs/kernels.md "PBSR"): a matrix whose
 * non-zeros come in complete b x b blocks (b = 2, 3, 4 or 6, the largest
 * that fits: rows and cols multiples of b, and every non-zero's aligned
 * block stored whole, explicit zeros counting as stored; spmv_csr_block_size)
 * held as brows = rows/b block rows of whole blocks. block_ptr (brows + 1)
 * counts the blocks before each block row: int32, since a narrow CSR holds
 * at most INT32_MAX non-zeros and so at most INT32_MAX/4 blocks (a wide
 * CSR is refused). Block columns (column / b) are packed as PCSR packs
 * columns, per block row instead of per row: idx_bytes 1 or 2, base[I] the
 * block row's first block column and idx[k] block k's delta from it, or
 * base[I] = -1 - w with the block row's block columns in wide_col[w ...]
 * (a block row whose last block column minus first passes 255 / 65 535);
 * idx_bytes 4: idx holds the block columns, base and wide_col NULL. The
 * width is the one with the fewest bytes (ties: narrower). Values: nnz
 * entries in the shared modes (spmv_packed_values, chosen for n = nnz),
 * component-major within a block row so a GPU warp reads them coalesced:
 * entry (r, c) of block k of block row I, whose blocks are [s, e), is
 * value entry s*b*b + (r*b + c)*(e - s) + (k - s). No padding: nnz =
 * nblocks * b * b. */
#define SPMV_PBSR_MAX_B 6
typedef struct spmv_pbsr {
    int32_t rows, cols;
    int64_t nnz;
    spmv_dtype dtype;
    int32_t b;                /* block size: 2, 3, 4 or 6 */
    int32_t brows;            /* rows / b */
    int64_t nblocks;          /* nnz / (b*b) */
    int32_t *block_ptr;       /* brows + 1 */
    int32_t idx_bytes;        /* 1, 2 or 4 */
    int32_t *base;            /* brows (NULL when idx_bytes is 4) */
    void *idx;                /* nblocks entries of idx_bytes */
    int64_t wide_nnz;         /* block columns held in wide_col */
    int32_t *wide_col;
    spmv_packed_values v;     /* nnz entries */
} spmv_pbsr;

/* The block size PBSR would take for a: the largest b of 6, 4, 3, 2 for
 * which a's non-zeros come in complete b x b blocks, or 0 (with err, when
 * not NULL, saying for each b why not: a shape not a multiple of b, or the
 * first block row holding an incomplete block). A matrix without
 * non-zeros has no blocks. O(nnz) per b tried. */
int32_t spmv_csr_block_size(const spmv_csr *a, spmv_error *err);

/* Bytes held by a format (all arrays) and its padding ratio (slots stored /
 * nnz; 1.0 for CSR and COO, 1.0 when nnz is 0). */
typedef struct spmv_format_info {
    size_t bytes;
    double padding_ratio;
} spmv_format_info;

spmv_format_info spmv_coo_info(const spmv_coo *m);
spmv_format_info spmv_csr_info(const spmv_csr *m);
spmv_format_info spmv_ell_info(const spmv_ell *m);
spmv_format_info spmv_hll_info(const spmv_hll *m);
spmv_format_info spmv_hyb_info(const spmv_hyb *m);
spmv_format_info spmv_pcsr_info(const spmv_pcsr *m);   /* without the borrowed row_ptr */
spmv_format_info spmv_psell_info(const spmv_psell *m);
spmv_format_info spmv_spsell_info(const spmv_spsell *m);
spmv_format_info spmv_pbsr_info(const spmv_pbsr *m);

/* The one padding rule (engine/limits.c, docs/kernels.md "Device memory"):
 * a derived format (COO, ELL, HLL, HYB, PCSR, PSELL, PBSR, and the SELL cuSPARSE
 * reads, which is the HLL) is built, on the host or on a device, at upload,
 * on first use, while tuning or in a bench, only if its padded slots stay
 * within max_padding x nnz + SPMV_PADDING_SLACK (slots: ELL width x rows,
 * HLL the slices' width x hack_size, HYB its ELL part plus its COO part,
 * PCSR and PBSR nnz, PSELL its 32-row slices' width x 32; the slack keeps tiny
 * matrices, whose padding costs kilobytes, usable) or, past that, its
 * bytes within padding_allowance_bytes (a small matrix's ELL of a few MB
 * is worth building whatever its padding ratio) and, where host_memory is
 * set (a host format), within half the host's available memory; and in
 * every case its bytes within max_format_bytes. Past them, SPMV_ERR_LIMIT
 * with the numbers and the keys, nothing allocated. Zero fields mean no
 * bound (no allowance). */
typedef struct spmv_format_limits {
    double max_padding;               /* slots per non-zero */
    int64_t max_format_bytes;         /* bytes of one derived format */
    int64_t padding_allowance_bytes;  /* bytes any format may take whatever its padding */
    bool host_memory;                 /* the allowance also asks the host's available memory */
} spmv_format_limits;

#define SPMV_MAX_PADDING_DEFAULT 3.0
#define SPMV_PADDING_SLACK INT64_C(65536)
/* The daemon's padding_allowance_bytes default (256 MiB). */
#define SPMV_PADDING_ALLOWANCE_DEFAULT (INT64_C(256) << 20)

/* {SPMV_MAX_PADDING_DEFAULT, 0, 0, true}: the slot rule alone (the
 * daemon adds its padding_allowance_bytes). */
spmv_format_limits spmv_format_limits_default(void);
/* The slots and bytes format f would hold for CSR a (HLL in slices of
 * hack_size; HYB at its automatic width; PCSR without the CSR's row_ptr
 * it borrows; PSELL in slices of SPMV_PSELL_C whatever hack_size; PBSR
 * SPMV_ERR_UNSUPPORTED for a matrix without complete blocks), computed
 * from the row lengths (the packed formats: also the columns and the
 * distinct values) without building it. Host bytes; a device
 * holds the same arrays. */
int spmv_format_plan(const spmv_csr *a, spmv_format f, int32_t hack_size, int64_t *slots, int64_t *bytes,
                     spmv_error *err);
/* The rule itself: SPMV_OK or SPMV_ERR_LIMIT naming the format, its slots,
 * nnz, padding and bytes, and the limit passed. lim NULL: no bound. */
int spmv_format_check(const spmv_format_limits *lim, spmv_format f, int64_t nnz, int64_t slots, int64_t bytes,
                      spmv_error *err);

/* Allocation helpers: arrays sized from the struct's counts; return
 * SPMV_ERR_NOMEM or SPMV_ERR_LIMIT (size overflow) with err filled. */
int spmv_coo_alloc(spmv_coo *m, int32_t rows, int32_t cols, int64_t nnz, spmv_dtype dtype, spmv_error *err);
void spmv_coo_free(spmv_coo *m);
void spmv_csr_free(spmv_csr *m);
void spmv_ell_free(spmv_ell *m);
void spmv_hll_free(spmv_hll *m);
void spmv_hyb_free(spmv_hyb *m);
void spmv_pcsr_free(spmv_pcsr *m);
void spmv_psell_free(spmv_psell *m);
void spmv_spsell_free(spmv_spsell *m);
void spmv_pbsr_free(spmv_pbsr *m);

/* Whether float64 v is finite but becomes an infinity as float32 (past
 * FLT_MAX by more than half an ulp): stored as float32 it would be a
 * silent infinity, which uploads, vectors and fills refuse instead. */
bool spmv_float32_overflows(double v);
/* The first of n float64 values that overflows float32 (-1: none). */
int64_t spmv_float32_overflow_at(const double *v, int64_t n);

/* Host conversions. Outputs are freshly allocated; on failure nothing is
 * left allocated in *out. `max_slots` bounds padded ELL storage (0: no bound
 * beyond int64/size_t overflow); past it SPMV_ERR_LIMIT says width and rows. */
int spmv_coo_to_csr(const spmv_coo *in, spmv_dtype dtype, spmv_csr *out, spmv_error *err);
int spmv_csr_to_coo(const spmv_csr *in, spmv_coo *out, spmv_error *err);
/* Changes m's values to dtype in place (a fresh value array, the old one
 * freed: the matrix is never held twice); a no-op when it is m's. */
int spmv_csr_to_dtype(spmv_csr *m, spmv_dtype dtype, spmv_error *err);
/* dtype "mixed": every value of a float64 CSR rounded to the nearest
 * float32 in place; a finite value past float32's range is SPMV_ERR_LIMIT
 * naming the entry (1-based) rather than made infinite. */
int spmv_csr_round_to_float32(spmv_csr *m, spmv_error *err);
int spmv_csr_to_ell(const spmv_csr *in, int64_t max_slots, spmv_ell *out, spmv_error *err);
int spmv_csr_to_hll(const spmv_csr *in, int32_t hack_size, spmv_hll *out, spmv_error *err);
/* width < 0 picks the width automatically (documented in docs/kernels.md). */
int spmv_csr_to_hyb(const spmv_csr *in, int32_t width, spmv_hyb *out, spmv_error *err);
int spmv_ell_to_coo(const spmv_ell *in, spmv_coo *out, spmv_error *err);
int spmv_hll_to_coo(const spmv_hll *in, spmv_coo *out, spmv_error *err);
int spmv_hyb_to_coo(const spmv_hyb *in, spmv_coo *out, spmv_error *err);
/* The packed formats (layouts above), built under the padding rule lim
 * (PSELL's slots; NULL: no bound); and back to COO (tests). */
int spmv_csr_to_pcsr(const spmv_csr *in, const spmv_format_limits *lim, spmv_pcsr *out, spmv_error *err);
int spmv_csr_to_psell(const spmv_csr *in, const spmv_format_limits *lim, spmv_psell *out, spmv_error *err);
int spmv_pcsr_to_coo(const spmv_pcsr *in, spmv_coo *out, spmv_error *err);
int spmv_psell_to_coo(const spmv_psell *in, spmv_coo *out, spmv_error *err);
/* SPSELL: SPMV_ERR_UNAVAILABLE, nothing built, when `in` is not square or
 * not exactly symmetric. */
int spmv_csr_to_spsell(const spmv_csr *in, const spmv_format_limits *lim, spmv_spsell *out, spmv_error *err);
int spmv_spsell_to_coo(const spmv_spsell *in, spmv_coo *out, spmv_error *err);
/* PBSR (layout above) of a blocked CSR; SPMV_ERR_UNSUPPORTED, saying why,
 * for a matrix without complete blocks (spmv_csr_block_size 0). */
int spmv_csr_to_pbsr(const spmv_csr *in, const spmv_format_limits *lim, spmv_pbsr *out, spmv_error *err);
int spmv_pbsr_to_coo(const spmv_pbsr *in, spmv_coo *out, spmv_error *err);
/* Copies values to another dtype (same structure). */
int spmv_coo_convert(const spmv_coo *in, spmv_dtype dtype, spmv_coo *out, spmv_error *err);
/* Deep copy. */
int spmv_coo_copy(const spmv_coo *in, spmv_coo *out, spmv_error *err);

/* ------------------------------------------------------ Matrix Market read */

typedef enum spmv_mm_format { SPMV_MM_COORDINATE, SPMV_MM_ARRAY } spmv_mm_format;
typedef enum spmv_mm_field {
    SPMV_MM_REAL, SPMV_MM_DOUBLE, SPMV_MM_INTEGER, SPMV_MM_PATTERN
} spmv_mm_field;
typedef enum spmv_mm_symmetry {
    SPMV_MM_GENERAL, SPMV_MM_SYMMETRIC, SPMV_MM_SKEW_SYMMETRIC, SPMV_MM_HERMITIAN
} spmv_mm_symmetry;

const char *spmv_mm_field_name(spmv_mm_field f);        /* "real", ... */
const char *spmv_mm_symmetry_name(spmv_mm_symmetry s);  /* "general", "skew-symmetric", ... */

/* What the header said. `entries` is the count on the size line (for array
 * format rows*cols, or the stored triangle for symmetric arrays). */
typedef struct spmv_mm_info {
    spmv_mm_format format;
    spmv_mm_field field;
    spmv_mm_symmetry symmetry;
    int64_t rows, cols, entries;
    int64_t lines;          /* lines read in all */
    int64_t duplicates;     /* entries summed into an earlier one */
    bool gzip;              /* input was gzip-compressed */
} spmv_mm_info;

/* Duplicates a file may hold beyond its matrix's rows x cols positions
 * (summed, as SciPy does): more declared entries than positions plus
 * these are refused at the size line, before the entries are held (a
 * small gzip of one repeated line cannot make the reader hold billions). */
#define SPMV_MM_DUPLICATE_SLACK (1 << 20)

/* What a matrix declares before any of it is read (a Matrix Market size
 * line, an .npz's shape and data header), with what reading it will cost:
 * the reader's caller may refuse it then (spmv_mm_options.admit). */
typedef struct spmv_mm_declared {
    int64_t rows, cols;
    int64_t entries;        /* after symmetric expansion, at most */
    int64_t peak_bytes;     /* the most bytes reading it and making its float64 CSR take at once */
    int64_t csr_bytes;      /* its float64 CSR, at most */
} spmv_mm_declared;

/* Reader options. The limits are checked against the header before anything
 * is allocated from it; zero fields mean the built-in maximum (INT32_MAX:
 * rows and cols must fit 32-bit signed; so must a Matrix Market file's
 * entries, while an .npz CSR archive may hold up to max_nnz, its CSR then
 * wide). More entries than the matrix has positions (rows x cols) plus
 * SPMV_MM_DUPLICATE_SLACK are refused too: only duplicates could fill
 * them. `threads` is the number of
 * parsing threads (0: all OpenMP threads, 1: serial). `offsets64`: an .npz
 * read straight into a CSR gets 64-bit row offsets even below INT32_MAX
 * entries (tests). `admit`, when set, is called once the sizes are known
 * and checked, before anything is allocated from them: a non-zero status
 * (with *err set) refuses the matrix with that error. */
typedef struct spmv_mm_options {
    int64_t max_rows, max_cols, max_nnz;
    int32_t threads;
    bool offsets64;
    int (*admit)(void *ctx, const spmv_mm_declared *d, spmv_error *err);
    void *admit_ctx;
} spmv_mm_options;

/* The spmv_mm_declared of a matrix of `rows` x `cols` with `entries`
 * (after expansion) read by `threads` threads: what the reader's entries,
 * its sort and the CSR built from its COO take at their peak. */
void spmv_mm_declare(int64_t rows, int64_t cols, int64_t entries, int threads, spmv_mm_declared *out);

/* Streaming reader: feed bytes in chunks as they arrive (any split, even in
 * the middle of a number or of the gzip stream), then finish. The text is
 * never held whole: each chunk is parsed as it comes, only a partial last
 * line is carried over. After any error, every later call returns the same
 * error. The output is sorted COO in float64 with duplicates summed,
 * explicit zeros kept and symmetric input expanded. */
typedef struct spmv_mm_reader spmv_mm_reader;

int spmv_mm_reader_new(const spmv_mm_options *opts, spmv_mm_reader **out, spmv_error *err);
int spmv_mm_reader_feed(spmv_mm_reader *r, const void *data, size_t len, spmv_error *err);
/* Ends the input; on success *out owns the matrix, *info (if not NULL) says
 * what the header said. */
int spmv_mm_reader_finish(spmv_mm_reader *r, spmv_coo *out, spmv_mm_info *info, spmv_error *err);
void spmv_mm_reader_free(spmv_mm_reader *r);

/* Convenience: a whole file (plain or gzip) or buffer through the reader. */
int spmv_mm_read_file(const char *path, const spmv_mm_options *opts,
                      spmv_coo *out, spmv_mm_info *info, spmv_error *err);
int spmv_mm_read_buffer(const void *data, size_t len, const spmv_mm_options *opts,
                        spmv_coo *out, spmv_mm_info *info, spmv_error *err);

/* ------------------------------------------------------------- .npz read */

/* SciPy's sparse .npz (scipy.sparse.save_npz: CSR, CSC or COO, stored or
 * deflated), read with libzip (engine/npz.c). The output is what the
 * Matrix Market reader gives: sorted float64 COO, duplicates summed,
 * explicit zeros kept; the same limits (opts, NULL for none) are checked
 * before anything is allocated, and errors name the member, the entry and
 * the limit ("npz member indices.npy: entry 17 is 1200, outside 0..999
 * (cols)"). Members are read in chunks straight into the entries: the
 * archive is never held whole as bytes a second time. */
typedef struct spmv_npz_info {
    char layout[4];           /* "csr", "csc" or "coo" */
    int64_t rows, cols;
    int64_t entries;          /* stored in the archive */
    int64_t duplicates;       /* summed into an earlier entry */
    bool direct;              /* read straight into the CSR (spmv_npz_read_*_csr) */
} spmv_npz_info;

/* Whether the first bytes are a zip archive's ("PK\3\4", or "PK\5\6" for an empty one). */
bool spmv_npz_magic(const void *buf, size_t len);
int spmv_npz_read_file(const char *path, const spmv_mm_options *opts, spmv_coo *out, spmv_npz_info *info,
                       spmv_error *err);
int spmv_npz_read_buffer(const void *data, size_t len, const spmv_mm_options *opts, spmv_coo *out,
                         spmv_npz_info *info, spmv_error *err);
/* The same matrix as a float64 host CSR (what spmv_coo_to_csr makes of
 * the COO above, identical), with the same checks and errors. A CSR
 * archive whose rows are sorted and without duplicates (SciPy's canonical
 * format, what save_npz of a CSR usually holds) is read straight into the
 * CSR's arrays, never held as a COO (info->direct); a CSC or COO archive,
 * or a CSR one with a row unsorted or a duplicate, goes through the COO. */
int spmv_npz_read_file_csr(const char *path, const spmv_mm_options *opts, spmv_csr *out, spmv_npz_info *info,
                           spmv_error *err);
int spmv_npz_read_buffer_csr(const void *data, size_t len, const spmv_mm_options *opts, spmv_csr *out,
                             spmv_npz_info *info, spmv_error *err);
/* Writes a sorted COO as save_npz's CSR layout (int32 indices, values in
 * the COO's dtype), members deflated or stored (the generator, the tests). */
int spmv_npz_write_file(const char *path, const spmv_coo *m, bool compress, spmv_error *err);
/* The same from a CSR, its arrays written where they are (a wide CSR's
 * 64-bit offsets as int64 indptr): what scipy.sparse.load_npz reads. */
int spmv_npz_write_csr_file(const char *path, const spmv_csr *m, bool compress, spmv_error *err);

/* Writes a COO as a Matrix Market coordinate real general file (full
 * precision); used by the generator and the tests. */
int spmv_mm_write_file(const char *path, const spmv_coo *m, spmv_error *err);

/* ------------------------------------------------------------- generator */

/* Seeded, deterministic matrices shaped like those of the published SpMV
 * studies, for benchmarks and tests (engine/gen.c, CLI build/spmv-gen). */
typedef enum spmv_gen_kind {
    SPMV_GEN_POISSON2D,   /* 5-point stencil on an n x n grid: n^2 rows */
    SPMV_GEN_POISSON3D,   /* 7-point stencil on an n x n x n grid: n^3 rows */
    SPMV_GEN_UNIFORM,     /* n rows, per_row random columns each */
    SPMV_GEN_POWERLAW,    /* n rows, row lengths power-law (mean per_row) */
    SPMV_GEN_BANDED_DENSE_ROW, /* banded (half-width per_row/2) plus one dense row of dense_len entries */
    SPMV_GEN_LP,          /* small LP-like rectangular matrix */
    SPMV_GEN_STENCIL27,   /* 27-point stencil on an n x n x n grid (26 on the diagonal, -1 around): n^3 rows */
    SPMV_GEN_GRAPH_UNIFORM,  /* uniform's pattern, every value 1 (an unweighted graph) */
    SPMV_GEN_GRAPH_POWERLAW, /* powerlaw's pattern, every value 1 (a scale-free graph) */
    SPMV_GEN_BAND,        /* n rows, columns i-h..i+h (h = per_row/2), entries spmv_band_value: checkable by formula */
    SPMV_GEN_RANDOM,      /* n rows x cols, exactly nnz entries at random places (the CSR study's 30000 x 20000) */
} spmv_gen_kind;

/* The entry (i, j) of a band (SPMV_GEN_BAND, spmv_gpu_matrix_generate_band):
 * 1 + ((i + 3j) mod 7) / 8, exact in float32, so a product with it can be
 * checked by formula. One definition for the host and the device. */
static inline SPMV_HOST_DEVICE double spmv_band_value(int64_t i, int64_t j)
{
    return 1.0 + (double)((i + 3 * j) % 7) / 8.0;
}

/* A recipe: five numbers for every kind (so the tools' tables and a stored
 * matrix's file hold them as they are). `random` has no per_row nor
 * dense_len: those slots hold its columns and its non-zeros. */
typedef struct spmv_gen_spec {
    spmv_gen_kind kind;
    int64_t n;            /* grid side (Poisson) or rows */
    int32_t per_row;      /* mean non-zeros per row where it applies; random: its columns */
    int64_t dense_len;    /* length of the dense row (banded); random: its non-zeros */
    uint64_t seed;
} spmv_gen_spec;

const char *spmv_gen_kind_name(spmv_gen_kind k);     /* "poisson2d", ... */
int spmv_gen_kind_parse(const char *name, spmv_gen_kind *out);
/* The defaults spmv-gen and the daemon's `generate` give what is not
 * named: per_row 16 (lp: 4), dense_len n/2 (banded_dense_row), seed 1. */
void spmv_gen_defaults(spmv_gen_spec *s, bool per_row_given, bool dense_len_given, bool seed_given);
/* The matrix's rows and columns, from the spec alone (nothing built);
 * the spec's errors as spmv_gen gives them. */
int spmv_gen_shape(const spmv_gen_spec *spec, int64_t *rows, int64_t *cols, spmv_error *err);
/* The exact non-zeros spec gives, counted without allocating (a pass over
 * the row lengths for the kinds that draw them). */
int spmv_gen_count(const spmv_gen_spec *spec, int64_t *nnz, spmv_error *err);
/* Builds the matrix as sorted float64 COO (at most INT32_MAX non-zeros). */
int spmv_gen(const spmv_gen_spec *spec, spmv_coo *out, spmv_error *err);
/* Builds the same matrix straight into a CSR of `dtype` (values rounded
 * once from float64), with no COO between: the way to billions of
 * non-zeros. Past INT32_MAX non-zeros, or when `offsets64` asks, the CSR is
 * wide (64-bit row offsets). More than max_nnz non-zeros is SPMV_ERR_LIMIT
 * before the entries are allocated. The pages are first touched by the
 * threads that fill them. */
int spmv_gen_csr(const spmv_gen_spec *spec, spmv_dtype dtype, bool offsets64, int64_t max_nnz, spmv_csr *out,
                 spmv_error *err);
/* Fills v with n values of dtype drawn uniformly from [-1, 1) by the
 * xorshift64 stream of `seed` (0 counts as 1): the same seed gives the same
 * vector everywhere (bench requests, tuning, the benchmark tools). */
void spmv_random_vector(spmv_dtype dtype, int64_t n, uint64_t seed, void *v);

/* ------------------------------------------------------- host matrix set */

/* A matrix as held on the host: the CSR (always) plus the other formats
 * asked for, all in one dtype. */
typedef struct spmv_matrix {
    int32_t rows, cols;
    int64_t nnz;
    spmv_dtype dtype;
    int32_t hack_size;
    unsigned formats;      /* SPMV_FMT_* bits held */
    spmv_csr csr;
    spmv_coo coo;          /* valid if formats & SPMV_FMT_COO */
    spmv_ell ell;          /* valid if formats & SPMV_FMT_ELL */
    spmv_hll hll;          /* valid if formats & SPMV_FMT_HLL */
    spmv_hyb hyb;          /* valid if formats & SPMV_FMT_HYB */
    spmv_pcsr pcsr;        /* valid if formats & SPMV_FMT_PCSR (borrows csr.row_ptr) */
    spmv_psell psell;      /* valid if formats & SPMV_FMT_PSELL */
    spmv_spsell spsell;    /* valid if formats & SPMV_FMT_SPSELL */
    spmv_pbsr pbsr;        /* valid if formats & SPMV_FMT_PBSR */
    spmv_format_limits limits; /* what every format built for it obeys (spmv_matrix_build's) */
    double convert_ms[SPMV_FORMAT_COUNT]; /* wall time of each format's last build from the CSR (0: not timed) */
} spmv_matrix;

/* Builds the formats in `formats` (CSR is always built) from a sorted COO.
 * A format the padding rule refuses (lim, kept in out->limits; NULL: no
 * bound), PBSR on a matrix without complete blocks, or SPSELL of a matrix
 * not symmetric, is skipped, not an error: its bit stays clear. */
int spmv_matrix_build(const spmv_coo *coo, spmv_dtype dtype, unsigned formats,
                      int32_t hack_size, const spmv_format_limits *lim,
                      spmv_matrix *out, spmv_error *err);
/* Builds one more format into m (no-op if held), under m->limits:
 * SPMV_ERR_LIMIT (nothing built) past them. */
int spmv_matrix_add_format(spmv_matrix *m, spmv_format f, spmv_error *err);
/* Frees one derived format (not CSR); no-op if not held. */
void spmv_matrix_drop_format(spmv_matrix *m, spmv_format f);
/* Host bytes of the formats in `mask` that m holds. */
size_t spmv_matrix_format_bytes(const spmv_matrix *m, unsigned mask);
void spmv_matrix_free(spmv_matrix *m);

/* ------------------------------------------------------------- registry */

typedef enum spmv_device_kind { SPMV_DEVICE_CPU = 0, SPMV_DEVICE_GPU = 1 } spmv_device_kind;

typedef enum spmv_param_id {
    SPMV_PARAM_BLOCK_SIZE = 0,  /* GPU threads per block */
    SPMV_PARAM_HACK_SIZE,       /* HLL / SELL slice height */
    SPMV_PARAM_CHUNK,           /* cpu.csr.chunked: number of column chunks (the count form of span) */
    SPMV_PARAM_ALG,             /* cuSPARSE algorithm (1 or 2) */
    SPMV_PARAM_THREADS,         /* CPU threads; GPU threads per row (0 = auto) */
    SPMV_PARAM_NNZ_PER_WG,      /* gpu.csr.adaptive row-block size */
    SPMV_PARAM_SPAN,            /* cpu.csr.chunked: chunk width over x, in columns */
    SPMV_PARAM_SCHEDULE,        /* cpu.hll.omp: 1 static block partition, 2 dynamic */
    SPMV_PARAM_OUTPUT,          /* gpu.spmspm.thread_row / block_row: 1 global atomic counter, 2 count + scan */
    SPMV_PARAM_ACCUMULATE,      /* gpu.spmspm.warp_nnz: 1 shared row accumulator, 2 every product, sorted */
    SPMV_PARAM_X_CACHE,         /* gpu.hll: x through 1 the texture cache, 2 the read-only cache (__ldg) */
    SPMV_PARAM_WIDTH,           /* gpu.hyb: the ELL part's width (0 = the 2/3 quantile of row lengths) */
    SPMV_PARAM_LAUNCHES,        /* gpu.hyb: 1 one kernel, both parts atomic; 2 ELL then COO */
    SPMV_PARAM_ROW_BLOCKS,      /* gpu.csr.adaptive: 1 the study's row blocks, 2 bins of nnz_per_wg */
    SPMV_PARAM_LANES,           /* gpu.coo.scoo: shared-memory lanes per row */
    SPMV_PARAM_PATTERNS,        /* gpu.psell: 1 slice patterns read from shared memory, 2 not */
    SPMV_PARAM_COUNT
} spmv_param_id;

typedef struct spmv_param_desc {
    const char *name;         /* "block_size", ... (the request field) */
    int32_t def, min, max;    /* def 0 means "chosen by the kernel" */
    const char *doc;
} spmv_param_desc;

const spmv_param_desc *spmv_param_get(spmv_param_id id);

/* Parameter values of one call; a value of 0 means "default". */
typedef struct spmv_params {
    int32_t v[SPMV_PARAM_COUNT];
} spmv_params;

/* The operation a kernel computes: y = A*x, or C = A*B (SpMSpM, below). */
typedef enum spmv_op { SPMV_OP_SPMV = 0, SPMV_OP_SPMSPM = 1 } spmv_op;

const char *spmv_op_name(spmv_op op);                /* "spmv" / "spmspm" */

/* The implementation that runs a kernel: the registry's entry names it,
 * and each backend binds it in a table of its own (engine/cpu/run.c,
 * engine/gpu/run.cu, engine/cpu/spmspm.c, engine/gpu/spmspm.cu), so no
 * backend matches kernel names; test_registry checks every kernel of the
 * catalogue is bound in its backend. */
typedef enum spmv_impl {
    SPMV_IMPL_NONE = 0,
    SPMV_IMPL_CPU_CSR_SERIAL,
    SPMV_IMPL_CPU_CSR_CHUNKED,
    SPMV_IMPL_CPU_CSR_OMP,
    SPMV_IMPL_CPU_ELL_OMP,
    SPMV_IMPL_CPU_HLL_OMP,
    SPMV_IMPL_CPU_PCSR_OMP,
    SPMV_IMPL_CPU_PSELL_OMP,
    SPMV_IMPL_GPU_CSR_SCALAR,
    SPMV_IMPL_GPU_CSR_WARP_BUFFER,
    SPMV_IMPL_GPU_CSR_VECTOR,
    SPMV_IMPL_GPU_CSR_TILED,
    SPMV_IMPL_GPU_CSR_TEXTURE,
    SPMV_IMPL_GPU_CSR_ADAPTIVE,
    SPMV_IMPL_GPU_CSR_MERGE,
    SPMV_IMPL_GPU_ELL,
    SPMV_IMPL_GPU_HLL,
    SPMV_IMPL_GPU_COO_ATOMIC,
    SPMV_IMPL_GPU_COO_SLICED,
    SPMV_IMPL_GPU_HYB,
    SPMV_IMPL_CUSPARSE_CSR,
    SPMV_IMPL_CUSPARSE_COO,
    SPMV_IMPL_CUSPARSE_SELL,
    SPMV_IMPL_GPU_CSR_LIGHT,
    SPMV_IMPL_GPU_CSR_BINNED,
    SPMV_IMPL_GPU_CSR_SPMM,
    SPMV_IMPL_GPU_PCSR,
    SPMV_IMPL_GPU_PSELL,
    SPMV_IMPL_AUTO,
    SPMV_IMPL_CPU_SPMSPM_SERIAL,
    SPMV_IMPL_CPU_SPMSPM_OMP,
    SPMV_IMPL_GPU_SPMSPM_THREAD_ROW,
    SPMV_IMPL_GPU_SPMSPM_BLOCK_ROW,
    SPMV_IMPL_GPU_SPMSPM_BLOCK_COUNTER,
    SPMV_IMPL_GPU_SPMSPM_WARP_NNZ,
    SPMV_IMPL_CUSPARSE_SPGEMM,
    SPMV_IMPL_CPU_SPMSPM_HASH,
    SPMV_IMPL_GPU_SPMSPM_WARP_NNZ_WIDE,
    SPMV_IMPL_GPU_SCOO,
    SPMV_IMPL_CPU_SPSELL_OMP,
    SPMV_IMPL_GPU_SPSELL,
    SPMV_IMPL_CPU_PBSR_OMP,
    SPMV_IMPL_GPU_PBSR,
    SPMV_IMPL_COUNT
} spmv_impl;

typedef struct spmv_kernel {
    const char *name;          /* "cpu.csr.omp" */
    spmv_device_kind device;
    spmv_format format;        /* the format it reads */
    unsigned params;           /* bit (1u << spmv_param_id) per parameter it takes */
    const char *summary;       /* one line for /v1/kernels and docs */
    spmv_op op;                /* last, so positional rows without it are SpMV kernels */
    int32_t max_k;             /* columns of x it takes at once (SpMM); 0 or 1: one (spmv_kernel_max_k) */
    spmv_impl impl;            /* what runs it (its backend's binding) */
} spmv_kernel;

/* Most columns a block vector (and so an SpMM) may have. */
#define SPMV_MAX_K 64
/* Columns kernel k multiplies in one call: 1 for single-vector kernels,
 * up to SPMV_MAX_K for those that take a block of x (docs/kernels.md). */
int32_t spmv_kernel_max_k(const spmv_kernel *k);

size_t spmv_kernel_count(void);
const spmv_kernel *spmv_kernel_at(size_t i);
const spmv_kernel *spmv_kernel_find(const char *name);
/* Whether this build and host can run k; if not, *reason (static text or
 * text owned by the engine) says why. */
bool spmv_kernel_available(const spmv_kernel *k, const char **reason);
/* Checks every parameter set in p applies to k and lies in its range; fills
 * defaults into *resolved. */
int spmv_params_resolve(const spmv_kernel *k, const spmv_params *p, spmv_params *resolved, spmv_error *err);

/* cpu.csr.chunked's chunk width in columns for parameters p (resolved or
 * not: span, else ceil(cols / chunk), else the default span), at least 1. */
int64_t spmv_chunked_width(const spmv_params *p, int32_t cols);
/* Units of work one run of k costs on a rows x cols matrix of nnz entries,
 * the unit max_request_work counts (docs/api.md): max(nnz, rows) for every
 * kernel (a multiply-add an entry, a store a row), plus rows for every pass
 * over the rows after the first for cpu.csr.chunked (ceil(cols / width)
 * passes). p as given (0 = default). Never overflows: saturates at
 * INT64_MAX. */
int64_t spmv_kernel_work(const spmv_kernel *k, const spmv_params *p, int32_t rows, int32_t cols, int64_t nnz);
/* Whether work per run is pathological for a sweep (auto tuning, a bench
 * of every kernel): over SPMV_WORK_EXCESS times max(nnz, rows) and over
 * SPMV_WORK_EXCESS_FLOOR units. Such a setting runs only when named. */
#define SPMV_WORK_EXCESS 16
#define SPMV_WORK_EXCESS_FLOOR (INT64_C(1) << 26)
bool spmv_kernel_work_excessive(int64_t work, int32_t rows, int64_t nnz);

/* ----------------------------------------------------------- statistics */

/* The statistic of the timed runs that the rates (gflops, gbps) and the
 * comparisons built on them (a bench's speedup, efficiency, best) use:
 * the median by default, which one preempted run cannot move; the mean,
 * as the studies the catalogue reproduces report (SPEC §5). */
typedef enum spmv_stat {
    SPMV_STAT_MEDIAN = 0,
    SPMV_STAT_MEAN,
} spmv_stat;

typedef struct spmv_stats {
    int32_t runs, warmup;
    double mean_ms, stddev_ms, min_ms, median_ms, max_ms;
    double gflops;   /* flops / the `stat` time (2*nnz per run for SpMV) */
    double gbps;     /* bytes (spmv_kernel_bytes()) / the `stat` time */
    spmv_stat stat;  /* which time the rates divide: the median unless spmv_stats_use changed it */
    int64_t flops, bytes; /* one run's counts, as spmv_stats_compute was given them */
} spmv_stats;

/* Fills stats from `runs` timings in ms (the array is reordered); the
 * rates at the median. */
void spmv_stats_compute(double *times_ms, int32_t runs, int32_t warmup,
                        int64_t flops, int64_t bytes, spmv_stats *out);
/* The rates of s again at statistic `which` (its flops and bytes over
 * mean_ms or median_ms); s->stat says which. */
void spmv_stats_use(spmv_stats *s, spmv_stat which);
/* s's time at `which`: median_ms or mean_ms. */
double spmv_stats_ms(const spmv_stats *s, spmv_stat which);
/* "median", "mean"; spmv_stat_parse takes those names (SPMV_OK), anything
 * else is SPMV_ERR_INVALID. SPMV_STAT_NAMES lists them for messages. */
#define SPMV_STAT_NAMES "\"median\" or \"mean\""
const char *spmv_stat_name(spmv_stat s);
int spmv_stat_parse(const char *name, spmv_stat *out);
/* Bytes a kernel must move once: the arrays of its format + x once + y once
 * (the count documented in docs/kernels.md). */
int64_t spmv_kernel_bytes(const spmv_kernel *k, const spmv_matrix *m);
double spmv_now_ms(void);  /* monotonic clock */

/* ------------------------------------------------------------ CPU kernels */

/* Whether k's implementation is bound in the CPU backend (a CPU kernel of
 * the catalogue always is: test_registry checks it). */
bool spmv_cpu_kernel_bound(const spmv_kernel *k);

/* Runs a CPU kernel `warmup` times, then `runs` timed times, y = A*x.
 * x has m->cols and y m->rows values of m->dtype. Builds a missing format
 * (or an HLL of another hack_size) into a scratch copy before timing. */
int spmv_cpu_run(const spmv_kernel *k, const spmv_matrix *m, const spmv_params *p,
                 const void *x, void *y, int32_t warmup, int32_t runs,
                 spmv_stats *stats, spmv_error *err);

/* The reference: y = A*x with cpu.csr.serial on the CSR. */
void spmv_reference(const spmv_csr *a, const void *x, void *y);

/* max_i |y_i - ref_i| / max(|ref|_inf, tiny) over the rows whose reference
 * is finite: the relative error reported by `verify` and used by auto
 * (both in dtype). A non-finite reference value (A or x holds a NaN or an
 * infinity) is matched only by the same non-finite value in y; anything
 * else non-finite in y, or a mismatch there, gives +inf. */
double spmv_max_rel_err(spmv_dtype dtype, const void *y, const void *ref, int32_t n);

/* ------------------------------------------------------------ GPU backend */

/* Whether k's implementation is bound in the GPU backend (every GPU kernel
 * of the catalogue, in a CUDA build; none without CUDA). */
bool spmv_gpu_kernel_bound(const spmv_kernel *k);
/* Number of usable GPUs; 0 with *reason set when none (no driver, no
 * device, or a build without CUDA). */
int spmv_gpu_count(const char **reason);

typedef struct spmv_gpu_info {
    char name[128];
    size_t mem_total, mem_free, mem_used_by_spmvd;
    size_t mem_scratch;       /* of mem_used_by_spmvd: the context's kernel scratch, kept between calls */
    uint64_t evictions;       /* derived formats evicted under memory pressure so far */
    int cc_major, cc_minor, sm_count;
} spmv_gpu_info;

/* A device context: one per GPU, created and used by one thread only (the
 * GPU worker), owning the device's stream and cuSPARSE handle. */
typedef struct spmv_gpu_ctx spmv_gpu_ctx;

int spmv_gpu_ctx_new(int device, size_t reserve_bytes, spmv_gpu_ctx **out, spmv_error *err);
void spmv_gpu_ctx_free(spmv_gpu_ctx *ctx);
int spmv_gpu_ctx_info(spmv_gpu_ctx *ctx, spmv_gpu_info *info);
/* cudaProfilerStart (on) or cudaProfilerStop on ctx's device, after its
 * stream's work: what `ncu --profile-from-start off` measures
 * (tools/amg-profile.c --cycles). */
int spmv_gpu_profile(spmv_gpu_ctx *ctx, bool on, spmv_error *err);
/* The padding rule (spmv_format_limits) every format built on this device
 * obeys from now on (default: spmv_format_limits_default()). */
int spmv_gpu_ctx_set_limits(spmv_gpu_ctx *ctx, const spmv_format_limits *lim);

/* A matrix resident on one device. */
typedef struct spmv_gpu_matrix spmv_gpu_matrix;

typedef struct spmv_gpu_upload_stats {
    double transfer_ms, convert_ms;
    size_t bytes[SPMV_FORMAT_COUNT]; /* device bytes per format, index log2(SPMV_FMT_*) */
    double padding[SPMV_FORMAT_COUNT];
    unsigned formats;         /* formats held on the device */
} spmv_gpu_upload_stats;

/* Copies the sorted COO once and builds `formats` (CSR always) on the
 * device; those are pinned: every other format is built on first use by a
 * kernel and may be evicted, least recently used first, when an
 * allocation on this device would eat into the reserve (a pinned format the
 * padding rule refuses, or PBSR on a matrix without blocks, is skipped). Fails with SPMV_ERR_DEVICE_MEMORY,
 * leaving nothing allocated, if the result would not fit with the
 * context's reserve kept free even after evicting. */
int spmv_gpu_matrix_upload(spmv_gpu_ctx *ctx, const spmv_coo *coo, spmv_dtype dtype,
                           unsigned formats, int32_t hack_size,
                           spmv_gpu_matrix **out, spmv_gpu_upload_stats *st, spmv_error *err);
/* The same from a host CSR, which must hold the CSR contract (every
 * column inside the shape, each row's columns strictly increasing: what
 * every host CSR of the engine holds): row_ptr, col and values are copied
 * as they are (values cast to dtype on the device if the CSR's differs),
 * with no sort; the row pointers are checked on the host (SPMV_ERR_INVALID).
 * A wide CSR (64-bit row offsets) keeps them on the device, where it runs
 * what a generated band of that kind runs (below); `formats` beyond CSR is
 * SPMV_ERR_LIMIT for it. */
int spmv_gpu_matrix_upload_csr(spmv_gpu_ctx *ctx, const spmv_csr *csr, spmv_dtype dtype,
                               unsigned formats, int32_t hack_size,
                               spmv_gpu_matrix **out, spmv_gpu_upload_stats *st, spmv_error *err);
void spmv_gpu_matrix_free(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m);
/* Every device byte the matrix holds (formats, transpose, buffers, caches). */
size_t spmv_gpu_matrix_bytes(const spmv_gpu_matrix *m);

/* Where a resident matrix's device bytes are, now. Safe to call from any
 * thread while the context's thread works on the matrix (the fields read
 * are atomic): the descriptor and /metrics read it. */
typedef struct spmv_gpu_usage {
    unsigned formats;         /* SPMV_FMT_* held */
    size_t bytes[SPMV_FORMAT_COUNT]; /* per format, index log2(SPMV_FMT_*) (COO: its row array; it shares CSR's
                                      * col/val; PCSR: without the CSR's row_ptr it reads) */
    double padding[SPMV_FORMAT_COUNT]; /* slots / nnz of each format held */
    size_t transpose;         /* Aᵀ, once op t has been used */
    size_t other;             /* x and y buffers, cuSPARSE buffers, kernel caches */
    size_t total;             /* all of the above: spmv_gpu_matrix_bytes */
    double convert_ms[SPMV_FORMAT_COUNT]; /* wall time of each format's last build on the device (0: not timed) */
} spmv_gpu_usage;
void spmv_gpu_matrix_usage(const spmv_gpu_matrix *m, spmv_gpu_usage *out);
/* The slice patterns of m's PSELL (docs/kernels.md "Slice patterns"): how
 * many, and how many slices follow one (both 0 without a PSELL).
 * Context thread only. */
void spmv_gpu_matrix_psell_patterns(const spmv_gpu_matrix *m, int32_t *patterns, int64_t *slices);
/* Frees the derived formats that are neither pinned nor in `keep` (auto
 * keeps its winner's format after tuning). Context thread only. */
void spmv_gpu_matrix_trim(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, unsigned keep);

/* New values on the same pattern (nnz of them, in the matrix's dtype, CSR
 * order): copied into the CSR; every derived format and the transpose are
 * dropped, the pinned ones rebuilt now, the others on their next use.
 * Context thread only. */
int spmv_gpu_matrix_set_values(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const void *val, spmv_error *err);

/* A banded matrix built on the device by formula (engine/gpu/generate.cu),
 * the way in for matrices too large to pass through the host: row i holds
 * columns max(0, i-h) .. min(cols-1, i+h), entry (i, j) = spmv_band_value(i,
 * j) (exact in float32). Its CSR row offsets are 64-bit when the non-zeros
 * pass INT32_MAX, or when `wide` asks (columns stay 32-bit); such a matrix
 * runs gpu.csr.vector and cusparse.csr (CUSPARSE_INDEX_64I, with a 64-bit
 * copy of the columns made on its first use: cuSPARSE takes no mixed index
 * sizes), and
 * every other kernel, format (or its download), transpose answers SPMV_ERR_LIMIT
 * saying so. Only CSR is held; it counts in the context like an upload. */
typedef struct spmv_band_spec {
    int64_t rows, cols, half_width;
    spmv_dtype dtype;
    bool wide;                /* 64-bit offsets even below INT32_MAX non-zeros (tests, benchmarks) */
} spmv_band_spec;

int spmv_gpu_matrix_generate_band(spmv_gpu_ctx *ctx, const spmv_band_spec *spec, spmv_gpu_matrix **out,
                                  spmv_error *err);

/* Copies x in, runs warmup + timed runs (CUDA events), copies y out. */
int spmv_gpu_run(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m,
                 const spmv_params *p, const void *x, void *y,
                 int32_t warmup, int32_t runs, spmv_stats *stats, spmv_error *err);

/* Copies a device format back to the host (for the tests that compare
 * device conversions with host ones entry by entry). */
int spmv_gpu_matrix_download(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_format f,
                             spmv_matrix *out, spmv_error *err);

/* ------------------------------------------------- vectors and BLAS-1 */

/* A vector resident where a matrix lives: `k` columns of `n` values each
 * (k = 1: a plain vector; k > 1: a block, column-major, column j at
 * data + j*n), in host memory (device SPMV_DEVICE_CPU) or in the memory of
 * the GPU whose context allocated it. The engine's vector calls take that
 * context (NULL for host vectors) and dispatch on v->device: host vectors
 * run OpenMP loops (engine/blas.c), device vectors cuBLAS and small kernels
 * on the context's stream (engine/gpu/blas.cu). Device calls are queued in
 * stream order; only the calls that return a number to the host (dot,
 * nrm2, read) wait for it. Device bytes are counted in the context's used
 * total (spmv_gpu_info.mem_used_by_spmvd). Operands of one call must share
 * device, dtype, n and k, else SPMV_ERR_SHAPE / SPMV_ERR_INVALID with a
 * message naming both. */
typedef struct spmv_vec {
    spmv_device_kind device;
    spmv_dtype dtype;
    int64_t n;       /* values per column */
    int32_t k;       /* columns, 1..SPMV_MAX_K */
    void *data;      /* n*k values; host or device memory */
} spmv_vec;

/* Bytes of v's values (n*k*dtype size). */
size_t spmv_vec_bytes(const spmv_vec *v);
/* Allocates n*k values (contents undefined) on the host (ctx NULL,
 * device CPU) or on ctx's GPU; SPMV_ERR_LIMIT on overflow, SPMV_ERR_NOMEM
 * or SPMV_ERR_DEVICE_MEMORY (the context's reserve is kept) when short. */
int spmv_vec_alloc(spmv_gpu_ctx *ctx, spmv_device_kind device, spmv_dtype dtype, int64_t n, int32_t k,
                   spmv_vec *out, spmv_error *err);
void spmv_vec_free(spmv_gpu_ctx *ctx, spmv_vec *v);   /* zeroes *v; NULL data is a no-op */
/* Column j of an n x k vector: one column over the same memory (not owned). */
spmv_vec spmv_vec_column(const spmv_vec *v, int32_t j);
/* Host bytes in / out: `src`/`dst` hold all n*k values of v's dtype. */
int spmv_vec_write(spmv_gpu_ctx *ctx, spmv_vec *v, const void *src, spmv_error *err);
int spmv_vec_read(spmv_gpu_ctx *ctx, const spmv_vec *v, void *dst, spmv_error *err);
/* v = value everywhere; v = spmv_random_vector(seed) (the same values on
 * every device for one seed, column j drawn with seed + j*0x9E3779B97F4A7C15). */
int spmv_vec_fill(spmv_gpu_ctx *ctx, spmv_vec *v, double value, spmv_error *err);
int spmv_vec_fill_random(spmv_gpu_ctx *ctx, spmv_vec *v, uint64_t seed, spmv_error *err);
/* BLAS-1 over whole blocks (every column): y = x; x = alpha*x; y += alpha*x;
 * y = alpha*x + beta*y; y = x .* y (element-wise, Jacobi's D^-1 r). */
int spmv_vec_copy(spmv_gpu_ctx *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err);
int spmv_vec_scal(spmv_gpu_ctx *ctx, double alpha, spmv_vec *x, spmv_error *err);
int spmv_vec_axpy(spmv_gpu_ctx *ctx, double alpha, const spmv_vec *x, spmv_vec *y, spmv_error *err);
int spmv_vec_axpby(spmv_gpu_ctx *ctx, double alpha, const spmv_vec *x, double beta, spmv_vec *y,
                   spmv_error *err);
int spmv_vec_mul(spmv_gpu_ctx *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err);
/* Column-wise reductions into out[0..k-1] (host memory), accumulated in
 * float64 whatever the dtype; these wait for the device. */
int spmv_vec_dot(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, double *out, spmv_error *err);
int spmv_vec_nrm2(spmv_gpu_ctx *ctx, const spmv_vec *x, double *out, spmv_error *err);
/* The k-column calls of a lockstep (engine/krylov_block.c): column j of a
 * block with its own scalar (alpha[j], beta[j]: k values in host memory),
 * and `on` (k flags in host memory; NULL: every column) masking columns
 * off: a column whose flag is false is neither read nor written, and its
 * reductions give 0; x and y of an update are two blocks (diag_k's may be
 * one). On a GPU each call is one launch for all k columns,
 * and a reduction waits once and brings its k (2k) results back in one
 * copy; on the host each column runs the loop of the one-column call
 * above, so a column's numbers are those of spmv_vec_axpy, _axpby, _mul,
 * _dot and _nrm2 on it (bit for bit where the loops run serially, under
 * spmv_cpu_serial_below(): an OpenMP team's sums may add in another order
 * from one call to the next).
 *   axpy_k:     y_j += alpha_j x_j
 *   xpay_k:     y_j  = x_j + beta_j y_j (beta_j == 0: y_j = x_j, its old
 *               values not read, NaN or not)
 *   diag_k:     y_j  = d .* x_j, d one column of n values (Jacobi's D^-1 on
 *               k columns)
 *   dot_k:      out[j] = x_j·y_j
 *   nrm2_dot_k: nrm[j] = ||x_j|| and, y not NULL, dot[j] = x_j·y_j, in one
 *               pass (a preconditioned CG's ||r|| and r·z). */
int spmv_vec_axpy_k(spmv_gpu_ctx *ctx, const double *alpha, const spmv_vec *x, spmv_vec *y, const bool *on,
                    spmv_error *err);
int spmv_vec_xpay_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const double *beta, spmv_vec *y, const bool *on,
                    spmv_error *err);
int spmv_vec_diag_k(spmv_gpu_ctx *ctx, const spmv_vec *d, const spmv_vec *x, spmv_vec *y, const bool *on,
                    spmv_error *err);
int spmv_vec_dot_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, const bool *on, double *out,
                   spmv_error *err);
int spmv_vec_nrm2_dot_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, const bool *on, double *nrm,
                        double *dot, spmv_error *err);
/* Waits until every call queued on ctx's stream is done (no-op on host). */
int spmv_vec_sync(spmv_gpu_ctx *ctx, spmv_error *err);

/* Small work stays serial. Host loops run on one thread below this many
 * values: the BLAS-1 calls above on host vectors (n*k values), and the CPU
 * kernels at their default thread count (the `threads` parameter 0:
 * non-zeros of the matrix; an explicit `threads` is obeyed). Below it,
 * waking OpenMP's team costs more than the threads save: microseconds on
 * an idle host, milliseconds when another process holds a core and the
 * team waits for a descheduled thread. On one thread every loop runs in
 * the serial order, so a result is bitwise the serial one. The host side
 * has no context object, so this is a setting of the calling thread, as
 * OpenMP's own (omp_set_num_threads) are: the daemon's workers set it from
 * the configuration (`serial_below`) before each task. 0: never serial
 * (every loop on the whole team). */
#define SPMV_SERIAL_BELOW_DEFAULT 131072
void spmv_cpu_set_serial_below(int64_t values);
int64_t spmv_cpu_serial_below(void);
/* The team for a CPU kernel: `threads` when > 0, else one thread for work
 * under spmv_cpu_serial_below(), else omp_get_max_threads(). */
int32_t spmv_cpu_threads(int32_t threads, int64_t work);

/* Host memory the GPUs can reach by DMA (engine/gpu/blas.cu; absent.c
 * answers SPMV_ERR_UNAVAILABLE). spmv_gpu_host_pin registers n bytes at p
 * (memory mapped elsewhere: a shared-memory region) with every device,
 * spmv_gpu_host_unpin undoes it; spmv_gpu_host_alloc/free give page-locked
 * buffers (request bodies and answers of the binary spmv path). A copy
 * between a device and such memory is one DMA, with no staging copy. Any
 * thread may call them. */
int spmv_gpu_host_pin(void *p, size_t n, spmv_error *err);
void spmv_gpu_host_unpin(void *p);
int spmv_gpu_host_alloc(size_t n, void **out, spmv_error *err);
void spmv_gpu_host_free(void *p);
/* CUDA IPC: opens another process's device allocation on GPU `device`
 * from its cudaIpcMemHandle (SPMV_GPU_IPC_HANDLE_BYTES bytes); *dptr is
 * its base here and *bytes its size (cuMemGetAddressRange). Close with
 * spmv_gpu_ipc_close. SPMV_ERR_INVALID for a handle the driver refuses. */
#define SPMV_GPU_IPC_HANDLE_BYTES 64
int spmv_gpu_ipc_open(int device, const void *handle, void **dptr, size_t *bytes, spmv_error *err);
void spmv_gpu_ipc_close(int device, void *dptr);

/* Device side of the calls above (engine/gpu/blas.cu; absent.c answers
 * SPMV_ERR_UNAVAILABLE): the spmv_vec_* functions call these for device
 * vectors, so callers never need them directly. */
int spmv_gpu_vec_alloc(spmv_gpu_ctx *ctx, spmv_dtype dtype, int64_t n, int32_t k, spmv_vec *out, spmv_error *err);
void spmv_gpu_vec_free(spmv_gpu_ctx *ctx, spmv_vec *v);
int spmv_gpu_vec_write(spmv_gpu_ctx *ctx, spmv_vec *v, const void *src, spmv_error *err);
int spmv_gpu_vec_read(spmv_gpu_ctx *ctx, const spmv_vec *v, void *dst, spmv_error *err);
int spmv_gpu_vec_fill(spmv_gpu_ctx *ctx, spmv_vec *v, double value, spmv_error *err);
int spmv_gpu_vec_copy(spmv_gpu_ctx *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err);
int spmv_gpu_vec_scal(spmv_gpu_ctx *ctx, double alpha, spmv_vec *x, spmv_error *err);
int spmv_gpu_vec_axpby(spmv_gpu_ctx *ctx, double alpha, const spmv_vec *x, double beta, spmv_vec *y,
                       spmv_error *err);  /* beta == 1: axpy */
int spmv_gpu_vec_mul(spmv_gpu_ctx *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err);
int spmv_gpu_vec_dot(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, double *out, spmv_error *err);
int spmv_gpu_vec_nrm2(spmv_gpu_ctx *ctx, const spmv_vec *x, double *out, spmv_error *err);
int spmv_gpu_sync(spmv_gpu_ctx *ctx, spmv_error *err);
int spmv_gpu_vec_axpy_k(spmv_gpu_ctx *ctx, const double *alpha, const spmv_vec *x, spmv_vec *y, const bool *on,
                        spmv_error *err);
int spmv_gpu_vec_xpay_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const double *beta, spmv_vec *y, const bool *on,
                        spmv_error *err);
int spmv_gpu_vec_diag_k(spmv_gpu_ctx *ctx, const spmv_vec *d, const spmv_vec *x, spmv_vec *y, const bool *on,
                        spmv_error *err);
int spmv_gpu_vec_nrm2_dot_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, const bool *on, double *nrm,
                            double *dot, spmv_error *err);  /* nrm NULL: the dots only */

/* ------------------------------------- products with resident operands */

/* How one product runs: y = alpha*A*x + beta*y. The kernel runs `warmup`
 * untimed and `runs` timed times; alpha and beta are applied once, after
 * the timed runs: when alpha is 1 and beta 0 the kernel writes y itself,
 * otherwise it writes A*x into scratch (poisoned first) and one axpby
 * forms y (its time is stats-free and reported as axpby_ms). With beta 0
 * y is only written, so it is poisoned before the first run. x and y must
 * be distinct vectors with x->k == y->k <= spmv_kernel_max_k(kernel);
 * x->n == A's cols and y->n == A's rows (SPMV_ERR_SHAPE names both). For
 * Aᵀ callers pass the transpose (spmv_matrix_transpose,
 * spmv_gpu_matrix_transpose): a kernel never sees `op`. */
typedef struct spmv_apply_args {
    double alpha, beta;
    int32_t warmup, runs;
} spmv_apply_args;

/* The checks both backends make before a product (x and y distinct, A's
 * dtype, x->k == y->k <= the kernel's max_k, lengths, finite alpha/beta). */
int spmv_apply_check(const spmv_kernel *k, int32_t rows, int32_t cols, spmv_dtype dtype, const spmv_vec *x,
                     const spmv_vec *y, const spmv_apply_args *a, spmv_error *err);
/* Host: x and y host vectors, kernel a CPU kernel (any k it takes). */
int spmv_cpu_apply(const spmv_kernel *k, const spmv_matrix *m, const spmv_params *p, const spmv_apply_args *a,
                   const spmv_vec *x, spmv_vec *y, spmv_stats *stats, double *axpby_ms, spmv_error *err);
/* Device: x and y vectors on ctx's GPU, m resident there. */
int spmv_gpu_apply(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                   const spmv_apply_args *a, const spmv_vec *x, spmv_vec *y, spmv_stats *stats,
                   double *axpby_ms, spmv_error *err);
/* One product y = A·x (x, y: device vectors of ctx's GPU, k = 1, or k
 * columns for gpu.csr.spmm: an SpMM of column-major blocks) launched
 * on the context's stream and not waited for: no poisoning, no timing, no
 * copies. The format is built and the kernel prepared first where they
 * are missing (those wait). For loops timed as a whole, such as the
 * cluster's sharded product (local block, exchange, off-diagonal block);
 * spmv_gpu_sync waits for it. */
int spmv_gpu_launch(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                    const spmv_vec *x, spmv_vec *y, spmv_error *err);
/* A resident matrix's product as spmv_gpu_launch runs it: the matrix, the
 * kernel and its parameters (what a solve multiplies by, lent to its
 * preconditioner: docs/kernels.md, "The AMG V-cycle"). */
typedef struct spmv_gpu_product {
    spmv_gpu_matrix *m;
    const spmv_kernel *k;
    const spmv_params *p;
} spmv_gpu_product;
/* spmv_gpu_run for a block of k columns of host x (k*cols values, column-
 * major) and y (k*rows): copies in, spmv_gpu_apply (alpha 1, beta 0),
 * copies out. k == 1 is exactly spmv_gpu_run. */
int spmv_gpu_run_k(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                   int32_t ncols, const void *x, void *y, int32_t warmup, int32_t runs, spmv_stats *stats,
                   spmv_error *err);
/* Where a batch's time went (spmv_gpu_run_batch; the daemon's dynamic
 * batching reports it, docs/api.md "Dynamic batching"), in ms: the x
 * copies into the device block, the layout changes on the device (X to
 * rows, Y back to columns), the SpMM, the y copies out; host_ms the rest
 * of total_ms, the call as the host saw it (set-up, launches, waiting). */
typedef struct spmv_batch_times {
    double h2d_ms, layout_ms, spmm_ms, d2h_ms, host_ms, total_ms;
} spmv_batch_times;
/* Dynamic batching's product: y[j] = A·x[j] for j < ncols, each x[j] (A's
 * cols values) and y[j] (A's rows) a host array of its own, the products
 * run as one SpMM without packing anything on the host. Each x[j] is one
 * copy straight into its column of a device block, each y[j] one copy
 * straight out of its column (on the context's stream, one wait at the
 * end). The kernel reads X in the layout it gathers best: gpu.csr.spmm
 * row-major X (one entry's ncols values side by side) into column-major Y,
 * cusparse.csr row-major X and Y (CUSPARSE_ORDER_ROW); X is turned to rows
 * and such a Y back to columns on the device, between the copies. ncols 1..the
 * kernel's max_k (any GPU SpMV kernel for 1). One timed run, no warm-up,
 * the device y poisoned first; stats as spmv_gpu_run's, times (may be NULL)
 * the parts. The device block is the context's, grown to the widest batch
 * and kept (counted as scratch in spmv_gpu_ctx_info). */
int spmv_gpu_run_batch(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                       int32_t ncols, const void *const *x, void *const *y, spmv_stats *stats,
                       spmv_batch_times *times, spmv_error *err);
/* The same on the host (spmv_cpu_run for k columns). */
/* NaN into n host values of dtype dt, before a kernel writes them: a row
 * the kernel leaves unwritten shows (OpenMP past a million values). */
void spmv_host_poison(spmv_dtype dt, void *y, int64_t n);
int spmv_cpu_run_k(const spmv_kernel *k, const spmv_matrix *m, const spmv_params *p, int32_t ncols,
                   const void *x, void *y, int32_t warmup, int32_t runs, spmv_stats *stats, spmv_error *err);

/* Aᵀ as a host matrix (CSR, same dtype and hack_size, formats CSR only):
 * *out freshly allocated. */
int spmv_matrix_transpose(const spmv_matrix *m, spmv_matrix *out, spmv_error *err);
/* Aᵀ on the device, built on first use from the resident CSR (cuSPARSE
 * csr2csc) and kept with m (freed with it, counted in its bytes); *out is
 * owned by m. */
int spmv_gpu_matrix_transpose(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_gpu_matrix **out, spmv_error *err);

/* Bytes an SpMM of k columns moves once: the format once plus x and y k
 * times (spmv_kernel_bytes for k = 1). */
int64_t spmv_kernel_bytes_k(const spmv_kernel *k, const spmv_matrix *m, int32_t ncols);

/* ------------------------------------------------------------- SpMSpM */

/* C = A*B for CSR A (m x k) and B (k x n), B typically thin (few columns).
 * C is CSR with every row sorted by column and no duplicates, holding the
 * symbolic product: every (i, j) with some a_ik*b_kj stored, even where
 * the sum cancels to 0 (cuSPARSE's SpGEMM keeps the same pattern), so
 * every kernel's C has the reference's structure exactly. A and B must
 * share a dtype; sums are accumulated in it. engine/spmspm.c holds the
 * helpers, engine/cpu/spmspm.c the CPU kernels, engine/gpu/spmspm.cu the
 * GPU ones (docs/kernels.md, "SpMSpM kernels"). */

/* SPMV_ERR_SHAPE when a->cols != b->rows (the message gives both shapes),
 * SPMV_ERR_INVALID when the dtypes differ or a CSR is missing. */
int spmv_spmspm_check(const spmv_csr *a, const spmv_csr *b, spmv_error *err);
/* The same two answers from the shapes and dtypes alone (A a_rows x a_cols,
 * B b_rows x b_cols): what spmv_spmspm_check and the GPU SpMSpM both ask. */
int spmv_spmspm_check_shapes(int32_t a_rows, int32_t a_cols, spmv_dtype a_dtype, int32_t b_rows, int32_t b_cols,
                             spmv_dtype b_dtype, spmv_error *err);
/* Multiply-adds of C = A*B: sum over A's non-zeros a_ik of nnz(B row k).
 * GFLOPS of an SpMSpM count 2 flops per multiply-add. */
int64_t spmv_spmspm_madds(const spmv_csr *a, const spmv_csr *b);
/* Bytes an SpMSpM moves once: A, B and C's CSR arrays. */
int64_t spmv_spmspm_bytes(const spmv_csr *a, const spmv_csr *b, const spmv_csr *c);
/* The reference: cpu.spmspm.serial, untimed. *c is freshly allocated. */
int spmv_spmspm_reference(const spmv_csr *a, const spmv_csr *b, spmv_csr *c, spmv_error *err);
/* Sorts each row of c by column (values follow); rows already sorted are
 * left alone. Used on cuSPARSE's output. */
int spmv_csr_sort_rows(spmv_csr *c, spmv_error *err);
/* Compares a product with the reference: SPMV_ERR_SHAPE (message says
 * where) unless shape, row_ptr and col are identical; then *max_rel_err is
 * max |c - ref| / max(|ref|_inf, tiny) over the values. */
int spmv_csr_compare(const spmv_csr *c, const spmv_csr *ref, double *max_rel_err, spmv_error *err);

/* Runs an SpMSpM CPU kernel (cpu.spmspm.*) `warmup` times, then `runs`
 * timed times; each run is the whole product (count, allocate, fill). *c
 * gets the last run's product (freshly allocated). stats->gflops counts
 * 2 * spmv_spmspm_madds. */
int spmv_cpu_spmspm(const spmv_kernel *k, const spmv_csr *a, const spmv_csr *b, const spmv_params *p,
                    int32_t warmup, int32_t runs, spmv_csr *c, spmv_stats *stats, spmv_error *err);

/* The same on a GPU (gpu.spmspm.*, cusparse.spgemm) for two matrices
 * resident on ctx's device; C is computed on the device and copied back
 * into *c (host CSR, freshly allocated). Each timed run is the whole
 * product (every pass, temporary allocations included), between CUDA
 * events. */
int spmv_gpu_spmspm(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *a, spmv_gpu_matrix *b,
                    const spmv_params *p, int32_t warmup, int32_t runs, spmv_csr *c, spmv_stats *stats,
                    spmv_error *err);


/* ------------------------------------------------------------ auto-tuning */

/* The `auto` kernel (engine/tune.c): a matrix is timed with candidate
 * kernels and parameters of one device within a budget, each candidate's y
 * checked against spmv_reference, and the fastest verified one is the
 * answer. `run` runs one kernel on the caller's copy of the matrix (the
 * daemon's worker, spmv_gpu_run on a resident matrix, spmv_cpu_run). */
typedef int (*spmv_tune_run_fn)(void *ctx, const spmv_kernel *k, const spmv_params *p, const void *x, void *y,
                                int32_t warmup, int32_t runs, spmv_stats *st, spmv_error *err);

typedef struct spmv_tune_options {
    spmv_device_kind device;  /* candidates run on this device */
    double budget_ms;         /* wall time to spend (0: SPMV_TUNE_BUDGET_MS) */
    int32_t max_runs;         /* kernel runs in all, probes and warm-ups counted (0: no bound) */
    int32_t runs;             /* timed runs per candidate (0: 10) */
    uint64_t seed;            /* of the random x */
    int32_t k;                /* columns of x (0 or 1: SpMV); candidates are the kernels taking k */
    unsigned skip_formats;    /* SPMV_FMT_* whose kernels are not candidates (auto's build policy) */
} spmv_tune_options;

#define SPMV_TUNE_BUDGET_MS 2000.0

typedef struct spmv_tune_result {
    const spmv_kernel *kernel;  /* the winner */
    spmv_params params;         /* its parameters (0 = the kernel's default) */
    double median_ms;           /* the winner's median */
    double cost_ms;             /* wall time tuning took, reference included */
    int32_t candidates, timed;  /* in the list / timed in full */
    int32_t runs;               /* kernel runs spent (probes, warm-ups, timed) */
    bool budget_hit;            /* stopped early by budget_ms or max_runs */
} spmv_tune_result;

/* The registry entry "auto" (never run directly: callers tune, then run
 * the winner). */
bool spmv_kernel_is_auto(const spmv_kernel *k);
/* Tunes over the candidates of o->device; SPMV_ERR_UNAVAILABLE when no
 * candidate ran and verified. */
int spmv_tune(const spmv_csr *a, const spmv_tune_options *o, spmv_tune_run_fn run, void *ctx,
              spmv_tune_result *out, spmv_error *err);
/* "kernel k=v,k=v" of a result's parameters, for logs and answers. */
void spmv_params_format(const spmv_kernel *k, const spmv_params *p, char *buf, size_t len);

/* Payback (engine/payback.c): how many products repay building format f,
 * convert_ms / (csr_ms - format_ms) rounded up, where csr_ms is the best
 * measured time of a CSR kernel and format_ms that of a kernel reading f
 * (same matrix, dtype and device). A time of 0 (or NaN) is not measured. */
typedef enum spmv_payback_status {
    SPMV_PAYBACK_REPAID = 0,    /* *products holds the count */
    SPMV_PAYBACK_NOT_MEASURED,  /* a time is missing */
    SPMV_PAYBACK_NOT_FASTER,    /* f's best is not below CSR's (or so little that nothing repays it) */
    SPMV_PAYBACK_BASELINE,      /* f is CSR: what the others are measured against */
} spmv_payback_status;
spmv_payback_status spmv_payback(spmv_format f, double convert_ms, double csr_ms, double format_ms,
                                 int64_t *products);
/* "not measured", "not faster", "baseline" (NULL for SPMV_PAYBACK_REPAID). */
const char *spmv_payback_reason(spmv_payback_status s);

#ifdef __cplusplus
}
#endif
#endif /* SPMV_H */
