/* ext2: extended attributes, in the format Linux and e2fsprogs use
 * (doc/ext2-xattr.md).
 *
 * An inode's attributes live in two places: the space after i_extra_isize
 * in a large inode (a 4-byte magic, then entries and their values), and one
 * attribute block that i_file_acl points to (a 32-byte header with a
 * reference count, then entries, values from the end down).  Blocks with
 * the same attributes are shared between inodes, found through an
 * in-memory index by content hash (Linux's mbcache).
 *
 * Every change rebuilds the inode's whole set.  A changed block is never
 * rewritten in place: the new set goes into a new (or an identical shared)
 * block, and the inode switches to it in one inode patch, which also
 * carries the in-inode part, i_blocks and ctime, so that no crash shows
 * half of a set.  The soft-updates rules (design.md §4, fstitch(7)):
 *   - a new block is written (and its bitmap bit set) before the inode
 *     points to it;
 *   - a shared block's reference count is raised before a second inode
 *     points to it, and lowered only after that inode's pointer is gone;
 *   - a block is freed only after every pointer to it is gone on disk:
 *     the free waits for the last pointer's removal and for every earlier
 *     lowering of the count (each of which waited for its own removal).
 * A count on disk that is too high after a crash is benign (e2fsck lowers
 * it); too low would let a later free leave a pointer to a free block. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "e2_int.h"
#include "util/bytes.h"
#include "util/grow.h"

#define XA_MAGIC   0xEA020000u
#define XA_HDR	   32 /* block header */
#define XA_ENT	   16 /* entry without its name */
#define XA_PAD(n)  (((n) + 3u) & ~3u)
#define XA_ELEN(n) XA_PAD(XA_ENT + (n))
#define XA_REFMAX  1024 /* as Linux: no more sharers per block */
#define XA_BUCKETS 4096
#define XA_EXTRA   32 /* i_extra_isize given to a large inode with none */

/* ---- names --------------------------------------------------------------- */

enum {
	XI_USER = 1,
	XI_ACL_ACCESS = 2,
	XI_ACL_DEFAULT = 3,
	XI_TRUSTED = 4,
	XI_SECURITY = 6,
};

static const struct {
	uint8_t idx;
	const char *prefix;
	bool whole; /* the prefix is the whole name */
} xprefix[] = {
    {XI_USER, "user.", false},
    {XI_ACL_ACCESS, "system.posix_acl_access", true},
    {XI_ACL_DEFAULT, "system.posix_acl_default", true},
    {XI_TRUSTED, "trusted.", false},
    {XI_SECURITY, "security.", false},
};

/* Split a full name into index and suffix: 0, -EOPNOTSUPP for a prefix
 * ext2 does not store, -EINVAL for an empty suffix, -ERANGE when too long. */
static int xname(const char *name, uint8_t *idx, const char **suffix, size_t *len)
{
	size_t n = strlen(name);

	if (n == 0)
		return -ERANGE;
	if (n > 255)
		return -ERANGE;
	for (size_t i = 0; i < sizeof(xprefix) / sizeof(xprefix[0]); i++) {
		size_t pl = strlen(xprefix[i].prefix);

		if (xprefix[i].whole ? strcmp(name, xprefix[i].prefix) != 0
				     : strncmp(name, xprefix[i].prefix, pl) != 0)
			continue;
		if (!xprefix[i].whole && n == pl)
			return -EINVAL;
		*idx = xprefix[i].idx;
		*suffix = name + pl;
		*len = n - pl;
		return 0;
	}
	return -EOPNOTSUPP;
}

static const char *xprefix_of(uint8_t idx)
{
	for (size_t i = 0; i < sizeof(xprefix) / sizeof(xprefix[0]); i++)
		if (xprefix[i].idx == idx)
			return xprefix[i].prefix;
	return NULL;
}

/* ---- the decoded set ---------------------------------------------------- */

struct xa {
	uint8_t idx, nlen;
	bool inode; /* placed in the inode (layout) */
	char name[256];
	uint32_t vlen;
	uint8_t *val;
};

struct xaset {
	struct xa *a;
	size_t n, cap;
};

static void set_free(struct xaset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->a[i].val);
	free(s->a);
	s->a = NULL;
	s->n = s->cap = 0;
}

/* Linux's order within a block: index, name length, name. */
static int xcmp(uint8_t ia, size_t la, const char *na, const struct xa *b)
{
	if (ia != b->idx)
		return ia < b->idx ? -1 : 1;
	if (la != b->nlen)
		return la < b->nlen ? -1 : 1;
	return memcmp(na, b->name, la);
}

/* Index of the entry or where it would go (*found says which). */
static size_t set_find(const struct xaset *s, uint8_t idx, const char *name, size_t len,
		       bool *found)
{
	size_t i;

	*found = false;
	for (i = 0; i < s->n; i++) {
		int c = xcmp(idx, len, name, &s->a[i]);

		if (c == 0)
			*found = true;
		if (c <= 0)
			break;
	}
	return i;
}

static int set_insert(struct xaset *s, size_t at, uint8_t idx, const char *name, size_t len,
		      const void *val, size_t vlen)
{
	struct xa *x;
	uint8_t *v = NULL;

	if (GROW(&s->a, &s->cap, s->n + 1, 8))
		return -ENOMEM;
	if (vlen) {
		v = malloc(vlen);
		if (!v)
			return -ENOMEM;
		memcpy(v, val, vlen);
	}
	memmove(&s->a[at + 1], &s->a[at], (s->n - at) * sizeof(*x));
	x = &s->a[at];
	memset(x, 0, sizeof(*x));
	x->idx = idx;
	x->nlen = (uint8_t)len;
	memcpy(x->name, name, len);
	x->vlen = (uint32_t)vlen;
	x->val = v;
	s->n++;
	return 0;
}

static void set_remove(struct xaset *s, size_t at)
{
	free(s->a[at].val);
	memmove(&s->a[at], &s->a[at + 1], (s->n - at - 1) * sizeof(s->a[0]));
	s->n--;
}

/* ---- hashes (Linux's ext2_xattr_hash_entry and ext2_xattr_rehash) -------- */

static uint32_t hash_entry(const struct xa *x)
{
	uint32_t h = 0;

	for (size_t i = 0; i < x->nlen; i++)
		h = (h << 5) ^ (h >> 27) ^ (uint8_t)x->name[i];
	for (size_t i = 0; i < XA_PAD(x->vlen); i += 4) {
		uint32_t w = 0;

		for (size_t k = 0; k < 4 && i + k < x->vlen; k++)
			w |= (uint32_t)x->val[i + k] << (8 * k);
		h = (h << 16) ^ (h >> 16) ^ w;
	}
	return h;
}

/* ---- parsing ----------------------------------------------------------- */

struct span {
	uint32_t lo, hi;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Decode the entries in buf[start, end); values are at vbase + e_value_offs.
 * Every field is checked: entries inside the region and ended by a zero
 * word, values inside it, after the entries and not overlapping. */
static int parse(struct e2fs *fs, const uint8_t *buf, uint32_t start, uint32_t end, uint32_t vbase,
		 bool inode, struct xaset *s, const char *what)
{
	struct span sp[256];
	size_t nsp = 0;
	uint32_t p = start;
	int r;

	for (;;) {
		uint32_t nlen, voffs, vlen;
		bool found;
		size_t at;

		if (p + 4 > end)
			return e2_err(fs, -EIO, "%s: entries run past the end", what);
		if (ld_le32(buf + p) == 0)
			break;
		if (p + XA_ENT > end)
			return e2_err(fs, -EIO, "%s: entries run past the end", what);
		nlen = buf[p];
		if (p + XA_ELEN(nlen) + 4 > end)
			return e2_err(fs, -EIO, "%s: entries run past the end", what);
		voffs = ld_le16(buf + p + 2);
		if (ld_le32(buf + p + 4))
			return e2_err(fs, -EIO, "%s: value in an inode (ea_inode) is not supported",
				      what);
		vlen = ld_le32(buf + p + 8);
		if (vlen) {
			if ((uint64_t)vbase + voffs + vlen > end)
				return e2_err(fs, -EIO, "%s: value past the end", what);
			if (nsp == sizeof(sp) / sizeof(sp[0]))
				return e2_err(fs, -EIO, "%s: too many entries", what);
			sp[nsp].lo = vbase + voffs;
			sp[nsp].hi = vbase + voffs + vlen;
			nsp++;
		}
		at = set_find(s, buf[p + 1], (const char *)buf + p + XA_ENT, nlen, &found);
		if (found)
			return e2_err(fs, -EIO, "%s: a name appears twice", what);
		r = set_insert(s, at, buf[p + 1], (const char *)buf + p + XA_ENT, nlen,
			       buf + vbase + voffs, vlen);
		if (r)
			return r;
		s->a[at].inode = inode;
		p += XA_ELEN(nlen);
	}
	qsort(sp, nsp, sizeof(sp[0]), span_cmp);
	for (size_t i = 0; i < nsp; i++) {
		if (sp[i].lo < p + 4)
			return e2_err(fs, -EIO, "%s: value overlaps the entries", what);
		if (i && sp[i].lo < sp[i - 1].hi)
			return e2_err(fs, -EIO, "%s: values overlap", what);
	}
	return 0;
}

/* Where in-inode attributes start in a large inode (the magic), or 0 if the
 * inode has no room (small inodes, i_extra_isize 0 or bad). */
static uint32_t ibody(const struct e2fs *fs, const uint8_t *raw)
{
	uint32_t extra;

	if (fs->isize <= EXT2_GOOD_OLD_INODE_SIZE)
		return 0;
	extra = ld_le16(raw + EXT2_GOOD_OLD_INODE_SIZE);
	if (extra == 0 || (extra & 3) || EXT2_GOOD_OLD_INODE_SIZE + extra + 4 + 4 > fs->isize)
		return 0;
	return EXT2_GOOD_OLD_INODE_SIZE + extra;
}

/* ---- the sharing index (mbcache) ---------------------------------------- */

struct e2_xblk {
	struct e2_xblk *bnext, *hnext;
	uint32_t blk, hash;
	struct patch *init;  /* contents written (until committed) */
	struct patch *drops; /* every lowering of the count so far */
};

static int xidx_init(struct e2fs *fs)
{
	if (fs->xbtab)
		return 0;
	fs->xbtab = calloc(XA_BUCKETS, sizeof(*fs->xbtab));
	fs->xhtab = calloc(XA_BUCKETS, sizeof(*fs->xhtab));
	if (!fs->xbtab || !fs->xhtab) {
		free(fs->xbtab);
		free(fs->xhtab);
		fs->xbtab = fs->xhtab = NULL;
		return -ENOMEM;
	}
	return 0;
}

static struct e2_xblk *xidx_find(struct e2fs *fs, uint32_t blk)
{
	struct e2_xblk *x;

	if (!fs->xbtab)
		return NULL;
	for (x = fs->xbtab[blk % XA_BUCKETS]; x; x = x->bnext)
		if (x->blk == blk)
			return x;
	return NULL;
}

static int xidx_add(struct e2fs *fs, uint32_t blk, uint32_t hash, struct patch *init,
		    struct e2_xblk **out)
{
	struct e2_xblk *x = xidx_find(fs, blk);
	int r;

	if (x) {
		if (out)
			*out = x;
		return 0;
	}
	r = xidx_init(fs);
	if (r)
		return r;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->blk = blk;
	x->hash = hash;
	if (init && !patch_committed(init)) {
		patch_retain(init);
		x->init = init;
	}
	x->bnext = fs->xbtab[blk % XA_BUCKETS];
	fs->xbtab[blk % XA_BUCKETS] = x;
	x->hnext = fs->xhtab[hash % XA_BUCKETS];
	fs->xhtab[hash % XA_BUCKETS] = x;
	fs->xcount++;
	if (out)
		*out = x;
	return 0;
}

static void xidx_del(struct e2fs *fs, struct e2_xblk *x)
{
	struct e2_xblk **pp;

	for (pp = &fs->xbtab[x->blk % XA_BUCKETS]; *pp != x; pp = &(*pp)->bnext)
		;
	*pp = x->bnext;
	for (pp = &fs->xhtab[x->hash % XA_BUCKETS]; *pp != x; pp = &(*pp)->hnext)
		;
	*pp = x->hnext;
	patch_release(fs->c, x->init);
	patch_release(fs->c, x->drops);
	free(x);
	fs->xcount--;
}

void e2_xattr_destroy(struct e2fs *fs)
{
	if (!fs->xbtab)
		return;
	for (size_t i = 0; i < XA_BUCKETS; i++)
		while (fs->xbtab[i])
			xidx_del(fs, fs->xbtab[i]);
	free(fs->xbtab);
	free(fs->xhtab);
	fs->xbtab = fs->xhtab = NULL;
}

static bool __attribute__((unused)) e2_xattr_is_block(struct e2fs *fs, uint32_t blk)
{
	return xidx_find(fs, blk) != NULL;
}

/* Add p to x's lowerings (a later free must wait for all of them). */
static int xidx_drop(struct e2fs *fs, struct e2_xblk *x, struct patch *p)
{
	struct patch *d[2];
	struct patch *np = NULL;
	size_t n = 0;
	int r;

	e2_patch_drop_committed(fs, &x->drops);
	if (!p || patch_committed(p))
		return 0;
	if (x->drops)
		d[n++] = x->drops;
	d[n++] = p;
	if (n == 1) {
		patch_retain(p);
		x->drops = p;
		return 0;
	}
	r = patch_create_empty(fs->c, d, n, &np);
	if (r)
		return r;
	patch_release(fs->c, x->drops);
	x->drops = np;
	return 0;
}

/* ---- loading an inode's attributes -------------------------------------- */

/* Read and check ip's attribute block into s; 0 and *hash. */
static int load_block(struct e2fs *fs, struct e2_inode *ip, uint32_t blk, struct xaset *s)
{
	char what[64];
	struct cblock *b;
	const uint8_t *d;
	int r;

	snprintf(what, sizeof(what), "inode %u: attribute block %u", ip->ino, blk);
	if (!e2_block_ok(fs, blk))
		return e2_err(fs, -EIO, "%s: out of range", what);
	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "%s: cannot read", what);
	d = cblock_data(b);
	if (ld_le32(d) != XA_MAGIC)
		r = e2_err(fs, -EIO, "%s: bad magic 0x%08x", what, ld_le32(d));
	else if (ld_le32(d + 4) == 0)
		r = e2_err(fs, -EIO, "%s: reference count 0", what);
	else if (ld_le32(d + 8) != 1)
		r = e2_err(fs, -EIO, "%s: h_blocks %u is not 1", what, ld_le32(d + 8));
	else
		r = parse(fs, d, XA_HDR, fs->bs, 0, false, s, what);
	if (!r)
		r = xidx_add(fs, blk, ld_le32(d + 12), NULL, NULL);
	if (!r)
		cblock_set_kind(b, CBK_XATTR);
	cache_put(fs->c, b);
	return r;
}

/* ip's whole set: in-inode entries first, then the block's.  *raw gets a
 * new copy of the on-disk inode (fs->isize bytes).  The caller frees *raw
 * and s, also on failure. */
static int load(struct e2fs *fs, struct e2_inode *ip, uint8_t **raw, struct xaset *s)
{
	uint32_t body, blk = le32toh(ip->d.i_file_acl);
	int r;

	*raw = malloc(fs->isize);
	if (!*raw)
		return -ENOMEM;
	r = e2_iraw(fs, ip->ino, *raw, fs->isize);
	if (r)
		return r;
	body = ibody(fs, *raw);
	if (body && ld_le32(*raw + body) == XA_MAGIC) {
		char what[64];

		snprintf(what, sizeof(what), "inode %u: in-inode attributes", ip->ino);
		r = parse(fs, *raw, body + 4, fs->isize, body + 4, true, s, what);
		if (r)
			return r;
	}
	if (blk) {
		struct xaset bs = {0};

		r = load_block(fs, ip, blk, &bs);
		for (size_t i = 0; !r && i < bs.n; i++) {
			bool found;
			size_t at = set_find(s, bs.a[i].idx, bs.a[i].name, bs.a[i].nlen, &found);

			if (found)
				r = e2_err(fs, -EIO, "inode %u: attribute in both inode and block",
					   ip->ino);
			else
				r = set_insert(s, at, bs.a[i].idx, bs.a[i].name, bs.a[i].nlen,
					       bs.a[i].val, bs.a[i].vlen);
		}
		set_free(&bs);
	}
	return r;
}

/* ---- layout ------------------------------------------------------------- */

static uint32_t xsize(const struct xa *x)
{
	return XA_ELEN(x->nlen) + XA_PAD(x->vlen);
}

/* Write the entries of s marked `inode` (or not) into buf[start, end),
 * values from the end down, offsets from vbase.  Returns false if they do
 * not fit. */
static bool build(const struct xaset *s, bool inode, uint8_t *buf, uint32_t start, uint32_t end,
		  uint32_t vbase, uint32_t *hash)
{
	uint32_t p = start, v = end, h = 0;

	memset(buf + start, 0, end - start);
	for (size_t i = 0; i < s->n; i++) {
		const struct xa *x = &s->a[i];
		uint32_t eh;

		if (x->inode != inode)
			continue;
		if (p + XA_ELEN(x->nlen) + 4 + XA_PAD(x->vlen) > v)
			return false;
		v -= XA_PAD(x->vlen);
		buf[p] = x->nlen;
		buf[p + 1] = x->idx;
		st_le16(buf + p + 2, x->vlen ? (uint16_t)(v - vbase) : 0);
		st_le32(buf + p + 8, x->vlen);
		eh = hash_entry(x);
		st_le32(buf + p + 12, eh);
		memcpy(buf + p + XA_ENT, x->name, x->nlen);
		if (x->vlen)
			memcpy(buf + v, x->val, x->vlen);
		h = (h << 16) ^ (h >> 16) ^ eh;
		p += XA_ELEN(x->nlen);
	}
	if (hash)
		*hash = h;
	return true;
}

/* Choose what goes into the inode (room: bytes for entries, terminator and
 * values) and what into the block; -ENOSPC when the rest does not fit in
 * one block.  *nblock gets the count of block entries. */
static int place(struct e2fs *fs, struct xaset *s, uint32_t room, size_t *nblock)
{
	uint32_t used = 4, bused = 4;

	*nblock = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct xa *x = &s->a[i];

		x->inode = room && used + xsize(x) <= room;
		if (x->inode) {
			used += xsize(x);
		} else {
			bused += xsize(x);
			(*nblock)++;
		}
	}
	if (*nblock && bused > fs->bs - XA_HDR)
		return -ENOSPC;
	return 0;
}

/* ---- writing ------------------------------------------------------------ */

/* Find a block in the index with exactly these contents (the header's
 * count aside) that can take another inode. */
static struct e2_xblk *share_find(struct e2fs *fs, const uint8_t *img, uint32_t hash, uint32_t self)
{
	if (!fs->xhtab)
		return NULL;
	for (struct e2_xblk *x = fs->xhtab[hash % XA_BUCKETS]; x; x = x->hnext) {
		struct cblock *b;
		bool same;

		if (x->hash != hash || x->blk == self)
			continue;
		if (cache_get(fs->c, x->blk, &b))
			continue;
		same = ld_le32(cblock_data(b)) == XA_MAGIC &&
		       ld_le32(cblock_data(b) + 4) < XA_REFMAX && ld_le32(cblock_data(b) + 4) > 0 &&
		       memcmp(cblock_data(b) + 8, img + 8, fs->bs - 8) == 0;
		cache_put(fs->c, b);
		if (same)
			return x;
	}
	return NULL;
}

/* Drop one reference to blk, whose pointer `gone` removed: lower the count
 * after it, or with the last reference free the block after it and after
 * every earlier lowering. */
static int unref_block(struct e2fs *fs, uint32_t ino, uint32_t blk, struct patch *gone)
{
	struct e2_xblk *x = xidx_find(fs, blk);
	struct e2_deps d = {0};
	struct cblock *b;
	uint32_t refs, magic, hash;
	int r;

	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "inode %u: cannot read attribute block %u", ino, blk);
	magic = ld_le32(cblock_data(b));
	refs = ld_le32(cblock_data(b) + 4);
	hash = ld_le32(cblock_data(b) + 12);
	cache_put(fs->c, b);
	if (magic != XA_MAGIC || refs == 0)
		return e2_err(fs, -EIO, "inode %u: bad attribute block %u", ino, blk);
	if (refs == 1) {
		struct patch *clear = NULL;

		if (x && x->drops && !patch_committed(x->drops)) {
			struct patch *dd[2] = {x->drops, gone};
			size_t n = gone && !patch_committed(gone) ? 2 : 1;

			r = patch_create_empty(fs->c, dd, n, &clear);
			if (r)
				return r;
		} else if (gone) {
			patch_retain(gone);
			clear = gone;
		}
		if (x)
			xidx_del(fs, x);
		r = e2_bfree(fs, blk, clear);
		patch_release(fs->c, clear);
		return r;
	}
	{
		uint32_t nv = htole32(refs - 1);
		struct patch *p = NULL;

		r = e2_deps_addref(&d, gone);
		if (!r)
			r = e2_patch(fs, blk, 4, 4, &nv, &d, &p);
		e2_deps_free(fs, &d);
		if (!r && !x)
			r = xidx_add(fs, blk, hash, NULL, &x);
		if (!r)
			r = xidx_drop(fs, x, p);
		patch_release(fs->c, p);
	}
	return r;
}

/* Store s as ip's attributes, with the inode changed as in *nw (mode,
 * times: the caller's part of the same change), in one inode patch. */
static int store(struct e2fs *fs, struct e2_inode *ip, uint8_t *raw, struct xaset *s,
		 struct ext2_inode_large *nw)
{
	uint32_t oldblk = le32toh(ip->d.i_file_acl), newblk = 0, body, room = 0, hash = 0;
	uint32_t blk, off, sectors = fs->bs / 512;
	uint8_t *img = NULL, *nraw = NULL;
	struct e2_deps deps = {0};
	struct patch *bit = NULL, *init = NULL, *raise = NULL, *ipatch = NULL;
	size_t nblock;
	bool extra_set = false;
	int r;

	ip->nocaps = false;

	/* room in the inode: use i_extra_isize as it is, or give a large
	 * inode with none the standard 32 bytes (zeros: no extra times) */
	body = ibody(fs, raw);
	if (!body && fs->isize >= EXT2_GOOD_OLD_INODE_SIZE + XA_EXTRA + 8 &&
	    ld_le16(raw + EXT2_GOOD_OLD_INODE_SIZE) == 0) {
		body = EXT2_GOOD_OLD_INODE_SIZE + XA_EXTRA;
		extra_set = true;
	}
	if (body)
		room = fs->isize - body - 4;
	r = place(fs, s, room, &nblock);
	if (r)
		return r;
	if (s->n) {
		struct patch *feat = NULL;

		r = e2_sb_set_ext_attr(fs, &feat);
		if (!r)
			r = e2_deps_add(&deps, feat);
		if (r) {
			patch_release(fs->c, feat);
			return r;
		}
	}
	nraw = malloc(fs->isize);
	img = malloc(fs->bs);
	if (!nraw || !img) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(nraw, raw, fs->isize);
	memcpy(nraw, nw, fs->icore);
	if (body) {
		bool any = nblock < s->n;

		if (any || ld_le32(raw + body) == XA_MAGIC) {
			if (any && extra_set)
				st_le16(nraw + EXT2_GOOD_OLD_INODE_SIZE, XA_EXTRA);
			st_le32(nraw + body, any ? XA_MAGIC : 0);
			if (!build(s, true, nraw, body + 4, fs->isize, body + 4, NULL)) {
				r = -EIO; /* place() said it fits */
				goto out;
			}
		}
	}
	if (nblock) {
		struct e2_xblk *x;

		memset(img, 0, XA_HDR);
		if (!build(s, false, img, XA_HDR, fs->bs, 0, &hash)) {
			r = -ENOSPC;
			goto out;
		}
		st_le32(img, XA_MAGIC);
		st_le32(img + 4, 1);
		st_le32(img + 8, 1);
		st_le32(img + 12, hash);
		if (oldblk) {
			struct cblock *b;
			bool same = false;

			if (cache_get(fs->c, oldblk, &b) == 0) {
				same = memcmp(cblock_data(b) + 8, img + 8, fs->bs - 8) == 0;
				cache_put(fs->c, b);
			}
			if (same)
				newblk = oldblk;
		}
		if (!newblk && (x = share_find(fs, img, hash, oldblk))) {
			struct cblock *b;
			uint32_t nv;

			r = cache_get(fs->c, x->blk, &b);
			if (r)
				goto out;
			nv = htole32(ld_le32(cblock_data(b) + 4) + 1);
			cache_put(fs->c, b);
			e2_patch_drop_committed(fs, &x->init);
			r = e2_deps_addref(&deps, x->init);
			if (!r)
				r = e2_patch(fs, x->blk, 4, 4, &nv, &deps, &raise);
			e2_deps_free(fs, &deps);
			if (r)
				goto out;
			newblk = x->blk;
			r = e2_deps_addref(&deps, x->init);
			if (!r)
				r = e2_deps_add(&deps, raise);
			raise = NULL;
			if (r)
				goto out;
		} else if (!newblk) {
			struct cblock *b;
			uint32_t goal = oldblk ? oldblk : ip->last_pblk;

			r = e2_balloc(fs, goal, &newblk, &bit);
			if (r)
				goto out;
			r = e2_block_init(fs, newblk, img, NULL, &init);
			if (r) {
				e2_bfree(fs, newblk, NULL);
				goto out;
			}
			r = xidx_add(fs, newblk, hash, init, NULL);
			if (!r && cache_get(fs->c, newblk, &b) == 0) {
				cblock_set_kind(b, CBK_XATTR);
				cache_put(fs->c, b);
			}
			if (!r)
				r = e2_deps_add(&deps, bit);
			bit = NULL;
			if (!r)
				r = e2_deps_add(&deps, init);
			init = NULL;
			if (r)
				goto out;
		}
	}
	/* the pointer, i_blocks and the in-inode part change together */
	if (newblk != oldblk) {
		struct ext2_inode *d = (struct ext2_inode *)nraw;
		uint32_t blocks = le32toh(d->i_blocks);

		if (oldblk && blocks >= sectors)
			blocks -= sectors;
		if (newblk)
			blocks += sectors;
		d->i_blocks = htole32(blocks);
		d->i_file_acl = htole32(newblk);
	}
	{
		uint32_t lo = 0, hi = fs->isize;

		while (lo < hi && raw[lo] == nraw[lo])
			lo++;
		while (hi > lo && raw[hi - 1] == nraw[hi - 1])
			hi--;
		if (lo < hi) {
			e2_iloc(fs, ip->ino, &blk, &off);
			r = e2_patch(fs, blk, off + lo, hi - lo, nraw + lo, &deps, &ipatch);
			if (r)
				goto out;
			memcpy(&ip->d, nraw, fs->icore);
			e2_isync_add(fs, ip, ipatch);
		}
	}
	if (oldblk && newblk != oldblk)
		r = unref_block(fs, ip->ino, oldblk, ipatch);
out:
	patch_release(fs->c, ipatch);
	patch_release(fs->c, raise);
	patch_release(fs->c, init);
	patch_release(fs->c, bit);
	e2_deps_free(fs, &deps);
	free(img);
	free(nraw);
	return r;
}

/* ---- ACL helpers (ext2 encoding) ----------------------------------------- */

#define ACL_VERSION 1
enum {
	T_USER_OBJ = 0x01,
	T_USER = 0x02,
	T_GROUP_OBJ = 0x04,
	T_GROUP = 0x08,
	T_MASK = 0x10,
	T_OTHER = 0x20,
};

struct acl_ent {
	uint16_t tag, perm;
	uint32_t id;
};

/* Decode an ext2 ACL (4-byte header, short entries for the owner, group,
 * mask and other, long ones with an id for named users and groups) and
 * check it as Linux's posix_acl_valid does.  Returns the count, or
 * -EINVAL. */
static int acl_decode(const uint8_t *v, size_t n, struct acl_ent *e, size_t max)
{
	size_t p = 4, k = 0;
	int need_mask = 0, have[0x40] = {0};
	uint32_t last_uid = 0, last_gid = 0;
	bool any_u = false, any_g = false;
	uint16_t prev = 0;

	if (n < 4 || ld_le32(v) != ACL_VERSION)
		return -EINVAL;
	while (p < n) {
		uint16_t tag;

		if (p + 4 > n || k == max)
			return -EINVAL;
		tag = ld_le16(v + p);
		e[k].tag = tag;
		e[k].perm = ld_le16(v + p + 2);
		e[k].id = 0;
		if (e[k].perm & ~7u)
			return -EINVAL;
		switch (tag) {
		case T_USER:
		case T_GROUP:
			if (p + 8 > n)
				return -EINVAL;
			e[k].id = ld_le32(v + p + 4);
			p += 8;
			need_mask = 1;
			if (tag == T_USER) {
				if (any_u && e[k].id <= last_uid)
					return -EINVAL;
				any_u = true;
				last_uid = e[k].id;
			} else {
				if (any_g && e[k].id <= last_gid)
					return -EINVAL;
				any_g = true;
				last_gid = e[k].id;
			}
			break;
		case T_USER_OBJ:
		case T_GROUP_OBJ:
		case T_MASK:
		case T_OTHER:
			if (have[tag])
				return -EINVAL;
			have[tag] = 1;
			p += 4;
			break;
		default:
			return -EINVAL;
		}
		if (tag < prev)
			return -EINVAL;
		prev = tag;
		k++;
	}
	if (!have[T_USER_OBJ] || !have[T_GROUP_OBJ] || !have[T_OTHER])
		return -EINVAL;
	if (need_mask && !have[T_MASK])
		return -EINVAL;
	return (int)k;
}

static size_t acl_encode(const struct acl_ent *e, size_t k, uint8_t *v)
{
	size_t p = 4;

	st_le32(v, ACL_VERSION);
	for (size_t i = 0; i < k; i++) {
		st_le16(v + p, e[i].tag);
		st_le16(v + p + 2, e[i].perm);
		if (e[i].tag == T_USER || e[i].tag == T_GROUP) {
			st_le32(v + p + 4, e[i].id);
			p += 8;
		} else {
			p += 4;
		}
	}
	return p;
}

/* The mode bits an access ACL stands for; *equiv if the ACL says nothing
 * more than they do (Linux's posix_acl_equiv_mode). */
static mode_t acl_mode(const struct acl_ent *e, size_t k, bool *equiv)
{
	mode_t m = 0;

	*equiv = true;
	for (size_t i = 0; i < k; i++) {
		switch (e[i].tag) {
		case T_USER_OBJ:
			m |= (mode_t)e[i].perm << 6;
			break;
		case T_GROUP_OBJ:
			m |= (mode_t)e[i].perm << 3;
			break;
		case T_OTHER:
			m |= e[i].perm;
			break;
		case T_MASK:
			m = (m & ~(mode_t)070) | (mode_t)e[i].perm << 3;
			*equiv = false;
			break;
		default:
			*equiv = false;
		}
	}
	return m;
}

/* ---- operations --------------------------------------------------------- */

/* load() for the live inode ino, which *ip gets. */
static int load_ino(struct e2fs *fs, uint32_t ino, struct e2_inode **ip, uint8_t **raw,
		    struct xaset *s)
{
	int r = e2_get_live(fs, ino, ip);

	return r ? r : load(fs, *ip, raw, s);
}

/* Put e (k entries), encoded, in s as the ACL of kind idx, in place of
 * any old one. */
static int set_acl(struct xaset *s, uint8_t idx, const struct acl_ent *e, size_t k)
{
	uint8_t v[4 + 8 * 64];
	size_t n = acl_encode(e, k, v), at;
	bool found;

	at = set_find(s, idx, "", 0, &found);
	if (found)
		set_remove(s, at);
	return set_insert(s, at, idx, "", 0, v, n);
}

ssize_t e2_getxattr(struct e2fs *fs, uint32_t ino, const char *name, void *buf, size_t size)
{
	struct xaset s = {0};
	struct e2_inode *ip;
	const char *suffix;
	uint8_t *raw = NULL, idx;
	size_t len, at;
	bool found;
	ssize_t r;

	r = xname(name, &idx, &suffix, &len);
	if (r)
		return r;
	e2_lock(fs);
	r = load_ino(fs, ino, &ip, &raw, &s);
	if (r)
		goto out;
	at = set_find(&s, idx, suffix, len, &found);
	if (!found)
		r = -ENODATA;
	else if (size == 0)
		r = s.a[at].vlen;
	else if (size < s.a[at].vlen)
		r = -ERANGE;
	else {
		if (s.a[at].vlen)
			memcpy(buf, s.a[at].val, s.a[at].vlen);
		r = s.a[at].vlen;
	}
out:
	e2_unlock(fs);
	set_free(&s);
	free(raw);
	return r;
}

ssize_t e2_listxattr(struct e2fs *fs, uint32_t ino, char *buf, size_t size, bool trusted)
{
	struct xaset s = {0};
	struct e2_inode *ip;
	uint8_t *raw = NULL;
	size_t total = 0;
	ssize_t r;

	e2_lock(fs);
	r = load_ino(fs, ino, &ip, &raw, &s);
	if (r)
		goto out;
	for (size_t i = 0; i < s.n; i++) {
		const char *pre = xprefix_of(s.a[i].idx);
		size_t pl, n;

		if (!pre || (s.a[i].idx == XI_TRUSTED && !trusted))
			continue;
		pl = strlen(pre);
		n = pl + s.a[i].nlen + 1;
		if (size) {
			if (total + n > size) {
				r = -ERANGE;
				goto out;
			}
			memcpy(buf + total, pre, pl);
			memcpy(buf + total + pl, s.a[i].name, s.a[i].nlen);
			buf[total + n - 1] = '\0';
		}
		total += n;
	}
	r = (ssize_t)total;
out:
	e2_unlock(fs);
	set_free(&s);
	free(raw);
	return r;
}

/* Set (val != NULL) or remove one attribute of ip, under the lock. */
static int xset_locked(struct e2fs *fs, struct e2_inode *ip, uint8_t idx, const char *suffix,
		       size_t len, const void *val, size_t size, unsigned flags)
{
	struct xaset s = {0};
	struct ext2_inode_large nw;
	uint8_t *raw = NULL, eacl[4 + 8 * 64];
	mode_t mode = e2_imode(ip);
	size_t at;
	bool found;
	int r;

	r = load(fs, ip, &raw, &s);
	if (r)
		goto out;
	nw = ip->d;
	if (val && (idx == XI_ACL_ACCESS || idx == XI_ACL_DEFAULT)) {
		struct acl_ent e[64];
		int k = acl_decode(val, size, e, 64);
		bool equiv;
		mode_t am;

		if (k < 0) {
			r = k;
			goto out;
		}
		if (idx == XI_ACL_DEFAULT && !S_ISDIR(mode)) {
			r = -EACCES;
			goto out;
		}
		/* re-encode: what is stored is exactly the canonical form */
		size = acl_encode(e, (size_t)k, eacl);
		val = eacl;
		if (idx == XI_ACL_ACCESS) {
			am = acl_mode(e, (size_t)k, &equiv);
			mode = (mode & ~(mode_t)0777) | am;
			if (flags & E2_XATTR_KILL_SGID)
				mode &= ~(mode_t)S_ISGID;
			nw.i_mode = htole16((uint16_t)mode);
			if (equiv)
				val = NULL; /* the mode says it all */
		}
	}
	at = set_find(&s, idx, suffix, len, &found);
	if (found && (flags & E2_XATTR_CREATE)) {
		r = -EEXIST;
		goto out;
	}
	if (!found && (flags & E2_XATTR_REPLACE)) {
		r = -ENODATA;
		goto out;
	}
	if (!val && !found && !(idx == XI_ACL_ACCESS && size)) {
		r = -ENODATA;
		goto out;
	}
	if (found)
		set_remove(&s, at);
	if (val) {
		r = set_insert(&s, at, idx, suffix, len, val, size);
		if (r)
			goto out;
	}
	{
		struct timespec now;

		e2_now_ts(fs, &now);
		e2_iset_time(fs, &nw, E2_T_CTIME, &now);
	}
	r = store(fs, ip, raw, &s, &nw);
out:
	set_free(&s);
	free(raw);
	return r;
}

/* Set (val not NULL) or remove (val NULL) the attribute name of ino. */
static int xchange(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, const char *name,
		   const void *val, size_t size, unsigned flags)
{
	struct e2_inode *ip;
	const char *suffix;
	uint8_t idx;
	size_t len;
	int r;

	r = xname(name, &idx, &suffix, &len);
	if (r)
		return r;
	if (size > 65536)
		return -E2BIG;
	if (fs->ro)
		return -EROFS;
	e2_lock_caller(fs, who);
	if (size > fs->bs) {
		r = -ERANGE;
		goto out;
	}
	r = e2_get_live(fs, ino, &ip);
	if (!r && (e2_iimmutable(ip) || e2_iappend(ip)))
		r = -EPERM;
	if (!r)
		r = xset_locked(fs, ip, idx, suffix, len, val, size, flags);
out:
	e2_unlock(fs);
	return r;
}

/* Whether ip has a security.capability attribute, remembered in
 * ip->nocaps until its attributes next change (store()).  Under the
 * lock. */
static int has_caps(struct e2fs *fs, struct e2_inode *ip, bool *has)
{
	struct xaset s = {0};
	uint8_t *raw = NULL;
	bool found = false;
	int r;

	*has = false;
	if (ip->nocaps)
		return 0;
	r = load(fs, ip, &raw, &s);
	if (!r) {
		set_find(&s, XI_SECURITY, "capability", 10, &found);
		ip->nocaps = !found;
		*has = found;
	}
	set_free(&s);
	free(raw);
	return r;
}

mode_t e2_setid_kill(mode_t mode)
{
	mode_t kill = mode & S_ISUID;

	if ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		kill |= S_ISGID;
	return kill;
}

int e2_kill_priv_locked(struct e2fs *fs, struct e2_inode *ip, bool suid, gid_t to_gid)
{
	const struct e2_caller *who = fs->caller;
	struct ext2_inode_large nw;
	struct timespec now;
	mode_t mode = e2_imode(ip), kill;
	bool caps;
	int r;

	/* (a chown of a directory keeps what it has) */
	if (fs->ro || S_ISDIR(mode))
		return 0;
	kill = suid ? e2_setid_kill(mode) : 0;
	/* set-group-ID without group execute: the caller's groups decide */
	if (suid && (mode & (S_ISGID | S_IXGRP)) == S_ISGID && who && who->keeps_sgid &&
	    (!who->keeps_sgid(who, e2_igid(ip)) ||
	     ((mode & S_ISUID) && to_gid != E2_SAME_GID && !who->keeps_sgid(who, to_gid))))
		kill |= S_ISGID;
	r = has_caps(fs, ip, &caps);
	if (r || (!kill && !caps))
		return r;
	/* (Linux's notify_change() refuses these the same way: a mode
	 * change of an append-only file, any change of an immutable one) */
	if (e2_iimmutable(ip) || (kill && e2_iappend(ip)))
		return -EPERM;
	if (caps) {
		r = xset_locked(fs, ip, XI_SECURITY, "capability", 10, NULL, 0, 0);
		if (r)
			return r;
	}
	if (kill) {
		nw = ip->d;
		nw.i_mode = htole16((uint16_t)(mode & ~kill));
		e2_now_ts(fs, &now);
		e2_iset_time(fs, &nw, E2_T_CTIME, &now);
		r = e2_iwrite(fs, ip, &nw, NULL, NULL);
		if (r)
			return r;
	}
	return 1;
}

int e2_kill_priv(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, bool suid,
		 gid_t to_gid)
{
	struct e2_inode *ip;
	int r;

	if (fs->ro)
		return 0;
	e2_lock_caller(fs, who);
	r = e2_get_live(fs, ino, &ip);
	if (!r)
		r = e2_kill_priv_locked(fs, ip, suid, to_gid);
	e2_unlock(fs);
	return r;
}

int e2_setxattr(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, const char *name,
		const void *val, size_t size, unsigned flags)
{
	return xchange(fs, who, ino, name, val ? val : "", size, flags);
}

int e2_removexattr(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, const char *name)
{
	return xchange(fs, who, ino, name, NULL, 0, 0);
}

/* Drop an inode's reference to its attribute block when the inode is
 * freed: after the inode clear (clear), which removed the pointer. */
int e2_xattr_release(struct e2fs *fs, struct e2_inode *ip, struct patch *clear)
{
	uint32_t blk = le32toh(ip->d.i_file_acl);
	struct cblock *b;
	int r;

	if (!blk)
		return 0;
	if (!e2_block_ok(fs, blk))
		return e2_err(fs, -EIO, "inode %u: attribute block %u out of range", ip->ino, blk);
	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "inode %u: cannot read attribute block %u", ip->ino, blk);
	r = ld_le32(cblock_data(b)) == XA_MAGIC && ld_le32(cblock_data(b) + 4) != 0 ? 0 : -EIO;
	if (!r)
		cblock_set_kind(b, CBK_XATTR);
	cache_put(fs->c, b);
	if (r)
		return e2_err(fs, -EIO, "inode %u: bad attribute block %u", ip->ino, blk);
	return unref_block(fs, ip->ino, blk, clear);
}

/* ---- ACLs: the xattr encoding, inheritance, chmod ------------------------ */

#define XACL_VERSION 2
#define XACL_NOID    0xffffffffu

ssize_t e2_acl_from_xattr(const void *x, size_t n, void *out, size_t size)
{
	const uint8_t *v = x;
	uint8_t *o = out;
	size_t p = 4;

	if (n < 4 || (n - 4) % 8 || ld_le32(v) != XACL_VERSION)
		return -EINVAL;
	if (size < 4 + (n - 4))
		return -ERANGE;
	st_le32(o, ACL_VERSION);
	for (size_t i = 4; i < n; i += 8) {
		uint16_t tag = ld_le16(v + i);

		st_le16(o + p, tag);
		st_le16(o + p + 2, ld_le16(v + i + 2));
		if (tag == T_USER || tag == T_GROUP) {
			st_le32(o + p + 4, ld_le32(v + i + 4));
			p += 8;
		} else {
			p += 4;
		}
	}
	return (ssize_t)p;
}

ssize_t e2_acl_to_xattr(const void *e, size_t n, void *out, size_t size)
{
	struct acl_ent ent[64];
	uint8_t *o = out;
	int k = acl_decode(e, n, ent, 64);

	if (k < 0)
		return k;
	if (size == 0)
		return 4 + 8 * (ssize_t)k;
	if (size < 4 + 8 * (size_t)k)
		return -ERANGE;
	st_le32(o, XACL_VERSION);
	for (int i = 0; i < k; i++) {
		st_le16(o + 4 + 8 * i, ent[i].tag);
		st_le16(o + 4 + 8 * i + 2, ent[i].perm);
		st_le32(o + 4 + 8 * i + 4,
			ent[i].tag == T_USER || ent[i].tag == T_GROUP ? ent[i].id : XACL_NOID);
	}
	return 4 + 8 * (ssize_t)k;
}

/* Linux's posix_acl_create_masq: limit the inherited ACL by the requested
 * mode and the mode by the ACL; true if the ACL says more than the mode. */
static bool acl_masq(struct acl_ent *e, size_t k, mode_t *mode)
{
	struct acl_ent *group = NULL, *mask = NULL;
	mode_t m = *mode & 0777;
	bool more = false;

	for (size_t i = 0; i < k; i++) {
		switch (e[i].tag) {
		case T_USER_OBJ:
			e[i].perm &= (m >> 6) & 7;
			m = (m & ~(mode_t)0700) | ((mode_t)e[i].perm << 6);
			break;
		case T_USER:
		case T_GROUP:
			more = true;
			break;
		case T_GROUP_OBJ:
			group = &e[i];
			break;
		case T_OTHER:
			e[i].perm &= m & 7;
			m = (m & ~(mode_t)07) | e[i].perm;
			break;
		case T_MASK:
			mask = &e[i];
			more = true;
			break;
		}
	}
	if (!mask)
		mask = group;
	if (mask) {
		mask->perm &= (m >> 3) & 7;
		m = (m & ~(mode_t)070) | ((mode_t)mask->perm << 3);
	}
	*mode = (*mode & ~(mode_t)0777) | m;
	return more;
}

/* dir's default ACL decoded into e (0 entries if it has none). */
static int default_acl(struct e2fs *fs, struct e2_inode *dir, struct acl_ent *e, size_t max,
		       size_t *k)
{
	struct xaset s = {0};
	uint8_t *raw = NULL;
	size_t at;
	bool found;
	int r;

	*k = 0;
	r = load(fs, dir, &raw, &s);
	if (!r) {
		at = set_find(&s, XI_ACL_DEFAULT, "", 0, &found);
		if (found) {
			r = acl_decode(s.a[at].val, s.a[at].vlen, e, max);
			if (r < 0)
				r = e2_err(fs, -EIO, "inode %u: bad default ACL", dir->ino);
			else
				*k = (size_t)r, r = 0;
		}
	}
	set_free(&s);
	free(raw);
	return r;
}

int e2_acl_create_mode(struct e2fs *fs, uint32_t parent, mode_t *mode, mode_t umask)
{
	struct acl_ent e[64];
	struct e2_inode *dir;
	size_t k = 0;
	int r;

	e2_lock(fs);
	r = e2_get_live(fs, parent, &dir);
	if (!r)
		r = default_acl(fs, dir, e, 64, &k);
	e2_unlock(fs);
	if (r)
		return r;
	if (!k) {
		*mode &= ~(umask & 0777);
		return 0;
	}
	acl_masq(e, k, mode);
	return 1;
}

int e2_acl_inherit(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, uint32_t ino)
{
	struct acl_ent e[64];
	struct e2_inode *dir, *ip;
	struct xaset s = {0};
	struct ext2_inode_large nw;
	uint8_t *raw = NULL;
	mode_t mode;
	size_t k = 0;
	int r;

	if (fs->ro)
		return -EROFS;
	e2_lock_caller(fs, who);
	r = e2_get_live(fs, parent, &dir);
	if (!r)
		r = default_acl(fs, dir, e, 64, &k);
	if (r || !k)
		goto out;
	r = load_ino(fs, ino, &ip, &raw, &s);
	if (r)
		goto out;
	if (e2_idir(ip)) {
		r = set_acl(&s, XI_ACL_DEFAULT, e, k);
		if (r)
			goto out;
	}
	mode = e2_imode(ip);
	nw = ip->d;
	if (acl_masq(e, k, &mode)) {
		r = set_acl(&s, XI_ACL_ACCESS, e, k);
		if (r)
			goto out;
	}
	nw.i_mode = htole16((uint16_t)mode);
	r = store(fs, ip, raw, &s, &nw);
out:
	e2_unlock(fs);
	set_free(&s);
	free(raw);
	return r;
}

/* After a chmod: the access ACL's owner, group class (the mask, or the
 * owning group without one) and other entries follow the new mode, as
 * Linux's posix_acl_chmod.  Called with the lock held. */
int e2_acl_chmod_locked(struct e2fs *fs, struct e2_inode *ip)
{
	struct acl_ent e[64];
	struct xaset s = {0};
	struct ext2_inode_large nw = ip->d;
	uint8_t *raw = NULL;
	mode_t mode = e2_imode(ip);
	size_t at;
	bool found, mask = false;
	int r, k;

	r = load(fs, ip, &raw, &s);
	if (r)
		goto out;
	at = set_find(&s, XI_ACL_ACCESS, "", 0, &found);
	if (!found)
		goto out;
	k = acl_decode(s.a[at].val, s.a[at].vlen, e, 64);
	if (k < 0) {
		r = e2_err(fs, -EIO, "inode %u: bad access ACL", ip->ino);
		goto out;
	}
	for (int i = 0; i < k; i++)
		mask |= e[i].tag == T_MASK;
	for (int i = 0; i < k; i++) {
		if (e[i].tag == T_USER_OBJ)
			e[i].perm = (mode >> 6) & 7;
		else if (e[i].tag == (mask ? T_MASK : T_GROUP_OBJ))
			e[i].perm = (mode >> 3) & 7;
		else if (e[i].tag == T_OTHER)
			e[i].perm = mode & 7;
	}
	r = set_acl(&s, XI_ACL_ACCESS, e, (size_t)k);
	if (!r)
		r = store(fs, ip, raw, &s, &nw);
out:
	set_free(&s);
	free(raw);
	return r;
}
