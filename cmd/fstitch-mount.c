/* fstitch-mount: serve an ext2 image through FUSE with dependency-ordered
 * write-back.  FUSE glue only: options are decided in lib/cli/mountopt.c, the
 * source in lib/cli/source.c, everything about the file system in lib/ext2/e2.c.
 */
#define FUSE_USE_VERSION 314

#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/fuse.h>
#include <sys/uio.h>
#include <signal.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "ext2/e2.h"
#include "ext2/e2_falloc.h"
#include "inspect/inspect.h"
#include "cli/cliopt.h"
#include "cli/mountopt.h"
#include "pg/caller.h"
#include "pg/pgsrv.h"
#include "bdev/claim.h"
#include "bdev/reclog.h"
#include "crash/record.h"
#include "cli/source.h"
#include "cli/statfmt.h"
#include "util/fsprobe.h"
#include "util/mountinfo.h"
#include "util/size.h"
#include "util/procstatus.h"
#include "util/smallfile.h"

#define PROG "fstitch-mount"

enum exit_status {
	EXIT_OK = 0,	 /* mounted; in the foreground: unmounted cleanly */
	EXIT_FAIL = 1,	 /* failure while serving, or the final flush failed */
	EXIT_OPEN = 8,	 /* SOURCE cannot be opened as an fstitch file system */
	EXIT_MOUNT = 32, /* the mount itself failed */
	EXIT_USAGE = 64, /* bad command line */
};

/* The daemon is the only writer of the image, so what the kernel caches
 * can only go stale through requests it sends us itself. */
#define ENTRY_TIMEOUT 30.0
#define ATTR_TIMEOUT  30.0
#define NEG_TIMEOUT   10.0
#define MAX_WRITE     (1U << 20)
/* The ext2 module serialises operations under one lock, so extra threads
 * only let a request that waits outside it (an fsync waits for its rounds
 * with the lock dropped) go on without holding up the others.  More
 * threads than that cost throughput: extracting the full linux-source
 * tree took 26.2 s with 2 threads and 43.1 s with 4 on a 2-core machine
 * (tests/bench/fs_bench.sh --full --workloads untar, one run each), so the
 * default is 2; a mount with several fsyncing processes may want
 * max_threads=4 (mkdir's median latency beside three fsync loops went
 * from 0.4-0.8 ms at 2 threads to 0.2-0.3 ms at 4). */
#define MAX_THREADS 2

struct args {
	const char *source;
	const char *mountpoint;
	struct mountopt mo;
	bool foreground;
	bool single;
	bool fake; /* mount helper's -f: check everything, mount nothing */
};

static struct {
	struct e2fs *fs;
	struct pgsrv *srv;
	/* rename_order=process: which process each request comes from */
	struct caller_tab *callers;
	bool use_syslog;
	/* changes whose patchgroup ordering was lost (pgsrv_leave failed) */
	pthread_mutex_t lost_lock;
	uint64_t lost;
	struct mountopt_ratelimit lost_rl;
	bool fault_lost; /* tests: FSTITCH_FAULT_PGLOST, every leave fails */
	bool acl;	 /* the kernel enforces POSIX ACLs and leaves the umask to us */
	/* FUSE_HANDLE_KILLPRIV_V2 (io_writev()): the kernel leaves dropping
	 * a file's set-user-ID bit and capability on a change to us
	 * (kill_priv()).  Set by the INIT reply, before any other request. */
	bool killpriv;
	uint64_t init_unique; /* the INIT request, while it is answered */
	bool init_offers;     /* and the kernel offered the flag */
	/* -o sync: every change returns once on disk; -o dirsync (or sync):
	 * every change of a directory's names (sync_after()) */
	bool sync_all, dirsync;
	/* corrupt structures found while serving: logged with a limit */
	struct mountopt_ratelimit eio_rl;
	struct fuse_session *se;
	bool panicked;		  /* errors=panic stopped the daemon */
	struct bdev_claim *claim; /* the source, held until after the final flush */
	/* the final flush (final_flush()): done once, from FUSE_DESTROY on a
	 * fuseblk mount, so that the unmount waits for it */
	bool flushed, flush_failed, stats_failed, had_srv;
	const char *source; /* SOURCE as given, for messages */
	char *stats;	    /* statsfile=, absolute */
} D = {
    .lost_lock = PTHREAD_MUTEX_INITIALIZER,
    .eio_rl = {.burst = 10, .window_ms = 60000},
    /* one line per event, but a storm (a bug hitting every write) must
     * not flood the log: 10 lines a minute at most */
    .lost_rl = {.burst = 10, .window_ms = 60000},
};

/* What the kernel asked of the request this thread is serving, which
 * libfuse 3.14 does not pass on: its FUSE_WRITE_KILL_SUIDGID,
 * FATTR_KILL_SUIDGID or FUSE_OPEN_KILL_SUIDGID, set for a caller without
 * CAP_FSETID (and for every chown).  libfuse serves a request on the
 * thread that read it (io_read()). */
static __thread bool req_kill_suid;
/* The request is open(2)'s O_TMPFILE, relabelled a CREATE (note_request()). */
static __thread bool req_tmpfile;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (D.use_syslog) {
		vsyslog(LOG_ERR, fmt, ap);
	} else {
		fputs(PROG ": ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

/* ---- inode numbers ------------------------------------------------------ */

/* FUSE names the root 1; ext2 names it 2 (1 is the bad-blocks inode, which
 * is never exposed).  Every other number is the same on both sides. */
static uint32_t in_ino(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? E2_ROOT_INO : (uint32_t)ino;
}

static fuse_ino_t out_ino(uint32_t ino)
{
	return ino == E2_ROOT_INO ? FUSE_ROOT_ID : ino;
}

/* ---- replies ------------------------------------------------------------ */

/* The one place errors turn into FUSE replies; the e2 layer already speaks
 * -errno.  An EIO's explanation was logged by log_eio() when it happened,
 * on the same thread, so that two workers cannot swap explanations. */
static void reply_err(fuse_req_t req, int r, const char *op)
{
	(void)op;
	fuse_reply_err(req, r < 0 ? -r : r);
}

static uint64_t now_ms(void);

/* An EIO (the library's e2_err): a corrupt structure found, or one that
 * could not be read.  The library has counted it, marked the file system
 * as having errors and, for errors=remount-ro or panic, stopped taking
 * changes.  Its explanation, which names the inode or block, goes to the
 * log, at most 10 lines a minute.  errors=panic then stops the daemon:
 * the session ends, the mount goes away, and the close writes what was
 * changed before (in dependency order) and the error mark. */
static void log_eio(void *arg, const char *msg)
{
	uint64_t missed = 0;
	char unlogged[48] = "";
	bool log;

	(void)arg;
	pthread_mutex_lock(&D.lost_lock);
	log = mountopt_ratelimit(&D.eio_rl, now_ms(), &missed);
	pthread_mutex_unlock(&D.lost_lock);
	if (missed)
		snprintf(unlogged, sizeof(unlogged), " (%llu not logged)",
			 (unsigned long long)missed);
	if (log)
		say("I/O error: %s%s", msg, unlogged);
	/* During the open D.fs is not set yet, and nothing counts. */
	if (D.fs && e2_errors_behaviour(D.fs) == E2_ERRORS_PANIC && e2_error_count(D.fs) &&
	    !__atomic_exchange_n(&D.panicked, true, __ATOMIC_RELAXED)) {
		say("file system error with errors=panic: writing back and stopping");
		fuse_session_exit(D.se);
		/* Wake the threads blocked reading requests; the handler
		 * fuse_set_signal_handlers() installed ends the loop. */
		kill(getpid(), SIGTERM);
	}
}

/* The entry for an inode the caller holds a reference on.  The generation
 * makes a reused inode number a new node to the kernel (and a handle to
 * the old file stale).  The root keeps 0, the one the kernel gave it at
 * the mount. */
static int fill_entry(struct fuse_entry_param *e, const struct stat *st)
{
	uint32_t ino = (uint32_t)st->st_ino, gen = 0;
	int r = ino == E2_ROOT_INO ? 0 : e2_generation(D.fs, ino, &gen);

	if (r < 0)
		return r;
	memset(e, 0, sizeof(*e));
	e->ino = out_ino(ino);
	e->generation = gen;
	e->attr = *st;
	e->attr_timeout = ATTR_TIMEOUT;
	e->entry_timeout = ENTRY_TIMEOUT;
	return 0;
}

/* Reply with an entry that carries one e2 reference, dropping it again if
 * the kernel never sees the reply (an interrupted request). */
static void reply_entry(fuse_req_t req, const struct stat *st)
{
	struct fuse_entry_param e;
	int r = fill_entry(&e, st);

	if (r < 0) {
		e2_forget(D.fs, (uint32_t)st->st_ino, 1);
		reply_err(req, r, "lookup");
		return;
	}
	if (fuse_reply_entry(req, &e) != 0)
		e2_forget(D.fs, (uint32_t)st->st_ino, 1);
}

/* A request that may change the file system: its patchgroup operation,
 * and who the ext2 calls are told asked for the change. */
struct req_op {
	struct pg_op pg;
	struct e2_caller who;
	pid_t tid; /* the FUSE caller (a thread id), 0 for none */
};

/* Read /proc/TID/status of thread tid (a FUSE caller) into buf: false if
 * there is none (tid 0) or it cannot be read (the thread is gone). */
static bool read_status(pid_t tid, char *buf, size_t size)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	return tid > 0 && small_file_read(path, buf, size) == 0;
}

/* e2_caller.may_reserve: whether the caller holds CAP_SYS_RESOURCE, or has
 * resgid (when not 0) among its supplementary groups, by its
 * /proc/TID/status.  A caller that is gone, or whose status cannot be
 * read, may not. */
static bool may_reserve(const struct e2_caller *who, gid_t resgid)
{
	const struct req_op *op = who->arg;
	char buf[16384];

	if (!op || !read_status(op->tid, buf, sizeof(buf)))
		return false;
	return proc_status_has_cap(buf, CAP_SYS_RESOURCE) ||
	       (resgid != 0 && proc_status_in_groups(buf, resgid));
}

/* e2_caller.keeps_sgid: whether the caller is in group gid (its
 * file-system gid, or a supplementary group by its /proc/TID/status) or
 * holds CAP_FSETID, as Linux's in_group_or_capable() asks.  A caller whose
 * status cannot be read keeps the bit, which grants nothing without group
 * execute. */
static bool keeps_sgid(const struct e2_caller *who, gid_t gid)
{
	const struct req_op *op = who->arg;
	char buf[16384];

	if (who->gid == gid || !op || !read_status(op->tid, buf, sizeof(buf)))
		return true;
	return proc_status_in_groups(buf, gid) || proc_status_has_cap(buf, CAP_FSETID);
}

/* Patchgroups see every request that may change the file system, under the
 * calling process's scope: each ext2 call of the request gets op->who,
 * which carries pgsrv_scope(&op->pg).  With rename_order=process it names
 * the calling process as well.  A request with pid 0 (one the kernel makes
 * on its own: a write-back of a shared mapping, a release) has no process,
 * and the ext2 module then orders it against every process. */
static void enter(fuse_req_t req, struct req_op *op)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	pid_t tid = ctx->pid;
	struct scope_key key;

	memset(&op->who, 0, sizeof(op->who));
	op->who.uid = ctx->uid;
	op->who.gid = ctx->gid;
	op->who.may_reserve = may_reserve;
	op->who.keeps_sgid = keeps_sgid;
	op->who.arg = op;
	op->tid = tid;
	if (D.callers && caller_resolve(D.callers, tid, &key) == 1) {
		op->who.pid = key.pid;
		op->who.start = key.start;
	}
	op->who.group_order = pgsrv_enter(D.srv, tid, &op->pg);
	op->who.scope = pgsrv_scope(&op->pg);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A change made during the request could not be ordered after its
 * patchgroups: the file system is still consistent, but the promise made
 * to the program (this change reaches disk only after the group's
 * befores) may not hold.  Counted, and logged with a rate limit. */
static void leave(struct req_op *rop, const char *op)
{
	uint64_t missed = 0, n;
	char unlogged[48] = "";
	bool log;

	if (!D.srv || (pgsrv_leave(D.srv, &rop->pg) == 0 && !D.fault_lost))
		return;
	pthread_mutex_lock(&D.lost_lock);
	n = ++D.lost;
	log = mountopt_ratelimit(&D.lost_rl, now_ms(), &missed);
	pthread_mutex_unlock(&D.lost_lock);
	if (!log)
		return;
	if (missed)
		snprintf(unlogged, sizeof(unlogged), "; %llu not logged",
			 (unsigned long long)missed);
	say("patchgroup ordering lost for a change (%s): the engine refused a dependency "
	    "(%llu so far%s)",
	    op, (unsigned long long)n, unlogged);
}

/* The owner of a new inode.  In a kernel file system the VFS applies the
 * set-group-ID directory rule (inode_init_owner); under FUSE that is the
 * server's job: a new inode in such a directory takes the directory's group,
 * and a new directory keeps the bit. */
static void new_owner(fuse_req_t req, fuse_ino_t parent, mode_t *mode, gid_t *gid)
{
	struct stat dir;

	*gid = fuse_req_ctx(req)->gid;
	if (e2_getattr(D.fs, in_ino(parent), &dir) == 0 && (dir.st_mode & S_ISGID)) {
		*gid = dir.st_gid;
		if (S_ISDIR(*mode))
			*mode |= S_ISGID;
	}
}

/* The permission bits of a new inode.  With POSIX ACLs on, the kernel
 * leaves the umask to us: a default ACL in the parent replaces it (and
 * *acl asks for inherit() once the inode exists). */
static int new_mode(fuse_req_t req, fuse_ino_t parent, mode_t *mode, bool *acl)
{
	int r;

	*acl = false;
	if (!D.acl)
		return 0;
	r = e2_acl_create_mode(D.fs, in_ino(parent), mode, fuse_req_ctx(req)->umask);
	if (r < 0)
		return r;
	*acl = r == 1;
	return 0;
}

static int inherit(const struct e2_caller *who, fuse_ino_t parent, const struct stat *st, bool acl,
		   struct stat *out)
{
	int r;

	if (!acl)
		return 0;
	r = e2_acl_inherit(D.fs, who, in_ino(parent), (uint32_t)st->st_ino);
	if (!r)
		r = e2_getattr(D.fs, (uint32_t)st->st_ino, out);
	return r;
}

/* ---- operations --------------------------------------------------------- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	conn->max_write = MAX_WRITE;
	/* Large inodes keep nanoseconds, 128-byte ones whole seconds: let
	 * the kernel round the same way. */
	conn->time_gran = e2_time_gran(D.fs);
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/* lsattr and chattr on directories too */
	if (conn->capable & FUSE_CAP_IOCTL_DIR)
		conn->want |= FUSE_CAP_IOCTL_DIR;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO;
	/* Writes from the kernel's writeback cache arrive with pid 0 and so
	 * could never join the writer's patchgroup (design.md §5). */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* Without FUSE_HANDLE_KILLPRIV_V2 (io_writev()) the kernel must drop
	 * set-user-ID bits and capabilities itself: the older flag, which
	 * libfuse asks for by default, would leave them to us on a write,
	 * truncate and chown, which only kill_priv() does. */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/* Locks stay in the kernel, which is right for a single-host file
	 * system with one daemon. */
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	/* The kernel checks permissions with the ACLs (default_permissions
	 * is always on) and leaves the umask to us: new inodes inherit their
	 * parent's default ACL instead (new_mode, inherit). */
	if (conn->capable & FUSE_CAP_POSIX_ACL)
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	D.acl = (conn->want & FUSE_CAP_POSIX_ACL) != 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stat st;
	int r = e2_lookup(D.fs, in_ino(parent), name, &st);

	if (r == -ENOENT) {
		struct fuse_entry_param e;

		/* A negative entry: the kernel may remember the name is absent. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = NEG_TIMEOUT;
		fuse_reply_entry(req, &e);
		return;
	}
	if (r < 0)
		reply_err(req, r, "lookup");
	else
		reply_entry(req, &st);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	e2_forget(D.fs, in_ino(ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		e2_forget(D.fs, in_ino(forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int r = e2_getattr(D.fs, in_ino(ino), &st);

	if (r < 0)
		reply_err(req, r, "getattr");
	else
		fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

static int fsync_for(fuse_req_t req, fuse_ino_t ino, bool datasync);
static int kill_priv(struct req_op *op, fuse_ino_t ino, bool suid, gid_t to_gid);
static void forget_mode(fuse_ino_t ino);
static int empty_setattr(fuse_req_t req, fuse_ino_t ino);

/* Synchronous updates, as Linux's ext2 makes them: a change of a file with
 * the sync flag (chattr +S) or on a mount with -o sync, and a change of the
 * names in a directory with the sync or dirsync flag (+D) or on a mount
 * with -o dirsync, returns once it is on disk, as if fsync(2) of ino
 * (the directory, for names) followed.  The kernel knows none of these
 * for a FUSE file but -o sync's writes.  r: the change's result, returned
 * unless the change went well and its sync did not. */
static int sync_after(fuse_req_t req, fuse_ino_t ino, bool names, int r)
{
	uint32_t want = names ? FS_SYNC_FL | FS_DIRSYNC_FL : FS_SYNC_FL, fl;
	int s;

	if (r < 0)
		return r;
	if (!D.sync_all && !(names && D.dirsync) &&
	    (e2_getflags(D.fs, in_ino(ino), &fl) < 0 || !(fl & want)))
		return r;
	s = fsync_for(req, ino, false);
	return s < 0 ? s : r;
}

/* sync_after() of a change that gave the kernel an entry (st) to take:
 * if the sync fails the kernel gets the error instead, so the lookup the
 * change counted is dropped.  acl: the new inode took its directory's
 * default ACL, which its name does not wait for; a new inode with the
 * sync flag (or on a -o sync mount) syncs it first, as Linux writes a
 * synchronous inode's attribute block before the call returns. */
static int sync_entry(fuse_req_t req, fuse_ino_t dir, int r, const struct stat *st, bool acl)
{
	if (r < 0)
		return r;
	if (acl)
		r = sync_after(req, out_ino((uint32_t)st->st_ino), false, r);
	if (r >= 0 && (r = sync_after(req, dir, true, r)) >= 0)
		return r;
	e2_forget(D.fs, (uint32_t)st->st_ino, 1);
	return r;
}

/* reply_err() for a change of names (name in dir, and name2 in dir2 when
 * not NULL).  With made, the change was made and the error came after it:
 * its sync failed (-o sync or dirsync, chattr +S or +D), or a later step
 * did.  The kernel goes by the error and keeps what it knew of the names,
 * the absence that the LOOKUP before a create gave or the entry an unlink
 * or rename removed, for NEG_TIMEOUT or ENTRY_TIMEOUT, hiding the change;
 * so they are invalidated, once the error is answered: until then the
 * kernel holds the directories' locks, which the invalidation waits for. */
static void reply_err_names(fuse_req_t req, int r, const char *what, bool made, fuse_ino_t dir,
			    const char *name, fuse_ino_t dir2, const char *name2)
{
	reply_err(req, r, what);
	if (r >= 0 || !made)
		return;
	fuse_lowlevel_notify_inval_entry(D.se, dir, name, strlen(name));
	if (name2)
		fuse_lowlevel_notify_inval_entry(D.se, dir2, name2, strlen(name2));
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct req_op op;
	static const struct {
		int fuse;
		unsigned e2;
	} map[] = {
	    {FUSE_SET_ATTR_MODE, E2_SET_MODE},
	    {FUSE_SET_ATTR_UID, E2_SET_UID},
	    {FUSE_SET_ATTR_GID, E2_SET_GID},
	    {FUSE_SET_ATTR_SIZE, E2_SET_SIZE},
	    {FUSE_SET_ATTR_ATIME, E2_SET_ATIME},
	    {FUSE_SET_ATTR_MTIME, E2_SET_MTIME},
	    {FUSE_SET_ATTR_CTIME, E2_SET_CTIME},
	    {FUSE_SET_ATTR_ATIME_NOW, E2_SET_ATIME_NOW},
	    {FUSE_SET_ATTR_MTIME_NOW, E2_SET_MTIME_NOW},
	};
	unsigned set = 0;
	bool dropped = false;
	struct stat st;
	int r;

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (to_set & map[i].fuse)
			set |= map[i].e2;
	enter(req, &op);
	/* A truncate or chown drops what kill_priv() would, inside the
	 * change and after its checks: one refused drops nothing.  An empty
	 * change drops what empty_setattr() says. */
	op.who.kill_priv = __atomic_load_n(&D.killpriv, __ATOMIC_RELAXED);
	op.who.kill_suid = req_kill_suid;
	op.who.dropped = &dropped;
	r = 0;
	if (!set && (r = empty_setattr(req, ino)) >= 0) {
		op.who.kill_priv = r == 1;
		op.who.kill_suid = true;
	}
	if (r >= 0)
		r = e2_setattr(D.fs, &op.who, in_ino(ino), attr, set, &st);
	leave(&op, "setattr");
	if (dropped)
		forget_mode(ino);
	r = sync_after(req, ino, false, r);
	if (r < 0)
		reply_err(req, r, "setattr");
	else
		fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	int r = e2_readlink(D.fs, in_ino(ino), buf, sizeof(buf) - 1);

	if (r < 0) {
		reply_err(req, r, "readlink");
		return;
	}
	buf[r] = '\0';
	fuse_reply_readlink(req, buf);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct req_op op;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct stat st;
	gid_t gid;
	int r;
	bool made;

	bool acl;

	new_owner(req, parent, &mode, &gid);
	r = new_mode(req, parent, &mode, &acl);
	enter(req, &op);
	if (!r)
		r = e2_mknod(D.fs, &op.who, in_ino(parent), name, mode, rdev, ctx->uid, gid, &st);
	made = r == 0;
	if (!r && (r = inherit(&op.who, parent, &st, acl, &st)) < 0)
		e2_forget(D.fs, (uint32_t)st.st_ino, 1);
	leave(&op, "mknod");
	r = sync_entry(req, parent, r, &st, acl);
	if (r < 0)
		reply_err_names(req, r, "mknod", made, parent, name, 0, NULL);
	else
		reply_entry(req, &st);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct req_op op;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct stat st;
	gid_t gid;
	int r;
	bool made;

	bool acl;

	mode |= S_IFDIR;
	new_owner(req, parent, &mode, &gid);
	r = new_mode(req, parent, &mode, &acl);
	enter(req, &op);
	if (!r)
		r = e2_mkdir(D.fs, &op.who, in_ino(parent), name, mode, ctx->uid, gid, &st);
	made = r == 0;
	if (!r && (r = inherit(&op.who, parent, &st, acl, &st)) < 0)
		e2_forget(D.fs, (uint32_t)st.st_ino, 1);
	leave(&op, "mkdir");
	r = sync_entry(req, parent, r, &st, acl);
	if (r < 0)
		reply_err_names(req, r, "mkdir", made, parent, name, 0, NULL);
	else
		reply_entry(req, &st);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	struct req_op op;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	mode_t mode = S_IFLNK;
	struct stat st;
	gid_t gid;
	int r;
	bool made;

	new_owner(req, parent, &mode, &gid);
	enter(req, &op);
	r = e2_symlink(D.fs, &op.who, in_ino(parent), name, target, ctx->uid, gid, &st);
	leave(&op, "symlink");
	made = r == 0;
	r = sync_entry(req, parent, r, &st, false);
	if (r < 0)
		reply_err_names(req, r, "symlink", made, parent, name, 0, NULL);
	else
		reply_entry(req, &st);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct req_op op;
	struct stat st;
	int r;
	bool made;

	enter(req, &op);
	r = e2_link(D.fs, &op.who, in_ino(ino), in_ino(newparent), newname, &st);
	leave(&op, "link");
	made = r == 0;
	r = sync_entry(req, newparent, r, &st, false);
	if (r < 0)
		reply_err_names(req, r, "link", made, newparent, newname, 0, NULL);
	else
		reply_entry(req, &st);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct req_op op;
	int r;
	bool made;

	enter(req, &op);
	r = e2_unlink(D.fs, &op.who, in_ino(parent), name);
	leave(&op, "unlink");
	made = r == 0;
	r = sync_after(req, parent, true, r);
	reply_err_names(req, r, "unlink", made, parent, name, 0, NULL);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct req_op op;
	int r;
	bool made;

	enter(req, &op);
	r = e2_rmdir(D.fs, &op.who, in_ino(parent), name);
	leave(&op, "rmdir");
	made = r == 0;
	r = sync_after(req, parent, true, r);
	reply_err_names(req, r, "rmdir", made, parent, name, 0, NULL);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct req_op op;
	unsigned f = 0;
	int r;
	bool made;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (flags & RENAME_NOREPLACE)
		f |= E2_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		f |= E2_RENAME_EXCHANGE;
	enter(req, &op);
	r = e2_rename(D.fs, &op.who, in_ino(parent), name, in_ino(newparent), newname, f);
	leave(&op, "rename");
	made = r == 0;
	r = sync_after(req, parent, true, r);
	if (newparent != parent)
		r = sync_after(req, newparent, true, r);
	reply_err_names(req, r, "rename", made, parent, name, newparent, newname);
}

/* Whether thread tid holds capability cap, by its /proc/TID/status. */
static bool caller_has_cap(pid_t tid, int cap)
{
	char buf[16384];

	return read_status(tid, buf, sizeof(buf)) && proc_status_has_cap(buf, cap);
}

/* Whether the caller of req may keep a file's set-user-ID bits when it
 * changes the file: it holds CAP_FSETID (uid 0 alone is not enough, as
 * for the kernel's capable()). */
static bool caller_fsetid(fuse_req_t req)
{
	return caller_has_cap(fuse_req_ctx(req)->pid, CAP_FSETID);
}

/* ino's attributes, if it has a set-user-ID or set-group-ID bit. */
static bool has_setid(fuse_ino_t ino, struct stat *st)
{
	return e2_getattr(D.fs, in_ino(ino), st) == 0 && (st->st_mode & (S_ISUID | S_ISGID));
}

/* Whether a change of ino by the caller of req, which the kernel sends no
 * kill flag for (fallocate), drops its set-user-ID bits: it has some, and
 * the caller lacks CAP_FSETID. */
static bool suid_kill_for(fuse_req_t req, fuse_ino_t ino)
{
	struct stat st;

	return has_setid(ino, &st) && !caller_fsetid(req);
}

/* Whether a change of a file's data by the caller of req drops the file's
 * set-user-ID bit, or its set-group-ID bit with group execute, as Linux
 * drops them for a caller without CAP_FSETID; *mode gets the mode left. */
static bool drop_suid_mode(fuse_req_t req, mode_t mode, mode_t *out)
{
	mode_t kill = e2_setid_kill(mode);

	if (!kill || caller_fsetid(req))
		return false;
	*out = mode & ~kill;
	return true;
}

/* After a drop, the kernel's cached mode is stale, and it would run the
 * file set-user-ID until the attributes time out: they are invalidated
 * before the change is answered. */
static void forget_mode(fuse_ino_t ino)
{
	fuse_lowlevel_notify_inval_inode(D.se, ino, -1, 0);
}

/* Under FUSE_HANDLE_KILLPRIV_V2 (io_writev()), what the kernel leaves to
 * us on a write, truncate, fallocate or chown of ino (to group to_gid, or
 * E2_SAME_GID): drop its capability and, with suid, its set-ID bits
 * (e2_kill_priv()).  0 or -errno. */
static int kill_priv(struct req_op *op, fuse_ino_t ino, bool suid, gid_t to_gid)
{
	int r;

	if (!__atomic_load_n(&D.killpriv, __ATOMIC_RELAXED))
		return 0;
	r = e2_kill_priv(D.fs, &op->who, in_ino(ino), suid, to_gid);
	if (r <= 0)
		return r;
	forget_mode(ino);
	return 0;
}

/* What the caller, thread tid, is doing, by its /proc/TID/syscall
 * (proc_syscall_chown_none(): 1 chown(f, -1, -1), 0 another call), or -1
 * if that cannot be read: the file needs the right to trace the thread.
 * The thread wakes the daemon before it sleeps on the answer, and until
 * then the file says "running" (on a busy machine, for as long as the
 * thread waits for a processor): it is read again for up to a second. */
static int caller_chown_none(pid_t tid)
{
	char path[64], buf[256];
	uint64_t until = 0;
	int r;

	if (tid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)tid);
	for (;;) {
		if (small_file_read(path, buf, sizeof(buf)) != 0)
			return -1;
		r = proc_syscall_chown_none(buf);
		if (r >= 0)
			return r;
		if (!until)
			until = now_ms() + 1000;
		else if (now_ms() >= until)
			return -1;
		usleep(100);
	}
}

/* An empty SETATTR of ino.  Under FUSE_HANDLE_KILLPRIV_V2 the kernel sends
 * one for chown(f, -1, -1), and one from its own checks before a write,
 * where the WRITE's kill flag decides.  The caller's system call tells
 * them apart.  A chown drops the set-ID bits as Linux's does, for any
 * caller (e2_kill_priv()), and is refused (EPERM) to a caller who is not
 * the owner and lacks CAP_FOWNER when it would drop one: Linux turns the
 * drop into a mode change, which only the owner may make.  Any other call
 * drops nothing.  When the call cannot be read (a daemon not allowed to
 * trace its caller), the bits go only where both would drop them: for
 * the owner without CAP_FSETID.  1 to drop them (e2_setattr() does, under
 * the change's lock), 0 not to, or -errno. */
static int empty_setattr(fuse_req_t req, fuse_ino_t ino)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char buf[16384];
	struct stat st;
	bool got, owner, fsetid;
	int call;

	/* (a directory's bits are never dropped) */
	if (!__atomic_load_n(&D.killpriv, __ATOMIC_RELAXED) || !has_setid(ino, &st) ||
	    S_ISDIR(st.st_mode))
		return 0;
	call = caller_chown_none(ctx->pid);
	if (call == 0)
		return 0;
	/* (one read for both capabilities; none if it cannot be read) */
	got = read_status(ctx->pid, buf, sizeof(buf));
	owner = ctx->uid == st.st_uid || (got && proc_status_has_cap(buf, CAP_FOWNER));
	fsetid = got && proc_status_has_cap(buf, CAP_FSETID);
	if (call == 1) {
		bool in_group =
		    ctx->gid == st.st_gid || (got && proc_status_in_groups(buf, st.st_gid));

		if (!owner &&
		    (e2_setid_kill(st.st_mode) || ((st.st_mode & S_ISGID) && !in_group && !fsetid)))
			return -EPERM;
		return 1;
	}
	return owner && !fsetid;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	uint32_t e2ino = in_ino(ino);
	mode_t mode = 0;
	/* (the inode flags the kernel does not know are checked there) */
	int r = e2_open_as(D.fs, e2ino, fi->flags, &mode);

	if (r < 0) {
		reply_err(req, r, "open");
		return;
	}
	/* With atomic_o_trunc the kernel leaves O_TRUNC to us, so that the
	 * open and the truncation are one request. */
	if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		struct req_op op;
		struct stat attr, st;
		unsigned set = E2_SET_SIZE | E2_SET_MTIME_NOW;
		bool dropped = false;

		memset(&attr, 0, sizeof(attr));
		/* The kernel drops the mode change of its own truncate when
		 * the open truncates, so the set-user-ID and set-group-ID
		 * bits go here, as a truncate by the caller drops them */
		bool v2 = __atomic_load_n(&D.killpriv, __ATOMIC_RELAXED);

		if (!v2 && drop_suid_mode(req, mode, &attr.st_mode))
			set |= E2_SET_MODE;
		enter(req, &op);
		/* (the drop inside the truncate, after its checks; ctime: the
		 * same clock reading as mtime) */
		op.who.kill_priv = v2;
		op.who.kill_suid = req_kill_suid;
		op.who.dropped = &dropped;
		r = e2_setattr(D.fs, &op.who, e2ino, &attr, set, &st);
		leave(&op, "open");
		if (dropped)
			forget_mode(ino);
		r = sync_after(req, ino, false, r);
		if (r < 0) {
			e2_release_inode(D.fs, e2ino);
			reply_err(req, r, "open");
			return;
		}
	}
	/* Only our own writes change a file, and they pass through the
	 * kernel's page cache, so it stays valid across opens. */
	fi->keep_cache = 1;
	if (fuse_reply_open(req, fi) != 0)
		e2_release_inode(D.fs, e2ino);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct req_op op;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fuse_entry_param e;
	struct stat st;
	uint32_t ino;
	gid_t gid;
	int r;
	bool made;
	bool acl;
	/* (O_TMPFILE, from note_request(): no name, and no entry to sync) */
	bool unnamed = req_tmpfile;

	mode = S_IFREG | (mode & 07777);
	new_owner(req, parent, &mode, &gid);
	r = new_mode(req, parent, &mode, &acl);
	enter(req, &op);
	if (!r && unnamed)
		r = e2_tmpfile(D.fs, &op.who, in_ino(parent), mode, ctx->uid, gid, &st);
	else if (!r)
		r = e2_mknod(D.fs, &op.who, in_ino(parent), name, mode, 0, ctx->uid, gid, &st);
	made = r == 0 && !unnamed;
	if (!r && (r = inherit(&op.who, parent, &st, acl, &st)) < 0)
		e2_forget(D.fs, (uint32_t)st.st_ino, 1);
	leave(&op, "create");
	if (!unnamed)
		r = sync_entry(req, parent, r, &st, acl);
	if (r >= 0) {
		ino = (uint32_t)st.st_ino;
		r = fill_entry(&e, &st);
		if (!r)
			r = e2_open_inode(D.fs, ino);
		if (r < 0)
			e2_forget(D.fs, ino, 1);
	}
	if (r < 0) {
		reply_err_names(req, r, "create", made, parent, name, 0, NULL);
		return;
	}
	fi->keep_cache = 1;
	if (fuse_reply_create(req, &e, fi) != 0) {
		e2_release_inode(D.fs, ino);
		e2_forget(D.fs, ino, 1);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	char *buf = malloc(size ? size : 1);
	ssize_t n;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = e2_read(D.fs, in_ino(ino), buf, size, off);
	if (n < 0)
		reply_err(req, (int)n, "read");
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct req_op op;
	bool dropped = false;
	ssize_t n;

	enter(req, &op);
	/* kill_priv() under the write's own lock (a write of a page of a
	 * shared mapping drops nothing, as on Linux) */
	op.who.kill_priv = !fi->writepage && __atomic_load_n(&D.killpriv, __ATOMIC_RELAXED);
	op.who.kill_suid = req_kill_suid;
	op.who.dropped = &dropped;
	n = e2_write(D.fs, &op.who, in_ino(ino), buf, size, off);
	leave(&op, "write");
	if (dropped)
		forget_mode(ino);
	/* (-o sync: the kernel asks for that fsync itself) */
	if (n > 0 && !D.sync_all) {
		int s = sync_after(req, ino, false, 0);

		if (s < 0)
			n = s;
	}
	if (n < 0)
		reply_err(req, (int)n, "write");
	else
		fuse_reply_write(req, (size_t)n);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	e2_release_inode(D.fs, in_ino(ino));
	fuse_reply_err(req, 0);
}

/* fsync(2) of ino for the caller of req: 0 or -errno. */
static int fsync_for(fuse_req_t req, fuse_ino_t ino, bool datasync)
{
	int r;

	/* In a scope with --fsync=order the fsync becomes an ordering point
	 * and returns at once; pgsrv has already recorded it. */
	if (D.srv && pgsrv_fsync_order(D.srv, fuse_req_ctx(req)->pid))
		return 0;
	r = e2_fsync(D.fs, in_ino(ino), datasync);
	if (r < 0)
		say("fsync of inode %u failed: %s", in_ino(ino), strerror(-r));
	return r;
}

static void do_fsync(fuse_req_t req, fuse_ino_t ino, int datasync)
{
	reply_err(req, fsync_for(req, ino, datasync != 0), "fsync");
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	do_fsync(req, ino, datasync);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	do_fsync(req, ino, datasync);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* The kernel invalidates its cached listing whenever it changes the
	 * directory itself, and nothing else can. */
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

/* Directory listing: e2_readdir's callback runs under the file system's
 * lock, so entries are first collected here, and attributes looked up
 * (readdirplus) only after it returns. */
struct dir_ent {
	uint32_t ino;
	mode_t type;
	off_t next;
	size_t name_off;
	uint32_t ref; /* readdirplus: the inode whose lookup reference the
		       * reply carries, 0 for none */
};

struct dir_fill {
	fuse_req_t req;
	bool plus;
	size_t size; /* reply buffer size */
	size_t used; /* bytes the collected entries need in the reply */
	struct dir_ent *ents;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	int err;
};

static int dir_collect(const struct e2_dirent *d, void *arg)
{
	struct dir_fill *f = arg;
	char name[256];
	size_t len = d->name_len < sizeof(name) - 1 ? d->name_len : sizeof(name) - 1;
	size_t need;

	memcpy(name, d->name, len);
	name[len] = '\0';
	need = f->plus ? fuse_add_direntry_plus(f->req, NULL, 0, name, NULL, 0)
		       : fuse_add_direntry(f->req, NULL, 0, name, NULL, 0);
	if (f->used + need > f->size)
		return 1;
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 64;
		struct dir_ent *e = realloc(f->ents, cap * sizeof(*e));

		if (!e)
			goto nomem;
		f->ents = e;
		f->cap = cap;
	}
	if (f->names_len + len + 1 > f->names_cap) {
		size_t cap = f->names_cap ? 2 * f->names_cap : 4096;
		char *s;

		while (cap < f->names_len + len + 1)
			cap *= 2;
		s = realloc(f->names, cap);
		if (!s)
			goto nomem;
		f->names = s;
		f->names_cap = cap;
	}
	memcpy(f->names + f->names_len, name, len + 1);
	f->ents[f->n] = (struct dir_ent){
	    .ino = d->ino, .type = d->type, .next = d->next, .name_off = f->names_len};
	f->names_len += len + 1;
	f->n++;
	f->used += need;
	return 0;
nomem:
	f->err = -ENOMEM;
	return 1;
}

static bool is_dot_or_dotdot(const char *name)
{
	return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct dir_fill f = {.req = req, .plus = plus, .size = size};
	uint32_t dir = in_ino(ino);
	char *buf = NULL;
	size_t pos = 0, i;
	int r;

	r = e2_readdir(D.fs, dir, off, dir_collect, &f);
	if (r == 0)
		r = f.err;
	if (r < 0)
		goto fail;
	buf = malloc(size ? size : 1);
	if (!buf) {
		r = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < f.n; i++) {
		const char *name = f.names + f.ents[i].name_off;
		size_t len;

		if (plus) {
			struct fuse_entry_param e;

			memset(&e, 0, sizeof(e));
			/* "." and ".." carry no attributes (ino 0): the kernel
			 * skips them and takes no lookup reference. */
			if (!is_dot_or_dotdot(name)) {
				struct stat st;

				r = e2_lookup(D.fs, dir, name, &st);
				if (!r && (r = fill_entry(&e, &st)) < 0)
					e2_forget(D.fs, (uint32_t)st.st_ino, 1);
				if (r < 0) {
					/* Gone since the listing: leave it out of
					 * this batch rather than fail the call. */
					if (r == -ENOENT)
						continue;
					if (pos)
						break;
					goto fail;
				}
			} else {
				e.attr.st_ino = f.ents[i].ino;
				e.attr.st_mode = f.ents[i].type;
			}
			len = fuse_add_direntry_plus(req, buf + pos, size - pos, name, &e,
						     f.ents[i].next);
			if (len > size - pos) {
				if (e.ino)
					e2_forget(D.fs, (uint32_t)e.attr.st_ino, 1);
				break;
			}
			f.ents[i].ref = e.ino ? (uint32_t)e.attr.st_ino : 0;
		} else {
			struct stat st;

			memset(&st, 0, sizeof(st));
			st.st_ino = f.ents[i].ino;
			st.st_mode = f.ents[i].type;
			len = fuse_add_direntry(req, buf + pos, size - pos, name, &st,
						f.ents[i].next);
			if (len > size - pos)
				break;
		}
		pos += len;
	}
	/* An undelivered reply (an interrupted request) hands the kernel none
	 * of the lookup references readdirplus took. */
	if (fuse_reply_buf(req, buf, pos) != 0 && plus)
		for (size_t j = 0; j < i && j < f.n; j++)
			if (f.ents[j].ref)
				e2_forget(D.fs, f.ents[j].ref, 1);
	goto out;
fail:
	reply_err(req, r, "readdir");
out:
	free(buf);
	free(f.ents);
	free(f.names);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, true);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	int r = e2_statfs(D.fs, &sv);

	if (r < 0)
		reply_err(req, r, "statfs");
	else
		fuse_reply_statfs(req, &sv);
}

/* Extended attributes live in the ext2 module (e2_getxattr and friends);
 * ACL values cross this boundary in the xattr encoding and are stored in
 * ext2's.  One attribute is virtual: PGSRV_XATTR, whose value is the
 * patchgroup control socket's path, so that pgrun finds the daemon from
 * any path inside the mount.  It is readable on every inode but listed on
 * none (a listed attribute is what cp -a, tar --xattrs and rsync -X copy,
 * and a socket path copied onto another file is wrong there), and setting
 * or removing it is EPERM. */
static bool is_acl(const char *name)
{
	return !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

/* The reply to getxattr or listxattr: r (a length, or -errno) bytes of
 * buf, or only the length when the caller asked for it (size 0). */
static void reply_xattr_value(fuse_req_t req, ssize_t r, const void *buf, size_t size,
			      const char *op)
{
	if (r < 0)
		reply_err(req, (int)r, op);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	uint8_t e[4 + 8 * 64];
	ssize_t r;

	if (!strcmp(name, PGSRV_XATTR)) {
		const char *val;
		size_t len;

		if (!D.srv) {
			fuse_reply_err(req, ENODATA);
			return;
		}
		val = pgsrv_socket_path(D.srv);
		len = strlen(val);
		if (size == 0)
			fuse_reply_xattr(req, len);
		else if (size < len)
			fuse_reply_err(req, ERANGE);
		else
			fuse_reply_buf(req, val, len);
		return;
	}
	if (is_acl(name)) {
		uint8_t x[4 + 8 * 64];

		r = e2_getxattr(D.fs, in_ino(ino), name, e, sizeof(e));
		if (r >= 0)
			r = e2_acl_to_xattr(e, (size_t)r, x, size ? size : 0);
		if (r == -EINVAL)
			r = -EIO;
		reply_xattr_value(req, r, x, size, "getxattr");
		return;
	}
	{
		char *buf = size ? malloc(size) : NULL;

		if (size && !buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		r = e2_getxattr(D.fs, in_ino(ino), name, buf, size);
		reply_xattr_value(req, r, buf, size, "getxattr");
		free(buf);
	}
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	/* trusted.* is for CAP_SYS_ADMIN: listed to root only, as Linux */
	bool trusted = fuse_req_ctx(req)->uid == 0;
	char *buf = size ? malloc(size) : NULL;
	ssize_t r;

	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	r = e2_listxattr(D.fs, in_ino(ino), buf, size, trusted);
	reply_xattr_value(req, r, buf, size, "listxattr");
	free(buf);
}

/* Is the caller in group gid (or root)?  For the set-group-ID rule of an
 * ACL change (Linux's posix_acl_update_mode). */
static bool in_group(fuse_req_t req, gid_t gid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t list[256];
	int n;

	if (ctx->uid == 0 || ctx->gid == gid)
		return true;
	n = fuse_req_getgroups(req, 256, list);
	for (int i = 0; i < n && i < 256; i++)
		if (list[i] == gid)
			return true;
	return false;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct req_op op;
	unsigned f = 0;
	int r;

	if (!strcmp(name, PGSRV_XATTR)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (flags & XATTR_CREATE)
		f |= E2_XATTR_CREATE;
	if (flags & XATTR_REPLACE)
		f |= E2_XATTR_REPLACE;
	enter(req, &op);
	if (is_acl(name)) {
		uint8_t e[4 + 8 * 64];
		ssize_t n = e2_acl_from_xattr(value, size, e, sizeof(e));
		struct stat st;

		if (n == -ERANGE)
			n = -EINVAL;
		if (!strcmp(name, "system.posix_acl_access") &&
		    e2_getattr(D.fs, in_ino(ino), &st) == 0 && !in_group(req, st.st_gid))
			f |= E2_XATTR_KILL_SGID;
		r = n < 0 ? (int)n : e2_setxattr(D.fs, &op.who, in_ino(ino), name, e, (size_t)n, f);
	} else {
		r = e2_setxattr(D.fs, &op.who, in_ino(ino), name, value, size, f);
	}
	leave(&op, "setxattr");
	r = sync_after(req, ino, false, r);
	reply_err(req, r, "setxattr");
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct req_op op;
	int r;

	if (!strcmp(name, PGSRV_XATTR)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	enter(req, &op);
	r = e2_removexattr(D.fs, &op.who, in_ino(ino), name);
	leave(&op, "removexattr");
	r = sync_after(req, ino, false, r);
	reply_err(req, r, "removexattr");
}

/* Set the inode flags (FS_IOC_SETFLAGS) to the int in in_buf. */
static void set_flags(fuse_req_t req, uint32_t e2ino, const void *in_buf, size_t in_bufsz)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct req_op op;
	struct stat st;
	int r, v;

	if (in_bufsz < sizeof(v)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	memcpy(&v, in_buf, sizeof(v));
	r = e2_getattr(D.fs, e2ino, &st);
	/* the owner or root may set them (the kernel has already refused a
	 * caller who is neither the owner nor holds CAP_FOWNER); the
	 * immutable and append-only flags need CAP_LINUX_IMMUTABLE */
	if (!r && ctx->uid != 0 && ctx->uid != st.st_uid)
		r = -EPERM;
	if (!r) {
		bool may_fix = caller_has_cap(ctx->pid, CAP_LINUX_IMMUTABLE);

		enter(req, &op);
		r = e2_setflags(D.fs, &op.who, e2ino, (uint32_t)v, may_fix);
		leave(&op, "ioctl");
	}
	if (r < 0)
		reply_err(req, r, "ioctl");
	else
		fuse_reply_ioctl(req, 0, NULL, 0);
}

/* lsattr(1) and chattr(1): FS_IOC_GETFLAGS and FS_IOC_SETFLAGS, with an int
 * as Linux's ext2 takes it, and FS_IOC_FSGETXATTR, which the kernel asks
 * before it sets flags; nothing else. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		     size_t out_bufsz)
{
	uint32_t e2ino = in_ino(ino), fl;
	struct fsxattr fx;
	int r, v;

	(void)arg;
	(void)fi;
	if (flags & FUSE_IOCTL_COMPAT) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (cmd == FS_IOC_SETFLAGS) {
		set_flags(req, e2ino, in_buf, in_bufsz);
		return;
	}
	if (cmd != FS_IOC_GETFLAGS && cmd != FS_IOC_FSGETXATTR) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (out_bufsz < (cmd == FS_IOC_GETFLAGS ? sizeof(v) : sizeof(fx))) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	r = e2_getflags(D.fs, e2ino, &fl);
	if (r < 0) {
		reply_err(req, r, "ioctl");
		return;
	}
	if (cmd == FS_IOC_GETFLAGS) {
		v = (int)fl;
		fuse_reply_ioctl(req, 0, &v, sizeof(v));
		return;
	}
	memset(&fx, 0, sizeof(fx));
	fx.fsx_xflags =
	    (fl & FS_IMMUTABLE_FL ? FS_XFLAG_IMMUTABLE : 0) |
	    (fl & FS_APPEND_FL ? FS_XFLAG_APPEND : 0) | (fl & FS_SYNC_FL ? FS_XFLAG_SYNC : 0) |
	    (fl & FS_NOATIME_FL ? FS_XFLAG_NOATIME : 0) | (fl & FS_NODUMP_FL ? FS_XFLAG_NODUMP : 0);
	fuse_reply_ioctl(req, 0, &fx, sizeof(fx));
}

/* fallocate: mode 0 (allocate zeroed blocks, grow the size),
 * FALLOC_FL_KEEP_SIZE inside the file, and FALLOC_FL_PUNCH_HOLE (which
 * always comes with KEEP_SIZE).  Every other mode is EOPNOTSUPP: glibc's
 * posix_fallocate and the tools fall back to writing, and the kernel
 * passes the error on as it is.  The set-ID bits and the capability go
 * first, before the module's own checks, as Linux's ext4 drops them
 * before it refuses a preallocation or finds a hole past the end
 * (design.md §4). */
static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct req_op op;
	bool punch = mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE);
	int r;

	if (!punch && (mode & ~FALLOC_FL_KEEP_SIZE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	enter(req, &op);
	r = kill_priv(&op, ino, suid_kill_for(req, ino), E2_SAME_GID);
	if (!r && punch)
		r = e2_punch(D.fs, &op.who, in_ino(ino), off, len);
	else if (!r)
		r = e2_falloc(D.fs, &op.who, in_ino(ino), (mode & FALLOC_FL_KEEP_SIZE) != 0, off,
			      len);
	leave(&op, "fallocate");
	r = sync_after(req, ino, false, r);
	reply_err(req, r, "fallocate");
}

/* SEEK_DATA and SEEK_HOLE from the block map, for cp --sparse and tar's
 * hole detection; the kernel answers the other kinds of lseek itself. */
static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	off_t res;
	int r;

	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	r = e2_seek(D.fs, in_ino(ino), off, whence == SEEK_DATA, &res);
	if (r < 0)
		reply_err(req, r, "lseek");
	else
		fuse_reply_lseek(req, res);
}

/* copy_file_range is left out on purpose: ENOSYS makes the kernel and
 * coreutils fall back to reads and writes, which carry the patchgroup
 * scope of the copying process as any write does. */

static void final_flush(void);

/* FUSE_DESTROY: the kernel sends it when a fuseblk mount is unmounted, and
 * umount(2) returns only after the reply; libfuse also calls this when the
 * session ends without one.  Either way the final flush happens here. */
static void op_destroy(void *userdata)
{
	(void)userdata;
	final_flush();
}

/* The kernel's own flags of a request (io_read()). */
static void note_request(struct fuse_in_header *in, size_t n)
{
	const void *arg = in + 1;
	size_t alen = n - sizeof(*in);

	req_kill_suid = false;
	req_tmpfile = false;
	switch (in->opcode) {
	case FUSE_INIT:
		if (alen >= offsetof(struct fuse_init_in, flags) + sizeof(uint32_t)) {
			const struct fuse_init_in *ii = arg;

			D.init_offers = (ii->flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
			D.init_unique = in->unique;
		}
		break;
	case FUSE_WRITE:
		if (alen >= sizeof(struct fuse_write_in))
			req_kill_suid = ((const struct fuse_write_in *)arg)->write_flags &
					FUSE_WRITE_KILL_SUIDGID;
		break;
	case FUSE_SETATTR:
		if (alen >= sizeof(uint32_t))
			req_kill_suid =
			    ((const struct fuse_setattr_in *)arg)->valid & FATTR_KILL_SUIDGID;
		break;
	case FUSE_OPEN:
		if (alen >= sizeof(struct fuse_open_in))
			req_kill_suid =
			    ((const struct fuse_open_in *)arg)->open_flags & FUSE_OPEN_KILL_SUIDGID;
		break;
	case FUSE_TMPFILE:
		/* open(2) with O_TMPFILE.  libfuse 3.14 knows no such
		 * request: it would answer ENOSYS, and the kernel would stop
		 * asking.  Its arguments and its answer are a CREATE's (with
		 * the name "/"): op_create makes a file with no name for it. */
		in->opcode = FUSE_CREATE;
		req_tmpfile = true;
		break;
	}
}

/* sync(1) and syncfs(2) arrive as FUSE_SYNCFS, which libfuse 3.14's
 * low-level API has no handler for (it would answer ENOSYS, and the kernel
 * would then stop asking).  The session reads through io_read, which
 * answers that request itself, once everything dirty is on disk, and hands
 * every other request to libfuse.  The kernel sends it to fuseblk mounts
 * only (Linux 6.18 does; earlier kernels to virtiofs alone). */
static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	for (;;) {
		ssize_t n = read(fd, buf, len);
		const struct fuse_in_header *in = buf;
		struct fuse_out_header out;
		int r;

		if (n < (ssize_t)sizeof(*in))
			return n;
		if (in->opcode != FUSE_SYNCFS) {
			note_request(buf, (size_t)n);
			return n;
		}
		r = D.fs && !D.flushed ? e2_sync(D.fs) : 0;
		if (r < 0)
			say("sync failed: %s", strerror(-r));
		out = (struct fuse_out_header){
		    .len = sizeof(out), .error = r < 0 ? r : 0, .unique = in->unique};
		if (write(fd, &out, sizeof(out)) < 0) {
			/* ENOENT: the caller was interrupted; nobody waits */
		}
	}
}

/* libfuse 3.14 cannot ask for FUSE_HANDLE_KILLPRIV_V2, so its INIT reply
 * gets the flag here when the kernel offers it.  Without it the kernel
 * asks for security.capability (a GETXATTR) before every write to see
 * whether the write must drop it; with it the file system drops the
 * capability and the set-user-ID bits itself (kill_priv()), and the
 * kernel asks at most once per file until its attributes are next
 * fetched: a third fewer requests for a stream of 4 KiB writes. */
static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct fuse_init_out init;
	struct iovec v[2];

	(void)userdata;
	if (!D.init_unique || count != 2 || iov[0].iov_len < sizeof(*oh) ||
	    oh->unique != D.init_unique)
		return writev(fd, iov, count);
	D.init_unique = 0;
	if (oh->error || !D.init_offers ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags) + sizeof(uint32_t) ||
	    iov[1].iov_len > sizeof(init))
		return writev(fd, iov, count);
	memcpy(&init, iov[1].iov_base, iov[1].iov_len);
	init.flags |= FUSE_HANDLE_KILLPRIV_V2;
	v[0] = iov[0];
	v[1] = (struct iovec){.iov_base = &init, .iov_len = iov[1].iov_len};
	D.killpriv = true;
	return writev(fd, v, 2);
}

static const struct fuse_custom_io io = {.read = io_read, .writev = io_writev};

static const struct fuse_lowlevel_ops ops = {
    .init = op_init,
    .destroy = op_destroy,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .open = op_open,
    .read = op_read,
    .write = op_write,
    /* No flush: close() is not a durability point (fsync is), and there
     * is nothing to do at one.  libfuse answers ENOSYS, after which the
     * kernel stops sending FLUSH, a round trip saved on every close.  It
     * still writes back a shared mapping's dirty pages and reports their
     * errors at close, as before: only the request goes. */
    .release = op_release,
    .fsync = op_fsync,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsyncdir,
    .statfs = op_statfs,
    .create = op_create,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .setxattr = op_setxattr,
    .removexattr = op_removexattr,
    .fallocate = op_fallocate,
    .lseek = op_lseek,
    .ioctl = op_ioctl,
};

/* ---- command line ------------------------------------------------------- */

CLI_VERSION("fstitch-mount");

static const char doc[] =
    "Mount the ext2 file system in SOURCE (an image file, a block device, "
    "LABEL=label, UUID=uuid or an NBD URI) on MOUNTPOINT through FUSE, writing changes "
    "back in dependency order (soft updates; on an image with a journal, through the "
    "journal).\v"
    "Options for -o: consistency=softupdates|none|journal|journal-data (default: journal "
    "with a journal, softupdates without), commit=SECONDS, "
    "rename_order=all|process|file, "
    "errors=continue|remount-ro|panic, "
    "cache=SIZE (K, M, G), "
    "flush_interval=SECONDS, lock_wait=SECONDS, max_threads=N, statsfile=PATH, ro, rw, "
    "nbd_retry=SECONDS, unsafe_no_flush, blkdev, noblkdev, nofail, "
    "allow_other, fsname=NAME, subtype=NAME, "
    "and the kernel's mount flags (nosuid, nodev, noexec, noatime, ...).\n\n"
    "Exit status:\n"
    "  0   mounted (in the foreground: unmounted and flushed)\n"
    "  1   failure while serving, the final flush failed, or errors=panic stopped it\n"
    "  8   SOURCE cannot be opened as an fstitch file system\n"
    "  32  the mount failed\n"
    "  64  bad command line";

enum { OPT_SINGLE = 's', OPT_MAX_THREADS = 256 };

static const struct argp_option options[] = {
    {"options", 'o', "OPTS", 0, "Mount options, comma separated (see below)", 0},
    {"foreground", 'f', NULL, 0, "Stay in the foreground", 0},
    {"debug", 'd', NULL, 0, "Print every FUSE request (implies -f)", 0},
    {"single-thread", OPT_SINGLE, NULL, 0, "Serve one request at a time", 0},
    {"max-threads", OPT_MAX_THREADS, "N", 0, "Serve up to N requests at once (default 2)", 0},
    {NULL, 0, NULL, 0, NULL, 0},
};

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(EXIT_USAGE);
}

static void parse_o(struct args *a, const char *opts)
{
	struct mountopt_error err;
	int r = mountopt_parse(&a->mo, opts, &err);

	if (r == -ENOMEM) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(EXIT_FAIL);
	}
	if (r == 0)
		return;
	switch (err.kind) {
	case MOUNTOPT_UNKNOWN:
		usage_error("unknown option '%s'", err.name);
	case MOUNTOPT_NEED_VALUE:
		usage_error("option '%s' needs a value", err.name);
	case MOUNTOPT_NO_VALUE:
		usage_error("option '%s' takes no value", err.name);
	case MOUNTOPT_TOO_LARGE: {
		char mem[32];

		usage_error("bad value for option '%s': '%s' is more than this machine's "
			    "memory (%s)",
			    err.name, err.value, size_format(err.limit, mem, sizeof(mem)));
	}
	default:
		if (err.expect)
			usage_error("bad value for option '%s': '%s' (it takes %s)", err.name,
				    err.value, err.expect);
		usage_error("bad value for option '%s': '%s'", err.name, err.value);
	}
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct args *a = state->input;

	switch (key) {
	case 'o':
		parse_o(a, arg);
		break;
	case 'f':
		a->foreground = true;
		break;
	case 'd':
		a->mo.debug = true;
		a->foreground = true;
		break;
	case OPT_SINGLE:
		a->single = true;
		break;
	case OPT_MAX_THREADS: {
		uint64_t n;

		if (num_parse(arg, 1, MOUNTOPT_THREADS_MAX, &n) < 0)
			usage_error("bad value for option '--max-threads': '%s' (it "
				    "takes " MOUNTOPT_THREADS_TAKES ")",
				    arg);
		a->mo.max_threads = (unsigned)n; /* as -o max_threads=N */
		break;
	}
	case ARGP_KEY_ARG:
		if (state->arg_num == 0)
			a->source = arg;
		else if (state->arg_num == 1)
			a->mountpoint = arg;
		else
			argp_error(state, "extra operand '%s'", arg);
		break;
	case ARGP_KEY_END:
		if (state->arg_num < 2)
			argp_error(state, "%s",
				   state->arg_num ? "missing MOUNTPOINT"
						  : "missing SOURCE and MOUNTPOINT");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* Invoked by mount(8) as /sbin/mount.fuse.fstitch: the helper convention is
 * "SOURCE DIR [-sfnv] [-N ns] [-o opts] [-t type]", and the helper goes into
 * the background by itself. */
static void parse_helper(struct args *a, int argc, char **argv)
{
	int c;

	opterr = 0;
	while ((c = getopt(argc, argv, "sfnvo:t:N:")) != -1) {
		switch (c) {
		case 'o':
			parse_o(a, optarg);
			break;
		case 'f':
			a->fake = true;
			break;
		case 't':
			if (strcmp(optarg, "fuse.fstitch") != 0 && strcmp(optarg, "fstitch") != 0)
				usage_error("cannot mount type '%s'", optarg);
			break;
		case 'N':
			usage_error("mount namespaces (-N) are not supported");
		case 's': /* sloppy; every option we do not know is an error anyway */
		case 'n': /* no mtab: there is none */
		case 'v':
			break;
		default:
			usage_error("unknown option '-%c'", optopt);
		}
	}
	if (argc - optind != 2)
		usage_error("usage: %s SOURCE MOUNTPOINT [-o OPTS]", argv[0]);
	a->source = argv[optind];
	a->mountpoint = argv[optind + 1];
}

/* ---- starting and stopping ---------------------------------------------- */

/* Go into the background before anything is opened, so that the flusher
 * and socket threads are started in the process that keeps running.  The
 * parent waits until the child reports the mount live (one byte on the
 * pipe) or exits, and takes the child's exit status as its own. */
static int daemon_fork(void)
{
	int fds[2], status;
	pid_t pid;
	char c;

	if (pipe2(fds, O_CLOEXEC) < 0) {
		say("cannot create a pipe: %s", strerror(errno));
		exit(EXIT_FAIL);
	}
	pid = fork();
	if (pid < 0) {
		say("cannot fork: %s", strerror(errno));
		exit(EXIT_FAIL);
	}
	if (pid == 0) {
		close(fds[0]);
		setsid();
		return fds[1];
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) == 1)
		_exit(EXIT_OK);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		_exit(EXIT_FAIL);
	_exit(WEXITSTATUS(status));
}

/* The mount is live: detach from the terminal and release the parent. */
static void daemon_ready(int fd)
{
	int null = open("/dev/null", O_RDWR);

	if (chdir("/") < 0) {
		/* not fatal: only keeps a directory busy */
	}
	openlog(PROG, LOG_PID, LOG_DAEMON);
	D.use_syslog = true;
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	if (write(fd, "", 1) != 1) {
		/* the parent is gone; nobody to tell */
	}
	close(fd);
}

/* What the open found worth saying: a journal it replayed, or a file
 * system that was not unmounted cleanly (soft updates leave only benign
 * damage, but benign only until the file system is used again: fsck
 * should run first). */
static void say_opened(const char *source)
{
	const struct e2_recovery *rec = e2_recovery(D.fs);

	if (rec->replayed)
		say("'%s': journal replayed: %u transactions, %llu blocks written, %llu "
		    "revoked",
		    source, rec->transactions, (unsigned long long)rec->blocks,
		    (unsigned long long)rec->revoked);
	if (rec->orphans_freed || rec->orphans_truncated)
		say("'%s': orphan list processed: %u inodes freed, %u truncated", source,
		    rec->orphans_freed, rec->orphans_truncated);
	if (rec->orphans_dropped)
		say("'%s': orphan list dropped: the file system has errors; run e2fsck", source);
	if (rec->orphans_kept)
		say("'%s': orphan list left as it is (read-only): the files on it keep their "
		    "blocks until a read-write mount frees them",
		    source);
	if (rec->orphan_bad)
		say("warning: '%s': the orphan list names inode %u, which cannot be on it; "
		    "list left for e2fsck",
		    source, rec->orphan_bad);
	if (e2_was_unclean(D.fs))
		say("warning: '%s' was not cleanly unmounted; run e2fsck", source);
}

/* When e2_open finds no ext2 superblock: if libblkid recognises another
 * file system (or a partition table) on path, say which, as fstitch-mkfs
 * does, rather than quote a bad magic number. */
static bool not_ext2(const char *path, char *what, size_t len)
{
	char type[32];

	if (fsprobe_describe(path, what, len, type, sizeof(type)) != 1)
		return false;
	return strncmp(type, "ext", 3) != 0 && strncmp(type, "jbd", 3) != 0;
}

static int open_fs(const struct args *a, const struct source *src)
{
	char what[256];
	struct e2_opts eo = {
	    .consistency = a->mo.consistency,
	    .consistency_auto = !a->mo.has_consistency,
	    .errors = a->mo.errors,
	    .rename_order = a->mo.rename_order,
	    .atime = mountopt_atime(&a->mo),
	    .nodiratime = a->mo.nodiratime,
	    .flush_interval_ms = a->mo.flush_interval_ms,
	    .commit_ms = a->mo.commit_ms,
	    .readonly = a->mo.readonly,
	    .log = log_eio,
	};
	struct claim_conflict why = {.who = CLAIM_NONE};
	uint32_t bs = 0;
	char err[512];
	int r;

	if (src->nbd) {
		r = source_open_nbd(src, &a->mo, &eo, getenv("FSTITCH_RECORD"), &D.fs, err,
				    sizeof(err));
		if (r < 0)
			say("cannot open '%s': %s", a->source, err);
		else
			say_opened(a->source);
		return r;
	}
	/* cache= is in bytes; e2 counts blocks, whose size only the
	 * superblock knows.  If it cannot be read, e2_open explains. */
	if (a->mo.cache_bytes && source_block_size(src->path, &bs) == 0)
		eo.cache_blocks = mountopt_cache_blocks(&a->mo, bs);
	/* The image lock is held until the final flush is over, so an image
	 * still being written back after an unmount is "in use": lock_wait=
	 * lets a mount right after an unmount wait for it instead of failing.
	 * The same file system must not be mounted twice, also not under
	 * another name (a loop device and its image) or by the kernel: the
	 * claim finds those, and holds a block device open exclusively until
	 * the final flush is over, so that e2fsck and mkfs see it in use. */
	for (uint64_t t0 = now_ms();;) {
		if (!D.claim) {
			r = bdev_claim(src->path, CLAIM_KEEP_EXCL, &D.claim, &why);
			if (r == -EBUSY && why.who != CLAIM_FSTITCH)
				break;
			if (r == -EBUSY)
				goto retry;
			/* anything else: e2_open says it in its words */
		}
		/* Tests only: FSTITCH_RECORD=LOG records every block write and
		 * barrier and saves the log at unmount, for crash-state checks. */
		if (getenv("FSTITCH_RECORD"))
			r = reclog_e2_open(src->path, getenv("FSTITCH_RECORD"), &eo, &D.fs);
		else
			r = e2_open(src->path, &eo, &D.fs);
	retry:
		if (r != -EBUSY || now_ms() - t0 >= a->mo.lock_wait_ms)
			break;
		usleep(50 * 1000);
	}
	if (r == 0) {
		say_opened(a->source);
		return 0;
	}
	if (r == -EBUSY && why.who == CLAIM_MOUNTED)
		say("'%s' is mounted%s%s%s: the same file system must not be mounted twice",
		    a->source, why.dev[0] ? " (through " : "", why.dev, why.dev[0] ? ")" : "");
	else if (r == -EBUSY && why.who == CLAIM_BUSY)
		say("'%s' is in use%s%s%s: another program has it open exclusively (a mount, "
		    "mkfs or e2fsck)",
		    a->source, why.dev[0] ? " (through " : "", why.dev, why.dev[0] ? ")" : "");
	else if (r == -EBUSY && why.who == CLAIM_FSTITCH)
		say("'%s' is a loop device on '%s', which is in use by another fstitch-mount "
		    "(mounted, or still writing back after an unmount); %s",
		    a->source, why.image,
		    a->mo.lock_wait_ms ? "gave up waiting" : "lock_wait=SECONDS waits for it");
	else if (r == -EBUSY)
		say("'%s' is in use by another fstitch-mount (mounted, or still writing back after "
		    "an unmount); %s",
		    a->source,
		    a->mo.lock_wait_ms ? "gave up waiting" : "lock_wait=SECONDS waits for it");
	else if (r == -EINVAL && not_ext2(src->path, what, sizeof(what)))
		say("'%s' holds %s, not ext2", a->source, what);
	else if (r == -EOPNOTSUPP || r == -EUCLEAN || r == -EINVAL ||
		 (r == -EROFS && a->mo.readonly && *e2_open_error()))
		say("cannot open '%s': %s", a->source, e2_open_error());
	else if (!a->mo.readonly && (r == -EROFS || r == -EPERM || r == -EACCES))
		/* An immutable image, one on a read-only file system or one
		 * the user may only read can still be mounted read-only. */
		say("cannot open '%s' for writing: %s; -o ro mounts it read-only", a->source,
		    strerror(-r));
	else
		say("cannot open '%s': %s", a->source, strerror(-r));
	return r;
}

static int check_source(const char *spec, bool nofail, struct source *src)
{
	int r = source_resolve(spec, src);

	if (r == 0)
		return 0;
	/* fstab's nofail, as mount(8) means it: a device that is not there
	 * is no error, and nothing is said about it */
	if (nofail && r == -ENOENT)
		return r;
	if (source_is_tag(spec) && r == -ENOENT)
		say("cannot find '%s': no block device has this %.*s", spec,
		    (int)(strchr(spec, '=') - spec), spec);
	else if (r == -EINVAL)
		say("bad source '%s': empty name", spec);
	else if (r == -EISDIR)
		say("cannot open '%s': is a directory, not an image file or block device", spec);
	else if (r == -ENODEV)
		say("cannot open '%s': not an image file or block device", spec);
	else
		say("cannot open '%s': %s", spec, strerror(-r));
	return r;
}

/* Tests only: FSTITCH_TEST_HOLD=DIR holds the daemon before its final
 * flush, so that a test can look at the image and the tools while the
 * flush is due: DIR/held appears, and the flush starts once the test has
 * written to the FIFO DIR/release and closed it. */
static void test_hold(void)
{
	const char *dir = getenv("FSTITCH_TEST_HOLD");
	char path[PATH_MAX], c;
	int fd;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/held", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "%s/release", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd >= 0 && read(fd, &c, 1) > 0)
		;
	if (fd >= 0)
		close(fd);
}

/* Whether to make a fuseblk mount (see attach_blkdev) when the user chose
 * neither blkdev nor noblkdev: whenever it can work.  fusermount3 lets only
 * root make one, an NBD export has no device to name, and fuseblk shows the
 * device as the source, so a chosen fsname= keeps the plain kind. */
static bool want_blkdev(const struct args *a, const struct source *src)
{
	struct stat st;

	if (a->mo.has_blkdev)
		return a->mo.blkdev;
	return geteuid() == 0 && !a->mo.has_fsname && !src->nbd && stat(src->path, &st) == 0 &&
	       (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode));
}

/* blkdev: the mount is a fuseblk one, on the block device itself or on a
 * loop device attached to the image file (cleared by the kernel once the
 * mount is gone), so that the kernel sends FUSE_DESTROY and FUSE_SYNCFS.
 * The kernel claims the device exclusively at the mount: ours must go.
 * The daemon still reads and writes the source directly.  When blkdev is
 * only the default and no loop device can be had (no loop driver, none
 * free), the mount is a plain one, and says so. */
static int attach_blkdev(struct args *a, const struct source *src, int *loop_fd, char **fopts)
{
	char dev[64];
	const char *path = src->path;
	struct stat st;
	int r;

	if (src->nbd || stat(src->path, &st) < 0 ||
	    (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))) {
		say("option 'blkdev' needs an image file or a block device");
		return -1;
	}
	if (S_ISREG(st.st_mode)) {
		r = bdev_loop_attach(src->path, a->mo.readonly, loop_fd, dev, sizeof(dev));
		if (r < 0 && a->mo.has_blkdev) {
			say("cannot attach a loop device to '%s' (option 'blkdev'): %s", a->source,
			    strerror(-r));
			return -1;
		}
		if (r < 0) {
			say("warning: cannot attach a loop device to '%s': %s; mounted without "
			    "blkdev, so an unmount returns before the final flush",
			    a->source, strerror(-r));
			a->mo.blkdev = false;
		} else {
			path = dev;
		}
	} else {
		bdev_claim_drop_excl(D.claim);
	}
	free(*fopts);
	*fopts = NULL;
	r = mountopt_fuse_string(&a->mo, path, fopts);
	if (r < 0) {
		say("%s", strerror(-r));
		return -1;
	}
	return 0;
}

/* Stop the patchgroup server, write the statistics and everything dirty in
 * dependency order with barriers, mark the file system clean and let the
 * source go.  Called once: from the FUSE_DESTROY request when the kernel
 * sends one (a fuseblk mount, whose unmount waits for the reply), or when
 * the session ends. */
static int statsfile_write(const char *path, const struct insp_snap *snap);

static void final_stats(struct cache *c, void *arg)
{
	struct insp_query q = {.view = INSP_SUMMARY};
	struct insp_snap *snap = NULL;
	int r;

	(void)arg;
	r = inspect_take(c, NULL, &q, &snap);
	if (r == 0) {
		snap->sum.have_groups = D.had_srv;
		r = statsfile_write(D.stats, snap);
		inspect_free(snap);
	}
	if (r < 0) {
		say("cannot write the statistics to '%s': %s", D.stats, strerror(-r));
		D.stats_failed = true;
	}
}

static void final_flush(void)
{
	int r;

	if (D.flushed || !D.fs)
		return;
	D.flushed = true;
	if (D.srv) {
		pgsrv_destroy(D.srv);
		D.srv = NULL;
	}
	caller_tab_destroy(D.callers);
	D.callers = NULL;
	test_hold();
	if (D.lost)
		say("%llu changes lost their patchgroup ordering during this mount",
		    (unsigned long long)D.lost);
	/* Everything dirty goes to disk in dependency order, with barriers;
	 * the statistics are taken after the last of them (the journal's
	 * final checkpoint included), and the file is there before the image
	 * lock goes, so that whoever waits for the lock finds it. */
	r = e2_close_then(D.fs, D.stats ? final_stats : NULL, NULL);
	D.fs = NULL;
	bdev_claim_release(D.claim);
	D.claim = NULL;
	if (r < 0) {
		say("final flush of '%s' failed: %s; the image may be missing recent changes",
		    D.source, strerror(-r));
		D.flush_failed = true;
	}
}

/* A mount whose daemon died answers everything with ENOTCONN until it is
 * unmounted.  Mounting on top of it would hide it, and the image it served
 * was left as a crash leaves it: say how to recover instead. */
static void dead_mount(const struct args *a, const char *mnt)
{
	char type[64] = "", src[PATH_MAX] = "", back[PATH_MAX];
	const char *image = a->source;
	struct stat st;

	if (mountinfo_find(NULL, mnt, type, sizeof(type), src, sizeof(src)) == 1 &&
	    strncmp(type, "fuse", 4) == 0 && src[0] == '/') {
		image = src;
		/* a blkdev mount of an image names its loop device */
		if (stat(src, &st) == 0 && S_ISBLK(st.st_mode) &&
		    bdev_loop_backing(st.st_rdev, back, sizeof(back)) == 0)
			image = back;
	}
	say("'%s' is a dead mount: the daemon that served '%s' is gone (%s)", a->mountpoint, image,
	    strerror(ENOTCONN));
	say("to recover, unmount it (fusermount3 -u %s, or umount %s as root), check the "
	    "image (e2fsck -fy %s), then mount again",
	    mnt, mnt, image);
}

/* The mount point as an absolute path in *out (malloc'ed), or -1 after a
 * message: it must be a directory, and not a dead mount. */
static int check_mountpoint(const struct args *a, char **out)
{
	struct statfs sf;
	struct stat st;
	char *mnt = realpath(a->mountpoint, NULL), *cwd;

	if (!mnt && errno == ENOTCONN) {
		/* realpath could not finish: name it for the message */
		cwd = a->mountpoint[0] == '/' ? NULL : getcwd(NULL, 0);
		if (asprintf(&mnt, "%s%s%s", cwd ? cwd : "", cwd ? "/" : "", a->mountpoint) < 0)
			mnt = NULL;
		free(cwd);
		dead_mount(a, mnt ? mnt : a->mountpoint);
		free(mnt);
		return -1;
	}
	if (!mnt || stat(mnt, &st) < 0 || (S_ISDIR(st.st_mode) && statfs(mnt, &sf) < 0)) {
		/* statfs always reaches the daemon, where stat may be answered
		 * from the kernel's cache */
		if (errno == ENOTCONN)
			dead_mount(a, mnt);
		else
			say("bad mount point '%s': %s", a->mountpoint, strerror(errno));
		free(mnt);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		say("bad mount point '%s': %s", a->mountpoint, strerror(ENOTDIR));
		free(mnt);
		return -1;
	}
	*out = mnt;
	return 0;
}

/* statsfile=: the path made absolute now (the background daemon changes
 * to /), and its directory checked, so that a typo fails the mount rather
 * than the last step of a long run.  *out is malloc'ed. */
static int statsfile_path(const char *path, char **out)
{
	char *abs = NULL, *cwd, *cut, c;
	int r = 0;

	if (path[0] == '/') {
		abs = strdup(path);
	} else {
		cwd = getcwd(NULL, 0);
		if (cwd && asprintf(&abs, "%s/%s", cwd, path) < 0)
			abs = NULL;
		free(cwd);
	}
	if (!abs)
		return -ENOMEM;
	/* the directory: cut at the last slash (after it for "/f") */
	cut = strrchr(abs, '/');
	if (cut == abs)
		cut++;
	c = *cut;
	*cut = '\0';
	if (access(abs, W_OK | X_OK) < 0)
		r = -errno;
	*cut = c;
	if (r < 0) {
		free(abs);
		return r;
	}
	*out = abs;
	return 0;
}

/* Write the snapshot as fstitch-stat --json prints it: to a temporary name
 * first and renamed, so that a reader sees the whole file or none. */
static int statsfile_write(const char *path, const struct insp_snap *snap)
{
	size_t len = strlen(path) + 32;
	char *tmp = malloc(len);
	FILE *f;
	int r = 0;

	if (!tmp)
		return -ENOMEM;
	snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
	f = fopen(tmp, "w");
	if (!f) {
		r = -errno;
		goto out;
	}
	if (statfmt_json(f, snap) < 0)
		r = -EIO;
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		r = r ? r : -errno;
	if (fclose(f) != 0 && !r)
		r = -errno;
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
out:
	free(tmp);
	return r;
}

int main(int argc, char **argv)
{
	static struct argp argp = {options, parse_opt, "SOURCE MOUNTPOINT", doc, NULL, NULL, NULL};
	struct fuse_args fargs = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	struct fuse_loop_config *cfg = NULL;
	struct source src = {.path = NULL};
	struct args a = {.source = NULL};
	char *mnt = NULL, *fopts = NULL, *base, *stats = NULL;
	struct ctl_access acc = {.owner = 0};
	int status = EXIT_FAIL, ready_fd = -1, loop_fd = -1, r;

	mountopt_init(&a.mo);
	argp_err_exit_status = EXIT_USAGE;
	base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	/* getopt names the program by argv[0]: make it "fstitch-mount:",
	 * not the path it was run by */
	argv[0] = base;
	/* mount(8) always passes SOURCE and DIR; alone, --version and --help
	 * are a person asking, and get the command's own answers. */
	if (strncmp(base, "mount.", 6) == 0 &&
	    !(argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0 ||
			    strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "--usage") == 0)))
		parse_helper(&a, argc, argv);
	else
		argp_parse(&argp, argc, argv, 0, NULL, &a);
	if (a.mo.debug)
		a.foreground = true;
	D.source = a.source;
	/* fusermount3 refuses blkdev to anyone but root (only the user's
	 * own choice is set yet: the default comes once the source is known) */
	if (a.mo.blkdev && geteuid() != 0)
		usage_error("option 'blkdev' needs root");
	if (a.mo.blkdev && a.mo.has_fsname)
		usage_error("option 'fsname' cannot be chosen with 'blkdev': it is the device");

	r = check_source(a.source, a.mo.nofail, &src);
	if (r < 0) {
		status = a.mo.nofail && r == -ENOENT ? EXIT_OK : EXIT_OPEN;
		goto out;
	}
	a.mo.blkdev = want_blkdev(&a, &src);
	/* The mount point is checked before the image is opened, so that a
	 * typo leaves the image untouched. */
	if (check_mountpoint(&a, &mnt) < 0) {
		status = EXIT_MOUNT;
		goto out;
	}
	if (a.mo.statsfile) {
		r = statsfile_path(a.mo.statsfile, &stats);
		/* A file left by an earlier run must not pass for this one's. */
		D.stats = stats;
		if (r == 0 && !a.fake && unlink(stats) < 0 && errno != ENOENT)
			r = -errno;
		if (r < 0) {
			fprintf(stderr, PROG ": bad value for option 'statsfile': '%s': %s\n",
				a.mo.statsfile, strerror(-r));
			status = EXIT_USAGE;
			goto out;
		}
	}
	D.fault_lost = getenv("FSTITCH_FAULT_PGLOST") != NULL;
	D.sync_all = a.mo.sync;
	D.dirsync = a.mo.sync || a.mo.dirsync;
	r = mountopt_fuse_string(&a.mo, src.path, &fopts);
	if (r < 0) {
		say("%s", strerror(-r));
		goto out;
	}
	if (a.fake) {
		status = EXIT_OK;
		goto out;
	}
	if (!a.foreground)
		ready_fd = daemon_fork();

	if (open_fs(&a, &src) < 0) {
		status = EXIT_OPEN;
		goto out;
	}
	if (a.mo.blkdev && attach_blkdev(&a, &src, &loop_fd, &fopts) < 0) {
		status = EXIT_MOUNT;
		goto out_close;
	}
	if (fuse_opt_add_arg(&fargs, PROG) || fuse_opt_add_arg(&fargs, "-o") ||
	    fuse_opt_add_arg(&fargs, fopts) || (a.mo.debug && fuse_opt_add_arg(&fargs, "-d"))) {
		say("out of memory");
		goto out_close;
	}
	se = fuse_session_new(&fargs, &ops, sizeof(ops), NULL);
	if (!se) {
		say("cannot start a FUSE session (options: %s)", fopts);
		status = EXIT_MOUNT;
		goto out_close;
	}
	if (fuse_set_signal_handlers(se) != 0) {
		say("cannot set signal handlers");
		goto out_destroy;
	}
	D.se = se;
	if (fuse_session_mount(se, mnt) != 0) {
		say("cannot mount on '%s'", a.mountpoint);
		status = EXIT_MOUNT;
		goto out_signals;
	}
	/* the kernel holds the loop device now; it goes when unmounted */
	if (loop_fd >= 0) {
		close(loop_fd);
		loop_fd = -1;
	}
	if (fuse_session_custom_io(se, &io, fuse_session_fd(se)) != 0) {
		say("cannot set up the FUSE device");
		goto out_unmount;
	}
	/* Without the table every request counts as one of no known
	 * process, which orders as rename_order=all does. */
	if (a.mo.rename_order == E2_RENAME_ORDER_PROCESS && a.mo.consistency != CONSISTENCY_NONE &&
	    !a.mo.readonly && caller_tab_create(NULL, &D.callers) < 0) {
		D.callers = NULL;
		say("rename_order=process: out of memory; ordering as rename_order=all");
	}
	/* Patchgroups are an addition: the file system works without them.
	 * Their socket follows the mount's own rule for who may use it. */
	acc.owner = getuid();
	acc.allow_root = a.mo.allow_root;
	acc.allow_other = a.mo.allow_other;
	r = pgsrv_create(D.fs, mnt, NULL, &acc, &D.srv);
	D.had_srv = r == 0;
	if (r < 0) {
		D.srv = NULL;
		if (r != -ENOSYS)
			say("patchgroups disabled: cannot start the control socket: %s",
			    strerror(-r));
	}
	if (ready_fd >= 0)
		daemon_ready(ready_fd);

	if (a.single) {
		r = fuse_session_loop(se);
	} else {
		cfg = fuse_loop_cfg_create();
		if (!cfg) {
			say("out of memory");
			r = -ENOMEM;
		} else {
			/* -o max_threads= (fstab gives only -o options) or
			 * --max-threads, the last one given */
			fuse_loop_cfg_set_max_threads(cfg, a.mo.max_threads ? a.mo.max_threads
									    : MAX_THREADS);
			fuse_loop_cfg_set_clone_fd(cfg, 0);
			r = fuse_session_loop_mt(se, cfg);
			fuse_loop_cfg_destroy(cfg);
		}
	}
	/* A positive value is the signal that ended the loop: a normal stop
	 * (unless errors=panic sent it). */
	status = r < 0 || __atomic_load_n(&D.panicked, __ATOMIC_RELAXED) ? EXIT_FAIL : EXIT_OK;
	if (r < 0)
		say("serving requests failed: %s", strerror(-r));
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
out_close:
	final_flush();
	if (D.flush_failed && status == EXIT_OK)
		status = EXIT_FAIL;
	if (D.stats_failed && status == EXIT_OK)
		status = EXIT_FAIL;
out:
	if (loop_fd >= 0)
		close(loop_fd);
	bdev_claim_release(D.claim);
	fuse_opt_free_args(&fargs);
	free(fopts);
	free(mnt);
	free(stats);
	source_free(&src);
	mountopt_free(&a.mo);
	return status;
}
