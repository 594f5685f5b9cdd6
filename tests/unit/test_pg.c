/* Patchgroups in the engine (lib/pg/pg.c) and caller resolution (lib/pg/scope.c),
 * with no daemon: the rules of design.md §5 with their errnos, "a refused
 * call changes nothing", ordering of a random DAG of groups checked on every
 * crash state of a recorder log (and shown to fail with ordering off), and
 * the pid-and-start-time logic of scopes over a fake /proc.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>

#include "bdev/bdev.h"
#include "engine/cache.h"
#include "crash/crashsim.h"
#include "proto/ctl.h"
#include "ext2/e2.h"
#include "pg/caller.h"
#include "fstitch/patchgroup.h"
#include "pg/pgsrv.h"
#include "e2test_util.h"
#include "engine/pgeng.h"
#include "pg/scope.h"

#define BS	1024
#define NBLOCKS 64

struct fx {
	struct bdev *rec;
	struct cache *c;
	struct pgeng *e;
};

static void fx_open(struct fx *f, enum consistency mode)
{
	struct bdev *mem;
	struct cache_opts co = {.consistency = mode, .flush_interval_ms = 60000};

	assert_int_equal(bdev_mem_create(BS, NBLOCKS, NULL, 0, &mem), 0);
	assert_int_equal(bdev_recorder_create(mem, &f->rec), 0);
	assert_int_equal(cache_create(f->rec, &co, &f->c), 0);
	assert_int_equal(pgeng_create(f->c, &f->e), 0);
}

static void fx_close(struct fx *f)
{
	pgeng_destroy(f->e);
	cache_sync(f->c);
	cache_destroy(f->c);
	bdev_destroy(f->rec);
}

/* One byte at (blk, off) set to v, as a change made by a process that has
 * groups g[0..ng) engaged. */
static void write_in(struct fx *f, struct pg_group **g, size_t ng, uint64_t blk, uint32_t off,
		     uint8_t v)
{
	struct pg_op op = {0};
	struct cblock *b;

	pgeng_op_begin(f->e, &op, g, ng, NULL);
	assert_int_equal(cache_get(f->c, blk, &b), 0);
	assert_int_equal(patch_create_byte(f->c, b, off, 1, &v, NULL, 0, pgeng_op_scope(&op), NULL),
			 0);
	cache_put(f->c, b);
	pgeng_op_end(&op);
	assert_int_equal(op.lost, 0);
}

static void assert_same(struct fx *f, int64_t id, const struct pg_info *was)
{
	struct pg_info now;

	assert_int_equal(pgeng_info(f->e, id, &now), 0);
	assert_int_equal(now.id, was->id);
	assert_int_equal(now.owner, was->owner);
	assert_int_equal(now.state, was->state);
	assert_int_equal(now.engaged, was->engaged);
	assert_int_equal(now.nbefores, was->nbefores);
	assert_int_equal(now.nafters, was->nafters);
	assert_int_equal(now.nchanges, was->nchanges);
}

static void snap(struct fx *f, int64_t id, struct pg_info *in)
{
	memset(in, 0, sizeof(*in));
	assert_int_equal(pgeng_info(f->e, id, in), 0);
}

static void test_ids(void **state)
{
	struct fx f;
	int64_t a, b, c;
	struct pg_info in;

	fx_open(&f, CONSISTENCY_SOFTUPDATES);
	assert_int_equal(pgeng_group_create(f.e, 0, &a), 0);
	assert_int_equal(pgeng_group_create(f.e, 0, &b), 0);
	assert_true(a > 0);
	assert_true(b > a);
	/* Ids are never reused, even after a group is closed and forgotten. */
	assert_int_equal(pgeng_close(f.e, a, 0), 0);
	assert_int_equal(cache_sync(f.c), 0);
	assert_int_equal(pgeng_group_create(f.e, 0, &c), 0);
	assert_true(c > b);
	snap(&f, a, &in);
	assert_true(in.state & PG_ST_RETIRED);
	assert_int_equal(pgeng_info(f.e, c + 1, &in), -ENOENT);
	assert_int_equal(pgeng_info(f.e, 0, &in), -EINVAL);
	assert_int_equal(pgeng_info(f.e, -3, &in), -EINVAL);
	/* listing skips the forgotten group */
	assert_int_equal(pgeng_info_next(f.e, 1, &in), 0);
	assert_int_equal(in.id, b);
	assert_int_equal(pgeng_info_next(f.e, b + 1, &in), 0);
	assert_int_equal(in.id, c);
	assert_int_equal(pgeng_info_next(f.e, c + 1, &in), -ENOENT);
	{
		struct pg_summary sum;

		pgeng_summary(f.e, &sum);
		assert_int_equal(sum.groups, 2);
		assert_int_equal(sum.closed, 0);
		assert_int_equal(sum.last_id, c);
	}
	fx_close(&f);
}

static void test_depend_refusals(void **state)
{
	struct fx f;
	int64_t a, b, x, y;
	struct pg_group *g;
	struct pg_info ia, ib, ix, iy;

	fx_open(&f, CONSISTENCY_SOFTUPDATES);
	assert_int_equal(pgeng_group_create(f.e, 0, &a), 0);
	assert_int_equal(pgeng_group_create(f.e, 0, &b), 0);
	snap(&f, a, &ia);
	snap(&f, b, &ib);

	/* A == B */
	assert_int_equal(pgeng_depend(f.e, a, a, 0), -ELOOP);
	/* unknown and invalid ids */
	assert_int_equal(pgeng_depend(f.e, a, 999, 0), -ENOENT);
	assert_int_equal(pgeng_depend(f.e, 999, a, 0), -ENOENT);
	assert_int_equal(pgeng_depend(f.e, 0, a, 0), -EINVAL);
	assert_int_equal(pgeng_depend(f.e, a, -1, 0), -EINVAL);
	assert_same(&f, a, &ia);
	assert_same(&f, b, &ib);

	/* B engaged at that moment */
	assert_int_equal(pgeng_engage(f.e, b, 0, &g), 0);
	snap(&f, a, &ia);
	snap(&f, b, &ib);
	assert_int_equal(pgeng_depend(f.e, b, a, 0), -EBUSY);
	assert_same(&f, a, &ia);
	assert_same(&f, b, &ib);
	pgeng_disengage(f.e, g);
	assert_int_equal(pgeng_depend(f.e, b, a, 0), 0);
	snap(&f, b, &ib);
	assert_true(ib.state & PG_ST_SEALED);
	assert_int_equal(ib.nafters, 1);
	snap(&f, a, &ia);
	assert_int_equal(ia.nbefores, 1);

	/* Rule 2: a sealed group can never be engaged again. */
	assert_int_equal(pgeng_engage(f.e, b, 0, &g), -EROFS);
	assert_same(&f, b, &ib);

	/* A already has afters: x -> b refused, since b has an after (a). */
	assert_int_equal(pgeng_group_create(f.e, 0, &x), 0);
	snap(&f, x, &ix);
	assert_int_equal(pgeng_depend(f.e, x, b, 0), -EROFS);
	assert_same(&f, x, &ix);
	assert_same(&f, b, &ib);

	/* Rule 3: the first change releases a group: no more befores. */
	assert_int_equal(pgeng_group_create(f.e, 0, &y), 0);
	assert_int_equal(pgeng_engage(f.e, y, 0, &g), 0);
	write_in(&f, &g, 1, 3, 0, 7);
	pgeng_disengage(f.e, g);
	snap(&f, y, &iy);
	assert_true(iy.state & PG_ST_RELEASED);
	assert_int_equal(iy.nchanges, 1);
	snap(&f, x, &ix);
	assert_int_equal(pgeng_depend(f.e, x, y, 0), -EALREADY);
	assert_same(&f, x, &ix);
	assert_same(&f, y, &iy);
	/* An engaged but unchanged group may still gain befores. */
	assert_int_equal(pgeng_engage(f.e, x, 0, &g), 0);
	assert_int_equal(pgeng_depend(f.e, y, x, 0), 0);
	pgeng_disengage(f.e, g);
	fx_close(&f);
}

static void test_access(void **state)
{
	struct fx f;
	int64_t a, b, r;
	struct pg_group *g;
	struct pg_info ia, ib;

	fx_open(&f, CONSISTENCY_SOFTUPDATES);
	assert_int_equal(pgeng_group_create(f.e, 1000, &a), 0);
	assert_int_equal(pgeng_group_create(f.e, 1001, &b), 0);
	assert_int_equal(pgeng_group_create(f.e, 1001, &r), 0);
	snap(&f, a, &ia);
	snap(&f, b, &ib);
	assert_int_equal(ia.owner, 1000);
	/* uid 1001 may touch b but not a, in either role. */
	assert_int_equal(pgeng_depend(f.e, a, b, 1001), -EPERM);
	assert_int_equal(pgeng_depend(f.e, b, a, 1001), -EPERM);
	assert_int_equal(pgeng_engage(f.e, a, 1001, &g), -EPERM);
	assert_int_equal(pgeng_sync(f.e, a, 1001), -EPERM);
	assert_int_equal(pgeng_close(f.e, a, 1001), -EPERM);
	assert_same(&f, a, &ia);
	assert_same(&f, b, &ib);
	/* the owner may, and root may */
	assert_int_equal(pgeng_sync(f.e, a, 1000), 0);
	assert_int_equal(pgeng_depend(f.e, r, b, 1001), 0);
	assert_int_equal(pgeng_depend(f.e, a, b, 0), 0);
	assert_int_equal(pgeng_engage(f.e, a, 0, &g), -EROFS); /* now sealed */
	assert_int_equal(pgeng_close(f.e, a, 1000), 0);
	fx_close(&f);
}

/* One user cannot make the daemon keep unbounded groups; root is not
 * bounded, and durable closed groups stop counting. */
static void test_uid_limit(void **state)
{
	struct fx f;
	int64_t a, b, c;

	fx_open(&f, CONSISTENCY_SOFTUPDATES);
	pgeng_set_uid_limit(f.e, 2);
	assert_int_equal(pgeng_group_create(f.e, 1000, &a), 0);
	assert_int_equal(pgeng_group_create(f.e, 1000, &b), 0);
	assert_int_equal(pgeng_group_create(f.e, 1000, &c), -EDQUOT);
	assert_int_equal(pgeng_group_create(f.e, 1001, &c), 0);
	assert_int_equal(pgeng_group_create(f.e, 0, &c), 0);
	assert_int_equal(pgeng_group_create(f.e, 0, &c), 0);
	assert_int_equal(pgeng_group_create(f.e, 0, &c), 0);
	assert_int_equal(pgeng_close(f.e, a, 1000), 0);
	assert_int_equal(cache_sync(f.c), 0);
	assert_int_equal(pgeng_group_create(f.e, 1000, &c), 0);
	assert_int_equal(pgeng_group_create(f.e, 1000, &c), -EDQUOT);
	fx_close(&f);
}

static void test_closed_and_retired(void **state)
{
	struct fx f;
	int64_t a, b, c;
	struct pg_group *g;
	struct pg_info in;

	fx_open(&f, CONSISTENCY_SOFTUPDATES);
	assert_int_equal(pgeng_group_create(f.e, 0, &a), 0);
	assert_int_equal(pgeng_group_create(f.e, 0, &b), 0);
	assert_int_equal(pgeng_engage(f.e, a, 0, &g), 0);
	write_in(&f, &g, 1, 5, 0, 1);
	pgeng_disengage(f.e, g);
	assert_int_equal(pgeng_close(f.e, a, 0), 0);
	/* closed: no engage, not an after, no second close ... */
	assert_int_equal(pgeng_engage(f.e, a, 0, &g), -ENOENT);
	assert_int_equal(pgeng_depend(f.e, b, a, 0), -ENOENT);
	assert_int_equal(pgeng_close(f.e, a, 0), -ENOENT);
	/* ... but still a before, and syncable, while not yet durable */
	snap(&f, a, &in);
	assert_false(in.state & PG_ST_RETIRED);
	assert_int_equal(pgeng_depend(f.e, a, b, 0), 0);
	assert_int_equal(pgeng_sync(f.e, a, 0), 0);
	/* durable: forgotten; naming it as a before is a no-op */
	snap(&f, a, &in);
	assert_true(in.state & PG_ST_RETIRED);
	assert_int_equal(pgeng_group_create(f.e, 0, &c), 0);
	assert_int_equal(pgeng_depend(f.e, a, c, 0), 0);
	snap(&f, c, &in);
	assert_int_equal(in.nbefores, 0);
	assert_int_equal(pgeng_sync(f.e, a, 0), 0);
	fx_close(&f);
}

/* close_written: make n groups one after another, each writing a byte
 * of one of eight blocks, and close them. */
static void close_written(struct fx *f, size_t n)
{
	struct pg_group *g;
	int64_t id;
	size_t i;

	for (i = 0; i < n; i++) {
		assert_int_equal(pgeng_group_create(f->e, 0, &id), 0);
		assert_int_equal(pgeng_engage(f->e, id, 0, &g), 0);
		write_in(f, &g, 1, 1 + i % 8, (uint32_t)(i % 100), (uint8_t)i);
		pgeng_disengage(f->e, g);
		assert_int_equal(pgeng_close(f->e, id, 0), 0);
	}
}

/* More closed groups than one sweep looks at become durable in one round:
 * the calls after it forget them all, 64 a call, though those calls commit
 * nothing themselves.  Until the round, each is still there. */
static void test_forget_after_round(void **state)
{
	enum { N = 300 };
	struct fx f;
	struct pg_summary sum;
	size_t i;

	fx_open(&f, CONSISTENCY_SOFTUPDATES);
	close_written(&f, N);
	for (i = 0; i < N / 64 + 1; i++)
		pgeng_summary(f.e, &sum);
	assert_int_equal(sum.groups, N);
	assert_int_equal(cache_sync(f.c), 0);
	for (i = 0; i < N / 64; i++) {
		pgeng_summary(f.e, &sum);
		assert_int_equal(sum.groups, N - 64 * (i + 1));
	}
	pgeng_summary(f.e, &sum);
	assert_int_equal(sum.groups, 0);
	fx_close(&f);
}

/* A group closed while still engaged waits at the front of the queue for as
 * long as it stays engaged: the durable groups closed after it are still
 * forgotten, and it is too once let go. */
static void test_forget_past_engaged(void **state)
{
	enum { N = 100 };
	struct fx f;
	struct pg_group *held;
	struct pg_summary sum;
	int64_t first;
	size_t i;

	fx_open(&f, CONSISTENCY_SOFTUPDATES);
	assert_int_equal(pgeng_group_create(f.e, 0, &first), 0);
	assert_int_equal(pgeng_engage(f.e, first, 0, &held), 0);
	write_in(&f, &held, 1, 9, 0, 1);
	assert_int_equal(pgeng_close(f.e, first, 0), 0);
	close_written(&f, N);
	assert_int_equal(cache_sync(f.c), 0);
	for (i = 0; i < 2 + N / 64 + 1; i++)
		pgeng_summary(f.e, &sum);
	assert_int_equal(sum.groups, 1);
	pgeng_disengage(f.e, held);
	assert_int_equal(cache_sync(f.c), 0);
	pgeng_summary(f.e, &sum);
	assert_int_equal(sum.groups, 0);
	fx_close(&f);
}

/* pgeng_sync(B) makes B's changes and its befores' durable, including a
 * before's befores reached through a before that made no change. */
static void test_sync_befores(void **state)
{
	struct fx f;
	int64_t x, m, b;
	struct pg_group *g;

	fx_open(&f, CONSISTENCY_SOFTUPDATES);
	assert_int_equal(pgeng_group_create(f.e, 0, &x), 0);
	assert_int_equal(pgeng_group_create(f.e, 0, &m), 0);
	assert_int_equal(pgeng_group_create(f.e, 0, &b), 0);
	assert_int_equal(pgeng_engage(f.e, x, 0, &g), 0);
	write_in(&f, &g, 1, 10, 0, 0x11);
	pgeng_disengage(f.e, g);
	assert_int_equal(pgeng_depend(f.e, x, m, 0), 0);
	assert_int_equal(pgeng_depend(f.e, m, b, 0), 0); /* m has no change */
	assert_int_equal(pgeng_sync(f.e, b, 0), 0);	 /* b has no change */
	/* The recorder log shows block 10 written and a barrier after it. */
	{
		size_t i, n = bdev_recorder_count(f.rec);
		bool written = false, barrier_after = false;

		for (i = 0; i < n; i++) {
			const struct rec_event *ev = bdev_recorder_event(f.rec, i);

			if (ev->kind == REC_WRITE && ev->blkno == 10 &&
			    ((const uint8_t *)ev->data)[0] == 0x11)
				written = true;
			if (ev->kind == REC_BARRIER && written)
				barrier_after = true;
		}
		assert_true(written);
		assert_true(barrier_after);
	}
	fx_close(&f);
}

/* ---- ordering over crash states ---------------------------------------- */

#define DAG_GROUPS 7
#define DAG_WRITES 3

struct dag {
	int ngroups;
	bool before[DAG_GROUPS][DAG_GROUPS]; /* transitive: before[i][j] = i before j */
	int nw[DAG_GROUPS];
	uint64_t blk[DAG_GROUPS][DAG_WRITES];
	uint32_t off[DAG_GROUPS][DAG_WRITES];
	uint8_t val[DAG_GROUPS][DAG_WRITES];
	size_t states, violations;
};

static bool present(const struct dag *d, const struct crash_state *st, int g, int w)
{
	const uint8_t *img = st->image;

	return img[d->blk[g][w] * st->block_size + d->off[g][w]] == d->val[g][w];
}

static int dag_check(const struct crash_state *st, void *arg)
{
	struct dag *d = arg;
	int g, b, w, v;
	bool any, bad = false;

	d->states++;
	for (g = 0; g < d->ngroups && !bad; g++) {
		any = false;
		for (w = 0; w < d->nw[g]; w++)
			any |= present(d, st, g, w);
		if (!any)
			continue;
		for (b = 0; b < d->ngroups && !bad; b++) {
			if (!d->before[b][g])
				continue;
			for (v = 0; v < d->nw[b]; v++)
				if (!present(d, st, b, v))
					bad = true;
		}
	}
	if (bad)
		d->violations++;
	return 0;
}

/* Build a random DAG the way scripts do (pgrun --after): each group gains
 * its befores, runs, is closed; then enumerate every crash state. */
static void run_dag(enum consistency mode, uint64_t seed, struct dag *d)
{
	struct fx f;
	struct e2t_rng rng;
	struct pg_group *g;
	int64_t id[DAG_GROUPS];
	struct crash_opts co = {.max_exhaustive = 8, .samples = 48, .seed = seed};
	size_t n;
	int i, j, k, w;
	uint32_t used[NBLOCKS] = {0};

	memset(d, 0, sizeof(*d));
	d->ngroups = DAG_GROUPS;
	e2t_rng_seed(&rng, seed);
	fx_open(&f, mode);
	for (j = 0; j < DAG_GROUPS; j++) {
		assert_int_equal(pgeng_group_create(f.e, 0, &id[j]), 0);
		for (i = 0; i < j; i++) {
			if (e2t_rng_below(&rng, 3) == 0) {
				assert_int_equal(pgeng_depend(f.e, id[i], id[j], 0), 0);
				d->before[i][j] = true;
			}
		}
		/* Some groups make no change: ordering must pass through. */
		d->nw[j] = (int)e2t_rng_below(&rng, DAG_WRITES + 1);
		if (j == 1)
			d->nw[j] = 0;
		assert_int_equal(pgeng_engage(f.e, id[j], 0, &g), 0);
		for (w = 0; w < d->nw[j]; w++) {
			/* few blocks, so groups share blocks and the cache must
			 * roll changes back */
			uint64_t blk = 1 + e2t_rng_below(&rng, 4);

			d->blk[j][w] = blk;
			d->off[j][w] = used[blk]++;
			d->val[j][w] = (uint8_t)(1 + e2t_rng_below(&rng, 255));
			write_in(&f, &g, 1, blk, d->off[j][w], d->val[j][w]);
		}
		pgeng_disengage(f.e, g);
		assert_int_equal(pgeng_close(f.e, id[j], 0), 0);
		/* Sometimes let the flusher write what is ready, so that
		 * groups straddle rounds. */
		if (e2t_rng_below(&rng, 3) == 0)
			assert_int_equal(cache_flush_round(f.c, NULL), 0);
	}
	assert_int_equal(cache_sync(f.c), 0);
	/* transitive closure */
	for (k = 0; k < DAG_GROUPS; k++)
		for (i = 0; i < DAG_GROUPS; i++)
			for (j = 0; j < DAG_GROUPS; j++)
				if (d->before[i][k] && d->before[k][j])
					d->before[i][j] = true;
	assert_int_equal(crash_enumerate(f.rec, &co, dag_check, d, &n), 0);
	assert_int_equal(n, d->states);
	pgeng_destroy(f.e);
	cache_destroy(f.c);
	bdev_destroy(f.rec);
}

static void test_dag_order(void **state)
{
	uint64_t seed0 = e2t_seed("PG_SEED", 0x5eed);
	size_t states = 0, runs = (size_t)e2t_env_long("PG_DAG_RUNS", 200), i;
	struct dag d;

	for (i = 0; i < runs; i++) {
		run_dag(CONSISTENCY_SOFTUPDATES, seed0 + i, &d);
		if (d.violations)
			fail_msg("seed %llu: %zu of %zu crash states break group order",
				 (unsigned long long)(seed0 + i), d.violations, d.states);
		states += d.states;
	}
	assert_true(states > runs);
	printf("# dag order: %zu runs, %zu crash states checked, 0 violations\n", runs, states);
}

/* The same checker must see violations when ordering is off: otherwise
 * the test above could not fail. */
static void test_dag_order_none_fails(void **state)
{
	uint64_t seed0 = e2t_seed("PG_SEED", 0x5eed);
	size_t states = 0, bad = 0, runs = (size_t)e2t_env_long("PG_DAG_RUNS", 200), i;
	struct dag d;

	for (i = 0; i < runs; i++) {
		run_dag(CONSISTENCY_NONE, seed0 + i, &d);
		states += d.states;
		bad += d.violations;
	}
	printf("# dag order, consistency=none: %zu crash states, %zu violations\n", states, bad);
	assert_true(bad > 0);
}

/* fsync=order: a chain orders every later change after every earlier one. */
static void chain_run(enum consistency mode, struct dag *d)
{
	struct fx f;
	struct pg_chain *ch;
	struct pg_op op = {0};
	struct cblock *b;
	uint8_t v;
	int i;
	struct crash_opts co = {.max_exhaustive = 8, .samples = 48, .seed = 7};

	memset(d, 0, sizeof(*d));
	fx_open(&f, mode);
	assert_int_equal(pgeng_chain_create(f.e, &ch), 0);
	/* Treat each fsync-delimited epoch as a "group" for the checker. */
	d->ngroups = 4;
	for (i = 0; i < 4; i++) {
		uint64_t blk = 1 + (uint64_t)(3 - i) % 4; /* later epochs, lower blocks */

		d->nw[i] = 1;
		d->blk[i][0] = blk;
		d->off[i][0] = 0;
		d->val[i][0] = v = (uint8_t)(0x40 + i);
		pgeng_op_begin(f.e, &op, NULL, 0, ch);
		assert_int_equal(cache_get(f.c, blk, &b), 0);
		assert_int_equal(
		    patch_create_byte(f.c, b, 0, 1, &v, NULL, 0, pgeng_op_scope(&op), NULL), 0);
		cache_put(f.c, b);
		pgeng_op_end(&op);
		assert_int_equal(pgeng_chain_order(f.e, ch), 0);
		for (int j = 0; j < i; j++)
			d->before[j][i] = true;
	}
	pgeng_chain_release(f.e, ch);
	assert_int_equal(cache_sync(f.c), 0);
	assert_int_equal(crash_enumerate(f.rec, &co, dag_check, d, NULL), 0);
	fx_close(&f);
}

static void test_chain_order(void **state)
{
	struct dag d;

	chain_run(CONSISTENCY_SOFTUPDATES, &d);
	assert_int_equal(d.violations, 0);
	assert_true(d.states >= 4);
	chain_run(CONSISTENCY_NONE, &d);
	printf("# fsync=order chain: consistency=none breaks %zu of %zu states\n", d.violations,
	       d.states);
	assert_true(d.violations > 0);
}

/* ---- threads ------------------------------------------------------------ */

/* Writers in groups on several threads while others sync, chain and ask
 * about the same groups: no edge may be lost (op.lost), nothing may hang,
 * and everything ends durable. */
struct stress {
	struct fx *f;
	int seed;
	int64_t last; /* a recent id, for the syncing thread */
	unsigned lost;
	atomic_bool stop;
};

static void *stress_writer(void *arg)
{
	struct stress *st = arg;
	struct e2t_rng rng;
	struct pg_group *g;
	struct pg_op op = {0};
	struct cblock *b;
	int64_t id, prev = 0;
	uint8_t v;
	int i, w;

	e2t_rng_seed(&rng, (uint64_t)st->seed);
	for (i = 0; i < 150; i++) {
		if (pgeng_group_create(st->f->e, 0, &id) < 0)
			break;
		if (prev)
			pgeng_depend(st->f->e, prev, id, 0);
		if (pgeng_engage(st->f->e, id, 0, &g) < 0)
			break;
		for (w = 0; w < 4; w++) {
			pgeng_op_begin(st->f->e, &op, &g, 1, NULL);
			v = (uint8_t)e2t_rng_next(&rng);
			if (cache_get(st->f->c, 1 + e2t_rng_below(&rng, 8), &b) == 0) {
				patch_create_byte(st->f->c, b, (uint32_t)e2t_rng_below(&rng, BS), 1,
						  &v, NULL, 0, pgeng_op_scope(&op), NULL);
				cache_put(st->f->c, b);
			}
			pgeng_op_end(&op);
			st->lost += op.lost;
		}
		pgeng_disengage(st->f->e, g);
		pgeng_close(st->f->e, id, 0);
		__atomic_store_n(&st->last, id, __ATOMIC_RELAXED);
		prev = id;
	}
	return NULL;
}

static void *stress_syncer(void *arg)
{
	struct stress *st = arg;
	struct pg_info in;
	int64_t id;

	while (!atomic_load(&st->stop)) {
		id = __atomic_load_n(&st->last, __ATOMIC_RELAXED);
		if (id > 0) {
			/* counted, not asserted: cmocka asserts on the main
			 * thread only */
			if (pgeng_sync(st->f->e, id, 0) != 0)
				st->lost++;
			pgeng_info(st->f->e, id, &in);
		}
		cache_flush_round(st->f->c, NULL);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct fx f;
	struct stress st[4];
	pthread_t tw[4], ts;
	struct cache_stats cs;
	int i;

	fx_open(&f, CONSISTENCY_SOFTUPDATES);
	memset(st, 0, sizeof(st));
	for (i = 0; i < 4; i++) {
		st[i].f = &f;
		st[i].seed = 100 + i;
		assert_int_equal(pthread_create(&tw[i], NULL, stress_writer, &st[i]), 0);
	}
	assert_int_equal(pthread_create(&ts, NULL, stress_syncer, &st[0]), 0);
	for (i = 0; i < 4; i++)
		pthread_join(tw[i], NULL);
	atomic_store(&st[0].stop, true);
	pthread_join(ts, NULL);
	for (i = 0; i < 4; i++)
		assert_int_equal(st[i].lost, 0);
	assert_int_equal(cache_sync(f.c), 0);
	cache_get_stats(f.c, &cs);
	assert_int_equal(cs.blocks_dirty, 0);
	fx_close(&f);
}

/* ---- the atomic replace, at library level ----------------------------- */

/* What `a=$(pgrun --print-id -- sh -c 'cat new > f.tmp'); pgrun --after "$a"
 * -- mv f.tmp f` does, through the ext2 module: at every crash state f must
 * hold the complete old or the complete new contents. */

#define OLD_LEN 5000
#define NEW_LEN 9000

struct arep {
	size_t states, bad, missing, torn;
};

static void *arep_img;
static size_t arep_len;

/* The file system of crash state cs, read-only, counted in *states; or
 * NULL when it does not mount, a bad state to every check here, counted
 * in *bad as well. */
static struct e2fs *state_open(const struct crash_state *cs, size_t *states, size_t *bad)
{
	struct e2_opts o = {.readonly = true, .no_flusher = true};
	struct bdev *mem;
	struct e2fs *fs;

	++*states;
	assert_int_equal(bdev_mem_create(cs->block_size, 0, cs->image, cs->image_len, &mem), 0);
	if (e2_open_bdev(mem, &o, &fs) == 0)
		return fs;
	++*bad;
	return NULL;
}

static int arep_check(const struct crash_state *cs, void *arg)
{
	struct arep *a = arg;
	static uint8_t buf[NEW_LEN + 1];
	struct e2fs *fs;
	struct stat st;
	ssize_t n;
	size_t i, want;
	uint8_t c;
	bool ok = true;

	fs = state_open(cs, &a->states, &a->bad);
	if (!fs)
		return 0;
	if (e2_lookup(fs, E2_ROOT_INO, "f", &st) != 0) {
		a->missing++;
		ok = false;
		goto out;
	}
	n = e2_read(fs, (uint32_t)st.st_ino, buf, sizeof(buf), 0);
	e2_forget(fs, (uint32_t)st.st_ino, 1);
	want = n == OLD_LEN ? OLD_LEN : NEW_LEN;
	c = n == OLD_LEN ? 'o' : 'n';
	if (n != OLD_LEN && n != NEW_LEN)
		ok = false;
	for (i = 0; ok && i < want; i++)
		if (buf[i] != c)
			ok = false;
	if (!ok)
		a->torn++;
out:
	if (!ok)
		a->bad++;
	e2_abandon(fs);
	return 0;
}

static void arep_run(enum consistency cons, bool groups, struct arep *a)
{
	struct e2_opts o = {.consistency = cons, .no_flusher = true, .clock = e2t_fixed_clock};
	struct crash_opts co = {.max_exhaustive = 10, .samples = 64, .seed = 11};
	static uint8_t data[NEW_LEN];
	struct bdev *mem, *rec;
	struct e2fs *fs;
	struct pgeng *e;
	struct pg_group *ga, *gb;
	struct pg_op op = {0};
	struct stat st;
	int64_t ia, ib;

	memset(a, 0, sizeof(*a));
	assert_int_equal(bdev_mem_create(BS, 0, arep_img, arep_len, &mem), 0);
	assert_int_equal(bdev_recorder_create(mem, &rec), 0);
	assert_int_equal(e2_open_bdev(rec, &o, &fs), 0);
	assert_int_equal(pgeng_create(e2_cache(fs), &e), 0);
	/* the old file, durable before the log starts */
	memset(data, 'o', OLD_LEN);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &st), 0);
	assert_int_equal(e2_write(fs, NULL, (uint32_t)st.st_ino, data, OLD_LEN, 0), OLD_LEN);
	e2_forget(fs, (uint32_t)st.st_ino, 1);
	/* and f.tmp, already at its final size: the new contents overwrite it
	 * in place, which soft updates alone does not order before the rename
	 * (no allocation, no pointer), so only the groups can. */
	memset(data, 'x', NEW_LEN);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "f.tmp", S_IFREG | 0644, 0, 0, 0, &st), 0);
	assert_int_equal(e2_write(fs, NULL, (uint32_t)st.st_ino, data, NEW_LEN, 0), NEW_LEN);
	e2_forget(fs, (uint32_t)st.st_ino, 1);
	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(bdev_recorder_reset(rec), 0);

	/* group a: the new contents in f.tmp */
	assert_int_equal(pgeng_group_create(e, 0, &ia), 0);
	assert_int_equal(pgeng_engage(e, ia, 0, &ga), 0);
	memset(data, 'n', NEW_LEN);
	if (groups)
		pgeng_op_begin(e, &op, &ga, 1, NULL);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "f.tmp", &st), 0);
	assert_int_equal(e2_write(fs, &(struct e2_caller){.scope = pgeng_op_scope(&op)},
				  (uint32_t)st.st_ino, data, NEW_LEN, 0),
			 NEW_LEN);
	e2_forget(fs, (uint32_t)st.st_ino, 1);
	if (groups)
		assert_int_equal(pgeng_op_end(&op), 0);
	pgeng_disengage(e, ga);
	assert_int_equal(pgeng_close(e, ia, 0), 0);

	/* group b, after a: the rename over f */
	assert_int_equal(pgeng_group_create(e, 0, &ib), 0);
	assert_int_equal(pgeng_depend(e, ia, ib, 0), 0);
	assert_int_equal(pgeng_engage(e, ib, 0, &gb), 0);
	if (groups)
		pgeng_op_begin(e, &op, &gb, 1, NULL);
	assert_int_equal(e2_rename(fs, &(struct e2_caller){.scope = pgeng_op_scope(&op)},
				   E2_ROOT_INO, "f.tmp", E2_ROOT_INO, "f", 0),
			 0);
	if (groups)
		pgeng_op_end(&op);
	pgeng_disengage(e, gb);
	assert_int_equal(pgeng_close(e, ib, 0), 0);

	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(crash_enumerate(rec, &co, arep_check, a, NULL), 0);
	pgeng_destroy(e);
	assert_int_equal(e2_close(fs), 0);
}

static void test_atomic_replace(void **state)
{
	struct arep a;

	assert_int_equal(e2t_mkfs_mem(2048, BS, NULL, &arep_img, &arep_len), 0);
	arep_run(CONSISTENCY_SOFTUPDATES, true, &a);
	printf("# atomic replace with groups: %zu crash states, %zu bad\n", a.states, a.bad);
	assert_true(a.states > 2);
	assert_int_equal(a.bad, 0);
	arep_run(CONSISTENCY_NONE, true, &a);
	printf("# atomic replace, consistency=none: %zu crash states, %zu bad "
	       "(%zu without f, %zu torn)\n",
	       a.states, a.bad, a.missing, a.torn);
	assert_true(a.bad > 0);
	arep_run(CONSISTENCY_SOFTUPDATES, false, &a);
	printf("# atomic replace, soft updates but no groups: %zu crash states, %zu bad\n",
	       a.states, a.bad);
	/* (Still 0 bad here: e2's soft updates appear to order this in-place
	 * overwrite before the rename too, so this run cannot yet tell groups
	 * from no groups; the consistency=none run above is the check.) */
	free(arep_img);
}

/* ---- replaces under pgrun --fsync=order, at library level --------------- */

/* A program that replaces files a and b in turn under `pgrun --fsync=order`,
 * each through a new temporary file t written in two halves, logging each
 * update in file log, with an fsync (an ordering point) after each half:
 *
 *   create t, write half 1, append to log | write half 2 | rename t over a,
 *   create t, ...
 *
 * Update k writes byte '0' + k.  Each "|" orders what follows after all
 * that came before.  So in every crash state the renames on disk are a
 * prefix of the program's, and a t showing its second half shows the log
 * record of its own update.  The new file's own changes leave out the
 * befores its entry waited for (ext2/e2_gate.c); the log record came
 * after the entry, and the second half must still wait for it. */
#define ORP_UPDATES 4
#define ORP_H1	    2000
#define ORP_H2	    2500
#define ORP_REC	    100

struct orp {
	size_t states, bad, renames_torn, t_early, content;
	size_t t_full; /* states with t's second half (for the record) */
};

static void *orp_img;
static size_t orp_len;

/* The version a file shows (-1: missing), and whether it is whole. */
static int orp_version(struct e2fs *fs, const char *name, bool tmp, bool *whole, bool *full)
{
	static uint8_t buf[ORP_H1 + ORP_H2 + 1];
	struct stat st;
	ssize_t n;

	*whole = true;
	*full = false;
	if (e2_lookup(fs, E2_ROOT_INO, name, &st) != 0)
		return -1;
	n = e2_read(fs, (uint32_t)st.st_ino, buf, sizeof(buf), 0);
	e2_forget(fs, (uint32_t)st.st_ino, 1);
	if (n <= 0)
		return tmp ? -1 : (*whole = false, 0);
	for (ssize_t i = 1; i < n; i++)
		if (buf[i] != buf[0])
			*whole = false;
	if (!tmp && n != ORP_H1 + ORP_H2)
		*whole = false;
	if (tmp && n != ORP_H1 && n != ORP_H1 + ORP_H2)
		*whole = false;
	*full = n == ORP_H1 + ORP_H2;
	return buf[0] - '0';
}

static int orp_check(const struct crash_state *cs, void *arg)
{
	struct orp *o = arg;
	struct e2fs *fs;
	bool wa, wb, wt, fa, fb, ft, bad = false;
	int va, vb, vt, m, want_a, want_b;
	struct stat st;

	fs = state_open(cs, &o->states, &o->bad);
	if (!fs)
		return 0;
	va = orp_version(fs, "a", false, &wa, &fa);
	vb = orp_version(fs, "b", false, &wb, &fb);
	vt = orp_version(fs, "t", true, &wt, &ft);
	/* (each finding counted on its own, from the first byte's version) */
	if (va < 0 || vb < 0 || !wa || !wb || !wt) {
		o->content++;
		bad = true;
	}
	/* renames on disk: a prefix (a takes the odd updates, b the even) */
	m = va > vb ? va : vb;
	want_a = m % 2 ? m : m - 1;
	want_b = m % 2 ? m - 1 : m;
	if (va != (want_a > 0 ? want_a : 0) || vb != (want_b > 0 ? want_b : 0)) {
		o->renames_torn++;
		bad = true;
	}
	/* t's second half comes after its update's log record */
	if (vt > 0 && ft) {
		o->t_full++;
		if (e2_lookup(fs, E2_ROOT_INO, "log", &st) != 0 ||
		    st.st_size < (off_t)vt * ORP_REC) {
			o->t_early++;
			bad = true;
		}
	}
	if (bad)
		o->bad++;
	e2_abandon(fs);
	return 0;
}

static void orp_write(struct e2fs *fs, struct pg_op *op, int k, size_t off, size_t len)
{
	static uint8_t data[ORP_H2];
	struct stat st;

	memset(data, '0' + k, len);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "t", &st), 0);
	assert_int_equal(e2_write(fs, &(struct e2_caller){.scope = pgeng_op_scope(op)},
				  (uint32_t)st.st_ino, data, len, (off_t)off),
			 (ssize_t)len);
	e2_forget(fs, (uint32_t)st.st_ino, 1);
}

static void orp_run(enum consistency cons, struct orp *o)
{
	struct e2_opts eo = {.consistency = cons, .no_flusher = true, .clock = e2t_fixed_clock};
	struct crash_opts co = {.max_exhaustive = 10, .samples = 64, .seed = 13};
	static uint8_t data[ORP_H1 + ORP_H2];
	struct bdev *mem, *rec;
	struct e2fs *fs;
	struct pgeng *e;
	struct pg_chain *ch;
	struct pg_group *g;
	struct pg_op op = {0};
	struct stat st;
	int64_t id;
	uint32_t logino;
	const char *names[2] = {"b", "a"};

	memset(o, 0, sizeof(*o));
	assert_int_equal(bdev_mem_create(BS, 0, orp_img, orp_len, &mem), 0);
	assert_int_equal(bdev_recorder_create(mem, &rec), 0);
	assert_int_equal(e2_open_bdev(rec, &eo, &fs), 0);
	assert_int_equal(pgeng_create(e2_cache(fs), &e), 0);
	/* a and b at version 0, durable before the log starts */
	memset(data, '0', sizeof(data));
	for (int i = 0; i < 2; i++) {
		assert_int_equal(
		    e2_mknod(fs, NULL, E2_ROOT_INO, names[i], S_IFREG | 0644, 0, 0, 0, &st), 0);
		assert_int_equal(e2_write(fs, NULL, (uint32_t)st.st_ino, data, sizeof(data), 0),
				 (ssize_t)sizeof(data));
		e2_forget(fs, (uint32_t)st.st_ino, 1);
	}
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "log", S_IFREG | 0644, 0, 0, 0, &st), 0);
	logino = (uint32_t)st.st_ino;
	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(bdev_recorder_reset(rec), 0);

	/* pgrun --fsync=order: a group of its own, and the chain of fsyncs */
	assert_int_equal(pgeng_group_create(e, 0, &id), 0);
	assert_int_equal(pgeng_engage(e, id, 0, &g), 0);
	assert_int_equal(pgeng_chain_create(e, &ch), 0);
	for (int k = 1; k <= ORP_UPDATES; k++) {
		pgeng_op_begin(e, &op, &g, 1, ch);
		if (k > 1)
			assert_int_equal(
			    e2_rename(fs, &(struct e2_caller){.scope = pgeng_op_scope(&op)},
				      E2_ROOT_INO, "t", E2_ROOT_INO, names[(k - 1) % 2], 0),
			    0);
		assert_int_equal(e2_mknod(fs, &(struct e2_caller){.scope = pgeng_op_scope(&op)},
					  E2_ROOT_INO, "t", S_IFREG | 0644, 0, 0, 0, &st),
				 0);
		e2_forget(fs, (uint32_t)st.st_ino, 1);
		orp_write(fs, &op, k, 0, ORP_H1);
		memset(data, '0' + k, ORP_REC);
		assert_int_equal(e2_write(fs, &(struct e2_caller){.scope = pgeng_op_scope(&op)},
					  logino, data, ORP_REC, (off_t)(k - 1) * ORP_REC),
				 ORP_REC);
		assert_int_equal(pgeng_op_end(&op), 0);
		assert_int_equal(pgeng_chain_order(e, ch), 0);
		pgeng_op_begin(e, &op, &g, 1, ch);
		orp_write(fs, &op, k, ORP_H1, ORP_H2);
		assert_int_equal(pgeng_op_end(&op), 0);
		assert_int_equal(pgeng_chain_order(e, ch), 0);
	}
	pgeng_op_begin(e, &op, &g, 1, ch);
	assert_int_equal(e2_rename(fs, &(struct e2_caller){.scope = pgeng_op_scope(&op)},
				   E2_ROOT_INO, "t", E2_ROOT_INO, names[ORP_UPDATES % 2], 0),
			 0);
	assert_int_equal(pgeng_op_end(&op), 0);
	pgeng_chain_release(e, ch);
	pgeng_disengage(e, g);
	assert_int_equal(pgeng_close(e, id, 0), 0);

	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(crash_enumerate(rec, &co, orp_check, o, NULL), 0);
	pgeng_destroy(e);
	assert_int_equal(e2_close(fs), 0);
}

static void test_order_replace_chain(void **state)
{
	struct orp o;

	assert_int_equal(e2t_mkfs_mem(2048, BS, NULL, &orp_img, &orp_len), 0);
	orp_run(CONSISTENCY_SOFTUPDATES, &o);
	printf("# replaces under fsync=order (seed 13): %zu crash states, %zu bad, %zu with a "
	       "whole t\n",
	       o.states, o.bad, o.t_full);
	assert_true(o.states > 8);
	assert_true(o.t_full > 0);
	assert_int_equal(o.bad, 0);
	orp_run(CONSISTENCY_NONE, &o);
	printf("# the same, consistency=none: %zu crash states, %zu bad (%zu renames out of "
	       "order, %zu t ahead of a rename, %zu torn)\n",
	       o.states, o.bad, o.renames_torn, o.t_early, o.content);
	assert_true(o.renames_torn > 0);
	free(orp_img);
}

/* pgrun --fsync=order over a loop of write, fsync, rename over one of 16
 * files: each replaced file is parked in lost+found under a name of its
 * own until the rename is on disk.  A parked name must not take the place
 * of one whose removal is still unwritten, or it waits for that removal,
 * which waits for an earlier rename: when only 32 places were remembered,
 * every 32nd rename of the chain went there, and lost+found and the
 * directory took turns, a round each: 18 rounds for these 200, not 8. */
static void test_replace_chain_parks_apart(void **state)
{
	struct e2_opts eo = {
	    .consistency = CONSISTENCY_SOFTUPDATES, .no_flusher = true, .clock = e2t_fixed_clock};
	const int nfiles = 16, n = 200;
	struct cache_stats a, b;
	struct bdev *mem;
	struct e2fs *fs;
	struct pgeng *e;
	struct pg_chain *ch;
	struct pg_group *g;
	struct pg_op op = {0};
	struct stat st;
	int64_t id;
	char name[16];
	void *img;
	size_t len;

	(void)state;
	assert_int_equal(e2t_mkfs_mem(4096, BS, NULL, &img, &len), 0);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	assert_int_equal(e2_open_bdev(mem, &eo, &fs), 0);
	assert_int_equal(pgeng_create(e2_cache(fs), &e), 0);
	for (int i = 0; i < nfiles; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		assert_int_equal(
		    e2_mknod(fs, NULL, E2_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st), 0);
		e2_forget(fs, (uint32_t)st.st_ino, 1);
	}
	assert_int_equal(e2_sync(fs), 0);

	cache_get_stats(e2_cache(fs), &a);
	assert_int_equal(pgeng_group_create(e, 0, &id), 0);
	assert_int_equal(pgeng_engage(e, id, 0, &g), 0);
	assert_int_equal(pgeng_chain_create(e, &ch), 0);
	for (int k = 0; k < n; k++) {
		struct e2_caller who;

		pgeng_op_begin(e, &op, &g, 1, ch);
		who = (struct e2_caller){.scope = pgeng_op_scope(&op)};
		assert_int_equal(e2_mknod(fs, &who, E2_ROOT_INO, "t", S_IFREG | 0644, 0, 0, 0, &st),
				 0);
		assert_int_equal(e2_write(fs, &who, (uint32_t)st.st_ino, "x", 1, 0), 1);
		e2_forget(fs, (uint32_t)st.st_ino, 1);
		assert_int_equal(pgeng_op_end(&op), 0);
		assert_int_equal(pgeng_chain_order(e, ch), 0);
		pgeng_op_begin(e, &op, &g, 1, ch);
		snprintf(name, sizeof(name), "f%02d", k % nfiles);
		assert_int_equal(e2_rename(fs, &(struct e2_caller){.scope = pgeng_op_scope(&op)},
					   E2_ROOT_INO, "t", E2_ROOT_INO, name, 0),
				 0);
		assert_int_equal(pgeng_op_end(&op), 0);
		assert_int_equal(pgeng_chain_order(e, ch), 0);
	}
	pgeng_chain_release(e, ch);
	pgeng_disengage(e, g);
	assert_int_equal(pgeng_close(e, id, 0), 0);
	assert_int_equal(e2_sync(fs), 0);
	cache_get_stats(e2_cache(fs), &b);
	printf("# %d replaces in a chain of groups: %llu rounds, %llu of %llu block writes "
	       "with a rollback\n",
	       n, (unsigned long long)(b.rounds - a.rounds),
	       (unsigned long long)(b.rollback_writes - a.rollback_writes),
	       (unsigned long long)(b.block_writes - a.block_writes));
	assert_true(b.rounds - a.rounds <= 10);
	pgeng_destroy(e);
	assert_int_equal(e2_close(fs), 0);
	free(img);
}

/* ---- a mail server's moves, each message in its own groups ------------- */

/* Message i is copied (appended to the archive) in a group of its own and
 * marked deleted in the inbox (a byte at the start of block i) in a group
 * after that one, as a mail server written for patchgroups does: a crash
 * must never show a mark without its whole copy.  (The groups order no
 * message after another, but rename_order=all still orders each copy's
 * size after the earlier marks: 60 moves take 121 rounds.  A caller with
 * the order policy PG_ORDER_GROUPS, e2_caller.group_order, leaves that
 * out: a handful of rounds.) */
#define MAIL_MSG     300
#define MAIL_CRASH_N 5

struct mailc {
	size_t states, bad;
};

static int mail_check(const struct crash_state *cs, void *arg)
{
	struct mailc *m = arg;
	static uint8_t arch[MAIL_CRASH_N * MAIL_MSG];
	struct e2fs *fs;
	struct stat sa, si;
	ssize_t na;
	bool ok = true;

	fs = state_open(cs, &m->states, &m->bad);
	if (!fs)
		return 0;
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "archive", &sa), 0);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "inbox", &si), 0);
	na = e2_read(fs, (uint32_t)sa.st_ino, arch, sizeof(arch), 0);
	for (int i = 0; ok && i < MAIL_CRASH_N; i++) {
		uint8_t c = 0;

		assert_int_equal(e2_read(fs, (uint32_t)si.st_ino, &c, 1, (uint64_t)i * BS), 1);
		if (c != 'D')
			continue;
		/* marked: the whole copy is in the archive */
		if (na < (ssize_t)((i + 1) * MAIL_MSG))
			ok = false;
		for (int k = 0; ok && k < MAIL_MSG; k++)
			ok = arch[i * MAIL_MSG + k] == 'a' + i;
	}
	if (!ok)
		m->bad++;
	e2_forget(fs, (uint32_t)sa.st_ino, 1);
	e2_forget(fs, (uint32_t)si.st_ino, 1);
	e2_abandon(fs);
	return 0;
}

/* Move n messages; with m, check every crash state of the moves.  Returns
 * the rounds the final sync took. */
static uint64_t mail_run(enum consistency cons, int n, bool own, struct mailc *m)
{
	struct e2_opts o = {.consistency = cons, .no_flusher = true, .clock = e2t_fixed_clock};
	struct crash_opts co = {.max_exhaustive = 10, .samples = 64, .seed = 17};
	uint8_t msg[MAIL_MSG];
	struct cache_stats a, b;
	struct bdev *mem, *rec;
	struct e2fs *fs;
	struct pgeng *e;
	struct pg_group *g;
	struct pg_op op = {0};
	struct stat sa, si;
	int64_t ia, im;
	uint8_t *inbox;
	void *img;
	size_t len;

	assert_int_equal(e2t_mkfs_mem(4096, BS, NULL, &img, &len), 0);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	assert_int_equal(bdev_recorder_create(mem, &rec), 0);
	assert_int_equal(e2_open_bdev(rec, &o, &fs), 0);
	assert_int_equal(pgeng_create(e2_cache(fs), &e), 0);
	inbox = malloc((size_t)n * BS);
	assert_non_null(inbox);
	memset(inbox, 'O', (size_t)n * BS);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "inbox", S_IFREG | 0600, 0, 0, 0, &si), 0);
	assert_int_equal(e2_write(fs, NULL, (uint32_t)si.st_ino, inbox, (size_t)n * BS, 0),
			 (ssize_t)n * BS);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "archive", S_IFREG | 0600, 0, 0, 0, &sa),
			 0);
	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(bdev_recorder_reset(rec), 0);
	cache_get_stats(e2_cache(fs), &a);
	for (int i = 0; i < n; i++) {
		memset(msg, 'a' + i % 26, sizeof(msg));
		assert_int_equal(pgeng_group_create(e, 0, &ia), 0);
		assert_int_equal(pgeng_engage(e, ia, 0, &g), 0);
		pgeng_op_begin(e, &op, &g, 1, NULL);
		assert_int_equal(
		    e2_write(fs,
			     &(struct e2_caller){.scope = pgeng_op_scope(&op), .group_order = own},
			     (uint32_t)sa.st_ino, msg, MAIL_MSG, (uint64_t)i * MAIL_MSG),
		    MAIL_MSG);
		assert_int_equal(pgeng_op_end(&op), 0);
		pgeng_disengage(e, g);
		assert_int_equal(pgeng_group_create(e, 0, &im), 0);
		assert_int_equal(pgeng_depend(e, ia, im, 0), 0);
		assert_int_equal(pgeng_engage(e, im, 0, &g), 0);
		pgeng_op_begin(e, &op, &g, 1, NULL);
		assert_int_equal(
		    e2_write(fs,
			     &(struct e2_caller){.scope = pgeng_op_scope(&op), .group_order = own},
			     (uint32_t)si.st_ino, "D", 1, (uint64_t)i * BS),
		    1);
		assert_int_equal(pgeng_op_end(&op), 0);
		pgeng_disengage(e, g);
		assert_int_equal(pgeng_close(e, ia, 0), 0);
		assert_int_equal(pgeng_close(e, im, 0), 0);
	}
	e2_forget(fs, (uint32_t)sa.st_ino, 1);
	e2_forget(fs, (uint32_t)si.st_ino, 1);
	assert_int_equal(e2_sync(fs), 0);
	cache_get_stats(e2_cache(fs), &b);
	if (m) {
		memset(m, 0, sizeof(*m));
		printf("# crash states of %d moves: seed %llu\n", n, (unsigned long long)co.seed);
		assert_int_equal(crash_enumerate(rec, &co, mail_check, m, NULL), 0);
	}
	pgeng_destroy(e);
	assert_int_equal(e2_close(fs), 0);
	free(inbox);
	free(img);
	return b.rounds - a.rounds;
}

static void test_mail_groups(void **state)
{
	struct mailc m;
	uint64_t r;

	(void)state;
	r = mail_run(CONSISTENCY_SOFTUPDATES, MAIL_CRASH_N, false, &m);
	printf("# mail moves in groups: %llu rounds, %zu crash states, %zu bad\n",
	       (unsigned long long)r, m.states, m.bad);
	assert_true(m.states > 2);
	assert_int_equal(m.bad, 0);
	mail_run(CONSISTENCY_NONE, MAIL_CRASH_N, false, &m);
	printf("# mail moves, consistency=none: %zu crash states, %zu bad\n", m.states, m.bad);
	assert_true(m.bad > 0);
}

/* The same under the order policy PG_ORDER_GROUPS: still no mark without
 * its copy, and the moves no longer take turns between the archive's
 * inode and the inbox (60 moves: 121 rounds without, 4 with). */
static void test_mail_group_order(void **state)
{
	struct mailc m;
	uint64_t r, mount, own;

	(void)state;
	r = mail_run(CONSISTENCY_SOFTUPDATES, MAIL_CRASH_N, true, &m);
	printf("# mail moves in groups, group order: %llu rounds, %zu crash states, %zu bad\n",
	       (unsigned long long)r, m.states, m.bad);
	assert_true(m.states > 2);
	assert_int_equal(m.bad, 0);
	mail_run(CONSISTENCY_NONE, MAIL_CRASH_N, true, &m);
	printf("# mail moves, group order, consistency=none: %zu crash states, %zu bad\n", m.states,
	       m.bad);
	assert_true(m.bad > 0);
	mount = mail_run(CONSISTENCY_SOFTUPDATES, 60, false, NULL);
	own = mail_run(CONSISTENCY_SOFTUPDATES, 60, true, NULL);
	printf("# 60 mail moves: %llu rounds under rename_order=all, %llu under group order\n",
	       (unsigned long long)mount, (unsigned long long)own);
	assert_true(mount >= 60);
	assert_true(own <= 8);
}

/* ---- scopes over a fake /proc ------------------------------------------ */

static char *fake_root;

static void fake_proc(pid_t pid, pid_t tgid, pid_t ppid, uint64_t start, const char *comm)
{
	char path[512], buf[1024];

	snprintf(path, sizeof(path), "%s/%d", fake_root, (int)pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%d/stat", fake_root, (int)pid);
	snprintf(buf, sizeof(buf),
		 "%d (%s) S %d %d %d 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %llu 1000 "
		 "100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
		 (int)pid, comm, (int)ppid, (int)tgid, (int)tgid, (unsigned long long)start);
	assert_int_equal(e2t_write_file(path, buf, strlen(buf)), 0);
	snprintf(path, sizeof(path), "%s/%d/status", fake_root, (int)pid);
	snprintf(buf, sizeof(buf),
		 "Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\n"
		 "Ngid:\t0\nPid:\t%d\nPPid:\t%d\n",
		 comm, (int)tgid, (int)pid, (int)ppid);
	assert_int_equal(e2t_write_file(path, buf, strlen(buf)), 0);
}

static void test_proc_parse(void **state)
{
	pid_t pp, tg;
	uint64_t st;

	fake_root = e2t_tmpdir_new("pgproc");
	assert_non_null(fake_root);
	/* A command name with spaces and a ')' must not shift the fields. */
	fake_proc(42, 42, 7, 123456, "we) ird (name");
	assert_int_equal(proc_stat(fake_root, 42, &pp, &st), 0);
	assert_int_equal(pp, 7);
	assert_int_equal(st, 123456);
	assert_int_equal(proc_tgid(fake_root, 42, &tg), 0);
	assert_int_equal(tg, 42);
	assert_int_equal(proc_stat(fake_root, 43, &pp, &st), -ENOENT);
	/* the real /proc: ourselves */
	assert_int_equal(proc_stat("/proc", getpid(), &pp, &st), 0);
	assert_int_equal(pp, getppid());
	assert_int_equal(proc_tgid("/proc", getpid(), &tg), 0);
	assert_int_equal(tg, getpid());
	e2t_rm_rf(fake_root);
	free(fake_root);
}

static void test_scope_resolve(void **state)
{
	struct scope_tab *t;
	struct scope_key k, got;
	int data = 1;

	fake_root = e2t_tmpdir_new("pgscope");
	assert_non_null(fake_root);
	/* init(1) -> shell(50) -> pgrun(100) -> sh(200) -> cp(300), and a
	 * thread 301 of cp; 400 is a sibling of pgrun. */
	fake_proc(1, 1, 0, 1, "init");
	fake_proc(50, 50, 1, 10, "bash");
	fake_proc(100, 100, 50, 20, "pgrun");
	fake_proc(200, 200, 100, 30, "sh");
	fake_proc(300, 300, 200, 40, "cp");
	fake_proc(301, 300, 200, 41, "cp");
	fake_proc(400, 400, 50, 25, "other");
	assert_int_equal(scope_tab_create(fake_root, false, NULL, NULL, &t), 0);
	/* no scope at all: nothing found, nothing read */
	assert_int_equal(scope_resolve(t, 300, &got), 0);

	k.pid = 100;
	k.start = 20;
	assert_int_equal(scope_add_since(t, k, 22, &data), 0);
	assert_int_equal(scope_add_since(t, k, 22, &data), -EEXIST);
	assert_int_equal(scope_resolve(t, 300, &got), 1);
	assert_int_equal(got.pid, 100);
	assert_int_equal(scope_resolve(t, 301, &got), 1); /* a thread */
	assert_int_equal(got.pid, 100);
	assert_int_equal(scope_resolve(t, 100, &got), 1); /* itself */
	assert_int_equal(scope_resolve(t, 400, &got), 0); /* outside */
	assert_int_equal(scope_resolve(t, 50, &got), 0);  /* the parent */
	assert_int_equal(scope_resolve(t, 0, &got), 0);	  /* writeback */
	assert_int_equal(scope_resolve(t, 999, &got), 0); /* gone */
	/* cached answers agree */
	assert_int_equal(scope_resolve(t, 300, &got), 1);

	/* pid 100 exits and the pid is reused by another process started
	 * later; a new child 500 of it must not inherit the old scope. */
	fake_proc(100, 100, 50, 90, "reused");
	fake_proc(500, 500, 100, 95, "child");
	assert_int_equal(scope_resolve(t, 500, &got), 0);
	assert_int_equal(scope_resolve(t, 100, &got), 0);
	/* the nearest scope wins */
	k.pid = 200;
	k.start = 30;
	assert_int_equal(scope_add_since(t, k, 35, &data), 0);
	fake_proc(100, 100, 50, 20, "pgrun");
	assert_int_equal(scope_resolve(t, 300, &got), 1);
	assert_int_equal(got.pid, 200);
	assert_ptr_equal(scope_del(t, k), &data);
	assert_null(scope_del(t, k));
	assert_int_equal(scope_resolve(t, 300, &got), 1);
	assert_int_equal(got.pid, 100);
	assert_int_equal(scope_count(t), 1);
	/* a child that was already running when its parent's scope was made
	 * stays outside it (sh 200 started at 30, the scope of 200 at 35: cp
	 * 300 started at 40 is inside, a child 210 started at 33 is not) and
	 * keeps what it inherited at fork: the scope of 100 (made at 22,
	 * before 200 started) */
	k.pid = 200;
	k.start = 30;
	assert_int_equal(scope_add_since(t, k, 35, &data), 0);
	fake_proc(210, 210, 200, 33, "early");
	assert_int_equal(scope_resolve(t, 210, &got), 1);
	assert_int_equal(got.pid, 100);
	/* and one started before every scope on its way up has none */
	fake_proc(410, 410, 400, 26, "early2");
	k.pid = 400;
	k.start = 25;
	assert_int_equal(scope_add_since(t, k, 27, &data), 0);
	assert_int_equal(scope_resolve(t, 410, &got), 0);
	assert_ptr_equal(scope_del(t, k), &data);
	assert_int_equal(scope_resolve(t, 300, &got), 1);
	assert_int_equal(got.pid, 200);
	scope_tab_destroy(t);
	e2t_rm_rf(fake_root);
	free(fake_root);
}

/* A miss reads /proc/PID/stat only up to the nearest scope, not up to
 * init, and stops at a parent that started after its child (a pid
 * reused after the real parent exited). */
static void test_scope_walk_stops_at_scope(void **state)
{
	struct scope_tab *t;
	struct scope_key k = {.pid = 100, .start = 20}, got;
	size_t r0;
	int data = 1;

	(void)state;
	fake_root = e2t_tmpdir_new("pgwalk");
	assert_non_null(fake_root);
	/* init(1) -> a(40) -> b(45) -> bash(50) -> pgrun(100) -> cp(300),
	 * a thread 301 of cp, and other(400) beside pgrun */
	fake_proc(1, 1, 0, 1, "init");
	fake_proc(40, 40, 1, 5, "a");
	fake_proc(45, 45, 40, 7, "b");
	fake_proc(50, 50, 45, 10, "bash");
	fake_proc(100, 100, 50, 20, "pgrun");
	fake_proc(300, 300, 100, 40, "cp");
	fake_proc(301, 300, 100, 41, "cp");
	fake_proc(400, 400, 50, 25, "other");
	assert_int_equal(scope_tab_create(fake_root, false, NULL, NULL, &t), 0);
	assert_int_equal(scope_add_since(t, k, 22, &data), 0);
	/* cp: its stat and status (no pidfd over a fake /proc), then
	 * pgrun's stat, where the scope is: three reads, none above */
	r0 = scope_proc_reads(t);
	assert_int_equal(scope_resolve(t, 300, &got), 1);
	assert_int_equal(got.pid, 100);
	assert_int_equal(scope_proc_reads(t) - r0, 3);
	/* a thread: its stat and status, its leader's stat, pgrun's */
	r0 = scope_proc_reads(t);
	assert_int_equal(scope_resolve(t, 301, &got), 1);
	assert_int_equal(got.pid, 100);
	assert_int_equal(scope_proc_reads(t) - r0, 4);
	/* outside every scope the walk stops at the first ancestor that
	 * started before every scope was made (22): other's stat and
	 * status, then bash (10); b, a and init are not read */
	r0 = scope_proc_reads(t);
	assert_int_equal(scope_resolve(t, 400, &got), 0);
	assert_int_equal(scope_proc_reads(t) - r0, 3);
	/* pgrun exits and a process started later under b gets its pid:
	 * for cp's sibling 310, which started before it, the "parent" it
	 * reads is another process, and b's scope above that one must not
	 * apply to 310 */
	assert_ptr_equal(scope_del(t, k), &data);
	fake_proc(100, 100, 45, 60, "reused");
	fake_proc(310, 310, 100, 50, "orphan");
	k.pid = 45;
	k.start = 7;
	assert_int_equal(scope_add_since(t, k, 8, &data), 0);
	assert_int_equal(scope_resolve(t, 100, &got), 1); /* b's indeed */
	assert_int_equal(got.pid, 45);
	assert_int_equal(scope_resolve(t, 310, &got), 0);
	scope_tab_destroy(t);
	e2t_rm_rf(fake_root);
	free(fake_root);
}

/* A repeated hit on a live thread reads no /proc file: the cached pidfd
 * answers.  (Before, every hit read /proc/TID/stat.) */
static void test_scope_hit_reads_nothing(void **state)
{
	struct scope_tab *t;
	struct scope_key k, got;
	size_t before;
	int data, i;

	(void)state;
	assert_int_equal(scope_tab_create(NULL, false, NULL, NULL, &t), 0);
	assert_int_equal(scope_key_of(t, getpid(), &k), 0);
	assert_int_equal(scope_add(t, k, &data), 0);
	assert_int_equal(scope_resolve(t, (pid_t)syscall(SYS_gettid), &got), 1);
	assert_int_equal(got.pid, k.pid);
	/* the miss read the thread's stat alone: it leads its thread group
	 * (a pidfd of the process opened for it), so it is its own process,
	 * and its scope is its own */
	before = scope_proc_reads(t);
	assert_int_equal(before, 1);
	for (i = 0; i < 100; i++) {
		assert_int_equal(scope_resolve(t, (pid_t)syscall(SYS_gettid), &got), 1);
		assert_int_equal(got.pid, k.pid);
	}
	assert_int_equal(scope_proc_reads(t), before);
	scope_tab_destroy(t);
}

/* rename_order=process: a thread names its process (pid and start time),
 * a hit is served by the thread's pidfd, and a thread that has ended is
 * not answered from the cache (its id may be another thread's next). */
static void *caller_thread(void *arg)
{
	pid_t *tid = arg;

	*tid = (pid_t)syscall(SYS_gettid);
	return NULL;
}

/* A thread that stays alive until told: it names itself, then waits. */
struct live_thread {
	pthread_barrier_t named, done;
	pid_t tid;
};

static void *caller_live_thread(void *arg)
{
	struct live_thread *lt = arg;

	lt->tid = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&lt->named);
	pthread_barrier_wait(&lt->done);
	return NULL;
}

static void test_caller_real(void **state)
{
	struct live_thread lt;
	struct caller_tab *t;
	struct scope_key me, got;
	pthread_t th;
	pid_t tid = 0, pp;
	size_t before;
	int i;

	(void)state;
	assert_int_equal(caller_tab_create(NULL, &t), 0);
	assert_int_equal(proc_stat("/proc", getpid(), &pp, &me.start), 0);
	me.pid = getpid();
	assert_int_equal(caller_resolve(t, (pid_t)syscall(SYS_gettid), &got), 1);
	assert_int_equal(got.pid, me.pid);
	assert_true(got.start == me.start);
	/* the main thread leads its group: its stat alone names it */
	before = caller_proc_reads(t);
	assert_int_equal(before, 1);
	for (i = 0; i < 100; i++) {
		assert_int_equal(caller_resolve(t, (pid_t)syscall(SYS_gettid), &got), 1);
		assert_int_equal(got.pid, me.pid);
	}
	assert_int_equal(caller_proc_reads(t), before);
	/* a live thread that does not lead: its status names the group,
	 * whose leader's stat gives the start time */
	assert_int_equal(pthread_barrier_init(&lt.named, NULL, 2), 0);
	assert_int_equal(pthread_barrier_init(&lt.done, NULL, 2), 0);
	assert_int_equal(pthread_create(&th, NULL, caller_live_thread, &lt), 0);
	pthread_barrier_wait(&lt.named);
	assert_int_equal(caller_resolve(t, lt.tid, &got), 1);
	assert_int_equal(got.pid, me.pid);
	assert_true(got.start == me.start);
	assert_int_equal(caller_proc_reads(t), before + 2);
	pthread_barrier_wait(&lt.done);
	assert_int_equal(pthread_join(th, NULL), 0);
	pthread_barrier_destroy(&lt.named);
	pthread_barrier_destroy(&lt.done);
	/* another thread: the same process */
	assert_int_equal(pthread_create(&th, NULL, caller_thread, &tid), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(tid > 0 && tid != getpid());
	/* it has ended: no process, and no stale answer */
	assert_int_equal(caller_resolve(t, tid, &got), 0);
	/* pid 0: a request the kernel made on its own */
	assert_int_equal(caller_resolve(t, 0, &got), 0);
	caller_tab_destroy(t);
}

/* Over a fake /proc (no pidfds): a thread's process is its Tgid, with the
 * start time of the group leader, not of the thread. */
static void test_caller_fake(void **state)
{
	struct caller_tab *t;
	struct scope_key got;

	(void)state;
	fake_root = e2t_tmpdir_new("pgcaller");
	assert_non_null(fake_root);
	fake_proc(300, 300, 1, 7000, "leader");
	fake_proc(301, 300, 1, 7100, "worker");
	assert_int_equal(caller_tab_create(fake_root, &t), 0);
	assert_int_equal(caller_resolve(t, 301, &got), 1);
	assert_int_equal(got.pid, 300);
	assert_true(got.start == 7000);
	assert_int_equal(caller_resolve(t, 300, &got), 1);
	assert_int_equal(got.pid, 300);
	assert_int_equal(caller_resolve(t, 999, &got), 0); /* gone */
	/* every call reads /proc when no pidfd can pin the thread: the
	 * thread's stat before and after, its status and its leader's stat
	 * (the gone one stops at the first) */
	assert_int_equal(caller_proc_reads(t), 4 + 4 + 2);
	caller_tab_destroy(t);
	e2t_rm_rf(fake_root);
	free(fake_root);
}

/* With watching on, a real child's exit is reported. */
static int exits;
static struct scope_key exited;
static struct scope_tab *watched;

static void on_exit_cb(void *arg, struct scope_key key)
{
	struct scope_tab **tp = arg;

	if (scope_del(*tp, key)) {
		exited = key;
		__atomic_add_fetch(&exits, 1, __ATOMIC_SEQ_CST);
	}
}

/* A child that waits until *wfd is closed, then exits 0. */
static pid_t child_until_closed(int *wfd)
{
	int fds[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[1]);
		if (read(fds[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[0]);
	*wfd = fds[1];
	return pid;
}

/* Let the child from child_until_closed() exit (close wfd), and check that
 * the watched table reported the exit of its key k, once, and dropped it. */
static void child_exit_seen(int wfd, pid_t pid, struct scope_key k)
{
	close(wfd);
	for (int i = 0; i < 500 && !__atomic_load_n(&exits, __ATOMIC_SEQ_CST); i++)
		usleep(10000);
	assert_int_equal(exits, 1);
	assert_int_equal(exited.pid, pid);
	assert_int_equal(exited.start, k.start);
	assert_int_equal(scope_count(watched), 0);
}

static void test_scope_exit_watch(void **state)
{
	struct scope_key k, wrong;
	int data = 0, wfd;
	pid_t pid;

	pid = child_until_closed(&wfd);
	assert_int_equal(scope_tab_create(NULL, true, on_exit_cb, &watched, &watched), 0);
	assert_int_equal(scope_key_of(watched, pid, &k), 0);
	/* a key whose start time does not match names no living process */
	wrong = k;
	wrong.start++;
	assert_int_equal(scope_add(watched, wrong, &data), -ESRCH);
	assert_int_equal(scope_add(watched, k, &data), 0);
	assert_int_equal(scope_count(watched), 1);
	child_exit_seen(wfd, pid, k);
	waitpid(pid, NULL, 0);
	scope_tab_destroy(watched);
}

/* scope_reap() returns only once every exit taken off the table is over,
 * also one the watcher took first and is still handling: the callback
 * below takes its scope off, then works on for a while. */
static atomic_int slow_stage;

static void slow_exit_cb(void *arg, struct scope_key key)
{
	struct scope_tab **tp = arg;

	if (!scope_del(*tp, key))
		return;
	atomic_store(&slow_stage, 1);
	usleep(200000);
	atomic_store(&slow_stage, 2);
}

static void test_scope_reap_waits_for_watcher(void **state)
{
	struct scope_key k;
	int data = 0, i, wfd;
	pid_t pid;

	(void)state;
	pid = child_until_closed(&wfd);
	assert_int_equal(scope_tab_create(NULL, true, slow_exit_cb, &watched, &watched), 0);
	assert_int_equal(scope_key_of(watched, pid, &k), 0);
	assert_int_equal(scope_add(watched, k, &data), 0);
	close(wfd);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	/* the watcher has the exit: the table is empty, the callback busy */
	for (i = 0; i < 500 && atomic_load(&slow_stage) == 0; i++)
		usleep(10000);
	assert_int_equal(atomic_load(&slow_stage), 1);
	assert_int_equal(scope_count(watched), 0);
	assert_int_equal(scope_reap(watched), 0);
	assert_int_equal(atomic_load(&slow_stage), 2);
	scope_tab_destroy(watched);
}

/* A key read with the process pinned by a pidfd (pgrun's own scope, made
 * by its first request) registers a watched scope with that pidfd: its
 * exit is reported like any other.  A process that is gone gives no key,
 * and an unwatched table no pidfd. */
static void test_scope_pinned_add_watched(void **state)
{
	struct scope_tab *t;
	struct scope_key k, k2;
	int data = 0, wfd, fd;
	pid_t pid;

	(void)state;
	__atomic_store_n(&exits, 0, __ATOMIC_SEQ_CST);
	pid = child_until_closed(&wfd);
	assert_int_equal(scope_tab_create(NULL, true, on_exit_cb, &watched, &watched), 0);
	assert_int_equal(scope_key_pin(watched, pid, &k, &fd), 0);
	assert_true(fd >= 0);
	assert_int_equal(scope_key_of(watched, pid, &k2), 0);
	assert_int_equal(k.start, k2.start);
	assert_int_equal(scope_add_pinned(watched, k, fd, &data), 0);
	assert_ptr_equal(scope_get(watched, k), &data);
	child_exit_seen(wfd, pid, k);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(scope_key_pin(watched, pid, &k, &fd), -ESRCH);
	scope_tab_destroy(watched);
	assert_int_equal(scope_tab_create(NULL, false, NULL, NULL, &t), 0);
	assert_int_equal(scope_key_pin(t, getpid(), &k, &fd), 0);
	assert_int_equal(fd, -1);
	scope_tab_destroy(t);
}

/* A child of a watched scope's owner (a command under pgrun) reads its own
 * /proc/PID/stat only: the owner runs, so its scope's key stands for the
 * parent's stat.  A scope made after the child started does not apply, and
 * the walk then reads the parent as before. */
static void test_scope_live_parent_read_once(void **state)
{
	struct scope_key k, ck, pk, got;
	int data = 0, wfd;
	size_t r0;
	pid_t pid, ppid;

	(void)state;
	assert_int_equal(scope_tab_create(NULL, true, on_exit_cb, &watched, &watched), 0);
	assert_int_equal(scope_key_of(watched, getpid(), &k), 0);
	assert_int_equal(scope_add(watched, k, &data), 0);
	pid = child_until_closed(&wfd);
	r0 = scope_proc_reads(watched);
	assert_int_equal(scope_resolve(watched, pid, &got), 1);
	assert_int_equal(got.pid, k.pid);
	assert_int_equal(got.start, k.start);
	assert_int_equal(scope_proc_reads(watched) - r0, 1);
	assert_ptr_equal(scope_del(watched, k), &data);
	/* Made after the child started, our scope does not reach it: the
	 * walk reads our stat and goes on to our parent's scope, which
	 * applies and needs no read. */
	assert_int_equal(proc_stat("/proc", pid, &ppid, &ck.start), 0);
	assert_int_equal(scope_add_since(watched, k, ck.start + 1, &data), 0);
	assert_int_equal(scope_key_of(watched, getppid(), &pk), 0);
	assert_int_equal(scope_add_since(watched, pk, 0, &data), 0);
	r0 = scope_proc_reads(watched);
	assert_int_equal(scope_resolve(watched, pid, &got), 1);
	assert_int_equal(got.pid, pk.pid);
	assert_int_equal(got.start, pk.start);
	assert_int_equal(scope_proc_reads(watched) - r0, 2);
	assert_ptr_equal(scope_del(watched, k), &data);
	assert_ptr_equal(scope_del(watched, pk), &data);
	close(wfd);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	scope_tab_destroy(watched);
}

/* ---- the control protocol and the server, in one process ------------- */

static void echo_handler(void *arg, const struct ctl_peer *peer, const struct ctl_req *req,
			 struct ctl_rep *rep, struct ctl_payload *pl)
{
	(void)arg;
	(void)pl;
	rep->id = peer->pid;
	rep->info.owner = peer->uid;
	rep->info.nchanges = (uint64_t)(req->a + req->b);
}

static void test_ctl_protocol(void **state)
{
	char *dir = e2t_tmpdir_new("pgctl"), path[512];
	struct ctl_server *srv;
	struct ctl_req req = {
	    .magic = CTL_MAGIC, .version = CTL_VERSION, .op = CTL_HELLO, .a = 40, .b = 2};
	struct ctl_rep rep, raw;
	int fd;

	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/ctl", dir);
	/* a file that is not a socket is never replaced */
	assert_int_equal(e2t_write_file(path, "x", 1), 0);
	assert_int_equal(ctl_server_start(path, NULL, echo_handler, NULL, &srv), -EEXIST);
	unlink(path);
	assert_int_equal(ctl_server_start(path, NULL, echo_handler, NULL, &srv), 0);
	assert_int_equal(ctl_connect(path, &fd), 0);
	assert_int_equal(ctl_call(fd, &req, &rep), 0);
	assert_int_equal(rep.err, 0);
	/* who asks comes from the kernel */
	assert_int_equal(rep.id, getpid());
	assert_int_equal(rep.info.owner, getuid());
	assert_int_equal(rep.info.nchanges, 42);
	/* another version is refused, and the connection stays usable */
	req.version = CTL_VERSION + 1;
	assert_int_equal(ctl_call(fd, &req, &rep), 0);
	assert_int_equal(rep.err, EPROTO);
	req.version = 0;
	assert_int_equal(ctl_call(fd, &req, &rep), 0);
	assert_int_equal(rep.err, EPROTO);
	assert_int_equal(rep.version, CTL_VERSION);
	/* an older client is answered in its version, at its reply's length,
	 * which a client of this version refuses */
	req.version = 1;
	assert_int_equal(send(fd, &req, sizeof(req), 0), sizeof(req));
	memset(&raw, 0xff, sizeof(raw));
	assert_int_equal(recv(fd, &raw, sizeof(raw), 0), (ssize_t)ctl_rep_size(1));
	assert_true(ctl_rep_size(1) < sizeof(raw));
	assert_int_equal(raw.magic, CTL_MAGIC);
	assert_int_equal(raw.version, 1);
	assert_int_equal(raw.err, 0);
	assert_int_equal(raw.id, getpid());
	assert_int_equal(raw.summary.fsync_ordered, 0);
	assert_int_equal(ctl_call(fd, &req, &rep), -EPROTO);
	req.version = CTL_VERSION;
	assert_int_equal(ctl_call(fd, &req, &rep), 0);
	assert_int_equal(rep.err, 0);
	assert_int_equal(rep.version, CTL_VERSION);
	/* a stale socket left behind is replaced */
	ctl_server_stop(srv);
	assert_int_equal(ctl_call(fd, &req, &rep) < 0, 1);
	close(fd);
	assert_int_equal(ctl_connect(path, &fd), -ENOENT);
	e2t_rm_rf(dir);
	free(dir);
}

static void tid_handler(void *arg, const struct ctl_peer *peer, const struct ctl_req *req,
			struct ctl_rep *rep, struct ctl_payload *pl)
{
	(void)arg;
	(void)peer;
	(void)req;
	(void)pl;
	rep->id = (int64_t)syscall(SYS_gettid);
}

/* Clients that each connect, ask once and go, one after the other, are
 * answered by the same two threads: none is started per connection. */
static void test_ctl_threads_kept(void **state)
{
	char *dir = e2t_tmpdir_new("pgctlthr"), path[512];
	struct ctl_req req = {.magic = CTL_MAGIC, .version = CTL_VERSION, .op = CTL_HELLO};
	struct ctl_server *srv;
	struct ctl_rep rep;
	int64_t tids[2] = {0, 0};
	size_t started, idle;
	int fd, i, k, w;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/ctl", dir);
	assert_int_equal(ctl_server_start(path, NULL, tid_handler, NULL, &srv), 0);
	for (i = 0; i < 20; i++) {
		assert_int_equal(ctl_connect(path, &fd), 0);
		assert_int_equal(ctl_call(fd, &req, &rep), 0);
		assert_int_equal(rep.err, 0);
		close(fd);
		/* the answering thread is idle again once it has seen the
		 * end of the connection (bounded wait: 10 s) */
		for (w = 0; w < 1000; w++) {
			ctl_server_threads(srv, &started, &idle);
			if (idle == 2)
				break;
			usleep(10000);
		}
		assert_int_equal(idle, 2);
		for (k = 0; k < 2 && tids[k] && tids[k] != rep.id; k++)
			;
		assert_true(k < 2); /* one of at most two threads */
		tids[k] = rep.id;
	}
	ctl_server_threads(srv, &started, &idle);
	assert_int_equal(started, 2);
	ctl_server_stop(srv);
	e2t_rm_rf(dir);
	free(dir);
}

/* A process started with standard input, output and error closed: the
 * socket must not take one of them, or what the process prints would reach
 * the daemon as requests.  It stays close-on-exec wherever it lands. */
static void test_ctl_connect_not_stdio(void **state)
{
	char *dir = e2t_tmpdir_new("pgctlstd"), path[512];
	struct ctl_req req = {
	    .magic = CTL_MAGIC, .version = CTL_VERSION, .op = CTL_HELLO, .a = 1, .b = 2};
	struct ctl_server *srv;
	struct ctl_rep rep = {0};
	int saved[3], fd = -1, i, r, fdflags = 0, cr = -1;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/ctl", dir);
	assert_int_equal(ctl_server_start(path, NULL, echo_handler, NULL, &srv), 0);
	for (i = 0; i < 3; i++) {
		saved[i] = fcntl(i, F_DUPFD_CLOEXEC, 10);
		assert_true(saved[i] >= 10);
	}
	fflush(NULL);
	for (i = 0; i < 3; i++)
		close(i);
	/* no assertion until 0, 1 and 2 are back: cmocka prints on them */
	r = ctl_connect(path, &fd);
	if (r == 0) {
		fdflags = fcntl(fd, F_GETFD);
		cr = ctl_call(fd, &req, &rep);
	}
	for (i = 0; i < 3; i++) {
		dup2(saved[i], i);
		close(saved[i]);
	}
	assert_int_equal(r, 0);
	assert_true(fd > STDERR_FILENO);
	assert_true(fdflags & FD_CLOEXEC);
	assert_int_equal(cr, 0);
	assert_int_equal(rep.err, 0);
	assert_int_equal(rep.info.nchanges, 3);
	close(fd);
	ctl_server_stop(srv);
	e2t_rm_rf(dir);
	free(dir);
}

/* One HELLO on a server started with acc: the reply's error (0 or EACCES)
 * and the socket's permission bits in *mode. */
static int hello_with(const char *path, const struct ctl_access *acc, mode_t *mode)
{
	struct ctl_req req = {.magic = CTL_MAGIC, .version = CTL_VERSION, .op = CTL_HELLO};
	struct ctl_server *srv;
	struct ctl_rep rep;
	struct stat st;
	int fd;

	assert_int_equal(ctl_server_start(path, acc, echo_handler, NULL, &srv), 0);
	assert_int_equal(stat(path, &st), 0);
	*mode = st.st_mode & 07777;
	assert_int_equal(ctl_connect(path, &fd), 0);
	assert_int_equal(ctl_call(fd, &req, &rep), 0);
	close(fd);
	ctl_server_stop(srv);
	return rep.err;
}

/* FUSE's rule for the mount carries over to its socket: without
 * allow_other only the owner (and root with allow_root) is served. */
static void test_ctl_access(void **state)
{
	char *dir = e2t_tmpdir_new("pgacc"), path[512];
	uid_t me = geteuid(), other = me == 4242 ? 4343 : 4242;
	struct ctl_access acc = {.owner = me};
	struct ctl_peer peer = {.uid = me};
	mode_t mode;

	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/ctl", dir);
	/* the default and an owner-only server: mode 0600, the owner served */
	assert_int_equal(hello_with(path, NULL, &mode), 0);
	assert_int_equal(mode, 0600);
	assert_int_equal(hello_with(path, &acc, &mode), 0);
	assert_int_equal(mode, 0600);
	/* someone else's private mount refuses us, whatever the mode says */
	acc.owner = other;
	assert_int_equal(hello_with(path, &acc, &mode), EACCES);
	if (me == 0) {
		acc.allow_root = true;
		assert_int_equal(hello_with(path, &acc, &mode), 0);
		assert_int_equal(mode, 0600);
		acc.allow_root = false;
	}
	acc.allow_other = true;
	assert_int_equal(hello_with(path, &acc, &mode), 0);
	assert_int_equal(mode, 0666);
	/* the rule itself */
	acc = (struct ctl_access){.owner = 1000};
	peer.uid = 1000;
	assert_true(ctl_access_allows(&acc, &peer));
	peer.uid = 0;
	assert_false(ctl_access_allows(&acc, &peer));
	acc.allow_root = true;
	assert_true(ctl_access_allows(&acc, &peer));
	peer.uid = 65534;
	assert_false(ctl_access_allows(&acc, &peer));
	acc.allow_other = true;
	assert_true(ctl_access_allows(&acc, &peer));
	e2t_rm_rf(dir);
	free(dir);
}

/* A daemon without FUSE: ext2 on a 2 MiB image in memory, its pgsrv on a
 * socket in a scratch directory, and the library pointed at the socket. */
struct srvworld {
	char *dir;
	char path[512];
	struct e2fs *fs;
	struct pgsrv *srv;
};

static void srvworld_open(struct srvworld *w, const char *name)
{
	struct e2_opts o = {.no_flusher = true};
	struct bdev *mem;
	void *img;
	size_t len;

	w->dir = e2t_tmpdir_new(name);
	assert_non_null(w->dir);
	snprintf(w->path, sizeof(w->path), "%s/ctl", w->dir);
	assert_int_equal(e2t_mkfs_mem(2048, BS, NULL, &img, &len), 0);
	assert_int_equal(bdev_mem_create(BS, 0, img, len, &mem), 0);
	free(img);
	assert_int_equal(e2_open_bdev(mem, &o, &w->fs), 0);
	assert_int_equal(pgsrv_create(w->fs, w->dir, w->path, NULL, &w->srv), 0);
	assert_int_equal(pg_set_control(w->path), 0);
}

/* Stop the server (unless the test did: srv NULL) and remove it all. */
static void srvworld_close(struct srvworld *w)
{
	if (w->srv)
		pgsrv_destroy(w->srv);
	pg_set_control(NULL);
	assert_int_equal(e2_close(w->fs), 0);
	e2t_rm_rf(w->dir);
	free(w->dir);
}

/* pgsrv end to end without FUSE: the public API talks to the server, and
 * requests bracketed by pgsrv_enter/leave land in the caller's groups. */
static void test_pgsrv_api(void **state)
{
	struct srvworld w;
	struct e2fs *fs;
	struct pgsrv *srv;
	struct pg_op op;
	struct pg_status st;
	struct stat sb;
	pg_t a, b;
	pid_t tid = gettid();

	srvworld_open(&w, "pgsrv");
	fs = w.fs;
	srv = w.srv;
	assert_string_equal(pgsrv_socket_path(srv), w.path);

	a = pg_create();
	assert_true(a > 0);
	b = pg_create();
	assert_true(b > a);
	assert_int_equal(pg_depend(a, a), -1);
	assert_int_equal(errno, ELOOP);
	assert_int_equal(pg_disengage(a), -1);
	assert_int_equal(errno, ENOTCONN);
	assert_int_equal(pg_engage(a), 0);
	assert_int_equal(pg_engage(a), 0); /* twice is once */
	assert_int_equal(pg_status(a, &st), 0);
	assert_int_equal(st.engaged, 1);
	assert_int_equal(pg_depend(a, b), -1);
	assert_int_equal(errno, EBUSY);

	/* a request from this thread joins a */
	pgsrv_enter(srv, tid, &op);
	assert_int_equal(e2_mknod(fs, &(struct e2_caller){.scope = pgsrv_scope(&op)}, E2_ROOT_INO,
				  "x", S_IFREG | 0644, 0, 0, 0, &sb),
			 0);
	pgsrv_leave(srv, &op);
	assert_int_equal(pg_status(a, &st), 0);
	assert_true(st.nchanges > 0);
	assert_true(st.state & PG_STATUS_RELEASED);
	/* one with no process (writeback, pid 0) joins nothing */
	{
		uint64_t n0 = st.nchanges;

		pgsrv_enter(srv, 0, &op);
		assert_int_equal(e2_mknod(fs, &(struct e2_caller){.scope = pgsrv_scope(&op)},
					  E2_ROOT_INO, "y", S_IFREG | 0644, 0, 0, 0, &sb),
				 0);
		pgsrv_leave(srv, &op);
		assert_int_equal(pg_status(a, &st), 0);
		assert_int_equal(st.nchanges, n0);
	}
	/* fsync stays a real fsync without the order policy */
	assert_false(pgsrv_fsync_order(srv, tid));
	assert_int_equal(pg_fsync_policy(PG_FSYNC_ORDER), 0);
	assert_true(pgsrv_fsync_order(srv, tid));
	assert_int_equal(pg_fsync_policy(PG_FSYNC_KEEP), 0);
	assert_false(pgsrv_fsync_order(srv, tid));
	/* the order policy reaches the ext2 calls through pgsrv_enter */
	assert_false(pgsrv_enter(srv, tid, &op));
	pgsrv_leave(srv, &op);
	assert_int_equal(pg_order_policy(PG_ORDER_GROUPS), 0);
	assert_true(pgsrv_enter(srv, tid, &op));
	pgsrv_leave(srv, &op);
	assert_false(pgsrv_enter(srv, 0, &op));
	pgsrv_leave(srv, &op);
	assert_int_equal(pg_order_policy((enum pg_order_policy)2), -1);
	assert_int_equal(errno, EINVAL);
	assert_true(pgsrv_enter(srv, tid, &op));
	pgsrv_leave(srv, &op);
	assert_int_equal(pg_order_policy(PG_ORDER_MOUNT), 0);
	assert_false(pgsrv_enter(srv, tid, &op));
	pgsrv_leave(srv, &op);

	/* A forked child speaks for itself (the library reconnects), gets a
	 * scope copied from ours, order policy included, and its engagement
	 * ends when it exits. */
	{
		pg_t c = pg_create();
		pid_t pid;
		int wst, i, up[2], down[2];
		char x = 0;

		assert_true(c > 0);
		assert_int_equal(pipe(up), 0);
		assert_int_equal(pipe(down), 0);
		assert_int_equal(pg_order_policy(PG_ORDER_GROUPS), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct pg_status cs;

			if (pg_engage(c) < 0 || pg_status(c, &cs) < 0 || cs.engaged != 1)
				_exit(1);
			/* the copy holds our group too: a now has two engagers */
			if (pg_status(a, &cs) < 0 || cs.engaged != 2)
				_exit(2);
			/* wait while the parent looks at our scope */
			if (write(up[1], "r", 1) != 1 || read(down[0], &x, 1) != 1)
				_exit(3);
			_exit(0);
		}
		assert_int_equal(read(up[0], &x, 1), 1);
		/* the child's own scope (made by its engage) kept the policy,
		 * which ours may now drop without touching the copy */
		assert_int_equal(pg_order_policy(PG_ORDER_MOUNT), 0);
		assert_false(pgsrv_enter(srv, tid, &op));
		pgsrv_leave(srv, &op);
		assert_true(pgsrv_enter(srv, pid, &op));
		pgsrv_leave(srv, &op);
		assert_int_equal(write(down[1], "g", 1), 1);
		close(up[0]);
		close(up[1]);
		close(down[0]);
		close(down[1]);
		assert_int_equal(waitpid(pid, &wst, 0), pid);
		assert_int_equal(wst, 0);
		for (i = 0; i < 500; i++) {
			assert_int_equal(pg_status(c, &st), 0);
			if (st.engaged == 0)
				break;
			usleep(10000);
		}
		assert_int_equal(st.engaged, 0);
		assert_int_equal(pg_status(a, &st), 0);
		assert_int_equal(st.engaged, 1);
		assert_int_equal(pg_close(c), 0);
	}

	assert_int_equal(pg_disengage(a), 0);
	assert_int_equal(pg_depend(a, b), 0);
	assert_int_equal(pg_engage(a), -1);
	assert_int_equal(errno, EROFS);
	assert_int_equal(pg_sync(b), 0);
	assert_int_equal(pg_close(a), 0);
	assert_int_equal(pg_close(b), 0);
	assert_int_equal(pg_close(b), -1);
	assert_int_equal(errno, ENOENT);

	pgsrv_destroy(srv);
	w.srv = NULL;
	assert_int_equal(pg_create(), -1); /* the daemon is gone */
	srvworld_close(&w);
}

/* pg_switch and pg_leave: several calls in one request, with the same
 * rules as the calls one by one, and a refused step undoing the earlier. */
static void test_pgsrv_switch(void **state)
{
	struct srvworld w;
	struct e2fs *fs;
	struct pgsrv *srv;
	struct pg_op op;
	struct pg_status st;
	struct stat sb;
	pg_t a, b, c;
	pid_t tid = gettid();

	srvworld_open(&w, "pgsw");
	fs = w.fs;
	srv = w.srv;

	/* create and engage */
	a = pg_switch(0, 0, PG_SWITCH_ENGAGE);
	assert_true(a > 0);
	assert_int_equal(pg_status(a, &st), 0);
	assert_int_equal(st.engaged, 1);
	pgsrv_enter(srv, tid, &op);
	assert_int_equal(e2_mknod(fs, &(struct e2_caller){.scope = pgsrv_scope(&op)}, E2_ROOT_INO,
				  "x", S_IFREG | 0644, 0, 0, 0, &sb),
			 0);
	pgsrv_leave(srv, &op);

	/* leave a, and b follows it: a is closed, sealed and disengaged */
	b = pg_switch(a, a, PG_SWITCH_ENGAGE);
	assert_true(b > a);
	assert_int_equal(pg_status(a, &st), 0);
	assert_int_equal(st.engaged, 0);
	assert_true(st.state & PG_STATUS_CLOSED);
	assert_true(st.state & PG_STATUS_SEALED);
	assert_int_equal(pg_status(b, &st), 0);
	assert_int_equal(st.engaged, 1);
	assert_int_equal(st.nbefores, 1);
	assert_false(pgsrv_fsync_order(srv, tid));

	/* A refused step changes nothing: c is engaged by us, so nothing can
	 * follow it (EBUSY); b stays engaged and open, the new group is gone. */
	c = pg_create();
	assert_true(c > b);
	assert_int_equal(pg_engage(c), 0);
	assert_int_equal(pg_switch(b, c, PG_SWITCH_ENGAGE | PG_SWITCH_FSYNC_ORDER), -1);
	assert_int_equal(errno, EBUSY);
	assert_int_equal(pg_status(b, &st), 0);
	assert_int_equal(st.engaged, 1);
	assert_false(st.state & PG_STATUS_CLOSED);
	assert_int_equal(pg_status(c, &st), 0);
	assert_int_equal(st.nafters, 0);
	assert_int_equal(pg_status(c + 1, &st), 0);
	assert_true(st.state & PG_STATUS_CLOSED);
	assert_int_equal(st.engaged, 0);
	assert_false(pgsrv_fsync_order(srv, tid));
	/* leaving a group we do not engage is refused before anything else */
	assert_int_equal(pg_switch(a, 0, PG_SWITCH_ENGAGE), -1);
	assert_int_equal(errno, ENOTCONN);
	assert_int_equal(pg_switch(0, 0, 1u << 7), -1);
	assert_int_equal(errno, EINVAL);

	/* the fsync policy rides along */
	assert_int_equal(pg_leave(c), 0);
	a = pg_switch(b, c, PG_SWITCH_ENGAGE | PG_SWITCH_FSYNC_ORDER);
	assert_true(a > c);
	assert_true(pgsrv_fsync_order(srv, tid));
	assert_int_equal(pg_status(b, &st), 0);
	assert_true(st.state & PG_STATUS_CLOSED);
	assert_int_equal(st.engaged, 0);

	/* pg_leave: disengage and close in one */
	assert_int_equal(pg_leave(a), 0);
	assert_int_equal(pg_status(a, &st), 0);
	assert_true(st.state & PG_STATUS_CLOSED);
	assert_int_equal(st.engaged, 0);
	assert_int_equal(pg_leave(a), -1);
	assert_int_equal(errno, ENOTCONN);
	assert_int_equal(pg_sync(a), 0);

	srvworld_close(&w);
}

/* In a child: pg_switch(0, 0, ENGAGE | flags), write the id to fd, exit
 * without leaving the group.  Returns the id; the child has been waited
 * for. */
static pg_t child_engages(unsigned flags)
{
	int fds[2], st;
	pg_t id = -1;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		id = pg_switch(0, 0, PG_SWITCH_ENGAGE | flags);
		_exit(write(fds[1], &id, sizeof(id)) == sizeof(id) && id > 0 ? 0 : 1);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &id, sizeof(id)), sizeof(id));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return id;
}

/* Engagement is inherited as a file table is: a forked child keeps what
 * its parent had engaged at the fork, whatever the parent engages or
 * leaves afterwards, and a group the child still holds stays engaged.
 * Each child (child_until_closed()) waits until the parent has changed
 * its scope, then the parent makes a change with the child's pid, as the
 * daemon would for the child's write. */
static void fork_release(int wfd, pid_t pid)
{
	int wst;

	close(wfd);
	assert_int_equal(waitpid(pid, &wst, 0), pid);
	assert_int_equal(wst, 0);
}

/* A file made on behalf of pid; returns the changes each of a and c has
 * gained by it. */
static void change_as(struct pgsrv *srv, struct e2fs *fs, pid_t pid, const char *name, pg_t a,
		      pg_t c, uint64_t *da, uint64_t *dc)
{
	struct pg_status sa, sc;
	struct pg_op op;
	struct stat sb;

	assert_int_equal(pg_status(a, &sa), 0);
	assert_int_equal(pg_status(c, &sc), 0);
	pgsrv_enter(srv, pid, &op);
	assert_int_equal(e2_mknod(fs, &(struct e2_caller){.scope = pgsrv_scope(&op)}, E2_ROOT_INO,
				  name, S_IFREG | 0644, 0, 0, 0, &sb),
			 0);
	pgsrv_leave(srv, &op);
	*da = sa.nchanges;
	*dc = sc.nchanges;
	assert_int_equal(pg_status(a, &sa), 0);
	assert_int_equal(pg_status(c, &sc), 0);
	*da = sa.nchanges - *da;
	*dc = sc.nchanges - *dc;
}

static void test_pgsrv_fork_copy(void **state)
{
	struct srvworld w;
	struct e2fs *fs;
	struct pgsrv *srv;
	struct pg_status st;
	uint64_t da, dc;
	int wfd;
	pg_t a, b, c;
	pid_t pid;

	(void)state;
	srvworld_open(&w, "pgfork");
	fs = w.fs;
	srv = w.srv;

	a = pg_create();
	b = pg_create();
	c = pg_create();
	assert_true(a > 0 && b > a && c > b);
	assert_int_equal(pg_engage(a), 0);
	pid = child_until_closed(&wfd);
	/* the parent moves from a to c after the fork */
	assert_int_equal(pg_engage(c), 0);
	assert_int_equal(pg_disengage(a), 0);
	/* the child still has a engaged: a cannot go before another group */
	assert_int_equal(pg_status(a, &st), 0);
	assert_int_equal(st.engaged, 1);
	assert_int_equal(pg_depend(a, b), -1);
	assert_int_equal(errno, EBUSY);
	/* the child's change joins a, not c; the parent's joins c */
	change_as(srv, fs, pid, "child", a, c, &da, &dc);
	assert_true(da > 0);
	assert_int_equal(dc, 0);
	change_as(srv, fs, getpid(), "parent", a, c, &da, &dc);
	assert_int_equal(da, 0);
	assert_true(dc > 0);
	fork_release(wfd, pid);
	/* with the child gone, so is its engagement of a */
	assert_int_equal(pg_depend(a, b), 0);

	/* a child forked with nothing engaged stays out of what the parent
	 * engages later */
	assert_int_equal(pg_disengage(c), 0);
	pid = child_until_closed(&wfd);
	assert_int_equal(pg_engage(b), 0);
	change_as(srv, fs, pid, "child2", b, c, &da, &dc);
	assert_int_equal(da, 0);
	assert_int_equal(dc, 0);
	fork_release(wfd, pid);
	assert_int_equal(pg_disengage(b), 0);

	srvworld_close(&w);
}

/* PG_SWITCH_AUTOCLOSE: the group goes with its engagement, by disengage or
 * by exit, and a client that saw the process exit finds it so at once. */
static void test_pgsrv_autoclose(void **state)
{
	struct srvworld w;
	struct ctl_req req = {.magic = CTL_MAGIC,
			      .version = 1,
			      .op = CTL_SWITCH,
			      .flags = CTL_SW_CREATE | CTL_SW_ENGAGE | CTL_SW_AUTOCLOSE};
	struct ctl_peer peer = {.pid = getpid(), .uid = getuid(), .gid = getgid()};
	struct ctl_rep rep;
	struct pgsrv *srv;
	struct pg_status st;
	pg_t a, b, c;

	srvworld_open(&w, "pgac");
	srv = w.srv;

	/* version 1 has no such flag: refused as a version 1 daemon would */
	pgsrv_request(srv, &peer, &req, sizeof(req), &rep);
	assert_int_equal(rep.err, EINVAL);
	assert_int_equal(rep.version, 1);
	/* it qualifies an engage */
	assert_int_equal(pg_switch(0, 0, PG_SWITCH_AUTOCLOSE), -1);
	assert_int_equal(errno, EINVAL);

	/* a disengage closes it */
	a = pg_switch(0, 0, PG_SWITCH_ENGAGE | PG_SWITCH_AUTOCLOSE);
	assert_true(a > 0);
	assert_int_equal(pg_disengage(a), 0);
	assert_int_equal(pg_status(a, &st), 0);
	assert_true(st.state & PG_STATUS_CLOSED);
	assert_int_equal(st.engaged, 0);

	/* a refused switch gives the left group back as it was, autoclose
	 * included */
	b = pg_switch(0, 0, PG_SWITCH_ENGAGE | PG_SWITCH_AUTOCLOSE);
	assert_true(b > a);
	c = pg_create();
	assert_int_equal(pg_engage(c), 0);
	assert_int_equal(pg_switch(b, c, PG_SWITCH_ENGAGE), -1);
	assert_int_equal(errno, EBUSY);
	assert_int_equal(pg_status(b, &st), 0);
	assert_false(st.state & PG_STATUS_CLOSED);
	assert_int_equal(st.engaged, 1);
	assert_int_equal(pg_leave(c), 0);
	assert_int_equal(pg_disengage(b), 0);
	assert_int_equal(pg_status(b, &st), 0);
	assert_true(st.state & PG_STATUS_CLOSED);
	/* a plain engage of an open group does not close it */
	c = pg_create();
	assert_int_equal(pg_engage(c), 0);
	assert_int_equal(pg_disengage(c), 0);
	assert_int_equal(pg_status(c, &st), 0);
	assert_false(st.state & PG_STATUS_CLOSED);

	/* the process exits: its group is disengaged and closed, and so it is
	 * for the next request, not whenever the watcher gets to it */
	a = child_engages(PG_SWITCH_AUTOCLOSE);
	assert_int_equal(pg_status(a, &st), 0);
	assert_int_equal(st.engaged, 0);
	assert_true(st.state & PG_STATUS_CLOSED);
	/* without autoclose it is only disengaged, and may be a before at
	 * once: the dependency is refused only while a live process engages
	 * it */
	a = child_engages(0);
	assert_int_equal(pg_depend(a, c), 0);
	assert_int_equal(pg_status(a, &st), 0);
	assert_int_equal(st.engaged, 0);
	assert_false(st.state & PG_STATUS_CLOSED);
	assert_int_equal(pg_close(a), 0);
	assert_int_equal(pg_close(c), 0);

	srvworld_close(&w);
}

/* A control path that does not resolve is no mount found (ENXIO), never
 * ENOENT or ELOOP: to the caller those mean a missing group and a group
 * made its own before. */
static void test_missing_control_errno(void **state)
{
	char *dir = e2t_tmpdir_new("nosuchctl"), path[512];

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/nonexistent", dir);
	assert_int_equal(pg_set_control(path), 0);
	errno = 0;
	assert_int_equal(pg_create(), -1);
	assert_int_equal(errno, ENXIO);
	errno = 0;
	assert_int_equal(pg_sync(1), -1);
	assert_int_equal(errno, ENXIO);
	/* a symbolic link to itself */
	snprintf(path, sizeof(path), "%s/loop", dir);
	assert_int_equal(symlink(path, path), 0);
	assert_int_equal(pg_set_control(path), 0);
	errno = 0;
	assert_int_equal(pg_depend(1, 2), -1);
	assert_int_equal(errno, ENXIO);
	pg_set_control(NULL);
	e2t_rm_rf(dir);
	free(dir);
}

/* A daemon that was killed leaves its socket file behind, refusing
 * connections: the API says ECONNRESET (the daemon is gone), the errno
 * the header documents, not ENXIO (no mount) or ENOTCONN (which
 * pg_disengage uses for a group not engaged). */
static void test_dead_daemon_errno(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char *dir = e2t_tmpdir_new("deadctl");
	int fd;

	(void)state;
	assert_non_null(dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/dead.ctl", dir);
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd); /* the file stays; nobody listens */
	assert_int_equal(pg_set_control(sa.sun_path), 0);
	errno = 0;
	assert_int_equal(pg_create(), -1);
	assert_int_equal(errno, ECONNRESET);
	errno = 0;
	assert_int_equal(pg_sync(1), -1);
	assert_int_equal(errno, ECONNRESET);
	pg_set_control(NULL);
	e2t_rm_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ids),
	    cmocka_unit_test(test_depend_refusals),
	    cmocka_unit_test(test_access),
	    cmocka_unit_test(test_uid_limit),
	    cmocka_unit_test(test_closed_and_retired),
	    cmocka_unit_test(test_forget_after_round),
	    cmocka_unit_test(test_forget_past_engaged),
	    cmocka_unit_test(test_sync_befores),
	    cmocka_unit_test(test_dag_order),
	    cmocka_unit_test(test_dag_order_none_fails),
	    cmocka_unit_test(test_chain_order),
	    cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_atomic_replace),
	    cmocka_unit_test(test_order_replace_chain),
	    cmocka_unit_test(test_replace_chain_parks_apart),
	    cmocka_unit_test(test_mail_groups),
	    cmocka_unit_test(test_mail_group_order),
	    cmocka_unit_test(test_proc_parse),
	    cmocka_unit_test(test_scope_resolve),
	    cmocka_unit_test(test_scope_walk_stops_at_scope),
	    cmocka_unit_test(test_scope_hit_reads_nothing),
	    cmocka_unit_test(test_caller_real),
	    cmocka_unit_test(test_caller_fake),
	    cmocka_unit_test(test_scope_exit_watch),
	    cmocka_unit_test(test_scope_reap_waits_for_watcher),
	    cmocka_unit_test(test_scope_pinned_add_watched),
	    cmocka_unit_test(test_scope_live_parent_read_once),
	    cmocka_unit_test(test_ctl_protocol),
	    cmocka_unit_test(test_ctl_threads_kept),
	    cmocka_unit_test(test_ctl_connect_not_stdio),
	    cmocka_unit_test(test_ctl_access),
	    cmocka_unit_test(test_pgsrv_api),
	    cmocka_unit_test(test_pgsrv_switch),
	    cmocka_unit_test(test_pgsrv_autoclose),
	    cmocka_unit_test(test_pgsrv_fork_copy),
	    cmocka_unit_test(test_dead_daemon_errno),
	    cmocka_unit_test(test_missing_control_errno),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
