/* Opening a file system with every block write recorded (see
 * bdev/reclog.h), for crash-state checks of a whole daemon run. */
#ifndef FSTITCH_RECORD_H
#define FSTITCH_RECORD_H

#include "ext2/e2.h"

/* e2_open() of image, through a recorder whose log is saved to logpath
 * when the file system is closed (or abandoned).  0 or -errno. */
int reclog_e2_open(const char *image, const char *logpath, const struct e2_opts *o,
		   struct e2fs **out);

#endif
