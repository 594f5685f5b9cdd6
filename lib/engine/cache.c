/* The write-back block cache: blocks, eviction, rounds and the flusher
 * (design.md §3).  Patch bookkeeping lives in patch.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cache_int.h"
#include "util/grow.h"

#define DATA_ALIGN 4096
#define MAX_DEFERS 2

/* The cache whose lock this thread holds.  Scope callbacks run under the
 * lock and call back into patch_add_depend() and friends, which must then
 * not take it again. */
static __thread struct cache *tls_held;

void cache_lock(struct cache *c, bool *taken)
{
	if (tls_held == c) {
		*taken = false;
		return;
	}
	pthread_mutex_lock(&c->lock);
	tls_held = c;
	*taken = true;
}

void cache_unlock(struct cache *c, bool taken)
{
	if (!taken)
		return;
	tls_held = NULL;
	pthread_mutex_unlock(&c->lock);
}

/* Drop the lock around I/O, whoever took it. */
static void io_unlock(struct cache *c)
{
	tls_held = NULL;
	pthread_mutex_unlock(&c->lock);
}

static void io_lock(struct cache *c)
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

static void lru_add(struct cache *c, struct cblock *b)
{
	if (b->flags & BF_LRU)
		return;
	b->flags |= BF_LRU;
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

static bool idle_clean(const struct cblock *b)
{
	return b->refs == 0 && b->npatches == 0 &&
	       !(b->flags & (BF_INFLIGHT | BF_READING | BF_BADREAD));
}

/* A block is on the ready list when it has a patch that could be written
 * now and it is not already being written. */
void ready_update(struct cache *c, struct cblock *b)
{
	bool want = b->nroots > 0 && !(b->flags & BF_INFLIGHT);

	if (want && !(b->flags & BF_READY)) {
		b->flags |= BF_READY;
		b->rnext = NULL;
		b->rprev = c->ready_tail;
		if (c->ready_tail)
			c->ready_tail->rnext = b;
		else
			c->ready_head = b;
		c->ready_tail = b;
		c->nready++;
	} else if (!want && (b->flags & BF_READY)) {
		b->flags &= ~BF_READY;
		if (b->rprev)
			b->rprev->rnext = b->rnext;
		else
			c->ready_head = b->rnext;
		if (b->rnext)
			b->rnext->rprev = b->rprev;
		else
			c->ready_tail = b->rprev;
		b->rprev = b->rnext = NULL;
		c->nready--;
	}
}

static void kick_flusher(struct cache *c)
{
	if (c->flusher_running && !c->flusher_kick) {
		c->flusher_kick = true;
		pthread_cond_signal(&c->flush_cond);
	}
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
	if (c->ndirty > c->opts.dirty_limit / 2)
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
 * BLOCK_CHUNK buffers wastes nothing on alignment and avoids a malloc per
 * block; freed blocks go to a free list and are reused. */
#define BLOCK_CHUNK 64

struct bchunk {
	struct bchunk *next;
	uint8_t *data;
	struct cblock blocks[BLOCK_CHUNK];
};

static struct cblock *block_alloc(struct cache *c, uint64_t blkno)
{
	struct cblock *b;
	uint8_t *data;

	if (!c->bfree) {
		struct bchunk *ch = calloc(1, sizeof(*ch));
		void *m;
		size_t i;

		if (!ch)
			return NULL;
		if (posix_memalign(&m, c->bs < DATA_ALIGN ? c->bs : DATA_ALIGN,
				   (size_t)c->bs * BLOCK_CHUNK)) {
			free(ch);
			return NULL;
		}
		ch->data = m;
		ch->next = c->bchunks;
		c->bchunks = ch;
		for (i = 0; i < BLOCK_CHUNK; i++) {
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
static void evict(struct cache *c)
{
	while (c->nblocks > c->opts.max_blocks && c->lru_head)
		block_drop(c, c->lru_head);
}

/* ---- rounds ------------------------------------------------------------ */

static void rollback(uint8_t *copy, const struct patch *p)
{
	if (p->flags & (PF_NRB | PF_HARD))
		return; /* cannot happen: nothing of its block is written without it */
	if (p->type == PT_BYTE) {
		memcpy(copy + p->off, p->undo, patch_len(p));
	} else {
		uint8_t *w = copy + p->off;

		w[0] ^= (uint8_t)p->mask;
		w[1] ^= (uint8_t)(p->mask >> 8);
		w[2] ^= (uint8_t)(p->mask >> 16);
		w[3] ^= (uint8_t)(p->mask >> 24);
	}
}

static int round_scratch(struct cache *c)
{
	size_t n = c->opts.round_max_blocks;

	if (c->r_blocks)
		return 0;
	c->r_blocks = calloc(n, sizeof(*c->r_blocks));
	c->r_writes = calloc(n, sizeof(*c->r_writes));
	c->r_copies = calloc(n, sizeof(*c->r_copies));
	c->r_pstart = calloc(n + 1, sizeof(*c->r_pstart));
	if (!c->r_blocks || !c->r_writes || !c->r_copies || !c->r_pstart) {
		free(c->r_blocks);
		free(c->r_writes);
		free(c->r_copies);
		free(c->r_pstart);
		c->r_blocks = NULL;
		c->r_writes = NULL;
		c->r_copies = NULL;
		c->r_pstart = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int grow_vec(struct patch ***v, size_t *cap, size_t need)
{
	return GROW(v, cap, need, 256) ? -ENOMEM : 0;
}

/* Choose the patches of b to write now: those with no unwritten before
 * elsewhere whose same-block befores are all chosen too, and (for a
 * targeted round) older than limit; hard patches are in every write.  The
 * list is in sequence order and same-block edges point backwards, so one
 * pass decides, marking the same-block afters of every patch left out.
 * Those left out are collected in r_roll, oldest first.  Returns whether a
 * patch older than limit was chosen. */
static bool choose_patches(struct cache *c, struct cblock *b, uint64_t limit)
{
	struct patch *p;
	bool useful = false;
	uint32_t i;

	c->r_nroll = 0;
	c->r_pinned = false;
	for (p = b->phead; p; p = p->bnext) {
		/* (a patch of a failed round may be on disk already: keep
		 * it there rather than roll it back) */
		bool in = p->npend_ext == 0 && !(p->flags & PF_BLOCKED) &&
			  (p->seq < limit || (p->flags & (PF_HARD | PF_WRITTEN)));

		p->flags &= ~PF_BLOCKED;
		if (in) {
			p->flags |= PF_INFLIGHT;
			c->r_patches[c->r_np++] = p;
			useful |= p->seq < limit;
			continue;
		}
		c->r_roll[c->r_nroll++] = p;
		if (p->flags & PF_PINNED)
			c->r_pinned = true;
		for (i = 0; i < p->nafters; i++) {
			struct patch *a = patch_after(p, i);

			if (a->block == b)
				a->flags |= PF_BLOCKED;
		}
	}
	return useful;
}

/* One round.  With limit < UINT64_MAX, a targeted round: only patches
 * older than limit (everything a patch with that sequence number can
 * depend on) are wanted, and blocks with none of those are left alone. */
static int round_locked(struct cache *c, size_t *nwritten, uint64_t limit)
{
	struct cblock *next;
	size_t n = 0, nrolled = 0, ndeferred = 0, i;
	bool defer = true, useful;
	int err, werr;

	while (c->round_busy)
		pthread_cond_wait(&c->round_cond, &c->lock);
	err = round_scratch(c);
	if (err)
		return err;
	c->r_np = 0;
again:
	for (next = c->ready_head; next && n < c->opts.round_max_blocks;) {
		struct cblock *b = next;
		size_t start = c->r_np;
		uint8_t *copy;

		next = b->rnext;

		if (grow_vec(&c->r_patches, &c->r_cap, c->r_np + b->npatches) ||
		    grow_vec(&c->r_roll, &c->r_rollcap, b->npatches))
			break;
		if (!c->r_copies[n]) {
			void *m;

			if (posix_memalign(&m, c->bs < DATA_ALIGN ? c->bs : DATA_ALIGN, c->bs))
				break;
			c->r_copies[n] = m;
			c->r_ncopies++;
		}
		useful = choose_patches(c, b, limit);
		/* A block that needs a rollback now may well not after this
		 * round: put it off (twice at most) while other blocks have
		 * work, to save the second write (design.md §7: rollback
		 * writes under 2%).  Not if what it rolls back may wait for a
		 * held patch: that may take any time. */
		if (useful && c->r_nroll && !c->r_pinned && defer && b->defers < MAX_DEFERS) {
			b->defers++;
			ndeferred++;
			useful = false;
		}
		if (!useful) {
			/* nothing wanted here: undo the choice */
			for (i = start; i < c->r_np; i++)
				c->r_patches[i]->flags &= ~PF_INFLIGHT;
			c->r_np = start;
			continue;
		}
		b->defers = 0;
		b->flags |= BF_INFLIGHT;
		ready_update(c, b);
		copy = c->r_copies[n];
		memcpy(copy, b->data, c->bs);
		/* Newest first, so each undo sees the bytes it was taken
		 * from. */
		for (i = c->r_nroll; i-- > 0;)
			rollback(copy, c->r_roll[i]);
		nrolled += c->r_nroll > 0;
		c->r_blocks[n] = b;
		c->r_pstart[n] = start;
		c->r_writes[n].blkno = b->blkno;
		c->r_writes[n].data = copy;
		n++;
	}
	if (n == 0 && ndeferred) {
		/* only blocks needing rollbacks: write them after all */
		defer = false;
		ndeferred = 0;
		goto again;
	}
	c->r_pstart[n] = c->r_np;
	if (n == 0) {
		if (nwritten)
			*nwritten = 0;
		return c->ready_head && limit == UINT64_MAX ? -ENOMEM : 0;
	}

	c->round_busy = true;
	c->ninflight = n;
	io_unlock(c);
	werr = bdev_write(c->dev, c->r_writes, n);
	err = werr ? werr : bdev_barrier(c->dev);
	io_lock(c);

	c->st.rounds++;
	if (!werr) {
		c->st.block_writes += n;
		c->st.rollback_writes += nrolled;
	}
	if (err) {
		/* Nothing of this round is durable: it all stays dirty and
		 * a later round writes it again. */
		if (werr)
			c->st.write_errors++;
		else
			c->st.barrier_errors++;
		for (i = 0; i < c->r_np; i++) {
			/* even a failed write may have reached the disk */
			c->r_patches[i]->flags &= ~PF_INFLIGHT;
			c->r_patches[i]->flags |= PF_WRITTEN;
		}
	} else {
		c->st.barriers++;
		for (i = 0; i < c->r_np; i++)
			patch_commit(c, c->r_patches[i]);
	}
	for (i = 0; i < n; i++) {
		struct cblock *b = c->r_blocks[i];

		b->flags &= ~BF_INFLIGHT;
		if (!err)
			block_prune_committed(c, b);
		ready_update(c, b);
		if (idle_clean(b))
			lru_add(c, b);
	}
	c->r_np = 0;
	c->ninflight = 0;
	c->round_busy = false;
	c->last_round_err = err;
	pthread_cond_broadcast(&c->round_cond);
	evict(c);
	if (!err && nwritten)
		*nwritten = n;
	return err;
}

int cache_flush_round(struct cache *c, size_t *nwritten)
{
	bool taken;
	int err;

	cache_lock(c, &taken);
	err = round_locked(c, nwritten, UINT64_MAX);
	cache_unlock(c, taken);
	return err;
}

int cache_sync(struct cache *c)
{
	bool taken;
	int err = 0;

	cache_lock(c, &taken);
	while (c->ndirty > 0) {
		if (!c->ready_head) {
			if (c->round_busy) {
				pthread_cond_wait(&c->round_cond, &c->lock);
				continue;
			}
			/* Dirty but nothing writable: everything left
			 * waits for a held empty patch. */
			err = -EAGAIN;
			break;
		}
		err = round_locked(c, NULL, UINT64_MAX);
		if (err)
			break;
	}
	cache_unlock(c, taken);
	return err;
}

int cache_sync_patch(struct cache *c, struct patch *p)
{
	bool taken;
	size_t nw;
	int err = 0;

	if (!p)
		return 0;
	cache_lock(c, &taken);
	while (!(p->flags & PF_COMMITTED)) {
		/* A held patch cannot commit, but once its befores have,
		 * everything it stands for is durable. */
		if ((p->flags & PF_HELD) && p->npend_ext == 0 && p->npend_blk == 0)
			break;
		if (!c->ready_head) {
			if (c->round_busy) {
				pthread_cond_wait(&c->round_cond, &c->lock);
				continue;
			}
			err = -EAGAIN;
			break;
		}
		/* Everything p depends on is older than p: write only that
		 * (not a global sync).  Should that find nothing, a full
		 * round makes sure of progress. */
		err = round_locked(c, &nw, p->seq + 1);
		if (!err && nw == 0 && !(p->flags & PF_COMMITTED))
			err = round_locked(c, NULL, UINT64_MAX);
		if (err)
			break;
	}
	cache_unlock(c, taken);
	return err;
}

/* ---- blocks ------------------------------------------------------------ */

/* Writers wait while too much is dirty.  With a flusher, let it work; with
 * none (or when it is stuck behind a failing device) never wait for
 * something that cannot happen: write in the caller, or give up waiting. */
static void dirty_wait(struct cache *c)
{
	while (c->ndirty >= c->opts.dirty_limit && !c->last_round_err) {
		if (!c->ready_head && !c->round_busy)
			return;
		if (c->flusher_running) {
			struct timespec ts;

			kick_flusher(c);
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += 50 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			c->st_dirty_waits++;
			pthread_cond_timedwait(&c->round_cond, &c->lock, &ts);
		} else if (round_locked(c, NULL, UINT64_MAX)) {
			return;
		}
	}
}

static int get_block(struct cache *c, uint64_t blkno, bool fresh, struct cblock **out)
{
	struct cblock *b;
	bool taken;
	int err = 0;

	if (!c || !out || blkno >= c->dev->nblocks)
		return -EINVAL;
	cache_lock(c, &taken);
	dirty_wait(c);
again:
	b = cache_find_locked(c, blkno);
	if (b) {
		b->refs++;
		lru_del(c, b);
		if (fresh)
			b->kind = CBK_NONE; /* a new use of the block */
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
	return get_block(c, blkno, false, out);
}

int cache_get_new(struct cache *c, uint64_t blkno, struct cblock **out)
{
	return get_block(c, blkno, true, out);
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

/* ---- the flusher ------------------------------------------------------- */

static void *flusher_main(void *arg)
{
	struct cache *c = arg;

	io_lock(c);
	while (!c->flusher_stop) {
		if (!c->flusher_kick) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += c->opts.flush_interval_ms / 1000;
			ts.tv_nsec += (long)(c->opts.flush_interval_ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&c->flush_cond, &c->lock, &ts);
		}
		c->flusher_kick = false;
		/* Write everything writable, including what becomes
		 * writable as rounds commit.  On an error, wait for the
		 * next interval before trying again. */
		while (!c->flusher_stop && c->ready_head)
			if (round_locked(c, NULL, UINT64_MAX))
				break;
	}
	io_unlock(c);
	return NULL;
}

int cache_start_flusher(struct cache *c)
{
	bool taken;
	int err = 0;

	cache_lock(c, &taken);
	if (c->flusher_running)
		goto out;
	c->flusher_stop = false;
	c->flusher_kick = false;
	err = -pthread_create(&c->flusher, NULL, flusher_main, c);
	if (!err)
		c->flusher_running = true;
out:
	cache_unlock(c, taken);
	return err;
}

void cache_stop_flusher(struct cache *c)
{
	bool taken;
	pthread_t t;

	cache_lock(c, &taken);
	if (!c->flusher_running) {
		cache_unlock(c, taken);
		return;
	}
	c->flusher_stop = true;
	pthread_cond_signal(&c->flush_cond);
	t = c->flusher;
	cache_unlock(c, taken);
	pthread_join(t, NULL);
	cache_lock(c, &taken);
	c->flusher_running = false;
	c->flusher_stop = false;
	cache_unlock(c, taken);
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
	if (c->opts.consistency != CONSISTENCY_SOFTUPDATES &&
	    c->opts.consistency != CONSISTENCY_NONE) {
		free(c);
		return -EINVAL;
	}
	c->dev = dev;
	c->bs = dev->block_size;
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

		c->bchunks = ch->next;
		free(ch->data);
		free(ch);
	}
	free(c->hash);
	free(c->dretry);
	patch_free_all(c);
	if (c->r_copies)
		for (i = 0; i < c->opts.round_max_blocks; i++)
			free(c->r_copies[i]);
	free(c->r_copies);
	free(c->r_blocks);
	free(c->r_writes);
	free(c->r_pstart);
	free(c->r_patches);
	free(c->r_roll);
	free(c->work);
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
