/* Focused tests of the ext2 module's operations on small images made by the
 * stock mke2fs, each checked afterwards with e2fsck -fn. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "crash/crashsim.h"
#include "engine/snapshot.h"
#include "ext2/e2.h"
#include "e2test_util.h"

static char img[64];

static int sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Make a fresh image with mke2fs and the given extra options. */
static void mkimg(const char *size, const char *opts)
{
	snprintf(img, sizeof(img), "/tmp/e2basic.%d.img", (int)getpid());
	unlink(img);
	assert_int_equal(
	    sh("mke2fs -q -t ext2 -F -b 1024 %s %s %s >/dev/null 2>&1", opts, img, size), 0);
}

static struct e2fs *open_img(void)
{
	struct e2_opts o = {.no_flusher = true};
	struct e2fs *fs = NULL;
	int r = e2_open(img, &o, &fs);

	if (r)
		fprintf(stderr, "# open: %s\n", e2_open_error());
	assert_int_equal(r, 0);
	return fs;
}

static void fsck_clean(void)
{
	char out[sizeof(img) + 8];
	int rc;

	/* beside the image, whose name has our pid: another run's
	 * transcript is not ours */
	snprintf(out, sizeof(out), "%s.fsck", img);
	rc = sh("e2fsck -fn %s >%s 2>&1", img, out);
	if (rc != 0)
		sh("cat %s >&2", out);
	unlink(out);
	assert_int_equal(rc, 0);
}

static void close_check(struct e2fs *fs)
{
	assert_int_equal(e2_close(fs), 0);
	fsck_clean();
}

static uint32_t mk(struct e2fs *fs, uint32_t dir, const char *name, mode_t mode)
{
	struct stat st;

	if (S_ISDIR(mode))
		assert_int_equal(e2_mkdir(fs, NULL, dir, name, mode & 07777, 0, 0, &st), 0);
	else
		assert_int_equal(e2_mknod(fs, NULL, dir, name, mode, 0, 0, 0, &st), 0);
	return (uint32_t)st.st_ino;
}

static void test_open_refuses_features(void **state)
{
	static const char *feats[] = {"extents",   "meta_bg,^resize_inode",
				      "flex_bg",   "metadata_csum",
				      "huge_file", "uninit_bg"};
	struct e2fs *fs = NULL;
	struct e2_opts o = {.no_flusher = true};

	(void)state;
	for (size_t i = 0; i < sizeof(feats) / sizeof(feats[0]); i++) {
		char opt[64];

		snprintf(opt, sizeof(opt), "-O %s", feats[i]);
		mkimg("4M", opt);
		assert_int_equal(e2_open(img, &o, &fs), -EOPNOTSUPP);
		assert_non_null(strstr(e2_open_error(), strtok(opt + 3, ",")));
	}
	mkimg("4M", "-O ^resize_inode");
	assert_int_equal(sh("dd if=/dev/zero of=%s bs=1024 seek=1 count=1 conv=notrunc "
			    "2>/dev/null",
			    img),
			 0);
	assert_int_equal(e2_open(img, &o, &fs), -EINVAL);
	assert_non_null(strstr(e2_open_error(), "magic"));
}

static void test_open_busy(void **state)
{
	struct e2_opts o = {.no_flusher = true};
	struct e2fs *fs, *fs2 = NULL;

	(void)state;
	mkimg("4M", "");
	fs = open_img();
	assert_int_equal(e2_open(img, &o, &fs2), -EBUSY);
	close_check(fs);
}

struct names {
	char buf[4096];
	size_t n;
	off_t last_next;
};

static int collect(const struct e2_dirent *d, void *arg)
{
	struct names *nm = arg;

	nm->n += (size_t)snprintf(nm->buf + nm->n, sizeof(nm->buf) - nm->n, "%s,", d->name);
	nm->last_next = d->next;
	return 0;
}

static void test_read_populated(void **state)
{
	char dir[64], buf[70000], big[70000];
	struct e2fs *fs;
	struct stat st;
	struct names nm = {.n = 0};
	uint32_t sub;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/e2basic.%d.d", (int)getpid());
	assert_int_equal(sh("rm -rf %s && mkdir -p %s/sub && printf hello > %s/small && "
			    "ln -s small %s/fast && ln -s %0200d %s/slow && "
			    "head -c 70000 /dev/urandom > %s/sub/big && "
			    "truncate -s 5000000 %s/sparse && printf tail >> %s/sparse",
			    dir, dir, dir, dir, 0, dir, dir, dir, dir),
			 0);
	mkimg("8M", "");
	assert_int_equal(sh("mke2fs -q -t ext2 -F -b 1024 -d %s %s 8M >/dev/null 2>&1", dir, img),
			 0);
	fs = open_img();
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "small", &st), 0);
	assert_int_equal(st.st_size, 5);
	assert_int_equal(e2_read(fs, (uint32_t)st.st_ino, buf, sizeof(buf), 0), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "fast", &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(e2_readlink(fs, (uint32_t)st.st_ino, buf, sizeof(buf)), 5);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "slow", &st), 0);
	assert_int_equal(e2_readlink(fs, (uint32_t)st.st_ino, buf, sizeof(buf)), 200);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "sub", &st), 0);
	sub = (uint32_t)st.st_ino;
	assert_int_equal(e2_lookup(fs, sub, "big", &st), 0);
	assert_int_equal(e2_read(fs, (uint32_t)st.st_ino, buf, sizeof(buf), 0), 70000);
	{
		char path[128];
		FILE *f;

		snprintf(path, sizeof(path), "%s/sub/big", dir);
		f = fopen(path, "rb");
		assert_non_null(f);
		assert_int_equal(fread(big, 1, 70000, f), 70000);
		fclose(f);
	}
	assert_memory_equal(buf, big, 70000);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "sparse", &st), 0);
	assert_int_equal(st.st_size, 5000004);
	assert_true(st.st_blocks < 100);
	assert_int_equal(e2_read(fs, (uint32_t)st.st_ino, buf, 10, 4000000), 10);
	assert_memory_equal(buf, "\0\0\0\0\0\0\0\0\0\0", 10);
	assert_int_equal(e2_read(fs, (uint32_t)st.st_ino, buf, 100, 5000000), 4);
	assert_memory_equal(buf, "tail", 4);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "nope", &st), -ENOENT);
	assert_int_equal(e2_readdir(fs, E2_ROOT_INO, 0, collect, &nm), 0);
	assert_non_null(strstr(nm.buf, ".,"));
	assert_non_null(strstr(nm.buf, "..,"));
	assert_non_null(strstr(nm.buf, "lost+found,"));
	assert_non_null(strstr(nm.buf, "sparse,"));
	close_check(fs);
	sh("rm -rf %s", dir);
}

static void test_create_write_remove(void **state)
{
	struct e2fs *fs;
	struct stat st, a;
	static char data[300000], back[300000];
	uint32_t d, f, f2;

	(void)state;
	mkimg("16M", "");
	fs = open_img();
	d = mk(fs, E2_ROOT_INO, "dir", S_IFDIR | 0755);
	assert_int_equal(e2_getattr(fs, E2_ROOT_INO, &st), 0);
	assert_int_equal(st.st_nlink, 4); /* ., .., lost+found, dir */
	f = mk(fs, d, "file", S_IFREG | 0644);
	assert_int_equal(e2_mknod(fs, NULL, d, "file", S_IFREG | 0644, 0, 0, 0, &st), -EEXIST);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7 + i / 1000);
	assert_int_equal(e2_write(fs, NULL, f, data, sizeof(data), 0), (ssize_t)sizeof(data));
	assert_int_equal(e2_read(fs, f, back, sizeof(back), 0), (ssize_t)sizeof(back));
	assert_memory_equal(data, back, sizeof(data));
	assert_int_equal(e2_getattr(fs, f, &st), 0);
	assert_int_equal(st.st_size, sizeof(data));
	/* data blocks plus one indirect and one double indirect block with
	 * its child, in 512-byte units */
	assert_int_equal(st.st_blocks, (293 + 1 + 2) * 2);
	/* relatime: an access time older than the last change moves on read */
	a.st_atime = 1000;
	assert_int_equal(e2_setattr(fs, NULL, f, &a, E2_SET_ATIME, &st), 0);
	assert_int_equal(st.st_atime, 1000);
	assert_int_equal(e2_read(fs, f, back, 1, 0), 1);
	assert_int_equal(e2_getattr(fs, f, &st), 0);
	assert_true(st.st_atime > 1000);
	/* overwrite in the middle and read back */
	assert_int_equal(e2_write(fs, NULL, f, "XYZ", 3, 100000), 3);
	assert_int_equal(e2_read(fs, f, back, 5, 99999), 5);
	assert_memory_equal(back + 1, "XYZ", 3);
	/* a hole far away: triple indirect on 1 KiB blocks */
	assert_int_equal(e2_write(fs, NULL, f, "end", 3, 80000000), 3);
	assert_int_equal(e2_read(fs, f, back, 10, 70000000), 10);
	assert_memory_equal(back, "\0\0\0\0\0\0\0\0\0\0", 10);
	/* truncate down frees the indirect trees */
	a.st_size = 1000;
	assert_int_equal(e2_setattr(fs, NULL, f, &a, E2_SET_SIZE, &st), 0);
	assert_int_equal(st.st_size, 1000);
	assert_int_equal(st.st_blocks, 2);
	a.st_size = 5000;
	assert_int_equal(e2_setattr(fs, NULL, f, &a, E2_SET_SIZE, &st), 0);
	assert_int_equal(e2_read(fs, f, back, 5000, 0), 5000);
	assert_memory_equal(back, data, 1000);
	assert_memory_equal(back + 1000, (char[4000]){0}, 4000);
	a.st_mode = 0600;
	a.st_uid = 70000;
	a.st_gid = 12;
	assert_int_equal(e2_setattr(fs, NULL, f, &a, E2_SET_MODE | E2_SET_UID | E2_SET_GID, &st),
			 0);
	assert_int_equal(st.st_mode, S_IFREG | 0600);
	assert_int_equal(st.st_uid, 70000);
	assert_int_equal(st.st_gid, 12);
	/* hard link, then unlink both names */
	assert_int_equal(e2_link(fs, NULL, f, E2_ROOT_INO, "hard", &st), 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(e2_rmdir(fs, NULL, E2_ROOT_INO, "dir"), -ENOTEMPTY);
	assert_int_equal(e2_unlink(fs, NULL, d, "file"), 0);
	assert_int_equal(e2_rmdir(fs, NULL, E2_ROOT_INO, "dir"), 0);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "dir", &st), -ENOENT);
	assert_int_equal(e2_getattr(fs, E2_ROOT_INO, &st), 0);
	assert_int_equal(st.st_nlink, 3);
	/* open and unlinked: stays readable until released */
	assert_int_equal(e2_open_inode(fs, f), 0);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "hard"), 0);
	assert_int_equal(e2_read(fs, f, back, 3, 0), 3);
	assert_int_equal(e2_release_inode(fs, f), 0);
	assert_int_equal(e2_forget(fs, f, 3), 0);
	/* fifo, socket, devices, symlinks */
	f2 = mk(fs, E2_ROOT_INO, "fifo", S_IFIFO | 0644);
	assert_int_equal(e2_getattr(fs, f2, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	mk(fs, E2_ROOT_INO, "sock", S_IFSOCK | 0644);
	assert_int_equal(
	    e2_mknod(fs, NULL, E2_ROOT_INO, "cdev", S_IFCHR | 0600, makedev(4, 5), 0, 0, &st), 0);
	assert_int_equal(st.st_rdev, makedev(4, 5));
	assert_int_equal(
	    e2_mknod(fs, NULL, E2_ROOT_INO, "bdev", S_IFBLK | 0600, makedev(259, 70000), 0, 0, &st),
	    0);
	assert_int_equal(e2_getattr(fs, (uint32_t)st.st_ino, &st), 0);
	assert_int_equal(st.st_rdev, makedev(259, 70000));
	{
		char target[300], out[300];

		memset(target, 'x', sizeof(target) - 1);
		target[sizeof(target) - 1] = 0;
		assert_int_equal(e2_symlink(fs, NULL, E2_ROOT_INO, "slow", target, 0, 0, &st), 0);
		assert_int_equal(e2_readlink(fs, (uint32_t)st.st_ino, out, sizeof(out)), 299);
		assert_memory_equal(out, target, 299);
		assert_int_equal(e2_symlink(fs, NULL, E2_ROOT_INO, "fast", "abc", 0, 0, &st), 0);
		assert_int_equal(e2_readlink(fs, (uint32_t)st.st_ino, out, sizeof(out)), 3);
	}
	close_check(fs);
	assert_int_equal(sh("debugfs -R 'stat /bdev' %s 2>/dev/null | grep -q "
			    "'Device major/minor number: 259:70000'",
			    img),
			 0);
	assert_int_equal(sh("debugfs -R 'cat /slow' %s >/dev/null 2>&1", img), 0);
}

/* O_TMPFILE's file: no name and links 0 until e2_link names it (only
 * then: an inode unlinked by e2_unlink may not be named again), freed
 * with its blocks when it gets none. */
static void test_tmpfile(void **state)
{
	struct e2fs *fs;
	struct stat st, root;
	struct statvfs sv;
	static char data[40000], back[40000];
	uint32_t t, u, f;
	fsfilcnt_t ffree;

	(void)state;
	mkimg("16M", "");
	fs = open_img();
	assert_int_equal(e2_statfs(fs, &sv), 0);
	ffree = sv.f_ffree;
	assert_int_equal(e2_getattr(fs, E2_ROOT_INO, &root), 0);
	assert_int_equal(e2_tmpfile(fs, NULL, E2_ROOT_INO, 0640, 5, 6, &st), 0);
	t = (uint32_t)st.st_ino;
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(st.st_mode, S_IFREG | 0640);
	assert_int_equal(st.st_uid, 5);
	assert_int_equal(st.st_gid, 6);
	assert_int_equal(e2_open_inode(fs, t), 0);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 13);
	assert_int_equal(e2_write(fs, NULL, t, data, sizeof(data), 0), (ssize_t)sizeof(data));
	/* the directory does not change */
	assert_int_equal(e2_getattr(fs, E2_ROOT_INO, &st), 0);
	assert_int_equal(st.st_size, root.st_size);
	assert_int_equal(st.st_mtime, root.st_mtime);
	assert_int_equal(e2_link(fs, NULL, t, E2_ROOT_INO, "named", &st), 0);
	assert_int_equal(st.st_nlink, 1);
	/* a second name is an ordinary link */
	assert_int_equal(e2_link(fs, NULL, t, E2_ROOT_INO, "again", &st), 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(e2_release_inode(fs, t), 0);
	assert_int_equal(e2_forget(fs, t, 3), 0);
	/* one that gets no name goes at its last release and forget */
	assert_int_equal(e2_tmpfile(fs, NULL, E2_ROOT_INO, 0600, 0, 0, &st), 0);
	u = (uint32_t)st.st_ino;
	assert_int_equal(e2_open_inode(fs, u), 0);
	assert_int_equal(e2_write(fs, NULL, u, data, sizeof(data), 0), (ssize_t)sizeof(data));
	assert_int_equal(e2_release_inode(fs, u), 0);
	assert_int_equal(e2_forget(fs, u, 1), 0);
	/* its number, once the free is on disk, goes to an ordinary file,
	 * which links as any other */
	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(mk(fs, E2_ROOT_INO, "r", S_IFREG | 0644), u);
	assert_int_equal(e2_link(fs, NULL, u, E2_ROOT_INO, "r2", &st), 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "r"), 0);
	assert_int_equal(e2_forget(fs, u, 2), 0);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "r2", &st), 0);
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(e2_forget(fs, u, 1), 0);
	/* an ordinary file unlinked while held may not be named again */
	f = mk(fs, E2_ROOT_INO, "f", S_IFREG | 0644);
	assert_int_equal(e2_open_inode(fs, f), 0);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "f"), 0);
	assert_int_equal(e2_link(fs, NULL, f, E2_ROOT_INO, "back", &st), -ENOENT);
	assert_int_equal(e2_release_inode(fs, f), 0);
	assert_int_equal(e2_forget(fs, f, 1), 0);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "named", &st), 0);
	assert_int_equal(e2_read(fs, (uint32_t)st.st_ino, back, sizeof(back), 0),
			 (ssize_t)sizeof(back));
	assert_memory_equal(data, back, sizeof(data));
	assert_int_equal(e2_forget(fs, (uint32_t)st.st_ino, 1), 0);
	/* two inodes in use: the named one and r2; e2fsck finds nothing
	 * leaked */
	assert_int_equal(e2_statfs(fs, &sv), 0);
	assert_int_equal(sv.f_ffree, ffree - 2);
	close_check(fs);
}

/* A number freed and handed out again, in another open of the file
 * system, names a new file: its generation is not the old one, and is
 * what the disk holds (debugfs agrees). */
static void test_generation_new_on_reuse(void **state)
{
	struct e2fs *fs;
	uint32_t f, g, gen_f, gen_g;

	(void)state;
	mkimg("4M", "");
	fs = open_img();
	f = mk(fs, E2_ROOT_INO, "f", S_IFREG | 0644);
	assert_int_equal(e2_generation(fs, f, &gen_f), 0);
	assert_int_equal(e2_forget(fs, f, 1), 0);
	close_check(fs);
	assert_int_equal(
	    sh("debugfs -R 'stat <%u>' %s 2>/dev/null | grep -q 'Generation: %u '", f, img, gen_f),
	    0);
	fs = open_img();
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "f"), 0);
	close_check(fs);
	fs = open_img();
	g = mk(fs, E2_ROOT_INO, "g", S_IFREG | 0644);
	assert_int_equal(g, f);
	assert_int_equal(e2_generation(fs, g, &gen_g), 0);
	assert_int_not_equal(gen_g, gen_f);
	assert_int_equal(e2_forget(fs, g, 1), 0);
	close_check(fs);
	assert_int_equal(
	    sh("debugfs -R 'stat <%u>' %s 2>/dev/null | grep -q 'Generation: %u '", g, img, gen_g),
	    0);
}

/* The root directory's first block, from the image on disk. */
static uint64_t root_block(void)
{
	char cmd[sizeof(img) + 64];
	unsigned long blk = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "debugfs -R 'bmap / 0' %s 2>/dev/null", img);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%lu", &blk), 1);
	pclose(p);
	assert_true(blk > 0);
	return blk;
}

/* A file moved into /x/y, both new, waits for x's entry in the root as
 * well as for y's (design.md §4, "and so on up"): else its old name could
 * go while x is not yet named, and the file be found only in lost+found.
 * The graph of unwritten patches shows it: an edge from the root's block,
 * where x's entry is the only change, to the file's new entry. */
static void test_rename_waits_up_the_new_tree(void **state)
{
	struct insp_query q = {.view = INSP_GRAPH, .limit = INSP_LIMIT_MAX};
	struct insp_snap *s = NULL;
	struct e2fs *fs;
	uint64_t root;
	uint32_t d, x, y;
	size_t out = 0;

	(void)state;
	mkimg("8M", "");
	root = root_block();
	fs = open_img();
	d = mk(fs, E2_ROOT_INO, "d", S_IFDIR | 0755);
	mk(fs, d, "pub", S_IFREG | 0644);
	assert_int_equal(e2_sync(fs), 0);
	x = mk(fs, E2_ROOT_INO, "x", S_IFDIR | 0755);
	y = mk(fs, x, "y", S_IFDIR | 0755);
	assert_int_equal(e2_rename(fs, NULL, d, "pub", y, "pub", 0), 0);
	assert_int_equal(inspect_take(e2_cache(fs), NULL, &q, &s), 0);
	assert_false(s->flags & INSP_S_TRUNCATED);
	for (size_t i = 0; i < s->nedges; i++) {
		const struct insp_patch *b = NULL, *a = NULL;

		for (size_t k = 0; k < s->npatches; k++) {
			if (s->patches[k].seq == s->edges[i].before)
				b = &s->patches[k];
			if (s->patches[k].seq == s->edges[i].after)
				a = &s->patches[k];
		}
		assert_non_null(b);
		assert_non_null(a);
		out += b->blkno == root && a->blkno != root && a->blkno != UINT64_MAX;
	}
	inspect_free(s);
	assert_int_equal(out, 1);
	close_check(fs);
}

static void test_rename(void **state)
{
	struct e2fs *fs;
	struct stat st;
	uint32_t a, b, x, y, z;

	(void)state;
	mkimg("8M", "");
	fs = open_img();
	a = mk(fs, E2_ROOT_INO, "a", S_IFDIR | 0755);
	b = mk(fs, E2_ROOT_INO, "b", S_IFDIR | 0755);
	x = mk(fs, a, "x", S_IFREG | 0644);
	y = mk(fs, a, "y", S_IFREG | 0644);
	/* plain, within a directory */
	assert_int_equal(e2_rename(fs, NULL, a, "x", a, "x2", 0), 0);
	assert_int_equal(e2_lookup(fs, a, "x", &st), -ENOENT);
	assert_int_equal(e2_lookup(fs, a, "x2", &st), 0);
	assert_int_equal(st.st_ino, x);
	/* over an existing file */
	assert_int_equal(e2_rename(fs, NULL, a, "x2", a, "y", E2_RENAME_NOREPLACE), -EEXIST);
	assert_int_equal(e2_rename(fs, NULL, a, "x2", a, "y", 0), 0);
	assert_int_equal(e2_lookup(fs, a, "y", &st), 0);
	assert_int_equal(st.st_ino, x);
	assert_int_equal(e2_forget(fs, y, 1), 0);
	/* a directory across parents, and into its own subtree */
	z = mk(fs, a, "z", S_IFDIR | 0755);
	mk(fs, z, "inner", S_IFDIR | 0755);
	assert_int_equal(e2_rename(fs, NULL, a, "z", z, "zz", 0), -EINVAL);
	assert_int_equal(e2_rename(fs, NULL, E2_ROOT_INO, "a", z, "zz", 0), -EINVAL);
	assert_int_equal(e2_rename(fs, NULL, a, "z", b, "z", 0), 0);
	assert_int_equal(e2_getattr(fs, a, &st), 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(e2_getattr(fs, b, &st), 0);
	assert_int_equal(st.st_nlink, 3);
	assert_int_equal(e2_lookup(fs, z, "..", &st), 0);
	assert_int_equal(st.st_ino, b);
	/* directory over an empty directory, and over a non-empty one */
	mk(fs, a, "empty", S_IFDIR | 0755);
	assert_int_equal(e2_rename(fs, NULL, b, "z", a, "empty", 0), 0);
	assert_int_equal(e2_getattr(fs, a, &st), 0);
	assert_int_equal(st.st_nlink, 3);
	assert_int_equal(e2_getattr(fs, b, &st), 0);
	assert_int_equal(st.st_nlink, 2);
	mk(fs, b, "full", S_IFDIR | 0755);
	mk(fs, a, "full2", S_IFDIR | 0755);
	assert_int_equal(e2_rename(fs, NULL, b, "full", a, "empty", 0), -ENOTEMPTY);
	assert_int_equal(e2_rename(fs, NULL, a, "y", a, "empty", 0), -EISDIR);
	assert_int_equal(e2_rename(fs, NULL, a, "empty", a, "y", 0), -ENOTDIR);
	/* exchange a file and a directory across parents */
	assert_int_equal(e2_rename(fs, NULL, a, "y", b, "full", E2_RENAME_EXCHANGE), 0);
	assert_int_equal(e2_lookup(fs, b, "full", &st), 0);
	assert_int_equal(st.st_ino, x);
	assert_int_equal(e2_lookup(fs, a, "y", &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(e2_lookup(fs, (uint32_t)st.st_ino, "..", &st), 0);
	assert_int_equal(st.st_ino, a);
	/* exchange two directories across parents: both '..' and counts */
	{
		uint32_t p = mk(fs, E2_ROOT_INO, "p", S_IFDIR | 0755);
		uint32_t q = mk(fs, E2_ROOT_INO, "q", S_IFDIR | 0755);
		uint32_t pd = mk(fs, p, "pd", S_IFDIR | 0755);
		uint32_t qd = mk(fs, q, "qd", S_IFDIR | 0755);

		mk(fs, q, "qd2", S_IFDIR | 0755);
		assert_int_equal(e2_rename(fs, NULL, p, "pd", q, "qd", E2_RENAME_EXCHANGE), 0);
		assert_int_equal(e2_lookup(fs, q, "qd", &st), 0);
		assert_int_equal(st.st_ino, pd);
		assert_int_equal(e2_lookup(fs, pd, "..", &st), 0);
		assert_int_equal(st.st_ino, q);
		assert_int_equal(e2_lookup(fs, qd, "..", &st), 0);
		assert_int_equal(st.st_ino, p);
		assert_int_equal(e2_getattr(fs, p, &st), 0);
		assert_int_equal(st.st_nlink, 3);
		assert_int_equal(e2_getattr(fs, q, &st), 0);
		assert_int_equal(st.st_nlink, 4);
		/* a directory over an empty one in another parent */
		assert_int_equal(e2_rename(fs, NULL, p, "pd", q, "qd2", 0), 0);
		assert_int_equal(e2_getattr(fs, p, &st), 0);
		assert_int_equal(st.st_nlink, 2);
		assert_int_equal(e2_getattr(fs, q, &st), 0);
		assert_int_equal(st.st_nlink, 4);
		assert_int_equal(e2_lookup(fs, q, "qd2", &st), 0);
		assert_int_equal(e2_lookup(fs, (uint32_t)st.st_ino, "..", &st), 0);
		assert_int_equal(st.st_ino, q);
		/* exchange within one directory, and onto itself */
		assert_int_equal(e2_rename(fs, NULL, q, "qd", q, "qd2", E2_RENAME_EXCHANGE), 0);
		assert_int_equal(e2_rename(fs, NULL, q, "qd", q, "qd", 0), 0);
		assert_int_equal(e2_rename(fs, NULL, q, "nope", q, "x", 0), -ENOENT);
		assert_int_equal(e2_rename(fs, NULL, q, "qd", q, "new", E2_RENAME_EXCHANGE),
				 -ENOENT);
	}
	close_check(fs);
}

static void test_big_directory_and_htree(void **state)
{
	char dir[64], name[64];
	struct e2fs *fs;
	struct stat st;
	uint32_t d;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/e2basic.%d.h", (int)getpid());
	assert_int_equal(sh("rm -rf %s && mkdir -p %s/h && cd %s/h && "
			    "for i in $(seq 1 400); do : > f$i; done",
			    dir, dir, dir),
			 0);
	mkimg("8M", "");
	/* e2fsck -D builds the htree index mke2fs -d does not */
	assert_int_equal(sh("mke2fs -q -t ext2 -F -b 1024 -N 4096 -d %s %s 8M >/dev/null 2>&1 && "
			    "{ e2fsck -fyD %s >/dev/null 2>&1; [ $? -le 1 ]; } && "
			    "debugfs -R 'stat /h' %s 2>/dev/null | grep -q 'Flags: 0x1000'",
			    dir, img, img, img),
			 0);
	fs = open_img();
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "h", &st), 0);
	d = (uint32_t)st.st_ino;
	for (int i = 1; i <= 400; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(e2_lookup(fs, d, name, &st), 0);
	}
	for (int i = 401; i <= 3000; i++) {
		snprintf(name, sizeof(name), "a-rather-longer-name-%d", i);
		mk(fs, d, name, S_IFREG | 0644);
	}
	for (int i = 1; i <= 400; i += 2) {
		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(e2_unlink(fs, NULL, d, name), 0);
	}
	for (int i = 401; i <= 3000; i++) {
		snprintf(name, sizeof(name), "a-rather-longer-name-%d", i);
		assert_int_equal(e2_lookup(fs, d, name, &st), 0);
	}
	close_check(fs);
	assert_int_equal(sh("debugfs -R 'stat /h' %s 2>/dev/null | grep -q 'Flags: 0x1000'", img),
			 1);
	sh("rm -rf %s", dir);
}

/* Creates reuse room anywhere in the directory (before the block of the last
 * insert too) before growing it, a long name skips gaps too small for it,
 * and the room index stays right as the directory grows past its first
 * index size (16 blocks). */
static void test_dir_reuses_room(void **state)
{
	char name[300];
	struct e2fs *fs;
	struct stat st;
	uint32_t d;
	off_t size;

	(void)state;
	mkimg("8M", "-N 4096");
	fs = open_img();
	d = mk(fs, E2_ROOT_INO, "d", S_IFDIR | 0755);
	/* 16-byte records: 62 fill the first block after "." and "..", 64
	 * each later one, so 2046 fill 32 blocks exactly */
	for (int i = 0; i < 2046; i++) {
		snprintf(name, sizeof(name), "n%04d", i);
		mk(fs, d, name, S_IFREG | 0644);
	}
	assert_int_equal(e2_getattr(fs, d, &st), 0);
	size = st.st_size;
	assert_int_equal(size, 32 * 1024);
	for (int i = 0; i < 2046; i += 100) { /* a hole every block or two */
		snprintf(name, sizeof(name), "n%04d", i);
		assert_int_equal(e2_unlink(fs, NULL, d, name), 0);
	}
	/* a new name goes where a removal is only once that is on disk */
	assert_int_equal(e2_sync(fs), 0);
	for (int i = 0; i < 21; i++) {
		snprintf(name, sizeof(name), "m%04d", i);
		mk(fs, d, name, S_IFREG | 0644);
		assert_int_equal(e2_getattr(fs, d, &st), 0);
		assert_int_equal(st.st_size, size);
	}
	/* the holes are full again: a 200-byte name needs new room */
	memset(name, 'x', 200);
	name[200] = 0;
	mk(fs, d, name, S_IFREG | 0644);
	assert_int_equal(e2_getattr(fs, d, &st), 0);
	assert_int_equal(st.st_size, size + 1024);
	for (int i = 0; i < 2046; i++) {
		snprintf(name, sizeof(name), i % 100 ? "n%04d" : "m%04d", i % 100 ? i : i / 100);
		assert_int_equal(e2_lookup(fs, d, name, &st), 0);
	}
	close_check(fs);
}

/* A new name that gets no gate (here a FIFO; e2_gate.c) does not take the
 * place of a removal that is not on disk yet: it would have to wait for
 * the removal, and a rename's removal waits for the new name in another
 * block.  It goes to a new block when there is no other room, and into
 * the hole once the removal is written.  A new regular file gets a gate
 * and does take the hole: its entry waits for the removal in its own
 * block, and a loop of replaces then stays in one directory block. */
static void test_dir_new_name_skips_pending_hole(void **state)
{
	char name[16];
	struct e2fs *fs;
	struct stat st;
	uint32_t d;

	(void)state;
	mkimg("8M", "-N 4096");
	fs = open_img();
	d = mk(fs, E2_ROOT_INO, "d", S_IFDIR | 0755);
	for (int i = 0; i < 62; i++) { /* 16-byte records fill the first block */
		snprintf(name, sizeof(name), "n%04d", i);
		mk(fs, d, name, S_IFREG | 0644);
	}
	assert_int_equal(e2_getattr(fs, d, &st), 0);
	assert_int_equal(st.st_size, 1024);
	assert_int_equal(e2_unlink(fs, NULL, d, "n0030"), 0);
	assert_int_equal(e2_sync(fs), 0);
	mk(fs, d, "m0000", S_IFIFO | 0644);
	assert_int_equal(e2_getattr(fs, d, &st), 0);
	assert_int_equal(st.st_size, 1024);
	assert_int_equal(e2_unlink(fs, NULL, d, "n0031"), 0);
	mk(fs, d, "m0001", S_IFREG | 0644);
	assert_int_equal(e2_getattr(fs, d, &st), 0);
	assert_int_equal(st.st_size, 1024);
	assert_int_equal(e2_unlink(fs, NULL, d, "n0032"), 0);
	mk(fs, d, "m0002", S_IFIFO | 0644);
	assert_int_equal(e2_getattr(fs, d, &st), 0);
	assert_int_equal(st.st_size, 2048);
	assert_int_equal(e2_lookup(fs, d, "m0000", &st), 0);
	assert_int_equal(e2_lookup(fs, d, "m0001", &st), 0);
	assert_int_equal(e2_lookup(fs, d, "m0002", &st), 0);
	assert_int_equal(e2_lookup(fs, d, "n0031", &st), -ENOENT);
	assert_int_equal(e2_lookup(fs, d, "n0032", &st), -ENOENT);
	close_check(fs);
}

static void test_enospc(void **state)
{
	static char chunk[65536];
	struct e2fs *fs;
	struct stat st;
	uint32_t f;
	ssize_t w;
	off_t off = 0;
	int i, r;

	(void)state;
	mkimg("2M", "-N 64");
	fs = open_img();
	f = mk(fs, E2_ROOT_INO, "fill", S_IFREG | 0644);
	while ((w = e2_write(fs, NULL, f, chunk, sizeof(chunk), off)) > 0)
		off += w;
	assert_int_equal(w, -ENOSPC);
	assert_true(off > 1500000);
	assert_int_equal(e2_mkdir(fs, NULL, E2_ROOT_INO, "d", 0755, 0, 0, &st), -ENOSPC);
	for (i = 0; i < 200; i++) {
		char name[16];

		snprintf(name, sizeof(name), "n%d", i);
		r = e2_mknod(fs, NULL, E2_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st);
		if (r)
			break;
	}
	assert_int_equal(r, -ENOSPC);
	close_check(fs);
}

static void test_fsync_survives_crash(void **state)
{
	struct e2_opts o = {.no_flusher = true};
	struct e2fs *fs;
	struct stat st;
	char buf[5000], back[5000];
	uint32_t d, f;

	(void)state;
	mkimg("8M", "");
	fs = open_img();
	d = mk(fs, E2_ROOT_INO, "d", S_IFDIR | 0755);
	f = mk(fs, d, "f", S_IFREG | 0644);
	memset(buf, 'q', sizeof(buf));
	assert_int_equal(e2_write(fs, NULL, f, buf, 100, 0), 100);
	/* the first fsync of an inode syncs everything; later ones only the
	 * inode's own changes */
	assert_int_equal(e2_fsync(fs, f, false), 0);
	assert_int_equal(e2_write(fs, NULL, f, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	assert_int_equal(e2_fsync(fs, f, false), 0);
	assert_int_equal(e2_fsync(fs, f, false), 0); /* nothing new: no-op */
	assert_false(e2_was_unclean(fs));
	e2_abandon(fs);
	assert_int_equal(e2_open(img, &o, &fs), 0);
	assert_true(e2_was_unclean(fs));
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "d", &st), 0);
	assert_int_equal(e2_lookup(fs, (uint32_t)st.st_ino, "f", &st), 0);
	assert_int_equal(st.st_size, sizeof(buf));
	assert_int_equal(e2_read(fs, (uint32_t)st.st_ino, back, sizeof(back), 0),
			 (ssize_t)sizeof(back));
	assert_memory_equal(buf, back, sizeof(buf));
	close_check(fs);
}

static void test_readonly_and_none(void **state)
{
	struct e2_opts ro = {.no_flusher = true, .readonly = true};
	struct e2_opts none = {.no_flusher = true, .consistency = CONSISTENCY_NONE};
	struct e2fs *fs;
	struct stat st;
	char buf[16];

	(void)state;
	mkimg("4M", "");
	assert_int_equal(e2_open(img, &none, &fs), 0);
	mk(fs, E2_ROOT_INO, "x", S_IFREG | 0644);
	assert_int_equal(e2_write(fs, NULL, 12, "abc", 3, 0), 3);
	assert_int_equal(e2_fsync(fs, 12, false), 0);
	close_check(fs);
	assert_int_equal(e2_open(img, &ro, &fs), 0);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "x", &st), 0);
	assert_int_equal(e2_read(fs, (uint32_t)st.st_ino, buf, sizeof(buf), 0), 3);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "y", S_IFREG | 0644, 0, 0, 0, &st),
			 -EROFS);
	assert_int_equal(e2_write(fs, NULL, 12, "abc", 3, 0), -EROFS);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "x"), -EROFS);
	close_check(fs);
}

static void test_close_frees_orphans(void **state)
{
	static char data[40000];
	struct e2fs *fs;
	struct statvfs before, after;
	uint32_t f;

	(void)state;
	mkimg("4M", "");
	fs = open_img();
	assert_int_equal(e2_statfs(fs, &before), 0);
	f = mk(fs, E2_ROOT_INO, "orphan", S_IFREG | 0644);
	assert_int_equal(e2_write(fs, NULL, f, data, sizeof(data), 0), (ssize_t)sizeof(data));
	assert_int_equal(e2_open_inode(fs, f), 0);
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "orphan"), 0);
	/* still open and looked up: nothing freed yet */
	assert_int_equal(e2_statfs(fs, &after), 0);
	assert_true(after.f_bfree < before.f_bfree);
	assert_int_equal(e2_write(fs, NULL, f, data, 10, 50000), 10);
	close_check(fs); /* e2fsck finds no leaked inode or blocks */
	fs = open_img();
	assert_int_equal(e2_statfs(fs, &after), 0);
	assert_int_equal(after.f_bfree, before.f_bfree);
	assert_int_equal(after.f_ffree, before.f_ffree);
	close_check(fs);
}

/* Two files share one extended-attribute block (reference count 2, as the
 * kernel shares equal attribute sets): each unlink drops one reference and
 * the last one frees the block, so e2fsck stays clean after each. */
static void test_unlink_releases_xattr_block(void **state)
{
	struct e2fs *fs;

	(void)state;
	mkimg("4M", "-I 128");
	assert_int_equal(
	    sh("echo hi > %s.hi && debugfs -w -R 'write %s.hi f' %s >/dev/null 2>&1 && "
	       "debugfs -w -R 'write %s.hi g' %s >/dev/null 2>&1 && "
	       "debugfs -w -R 'ea_set /f user.a bbbbbbbbbbbb' %s >/dev/null 2>&1 && "
	       "debugfs -w -R 'ea_set /g user.a bbbbbbbbbbbb' %s >/dev/null 2>&1",
	       img, img, img, img, img, img, img),
	    0);
	/* make g point at f's block, free g's own, and count two references */
	assert_int_equal(
	    sh("a=$(debugfs -R 'stat /f' %s 2>/dev/null | sed -n 's/^File ACL: "
	       "\\([0-9]*\\).*/\\1/p') && "
	       "b=$(debugfs -R 'stat /g' %s 2>/dev/null | sed -n 's/^File ACL: "
	       "\\([0-9]*\\).*/\\1/p') && "
	       "[ \"$a\" -gt 0 ] && [ \"$b\" -gt 0 ] && "
	       "debugfs -w -R \"sif /g file_acl $a\" %s >/dev/null 2>&1 && "
	       "debugfs -w -R \"freeb $b\" %s >/dev/null 2>&1 && "
	       "printf '\\002\\000\\000\\000' | dd of=%s bs=1 seek=$((a * 1024 + 4)) "
	       "conv=notrunc 2>/dev/null && { e2fsck -fy %s >/dev/null 2>&1; [ $? -le 1 ]; } && "
	       "e2fsck -fn %s >/dev/null 2>&1",
	       img, img, img, img, img, img, img),
	    0);
	fs = open_img();
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "f"), 0);
	close_check(fs);
	fs = open_img();
	assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "g"), 0);
	close_check(fs);
	sh("rm -f %s.hi", img);
}

struct tailcheck {
	unsigned states, bad;
};

/* A crash state is bad if the shrink-and-grow took effect beyond the
 * first block (bytes from 1024 read as zeros) while the old bytes past
 * the shrunk size in the first block are still there. */
static int tail_state(const struct crash_state *cs, void *arg)
{
	struct e2_opts o = {.no_flusher = true, .readonly = true};
	struct tailcheck *tc = arg;
	struct e2fs *fs;
	struct bdev *dev;
	struct stat st;
	char buf[3000];

	tc->states++;
	assert_int_equal(bdev_mem_create(cs->block_size, 0, cs->image, cs->image_len, &dev), 0);
	assert_int_equal(e2_open_bdev(dev, &o, &fs), 0);
	if (e2_lookup(fs, E2_ROOT_INO, "f", &st) == 0 && st.st_size == 3000 &&
	    e2_read(fs, (uint32_t)st.st_ino, buf, sizeof(buf), 0) == 3000) {
		bool grown = true, stale = false;

		for (int i = 1024; i < 3000; i++)
			grown &= buf[i] == 0;
		for (int i = 100; i < 1024; i++)
			stale |= buf[i] != 0;
		if (grown && stale)
			tc->bad++;
	}
	e2_abandon(fs);
	return 0;
}

static unsigned shrink_grow_bad(enum consistency cons)
{
	struct e2_opts o = {.no_flusher = true, .consistency = cons, .clock = e2t_fixed_clock};
	struct crash_opts co = {.max_exhaustive = 10, .samples = 64, .seed = 1};
	struct tailcheck tc = {0, 0};
	struct bdev *mem, *rec;
	struct e2fs *fs;
	struct stat st, a;
	char data[3000];
	void *bytes;
	size_t len;

	mkimg("1M", "");
	assert_int_equal(e2t_read_file(img, &bytes, &len), 0);
	assert_int_equal(bdev_mem_create(1024, 0, bytes, len, &mem), 0);
	free(bytes);
	assert_int_equal(bdev_recorder_create(mem, &rec), 0);
	assert_int_equal(e2_open_bdev(rec, &o, &fs), 0);
	memset(data, 'A', sizeof(data));
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &st), 0);
	assert_int_equal(e2_write(fs, NULL, (uint32_t)st.st_ino, data, sizeof(data), 0), 3000);
	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(bdev_recorder_reset(rec), 0);
	a.st_size = 100;
	assert_int_equal(e2_setattr(fs, NULL, (uint32_t)st.st_ino, &a, E2_SET_SIZE, &st), 0);
	a.st_size = 3000;
	assert_int_equal(e2_setattr(fs, NULL, (uint32_t)st.st_ino, &a, E2_SET_SIZE, &st), 0);
	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(crash_enumerate(rec, &co, tail_state, &tc, NULL), 0);
	assert_true(tc.states > 1);
	e2_abandon(fs);
	return tc.bad;
}

/* Shrinking zeroes the tail of the last block; growing again must never
 * expose the old bytes there after a crash (size update -> the zeroing it
 * covers).  Without ordering the same check finds such a state. */
static void test_shrink_then_grow_reads_zeros_after_crash(void **state)
{
	(void)state;
	assert_int_equal(shrink_grow_bad(CONSISTENCY_SOFTUPDATES), 0);
	assert_true(shrink_grow_bad(CONSISTENCY_NONE) > 0);
}

/* What a journaled mount wrote, read from the recorder's log from event
 * `from` on. */
struct jcount {
	struct bdev *rec, *mem;
	size_t len;
	size_t from;
	uint64_t home; /* the block that holds f's inode */
	unsigned commits, barriers, home_writes;
	uint64_t cache_barriers, cache_writes, writes; /* at the close */
};

static void jcount_scan(struct jcount *jc)
{
	size_t n = bdev_recorder_count(jc->rec);

	jc->commits = jc->barriers = jc->home_writes = 0;
	jc->writes = 0;
	for (size_t i = jc->from; i < n; i++) {
		const struct rec_event *ev = bdev_recorder_event(jc->rec, i);
		const uint8_t *d = ev->data;

		if (ev->kind == REC_BARRIER) {
			jc->barriers++;
			continue;
		}
		jc->writes++;
		if (ev->blkno == jc->home)
			jc->home_writes++;
		/* JBD2 magic, block type 2 (commit), big-endian */
		if (d[0] == 0xc0 && d[1] == 0x3b && d[2] == 0x39 && d[3] == 0x98 && d[4] == 0 &&
		    d[5] == 0 && d[6] == 0 && d[7] == 2)
			jc->commits++;
	}
}

static void jcount_close(struct cache *c, void *arg)
{
	struct jcount *jc = arg;
	struct cache_stats st;
	FILE *f;

	cache_get_stats(c, &st);
	jc->cache_barriers = st.barriers;
	jc->cache_writes = st.block_writes;
	jcount_scan(jc);
	/* the image as the close left it, for e2fsck */
	f = fopen(img, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(bdev_mem_data(jc->mem), 1, jc->len, f), jc->len);
	assert_int_equal(fclose(f), 0);
}

/* Under consistency=journal an fsync is one commit: the log copies and the
 * commit block, two barriers.  The home writes wait for the checkpoint, so
 * an inode changed and fsynced N times is written home once, at the
 * unmount, not N times.  The counters read at the close (after the last
 * checkpoint) match what the device saw. */
static void test_journal_fsync_goes_home_once(void **state)
{
	struct e2_opts o = {
	    .no_flusher = true, .consistency = CONSISTENCY_JOURNAL, .clock = e2t_fixed_clock};
	struct jcount jc = {0};
	struct bdev *mem;
	struct e2fs *fs;
	struct stat st;
	unsigned long long home = 0;
	char line[256];
	void *bytes;
	size_t len;
	uint32_t ino;
	FILE *f;
	const int n = 20;

	(void)state;
	mkimg("4M", "-j");
	fs = open_img();
	ino = mk(fs, E2_ROOT_INO, "f", S_IFREG | 0644);
	close_check(fs);
	snprintf(line, sizeof(line), "debugfs -R 'imap <%u>' %s 2>/dev/null", ino, img);
	f = popen(line, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "located at block"))
			home = strtoull(strstr(line, "located at block") + 17, NULL, 10);
	pclose(f);
	assert_true(home > 0);
	jc.home = home;

	assert_int_equal(e2t_read_file(img, &bytes, &len), 0);
	assert_int_equal(bdev_mem_create(1024, 0, bytes, len, &mem), 0);
	free(bytes);
	jc.mem = mem;
	jc.len = len;
	assert_int_equal(bdev_recorder_create(mem, &jc.rec), 0);
	assert_int_equal(e2_open_bdev(jc.rec, &o, &fs), 0);
	assert_int_equal(e2_lookup(fs, E2_ROOT_INO, "f", &st), 0);
	jc.from = bdev_recorder_count(jc.rec);
	for (int i = 0; i < n; i++) {
		char rec[8];

		memset(rec, 'a' + i, sizeof(rec));
		/* grows the file: its inode changes every time */
		assert_int_equal(e2_write(fs, NULL, ino, rec, sizeof(rec), (off_t)i * 8), 8);
		assert_int_equal(e2_fsync(fs, ino, false), 0);
	}
	jcount_scan(&jc);
	assert_int_equal(jc.commits, n);
	/* (the first sets needs_recovery beside its log blocks) */
	assert_int_equal(jc.barriers, 2u * n);
	assert_int_equal(jc.home_writes, 0);

	jc.from = 0;
	assert_int_equal(e2_close_then(fs, jcount_close, &jc), 0);
	assert_int_equal(jc.cache_barriers, jc.barriers);
	assert_int_equal(jc.cache_writes, jc.writes);
	/* From the open on: the fsyncs' commits and the unmount's; the inode
	 * block once, at the final checkpoint. */
	assert_true(jc.commits >= (unsigned)n);
	assert_int_equal(jc.home_writes, 1);
	fsck_clean();
}

/* An fsync under consistency=journal waits only for what is not durable
 * yet.  An overwrite in place that leaves the inode as it was (the clock
 * stands still here, as it does within one tick) is ordered data alone:
 * its fsync writes the data and issues one barrier, with no commit block
 * (which would cover no log block).  An fsync with nothing new, of the
 * file or of its directory whose change the last commit carried, writes
 * nothing at all. */
static void test_journal_fsync_waits_only_for_what_is_new(void **state)
{
	struct e2_opts o = {
	    .no_flusher = true, .consistency = CONSISTENCY_JOURNAL, .clock = e2t_fixed_clock};
	struct jcount jc = {0};
	const struct rec_event *ev;
	char buf[1024];
	void *bytes;
	size_t len;
	uint32_t ino;
	struct e2fs *fs;

	(void)state;
	mkimg("4M", "-j");
	assert_int_equal(e2t_read_file(img, &bytes, &len), 0);
	assert_int_equal(bdev_mem_create(1024, 0, bytes, len, &jc.mem), 0);
	free(bytes);
	jc.len = len;
	assert_int_equal(bdev_recorder_create(jc.mem, &jc.rec), 0);
	assert_int_equal(e2_open_bdev(jc.rec, &o, &fs), 0);
	ino = mk(fs, E2_ROOT_INO, "f", S_IFREG | 0644);
	memset(buf, 'a', sizeof(buf));
	assert_int_equal(e2_write(fs, NULL, ino, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	jc.from = bdev_recorder_count(jc.rec);
	assert_int_equal(e2_fsync(fs, ino, false), 0);
	jcount_scan(&jc);
	assert_int_equal(jc.commits, 1);
	assert_int_equal(jc.barriers, 2);

	/* nothing new: the file, then its directory */
	jc.from = bdev_recorder_count(jc.rec);
	assert_int_equal(e2_fsync(fs, ino, false), 0);
	assert_int_equal(e2_fsync(fs, E2_ROOT_INO, false), 0);
	assert_int_equal(bdev_recorder_count(jc.rec), jc.from);

	/* the same size and times: the data block, then one barrier */
	assert_int_equal(e2_write(fs, NULL, ino, "bbbbbbbb", 8, 100), 8);
	jc.from = bdev_recorder_count(jc.rec);
	assert_int_equal(e2_fsync(fs, ino, false), 0);
	jcount_scan(&jc);
	assert_int_equal(jc.commits, 0);
	assert_int_equal(jc.writes, 1);
	assert_int_equal(jc.barriers, 1);
	ev = bdev_recorder_event(jc.rec, jc.from);
	assert_int_equal(ev->kind, REC_WRITE);
	assert_memory_equal((const char *)ev->data + 100, "bbbbbbbb", 8);
	assert_int_equal(bdev_recorder_event(jc.rec, jc.from + 1)->kind, REC_BARRIER);
	assert_int_equal(e2_fsync(fs, ino, false), 0);
	assert_int_equal(bdev_recorder_count(jc.rec), jc.from + 2);

	/* a change of the inode again takes a commit */
	assert_int_equal(e2_write(fs, NULL, ino, "c", 1, 1024), 1);
	jc.from = bdev_recorder_count(jc.rec);
	assert_int_equal(e2_fsync(fs, ino, false), 0);
	jcount_scan(&jc);
	assert_int_equal(jc.commits, 1);
	assert_int_equal(jc.barriers, 2);
	/* (the close writes the image out for e2fsck) */
	jc.from = 0;
	assert_int_equal(e2_close_then(fs, jcount_close, &jc), 0);
	fsck_clean();
}

/* Under consistency=journal the inodes an rm -rf clears in one
 * transaction share their inode table block's patch: a joined change
 * merges into the block's newest patch across a gap of up to one inode,
 * since all of the transaction's changes of the block go home together.
 * With a patch per inode the transaction took one patch (its undo, its
 * edge to the hold, and a step in the commit, the checkpoint and the
 * round) per file.  The superblock's block is left out: the writer's own
 * change of needs_recovery lands there. */
static void test_journal_rm_shares_inode_block_patches(void **state)
{
	struct e2_opts o = {
	    .no_flusher = true, .consistency = CONSISTENCY_JOURNAL, .clock = e2t_fixed_clock};
	struct cache_stats a, b;
	struct e2fs *fs = NULL;
	uint32_t dir;
	char name[16];
	const int n = 64;

	(void)state;
	mkimg("4M", "-j -I 256");
	assert_int_equal(e2_open(img, &o, &fs), 0);
	dir = mk(fs, E2_ROOT_INO, "d", S_IFDIR | 0755);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		mk(fs, dir, name, S_IFREG | 0644);
	}
	assert_int_equal(e2_close(fs), 0);

	assert_int_equal(e2_open(img, &o, &fs), 0);
	cache_get_stats(e2_cache(fs), &a);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(e2_unlink(fs, NULL, dir, name), 0);
	}
	cache_get_stats(e2_cache(fs), &b);
	/* the n inodes lie in n / 4 blocks (1 KiB, four inodes each); a few
	 * more for the directory, the bitmaps, the group descriptor and the
	 * superblock.  A patch per inode made n + 4. */
	assert_true(b.patches_created - a.patches_created <= (uint64_t)n / 4 + 8);
	close_check(fs);
}

/* A new tree is written in a few rounds, however deep it is.  A new
 * directory's inode waits for its block and for its parent's count, which
 * lies in the parent's inode; a name in it waits for its inode only; and
 * directories take inodes from the top of a group, files from the bottom,
 * so nested directories share inode blocks.  When the new block waited
 * for the parent's count, each level waited for the one above it through
 * its directory block as well: two rounds a level, 27 for these 12 levels;
 * with that gone, but directories and files taking inodes side by side, 9
 * (each level's inode in a block of its files'). */
static void test_new_tree_rounds(void **state)
{
	const int depth = 12;
	struct cache_stats a, b;
	struct e2fs *fs;
	uint32_t dir = E2_ROOT_INO, f = 0;
	char name[16];

	(void)state;
	mkimg("8M", "-I 256");
	fs = open_img();
	for (int i = 0; i < depth; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		dir = mk(fs, dir, name, S_IFDIR | 0755);
		f = mk(fs, dir, "f", S_IFREG | 0644);
	}
	cache_get_stats(e2_cache(fs), &a);
	assert_int_equal(e2_sync(fs), 0);
	cache_get_stats(e2_cache(fs), &b);
	printf("# a new tree %d levels deep: %llu rounds, %llu block writes\n", depth,
	       (unsigned long long)(b.rounds - a.rounds),
	       (unsigned long long)(b.block_writes - a.block_writes));
	assert_true(b.rounds - a.rounds <= 6);
	/* the directories' inodes from the top, the files' from the bottom */
	assert_true(dir > f);
	close_check(fs);
}

/* A program that replaces files in a loop (write a temporary name, rename
 * it over the file) with no fsync and in no group: the flush writes it in
 * a few rounds however long the loop was.  The rename waits for its file's
 * size, and a new file's size used to wait for every earlier rename
 * (rename_order=all): the inode block and the directory took turns, two
 * rounds a replace: 426 rounds for these 200, where 7 do. */
static void test_replace_loop_rounds(void **state)
{
	const int nfiles = 16, n = 200;
	struct cache_stats a, b;
	struct e2fs *fs;
	uint32_t dir, ino;
	char name[16], tmp[16], data[64];

	(void)state;
	mkimg("8M", "-I 256");
	fs = open_img();
	dir = mk(fs, E2_ROOT_INO, "d", S_IFDIR | 0755);
	for (int i = 0; i < nfiles; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		e2_forget(fs, mk(fs, dir, name, S_IFREG | 0644), 1);
	}
	assert_int_equal(e2_sync(fs), 0);
	cache_get_stats(e2_cache(fs), &a);
	for (int k = 0; k < n; k++) {
		snprintf(name, sizeof(name), "f%02d", k % nfiles);
		snprintf(tmp, sizeof(tmp), ".t%02d", k % nfiles);
		ino = mk(fs, dir, tmp, S_IFREG | 0644);
		memset(data, 'a' + k % 26, sizeof(data));
		assert_int_equal(e2_write(fs, NULL, ino, data, sizeof(data), 0),
				 (ssize_t)sizeof(data));
		e2_forget(fs, ino, 1);
		assert_int_equal(e2_rename(fs, NULL, dir, tmp, dir, name, 0), 0);
	}
	assert_int_equal(e2_sync(fs), 0);
	cache_get_stats(e2_cache(fs), &b);
	printf("# %d replaces with no fsync: %llu rounds, %llu block writes\n", n,
	       (unsigned long long)(b.rounds - a.rounds),
	       (unsigned long long)(b.block_writes - a.block_writes));
	assert_true(b.rounds - a.rounds <= 12);
	close_check(fs);
}

/* A rename to a new name in the same directory, when the new name fits the
 * old entry's record, is one patch, and so one round: the inode never has
 * both names on disk, and its count is not raised around them.  With the
 * count raised before the new name and lowered after the old one went,
 * the inode and the directory took turns: three rounds.  A name too long
 * for the record goes the long way. */
static void test_rename_new_name_one_round(void **state)
{
	const char *longname = "a-name-longer-than-the-record-of-the-old-one";
	struct cache_stats a, b;
	struct e2fs *fs;
	struct stat st;
	uint32_t dir, ino;

	(void)state;
	mkimg("8M", "-I 256");
	fs = open_img();
	dir = mk(fs, E2_ROOT_INO, "d", S_IFDIR | 0755);
	ino = mk(fs, dir, "config.tmp", S_IFREG | 0644);
	assert_int_equal(e2_write(fs, NULL, ino, "new contents\n", 13, 0), 13);
	e2_forget(fs, ino, 1);
	assert_int_equal(e2_sync(fs), 0);
	cache_get_stats(e2_cache(fs), &a);
	assert_int_equal(e2_rename(fs, NULL, dir, "config.tmp", dir, "config", 0), 0);
	assert_int_equal(e2_sync(fs), 0);
	cache_get_stats(e2_cache(fs), &b);
	printf("# rename to a new name in place: %llu rounds\n",
	       (unsigned long long)(b.rounds - a.rounds));
	assert_int_equal(b.rounds - a.rounds, 1);
	assert_int_equal(e2_lookup(fs, dir, "config", &st), 0);
	assert_int_equal(st.st_ino, ino);
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(e2_lookup(fs, dir, "config.tmp", &st), -ENOENT);
	assert_int_equal(e2_rename(fs, NULL, dir, "config", dir, longname, 0), 0);
	assert_int_equal(e2_lookup(fs, dir, longname, &st), 0);
	assert_int_equal(st.st_ino, ino);
	assert_int_equal(e2_lookup(fs, dir, "config", &st), -ENOENT);
	/* the old name again, over its own pending removal */
	assert_int_equal(e2_rename(fs, NULL, dir, longname, dir, "config", 0), 0);
	assert_int_equal(e2_lookup(fs, dir, "config", &st), 0);
	assert_int_equal(st.st_ino, ino);
	close_check(fs);
}

/* Directories spread out at the top level and stay with their parent
 * below it (the group with room from the parent's on); a removed tree's
 * levels, each of whose count waits for the clear of the level below,
 * then share inode table blocks and go out in a round for several of
 * them.  Spread over the groups as well, 12 nested directories took 14
 * rounds to remove. */
static uint32_t img_inodes_per_group(void)
{
	uint8_t sb[4];
	int fd = open(img, O_RDONLY);

	assert_true(fd >= 0);
	/* s_inodes_per_group: byte 40 of the superblock, at 1024 */
	assert_int_equal(pread(fd, sb, 4, 1024 + 40), 4);
	close(fd);
	return (uint32_t)sb[0] | (uint32_t)sb[1] << 8 | (uint32_t)sb[2] << 16 |
	       (uint32_t)sb[3] << 24;
}

static void test_tree_stays_in_group(void **state)
{
	const int depth = 12;
	struct cache_stats a, b;
	uint32_t d[12], top2, g0, ipg;
	struct e2fs *fs;
	char name[16];

	(void)state;
	mkimg("8M", "-I 256 -g 1024");
	ipg = img_inodes_per_group();
	fs = open_img();
	d[0] = mk(fs, E2_ROOT_INO, "d0", S_IFDIR | 0755);
	for (int i = 1; i < depth; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		d[i] = mk(fs, d[i - 1], name, S_IFDIR | 0755);
	}
	top2 = mk(fs, E2_ROOT_INO, "top2", S_IFDIR | 0755);
	g0 = (d[0] - 1) / ipg;
	for (int i = 1; i < depth; i++)
		assert_int_equal((d[i] - 1) / ipg, g0);
	assert_int_not_equal((top2 - 1) / ipg, g0);
	assert_int_equal(e2_sync(fs), 0);

	cache_get_stats(e2_cache(fs), &a);
	for (int i = depth - 1; i >= 0; i--) {
		snprintf(name, sizeof(name), "d%d", i);
		assert_int_equal(e2_rmdir(fs, NULL, i ? d[i - 1] : E2_ROOT_INO, name), 0);
	}
	assert_int_equal(e2_sync(fs), 0);
	cache_get_stats(e2_cache(fs), &b);
	printf("# a tree %d levels deep removed: %llu rounds\n", depth,
	       (unsigned long long)(b.rounds - a.rounds));
	assert_true(b.rounds - a.rounds <= (uint64_t)depth / 2);
	close_check(fs);
}

/* Writes in rec of a directory block, told by its "." entry: the
 * directory's inode, rec_len 12, name_len 1, type 2 (a directory). */
static unsigned dir_block_writes(struct bdev *rec, uint32_t ino)
{
	unsigned n = 0;

	for (size_t i = 0; i < bdev_recorder_count(rec); i++) {
		const struct rec_event *ev = bdev_recorder_event(rec, i);
		const uint8_t *d = ev->data;

		if (ev->kind == REC_WRITE && d[0] == (uint8_t)ino && d[1] == (uint8_t)(ino >> 8) &&
		    d[2] == 0 && d[3] == 0 && d[4] == 12 && d[5] == 0 && d[6] == 1 && d[7] == 2 &&
		    d[8] == '.')
			n++;
	}
	return n;
}

/* Under consistency=journal a transaction does not log the blocks it
 * leaves free: the directories an rm -rf empties and removes.  Each
 * removed directory's block is written once at most (home, at the
 * unmount's checkpoint), where the root directory's, changed and kept, is
 * written twice (its copy in the log, then home).  The removal's log had
 * a copy of each. */
struct rmdirs {
	struct bdev *rec;
	uint32_t dirs[8];
	unsigned writes[8], root_writes;
};

static void rmdirs_close(struct cache *c, void *arg)
{
	struct rmdirs *r = arg;

	(void)c;
	for (int i = 0; i < 8; i++)
		r->writes[i] = dir_block_writes(r->rec, r->dirs[i]);
	r->root_writes = dir_block_writes(r->rec, E2_ROOT_INO);
}

static void test_journal_rm_logs_no_freed_blocks(void **state)
{
	struct e2_opts o = {
	    .no_flusher = true, .consistency = CONSISTENCY_JOURNAL, .clock = e2t_fixed_clock};
	struct rmdirs r = {0};
	struct bdev *mem;
	struct e2fs *fs;
	char name[16];
	void *bytes;
	size_t len;

	(void)state;
	mkimg("4M", "-j");
	assert_int_equal(e2_open(img, &o, &fs), 0);
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		r.dirs[i] = mk(fs, E2_ROOT_INO, name, S_IFDIR | 0755);
		mk(fs, r.dirs[i], "f", S_IFREG | 0644);
	}
	assert_int_equal(e2_close(fs), 0);

	assert_int_equal(e2t_read_file(img, &bytes, &len), 0);
	assert_int_equal(bdev_mem_create(1024, 0, bytes, len, &mem), 0);
	free(bytes);
	assert_int_equal(bdev_recorder_create(mem, &r.rec), 0);
	assert_int_equal(e2_open_bdev(r.rec, &o, &fs), 0);
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		assert_int_equal(e2_unlink(fs, NULL, r.dirs[i], "f"), 0);
		assert_int_equal(e2_rmdir(fs, NULL, E2_ROOT_INO, name), 0);
	}
	assert_int_equal(e2_close_then(fs, rmdirs_close, &r), 0);
	assert_int_equal(r.root_writes, 2);
	for (int i = 0; i < 8; i++)
		assert_true(r.writes[i] <= 1);
}

/* Crash states of a recording, each replayed twice, by fstitch
 * (e2_recover) and by e2fsck (-E journal_only), and checked by e2fsck
 * -fn: bad counts the states that either leaves unclean. */
struct jstates {
	struct jcount *jc;
	struct crash_opts co;
	char *path; /* from e2t_scratch_file(): the caller frees it */
	unsigned states, bad;
};

static int jstate_check(const struct crash_state *cs, void *arg)
{
	struct jstates *js = arg;
	struct e2_recovery rec;
	bool bad;

	js->states++;
	assert_int_equal(e2t_write_file(js->path, cs->image, cs->image_len), 0);
	bad = e2_recover(js->path, &rec) != 0 || sh("e2fsck -fn %s >/dev/null 2>&1", js->path);
	assert_int_equal(e2t_write_file(js->path, cs->image, cs->image_len), 0);
	sh("e2fsck -E journal_only -y %s >/dev/null 2>&1", js->path);
	bad |= sh("e2fsck -fn %s >/dev/null 2>&1", js->path) != 0;
	js->bad += bad;
	return 0;
}

static void jstates_close(struct cache *c, void *arg)
{
	struct jstates *js = arg;

	jcount_close(c, js->jc);
	assert_int_equal(crash_enumerate(js->jc->rec, &js->co, jstate_check, js, NULL), 0);
}

/* Mount img on a recorder under cons, make a file, write to it and
 * unmount: jc gets the counts, and the crash states are checked. */
static void mount_write_unmount(enum consistency cons, struct jcount *jc, struct jstates *js)
{
	struct e2_opts o = {.no_flusher = true, .consistency = cons, .clock = e2t_fixed_clock};
	struct e2fs *fs;
	void *bytes;
	size_t len;
	uint32_t ino;

	mkimg("4M", "-j");
	assert_int_equal(e2t_read_file(img, &bytes, &len), 0);
	assert_int_equal(bdev_mem_create(1024, 0, bytes, len, &jc->mem), 0);
	free(bytes);
	jc->len = len;
	assert_int_equal(bdev_recorder_create(jc->mem, &jc->rec), 0);
	assert_int_equal(e2_open_bdev(jc->rec, &o, &fs), 0);
	jcount_scan(jc);
	/* under the journal the open writes nothing yet */
	if (cons != CONSISTENCY_NONE)
		assert_int_equal(jc->barriers, 0);
	ino = mk(fs, E2_ROOT_INO, "f", S_IFREG | 0644);
	assert_int_equal(e2_write(fs, NULL, ino, "hello\n", 6, 0), 6);
	js->jc = jc;
	js->co = (struct crash_opts){.max_exhaustive = 6, .samples = 16, .seed = 1};
	js->path = e2t_scratch_file("jstate");
	assert_non_null(js->path);
	assert_int_equal(e2_close_then(fs, jstates_close, js), 0);
}

/* A journaled mount, one new file written and the unmount: five
 * barriers, each after what must be durable before the next writes:
 * needs_recovery (with the mount's unclean mark), the data and the log
 * blocks; the commit block and s_start; the checkpoint; s_start = 0; the
 * clean superblock.  Every crash state of it replays to a clean file
 * system; without ordering (consistency=none) some state does not. */
static void test_journal_mount_write_unmount(void **state)
{
	struct jcount jc = {0}, jn = {0};
	struct jstates js = {0}, jsn = {0};

	(void)state;
	mount_write_unmount(CONSISTENCY_JOURNAL, &jc, &js);
	assert_int_equal(jc.commits, 1);
	assert_int_equal(jc.barriers, 5);
	fsck_clean();
	assert_true(js.states > 10);
	assert_int_equal(js.bad, 0);

	mount_write_unmount(CONSISTENCY_NONE, &jn, &jsn);
	assert_int_equal(jn.commits, 0);
	assert_true(jsn.bad > 0);
	fprintf(stderr, "# journal: %u crash states, all clean; none: %u of %u unclean\n",
		js.states, jsn.bad, jsn.states);
	free(js.path);
	free(jsn.path);
}

/* Timestamps as Linux keeps them: signed seconds (1969 is not 2105), the
 * epoch bits past 2038 and nanoseconds in a 256-byte inode, clamped to
 * what the inode can hold; the same values after a reopen. */
static void check_times(const char *isize, const int64_t (*tab)[4], size_t n)
{
	struct e2fs *fs;
	struct stat st, a;
	uint32_t f;

	mkimg("4M", isize);
	fs = open_img();
	f = mk(fs, E2_ROOT_INO, "f", S_IFREG | 0644);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			char name[16];
			uint32_t ino;

			snprintf(name, sizeof(name), "t%zu", i);
			if (pass == 0) {
				ino = mk(fs, E2_ROOT_INO, name, S_IFREG | 0644);
				memset(&a, 0, sizeof(a));
				a.st_mtim.tv_sec = (time_t)tab[i][0];
				a.st_mtim.tv_nsec = (long)tab[i][1];
				a.st_atim = a.st_mtim;
				assert_int_equal(
				    e2_setattr(fs, NULL, ino, &a, E2_SET_MTIME | E2_SET_ATIME, &st),
				    0);
			} else {
				assert_int_equal(e2_lookup(fs, E2_ROOT_INO, name, &st), 0);
				e2_forget(fs, (uint32_t)st.st_ino, 1);
			}
			if ((int64_t)st.st_mtim.tv_sec != tab[i][2] ||
			    (int64_t)st.st_mtim.tv_nsec != tab[i][3] ||
			    st.st_atim.tv_sec != st.st_mtim.tv_sec ||
			    st.st_atim.tv_nsec != st.st_mtim.tv_nsec)
				fail_msg("%s pass %d: %lld.%09lld read back as %lld.%09ld, want "
					 "%lld.%09lld",
					 isize, pass, (long long)tab[i][0], (long long)tab[i][1],
					 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
					 (long long)tab[i][2], (long long)tab[i][3]);
		}
		assert_int_equal(e2_close(fs), 0);
		fs = open_img();
	}
	(void)f;
	assert_int_equal(e2_close(fs), 0);
	fsck_clean();
}

/* An inode with a larger i_extra_isize than Linux gives (64, as newer
 * fields would need) still has its nanoseconds read and written. */
static void test_timestamps_wide_extra(void **state)
{
	struct e2fs *fs;
	struct stat st, a;
	uint32_t f;

	(void)state;
	mkimg("4M", "-I 256");
	fs = open_img();
	f = mk(fs, E2_ROOT_INO, "f", S_IFREG | 0644);
	assert_int_equal(e2_close(fs), 0);
	assert_int_equal(sh("debugfs -w -R 'sif /f extra_isize 64' %s >/dev/null 2>&1", img), 0);
	assert_int_equal(
	    sh("debugfs -R 'stat /f' %s 2>/dev/null | grep -q 'extra inode fields: 64'", img), 0);
	fs = open_img();
	memset(&a, 0, sizeof(a));
	a.st_mtim.tv_sec = 2208945600; /* 2040 */
	a.st_mtim.tv_nsec = 987654321;
	assert_int_equal(e2_setattr(fs, NULL, f, &a, E2_SET_MTIME, &st), 0);
	assert_int_equal(e2_close(fs), 0);
	fs = open_img();
	assert_int_equal(e2_getattr(fs, f, &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 2208945600);
	assert_int_equal(st.st_mtim.tv_nsec, 987654321);
	assert_int_equal(e2_close(fs), 0);
	fsck_clean();
}

static void test_timestamps(void **state)
{
	/* seconds, nanoseconds given; seconds, nanoseconds read back */
	static const int64_t large[][4] = {
	    {-14256000, 0, -14256000, 0},		 /* 1969-07-20 */
	    {-14256000, 250, -14256000, 250},		 /* and a bit */
	    {(int64_t)INT32_MIN - 100, 5, INT32_MIN, 0}, /* before 1901: clamped */
	    {INT32_MAX, 1, INT32_MAX, 1},		 /* 2038-01-19 */
	    {(int64_t)INT32_MAX + 1, 2, (int64_t)INT32_MAX + 1, 2},
	    {2208945600, 123456789, 2208945600, 123456789}, /* 2040 */
	    {(int64_t)1 << 33, 999999999, (int64_t)1 << 33, 999999999},
	    {16725225600, 1, 15032385535, 0}, /* 2500: clamped to 2446 */
	    {1577836800, 123456789, 1577836800, 123456789},
	};
	static const int64_t small[][4] = {
	    {-14256000, 7, -14256000, 0},   /* whole seconds only */
	    {2208945600, 5, INT32_MAX, 0},  /* 2040: clamped to 2038 */
	    {16725225600, 1, INT32_MAX, 0}, /* 2500 */
	    {(int64_t)INT32_MIN - 1, 0, INT32_MIN, 0},
	    {1577836800, 123456789, 1577836800, 0},
	};

	(void)state;
	check_times("-I 256", large, sizeof(large) / sizeof(large[0]));
	check_times("-I 128", small, sizeof(small) / sizeof(small[0]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_open_refuses_features),
	    cmocka_unit_test(test_open_busy),
	    cmocka_unit_test(test_read_populated),
	    cmocka_unit_test(test_create_write_remove),
	    cmocka_unit_test(test_tmpfile),
	    cmocka_unit_test(test_rename),
	    cmocka_unit_test(test_rename_waits_up_the_new_tree),
	    cmocka_unit_test(test_big_directory_and_htree),
	    cmocka_unit_test(test_dir_reuses_room),
	    cmocka_unit_test(test_dir_new_name_skips_pending_hole),
	    cmocka_unit_test(test_enospc),
	    cmocka_unit_test(test_fsync_survives_crash),
	    cmocka_unit_test(test_readonly_and_none),
	    cmocka_unit_test(test_close_frees_orphans),
	    cmocka_unit_test(test_unlink_releases_xattr_block),
	    cmocka_unit_test(test_shrink_then_grow_reads_zeros_after_crash),
	    cmocka_unit_test(test_journal_fsync_goes_home_once),
	    cmocka_unit_test(test_journal_fsync_waits_only_for_what_is_new),
	    cmocka_unit_test(test_journal_rm_shares_inode_block_patches),
	    cmocka_unit_test(test_new_tree_rounds),
	    cmocka_unit_test(test_replace_loop_rounds),
	    cmocka_unit_test(test_rename_new_name_one_round),
	    cmocka_unit_test(test_tree_stays_in_group),
	    cmocka_unit_test(test_journal_rm_logs_no_freed_blocks),
	    cmocka_unit_test_teardown(test_journal_mount_write_unmount, e2t_remove_scratch),
	    cmocka_unit_test(test_timestamps),
	    cmocka_unit_test(test_generation_new_on_reuse),
	    cmocka_unit_test(test_timestamps_wide_extra),
	};
	int r = cmocka_run_group_tests(tests, NULL, NULL);

	unlink(img);
	return r;
}
