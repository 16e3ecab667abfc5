/* mmio_number.c — exact number parsing for the Matrix Market reader.
 *
 * A coordinate file is mostly numbers, so these two functions are the
 * reader's hot path. Values must come out exactly as strtod would give them
 * (correctly rounded), but strtod costs a few hundred nanoseconds a call,
 * more than the rest of a line's work. Three tiers, each exact:
 *
 *  1. Clinger's fast path: a mantissa m <= 2^53 and a power of ten
 *     10^e with |e| <= 22 are both exact doubles, so m * 10^e (or m / 10^-e)
 *     is one correctly rounded IEEE operation.
 *  2. Most real files print 17 significant digits ("%.17g"), whose mantissa
 *     is above 2^53. With x87 80-bit long double, m < 2^64 and 10^e for
 *     |e| <= 27 are exact, so m * 10^e is one correctly rounded 64-bit
 *     mantissa operation. Rounding that again to 53 bits is wrong only when
 *     the 80-bit result lies exactly on a midpoint between two doubles (the
 *     11 dropped bits are 10000000000); that case (1 in 2048) goes to tier 3.
 *  3. strtod_l in the C locale on a copy of the token, for everything else
 *     (more than 19 significant digits, large exponents, midpoints).
 *
 * The parsers never read past the token's first non-number byte, which the
 * caller guarantees exists (the reader's lines end with '\n').
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mmio_internal.h"

#define MAX_FAST_DIGITS 19      /* 10^19 - 1 < 2^64: the mantissa fits uint64 */
#define CLINGER_MAX_MANT (UINT64_C(1) << 53)
#define CLINGER_MAX_EXP 22
#define EXTENDED_MAX_EXP 27     /* 5^27 < 2^64: 10^27 is exact in long double */

static const double pow10_double[CLINGER_MAX_EXP + 1] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

#if LDBL_MANT_DIG == 64
static const long double pow10_extended[EXTENDED_MAX_EXP + 1] = {
    1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
    1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
    1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L,
};
#endif

static inline bool is_digit(char c) { return (unsigned char)(c - '0') < 10; }

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR_DIGITS 1
#else
#define SWAR_DIGITS 0
#endif

/* SWAR digit parsing on a little-endian 8-byte load (as in fast_float):
 * all eight bytes are '0'..'9', and their decimal value. */
static inline bool is_eight_digits(uint64_t v)
{
    return !(((v + 0x4646464646464646u) | (v - 0x3030303030303030u)) & 0x8080808080808080u);
}

static inline uint64_t eight_digits_value(uint64_t v)
{
    const uint64_t mask = 0x000000ff000000ffu;
    const uint64_t mul1 = 0x000f424000000064u;   /* 100 + (1000000 << 32) */
    const uint64_t mul2 = 0x0000271000000001u;   /* 1 + (10000 << 32) */
    v -= 0x3030303030303030u;
    v = v * 10 + (v >> 8);
    return ((v & mask) * mul1 + ((v >> 16) & mask) * mul2) >> 32;
}

/* Tier 3: strtod_l on a NUL-terminated copy of [s, e). Kept out of line
 * so that its buffer does not weigh on the hot path's stack frame. */
__attribute__((noinline, cold)) static double parse_real_slow(const char *s, const char *e, mm_num_result *res, locale_t loc)
{
    char small[128];
    size_t len = (size_t)(e - s);
    char *buf = len < sizeof small ? small : malloc(len + 1);
    if (!buf) {
        /* Out of memory for a pathological token: refuse it rather than
         * guess a value. */
        *res = MM_NUM_MALFORMED;
        return 0.0;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    double v = loc ? strtod_l(buf, NULL, loc) : strtod(buf, NULL);
    *res = (errno == ERANGE && isinf(v)) ? MM_NUM_OVERFLOW : MM_NUM_OK;
    if (buf != small)
        free(buf);
    return v;
}

/* Matches inf, infinity or nan (any case) at p; returns the end or NULL. */
__attribute__((noinline, cold)) static const char *match_special(const char *p, double *out)
{
    static const struct { const char *word; size_t len; } words[] = {
        {"infinity", 8}, {"inf", 3}, {"nan", 3},
    };
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t k = 0;
        while (k < words[w].len && (p[k] | 0x20) == words[w].word[k])
            k++;
        if (k == words[w].len) {
            *out = words[w].word[0] == 'n' ? NAN : INFINITY;
            return p + k;
        }
    }
    return NULL;
}

/* Reads the exponent digits after 'e'; saturates far beyond any double's
 * range so a long run of digits cannot overflow. NULL if no digit. */
static const char *parse_exponent(const char *p, int64_t *exp10)
{
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!is_digit(*p))
        return NULL;
    int64_t e = 0;
    while (is_digit(*p)) {
        if (e < 1000000)
            e = e * 10 + (*p - '0');
        p++;
    }
    *exp10 = neg ? -e : e;
    return p;
}

/* Tiers 1 and 2; returns false when neither applies exactly. */
static inline bool fast_value(uint64_t mant, int64_t exp10, double *out)
{
    if (mant <= CLINGER_MAX_MANT && exp10 >= -CLINGER_MAX_EXP && exp10 <= CLINGER_MAX_EXP) {
        double m = (double)mant;
        *out = exp10 < 0 ? m / pow10_double[-exp10] : m * pow10_double[exp10];
        return true;
    }
#if LDBL_MANT_DIG == 64
    if (exp10 >= -EXTENDED_MAX_EXP && exp10 <= EXTENDED_MAX_EXP) {
        long double m = (long double)mant;
        long double x = exp10 < 0 ? m / pow10_extended[-exp10] : m * pow10_extended[exp10];
        uint64_t bits;
        memcpy(&bits, &x, sizeof bits);      /* the explicit 64-bit significand */
        if ((bits & 0x7ff) == 0x400)
            return false;                    /* on a midpoint: double rounding could err */
        *out = (double)x;
        return true;
    }
#endif
    return false;
}

const char *spmv_mm_parse_real(const char *p, const char *end, double *out, mm_num_result *res,
                               locale_t c_locale)
{
    const char *start = p;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!is_digit(*p) && *p != '.') {
        double special = 0.0;
        const char *e = match_special(p, &special);
        *res = e ? MM_NUM_OK : MM_NUM_MALFORMED;
        *out = neg ? -special : special;
        return e ? e : p;
    }

    uint64_t mant = 0;
    int digits = 0;          /* significant digits taken into mant */
    bool exact = true;       /* false once a digit did not fit in mant */
    bool any_digit = false;
    int64_t exp10 = 0;
    while (is_digit(*p)) {
        any_digit = true;
        if (digits < MAX_FAST_DIGITS) {
            mant = mant * 10 + (uint64_t)(*p - '0');
            digits += mant != 0;
        } else {
            exact = false;
        }
        p++;
    }
    if (*p == '.') {
        p++;
        /* Eight digits at a time while the mantissa has room for them. */
        while (SWAR_DIGITS && digits <= MAX_FAST_DIGITS - 8 && end - p >= 8) {
            uint64_t chunk;
            memcpy(&chunk, p, sizeof chunk);
            if (!is_eight_digits(chunk))
                break;
            mant = mant * 100000000u + eight_digits_value(chunk);
            digits = mant ? digits + 8 : 0;   /* may overcount: only ever safe */
            exp10 -= 8;
            any_digit = true;
            p += 8;
        }
        while (is_digit(*p)) {
            any_digit = true;
            if (digits < MAX_FAST_DIGITS) {
                mant = mant * 10 + (uint64_t)(*p - '0');
                digits += mant != 0;
                exp10--;
            } else {
                exact = false;
            }
            p++;
        }
    }
    if (!any_digit) {
        *res = MM_NUM_MALFORMED;
        return p;
    }
    if ((*p | 0x20) == 'e') {
        int64_t e;
        const char *q = parse_exponent(p + 1, &e);
        if (!q) {
            *res = MM_NUM_MALFORMED;
            return p + 1;
        }
        exp10 += e;
        p = q;
    }

    double v;
    *res = MM_NUM_OK;
    if (mant == 0 && exact)
        v = 0.0;
    else if (!exact || !fast_value(mant, exp10, &v)) {
        *out = parse_real_slow(start, p, res, c_locale);   /* sign included */
        return p;
    }
    *out = neg ? -v : v;
    return p;
}

const char *spmv_mm_parse_int64(const char *p, int64_t *out, mm_num_result *res)
{
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!is_digit(*p)) {
        *res = MM_NUM_MALFORMED;
        return p;
    }
    /* Accumulate the magnitude in uint64; the limit is 2^63 for a negative
     * number and 2^63 - 1 for a positive one. */
    const uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    bool overflow = false;
    while (is_digit(*p)) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (limit - d) / 10)
            overflow = true;
        else
            v = v * 10 + d;
        p++;
    }
    if (overflow) {
        *res = MM_NUM_OVERFLOW;
        return p;
    }
    *res = MM_NUM_OK;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return p;
}
