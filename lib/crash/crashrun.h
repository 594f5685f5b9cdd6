/* Recording a command's run on a fstitch mount, and checking a command
 * against every crash state of that run (fstitch-crash(1)).
 *
 * crash_run() makes or copies an image, runs a setup command on a plain
 * mount, then runs the command on a mount whose every block write and
 * barrier is recorded (fstitch-mount's FSTITCH_RECORD), and keeps the log.
 * crash_check() rebuilds each selected crash state of that log into an
 * image file (crashplan.h: only the blocks that differ), repairs it as a
 * user would (e2fsck), mounts it read-only and runs a check command in it,
 * several states at a time.
 *
 * Both run other programs (the daemon, e2fsck, the user's commands) and
 * return 0/-errno; nothing is printed here.
 */
#ifndef FSTITCH_CRASHRUN_H
#define FSTITCH_CRASHRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "crashplan.h"

/* The programs used, by path or name (searched in PATH). */
struct crash_tools {
	const char *mount;	/* fstitch-mount */
	const char *mkfs;	/* fstitch-mkfs */
	const char *fusermount; /* fusermount3 */
	const char *e2fsck;
};

/* In DIR, crash_run() keeps "log" (the image before the command, then
 * every block write and barrier: crashplan.h reads it) and "image" (the
 * disk after the command). */
#define CRASH_LOG   "log"
#define CRASH_IMAGE "image"

struct crash_run_opts {
	const struct crash_tools *tools;
	const char *dir;	/* made if missing */
	const char *image;	/* copy this image, or */
	const char *size;	/* make one this size (fstitch-mkfs syntax) */
	const char *mount_opts; /* fstitch-mount -o, or NULL */
	const char *setup;	/* sh -c SETUP on a plain mount first, or NULL */
	char *const *argv;	/* the command */
};

/* Where crash_run() or crash_check() failed, for the message. */
struct crash_err {
	const char *what; /* "cannot mount" */
	const char *arg;  /* the path or command it is about, or NULL */
	int status;	  /* an exit status that goes with it, or -1 */
};

/* Returns 0 and sets *status to the command's exit status (128 + signal
 * when it was killed, 127 when it could not be found, 126 when it could not
 * be run), or -errno with *err set.  A setup command that fails gives
 * -ECANCELED with err->status its exit status. */
int crash_run(const struct crash_run_opts *o, int *status, struct crash_err *err);

enum crash_fsck {
	CRASH_FSCK_REPAIR, /* e2fsck -fy; a state fails if errors are left (>= 4) */
	CRASH_FSCK_PREEN,  /* e2fsck -fp; a state fails if preening is not enough */
	CRASH_FSCK_NONE,   /* the state as the crash left it */
};

enum crash_why {
	CRASH_OK,
	CRASH_FAIL_FSCK,  /* e2fsck left errors or could not run */
	CRASH_FAIL_MOUNT, /* the repaired image did not mount */
	CRASH_FAIL_CHECK, /* the check command failed */
};

struct crash_result {
	struct crash_plan_state st;
	enum crash_why why;
	int fsck_status;  /* e2fsck's exit status, -1 if not run */
	int check_status; /* the check's exit status, -1 if not run */
	char *fsck_out;	  /* failed states: e2fsck's output (may be NULL) */
	char *check_out;  /* failed states: the check's output, its last 4 KiB */
};

struct crash_check_opts {
	const struct crash_tools *tools;
	const char *workdir; /* an existing empty directory for scratch files */
	unsigned jobs;	     /* states checked at once; 0 means 1 */
	enum crash_fsck fsck;
	bool no_mount;	   /* the check gets $FSTITCH_IMAGE only */
	bool rw;	   /* mount read-write (the state is rebuilt after) */
	bool fail_fast;	   /* take no new state once one has failed */
	char *const *argv; /* the check command */
	/* Called after each state, from any thread but never two at once. */
	void (*progress)(size_t done, size_t failed, void *arg);
	void *arg;
};

struct crash_check_stats {
	uint64_t blocks_written; /* by the cursors rebuilding states */
	uint64_t full_writes;	 /* whole-image writes among them */
	size_t repaired;	 /* states e2fsck changed (exit 1) */
	size_t checked;		 /* states checked: all, or fewer with fail_fast */
};

/* Check every selected state of plan.  Returns 0 with *results (one per
 * selected state, in order; free with crash_results_free()) and *failed,
 * or -errno with *err set.  The check runs with $FSTITCH_MNT (the
 * read-only mount, also its working directory), $FSTITCH_IMAGE (the
 * repaired image) and $FSTITCH_STATE (the state number) set.
 * With o->fail_fast the states are still taken in order, but none once one
 * has failed: the states checked (stats->checked, which must then be
 * given) are the first ones, and each later result is CRASH_OK with both
 * statuses -1 (not run). */
int crash_check(const struct crash_plan *plan, const struct crash_check_opts *o,
		struct crash_result **results, size_t *failed, struct crash_check_stats *stats,
		struct crash_err *err);
void crash_results_free(struct crash_result *r, size_t n);

/* Write model state n of the log at logpath to the file out.  0, -ERANGE
 * when there is no such state, or -errno. */
int crash_write_state(const struct crash_plan *plan, size_t n, const char *out);

#endif
