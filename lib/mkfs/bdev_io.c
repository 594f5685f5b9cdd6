/* libext2fs I/O on an NBD export (see mkfs_int.h): each channel is a
 * bdev_nbd connection, its block size the channel's.  Counts follow
 * libext2fs: count > 0 is blocks, count < 0 bytes from the block's start;
 * a byte count that ends inside a block is read around (and, for a write,
 * merged into what the export holds). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bdev/bdev.h"
#include "mkfs_int.h"

static struct struct_io_manager nbd_manager;

static struct bdev *dev_of(io_channel ch)
{
	return ch->private_data;
}

/* -errno from a device to what libext2fs takes (an errno); a lost
 * connection is an I/O error here: mkfs has no round to write again. */
static errcode_t io_err(int r)
{
	return r == -ECONNRESET ? EIO : (errcode_t)-r;
}

static errcode_t nbd_open(const char *name, int flags, io_channel *channel)
{
	io_channel ch = calloc(1, sizeof(*ch));
	struct bdev *dev = NULL;
	int r;

	if (!ch)
		return EXT2_ET_NO_MEMORY;
	r = bdev_nbd_open(name, 1024, (flags & IO_FLAG_RW) ? 0 : BDEV_RDONLY, 0, &dev, NULL, 0);
	if (r < 0) {
		free(ch);
		return (errcode_t)-r;
	}
	ch->name = strdup(name);
	if (!ch->name) {
		bdev_destroy(dev);
		free(ch);
		return EXT2_ET_NO_MEMORY;
	}
	ch->magic = EXT2_ET_MAGIC_IO_CHANNEL;
	ch->manager = &nbd_manager;
	ch->block_size = 1024;
	ch->refcount = 1;
	ch->private_data = dev;
	*channel = ch;
	return 0;
}

static errcode_t nbd_close(io_channel ch)
{
	if (--ch->refcount > 0)
		return 0;
	bdev_destroy(dev_of(ch));
	free(ch->name);
	free(ch);
	return 0;
}

static errcode_t nbd_set_blksize(io_channel ch, int blksize)
{
	int r = bdev_set_block_size(dev_of(ch), (uint32_t)blksize);

	if (r < 0)
		return io_err(r);
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
	uint32_t nblk;
	size_t len = span(ch, count, &nblk);
	void *buf = data;
	int r;

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

static errcode_t nbd_write64(io_channel ch, unsigned long long block, int count,
			     const void *data)
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
	int r = bdev_barrier(dev_of(ch));

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
