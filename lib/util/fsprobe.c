/* Describing what libblkid finds on a device or image; see fsprobe.h. */
#include "fsprobe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkid/blkid.h>

/* "an xfs", "an ext4", "a swap", "a dos": the article as the name is read
 * out (letter names like x, f, s and n start with a vowel sound only when
 * spelled; xfs and ext4 are the spelled ones people meet). */
static const char *article(const char *type)
{
	return strchr("aeiouxAEIOUX", type[0]) ? "an" : "a";
}

int fsprobe_describe(const char *path, char *desc, size_t desclen, char *type_out, size_t typelen)
{
	const char *type = NULL, *label = NULL, *usage = NULL, *what;
	blkid_probe pr;
	int rc, ret;

	errno = 0;
	pr = blkid_new_probe_from_filename(path);
	if (!pr)
		return errno ? -errno : -EIO;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL |
						  BLKID_SUBLKS_USAGE);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
	rc = blkid_do_safeprobe(pr);
	if (rc == 1) {
		ret = 0;
		goto out;
	}
	if (rc == -2) {
		snprintf(desc, desclen, "more than one file system or partition table signature");
		if (type_out && typelen)
			type_out[0] = '\0';
		ret = 1;
		goto out;
	}
	if (rc < 0) {
		ret = -EIO;
		goto out;
	}
	ret = 1;
	if (blkid_probe_lookup_value(pr, "TYPE", &type, NULL) == 0) {
		blkid_probe_lookup_value(pr, "LABEL", &label, NULL);
		blkid_probe_lookup_value(pr, "USAGE", &usage, NULL);
		if (usage && !strcmp(usage, "filesystem"))
			what = "file system";
		else if (usage && !strcmp(usage, "raid"))
			what = "RAID member";
		else
			what = "signature";
	} else if (blkid_probe_lookup_value(pr, "PTTYPE", &type, NULL) == 0) {
		what = "partition table";
	} else {
		type = "unknown";
		what = "signature";
	}
	snprintf(desc, desclen, "%s %s %s%s%s%s", article(type), type, what,
		 label ? " (label \"" : "", label ? label : "", label ? "\")" : "");
	if (type_out && typelen)
		snprintf(type_out, typelen, "%s", strcmp(type, "unknown") ? type : "");
out:
	blkid_free_probe(pr);
	return ret;
}
