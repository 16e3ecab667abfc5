/* spmv-kernels — prints the kernel catalogue as Markdown, or rewrites it
 * in a document.
 *
 *   build/spmv-kernels                       print the block
 *   build/spmv-kernels --update docs/kernels.md
 *                                            replace the block between the
 *                                            catalogue markers in place
 *
 * The block comes from the engine's one kernel table (engine/registry.c);
 * test_registry fails when docs/kernels.md does not hold it verbatim, and
 * this tool is how the doc is brought back in step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

/* The whole file, NUL-terminated, or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
        buf[n] = '\0';
    else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

static int update(const char *path)
{
    int rc = 1;
    char *doc = slurp(path);
    char *begin = doc ? strstr(doc, SPMV_REGISTRY_MD_BEGIN) : NULL;
    char *end = begin ? strstr(begin, SPMV_REGISTRY_MD_END) : NULL;
    FILE *out = NULL;
    if (!end) {
        fprintf(stderr, "spmv-kernels: %s: cannot read it or it lacks the catalogue markers\n", path);
        goto done;
    }
    end += strlen(SPMV_REGISTRY_MD_END);
    if (*end == '\n')
        end++;
    if (!(out = fopen(path, "wb"))) {
        perror(path);
        goto done;
    }
    fwrite(doc, 1, (size_t)(begin - doc), out);
    spmv_registry_markdown(out);
    fputs(end, out);
    rc = fclose(out) == 0 ? 0 : 1;
done:
    free(doc);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--update") == 0)
        return update(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: spmv-kernels [--update FILE.md]\n");
        return 2;
    }
    spmv_registry_markdown(stdout);
    return 0;
}
