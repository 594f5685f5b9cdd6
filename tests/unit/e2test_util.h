/* Helpers for the ext2 module's tests: make images with mke2fs, move them
 * between files and memory, and judge an image after a crash: clean,
 * benign (leaks only, which e2fsck -fy repairs) or dangerous, by the rules of
 * tests/support/fsckclass.h, which the bats tests share.
 *
 * Linked into every unit test binary, so this depends on libc only (the
 * tests themselves turn image bytes into memory devices).
 */
#ifndef E2TEST_UTIL_H
#define E2TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "../support/fsckclass.h"
#include "../support/scratch.h"

/* 1 when built with the address sanitizer (make asan): that run is for
 * memory errors, so the long tests do less there. */
#ifdef __SANITIZE_ADDRESS__
#define E2T_SANITIZED 1
#else
#define E2T_SANITIZED 0
#endif

/* ---- small deterministic random numbers ------------------------------ */

struct e2t_rng {
	uint64_t s;
};
void e2t_rng_seed(struct e2t_rng *r, uint64_t seed);
uint64_t e2t_rng_next(struct e2t_rng *r);
/* Uniform in [0, n); 0 if n is 0. */
uint64_t e2t_rng_below(struct e2t_rng *r, uint64_t n);
/* The seed for a test: the environment variable `env` if set (decimal or
 * 0x hex), otherwise def. */
uint64_t e2t_seed(const char *env, uint64_t def);
/* An integer from the environment, or def. */
long e2t_env_long(const char *env, long def);

/* ---- files and commands ---------------------------------------------- */

/* e2t_tmpdir, e2t_tmpfile and e2t_tmpdir_new: ../support/scratch.h */
/* The test's scratch image: e2t_scratch_file() makes a new temporary path
 * (as e2t_tmpfile) and remembers it; e2t_remove_scratch(), a cmocka teardown,
 * unlinks it even when the test failed part way. */
char *e2t_scratch_file(const char *tag);
int e2t_remove_scratch(void **state);
/* rm -rf path (best effort). */
void e2t_rm_rf(const char *path);

int e2t_read_file(const char *path, void **data, size_t *len);
int e2t_write_file(const char *path, const void *data, size_t len);

/* Run argv[0] (searched in PATH and /sbin:/usr/sbin) with argv, stdin from
 * /dev/null, stdout and stderr captured together into *out (malloc'd, NUL
 * terminated; may be NULL to discard).  Returns the exit status (0..255),
 * 128+signal if killed, or -errno if it could not be run. */
int e2t_run(char *const argv[], char **out);
/* The same with a shell command line (sh -c). */
int e2t_sh(const char *cmd, char **out);

/* Make an ext2 image of size_kib KiB at path with
 * `mke2fs -q -F -t ext2 -b block_size <extra options> path size_kib`.
 * extra is split at spaces (may be NULL); if it starts with "-t " it
 * replaces "-t ext2".  0 or -errno / positive mke2fs
 * status; *msg (if not NULL) gets mke2fs's output. */
int e2t_mkfs(const char *path, unsigned size_kib, unsigned block_size, const char *extra,
	     char **msg);
/* The same into memory: the image bytes (malloc'd) in *img, *len. */
int e2t_mkfs_mem(unsigned size_kib, unsigned block_size, const char *extra, void **img,
		 size_t *len);

/* ---- e2fsck ---------------------------------------------------------- */

/* verdicts: enum fsck_class and fsck_class_name() of the shared judge
 * (tests/support/fsckclass.h) */

struct e2t_fsck {
	int status;	   /* e2fsck -fn exit status */
	int repair_status; /* e2fsck -fy's on a copy (0 if not run) */
	enum fsck_class verdict;
	unsigned nbenign, ndangerous, nrepair;
	char findings[2048]; /* fsck_verdict's findings: "B: line" (e2fsck
			      * -fn), "D: line" (e2fsck -fn, forbidden), "P:
			      * line" (what e2fsck -fy left), as many whole
			      * lines as fit */
	char *output;	     /* the transcript (malloc'd); e2t_fsck_free */
};

/* Judge an image file: e2fsck -fn on it; if not clean, e2fsck -fy on a copy
 * and e2fsck -fn on the repaired copy; the transcript of these runs
 * (fsckclass.h) goes to r->output and to fsck_judge.  0, or -errno if
 * e2fsck could not run. */
int e2t_fsck_file(const char *path, struct e2t_fsck *r);
/* Write img to a scratch file, check it, remove it. */
int e2t_fsck_mem(const void *img, size_t len, struct e2t_fsck *r);
/* The same, and *fixed (malloc'd, *flen bytes) gets the image as a user
 * finds it after the repair (e2fsck -fy's), or NULL when the image was
 * clean. */
int e2t_fsck_mem_repair(const void *img, size_t len, struct e2t_fsck *r, void **fixed,
			size_t *flen);
void e2t_fsck_free(struct e2t_fsck *r);

/* 64-bit FNV-1a of a buffer (to recognise images already checked). */
uint64_t e2t_hash(const void *data, size_t len);

/* For e2_opts.clock in crash workloads: a clock that never moves, so that
 * the inode changes a workload makes, and so its writes and crash states,
 * are the same on every run. */
struct timespec;
void e2t_fixed_clock(struct timespec *now);

#endif
