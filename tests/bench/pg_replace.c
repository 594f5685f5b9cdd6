/* Atomic replace of a small file, N times, three ways (design.md §7):
 *   fsync   write f.tmp, fsync it, rename over f (what careful programs do)
 *   pg      write f.tmp in group A, rename in group B after A (no fsync)
 *   order   the fsync version under the fsync=order policy
 *   switch  as pg, in two requests to the daemon per update instead of
 *           nine: pg_switch(previous B, 0) before the write, pg_switch(A, A)
 *           before the rename (pg_create(3))
 * Usage: pg_replace DIR N fsync|pg|order|switch [SIZE]
 * Prints one line: "mode=M n=N seconds=S updates_per_s=R".  Run by hand or
 * from the benchmark scripts; never a timed assertion. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fstitch/patchgroup.h"

static int fail(const char *what)
{
	fprintf(stderr, "pg_replace: %s: %s\n", what, strerror(errno));
	return 1;
}

static int write_tmp(const char *tmp, const char *buf, size_t len, int do_fsync)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return -1;
	if (write(fd, buf, len) != (ssize_t)len || (do_fsync && fsync(fd) < 0)) {
		close(fd);
		return -1;
	}
	return close(fd);
}

int main(int argc, char **argv)
{
	char tmp[4096], dst[4096], *buf;
	struct timespec t0, t1;
	size_t size;
	long n, i;
	double s;
	int pg;
	pg_t prev = 0;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: pg_replace DIR N fsync|pg|order|switch [SIZE]\n");
		return 64;
	}
	n = atol(argv[2]);
	size = argc == 5 ? (size_t)atol(argv[4]) : 4096;
	pg = !strcmp(argv[3], "pg") ? 1 : !strcmp(argv[3], "order") ? 2 :
	     !strcmp(argv[3], "switch") ? 3 : 0;
	snprintf(tmp, sizeof(tmp), "%s/f.tmp", argv[1]);
	snprintf(dst, sizeof(dst), "%s/f", argv[1]);
	buf = malloc(size);
	if (!buf)
		return fail("malloc");
	if (pg)
		pg_set_control(argv[1]);
	if (pg == 2 && pg_fsync_policy(PG_FSYNC_ORDER) < 0)
		return fail("pg_fsync_policy");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++) {
		memset(buf, 'a' + (int)(i % 26), size);
		if (pg == 1) {
			pg_t a = pg_create(), b;

			if (a < 0 || pg_engage(a) < 0)
				return fail("group a");
			if (write_tmp(tmp, buf, size, 0) < 0)
				return fail("write");
			if (pg_disengage(a) < 0)
				return fail("pg_disengage");
			b = pg_create();
			if (b < 0 || pg_depend(a, b) < 0 || pg_engage(b) < 0)
				return fail("group b");
			if (rename(tmp, dst) < 0)
				return fail("rename");
			if (pg_disengage(b) < 0 || pg_close(a) < 0 || pg_close(b) < 0)
				return fail("close");
		} else if (pg == 3) {
			pg_t a = pg_switch(prev, 0, PG_SWITCH_ENGAGE), b;

			if (a < 0)
				return fail("pg_switch a");
			if (write_tmp(tmp, buf, size, 0) < 0)
				return fail("write");
			b = pg_switch(a, a, PG_SWITCH_ENGAGE);
			if (b < 0)
				return fail("pg_switch b");
			if (rename(tmp, dst) < 0)
				return fail("rename");
			prev = b;
		} else {
			if (write_tmp(tmp, buf, size, 1) < 0)
				return fail("write");
			if (rename(tmp, dst) < 0)
				return fail("rename");
		}
	}
	if (prev && pg_leave(prev) < 0)
		return fail("pg_leave");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("mode=%s n=%ld seconds=%.3f updates_per_s=%.1f\n", argv[3], n, s, (double)n / s);
	free(buf);
	return 0;
}
