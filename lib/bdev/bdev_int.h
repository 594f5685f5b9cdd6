/* Internals shared by the block device implementations (not installed). */
#ifndef FSTITCH_BDEV_INT_H
#define FSTITCH_BDEV_INT_H

#include <stddef.h>
#include <stdint.h>
#include "bdev.h"

/* Every implementation starts with this, so bdev_set_block_size() can
 * recompute nblocks from the size in bytes without rounding errors. */
struct bdev_base {
	struct bdev dev;
	uint64_t bytes; /* device size in bytes */
	/* Called after block_size and nblocks changed (NULL: nothing to do);
	 * may refuse with -errno, in which case the old size is restored. */
	int (*resize)(struct bdev *dev, uint32_t old_block_size);
};

static inline struct bdev_base *bdev_base(struct bdev *d)
{
	return (struct bdev_base *)d;
}

/* True if block_size is a power of two >= 512 (and at most 1 MiB). */
int bdev_check_block_size(uint32_t block_size);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bdev_now_ns(void);
/* Count one flush that took ns nanoseconds (atomically: see bdev.c). */
void bdev_count_flush(struct bdev_stats *st, uint64_t ns);
/* Sort order[0..n) by block number, for devices that write runs of
 * consecutive blocks together. */
void bdev_sort_writes(const struct bdev_write **order, size_t n);
/* Copy the counters of src (not the kind), each read atomically. */
void bdev_load_stats(struct bdev_stats *dst, const struct bdev_stats *src);

#endif
