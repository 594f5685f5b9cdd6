/* The daemon side of patchgroups: ties the group engine (pg.c), the
 * per-process scopes (scope.c) and the control socket (ctl.c) together. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "proto/ctl.h"
#include "inspect/inspect.h"
#include "engine/pgeng.h"
#include "pgsrv.h"
#include "scope.h"

/* A process's own scope: the groups it engages and its fsync policy.  A
 * process gets one on its first engage, disengage or policy call, copied
 * from the scope it inherited (as fork copies a file table). */
struct pscope {
	struct scope_key key;
	struct pg_group *g[PG_ENGAGE_MAX];
	size_t ng;
	/* autoclose[i]: g[i] is closed, as closer[i], when this process's
	 * engagement of it ends (CTL_SW_AUTOCLOSE).  Never inherited: a
	 * child's exit must not close its parent's group. */
	bool autoclose[PG_ENGAGE_MAX];
	uid_t closer[PG_ENGAGE_MAX];
	bool fsync_order;
	/* CTL_ORDER_GROUPS: the process orders its changes with its groups
	 * alone (pgsrv_enter()).  Inherited. */
	bool group_order;
	struct pg_chain *chain;
};

struct pgsrv {
	struct cache *c;
	struct pgeng *eng;
	struct scope_tab *scopes;
	struct ctl_server *ctl;
	pthread_mutex_t lock; /* the contents of every pscope */
	char sock[108];
	uint64_t fsync_ordered; /* atomic */
	uint64_t requests;	/* atomic: requests handled */
};

static void drop_scope(struct pgsrv *srv, struct pscope *ps)
{
	int64_t id;
	size_t i;

	for (i = 0; i < ps->ng; i++) {
		id = pgeng_group_id(ps->g[i]);
		pgeng_disengage(srv->eng, ps->g[i]);
		/* Closed already (by its owner's pg_close) is fine. */
		if (ps->autoclose[i])
			pgeng_close(srv->eng, id, ps->closer[i]);
	}
	pgeng_chain_release(srv->eng, ps->chain);
	free(ps);
}

/* The watcher saw process key exit: its engagements end with it. */
static void on_exit_cb(void *arg, struct scope_key key)
{
	struct pgsrv *srv = arg;
	struct pscope *ps;

	pthread_mutex_lock(&srv->lock);
	ps = scope_del(srv->scopes, key);
	if (ps)
		drop_scope(srv, ps);
	pthread_mutex_unlock(&srv->lock);
}

/* The scope that applies to pid (its own or inherited), or NULL.  Called
 * with srv->lock held. */
static struct pscope *applying_scope(struct pgsrv *srv, pid_t pid)
{
	struct scope_key key;

	if (scope_resolve(srv->scopes, pid, &key) <= 0)
		return NULL;
	return scope_get(srv->scopes, key);
}

/* pid's own scope, made from what it inherits if it has none yet.  Called
 * with srv->lock held. */
static int own_scope(struct pgsrv *srv, pid_t pid, struct pscope **out)
{
	struct pscope *ps, *parent;
	struct scope_key key;
	size_t i;
	int r, fd;

	if (pid <= 0)
		return -ESRCH;
	r = scope_key_pin(srv->scopes, pid, &key, &fd);
	if (r < 0)
		return r;
	ps = scope_get(srv->scopes, key);
	if (ps) {
		if (fd >= 0)
			close(fd);
		*out = ps;
		return 0;
	}
	parent = applying_scope(srv, pid);
	ps = calloc(1, sizeof(*ps));
	if (!ps) {
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	ps->key = key;
	if (parent) {
		for (i = 0; i < parent->ng; i++) {
			pgeng_engage_again(srv->eng, parent->g[i]);
			ps->g[ps->ng++] = parent->g[i];
		}
		ps->fsync_order = parent->fsync_order;
		ps->group_order = parent->group_order;
		ps->chain = parent->chain;
		if (ps->chain)
			pgeng_chain_retain(ps->chain);
	}
	r = scope_add_pinned(srv->scopes, key, fd, ps);
	if (r < 0) {
		drop_scope(srv, ps);
		return r;
	}
	*out = ps;
	return 0;
}

/* Engage group id for the caller; with autoclose, the group is closed when
 * that engagement ends (do_disengage(), the caller's exit). */
static int do_engage(struct pgsrv *srv, const struct ctl_peer *peer, int64_t id, bool autoclose)
{
	struct pg_group *g;
	struct pscope *ps;
	size_t i;
	int r;

	pthread_mutex_lock(&srv->lock);
	/* The group's rules first, so that a refused engage creates no scope. */
	r = pgeng_engage(srv->eng, id, peer->uid, &g);
	if (r < 0)
		goto out;
	r = own_scope(srv, peer->pid, &ps);
	if (r < 0) {
		pgeng_disengage(srv->eng, g);
		goto out;
	}
	for (i = 0; i < ps->ng; i++) {
		if (ps->g[i] == g) {
			pgeng_disengage(srv->eng, g); /* engaged already */
			goto out;
		}
	}
	if (ps->ng == PG_ENGAGE_MAX) {
		pgeng_disengage(srv->eng, g);
		r = -EMLINK;
		goto out;
	}
	ps->autoclose[ps->ng] = autoclose;
	ps->closer[ps->ng] = peer->uid;
	ps->g[ps->ng++] = g;
out:
	pthread_mutex_unlock(&srv->lock);
	return r;
}

/* End the caller's engagement of group id.  A group engaged with autoclose
 * is closed now when autoclose is NULL; otherwise *autoclose says whether
 * it was so engaged and closing it is the caller's job (CTL_SWITCH closes
 * it only once every step has succeeded). */
static int do_disengage(struct pgsrv *srv, const struct ctl_peer *peer, int64_t id, bool *autoclose)
{
	struct pscope *ps;
	bool ac;
	uid_t closer;
	size_t i;
	int r = -ENOTCONN;

	if (id <= 0)
		return -EINVAL;
	pthread_mutex_lock(&srv->lock);
	ps = applying_scope(srv, peer->pid);
	for (i = 0; ps && i < ps->ng; i++)
		if (pgeng_group_id(ps->g[i]) == id)
			break;
	if (!ps || i == ps->ng)
		goto out;
	/* The scope that applies is the caller's own when it has one (the
	 * walk up starts at the caller, whose pid no live ancestor shares):
	 * only an inherited one needs a scope of the caller's own made from
	 * it, and the caller's pid resolved a second time. */
	if (ps->key.pid != peer->pid) {
		r = own_scope(srv, peer->pid, &ps);
		if (r < 0)
			goto out;
	}
	r = -ENOTCONN;
	for (i = 0; i < ps->ng; i++) {
		if (pgeng_group_id(ps->g[i]) == id) {
			ac = ps->autoclose[i];
			closer = ps->closer[i];
			pgeng_disengage(srv->eng, ps->g[i]);
			ps->ng--;
			ps->g[i] = ps->g[ps->ng];
			ps->autoclose[i] = ps->autoclose[ps->ng];
			ps->closer[i] = ps->closer[ps->ng];
			if (autoclose)
				*autoclose = ac;
			else if (ac)
				pgeng_close(srv->eng, id, closer);
			r = 0;
			break;
		}
	}
out:
	pthread_mutex_unlock(&srv->lock);
	return r;
}

static int do_policy(struct pgsrv *srv, const struct ctl_peer *peer, int64_t policy)
{
	struct pscope *ps;
	int r;

	if (policy != CTL_FSYNC_KEEP && policy != CTL_FSYNC_ORDER)
		return -EINVAL;
	pthread_mutex_lock(&srv->lock);
	r = own_scope(srv, peer->pid, &ps);
	if (r < 0)
		goto out;
	if (policy == CTL_FSYNC_ORDER && !ps->chain) {
		r = pgeng_chain_create(srv->eng, &ps->chain);
		if (r < 0)
			goto out;
	}
	if (policy == CTL_FSYNC_KEEP) {
		pgeng_chain_release(srv->eng, ps->chain);
		ps->chain = NULL;
	}
	ps->fsync_order = policy == CTL_FSYNC_ORDER;
out:
	pthread_mutex_unlock(&srv->lock);
	return r;
}

static int do_order(struct pgsrv *srv, const struct ctl_peer *peer, int64_t policy)
{
	struct pscope *ps;
	int r;

	if (policy != CTL_ORDER_MOUNT && policy != CTL_ORDER_GROUPS)
		return -EINVAL;
	pthread_mutex_lock(&srv->lock);
	r = own_scope(srv, peer->pid, &ps);
	if (r == 0)
		ps->group_order = policy == CTL_ORDER_GROUPS;
	pthread_mutex_unlock(&srv->lock);
	return r;
}

/* A forked child's copy of the scope it inherits, taken before its parent
 * may change its own (the library asks from its fork handler): the child
 * then keeps what it had at the fork, as with a file table, whatever the
 * parent engages or leaves later. */
static int do_scope_own(struct pgsrv *srv, const struct ctl_peer *peer)
{
	struct pscope *ps;
	int r;

	pthread_mutex_lock(&srv->lock);
	r = own_scope(srv, peer->pid, &ps);
	pthread_mutex_unlock(&srv->lock);
	return r;
}

/* pgeng_depend(), except that a before engaged only by processes that
 * have exited is not busy: their exits are taken in first.  A client that
 * waited for a process (pgrun, which leaves its group by exiting) may
 * name that process's group as a before at once. */
static int depend(struct pgsrv *srv, int64_t before, int64_t after, uid_t uid)
{
	int r = pgeng_depend(srv->eng, before, after, uid);

	if (r == -EBUSY) {
		/* Another thread may have ended the exit: try again even if
		 * this call reported none. */
		scope_reap(srv->scopes);
		r = pgeng_depend(srv->eng, before, after, uid);
	}
	return r;
}

/* CTL_SWITCH (ctl.h): leave, create, depend, engage, policy in one
 * request.  A refused step undoes the earlier ones: the left group is
 * engaged again, a new group (which never carried a change) is closed.
 * Only a failure to engage after a dependency was added leaves that edge:
 * edges are never removed; the new group is closed then. */
static int do_switch(struct pgsrv *srv, const struct ctl_peer *peer, const struct ctl_req *req,
		     int64_t *id)
{
	uint32_t fl = req->flags;
	uint32_t known = req->version >= 2 ? CTL_SW_ALL : CTL_SW_ALL_V1;
	int64_t leave = req->a, before = req->b, nid = 0;
	bool left_ac = false, new_ac;
	int r;

	if ((fl & ~known) || leave < 0 || before < 0 ||
	    (!(fl & CTL_SW_CREATE) && (before || (fl & CTL_SW_ENGAGE))) ||
	    ((fl & CTL_SW_AUTOCLOSE) && !(fl & CTL_SW_ENGAGE)))
		return -EINVAL;
	if (leave > 0) {
		r = do_disengage(srv, peer, leave, &left_ac);
		if (r < 0)
			return r;
	}
	if (fl & CTL_SW_CREATE) {
		r = pgeng_group_create(srv->eng, peer->uid, &nid);
		if (r < 0)
			goto undo_leave;
		if (before > 0) {
			r = depend(srv, before, nid, peer->uid);
			if (r < 0)
				goto undo_create;
		}
		if (fl & CTL_SW_ENGAGE) {
			r = do_engage(srv, peer, nid, fl & CTL_SW_AUTOCLOSE);
			if (r < 0)
				goto undo_create;
		}
	}
	if (fl & CTL_SW_ORDER) {
		r = do_policy(srv, peer, CTL_FSYNC_ORDER);
		if (r < 0)
			goto undo_engage;
	}
	/* The caller engaged it, so it may close it; closed already is fine. */
	if (leave > 0)
		pgeng_close(srv->eng, leave, peer->uid);
	*id = nid;
	return 0;
undo_engage:
	if (nid && (fl & CTL_SW_ENGAGE))
		do_disengage(srv, peer, nid, &new_ac);
undo_create:
	if (nid)
		pgeng_close(srv->eng, nid, peer->uid);
undo_leave:
	if (leave > 0)
		do_engage(srv, peer, leave, left_ac);
	return r;
}

static void handle(void *arg, const struct ctl_peer *peer, const struct ctl_req *req,
		   struct ctl_rep *rep, struct ctl_payload *pl)
{
	struct pgsrv *srv = arg;
	struct pg_summary sum;
	struct pg_info in;
	uint64_t seq = __atomic_fetch_add(&srv->requests, 1, __ATOMIC_RELAXED);
	int r;

	/* What a client reads about groups and scopes reflects every process
	 * it has seen exit. */
	if (req->op == CTL_INFO || req->op == CTL_NEXT || req->op == CTL_SUMMARY)
		scope_reap(srv->scopes);
	switch (req->op) {
	case CTL_HELLO:
		r = 0;
		break;
	case CTL_CREATE:
		r = pgeng_group_create(srv->eng, peer->uid, &rep->id);
		break;
	case CTL_DEPEND:
		r = depend(srv, req->a, req->b, peer->uid);
		break;
	case CTL_ENGAGE:
		r = do_engage(srv, peer, req->a, false);
		break;
	case CTL_DISENGAGE:
		r = do_disengage(srv, peer, req->a, NULL);
		break;
	case CTL_SYNC:
		r = pgeng_sync(srv->eng, req->a, peer->uid);
		break;
	case CTL_CLOSE:
		r = pgeng_close(srv->eng, req->a, peer->uid);
		break;
	case CTL_SUMMARY:
		pgeng_summary(srv->eng, &sum);
		rep->summary.groups = sum.groups;
		rep->summary.closed = sum.closed;
		rep->summary.sealed = sum.sealed;
		rep->summary.engaged = sum.engaged;
		rep->summary.last_id = sum.last_id;
		rep->summary.scopes = scope_count(srv->scopes);
		rep->summary.fsync_ordered = __atomic_load_n(&srv->fsync_ordered, __ATOMIC_RELAXED);
		rep->summary.requests = seq;
		r = 0;
		break;
	case CTL_INFO:
	case CTL_NEXT:
		if (req->op == CTL_INFO)
			r = pgeng_info(srv->eng, req->a, &in);
		else
			r = pgeng_info_next(srv->eng, req->a, &in);
		if (r == 0) {
			rep->info.id = in.id;
			rep->info.owner = in.owner;
			rep->info.state = in.state;
			rep->info.engaged = in.engaged;
			rep->info.nbefores = in.nbefores;
			rep->info.nafters = in.nafters;
			rep->info.nchanges = in.nchanges;
		}
		break;
	case CTL_FSYNC_POLICY:
		r = do_policy(srv, peer, req->a);
		break;
	case CTL_ORDER_POLICY:
		r = do_order(srv, peer, req->a);
		break;
	case CTL_SCOPE_OWN:
		r = do_scope_own(srv, peer);
		break;
	case CTL_STATS:
		r = inspect_serve(srv->c, srv->eng, req, rep, pl);
		break;
	case CTL_SWITCH:
		r = do_switch(srv, peer, req, &rep->id);
		break;
	default:
		r = -EOPNOTSUPP;
		break;
	}
	rep->err = r < 0 ? -r : 0;
}

/* Remove the sockets of daemons that died without cleaning up (SIGKILL):
 * "fstitch-PID.ctl" whose PID no longer runs.  Best effort. */
static void remove_stale(const char *dir)
{
	char path[300];
	struct dirent *d;
	DIR *dp = opendir(dir);
	long pid;
	char *end;

	if (!dp)
		return;
	while ((d = readdir(dp))) {
		if (strncmp(d->d_name, "fstitch-", 8) != 0)
			continue;
		pid = strtol(d->d_name + 8, &end, 10);
		if (pid <= 0 || strcmp(end, ".ctl") != 0)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		unlink(path);
	}
	closedir(dp);
}

static void default_path(char *buf, size_t size)
{
	const char *dir = NULL;

	if (geteuid() == 0 && (mkdir("/run/fstitch", 0755) == 0 || errno == EEXIST))
		dir = "/run/fstitch";
	if (!dir)
		dir = getenv("XDG_RUNTIME_DIR");
	if (!dir || !*dir)
		dir = "/tmp";
	remove_stale(dir);
	snprintf(buf, size, "%s/fstitch-%ld.ctl", dir, (long)getpid());
}

/* The first group id of this daemon: the time in microseconds since 1970.
 * Making a group takes a request, more than a microsecond, so an earlier
 * daemon's ids all stay below the time it stopped: an id saved from an
 * earlier mount names a group that is over, never one of this mount
 * (design.md §5). */
static int64_t first_id(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) < 0 || ts.tv_sec <= 0)
		return 1;
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int pgsrv_create(struct e2fs *fs, const char *mountpoint, const char *sockpath,
		 const struct ctl_access *acc, struct pgsrv **out)
{
	struct pgsrv *srv = calloc(1, sizeof(*srv));
	int r;

	(void)mountpoint;
	if (!srv)
		return -ENOMEM;
	pthread_mutex_init(&srv->lock, NULL);
	srv->c = e2_cache(fs);
	if (sockpath) {
		if (strlen(sockpath) >= sizeof(srv->sock)) {
			r = -ENAMETOOLONG;
			goto fail;
		}
		strcpy(srv->sock, sockpath);
	} else {
		default_path(srv->sock, sizeof(srv->sock));
	}
	r = pgeng_create(srv->c, &srv->eng);
	if (r < 0)
		goto fail;
	pgeng_set_first_id(srv->eng, first_id());
	if (e2_journaling(fs))
		pgeng_set_sync_hook(srv->eng, e2_commit_sync_cb, fs);
	r = scope_tab_create(NULL, true, on_exit_cb, srv, &srv->scopes);
	if (r < 0)
		goto fail_eng;
	if (sockpath && !*sockpath) {
		/* No socket: requests come through pgsrv_request(). */
		*out = srv;
		return 0;
	}
	r = ctl_server_start(srv->sock, acc, handle, srv, &srv->ctl);
	if (r < 0)
		goto fail_scopes;
	*out = srv;
	return 0;
fail_scopes:
	scope_tab_destroy(srv->scopes);
fail_eng:
	pgeng_destroy(srv->eng);
fail:
	pthread_mutex_destroy(&srv->lock);
	free(srv);
	return r;
}

static void drop_each(void *arg, struct scope_key key, void *data)
{
	struct pgsrv *srv = arg;

	if (scope_del(srv->scopes, key) == data)
		drop_scope(srv, data);
}

void pgsrv_destroy(struct pgsrv *srv)
{
	if (!srv)
		return;
	ctl_server_stop(srv->ctl);
	pthread_mutex_lock(&srv->lock);
	scope_each(srv->scopes, drop_each, srv);
	pthread_mutex_unlock(&srv->lock);
	scope_tab_destroy(srv->scopes);
	pgeng_destroy(srv->eng);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}

void pgsrv_request(struct pgsrv *srv, const struct ctl_peer *peer, const void *msg, size_t len,
		   struct ctl_rep *rep)
{
	struct ctl_payload pl;

	ctl_dispatch(handle, srv, peer, msg, len, rep, &pl);
	free(pl.buf);
}

bool pgsrv_enter(struct pgsrv *srv, pid_t pid, struct pg_op *op)
{
	struct scope_key key;
	struct pscope *ps;
	bool own = false;

	op->on = false;
	if (!srv || pid <= 0 || scope_count(srv->scopes) == 0)
		return false;
	/* The /proc walk runs without the lock; the scope it names may have
	 * ended since, which scope_get() then reports. */
	if (scope_resolve(srv->scopes, pid, &key) <= 0)
		return false;
	pthread_mutex_lock(&srv->lock);
	ps = scope_get(srv->scopes, key);
	if (ps && (ps->ng || ps->chain))
		pgeng_op_begin(srv->eng, op, ps->g, ps->ng, ps->chain);
	if (ps)
		own = ps->group_order;
	pthread_mutex_unlock(&srv->lock);
	return own;
}

struct patch_scope *pgsrv_scope(struct pg_op *op)
{
	return pgeng_op_scope(op);
}

int pgsrv_leave(struct pgsrv *srv, struct pg_op *op)
{
	if (srv && op->on)
		return pgeng_op_end(op);
	return 0;
}

bool pgsrv_fsync_order(struct pgsrv *srv, pid_t pid)
{
	struct pg_chain *ch = NULL;
	struct pscope *ps;
	int r;

	if (!srv || pid <= 0 || scope_count(srv->scopes) == 0)
		return false;
	pthread_mutex_lock(&srv->lock);
	ps = applying_scope(srv, pid);
	if (ps && ps->fsync_order && ps->chain) {
		ch = ps->chain;
		pgeng_chain_retain(ch);
	}
	pthread_mutex_unlock(&srv->lock);
	if (!ch)
		return false;
	/* On failure the caller does a real fsync, which is always safe. */
	r = pgeng_chain_order(srv->eng, ch);
	pgeng_chain_release(srv->eng, ch);
	if (r == 0)
		__atomic_add_fetch(&srv->fsync_ordered, 1, __ATOMIC_RELAXED);
	return r == 0;
}

const char *pgsrv_socket_path(const struct pgsrv *srv)
{
	return srv->sock;
}
