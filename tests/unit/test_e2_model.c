/* Model test for the ext2 module: long seeded random sequences of every
 * operation, run against lib/ext2/e2.h and against a simple in-memory model of
 * the tree.  After every step the touched inodes and directories are
 * compared with the model, the whole tree now and then, and again after
 * e2_close and a reopen; e2fsck -fn must find the image clean at the end.
 *
 * Environment: E2_MODEL_SEED (first seed; the test runs several from it),
 * E2_MODEL_STEPS (steps per seed).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "ext2/e2.h"
#include "e2test_util.h"

#define MAXNODES    400
#define MAXFILE	    (400 * 1024)
#define DATA_BUDGET (10 * 1024 * 1024)
#define NNAMES	    24

struct ment {
	char *name;
	int node;
};

struct mnode {
	bool used;
	uint32_t ino;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	dev_t rdev;	/* device nodes */
	unsigned nlink; /* non-directories: names that refer to it */
	uint8_t *data;
	size_t size;
	char *target;
	struct ment *ents;
	size_t nents;
	int parent; /* directories */
	bool mtime_known;
	time_t mtime;
};

struct model {
	struct mnode n[MAXNODES];
	struct e2fs *fs;
	struct e2t_rng rng;
	uint64_t seed;
	unsigned step;
	const char *op;
	size_t data_total;
	char *path;
	struct e2_opts opts;
	unsigned nok, nerr; /* calls that succeeded / failed as the model said */
	unsigned nwrite, ntrunc, nrename, nrename_over, nexchange;
};

#define MFAIL(m, fmt, ...)                                                                         \
	fail_msg("seed %llu step %u op %s: " fmt, (unsigned long long)(m)->seed, (m)->step,        \
		 (m)->op, ##__VA_ARGS__)

/* ---- model helpers ------------------------------------------------------ */

static int node_new(struct model *m)
{
	for (int i = 0; i < MAXNODES; i++)
		if (!m->n[i].used) {
			memset(&m->n[i], 0, sizeof(m->n[i]));
			m->n[i].used = true;
			return i;
		}
	return -1;
}

static void node_free(struct model *m, int i)
{
	struct mnode *x = &m->n[i];

	m->data_total -= x->size;
	free(x->data);
	free(x->target);
	for (size_t k = 0; k < x->nents; k++)
		free(x->ents[k].name);
	free(x->ents);
	memset(x, 0, sizeof(*x));
}

static int nodes_used(struct model *m)
{
	int c = 0;

	for (int i = 0; i < MAXNODES; i++)
		c += m->n[i].used;
	return c;
}

static bool is_dir(struct model *m, int i)
{
	return S_ISDIR(m->n[i].mode);
}

static int dir_find(struct model *m, int d, const char *name)
{
	for (size_t k = 0; k < m->n[d].nents; k++)
		if (!strcmp(m->n[d].ents[k].name, name))
			return (int)k;
	return -1;
}

static int dir_child(struct model *m, int d, const char *name)
{
	int k = dir_find(m, d, name);

	return k < 0 ? -1 : m->n[d].ents[k].node;
}

static void dir_add(struct model *m, int d, const char *name, int node)
{
	struct mnode *x = &m->n[d];

	x->ents = realloc(x->ents, (x->nents + 1) * sizeof(*x->ents));
	assert_non_null(x->ents);
	x->ents[x->nents].name = strdup(name);
	x->ents[x->nents].node = node;
	x->nents++;
}

static void dir_del(struct model *m, int d, const char *name)
{
	struct mnode *x = &m->n[d];
	int k = dir_find(m, d, name);

	assert_true(k >= 0);
	free(x->ents[k].name);
	x->ents[k] = x->ents[--x->nents];
}

static unsigned expect_nlink(struct model *m, int i)
{
	unsigned c = 2;

	if (!is_dir(m, i))
		return m->n[i].nlink;
	for (size_t k = 0; k < m->n[i].nents; k++)
		c += is_dir(m, m->n[i].ents[k].node);
	return c;
}

/* Is a an ancestor of b, or b itself? */
static bool ancestor_or_self(struct model *m, int a, int b)
{
	for (int x = b;; x = m->n[x].parent) {
		if (x == a)
			return true;
		if (x == 0)
			return false;
	}
}

/* Drop one name of node i (already removed from its directory). */
static void unref(struct model *m, int i)
{
	if (is_dir(m, i)) {
		node_free(m, i);
		return;
	}
	if (--m->n[i].nlink == 0)
		node_free(m, i);
}

static int random_node(struct model *m, bool want_dir)
{
	int tries = 0;

	while (tries++ < 200) {
		int i = (int)e2t_rng_below(&m->rng, MAXNODES);

		if (m->n[i].used && (!want_dir || is_dir(m, i)))
			return i;
	}
	return 0;
}

/* A random existing (dir, name) pair, or false. */
static bool random_entry(struct model *m, int *dir, const char **name)
{
	for (int tries = 0; tries < 50; tries++) {
		int d = random_node(m, true);

		if (m->n[d].nents) {
			*dir = d;
			*name = m->n[d].ents[e2t_rng_below(&m->rng, m->n[d].nents)].name;
			return true;
		}
	}
	return false;
}

/* Names come from a small pool so that collisions happen, with now and
 * then a long one (long names fill directory blocks quickly). */
static const char *random_name(struct model *m)
{
	static char buf[300];
	uint64_t r = e2t_rng_below(&m->rng, 100);

	if (r < 4) {
		size_t len = 200 + e2t_rng_below(&m->rng, 56);

		memset(buf, 'L', len);
		buf[len] = 0;
		buf[0] = 'a' + (char)e2t_rng_below(&m->rng, 4);
		return buf;
	}
	snprintf(buf, sizeof(buf), "n%02u", (unsigned)e2t_rng_below(&m->rng, NNAMES));
	return buf;
}

/* ---- comparing with the file system ------------------------------------- */

struct dlist {
	char **names;
	uint32_t *inos;
	size_t n;
};

static int dl_add(const struct e2_dirent *d, void *arg)
{
	struct dlist *l = arg;

	l->names = realloc(l->names, (l->n + 1) * sizeof(*l->names));
	l->inos = realloc(l->inos, (l->n + 1) * sizeof(*l->inos));
	if (!l->names || !l->inos)
		return 1;
	l->names[l->n] = strndup(d->name, d->name_len);
	l->inos[l->n] = d->ino;
	l->n++;
	return 0;
}

static void dl_free(struct dlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	free(l->inos);
}

/* Collect at most `left` entries, remembering where to resume. */
struct chunk {
	struct dlist *l;
	unsigned left;
	off_t next;
};

static int chunk_add(const struct e2_dirent *d, void *arg)
{
	struct chunk *c = arg;

	if (c->left == 0)
		return 1;
	c->left--;
	c->next = d->next;
	return dl_add(d, c->l);
}

/* Reading a directory a few entries at a time, resuming at each entry's
 * `next`, gives the same entries as reading it in one go. */
static void check_dir_resume(struct model *m, int d, const struct dlist *whole)
{
	struct dlist l = {0};
	struct chunk c = {.l = &l, .next = 0};
	int ret, rounds = 0;

	for (;;) {
		size_t before = l.n;

		c.left = 1 + (unsigned)e2t_rng_below(&m->rng, 5);
		ret = e2_readdir(m->fs, m->n[d].ino, c.next, chunk_add, &c);
		if (ret)
			MFAIL(m, "readdir of inode %u from %lld: %d", m->n[d].ino,
			      (long long)c.next, ret);
		if (l.n == before)
			break;
		if (++rounds > 10000)
			MFAIL(m, "readdir of inode %u never ends when resumed", m->n[d].ino);
	}
	if (l.n != whole->n)
		MFAIL(m, "dir %u read in pieces gives %zu entries, in one go %zu", m->n[d].ino, l.n,
		      whole->n);
	for (size_t i = 0; i < l.n; i++)
		if (strcmp(l.names[i], whole->names[i]) || l.inos[i] != whole->inos[i])
			MFAIL(m, "dir %u read in pieces: entry %zu is '%s', in one go '%s'",
			      m->n[d].ino, i, l.names[i], whole->names[i]);
	dl_free(&l);
}

static void check_dir(struct model *m, int d)
{
	struct dlist l = {0};
	struct mnode *x = &m->n[d];
	size_t found = 0;
	int ret;

	ret = e2_readdir(m->fs, x->ino, 0, dl_add, &l);
	if (ret)
		MFAIL(m, "readdir of inode %u: %d", x->ino, ret);
	for (size_t i = 0; i < l.n; i++) {
		uint32_t want;
		int k;

		if (!strcmp(l.names[i], "."))
			want = x->ino;
		else if (!strcmp(l.names[i], ".."))
			want = m->n[x->parent].ino;
		else {
			k = dir_find(m, d, l.names[i]);
			if (k < 0)
				MFAIL(m, "dir %u lists '%s', which the model does not have", x->ino,
				      l.names[i]);
			want = m->n[x->ents[k].node].ino;
		}
		if (l.inos[i] != want)
			MFAIL(m, "dir %u: '%s' is inode %u, expected %u", x->ino, l.names[i],
			      l.inos[i], want);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(l.names[i], l.names[j]))
				MFAIL(m, "dir %u lists '%s' twice", x->ino, l.names[i]);
		found++;
	}
	if (found != x->nents + 2)
		MFAIL(m, "dir %u lists %zu entries, model has %zu (+2)", x->ino, found, x->nents);
	if (e2t_rng_below(&m->rng, 4) == 0)
		check_dir_resume(m, d, &l);
	dl_free(&l);
}

static void check_node(struct model *m, int i)
{
	struct mnode *x = &m->n[i];
	struct stat st;
	int ret = e2_getattr(m->fs, x->ino, &st);

	if (ret)
		MFAIL(m, "getattr %u: %d", x->ino, ret);
	if (st.st_mode != x->mode)
		MFAIL(m, "inode %u mode %o, expected %o", x->ino, (unsigned)st.st_mode,
		      (unsigned)x->mode);
	if (st.st_nlink != expect_nlink(m, i))
		MFAIL(m, "inode %u nlink %lu, expected %u", x->ino, (unsigned long)st.st_nlink,
		      expect_nlink(m, i));
	if (st.st_uid != x->uid || st.st_gid != x->gid)
		MFAIL(m, "inode %u owner %u:%u, expected %u:%u", x->ino, st.st_uid, st.st_gid,
		      x->uid, x->gid);
	if ((S_ISCHR(x->mode) || S_ISBLK(x->mode)) && st.st_rdev != x->rdev)
		MFAIL(m, "inode %u rdev %u:%u, expected %u:%u", x->ino, major(st.st_rdev),
		      minor(st.st_rdev), major(x->rdev), minor(x->rdev));
	if (x->mtime_known && st.st_mtime != x->mtime)
		MFAIL(m, "inode %u mtime %lld, expected %lld", x->ino, (long long)st.st_mtime,
		      (long long)x->mtime);
	if (S_ISREG(x->mode)) {
		uint8_t *buf;
		size_t got = 0;

		if ((size_t)st.st_size != x->size)
			MFAIL(m, "inode %u size %lld, expected %zu", x->ino, (long long)st.st_size,
			      x->size);
		buf = malloc(x->size + 4096);
		assert_non_null(buf);
		for (;;) {
			size_t want = 1 + e2t_rng_below(&m->rng, 70000);
			ssize_t n = e2_read(
			    m->fs, x->ino, buf + got,
			    want > x->size + 4096 - got ? x->size + 4096 - got : want, (off_t)got);

			if (n < 0)
				MFAIL(m, "read inode %u at %zu: %zd", x->ino, got, n);
			if (n == 0)
				break;
			got += n;
			if (got > x->size)
				MFAIL(m, "read inode %u: %zu bytes, more than size %zu", x->ino,
				      got, x->size);
		}
		if (got != x->size)
			MFAIL(m, "read inode %u: %zu bytes, expected %zu", x->ino, got, x->size);
		for (size_t k = 0; k < x->size; k++)
			if (buf[k] != x->data[k])
				MFAIL(m, "inode %u byte %zu is %02x, expected %02x", x->ino, k,
				      buf[k], x->data[k]);
		free(buf);
	} else if (S_ISLNK(x->mode)) {
		char buf[4096];
		int n = e2_readlink(m->fs, x->ino, buf, sizeof(buf));

		if (n < 0)
			MFAIL(m, "readlink %u: %d", x->ino, n);
		if ((size_t)n != strlen(x->target) || memcmp(buf, x->target, n))
			MFAIL(m, "readlink %u: '%.*s', expected '%s'", x->ino, n, buf, x->target);
		if ((size_t)st.st_size != strlen(x->target))
			MFAIL(m, "symlink %u size %lld, expected %zu", x->ino,
			      (long long)st.st_size, strlen(x->target));
	} else if (S_ISDIR(x->mode)) {
		check_dir(m, i);
	}
}

/* Look name up and check it names the model's node. */
static void check_lookup(struct model *m, int d, const char *name)
{
	int want = dir_child(m, d, name);
	struct stat st;
	int ret = e2_lookup(m->fs, m->n[d].ino, name, &st);

	if (want < 0) {
		if (ret != -ENOENT)
			MFAIL(m, "lookup '%s' in %u: %d, expected -ENOENT", name, m->n[d].ino, ret);
		return;
	}
	if (ret)
		MFAIL(m, "lookup '%s' in %u: %d", name, m->n[d].ino, ret);
	e2_forget(m->fs, st.st_ino, 1);
	if (st.st_ino != m->n[want].ino)
		MFAIL(m, "lookup '%s' in %u: inode %llu, expected %u", name, m->n[d].ino,
		      (unsigned long long)st.st_ino, m->n[want].ino);
}

static void check_all(struct model *m)
{
	for (int i = 0; i < MAXNODES; i++) {
		if (!m->n[i].used)
			continue;
		check_node(m, i);
		if (is_dir(m, i))
			for (size_t k = 0; k < m->n[i].nents; k++)
				check_lookup(m, i, m->n[i].ents[k].name);
	}
}

/* ---- operations ---------------------------------------------------------- */

static void expect_ret(struct model *m, int ret, const int *ok, size_t nok)
{
	for (size_t i = 0; i < nok; i++)
		if (ret == ok[i]) {
			if (ret)
				m->nerr++;
			else
				m->nok++;
			return;
		}
	MFAIL(m, "returned %d, expected %d%s", ret, ok[0], nok > 1 ? " (or another listed)" : "");
}

static void op_create(struct model *m, int kind)
{
	int d = random_node(m, true), node, ret;
	const char *name = random_name(m);
	int exist = dir_child(m, d, name);
	uid_t uid = (uid_t)e2t_rng_below(&m->rng, 3) * 1000;
	gid_t gid = (gid_t)e2t_rng_below(&m->rng, 3) * 100;
	mode_t perm = 0600 | (mode_t)e2t_rng_below(&m->rng, 0200);
	char target[1100];
	struct stat st;
	dev_t rdev = 0;

	if (nodes_used(m) >= MAXNODES - 2)
		return;
	if (kind == 2) {
		/* symlink: fast ones fit in the inode (< 60 bytes), slow ones
		 * take a block; 59 and 60 are the edges */
		size_t len;
		uint64_t r = e2t_rng_below(&m->rng, 10);

		len = r < 4   ? 1 + e2t_rng_below(&m->rng, 59)
		      : r < 5 ? 59
		      : r < 6 ? 60
			      : 60 + e2t_rng_below(&m->rng, 940);
		for (size_t k = 0; k < len; k++)
			target[k] = "abcdefgh/._-xyz"[e2t_rng_below(&m->rng, 15)];
		target[len] = 0;
	}
	m->op = kind == 0 ? "mknod" : kind == 1 ? "mkdir" : "symlink";
	if (kind == 0) {
		static const mode_t types[] = {S_IFIFO, S_IFCHR, S_IFBLK, S_IFSOCK};
		uint64_t r = e2t_rng_below(&m->rng, 20);
		mode_t type = r < 16 ? S_IFREG : types[r - 16];

		/* small and large device numbers (old and new encodings) */
		if (S_ISCHR(type) || S_ISBLK(type))
			rdev = e2t_rng_below(&m->rng, 2) ? makedev(e2t_rng_below(&m->rng, 256),
								   e2t_rng_below(&m->rng, 256))
							 : makedev(e2t_rng_below(&m->rng, 4096),
								   e2t_rng_below(&m->rng, 1 << 20));
		ret = e2_mknod(m->fs, NULL, m->n[d].ino, name, type | perm, rdev, uid, gid, &st);
		perm |= type;
	} else if (kind == 1) {
		ret = e2_mkdir(m->fs, NULL, m->n[d].ino, name, perm | 0100, uid, gid, &st);
		perm |= 0100 | S_IFDIR;
	} else {
		ret = e2_symlink(m->fs, NULL, m->n[d].ino, name, target, uid, gid, &st);
		perm = S_IFLNK | 0777;
	}
	if (exist >= 0) {
		expect_ret(m, ret, (int[]){-EEXIST}, 1);
		return;
	}
	expect_ret(m, ret, (int[]){0}, 1);
	e2_forget(m->fs, st.st_ino, 1);
	node = node_new(m);
	m->n[node].ino = st.st_ino;
	m->n[node].mode = perm;
	m->n[node].uid = uid;
	m->n[node].gid = gid;
	m->n[node].nlink = 1;
	m->n[node].parent = d;
	m->n[node].rdev = rdev;
	if (kind == 2)
		m->n[node].target = strdup(target);
	dir_add(m, d, name, node);
	check_node(m, node);
	check_node(m, d);
}

static int random_file(struct model *m)
{
	for (int tries = 0; tries < 200; tries++) {
		int i = (int)e2t_rng_below(&m->rng, MAXNODES);

		if (m->n[i].used && S_ISREG(m->n[i].mode))
			return i;
	}
	return -1;
}

/* An offset near the interesting places: EOF, the start of the indirect
 * (12 KiB) and double-indirect (268 KiB) ranges with 1 KiB blocks. */
static size_t random_offset(struct model *m, size_t size)
{
	switch (e2t_rng_below(&m->rng, 5)) {
	case 0:
		return e2t_rng_below(&m->rng, size + 1);
	case 1:
		return size;
	case 2:
		return 12288 - 3000 + e2t_rng_below(&m->rng, 6000);
	case 3:
		return 274432 - 6000 + e2t_rng_below(&m->rng, 12000);
	default:
		return e2t_rng_below(&m->rng, MAXFILE);
	}
}

static void set_size(struct model *m, struct mnode *x, size_t size)
{
	if (size > x->size) {
		x->data = realloc(x->data, size);
		assert_non_null(x->data);
		memset(x->data + x->size, 0, size - x->size);
	}
	m->data_total += size;
	m->data_total -= x->size;
	x->size = size;
}

static void op_write(struct model *m)
{
	int i = random_file(m);
	struct mnode *x;
	size_t off, len;
	uint8_t *buf;
	ssize_t n;

	m->op = "write";
	if (i < 0)
		return;
	x = &m->n[i];
	off = random_offset(m, x->size);
	switch (e2t_rng_below(&m->rng, 3)) {
	case 0:
		len = 1 + e2t_rng_below(&m->rng, 100);
		break;
	case 1:
		len = 1 + e2t_rng_below(&m->rng, 5000);
		break;
	default:
		len = 1 + e2t_rng_below(&m->rng, 40000);
	}
	if (off + len > MAXFILE ||
	    (off + len > x->size && m->data_total + off + len - x->size > DATA_BUDGET))
		return;
	buf = malloc(len);
	assert_non_null(buf);
	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)e2t_rng_next(&m->rng);
	n = e2_write(m->fs, NULL, x->ino, buf, len, (off_t)off);
	if (n != (ssize_t)len)
		MFAIL(m, "write inode %u %zu bytes at %zu: %zd", x->ino, len, off, n);
	if (off + len > x->size)
		set_size(m, x, off + len);
	memcpy(x->data + off, buf, len);
	free(buf);
	m->nwrite++;
	check_node(m, i);
}

static void op_truncate(struct model *m)
{
	int i = random_file(m);
	struct stat a = {0}, st;
	struct mnode *x;
	size_t size;
	int ret;

	m->op = "truncate";
	if (i < 0)
		return;
	x = &m->n[i];
	switch (e2t_rng_below(&m->rng, 6)) {
	case 0:
		size = 0;
		break;
	case 1:
		size = e2t_rng_below(&m->rng, x->size + 1);
		break;
	case 2:
		size = 12288;
		break;
	case 3:
		size = 274432 + e2t_rng_below(&m->rng, 3) - 1;
		break;
	default:
		size = x->size + e2t_rng_below(&m->rng, 300000);
	}
	if (size > MAXFILE || (size > x->size && m->data_total + size - x->size > DATA_BUDGET))
		return;
	a.st_size = (off_t)size;
	ret = e2_setattr(m->fs, NULL, x->ino, &a, E2_SET_SIZE, &st);
	if (ret)
		MFAIL(m, "truncate inode %u to %zu: %d", x->ino, size, ret);
	if ((size_t)st.st_size != size)
		MFAIL(m, "truncate inode %u: setattr reports size %lld, expected %zu", x->ino,
		      (long long)st.st_size, size);
	set_size(m, x, size);
	m->ntrunc++;
	check_node(m, i);
}

static void op_unlink(struct model *m)
{
	const char *name;
	int d, node, ret;
	char nm[300];

	m->op = "unlink";
	if (!random_entry(m, &d, &name))
		return;
	snprintf(nm, sizeof(nm), "%s", name);
	node = dir_child(m, d, nm);
	ret = e2_unlink(m->fs, NULL, m->n[d].ino, nm);
	if (is_dir(m, node)) {
		expect_ret(m, ret, (int[]){-EISDIR, -EPERM}, 2);
		return;
	}
	expect_ret(m, ret, (int[]){0}, 1);
	dir_del(m, d, nm);
	unref(m, node);
	if (m->n[node].used)
		check_node(m, node);
	check_node(m, d);
	check_lookup(m, d, nm);
}

static void op_rmdir(struct model *m)
{
	const char *name;
	int d, node, ret;
	char nm[300];

	m->op = "rmdir";
	if (!random_entry(m, &d, &name))
		return;
	snprintf(nm, sizeof(nm), "%s", name);
	node = dir_child(m, d, nm);
	ret = e2_rmdir(m->fs, NULL, m->n[d].ino, nm);
	if (!is_dir(m, node)) {
		expect_ret(m, ret, (int[]){-ENOTDIR}, 1);
		return;
	}
	if (m->n[node].nents) {
		expect_ret(m, ret, (int[]){-ENOTEMPTY, -EEXIST}, 2);
		return;
	}
	expect_ret(m, ret, (int[]){0}, 1);
	dir_del(m, d, nm);
	unref(m, node);
	check_node(m, d);
	check_lookup(m, d, nm);
}

static void op_link(struct model *m)
{
	const char *name;
	int d, node, nd, ret;
	char nm[300];
	struct stat st;

	m->op = "link";
	if (!random_entry(m, &d, &name))
		return;
	node = dir_child(m, d, name);
	if (is_dir(m, node))
		return;
	nd = random_node(m, true);
	snprintf(nm, sizeof(nm), "%s", random_name(m));
	ret = e2_link(m->fs, NULL, m->n[node].ino, m->n[nd].ino, nm, &st);
	if (dir_child(m, nd, nm) >= 0) {
		expect_ret(m, ret, (int[]){-EEXIST}, 1);
		return;
	}
	expect_ret(m, ret, (int[]){0}, 1);
	e2_forget(m->fs, st.st_ino, 1);
	dir_add(m, nd, nm, node);
	m->n[node].nlink++;
	if (st.st_nlink != m->n[node].nlink)
		MFAIL(m, "link returned nlink %lu, expected %u", (unsigned long)st.st_nlink,
		      m->n[node].nlink);
	check_node(m, node);
	check_node(m, nd);
}

static void op_rename(struct model *m)
{
	int sd, dd, src, dst, ret, ok[4], nok = 0;
	const char *sname;
	char sn[300], dn[300];
	unsigned flags = 0;
	uint64_t r;

	m->op = "rename";
	if (!random_entry(m, &sd, &sname))
		return;
	snprintf(sn, sizeof(sn), "%s", sname);
	dd = random_node(m, true);
	r = e2t_rng_below(&m->rng, 10);
	/* Often aim at an existing name, to rename over it. */
	if (r < 4 && m->n[dd].nents)
		snprintf(dn, sizeof(dn), "%s",
			 m->n[dd].ents[e2t_rng_below(&m->rng, m->n[dd].nents)].name);
	else
		snprintf(dn, sizeof(dn), "%s", random_name(m));
	r = e2t_rng_below(&m->rng, 10);
	if (r == 0)
		flags = E2_RENAME_NOREPLACE;
	else if (r < 3)
		flags = E2_RENAME_EXCHANGE;
	m->op = flags == E2_RENAME_EXCHANGE ? "rename-exchange"
		: flags			    ? "rename-noreplace"
					    : "rename";
	src = dir_child(m, sd, sn);
	dst = dir_child(m, dd, dn);

	/* Every error that applies; the implementation may report any. */
	if (flags & E2_RENAME_EXCHANGE) {
		if (dst < 0)
			ok[nok++] = -ENOENT;
		else if (src != dst) {
			if ((is_dir(m, src) && ancestor_or_self(m, src, dd)) ||
			    (is_dir(m, dst) && ancestor_or_self(m, dst, sd)))
				ok[nok++] = -EINVAL;
		}
	} else {
		if ((flags & E2_RENAME_NOREPLACE) && dst >= 0)
			ok[nok++] = -EEXIST;
		if (src != dst) {
			if (is_dir(m, src) && ancestor_or_self(m, src, dd))
				ok[nok++] = -EINVAL;
			if (dst >= 0 && is_dir(m, src) && !is_dir(m, dst))
				ok[nok++] = -ENOTDIR;
			if (dst >= 0 && !is_dir(m, src) && is_dir(m, dst))
				ok[nok++] = -EISDIR;
			if (dst >= 0 && is_dir(m, dst) && m->n[dst].nents)
				ok[nok++] = -ENOTEMPTY;
			if (dst >= 0 && is_dir(m, dst) && ancestor_or_self(m, dst, sd))
				ok[nok++] = -ENOTEMPTY;
		}
	}
	ret = e2_rename(m->fs, NULL, m->n[sd].ino, sn, m->n[dd].ino, dn, flags);
	if (nok) {
		expect_ret(m, ret, ok, nok);
		return;
	}
	expect_ret(m, ret, (int[]){0}, 1);
	m->nrename++;
	m->nrename_over += dst >= 0 && src != dst && !(flags & E2_RENAME_EXCHANGE);
	m->nexchange += src != dst && (flags & E2_RENAME_EXCHANGE);
	if (src == dst) {
		/* the same inode (same name or hard links): nothing happens */
	} else if (flags & E2_RENAME_EXCHANGE) {
		int ks = dir_find(m, sd, sn), kd = dir_find(m, dd, dn);

		m->n[sd].ents[ks].node = dst;
		m->n[dd].ents[kd].node = src;
		if (is_dir(m, src))
			m->n[src].parent = dd;
		if (is_dir(m, dst))
			m->n[dst].parent = sd;
	} else {
		if (dst >= 0) {
			dir_del(m, dd, dn);
			unref(m, dst);
		}
		dir_del(m, sd, sn);
		dir_add(m, dd, dn, src);
		if (is_dir(m, src))
			m->n[src].parent = dd;
	}
	check_node(m, sd);
	check_node(m, dd);
	check_lookup(m, sd, sn);
	check_lookup(m, dd, dn);
	if (m->n[src].used)
		check_node(m, src);
	if (dst >= 0 && m->n[dst].used)
		check_node(m, dst);
}

static void op_setattr(struct model *m)
{
	int i = random_node(m, false);
	struct mnode *x = &m->n[i];
	struct stat a = {0}, st;
	unsigned set = 0;
	int ret;

	m->op = "setattr";
	if (S_ISLNK(x->mode))
		return;
	if (e2t_rng_below(&m->rng, 2)) {
		set |= E2_SET_MODE;
		a.st_mode = (x->mode & S_IFMT) | (mode_t)e2t_rng_below(&m->rng, 07777 + 1);
		if (S_ISDIR(x->mode))
			a.st_mode |= 0700; /* keep the tree walkable */
	}
	if (e2t_rng_below(&m->rng, 2)) {
		set |= E2_SET_UID | E2_SET_GID;
		a.st_uid = (uid_t)e2t_rng_below(&m->rng, 70000);
		a.st_gid = (gid_t)e2t_rng_below(&m->rng, 70000);
	}
	if (e2t_rng_below(&m->rng, 2)) {
		set |= E2_SET_MTIME;
		a.st_mtim.tv_sec = 1000000000 + (time_t)e2t_rng_below(&m->rng, 1000000000);
	}
	if (!set)
		return;
	ret = e2_setattr(m->fs, NULL, x->ino, &a, set, &st);
	if (ret)
		MFAIL(m, "setattr inode %u set %#x: %d", x->ino, set, ret);
	if (set & E2_SET_MODE)
		x->mode = a.st_mode;
	if (set & E2_SET_UID) {
		x->uid = a.st_uid;
		x->gid = a.st_gid;
	}
	if (set & E2_SET_MTIME) {
		x->mtime = a.st_mtim.tv_sec;
		x->mtime_known = true;
	}
	check_node(m, i);
}

/* mtime changes with writes and entries: only checked right after a
 * setattr that set it. */
static void forget_mtimes(struct model *m)
{
	for (int i = 0; i < MAXNODES; i++)
		m->n[i].mtime_known = false;
}

/* ---- the run ------------------------------------------------------------- */

static void model_open(struct model *m)
{
	int ret = e2_open(m->path, &m->opts, &m->fs);

	if (ret)
		MFAIL(m, "e2_open: %d (%s)", ret, e2_open_error());
}

static void model_init_root(struct model *m)
{
	struct stat st;
	int lf, ret;

	m->n[0].used = true;
	m->n[0].ino = E2_ROOT_INO;
	m->n[0].parent = 0;
	ret = e2_getattr(m->fs, E2_ROOT_INO, &st);
	if (ret)
		MFAIL(m, "getattr root: %d", ret);
	m->n[0].mode = st.st_mode;
	m->n[0].uid = st.st_uid;
	m->n[0].gid = st.st_gid;
	/* mke2fs made lost+found; the model starts with it */
	ret = e2_lookup(m->fs, E2_ROOT_INO, "lost+found", &st);
	if (ret)
		MFAIL(m, "lookup lost+found: %d", ret);
	e2_forget(m->fs, st.st_ino, 1);
	lf = node_new(m);
	m->n[lf].ino = st.st_ino;
	m->n[lf].mode = st.st_mode;
	m->n[lf].uid = st.st_uid;
	m->n[lf].gid = st.st_gid;
	m->n[lf].parent = 0;
	dir_add(m, 0, "lost+found", lf);
}

static void run_model(uint64_t seed, unsigned steps, const struct e2_opts *opts, bool syncs)
{
	struct model *m = calloc(1, sizeof(*m));
	struct e2t_fsck fr;
	int ret;

	assert_non_null(m);
	m->seed = seed;
	m->opts = *opts;
	m->op = "setup";
	e2t_rng_seed(&m->rng, seed);
	m->path = e2t_scratch_file("model");
	assert_non_null(m->path);
	ret = e2t_mkfs(m->path, 32 * 1024, 1024, NULL, NULL);
	assert_int_equal(ret, 0);
	model_open(m);
	model_init_root(m);
	check_all(m);

	for (m->step = 0; m->step < steps; m->step++) {
		uint64_t r = e2t_rng_below(&m->rng, 100);

		if (r < 12)
			op_create(m, 0);
		else if (r < 18)
			op_create(m, 1);
		else if (r < 22)
			op_create(m, 2);
		else if (r < 42)
			op_write(m);
		else if (r < 50)
			op_truncate(m);
		else if (r < 58)
			op_unlink(m);
		else if (r < 62)
			op_rmdir(m);
		else if (r < 80)
			op_rename(m);
		else if (r < 86)
			op_link(m);
		else if (r < 92)
			op_setattr(m);
		else {
			int d;
			const char *nm;

			m->op = "lookup";
			d = random_node(m, true);
			nm = random_name(m);
			check_lookup(m, d, nm);
			if (random_entry(m, &d, &nm))
				check_lookup(m, d, nm);
		}
		forget_mtimes(m);
		if (syncs && e2t_rng_below(&m->rng, 50) == 0) {
			m->op = "sync";
			ret = e2_sync(m->fs);
			if (ret)
				MFAIL(m, "e2_sync: %d", ret);
		}
		if (m->step % 200 == 199) {
			m->op = "check-all";
			check_all(m);
		}
		/* Reopen now and then: everything must come back from disk. */
		if (m->step % 700 == 699) {
			m->op = "close-reopen";
			ret = e2_close(m->fs);
			m->fs = NULL;
			if (ret)
				MFAIL(m, "e2_close: %d", ret);
			model_open(m);
			check_all(m);
		}
	}
	m->op = "final";
	check_all(m);
	ret = e2_close(m->fs);
	m->fs = NULL;
	if (ret)
		MFAIL(m, "e2_close: %d", ret);
	ret = e2t_fsck_file(m->path, &fr);
	assert_int_equal(ret, 0);
	if (fr.verdict != FSCK_CLEAN)
		MFAIL(m, "e2fsck -fn after close: %s (status %d)\n%s", fsck_class_name(fr.verdict),
		      fr.status, fr.findings);
	e2t_fsck_free(&fr);
	model_open(m);
	m->op = "after-reopen";
	check_all(m);
	ret = e2_close(m->fs);
	if (ret)
		MFAIL(m, "e2_close: %d", ret);
	print_message("# seed %llu: %u steps: %u calls succeeded (%u writes, %u truncates, "
		      "%u renames: %u over a target, %u exchanges), %u failed as expected; "
		      "%d live inodes, %zu bytes of file data; e2fsck clean\n",
		      (unsigned long long)seed, steps, m->nok, m->nwrite, m->ntrunc, m->nrename,
		      m->nrename_over, m->nexchange, m->nerr, nodes_used(m), m->data_total);
	unlink(m->path);
	free(m->path);
	for (int i = 0; i < MAXNODES; i++)
		if (m->n[i].used)
			node_free(m, i);
	free(m);
}

static unsigned model_steps(void)
{
	return (unsigned)e2t_env_long("E2_MODEL_STEPS", E2T_SANITIZED ? 1500 : 4000);
}

static void test_model_default_cache(void **state)
{
	struct e2_opts o = {.no_flusher = true};
	uint64_t seed = e2t_seed("E2_MODEL_SEED", 1);

	for (uint64_t s = seed; s < seed + 3; s++)
		run_model(s, model_steps(), &o, true);
}

/* A cache of a few dozen blocks forces eviction and writing in the
 * middle of operations, with the background flusher running. */
static void test_model_tiny_cache_flusher(void **state)
{
	struct e2_opts o = {.cache_blocks = 48, .flush_interval_ms = 5};
	uint64_t seed = e2t_seed("E2_MODEL_SEED", 1) + 100;

	for (uint64_t s = seed; s < seed + 2; s++)
		run_model(s, model_steps(), &o, false);
}

static void test_model_tiny_cache_no_flusher(void **state)
{
	struct e2_opts o = {.cache_blocks = 48, .no_flusher = true};
	uint64_t seed = e2t_seed("E2_MODEL_SEED", 1) + 200;

	run_model(seed, model_steps(), &o, true);
}

static void test_model_consistency_none(void **state)
{
	/* Ordering changes what reaches disk when, never what is read. */
	struct e2_opts o = {.consistency = CONSISTENCY_NONE, .no_flusher = true};
	uint64_t seed = e2t_seed("E2_MODEL_SEED", 1) + 300;

	run_model(seed, model_steps() / 2, &o, true);
}

/* e2_readdir's `next` is stable across changes: after reading part of a
 * directory, removing and adding entries, and resuming, every entry that
 * was there all along and not yet read comes exactly once, no entry comes
 * twice, and removed entries do not come back. */
static void test_readdir_resume_across_changes(void **state)
{
	enum { N = 300, FIRST = 100 };
	char *path = e2t_scratch_file("readdir");
	struct e2_opts o = {.no_flusher = true};
	struct dlist l = {0};
	struct chunk c = {.l = &l, .next = 0};
	static int seen[N + 100];
	static bool removed[N + 100];
	struct e2fs *fs;
	struct stat st;
	char name[64];
	uint32_t dir;
	size_t first_n;

	assert_non_null(path);
	assert_int_equal(e2t_mkfs(path, 4096, 1024, NULL, NULL), 0);
	assert_int_equal(e2_open(path, &o, &fs), 0);
	assert_int_equal(e2_mkdir(fs, NULL, E2_ROOT_INO, "d", 0755, 0, 0, &st), 0);
	dir = st.st_ino;
	e2_forget(fs, dir, 1);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "entry-%04d-with-a-name-of-some-length", i);
		assert_int_equal(e2_mknod(fs, NULL, dir, name, S_IFREG | 0644, 0, 0, 0, &st), 0);
		e2_forget(fs, st.st_ino, 1);
	}
	memset(seen, 0, sizeof(seen));
	memset(removed, 0, sizeof(removed));
	c.left = FIRST + 2; /* with "." and ".." */
	assert_int_equal(e2_readdir(fs, dir, 0, chunk_add, &c), 0);
	first_n = l.n;
	for (size_t i = 0; i < l.n; i++) {
		int k;

		if (sscanf(l.names[i], "entry-%d-", &k) == 1)
			seen[k]++;
	}
	/* remove every third entry (read or not), then add new ones */
	for (int i = 0; i < N; i += 3) {
		snprintf(name, sizeof(name), "entry-%04d-with-a-name-of-some-length", i);
		assert_int_equal(e2_unlink(fs, NULL, dir, name), 0);
		removed[i] = true;
	}
	for (int i = N; i < N + 100; i++) {
		snprintf(name, sizeof(name), "entry-%04d-with-a-name-of-some-length", i);
		assert_int_equal(e2_mknod(fs, NULL, dir, name, S_IFREG | 0644, 0, 0, 0, &st), 0);
		e2_forget(fs, st.st_ino, 1);
	}
	c.left = 100000;
	assert_int_equal(e2_readdir(fs, dir, c.next, chunk_add, &c), 0);
	for (size_t i = first_n; i < l.n; i++) {
		int k;

		if (sscanf(l.names[i], "entry-%d-", &k) != 1)
			fail_msg("resumed readdir gave '%s'", l.names[i]);
		if (seen[k])
			fail_msg("'%s' came twice", l.names[i]);
		if (removed[k])
			fail_msg("'%s' came after it was removed", l.names[i]);
		seen[k]++;
	}
	for (int i = 0; i < N; i++)
		if (!removed[i] && seen[i] != 1)
			fail_msg("entry %d, there all along, came %d times", i, seen[i]);
	print_message("# %zu entries before the changes, %zu after resuming\n", first_n,
		      l.n - first_n);
	dl_free(&l);
	assert_int_equal(e2_close(fs), 0);
	unlink(path);
	free(path);
}

/* An unlinked inode lives on while it is open or looked up (the kernel's
 * reference until FORGET), and is freed at the last release or FORGET, or
 * at e2_close. */
static void test_orphans(void **state)
{
	char *path = e2t_scratch_file("orphan");
	struct e2_opts o = {.no_flusher = true};
	uint8_t buf[20000], got[20000];
	struct statvfs sv0, sv;
	struct e2t_fsck fr;
	struct e2fs *fs;
	struct stat st;
	uint32_t a, b;

	assert_non_null(path);
	memset(buf, 0x77, sizeof(buf));
	assert_int_equal(e2t_mkfs(path, 4096, 1024, NULL, NULL), 0);
	assert_int_equal(e2_open(path, &o, &fs), 0);
	assert_int_equal(e2_statfs(fs, &sv0), 0);
	/* a: held open; b: held by a lookup reference */
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &st), 0);
	a = st.st_ino;
	e2_forget(fs, a, 1);
	assert_int_equal(e2_write(fs, NULL, a, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "b", S_IFREG | 0644, 0, 0, 0, &st), 0);
	b = st.st_ino; /* this reference is kept */
	assert_int_equal(e2_write(fs, NULL, b, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	assert_int_equal(e2_open_inode(fs, a), 0);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "a"), 0);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "b"), 0);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "a", &st), -ENOENT);
	/* a: still readable and writable, with no links */
	assert_int_equal(e2_getattr(fs, a, &st), 0);
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(e2_read(fs, a, got, sizeof(got), 0), (ssize_t)sizeof(got));
	assert_memory_equal(got, buf, sizeof(buf));
	assert_int_equal(e2_write(fs, NULL, a, buf, 100, 30000), 100);
	/* b: held only by its reference, it still opens and reads */
	assert_int_equal(e2_statfs(fs, &sv), 0);
	print_message("# free inodes: %llu at start, %llu with an open and a held orphan\n",
		      (unsigned long long)sv0.f_ffree, (unsigned long long)sv.f_ffree);
	assert_int_equal(sv.f_ffree, sv0.f_ffree - 2);
	assert_int_equal(e2_getattr(fs, b, &st), 0);
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(e2_open_inode(fs, b), 0);
	assert_int_equal(e2_read(fs, b, got, sizeof(got), 0), (ssize_t)sizeof(got));
	assert_memory_equal(got, buf, sizeof(buf));
	assert_int_equal(e2_release_inode(fs, b), 0);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	assert_int_equal(sv.f_ffree, sv0.f_ffree - 2);
	/* the FORGET frees it */
	assert_int_equal(e2_forget(fs, b, 1), 0);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	assert_int_equal(sv.f_ffree, sv0.f_ffree - 1);
	/* a is still open: e2_close must free it */
	assert_int_equal(e2_close(fs), 0);
	assert_int_equal(e2t_fsck_file(path, &fr), 0);
	if (fr.verdict != FSCK_CLEAN)
		fail_msg("e2fsck after closing with an orphan:\n%s", fr.findings);
	e2t_fsck_free(&fr);
	assert_int_equal(e2_open(path, &o, &fs), 0);
	assert_int_equal(e2_statfs(fs, &sv), 0);
	assert_int_equal(sv.f_ffree, sv0.f_ffree);
	assert_int_equal(sv.f_bfree, sv0.f_bfree);
	assert_int_equal(e2_close(fs), 0);
	unlink(path);
	free(path);
}

/* Far offsets in a sparse file: the triple-indirect range (from
 * 67383296 bytes with 1 KiB blocks) and sizes beyond 4 GiB. */
static void test_sparse_far_offsets(void **state)
{
	static const uint64_t offs[] = {
	    67383296 - 700, 67383296 + 123457, 4294967296ull - 10, 4294967296ull + 1048576 + 3,
	    10000000000ull,
	};
	char *path = e2t_scratch_file("far");
	struct e2_opts o = {.no_flusher = true};
	struct e2t_fsck fr;
	struct e2fs *fs;
	struct stat st, a = {0};
	uint8_t buf[3000], got[3000];
	uint32_t ino;
	size_t n = sizeof(offs) / sizeof(offs[0]);

	assert_non_null(path);
	assert_int_equal(e2t_mkfs(path, 8192, 1024, NULL, NULL), 0);
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(e2_open(path, &o, &fs), 0);
		if (pass == 0) {
			assert_int_equal(
			    e2_mknod(fs, NULL, E2_ROOT_INO, "far", S_IFREG | 0644, 0, 0, 0, &st),
			    0);
			ino = st.st_ino;
			e2_forget(fs, ino, 1);
			for (size_t i = 0; i < n; i++) {
				memset(buf, (int)(0x41 + i), sizeof(buf));
				if (e2_write(fs, NULL, ino, buf, sizeof(buf), (off_t)offs[i]) !=
				    (ssize_t)sizeof(buf))
					fail_msg("write at %llu", (unsigned long long)offs[i]);
			}
		} else {
			assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "far", &st), 0);
			ino = st.st_ino;
			e2_forget(fs, ino, 1);
		}
		assert_int_equal(e2_getattr(fs, ino, &st), 0);
		assert_int_equal((uint64_t)st.st_size, offs[n - 1] + sizeof(buf));
		/* few blocks: data blocks plus the indirect ones */
		if ((uint64_t)st.st_blocks * 512 > 64 * 1024)
			fail_msg("sparse file uses %lld blocks", (long long)st.st_blocks);
		for (size_t i = 0; i < n; i++) {
			ssize_t r = e2_read(fs, ino, got, sizeof(got), (off_t)offs[i]);

			memset(buf, (int)(0x41 + i), sizeof(buf));
			if (r != (ssize_t)sizeof(got) || memcmp(got, buf, sizeof(got)))
				fail_msg("pass %d: read at %llu: %zd bytes, wrong data", pass,
					 (unsigned long long)offs[i], r);
			/* the holes just before read as zeros */
			r = e2_read(fs, ino, got, 500, (off_t)offs[i] - 500);
			for (ssize_t k = 0; k < r; k++)
				if (got[k] != 0)
					fail_msg("hole before %llu holds %02x",
						 (unsigned long long)offs[i], got[k]);
		}
		assert_int_equal(e2_close(fs), 0);
		assert_int_equal(e2t_fsck_file(path, &fr), 0);
		if (fr.verdict != FSCK_CLEAN)
			fail_msg("e2fsck after far writes (pass %d):\n%s", pass, fr.findings);
		e2t_fsck_free(&fr);
	}
	/* shrink back through the triple, double and single indirect ranges */
	assert_int_equal(e2_open(path, &o, &fs), 0);
	for (uint64_t size = 5000000000ull;; size = size > 300000 ? size / 13 : 0) {
		a.st_size = (off_t)size;
		assert_int_equal(e2_setattr(fs, NULL, ino, &a, E2_SET_SIZE, &st), 0);
		assert_int_equal((uint64_t)st.st_size, size);
		if (!size)
			break;
	}
	assert_int_equal(e2_getattr(fs, ino, &st), 0);
	assert_int_equal(st.st_blocks, 0);
	assert_int_equal(e2_close(fs), 0);
	assert_int_equal(e2t_fsck_file(path, &fr), 0);
	if (fr.verdict != FSCK_CLEAN)
		fail_msg("e2fsck after shrinking:\n%s", fr.findings);
	e2t_fsck_free(&fr);
	print_message("# sparse file with data up to %llu bytes: written, reread, shrunk; "
		      "e2fsck clean\n",
		      (unsigned long long)(offs[n - 1] + sizeof(buf)));
	unlink(path);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_model_default_cache, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_model_tiny_cache_flusher, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_model_tiny_cache_no_flusher, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_model_consistency_none, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_sparse_far_offsets, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_readdir_resume_across_changes, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_orphans, e2t_remove_scratch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
