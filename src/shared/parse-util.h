/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Parsers and formatters for what users type and read: sizes, CPU quotas, durations.
 * Pure functions, no I/O. Parsers return 0, -EINVAL (not of the expected form, including
 * negative numbers) or -ERANGE (well-formed but not representable, or out of range);
 * *ret is left untouched on failure. Input is taken exactly: no surrounding whitespace. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef USEC_PER_SEC
#define USEC_PER_SEC UINT64_C(1000000)
#endif

/* Decimal digits only: "0" … "18446744073709551615". */
int parse_uint64(const char *s, uint64_t *ret);

/* Bytes: a number with an optional suffix K, M, G or T (base 1024), optionally followed
 * by "B" or "iB" ("256M", "256MB", "256MiB"; case does not matter, as with docker's
 * "256m"); "B" or no suffix means bytes. With a K…T suffix a fraction of up to 9 digits
 * is allowed ("1.5G"); the result is rounded down to a whole byte. */
int parse_size(const char *s, uint64_t *ret);

/* CPU quota as a percentage of one CPU, "50%" → 500000 µs per second. Above 100% means
 * more than one CPU ("200%"); up to 4 fractional digits ("12.5%"). 0% is -ERANGE. */
int parse_cpu_quota(const char *s, uint64_t *ret);

/* Seconds: a non-negative integer with an optional unit: "s"/"sec", "m"/"min", "h", "d". */
int parse_seconds(const char *s, uint64_t *ret);

/* "512B", "1.0K", "256.0M", "1.5G": the largest unit that fits, one decimal, rounded down.
 * Returns buf, or NULL if l is too small (FORMAT_BYTES_MAX always suffices). */
#define FORMAT_BYTES_MAX 16
char *format_bytes(char *buf, size_t l, uint64_t t);

/* 500000 → "50%", 125000 → "12.5%". Returns buf, or NULL if l is too small. */
#define FORMAT_CPU_QUOTA_MAX 32
char *format_cpu_quota(char *buf, size_t l, uint64_t usec_per_sec);

/* The length (1…4) of the well-formed UTF-8 sequence at s (n bytes available), or 0 when
 * it is ill-formed, with then in *ret_subpart the bytes its maximal subpart spans (≥ 1). */
size_t utf8_sequence_length(const uint8_t *s, size_t n, size_t *ret_subpart);

/* s with each byte of its ill-formed UTF-8 written as "\xNN"; well-formed sequences and
 * backslashes are kept as they are. NULL when out of memory. Names from a sandbox (file
 * names, symlink targets) are bytes, and D-Bus strings must be UTF-8. */
char *utf8_escape_invalid(const char *s);

/* Whether data holds well-formed UTF-8 (Unicode 15, table 3-7): no overlong forms, no
 * surrogates, nothing above U+10FFFF, no truncated sequence. NUL bytes are valid. */
bool utf8_is_valid_n(const void *data, size_t size);

/* Copies data into a new NUL-terminated buffer, replacing each maximal ill-formed
 * subsequence with U+FFFD (the W3C/Unicode "maximal subpart" practice). Embedded NULs are
 * kept, so use *ret_size, not strlen(). Returns 0 or -ENOMEM. */
int utf8_sanitize(const void *data, size_t size, char **ret, size_t *ret_size);

/* Lowercase hex of data (a new string); and back (a new buffer; upper or lower case digits;
 * -EINVAL for an odd length or a non-digit). */
int hex_encode(const void *data, size_t size, char **ret);
int hex_decode(const char *s, size_t size, void **ret, size_t *ret_size);

/* A signal: its number (1 to 64) or its name, with or without "SIG", any case ("term",
 * "SIGKILL", "9"). */
int signal_from_string(const char *s, int *ret);
