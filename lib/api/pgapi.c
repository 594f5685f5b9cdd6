/* The public patchgroup API (<fstitch/patchgroup.h>): a client of the
 * daemon's control socket.  One connection per process, made on first use
 * and made again after a fork, because the daemon knows the caller by the
 * pid of the process that connected (SO_PEERCRED). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "proto/ctl.h"
#include "fstitch/patchgroup.h"

/* The library is built with hidden visibility: only what is marked here is
 * exported (lib/api/libfstitch.sym lists the same names). */
#define PG_API __attribute__((visibility("default")))

static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static int api_fd = -1;
static pid_t api_pid;
static char *api_where;	   /* pg_set_control()'s argument, or NULL */
static char api_sock[256]; /* the socket api_fd is connected to ("": none) */
/* This process, or one it was forked from, changed its scope with a call
 * of its own (engage, disengage, a policy): its children are given their
 * copy of it at the fork (fork_child()). */
static bool api_scoped;
static int fork_pipe[2] = {-1, -1};

static int call(uint16_t op, int64_t a, int64_t b, struct ctl_rep *out);

/* Engagement is inherited as a file table is, but the daemon cannot see a
 * fork: a child with no scope of its own follows its parent's, including
 * what the parent engages or leaves later.  So a child of a process that
 * changes its scope asks for its own copy before fork() returns, and the
 * parent waits for that (the child closes the pipe) before it may change
 * its scope again.  posix_spawn() and vfork() run no fork handlers: their
 * children follow the parent until they exit (pg_create(3), BUGS).
 * A fork while another thread is inside call() must not leave the child
 * with the lock taken forever: the lock is held across the fork. */
static void fork_prepare(void)
{
	int e = errno;

	pthread_mutex_lock(&api_lock);
	if (!api_scoped || pipe2(fork_pipe, O_CLOEXEC) < 0)
		fork_pipe[0] = fork_pipe[1] = -1;
	errno = e;
}

static void fork_parent(void)
{
	int e = errno;
	char c;

	if (fork_pipe[0] >= 0) {
		close(fork_pipe[1]);
		while (read(fork_pipe[0], &c, 1) < 0 && errno == EINTR)
			;
		close(fork_pipe[0]);
		fork_pipe[0] = fork_pipe[1] = -1;
	}
	pthread_mutex_unlock(&api_lock);
	errno = e;
}

static void fork_child(void)
{
	int e = errno;

	pthread_mutex_unlock(&api_lock);
	if (fork_pipe[0] >= 0) {
		int fd;

		close(fork_pipe[0]);
		/* The parent's daemon, found already: the child has had no time
		 * to go elsewhere, so it connects without a second lookup. */
		if (api_fd >= 0 && api_sock[0] && ctl_connect(api_sock, &fd) == 0) {
			close(api_fd);
			api_fd = fd;
			api_pid = getpid();
		}
		/* Refused or failed (an older daemon, no daemon any more):
		 * the child follows its parent, as before. */
		(void)call(CTL_SCOPE_OWN, 0, 0, NULL);
		close(fork_pipe[1]);
		fork_pipe[0] = fork_pipe[1] = -1;
	}
	errno = e;
}

__attribute__((constructor)) static void api_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static int connect_now(void)
{
	const char *where = api_where;
	char path[256];
	int r, fd;

	if (!where)
		where = getenv("FSTITCH_CONTROL");
	if (!where || !*where)
		where = ".";
	r = ctl_find_socket(where, path, sizeof(path));
	/* A path that does not resolve is no mount found: to the caller
	 * ENOENT means a missing group, and ELOOP a group made its own
	 * before. */
	if (r == -ENOENT || r == -ELOOP)
		return -ENXIO;
	if (r < 0)
		return r;
	r = ctl_connect(path, &fd);
	/* A socket that refuses is one its killed daemon left behind. */
	if (r == -ECONNREFUSED)
		return -ECONNRESET;
	if (r < 0)
		return r == -ENOENT ? -ENXIO : r;
	api_fd = fd;
	api_pid = getpid();
	strcpy(api_sock, path); /* both as long */
	return 0;
}

/* Send one request; returns 0 or -errno (the daemon's refusal or the
 * transport's failure). */
static int call_flags(uint16_t op, int64_t a, int64_t b, uint32_t flags, struct ctl_rep *out)
{
	struct ctl_req req = {
	    .magic = CTL_MAGIC, .version = CTL_VERSION, .op = op, .flags = flags, .a = a, .b = b};
	struct ctl_rep rep;
	int r;

	pthread_mutex_lock(&api_lock);
	if (api_fd >= 0 && api_pid != getpid()) {
		/* A forked child: the inherited socket names the parent. */
		close(api_fd);
		api_fd = -1;
	}
	if (api_fd < 0) {
		r = connect_now();
		if (r < 0)
			goto out;
	}
	r = ctl_call(api_fd, &req, &rep);
	if (r < 0) {
		/* EPIPE: the daemon went away before our request reached it. */
		if (r == -EPIPE)
			r = -ECONNRESET;
		close(api_fd);
		api_fd = -1;
		goto out;
	}
	r = -rep.err;
	if (r == 0 && out)
		*out = rep;
	if (r == 0 && (op == CTL_ENGAGE || op == CTL_DISENGAGE || op == CTL_SWITCH ||
		       op == CTL_FSYNC_POLICY || op == CTL_ORDER_POLICY))
		api_scoped = true;
out:
	pthread_mutex_unlock(&api_lock);
	return r;
}

static int call(uint16_t op, int64_t a, int64_t b, struct ctl_rep *out)
{
	return call_flags(op, a, b, 0, out);
}

static int ret(int r)
{
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return 0;
}

PG_API pg_t pg_create(void)
{
	struct ctl_rep rep;
	int r = call(CTL_CREATE, 0, 0, &rep);

	if (r < 0) {
		errno = -r;
		return -1;
	}
	return rep.id;
}

PG_API int pg_depend(pg_t before, pg_t after)
{
	return ret(call(CTL_DEPEND, before, after, NULL));
}

PG_API int pg_engage(pg_t pg)
{
	return ret(call(CTL_ENGAGE, pg, 0, NULL));
}

PG_API int pg_disengage(pg_t pg)
{
	return ret(call(CTL_DISENGAGE, pg, 0, NULL));
}

PG_API int pg_sync(pg_t pg)
{
	return ret(call(CTL_SYNC, pg, 0, NULL));
}

PG_API int pg_close(pg_t pg)
{
	return ret(call(CTL_CLOSE, pg, 0, NULL));
}

PG_API int pg_fsync_policy(enum pg_fsync_policy policy)
{
	return ret(call(CTL_FSYNC_POLICY, policy, 0, NULL));
}

PG_API int pg_order_policy(enum pg_order_policy policy)
{
	return ret(call(CTL_ORDER_POLICY, policy, 0, NULL));
}

PG_API int pg_status(pg_t pg, struct pg_status *st)
{
	struct ctl_rep rep;
	int r = call(CTL_INFO, pg, 0, &rep);

	if (r < 0)
		return ret(r);
	st->id = rep.info.id;
	st->owner = rep.info.owner;
	st->state = rep.info.state;
	st->engaged = rep.info.engaged;
	st->nbefores = rep.info.nbefores;
	st->nafters = rep.info.nafters;
	st->nchanges = rep.info.nchanges;
	return 0;
}

PG_API pg_t pg_switch(pg_t leave, pg_t before, unsigned flags)
{
	uint32_t fl = CTL_SW_CREATE;
	struct ctl_rep rep;
	int r;

	if ((flags & ~(unsigned)(PG_SWITCH_ENGAGE | PG_SWITCH_FSYNC_ORDER | PG_SWITCH_AUTOCLOSE)) ||
	    ((flags & PG_SWITCH_AUTOCLOSE) && !(flags & PG_SWITCH_ENGAGE)) || leave < 0 ||
	    before < 0) {
		errno = EINVAL;
		return -1;
	}
	if (flags & PG_SWITCH_ENGAGE)
		fl |= CTL_SW_ENGAGE;
	if (flags & PG_SWITCH_FSYNC_ORDER)
		fl |= CTL_SW_ORDER;
	if (flags & PG_SWITCH_AUTOCLOSE)
		fl |= CTL_SW_AUTOCLOSE;
	r = call_flags(CTL_SWITCH, leave, before, fl, &rep);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return rep.id;
}

PG_API int pg_leave(pg_t pg)
{
	if (pg <= 0)
		return ret(-EINVAL);
	return ret(call_flags(CTL_SWITCH, pg, 0, 0, NULL));
}

PG_API int pg_set_control(const char *path)
{
	char *dup = NULL;

	if (path) {
		dup = strdup(path);
		if (!dup)
			return ret(-ENOMEM);
	}
	pthread_mutex_lock(&api_lock);
	free(api_where);
	api_where = dup;
	if (api_fd >= 0)
		close(api_fd);
	api_fd = -1;
	pthread_mutex_unlock(&api_lock);
	return 0;
}
