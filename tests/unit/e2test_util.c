/* Helpers for the ext2 module's tests (see e2test_util.h).  libc only. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/splitmix.h"
#include "../support/fsckclass.h"
#include "../support/sum.h"
#include "e2test_util.h"

extern char **environ;

void e2t_rng_seed(struct e2t_rng *r, uint64_t seed)
{
	r->s = seed ^ 0x9e3779b97f4a7c15ull;
}

uint64_t e2t_rng_next(struct e2t_rng *r)
{
	return splitmix(&r->s);
}

uint64_t e2t_rng_below(struct e2t_rng *r, uint64_t n)
{
	return n ? e2t_rng_next(r) % n : 0;
}

uint64_t e2t_seed(const char *env, uint64_t def)
{
	const char *v = getenv(env);

	if (!v || !*v)
		return def;
	return strtoull(v, NULL, 0);
}

long e2t_env_long(const char *env, long def)
{
	const char *v = getenv(env);

	if (!v || !*v)
		return def;
	return strtol(v, NULL, 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

void e2t_rm_rf(const char *path)
{
	if (path)
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int e2t_read_file(const char *path, void **data, size_t *len)
{
	struct stat st;
	size_t done = 0;
	void *buf;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, (char *)buf + done, st.st_size - done);

		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			free(buf);
			goto out;
		}
		done += n;
	}
	*data = buf;
	*len = done;
out:
	close(fd);
	return ret;
}

int e2t_write_file(const char *path, const void *data, size_t len)
{
	size_t done = 0;
	int fd, ret = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t n = write(fd, (const char *)data + done, len - done);

		if (n < 0) {
			ret = -errno;
			goto out;
		}
		done += n;
	}
out:
	if (close(fd) < 0 && !ret)
		ret = -errno;
	return ret;
}

/* Find a command in PATH, then /usr/sbin and /sbin (where e2fsprogs live,
 * and which a non-root PATH may lack).  0 and the path in buf, or -ENOENT. */
static int find_cmd(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[4096], *dir, *save;

	if (strchr(name, '/')) {
		snprintf(buf, len, "%s", name);
		return 0;
	}
	snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/sbin", path ? path : "/usr/bin:/bin");
	for (dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		snprintf(buf, len, "%s/%s", *dir ? dir : ".", name);
		if (access(buf, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

int e2t_run(char *const argv[], char **out)
{
	posix_spawn_file_actions_t fa;
	size_t len = 0, cap = 4096;
	char *buf = NULL, cmd[4096];
	int pfd[2], status, ret;
	pid_t pid;

	if (find_cmd(argv[0], cmd, sizeof(cmd)))
		return 127;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	/* posix_spawn, not fork: it does not copy the page tables, which
	 * under the address sanitizer's shadow memory made every e2fsck run
	 * cost tens of milliseconds of system time. */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	ret = posix_spawn(&pid, cmd, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (ret) {
		close(pfd[0]);
		return -ret;
	}
	buf = malloc(cap);
	for (;;) {
		ssize_t n;

		if (buf && len + 1024 > cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb) {
				free(buf);
				buf = NULL;
			} else {
				buf = nb;
				cap *= 2;
			}
		}
		if (buf) {
			n = read(pfd[0], buf + len, cap - len - 1);
		} else {
			char sink[1024];

			n = read(pfd[0], sink, sizeof(sink));
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (buf)
			len += n;
	}
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			free(buf);
			return -errno;
		}
	}
	if (buf)
		buf[len] = 0;
	if (out)
		*out = buf;
	else
		free(buf);
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

int e2t_sh(const char *cmd, char **out)
{
	char *argv[] = {"sh", "-c", (char *)cmd, NULL};

	return e2t_run(argv, out);
}

int e2t_mkfs(const char *path, unsigned size_kib, unsigned block_size, const char *extra,
	     char **msg)
{
	char bs[16], size[24], *argv[64], *copy = NULL, *tok, *save;
	int n = 0, ret;

	snprintf(bs, sizeof(bs), "%u", block_size);
	snprintf(size, sizeof(size), "%uk", size_kib);
	argv[n++] = "mke2fs";
	argv[n++] = "-q";
	argv[n++] = "-F";
	/* ext2 unless the caller names another type */
	if (!extra || strncmp(extra, "-t ", 3)) {
		argv[n++] = "-t";
		argv[n++] = "ext2";
	}
	argv[n++] = "-b";
	argv[n++] = bs;
	if (extra) {
		copy = strdup(extra);
		if (!copy)
			return -ENOMEM;
		for (tok = strtok_r(copy, " ", &save); tok && n < 58;
		     tok = strtok_r(NULL, " ", &save))
			argv[n++] = tok;
	}
	argv[n++] = (char *)path;
	argv[n++] = size;
	argv[n] = NULL;
	ret = e2t_run(argv, msg);
	free(copy);
	return ret;
}

int e2t_mkfs_mem(unsigned size_kib, unsigned block_size, const char *extra, void **img, size_t *len)
{
	char *path = e2t_tmpfile("mkfs");
	int ret;

	if (!path)
		return -errno ? -errno : -ENOMEM;
	ret = e2t_mkfs(path, size_kib, block_size, extra, NULL);
	if (ret == 0)
		ret = e2t_read_file(path, img, len);
	else if (ret > 0)
		ret = -EINVAL;
	unlink(path);
	free(path);
	return ret;
}

/* ---- e2fsck ---------------------------------------------------------- */

/* Run e2fsck with one option on path; its status, output to *out. */
static int fsck_run(const char *opt, const char *path, char **out)
{
	char *argv[] = {"e2fsck", (char *)opt, (char *)path, NULL};

	*out = NULL;
	return e2t_run(argv, out);
}

static void append(char **dst, const char *head, const char *text)
{
	size_t a = *dst ? strlen(*dst) : 0, b = strlen(head), c = text ? strlen(text) : 0;
	char *n = realloc(*dst, a + b + c + 1);

	if (!n)
		return;
	memcpy(n + a, head, b);
	memcpy(n + a + b, text ? text : "", c);
	n[a + b + c] = 0;
	*dst = n;
}

/* Append a step of the transcript: its header, then its output. */
static void add_step(char **text, enum fsck_step step, int status, const char *out)
{
	char head[64];
	size_t n;

	fsck_header(head, sizeof(head), step, status);
	append(text, head, out);
	n = *text ? strlen(*text) : 0;
	if (n && (*text)[n - 1] != '\n')
		append(text, "\n", NULL);
}

/* Fill r from the judge of tests/support (fsckclass.h), the one the bats
 * tests use too, on the transcript text, which r takes. */
static int judge(char *text, struct e2t_fsck *r)
{
	struct fsck_verdict v;
	char err[256];
	size_t used = 0;
	int ret;

	r->output = text;
	ret = fsck_judge(text ? text : "", text ? strlen(text) : 0, &v, err, sizeof(err));
	if (ret) {
		/* our own transcript: a bug here, say what */
		fprintf(stderr, "e2test_util: the e2fsck transcript is refused: %s\n", err);
		return ret;
	}
	r->status = v.status[FSCK_CHECK];
	r->repair_status = v.status[FSCK_REPAIR] < 0 ? 0 : v.status[FSCK_REPAIR];
	r->verdict = v.class;
	r->nbenign = v.nbenign;
	r->ndangerous = v.ndangerous;
	r->nrepair = v.nrepair;
	/* as many whole lines as fit */
	for (const char *l = v.findings; *l;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) + 1 : strlen(l);

		if (used + n >= sizeof(r->findings))
			break;
		memcpy(r->findings + used, l, n);
		used += n;
		l += n;
	}
	r->findings[used] = 0;
	fsck_verdict_free(&v);
	return 0;
}

static int fsck_file(const char *path, struct e2t_fsck *r, void **fixed, size_t *flen)
{
	char *out = NULL, *text = NULL, *copy = NULL;
	enum fsck_step step;
	void *img = NULL;
	size_t len;
	int st, ret = 0;

	memset(r, 0, sizeof(*r));
	if (fixed)
		*fixed = NULL;

	st = fsck_run("-fn", path, &out);
	if (st < 0)
		return st;
	if (st == 127) {
		free(out);
		return -ENOENT;
	}
	add_step(&text, FSCK_CHECK, st, out);
	free(out);
	step = fsck_next_step(FSCK_CHECK, st);
	if (step != FSCK_NSTEPS) {
		/* Not clean: the repair, on a copy. */
		copy = e2t_tmpfile("repair");
		if (!copy) {
			free(text);
			return -ENOMEM;
		}
		ret = e2t_read_file(path, &img, &len);
		if (!ret)
			ret = e2t_write_file(copy, img, len);
		free(img);
		for (; !ret && step != FSCK_NSTEPS; step = fsck_next_step(step, st)) {
			st = fsck_run(step == FSCK_REPAIR ? "-fy" : "-fn", copy, &out);
			if (st < 0) {
				ret = st;
				break;
			}
			add_step(&text, step, st, out);
			free(out);
		}
		if (ret) {
			free(text);
			goto out;
		}
	}
	ret = judge(text, r);
	if (!ret && fixed && copy) /* what the user gets: e2fsck -fy's repair */
		ret = e2t_read_file(copy, fixed, flen);
out:
	if (copy) {
		unlink(copy);
		free(copy);
	}
	return ret;
}

int e2t_fsck_file(const char *path, struct e2t_fsck *r)
{
	return fsck_file(path, r, NULL, NULL);
}

int e2t_fsck_mem_repair(const void *img, size_t len, struct e2t_fsck *r, void **fixed, size_t *flen)
{
	char *path = e2t_tmpfile("fsck");
	int ret;

	if (!path)
		return -ENOMEM;
	ret = e2t_write_file(path, img, len);
	if (!ret)
		ret = fsck_file(path, r, fixed, flen);
	unlink(path);
	free(path);
	return ret;
}

int e2t_fsck_mem(const void *img, size_t len, struct e2t_fsck *r)
{
	return e2t_fsck_mem_repair(img, len, r, NULL, NULL);
}

void e2t_fsck_free(struct e2t_fsck *r)
{
	free(r->output);
	r->output = NULL;
}

void e2t_fixed_clock(struct timespec *now)
{
	now->tv_sec = 1700000000;
	now->tv_nsec = 123456789;
}

uint64_t e2t_hash(const void *data, size_t len)
{
	return e2t_sum_more(E2T_SUM_START, data, len);
}

static char *scratch_path;

int e2t_remove_scratch(void **state)
{
	(void)state;
	if (scratch_path) {
		unlink(scratch_path);
		free(scratch_path);
		scratch_path = NULL;
	}
	return 0;
}

char *e2t_scratch_file(const char *tag)
{
	char *path = e2t_tmpfile(tag);

	e2t_remove_scratch(NULL);
	scratch_path = path ? strdup(path) : NULL;
	return path;
}
