/* Block device code shared by all implementations. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bdev_int.h"

int bdev_check_block_size(uint32_t block_size)
{
	if (block_size < 512 || block_size > (1u << 20) || (block_size & (block_size - 1)))
		return -EINVAL;
	return 0;
}

uint64_t bdev_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The counters are read without the device's lock (a snapshot must not
 * wait behind a flush): atomic words, one writer at a time. */
void bdev_count_flush(struct bdev_stats *st, uint64_t ns)
{
	__atomic_fetch_add(&st->flushes, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&st->flush_ns, ns, __ATOMIC_RELAXED);
	if (ns > __atomic_load_n(&st->flush_max_ns, __ATOMIC_RELAXED))
		__atomic_store_n(&st->flush_max_ns, ns, __ATOMIC_RELAXED);
}

static int cmp_write(const void *a, const void *b)
{
	const struct bdev_write *x = *(const struct bdev_write *const *)a;
	const struct bdev_write *y = *(const struct bdev_write *const *)b;

	return x->blkno < y->blkno ? -1 : x->blkno > y->blkno;
}

void bdev_sort_writes(const struct bdev_write **order, size_t n)
{
	qsort(order, n, sizeof(*order), cmp_write);
}

void bdev_load_stats(struct bdev_stats *dst, const struct bdev_stats *src)
{
	dst->flushes = __atomic_load_n(&src->flushes, __ATOMIC_RELAXED);
	dst->flush_ns = __atomic_load_n(&src->flush_ns, __ATOMIC_RELAXED);
	dst->flush_max_ns = __atomic_load_n(&src->flush_max_ns, __ATOMIC_RELAXED);
	dst->fua_barriers = __atomic_load_n(&src->fua_barriers, __ATOMIC_RELAXED);
	dst->reconnects = __atomic_load_n(&src->reconnects, __ATOMIC_RELAXED);
}

void bdev_get_stats(struct bdev *d, struct bdev_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (d->ops->stats)
		d->ops->stats(d, st);
	else
		strcpy(st->kind, "unknown");
}

void bdev_destroy(struct bdev *d)
{
	if (d)
		d->ops->destroy(d);
}

int bdev_set_block_size(struct bdev *d, uint32_t block_size)
{
	struct bdev_base *base = bdev_base(d);
	uint32_t old_bs = d->block_size;
	uint64_t old_n = d->nblocks;
	int err;

	err = bdev_check_block_size(block_size);
	if (err)
		return err;
	d->block_size = block_size;
	d->nblocks = base->bytes / block_size;
	if (base->resize) {
		err = base->resize(d, old_bs);
		if (err) {
			d->block_size = old_bs;
			d->nblocks = old_n;
			return err;
		}
	}
	return 0;
}
