/* Unit tests of engine snapshots (lib/inspect/inspect.c) and their rendering
 * (lib/inspect/statfmt.c) on a memory cache with a known patch graph:
 *
 *   block 1: h   byte 0+8, no deps            (hard, writable)
 *            E   empty, held, no deps         (stands for an open group)
 *   block 2: a   byte 0+16, waits for E       (soft, undo 16)
 *   block 3: y   byte 64+8, no deps           (hard, writable)
 *            b   byte 0+4, waits for a        (soft, undo 4)
 *   block 4: x   bit at 8, waits for h        (soft)
 *
 * Every soft patch has a dependency the engine cannot merge away (a hard
 * patch never gains one), so the shape does not depend on how eagerly the
 * engine merges.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "bdev/bdev.h"
#include "engine/cache.h"
#include "inspect/inspect.h"
#include "engine/pgeng.h"
#include "cli/statfmt.h"

#define BS   512
#define NBLK 64

struct dag {
	struct bdev *mem;
	struct cache *c;
	struct cblock *blk[5];
	struct patch *h, *e, *a, *y, *b, *x;
};

static struct patch *byte(struct dag *d, int blk, uint32_t off, uint32_t len, struct patch *dep)
{
	uint8_t buf[BS];
	struct patch *p;

	memset(buf, 0x5a, len);
	assert_int_equal(
	    patch_create_byte(d->c, d->blk[blk], off, len, buf, &dep, dep ? 1 : 0, NULL, &p), 0);
	return p;
}

static int dag_setup(void **state)
{
	struct dag *d = calloc(1, sizeof(*d));
	int i;

	assert_non_null(d);
	/* Blocks that are not zeros: undo that was all zeros would hold no
	 * memory (undo.c), and the counts below are of copies. */
	static uint8_t image[NBLK * BS];

	memset(image, 0xc3, sizeof(image));
	assert_int_equal(bdev_mem_create(BS, NBLK, image, sizeof(image), &d->mem), 0);
	assert_int_equal(cache_create(d->mem, NULL, &d->c), 0);
	for (i = 1; i <= 4; i++)
		assert_int_equal(cache_get(d->c, (uint64_t)i, &d->blk[i]), 0);
	d->h = byte(d, 1, 0, 8, NULL);
	assert_int_equal(patch_create_empty_held(d->c, NULL, 0, &d->e), 0);
	d->a = byte(d, 2, 0, 16, d->e);
	d->y = byte(d, 3, 64, 8, NULL);
	d->b = byte(d, 3, 0, 4, d->a);
	assert_int_equal(patch_create_bit(d->c, d->blk[4], 8, 0x10, &d->h, 1, NULL, &d->x), 0);
	*state = d;
	return 0;
}

static int dag_teardown(void **state)
{
	struct dag *d = *state;
	int i;

	struct patch *all[] = {d->h, d->e, d->a, d->y, d->b, d->x};
	for (i = 0; i < 6; i++)
		patch_release(d->c, all[i]);
	for (i = 1; i <= 4; i++)
		cache_put(d->c, d->blk[i]);
	cache_destroy(d->c);
	bdev_destroy(d->mem);
	free(d);
	return 0;
}

static struct insp_snap *snap(struct dag *d, uint32_t view, uint64_t block, uint32_t limit)
{
	struct insp_query q = {.view = view, .limit = limit, .block = block};
	struct insp_snap *s = NULL;

	assert_int_equal(inspect_take(d->c, NULL, &q, &s), 0);
	assert_non_null(s);
	return s;
}

/* The patch of block blkno with this type and hardness (the DAG has at
 * most one of each). */
static const struct insp_patch *find(const struct insp_snap *s, uint64_t blkno, uint32_t type,
				     bool hard)
{
	size_t i;

	for (i = 0; i < s->npatches; i++)
		if (s->patches[i].blkno == blkno && s->patches[i].type == type &&
		    !!(s->patches[i].flags & INSP_P_HARD) == hard)
			return &s->patches[i];
	return NULL;
}

static bool has_edge(const struct insp_snap *s, uint64_t before, uint64_t after)
{
	size_t i;

	for (i = 0; i < s->nedges; i++)
		if (s->edges[i].before == before && s->edges[i].after == after)
			return true;
	return false;
}

/* Render into a string (the caller frees it). */
static char *render(int (*fn)(FILE *, const struct insp_snap *), const struct insp_snap *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(fn(f, s), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void test_summary_counts(void **state)
{
	struct dag *d = *state;
	struct insp_snap *s = snap(d, INSP_SUMMARY, 0, 0);
	const struct insp_summary *m = &s->sum;

	assert_int_equal(m->st.blocks_cached, 4);
	assert_int_equal(m->st.blocks_dirty, 4);
	assert_int_equal(m->st.blocks_inflight, 0);
	/* Blocks 1 and 3 have a writable patch; 2 and 4 wait. */
	assert_int_equal(m->st.blocks_ready, 2);
	assert_int_equal(m->st.patches_byte, 4);
	assert_int_equal(m->st.patches_bit, 1);
	assert_int_equal(m->st.patches_empty, 1);
	assert_int_equal(m->st.patches_hard, 2);
	assert_int_equal(m->st.patches_soft, 3);
	assert_int_equal(m->patches_pending, 6);
	assert_int_equal(m->st.undo_bytes, 16 + 4);
	assert_int_equal(m->st.dirty_bytes, 4 * BS);
	assert_true(m->st.engine_bytes >= m->st.undo_bytes);
	assert_int_equal(m->block_size, BS);
	assert_int_equal(m->consistency, CONSISTENCY_SOFTUPDATES);
	assert_int_equal(m->flush_interval_ms, 5000);
	assert_int_equal(m->have_groups, 0);
	assert_int_equal(s->nblocks + s->npatches + s->nedges + s->ngroups, 0);
	inspect_free(s);
}

static void test_blocks(void **state)
{
	struct dag *d = *state;
	struct insp_snap *s = snap(d, INSP_BLOCKS, 0, 0);
	static const uint32_t np[] = {1, 1, 2, 1}, nr[] = {1, 0, 1, 0}, nh[] = {1, 0, 1, 0};
	static const uint64_t undo[] = {0, 16, 4, 0};
	size_t i;

	assert_int_equal(s->nblocks, 4);
	assert_false(s->flags & INSP_S_TRUNCATED);
	/* Oldest dirtied first: the order they were written to. */
	for (i = 0; i < 4; i++) {
		const struct insp_block *b = &s->blocks[i];

		assert_int_equal(b->blkno, i + 1);
		assert_int_equal(b->npatches, np[i]);
		assert_int_equal(b->nready, nr[i]);
		assert_int_equal(b->nhard, nh[i]);
		assert_int_equal(b->undo_bytes, undo[i]);
		assert_int_equal(!!(b->flags & INSP_B_READY), nr[i] > 0);
		assert_true(b->nready <= b->npatches);
		if (i)
			assert_true(b->age_ms <= s->blocks[i - 1].age_ms);
	}
	assert_true(s->sum.oldest_dirty_ms >= s->blocks[0].age_ms);
	inspect_free(s);

	/* The limit bounds the list and says so. */
	s = snap(d, INSP_BLOCKS, 0, 2);
	assert_int_equal(s->nblocks, 2);
	assert_true(s->flags & INSP_S_TRUNCATED);
	inspect_free(s);
}

static void test_why_names_held_patch(void **state)
{
	struct dag *d = *state;
	struct insp_snap *s = snap(d, INSP_WHY, 3, 0);
	char *txt;

	/* b (block 3) waits for a (block 2), which waits for the held E. */
	assert_int_equal(s->why_end, INSP_WHY_HELD);
	assert_int_equal(s->npatches, 3);
	assert_int_equal(s->patches[0].blkno, 3);
	assert_int_equal(s->patches[0].type, INSP_P_BYTE);
	assert_int_equal(s->patches[0].off, 0);
	assert_int_equal(s->patches[1].blkno, 2);
	assert_int_equal(s->patches[2].type, INSP_P_EMPTY);
	assert_true(s->patches[2].flags & INSP_P_HELD);
	assert_int_equal(s->nedges, 2);
	assert_true(has_edge(s, s->patches[1].seq, s->patches[0].seq));
	assert_true(has_edge(s, s->patches[2].seq, s->patches[1].seq));
	txt = render(statfmt_text, s);
	assert_non_null(strstr(txt, "held"));
	assert_non_null(strstr(txt, "cause:"));
	free(txt);
	inspect_free(s);

	/* A block with only writable patches is not held back; an unknown
	 * or clean one has nothing to explain. */
	s = snap(d, INSP_WHY, 1, 0);
	assert_int_equal(s->why_end, INSP_WHY_READY);
	inspect_free(s);
	/* x waits only for h, which the next round writes. */
	s = snap(d, INSP_WHY, 4, 0);
	assert_int_equal(s->why_end, INSP_WHY_WRITE);
	assert_int_equal(s->npatches, 2);
	assert_int_equal(s->patches[0].type, INSP_P_BIT);
	assert_int_equal(s->patches[1].blkno, 1);
	assert_true(s->patches[1].flags & INSP_P_HARD);
	inspect_free(s);
	s = snap(d, INSP_WHY, 9, 0);
	assert_int_equal(s->why_end, INSP_WHY_CLEAN);
	inspect_free(s);

	/* A chain longer than the limit is cut, and says so. */
	s = snap(d, INSP_WHY, 3, 2);
	assert_int_equal(s->why_end, INSP_WHY_DEPTH);
	assert_int_equal(s->npatches, 2);
	inspect_free(s);
}

static void test_patches_of_block(void **state)
{
	struct dag *d = *state;
	struct insp_snap *s = snap(d, INSP_PATCHES, 3, 0);
	const struct insp_patch *b, *y, *a;
	size_t i, ntarget = 0;

	for (i = 0; i < s->npatches; i++)
		ntarget += !!(s->patches[i].flags & INSP_P_TARGET);
	assert_int_equal(ntarget, 2);
	assert_int_equal(s->npatches, 3);
	b = find(s, 3, INSP_P_BYTE, false);
	y = find(s, 3, INSP_P_BYTE, true);
	a = find(s, 2, INSP_P_BYTE, false);
	assert_non_null(b);
	assert_non_null(y);
	assert_non_null(a);
	assert_int_equal(b->undo_bytes, 4);
	assert_int_equal(b->npend_ext, 1);
	assert_int_equal(y->npend_ext + y->npend_blk, 0);
	assert_false(a->flags & INSP_P_TARGET);
	assert_int_equal(a->undo_bytes, 16);
	assert_int_equal(s->nedges, 1);
	assert_true(has_edge(s, a->seq, b->seq));
	inspect_free(s);
}

/* Is s a plausible dot graph: one digraph, balanced braces and quotes? */
static void assert_dot_shape(const char *s)
{
	int depth = 0;
	bool quoted = false;
	const char *p;

	assert_int_equal(strncmp(s, "digraph fstitch {", 17), 0);
	for (p = s; *p; p++) {
		if (*p == '\\' && quoted && p[1]) {
			p++;
			continue;
		}
		if (*p == '"')
			quoted = !quoted;
		else if (!quoted && *p == '{')
			depth++;
		else if (!quoted && *p == '}')
			assert_true(--depth >= 0);
	}
	assert_false(quoted);
	assert_int_equal(depth, 0);
}

static void test_graph_and_dot(void **state)
{
	struct dag *d = *state;
	struct insp_snap *s = snap(d, INSP_GRAPH, 0, 0);
	const struct insp_patch *a, *b, *x, *h;
	char *dot, line[64], path[] = "/tmp/test_inspect.XXXXXX";
	FILE *f;
	int fd;

	assert_int_equal(s->nblocks, 4);
	assert_int_equal(s->npatches, 5); /* h a y b x; E is on no block */
	h = find(s, 1, INSP_P_BYTE, true);
	a = find(s, 2, INSP_P_BYTE, false);
	b = find(s, 3, INSP_P_BYTE, false);
	x = find(s, 4, INSP_P_BIT, false);
	assert_non_null(h);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(x);
	assert_int_equal(s->nedges, 2);
	assert_true(has_edge(s, a->seq, b->seq));
	assert_true(has_edge(s, h->seq, x->seq));

	dot = render(statfmt_dot, s);
	assert_dot_shape(dot);
	assert_non_null(strstr(dot, "subgraph cluster_b3 {"));
	snprintf(line, sizeof(line), "p%llu -> p%llu;", (unsigned long long)b->seq,
		 (unsigned long long)a->seq);
	assert_non_null(strstr(dot, line));
	/* Graphviz itself is the real judge when it is installed. */
	if (system("command -v dot >/dev/null 2>&1") == 0) {
		char cmd[128];

		fd = mkstemp(path);
		assert_true(fd >= 0);
		f = fdopen(fd, "w");
		assert_non_null(f);
		fputs(dot, f);
		assert_int_equal(fclose(f), 0);
		snprintf(cmd, sizeof(cmd), "dot -Tsvg %s >/dev/null 2>&1", path);
		assert_int_equal(system(cmd), 0);
		unlink(path);
	}
	free(dot);
	inspect_free(s);

	/* --limit bounds the number of patches drawn. */
	s = snap(d, INSP_GRAPH, 0, 2);
	assert_true(s->npatches <= 2);
	assert_true(s->flags & INSP_S_TRUNCATED);
	inspect_free(s);
}

static void test_json_shape(void **state)
{
	struct dag *d = *state;
	static const char *const keys[] = {
	    "\"schema\":\"fstitch-stat/1\"",
	    "\"mode\":",
	    "\"consistency\":\"softupdates\"",
	    "\"blocks\":",
	    "\"dirty\":4",
	    "\"patches\":",
	    "\"pending\":6",
	    "\"memory\":",
	    "\"undo_bytes\":20",
	    "\"io\":",
	    "\"groups\":",
	    "\"block_list\":[",
	};
	struct insp_snap *s = snap(d, INSP_BLOCKS, 0, 0);
	char *js = render(statfmt_json, s);
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strstr(js, keys[i]))
			fail_msg("missing %s in %s", keys[i], js);
	free(js);
	inspect_free(s);
}

static void test_wire_roundtrip(void **state)
{
	struct dag *d = *state;
	struct insp_snap *s = snap(d, INSP_PATCHES, 3, 0), *t = NULL;
	void *buf;
	size_t len;

	assert_int_equal(inspect_encode(s, &buf, &len), 0);
	assert_int_equal(inspect_decode(buf, len, &t), 0);
	assert_int_equal(t->view, s->view);
	assert_int_equal(t->block, 3);
	assert_int_equal(t->npatches, s->npatches);
	assert_int_equal(t->nedges, s->nedges);
	assert_memory_equal(&t->sum, &s->sum, sizeof(s->sum));
	assert_memory_equal(t->patches, s->patches, s->npatches * sizeof(*s->patches));
	assert_memory_equal(t->edges, s->edges, s->nedges * sizeof(*s->edges));
	inspect_free(t);
	/* Anything short, long or foreign is refused. */
	assert_int_equal(inspect_decode(buf, len - 1, &t), -EPROTO);
	assert_int_equal(inspect_decode(buf, 10, &t), -EPROTO);
	((uint8_t *)buf)[0] ^= 0xff;
	assert_int_equal(inspect_decode(buf, len, &t), -EPROTO);
	((uint8_t *)buf)[0] ^= 0xff;
	/* Damaged counts and records: refused or accepted, never a crash,
	 * and whatever is accepted renders (ASan builds check the reads). */
	{
		uint8_t *copy = malloc(len);
		unsigned i, seed = 1;
		int r;

		assert_non_null(copy);
		for (i = 0; i < 2000; i++) {
			memcpy(copy, buf, len);
			seed = seed * 1103515245u + 12345u;
			copy[(seed >> 8) % len] ^= (uint8_t)(1u << ((seed >> 4) & 7));
			r = inspect_decode(copy, len - (i % 3 == 0 ? (seed >> 16) % 8 : 0), &t);
			assert_true(r == 0 || r == -EPROTO);
			if (r == 0) {
				FILE *f = fopen("/dev/null", "w");

				assert_non_null(f);
				statfmt_text(f, t);
				statfmt_json(f, t);
				statfmt_dot(f, t);
				fclose(f);
				inspect_free(t);
			}
		}
		free(copy);
	}
	free(buf);
	inspect_free(s);
}

/* After a round and letting go of the held patch, everything drains. */
static void test_counts_follow_writes(void **state)
{
	struct dag *d = *state;
	struct insp_snap *s;
	size_t n;

	assert_int_equal(cache_flush_round(d->c, &n), 0);
	assert_int_equal(n, 2); /* blocks 1 and 3 */
	s = snap(d, INSP_SUMMARY, 0, 0);
	assert_int_equal(s->sum.st.rounds, 1);
	assert_int_equal(s->sum.st.barriers, 1);
	assert_int_equal(s->sum.st.block_writes, 2);
	/* Block 3 went out with b rolled back. */
	assert_int_equal(s->sum.st.rollback_writes, 1);
	assert_int_equal(s->sum.st.blocks_dirty, 3); /* 2, 3 (b), 4 */
	assert_int_equal(s->sum.st.blocks_ready, 1); /* 4: x no longer waits */
	assert_int_equal(s->sum.patches_pending, 4); /* E a b x */
	inspect_free(s);
	/* b still waits for E. */
	s = snap(d, INSP_WHY, 3, 0);
	assert_int_equal(s->why_end, INSP_WHY_HELD);
	inspect_free(s);
	assert_int_equal(cache_sync(d->c), -EAGAIN);

	patch_unhold(d->c, d->e);
	assert_int_equal(cache_sync(d->c), 0);
	s = snap(d, INSP_SUMMARY, 0, 0);
	assert_int_equal(s->sum.st.blocks_dirty, 0);
	assert_int_equal(s->sum.patches_pending, 0);
	assert_int_equal(s->sum.st.undo_bytes, 0);
	assert_int_equal(s->sum.st.blocks_ready, 0);
	assert_int_equal(s->sum.oldest_dirty_ms, 0);
	inspect_free(s);
	s = snap(d, INSP_WHY, 3, 0);
	assert_int_equal(s->why_end, INSP_WHY_CLEAN);
	assert_int_equal(s->npatches, 0);
	inspect_free(s);
}

static void test_bad_query(void **state)
{
	struct dag *d = *state;
	struct insp_query q = {.view = INSP_VIEW_MAX};
	struct insp_snap *s = NULL;

	assert_int_equal(inspect_take(d->c, NULL, &q, &s), -EINVAL);
	q.view = INSP_BLOCKS;
	q.limit = INSP_LIMIT_MAX + 1;
	assert_int_equal(inspect_take(d->c, NULL, &q, &s), -EINVAL);
	assert_null(s);
}

/* ---- with patchgroups ----------------------------------------------------- */

/* One byte written to blk by an operation of a scope that engages g. */
static void group_write(struct pgeng *e, struct cache *c, struct pg_group *g, uint64_t blk,
			struct pg_op *op, bool end)
{
	struct cblock *b;
	uint8_t v = 7;

	pgeng_op_begin(e, op, &g, 1, NULL);
	assert_int_equal(cache_get(c, blk, &b), 0);
	assert_int_equal(patch_create_byte(c, b, 0, 1, &v, NULL, 0, pgeng_op_scope(op), NULL), 0);
	cache_put(c, b);
	if (end)
		pgeng_op_end(op);
}

static const struct insp_group *group_in(const struct insp_snap *s, int64_t id)
{
	size_t i;

	for (i = 0; i < s->ngroups; i++)
		if (s->groups[i].id == id)
			return &s->groups[i];
	return NULL;
}

static void test_groups_label_the_chain(void **state)
{
	struct cache_opts co = {.flush_interval_ms = 60000};
	struct insp_query q = {.view = INSP_WHY, .block = 1};
	const struct insp_group *g;
	struct pg_group *ga, *gb;
	struct insp_snap *s;
	struct bdev *mem;
	struct cache *c;
	struct pgeng *e;
	struct pg_op op = {0};
	int64_t a, b;

	(void)state;
	assert_int_equal(bdev_mem_create(BS, NBLK, NULL, 0, &mem), 0);
	assert_int_equal(cache_create(mem, &co, &c), 0);
	assert_int_equal(pgeng_create(c, &e), 0);
	assert_int_equal(pgeng_group_create(e, 0, &a), 0);
	assert_int_equal(pgeng_engage(e, a, 0, &ga), 0);

	/* While a's operation is in flight its head is still held: the
	 * change waits for it, and the chain names the group. */
	group_write(e, c, ga, 1, &op, false);
	assert_int_equal(inspect_take(c, e, &q, &s), 0);
	assert_int_equal(s->why_end, INSP_WHY_HELD);
	assert_int_equal(s->npatches, 2);
	assert_int_equal(s->patches[1].type, INSP_P_EMPTY);
	assert_int_equal(s->patches[1].group, a);
	assert_int_equal(s->patches[1].role, INSP_R_HEAD);
	assert_true(s->patches[1].flags & INSP_P_HELD);
	assert_int_equal(s->sum.have_groups, 1);
	assert_int_equal(s->sum.groups_known, 1);
	assert_int_equal(s->sum.groups_open, 1);
	assert_int_equal(s->sum.groups_engaged, 1);
	assert_int_equal(s->ngroups, 0); /* counted, not listed */
	inspect_free(s);
	pgeng_op_end(&op);

	q.view = INSP_GROUPS;
	assert_int_equal(inspect_take(c, e, &q, &s), 0);
	g = group_in(s, a);
	assert_non_null(g);
	assert_int_equal(g->engaged, 1);
	assert_true(g->state & PG_ST_RELEASED);
	assert_false(g->state & (PG_ST_SEALED | PG_ST_CLOSED));
	assert_int_equal(g->nchanges, 1);
	assert_int_equal(g->pending, 1);
	assert_int_equal(g->head_held, 0); /* released by its first change */
	assert_int_equal(g->tail_held, 1); /* open: may still get changes */
	inspect_free(s);

	/* b after a: b's change waits for b's head, which waits for a's
	 * tail, which waits for a's change, which the next round writes. */
	pgeng_disengage(e, ga);
	assert_int_equal(pgeng_group_create(e, 0, &b), 0);
	assert_int_equal(pgeng_depend(e, a, b, 0), 0);
	assert_int_equal(pgeng_engage(e, b, 0, &gb), 0);
	group_write(e, c, gb, 2, &op, true);
	q.view = INSP_WHY;
	q.block = 2;
	assert_int_equal(inspect_take(c, e, &q, &s), 0);
	assert_int_equal(s->why_end, INSP_WHY_WRITE);
	assert_int_equal(s->npatches, 4);
	assert_int_equal(s->patches[0].blkno, 2);
	assert_int_equal(s->patches[1].group, b);
	assert_int_equal(s->patches[1].role, INSP_R_HEAD);
	assert_int_equal(s->patches[2].group, a);
	assert_int_equal(s->patches[2].role, INSP_R_TAIL);
	assert_int_equal(s->patches[3].blkno, 1);
	inspect_free(s);

	q.view = INSP_GROUPS;
	assert_int_equal(inspect_take(c, e, &q, &s), 0);
	assert_int_equal(s->ngroups, 2);
	assert_int_equal(s->groups[0].id, b); /* newest first */
	assert_int_equal(s->sum.groups_sealed, 1);
	assert_true(group_in(s, a)->state & PG_ST_SEALED);
	assert_int_equal(group_in(s, a)->nafters, 1);
	assert_int_equal(group_in(s, b)->nbefores, 1);
	inspect_free(s);

	/* The graph shows the groups' patches, labelled, with their edges. */
	q.view = INSP_GRAPH;
	assert_int_equal(inspect_take(c, e, &q, &s), 0);
	{
		size_t i, nlabelled = 0;
		char *dot;

		for (i = 0; i < s->npatches; i++)
			nlabelled += s->patches[i].group != 0;
		assert_true(nlabelled >= 3);
		assert_true(s->nedges >= 3);
		dot = render(statfmt_dot, s);
		assert_dot_shape(dot);
		assert_non_null(strstr(dot, "tail of group 1"));
		free(dot);
	}
	inspect_free(s);

	pgeng_disengage(e, gb);
	pgeng_close(e, a, 0);
	pgeng_close(e, b, 0);
	assert_int_equal(cache_sync(c), 0);
	q.view = INSP_SUMMARY;
	assert_int_equal(inspect_take(c, e, &q, &s), 0);
	assert_int_equal(s->sum.st.blocks_dirty, 0);
	inspect_free(s);
	pgeng_destroy(e);
	cache_destroy(c);
	bdev_destroy(mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_summary_counts, dag_setup, dag_teardown),
	    cmocka_unit_test_setup_teardown(test_blocks, dag_setup, dag_teardown),
	    cmocka_unit_test_setup_teardown(test_why_names_held_patch, dag_setup, dag_teardown),
	    cmocka_unit_test_setup_teardown(test_patches_of_block, dag_setup, dag_teardown),
	    cmocka_unit_test_setup_teardown(test_graph_and_dot, dag_setup, dag_teardown),
	    cmocka_unit_test_setup_teardown(test_json_shape, dag_setup, dag_teardown),
	    cmocka_unit_test_setup_teardown(test_wire_roundtrip, dag_setup, dag_teardown),
	    cmocka_unit_test_setup_teardown(test_counts_follow_writes, dag_setup, dag_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_query, dag_setup, dag_teardown),
	    cmocka_unit_test(test_groups_label_the_chain),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
