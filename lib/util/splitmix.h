/* SplitMix64: a small, fast generator whose whole state is one number, so
 * a printed seed reproduces a sequence exactly.  Used wherever crash
 * states are sampled. */
#ifndef FSTITCH_SPLITMIX_H
#define FSTITCH_SPLITMIX_H

#include <stdint.h>

/* The next number of the sequence whose state is *s. */
static inline uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif
