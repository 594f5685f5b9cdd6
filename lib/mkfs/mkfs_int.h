/* Internals of lib/mkfs (not installed). */
#ifndef FSTITCH_MKFS_INT_H
#define FSTITCH_MKFS_INT_H

#include <ext2fs/ext2fs.h>

/* libext2fs I/O on an NBD export: the channel's name is the URI, each
 * channel its own connection (bdev_nbd_open(), no reconnecting); flush is
 * an NBD flush.  Errors are errno values. */
extern io_manager mkfs_nbd_io_manager;

/* A channel of manager m named name over priv, as libext2fs's open
 * returns it: block size 1024, one reference.  0 or EXT2_ET_NO_MEMORY
 * (priv is then still the caller's). */
errcode_t mkfs_channel_new(io_manager m, const char *name, void *priv, io_channel *out);
/* Free a channel made by mkfs_channel_new() (not what it is over), once
 * its close has dropped the last reference. */
void mkfs_channel_free(io_channel ch);

#endif
