/* The /proc/PID/status fields the mount daemon reads for root's reserve
 * (lib/util/procstatus.c), on texts written here: this machine's own
 * processes cannot hold CAP_SYS_RESOURCE (it is off their bounding set).
 * And the call named by /proc/PID/syscall, on texts in its format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "util/procstatus.h"

/* as Linux 6.1 prints them, cut to the lines around the two fields */
static const char with_cap[] = "Name:\tdd\n"
			       "Uid:\t1000\t1000\t1000\t1000\n"
			       "Gid:\t1000\t1000\t1000\t1000\n"
			       "FDSize:\t64\n"
			       "Groups:\t4 24 2000 \n"
			       "NStgid:\t412\n"
			       "CapInh:\t0000000001000000\n"
			       "CapPrm:\t0000000001000000\n"
			       "CapEff:\t0000000001000000\n"
			       "CapBnd:\t000001ffffffffff\n";
static const char without[] = "Name:\tdd\n"
			      "Groups:\t\n"
			      "CapEff:\t0000000000000000\n"
			      "CapBnd:\t000001ffffffffff\n";

static void test_caps(void **state)
{
	(void)state;
	assert_true(proc_status_has_cap(with_cap, 24));
	assert_false(proc_status_has_cap(with_cap, 23));
	assert_false(proc_status_has_cap(with_cap, 25));
	/* CapBnd's bits are not CapEff's */
	assert_false(proc_status_has_cap(without, 24));
	assert_false(proc_status_has_cap(without, 0));
	assert_false(proc_status_has_cap(with_cap, 64));
	assert_false(proc_status_has_cap(with_cap, -1));
	/* all 64 bits are read */
	assert_true(proc_status_has_cap("CapEff:\t8000000000000001\n", 63));
	assert_true(proc_status_has_cap("CapEff:\t8000000000000001\n", 0));
	/* no such line, or nothing on it */
	assert_false(proc_status_has_cap("Name:\tx\nCapPrm:\tffffffffffffffff\n", 3));
	assert_false(proc_status_has_cap("CapEff:\t\nCapBnd:\tffffffffffffffff\n", 3));
}

static void test_groups(void **state)
{
	(void)state;
	assert_true(proc_status_in_groups(with_cap, 4));
	assert_true(proc_status_in_groups(with_cap, 24));
	assert_true(proc_status_in_groups(with_cap, 2000));
	assert_false(proc_status_in_groups(with_cap, 2));
	assert_false(proc_status_in_groups(with_cap, 200));
	assert_false(proc_status_in_groups(with_cap, 1000)); /* the primary group */
	/* an empty list ends at its line: the next line's numbers are not
	 * groups */
	assert_false(proc_status_in_groups(without, 0));
	assert_false(proc_status_in_groups("Groups:\t\nNStgid:\t412\n", 412));
	assert_false(proc_status_in_groups("Name:\tx\n", 0));
	/* the last line, with no newline */
	assert_true(proc_status_in_groups("Groups:\t7 65534", 65534));
}

static void test_syscall(void **state)
{
	char text[160];

	(void)state;
	/* fchown(3, -1, -1), as glibc passes the ids and as a caller that
	 * widens them with their sign would */
	snprintf(text, sizeof(text),
		 "%ld 0x3 0xffffffff 0xffffffff 0x0 0x0 0x0 0x7ffc4b1a0e58 0x7f1e2d3c4b5a\n",
		 (long)SYS_fchown);
	assert_int_equal(proc_syscall_chown_none(text), 1);
	snprintf(text, sizeof(text),
		 "%ld 0x3 0xffffffffffffffff 0xffffffffffffffff 0x0 0x0 0x0 0x1 0x2\n",
		 (long)SYS_fchown);
	assert_int_equal(proc_syscall_chown_none(text), 1);
	/* fchownat(AT_FDCWD, path, -1, -1, 0): the ids are its third and
	 * fourth arguments */
	snprintf(text, sizeof(text),
		 "%ld 0xffffff9c 0x5601 0xffffffff 0xffffffff 0x0 0x0 0x1 0x2\n",
		 (long)SYS_fchownat);
	assert_int_equal(proc_syscall_chown_none(text), 1);
	snprintf(text, sizeof(text), "%ld 0xffffff9c 0x5601 0x0 0xffffffff 0x0 0x0 0x1 0x2\n",
		 (long)SYS_fchownat);
	assert_int_equal(proc_syscall_chown_none(text), 0);
#ifdef SYS_chown
	/* chown(path, 0, -1) names an owner: another call */
	snprintf(text, sizeof(text), "%ld 0x5601 0x0 0xffffffff 0x0 0x0 0x0 0x1 0x2",
		 (long)SYS_chown);
	assert_int_equal(proc_syscall_chown_none(text), 0);
	snprintf(text, sizeof(text), "%ld 0x5601 0xffffffff 0xffffffff 0x0 0x0 0x0 0x1 0x2",
		 (long)SYS_chown);
	assert_int_equal(proc_syscall_chown_none(text), 1);
#endif
	/* the write path's empty change comes from write(2) and its kin */
	snprintf(text, sizeof(text), "%ld 0x3 0x5601 0x1000 0x0 0x0 0x0 0x1 0x2\n",
		 (long)SYS_write);
	assert_int_equal(proc_syscall_chown_none(text), 0);
	snprintf(text, sizeof(text), "%ld 0x3 0x0 0x0 0x1000 0x0 0x0 0x1 0x2", (long)SYS_fallocate);
	assert_int_equal(proc_syscall_chown_none(text), 0);
	/* a number that only starts like fchown's, and a cut-off line */
	snprintf(text, sizeof(text), "%ld7 0x3 0xffffffff 0xffffffff\n", (long)SYS_fchown);
	assert_int_equal(proc_syscall_chown_none(text), 0);
	snprintf(text, sizeof(text), "%ld 0x3 0xffffffff", (long)SYS_fchown);
	assert_int_equal(proc_syscall_chown_none(text), 0);
	/* no call to read: not yet asleep, asleep outside a call, nothing */
	assert_int_equal(proc_syscall_chown_none("running\n"), -1);
	assert_int_equal(proc_syscall_chown_none("-1 0x7ffc4b1a0e58 0x7f1e2d3c4b5a\n"), -1);
	assert_int_equal(proc_syscall_chown_none(""), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_caps),
	    cmocka_unit_test(test_groups),
	    cmocka_unit_test(test_syscall),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
