/* Patchgroups in the patch engine (design.md §5).
 *
 * A group is a pair of empty patches:
 *  - its head, which every change made in the group depends on, and which
 *    depends on the tail and head of each of the group's befores.  The head
 *    is held (never committed on its own) until the group is released by its
 *    first change or sealed by its first after: until then it may still gain
 *    befores through patch_add_depend();
 *  - its tail, a held empty patch that gains a dependency on every patch made
 *    in the group.  It is let go once the group can get no more changes:
 *    closed or sealed, and engaged by nobody with no operation in flight.
 *
 * The rules keep the group graph acyclic: an after can gain befores only
 * before it has changes or afters of its own, and a before must not be
 * engaged, so every change of a before is older than every change of its
 * afters and the engine's own (newer -> older) edges can never close a loop.
 *
 * Errors (returned as -errno, and kept the same by the daemon and the API):
 *   EINVAL   an id that is not positive
 *   ENOENT   no such group, or the group is closed and the call needs an
 *            open handle (engage, close, or naming it as an after)
 *   EPERM    the caller is neither the group's owner nor root
 *   ELOOP    before == after
 *   EBUSY    the before is engaged (or has an operation in flight)
 *   EROFS    the group is sealed: it has afters, so it can gain no befores
 *            and can never be engaged again
 *   EALREADY the after already carries a change (it was released)
 *   EMLINK   too many groups engaged by one process (PG_ENGAGE_MAX)
 *   EDQUOT   (create) the owner, not root, already has PG_UID_GROUPS groups
 *            that are open or not yet durable
 *   ENOTCONN (disengage) the group is not engaged by the calling process
 *   ENOMEM
 * A refused call changes nothing.
 *
 * Locking: one engine lock; it is taken before the cache's lock and never
 * while the cache lock is held (the scope hooks read only atomics).
 */
#ifndef FSTITCH_PGENG_H
#define FSTITCH_PGENG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "engine/cache.h"

struct pgeng;
struct pg_group;
struct pg_chain;

#define PG_ENGAGE_MAX 64
/* Groups one user (not root) may have open or not yet durable: a bound on
 * the daemon's memory that no user can lift for the others. */
#define PG_UID_GROUPS 65536

enum pg_state {
	PG_ST_CLOSED = 1 << 0,	 /* the handle was dropped */
	PG_ST_SEALED = 1 << 1,	 /* has afters */
	PG_ST_RELEASED = 1 << 2, /* has carried a change */
	PG_ST_RETIRED = 1 << 3,	 /* closed and durable: only the id is left */
};

struct pg_info {
	int64_t id;
	uid_t owner;
	unsigned state;	  /* enum pg_state bits */
	uint32_t engaged; /* scopes that engage it */
	uint32_t nbefores, nafters;
	uint64_t nchanges; /* changes (patches created or merged into) */
};

/* An engine of groups over cache c (the caller keeps c alive until after
 * pgeng_destroy).  -ENOMEM. */
int pgeng_create(struct cache *c, struct pgeng **out);
/* Let go of every held patch and free every group.  No operation may be in
 * flight and no scope may still hold a group. */
void pgeng_destroy(struct pgeng *e);

/* Start the ids at first (> 0) instead of 1: before any group is made.
 * Every id below it then names a group that is over (retired). */
void pgeng_set_first_id(struct pgeng *e, int64_t first);
/* A new open group owned by uid; *id > 0, never reused by this engine. */
int pgeng_group_create(struct pgeng *e, uid_t owner, int64_t *id);
/* A file system that journals makes everything done so far durable with
 * one commit: pgeng_sync() then calls fn (without the engine lock) instead
 * of waiting for the group's patches themselves.  NULL: none. */
void pgeng_set_sync_hook(struct pgeng *e, int (*fn)(void *arg), void *arg);
/* Change the per-user bound (tests); 0 restores PG_UID_GROUPS. */
void pgeng_set_uid_limit(struct pgeng *e, size_t limit);
/* after's changes reach disk only after all of before's (and, through its
 * head, all of before's own befores).  A closed group that is already
 * durable may be named as before: a no-op that returns 0. */
int pgeng_depend(struct pgeng *e, int64_t before, int64_t after, uid_t uid);
/* Drop the handle.  The group keeps ordering its changes and may still be
 * named as a before and synced until it is durable and forgotten. */
int pgeng_close(struct pgeng *e, int64_t id, uid_t uid);
/* Block until the group's changes so far and all its befores are durable.
 * Works on closed groups; 0 at once for a retired one. */
int pgeng_sync(struct pgeng *e, int64_t id, uid_t uid);
/* Describe a group.  A retired id gives state PG_ST_RETIRED and zeros. */
int pgeng_info(struct pgeng *e, int64_t id, struct pg_info *out);
/* Describe the known group with the smallest id >= id; -ENOENT if none. */
int pgeng_info_next(struct pgeng *e, int64_t id, struct pg_info *out);

struct pg_summary {
	uint64_t groups, closed, sealed, engaged;
	int64_t last_id;
	uint64_t lost; /* ordering edges the engine refused (should stay 0) */
};
void pgeng_summary(struct pgeng *e, struct pg_summary *out);

/* For fstitch-stat (inspect.c): a group and the patches that stand for it
 * (identities only, to label held patches). */
struct pg_view {
	struct pg_info info;
	const struct patch *head, *tail;
};
/* Call fn(arg, v, n, total) with the engine lock held; v describes up to
 * max of the `total` known groups, newest first.  fn may take the cache
 * lock (order: engine, then cache), must be quick and must not call
 * pgeng_*.  Returns fn's result, or -ENOMEM. */
int pgeng_view(struct pgeng *e, size_t max,
	       int (*fn)(void *arg, const struct pg_view *v, size_t n, size_t total), void *arg);

/* ---- engagement (used by the scope layer) ------------------------------ */

/* Count one more engagement of group id by a scope and return the group.
 * Refused with ENOENT (unknown or closed), EPERM, EROFS (sealed). */
int pgeng_engage(struct pgeng *e, int64_t id, uid_t uid, struct pg_group **out);
/* Take one more engagement on a group already engaged by someone (a scope
 * copied from its parent).  Cannot fail. */
void pgeng_engage_again(struct pgeng *e, struct pg_group *g);
/* Undo one engagement; the group may be let go of or forgotten. */
void pgeng_disengage(struct pgeng *e, struct pg_group *g);
int64_t pgeng_group_id(const struct pg_group *g);

/* An ordering chain for the fsync=order policy: every change made under it
 * depends on all changes made under it before the last pgeng_chain_order().
 */
int pgeng_chain_create(struct pgeng *e, struct pg_chain **out);
void pgeng_chain_retain(struct pg_chain *ch);
void pgeng_chain_release(struct pgeng *e, struct pg_chain *ch);
/* The ordering point: later changes depend on every earlier one. */
int pgeng_chain_order(struct pgeng *e, struct pg_chain *ch);

/* ---- operations -------------------------------------------------------- */

/* One file-system operation made on behalf of a scope.  Caller storage,
 * one per operation in flight; fields are private.  Zeroed, it is an
 * operation under no scope. */
struct pg_op {
	struct patch_scope ps;
	struct pgeng *e;
	struct pg_group *g[PG_ENGAGE_MAX];
	struct patch *deps[PG_ENGAGE_MAX + 1];
	size_t ng, ndeps;
	struct pg_chain *chain;
	struct patch *order;
	unsigned lost; /* edges the engine refused (should never happen) */
	bool on;
};

/* Start op so that every change made with pgeng_op_scope(op) until
 * pgeng_op_end() joins groups g[0..ng) (at most PG_ENGAGE_MAX, each engaged
 * by the caller's scope) and, if chain is not NULL, that chain. */
void pgeng_op_begin(struct pgeng *e, struct pg_op *op, struct pg_group *const *g, size_t ng,
		    struct pg_chain *chain);
/* The patch scope to give the changes of op (see patch_create_byte()):
 * NULL if op is NULL or not begun, as for a process in no group. */
struct patch_scope *pgeng_op_scope(struct pg_op *op);
/* -EIO if the engine refused an ordering edge for a change made in the
 * operation (the change is then not ordered after its groups); the refusal
 * is also counted in pg_summary.lost.  0 otherwise. */
int pgeng_op_end(struct pg_op *op);

#endif
