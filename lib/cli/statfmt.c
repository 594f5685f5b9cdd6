/* Rendering snapshots: text, JSON and dot (see statfmt.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "engine/pgeng.h"
#include "statfmt.h"

static int done(FILE *f)
{
	return ferror(f) ? -EIO : 0;
}

const char *statfmt_bytes(char *buf, size_t size, uint64_t bytes)
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	int i = -1;

	if (bytes < 1024) {
		snprintf(buf, size, "%" PRIu64 " B", bytes);
		return buf;
	}
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, size, "%.1f %s", v, unit[i]);
	return buf;
}

const char *statfmt_age(char *buf, size_t size, uint64_t ms)
{
	if (ms < 1000)
		snprintf(buf, size, "%" PRIu64 "ms", ms);
	else if (ms < 60000)
		snprintf(buf, size, "%.1fs", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(buf, size, "%" PRIu64 "m%02" PRIu64 "s", ms / 60000, ms / 1000 % 60);
	else
		snprintf(buf, size, "%" PRIu64 "h%02" PRIu64 "m", ms / 3600000, ms / 60000 % 60);
	return buf;
}

static const char *consistency_name(uint32_t c)
{
	return c == CONSISTENCY_SOFTUPDATES    ? "softupdates"
	       : c == CONSISTENCY_NONE	       ? "none"
	       : c == CONSISTENCY_JOURNAL      ? "journal"
	       : c == CONSISTENCY_JOURNAL_DATA ? "journal-data"
					       : "unknown";
}

static const char *type_name(uint32_t t)
{
	return t == INSP_P_BYTE ? "byte" : t == INSP_P_BIT ? "bit" : "empty";
}

static const char *role_name(uint32_t r)
{
	return r == INSP_R_HEAD ? "head" : r == INSP_R_TAIL ? "tail" : "none";
}

/* Engine memory over dirty data, in percent (0 when nothing is dirty).
 * Only for the JSON field that has always meant this: with a few dirty
 * blocks it runs to thousands of percent, because the engine also holds
 * committed patches that cached inodes still refer to. */
static double ratio(const struct insp_summary *m)
{
	return m->st.dirty_bytes ? 100.0 * (double)m->st.engine_bytes / (double)m->st.dirty_bytes
				 : 0.0;
}

/* Engine memory over the memory of the cached blocks, in percent (0 with
 * an empty cache): what the engine adds to the cache's own memory.  The
 * denominator always includes the dirty blocks the patches belong to, so
 * the figure stays meaningful however little is dirty. */
static double cache_ratio(const struct insp_summary *m)
{
	double cached = (double)m->st.blocks_cached * (double)m->block_size;

	return cached > 0 ? 100.0 * (double)m->st.engine_bytes / cached : 0.0;
}

/* "open", "closed,sealed,released", ... */
static const char *group_state(char *buf, size_t size, uint32_t state, uint32_t engaged)
{
	snprintf(buf, size, "%s%s%s%s", (state & PG_ST_CLOSED) ? "closed" : "open",
		 (state & PG_ST_SEALED) ? ",sealed" : "",
		 (state & PG_ST_RELEASED) ? ",released" : "", engaged ? ",engaged" : "");
	return buf;
}

/* ---- text --------------------------------------------------------------- */

/* Milliseconds from nanoseconds. */
static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static double flush_mean_ms(const struct bdev_stats *d)
{
	return d->flushes ? ms(d->flush_ns) / (double)d->flushes : 0.0;
}

static void text_device(FILE *f, const struct bdev_stats *d)
{
	fprintf(f, "%-14s %s; %" PRIu64 " flushes, mean %.3f ms, max %.3f ms",
		"device:", d->kind[0] ? d->kind : "unknown", d->flushes, flush_mean_ms(d),
		ms(d->flush_max_ns));
	if (d->fua_barriers)
		fprintf(f, "; %" PRIu64 " rounds by FUA", d->fua_barriers);
	if (d->reconnects)
		fprintf(f, "; %" PRIu64 " reconnects", d->reconnects);
	fputc('\n', f);
}

static void text_summary(FILE *f, const struct insp_snap *s)
{
	const struct insp_summary *m = &s->sum;
	const struct cache_stats *st = &m->st;
	char a[32], b[32], c[32], d[32];

	fprintf(f, "%-14s consistency %s, flush interval %s, block size %" PRIu32 "\n",
		"mode:", consistency_name(m->consistency),
		statfmt_age(a, sizeof(a), m->flush_interval_ms), m->block_size);
	fprintf(f,
		"%-14s %" PRIu64 " cached, %" PRIu64 " dirty, %" PRIu64 " in flight, %" PRIu64
		" ready (limits: %" PRIu64 " cached, %" PRIu64 " dirty)\n",
		"blocks:", st->blocks_cached, st->blocks_dirty, st->blocks_inflight,
		st->blocks_ready, m->max_blocks, m->dirty_limit);
	fprintf(f, "%-14s %s\n", "oldest dirty:",
		st->blocks_dirty ? statfmt_age(a, sizeof(a), m->oldest_dirty_ms) : "-");
	fprintf(f,
		"%-14s %" PRIu64 " pending; live %" PRIu64 " byte, %" PRIu64 " bit, %" PRIu64
		" empty; %" PRIu64 " hard, %" PRIu64 " soft (%" PRIu64 " without undo)\n",
		"patches:", m->patches_pending, st->patches_byte, st->patches_bit,
		st->patches_empty, st->patches_hard, st->patches_soft, st->patches_nrb);
	fprintf(f,
		"%-14s %" PRIu64 " created, %" PRIu64 " merged, %" PRIu64 " committed, %" PRIu64
		" let their undo go\n",
		"", st->patches_created, st->patches_merged, st->patches_committed,
		st->undo_dropped);
	fprintf(f, "%-14s undo %s, engine %s, dirty data %s, engine/cache %.1f%%\n",
		"memory:", statfmt_bytes(a, sizeof(a), st->undo_bytes),
		statfmt_bytes(b, sizeof(b), st->engine_bytes),
		statfmt_bytes(c, sizeof(c), st->dirty_bytes), cache_ratio(m));
	fprintf(f, "%-14s peak engine %s, peak dirty data %s\n", "",
		statfmt_bytes(a, sizeof(a), st->peak_engine_bytes),
		statfmt_bytes(d, sizeof(d), st->peak_dirty_bytes));
	fprintf(f,
		"%-14s %" PRIu64 " rounds, %" PRIu64 " barriers, %" PRIu64 " block writes, %" PRIu64
		" rollback rewrites (%.1f%%), %" PRIu64 " blocks freed unwritten%s\n",
		"writes:", st->rounds, st->barriers, st->block_writes, st->rollback_writes,
		st->block_writes ? 100.0 * (double)st->rollback_writes / (double)st->block_writes
				 : 0.0,
		st->blocks_discarded, m->round_busy ? ", a round in flight" : "");
	fprintf(f, "%-14s %" PRIu64 " write, %" PRIu64 " barrier; %" PRIu64 " writer waits\n",
		"errors:", st->write_errors, st->barrier_errors, m->dirty_waits);
	text_device(f, &m->dev);
	if (m->have_txn)
		fprintf(f,
			"%-14s transaction %" PRIu64 " running (%" PRIu64 " blocks, %" PRIu64
			" ordered data changes); %" PRIu64 " committing, %" PRIu64 " held, %" PRIu64
			" checkpointing, %" PRIu64 " checkpointed; log %" PRIu64 " of %" PRIu64
			" blocks used; %" PRIu64 " commits, %" PRIu64 " blocks logged\n",
			"journal:", m->txn.running_tid, m->txn.running_blocks,
			m->txn.running_ordered, m->txn.committing, m->txn.held,
			m->txn.checkpointing, m->txn.checkpointed, m->txn.log_used,
			m->txn.log_total, m->txn.commits, m->txn.logged_blocks);
	if (m->have_groups)
		fprintf(f,
			"%-14s %" PRIu64 " known: %" PRIu64 " open, %" PRIu64 " engaged, %" PRIu64
			" sealed, %" PRIu64 " closed%s\n",
			"patchgroups:", m->groups_known, m->groups_open, m->groups_engaged,
			m->groups_sealed, m->groups_closed,
			m->groups_counted < m->groups_known ? " (counts cover the newest only)"
							    : "");
	else
		fprintf(f, "%-14s not served by this mount\n", "patchgroups:");
}

static void text_blocks(FILE *f, const struct insp_snap *s)
{
	char u[32], a[32];
	size_t i;

	if (s->nblocks == 0) {
		fprintf(f, "(no dirty blocks)\n");
		return;
	}
	fprintf(f, "%12s %8s %6s %5s %11s %8s  %s\n", "BLOCK", "PATCHES", "READY", "HARD", "UNDO",
		"AGE", "STATE");
	for (i = 0; i < s->nblocks; i++) {
		const struct insp_block *b = &s->blocks[i];

		fprintf(f, "%12" PRIu64 " %8" PRIu32 " %6" PRIu32 " %5" PRIu32 " %11s %8s  %s%s\n",
			b->blkno, b->npatches, b->nready, b->nhard,
			statfmt_bytes(u, sizeof(u), b->undo_bytes),
			statfmt_age(a, sizeof(a), b->age_ms),
			(b->flags & INSP_B_INFLIGHT) ? "writing"
			: (b->flags & INSP_B_READY)  ? "ready"
						     : "waiting",
			(b->flags & INSP_B_PARTIAL) ? " (counts partial)" : "");
	}
}

static void text_groups(FILE *f, const struct insp_snap *s)
{
	char st[64];
	size_t i;

	if (s->ngroups == 0) {
		fprintf(f, "(no patchgroups)\n");
		return;
	}
	fprintf(f, "%16s %6s  %-26s %7s %7s %6s %8s %8s\n", "ID", "OWNER", "STATE", "ENGAGED",
		"BEFORES", "AFTERS", "CHANGES", "PENDING");
	for (i = 0; i < s->ngroups; i++) {
		const struct insp_group *g = &s->groups[i];

		fprintf(f,
			"%16" PRId64 " %6" PRIu32 "  %-26s %7" PRIu32 " %7" PRIu32 " %6" PRIu32
			" %8" PRIu64 " %8" PRIu64 "\n",
			g->id, g->owner, group_state(st, sizeof(st), g->state, g->engaged),
			g->engaged, g->nbefores, g->nafters, g->nchanges, g->pending);
	}
}

/* "attribute " before "block" for the blocks the file system named */
static const char *kind_name(uint32_t kind)
{
	return kind == CBK_XATTR ? "attribute " : "";
}

/* "#12 byte 0+128 on block 99" / "#7 empty (held, head of group 3)" */
static void describe(char *buf, size_t size, const struct insp_patch *p)
{
	char where[64] = "", extra[96] = "";
	int n;

	/* A hard patch keeps no range: it is never rolled back. */
	if (p->type != INSP_P_EMPTY && (p->flags & INSP_P_HARD))
		snprintf(where, sizeof(where), " on %sblock %" PRIu64, kind_name(p->kind),
			 p->blkno);
	else if (p->type != INSP_P_EMPTY)
		snprintf(where, sizeof(where), " %" PRIu32 "+%" PRIu32 " on %sblock %" PRIu64,
			 p->off, p->len, kind_name(p->kind), p->blkno);
	n = snprintf(extra, sizeof(extra), "%s%s%s", (p->flags & INSP_P_HELD) ? "held" : "",
		     (p->flags & INSP_P_HARD) ? "hard" : "",
		     (p->flags & INSP_P_INFLIGHT)
			 ? (p->flags & INSP_P_HARD ? ", being written" : "being written")
			 : "");
	if (p->group && n < (int)sizeof(extra))
		snprintf(extra + n, sizeof(extra) - (size_t)n, "%s%s of group %" PRId64,
			 n ? ", " : "", role_name(p->role), p->group);
	snprintf(buf, size, "#%" PRIu64 " %s%s%s%s%s", p->seq, type_name(p->type), where,
		 extra[0] ? " (" : "", extra, extra[0] ? ")" : "");
}

static const struct insp_patch *patch_by_seq(const struct insp_snap *s, uint64_t seq)
{
	size_t i;

	for (i = 0; i < s->npatches; i++)
		if (s->patches[i].seq == seq)
			return &s->patches[i];
	return NULL;
}

static void text_patches(FILE *f, const struct insp_snap *s)
{
	char d[192], u[32];
	size_t i, j, n = 0;

	for (i = 0; i < s->npatches; i++)
		n += !!(s->patches[i].flags & INSP_P_TARGET);
	if (n == 0) {
		fprintf(f, "block %" PRIu64 ": no unwritten patches\n", s->block);
		return;
	}
	fprintf(f, "block %" PRIu64 ": %zu unwritten patches\n", s->block, n);
	fprintf(f, "%10s %-6s %-11s %9s %-6s %5s  %s\n", "PATCH", "TYPE", "RANGE", "UNDO", "KIND",
		"WAITS", "WAITS FOR");
	for (i = 0; i < s->npatches; i++) {
		const struct insp_patch *p = &s->patches[i];
		char range[32], id[24];
		bool first = true;

		if (!(p->flags & INSP_P_TARGET))
			continue;
		if (p->flags & INSP_P_HARD)
			snprintf(range, sizeof(range), "-");
		else
			snprintf(range, sizeof(range), "%" PRIu32 "+%" PRIu32, p->off, p->len);
		snprintf(id, sizeof(id), "#%" PRIu64, p->seq);
		fprintf(f, "%10s %-6s %-11s %9s %-6s %5" PRIu32 "  ", id, type_name(p->type), range,
			statfmt_bytes(u, sizeof(u), p->undo_bytes),
			(p->flags & INSP_P_HARD) ? "hard" : "soft", p->npend_ext + p->npend_blk);
		for (j = 0; j < s->nedges; j++) {
			const struct insp_patch *b;

			if (s->edges[j].after != p->seq)
				continue;
			b = patch_by_seq(s, s->edges[j].before);
			if (!b)
				continue;
			describe(d, sizeof(d), b);
			fprintf(f, "%s%s", first ? "" : "; ", d);
			first = false;
		}
		fprintf(f, "%s\n",
			first
			    ? (p->flags & INSP_P_INFLIGHT ? "(being written)" : "nothing: writable")
			    : "");
	}
}

static void text_why(FILE *f, const struct insp_snap *s)
{
	char d[192];
	const struct insp_patch *last;
	const char *kind = (s->flags & INSP_S_XATTR) ? "attribute " : "";
	size_t i;

	switch (s->why_end) {
	case INSP_WHY_CLEAN:
		fprintf(f, "%sblock %" PRIu64 " is clean: it has nothing waiting to be written\n",
			kind, s->block);
		return;
	case INSP_WHY_READY:
		fprintf(f,
			"%sblock %" PRIu64
			" is not held back: all its patches are writable and the "
			"next round writes it\n",
			kind, s->block);
		return;
	case INSP_WHY_INFLIGHT:
		fprintf(f, "%sblock %" PRIu64 " is being written right now\n", kind, s->block);
		return;
	default:
		break;
	}
	fprintf(f, "%sblock %" PRIu64 " waits:\n", kind, s->block);
	for (i = 0; i < s->npatches; i++) {
		describe(d, sizeof(d), &s->patches[i]);
		fprintf(f, "  %s%s\n", d, i + 1 < s->npatches ? ", which waits for" : "");
	}
	last = s->npatches ? &s->patches[s->npatches - 1] : NULL;
	switch (s->why_end) {
	case INSP_WHY_HELD:
		if (last && last->group && last->role == INSP_R_HEAD)
			fprintf(f,
				"cause: patchgroup %" PRId64 " has not been released: its head is "
				"held until it makes its first change or gets an after\n",
				last->group);
		else if (last && last->group)
			fprintf(f,
				"cause: patchgroup %" PRId64
				" is still open or engaged: its tail is "
				"held until it is closed (or sealed) and nobody engages it\n",
				last->group);
		else
			fprintf(f, "cause: a held empty patch (an fsync=order chain or an open "
				   "patchgroup)\n");
		break;
	case INSP_WHY_WRITE:
		fprintf(f,
			"cause: none held; block %" PRIu64 " goes to disk in the next round "
			"(flush interval %" PRIu32 " ms), then this one can follow\n",
			last ? last->blkno : 0, s->sum.flush_interval_ms);
		break;
	case INSP_WHY_DEPTH:
		fprintf(f, "(chain cut at %" PRIu32 " steps; raise --limit)\n", s->limit);
		break;
	default:
		fprintf(f, "cause: unknown (a counted dependency was not found)\n");
		break;
	}
}

int statfmt_text(FILE *f, const struct insp_snap *s)
{
	switch (s->view) {
	case INSP_BLOCKS:
		text_blocks(f, s);
		break;
	case INSP_GROUPS:
		text_groups(f, s);
		break;
	case INSP_PATCHES:
		text_patches(f, s);
		break;
	case INSP_WHY:
		text_why(f, s);
		break;
	default:
		text_summary(f, s);
		break;
	}
	if ((s->flags & INSP_S_TRUNCATED) && s->view != INSP_WHY)
		fprintf(f, "(list cut at --limit %" PRIu32 ")\n", s->limit);
	return done(f);
}

/* ---- JSON --------------------------------------------------------------- */

static void json_summary(FILE *f, const struct insp_snap *s)
{
	const struct insp_summary *m = &s->sum;
	const struct cache_stats *st = &m->st;

	fprintf(f,
		"\"mode\":{\"consistency\":\"%s\",\"flush_interval_ms\":%" PRIu32
		",\"block_size\":%" PRIu32 ",\"max_blocks\":%" PRIu64 ",\"dirty_limit\":%" PRIu64
		"},",
		consistency_name(m->consistency), m->flush_interval_ms, m->block_size,
		m->max_blocks, m->dirty_limit);
	fprintf(f,
		"\"blocks\":{\"cached\":%" PRIu64 ",\"dirty\":%" PRIu64 ",\"inflight\":%" PRIu64
		",\"ready\":%" PRIu64 ",\"oldest_dirty_ms\":%" PRIu64 "},",
		st->blocks_cached, st->blocks_dirty, st->blocks_inflight, st->blocks_ready,
		m->oldest_dirty_ms);
	fprintf(f,
		"\"patches\":{\"pending\":%" PRIu64 ",\"byte\":%" PRIu64 ",\"bit\":%" PRIu64
		",\"empty\":%" PRIu64 ",\"hard\":%" PRIu64 ",\"soft\":%" PRIu64
		",\"soft_no_undo\":%" PRIu64 ",\"created\":%" PRIu64 ",\"merged\":%" PRIu64
		",\"committed\":%" PRIu64 ",\"undo_dropped\":%" PRIu64 "},",
		m->patches_pending, st->patches_byte, st->patches_bit, st->patches_empty,
		st->patches_hard, st->patches_soft, st->patches_nrb, st->patches_created,
		st->patches_merged, st->patches_committed, st->undo_dropped);
	fprintf(f,
		"\"memory\":{\"undo_bytes\":%" PRIu64 ",\"engine_bytes\":%" PRIu64
		",\"dirty_bytes\":%" PRIu64
		",\"engine_dirty_ratio\":%.6f,\"engine_cache_ratio\":%.6f"
		",\"peak_engine_bytes\":%" PRIu64 ",\"peak_dirty_bytes\":%" PRIu64 "},",
		st->undo_bytes, st->engine_bytes, st->dirty_bytes, ratio(m) / 100.0,
		cache_ratio(m) / 100.0, st->peak_engine_bytes, st->peak_dirty_bytes);
	fprintf(f,
		"\"io\":{\"rounds\":%" PRIu64 ",\"barriers\":%" PRIu64 ",\"block_writes\":%" PRIu64
		",\"rollback_writes\":%" PRIu64 ",\"write_errors\":%" PRIu64
		",\"barrier_errors\":%" PRIu64 ",\"dirty_waits\":%" PRIu64
		",\"blocks_discarded\":%" PRIu64 ",\"round_in_flight\":%s},",
		st->rounds, st->barriers, st->block_writes, st->rollback_writes, st->write_errors,
		st->barrier_errors, m->dirty_waits, st->blocks_discarded,
		m->round_busy ? "true" : "false");
	/* (the kind is one of a few fixed words: nothing to escape) */
	fprintf(f,
		"\"device\":{\"kind\":\"%s\",\"flushes\":%" PRIu64
		",\"flush_mean_ms\":%.6f,\"flush_max_ms\":%.6f,\"fua_rounds\":%" PRIu64
		",\"reconnects\":%" PRIu64 "},",
		m->dev.kind[0] ? m->dev.kind : "unknown", m->dev.flushes, flush_mean_ms(&m->dev),
		ms(m->dev.flush_max_ns), m->dev.fua_barriers, m->dev.reconnects);
	fprintf(f,
		"\"groups\":{\"served\":%s,\"known\":%" PRIu64 ",\"open\":%" PRIu64
		",\"engaged\":%" PRIu64 ",\"sealed\":%" PRIu64 ",\"closed\":%" PRIu64
		",\"counted\":%" PRIu64 "}",
		m->have_groups ? "true" : "false", m->groups_known, m->groups_open,
		m->groups_engaged, m->groups_sealed, m->groups_closed, m->groups_counted);
	if (m->have_txn)
		fprintf(f,
			",\"journal\":{\"running_tid\":%" PRIu64 ",\"running_blocks\":%" PRIu64
			",\"running_ordered\":%" PRIu64 ",\"committing\":%" PRIu64
			",\"held\":%" PRIu64 ",\"checkpointing\":%" PRIu64
			",\"checkpointed\":%" PRIu64 ",\"log_used\":%" PRIu64
			",\"log_total\":%" PRIu64 ",\"commits\":%" PRIu64
			",\"logged_blocks\":%" PRIu64 "}",
			m->txn.running_tid, m->txn.running_blocks, m->txn.running_ordered,
			m->txn.committing, m->txn.held, m->txn.checkpointing, m->txn.checkpointed,
			m->txn.log_used, m->txn.log_total, m->txn.commits, m->txn.logged_blocks);
	else
		fprintf(f, ",\"journal\":null");
}

static void json_patch(FILE *f, const struct insp_patch *p)
{
	fprintf(f, "{\"id\":%" PRIu64 ",\"type\":\"%s\",", p->seq, type_name(p->type));
	if (p->type == INSP_P_EMPTY)
		fprintf(f, "\"block\":null,\"offset\":null,\"length\":null,");
	else if (p->flags & INSP_P_HARD)
		fprintf(f, "\"block\":%" PRIu64 ",\"offset\":null,\"length\":null,", p->blkno);
	else
		fprintf(f, "\"block\":%" PRIu64 ",\"offset\":%" PRIu32 ",\"length\":%" PRIu32 ",",
			p->blkno, p->off, p->len);
	fprintf(f, "\"block_kind\":%s,", p->kind == CBK_XATTR ? "\"attribute\"" : "null");
	fprintf(f,
		"\"undo_bytes\":%" PRIu32 ",\"hard\":%s,\"held\":%s,\"inflight\":%s,"
		"\"waits_other_blocks\":%" PRIu32 ",\"waits_same_block\":%" PRIu32
		",\"afters\":%" PRIu32 ",",
		p->undo_bytes, (p->flags & INSP_P_HARD) ? "true" : "false",
		(p->flags & INSP_P_HELD) ? "true" : "false",
		(p->flags & INSP_P_INFLIGHT) ? "true" : "false", p->npend_ext, p->npend_blk,
		p->nafters);
	if (p->group)
		fprintf(f, "\"group\":%" PRId64 ",\"role\":\"%s\"}", p->group, role_name(p->role));
	else
		fprintf(f, "\"group\":null,\"role\":null}");
}

static void json_edges(FILE *f, const struct insp_snap *s)
{
	size_t i;

	fprintf(f, ",\"edges\":[");
	for (i = 0; i < s->nedges; i++)
		fprintf(f, "%s{\"after\":%" PRIu64 ",\"before\":%" PRIu64 "}", i ? "," : "",
			s->edges[i].after, s->edges[i].before);
	fprintf(f, "]");
}

enum which { ALL, TARGETS, OTHERS };

static void json_patch_list(FILE *f, const struct insp_snap *s, const char *name, enum which w)
{
	bool first = true, target;
	size_t i;

	fprintf(f, ",\"%s\":[", name);
	for (i = 0; i < s->npatches; i++) {
		target = s->patches[i].flags & INSP_P_TARGET;
		if ((w == TARGETS && !target) || (w == OTHERS && target))
			continue;
		if (!first)
			fputc(',', f);
		first = false;
		json_patch(f, &s->patches[i]);
	}
	fprintf(f, "]");
}

int statfmt_json(FILE *f, const struct insp_snap *s)
{
	char st[64];
	size_t i;

	fprintf(f, "{\"schema\":\"%s\",\"view\":\"%s\",\"limit\":%" PRIu32 ",\"truncated\":%s,",
		STATFMT_SCHEMA, inspect_view_name(s->view), s->limit,
		(s->flags & INSP_S_TRUNCATED) ? "true" : "false");
	json_summary(f, s);
	if (s->view == INSP_BLOCKS || s->view == INSP_GRAPH) {
		fprintf(f, ",\"block_list\":[");
		for (i = 0; i < s->nblocks; i++) {
			const struct insp_block *b = &s->blocks[i];

			fprintf(f,
				"%s{\"block\":%" PRIu64 ",\"patches\":%" PRIu32
				",\"ready\":%" PRIu32 ",\"hard\":%" PRIu32
				",\"undo_bytes\":%" PRIu64 ",\"age_ms\":%" PRIu64
				",\"state\":\"%s\",\"partial\":%s}",
				i ? "," : "", b->blkno, b->npatches, b->nready, b->nhard,
				b->undo_bytes, b->age_ms,
				(b->flags & INSP_B_INFLIGHT) ? "writing"
				: (b->flags & INSP_B_READY)  ? "ready"
							     : "waiting",
				(b->flags & INSP_B_PARTIAL) ? "true" : "false");
		}
		fprintf(f, "]");
	}
	if (s->view == INSP_GROUPS || s->view == INSP_GRAPH) {
		fprintf(f, ",\"group_list\":[");
		for (i = 0; i < s->ngroups; i++) {
			const struct insp_group *g = &s->groups[i];

			fprintf(f,
				"%s{\"id\":%" PRId64 ",\"owner\":%" PRIu32 ",\"state\":\"%s\","
				"\"closed\":%s,\"sealed\":%s,\"released\":%s,\"engaged\":%" PRIu32
				",\"befores\":%" PRIu32 ",\"afters\":%" PRIu32
				",\"changes\":%" PRIu64 ",\"pending\":%" PRIu64
				",\"head_held\":%s,\"tail_held\":%s}",
				i ? "," : "", g->id, g->owner,
				group_state(st, sizeof(st), g->state, g->engaged),
				(g->state & PG_ST_CLOSED) ? "true" : "false",
				(g->state & PG_ST_SEALED) ? "true" : "false",
				(g->state & PG_ST_RELEASED) ? "true" : "false", g->engaged,
				g->nbefores, g->nafters, g->nchanges, g->pending,
				g->head_held ? "true" : "false", g->tail_held ? "true" : "false");
		}
		fprintf(f, "]");
	}
	if (s->view == INSP_PATCHES) {
		fprintf(f, ",\"block\":%" PRIu64, s->block);
		json_patch_list(f, s, "patch_list", TARGETS);
		json_patch_list(f, s, "waited_for", OTHERS);
		json_edges(f, s);
	}
	if (s->view == INSP_WHY) {
		fprintf(f, ",\"block\":%" PRIu64 ",\"block_kind\":%s,\"why\":{\"end\":\"%s\"",
			s->block, (s->flags & INSP_S_XATTR) ? "\"attribute\"" : "null",
			inspect_why_name(s->why_end));
		json_patch_list(f, s, "chain", ALL);
		fprintf(f, "}");
	}
	if (s->view == INSP_GRAPH) {
		json_patch_list(f, s, "patch_list", ALL);
		json_edges(f, s);
	}
	fprintf(f, "}\n");
	return done(f);
}

/* ---- dot ---------------------------------------------------------------- */

static void dot_node(FILE *f, const struct insp_patch *p, const char *indent)
{
	char role[48] = "";

	if (p->group)
		snprintf(role, sizeof(role), "\\n%s of group %" PRId64, role_name(p->role),
			 p->group);
	if (p->type == INSP_P_EMPTY)
		fprintf(f, "%sp%" PRIu64 " [label=\"#%" PRIu64 " empty%s%s\",shape=ellipse%s];\n",
			indent, p->seq, p->seq, (p->flags & INSP_P_HELD) ? " held" : "", role,
			(p->flags & INSP_P_HELD) ? ",color=red,fontcolor=red" : ",style=dashed");
	else if (p->flags & INSP_P_HARD)
		fprintf(f, "%sp%" PRIu64 " [label=\"#%" PRIu64 " %s\\nhard%s\"%s%s];\n", indent,
			p->seq, p->seq, type_name(p->type), role,
			(p->npend_ext + p->npend_blk) ? "" : ",style=filled,fillcolor=palegreen",
			(p->flags & INSP_P_INFLIGHT) ? ",penwidth=2" : "");
	else
		fprintf(f,
			"%sp%" PRIu64 " [label=\"#%" PRIu64 " %s %" PRIu32 "+%" PRIu32
			"%s\"%s%s];\n",
			indent, p->seq, p->seq, type_name(p->type), p->off, p->len, role,
			(p->npend_ext + p->npend_blk) ? "" : ",style=filled,fillcolor=palegreen",
			(p->flags & INSP_P_INFLIGHT) ? ",penwidth=2" : "");
}

int statfmt_dot(FILE *f, const struct insp_snap *s)
{
	size_t i, j;

	fprintf(f, "digraph fstitch {\n");
	fprintf(f, "\tgraph [rankdir=LR,fontsize=10,label=\"fstitch-stat %s%s\"];\n",
		inspect_view_name(s->view),
		(s->flags & INSP_S_TRUNCATED) ? " (cut at --limit)" : "");
	fprintf(f, "\tnode [shape=box,fontsize=10];\n");
	/* One cluster per block, in the order the blocks first appear. */
	for (i = 0; i < s->npatches; i++) {
		const struct insp_patch *p = &s->patches[i];
		bool seen = false;

		if (p->type == INSP_P_EMPTY)
			continue;
		for (j = 0; j < i && !seen; j++)
			seen =
			    s->patches[j].type != INSP_P_EMPTY && s->patches[j].blkno == p->blkno;
		if (seen)
			continue;
		fprintf(f, "\tsubgraph cluster_b%" PRIu64 " {\n\t\tlabel=\"block %" PRIu64 "\";\n",
			p->blkno, p->blkno);
		for (j = i; j < s->npatches; j++)
			if (s->patches[j].type != INSP_P_EMPTY && s->patches[j].blkno == p->blkno)
				dot_node(f, &s->patches[j], "\t\t");
		fprintf(f, "\t}\n");
	}
	for (i = 0; i < s->npatches; i++)
		if (s->patches[i].type == INSP_P_EMPTY)
			dot_node(f, &s->patches[i], "\t");
	/* An edge points from a patch to what it waits for. */
	for (i = 0; i < s->nedges; i++)
		fprintf(f, "\tp%" PRIu64 " -> p%" PRIu64 ";\n", s->edges[i].after,
			s->edges[i].before);
	fprintf(f, "}\n");
	return done(f);
}

/* ---- the live view ------------------------------------------------------ */

struct rates {
	double writes, rounds, barriers, rollbacks, created, merged, committed;
};

static double per(uint64_t now, uint64_t then, double secs)
{
	return secs > 0 && now >= then ? (double)(now - then) / secs : 0.0;
}

static void get_rates(const struct insp_snap *prev, const struct insp_snap *cur, double secs,
		      struct rates *r)
{
	static const struct cache_stats zero;
	const struct cache_stats *a = prev ? &prev->sum.st : &zero, *b = &cur->sum.st;

	r->writes = per(b->block_writes, a->block_writes, secs);
	r->rounds = per(b->rounds, a->rounds, secs);
	r->barriers = per(b->barriers, a->barriers, secs);
	r->rollbacks = per(b->rollback_writes, a->rollback_writes, secs);
	r->created = per(b->patches_created, a->patches_created, secs);
	r->merged = per(b->patches_merged, a->patches_merged, secs);
	r->committed = per(b->patches_committed, a->patches_committed, secs);
}

int statfmt_rates_header(FILE *f)
{
	fprintf(f, "%8s %8s %6s %10s %7s %8s %7s %7s %9s %9s %9s\n", "DIRTY", "PENDING", "READY",
		"ENGINE", "ENG%", "WRITES/s", "RNDS/s", "RBACK/s", "NEW/s", "MERGED/s", "DONE/s");
	return done(f);
}

int statfmt_rates_line(FILE *f, const struct insp_snap *prev, const struct insp_snap *cur,
		       double secs)
{
	struct rates r;
	char e[32];

	get_rates(prev, cur, secs, &r);
	fprintf(f,
		"%8" PRIu64 " %8" PRIu64 " %6" PRIu64
		" %10s %6.1f%% %8.0f %7.1f %7.1f %9.0f %9.0f %9.0f\n",
		cur->sum.st.blocks_dirty, cur->sum.patches_pending, cur->sum.st.blocks_ready,
		statfmt_bytes(e, sizeof(e), cur->sum.st.engine_bytes), cache_ratio(&cur->sum),
		r.writes, r.rounds, r.rollbacks, r.created, r.merged, r.committed);
	return done(f);
}

int statfmt_rates_json(FILE *f, const struct insp_snap *prev, const struct insp_snap *cur,
		       double secs)
{
	struct rates r;

	get_rates(prev, cur, secs, &r);
	fprintf(f, "{\"schema\":\"%s\",\"view\":\"rates\",\"interval_s\":%.3f,", STATFMT_SCHEMA,
		secs);
	json_summary(f, cur);
	fprintf(f,
		",\"rates\":{\"block_writes\":%.3f,\"rounds\":%.3f,\"barriers\":%.3f,"
		"\"rollback_writes\":%.3f,\"patches_created\":%.3f,\"patches_merged\":%.3f,"
		"\"patches_committed\":%.3f}}\n",
		r.writes, r.rounds, r.barriers, r.rollbacks, r.created, r.merged, r.committed);
	fflush(f);
	return done(f);
}
