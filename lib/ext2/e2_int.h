/* Internals of the ext2 module, shared by lib/e2*.c only.
 *
 * On-disk structures are the standard ext2 ones (<ext2fs/ext2_fs.h> layouts),
 * little-endian; every field read from disk is converted and checked before
 * use.  All functions here are called with fs->lock held.
 */
#ifndef FSTITCH_E2_INT_H
#define FSTITCH_E2_INT_H

#include <endian.h>
#include <pthread.h>
#include <stdarg.h>
#include <time.h>
#include <ext2fs/ext2_fs.h>
#include "engine/cache.h"
#include "e2.h"

#define E2_NDIR		    12 /* direct block pointers */
#define E2_IND		    12
#define E2_DIND		    13
#define E2_TIND		    14
#define E2_LINK_MAX	    32000
#define E2_FAST_SYMLINK_MAX 59

/* A growable list of patch references: the dependencies of the next patch. */
struct e2_deps {
	struct patch **p;
	size_t n, cap;
};

/* Per-directory name index: name -> entry, built on first use and kept in
 * step with every change, so lookups and creates do not scan the directory. */
struct e2_dname {
	struct e2_dname *next;
	uint32_t hash;
	uint32_t pos; /* byte position of the entry in the directory */
	uint32_t ino;
	uint8_t ftype;
	uint8_t len;
	char name[];
};

struct e2_dindex {
	struct e2_dname **tab;
	size_t nbuckets, count;
	uint32_t nblocks;
	/* per block: the largest record that still fits, as the leaves
	 * (tcap + l, 0 past nblocks) of a max-tree, so that finding a block
	 * with room is O(log n) however full the rest is */
	uint32_t *tree;
	uint32_t tcap;
	uint32_t hint; /* block where the last insert succeeded */
	/* The blocks the directory grew only to keep a new name off pending
	 * removals (dir_add), and 1 + cache_commits() at the last (0: none).
	 * A directory never shrinks, so at most E2_DIR_FRESH_MAX such blocks,
	 * one a round: a loop of mkdir and rmdir grew it a block an
	 * iteration. */
	uint32_t nfresh;
	uint64_t fresh_at;
};
#define E2_DIR_FRESH_MAX 4

/* A set of patches that others wait for, as what a rename or link waits
 * for under rename_order (e2_order_add): an empty patch that depends on the older members, and the
 * newest members themselves, up to E2_OSET_PEND of them.  Once set has an after it can gain no
 * before, and a member that came then would need a new empty patch chained to it; kept aside
 * instead, a few members are waited for directly, and only the next one seals them into a new set.
 * Appends (a data write, then a size that waits for the set) had made one empty patch per write,
 * and so had the pointers of each write into an indirect block. */
#define E2_OSET_PEND 4
struct e2_oset {
	struct patch *set;
	struct patch *pend[E2_OSET_PEND];
	unsigned npend;
};

/* An indirect block whose pointers may not all be durable yet: a set of
 * what they wait for (the bitmap bits and contents of the blocks they
 * point at).  A copy of the block (copy-on-write) waits for it, not for
 * the block itself, so that copies of copies do not queue up. */
struct e2_pdep {
	uint32_t blk;
	struct e2_oset set;
};

struct e2_inode {
	struct e2_inode *hnext;
	uint32_t ino;
	/* the first fs->icore bytes of the on-disk inode (little-endian),
	 * kept current; zeros past them (128-byte inodes) */
	struct ext2_inode_large d;
	uint64_t nlookup;
	unsigned nopen;
	bool freed;	       /* links reached 0 and inode returned to bitmap */
	bool unlinked;	       /* its last link went in this session: free it
				* once unreferenced (never an inode found with
				* links 0 on disk, whose blocks may be reused) */
	bool orphan;	       /* on the orphan list (e2_orphan.c) */
	bool linkable;	       /* made with no name (e2_tmpfile), and may
				* get its first one from e2_link */
	struct patch *init;    /* a new entry for this inode must wait for it */
	struct patch *init_up; /* and for this, when set: the init of the new
				* directory it was made in (e2_init_*()) */
	struct e2_gate *gate;  /* a new file made in a patchgroup whose one
				* name may not be on disk yet (e2_gate.c) */
	struct patch *clear;   /* the inode-clear patch once links reached 0 */
	struct patch *rmset;   /* a directory: depends on every removal of an
				* entry from it not yet on disk, so that its
				* own clear can wait for them (e2_pset_add) */
	struct e2_rmname {     /* a directory: the same removals by name (a
				* hash of it), so that a new entry of that name
				* waits for the old one to go (e2_dir.c) */
		uint32_t hash;
		struct patch *rm;
	} * rmnames;
	size_t nrmnames, caprmnames;
	struct patch *tailz;   /* zeroing of the tail past a shrunk size: any
				* later size increase must wait for it */
	uint64_t size_hi;      /* no size on disk is larger: raised by every
				* size written, down to the size once size_p
				* is on disk (e2_isize_hi()) */
	struct patch *size_p;  /* the last change of the size, until it is on
				* disk; the inode stays cached meanwhile */
	struct e2_pdep *pdeps; /* its indirect blocks with pending pointers */
	size_t npdeps, cappdeps;
	/* Indirect blocks replaced by copies, to be freed after dfree_p (the
	 * newest inode patch, which no longer points at any of them).  Freed
	 * in batches: a free that waits for the inode patch gives it an
	 * after, and a patch with afters cannot take the next write's inode
	 * change, so freeing at every growing write left one inode patch per
	 * write on the inode table block (appends cost O(n) each). */
	uint32_t *dfree;
	size_t ndfree, capdfree;
	struct patch *dfree_p;
	struct e2_dindex *dix;
	struct patch *sync;	 /* empty patch over this inode's changes (fsync) */
	struct patch *sync_last; /* last patch added to sync (held) */
	/* the set the last fsync took (held): a later fsync that finds no
	 * new set waits for it, so it cannot return while that set is still
	 * being written, or after it failed */
	struct patch *sync_prev;
	bool sync_track;    /* fsync was used: collect changes in sync */
	bool sync_all;	    /* sync lost track (no memory): fsync syncs all */
	uint32_t last_pblk; /* allocation goal: after the last block placed */
	bool nocaps;	    /* known to have no security.capability: cleared
			     * when its attributes change (e2_kill_priv) */
};

struct e2_group {
	uint32_t block_bitmap, inode_bitmap, inode_table;
	uint32_t free_blocks, free_inodes, used_dirs;
	uint32_t bhint, ihint;	   /* first bit that may be free */
	uint32_t pend_lo, pend_hi; /* bits in which a block search found no
				    * free but pending frees, */
	uint8_t *pmap;		   /* and each bit it found pending (or NULL), */
	uint64_t pend_gen;	   /* while cache_commits() (plus the running
				    * tid under a journal) was this */
	uint32_t first, nblocks;   /* blocks of the group */
};

/* freed block -> patch that cleared its last pointer, and freed block or
 * inode -> the bitmap patch that cleared its bit (until committed) */
struct e2_freed {
	struct e2_freed *next;
	uint64_t key; /* block number, or E2_FREED_INODE | inode number */
	struct patch *clear, *bitclr;
	uint32_t tid; /* journal modes: the transaction that freed it */
	bool journal; /* freed under the journal writer (tid is set) */
};
#define E2_FREED_INODE (1ULL << 32)

#define E2_PROCSET_SLOTS 64
#define E2_RMPEND_MAX	 1024
#define E2_PARKED_MAX	 1024
#define E2_RMPEND_SLOTS	 64

/* The bytes a directory entry with a name of n bytes takes: 8 of header,
 * then the name, rounded up to 4. */
#define E2_REC_LEN(n) (((uint32_t)(n) + 8 + 3) & ~3u)

/* rename_order=process: what the next rename or link of process (pid,
 * start) waits for. */
struct e2_procset {
	pid_t pid;
	uint64_t start;
	struct e2_oset set;
	struct e2_procset *next;
};

/* A new regular file made by a caller with a patch scope (a patchgroup),
 * under soft updates, while its one name, ent, may not be on disk: ent
 * waited for the befores b[0..nb) of that scope and, once ogen was
 * fs->order_gen, for the rename_order set of process (pid, start).  No
 * crash state shows a change of the file before ent, so a later change
 * of it need not wait for what ent waited for (e2_gate.c). */
#define E2_GATE_BEFORES 4
struct e2_gate {
	struct patch *ent;
	struct patch *b[E2_GATE_BEFORES];
	unsigned nb;
	pid_t pid;
	uint64_t start, ogen;
};

/* The scope given to changes that leave out (some of) the befores of the
 * caller's scope, inner, while still joining its groups: all of them
 * when gate is NULL, else those the gate's entry waited for (e2_gate.c).
 * keep holds what is left when only some go. */
#define E2_QSCOPE_KEEP 16
struct e2_qscope {
	struct patch_scope ps;
	struct patch_scope *inner;
	const struct e2_gate *gate;
	struct patch *keep[E2_QSCOPE_KEEP];
};

struct e2fs {
	pthread_mutex_t lock;
	/* The caller of the operation holding lock (e2_lock_caller): its
	 * patch scope (NULL: none) and, for rename_order=process, its
	 * process (pid 0: not known). */
	struct patch_scope *scope;
	struct e2_qscope qs; /* fs->scope while a quieter one is in force */
	pid_t caller_pid;
	uint64_t caller_start;
	bool caller_group_order; /* e2_caller.group_order */
	/* the caller, while a call runs, for root's reserve (e2_alloc.c) */
	const struct e2_caller *caller;
	struct bdev *dev;
	struct cache *c;
	struct e2_opts opts;
	/* E2_RENAME_ORDER_ALL: every data write, rename and link not yet on
	 * disk (e2_order_add); each new rename and link waits for them.
	 * E2_RENAME_ORDER_PROCESS: the same for the changes of callers not
	 * known (pid 0) */
	struct e2_oset ordset;
	uint64_t order_gen; /* members ever added to ordset or a procset */
	/* E2_RENAME_ORDER_PROCESS: such a set per process with changes not
	 * yet on disk, hashed by pid; an entry goes once its set is */
	struct e2_procset *procsets[E2_PROCSET_SLOTS];
	/* Parked names in lost+found whose removal is not on disk yet: their
	 * positions, so that a new parked name does not reuse the place and
	 * wait for the removal (e2_rename.c).  Up to E2_PARKED_MAX, about
	 * what the lost+found mke2fs makes holds: with 32, a chain of
	 * replaces reused a place every 32 renames, a round trip between
	 * lost+found and the directory each time. */
	uint32_t *parkpos;     /* nparked positions, for e2_dir_add_avoid() */
	struct patch **parkrm; /* and their removals */
	size_t nparked, cappos, caprm;
	/* Removals of a last name (e2_remove_last) not yet on disk, with
	 * their directory: a new name (e2_dir_add_new) is not put where one
	 * of them wrote, or it would wait for the removal: under a workload
	 * that deletes and creates in one directory that made one chain of
	 * every file's writes.  Hashed by directory inode
	 * (rmtab), so that a create looks only at its directory's, and also
	 * in one list from the oldest (rmold) to the newest (rmnew).  At
	 * most E2_RMPEND_MAX: the oldest is forgotten. */
	struct e2_rmpend {
		struct e2_rmpend *next, **pprev; /* in its rmtab slot */
		struct e2_rmpend *older, *newer;
		uint32_t dir;
		struct patch *rm;
	} * rmtab[E2_RMPEND_SLOTS], *rmold, *rmnew;
	size_t nrmpend;
	/* Room reused by every create under lock (e2_dir.c): the removals
	 * of the directory, and the bytes a new entry must not write. */
	void *rmbuf, *spbuf;
	size_t caprmbuf, capspbuf;
	/* a file was fsynced: new inodes collect their changes from birth */
	bool fsync_seen;
	bool ro;	       /* no changes: mounted read-only, or an error
				* turned it so (errors=remount-ro, panic) */
	bool mounted_ro;       /* opened read-only: nothing is ever written */
	bool live;	       /* open finished: errors now count (e2_err) */
	enum e2_errors errors; /* the behaviour in force */
	uint64_t nerrors;      /* atomic: corrupt structures found */
	char err[256];

	struct ext2_super_block sb; /* in-memory copy of the on-disk fields */
	uint16_t mount_state;	    /* s_state seen at mount */
	uint32_t bs, apb, ngroups, bpg, ipg, isize, ipb, itb;
	uint32_t icore; /* bytes of an inode mirrored in e2_inode.d */
	uint32_t first_data, nblocks, ninodes, first_ino, gdt_blocks, reserved_gdt;
	uint32_t sb_blk, sb_off; /* where the primary superblock lives */
	bool filetype, sparse;
	struct e2_recovery recovery; /* what the open did with the journal */
	uint64_t *jmap;		     /* journal block -> device block (has_journal) */
	uint32_t jmapn;
	struct e2_jw *jw; /* the journal writer (consistency=journal*) */
	/* the orphan list in its disk order, head first (e2_orphan.c) */
	uint32_t *orph;
	size_t norph, caporph;
	bool orph_bad; /* the list found at open was not sound: left alone */
	/* i_generation for the next new inode: seeded at random at open and
	 * counted up, as Linux's ext2 once did (e2_create.c) */
	uint32_t next_gen;
	bool jdata; /* a file data change is being made (the writer
		     * may leave it out of the transaction) */
	bool jnew;  /* ... and it initialises a block the write has just
		     * allocated: a patchgroup's order alone does not
		     * make it join (e2_jwrite.c, jw_unscoped()) */
	struct e2_group *g;
	uint64_t free_blocks, free_inodes;

	struct e2_inode **itab;
	size_t ibuckets, icount, itrim_at;
	size_t ndfree; /* sum of the inodes' ndfree */

	struct e2_freed **ftab;
	size_t fbuckets, fcount, fprune_at;

	/* attribute blocks by number and by content hash (e2_xattr.c) */
	struct e2_xblk **xbtab, **xhtab;
	size_t xcount;

	/* Block-sized scratch, used under lock so the write path does not
	 * allocate per request: wtmp for a data block being built, wzero
	 * all zeros (never written), kids[l - 1] for an indirect block of
	 * level l being walked (levels nest, so one each). */
	uint8_t *scratch, *wtmp, *wzero;
	uint32_t *kids[3];
};

/* e2_super.c */
int e2_err(struct e2fs *fs, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void e2_set_open_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int e2_sb_write_counts(struct e2fs *fs);
int e2_gd_write(struct e2fs *fs, uint32_t g);
int e2_sb_set_large_file(struct e2fs *fs, struct patch **out);
int e2_sb_set_ext_attr(struct e2fs *fs, struct patch **out);
bool e2_group_has_super(const struct e2fs *fs, uint32_t g);
bool e2_block_ok(const struct e2fs *fs, uint32_t blk);
uint32_t e2_now(void);

/* e2_journal.c: check the journal of a has_journal file system at open
 * (fs->g loaded, nothing cached that a replay could change); 1 if the log
 * was replayed (the open must read the superblock again). */
int e2_journal_setup(struct e2fs *fs, struct e2_recovery *rec);

/* e2_jwrite.c: the journal writer (consistency=journal, journal-data).
 * Called with fs->lock held unless said otherwise. */
/* Start it after the mount's own writes (0 in the other modes). */
int e2_jw_start(struct e2fs *fs);
/* Commit the running transaction; *out (if not NULL) gets a reference to
 * the newest commit block patch (NULL if nothing was ever committed). */
int e2_jcommit(struct e2fs *fs, struct patch **out);
/* Before a write of nblocks blocks of file data: *piece gets how many of
 * them the next piece of the write may cover (at least 1), after a commit
 * of the running transaction if that piece would take it past a quarter
 * of the log.  A transaction must fit in the log: a larger write is cut
 * into pieces, each in a transaction of its own. */
int e2_jroom(struct e2fs *fs, uint64_t nblocks, uint64_t *piece);
/* The most blocks e2_jroom ever gives a piece. */
uint64_t e2_jpiece_max(const struct e2fs *fs);
/* At the start of an operation (fs->lock held): commit the running
 * transaction if it holds half the log or more (the timer thread, asked at
 * a quarter, has not come to it). */
void e2_jbound_locked(struct e2fs *fs);
/* Without fs->lock: commit and wait until the commit is durable. */
int e2_jsync(struct e2fs *fs);
/* Where transaction tid stands, for a block or inode it freed: running
 * (its free may yet be lost), committing (*commit gets its commit block's
 * patch, borrowed: the free is durable once that is), or done. */
enum e2_jstate { E2_J_DONE, E2_J_COMMITTING, E2_J_RUNNING };
enum e2_jstate e2_jstate(struct e2fs *fs, uint32_t tid, struct patch **commit);
/* The running transaction's number; the same, noting a block freed in
 * it (e2_jroom commits before a write that may need such blocks). */
uint32_t e2_jtid(const struct e2fs *fs);
uint32_t e2_jfreed(struct e2fs *fs);
/* Commit and write everything home. */
int e2_jflush_locked(struct e2fs *fs);
/* Let every committed transaction go home (without committing). */
int e2_jcheckpoint_locked(struct e2fs *fs);
/* Ask the timer to stop and return: e2_jstop() waits for it.  The timer
 * sleeps until asked, and on a busy machine its waking up can take
 * milliseconds, so a close asks first and waits after its own writes. */
void e2_jstop_soon(struct e2fs *fs);
/* Stop the timer; clean: flush, empty the log, clear needs_recovery. */
int e2_jstop(struct e2fs *fs, bool clean);
/* Free the writer (without fs->lock). */
void e2_jfree(struct e2fs *fs);
/* Write s_feature_incompat from fs->sb (the writer's own change). */
int e2_sb_write_incompat(struct e2fs *fs, struct patch **out);
int e2_sb_write_incompat_after(struct e2fs *fs, struct patch *dep);

/* Whether to keep the orphan list (the journal modes, unless
 * FSTITCH_JOURNAL_DEBUG=noorphans). */
bool e2_jw_orphans(const struct e2fs *fs);
/* s_last_orphan := ino (superblock change; *out if not NULL). */
int e2_sb_write_orphan(struct e2fs *fs, uint32_t ino, struct patch **out);

/* e2_orphan.c: ext3's orphan list (s_last_orphan, then i_dtime).  Under
 * fs->lock. */
bool e2_orphans_on(const struct e2fs *fs);
/* ip lost its last name but stays in use: put it on the list, in the
 * running transaction (nothing outside the journal modes). */
int e2_orphan_add(struct e2fs *fs, struct e2_inode *ip);
/* Take ip off the list (its dtime becomes the time, or 0 with links):
 * *out (if not NULL) gets the patch after which the disk no longer lists
 * it; it waits for ip->clear too. */
int e2_orphan_del(struct e2fs *fs, struct e2_inode *ip, struct patch **out);
/* At a read-write open: free each inode on the list (cut back those with
 * links to their size), as Linux does at mount; counts go to rec. */
int e2_orphans_recover(struct e2fs *fs, struct e2_recovery *rec);

/* e2_deps.c */
int e2_deps_add(struct e2_deps *d, struct patch *p);	/* takes p's ref */
int e2_deps_addref(struct e2_deps *d, struct patch *p); /* retains p */
void e2_deps_free(struct e2fs *fs, struct e2_deps *d);
/* Drop *pp if it has committed (keeps pinned lists short). */
void e2_patch_drop_committed(struct e2fs *fs, struct patch **pp);
/* Release the committed patches of v[0..n) and close up the rest, in
 * order; returns how many are left. */
size_t e2_patches_drop_committed(struct e2fs *fs, struct patch **v, size_t n);
int e2_patch(struct e2fs *fs, uint32_t blk, uint32_t off, uint32_t len, const void *data,
	     struct e2_deps *deps, struct patch **out);

/* e2_inode.c */
/* Where inode ino is: its inode table block and the byte offset in it. */
void e2_iloc(const struct e2fs *fs, uint32_t ino, uint32_t *blk, uint32_t *off);
/* The first len bytes (at most fs->isize) of inode ino as the cache has
 * them now: the on-disk form, which the in-memory copy may not show in
 * full (in-inode attributes). */
int e2_iraw(struct e2fs *fs, uint32_t ino, void *dst, uint32_t len);
int e2_iget(struct e2fs *fs, uint32_t ino, struct e2_inode **out);
/* The cached inode ino, or NULL: nothing is read, a freed one stays so. */
struct e2_inode *e2_ifind(struct e2fs *fs, uint32_t ino);
/* ino was freed while the kernel still holds it (removed, not open): its
 * number is not given out again until the kernel forgets it, so that the
 * kernel never takes a new inode for the one it holds. */
bool e2_iheld_free(struct e2fs *fs, uint32_t ino);
int e2_iwrite(struct e2fs *fs, struct e2_inode *ip, const struct ext2_inode_large *nw,
	      struct e2_deps *deps, struct patch **out);
int e2_iinit(struct e2fs *fs, struct e2_inode *ip, const struct ext2_inode_large *nw,
	     struct e2_deps *deps, struct patch **out);
void e2_istat(struct e2fs *fs, const struct e2_inode *ip, struct stat *st);
uint64_t e2_isize(const struct ext2_inode_large *d);
/* A bound on the sizes ip may have on disk (ip->size_hi, brought down to
 * the size here when no change of it is pending). */
uint64_t e2_isize_hi(struct e2fs *fs, struct e2_inode *ip);
void e2_iset_size(struct ext2_inode_large *d, uint64_t size);
bool e2_idir(const struct e2_inode *ip);
/* The immutable (chattr +i) and append-only (+a) flags, as Linux's ext2
 * keeps them: an immutable inode changes in no way; an append-only one
 * only grows (its data, and a directory's names), and neither loses a
 * name nor gains one (link). */
bool e2_iimmutable(const struct e2_inode *ip);
bool e2_iappend(const struct e2_inode *ip);
mode_t e2_imode(const struct e2_inode *ip);
gid_t e2_igid(const struct e2_inode *ip);
uint16_t e2_ilinks(const struct ext2_inode_large *d);
void e2_iset_links(struct ext2_inode_large *d, uint16_t n);
void e2_isync_add(struct e2fs *fs, struct e2_inode *ip, struct patch *p);
/* What a new name for ip waits for is init and init_up (e2_create.c).  A
 * file made in a new directory keeps the two apart: an empty patch over
 * both cost 40 bytes and two afters for each of the untar's files, and is
 * made only when the file is a directory that gets an entry of its own.
 * Drop what is on disk (init_up moves up when init is); whether any is
 * left. */
bool e2_init_prune(struct e2fs *fs, struct e2_inode *ip);
/* d += ip's init and init_up. */
int e2_init_deps(struct e2_deps *d, struct e2_inode *ip);
/* Let go of both, then init = p (the caller's reference passes). */
void e2_init_set(struct e2fs *fs, struct e2_inode *ip, struct patch *p);
/* The one patch a name put in directory ip waits for (init and init_up
 * made one); NULL when none is pending.  0 or -ENOMEM. */
int e2_init_one(struct e2fs *fs, struct e2_inode *ip, struct patch **out);
/* Add to d an empty patch over every change of ip's on-disk inode not on
 * disk yet (its size, times and pointers): a name given to a file waits
 * for it, so that the name never shows the file shorter than it was.
 * Nothing for a directory or under consistency=none. */
int e2_ipending_deps(struct e2fs *fs, struct e2_inode *ip, struct e2_deps *d);
int e2_itouch(struct e2fs *fs, struct e2_inode *ip, bool mtime, bool ctime);
/* Move the access time after a read, a readdir or a readlink, as the
 * mount's atime option says and unless the inode has the noatime flag.
 * Under Linux's default "relatime" it moves only when it is not newer than
 * the last change, or a day old, so reads rarely write; under noatime
 * never.  Best effort: the read succeeded. */
void e2_touch_atime(struct e2fs *fs, struct e2_inode *ip);
/* Free ip if it has no links left and is not open (lookup references only
 * keep its memory). */
int e2_iunref(struct e2fs *fs, struct e2_inode *ip);
int e2_ifree(struct e2fs *fs, struct e2_inode *ip);
void e2_icache_trim(struct e2fs *fs);
void e2_icache_destroy(struct e2fs *fs);
bool e2_fast_symlink(const struct e2fs *fs, const struct ext2_inode_large *d);

/* Timestamps as Linux stores them: signed 32-bit seconds and, where the
 * inode's i_extra_isize covers the field, an extra word with two more
 * bits of seconds (the epoch) and the nanoseconds.  Times outside what
 * the file system can hold are clamped, as the kernel does. */
enum e2_tfield { E2_T_ATIME, E2_T_MTIME, E2_T_CTIME, E2_T_CRTIME };
#define E2_EXTRA_ISIZE 32 /* i_extra_isize of a new large inode, as Linux */
void e2_now_ts(const struct e2fs *fs, struct timespec *ts);
void e2_iset_time(const struct e2fs *fs, struct ext2_inode_large *d, enum e2_tfield f,
		  const struct timespec *ts);
void e2_iget_time(const struct e2fs *fs, const struct ext2_inode_large *d, enum e2_tfield f,
		  struct timespec *ts);

/* e2_alloc.c */
int e2_balloc(struct e2fs *fs, uint32_t goal, uint32_t *blk, struct patch **bit);
/* Free ip's batch of replaced indirect blocks now (after its dfree_p);
 * e2_dfree_all: every inode's (for a sync, or when space is short). */
int e2_dfree_flush(struct e2fs *fs, struct e2_inode *ip);
int e2_dfree_all(struct e2fs *fs);
int e2_bfree(struct e2fs *fs, uint32_t blk, struct patch *clear);
int e2_ialloc(struct e2fs *fs, uint32_t parent, bool dir, uint32_t *ino, struct patch **bit);
int e2_ifree_bit(struct e2fs *fs, uint32_t ino, bool dir, struct patch *clear);
struct patch *e2_freed_dep(struct e2fs *fs, uint32_t blk);
/* Is blk a data block that the cached bitmap has free (whatever the
 * running transaction freed counted)?  False for the groups' own metadata,
 * and if the bitmap cannot be read. */
bool e2_block_unused(struct e2fs *fs, uint32_t blk);
void e2_freed_destroy(struct e2fs *fs);
int e2_block_init(struct e2fs *fs, uint32_t blk, const void *data, struct e2_deps *deps,
		  struct patch **out);

/* e2_bmap.c */
int e2_bmap(struct e2fs *fs, struct e2_inode *ip, uint64_t lblk, uint32_t *pblk);
/* The indirect block that mapped the last lblk, so that a run of reads maps
 * each further block with one lookup instead of a walk from the inode. */
struct e2_bcursor {
	uint64_t base; /* first lblk the block maps */
	uint32_t blk;  /* 0: empty */
};
int e2_bmap_cur(struct e2fs *fs, struct e2_inode *ip, uint64_t lblk, uint32_t *pblk,
		struct e2_bcursor *cur);
uint64_t e2_max_lblk(const struct e2fs *fs);
/* The largest file's size in bytes. */
static inline uint64_t e2_max_size(const struct e2fs *fs)
{
	return e2_max_lblk(fs) * fs->bs;
}
int e2_write_locked(struct e2fs *fs, struct e2_inode *ip, const void *buf, size_t size,
		    uint64_t off, bool dir, struct e2_deps *extra, struct patch **linked);
int e2_truncate_locked(struct e2fs *fs, struct e2_inode *ip, uint64_t size);
int e2_free_all_blocks(struct e2fs *fs, struct e2_inode *ip, struct patch *clear);
/* Under a journal, before e2_free_all_blocks of a file: free its blocks in
 * steps that each fit a transaction, the inode on the orphan list
 * meanwhile, when they do not all fit one (nothing happens otherwise). */
int e2_free_in_steps(struct e2fs *fs, struct e2_inode *ip);
/* Free the blocks mapping lblks [lo, hi) and the indirect blocks left
 * empty, in truncate's order; the size stays, mtime and ctime move. */
int e2_punch_locked(struct e2fs *fs, struct e2_inode *ip, uint64_t lo, uint64_t hi);

/* e2_dir.c */
struct e2_dloc {
	uint32_t pos, ino;
	uint8_t ftype;
};
int e2_dir_lookup(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		  struct e2_dloc *loc);
int e2_dir_prepare(struct e2fs *fs, struct e2_inode *dir, size_t len, struct patch **linked);
/* Read the block of dir's entry at pos (an operation reads what it will
 * change before its first change, so that a read error cannot stop it
 * half way); *rec (if not NULL) gets the entry's record length.  0 or
 * -errno. */
int e2_dir_preread(struct e2fs *fs, struct e2_inode *dir, uint32_t pos, uint32_t *rec);
int e2_dir_add(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len, uint32_t ino,
	       mode_t mode, struct e2_deps *deps, struct patch **out);
/* As e2_dir_add for the name of a new inode: not where a removal of a
 * last name from dir that is not on disk yet wrote (fs->rmpend), in
 * another block with room or a new one if need be. */
int e2_dir_add_new(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		   uint32_t ino, mode_t mode, struct e2_deps *deps, struct patch **out);
/* Remember rm, the removal of a last name from dir (e2_dir_add_new). */
void e2_dir_removal_pending(struct e2fs *fs, struct e2_inode *dir, struct patch *rm);
/* Forget every removal remembered (unmount). */
void e2_dir_removals_free(struct e2fs *fs);
int e2_dir_add_avoid(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		     uint32_t ino, mode_t mode, struct e2_deps *deps, struct patch **out,
		     const uint32_t *avoid, size_t navoid);
int e2_dir_remove_at(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		     struct e2_deps *deps, struct patch **out, uint32_t *posp);
int e2_dir_remove(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		  struct e2_deps *deps, struct patch **out);
int e2_dir_retarget(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		    uint32_t ino, mode_t mode, struct e2_deps *deps, struct patch **out);
int e2_dir_move_in_block(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
			 const char *newname, size_t newlen, uint32_t ino, mode_t mode,
			 struct e2_deps *deps, struct patch **out);
int e2_dir_rename_in_place(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
			   const char *newname, size_t newlen, uint32_t ino, mode_t mode,
			   struct e2_deps *deps, struct patch **out);
int e2_dir_set_dotdot(struct e2fs *fs, struct e2_inode *dir, uint32_t parent, struct e2_deps *deps,
		      struct patch **out);
int e2_dir_get_dotdot(struct e2fs *fs, struct e2_inode *dir, uint32_t *parent);
int e2_dir_empty(struct e2fs *fs, struct e2_inode *dir);
void e2_dir_new_block(struct e2fs *fs, uint32_t ino, uint32_t parent, uint8_t *blk);
int e2_dir_unindex(struct e2fs *fs, struct e2_inode *dir, struct e2_deps *deps);
int e2_dir_iterate(struct e2fs *fs, struct e2_inode *dir, off_t off,
		   int (*fn)(const struct e2_dirent *d, void *arg), void *arg);
void e2_dindex_free(struct e2_dindex *dix);
uint8_t e2_ftype(mode_t mode);

/* e2_xattr.c */
int e2_xattr_release(struct e2fs *fs, struct e2_inode *ip, struct patch *clear);
void e2_xattr_destroy(struct e2fs *fs);
int e2_acl_chmod_locked(struct e2fs *fs, struct e2_inode *ip);

/* e2.c: shared by the operation files */
/* One operation at a time holds fs->lock.  e2_lock_caller() also makes
 * who (NULL: no one known) the caller of the operation until e2_unlock():
 * its scope is the scope of every patch made, and its process is the one
 * rename_order=process orders by. */
void e2_lock(struct e2fs *fs);
void e2_lock_caller(struct e2fs *fs, const struct e2_caller *who);
void e2_unlock(struct e2fs *fs);
/* A name for a directory entry: -ENOENT if empty, -ENAMETOOLONG, -EINVAL
 * with a slash; else 0 and its length in *len. */
int e2_check_name(const char *name, size_t *len);
/* The first checks of a call that adds or removes the entry name:
 * -EROFS on a read-only file system, then e2_check_name()'s answer. */
int e2_check_change(const struct e2fs *fs, const char *name, size_t *len);
bool e2_dot_or_dotdot(const char *name);
int e2_get_live(struct e2fs *fs, uint32_t ino, struct e2_inode **out);
/* Free fs->g and what its groups hold. */
void e2_groups_free(struct e2fs *fs);
/* e2_kill_priv() of ip, under the lock. */
int e2_kill_priv_locked(struct e2fs *fs, struct e2_inode *ip, bool suid, gid_t to_gid);
int e2_get_dir(struct e2fs *fs, uint32_t ino, struct e2_inode **out);
int e2_get_file(struct e2fs *fs, uint32_t ino, struct e2_inode **out);
int e2_entry_inode(struct e2fs *fs, struct e2_inode *dir, const struct e2_dloc *loc,
		   const char *name, struct e2_inode **out);
int e2_add_links(struct e2fs *fs, struct e2_inode *ip, int delta, struct e2_deps *deps,
		 struct patch **out);
int e2_add_links_after(struct e2fs *fs, struct e2_inode *ip, int delta, struct patch *a,
		       struct patch *b, struct patch *c, struct patch **out);
int e2_drop_last_link(struct e2fs *fs, struct e2_inode *ip, struct e2_deps *deps);
int e2_unlink_inode(struct e2fs *fs, struct e2_inode *ip, struct patch *removal);
int e2_remove_inode(struct e2fs *fs, struct e2_inode *dir, struct e2_inode *ip,
		    struct patch *removal);
int e2_pset_add(struct e2fs *fs, struct patch **set, struct patch *p);
/* p joins o (struct e2_oset); 0 or -ENOMEM, then o is as it was. */
int e2_oset_add(struct e2fs *fs, struct e2_oset *o, struct patch *p);
/* d += every member of o not on disk. */
int e2_oset_deps(struct e2fs *fs, struct e2_oset *o, struct e2_deps *d);
/* Drop what is on disk from o; whether nothing is left. */
bool e2_oset_prune(struct e2fs *fs, struct e2_oset *o);
void e2_oset_release(struct e2fs *fs, struct e2_oset *o);
/* rename_order=all and process: a data write, rename or link p joins the
 * set of the file system (all) or of the calling process (process). */
int e2_order_add(struct e2fs *fs, struct patch *p);
/* rename_order=all and process: d += what a new rename or link must wait
 * for. */
int e2_order_deps(struct e2fs *fs, struct e2_deps *d);
/* Let go of every process's set (unmount). */
void e2_order_destroy(struct e2fs *fs);
int e2_remove_last(struct e2fs *fs, struct e2_inode *dir, const char *name, size_t len,
		   struct e2_inode *ip, struct patch *after, struct patch **rmp, uint32_t *posp);
/* ctime (and mtime if asked) of ip, changed by a name operation, ordered
 * by no patchgroup. */
int e2_touch_name(struct e2fs *fs, struct e2_inode *ip, bool mtime);

/* e2_gate.c: changes a patchgroup need not order.  Whether the caller has
 * a scope whose befores some changes may leave out (soft updates). */
bool e2_gating(const struct e2fs *fs);
/* Whether a new file made now gets a gate for the rename_order set alone
 * (no scope: e2_gate.c). */
bool e2_order_gating(const struct e2fs *fs);
/* Until e2_scope_restore(fs, returned), changes leave out the caller's
 * befores: all of them (g NULL), or those g's entry waited for.  No-op
 * without e2_gating() or when already in force. */
struct patch_scope *e2_scope_quiet(struct e2fs *fs, const struct e2_gate *g);
void e2_scope_restore(struct e2fs *fs, struct patch_scope *old);
/* Make ent (a new regular file's one entry, whose rename_order deps were
 * taken when fs->order_gen was ogen) ip's gate, with the befores of the
 * caller's scope if it is gating.  Soft updates only (e2_gating() or
 * e2_order_gating()). */
void e2_gate_set(struct e2fs *fs, struct e2_inode *ip, struct patch *ent, uint64_t ogen);
/* ip's gate, or NULL (none, or its entry is on disk: then dropped). */
struct e2_gate *e2_gate_get(struct e2fs *fs, struct e2_inode *ip);
/* ip gets or loses a name: no gate any more. */
void e2_gate_drop(struct e2fs *fs, struct e2_inode *ip);
/* Whether g's entry waited for every member of the caller's rename_order
 * set while fs->order_gen was gen. */
bool e2_gate_order_covered(const struct e2fs *fs, const struct e2_gate *g, uint64_t gen);

#endif
