/* Growing arrays by doubling (lib/util/grow.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include "util/grow.h"

static void test_grows_from_first_by_doubling(void **state)
{
	int *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(GROW(&v, &cap, 1, 8), 0);
	assert_int_equal(cap, 8);
	assert_int_equal(GROW(&v, &cap, 8, 8), 0);
	assert_int_equal(cap, 8); /* room already */
	assert_int_equal(GROW(&v, &cap, 9, 8), 0);
	assert_int_equal(cap, 16);
	assert_int_equal(GROW(&v, &cap, 100, 8), 0);
	assert_int_equal(cap, 128);
	free(v);
}

static void test_keeps_contents(void **state)
{
	int *v = NULL;
	size_t cap = 0, i;

	(void)state;
	for (i = 0; i < 1000; i++) {
		assert_int_equal(GROW(&v, &cap, i + 1, 4), 0);
		v[i] = (int)i * 3;
	}
	for (i = 0; i < 1000; i++)
		assert_int_equal(v[i], (int)i * 3);
	free(v);
}

static void test_overflow_leaves_the_array_alone(void **state)
{
	uint64_t *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(GROW(&v, &cap, 4, 4), 0);
	v[3] = 42;
	assert_int_equal(GROW(&v, &cap, SIZE_MAX / 4, 4), -EOVERFLOW);
	assert_int_equal(cap, 4);
	assert_int_equal(v[3], 42);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_grows_from_first_by_doubling),
	    cmocka_unit_test(test_keeps_contents),
	    cmocka_unit_test(test_overflow_leaves_the_array_alone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
