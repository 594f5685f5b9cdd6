/* The e2fsck judge of tests/support/fsckclass.c on fixed transcripts: one
 * for each kind of finding the crash model calls benign or dangerous
 * (doc/ext2-ordering.md), the forms of e2fsck's questions, long lines, and
 * transcripts that must be refused.  The findings are e2fsprogs 1.47's
 * own words, taken from real runs on damaged images. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../support/fsckclass.h"

/* e2fsck -fn's lines around its findings */
#define HEAD "e2fsck 1.47.0 (5-Feb-2023)\nPass 1: Checking inodes, blocks, and sizes\n"
#define TAIL                                                                                       \
	"\n/tmp/t/img: ********** WARNING: Filesystem still has errors **********\n\n"             \
	"/tmp/t/img: 14/2048 files (0.0% non-contiguous), 565/8192 blocks\n"
/* e2fsck -fy repairing, and e2fsck -fn then finding nothing */
#define REPAIR_OK                                                                                  \
	"--- e2fsck -fy: exit 1\n" HEAD "Pass 5: Checking group summary information\n"             \
	"\n/tmp/t/copy: ***** FILE SYSTEM WAS MODIFIED *****\n"                                    \
	"/tmp/t/copy: 14/2048 files (0.0% non-contiguous), 565/8192 blocks\n"                      \
	"--- e2fsck -fn after -fy: exit 0\n" HEAD "Pass 5: Checking group summary information\n"   \
	"/tmp/t/copy: 14/2048 files (0.0% non-contiguous), 565/8192 blocks\n"
/* a transcript of e2fsck -fn exiting 4 with these findings, then REPAIR_OK */
#define FOUND(findings) "--- e2fsck -fn: exit 4\n" HEAD findings TAIL REPAIR_OK

/* Judge text; fail unless it is want, and (when not NULL) unless why, the
 * reasons fsck_why gives, is exactly that. */
static void expect(const char *text, enum fsck_class want, const char *why)
{
	struct fsck_verdict v;
	char err[256], *w;

	assert_int_equal(fsck_judge(text, strlen(text), &v, err, sizeof(err)), 0);
	w = fsck_why(&v);
	assert_non_null(w);
	if (v.class != want)
		fail_msg("judged %s, not %s; findings:\n%swhy:\n%s", fsck_class_name(v.class),
			 fsck_class_name(want), v.findings, w);
	if (why && strcmp(w, why))
		fail_msg("why:\n%s\nnot:\n%s", w, why);
	fsck_verdict_free(&v);
	free(w);
}

static void test_clean(void **state)
{
	expect("--- e2fsck -fn: exit 0\n" HEAD "Pass 5: Checking group summary information\n"
	       "/tmp/t/img: 11/2048 files (0.0% non-contiguous), 1101/8192 blocks\n",
	       FSCK_CLEAN, "");
}

/* ---- benign: leaks ---- */

static void test_leaked_block_and_inode(void **state)
{
	expect(FOUND("Pass 5: Checking group summary information\n"
		     "Block bitmap differences:  -(5000--5002) -5010\nFix? no\n\n"
		     "Free blocks count wrong for group #0 (7627, counted=7626).\nFix? no\n\n"
		     "Inode bitmap differences:  -12\nFix? no\n\n"
		     "Free inodes count wrong (2034, counted=2033).\nFix? no\n\n"),
	       FSCK_BENIGN, "");
}

static void test_counts_too_high(void **state)
{
	expect(FOUND("Inode 12, i_blocks is 10, should be 2.  Fix? no\n\n"
		     "Pass 4: Checking reference counts\n"
		     "Inode 12 ref count is 3, should be 1.  Fix? no\n\n"
		     "Extended attribute block 1500 has reference count 3, should be 2.  Fix? "
		     "no\n\n"),
	       FSCK_BENIGN, "");
}

static void test_unattached_zero_length(void **state)
{
	expect(FOUND("Pass 4: Checking reference counts\n"
		     "Unattached zero-length inode 13.  Clear? no\n\n"),
	       FSCK_BENIGN, "");
}

/* An inode counted but no longer named (an unlink in flight), with its
 * data, or a directory: lost+found gets it. */
static void test_unattached_inode(void **state)
{
	expect(FOUND("Pass 4: Checking reference counts\n"
		     "Unattached inode 12\nConnect to /lost+found? no\n\n"
		     "Inode 12 ref count is 1, should be 0.  Fix? no\n\n"),
	       FSCK_BENIGN, "");
	expect(FOUND("Pass 3: Checking directory connectivity\n"
		     "Unconnected directory inode 13 (/\?\?\?)\nConnect to /lost+found? no\n\n"
		     "'..' in ... (13) is / (2), should be <The NULL inode> (0).\nFix? no\n\n"),
	       FSCK_BENIGN, "");
}

static void test_deleted_inode_zero_dtime(void **state)
{
	expect(FOUND("Deleted inode 13 has zero dtime.  Fix? no\n\n"), FSCK_BENIGN, "");
}

/* ---- dangerous: what soft updates promise never to leave ---- */

/* A name for an inode that is not there: the number may be handed out
 * again under the old name. */
static void test_entry_to_deleted_inode(void **state)
{
	expect(FOUND("Pass 2: Checking directory structure\n"
		     "Entry 'f1' in / (2) has deleted/unused inode 12.  Clear? no\n\n"
		     "Entry 'f1' in / (2) has an incorrect filetype (was 1, should be 0).\n"
		     "Fix? no\n\n"),
	       FSCK_DANGEROUS, "Entry 'f1' in / (2) has deleted/unused inode 12.\n");
}

static void test_directory_corrupted(void **state)
{
	expect(FOUND("Pass 2: Checking directory structure\n"
		     "Directory inode 12, block #0, offset 12: directory corrupted\n"
		     "Salvage? no\n\n"),
	       FSCK_DANGEROUS, "Directory inode 12, block #0, offset 12: directory corrupted\n");
}

static void test_plus_block_bitmap(void **state)
{
	expect(FOUND("Pass 5: Checking group summary information\n"
		     "Block bitmap differences:  +12 -(300--301)\nFix? no\n\n"),
	       FSCK_DANGEROUS, "Block bitmap differences:  +12 -(300--301)\n");
}

static void test_plus_inode_bitmap(void **state)
{
	expect(FOUND("Pass 5: Checking group summary information\n"
		     "Inode bitmap differences:  +12\nFix? no\n\n"),
	       FSCK_DANGEROUS, "Inode bitmap differences:  +12\n");
}

static void test_link_count_too_low(void **state)
{
	expect(FOUND("Pass 4: Checking reference counts\n"
		     "Inode 12 ref count is 1, should be 3.  Fix? no\n\n"),
	       FSCK_DANGEROUS, "Inode 12 ref count is 1, should be 3.\n");
}

static void test_i_blocks_too_low(void **state)
{
	expect(FOUND("Inode 12, i_blocks is 0, should be 2.  Fix? no\n\n"), FSCK_DANGEROUS,
	       "Inode 12, i_blocks is 0, should be 2.\n");
}

static void test_attribute_count_too_low(void **state)
{
	expect(FOUND("Extended attribute block 1500 has reference count 1, should be 2.  Fix? "
		     "no\n\n"),
	       FSCK_DANGEROUS,
	       "Extended attribute block 1500 has reference count 1, should be 2.\n");
}

/* Counts are compared as numbers, whatever their width. */
static void test_counts_compared_as_numbers(void **state)
{
	expect(FOUND("Inode 12 ref count is 9, should be 10.  Fix? no\n"), FSCK_DANGEROUS, NULL);
	expect(FOUND("Inode 12 ref count is 10, should be 9.  Fix? no\n"), FSCK_BENIGN, NULL);
	expect(FOUND("Inode 12, i_blocks is 18446744073709551616, should be "
		     "18446744073709551617.  Fix? no\n"),
	       FSCK_DANGEROUS, NULL);
	expect(FOUND("Inode 12, i_blocks is 0008, should be 8.  Fix? no\n"), FSCK_BENIGN, NULL);
}

/* e2fsck -fy leaves errors: they are the reason. */
static void test_repair_fails(void **state)
{
	expect(
	    "--- e2fsck -fn: exit 4\n" HEAD "Pass 4: Checking reference counts\n"
	    "Unattached inode 12\nConnect to /lost+found? no\n\n" TAIL
	    "--- e2fsck -fy: exit 4\n" HEAD "Pass 4: Checking reference counts\n"
	    "Unattached inode 12\nConnect to /lost+found? yes\n\n"
	    "/lost+found not found.  Create? yes\n\n"
	    "Cannot allocate space for /lost+found.\nPlace lost files in root directory instead? "
	    "yes\n\n" TAIL,
	    FSCK_DANGEROUS,
	    "e2fsck -fy exit status 4:\nUnattached inode 12\n/lost+found not found.\n"
	    "Cannot allocate space for /lost+found.\n");
	expect("--- e2fsck -fn: exit 4\n" HEAD "Deleted inode 13 has zero dtime.  Fix? no\n" TAIL
	       "--- e2fsck -fy: exit 8\n",
	       FSCK_DANGEROUS, "e2fsck -fy exit status 8:\ne2fsck -fy failed without a finding\n");
}

static void test_errors_left_after_repair(void **state)
{
	expect("--- e2fsck -fn: exit 4\n" HEAD "Deleted inode 13 has zero dtime.  Fix? no\n" TAIL
	       "--- e2fsck -fy: exit 1\n--- e2fsck -fn after -fy: exit 4\n" HEAD
	       "Block bitmap differences:  -20\nFix? no\n",
	       FSCK_DANGEROUS, "e2fsck -fn finds errors (exit status 4) after e2fsck -fy\n");
}

static void test_e2fsck_fails(void **state)
{
	expect("--- e2fsck -fn: exit 8\n"
	       "e2fsck: No such file or directory while trying to open /tmp/t/missing.img\n"
	       "Possibly non-existent device?\n",
	       FSCK_DANGEROUS, "e2fsck exit status 8\n");
	/* killed by a signal */
	expect("--- e2fsck -fn: exit 137\n" HEAD, FSCK_DANGEROUS, "e2fsck exit status 137\n");
	/* errors reported, but nothing that says what */
	expect("--- e2fsck -fn: exit 4\n" HEAD
	       "Pass 5: Checking group summary information\n" TAIL REPAIR_OK,
	       FSCK_DANGEROUS, "e2fsck exit status 4 without any finding\n");
}

/* ---- the forms of e2fsck's questions ---- */

/* A question at the end of a finding's line is cut off and the finding
 * kept and judged; a line that is only a question is no finding. */
static void test_question_on_the_finding_line(void **state)
{
	expect(FOUND("Inode 12 ref count is 1, should be 2.  Fix? no\n"), FSCK_DANGEROUS,
	       "Inode 12 ref count is 1, should be 2.\n");
	expect(FOUND("Unattached inode 12  Connect to /lost+found? no\n"), FSCK_BENIGN, NULL);
	/* questions alone: e2fsck reported errors without a finding */
	expect(FOUND("Fix? no\n\nClear inode? no\n\nConnect to /lost+found? no\n"
		     "Clear HTree index? yes\n"),
	       FSCK_DANGEROUS, "e2fsck exit status 4 without any finding\n");
	/* not a question of e2fsck's (no capital after a space): a finding */
	expect(FOUND("Entry 'a' odd? no\n"), FSCK_BENIGN, NULL);
}

static void test_question_findings_are_what_is_kept(void **state)
{
	struct fsck_verdict v;
	const char *t = FOUND("Deleted inode 13 has zero dtime.  Fix? no\n"
			      "Entry 'f1' in / (2) has deleted/unused inode 12.  Clear? no\n"
			      "Fix? no\n");

	assert_int_equal(fsck_judge(t, strlen(t), &v, NULL, 0), 0);
	assert_string_equal(v.findings, "B: Deleted inode 13 has zero dtime.\n"
					"D: Entry 'f1' in / (2) has deleted/unused inode 12.\n");
	assert_int_equal(v.nbenign, 1);
	assert_int_equal(v.ndangerous, 1);
	assert_int_equal(v.status[FSCK_CHECK], 4);
	assert_int_equal(v.status[FSCK_REPAIR], 1);
	assert_int_equal(v.status[FSCK_AFTER], 0);
	fsck_verdict_free(&v);
}

/* ---- bitmap differences ---- */

/* Each word must be a "-" leak, and no "+" may appear anywhere. */
static void test_bitmap_words(void **state)
{
	expect(FOUND("Block bitmap differences:  -(300--301) -5+7\nFix? no\n"), FSCK_DANGEROUS,
	       NULL);
	expect(FOUND("Block bitmap differences: Group 1 block bitmap does not match checksum.\n"
		     "FIXED.\n"),
	       FSCK_DANGEROUS, NULL);
	expect(FOUND("Block bitmap differences: \nFix? no\n"), FSCK_BENIGN, NULL);
}

/* A bitmap line is as long as its differences: a "+" far along it counts. */
static void test_long_bitmap_line(void **state)
{
	char line[8192], *t;
	size_t n = 0;

	n += snprintf(line + n, sizeof(line) - n, "Block bitmap differences: ");
	for (int i = 0; i < 400; i++)
		n += snprintf(line + n, sizeof(line) - n, " -%d", 1000 + 2 * i);
	assert_true(n > 2000);
	n += snprintf(line + n, sizeof(line) - n, " +9999\nFix? no\n");
	assert_true(n < sizeof(line));
	assert_true(asprintf(&t, "--- e2fsck -fn: exit 4\n%s%s", line, REPAIR_OK) > 0);
	expect(t, FSCK_DANGEROUS, NULL);
	free(t);
	/* and the same without it is only a leak */
	assert_true(asprintf(&t, "--- e2fsck -fn: exit 4\n%.*s\nFix? no\n%s",
			     (int)(strstr(line, " +9999") - line), line, REPAIR_OK) > 0);
	expect(t, FSCK_BENIGN, NULL);
	free(t);
}

/* ---- transcripts ---- */

static void refused(const char *text, const char *msg)
{
	struct fsck_verdict v;
	char err[256];

	assert_int_equal(fsck_judge(text, strlen(text), &v, err, sizeof(err)), -EINVAL);
	assert_null(v.findings);
	if (!strstr(err, msg))
		fail_msg("message '%s' does not say '%s'", err, msg);
}

static void test_transcript_steps(void **state)
{
	char buf[64];

	assert_int_equal(fsck_next_step(FSCK_CHECK, 0), FSCK_NSTEPS);
	assert_int_equal(fsck_next_step(FSCK_CHECK, 1), FSCK_REPAIR);
	assert_int_equal(fsck_next_step(FSCK_CHECK, 4), FSCK_REPAIR);
	assert_int_equal(fsck_next_step(FSCK_CHECK, 8), FSCK_NSTEPS);
	assert_int_equal(fsck_next_step(FSCK_REPAIR, 1), FSCK_AFTER);
	assert_int_equal(fsck_next_step(FSCK_REPAIR, 3), FSCK_AFTER);
	assert_int_equal(fsck_next_step(FSCK_REPAIR, 4), FSCK_NSTEPS);
	assert_int_equal(fsck_next_step(FSCK_AFTER, 0), FSCK_NSTEPS);
	fsck_header(buf, sizeof(buf), FSCK_AFTER, 4);
	assert_string_equal(buf, "--- e2fsck -fn after -fy: exit 4\n");

	refused("", "ends before its e2fsck -fn step");
	refused("Pass 1: Checking inodes\n--- e2fsck -fn: exit 0\n", "before the first header");
	refused("--- e2fsck -fn: exit 4\n" HEAD "Deleted inode 13 has zero dtime.\n",
		"ends before its e2fsck -fy step");
	refused("--- e2fsck -fn: exit 4\n--- e2fsck -fy: exit 0\n",
		"ends before its e2fsck -fn after -fy step");
	refused("--- e2fsck -fn: exit 0\n--- e2fsck -fy: exit 0\n", "e2fsck -fy where the end");
	refused("--- e2fsck -fn: exit 4\n--- e2fsck -fn after -fy: exit 0\n",
		"e2fsck -fn after -fy where e2fsck -fy was due");
	refused("--- e2fsck -fn: exit four\n", "not well formed");
	refused("--- e2fsck -fn: exit 300\n", "not well formed");
	refused("--- e2fsck -fp: exit 0\n", "not well formed");
	/* blank lines before the first header, and no newline at the end */
	expect("\n\n--- e2fsck -fn: exit 0", FSCK_CLEAN, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clean),
	    cmocka_unit_test(test_leaked_block_and_inode),
	    cmocka_unit_test(test_counts_too_high),
	    cmocka_unit_test(test_unattached_zero_length),
	    cmocka_unit_test(test_unattached_inode),
	    cmocka_unit_test(test_entry_to_deleted_inode),
	    cmocka_unit_test(test_directory_corrupted),
	    cmocka_unit_test(test_deleted_inode_zero_dtime),
	    cmocka_unit_test(test_plus_block_bitmap),
	    cmocka_unit_test(test_plus_inode_bitmap),
	    cmocka_unit_test(test_link_count_too_low),
	    cmocka_unit_test(test_i_blocks_too_low),
	    cmocka_unit_test(test_attribute_count_too_low),
	    cmocka_unit_test(test_counts_compared_as_numbers),
	    cmocka_unit_test(test_repair_fails),
	    cmocka_unit_test(test_errors_left_after_repair),
	    cmocka_unit_test(test_e2fsck_fails),
	    cmocka_unit_test(test_question_on_the_finding_line),
	    cmocka_unit_test(test_question_findings_are_what_is_kept),
	    cmocka_unit_test(test_bitmap_words),
	    cmocka_unit_test(test_long_bitmap_line),
	    cmocka_unit_test(test_transcript_steps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
