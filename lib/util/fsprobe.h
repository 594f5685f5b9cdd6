/* What is on a device or image, in words, from libblkid's probe: the one
 * description that fstitch-mkfs (before overwriting) and fstitch-mount
 * (when the source is not ext2) both give.
 */
#ifndef FSTITCH_FSPROBE_H
#define FSTITCH_FSPROBE_H

#include <stddef.h>

/* Probe path for file system, RAID and partition table signatures.  On 1
 * (something found) desc holds "an xfs file system", "an ext4 file system
 * (label "x")", "a dos partition table", "a swap signature" or "more than
 * one file system or partition table signature", and type (may be NULL)
 * libblkid's TYPE or PTTYPE ("xfs", "ext4", "dos"; "" when ambiguous).
 * Returns 1; 0 when nothing is found (desc and type untouched); -errno
 * when path cannot be probed. */
int fsprobe_describe(const char *path, char *desc, size_t desclen, char *type, size_t typelen);

#endif
