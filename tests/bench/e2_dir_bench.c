/* e2_dir_bench: cost of creates and lookups in one large directory, through
 * lib/ext2/e2.h directly (no FUSE), so that what is timed is the ext2 module.
 *
 *   e2_dir_bench IMAGE [N]
 *
 * IMAGE must be a fresh ext2 image with at least N + 16 free inodes (for
 * example "mke2fs -q -t ext2 -F -b 1024 -N 120000 IMAGE 256M").  Creates N
 * files (default 100000) in the root directory, printing the mean cost of
 * the last 1000 creates before 10k, 50k and N entries, then the mean cost of
 * a lookup of every name, then of refilling 1000 holes spread over the
 * directory (the case where the last-used block is full), then of churn:
 * 10000 times, unlink a file at a scattered position and create a new one
 * (a mail spool or cache directory).
 *
 * Exit status: 0 done, 1 a file-system call failed, 64 usage.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "ext2/e2.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int create(struct e2fs *fs, const char *name)
{
	struct stat st;

	return e2_mknod(fs, NULL, E2_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st);
}

int main(int argc, char **argv)
{
	struct e2_opts o = {.no_flusher = true, .cache_blocks = 65536};
	struct e2fs *fs = NULL;
	unsigned long n = 100000, marks[3] = {10000, 50000, 0};
	double t0 = 0, t;
	char name[32];
	struct stat st;
	int r, m = 0;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: e2_dir_bench IMAGE [N]\n");
		return 64;
	}
	if (argc == 3)
		n = strtoul(argv[2], NULL, 10);
	if (n < 2000) {
		fprintf(stderr, "e2_dir_bench: N must be at least 2000\n");
		return 64;
	}
	marks[2] = n;
	r = e2_open(argv[1], &o, &fs);
	if (r) {
		fprintf(stderr, "e2_dir_bench: open %s: %s\n", argv[1], e2_open_error());
		return 1;
	}
	for (unsigned long i = 0; i < n; i++) {
		while (m < 3 && marks[m] <= i)
			m++;
		if (m < 3 && i == marks[m] - 1000)
			t0 = now_us();
		snprintf(name, sizeof(name), "file%07lu", i);
		r = create(fs, name);
		if (r)
			goto fail;
		if (m < 3 && i == marks[m] - 1) {
			t = now_us();
			printf("create at %lu entries: %.2f us/op\n", marks[m], (t - t0) / 1000);
		}
	}
	t0 = now_us();
	for (unsigned long i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "file%07lu", i);
		r = e2_lookup(fs, E2_ROOT_INO, name, &st);
		if (r)
			goto fail;
		e2_forget(fs, (uint32_t)st.st_ino, 1);
	}
	printf("lookup at %lu entries: %.2f us/op\n", n, (now_us() - t0) / n);
	for (unsigned long i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "file%07lu", i * (n / 1000));
		r = e2_unlink(fs, NULL, E2_ROOT_INO, name);
		if (r)
			goto fail;
	}
	t0 = now_us();
	for (unsigned long i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "hole%07lu", i);
		r = create(fs, name);
		if (r)
			goto fail;
	}
	printf("create into holes at %lu entries: %.2f us/op\n", n, (now_us() - t0) / 1000);
	t0 = now_us();
	for (unsigned long k = 1; k <= 10000; k++) {
		/* 7919 is prime and does not divide n's factors 2 and 5 in the
		 * usual sizes, so victims are distinct; multiples of n / 1000
		 * went in the hole phase */
		unsigned long v = k * 7919 % n;

		if (v % (n / 1000) == 0)
			continue;
		snprintf(name, sizeof(name), "file%07lu", v);
		r = e2_unlink(fs, NULL, E2_ROOT_INO, name);
		if (r)
			goto fail;
		snprintf(name, sizeof(name), "churn%07lu", k);
		r = create(fs, name);
		if (r)
			goto fail;
	}
	printf("churn (unlink + create) at %lu entries: %.2f us/op\n", n,
	       (now_us() - t0) / 10000);
	r = e2_close(fs);
	if (r) {
		fprintf(stderr, "e2_dir_bench: close: %s\n", strerror(-r));
		return 1;
	}
	return 0;
fail:
	fprintf(stderr, "e2_dir_bench: %s: %s\n", name, strerror(-r));
	e2_abandon(fs);
	return 1;
}
