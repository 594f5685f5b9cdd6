/* Self-checks of the overlap index: see ovcheck.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cache_int.h"
#include "engine/ovcheck.h"

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (struct patch *const *)a;
	uintptr_t y = (uintptr_t) * (struct patch *const *)b;

	return x < y ? -1 : x > y;
}

static bool in_set(struct patch *const *v, size_t n, const struct patch *p)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == p)
			return true;
	return false;
}

/* From b's whole list: S = the soft patches overlapping the span (for a bit
 * flip, a bit patch only if it flips one of the same bits); the befores =
 * the members of S none of whose newest 8 afters is in S (already_before()'s
 * pruning: a later member waiting for q stands for it); cand = the newest
 * soft patch overlapping the change's own bytes.  -1 if out of memory. */
static int brute(struct cblock *b, enum patch_type type, uint32_t off, uint32_t len, uint32_t mask,
		 uint32_t soff, uint32_t slen, struct patch ***outp, size_t *np,
		 struct patch **cand)
{
	struct patch **s, **out, *q;
	size_t ns = 0, n = 0;

	*cand = NULL;
	s = calloc(b->npatches + 1, sizeof(*s));
	out = calloc(b->npatches + 1, sizeof(*out));
	if (!s || !out) {
		free(s);
		free(out);
		return -1;
	}
	for (q = b->phead; q; q = q->bnext) {
		if ((q->flags & PF_HARD) || !overlaps(q, soff, slen))
			continue;
		if (overlaps(q, off, len))
			*cand = q;
		if (type == PT_BIT && q->type == PT_BIT && !(patch_bit_mask(q, off) & mask))
			continue;
		s[ns++] = q;
	}
	for (size_t i = 0; i < ns; i++) {
		uint32_t k = s[i]->nafters, lo = k > 8 ? k - 8 : 0;
		bool implied = false;

		for (uint32_t j = lo; j < k && !implied; j++)
			implied = in_set(s, ns, patch_after(s[i], j));
		if (!implied)
			out[n++] = s[i];
	}
	free(s);
	qsort(out, n, sizeof(*out), cmp_ptr);
	*outp = out;
	*np = n;
	return 0;
}

int ovcheck_change(struct cache *c, struct cblock *b, bool bit, uint32_t off, uint32_t len,
		   uint32_t mask, uint32_t soff, uint32_t slen, struct ovcheck_seen *seen,
		   char *err, size_t errlen)
{
	enum patch_type type = bit ? PT_BIT : PT_BYTE;
	uint32_t sixty4th = c->bs / OVIX_SLOTS;
	struct patch **want, *wcand, *cand;
	struct depset ov;
	size_t n;
	int r = 0;
	bool taken;

	cache_lock(c, &taken);
	if (brute(b, type, off, len, mask, soff, slen, &want, &n, &wcand) < 0) {
		cache_unlock(c, taken);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int linear = 0; linear < 2 && r == 0; linear++) {
		depset_init(&ov);
		if (same_block_befores(c, b, type, off, len, mask, soff, slen, linear, &ov,
				       &cand)) {
			snprintf(err, errlen, "same_block_befores failed");
			r = -1;
			break;
		}
		if (!linear && b->ovix && (soff + slen - 1) / sixty4th - soff / sixty4th < 4)
			seen->indexed++;
		qsort(ov.v, ov.n, sizeof(*ov.v), cmp_ptr);
		if (ov.n != n || (n && memcmp(ov.v, want, n * sizeof(*want))) || cand != wcand) {
			snprintf(err, errlen,
				 "mismatch (%s) at change %zu: type %d [%u,+%u) span [%u,+%u) "
				 "mask %#x: %zu befores, want %zu; cand %s",
				 linear ? "list" : "index", seen->compared, (int)type, off, len,
				 soff, slen, mask, ov.n, n, cand == wcand ? "same" : "differs");
			r = -1;
		}
		if (ov.v != ov.inl)
			free(ov.v);
	}
	if (b->npatches > seen->longest)
		seen->longest = b->npatches;
	cache_unlock(c, taken);
	free(want);
	seen->compared++;
	seen->nonempty += n > 0;
	return r;
}

/* Whether a newer soft byte patch of q's block over all of q's range is
 * among q's 8 newest afters: no change waits for q directly then. */
static bool covered(const struct patch *q)
{
	uint32_t k = q->nafters, lo = k > 8 ? k - 8 : 0;

	for (uint32_t j = lo; j < k; j++) {
		const struct patch *a = patch_after(q, j);

		if (a->block == q->block && a->type == PT_BYTE &&
		    !(a->flags & (PF_HARD | PF_COMMITTED)) && a->off <= q->off &&
		    a->off + patch_len(a) >= q->off + patch_len(q))
			return true;
	}
	return false;
}

/* (A patch that became covered when an after of it grew may stay listed:
 * the index may list more than it needs, never less.) */
int ovcheck_index(struct cache *c, uint64_t blkno, struct ovcheck_seen *seen, char *err,
		  size_t errlen)
{
	uint32_t sixty4th = c->bs / OVIX_SLOTS;
	struct cblock *b;
	int r = 0;
	bool taken;

	cache_lock(c, &taken);
	b = cache_find_locked(c, blkno);
	if (!b || !b->ovix)
		goto out;
	for (uint32_t i = 0; i < OVIX_SLOTS && r == 0; i++) {
		const struct ovslot *s = &b->ovix[i];
		uint32_t k = 0;

		for (struct patch *q = b->phead; q; q = q->bnext) {
			if ((q->flags & PF_COVERED) && !covered(q)) {
				snprintf(err, errlen,
					 "block %llu: a patch left out of the index is not covered",
					 (unsigned long long)blkno);
				r = -1;
				break;
			}
			seen->covered += i == 0 && (q->flags & PF_COVERED);
			if ((q->flags & (PF_HARD | PF_COVERED)) || q->off / sixty4th > i ||
			    (q->off + patch_len(q) - 1) / sixty4th < i)
				continue;
			if (k >= s->n || s->v[k] != q) {
				snprintf(err, errlen,
					 "index of block %llu, 64th %u, entry %u: not the list's",
					 (unsigned long long)blkno, i, k);
				r = -1;
				break;
			}
			k++;
		}
		if (r == 0 && k != s->n) {
			snprintf(err, errlen, "index of block %llu, 64th %u: %u entries, want %u",
				 (unsigned long long)blkno, i, s->n, k);
			r = -1;
		}
	}
	seen->blocks_indexed++;
out:
	cache_unlock(c, taken);
	return r;
}

void ovcheck_set_min(struct cache *c, uint32_t n)
{
	bool taken;

	cache_lock(c, &taken);
	c->ovix_min = n;
	cache_unlock(c, taken);
}

bool ovcheck_patch_free(const struct patch *p)
{
	return !(p->flags & (PF_COMMITTED | PF_PINNED | PF_HELD));
}
