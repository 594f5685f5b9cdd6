/* In-memory block device for tests, with fault injection.
 *
 * Writes land in memory at once, so a barrier has nothing to do; it still
 * exists as a call that can be made to fail, which is what the engine's
 * error paths need to be tested against.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "bdev_int.h"

struct fault {
	unsigned skip, count;
	int err;
};

struct bdev_mem {
	struct bdev_base base;
	uint8_t *data;
	pthread_mutex_t lock; /* guards faults only: reads and writes of
			       * distinct blocks may run concurrently */
	struct fault faults[3];
};

/* 0 if this call may go ahead, or the injected error. */
static int take_fault(struct bdev_mem *m, enum bdev_fault kind)
{
	struct fault *f = &m->faults[kind];
	int err = 0;

	pthread_mutex_lock(&m->lock);
	if (f->count) {
		if (f->skip) {
			f->skip--;
		} else {
			f->count--;
			err = f->err;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return err;
}

static int mem_read(struct bdev *d, uint64_t blkno, uint32_t count, void *buf)
{
	struct bdev_mem *m = (struct bdev_mem *)d;
	int err;

	if (blkno > d->nblocks || count > d->nblocks - blkno)
		return -EINVAL;
	err = take_fault(m, BDEV_FAULT_READ);
	if (err)
		return err;
	memcpy(buf, m->data + blkno * d->block_size, (size_t)count * d->block_size);
	return 0;
}

static int mem_write(struct bdev *d, const struct bdev_write *w, size_t n)
{
	struct bdev_mem *m = (struct bdev_mem *)d;
	size_t i;
	int err;

	for (i = 0; i < n; i++)
		if (w[i].blkno >= d->nblocks)
			return -EINVAL;
	/* An injected failure writes nothing, so tests know exactly what the
	 * device holds afterwards. */
	err = take_fault(m, BDEV_FAULT_WRITE);
	if (err)
		return err;
	for (i = 0; i < n; i++)
		memcpy(m->data + w[i].blkno * d->block_size, w[i].data, d->block_size);
	return 0;
}

static int mem_barrier(struct bdev *d)
{
	return take_fault((struct bdev_mem *)d, BDEV_FAULT_BARRIER);
}

static void mem_stats(struct bdev *d, struct bdev_stats *st)
{
	strcpy(st->kind, "memory");
}

static void mem_destroy(struct bdev *d)
{
	struct bdev_mem *m = (struct bdev_mem *)d;

	pthread_mutex_destroy(&m->lock);
	free(m->data);
	free(m);
}

static const struct bdev_ops mem_ops = {
    .read = mem_read,
    .write = mem_write,
    .barrier = mem_barrier,
    .destroy = mem_destroy,
    .stats = mem_stats,
};

int bdev_mem_create(uint32_t block_size, uint64_t nblocks, const void *image, size_t image_len,
		    struct bdev **out)
{
	struct bdev_mem *m;
	uint64_t bytes;
	int err;

	err = bdev_check_block_size(block_size);
	if (err)
		return err;
	if (image)
		nblocks = image_len / block_size;
	if (nblocks == 0 || nblocks > SIZE_MAX / block_size)
		return -EINVAL;
	bytes = nblocks * block_size;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->data = image ? malloc(bytes) : calloc(1, bytes);
	if (!m->data) {
		free(m);
		return -ENOMEM;
	}
	if (image)
		memcpy(m->data, image, bytes);
	pthread_mutex_init(&m->lock, NULL);
	m->base.dev.ops = &mem_ops;
	m->base.dev.block_size = block_size;
	m->base.dev.nblocks = nblocks;
	m->base.bytes = bytes;
	*out = &m->base.dev;
	return 0;
}

void *bdev_mem_data(struct bdev *mem)
{
	return ((struct bdev_mem *)mem)->data;
}

void bdev_mem_inject(struct bdev *mem, enum bdev_fault kind, unsigned skip, unsigned count, int err)
{
	struct bdev_mem *m = (struct bdev_mem *)mem;

	if ((unsigned)kind > BDEV_FAULT_READ)
		return;
	pthread_mutex_lock(&m->lock);
	m->faults[kind].skip = skip;
	m->faults[kind].count = count;
	m->faults[kind].err = err > 0 ? -err : err;
	pthread_mutex_unlock(&m->lock);
}
