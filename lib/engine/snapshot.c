/* Snapshots of the engine for fstitch-stat (see snapshot.h).
 *
 * Everything here reads the engine's internals (cache_int.h) under its
 * lock and changes nothing: no flag, no list, no reference.  Work under the
 * lock is kept to counters plus at most `limit` entries per list; finding a
 * patch's befores scans the live patches (the engine keeps only forward
 * edges, because reverse ones would double its edge memory).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cache_int.h"
#include "pgeng.h"
#include "snapshot.h"
#include "util/grow.h"

#define WHY_SLOTS 64 /* befores looked at per step of a why-chain */
/* Patch slots a why-chain may scan in all, whatever the limit: anyone may
 * ask, and the cache lock is held throughout (about 16 ms per million
 * slots). */
#define SCAN_BUDGET (16u << 20)

/* ---- a growable array of records --------------------------------------- */

struct vec {
	void *v;
	size_t n, cap, size;
};

static void *vec_push(struct vec *a)
{
	if (grow(&a->v, &a->cap, a->n + 1, a->size, 16))
		return NULL;
	return memset((char *)a->v + a->n++ * a->size, 0, a->size);
}

/* ---- a set of patch pointers (open addressing) -------------------------- */

struct pset {
	const struct patch **slot;
	size_t mask, n;
};

static int pset_init(struct pset *s, size_t want)
{
	size_t n = 16;

	while (n < want * 2)
		n *= 2;
	s->slot = calloc(n, sizeof(*s->slot));
	if (!s->slot)
		return -ENOMEM;
	s->mask = n - 1;
	s->n = 0;
	return 0;
}

static size_t pset_hash(const struct pset *s, const struct patch *p)
{
	return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull >> 16) & s->mask;
}

static bool pset_has(const struct pset *s, const struct patch *p)
{
	size_t i;

	for (i = pset_hash(s, p); s->slot[i]; i = (i + 1) & s->mask)
		if (s->slot[i] == p)
			return true;
	return false;
}

/* Sized by the caller for everything it adds, so this cannot fail. */
static bool pset_add(struct pset *s, const struct patch *p)
{
	size_t i;

	for (i = pset_hash(s, p); s->slot[i]; i = (i + 1) & s->mask)
		if (s->slot[i] == p)
			return false;
	s->slot[i] = p;
	s->n++;
	return true;
}

/* ---- the work of one snapshot ------------------------------------------ */

struct take {
	struct cache *c;
	struct insp_snap *s;
	const struct pg_view *gv;
	size_t ngv, gtotal;
	uint64_t now_ns;
	uint64_t scanned; /* patch slots visited by scans */
	struct vec blocks, groups, patches, edges;
	struct vec nodes; /* INSP_GRAPH: the patches shown, as pointers */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Undo bytes the patch holds (hard and NRB patches keep none, nor does
 * one whose undo is the shared zeros; packed undo holds fewer). */
static uint32_t undo_of(const struct patch *p)
{
	return (uint32_t)undo_size(p);
}

/* The group a held or group patch stands for, if any. */
static void group_of(const struct take *t, const struct patch *p, int64_t *id, uint32_t *role)
{
	size_t i;

	*id = 0;
	*role = INSP_R_NONE;
	for (i = 0; i < t->ngv; i++) {
		if (t->gv[i].head == p) {
			*id = t->gv[i].info.id;
			*role = INSP_R_HEAD;
			return;
		}
		if (t->gv[i].tail == p) {
			*id = t->gv[i].info.id;
			*role = INSP_R_TAIL;
			return;
		}
	}
}

static void fill_patch(const struct take *t, const struct patch *p, struct insp_patch *o)
{
	o->seq = p->seq;
	o->blkno = p->block ? p->block->blkno : UINT64_MAX;
	o->type = p->type == PT_BYTE ? INSP_P_BYTE : p->type == PT_BIT ? INSP_P_BIT : INSP_P_EMPTY;
	o->flags = ((p->flags & PF_HARD) ? INSP_P_HARD : 0) |
		   ((p->flags & PF_HELD) ? INSP_P_HELD : 0) |
		   ((p->flags & PF_INFLIGHT) ? INSP_P_INFLIGHT : 0) |
		   ((p->flags & PF_COMMITTED) ? INSP_P_COMMITTED : 0);
	if (p->type != PT_EMPTY && !(p->flags & PF_HARD)) {
		o->off = patch_off(p);
		o->len = patch_len(p);
	}
	o->undo_bytes = undo_of(p);
	o->npend_ext = p->npend_ext;
	o->npend_blk = patch_npend_blk(p);
	o->nafters = patch_nafters(p);
	o->kind = p->block ? p->block->kind : CBK_NONE;
	group_of(t, p, &o->group, &o->role);
}

static struct insp_patch *add_patch(struct take *t, const struct patch *p)
{
	struct insp_patch *o = vec_push(&t->patches);

	if (o)
		fill_patch(t, p, o);
	return o;
}

static int add_edge(struct take *t, const struct patch *before, const struct patch *after)
{
	struct insp_edge *e = vec_push(&t->edges);

	if (!e)
		return -ENOMEM;
	e->before = before->seq;
	e->after = after->seq;
	return 0;
}

/* Call fn for every live patch: the only way to find befores. */
static int each_live(struct take *t, int (*fn)(void *arg, const struct patch *p), void *arg)
{
	struct slab *sl;
	size_t i;
	int k, r;

	for (k = 0; k < NCELLS; k++) {
		for (sl = t->c->slabs[k]; sl; sl = sl->next) {
			t->scanned += SLAB_PATCHES;
			for (i = 0; i < SLAB_PATCHES; i++) {
				const struct patch *p = slab_patch(sl, i, cell_size(k));

				if (patch_live(p) && (r = fn(arg, p)) != 0)
					return r;
			}
		}
	}
	return 0;
}

/* ---- summary ------------------------------------------------------------ */

static void take_summary(struct take *t)
{
	struct cache *c = t->c;
	struct insp_summary *m = &t->s->sum;
	size_t i;

	m->st = c->st;
	m->st.blocks_cached = c->nblocks;
	m->st.blocks_dirty = c->ndirty;
	m->st.blocks_inflight = c->ninflight;
	m->st.blocks_ready = c->nready;
	m->st.dirty_bytes = (uint64_t)c->ndirty * c->bs;
	m->patches_pending = c->st.patches_created - c->st.patches_committed;
	m->dirty_waits = c->st_dirty_waits;
	m->st.dirty_waits = c->st_dirty_waits;
	m->max_blocks = c->opts.max_blocks;
	m->dirty_limit = c->opts.dirty_limit;
	m->block_size = c->bs;
	m->consistency = c->opts.consistency;
	m->flush_interval_ms = c->opts.flush_interval_ms;
	m->round_busy = c->round_busy;
	if (c->txn && c->txn->stats) {
		m->have_txn = 1;
		c->txn->stats(c->txn, &m->txn);
	}
	bdev_get_stats(c->dev, &m->dev);
	if (t->now_ns > c->born_ns)
		m->age_ms = (t->now_ns - c->born_ns) / 1000000;
	if (c->dirty_head && t->now_ns > c->dirty_head->dirty_ns)
		m->oldest_dirty_ms = (t->now_ns - c->dirty_head->dirty_ns) / 1000000;
	m->groups_known = t->gtotal;
	m->groups_counted = t->ngv;
	for (i = 0; i < t->ngv; i++) {
		const struct pg_info *in = &t->gv[i].info;

		if (in->state & PG_ST_CLOSED)
			m->groups_closed++;
		else
			m->groups_open++;
		if (in->engaged)
			m->groups_engaged++;
		if (in->state & PG_ST_SEALED)
			m->groups_sealed++;
	}
}

/* ---- blocks and the graph ----------------------------------------------- */

static int describe_block(struct take *t, const struct cblock *b, bool graph, size_t *budget)
{
	struct insp_block *o = vec_push(&t->blocks);
	const struct patch *p;

	if (!o)
		return -ENOMEM;
	o->blkno = b->blkno;
	o->age_ms = t->now_ns > b->dirty_ns ? (t->now_ns - b->dirty_ns) / 1000000 : 0;
	o->npatches = b->npatches;
	o->nready = b->nroots;
	o->flags = ((b->flags & BF_READY) ? INSP_B_READY : 0) |
		   ((b->flags & BF_INFLIGHT) ? INSP_B_INFLIGHT : 0);
	/* Walking a block's patches is the only unbounded part of a block:
	 * share one budget among all blocks. */
	for (p = b->phead; p; p = p->bnext) {
		if (*budget == 0) {
			o->flags |= INSP_B_PARTIAL;
			t->s->flags |= INSP_S_TRUNCATED;
			break;
		}
		(*budget)--;
		if (p->flags & PF_COMMITTED)
			continue;
		if (p->flags & PF_HARD)
			o->nhard++;
		o->undo_bytes += undo_of(p);
		if (graph) {
			const struct patch **np = vec_push(&t->nodes);

			if (!np || !add_patch(t, p))
				return -ENOMEM;
			*np = p;
		}
	}
	return 0;
}

static int take_blocks(struct take *t, bool graph)
{
	size_t budget = (size_t)t->s->limit * 64, n = 0;
	const struct cblock *b;
	int r;

	/* In a graph the limit is on nodes, some already taken by groups. */
	if (graph)
		budget = t->s->limit > t->nodes.n ? t->s->limit - t->nodes.n : 0;
	for (b = t->c->dirty_head; b; b = b->dnext) {
		if (n == t->s->limit || (graph && budget == 0)) {
			t->s->flags |= INSP_S_TRUNCATED;
			break;
		}
		r = describe_block(t, b, graph, &budget);
		if (r)
			return r;
		n++;
	}
	return 0;
}

static int take_groups(struct take *t)
{
	size_t i;

	for (i = 0; i < t->ngv; i++) {
		const struct pg_view *v = &t->gv[i];
		struct insp_group *o = vec_push(&t->groups);

		if (!o)
			return -ENOMEM;
		o->id = v->info.id;
		o->owner = v->info.owner;
		o->state = v->info.state;
		o->engaged = v->info.engaged;
		o->nbefores = v->info.nbefores;
		o->nafters = v->info.nafters;
		o->nchanges = v->info.nchanges;
		if (v->head) {
			o->head_seq = v->head->seq;
			o->head_held = !!(v->head->flags & PF_HELD) && patch_live(v->head);
		}
		if (v->tail) {
			o->tail_seq = v->tail->seq;
			o->tail_held = !!(v->tail->flags & PF_HELD) && patch_live(v->tail);
			/* The tail depends on every change of the group that
			 * is not yet durable. */
			if (patch_live(v->tail))
				o->pending = v->tail->npend_ext + patch_npend_blk(v->tail);
		}
	}
	if (t->gtotal > t->ngv)
		t->s->flags |= INSP_S_TRUNCATED;
	return 0;
}

/* The graph: the patches of the oldest dirty blocks (limit patches in
 * all), the groups' heads and tails, and every edge among them. */
static int take_graph(struct take *t)
{
	const struct patch *const *nodes;
	struct pset set;
	const struct patch *p;
	size_t i;
	uint32_t k;
	int r;

	r = take_groups(t);
	if (r)
		return r;
	/* The groups' live heads and tails first (at most half the limit:
	 * they are what held patches are named after), then the patches of
	 * the oldest dirty blocks. */
	for (i = 0; i < t->ngv; i++) {
		const struct patch *g[2] = {t->gv[i].head, t->gv[i].tail};

		for (k = 0; k < 2; k++) {
			const struct patch **np;

			if (!g[k] || !patch_live(g[k]))
				continue;
			if (t->nodes.n >= t->s->limit / 2) {
				t->s->flags |= INSP_S_TRUNCATED;
				break;
			}
			np = vec_push(&t->nodes);
			if (!np || !add_patch(t, g[k]))
				return -ENOMEM;
			*np = g[k];
		}
	}
	r = take_blocks(t, true);
	if (r)
		return r;
	r = pset_init(&set, t->s->limit);
	if (r)
		return r;
	nodes = t->nodes.v;
	for (i = 0; i < t->nodes.n; i++)
		pset_add(&set, nodes[i]);
	/* The empty patches that link them (an ordering set a rename waits
	 * for, a set fsync waits for), while the limit leaves room: an
	 * edge through one would be missing from the picture otherwise. */
	for (i = 0; i < t->nodes.n && !(t->s->flags & INSP_S_TRUNCATED); i++) {
		p = ((const struct patch *const *)t->nodes.v)[i];
		for (k = 0; k < patch_nafters(p); k++) {
			const struct patch *a = patch_after(p, k), **np;

			if (a->type != PT_EMPTY || !patch_live(a) || pset_has(&set, a))
				continue;
			if (t->nodes.n >= t->s->limit) {
				t->s->flags |= INSP_S_TRUNCATED;
				break;
			}
			np = vec_push(&t->nodes);
			if (!np || !add_patch(t, a)) {
				r = -ENOMEM;
				goto out;
			}
			*np = a;
			pset_add(&set, a);
		}
	}
	/* Only edges between nodes: a befores outside the picture would
	 * need a scan of every patch. */
	for (i = 0; i <= set.mask; i++) {
		p = set.slot[i];
		if (!p)
			continue;
		for (k = 0; k < patch_nafters(p); k++) {
			if (!pset_has(&set, patch_after(p, k)))
				continue;
			r = add_edge(t, p, patch_after(p, k));
			if (r)
				goto out;
			if (t->edges.n >= (size_t)t->s->limit * 8) {
				t->s->flags |= INSP_S_TRUNCATED;
				goto out;
			}
		}
	}
out:
	free(set.slot);
	return r;
}

/* ---- befores: one scan of the live patches ------------------------------ */

struct scan {
	struct take *t;
	struct pset *targets;	    /* find the befores of these */
	const struct patch **found; /* (before, after) pairs */
	size_t nfound, cap;
	bool full;
};

static int scan_one(void *arg, const struct patch *q)
{
	struct scan *sc = arg;
	uint32_t i;

	for (i = 0; i < patch_nafters(q); i++) {
		if (!pset_has(sc->targets, patch_after(q, i)))
			continue;
		if (sc->nfound == sc->cap) {
			sc->full = true;
			return 1;
		}
		sc->found[2 * sc->nfound] = q;
		sc->found[2 * sc->nfound + 1] = patch_after(q, i);
		sc->nfound++;
	}
	return 0;
}

static int find_befores(struct take *t, struct pset *targets, size_t cap, struct scan *sc)
{
	memset(sc, 0, sizeof(*sc));
	sc->t = t;
	sc->targets = targets;
	sc->cap = cap;
	sc->found = calloc(2 * cap, sizeof(*sc->found));
	if (!sc->found)
		return -ENOMEM;
	each_live(t, scan_one, sc);
	return 0;
}

/* INSP_PATCHES: the block's patches (up to limit), and for each what it
 * waits for: the befores are added as patches of their own and as
 * edges. */
static int take_patches(struct take *t)
{
	struct cblock *b = cache_find_locked(t->c, t->s->block);
	struct pset targets, extra;
	const struct patch *p;
	struct insp_patch *o;
	struct scan sc;
	size_t i, n = 0;
	int r;

	if (!b)
		return 0;
	r = pset_init(&targets, t->s->limit);
	if (r)
		return r;
	for (p = b->phead; p; p = p->bnext) {
		if (p->flags & PF_COMMITTED)
			continue;
		if (n == t->s->limit) {
			t->s->flags |= INSP_S_TRUNCATED;
			break;
		}
		o = add_patch(t, p);
		if (!o) {
			r = -ENOMEM;
			goto out;
		}
		o->flags |= INSP_P_TARGET;
		pset_add(&targets, p);
		n++;
	}
	r = find_befores(t, &targets, (size_t)t->s->limit * 8, &sc);
	if (r)
		goto out;
	if (sc.full)
		t->s->flags |= INSP_S_TRUNCATED;
	r = pset_init(&extra, sc.nfound);
	if (r)
		goto out_sc;
	for (i = 0; i < sc.nfound; i++) {
		const struct patch *bef = sc.found[2 * i], *aft = sc.found[2 * i + 1];

		r = add_edge(t, bef, aft);
		if (r)
			break;
		if (!pset_has(&targets, bef) && pset_add(&extra, bef) && !add_patch(t, bef)) {
			r = -ENOMEM;
			break;
		}
	}
	free(extra.slot);
out_sc:
	free(sc.found);
out:
	free(targets.slot);
	return r;
}

/* How bad a before is, for following the chain to its cause: a held
 * patch is the cause itself; a patch that waits for something leads
 * further; a writable one only waits for the next round. */
static int badness(const struct patch *p)
{
	if (p->flags & PF_HELD)
		return 3;
	if (!is_root(p))
		return 2;
	return 1;
}

/* INSP_WHY: start from the block's oldest patch that is not writable and
 * follow, at each step, its worst unwritten before. */
static int take_why(struct take *t)
{
	struct cblock *b = cache_find_locked(t->c, t->s->block);
	const struct patch *p, *next;
	struct pset one;
	struct scan sc;
	size_t i, steps;
	int r = 0;

	t->s->why_end = INSP_WHY_CLEAN;
	if (b && b->kind == CBK_XATTR)
		t->s->flags |= INSP_S_XATTR;
	if (!b || b->npatches == 0)
		return 0;
	if (b->flags & BF_INFLIGHT) {
		t->s->why_end = INSP_WHY_INFLIGHT;
		return 0;
	}
	for (p = b->phead; p; p = p->bnext)
		if (!(p->flags & PF_COMMITTED) && !is_root(p))
			break;
	if (!p) {
		t->s->why_end = INSP_WHY_READY;
		return 0;
	}
	for (steps = 0;; steps++) {
		if (!add_patch(t, p))
			return -ENOMEM;
		if (steps > 0 && (p->flags & PF_HELD)) {
			t->s->why_end = INSP_WHY_HELD;
			break;
		}
		if (is_root(p)) {
			t->s->why_end = (p->flags & PF_HELD) ? INSP_WHY_HELD : INSP_WHY_WRITE;
			break;
		}
		if (steps + 1 >= t->s->limit || t->scanned >= SCAN_BUDGET) {
			t->s->why_end = INSP_WHY_DEPTH;
			t->s->flags |= INSP_S_TRUNCATED;
			break;
		}
		r = pset_init(&one, 1);
		if (r)
			return r;
		pset_add(&one, p);
		r = find_befores(t, &one, WHY_SLOTS, &sc);
		free(one.slot);
		if (r)
			return r;
		next = NULL;
		for (i = 0; i < sc.nfound; i++) {
			const struct patch *q = sc.found[2 * i];

			if (!next || badness(q) > badness(next) ||
			    (badness(q) == badness(next) && q->seq < next->seq))
				next = q;
		}
		free(sc.found);
		if (!next) {
			t->s->why_end = INSP_WHY_LOST;
			break;
		}
		r = add_edge(t, next, p);
		if (r)
			return r;
		p = next;
	}
	return 0;
}

/* ---- taking it ---------------------------------------------------------- */

static int take_locked(struct take *t)
{
	int r = 0;

	t->now_ns = mono_ns();
	take_summary(t);
	/* A block past the end of the device is not "clean": there is no
	 * such block, and saying so is the only honest answer. */
	if ((t->s->view == INSP_PATCHES || t->s->view == INSP_WHY) &&
	    t->s->block >= cache_bdev(t->c)->nblocks)
		return -ENXIO;
	switch (t->s->view) {
	case INSP_BLOCKS:
		r = take_blocks(t, false);
		break;
	case INSP_GROUPS:
		r = take_groups(t);
		break;
	case INSP_PATCHES:
		r = take_patches(t);
		break;
	case INSP_WHY:
		r = take_why(t);
		break;
	case INSP_GRAPH:
		r = take_graph(t);
		break;
	default:
		break;
	}
	return r;
}

static int with_cache(struct take *t)
{
	bool taken;
	int r;

	cache_lock(t->c, &taken);
	r = take_locked(t);
	cache_unlock(t->c, taken);
	return r;
}

static int with_groups(void *arg, const struct pg_view *v, size_t n, size_t total)
{
	struct take *t = arg;

	t->gv = v;
	t->ngv = n;
	t->gtotal = total;
	t->s->sum.have_groups = 1;
	return with_cache(t);
}

void inspect_free(struct insp_snap *s)
{
	if (!s)
		return;
	free(s->blocks);
	free(s->groups);
	free(s->patches);
	free(s->edges);
	free(s);
}

int inspect_take(struct cache *c, struct pgeng *e, const struct insp_query *q,
		 struct insp_snap **out)
{
	struct take t;
	struct insp_snap *s;
	size_t gmax;
	int r;

	if (!c || !q || !out || q->view >= INSP_VIEW_MAX || q->limit > INSP_LIMIT_MAX)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	memset(&t, 0, sizeof(t));
	t.c = c;
	t.s = s;
	t.blocks.size = sizeof(struct insp_block);
	t.groups.size = sizeof(struct insp_group);
	t.patches.size = sizeof(struct insp_patch);
	t.edges.size = sizeof(struct insp_edge);
	t.nodes.size = sizeof(const struct patch *);
	s->view = q->view;
	s->block = q->block;
	s->limit = q->limit ? q->limit : INSP_LIMIT_DEFAULT;
	/* Group counts in the summary cover every group the limit lets us
	 * see; the group list itself is the limit. */
	gmax = q->view == INSP_GROUPS || q->view == INSP_GRAPH ? s->limit : INSP_LIMIT_MAX;
	if (e)
		r = pgeng_view(e, gmax, with_groups, &t);
	else
		r = with_cache(&t);
	s->blocks = t.blocks.v;
	s->nblocks = t.blocks.n;
	s->groups = t.groups.v;
	s->ngroups = t.groups.n;
	s->patches = t.patches.v;
	s->npatches = t.patches.n;
	s->edges = t.edges.v;
	s->nedges = t.edges.n;
	free(t.nodes.v);
	if (r) {
		inspect_free(s);
		return r;
	}
	*out = s;
	return 0;
}
