/* ext2: dependency lists and the one helper that turns a change to a block
 * into a patch. */
#include <errno.h>
#include <stdlib.h>
#include "e2_int.h"
#include "util/grow.h"

int e2_deps_add(struct e2_deps *d, struct patch *p)
{
	if (!p)
		return 0;
	if (GROW(&d->p, &d->cap, d->n + 1, 8))
		return -ENOMEM;
	d->p[d->n++] = p;
	return 0;
}

int e2_deps_addref(struct e2_deps *d, struct patch *p)
{
	int r;

	if (!p || patch_committed(p))
		return 0;
	r = e2_deps_add(d, p);
	if (!r)
		patch_retain(p);
	return r;
}

void e2_deps_free(struct e2fs *fs, struct e2_deps *d)
{
	for (size_t i = 0; i < d->n; i++)
		patch_release(fs->c, d->p[i]);
	free(d->p);
	d->p = NULL;
	d->n = d->cap = 0;
}

void e2_patch_drop_committed(struct e2fs *fs, struct patch **pp)
{
	if (*pp && patch_committed(*pp)) {
		patch_release(fs->c, *pp);
		*pp = NULL;
	}
}

/* Change len bytes at off in block blk to data, after deps. */
int e2_patch(struct e2fs *fs, uint32_t blk, uint32_t off, uint32_t len, const void *data,
	     struct e2_deps *deps, struct patch **out)
{
	struct cblock *b;
	int r;

	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "cannot read block %u", blk);
	r = patch_create_byte(fs->c, b, off, len, data, deps ? deps->p : NULL, deps ? deps->n : 0,
			      fs->scope, out);
	cache_put(fs->c, b);
	return r;
}

/* Make the empty patch *set depend on p as well (made on first use): a set
 * that can gain members until something depends on it, then is chained
 * into a new one.  0 or -ENOMEM. */
int e2_pset_add(struct e2fs *fs, struct patch **set, struct patch *p)
{
	struct patch *d[2], *np = NULL;
	int r;

	if (!p || patch_committed(p) || fs->opts.consistency == CONSISTENCY_NONE)
		return 0;
	e2_patch_drop_committed(fs, set);
	if (*set && patch_add_depend(fs->c, *set, p) == 0)
		return 0;
	d[0] = p;
	d[1] = *set;
	r = patch_create_empty(fs->c, d, *set ? 2 : 1, &np);
	if (r)
		return r;
	patch_release(fs->c, *set);
	*set = np;
	return 0;
}

size_t e2_patches_drop_committed(struct e2fs *fs, struct patch **v, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		if (patch_committed(v[i]))
			patch_release(fs->c, v[i]);
		else
			v[k++] = v[i];
	}
	return k;
}

bool e2_oset_prune(struct e2fs *fs, struct e2_oset *o)
{
	e2_patch_drop_committed(fs, &o->set);
	o->npend = (unsigned)e2_patches_drop_committed(fs, o->pend, o->npend);
	return !o->set && !o->npend;
}

/* Into o's set while nothing depends on that yet, else aside with the
 * newest members, and once those are full all of them and the set go
 * into a new set. */
int e2_oset_add(struct e2fs *fs, struct e2_oset *o, struct patch *p)
{
	struct patch *d[E2_OSET_PEND + 2], *np = NULL;
	size_t n = 0;
	int r;

	if (!p || patch_committed(p) || fs->opts.consistency == CONSISTENCY_NONE)
		return 0;
	e2_oset_prune(fs, o);
	if (p == o->set)
		return 0;
	for (unsigned i = 0; i < o->npend; i++)
		if (o->pend[i] == p)
			return 0;
	if (o->set && patch_add_depend(fs->c, o->set, p) == 0)
		return 0;
	if (o->npend < E2_OSET_PEND) {
		patch_retain(p);
		o->pend[o->npend++] = p;
		return 0;
	}
	d[n++] = p;
	if (o->set)
		d[n++] = o->set;
	for (unsigned i = 0; i < o->npend; i++)
		d[n++] = o->pend[i];
	r = patch_create_empty(fs->c, d, n, &np);
	if (r)
		return r;
	patch_release(fs->c, o->set);
	for (unsigned i = 0; i < o->npend; i++)
		patch_release(fs->c, o->pend[i]);
	o->npend = 0;
	o->set = np;
	return 0;
}

int e2_oset_deps(struct e2fs *fs, struct e2_oset *o, struct e2_deps *d)
{
	int r;

	e2_oset_prune(fs, o);
	r = e2_deps_addref(d, o->set);
	for (unsigned i = 0; i < o->npend && !r; i++)
		r = e2_deps_addref(d, o->pend[i]);
	return r;
}

void e2_oset_release(struct e2fs *fs, struct e2_oset *o)
{
	patch_release(fs->c, o->set);
	o->set = NULL;
	for (unsigned i = 0; i < o->npend; i++)
		patch_release(fs->c, o->pend[i]);
	o->npend = 0;
}

static unsigned proc_slot(pid_t pid)
{
	return ((unsigned)pid * 2654435761u) % E2_PROCSET_SLOTS;
}

/* Drop the entries of slot whose sets are on disk; *found gets the entry of
 * (pid, start) if it is there and still has a set. */
static void proc_prune(struct e2fs *fs, unsigned slot, pid_t pid, uint64_t start,
		       struct e2_procset **found)
{
	struct e2_procset **pp = &fs->procsets[slot], *e;

	while ((e = *pp)) {
		if (e2_oset_prune(fs, &e->set)) {
			*pp = e->next;
			free(e);
			continue;
		}
		if (found && e->pid == pid && e->start == start)
			*found = e;
		pp = &e->next;
	}
}

int e2_order_add(struct e2fs *fs, struct patch *p)
{
	struct e2_procset *e = NULL;
	unsigned slot;

	/* (counted even when nothing joins: a gate only compares it) */
	fs->order_gen++;
	if (fs->opts.rename_order == E2_RENAME_ORDER_ALL ||
	    (fs->opts.rename_order == E2_RENAME_ORDER_PROCESS && !fs->caller_pid))
		return e2_oset_add(fs, &fs->ordset, p);
	if (fs->opts.rename_order != E2_RENAME_ORDER_PROCESS || !p || patch_committed(p) ||
	    fs->opts.consistency == CONSISTENCY_NONE)
		return 0;
	slot = proc_slot(fs->caller_pid);
	proc_prune(fs, slot, fs->caller_pid, fs->caller_start, &e);
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		e->pid = fs->caller_pid;
		e->start = fs->caller_start;
		e->next = fs->procsets[slot];
		fs->procsets[slot] = e;
	}
	/* A failure leaves the entry with no set: the next prune drops it. */
	return e2_oset_add(fs, &e->set, p);
}

int e2_order_deps(struct e2fs *fs, struct e2_deps *d)
{
	struct e2_procset *e = NULL;
	unsigned slot;
	int r;

	if ((fs->opts.rename_order != E2_RENAME_ORDER_ALL &&
	     fs->opts.rename_order != E2_RENAME_ORDER_PROCESS) ||
	    fs->caller_group_order)
		return 0;
	r = e2_oset_deps(fs, &fs->ordset, d);
	if (r || fs->opts.rename_order == E2_RENAME_ORDER_ALL)
		return r;
	if (fs->caller_pid) {
		slot = proc_slot(fs->caller_pid);
		proc_prune(fs, slot, fs->caller_pid, fs->caller_start, &e);
		return e ? e2_oset_deps(fs, &e->set, d) : 0;
	}
	/* A caller not known waits for every process. */
	for (slot = 0; slot < E2_PROCSET_SLOTS; slot++) {
		proc_prune(fs, slot, 0, 0, NULL);
		for (e = fs->procsets[slot]; e; e = e->next)
			if ((r = e2_oset_deps(fs, &e->set, d)))
				return r;
	}
	return 0;
}

void e2_order_destroy(struct e2fs *fs)
{
	struct e2_procset *e, *nx;

	for (unsigned slot = 0; slot < E2_PROCSET_SLOTS; slot++) {
		for (e = fs->procsets[slot]; e; e = nx) {
			nx = e->next;
			e2_oset_release(fs, &e->set);
			free(e);
		}
		fs->procsets[slot] = NULL;
	}
	e2_oset_release(fs, &fs->ordset);
}
