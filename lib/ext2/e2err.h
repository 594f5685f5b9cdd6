/* The boundary between libext2fs and fstitch: libext2fs reports errcode_t
 * values (com_err codes, or plain errno values for system errors), fstitch
 * returns -errno.  This is the one place that translates. */
#ifndef FSTITCH_E2ERR_H
#define FSTITCH_E2ERR_H

#include <ext2fs/ext2fs.h>

/* Translate a libext2fs error into a negative errno: 0 for 0, -err for a
 * system error passed through, the closest errno for a libext2fs code (for
 * example -ENOMEM, -EIO for short reads and writes, -EUCLEAN for corrupt
 * metadata, -EOPNOTSUPP for unsupported features, -ENOSPC for allocation
 * failures), and -EIO for any code it does not know. */
int e2err_to_errno(errcode_t err);

#endif
