/* jsondump.c — JSON text as the API writes it (docs/api.md, "Numbers"):
 * a real in the shortest form that reads back as the same float64 (0.1 as
 * 0.1, not 0.10000000000000001), except measurements: a member named *_ms
 * or *_s (a time), gflops, gbps, speedup, ratio_cusparse or efficiency is
 * rounded to MEASURED_DIGITS significant digits, all a timer's reading
 * carries. Keys in the tree's order, no spaces. The API's answers
 * (api/json.c) and the job registry's envelopes (jobs.c) are written here,
 * so a job's queue_ms reads as the product's does.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/jsondump.h"

#define MEASURED_DIGITS 6

static bool measured(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    return n && ((n > 3 && strcmp(key + n - 3, "_ms") == 0) || (n > 2 && strcmp(key + n - 2, "_s") == 0) ||
                 !strcmp(key, "gflops") || !strcmp(key, "gbps") || !strcmp(key, "speedup") ||
                 !strcmp(key, "ratio_cusparse") || !strcmp(key, "efficiency"));
}

/* The shortest of %.15g .. %.17g that reads back as v (or, measured, %.6g),
 * with ".0" when it would read back as an integer. */
static void write_real(FILE *f, double v, bool rounded)
{
    char buf[40];
    for (int p = rounded ? MEASURED_DIGITS : 15; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (rounded || strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
    if (!strpbrk(buf, ".eEn"))
        fputs(".0", f);
}

static void write_string(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void write_value(FILE *f, const json_t *v, const char *key)
{
    const char *k;
    size_t i;
    json_t *m;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        fputc('{', f);
        i = 0;
        json_object_foreach((json_t *)v, k, m) {
            if (i++)
                fputc(',', f);
            write_string(f, k, strlen(k));
            fputc(':', f);
            write_value(f, m, k);
        }
        fputc('}', f);
        break;
    case JSON_ARRAY:
        fputc('[', f);
        json_array_foreach(v, i, m) {
            if (i)
                fputc(',', f);
            write_value(f, m, key); /* a list of times is times */
        }
        fputc(']', f);
        break;
    case JSON_STRING: write_string(f, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: write_real(f, json_real_value(v), measured(key)); break;
    case JSON_TRUE: fputs("true", f); break;
    case JSON_FALSE: fputs("false", f); break;
    default: fputs("null", f); break;
    }
}


char *spmvd_json_dump(const json_t *v, size_t *len)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f)
        return NULL;
    write_value(f, v, NULL);
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    if (len)
        *len = n;
    return s;
}
