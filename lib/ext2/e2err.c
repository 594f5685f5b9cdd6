/* libext2fs errcode_t -> -errno; see e2err.h. */
#include "e2err.h"

#include <errno.h>

int e2err_to_errno(errcode_t err)
{
	if (err == 0)
		return 0;
	/* libext2fs passes system errors through unchanged; its own codes
	 * live in a com_err table far above the errno range. */
	if (err > 0 && err < 4096)
		return -(int)err;

	switch (err) {
	case EXT2_ET_NO_MEMORY:
		return -ENOMEM;
	case EXT2_ET_SHORT_READ:
	case EXT2_ET_SHORT_WRITE:
	case EXT2_ET_LLSEEK_FAILED:
		return -EIO;
	case EXT2_ET_BAD_MAGIC:
	case EXT2_ET_CORRUPT_SUPERBLOCK:
	case EXT2_ET_SB_CSUM_INVALID:
	case EXT2_ET_GDESC_BAD_BLOCK_MAP:
	case EXT2_ET_GDESC_BAD_INODE_MAP:
	case EXT2_ET_GDESC_BAD_INODE_TABLE:
	case EXT2_ET_UNEXPECTED_BLOCK_SIZE:
	case EXT2_ET_DIR_CORRUPTED:
	case EXT2_ET_BAD_BLOCK_NUM:
	case EXT2_ET_BAD_INODE_NUM:
	case EXT2_ET_INODE_CORRUPTED:
	case EXT2_ET_DIR_CSUM_INVALID:
	case EXT2_ET_INODE_CSUM_INVALID:
	case EXT2_ET_BLOCK_BITMAP_CSUM_INVALID:
	case EXT2_ET_INODE_BITMAP_CSUM_INVALID:
		return -EUCLEAN;
	case EXT2_ET_REV_TOO_HIGH:
	case EXT2_ET_UNSUPP_FEATURE:
	case EXT2_ET_RO_UNSUPP_FEATURE:
	case EXT2_ET_UNIMPLEMENTED:
	case EXT2_ET_OP_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	case EXT2_ET_TOOSMALL:
	case EXT2_ET_BLOCK_ALLOC_FAIL:
	case EXT2_ET_INODE_ALLOC_FAIL:
	case EXT2_ET_DIR_NO_SPACE:
	case EXT2_ET_RES_GDT_BLOCKS:
		return -ENOSPC;
	case EXT2_ET_TOO_MANY_INODES:
	case EXT2_ET_INVALID_ARGUMENT:
	case EXT2_ET_BAD_DEVICE_NAME:
		return -EINVAL;
	case EXT2_ET_FILE_NOT_FOUND:
		return -ENOENT;
	case EXT2_ET_DIR_EXISTS:
		return -EEXIST;
	case EXT2_ET_NO_DIRECTORY:
		return -ENOTDIR;
	case EXT2_ET_TOO_MANY_REFS:
		return -EMLINK;
	case EXT2_ET_FILE_TOO_BIG:
		return -EFBIG;
	case EXT2_ET_RO_FILSYS:
		return -EROFS;
	case EXT2_ET_FILE_RO:
		return -EBADF;
	case EXT2_ET_MMP_FAILED:
	case EXT2_ET_MMP_FSCK_ON:
		return -EBUSY;
	default:
		return -EIO;
	}
}
