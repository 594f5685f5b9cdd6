/* Image files and block devices.
 *
 * Batched writes are sorted by block number and each run of consecutive
 * blocks goes down as one pwritev(), which matters for the cache's rounds
 * (a round is typically a few thousand blocks, many of them adjacent).
 * barrier() is fdatasync(): on a block device that also flushes the drive's
 * volatile cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "bdev_int.h"

#define DIRECT_ALIGN 4096

struct bdev_file {
	struct bdev_base base;
	int fd;
	unsigned flags;
	bool blockdev;
	struct bdev_stats st;
};

static bool unaligned(const void *p)
{
	return ((uintptr_t)p & (DIRECT_ALIGN - 1)) != 0;
}

static int file_read(struct bdev *d, uint64_t blkno, uint32_t count, void *buf)
{
	struct bdev_file *f = (struct bdev_file *)d;
	size_t len = (size_t)count * d->block_size, done = 0;
	off_t off = (off_t)(blkno * d->block_size);
	void *bounce = NULL;
	uint8_t *dst = buf;
	int err = 0;

	if (blkno > d->nblocks || count > d->nblocks - blkno)
		return -EINVAL;
	/* O_DIRECT needs aligned memory; callers need not know that. */
	if ((f->flags & BDEV_DIRECT) && unaligned(buf)) {
		if (posix_memalign(&bounce, DIRECT_ALIGN, len))
			return -ENOMEM;
		dst = bounce;
	}
	while (done < len) {
		ssize_t r = pread(f->fd, dst + done, len - done, off + (off_t)done);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto out;
		}
		if (r == 0) {
			/* The file shrank under us: what is missing reads
			 * as zeros, as a sparse hole would. */
			memset(dst + done, 0, len - done);
			break;
		}
		done += (size_t)r;
	}
	if (bounce)
		memcpy(buf, bounce, len);
out:
	free(bounce);
	return err;
}

/* Write iov[0..n) at off completely, resuming after short writes. */
static int write_all(int fd, struct iovec *iov, int n, off_t off)
{
	while (n > 0) {
		ssize_t r = pwritev(fd, iov, n, off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		off += r;
		while (n > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

static int file_write(struct bdev *d, const struct bdev_write *w, size_t n)
{
	struct bdev_file *f = (struct bdev_file *)d;
	uint32_t bs = d->block_size;
	const struct bdev_write **order = NULL;
	struct iovec *iov = NULL;
	uint8_t *bounce = NULL;
	size_t i, nb = 0, iovmax = IOV_MAX;
	int err = 0;

	if (f->flags & BDEV_RDONLY)
		return -EROFS;
	if (n == 0)
		return 0;
	order = malloc(n * sizeof(*order));
	iov = malloc((n < iovmax ? n : iovmax) * sizeof(*iov));
	if (!order || !iov) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (w[i].blkno >= d->nblocks) {
			err = -EINVAL;
			goto out;
		}
		order[i] = &w[i];
		if ((f->flags & BDEV_DIRECT) && unaligned(w[i].data))
			nb++;
	}
	if (nb) {
		if (posix_memalign((void **)&bounce, DIRECT_ALIGN, nb * bs)) {
			err = -ENOMEM;
			goto out;
		}
	}
	bdev_sort_writes(order, n);
	nb = 0;
	for (i = 0; i < n;) {
		uint64_t start = order[i]->blkno;
		int k = 0;

		while (i < n && (size_t)k < iovmax && order[i]->blkno == start + (uint64_t)k) {
			const void *src = order[i]->data;

			if ((f->flags & BDEV_DIRECT) && unaligned(src)) {
				memcpy(bounce + nb * bs, src, bs);
				src = bounce + nb * bs;
				nb++;
			}
			iov[k].iov_base = (void *)src;
			iov[k].iov_len = bs;
			k++;
			i++;
		}
		err = write_all(f->fd, iov, k, (off_t)(start * bs));
		if (err)
			goto out;
	}
out:
	free(bounce);
	free(iov);
	free(order);
	return err;
}

static int file_barrier(struct bdev *d)
{
	struct bdev_file *f = (struct bdev_file *)d;

	uint64_t t0;

	if (f->flags & BDEV_RDONLY)
		return 0;
	t0 = bdev_now_ns();
	if (fdatasync(f->fd) < 0)
		return -errno;
	bdev_count_flush(&f->st, bdev_now_ns() - t0);
	return 0;
}

/* Zeros over bytes [off, end) of the file. */
static int write_zeros(struct bdev_file *f, const uint8_t *zero, size_t zlen, uint64_t off,
		       uint64_t end)
{
	while (off < end) {
		size_t n = end - off < zlen ? (size_t)(end - off) : zlen;
		struct iovec iov = {(void *)zero, n};
		int err = write_all(f->fd, &iov, 1, (off_t)off);

		if (err)
			return err;
		off += n;
	}
	return 0;
}

#define PREP_ZEROS (1u << 20)

/* Zeros over the holes of the range, as lseek(SEEK_HOLE) finds them: on
 * ext4 and xfs an unwritten extent whose pages are not cached is a hole
 * too.  A file system that cannot say has no holes (the whole file is
 * data), and a block device nothing to prepare. */
static int file_prepare(struct bdev *d, uint64_t blkno, uint64_t count, bool *wrote)
{
	struct bdev_file *f = (struct bdev_file *)d;
	uint64_t pos = blkno * d->block_size, end;
	uint8_t *zero = NULL;
	int err = 0;

	if (f->blockdev || (f->flags & BDEV_RDONLY) || count == 0)
		return 0;
	if (blkno > d->nblocks || count > d->nblocks - blkno)
		return -EINVAL;
	end = pos + count * d->block_size;
	while (pos < end) {
		off_t h = lseek(f->fd, (off_t)pos, SEEK_HOLE), e;

		if (h < 0) {
			err = errno == ENXIO || errno == EINVAL ? 0 : -errno;
			break;
		}
		if ((uint64_t)h >= end)
			break;
		e = lseek(f->fd, h, SEEK_DATA);
		if (e < 0 && errno != ENXIO) {
			err = -errno;
			break;
		}
		if (e < 0 || (uint64_t)e > end)
			e = (off_t)end; /* a hole to the end of the file */
		/* whole blocks only (a file system's holes are in its own
		 * blocks, which may be smaller than ours) */
		h = (off_t)(((uint64_t)h + d->block_size - 1) / d->block_size * d->block_size);
		e = (off_t)((uint64_t)e / d->block_size * d->block_size);
		if (e > h) {
			if (!zero) {
				if (posix_memalign((void **)&zero, DIRECT_ALIGN, PREP_ZEROS)) {
					err = -ENOMEM;
					break;
				}
				memset(zero, 0, PREP_ZEROS);
			}
			err = write_zeros(f, zero, PREP_ZEROS, (uint64_t)h, (uint64_t)e);
			if (err)
				break;
			*wrote = true;
		}
		if ((uint64_t)e <= pos)
			break; /* (cannot happen: no progress) */
		pos = (uint64_t)e;
	}
	free(zero);
	return err;
}

static void file_stats(struct bdev *d, struct bdev_stats *st)
{
	struct bdev_file *f = (struct bdev_file *)d;

	bdev_load_stats(st, &f->st);
	strcpy(st->kind, f->blockdev ? "blockdev" : "file");
}

static void file_destroy(struct bdev *d)
{
	struct bdev_file *f = (struct bdev_file *)d;

	close(f->fd);
	free(f);
}

static const struct bdev_ops file_ops = {
    .read = file_read,
    .write = file_write,
    .barrier = file_barrier,
    .destroy = file_destroy,
    .stats = file_stats,
    .prepare = file_prepare,
};

int bdev_file_open(const char *path, uint32_t block_size, unsigned flags, struct bdev **out)
{
	struct bdev_file *f = NULL;
	struct stat st;
	uint64_t bytes;
	int fd = -1, oflags, err;

	err = bdev_check_block_size(block_size);
	if (err)
		return err;
	oflags = (flags & BDEV_RDONLY) ? O_RDONLY : O_RDWR;
	oflags |= O_CLOEXEC;
	if (flags & BDEV_DIRECT)
		oflags |= O_DIRECT;
	fd = open(path, oflags);
	if (fd < 0)
		return -errno;
	if ((flags & BDEV_EXCL) && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		err = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto fail;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto fail;
	}
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0) {
			err = -errno;
			goto fail;
		}
	} else if (S_ISREG(st.st_mode)) {
		bytes = (uint64_t)st.st_size;
	} else {
		err = -ENODEV;
		goto fail;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		err = -ENOMEM;
		goto fail;
	}
	f->fd = fd;
	f->flags = flags;
	f->blockdev = S_ISBLK(st.st_mode);
	f->base.dev.ops = &file_ops;
	f->base.dev.block_size = block_size;
	f->base.dev.nblocks = bytes / block_size;
	f->base.bytes = bytes;
	*out = &f->base.dev;
	return 0;
fail:
	close(fd);
	return err;
}
