/* Helpers for the ext2 module's tests (see e2test_util.h).  libc only. */
#include <errno.h>
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

const char *e2t_tmpdir(void)
{
	const char *d = getenv("E2T_TMPDIR");
	struct stat st;

	if (d && *d)
		return d;
	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
		return "/dev/shm";
	d = getenv("TMPDIR");
	if (d && *d)
		return d;
	return "/tmp";
}

char *e2t_tmpfile(const char *tag)
{
	char *p;
	int fd;

	if (asprintf(&p, "%s/e2t-%s-XXXXXX", e2t_tmpdir(), tag) < 0)
		return NULL;
	fd = mkstemp(p);
	if (fd < 0) {
		free(p);
		return NULL;
	}
	close(fd);
	return p;
}

char *e2t_tmpdir_new(const char *tag)
{
	char *p;

	if (asprintf(&p, "%s/e2t-%s-XXXXXX", e2t_tmpdir(), tag) < 0)
		return NULL;
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	return p;
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

static void add_finding(struct e2t_fsck *r, char kind, const char *line)
{
	size_t used = strlen(r->findings);

	if (kind == 'B')
		r->nbenign++;
	else
		r->ndangerous++;
	if (used + 8 < sizeof(r->findings))
		snprintf(r->findings + used, sizeof(r->findings) - used, "%c: %s\n", kind, line);
}

/* A line that is only e2fsck's question and our "no" ("Fix? no",
 * "Connect to /lost+found? no"), belonging to the finding above it. */
static int is_answer(const char *l)
{
	size_t n = strlen(l);
	const char *p;

	if (n < 4 || strcmp(l + n - 4, "? no") != 0)
		return 0;
	for (p = l; p < l + n - 4; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == ' ' ||
		      *p == '/' || *p == '+'))
			return 0;
	return 1;
}

/* Which findings soft updates may leave after a crash (design.md §3): a
 * leaked block or inode (bitmap says used, nothing uses it), summary
 * counters, an inode that lost its only name (unattached: it leaks), and a
 * link count that is too high.  Three more are the same leaks seen from
 * another side, and are benign for the same reason:
 *   - "Deleted inode N has zero dtime": an inode cleared whose bitmap bit
 *     is not yet freed;
 *   - "Unconnected directory inode N" (with its "'..' in ... (N) is ...,
 *     should be <The NULL inode>"): a directory with no name, which is the
 *     state between writing a new directory's inode and its entry (mkdir),
 *     or between removing an entry and clearing the inode (rmdir);
 *   - "Inode N, i_blocks is A, should be B" with A > B: the inode counts
 *     blocks that no pointer on disk reaches yet (or any more); those
 *     blocks are leaked, like the "-" bitmap differences that come with
 *     it.  A count that is too low is dangerous;
 *   - "Extended attribute block N has reference count A, should be B"
 *     with A > B: an inode stopped sharing the block and the lowered
 *     count is not on disk yet.  Too low is dangerous (a later free would
 *     leave a pointer to a free block);
 *   - "Entry 'y' in /x (N) is a link to directory /d/y (M)" and "'..' in
 *     /d/y (M) is /x (N), should be /d (P)": a directory renamed from one
 *     parent to another.  The new name must exist before the old one goes
 *     (design.md §4), so with the two entries in different blocks a crash
 *     can leave both; e2fsck keeps one of them (the old name or the new,
 *     as a rename promises).  The directory's link count must still not be
 *     too low, which is checked separately.
 * Everything else is dangerous, because e2fsck would have to destroy or
 * guess something to repair it. */
static char classify_line(const char *l)
{
	unsigned ino, a, b;
	unsigned long long qa, qb;
	const char *p;

	if (!strncmp(l, "Block bitmap differences:", 25) ||
	    !strncmp(l, "Inode bitmap differences:", 25)) {
		/* "+N" means in use but marked free: a later allocation
		 * would hand it out twice. */
		for (p = l + 25; *p; p++)
			if (*p == '+')
				return 'D';
		return 'B';
	}
	if (strstr(l, "count wrong for group") || !strncmp(l, "Free blocks count wrong", 23) ||
	    !strncmp(l, "Free inodes count wrong", 23))
		return 'B';
	if (!strncmp(l, "Unattached inode", 16) || !strncmp(l, "Unattached zero-length inode", 28))
		return 'B';
	if (sscanf(l, "Inode %u ref count is %u, should be %u.", &ino, &a, &b) == 3)
		return a > b ? 'B' : 'D';
	if (sscanf(l, "Deleted inode %u has zero dtime", &ino) == 1)
		return 'B';
	if (sscanf(l, "Unconnected directory inode %u", &ino) == 1)
		return 'B';
	if (!strncmp(l, "Entry '", 7) && strstr(l, ") is a link to directory "))
		return 'B';
	if (!strncmp(l, "'..' in ", 8) && strstr(l, ", should be "))
		return 'B';
	if (sscanf(l, "Inode %u, i_blocks is %llu, should be %llu.", &ino, &qa, &qb) == 3)
		return qa > qb ? 'B' : 'D';
	if (sscanf(l, "Extended attribute block %u has reference count %u, should be %u.", &ino,
		   &a, &b) == 3)
		return a > b ? 'B' : 'D';
	return 'D';
}

void e2t_fsck_classify(const char *output, int status, struct e2t_fsck *r)
{
	const char *p = output ? output : "";
	char line[512];

	memset(r, 0, sizeof(*r));
	r->status = status;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);

		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, p, n);
		line[n] = 0;
		while (n && (line[n - 1] == ' ' || line[n - 1] == '\r' || line[n - 1] == '\t'))
			line[--n] = 0;
		p = nl ? nl + 1 : p + strlen(p);
		if (!n || is_answer(line))
			continue;
		if (!strncmp(line, "e2fsck ", 7) || !strncmp(line, "Pass ", 5) ||
		    strstr(line, "**********") || strstr(line, "non-contiguous)"))
			continue;
		if (status == 0)
			continue; /* clean: chatter only */
		add_finding(r, classify_line(line), line);
	}
	if (status >= 8 || status < 0) {
		add_finding(r, 'D', "e2fsck operational error");
	} else if (status != 0 && r->nbenign == 0 && r->ndangerous == 0) {
		/* Not clean, but nothing we recognise was said. */
		add_finding(r, 'D', "e2fsck reported errors without findings");
	}
	if (r->ndangerous)
		r->verdict = E2T_DANGEROUS;
	else if (r->nbenign)
		r->verdict = E2T_BENIGN;
	else
		r->verdict = E2T_CLEAN;
}

int e2t_fsck_file(const char *path, struct e2t_fsck *r)
{
	char *argv[] = {"e2fsck", "-fn", (char *)path, NULL};
	char *out = NULL;
	int st = e2t_run(argv, &out);

	if (st < 0)
		return st;
	if (st == 127) {
		free(out);
		return -ENOENT;
	}
	e2t_fsck_classify(out, st, r);
	r->output = out;
	return 0;
}

int e2t_fsck_mem(const void *img, size_t len, struct e2t_fsck *r)
{
	char *path = e2t_tmpfile("fsck");
	int ret;

	if (!path)
		return -ENOMEM;
	ret = e2t_write_file(path, img, len);
	if (!ret)
		ret = e2t_fsck_file(path, r);
	unlink(path);
	free(path);
	return ret;
}

void e2t_fsck_free(struct e2t_fsck *r)
{
	free(r->output);
	r->output = NULL;
}

const char *e2t_verdict_name(enum e2t_verdict v)
{
	switch (v) {
	case E2T_CLEAN:
		return "clean";
	case E2T_BENIGN:
		return "benign";
	default:
		return "dangerous";
	}
}

void e2t_fixed_clock(struct timespec *now)
{
	now->tv_sec = 1700000000;
	now->tv_nsec = 123456789;
}

uint64_t e2t_hash(const void *data, size_t len)
{
	const uint64_t *w = data;
	const uint8_t *b;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i, nw = len / 8;

	/* Word at a time: images are megabytes and hashed per crash state. */
	for (i = 0; i < nw; i++) {
		uint64_t v;

		memcpy(&v, w + i, 8);
		h = (h ^ v) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	b = (const uint8_t *)data + nw * 8;
	for (i = 0; i < len % 8; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
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
