/* The crash model's judge of an e2fsck transcript (doc/design.md §3,
 * doc/ext2-ordering.md): clean, benign or dangerous.  The one copy of
 * these rules: the C tests call it through e2test_util.c, the bats tests
 * through the fsckclass tool (tests/tools/fsckclass.c).  libc only.
 *
 * A transcript is the output of up to three e2fsck runs, each after a
 * header line that names the step and gives its exit status:
 *
 *	--- e2fsck -fn: exit 4
 *	(e2fsck -fn on the image)
 *	--- e2fsck -fy: exit 1
 *	(e2fsck -fy on a copy: the repair)
 *	--- e2fsck -fn after -fy: exit 0
 *	(e2fsck -fn on that copy once -fy is done)
 *
 * The second step comes when the first exits 1 to 7, the third when the
 * second exits 0 to 3 (fsck_next_step); a transcript with a step missing
 * or out of place is refused rather than judged.
 *
 *   clean      e2fsck -fn exits 0.
 *   benign     e2fsck -fn exits 1 to 7 with findings, none of them one
 *              soft updates promise never to leave (below); e2fsck -fy
 *              exits 0 to 3; e2fsck -fn then exits 0.
 *   dangerous  anything else: e2fsck failing (exit status 8 or more, or
 *              killed), errors without a finding, e2fsck -fy leaving
 *              errors, or a forbidden finding of e2fsck -fn.
 *
 * Allowed are leaks and what a leak brings: "-" bitmap differences and
 * summary counts, an unattached inode or unconnected directory (an inode
 * still counted but no longer named), counts higher than the truth.
 * Forbidden, though e2fsck repairs them, because fstitch or a kernel
 * mounting the image without a check would act on them: a "+" bitmap
 * difference (something in use that the bitmap calls free, which would
 * be handed out twice), a link count, i_blocks or attribute-block
 * reference count lower than the truth (which would free something still
 * in use), an entry naming a deleted or unused inode (a name whose inode
 * may be handed out again), a corrupted directory, and a block claimed
 * twice or out of range. */
#ifndef FSTITCH_TESTS_FSCKCLASS_H
#define FSTITCH_TESTS_FSCKCLASS_H

#include <stddef.h>

enum fsck_class {
	FSCK_CLEAN = 0,
	FSCK_BENIGN = 1,
	FSCK_DANGEROUS = 2,
};

enum fsck_step {
	FSCK_CHECK,  /* e2fsck -fn on the image */
	FSCK_REPAIR, /* e2fsck -fy on a copy */
	FSCK_AFTER,  /* e2fsck -fn on the copy after -fy */
	FSCK_NSTEPS, /* (no step: the transcript is complete) */
};

struct fsck_verdict {
	enum fsck_class class;
	/* each step's exit status, -1 for a step that did not run (a status
	 * of 128 + N is a run killed by signal N) */
	int status[FSCK_NSTEPS];
	/* findings of e2fsck -fn: allowed, forbidden; errors e2fsck -fy
	 * left (and what else made it fail) */
	unsigned nbenign, ndangerous, nrepair;
	/* One finding a line: "B: " allowed, "D: " forbidden or e2fsck -fn
	 * failing, "P: " what e2fsck -fy left; malloc'd, "" when there is
	 * none. */
	char *findings;
};

/* The step that must follow step done, which exited with status; or
 * FSCK_NSTEPS when the transcript is complete. */
enum fsck_step fsck_next_step(enum fsck_step done, int status);

/* Write the header line of step (newline included) into buf; the length,
 * as snprintf. */
int fsck_header(char *buf, size_t len, enum fsck_step step, int status);

/* Judge a transcript of len bytes.  0 and *v filled (free it with
 * fsck_verdict_free); or -EINVAL, *v left empty, and a message in err,
 * for a transcript that is not one; or -ENOMEM. */
int fsck_judge(const char *text, size_t len, struct fsck_verdict *v, char *err, size_t errlen);

/* Print why v is dangerous, a reason a line (nothing for another class):
 * the forbidden findings and failures of e2fsck -fn, then what e2fsck -fy
 * left after a line "e2fsck -fy exit status N:", or the errors found
 * after it.  Returns a malloc'd string ("" when there is nothing), or
 * NULL when out of memory. */
char *fsck_why(const struct fsck_verdict *v);

void fsck_verdict_free(struct fsck_verdict *v);

/* "clean", "benign", "dangerous". */
const char *fsck_class_name(enum fsck_class c);

#endif
