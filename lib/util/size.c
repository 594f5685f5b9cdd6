/* Size parsing and formatting; see size.h. */
#include "size.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>

static int suffix_shift(char c)
{
	switch (tolower((unsigned char)c)) {
	case 'k':
		return 10;
	case 'm':
		return 20;
	case 'g':
		return 30;
	case 't':
		return 40;
	default:
		return -1;
	}
}

int size_parse(const char *s, uint64_t unit, uint64_t *bytes)
{
	uint64_t n = 0, mult;
	const char *p;
	int shift;

	if (!s || unit == 0 || !isdigit((unsigned char)*s))
		return -EINVAL;
	/* Digits by hand: strtoull accepts a sign, spaces and hex, none of
	 * which belong in a size, and cannot tell "too big" apart cleanly. */
	for (p = s; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (n > (UINT64_MAX - d) / 10)
			return -ERANGE;
		n = n * 10 + d;
	}
	if (*p == '\0') {
		mult = unit;
	} else {
		shift = suffix_shift(*p);
		if (shift < 0 || p[1] != '\0')
			return -EINVAL;
		mult = UINT64_C(1) << shift;
	}
	if (n != 0 && mult > UINT64_MAX / n)
		return -ERANGE;
	*bytes = n * mult;
	return 0;
}

char *size_format(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	unsigned i = 0;
	uint64_t div = 1024;

	if (len == 0)
		return buf;
	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (i + 1 < sizeof(units) - 1 && bytes / div >= 1024) {
		div *= 1024;
		i++;
	}
	snprintf(buf, len, "%.1f %ciB", (double)bytes / (double)div, units[i]);
	return buf;
}
