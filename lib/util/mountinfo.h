/* The mount table of the calling process (/proc/self/mountinfo, proc(5)):
 * which file system is mounted where.  Used to tell a dead FUSE mount from
 * a directory, and a block device or loop device mounted by the kernel from
 * one that is free.
 */
#ifndef FSTITCH_MOUNTINFO_H
#define FSTITCH_MOUNTINFO_H

#include <stdbool.h>
#include <sys/types.h>

/* One line, its escapes (\040 for a space, ...) undone.  The strings point
 * into a buffer that is valid only during the callback. */
struct mountinfo_ent {
	dev_t dev;	    /* the file system's st_dev: major:minor */
	const char *root;   /* the part of the file system mounted */
	const char *target; /* the mount point */
	const char *fstype; /* "ext4", "fuse.fstitch", "fuseblk", ... */
	const char *source; /* "/dev/sda1", "/srv/disk.img", ... */
};

/* Call fn for every entry of the table in path (NULL: /proc/self/mountinfo),
 * in order, until it returns non-zero.  Returns fn's non-zero value, 0
 * after the last entry, -errno if path cannot be read, or -ENOMEM.
 * Malformed lines are skipped. */
int mountinfo_each(const char *path, int (*fn)(const struct mountinfo_ent *e, void *arg),
		   void *arg);

/* Find the last (topmost) mount on target, an absolute path.  On success
 * returns 1 and, when the buffers are not NULL, copies its type and source
 * (truncated to fit, NUL terminated); 0 if nothing is mounted there; -errno
 * as mountinfo_each(). */
int mountinfo_find(const char *path, const char *target, char *fstype, size_t fstype_len,
		   char *source, size_t source_len);

/* 1 if a file system on the block device dev (its st_rdev) is mounted, 0 if
 * not, -errno as mountinfo_each(). */
int mountinfo_dev_mounted(const char *path, dev_t dev);

#endif
