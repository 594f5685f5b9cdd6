/* Opening a file system through a recorder whose log is saved (record.h). */
#include "bdev/bdev.h"
#include "bdev/reclog.h"
#include "record.h"

int reclog_e2_open(const char *image, const char *logpath, const struct e2_opts *o,
		   struct e2fs **out)
{
	struct bdev *file, *rec, *saver;
	int r;

	r = bdev_file_open(image, 1024, o->readonly ? BDEV_RDONLY | BDEV_EXCL : BDEV_EXCL, &file);
	if (r < 0)
		return r;
	r = bdev_recorder_create(file, &rec);
	if (r < 0) {
		bdev_destroy(file);
		return r;
	}
	r = reclog_saver_create(rec, logpath, &saver);
	if (r < 0) {
		bdev_destroy(rec);
		return r;
	}
	return e2_open_bdev(saver, o, out);
}
