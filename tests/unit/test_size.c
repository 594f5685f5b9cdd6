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

/* The one parser for plain numbers: ids, counts, descriptors, threads. */
static void test_num_parse_takes_digits_within_bounds(void **state)
{
	static const char *const junk[] = {
	    "", "-1", "+1", " 1", "1 ", "0x10", "1e3", "1.0", "1K", "12a", "\t5", "1,000",
	};
	uint64_t v = SENTINEL;
	size_t i;

	assert_int_equal(num_parse("0", 0, 10, &v), 0);
	assert_true(v == 0);
	assert_int_equal(num_parse("1024", 1, 1024, &v), 0);
	assert_true(v == 1024);
	/* leading zeros are decimal, not octal */
	assert_int_equal(num_parse("010", 0, 100, &v), 0);
	assert_true(v == 10);
	assert_int_equal(num_parse("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_true(v == UINT64_MAX);
	v = SENTINEL;
	/* out of bounds: -ERANGE, and nothing written */
	assert_int_equal(num_parse("0", 1, 10, &v), -ERANGE);
	assert_int_equal(num_parse("1025", 1, 1024, &v), -ERANGE);
	assert_int_equal(num_parse("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	assert_true(v == SENTINEL);
	/* not a number: -EINVAL, even when it is also too big */
	for (i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		int ret = num_parse(junk[i], 0, UINT64_MAX, &v);

		if (ret != -EINVAL)
			fail_msg("num_parse(\"%s\") returned %d, not -EINVAL", junk[i], ret);
	}
	assert_int_equal(num_parse("99999999999999999999x", 0, UINT64_MAX, &v), -EINVAL);
	assert_int_equal(num_parse(NULL, 0, 1, &v), -EINVAL);
	assert_true(v == SENTINEL);
}

/* SIZE_PARSE_B: "MiB", "GB" after a suffix, as mount options write them;
 * never a bare "B" and never without the flag. */
static void test_size_parse_b_suffix(void **state)
{
	uint64_t v = SENTINEL;

	assert_int_equal(size_parse_flags("256MiB", 1, SIZE_PARSE_B, &v), 0);
	assert_true(v == UINT64_C(256) << 20);
	assert_int_equal(size_parse_flags("2GB", 1, SIZE_PARSE_B, &v), 0);
	assert_true(v == UINT64_C(2) << 30);
	assert_int_equal(size_parse_flags("2gb", 1, SIZE_PARSE_B, &v), 0);
	assert_int_equal(size_parse_flags("4096", 1, SIZE_PARSE_B, &v), 0);
	assert_true(v == 4096);
	v = SENTINEL;
	assert_int_equal(size_parse_flags("5B", 1, SIZE_PARSE_B, &v), -EINVAL);
	assert_int_equal(size_parse_flags("5MiBs", 1, SIZE_PARSE_B, &v), -EINVAL);
	assert_int_equal(size_parse_flags("5Mib", 1, SIZE_PARSE_B, &v), -EINVAL);
	assert_int_equal(size_parse_flags("256MiB", 1, 0, &v), -EINVAL);
	assert_int_equal(size_parse_flags("16777216TiB", 1, SIZE_PARSE_B, &v), -ERANGE);
	assert_true(v == SENTINEL);
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
	    cmocka_unit_test(test_num_parse_takes_digits_within_bounds),
	    cmocka_unit_test(test_size_parse_b_suffix),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
