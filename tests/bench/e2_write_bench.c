/* e2_write_bench: what a growing file costs on disk, through lib/ext2/e2.h
 * directly (no FUSE): block writes, write rounds (each ends with a barrier)
 * and time, for
 *   - big:    one file written in 128 KiB writes, one sync at the end;
 *   - append: one file grown by 4 KiB writes with a sync every 16 writes
 *             (a log), the case where each write changes the same
 *             indirect block;
 *   - seqN:   files of MIB/8, MIB/4 and MIB/2 MiB grown by 4 KiB writes,
 *             one sync at the end (dd bs=4k): the time per MiB must not
 *             grow with the file.
 *
 *   e2_write_bench IMAGE [MIB]
 *
 * IMAGE must be a fresh ext2 image with room for 2 * MIB (default 64) MiB,
 * for example "mke2fs -q -t ext2 -F -b 4096 IMAGE 256M".
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
#include "engine/cache.h"
#include "ext2/e2.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Write total bytes to a new file `name` in chunk-byte writes, syncing
 * every sync_every writes (0: only at the end); print the cost. */
static int run(struct e2fs *fs, const char *name, size_t total, size_t chunk, int sync_every)
{
	static uint8_t buf[128 * 1024];
	struct cache_stats a, b;
	struct stat st;
	double t0, t1;
	int r, k = 0;

	memset(buf, 0x5a, sizeof(buf));
	r = e2_mknod(fs, NULL, E2_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st);
	if (r) {
		fprintf(stderr, "e2_write_bench: create %s: %s\n", name, strerror(-r));
		return 1;
	}
	if ((r = e2_sync(fs))) {
		fprintf(stderr, "e2_write_bench: sync: %s\n", strerror(-r));
		return 1;
	}
	cache_get_stats(e2_cache(fs), &a);
	t0 = now_s();
	for (size_t off = 0; off < total; off += chunk) {
		ssize_t n = e2_write(fs, NULL, (uint32_t)st.st_ino, buf, chunk, (off_t)off);

		if (n != (ssize_t)chunk) {
			fprintf(stderr, "e2_write_bench: write %s at %zu: %s\n", name, off,
				n < 0 ? strerror((int)-n) : "short write");
			return 1;
		}
		if (sync_every && ++k % sync_every == 0 && (r = e2_sync(fs)))
			break;
	}
	if (!r)
		r = e2_sync(fs);
	if (r) {
		fprintf(stderr, "e2_write_bench: sync: %s\n", strerror(-r));
		return 1;
	}
	t1 = now_s();
	cache_get_stats(e2_cache(fs), &b);
	printf("%-7s %6zu MiB in %6zu-byte writes, sync every %2d: %8.3f s, %9llu block writes, "
	       "%7llu rounds\n",
	       name, total >> 20, chunk, sync_every, t1 - t0,
	       (unsigned long long)(b.block_writes - a.block_writes),
	       (unsigned long long)(b.rounds - a.rounds));
	return 0;
}

int main(int argc, char **argv)
{
	struct e2_opts o = {.no_flusher = true};
	struct e2fs *fs;
	size_t mib = 64;
	int r, ret;

	if (argc < 2 || argc > 3 || (argc == 3 && (mib = strtoul(argv[2], NULL, 10)) == 0)) {
		fprintf(stderr, "usage: e2_write_bench IMAGE [MIB]\n");
		return 64;
	}
	r = e2_open(argv[1], &o, &fs);
	if (r) {
		fprintf(stderr, "e2_write_bench: %s: %s\n", argv[1], e2_open_error());
		return 1;
	}
	ret = run(fs, "big", mib << 20, 128 * 1024, 0);
	if (!ret)
		ret = run(fs, "append", (mib << 20) / 8, 4096, 16);
	for (unsigned k = 3; k >= 1 && !ret; k--) {
		char nm[16];

		snprintf(nm, sizeof(nm), "seq%u", 4 - k);
		ret = run(fs, nm, (mib << 20) >> k, 4096, 0);
	}
	r = e2_close(fs);
	if (r && !ret) {
		fprintf(stderr, "e2_write_bench: close: %s\n", strerror(-r));
		ret = 1;
	}
	return ret;
}
