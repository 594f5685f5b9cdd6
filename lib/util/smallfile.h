/* Reading the small text files of /proc and /sys in one go. */
#ifndef FSTITCH_SMALLFILE_H
#define FSTITCH_SMALLFILE_H

#include <stddef.h>

/* Read what one read(2) of path gives, at most size - 1 bytes, into buf
 * and end it with a NUL (size must be at least 1).  0, or -errno from the
 * open or the read.  A longer file is cut short: meant for files whose
 * contents the kernel hands out whole, such as /proc/PID/stat. */
int small_file_read(const char *path, char *buf, size_t size);

#endif
