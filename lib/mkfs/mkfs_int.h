/* Internals of lib/mkfs (not installed). */
#ifndef FSTITCH_MKFS_INT_H
#define FSTITCH_MKFS_INT_H

#include <ext2fs/ext2fs.h>

/* libext2fs I/O on an NBD export: the channel's name is the URI, each
 * channel its own connection (bdev_nbd_open(), no reconnecting); flush is
 * an NBD flush.  Errors are errno values. */
extern io_manager mkfs_nbd_io_manager;

#endif
