/* fstitch-mount's -o options: parsing, validation and the decisions that
 * follow from them (which options go to the kernel through libfuse, which
 * are fstitch's own, which belong to mount(8) and are dropped).  No FUSE in
 * here, so the unit tests drive it directly.
 *
 * An option string is a comma-separated list as mount(8) passes it; "\,"
 * stands for a literal comma inside a value (fsname=a\,b).
 */
#ifndef FSTITCH_MOUNTOPT_H
#define FSTITCH_MOUNTOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "engine/cache.h"
#include "ext2/e2.h"

/* Limits for the values, checked by mountopt_parse(). */
#define MOUNTOPT_CACHE_MIN    (1ULL << 20)	    /* 1 MiB */
#define MOUNTOPT_CACHE_MAX    (1ULL << 40)	    /* 1 TiB */
#define MOUNTOPT_FLUSH_MAX_MS (24U * 3600U * 1000U) /* one day */
#define MOUNTOPT_THREADS_MAX  1024
/* What max_threads= (and fstitch-mount --max-threads) takes, for a
 * message: "bad value ... (it takes " MOUNTOPT_THREADS_TAKES ")". */
#define MOUNTOPT_THREADS_TAKES "a number from 1 to 1024"
#define MOUNTOPT_NBD_RETRY_MS  (60U * 1000U) /* nbd_retry= default */

struct mountopt {
	enum consistency consistency;	   /* as given; see has_consistency */
	bool has_consistency;		   /* consistency= was given; if not, the
					    * mode is journal on an image with a
					    * journal, softupdates otherwise
					    * (e2_opts.consistency_auto) */
	enum e2_errors errors;		   /* errors=; default: the superblock's */
	enum e2_rename_order rename_order; /* rename_order=; default all */
	bool noatime;			   /* noatime (atime clears it) */
	bool strictatime;		   /* strictatime or norelatime (relatime
					    * and nostrictatime clear it) */
	bool nodiratime;		   /* nodiratime (diratime clears it) */
	bool sync, dirsync;		   /* sync, dirsync (async clears sync) */
	uint64_t cache_bytes;		   /* 0: the library's default */
	unsigned flush_interval_ms;	   /* 0: the library's default */
	unsigned commit_ms;		   /* commit=SECONDS (journal modes); 0: 5 s */
	bool readonly;
	bool debug;	       /* "debug" given as -o debug */
	bool has_fsname;       /* the user chose fsname= */
	bool has_subtype;      /* the user chose subtype= */
	bool allow_other;      /* allow_other: other users may use the
				* mount (and its control socket) */
	bool allow_root;       /* allow_root: root may as well */
	bool nofail;	       /* nofail: a missing source is not an
				* error (fstab's meaning) */
	bool blkdev;	       /* mount as fuseblk: blkdev, or the daemon's
				* choice when the user made none */
	bool has_blkdev;       /* the user chose blkdev or noblkdev */
	unsigned max_threads;  /* max_threads=N; 0: the daemon's default */
	unsigned lock_wait_ms; /* lock_wait=SECONDS: how long to wait for
				* an image in use; 0: refuse at once */
	unsigned nbd_retry_ms; /* nbd_retry=SECONDS: how long an NBD
				* source reconnects after a loss */
	bool unsafe_no_flush;  /* write to an NBD export that cannot flush */
	char *statsfile;       /* statsfile=PATH as given; NULL: none */
	uint64_t mem_bytes;    /* physical memory, set by mountopt_init():
				* a larger cache= is refused (it could
				* only end in swapping or the OOM killer);
				* 0: unknown, no such check */
	char *fuse_opts;       /* options for libfuse, comma separated,
				* escaped; NULL when none */
};

enum mountopt_err {
	MOUNTOPT_OK = 0,
	MOUNTOPT_UNKNOWN,    /* no such option */
	MOUNTOPT_BAD_VALUE,  /* the value does not parse or is out of range */
	MOUNTOPT_NEED_VALUE, /* "cache" without "=..." */
	MOUNTOPT_NO_VALUE,   /* "ro=1": the option takes no value */
	MOUNTOPT_TOO_LARGE,  /* a size above what the machine has (limit) */
};

/* What went wrong, for the caller's message: the option's name and the value
 * as given (both NUL terminated, truncated to fit). */
struct mountopt_error {
	enum mountopt_err kind;
	char name[64];
	char value[192];
	uint64_t limit; /* MOUNTOPT_TOO_LARGE: the largest value allowed */
	/* MOUNTOPT_BAD_VALUE: what the option takes, as words for a message
	 * ("all, process or file"); NULL if there is nothing to say. */
	const char *expect;
};

/* Set the defaults, and mem_bytes to this machine's physical memory.  Call
 * once before mountopt_parse(). */
void mountopt_init(struct mountopt *mo);
/* Free what mountopt_parse() allocated; mo may be parsed into again after
 * mountopt_init(). */
void mountopt_free(struct mountopt *mo);

/* Parse one -o argument into mo (may be called once per -o; later options
 * override earlier ones).  Returns 0; -EINVAL with *err filled in for an
 * unknown option or a bad value (mo is then partly updated: the caller
 * stops anyway); -ENOMEM.  err may be NULL. */
int mountopt_parse(struct mountopt *mo, const char *opts, struct mountopt_error *err);

/* A size: decimal digits with an optional K, M, G or T suffix (powers of
 * 1024, optionally followed by "iB" or "B"); plain numbers are bytes.
 * Returns 0 or -EINVAL (empty, junk, overflow). */
int mountopt_parse_size(const char *s, uint64_t *out);
/* Seconds as a decimal with up to three fractional digits ("5", "0.25"),
 * converted to milliseconds.  Returns 0 or -EINVAL (junk, more than three
 * fractional digits, zero, more than MOUNTOPT_FLUSH_MAX_MS). */
int mountopt_parse_seconds(const char *s, unsigned *ms);

/* The cache size in blocks of block_size bytes (at least 64), or 0 when
 * cache= was not given. */
size_t mountopt_cache_blocks(const struct mountopt *mo, uint32_t block_size);

/* Build the option string handed to libfuse: the pass-through options, then
 * default_permissions, fsname=<fsname> and subtype=fstitch unless the user
 * set them.  Commas and backslashes in fsname are escaped.  *out is
 * malloc'ed and owned by the caller.  Returns 0 or -ENOMEM. */
int mountopt_fuse_string(const struct mountopt *mo, const char *fsname, char **out);

/* Name of a consistency mode as the option spells it. */
const char *mountopt_consistency_name(enum consistency c);

/* Rate limit for a log line that may repeat (one per event): at most
 * `burst` lines in any window of `window_ms`.  Zero-initialise, then set
 * burst and window_ms.  Not thread safe: the caller serialises. */
struct mountopt_ratelimit {
	unsigned burst, window_ms;
	uint64_t start_ms;   /* when the current window began */
	unsigned used;	     /* lines logged in it */
	uint64_t suppressed; /* events not logged since the last logged line */
};
/* An event at now_ms: true if its line should be logged, with *missed
 * (may be NULL) set to the events left unlogged since the previous logged
 * line (so that the line can say so); false if it is to be counted only. */
bool mountopt_ratelimit(struct mountopt_ratelimit *rl, uint64_t now_ms, uint64_t *missed);

/* When reads move access times, from the atime options as the kernel
 * reads them: noatime wins over the rest; strictatime over relatime,
 * which is the default. */
enum e2_atime mountopt_atime(const struct mountopt *mo);

#endif
