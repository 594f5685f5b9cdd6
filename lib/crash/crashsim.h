/* Crash-state enumeration over a recorder log (design.md §3, crash model).
 *
 * A crash leaves every completed round on disk (a round is the writes
 * between two barriers), plus any subset of the writes of the round in
 * flight.  crash_enumerate() builds those disk images and hands each to a
 * callback: for every round r (0-based, including a final round with no
 * closing barrier, if any), the image with rounds < r complete plus a subset
 * of round r's writes.  Rounds with at most max_exhaustive writes get all
 * 2^n subsets; larger ones get `samples` random subsets plus the empty and
 * the full one.  After the last round the complete image is visited once.
 */
#ifndef FSTITCH_CRASHSIM_H
#define FSTITCH_CRASHSIM_H

#include <stddef.h>
#include <stdint.h>
#include "bdev/bdev.h"

struct crash_opts {
	unsigned max_exhaustive; /* 0 means 10 */
	unsigned samples;	 /* 0 means 64 */
	uint64_t seed;		 /* for the random subsets */
};

struct crash_state {
	size_t round;	     /* index of the round in flight */
	size_t nround;	     /* number of writes in that round */
	size_t napplied;     /* how many of them this state contains */
	const uint8_t *mask; /* nround bytes: 1 if that write is applied */
	const void *image;   /* block_size * nblocks bytes */
	size_t image_len;
	uint32_t block_size;
};

/* Calls cb for every state; stops early and returns cb's value if cb
 * returns non-zero.  Returns 0 when all states were visited, or -errno.
 * *nstates (if not NULL) receives the number of states visited. */
int crash_enumerate(struct bdev *rec, const struct crash_opts *opts,
		    int (*cb)(const struct crash_state *st, void *arg), void *arg, size_t *nstates);

#endif
