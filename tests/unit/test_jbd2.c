/* The JBD2 reader (journal/jbd2.c): journals written here block by block,
 * in every tag format (32/64-bit block numbers, no checksum, checksum v2
 * and v3), replayed onto a memory device and compared with what the
 * format says must be on disk; then corrupt journals, which must be
 * refused with nothing written, or replayed correctly, and never make a
 * write outside the file system (run under ASan in make check).
 *
 * The device holds a "file system" of FS_BLOCKS blocks followed by the
 * journal (journal block i is device block FS_BLOCKS + i).
 *
 * Environment: JBD2_SEED, JBD2_FLIPS (random corruption rounds).
 */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bdev/bdev.h"
#include "journal/jbd2.h"
#include "e2test_util.h"

#define FS_BLOCKS 256u
#define JLEN	  1024u

/* ---- a journal writer (the format as jbd2.h describes it) --------------- */

struct jw {
	uint32_t bs;
	int csum;      /* 0, 1, 2 or 3 (version 1: a crc32 per transaction) */
	uint32_t crc1; /* version 1: the running transaction's sum */
	bool b64;
	bool bad_tag_csum; /* write wrong data checksums */
	uint8_t *dev;	   /* FS_BLOCKS + JLEN blocks */
	uint64_t map[JLEN];
	uint32_t first, maxlen, start, pos, tid;
	uint8_t uuid[16];
	uint32_t seed;
	struct bdev *mem;
};

static void p32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static void p16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, 2);
}

static uint8_t *jblk(struct jw *w, uint32_t lblk)
{
	return w->dev + (size_t)(FS_BLOCKS + lblk) * w->bs;
}

static uint8_t *fsblk(struct jw *w, uint64_t blk)
{
	return w->dev + (size_t)blk * w->bs;
}

static uint32_t csum_zeroed(const struct jw *w, uint32_t seed, const uint8_t *b, uint32_t off,
			    uint32_t len)
{
	static const uint8_t z[4];
	uint32_t c = jbd2_crc32c(seed, b, off);

	c = jbd2_crc32c(c, z, 4);
	return jbd2_crc32c(c, b + off + 4, len - off - 4);
}

static uint32_t tag_bytes(const struct jw *w)
{
	if (w->csum == 3)
		return 16;
	return 8 + (w->csum == 2 ? 2 : 0) + (w->b64 ? 4 : 0);
}

/* v2/v3 blocks carry a crc32c tail; version 1 does not. */
static bool has_tail(const struct jw *w)
{
	return w->csum >= 2;
}

static uint32_t crc32_be_bitwise(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len--) {
		crc ^= (uint32_t)*p++ << 24;
		for (int k = 0; k < 8; k++)
			crc = crc & 0x80000000u ? (crc << 1) ^ 0x04c11db7u : crc << 1;
	}
	return crc;
}

/* Set w up over dev (FS_BLOCKS + JLEN blocks of bs bytes, zeroed here). */
static void jw_init_on(struct jw *w, uint32_t bs, int csum, bool b64, uint8_t *dev)
{
	memset(w, 0, sizeof(*w));
	w->bs = bs;
	w->csum = csum;
	w->b64 = b64;
	w->dev = dev;
	memset(w->dev, 0, (size_t)(FS_BLOCKS + JLEN) * bs);
	for (uint32_t i = 0; i < JLEN; i++)
		w->map[i] = FS_BLOCKS + i;
	w->first = 1;
	w->maxlen = JLEN;
	for (int i = 0; i < 16; i++)
		w->uuid[i] = (uint8_t)(0x40 + i * 7);
	w->seed = jbd2_crc32c(~0u, w->uuid, 16);
	w->crc1 = ~0u;
	/* the "file system" starts as a known pattern */
	for (uint32_t b = 0; b < FS_BLOCKS; b++)
		memset(fsblk(w, b), (int)(b & 0xff), bs);
}

static void jw_init(struct jw *w, uint32_t bs, int csum, bool b64)
{
	uint8_t *dev = malloc((size_t)(FS_BLOCKS + JLEN) * bs);

	assert_non_null(dev);
	jw_init_on(w, bs, csum, b64, dev);
}

static void jw_free(struct jw *w)
{
	free(w->dev);
	w->dev = NULL;
}

static void jw_sb(struct jw *w, uint32_t start, uint32_t seq)
{
	uint8_t *s = jblk(w, 0);
	uint32_t inc = JBD2_FEATURE_INCOMPAT_REVOKE;

	memset(s, 0, w->bs);
	p32(s, JBD2_MAGIC);
	p32(s + 4, JBD2_SUPERBLOCK_V2);
	p32(s + 0x0c, w->bs);
	p32(s + 0x10, w->maxlen);
	p32(s + 0x14, w->first);
	p32(s + 0x18, seq);
	p32(s + 0x1c, start);
	if (w->b64)
		inc |= JBD2_FEATURE_INCOMPAT_64BIT;
	if (w->csum == 1)
		p32(s + 0x24, JBD2_FEATURE_COMPAT_CHECKSUM);
	if (w->csum == 2)
		inc |= JBD2_FEATURE_INCOMPAT_CSUM_V2;
	if (w->csum == 3)
		inc |= JBD2_FEATURE_INCOMPAT_CSUM_V3;
	p32(s + 0x28, inc);
	memcpy(s + 0x30, w->uuid, 16);
	p32(s + 0x40, 1);
	if (has_tail(w)) {
		s[0x50] = 4;
		p32(s + 0xfc, csum_zeroed(w, ~0u, s, 0xfc, 1024));
	}
	w->start = start;
	w->pos = start;
	w->tid = seq;
}

static void jw_resign_sb(struct jw *w)
{
	uint8_t *s = jblk(w, 0);

	if (has_tail(w))
		p32(s + 0xfc, csum_zeroed(w, ~0u, s, 0xfc, 1024));
}

static uint32_t jw_next(struct jw *w)
{
	uint32_t p = w->pos;

	w->pos = w->pos + 1 == w->maxlen ? w->first : w->pos + 1;
	return p;
}

static void hdr(uint8_t *b, uint32_t type, uint32_t tid)
{
	p32(b, JBD2_MAGIC);
	p32(b + 4, type);
	p32(b + 8, tid);
}

static void sign_tail(struct jw *w, uint8_t *b)
{
	if (has_tail(w))
		p32(b + w->bs - 4, csum_zeroed(w, w->seed, b, w->bs - 4, w->bs));
}

/* The content transaction tid gives block blk (first word not the magic
 * unless magic_first). */
static void content(uint8_t *b, uint32_t bs, uint32_t tid, uint64_t blk, bool magic_first)
{
	for (uint32_t i = 0; i < bs; i++)
		b[i] = (uint8_t)(tid * 31 + blk * 7 + i);
	if (magic_first)
		p32(b, JBD2_MAGIC);
}

/* One descriptor block and its copies.  Returns the descriptor's journal
 * block. */
static uint32_t jw_blocks(struct jw *w, const uint64_t *blks, size_t n, const bool *magic)
{
	uint32_t dpos = jw_next(w), tb = tag_bytes(w), off = 12;
	uint8_t *d = jblk(w, dpos);
	uint8_t *data = malloc(w->bs);

	assert_non_null(data);
	memset(d, 0, w->bs);
	hdr(d, JBD2_DESCRIPTOR_BLOCK, w->tid);
	for (size_t i = 0; i < n; i++) {
		uint8_t *tag = d + off;
		uint16_t fl = i ? JBD2_FLAG_SAME_UUID : 0;
		bool m = magic && magic[i];
		uint32_t at = jw_next(w);
		uint8_t seq[4];
		uint32_t c;

		content(data, w->bs, w->tid, blks[i], m);
		if (m) {
			fl |= JBD2_FLAG_ESCAPE;
			memset(data, 0, 4);
		}
		if (i == n - 1)
			fl |= JBD2_FLAG_LAST_TAG;
		memcpy(jblk(w, at), data, w->bs);
		p32(tag, (uint32_t)blks[i]);
		if (w->b64)
			p32(tag + 8, (uint32_t)(blks[i] >> 32));
		p32(seq, w->tid);
		c = jbd2_crc32c(jbd2_crc32c(w->seed, seq, 4), data, w->bs);
		if (w->bad_tag_csum)
			c ^= 1;
		if (w->csum == 3) {
			p32(tag + 4, fl);
			p32(tag + 12, c);
		} else {
			p16(tag + 4, w->csum == 2 ? (uint16_t)c : 0);
			p16(tag + 6, fl);
		}
		off += tb;
		if (!i) {
			memcpy(d + off, w->uuid, 16);
			off += 16;
		}
		assert_true(off + tb <= w->bs - (has_tail(w) ? 4 : 0));
	}
	sign_tail(w, d);
	if (w->csum == 1) {
		w->crc1 = crc32_be_bitwise(w->crc1, d, w->bs);
		for (uint32_t i = 1; i <= n; i++)
			w->crc1 = crc32_be_bitwise(
			    w->crc1,
			    jblk(w, (dpos + i - w->first) % (w->maxlen - w->first) + w->first),
			    w->bs);
		if (w->bad_tag_csum)
			w->crc1 ^= 1;
	}
	free(data);
	return dpos;
}

static uint32_t jw_revoke(struct jw *w, const uint64_t *blks, size_t n)
{
	uint32_t p = jw_next(w), rl = w->b64 ? 8 : 4, off = 16;
	uint8_t *b = jblk(w, p);

	memset(b, 0, w->bs);
	hdr(b, JBD2_REVOKE_BLOCK, w->tid);
	for (size_t i = 0; i < n; i++, off += rl) {
		if (rl == 8) {
			p32(b + off, (uint32_t)(blks[i] >> 32));
			p32(b + off + 4, (uint32_t)blks[i]);
		} else {
			p32(b + off, (uint32_t)blks[i]);
		}
	}
	p32(b + 12, off);
	sign_tail(w, b);
	return p;
}

static uint32_t jw_commit(struct jw *w, uint64_t sec)
{
	uint32_t p = jw_next(w);
	uint8_t *b = jblk(w, p);

	memset(b, 0, w->bs);
	hdr(b, JBD2_COMMIT_BLOCK, w->tid);
	p32(b + 48, (uint32_t)(sec >> 32));
	p32(b + 52, (uint32_t)sec);
	if (w->csum == 1) {
		b[12] = 1;
		b[13] = 4;
		p32(b + 16, w->crc1);
		w->crc1 = ~0u;
	} else if (w->csum) {
		p32(b + 16, csum_zeroed(w, w->seed, b, 16, w->bs));
	}
	w->tid++;
	return p;
}

/* Open the journal on a memory device made from w->dev. */
static int jw_open(struct jw *w, struct jbd2 **j, char *err, size_t len)
{
	int r = bdev_mem_create(w->bs, 0, w->dev, (size_t)(FS_BLOCKS + JLEN) * w->bs, &w->mem);

	assert_int_equal(r, 0);
	r = jbd2_open(w->mem, w->map, JLEN, FS_BLOCKS, j, err, len);
	if (r) {
		bdev_destroy(w->mem);
		w->mem = NULL;
	}
	return r;
}

/* jw_open on mem, a memory device of the same size kept by the caller:
 * w's blocks are copied over all of it.  w->mem stays mem (for
 * mem_blk and expect_nothing_written) until the caller takes it back. */
static int jw_open_on(struct jw *w, struct bdev *mem, struct jbd2 **j, char *err, size_t len)
{
	memcpy(bdev_mem_data(mem), w->dev, (size_t)(FS_BLOCKS + JLEN) * w->bs);
	w->mem = mem;
	return jbd2_open(mem, w->map, JLEN, FS_BLOCKS, j, err, len);
}

static uint8_t *mem_blk(struct jw *w, uint64_t blk)
{
	return (uint8_t *)bdev_mem_data(w->mem) + (size_t)blk * w->bs;
}

static void jw_close(struct jw *w, struct jbd2 *j)
{
	jbd2_close(j);
	bdev_destroy(w->mem);
	w->mem = NULL;
}

static void expect_content(struct jw *w, uint64_t blk, uint32_t tid, bool magic)
{
	uint8_t *want = malloc(w->bs);

	assert_non_null(want);
	content(want, w->bs, tid, blk, magic);
	if (memcmp(mem_blk(w, blk), want, w->bs)) {
		fprintf(stderr, "# block %llu is not transaction %u's copy\n",
			(unsigned long long)blk, tid);
		fail();
	}
	free(want);
}

static void expect_untouched(struct jw *w, uint64_t blk)
{
	const uint8_t *b = mem_blk(w, blk);

	for (uint32_t i = 0; i < w->bs; i++)
		if (b[i] != (uint8_t)(blk & 0xff)) {
			fprintf(stderr, "# block %llu was written\n", (unsigned long long)blk);
			fail();
		}
}

/* Nothing of the file system changed, and the journal neither. */
static void expect_nothing_written(struct jw *w)
{
	if (memcmp(bdev_mem_data(w->mem), w->dev, (size_t)(FS_BLOCKS + JLEN) * w->bs)) {
		fprintf(stderr, "# the device changed\n");
		fail();
	}
}

/* ---- well-formed journals ------------------------------------------------ */

static const struct {
	uint32_t bs;
	int csum;
	bool b64;
} formats[] = {
    {1024, 0, false}, {1024, 0, true}, {1024, 1, false}, {1024, 2, false}, {1024, 2, true},
    {1024, 3, false}, {1024, 3, true}, {4096, 0, false}, {4096, 1, true},  {4096, 3, true},
};

static void test_replay_formats(void **state)
{
	(void)state;
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
		struct jw w;
		struct jbd2 *j;
		struct jbd2_recovery rec;
		char err[200];
		uint64_t t1[] = {10, 11, 12}, t2[] = {11, 13}, t3[] = {14};
		bool m1[] = {false, false, true};

		jw_init(&w, formats[f].bs, formats[f].csum, formats[f].b64);
		jw_sb(&w, 5, 100);
		jw_blocks(&w, t1, 3, m1);
		jw_commit(&w, 1000);
		jw_blocks(&w, t2, 2, NULL);
		jw_commit(&w, 1001);
		/* a transaction whose commit never reached the disk */
		jw_blocks(&w, t3, 1, NULL);
		assert_int_equal(jw_open(&w, &j, err, sizeof(err)), 0);
		assert_false(jbd2_is_empty(j));
		assert_int_equal(jbd2_recover(j, &rec, err, sizeof(err)), 0);
		assert_int_equal(rec.first_tid, 100);
		assert_int_equal(rec.end_tid, 102);
		assert_int_equal(rec.blocks, 5);
		expect_content(&w, 10, 100, false);
		expect_content(&w, 11, 101, false); /* the later copy wins */
		expect_content(&w, 12, 100, true);  /* escaped copy restored */
		expect_content(&w, 13, 101, false);
		expect_untouched(&w, 14);
		expect_untouched(&w, 9);
		assert_true(jbd2_is_empty(j));
		assert_int_equal(jbd2_sequence(j), 103);
		jw_close(&w, j);
		jw_free(&w);
	}
}

static void test_replay_persists_empty_log(void **state)
{
	struct jw w;
	struct jbd2 *j, *j2;
	struct jbd2_recovery rec;
	char err[200];
	uint64_t t1[] = {3};
	struct bdev *mem;

	(void)state;
	jw_init(&w, 1024, 3, false);
	jw_sb(&w, 1, 7);
	jw_blocks(&w, t1, 1, NULL);
	jw_commit(&w, 5);
	assert_int_equal(jw_open(&w, &j, err, sizeof(err)), 0);
	assert_int_equal(jbd2_recover(j, &rec, err, sizeof(err)), 0);
	mem = w.mem;
	/* reopen the same device: the superblock was rewritten with a good
	 * checksum, an empty log and sequence 9 */
	assert_int_equal(jbd2_open(mem, w.map, JLEN, FS_BLOCKS, &j2, err, sizeof(err)), 0);
	assert_true(jbd2_is_empty(j2));
	assert_int_equal(jbd2_sequence(j2), 9);
	assert_int_equal(jbd2_check(j2, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.blocks, 0);
	jbd2_close(j2);
	jw_close(&w, j);
	jw_free(&w);
}

static void test_empty_journal(void **state)
{
	struct jw w;
	struct jbd2 *j;
	struct jbd2_recovery rec;
	char err[200];

	(void)state;
	jw_init(&w, 1024, 0, false);
	jw_sb(&w, 0, 42);
	assert_int_equal(jw_open(&w, &j, err, sizeof(err)), 0);
	assert_true(jbd2_is_empty(j));
	assert_int_equal(jbd2_recover(j, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.blocks, 0);
	assert_int_equal(jbd2_sequence(j), 43);
	for (uint32_t b = 0; b < FS_BLOCKS; b++)
		expect_untouched(&w, b);
	jw_close(&w, j);
	jw_free(&w);
}

static void test_revoke(void **state)
{
	(void)state;
	for (int b64 = 0; b64 < 2; b64++) {
		struct jw w;
		struct jbd2 *j;
		struct jbd2_recovery rec;
		char err[200];
		uint64_t a[] = {20, 21, 22}, r20[] = {20, 21}, b[] = {21}, c[] = {22}, rc[] = {22};

		jw_init(&w, 1024, b64 ? 3 : 0, b64);
		jw_sb(&w, 1, 1);
		jw_blocks(&w, a, 3, NULL); /* tid 1 */
		jw_commit(&w, 1);
		jw_revoke(&w, r20, 2);	   /* tid 2 revokes 20 and 21 ... */
		jw_blocks(&w, b, 1, NULL); /* ... and writes 21 again */
		jw_commit(&w, 2);
		jw_blocks(&w, c, 1, NULL); /* tid 3 writes 22 and revokes it */
		jw_revoke(&w, rc, 1);
		jw_commit(&w, 3);
		assert_int_equal(jw_open(&w, &j, err, sizeof(err)), 0);
		assert_int_equal(jbd2_recover(j, &rec, err, sizeof(err)), 0);
		assert_int_equal(rec.revokes, 3);
		/* revoked by the same or a later transaction: skipped */
		expect_untouched(&w, 20);
		expect_untouched(&w, 22);
		/* 21: tid 1's copy revoked by tid 2, and tid 2's own copy
		 * too (same transaction) */
		expect_untouched(&w, 21);
		assert_int_equal(rec.blocks, 0);
		assert_int_equal(rec.revoked, 5);
		jw_close(&w, j);
		jw_free(&w);
	}
}

static void test_revoke_then_rewrite(void **state)
{
	struct jw w;
	struct jbd2 *j;
	struct jbd2_recovery rec;
	char err[200];
	uint64_t a[] = {30}, r[] = {30};

	(void)state;
	jw_init(&w, 1024, 2, false);
	jw_sb(&w, 1, 50);
	jw_revoke(&w, r, 1); /* tid 50 revokes 30 */
	jw_commit(&w, 1);
	jw_blocks(&w, a, 1, NULL); /* tid 51 writes it: not revoked */
	jw_commit(&w, 2);
	assert_int_equal(jw_open(&w, &j, err, sizeof(err)), 0);
	assert_int_equal(jbd2_recover(j, &rec, err, sizeof(err)), 0);
	expect_content(&w, 30, 51, false);
	jw_close(&w, j);
	jw_free(&w);
}

static void test_wrap(void **state)
{
	(void)state;
	for (int csum = 0; csum <= 3; csum += 3) {
		struct jw w;
		struct jbd2 *j;
		struct jbd2_recovery rec;
		char err[200];
		uint64_t a[] = {40, 41, 42, 43, 44}, b[] = {45, 41};

		jw_init(&w, 1024, csum, false);
		/* the first transaction straddles the journal's end */
		jw_sb(&w, JLEN - 3, 0xfffffffeu);
		jw_blocks(&w, a, 5, NULL);
		jw_commit(&w, 10);
		jw_blocks(&w, b, 2, NULL);
		jw_commit(&w, 11);
		assert_int_equal(w.tid, 0); /* the number wrapped too */
		assert_int_equal(jw_open(&w, &j, err, sizeof(err)), 0);
		assert_int_equal(jbd2_recover(j, &rec, err, sizeof(err)), 0);
		assert_int_equal(rec.end_tid, 0);
		for (int i = 0; i < 5; i++)
			if (a[i] != 41)
				expect_content(&w, a[i], 0xfffffffeu, false);
		expect_content(&w, 41, 0xffffffffu, false);
		expect_content(&w, 45, 0xffffffffu, false);
		assert_int_equal(jbd2_sequence(j), 1);
		jw_close(&w, j);
		jw_free(&w);
	}
}

/* A log that ends with the remains of an older one: sequence numbers stop
 * matching, nothing more is replayed. */
static void test_stale_tail(void **state)
{
	struct jw w;
	struct jbd2 *j;
	struct jbd2_recovery rec;
	char err[200];
	uint64_t a[] = {50}, old[] = {51};

	(void)state;
	jw_init(&w, 1024, 0, false);
	jw_sb(&w, 1, 9);
	jw_blocks(&w, old, 1, NULL); /* old transactions 9 and 10 */
	jw_commit(&w, 1);
	jw_blocks(&w, old, 1, NULL);
	jw_commit(&w, 2);
	jw_sb(&w, 1, 20); /* the log was reused from block 1 as 20 */
	jw_blocks(&w, a, 1, NULL);
	jw_commit(&w, 3);
	assert_int_equal(jw_open(&w, &j, err, sizeof(err)), 0);
	assert_int_equal(jbd2_recover(j, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.end_tid, 21);
	expect_content(&w, 50, 20, false);
	expect_untouched(&w, 51);
	jw_close(&w, j);
	jw_free(&w);
}

/* ---- corrupt journals: refused, nothing written ---------------------------- */

static void expect_refused(struct jw *w, int want, const char *words)
{
	struct jbd2 *j;
	struct jbd2_recovery rec;
	char err[200] = "";
	int r = jw_open(w, &j, err, sizeof(err));

	if (!r) {
		r = jbd2_recover(j, &rec, err, sizeof(err));
		expect_nothing_written(w);
		jbd2_close(j);
		bdev_destroy(w->mem);
		w->mem = NULL;
	}
	if (r != want || !strstr(err, words)) {
		fprintf(stderr, "# got %d '%s', want %d '%s'\n", r, err, want, words);
		fail();
	}
}

static void good_two(struct jw *w, int csum)
{
	uint64_t a[] = {60, 61}, b[] = {62};

	jw_init(w, 1024, csum, false);
	jw_sb(w, 1, 1);
	jw_blocks(w, a, 2, NULL);
	jw_commit(w, 100);
	jw_blocks(w, b, 1, NULL);
	jw_commit(w, 101);
}

static void test_bad_superblocks(void **state)
{
	struct jw w;

	(void)state;
	good_two(&w, 0);
	p32(jblk(&w, 0), 0x12345678);
	expect_refused(&w, -EUCLEAN, "bad journal superblock");
	jw_free(&w);

	good_two(&w, 0);
	p32(jblk(&w, 0) + 0x0c, 4096);
	expect_refused(&w, -EUCLEAN, "block size 4096 differs");
	jw_free(&w);

	good_two(&w, 0);
	p32(jblk(&w, 0) + 0x10, JLEN + 1);
	expect_refused(&w, -EUCLEAN, "but the journal has");
	jw_free(&w);

	good_two(&w, 0);
	p32(jblk(&w, 0) + 0x14, 0);
	expect_refused(&w, -EUCLEAN, "first log block");
	jw_free(&w);

	good_two(&w, 0);
	p32(jblk(&w, 0) + 0x1c, JLEN);
	expect_refused(&w, -EUCLEAN, "log start");
	jw_free(&w);

	good_two(&w, 3);
	jblk(&w, 0)[0x60] ^= 1; /* a byte the checksum covers */
	expect_refused(&w, -EUCLEAN, "superblock checksum");
	jw_free(&w);

	good_two(&w, 0);
	p32(jblk(&w, 0) + 0x28, JBD2_FEATURE_INCOMPAT_REVOKE | 0x400);
	expect_refused(&w, -EOPNOTSUPP, "unknown journal feature 0x400");
	jw_free(&w);

	good_two(&w, 0);
	p32(jblk(&w, 0) + 0x28, JBD2_FEATURE_INCOMPAT_ASYNC);
	expect_refused(&w, -EOPNOTSUPP, "async_commit");
	jw_free(&w);

	good_two(&w, 3);
	p32(jblk(&w, 0) + 0x24, JBD2_FEATURE_COMPAT_CHECKSUM);
	jw_resign_sb(&w);
	expect_refused(&w, -EUCLEAN, "checksum versions 1 and 3");
	jw_free(&w);
}

static void test_tag_outside_fs(void **state)
{
	(void)state;
	for (int b64 = 0; b64 < 2; b64++) {
		struct jw w;
		uint64_t a[] = {70}, b[] = {b64 ? (1ull << 32) + 5 : FS_BLOCKS};

		jw_init(&w, 1024, 0, b64);
		jw_sb(&w, 1, 1);
		jw_blocks(&w, a, 1, NULL);
		jw_commit(&w, 1);
		jw_blocks(&w, b, 1, NULL);
		jw_commit(&w, 2);
		/* the first transaction is fine, but nothing may be written */
		expect_refused(&w, -EUCLEAN, "outside the file system");
		jw_free(&w);
	}
}

static void test_bad_checksums(void **state)
{
	struct jw w;
	uint64_t a[] = {80};

	(void)state;
	/* a data copy whose tag checksum does not match */
	for (int csum = 2; csum <= 3; csum++) {
		jw_init(&w, 1024, csum, false);
		jw_sb(&w, 1, 1);
		w.bad_tag_csum = true;
		jw_blocks(&w, a, 1, NULL);
		jw_commit(&w, 1);
		expect_refused(&w, -EUCLEAN, "checksum mismatch in the copy");
		jw_free(&w);
	}
	/* version 1: a copy that does not match the transaction's sum */
	good_two(&w, 1);
	jblk(&w, 6)[10] ^= 1; /* tid 2's copy (1 d,2,3 c4, d5,6 c7) */
	expect_refused(&w, -EUCLEAN, "transaction checksum mismatch");
	jw_free(&w);

	/* a commit block with a bad checksum after a good transaction */
	good_two(&w, 3);
	jblk(&w, 7)[100] ^= 1; /* tid 2's commit block (1 d,2,3 c4, d5,6 c7) */
	expect_refused(&w, -EUCLEAN, "commit block checksum");
	jw_free(&w);

	/* a descriptor block with a bad checksum in a transaction that
	 * commits later than the last: corruption, refused */
	good_two(&w, 3);
	jblk(&w, 5)[200] ^= 1;
	expect_refused(&w, -EUCLEAN, "block checksum mismatch");
	jw_free(&w);
}

/* A descriptor with a bad checksum followed by a commit older than the
 * last good one: stale blocks, the log ends before them. */
static void test_stale_bad_descriptor(void **state)
{
	struct jw w;
	struct jbd2 *j;
	struct jbd2_recovery rec;
	char err[200];
	uint64_t a[] = {90}, b[] = {91};
	uint32_t d;

	(void)state;
	jw_init(&w, 1024, 3, false);
	jw_sb(&w, 1, 1);
	jw_blocks(&w, a, 1, NULL);
	jw_commit(&w, 500);
	d = jw_blocks(&w, b, 1, NULL);
	jw_commit(&w, 400);
	jblk(&w, d)[300] ^= 1;
	assert_int_equal(jw_open(&w, &j, err, sizeof(err)), 0);
	assert_int_equal(jbd2_recover(j, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.end_tid, 2);
	expect_content(&w, 90, 1, false);
	expect_untouched(&w, 91);
	jw_close(&w, j);
	jw_free(&w);
}

/* A commit block that never made it (a torn transaction): the earlier
 * transactions are replayed, the torn one is not. */
static void test_truncated_commit(void **state)
{
	struct jw w;
	struct jbd2 *j;
	struct jbd2_recovery rec;
	char err[200];

	(void)state;
	good_two(&w, 3);
	memset(jblk(&w, 7), 0, w.bs);
	assert_int_equal(jw_open(&w, &j, err, sizeof(err)), 0);
	assert_int_equal(jbd2_recover(j, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.end_tid, 2);
	expect_content(&w, 60, 1, false);
	expect_content(&w, 61, 1, false);
	expect_untouched(&w, 62);
	jw_close(&w, j);
	jw_free(&w);
}

static void test_revoke_count_too_large(void **state)
{
	struct jw w;
	uint64_t r[] = {5};
	uint32_t p;

	(void)state;
	jw_init(&w, 1024, 0, false);
	jw_sb(&w, 1, 1);
	p = jw_revoke(&w, r, 1);
	p32(jblk(&w, p) + 12, 5000);
	jw_commit(&w, 1);
	expect_refused(&w, -EUCLEAN, "revoke block");
	jw_free(&w);
}

/* Descriptors that chain into themselves around the whole journal, never
 * committing: the walk must stop. */
static void test_endless_log(void **state)
{
	struct jw w;
	uint64_t a[] = {1};

	(void)state;
	jw_init(&w, 1024, 0, false);
	w.first = 2; /* an even number of log blocks: pairs fill it */
	jw_sb(&w, 2, 1);
	do
		jw_blocks(&w, a, 1, NULL);
	while (w.pos != 2);
	expect_refused(&w, -EUCLEAN, "runs past its own start");
	jw_free(&w);
}

/* Random corruption of a valid journal: every outcome is a clean refusal
 * with nothing written, or a replay that writes only file system blocks
 * (never the journal but its superblock, never past FS_BLOCKS). */
static void test_random_flips(void **state)
{
	uint64_t seed = e2t_seed("JBD2_SEED", 20261204);
	long rounds = e2t_env_long("JBD2_FLIPS", 3000);
	struct e2t_rng rng;
	unsigned refused = 0, replayed = 0;

	/* One journal buffer and one device per block size, used again in
	 * every round (each round writes all of both first): a fresh device
	 * each round cost more than the rest of the round, every page
	 * touched for the first time (and under ASan mapped anew). */
	struct {
		uint8_t *dev;
		struct bdev *mem;
	} kept[2] = {{NULL, NULL}, {NULL, NULL}};

	(void)state;
	for (int kb = 0; kb < 2; kb++) {
		uint32_t bs = kb ? 4096 : 1024;

		kept[kb].dev = malloc((size_t)(FS_BLOCKS + JLEN) * bs);
		assert_non_null(kept[kb].dev);
		assert_int_equal(bdev_mem_create(bs, FS_BLOCKS + JLEN, NULL, 0, &kept[kb].mem), 0);
	}
	e2t_rng_seed(&rng, seed);
	fprintf(stderr, "# JBD2_SEED=%llu JBD2_FLIPS=%ld\n", (unsigned long long)seed, rounds);
	for (long i = 0; i < rounds; i++) {
		int f = (int)e2t_rng_below(&rng, sizeof(formats) / sizeof(formats[0]));
		int kb = formats[f].bs == 4096;
		struct jw w;
		struct jbd2 *j;
		struct jbd2_recovery rec;
		char err[200];
		uint64_t a[] = {100, 101, 102}, b[] = {101, 103}, r[] = {100};
		int n, ret;

		assert_true(formats[f].bs == 1024 || formats[f].bs == 4096);
		jw_init_on(&w, formats[f].bs, formats[f].csum, formats[f].b64, kept[kb].dev);
		jw_sb(&w, (uint32_t)(JLEN - 1 - e2t_rng_below(&rng, 4)), 77);
		jw_blocks(&w, a, 3, NULL);
		jw_commit(&w, 1);
		jw_revoke(&w, r, 1);
		jw_blocks(&w, b, 2, NULL);
		jw_commit(&w, 2);
		n = 1 + (int)e2t_rng_below(&rng, 8);
		for (int k = 0; k < n; k++) {
			/* a journal block of the log (or the superblock), and
			 * a byte in its first 64 or anywhere */
			uint32_t lb = (uint32_t)e2t_rng_below(&rng, 10);
			uint32_t jb = lb == 0 ? 0 : (uint32_t)((JLEN - 5 + lb) % (JLEN - 1)) + 1;
			uint32_t off =
			    (uint32_t)(e2t_rng_below(&rng, 2) ? e2t_rng_below(&rng, 64)
							      : e2t_rng_below(&rng, w.bs));

			jblk(&w, jb)[off] ^= (uint8_t)(1u << e2t_rng_below(&rng, 8));
			if (jb == 0 && e2t_rng_below(&rng, 2))
				jw_resign_sb(&w);
		}
		ret = jw_open_on(&w, kept[kb].mem, &j, err, sizeof(err));
		if (ret) {
			assert_true(ret == -EUCLEAN || ret == -EOPNOTSUPP);
			refused++;
			continue;
		}
		ret = jbd2_recover(j, &rec, err, sizeof(err));
		if (ret) {
			assert_true(ret == -EUCLEAN || ret == -EOPNOTSUPP);
			expect_nothing_written(&w);
			refused++;
		} else {
			/* the journal itself: only its superblock may change */
			assert_memory_equal(mem_blk(&w, FS_BLOCKS + 1), jblk(&w, 1),
					    (size_t)(JLEN - 1) * w.bs);
			replayed++;
		}
		jbd2_close(j);
	}
	for (int kb = 0; kb < 2; kb++) {
		bdev_destroy(kept[kb].mem);
		free(kept[kb].dev);
	}
	fprintf(stderr, "# %u refused, %u replayed\n", refused, replayed);
	assert_true(refused > 0 && replayed > 0);
}

/* The checksums the writer uses, against their published check values
 * ("123456789": CRC-32/MPEG-2 is 0x0376e6e7; CRC-32C is 0xe3069283 after
 * its final inversion, which the journal does not do) and against the
 * bitwise form above. */
static void test_checksum_functions(void **state)
{
	static const uint8_t nine[] = "123456789";
	uint8_t blk[1024];

	(void)state;
	assert_int_equal(jbd2_crc32_be(~0u, nine, 9), 0x0376e6e7u);
	assert_int_equal(jbd2_crc32c(~0u, nine, 9), ~0xe3069283u);
	for (size_t i = 0; i < sizeof(blk); i++)
		blk[i] = (uint8_t)(i * 7 + 3);
	assert_int_equal(jbd2_crc32_be(~0u, blk, sizeof(blk)),
			 crc32_be_bitwise(~0u, blk, sizeof(blk)));
	/* the superblock sum counts s_checksum as zero */
	p32(blk + 0xfc, 0);
	{
		uint32_t c = jbd2_crc32c(~0u, blk, sizeof(blk));

		p32(blk + 0xfc, 0xdeadbeef);
		assert_int_equal(jbd2_sb_csum(blk), c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replay_formats),
	    cmocka_unit_test(test_replay_persists_empty_log),
	    cmocka_unit_test(test_empty_journal),
	    cmocka_unit_test(test_revoke),
	    cmocka_unit_test(test_revoke_then_rewrite),
	    cmocka_unit_test(test_wrap),
	    cmocka_unit_test(test_stale_tail),
	    cmocka_unit_test(test_bad_superblocks),
	    cmocka_unit_test(test_tag_outside_fs),
	    cmocka_unit_test(test_bad_checksums),
	    cmocka_unit_test(test_stale_bad_descriptor),
	    cmocka_unit_test(test_truncated_commit),
	    cmocka_unit_test(test_revoke_count_too_large),
	    cmocka_unit_test(test_endless_log),
	    cmocka_unit_test(test_random_flips),
	    cmocka_unit_test(test_checksum_functions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
