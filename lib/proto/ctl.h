/* The control protocol between fstitch-mount and its clients (pgrun,
 * pgdepend, the C API, fstitch-stat).
 *
 * Transport: a unix SOCK_SEQPACKET socket, so every message arrives whole.
 * Each request is one struct ctl_req; each gets exactly one struct ctl_rep.
 * Both start with CTL_MAGIC and a version.  A server serves every version
 * from CTL_VERSION_MIN to CTL_VERSION: it answers in the request's version,
 * with the reply as long as that version's (ctl_rep_size()), so a program
 * built against an older library keeps working with a newer daemon.  A
 * request of any other version gets EPROTO in a reply of the server's own
 * version, which says which one it speaks.  A client speaks CTL_VERSION
 * only and refuses a reply of any other version or length with EPROTO: a
 * newer library refuses an older daemon, clearly, rather than guessing.
 * All integers are in host byte order: the socket never leaves the machine.
 *
 * Version 2 added the reply's summary.requests and CTL_SW_AUTOCLOSE; a
 * version 1 request cannot ask for the flag (EINVAL, as a version 1
 * daemon answers).  CTL_ORDER_POLICY and CTL_SCOPE_OWN came later in
 * version 2: a daemon older than them answers EOPNOTSUPP, as to any
 * request it does not know.
 *
 * Who is asking comes from the kernel (SO_PEERCRED: uid, gid and the pid of
 * the process that connected), never from the message.  A client that forks
 * must therefore connect again from the child.
 */
#ifndef FSTITCH_CTL_H
#define FSTITCH_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#define CTL_MAGIC 0x46535443u /* "FSTC" */
/* The virtual extended attribute every path of a mount carries: its value
 * is the path of the mount's control socket.  This is how a client finds
 * its daemon from any path inside the mount. */
#define CTL_XATTR	"user.fstitch.control"
#define CTL_VERSION	2
#define CTL_VERSION_MIN 1

enum ctl_op {
	CTL_HELLO = 1,	  /* nothing: checks the version */
	CTL_CREATE,	  /* -> id */
	CTL_DEPEND,	  /* a: before, b: after */
	CTL_ENGAGE,	  /* a: group, for the calling process */
	CTL_DISENGAGE,	  /* a: group, for the calling process */
	CTL_SYNC,	  /* a: group; the reply waits for durability */
	CTL_CLOSE,	  /* a: group */
	CTL_INFO,	  /* a: group -> info */
	CTL_FSYNC_POLICY, /* a: enum ctl_fsync, for the calling process */
	CTL_SUMMARY,	  /* -> summary (for fstitch-stat) */
	CTL_NEXT,	  /* a: id -> info of the known group with the smallest
			   * id >= a (ENOENT past the last): lists groups */
	CTL_STATS,	  /* a: view, b: block, flags: limit -> rep.id bytes of
			   * payload follow the reply (fstitch-stat, inspect.h) */
	CTL_SWITCH,	  /* a: group to leave (0: none), b: before of the new
			   * group (0: none), flags: enum ctl_switch -> id (0:
			   * none created).  Several calls in one round trip
			   * (added late in version 1: a daemon older than it
			   * answers EOPNOTSUPP). */
	CTL_ORDER_POLICY, /* a: enum ctl_order, for the calling process (added
			   * late in version 2: an older daemon answers
			   * EOPNOTSUPP) */
	CTL_SCOPE_OWN,	  /* nothing: the calling process's scope becomes
			   * its own, a copy of the one it inherits (sent by
			   * a forked child; added late in version 2) */
	CTL_OP_MAX
};

enum ctl_fsync {
	CTL_FSYNC_KEEP = 0,  /* fsync is a real fsync */
	CTL_FSYNC_ORDER = 1, /* fsync is an ordering point */
};

enum ctl_order {
	CTL_ORDER_MOUNT = 0,  /* the mount's rename_order */
	CTL_ORDER_GROUPS = 1, /* the caller's patchgroups alone (and
			       * rename_order=file) */
};

/* CTL_SWITCH, in this order: disengage a from the caller and close it
 * (when a > 0); create a group (CREATE); make it depend on b (b > 0);
 * engage it (ENGAGE), so that it is closed when the caller's engagement of
 * it ends, by a disengage or by the caller's exit (AUTOCLOSE, version 2);
 * set the caller's fsync policy to order (ORDER). */
enum ctl_switch {
	CTL_SW_CREATE = 1 << 0,
	CTL_SW_ENGAGE = 1 << 1,
	CTL_SW_ORDER = 1 << 2,
	CTL_SW_ALL_V1 = (1 << 3) - 1,
	CTL_SW_AUTOCLOSE = 1 << 3,
	CTL_SW_ALL = (1 << 4) - 1,
};

struct ctl_req {
	uint32_t magic;
	uint16_t version;
	uint16_t op;
	uint32_t flags;
	uint32_t reserved;
	int64_t a, b;
};

/* Same bits as enum pg_state. */
struct ctl_info {
	int64_t id;
	uint32_t owner;
	uint32_t state;
	uint32_t engaged;
	uint32_t nbefores;
	uint32_t nafters;
	uint32_t reserved;
	uint64_t nchanges;
};

struct ctl_summary {
	uint64_t groups;	/* known: open, or closed and not yet durable */
	uint64_t closed;	/* of which closed */
	uint64_t sealed;	/* of which sealed (have afters) */
	uint64_t engaged;	/* of which engaged by some process */
	uint64_t scopes;	/* processes with a scope of their own */
	int64_t last_id;	/* the highest id handed out (0: none yet) */
	uint64_t fsync_ordered; /* fsyncs turned into ordering points */
	/* Version 2 on (the last field, so that a version 1 reply is this
	 * struct cut short): the requests the daemon answered before this
	 * one, from every client (tests count a client's round trips). */
	uint64_t requests;
};

struct ctl_rep {
	uint32_t magic;
	uint16_t version;
	uint16_t op;
	int32_t err; /* 0 or a positive errno */
	uint32_t reserved;
	int64_t id;		    /* CTL_CREATE */
	struct ctl_info info;	    /* CTL_INFO, CTL_NEXT */
	struct ctl_summary summary; /* CTL_SUMMARY */
};

/* The length of a reply of version v (CTL_VERSION_MIN..CTL_VERSION). */
static inline size_t ctl_rep_size(unsigned v)
{
	return v >= 2 ? sizeof(struct ctl_rep) : sizeof(struct ctl_rep) - sizeof(uint64_t);
}

struct ctl_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
};

/* Replies with a payload (CTL_STATS): the reply's id gives the payload's
 * length, and its bytes follow in messages of at most CTL_PAYLOAD_CHUNK
 * bytes each.  A reply with err set carries none. */
#define CTL_PAYLOAD_CHUNK 65536

/* What a handler attaches to its reply: a malloc'd buffer that the server
 * sends after the reply and then frees (also when it cannot be sent, or
 * when the reply carries an error). */
struct ctl_payload {
	void *buf;
	size_t len;
};

/* Fill in rep (already zeroed, magic/version/op set) for req from peer, and
 * optionally pl (empty on entry).  May block (CTL_SYNC). */
typedef void (*ctl_handler)(void *arg, const struct ctl_peer *peer, const struct ctl_req *req,
			    struct ctl_rep *rep, struct ctl_payload *pl);

struct ctl_server;

/* Who may talk to a server: FUSE's rule for the mount it serves.  The
 * owner (the user who mounted) always; root too with allow_root; anyone
 * with allow_other, each request then checked against the peer's uid by
 * the handler.  Anyone else gets EACCES for every request. */
struct ctl_access {
	uid_t owner;
	bool allow_root;
	bool allow_other;
};

/* True if peer may use a server with access acc. */
bool ctl_access_allows(const struct ctl_access *acc, const struct ctl_peer *peer);

/* Listen on path (a stale socket there is replaced; any other file is left
 * alone and gives -EEXIST).  acc says who may connect (NULL: the effective
 * user only); the socket's mode is 0666 with allow_other and 0600
 * otherwise, and every connection's peer is checked as well (root passes
 * the mode).  Each connection is answered by a thread of its own while it
 * lasts; a few threads are kept between connections, so that a client that
 * connects, asks once and goes (pgrun) costs no thread's start and end. */
int ctl_server_start(const char *path, const struct ctl_access *acc, ctl_handler fn, void *arg,
		     struct ctl_server **out);
/* For tests: how many threads the server has started so far, and how many
 * now wait for a connection. */
void ctl_server_threads(struct ctl_server *s, size_t *started, size_t *idle);
/* Stop accepting, close every connection, wait for the threads (a request
 * being answered finishes first), remove the socket file. */
void ctl_server_stop(struct ctl_server *s);

/* Both sides: a unix socket address for path.  0 or -ENAMETOOLONG. */
int ctl_addr(const char *path, struct sockaddr_un *sa);

/* Decode one received message of len bytes from peer and answer it into
 * rep (zeroed first) and pl (emptied first): a message that is not exactly
 * one struct ctl_req of CTL_MAGIC and a version the server serves gets
 * EPROTO without reaching fn; otherwise fn fills them, and rep->version is
 * the request's (send ctl_rep_size(rep->version) bytes of it).  The server's connection threads
 * use it for every message; it needs no socket, so tests and fuzzers
 * drive handlers with it.  The caller frees pl->buf. */
void ctl_dispatch(ctl_handler fn, void *arg, const struct ctl_peer *peer, const void *msg,
		  size_t len, struct ctl_rep *rep, struct ctl_payload *pl);

/* Client side.  The control socket for where: where itself if it is a
 * socket, else the value of CTL_XATTR on where (any path in an fstitch
 * mount).  buf gets the path.  0, -ENXIO if where is in no fstitch mount,
 * -ECONNRESET if where is in a mount whose daemon died (the kernel's
 * ENOTCONN), -ENAMETOOLONG, or -errno of stat/getxattr (e.g. -ENOENT). */
int ctl_find_socket(const char *where, char *buf, size_t size);
/* Connect to path: the fd is close-on-exec and never 0, 1 or 2, so that a
 * process started with one of those closed does not write its output into
 * the socket. */
int ctl_connect(const char *path, int *fd);
/* One request, one reply.  Returns 0 (rep filled, rep->err may be set),
 * -EPROTO for a reply of another version, or -errno of the transport. */
int ctl_call(int fd, const struct ctl_req *req, struct ctl_rep *rep);
/* ctl_call, then receive the rep->id bytes of payload that follow a reply
 * without err into a malloc'd *buf (NULL for none; the caller frees it).
 * -EMSGSIZE for a length below 0 or above max, -ECONNRESET if the daemon
 * goes away in between; after an error the connection is out of step and
 * must be closed. */
int ctl_call_payload(int fd, const struct ctl_req *req, struct ctl_rep *rep, void **buf,
		     size_t *len, size_t max);

#endif
