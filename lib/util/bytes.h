/* Unaligned loads and stores of on-disk integers: ext2 structures are
 * little-endian, the JBD2 journal is big-endian. */
#ifndef FSTITCH_UTIL_BYTES_H
#define FSTITCH_UTIL_BYTES_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

/* ld_ORDERBITS(p) loads, and st_ORDERBITS(p, v) stores, a BITS-bit integer
 * in byte order ORDER (le or be) at p, which need not be aligned.  Each
 * pair differs from the others only in its type and the <endian.h>
 * conversion, so one pattern makes all eight: ld_le16, st_le16, ld_le32,
 * st_le32, ld_be16, st_be16, ld_be32, st_be32. */
#define BYTES_ACCESSORS(order, bits)                                                               \
	static inline uint##bits##_t ld_##order##bits(const uint8_t *p)                            \
	{                                                                                          \
		uint##bits##_t v;                                                                  \
                                                                                                   \
		memcpy(&v, p, sizeof(v));                                                          \
		return order##bits##toh(v);                                                        \
	}                                                                                          \
	static inline void st_##order##bits(uint8_t *p, uint##bits##_t v)                          \
	{                                                                                          \
		v = hto##order##bits(v);                                                           \
		memcpy(p, &v, sizeof(v));                                                          \
	}

BYTES_ACCESSORS(le, 16)
BYTES_ACCESSORS(le, 32)
BYTES_ACCESSORS(be, 16)
BYTES_ACCESSORS(be, 32)

#undef BYTES_ACCESSORS

#endif
