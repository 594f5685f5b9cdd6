/* Unit tests of the block devices (file, memory, recorder) and of crash
 * state enumeration. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>
#include "bdev/bdev.h"
#include "bdev/claim.h"
#include "crash/crashsim.h"

static char *tmp_image(size_t size)
{
	char *path = strdup("/tmp/fstitch-test-bdev-XXXXXX");
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
	return path;
}

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 31 + i * 7);
}

static void test_file_read_write(void **state)
{
	char *path = tmp_image(64 * 1024);
	struct bdev *d;
	static uint8_t blk[8][1024], got[8 * 1024];
	struct bdev_write w[6];
	uint64_t nums[6] = {9, 3, 4, 5, 60, 10}; /* runs 3-5 and 9-10 */
	FILE *f;

	assert_int_equal(bdev_file_open(path, 1024, 0, &d), 0);
	assert_int_equal(d->nblocks, 64);
	assert_int_equal(d->block_size, 1024);
	for (int i = 0; i < 6; i++) {
		fill(blk[i], 1024, (unsigned)i + 1);
		w[i].blkno = nums[i];
		w[i].data = blk[i];
	}
	assert_int_equal(bdev_write(d, w, 6), 0);
	assert_int_equal(bdev_barrier(d), 0);
	assert_int_equal(bdev_read(d, 3, 3, got), 0);
	assert_memory_equal(got, blk[1], 1024);
	assert_memory_equal(got + 1024, blk[2], 1024);
	assert_memory_equal(got + 2048, blk[3], 1024);
	/* the file itself holds the bytes */
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 60 * 1024, SEEK_SET), 0);
	assert_int_equal(fread(got, 1, 1024, f), 1024);
	fclose(f);
	assert_memory_equal(got, blk[4], 1024);
	/* out of range */
	w[0].blkno = 64;
	assert_int_equal(bdev_write(d, w, 1), -EINVAL);
	assert_int_equal(bdev_read(d, 63, 2, got), -EINVAL);
	/* block size changes keep the same bytes */
	assert_int_equal(bdev_set_block_size(d, 4096), 0);
	assert_int_equal(d->nblocks, 16);
	assert_int_equal(bdev_read(d, 15, 1, got), 0);
	assert_memory_equal(got, blk[4], 1024);
	assert_int_equal(bdev_set_block_size(d, 1000), -EINVAL);
	assert_int_equal(d->block_size, 4096);
	bdev_destroy(d);
	unlink(path);
	free(path);
}

static void test_file_flags(void **state)
{
	char *path = tmp_image(16 * 4096);
	struct bdev *a, *b, *r;
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	uint8_t *unaligned = malloc(4096 + 1);
	struct bdev_write w = {2, NULL};

	assert_non_null(unaligned);
	assert_int_equal(bdev_file_open(path, 4096, BDEV_EXCL, &a), 0);
	assert_int_equal(bdev_file_open(path, 4096, BDEV_EXCL, &b), -EBUSY);
	bdev_destroy(a);
	assert_int_equal(bdev_file_open(path, 4096, BDEV_EXCL, &b), 0);
	bdev_destroy(b);

	/* O_DIRECT takes unaligned buffers too (bounced); tmpfs may refuse
	 * O_DIRECT altogether, which is then the open's error */
	int err = bdev_file_open(path, 4096, BDEV_DIRECT, &a);

	if (err == 0) {
		fill(unaligned + 1, 4096, 5);
		w.data = unaligned + 1;
		assert_int_equal(bdev_write(a, &w, 1), 0);
		assert_int_equal(bdev_barrier(a), 0);
		assert_int_equal(bdev_read(a, 2, 1, unaligned), 0);
		fill(buf, 4096, 5);
		assert_memory_equal(unaligned, buf, 4096);
		bdev_destroy(a);
	} else {
		assert_int_equal(err, -EINVAL);
	}

	assert_int_equal(bdev_file_open(path, 4096, BDEV_RDONLY, &r), 0);
	w.data = buf;
	assert_int_equal(bdev_write(r, &w, 1), -EROFS);
	assert_int_equal(bdev_read(r, 0, 1, buf), 0);
	bdev_destroy(r);

	assert_int_equal(bdev_file_open("/nonexistent/x", 4096, 0, &r), -ENOENT);
	assert_int_equal(bdev_file_open("/tmp", 4096, 0, &r), -EISDIR);
	assert_int_equal(bdev_file_open(path, 3000, 0, &r), -EINVAL);
	free(unaligned);
	unlink(path);
	free(path);
}

static void test_mem_faults(void **state)
{
	struct bdev *m;
	uint8_t blk[512], got[512];
	struct bdev_write w = {1, blk};

	assert_int_equal(bdev_mem_create(512, 4, NULL, 0, &m), 0);
	fill(blk, 512, 1);
	bdev_mem_inject(m, BDEV_FAULT_WRITE, 1, 2, EIO);
	assert_int_equal(bdev_write(m, &w, 1), 0); /* skipped */
	fill(blk, 512, 2);
	assert_int_equal(bdev_write(m, &w, 1), -EIO);
	assert_int_equal(bdev_write(m, &w, 1), -EIO);
	assert_int_equal(bdev_read(m, 1, 1, got), 0);
	fill(blk, 512, 1);
	assert_memory_equal(got, blk, 512); /* failed writes wrote nothing */
	fill(blk, 512, 2);
	assert_int_equal(bdev_write(m, &w, 1), 0);
	assert_memory_equal((uint8_t *)bdev_mem_data(m) + 512, blk, 512);
	bdev_mem_inject(m, BDEV_FAULT_BARRIER, 0, 1, ENOSPC);
	assert_int_equal(bdev_barrier(m), -ENOSPC);
	assert_int_equal(bdev_barrier(m), 0);
	bdev_mem_inject(m, BDEV_FAULT_READ, 0, 1, EIO);
	assert_int_equal(bdev_read(m, 0, 1, got), -EIO);
	assert_int_equal(bdev_read(m, 0, 1, got), 0);
	bdev_destroy(m);

	/* from an image: nblocks comes from its length */
	uint8_t img[3 * 512 + 100];

	fill(img, sizeof(img), 3);
	assert_int_equal(bdev_mem_create(512, 99, img, sizeof(img), &m), 0);
	assert_int_equal(m->nblocks, 3);
	assert_memory_equal(bdev_mem_data(m), img, 3 * 512);
	bdev_destroy(m);
	assert_int_equal(bdev_mem_create(500, 4, NULL, 0, &m), -EINVAL);
}

static void test_recorder_log(void **state)
{
	struct bdev *m, *r;
	uint8_t a[512], b[512];
	struct bdev_write w[2] = {{1, a}, {2, b}};
	const struct rec_event *ev;

	assert_int_equal(bdev_mem_create(512, 4, NULL, 0, &m), 0);
	fill(a, 512, 1);
	memcpy((uint8_t *)bdev_mem_data(m) + 3 * 512, a, 512);
	assert_int_equal(bdev_recorder_create(m, &r), 0);
	assert_memory_equal((const uint8_t *)bdev_recorder_initial(r) + 3 * 512, a, 512);
	fill(a, 512, 2);
	fill(b, 512, 3);
	assert_int_equal(bdev_write(r, w, 2), 0);
	fill(a, 512, 4); /* the log keeps its own copy */
	assert_int_equal(bdev_barrier(r), 0);
	bdev_mem_inject(m, BDEV_FAULT_WRITE, 0, 1, EIO);
	assert_int_equal(bdev_write(r, w, 1), -EIO); /* not logged */
	bdev_mem_inject(m, BDEV_FAULT_BARRIER, 0, 1, EIO);
	assert_int_equal(bdev_barrier(r), -EIO); /* not logged */
	assert_int_equal(bdev_recorder_count(r), 3);
	ev = bdev_recorder_event(r, 0);
	assert_int_equal(ev->kind, REC_WRITE);
	assert_int_equal(ev->blkno, 1);
	fill(a, 512, 2);
	assert_memory_equal(ev->data, a, 512);
	assert_int_equal(bdev_recorder_event(r, 1)->blkno, 2);
	assert_int_equal(bdev_recorder_event(r, 2)->kind, REC_BARRIER);
	assert_null(bdev_recorder_event(r, 3));
	/* the block size may change only while the log is empty */
	assert_int_equal(bdev_set_block_size(r, 1024), -EBUSY);
	assert_int_equal(bdev_recorder_reset(r), 0);
	assert_int_equal(bdev_recorder_count(r), 0);
	assert_memory_equal((const uint8_t *)bdev_recorder_initial(r) + 512, a, 512);
	assert_int_equal(bdev_set_block_size(r, 1024), 0);
	assert_int_equal(r->nblocks, 2);
	assert_int_equal(m->block_size, 1024);
	bdev_destroy(r);
}

struct seen {
	size_t n, per_round[8];
	uint8_t last[4];
};

static int count_cb(const struct crash_state *st, void *arg)
{
	struct seen *s = arg;
	const uint8_t *img = st->image;

	s->n++;
	if (st->round < 8)
		s->per_round[st->round]++;
	/* the image is consistent with the mask: block k holds round's
	 * value when applied */
	for (size_t i = 0; i < st->nround; i++)
		if (st->mask[i] && st->round < 2 &&
		    img[(i + 1) * 512] != (uint8_t)(st->round * 16 + i + 1))
			return -EFAULT;
	memcpy(s->last, (const uint8_t[]){img[0], img[512], img[1024], img[1536]}, 4);
	return 0;
}

static void test_crashsim(void **state)
{
	struct bdev *m, *r;
	uint8_t blk[512];
	struct bdev_write w;
	struct seen s = {0};
	size_t n;

	assert_int_equal(bdev_mem_create(512, 16, NULL, 0, &m), 0);
	assert_int_equal(bdev_recorder_create(m, &r), 0);
	/* round 0: 2 writes, round 1: 3 writes, round 2: 12 writes, no
	 * closing barrier */
	for (int round = 0; round < 3; round++) {
		int nw = round == 0 ? 2 : round == 1 ? 3 : 12;

		for (int i = 0; i < nw; i++) {
			memset(blk, round * 16 + i + 1, sizeof(blk));
			w.blkno = (uint64_t)i + 1;
			w.data = blk;
			assert_int_equal(bdev_write(r, &w, 1), 0);
		}
		if (round < 2)
			assert_int_equal(bdev_barrier(r), 0);
	}
	struct crash_opts o = {.max_exhaustive = 10, .samples = 5, .seed = 42};

	assert_int_equal(crash_enumerate(r, &o, count_cb, &s, &n), 0);
	/* 4 + 8 + (5 samples + empty + full) + the final image */
	assert_int_equal(n, 4 + 8 + 7 + 1);
	assert_int_equal(s.n, n);
	assert_int_equal(s.per_round[0], 4);
	assert_int_equal(s.per_round[1], 8);
	assert_int_equal(s.per_round[2], 7);
	assert_int_equal(s.per_round[3], 1);
	/* the last state is the complete image */
	assert_int_equal(s.last[1], 2 * 16 + 1);
	assert_int_equal(s.last[3], 2 * 16 + 3);
	bdev_destroy(r);
}

static int stop_cb(const struct crash_state *st, void *arg)
{
	return ++*(int *)arg == 3 ? 7 : 0;
}

static void test_crashsim_stop_and_empty(void **state)
{
	struct bdev *m, *r;
	uint8_t blk[512] = {1};
	struct bdev_write w = {0, blk};
	int calls = 0;
	size_t n = 99;

	assert_int_equal(bdev_mem_create(512, 4, NULL, 0, &m), 0);
	assert_int_equal(bdev_recorder_create(m, &r), 0);
	/* an empty log: just the final image */
	assert_int_equal(crash_enumerate(r, NULL, stop_cb, &calls, &n), 0);
	assert_int_equal(n, 1);
	calls = 0;
	for (int i = 0; i < 3; i++) {
		w.blkno = (uint64_t)i;
		assert_int_equal(bdev_write(r, &w, 1), 0);
	}
	assert_int_equal(bdev_barrier(r), 0);
	assert_int_equal(crash_enumerate(r, NULL, stop_cb, &calls, NULL), 7);
	assert_int_equal(calls, 3);
	bdev_destroy(r);
}

/* A claim on an image nothing else uses succeeds and takes nothing a
 * daemon needs (the image lock stays free for e2_open); a path that is not
 * there is an error, not a conflict; a device that is no loop device has
 * no backing file. */
static void test_claim_free_image(void **state)
{
	char path[] = "/tmp/fstitch-claim-XXXXXX", back[64];
	struct claim_conflict why;
	struct bdev_claim *c = NULL;
	struct stat st;
	int fd = mkstemp(path), lk;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	assert_int_equal(bdev_claim(path, CLAIM_KEEP_EXCL, &c, &why), 0);
	assert_non_null(c);
	assert_int_equal(why.who, CLAIM_NONE);
	lk = open(path, O_RDONLY);
	assert_int_equal(flock(lk, LOCK_EX | LOCK_NB), 0);
	close(lk);
	bdev_claim_release(c);
	assert_int_equal(bdev_claim("/nonexistent/img", 0, &c, &why), -ENOENT);
	assert_int_equal(stat("/dev/null", &st), 0);
	assert_int_equal(bdev_loop_backing(st.st_rdev, back, sizeof(back)), -ENXIO);
	bdev_claim_drop_excl(NULL);
	bdev_claim_release(NULL);
	close(fd);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_file_read_write),  cmocka_unit_test(test_file_flags),
	    cmocka_unit_test(test_mem_faults),	     cmocka_unit_test(test_recorder_log),
	    cmocka_unit_test(test_crashsim),	     cmocka_unit_test(test_crashsim_stop_and_empty),
	    cmocka_unit_test(test_claim_free_image),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
