/* The write-back block cache (design.md §3): the block table, the LRU and
 * ready lists, eviction, and the cache's life cycle.  Patches live in
 * patch.c, discarding a dead block's patches in discard.c, and rounds and
 * the flusher in round.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "cache_int.h"

/* The cache whose lock this thread holds, and how many times the thread
 * has taken it again on top of that.  Scope callbacks run under the lock
 * and call back into patch_add_depend() and friends, which then pass
 * through cache_lock() without taking it.  Such a re-entered caller must
 * never let the lock go (for I/O or a condition wait): the outer frame
 * relies on what it saw under it.  cache_reentered() tells. */
static __thread struct cache *tls_held;
static __thread unsigned tls_depth;

void cache_lock(struct cache *c, bool *taken)
{
	if (tls_held == c) {
		tls_depth++;
		*taken = false;
		return;
	}
	pthread_mutex_lock(&c->lock);
	tls_held = c;
	*taken = true;
}

void cache_unlock(struct cache *c, bool taken)
{
	if (!taken) {
		tls_depth--;
		return;
	}
	tls_held = NULL;
	pthread_mutex_unlock(&c->lock);
}

void cache_set_txn(struct cache *c, struct cache_txn *t)
{
	bool taken;

	cache_lock(c, &taken);
	c->txn = t;
	cache_unlock(c, taken);
}

bool cache_reentered(const struct cache *c)
{
	return tls_held == c && tls_depth > 0;
}

/* Drop the lock around I/O.  Only the outermost holder comes here:
 * round_locked() and get_block() refuse a re-entered caller first. */
void io_unlock(struct cache *c)
{
	tls_held = NULL;
	pthread_mutex_unlock(&c->lock);
}

void io_lock(struct cache *c)
{
	pthread_mutex_lock(&c->lock);
	tls_held = c;
}

void stats_engine(struct cache *c, int64_t delta)
{
	c->st.engine_bytes += (uint64_t)delta;
	if (c->st.engine_bytes > c->st.peak_engine_bytes)
		c->st.peak_engine_bytes = c->st.engine_bytes;
}

/* ---- lists ------------------------------------------------------------- */

void lru_add(struct cache *c, struct cblock *b)
{
	if (b->flags & BF_LRU)
		return;
	b->flags |= BF_LRU;
	if (b->flags & BF_LOG) {
		/* at the head: the next block to be reused or evicted */
		b->lprev = NULL;
		b->lnext = c->lru_head;
		if (c->lru_head)
			c->lru_head->lprev = b;
		else
			c->lru_tail = b;
		c->lru_head = b;
		return;
	}
	b->lnext = NULL;
	b->lprev = c->lru_tail;
	if (c->lru_tail)
		c->lru_tail->lnext = b;
	else
		c->lru_head = b;
	c->lru_tail = b;
}

static void lru_del(struct cache *c, struct cblock *b)
{
	if (!(b->flags & BF_LRU))
		return;
	b->flags &= ~BF_LRU;
	if (b->lprev)
		b->lprev->lnext = b->lnext;
	else
		c->lru_head = b->lnext;
	if (b->lnext)
		b->lnext->lprev = b->lprev;
	else
		c->lru_tail = b->lprev;
	b->lprev = b->lnext = NULL;
}

bool idle_clean(const struct cblock *b)
{
	return b->refs == 0 && b->npatches == 0 &&
	       !(b->flags & (BF_INFLIGHT | BF_READING | BF_BADREAD));
}

static void kick_flusher(struct cache *c)
{
	if (c->flusher_running && !c->flusher_kick) {
		c->flusher_kick = true;
		pthread_cond_signal(&c->flush_cond);
	}
}

/* A block has gathered CACHE_CROWD_PATCHES patches not yet on disk: a
 * chain of patchgroups, or a loop of replaces, over one directory block.
 * Each new change of the block looks at those of its patches it overlaps,
 * so the work per change grew with the time since the last flush: 4000
 * replaces under pgrun --fsync=order took 6.5 s, 100 took 0.06 s.  The
 * flusher writes what it can now, as at the interval (1.4 s for the
 * 4000), and the writer goes on meanwhile: a round does its I/O unlocked.
 * Not under a journal, whose transaction it would cut short. */
void block_crowded(struct cache *c)
{
	if (c->txn || !c->flusher_running || c->flusher_full)
		return;
	c->flusher_full = true;
	c->flusher_kick = true;
	pthread_cond_signal(&c->flush_cond);
}

void cache_flush_soon(struct cache *c)
{
	bool taken;

	cache_lock(c, &taken);
	if (c->flusher_running) {
		c->flusher_full = true;
		c->flusher_kick = true;
		pthread_cond_signal(&c->flush_cond);
	}
	cache_unlock(c, taken);
}

static void ready_append(struct cache *c, struct cblock *b)
{
	b->rnext = NULL;
	b->rprev = c->ready_tail;
	if (c->ready_tail)
		c->ready_tail->rnext = b;
	else
		c->ready_head = b;
	c->ready_tail = b;
}

static void ready_unlink(struct cache *c, struct cblock *b)
{
	if (b->rprev)
		b->rprev->rnext = b->rnext;
	else
		c->ready_head = b->rnext;
	if (b->rnext)
		b->rnext->rprev = b->rprev;
	else
		c->ready_tail = b->rprev;
	b->rprev = b->rnext = NULL;
}

/* A block is on the ready list when it has a patch that could be written
 * now and it is not already being written. */
void ready_update(struct cache *c, struct cblock *b)
{
	bool want = b->nroots > 0 && !(b->flags & BF_INFLIGHT);

	if (want && !(b->flags & BF_READY)) {
		b->flags |= BF_READY;
		ready_append(c, b);
		c->nready++;
		/* Under memory pressure, enough writable blocks call for a
		 * round.  Not from within a round: one that succeeded is
		 * followed by the next as long as the pressure lasts, and
		 * one that failed, putting its blocks back here, must not
		 * start another at once (the flusher backs off). */
		if (!c->round_busy && flush_pressed(c))
			kick_flusher(c);
	} else if (!want && (b->flags & BF_READY)) {
		b->flags &= ~BF_READY;
		ready_unlink(c, b);
		c->nready--;
	}
}

/* Move b, on the ready list, to its tail. */
void ready_requeue(struct cache *c, struct cblock *b)
{
	ready_unlink(c, b);
	ready_append(c, b);
}

void block_became_dirty(struct cache *c, struct cblock *b)
{
	uint64_t bytes;
	struct timespec ts;

	lru_del(c, b);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	b->dirty_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	b->dnext = NULL;
	b->dprev = c->dirty_tail;
	if (c->dirty_tail)
		c->dirty_tail->dnext = b;
	else
		c->dirty_head = b;
	c->dirty_tail = b;
	c->ndirty++;
	bytes = (uint64_t)c->ndirty * c->bs;
	if (bytes > c->st.peak_dirty_bytes)
		c->st.peak_dirty_bytes = bytes;
	if (flush_pressed(c))
		kick_flusher(c);
}

void block_became_clean(struct cache *c, struct cblock *b)
{
	if (b->dprev)
		b->dprev->dnext = b->dnext;
	else
		c->dirty_head = b->dnext;
	if (b->dnext)
		b->dnext->dprev = b->dprev;
	else
		c->dirty_tail = b->dprev;
	b->dprev = b->dnext = NULL;
	c->ndirty--;
	if (idle_clean(b))
		lru_add(c, b);
}

/* ---- the block table --------------------------------------------------- */

static size_t hash_of(const struct cache *c, uint64_t blkno)
{
	return (size_t)((blkno * 0x9e3779b97f4a7c15ull) >> 17) & c->hmask;
}

struct cblock *cache_find_locked(struct cache *c, uint64_t blkno)
{
	struct cblock *b;

	for (b = c->hash[hash_of(c, blkno)]; b; b = b->hnext)
		if (b->blkno == blkno)
			return b;
	return NULL;
}

static void hash_grow(struct cache *c)
{
	size_t n = (c->hmask + 1) * 2, i;
	struct cblock **h = calloc(n, sizeof(*h)), **old = c->hash;
	size_t oldn = c->hmask + 1;

	if (!h)
		return; /* longer chains, still correct */
	c->hash = h;
	c->hmask = n - 1;
	for (i = 0; i < oldn; i++) {
		struct cblock *b = old[i], *next;

		for (; b; b = next) {
			size_t k = hash_of(c, b->blkno);

			next = b->hnext;
			b->hnext = h[k];
			h[k] = b;
		}
	}
	free(old);
}

static void hash_insert(struct cache *c, struct cblock *b)
{
	size_t k;

	if (c->nblocks + 1 > (c->hmask + 1))
		hash_grow(c);
	k = hash_of(c, b->blkno);
	b->hnext = c->hash[k];
	c->hash[k] = b;
	c->nblocks++;
}

static void hash_remove(struct cache *c, struct cblock *b)
{
	struct cblock **pp = &c->hash[hash_of(c, b->blkno)];

	while (*pp && *pp != b)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = b->hnext;
		c->nblocks--;
	}
	b->hnext = NULL;
}

/* Blocks and their buffers come in chunks: one aligned allocation per
 * chunk wastes nothing on alignment and avoids a malloc per block; freed
 * blocks go to a free list and are reused.  A chunk's buffers are 2 MiB
 * in one mapping aligned to 2 MiB, offered to the kernel for a huge page:
 * the first touch of a new buffer is then one fault per chunk instead of
 * one per 4 KiB page (on the bench machine, a virtual machine, 30-50 us
 * a fault: filling the cache cost more than the file system's work).
 * Without huge pages it is an ordinary mapping.  A round's copies come
 * from such a mapping too (round.c). */

struct bchunk {
	struct bchunk *next;
	uint8_t *data;
	size_t n, len; /* blocks; bytes mapped at data */
	struct cblock blocks[];
};

uint8_t *chunk_map(size_t len)
{
	size_t all = len + CHUNK_BYTES, head;
	uint8_t *m = mmap(NULL, all, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t a;

	if (m == MAP_FAILED)
		return NULL;
	a = ((uintptr_t)m + CHUNK_BYTES - 1) & ~(uintptr_t)(CHUNK_BYTES - 1);
	head = a - (uintptr_t)m;
	if (head)
		munmap(m, head);
	if (all - head > len)
		munmap((uint8_t *)a + len, all - head - len);
#ifdef MADV_HUGEPAGE
	madvise((void *)a, len, MADV_HUGEPAGE); /* a hint: may fail */
#endif
	return (uint8_t *)a;
}

static struct cblock *block_alloc(struct cache *c, uint64_t blkno)
{
	struct cblock *b;
	uint8_t *data;

	/* A log block already written is taken back before a buffer from
	 * the free list: its memory is in use, where a chunk's buffers not
	 * yet used cost a page fault on first touch. */
	if (c->lru_head && (c->lru_head->flags & BF_LOG))
		block_drop(c, c->lru_head);
	if (!c->bfree) {
		size_t len = c->bs > CHUNK_BYTES ? c->bs : CHUNK_BYTES, n = len / c->bs, i;
		struct bchunk *ch = calloc(1, sizeof(*ch) + n * sizeof(ch->blocks[0]));

		if (!ch)
			return NULL;
		ch->data = chunk_map(len);
		if (!ch->data) {
			free(ch);
			return NULL;
		}
		ch->n = n;
		ch->len = len;
		ch->next = c->bchunks;
		c->bchunks = ch;
		/* (pushed last first: blocks are handed out in address order) */
		for (i = n; i-- > 0;) {
			ch->blocks[i].data = ch->data + i * c->bs;
			ch->blocks[i].hnext = c->bfree;
			c->bfree = &ch->blocks[i];
		}
	}
	b = c->bfree;
	c->bfree = b->hnext;
	data = b->data;
	memset(b, 0, sizeof(*b));
	b->data = data;
	b->blkno = blkno;
	return b;
}

static void block_free(struct cache *c, struct cblock *b)
{
	ovix_free(c, b); /* (a clean block has none left) */
	b->hnext = c->bfree;
	c->bfree = b;
}

void block_drop(struct cache *c, struct cblock *b)
{
	lru_del(c, b);
	hash_remove(c, b);
	block_free(c, b);
}

/* Evict clean, idle blocks, least recently used first, until the cache is
 * within max_blocks.  Dirty, in-flight and referenced blocks stay. */
void evict(struct cache *c)
{
	while (c->nblocks > c->opts.max_blocks && c->lru_head)
		block_drop(c, c->lru_head);
}

/* ---- blocks ------------------------------------------------------------ */

/* Writers wait while too much is dirty.  With a flusher, let it work; with
 * none, write in the caller.  When rounds fail (the device refuses writes:
 * a full host file system, a dead disk), nothing can be cleaned: rather
 * than wait for what may never come, or let the dirty set grow without
 * bound, the caller gets -EIO.  What is dirty stays dirty and later rounds
 * write it; once one succeeds, writers go on. */
static int dirty_wait(struct cache *c)
{
	while (c->ndirty >= c->opts.dirty_limit) {
		if (!c->ready_head && !c->round_busy) {
			if (c->txn && c->txn->pressure)
				c->txn->pressure(c->txn);
			return 0;
		}
		if (c->flusher_running) {
			struct timespec ts;

			/* (a round in flight may be the retry: wait for it) */
			if (c->last_round_err && !c->round_busy)
				return -EIO;
			kick_flusher(c);
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += 50 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			c->st_dirty_waits++;
			pthread_cond_timedwait(&c->round_cond, &c->lock, &ts);
		} else {
			uint64_t tried = c->st.rounds;

			if (round_locked(c, NULL, UINT64_MAX))
				/* a round that failed writing, or none */
				return c->st.rounds != tried ? -EIO : 0;
		}
	}
	return 0;
}

/* How get_block() treats a block it does not hold: read it, or zero it
 * (fresh), a log block being a fresh one reused first once written. */
enum get_mode { GET_READ, GET_FRESH, GET_LOG };

static int get_block(struct cache *c, uint64_t blkno, enum get_mode mode, struct cblock **out)
{
	bool fresh = mode != GET_READ;
	struct cblock *b;
	bool taken;
	int err = 0;

	if (!c || !out || blkno >= c->dev->nblocks)
		return -EINVAL;
	cache_lock(c, &taken);
	if (!taken) {
		/* A scope callback may not read blocks: see cache_lock(). */
		err = -EDEADLK;
		goto out;
	}
	err = dirty_wait(c);
	if (err)
		goto out;
again:
	b = cache_find_locked(c, blkno);
	if (b) {
		b->refs++;
		lru_del(c, b);
		if (fresh)
			b->kind = CBK_NONE; /* a new use of the block */
		/* (any other use makes the block worth keeping) */
		if (mode == GET_LOG)
			b->flags |= BF_LOG;
		else
			b->flags &= ~BF_LOG;
		if (b->flags & BF_READING) {
			while (b->flags & BF_READING)
				pthread_cond_wait(&c->io_cond, &c->lock);
			if (b->flags & BF_BADREAD) {
				/* The reader failed and unhashed it; try
				 * again ourselves. */
				if (--b->refs == 0)
					block_free(c, b);
				goto again;
			}
		}
		*out = b;
		goto out;
	}
	b = block_alloc(c, blkno);
	if (!b) {
		err = -ENOMEM;
		goto out;
	}
	b->refs = 1;
	hash_insert(c, b);
	if (mode == GET_LOG)
		b->flags |= BF_LOG;
	if (fresh) {
		memset(b->data, 0, c->bs);
	} else {
		b->flags |= BF_READING;
		io_unlock(c);
		err = bdev_read(c->dev, blkno, 1, b->data);
		io_lock(c);
		b->flags &= ~BF_READING;
		pthread_cond_broadcast(&c->io_cond);
		if (err) {
			b->flags |= BF_BADREAD;
			hash_remove(c, b);
			if (--b->refs == 0)
				block_free(c, b);
			goto out;
		}
	}
	evict(c);
	*out = b;
out:
	cache_unlock(c, taken);
	return err;
}

int cache_get(struct cache *c, uint64_t blkno, struct cblock **out)
{
	return get_block(c, blkno, GET_READ, out);
}

int cache_get_new(struct cache *c, uint64_t blkno, struct cblock **out)
{
	return get_block(c, blkno, GET_FRESH, out);
}

int cache_get_log(struct cache *c, uint64_t blkno, struct cblock **out)
{
	return get_block(c, blkno, GET_LOG, out);
}

void cache_put(struct cache *c, struct cblock *b)
{
	bool taken;

	if (!b)
		return;
	cache_lock(c, &taken);
	if (--b->refs == 0 && idle_clean(b)) {
		lru_add(c, b);
		evict(c);
	}
	cache_unlock(c, taken);
}

const uint8_t *cblock_data(const struct cblock *b)
{
	return b->data;
}

uint64_t cblock_number(const struct cblock *b)
{
	return b->blkno;
}

void cblock_set_kind(struct cblock *b, unsigned kind)
{
	b->kind = (uint16_t)kind;
}

/* ---- life cycle -------------------------------------------------------- */

int cache_create(struct bdev *dev, const struct cache_opts *opts, struct cache **out)
{
	struct cache *c;
	pthread_condattr_t ca;

	/* patches keep 16-bit offsets and lengths (cache_int.h) */
	if (!dev || !out || dev->block_size > 65536 || dev->block_size < 512)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	{
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		c->born_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
	if (opts)
		c->opts = *opts;
	if (c->opts.max_blocks == 0)
		c->opts.max_blocks = 65536;
	if (c->opts.dirty_limit == 0)
		c->opts.dirty_limit = c->opts.max_blocks / 2;
	if (c->opts.dirty_limit == 0)
		c->opts.dirty_limit = 1;
	if (c->opts.flush_interval_ms == 0)
		c->opts.flush_interval_ms = 5000;
	if (c->opts.round_max_blocks == 0)
		c->opts.round_max_blocks = 4096;
	if (c->opts.consistency > CONSISTENCY_JOURNAL_DATA) {
		free(c);
		return -EINVAL;
	}
	c->dev = dev;
	c->bs = dev->block_size;
	c->ovix_min = OVIX_MIN;
	c->hmask = 1023;
	c->hash = calloc(c->hmask + 1, sizeof(*c->hash));
	if (!c->hash) {
		free(c);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->io_cond, &ca);
	pthread_cond_init(&c->round_cond, &ca);
	pthread_cond_init(&c->flush_cond, &ca);
	pthread_condattr_destroy(&ca);
	*out = c;
	return 0;
}

void cache_destroy(struct cache *c)
{
	size_t i;

	if (!c)
		return;
	cache_stop_flusher(c);
	while (c->bchunks) {
		struct bchunk *ch = c->bchunks;

		for (i = 0; i < ch->n; i++)
			ovix_free(c, &ch->blocks[i]);
		c->bchunks = ch->next;
		munmap(ch->data, ch->len);
		free(ch);
	}
	free(c->hash);
	free(c->dretry);
	patch_free_all(c);
	round_scratch_free(c);
	free(c->r_patches);
	free(c->r_roll);
	free(c->r_settle);
	free(c->r_slack);
	free(c->r_slackv);
	free(c->work);
	free(c->unholds);
	pthread_cond_destroy(&c->io_cond);
	pthread_cond_destroy(&c->round_cond);
	pthread_cond_destroy(&c->flush_cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

struct bdev *cache_bdev(struct cache *c)
{
	return c->dev;
}

uint32_t cache_block_size(const struct cache *c)
{
	return c->bs;
}

void cache_get_stats(struct cache *c, struct cache_stats *st)
{
	bool taken;

	cache_lock(c, &taken);
	*st = c->st;
	st->blocks_cached = c->nblocks;
	st->blocks_dirty = c->ndirty;
	st->blocks_inflight = c->ninflight;
	st->blocks_ready = c->nready;
	st->dirty_bytes = (uint64_t)c->ndirty * c->bs;
	st->dirty_waits = c->st_dirty_waits;
	cache_unlock(c, taken);
}

uint64_t cache_commits(struct cache *c)
{
	bool taken;
	uint64_t n;

	cache_lock(c, &taken);
	n = c->st.barriers;
	cache_unlock(c, taken);
	return n;
}
