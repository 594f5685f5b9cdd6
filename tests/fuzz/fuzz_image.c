/* Fuzz target "image": the fuzzer's bytes are an ext2 image.  Open it on a
 * memory device and use it as a mount would: read every directory, stat
 * and read every file, follow symlinks, then write, create, rename,
 * unlink, truncate and flush.  Every call must end in success or a clean
 * -errno (design.md §6): a crash, a sanitizer report, a leak or a hang is
 * a bug.
 *
 * The device is at least as large as the superblock says (capped), so a
 * seed may leave out the image's trailing zero blocks.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bdev/bdev.h"
#include "ext2/e2.h"
#include "fuzz.h"

#define BS0	  1024
#define DEV_MAX	  (4u << 20) /* bytes */
#define MAX_DEPTH 6
#define MAX_NAMES 64	     /* entries looked at per directory */
#define MAX_VISIT 256	     /* inodes looked at per image */
#define READ_CAP  (256u << 10)
#define LINK_HOPS 8

struct walk {
	struct e2fs *fs;
	unsigned visited;
	uint32_t file, file2, dir; /* candidates for the changes */
	char file_name[256], file2_name[256];
	uint32_t file_parent, file2_parent;
	uint8_t *buf;
};

struct names {
	char *v[MAX_NAMES];
	size_t n;
	unsigned seen;
};

static int collect(const struct e2_dirent *d, void *arg)
{
	struct names *nm = arg;
	char *s;

	/* A loop in a corrupt directory must still end: readdir stops at
	 * its own limits, this only bounds the test's work. */
	if (++nm->seen > 4 * MAX_NAMES)
		return 1;
	if ((d->name_len == 1 && d->name[0] == '.') ||
	    (d->name_len == 2 && d->name[0] == '.' && d->name[1] == '.'))
		return 0;
	if (nm->n == MAX_NAMES)
		return 1;
	s = malloc(d->name_len + 1);
	if (!s)
		return 1;
	memcpy(s, d->name, d->name_len);
	s[d->name_len] = 0;
	nm->v[nm->n++] = s;
	return 0;
}

static void read_file(struct walk *w, uint32_t ino, uint64_t size)
{
	uint64_t off = 0;
	ssize_t n;

	if (e2_open_inode(w->fs, ino) < 0)
		return;
	while (off < size && off < READ_CAP) {
		n = e2_read(w->fs, ino, w->buf, 16384, (off_t)off);
		if (n <= 0)
			break;
		off += (uint64_t)n;
	}
	/* A read far past the end and one in a likely hole. */
	e2_read(w->fs, ino, w->buf, 4096, (off_t)(size + 4096));
	if (size > 1u << 20)
		e2_read(w->fs, ino, w->buf, 4096, (off_t)(size / 2));
	e2_release_inode(w->fs, ino);
}

/* Resolve a symlink target from dir, as the kernel would through
 * lookups, to at most LINK_HOPS links. */
static void follow(struct walk *w, uint32_t dir, uint32_t link, unsigned hops)
{
	char target[4097], *p, *slash;
	uint32_t cur;
	struct stat st;
	int n;

	n = e2_readlink(w->fs, link, target, sizeof(target) - 1);
	if (n < 0)
		return;
	target[n] = 0;
	cur = target[0] == '/' ? E2_ROOT_INO : dir;
	for (p = target; *p; p = slash) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		slash = strchr(p, '/');
		if (slash)
			*slash++ = 0;
		else
			slash = p + strlen(p);
		if (e2_lookup(w->fs, cur, p, &st) < 0)
			return;
		e2_forget(w->fs, (uint32_t)st.st_ino, 1);
		if (S_ISLNK(st.st_mode)) {
			if (hops < LINK_HOPS)
				follow(w, cur, (uint32_t)st.st_ino, hops + 1);
			return;
		}
		if (!S_ISDIR(st.st_mode))
			return;
		cur = (uint32_t)st.st_ino;
	}
}

static void walk_dir(struct walk *w, uint32_t dir, unsigned depth)
{
	struct names nm = {0};
	struct stat st;
	size_t i;

	if (e2_readdir(w->fs, dir, 0, collect, &nm) < 0 && nm.n == 0)
		return;
	/* Resuming part way must give the same kind of answer. */
	nm.seen = 0;
	{
		struct names again = {0};

		e2_readdir(w->fs, dir, 3, collect, &again);
		for (i = 0; i < again.n; i++)
			free(again.v[i]);
	}
	for (i = 0; i < nm.n && w->visited < MAX_VISIT; i++) {
		w->visited++;
		if (e2_lookup(w->fs, dir, nm.v[i], &st) < 0)
			continue;
		e2_getattr(w->fs, (uint32_t)st.st_ino, &st);
		if (S_ISDIR(st.st_mode)) {
			if (!w->dir || depth > 0)
				w->dir = (uint32_t)st.st_ino;
			if (depth < MAX_DEPTH)
				walk_dir(w, (uint32_t)st.st_ino, depth + 1);
		} else if (S_ISREG(st.st_mode)) {
			read_file(w, (uint32_t)st.st_ino, (uint64_t)st.st_size);
			if (!w->file) {
				w->file = (uint32_t)st.st_ino;
				w->file_parent = dir;
				strcpy(w->file_name, nm.v[i]);
			} else if (!w->file2) {
				w->file2 = (uint32_t)st.st_ino;
				w->file2_parent = dir;
				strcpy(w->file2_name, nm.v[i]);
			}
		} else if (S_ISLNK(st.st_mode)) {
			follow(w, dir, (uint32_t)st.st_ino, 0);
		}
		e2_forget(w->fs, (uint32_t)st.st_ino, 1);
	}
	for (i = 0; i < nm.n; i++)
		free(nm.v[i]);
}

/* The changes a user would make next.  Each may fail cleanly. */
static void change(struct walk *w)
{
	struct e2fs *fs = w->fs;
	struct stat st, attr;
	uint32_t d = w->dir ? w->dir : E2_ROOT_INO;

	memset(w->buf, 0x5a, 16384);
	if (w->file) {
		e2_open_inode(fs, w->file);
		e2_write(fs, NULL, w->file, w->buf, 3000, 0);
		e2_write(fs, NULL, w->file, w->buf, 5000, 70000); /* indirect */
		e2_release_inode(fs, w->file);
	}
	if (e2_mknod(fs, NULL, E2_ROOT_INO, "fz", S_IFREG | 0644, 0, 0, 0, &st) == 0) {
		e2_write(fs, NULL, (uint32_t)st.st_ino, w->buf, 16384, 0);
		memset(&attr, 0, sizeof(attr));
		attr.st_size = 100;
		e2_setattr(fs, NULL, (uint32_t)st.st_ino, &attr, E2_SET_SIZE, &st);
		e2_forget(fs, (uint32_t)st.st_ino, 1);
	}
	if (e2_mkdir(fs, NULL, d, "fzd", 0755, 0, 0, &st) == 0) {
		if (w->file)
			e2_rename(fs, NULL, w->file_parent, w->file_name, (uint32_t)st.st_ino,
				  "moved", 0);
		e2_forget(fs, (uint32_t)st.st_ino, 1);
	}
	if (e2_symlink(fs, NULL, E2_ROOT_INO, "fzl", "fzd/moved", 0, 0, &st) == 0)
		e2_forget(fs, (uint32_t)st.st_ino, 1);
	if (w->file2) {
		e2_rename(fs, NULL, E2_ROOT_INO, "fz", w->file2_parent, w->file2_name, 0);
		e2_unlink(fs, NULL, w->file2_parent, w->file2_name);
	}
	e2_unlink(fs, NULL, E2_ROOT_INO, "fz");
	e2_rmdir(fs, NULL, d, "fzd");
	e2_sync(fs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct e2_opts o = {
		.consistency = CONSISTENCY_SOFTUPDATES,
		.cache_blocks = 256,
		.no_flusher = true,
	};
	struct walk w = {0};
	struct bdev *dev;
	struct statvfs sv;
	size_t len = size, want;

	if (size < 2 * BS0 || size > DEV_MAX)
		return 0;
	/* s_blocks_count and s_log_block_size from the superblock at 1024. */
	{
		const uint8_t *sb = data + 1024;
		uint64_t nb = sb[4] | sb[5] << 8 | sb[6] << 16 | (uint64_t)sb[7] << 24;
		uint32_t lg = sb[24] | sb[25] << 8 | sb[26] << 16 | (uint32_t)sb[27] << 24;

		want = lg <= 6 && nb <= DEV_MAX ? (size_t)(nb << (10 + lg)) : 0;
		if (want > DEV_MAX)
			want = DEV_MAX;
		if (want > len)
			len = want;
	}
	len = (len + 4095) & ~(size_t)4095;
	if (bdev_mem_create(BS0, len / BS0, NULL, 0, &dev) < 0)
		return 0;
	memcpy(bdev_mem_data(dev), data, size);
	if (e2_open_bdev(dev, &o, &w.fs) < 0)
		return 0;
	w.buf = malloc(16384);
	if (w.buf) {
		e2_statfs(w.fs, &sv);
		walk_dir(&w, E2_ROOT_INO, 0);
		change(&w);
		/* The changed tree must still be walkable. */
		w.visited = 0;
		walk_dir(&w, E2_ROOT_INO, 0);
	}
	free(w.buf);
	e2_close(w.fs);
	return 0;
}
