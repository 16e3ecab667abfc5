/* resident.c — vectors that stay in the daemon: spmv, ops and a solve on them.
 * Build: cc resident.c $(pkg-config --cflags --libs spmvclient)
 * Run:   ./resident http://127.0.0.1:8080 spd.mtx   (a symmetric positive definite matrix) */
#include <spmvclient.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                  \
    do {                                                                                             \
        spmv_client_status st_ = (call);                                                             \
        if (st_ != SPMV_CLIENT_OK) {                                                                 \
            fprintf(stderr, "%s: %s: %s\n", #call, spmv_client_strerror(st_), spmv_client_errmsg(h)); \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: resident URL SPD.mtx\n");
        return 2;
    }
    spmv_client *h = spmv_client_new(argv[1], NULL, NULL);
    spmv_client_matrix *a = NULL;
    spmv_client_vector *ones = NULL, *b = NULL, *x = NULL;
    CHECK(spmv_client_upload_file(h, argv[2], NULL, &a));

    /* ones = 1 and b = 0, both `like` A: its length, device and dtype. */
    spmv_client_vector_options like = {.like = a->id};
    CHECK(spmv_client_vector_fill(h, 0, 1.0, &like, &ones));
    CHECK(spmv_client_vector_fill(h, 0, 0.0, &like, &b));

    /* b = A·ones without a value crossing the network. */
    spmv_client_operands op = {.x_vector = ones->id, .y_vector = b->id};
    CHECK(spmv_client_spmv(h, a->id, &op, NULL, NULL));

    /* One /v1/ops request: ||b|| and ones·b, computed where the vectors are. */
    spmv_client_ops *ops = spmv_client_ops_new();
    spmv_client_ops_result *r = NULL;
    spmv_client_ops_nrm2(ops, b->id, "bnorm");
    spmv_client_ops_dot(ops, ones->id, b->id, "sum");
    CHECK(spmv_client_ops_run(h, ops, &r));
    printf("||b|| = %g, sum(b) = %g (%.3f ms on %s)\n", spmv_client_ops_result_get(r, "bnorm", 0),
           spmv_client_ops_result_get(r, "sum", 0), r->total_ms, r->device);
    spmv_client_ops_result_free(r);
    spmv_client_ops_free(ops);

    /* Solve A x = b by CG on the daemon, x into a resident vector, then
     * read x back as binary values: it should be all ones. */
    CHECK(spmv_client_vector_fill(h, 0, 0.0, &like, &x));
    spmv_client_solve_options so = {.method = "cg", .tol = 1e-10, .b_vector = b->id, .x_out_vector = x->id};
    spmv_client_solve_result *res = NULL;
    CHECK(spmv_client_solve(h, a->id, &so, NULL, 0, &res));
    double *xv = malloc((size_t)x->n * sizeof *xv);
    CHECK(spmv_client_vector_read(h, x->id, SPMV_CLIENT_FLOAT64, xv, (size_t)x->n, NULL));
    printf("%s: %s after %lld iterations, relres %.2e, x[0] = %.12f\n", res->method, res->stop_reason,
           (long long)res->iterations, res->relres, xv[0]);

    free(xv);
    spmv_client_solve_result_free(res);
    spmv_client_vector_delete(h, ones->id);
    spmv_client_vector_delete(h, b->id);
    spmv_client_vector_delete(h, x->id);
    spmv_client_delete(h, a->id);
    spmv_client_vector_free(ones);
    spmv_client_vector_free(b);
    spmv_client_vector_free(x);
    spmv_client_matrix_free(a);
    spmv_client_free(h);
    return 0;
}
