/* The /proc/PID/status fields the mount daemon reads for root's reserve
 * (lib/util/procstatus.c), on texts written here: this machine's own
 * processes cannot hold CAP_SYS_RESOURCE (it is off their bounding set). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_caps),
	    cmocka_unit_test(test_groups),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
