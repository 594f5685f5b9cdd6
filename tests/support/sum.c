/* A fast 64-bit sum of bytes (sum.h). */
#include <string.h>

#include "sum.h"

uint64_t e2t_sum_more(uint64_t h, const void *data, size_t len)
{
	const uint8_t *b = data;
	size_t i, nw = len / 8;

	/* Word at a time: images are megabytes and summed per crash state. */
	for (i = 0; i < nw; i++) {
		uint64_t v;

		memcpy(&v, b + i * 8, 8);
		h = (h ^ v) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (i = nw * 8; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}
