/* Fuzz target "mountopt": fstitch-mount's -o parser and the size and time
 * parsers behind it.  The input is split at NUL bytes into up to four -o
 * arguments, parsed in turn as the command line would; the first also goes
 * to each value parser.  Results are checked where the contract is exact.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/mountopt.h"
#include "util/size.h"
#include "fuzz.h"

/* A violated contract: abort so that the fuzzer reports it. */
#define CHECK(x) ((x) ? (void)0 : abort())

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mountopt mo;
	struct mountopt_error err;
	struct mountopt_ratelimit rl = { .burst = 3, .window_ms = 1000 };
	char *s, *p, *fs = NULL, buf[32];
	uint64_t v, units[] = { 1, 512, 1024, 4096 };
	unsigned ms, i;
	int r;

	if (size > 4096)
		return 0;
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;

	v = 0;
	r = size_parse(s, units[size % 4], &v);
	CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
	size_format(v, buf, sizeof(buf));
	CHECK(strlen(buf) < sizeof(buf));
	size_format(v, buf, 5);
	CHECK(strlen(buf) < 5);
	r = mountopt_parse_size(s, &v);
	CHECK(r == 0 || r == -EINVAL);
	r = mountopt_parse_seconds(s, &ms);
	CHECK(r == 0 || r == -EINVAL);
	if (r == 0)
		CHECK(ms > 0 && ms <= MOUNTOPT_FLUSH_MAX_MS);

	mountopt_init(&mo);
	p = s;
	for (i = 0; i < 4 && p <= s + size; i++) {
		memset(&err, 0, sizeof(err));
		r = mountopt_parse(&mo, p, &err);
		CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
		if (r == -EINVAL) {
			CHECK(err.kind != MOUNTOPT_OK);
			CHECK(memchr(err.name, 0, sizeof(err.name)));
			CHECK(memchr(err.value, 0, sizeof(err.value)));
			break;
		}
		p += strlen(p) + 1;
	}
	if (r == 0) {
		if (mo.cache_bytes)
			CHECK(mo.cache_bytes >= MOUNTOPT_CACHE_MIN &&
			      mo.cache_bytes <= MOUNTOPT_CACHE_MAX);
		CHECK(mo.max_threads <= MOUNTOPT_THREADS_MAX);
		mountopt_cache_blocks(&mo, 1024);
		mountopt_cache_blocks(&mo, 4096);
		/* The rest of the input as the fsname, commas and all. */
		r = mountopt_fuse_string(&mo, p <= s + size ? p : "", &fs);
		CHECK(r == 0 || r == -ENOMEM);
		free(fs);
	}
	mountopt_free(&mo);
	for (i = 0; i < size && i < 16; i++)
		mountopt_ratelimit(&rl, (uint64_t)data[i] * 100, &v);
	free(s);
	return 0;
}
