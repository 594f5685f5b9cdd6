/* Preallocation and hole queries (lib/ext2/e2_falloc.c) on real images: the
 * results against what was written, the refusals, and the one path the
 * FUSE tests cannot reach: the disk filling up part way through, after the
 * up-front estimate said there was room.  e2fsck -fn judges every image.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ext2/e2.h"
#include "ext2/e2_falloc.h"
#include "e2test_util.h"

#define BS  1024
#define APB (BS / 4)

static struct e2fs *new_fs(const char *path, unsigned kib)
{
	struct e2_opts o = {.no_flusher = true};
	struct e2fs *fs = NULL;
	int r;

	r = e2t_mkfs(path, kib, BS, "-m 0", NULL);
	if (r)
		fail_msg("mke2fs: %d", r);
	r = e2_open(path, &o, &fs);
	if (r)
		fail_msg("e2_open: %d (%s)", r, e2_open_error());
	return fs;
}

static void close_clean(struct e2fs *fs, const char *path)
{
	struct e2t_fsck f;

	assert_int_equal(e2_close(fs), 0);
	assert_int_equal(e2t_fsck_file(path, &f), 0);
	if (f.verdict != FSCK_CLEAN)
		fail_msg("e2fsck -fn: %s\n%s", fsck_class_name(f.verdict),
			 f.output ? f.output : "");
	e2t_fsck_free(&f);
}

static uint32_t mkfile(struct e2fs *fs, const char *name)
{
	struct stat st;

	assert_int_equal(e2_mknod(fs, NULL, E2_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st), 0);
	e2_forget(fs, (uint32_t)st.st_ino, 1);
	return (uint32_t)st.st_ino;
}

static uint64_t bfree(struct e2fs *fs)
{
	struct statvfs sv;

	assert_int_equal(e2_statfs(fs, &sv), 0);
	return sv.f_bfree;
}

static off_t fsize(struct e2fs *fs, uint32_t ino)
{
	struct stat st;

	assert_int_equal(e2_getattr(fs, ino, &st), 0);
	return st.st_size;
}

static off_t seek(struct e2fs *fs, uint32_t ino, off_t off, bool data)
{
	off_t res = -1;
	int r = e2_seek(fs, ino, off, data, &res);

	return r < 0 ? r : res;
}

static void test_alloc_and_seek(void **state)
{
	char *path = e2t_scratch_file("falloc");
	struct e2fs *fs = new_fs(path, 4096);
	uint32_t f = mkfile(fs, "f"), g = mkfile(fs, "g");
	uint8_t buf[3 * BS];
	uint64_t free0;

	/* data at block 0 and block 40 (past the direct blocks), holes between */
	assert_int_equal(e2_write(fs, NULL, f, "a", 1, 0), 1);
	assert_int_equal(e2_write(fs, NULL, f, "b", 1, 40 * BS + 5), 1);
	assert_int_equal(seek(fs, f, 0, false), BS);
	assert_int_equal(seek(fs, f, 1, true), 1);
	assert_int_equal(seek(fs, f, BS, true), 40 * BS);
	assert_int_equal(seek(fs, f, 40 * BS, false), 40 * BS + 6);
	assert_int_equal(seek(fs, f, 40 * BS + 6, true), -ENXIO);
	/* fill the holes of blocks 2..19 only, keeping the size */
	free0 = bfree(fs);
	assert_int_equal(e2_falloc(fs, NULL, f, true, 2 * BS + 100, 18 * BS - 100), 0);
	assert_int_equal(fsize(fs, f), 40 * BS + 6);
	/* 18 data blocks (the indirect block is there for block 40) */
	assert_int_equal(free0 - bfree(fs), 18);
	assert_int_equal(seek(fs, f, BS, true), 2 * BS);
	assert_int_equal(seek(fs, f, 2 * BS, false), 20 * BS);
	memset(buf, 0x55, sizeof(buf));
	assert_int_equal(e2_read(fs, f, buf, sizeof(buf), 2 * BS), (ssize_t)sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0);
	/* keeping the size past the end is refused, and changes nothing */
	free0 = bfree(fs);
	assert_int_equal(e2_falloc(fs, NULL, f, true, 40 * BS, 2 * BS), -EOPNOTSUPP);
	assert_int_equal(bfree(fs), free0);
	assert_int_equal(fsize(fs, f), 40 * BS + 6);
	/* mode 0 past the end: the size moves, in the last block too */
	assert_int_equal(e2_falloc(fs, NULL, f, false, 40 * BS, 100), 0);
	assert_int_equal(fsize(fs, f), 40 * BS + 100);
	assert_int_equal(bfree(fs), free0);
	assert_int_equal(e2_falloc(fs, NULL, g, false, 0, 5 * BS + 1), 0);
	assert_int_equal(fsize(fs, g), 5 * BS + 1);
	assert_int_equal(seek(fs, g, 0, false), 5 * BS + 1);
	/* bad arguments */
	assert_int_equal(e2_falloc(fs, NULL, g, false, -1, 10), -EINVAL);
	assert_int_equal(e2_falloc(fs, NULL, g, false, 0, 0), -EINVAL);
	assert_int_equal(e2_falloc(fs, NULL, E2_ROOT_INO, false, 0, 10), -EISDIR);
	assert_int_equal(e2_falloc(fs, NULL, g, false, INT64_MAX - 10, 100), -EFBIG);
	/* more than is free: refused before anything changes */
	free0 = bfree(fs);
	assert_int_equal(e2_falloc(fs, NULL, g, false, 0, (off_t)(free0 + 1) * BS), -ENOSPC);
	assert_int_equal(fsize(fs, g), 5 * BS + 1);
	assert_int_equal(bfree(fs), free0);
	close_clean(fs, path);
	free(path);
}

/* The estimate counts the indirect blocks of the holes' extent, with room
 * for two partial ones; a range that crosses from the double into the
 * triple indirect tree needs more (the triple indirect block and its
 * children), so with just enough free blocks for the estimate the disk
 * fills up part way.  The size must be put back and every block freed. */
static void test_enospc_part_way(void **state)
{
	char *path = e2t_scratch_file("falloc-full");
	struct e2fs *fs = new_fs(path, 2048);
	uint32_t filler = mkfile(fs, "filler"), f = mkfile(fs, "f");
	static uint8_t chunk[64 * BS];
	const off_t tind = (off_t)(12 + APB + APB * APB) * BS;
	uint64_t free0;
	off_t size;
	ssize_t n;

	memset(chunk, 0x5a, sizeof(chunk));
	for (size = 0;; size += n) {
		n = e2_write(fs, NULL, filler, chunk, sizeof(chunk), size);
		if (n <= 0)
			break;
	}
	assert_int_equal(bfree(fs), 0);
	/* give back blocks until 5 or 6 are free: the estimate for two holes
	 * past the direct blocks is 5, what the range below needs is 7 */
	while (bfree(fs) < 5) {
		struct stat attr = {.st_size = size - BS}, st;

		size -= BS;
		assert_int_equal(e2_setattr(fs, NULL, filler, &attr, E2_SET_SIZE, &st), 0);
	}
	free0 = bfree(fs);
	assert_in_range(free0, 5, 6);
	assert_int_equal(e2_falloc(fs, NULL, f, false, tind - BS, 2 * BS), -ENOSPC);
	assert_int_equal(fsize(fs, f), 0);
	assert_int_equal(bfree(fs), free0);
	assert_int_equal(seek(fs, f, 0, true), -ENXIO);
	/* the same range fits once there is room */
	{
		struct stat attr = {.st_size = size - 8 * BS}, st;

		assert_int_equal(e2_setattr(fs, NULL, filler, &attr, E2_SET_SIZE, &st), 0);
	}
	assert_int_equal(e2_falloc(fs, NULL, f, false, tind - BS, 2 * BS), 0);
	assert_int_equal(fsize(fs, f), tind + BS);
	assert_int_equal(seek(fs, f, 0, true), tind - BS);
	assert_int_equal(seek(fs, f, tind - BS, false), tind + BS);
	close_clean(fs, path);
	free(path);
}

/* ---- punching holes against a model ------------------------------------ */

#define PMAX (3u << 20) /* file sizes up to 3 MiB: the double indirect tree */
#define PBLK (PMAX / BS)

struct pmodel {
	uint8_t *data;	       /* the file's bytes */
	bool mapped[PBLK + 1]; /* which blocks the file should have */
	uint64_t size;
};

/* The indirect blocks a file with the model's mapped blocks needs: one
 * over the direct range's successor if any of its blocks is mapped, and in
 * the double indirect tree the top block and each child over a mapped
 * block.  (Writes make no others, and punching frees those left empty.) */
static uint64_t model_ind(const struct pmodel *m)
{
	uint64_t n = 0, dbase = 12 + APB;
	bool any = false;

	for (uint64_t b = 12; b < dbase && b <= PBLK; b++)
		if (m->mapped[b]) {
			n++;
			break;
		}
	for (uint64_t c = dbase; c <= PBLK; c += APB) {
		bool child = false;

		for (uint64_t b = c; b < c + APB && b <= PBLK; b++)
			child |= m->mapped[b];
		n += child;
		any |= child;
	}
	return n + any;
}

static uint64_t model_blocks(const struct pmodel *m)
{
	uint64_t n = 0;

	for (uint64_t b = 0; b <= PBLK; b++)
		n += m->mapped[b];
	return n + model_ind(m);
}

static void model_write(struct e2fs *fs, uint32_t f, struct pmodel *m, struct e2t_rng *rng,
			uint64_t off, uint64_t len)
{
	static uint8_t buf[64 * BS];

	assert_true(len <= sizeof(buf));
	for (uint64_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(1 + e2t_rng_below(rng, 255));
	assert_int_equal(e2_write(fs, NULL, f, buf, len, (off_t)off), (ssize_t)len);
	memcpy(m->data + off, buf, len);
	for (uint64_t b = off / BS; b <= (off + len - 1) / BS; b++)
		m->mapped[b] = true;
	if (off + len > m->size)
		m->size = off + len;
}

/* What Linux does to a block-mapped file: bytes of the range zeroed,
 * whole blocks in it unmapped, and the last block too when the range
 * reaches the end of the file. */
static void model_punch(struct pmodel *m, uint64_t off, uint64_t len)
{
	uint64_t end = off + len, first, lim;

	if (off >= m->size)
		return;
	first = (off + BS - 1) / BS;
	if (end >= m->size) {
		end = m->size;
		lim = (m->size + BS - 1) / BS;
	} else {
		lim = end / BS;
	}
	memset(m->data + off, 0, end - off);
	for (uint64_t b = first; b < lim; b++)
		m->mapped[b] = false;
}

/* The file against the model: size, bytes, which blocks are mapped (by
 * SEEK_DATA and SEEK_HOLE), i_blocks, and the free count of the file
 * system: exact after a sync (every block the file lost is free again),
 * never more between syncs (indirect blocks that growing writes replaced
 * by copies are freed in batches). */
static void model_check(struct e2fs *fs, uint32_t f, const struct pmodel *m, uint64_t free_empty,
			unsigned step, uint64_t seed, bool synced)
{
	static uint8_t back[PMAX];
	struct stat st;
	uint64_t want = model_blocks(m), nb = (m->size + BS - 1) / BS;

	assert_int_equal(e2_getattr(fs, f, &st), 0);
	if ((uint64_t)st.st_size != m->size)
		fail_msg("seed %llu step %u: size %lld, model %llu", (unsigned long long)seed, step,
			 (long long)st.st_size, (unsigned long long)m->size);
	assert_int_equal(e2_read(fs, f, back, m->size, 0), (ssize_t)m->size);
	if (memcmp(back, m->data, m->size)) {
		uint64_t k = 0;

		while (back[k] == m->data[k])
			k++;
		fail_msg("seed %llu step %u: byte %llu is 0x%02x, model 0x%02x",
			 (unsigned long long)seed, step, (unsigned long long)k, back[k],
			 m->data[k]);
	}
	for (uint64_t b = 0; b < nb;) {
		off_t d = seek(fs, f, (off_t)(b * BS), true), h;

		if (d == -ENXIO)
			d = (off_t)m->size;
		assert_true(d >= 0);
		for (; b * BS < (uint64_t)d && b < nb; b++)
			if (m->mapped[b] && (uint64_t)d > b * BS + BS - 1)
				fail_msg("seed %llu step %u: block %llu is a hole, model maps it",
					 (unsigned long long)seed, step, (unsigned long long)b);
		if (b >= nb)
			break;
		h = seek(fs, f, (off_t)(b * BS), false);
		assert_true(h > 0);
		for (; b * BS < (uint64_t)h && b < nb; b++)
			if (!m->mapped[b])
				fail_msg(
				    "seed %llu step %u: block %llu is mapped, model has a hole",
				    (unsigned long long)seed, step, (unsigned long long)b);
	}
	if ((uint64_t)st.st_blocks != want * (BS / 512))
		fail_msg("seed %llu step %u: %lld sectors, model %llu (%llu indirect)",
			 (unsigned long long)seed, step, (long long)st.st_blocks,
			 (unsigned long long)want * (BS / 512), (unsigned long long)model_ind(m));
	if (synced ? bfree(fs) != free_empty - want : bfree(fs) > free_empty - want)
		fail_msg("seed %llu step %u: %llu blocks free, model %llu",
			 (unsigned long long)seed, step, (unsigned long long)bfree(fs),
			 (unsigned long long)(free_empty - want));
}

/* Random writes and punches (sizes from a byte to whole indirect trees,
 * aligned and not, reaching the end or not) against the model, checked
 * after every step; then everything punched: no block left, not even an
 * indirect one.  e2fsck -fn finds nothing, after a reopen too. */
static void test_punch_model(void **state)
{
	uint64_t seed = e2t_seed("E2_PUNCH_SEED", 14);
	char *path = e2t_scratch_file("punch");
	struct e2fs *fs = new_fs(path, 8192);
	struct pmodel *m = calloc(1, sizeof(*m));
	uint32_t f = mkfile(fs, "f");
	uint64_t free_empty = bfree(fs);
	struct e2t_rng rng;
	unsigned steps = 400;

	print_message("# punch model: seed %llu (E2_PUNCH_SEED)\n", (unsigned long long)seed);
	assert_non_null(m);
	m->data = calloc(1, PMAX);
	assert_non_null(m->data);
	e2t_rng_seed(&rng, seed);
	for (unsigned step = 0; step < steps; step++) {
		uint64_t k = e2t_rng_below(&rng, 10), off, len;

		if (k < 5 || m->size == 0) {
			/* a write: near a boundary of the trees, or anywhere */
			static const uint64_t at[] = {0,
						      11 * BS,
						      12 * BS,
						      (12 + APB) * BS - 100,
						      (12 + 2 * APB) * BS,
						      (12 + 5 * APB) * BS};

			len = 1 + e2t_rng_below(&rng, 64 * BS);
			off = e2t_rng_below(&rng, 2) ? at[e2t_rng_below(&rng, 6)]
						     : e2t_rng_below(&rng, PMAX - len);
			off += e2t_rng_below(&rng, 2 * BS);
			if (off + len > PMAX)
				off = PMAX - len;
			model_write(fs, f, m, &rng, off, len);
		} else {
			/* a punch: small, a few blocks, or a big part */
			uint64_t scale = k == 5 ? BS : k < 8 ? 40 * BS : PMAX / 2;

			off = e2t_rng_below(&rng, m->size + BS);
			if (e2t_rng_below(&rng, 2))
				off -= off % BS;
			len = 1 + e2t_rng_below(&rng, scale);
			if (e2t_rng_below(&rng, 8) == 0)
				len = UINT32_MAX; /* to the end and far past it */
			assert_int_equal(e2_punch(fs, NULL, f, (off_t)off, (off_t)len), 0);
			model_punch(m, off, len);
		}
		if (step % 25 == 24)
			assert_int_equal(e2_sync(fs), 0);
		model_check(fs, f, m, free_empty, step, seed, step % 25 == 24);
	}
	/* everything goes: data and indirect blocks */
	assert_int_equal(e2_punch(fs, NULL, f, 0, (off_t)m->size), 0);
	model_punch(m, 0, m->size);
	assert_int_equal(e2_sync(fs), 0);
	model_check(fs, f, m, free_empty, steps, seed, true);
	assert_int_equal(bfree(fs), free_empty);
	assert_int_equal(fsize(fs, f), (off_t)m->size);
	close_clean(fs, path);
	free(m->data);
	free(m);
	free(path);
}

/* Edges and refusals: a range inside one block, one that is all hole,
 * one past the end, a directory, bad arguments. */
static void test_punch_edges(void **state)
{
	char *path = e2t_scratch_file("punch-edges");
	struct e2fs *fs = new_fs(path, 4096);
	uint32_t f = mkfile(fs, "f");
	uint8_t buf[4 * BS], back[4 * BS];
	uint64_t free0;
	struct stat st;

	memset(buf, 0x77, sizeof(buf));
	assert_int_equal(e2_write(fs, NULL, f, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	free0 = bfree(fs);
	/* inside one block: zeros, no block freed */
	assert_int_equal(e2_punch(fs, NULL, f, 100, 200), 0);
	assert_int_equal(e2_read(fs, f, back, sizeof(back), 0), (ssize_t)sizeof(back));
	memset(buf + 100, 0, 200);
	assert_memory_equal(back, buf, sizeof(buf));
	assert_int_equal(bfree(fs), free0);
	/* a whole block and half of the next */
	assert_int_equal(e2_punch(fs, NULL, f, BS, BS + BS / 2), 0);
	memset(buf + BS, 0, BS + BS / 2);
	assert_int_equal(e2_read(fs, f, back, sizeof(back), 0), (ssize_t)sizeof(back));
	assert_memory_equal(back, buf, sizeof(buf));
	assert_int_equal(bfree(fs), free0 + 1);
	assert_int_equal(seek(fs, f, 0, false), BS);
	/* again over the hole: nothing changes */
	assert_int_equal(e2_punch(fs, NULL, f, BS, BS), 0);
	assert_int_equal(bfree(fs), free0 + 1);
	/* at or past the end: nothing */
	assert_int_equal(e2_punch(fs, NULL, f, 4 * BS, BS), 0);
	assert_int_equal(e2_punch(fs, NULL, f, 100 * BS, BS), 0);
	assert_int_equal(bfree(fs), free0 + 1);
	assert_int_equal(e2_getattr(fs, f, &st), 0);
	assert_int_equal(st.st_size, 4 * BS);
	/* refusals */
	assert_int_equal(e2_punch(fs, NULL, f, -1, 10), -EINVAL);
	assert_int_equal(e2_punch(fs, NULL, f, 0, 0), -EINVAL);
	assert_int_equal(e2_punch(fs, NULL, E2_ROOT_INO, 0, 10), -EISDIR);
	/* a huge length from the middle: the rest of the file, no overflow */
	assert_int_equal(e2_punch(fs, NULL, f, 2 * BS + 1, INT64_MAX), 0);
	assert_int_equal(e2_getattr(fs, f, &st), 0);
	assert_int_equal(st.st_size, 4 * BS);
	assert_int_equal(st.st_blocks, 2 * (BS / 512)); /* blocks 0 and 2 */
	close_clean(fs, path);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_alloc_and_seek, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_enospc_part_way, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_punch_model, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_punch_edges, e2t_remove_scratch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
