/* Extended attributes in the ext2 module (lib/ext2/e2_xattr.c).
 *
 *   - a model test: seeded random set / create / replace / remove / copy
 *     of whole sets across many inodes, against an in-memory model, with
 *     close and reopen in between, on 128-byte inodes (block only) and
 *     256-byte inodes (in the inode and in a block); with 128-byte inodes
 *     the blocks used must be exactly the distinct sets (sharing, and
 *     freeing of unshared blocks); e2fsck -fn clean at the end;
 *   - the kernel's error rules (ERANGE, E2BIG, ENODATA, EEXIST, ENOSPC at
 *     the exact size, EOPNOTSUPP, EINVAL) and ACL mode rules;
 *   - crash states of a sharing / unsharing / unlinking workload: none
 *     dangerous under soft updates (e2fsck -fn), every file's set one it
 *     really had; and dangerous states under consistency=none.
 *
 * Environment: E2_XATTR_SEED, E2_XATTR_STEPS. */
#include <errno.h>
#include <linux/fs.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "bdev/bdev.h"
#include "crash/crashsim.h"
#include "engine/cache.h"
#include "ext2/e2.h"
#include "../support/fsckclass.h"
#include "e2test_util.h"

#define NFILES 40
#define NNAMES 6
#define NVALS  6

static const char *names[NNAMES] = {"user.a",	  "user.bb",	      "trusted.t",
				    "user.ccccc", "security.selinux", "user.long.name.here"};
static const size_t vlens[NVALS] = {0, 3, 17, 64, 100, 5};

static void val_of(unsigned v, uint8_t *buf)
{
	for (size_t i = 0; i < vlens[v]; i++)
		buf[i] = (uint8_t)('a' + (v * 7 + i) % 26);
}

struct xmodel {
	int val[NFILES][NNAMES]; /* value index, -1: absent */
	uint32_t ino[NFILES];
};

static struct e2fs *open_path(const char *path)
{
	struct e2_opts o = {.no_flusher = true};
	struct e2fs *fs = NULL;
	int r = e2_open(path, &o, &fs);

	if (r)
		fail_msg("e2_open %s: %d (%s)", path, r, e2_open_error());
	return fs;
}

static void check_file(struct e2fs *fs, const struct xmodel *m, unsigned f, uint64_t seed,
		       unsigned step)
{
	char list[1024], want[1024];
	uint8_t buf[256], exp[256];
	size_t wl = 0;
	ssize_t n;

	for (unsigned k = 0; k < NNAMES; k++) {
		n = e2_getxattr(fs, m->ino[f], names[k], buf, sizeof(buf));
		if (m->val[f][k] < 0) {
			if (n != -ENODATA)
				fail_msg("seed %llu step %u file %u %s: got %zd, want ENODATA",
					 (unsigned long long)seed, step, f, names[k], n);
			continue;
		}
		val_of((unsigned)m->val[f][k], exp);
		if (n != (ssize_t)vlens[m->val[f][k]] || memcmp(buf, exp, (size_t)n) != 0)
			fail_msg("seed %llu step %u file %u %s: got %zd bytes, want value %d",
				 (unsigned long long)seed, step, f, names[k], n, m->val[f][k]);
		assert_int_equal(e2_getxattr(fs, m->ino[f], names[k], NULL, 0),
				 (ssize_t)vlens[m->val[f][k]]);
	}
	/* the list: sorted as stored (index, name length, name) */
	n = e2_listxattr(fs, m->ino[f], list, sizeof(list), true);
	assert_true(n >= 0);
	{
		/* expected: in Linux's order */
		static const unsigned order[NNAMES] = {0, 1, 3, 5, 2, 4};

		for (unsigned i = 0; i < NNAMES; i++) {
			unsigned k = order[i];

			if (m->val[f][k] < 0)
				continue;
			memcpy(want + wl, names[k], strlen(names[k]) + 1);
			wl += strlen(names[k]) + 1;
		}
	}
	if ((size_t)n != wl || memcmp(list, want, wl) != 0)
		fail_msg("seed %llu step %u file %u: list differs (%zd bytes, want %zu)",
			 (unsigned long long)seed, step, f, n, wl);
	assert_int_equal(e2_listxattr(fs, m->ino[f], NULL, 0, true), n);
	if (wl)
		assert_int_equal(e2_listxattr(fs, m->ino[f], list, wl - 1, true), -ERANGE);
}

static size_t distinct_sets(const struct xmodel *m)
{
	size_t n = 0;

	for (unsigned f = 0; f < NFILES; f++) {
		bool empty = true, dup = false;

		for (unsigned k = 0; k < NNAMES; k++)
			empty &= m->val[f][k] < 0;
		for (unsigned g = 0; !empty && g < f && !dup; g++)
			dup = memcmp(m->val[f], m->val[g], sizeof(m->val[f])) == 0;
		n += !empty && !dup;
	}
	return n;
}

static uint64_t free_blocks(struct e2fs *fs)
{
	struct statvfs sv;

	assert_int_equal(e2_statfs(fs, &sv), 0);
	return sv.f_bfree;
}

static void run_model(unsigned isize, uint64_t seed, unsigned steps)
{
	char *path = e2t_scratch_file("xattr-model");
	char extra[32];
	struct xmodel m;
	struct e2t_rng rng;
	struct e2fs *fs;
	struct e2t_fsck fr;
	uint64_t base;
	uint8_t buf[256];
	unsigned nshared_ok = 0;

	assert_non_null(path);
	snprintf(extra, sizeof(extra), "-I %u", isize);
	assert_int_equal(e2t_mkfs(path, 4096, 1024, extra, NULL), 0);
	fs = open_path(path);
	for (unsigned f = 0; f < NFILES; f++) {
		struct stat st;
		char nm[16];

		snprintf(nm, sizeof(nm), "f%u", f);
		assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, nm, S_IFREG | 0644, 0, 0, 0, &st),
				 0);
		m.ino[f] = (uint32_t)st.st_ino;
		for (unsigned k = 0; k < NNAMES; k++)
			m.val[f][k] = -1;
	}
	base = free_blocks(fs);
	e2t_rng_seed(&rng, seed);
	for (unsigned step = 0; step < steps; step++) {
		unsigned f = (unsigned)e2t_rng_below(&rng, NFILES);
		unsigned k = (unsigned)e2t_rng_below(&rng, NNAMES);
		unsigned op = (unsigned)e2t_rng_below(&rng, 10);
		int v = (int)e2t_rng_below(&rng, NVALS), r, want;

		val_of((unsigned)v, buf);
		if (op < 4) { /* set, with a random flag */
			unsigned flags = (unsigned)e2t_rng_below(&rng, 3);

			flags = flags == 1 ? E2_XATTR_CREATE : flags == 2 ? E2_XATTR_REPLACE : 0;
			want = 0;
			if ((flags & E2_XATTR_CREATE) && m.val[f][k] >= 0)
				want = -EEXIST;
			if ((flags & E2_XATTR_REPLACE) && m.val[f][k] < 0)
				want = -ENODATA;
			r = e2_setxattr(fs, NULL, m.ino[f], names[k], buf, vlens[v], flags);
			if (r != want)
				fail_msg("seed %llu step %u: set file %u %s flags %u: %d, want %d",
					 (unsigned long long)seed, step, f, names[k], flags, r,
					 want);
			if (!r)
				m.val[f][k] = v;
		} else if (op < 6) { /* remove */
			want = m.val[f][k] < 0 ? -ENODATA : 0;
			r = e2_removexattr(fs, NULL, m.ino[f], names[k]);
			if (r != want)
				fail_msg("seed %llu step %u: remove file %u %s: %d, want %d",
					 (unsigned long long)seed, step, f, names[k], r, want);
			m.val[f][k] = -1;
		} else if (op < 9) { /* copy another file's whole set (sharing) */
			unsigned g = (unsigned)e2t_rng_below(&rng, NFILES);

			for (unsigned j = 0; j < NNAMES; j++) {
				if (m.val[g][j] < 0) {
					if (m.val[f][j] >= 0)
						assert_int_equal(
						    e2_removexattr(fs, NULL, m.ino[f], names[j]),
						    0);
				} else {
					val_of((unsigned)m.val[g][j], buf);
					assert_int_equal(e2_setxattr(fs, NULL, m.ino[f], names[j],
								     buf, vlens[m.val[g][j]], 0),
							 0);
				}
				m.val[f][j] = m.val[g][j];
			}
		} else if (e2t_rng_below(&rng, 8) == 0) { /* close and reopen */
			assert_int_equal(e2_close(fs), 0);
			fs = open_path(path);
			for (unsigned g = 0; g < NFILES; g++)
				check_file(fs, &m, g, seed, step);
		}
		check_file(fs, &m, f, seed, step);
		if (isize == 128) {
			/* one block per distinct non-empty set, no more */
			uint64_t used = base - free_blocks(fs);

			if (used != distinct_sets(&m))
				fail_msg("seed %llu step %u: %llu attribute blocks in use for %zu "
					 "distinct sets",
					 (unsigned long long)seed, step, (unsigned long long)used,
					 distinct_sets(&m));
			nshared_ok++;
		}
	}
	for (unsigned f = 0; f < NFILES; f++)
		check_file(fs, &m, f, seed, steps);
	assert_int_equal(e2_close(fs), 0);
	assert_int_equal(e2t_fsck_file(path, &fr), 0);
	if (fr.status != 0)
		fail_msg("seed %llu: e2fsck -fn status %d:\n%s", (unsigned long long)seed,
			 fr.status, fr.output);
	e2t_fsck_free(&fr);
	fs = open_path(path);
	for (unsigned f = 0; f < NFILES; f++)
		check_file(fs, &m, f, seed, steps);
	assert_int_equal(e2_close(fs), 0);
	free(path);
	print_message("# model: %u-byte inodes, seed %llu, %u steps, %zu distinct sets at the "
		      "end (block count checked %u times)\n",
		      isize, (unsigned long long)seed, steps, distinct_sets(&m), nshared_ok);
}

static void test_model_small_inodes(void **state)
{
	(void)state;
	run_model(128, e2t_seed("E2_XATTR_SEED", 1),
		  (unsigned)e2t_env_long("E2_XATTR_STEPS", 1500));
}

static void test_model_large_inodes(void **state)
{
	(void)state;
	run_model(256, e2t_seed("E2_XATTR_SEED", 2),
		  (unsigned)e2t_env_long("E2_XATTR_STEPS", 1500));
}

/* A new file system at path (256-byte inodes) holding the file /f and the
 * directory /d with those modes. */
static struct e2fs *file_and_dir(const char *path, mode_t fmode, uint32_t *f, mode_t dmode,
				 uint32_t *d)
{
	struct e2fs *fs;
	struct stat st;

	assert_int_equal(e2t_mkfs(path, 2048, 1024, "-I 256", NULL), 0);
	fs = open_path(path);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "f", S_IFREG | fmode, 0, 0, 0, &st), 0);
	*f = (uint32_t)st.st_ino;
	assert_int_equal(e2_mkdir(fs, NULL, E2_ROOT_INO, "d", dmode, 0, 0, &st), 0);
	*d = (uint32_t)st.st_ino;
	return fs;
}

/* e2fsck -fn finds nothing wrong with the image at path. */
static void assert_fsck_clean(const char *path)
{
	struct e2t_fsck fr;

	assert_int_equal(e2t_fsck_file(path, &fr), 0);
	if (fr.status)
		fail_msg("e2fsck -fn status %d:\n%s", fr.status, fr.output);
	e2t_fsck_free(&fr);
}

/* ---- the kernel's error rules --------------------------------------------- */

static void test_errors(void **state)
{
	char *path = e2t_scratch_file("xattr-err");
	uint8_t big[70000];
	char longname[300];
	struct e2fs *fs;
	struct stat st;
	uint32_t ino;

	(void)state;
	assert_int_equal(e2t_mkfs(path, 2048, 1024, "-I 128", NULL), 0);
	fs = open_path(path);
	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &st), 0);
	ino = (uint32_t)st.st_ino;
	memset(big, 'x', sizeof(big));
	assert_int_equal(e2_getxattr(fs, ino, "user.none", NULL, 0), -ENODATA);
	assert_int_equal(e2_removexattr(fs, NULL, ino, "user.none"), -ENODATA);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "other.x", "1", 1, 0), -EOPNOTSUPP);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "system.foo", "1", 1, 0), -EOPNOTSUPP);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "user.", "1", 1, 0), -EINVAL);
	memset(longname, 'n', sizeof(longname));
	memcpy(longname, "user.", 5);
	longname[256] = 0;
	assert_int_equal(e2_setxattr(fs, NULL, ino, longname, "1", 1, 0), -ERANGE);
	longname[255] = 0;
	assert_int_equal(e2_setxattr(fs, NULL, ino, longname, "1", 1, 0), 0);
	assert_int_equal(e2_getxattr(fs, ino, longname, NULL, 0), 1);
	assert_int_equal(e2_removexattr(fs, NULL, ino, longname), 0);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "user.a", big, 65537, 0), -E2BIG);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "user.a", big, 1025, 0), -ERANGE);
	/* one block: 1024 - 32 header - 4 end marker = 988 bytes for the
	 * entry (20 for "a") and the value padded to 4: 968 fits, 969 not */
	assert_int_equal(e2_setxattr(fs, NULL, ino, "user.a", big, 969, 0), -ENOSPC);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "user.a", big, 968, 0), 0);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "user.b", "", 0, 0), -ENOSPC);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "user.a", "v", 1, E2_XATTR_CREATE), -EEXIST);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "user.c", "v", 1, E2_XATTR_REPLACE), -ENODATA);
	{
		uint8_t small[4];

		assert_int_equal(e2_getxattr(fs, ino, "user.a", small, sizeof(small)), -ERANGE);
	}
	/* trusted names are listed only when asked for */
	assert_int_equal(e2_setxattr(fs, NULL, ino, "user.a", "", 0, 0), 0);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "trusted.z", "1", 1, 0), 0);
	assert_int_equal(e2_listxattr(fs, ino, NULL, 0, true), 17);
	assert_int_equal(e2_listxattr(fs, ino, NULL, 0, false), 7);
	assert_int_equal(e2_close(fs), 0);
	assert_fsck_clean(path);
	free(path);
}

/* ---- what a change takes away (e2_kill_priv) ------------------------------ */

/* e2_caller.keeps_sgid of a caller in group 7 alone */
static bool in_group_7(const struct e2_caller *who, gid_t gid)
{
	(void)who;
	return gid == 7;
}

static void test_kill_priv(void **state)
{
	char *path = e2t_scratch_file("xattr-kill");
	static const uint8_t cap[20] = {0, 0, 0, 2, 0, 0x20};
	const struct e2_caller of_group_7 = {.keeps_sgid = in_group_7};
	bool dropped = false;
	const struct e2_caller killer = {.kill_priv = true, .kill_suid = true, .dropped = &dropped};
	struct e2fs *fs;
	struct stat a;
	uint32_t f, d;

	(void)state;
	fs = file_and_dir(path, 06775, &f, 02775, &d);
	/* nothing to drop: the answer is remembered, and a new capability
	 * must still be seen */
	assert_int_equal(e2_kill_priv(fs, NULL, f, false, E2_SAME_GID), 0);
	assert_int_equal(e2_setxattr(fs, NULL, f, "security.capability", cap, sizeof(cap), 0), 0);
	assert_int_equal(e2_kill_priv(fs, NULL, f, false, E2_SAME_GID), 1);
	assert_int_equal(e2_getxattr(fs, f, "security.capability", NULL, 0), -ENODATA);
	assert_int_equal(e2_getattr(fs, f, &a), 0);
	assert_int_equal(a.st_mode & 07777, 06775);
	/* suid: set-user-ID, and set-group-ID with group execute */
	assert_int_equal(e2_kill_priv(fs, NULL, f, true, E2_SAME_GID), 1);
	assert_int_equal(e2_getattr(fs, f, &a), 0);
	assert_int_equal(a.st_mode & 07777, 0775);
	assert_int_equal(e2_kill_priv(fs, NULL, f, true, E2_SAME_GID), 0);
	/* without group execute set-group-ID stays, unless the caller is
	 * outside the file's group (keeps_sgid), and then only with suid */
	assert_int_equal(e2_setattr(fs, NULL, f, &(struct stat){.st_mode = 02765}, E2_SET_MODE, &a),
			 0);
	assert_int_equal(e2_kill_priv(fs, NULL, f, true, E2_SAME_GID), 0);
	assert_int_equal(e2_setattr(fs, NULL, f, &(struct stat){.st_gid = 7}, E2_SET_GID, &a), 0);
	assert_int_equal(e2_kill_priv(fs, &of_group_7, f, true, E2_SAME_GID), 0);
	assert_int_equal(e2_setattr(fs, NULL, f, &(struct stat){.st_gid = 8}, E2_SET_GID, &a), 0);
	assert_int_equal(e2_kill_priv(fs, &of_group_7, f, false, E2_SAME_GID), 0);
	assert_int_equal(e2_getattr(fs, f, &a), 0);
	assert_int_equal(a.st_mode & 07777, 02765);
	assert_int_equal(e2_kill_priv(fs, &of_group_7, f, true, E2_SAME_GID), 1);
	assert_int_equal(e2_getattr(fs, f, &a), 0);
	assert_int_equal(a.st_mode & 07777, 0765);
	/* a directory keeps its bits and its capability */
	assert_int_equal(e2_setxattr(fs, NULL, d, "security.capability", cap, sizeof(cap), 0), 0);
	assert_int_equal(e2_kill_priv(fs, NULL, d, true, E2_SAME_GID), 0);
	assert_int_equal(e2_getattr(fs, d, &a), 0);
	assert_int_equal(a.st_mode & 07777, 02775);
	/* an append-only file loses its capability but not its bits: a
	 * mode change is refused, as on Linux */
	assert_int_equal(e2_setattr(fs, NULL, f, &(struct stat){.st_mode = 04755}, E2_SET_MODE, &a),
			 0);
	assert_int_equal(e2_setxattr(fs, NULL, f, "security.capability", cap, sizeof(cap), 0), 0);
	assert_int_equal(e2_setflags(fs, NULL, f, FS_APPEND_FL, true), 0);
	assert_int_equal(e2_kill_priv(fs, NULL, f, true, E2_SAME_GID), -EPERM);
	assert_int_equal(e2_kill_priv(fs, NULL, f, false, E2_SAME_GID), 1);
	assert_int_equal(e2_getxattr(fs, f, "security.capability", NULL, 0), -ENODATA);
	assert_int_equal(e2_kill_priv(fs, NULL, f, true, E2_SAME_GID), -EPERM);
	assert_int_equal(e2_setflags(fs, NULL, f, 0, true), 0);
	assert_int_equal(e2_getattr(fs, f, &a), 0);
	assert_int_equal(a.st_mode & 07777, 04755);
	/* a truncate or a write refused as too large drops nothing (Linux
	 * checks the size first); one that goes drops the bits, and says so */
	assert_int_equal(
	    e2_setattr(fs, &killer, f, &(struct stat){.st_size = (off_t)1 << 45}, E2_SET_SIZE, &a),
	    -EFBIG);
	assert_int_equal(e2_write(fs, &killer, f, "x", 1, (off_t)1 << 45), -EFBIG);
	assert_false(dropped);
	assert_int_equal(e2_getattr(fs, f, &a), 0);
	assert_int_equal(a.st_mode & 07777, 04755);
	assert_int_equal(e2_setattr(fs, &killer, f, &(struct stat){.st_size = 10}, E2_SET_SIZE, &a),
			 0);
	assert_true(dropped);
	assert_int_equal(a.st_mode & 07777, 0755);
	assert_int_equal(e2_close(fs), 0);
	assert_fsck_clean(path);
	free(path);
}

/* ext2 ACL encoding helpers for the tests */
static size_t acl(uint8_t *v, const uint16_t (*e)[3], size_t n)
{
	size_t p = 4;

	v[0] = 1, v[1] = v[2] = v[3] = 0;
	for (size_t i = 0; i < n; i++) {
		v[p] = (uint8_t)e[i][0];
		v[p + 1] = (uint8_t)(e[i][0] >> 8);
		v[p + 2] = (uint8_t)e[i][1];
		v[p + 3] = 0;
		p += 4;
		if (e[i][0] == 2 || e[i][0] == 8) {
			v[p] = (uint8_t)e[i][2];
			v[p + 1] = (uint8_t)(e[i][2] >> 8);
			v[p + 2] = v[p + 3] = 0;
			p += 4;
		}
	}
	return p;
}

static void test_acl_mode(void **state)
{
	char *path = e2t_scratch_file("xattr-acl");
	static const uint16_t minimal[][3] = {{1, 6, 0}, {4, 4, 0}, {0x20, 0, 0}};
	static const uint16_t named[][3] = {
	    {1, 7, 0}, {2, 6, 1000}, {4, 5, 0}, {0x10, 6, 0}, {0x20, 1, 0}};
	static const uint16_t nomask[][3] = {{1, 7, 0}, {2, 6, 1000}, {4, 5, 0}, {0x20, 1, 0}};
	uint8_t v[128];
	struct e2fs *fs;
	struct stat st;
	uint32_t ino, dir;
	size_t n;

	(void)state;
	fs = file_and_dir(path, 02777, &ino, 0755, &dir);
	/* equivalent to a mode: the mode changes, nothing is stored */
	n = acl(v, minimal, 3);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "system.posix_acl_access", v, n, 0), 0);
	assert_int_equal(e2_getattr(fs, ino, &st), 0);
	assert_int_equal(st.st_mode & 07777, 02640);
	assert_int_equal(e2_getxattr(fs, ino, "system.posix_acl_access", NULL, 0), -ENODATA);
	/* a named user: stored, group bits from the mask; set-group-ID
	 * cleared when asked */
	n = acl(v, named, 5);
	assert_int_equal(
	    e2_setxattr(fs, NULL, ino, "system.posix_acl_access", v, n, E2_XATTR_KILL_SGID), 0);
	assert_int_equal(e2_getattr(fs, ino, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0761);
	assert_int_equal(e2_getxattr(fs, ino, "system.posix_acl_access", NULL, 0), (ssize_t)n);
	/* malformed: named entry without a mask */
	n = acl(v, nomask, 4);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "system.posix_acl_access", v, n, 0), -EINVAL);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "system.posix_acl_access", "\2\0\0\0", 4, 0),
			 -EINVAL);
	/* a default ACL only on a directory */
	n = acl(v, named, 5);
	assert_int_equal(e2_setxattr(fs, NULL, ino, "system.posix_acl_default", v, n, 0), -EACCES);
	assert_int_equal(e2_setxattr(fs, NULL, dir, "system.posix_acl_default", v, n, 0), 0);
	assert_int_equal(e2_getattr(fs, dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(e2_close(fs), 0);
	assert_fsck_clean(path);
	free(path);
}

/* ---- crash states ---------------------------------------------------------- */

#define CF    6	 /* files */
#define CHIST 16 /* sets a file may have had */

struct cwork {
	uint32_t ino[CF];
	char hist[CF][CHIST][160]; /* every set each file had, as "name=value;..." */
	unsigned nhist[CF];
	bool gone[CF]; /* unlinked during the workload */
	size_t clean, benign, dangerous, semantic, checked;
	size_t shared; /* e2fsck -p stopped on a shared block's count (too high) */
	char first[2300];
};

static void set_string(struct e2fs *fs, uint32_t ino, char *out, size_t size)
{
	char list[512];
	ssize_t n = e2_listxattr(fs, ino, list, sizeof(list), true);
	size_t o = 0;

	out[0] = 0;
	if (n < 0) {
		snprintf(out, size, "error %zd", n);
		return;
	}
	for (char *p = list; p < list + n; p += strlen(p) + 1) {
		char v[128];
		ssize_t vl = e2_getxattr(fs, ino, p, v, sizeof(v) - 1);

		if (vl < 0)
			vl = 0;
		v[vl] = 0;
		o += (size_t)snprintf(out + o, size - o, "%s=%s;", p, v);
	}
}

static void remember(struct cwork *w, struct e2fs *fs, unsigned f)
{
	assert_true(w->nhist[f] < CHIST);
	set_string(fs, w->ino[f], w->hist[f][w->nhist[f]], sizeof(w->hist[f][0]));
	w->nhist[f]++;
}

static void cset(struct cwork *w, struct e2fs *fs, unsigned f, const char *name, const char *val)
{
	assert_int_equal(e2_setxattr(fs, NULL, w->ino[f], name, val, strlen(val), 0), 0);
	remember(w, fs, f);
}

/* Whether e2fsck -p stopped only on shared attribute blocks whose count is
 * too high, and e2fsck -fn found nothing forbidden.  A shared block's count
 * is raised before another inode points to it and lowered after an inode
 * stops (design.md §4), in another block than the pointer: every order
 * passes through a count too high, which e2fsck -p does not repair on its
 * own (doc/ext2-ordering.md).  Too low would be dangerous. */
static bool refcount_high_only(const struct e2t_fsck *fr)
{
	char copy[sizeof(fr->findings)], *l, *save;
	bool any = false;

	memcpy(copy, fr->findings, sizeof(copy));
	for (l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		unsigned blk, a, b;

		if (l[0] == 'D')
			return false;
		if (l[0] != 'P')
			continue;
		if (sscanf(l,
			   "P: Extended attribute block %u has reference count %u, should be %u.",
			   &blk, &a, &b) != 3 ||
		    a <= b)
			return false;
		any = true;
	}
	return any;
}

static int crash_cb(const struct crash_state *cs, void *arg)
{
	struct cwork *w = arg;
	struct e2_opts o = {.readonly = true, .no_flusher = true};
	struct e2t_fsck fr;
	struct bdev *mem;
	struct e2fs *fs;
	char why[256] = "";

	assert_int_equal(e2t_fsck_mem(cs->image, cs->image_len, &fr), 0);
	w->checked++;
	if (fr.verdict == FSCK_CLEAN)
		w->clean++;
	else if (fr.verdict == FSCK_BENIGN)
		w->benign++;
	else if (refcount_high_only(&fr))
		w->shared++;
	else
		w->dangerous++;
	if (fr.verdict == FSCK_DANGEROUS && !w->first[0])
		snprintf(w->first, sizeof(w->first), "round %zu: %s", cs->round, fr.findings);
	e2t_fsck_free(&fr);
	/* every file shows a set it really had */
	assert_int_equal(bdev_mem_create(cs->block_size, 0, cs->image, cs->image_len, &mem), 0);
	if (e2_open_bdev(mem, &o, &fs) == 0) {
		for (unsigned f = 0; f < CF && !why[0]; f++) {
			char s[160];
			bool ok = false;

			if (w->gone[f])
				continue;
			set_string(fs, w->ino[f], s, sizeof(s));
			for (unsigned h = 0; h < w->nhist[f] && !ok; h++)
				ok = strcmp(s, w->hist[f][h]) == 0;
			if (!ok)
				snprintf(why, sizeof(why), "file %u has set '%s'", f, s);
		}
		e2_abandon(fs);
	} else {
		snprintf(why, sizeof(why), "cannot open");
	}
	if (why[0]) {
		w->semantic++;
		if (!w->first[0])
			snprintf(w->first, sizeof(w->first), "round %zu: %s", cs->round, why);
	}
	return 0;
}

static void crash_run(enum consistency cons, unsigned isize, struct cwork *w)
{
	struct e2_opts o = {.consistency = cons, .no_flusher = true, .clock = e2t_fixed_clock};
	struct crash_opts co = {.max_exhaustive = 6, .samples = 12, .seed = 7};
	struct bdev *mem, *rec;
	struct e2fs *fs;
	char extra[16];
	void *img;
	size_t len, n;

	memset(w, 0, sizeof(*w));
	snprintf(extra, sizeof(extra), "-I %u", isize);
	assert_int_equal(e2t_mkfs_mem(1024, 1024, extra, &img, &len), 0);
	assert_int_equal(bdev_mem_create(1024, 0, img, len, &mem), 0);
	free(img);
	assert_int_equal(bdev_recorder_create(mem, &rec), 0);
	assert_int_equal(e2_open_bdev(rec, &o, &fs), 0);
	for (unsigned f = 0; f < CF; f++) {
		struct stat st;
		char nm[8];

		snprintf(nm, sizeof(nm), "f%u", f);
		assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, nm, S_IFREG | 0644, 0, 0, 0, &st),
				 0);
		w->ino[f] = (uint32_t)st.st_ino;
		assert_int_equal(e2_forget(fs, w->ino[f], 1), 0);
	}
	/* files 4 and 5 start with a shared block */
	cset(w, fs, 4, "user.big", "0123456789abcdefghijklmnopqrstuvwxyz0123456789");
	cset(w, fs, 5, "user.big", "0123456789abcdefghijklmnopqrstuvwxyz0123456789");
	assert_int_equal(e2_sync(fs), 0);
	assert_int_equal(bdev_recorder_reset(rec), 0);
	for (unsigned f = 0; f < CF; f++)
		if (!w->nhist[f])
			remember(w, fs, f);

	/* the workload: share, unshare, drop to nothing, unlink a sharer */
	{
		static const char big[] = "a value long enough to matter, with some words in it";

		for (unsigned f = 0; f < 4; f++) {
			cset(w, fs, f, "user.big", big);
			cset(w, fs, f, "trusted.t", "xyz");
		}
		cache_flush_round(e2_cache(fs), &n);
		cset(w, fs, 1, "user.more", "1"); /* unshare */
		assert_int_equal(e2_removexattr(fs, NULL, w->ino[2], "user.big"), 0);
		remember(w, fs, 2);
		assert_int_equal(e2_removexattr(fs, NULL, w->ino[2], "trusted.t"), 0);
		remember(w, fs, 2);
		cset(w, fs, 4, "user.big", "changed"); /* 5 keeps the old block alone */
		assert_int_equal(e2_unlink(fs, NULL, E2_ROOT_INO, "f5"), 0);
		w->gone[5] = true;
		cset(w, fs, 3, "user.big", "changed"); /* joins 4's new block */
		assert_int_equal(e2_removexattr(fs, NULL, w->ino[0], "trusted.t"), 0);
		remember(w, fs, 0);
		for (int i = 0; i < 1000; i++) {
			assert_int_equal(cache_flush_round(e2_cache(fs), &n), 0);
			if (!n)
				break;
		}
		assert_int_equal(e2_sync(fs), 0);
	}
	assert_int_equal(crash_enumerate(rec, &co, crash_cb, w, NULL), 0);
	e2_abandon(fs);
	print_message("# crash %s, %u-byte inodes: %zu states: %zu clean, %zu benign, %zu "
		      "stopping e2fsck -p on a shared block's count, %zu "
		      "dangerous, %zu with a set never had%s%s\n",
		      cons == CONSISTENCY_NONE ? "none" : "softupdates", isize, w->checked,
		      w->clean, w->benign, w->shared, w->dangerous, w->semantic,
		      w->first[0] ? "; first: " : "", w->first);
}

/* The class of a transcript in which e2fsck -fn finds only this, and
 * e2fsck -fy repairs it. */
static enum fsck_class judge_alone(const char *finding)
{
	struct fsck_verdict v;
	enum fsck_class c;
	char *t;

	assert_true(asprintf(&t,
			     "--- e2fsck -fn: exit 4\n%s\n--- e2fsck -fy: exit 1\n"
			     "--- e2fsck -fn after -fy: exit 0\n",
			     finding) > 0);
	assert_int_equal(fsck_judge(t, strlen(t), &v, NULL, 0), 0);
	c = v.class;
	fsck_verdict_free(&v);
	free(t);
	return c;
}

/* A count too high is what a crash between an unsharing inode's pointer
 * change and the lowered count leaves: benign.  Too low is not. */
static void test_refcount_classified(void **state)
{
	(void)state;
	assert_int_equal(
	    judge_alone("Extended attribute block 38 has reference count 2, should be 1.  Fix? no"),
	    FSCK_BENIGN);
	assert_int_equal(
	    judge_alone("Extended attribute block 38 has reference count 1, should be 2.  Fix? no"),
	    FSCK_DANGEROUS);
}

static void test_crash_softupdates(void **state)
{
	struct cwork *w = malloc(sizeof(*w));

	(void)state;
	assert_non_null(w);
	crash_run(CONSISTENCY_SOFTUPDATES, 128, w);
	assert_true(w->checked > 10);
	assert_int_equal(w->dangerous, 0);
	assert_int_equal(w->semantic, 0);
	crash_run(CONSISTENCY_SOFTUPDATES, 256, w);
	assert_true(w->checked > 10);
	assert_int_equal(w->dangerous, 0);
	assert_int_equal(w->semantic, 0);
	free(w);
}

static void test_crash_none_is_caught(void **state)
{
	struct cwork *w = malloc(sizeof(*w));

	(void)state;
	assert_non_null(w);
	crash_run(CONSISTENCY_NONE, 128, w);
	assert_true(w->dangerous > 0);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_errors, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_acl_mode, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_kill_priv, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_model_small_inodes, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_model_large_inodes, e2t_remove_scratch),
	    cmocka_unit_test(test_refcount_classified),
	    cmocka_unit_test(test_crash_softupdates),
	    cmocka_unit_test(test_crash_none_is_caught),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
