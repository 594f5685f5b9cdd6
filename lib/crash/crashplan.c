/* Numbered crash states of a recorder log, and a cursor that rebuilds them
 * into an image file by writing only what differs; see crashplan.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bdev/bdev.h"
#include "crashplan.h"
#include "bdev/reclog.h"
#include "util/grow.h"
#include "util/splitmix.h"

#define NO_MASK	      SIZE_MAX
#define RESYNC_BLOCKS 256

struct round {
	size_t first; /* index of its first write in plan->w */
	size_t nw;
};

struct mstate {
	size_t round;
	size_t mask; /* offset into plan->masks, or NO_MASK for a boundary */
	size_t napplied;
};

struct crash_plan {
	struct bdev *rec;
	uint32_t bs;
	uint64_t nblocks;
	struct crash_plan_opts o;
	const struct rec_event **w; /* every write, in log order */
	size_t nw, nbarriers;
	struct round *rounds;
	size_t nrounds;
	struct mstate *st;
	size_t nst, capst;
	uint8_t *masks;
	size_t nmasks, capmasks;
	size_t *sel; /* selected model states, increasing */
	size_t nsel;
};

static int add_state(struct crash_plan *p, size_t round, const uint8_t *mask, size_t n)
{
	struct mstate *s;
	size_t k = 0, i;

	if (GROW(&p->st, &p->capst, p->nst + 1, 64))
		return -ENOMEM;
	s = &p->st[p->nst++];
	s->round = round;
	s->mask = NO_MASK;
	if (mask) {
		if (GROW(&p->masks, &p->capmasks, p->nmasks + n, 64))
			return -ENOMEM;
		memcpy(p->masks + p->nmasks, mask, n);
		s->mask = p->nmasks;
		p->nmasks += n;
		for (i = 0; i < n; i++)
			k += mask[i];
	}
	s->napplied = k;
	return 0;
}

/* Is mask (n bytes) one of the last `count` masks added? */
static bool seen(const struct crash_plan *p, const uint8_t *mask, size_t n, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++)
		if (!memcmp(p->masks + p->nmasks - (i + 1) * n, mask, n))
			return true;
	return false;
}

static int add_round(struct crash_plan *p, size_t r, uint8_t *mask)
{
	size_t n = p->rounds[r].nw, i, got = 0, tries;
	uint64_t rng;
	int ret;

	ret = add_state(p, r, NULL, 0); /* the boundary */
	if (ret || n < 2)
		return ret;
	if (n <= p->o.exhaustive) {
		uint64_t m, full = (1ull << n) - 1;

		for (m = 1; m < full; m++) {
			for (i = 0; i < n; i++)
				mask[i] = (m >> i) & 1;
			ret = add_state(p, r, mask, n);
			if (ret)
				return ret;
		}
		return 0;
	}
	/* Each round draws from its own seeded generator, so its sample does
	 * not depend on the other rounds. */
	rng = p->o.seed ^ (0x632be59bd9b4e019ull * (r + 1));
	for (tries = 0; got < p->o.samples && tries < 16ull * p->o.samples; tries++) {
		size_t k = 0;

		for (i = 0; i < n; i++) {
			mask[i] = splitmix(&rng) & 1;
			k += mask[i];
		}
		if (k == 0 || k == n || seen(p, mask, n, got))
			continue;
		ret = add_state(p, r, mask, n);
		if (ret)
			return ret;
		got++;
	}
	return 0;
}

static int select_states(struct crash_plan *p)
{
	size_t i, nb = 0, k, *pool = NULL, npool = 0;
	uint8_t *take;
	uint64_t rng = p->o.seed ^ 0x5851f42d4c957f2dull;
	int ret = -ENOMEM;

	p->sel = calloc(p->nst, sizeof(*p->sel));
	take = calloc(p->nst, 1);
	pool = calloc(p->nst, sizeof(*pool));
	if (!p->sel || !take || !pool)
		goto out;
	if (!p->o.max || p->o.max >= p->nst) {
		memset(take, 1, p->nst);
	} else {
		/* The final state, then boundaries, then in-flight subsets,
		 * each group drawn with the seed when it does not fit. */
		size_t left = p->o.max;

		take[p->nst - 1] = 1;
		left--;
		for (int pass = 0; pass < 2 && left; pass++) {
			npool = 0;
			for (i = 0; i + 1 < p->nst; i++)
				if ((p->st[i].mask == NO_MASK) == (pass == 0))
					pool[npool++] = i;
			nb = npool < left ? npool : left;
			/* A partial Fisher-Yates shuffle picks nb of them. */
			for (k = 0; k < nb; k++) {
				size_t j = k + splitmix(&rng) % (npool - k), t = pool[k];

				pool[k] = pool[j];
				pool[j] = t;
				take[pool[k]] = 1;
			}
			left -= nb;
		}
	}
	for (i = 0; i < p->nst; i++)
		if (take[i])
			p->sel[p->nsel++] = i;
	ret = 0;
out:
	free(take);
	free(pool);
	return ret;
}

int crash_plan_open(const char *logpath, const struct crash_plan_opts *o, struct crash_plan **out)
{
	struct crash_plan *p = calloc(1, sizeof(*p));
	size_t nev, i, start, maxw = 0;
	uint8_t *mask = NULL;
	int ret;

	if (!p)
		return -ENOMEM;
	if (o)
		p->o = *o;
	if (!p->o.exhaustive)
		p->o.exhaustive = 4;
	if (p->o.exhaustive > 20)
		p->o.exhaustive = 20; /* 2^20 states per round is already too many */
	if (!p->o.samples)
		p->o.samples = 16;
	ret = reclog_load(logpath, &p->rec);
	if (ret)
		goto fail;
	p->bs = p->rec->block_size;
	p->nblocks = p->rec->nblocks;
	nev = bdev_recorder_count(p->rec);
	ret = -ENOMEM;
	p->w = calloc(nev + 1, sizeof(*p->w));
	p->rounds = calloc(nev + 2, sizeof(*p->rounds));
	if (!p->w || !p->rounds)
		goto fail;
	start = 0;
	for (i = 0; i <= nev; i++) {
		const struct rec_event *e = i < nev ? bdev_recorder_event(p->rec, i) : NULL;

		if (e && e->kind == REC_WRITE) {
			p->w[p->nw++] = e;
			continue;
		}
		if (e)
			p->nbarriers++;
		/* The end of the log closes a last round only if it has
		 * writes: that round never got its barrier. */
		if (!e && p->nw == start)
			break;
		p->rounds[p->nrounds].first = start;
		p->rounds[p->nrounds].nw = p->nw - start;
		if (p->nw - start > maxw)
			maxw = p->nw - start;
		p->nrounds++;
		start = p->nw;
	}
	mask = malloc(maxw + 1);
	if (!mask)
		goto fail;
	for (i = 0; i < p->nrounds; i++) {
		ret = add_round(p, i, mask);
		if (ret)
			goto fail;
	}
	ret = add_state(p, p->nrounds, NULL, 0); /* every round complete */
	if (!ret)
		ret = select_states(p);
	if (ret)
		goto fail;
	free(mask);
	*out = p;
	return 0;
fail:
	free(mask);
	crash_plan_free(p);
	return ret;
}

void crash_plan_free(struct crash_plan *p)
{
	if (!p)
		return;
	bdev_destroy(p->rec);
	free(p->w);
	free(p->rounds);
	free(p->st);
	free(p->masks);
	free(p->sel);
	free(p);
}

size_t crash_plan_total(const struct crash_plan *p)
{
	return p->nst;
}

size_t crash_plan_count(const struct crash_plan *p)
{
	return p->nsel;
}

size_t crash_plan_rounds(const struct crash_plan *p)
{
	return p->nrounds;
}

size_t crash_plan_barriers(const struct crash_plan *p)
{
	return p->nbarriers;
}

size_t crash_plan_writes(const struct crash_plan *p)
{
	return p->nw;
}

uint64_t crash_plan_image_bytes(const struct crash_plan *p)
{
	return p->nblocks * p->bs;
}

struct crash_plan_opts crash_plan_options(const struct crash_plan *p)
{
	return p->o;
}

int crash_plan_state(const struct crash_plan *p, size_t n, struct crash_plan_state *out)
{
	const struct mstate *s;

	if (n >= p->nst)
		return -ERANGE;
	s = &p->st[n];
	out->state = n;
	out->round = s->round;
	out->nround = s->round < p->nrounds ? p->rounds[s->round].nw : 0;
	out->napplied = s->napplied;
	out->boundary = s->mask == NO_MASK;
	return 0;
}

void crash_plan_selected(const struct crash_plan *p, size_t i, struct crash_plan_state *out)
{
	crash_plan_state(p, p->sel[i], out);
}

/* ---- cursor ------------------------------------------------------------ */

struct crash_cursor {
	const struct crash_plan *p;
	int fd;
	uint8_t *base; /* the image with rounds < round complete */
	size_t round;
	size_t cur;	 /* the state the file holds */
	bool valid;	 /* false: the file's contents are unknown */
	uint32_t *stamp; /* per block: generation it was last queued in */
	uint32_t gen;
	uint64_t *queue;
	size_t nqueue;
	const uint8_t **over; /* resync: a block's data in the partial round */
	uint8_t *buf;	      /* resync: blocks read back */
	uint64_t written, full;
};

int crash_cursor_open(const struct crash_plan *p, const char *path, struct crash_cursor **out)
{
	struct crash_cursor *c = calloc(1, sizeof(*c));
	size_t len = p->nblocks * p->bs;
	int ret = -ENOMEM;

	if (!c)
		return -ENOMEM;
	c->p = p;
	c->fd = -1;
	c->base = malloc(len);
	c->stamp = calloc(p->nblocks, sizeof(*c->stamp));
	c->queue = calloc(p->nblocks, sizeof(*c->queue));
	c->over = calloc(p->nblocks, sizeof(*c->over));
	c->buf = malloc(RESYNC_BLOCKS * p->bs);
	if (!c->base || !c->stamp || !c->queue || !c->over || !c->buf)
		goto fail;
	c->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (c->fd < 0) {
		ret = -errno;
		goto fail;
	}
	*out = c;
	return 0;
fail:
	crash_cursor_free(c);
	return ret;
}

void crash_cursor_free(struct crash_cursor *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->base);
	free(c->stamp);
	free(c->queue);
	free(c->over);
	free(c->buf);
	free(c);
}

void crash_cursor_invalidate(struct crash_cursor *c)
{
	c->valid = false;
}

uint64_t crash_cursor_blocks_written(const struct crash_cursor *c)
{
	return c->written;
}

uint64_t crash_cursor_full_writes(const struct crash_cursor *c)
{
	return c->full;
}

static int put(struct crash_cursor *c, uint64_t blkno, const void *data, size_t len)
{
	const char *d = data;
	off_t off = (off_t)(blkno * c->p->bs);

	while (len) {
		ssize_t n = pwrite(c->fd, d, len, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		d += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

static void next_gen(struct crash_cursor *c)
{
	if (++c->gen == 0) {
		memset(c->stamp, 0, c->p->nblocks * sizeof(*c->stamp));
		c->gen = 1;
	}
}

static void queue(struct crash_cursor *c, uint64_t blkno)
{
	if (c->stamp[blkno] == c->gen)
		return;
	c->stamp[blkno] = c->gen;
	c->queue[c->nqueue++] = blkno;
}

/* The writes of state s's mask, in log order (a later write of a block
 * wins, as on the disk). */
static int put_mask(struct crash_cursor *c, const struct mstate *s)
{
	const struct crash_plan *p = c->p;
	const struct round *r;
	size_t i;
	int ret;

	if (s->mask == NO_MASK)
		return 0;
	r = &p->rounds[s->round];
	for (i = 0; i < r->nw; i++) {
		const struct rec_event *e = p->w[r->first + i];

		if (!p->masks[s->mask + i])
			continue;
		ret = put(c, e->blkno, e->data, p->bs);
		if (ret)
			return ret;
		c->written++;
	}
	return 0;
}

int crash_cursor_seek(struct crash_cursor *c, size_t n)
{
	const struct crash_plan *p = c->p;
	const struct mstate *s, *old;
	size_t i, k;
	int ret;

	if (n >= p->nst)
		return -ERANGE;
	s = &p->st[n];
	if (!c->valid || s->round < c->round) {
		memcpy(c->base, bdev_recorder_initial(p->rec), p->nblocks * p->bs);
		for (c->round = 0; c->round < s->round; c->round++) {
			const struct round *r = &p->rounds[c->round];

			for (i = 0; i < r->nw; i++)
				memcpy(c->base + p->w[r->first + i]->blkno * p->bs,
				       p->w[r->first + i]->data, p->bs);
		}
		ret = put(c, 0, c->base, p->nblocks * p->bs);
		if (ret)
			return ret;
		if (ftruncate(c->fd, (off_t)(p->nblocks * p->bs)) < 0)
			return -errno;
		c->written += p->nblocks;
		c->full++;
	} else {
		/* Undo the old state's partial round and bring in the rounds
		 * in between, each block once, from base. */
		next_gen(c);
		c->nqueue = 0;
		old = &p->st[c->cur];
		if (old->mask != NO_MASK) {
			const struct round *r = &p->rounds[old->round];

			for (i = 0; i < r->nw; i++)
				if (p->masks[old->mask + i])
					queue(c, p->w[r->first + i]->blkno);
		}
		for (; c->round < s->round; c->round++) {
			const struct round *r = &p->rounds[c->round];

			for (i = 0; i < r->nw; i++) {
				const struct rec_event *e = p->w[r->first + i];

				memcpy(c->base + e->blkno * p->bs, e->data, p->bs);
				queue(c, e->blkno);
			}
		}
		for (k = 0; k < c->nqueue; k++) {
			ret = put(c, c->queue[k], c->base + c->queue[k] * p->bs, p->bs);
			if (ret)
				return ret;
		}
		c->written += c->nqueue;
	}
	/* Until the mask is on the file, it holds neither state. */
	c->valid = false;
	c->cur = n;
	ret = put_mask(c, s);
	if (ret)
		return ret;
	c->valid = true;
	return 0;
}

int crash_cursor_resync(struct crash_cursor *c)
{
	const struct crash_plan *p = c->p;
	const struct mstate *s = &p->st[c->cur];
	uint64_t b, k, n;
	int ret;

	if (!c->valid)
		return crash_cursor_seek(c, c->cur);
	next_gen(c);
	if (s->mask != NO_MASK) {
		const struct round *r = &p->rounds[s->round];

		for (k = 0; k < r->nw; k++) {
			const struct rec_event *e = p->w[r->first + k];

			if (p->masks[s->mask + k]) {
				c->stamp[e->blkno] = c->gen;
				c->over[e->blkno] = e->data;
			}
		}
	}
	for (b = 0; b < p->nblocks; b += n) {
		ssize_t got;

		n = p->nblocks - b < RESYNC_BLOCKS ? p->nblocks - b : RESYNC_BLOCKS;
		got = pread(c->fd, c->buf, n * p->bs, (off_t)(b * p->bs));
		if (got < 0)
			return -errno;
		if ((uint64_t)got < n * p->bs)
			memset(c->buf + got, 0xff, n * p->bs - (size_t)got); /* differs */
		for (k = 0; k < n; k++) {
			const uint8_t *want =
			    c->stamp[b + k] == c->gen ? c->over[b + k] : c->base + (b + k) * p->bs;

			if (!memcmp(c->buf + k * p->bs, want, p->bs))
				continue;
			ret = put(c, b + k, want, p->bs);
			if (ret) {
				c->valid = false;
				return ret;
			}
			c->written++;
		}
	}
	if (ftruncate(c->fd, (off_t)(p->nblocks * p->bs)) < 0) {
		c->valid = false;
		return -errno;
	}
	return 0;
}
