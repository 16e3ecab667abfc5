/* multiply.c — upload a matrix, compute y = A·x once, print the timing.
 * Build: cc multiply.c $(pkg-config --cflags --libs spmvclient)
 * Run:   ./multiply http://127.0.0.1:8080 m.mtx */
#include <spmvclient.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: multiply URL MATRIX.mtx\n");
        return 2;
    }
    spmv_client_options opts = {.timeout_ms = 60000}; /* token, TLS: see spmvclient.h */
    spmv_client_status st;
    spmv_client *h = spmv_client_new(argv[1], &opts, &st);
    if (!h) {
        fprintf(stderr, "%s\n", spmv_client_strerror(st));
        return 1;
    }
    spmv_client_matrix *m = NULL;
    double *x = NULL, *y = NULL;
    st = spmv_client_upload_file(h, argv[2], NULL, &m);
    if (st != SPMV_CLIENT_OK)
        goto fail;
    x = malloc((size_t)m->cols * sizeof *x);
    y = malloc((size_t)m->rows * sizeof *y);
    if (!x || !y)
        goto fail;
    for (int64_t j = 0; j < m->cols; j++)
        x[j] = 1.0;

    spmv_client_spmv_options o = {.kernel = "cpu.csr.serial", .runs = 10};
    spmv_client_spmv_result r;
    st = spmv_client_multiply(h, m->id, SPMV_CLIENT_FLOAT64, x, (size_t)m->cols, y, (size_t)m->rows, &o, &r);
    if (st != SPMV_CLIENT_OK)
        goto fail;
    printf("%s: y[0] = %g, median %.4f ms, %.2f GFLOP/s, queued %.3f ms\n", r.kernel, y[0], r.stats.median_ms,
           r.stats.gflops, r.queue_ms);
    spmv_client_delete(h, m->id);
    spmv_client_matrix_free(m);
    free(x);
    free(y);
    spmv_client_free(h);
    return 0;
fail:
    /* The server's own words, e.g. "line 7: column index 12 is outside 1..10" */
    fprintf(stderr, "%s: %s [%s]\n", spmv_client_strerror(st), spmv_client_errmsg(h), spmv_client_errcode(h));
    if (m)
        spmv_client_delete(h, m->id);
    spmv_client_matrix_free(m);
    free(x);
    free(y);
    spmv_client_free(h);
    return 1;
}
