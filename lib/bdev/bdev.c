/* Block device code shared by all implementations. */
#include <errno.h>
#include "bdev_int.h"

int bdev_check_block_size(uint32_t block_size)
{
	if (block_size < 512 || block_size > (1u << 20) ||
	    (block_size & (block_size - 1)))
		return -EINVAL;
	return 0;
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
