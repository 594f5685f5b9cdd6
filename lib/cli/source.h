/* Resolving fstitch-mount's SOURCE argument: an image file, a block device,
 * or a tag (LABEL=..., UUID=..., PARTLABEL=..., PARTUUID=...) that libblkid
 * looks up among the system's block devices.
 */
#ifndef FSTITCH_SOURCE_H
#define FSTITCH_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

struct source {
	char *path;    /* absolute path of the file or device (malloc'ed) */
	bool blockdev; /* a block device rather than a regular file */
	bool tag;      /* found through a LABEL=/UUID=/... tag */
};

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
void source_free(struct source *src);

/* The block size recorded in the ext2 superblock of path.  Returns 0;
 * -EINVAL when there is no ext2 superblock or its block size is not one
 * ext2 allows (the caller leaves the full diagnosis to e2_open()); -errno
 * from open()/pread(). */
int source_block_size(const char *path, uint32_t *block_size);

#endif
