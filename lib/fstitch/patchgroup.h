/* Patchgroups: application-defined write ordering on an fstitch mount.
 *
 * Every change a process makes to the file system while it has a group
 * engaged joins that group.  pg_depend(before, after) makes every change of
 * `after` reach disk only after every change of `before` (and of before's
 * own befores).  Nothing blocks and nothing is forced to disk: the daemon
 * writes in dependency order.  See pg_create(3) and fstitch(7).
 *
 * Engagement belongs to the calling process: all its threads and every
 * child it starts afterwards make their changes in the group too.
 *
 * Every call returns 0 (pg_create: the new id, > 0) on success and -1 with
 * errno set on failure:
 *   EINVAL    the id is not a valid group id
 *   ENOENT    no such group, or it is closed (engage, close, as an after)
 *   EPERM     the group belongs to another user (only its owner or root
 *             may depend on, engage, sync or close it)
 *   ELOOP     pg_depend(g, g)
 *   EBUSY     pg_depend: the before is engaged by some process
 *   EROFS     the group is sealed: it has afters, so it can gain no befores
 *             and can never be engaged again
 *   EALREADY  pg_depend: the after already carries a change
 *   ENOTCONN  pg_disengage: the group is not engaged by this process
 *   EMLINK    pg_engage: too many groups engaged by this process
 *   EDQUOT    pg_create: this user (not root) has 65536 groups open or not
 *             yet durable
 *   ENXIO     no fstitch mount found (see pg_set_control())
 *   ECONNRESET  the daemon is gone: killed (its mount is dead, or its
 *             socket refuses), or it went away during the call
 *   EPROTO    the daemon speaks another version of the protocol (an
 *             older daemon than this library; a newer one serves older
 *             programs)
 * A refused call changes nothing.
 */
#ifndef FSTITCH_PATCHGROUP_H
#define FSTITCH_PATCHGROUP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t pg_t;

pg_t pg_create(void);
int pg_depend(pg_t before, pg_t after);
int pg_engage(pg_t pg);
int pg_disengage(pg_t pg);
/* Block until pg's changes so far and all its befores are durable.  Not a
 * global sync: other data is written only as far as pg depends on it.  A
 * closed group may be synced until it is durable (then it returns 0). */
int pg_sync(pg_t pg);
/* Drop the handle.  The ordering stays; the id can still be named as a
 * before (once the group is durable that is a no-op) and synced. */
int pg_close(pg_t pg);

/* ---- fstitch extensions ------------------------------------------------ */

/* Which mount to talk to.  path is a directory (or any file) inside the
 * mount, or the daemon's control socket itself.  NULL restores the default:
 * the environment variable FSTITCH_CONTROL (same forms) if set, else the
 * current directory, asked afresh at the next call. */
int pg_set_control(const char *path);

enum pg_fsync_policy {
	PG_FSYNC_KEEP = 0,  /* fsync makes data durable (the default) */
	PG_FSYNC_ORDER = 1, /* fsync returns at once and orders this process's
			     * (and its descendants') later changes after
			     * all earlier ones */
};
/* Set the calling process's fsync policy (inherited by children started
 * afterwards). */
int pg_fsync_policy(enum pg_fsync_policy policy);

enum pg_order_policy {
	PG_ORDER_MOUNT = 0,  /* renames, links and writes that make a file
			      * longer wait as the mount's rename_order says
			      * (the default) */
	PG_ORDER_GROUPS = 1, /* they wait only for the renamed or written
			      * file's own data and this process's groups:
			      * the process orders its changes with
			      * patchgroups and needs no more */
};
/* Set the calling process's order policy (inherited by children started
 * afterwards).  A daemon older than this call fails it with EOPNOTSUPP. */
int pg_order_policy(enum pg_order_policy policy);

/* ---- several calls in one request to the daemon ------------------------ */

enum pg_switch_flags {
	PG_SWITCH_ENGAGE = 1 << 0,	/* engage the new group */
	PG_SWITCH_FSYNC_ORDER = 1 << 1, /* then pg_fsync_policy(PG_FSYNC_ORDER) */
	PG_SWITCH_AUTOCLOSE = 1 << 2,	/* with ENGAGE: the new group is closed
					 * when this process's engagement of it
					 * ends (pg_disengage, a later switch's
					 * leave, or the process's exit), so a
					 * process that exits needs no pg_leave */
};
/* pg_switch(leave, before, flags) does, in one round trip, what
 *   pg_disengage(leave); n = pg_create(); pg_depend(before, n);
 *   pg_engage(n); pg_close(leave);
 * do (leave, before: 0 for none; the engage with PG_SWITCH_ENGAGE).  With
 * leave == before the new group follows the one just left: the two groups
 * of an atomic update cost two calls, not nine.  Returns the new group's
 * id, or -1 with the errno of the first step refused; the steps before it
 * are undone (the left group is engaged again, the new one closed). */
pg_t pg_switch(pg_t leave, pg_t before, unsigned flags);
/* pg_disengage(pg) then pg_close(pg), in one round trip. */
int pg_leave(pg_t pg);

enum pg_status_state {
	PG_STATUS_CLOSED = 1 << 0,
	PG_STATUS_SEALED = 1 << 1,   /* has afters */
	PG_STATUS_RELEASED = 1 << 2, /* has carried a change */
	PG_STATUS_RETIRED = 1 << 3,  /* closed and durable: only the id is left */
};

struct pg_status {
	pg_t id;
	unsigned owner;	  /* uid */
	unsigned state;	  /* enum pg_status_state bits */
	unsigned engaged; /* processes that engage it */
	unsigned nbefores, nafters;
	uint64_t nchanges; /* changes made in it so far */
};
/* Describe a group (any user may ask). */
int pg_status(pg_t pg, struct pg_status *st);

#ifdef __cplusplus
}
#endif

#endif
