/* Unit tests of the patch engine and cache: ordering on the recorder log,
 * hard patches and merging, faults, eviction, dirty limits, scopes. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "bdev/bdev.h"
#include "crash/crashsim.h"
#include "engine/cache.h"

#define BS   512
#define NBLK 64

struct env {
	struct bdev *mem, *rec;
	struct cache *c;
};

static void env_open(struct env *e, const struct cache_opts *o)
{
	memset(e, 0, sizeof(*e));
	assert_int_equal(bdev_mem_create(BS, NBLK, NULL, 0, &e->mem), 0);
	assert_int_equal(bdev_recorder_create(e->mem, &e->rec), 0);
	assert_int_equal(cache_create(e->rec, o, &e->c), 0);
}

static void env_close(struct env *e)
{
	cache_destroy(e->c);
	bdev_destroy(e->rec); /* destroys mem too */
}

static struct cblock *get(struct env *e, uint64_t n)
{
	struct cblock *b;

	assert_int_equal(cache_get(e->c, n, &b), 0);
	return b;
}

static struct patch *put_byte(struct env *e, struct cblock *b, uint32_t off, uint8_t v,
			      uint32_t len, struct patch *const *deps, size_t nd)
{
	uint8_t buf[BS];
	struct patch *p;

	memset(buf, v, len);
	assert_int_equal(patch_create_byte(e->c, b, off, len, buf, deps, nd, NULL, &p), 0);
	return p;
}

static const uint8_t *mem_block(struct env *e, uint64_t n)
{
	return (const uint8_t *)bdev_mem_data(e->mem) + n * BS;
}

static void assert_device_equals_cache(struct env *e)
{
	for (uint64_t n = 0; n < NBLK; n++) {
		struct cblock *b = get(e, n);

		assert_memory_equal(cblock_data(b), mem_block(e, n), BS);
		cache_put(e->c, b);
	}
}

static struct cache_stats stats(struct env *e)
{
	struct cache_stats st;

	cache_get_stats(e->c, &st);
	return st;
}

/* The writes so far took these rounds, block writes and rollback writes,
 * and left the device as the cache. */
static void assert_writes(struct env *e, uint64_t rounds, uint64_t writes, uint64_t rolled)
{
	struct cache_stats st = stats(e);

	assert_int_equal(st.rounds, rounds);
	assert_int_equal(st.block_writes, writes);
	assert_int_equal(st.rollback_writes, rolled);
	assert_device_equals_cache(e);
}

/* Release the np patches of p and put the nb blocks of b, then close e. */
static void env_done(struct env *e, struct patch **p, size_t np, struct cblock **b, size_t nb)
{
	size_t i;

	for (i = 0; i < np; i++)
		patch_release(e->c, p[i]);
	for (i = 0; i < nb; i++)
		cache_put(e->c, b[i]);
	env_close(e);
}

/* ---- tests ------------------------------------------------------------- */

static void test_basic_write_and_sync(void **state)
{
	struct env e;
	struct cblock *b;
	struct patch *p;

	env_open(&e, NULL);
	b = get(&e, 3);
	p = put_byte(&e, b, 10, 0xab, 20, NULL, 0);
	assert_false(patch_committed(p));
	assert_int_equal(mem_block(&e, 3)[10], 0);
	assert_int_equal(stats(&e).blocks_dirty, 1);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(p));
	assert_int_equal(mem_block(&e, 3)[10], 0xab);
	assert_int_equal(mem_block(&e, 3)[29], 0xab);
	assert_int_equal(mem_block(&e, 3)[30], 0);
	assert_int_equal(stats(&e).blocks_dirty, 0);
	/* committed and still referenced: alive until released */
	assert_int_equal(stats(&e).patches_byte, 1);
	patch_release(e.c, p);
	assert_int_equal(stats(&e).patches_byte, 0);
	assert_int_equal(stats(&e).engine_bytes, 0);
	cache_put(e.c, b);
	assert_int_equal(cache_get(e.c, NBLK, &b), -EINVAL);
	env_close(&e);
}

static void test_bad_arguments(void **state)
{
	struct env e;
	struct cblock *b;
	uint8_t x = 1;

	env_open(&e, NULL);
	b = get(&e, 0);
	assert_int_equal(patch_create_byte(e.c, b, BS, 1, &x, NULL, 0, NULL, NULL), -EINVAL);
	assert_int_equal(patch_create_byte(e.c, b, BS - 1, 2, &x, NULL, 0, NULL, NULL), -EINVAL);
	assert_int_equal(patch_create_byte(e.c, b, 0, 0, &x, NULL, 0, NULL, NULL), -EINVAL);
	assert_int_equal(patch_create_bit(e.c, b, 2, 1, NULL, 0, NULL, NULL), -EINVAL);
	assert_int_equal(patch_create_bit(e.c, b, BS, 1, NULL, 0, NULL, NULL), -EINVAL);
	assert_int_equal(stats(&e).blocks_dirty, 0);
	cache_put(e.c, b);
	env_close(&e);
}

/* Find the index of the next REC_WRITE of blkno at or after i. */
static size_t next_write(struct bdev *rec, size_t i, uint64_t blkno)
{
	size_t n = bdev_recorder_count(rec);

	for (; i < n; i++) {
		const struct rec_event *ev = bdev_recorder_event(rec, i);

		if (ev->kind == REC_WRITE && ev->blkno == blkno)
			return i;
	}
	return SIZE_MAX;
}

static bool barrier_between(struct bdev *rec, size_t a, size_t b)
{
	for (size_t i = a + 1; i < b; i++)
		if (bdev_recorder_event(rec, i)->kind == REC_BARRIER)
			return true;
	return false;
}

/* The article's example: A and C on block 1, B on block 2, C -> B -> A.
 * Block 1 must be written twice: first with A and without C, then (after
 * B is durable) with C. */
static void test_article_block_cycle(void **state)
{
	struct env e;
	struct cblock *b1, *b2;
	struct patch *a, *b, *cc;
	size_t w1, w2, w3;
	const struct rec_event *ev;

	env_open(&e, NULL);
	b1 = get(&e, 1);
	b2 = get(&e, 2);
	a = put_byte(&e, b1, 0, 0xaa, 8, NULL, 0);
	b = put_byte(&e, b2, 0, 0xbb, 8, &a, 1);
	cc = put_byte(&e, b1, 100, 0xcc, 8, &b, 1);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(cc));

	w1 = next_write(e.rec, 0, 1);
	w2 = next_write(e.rec, 0, 2);
	assert_true(w1 < w2);
	w3 = next_write(e.rec, w1 + 1, 1);
	assert_true(w2 < w3 && w3 != SIZE_MAX);
	assert_true(barrier_between(e.rec, w1, w2));
	assert_true(barrier_between(e.rec, w2, w3));
	/* first write of block 1: A's bytes, C rolled back */
	ev = bdev_recorder_event(e.rec, w1);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(((const uint8_t *)ev->data)[i], 0xaa);
		assert_int_equal(((const uint8_t *)ev->data)[100 + i], 0);
	}
	ev = bdev_recorder_event(e.rec, w2);
	assert_int_equal(((const uint8_t *)ev->data)[0], 0xbb);
	ev = bdev_recorder_event(e.rec, w3);
	assert_int_equal(((const uint8_t *)ev->data)[0], 0xaa);
	assert_int_equal(((const uint8_t *)ev->data)[100], 0xcc);
	assert_int_equal(((const uint8_t *)ev->data)[107], 0xcc);
	assert_int_equal(next_write(e.rec, w3 + 1, 1), SIZE_MAX);
	assert_int_equal(stats(&e).rollback_writes, 1);
	patch_release(e.c, a);
	patch_release(e.c, b);
	patch_release(e.c, cc);
	cache_put(e.c, b1);
	cache_put(e.c, b2);
	env_close(&e);
}

/* X (block 1) has x0 and x1, x1 waiting for y1 (block 2); Y has y1 and y2,
 * y2 waiting for z1 (block 3), which waits for x0.  Both X and Y need a
 * rollback in the first of the flusher's rounds, but what X rolls back
 * waits only for Y's write in that round: X is put off and written once,
 * whole, while Y, whose rollback waits for a block not yet writable, goes
 * at once.  (A sync does not put X off: x0 heads the longest chain, so it
 * would cost a round; see test_sync_keeps_rounds_of_chain_head.) */
static void test_defer_block_waiting_on_round(void **state)
{
	struct env e;
	struct cblock *bx, *by, *bz;
	struct patch *x0, *x1, *y1, *y2, *z1;
	size_t w, n = 0, nw;

	env_open(&e, NULL);
	bx = get(&e, 1);
	by = get(&e, 2);
	bz = get(&e, 3);
	x0 = put_byte(&e, bx, 0, 0x10, 8, NULL, 0);
	y1 = put_byte(&e, by, 0, 0x21, 8, NULL, 0);
	x1 = put_byte(&e, bx, 100, 0x11, 8, &y1, 1);
	z1 = put_byte(&e, bz, 0, 0x31, 8, &x0, 1);
	y2 = put_byte(&e, by, 100, 0x22, 8, &z1, 1);
	do
		assert_int_equal(cache_flush_round(e.c, &nw), 0);
	while (nw > 0);
	assert_true(patch_committed(x1) && patch_committed(y2));
	for (w = next_write(e.rec, 0, 1); w != SIZE_MAX; w = next_write(e.rec, w + 1, 1))
		n++;
	assert_int_equal(n, 1);
	assert_writes(&e, 4, 4, 1); /* Y's first write rolled back */
	env_done(&e, (struct patch *[]){x0, x1, y1, y2, z1}, 5, (struct cblock *[]){bx, by, bz}, 3);
}

/* The same blocks under a sync.  x0 heads the longest chain (x0 <- z1 <-
 * y2, three rounds), so X goes at once with x1 rolled back; Y, whose y1
 * only x1 waits for, has a round of slack and is put off, then goes with
 * y2 rolled back when it has none left.  Three rounds, as the chain
 * needs, where putting X off for a whole write took four. */
static void test_sync_keeps_rounds_of_chain_head(void **state)
{
	struct env e;
	struct cblock *bx, *by, *bz;
	struct patch *x0, *x1, *y1, *y2, *z1;

	env_open(&e, NULL);
	bx = get(&e, 1);
	by = get(&e, 2);
	bz = get(&e, 3);
	x0 = put_byte(&e, bx, 0, 0x10, 8, NULL, 0);
	y1 = put_byte(&e, by, 0, 0x21, 8, NULL, 0);
	x1 = put_byte(&e, bx, 100, 0x11, 8, &y1, 1);
	z1 = put_byte(&e, bz, 0, 0x31, 8, &x0, 1);
	y2 = put_byte(&e, by, 100, 0x22, 8, &z1, 1);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(x1) && patch_committed(y2));
	assert_true(barrier_between(e.rec, next_write(e.rec, 0, 1), next_write(e.rec, 0, 2)));
	assert_writes(&e, 3, 5, 2);
	env_done(&e, (struct patch *[]){x0, x1, y1, y2, z1}, 5, (struct cblock *[]){bx, by, bz}, 3);
}

/* The start of the slack tests below: a chain x0 (block 1) <- y0 (block
 * 2) <- z0 (block 3), and l0 on block 4, which waits for nothing (a hard
 * patch); b and p get the blocks and x0, y0, z0, l0. */
static void sync_chain(struct env *e, struct cblock **b, struct patch **p)
{
	for (int i = 0; i < 4; i++)
		b[i] = get(e, (uint64_t)i + 1);
	p[0] = put_byte(e, b[0], 0, 0x10, 8, NULL, 0);
	p[1] = put_byte(e, b[1], 0, 0x20, 8, &p[0], 1);
	p[2] = put_byte(e, b[2], 0, 0x30, 8, &p[1], 1);
	p[3] = put_byte(e, b[3], 0, 0x40, 8, NULL, 0);
}

/* A sync of a chain x0 (block 1) <- y0 (block 2) <- z0 (block 3), with
 * block 4 holding l0, which waits for nothing (a hard patch), and l1,
 * which waits for z0.  In the first round block 4 could go with l1
 * rolled back, but nothing waits for its write and l1 waits for a block
 * not yet writable: it is put off until z0 is on disk and written once,
 * whole, in the round that would have written it again anyway. */
static void test_sync_defers_block_nothing_waits_for(void **state)
{
	struct env e;
	struct cblock *b[4];
	struct patch *p[4], *l1;
	size_t w, n = 0;

	env_open(&e, NULL);
	sync_chain(&e, b, p);
	l1 = put_byte(&e, b[3], 100, 0x41, 8, &p[2], 1);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(p[3]) && patch_committed(l1));
	for (w = next_write(e.rec, 0, 4); w != SIZE_MAX; w = next_write(e.rec, w + 1, 4))
		n++;
	assert_int_equal(n, 1);
	w = next_write(e.rec, 0, 4);
	assert_true(next_write(e.rec, 0, 3) < w);
	assert_true(barrier_between(e.rec, next_write(e.rec, 0, 3), w));
	assert_writes(&e, 4, 4, 0); /* as many rounds as the chain needs */
	env_done(&e, (struct patch *[]){p[0], p[1], p[2], p[3], l1}, 5,
		 (struct cblock *[]){b[0], b[1], b[2], b[3]}, 4);
}

/* Whether the writes at event indices a and b went in one round. */
static bool same_round(struct bdev *rec, size_t a, size_t b)
{
	return a < b ? !barrier_between(rec, a, b) : !barrier_between(rec, b, a);
}

/* The same, but with w0 (block 5) waiting for l0: block 4's write holds
 * up block 5, but the chain x0 <- y0 <- z0 <- l1 needs four rounds and
 * w0 only two, so block 4 is put off while that leaves the sync no
 * longer.  In the third round it can wait no more: it goes with l1 rolled
 * back, and again with l1 and w0 in the fourth. */
static void test_sync_writes_block_others_wait_for(void **state)
{
	struct env e;
	struct cblock *b[4], *bw;
	struct patch *p[4], *l1, *w0;
	size_t w, n = 0;

	env_open(&e, NULL);
	bw = get(&e, 5);
	sync_chain(&e, b, p);
	l1 = put_byte(&e, b[3], 100, 0x41, 8, &p[2], 1);
	w0 = put_byte(&e, bw, 0, 0x50, 8, &p[3], 1);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(l1) && patch_committed(w0));
	for (w = next_write(e.rec, 0, 4); w != SIZE_MAX; w = next_write(e.rec, w + 1, 4))
		n++;
	assert_int_equal(n, 2);
	w = next_write(e.rec, 0, 4);
	assert_true(same_round(e.rec, next_write(e.rec, 0, 3), w));
	assert_true(same_round(e.rec, next_write(e.rec, w + 1, 4), next_write(e.rec, 0, 5)));
	assert_writes(&e, 4, 6, 1);
	env_done(&e, (struct patch *[]){p[0], p[1], p[2], p[3], l1, w0}, 6,
		 (struct cblock *[]){b[0], b[1], b[2], b[3], bw}, 5);
}

/* As above, but l1 waits for y0 and the chain goes on to u0 (block 6):
 * block 4, put off while its slack lasts, finds l1 writable in the third
 * round and goes once, whole, in the four rounds the chain needs anyway.
 * Written at once it would go twice (l1 rolled back in the first). */
static void test_sync_slack_writes_block_whole(void **state)
{
	struct env e;
	struct cblock *b[4], *bw, *bu;
	struct patch *p[4], *u0, *l1, *w0;
	size_t w;

	env_open(&e, NULL);
	bw = get(&e, 5);
	bu = get(&e, 6);
	sync_chain(&e, b, p);
	u0 = put_byte(&e, bu, 0, 0x60, 8, &p[2], 1);
	l1 = put_byte(&e, b[3], 100, 0x41, 8, &p[1], 1);
	w0 = put_byte(&e, bw, 0, 0x50, 8, &p[3], 1);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(u0) && patch_committed(l1) && patch_committed(w0));
	w = next_write(e.rec, 0, 4);
	assert_int_equal(next_write(e.rec, w + 1, 4), SIZE_MAX);
	assert_true(same_round(e.rec, next_write(e.rec, 0, 3), w));
	assert_true(barrier_between(e.rec, w, next_write(e.rec, 0, 5)));
	assert_writes(&e, 4, 6, 0);
	env_done(&e, (struct patch *[]){p[0], p[1], p[2], u0, p[3], l1, w0}, 7,
		 (struct cblock *[]){b[0], b[1], b[2], b[3], bw, bu}, 6);
}

/* Slack counts no round for a wait, through an empty patch, on a patch of
 * the waiter's own block: the two go in one write (settling, above).
 * Block 1 holds x0 <- e0 <- x1 <- e1 <- x2 <- e2 <- x3, each e an empty
 * patch, as a chain of groups over one block has: one write.  Block 2
 * holds y0, which z0 (block 3) waits for, and y1, which waits for w0
 * (block 4).  The sync needs two rounds: block 2 goes at once with y1
 * rolled back, and again beside z0.  Counting a round a link of block
 * 1's chain, the longest chain seemed four rounds, block 2 had slack and
 * was put off to go whole: three rounds. */
static void test_sync_slack_through_empties(void **state)
{
	struct env e;
	struct cblock *bx, *by, *bz, *bw;
	struct patch *x[4], *em[3], *y0, *y1, *z0, *w0;
	int i;

	env_open(&e, NULL);
	bx = get(&e, 1);
	by = get(&e, 2);
	bz = get(&e, 3);
	bw = get(&e, 4);
	for (i = 0; i < 4; i++) {
		x[i] = put_byte(&e, bx, 8 * i, 0x10 + i, 4, i ? &em[i - 1] : NULL, i ? 1 : 0);
		if (i < 3)
			assert_int_equal(patch_create_empty(e.c, &x[i], 1, &em[i]), 0);
	}
	w0 = put_byte(&e, bw, 0, 0x40, 8, NULL, 0);
	y0 = put_byte(&e, by, 0, 0x20, 8, NULL, 0);
	y1 = put_byte(&e, by, 100, 0x21, 8, &w0, 1);
	z0 = put_byte(&e, bz, 0, 0x30, 8, &y0, 1);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(x[3]) && patch_committed(y1) && patch_committed(z0));
	assert_true(same_round(e.rec, next_write(e.rec, 0, 1), next_write(e.rec, 0, 2)));
	assert_true(barrier_between(e.rec, next_write(e.rec, 0, 2), next_write(e.rec, 0, 3)));
	assert_writes(&e, 2, 5, 1);
	for (i = 0; i < 3; i++)
		patch_release(e.c, em[i]);
	env_done(&e, (struct patch *[]){x[0], x[1], x[2], x[3], y0, y1, z0, w0}, 8,
		 (struct cblock *[]){bx, by, bz, bw}, 4);
}

/* With ordering off the same example is written in one round. */
static void test_article_none_one_round(void **state)
{
	struct cache_opts o = {.consistency = CONSISTENCY_NONE};
	struct env e;
	struct cblock *b1, *b2;
	struct patch *a, *b, *cc;
	size_t nw;

	env_open(&e, &o);
	b1 = get(&e, 1);
	b2 = get(&e, 2);
	a = put_byte(&e, b1, 0, 0xaa, 8, NULL, 0);
	b = put_byte(&e, b2, 0, 0xbb, 8, &a, 1);
	cc = put_byte(&e, b1, 100, 0xcc, 8, &b, 1);
	/* a and cc share block 1's hard patch */
	assert_ptr_equal(a, cc);
	assert_int_equal(cache_flush_round(e.c, &nw), 0);
	assert_int_equal(nw, 2);
	assert_true(patch_committed(b));
	assert_int_equal(stats(&e).blocks_dirty, 0);
	patch_release(e.c, a);
	patch_release(e.c, b);
	patch_release(e.c, cc);
	cache_put(e.c, b1);
	cache_put(e.c, b2);
	env_close(&e);
}

/* Rewriting one block many times ends as one patch with no undo. */
static void test_hard_patch_merging(void **state)
{
	struct env e, n;
	struct cache_opts none = {.consistency = CONSISTENCY_NONE};
	struct cblock *b, *o;
	struct patch *dep, *p;
	struct cache_stats st;

	env_open(&e, NULL);
	b = get(&e, 5);
	for (int i = 0; i < 1000; i++) {
		uint8_t v[4] = {(uint8_t)i, 1, 2, 3};

		assert_int_equal(patch_create_byte(e.c, b, (uint32_t)(i * 7) % (BS - 4), 4, v, NULL,
						   0, NULL, NULL),
				 0);
		assert_int_equal(patch_create_bit(e.c, b, (uint32_t)(i % 16) * 4, 1u << (i % 32),
						  NULL, 0, NULL, NULL),
				 0);
	}
	st = stats(&e);
	assert_int_equal(st.patches_byte + st.patches_bit, 1);
	assert_int_equal(st.patches_hard, 1);
	assert_int_equal(st.undo_bytes, 0);
	assert_int_equal(st.patches_merged, 1999);
	assert_int_equal(cache_sync(e.c), 0);
	assert_memory_equal(cblock_data(b), mem_block(&e, 5), BS);

	/* A change with a pending dependency on a clean block is soft but
	 * keeps no undo (NRB); every later change of the block merges into
	 * it or waits for it. */
	o = get(&e, 6);
	dep = put_byte(&e, o, 0, 1, 4, NULL, 0);
	p = put_byte(&e, b, 0, 2, 16, &dep, 1);
	for (int i = 0; i < 100; i++) {
		struct patch *q =
		    put_byte(&e, b, (uint32_t)(i * 5) % (BS - 4), (uint8_t)i, 4, NULL, 0);

		assert_ptr_equal(q, p);
		patch_release(e.c, q);
	}
	st = stats(&e);
	assert_int_equal(st.patches_soft, 1);
	assert_int_equal(st.patches_hard, 1); /* dep, on block 6 */
	assert_int_equal(st.undo_bytes, 0);
	assert_int_equal(cache_flush_round(e.c, NULL), 0);
	assert_false(patch_committed(p)); /* block 5 waited for block 6 */
	assert_int_equal(cache_sync(e.c), 0);
	assert_memory_equal(cblock_data(b), mem_block(&e, 5), BS);
	assert_int_equal(stats(&e).rollback_writes, 0);
	patch_release(e.c, p);
	patch_release(e.c, dep);

	/* On a dirty block it keeps undo data; overlapping rewrites with no
	 * new dependency merge into it. */
	dep = put_byte(&e, o, 0, 1, 4, NULL, 0);
	struct patch *h = put_byte(&e, b, 200, 9, 4, NULL, 0);

	p = put_byte(&e, b, 0, 2, 16, &dep, 1);
	for (int i = 0; i < 100; i++) {
		struct patch *q = put_byte(&e, b, (uint32_t)i % 12, (uint8_t)i, 4, NULL, 0);

		assert_ptr_equal(q, p);
		patch_release(e.c, q);
	}
	st = stats(&e);
	assert_int_equal(st.patches_soft, 1);
	assert_int_equal(st.undo_bytes, 16);
	/* block 5 would need a rollback now, but not once block 6 is
	 * written: it is put off for a round */
	assert_int_equal(cache_flush_round(e.c, NULL), 0);
	assert_true(patch_committed(dep));
	assert_false(patch_committed(h));
	assert_int_equal(cache_flush_round(e.c, NULL), 0);
	assert_true(patch_committed(h));
	assert_true(patch_committed(p));
	assert_int_equal(stats(&e).rollback_writes, 0);
	assert_memory_equal(cblock_data(b), mem_block(&e, 5), BS);
	patch_release(e.c, h);
	patch_release(e.c, p);
	patch_release(e.c, dep);

	/* When nothing else can be written, the rollback write happens. */
	struct patch *held;

	uint8_t old0 = mem_block(&e, 5)[0];

	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &held), 0);
	h = put_byte(&e, b, 200, 8, 4, NULL, 0);
	p = put_byte(&e, b, 0, 3, 16, &held, 1);
	assert_int_equal(stats(&e).undo_bytes, 16);
	assert_int_equal(cache_flush_round(e.c, NULL), 0);
	assert_true(patch_committed(h));
	assert_false(patch_committed(p));
	assert_int_equal(stats(&e).rollback_writes, 1);
	assert_int_equal(mem_block(&e, 5)[0], old0); /* p rolled back */
	assert_int_equal(mem_block(&e, 5)[200], 8);
	patch_unhold(e.c, held);
	assert_int_equal(cache_sync(e.c), 0);
	assert_memory_equal(cblock_data(b), mem_block(&e, 5), BS);
	patch_release(e.c, held);
	patch_release(e.c, h);
	patch_release(e.c, p);
	cache_put(e.c, o);
	cache_put(e.c, b);
	env_close(&e);

	/* Under CONSISTENCY_NONE even changes with dependencies merge. */
	env_open(&n, &none);
	b = get(&n, 5);
	o = get(&n, 6);
	dep = put_byte(&n, o, 0, 1, 4, NULL, 0);
	for (int i = 0; i < 500; i++) {
		uint8_t v = (uint8_t)i;

		assert_int_equal(
		    patch_create_byte(n.c, b, (uint32_t)i % BS, 1, &v, &dep, 1, NULL, NULL), 0);
	}
	st = stats(&n);
	assert_int_equal(st.patches_byte, 2);
	assert_int_equal(st.patches_hard, 2);
	assert_int_equal(st.undo_bytes, 0);
	assert_int_equal(cache_sync(n.c), 0);
	patch_release(n.c, dep);
	cache_put(n.c, o);
	cache_put(n.c, b);
	env_close(&n);
}

/* A byte patch overlapping an older unready one waits for it, even when
 * its own dependencies are durable; an overlapping change with no newer
 * dependency merges into it instead. */
static void test_same_block_overlap_order(void **state)
{
	struct env e;
	struct cblock *b, *o;
	struct patch *held, *held2, *dep2, *p1, *p2, *p3, *m;

	env_open(&e, NULL);
	b = get(&e, 1);
	o = get(&e, 2);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &held), 0);
	p1 = put_byte(&e, b, 0, 1, 8, &held, 1); /* waits for the hold */
	dep2 = put_byte(&e, o, 0, 9, 4, NULL, 0);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &held2), 0);
	/* overlaps p1; waits for another hold, so it cannot merge into p1 */
	p2 = put_byte(&e, b, 4, 2, 8, (struct patch *[]){dep2, held2}, 2);
	patch_unhold(e.c, held2);
	p3 = put_byte(&e, b, 64, 3, 8, NULL, 0); /* independent: hard */
	m = put_byte(&e, b, 2, 4, 1, NULL, 0);	 /* overlaps only p1: merges */
	assert_ptr_not_equal(p1, p2);
	assert_ptr_equal(m, p1);
	assert_int_equal(cache_sync(e.c), -EAGAIN);
	assert_true(patch_committed(dep2));
	assert_true(patch_committed(p3));
	assert_false(patch_committed(p2));
	assert_false(patch_committed(p1));
	for (int i = 0; i < 12; i++)
		assert_int_equal(mem_block(&e, 1)[i], 0);
	assert_int_equal(mem_block(&e, 1)[64], 3);
	patch_unhold(e.c, held);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(p2));
	assert_int_equal(mem_block(&e, 1)[2], 4);
	assert_int_equal(mem_block(&e, 1)[4], 2);
	assert_memory_equal(cblock_data(b), mem_block(&e, 1), BS);
	assert_device_equals_cache(&e);
	patch_release(e.c, held);
	patch_release(e.c, held2);
	patch_release(e.c, dep2);
	patch_release(e.c, p1);
	patch_release(e.c, p2);
	patch_release(e.c, p3);
	patch_release(e.c, m);
	cache_put(e.c, b);
	cache_put(e.c, o);
	env_close(&e);
}

/* Undo comes in three forms (undo.c): none kept for bytes that were all
 * zero, packed for bytes that were mostly zeros, a copy otherwise.  Each
 * is counted as the memory it holds, and each rolls back exactly. */
static void test_undo_forms(void **state)
{
	struct env e;
	struct cblock *b;
	struct patch *held, *old[3], *p[3];
	uint8_t before[BS];

	(void)state;
	env_open(&e, NULL);
	b = get(&e, 4);
	/* on disk: sparse bytes in [128, 328), dense ones in [400, 500) */
	old[0] = put_byte(&e, b, 170, 0x11, 1, NULL, 0);
	old[1] = put_byte(&e, b, 210, 0x22, 2, NULL, 0);
	old[2] = put_byte(&e, b, 390, 0x33, 120, NULL, 0);
	assert_int_equal(cache_sync(e.c), 0);
	memcpy(before, mem_block(&e, 4), BS);
	assert_int_equal(stats(&e).undo_bytes, 0);

	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &held), 0);
	p[0] = put_byte(&e, b, 0, 0xa0, 100, &held, 1);
	assert_int_equal(stats(&e).undo_bytes, 0);
	/* skip 42, copy 1, skip 39, copy 2, skip 116: a byte per count */
	p[1] = put_byte(&e, b, 128, 0xa1, 200, &held, 1);
	assert_int_equal(stats(&e).undo_bytes, 8);
	p[2] = put_byte(&e, b, 400, 0xa2, 100, &held, 1);
	assert_int_equal(stats(&e).undo_bytes, 108);

	/* held back: a write of the block for another change rolls all
	 * three back */
	struct patch *h = put_byte(&e, b, 505, 0x44, 4, NULL, 0);

	before[505] = before[506] = before[507] = before[508] = 0x44;
	assert_int_equal(cache_flush_round(e.c, NULL), 0);
	assert_true(patch_committed(h));
	patch_release(e.c, h);
	assert_int_equal(stats(&e).rollback_writes, 1);
	assert_memory_equal(mem_block(&e, 4), before, BS);
	for (int i = 0; i < 3; i++)
		assert_false(patch_committed(p[i]));

	patch_unhold(e.c, held);
	assert_int_equal(cache_sync(e.c), 0);
	assert_device_equals_cache(&e);
	assert_int_equal(mem_block(&e, 4)[170], 0xa1);
	assert_int_equal(stats(&e).undo_bytes, 0);
	patch_release(e.c, held);
	for (int i = 0; i < 3; i++)
		patch_release(e.c, old[i]);
	env_done(&e, p, 3, &b, 1);
}

/* A soft patch lets its undo go once nothing can keep it out of a write of
 * its block: here p waits for d elsewhere and for the block's NRB patch,
 * which waits for a hold and has an after (as an inode-table block's first
 * patch, new inodes that entries wait for, holds up the size and pointers
 * written after).  Once d is on disk, p is written with the NRB patch
 * whenever that goes.  It then takes no change with a before elsewhere:
 * q, which waits for x, stays apart with undo of its own and is rolled
 * back to p's bytes in the round that writes p (merged, it would have
 * made p wait for x, with nothing to roll p back by).  A change that
 * waits for nothing else still merges. */
static void test_undo_let_go(void **state)
{
	struct env e;
	struct cblock *b, *o, *bx, *by;
	struct patch *hold, *nrb, *ent, *d, *p, *x, *y, *q, *m;

	env_open(&e, NULL);
	b = get(&e, 1);
	o = get(&e, 2);
	bx = get(&e, 3);
	by = get(&e, 4);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &hold), 0);
	nrb = put_byte(&e, b, 0, 1, BS, &hold, 1); /* first of a clean block */
	assert_int_equal(patch_create_empty(e.c, &nrb, 1, &ent), 0);
	d = put_byte(&e, o, 0, 9, 4, NULL, 0);
	p = put_byte(&e, b, 100, 2, 16, &d, 1);
	assert_int_equal(stats(&e).patches_nrb, 1);
	assert_int_equal(stats(&e).undo_bytes, 16);
	assert_int_equal(stats(&e).undo_dropped, 0);

	assert_int_equal(cache_sync(e.c), -EAGAIN); /* block 1 waits for hold */
	assert_true(patch_committed(d));
	assert_false(patch_committed(p));
	assert_int_equal(stats(&e).undo_bytes, 0);
	assert_int_equal(stats(&e).undo_dropped, 1);

	y = put_byte(&e, by, 0, 7, 4, NULL, 0);
	x = put_byte(&e, bx, 0, 8, 4, &y, 1); /* not ready before y is written */
	q = put_byte(&e, b, 104, 3, 4, &x, 1);
	assert_ptr_not_equal(q, p);
	assert_int_equal(stats(&e).undo_bytes, 4);
	m = put_byte(&e, b, 100, 4, 2, NULL, 0);
	assert_ptr_equal(m, p);

	patch_unhold(e.c, hold);
	assert_int_equal(cache_flush_round(e.c, NULL), 0); /* blocks 1 and 4 */
	assert_true(patch_committed(p));
	assert_true(patch_committed(y));
	assert_false(patch_committed(q));
	assert_int_equal(mem_block(&e, 1)[0], 1);
	assert_int_equal(mem_block(&e, 1)[100], 4);
	assert_int_equal(mem_block(&e, 1)[102], 2);
	assert_int_equal(mem_block(&e, 1)[104], 2); /* q rolled back */
	assert_int_equal(mem_block(&e, 1)[115], 2);
	assert_int_equal(cache_sync(e.c), 0);
	assert_int_equal(mem_block(&e, 1)[104], 3);
	assert_device_equals_cache(&e);
	env_done(&e, (struct patch *[]){hold, nrb, ent, d, p, x, y, q, m}, 9,
		 (struct cblock *[]){b, o, bx, by}, 4);
}

/* A chain over one block through empty patches (a patchgroup's head and
 * tail): p[i] waits for p[i-1] of the same block through e[i-1], which
 * also waits for x[i-1] on a block of its own.  Once the x are on disk,
 * one write of block 1 takes the whole chain: 2 rounds, not one a link.
 * Nothing goes before its befores elsewhere: after the first round (the
 * x, block 1 put off for its rollbacks) no p[i > 0] is on block 1. */
static void test_settle_through_empties(void **state)
{
	enum { N = 10 };
	struct env e;
	struct cblock *b1, *bx[N];
	struct patch *p[N], *x[N], *em[N];
	size_t nw;
	int i;

	env_open(&e, NULL);
	b1 = get(&e, 1);
	for (i = 0; i < N; i++) {
		bx[i] = get(&e, 10 + i);
		x[i] = put_byte(&e, bx[i], 0, 0x10 + i, 4, NULL, 0);
		p[i] = put_byte(&e, b1, 8 * i, 0x40 + i, 4, i ? &em[i - 1] : NULL, i ? 1 : 0);
		assert_int_equal(patch_create_empty(e.c, (struct patch *[]){p[i], x[i]}, 2, &em[i]),
				 0);
	}
	assert_int_equal(cache_flush_round(e.c, &nw), 0);
	for (i = 1; i < N; i++)
		assert_int_equal(mem_block(&e, 1)[8 * i], 0);
	assert_int_equal(cache_sync(e.c), 0);
	assert_int_equal(stats(&e).rounds, 2);
	for (i = 0; i < N; i++) {
		assert_true(patch_committed(p[i]));
		assert_true(patch_committed(em[i]));
		patch_release(e.c, p[i]);
		patch_release(e.c, x[i]);
		patch_release(e.c, em[i]);
		cache_put(e.c, bx[i]);
	}
	assert_device_equals_cache(&e);
	cache_put(e.c, b1);
	env_close(&e);
}

/* A long chain of groups over two blocks: N groups change block X, the next
 * N block Y, the last N block X again, each group's change ordered after
 * the previous group's tail (an empty patch over the change), as chained
 * patchgroups are.  Within a run all of a block's changes may go in one
 * write, since a block write is atomic and every before elsewhere is
 * durable; so the order needs three rounds of one write each (X with the
 * third run rolled back, Y, X), however long the chain.  Every crash state
 * must hold a prefix of the chain: group k on disk means every group
 * before it is.  The same chain under consistency=none goes in one round,
 * and some of its crash states show Y's groups without X's. */
enum { CHAIN_N = 1000, CHAIN_X = 1, CHAIN_Y = 2, CHAIN_SLOTS = BS / 2 };

static uint64_t chain_block(size_t k)
{
	return k >= CHAIN_N && k < 2 * CHAIN_N ? CHAIN_Y : CHAIN_X;
}

/* Whether group k's change is on the image: its slot holds k's value or a
 * later group's (the same slot of the same block is reused every
 * CHAIN_SLOTS groups, each after the one before). */
static bool chain_on_disk(const uint8_t *img, size_t k)
{
	const uint8_t *s = img + chain_block(k) * BS + k % CHAIN_SLOTS * 2;

	return (size_t)(s[0] | s[1] << 8) >= k + 1;
}

static int chain_crash_cb(const struct crash_state *st, void *arg)
{
	const uint8_t *img = st->image;
	size_t newest = 0, k;

	for (k = 0; k < 3 * CHAIN_N; k++)
		if (chain_on_disk(img, k))
			newest = k + 1;
	for (k = 0; k < newest; k++)
		if (!chain_on_disk(img, k)) {
			++*(size_t *)arg;
			break;
		}
	return 0;
}

/* Builds the chain, flushes it; returns the crash states that are not a
 * prefix of the chain. */
static size_t chain_run(enum consistency mode, struct cache_stats *st)
{
	struct cache_opts o = {.consistency = mode};
	struct crash_opts co = {0};
	struct env e;
	struct cblock *b[3];
	struct patch *tail = NULL;
	size_t k, n = 0, bad = 0;

	env_open(&e, &o);
	b[CHAIN_X] = get(&e, CHAIN_X);
	b[CHAIN_Y] = get(&e, CHAIN_Y);
	for (k = 0; k < 3 * CHAIN_N; k++) {
		uint8_t v[2] = {(uint8_t)(k + 1), (uint8_t)((k + 1) >> 8)};
		struct patch *p, *t;

		assert_int_equal(patch_create_byte(e.c, b[chain_block(k)], k % CHAIN_SLOTS * 2, 2,
						   v, &tail, tail ? 1 : 0, NULL, &p),
				 0);
		assert_int_equal(patch_create_empty(e.c, &p, 1, &t), 0);
		patch_release(e.c, p);
		if (tail)
			patch_release(e.c, tail);
		tail = t;
	}
	assert_int_equal(cache_sync(e.c), 0);
	patch_release(e.c, tail);
	*st = stats(&e);
	assert_device_equals_cache(&e);
	assert_int_equal(crash_enumerate(e.rec, &co, chain_crash_cb, &bad, &n), 0);
	assert_true(n > 3);
	cache_put(e.c, b[CHAIN_X]);
	cache_put(e.c, b[CHAIN_Y]);
	env_close(&e);
	return bad;
}

static void test_group_chain_one_write_per_turn(void **state)
{
	struct cache_stats st;

	assert_int_equal(chain_run(CONSISTENCY_SOFTUPDATES, &st), 0);
	assert_int_equal(st.rounds, 3);
	assert_int_equal(st.block_writes, 3);
	assert_int_equal(st.rollback_writes, 1);
	/* the twin: without the order, states that are not a prefix */
	assert_true(chain_run(CONSISTENCY_NONE, &st) > 0);
	assert_int_equal(st.rounds, 1);
}

static void test_empty_patches(void **state)
{
	struct env e;
	struct cblock *b;
	struct patch *p, *q, *em, *held, *e2, *none;

	env_open(&e, NULL);
	b = get(&e, 1);
	assert_int_equal(patch_create_empty(e.c, NULL, 0, &none), 0);
	assert_true(patch_committed(none));
	p = put_byte(&e, b, 0, 1, 4, NULL, 0);
	q = put_byte(&e, b, 8, 1, 4, NULL, 0);
	assert_int_equal(patch_create_empty(e.c, (struct patch *[]){p, NULL, none}, 3, &em), 0);
	assert_false(patch_committed(em));
	assert_int_equal(patch_create_empty_held(e.c, &em, 1, &held), 0);
	assert_int_equal(patch_create_empty(e.c, NULL, 0, &e2), 0);
	/* e2 is committed (no deps): adding is refused */
	assert_int_equal(patch_add_depend(e.c, e2, q), -EBUSY);
	patch_release(e.c, e2);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &e2), 0);
	assert_int_equal(patch_add_depend(e.c, e2, q), 0);
	assert_int_equal(patch_add_depend(e.c, e2, none), 0); /* committed: no-op */
	assert_int_equal(patch_add_depend(e.c, e2, NULL), 0);
	assert_int_equal(patch_add_depend(e.c, p, q), -EBUSY);	/* not empty */
	assert_int_equal(patch_add_depend(e.c, em, q), -EBUSY); /* held depends on em */
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(em));
	assert_false(patch_committed(held));
	assert_false(patch_committed(e2));
	assert_int_equal(cache_sync_patch(e.c, held), 0);
	patch_unhold(e.c, held);
	patch_unhold(e.c, e2);
	assert_true(patch_committed(held));
	assert_true(patch_committed(e2));
	patch_release(e.c, p);
	patch_release(e.c, q);
	patch_release(e.c, em);
	patch_release(e.c, held);
	patch_release(e.c, e2);
	patch_release(e.c, none);
	assert_int_equal(stats(&e).engine_bytes, 0);
	cache_put(e.c, b);
	env_close(&e);
}

/* Patches waiting on a held empty patch stay dirty; sync says so. */
static void test_held_blocks_sync(void **state)
{
	struct env e;
	struct cblock *b;
	struct patch *held, *p;

	env_open(&e, NULL);
	b = get(&e, 1);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &held), 0);
	p = put_byte(&e, b, 0, 7, 4, &held, 1);
	assert_int_equal(cache_sync(e.c), -EAGAIN);
	assert_int_equal(cache_sync_patch(e.c, p), -EAGAIN);
	assert_int_equal(mem_block(&e, 1)[0], 0);
	patch_unhold(e.c, held);
	assert_int_equal(cache_sync_patch(e.c, p), 0);
	assert_int_equal(mem_block(&e, 1)[0], 7);
	patch_release(e.c, held);
	patch_release(e.c, p);
	cache_put(e.c, b);
	env_close(&e);
}

static void test_write_fault(void **state)
{
	struct env e;
	struct cblock *b;
	struct patch *p;
	struct cache_stats st;

	env_open(&e, NULL);
	b = get(&e, 4);
	p = put_byte(&e, b, 0, 0x55, 32, NULL, 0);
	bdev_mem_inject(e.mem, BDEV_FAULT_WRITE, 0, 1, EIO);
	assert_int_equal(cache_sync(e.c), -EIO);
	assert_false(patch_committed(p));
	assert_int_equal(stats(&e).blocks_dirty, 1);
	bdev_mem_inject(e.mem, BDEV_FAULT_BARRIER, 0, 1, ENOSPC);
	assert_int_equal(cache_flush_round(e.c, NULL), -ENOSPC);
	assert_false(patch_committed(p));
	st = stats(&e);
	assert_int_equal(st.write_errors, 1);
	assert_int_equal(st.barrier_errors, 1);
	assert_int_equal(st.blocks_dirty, 1);
	/* the data went to the device in the failed-barrier round, but only
	 * a later successful round may call it durable */
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(p));
	assert_int_equal(mem_block(&e, 4)[31], 0x55);
	assert_int_equal(stats(&e).blocks_dirty, 0);
	patch_release(e.c, p);
	cache_put(e.c, b);
	env_close(&e);
}

/* A device that lost its connection and made a new one (bdev.h): the
 * round is written again at once, and commits only after a barrier that
 * succeeds; the callers see no error. */
static void test_connection_reset(void **state)
{
	struct env e;
	struct cblock *b;
	struct patch *p;
	struct cache_stats st;

	env_open(&e, NULL);
	b = get(&e, 4);
	p = put_byte(&e, b, 0, 0x66, 32, NULL, 0);
	bdev_mem_inject(e.mem, BDEV_FAULT_BARRIER, 0, 2, ECONNRESET);
	bdev_mem_inject(e.mem, BDEV_FAULT_WRITE, 0, 1, ECONNRESET);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(p));
	st = stats(&e);
	assert_int_equal(st.rounds, 1);
	assert_int_equal(st.barriers, 1);
	assert_int_equal(st.write_errors, 0);
	assert_int_equal(st.barrier_errors, 0);
	assert_int_equal(mem_block(&e, 4)[31], 0x66);
	patch_release(e.c, p);
	cache_put(e.c, b);
	env_close(&e);
}

static void test_read_fault(void **state)
{
	struct env e;
	struct cblock *b;

	env_open(&e, NULL);
	bdev_mem_inject(e.mem, BDEV_FAULT_READ, 0, 1, EIO);
	assert_int_equal(cache_get(e.c, 7, &b), -EIO);
	assert_int_equal(stats(&e).blocks_cached, 0);
	assert_int_equal(cache_get(e.c, 7, &b), 0);
	cache_put(e.c, b);
	env_close(&e);
}

static void test_eviction(void **state)
{
	struct cache_opts o = {.max_blocks = 8, .dirty_limit = 64};
	struct env e;
	struct cblock *held, *dirty, *b;
	struct patch *p;

	env_open(&e, &o);
	held = get(&e, 0);
	dirty = get(&e, 1);
	p = put_byte(&e, dirty, 0, 1, 1, NULL, 0);
	cache_put(e.c, dirty);
	for (uint64_t n = 2; n < 40; n++) {
		b = get(&e, n);
		cache_put(e.c, b);
		assert_true(stats(&e).blocks_cached <= 8);
	}
	/* the referenced and the dirty block are still there, unchanged */
	assert_int_equal(stats(&e).blocks_dirty, 1);
	dirty = get(&e, 1);
	assert_int_equal(cblock_data(dirty)[0], 1);
	cache_put(e.c, dirty);
	/* LRU: a recently used block survives, an old one is read again */
	b = get(&e, 39);
	cache_put(e.c, b);
	assert_int_equal(cache_sync(e.c), 0);
	patch_release(e.c, p);
	cache_put(e.c, held);
	assert_true(stats(&e).blocks_cached <= 8);
	env_close(&e);
}

struct writer {
	struct env *e;
	int nblocks;
	uint64_t max_dirty;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	for (int i = 0; i < w->nblocks; i++) {
		struct cblock *b;
		uint8_t v = (uint8_t)(i + 1);
		struct cache_stats st;

		if (cache_get(w->e->c, (uint64_t)i, &b))
			return (void *)1;
		if (patch_create_byte(w->e->c, b, 0, 1, &v, NULL, 0, NULL, NULL))
			return (void *)1;
		cache_put(w->e->c, b);
		cache_get_stats(w->e->c, &st);
		if (st.blocks_dirty > w->max_dirty)
			w->max_dirty = st.blocks_dirty;
	}
	return NULL;
}

/* With a dirty limit and a flusher, writers wait instead of growing the
 * dirty set without bound; without a flusher they flush themselves. */
static void test_dirty_limit(void **state)
{
	struct cache_opts o = {.max_blocks = 64, .dirty_limit = 8, .flush_interval_ms = 60000};
	struct env e;
	struct writer w;
	pthread_t t;
	void *ret;

	env_open(&e, &o);
	assert_int_equal(cache_start_flusher(e.c), 0);
	w = (struct writer){&e, NBLK, 0};
	assert_int_equal(pthread_create(&t, NULL, writer_main, &w), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_null(ret);
	/* cache_get waits until below the limit; the patch then adds one */
	assert_true(w.max_dirty <= 8);
	assert_true(stats(&e).rounds > 0);
	cache_stop_flusher(e.c);
	assert_int_equal(cache_sync(e.c), 0);
	for (int i = 0; i < NBLK; i++)
		assert_int_equal(mem_block(&e, (uint64_t)i)[0], (uint8_t)(i + 1));
	env_close(&e);

	env_open(&e, &o);
	w = (struct writer){&e, NBLK, 0};
	assert_null(writer_main(&w));
	assert_true(w.max_dirty <= 8);
	assert_int_equal(cache_sync(e.c), 0);
	env_close(&e);
}

/* The flusher writes dirty data by itself after the interval. */
static void test_flusher_interval(void **state)
{
	struct cache_opts o = {.flush_interval_ms = 20};
	struct env e;
	struct cblock *b;
	struct patch *p;

	env_open(&e, &o);
	assert_int_equal(cache_start_flusher(e.c), 0);
	b = get(&e, 9);
	p = put_byte(&e, b, 0, 3, 1, NULL, 0);
	for (int i = 0; i < 500 && !patch_committed(p); i++)
		usleep(10000);
	assert_true(patch_committed(p));
	assert_int_equal(mem_block(&e, 9)[0], 3);
	patch_release(e.c, p);
	cache_put(e.c, b);
	cache_stop_flusher(e.c);
	env_close(&e);
}

/* A block that gathers CACHE_CROWD_PATCHES patches wakes the flusher for a whole
 * pass, without waiting for the interval (an hour here): each change of a
 * block looks at its patches, so a loop that piles changes on one block
 * between two flushes took time that grew with the square of its length.
 * The patches here wait for holds of their own, so none merges and none
 * can go; the pass writes what can, the lone patch of another block. */
static void test_crowded_block_wakes_flusher(void **state)
{
	struct cache_opts o = {.flush_interval_ms = 3600000};
	struct patch *held[CACHE_CROWD_PATCHES], *q[CACHE_CROWD_PATCHES], *p;
	struct cblock *b, *other;
	struct env e;
	int i;

	env_open(&e, &o);
	assert_int_equal(cache_start_flusher(e.c), 0);
	other = get(&e, 9);
	b = get(&e, 1);
	p = put_byte(&e, other, 0, 3, 1, NULL, 0);
	for (i = 0; i < CACHE_CROWD_PATCHES - 1; i++) {
		assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &held[i]), 0);
		q[i] = put_byte(&e, b, (uint32_t)i % BS, (uint8_t)i, 1, &held[i], 1);
	}
	usleep(200000);
	assert_false(patch_committed(p)); /* one short: no pass yet */
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &held[i]), 0);
	q[i] = put_byte(&e, b, (uint32_t)i % BS, (uint8_t)i, 1, &held[i], 1);
	assert_ptr_not_equal(q[i], q[i - 1]);
	for (int t = 0; t < 3000 && !patch_committed(p); t++)
		usleep(10000);
	assert_true(patch_committed(p));
	assert_false(patch_committed(q[0]));
	cache_stop_flusher(e.c);
	for (i = 0; i < CACHE_CROWD_PATCHES; i++)
		patch_unhold(e.c, held[i]);
	assert_int_equal(cache_sync(e.c), 0);
	assert_device_equals_cache(&e);
	for (i = 0; i < CACHE_CROWD_PATCHES; i++) {
		patch_release(e.c, held[i]);
		patch_release(e.c, q[i]);
	}
	patch_release(e.c, p);
	cache_put(e.c, b);
	cache_put(e.c, other);
	env_close(&e);
}

/* Under memory pressure the flusher lets writable blocks gather instead of
 * writing each few as they appear: with more than half the dirty limit
 * dirty but fewer than a quarter of it writable, no round starts (the
 * interval is an hour away); once a quarter can go, they go in one round.
 * (Before, the flusher wrote the two writable blocks as soon as half the
 * limit was dirty, then the rest in later rounds.) */
static void test_pressure_rounds_gather(void **state)
{
	enum { L = 32, HELD = 14, READY = 2, LATER = 6 };
	struct cache_opts o = {.max_blocks = NBLK, .dirty_limit = L, .flush_interval_ms = 3600000};
	struct env e;
	struct cblock *b;
	struct patch *h, *h2, *p[HELD + READY + LATER];
	int i, n = 0;

	env_open(&e, &o);
	assert_int_equal(cache_start_flusher(e.c), 0);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &h), 0);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &h2), 0);
	for (i = 0; i < HELD; i++, n++) {
		b = get(&e, (uint64_t)n);
		p[n] = put_byte(&e, b, 0, 1, 4, &h, 1);
		cache_put(e.c, b);
	}
	for (i = 0; i < READY; i++, n++) {
		b = get(&e, (uint64_t)n);
		p[n] = put_byte(&e, b, 0, 2, 4, NULL, 0);
		cache_put(e.c, b);
	}
	for (i = 0; i < LATER; i++, n++) {
		b = get(&e, (uint64_t)n);
		p[n] = put_byte(&e, b, 0, 3, 4, &h2, 1);
		cache_put(e.c, b);
	}
	/* 22 dirty of 32, 2 writable: nothing to do yet */
	assert_int_equal(stats(&e).blocks_dirty, HELD + READY + LATER);
	usleep(200000);
	assert_int_equal(stats(&e).rounds, 0);
	/* 8 writable: one round takes them all */
	patch_unhold(e.c, h2);
	for (i = 0; i < 500 && stats(&e).blocks_dirty > HELD; i++)
		usleep(10000);
	assert_int_equal(stats(&e).blocks_dirty, HELD);
	assert_int_equal(stats(&e).rounds, 1);
	assert_int_equal(stats(&e).block_writes, READY + LATER);
	cache_stop_flusher(e.c);
	patch_unhold(e.c, h);
	assert_int_equal(cache_sync(e.c), 0);
	for (i = 0; i < n; i++)
		patch_release(e.c, p[i]);
	patch_release(e.c, h);
	patch_release(e.c, h2);
	assert_device_equals_cache(&e);
	env_close(&e);
}

/* A round that fails puts its blocks back on the ready list, still dirty,
 * and with memory pressure that could start the next round at once: the
 * flusher would spin on a device that fails every write (a full host file
 * system), and keep the lock from everyone else.  Instead it backs off
 * (50 ms, doubling to 1 s), and writers dirtying more blocks meanwhile do
 * not wake it either.  The rounds are counted against the most that
 * backoff allows in the time the window took (a slow machine makes the
 * window longer and the rounds later, never earlier): 5 in 400 ms, where
 * a spinning flusher makes thousands and one woken by each writer at
 * least one per write.  The final flush then fails with the device's
 * error, and succeeds once the device does. */
static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The most rounds a flusher that backs off may start within ms of the
 * first one's kick. */
static uint64_t backoff_rounds(uint64_t ms)
{
	uint64_t n = 1, at = 0, wait = 50;

	while (at + wait <= ms) {
		at += wait;
		n++;
		wait = wait * 2 < 1000 ? wait * 2 : 1000;
	}
	return n;
}

static void test_failed_rounds_back_off(void **state)
{
	enum { L = 8, FIRST = 6, MORE = 24 };
	struct cache_opts o = {.max_blocks = NBLK, .dirty_limit = L, .flush_interval_ms = 3600000};
	struct env e;
	struct cblock *b;
	struct patch *p[FIRST + MORE];
	struct cache_stats st;
	uint64_t t0;
	int i, n = 0;

	env_open(&e, &o);
	bdev_mem_inject(e.mem, BDEV_FAULT_WRITE, 0, UINT32_MAX, ENOSPC);
	t0 = mono_ms();
	assert_int_equal(cache_start_flusher(e.c), 0);
	/* three quarters of the limit dirty and writable: a round starts */
	for (; n < FIRST; n++) {
		b = get(&e, (uint64_t)n);
		p[n] = put_byte(&e, b, 0, (uint8_t)(n + 1), 4, NULL, 0);
		cache_put(e.c, b);
	}
	for (i = 0; i < 1000 && stats(&e).write_errors == 0; i++)
		usleep(10000);
	assert_in_range(stats(&e).write_errors, 1, backoff_rounds(mono_ms() - t0));
	/* the failure window: writers go on up to the limit, then get EIO
	 * (test_dirty_limit_failing_device) */
	for (i = 0; i < MORE; i++) {
		int r = cache_get(e.c, (uint64_t)n, &b);

		if (r == 0) {
			p[n] = put_byte(&e, b, 0, (uint8_t)(n + 1), 4, NULL, 0);
			cache_put(e.c, b);
			n++;
		} else {
			assert_int_equal(r, -EIO);
		}
		usleep(400000 / MORE);
	}
	st = stats(&e);
	assert_int_equal(n, L);
	assert_int_equal(st.blocks_dirty, L);
	assert_int_equal(st.barriers, 0);
	assert_in_range(st.rounds, 1, backoff_rounds(mono_ms() - t0));
	assert_int_equal(st.write_errors, st.rounds);
	/* the final flush reports the error and returns */
	assert_int_equal(cache_sync(e.c), -ENOSPC);
	cache_stop_flusher(e.c);
	assert_int_equal(stats(&e).blocks_dirty, L);
	bdev_mem_inject(e.mem, BDEV_FAULT_WRITE, 0, 0, 0);
	assert_int_equal(cache_sync(e.c), 0);
	for (i = 0; i < n; i++) {
		assert_true(patch_committed(p[i]));
		assert_int_equal(mem_block(&e, (uint64_t)i)[3], (uint8_t)(i + 1));
		patch_release(e.c, p[i]);
	}
	env_close(&e);
}

/* A writer at the dirty limit on a device that refuses every write: no
 * round can clean anything, so waiting would never end and going on would
 * grow the dirty set without bound.  The writer gets EIO, the dirty blocks
 * stay, and once the device takes writes again a round writes them all and
 * writers go on.  With the flusher (which retries after its backoff) and
 * without (the writer's own round is the retry). */
static void dirty_limit_failing(bool flusher)
{
	enum { L = 8 };
	struct cache_opts o = {.max_blocks = NBLK, .dirty_limit = L, .flush_interval_ms = 3600000};
	struct env e;
	struct cblock *b, *held;
	struct patch *p[L + 1];
	int i;

	env_open(&e, &o);
	bdev_mem_inject(e.mem, BDEV_FAULT_WRITE, 0, UINT32_MAX, ENOSPC);
	if (flusher)
		assert_int_equal(cache_start_flusher(e.c), 0);
	held = get(&e, L + 1); /* a cached block, referenced throughout */
	for (i = 0; i < L; i++) {
		b = get(&e, (uint64_t)i);
		p[i] = put_byte(&e, b, 0, (uint8_t)(i + 1), 4, NULL, 0);
		cache_put(e.c, b);
	}
	/* (with the flusher: wait until its round has failed) */
	for (i = 0; flusher && i < 500 && stats(&e).write_errors == 0; i++)
		usleep(10000);
	/* at the limit, nothing writable: EIO, also for a cached block */
	assert_int_equal(cache_get(e.c, L, &b), -EIO);
	assert_int_equal(cache_get(e.c, L + 1, &b), -EIO);
	assert_int_equal(cache_get(e.c, L, &b), -EIO);
	assert_true(stats(&e).write_errors > 0);
	assert_int_equal(stats(&e).blocks_dirty, L);
	assert_int_equal(stats(&e).barriers, 0);
	/* the device recovers: the next round writes everything */
	bdev_mem_inject(e.mem, BDEV_FAULT_WRITE, 0, 0, 0);
	if (flusher) {
		for (i = 0; i < 500 && stats(&e).blocks_dirty > 0; i++)
			usleep(10000);
		assert_int_equal(stats(&e).blocks_dirty, 0);
	}
	b = get(&e, L);
	p[L] = put_byte(&e, b, 0, L + 1, 4, NULL, 0);
	cache_put(e.c, b);
	cache_stop_flusher(e.c);
	assert_int_equal(cache_sync(e.c), 0);
	for (i = 0; i <= L; i++) {
		assert_true(patch_committed(p[i]));
		assert_int_equal(mem_block(&e, (uint64_t)i)[3], (uint8_t)(i + 1));
		patch_release(e.c, p[i]);
	}
	cache_put(e.c, held);
	env_close(&e);
}

static void test_dirty_limit_failing_device(void **state)
{
	dirty_limit_failing(true);
	dirty_limit_failing(false);
}

struct tscope {
	struct patch_scope s;
	struct cache *c;
	struct patch *before;
	struct patch *tail; /* empty patch collecting the scope's changes */
	int created;
	int add_err;
};

static size_t ts_befores(struct patch_scope *s, struct patch *const **deps)
{
	struct tscope *t = (struct tscope *)s;

	*deps = &t->before;
	return 1;
}

static void ts_created(struct patch_scope *s, struct patch *p)
{
	struct tscope *t = (struct tscope *)s;

	t->created++;
	if (t->add_err == 0)
		t->add_err = patch_add_depend(t->c, t->tail, p);
}

static void test_scope_hooks(void **state)
{
	struct env e;
	struct cblock *b1, *b2;
	struct tscope ts = {.s = {ts_befores, ts_created}};
	uint8_t buf[4];
	struct patch *p;

	env_open(&e, NULL);
	b1 = get(&e, 1);
	b2 = get(&e, 2);
	ts.c = e.c;
	ts.before = put_byte(&e, b2, 0, 0x22, 4, NULL, 0);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &ts.tail), 0);
	memset(buf, 0x11, 4);
	assert_int_equal(patch_create_byte(e.c, b1, 0, 4, buf, NULL, 0, &ts.s, &p), 0);
	assert_int_equal(ts.created, 1);
	assert_int_equal(ts.add_err, 0);
	/* the scope's before is a real dependency: first round writes only
	 * block 2 */
	assert_int_equal(cache_flush_round(e.c, NULL), 0);
	assert_int_equal(mem_block(&e, 1)[0], 0);
	assert_int_equal(mem_block(&e, 2)[0], 0x22);
	assert_false(patch_committed(p));
	/* the tail depends on p */
	assert_int_equal(cache_sync_patch(e.c, ts.tail), 0);
	assert_true(patch_committed(p));
	assert_int_equal(mem_block(&e, 1)[0], 0x11);
	patch_unhold(e.c, ts.tail);
	assert_true(patch_committed(ts.tail));
	patch_release(e.c, ts.tail);
	patch_release(e.c, ts.before);
	patch_release(e.c, p);
	cache_put(e.c, b1);
	cache_put(e.c, b2);
	env_close(&e);
}

static void test_round_limit(void **state)
{
	struct cache_opts o = {.round_max_blocks = 3};
	struct env e;
	size_t nw;

	env_open(&e, &o);
	for (uint64_t n = 0; n < 10; n++) {
		struct cblock *b = get(&e, n);

		put_byte(&e, b, 0, 1, 1, NULL, 0);
		cache_put(e.c, b);
	}
	assert_int_equal(cache_flush_round(e.c, &nw), 0);
	assert_int_equal(nw, 3);
	assert_int_equal(stats(&e).blocks_dirty, 7);
	assert_int_equal(cache_sync(e.c), 0);
	assert_int_equal(stats(&e).rounds, 4);
	env_close(&e);
}

/* Blocks 1 to nb, each with a change of byte 0 to 0x11 times its number,
 * and block 1 with a second one, of byte 8 to 0x55, that waits for the
 * last block's: in b[0..nb) and p[0..nb]. */
static void ready_behind(struct env *e, int nb, struct cblock **b, struct patch **p)
{
	for (int i = 0; i < nb; i++) {
		b[i] = get(e, (uint64_t)i + 1);
		p[i] = put_byte(e, b[i], 0, (uint8_t)(0x11 * (i + 1)), 1, NULL, 0);
	}
	p[nb] = put_byte(e, b[0], 8, 0x55, 1, &p[nb - 1], 1);
}

/* With more blocks ready than a round holds, the round is filled with
 * blocks that go whole first: block 1, whose second change waits for
 * block 3's, is left for the next round rather than written with that
 * change rolled back (and written again after block 3). */
static void test_round_whole_first(void **state)
{
	struct cache_opts o = {.round_max_blocks = 2};
	struct cblock *b[3];
	struct patch *p[4];
	struct env e;
	size_t nw;

	(void)state;
	env_open(&e, &o);
	ready_behind(&e, 3, b, p);
	assert_int_equal(cache_flush_round(e.c, &nw), 0);
	assert_int_equal(nw, 2);
	assert_int_equal(mem_block(&e, 1)[0], 0);
	assert_int_equal(mem_block(&e, 2)[0], 0x22);
	assert_int_equal(mem_block(&e, 3)[0], 0x33);
	assert_int_equal(cache_sync(e.c), 0);
	assert_int_equal(mem_block(&e, 1)[8], 0x55);
	assert_int_equal(stats(&e).rounds, 2);
	assert_int_equal(stats(&e).rollback_writes, 0);
	env_done(&e, p, 4, b, 3);
}

/* A block left out whose waits are on ready blocks goes to the ready
 * list's tail and comes up whole: with a round of one block and block 1
 * waiting for block 4, rounds write blocks 2, 3 and 4, then block 1 with
 * nothing rolled back. */
static void test_round_passed_requeued(void **state)
{
	struct cache_opts o = {.round_max_blocks = 1};
	struct cblock *b[4];
	struct patch *p[5];
	struct env e;
	size_t nw;

	(void)state;
	env_open(&e, &o);
	ready_behind(&e, 4, b, p);
	assert_int_equal(cache_flush_round(e.c, &nw), 0);
	assert_int_equal(mem_block(&e, 2)[0], 0x22);
	assert_int_equal(cache_flush_round(e.c, &nw), 0);
	assert_int_equal(nw, 1);
	assert_int_equal(mem_block(&e, 1)[0], 0);
	assert_int_equal(mem_block(&e, 3)[0], 0x33);
	assert_int_equal(cache_sync(e.c), 0);
	assert_int_equal(mem_block(&e, 1)[8], 0x55);
	assert_int_equal(stats(&e).rounds, 4);
	assert_int_equal(stats(&e).rollback_writes, 0);
	env_done(&e, p, 5, b, 4);
}

/* A block whose waits are further off is left out of one round at most in
 * a row: block 1 waits for block 4, which waits for a hold and so is not
 * ready.  The first round writes block 2, the second block 1 with its
 * change rolled back. */
static void test_round_whole_first_once(void **state)
{
	struct cache_opts o = {.round_max_blocks = 1};
	struct cblock *b[4];
	struct patch *p[5], *hold;
	struct env e;
	size_t nw;

	(void)state;
	env_open(&e, &o);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &hold), 0);
	for (int i = 0; i < 4; i++)
		b[i] = get(&e, (uint64_t)i + 1);
	for (int i = 0; i < 3; i++)
		p[i] = put_byte(&e, b[i], 0, (uint8_t)(0x11 * (i + 1)), 1, NULL, 0);
	p[3] = put_byte(&e, b[3], 0, 0x44, 1, &hold, 1);
	p[4] = put_byte(&e, b[0], 8, 0x55, 1, &p[3], 1);
	assert_int_equal(cache_flush_round(e.c, &nw), 0);
	assert_int_equal(nw, 1);
	assert_int_equal(mem_block(&e, 1)[0], 0);
	assert_int_equal(mem_block(&e, 2)[0], 0x22);
	assert_int_equal(cache_flush_round(e.c, &nw), 0);
	assert_int_equal(nw, 1);
	assert_int_equal(mem_block(&e, 1)[0], 0x11);
	assert_int_equal(mem_block(&e, 1)[8], 0);
	assert_int_equal(stats(&e).rollback_writes, 1);
	patch_unhold(e.c, hold);
	assert_int_equal(cache_sync(e.c), 0);
	assert_int_equal(mem_block(&e, 1)[8], 0x55);
	patch_release(e.c, hold);
	env_done(&e, p, 5, b, 4);
}

/* Bit flips on one word commute; a byte change over a word with an unready
 * flip waits for it. */
static void test_bit_byte_overlap(void **state)
{
	struct env e;
	struct cblock *b;
	struct patch *held, *b1, *b2, *x, *h;
	struct cache_stats st;

	env_open(&e, NULL);
	b = get(&e, 1);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &held), 0);
	assert_int_equal(patch_create_bit(e.c, b, 8, 0x1, &held, 1, NULL, &b1), 0);
	/* no dependency: merges into a hard patch even on b1's word */
	assert_int_equal(patch_create_bit(e.c, b, 8, 0x100, NULL, 0, NULL, &b2), 0);
	assert_ptr_not_equal(b1, b2);
	st = stats(&e);
	assert_int_equal(st.patches_hard, 1);
	assert_int_equal(st.patches_soft, 1);
	/* a byte change over the word must wait for b1 */
	x = put_byte(&e, b, 6, 0xee, 4, NULL, 0);
	assert_ptr_not_equal(x, b2);
	assert_ptr_not_equal(x, b1);
	h = put_byte(&e, b, 100, 0x77, 1, NULL, 0);
	assert_ptr_equal(h, b2);
	assert_int_equal(cache_sync(e.c), -EAGAIN);
	/* written: b2's flip and h, not b1 and not x */
	assert_int_equal(mem_block(&e, 1)[8], 0x00);
	assert_int_equal(mem_block(&e, 1)[9], 0x01);
	assert_int_equal(mem_block(&e, 1)[6], 0x00);
	assert_int_equal(mem_block(&e, 1)[100], 0x77);
	assert_true(patch_committed(b2));
	assert_false(patch_committed(x));
	patch_unhold(e.c, held);
	assert_int_equal(cache_sync(e.c), 0);
	assert_int_equal(mem_block(&e, 1)[8], 0xee);
	assert_int_equal(mem_block(&e, 1)[9], 0xee);
	assert_int_equal(mem_block(&e, 1)[10], 0x00);
	assert_memory_equal(cblock_data(b), mem_block(&e, 1), BS);
	patch_release(e.c, held);
	patch_release(e.c, b1);
	patch_release(e.c, b2);
	patch_release(e.c, x);
	patch_release(e.c, h);
	cache_put(e.c, b);
	env_close(&e);
}

/* Flips of the same bit do not commute: set, clear (waiting), set again
 * must not let the second set reach disk as durable while the clear is
 * rolled back (the bit would read 0 on disk). */
static void test_same_bit_flips(void **state)
{
	struct env e;
	struct cblock *b;
	struct patch *held, *s1, *s2, *s3;

	env_open(&e, NULL);
	b = get(&e, 1);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &held), 0);
	assert_int_equal(patch_create_bit(e.c, b, 4, 0x1, NULL, 0, NULL, &s1), 0);
	assert_int_equal(patch_create_bit(e.c, b, 4, 0x1, &held, 1, NULL, &s2), 0);
	assert_int_equal(patch_create_bit(e.c, b, 4, 0x1, NULL, 0, NULL, &s3), 0);
	assert_int_equal(cblock_data(b)[4], 1);
	assert_int_equal(cache_sync(e.c), -EAGAIN);
	assert_true(patch_committed(s1));
	assert_false(patch_committed(s3));
	/* on disk: as after s1 */
	assert_int_equal(mem_block(&e, 1)[4], 1);
	patch_unhold(e.c, held);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(s3));
	assert_int_equal(mem_block(&e, 1)[4], 1);
	patch_release(e.c, held);
	patch_release(e.c, s1);
	patch_release(e.c, s2);
	patch_release(e.c, s3);
	cache_put(e.c, b);
	env_close(&e);
}

/* Flips on nearby words after the same patch (a file's blocks freed after
 * its inode clear) go into one bit patch, which is rolled back whole and
 * written whole; a flip that would need a new edge or is far away gets a
 * patch of its own. */
static void test_bit_near_words_merge(void **state)
{
	struct env e;
	struct cblock *b;
	struct patch *clear, *other, *h, *f[4], *far, *alone;
	struct cache_stats st;

	env_open(&e, NULL);
	b = get(&e, 1);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &clear), 0);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &other), 0);
	/* an allocation on one of the words: hard, written at once */
	assert_int_equal(patch_create_bit(e.c, b, 12, 0x80, NULL, 0, NULL, &h), 0);
	assert_int_equal(patch_create_bit(e.c, b, 8, 0x1, &clear, 1, NULL, &f[0]), 0);
	assert_int_equal(patch_create_bit(e.c, b, 12, 0x2, &clear, 1, NULL, &f[1]), 0);
	assert_int_equal(patch_create_bit(e.c, b, 20, 0x4, &clear, 1, NULL, &f[2]), 0);
	assert_int_equal(patch_create_bit(e.c, b, 4, 0x8, &clear, 1, NULL, &f[3]), 0);
	for (int i = 1; i < 4; i++)
		assert_ptr_equal(f[i], f[0]);
	st = stats(&e);
	assert_int_equal(st.patches_soft, 1);
	/* beyond the span a bit patch may cover */
	assert_int_equal(patch_create_bit(e.c, b, 200, 0x10, &clear, 1, NULL, &far), 0);
	assert_ptr_not_equal(far, f[0]);
	/* after another patch: the tail would gain an edge */
	assert_int_equal(patch_create_bit(e.c, b, 196, 0x20, &other, 1, NULL, &alone), 0);
	assert_ptr_not_equal(alone, far);
	st = stats(&e);
	assert_int_equal(st.patches_soft, 3);
	assert_int_equal(cache_sync(e.c), -EAGAIN);
	/* on disk: the allocation only */
	assert_int_equal(mem_block(&e, 1)[4], 0x00);
	assert_int_equal(mem_block(&e, 1)[8], 0x00);
	assert_int_equal(mem_block(&e, 1)[12], 0x80);
	assert_int_equal(mem_block(&e, 1)[20], 0x00);
	assert_int_equal(mem_block(&e, 1)[200], 0x00);
	patch_unhold(e.c, clear);
	assert_int_equal(cache_sync(e.c), -EAGAIN);
	assert_true(patch_committed(f[0]));
	assert_true(patch_committed(far));
	assert_false(patch_committed(alone));
	assert_int_equal(mem_block(&e, 1)[4], 0x08);
	assert_int_equal(mem_block(&e, 1)[8], 0x01);
	assert_int_equal(mem_block(&e, 1)[12], 0x82);
	assert_int_equal(mem_block(&e, 1)[20], 0x04);
	assert_int_equal(mem_block(&e, 1)[196], 0x00);
	assert_int_equal(mem_block(&e, 1)[200], 0x10);
	patch_unhold(e.c, other);
	assert_int_equal(cache_sync(e.c), 0);
	assert_memory_equal(cblock_data(b), mem_block(&e, 1), BS);
	patch_release(e.c, clear);
	patch_release(e.c, other);
	patch_release(e.c, h);
	for (int i = 0; i < 4; i++)
		patch_release(e.c, f[i]);
	patch_release(e.c, far);
	patch_release(e.c, alone);
	cache_put(e.c, b);
	env_close(&e);
}

/* cache_sync_patch writes what the patch needs, not everything dirty. */
static void test_sync_patch_targeted(void **state)
{
	struct env e;
	struct cblock *b1, *b2, *b3;
	struct patch *a, *b, *later, *col;

	env_open(&e, NULL);
	b1 = get(&e, 1);
	b2 = get(&e, 2);
	b3 = get(&e, 3);
	a = put_byte(&e, b1, 0, 1, 4, NULL, 0);
	b = put_byte(&e, b2, 0, 2, 4, &a, 1);
	assert_int_equal(patch_create_empty(e.c, &b, 1, &col), 0);
	later = put_byte(&e, b3, 0, 3, 4, NULL, 0);
	assert_int_equal(cache_sync_patch(e.c, col), 0);
	assert_true(patch_committed(col));
	assert_true(patch_committed(a));
	assert_false(patch_committed(later));
	assert_int_equal(mem_block(&e, 2)[0], 2);
	assert_int_equal(mem_block(&e, 3)[0], 0);
	assert_int_equal(stats(&e).blocks_dirty, 1);
	assert_int_equal(cache_sync(e.c), 0);
	assert_int_equal(mem_block(&e, 3)[0], 3);
	patch_release(e.c, a);
	patch_release(e.c, b);
	patch_release(e.c, col);
	patch_release(e.c, later);
	cache_put(e.c, b1);
	cache_put(e.c, b2);
	cache_put(e.c, b3);
	env_close(&e);
}

/* A device whose writes wait until the test lets them go, to act while a
 * round is in flight. */
struct gate_dev {
	struct bdev dev;
	struct bdev *inner;
	pthread_mutex_t m;
	pthread_cond_t cv;
	int state; /* 0 idle, 1 a write is waiting, 2 released */
	bool open; /* let every write through */
};

static int gate_read(struct bdev *d, uint64_t n, uint32_t cnt, void *buf)
{
	return bdev_read(((struct gate_dev *)d)->inner, n, cnt, buf);
}

static int gate_write(struct bdev *d, const struct bdev_write *w, size_t n)
{
	struct gate_dev *g = (struct gate_dev *)d;

	pthread_mutex_lock(&g->m);
	if (g->open) {
		pthread_mutex_unlock(&g->m);
		return bdev_write(g->inner, w, n);
	}
	g->state = 1;
	pthread_cond_broadcast(&g->cv);
	while (g->state != 2)
		pthread_cond_wait(&g->cv, &g->m);
	g->state = 0;
	pthread_mutex_unlock(&g->m);
	return bdev_write(g->inner, w, n);
}

static int gate_barrier(struct bdev *d)
{
	return bdev_barrier(((struct gate_dev *)d)->inner);
}

static void gate_destroy(struct bdev *d)
{
	(void)d;
}

static const struct bdev_ops gate_ops = {gate_read,    gate_write, gate_barrier,
					 gate_destroy, NULL,	   NULL};

/* Changes made while a round is in flight are not part of it, and never
 * merge into a patch in flight. */
static void *round_thread(void *arg)
{
	return (void *)(intptr_t)cache_flush_round(arg, NULL);
}

static void test_changes_during_round(void **state)
{
	struct gate_dev g = {.state = 0};
	struct bdev *mem;
	struct cache *c;
	struct cblock *b;
	struct patch *h, *n1, *n2;
	uint8_t v = 1, w2 = 2;
	pthread_t t;
	void *ret;
	struct cache_stats st;

	assert_int_equal(bdev_mem_create(BS, 8, NULL, 0, &mem), 0);
	g.dev.ops = &gate_ops;
	g.dev.block_size = BS;
	g.dev.nblocks = 8;
	g.inner = mem;
	pthread_mutex_init(&g.m, NULL);
	pthread_cond_init(&g.cv, NULL);
	assert_int_equal(cache_create(&g.dev, NULL, &c), 0);
	assert_int_equal(cache_get(c, 2, &b), 0);
	assert_int_equal(patch_create_byte(c, b, 0, 1, &v, NULL, 0, NULL, &h), 0);
	assert_int_equal(pthread_create(&t, NULL, round_thread, c), 0);
	pthread_mutex_lock(&g.m);
	while (g.state != 1)
		pthread_cond_wait(&g.cv, &g.m);
	pthread_mutex_unlock(&g.m);
	/* the round is in flight: h must not absorb this change */
	assert_int_equal(patch_create_byte(c, b, 1, 1, &w2, NULL, 0, NULL, &n1), 0);
	assert_ptr_not_equal(n1, h);
	/* ... but later changes merge into the new hard patch */
	assert_int_equal(patch_create_byte(c, b, 2, 1, &w2, NULL, 0, NULL, &n2), 0);
	assert_ptr_equal(n2, n1);
	cache_get_stats(c, &st);
	assert_int_equal(st.blocks_inflight, 1);
	pthread_mutex_lock(&g.m);
	g.state = 2;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.m);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_null(ret);
	assert_true(patch_committed(h));
	assert_false(patch_committed(n1));
	assert_int_equal(((uint8_t *)bdev_mem_data(mem))[2 * BS], 1);
	assert_int_equal(((uint8_t *)bdev_mem_data(mem))[2 * BS + 1], 0);
	patch_release(c, h);
	cache_get_stats(c, &st);
	assert_int_equal(st.blocks_dirty, 1);
	assert_int_equal(st.patches_hard, 1);
	/* the next round */
	g.open = true;
	assert_int_equal(cache_sync(c), 0);
	assert_true(patch_committed(n1));
	assert_int_equal(((uint8_t *)bdev_mem_data(mem))[2 * BS + 2], 2);
	patch_release(c, n1);
	patch_release(c, n2);
	cache_put(c, b);
	cache_destroy(c);
	bdev_destroy(mem);
	pthread_cond_destroy(&g.cv);
	pthread_mutex_destroy(&g.m);
}

/* A change ordered over a span: it waits for a pending change elsewhere in
 * the span (which waits for a held patch), while the same change made
 * plainly would be hard and written at once. */
static void test_span_ordering(void **state)
{
	struct env e;
	struct cblock *b;
	struct patch *h, *p, *s, *t;
	const struct rec_event *ev;
	uint8_t v[2] = {0x5a, 0x5a};
	size_t w;

	(void)state;
	env_open(&e, NULL);
	b = get(&e, 1);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &h), 0);
	p = put_byte(&e, b, 100, 0x11, 4, &h, 1);
	assert_int_equal(patch_create_byte_span(e.c, b, 0, 2, v, 1, 200, NULL, 0, NULL, &s),
			 -EINVAL);
	assert_int_equal(patch_create_byte_span(e.c, b, 0, 2, v, 0, BS + 1, NULL, 0, NULL, &s),
			 -EINVAL);
	assert_int_equal(patch_create_byte_span(e.c, b, 0, 2, v, 0, 200, NULL, 0, NULL, &s), 0);
	assert_int_equal(patch_create_byte(e.c, b, 300, 2, v, NULL, 0, NULL, &t), 0);
	assert_int_equal(cache_flush_round(e.c, NULL), 0);
	assert_true(patch_committed(t));
	assert_false(patch_committed(s));
	w = next_write(e.rec, 0, 1);
	assert_true(w != SIZE_MAX);
	ev = bdev_recorder_event(e.rec, w);
	assert_int_equal(((const uint8_t *)ev->data)[300], 0x5a);
	assert_int_equal(((const uint8_t *)ev->data)[0], 0);   /* s rolled back */
	assert_int_equal(((const uint8_t *)ev->data)[100], 0); /* p too */
	patch_unhold(e.c, h);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(s));
	assert_int_equal(mem_block(&e, 1)[0], 0x5a);
	assert_int_equal(mem_block(&e, 1)[100], 0x11);
	patch_release(e.c, h);
	patch_release(e.c, p);
	patch_release(e.c, s);
	patch_release(e.c, t);
	cache_put(e.c, b);
	env_close(&e);
}

/* A transaction as the journal writer runs it: the hook makes changes of
 * block 5 wait for a held patch (and lets block 6's through, telling which
 * patch carries them); the held patch is let go when a "commit" patch on
 * block 9 is durable; an empty patch over block 5's changes commits once
 * they are written. */
struct txn_env {
	struct cache_txn ops;
	struct patch *hold;
	struct patch *outside;
	unsigned joins, outsides;
};

static struct patch *txn_join(struct cache_txn *t, uint64_t blkno, bool pinned)
{
	struct txn_env *x = (struct txn_env *)t;

	(void)pinned;
	if (blkno != 5)
		return NULL;
	x->joins++;
	return x->hold;
}

static void txn_outside(struct cache_txn *t, struct patch *p)
{
	struct txn_env *x = (struct txn_env *)t;

	x->outsides++;
	x->outside = p;
}

static void test_txn_hook_unhold_after(void **state)
{
	struct txn_env x = {.ops = {.join = txn_join, .outside = txn_outside}};
	struct patch *a, *d, *cm, *tail;
	struct cblock *b5, *b6, *b9;
	struct env e;
	uint64_t five = 5;

	(void)state;
	env_open(&e, NULL);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &x.hold), 0);
	cache_set_txn(e.c, &x.ops);
	b5 = get(&e, 5);
	b6 = get(&e, 6);
	b9 = get(&e, 9);
	a = put_byte(&e, b5, 0, 7, 8, NULL, 0);
	d = put_byte(&e, b6, 0, 8, 8, NULL, 0);
	assert_int_equal(x.joins, 1);
	assert_int_equal(x.outsides, 1);
	assert_ptr_equal(x.outside, d);
	assert_int_equal(patch_create_empty_blocks(e.c, &five, 1, &tail), 0);
	cache_set_txn(e.c, NULL);
	/* block 5 waits for the hold; block 6 does not */
	assert_int_equal(cache_flush_round(e.c, NULL), 0);
	assert_true(patch_committed(d));
	assert_false(patch_committed(a));
	assert_false(patch_committed(tail));
	assert_int_not_equal(mem_block(&e, 5)[0], 7);
	/* the commit: once durable, the hold goes and block 5 follows */
	cm = put_byte(&e, b9, 0, 9, 8, &d, 1);
	assert_int_equal(patch_unhold_after(e.c, x.hold, cm), 0);
	assert_int_equal(cache_sync_patch(e.c, cm), 0);
	assert_true(patch_committed(cm));
	assert_true(patch_committed(x.hold));
	assert_false(patch_committed(a));
	assert_int_equal(cache_sync_patch(e.c, tail), 0);
	assert_true(patch_committed(a));
	assert_true(patch_committed(tail));
	assert_int_equal(mem_block(&e, 5)[0], 7);
	/* after a committed patch, the hold goes at once */
	patch_release(e.c, x.hold);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &x.hold), 0);
	assert_int_equal(patch_unhold_after(e.c, x.hold, cm), 0);
	assert_true(patch_committed(x.hold));
	patch_release(e.c, x.hold);
	patch_release(e.c, a);
	patch_release(e.c, d);
	patch_release(e.c, cm);
	patch_release(e.c, tail);
	cache_put(e.c, b5);
	cache_put(e.c, b6);
	cache_put(e.c, b9);
	env_close(&e);
}

/* patch_create_empty_range() waits for the pending changes of one block
 * that overlap a range and for no other: block 3 has a change at [0, 8)
 * that waits for a held patch and one at [100, 108) that waits for block
 * 4's; a range over the second commits without the first (rolled back
 * from the write), a range over the first only once the hold goes.  A
 * hard change (block 5's, with no befores) keeps no range: any range of
 * its block waits for it. */
static void test_empty_range(void **state)
{
	struct patch *h, *a, *b, *c, *d, *ra, *rb, *rd, *none;
	struct cblock *blk[3];
	struct env e;

	(void)state;
	env_open(&e, NULL);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &h), 0);
	blk[0] = get(&e, 3);
	blk[1] = get(&e, 4);
	blk[2] = get(&e, 5);
	c = put_byte(&e, blk[1], 0, 3, 8, NULL, 0);
	a = put_byte(&e, blk[0], 0, 1, 8, &h, 1);
	b = put_byte(&e, blk[0], 100, 2, 8, &c, 1);
	d = put_byte(&e, blk[2], 0, 4, 8, NULL, 0);
	assert_ptr_not_equal(a, b);
	assert_int_equal(patch_create_empty_range(e.c, 5, 200, 8, &rd), 0);
	assert_false(patch_committed(rd));
	assert_int_equal(patch_create_empty_range(e.c, 3, 104, 30, &rb), 0);
	assert_int_equal(patch_create_empty_range(e.c, 3, 4, 2, &ra), 0);
	assert_int_equal(patch_create_empty_range(e.c, 3, 8, 92, &none), 0);
	assert_true(patch_committed(none));
	patch_release(e.c, none);
	assert_int_equal(patch_create_empty_range(e.c, 9, 0, 8, &none), 0);
	assert_true(patch_committed(none));
	assert_int_equal(patch_create_empty_range(e.c, 3, BS - 4, 8, &none), -EINVAL);
	assert_int_equal(patch_create_empty_range(e.c, 3, 0, 0, &none), -EINVAL);
	assert_int_equal(cache_sync_patch(e.c, rb), 0);
	assert_true(patch_committed(b));
	assert_true(patch_committed(rb));
	assert_false(patch_committed(ra));
	assert_int_equal(mem_block(&e, 3)[100], 2);
	assert_int_equal(mem_block(&e, 3)[0], 0);
	patch_unhold(e.c, h);
	assert_int_equal(cache_sync_patch(e.c, ra), 0);
	assert_true(patch_committed(a));
	assert_int_equal(mem_block(&e, 3)[0], 1);
	assert_int_equal(cache_sync_patch(e.c, rd), 0);
	assert_true(patch_committed(d));
	env_done(&e, (struct patch *[]){h, a, b, c, d, ra, rb, rd, none}, 9, blk, 3);
}

/* Once a transaction's hold goes, its changes go home in one round: a
 * change that joins keeps its waits on its own block and on the hold only
 * (the commit stands for the others).  Block 5's change waits for block
 * 7's, directly and through an empty patch, and for a held empty patch (a
 * patchgroup's head while its first change is made); both join, so one
 * round after the hold writes both.  A change of the next transaction on
 * block 5 (a second hold) is rolled back from that write.  Without a
 * transaction the same graph takes two rounds and the head's release. */
static struct patch *txn_join_all(struct cache_txn *t, uint64_t blkno, bool pinned)
{
	struct txn_env *x = (struct txn_env *)t;

	(void)blkno;
	(void)pinned;
	x->joins++;
	return x->hold;
}

static void txn_cross_block(bool txn)
{
	struct txn_env x = {.ops = {.join = txn_join_all, .outside = txn_outside}};
	struct patch *p7, *set, *p5, *h1, *head, *next = NULL, *deps[3];
	struct cblock *b5, *b7;
	struct env e;
	size_t nw = 0;

	env_open(&e, NULL);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &h1), 0);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &head), 0);
	x.hold = h1;
	if (txn)
		cache_set_txn(e.c, &x.ops);
	b5 = get(&e, 5);
	b7 = get(&e, 7);
	p7 = put_byte(&e, b7, 0, 7, 8, NULL, 0);
	assert_int_equal(patch_create_empty(e.c, &p7, 1, &set), 0);
	deps[0] = p7;
	deps[1] = set;
	deps[2] = head;
	p5 = put_byte(&e, b5, 0, 5, 8, deps, 3);
	if (txn) {
		/* the next transaction changes block 5 too */
		assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &x.hold), 0);
		next = put_byte(&e, b5, 100, 6, 8, NULL, 0);
		assert_int_equal(x.joins, 3);
	}
	assert_int_equal(cache_flush_round(e.c, &nw), 0);
	if (txn) {
		assert_int_equal(nw, 0); /* nothing goes before the hold */
		patch_unhold(e.c, h1);
		assert_int_equal(cache_flush_round(e.c, &nw), 0);
		assert_int_equal(nw, 2);
		assert_true(patch_committed(p7));
		assert_true(patch_committed(p5));
		assert_false(patch_committed(next));
		assert_int_equal(mem_block(&e, 5)[0], 5);
		assert_int_equal(mem_block(&e, 5)[100], 0); /* rolled back */
		patch_unhold(e.c, x.hold);
		assert_int_equal(cache_sync(e.c), 0);
		assert_int_equal(mem_block(&e, 5)[100], 6);
		cache_set_txn(e.c, NULL);
		patch_release(e.c, x.hold);
		patch_release(e.c, next);
	} else {
		/* block 7 first, block 5 in a second round */
		assert_int_equal(nw, 1);
		assert_true(patch_committed(p7));
		assert_false(patch_committed(p5));
		assert_int_equal(cache_flush_round(e.c, &nw), 0);
		assert_false(patch_committed(p5));
		patch_unhold(e.c, head);
		assert_int_equal(cache_flush_round(e.c, &nw), 0);
		assert_true(patch_committed(p5));
		patch_unhold(e.c, h1);
	}
	patch_unhold(e.c, head);
	patch_release(e.c, head);
	patch_release(e.c, h1);
	patch_release(e.c, p7);
	patch_release(e.c, set);
	patch_release(e.c, p5);
	cache_put(e.c, b5);
	cache_put(e.c, b7);
	env_close(&e);
}

static void test_txn_one_round_home(void **state)
{
	(void)state;
	txn_cross_block(true);
	txn_cross_block(false);
}

/* Changes of one transaction next to each other on a block (pointers
 * stored in an indirect block one append at a time) share a patch: the
 * newest patch of the block already waits for all they wait for.  A
 * change of the next transaction gets its own, rolled back from the
 * write of the first; so does, without a transaction, the change next
 * to the first, whose tail waits for something it does not. */
static void txn_tail_merge(bool txn)
{
	struct txn_env x = {.ops = {.join = txn_join_all, .outside = txn_outside}};
	struct patch *h1, *d7, *d8, *soft, *p1, *p2, *p3 = NULL;
	struct cblock *b5, *b7, *b8;
	struct env e;

	env_open(&e, NULL);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &h1), 0);
	x.hold = h1;
	b5 = get(&e, 5);
	b7 = get(&e, 7);
	b8 = get(&e, 8);
	d7 = put_byte(&e, b7, 0, 7, 8, NULL, 0);
	d8 = put_byte(&e, b8, 0, 8, 8, NULL, 0);
	/* (a patch of block 5, so that the next ones keep undo data) */
	soft = put_byte(&e, b5, 200, 1, 4, &h1, 1);
	if (txn)
		cache_set_txn(e.c, &x.ops);
	p1 = put_byte(&e, b5, 0, 5, 4, &d7, 1);
	p2 = put_byte(&e, b5, 4, 6, 4, &d8, 1);
	if (!txn) {
		assert_ptr_not_equal(p2, p1);
		cache_set_txn(e.c, NULL);
		patch_unhold(e.c, h1);
		assert_int_equal(cache_sync(e.c), 0);
		goto out;
	}
	assert_ptr_equal(p2, p1);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &x.hold), 0);
	p3 = put_byte(&e, b5, 8, 9, 4, NULL, 0);
	assert_ptr_not_equal(p3, p1);
	patch_unhold(e.c, h1);
	assert_int_equal(cache_sync_patch(e.c, p1), 0);
	assert_false(patch_committed(p3));
	assert_int_equal(mem_block(&e, 5)[0], 5);
	assert_int_equal(mem_block(&e, 5)[4], 6);
	assert_int_equal(mem_block(&e, 5)[8], 0); /* rolled back */
	patch_unhold(e.c, x.hold);
	assert_int_equal(cache_sync(e.c), 0);
	assert_int_equal(mem_block(&e, 5)[8], 9);
	cache_set_txn(e.c, NULL);
	patch_release(e.c, x.hold);
	patch_release(e.c, p3);
out:
	assert_memory_equal(cblock_data(b5), mem_block(&e, 5), BS);
	patch_release(e.c, h1);
	patch_release(e.c, d7);
	patch_release(e.c, d8);
	patch_release(e.c, soft);
	patch_release(e.c, p1);
	patch_release(e.c, p2);
	cache_put(e.c, b5);
	cache_put(e.c, b7);
	cache_put(e.c, b8);
	env_close(&e);
}

static void test_txn_tail_merge(void **state)
{
	(void)state;
	txn_tail_merge(true);
	txn_tail_merge(false);
}

/* Where the writer allows it (cache_txn.wide), a joined change merges into
 * its block's newest patch across up to 256 bytes, here over a change of
 * the transaction before (an inode table block in an rm -rf).  The undo of
 * the widened patch keeps that older change: when the first hold goes,
 * the block is written with the older change and without any of the
 * newer transaction's, gap included.  Without the writer's leave the gap
 * is too wide and the change takes a patch of its own; wider than 256
 * bytes, it does anyway. */
static bool txn_wide(struct cache_txn *t, uint64_t blkno)
{
	(void)t;
	(void)blkno;
	return true;
}

static void txn_wide_merge(bool wide)
{
	struct txn_env x = {
	    .ops = {.join = txn_join_all, .outside = txn_outside, .wide = wide ? txn_wide : NULL}};
	struct patch *h1, *h2, *old, *q, *r, *far;
	struct cblock *b5;
	struct env e;

	env_open(&e, NULL);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &h1), 0);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &h2), 0);
	cache_set_txn(e.c, &x.ops);
	b5 = get(&e, 5);
	x.hold = h1;
	old = put_byte(&e, b5, 100, 0x11, 4, NULL, 0);
	x.hold = h2;
	q = put_byte(&e, b5, 0, 0x22, 4, NULL, 0);
	assert_ptr_not_equal(q, old);
	r = put_byte(&e, b5, 190, 0x33, 4, NULL, 0);   /* 186 bytes past q */
	far = put_byte(&e, b5, 480, 0x44, 4, NULL, 0); /* 290 past r */
	if (wide)
		assert_ptr_equal(r, q);
	else
		assert_ptr_not_equal(r, q);
	assert_ptr_not_equal(far, r);
	patch_unhold(e.c, h1);
	assert_int_equal(cache_sync_patch(e.c, old), 0);
	assert_false(patch_committed(q));
	assert_int_equal(mem_block(&e, 5)[100], 0x11);
	assert_int_equal(mem_block(&e, 5)[0], 0); /* rolled back */
	assert_int_equal(mem_block(&e, 5)[190], 0);
	assert_int_equal(mem_block(&e, 5)[480], 0);
	patch_unhold(e.c, h2);
	assert_int_equal(cache_sync(e.c), 0);
	assert_memory_equal(cblock_data(b5), mem_block(&e, 5), BS);
	cache_set_txn(e.c, NULL);
	patch_release(e.c, h1);
	patch_release(e.c, h2);
	patch_release(e.c, old);
	patch_release(e.c, q);
	patch_release(e.c, r);
	patch_release(e.c, far);
	cache_put(e.c, b5);
	env_close(&e);
}

static void test_txn_wide_merge(void **state)
{
	(void)state;
	txn_wide_merge(true);
	txn_wide_merge(false);
}

/* A data change whose scope's before waits for a held patch (an fsync=order
 * chain over a change that joined the transaction) joins too, as the
 * journal writer's join() does with a change that waits for a held patch,
 * unless unscoped() says the transaction keeps that order for it: then it
 * leaves the before out, stays outside and is written while the hold is
 * still held.  A before of its own that waits for the hold still makes it
 * join. */
static struct patch *txn_join_pinned(struct cache_txn *t, uint64_t blkno, bool pinned)
{
	struct txn_env *x = (struct txn_env *)t;

	if (blkno != 5 && !pinned)
		return NULL;
	x->joins++;
	return x->hold;
}

static bool txn_unscoped(struct cache_txn *t, uint64_t blkno)
{
	(void)t;
	return blkno == 6 || blkno == 8;
}

static void txn_unscoped_data(bool unscoped)
{
	struct txn_env x = {.ops = {.join = txn_join_pinned,
				    .outside = txn_outside,
				    .unscoped = unscoped ? txn_unscoped : NULL}};
	struct tscope ts = {.s = {ts_befores, ts_created}};
	struct patch *m, *d6, *d7, *d8;
	struct cblock *b5, *b6, *b7, *b8;
	uint8_t buf[8];
	struct env e;

	env_open(&e, NULL);
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &x.hold), 0);
	cache_set_txn(e.c, &x.ops);
	b5 = get(&e, 5);
	b6 = get(&e, 6);
	b7 = get(&e, 7);
	b8 = get(&e, 8);
	ts.c = e.c;
	assert_int_equal(patch_create_empty_held(e.c, NULL, 0, &ts.tail), 0);
	/* the scope's earlier change joins; its order point waits for it */
	m = put_byte(&e, b5, 0, 5, 8, NULL, 0);
	assert_int_equal(patch_create_empty(e.c, &m, 1, &ts.before), 0);
	memset(buf, 6, sizeof(buf));
	assert_int_equal(patch_create_byte(e.c, b6, 0, 8, buf, NULL, 0, &ts.s, &d6), 0);
	memset(buf, 7, sizeof(buf));
	assert_int_equal(patch_create_byte(e.c, b7, 0, 8, buf, NULL, 0, &ts.s, &d7), 0);
	memset(buf, 8, sizeof(buf));
	assert_int_equal(patch_create_byte(e.c, b8, 0, 8, buf, &m, 1, &ts.s, &d8), 0);
	/* block 7 (not unscoped) and block 8 (its own wait) join */
	assert_int_equal(x.joins, unscoped ? 3 : 4);
	assert_int_equal(x.outsides, unscoped ? 1 : 0);
	assert_int_equal(ts.created, 3);
	assert_int_equal(cache_flush_round(e.c, NULL), 0);
	assert_int_equal(patch_committed(d6), unscoped);
	assert_int_equal(mem_block(&e, 6)[0], unscoped ? 6 : 0);
	assert_false(patch_committed(d7));
	assert_false(patch_committed(d8));
	assert_false(patch_committed(m));
	cache_set_txn(e.c, NULL);
	patch_unhold(e.c, x.hold);
	patch_unhold(e.c, ts.tail);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(ts.tail));
	assert_int_equal(mem_block(&e, 7)[0], 7);
	patch_release(e.c, x.hold);
	patch_release(e.c, ts.tail);
	patch_release(e.c, ts.before);
	patch_release(e.c, m);
	patch_release(e.c, d6);
	patch_release(e.c, d7);
	patch_release(e.c, d8);
	cache_put(e.c, b5);
	cache_put(e.c, b6);
	cache_put(e.c, b7);
	cache_put(e.c, b8);
	env_close(&e);
}

static void test_txn_unscoped_data(void **state)
{
	(void)state;
	txn_unscoped_data(true);
	txn_unscoped_data(false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_basic_write_and_sync),
	    cmocka_unit_test(test_bad_arguments),
	    cmocka_unit_test(test_article_block_cycle),
	    cmocka_unit_test(test_article_none_one_round),
	    cmocka_unit_test(test_defer_block_waiting_on_round),
	    cmocka_unit_test(test_sync_keeps_rounds_of_chain_head),
	    cmocka_unit_test(test_sync_defers_block_nothing_waits_for),
	    cmocka_unit_test(test_sync_writes_block_others_wait_for),
	    cmocka_unit_test(test_sync_slack_writes_block_whole),
	    cmocka_unit_test(test_sync_slack_through_empties),
	    cmocka_unit_test(test_hard_patch_merging),
	    cmocka_unit_test(test_same_block_overlap_order),
	    cmocka_unit_test(test_undo_forms),
	    cmocka_unit_test(test_undo_let_go),
	    cmocka_unit_test(test_empty_patches),
	    cmocka_unit_test(test_settle_through_empties),
	    cmocka_unit_test(test_group_chain_one_write_per_turn),
	    cmocka_unit_test(test_held_blocks_sync),
	    cmocka_unit_test(test_write_fault),
	    cmocka_unit_test(test_connection_reset),
	    cmocka_unit_test(test_read_fault),
	    cmocka_unit_test(test_eviction),
	    cmocka_unit_test(test_dirty_limit),
	    cmocka_unit_test(test_dirty_limit_failing_device),
	    cmocka_unit_test(test_flusher_interval),
	    cmocka_unit_test(test_crowded_block_wakes_flusher),
	    cmocka_unit_test(test_pressure_rounds_gather),
	    cmocka_unit_test(test_failed_rounds_back_off),
	    cmocka_unit_test(test_scope_hooks),
	    cmocka_unit_test(test_round_limit),
	    cmocka_unit_test(test_round_whole_first),
	    cmocka_unit_test(test_round_passed_requeued),
	    cmocka_unit_test(test_round_whole_first_once),
	    cmocka_unit_test(test_bit_byte_overlap),
	    cmocka_unit_test(test_same_bit_flips),
	    cmocka_unit_test(test_bit_near_words_merge),
	    cmocka_unit_test(test_sync_patch_targeted),
	    cmocka_unit_test(test_changes_during_round),
	    cmocka_unit_test(test_span_ordering),
	    cmocka_unit_test(test_empty_range),
	    cmocka_unit_test(test_txn_hook_unhold_after),
	    cmocka_unit_test(test_txn_one_round_home),
	    cmocka_unit_test(test_txn_tail_merge),
	    cmocka_unit_test(test_txn_wide_merge),
	    cmocka_unit_test(test_txn_unscoped_data),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
