/* The overlap index of the patch engine (patch.c): a change must follow the
 * older soft patches of its block that it overlaps, and the index only
 * saves looking at the others.  Random changes (byte, byte with a wider
 * span, bit flips; with and without explicit dependencies, among them a
 * chain of held empty patches like chained patchgroups), with rounds and
 * discards in between, and before each change the set the engine finds
 * through the index is compared with one worked out here from the block's
 * whole list:
 *
 *   S    = the soft patches of the list that overlap the span (for a bit
 *          flip, a bit patch only if it flips one of the same bits);
 *   deps = the members q of S none of whose newest 8 afters is in S (the
 *          engine's already_before() pruning: a later member that waits
 *          for q stands for it);
 *   cand = the newest soft patch overlapping the change's own bytes.
 *
 * After each step the index itself is checked against the list: under
 * each 64th, the soft patches touching it in list order, less those it
 * marks covered, each of which must be.  The comparisons look inside the
 * engine, so they live beside it (engine/ovcheck.c).
 *
 * OVIX_SEED and OVIX_STEPS in the environment override the defaults; the
 * seed is printed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "util/splitmix.h"
#include "bdev/bdev.h"
#include "engine/cache.h"
#include "engine/ovcheck.h"

#define BS   512  /* 64ths of 8 bytes */
#define NBLK 4	  /* blocks the random changes go to */
#define DEAD NBLK /* a block whose patches get discarded */
#define NREF 48	  /* patches kept referenced, to depend on */

struct world {
	uint64_t rng;
	struct bdev *mem;
	struct cache *c;
	struct patch *refs[NREF]; /* ring of recent patches */
	size_t nref;
	struct patch *held, *prev_held; /* the chain of held empty patches */
	struct ovcheck_seen seen;
	size_t discards, rounds;
};

static uint32_t below(struct world *w, uint32_t n)
{
	return (uint32_t)(splitmix(&w->rng) % n);
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 0) : def;
}

/* Compare the engine's answer for the change about to be made with the
 * brute-force one, by the index and by the whole list. */
static void check(struct world *w, struct cblock *b, bool bit, uint32_t off, uint32_t len,
		  uint32_t mask, uint32_t soff, uint32_t slen)
{
	char err[256];

	if (ovcheck_change(w->c, b, bit, off, len, mask, soff, slen, &w->seen, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		fail();
	}
}

/* Each block's index, where it has one, against the block's list. */
static void check_index(struct world *w)
{
	char err[256];

	for (uint64_t n = 0; n <= DEAD; n++)
		if (ovcheck_index(w->c, n, &w->seen, err, sizeof(err))) {
			fprintf(stderr, "%s\n", err);
			fail();
		}
}

static void keep(struct world *w, struct patch *p)
{
	size_t i = w->nref++ % NREF;

	patch_release(w->c, w->refs[i]);
	w->refs[i] = p;
}

/* A new link of the chain: held, after the previous one, which lets go of
 * the one before it (a group closes once the next is under way). */
static void next_group(struct world *w)
{
	struct patch *h;

	assert_int_equal(patch_create_empty_held(w->c, &w->held, w->held ? 1 : 0, &h), 0);
	if (w->prev_held) {
		patch_unhold(w->c, w->prev_held);
		patch_release(w->c, w->prev_held);
	}
	w->prev_held = w->held;
	w->held = h;
}

/* Offsets gather on a few hot spots of the block, so that patches pile up
 * over the same bytes (a directory's mtime, an inode) as well as apart. */
static uint32_t pick_off(struct world *w, uint32_t len)
{
	static const uint32_t hot[] = {0, 16, 100, 248, 256, 384};
	uint32_t o;

	if (below(w, 3))
		o = hot[below(w, 6)] + below(w, 24);
	else
		o = below(w, BS);
	return o + len > BS ? BS - len : o;
}

static void one_change(struct world *w)
{
	uint64_t blkno = below(w, NBLK);
	struct patch *deps[4], *p = NULL;
	size_t nd = 0;
	uint8_t buf[BS];
	struct cblock *b;
	uint32_t r = below(w, 100);

	assert_int_equal(cache_get(w->c, blkno, &b), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)splitmix(&w->rng);
	/* dependencies: none (hard patches), recent patches, the group */
	if (below(w, 4)) {
		uint32_t k = 1 + below(w, 3);

		for (uint32_t i = 0; i < k && w->nref; i++) {
			struct patch *d =
			    w->refs[below(w, w->nref < NREF ? (uint32_t)w->nref : NREF)];

			if (d)
				deps[nd++] = d;
		}
		if (w->held && below(w, 2))
			deps[nd++] = w->held;
	}
	if (r < 30) {
		uint32_t word = (pick_off(w, 4) & ~3u), mask = 0;

		while (!mask)
			mask = (1u << below(w, 32)) | (below(w, 2) ? 1u << below(w, 32) : 0);
		check(w, b, true, word, 4, mask, word, 4);
		assert_int_equal(patch_create_bit(w->c, b, word, mask, deps, nd, NULL, &p), 0);
	} else if (r < 85 || r >= 98) {
		uint32_t len = r >= 98 ? BS : r < 70 ? 1 + below(w, 8) : 1 + below(w, 48);
		uint32_t off = pick_off(w, len);

		check(w, b, false, off, len, 0, off, len);
		assert_int_equal(patch_create_byte(w->c, b, off, len, buf, deps, nd, NULL, &p), 0);
	} else {
		/* a change ordered after whatever overlaps a wider span (a
		 * directory entry after the record it joins) */
		uint32_t len = 1 + below(w, 8), off = pick_off(w, len);
		uint32_t so = off - (off < 16 ? off : below(w, 16));
		uint32_t se = off + len + below(w, 16);
		uint32_t sl = (se > BS ? BS : se) - so;

		check(w, b, false, off, len, 0, so, sl);
		assert_int_equal(
		    patch_create_byte_span(w->c, b, off, len, buf, so, sl, deps, nd, NULL, &p), 0);
	}
	cache_put(w->c, b);
	keep(w, p);
}

static struct patch *some_change(struct world *w, uint64_t blkno, uint32_t off, uint32_t len,
				 struct patch *const *deps, size_t nd)
{
	uint8_t buf[64];
	struct cblock *b;
	struct patch *p;

	for (uint32_t i = 0; i < len; i++)
		buf[i] = (uint8_t)splitmix(&w->rng);
	assert_int_equal(cache_get(w->c, blkno, &b), 0);
	check(w, b, false, off, len, 0, off, len);
	assert_int_equal(patch_create_byte(w->c, b, off, len, buf, deps, nd, NULL, &p), 0);
	cache_put(w->c, b);
	return p;
}

/* A dead block: a few changes to it (after some change elsewhere that no
 * group holds up), a pointer to it on another block, and a clear of the
 * pointer, whose patch is what lets cache_discard() throw the block's
 * patches away (and fold the pointer into the clear). */
static void dead_block(struct world *w)
{
	struct patch *d = NULL, *x = NULL, *ptr, *cl;
	uint64_t home = below(w, NBLK);
	uint32_t n = 1 + below(w, 8), off = pick_off(w, 8);

	for (size_t i = 0; i < NREF && !d; i++) {
		struct patch *r = w->refs[i];

		if (r && ovcheck_patch_free(r))
			d = r;
	}
	if (!d)
		return;
	for (uint32_t i = 0; i < n; i++) {
		patch_release(w->c, x);
		x = some_change(w, DEAD, pick_off(w, 16), 1 + below(w, 16), &d, 1);
	}
	ptr = some_change(w, home, off, 8, &x, 1);
	/* (without a dependency of its own it merges into the pointer; with
	 * the group's, it cannot, and the discard folds the pointer into it) */
	cl = some_change(w, home, off + below(w, 4), 4, &w->held, below(w, 2));
	w->discards += cache_discard(w->c, DEAD, cl) > 0;
	patch_release(w->c, x);
	keep(w, ptr);
	keep(w, cl);
}

static void run(uint64_t seed, size_t steps, struct world *w)
{
	struct cache_opts o = {.max_blocks = 64, .dirty_limit = 64};

	memset(w, 0, sizeof(*w));
	w->rng = seed;
	assert_int_equal(bdev_mem_create(BS, NBLK + 1, NULL, 0, &w->mem), 0);
	assert_int_equal(cache_create(w->mem, &o, &w->c), 0);
	ovcheck_set_min(w->c, 4); /* every block with a few patches has an index */
	next_group(w);
	for (size_t i = 0; i < steps; i++) {
		uint32_t r = below(w, 1000);

		if (r < 15)
			next_group(w);
		else if (r < 60) {
			assert_int_equal(cache_flush_round(w->c, NULL), 0);
			w->rounds++;
		} else if (r < 100)
			dead_block(w);
		else
			one_change(w);
		check_index(w);
	}
	for (size_t i = 0; i < NREF; i++)
		patch_release(w->c, w->refs[i]);
	if (w->prev_held) {
		patch_unhold(w->c, w->prev_held);
		patch_release(w->c, w->prev_held);
	}
	patch_unhold(w->c, w->held);
	patch_release(w->c, w->held);
	assert_int_equal(cache_sync(w->c), 0);
	cache_destroy(w->c);
	bdev_destroy(w->mem);
}

static void test_index_matches_whole_list(void **state)
{
	uint64_t seed = env_u64("OVIX_SEED", 0x5eed0f1dull);
	size_t steps = (size_t)env_u64("OVIX_STEPS", 6000);
	size_t discards = 0;
	struct world w;

	(void)state;
	for (int k = 0; k < 4; k++) {
		printf("ovix: seed %#llx, %zu steps\n", (unsigned long long)(seed + k), steps);
		run(seed + k, steps, &w);
		printf("ovix: %zu changes compared (%zu through the index, %zu with "
		       "befores), %zu rounds, %zu discards, up to %zu patches a block, "
		       "%zu patches left out as covered over all checks\n",
		       w.seen.compared, w.seen.indexed, w.seen.nonempty, w.rounds, w.discards,
		       w.seen.longest, w.seen.covered);
		/* the cases the comparison is about did occur */
		assert_true(w.seen.indexed > w.seen.compared / 2);
		assert_true(w.seen.nonempty > w.seen.compared / 4);
		assert_true(w.rounds > 0 && w.seen.blocks_indexed > steps && w.seen.covered > 0);
		discards += w.discards;
	}
	assert_true(discards > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_index_matches_whole_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
