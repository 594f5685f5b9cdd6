/* Resolving SOURCE (see source.h). */
#include "source.h"

#include <blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const tags[] = { "LABEL=", "UUID=", "PARTLABEL=", "PARTUUID=" };

bool source_is_tag(const char *spec)
{
	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++)
		if (strncmp(spec, tags[i], strlen(tags[i])) == 0)
			return true;
	return false;
}

void source_free(struct source *src)
{
	free(src->path);
	src->path = NULL;
}

int source_resolve(const char *spec, struct source *out)
{
	struct source src = { .path = NULL };
	char *dev = NULL;
	struct stat st;
	int ret;

	if (!*spec)
		return -EINVAL;
	if (source_is_tag(spec)) {
		const char *val = strchr(spec, '=') + 1;

		if (!*val || strcmp(val, "\"\"") == 0)
			return -EINVAL;
		/* libblkid strips quotes and consults its cache, verifying the
		 * device it finds, so a stale cache entry is never returned. */
		dev = blkid_evaluate_tag(spec, NULL, NULL);
		if (!dev)
			return -ENOENT;
		spec = dev;
		src.tag = true;
	}
	if (stat(spec, &st) < 0) {
		ret = -errno;
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		ret = -EISDIR;
		goto out;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		ret = -ENODEV;
		goto out;
	}
	src.blockdev = S_ISBLK(st.st_mode);
	/* Absolute, because the daemon changes to / when it goes into the
	 * background, and the path is what df and /proc/mounts show. */
	src.path = realpath(spec, NULL);
	if (!src.path) {
		ret = -errno;
		goto out;
	}
	*out = src;
	ret = 0;
out:
	free(dev);
	return ret;
}

int source_block_size(const char *path, uint32_t *block_size)
{
	unsigned char sb[1024];
	uint32_t log;
	ssize_t n;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* The superblock lives at byte 1024 whatever the block size is. */
	n = pread(fd, sb, sizeof(sb), 1024);
	if (n < 0) {
		ret = -errno;
		goto out;
	}
	if (n != (ssize_t)sizeof(sb) || sb[56] != 0x53 || sb[57] != 0xef) {
		ret = -EINVAL;
		goto out;
	}
	log = (uint32_t)sb[24] | (uint32_t)sb[25] << 8 | (uint32_t)sb[26] << 16 |
	      (uint32_t)sb[27] << 24;
	if (log > 6) { /* 1 KiB << 6 = 64 KiB, ext2's largest block */
		ret = -EINVAL;
		goto out;
	}
	*block_size = 1024U << log;
out:
	close(fd);
	return ret;
}
