/* cache_discard(): the pending patches of a freed block that never reached
 * disk are dropped, without breaking any dependency.
 *
 * Engine level: a small model of a file (data block, indirect block,
 * "inode" with pointer bytes, a "clear" that deletes the inode) checked on
 * the recorder log and on every crash state.  The rule checked: the pointer
 * bytes never reach disk without the clear once the data they point to was
 * discarded; what waits for a held patch, the baseline mode, referenced
 * blocks and patches some other block needs are never discarded.
 *
 * ext2 level: random create / write / fsync / truncate / delete workloads
 * over blocks holding stale data from deleted files; in every crash state
 * e2fsck finds nothing dangerous and no file shows bytes it was not given
 * (stale or another file's).  The same checker must find violations with
 * CONSISTENCY_NONE, and discards must have happened under soft updates.
 * Environment: DISCARD_SEED, DISCARD_ITERS, DISCARD_CHUNKS=0 (files written
 * in one piece), DISCARD_NOEXTRA (or'ed into the choice of fsync /
 * truncate / nothing), DISCARD_EXPECT=0 (do not require discards),
 * DISCARD_LOG=1 (print the operations and rounds).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>
#include "bdev/bdev.h"
#include "engine/cache.h"
#include "crash/crashsim.h"
#include "ext2/e2.h"
#include "e2test_util.h"

#define BS   512
#define NBLK 32

/* Blocks of the engine-level model. */
enum { INODE = 2, DIR = 3, DATA = 5, IND = 6, OTHER = 7, ELSE = 9 };
/* The pointer patch writes PTR over [0, 16) of INODE; the clear writes CLR
 * over [8, 12), inside it. */
#define PTR 0x11
#define CLR 0x55

struct env {
	struct bdev *mem, *rec;
	struct cache *c;
};

static void env_open(struct env *e, enum consistency mode)
{
	struct cache_opts o = {.consistency = mode};

	memset(e, 0, sizeof(*e));
	assert_int_equal(bdev_mem_create(BS, NBLK, NULL, 0, &e->mem), 0);
	assert_int_equal(bdev_recorder_create(e->mem, &e->rec), 0);
	assert_int_equal(cache_create(e->rec, &o, &e->c), 0);
}

static void env_close(struct env *e)
{
	cache_destroy(e->c);
	bdev_destroy(e->rec);
}

static struct cblock *get(struct env *e, uint64_t n)
{
	struct cblock *b;

	assert_int_equal(cache_get(e->c, n, &b), 0);
	return b;
}

/* A change of len bytes of value v at off in block n. */
static struct patch *put(struct env *e, uint64_t n, uint32_t off, uint8_t v, uint32_t len,
			 struct patch *const *deps, size_t nd)
{
	struct cblock *b = get(e, n);
	uint8_t buf[BS];
	struct patch *p;

	memset(buf, v, len);
	assert_int_equal(patch_create_byte(e->c, b, off, len, buf, deps, nd, NULL, &p), 0);
	cache_put(e->c, b);
	return p;
}

static struct cache_stats stats(struct env *e)
{
	struct cache_stats st;

	cache_get_stats(e->c, &st);
	return st;
}

/* What an image of INODE carries: 0 neither change, 1 the pointer only
 * (the dangerous state), 2 both, -1 anything else (torn). */
static int inode_state(const uint8_t *blk)
{
	bool z = true, ptr = true, both = true;

	for (int i = 0; i < 16; i++) {
		uint8_t want = i >= 8 && i < 12 ? CLR : PTR;

		z &= blk[i] == 0;
		ptr &= blk[i] == PTR;
		both &= blk[i] == want;
	}
	return z ? 0 : ptr ? 1 : both ? 2 : -1;
}

/* The log: the data block is written `data_writes` times and, if
 * `discarded`, no write of INODE carries the pointer without the clear. */
static void check_log(struct env *e, size_t data_writes, bool discarded)
{
	size_t n = bdev_recorder_count(e->rec), nd = 0;

	for (size_t i = 0; i < n; i++) {
		const struct rec_event *ev = bdev_recorder_event(e->rec, i);

		if (ev->kind != REC_WRITE)
			continue;
		if (ev->blkno == INODE && discarded) {
			int s = inode_state(ev->data);

			assert_true(s == 0 || s == 2);
		}
		nd += ev->blkno == DATA;
	}
	assert_int_equal(nd, data_writes);
}

/* Counts the crash states whose INODE is neither old nor complete. */
static int crash_inode_cb(const struct crash_state *st, void *arg)
{
	int s = inode_state((const uint8_t *)st->image + (size_t)INODE * st->block_size);

	*(size_t *)arg += !(s == 0 || s == 2);
	return 0;
}

/* The number of crash states that show the pointer without the clear
 * (there are always several states to look at). */
static size_t pointer_only_states(struct env *e)
{
	struct crash_opts co = {0};
	size_t n = 0, bad = 0;

	assert_int_equal(crash_enumerate(e->rec, &co, crash_inode_cb, &bad, &n), 0);
	assert_true(n > 1);
	return bad;
}

static void check_crash_states(struct env *e)
{
	assert_int_equal(pointer_only_states(e), 0);
}

static void release_all(struct env *e, struct patch *const *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		patch_release(e->c, p[i]);
}

/* Drops the test's references to the patches listed. */
#define RELEASE(e, ...)                                                                            \
	release_all((e), (struct patch *[]){__VA_ARGS__},                                          \
		    sizeof((struct patch *[]){__VA_ARGS__}) / sizeof(struct patch *))

/* A soft patch on INODE that the pointer patch comes after: the inode
 * block is rarely clean, and on a clean block the pointer patch would keep
 * no undo data (then it cannot be folded into the clear). */
static struct patch *dirty_inode_block(struct env *e)
{
	struct patch *o = put(e, OTHER, 0, 0x33, 4, NULL, 0);
	struct patch *x = put(e, INODE, 100, 0x22, 4, &o, 1), *col;

	/* (x keeps no undo data: a change of a clean block.  Something
	 * waits for it, so later changes of the block do not merge into
	 * it but get patches of their own.) */
	assert_int_equal(patch_create_empty(e->c, &x, 1, &col), 0);
	patch_release(e->c, col);
	patch_release(e->c, o);
	return x;
}

/* The pointer and the clear merge into one patch (nothing else waits for
 * the pointer): the data block is dropped, never written, and the pointer
 * reaches disk only with the clear. */
static void test_discard_merged_clear(void **state)
{
	struct env e;
	struct patch *d, *s, *r, *cl, *x;
	struct cblock *b;

	(void)state;
	env_open(&e, CONSISTENCY_SOFTUPDATES);
	x = dirty_inode_block(&e);
	d = put(&e, DATA, 0, 0xdd, BS, NULL, 0);
	s = put(&e, INODE, 0, PTR, 16, &d, 1);
	r = put(&e, DIR, 0, 0x44, 4, &x, 1); /* the entry's removal */
	cl = put(&e, INODE, 8, CLR, 4, &r, 1);
	assert_ptr_equal(cl, s);
	assert_int_equal(cache_discard(e.c, DATA, cl), 1);
	assert_true(patch_committed(d)); /* nothing left to wait for */
	assert_int_equal(stats(&e).blocks_discarded, 1);
	assert_int_equal(stats(&e).patches_discarded, 1);
	/* the block left the cache: it reads as the disk has it */
	b = get(&e, DATA);
	assert_int_equal(cblock_data(b)[0], 0);
	cache_put(e.c, b);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(cl));
	check_log(&e, 0, true);
	check_crash_states(&e);
	RELEASE(&e, d, s, r, cl, x);
	assert_int_equal(stats(&e).engine_bytes, 0);
	env_close(&e);
}

/* Something else (an fsync collector) waits for the pointer, so the clear
 * is a patch of its own: the pointer's bytes are folded into the clear,
 * the pointer patch becomes empty, and the crash states never show the
 * pointer without the clear.  Then the block is reused: its new contents
 * wait for the clear and are written. */
static void test_discard_absorbs_pointer(void **state)
{
	struct env e;
	struct patch *d, *s, *r, *cl, *x, *col, *n;

	(void)state;
	env_open(&e, CONSISTENCY_SOFTUPDATES);
	x = dirty_inode_block(&e);
	d = put(&e, DATA, 0, 0xdd, BS, NULL, 0);
	s = put(&e, INODE, 0, PTR, 16, &d, 1);
	assert_int_equal(patch_create_empty(e.c, &s, 1, &col), 0);
	r = put(&e, DIR, 0, 0x44, 4, &x, 1);
	cl = put(&e, INODE, 8, CLR, 4, &r, 1);
	assert_ptr_not_equal(cl, s);
	assert_int_equal(cache_discard(e.c, DATA, cl), 1);
	assert_int_equal(stats(&e).patches_discarded, 2); /* data + pointer */
	/* reuse: a whole-block initialisation after the clear */
	n = put(&e, DATA, 0, 0xee, BS, &cl, 1);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(col));
	assert_true(patch_committed(n));
	assert_int_equal(((uint8_t *)bdev_mem_data(e.mem))[DATA * BS], 0xee);
	assert_int_equal(inode_state((uint8_t *)bdev_mem_data(e.mem) + INODE * BS), 2);
	check_log(&e, 1, true); /* the new contents only */
	check_crash_states(&e);
	RELEASE(&e, n, col, d, s, r, cl, x);
	assert_int_equal(stats(&e).engine_bytes, 0);
	env_close(&e);
}

/* The negative control of the crash checks above: the same patches
 * without the discard.  Soft updates may then write the pointer before the
 * clear (its data is on disk by then), and the checker must see those
 * states, or finding none above proves nothing. */
static void test_discard_check_fires_without_discard(void **state)
{
	struct env e;
	struct patch *d, *s, *r, *cl, *x, *col;
	size_t n;

	(void)state;
	env_open(&e, CONSISTENCY_SOFTUPDATES);
	x = dirty_inode_block(&e);
	d = put(&e, DATA, 0, 0xdd, BS, NULL, 0);
	s = put(&e, INODE, 0, PTR, 16, &d, 1);
	assert_int_equal(patch_create_empty(e.c, &s, 1, &col), 0);
	r = put(&e, DIR, 0, 0x44, 4, &x, 1);
	cl = put(&e, INODE, 8, CLR, 4, &r, 1);
	assert_int_equal(cache_sync(e.c), 0);
	check_log(&e, 1, false);
	n = pointer_only_states(&e);
	print_message("# without the discard: %zu crash states show the pointer alone\n", n);
	assert_true(n > 0);
	RELEASE(&e, col, d, s, r, cl, x);
	env_close(&e);
}

/* A data block under an indirect block, freed first: its pointer lives in
 * the indirect block, which is not dead yet, so it is kept; freeing the
 * indirect block (whose own pointer folds into the clear) lets the data
 * block go too. */
static void test_discard_retry_after_indirect(void **state)
{
	struct env e;
	struct patch *d, *ind, *p, *s, *r, *cl, *x, *col;

	(void)state;
	env_open(&e, CONSISTENCY_SOFTUPDATES);
	x = dirty_inode_block(&e);
	d = put(&e, DATA, 0, 0xdd, BS, NULL, 0);
	ind = put(&e, IND, 0, 0, BS, NULL, 0);
	p = put(&e, IND, 0, 0x66, 4, &d, 1);
	s = put(&e, INODE, 0, PTR, 16, &ind, 1);
	assert_int_equal(patch_create_empty(e.c, &s, 1, &col), 0);
	r = put(&e, DIR, 0, 0x44, 4, &x, 1);
	cl = put(&e, INODE, 8, CLR, 4, &r, 1);
	assert_int_equal(cache_discard(e.c, DATA, cl), 0);
	assert_int_equal(cache_discard(e.c, IND, cl), 1);
	assert_int_equal(stats(&e).blocks_discarded, 2);
	assert_int_equal(cache_sync(e.c), 0);
	check_log(&e, 0, true);
	for (size_t i = 0; i < bdev_recorder_count(e.rec); i++)
		assert_int_not_equal(bdev_recorder_event(e.rec, i)->blkno, IND);
	check_crash_states(&e);
	RELEASE(&e, col, d, ind, p, s, r, cl, x);
	env_close(&e);
}

/* Every case where the data must still be written. */
static void test_discard_refused(void **state)
{
	struct env e;
	struct patch *d, *s, *r, *cl, *x, *h, *q;
	struct cblock *b;

	(void)state;
	/* the baseline discards nothing */
	env_open(&e, CONSISTENCY_NONE);
	d = put(&e, DATA, 0, 0xdd, BS, NULL, 0);
	cl = put(&e, INODE, 8, CLR, 4, NULL, 0);
	assert_int_equal(cache_discard(e.c, DATA, cl), 0);
	assert_int_equal(cache_sync(e.c), 0);
	check_log(&e, 1, false);
	RELEASE(&e, d, cl);
	env_close(&e);

	env_open(&e, CONSISTENCY_SOFTUPDATES);
	x = dirty_inode_block(&e);
	d = put(&e, DATA, 0, 0xdd, BS, NULL, 0);
	s = put(&e, INODE, 0, PTR, 16, &d, 1);
	/* a patchgroup's tail waits for the data */
	assert_int_equal(patch_create_empty_held(e.c, &d, 1, &h), 0);
	/* another block needs the data on disk */
	q = put(&e, ELSE, 0, 0x77, 4, &d, 1);
	r = put(&e, DIR, 0, 0x44, 4, &x, 1);
	cl = put(&e, INODE, 8, CLR, 4, &r, 1);
	assert_int_equal(cache_discard(e.c, DATA, NULL), 0);
	assert_int_equal(cache_discard(e.c, DATA, cl), 0);
	patch_unhold(e.c, h);
	assert_int_equal(cache_discard(e.c, DATA, cl), 0); /* still q */
	/* nothing cached, or clean */
	assert_int_equal(cache_discard(e.c, NBLK - 1, cl), 0);
	assert_int_equal(cache_discard(e.c, OTHER, cl), 0);
	/* referenced */
	b = get(&e, DATA);
	assert_int_equal(cache_discard(e.c, DATA, cl), 0);
	cache_put(e.c, b);
	assert_int_equal(stats(&e).blocks_discarded, 0);
	assert_int_equal(cache_sync(e.c), 0);
	assert_true(patch_committed(q));
	check_log(&e, 1, false);
	/* committed: nothing to discard */
	assert_int_equal(cache_discard(e.c, DATA, cl), 0);
	RELEASE(&e, h, q, d, s, r, cl, x);
	env_close(&e);
}

/* A data block written in a round that failed may be on disk: keep it. */
static void test_discard_refused_after_failed_round(void **state)
{
	struct env e;
	struct patch *d, *cl;

	(void)state;
	env_open(&e, CONSISTENCY_SOFTUPDATES);
	d = put(&e, DATA, 0, 0xdd, BS, NULL, 0);
	bdev_mem_inject(e.mem, BDEV_FAULT_BARRIER, 0, 1, -EIO);
	assert_int_equal(cache_flush_round(e.c, NULL), -EIO);
	assert_false(patch_committed(d));
	cl = put(&e, INODE, 8, CLR, 4, &d, 1);
	assert_int_equal(cache_discard(e.c, DATA, cl), 0);
	assert_int_equal(cache_sync(e.c), 0);
	RELEASE(&e, d, cl);
	env_close(&e);
}

/* ---- ext2 ---------------------------------------------------------------- */

#define IMG_KIB 2048
#define FBS	1024
#define NFILES	10
#define STALE	0x53 /* bytes of the files deleted before the workload */

/* File i holds only the byte TAG(i) (and zeros in holes). */
#define TAG(i) ((uint8_t)(0x80 + (i)))

struct e2world {
	struct e2t_rng rng;
	enum consistency mode;
	struct e2fs *fs;  /* the workload's */
	struct e2fs *cfs; /* a crash image's */
	struct bdev *rec;
	uint8_t *img;
	size_t len;
	bool exists[NFILES];
	bool log;	  /* DISCARD_LOG: print the operations */
	bool chunks;	  /* files written in several pieces */
	unsigned noextra; /* or'ed into the fsync/truncate choice */
	uint64_t seen[4096];
	size_t nseen;
	/* results */
	size_t states, checked, dangerous, foreign, discarded;
	char first[2600];
};

static void ok(struct e2world *w, long r, const char *what)
{
	if (r < 0)
		fail_msg("%s: %ld (%s)", what, r, e2_error(w->fs));
}

static void wfile(struct e2world *w, uint32_t ino, uint8_t v, size_t off, size_t size)
{
	static uint8_t buf[64 * 1024];

	memset(buf, v, size);
	ok(w, e2_write(w->fs, NULL, ino, buf, size, (off_t)off), "write");
}

/* Files full of STALE, synced and deleted: their blocks are free on disk
 * and still hold those bytes, so a file shown with a block it never
 * initialised shows them. */
static void plant_stale(struct e2world *w)
{
	struct stat st;
	char nm[32];

	for (int i = 0; i < 8; i++) {
		snprintf(nm, sizeof(nm), "stale%d", i);
		ok(w, e2_mknod(w->fs, NULL, 2, nm, S_IFREG | 0644, 0, 0, 0, &st), "mknod");
		wfile(w, st.st_ino, STALE, 0, 40 * 1024);
		e2_forget(w->fs, st.st_ino, 1);
	}
	ok(w, e2_sync(w->fs), "sync");
	for (int i = 0; i < 8; i++) {
		snprintf(nm, sizeof(nm), "stale%d", i);
		ok(w, e2_unlink(w->fs, NULL, 2, nm), "unlink");
	}
	ok(w, e2_sync(w->fs), "sync");
}

static void op(struct e2world *w)
{
	unsigned i = (unsigned)e2t_rng_below(&w->rng, NFILES);
	struct stat st, attr;
	size_t size;
	char nm[32];

	snprintf(nm, sizeof(nm), "f%u", i);
	if (w->log)
		print_message("# %s %s\n", w->exists[i] ? "unlink" : "create", nm);
	if (w->exists[i]) {
		ok(w, e2_unlink(w->fs, NULL, 2, nm), "unlink");
		w->exists[i] = false;
		return;
	}
	ok(w, e2_mknod(w->fs, NULL, 2, nm, S_IFREG | 0644, 0, 0, 0, &st), "mknod");
	/* up to 30 KiB (direct blocks and, past 12 KiB, an indirect one),
	 * in one to three writes */
	size = 1 + (size_t)e2t_rng_below(&w->rng, 30 * 1024);
	for (size_t off = 0, n; off < size; off += n) {
		n = e2t_rng_below(&w->rng, 2) || !w->chunks ? size - off : 1 + (size - off) / 2;
		wfile(w, st.st_ino, TAG(i), off, n);
		if (w->log)
			print_message("#   ino %lu write %zu at %zu\n", (unsigned long)st.st_ino, n,
				      off);
	}
	switch (e2t_rng_below(&w->rng, 4) | w->noextra) {
	case 0: /* an fsync collector waits for the file's patches */
		ok(w, e2_fsync(w->fs, st.st_ino, false), "fsync");
		break;
	case 1: /* truncated to a few bytes: frees blocks of a live file */
		memset(&attr, 0, sizeof(attr));
		attr.st_size = (off_t)e2t_rng_below(&w->rng, 3000);
		ok(w, e2_setattr(w->fs, NULL, st.st_ino, &attr, E2_SET_SIZE, &st), "truncate");
		break;
	default:
		break;
	}
	e2_forget(w->fs, st.st_ino, 1);
	w->exists[i] = true;
}

static void run_e2_workload(struct e2world *w, uint64_t seed)
{
	struct e2_opts o = {.consistency = w->mode,
			    .no_flusher = true,
			    .round_max_blocks = 4,
			    .clock = e2t_fixed_clock};
	struct cache_stats cs;
	struct bdev *mem;
	void *img;
	size_t len;

	memset(w->exists, 0, sizeof(w->exists));
	w->log = e2t_env_long("DISCARD_LOG", 0) != 0;
	w->chunks = e2t_env_long("DISCARD_CHUNKS", 1) != 0;
	w->noextra = (unsigned)e2t_env_long("DISCARD_NOEXTRA", 0);
	e2t_rng_seed(&w->rng, seed);
	assert_int_equal(e2t_mkfs_mem(IMG_KIB, FBS, NULL, &img, &len), 0);
	assert_int_equal(bdev_mem_create(FBS, 0, img, len, &mem), 0);
	free(img);
	assert_int_equal(bdev_recorder_create(mem, &w->rec), 0);
	assert_int_equal(e2_open_bdev(w->rec, &o, &w->fs), 0);
	plant_stale(w);
	assert_int_equal(bdev_recorder_reset(w->rec), 0);
	for (int k = 0; k < 40; k++) {
		op(w);
		/* now and then a round or two, so that some files are on
		 * disk before they are deleted and some are not */
		if (e2t_rng_below(&w->rng, 6) == 0) {
			size_t nw = 0;

			ok(w, cache_flush_round(e2_cache(w->fs), &nw), "round");
			if (w->log)
				print_message("# round (%zu writes)\n", nw);
		}
	}
	ok(w, e2_sync(w->fs), "sync");
	cache_get_stats(e2_cache(w->fs), &cs);
	w->discarded += cs.blocks_discarded;
}

/* Entries of the root that name workload files (e2_readdir's callback runs
 * under the file system's lock: collect first, read after). */
struct found {
	unsigned id[64];
	uint32_t ino[64];
	size_t n;
};

static int found_cb(const struct e2_dirent *d, void *arg)
{
	struct found *f = arg;
	unsigned id;

	if (d->name[0] == 'f' && sscanf(d->name + 1, "%u", &id) == 1 && id < NFILES && f->n < 64) {
		f->id[f->n] = id;
		f->ino[f->n++] = d->ino;
	}
	return 0;
}

/* Every byte of file id is its tag or a zero (a hole). */
static void check_file(struct e2world *w, unsigned id, uint32_t ino)
{
	static uint8_t buf[64 * 1024];
	struct stat st;
	ssize_t n;

	if (e2_getattr(w->cfs, ino, &st) || !S_ISREG(st.st_mode) || st.st_size > (off_t)sizeof(buf))
		return; /* e2fsck judges broken inodes */
	n = e2_read(w->cfs, ino, buf, sizeof(buf), 0);
	for (ssize_t k = 0; k < n; k++) {
		if (buf[k] != 0 && buf[k] != TAG(id)) {
			w->foreign++;
			if (!w->first[0])
				snprintf(w->first, sizeof(w->first),
					 "file f%u byte %zd is 0x%02x (%s)", id, k, buf[k],
					 buf[k] == STALE ? "stale" : "another file's");
			return;
		}
	}
}

static int crash_e2_cb(const struct crash_state *st, void *arg)
{
	struct e2world *w = arg;
	struct e2_opts o = {.consistency = CONSISTENCY_NONE, .no_flusher = true};
	uint64_t h = e2t_hash(st->image, st->image_len);
	struct e2t_fsck f;
	struct bdev *mem;

	w->states++;
	for (size_t i = 0; i < w->nseen; i++)
		if (w->seen[i] == h)
			return 0;
	if (w->nseen < sizeof(w->seen) / sizeof(w->seen[0]))
		w->seen[w->nseen++] = h;
	w->checked++;
	assert_int_equal(e2t_fsck_mem(st->image, st->image_len, &f), 0);
	if (f.verdict == FSCK_DANGEROUS) {
		if (w->log && !w->dangerous && w->mode == CONSISTENCY_SOFTUPDATES) {
			e2t_write_file("/tmp/discard-dangerous.img", st->image, st->image_len);
			print_message("# first dangerous: round %zu, %zu of %zu writes\n",
				      st->round, st->napplied, st->nround);
		}
		w->dangerous++;
		if (!w->first[0])
			snprintf(w->first, sizeof(w->first), "round %zu: %s", st->round,
				 f.findings);
	}
	e2t_fsck_free(&f);
	/* Read every file of the crash image (the library's own view). */
	assert_int_equal(bdev_mem_create(st->block_size, 0, st->image, st->image_len, &mem), 0);
	o.readonly = true;
	if (e2_open_bdev(mem, &o, &w->cfs) == 0) {
		struct found fd = {.n = 0};

		e2_readdir(w->cfs, 2, 0, found_cb, &fd);
		for (size_t i = 0; i < fd.n; i++)
			check_file(w, fd.id[i], fd.ino[i]);
		e2_abandon(w->cfs);
	} else {
		w->dangerous++;
	}
	/* Without ordering, one broken state is the proof: stop there. */
	return w->mode == CONSISTENCY_NONE && (w->dangerous || w->foreign);
}

static void check_e2(struct e2world *w)
{
	struct crash_opts co = {.max_exhaustive = 4, .samples = 6, .seed = 7};
	struct bdev *rec = w->rec;
	int stop;

	if (w->log) {
		size_t r = 0;

		print_message("# round 0:");
		for (size_t i = 0; i < bdev_recorder_count(rec); i++) {
			const struct rec_event *ev = bdev_recorder_event(rec, i);

			if (ev->kind == REC_BARRIER)
				print_message("\n# round %zu:", ++r);
			else
				print_message(" %lu", (unsigned long)ev->blkno);
		}
		print_message("\n");
	}
	stop = crash_enumerate(rec, &co, crash_e2_cb, w, NULL);
	assert_true(stop == 0 || (stop == 1 && w->mode == CONSISTENCY_NONE));
	e2_close(w->fs); /* destroys the recorder */
	w->fs = NULL;
}

static void test_e2_discard_crash(void **state)
{
	long iters = e2t_env_long("DISCARD_ITERS", 1);
	uint64_t seed = e2t_seed("DISCARD_SEED", 12);
	struct e2world *w = calloc(1, sizeof(*w));

	(void)state;
	assert_non_null(w);
	w->mode = CONSISTENCY_SOFTUPDATES;
	for (long it = 0; it < iters; it++) {
		run_e2_workload(w, seed + (uint64_t)it);
		check_e2(w);
	}
	print_message("# softupdates: %zu blocks discarded, %zu states, %zu checked, "
		      "%zu dangerous, %zu with foreign data\n",
		      w->discarded, w->states, w->checked, w->dangerous, w->foreign);
	if (w->dangerous || w->foreign)
		fail_msg("crash state broken: %s", w->first);
	/* the workload does exercise discards (and with seed 12, a discard
	 * that ignores what waits for the data is caught: 106 dangerous
	 * states when checked by hand) */
	if (e2t_env_long("DISCARD_EXPECT", 1))
		assert_true(w->discarded > 0);
	free(w);
}

/* The same checker on the same workloads without ordering must find
 * violations: it can fail. */
static void test_e2_discard_none_detected(void **state)
{
	long iters = e2t_env_long("DISCARD_ITERS", 1);
	uint64_t seed = e2t_seed("DISCARD_SEED", 12);
	struct e2world *w = calloc(1, sizeof(*w));

	(void)state;
	assert_non_null(w);
	w->mode = CONSISTENCY_NONE;
	for (long it = 0; it < iters; it++) {
		run_e2_workload(w, seed + (uint64_t)it);
		check_e2(w);
	}
	print_message("# none: %zu blocks discarded, %zu states, %zu checked, "
		      "%zu dangerous, %zu with foreign data (first: %s)\n",
		      w->discarded, w->states, w->checked, w->dangerous, w->foreign, w->first);
	assert_int_equal(w->discarded, 0);
	assert_true(w->dangerous + w->foreign > 0);
	free(w);
}

/* Under consistency=journal, atomic replaces between two commits: each
 * replace frees the data of the file it replaces, written in the same
 * running transaction (ordered data, never on disk, reachable from
 * nothing committed).  That data is discarded, as under soft updates:
 * of 8 versions of 4 blocks each, the 7 replaced ones (28 blocks) are
 * never written, anywhere, and the last is written home once. */
#define JR_VERSIONS 8
#define JR_BLOCKS   4
#define JR_BYTE(i)  ((uint8_t)(0x60 + (i)))

struct jr_count {
	struct bdev *rec;
	struct cache_stats cs;
	unsigned full[JR_VERSIONS]; /* writes of a block full of JR_BYTE(i) */
};

static void jr_close(struct cache *c, void *arg)
{
	struct jr_count *jr = arg;

	cache_get_stats(c, &jr->cs);
	for (size_t i = 0; i < bdev_recorder_count(jr->rec); i++) {
		const struct rec_event *ev = bdev_recorder_event(jr->rec, i);
		const uint8_t *d = ev->data;
		size_t k;

		if (ev->kind != REC_WRITE || d[0] < JR_BYTE(0) || d[0] >= JR_BYTE(JR_VERSIONS))
			continue;
		for (k = 1; k < FBS && d[k] == d[0]; k++)
			;
		if (k == FBS)
			jr->full[d[0] - JR_BYTE(0)]++;
	}
}

static void test_e2_journal_replace_discards(void **state)
{
	struct e2_opts o = {
	    .consistency = CONSISTENCY_JOURNAL, .no_flusher = true, .clock = e2t_fixed_clock};
	struct jr_count jr = {0};
	struct e2fs *fs;
	struct bdev *mem;
	struct stat st;
	void *img;
	size_t len;
	static uint8_t buf[JR_BLOCKS * FBS];

	(void)state;
	assert_int_equal(e2t_mkfs_mem(IMG_KIB, FBS, "-j", &img, &len), 0);
	assert_int_equal(bdev_mem_create(FBS, 0, img, len, &mem), 0);
	free(img);
	assert_int_equal(bdev_recorder_create(mem, &jr.rec), 0);
	assert_int_equal(e2_open_bdev(jr.rec, &o, &fs), 0);
	for (int i = 0; i < JR_VERSIONS; i++) {
		memset(buf, JR_BYTE(i), sizeof(buf));
		assert_int_equal(e2_mknod(fs, NULL, 2, "tmp", S_IFREG | 0644, 0, 0, 0, &st), 0);
		assert_int_equal(e2_write(fs, NULL, st.st_ino, buf, sizeof(buf), 0),
				 (ssize_t)sizeof(buf));
		assert_int_equal(e2_rename(fs, NULL, 2, "tmp", 2, "f", 0), 0);
		e2_forget(fs, st.st_ino, 1);
	}
	assert_int_equal(e2_close_then(fs, jr_close, &jr), 0);
	print_message("# journal replace: %llu blocks discarded, %llu block writes\n",
		      (unsigned long long)jr.cs.blocks_discarded,
		      (unsigned long long)jr.cs.block_writes);
	assert_int_equal(jr.cs.blocks_discarded, (JR_VERSIONS - 1) * JR_BLOCKS);
	for (int i = 0; i < JR_VERSIONS - 1; i++)
		assert_int_equal(jr.full[i], 0);
	assert_int_equal(jr.full[JR_VERSIONS - 1], JR_BLOCKS);
}

/* Every crash state of atomic replaces under consistency=journal, some
 * with an fsync of the new file, a sync or a round between them and most
 * not (so that the replaced data is on disk, or only in the running
 * transaction and discarded: 52 blocks), replayed by fstitch's own
 * recovery: e2fsck -fn is clean, and f is one whole version, never
 * bytes of another or of a file deleted before (STALE).  The commits
 * here are waited for: data in a commit begun and not yet durable (which
 * its commit block waits for, so it is kept) does not come up. */
#define JR_CRASH_N 16

struct jrworld {
	struct e2t_rng rng;
	enum consistency mode;
	struct bdev *rec;
	const char *path;
	size_t size[JR_CRASH_N];
	uint64_t seen[4096]; /* states already checked (after the replay) */
	size_t nseen;
	size_t states, checked, bad, foreign;
	uint64_t discarded;
	char first[2600];
};

static int jr_state(const struct crash_state *cs, void *arg)
{
	struct jrworld *w = arg;
	struct e2_opts o = {.consistency = CONSISTENCY_NONE, .no_flusher = true, .readonly = true};
	static uint8_t buf[8 * FBS + 1];
	struct e2_recovery rec;
	struct e2t_fsck f;
	struct e2fs *cfs;
	struct bdev *mem;
	struct stat st;
	uint64_t h;
	void *img;
	size_t len;
	ssize_t n;

	w->states++;
	assert_int_equal(e2t_write_file(w->path, cs->image, cs->image_len), 0);
	if (e2_recover(w->path, &rec)) {
		w->bad++;
		return 0;
	}
	assert_int_equal(e2t_read_file(w->path, &img, &len), 0);
	h = e2t_hash(img, len);
	for (size_t i = 0; i < w->nseen; i++)
		if (w->seen[i] == h) {
			free(img);
			return 0;
		}
	if (w->nseen < sizeof(w->seen) / sizeof(w->seen[0]))
		w->seen[w->nseen++] = h;
	w->checked++;
	assert_int_equal(e2t_fsck_mem(img, len, &f), 0);
	if (f.status) {
		if (!w->first[0])
			snprintf(w->first, sizeof(w->first), "round %zu: %s", cs->round,
				 f.findings);
		w->bad++;
	}
	e2t_fsck_free(&f);
	assert_int_equal(bdev_mem_create(FBS, 0, img, len, &mem), 0);
	free(img);
	if (e2_open_bdev(mem, &o, &cfs)) {
		w->bad++;
		return 0;
	}
	if (e2_lookup(cfs, 2, "f", &st) == 0) {
		uint8_t v;

		n = e2_read(cfs, (uint32_t)st.st_ino, buf, sizeof(buf), 0);
		v = n > 0 ? buf[0] : 0;
		if (n <= 0 || v < TAG(0) || v >= TAG(JR_CRASH_N) ||
		    (size_t)n != w->size[v - TAG(0)]) {
			w->foreign++;
		} else {
			for (ssize_t k = 1; k < n; k++)
				if (buf[k] != v) {
					w->foreign++;
					break;
				}
		}
		if (w->foreign && !w->first[0])
			snprintf(w->first, sizeof(w->first),
				 "round %zu: f holds 0x%02x (%zd bytes)", cs->round, v, n);
	}
	e2_abandon(cfs);
	/* Without ordering, one broken state is the proof: stop there. */
	return w->mode == CONSISTENCY_NONE && (w->bad || w->foreign);
}

static void jr_crash_close(struct cache *c, void *arg)
{
	struct jrworld *w = arg;
	struct crash_opts co = {.max_exhaustive = 4, .samples = 6, .seed = 7};
	struct cache_stats cs;
	int r;

	cache_get_stats(c, &cs);
	w->discarded = cs.blocks_discarded;
	r = crash_enumerate(w->rec, &co, jr_state, w, NULL);
	assert_true(r == 0 || (r == 1 && w->mode == CONSISTENCY_NONE));
}

static void run_journal_replaces(struct jrworld *w)
{
	struct e2_opts o = {.consistency = w->mode,
			    .no_flusher = true,
			    .round_max_blocks = 4,
			    .clock = e2t_fixed_clock};
	static uint8_t buf[8 * FBS];
	struct e2world pw = {.mode = w->mode};
	struct bdev *mem;
	struct stat st;
	void *img;
	size_t len;

	e2t_rng_seed(&w->rng, 5);
	w->path = e2t_scratch_file("jreplace");
	assert_non_null(w->path);
	assert_int_equal(e2t_mkfs_mem(IMG_KIB, FBS, "-j", &img, &len), 0);
	assert_int_equal(bdev_mem_create(FBS, 0, img, len, &mem), 0);
	free(img);
	assert_int_equal(bdev_recorder_create(mem, &w->rec), 0);
	assert_int_equal(e2_open_bdev(w->rec, &o, &pw.fs), 0);
	plant_stale(&pw);
	assert_int_equal(bdev_recorder_reset(w->rec), 0);
	for (int i = 0; i < JR_CRASH_N; i++) {
		w->size[i] = 1 + (size_t)e2t_rng_below(&w->rng, sizeof(buf));
		memset(buf, TAG(i), w->size[i]);
		ok(&pw, e2_mknod(pw.fs, NULL, 2, "tmp", S_IFREG | 0644, 0, 0, 0, &st), "mknod");
		ok(&pw, e2_write(pw.fs, NULL, st.st_ino, buf, w->size[i], 0), "write");
		switch (e2t_rng_below(&w->rng, 12)) {
		case 0: /* the new file committed before its rename */
			ok(&pw, e2_fsync(pw.fs, st.st_ino, false), "fsync");
			break;
		case 1: /* a commit in flight or done */
			ok(&pw, e2_sync(pw.fs), "sync");
			break;
		case 2: {
			size_t nw = 0;

			ok(&pw, cache_flush_round(e2_cache(pw.fs), &nw), "round");
			break;
		}
		default:
			break;
		}
		ok(&pw, e2_rename(pw.fs, NULL, 2, "tmp", 2, "f", 0), "rename");
		e2_forget(pw.fs, st.st_ino, 1);
	}
	assert_int_equal(e2_close_then(pw.fs, jr_crash_close, w), 0);
}

static void test_e2_journal_replace_crash(void **state)
{
	struct jrworld *w = calloc(1, sizeof(*w));

	(void)state;
	assert_non_null(w);
	w->mode = CONSISTENCY_JOURNAL;
	run_journal_replaces(w);
	print_message("# journal replaces: %llu blocks discarded, %zu states, %zu checked, "
		      "%zu unclean, %zu with f not one whole version\n",
		      (unsigned long long)w->discarded, w->states, w->checked, w->bad, w->foreign);
	if (w->bad || w->foreign)
		fail_msg("crash state broken: %s", w->first);
	assert_true(w->discarded > 0);
	free(w);
}

/* The same checker without ordering must find broken states. */
static void test_e2_journal_replace_none_detected(void **state)
{
	struct jrworld *w = calloc(1, sizeof(*w));

	(void)state;
	assert_non_null(w);
	w->mode = CONSISTENCY_NONE;
	run_journal_replaces(w);
	print_message("# none: %llu blocks discarded, %zu states, %zu checked, %zu unclean, "
		      "%zu with f not one whole version (first: %s)\n",
		      (unsigned long long)w->discarded, w->states, w->checked, w->bad, w->foreign,
		      w->first);
	assert_int_equal(w->discarded, 0);
	assert_true(w->bad + w->foreign > 0);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_discard_merged_clear),
	    cmocka_unit_test(test_discard_absorbs_pointer),
	    cmocka_unit_test(test_discard_check_fires_without_discard),
	    cmocka_unit_test(test_discard_retry_after_indirect),
	    cmocka_unit_test(test_discard_refused),
	    cmocka_unit_test(test_discard_refused_after_failed_round),
	    cmocka_unit_test(test_e2_discard_crash),
	    cmocka_unit_test(test_e2_discard_none_detected),
	    cmocka_unit_test(test_e2_journal_replace_discards),
	    cmocka_unit_test_teardown(test_e2_journal_replace_crash, e2t_remove_scratch),
	    cmocka_unit_test_teardown(test_e2_journal_replace_none_detected, e2t_remove_scratch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
