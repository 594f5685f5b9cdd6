/* Size parsing and formatting (lib/util/size.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/size.h"

#define SENTINEL UINT64_C(0xdeadbeefcafef00d)

/* Parse s with unit and return the result, asserting success. */
static uint64_t ok(const char *s, uint64_t unit)
{
	uint64_t v = SENTINEL;

	assert_int_equal(size_parse(s, unit, &v), 0);
	return v;
}

/* Assert that s fails with err and leaves the output alone. */
static void bad(const char *s, uint64_t unit, int err)
{
	uint64_t v = SENTINEL;

	assert_int_equal(size_parse(s, unit, &v), err);
	assert_true(v == SENTINEL);
}

static void test_plain_numbers_use_the_unit(void **state)
{
	assert_true(ok("0", 1) == 0);
	assert_true(ok("1", 1) == 1);
	assert_true(ok("4096", 1) == 4096);
	assert_true(ok("4096", 1024) == 4096 * 1024);
	assert_true(ok("3000", 4096) == 3000 * 4096);
	assert_true(ok("007", 1) == 7);
}

static void test_suffixes_are_powers_of_1024_in_any_case(void **state)
{
	assert_true(ok("1K", 1) == 1024);
	assert_true(ok("1k", 1) == 1024);
	assert_true(ok("16M", 1) == 16 * 1024 * 1024);
	assert_true(ok("16m", 1) == 16 * 1024 * 1024);
	assert_true(ok("2G", 1) == UINT64_C(2) << 30);
	assert_true(ok("2g", 1) == UINT64_C(2) << 30);
	assert_true(ok("3T", 1) == UINT64_C(3) << 40);
	assert_true(ok("3t", 1) == UINT64_C(3) << 40);
	assert_true(ok("0K", 1) == 0);
}

static void test_a_suffix_ignores_the_unit(void **state)
{
	/* mke2fs: "8M" is 8 MiB whatever the block size. */
	assert_true(ok("8M", 4096) == 8 * 1024 * 1024);
	assert_true(ok("8M", 1024) == 8 * 1024 * 1024);
}

static void test_rejects_what_is_not_a_size(void **state)
{
	static const char *const cases[] = {
	    "",	    "K",    "-1",  "+1",  " 1",	   "1 ",   "1KB", "1KiB", "1Q",
	    "1.5M", "0x10", "1e3", "8M8", "1,000", "12 M", "\t5", "1P",	  "M1",
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = SENTINEL;
		int ret = size_parse(cases[i], 1, &v);

		if (ret != -EINVAL)
			fail_msg("size_parse(\"%s\") returned %d, not -EINVAL", cases[i], ret);
		assert_true(v == SENTINEL);
	}
	bad(NULL, 1, -EINVAL);
	bad("5", 0, -EINVAL);
}

static void test_overflow_is_erange_not_wraparound(void **state)
{
	char buf[32];

	/* the largest value, then one more */
	assert_true(ok("18446744073709551615", 1) == UINT64_MAX);
	bad("18446744073709551616", 1, -ERANGE);
	bad("99999999999999999999999", 1, -ERANGE);
	/* in range as digits, out of range once multiplied */
	bad("16777216T", 1, -ERANGE);
	assert_true(ok("16777215T", 1) == UINT64_C(16777215) << 40);
	bad("18446744073709551615", 2, -ERANGE);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(UINT64_MAX / 1024));
	assert_true(ok(buf, 1024) == (UINT64_MAX / 1024) * 1024);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(UINT64_MAX / 1024 + 1));
	bad(buf, 1024, -ERANGE);
}

static void test_format_picks_a_readable_unit(void **state)
{
	char buf[32];

	assert_string_equal(size_format(0, buf, sizeof(buf)), "0 B");
	assert_string_equal(size_format(1023, buf, sizeof(buf)), "1023 B");
	assert_string_equal(size_format(1024, buf, sizeof(buf)), "1.0 KiB");
	assert_string_equal(size_format(40 * 1024, buf, sizeof(buf)), "40.0 KiB");
	assert_string_equal(size_format(1536 * 1024, buf, sizeof(buf)), "1.5 MiB");
	assert_string_equal(size_format(UINT64_C(2) << 30, buf, sizeof(buf)), "2.0 GiB");
	assert_string_equal(size_format(UINT64_C(3) << 40, buf, sizeof(buf)), "3.0 TiB");
	assert_string_equal(size_format(UINT64_MAX, buf, sizeof(buf)), "16.0 EiB");
}

static void test_format_truncates_to_the_buffer(void **state)
{
	char buf[4] = "xyz";

	assert_string_equal(size_format(1536 * 1024, buf, sizeof(buf)), "1.5");
	/* len 0: nothing written at all */
	memcpy(buf, "xyz", 4);
	size_format(1024, buf, 0);
	assert_string_equal(buf, "xyz");
}

static void test_format_and_parse_agree_on_whole_units(void **state)
{
	static const char *const cases[] = {"1K", "8M", "2G", "3T"};
	char buf[32], want[32];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(want, sizeof(want), "%c.0 %ciB", cases[i][0], cases[i][1]);
		assert_string_equal(size_format(ok(cases[i], 1), buf, sizeof(buf)), want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plain_numbers_use_the_unit),
	    cmocka_unit_test(test_suffixes_are_powers_of_1024_in_any_case),
	    cmocka_unit_test(test_a_suffix_ignores_the_unit),
	    cmocka_unit_test(test_rejects_what_is_not_a_size),
	    cmocka_unit_test(test_overflow_is_erange_not_wraparound),
	    cmocka_unit_test(test_format_picks_a_readable_unit),
	    cmocka_unit_test(test_format_truncates_to_the_buffer),
	    cmocka_unit_test(test_format_and_parse_agree_on_whole_units),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
