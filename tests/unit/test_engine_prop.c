/* Property tests of the patch engine: thousands of random patch DAGs with
 * random flush interleavings and injected faults, checked on the recorder's
 * log and on every crash state crashsim builds from it.
 *
 * The checker knows nothing of the engine's internals.  Every change writes
 * recognisable bytes: byte changes fill 2-byte slots of the first half of a
 * block with their 16-bit id, bit changes set bits no other change touches
 * in the second half.  From any block image the checker can then tell which
 * changes it carries (a slot showing a later writer of that slot carries the
 * earlier ones too), and whether one is torn.  The invariants:
 *   log:   a block write carries a change only if each of its dependencies
 *          is durable (in the image as of the last barrier) or, on the same
 *          block, carried by the same write; no change is ever torn; a
 *          durable change is never written back out.
 *   crash: in every crash state, a change that is on disk has all its
 *          dependencies on disk.
 * Both must find violations under CONSISTENCY_NONE, which shows they can.
 *
 * PROP_SEED and PROP_ITERS in the environment override the defaults.
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
#include "crash/crashsim.h"

#define BS	512
#define NB	6
#define SLOTS	128 /* 2-byte slots in [0, 256) */
#define BITBASE 256 /* bits live in [256, 512) */
#define MAXCH	200
#define MAXDEP	4  /* dependencies picked per change */
#define MAXD	40 /* dependencies kept per change (collectors) */

enum ctype { C_BYTE, C_BIT, C_EMPTY };

struct change {
	enum ctype type;
	int blk;
	uint32_t slot, nslots; /* byte */
	uint32_t word, mask;   /* bit: byte offset of the word, bits */
	int deps[MAXD];
	int ndeps;
	bool held;
	struct patch *p;
};

struct world {
	struct patch_scope scope; /* first: the callbacks cast back */
	int collector;		  /* held empty collecting scoped changes */
	int scope_ids[2];
	struct patch *scope_ptrs[2];
	int nscope, cur, add_errs;
	uint64_t collected;
	uint64_t rng;
	enum consistency mode;
	struct bdev *mem, *rec;
	struct cache *c;
	struct cblock *blk[NB];
	struct change ch[MAXCH + 1]; /* ids from 1 */
	int n;
	/* per block and slot: the ids that wrote it, in order */
	int hist[NB][SLOTS][MAXCH];
	int nhist[NB][SLOTS];
	uint32_t nextbit[NB];
	/* results */
	int log_violations, crash_violations, torn;
	size_t states, writes;
	uint64_t nrb_live;
	uint64_t merged, rollbacks, errors, rounds, nrb, dropped;
};

static uint64_t rnd(struct world *w)
{
	return splitmix(&w->rng);
}

static uint32_t below(struct world *w, uint32_t n)
{
	return n ? (uint32_t)(rnd(w) % n) : 0;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 0) : def;
}

/* ---- presence of a change in a block image ----------------------------- */

static int slot_val(const uint8_t *img, uint32_t s)
{
	return img[2 * s] | img[2 * s + 1] << 8;
}

static int hist_pos(struct world *w, int blk, uint32_t s, int id)
{
	for (int i = 0; i < w->nhist[blk][s]; i++)
		if (w->hist[blk][s][i] == id)
			return i;
	return -1;
}

/* 1 present, 0 absent, -1 torn. */
static int presence(struct world *w, int id, const uint8_t *img)
{
	struct change *c = &w->ch[id];
	int yes = 0, no = 0;

	if (c->type == C_BYTE) {
		for (uint32_t s = c->slot; s < c->slot + c->nslots; s++) {
			int v = slot_val(img, s), pv, pi;

			pi = hist_pos(w, c->blk, s, id);
			pv = v ? hist_pos(w, c->blk, s, v) : -1;
			if (v && pv < 0)
				return -1; /* bytes nobody wrote */
			if (pv >= pi)
				yes++;
			else
				no++;
		}
	} else {
		uint32_t word = (uint32_t)img[c->word] | (uint32_t)img[c->word + 1] << 8 |
				(uint32_t)img[c->word + 2] << 16 | (uint32_t)img[c->word + 3] << 24;

		for (int b = 0; b < 32; b++) {
			if (!(c->mask >> b & 1))
				continue;
			if (word >> b & 1)
				yes++;
			else
				no++;
		}
	}
	if (yes && no)
		return -1;
	return yes ? 1 : 0;
}

/* The block changes a change depends on, through empty changes. */
static void flat_deps(struct world *w, int id, int *out, int *nout, bool *seen)
{
	struct change *c = &w->ch[id];

	for (int i = 0; i < c->ndeps; i++) {
		int d = c->deps[i];

		if (seen[d])
			continue;
		seen[d] = true;
		if (w->ch[d].type == C_EMPTY)
			flat_deps(w, d, out, nout, seen);
		else
			out[(*nout)++] = d;
	}
}

/* ---- building random DAGs ---------------------------------------------- */

static int pick_deps(struct world *w, int *deps, struct patch **ptrs)
{
	int n = w->n ? (int)below(w, MAXDEP) : 0, k = 0;

	for (int i = 0; i < n; i++) {
		int d = 1 + (int)below(w, (uint32_t)w->n);
		bool dup = false;

		for (int j = 0; j < k; j++)
			dup |= deps[j] == d;
		if (dup)
			continue;
		deps[k] = d;
		ptrs[k] = w->ch[d].p;
		k++;
	}
	return k;
}

/* The scope, as patchgroups use it: extra befores for every change, and
 * a collector (held empty patch) that comes to depend on every change. */
static size_t scope_befores(struct patch_scope *s, struct patch *const **deps)
{
	struct world *w = (struct world *)s;

	*deps = w->scope_ptrs;
	return (size_t)w->nscope;
}

static void scope_created(struct patch_scope *s, struct patch *p)
{
	struct world *w = (struct world *)s;
	struct change *col;
	int err;

	if (!w->collector)
		return;
	col = &w->ch[w->collector];
	if (col->ndeps == MAXD) {
		w->collector = 0;
		return;
	}
	err = patch_add_depend(w->c, col->p, p);
	if (err == 0) {
		col->deps[col->ndeps++] = w->cur;
		w->collected++;
	} else {
		/* something came to depend on it, or it committed */
		if (err != -EBUSY)
			w->add_errs++;
		w->collector = 0;
	}
}

static void add_change(struct world *w)
{
	int id = ++w->n, r = (int)below(w, 10);
	struct change *c = &w->ch[id];
	struct patch *ptrs[MAXDEP];
	struct patch_scope *sc = NULL;

	memset(c, 0, sizeof(*c));
	c->ndeps = pick_deps(w, c->deps, ptrs);
	if (r < 2) {
		c->type = C_EMPTY;
		c->held = below(w, 4) == 0;
		if (c->held)
			assert_int_equal(
			    patch_create_empty_held(w->c, ptrs, (size_t)c->ndeps, &c->p), 0);
		else
			assert_int_equal(patch_create_empty(w->c, ptrs, (size_t)c->ndeps, &c->p),
					 0);
		return;
	}
	c->blk = (int)below(w, NB);
	w->cur = id;
	w->nscope = 0;
	if (below(w, 3) == 0 && w->n > 1) {
		for (int i = 0; i < 2; i++) {
			int d = 1 + (int)below(w, (uint32_t)w->n - 1);

			w->scope_ids[w->nscope] = d;
			w->scope_ptrs[w->nscope++] = w->ch[d].p;
			c->deps[c->ndeps++] = d;
		}
		sc = &w->scope;
	} else if (w->collector) {
		sc = &w->scope;
	}
	if (r < 4 && w->nextbit[c->blk] < 2048 - 32) {
		uint32_t nb = 1 + below(w, 3), first = w->nextbit[c->blk];

		/* fresh bits within one word */
		if (first / 32 != (first + nb - 1) / 32)
			first = (first / 32 + 1) * 32;
		c->type = C_BIT;
		c->word = BITBASE + first / 32 * 4;
		for (uint32_t i = 0; i < nb; i++)
			c->mask |= 1u << ((first + i) % 32);
		w->nextbit[c->blk] = first + nb;
		assert_int_equal(patch_create_bit(w->c, w->blk[c->blk], c->word, c->mask, ptrs,
						  (size_t)(c->ndeps - w->nscope), sc, &c->p),
				 0);
		return;
	}
	uint8_t buf[2 * 12];

	c->type = C_BYTE;
	c->nslots = 1 + below(w, 6);
	c->slot = below(w, SLOTS - c->nslots + 1);
	/* Few distinct places, so that changes overlap often. */
	if (below(w, 2))
		c->slot = below(w, 8) * 4;
	for (uint32_t s = 0; s < c->nslots; s++) {
		buf[2 * s] = (uint8_t)id;
		buf[2 * s + 1] = (uint8_t)(id >> 8);
		w->hist[c->blk][c->slot + s][w->nhist[c->blk][c->slot + s]++] = id;
	}
	assert_int_equal(patch_create_byte(w->c, w->blk[c->blk], 2 * c->slot, 2 * c->nslots, buf,
					   ptrs, (size_t)(c->ndeps - w->nscope), sc, &c->p),
			 0);
}

/* ---- checking the log -------------------------------------------------- */

static void check_log(struct world *w)
{
	static uint8_t durable[NB * BS], pending[NB * BS];
	size_t nev = bdev_recorder_count(w->rec);
	int flat[MAXCH], nflat;
	bool seen[MAXCH + 1];

	memcpy(durable, bdev_recorder_initial(w->rec), sizeof(durable));
	memcpy(pending, durable, sizeof(pending));
	for (size_t e = 0; e < nev; e++) {
		const struct rec_event *ev = bdev_recorder_event(w->rec, e);
		const uint8_t *img = ev->data;
		int blk = (int)ev->blkno;

		if (ev->kind == REC_BARRIER) {
			memcpy(durable, pending, sizeof(durable));
			continue;
		}
		w->writes++;
		for (int id = 1; id <= w->n; id++) {
			struct change *c = &w->ch[id];
			int pr;

			if (c->type == C_EMPTY || c->blk != blk)
				continue;
			pr = presence(w, id, img);
			if (pr < 0) {
				w->torn++;
				continue;
			}
			/* once durable, always written */
			if (presence(w, id, durable + blk * BS) == 1 && pr != 1) {
				if (getenv("PROP_DEBUG")) {
					fprintf(stderr,
						"# ev %zu: durable %d (type %d slot %u n %u) "
						"unwritten:",
						e, id, c->type, c->slot, c->nslots);
					for (uint32_t s = c->slot;
					     c->type == C_BYTE && s < c->slot + c->nslots; s++) {
						fprintf(stderr, " [%u: img %d dur %d hist", s,
							slot_val(img, s),
							slot_val(durable + blk * BS, s));
						for (int k = 0; k < w->nhist[blk][s]; k++)
							fprintf(stderr, " %d", w->hist[blk][s][k]);
						fprintf(stderr, "]");
					}
					fprintf(stderr, "\n");
				}
				w->log_violations++;
			}
			if (pr != 1)
				continue;
			memset(seen, 0, sizeof(seen));
			nflat = 0;
			flat_deps(w, id, flat, &nflat, seen);
			for (int i = 0; i < nflat; i++) {
				struct change *d = &w->ch[flat[i]];

				if (presence(w, flat[i], durable + d->blk * BS) == 1)
					continue;
				if (d->blk == blk && presence(w, flat[i], img) == 1)
					continue;
				if (getenv("PROP_DEBUG"))
					fprintf(stderr,
						"# ev %zu blk %d: %d (type %d) without %d (type %d "
						"blk %d)\n",
						e, blk, id, c->type, flat[i], d->type, d->blk);
				w->log_violations++;
			}
		}
		memcpy(pending + blk * BS, img, BS);
	}
}

static int crash_cb(const struct crash_state *st, void *arg)
{
	struct world *w = arg;
	const uint8_t *img = st->image;
	int flat[MAXCH], nflat;
	bool seen[MAXCH + 1];

	w->states++;
	for (int id = 1; id <= w->n; id++) {
		struct change *c = &w->ch[id];

		if (c->type == C_EMPTY)
			continue;
		if (presence(w, id, img + c->blk * BS) != 1)
			continue;
		memset(seen, 0, sizeof(seen));
		nflat = 0;
		flat_deps(w, id, flat, &nflat, seen);
		for (int i = 0; i < nflat; i++)
			if (presence(w, flat[i], img + w->ch[flat[i]].blk * BS) != 1)
				w->crash_violations++;
	}
	return 0;
}

/* ---- one random run ---------------------------------------------------- */

static void run_one(struct world *w, bool crash)
{
	struct cache_opts o = {.round_max_blocks = 1 + below(w, NB), .consistency = w->mode};
	int nch = 10 + (int)below(w, MAXCH - 10);

	w->n = 0;
	w->collector = 0;
	w->scope.befores = scope_befores;
	w->scope.created = scope_created;
	memset(w->nhist, 0, sizeof(w->nhist));
	memset(w->nextbit, 0, sizeof(w->nextbit));
	assert_int_equal(bdev_mem_create(BS, NB, NULL, 0, &w->mem), 0);
	assert_int_equal(bdev_recorder_create(w->mem, &w->rec), 0);
	assert_int_equal(cache_create(w->rec, &o, &w->c), 0);
	for (int b = 0; b < NB; b++)
		assert_int_equal(cache_get(w->c, (uint64_t)b, &w->blk[b]), 0);

	for (int i = 0; i < nch && w->n < MAXCH; i++) {
		uint32_t r;
		int err;

		add_change(w);
		r = below(w, 100);
		if (r < 8) {
			err = cache_flush_round(w->c, NULL);
			assert_true(err == 0 || err == -EIO);
		} else if (r < 12) {
			err = cache_sync_patch(w->c, w->ch[1 + below(w, (uint32_t)w->n)].p);
			assert_true(err == 0 || err == -EIO || err == -EAGAIN);
		} else if (r < 15) {
			bdev_mem_inject(w->mem, below(w, 2) ? BDEV_FAULT_WRITE : BDEV_FAULT_BARRIER,
					below(w, 3), 1, EIO);
		} else if (r < 21 && w->n < MAXCH) {
			/* a new collector: a held empty patch that every
			 * following scoped change is added to */
			struct change *c = &w->ch[++w->n];

			memset(c, 0, sizeof(*c));
			c->type = C_EMPTY;
			c->held = true;
			assert_int_equal(patch_create_empty_held(w->c, NULL, 0, &c->p), 0);
			w->collector = w->n;
		} else if (r < 24) {
			struct change *c = &w->ch[1 + below(w, (uint32_t)w->n)];

			if (c->held) {
				patch_unhold(w->c, c->p);
				c->held = false;
			}
		}
	}
	for (int id = 1; id <= w->n; id++)
		if (w->ch[id].held)
			patch_unhold(w->c, w->ch[id].p);
	bdev_mem_inject(w->mem, BDEV_FAULT_WRITE, 0, 0, 0);
	bdev_mem_inject(w->mem, BDEV_FAULT_BARRIER, 0, 0, 0);
	{
		struct cache_stats st;

		cache_get_stats(w->c, &st);
		w->nrb_live = st.patches_nrb;
	}
	assert_int_equal(cache_sync(w->c), 0);

	/* after a full sync everything is durable and the device equals the
	 * cache */
	for (int id = 1; id <= w->n; id++)
		assert_true(patch_committed(w->ch[id].p));
	for (int b = 0; b < NB; b++)
		assert_memory_equal(cblock_data(w->blk[b]),
				    (uint8_t *)bdev_mem_data(w->mem) + b * BS, BS);
	check_log(w);
	if (crash) {
		struct crash_opts co = {.max_exhaustive = 6, .samples = 8, .seed = rnd(w)};

		assert_int_equal(crash_enumerate(w->rec, &co, crash_cb, w, NULL), 0);
	}
	for (int id = 1; id <= w->n; id++)
		patch_release(w->c, w->ch[id].p);
	for (int b = 0; b < NB; b++)
		cache_put(w->c, w->blk[b]);
	{
		struct cache_stats st;

		cache_get_stats(w->c, &st);
		w->merged += st.patches_merged;
		w->nrb += w->nrb_live;
		w->rollbacks += st.rollback_writes;
		w->dropped += st.undo_dropped;
		w->errors += st.write_errors + st.barrier_errors;
		w->rounds += st.rounds;
		assert_int_equal(st.engine_bytes, 0);
		assert_int_equal(st.blocks_dirty, 0);
	}
	cache_destroy(w->c);
	bdev_destroy(w->rec);
}

static struct world *world_new(enum consistency mode, uint64_t seed)
{
	struct world *w = calloc(1, sizeof(*w));

	assert_non_null(w);
	w->mode = mode;
	w->rng = seed;
	return w;
}

static void test_random_dags_softupdates(void **state)
{
	uint64_t seed = env_u64("PROP_SEED", 20071014);
	long iters = (long)env_u64("PROP_ITERS", 5000);
	struct world *w = world_new(CONSISTENCY_SOFTUPDATES, seed);

	for (long i = 0; i < iters; i++) {
		run_one(w, i % 2 == 0);
		if (w->log_violations || w->crash_violations || w->torn) {
			fprintf(stderr, "# seed %llu iteration %ld: log %d crash %d torn %d\n",
				(unsigned long long)seed, i, w->log_violations, w->crash_violations,
				w->torn);
			fail();
		}
	}
	fprintf(stderr, "# %ld runs, %zu crash states, %zu block writes checked\n", iters,
		w->states, w->writes);
	fprintf(stderr, "# %llu changes added to collectors\n", (unsigned long long)w->collected);
	fprintf(stderr,
		"# %llu rounds, %llu merges, %llu NRB patches, %llu rollback writes, "
		"%llu I/O errors, %llu patches without undo before their write\n",
		(unsigned long long)w->rounds, (unsigned long long)w->merged,
		(unsigned long long)w->nrb, (unsigned long long)w->rollbacks,
		(unsigned long long)w->errors, (unsigned long long)w->dropped);
	/* the runs exercise what they are meant to */
	assert_true(w->states > 1000);
	assert_true(w->merged > 100);
	assert_true(w->nrb > 100);
	assert_true(w->collected > 100);
	assert_int_equal(w->add_errs, 0);
	assert_true(w->rollbacks > 100);
	assert_true(w->errors > 100);
	assert_true(w->dropped > 100);
	free(w);
}

/* With ordering off the same checks must fail: they can find violations. */
static void test_random_dags_none_detected(void **state)
{
	uint64_t seed = env_u64("PROP_SEED", 20071014);
	struct world *w = world_new(CONSISTENCY_NONE, seed);

	for (long i = 0; i < 100; i++)
		run_one(w, true);
	fprintf(stderr, "# none: %d log violations, %d crash violations in %zu states\n",
		w->log_violations, w->crash_violations, w->states);
	assert_int_equal(w->torn, 0);
	assert_true(w->log_violations > 0);
	assert_true(w->crash_violations > 0);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_dags_softupdates),
	    cmocka_unit_test(test_random_dags_none_detected),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
