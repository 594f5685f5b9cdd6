/* The daemon side of patchgroups: the groups themselves, caller scopes, and
 * the control socket that pgrun, pgdepend, fstitch-stat and the C API talk
 * to (design.md §5).  The FUSE glue uses only these calls.
 */
#ifndef FSTITCH_PGSRV_H
#define FSTITCH_PGSRV_H

#include <stdbool.h>
#include <sys/types.h>
#include "engine/pgeng.h"
#include "ext2/e2.h"
#include "proto/ctl.h"

struct pgsrv;

/* Start serving patchgroups for fs mounted at mountpoint.  The control
 * socket is created at sockpath, or at a default path derived from the
 * mount when sockpath is NULL, and a thread answers it.  Clients find it
 * from any path inside the mount through pgsrv_xattr_name().  acc says who
 * may connect, as the mount's allow_other and allow_root do for the mount
 * itself (NULL: only the effective user; see ctl_server_start()).  An
 * empty sockpath ("") makes no socket: requests then come only through
 * pgsrv_request() (tests and fuzzers). */
int pgsrv_create(struct e2fs *fs, const char *mountpoint, const char *sockpath,
		 const struct ctl_access *acc, struct pgsrv **out);
/* Stop the socket thread, disengage and close every group, free. */
void pgsrv_destroy(struct pgsrv *srv);

/* Answer one control message of len bytes as if it came on the socket
 * from peer (see ctl_dispatch()); a payload the request produced is
 * dropped.  May block as the socket's handler does (CTL_SYNC). */
struct ctl_peer;
struct ctl_rep;
void pgsrv_request(struct pgsrv *srv, const struct ctl_peer *peer, const void *msg, size_t len,
		   struct ctl_rep *rep);

/* The FUSE glue brackets every request that may change the file system:
 * enter starts op (caller storage, one per request in flight) under the
 * scope of process `pid` (the FUSE caller's thread id; 0 means no process,
 * no group; srv may be NULL), pgsrv_scope(op) is the patch scope to give
 * every ext2 call of the request (NULL when the process is in no group),
 * and leave ends op.  leave returns -EIO if a change made meanwhile could
 * not be ordered after its groups (the engine refused an edge; should
 * never happen): the daemon should log it.  The count is also in the
 * engine's pg_summary.lost.  enter returns whether the process orders
 * its changes with its groups alone (CTL_ORDER_GROUPS): the ext2 calls
 * are then told so (e2_caller.group_order). */
bool pgsrv_enter(struct pgsrv *srv, pid_t pid, struct pg_op *op);
struct patch_scope *pgsrv_scope(struct pg_op *op);
int pgsrv_leave(struct pgsrv *srv, struct pg_op *op);

/* Called on fsync/fsyncdir from pid: returns true if pid's scope has the
 * fsync=order policy, in which case the fsync has been turned into an
 * ordering point and the glue must reply 0 at once without syncing. */
bool pgsrv_fsync_order(struct pgsrv *srv, pid_t pid);

/* The extended attribute, readable on every path in the mount, whose value
 * is the control socket's path: "fstitch.control" in the user namespace. */
#define PGSRV_XATTR CTL_XATTR
const char *pgsrv_socket_path(const struct pgsrv *srv);

#endif
