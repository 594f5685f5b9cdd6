/* The ext2 module: a standard ext2 revision 1 file system on top of the
 * patch engine, with soft-updates dependencies (design.md §4).  No FUSE in
 * here: it works on an open handle, so tests drive it directly.
 *
 * Inodes are named by number (EXT2_ROOT_INO is 2).  Every function returns
 * 0 (or a non-negative count where stated) or -errno; outputs are written
 * only on success.  All functions are thread safe (one lock per file
 * system serialises operations; the background flusher runs beside them).
 *
 * References: every call that returns a struct stat for an inode (lookup,
 * create, mknod, mkdir, symlink, link) takes one reference on that inode,
 * which e2_forget() drops (FUSE's lookup count).  An inode with no links is
 * freed once it is neither open nor referenced: at once, or at its last
 * e2_release_inode() or e2_forget().  Until then every call works on it
 * (it can be opened again, read, written), as on Linux's ext2.
 * e2_close() frees the inodes still held.
 *
 * Callers: every call that changes the file system on a caller's behalf
 * takes a struct e2_caller after fs: who asked for the change.  NULL is
 * no scope and no known process.
 */
#ifndef FSTITCH_E2_H
#define FSTITCH_E2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>
#include "bdev/bdev.h"
#include "engine/cache.h"

struct e2fs;

#define E2_ROOT_INO 2

/* What happens once a corrupt structure has been found while running
 * (ext2's errors= behaviour; the default comes from the superblock's
 * s_errors, and is continue when that is unset).  In every case the
 * request that found it fails with -EIO, e2_error() names the inode or
 * block, and the superblock's s_state gains EXT2_ERROR_FS (written with
 * the next flush and kept at close), so that e2fsck checks the file
 * system at its next run. */
enum e2_errors {
	E2_ERRORS_DEFAULT = 0, /* from the superblock */
	E2_ERRORS_CONTINUE,    /* nothing more: later requests go on */
	E2_ERRORS_RO,	       /* no further changes: they fail with -EROFS;
				* what was changed before is still written */
	E2_ERRORS_PANIC,       /* as E2_ERRORS_RO in the library; the caller
				* stops (see e2_error_count()) */
};

/* What a rename, link or replace is ordered after on disk, besides its own
 * rules (design.md §4).  Under CONSISTENCY_NONE nothing is ordered. */
enum e2_rename_order {
	/* after every earlier data write, rename and link of the file system
	 * (ext4 data=ordered's effect): a program that writes files and then
	 * renames a small pointer file into place without fsync finds, after
	 * a crash, the data the pointer names */
	E2_RENAME_ORDER_ALL = 0,
	/* after the renamed (or linked) file's own data only */
	E2_RENAME_ORDER_FILE,
	/* after every earlier data write, rename and link of the same
	 * process (struct e2_caller), and every earlier one whose process is
	 * not known */
	E2_RENAME_ORDER_PROCESS,
};

/* Who asks for a change, given to each call that makes one.  The call
 * keeps it only while it runs. */
struct e2_caller {
	/* The patchgroup scope of the asking process (engine/cache.h): every
	 * patch the call makes carries it.  NULL: none.  The ext2 module never
	 * looks inside one. */
	struct patch_scope *scope;
	/* rename_order=process: the asking process.  pid and start (the start
	 * time of /proc/PID/stat) name it, so that a reused pid is another
	 * process.  pid 0 means "not known": such a data write is waited for
	 * by every later rename, link and size increase, and such a rename
	 * waits for every process's earlier writes, so nothing is ordered less
	 * than under rename_order=all would be for it. */
	pid_t pid;
	uint64_t start;
	/* The process orders its changes with its patchgroups alone
	 * (pg_order_policy(PG_ORDER_GROUPS)): its renames, links and longer
	 * sizes wait as under rename_order=file, whatever the mount's
	 * rename_order.  Its writes still join the sets: under
	 * rename_order=all other processes' renames wait for them. */
	bool group_order;
	/* Who asks, for the blocks reserved for root (mke2fs -m): once only
	 * they are left, a caller gets ENOSPC unless it is uid 0, the
	 * superblock's resuid, of primary group resgid, or may_reserve says
	 * yes.  Zero, as a caller of no process, is root. */
	uid_t uid;
	gid_t gid;
	/* Asked (under the file system's lock, so it must be quick and must
	 * not call the ext2 module) only when the ids above do not decide:
	 * whether the caller holds CAP_SYS_RESOURCE or resgid among its
	 * supplementary groups, as Linux's ext2 lets either through.  NULL:
	 * no. */
	bool (*may_reserve)(const struct e2_caller *who, gid_t resgid);
	void *arg; /* for may_reserve */
	/* A write, or a size, owner or group change (e2_setattr()), by this
	 * caller first drops what e2_kill_priv() drops (kill_priv; kill_suid:
	 * the set-ID bits too), under the same lock as the change and after
	 * its checks, and sets *dropped (if not NULL) when anything went. */
	bool kill_priv, kill_suid;
	bool *dropped;
	/* Asked (under the lock, like may_reserve) only when a change drops
	 * set-ID bits (kill_suid, or e2_kill_priv()'s suid) of a file whose
	 * set-group-ID bit has no group execute: whether the caller is in
	 * group gid (as its file-system gid or a supplementary group) or
	 * holds CAP_FSETID.  If not, that bit goes too, as Linux's
	 * setattr_should_drop_sgid() says for the file's group, and
	 * setattr_copy() for a chown's new group when set-user-ID goes.
	 * NULL: yes, the bit stays. */
	bool (*keeps_sgid)(const struct e2_caller *who, gid_t gid);
};

/* When a read moves a file's access time (mount(8)'s atime options). */
enum e2_atime {
	/* Linux's default: only when the access time is older than the last
	 * change, or a day old */
	E2_ATIME_RELATIME = 0,
	/* never: reads write nothing */
	E2_ATIME_NOATIME,
	/* on every read (strictatime, norelatime) */
	E2_ATIME_STRICT,
};

struct e2_opts {
	enum consistency consistency;
	/* The mode was not chosen: CONSISTENCY_JOURNAL on a file system with
	 * a journal (has_journal), else CONSISTENCY_SOFTUPDATES; consistency
	 * is then ignored.  What was
	 * picked is in the cache's snapshots (fstitch-stat). */
	bool consistency_auto;
	enum e2_rename_order rename_order;
	enum e2_atime atime;
	bool nodiratime; /* a listing moves no directory's access time */
	enum e2_errors errors;
	size_t cache_blocks;	    /* 0: default */
	unsigned flush_interval_ms; /* 0: default (5 s) */
	unsigned commit_ms;	    /* journal modes: commit interval; 0: 5 s */
	bool readonly;
	bool no_flusher;	 /* tests: no background thread */
	size_t round_max_blocks; /* 0: default; tests use small values */
	/* Called with the explanation of every EIO (a corrupt structure, a
	 * failed read) when it happens, on the thread of the failing call and
	 * with the file system's lock held: it must not call into e2.  NULL:
	 * the explanation is only kept for e2_error(). */
	void (*log)(void *arg, const char *msg);
	void *log_arg;
	/* The time for inode timestamps.  NULL: the system's coarse clock.
	 * Tests give a fixed clock, so that which inode changes a workload
	 * makes (and so its writes and crash states) never depends on when
	 * a clock tick falls. */
	void (*clock)(struct timespec *now);
};

/* What the open did with the journal of an ext3 image marked
 * needs_recovery (design.md §3, "Journal recovery"). */
struct e2_recovery {
	bool replayed;	       /* the log was replayed and the mark cleared */
	uint32_t transactions; /* committed transactions in the log */
	uint64_t blocks;       /* block copies written in place */
	uint64_t revoked;      /* copies skipped because a revoke named them */
	int32_t journal_errno; /* an error the journal recorded (the file
				* system is then marked with errors) */
	/* The orphan list (ext3's s_last_orphan), after the replay: inodes
	 * freed and inodes cut back to their size (a truncate Linux did not
	 * finish); dropped: not processed, the file system has errors;
	 * orphan_bad: the list named this inode, out of range, free or seen
	 * before, and was left for e2fsck (0: sound). */
	uint32_t orphans_freed, orphans_truncated;
	bool orphans_dropped;
	uint32_t orphan_bad;
	/* A read-only open found an orphan list and left it as it is: its
	 * inodes keep their blocks until a read-write open frees them. */
	bool orphans_kept;
};

/* Open an image file or block device (exclusively locked; -EBUSY if another
 * process has it open through fstitch).  Checks the superblock and every
 * feature flag: unsupported features give -EOPNOTSUPP and e2_error() names
 * them; a corrupt superblock or group table gives -EUCLEAN. */
int e2_open(const char *path, const struct e2_opts *opts, struct e2fs **out);
/* The same on an existing device (memory or recorder, for tests).  The file
 * system takes ownership of dev and destroys it in e2_close(). */
int e2_open_bdev(struct bdev *dev, const struct e2_opts *opts, struct e2fs **out);
/* A file system with a journal: open replays a log that needs recovery
 * (read-write opens only: a read-only open of such an image is refused
 * with -EROFS) and refuses a journal it cannot replay or check (-EUCLEAN
 * or -EOPNOTSUPP, e2_open_error() says why).  This says what it did. */
const struct e2_recovery *e2_recovery(const struct e2fs *fs);
/* Only the journal step of an open: replay the log if the file system
 * needs recovery, write nothing else, close.  For tests and tools. */
int e2_recover(const char *path, struct e2_recovery *out);
/* Whether the file system runs the journal writer. */
bool e2_journaling(const struct e2fs *fs);
/* Commit the running transaction and wait until the commit is durable
 * (arg: the struct e2fs; for pgeng_set_sync_hook()). */
int e2_commit_sync_cb(void *arg);

/* Flush everything (rounds with barriers), free orphan inodes, mark the file
 * system clean, close.  Returns the first error; the handle is freed in any
 * case. */
int e2_close(struct e2fs *fs);
/* The same, calling done(cache, arg) once everything is written (the last
 * checkpoint and the clean marks included) and before anything is freed:
 * to read the final counters.  done is called whether or not the close
 * succeeded. */
int e2_close_then(struct e2fs *fs, void (*done)(struct cache *c, void *arg), void *arg);
/* Close without writing anything more (a simulated crash, for tests). */
void e2_abandon(struct e2fs *fs);
/* A human-readable explanation of the last open failure or EIO ("feature
 * 'extents' is not supported", "inode 12: bad block number 999999").  With
 * several threads calling into fs, another call may have replaced it: a
 * multi-threaded user takes explanations from opts.log instead. */
const char *e2_error(const struct e2fs *fs);
/* Same for a failed e2_open (fs is not available then): thread-local. */
const char *e2_open_error(void);
/* Corrupt structures found since the open (each one an -EIO to some
 * request), and the behaviour in force (never E2_ERRORS_DEFAULT).  Safe to
 * call without holding anything, from any thread. */
uint64_t e2_error_count(const struct e2fs *fs);
enum e2_errors e2_errors_behaviour(const struct e2fs *fs);
/* The file system's block cache (for statistics and tests); owned by fs. */
struct cache *e2_cache(struct e2fs *fs);
/* True if the file system was not marked clean when it was opened (a crash
 * or a kill left it mounted): e2fsck should repair it before more changes,
 * since the benign damage of a crash (an unconnected directory, say) can
 * turn harmful if the file system keeps running on top of it. */
bool e2_was_unclean(const struct e2fs *fs);
/* The finest step of the file system's timestamps in nanoseconds, as Linux
 * sets s_time_gran: 1 with inodes large enough for the extra time words,
 * 1000000000 with 128-byte inodes. */
uint32_t e2_time_gran(const struct e2fs *fs);

/* Find name in directory parent: 0 and *st (one reference taken), -ENOENT,
 * -ENOTDIR if parent is not a directory, -ENAMETOOLONG, -EIO on a corrupt
 * directory or entry (e2_error() says which). */
int e2_lookup(struct e2fs *fs, uint32_t parent, const char *name, struct stat *st);
/* Drop nlookup references (more than held drops all).  0 or -errno. */
int e2_forget(struct e2fs *fs, uint32_t ino, uint64_t nlookup);
/* 0 and *st, or -EIO if ino is out of range or not in use.  An unlinked
 * inode still open or referenced answers with no links. */
int e2_getattr(struct e2fs *fs, uint32_t ino, struct stat *st);
/* ino's generation (i_generation): 0 and *gen, or errors as e2_getattr.
 * Each new inode gets one its number has not had before, so that the pair
 * (number, generation) names one file for good: FUSE's node generation,
 * and so the file handles the kernel and NFS hand out. */
int e2_generation(struct e2fs *fs, uint32_t ino, uint32_t *gen);

enum e2_setattr_flags {
	E2_SET_MODE = 1 << 0,
	E2_SET_UID = 1 << 1,
	E2_SET_GID = 1 << 2,
	E2_SET_SIZE = 1 << 3,
	E2_SET_ATIME = 1 << 4,
	E2_SET_MTIME = 1 << 5,
	E2_SET_CTIME = 1 << 6,
	E2_SET_ATIME_NOW = 1 << 7,
	E2_SET_MTIME_NOW = 1 << 8,
};
/* Change the attributes named in `set` to those in *attr; *st receives the
 * result.  A size change truncates or extends (holes read as zeros).  A
 * size, owner or group change, and an empty set (chown(f, -1, -1)), drop
 * what who->kill_priv asks (as a write does), once the change has passed
 * its checks. */
int e2_setattr(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, const struct stat *attr,
	       unsigned set, struct stat *st);

/* The inode flags lsattr(1) sees (FS_IOC_GETFLAGS) and those chattr(1) may
 * change (FS_IOC_SETFLAGS), as Linux's ext2 has them.  An immutable inode
 * (EXT2_IMMUTABLE_FL) then refuses every change with EPERM, and an
 * append-only one (EXT2_APPEND_FL) all but growth: e2_setattr, e2_write
 * before its end, e2_punch, the xattr calls, losing a name or gaining one
 * (e2_unlink, e2_rmdir, e2_rename, e2_link); an immutable directory takes
 * no new name, an append-only one loses none. */
#define E2_FL_VISIBLE	 0x0003DFFFu
#define E2_FL_MODIFIABLE 0x000380FFu
/* The flags a new inode takes from its directory, as on Linux: a
 * directory all of E2_FL_INHERITED, a regular file all but dirsync and
 * topdir, anything else nodump and noatime alone. */
#define E2_FL_INHERITED 0x0001C6CFu
uint32_t e2_inherit_flags(mode_t mode, uint32_t dirflags);
int e2_getflags(struct e2fs *fs, uint32_t ino, uint32_t *flags);
/* Set the modifiable flags as in flags, keep the others, move ctime.
 * -EPERM if the immutable or append-only flag would change and
 * may_fix is false (Linux: CAP_LINUX_IMMUTABLE); -EOPNOTSUPP if the
 * dirsync or top-directory flag would go on what is not a directory; the
 * caller checks that who owns the inode. */
int e2_setflags(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, uint32_t flags,
		bool may_fix);

/* mode includes the file type (S_IFREG, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK).
 * -EEXIST if name exists, -ENAMETOOLONG over 255 bytes, -ENOSPC, -EMLINK. */
int e2_mknod(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name,
	     mode_t mode, dev_t rdev, uid_t uid, gid_t gid, struct stat *st);
/* mode: permission bits only.  Errors as e2_mknod, and -EMLINK when the
 * parent has the most subdirectories ext2 allows. */
int e2_mkdir(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name,
	     mode_t mode, uid_t uid, gid_t gid, struct stat *st);
/* Targets up to 59 bytes live in the inode, longer ones in a block;
 * -ENAMETOOLONG when the target does not fit in one block, -ENOENT if
 * empty.  Otherwise as e2_mknod. */
int e2_symlink(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name,
	       const char *target, uid_t uid, gid_t gid, struct stat *st);
/* A regular file with no name (open(2)'s O_TMPFILE) in parent's group,
 * with one reference taken and links 0 in *st: on disk an unused inode
 * (links 0, dtime set, and on the orphan list under a journal) until
 * e2_link gives it a name, freed as an unlinked file is when it gets
 * none.  mode: permission bits only.  Errors as e2_mknod's. */
int e2_tmpfile(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, mode_t mode,
	       uid_t uid, gid_t gid, struct stat *st);
/* Copies at most size bytes (no terminating NUL); returns the length, or
 * -EINVAL if ino is not a symlink, -EIO if its stored length is bad. */
int e2_readlink(struct e2fs *fs, uint32_t ino, char *buf, size_t size);
/* New name for ino (one reference taken, *st as after the link): -EPERM for
 * a directory, -EEXIST, -EMLINK, -ENOSPC, -ENOENT if ino has no links
 * (unless e2_tmpfile made it and it has had no name yet). */
int e2_link(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, uint32_t newparent,
	    const char *newname, struct stat *st);
/* Remove a non-directory name: -ENOENT, -EISDIR.  The inode is freed with
 * its last link, or at its last release if it is open. */
int e2_unlink(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name);
/* Remove an empty directory: -ENOENT, -ENOTDIR, -ENOTEMPTY, -EINVAL for ".". */
int e2_rmdir(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name);

enum e2_rename_flags {
	E2_RENAME_NOREPLACE = 1 << 0,
	E2_RENAME_EXCHANGE = 1 << 1,
};
/* Rename; over an existing target the target name refers to the old or the
 * new inode at every crash point.  -EINVAL when moving a directory into
 * itself, -ENOTEMPTY, -EISDIR/-ENOTDIR for type mismatches. */
int e2_rename(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, const char *name,
	      uint32_t newparent, const char *newname, unsigned flags);

/* Opens count against freeing an unlinked inode: e2_open_inode takes one
 * (0, or -EIO if ino is not in use; an unlinked inode still referenced
 * opens), e2_release_inode drops one and frees the inode if it was the
 * last use of an unlinked inode (0 or -errno). */
int e2_open_inode(struct e2fs *fs, uint32_t ino);
/* The same for an open(2) with flags oflags, which the immutable and
 * append-only flags may refuse with -EPERM as Linux's may_open() does
 * (a writing open of an immutable inode; of an append-only one, one
 * without O_APPEND or with O_TRUNC).  *mode (may be NULL) gets the
 * inode's mode. */
int e2_open_as(struct e2fs *fs, uint32_t ino, int oflags, mode_t *mode);
int e2_release_inode(struct e2fs *fs, uint32_t ino);

/* Read up to size bytes at off; returns the byte count (0 at EOF), or
 * -EISDIR, -EINVAL (not a regular file), -EIO. */
ssize_t e2_read(struct e2fs *fs, uint32_t ino, void *buf, size_t size, off_t off);
/* Write size bytes at off, extending the file; returns the byte count,
 * short if the disk filled up part way, or -ENOSPC, -EFBIG (beyond the
 * format's largest file), -EISDIR, -EINVAL, -EIO, -EROFS. */
ssize_t e2_write(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, const void *buf,
		 size_t size, off_t off);

/* One directory entry for e2_readdir's callback.  `next` is the offset to
 * resume after this entry (stable across changes to the directory). */
struct e2_dirent {
	const char *name;
	size_t name_len;
	uint32_t ino;
	mode_t type; /* S_IFDIR, S_IFREG, ... or 0 if unknown */
	off_t next;
};
/* Call fn for each entry from offset off on, until fn returns non-zero
 * (stop: not an error) or the directory ends.  Includes "." and "..". */
int e2_readdir(struct e2fs *fs, uint32_t ino, off_t off,
	       int (*fn)(const struct e2_dirent *d, void *arg), void *arg);

/* Extended attributes (doc/ext2-xattr.md).  Names are full names:
 * "user.", "trusted.", "security." with a non-empty suffix, and
 * "system.posix_acl_access" / "system.posix_acl_default", whose values are
 * in the ext2 ACL encoding (e2_acl_from_xattr converts).  Errors as
 * Linux's ext2: -EOPNOTSUPP for another prefix, -EINVAL for an empty
 * suffix, -ERANGE for a name over 255 bytes, -ENODATA when absent,
 * -EIO (and e2_error()) for a corrupt attribute block or inode area. */
enum e2_xattr_flags {
	E2_XATTR_CREATE = 1 << 0,    /* -EEXIST if it exists */
	E2_XATTR_REPLACE = 1 << 1,   /* -ENODATA if it does not */
	E2_XATTR_KILL_SGID = 1 << 2, /* access ACL: also clear the set-group-ID bit */
};
/* The value's length; copies it into buf when size > 0 (-ERANGE if it does
 * not fit). */
ssize_t e2_getxattr(struct e2fs *fs, uint32_t ino, const char *name, void *buf, size_t size);
/* The names, each NUL-terminated, and their total length; with size 0 only
 * the length; -ERANGE if size is too small.  trusted.* only if `trusted`. */
ssize_t e2_listxattr(struct e2fs *fs, uint32_t ino, char *buf, size_t size, bool trusted);
/* Set a value (up to the block size: -ERANGE above it, -E2BIG above 64 KiB;
 * -ENOSPC when the inode's attributes no longer fit in its inode and one
 * block).  An access ACL also sets the permission bits, and one the mode
 * says all of is not stored (as Linux); a default ACL on a non-directory
 * is -EACCES; a malformed ACL -EINVAL. */
int e2_setxattr(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, const char *name,
		const void *val, size_t size, unsigned flags);
/* -ENODATA if absent. */
int e2_removexattr(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, const char *name);
/* The set-user-ID bit, and the set-group-ID bit when group execute is
 * set, of mode: what a change by a caller without CAP_FSETID drops. */
mode_t e2_setid_kill(mode_t mode);
/* e2_kill_priv()'s group for a change that keeps the file's group. */
#define E2_SAME_GID ((gid_t)-1)
/* Drop what a change of ino's data or owner takes away on Linux
 * (file_remove_privs(), chown): the attribute security.capability, and
 * with suid the set-user-ID bit, and the set-group-ID bit when group
 * execute is set or who->keeps_sgid says no for the file's group, or for
 * to_gid (a chown's new group, else E2_SAME_GID) when set-user-ID goes.
 * suid: the caller lacks CAP_FSETID, or the change is a chown.  1 if
 * anything was dropped, 0 if nothing was there, or -errno. */
int e2_kill_priv(struct e2fs *fs, const struct e2_caller *who, uint32_t ino, bool suid,
		 gid_t to_gid);

/* ACLs between the xattr encoding (what FUSE and getfacl speak: version
 * 2, 8-byte entries) and ext2's (version 1, short entries without an id).
 * The length written, -EINVAL for a malformed ACL, -ERANGE if out is too
 * small (e2_acl_to_xattr with size 0: the length only). */
ssize_t e2_acl_from_xattr(const void *x, size_t n, void *out, size_t size);
ssize_t e2_acl_to_xattr(const void *e, size_t n, void *out, size_t size);
/* Before creating in parent: with no default ACL there, *mode loses the
 * umask bits and 0 is returned; with one, *mode is limited by it (the
 * umask is not used, as POSIX says) and 1 is returned: call
 * e2_acl_inherit on the new inode then. */
int e2_acl_create_mode(struct e2fs *fs, uint32_t parent, mode_t *mode, mode_t umask);
/* Give ino (just created in parent) the ACLs inherited from parent's
 * default ACL: an access ACL if it says more than the mode, and for a
 * directory the default ACL itself.  0 or -errno. */
int e2_acl_inherit(struct e2fs *fs, const struct e2_caller *who, uint32_t parent, uint32_t ino);

/* Sizes and free counts in blocks of the file system's block size, as the
 * kernel reports them for ext2 (f_blocks leaves out the superblocks, group
 * descriptors, reserved GDT blocks, bitmaps and inode tables: minixdf
 * off).  0. */
int e2_statfs(struct e2fs *fs, struct statvfs *sv);
/* Make this inode's changes (data and metadata, with everything they
 * depend on, including its directory entry if new) durable. */
int e2_fsync(struct e2fs *fs, uint32_t ino, bool datasync);
/* Make everything durable. */
int e2_sync(struct e2fs *fs);

#endif
