/* Fuzz target "journal": the fuzzer's bytes are the first blocks of a JBD2
 * journal (1 KiB blocks; the rest of its 1024 blocks are zero) that sits
 * after a 3 MiB "file system" on a memory device.  Open, check and replay
 * it (journal/jbd2.c) and hold it to its contract:
 *   - every call ends in 0, -EUCLEAN or -EOPNOTSUPP;
 *   - a refused replay writes nothing at all;
 *   - a replay writes only file system blocks and the journal superblock,
 *     after which the journal opens again, empty, with nothing to replay.
 * FUZZ_JOURNAL_VERBOSE=1 prints each outcome (to see what a seed does).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bdev/bdev.h"
#include "journal/jbd2.h"
#include "fuzz.h"

#define BS	  1024u
#define FS_BLOCKS 3072u
#define JLEN	  JBD2_MIN_BLOCKS
#define MAX_IN	  (64u * BS)

/* A violated contract: abort so that the fuzzer reports it. */
#define CHECK(x) ((x) ? (void)0 : abort())

static bool refusal(int r)
{
	return r == -EUCLEAN || r == -EOPNOTSUPP;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint64_t map[JLEN];
	size_t devlen = (size_t)(FS_BLOCKS + JLEN) * BS;
	struct jbd2_recovery rec;
	struct jbd2 *j;
	struct bdev *mem;
	uint8_t *img, *now;
	char err[256];
	int r;

	if (size > MAX_IN)
		return 0;
	for (uint32_t i = 0; i < JLEN; i++)
		map[i] = FS_BLOCKS + i;
	img = calloc(1, devlen);
	if (!img)
		return 0;
	for (uint32_t b = 0; b < FS_BLOCKS; b++)
		memset(img + (size_t)b * BS, (int)b, BS);
	memcpy(img + (size_t)FS_BLOCKS * BS, data, size);
	if (bdev_mem_create(BS, 0, img, devlen, &mem)) {
		free(img);
		return 0;
	}
	now = bdev_mem_data(mem);
	r = jbd2_open(mem, map, JLEN, FS_BLOCKS, &j, err, sizeof(err));
	if (r) {
		if (getenv("FUZZ_JOURNAL_VERBOSE"))
			fprintf(stderr, "# %s\n", err);
		CHECK(refusal(r));
		goto out;
	}
	r = jbd2_recover(j, &rec, err, sizeof(err));
	jbd2_close(j);
	if (getenv("FUZZ_JOURNAL_VERBOSE"))
		fprintf(stderr, "# %s\n", r ? err : "replayed");
	if (getenv("FUZZ_JOURNAL_VERBOSE") && !r)
		fprintf(stderr, "# transactions %u..%u, %llu blocks, %llu revoked\n", rec.first_tid,
			rec.end_tid, (unsigned long long)rec.blocks,
			(unsigned long long)rec.revoked);
	if (r) {
		CHECK(refusal(r));
		CHECK(memcmp(now, img, devlen) == 0);
		goto out;
	}
	/* the log itself is never written, only its superblock */
	CHECK(memcmp(now + (size_t)(FS_BLOCKS + 1) * BS, img + (size_t)(FS_BLOCKS + 1) * BS,
		     (size_t)(JLEN - 1) * BS) == 0);
	r = jbd2_open(mem, map, JLEN, FS_BLOCKS, &j, err, sizeof(err));
	CHECK(r == 0);
	CHECK(jbd2_is_empty(j));
	r = jbd2_check(j, &rec, err, sizeof(err));
	CHECK(r == 0 && rec.blocks == 0);
	jbd2_close(j);
out:
	bdev_destroy(mem);
	free(img);
	return 0;
}
