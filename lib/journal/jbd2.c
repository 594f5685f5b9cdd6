/* JBD2 journal: superblock, log walk and replay (jbd2.h).
 *
 * The log starts at s_start with transaction s_sequence.  Each transaction
 * is descriptor blocks (each followed by the copies its tags describe) and
 * revoke blocks, closed by a commit block; every block header carries the
 * transaction's number, and the log ends at the first block whose magic
 * or number is not the one expected.  Recovery walks the log in passes:
 *
 *   scan    find where the committed transactions end, checking the
 *           checksums of descriptor, revoke and commit blocks;
 *   revoke  collect revoke records: block -> latest revoking transaction;
 *   check   (ours) look at every copy that replay would write: its tag
 *           checksum and its target; any failure refuses the whole replay
 *           before a single block is written;
 *   replay  write each copy unless its block was revoked by the same or a
 *           later transaction.
 *
 * A descriptor or revoke block with a bad checksum ends the log quietly if
 * the commit block that follows is older than the last good commit (stale
 * blocks of an earlier use of the journal), and is an error otherwise, as
 * Linux decides.  A commit block with a bad checksum (its own in versions 2
 * and 3, the transaction's crc32 in version 1) is refused: Linux would
 * replay the transactions before it and flag the file system with errors;
 * we leave that call to e2fsck. */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jbd2.h"
#include "util/bytes.h"

/* Journal superblock offsets (all fields big-endian). */
#define SB_BLOCKSIZE 0x0c
#define SB_MAXLEN    0x10
#define SB_FIRST     0x14
#define SB_SEQUENCE  0x18
#define SB_START     0x1c
#define SB_ERRNO     0x20
#define SB_COMPAT    0x24
#define SB_INCOMPAT  0x28
#define SB_ROCOMPAT  0x2c
#define SB_UUID	     0x30
#define SB_CSUM_TYPE 0x50
#define SB_CHECKSUM  0xfc
#define SB_SIZE	     1024

#define HDR_SIZE    12
#define CSUM_CRC32C 4
#define TAIL_SIZE   4
/* Commit block. */
#define COMMIT_CSUM_TYPE 12
#define COMMIT_CSUM_SIZE 13
#define COMMIT_CSUM	 16
#define CSUM_CRC32	 1
#define COMMIT_SEC	 48
/* Revoke block: header, then r_count (bytes used, header included). */
#define REVOKE_COUNT 12
#define REVOKE_FIRST 16

#define KNOWN_INCOMPAT                                                                             \
	(JBD2_FEATURE_INCOMPAT_REVOKE | JBD2_FEATURE_INCOMPAT_64BIT |                              \
	 JBD2_FEATURE_INCOMPAT_CSUM_V2 | JBD2_FEATURE_INCOMPAT_CSUM_V3)

struct revoke {
	uint64_t blk;
	uint32_t tid;
	bool used;
};

struct jbd2 {
	struct bdev *dev;
	const uint64_t *map;
	uint32_t nmap;
	uint64_t fs_blocks;
	uint32_t bs;
	uint8_t *sbblk; /* journal block 0 as read */
	uint32_t maxlen, first, start, sequence;
	int32_t jerrno;
	uint32_t compat, incompat;
	bool v2, csum, csum3, b64;
	bool csum1; /* version 1: a crc32 of each transaction in its commit */
	uint32_t seed;
	uint32_t tag_bytes, tail;
	uint8_t *buf, *dbuf; /* a log block, a data copy */
	/* revoke table: open addressing, power-of-two size */
	struct revoke *rv;
	size_t rvsize, rvcount;
	/* result of the scan */
	uint32_t end_tid;
	bool have_end;
	char *err;
	size_t errlen;
};

/* ---- helpers ----------------------------------------------------------- */

static uint32_t crc_tab[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
		crc_tab[i] = c;
	}
}

uint32_t jbd2_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc_once, crc_init);
	while (len--)
		crc = crc_tab[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

/* The big-endian CRC32 (polynomial 0x04c11db7, no inversion) of version 1
 * transaction checksums. */
static uint32_t crcbe_tab[256];

static void crcbe_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i << 24;

		for (int k = 0; k < 8; k++)
			c = (c << 1) ^ (0x04c11db7u & (0u - (c >> 31)));
		crcbe_tab[i] = c;
	}
}

static pthread_once_t crcbe_once = PTHREAD_ONCE_INIT;

uint32_t jbd2_crc32_be(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crcbe_once, crcbe_init);
	while (len--)
		crc = (crc << 8) ^ crcbe_tab[((crc >> 24) ^ *p++) & 0xff];
	return crc;
}

/* Transaction numbers wrap: compare them as the kernel does. */
static bool tid_gt(uint32_t x, uint32_t y)
{
	return (int32_t)(x - y) > 0;
}

static bool tid_geq(uint32_t x, uint32_t y)
{
	return (int32_t)(x - y) >= 0;
}

__attribute__((format(printf, 3, 4))) static int fail(struct jbd2 *j, int r, const char *fmt, ...)
{
	va_list ap;

	if (j->err && j->errlen) {
		va_start(ap, fmt);
		vsnprintf(j->err, j->errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

static int read_jblock(struct jbd2 *j, uint64_t lblk, uint8_t *buf)
{
	int r;

	if (lblk >= j->nmap)
		return fail(j, -EUCLEAN, "journal block %llu is past the journal's end",
			    (unsigned long long)lblk);
	r = bdev_read(j->dev, j->map[lblk], 1, buf);
	if (r)
		return fail(j, r, "cannot read journal block %llu: %s", (unsigned long long)lblk,
			    strerror(-r));
	return 0;
}

static uint64_t wrap(const struct jbd2 *j, uint64_t pos)
{
	if (pos >= j->maxlen)
		pos = j->first + (pos - j->first) % (j->maxlen - j->first);
	return pos;
}

/* Checksum of a block whose 4-byte checksum field at off counts as zero. */
static uint32_t csum_without(const struct jbd2 *j, const uint8_t *b, uint32_t off, uint32_t len)
{
	static const uint8_t zero[4];
	uint32_t c = jbd2_crc32c(j->seed, b, off);

	c = jbd2_crc32c(c, zero, 4);
	return jbd2_crc32c(c, b + off + 4, len - off - 4);
}

/* Descriptor and revoke blocks end in a 4-byte tail checksum. */
static bool tail_ok(const struct jbd2 *j, const uint8_t *b)
{
	if (!j->csum)
		return true;
	return ld_be32(b + j->bs - TAIL_SIZE) == csum_without(j, b, j->bs - TAIL_SIZE, j->bs);
}

uint32_t jbd2_sb_csum(const uint8_t *s)
{
	static const uint8_t zero[4];
	uint32_t c = jbd2_crc32c(~0u, s, SB_CHECKSUM);

	c = jbd2_crc32c(c, zero, 4);
	return jbd2_crc32c(c, s + SB_CHECKSUM + 4, SB_SIZE - SB_CHECKSUM - 4);
}

static bool commit_ok(const struct jbd2 *j, const uint8_t *b)
{
	if (!j->csum)
		return true;
	return ld_be32(b + COMMIT_CSUM) == csum_without(j, b, COMMIT_CSUM, j->bs);
}

static bool tag_csum_ok(const struct jbd2 *j, const uint8_t *tag, const uint8_t *data, uint32_t tid)
{
	uint8_t seq[4];
	uint32_t c;

	if (!j->csum)
		return true;
	st_be32(seq, tid);
	c = jbd2_crc32c(j->seed, seq, 4);
	c = jbd2_crc32c(c, data, j->bs);
	if (j->csum3)
		return ld_be32(tag + 12) == c;
	return ld_be16(tag + 4) == (uint16_t)c;
}

static uint64_t tag_block(const struct jbd2 *j, const uint8_t *tag)
{
	uint64_t b = ld_be32(tag);

	if (j->b64)
		b |= (uint64_t)ld_be32(tag + 8) << 32;
	return b;
}

/* ---- revoke table ------------------------------------------------------ */

static size_t rv_slot(const struct jbd2 *j, uint64_t blk)
{
	uint64_t h = blk * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 20) & (j->rvsize - 1);
}

static int rv_grow(struct jbd2 *j)
{
	struct revoke *old = j->rv;
	size_t n = j->rvsize;
	size_t nsize = n ? 2 * n : 256;
	struct revoke *nv = calloc(nsize, sizeof(*nv));

	if (!nv)
		return fail(j, -ENOMEM, "out of memory for revoke records");
	j->rv = nv;
	j->rvsize = nsize;
	for (size_t i = 0; i < n; i++)
		if (old[i].used) {
			size_t s = rv_slot(j, old[i].blk);

			while (nv[s].used)
				s = (s + 1) & (nsize - 1);
			nv[s] = old[i];
		}
	free(old);
	return 0;
}

static int rv_set(struct jbd2 *j, uint64_t blk, uint32_t tid)
{
	size_t s;
	int r;

	if (2 * (j->rvcount + 1) > j->rvsize) {
		r = rv_grow(j);
		if (r)
			return r;
	}
	for (s = rv_slot(j, blk); j->rv[s].used; s = (s + 1) & (j->rvsize - 1))
		if (j->rv[s].blk == blk) {
			if (tid_gt(tid, j->rv[s].tid))
				j->rv[s].tid = tid;
			return 0;
		}
	j->rv[s].used = true;
	j->rv[s].blk = blk;
	j->rv[s].tid = tid;
	j->rvcount++;
	return 0;
}

/* A copy from transaction tid is skipped if its block was revoked by tid
 * or a later transaction. */
static bool rv_test(const struct jbd2 *j, uint64_t blk, uint32_t tid)
{
	if (!j->rvsize)
		return false;
	for (size_t s = rv_slot(j, blk); j->rv[s].used; s = (s + 1) & (j->rvsize - 1))
		if (j->rv[s].blk == blk)
			return !tid_gt(tid, j->rv[s].tid);
	return false;
}

/* ---- superblock -------------------------------------------------------- */

int jbd2_open(struct bdev *dev, const uint64_t *map, uint32_t nmap, uint64_t fs_blocks,
	      struct jbd2 **out, char *err, size_t errlen)
{
	struct jbd2 *j;
	const uint8_t *s;
	uint32_t type, ro;
	int r;

	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->dev = dev;
	j->map = map;
	j->nmap = nmap;
	j->fs_blocks = fs_blocks;
	j->bs = dev->block_size;
	j->err = err;
	j->errlen = errlen;
	r = -ENOMEM;
	if (j->bs < SB_SIZE) {
		r = fail(j, -EINVAL, "journal block size %u is below 1024", j->bs);
		goto out;
	}
	j->sbblk = malloc(j->bs);
	j->buf = malloc(j->bs);
	j->dbuf = malloc(j->bs);
	if (!j->sbblk || !j->buf || !j->dbuf)
		goto out;
	if (nmap < JBD2_MIN_BLOCKS) {
		r = fail(j, -EUCLEAN, "journal of %u blocks is too small (at least %u)", nmap,
			 JBD2_MIN_BLOCKS);
		goto out;
	}
	r = read_jblock(j, 0, j->sbblk);
	if (r)
		goto out;
	s = j->sbblk;
	r = -EUCLEAN;
	type = ld_be32(s + 4);
	if (ld_be32(s) != JBD2_MAGIC ||
	    (type != JBD2_SUPERBLOCK_V1 && type != JBD2_SUPERBLOCK_V2)) {
		fail(j, r, "bad journal superblock (magic 0x%08x, type %u)", ld_be32(s), type);
		goto out;
	}
	if (ld_be32(s + SB_BLOCKSIZE) != j->bs) {
		fail(j, r, "journal block size %u differs from the file system's %u",
		     ld_be32(s + SB_BLOCKSIZE), j->bs);
		goto out;
	}
	j->maxlen = ld_be32(s + SB_MAXLEN);
	j->first = ld_be32(s + SB_FIRST);
	j->sequence = ld_be32(s + SB_SEQUENCE);
	j->start = ld_be32(s + SB_START);
	j->jerrno = (int32_t)ld_be32(s + SB_ERRNO);
	if (j->maxlen > nmap) {
		fail(j, r, "journal superblock says %u blocks but the journal has %u", j->maxlen,
		     nmap);
		goto out;
	}
	if (j->maxlen < JBD2_MIN_BLOCKS) {
		fail(j, r, "journal superblock says %u blocks (at least %u)", j->maxlen,
		     JBD2_MIN_BLOCKS);
		goto out;
	}
	if (j->first == 0 || j->first >= j->maxlen) {
		fail(j, r, "journal's first log block %u is out of range", j->first);
		goto out;
	}
	if (j->start && (j->start < j->first || j->start >= j->maxlen)) {
		fail(j, r, "journal's log start %u is out of range", j->start);
		goto out;
	}
	j->v2 = type == JBD2_SUPERBLOCK_V2;
	if (j->v2) {
		j->compat = ld_be32(s + SB_COMPAT);
		j->incompat = ld_be32(s + SB_INCOMPAT);
		ro = ld_be32(s + SB_ROCOMPAT);
		if (j->incompat & JBD2_FEATURE_INCOMPAT_ASYNC) {
			r = fail(j, -EOPNOTSUPP, "journal feature 'async_commit' is not supported");
			goto out;
		}
		if (j->incompat & JBD2_FEATURE_INCOMPAT_FAST_COMM) {
			r = fail(j, -EOPNOTSUPP, "journal feature 'fast_commit' is not supported");
			goto out;
		}
		if (j->incompat & ~KNOWN_INCOMPAT) {
			r = fail(j, -EOPNOTSUPP, "unknown journal feature 0x%x is not supported",
				 j->incompat & ~KNOWN_INCOMPAT);
			goto out;
		}
		if (ro) {
			r = fail(j, -EOPNOTSUPP,
				 "unknown journal read-only feature 0x%x is not supported", ro);
			goto out;
		}
		if ((j->incompat & JBD2_FEATURE_INCOMPAT_CSUM_V2) &&
		    (j->incompat & JBD2_FEATURE_INCOMPAT_CSUM_V3)) {
			fail(j, r, "journal claims both checksum versions 2 and 3");
			goto out;
		}
		j->csum =
		    j->incompat & (JBD2_FEATURE_INCOMPAT_CSUM_V2 | JBD2_FEATURE_INCOMPAT_CSUM_V3);
		j->csum3 = j->incompat & JBD2_FEATURE_INCOMPAT_CSUM_V3;
		j->b64 = j->incompat & JBD2_FEATURE_INCOMPAT_64BIT;
		if (j->csum && (j->compat & JBD2_FEATURE_COMPAT_CHECKSUM)) {
			fail(j, r, "journal claims checksum versions 1 and %d", j->csum3 ? 3 : 2);
			goto out;
		}
		if (j->csum) {
			if (s[SB_CSUM_TYPE] != CSUM_CRC32C) {
				fail(j, r, "journal checksum type %u is not crc32c",
				     s[SB_CSUM_TYPE]);
				goto out;
			}
			if (jbd2_sb_csum(s) != ld_be32(s + SB_CHECKSUM)) {
				fail(j, r, "journal superblock checksum mismatch");
				goto out;
			}
			j->seed = jbd2_crc32c(~0u, s + SB_UUID, 16);
		}
	}
	j->csum1 = j->compat & JBD2_FEATURE_COMPAT_CHECKSUM;
	if (j->csum3)
		j->tag_bytes = 16;
	else
		j->tag_bytes = 8 + (j->csum ? 2 : 0) + (j->b64 ? 4 : 0);
	j->tail = j->csum ? TAIL_SIZE : 0;
	*out = j;
	return 0;
out:
	jbd2_close(j);
	return r;
}

void jbd2_close(struct jbd2 *j)
{
	if (!j)
		return;
	free(j->sbblk);
	free(j->buf);
	free(j->dbuf);
	free(j->rv);
	free(j);
}

bool jbd2_is_empty(const struct jbd2 *j)
{
	return j->start == 0;
}

uint32_t jbd2_sequence(const struct jbd2 *j)
{
	return j->sequence;
}

uint32_t jbd2_start(const struct jbd2 *j)
{
	return j->start;
}

uint32_t jbd2_maxlen(const struct jbd2 *j)
{
	return j->maxlen;
}

/* ---- the log ----------------------------------------------------------- */

enum pass { PASS_SCAN, PASS_REVOKE, PASS_CHECK, PASS_REPLAY };

static const char *const pass_name[] = {"scan", "revoke", "check", "replay"};

/* Number of tags in a descriptor block (the copies that follow it). */
static uint32_t count_tags(const struct jbd2 *j, const uint8_t *b)
{
	uint32_t off = HDR_SIZE, n = 0;

	while (off + j->tag_bytes <= j->bs - j->tail) {
		uint16_t fl = ld_be16(b + off + 6);

		n++;
		off += j->tag_bytes;
		if (!(fl & JBD2_FLAG_SAME_UUID))
			off += 16;
		if (fl & JBD2_FLAG_LAST_TAG)
			break;
	}
	return n;
}

static int scan_revokes(struct jbd2 *j, const uint8_t *b, uint32_t tid, struct jbd2_recovery *rec)
{
	uint32_t used = ld_be32(b + REVOKE_COUNT);
	uint32_t rlen = j->b64 ? 8 : 4;
	int r;

	if (used > j->bs - j->tail)
		return fail(j, -EUCLEAN, "revoke block of transaction %u claims %u bytes", tid,
			    used);
	for (uint32_t off = REVOKE_FIRST; off + rlen <= used; off += rlen) {
		uint64_t blk = rlen == 8 ? (uint64_t)ld_be32(b + off) << 32 | ld_be32(b + off + 4)
					 : ld_be32(b + off);

		r = rv_set(j, blk, tid);
		if (r)
			return r;
		rec->revokes++;
	}
	return 0;
}

/* The copies a descriptor block describes, from log position *pos. */
static int do_tags(struct jbd2 *j, enum pass pass, const uint8_t *d, uint32_t tid, uint64_t *pos,
		   struct jbd2_recovery *rec)
{
	uint32_t off = HDR_SIZE;
	int r;

	while (off + j->tag_bytes <= j->bs - j->tail) {
		const uint8_t *tag = d + off;
		uint16_t fl = ld_be16(tag + 6);
		uint64_t blk = tag_block(j, tag);
		uint64_t at = *pos;

		*pos = wrap(j, *pos + 1);
		if (rv_test(j, blk, tid)) {
			rec->revoked++;
		} else {
			r = read_jblock(j, at, j->dbuf);
			if (r)
				return r;
			if (pass == PASS_CHECK) {
				if (blk >= j->fs_blocks)
					return fail(j, -EUCLEAN,
						    "journal transaction %u writes block %llu, "
						    "outside the file system (%llu blocks)",
						    tid, (unsigned long long)blk,
						    (unsigned long long)j->fs_blocks);
				if (!tag_csum_ok(j, tag, j->dbuf, tid))
					return fail(j, -EUCLEAN,
						    "journal transaction %u: checksum mismatch in "
						    "the copy of block %llu (journal block %llu)",
						    tid, (unsigned long long)blk,
						    (unsigned long long)at);
			} else {
				struct bdev_write w = {blk, j->dbuf};

				if (fl & JBD2_FLAG_ESCAPE)
					st_be32(j->dbuf, JBD2_MAGIC);
				r = bdev_write(j->dev, &w, 1);
				if (r)
					return fail(j, r, "cannot write block %llu: %s",
						    (unsigned long long)blk, strerror(-r));
			}
			rec->blocks++;
		}
		off += j->tag_bytes;
		if (!(fl & JBD2_FLAG_SAME_UUID))
			off += 16;
		if (fl & JBD2_FLAG_LAST_TAG)
			break;
	}
	return 0;
}

static int do_pass(struct jbd2 *j, enum pass pass, struct jbd2_recovery *rec)
{
	uint32_t tid = j->sequence;
	uint64_t pos = j->start;
	uint64_t walked = 0, lap = (uint64_t)j->maxlen - j->first;
	uint64_t last_time = 0;
	bool suspect = false; /* a descriptor or revoke checksum failed */
	uint32_t crc1 = ~0u;  /* version 1 sum of the transaction so far */
	int r;

	for (;;) {
		const uint8_t *b = j->buf;
		uint32_t type, seq;

		if (pass != PASS_SCAN && tid_geq(tid, j->end_tid))
			break;
		/* A log is never longer than the journal: more means blocks
		 * that chain into themselves. */
		if (walked > lap)
			return fail(j, -EUCLEAN,
				    "journal log runs past its own start "
				    "(transaction %u)",
				    tid);
		r = read_jblock(j, pos, j->buf);
		if (r)
			return r;
		pos = wrap(j, pos + 1);
		walked++;
		if (ld_be32(b) != JBD2_MAGIC)
			break;
		type = ld_be32(b + 4);
		seq = ld_be32(b + 8);
		if (seq != tid)
			break;
		if (type == JBD2_DESCRIPTOR_BLOCK) {
			uint32_t n;

			if (!tail_ok(j, b)) {
				if (pass != PASS_SCAN)
					return fail(j, -EUCLEAN,
						    "journal transaction %u: descriptor block "
						    "checksum mismatch",
						    tid);
				suspect = true;
			}
			if (pass == PASS_SCAN && j->csum1 && !suspect) {
				/* version 1 sums the descriptor and its copies */
				n = count_tags(j, b);
				crc1 = jbd2_crc32_be(crc1, b, j->bs);
				for (uint32_t i = 0; i < n; i++) {
					r = read_jblock(j, pos, j->dbuf);
					if (r)
						return r;
					crc1 = jbd2_crc32_be(crc1, j->dbuf, j->bs);
					pos = wrap(j, pos + 1);
				}
				walked += n;
				continue;
			}
			if (pass == PASS_SCAN || pass == PASS_REVOKE) {
				n = count_tags(j, b);
				pos = wrap(j, pos + n);
				walked += n;
				continue;
			}
			/* do_tags reads into dbuf: b stays valid */
			n = count_tags(j, b);
			r = do_tags(j, pass, b, tid, &pos, rec);
			if (r)
				return r;
			walked += n;
		} else if (type == JBD2_COMMIT_BLOCK) {
			uint64_t t =
			    (uint64_t)ld_be32(b + COMMIT_SEC) << 32 | ld_be32(b + COMMIT_SEC + 4);

			if (suspect) {
				if (t >= last_time)
					return fail(
					    j, -EUCLEAN,
					    "journal transaction %u: block checksum mismatch", tid);
				break; /* stale blocks of an earlier log */
			}
			if (pass == PASS_SCAN && j->csum1) {
				uint32_t found = ld_be32(b + COMMIT_CSUM);
				bool ok = (b[COMMIT_CSUM_TYPE] == CSUM_CRC32 &&
					   b[COMMIT_CSUM_SIZE] == 4 && found == crc1) ||
					  (!b[COMMIT_CSUM_TYPE] && !b[COMMIT_CSUM_SIZE] && !found);

				crc1 = ~0u;
				if (!ok) {
					if (t < last_time)
						break;
					return fail(j, -EUCLEAN,
						    "journal transaction %u: transaction checksum "
						    "mismatch (run e2fsck)",
						    tid);
				}
			}
			if (pass == PASS_SCAN && !commit_ok(j, b)) {
				if (t < last_time)
					break;
				return fail(j, -EUCLEAN,
					    "journal transaction %u: commit block checksum "
					    "mismatch (run e2fsck)",
					    tid);
			}
			if (pass == PASS_SCAN)
				last_time = t;
			tid++;
		} else if (type == JBD2_REVOKE_BLOCK) {
			if (pass == PASS_SCAN && !tail_ok(j, b))
				suspect = true;
			if (pass == PASS_REVOKE) {
				r = scan_revokes(j, b, tid, rec);
				if (r)
					return r;
			}
		} else {
			break;
		}
	}
	if (pass == PASS_SCAN) {
		j->end_tid = tid;
		j->have_end = true;
	} else if (tid != j->end_tid) {
		return fail(j, -EUCLEAN, "journal %s pass ended at transaction %u, expected %u",
			    pass_name[pass], tid, j->end_tid);
	}
	return 0;
}

int jbd2_check(struct jbd2 *j, struct jbd2_recovery *rec, char *err, size_t errlen)
{
	struct jbd2_recovery t = {0};
	int r;

	j->err = err;
	j->errlen = errlen;
	t.first_tid = j->sequence;
	t.end_tid = j->sequence;
	t.journal_errno = j->jerrno;
	free(j->rv);
	j->rv = NULL;
	j->rvsize = j->rvcount = 0;
	if (j->start) {
		r = do_pass(j, PASS_SCAN, &t);
		if (!r)
			r = do_pass(j, PASS_REVOKE, &t);
		if (!r)
			r = do_pass(j, PASS_CHECK, &t);
		if (r)
			return r;
		t.end_tid = j->end_tid;
	}
	*rec = t;
	return 0;
}

int jbd2_recover(struct jbd2 *j, struct jbd2_recovery *rec, char *err, size_t errlen)
{
	struct jbd2_recovery t, w = {0};
	struct bdev_write sw;
	uint8_t *s = j->sbblk;
	int r;

	r = jbd2_check(j, &t, err, errlen);
	if (r)
		return r;
	if (j->start) {
		r = do_pass(j, PASS_REPLAY, &w);
		if (r)
			return r;
		r = bdev_barrier(j->dev);
		if (r)
			return fail(j, r, "cannot flush replayed blocks: %s", strerror(-r));
	}
	/* The next transaction number is one past the end, so that no
	 * commit block left in the log can be taken for a new one; an empty
	 * log moves on by one too, as Linux and e2fsck do. */
	st_be32(s + SB_SEQUENCE, j->start ? t.end_tid + 1 : j->sequence + 1);
	st_be32(s + SB_START, 0);
	st_be32(s + SB_ERRNO, 0);
	if (j->csum)
		st_be32(s + SB_CHECKSUM, jbd2_sb_csum(s));
	sw.blkno = j->map[0];
	sw.data = s;
	r = bdev_write(j->dev, &sw, 1);
	if (!r)
		r = bdev_barrier(j->dev);
	if (r)
		return fail(j, r, "cannot write the journal superblock: %s", strerror(-r));
	j->sequence = ld_be32(s + SB_SEQUENCE);
	j->start = 0;
	j->jerrno = 0;
	*rec = t;
	return 0;
}
