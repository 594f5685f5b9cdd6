/* crashimage LOG            print the number of crash states of a recorder
 *                           log saved by fstitch-mount (FSTITCH_RECORD=LOG)
 * crashimage LOG K OUT      write the disk image of crash state K (0-based,
 *                           in crash_enumerate's order) to the file OUT
 *
 * Lets a test run e2fsck on the disk as it would be after a power failure
 * at any point of a real daemon run.  Random subsets are seeded, so a log
 * always gives the same states.
 * Exit status: 0, 1 failure (or K out of range), 64 usage. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bdev/bdev.h"
#include "crash/crashsim.h"
#include "bdev/reclog.h"

struct pick {
	size_t want, index;
	const char *out;
	int err;
};

static int count_cb(const struct crash_state *cs, void *arg)
{
	return 0;
}

static int pick_cb(const struct crash_state *cs, void *arg)
{
	struct pick *p = arg;
	const char *d = cs->image;
	size_t left = cs->image_len;
	int fd;

	if (p->index++ != p->want)
		return 0;
	fd = open(p->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		p->err = -errno;
		return 1;
	}
	while (left) {
		ssize_t n = write(fd, d, left);

		if (n < 0) {
			p->err = -errno;
			break;
		}
		d += n;
		left -= (size_t)n;
	}
	if (close(fd) < 0 && !p->err)
		p->err = -errno;
	return 1; /* found: stop */
}

int main(int argc, char **argv)
{
	struct crash_opts co = { .max_exhaustive = 6, .samples = 16, .seed = 1 };
	struct pick p = { 0 };
	struct bdev *rec;
	size_t n = 0;
	char *end;
	int r;

	if (argc != 2 && argc != 4) {
		fprintf(stderr, "usage: crashimage LOG [K OUT]\n");
		return 64;
	}
	r = reclog_load(argv[1], &rec);
	if (r < 0) {
		fprintf(stderr, "crashimage: cannot load '%s': %s\n", argv[1], strerror(-r));
		return 1;
	}
	if (argc == 2) {
		r = crash_enumerate(rec, &co, count_cb, NULL, &n);
		bdev_destroy(rec);
		if (r) {
			fprintf(stderr, "crashimage: %s\n", strerror(r < 0 ? -r : r));
			return 1;
		}
		printf("%zu\n", n);
		return 0;
	}
	p.want = strtoul(argv[2], &end, 10);
	if (*end || end == argv[2]) {
		bdev_destroy(rec);
		fprintf(stderr, "crashimage: bad state number '%s'\n", argv[2]);
		return 64;
	}
	p.out = argv[3];
	r = crash_enumerate(rec, &co, pick_cb, &p, NULL);
	bdev_destroy(rec);
	if (r < 0 || p.err) {
		fprintf(stderr, "crashimage: %s\n", strerror(p.err ? -p.err : -r));
		return 1;
	}
	if (p.index <= p.want) {
		fprintf(stderr, "crashimage: no state %zu (there are %zu)\n", p.want, p.index);
		return 1;
	}
	return 0;
}
