/* shm.c — y = A·x with x and y in POSIX shared memory instead of the HTTP body.
 * Build: cc shm.c $(pkg-config --cflags --libs spmvclient)
 * Run:   ./shm http://127.0.0.1:8080 [N]   (the daemon on this host, with allow_shm = true) */
#include <spmvclient.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* A random n x n matrix with per_row entries a row, uploaded; col and val
 * keep it here for the reference product. */
static spmv_client_status upload_random(spmv_client *h, int n, int per_row, int *col, double *val,
                                        spmv_client_matrix **a)
{
    char *mtx = NULL;
    size_t mtx_len = 0;
    FILE *f = open_memstream(&mtx, &mtx_len);
    if (!f)
        return SPMV_CLIENT_ERR_NOMEM;
    srand((unsigned)getpid());
    fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n", n, n, n * per_row);
    for (int k = 0; k < n * per_row; k++) {
        col[k] = rand() % n;
        val[k] = rand() / (double)RAND_MAX - 0.5;
        fprintf(f, "%d %d %.17g\n", k / per_row + 1, col[k] + 1, val[k]);
    }
    fclose(f);
    spmv_client_status st = spmv_client_upload_memory(h, mtx, mtx_len, NULL, a);
    free(mtx);
    return st;
}

/* A new shared-memory object of `bytes`, mapped. 0600 serves a daemon of
 * the same user; another needs 0660 and a shared group. */
static double *map_object(const char *name, size_t bytes, int *fd)
{
    double *region = MAP_FAILED;
    *fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (*fd < 0 || ftruncate(*fd, (off_t)bytes) != 0 ||
        (region = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0)) == MAP_FAILED)
        perror(name);
    return region;
}

/* max |y - A·x| over max |A·x|, with A·x done here. */
static double relative_error(int n, int per_row, const int *col, const double *val, const double *x,
                             const double *y)
{
    double err = 0, norm = 0;
    for (int i = 0; i < n; i++) {
        double ref = 0;
        for (int k = i * per_row; k < (i + 1) * per_row; k++) ref += val[k] * x[col[k]];
        err = fmax(err, isnan(y[i]) ? INFINITY : fabs(y[i] - ref));
        norm = fmax(norm, fabs(ref));
    }
    return err / (norm > 0 ? norm : 1);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: shm URL [N]\n");
        return 2;
    }
    int n = argc == 3 ? atoi(argv[2]) : 1000, per_row = 5, rc = 1, fd = -1, registered = 0;
    if (n < 1 || n > 1000000) {
        fprintf(stderr, "N must be 1 to 1000000\n");
        return 2;
    }
    spmv_client *h = spmv_client_new(argv[1], NULL, NULL);
    spmv_client_matrix *a = NULL;
    spmv_client_status st = SPMV_CLIENT_ERR_NOMEM;
    int *col = malloc((size_t)n * per_row * sizeof *col);
    double *val = malloc((size_t)n * per_row * sizeof *val), *region = MAP_FAILED;
    size_t bytes = 2 * (size_t)n * sizeof(double);
    char name[64];

    snprintf(name, sizeof name, "spmvd-example-%d", (int)getpid());
    if (!h || !col || !val || (st = upload_random(h, n, per_row, col, val, &a)) != SPMV_CLIENT_OK)
        goto out;
    /* The object: x in its first n doubles, y in the next n. */
    if ((region = map_object(name, bytes, &fd)) == MAP_FAILED)
        goto out;
    double *x = region, *y = region + n;
    for (int j = 0; j < n; j++) x[j] = rand() / (double)RAND_MAX;
    for (int i = 0; i < n; i++) y[i] = NAN; /* whatever the daemon does not write shows */

    if ((st = spmv_client_shm_register(h, name, 0, bytes, NULL)) != SPMV_CLIENT_OK)
        goto out;
    registered = 1;
    spmv_client_operands ops = {.dtype = SPMV_CLIENT_FLOAT64};
    spmv_client_shm_ref xr = {.name = name, .offset = 0}, yr = {.name = name, .offset = (uint64_t)n * sizeof(double)};
    spmv_client_product_result res;
    if ((st = spmv_client_spmv_shm(h, a->id, &ops, &xr, &yr, NULL, &res)) != SPMV_CLIENT_OK)
        goto out;

    /* y came back through the pages: compare it with A·x done here. */
    double err = relative_error(n, per_row, col, val, x, y);
    printf("shm: y = A*x through /dev/shm/%s, %d rows, kernel %s, max relative error %.3g\n", name, n,
           res.spmv.kernel, err);
    rc = err <= 1e-12 ? 0 : 1;
out:
    if (st != SPMV_CLIENT_OK)
        fprintf(stderr, "%s: %s [%s]\n", spmv_client_strerror(st), h ? spmv_client_errmsg(h) : "",
                h ? spmv_client_errcode(h) : "");
    if (registered)
        spmv_client_shm_unregister(h, name); /* the daemon unmaps; the object is ours to remove */
    if (region != MAP_FAILED)
        munmap(region, bytes);
    if (fd >= 0) {
        close(fd);
        shm_unlink(name);
    }
    if (a)
        spmv_client_delete(h, a->id);
    spmv_client_matrix_free(a);
    free(col), free(val);
    spmv_client_free(h);
    return rc;
}
