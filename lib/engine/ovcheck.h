/* Self-checks of the overlap index (cache_int.h), for white-box tests:
 * what a change would be ordered after, found through a block's index and
 * through its whole list, against an answer worked out from the list alone;
 * and the index itself against the list.  Nothing here changes the cache. */
#ifndef FSTITCH_ENGINE_OVCHECK_H
#define FSTITCH_ENGINE_OVCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/cache.h"

/* What the checks saw, summed over calls. */
struct ovcheck_seen {
	size_t compared;       /* changes compared */
	size_t indexed;	       /* of them, answered through an index */
	size_t nonempty;       /* of them, with at least one before */
	size_t longest;	       /* most patches seen on one block */
	size_t covered;	       /* patches the index left out as covered */
	size_t blocks_indexed; /* block indexes checked */
};

/* Compare the befores and merge candidate of a change to b about to be made
 * (a bit flip of mask at word off if bit, else bytes [off, +len); ordered
 * after what overlaps [soff, +slen)) by index, by list and by brute force.
 * 0 if all agree; -1 with what differs in err. */
int ovcheck_change(struct cache *c, struct cblock *b, bool bit, uint32_t off, uint32_t len,
		   uint32_t mask, uint32_t soff, uint32_t slen, struct ovcheck_seen *seen,
		   char *err, size_t errlen);

/* Check block blkno's index, if it has one, against its list: under each
 * 64th the soft patches touching it in list order, less those marked
 * covered, each of which must be.  0, or -1 with the finding in err. */
int ovcheck_index(struct cache *c, uint64_t blkno, struct ovcheck_seen *seen, char *err,
		  size_t errlen);

/* Index blocks from n uncommitted patches on (the default is larger). */
void ovcheck_set_min(struct cache *c, uint32_t n);

/* Whether p is neither committed, pinned nor held: a plain patch a test may
 * make another change depend on and still expect to be written. */
bool ovcheck_patch_free(const struct patch *p);

#endif
