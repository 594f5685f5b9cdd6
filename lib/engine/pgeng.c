/* Patchgroups over the patch engine: see pgeng.h for the model and the rules. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "cache_int.h"
#include "engine/pgeng.h"
#include "util/grow.h"

struct pg_group {
	int64_t id;
	uid_t owner;
	bool closed, sealed, tail_held;
	atomic_bool released; /* set by the scope hook under the cache lock */
	atomic_bool head_held;
	unsigned engaged, active;
	struct patch *head;
	/* Read by the created() hook under the cache lock without the engine
	 * lock; pgeng_sync() replaces it (see swap_tail()). */
	_Atomic(struct patch *) tail;
	/* The heads and tails of the befores, for pgeng_sync() of a group
	 * with no changes (whose own head may still be held). */
	struct patch **bp;
	size_t nbp, capbp;
	uint32_t nbefores, nafters;
	atomic_uint_least64_t nchanges;
	struct pg_group *hnext;	      /* hash chain */
	struct pg_group *prev, *next; /* every group */
	struct pg_group *cnext;	      /* closed, waiting to be durable */
};

struct pg_chain {
	unsigned refs; /* atomic: scopes and operations in flight */
	_Atomic(struct patch *) tail;
	struct patch *order;
};

struct uidcount {
	uid_t uid;
	size_t n;
};

struct pgeng {
	struct cache *c;
	pthread_mutex_t lock;
	struct uidcount *uc; /* known groups per owner (not root) */
	size_t nuc, capuc, uid_limit;
	int64_t first_id, next_id;
	struct pg_group **ht;
	size_t htsize, ngroups;
	struct pg_group *all;
	/* Closed groups waiting to be durable, oldest first. */
	struct pg_group *closing, *closing_tail;
	size_t nclosing;
	atomic_uint_least64_t lost; /* edges the engine refused, ever */
	int (*sync_fn)(void *arg);  /* pgeng_set_sync_hook() */
	void *sync_arg;
};

int pgeng_create(struct cache *c, struct pgeng **out)
{
	struct pgeng *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->htsize = 256;
	e->ht = calloc(e->htsize, sizeof(*e->ht));
	if (!e->ht) {
		free(e);
		return -ENOMEM;
	}
	e->c = c;
	e->first_id = e->next_id = 1;
	e->uid_limit = PG_UID_GROUPS;
	pthread_mutex_init(&e->lock, NULL);
	*out = e;
	return 0;
}

void pgeng_set_first_id(struct pgeng *e, int64_t first)
{
	pthread_mutex_lock(&e->lock);
	if (first > 0 && e->next_id == e->first_id)
		e->first_id = e->next_id = first;
	pthread_mutex_unlock(&e->lock);
}

static size_t hslot(const struct pgeng *e, int64_t id)
{
	return (size_t)((uint64_t)id * 0x9e3779b97f4a7c15ULL >> 20) & (e->htsize - 1);
}

static struct pg_group *lookup(struct pgeng *e, int64_t id)
{
	struct pg_group *g;

	for (g = e->ht[hslot(e, id)]; g; g = g->hnext)
		if (g->id == id)
			return g;
	return NULL;
}

static void ht_grow(struct pgeng *e)
{
	size_t n = e->htsize * 2, i;
	struct pg_group **ht = calloc(n, sizeof(*ht)), *g, *nx;
	struct pg_group **old = e->ht;
	size_t on = e->htsize;

	if (!ht)
		return; /* longer chains, still correct */
	e->ht = ht;
	e->htsize = n;
	for (i = 0; i < on; i++) {
		for (g = old[i]; g; g = nx) {
			nx = g->hnext;
			g->hnext = ht[hslot(e, g->id)];
			ht[hslot(e, g->id)] = g;
		}
	}
	free(old);
}

/* 0 and *out for a known group, 1 for an id that was handed out and whose
 * group has been forgotten (retired), -errno otherwise. */
static int find(struct pgeng *e, int64_t id, struct pg_group **out)
{
	if (id <= 0)
		return -EINVAL;
	*out = lookup(e, id);
	if (*out)
		return 0;
	return id < e->next_id ? 1 : -ENOENT;
}

static int may_touch(const struct pg_group *g, uid_t uid)
{
	return uid == 0 || uid == g->owner ? 0 : -EPERM;
}

/* The opening of close and engage: a group that exists, is not closed yet
 * and that uid may change.  A retired or closed id is gone for these. */
static int find_open(struct pgeng *e, int64_t id, uid_t uid, struct pg_group **out)
{
	int r = find(e, id, out);

	if (r == 1 || (r == 0 && (*out)->closed))
		return -ENOENT;
	if (r < 0)
		return r;
	return may_touch(*out, uid);
}

/* A group's tail is held so that it can keep gaining dependencies.  Once
 * nothing can add a change any more (closed or sealed, engaged by nobody,
 * nothing in flight) it can go. */
static void maybe_let_go(struct pgeng *e, struct pg_group *g)
{
	if (g->tail_held && (g->closed || g->sealed) && !g->engaged && !g->active) {
		g->tail_held = false;
		patch_unhold(e->c, atomic_load(&g->tail));
	}
}

static void unhold_head(struct pgeng *e, struct pg_group *g)
{
	if (atomic_exchange(&g->head_held, false))
		patch_unhold(e->c, g->head);
}

/* Everything the group stands for is on disk: its changes (through its
 * tail) and its befores (through its head, or the befores themselves when
 * the head was never needed). */
static bool durable(const struct pg_group *g)
{
	size_t i;

	if (g->tail_held || !patch_committed(atomic_load(&g->tail)))
		return false;
	if (!atomic_load(&g->head_held))
		return patch_committed(g->head);
	for (i = 0; i < g->nbp; i++)
		if (!patch_committed(g->bp[i]))
			return false;
	return true;
}

/* The count of uid's known groups, made if need be (NULL: no memory). */
static struct uidcount *uid_slot(struct pgeng *e, uid_t uid, bool make)
{
	size_t i;

	for (i = 0; i < e->nuc; i++)
		if (e->uc[i].uid == uid)
			return &e->uc[i];
	if (!make)
		return NULL;
	if (GROW(&e->uc, &e->capuc, e->nuc + 1, 8))
		return NULL;
	e->uc[e->nuc].uid = uid;
	e->uc[e->nuc].n = 0;
	return &e->uc[e->nuc++];
}

void pgeng_set_sync_hook(struct pgeng *e, int (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&e->lock);
	e->sync_fn = fn;
	e->sync_arg = arg;
	pthread_mutex_unlock(&e->lock);
}

void pgeng_set_uid_limit(struct pgeng *e, size_t limit)
{
	pthread_mutex_lock(&e->lock);
	e->uid_limit = limit ? limit : PG_UID_GROUPS;
	pthread_mutex_unlock(&e->lock);
}

static void free_group(struct pgeng *e, struct pg_group *g)
{
	size_t i;

	unhold_head(e, g);
	if (g->tail_held)
		patch_unhold(e->c, atomic_load(&g->tail));
	patch_release(e->c, g->head);
	patch_release(e->c, atomic_load(&g->tail));
	for (i = 0; i < g->nbp; i++)
		patch_release(e->c, g->bp[i]);
	free(g->bp);
	free(g);
}

static void forget(struct pgeng *e, struct pg_group *g)
{
	struct pg_group **pp = &e->ht[hslot(e, g->id)];

	while (*pp != g)
		pp = &(*pp)->hnext;
	*pp = g->hnext;
	if (g->prev)
		g->prev->next = g->next;
	else
		e->all = g->next;
	if (g->next)
		g->next->prev = g->prev;
	e->ngroups--;
	if (g->owner) {
		struct uidcount *u = uid_slot(e, g->owner, false);

		if (u && u->n)
			u->n--;
	}
	free_group(e, g);
}

#define SWEEP_BATCH 64

static bool forgettable(const struct pg_group *g)
{
	return !g->engaged && !g->active && durable(g);
}

/* Put closed group g at the back of the queue the sweep looks at. */
static void closing_append(struct pgeng *e, struct pg_group *g)
{
	g->cnext = NULL;
	if (e->closing_tail)
		e->closing_tail->cnext = g;
	else
		e->closing = g;
	e->closing_tail = g;
	e->nclosing++;
}

/* Forget closed groups that are durable and unused: their ids stay valid as
 * no-op befores (find() returns 1 for them).  Forgets from the front of the
 * queue up to a bounded batch, and stops at the first group that must still
 * wait, which it sends to the back: every call costs O(1) however many
 * groups are waiting, and every group is seen.  Stopping there matters when
 * many groups wait for the same round (a program making changes faster
 * than the disk takes them): each call then looks at one group, not at a
 * whole batch of them that cannot have changed.  Groups mostly become
 * durable in the order they closed, and a group that waits for longer (one
 * still engaged) moves to the back each time it is seen. */
static void sweep(struct pgeng *e)
{
	struct pg_group *g;
	size_t n = 0;

	while (e->closing && n < SWEEP_BATCH) {
		g = e->closing;
		e->closing = g->cnext;
		if (!e->closing)
			e->closing_tail = NULL;
		g->cnext = NULL;
		e->nclosing--;
		if (forgettable(g)) {
			forget(e, g);
			n++;
			continue;
		}
		closing_append(e, g);
		break;
	}
}

int pgeng_group_create(struct pgeng *e, uid_t owner, int64_t *id)
{
	struct pg_group *g = calloc(1, sizeof(*g));
	struct patch *tail = NULL;
	struct uidcount *u = NULL;
	size_t s;
	int r;

	if (!g)
		return -ENOMEM;
	pthread_mutex_lock(&e->lock);
	sweep(e);
	if (owner) {
		u = uid_slot(e, owner, true);
		r = !u ? -ENOMEM : u->n >= e->uid_limit ? -EDQUOT : 0;
		if (r < 0)
			goto fail;
	}
	r = patch_create_empty_held(e->c, NULL, 0, &g->head);
	if (r < 0)
		goto fail;
	r = patch_create_empty_held(e->c, NULL, 0, &tail);
	if (r < 0) {
		patch_unhold(e->c, g->head);
		patch_release(e->c, g->head);
		goto fail;
	}
	atomic_store(&g->tail, tail);
	atomic_store(&g->head_held, true);
	g->tail_held = true;
	g->owner = owner;
	g->id = e->next_id++;
	s = hslot(e, g->id);
	g->hnext = e->ht[s];
	e->ht[s] = g;
	g->next = e->all;
	if (e->all)
		e->all->prev = g;
	e->all = g;
	if (++e->ngroups > e->htsize)
		ht_grow(e);
	if (u)
		u->n++;
	*id = g->id;
	pthread_mutex_unlock(&e->lock);
	return 0;
fail:
	pthread_mutex_unlock(&e->lock);
	free(g);
	return r;
}

/* Whether p can take one more after without allocating: then an edge
 * from it cannot fail.  Called under the cache lock. */
static bool has_room(const struct patch *p)
{
	return !p || (p->flags & PF_COMMITTED) || after_room(p);
}

int pgeng_depend(struct pgeng *e, int64_t before, int64_t after, uid_t uid)
{
	struct pg_group *gb, *ga;
	struct patch *btail, *both, *deps[2];
	bool ctaken;
	size_t i;
	int r, rb;

	if (before <= 0 || after <= 0)
		return -EINVAL;
	if (before == after)
		return -ELOOP;
	pthread_mutex_lock(&e->lock);
	sweep(e);
	r = find(e, after, &ga);
	if (r == 1)
		r = -ENOENT;
	if (r < 0)
		goto out;
	rb = find(e, before, &gb);
	if (rb < 0) {
		r = rb;
		goto out;
	}
	r = may_touch(ga, uid);
	if (r < 0)
		goto out;
	if (rb == 1) {
		/* a durable, forgotten before: nothing to wait for */
		r = ga->closed ? -ENOENT : 0;
		goto out;
	}
	r = may_touch(gb, uid);
	if (r < 0)
		goto out;
	/* The same pair named again changes nothing and is no error, whatever
	 * has become of the two groups since (pgdepend(1)).  An edge keeps
	 * the before's head in bp, which, unlike its tail (pgeng_sync), is
	 * the same patch all the group's life. */
	for (i = 0; i < ga->nbp; i++)
		if (ga->bp[i] == gb->head)
			goto out;
	if (ga->closed) {
		r = -ENOENT;
		goto out;
	}
	if (ga->sealed) {
		r = -EROFS;
		goto out;
	}
	if (atomic_load(&ga->released)) {
		r = -EALREADY;
		goto out;
	}
	if (gb->engaged || gb->active) {
		r = -EBUSY;
		goto out;
	}
	btail = atomic_load(&gb->tail);
	if (GROW(&ga->bp, &ga->capbp, ga->nbp + 2, 4)) {
		r = -ENOMEM;
		goto out;
	}
	/* A refused call must change nothing (rule 4), so everything that can
	 * fail comes before the first edge.  The cache lock makes "after has
	 * no change yet" stable: the scope hook sets released under it,
	 * before any patch depends on the after's head, so the head stays an
	 * empty, uncommitted patch with no dependents and only a before
	 * without room for one more after can refuse an edge (-ENOMEM).  The
	 * edge to a before that has room goes second; if neither has room,
	 * both befores go into one empty patch, made atomically, which the
	 * head then takes as its one new before. */
	cache_lock(e->c, &ctaken);
	if (atomic_load(&ga->released)) {
		cache_unlock(e->c, ctaken);
		r = -EALREADY;
		goto out;
	}
	if (has_room(gb->head) || has_room(btail)) {
		struct patch *first = has_room(gb->head) ? btail : gb->head;
		struct patch *second = first == btail ? gb->head : btail;

		r = patch_add_depend(e->c, ga->head, first);
		if (r == 0)
			r = patch_add_depend(e->c, ga->head, second); /* has room */
	} else {
		deps[0] = btail;
		deps[1] = gb->head;
		r = patch_create_empty(e->c, deps, 2, &both);
		if (r == 0) {
			r = patch_add_depend(e->c, ga->head, both); /* inline */
			patch_release(e->c, both);
		}
	}
	cache_unlock(e->c, ctaken);
	if (r == -EBUSY)
		r = -EALREADY;
	if (r < 0)
		goto out;
	patch_retain(btail);
	patch_retain(gb->head);
	ga->bp[ga->nbp++] = btail;
	ga->bp[ga->nbp++] = gb->head;
	ga->nbefores++;
	gb->nafters++;
	gb->sealed = true;
	unhold_head(e, gb);
	maybe_let_go(e, gb);
out:
	pthread_mutex_unlock(&e->lock);
	return r;
}

int pgeng_close(struct pgeng *e, int64_t id, uid_t uid)
{
	struct pg_group *g;
	int r;

	pthread_mutex_lock(&e->lock);
	r = find_open(e, id, uid, &g);
	if (r < 0)
		goto out;
	g->closed = true;
	maybe_let_go(e, g);
	/* Already durable (nothing in it, or all of it written): gone now,
	 * not after the groups queued before it. */
	if (forgettable(g)) {
		forget(e, g);
	} else {
		closing_append(e, g);
	}
	sweep(e);
out:
	pthread_mutex_unlock(&e->lock);
	return r;
}

/* Publish a new, empty, held tail in *slot and hand back the old one (its
 * reference passes to the caller), so that the old one can stop gaining
 * changes and commit while changes keep being collected.  The new tail is
 * published before the caller makes anything depend on the old one: a
 * created() hook that still saw the old tail ran entirely under the cache
 * lock before the caller's patch_add_depend()/patch_create_empty() took it,
 * so the old tail never gains a dependency after it has a dependent. */
static int swap_tail(struct pgeng *e, _Atomic(struct patch *) *slot, struct patch **old)
{
	struct patch *t2, *t1;
	int r;

	r = patch_create_empty_held(e->c, NULL, 0, &t2);
	if (r < 0)
		return r;
	t1 = atomic_exchange(slot, t2);
	*old = t1;
	return 0;
}

int pgeng_sync(struct pgeng *e, int64_t id, uid_t uid)
{
	struct pg_group *g;
	struct patch **wait = NULL, *t1;
	size_t nw = 0, i;
	int r, r2;

	pthread_mutex_lock(&e->lock);
	sweep(e);
	r = find(e, id, &g);
	if (r == 1) {
		r = 0;
		goto out;
	}
	if (r < 0)
		goto out;
	r = may_touch(g, uid);
	if (r < 0)
		goto out;
	wait = calloc(g->nbp + 1, sizeof(*wait));
	if (!wait) {
		r = -ENOMEM;
		goto out;
	}
	if (g->tail_held) {
		r = swap_tail(e, &g->tail, &t1);
		if (r < 0)
			goto out;
		/* Cannot fail: the new tail is empty, held and has no
		 * dependents. */
		patch_add_depend(e->c, atomic_load(&g->tail), t1);
		patch_unhold(e->c, t1);
		wait[nw++] = t1;
	} else {
		wait[nw] = atomic_load(&g->tail);
		patch_retain(wait[nw++]);
	}
	for (i = 0; i < g->nbp; i++) {
		patch_retain(g->bp[i]);
		wait[nw++] = g->bp[i];
	}
out:
	pthread_mutex_unlock(&e->lock);
	if (r == 0 && nw && e->sync_fn) {
		/* a journal: everything made so far is durable with one commit */
		r = e->sync_fn(e->sync_arg);
		for (i = 0; i < nw; i++)
			patch_release(e->c, wait[i]);
		free(wait);
		return r;
	}
	for (i = 0; i < nw; i++) {
		if (r == 0 && !patch_committed(wait[i])) {
			r2 = cache_sync_patch(e->c, wait[i]);
			if (r2 < 0)
				r = r2;
		}
		patch_release(e->c, wait[i]);
	}
	free(wait);
	return r;
}

static void fill_info(const struct pg_group *g, struct pg_info *in)
{
	memset(in, 0, sizeof(*in));
	in->id = g->id;
	in->owner = g->owner;
	in->state = (g->closed ? PG_ST_CLOSED : 0) | (g->sealed ? PG_ST_SEALED : 0) |
		    (atomic_load(&g->released) ? PG_ST_RELEASED : 0);
	in->engaged = g->engaged;
	in->nbefores = g->nbefores;
	in->nafters = g->nafters;
	in->nchanges = atomic_load(&g->nchanges);
}

int pgeng_info(struct pgeng *e, int64_t id, struct pg_info *out)
{
	struct pg_group *g;
	struct pg_info in;
	int r;

	memset(&in, 0, sizeof(in));
	in.id = id;
	pthread_mutex_lock(&e->lock);
	sweep(e);
	r = find(e, id, &g);
	if (r == 1) {
		in.state = PG_ST_RETIRED | PG_ST_CLOSED;
		r = 0;
	} else if (r == 0) {
		fill_info(g, &in);
	}
	pthread_mutex_unlock(&e->lock);
	if (r == 0)
		*out = in;
	return r;
}

int pgeng_info_next(struct pgeng *e, int64_t id, struct pg_info *out)
{
	struct pg_group *g, *best = NULL;
	int r = -ENOENT;

	pthread_mutex_lock(&e->lock);
	sweep(e);
	for (g = e->all; g; g = g->next)
		if (g->id >= id && (!best || g->id < best->id))
			best = g;
	if (best) {
		fill_info(best, out);
		r = 0;
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

void pgeng_summary(struct pgeng *e, struct pg_summary *out)
{
	struct pg_group *g;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&e->lock);
	sweep(e);
	for (g = e->all; g; g = g->next) {
		out->groups++;
		out->closed += g->closed;
		out->sealed += g->sealed;
		out->engaged += g->engaged > 0;
	}
	out->last_id = e->next_id > e->first_id ? e->next_id - 1 : 0;
	out->lost = atomic_load(&e->lost);
	pthread_mutex_unlock(&e->lock);
}

int pgeng_view(struct pgeng *e, size_t max,
	       int (*fn)(void *arg, const struct pg_view *v, size_t n, size_t total), void *arg)
{
	struct pg_view *v = NULL;
	struct pg_group *g;
	size_t n = 0;
	int r;

	pthread_mutex_lock(&e->lock);
	if (max > e->ngroups)
		max = e->ngroups;
	if (max) {
		v = calloc(max, sizeof(*v));
		if (!v) {
			r = -ENOMEM;
			goto out;
		}
	}
	/* e->all has the newest group first. */
	for (g = e->all; g && n < max; g = g->next, n++) {
		fill_info(g, &v[n].info);
		v[n].head = g->head;
		v[n].tail = atomic_load(&g->tail);
	}
	r = fn(arg, v, n, e->ngroups);
out:
	pthread_mutex_unlock(&e->lock);
	free(v);
	return r;
}

int pgeng_engage(struct pgeng *e, int64_t id, uid_t uid, struct pg_group **out)
{
	struct pg_group *g;
	int r;

	pthread_mutex_lock(&e->lock);
	r = find_open(e, id, uid, &g);
	if (r < 0)
		goto out;
	if (g->sealed) {
		r = -EROFS;
		goto out;
	}
	g->engaged++;
	*out = g;
out:
	pthread_mutex_unlock(&e->lock);
	return r;
}

void pgeng_engage_again(struct pgeng *e, struct pg_group *g)
{
	pthread_mutex_lock(&e->lock);
	g->engaged++;
	pthread_mutex_unlock(&e->lock);
}

void pgeng_disengage(struct pgeng *e, struct pg_group *g)
{
	pthread_mutex_lock(&e->lock);
	g->engaged--;
	maybe_let_go(e, g);
	if (g->closed)
		sweep(e);
	pthread_mutex_unlock(&e->lock);
}

int64_t pgeng_group_id(const struct pg_group *g)
{
	return g->id;
}

int pgeng_chain_create(struct pgeng *e, struct pg_chain **out)
{
	struct pg_chain *ch = calloc(1, sizeof(*ch));
	struct patch *t;
	int r;

	if (!ch)
		return -ENOMEM;
	r = patch_create_empty_held(e->c, NULL, 0, &t);
	if (r < 0) {
		free(ch);
		return r;
	}
	atomic_store(&ch->tail, t);
	ch->refs = 1;
	*out = ch;
	return 0;
}

void pgeng_chain_retain(struct pg_chain *ch)
{
	/* Callers hold a reference already, so the count cannot be zero. */
	__atomic_add_fetch(&ch->refs, 1, __ATOMIC_SEQ_CST);
}

void pgeng_chain_release(struct pgeng *e, struct pg_chain *ch)
{
	struct patch *t;

	if (!ch || __atomic_sub_fetch(&ch->refs, 1, __ATOMIC_SEQ_CST))
		return;
	t = atomic_load(&ch->tail);
	patch_unhold(e->c, t);
	patch_release(e->c, t);
	patch_release(e->c, ch->order);
	free(ch);
}

int pgeng_chain_order(struct pgeng *e, struct pg_chain *ch)
{
	struct patch *t1, *o, *deps[2];
	int r;

	pthread_mutex_lock(&e->lock);
	r = swap_tail(e, &ch->tail, &t1);
	if (r < 0)
		goto out;
	deps[0] = t1;
	deps[1] = ch->order;
	r = patch_create_empty(e->c, deps, ch->order ? 2 : 1, &o);
	patch_unhold(e->c, t1);
	patch_release(e->c, t1);
	if (r < 0)
		goto out;
	patch_release(e->c, ch->order);
	ch->order = o;
out:
	pthread_mutex_unlock(&e->lock);
	return r;
}

static size_t op_befores(struct patch_scope *s, struct patch *const **deps)
{
	struct pg_op *op = (struct pg_op *)s;
	size_t i;

	/* From here on a patch may depend on each head: rule 3, the group is
	 * released and can gain no more befores. */
	for (i = 0; i < op->ng; i++)
		atomic_store(&op->g[i]->released, true);
	*deps = op->deps;
	return op->ndeps;
}

static void op_created(struct patch_scope *s, struct patch *p)
{
	struct pg_op *op = (struct pg_op *)s;
	struct cache *c = op->e->c;
	size_t i;

	for (i = 0; i < op->ng; i++) {
		if (patch_add_depend(c, atomic_load(&op->g[i]->tail), p) < 0)
			op->lost++;
		atomic_fetch_add(&op->g[i]->nchanges, 1);
	}
	if (op->chain && patch_add_depend(c, atomic_load(&op->chain->tail), p) < 0)
		op->lost++;
}

void pgeng_op_begin(struct pgeng *e, struct pg_op *op, struct pg_group *const *g, size_t ng,
		    struct pg_chain *chain)
{
	size_t i;

	if (ng > PG_ENGAGE_MAX)
		ng = PG_ENGAGE_MAX;
	op->ps.befores = op_befores;
	op->ps.created = op_created;
	op->e = e;
	op->ng = ng;
	op->ndeps = 0;
	op->lost = 0;
	op->chain = chain;
	op->order = NULL;
	pthread_mutex_lock(&e->lock);
	for (i = 0; i < ng; i++) {
		op->g[i] = g[i];
		g[i]->active++;
		op->deps[op->ndeps++] = g[i]->head;
	}
	if (chain) {
		pgeng_chain_retain(chain);
		if (chain->order) {
			op->order = chain->order;
			patch_retain(op->order);
			op->deps[op->ndeps++] = op->order;
		}
	}
	pthread_mutex_unlock(&e->lock);
	op->on = true;
}

struct patch_scope *pgeng_op_scope(struct pg_op *op)
{
	return op && op->on ? &op->ps : NULL;
}

int pgeng_op_end(struct pg_op *op)
{
	struct pgeng *e = op->e;
	size_t i;

	if (!op->on)
		return 0;
	op->on = false;
	pthread_mutex_lock(&e->lock);
	for (i = 0; i < op->ng; i++) {
		struct pg_group *g = op->g[i];

		g->active--;
		/* Released groups can gain no befores: their head may now
		 * commit, and with it the changes waiting for it. */
		if (atomic_load(&g->released))
			unhold_head(e, g);
		maybe_let_go(e, g);
	}
	patch_release(e->c, op->order);
	op->order = NULL;
	if (op->ng)
		sweep(e);
	pthread_mutex_unlock(&e->lock);
	if (op->chain)
		pgeng_chain_release(e, op->chain);
	/* A refused edge drops ordering: the caller must hear of it. */
	if (op->lost) {
		atomic_fetch_add(&e->lost, op->lost);
		return -EIO;
	}
	return 0;
}

void pgeng_destroy(struct pgeng *e)
{
	struct pg_group *g, *nx;

	if (!e)
		return;
	for (g = e->all; g; g = nx) {
		nx = g->next;
		free_group(e, g);
	}
	free(e->ht);
	free(e->uc);
	pthread_mutex_destroy(&e->lock);
	free(e);
}
