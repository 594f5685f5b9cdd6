/* Which process a FUSE request comes from, for -o rename_order=process.
 *
 * FUSE names the caller by thread id.  A process is named by its thread
 * group id (Tgid in /proc/TID/status) and the start time of that group
 * (field 22 of /proc/TGID/stat), so that a pid reused by a later process
 * never names the earlier one.  Answers are cached per thread id, each with
 * a pidfd of the thread itself: while that pidfd says the thread lives, its
 * id cannot have been given to another thread, so a hit costs one poll and
 * no /proc read.  A miss on a thread group leader reads its stat alone;
 * any other thread costs its status and its leader's stat.  Without pidfds
 * for threads (kernels before 6.9, or a root other than the real /proc),
 * every call reads /proc and checks that the thread's start time did not
 * change meanwhile.
 *
 * Locking: the table has its own lock, taken alone; every call may be made
 * from any thread.
 */
#ifndef FSTITCH_CALLER_H
#define FSTITCH_CALLER_H

#include <stddef.h>
#include "pg/scope.h"

struct caller_tab;

/* root NULL means "/proc".  -ENOMEM. */
int caller_tab_create(const char *root, struct caller_tab **out);
void caller_tab_destroy(struct caller_tab *t);
/* The process of thread tid: 1 and *key, or 0 when it is not known (tid 0,
 * as the kernel sends for requests no process made, or a thread that
 * ended before it could be named). */
int caller_resolve(struct caller_tab *t, pid_t tid, struct scope_key *key);
/* How many /proc files caller_resolve() has read (for tests). */
size_t caller_proc_reads(struct caller_tab *t);

#endif
