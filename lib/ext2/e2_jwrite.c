/* ext2: the JBD2 journal writer, -o consistency=journal and journal-data
 * (design.md §3, "Journal writer").
 *
 * Transactions are patches and dependencies, not a write path of their own:
 *
 *  - the running transaction is a held empty patch H that every change of
 *    the file system joins (the engine asks join() for each change): every
 *    metadata change, and under journal-data every change.  Under journal a
 *    data change joins only when it already waits for a held patch (it
 *    depends on a change of a transaction: a block freed in the running
 *    transaction and reused, which the allocator does only on a nearly
 *    full disk, e2_alloc.c) or its block has a copy in the live log (a
 *    replay would overwrite it); the others are "ordered": the commit
 *    waits for them;
 *  - a commit writes, on the next journal blocks, descriptor blocks and a
 *    copy of each block of the transaction as the cache holds it (no
 *    change of the next transaction exists yet: commits run under the file
 *    system's lock), then a commit block that depends on all of them, on
 *    the ordered data, on the previous commit, on needs_recovery and on
 *    the journal superblock's latest update (the mount's first commit
 *    block goes beside the superblock's move of s_start from 0 instead,
 *    and counts as durable once both are).  H is let go once the commit
 *    block is durable, so the transaction's changes reach their homes only after it
 *    (the checkpoint), all in one round: a change that joins keeps no
 *    dependency on other blocks but H (the engine drops them: the log
 *    replays what they stood for until T is durable);
 *  - T, an empty patch over the transaction's changes and the T before
 *    it, is durable once the checkpoint is; the journal
 *    superblock's s_start moves past a transaction (at a later commit)
 *    only then, and log space is reused only after that move is durable;
 *  - needs_recovery is set in the superblock in the round of the first log
 *    blocks, before the first commit block and s_start, and cleared at a
 *    clean unmount after the last checkpoint and s_start = 0.
 * No revoke records are needed: a block with a copy in the live log is
 * never written in place outside a transaction.  Checksums are written
 * as the journal superblock asks (version 1, 2 or 3, as Linux writes
 * them), and a transaction must fit in the log: a write is cut into
 * pieces that do (e2_jroom). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2_int.h"
#include "journal/jbd2.h"
#include "util/bytes.h"
#include "util/grow.h"

#define JSB_SEQUENCE 0x18
#define JSB_START    0x1c
#define JSB_COMPAT   0x24
#define JSB_INCOMPAT 0x28
#define JSB_UUID     0x30
#define JSB_CHECKSUM 0xfc
/* Commit block: checksum type and size, then the checksum. */
#define COMMIT_CSUM_TYPE 12
#define COMMIT_CSUM_SIZE 13
#define COMMIT_CSUM	 16
#define CSUM_CRC32	 1

struct jtxn {
	uint32_t tid;
	uint32_t start, len; /* journal blocks [start, start+len), wrapping */
	struct patch *hold, *commit, *tail;
	bool released; /* its hold lets go once the latest commit is durable */
};

struct jent {
	uint64_t blk; /* 0: empty slot (block 0 is never journaled) */
	uint32_t run; /* running transaction that has it (+1), or 0 */
	uint32_t log; /* last transaction with a copy of it */
	bool logged;
};

struct e2_jw {
	struct cache_txn ops; /* first: the engine hands it back */
	struct e2fs *fs;
	bool data_all; /* journal-data */
	uint64_t *map;
	uint32_t nmap, first, maxlen, tagsz;
	bool b64;
	/* Checksums, as the journal superblock asks: version 1 (compat
	 * checksum) puts a crc32 of the transaction's log blocks in its
	 * commit block; versions 2 and 3 put a crc32c seeded from the
	 * journal's uuid in each tag (of the copy, with the transaction's
	 * number), at the tail of each descriptor, in each commit block and
	 * in the journal superblock. */
	bool csum1, csum, csum3;
	uint32_t seed;
	uint8_t jsb[1024];
	uint32_t disk_start, disk_seq; /* as the latest jsb patch sets them */
	struct patch *jsbp;
	struct patch *recover; /* needs_recovery set */
	bool recover_set;
	bool own;     /* the writer's own changes join nothing */
	bool wrapped; /* the head went round the log once */
	uint32_t head;
	uint32_t tid;
	struct patch *hold;
	uint64_t *run; /* blocks of the running transaction */
	size_t nrun, caprun;
	struct patch **ord; /* ordered data changes */
	size_t nord, capord;
	uint64_t nfreed;      /* blocks freed in the running transaction */
	bool broken;	      /* out of memory in a hook */
	bool debug_nocopies;  /* FSTITCH_JOURNAL_DEBUG=nocopies */
	bool debug_badcsum;   /* FSTITCH_JOURNAL_DEBUG=badcsum */
	bool debug_early;     /* FSTITCH_JOURNAL_DEBUG=earlycheckpoint */
	bool debug_noorphans; /* FSTITCH_JOURNAL_DEBUG=noorphans */
	bool debug_reuse;     /* FSTITCH_JOURNAL_DEBUG=reuseearly */
	bool debug_unscoped;  /* FSTITCH_JOURNAL_DEBUG=unscopedall */
	struct jent *tab;
	size_t tabsize, tabcount;
	struct jtxn *live; /* committed, not out of the log, oldest first */
	size_t nlive, caplive;
	struct patch *last_commit;
	struct patch *last_tail; /* the newest transaction's T */
	uint32_t quarter;	 /* blocks at which a commit is asked for */
	uint32_t bound_failed;	 /* tid + 1 of a bound commit that failed */
	bool cp_want;		 /* the cache is short of writable blocks (atomic) */
	/* the commit timer */
	pthread_t thread;
	bool thread_on, stop, kick;
	pthread_mutex_t tmu;
	pthread_mutex_t smu; /* live and head, for jw_stats() */
	pthread_cond_t tcond;
	unsigned commit_ms;
	/* counters */
	uint64_t commits, logged_blocks, ordered_total, checkpoints;
};

static uint64_t hash64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static struct jent *tab_find(struct e2_jw *jw, uint64_t blk, bool add)
{
	size_t mask, i;

	if (add && (jw->tabcount + 1) * 2 > jw->tabsize) {
		size_t ns = jw->tabsize ? jw->tabsize * 2 : 1024;
		struct jent *nt = calloc(ns, sizeof(*nt));

		if (!nt)
			return NULL;
		for (size_t k = 0; k < jw->tabsize; k++) {
			struct jent *e = &jw->tab[k];

			if (!e->blk)
				continue;
			for (i = hash64(e->blk) & (ns - 1); nt[i].blk; i = (i + 1) & (ns - 1))
				;
			nt[i] = *e;
		}
		free(jw->tab);
		jw->tab = nt;
		jw->tabsize = ns;
	}
	if (!jw->tabsize)
		return NULL;
	mask = jw->tabsize - 1;
	for (i = hash64(blk) & mask; jw->tab[i].blk; i = (i + 1) & mask)
		if (jw->tab[i].blk == blk)
			return &jw->tab[i];
	if (!add)
		return NULL;
	jw->tab[i].blk = blk;
	jw->tabcount++;
	return &jw->tab[i];
}

static uint32_t oldest_live(const struct e2_jw *jw)
{
	return jw->nlive ? jw->live[0].tid : jw->tid;
}

static void ask_commit(struct e2_jw *jw)
{
	pthread_mutex_lock(&jw->tmu);
	jw->kick = true;
	pthread_cond_signal(&jw->tcond);
	pthread_mutex_unlock(&jw->tmu);
}

/* Under the cache lock (and the file system's, held by the caller that
 * makes the change). */
static struct patch *jw_join(struct cache_txn *t, uint64_t blkno, bool pinned)
{
	struct e2_jw *jw = (struct e2_jw *)t;
	struct jent *e;

	if (jw->own || !jw->hold)
		return NULL;
	if (!jw->data_all && jw->fs->jdata && !pinned) {
		e = tab_find(jw, blkno, false);
		if (!e || (e->run != jw->tid + 1 &&
			   !(e->logged && (int32_t)(e->log - oldest_live(jw)) >= 0)))
			return NULL;
	}
	e = tab_find(jw, blkno, true);
	if (!e) {
		jw->broken = true;
		return jw->hold;
	}
	if (e->run != jw->tid + 1) {
		if (GROW(&jw->run, &jw->caprun, jw->nrun + 1, 64)) {
			jw->broken = true;
			return jw->hold;
		}
		e->run = jw->tid + 1;
		jw->run[jw->nrun++] = blkno;
		if (jw->nrun == jw->quarter)
			ask_commit(jw);
	}
	return jw->hold;
}

/* Under the cache lock, as jw_join().  A data change that initialises a
 * block its write has just allocated leaves out its patchgroup's befores
 * that wait for a held patch.  Those stand for changes of this
 * transaction or an earlier one, and for ordered data that this commit
 * waits for; the block is reachable only once the pointer that this
 * transaction stores is, so no crash state shows the data before
 * everything the group ordered before it.  Kept, they would make it
 * join, and the data would go through the log and home again.  (A block
 * freed in the running transaction, which the allocator hands out only
 * on a nearly full disk, is another matter: its initialisation waits for
 * the free, and that wait of its own still makes it join.)  A write over
 * a block already reachable keeps them, and joins. */
static bool jw_unscoped(struct cache_txn *t, uint64_t blkno)
{
	struct e2_jw *jw = (struct e2_jw *)t;

	(void)blkno;
	return !jw->own && jw->hold && !jw->data_all && jw->fs->jdata &&
	       (jw->fs->jnew || jw->debug_unscoped);
}

static void jw_outside(struct cache_txn *t, struct patch *p)
{
	struct e2_jw *jw = (struct e2_jw *)t;

	if (jw->own || !jw->hold || patch_committed(p))
		return;
	if (jw->nord && jw->ord[jw->nord - 1] == p)
		return;
	if (GROW(&jw->ord, &jw->capord, jw->nord + 1, 64)) {
		jw->broken = true;
		return;
	}
	patch_retain(p);
	jw->ord[jw->nord++] = p;
	jw->ordered_total++;
}

static void txn_free(struct e2_jw *jw, struct jtxn *x)
{
	patch_release(jw->fs->c, x->hold);
	patch_release(jw->fs->c, x->commit);
	patch_release(jw->fs->c, x->tail);
}

/* Under the cache lock.  The writer's own change of needs_recovery lands
 * on the superblock's block, whose other changes join: a joined patch
 * widened over s_feature_incompat would make the commit block wait for
 * the hold it releases. */
static bool jw_wide(struct cache_txn *t, uint64_t blkno)
{
	struct e2_jw *jw = (struct e2_jw *)t;

	return blkno != jw->fs->sb_blk;
}

/* Drop the oldest transactions whose checkpoint is durable. */
static bool retire(struct e2_jw *jw)
{
	bool any = false;

	while (jw->nlive && patch_committed(jw->live[0].tail)) {
		struct jtxn x = jw->live[0];

		pthread_mutex_lock(&jw->smu);
		memmove(jw->live, jw->live + 1, (jw->nlive - 1) * sizeof(*jw->live));
		jw->nlive--;
		pthread_mutex_unlock(&jw->smu);
		txn_free(jw, &x); /* (takes the cache lock: not under smu) */
		any = true;
	}
	return any;
}

static uint32_t log_free(const struct e2_jw *jw)
{
	uint32_t size = jw->maxlen - jw->first;

	if (!jw->nlive)
		return size;
	return (jw->live[0].start + size - jw->head) % size
		   ? (jw->live[0].start + size - jw->head) % size
		   : 0;
}

static uint32_t advance(const struct e2_jw *jw, uint32_t pos, uint32_t n)
{
	uint32_t size = jw->maxlen - jw->first;

	return jw->first + (pos - jw->first + n) % size;
}

/* Log blocks of the committed transactions not yet let go home. */
static uint32_t log_held(const struct e2_jw *jw)
{
	uint32_t n = 0;

	for (size_t i = jw->nlive; i-- > 0 && !jw->live[i].released;)
		n += jw->live[i].len;
	return n;
}

/* The checkpoint: let every committed transaction still held go home once
 * the latest commit block is durable (commits are ordered, so each of
 * theirs is too).  Until now their changes stayed held after their commit,
 * so that a block changed by many transactions goes home once, with the
 * changes of all of them; the running transaction's changes on the same
 * blocks are rolled back from those writes as always.  Under the file
 * system's lock. */
static int checkpoint(struct e2_jw *jw)
{
	struct patch *after;
	int r;

	__atomic_store_n(&jw->cp_want, false, __ATOMIC_RELAXED);
	if (!jw->nlive || jw->live[jw->nlive - 1].released)
		return 0;
	after = jw->live[jw->nlive - 1].commit;
	for (size_t i = 0; i < jw->nlive; i++) {
		struct jtxn *x = &jw->live[i];

		if (x->released)
			continue;
		r = patch_unhold_after(jw->fs->c, x->hold, after);
		if (r) {
			jw->broken = true;
			return e2_err(jw->fs, r, "journal: cannot checkpoint transaction %u",
				      x->tid);
		}
		x->released = true;
	}
	jw->checkpoints++;
	return 0;
}

/* Under the cache lock: too much is dirty and nothing can be written, as
 * everything waits for held transactions.  The commit thread checkpoints
 * them (not here: the file system's lock may be held by this caller). */
static void jw_pressure(struct cache_txn *t)
{
	struct e2_jw *jw = (struct e2_jw *)t;

	if (__atomic_exchange_n(&jw->cp_want, true, __ATOMIC_RELAXED))
		return;
	ask_commit(jw);
}

/* Write s_sequence and s_start of the journal superblock (own change). */
static int jsb_write(struct e2_jw *jw, uint32_t seq, uint32_t start, struct patch *dep)
{
	struct e2fs *fs = jw->fs;
	struct cblock *b;
	struct patch *p = NULL;
	int r;

	uint32_t len = 8;

	st_be32(jw->jsb + JSB_SEQUENCE, seq);
	st_be32(jw->jsb + JSB_START, start);
	if (jw->csum) {
		/* one change from s_sequence to s_checksum: the block never
		 * goes out with the new fields and the old sum */
		st_be32(jw->jsb + JSB_CHECKSUM, jbd2_sb_csum(jw->jsb));
		len = JSB_CHECKSUM + 4 - JSB_SEQUENCE;
	}
	r = cache_get(fs->c, jw->map[0], &b);
	if (r)
		return e2_err(fs, r, "cannot read the journal superblock");
	r = patch_create_byte(fs->c, b, JSB_SEQUENCE, len, jw->jsb + JSB_SEQUENCE,
			      dep ? &dep : NULL, dep ? 1 : 0, NULL, &p);
	cache_put(fs->c, b);
	if (r)
		return r;
	patch_release(fs->c, jw->jsbp);
	jw->jsbp = p;
	jw->disk_seq = seq;
	jw->disk_start = start;
	return 0;
}

/* A whole journal block (own change) after deps. */
static int jblock_write(struct e2_jw *jw, uint32_t pos, const uint8_t *data, struct patch **deps,
			size_t nd, struct patch **out)
{
	struct e2fs *fs = jw->fs;
	struct cblock *b;
	int r;

	r = cache_get_log(fs->c, jw->map[pos], &b);
	if (r)
		return e2_err(fs, r, "cannot get journal block %u", pos);
	r = patch_create_byte(fs->c, b, 0, fs->bs, data, deps, nd, NULL, out);
	cache_put(fs->c, b);
	return r;
}

/* A block of the transaction's log (descriptor or copy) at *pos, after
 * deps: the commit waits for it (cdeps) and *pos moves past it. */
static int jlog_put(struct e2_jw *jw, uint32_t *pos, const uint8_t *data, struct patch **deps,
		    size_t nd, struct e2_deps *cdeps)
{
	struct patch *p = NULL;
	int r;

	r = jblock_write(jw, *pos, data, deps, nd, &p);
	if (!r)
		r = e2_deps_add(cdeps, p); /* (takes p's reference) */
	if (r) {
		patch_release(jw->fs->c, p);
		return r;
	}
	*pos = advance(jw, *pos, 1);
	return 0;
}

static void hdr(uint8_t *b, uint32_t type, uint32_t tid)
{
	st_be32(b, JBD2_MAGIC);
	st_be32(b + 4, type);
	st_be32(b + 8, tid);
}

/* Copy block blk as the cache holds it into copy, escaped when it starts
 * with the journal's magic; true if it was. */
static int read_copy(struct e2_jw *jw, uint64_t blk, uint8_t *copy, bool *escaped)
{
	struct e2fs *fs = jw->fs;
	struct cblock *b;
	int r;

	r = cache_get(fs->c, blk, &b);
	if (r)
		return e2_err(fs, r, "journal: cannot read block %llu", (unsigned long long)blk);
	memcpy(copy, cblock_data(b), fs->bs);
	cache_put(fs->c, b);
	*escaped = ld_be32(copy) == JBD2_MAGIC;
	if (*escaped)
		memset(copy, 0, 4);
	return 0;
}

/* The tag of block blk whose copy (as logged) is copy, at tag. */
static void put_tag(struct e2_jw *jw, uint8_t *tag, uint64_t blk, uint32_t flags,
		    const uint8_t *copy)
{
	uint8_t seq[4];
	uint32_t c;

	st_be32(tag, (uint32_t)blk);
	if (jw->csum3)
		st_be32(tag + 4, flags);
	else
		st_be16(tag + 6, (uint16_t)flags);
	if (jw->b64)
		st_be32(tag + 8, (uint32_t)(blk >> 32));
	if (!jw->csum)
		return;
	/* over the transaction's number and the copy as the log holds it */
	st_be32(seq, jw->tid);
	c = jbd2_crc32c(jw->seed, seq, 4);
	c = jbd2_crc32c(c, copy, jw->fs->bs);
	if (jw->debug_badcsum && !(flags & JBD2_FLAG_SAME_UUID))
		c ^= 1; /* negative control: the first tag of each descriptor */
	if (jw->csum3)
		st_be32(tag + 12, c);
	else
		st_be16(tag + 4, (uint16_t)c);
}

/* Order the running transaction's blocks so that those its commit logs
 * come first, and return how many they are: all but the data blocks it
 * left free that have no copy in the live log.  Such a block's contents
 * are nobody's once the commit is durable, and until then no replay
 * writes it and its home write waits for the hold like the others'; a
 * later reuse in place is safe, as the block has no copy to replay over
 * it (jw_join()).  A block with a live copy is logged all the same: the
 * replay of that copy must not meet a newer home write that no copy
 * stands for.  The directories an rm -rf empties and removes were each
 * logged for nothing. */
static size_t order_run(struct e2_jw *jw)
{
	uint64_t *skip = NULL;
	size_t i, n = 0, ns = 0;

	for (i = 0; i < jw->nrun; i++) {
		uint64_t blk = jw->run[i];
		struct jent *e = tab_find(jw, blk, false);
		bool live = e && e->logged && (int32_t)(e->log - oldest_live(jw)) >= 0;

		if (!live && blk <= UINT32_MAX && e2_block_unused(jw->fs, (uint32_t)blk)) {
			if (!skip && !(skip = malloc((jw->nrun - i) * sizeof(*skip))))
				return jw->nrun; /* (log them all) */
			skip[ns++] = blk;
		} else {
			jw->run[n++] = blk;
		}
	}
	if (ns)
		memcpy(jw->run + n, skip, ns * sizeof(*skip));
	free(skip);
	return n;
}

static int commit_locked(struct e2_jw *jw)
{
	struct e2fs *fs = jw->fs;
	uint32_t bs = fs->bs, per, ndesc, need, pos, start;
	struct e2_deps cdeps = {0};
	struct patch *base[2], *p = NULL, *tail = NULL, *nh = NULL;
	uint8_t *desc = NULL, *copy = NULL;
	size_t nbase = 0, nlog, i, k;
	uint32_t crc1 = ~0u, tailsz = jw->csum ? 4 : 0;
	bool esc, first;
	int r = 0;

	if (jw->broken)
		return e2_err(fs, -ENOMEM, "journal: out of memory tracking a transaction");
	if (!jw->nrun && !jw->nord)
		return 0;
	/* What ext2 leaves for a sync goes in too: replaced indirect blocks
	 * freed and the superblock's free counts, so that the transaction
	 * leaves nothing for e2fsck to find. */
	r = e2_dfree_all(fs);
	if (!r)
		r = e2_sb_write_counts(fs);
	if (r)
		return r;
	jw->own = true;
	nlog = order_run(jw);
	/* tags of one descriptor: its header, the tags, one UUID, the tail */
	per = (bs - 12 - 16 - tailsz) / jw->tagsz;
	ndesc = (uint32_t)((nlog + per - 1) / per);
	need = (uint32_t)nlog + ndesc + 1;
	if (need + 1 > jw->maxlen - jw->first) {
		r = e2_err(fs, -ENOSPC, "journal: a transaction of %zu blocks does not fit the log",
			   nlog);
		goto out;
	}
	retire(jw);
	while (log_free(jw) < need + 1) {
		/* Wait for the oldest transaction's checkpoint (rounds do not
		 * need the file system's lock). */
		r = checkpoint(jw);
		if (!r)
			r = cache_sync_patch(fs->c, jw->live[0].tail);
		if (r) {
			r = e2_err(fs, r, "journal: cannot checkpoint transaction %u",
				   jw->live[0].tid);
			goto out;
		}
		retire(jw);
	}
	if (!jw->recover_set) {
		fs->sb.s_feature_incompat =
		    htole32(le32toh(fs->sb.s_feature_incompat) | EXT3_FEATURE_INCOMPAT_RECOVER);
		r = e2_sb_write_incompat(fs, &jw->recover);
		if (r)
			goto out;
		jw->recover_set = true;
	}
	/* s_start may name a transaction only once needs_recovery is on disk:
	 * a log to replay on a file system not marked is an error to e2fsck.
	 * The log blocks need not wait for it (without their commit block
	 * they are nothing to replay); the commit block does.  The first
	 * commit of the mount moves s_start from 0, an empty log. */
	first = jw->disk_start == 0;
	start = jw->nlive ? jw->live[0].start : jw->head;
	if (start != jw->disk_start || oldest_live(jw) != jw->disk_seq) {
		r = jsb_write(jw, oldest_live(jw), start, jw->recover);
		if (r)
			goto out;
	}
	if (jw->head - jw->first + need >= jw->maxlen - jw->first)
		jw->wrapped = true;
	/* Reused log space: only once the move of s_start past it is durable. */
	if (jw->wrapped && jw->jsbp && !patch_committed(jw->jsbp))
		base[nbase++] = jw->jsbp;
	desc = calloc(1, bs);
	copy = malloc(bs);
	r = -ENOMEM;
	if (!desc || !copy)
		goto out;
	pos = jw->head;
	for (i = 0; i < nlog; i += per) {
		uint32_t off = 12;
		size_t end = i + per < nlog ? i + per : nlog;

		/* The descriptor first (version 1 sums it before its copies),
		 * then the copies, read again from the cache: nothing changes
		 * them in between (the file system's lock is held). */
		memset(desc, 0, bs);
		hdr(desc, JBD2_DESCRIPTOR_BLOCK, jw->tid);
		for (k = i; k < end; k++) {
			uint32_t flags = 0;

			r = read_copy(jw, jw->run[k], copy, &esc);
			if (r)
				goto out;
			if (esc)
				flags |= JBD2_FLAG_ESCAPE;
			if (k > i)
				flags |= JBD2_FLAG_SAME_UUID;
			if (k == end - 1)
				flags |= JBD2_FLAG_LAST_TAG;
			put_tag(jw, desc + off, jw->run[k], flags, copy);
			off += jw->tagsz;
			if (k == i) {
				memcpy(desc + off, jw->jsb + JSB_UUID, 16);
				off += 16;
			}
		}
		if (jw->csum)
			st_be32(desc + bs - 4, jbd2_crc32c(jw->seed, desc, bs));
		if (jw->csum1)
			crc1 = jbd2_crc32_be(crc1, desc, bs);
		r = jlog_put(jw, &pos, desc, base, nbase, &cdeps);
		if (r)
			goto out;
		for (k = i; k < end; k++) {
			r = read_copy(jw, jw->run[k], copy, &esc);
			if (r)
				goto out;
			if (jw->csum1)
				crc1 = jbd2_crc32_be(crc1, copy, bs);
			r = jlog_put(jw, &pos, copy, base, nbase, &cdeps);
			if (r)
				goto out;
		}
	}
	/* The commit block. */
	memset(desc, 0, bs);
	hdr(desc, JBD2_COMMIT_BLOCK, jw->tid);
	st_be32(desc + 0x30, 0);
	st_be32(desc + 0x34, e2_now());
	if (jw->csum1) {
		desc[COMMIT_CSUM_TYPE] = CSUM_CRC32;
		desc[COMMIT_CSUM_SIZE] = 4;
		st_be32(desc + COMMIT_CSUM, jw->debug_badcsum ? crc1 ^ 1 : crc1);
	} else if (jw->csum) {
		st_be32(desc + COMMIT_CSUM, jbd2_crc32c(jw->seed, desc, bs));
	}
	for (i = 0; i < jw->nord; i++) {
		if (!patch_committed(jw->ord[i])) {
			r = e2_deps_add(&cdeps, jw->ord[i]);
			if (r)
				goto out;
			jw->ord[i] = NULL; /* the reference moves to cdeps */
		}
	}
	for (i = 0; i < nbase; i++)
		if ((r = e2_deps_addref(&cdeps, base[i])))
			goto out;
	/* The commit block waits for the journal superblock's latest update,
	 * except the first one's: while s_start is 0 on disk nothing is
	 * replayed, so the two may go in one round, and the transaction
	 * counts as committed (its checkpoint, a reuse of what it freed, the
	 * next commit) once both are durable.  A crash between them leaves
	 * the old file system with an empty log, or a log whose transaction
	 * has no commit block. */
	if ((r = e2_deps_addref(&cdeps, jw->last_commit)) ||
	    (r = e2_deps_addref(&cdeps, jw->recover)) ||
	    (!first && (r = e2_deps_addref(&cdeps, jw->jsbp))))
		goto out;
	if (!jw->debug_nocopies) {
		r = jblock_write(jw, pos, desc, cdeps.p, cdeps.n, &p);
	} else {
		/* negative control: the commit does not wait for its copies */
		r = jblock_write(jw, pos, desc, &jw->last_commit, jw->last_commit ? 1 : 0, &p);
	}
	if (!r && first && jw->jsbp && !patch_committed(jw->jsbp)) {
		struct patch *both[2] = {p, jw->jsbp}, *e = NULL;

		r = patch_create_empty(fs->c, both, 2, &e);
		patch_release(fs->c, p);
		p = e;
	}
	if (r)
		goto out;
	pos = advance(jw, pos, 1);
	/* T over this transaction's changes and the T before it: the
	 * earlier transactions' changes on the same blocks are the earlier
	 * T's (a T over every change pending on the blocks would take one
	 * edge per change of every transaction not yet home). */
	r = patch_create_empty_blocks_after(fs->c, jw->run, jw->nrun, jw->last_tail, &tail);
	if (!r)
		r = patch_create_empty_held(fs->c, NULL, 0, &nh);
	if (!r) {
		pthread_mutex_lock(&jw->smu);
		if (GROW(&jw->live, &jw->caplive, jw->nlive + 1, 8))
			r = -ENOMEM;
		pthread_mutex_unlock(&jw->smu);
	}
	if (!r && jw->debug_early) {
		/* negative control: the checkpoint may go before the commit */
		patch_unhold(fs->c, jw->hold);
	}
	/* Otherwise H stays held: the transaction goes home at a later
	 * checkpoint(). */
	if (r) {
		patch_release(fs->c, tail);
		patch_release(fs->c, nh);
		patch_release(fs->c, p);
		p = NULL;
		r = e2_err(fs, r, "journal: cannot commit transaction %u", jw->tid);
		jw->broken = true;
		goto out;
	}
	pthread_mutex_lock(&jw->smu);
	jw->live[jw->nlive++] =
	    (struct jtxn){jw->tid, jw->head, need, jw->hold, p, tail, jw->debug_early};
	jw->head = advance(jw, jw->head, need);
	pthread_mutex_unlock(&jw->smu);
	patch_retain(p);
	patch_release(fs->c, jw->last_commit);
	jw->last_commit = p;
	patch_retain(tail);
	patch_release(fs->c, jw->last_tail);
	jw->last_tail = tail;
	for (i = 0; i < jw->nrun; i++) {
		struct jent *e = tab_find(jw, jw->run[i], false);

		if (e) {
			e->run = 0;
			if (i < nlog) {
				e->log = jw->tid;
				e->logged = true;
			}
		}
	}
	jw->commits++;
	jw->logged_blocks += nlog;
	jw->nrun = 0;
	jw->nfreed = 0;
	/* Open the next transaction: no change can come in between (the
	 * caller holds the file system's lock). */
	jw->hold = nh;
	jw->tid++;
	/* Go home when a quarter of the log is in use (well before a commit
	 * has to wait for log space) or the cache asked for it; otherwise the
	 * commit timer, a sync of everything and the unmount do it. */
	r = 0;
	if (log_held(jw) >= jw->quarter || __atomic_load_n(&jw->cp_want, __ATOMIC_RELAXED))
		r = checkpoint(jw);
out:
	for (i = 0; i < jw->nord; i++)
		patch_release(fs->c, jw->ord[i]);
	jw->nord = 0;
	e2_deps_free(fs, &cdeps);
	patch_release(fs->c, p == jw->last_commit ? NULL : p);
	free(desc);
	free(copy);
	jw->own = false;
	return r;
}

/* Under the cache lock (the engine's snapshot for fstitch-stat). */
static void jw_stats(struct cache_txn *t, struct cache_txn_stats *out)
{
	struct e2_jw *jw = (struct e2_jw *)t;

	pthread_mutex_lock(&jw->smu);
	out->running_tid = jw->tid;
	out->running_blocks = jw->nrun;
	out->running_ordered = jw->nord;
	for (size_t i = 0; i < jw->nlive; i++) {
		const struct jtxn *x = &jw->live[i];

		if (!patch_committed(x->commit))
			out->committing++;
		else if (!x->released)
			out->held++;
		else if (!patch_committed(x->tail))
			out->checkpointing++;
		else
			out->checkpointed++; /* s_start moves past it at a commit */
	}
	out->log_total = jw->maxlen - jw->first;
	out->log_used = out->log_total - log_free(jw);
	out->commits = jw->commits;
	out->logged_blocks = jw->logged_blocks;
	pthread_mutex_unlock(&jw->smu);
}

/* ---- the commit timer -------------------------------------------------- */

static void *timer_main(void *arg)
{
	struct e2_jw *jw = arg;
	struct timespec ts;
	bool timed, busy;

	pthread_mutex_lock(&jw->tmu);
	while (!jw->stop) {
		timed = false;
		if (!jw->kick) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += jw->commit_ms / 1000;
			ts.tv_nsec += (long)(jw->commit_ms % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			timed = pthread_cond_timedwait(&jw->tcond, &jw->tmu, &ts) == ETIMEDOUT;
			if (jw->stop)
				break;
		}
		jw->kick = false;
		pthread_mutex_unlock(&jw->tmu);
		pthread_mutex_lock(&jw->fs->lock);
		busy = jw->nrun || jw->nord;
		if (!jw->fs->ro && !commit_locked(jw)) {
			(void)checkpoint(jw);
			/* commit= bounds what a crash loses, as on ext3: the
			 * timer's commit goes to disk now, not at the
			 * flusher's next interval.  (A commit asked for at a
			 * quarter of the log waits for the flusher as
			 * before: the writer goes on filling the next.) */
			if (busy && timed)
				cache_flush_soon(jw->fs->c);
		}
		pthread_mutex_unlock(&jw->fs->lock);
		pthread_mutex_lock(&jw->tmu);
	}
	pthread_mutex_unlock(&jw->tmu);
	return NULL;
}

/* ---- the interface (e2_int.h) ------------------------------------------- */

/* mke2fs preallocates the journal of an image file as unwritten extents
 * (or leaves it a hole), and then every barrier after a commit's first
 * writes to a block of the log also makes the host's change of its extent
 * map durable: one more write for the host at nearly every commit, until
 * the log has gone round once.  At the start the log is empty (replayed,
 * s_start 0) and nothing in it counts, so its unwritten ranges become
 * zeros now, with one barrier; on a device, or an image whose log was
 * written before, nothing is written.  A failure leaves the log as it
 * was: each first write pays again, nothing worse.  Only the log's first
 * PREPARE_BYTES (where a mount's commits start) are done, so that a mount
 * never writes more than that. */
#define PREPARE_BYTES (128u << 20)

static void prepare_log(struct e2_jw *jw)
{
	uint32_t i = jw->first, j, end = jw->maxlen;
	uint64_t *blk, *cnt;
	size_t n = 0;

	if (end - jw->first > PREPARE_BYTES / jw->fs->bs)
		end = jw->first + PREPARE_BYTES / jw->fs->bs;
	blk = malloc((end - i) * sizeof(*blk));
	cnt = malloc((end - i) * sizeof(*cnt));
	if (blk && cnt) {
		while (i < end) {
			for (j = i + 1; j < end && jw->map[j] == jw->map[j - 1] + 1; j++)
				;
			blk[n] = jw->map[i];
			cnt[n++] = j - i;
			i = j;
		}
		(void)cache_prepare(jw->fs->c, blk, cnt, n);
	}
	free(blk);
	free(cnt);
}

int e2_jw_start(struct e2fs *fs)
{
	enum consistency mode = fs->opts.consistency;
	struct e2_jw *jw;
	uint8_t *b;
	uint32_t incompat, compat, type;
	const char *dbg;
	pthread_condattr_t ca;
	int r;

	if (mode != CONSISTENCY_JOURNAL && mode != CONSISTENCY_JOURNAL_DATA)
		return 0;
	if (!fs->jmap) {
		e2_set_open_error("consistency=%s needs a file system with a journal "
				  "(an ext3 image)",
				  mode == CONSISTENCY_JOURNAL ? "journal" : "journal-data");
		return -EINVAL;
	}
	jw = calloc(1, sizeof(*jw));
	b = malloc(fs->bs);
	if (!jw || !b) {
		free(jw);
		free(b);
		return -ENOMEM;
	}
	r = bdev_read(fs->dev, fs->jmap[0], 1, b);
	if (r) {
		free(jw);
		free(b);
		e2_set_open_error("cannot read the journal superblock: %s", strerror(-r));
		return r;
	}
	memcpy(jw->jsb, b, sizeof(jw->jsb));
	free(b);
	type = ld_be32(jw->jsb + 4);
	compat = type == JBD2_SUPERBLOCK_V2 ? ld_be32(jw->jsb + JSB_COMPAT) : 0;
	incompat = type == JBD2_SUPERBLOCK_V2 ? ld_be32(jw->jsb + JSB_INCOMPAT) : 0;
	/* (jbd2_open() checked the superblock, its checksum included) */
	if (incompat & ~(JBD2_FEATURE_INCOMPAT_REVOKE | JBD2_FEATURE_INCOMPAT_64BIT |
			 JBD2_FEATURE_INCOMPAT_CSUM_V2 | JBD2_FEATURE_INCOMPAT_CSUM_V3)) {
		free(jw);
		e2_set_open_error("consistency=journal: the journal has features the writer "
				  "does not support (incompat %#x)",
				  incompat);
		return -EOPNOTSUPP;
	}
	jw->fs = fs;
	jw->ops.join = jw_join;
	jw->ops.outside = jw_outside;
	jw->ops.unscoped = jw_unscoped;
	jw->ops.stats = jw_stats;
	jw->ops.pressure = jw_pressure;
	jw->ops.wide = jw_wide;
	jw->data_all = mode == CONSISTENCY_JOURNAL_DATA;
	jw->map = fs->jmap;
	jw->nmap = fs->jmapn;
	jw->first = ld_be32(jw->jsb + 0x14);
	jw->maxlen = ld_be32(jw->jsb + 0x10);
	if (jw->maxlen > jw->nmap)
		jw->maxlen = jw->nmap;
	jw->b64 = incompat & JBD2_FEATURE_INCOMPAT_64BIT;
	jw->csum = incompat & (JBD2_FEATURE_INCOMPAT_CSUM_V2 | JBD2_FEATURE_INCOMPAT_CSUM_V3);
	jw->csum3 = incompat & JBD2_FEATURE_INCOMPAT_CSUM_V3;
	jw->csum1 = !jw->csum && (compat & JBD2_FEATURE_COMPAT_CHECKSUM);
	if (jw->csum)
		jw->seed = jbd2_crc32c(~0u, jw->jsb + JSB_UUID, 16);
	/* tags as Linux sizes them: version 3 has its own 16-byte tag; a
	 * version 2 tag has a 16-bit checksum and two bytes unused */
	if (jw->csum3)
		jw->tagsz = 16;
	else
		jw->tagsz = 8 + (jw->csum ? 2 : 0) + (jw->b64 ? 4 : 0);
	jw->tid = ld_be32(jw->jsb + JSB_SEQUENCE);
	jw->disk_seq = jw->tid;
	jw->disk_start = ld_be32(jw->jsb + JSB_START);
	jw->head = jw->first;
	jw->quarter = (jw->maxlen - jw->first) / 4;
	jw->commit_ms = fs->opts.commit_ms ? fs->opts.commit_ms : 5000;
	dbg = getenv("FSTITCH_JOURNAL_DEBUG");
	jw->debug_nocopies = dbg && strcmp(dbg, "nocopies") == 0;
	jw->debug_badcsum = dbg && strcmp(dbg, "badcsum") == 0;
	jw->debug_early = dbg && strcmp(dbg, "earlycheckpoint") == 0;
	/* negative control: no orphan list (e2_orphan.c) */
	jw->debug_noorphans = dbg && strcmp(dbg, "noorphans") == 0;
	jw->debug_reuse = dbg && strcmp(dbg, "reuseearly") == 0;
	/* negative control: a write in place leaves its group's order out */
	jw->debug_unscoped = dbg && strcmp(dbg, "unscopedall") == 0;
	if (jw->first < 1 || jw->first >= jw->maxlen || jw->disk_start != 0) {
		free(jw);
		e2_set_open_error("consistency=journal: bad journal superblock");
		return -EUCLEAN;
	}
	prepare_log(jw);
	r = patch_create_empty_held(fs->c, NULL, 0, &jw->hold);
	if (r) {
		free(jw);
		return r;
	}
	pthread_mutex_init(&jw->tmu, NULL);
	pthread_mutex_init(&jw->smu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&jw->tcond, &ca);
	pthread_condattr_destroy(&ca);
	fs->jw = jw;
	cache_set_txn(fs->c, &jw->ops);
	if (!fs->opts.no_flusher) {
		r = pthread_create(&jw->thread, NULL, timer_main, jw);
		if (r) {
			e2_set_open_error("cannot start the commit thread");
			return -r;
		}
		jw->thread_on = true;
	}
	return 0;
}

int e2_jcommit(struct e2fs *fs, struct patch **out)
{
	struct e2_jw *jw = fs->jw;
	int r;

	r = commit_locked(jw);
	if (!r && out) {
		*out = jw->last_commit;
		patch_retain(*out);
	}
	return r;
}

enum e2_jstate e2_jstate(struct e2fs *fs, uint32_t tid, struct patch **commit)
{
	struct e2_jw *jw = fs->jw;

	if (tid == jw->tid)
		return E2_J_RUNNING;
	for (size_t i = jw->nlive; i-- > 0;) {
		if (jw->live[i].tid != tid)
			continue;
		/* negative control: a block freed by a transaction whose
		 * commit is not durable is reused as if it were */
		if (patch_committed(jw->live[i].commit) || jw->debug_reuse)
			return E2_J_DONE;
		*commit = jw->live[i].commit;
		return E2_J_COMMITTING;
	}
	return E2_J_DONE; /* out of the log: its checkpoint is durable */
}

uint32_t e2_jtid(const struct e2fs *fs)
{
	return fs->jw->tid;
}

uint32_t e2_jfreed(struct e2fs *fs)
{
	fs->jw->nfreed++;
	return fs->jw->tid;
}

uint64_t e2_jpiece_max(const struct e2fs *fs)
{
	return (fs->jw->maxlen - fs->jw->first) / 8;
}

int e2_jroom(struct e2fs *fs, uint64_t nblocks, uint64_t *piece)
{
	struct e2_jw *jw = fs->jw;
	uint64_t n = nblocks, est, most = e2_jpiece_max(fs);
	struct patch_scope *scope;
	int r;

	if (n > most)
		n = most;
	if (n < 1)
		n = 1;
	/* what n blocks of data may bring along: indirect blocks and their
	 * copies, bitmap blocks and group descriptors, the inode, the
	 * superblock */
	est = n + 2 * (n / fs->apb + 3) + 2 * (n / (8ull * fs->bs) + 2) + 4;
	/* Blocks freed in the running transaction are not handed out before
	 * it commits (e2_alloc.c): if the piece may need them, commit first,
	 * as ext3 does rather than fail with ENOSPC. */
	if (jw->nrun &&
	    (jw->nrun + est > jw->quarter || (jw->nfreed && fs->free_blocks < jw->nfreed + est))) {
		/* the commit's own changes belong to no patchgroup */
		scope = fs->scope;
		fs->scope = NULL;
		r = commit_locked(jw);
		fs->scope = scope;
		if (r)
			return r;
	}
	*piece = n;
	return 0;
}

void e2_jbound_locked(struct e2fs *fs)
{
	struct e2_jw *jw = fs->jw;

	/* The timer thread is asked at a quarter of the log; at half, the
	 * operation about to start commits first itself, so that a burst of
	 * operations that keeps the thread from the lock cannot make a
	 * transaction the log cannot hold (every later commit would fail).
	 * A failed commit is not tried again by each operation: only once
	 * a commit has worked. */
	if (!jw || jw->nrun < 2 * (size_t)jw->quarter || jw->bound_failed == jw->tid + 1)
		return;
	if (commit_locked(jw))
		jw->bound_failed = jw->tid + 1;
}

/* What a sync waits for, under the file system's lock: the commit of the
 * running transaction, or when that holds ordered data and no metadata,
 * only the data and the latest commit.  A commit block over no log block
 * makes nothing more durable (a replay has nothing to write), yet costs
 * one more round and barrier: an overwrite in place within one tick of the
 * clock changes no inode, and its fsync needs just the data on disk.  The
 * data stays on the ordered list: if its round fails, the next commit
 * still waits for it. */
static int sync_target(struct e2_jw *jw, struct patch **out)
{
	struct e2fs *fs = jw->fs;
	struct e2_deps d = {0};
	size_t i, n = 0;
	int r;

	if (jw->broken || jw->nrun || !jw->nord)
		return e2_jcommit(fs, out);
	/* what a commit adds first (commit_locked) may be metadata */
	r = e2_dfree_all(fs);
	if (!r)
		r = e2_sb_write_counts(fs);
	if (r)
		return r;
	if (jw->nrun)
		return e2_jcommit(fs, out);
	/* (what an earlier sync made durable leaves the list) */
	n = jw->nord = e2_patches_drop_committed(fs, jw->ord, jw->nord);
	for (i = 0; i < n && !r; i++)
		r = e2_deps_addref(&d, jw->ord[i]);
	if (!r)
		r = e2_deps_addref(&d, jw->last_commit);
	if (!r && d.n)
		r = patch_create_empty(fs->c, d.p, d.n, out);
	e2_deps_free(fs, &d);
	return r;
}

int e2_jsync(struct e2fs *fs)
{
	struct patch *c = NULL;
	int r;

	pthread_mutex_lock(&fs->lock);
	r = sync_target(fs->jw, &c);
	pthread_mutex_unlock(&fs->lock);
	if (!r && c)
		r = cache_sync_patch(fs->c, c);
	patch_release(fs->c, c);
	return r;
}

bool e2_journaling(const struct e2fs *fs)
{
	return fs && fs->jw;
}

bool e2_jw_orphans(const struct e2fs *fs)
{
	return fs->jw && !fs->jw->debug_noorphans;
}

int e2_commit_sync_cb(void *arg)
{
	return e2_jsync(arg);
}

int e2_jcheckpoint_locked(struct e2fs *fs)
{
	return checkpoint(fs->jw);
}

/* Commit and write everything home (the file system's lock held). */
int e2_jflush_locked(struct e2fs *fs)
{
	int r = e2_jcommit(fs, NULL);

	if (!r)
		r = checkpoint(fs->jw);
	if (!r)
		r = cache_sync(fs->c);
	if (!r)
		retire(fs->jw);
	return r;
}

void e2_jstop_soon(struct e2fs *fs)
{
	struct e2_jw *jw = fs->jw;

	if (!jw || !jw->thread_on)
		return;
	pthread_mutex_lock(&jw->tmu);
	jw->stop = true;
	pthread_cond_signal(&jw->tcond);
	pthread_mutex_unlock(&jw->tmu);
}

int e2_jstop(struct e2fs *fs, bool clean)
{
	struct e2_jw *jw = fs->jw;
	int r = 0;

	if (!jw)
		return 0;
	if (jw->thread_on) {
		e2_jstop_soon(fs);
		pthread_mutex_unlock(&fs->lock);
		pthread_join(jw->thread, NULL);
		pthread_mutex_lock(&fs->lock);
		jw->thread_on = false;
	}
	if (clean) {
		r = e2_jflush_locked(fs);
		if (!r && jw->nlive)
			r = -EIO;
		jw->own = true;
		if (!r && (jw->disk_start != 0 || jw->disk_seq != jw->tid))
			r = jsb_write(jw, jw->tid, 0, NULL);
		if (!r && jw->recover_set) {
			fs->sb.s_feature_incompat =
			    htole32(le32toh(fs->sb.s_feature_incompat) &
				    ~(uint32_t)EXT3_FEATURE_INCOMPAT_RECOVER);
			r = e2_sb_write_incompat_after(fs, jw->jsbp);
		}
		if (!r)
			r = cache_sync(fs->c);
		jw->own = false;
	}
	return r;
}

void e2_jfree(struct e2fs *fs)
{
	struct e2_jw *jw = fs->jw;

	if (!jw)
		return;
	if (jw->thread_on) {
		pthread_mutex_lock(&jw->tmu);
		jw->stop = true;
		pthread_cond_signal(&jw->tcond);
		pthread_mutex_unlock(&jw->tmu);
		pthread_join(jw->thread, NULL);
	}
	cache_set_txn(fs->c, NULL);
	for (size_t i = 0; i < jw->nlive; i++) {
		if (!jw->live[i].released)
			patch_unhold(fs->c, jw->live[i].hold);
		txn_free(jw, &jw->live[i]);
	}
	for (size_t i = 0; i < jw->nord; i++)
		patch_release(fs->c, jw->ord[i]);
	if (jw->hold) {
		patch_unhold(fs->c, jw->hold);
		patch_release(fs->c, jw->hold);
	}
	patch_release(fs->c, jw->jsbp);
	patch_release(fs->c, jw->recover);
	patch_release(fs->c, jw->last_commit);
	patch_release(fs->c, jw->last_tail);
	pthread_mutex_destroy(&jw->tmu);
	pthread_mutex_destroy(&jw->smu);
	pthread_cond_destroy(&jw->tcond);
	free(jw->run);
	free(jw->ord);
	free(jw->tab);
	free(jw->live);
	free(jw);
	fs->jw = NULL;
}
