/* ext2: changes that a patchgroup need not order, because no crash state
 * can show them before a change that it does order.
 *
 * A patchgroup promises that no crash state shows a change of a group
 * before every change of the groups it comes after.  Each change waits for
 * the befores of its caller's scope (engine/pgeng.c).  Under soft updates
 * that alone makes a chain of groups cost a round per block it alternates
 * between: a file's inode waits for the earlier group's directory entry,
 * the next entry for that inode, and so on.  Some changes cannot be seen
 * on their own, though, and these leave the befores out:
 *
 * - A new regular file's bitmap bit and initialised inode: nothing names
 *   the inode before the entry made in the same operation, which keeps the
 *   befores.  A crash that shows them without it shows a leak.
 * - Later changes of that file (its data, bitmap bits, indirect blocks,
 *   size and pointers) while that entry is its one name: when the entry is
 *   on disk, everything it waited for is too.  A change leaves out only
 *   the befores the entry waited for, and the rename_order set only if the
 *   entry waited for all of it (no member joined since but the file's
 *   own data, which its size waits for anyway).  The entry waits for that
 *   set only here (and outside groups, below), so that a file
 *   written in a group and renamed into place in the next costs no round
 *   trip between its inode and its directory per file.
 * - Any file's bytes written past every size it may have on disk
 *   (e2_isize_hi(): a shrink may not be there yet), and the new blocks a
 *   write makes (data, and indirect blocks and their copies) with their
 *   bitmap bits: seen only through the size or pointers that the same
 *   write sets in the inode, or in an indirect block in place, which keep
 *   the befores (e2_write_locked()).  A crash that shows them without it
 *   shows a leak or bytes past the end.  A mail server's append, fsync,
 *   mark loop then alternates between the inode and the mark's block
 *   only, not also the appended block (2 rounds a message, not 3.8).
 * - A directory's times, as a name is added or removed, and the ctime a
 *   rename gives the file: times are ordered by no group (doc/design.md
 *   §5), and go with the next write of their inode block.
 * - A rename keeps out of the group the name it parks a replaced file
 *   under (e2_rename.c, park()).
 *
 * In a group a create also writes over pending removals in its directory
 * (e2_dir_add_new()), since what it then waits for is in its own block.
 *
 * A new regular file made outside any group gets a gate too, with no
 * befores: its entry waits for the rename_order set and its size need not
 * (e2_order_gating()), and its create writes over pending removals as in
 * a group.
 *
 * Each such change still joins its groups (the group's tail waits for it),
 * so a later group and pg_sync() wait for it as before. */
#include <stdlib.h>
#include "e2_int.h"

static size_t qscope_befores(struct patch_scope *s, struct patch *const **deps)
{
	struct e2_qscope *q = (struct e2_qscope *)s;
	const struct e2_gate *g = q->gate;
	struct patch *const *in;
	size_t n, i, k = 0;

	/* Asked all the same: the first change releases the groups. */
	n = q->inner->befores ? q->inner->befores(q->inner, &in) : 0;
	if (!g)
		return 0;
	for (i = 0; i < n; i++) {
		unsigned j;

		for (j = 0; j < g->nb && g->b[j] != in[i]; j++)
			;
		if (j < g->nb)
			continue;
		if (k == E2_QSCOPE_KEEP) {
			*deps = in; /* too many to sort out: keep them all */
			return n;
		}
		q->keep[k++] = in[i];
	}
	*deps = q->keep;
	return k;
}

static void qscope_created(struct patch_scope *s, struct patch *p)
{
	struct e2_qscope *q = (struct e2_qscope *)s;

	if (q->inner->created)
		q->inner->created(q->inner, p);
}

bool e2_gating(const struct e2fs *fs)
{
	return fs->scope && fs->opts.consistency == CONSISTENCY_SOFTUPDATES;
}

/* Without a scope, a gate stands for the rename_order set alone.  A new
 * file's size would wait for that set, which holds the last rename: in a
 * loop of write, rename, each size waited for the last rename and each
 * rename for its file's size, so the inode block and the directory took
 * turns, a round each, two rounds a replace (217 rounds for 100 replaces
 * with no fsync; 9 with the gate).  With fsync, the fsync of the next file
 * took four rounds (lost+found, the directory, the inode, the new entry)
 * where soft updates needs three (data and bits, inode, entry).  With the
 * entry waiting for the set instead, the directory's changes go in one
 * round.  A bulk writer pays nothing for it: untar and PostMark write as
 * many rounds and blocks either way (make bench). */
bool e2_order_gating(const struct e2fs *fs)
{
	return fs->opts.consistency == CONSISTENCY_SOFTUPDATES &&
	       fs->opts.rename_order != E2_RENAME_ORDER_FILE;
}

struct patch_scope *e2_scope_quiet(struct e2fs *fs, const struct e2_gate *g)
{
	struct patch_scope *old = fs->scope;

	if (!e2_gating(fs) || old == &fs->qs.ps)
		return old;
	fs->qs.ps.befores = qscope_befores;
	fs->qs.ps.created = qscope_created;
	fs->qs.inner = old;
	fs->qs.gate = g;
	fs->scope = &fs->qs.ps;
	return old;
}

void e2_scope_restore(struct e2fs *fs, struct patch_scope *old)
{
	fs->scope = old;
}

void e2_gate_drop(struct e2fs *fs, struct e2_inode *ip)
{
	struct e2_gate *g = ip->gate;

	if (!g)
		return;
	ip->gate = NULL;
	patch_release(fs->c, g->ent);
	for (unsigned i = 0; i < g->nb; i++)
		patch_release(fs->c, g->b[i]);
	free(g);
}

struct e2_gate *e2_gate_get(struct e2fs *fs, struct e2_inode *ip)
{
	if (ip->gate && patch_committed(ip->gate->ent))
		e2_gate_drop(fs, ip);
	return ip->gate;
}

void e2_gate_set(struct e2fs *fs, struct e2_inode *ip, struct patch *ent, uint64_t ogen)
{
	struct patch *const *in = NULL;
	struct e2_gate *g;
	size_t n;

	e2_gate_drop(fs, ip);
	if (!ent || patch_committed(ent))
		return;
	n = e2_gating(fs) && fs->scope->befores ? fs->scope->befores(fs->scope, &in) : 0;
	if (n > E2_GATE_BEFORES)
		return;
	g = calloc(1, sizeof(*g));
	if (!g)
		return; /* (no gate: later changes keep every before) */
	patch_retain(ent);
	g->ent = ent;
	for (size_t i = 0; i < n; i++) {
		patch_retain(in[i]);
		g->b[g->nb++] = in[i];
	}
	g->pid = fs->caller_pid;
	g->start = fs->caller_start;
	g->ogen = ogen;
	ip->gate = g;
}

bool e2_gate_order_covered(const struct e2fs *fs, const struct e2_gate *g, uint64_t gen)
{
	return g && g->ogen == gen && g->pid == fs->caller_pid && g->start == fs->caller_start;
}
