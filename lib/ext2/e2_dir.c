/* ext2: directories.  The on-disk format is linear; an in-memory index per
 * directory (name -> entry position, and the free room per block) makes
 * lookups and inserts O(1).  Entries never move once written, so the byte
 * position of an entry is a stable readdir offset.
 *
 * Every entry is checked before use (rec_len, name_len, inode number); a bad
 * one fails the operation with -EIO and an explanation in e2_error(). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "e2_int.h"
#include "util/grow.h"

struct dent {
	uint32_t ino, rec, nlen;
	uint8_t type;
	const char *name;
};

uint8_t e2_ftype(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return EXT2_FT_REG_FILE;
	case S_IFDIR:
		return EXT2_FT_DIR;
	case S_IFCHR:
		return EXT2_FT_CHRDEV;
	case S_IFBLK:
		return EXT2_FT_BLKDEV;
	case S_IFIFO:
		return EXT2_FT_FIFO;
	case S_IFSOCK:
		return EXT2_FT_SOCK;
	case S_IFLNK:
		return EXT2_FT_SYMLINK;
	}
	return EXT2_FT_UNKNOWN;
}

static mode_t ftype_mode(uint8_t t)
{
	static const mode_t m[] = {0,	    S_IFREG, S_IFDIR,  S_IFCHR,
				   S_IFBLK, S_IFIFO, S_IFSOCK, S_IFLNK};

	return t < sizeof(m) / sizeof(m[0]) ? m[t] : 0;
}

/* A change of dir's entries, carried by *out, joins what fsync of dir
 * writes (e2_isync_add), as POSIX asks of a directory's fsync: its new,
 * removed and renamed names.  Without a handle on the patch, that fsync
 * writes everything. */
static void dir_changed(struct e2fs *fs, struct e2_inode *dir, struct patch **out)
{
	if (out && *out)
		e2_isync_add(fs, dir, *out);
	else if (dir->sync_track)
		dir->sync_all = true;
}

static int parse(struct e2fs *fs, struct e2_inode *dir, uint32_t lblk, const uint8_t *data,
		 uint32_t off, struct dent *de)
{
	uint32_t rec;

	if (off + 8 > fs->bs)
		goto bad;
	de->ino = le32toh(*(const uint32_t *)(data + off));
	rec = le16toh(*(const uint16_t *)(data + off + 4));
	if (fs->bs == 65536 && (rec == 0 || rec == 65535))
		rec = 65536;
	de->rec = rec;
	if (fs->filetype) {
		de->nlen = data[off + 6];
		de->type = data[off + 7];
	} else {
		de->nlen = le16toh(*(const uint16_t *)(data + off + 6));
		de->type = 0;
	}
	de->name = (const char *)data + off + 8;
	if (rec < 8 || rec % 4 || off + rec > fs->bs)
		goto bad;
	if (de->ino) {
		if (de->nlen == 0 || de->nlen > EXT2_NAME_LEN || E2_REC_LEN(de->nlen) > rec)
			goto bad;
		if (memchr(de->name, 0, de->nlen) || memchr(de->name, '/', de->nlen))
			return e2_err(fs, -EIO,
				      "directory %u block %u offset %u: name contains NUL or '/'",
				      dir->ino, lblk, off);
		if (de->ino > fs->ninodes)
			return e2_err(fs, -EIO,
				      "directory %u block %u offset %u: inode %u out of range",
				      dir->ino, lblk, off, de->ino);
	}
	return 0;
bad:
	return e2_err(
	    fs, -EIO, "directory %u block %u offset %u: bad entry (rec_len %u, name_len %u)",
	    dir->ino, lblk, off, off + 8 <= fs->bs ? de->rec : 0, off + 8 <= fs->bs ? de->nlen : 0);
}

static int dir_block(struct e2fs *fs, struct e2_inode *dir, uint32_t lblk, uint32_t *pblk)
{
	int r = e2_bmap(fs, dir, lblk, pblk);

	if (!r && !*pblk)
		r = e2_err(fs, -EIO, "directory %u: hole at block %u", dir->ino, lblk);
	return r;
}

static uint32_t nhash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

void e2_dindex_free(struct e2_dindex *dix)
{
	if (!dix)
		return;
	for (size_t i = 0; i < dix->nbuckets; i++)
		while (dix->tab[i]) {
			struct e2_dname *d = dix->tab[i];

			dix->tab[i] = d->next;
			free(d);
		}
	free(dix->tab);
	free(dix->tree);
	free(dix);
}

static int dix_insert(struct e2_dindex *dix, const char *name, size_t len, uint32_t pos,
		      uint32_t ino, uint8_t ftype)
{
	struct e2_dname *d;
	size_t h;

	if (dix->count >= dix->nbuckets * 2) {
		size_t nb = dix->nbuckets * 4;
		struct e2_dname **nt = calloc(nb, sizeof(*nt));

		if (!nt)
			return -ENOMEM;
		for (size_t i = 0; i < dix->nbuckets; i++)
			while (dix->tab[i]) {
				d = dix->tab[i];
				dix->tab[i] = d->next;
				d->next = nt[d->hash % nb];
				nt[d->hash % nb] = d;
			}
		free(dix->tab);
		dix->tab = nt;
		dix->nbuckets = nb;
	}
	d = malloc(sizeof(*d) + len);
	if (!d)
		return -ENOMEM;
	d->hash = nhash(name, len);
	d->pos = pos;
	d->ino = ino;
	d->ftype = ftype;
	d->len = (uint8_t)len;
	memcpy(d->name, name, len);
	h = d->hash % dix->nbuckets;
	d->next = dix->tab[h];
	dix->tab[h] = d;
	dix->count++;
	return 0;
}

static struct e2_dname **dix_find(struct e2_dindex *dix, const char *name, size_t len)
{
	uint32_t h = nhash(name, len);
	struct e2_dname **pp = &dix->tab[h % dix->nbuckets];

	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->hash == h && (*pp)->len == len && !memcmp((*pp)->name, name, len))
			return pp;
	return NULL;
}

/* Largest record that fits in the block, from its entries. */
static int block_room(struct e2fs *fs, struct e2_inode *dir, uint32_t lblk, const uint8_t *data,
		      uint32_t *room)
{
	struct dent de;
	uint32_t best = 0;
	int r;

	for (uint32_t off = 0; off < fs->bs; off += de.rec) {
		uint32_t fr;

		r = parse(fs, dir, lblk, data, off, &de);
		if (r)
			return r;
		fr = de.ino ? de.rec - E2_REC_LEN(de.nlen) : de.rec;
		if (fr > best)
			best = fr;
	}
	*room = best;
	return 0;
}

/* Record block l's room and carry the change up the max-tree. */
static void dix_set_room(struct e2_dindex *dix, uint32_t l, uint32_t room)
{
	uint32_t i = dix->tcap + l;

	dix->tree[i] = room;
	for (i /= 2; i; i /= 2) {
		uint32_t m = dix->tree[2 * i] > dix->tree[2 * i + 1] ? dix->tree[2 * i]
								     : dix->tree[2 * i + 1];

		if (dix->tree[i] == m)
			break;
		dix->tree[i] = m;
	}
}

/* Blocks added read as full (room 0) until their room is set. */
static int dix_grow(struct e2_dindex *dix, uint32_t nblocks)
{
	if (nblocks <= dix->nblocks)
		return 0;
	if (nblocks > dix->tcap) {
		uint32_t cap = dix->tcap ? dix->tcap : 16, *t;

		while (cap < nblocks)
			cap *= 2;
		t = calloc(2 * (size_t)cap, sizeof(*t));
		if (!t)
			return -ENOMEM;
		if (dix->nblocks)
			memcpy(t + cap, dix->tree + dix->tcap, dix->nblocks * sizeof(*t));
		for (uint32_t i = cap - 1; i; i--)
			t[i] = t[2 * i] > t[2 * i + 1] ? t[2 * i] : t[2 * i + 1];
		free(dix->tree);
		dix->tree = t;
		dix->tcap = cap;
	}
	dix->nblocks = nblocks;
	return 0;
}

static int dir_nblocks(struct e2fs *fs, struct e2_inode *dir, uint32_t *n)
{
	uint64_t size = e2_isize(&dir->d);

	/* A directory has no holes, so it cannot have more blocks than the
	 * file system; its index is sized by this count, and a corrupt size
	 * must not make it allocate and clear gigabytes. */
	if (size % fs->bs || size / fs->bs > e2_max_lblk(fs) || size / fs->bs > fs->nblocks)
		return e2_err(fs, -EIO, "directory %u: bad size %llu", dir->ino,
			      (unsigned long long)size);
	*n = (uint32_t)(size / fs->bs);
	return 0;
}

static int dix_build(struct e2fs *fs, struct e2_inode *dir)
{
	struct e2_dindex *dix;
	uint32_t n;
	int r;

	if (dir->dix)
		return 0;
	if (!e2_idir(dir))
		return -ENOTDIR;
	r = dir_nblocks(fs, dir, &n);
	if (r)
		return r;
	dix = calloc(1, sizeof(*dix));
	if (!dix)
		return -ENOMEM;
	dix->nbuckets = 64;
	dix->tab = calloc(dix->nbuckets, sizeof(*dix->tab));
	if (!dix->tab || (r = dix_grow(dix, n))) {
		r = -ENOMEM;
		goto fail;
	}
	for (uint32_t l = 0; l < n; l++) {
		struct cblock *b;
		uint32_t pblk;
		struct dent de;
		const uint8_t *data;

		r = dir_block(fs, dir, l, &pblk);
		if (r)
			goto fail;
		r = cache_get(fs->c, pblk, &b);
		if (r) {
			r = e2_err(fs, r, "directory %u: cannot read block %u", dir->ino, pblk);
			goto fail;
		}
		data = cblock_data(b);
		for (uint32_t off = 0; off < fs->bs && !r; off += de.rec) {
			r = parse(fs, dir, l, data, off, &de);
			if (!r && de.ino)
				r = dix_insert(dix, de.name, de.nlen, l * fs->bs + off, de.ino,
					       de.type);
		}
		if (!r) {
			uint32_t room;

			r = block_room(fs, dir, l, data, &room);
			if (!r)
				dix_set_room(dix, l, room);
		}
		cache_put(fs->c, b);
		if (r)
			goto fail;
	}
	dix->hint = n ? n - 1 : 0;
	dir->dix = dix;
	return 0;
fail:
	e2_dindex_free(dix);
	return r;
}

/* *pp: the index's link to name in dir (building the index first);
 * -ENOENT if dir has no such name. */
static int dix_lookup(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		      struct e2_dname ***pp)
{
	int r = dix_build(fs, dir);

	if (r)
		return r;
	*pp = dix_find(dir->dix, name, len);
	return *pp ? 0 : -ENOENT;
}

int e2_dir_lookup(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		  struct e2_dloc *loc)
{
	struct e2_dname **pp;
	int r;

	r = dix_lookup(fs, dir, name, len, &pp);
	if (r)
		return r;
	loc->pos = (*pp)->pos;
	loc->ino = (*pp)->ino;
	loc->ftype = (*pp)->ftype;
	return 0;
}

/* Linux's ext2 drops the htree flag on the first change instead of keeping
 * the index up to date; the flag must be gone on disk before the change. */
int e2_dir_unindex(struct e2fs *fs, struct e2_inode *dir, struct e2_deps *deps)
{
	struct ext2_inode_large nw = dir->d;
	struct patch *p = NULL;
	int r;

	if (!(le32toh(nw.i_flags) & EXT2_INDEX_FL))
		return 0;
	nw.i_flags = htole32(le32toh(nw.i_flags) & ~(uint32_t)EXT2_INDEX_FL);
	r = e2_iwrite(fs, dir, &nw, NULL, &p);
	if (!r)
		r = e2_deps_add(deps, p);
	return r;
}

/* Before a change of dir's entries: its index built, and its htree flag
 * dropped (deps then holds what the change must wait for). */
static int dir_to_change(struct e2fs *fs, struct e2_inode *dir, struct e2_deps *deps)
{
	int r = dix_build(fs, dir);

	if (r)
		return r;
	return e2_dir_unindex(fs, dir, deps);
}

static int room_update(struct e2fs *fs, struct e2_inode *dir, uint32_t lblk, uint32_t pblk)
{
	struct cblock *b;
	uint32_t room;
	int r;

	r = cache_get(fs->c, pblk, &b);
	if (r)
		return r;
	r = block_room(fs, dir, lblk, cblock_data(b), &room);
	cache_put(fs->c, b);
	if (!r)
		dix_set_room(dir->dix, lblk, room);
	return r;
}

/* Bytes [lo, hi) of a directory block that a new entry must not write:
 * a change there would have to wait for the removal that wrote them. */
struct span {
	uint32_t lo, hi;
};

static bool hits(const struct span *sp, size_t n, uint32_t lo, uint32_t hi)
{
	for (size_t i = 0; i < n; i++)
		if (sp[i].lo < hi && lo < sp[i].hi)
			return true;
	return false;
}

/* Put the entry into block lblk, which has room for it.  The entry is
 * placed so that its change writes no byte of sp[] (a removal not on disk
 * yet): a free entry there is not reused in place, the new entry goes past
 * its stale name instead, and an entry whose record a removal widened is
 * not split.  -ENOSPC if sp[] leaves no room in the block. */
static int add_in_block(struct e2fs *fs, struct e2_inode *dir, uint32_t lblk, uint32_t pblk,
			const char *name, size_t len, uint32_t ino, uint8_t ftype,
			struct e2_deps *deps, struct patch **out, uint32_t *pos,
			const struct span *sp, size_t nsp)
{
	uint32_t need = E2_REC_LEN(len), off, lo, hi, noff = 0;
	uint8_t buf[EXT2_MIN_BLOCK_SIZE * 64];
	struct cblock *b;
	struct dent de;
	int r;

	r = cache_get(fs->c, pblk, &b);
	if (r)
		return e2_err(fs, r, "directory %u: cannot read block %u", dir->ino, pblk);
	for (off = 0; off < fs->bs; off += de.rec) {
		uint32_t past;

		r = parse(fs, dir, lblk, cblock_data(b), off, &de);
		if (r)
			goto out;
		past = off + E2_REC_LEN(de.nlen);
		if (!de.ino && de.rec >= need) {
			if (!hits(sp, nsp, off, off + 8 + (uint32_t)len)) {
				noff = off;
				break;
			}
			if (de.nlen && E2_REC_LEN(de.nlen) <= de.rec &&
			    de.rec - E2_REC_LEN(de.nlen) >= need &&
			    !hits(sp, nsp, off + 4, past + 8 + (uint32_t)len)) {
				noff = past;
				break;
			}
			continue;
		}
		if (de.ino && de.rec - E2_REC_LEN(de.nlen) >= need &&
		    !hits(sp, nsp, off + 4, past + 8 + (uint32_t)len)) {
			noff = past;
			break;
		}
	}
	if (off >= fs->bs && nsp) {
		r = -ENOSPC;
		goto out;
	}
	if (off >= fs->bs) {
		r = e2_err(fs, -EIO, "directory %u: index out of step at block %u", dir->ino, lblk);
		goto out;
	}
	memcpy(buf, cblock_data(b), fs->bs);
	if (noff != off) { /* split: the old entry keeps only its own room */
		uint16_t rl = htole16((uint16_t)(noff - off));

		memcpy(buf + off + 4, &rl, 2);
		lo = off + 4;
	} else {
		lo = off;
	}
	{
		uint32_t rec = de.rec - (noff - off), i32 = htole32(ino);
		uint16_t rl = htole16((uint16_t)(rec == 65536 ? 65535 : rec));

		memcpy(buf + noff, &i32, 4);
		memcpy(buf + noff + 4, &rl, 2);
		buf[noff + 6] = (uint8_t)len;
		buf[noff + 7] = fs->filetype ? ftype : 0;
		memcpy(buf + noff + 8, name, len);
		hi = noff + 8 + (uint32_t)len;
	}
	r = patch_create_byte(fs->c, b, lo, hi - lo, buf + lo, deps ? deps->p : NULL,
			      deps ? deps->n : 0, fs->scope, out);
	if (!r) {
		*pos = lblk * fs->bs + noff;
		dir_changed(fs, dir, out);
	}
out:
	cache_put(fs->c, b);
	return r;
}

/* Append a block holding one empty entry: harmless on disk by itself; an
 * entry put in it must wait for *linked (the block is reachable). */
static int dir_append(struct e2fs *fs, struct e2_inode *dir, struct patch **linked)
{
	struct e2_dindex *dix = dir->dix;
	uint16_t rl = htole16((uint16_t)(fs->bs == 65536 ? 65535 : fs->bs));
	uint32_t lblk = dix->nblocks;
	uint8_t *blk;
	int w, r;

	if ((uint64_t)lblk + 1 >= e2_max_lblk(fs) || (uint64_t)(lblk + 1) * fs->bs > 0x7fffffffu)
		return -EFBIG;
	blk = calloc(1, fs->bs);
	if (!blk)
		return -ENOMEM;
	memcpy(blk + 4, &rl, 2);
	w = e2_write_locked(fs, dir, blk, fs->bs, (uint64_t)lblk * fs->bs, true, NULL, linked);
	free(blk);
	if (w < 0)
		return w;
	if ((uint32_t)w != fs->bs) {
		patch_release(fs->c, *linked);
		*linked = NULL;
		return -ENOSPC;
	}
	r = dix_grow(dix, lblk + 1);
	if (r)
		return r;
	dix_set_room(dix, lblk, fs->bs);
	dix->hint = lblk;
	return 0;
}

/* Leftmost block at or after 'from' under tree node i (covering blocks
 * lo..lo+span-1) with room for need, else UINT32_MAX.  Subtrees before
 * 'from' or without room are skipped whole, so this is O(log n).  Leaves
 * past nblocks hold 0 and need is never 0. */
static uint32_t room_from(const struct e2_dindex *dix, uint32_t i, uint32_t lo, uint32_t span,
			  uint32_t from, uint32_t need)
{
	uint32_t l;

	if (dix->tree[i] < need || lo + span <= from)
		return UINT32_MAX;
	if (span == 1)
		return lo;
	l = room_from(dix, 2 * i, lo, span / 2, from, need);
	if (l == UINT32_MAX)
		l = room_from(dix, 2 * i + 1, lo + span / 2, span / 2, from, need);
	return l;
}

/* A block with room for need: the hint block or the first after it, else
 * the first from the start (so creates fill the directory in order). */
static uint32_t find_room(struct e2_dindex *dix, uint32_t need)
{
	uint32_t l;

	if (!dix->nblocks)
		return UINT32_MAX;
	l = room_from(dix, 1, 0, dix->tcap, dix->hint, need);
	if (l == UINT32_MAX)
		l = room_from(dix, 1, 0, dix->tcap, 0, need);
	return l;
}

/* Make room for a name of len bytes before anything else is allocated, so
 * that running out of space leaves nothing half done.  *linked: see
 * dir_append (NULL when there was room already). */
int e2_dir_prepare(struct e2fs *fs, struct e2_inode *dir, size_t len, struct patch **linked)
{
	int r;

	*linked = NULL;
	r = dix_build(fs, dir);
	if (r)
		return r;
	if (find_room(dir->dix, E2_REC_LEN(len)) != UINT32_MAX)
		return 0;
	return dir_append(fs, dir, linked);
}

/* A removal not on disk yet: the block and the bytes its patch holds. */
struct pending {
	uint64_t blk;
	uint32_t lo, hi;
};

/* What a new entry must not write in block lblk (at pblk): the first 4
 * bytes of each position in avoid[] there, and the bytes of each removal
 * in rm[] there. */

static size_t spans_of(struct e2fs *fs, uint32_t lblk, uint32_t pblk, const uint32_t *avoid,
		       size_t navoid, const struct pending *rm, size_t nrm, struct span *sp)
{
	size_t n = 0;

	for (size_t i = 0; i < navoid; i++)
		if (avoid[i] / fs->bs == lblk) {
			sp[n].lo = avoid[i] % fs->bs;
			sp[n++].hi = avoid[i] % fs->bs + 4;
		}
	for (size_t i = 0; i < nrm; i++)
		if (rm[i].blk == pblk) {
			sp[n].lo = rm[i].lo;
			sp[n++].hi = rm[i].hi;
		}
	return n;
}

/* The next block after cur with room for need, from first on round the
 * end; UINT32_MAX once back at first. */
static uint32_t next_room(struct e2_dindex *dix, uint32_t first, uint32_t cur, uint32_t need)
{
	uint32_t l = room_from(dix, 1, 0, dix->tcap, cur + 1, need);

	if (cur < first)
		return l < first ? l : UINT32_MAX;
	if (l != UINT32_MAX)
		return l;
	l = room_from(dix, 1, 0, dix->tcap, 0, need);
	return l < first ? l : UINT32_MAX;
}

/* ---- names removed, not yet on disk ---- */

/* A new entry waits for the removal, still unwritten, of an entry of the
 * same name in its directory: placed elsewhere, it would otherwise reach
 * the disk with the old one still there, and the directory hold the name
 * twice (e2fsck renames one "name~0"). */
static uint32_t name_hash(const char *name, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 16777619u;
	return h;
}

static int rmname_add(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		      struct patch *rm)
{
	size_t i, k = 0;

	if (!rm || patch_committed(rm) || fs->opts.consistency == CONSISTENCY_NONE)
		return 0;
	if (dir->nrmnames == dir->caprmnames) { /* full: drop those on disk */
		for (i = 0; i < dir->nrmnames; i++)
			if (patch_committed(dir->rmnames[i].rm))
				patch_release(fs->c, dir->rmnames[i].rm);
			else
				dir->rmnames[k++] = dir->rmnames[i];
		dir->nrmnames = k;
	}
	if (GROW(&dir->rmnames, &dir->caprmnames, dir->nrmnames + 1, 8))
		return -ENOMEM;
	patch_retain(rm);
	dir->rmnames[dir->nrmnames].hash = name_hash(name, len);
	dir->rmnames[dir->nrmnames++].rm = rm;
	return 0;
}

static int rmname_deps(struct e2_inode *dir, const char *name, size_t len, struct e2_deps *deps)
{
	uint32_t h;
	int r;

	if (!dir->nrmnames)
		return 0;
	h = name_hash(name, len);
	for (size_t i = 0; i < dir->nrmnames; i++)
		if (dir->rmnames[i].hash == h && (r = e2_deps_addref(deps, dir->rmnames[i].rm)))
			return r;
	return 0;
}

/* Put the name in a block with room where it writes nothing of avoid[]
 * (positions) and rm[] (removals): the first such block from the one
 * find_room picks; with fresh, in a new block if every block with room
 * fails; else (or if the directory cannot grow) where find_room says,
 * after what is there. */
static int dir_add(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		   uint32_t ino, mode_t mode, struct e2_deps *deps, struct patch **out,
		   const uint32_t *avoid, size_t navoid, const struct pending *rm, size_t nrm,
		   bool fresh)
{
	uint32_t need = E2_REC_LEN(len), lblk, first, pblk, pos;
	uint8_t ftype = e2_ftype(mode);
	struct patch *linked = NULL;
	struct span *sp = NULL;
	size_t nsp;
	int r;

	r = dir_to_change(fs, dir, deps);
	if (!r)
		r = rmname_deps(dir, name, len, deps);
	if (r)
		return r;
	if (navoid || nrm) {
		if (grow(&fs->spbuf, &fs->capspbuf, navoid + nrm, sizeof(*sp), 16))
			navoid = nrm = 0; /* placed as by e2_dir_add: waits, but is right */
		else
			sp = fs->spbuf;
	}
	first = lblk = find_room(dir->dix, need);
	r = -ENOSPC;
	if (!navoid && !nrm)
		fresh = false; /* nothing to avoid: first, or a new block if none */
	/* A directory never shrinks: past a few blocks grown to avoid
	 * removals, or a second in one round, the name goes over them. */
	if (fresh && first != UINT32_MAX &&
	    (dir->dix->nfresh >= E2_DIR_FRESH_MAX ||
	     dir->dix->fresh_at == cache_commits(fs->c) + 1))
		fresh = false;
	while (lblk != UINT32_MAX && (navoid || nrm)) {
		r = dir_block(fs, dir, lblk, &pblk);
		if (r)
			goto out;
		nsp = spans_of(fs, lblk, pblk, avoid, navoid, rm, nrm, sp);
		r = add_in_block(fs, dir, lblk, pblk, name, len, ino, ftype, deps, out, &pos, sp,
				 nsp);
		if (r != -ENOSPC)
			break;
		lblk = next_room(dir->dix, first, lblk, need);
	}
	if (r == -ENOSPC && (fresh || first == UINT32_MAX)) {
		r = dir_append(fs, dir, &linked);
		if (!r && first != UINT32_MAX) {
			dir->dix->nfresh++;
			dir->dix->fresh_at = cache_commits(fs->c) + 1;
		}
		if (!r) {
			r = e2_deps_add(deps, linked);
			if (r) {
				patch_release(fs->c, linked);
				goto out;
			}
			lblk = dir->dix->nblocks - 1;
			r = -ENOSPC;
		} else if (first == UINT32_MAX || (r != -ENOSPC && r != -EFBIG)) {
			goto out;
		} else {
			lblk = first;
			r = -ENOSPC;
		}
	} else if (r == -ENOSPC) {
		lblk = first;
	}
	if (r == -ENOSPC) {
		r = dir_block(fs, dir, lblk, &pblk);
		if (r)
			goto out;
		r = add_in_block(fs, dir, lblk, pblk, name, len, ino, ftype, deps, out, &pos, NULL,
				 0);
	}
	if (r)
		goto out;
	dir->dix->hint = lblk;
	r = dix_insert(dir->dix, name, len, pos, ino, ftype);
	if (!r)
		r = room_update(fs, dir, lblk, pblk);
out:
	return r;
}

int e2_dir_add(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len, uint32_t ino,
	       mode_t mode, struct e2_deps *deps, struct patch **out)
{
	return dir_add(fs, dir, name, len, ino, mode, deps, out, NULL, 0, NULL, 0, false);
}

int e2_dir_add_avoid(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		     uint32_t ino, mode_t mode, struct e2_deps *deps, struct patch **out,
		     const uint32_t *avoid, size_t navoid)
{
	return dir_add(fs, dir, name, len, ino, mode, deps, out, avoid, navoid, NULL, 0, false);
}

/* The rmtab slot of directory ino. */
static unsigned rm_slot(uint32_t ino)
{
	/* the product's top bits, as many as the (power of two) slots need */
	return (uint32_t)(ino * 2654435761u) / (UINT32_MAX / E2_RMPEND_SLOTS + 1);
}

/* Forget the remembered removal p. */
static void rm_forget(struct e2fs *fs, struct e2_rmpend *p)
{
	*p->pprev = p->next;
	if (p->next)
		p->next->pprev = p->pprev;
	if (p->older)
		p->older->newer = p->newer;
	else
		fs->rmold = p->newer;
	if (p->newer)
		p->newer->older = p->older;
	else
		fs->rmnew = p->older;
	fs->nrmpend--;
	patch_release(fs->c, p->rm);
	free(p);
}

int e2_dir_add_new(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		   uint32_t ino, mode_t mode, struct e2_deps *deps, struct patch **out)
{
	struct e2_rmpend *p, *next;
	struct pending *rm = fs->rmbuf;
	size_t nrm = 0;
	bool lost = false;

	for (p = fs->rmtab[rm_slot(dir->ino)]; p; p = next) {
		uint32_t off, n;

		next = p->next;
		if (p->dir != dir->ino)
			continue;
		if (patch_committed(p->rm)) { /* on disk: nothing to avoid */
			rm_forget(fs, p);
			continue;
		}
		if (lost)
			continue;
		if (grow(&fs->rmbuf, &fs->caprmbuf, nrm + 1, sizeof(*rm), 16)) {
			lost = true; /* placed as by e2_dir_add */
			continue;
		}
		rm = fs->rmbuf;
		if (!patch_where(fs->c, p->rm, &rm[nrm].blk, &off, &n)) {
			rm[nrm].lo = off;
			rm[nrm++].hi = off + n;
		}
	}
	/* In a patchgroup, and for a new regular file outside one (which
	 * gets a gate, e2_gate.c, unless rename_order=file), a new name may
	 * go over them: it waits for a change in its own block, where going
	 * to another block would have the rename that publishes it (over a
	 * name the last rename changed here) span two blocks, and a loop of
	 * replaces go back and forth between them, a round each way.  Other
	 * new names keep free of the removals. */
	if (lost || e2_gating(fs) || (S_ISREG(mode) && e2_order_gating(fs)))
		nrm = 0;
	return dir_add(fs, dir, name, len, ino, mode, deps, out, NULL, 0, rm, nrm, true);
}

void e2_dir_removal_pending(struct e2fs *fs, struct e2_inode *dir, struct patch *rm)
{
	struct e2_rmpend **slot = &fs->rmtab[rm_slot(dir->ino)], *p, *next;

	if (!rm || patch_committed(rm) || fs->opts.consistency != CONSISTENCY_SOFTUPDATES)
		return;
	/* Those on disk go: from the oldest on, and in this slot. */
	while (fs->rmold && patch_committed(fs->rmold->rm))
		rm_forget(fs, fs->rmold);
	for (p = *slot; p; p = next) {
		next = p->next;
		if (patch_committed(p->rm))
			rm_forget(fs, p);
	}
	if (fs->nrmpend == E2_RMPEND_MAX) /* full: count only those still pending */
		for (p = fs->rmold; p; p = next) {
			next = p->newer;
			if (patch_committed(p->rm))
				rm_forget(fs, p);
		}
	if (fs->nrmpend == E2_RMPEND_MAX) /* the oldest is forgotten */
		rm_forget(fs, fs->rmold);
	/* without room it is forgotten: a new name may then wait for it */
	p = malloc(sizeof(*p));
	if (!p)
		return;
	patch_retain(rm);
	p->rm = rm;
	p->dir = dir->ino;
	p->next = *slot;
	p->pprev = slot;
	if (*slot)
		(*slot)->pprev = &p->next;
	*slot = p;
	p->older = fs->rmnew;
	p->newer = NULL;
	if (fs->rmnew)
		fs->rmnew->newer = p;
	else
		fs->rmold = p;
	fs->rmnew = p;
	fs->nrmpend++;
}

void e2_dir_removals_free(struct e2fs *fs)
{
	while (fs->rmold)
		rm_forget(fs, fs->rmold);
}

/* Drop the index's entry *pp, whose name has just been removed from its
 * block (at pblk on disk). */
static int dix_drop(struct e2fs *fs, struct e2_inode *dir, struct e2_dname **pp, uint32_t pblk)
{
	struct e2_dname *dn = *pp;
	uint32_t lblk = dn->pos / fs->bs;

	*pp = dn->next;
	free(dn);
	dir->dix->count--;
	return room_update(fs, dir, lblk, pblk);
}

/* Find the entry at pos and the one before it in its block. */
static int entry_at(struct e2fs *fs, struct e2_inode *dir, uint32_t pos, struct cblock **bp,
		    uint32_t *pblk, struct dent *de, uint32_t *prev)
{
	uint32_t lblk = pos / fs->bs, want = pos % fs->bs, off;
	struct cblock *b;
	int r;

	r = dir_block(fs, dir, lblk, pblk);
	if (r)
		return r;
	r = cache_get(fs->c, *pblk, &b);
	if (r)
		return e2_err(fs, r, "directory %u: cannot read block %u", dir->ino, *pblk);
	*prev = UINT32_MAX;
	for (off = 0; off < want; off += de->rec) {
		r = parse(fs, dir, lblk, cblock_data(b), off, de);
		if (r)
			goto fail;
		*prev = off;
	}
	if (off != want) {
		r = e2_err(fs, -EIO, "directory %u: index out of step at %u", dir->ino, pos);
		goto fail;
	}
	r = parse(fs, dir, lblk, cblock_data(b), off, de);
	if (r)
		goto fail;
	*bp = b;
	return 0;
fail:
	cache_put(fs->c, b);
	return r;
}

/* Before a change of the entry at pos: drop the htree flag (deps then
 * holds what the change must wait for), and find the entry as entry_at. */
static int entry_to_change(struct e2fs *fs, struct e2_inode *dir, uint32_t pos,
			   struct e2_deps *deps, struct cblock **bp, uint32_t *pblk,
			   struct dent *de, uint32_t *prev)
{
	int r = e2_dir_unindex(fs, dir, deps);

	if (r)
		return r;
	return entry_at(fs, dir, pos, bp, pblk, de, prev);
}

/* The rec_len (little-endian) of the entry at prev in block data once it
 * takes over the record of de, the entry after it at pos: what removes de
 * from the block.  A record of 65536 bytes is stored as 65535. */
static uint16_t merged_rec_len(struct e2fs *fs, struct e2_inode *dir, const uint8_t *data,
			       uint32_t pos, uint32_t prev, const struct dent *de)
{
	struct dent pd;
	uint32_t rec;

	parse(fs, dir, pos / fs->bs, data, prev, &pd);
	rec = pd.rec + de->rec;
	return htole16((uint16_t)(rec == 65536 ? 65535 : rec));
}

int e2_dir_preread(struct e2fs *fs, struct e2_inode *dir, uint32_t pos, uint32_t *rec)
{
	struct cblock *b;
	struct dent de;
	uint32_t pblk, prev;
	int r = entry_at(fs, dir, pos, &b, &pblk, &de, &prev);

	if (!r) {
		cache_put(fs->c, b);
		if (rec)
			*rec = de.rec;
	}
	return r;
}

int e2_dir_remove(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		  struct e2_deps *deps, struct patch **out)
{
	return e2_dir_remove_at(fs, dir, name, len, deps, out, NULL);
}

/* p removes name from dir.  The directory's own clear waits for it
 * (e2_remove_last): e2fsck does not read a deleted directory, and an entry
 * still in it would leave its inode unattached.  A new entry of that name
 * waits for it too (rmname_add). */
static int removal_named(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
			 struct patch *p)
{
	int r = e2_pset_add(fs, &dir->rmset, p);

	return r ? r : rmname_add(fs, dir, name, len, p);
}

/* As e2_dir_remove; with posp, the entry is freed in place (inode number
 * 0, its record kept) and *posp gets its position, for e2_dir_add_avoid. */
int e2_dir_remove_at(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		     struct e2_deps *deps, struct patch **out, uint32_t *posp)
{
	struct e2_dname **pp, *dn;
	struct cblock *b;
	struct dent de;
	uint32_t pblk, prev, off;
	int r;

	r = dix_lookup(fs, dir, name, len, &pp);
	if (r)
		return r;
	dn = *pp;
	r = entry_to_change(fs, dir, dn->pos, deps, &b, &pblk, &de, &prev);
	if (r)
		return r;
	off = dn->pos % fs->bs;
	if (posp) {
		*posp = dn->pos;
		prev = UINT32_MAX;
	}
	if (prev != UINT32_MAX) {
		uint16_t rl = merged_rec_len(fs, dir, cblock_data(b), dn->pos, prev, &de);

		/* The new rec_len is computed from the removed entry's rec_len,
		 * which a pending create may have just shortened (splitting
		 * it for a later entry).  Written without that create, the
		 * predecessor would end inside what the create's rollback
		 * leaves: a corrupt block.  So order the removal after every
		 * pending change of the removed entry's header too. */
		r = patch_create_byte_span(fs->c, b, prev + 4, 2, &rl, prev + 4,
					   off + 8 - (prev + 4), deps ? deps->p : NULL,
					   deps ? deps->n : 0, fs->scope, out);
	} else {
		uint32_t z = 0;

		r = patch_create_byte(fs->c, b, off, 4, &z, deps ? deps->p : NULL,
				      deps ? deps->n : 0, fs->scope, out);
	}
	cache_put(fs->c, b);
	if (!r)
		dir_changed(fs, dir, out);
	if (!r && out && *out)
		r = removal_named(fs, dir, name, len, *out);
	if (r)
		return r;
	return dix_drop(fs, dir, pp, pblk);
}

/* Point an existing entry at another inode: one small patch in one block,
 * so the name always refers to the old or the new inode on disk. */
int e2_dir_retarget(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		    uint32_t ino, mode_t mode, struct e2_deps *deps, struct patch **out)
{
	struct e2_dname **pp;
	struct cblock *b;
	struct dent de;
	uint32_t pblk, prev, off;
	uint8_t hdr[8];
	int r;

	r = dix_lookup(fs, dir, name, len, &pp);
	if (r)
		return r;
	r = entry_to_change(fs, dir, (*pp)->pos, deps, &b, &pblk, &de, &prev);
	if (r)
		return r;
	off = (*pp)->pos % fs->bs;
	memcpy(hdr, cblock_data(b) + off, 8);
	{
		uint32_t i32 = htole32(ino);

		memcpy(hdr, &i32, 4);
	}
	if (fs->filetype)
		hdr[7] = e2_ftype(mode);
	r = patch_create_byte(fs->c, b, off, fs->filetype ? 8 : 4, hdr, deps ? deps->p : NULL,
			      deps ? deps->n : 0, fs->scope, out);
	cache_put(fs->c, b);
	if (r)
		return r;
	dir_changed(fs, dir, out);
	(*pp)->ino = ino;
	(*pp)->ftype = e2_ftype(mode);
	return 0;
}

/* Rename within one directory block over an existing name: point newname
 * at ino and remove name, in one patch.  A block write is atomic, so the
 * disk holds either the old names or the new one: the renamed inode never
 * has both names there, and its count need not cover two.  1 (nothing
 * done) when the two entries are in different blocks.
 *
 * Under soft updates the old entry is freed in place (inode number 0, its
 * record kept), not merged into the one before it, and the patch is
 * remembered as a pending removal (e2_dir_removal_pending), so that a new
 * name goes past it rather than over the bytes it wrote.  The patch waits
 * for the renamed inode's initialisation and pending changes, which wait
 * for its data; a new name written over the patch would make the next
 * create in this
 * directory wait for all that, and a loop of atomic replaces (create a
 * temporary name, rename it over a file) would cost two write rounds a
 * replace instead of a few in all.  The freed record is reused like any
 * other once the patch is on disk. */
int e2_dir_move_in_block(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
			 const char *newname, size_t newlen, uint32_t ino, mode_t mode,
			 struct e2_deps *deps, struct patch **out)
{
	uint8_t buf[EXT2_MIN_BLOCK_SIZE * 64];
	struct e2_dname **pp, *dn, *tn;
	struct cblock *b;
	struct dent de;
	uint32_t pblk, prev, off, toff, lo, hi, slo, shi;
	int r;

	r = dix_lookup(fs, dir, name, len, &pp);
	if (r)
		return r;
	dn = *pp;
	r = dix_lookup(fs, dir, newname, newlen, &pp);
	if (r)
		return r;
	tn = *pp;
	if (dn->pos / fs->bs != tn->pos / fs->bs)
		return 1;
	r = entry_to_change(fs, dir, dn->pos, deps, &b, &pblk, &de, &prev);
	if (r)
		return r;
	memcpy(buf, cblock_data(b), fs->bs);
	off = dn->pos % fs->bs;
	toff = tn->pos % fs->bs;
	/* the removal, as e2_dir_remove makes it, or in place */
	if (fs->opts.consistency == CONSISTENCY_SOFTUPDATES)
		prev = UINT32_MAX;
	if (prev != UINT32_MAX) {
		uint16_t rl = merged_rec_len(fs, dir, buf, dn->pos, prev, &de);

		memcpy(buf + prev + 4, &rl, 2);
		lo = prev + 4;
		hi = prev + 6;
		slo = prev + 4;
		shi = off + 8;
	} else {
		memset(buf + off, 0, 4);
		lo = slo = off;
		hi = shi = off + 4;
	}
	/* the retarget */
	{
		uint32_t i32 = htole32(ino);

		memcpy(buf + toff, &i32, 4);
		if (fs->filetype)
			buf[toff + 7] = e2_ftype(mode);
		if (toff < lo)
			lo = toff;
		if (toff + (fs->filetype ? 8 : 4) > hi)
			hi = toff + (fs->filetype ? 8 : 4);
	}
	if (lo < slo)
		slo = lo;
	if (hi > shi)
		shi = hi;
	r = patch_create_byte_span(fs->c, b, lo, hi - lo, buf + lo, slo, shi - slo,
				   deps ? deps->p : NULL, deps ? deps->n : 0, fs->scope, out);
	cache_put(fs->c, b);
	if (!r)
		dir_changed(fs, dir, out);
	if (!r && out && *out) {
		r = removal_named(fs, dir, name, len, *out);
		e2_dir_removal_pending(fs, dir, *out);
	}
	if (r)
		return r;
	tn->ino = ino;
	tn->ftype = e2_ftype(mode);
	return dix_drop(fs, dir, dix_find(dir->dix, name, len), pblk);
}

/* Rename to a name the directory does not hold, in place: the entry of
 * name takes newname in its own record, in one patch (the caller checked
 * that it fits: e2_dir_preread()).  A block write is atomic, so the disk holds
 * the old name or the new one, never both, and the inode's count need not
 * be raised around them (as e2_dir_move_in_block()).  Otherwise the new
 * name waits for the raised count, the old one goes after the new, and
 * the count comes down after that: the directory and the inode take turns,
 * three rounds for `mv a b`.  The patch counts as the removal of the old
 * name: a new entry of that name waits for it. */
int e2_dir_rename_in_place(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
			   const char *newname, size_t newlen, uint32_t ino, mode_t mode,
			   struct e2_deps *deps, struct patch **out)
{
	uint8_t buf[EXT2_MIN_BLOCK_SIZE * 64];
	struct e2_dname **pp;
	struct cblock *b;
	struct dent de;
	uint32_t pblk, prev, pos, off;
	int r;

	r = dix_lookup(fs, dir, name, len, &pp);
	if (!r)
		r = rmname_deps(dir, newname, newlen, deps);
	if (r)
		return r;
	pos = (*pp)->pos;
	r = entry_to_change(fs, dir, pos, deps, &b, &pblk, &de, &prev);
	if (r)
		return r;
	if (de.rec < E2_REC_LEN(newlen)) {
		cache_put(fs->c, b);
		return e2_err(fs, -EIO, "directory %u: no room for a name in place at %u", dir->ino,
			      pos);
	}
	off = pos % fs->bs;
	memcpy(buf, cblock_data(b), fs->bs);
	buf[off + 6] = (uint8_t)newlen;
	buf[off + 7] = fs->filetype ? e2_ftype(mode) : 0;
	memcpy(buf + off + 8, newname, newlen);
	r = patch_create_byte(fs->c, b, off + 6, (uint32_t)(2 + newlen), buf + off + 6,
			      deps ? deps->p : NULL, deps ? deps->n : 0, fs->scope, out);
	cache_put(fs->c, b);
	if (!r)
		dir_changed(fs, dir, out);
	if (!r && out && *out)
		r = removal_named(fs, dir, name, len, *out);
	/* the index: the old name out, the new one at its place */
	if (!r)
		r = dix_drop(fs, dir, pp, pblk);
	return r ? r : dix_insert(dir->dix, newname, newlen, pos, ino, e2_ftype(mode));
}

/* The ".." entry: the second entry of the first block. */
static int dotdot(struct e2fs *fs, struct e2_inode *dir, struct cblock **bp, uint32_t *off)
{
	struct cblock *b;
	struct dent de;
	uint32_t pblk;
	int r;

	r = dir_block(fs, dir, 0, &pblk);
	if (r)
		return r;
	r = cache_get(fs->c, pblk, &b);
	if (r)
		return e2_err(fs, r, "directory %u: cannot read block %u", dir->ino, pblk);
	r = parse(fs, dir, 0, cblock_data(b), 0, &de);
	if (!r && (de.nlen != 1 || de.name[0] != '.'))
		r = e2_err(fs, -EIO, "directory %u: first entry is not '.'", dir->ino);
	if (!r) {
		*off = de.rec;
		r = parse(fs, dir, 0, cblock_data(b), de.rec, &de);
	}
	if (!r && (!de.ino || de.nlen != 2 || memcmp(de.name, "..", 2)))
		r = e2_err(fs, -EIO, "directory %u: second entry is not '..'", dir->ino);
	if (r) {
		cache_put(fs->c, b);
		return r;
	}
	*bp = b;
	return 0;
}

int e2_dir_get_dotdot(struct e2fs *fs, struct e2_inode *dir, uint32_t *parent)
{
	struct cblock *b;
	uint32_t off;
	int r;

	r = dotdot(fs, dir, &b, &off);
	if (r)
		return r;
	*parent = le32toh(*(const uint32_t *)(cblock_data(b) + off));
	cache_put(fs->c, b);
	return 0;
}

int e2_dir_set_dotdot(struct e2fs *fs, struct e2_inode *dir, uint32_t parent, struct e2_deps *deps,
		      struct patch **out)
{
	struct e2_dname **pp;
	struct cblock *b;
	uint32_t off, v = htole32(parent);
	int r;

	r = dir_to_change(fs, dir, deps);
	if (r)
		return r;
	r = dotdot(fs, dir, &b, &off);
	if (r)
		return r;
	r = patch_create_byte(fs->c, b, off, 4, &v, deps ? deps->p : NULL, deps ? deps->n : 0,
			      fs->scope, out);
	cache_put(fs->c, b);
	if (r)
		return r;
	dir_changed(fs, dir, out);
	pp = dix_find(dir->dix, "..", 2);
	if (pp)
		(*pp)->ino = parent;
	return 0;
}

/* 0 if the directory holds only "." and "..", -ENOTEMPTY otherwise. */
int e2_dir_empty(struct e2fs *fs, struct e2_inode *dir)
{
	int r = dix_build(fs, dir);

	if (r)
		return r;
	if (dir->dix->count > 2)
		return -ENOTEMPTY;
	for (size_t i = 0; i < dir->dix->nbuckets; i++)
		for (struct e2_dname *d = dir->dix->tab[i]; d; d = d->next)
			if (!(d->len == 1 && d->name[0] == '.') &&
			    !(d->len == 2 && !memcmp(d->name, "..", 2)))
				return -ENOTEMPTY;
	return 0;
}

void e2_dir_new_block(struct e2fs *fs, uint32_t ino, uint32_t parent, uint8_t *blk)
{
	uint32_t v;
	uint16_t rl;

	memset(blk, 0, fs->bs);
	v = htole32(ino);
	memcpy(blk, &v, 4);
	rl = htole16(12);
	memcpy(blk + 4, &rl, 2);
	blk[6] = 1;
	blk[7] = fs->filetype ? EXT2_FT_DIR : 0;
	blk[8] = '.';
	v = htole32(parent);
	memcpy(blk + 12, &v, 4);
	rl = htole16((uint16_t)(fs->bs - 12 == 65536 ? 65535 : fs->bs - 12));
	memcpy(blk + 16, &rl, 2);
	blk[18] = 2;
	blk[19] = fs->filetype ? EXT2_FT_DIR : 0;
	blk[20] = '.';
	blk[21] = '.';
}

int e2_dir_iterate(struct e2fs *fs, struct e2_inode *dir, off_t off,
		   int (*fn)(const struct e2_dirent *d, void *arg), void *arg)
{
	char name[EXT2_NAME_LEN + 1];
	uint32_t n;
	int r;

	if (!e2_idir(dir))
		return -ENOTDIR;
	r = dir_nblocks(fs, dir, &n);
	if (r)
		return r;
	if (off < 0)
		return -EINVAL;
	for (uint32_t l = (uint32_t)((uint64_t)off / fs->bs); l < n; l++) {
		uint32_t pblk, start = l == (uint64_t)off / fs->bs ? (uint32_t)(off % fs->bs) : 0;
		struct cblock *b;
		struct dent de;
		int stop = 0;

		r = dir_block(fs, dir, l, &pblk);
		if (r)
			return r;
		r = cache_get(fs->c, pblk, &b);
		if (r)
			return e2_err(fs, r, "directory %u: cannot read block %u", dir->ino, pblk);
		for (uint32_t o = 0; o < fs->bs && !stop; o += de.rec) {
			struct e2_dirent d;

			r = parse(fs, dir, l, cblock_data(b), o, &de);
			if (r)
				break;
			if (o < start || !de.ino)
				continue;
			memcpy(name, de.name, de.nlen);
			name[de.nlen] = 0;
			d.name = name;
			d.name_len = de.nlen;
			d.ino = de.ino;
			d.type = ftype_mode(de.type);
			d.next = (off_t)l * fs->bs + o + de.rec;
			stop = fn(&d, arg);
		}
		cache_put(fs->c, b);
		if (r)
			return r;
		if (stop)
			break;
	}
	return 0;
}
