/* Caller resolution and process-exit watching for patchgroup scopes. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "scope.h"
#include "util/smallfile.h"

#define ANCESTRY_MAX 128
#define CACHE_SLOTS  256

struct entry {
	struct scope_key key;
	uint64_t since; /* clock ticks since boot when the scope was made */
	void *data;
	int pidfd;
	uint32_t serial; /* names the entry in the watcher's epoll events */
	struct entry *next;
};

struct cslot {
	pid_t tid;
	uint64_t tstart;
	uint64_t gen;
	bool found;
	struct scope_key key;
	int pidfd;   /* the thread's own pidfd: a hit while it lives reads nothing */
	bool leader; /* the thread leads its thread group (is its process) */
};

struct scope_tab {
	char root[256];
	pthread_mutex_t lock;
	struct entry *ht[256];
	size_t count;
	atomic_size_t acount; /* count, readable without the lock */
	uint64_t gen;	      /* bumped on every add and del */
	/* The earliest `since` of every scope (UINT64_MAX with none): above
	 * a process started before it, no ancestor's scope can apply. */
	uint64_t min_since;
	struct cslot cache[CACHE_SLOTS];
	bool watch;
	int evfd;	 /* wakes the watcher to stop */
	int epfd;	 /* the evfd and every scope's pidfd */
	uint32_t serial; /* the last entry's serial */
	pthread_t thread;
	atomic_bool stop;
	/* Exits taken off the table whose callbacks have not returned: a
	 * scope_reap() waits for them, since what it promises is that they
	 * are over.  Changed under lock. */
	atomic_uint inflight;
	pthread_cond_t settled;
	scope_exit_fn fn;
	void *arg;
	bool real;	     /* root is the real /proc: pidfds name its threads */
	atomic_size_t reads; /* /proc files read by scope_resolve() */
};

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

int pidfd_open_thread(pid_t tid)
{
	return (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
}

int proc_stat(const char *root, pid_t pid, pid_t *ppid, uint64_t *start)
{
	char path[300], buf[1024], *p, *save = NULL, *tok;
	unsigned long long st = 0;
	long pp = -1;
	int r, field;

	snprintf(path, sizeof(path), "%s/%d/stat", root, (int)pid);
	r = small_file_read(path, buf, sizeof(buf));
	if (r < 0)
		return r;
	/* The command name is in parentheses and may itself contain spaces
	 * and ')': the fields start after the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return -EPROTO;
	field = 3;
	for (tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++) {
		if (field == 4)
			pp = strtol(tok, NULL, 10);
		if (field == 22) {
			st = strtoull(tok, NULL, 10);
			break;
		}
	}
	if (field != 22 || pp < 0)
		return -EPROTO;
	*ppid = (pid_t)pp;
	*start = st;
	return 0;
}

int proc_tgid(const char *root, pid_t tid, pid_t *tgid)
{
	char path[300], buf[2048], *p;
	int r;

	snprintf(path, sizeof(path), "%s/%d/status", root, (int)tid);
	r = small_file_read(path, buf, sizeof(buf));
	if (r < 0)
		return r;
	p = strstr(buf, "\nTgid:");
	if (!p)
		return -EPROTO;
	*tgid = (pid_t)strtol(p + 6, NULL, 10);
	return *tgid > 0 ? 0 : -EPROTO;
}

static size_t eslot(struct scope_key key)
{
	return ((unsigned)key.pid * 2654435761u) >> 24;
}

static struct entry **efind(struct scope_tab *t, struct scope_key key)
{
	struct entry **pp = &t->ht[eslot(key)];

	while (*pp && ((*pp)->key.pid != key.pid || (*pp)->key.start != key.start))
		pp = &(*pp)->next;
	return pp;
}

/* An epoll event's data: the entry's pid and serial (0 for the evfd). */
static uint64_t ev_tag(const struct entry *e)
{
	return (uint64_t)(uint32_t)e->key.pid << 32 | e->serial;
}

/* One batch of exit callbacks is over.  Called without t->lock. */
static void settle(struct scope_tab *t)
{
	pthread_mutex_lock(&t->lock);
	if (atomic_fetch_sub(&t->inflight, 1) == 1)
		pthread_cond_broadcast(&t->settled);
	pthread_mutex_unlock(&t->lock);
}

/* Each scope's pidfd sits in one epoll set, added by scope_add() and
 * dropped by closing it in scope_del(): neither wakes the watcher, which
 * wakes only for an exit (each pidfd reports once: EPOLLONESHOT) or to
 * stop. */
static void *watcher(void *arg)
{
	struct scope_tab *t = arg;
	struct epoll_event ev[32];
	struct scope_key keys[32];
	struct entry *e;
	uint32_t serial;
	pid_t pid;
	int n, i, k;

	while (!atomic_load(&t->stop)) {
		n = epoll_wait(t->epfd, ev, 32, -1);
		if (n < 0)
			continue;
		k = 0;
		pthread_mutex_lock(&t->lock);
		for (i = 0; i < n; i++) {
			if (ev[i].data.u64 == 0)
				continue; /* the evfd: the loop's test says why */
			pid = (pid_t)(ev[i].data.u64 >> 32);
			serial = (uint32_t)ev[i].data.u64;
			for (e = t->ht[eslot((struct scope_key){.pid = pid})]; e; e = e->next)
				if (e->key.pid == pid && e->serial == serial)
					break;
			/* A key deleted meanwhile is not found here, nor by
			 * the callback's scope_del(); the poll makes sure that
			 * a tag that came round again names an exit. */
			if (e && !pidfd_alive(e->pidfd))
				keys[k++] = e->key;
		}
		if (k)
			atomic_fetch_add(&t->inflight, 1);
		pthread_mutex_unlock(&t->lock);
		for (i = 0; i < k; i++)
			t->fn(t->arg, keys[i]);
		if (k)
			settle(t);
	}
	return NULL;
}

static void poke(struct scope_tab *t)
{
	uint64_t one = 1;

	if (t->watch && write(t->evfd, &one, sizeof(one)) < 0) {
		/* The counter cannot overflow in practice. */
	}
}

int scope_tab_create(const char *root, bool watch, scope_exit_fn fn, void *arg,
		     struct scope_tab **out)
{
	struct scope_tab *t = calloc(1, sizeof(*t));
	int r;

	if (!t)
		return -ENOMEM;
	snprintf(t->root, sizeof(t->root), "%s", root ? root : "/proc");
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->settled, NULL);
	t->gen = 1;
	t->min_since = UINT64_MAX;
	t->real = !root || strcmp(root, "/proc") == 0;
	for (size_t i = 0; i < CACHE_SLOTS; i++)
		t->cache[i].pidfd = -1;
	t->fn = fn;
	t->arg = arg;
	t->evfd = -1;
	t->epfd = -1;
	if (watch) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};

		t->evfd = eventfd(0, EFD_CLOEXEC);
		t->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (t->evfd < 0 || t->epfd < 0 ||
		    epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &ev) < 0) {
			r = -errno;
			goto fail_fds;
		}
		t->watch = true;
		r = -pthread_create(&t->thread, NULL, watcher, t);
		if (r < 0)
			goto fail_fds;
	}
	*out = t;
	return 0;
fail_fds:
	if (t->evfd >= 0)
		close(t->evfd);
	if (t->epfd >= 0)
		close(t->epfd);
	pthread_cond_destroy(&t->settled);
	pthread_mutex_destroy(&t->lock);
	free(t);
	return r;
}

void scope_tab_destroy(struct scope_tab *t)
{
	struct entry *e, *nx;
	size_t i;

	if (!t)
		return;
	if (t->watch) {
		atomic_store(&t->stop, true);
		poke(t);
		pthread_join(t->thread, NULL);
		close(t->evfd);
		close(t->epfd);
	}
	for (i = 0; i < 256; i++) {
		for (e = t->ht[i]; e; e = nx) {
			nx = e->next;
			if (e->pidfd >= 0)
				close(e->pidfd);
			free(e);
		}
	}
	for (i = 0; i < CACHE_SLOTS; i++)
		if (t->cache[i].pidfd >= 0)
			close(t->cache[i].pidfd);
	pthread_cond_destroy(&t->settled);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

size_t scope_proc_reads(struct scope_tab *t)
{
	return atomic_load(&t->reads);
}

bool pidfd_alive(int fd)
{
	struct pollfd pf = {.fd = fd, .events = POLLIN};

	return poll(&pf, 1, 0) == 0;
}

/* Now, in the unit of /proc/PID/stat's start time: clock ticks of the
 * boot-time clock. */
static uint64_t now_ticks(void)
{
	struct timespec ts;
	long hz = sysconf(_SC_CLK_TCK);

	if (hz <= 0)
		hz = 100;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * (uint64_t)hz + (uint64_t)ts.tv_nsec / (1000000000u / hz);
}

/* Register a scope.  pidfd: a pidfd of key's process that the caller
 * opened before reading key (scope_key_pin()), taken over whatever the
 * outcome; -1 to open one here and check it against key. */
static int add(struct scope_tab *t, struct scope_key key, uint64_t since, int pidfd, void *data)
{
	struct entry *e;
	pid_t ppid;
	uint64_t start;
	int r = 0;

	e = calloc(1, sizeof(*e));
	if (!e) {
		if (pidfd >= 0)
			close(pidfd);
		return -ENOMEM;
	}
	e->key = key;
	e->since = since;
	e->data = data;
	e->pidfd = t->watch ? pidfd : -1;
	if (!t->watch && pidfd >= 0)
		close(pidfd);
	if (t->watch && e->pidfd < 0) {
		e->pidfd = (int)syscall(SYS_pidfd_open, key.pid, 0);
		if (e->pidfd < 0) {
			r = errno == ESRCH ? -ESRCH : -errno;
			goto fail;
		}
		/* The pid may have been reused between the caller reading its
		 * start time and the pidfd: check it names the same process. */
		r = proc_stat(t->root, key.pid, &ppid, &start);
		if (r < 0 || start != key.start) {
			r = -ESRCH;
			goto fail;
		}
	}
	pthread_mutex_lock(&t->lock);
	if (*efind(t, key)) {
		pthread_mutex_unlock(&t->lock);
		r = -EEXIST;
		goto fail;
	}
	if (e->pidfd >= 0) {
		struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT};

		e->serial = ++t->serial ? t->serial : ++t->serial; /* never 0 */
		ev.data.u64 = ev_tag(e);
		if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, e->pidfd, &ev) < 0) {
			r = -errno;
			pthread_mutex_unlock(&t->lock);
			goto fail;
		}
	}
	e->next = t->ht[eslot(key)];
	t->ht[eslot(key)] = e;
	t->count++;
	atomic_store(&t->acount, t->count);
	t->gen++;
	if (since < t->min_since)
		t->min_since = since;
	pthread_mutex_unlock(&t->lock);
	return 0;
fail:
	if (e->pidfd >= 0)
		close(e->pidfd);
	free(e);
	return r;
}

int scope_add(struct scope_tab *t, struct scope_key key, void *data)
{
	return add(t, key, now_ticks(), -1, data);
}

int scope_add_pinned(struct scope_tab *t, struct scope_key key, int pidfd, void *data)
{
	return add(t, key, now_ticks(), pidfd, data);
}

int scope_add_since(struct scope_tab *t, struct scope_key key, uint64_t since, void *data)
{
	return add(t, key, since, -1, data);
}

void *scope_get(struct scope_tab *t, struct scope_key key)
{
	struct entry *e;

	pthread_mutex_lock(&t->lock);
	e = *efind(t, key);
	pthread_mutex_unlock(&t->lock);
	return e ? e->data : NULL;
}

/* After the scope with the earliest `since` is gone.  Called with t->lock
 * held; the table holds few scopes (one per engaged process). */
static void recompute_min_since(struct scope_tab *t)
{
	struct entry *e;
	size_t i;

	t->min_since = UINT64_MAX;
	for (i = 0; i < 256; i++)
		for (e = t->ht[i]; e; e = e->next)
			if (e->since < t->min_since)
				t->min_since = e->since;
}

void *scope_del(struct scope_tab *t, struct scope_key key)
{
	struct entry **pp, *e;
	void *data = NULL;

	pthread_mutex_lock(&t->lock);
	pp = efind(t, key);
	e = *pp;
	if (e) {
		*pp = e->next;
		t->count--;
		atomic_store(&t->acount, t->count);
		t->gen++;
		if (e->since == t->min_since)
			recompute_min_since(t);
	}
	pthread_mutex_unlock(&t->lock);
	if (e) {
		data = e->data;
		/* Closing the pidfd takes it out of the epoll set. */
		if (e->pidfd >= 0)
			close(e->pidfd);
		free(e);
	}
	return data;
}

size_t scope_count(struct scope_tab *t)
{
	return atomic_load(&t->acount);
}

void scope_each(struct scope_tab *t, void (*fn)(void *arg, struct scope_key key, void *data),
		void *arg)
{
	struct scope_key *keys = NULL;
	struct entry *e;
	size_t n = 0, i;
	void *d;

	pthread_mutex_lock(&t->lock);
	keys = calloc(t->count + 1, sizeof(*keys));
	for (i = 0; keys && i < 256; i++)
		for (e = t->ht[i]; e; e = e->next)
			keys[n++] = e->key;
	pthread_mutex_unlock(&t->lock);
	for (i = 0; i < n; i++) {
		d = scope_get(t, keys[i]);
		if (d)
			fn(arg, keys[i], d);
	}
	free(keys);
}

size_t scope_reap(struct scope_tab *t)
{
	struct scope_key *keys;
	struct entry *e;
	size_t n = 0, i;

	/* acount first: an exit leaves the table only after its collector
	 * counted itself in flight, so seeing the table empty and then
	 * nothing in flight means every exit so far is over. */
	if (!t->watch || (atomic_load(&t->acount) == 0 && atomic_load(&t->inflight) == 0))
		return 0;
	pthread_mutex_lock(&t->lock);
	keys = calloc(t->count + 1, sizeof(*keys));
	for (i = 0; keys && i < 256; i++)
		for (e = t->ht[i]; e; e = e->next)
			if (e->pidfd >= 0 && !pidfd_alive(e->pidfd))
				keys[n++] = e->key;
	if (n)
		atomic_fetch_add(&t->inflight, 1);
	pthread_mutex_unlock(&t->lock);
	/* The watcher may report the same exits: the callback's scope_del()
	 * finds each key once. */
	for (i = 0; i < n; i++)
		t->fn(t->arg, keys[i]);
	free(keys);
	/* An exit the watcher (or another request) took first may still be
	 * in its callback: wait for it, or the caller could see it half
	 * done. */
	pthread_mutex_lock(&t->lock);
	if (n && atomic_fetch_sub(&t->inflight, 1) == 1)
		pthread_cond_broadcast(&t->settled);
	while (atomic_load(&t->inflight) > 0)
		pthread_cond_wait(&t->settled, &t->lock);
	pthread_mutex_unlock(&t->lock);
	return n;
}

static int live_scope_of(struct scope_tab *t, pid_t pid, uint64_t child_start,
			 struct scope_key *found);

int scope_key_of(struct scope_tab *t, pid_t pid, struct scope_key *key)
{
	return scope_key_pin(t, pid, key, NULL);
}

int scope_key_pin(struct scope_tab *t, pid_t pid, struct scope_key *key, int *pidfd)
{
	pid_t ppid;
	uint64_t start;
	int r, fd = -1;

	if (pidfd)
		*pidfd = -1;

	/* A process whose requests scope_resolve() has seen is in its
	 * cache with its start time, pinned by a pidfd while it lives: a
	 * process making patchgroup calls (every engage and disengage asks
	 * for its key) then costs a poll instead of a /proc read. */
	if (pid > 0) {
		struct cslot *cs = &t->cache[(unsigned)pid % CACHE_SLOTS];

		pthread_mutex_lock(&t->lock);
		if (cs->tid == pid && cs->leader && cs->pidfd >= 0 && pidfd_alive(cs->pidfd)) {
			key->pid = pid;
			key->start = cs->tstart;
			pthread_mutex_unlock(&t->lock);
			return 0;
		}
		pthread_mutex_unlock(&t->lock);
	}
	/* A process that owns a live watched scope is pinned by that
	 * scope's pidfd, and its key is the scope's (live_scope_of()); it
	 * has its scope already, so it needs no pidfd either.  This is
	 * pgrun's and any API caller's every engage and disengage. */
	if (pid > 0 && live_scope_of(t, pid, UINT64_MAX, key))
		return 0;
	/* Pinned before the read, and still running after it: the read
	 * was of the process the pidfd names, and scope_add_pinned() need
	 * not read again to check that. */
	if (pidfd && t->watch && t->real && pid > 0)
		fd = (int)syscall(SYS_pidfd_open, pid, 0);
	r = proc_stat(t->root, pid, &ppid, &start);
	if (r == 0 && fd >= 0 && !pidfd_alive(fd))
		r = -ESRCH;
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return r == -ENOENT ? -ESRCH : r;
	}
	key->pid = pid;
	key->start = start;
	if (pidfd)
		*pidfd = fd;
	return 0;
}

/* The scope of the process key, whose child on the way down (if any,
 * i > 0) started at child_start: its own scope counts for it, and for a
 * descendant only when the way down left it after the scope was made.
 * Called with t->lock held. */
static bool scope_applies(struct scope_tab *t, struct scope_key key, size_t i, uint64_t child_start)
{
	struct entry *e = *efind(t, key);

	/* Engagement reaches only descendants started after it: a process
	 * already running below the scope's owner (started before the scope
	 * was made) stays outside it, and keeps what it inherited when it
	 * was forked (as with a file table): the scope of an ancestor
	 * further up, so the walk goes on.  The start times are in clock
	 * ticks, so a child forked in the same tick as the scope was made
	 * counts as after it (documented in pg_create(3)). */
	return e && (i == 0 || child_start >= e->since);
}

/* The scope of process pid when that process owns one, still runs, and
 * applies to its child on the way down, which started at child_start: 1
 * and *found, with no /proc read, else 0.  The scope's pidfd pins the pid
 * while the process runs, so a live scope's key is what a read of
 * /proc/PID/stat would find now; one that started after the child is
 * another process that took a vanished parent's pid, as in walk_up().
 * This is the common step of a command under pgrun: its parent is the
 * scope's owner.  Called without t->lock. */
static int live_scope_of(struct scope_tab *t, pid_t pid, uint64_t child_start,
			 struct scope_key *found)
{
	struct entry *e;
	int r = 0;

	if (!t->real)
		return 0;
	pthread_mutex_lock(&t->lock);
	for (e = t->ht[eslot((struct scope_key){.pid = pid})]; e; e = e->next) {
		if (e->key.pid == pid && e->pidfd >= 0 && e->key.start <= child_start &&
		    child_start >= e->since && pidfd_alive(e->pidfd)) {
			*found = e->key;
			r = 1;
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

/* Walk up from the process key (parent ppid) to the nearest ancestor whose
 * scope applies, reading one /proc/PID/stat per step and stopping at the
 * first scope found: a process inside a scope costs as many reads as it is
 * deep below the scope's owner, not below init.  A process outside every
 * scope stops the walk at its first ancestor that started before every
 * scope was made: start times only fall on the way up, so no scope higher
 * up can reach down past that ancestor.  1 and *found, or 0. */
static int walk_up(struct scope_tab *t, struct scope_key key, pid_t ppid, struct scope_key *found)
{
	uint64_t child_start = 0, start;
	pid_t next;
	size_t i;
	bool hit, above;

	for (i = 0; i < ANCESTRY_MAX; i++) {
		pthread_mutex_lock(&t->lock);
		hit = scope_applies(t, key, i, child_start);
		/* The next step checks key's parent with key as the child
		 * on the way down. */
		above = key.start >= t->min_since;
		pthread_mutex_unlock(&t->lock);
		if (hit) {
			*found = key;
			return 1;
		}
		if (!above || key.pid == 1 || ppid <= 0 || ppid == key.pid)
			return 0;
		child_start = key.start;
		if (live_scope_of(t, ppid, child_start, found))
			return 1;
		atomic_fetch_add(&t->reads, 1);
		/* An ancestor that vanished mid-walk: its children were
		 * reparented, so nothing above it applies any more.  A
		 * "parent" that started after its child is another process
		 * that got the vanished parent's pid. */
		if (proc_stat(t->root, ppid, &next, &start) < 0 || start > child_start)
			return 0;
		key.pid = ppid;
		key.start = start;
		ppid = next;
	}
	return 0;
}

int scope_resolve(struct scope_tab *t, pid_t tid, struct scope_key *key)
{
	struct scope_key proc, found;
	struct cslot *cs;
	uint64_t tstart, gen;
	pid_t ppid;
	bool pinned, leader = false;
	int r, fd = -1;

	/* The common case costs nothing: no scope, no /proc reads. */
	if (tid <= 0 || atomic_load(&t->acount) == 0)
		return 0;
	cs = &t->cache[(unsigned)tid % CACHE_SLOTS];
	/* A hit on a thread whose pidfd we hold costs one poll, no /proc
	 * read: the pidfd pins the thread, so the tid cannot have been
	 * reused while it is not readable. */
	pthread_mutex_lock(&t->lock);
	pinned = cs->tid == tid && cs->pidfd >= 0 && pidfd_alive(cs->pidfd);
	leader = pinned && cs->leader;
	if (pinned && cs->gen == t->gen) {
		r = cs->found;
		if (r)
			*key = cs->key;
		pthread_mutex_unlock(&t->lock);
		return r;
	}
	pthread_mutex_unlock(&t->lock);

	/* Pin the thread before reading anything: if its pidfd still says
	 * it runs after the reads, every read was of this one thread.  A
	 * pidfd of the process opens only for a thread group leader, which
	 * then is its own process: no /proc/TID/status to read for the
	 * single-threaded programs that make most requests. */
	if (t->real && !pinned) {
		fd = (int)syscall(SYS_pidfd_open, tid, 0);
		if (fd >= 0)
			leader = true;
		else
			fd = pidfd_open_thread(tid);
	}
	atomic_fetch_add(&t->reads, 1);
	if (proc_stat(t->root, tid, &ppid, &tstart) < 0)
		goto gone; /* the thread is gone: it can belong to no scope */
	pthread_mutex_lock(&t->lock);
	if (cs->tid == tid && cs->tstart == tstart && cs->gen == t->gen) {
		r = cs->found;
		if (r)
			*key = cs->key;
		pthread_mutex_unlock(&t->lock);
		if (fd >= 0)
			close(fd);
		return r;
	}
	gen = t->gen;
	pthread_mutex_unlock(&t->lock);

	/* The thread's process: the thread itself when it leads its group,
	 * else the group's leader (Tgid), whose start time names it. */
	proc.pid = tid;
	proc.start = tstart;
	if (!leader) {
		atomic_fetch_add(&t->reads, 1);
		if (proc_tgid(t->root, tid, &proc.pid) < 0)
			goto gone;
		if (proc.pid != tid) {
			atomic_fetch_add(&t->reads, 1);
			if (proc_stat(t->root, proc.pid, &ppid, &proc.start) < 0)
				goto gone;
		}
	}
	r = walk_up(t, proc, ppid, &found);
	if (r)
		*key = found;
	/* A thread that ended during the reads: the answer stands for this
	 * request, but its id may be another thread's next, so the pidfd
	 * does not go into the cache. */
	if (fd >= 0 && !pidfd_alive(fd)) {
		close(fd);
		fd = -1;
		pinned = false;
	}
	pthread_mutex_lock(&t->lock);
	/* Cache only an answer computed against the current set of scopes;
	 * one that raced with a change is used once and dropped. */
	if (gen == t->gen) {
		if (cs->pidfd >= 0 && !(pinned && cs->tid == tid)) {
			close(cs->pidfd);
			cs->pidfd = -1;
		}
		if (cs->pidfd < 0) {
			cs->pidfd = fd;
			fd = -1;
		}
		cs->tid = tid;
		cs->tstart = tstart;
		cs->gen = gen;
		cs->leader = leader;
		cs->found = r;
		if (r)
			cs->key = found;
	}
	pthread_mutex_unlock(&t->lock);
	if (fd >= 0)
		close(fd);
	return r;
gone:
	if (fd >= 0)
		close(fd);
	return 0;
}
