/* Block devices: the bottom layer of libfstitch.
 *
 * One interface, four implementations: an image file or block device, an
 * NBD export (through libnbd), an in-memory device for tests, and a
 * recorder that wraps another device and logs every write and barrier so
 * tests can rebuild the disk as it would be after a crash at any point
 * (design.md §2, §3).
 *
 * Durability rule: a write is durable only once a later barrier has returned
 * 0.  Nothing above this layer may assume otherwise.
 *
 * -ECONNRESET from write() or barrier() means: the device lost its
 * connection and made a new one, and writes that had returned since the
 * last barrier may have been lost with the old one (they may also have
 * reached the disk).  The caller writes them all again and repeats the
 * barrier; nothing may be taken as durable.  Only a network device
 * returns it.
 *
 * All functions return 0 or -errno unless stated.  Output arguments are
 * written only on success.
 */
#ifndef FSTITCH_BDEV_H
#define FSTITCH_BDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bdev;

/* One block to write: contents are block_size bytes. */
struct bdev_write {
	uint64_t blkno;
	const void *data;
};

/* What a device has done, for fstitch-stat. */
struct bdev_stats {
	char kind[16];	       /* "file", "blockdev", "nbd", "memory" */
	uint64_t flushes;      /* cache flushes sent: fdatasync, NBD_CMD_FLUSH */
	uint64_t flush_ns;     /* their total time */
	uint64_t flush_max_ns; /* the longest */
	uint64_t fua_barriers; /* barriers a FUA write made unnecessary */
	uint64_t reconnects;   /* connections made again after a loss */
};

struct bdev_ops {
	/* Read count consecutive blocks starting at blkno into buf. */
	int (*read)(struct bdev *dev, uint64_t blkno, uint32_t count, void *buf);
	/* Write n blocks (any order, distinct block numbers).  Contiguous runs
	 * may be issued as one vectored write.  Not durable until barrier(). */
	int (*write)(struct bdev *dev, const struct bdev_write *w, size_t n);
	/* Make every write that returned before this call durable. */
	int (*barrier)(struct bdev *dev);
	void (*destroy)(struct bdev *dev);
	/* Fill *st (NULL: only the kind "unknown"). */
	void (*stats)(struct bdev *dev, struct bdev_stats *st);
	/* Optional (NULL: nothing to do).  Make the count blocks at blkno,
	 * which read as zeros and hold nothing pending, cheap to write and
	 * flush again and again, without changing what they read: an image
	 * file gets zeros written where the host holds the range as
	 * unwritten (preallocated) extents or a hole.  Else every barrier
	 * after a first write there also makes the host's change of its
	 * extent map durable.  Not durable until barrier(); *wrote is set
	 * to whether anything was written. */
	int (*prepare)(struct bdev *dev, uint64_t blkno, uint64_t count, bool *wrote);
};

struct bdev {
	const struct bdev_ops *ops;
	uint32_t block_size; /* bytes, a power of two >= 512 */
	uint64_t nblocks;    /* device size in blocks */
};

static inline int bdev_read(struct bdev *d, uint64_t blkno, uint32_t count, void *buf)
{
	return d->ops->read(d, blkno, count, buf);
}
static inline int bdev_write(struct bdev *d, const struct bdev_write *w, size_t n)
{
	return d->ops->write(d, w, n);
}
static inline int bdev_barrier(struct bdev *d)
{
	return d->ops->barrier(d);
}
static inline int bdev_prepare(struct bdev *d, uint64_t blkno, uint64_t count, bool *wrote)
{
	*wrote = false;
	return d->ops->prepare ? d->ops->prepare(d, blkno, count, wrote) : 0;
}
/* The device's counters (zeroed, kind "unknown", for a device without). */
void bdev_get_stats(struct bdev *d, struct bdev_stats *st);
/* Close and free the device (does not issue a barrier).  NULL is a no-op. */
void bdev_destroy(struct bdev *d);

/* Change the block size used by read/write.  nblocks is recomputed from the
 * device size in bytes.  Used by the ext2 module after it has read the
 * superblock with the initial 1024-byte block size. */
int bdev_set_block_size(struct bdev *d, uint32_t block_size);

enum bdev_file_flags {
	BDEV_RDONLY = 1 << 0,
	BDEV_DIRECT = 1 << 1,	       /* O_DIRECT */
	BDEV_EXCL = 1 << 2,	       /* take an exclusive lock (flock) on the file;
					* -EBUSY if another process holds it */
	BDEV_UNSAFE_NO_FLUSH = 1 << 3, /* NBD: write to an export that cannot
					* flush (barriers then only wait) */
};

/* Open an image file or a block device.  The size comes from fstat (files)
 * or BLKGETSIZE64 (block devices).  barrier() is fdatasync(). */
int bdev_file_open(const char *path, uint32_t block_size, unsigned flags, struct bdev **out);

/* ---- NBD exports ------------------------------------------------------- */

/* True if spec is an NBD URI (nbd://, nbds://, nbd+unix://, nbds+unix://,
 * nbd+vsock://, nbds+vsock://).  Whether libnbd accepts the rest is for
 * bdev_nbd_open() to say. */
bool bdev_nbd_is_uri(const char *spec);

/* Connect to the export that uri names (any URI libnbd accepts, TLS
 * included).  The size is the export's.  barrier() is NBD_CMD_FLUSH; a
 * write() that is one request goes with FUA and makes the next barrier
 * free.  After a connection loss the device connects again, retrying with
 * backoff for retry_ms, then returns -ECONNRESET (bdev.h, top) or, when it
 * gave up, -EIO; each later call tries to connect once more.
 * Returns 0, or with a one-line explanation in err (no trailing newline):
 *   -EINVAL      libnbd refuses the URI
 *   -EROFS       the export is read-only and flags lacks BDEV_RDONLY
 *   -EOPNOTSUPP  the export cannot flush and flags has neither BDEV_RDONLY
 *                nor BDEV_UNSAFE_NO_FLUSH
 *   -ENOSPC      the export is smaller than one block
 *   other        -errno of the failed connection (-ECONNREFUSED, -ENOENT
 *                for a missing socket, -EPROTO for a refused handshake,
 *                ...; never -EROFS or -EOPNOTSUPP). */
int bdev_nbd_open(const char *uri, uint32_t block_size, unsigned flags, unsigned retry_ms,
		  struct bdev **out, char *err, size_t errlen);

/* An in-memory device of nblocks zeroed blocks.  If image is not NULL, the
 * device starts with a copy of image (image_len bytes, rounded down to whole
 * blocks, nblocks = image_len / block_size; the nblocks argument is then
 * ignored). */
int bdev_mem_create(uint32_t block_size, uint64_t nblocks, const void *image, size_t image_len,
		    struct bdev **out);
/* The memory device's bytes (block_size * nblocks). */
void *bdev_mem_data(struct bdev *mem);

/* Fault injection on a memory device, for tests: the next `count` calls of
 * the given kind fail with -err, after `skip` successful calls. */
enum bdev_fault { BDEV_FAULT_WRITE, BDEV_FAULT_BARRIER, BDEV_FAULT_READ };
void bdev_mem_inject(struct bdev *mem, enum bdev_fault kind, unsigned skip, unsigned count,
		     int err);

/* ---- recorder ---------------------------------------------------------- */

enum rec_kind { REC_WRITE, REC_BARRIER };

struct rec_event {
	enum rec_kind kind;
	uint64_t blkno;	  /* REC_WRITE only */
	const void *data; /* REC_WRITE only: block_size bytes, owned by the log */
};

/* Wrap inner: every call is passed through, and successful writes and
 * barriers are appended to a log.  At creation the recorder copies the whole
 * contents of inner as the initial image (so keep test images small).
 * Destroying the recorder destroys inner too.  Writes that fail are not
 * logged; a barrier that fails is not logged. */
int bdev_recorder_create(struct bdev *inner, struct bdev **out);
size_t bdev_recorder_count(struct bdev *rec);
/* Event i (NULL if i >= count).  The pointer stays valid until the next
 * write, barrier or reset of the recorder. */
const struct rec_event *bdev_recorder_event(struct bdev *rec, size_t i);
/* The device contents when the recorder was created (block_size*nblocks). */
const void *bdev_recorder_initial(struct bdev *rec);
/* Forget the log and take the inner device's current contents as the new
 * initial image. */
int bdev_recorder_reset(struct bdev *rec);

#endif
