/* e2tool: copy trees in and out of an ext2 image through lib/ext2/e2.h, for the
 * interoperability tests (tests/e2-interop.bats).
 *
 *   e2tool [OPTION...] IMAGE put SRC_DIR DEST   copy SRC_DIR's contents into DEST
 *   e2tool [OPTION...] IMAGE get SRC DEST_DIR   copy SRC's contents into DEST_DIR
 *   e2tool [OPTION...] IMAGE ls PATH            list a directory
 *   e2tool [OPTION...] IMAGE cat PATH           write a file to stdout
 *   e2tool IMAGE recover                        replay the journal if it needs
 *                                               it, change nothing else
 *
 * Exit status: 0 success, 1 failure, 64 usage.
 */
#include <argp.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ext2/e2.h"

#define EX_USAGE_ 64
#define CHUNK	  (64 * 1024)

static const char *prog = "e2tool";

struct args {
	struct e2_opts opts;
	char *argv[4];
	int argc;
};

static const struct argp_option options[] = {
    {"consistency", 'c', "MODE", 0, "softupdates (default) or none", 0},
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
		else
			argp_error(state, "unknown consistency mode '%s'", arg);
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
		if (a->argc < 3 && !(a->argc == 2 && !strcmp(a->argv[1], "recover")))
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
    "IMAGE cat PATH\nIMAGE recover",
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
