/* hello.c — the smallest libspmvclient program: is the daemon there?
 * Build: cc hello.c $(pkg-config --cflags --libs spmvclient) */
#include <spmvclient.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    /* NULL: $SPMVD_URL, else $SPMV_URL, else http://127.0.0.1:8080 */
    spmv_client *h = spmv_client_new(argc > 1 ? argv[1] : NULL, NULL, NULL);
    char *json = NULL;
    spmv_client_status st = spmv_client_health(h, &json);
    printf("%s\n", st == SPMV_CLIENT_OK ? json : spmv_client_errmsg(h));
    spmv_client_string_free(json);
    spmv_client_free(h);
    return st == SPMV_CLIENT_OK ? 0 : 1;
}
