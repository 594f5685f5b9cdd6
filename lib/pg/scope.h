/* Which process a file-system request comes from, and which patchgroup
 * scope applies to it (design.md §5, "Scope").
 *
 * FUSE names the caller by thread id.  A scope belongs to a process, named
 * by its pid AND its start time (field 22 of /proc/PID/stat), so that a
 * reused pid is never taken for the process that had it before.  A process
 * without a scope of its own inherits the scope of its nearest ancestor that
 * has one: resolution walks the PPid chain, one /proc/PID/stat a step, and
 * stops at the first scope that applies; a parent that owns a scope and
 * still runs (its pidfd says so) is known without a read.  Answers are
 * cached per thread (thread id and start time) until the set of scopes
 * changes.
 *
 * The table holds an opaque pointer per scope; it never looks inside.  With
 * watching on, a thread waits on an epoll set of every scope's pidfd and
 * reports each exit through the exit callback (which normally calls
 * scope_del()); adding and deleting a scope do not wake it.
 *
 * Locking: the table has its own lock; every call may be made from any
 * thread.  The exit callback is called with no lock held.
 */
#ifndef FSTITCH_SCOPE_H
#define FSTITCH_SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct scope_tab;

struct scope_key {
	pid_t pid;
	uint64_t start; /* clock ticks since boot */
};

/* Read /proc/PID/stat under root ("/proc" normally): parent pid and start
 * time.  -ENOENT/-ESRCH when the process is gone, -EPROTO when the file
 * cannot be parsed. */
int proc_stat(const char *root, pid_t pid, pid_t *ppid, uint64_t *start);
/* The thread group (process) of thread tid, from /proc/TID/status. */
int proc_tgid(const char *root, pid_t tid, pid_t *tgid);
/* A pidfd for thread tid (not only a thread group leader), or -1 with
 * errno set.  It pins the thread: its tid names no other thread while
 * pidfd_alive() says it still runs. */
int pidfd_open_thread(pid_t tid);
/* Whether the thread behind a pidfd still runs. */
bool pidfd_alive(int fd);

typedef void (*scope_exit_fn)(void *arg, struct scope_key key);

/* root NULL means "/proc".  With watch, exits are reported through fn from
 * a thread of the table's own. */
int scope_tab_create(const char *root, bool watch, scope_exit_fn fn, void *arg,
		     struct scope_tab **out);
/* Stop the watcher and free the table (not the data pointers). */
void scope_tab_destroy(struct scope_tab *t);

/* Register data as the scope of process key, made now.  -EEXIST if it has
 * one, -ESRCH if the process is gone (or its pid now names another
 * process).  A scope applies to its process and to descendants started at
 * or after the moment it was made (`since`, in the clock ticks of
 * /proc/PID/stat's start time; scope_add_since() is for tests). */
int scope_add(struct scope_tab *t, struct scope_key key, void *data);
int scope_add_since(struct scope_tab *t, struct scope_key key, uint64_t since, void *data);
/* The data of process key, or NULL. */
void *scope_get(struct scope_tab *t, struct scope_key key);
/* Unregister; returns the data, or NULL if there was none. */
void *scope_del(struct scope_tab *t, struct scope_key key);
size_t scope_count(struct scope_tab *t);
/* Every registered key, for teardown: calls fn for each. */
void scope_each(struct scope_tab *t, void (*fn)(void *arg, struct scope_key key, void *data),
		void *arg);

/* With watching on: report now, through the exit callback and on the
 * calling thread, every scope whose process has exited, instead of
 * whenever the watcher thread gets to it.  Once a client has seen a
 * process end (wait(2) returned), a request that calls this first sees
 * that process's engagements ended: exits that the watcher or another
 * caller took first are waited for.  Returns how many this call reported;
 * call with no lock held that the callback takes. */
size_t scope_reap(struct scope_tab *t);

/* Find the scope that applies to thread tid: its process's own or the
 * nearest ancestor's, if the ancestor's child on the way down was started
 * after that scope was made.  Returns 1 and *key when there is one, 0 when there is
 * none (including tid 0 and vanished threads), or -errno. */
int scope_resolve(struct scope_tab *t, pid_t tid, struct scope_key *key);
/* How many /proc files scope_resolve() has read (for tests: a repeated hit
 * on a live thread of the real /proc reads none, a miss one per process on
 * the way up to the scope, less the scope's owner when it is watched and
 * runs, plus /proc/TID/status for a thread that does not lead its thread
 * group or whose pidfd cannot be had). */
size_t scope_proc_reads(struct scope_tab *t);
/* Key of process pid as it is now (its current start time). */
int scope_key_of(struct scope_tab *t, pid_t pid, struct scope_key *key);
/* scope_key_of(), and with watching on a pidfd of that process, opened
 * before the key was read (else -1; always -1 when the process owns a
 * live scope already), which the caller owns: handed to
 * scope_add_pinned(), it spares the second /proc read that scope_add()
 * makes to check that the pid still names key's process.  pidfd NULL:
 * open none (scope_key_of()). */
int scope_key_pin(struct scope_tab *t, pid_t pid, struct scope_key *key, int *pidfd);
/* scope_add() with the pidfd of scope_key_pin(), taken over in every case
 * (-1: as scope_add()). */
int scope_add_pinned(struct scope_tab *t, struct scope_key key, int pidfd, void *data);

#endif
