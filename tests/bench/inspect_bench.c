/* How long fstitch-stat's snapshot holds the cache lock, as the patch graph
 * grows (lib/inspect/inspect.c): the summary and the bounded views must not grow
 * with the cache; finding befores (--patches, --why) scans every live patch
 * once per step and does.
 *
 *   inspect_bench [--sizes N,N,...] [--runs R]
 *
 * The graph: `layers` patches per block over N/layers blocks; the patch of
 * layer L on block j waits for the one of layer L-1 on block j+1, and the
 * first layer waits for one held empty patch, so every block waits.  One
 * more block (the tip) waits for the last layer, so its why-chain scans
 * the patches `layers` + 1 times.  Prints a table (times in microseconds,
 * median of R runs, each a whole inspect_take()).
 * Exit status: 0 done, 1 failed, 64 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bdev/bdev.h"
#include "engine/cache.h"
#include "inspect/inspect.h"

#define BS     512
#define LAYERS 4

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_take(struct cache *c, uint32_t view, uint64_t block, int runs, size_t *items)
{
	struct insp_query q = {.view = view, .limit = 64, .block = block};
	double *t = calloc((size_t)runs, sizeof(*t)), m;
	struct insp_snap *s;
	int i;

	for (i = 0; i < runs; i++) {
		double t0 = now_us();

		if (inspect_take(c, NULL, &q, &s)) {
			fprintf(stderr, "inspect_bench: inspect_take failed\n");
			exit(1);
		}
		t[i] = now_us() - t0;
		*items = s->nblocks + s->npatches;
		inspect_free(s);
	}
	qsort(t, (size_t)runs, sizeof(*t), cmp_double);
	m = t[runs / 2];
	free(t);
	return m;
}

static int run(size_t npatches, int runs)
{
	size_t nblocks = npatches / LAYERS, l, j;
	struct cache_opts o = {.max_blocks = nblocks + 16, .dirty_limit = nblocks + 16};
	struct patch **prev, **cur, *held;
	struct cache_stats st;
	struct bdev *mem;
	struct cache *c;
	uint8_t data[16];
	size_t items;

	struct patch *tip;
	struct cblock *tb;

	if (bdev_mem_create(BS, nblocks + 1, NULL, 0, &mem) || cache_create(mem, &o, &c))
		return -ENOMEM;
	prev = calloc(nblocks, sizeof(*prev));
	cur = calloc(nblocks, sizeof(*cur));
	if (!prev || !cur || patch_create_empty_held(c, NULL, 0, &held))
		return -ENOMEM;
	memset(data, 0xa5, sizeof(data));
	for (l = 0; l < LAYERS; l++) {
		for (j = 0; j < nblocks; j++) {
			struct patch *dep = l ? prev[(j + 1) % nblocks] : held;
			struct cblock *b;

			if (cache_get(c, j, &b) ||
			    patch_create_byte(c, b, (uint32_t)(l * 32), sizeof(data), data, &dep, 1,
					      NULL, &cur[j]))
				return -EIO;
			cache_put(c, b);
		}
		for (j = 0; l && j < nblocks; j++)
			patch_release(c, prev[j]);
		memcpy(prev, cur, nblocks * sizeof(*prev));
	}
	if (cache_get(c, nblocks, &tb) ||
	    patch_create_byte(c, tb, 0, sizeof(data), data, &prev[0], 1, NULL, &tip))
		return -EIO;
	cache_put(c, tb);
	cache_get_stats(c, &st);
	printf("| %8zu | %8llu | %7zu |", npatches,
	       (unsigned long long)(st.patches_byte + st.patches_empty), nblocks);
	printf(" %8.1f |", median_take(c, INSP_SUMMARY, 0, runs, &items));
	printf(" %8.1f |", median_take(c, INSP_BLOCKS, 0, runs, &items));
	printf(" %8.1f |", median_take(c, INSP_GRAPH, 0, runs, &items));
	printf(" %9.1f |", median_take(c, INSP_PATCHES, nblocks / 2, runs, &items));
	printf(" %9.1f |", median_take(c, INSP_WHY, nblocks / 2, runs, &items));
	printf(" %9.1f |\n", median_take(c, INSP_WHY, nblocks, runs, &items));
	fflush(stdout);
	for (j = 0; j < nblocks; j++)
		patch_release(c, prev[j]);
	patch_release(c, tip);
	patch_unhold(c, held);
	patch_release(c, held);
	free(prev);
	free(cur);
	cache_destroy(c);
	bdev_destroy(mem);
	return 0;
}

int main(int argc, char **argv)
{
	const char *sizes = "10000,100000,1000000";
	int runs = 11, i;
	char *list, *tok, *save;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
			sizes = argv[++i];
		} else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--quick")) {
			sizes = "10000,100000";
			runs = 5;
		} else {
			fprintf(stderr,
				"usage: inspect_bench [--sizes N,N,...] [--runs R] [--quick]\n");
			return 64;
		}
	}
	if (runs < 1) {
		fprintf(stderr, "inspect_bench: --runs must be at least 1\n");
		return 64;
	}
	printf("Snapshot time (us, median of %d) vs patch graph size; limit 64; "
	       "why: a 1-step chain, why tip: a %d-step chain\n\n",
	       runs, LAYERS + 1);
	printf("| patches  | live     | blocks  | summary  | blocks   | graph    | patches   | why "
	       "      | why tip   |\n");
	printf("|----------|----------|---------|----------|----------|----------|-----------|-----"
	       "------|-----------|\n");
	list = strdup(sizes);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long n = atol(tok);

		if (n < LAYERS * 2 || run((size_t)n, runs)) {
			fprintf(stderr, "inspect_bench: cannot run size '%s'\n", tok);
			free(list);
			return 1;
		}
	}
	free(list);
	return 0;
}
