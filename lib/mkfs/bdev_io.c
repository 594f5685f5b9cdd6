/* libext2fs I/O on an NBD export (see mkfs_int.h): each channel is a
 * bdev_nbd connection, its block size the channel's.  Counts follow
 * libext2fs: count > 0 is blocks, count < 0 bytes from the block's start;
 * a byte count that ends inside a block is read around (and, for a write,
 * merged into what the export holds).
 *
 * Whole-block writes are held back in a small direct-mapped cache and sent
 * together, sorted, at a flush, when a block needs a slot another holds,
 * or before any other kind of request.  libext2fs makes a journal one
 * block at a time, rewriting the indirect block after each and reading it
 * back before the next: uncached, that was several round trips per
 * journal block. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bdev/bdev.h"
#include "mkfs_int.h"

/* Blocks held back at most (a power of 2). */
#define WB_SLOTS 1024u

struct wb_slot {
	uint64_t blk;
	bool used;
};

struct nbd_ch {
	struct bdev *dev;
	struct wb_slot slot[WB_SLOTS];
	uint8_t *data; /* WB_SLOTS blocks of the channel's size, or NULL */
	size_t nused;
};

static struct struct_io_manager nbd_manager;

static struct nbd_ch *ch_of(io_channel ch)
{
	return ch->private_data;
}

static struct bdev *dev_of(io_channel ch)
{
	return ch_of(ch)->dev;
}

/* -errno from a device to what libext2fs takes (an errno); a lost
 * connection is an I/O error here: mkfs has no round to write again. */
static errcode_t io_err(int r)
{
	return r == -ECONNRESET ? EIO : (errcode_t)-r;
}

static int wb_cmp(const void *a, const void *b)
{
	const struct bdev_write *x = a, *y = b;

	return x->blkno < y->blkno ? -1 : x->blkno > y->blkno;
}

/* Send every held-back block, in block order, in one request, and empty
 * the cache (also when the write failed: its error is the caller's). */
static int wb_drain(io_channel ch)
{
	struct nbd_ch *c = ch_of(ch);
	struct bdev_write *w;
	size_t i, n = 0;
	int r;

	if (c->nused == 0)
		return 0;
	w = calloc(c->nused, sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (i = 0; i < WB_SLOTS; i++) {
		if (!c->slot[i].used)
			continue;
		w[n].blkno = c->slot[i].blk;
		w[n].data = c->data + i * (size_t)ch->block_size;
		n++;
	}
	qsort(w, n, sizeof(*w), wb_cmp);
	r = bdev_write(c->dev, w, n);
	free(w);
	memset(c->slot, 0, sizeof(c->slot));
	c->nused = 0;
	return r;
}

/* The cached copy of blk, or NULL. */
static const uint8_t *wb_find(io_channel ch, uint64_t blk)
{
	struct nbd_ch *c = ch_of(ch);
	size_t i = (size_t)(blk & (WB_SLOTS - 1));

	if (c->slot[i].used && c->slot[i].blk == blk)
		return c->data + i * (size_t)ch->block_size;
	return NULL;
}

/* Hold back count whole blocks from blk. */
static int wb_put(io_channel ch, uint64_t blk, uint32_t count, const uint8_t *data)
{
	struct nbd_ch *c = ch_of(ch);
	size_t bs = (size_t)ch->block_size, i;
	uint32_t k;
	int r;

	if (!c->data) {
		c->data = malloc(WB_SLOTS * bs);
		if (!c->data)
			return -ENOMEM;
	}
	for (k = 0; k < count; k++) {
		i = (size_t)((blk + k) & (WB_SLOTS - 1));
		if (c->slot[i].used && c->slot[i].blk != blk + k) {
			r = wb_drain(ch);
			if (r < 0)
				return r;
		}
		if (!c->slot[i].used) {
			c->slot[i].used = true;
			c->slot[i].blk = blk + k;
			c->nused++;
		}
		memcpy(c->data + i * bs, data + (size_t)k * bs, bs);
	}
	return 0;
}

static errcode_t nbd_open(const char *name, int flags, io_channel *channel)
{
	struct nbd_ch *c = calloc(1, sizeof(*c));
	errcode_t err;
	int r;

	if (!c)
		return EXT2_ET_NO_MEMORY;
	r = bdev_nbd_open(name, 1024, (flags & IO_FLAG_RW) ? 0 : BDEV_RDONLY, 0, &c->dev, NULL, 0);
	if (r < 0) {
		free(c);
		return (errcode_t)-r;
	}
	err = mkfs_channel_new(&nbd_manager, name, c, channel);
	if (err) {
		bdev_destroy(c->dev);
		free(c);
	}
	return err;
}

static errcode_t nbd_close(io_channel ch)
{
	struct nbd_ch *c = ch_of(ch);
	int r;

	if (--ch->refcount > 0)
		return 0;
	r = wb_drain(ch);
	bdev_destroy(c->dev);
	free(c->data);
	free(c);
	mkfs_channel_free(ch);
	return r < 0 ? io_err(r) : 0;
}

static errcode_t nbd_set_blksize(io_channel ch, int blksize)
{
	int r = wb_drain(ch);

	if (r == 0)
		r = bdev_set_block_size(dev_of(ch), (uint32_t)blksize);
	if (r < 0)
		return io_err(r);
	/* the cache's blocks are of the old size */
	free(ch_of(ch)->data);
	ch_of(ch)->data = NULL;
	ch->block_size = blksize;
	return 0;
}

/* The whole blocks that hold the request: *nblk of them. */
static size_t span(io_channel ch, int count, uint32_t *nblk)
{
	size_t bs = (size_t)ch->block_size;
	size_t len = count < 0 ? (size_t)-count : (size_t)count * bs;

	*nblk = (uint32_t)((len + bs - 1) / bs);
	return len;
}

static errcode_t nbd_read64(io_channel ch, unsigned long long block, int count, void *data)
{
	uint32_t nblk, k, hits = 0;
	size_t len = span(ch, count, &nblk);
	size_t bs = (size_t)ch->block_size;
	void *buf = data;
	const uint8_t *hit;
	int r;

	for (k = 0; k < nblk; k++)
		hits += wb_find(ch, block + k) != NULL;
	if (hits && hits == nblk && len % bs == 0) {
		for (k = 0; k < nblk; k++) {
			hit = wb_find(ch, block + k);
			memcpy((uint8_t *)data + (size_t)k * bs, hit, bs);
		}
		return 0;
	}
	if (hits) {
		r = wb_drain(ch);
		if (r < 0)
			return io_err(r);
	}
	if (len % (size_t)ch->block_size) {
		buf = malloc((size_t)nblk * (size_t)ch->block_size);
		if (!buf)
			return EXT2_ET_NO_MEMORY;
	}
	r = nblk ? bdev_read(dev_of(ch), block, nblk, buf) : 0;
	if (buf != data) {
		if (r == 0)
			memcpy(data, buf, len);
		free(buf);
	}
	return r < 0 ? io_err(r) : 0;
}

static errcode_t nbd_write64(io_channel ch, unsigned long long block, int count, const void *data)
{
	struct bdev *dev = dev_of(ch);
	size_t bs = (size_t)ch->block_size, i;
	uint32_t nblk;
	size_t len = span(ch, count, &nblk);
	struct bdev_write *w;
	uint8_t *tail = NULL;
	int r = 0;

	if (nblk == 0)
		return 0;
	if (len % bs == 0) {
		r = wb_put(ch, block, nblk, data);
		return r < 0 ? io_err(r) : 0;
	}
	/* part of a block: what is held back goes first */
	r = wb_drain(ch);
	if (r < 0)
		return io_err(r);
	w = calloc(nblk, sizeof(*w));
	if (!w)
		return EXT2_ET_NO_MEMORY;
	for (i = 0; i < nblk; i++) {
		w[i].blkno = block + i;
		w[i].data = (const uint8_t *)data + i * bs;
	}
	if (len % bs) {
		/* the last block is partly ours: merge into what is there */
		tail = malloc(bs);
		if (!tail) {
			r = -ENOMEM;
			goto out;
		}
		r = bdev_read(dev, block + nblk - 1, 1, tail);
		if (r < 0)
			goto out;
		memcpy(tail, (const uint8_t *)data + (nblk - 1) * bs, len % bs);
		w[nblk - 1].data = tail;
	}
	r = bdev_write(dev, w, nblk);
out:
	free(tail);
	free(w);
	return r < 0 ? io_err(r) : 0;
}

static errcode_t nbd_read32(io_channel ch, unsigned long block, int count, void *data)
{
	return nbd_read64(ch, block, count, data);
}

static errcode_t nbd_write32(io_channel ch, unsigned long block, int count, const void *data)
{
	return nbd_write64(ch, block, count, data);
}

static errcode_t nbd_flush(io_channel ch)
{
	int r = wb_drain(ch);

	if (r == 0)
		r = bdev_barrier(dev_of(ch));

	return r < 0 ? io_err(r) : 0;
}

static struct struct_io_manager nbd_manager = {
    .magic = EXT2_ET_MAGIC_IO_MANAGER,
    .name = "fstitch NBD I/O",
    .open = nbd_open,
    .close = nbd_close,
    .set_blksize = nbd_set_blksize,
    .read_blk = nbd_read32,
    .write_blk = nbd_write32,
    .flush = nbd_flush,
    .read_blk64 = nbd_read64,
    .write_blk64 = nbd_write64,
};

io_manager mkfs_nbd_io_manager = &nbd_manager;
