/* Undo bytes of soft byte patches: what a patch's range held before it,
 * written back over a copy of the block when the patch is rolled back.
 *
 * Most undo on a new file system is zeros: an unused inode, the free end
 * of a directory block.  So undo comes in three forms, told apart by the
 * pointer (patch->undo):
 *
 *   - zero_undo itself: every byte was zero.  Shared, never written, and
 *     counted as no memory.
 *   - a pointer with its low bit set: packed, for bytes that are mostly
 *     zeros (an inode updated after its initialisation had reached disk
 *     keeps only its times and a few counts).  Runs of
 *     (zeros to skip, bytes to copy, the bytes), each count a varint of
 *     7 bits per byte, until the patch's length is covered.
 *   - otherwise a plain copy of the bytes.
 *
 * The form is chosen when the undo is taken and never changes: readers
 * go through undo_read(), and undo_size() is the memory it holds, so the
 * undo_bytes and engine memory figures go up and down by the same amount.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cache_int.h"

uint8_t zero_undo[65536];

/* A run of zeros shorter than this is copied rather than skipped: each
 * run costs two counts, and a memset and a memcpy at every rollback (with
 * 3 instead, rollback-heavy chains of groups flushed 11% slower in
 * engine_bench, for 1% less undo). */
#define UNDO_GAP 8

static bool all_zero(const uint8_t *p, size_t n)
{
	return memcmp(p, zero_undo, n) == 0;
}

static size_t varint_len(size_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint8_t *varint_put(uint8_t *o, size_t v)
{
	while (v >= 0x80) {
		*o++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*o++ = (uint8_t)v;
	return o;
}

static const uint8_t *varint_get(const uint8_t *i, size_t *v)
{
	size_t r = 0;
	unsigned sh = 0;

	do {
		r |= (size_t)(*i & 0x7f) << sh;
		sh += 7;
	} while (*i++ & 0x80);
	*v = r;
	return i;
}

/* The end of the run of bytes to copy that starts at i (a nonzero byte):
 * up to the next UNDO_GAP zeros in a row, or the end. */
static size_t run_end(const uint8_t *d, size_t i, size_t len)
{
	size_t z = 0;

	for (; i < len; i++) {
		z = d[i] ? 0 : z + 1;
		if (z == UNDO_GAP)
			return i + 1 - z;
	}
	return len - z;
}

/* Walk d's runs: the packed size, and the packing itself into out unless
 * out is NULL. */
static size_t pack(const uint8_t *d, size_t len, uint8_t *out)
{
	size_t i = 0, size = 0, skip, e;

	while (i < len) {
		for (skip = 0; i + skip < len && !d[i + skip]; skip++)
			;
		size += varint_len(skip);
		if (out)
			out = varint_put(out, skip);
		i += skip;
		if (i == len)
			break;
		e = run_end(d, i, len);
		size += varint_len(e - i) + (e - i);
		if (out) {
			out = varint_put(out, e - i);
			memcpy(out, d + i, e - i);
			out += e - i;
		}
		i = e;
	}
	return size;
}

static bool is_packed(const uint8_t *u)
{
	return (uintptr_t)u & 1;
}

static const uint8_t *unpacked(const uint8_t *u)
{
	return (const uint8_t *)((uintptr_t)u & ~(uintptr_t)1);
}

uint8_t *undo_take(struct cache *c, const uint8_t *d, uint32_t len)
{
	size_t size;
	uint8_t *u;

	if (all_zero(d, len))
		return zero_undo;
	size = pack(d, len, NULL);
	if (size <= len / 2) {
		u = malloc(size);
		if (!u)
			return NULL;
		pack(d, len, u);
		c->st.undo_bytes += size;
		stats_engine(c, (int64_t)size);
		return (uint8_t *)((uintptr_t)u | 1);
	}
	u = malloc(len);
	if (!u)
		return NULL;
	memcpy(u, d, len);
	c->st.undo_bytes += len;
	stats_engine(c, len);
	return u;
}

/* Walk the packed undo at i of a len-byte range: the bytes it covers go
 * to out unless out is NULL; returns the end of the packing. */
static const uint8_t *unpack(const uint8_t *i, size_t len, uint8_t *out)
{
	size_t pos = 0, v;

	while (pos < len) {
		i = varint_get(i, &v);
		if (out)
			memset(out + pos, 0, v);
		pos += v;
		if (pos == len)
			break;
		i = varint_get(i, &v);
		if (out)
			memcpy(out + pos, i, v);
		i += v;
		pos += v;
	}
	return i;
}

size_t undo_size(const struct patch *p)
{
	if (!patch_has_undo(p) || undo_shared(p))
		return 0;
	if (!is_packed(p->undo))
		return patch_len(p);
	return (size_t)(unpack(unpacked(p->undo), patch_len(p), NULL) - unpacked(p->undo));
}

void undo_read(const struct patch *p, uint8_t *out)
{
	size_t len = patch_len(p);

	if (undo_shared(p))
		memset(out, 0, len);
	else if (!is_packed(p->undo))
		memcpy(out, p->undo, len);
	else
		unpack(unpacked(p->undo), len, out);
}

int undo_replace(struct cache *c, struct patch *p, uint8_t *w, uint32_t len)
{
	uint8_t *u = undo_take(c, w, len);

	free(w);
	if (!u)
		return -ENOMEM;
	free_undo(c, p);
	p->undo = u;
	return 0;
}

void undo_release(uint8_t *u)
{
	if (u != zero_undo)
		free((void *)unpacked(u));
}

void free_undo(struct cache *c, struct patch *p)
{
	size_t size = undo_size(p);

	if (!patch_has_undo(p))
		return;
	c->st.undo_bytes -= size;
	stats_engine(c, -(int64_t)size);
	undo_release(p->undo);
	p->undo = NULL;
}
