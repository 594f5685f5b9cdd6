/* Recording a command's run and checking crash states; see crashrun.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "crashrun.h"

extern char **environ;

/* ---- processes --------------------------------------------------------- */

struct spawn {
	const char *cwd;	/* NULL: ours */
	const char *out;	/* stdout and stderr to this file, or NULL */
	bool quiet;		/* stdout and stderr to /dev/null */
	bool keep_stdin;	/* else /dev/null */
	const char *const *env; /* "NAME=value" to add, NULL-terminated */
};

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* A copy of environ with add's names replaced. */
static char **make_env(const char *const *add)
{
	size_t n = 0, k = 0, i, j;
	char **e;

	while (environ[n])
		n++;
	while (add && add[k])
		k++;
	e = calloc(n + k + 1, sizeof(*e));
	if (!e)
		return NULL;
	k = 0;
	for (i = 0; i < n; i++) {
		bool replaced = false;

		for (j = 0; add && add[j]; j++) {
			size_t len = strcspn(add[j], "=") + 1;

			if (!strncmp(environ[i], add[j], len))
				replaced = true;
		}
		if (!replaced)
			e[k++] = environ[i];
	}
	for (j = 0; add && add[j]; j++)
		e[k++] = (char *)add[j];
	return e;
}

/* Start argv; 0 and *pid, or -errno (-ENOENT when it is not found). */
static int start(char *const *argv, const struct spawn *s, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t def;
	const char *add[8];
	char *pwd = NULL;
	char **env;
	int ret, n = 0;

	/* A shell trusts $PWD when it names its directory: keep it true. */
	if (s->cwd && asprintf(&pwd, "PWD=%s", s->cwd) < 0)
		return -ENOMEM;
	for (; s->env && s->env[n] && n < 6; n++)
		add[n] = s->env[n];
	if (pwd)
		add[n++] = pwd;
	add[n] = NULL;
	env = make_env(add);
	if (!env) {
		free(pwd);
		return -ENOMEM;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	/* The children get the default dispositions whatever ours are. */
	sigemptyset(&def);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGQUIT);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGTERM);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF);
	if (!s->keep_stdin)
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (s->out || s->quiet) {
		posix_spawn_file_actions_addopen(&fa, 1, s->out ? s->out : "/dev/null",
						 O_WRONLY | O_CREAT | O_TRUNC, 0600);
		posix_spawn_file_actions_adddup2(&fa, 1, 2);
	}
	if (s->cwd)
		posix_spawn_file_actions_addchdir_np(&fa, s->cwd);
	ret = -posix_spawnp(pid, argv[0], &fa, &at, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	free(env);
	free(pwd);
	return ret;
}

/* An exit status as a shell gives it. */
static int status_of(int wst)
{
	if (WIFSIGNALED(wst))
		return 128 + WTERMSIG(wst);
	return WEXITSTATUS(wst);
}

static int wait_pid(pid_t pid)
{
	int wst;

	while (waitpid(pid, &wst, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return status_of(wst);
}

/* Run argv to the end: its exit status (127 not found, 126 not runnable),
 * or -errno when it could not be started for another reason. */
static int run_wait(char *const *argv, const struct spawn *s)
{
	pid_t pid;
	int r = start(argv, s, &pid);

	if (r == 0)
		return wait_pid(pid);
	if (r == -ENOENT)
		return 127;
	if (r == -EACCES || r == -ENOEXEC || r == -EISDIR || r == -ENOTDIR)
		return 126;
	return r;
}

/* The same, but a command that cannot be started is -errno: a check that
 * is not found is an error, not a failed state. */
static int run_check(char *const *argv, const struct spawn *s)
{
	pid_t pid;
	int r = start(argv, s, &pid);

	return r ? r : wait_pid(pid);
}

/* ---- mounts ------------------------------------------------------------ */

struct mount {
	pid_t pid;
	const char *mnt;
};

static bool mounted(const char *mnt)
{
	char parent[PATH_MAX];
	struct stat a, b;

	if (snprintf(parent, sizeof(parent), "%s/..", mnt) >= (int)sizeof(parent))
		return false;
	return stat(mnt, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* Start the daemon in the foreground and wait until mnt is a mount. */
static int mount_start(const struct crash_tools *t, const char *img, const char *mnt,
		       const char *opts, const struct spawn *s, struct mount *m)
{
	char *argv[8];
	int n = 0, r, wst;

	argv[n++] = (char *)t->mount;
	argv[n++] = "-f";
	if (opts && *opts) {
		argv[n++] = "-o";
		argv[n++] = (char *)opts;
	}
	argv[n++] = (char *)img;
	argv[n++] = (char *)mnt;
	argv[n] = NULL;
	r = start(argv, s, &m->pid);
	if (r)
		return r;
	m->mnt = mnt;
	/* Up to 20 s: a loaded machine can be slow, a broken image fails
	 * at once (the daemon exits). */
	for (int i = 0; i < 4000; i++) {
		if (mounted(mnt))
			return 0;
		r = waitpid(m->pid, &wst, WNOHANG);
		if (r == m->pid)
			return -EIO;
		sleep_ms(5);
	}
	kill(m->pid, SIGTERM);
	wait_pid(m->pid);
	return -ETIMEDOUT;
}

/* Wait for a daemon whose mount is gone.  It exits once the kernel ends
 * its file system, which a copy of the mount in another mount namespace
 * can put off indefinitely: after a minute it is told to stop (SIGTERM:
 * flush and exit), then killed.  Its exit status, or -ETIMEDOUT when it
 * had to be stopped. */
static int wait_daemon(pid_t pid)
{
	int wst, i;

	for (i = 0; i < 3000; i++) {
		if (waitpid(pid, &wst, WNOHANG) == pid)
			return status_of(wst);
		sleep_ms(20);
	}
	kill(pid, SIGTERM);
	for (i = 0; i < 500; i++) {
		if (waitpid(pid, &wst, WNOHANG) == pid)
			return -ETIMEDOUT;
		sleep_ms(20);
	}
	kill(pid, SIGKILL);
	wait_pid(pid);
	return -ETIMEDOUT;
}

/* Unmount and wait for the daemon; its exit status, or -errno.  A check
 * that left a process inside keeps the mount busy for a while: retry, then
 * detach it lazily. */
static int mount_stop(const struct crash_tools *t, struct mount *m)
{
	char *um[] = {(char *)t->fusermount, "-u", (char *)m->mnt, NULL};
	char *lazy[] = {(char *)t->fusermount, "-uz", (char *)m->mnt, NULL};
	struct spawn q = {.quiet = true};
	int r = 1;

	for (int i = 0; i < 100 && r; i++) {
		r = run_wait(um, &q);
		if (r)
			sleep_ms(20);
	}
	if (r)
		run_wait(lazy, &q);
	return wait_daemon(m->pid);
}

/* ---- run --------------------------------------------------------------- */

static char *join(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, r = 0;
	char buf[1 << 16];
	ssize_t n;

	if (in < 0)
		return -errno;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		r = -errno;
		goto out;
	}
	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (write(out, buf, (size_t)n) != n) {
			r = errno ? -errno : -EIO;
			break;
		}
	}
	if (close(out) < 0 && !r)
		r = -errno;
out:
	close(in);
	return r;
}

static void set_err(struct crash_err *e, const char *what, const char *arg, int status)
{
	if (!e)
		return;
	e->what = what;
	e->arg = arg;
	e->status = status;
}

int crash_run(const struct crash_run_opts *o, int *status, struct crash_err *err)
{
	const struct crash_tools *t = o->tools;
	char *img = join(o->dir, CRASH_IMAGE), *log = join(o->dir, CRASH_LOG);
	char *mnt = join(o->dir, "mnt"), *mntenv = NULL, *recenv = NULL;
	struct mount m;
	int r, st;

	set_err(err, NULL, NULL, -1);
	if (!img || !log || !mnt || asprintf(&mntenv, "FSTITCH_MNT=%s", mnt) < 0 ||
	    asprintf(&recenv, "FSTITCH_RECORD=%s", log) < 0) {
		r = -ENOMEM;
		goto out;
	}
	if (mkdir(o->dir, 0777) < 0 && errno != EEXIST) {
		r = -errno;
		set_err(err, "cannot make", o->dir, -1);
		goto out;
	}
	if (mkdir(mnt, 0777) < 0 && errno != EEXIST) {
		r = -errno;
		set_err(err, "cannot make", mnt, -1);
		goto out;
	}
	unlink(log);
	if (o->image) {
		r = copy_file(o->image, img);
		if (r) {
			set_err(err, "cannot copy", o->image, -1);
			goto out;
		}
	} else {
		char *mk[] = {
		    (char *)t->mkfs, "-q", "-F", img, (char *)(o->size ? o->size : "8M"), NULL};
		struct spawn s = {.quiet = false};

		st = run_wait(mk, &s);
		if (st) {
			r = st < 0 ? st : -EIO;
			set_err(err, "cannot make an image with", t->mkfs, st);
			goto out;
		}
	}
	if (o->setup) {
		char *sh[] = {"sh", "-c", (char *)o->setup, NULL};
		const char *env[] = {mntenv, NULL};
		struct spawn s = {.cwd = mnt, .keep_stdin = true, .env = env};
		struct spawn d = {0};

		r = mount_start(t, img, mnt, o->mount_opts, &d, &m);
		if (r) {
			set_err(err, "cannot mount", img, -1);
			goto out;
		}
		st = run_wait(sh, &s);
		r = mount_stop(t, &m);
		if (r) {
			set_err(err, "the daemon failed after the setup", NULL, r);
			r = r < 0 ? r : -EIO;
			goto out;
		}
		if (st) {
			r = -ECANCELED;
			set_err(err, "setup command failed", NULL, st);
			goto out;
		}
	}
	{
		const char *denv[] = {recenv, NULL};
		const char *env[] = {mntenv, NULL};
		struct spawn d = {.env = denv};
		struct spawn s = {.cwd = mnt, .keep_stdin = true, .env = env};

		r = mount_start(t, img, mnt, o->mount_opts, &d, &m);
		if (r) {
			set_err(err, "cannot mount", img, -1);
			goto out;
		}
		st = run_wait(o->argv, &s);
		r = mount_stop(t, &m);
		if (r) {
			set_err(err, "the daemon failed at unmount", NULL, r);
			r = r < 0 ? r : -EIO;
			goto out;
		}
		if (st < 0) {
			r = st;
			set_err(err, "cannot run", o->argv[0], -1);
			goto out;
		}
	}
	if (access(log, R_OK) < 0) {
		r = -errno;
		set_err(err, "the daemon saved no log", NULL, -1);
		goto out;
	}
	*status = st;
	r = 0;
out:
	free(img);
	free(log);
	free(mnt);
	free(mntenv);
	free(recenv);
	return r;
}

/* ---- check ------------------------------------------------------------- */

struct checker {
	const struct crash_plan *plan;
	const struct crash_check_opts *o;
	struct crash_result *res;
	pthread_mutex_t lock;
	size_t next, done, failed, repaired;
	uint64_t blocks, full;
	int err; /* first error, -errno */
	struct crash_err where;
};

/* The file's contents, at most the last `tail` bytes (0: all), or NULL. */
static char *slurp(const char *path, size_t tail)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0) {
		size_t want = (size_t)len;

		if (tail && want > tail) {
			fseek(f, len - (long)tail, SEEK_SET);
			want = tail;
		} else {
			fseek(f, 0, SEEK_SET);
		}
		buf = malloc(want + 1);
		if (buf) {
			want = fread(buf, 1, want, f);
			buf[want] = 0;
		}
	}
	fclose(f);
	return buf;
}

struct worker {
	struct checker *c;
	char *dir, *img, *mnt, *fsckout, *out, *mnterr;
	char *env_mnt, *env_img;
	struct crash_cursor *cur;
	pthread_t th;
};

static void fail_with(struct checker *c, int r, const char *what, const char *arg)
{
	pthread_mutex_lock(&c->lock);
	if (!c->err) {
		c->err = r;
		set_err(&c->where, what, arg, -1);
	}
	pthread_mutex_unlock(&c->lock);
}

/* One state: rebuild, repair, mount, check, take the repair back. */
static int check_one(struct worker *w, size_t i)
{
	struct checker *c = w->c;
	const struct crash_check_opts *o = c->o;
	const struct crash_tools *t = o->tools;
	struct crash_result *res = &c->res[i];
	char statenv[64];
	const char *env[] = {w->env_mnt, w->env_img, statenv, NULL};
	int r;

	crash_plan_selected(c->plan, i, &res->st);
	res->fsck_status = res->check_status = -1;
	snprintf(statenv, sizeof(statenv), "FSTITCH_STATE=%zu", res->st.state);
	r = crash_cursor_seek(w->cur, res->st.state);
	if (r) {
		fail_with(c, r, "cannot write a crash state to", w->img);
		return r;
	}
	if (o->fsck != CRASH_FSCK_NONE) {
		char *fsck[] = {(char *)t->e2fsck, o->fsck == CRASH_FSCK_PREEN ? "-fp" : "-fy",
				w->img, NULL};
		struct spawn s = {.out = w->fsckout};

		res->fsck_status = run_wait(fsck, &s);
		if (res->fsck_status < 0 || res->fsck_status >= 126) {
			fail_with(c, res->fsck_status < 0 ? res->fsck_status : -ENOENT,
				  "cannot run", t->e2fsck);
			return -1;
		}
		if (res->fsck_status >= 4)
			res->why = CRASH_FAIL_FSCK;
	}
	if (res->why == CRASH_OK && !o->no_mount) {
		struct spawn d = {.out = w->mnterr};
		struct spawn s = {.cwd = w->mnt, .out = w->out, .env = env};
		struct mount m;

		r = mount_start(t, w->img, w->mnt, o->rw ? "rw" : "ro", &d, &m);
		if (r) {
			res->why = CRASH_FAIL_MOUNT;
			res->check_out = slurp(w->mnterr, 4096);
		} else {
			res->check_status = run_check(o->argv, &s);
			r = mount_stop(t, &m);
			if (r) {
				fail_with(c, r < 0 ? r : -EIO, "the daemon failed at unmount",
					  NULL);
				return -1;
			}
		}
	} else if (res->why == CRASH_OK) {
		struct spawn s = {.out = w->out, .env = env};

		res->check_status = run_check(o->argv, &s);
	}
	if (res->why == CRASH_OK && res->check_status < 0) {
		fail_with(c, res->check_status, "cannot run", o->argv[0]);
		return -1;
	}
	if (res->check_status > 0)
		res->why = CRASH_FAIL_CHECK;
	if (res->why != CRASH_OK) {
		if (res->fsck_status >= 0)
			res->fsck_out = slurp(w->fsckout, 0);
		if (res->why == CRASH_FAIL_CHECK)
			res->check_out = slurp(w->out, 4096);
	}
	/* Put the state back as the crash left it (e2fsck and perhaps the
	 * check wrote to it), so the next state costs only the blocks that
	 * differ.  (A file's mtime is too coarse to tell whether anything
	 * wrote to it: always compare.) */
	r = crash_cursor_resync(w->cur);
	if (r) {
		fail_with(c, r, "cannot write a crash state to", w->img);
		return -1;
	}
	pthread_mutex_lock(&c->lock);
	c->done++;
	c->failed += res->why != CRASH_OK;
	c->repaired += res->fsck_status == 1;
	if (o->progress)
		o->progress(c->done, c->failed, o->arg);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct checker *c = w->c;

	for (;;) {
		size_t i;

		pthread_mutex_lock(&c->lock);
		i = c->err || (c->o->fail_fast && c->failed) ? SIZE_MAX : c->next++;
		pthread_mutex_unlock(&c->lock);
		if (i >= crash_plan_count(c->plan))
			break;
		if (check_one(w, i))
			break;
	}
	return NULL;
}

static void worker_free(struct worker *w)
{
	if (w->cur) {
		pthread_mutex_lock(&w->c->lock);
		w->c->blocks += crash_cursor_blocks_written(w->cur);
		w->c->full += crash_cursor_full_writes(w->cur);
		pthread_mutex_unlock(&w->c->lock);
	}
	crash_cursor_free(w->cur);
	if (w->img) {
		unlink(w->img);
		unlink(w->fsckout);
		unlink(w->out);
		unlink(w->mnterr);
		rmdir(w->mnt);
		rmdir(w->dir);
	}
	free(w->dir);
	free(w->img);
	free(w->mnt);
	free(w->fsckout);
	free(w->out);
	free(w->mnterr);
	free(w->env_mnt);
	free(w->env_img);
}

static int worker_init(struct worker *w, struct checker *c, unsigned k)
{
	int r;

	w->c = c;
	if (asprintf(&w->dir, "%s/j%u", c->o->workdir, k) < 0) {
		w->dir = NULL;
		return -ENOMEM;
	}
	if (mkdir(w->dir, 0700) < 0)
		return -errno;
	w->img = join(w->dir, "state.img");
	w->mnt = join(w->dir, "mnt");
	w->fsckout = join(w->dir, "fsck.out");
	w->out = join(w->dir, "check.out");
	w->mnterr = join(w->dir, "mount.err");
	if (!w->img || !w->mnt || !w->fsckout || !w->out || !w->mnterr ||
	    asprintf(&w->env_mnt, "FSTITCH_MNT=%s", w->mnt) < 0 ||
	    asprintf(&w->env_img, "FSTITCH_IMAGE=%s", w->img) < 0)
		return -ENOMEM;
	if (mkdir(w->mnt, 0700) < 0)
		return -errno;
	r = crash_cursor_open(c->plan, w->img, &w->cur);
	return r;
}

int crash_check(const struct crash_plan *plan, const struct crash_check_opts *o,
		struct crash_result **results, size_t *failed, struct crash_check_stats *stats,
		struct crash_err *err)
{
	struct checker c = {.plan = plan, .o = o};
	unsigned jobs = o->jobs ? o->jobs : 1, k, started = 0;
	size_t n = crash_plan_count(plan);
	struct worker *w;
	int r = 0;

	set_err(err, NULL, NULL, -1);
	if (jobs > n)
		jobs = n ? (unsigned)n : 1;
	c.res = calloc(n ? n : 1, sizeof(*c.res));
	w = calloc(jobs, sizeof(*w));
	if (!c.res || !w) {
		free(c.res);
		free(w);
		return -ENOMEM;
	}
	pthread_mutex_init(&c.lock, NULL);
	for (k = 0; k < jobs; k++) {
		r = worker_init(&w[k], &c, k);
		if (r) {
			set_err(err, "cannot make scratch files in", o->workdir, -1);
			w[k].c = &c;
			jobs = k + 1;
			goto out;
		}
	}
	for (k = 0; k < jobs; k++) {
		r = -pthread_create(&w[k].th, NULL, work, &w[k]);
		if (r) {
			fail_with(&c, r, "cannot start a thread", NULL);
			break;
		}
		started++;
	}
	for (k = 0; k < started; k++)
		pthread_join(w[k].th, NULL);
	if (c.err) {
		r = c.err;
		if (err)
			*err = c.where;
	}
out:
	for (k = 0; k < jobs; k++)
		worker_free(&w[k]);
	free(w);
	pthread_mutex_destroy(&c.lock);
	if (r) {
		crash_results_free(c.res, n);
		return r;
	}
	/* Every state below c.next was taken, and so checked (a worker stops
	 * taking states only on an error or a failure). */
	if (c.next > n)
		c.next = n;
	for (size_t i = c.next; i < n; i++) {
		crash_plan_selected(plan, i, &c.res[i].st);
		c.res[i].fsck_status = c.res[i].check_status = -1;
	}
	*results = c.res;
	*failed = c.failed;
	if (stats) {
		stats->checked = c.next;
		stats->blocks_written = c.blocks;
		stats->full_writes = c.full;
		stats->repaired = c.repaired;
	}
	return 0;
}

void crash_results_free(struct crash_result *r, size_t n)
{
	size_t i;

	if (!r)
		return;
	for (i = 0; i < n; i++) {
		free(r[i].fsck_out);
		free(r[i].check_out);
	}
	free(r);
}

int crash_write_state(const struct crash_plan *plan, size_t n, const char *out)
{
	struct crash_cursor *c;
	int r;

	if (n >= crash_plan_total(plan))
		return -ERANGE;
	r = crash_cursor_open(plan, out, &c);
	if (r)
		return r;
	r = crash_cursor_seek(c, n);
	crash_cursor_free(c);
	return r;
}
