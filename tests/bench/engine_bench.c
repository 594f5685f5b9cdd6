/* Benchmark of the patch engine and cache alone (no file system, no I/O
 * cost): build ext2-shaped patch graphs of 10k to 1M patches over up to 256k
 * blocks, flush them, and report how time and memory grow.
 *
 *   engine_bench [--out DIR] [--sizes N,N,...] [--workloads LIST] [--quick]
 *
 * Writes DIR/engine.md and DIR/engine.json (DIR defaults to build/bench).
 * Exit status: 0 done, 1 failed, 64 usage.
 *
 * Workloads (the dependency shapes of soft updates, see design.md §4):
 *   untar  files of 1-8 blocks: inode bitmap bit, inode initialised after
 *          it, per data block a block bitmap bit, the data (whole block),
 *          the block pointer after both; data blocks chained within a file;
 *          size after the last data; directory entry after the inode.
 *   meta   creates only: bitmap bit, inode, directory entry, plus an mtime
 *          update of the directory inode, many small patches sharing few
 *          inode-table and directory blocks.
 *   pg     groups of 4 small-file creates chained by patchgroup ordering
 *          (held group tails as scope befores, changes added to the
 *          group's tail): the pinned case, where fewer merges are allowed.
 * The device is a null device: reads give zeros, writes cost nothing, so
 * the figures are the engine's own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bdev/bdev.h"
#include "engine/cache.h"

#define BS 4096
#define GROUP 32768          /* blocks per group */
#define ITABLE 256           /* inode-table blocks per group */
#define INODES_PER_BLOCK (BS / 128)
#define MAXBLOCKS (256 * 1024)
#define PG_MAX 200000        /* largest default size of the pg workload */

/* ---- a null device ----------------------------------------------------- */

static int null_read(struct bdev *d, uint64_t n, uint32_t cnt, void *buf)
{
	memset(buf, 0, (size_t)cnt * d->block_size);
	return 0;
}

static int null_write(struct bdev *d, const struct bdev_write *w, size_t n)
{
	return 0;
}

static int null_barrier(struct bdev *d)
{
	return 0;
}

static void null_destroy(struct bdev *d)
{
}

static const struct bdev_ops null_ops = { null_read, null_write, null_barrier, null_destroy, NULL, NULL };

/* ---- workload ---------------------------------------------------------- */

struct gen {
	struct cache *c;
	uint64_t rng;
	size_t calls, target;
	uint64_t next_data, next_ino, dir_blk, dir_off;
	int err;
	struct patch *dir_inode;  /* last change to the directory inode */
	struct patch_scope *scope; /* of the changes made now (NULL: none) */
};

static uint64_t rnd(struct gen *g)
{
	g->rng ^= g->rng << 13;
	g->rng ^= g->rng >> 7;
	g->rng ^= g->rng << 17;
	return g->rng;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t group_base(uint64_t g)
{
	return g * GROUP;
}

/* One change; returns the patch carrying it (a reference the caller
 * releases), or NULL after an error. */
static struct patch *change(struct gen *g, uint64_t blkno, bool fresh, uint32_t off,
			    uint32_t len, struct patch *const *deps, size_t nd)
{
	static uint8_t buf[BS];
	struct cblock *b;
	struct patch *p = NULL;
	int err;

	err = fresh ? cache_get_new(g->c, blkno, &b) : cache_get(g->c, blkno, &b);
	if (err)
		goto fail;
	buf[0] = (uint8_t)g->calls;
	err = patch_create_byte(g->c, b, off, len, buf, deps, nd, g->scope, &p);
	cache_put(g->c, b);
	if (err)
		goto fail;
	g->calls++;
	return p;
fail:
	g->err = err;
	return NULL;
}

static struct patch *bit(struct gen *g, uint64_t blkno, uint64_t bitno)
{
	struct cblock *b;
	struct patch *p = NULL;
	int err;

	err = cache_get(g->c, blkno, &b);
	if (err)
		goto fail;
	err = patch_create_bit(g->c, b, (uint32_t)(bitno / 32 * 4) % BS, 1u << (bitno % 32), NULL,
			       0, g->scope, &p);
	cache_put(g->c, b);
	if (err)
		goto fail;
	g->calls++;
	return p;
fail:
	g->err = err;
	return NULL;
}

/* Allocate an inode: bitmap bit, then the initialised inode. */
static struct patch *new_inode(struct gen *g, uint64_t *ino_out, uint64_t *iblk,
			       uint32_t *ioff)
{
	uint64_t ino = g->next_ino++;
	uint64_t grp = ino / (ITABLE * INODES_PER_BLOCK);
	uint64_t idx = ino % (ITABLE * INODES_PER_BLOCK);
	struct patch *ib, *init;

	*iblk = group_base(grp) + 3 + idx / INODES_PER_BLOCK;
	*ioff = (uint32_t)(idx % INODES_PER_BLOCK) * 128;
	ib = bit(g, group_base(grp) + 2, idx);
	init = change(g, *iblk, false, *ioff, 128, &ib, 1);
	patch_release(g->c, ib);
	*ino_out = ino;
	return init;
}

/* A directory entry after the inode it names; new directory blocks as the
 * current one fills. */
static void dir_entry(struct gen *g, struct patch *init)
{
	struct patch *d, *m;

	if (g->dir_off + 24 > BS || g->dir_blk == 0) {
		g->dir_blk = g->next_data++;
		g->dir_off = 0;
	}
	d = change(g, g->dir_blk, false, (uint32_t)g->dir_off, 24, &init, 1);
	g->dir_off += 24;
	/* the directory's mtime: the same 8 bytes of inode 2 each time */
	m = change(g, 3, false, 128 + 16, 8, NULL, 0);
	patch_release(g->c, d);
	patch_release(g->c, m);
}

static void untar_file(struct gen *g)
{
	uint64_t ino, iblk;
	uint32_t ioff;
	struct patch *init, *prev = NULL;
	int nblk = 1 + (int)(rnd(g) % 8);

	init = new_inode(g, &ino, &iblk, &ioff);
	for (int k = 0; k < nblk && !g->err; k++) {
		uint64_t blk = g->next_data++;
		uint64_t grp = blk / GROUP;
		struct patch *bb, *data, *ptr, *deps[2];

		if (blk % GROUP < 3 + ITABLE)
			blk = g->next_data = group_base(grp) + 3 + ITABLE;
		g->next_data = blk + 1;
		bb = bit(g, group_base(grp) + 1, blk % GROUP);
		/* whole-block data; ordered after the file's previous block */
		data = change(g, blk, true, 0, BS, &prev, prev ? 1 : 0);
		deps[0] = bb;
		deps[1] = data;
		ptr = change(g, iblk, false, ioff + 40 + (uint32_t)k * 4, 4, deps, 2);
		patch_release(g->c, bb);
		patch_release(g->c, ptr);
		patch_release(g->c, prev);
		prev = data;
	}
	if (prev) {
		struct patch *sz = change(g, iblk, false, ioff + 4, 4, &prev, 1);

		patch_release(g->c, sz);
		patch_release(g->c, prev);
	}
	dir_entry(g, init);
	patch_release(g->c, init);
}

static void meta_file(struct gen *g)
{
	uint64_t ino, iblk;
	uint32_t ioff;
	struct patch *init = new_inode(g, &ino, &iblk, &ioff);

	dir_entry(g, init);
	patch_release(g->c, init);
}

/* Patchgroup-shaped: atomic replaces (write a new file, rename over the old
 * one) in a chain of groups, each ordered after the previous, the way
 * `pgrun --after` chains them.  A group's tail is a held empty patch that
 * every change of the group joins, and it stays held until the next group
 * is done, so changes are pinned behind it meanwhile. */
struct pgscope {
	struct patch_scope s;
	struct cache *c;
	struct patch *before;  /* the previous group's tail */
	struct patch *tail;
};

static size_t pg_befores(struct patch_scope *s, struct patch *const **deps)
{
	struct pgscope *g = (struct pgscope *)s;

	*deps = &g->before;
	return g->before ? 1 : 0;
}

static void pg_created(struct patch_scope *s, struct patch *p)
{
	struct pgscope *g = (struct pgscope *)s;

	patch_add_depend(g->c, g->tail, p);
}

static void pg_group(struct gen *g, struct pgscope *sc)
{
	struct patch *prev_before = sc->before;
	uint64_t ino, iblk;
	uint32_t ioff;

	sc->before = sc->tail;
	if (patch_create_empty_held(g->c, NULL, 0, &sc->tail)) {
		g->err = -ENOMEM;
		return;
	}
	g->scope = &sc->s;
	for (int f = 0; f < 4 && !g->err; f++) {
		struct patch *init = new_inode(g, &ino, &iblk, &ioff), *data, *ptr, *sz;

		data = change(g, g->next_data++, true, 0, BS, NULL, 0);
		ptr = change(g, iblk, false, ioff + 40, 4, &data, 1);
		sz = change(g, iblk, false, ioff + 4, 4, &data, 1);
		dir_entry(g, init);
		patch_release(g->c, init);
		patch_release(g->c, data);
		patch_release(g->c, ptr);
		patch_release(g->c, sz);
	}
	g->scope = NULL;
	/* the group before the previous one is closed now */
	if (prev_before) {
		patch_unhold(g->c, prev_before);
		patch_release(g->c, prev_before);
	}
}

/* ---- one measurement --------------------------------------------------- */

struct result {
	const char *workload;
	size_t target, calls;
	double create_s, flush_s;
	struct cache_stats st;    /* after creating, before flushing */
	struct cache_stats end;   /* after the flush */
};

static int run(const char *workload, size_t target, struct result *r)
{
	struct bdev nd = { &null_ops, BS, 64ull * GROUP };
	struct cache_opts o = { .max_blocks = MAXBLOCKS + 65536,
				.dirty_limit = MAXBLOCKS + 65536 };
	struct gen g = { .rng = 88172645463325252ull, .target = target, .next_data = 3 + ITABLE,
			 .next_ino = 11 };
	struct pgscope sc = { .s = { pg_befores, pg_created } };
	double t0, t1, t2;
	int err;

	err = cache_create(&nd, &o, &g.c);
	if (err)
		return err;
	sc.c = g.c;
	t0 = now();
	while (g.calls < target && !g.err && g.next_data < MAXBLOCKS) {
		if (!strcmp(workload, "untar"))
			untar_file(&g);
		else if (!strcmp(workload, "meta"))
			meta_file(&g);
		else
			pg_group(&g, &sc);
	}
	/* close the last groups */
	if (sc.before) {
		patch_unhold(g.c, sc.before);
		patch_release(g.c, sc.before);
	}
	if (sc.tail) {
		patch_unhold(g.c, sc.tail);
		patch_release(g.c, sc.tail);
	}
	t1 = now();
	cache_get_stats(g.c, &r->st);
	err = g.err ? g.err : cache_sync(g.c);
	t2 = now();
	cache_get_stats(g.c, &r->end);
	cache_destroy(g.c);
	r->workload = workload;
	r->target = target;
	r->calls = g.calls;
	r->create_s = t1 - t0;
	r->flush_s = t2 - t1;
	return err;
}

/* ---- report ------------------------------------------------------------ */

static double per(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static void write_md(FILE *f, const struct result *r, size_t n)
{
	fprintf(f, "# Engine benchmark\n\n");
	fprintf(f, "The patch engine and cache alone over a null device (tests/bench/engine_bench.c):\n"
		   "ext2-shaped patch graphs are built, then flushed with `cache_sync()`.\n"
		   "*changes* are patch-creating calls; *patches* the structures left after\n"
		   "merging. Memory is the engine's own (patch structures, undo data,\n"
		   "dependency arrays) at the end of the build, against the dirty block data.\n\n");
	fprintf(f, "| workload | changes | patches | dirty blocks | build (s) | changes/s "
		   "| flush (s) | flush µs/change | rounds | block writes | rollback writes "
		   "| engine B/patch | engine B/change | engine / dirty data |\n");
	fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (size_t i = 0; i < n; i++) {
		const struct result *x = &r[i];
		uint64_t live = x->st.patches_byte + x->st.patches_bit + x->st.patches_empty;

		fprintf(f, "| %s | %zu | %llu | %llu | %.3f | %.0f | %.3f | %.3f | %llu | %llu "
			   "| %llu (%.2f%%) | %.1f | %.1f | %.2f%% |\n",
			x->workload, x->calls, (unsigned long long)live,
			(unsigned long long)x->st.blocks_dirty, x->create_s,
			per((double)x->calls, x->create_s), x->flush_s,
			per(x->flush_s * 1e6, (double)x->calls),
			(unsigned long long)x->end.rounds,
			(unsigned long long)x->end.block_writes,
			(unsigned long long)x->end.rollback_writes,
			100.0 * per((double)x->end.rollback_writes, (double)x->end.block_writes),
			per((double)x->st.engine_bytes, (double)live),
			per((double)x->st.engine_bytes, (double)x->calls),
			100.0 * per((double)x->st.engine_bytes, (double)x->st.dirty_bytes));
	}
	fprintf(f, "\nGrowth: flush µs/change and build changes/s should stay roughly flat\n"
		   "from the smallest to the largest size (linear total cost).  The pg\n"
		   "workload is the exception by design: a chain of groups that all change\n"
		   "one directory inode needs one write of that block per group, each with\n"
		   "the later groups' changes rolled back, so its flush grows with\n"
		   "groups x changes on that block; it runs to %d changes only.\n", PG_MAX);
}

static void write_json(FILE *f, const struct result *r, size_t n)
{
	fprintf(f, "[\n");
	for (size_t i = 0; i < n; i++) {
		const struct result *x = &r[i];

		fprintf(f, "  {\"workload\": \"%s\", \"changes\": %zu, \"patches\": %llu, "
			   "\"hard\": %llu, \"soft\": %llu, \"merged\": %llu, "
			   "\"dirty_blocks\": %llu, \"build_s\": %.6f, \"flush_s\": %.6f, "
			   "\"rounds\": %llu, \"block_writes\": %llu, \"rollback_writes\": %llu, "
			   "\"engine_bytes\": %llu, \"undo_bytes\": %llu, \"dirty_bytes\": %llu, "
			   "\"peak_engine_bytes\": %llu}%s\n",
			x->workload, x->calls,
			(unsigned long long)(x->st.patches_byte + x->st.patches_bit +
					     x->st.patches_empty),
			(unsigned long long)x->st.patches_hard,
			(unsigned long long)x->st.patches_soft,
			(unsigned long long)x->st.patches_merged,
			(unsigned long long)x->st.blocks_dirty, x->create_s, x->flush_s,
			(unsigned long long)x->end.rounds, (unsigned long long)x->end.block_writes,
			(unsigned long long)x->end.rollback_writes,
			(unsigned long long)x->st.engine_bytes,
			(unsigned long long)x->st.undo_bytes,
			(unsigned long long)x->st.dirty_bytes,
			(unsigned long long)x->end.peak_engine_bytes, i + 1 < n ? "," : "");
	}
	fprintf(f, "]\n");
}

int main(int argc, char **argv)
{
	const char *out = "build/bench", *only = NULL;
	bool sizes_given = false;
	size_t sizes[8] = { 10000, 100000, 1000000 }, nsizes = 3;
	static const char *const workloads[] = { "untar", "meta", "pg" };
	struct result res[32];
	size_t nres = 0;
	char path[4096];
	FILE *f;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--out") && i + 1 < argc) {
			out = argv[++i];
		} else if (!strcmp(argv[i], "--workloads") && i + 1 < argc) {
			only = argv[++i];
		} else if (!strcmp(argv[i], "--quick")) {
			sizes[0] = 10000;
			sizes[1] = 100000;
			nsizes = 2;
		} else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
			char *s = argv[++i], *end;

			nsizes = 0;
			sizes_given = true;
			while (*s && nsizes < 8) {
				sizes[nsizes++] = strtoul(s, &end, 10);
				s = *end == ',' ? end + 1 : end;
				if (end == s && *s)
					break;
			}
		} else {
			fprintf(stderr, "usage: engine_bench [--out DIR] [--sizes N,N,...] "
					"[--workloads untar,meta,pg] [--quick]\n");
			return 64;
		}
	}
	for (size_t w = 0; w < 3; w++) {
		if (only && !strstr(only, workloads[w]))
			continue;
		for (size_t i = 0; i < nsizes; i++) {
			int err;

			/* Chained groups all touching one directory inode
			 * cost O(groups x patches of that block) to flush
			 * (each round writes it again, rolling back the later
			 * groups' changes): keep that to sizes that finish. */
			if (!strcmp(workloads[w], "pg") && sizes[i] > PG_MAX && !sizes_given)
				continue;
			err = run(workloads[w], sizes[i], &res[nres]);

			if (err) {
				fprintf(stderr, "engine_bench: %s %zu: %s\n", workloads[w], sizes[i],
					strerror(-err));
				return 1;
			}
			fprintf(stderr, "engine_bench: %s %zu changes: build %.3f s, flush %.3f s\n",
				workloads[w], res[nres].calls, res[nres].create_s, res[nres].flush_s);
			nres++;
		}
	}
	snprintf(path, sizeof(path), "%s/engine.md", out);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "engine_bench: cannot write '%s': %s\n", path, strerror(errno));
		return 1;
	}
	write_md(f, res, nres);
	fclose(f);
	snprintf(path, sizeof(path), "%s/engine.json", out);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "engine_bench: cannot write '%s': %s\n", path, strerror(errno));
		return 1;
	}
	write_json(f, res, nres);
	fclose(f);
	return 0;
}
