/* Resolving SOURCE (see source.h). */
#include "source.h"

#include "bdev/bdev.h"
#include "bdev/reclog.h"
#include "ext2/e2.h"
#include "mountopt.h"

#include <blkid.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const tags[] = {"LABEL=", "UUID=", "PARTLABEL=", "PARTUUID="};

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

/* spec with a relative socket=PATH made absolute, percent-encoded as a
 * URI wants it: the daemon reconnects after it changed to /. */
static int nbd_absolute(const char *spec, char **out)
{
	const char *q = strchr(spec, '?'), *p = q, *val = NULL;
	char *cwd = NULL, *res = NULL;
	FILE *f;
	size_t len;

	while (p && !val) {
		p++;
		if (strncmp(p, "socket=", 7) == 0)
			val = p + 7;
		else
			p = strchr(p, '&');
	}
	if (!val || *val == '/' || *val == '&' || !*val || strncasecmp(val, "%2f", 3) == 0) {
		*out = strdup(spec);
		return *out ? 0 : -ENOMEM;
	}
	cwd = getcwd(NULL, 0);
	if (!cwd)
		return -errno;
	f = open_memstream(&res, &len);
	if (!f) {
		free(cwd);
		return -ENOMEM;
	}
	fwrite(spec, 1, (size_t)(val - spec), f);
	for (const unsigned char *c = (const unsigned char *)cwd; *c; c++) {
		if (isalnum(*c) || strchr("-._~/", *c))
			fputc(*c, f);
		else
			fprintf(f, "%%%02X", *c);
	}
	fprintf(f, "/%s", val);
	free(cwd);
	if (fclose(f) != 0) {
		free(res);
		return -ENOMEM;
	}
	*out = res;
	return 0;
}

int source_resolve(const char *spec, struct source *out)
{
	struct source src = {.path = NULL};
	char *dev = NULL;
	struct stat st;
	int ret;

	if (!*spec)
		return -EINVAL;
	if (bdev_nbd_is_uri(spec)) {
		/* libnbd parses the rest when it connects */
		ret = nbd_absolute(spec, &src.path);
		if (ret < 0)
			return ret;
		src.nbd = true;
		*out = src;
		return 0;
	}
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

int source_open_nbd(const struct source *src, const struct mountopt *mo, const struct e2_opts *eo,
		    const char *record, struct e2fs **out, char *err, size_t errlen)
{
	struct e2_opts o = *eo;
	struct bdev *dev = NULL, *rec;
	unsigned flags = 0;
	uint8_t sb[1024];
	int r;

	if (mo->readonly)
		flags |= BDEV_RDONLY;
	if (mo->unsafe_no_flush)
		flags |= BDEV_UNSAFE_NO_FLUSH;
	r = bdev_nbd_open(src->path, 1024, flags, mo->nbd_retry_ms, &dev, err, errlen);
	if (r == -EROFS || r == -EOPNOTSUPP) {
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, "; %s",
			 r == -EROFS ? "mount it with -o ro"
				     : "-o unsafe_no_flush mounts it anyway");
	}
	if (r < 0)
		return r;
	/* cache= is in bytes, the cache counts blocks: their size is in the
	 * superblock (when it cannot be read, e2_open_bdev explains). */
	if (mo->cache_bytes && dev->nblocks > 1 && bdev_read(dev, 1, 1, sb) == 0 &&
	    sb[56] == 0x53 && sb[57] == 0xef && sb[24] <= 6 && !sb[25] && !sb[26] && !sb[27])
		o.cache_blocks = mountopt_cache_blocks(mo, 1024U << sb[24]);
	if (record) {
		r = bdev_recorder_create(dev, &rec);
		if (r < 0) {
			bdev_destroy(dev);
			snprintf(err, errlen, "cannot record: %s", strerror(-r));
			return r;
		}
		r = reclog_saver_create(rec, record, &dev);
		if (r < 0) {
			bdev_destroy(rec);
			snprintf(err, errlen, "cannot record: %s", strerror(-r));
			return r;
		}
	}
	r = e2_open_bdev(dev, &o, out);
	if (r < 0)
		snprintf(err, errlen, "%s", *e2_open_error() ? e2_open_error() : strerror(-r));
	return r;
}
