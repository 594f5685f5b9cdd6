/* Claiming the storage under a file system (see claim.h). */
#include "claim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/mountinfo.h"
#include "util/smallfile.h"

struct bdev_claim {
	int lockfd; /* a loop device's backing file, flock'ed; -1: none */
	int exclfd; /* the block device, O_EXCL; -1: none */
};

/* The first line of a sysfs file, without its newline. */
static int read_line(const char *path, char *buf, size_t len)
{
	int r = small_file_read(path, buf, len);

	if (r == 0)
		buf[strcspn(buf, "\n")] = '\0';
	return r;
}

int bdev_loop_backing(dev_t dev, char *buf, size_t len)
{
	char path[96], b[PATH_MAX + 16];
	bool removed = false;
	size_t n;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/loop/backing_file", major(dev),
		 minor(dev));
	if (read_line(path, b, sizeof(b)) < 0 || !b[0])
		return -ENXIO;
	/* the kernel marks a backing file that was removed: the name, without
	 * the mark, may be another file's by now */
	n = strlen(b);
	if (n > 10 && strcmp(b + n - 10, " (deleted)") == 0) {
		b[n - 10] = '\0';
		removed = true;
	}
	if (strlen(b) >= len)
		return -ENAMETOOLONG;
	strcpy(buf, b);
	return removed;
}

/* Is the loop device at path backed by the file st names?  Asked of the
 * device itself, for a backing file that was removed and so has no name to
 * stat; a device we may not open cannot tell, and says no. */
static bool loop_backed_by(const char *path, const struct stat *st)
{
	struct loop_info64 info;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0)
		return false;
	r = ioctl(fd, LOOP_GET_STATUS64, &info);
	close(fd);
	return r == 0 && info.lo_device == (uint64_t)st->st_dev && info.lo_inode == st->st_ino;
}

static void set_why(struct claim_conflict *why, enum claim_who who, const char *dev,
		    const char *image)
{
	if (!why)
		return;
	why->who = who;
	snprintf(why->dev, sizeof(why->dev), "%s", dev ? dev : "");
	snprintf(why->image, sizeof(why->image), "%s", image ? image : "");
}

/* A block device: mounted, or open exclusively?  *exclfd gets the O_EXCL
 * descriptor.  0, -EBUSY (why filled with dev as the device to name), or
 * -errno. */
static int claim_blockdev(const char *path, dev_t rdev, const char *via, int *exclfd,
			  struct claim_conflict *why)
{
	int fd;

	if (mountinfo_dev_mounted(NULL, rdev) == 1) {
		set_why(why, CLAIM_MOUNTED, via, NULL);
		return -EBUSY;
	}
	fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EBUSY) {
			set_why(why, CLAIM_BUSY, via, NULL);
			return -EBUSY;
		}
		return -errno;
	}
	*exclfd = fd;
	return 0;
}

/* Every loop device whose backing file is the image st names. */
static int claim_loops_of(const struct stat *img, struct claim_conflict *why)
{
	char path[300], line[32], back[PATH_MAX], dev[300];
	unsigned maj, min;
	struct dirent *d;
	struct stat bs;
	DIR *dp = opendir("/sys/block");
	int r = 0, fd = -1, removed;
	bool same;

	if (!dp)
		return 0; /* no sysfs: no loop devices to find */
	while (!r && (d = readdir(dp))) {
		if (strncmp(d->d_name, "loop", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/dev", d->d_name);
		if (read_line(path, line, sizeof(line)) < 0 ||
		    sscanf(line, "%u:%u", &maj, &min) != 2)
			continue;
		snprintf(dev, sizeof(dev), "/dev/%s", d->d_name);
		removed = bdev_loop_backing(makedev(maj, min), back, sizeof(back));
		if (removed < 0)
			continue;
		/* A removed backing file is not the one now at its name (an
		 * image made again under the same name) but may be our image
		 * under another (a hard link). */
		if (removed)
			same = loop_backed_by(dev, img);
		else
			same = stat(back, &bs) == 0 && bs.st_dev == img->st_dev &&
			       bs.st_ino == img->st_ino;
		if (!same)
			continue;
		r = claim_blockdev(dev, makedev(maj, min), dev, &fd, why);
		/* a device we may not open: only the mount table can tell */
		if (r == -EACCES || r == -EPERM || r == -ENOENT)
			r = 0;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	closedir(dp);
	return r;
}

int bdev_claim(const char *path, unsigned flags, struct bdev_claim **out,
	       struct claim_conflict *why)
{
	struct bdev_claim *c;
	char back[PATH_MAX];
	struct stat st;
	int r;

	if (why)
		set_why(why, CLAIM_NONE, NULL, NULL);
	if (stat(path, &st) < 0)
		return -errno;
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->lockfd = c->exclfd = -1;
	if (S_ISREG(st.st_mode)) {
		r = claim_loops_of(&st, why);
		if (r < 0)
			goto fail;
	} else if (S_ISBLK(st.st_mode)) {
		r = claim_blockdev(path, st.st_rdev, NULL, &c->exclfd, why);
		if (r < 0)
			goto fail;
		if (bdev_loop_backing(st.st_rdev, back, sizeof(back)) == 0) {
			/* The image behind it is the same file system: take its
			 * lock as a daemon on the image itself does. */
			c->lockfd = open(back, O_RDONLY | O_CLOEXEC);
			if (c->lockfd >= 0 && flock(c->lockfd, LOCK_EX | LOCK_NB) < 0) {
				r = errno == EWOULDBLOCK ? -EBUSY : -errno;
				if (r == -EBUSY)
					set_why(why, CLAIM_FSTITCH, path, back);
				goto fail;
			}
		}
		if (!(flags & CLAIM_KEEP_EXCL))
			bdev_claim_drop_excl(c);
	}
	*out = c;
	return 0;
fail:
	bdev_claim_release(c);
	return r;
}

void bdev_claim_drop_excl(struct bdev_claim *c)
{
	if (c && c->exclfd >= 0) {
		close(c->exclfd);
		c->exclfd = -1;
	}
}

void bdev_claim_release(struct bdev_claim *c)
{
	if (!c)
		return;
	bdev_claim_drop_excl(c);
	if (c->lockfd >= 0)
		close(c->lockfd);
	free(c);
}

int bdev_loop_attach(const char *path, bool ro, int *fd, char *name, size_t len)
{
	struct loop_config cfg;
	int ctl, img, dev = -1, r = 0, n;

	img = open(path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (img < 0)
		return -errno;
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		r = -errno;
		goto out;
	}
	/* another program may take the free device first: try again */
	for (int tries = 0; tries < 64; tries++) {
		n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			r = -errno;
			break;
		}
		snprintf(name, len, "/dev/loop%d", n);
		dev = open(name, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (dev < 0) {
			r = -errno;
			break;
		}
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (uint32_t)img;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | (ro ? LO_FLAGS_READ_ONLY : 0);
		snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "%s", path);
		if (ioctl(dev, LOOP_CONFIGURE, &cfg) == 0) {
			r = 0;
			*fd = dev;
			dev = -1;
			break;
		}
		r = -errno;
		close(dev);
		dev = -1;
		if (r != -EBUSY)
			break;
	}
	close(ctl);
out:
	close(img);
	return r;
}
