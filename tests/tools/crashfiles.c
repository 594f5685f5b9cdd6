/* crashfiles LOG PATH OUTDIR [MAX]: for every crash state of a recorder log
 * saved by fstitch-mount (FSTITCH_RECORD=LOG), write the contents of the
 * file PATH (relative to the file system's root) as it would be after that
 * crash to OUTDIR/NNNNN, or create OUTDIR/NNNNN.missing when it does not
 * exist there, or OUTDIR/NNNNN.broken when the image does not open.  At
 * most MAX states (default 400), sampled evenly, the last always included.
 * Prints "states N" (all the log allows), "written M" and "barriers B"
 * (the barriers in the log).
 * Exit status: 0, 1 failure, 64 usage. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bdev/bdev.h"
#include "crash/crashsim.h"
#include "ext2/e2.h"
#include "bdev/reclog.h"

struct ctx {
	const char *path, *out;
	size_t total, stride, index, written;
};

static int count_cb(const struct crash_state *cs, void *arg)
{
	return 0;
}

static uint32_t resolve(struct e2fs *fs, const char *path)
{
	char buf[4096], *save = NULL, *c;
	uint32_t ino = E2_ROOT_INO;
	struct stat st;

	snprintf(buf, sizeof(buf), "%s", path);
	for (c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (e2_lookup(fs, ino, c, &st) != 0)
			return 0;
		e2_forget(fs, (uint32_t)st.st_ino, 1);
		ino = (uint32_t)st.st_ino;
	}
	return ino;
}

static int state_cb(const struct crash_state *cs, void *arg)
{
	struct ctx *x = arg;
	struct e2_opts o = { .readonly = true, .no_flusher = true };
	size_t idx = x->index++;
	char name[4200];
	struct bdev *mem;
	struct e2fs *fs;
	uint32_t ino;
	static char buf[1 << 16];
	ssize_t n;
	off_t off = 0;
	int fd;

	if (idx % x->stride && idx + 1 != x->total)
		return 0;
	if (bdev_mem_create(cs->block_size, 0, cs->image, cs->image_len, &mem) < 0)
		return -ENOMEM;
	if (e2_open_bdev(mem, &o, &fs) != 0) {
		snprintf(name, sizeof(name), "%s/%05zu.broken", x->out, idx);
		close(open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644));
		x->written++;
		return 0;
	}
	ino = resolve(fs, x->path);
	snprintf(name, sizeof(name), "%s/%05zu%s", x->out, idx, ino ? "" : ".missing");
	fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		e2_abandon(fs);
		return -errno;
	}
	while (ino && (n = e2_read(fs, ino, buf, sizeof(buf), off)) > 0) {
		if (write(fd, buf, (size_t)n) != n) {
			close(fd);
			e2_abandon(fs);
			return -EIO;
		}
		off += n;
	}
	close(fd);
	e2_abandon(fs);
	x->written++;
	return 0;
}

int main(int argc, char **argv)
{
	struct crash_opts co = { .max_exhaustive = 8, .samples = 32, .seed = 1 };
	struct ctx x = { 0 };
	struct bdev *rec;
	size_t n = 0, max, i, nbar = 0;
	int r;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: crashfiles LOG PATH OUTDIR [MAX]\n");
		return 64;
	}
	max = argc == 5 ? (size_t)atol(argv[4]) : 400;
	if (!max)
		max = 1;
	r = reclog_load(argv[1], &rec);
	if (r < 0) {
		fprintf(stderr, "crashfiles: cannot load '%s': %s\n", argv[1], strerror(-r));
		return 1;
	}
	for (i = 0; i < bdev_recorder_count(rec); i++)
		nbar += bdev_recorder_event(rec, i)->kind == REC_BARRIER;
	x.path = argv[2];
	x.out = argv[3];
	r = crash_enumerate(rec, &co, count_cb, NULL, &n);
	x.total = n;
	x.stride = n > max ? (n + max - 1) / max : 1;
	if (r == 0)
		r = crash_enumerate(rec, &co, state_cb, &x, NULL);
	bdev_destroy(rec);
	if (r) {
		fprintf(stderr, "crashfiles: %s\n", strerror(r < 0 ? -r : r));
		return 1;
	}
	printf("states %zu\nwritten %zu\nbarriers %zu\n", n, x.written, nbar);
	return 0;
}
