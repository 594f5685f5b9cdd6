/* Size parsing and formatting; see size.h. */
#include "size.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

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

/* The leading digits of s into *n and the rest into *end: -EINVAL if s
 * does not start with a digit, -ERANGE past 64 bits. */
static int digits(const char *s, uint64_t *n, const char **end)
{
	const char *p;
	uint64_t v = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	/* Digits by hand: strtoull accepts a sign, spaces and hex, none of
	 * which belong on these command lines, and cannot tell "too big"
	 * apart cleanly. */
	for (p = s; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10) {
			/* still -EINVAL if what follows is junk */
			while (isdigit((unsigned char)*p))
				p++;
			*end = p;
			return -ERANGE;
		}
		v = v * 10 + d;
	}
	*n = v;
	*end = p;
	return 0;
}

int size_parse_flags(const char *s, uint64_t unit, unsigned flags, uint64_t *bytes)
{
	uint64_t n = 0, mult;
	const char *p;
	int shift, r;

	if (unit == 0)
		return -EINVAL;
	r = digits(s, &n, &p);
	if (r == -EINVAL)
		return r;
	if (*p == '\0') {
		mult = unit;
	} else {
		shift = suffix_shift(*p);
		if (shift < 0)
			return -EINVAL;
		p++;
		if ((flags & SIZE_PARSE_B) &&
		    (strcmp(p, "B") == 0 || strcmp(p, "b") == 0 || strcmp(p, "iB") == 0))
			p += strlen(p);
		if (*p != '\0')
			return -EINVAL;
		mult = UINT64_C(1) << shift;
	}
	if (r < 0)
		return r;
	if (n != 0 && mult > UINT64_MAX / n)
		return -ERANGE;
	*bytes = n * mult;
	return 0;
}

int size_parse(const char *s, uint64_t unit, uint64_t *bytes)
{
	return size_parse_flags(s, unit, 0, bytes);
}

int num_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *p;
	uint64_t n = 0;
	int r = digits(s, &n, &p);

	if (r == -EINVAL || *p != '\0')
		return -EINVAL;
	if (r < 0 || n < min || n > max)
		return -ERANGE;
	*out = n;
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
