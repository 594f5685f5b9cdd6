/* e2tool: copy trees in and out of an ext2 image through lib/ext2/e2.h, for the
 * interoperability tests (tests/e2-interop.bats).
 *
 *   e2tool [OPTION...] IMAGE put SRC_DIR DEST   copy SRC_DIR's contents into DEST
 *   e2tool [OPTION...] IMAGE get SRC DEST_DIR   copy SRC's contents into DEST_DIR
 *   e2tool [OPTION...] IMAGE ls PATH            list a directory
 *   e2tool [OPTION...] IMAGE cat PATH           write a file to stdout
 *   e2tool IMAGE recover                        replay the journal if it needs
 *                                               it, change nothing else
 *   e2tool IMAGE replay-check [OUT]             the fast path of common.bash's
 *                                               journal_replay_check (below)
 *   e2tool IMAGE fsck-class                     judge IMAGE as common.bash's
 *                                               fsck_run does (below)
 *   e2tool IMAGE same-but-wtime OTHER           0 when the two files are the
 *                                               same but for s_wtime, else 1
 *                                               and where they differ
 *   e2tool [OPTION...] IMAGE open               open read-write as fstitch-mount
 *                                               does (replay, orphan list),
 *                                               close; mode as fstitch-mount's
 *                                               default unless -c is given
 *
 * Exit status: 0 success, 1 failure, 64 usage; replay-check and fsck-class
 * also 2 and 3.
 */
#include <argp.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ext2/e2.h"
#include "../support/fsckclass.h"
#include "../support/scratch.h"
#include "../support/sum.h"

#define EX_USAGE_ 64
#define CHUNK	  (64 * 1024)

static const char *prog = "e2tool";

struct args {
	struct e2_opts opts;
	bool has_c;
	char *argv[4];
	int argc;
};

static const struct argp_option options[] = {
    {"consistency", 'c', "MODE", 0,
     "softupdates (default; for open: journal with a journal), none or journal", 0},
    {"cache-blocks", 'b', "N", 0, "blocks in the cache", 0},
    {0}};

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct args *a = state->input;

	switch (key) {
	case 'c':
		if (!strcmp(arg, "none"))
			a->opts.consistency = CONSISTENCY_NONE;
		else if (!strcmp(arg, "softupdates"))
			a->opts.consistency = CONSISTENCY_SOFTUPDATES;
		else if (!strcmp(arg, "journal"))
			a->opts.consistency = CONSISTENCY_JOURNAL;
		else
			argp_error(state, "unknown consistency mode '%s'", arg);
		a->has_c = true;
		break;
	case 'b':
		a->opts.cache_blocks = strtoul(arg, NULL, 0);
		break;
	case ARGP_KEY_ARG:
		if (a->argc >= 4)
			argp_error(state, "too many arguments");
		a->argv[a->argc++] = arg;
		break;
	case ARGP_KEY_END:
		if (a->argc < 3 &&
		    !(a->argc == 2 && (!strcmp(a->argv[1], "recover") ||
				       !strcmp(a->argv[1], "replay-check") ||
				       !strcmp(a->argv[1], "fsck-class") || !strcmp(a->argv[1], "open"))))
			argp_error(state, "missing arguments");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static const struct argp argp = {
    options,
    parse_opt,
    "IMAGE put SRC_DIR DEST\nIMAGE get SRC DEST_DIR\nIMAGE ls PATH\n"
    "IMAGE cat PATH\nIMAGE recover\nIMAGE replay-check [OUT]\nIMAGE fsck-class\n"
    "IMAGE same-but-wtime OTHER\nIMAGE open",
    "Copy trees into and out of an ext2 image through libfstitch (a test tool)."
    "\vExit status: 0 success, 1 failure, 64 usage.",
    NULL,
    NULL,
    NULL};

/* Walk path from the root; *st gets the last component's attributes. */
static int resolve(struct e2fs *fs, const char *path, struct stat *st)
{
	char *copy = strdup(path), *tok, *save;
	uint32_t ino = E2_ROOT_INO;
	int ret;

	if (!copy)
		return -ENOMEM;
	ret = e2_getattr(fs, ino, st);
	for (tok = strtok_r(copy, "/", &save); tok && !ret; tok = strtok_r(NULL, "/", &save)) {
		ret = e2_lookup(fs, ino, tok, st);
		if (!ret) {
			ino = st->st_ino;
			e2_forget(fs, ino, 1);
		}
	}
	free(copy);
	return ret;
}

static int set_times(struct e2fs *fs, uint32_t ino, const struct stat *hs)
{
	struct stat a = *hs, out;

	return e2_setattr(fs, NULL, ino, &a, E2_SET_MODE | E2_SET_ATIME | E2_SET_MTIME, &out);
}

/* ---- put ---------------------------------------------------------------- */

struct hl {
	dev_t dev;
	ino_t ino;
	uint32_t e2ino;
	char *path;
};

static struct hl *links;
static size_t nlinks;

static struct hl *hl_find_host(dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < nlinks; i++)
		if (links[i].dev == dev && links[i].ino == ino)
			return &links[i];
	return NULL;
}

static struct hl *hl_find_e2(uint32_t e2ino)
{
	for (size_t i = 0; i < nlinks; i++)
		if (links[i].e2ino == e2ino)
			return &links[i];
	return NULL;
}

static int hl_add(dev_t dev, ino_t ino, uint32_t e2ino, const char *path)
{
	struct hl *n = realloc(links, (nlinks + 1) * sizeof(*links));

	if (!n)
		return -ENOMEM;
	links = n;
	links[nlinks].dev = dev;
	links[nlinks].ino = ino;
	links[nlinks].e2ino = e2ino;
	links[nlinks].path = path ? strdup(path) : NULL;
	nlinks++;
	return 0;
}

static int put_file(struct e2fs *fs, uint32_t ino, const char *src, const struct stat *hs)
{
	char *buf = malloc(CHUNK);
	off_t pos = 0, data, hole;
	int fd, ret = 0;

	if (!buf)
		return -ENOMEM;
	fd = open(src, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	/* Copy only the data regions so a sparse file stays sparse. */
	while (pos < hs->st_size) {
		data = lseek(fd, pos, SEEK_DATA);
		if (data < 0)
			break; /* only a hole is left */
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			hole = hs->st_size;
		for (pos = data; pos < hole;) {
			size_t want = hole - pos > CHUNK ? CHUNK : (size_t)(hole - pos);
			ssize_t n = pread(fd, buf, want, pos), w;

			if (n <= 0) {
				ret = n < 0 ? -errno : -EIO;
				goto out;
			}
			w = e2_write(fs, NULL, ino, buf, n, pos);
			if (w < 0) {
				ret = w;
				goto out;
			}
			if (w != n) {
				ret = -EIO;
				goto out;
			}
			pos += n;
		}
	}
	if (hs->st_size > pos) {
		struct stat a = {.st_size = hs->st_size}, o;

		ret = e2_setattr(fs, NULL, ino, &a, E2_SET_SIZE, &o);
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

static int put_tree(struct e2fs *fs, const char *src, uint32_t dir)
{
	struct dirent *de;
	DIR *d = opendir(src);
	int ret = 0;

	if (!d) {
		fprintf(stderr, "%s: cannot open '%s': %s\n", prog, src, strerror(errno));
		return -errno;
	}
	while (!ret && (de = readdir(d))) {
		struct stat hs, st;
		struct hl *h;
		char *p;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&p, "%s/%s", src, de->d_name) < 0)
			return -ENOMEM;
		if (lstat(p, &hs) < 0) {
			ret = -errno;
			fprintf(stderr, "%s: cannot stat '%s': %s\n", prog, p, strerror(errno));
			free(p);
			break;
		}
		if (!S_ISDIR(hs.st_mode) && hs.st_nlink > 1 &&
		    (h = hl_find_host(hs.st_dev, hs.st_ino))) {
			ret = e2_link(fs, NULL, h->e2ino, dir, de->d_name, &st);
			if (!ret)
				e2_forget(fs, st.st_ino, 1);
			goto next;
		}
		if (S_ISDIR(hs.st_mode))
			ret = e2_mkdir(fs, NULL, dir, de->d_name, hs.st_mode & 07777, hs.st_uid,
				       hs.st_gid, &st);
		else if (S_ISLNK(hs.st_mode)) {
			char target[4097];
			ssize_t n = readlink(p, target, sizeof(target) - 1);

			if (n < 0) {
				ret = -errno;
				goto next;
			}
			target[n] = 0;
			ret = e2_symlink(fs, NULL, dir, de->d_name, target, hs.st_uid, hs.st_gid,
					 &st);
		} else
			ret = e2_mknod(fs, NULL, dir, de->d_name, hs.st_mode, hs.st_rdev, hs.st_uid,
				       hs.st_gid, &st);
		if (ret)
			goto next;
		e2_forget(fs, st.st_ino, 1);
		if (!S_ISDIR(hs.st_mode) && hs.st_nlink > 1)
			ret = hl_add(hs.st_dev, hs.st_ino, st.st_ino, NULL);
		if (!ret && S_ISREG(hs.st_mode))
			ret = put_file(fs, st.st_ino, p, &hs);
		if (!ret && S_ISDIR(hs.st_mode))
			ret = put_tree(fs, p, st.st_ino);
		/* Times last: writing into the file or directory changes them. */
		if (!ret && !S_ISLNK(hs.st_mode))
			ret = set_times(fs, st.st_ino, &hs);
	next:
		if (ret)
			fprintf(stderr, "%s: cannot copy '%s' into the image: %s\n", prog, p,
				strerror(-ret));
		free(p);
	}
	closedir(d);
	return ret;
}

/* ---- get ---------------------------------------------------------------- */

struct ent {
	char *name;
	uint32_t ino;
};

struct entlist {
	struct ent *v;
	size_t n;
	int err;
};

static int collect(const struct e2_dirent *d, void *arg)
{
	struct entlist *l = arg;
	struct ent *nv;

	if ((d->name_len == 1 && d->name[0] == '.') ||
	    (d->name_len == 2 && d->name[0] == '.' && d->name[1] == '.'))
		return 0;
	nv = realloc(l->v, (l->n + 1) * sizeof(*l->v));
	if (!nv) {
		l->err = -ENOMEM;
		return 1;
	}
	l->v = nv;
	l->v[l->n].name = strndup(d->name, d->name_len);
	l->v[l->n].ino = d->ino;
	if (!l->v[l->n].name) {
		l->err = -ENOMEM;
		return 1;
	}
	l->n++;
	return 0;
}

static int list_dir(struct e2fs *fs, uint32_t ino, struct entlist *l)
{
	int ret;

	memset(l, 0, sizeof(*l));
	ret = e2_readdir(fs, ino, 0, collect, l);
	return ret ? ret : l->err;
}

static void free_list(struct entlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
}

static int get_file(struct e2fs *fs, uint32_t ino, const char *dst, const struct stat *st)
{
	static const char zero[CHUNK];
	char *buf = malloc(CHUNK);
	off_t pos = 0;
	int fd, ret = 0;

	if (!buf)
		return -ENOMEM;
	fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	for (;;) {
		ssize_t n = e2_read(fs, ino, buf, CHUNK, pos);

		if (n < 0) {
			ret = n;
			goto out;
		}
		if (n == 0)
			break;
		/* Leave zero runs as holes, like cp --sparse=auto. */
		if (memcmp(buf, zero, n) && pwrite(fd, buf, n, pos) != n) {
			ret = -errno;
			goto out;
		}
		pos += n;
	}
	if (pos != st->st_size) {
		fprintf(stderr, "%s: '%s': read %lld bytes of %lld\n", prog, dst, (long long)pos,
			(long long)st->st_size);
		ret = -EIO;
		goto out;
	}
	if (ftruncate(fd, pos) < 0)
		ret = -errno;
out:
	if (fd >= 0 && close(fd) < 0 && !ret)
		ret = -errno;
	free(buf);
	return ret;
}

static int set_host_attrs(const char *dst, const struct stat *st)
{
	struct timespec ts[2] = {st->st_atim, st->st_mtim};

	if (lchown(dst, st->st_uid, st->st_gid) < 0 && errno != EPERM)
		return -errno;
	if (!S_ISLNK(st->st_mode) && chmod(dst, st->st_mode & 07777) < 0)
		return -errno;
	if (utimensat(AT_FDCWD, dst, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

static int get_tree(struct e2fs *fs, uint32_t dir, const char *dst)
{
	struct entlist l;
	int ret = list_dir(fs, dir, &l);

	for (size_t i = 0; !ret && i < l.n; i++) {
		struct stat st;
		struct hl *h;
		char *p;

		if (asprintf(&p, "%s/%s", dst, l.v[i].name) < 0) {
			ret = -ENOMEM;
			break;
		}
		ret = e2_lookup(fs, dir, l.v[i].name, &st);
		if (ret)
			goto next;
		e2_forget(fs, st.st_ino, 1);
		if (st.st_ino != l.v[i].ino) {
			fprintf(stderr, "%s: '%s': readdir says inode %u, lookup %llu\n", prog, p,
				l.v[i].ino, (unsigned long long)st.st_ino);
			ret = -EIO;
			goto next;
		}
		if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 && (h = hl_find_e2(st.st_ino))) {
			if (link(h->path, p) < 0)
				ret = -errno;
			goto next;
		}
		if (S_ISDIR(st.st_mode)) {
			if (mkdir(p, 0700) < 0)
				ret = -errno;
			else
				ret = get_tree(fs, st.st_ino, p);
		} else if (S_ISREG(st.st_mode)) {
			ret = get_file(fs, st.st_ino, p, &st);
		} else if (S_ISLNK(st.st_mode)) {
			char target[4097];
			int n = e2_readlink(fs, st.st_ino, target, sizeof(target) - 1);

			if (n < 0) {
				ret = n;
				goto next;
			}
			target[n] = 0;
			if (symlink(target, p) < 0)
				ret = -errno;
		} else if (mknod(p, st.st_mode, st.st_rdev) < 0) {
			ret = -errno;
		}
		if (!ret)
			ret = set_host_attrs(p, &st);
		if (!ret && !S_ISDIR(st.st_mode) && st.st_nlink > 1)
			ret = hl_add(0, 0, st.st_ino, p);
	next:
		if (ret)
			fprintf(stderr, "%s: cannot copy '%s' out of the image: %s\n", prog, p,
				strerror(-ret));
		free(p);
	}
	free_list(&l);
	return ret;
}

/* ---- ls, cat ------------------------------------------------------------ */

static int do_ls(struct e2fs *fs, const char *path)
{
	struct entlist l;
	struct stat st;
	int ret = resolve(fs, path, &st);

	if (ret)
		return ret;
	ret = list_dir(fs, st.st_ino, &l);
	for (size_t i = 0; !ret && i < l.n; i++) {
		struct stat es;

		ret = e2_lookup(fs, st.st_ino, l.v[i].name, &es);
		if (ret)
			break;
		e2_forget(fs, es.st_ino, 1);
		printf("%u %o %lu %lld %s\n", l.v[i].ino, (unsigned)es.st_mode,
		       (unsigned long)es.st_nlink, (long long)es.st_size, l.v[i].name);
	}
	free_list(&l);
	return ret;
}

static int do_cat(struct e2fs *fs, const char *path)
{
	char buf[CHUNK];
	struct stat st;
	off_t pos = 0;
	int ret = resolve(fs, path, &st);

	while (!ret) {
		ssize_t n = e2_read(fs, st.st_ino, buf, sizeof(buf), pos);

		if (n < 0)
			ret = n;
		if (n <= 0)
			break;
		if (fwrite(buf, 1, n, stdout) != (size_t)n)
			ret = -EIO;
		pos += n;
	}
	return ret;
}

/* ---- replay-check ------------------------------------------------------- */

/* The check of one journal crash state, in one process: crash tests run it
 * once per state, where the shell version's dozen commands cost more than
 * the replays.  Both replays run on copies of IMAGE, which is not changed:
 * fstitch's (e2_recover) and `e2fsck -E journal_only -y` (status 4 or more
 * fails).  The two results must be equal but for the superblock's s_wtime
 * (bytes 1072-1075, which e2fsck stamps), and then the result is judged
 * as fsck_run judges an image (fsckclass.h): a journal must leave it
 * clean.  Exit 0 when it is; when both replays succeeded alike but it is
 * not, 2 for benign (with e2fsck's transcript) and 3 for dangerous (with
 * why); 1, saying why, when a replay failed or the two differ.  A line
 * says so when fstitch's replay leaves an orphan list, pass or fail.  OUT,
 * if given, keeps e2fsck's replayed image; otherwise the copies are
 * scratch files (e2t_tmpfile: $E2T_TMPDIR if set) and are removed. */

#define WTIME_OFF 1072
#define WTIME_LEN 4

/* Read up to len bytes at off; the count read (short only at the end). */
static ssize_t read_at(int fd, char *buf, size_t len, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, off + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Write len bytes at off.  0 or -errno. */
static int write_at(int fd, const char *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

/* The first offset at or after off where fd may hold data: off itself
 * where the file system cannot say, INT64_MAX past the last data. */
static off_t next_data(int fd, off_t off)
{
	off_t d = lseek(fd, off, SEEK_DATA);

	if (d >= 0)
		return d;
	return errno == ENXIO ? INT64_MAX : off;
}

#define COPY_CHUNK (1 << 16)
#define COPY_PAGE  4096

/* Whether the page of buf (n bytes) at i is all zeros; its length in *len. */
static bool zero_page(const char *buf, size_t n, size_t i, size_t *len)
{
	const char *p = buf + i;

	*len = n - i < COPY_PAGE ? n - i : COPY_PAGE;
	return !p[0] && !memcmp(p, p + 1, *len - 1);
}

/* Copy file from to file to (made or truncated), leaving a hole for each
 * hole and each page of zeros of from.  A crash state of a small file
 * system is mostly zeros, and on a tmpfs every page written is a page
 * taken (and freed again when the copy goes) where a hole reads back the
 * same zeros for nothing. */
static int copy_file(const char *from, const char *to)
{
	static char buf[COPY_CHUNK];
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, ret = 0;
	struct stat st;
	off_t off = 0;

	if (in < 0)
		return -errno;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0 || fstat(in, &st) < 0 || ftruncate(out, st.st_size) < 0) {
		ret = -errno;
		goto out;
	}
	while ((off = next_data(in, off)) < st.st_size) {
		ssize_t n = read_at(in, buf, sizeof(buf), off);
		size_t i = 0, j, len;

		if (n <= 0) {
			ret = (int)n;
			break;
		}
		/* each run of pages that are not zeros written at once */
		while (i < (size_t)n) {
			while (i < (size_t)n && zero_page(buf, (size_t)n, i, &len))
				i += len;
			for (j = i; j < (size_t)n && !zero_page(buf, (size_t)n, j, &len);)
				j += len;
			if (j > i) {
				ret = write_at(out, buf + i, j - i, off + (off_t)i);
				if (ret)
					goto out;
			}
			i = j;
		}
		off += n;
	}
out:
	if (out >= 0 && close(out) < 0 && !ret)
		ret = -errno;
	close(in);
	return ret;
}

/* Compare files an and bn but for s_wtime, a chunk at a time; where they
 * differ, print it as `cmp -l` does (offset from 1, then each byte in
 * octal), at most 10 lines.  0 equal, 1 different, or -errno.  With bsum,
 * when equal, *bsum gets a sum of bn but its s_wtime, taken from what the
 * comparison read: bn's size, then each chunk's offset, length and bytes
 * (s_wtime's as zeros).  What was not read is a hole in both files, so
 * files of the same sum hold the same bytes but for s_wtime; the same
 * bytes with other holes give another sum, which costs only a verdict
 * found again (judge_replayed()). */
static int compare_but_wtime(const char *an, const char *bn, uint64_t *bsum)
{
	static char a[1 << 16], b[1 << 16];
	int fa = open(an, O_RDONLY | O_CLOEXEC), fb = open(bn, O_RDONLY | O_CLOEXEC);
	struct stat sa, sb;
	unsigned shown = 0;
	off_t off = 0, end;
	uint64_t h;
	int ret = 0;

	if (fa < 0 || fb < 0 || fstat(fa, &sa) < 0 || fstat(fb, &sb) < 0) {
		ret = -errno;
		goto out;
	}
	end = sa.st_size < sb.st_size ? sa.st_size : sb.st_size;
	h = e2t_sum_more(E2T_SUM_START, &sb.st_size, sizeof(sb.st_size));
	while (shown < 10) {
		ssize_t na, nb;
		size_t n;
		/* (a stretch that is a hole in both is zeros in both) */
		off_t da = next_data(fa, off), db = next_data(fb, off);

		if (da > off && db > off)
			off = da < db ? (da < end ? da : end) : (db < end ? db : end);
		na = read_at(fa, a, sizeof(a), off);
		nb = read_at(fb, b, sizeof(b), off);

		if (na < 0 || nb < 0) {
			ret = na < 0 ? (int)na : (int)nb;
			break;
		}
		n = (size_t)(na < nb ? na : nb);
		/* (s_wtime is not compared: zeros in it change nothing) */
		for (off_t at = WTIME_OFF; at < WTIME_OFF + WTIME_LEN; at++)
			if (at >= off && at < off + nb)
				b[at - off] = 0;
		h = e2t_sum_more(h, &off, sizeof(off));
		h = e2t_sum_more(h, &nb, sizeof(nb));
		h = e2t_sum_more(h, b, (size_t)nb);
		if (n == sizeof(a) && !memcmp(a, b, n) && (off >= WTIME_OFF + WTIME_LEN)) {
			off += (off_t)n;
			continue;
		}
		for (size_t i = 0; i < n && shown < 10; i++) {
			off_t at = off + (off_t)i;

			if (a[i] == b[i] || (at >= WTIME_OFF && at < WTIME_OFF + WTIME_LEN))
				continue;
			if (!shown)
				printf("'%s' and '%s' differ (offset from 1, octal bytes):\n", an,
				       bn);
			printf("%7lld %3o %3o\n", (long long)at + 1, (unsigned char)a[i],
			       (unsigned char)b[i]);
			shown++;
		}
		if (na != nb) {
			if (!shown)
				printf("'%s' and '%s' differ in size\n", an, bn);
			shown++;
			break;
		}
		if ((size_t)na < sizeof(a))
			break;
		off += (off_t)n;
	}
	if (!ret)
		ret = shown ? 1 : 0;
	if (!ret && bsum)
		*bsum = h;
out:
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return ret;
}

/* Run argv (found in PATH) with stdin from /dev/null and stdout and stderr
 * into *out (NUL-terminated); its exit status, or 128 + signal, or -errno. */
static int run_capture(char *const argv[], char **out)
{
	extern char **environ;
	posix_spawn_file_actions_t fa;
	size_t len = 0, cap = 8192;
	char *buf = malloc(cap);
	int pfd[2], st, r;
	pid_t pid;

	*out = NULL;
	if (!buf)
		return -ENOMEM;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		free(buf);
		return -errno;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (r) {
		close(pfd[0]);
		free(buf);
		return -r;
	}
	for (;;) {
		ssize_t n;

		if (len + 1 == cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		n = read(pfd[0], buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(pfd[0]);
	buf[len] = 0;
	*out = buf;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Judge path as fsck_run does, by the shared rules (fsckclass.h): e2fsck
 * -fn on it, then the steps fsck_next_step asks for (e2fsck -fy and -fn
 * on a scratch copy).  FSCK_CLEAN, FSCK_BENIGN or FSCK_DANGEROUS, with
 * what e2fsck said (the transcript) or why (fsck_why) in *say (malloc'd;
 * NULL for a clean one); or -1 having said why e2fsck could not judge. */
static int fsck_class_of(const char *path, char **say)
{
	enum fsck_step step = FSCK_CHECK;
	struct fsck_verdict v;
	char *copy = NULL, *text = NULL, *out = NULL, err[256] = "";
	size_t len = 0;
	int st = 0, ret = -1;

	*say = NULL;
	for (; step != FSCK_NSTEPS; step = fsck_next_step(step, st)) {
		char *argv[] = {"e2fsck", step == FSCK_REPAIR ? "-fy" : "-fn", NULL, NULL};
		char hdr[64];
		size_t hn, on;
		char *t;

		if (step == FSCK_REPAIR) {
			copy = e2t_tmpfile("repair");
			if (!copy || copy_file(path, copy)) {
				fprintf(stderr, "%s: cannot copy '%s' for e2fsck -fy\n", prog,
					path);
				goto out;
			}
		}
		argv[2] = (char *)(step == FSCK_CHECK ? path : copy);
		free(out);
		out = NULL;
		st = run_capture(argv, &out);
		if (st < 0 || st == 126 || st == 127) {
			fprintf(stderr, "%s: cannot run e2fsck: %d\n", prog, st);
			goto out;
		}
		hn = (size_t)fsck_header(hdr, sizeof(hdr), step, st);
		on = out ? strlen(out) : 0;
		t = realloc(text, len + hn + on + 2);
		if (!t)
			goto out;
		text = t;
		memcpy(text + len, hdr, hn);
		len += hn;
		memcpy(text + len, out ? out : "", on);
		len += on;
		/* (a last line without its newline would swallow the next header) */
		if (on && out[on - 1] != '\n')
			text[len++] = '\n';
		text[len] = 0;
	}
	if (fsck_judge(text ? text : "", len, &v, err, sizeof(err))) {
		fprintf(stderr, "%s: cannot judge e2fsck's transcript: %s\n", prog, err);
		goto out;
	}
	ret = (int)v.class;
	if (v.class == FSCK_BENIGN) {
		*say = text;
		text = NULL;
	} else if (v.class == FSCK_DANGEROUS) {
		*say = fsck_why(&v);
	}
	fsck_verdict_free(&v);
out:
	if (copy) {
		unlink(copy);
		free(copy);
	}
	free(out);
	free(text);
	return ret;
}

/* 1 if the file system in path has an orphan list, 0 if not, -errno. */
static int has_orphans(const char *path)
{
	unsigned char b[4];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, b, sizeof(b), 1024 + 232); /* s_last_orphan */
	close(fd);
	if (n != (ssize_t)sizeof(b))
		return n < 0 ? -errno : -EIO;
	return (b[0] | b[1] | b[2] | b[3]) != 0;
}

/* A copy of the replayed image opened read-write and closed, as a mount
 * does (which frees the orphans): e2fsck -fn must find nothing.  0, or 1
 * having said why. */
static int orphans_by_fstitch(const char *replayed)
{
	struct e2_opts o = {.consistency_auto = true};
	char *path = e2t_tmpfile("orphans"), *text = NULL;
	struct e2fs *fs;
	int r, st, ret = 1;

	if (!path || copy_file(replayed, path)) {
		fprintf(stderr, "%s: cannot copy '%s'\n", prog, replayed);
		goto out;
	}
	r = e2_open(path, &o, &fs);
	if (r) {
		printf("fstitch's open after the replay failed: %s (%s)\n", strerror(-r),
		       e2_open_error());
		goto out;
	}
	r = e2_close(fs);
	if (r) {
		printf("fstitch's close after the orphans failed: %s\n", strerror(-r));
		goto out;
	}
	st = fsck_class_of(path, &text);
	if (st < 0)
		goto out;
	if (st != FSCK_CLEAN) {
		printf("e2fsck -fn after fstitch's orphan processing does not find it clean "
		       "(%s):\n%s",
		       fsck_class_name((enum fsck_class)st), text ? text : "");
		goto out;
	}
	ret = 0;
out:
	if (path)
		unlink(path);
	free(path);
	free(text);
	return ret;
}

/* The verdict kept at path (the class, then what to print), or -1 when
 * there is none; *say gets what to print (malloc'd). */
static int kept_verdict(const char *path, char **say)
{
	FILE *f = fopen(path, "re");
	size_t cap = 0;
	int st = -1;

	*say = NULL;
	if (!f)
		return -1;
	if (fscanf(f, "%d\n", &st) != 1 || st < FSCK_CLEAN || st > FSCK_DANGEROUS) {
		fclose(f);
		return -1;
	}
	if (getdelim(say, &cap, 0, f) < 0) {
		free(*say);
		*say = NULL;
	}
	fclose(f);
	return st;
}

/* Keep verdict st and what it prints (say, or NULL) at path, whole or not
 * at all (a state checked beside this one may look for it). */
static void keep_verdict(const char *path, int st, const char *say)
{
	char *tmp;
	FILE *f;

	if (asprintf(&tmp, "%s.%ld", path, (long)getpid()) < 0)
		return;
	f = fopen(tmp, "we");
	if (f) {
		fprintf(f, "%d\n%s", st, say ? say : "");
		if (fclose(f) == 0 && rename(tmp, path) == 0) {
			free(tmp);
			return;
		}
	}
	unlink(tmp);
	free(tmp);
}

/* With $E2TOOL_SEEN naming a directory, replay-check keeps there the
 * verdict on each result it judges (e2fsck -fn and what follows), by the
 * result's sum (compare_but_wtime()), and takes a verdict kept there for a
 * result of the same sum instead of running e2fsck on it again: most
 * crash states of a recording replay to one of a few results, and a
 * verdict depends on the bytes alone (s_wtime is the time of the replay).
 * With OUT given as well, OUT's sum goes to OUT.sum, in hexadecimal, for
 * the caller's own checks of the result to be kept the same way. */
static int judge_replayed(const char *path, uint64_t sum, const char *out, char **say)
{
	const char *seen = getenv("E2TOOL_SEEN");
	char *keep = NULL;
	int st = -1;

	if (seen && *seen) {
		if (out) {
			char *sp;
			FILE *f;

			if (asprintf(&sp, "%s.sum", out) < 0)
				return -1;
			f = fopen(sp, "we");
			if (!f || fprintf(f, "%016llx\n", (unsigned long long)sum) < 0 ||
			    fclose(f) != 0) {
				fprintf(stderr, "%s: cannot write '%s'\n", prog, sp);
				free(sp);
				return -1;
			}
			free(sp);
		}
		if (asprintf(&keep, "%s/%016llx", seen, (unsigned long long)sum) < 0)
			return -1;
		st = kept_verdict(keep, say);
	}
	if (st < 0) {
		st = fsck_class_of(path, say);
		if (st >= 0 && keep)
			keep_verdict(keep, st, *say);
	}
	free(keep);
	return st;
}

static int replay_check(const char *image, const char *out)
{
	char *text = NULL;
	char *fpath = e2t_tmpfile("fstitch"), *epath = out ? strdup(out) : e2t_tmpfile("e2fsck");
	struct e2_recovery rec;
	uint64_t sum = 0;
	int ret = 1, r, st;

	if (!fpath || !epath) {
		fprintf(stderr, "%s: cannot make scratch files: %s\n", prog, strerror(errno));
		goto out;
	}
	r = copy_file(image, fpath);
	if (!r)
		r = copy_file(image, epath);
	if (r) {
		fprintf(stderr, "%s: cannot copy '%s': %s\n", prog, image, strerror(-r));
		goto out;
	}
	r = e2_recover(fpath, &rec);
	if (r) {
		printf("fstitch's replay (e2tool recover) failed: %s: cannot recover '%s': %s "
		       "(%s)\n",
		       prog, fpath, strerror(-r), e2_open_error());
		goto out;
	}
	/* An orphan list (s_last_orphan, then each inode's i_dtime) names
	 * inodes in use with no name: files removed while open.  e2fsck -n
	 * never processes it (release_orphan_inodes() in e2fsck/super.c runs
	 * only when the check may write) and reports each such inode as
	 * deleted but still in the bitmaps, while e2fsck -p, and -E
	 * journal_only too (the release runs in check_super_block(), before
	 * check_if_skip() ends a journal_only run), free them first.  So the
	 * orphans must go before e2fsck -fn may be asked for nothing at all:
	 * e2fsck's copy goes through its release with its replay; fstitch's
	 * replay goes through the same release, alone, before the two are
	 * compared (one E2FSCK_TIME: both stamp the same dtime); and a third
	 * copy is opened read-write by fstitch, which frees the orphans as a
	 * mount does, and must leave e2fsck -fn nothing to say. */
	{
		char now[32];

		snprintf(now, sizeof(now), "%lld", (long long)time(NULL));
		setenv("E2FSCK_TIME", now, 1);
	}
	{
		char *argv[] = {"e2fsck", "-E", "journal_only", "-y", epath, NULL};

		st = run_capture(argv, &text);
	}
	if (st < 0 || st >= 4) {
		printf("e2fsck -E journal_only failed (exit status %d):\n%s", st, text ? text : "");
		goto out;
	}
	r = has_orphans(fpath);
	if (r < 0) {
		fprintf(stderr, "%s: cannot read '%s': %s\n", prog, fpath, strerror(-r));
		goto out;
	}
	if (r) {
		/* (said on success too: the crash tests count such states) */
		printf("fstitch's replay leaves an orphan list\n");
		r = orphans_by_fstitch(fpath);
		if (r)
			goto out;
		free(text);
		text = NULL;
		{
			char *argv[] = {"e2fsck", "-E", "journal_only", "-y", fpath, NULL};

			st = run_capture(argv, &text);
		}
		if (st < 0 || st >= 4) {
			printf("e2fsck -E journal_only on fstitch's replay failed (exit status "
			       "%d):\n%s",
			       st, text ? text : "");
			goto out;
		}
	}
	r = compare_but_wtime(fpath, epath, &sum);
	if (r < 0) {
		fprintf(stderr, "%s: cannot compare the replayed copies: %s\n", prog, strerror(-r));
		goto out;
	}
	if (r) {
		printf("fstitch and e2fsck -E journal_only replay differently\n");
		goto out;
	}
	free(text);
	text = NULL;
	/* A journal must leave nothing at all: only a clean verdict passes. */
	st = judge_replayed(epath, sum, out, &text);
	if (st < 0)
		goto out;
	if (st == FSCK_BENIGN)
		printf("e2fsck -fn after the replay does not find it clean:\n%s", text);
	else if (st == FSCK_DANGEROUS)
		printf("e2fsck -fn after the replay: dangerous because of:\n%s", text ? text : "");
	ret = st == FSCK_CLEAN ? 0 : st == FSCK_BENIGN ? 2 : 3;
out:
	if (fpath)
		unlink(fpath);
	if (epath && !out)
		unlink(epath);
	free(fpath);
	free(epath);
	free(text);
	return ret;
}

/* ---- fsck-class ---------------------------------------------------------- */

/* The judgement of fsck_run (common.bash) in one process, for the crash
 * checks that run it once per state, where fsck_run's dozen commands cost
 * more than e2fsck: the same steps and rules (fsck_class_of), the copy
 * for e2fsck -fy a scratch file.  The image is not changed.  Prints the
 * class, then for a benign one e2fsck's transcript and for a dangerous
 * one why; exit 0 clean, 2 benign, 3 dangerous, 1 (saying why) when
 * e2fsck could not judge it. */
static int fsck_class(const char *image)
{
	char *say = NULL;
	int st = fsck_class_of(image, &say);

	if (st < 0)
		return 1;
	printf("%s\n%s", fsck_class_name((enum fsck_class)st), say ? say : "");
	if (say && *say && say[strlen(say) - 1] != '\n')
		putchar('\n');
	free(say);
	return st == FSCK_CLEAN ? 0 : st == FSCK_BENIGN ? 2 : 3;
}

int main(int argc, char **argv)
{
	struct args a = {0};
	struct e2fs *fs = NULL;
	struct stat st;
	const char *cmd;
	int ret, cret;

	if (argp_parse(&argp, argc, argv, 0, NULL, &a))
		return EX_USAGE_;
	cmd = a.argv[1];
	if (!strcmp(cmd, "recover")) {
		struct e2_recovery rec;

		ret = e2_recover(a.argv[0], &rec);
		if (ret) {
			fprintf(stderr, "%s: cannot recover '%s': %s (%s)\n", prog, a.argv[0],
				strerror(-ret), e2_open_error());
			return 1;
		}
		if (rec.replayed)
			printf("replayed %u transactions: %llu blocks written, %llu revoked\n",
			       rec.transactions, (unsigned long long)rec.blocks,
			       (unsigned long long)rec.revoked);
		else
			printf("nothing to replay\n");
		return 0;
	}
	if (!strcmp(cmd, "same-but-wtime")) {
		if (a.argc != 3) {
			fprintf(stderr, "%s: same-but-wtime needs one other file\n", prog);
			return EX_USAGE_;
		}
		ret = compare_but_wtime(a.argv[0], a.argv[2], NULL);
		if (ret < 0)
			fprintf(stderr, "%s: cannot compare '%s' and '%s': %s\n", prog, a.argv[0],
				a.argv[2], strerror(-ret));
		return ret ? 1 : 0;
	}
	if (!strcmp(cmd, "replay-check")) {
		if (a.argc > 3) {
			fprintf(stderr, "%s: replay-check takes at most one path\n", prog);
			return EX_USAGE_;
		}
		return replay_check(a.argv[0], a.argc == 3 ? a.argv[2] : NULL);
	}
	if (!strcmp(cmd, "fsck-class")) {
		if (a.argc > 2) {
			fprintf(stderr, "%s: fsck-class takes no more arguments\n", prog);
			return EX_USAGE_;
		}
		return fsck_class(a.argv[0]);
	}
	if (!strcmp(cmd, "open")) {
		const struct e2_recovery *rec;

		a.opts.consistency_auto = !a.has_c;
		ret = e2_open(a.argv[0], &a.opts, &fs);
		if (ret) {
			fprintf(stderr, "%s: cannot open '%s': %s (%s)\n", prog, a.argv[0],
				strerror(-ret), e2_open_error());
			return 1;
		}
		rec = e2_recovery(fs);
		printf("replayed %u transactions; orphans: %u freed, %u truncated%s\n",
		       rec->transactions, rec->orphans_freed, rec->orphans_truncated,
		       rec->orphans_dropped ? ", list dropped" : "");
		if (rec->orphan_bad)
			printf("orphan list left alone: it names inode %u\n", rec->orphan_bad);
		ret = e2_close(fs);
		if (ret) {
			fprintf(stderr, "%s: cannot close '%s': %s\n", prog, a.argv[0],
				strerror(-ret));
			return 1;
		}
		return 0;
	}
	if (!strcmp(cmd, "put") || !strcmp(cmd, "get")) {
		if (a.argc != 4) {
			fprintf(stderr, "%s: %s needs two paths\n", prog, cmd);
			return EX_USAGE_;
		}
	} else if (!strcmp(cmd, "ls") || !strcmp(cmd, "cat")) {
		if (a.argc != 3) {
			fprintf(stderr, "%s: %s needs one path\n", prog, cmd);
			return EX_USAGE_;
		}
	} else {
		fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
		return EX_USAGE_;
	}
	a.opts.readonly = strcmp(cmd, "put") != 0;
	ret = e2_open(a.argv[0], &a.opts, &fs);
	if (ret) {
		fprintf(stderr, "%s: cannot open '%s': %s (%s)\n", prog, a.argv[0], strerror(-ret),
			e2_open_error());
		return 1;
	}
	if (!strcmp(cmd, "put")) {
		ret = resolve(fs, a.argv[3], &st);
		if (!ret)
			ret = put_tree(fs, a.argv[2], st.st_ino);
	} else if (!strcmp(cmd, "get")) {
		ret = resolve(fs, a.argv[2], &st);
		if (!ret)
			ret = get_tree(fs, st.st_ino, a.argv[3]);
	} else if (!strcmp(cmd, "ls")) {
		ret = do_ls(fs, a.argv[2]);
	} else {
		ret = do_cat(fs, a.argv[2]);
	}
	if (ret)
		fprintf(stderr, "%s: %s failed: %s (%s)\n", prog, cmd, strerror(-ret),
			e2_error(fs));
	cret = e2_close(fs);
	if (cret) {
		fprintf(stderr, "%s: cannot close '%s': %s\n", prog, a.argv[0], strerror(-cret));
		ret = ret ? ret : cret;
	}
	return ret ? 1 : 0;
}
