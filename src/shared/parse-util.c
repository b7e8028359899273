/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "parse-util.h"

/* Consumes a run of decimal digits. On overflow the digits are still consumed (so that
 * garbage after them is reported as -EINVAL, not -ERANGE) and *ret_overflow is set. */
static const char *parse_digits(const char *p, uint64_t *ret, size_t *ret_n, bool *ret_overflow) {
        uint64_t v = 0;
        size_t n = 0;
        bool overflow = false;

        for (; *p >= '0' && *p <= '9'; p++, n++) {
                unsigned d = (unsigned) (*p - '0');

                if (overflow || v > (UINT64_MAX - d) / 10)
                        overflow = true;
                else
                        v = v * 10 + d;
        }

        *ret = v;
        *ret_n = n;
        *ret_overflow = overflow;
        return p;
}

/* Parses "digits[.fraction]" with at most max_frac fraction digits. Returns the rest of
 * the string (the unit suffix), or NULL if there are no digits or the fraction is empty
 * or too long. Overflow of the whole part is reported in *ret_overflow, as above. */
static const char *parse_decimal(const char *s, size_t max_frac,
                                 uint64_t *ret_whole, uint64_t *ret_frac, size_t *ret_frac_digits,
                                 bool *ret_overflow) {
        uint64_t frac = 0;
        size_t n, k = 0;
        const char *p;

        p = parse_digits(s, ret_whole, &n, ret_overflow);
        if (n == 0)
                return NULL;

        if (*p == '.') {
                bool frac_overflow;

                p = parse_digits(p + 1, &frac, &k, &frac_overflow);
                if (k == 0 || k > max_frac)
                        return NULL;
        }

        *ret_frac = frac;
        *ret_frac_digits = k;
        return p;
}

int parse_uint64(const char *s, uint64_t *ret) {
        uint64_t v;
        size_t n;
        bool overflow;
        const char *p;

        if (!s)
                return -EINVAL;

        p = parse_digits(s, &v, &n, &overflow);
        if (n == 0 || *p != '\0')
                return -EINVAL;
        if (overflow)
                return -ERANGE;

        *ret = v;
        return 0;
}

int parse_size(const char *s, uint64_t *ret) {
        static const struct {
                const char *suffix;
                unsigned shift;
        } table[] = {
                { "",    0  }, { "B",   0  },
                { "K",   10 }, { "KB",  10 }, { "KiB", 10 },
                { "M",   20 }, { "MB",  20 }, { "MiB", 20 },
                { "G",   30 }, { "GB",  30 }, { "GiB", 30 },
                { "T",   40 }, { "TB",  40 }, { "TiB", 40 },
        };
        uint64_t whole, frac, v;
        size_t k, i;
        bool overflow;
        unsigned shift;
        const char *p;

        if (!s)
                return -EINVAL;

        /* 9 fraction digits keep the arithmetic below exact in 64 bits. */
        p = parse_decimal(s, 9, &whole, &frac, &k, &overflow);
        if (!p)
                return -EINVAL;

        for (i = 0; i < ELEMENTSOF(table); i++)
                if (strcasecmp(p, table[i].suffix) == 0)
                        break;
        if (i >= ELEMENTSOF(table))
                return -EINVAL;
        shift = table[i].shift;

        /* A fraction of a byte makes no sense. */
        if (k > 0 && shift == 0)
                return -EINVAL;

        if (overflow || whole > (UINT64_MAX >> shift))
                return -ERANGE;
        v = whole << shift;

        if (k > 0) {
                /* frac / 10^k × 2^shift = frac × 2^(shift − k) / 5^k, and shift ≥ 10 > k.
                 * The product stays below 5^9 × 2^40 < 2^64, so the division is exact flooring. */
                uint64_t pow5 = 1, f;

                for (size_t j = 0; j < k; j++)
                        pow5 *= 5;
                f = (frac << (shift - k)) / pow5;

                if (v > UINT64_MAX - f)
                        return -ERANGE;
                v += f;
        }

        *ret = v;
        return 0;
}

int parse_cpu_quota(const char *s, uint64_t *ret) {
        uint64_t whole, frac, v;
        size_t k;
        bool overflow;
        const char *p;

        if (!s)
                return -EINVAL;

        /* 1 µs per second is 0.0001%: finer than 4 fraction digits is not representable. */
        p = parse_decimal(s, 4, &whole, &frac, &k, &overflow);
        if (!p)
                return -EINVAL;

        if (!streq(p, "%"))
                return -EINVAL;

        if (overflow || whole > UINT64_MAX / 10000)
                return -ERANGE;
        v = whole * 10000;

        for (size_t j = k; j < 4; j++)
                frac *= 10;
        if (v > UINT64_MAX - frac)
                return -ERANGE;
        v += frac;

        if (v == 0)
                return -ERANGE;

        *ret = v;
        return 0;
}

int parse_seconds(const char *s, uint64_t *ret) {
        static const struct {
                const char *suffix;
                uint64_t factor;
        } table[] = {
                { "",    1     },
                { "s",   1     },
                { "sec", 1     },
                { "m",   60    },
                { "min", 60    },
                { "h",   3600  },
                { "d",   86400 },
        };
        uint64_t v;
        size_t n, i;
        bool overflow;
        const char *p;

        if (!s)
                return -EINVAL;

        p = parse_digits(s, &v, &n, &overflow);
        if (n == 0)
                return -EINVAL;

        for (i = 0; i < ELEMENTSOF(table); i++)
                if (streq(p, table[i].suffix))
                        break;
        if (i >= ELEMENTSOF(table))
                return -EINVAL;

        if (overflow || v > UINT64_MAX / table[i].factor)
                return -ERANGE;

        *ret = v * table[i].factor;
        return 0;
}

char *format_bytes(char *buf, size_t l, uint64_t t) {
        static const char units[] = "KMGTPE";
        unsigned shift = 10;
        size_t i = 0;
        int n;

        if (t < 1024)
                n = snprintf(buf, l, "%" PRIu64 "B", t);
        else {
                uint64_t whole, tenths;

                while (i + 1 < strlen(units) && (t >> (shift + 10)) > 0) {
                        shift += 10;
                        i++;
                }

                whole = t >> shift;
                /* The remainder is below 2^60, so ×10 cannot overflow. */
                tenths = ((t & ((UINT64_C(1) << shift) - 1)) * 10) >> shift;
                n = snprintf(buf, l, "%" PRIu64 ".%" PRIu64 "%c", whole, tenths, units[i]);
        }

        if (n < 0 || (size_t) n >= l)
                return NULL;
        return buf;
}

char *format_cpu_quota(char *buf, size_t l, uint64_t usec_per_sec) {
        uint64_t whole = usec_per_sec / 10000, rem = usec_per_sec % 10000;
        int digits = 4, n;

        if (rem == 0)
                n = snprintf(buf, l, "%" PRIu64 "%%", whole);
        else {
                while (rem % 10 == 0) {
                        rem /= 10;
                        digits--;
                }
                n = snprintf(buf, l, "%" PRIu64 ".%0*" PRIu64 "%%", whole, digits, rem);
        }

        if (n < 0 || (size_t) n >= l)
                return NULL;
        return buf;
}

/* Returns the length (1…4) of the well-formed sequence at s, or 0 when it is ill-formed,
 * and then stores in *ret_subpart how many bytes its maximal subpart spans (≥ 1). */
size_t utf8_sequence_length(const uint8_t *s, size_t n, size_t *ret_subpart) {
        uint8_t lo = 0x80, hi = 0xBF;
        size_t len;

        if (s[0] < 0x80)
                return 1;
        else if (s[0] >= 0xC2 && s[0] <= 0xDF)
                len = 2;
        else if (s[0] == 0xE0) {
                len = 3;
                lo = 0xA0;      /* below is overlong */
        } else if (s[0] >= 0xE1 && s[0] <= 0xEC)
                len = 3;
        else if (s[0] == 0xED) {
                len = 3;
                hi = 0x9F;      /* above are the surrogates U+D800…U+DFFF */
        } else if (s[0] >= 0xEE && s[0] <= 0xEF)
                len = 3;
        else if (s[0] == 0xF0) {
                len = 4;
                lo = 0x90;      /* below is overlong */
        } else if (s[0] >= 0xF1 && s[0] <= 0xF3)
                len = 4;
        else if (s[0] == 0xF4) {
                len = 4;
                hi = 0x8F;      /* above is beyond U+10FFFF */
        } else {
                /* Continuation byte, overlong lead C0/C1, or F5…FF. */
                *ret_subpart = 1;
                return 0;
        }

        for (size_t i = 1; i < len; i++) {
                if (i >= n || s[i] < lo || s[i] > hi) {
                        *ret_subpart = i;
                        return 0;
                }
                lo = 0x80;
                hi = 0xBF;
        }

        return len;
}

bool utf8_is_valid_n(const void *data, size_t size) {
        const uint8_t *s = data;

        for (size_t i = 0; i < size;) {
                size_t subpart, len;

                len = utf8_sequence_length(s + i, size - i, &subpart);
                if (len == 0)
                        return false;
                i += len;
        }

        return true;
}

int utf8_sanitize(const void *data, size_t size, char **ret, size_t *ret_size) {
        const uint8_t *s = data;
        _cleanup_free_ char *buf = NULL;
        size_t j = 0;

        /* Each input byte becomes at most one 3-byte U+FFFD. */
        if (size > (SIZE_MAX - 1) / 3)
                return -ENOMEM;
        buf = malloc(size * 3 + 1);
        if (!buf)
                return -ENOMEM;

        for (size_t i = 0; i < size;) {
                size_t subpart, len;

                len = utf8_sequence_length(s + i, size - i, &subpart);
                if (len > 0) {
                        memcpy(buf + j, s + i, len);
                        j += len;
                        i += len;
                } else {
                        memcpy(buf + j, "\xEF\xBF\xBD", 3);
                        j += 3;
                        i += subpart;
                }
        }
        buf[j] = '\0';

        *ret = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = j;
        return 0;
}

char *utf8_escape_invalid(const char *s) {
        const uint8_t *p = (const uint8_t *) s;
        size_t n = strlen(s), j = 0;
        char *buf;

        if (n > (SIZE_MAX - 1) / 4)
                return NULL;
        buf = malloc(n * 4 + 1); /* at worst each byte becomes "\xNN" */
        if (!buf)
                return NULL;

        for (size_t i = 0; i < n;) {
                size_t subpart, len;

                len = utf8_sequence_length(p + i, n - i, &subpart);
                if (len > 0) {
                        memcpy(buf + j, p + i, len);
                        j += len;
                        i += len;
                } else
                        for (; subpart > 0; subpart--, i++)
                                j += (size_t) sprintf(buf + j, "\\x%02x", p[i]);
        }
        buf[j] = '\0';
        return buf;
}

int hex_encode(const void *data, size_t size, char **ret) {
        static const char digits[] = "0123456789abcdef";
        const uint8_t *p = data;
        char *s;

        s = malloc(size * 2 + 1);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < size; i++) {
                s[2 * i] = digits[p[i] >> 4];
                s[2 * i + 1] = digits[p[i] & 15];
        }
        s[size * 2] = 0;
        *ret = s;
        return 0;
}

static int unhex_char(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -EINVAL;
}

int hex_decode(const char *s, size_t size, void **ret, size_t *ret_size) {
        uint8_t *buf;

        if (size % 2)
                return -EINVAL;
        buf = malloc(size / 2 + 1);
        if (!buf)
                return -ENOMEM;
        for (size_t i = 0; i < size / 2; i++) {
                int a = unhex_char(s[2 * i]), b = unhex_char(s[2 * i + 1]);
                if (a < 0 || b < 0) {
                        free(buf);
                        return -EINVAL;
                }
                buf[i] = (uint8_t) (a << 4 | b);
        }
        *ret = buf;
        *ret_size = size / 2;
        return 0;
}

int signal_from_string(const char *s, int *ret) {
        uint64_t n;

        if (parse_uint64(s, &n) >= 0) {
                if (n < 1 || n > 64)
                        return -ERANGE;
                *ret = (int) n;
                return 0;
        }

        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (int sig = 1; sig < NSIG; sig++) {
                const char *name = sigabbrev_np(sig);

                if (name && strcasecmp(name, s) == 0) {
                        *ret = sig;
                        return 0;
                }
        }
        return -EINVAL;
}
