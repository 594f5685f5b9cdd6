/* Exclusive use of the storage under a file system: one file system is
 * served by one driver at a time, or the two overwrite each other's
 * blocks.  fstitch-mount's own image lock (BDEV_EXCL, flock(2)) keeps two
 * fstitch daemons apart when they name the same file; a claim also catches
 * the same storage under another name or in the kernel's hands:
 *
 *   - a block device mounted by the kernel (its major:minor in
 *     /proc/self/mountinfo) or opened exclusively (O_EXCL) by anyone: a
 *     mount, a fuseblk mount, mkfs, e2fsck;
 *   - a loop device: its backing file's image lock too, so that the loop
 *     device and the image file are one file system;
 *   - an image file: every loop device whose backing file it is (by
 *     device and inode: of the name in /sys/block/loopN/loop/backing_file,
 *     or from the device when that file was removed, since its old name
 *     may be a new file's), mounted or opened exclusively.
 *
 * The claim holds what it took (the backing file's lock; the device's
 * O_EXCL descriptor with CLAIM_KEEP_EXCL) until it is released.
 */
#ifndef FSTITCH_CLAIM_H
#define FSTITCH_CLAIM_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum claim_who {
	CLAIM_NONE = 0,
	CLAIM_FSTITCH, /* another fstitch process holds the image lock */
	CLAIM_MOUNTED, /* the kernel has it mounted */
	CLAIM_BUSY,    /* a block device that someone opened exclusively */
};

/* Who was in the way, for the caller's message. */
struct claim_conflict {
	enum claim_who who;
	char dev[64];	      /* the loop device it was seen through; "" if none */
	char image[PATH_MAX]; /* for CLAIM_FSTITCH through a loop device: its
			       * backing file; otherwise "" */
};

enum claim_flags {
	/* Keep a block device open with O_EXCL until the release, so that the
	 * kernel, mkfs and e2fsck see it in use for as long as the claim
	 * lasts (a final flush included). */
	CLAIM_KEEP_EXCL = 1 << 0,
};

struct bdev_claim;

/* Claim path, an image file or a block device.  0 and *out; -EBUSY with
 * *why filled in when something else has it; -errno when path cannot be
 * examined (-ENOENT, -EACCES, ...), or -ENOMEM.  why may be NULL. */
int bdev_claim(const char *path, unsigned flags, struct bdev_claim **out,
	       struct claim_conflict *why);
/* Give up the O_EXCL descriptor but keep the rest (a fuseblk mount makes
 * the kernel claim the device itself).  NULL is a no-op. */
void bdev_claim_drop_excl(struct bdev_claim *c);
/* Release everything and free.  NULL is a no-op. */
void bdev_claim_release(struct bdev_claim *c);

/* The backing file of the loop device with number dev (st_rdev) into buf:
 * 0; 1 when that file was removed (buf has the name it had, which may now
 * be another file's); -ENXIO if dev is no loop device or has no backing
 * file, -ENAMETOOLONG. */
int bdev_loop_backing(dev_t dev, char *buf, size_t len);

/* Attach a new loop device to the image file path, cleared by the kernel
 * once its last user closes it (LO_FLAGS_AUTOCLEAR), read-only when ro:
 * 0 with its descriptor in *fd and its path in name; -errno (-EACCES, or
 * -ENOENT without loop support). */
int bdev_loop_attach(const char *path, bool ro, int *fd, char *name, size_t len);

#endif
