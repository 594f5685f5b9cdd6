/* Crash-state enumeration over a recorder log.
 *
 * States are built incrementally: `base` holds the image with every round
 * before the current one complete, and each subset of the round in flight is
 * applied on top of it and then undone from saved copies, so a state costs
 * the blocks it touches rather than a copy of the whole image.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "crashsim.h"
#include "util/splitmix.h"

struct sim {
	struct bdev *rec;
	uint32_t bs;
	uint8_t *image; /* the state handed to the callback */
	size_t image_len;
	const struct rec_event **w; /* writes of the current round */
	size_t nw;
	uint8_t *mask;
	uint8_t *saved; /* nw blocks of saved contents */
	int (*cb)(const struct crash_state *, void *);
	void *arg;
	size_t nstates;
};

/* Apply the writes selected by mask (in log order, so a later write of the
 * same block wins), call back, and restore the image. */
static int visit(struct sim *s, size_t round)
{
	struct crash_state st;
	size_t i, k = 0;
	int ret;

	for (i = 0; i < s->nw; i++) {
		uint8_t *blk;

		if (!s->mask[i])
			continue;
		blk = s->image + s->w[i]->blkno * s->bs;
		memcpy(s->saved + i * s->bs, blk, s->bs);
		memcpy(blk, s->w[i]->data, s->bs);
		k++;
	}
	st.round = round;
	st.nround = s->nw;
	st.napplied = k;
	st.mask = s->mask;
	st.image = s->image;
	st.image_len = s->image_len;
	st.block_size = s->bs;
	ret = s->cb(&st, s->arg);
	s->nstates++;
	for (i = s->nw; i-- > 0;)
		if (s->mask[i])
			memcpy(s->image + s->w[i]->blkno * s->bs, s->saved + i * s->bs, s->bs);
	return ret;
}

static int do_round(struct sim *s, size_t round, const struct crash_opts *o, uint64_t *rng)
{
	size_t i, j;
	int ret;

	if (s->nw <= o->max_exhaustive) {
		uint64_t m, end = 1ull << s->nw;

		for (m = 0; m < end; m++) {
			for (i = 0; i < s->nw; i++)
				s->mask[i] = (m >> i) & 1;
			ret = visit(s, round);
			if (ret)
				return ret;
		}
		return 0;
	}
	/* Too many for all subsets: the two extremes plus a sample. */
	for (j = 0; j < (size_t)o->samples + 2; j++) {
		for (i = 0; i < s->nw; i++) {
			if (j == 0)
				s->mask[i] = 0;
			else if (j == 1)
				s->mask[i] = 1;
			else
				s->mask[i] = splitmix(rng) & 1;
		}
		ret = visit(s, round);
		if (ret)
			return ret;
	}
	return 0;
}

int crash_enumerate(struct bdev *rec, const struct crash_opts *opts,
		    int (*cb)(const struct crash_state *st, void *arg), void *arg, size_t *nstates)
{
	struct crash_opts o = {10, 64, 0};
	struct sim s = {0};
	size_t nev = bdev_recorder_count(rec), i, round = 0, start = 0, maxw = 0;
	uint64_t rng;
	int ret = 0;

	if (opts)
		o = *opts;
	if (o.max_exhaustive == 0)
		o.max_exhaustive = 10;
	if (o.max_exhaustive > 20)
		o.max_exhaustive = 20; /* 2^20 states is already too many */
	if (o.samples == 0)
		o.samples = 64;
	rng = o.seed;
	s.rec = rec;
	s.bs = rec->block_size;
	s.image_len = (size_t)rec->nblocks * s.bs;
	s.cb = cb;
	s.arg = arg;

	/* The biggest round decides the scratch sizes. */
	for (i = 0; i <= nev; i++) {
		const struct rec_event *e = i < nev ? bdev_recorder_event(rec, i) : NULL;

		if (!e || e->kind == REC_BARRIER) {
			if (i - start > maxw)
				maxw = i - start;
			start = i + 1;
		}
	}
	s.image = malloc(s.image_len ? s.image_len : 1);
	s.w = calloc(maxw + 1, sizeof(*s.w));
	s.mask = calloc(maxw + 1, 1);
	s.saved = malloc((maxw + 1) * s.bs);
	if (!s.image || !s.w || !s.mask || !s.saved) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(s.image, bdev_recorder_initial(rec), s.image_len);

	for (i = 0; i <= nev; i++) {
		const struct rec_event *e = i < nev ? bdev_recorder_event(rec, i) : NULL;

		if (e && e->kind == REC_WRITE) {
			if (e->blkno >= rec->nblocks) {
				ret = -EINVAL;
				goto out;
			}
			s.w[s.nw++] = e;
			continue;
		}
		/* A barrier closes a round; the end of the log closes the
		 * last one only if it has writes (it never got a barrier). */
		if (!e && s.nw == 0)
			break;
		ret = do_round(&s, round, &o, &rng);
		if (ret)
			goto out;
		for (size_t k = 0; k < s.nw; k++)
			memcpy(s.image + s.w[k]->blkno * s.bs, s.w[k]->data, s.bs);
		s.nw = 0;
		round++;
	}
	/* Everything that was written. */
	memset(s.mask, 0, maxw + 1);
	ret = visit(&s, round);
out:
	if (ret >= 0 && nstates)
		*nstates = s.nstates;
	free(s.saved);
	free(s.mask);
	free(s.w);
	free(s.image);
	return ret;
}
