/* The process behind a FUSE request's thread id (caller.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "caller.h"

#define CALLER_SLOTS 256

struct slot {
	pid_t tid;
	int pidfd; /* the thread's; -1: the slot is empty */
	struct scope_key key;
};

struct caller_tab {
	char root[256];
	bool real; /* root is the real /proc: pidfds name its threads */
	pthread_mutex_t lock;
	struct slot slot[CALLER_SLOTS];
	atomic_size_t reads;
};

int caller_tab_create(const char *root, struct caller_tab **out)
{
	struct caller_tab *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	snprintf(t->root, sizeof(t->root), "%s", root ? root : "/proc");
	t->real = !root || strcmp(root, "/proc") == 0;
	pthread_mutex_init(&t->lock, NULL);
	for (size_t i = 0; i < CALLER_SLOTS; i++)
		t->slot[i].pidfd = -1;
	*out = t;
	return 0;
}

void caller_tab_destroy(struct caller_tab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < CALLER_SLOTS; i++)
		if (t->slot[i].pidfd >= 0)
			close(t->slot[i].pidfd);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

size_t caller_proc_reads(struct caller_tab *t)
{
	return atomic_load(&t->reads);
}

/* The thread group of tid and the group's start time, from /proc. */
static int read_key(struct caller_tab *t, pid_t tid, struct scope_key *key)
{
	pid_t tgid, ppid;
	uint64_t start;
	int r;

	atomic_fetch_add(&t->reads, 2);
	r = proc_tgid(t->root, tid, &tgid);
	if (!r)
		r = proc_stat(t->root, tgid, &ppid, &start);
	if (r)
		return r;
	key->pid = tgid;
	key->start = start;
	return 0;
}

int caller_resolve(struct caller_tab *t, pid_t tid, struct scope_key *key)
{
	struct scope_key k;
	struct slot *s;
	uint64_t st1, st2;
	pid_t ppid;
	bool leader = false;
	int fd, r;

	if (tid <= 0)
		return 0;
	s = &t->slot[(unsigned)tid % CALLER_SLOTS];
	pthread_mutex_lock(&t->lock);
	if (s->pidfd >= 0 && s->tid == tid && pidfd_alive(s->pidfd)) {
		*key = s->key;
		pthread_mutex_unlock(&t->lock);
		return 1;
	}
	pthread_mutex_unlock(&t->lock);

	/* A pidfd of the process opens only for a thread group leader,
	 * which is then its own process: its stat alone names it, with no
	 * /proc/TID/status to read (most requests come from single-threaded
	 * programs).  Any other thread is pinned by a pidfd of its own. */
	fd = t->real ? (int)syscall(SYS_pidfd_open, tid, 0) : -1;
	if (fd >= 0)
		leader = true;
	else if (t->real)
		fd = pidfd_open_thread(tid);
	if (fd >= 0) {
		/* The pidfd pins the thread: if it still lives after the
		 * reads, the id named that one thread throughout. */
		if (leader) {
			atomic_fetch_add(&t->reads, 1);
			k.pid = tid;
			r = proc_stat(t->root, tid, &ppid, &k.start);
		} else {
			r = read_key(t, tid, &k);
		}
		if (r < 0 || !pidfd_alive(fd)) {
			close(fd);
			return 0;
		}
		pthread_mutex_lock(&t->lock);
		if (s->pidfd >= 0)
			close(s->pidfd);
		s->pidfd = fd;
		s->tid = tid;
		s->key = k;
		pthread_mutex_unlock(&t->lock);
		*key = k;
		return 1;
	}
	/* No pidfd: the thread's start time before and after the reads
	 * tells whether its id was reused meanwhile. */
	atomic_fetch_add(&t->reads, 2);
	if (proc_stat(t->root, tid, &ppid, &st1) < 0 || read_key(t, tid, key) < 0 ||
	    proc_stat(t->root, tid, &ppid, &st2) < 0 || st1 != st2)
		return 0;
	return 1;
}
