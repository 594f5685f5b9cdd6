/* Resolving fstitch-mount's SOURCE argument: an image file, a block device,
 * a tag (LABEL=..., UUID=..., PARTLABEL=..., PARTUUID=...) that libblkid
 * looks up among the system's block devices, or an NBD URI.
 */
#ifndef FSTITCH_SOURCE_H
#define FSTITCH_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct source {
	char *path;    /* absolute path of the file or device (malloc'ed) */
	bool blockdev; /* a block device rather than a regular file */
	bool tag;      /* found through a LABEL=/UUID=/... tag */
	bool nbd;      /* an NBD URI (path is the URI as given) */
};

struct e2fs;
struct e2_opts;
struct mountopt;

/* True if spec has the form of a tag (LABEL=, UUID=, PARTLABEL=, PARTUUID=). */
bool source_is_tag(const char *spec);

/* Resolve spec into *out (the caller frees it with source_free()).
 * Returns 0, or:
 *   -EINVAL  spec is empty, or a tag with an empty value
 *   -ENOENT  no such file, or no block device carries the tag
 *   -EISDIR  spec is a directory
 *   -ENODEV  spec is neither a regular file nor a block device
 *   -ENOMEM, or another -errno from stat()/realpath(). */
int source_resolve(const char *spec, struct source *out);

/* Open the file system on the NBD export src names, with the mount options
 * that concern it (ro, unsafe_no_flush, nbd_retry=, cache=) and *eo for
 * the rest.  With record set, every block write is recorded and the log
 * saved there at the close (reclog_e2_open(), for tests).  Returns 0, or
 * -errno with a one-line explanation in err: the device's (bdev_nbd_open())
 * or the file system's (e2_open_error()). */
int source_open_nbd(const struct source *src, const struct mountopt *mo, const struct e2_opts *eo,
		    const char *record, struct e2fs **out, char *err, size_t errlen);
void source_free(struct source *src);

/* The block size recorded in the ext2 superblock of path.  Returns 0;
 * -EINVAL when there is no ext2 superblock or its block size is not one
 * ext2 allows (the caller leaves the full diagnosis to e2_open()); -errno
 * from open()/pread(). */
int source_block_size(const char *path, uint32_t *block_size);

#endif
