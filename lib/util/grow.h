/* Growing an array by doubling: the one helper for the "if full, realloc
 * twice as big" pattern that many files need. */
#ifndef FSTITCH_GROW_H
#define FSTITCH_GROW_H

#include <stddef.h>

/* Make the array *v of elements of size elem, with room for *cap of them,
 * hold at least need.  It grows by doubling from first (or from *cap) and
 * never shrinks.  0, or -ENOMEM with *v and *cap unchanged (the old array
 * stays valid), or -EOVERFLOW if the size does not fit in a size_t. */
int grow(void **v, size_t *cap, size_t need, size_t elem, size_t first);

/* grow() for a typed pointer: GROW(&p, &cap, need, first).  The pointer
 * goes through a void * of its own, never through a cast of its address. */
#define GROW(pp, capp, need, first)                                                                \
	({                                                                                         \
		void *grow_v_ = *(pp);                                                             \
		int grow_r_ = grow(&grow_v_, (capp), (need), sizeof(**(pp)), (first));             \
		*(pp) = grow_v_;                                                                   \
		grow_r_;                                                                           \
	})

#endif
