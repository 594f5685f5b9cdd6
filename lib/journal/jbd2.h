/* The JBD2 journal format (the journal of ext3 and ext4), read side:
 * the journal superblock, the walk of the log, and replay (design.md §3,
 * "Journal recovery").
 *
 * The journal is given as a map from journal block numbers to device
 * blocks (the caller resolves the journal inode; this layer knows nothing
 * of ext2), all of the device's block size.  Every field read from disk is
 * checked before use: a corrupt journal is a -EUCLEAN (or -EOPNOTSUPP for
 * a feature not handled) with a one-line explanation, never a crash, and
 * nothing is written before the whole log has been checked.  Replay writes
 * only to blocks below fs_blocks.
 *
 * Functions return 0 or -errno; outputs are written only on success.
 */
#ifndef FSTITCH_JBD2_H
#define FSTITCH_JBD2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bdev/bdev.h"

#define JBD2_MAGIC	      0xc03b3998u
#define JBD2_DESCRIPTOR_BLOCK 1
#define JBD2_COMMIT_BLOCK     2
#define JBD2_SUPERBLOCK_V1    3
#define JBD2_SUPERBLOCK_V2    4
#define JBD2_REVOKE_BLOCK     5

#define JBD2_FEATURE_COMPAT_CHECKSUM	0x1u
#define JBD2_FEATURE_INCOMPAT_REVOKE	0x1u
#define JBD2_FEATURE_INCOMPAT_64BIT	0x2u
#define JBD2_FEATURE_INCOMPAT_ASYNC	0x4u
#define JBD2_FEATURE_INCOMPAT_CSUM_V2	0x8u
#define JBD2_FEATURE_INCOMPAT_CSUM_V3	0x10u
#define JBD2_FEATURE_INCOMPAT_FAST_COMM 0x20u

#define JBD2_FLAG_ESCAPE    1u
#define JBD2_FLAG_SAME_UUID 2u
#define JBD2_FLAG_DELETED   4u
#define JBD2_FLAG_LAST_TAG  8u

/* The smallest journal Linux and e2fsprogs accept, in blocks. */
#define JBD2_MIN_BLOCKS 1024u

struct jbd2;

/* What a recovery did. */
struct jbd2_recovery {
	uint32_t first_tid;    /* first transaction of the log */
	uint32_t end_tid;      /* first transaction not committed */
	uint64_t blocks;       /* block copies written in place */
	uint64_t revoked;      /* copies skipped: revoked by a later transaction */
	uint64_t revokes;      /* revoke records read */
	int32_t journal_errno; /* s_errno the journal carried (now cleared) */
};

/* Read and check the journal superblock (journal block 0).  map[i] is the
 * device block of journal block i, for i < nmap; the device's block size
 * must be the journal's.  err gets a one-line explanation on failure. */
int jbd2_open(struct bdev *dev, const uint64_t *map, uint32_t nmap, uint64_t fs_blocks,
	      struct jbd2 **out, char *err, size_t errlen);
void jbd2_close(struct jbd2 *j);

/* True if the log holds no transactions (s_start is 0). */
bool jbd2_is_empty(const struct jbd2 *j);
/* The superblock's fields, for reports and tests. */
uint32_t jbd2_sequence(const struct jbd2 *j);
uint32_t jbd2_start(const struct jbd2 *j);
uint32_t jbd2_maxlen(const struct jbd2 *j);

/* Find the committed transactions and check every block of them (log
 * structure, checksums when the journal has them, targets inside the file
 * system), writing nothing.  Fills *rec as a recovery would (blocks and
 * revoked count what would be written and skipped). */
int jbd2_check(struct jbd2 *j, struct jbd2_recovery *rec, char *err, size_t errlen);

/* Replay: jbd2_check(), then write every block copy of the committed
 * transactions in log order unless a revoke record of the same or a later
 * transaction names its block, then a barrier, then mark the journal empty
 * (s_start 0, s_sequence one past the last transaction seen, s_errno 0)
 * and a barrier.  If the check fails nothing is written.  Replay is
 * idempotent: a crash in the middle leaves a log that replays the same. */
int jbd2_recover(struct jbd2 *j, struct jbd2_recovery *rec, char *err, size_t errlen);

/* CRC32C (Castagnoli) as the journal uses it: no inversion at either end;
 * the journal's seed is jbd2_crc32c(~0, uuid, 16). */
uint32_t jbd2_crc32c(uint32_t crc, const void *buf, size_t len);
/* The big-endian CRC32 (polynomial 0x04c11db7, no inversion) of version 1
 * checksums: a transaction's sum starts at ~0 and runs over its
 * descriptor blocks and copies in log order. */
uint32_t jbd2_crc32_be(uint32_t crc, const void *buf, size_t len);
/* The checksum of a journal superblock (its first 1024 bytes) with
 * checksums v2/v3: crc32c seeded with ~0 (not with the uuid, which is
 * inside), s_checksum counted as zero. */
uint32_t jbd2_sb_csum(const uint8_t *sb);

#endif
