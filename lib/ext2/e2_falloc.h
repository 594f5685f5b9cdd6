/* Space preallocation, hole punching and hole queries on the ext2 module,
 * for fstitch-mount's fallocate and lseek(SEEK_DATA/SEEK_HOLE).
 *
 * ext2 has no unwritten extents, so preallocated blocks are real blocks
 * filled with zeros, written in the same soft-updates order as any write
 * (zeroed data before the pointers to it, pointers before the size), so
 * that no crash ever shows stale disk contents through the file.  Blocks
 * past the end of a file are not allowed on ext2 (e2fsck reports them), so
 * preallocation that keeps the size is possible only inside the file.
 *
 * Return values: 0 or -errno; outputs written only on success.
 */
#ifndef FSTITCH_E2_FALLOC_H
#define FSTITCH_E2_FALLOC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "e2.h"

/* Allocate every block of [off, off + len) of regular file ino that is a
 * hole, as zeros, and unless keep_size raise the size to off + len if it is
 * smaller (fallocate mode 0).  With keep_size, a range reaching past the
 * end of the file is -EOPNOTSUPP (nothing is changed).  -ENOSPC when the
 * free blocks cannot cover the holes: checked first, so that nothing
 * changes; if the disk still fills part way, the size is put back and the
 * holes filled so far stay filled (they read as zeros either way).
 * -EINVAL for off < 0 or len <= 0 or a file that is not regular, -EFBIG
 * past the largest file, -EISDIR, -EROFS, -EIO. */
int e2_falloc(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, bool keep_size, off_t off,
	      off_t len);

/* Punch a hole (fallocate FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) in
 * [off, off + len) of regular file ino, as Linux does in block-mapped
 * files: the part past the end of the file is ignored; whole blocks in the
 * range are freed, and so is each indirect block left mapping nothing; the
 * bytes of a block only partly in the range are zeroed.  A range reaching
 * the end of the file frees its last block too.  Pointers are cleared
 * before the blocks are marked free (truncate's rule, design.md §4).  The
 * size stays; mtime and ctime move.  -EINVAL for off < 0 or len <= 0 or a
 * file that is not regular, -EISDIR, -EROFS, -EIO. */
int e2_punch(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, off_t off, off_t len);

/* lseek's SEEK_DATA (data true) or SEEK_HOLE (data false) from off in
 * regular file ino, answered from the block map: *out is the first offset
 * >= off in data or in a hole.  The end of the file counts as a hole.
 * -ENXIO when off is at or past the end of the file, or (SEEK_DATA) when
 * no data follows; -EISDIR, -EINVAL for another file that is not regular;
 * -EIO. */
int e2_seek(struct e2fs *fs, uint32_t ino, off_t off, bool data, off_t *out);

#endif
