/* Recorder logs on disk, so that crash states of a whole daemon run can be
 * checked afterwards (fstitch-crash(1), and the tests).
 *
 * fstitch-mount opens its image through reclog_e2_open() (crash/record.h)
 * when the environment variable FSTITCH_RECORD names a log file: every
 * block write and barrier is recorded, and when the file system is closed
 * the log is saved there.  fstitch-crash (crash/crashplan.h) or a test then
 * loads it with reclog_load().  The log holds a copy of the whole image: use small
 * images.
 *
 * Format (host byte order): "FSTREC1\n", u32 block size, u64 block count,
 * the initial image, then per event u8 kind (0 write, 1 barrier) and, for a
 * write, u64 block number and one block of data.
 */
#ifndef FSTITCH_RECLOG_H
#define FSTITCH_RECLOG_H

#include "bdev.h"

/* Save rec's log to path.  0 or -errno. */
int reclog_save(struct bdev *rec, const char *path);
/* Rebuild a recorder (over a memory device) from a saved log; -EPROTO for
 * a file that is not a log. */
int reclog_load(const char *path, struct bdev **out);
/* A device passing everything to the recorder rec, which saves rec's log
 * to logpath when it is destroyed and then destroys rec.  0 or -ENOMEM (rec
 * is then still the caller's). */
int reclog_saver_create(struct bdev *rec, const char *logpath, struct bdev **out);

#endif
