/* spy.c — GET /v1/matrices/{id}/spy.png: the sparsity pattern as a PNG.
 *
 * A density picture, not a dot per entry: the matrix is divided into a
 * grid of `size` pixels along its longer side (the shorter side keeps the
 * aspect ratio), each pixel counts the entries that fall in its block, and
 * the count is drawn on a logarithmic grey scale (white: empty, black: the
 * densest block), so a 10^8-entry matrix still gives a picture in which
 * structure shows. Counting is one pass over the host CSR, done here on
 * the HTTP thread: it reads memory the way a kernel does but is not timed
 * and takes no queue slot. libpng writes into memory through its write
 * callback.
 */
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

#define SPY_DEFAULT 512
#define SPY_MIN 16
#define SPY_MAX 4096

typedef struct png_buf {
    unsigned char *data;
    size_t len, cap;
    bool oom;
} png_buf;

static void png_write_mem(png_structp png, png_bytep data, png_size_t len)
{
    png_buf *b = png_get_io_ptr(png);
    if (b->oom)
        return;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 65536;
        while (cap < b->len + len)
            cap *= 2;
        unsigned char *nd = realloc(b->data, cap);
        if (!nd) {
            b->oom = true;
            return;
        }
        b->data = nd;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
}

static void png_flush_mem(png_structp png) { (void)png; }

/* Counts entries per pixel block; returns the largest count. */
static uint32_t count_blocks(const spmv_csr *a, int32_t w, int32_t h, uint32_t *counts)
{
    uint32_t maxc = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t py = (int64_t)i * h / a->rows;
        for (int64_t k = spmv_csr_row_begin(a, i); k < spmv_csr_row_begin(a, i + 1); k++) {
            int64_t px = (int64_t)a->col[k] * w / a->cols;
            uint32_t *c = &counts[py * w + px];
            if (*c < UINT32_MAX)
                (*c)++;
            if (*c > maxc)
                maxc = *c;
        }
    }
    return maxc;
}

/* Encodes a grey image; 0 on success. */
static int encode_png(const unsigned char *pixels, int32_t w, int32_t h, png_buf *out)
{
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return -1;
    }
    png_set_write_fn(png, out, png_write_mem, png_flush_mem);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int32_t y = 0; y < h; y++)
        png_write_row(png, (png_const_bytep)(pixels + (size_t)y * (size_t)w));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return out->oom ? -1 : 0;
}

static void spy_begin(request *r)
{
    int32_t size = SPY_DEFAULT;
    const char *s = api_query(r, "size");
    if (s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (!*s || *end || v < SPY_MIN || v > SPY_MAX) {
            api_error(r, 400, "invalid_request", "`size` must be an integer in %d..%d pixels, not \"%s\"", SPY_MIN,
                      SPY_MAX, s);
            return;
        }
        size = (int32_t)v;
    }
    matrix *m = api_get_matrix(r);
    if (!m)
        return;
    const spmv_csr *a = &m->host.csr;
    int32_t rows = a->rows > 0 ? a->rows : 1, cols = a->cols > 0 ? a->cols : 1;
    /* the longer side gets `size` pixels, but never more pixels than entries of the side */
    int32_t w = cols >= rows ? size : (int32_t)((int64_t)size * cols / rows);
    int32_t h = rows >= cols ? size : (int32_t)((int64_t)size * rows / cols);
    w = w < 1 ? 1 : (w > cols ? cols : w);
    h = h < 1 ? 1 : (h > rows ? rows : h);
    uint32_t *counts = calloc((size_t)w * (size_t)h, sizeof *counts);
    unsigned char *pixels = malloc((size_t)w * (size_t)h);
    png_buf out = {0};
    if (!counts || !pixels)
        goto oom;
    uint32_t maxc = a->rows > 0 && a->cols > 0 ? count_blocks(a, w, h, counts) : 0;
    double scale = maxc > 0 ? 255.0 / log1p((double)maxc) : 0;
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++)
        pixels[i] = (unsigned char)(255.0 - (counts[i] ? fmax(40.0, scale * log1p((double)counts[i])) : 0.0));
    if (encode_png(pixels, w, h, &out) != 0)
        goto oom;
    api_bytes(r, 200, "image/png", out.data, out.len);
    out.data = NULL;
    goto done;
oom:
    api_error(r, 500, "out_of_memory", "out of memory drawing the picture");
done:
    free(out.data);
    free(counts);
    free(pixels);
    matrix_unref(m);
}

static const char *const spy_query[] = {"size", NULL};
const route_handlers api_spy_get = {.begin = spy_begin, .body_kind = API_BODY_NONE, .query = spy_query};
