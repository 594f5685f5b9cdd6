/* The crash states of a recorder log, numbered, and rebuilt into an image
 * file one after another (fstitch-crash; design.md §3, crash model).
 *
 * A crash leaves every completed round on disk (a round is the writes
 * between two barriers) plus any subset of the round in flight.  The plan
 * numbers those states once, in log order:
 *
 *   for each round r (including a last round with no closing barrier):
 *     the boundary: rounds < r complete, nothing of round r;
 *     then the proper non-empty subsets of round r: all of them (in binary
 *     counting order) when the round has at most `exhaustive` writes, else
 *     `samples` distinct subsets drawn from a generator seeded with
 *     (seed, r);
 *   and last the final state: every round complete.
 *
 * A state's number depends only on the log, `exhaustive`, `samples` and
 * `seed`, so the same log and settings always give the same states in the
 * same order.  `max` then selects at most that many of them: every
 * boundary first (as many as fit, the final state always), the rest drawn
 * with the same seed, kept in state order.
 */
#ifndef FSTITCH_CRASHPLAN_H
#define FSTITCH_CRASHPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct crash_plan_opts {
	unsigned exhaustive; /* 0 means 4; at most 20 */
	unsigned samples;    /* 0 means 16 */
	uint64_t seed;
	size_t max; /* 0 means every state */
};

struct crash_plan_state {
	size_t state;	 /* its number in the model */
	size_t round;	 /* the round in flight */
	size_t nround;	 /* writes in that round */
	size_t napplied; /* how many of them are on disk */
	bool boundary;	 /* napplied == 0, or the final state */
};

struct crash_plan;

/* Load the log at logpath and number its states.  0, -EPROTO for a file
 * that is not a recorder log, -ENOMEM, or another -errno from reading it.
 * The caller frees *out with crash_plan_free(). */
int crash_plan_open(const char *logpath, const struct crash_plan_opts *o, struct crash_plan **out);
void crash_plan_free(struct crash_plan *p);

/* The states the model gives (before max), the selected ones, rounds,
 * barriers and writes in the log, the image size in bytes, and the
 * effective options (defaults filled in). */
size_t crash_plan_total(const struct crash_plan *p);
size_t crash_plan_count(const struct crash_plan *p);
size_t crash_plan_rounds(const struct crash_plan *p);
size_t crash_plan_barriers(const struct crash_plan *p);
size_t crash_plan_writes(const struct crash_plan *p);
uint64_t crash_plan_image_bytes(const struct crash_plan *p);
struct crash_plan_opts crash_plan_options(const struct crash_plan *p);

/* The i-th selected state (i < crash_plan_count()). */
void crash_plan_selected(const struct crash_plan *p, size_t i, struct crash_plan_state *out);
/* Model state n (n < crash_plan_total()): 0 or -ERANGE. */
int crash_plan_state(const struct crash_plan *p, size_t n, struct crash_plan_state *out);

/* A cursor keeps one image file in a crash state and moves it to another
 * by writing only the blocks that differ: going forward costs the blocks
 * the log wrote in between, never a copy of the whole image (except going
 * backwards, or after crash_cursor_invalidate()). */
struct crash_cursor;

/* Create (or truncate) the image file path.  0 or -errno; the caller
 * frees *out with crash_cursor_free(), which leaves the file. */
int crash_cursor_open(const struct crash_plan *p, const char *path, struct crash_cursor **out);
void crash_cursor_free(struct crash_cursor *c);
/* Make the file hold model state n.  0, -ERANGE, or -errno of a write. */
int crash_cursor_seek(struct crash_cursor *c, size_t n);
/* Someone else changed the file (e2fsck repaired it, a check wrote to it):
 * read it back and rewrite the blocks that differ from the state it held,
 * so that the next seek can again write only what differs.  0 or -errno. */
int crash_cursor_resync(struct crash_cursor *c);
/* The file's contents are unknown: the next seek rewrites it whole. */
void crash_cursor_invalidate(struct crash_cursor *c);
/* Blocks written to the file so far, and how many full rewrites. */
uint64_t crash_cursor_blocks_written(const struct crash_cursor *c);
uint64_t crash_cursor_full_writes(const struct crash_cursor *c);

#endif
