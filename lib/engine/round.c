/* Rounds and the flusher (design.md §3): choosing what may be written,
 * rolling back what may not go yet, writing, the barrier, and committing.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "cache_int.h"
#include "util/grow.h"

static void rollback(uint8_t *copy, const struct patch *p)
{
	if (p->flags & (PF_NRB | PF_HARD))
		return; /* cannot happen: nothing of its block is written without it */
	if (p->type == PT_BYTE) {
		undo_read(p, copy + p->off);
	} else {
		for (uint32_t off = p->off; off < p->off + patch_len(p); off += 4) {
			uint32_t m = patch_bit_mask(p, off);
			uint8_t *w = copy + off;

			w[0] ^= (uint8_t)m;
			w[1] ^= (uint8_t)(m >> 8);
			w[2] ^= (uint8_t)(m >> 16);
			w[3] ^= (uint8_t)(m >> 24);
		}
	}
}

/* Under AddressSanitizer each copy is followed by a poisoned gap of its
 * own alignment: copies side by side in one mapping would let a write past
 * the end of one land unseen in the next, where a buffer of its own from
 * the allocator had a red zone. */
#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#define COPY_GAP(c) ((c)->bs < DATA_ALIGN ? (c)->bs : DATA_ALIGN)
#else
#define COPY_GAP(c)			  0
#define ASAN_POISON_MEMORY_REGION(a, n)	  ((void)(a), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(a, n) ((void)(a), (void)(n))
#endif

/* The copies are one mapping of round_max_blocks buffers (fixed when the
 * cache is made), touched only as rounds use them: a buffer of its own per
 * copy, from posix_memalign(), cost two page faults the first time (its
 * header and its page), and the first round of a commit or an unmount
 * copies thousands of blocks.  Each copy is aligned to its size or 4 KiB,
 * as O_DIRECT needs. */
static int round_scratch(struct cache *c)
{
	size_t n = c->opts.round_max_blocks, stride = c->bs + COPY_GAP(c), i;

	if (c->r_blocks)
		return 0;
	c->r_copylen = (n * stride + CHUNK_BYTES - 1) / CHUNK_BYTES * CHUNK_BYTES;
	c->r_copymem = chunk_map(c->r_copylen);
	c->r_blocks = calloc(n, sizeof(*c->r_blocks));
	c->r_writes = calloc(n, sizeof(*c->r_writes));
	c->r_copies = calloc(n, sizeof(*c->r_copies));
	c->r_pstart = calloc(n + 1, sizeof(*c->r_pstart));
	if (!c->r_copymem || !c->r_blocks || !c->r_writes || !c->r_copies || !c->r_pstart) {
		round_scratch_free(c);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		c->r_copies[i] = c->r_copymem + i * stride;
		ASAN_POISON_MEMORY_REGION(c->r_copies[i] + c->bs, stride - c->bs);
	}
	return 0;
}

void round_scratch_free(struct cache *c)
{
	if (c->r_copymem) {
		/* the shadow outlives the mapping: whatever is mapped here
		 * next must not find the gaps poisoned */
		ASAN_UNPOISON_MEMORY_REGION(c->r_copymem, c->r_copylen);
		munmap(c->r_copymem, c->r_copylen);
	}
	free(c->r_blocks);
	free(c->r_writes);
	free(c->r_copies);
	free(c->r_pstart);
	c->r_copymem = NULL;
	c->r_blocks = NULL;
	c->r_writes = NULL;
	c->r_copies = NULL;
	c->r_pstart = NULL;
}

static int grow_vec(struct patch ***v, size_t *cap, size_t need)
{
	return GROW(v, cap, need, 256) ? -ENOMEM : 0;
}

/* Settling through empty patches.  A patch of b may wait for b's own
 * older patches through empty patches: a patchgroup's head and tail stand
 * between a rename and the creation it follows in the same directory
 * block.  Counted as waits elsewhere, they would cost one round per link
 * of such a chain.  Since a block write is atomic, the patch may go in
 * the same write as those befores, provided every other before is on
 * disk already.  choose_patches() finds such patches by settling, in a
 * scratch table, the empty patches whose befores are all committed or in
 * this write, and counting down the waits of b's patches behind them. */
#define SETTLE_MIN_SLOTS 1024 /* power of two */
#define SETTLE_BUDGET                                                                              \
	512 /* edges looked at per block write, plus                                               \
	     * SETTLE_PER_PATCH per patch of the block */
#define SETTLE_PER_PATCH 4

/* The first slot to probe for p in a table of cap slots (a power of two):
 * the address above its alignment, mixed by a Fibonacci multiply so that
 * neighbouring patches spread out. */
static size_t settle_home(const struct patch *p, size_t cap)
{
	return (size_t)(((uintptr_t)p >> 6) * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1);
}

/* Double the table, keeping this write's slots.  A chain of groups over
 * one block settles one tail per group, so a fixed table would end the
 * write after a few hundred groups and cost a round per few hundred more
 * (the chain's later groups rolled back from a write that could hold
 * them). */
static int settle_grow(struct cache *c)
{
	size_t cap = c->r_settle_cap * 2, i;
	struct settle_slot *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (i = 0; i < c->r_settle_cap; i++) {
		const struct settle_slot *s = &c->r_settle[i];
		size_t j;

		if (s->gen != c->r_settle_gen)
			continue;
		for (j = settle_home(s->p, cap); t[j].gen; j = (j + 1) & (cap - 1))
			;
		t[j] = *s;
	}
	free(c->r_settle);
	c->r_settle = t;
	c->r_settle_cap = cap;
	return 0;
}

/* p's slot, made if it has none yet; NULL when the table cannot grow
 * (then fewer patches go in this write, which is always safe). */
static struct settle_slot *settle_slot(struct cache *c, struct patch *p)
{
	size_t i;

	if (2 * (c->r_settle_used + 1) > c->r_settle_cap && settle_grow(c))
		return NULL;
	for (i = settle_home(p, c->r_settle_cap);; i = (i + 1) & (c->r_settle_cap - 1)) {
		struct settle_slot *s = &c->r_settle[i];

		if (s->gen != c->r_settle_gen) {
			s->gen = c->r_settle_gen;
			s->p = p;
			s->left = p->npend_ext;
			c->r_settle_used++;
			return s;
		}
		if (s->p == p)
			return s;
	}
}

/* Whether p, waiting for others elsewhere, has had all of them settled. */
static bool settled(struct cache *c, struct patch *p)
{
	size_t i;

	if (!c->r_settle)
		return false;
	for (i = settle_home(p, c->r_settle_cap);; i = (i + 1) & (c->r_settle_cap - 1)) {
		struct settle_slot *s = &c->r_settle[i];

		if (s->gen != c->r_settle_gen)
			return false;
		if (s->p == p)
			return s->left == 0;
	}
}

/* p (of b) goes in this write: count it off what waits for it through
 * empty patches.  *budget bounds the work; when it runs out, fewer
 * patches go now, which is always safe. */
static void settle_afters(struct cache *c, struct cblock *b, struct patch *p, int *budget)
{
	uint32_t i;

	for (i = 0; i < p->nafters; i++) {
		struct patch *a = patch_after(p, i);
		struct settle_slot *s;

		/* Same-block waits are the block list's business; other
		 * blocks cannot go in this write; a held empty patch does
		 * not commit. */
		if (a->block == b && p->block == b)
			continue;
		if ((a->block && a->block != b) || (a->flags & PF_HELD))
			continue;
		if (--*budget < 0)
			return;
		s = settle_slot(c, a);
		if (!s) {
			*budget = 0;
			return;
		}
		if (s->left && --s->left == 0 && !a->block)
			settle_afters(c, b, a, budget);
	}
}

/* Start an empty settle table (a new generation of its slots). */
static void settle_reset(struct cache *c)
{
	if (!c->r_settle) {
		c->r_settle = calloc(SETTLE_MIN_SLOTS, sizeof(*c->r_settle));
		c->r_settle_cap = c->r_settle ? SETTLE_MIN_SLOTS : 0;
	}
	c->r_settle_used = 0;
	if (++c->r_settle_gen == 0) {
		/* a wrapped generation could match a stale slot */
		if (c->r_settle)
			memset(c->r_settle, 0, c->r_settle_cap * sizeof(*c->r_settle));
		c->r_settle_gen = 1;
	}
}

/* Mark PF_BLOCKED the same-block afters of the patches left out so far
 * (r_roll from *marked on) that come at or after q in b's list (the list is
 * in sequence order; those before q are decided already). */
static void mark_blocked(struct cache *c, struct cblock *b, const struct patch *q, size_t *marked)
{
	uint32_t i;

	for (; *marked < c->r_nroll; (*marked)++) {
		const struct patch *p = c->r_roll[*marked];

		for (i = 0; i < p->nafters; i++) {
			struct patch *a = patch_after(p, i);

			if (a->block == b && a->seq >= q->seq)
				a->flags |= PF_BLOCKED;
		}
	}
}

/* Choose the patches of b to write now: those whose befores elsewhere are
 * all on disk (or settle within this write, see above) and whose
 * same-block befores are all chosen too, and (for a targeted round) older
 * than limit; hard patches, and those without undo, are in every write.
 * The list is in sequence order and same-block edges point backwards, so
 * one pass decides, marking the same-block afters of every patch left
 * out.  Those left out are collected in r_roll, oldest first.  The
 * marking waits until a patch that could go but for it is reached: in a
 * long chain on one block, where every later patch waits for something
 * elsewhere as well, the afters of the patches left out are never looked
 * at.  Returns whether a patch older than limit was chosen. */
static bool choose_patches(struct cache *c, struct cblock *b, uint64_t limit)
{
	struct patch *p;
	bool useful = false;
	/* Work in proportion to the block's patches: a chain of groups
	 * costs each of its patches an edge to its group's tail and one
	 * from the tail to the next group's change. */
	int budget = b->npatches < (INT_MAX - SETTLE_BUDGET) / SETTLE_PER_PATCH
			 ? SETTLE_BUDGET + SETTLE_PER_PATCH * (int)b->npatches
			 : INT_MAX;
	size_t marked = 0;

	c->r_nroll = 0;
	settle_reset(c);
	for (p = b->phead; p; p = p->bnext) {
		/* (a patch of a failed round may be on disk already: keep
		 * it there rather than roll it back; one without undo
		 * cannot be rolled back) */
		bool in = (p->npend_ext == 0 || settled(c, p)) &&
			  (p->seq < limit || (p->flags & (PF_HARD | PF_WRITTEN)) ||
			   patch_undo_dropped(p));

		if (in && marked < c->r_nroll && patch_npend_blk(p))
			mark_blocked(c, b, p, &marked);
		in = in && !(p->flags & PF_BLOCKED);
		p->flags &= ~PF_BLOCKED;
		if (in) {
			p->flags |= PF_INFLIGHT;
			c->r_patches[c->r_np++] = p;
			useful |= p->seq < limit;
			if (c->r_settle && budget > 0)
				settle_afters(c, b, p, &budget);
			continue;
		}
		c->r_roll[c->r_nroll++] = p;
	}
	return useful;
}

/* ---- putting off a block that would be written twice ------------------
 *
 * A block written with a patch rolled back is written again once what the
 * patch waits for is on disk.  When all it waits for is written in this
 * very round, the block can go whole in the next one instead: it is put
 * off, one round at most in a row, so nothing waits for long.  A round
 * never loses its last block this way, since what a put-off block waits
 * for is in it.  The settle table counts, for patches on other blocks and
 * for empty patches, how many of their pending befores this round's
 * writes settle. */

/* p is written in this round: count it off its afters elsewhere, and off
 * the afters of empty patches it settles.  Held patches do not commit. */
static void settle_round_afters(struct cache *c, const struct patch *p, int *budget)
{
	uint32_t i;

	for (i = 0; i < p->nafters; i++) {
		struct patch *a = patch_after(p, i);
		struct settle_slot *s;

		if ((p->block && a->block == p->block) || (a->flags & PF_HELD))
			continue;
		if (--*budget < 0)
			return;
		s = settle_slot(c, a);
		if (!s) {
			*budget = -1;
			return;
		}
		if (s->left && --s->left == 0 && !a->block)
			settle_round_afters(c, a, budget);
	}
}

/* Count what the round's blocks not marked BF_DEFER settle; false when
 * the work would exceed its bound (then nothing is put off). */
static bool settle_round(struct cache *c, size_t n)
{
	int budget = c->r_np < (size_t)(INT_MAX - SETTLE_BUDGET) / (2 * SETTLE_PER_PATCH)
			 ? SETTLE_BUDGET + 2 * SETTLE_PER_PATCH * (int)c->r_np
			 : INT_MAX;
	size_t i, k;

	settle_reset(c);
	if (!c->r_settle)
		return false;
	for (i = 0; i < n && budget >= 0; i++) {
		if (c->r_blocks[i]->flags & BF_DEFER)
			continue;
		for (k = c->r_pstart[i]; k < c->r_pstart[i + 1] && budget >= 0; k++)
			settle_round_afters(c, c->r_patches[k], &budget);
	}
	return budget >= 0;
}

/* Whether b, in this round, rolls back some patch, and every patch it
 * rolls back could go in b's next write, were what the settle table has
 * counted off on disk: the round's blocks not marked BF_DEFER
 * (defer_blocks()), or also the roots of ready blocks (requeue_passed());
 * and, for a targeted round, is wanted. */
static bool could_go_next(struct cache *c, struct cblock *b, uint64_t limit)
{
	const struct patch *p;
	bool rolled = false;

	for (p = b->phead; p; p = p->bnext) {
		if (p->flags & PF_INFLIGHT)
			continue;
		if (p->seq >= limit || (p->npend_ext && !settled(c, (struct patch *)p)))
			return false;
		rolled = true;
	}
	return rolled;
}

/* Whether b, in this round, rolls back some patch. */
static bool rolls_back(const struct cblock *b)
{
	const struct patch *p;

	for (p = b->phead; p; p = p->bnext)
		if (!(p->flags & PF_INFLIGHT))
			return true;
	return false;
}

/* Whether nothing elsewhere waits for the patches chosen for b's write,
 * c->r_patches[s, e): no after on another block, nor an empty one. */
static bool holds_up_nothing(const struct cache *c, const struct cblock *b, size_t s, size_t e)
{
	size_t k;
	uint32_t i;

	for (k = s; k < e; k++) {
		const struct patch *p = c->r_patches[k];

		for (i = 0; i < p->nafters; i++)
			if (patch_after(p, i)->block != b)
				return false;
	}
	return true;
}

/* ---- slack: how long a sync may put a block off ----------------------
 *
 * A sync needs at least as many more rounds as the longest chain of
 * waits among the patches left, counting a round for each wait on
 * another block (an after there goes in a later round than its before;
 * one on its own block may go in the same write).  A block whose write
 * would roll a patch back, and whose chosen patches head only shorter
 * chains, can be put off a round without making the sync any longer
 * (design.md §3), and when what its rolled-back patches wait for comes
 * first it goes once, whole.  slack_compute() gives each patch left h,
 * the rounds that its write and everything waiting for it need: one more
 * than the most of its afters' (less one for an after on its own block),
 * while an empty patch passes its afters' most on, and a held one none,
 * since nothing behind it is written in this sync.  An empty patch passes
 * on, too, the block of that most and the most on any other block, so
 * that a wait through it on a patch of the waiter's own block costs no
 * round, as no direct one does (slack_via()): settling puts the two in
 * one write.  r_slack_max is the most over the patches that wait for
 * nothing. */

static struct slack_slot *slack_find(const struct cache *c, const struct patch *p)
{
	size_t i;

	for (i = settle_home(p, c->r_slack_cap);; i = (i + 1) & (c->r_slack_cap - 1)) {
		struct slack_slot *s = &c->r_slack[i];

		if (!s->p || s->p == p)
			return s;
	}
}

/* Put p in the table and the list unless it is there; 0 or -ENOMEM. */
static int slack_add(struct cache *c, struct patch *p)
{
	struct slack_slot *s;

	if (2 * (c->r_slack_used + 1) > c->r_slack_cap) {
		struct slack_slot *old = c->r_slack;
		size_t ocap = c->r_slack_cap, i;
		size_t cap = ocap ? 2 * ocap : SETTLE_MIN_SLOTS;
		struct slack_slot *t = calloc(cap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		c->r_slack = t;
		c->r_slack_cap = cap;
		for (i = 0; i < ocap; i++)
			if (old[i].p)
				*slack_find(c, old[i].p) = old[i];
		free(old);
	}
	s = slack_find(c, p);
	if (s->p)
		return 0;
	if (GROW(&c->r_slackv, &c->r_slackcap, c->r_slack_used + 1, 256))
		return -ENOMEM;
	s->p = p;
	s->h = s->h2 = 0;
	s->b1 = s->b2 = NULL;
	c->r_slackv[c->r_slack_used++] = p;
	return 0;
}

/* Take (b, h) into an empty patch's best two blocks (struct slack_slot). */
static void slack_merge(struct slack_slot *s, const struct cblock *b, uint32_t h)
{
	if (b == s->b1) {
		if (h > s->h)
			s->h = h;
	} else if (h > s->h) {
		s->b2 = s->b1;
		s->h2 = s->h;
		s->b1 = b;
		s->h = h;
	} else if (h > s->h2) {
		s->b2 = b;
		s->h2 = h;
	}
}

/* What an after with table slot s asks of a patch on block b (never
 * NULL): its rounds, less the one it shares with b's write when on b
 * itself. */
static uint32_t slack_via(const struct slack_slot *s, const struct cblock *b)
{
	uint32_t h = s->h;

	if (s->b1 != b)
		return h;
	if (h)
		h--;
	return h > s->h2 ? h : s->h2;
}

static int newest_first(const void *x, const void *y)
{
	const struct patch *p = *(struct patch *const *)x, *q = *(struct patch *const *)y;

	return p->seq < q->seq ? 1 : p->seq > q->seq ? -1 : 0;
}

/* Fill the table for every patch left; false when memory runs short
 * (then no block is put off for its slack).  Every edge goes from a newer
 * patch to an older one, so newest first each after's h is known. */
static bool slack_fill(struct cache *c)
{
	struct cblock *b;
	struct patch *p;
	size_t i;
	uint32_t j;

	if (!c->r_slack) {
		c->r_slack = calloc(SETTLE_MIN_SLOTS, sizeof(*c->r_slack));
		if (!c->r_slack)
			return false;
		c->r_slack_cap = SETTLE_MIN_SLOTS;
	}
	memset(c->r_slack, 0, c->r_slack_cap * sizeof(*c->r_slack));
	c->r_slack_used = 0;
	c->r_slack_seq = 0;
	for (b = c->dirty_head; b; b = b->dnext)
		for (p = b->phead; p; p = p->bnext)
			if (slack_add(c, p))
				return false;
	/* the empty patches between them, found as the list grows */
	for (i = 0; i < c->r_slack_used; i++) {
		p = c->r_slackv[i];
		for (j = 0; j < p->nafters; j++) {
			struct patch *a = patch_after(p, j);

			if (!a->block && slack_add(c, a))
				return false;
		}
	}
	qsort(c->r_slackv, c->r_slack_used, sizeof(*c->r_slackv), newest_first);
	for (i = 0; i < c->r_slack_used; i++) {
		struct slack_slot *s;
		uint32_t h = 0;

		p = c->r_slackv[i];
		s = slack_find(c, p);
		if (p->flags & PF_HELD)
			continue;
		for (j = 0; j < p->nafters; j++) {
			const struct slack_slot *sa = slack_find(c, patch_after(p, j));
			uint32_t ha;

			if (!p->block) {
				slack_merge(s, sa->b1, sa->h);
				if (sa->h2)
					slack_merge(s, sa->b2, sa->h2);
				continue;
			}
			ha = slack_via(sa, p->block);
			if (ha > h)
				h = ha;
		}
		if (p->block) {
			s->h = h + 1;
			s->b1 = p->block;
		}
	}
	c->r_slack_seq = c->seq;
	c->r_slack_chg = c->changes;
	c->r_slack_disc = c->st.blocks_discarded;
	return true;
}

/* Make the table hold every patch left and r_slack_max the longest chain
 * of rounds left.  The table is filled again only when a patch was made
 * or renumbered, a change made (a merge may add befores) or a block
 * discarded since: a commit changes no h of what is left, only the
 * longest chain, found again among the patches that wait for nothing. */
static bool slack_compute(struct cache *c)
{
	struct cblock *b;
	const struct patch *p;

	if ((!c->r_slack || c->r_slack_seq != c->seq || c->r_slack_chg != c->changes ||
	     c->r_slack_disc != c->st.blocks_discarded) &&
	    !slack_fill(c))
		return false;
	c->r_slack_max = 0;
	for (b = c->dirty_head; b; b = b->dnext)
		for (p = b->phead; p; p = p->bnext)
			if (is_root(p) && slack_find(c, p)->h > c->r_slack_max)
				c->r_slack_max = slack_find(c, p)->h;
	return true;
}

/* Free the table once no sync needs it: it holds every patch left. */
static void slack_free(struct cache *c)
{
	free(c->r_slack);
	free(c->r_slackv);
	c->r_slack = NULL;
	c->r_slackv = NULL;
	c->r_slack_cap = c->r_slack_used = c->r_slackcap = 0;
}

/* The rounds that b's write of c->r_patches[s, e) and what waits for it
 * elsewhere need (slack_compute() filled the table), or UINT32_MAX when
 * a block put off to the next round, to go whole there, waits for it. */
static uint32_t slack_need(const struct cache *c, const struct cblock *b, size_t s, size_t e)
{
	uint32_t need = 1, i, ha;
	size_t k;

	for (k = s; k < e; k++) {
		const struct patch *p = c->r_patches[k];

		for (i = 0; i < p->nafters; i++) {
			const struct patch *a = patch_after(p, i);

			if (a->block == b)
				continue;
			if (a->block && (a->block->flags & (BF_DEFER | BF_IDLE)) == BF_DEFER)
				return UINT32_MAX;
			ha = slack_via(slack_find(c, a), b) + 1;
			if (ha > need)
				need = ha;
		}
	}
	return need;
}

/* Whether, in a sync, putting off the round's i-th block for a round
 * leaves the sync no longer.  *state: 0 before slack_compute(), 1 after,
 * -1 when it failed (then no block has slack). */
static bool has_slack(struct cache *c, size_t i, int *state)
{
	if (*state == 0)
		*state = slack_compute(c) ? 1 : -1;
	return *state > 0 &&
	       slack_need(c, c->r_blocks[i], c->r_pstart[i], c->r_pstart[i + 1]) < c->r_slack_max;
}

/* Put off the round's blocks that could go whole in the next round, and,
 * while a sync writes everything, those whose write would roll a patch
 * back and that nothing else waits for (design.md §3): such a block's
 * write holds up no other block, so a sync, which goes on until every
 * patch is written, ends in no more rounds when it goes once, whole,
 * after its last wait.  So, too, those whose write others wait for while
 * putting it off leaves the sync no longer (slack, above).  In a sync a
 * block is put off for the next round only with slack.  Closes up the
 * round.  Returns how many blocks were put off. */
static size_t defer_blocks(struct cache *c, size_t *np, size_t *nrolled, uint64_t limit)
{
	size_t n = *np, nd = 0, nnext = 0, i, j, k;
	bool sync = c->nsyncs && limit == UINT64_MAX;
	int slack = 0; /* 1: slack_compute() done, -1: it failed */

	if (n < 2)
		return 0;
	for (i = 0; sync && i < n; i++) {
		struct cblock *b = c->r_blocks[i];

		if (rolls_back(b) && holds_up_nothing(c, b, c->r_pstart[i], c->r_pstart[i + 1])) {
			b->flags |= BF_DEFER | BF_IDLE;
			nd++;
		}
	}
	/* What the blocks put off so far would write settles nothing
	 * elsewhere, so settle_round() may leave them out. */
	if (settle_round(c, n)) {
		for (i = 0; i < n; i++) {
			struct cblock *b = c->r_blocks[i];

			/* In a sync only with slack: the patches chosen
			 * for b's write wait a round as well. */
			if (!(b->flags & BF_DEFER) && !b->defers && could_go_next(c, b, limit) &&
			    (!sync || has_slack(c, i, &slack))) {
				b->flags |= BF_DEFER;
				nnext++;
			}
		}
	}
	/* Then, in a sync, the other blocks that would roll a patch back
	 * and have slack, but none that a block put off to the next round
	 * waits for directly (slack_need()). */
	for (i = 0; sync && i < n; i++) {
		struct cblock *b = c->r_blocks[i];

		if (!(b->flags & BF_DEFER) && rolls_back(b) && has_slack(c, i, &slack)) {
			b->flags |= BF_DEFER | BF_IDLE;
			nd++;
		}
	}
	/* Against only the blocks left in the round: leaving out more can
	 * only make this check fail more, so one pass settles it. */
	if (nnext && !settle_round(c, n)) {
		for (i = 0; i < n; i++)
			if (!(c->r_blocks[i]->flags & BF_IDLE))
				c->r_blocks[i]->flags &= ~BF_DEFER;
		nnext = 0;
	}
	for (i = 0; nnext && i < n; i++) {
		struct cblock *b = c->r_blocks[i];

		if ((b->flags & (BF_DEFER | BF_IDLE)) == BF_DEFER && !could_go_next(c, b, limit)) {
			b->flags &= ~BF_DEFER;
			nnext--;
		}
	}
	nd += nnext;
	if (nd == 0 || nd == n) {
		for (i = 0; i < n; i++)
			c->r_blocks[i]->flags &= ~(BF_DEFER | BF_IDLE);
		return 0;
	}
	c->r_np = 0;
	for (i = j = 0; i < n; i++) {
		struct cblock *b = c->r_blocks[i];
		size_t s = c->r_pstart[i], e = c->r_pstart[i + 1];
		uint8_t *copy;

		if (b->flags & BF_DEFER) {
			b->flags &= ~(BF_DEFER | BF_IDLE | BF_INFLIGHT);
			b->defers = 1;
			for (k = s; k < e; k++)
				c->r_patches[k]->flags &= ~PF_INFLIGHT;
			ready_update(c, b);
			continue;
		}
		memmove(&c->r_patches[c->r_np], &c->r_patches[s], (e - s) * sizeof(*c->r_patches));
		c->r_pstart[j] = c->r_np;
		c->r_np += e - s;
		copy = c->r_copies[i];
		c->r_copies[i] = c->r_copies[j];
		c->r_copies[j] = copy;
		c->r_blocks[j] = b;
		c->r_writes[j] = c->r_writes[i];
		j++;
	}
	c->r_pstart[j] = c->r_np;
	*np = j;
	*nrolled -= nd;
	return nd;
}

/* Count off, in the settle table, what b's patches that wait for nothing
 * elsewhere let go (all of them for a block of this round: chosen). */
static void count_roots(struct cache *c, const struct cblock *b, int *budget)
{
	struct patch *p;

	for (p = b->phead; p && *budget >= 0; p = p->bnext)
		if (!(p->flags & PF_COMMITTED) && (p->npend_ext == 0 || (p->flags & PF_INFLIGHT)))
			settle_round_afters(c, p, budget);
}

/* A block passed in this round (BF_REQUEUE) whose left-out patches wait
 * only for this round's blocks and for patches of ready blocks that wait
 * for nothing elsewhere moves to the ready list's tail: by the time it
 * comes up again those are likely written, and it goes whole.  Taken in
 * the next round instead, as it was before, an untar's directory blocks
 * went out with their newest entries rolled back while the inode-table
 * blocks they waited for were two rounds down the list.  A block whose
 * waits are further off stays where it is and goes in the next round:
 * left out longer, it would hold its patches and their undo all along. */
static void requeue_passed(struct cache *c, size_t n)
{
	int budget = SETTLE_BUDGET;
	struct cblock *b, *next, *end = c->ready_tail;
	size_t i;

	if (c->nready + n < (size_t)(INT_MAX - SETTLE_BUDGET) / (8 * SETTLE_PER_PATCH))
		budget += 8 * SETTLE_PER_PATCH * (int)(c->nready + n);
	settle_reset(c);
	for (i = 0; i < n && budget >= 0; i++)
		count_roots(c, c->r_blocks[i], &budget);
	for (b = c->ready_head; b && budget >= 0; b = b->rnext)
		if (!(b->flags & BF_REQUEUE))
			count_roots(c, b, &budget);
	for (b = c->ready_head; b; b = next) {
		next = b->rnext;
		if (b->flags & BF_REQUEUE) {
			b->flags &= (uint16_t)~BF_REQUEUE;
			if (budget >= 0 && could_go_next(c, b, UINT64_MAX))
				ready_requeue(c, b);
		}
		if (b == end)
			break;
	}
}

/* One round.  With limit < UINT64_MAX, a targeted round: only patches
 * older than limit (everything a patch with that sequence number can
 * depend on) are wanted, and blocks with none of those are left alone. */
int round_locked(struct cache *c, size_t *nwritten, uint64_t limit)
{
	struct cblock *next;
	size_t n = 0, nrolled = 0, i;
	bool useful, whole_only, passed = false;
	int err, werr;

	if (cache_reentered(c))
		return -EDEADLK;
	while (c->round_busy)
		pthread_cond_wait(&c->round_cond, &c->lock);
	err = round_scratch(c);
	if (err)
		return err;
	c->r_np = 0;
	/* When more blocks are ready than a round holds, it is filled with
	 * blocks that go whole first.  One whose write would roll a patch
	 * back is written again later anyway, and what it waits for is
	 * often ready too but further down the list: left for a later
	 * round, it may go whole then.  Only if the list runs out before the
	 * round is full are such blocks taken (a second pass), so a round
	 * never comes out empty for it.  A block left out goes to the
	 * ready list's tail when what it waits for is ready
	 * (requeue_passed()); any other is left out one round at most in a
	 * row: left out for longer, a block whose waits are far off holds
	 * its patches and their undo data all along (PostMark's engine
	 * memory went from 3.7% to 13% of its dirty data).  A targeted
	 * round takes what it needs as it comes. */
	whole_only = limit == UINT64_MAX && c->nready > c->opts.round_max_blocks;
again:
	for (next = c->ready_head; next && n < c->opts.round_max_blocks;) {
		struct cblock *b = next;
		size_t start = c->r_np;
		uint8_t *copy;

		next = b->rnext;

		if (grow_vec(&c->r_patches, &c->r_cap, c->r_np + b->npatches) ||
		    grow_vec(&c->r_roll, &c->r_rollcap, b->npatches))
			break;
		useful = choose_patches(c, b, limit);
		if (!useful || (whole_only && c->r_nroll && !(b->flags & BF_PASSED))) {
			if (useful) {
				b->flags |= BF_PASSED | BF_REQUEUE;
				passed = true;
			}
			/* nothing wanted here (or not in this pass): undo
			 * the choice */
			for (i = start; i < c->r_np; i++)
				c->r_patches[i]->flags &= ~PF_INFLIGHT;
			c->r_np = start;
			continue;
		}
		b->flags = (uint16_t)((b->flags | BF_INFLIGHT) & ~(BF_PASSED | BF_REQUEUE));
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
	if (whole_only && n < c->opts.round_max_blocks) {
		whole_only = false;
		goto again;
	}
	if (passed)
		requeue_passed(c, n);
	c->r_pstart[n] = c->r_np;
	defer_blocks(c, &n, &nrolled, limit);
	for (i = 0; i < n; i++)
		c->r_blocks[i]->defers = 0;
	if (n == 0) {
		if (nwritten)
			*nwritten = 0;
		return c->ready_head && limit == UINT64_MAX ? -ENOMEM : 0;
	}

	c->round_busy = true;
	c->ninflight = n;
	io_unlock(c);
	/* A network device that lost its connection and made a new one may
	 * have lost writes of this round with the old one: the copies are
	 * still here and unchanged, so the round goes again as a whole
	 * (bdev.h; the device bounds the retries). */
	do {
		werr = bdev_write(c->dev, c->r_writes, n);
		err = werr ? werr : bdev_barrier(c->dev);
	} while (err == -ECONNRESET);
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
			block_prune_committed(c, b, &c->r_patches[c->r_pstart[i]],
					      c->r_pstart[i + 1] - c->r_pstart[i]);
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

int cache_prepare(struct cache *c, const uint64_t *blkno, const uint64_t *count, size_t n)
{
	bool taken, wrote, any = false;
	int err = 0;

	cache_lock(c, &taken);
	if (cache_reentered(c)) {
		cache_unlock(c, taken);
		return -EDEADLK;
	}
	while (c->round_busy)
		pthread_cond_wait(&c->round_cond, &c->lock);
	c->round_busy = true;
	io_unlock(c);
	for (size_t i = 0; i < n && !err; i++) {
		err = bdev_prepare(c->dev, blkno[i], count[i], &wrote);
		any |= wrote;
	}
	if (any)
		err = bdev_barrier(c->dev);
	io_lock(c);
	/* a round of its own, so that the counters hold every barrier the
	 * device saw */
	if (any) {
		c->st.rounds++;
		if (err)
			c->st.barrier_errors++;
		else
			c->st.barriers++;
	}
	c->round_busy = false;
	pthread_cond_broadcast(&c->round_cond);
	cache_unlock(c, taken);
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

/* One step of a sync: wait for the round in flight if there is one, or
 * else write a round.  For a sync of p (NULL: of everything), the round
 * writes only what is older than p, since everything p depends on is;
 * should that find nothing, a full round makes sure of progress.  0 to
 * look again, -EAGAIN if nothing can become ready (what is left dirty
 * waits for a held empty patch), or another -errno. */
static int sync_step(struct cache *c, const struct patch *p)
{
	size_t nw;
	int err;

	if (cache_reentered(c))
		return -EDEADLK;
	if (!c->ready_head) {
		if (!c->round_busy)
			return -EAGAIN;
		pthread_cond_wait(&c->round_cond, &c->lock);
		return 0;
	}
	if (!p)
		return round_locked(c, NULL, UINT64_MAX);
	err = round_locked(c, &nw, p->seq + 1);
	if (!err && nw == 0 && !(p->flags & PF_COMMITTED))
		err = round_locked(c, NULL, UINT64_MAX);
	return err;
}

int cache_sync(struct cache *c)
{
	bool taken;
	int err = 0;

	cache_lock(c, &taken);
	c->nsyncs++;
	while (c->ndirty > 0 && !err)
		err = sync_step(c, NULL);
	if (--c->nsyncs == 0)
		slack_free(c);
	cache_unlock(c, taken);
	return err;
}

int cache_sync_patch(struct cache *c, struct patch *p)
{
	bool taken;
	int err = 0;

	if (!p)
		return 0;
	cache_lock(c, &taken);
	/* A held patch cannot commit, but once its befores have, everything
	 * it stands for is durable. */
	while (!(p->flags & PF_COMMITTED) && !((p->flags & PF_HELD) && is_root(p)) && !err)
		err = sync_step(c, p);
	cache_unlock(c, taken);
	return err;
}

/* ---- the flusher ------------------------------------------------------- */

/* After a failed round the flusher waits this long before the next, twice
 * as long after each failure in a row, up to a second (or the interval
 * when that is shorter). */
#define FLUSH_BACKOFF_MIN_MS 50u
#define FLUSH_BACKOFF_MAX_MS 1000u

static struct timespec after_ms(unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static void *flusher_main(void *arg)
{
	struct cache *c = arg;
	unsigned backoff = 0, cap;

	cap = c->opts.flush_interval_ms < FLUSH_BACKOFF_MAX_MS ? c->opts.flush_interval_ms
							       : FLUSH_BACKOFF_MAX_MS;
	if (cap == 0)
		cap = 1;
	io_lock(c);
	while (!c->flusher_stop) {
		bool pressed;
		int err = 0;

		if (backoff) {
			/* The failed round left its blocks dirty and ready:
			 * neither they nor a writer's kick start the next
			 * round before the backoff is over, so a device
			 * that fails every write sees a few rounds a
			 * second, never a spin. */
			struct timespec ts = after_ms(backoff);

			while (!c->flusher_stop &&
			       pthread_cond_timedwait(&c->flush_cond, &c->lock, &ts) != ETIMEDOUT)
				;
			c->flusher_kick = false;
		} else if (!c->flusher_kick) {
			struct timespec ts = after_ms(c->opts.flush_interval_ms);

			pthread_cond_timedwait(&c->flush_cond, &c->lock, &ts);
		}
		pressed = c->flusher_kick && !c->flusher_full;
		c->flusher_kick = false;
		c->flusher_full = false;
		/* Write everything writable, including what becomes
		 * writable as rounds commit; woken by memory pressure, only
		 * while it lasts (flush_pressed()). */
		while (!c->flusher_stop && c->ready_head) {
			if (pressed && !flush_pressed(c))
				break;
			err = round_locked(c, NULL, UINT64_MAX);
			if (err)
				break;
		}
		if (!err)
			backoff = 0;
		else if (!backoff)
			backoff = FLUSH_BACKOFF_MIN_MS < cap ? FLUSH_BACKOFF_MIN_MS : cap;
		else
			backoff = backoff * 2 < cap ? backoff * 2 : cap;
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
	c->flusher_full = false;
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
