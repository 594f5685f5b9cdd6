/* Numbers and sizes on command lines, parsed in one place for every
 * command: counts, ids and descriptors ("12"), and sizes ("4096", "16K",
 * "2m", "1G", "3T").
 *
 * Digits only: no sign, no spaces, no hex or octal, no fraction.  Size
 * suffixes are powers of 1024, upper or lower case, and multiply the
 * number; a plain number is multiplied by the caller's unit instead
 * (mke2fs counts a plain fs-size in blocks, a cache size is in bytes).
 */
#ifndef FSTITCH_SIZE_H
#define FSTITCH_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* Parse s as a decimal number with an optional suffix K, M, G or T (case
 * ignored) and nothing else: no sign, no spaces, no fraction.  A number
 * without a suffix is multiplied by unit (which must be > 0).  On success
 * writes the size in bytes to *bytes and returns 0; returns -EINVAL for
 * anything that is not such a number (including the empty string and a
 * NULL s) and -ERANGE when the result does not fit in 64 bits.  *bytes is
 * untouched on failure. */
int size_parse(const char *s, uint64_t unit, uint64_t *bytes);

/* size_parse() with flags: SIZE_PARSE_B also accepts "B" or "iB" after a
 * suffix ("256MiB", "2GB"), as mount options are often written. */
#define SIZE_PARSE_B (1U << 0)
int size_parse_flags(const char *s, uint64_t unit, unsigned flags, uint64_t *bytes);

/* Parse s as a plain decimal number from min to max (digits only, as for
 * sizes).  On success writes it to *out and returns 0; returns -EINVAL for
 * anything that is not such a number (NULL and "" included) and -ERANGE
 * for one below min or above max (or beyond 64 bits).  *out is untouched
 * on failure. */
int num_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Format bytes for people: "512 B", "8.0 KiB", "1.5 GiB" (one decimal
 * from KiB up).  Writes at most len bytes including the NUL and returns buf,
 * truncated if len is too small; len 0 leaves buf untouched. */
char *size_format(uint64_t bytes, char *buf, size_t len);

#endif
