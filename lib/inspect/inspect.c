/* Engine snapshots on the wire (see inspect.h): encoding and decoding
 * with every size checked, the daemon's CTL_STATS handler and the client's
 * request. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "proto/ctl.h"
#include "inspect.h"

/* ---- wire form ---------------------------------------------------------- */

#define INSP_MAGIC	  0x46535354u /* "FSST" */
#define INSP_WIRE_VERSION 2

struct wire_hdr {
	uint32_t magic, version;
	uint32_t hdr_size, snap_size, block_size, group_size, patch_size, edge_size;
	uint64_t nblocks, ngroups, npatches, nedges;
};

/* The snapshot's scalar part, as sent (its pointers are not). */
struct wire_snap {
	uint32_t view, flags;
	uint64_t block;
	uint32_t limit, why_end;
	struct insp_summary sum;
};

static char *put(char *at, const void *src, size_t size)
{
	if (size)
		memcpy(at, src, size);
	return at + size;
}

int inspect_encode(const struct insp_snap *s, void **buf, size_t *len)
{
	struct wire_hdr h = {.magic = INSP_MAGIC,
			     .version = INSP_WIRE_VERSION,
			     .hdr_size = sizeof(struct wire_hdr),
			     .snap_size = sizeof(struct wire_snap),
			     .block_size = sizeof(struct insp_block),
			     .group_size = sizeof(struct insp_group),
			     .patch_size = sizeof(struct insp_patch),
			     .edge_size = sizeof(struct insp_edge),
			     .nblocks = s->nblocks,
			     .ngroups = s->ngroups,
			     .npatches = s->npatches,
			     .nedges = s->nedges};
	struct wire_snap w;
	size_t n;
	char *b, *at;

	memset(&w, 0, sizeof(w));
	w.view = s->view;
	w.flags = s->flags;
	w.block = s->block;
	w.limit = s->limit;
	w.why_end = s->why_end;
	w.sum = s->sum;
	n = sizeof(h) + sizeof(w) + s->nblocks * sizeof(*s->blocks) +
	    s->ngroups * sizeof(*s->groups) + s->npatches * sizeof(*s->patches) +
	    s->nedges * sizeof(*s->edges);
	b = malloc(n);
	if (!b)
		return -ENOMEM;
	at = b;
	at = put(at, &h, sizeof(h));
	at = put(at, &w, sizeof(w));
	at = put(at, s->blocks, s->nblocks * sizeof(*s->blocks));
	at = put(at, s->groups, s->ngroups * sizeof(*s->groups));
	at = put(at, s->patches, s->npatches * sizeof(*s->patches));
	put(at, s->edges, s->nedges * sizeof(*s->edges));
	*buf = b;
	*len = n;
	return 0;
}

/* Copy count records of size bytes from *at; NULL with *err set when they
 * do not fit in what is left (or for none). */
static void *take_array(const char **at, size_t *left, uint64_t count, size_t size, int *err)
{
	void *v;

	if (*err || count == 0)
		return NULL;
	if (count > *left / size) {
		*err = -EPROTO;
		return NULL;
	}
	v = malloc(count * size);
	if (!v) {
		*err = -ENOMEM;
		return NULL;
	}
	memcpy(v, *at, count * size);
	*at += count * size;
	*left -= count * size;
	return v;
}

int inspect_decode(const void *buf, size_t len, struct insp_snap **out)
{
	const char *at = buf;
	struct wire_hdr h;
	struct wire_snap w;
	struct insp_snap *s;
	size_t left = len;
	int r = 0;

	if (!buf || len < sizeof(h) + sizeof(w))
		return -EPROTO;
	memcpy(&h, at, sizeof(h));
	if (h.magic != INSP_MAGIC || h.version != INSP_WIRE_VERSION || h.hdr_size != sizeof(h) ||
	    h.snap_size != sizeof(w) || h.block_size != sizeof(struct insp_block) ||
	    h.group_size != sizeof(struct insp_group) ||
	    h.patch_size != sizeof(struct insp_patch) || h.edge_size != sizeof(struct insp_edge))
		return -EPROTO;
	at += sizeof(h);
	memcpy(&w, at, sizeof(w));
	at += sizeof(w);
	left -= sizeof(h) + sizeof(w);
	if (w.view >= INSP_VIEW_MAX || w.why_end >= INSP_WHY_MAX)
		return -EPROTO;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->view = w.view;
	s->flags = w.flags;
	s->block = w.block;
	s->limit = w.limit;
	s->why_end = w.why_end;
	s->sum = w.sum;
	s->sum.dev.kind[sizeof(s->sum.dev.kind) - 1] = '\0';
	s->blocks = take_array(&at, &left, h.nblocks, sizeof(*s->blocks), &r);
	s->groups = take_array(&at, &left, h.ngroups, sizeof(*s->groups), &r);
	s->patches = take_array(&at, &left, h.npatches, sizeof(*s->patches), &r);
	s->edges = take_array(&at, &left, h.nedges, sizeof(*s->edges), &r);
	if (!r && left)
		r = -EPROTO;
	if (r) {
		inspect_free(s);
		return r;
	}
	s->nblocks = h.nblocks;
	s->ngroups = h.ngroups;
	s->npatches = h.npatches;
	s->nedges = h.nedges;
	*out = s;
	return 0;
}

/* ---- the control socket ------------------------------------------------- */

/* Snapshots bigger than this are refused by the client: with the largest
 * limit a graph is far smaller. */
#define PAYLOAD_MAX (256u << 20)

int inspect_serve(struct cache *c, struct pgeng *e, const struct ctl_req *req, struct ctl_rep *rep,
		  struct ctl_payload *pl)
{
	struct insp_query q = {.view = req->a < 0 || req->a >= INSP_VIEW_MAX ? INSP_VIEW_MAX
									     : (uint32_t)req->a,
			       .limit = req->flags,
			       .block = (uint64_t)req->b};
	struct insp_snap *s;
	void *buf;
	size_t len;
	int r;

	r = inspect_take(c, e, &q, &s);
	if (r)
		return r;
	r = inspect_encode(s, &buf, &len);
	inspect_free(s);
	if (r)
		return r;
	rep->id = (int64_t)len;
	pl->buf = buf;
	pl->len = len;
	return 0;
}

int inspect_fetch(int fd, const struct insp_query *q, struct insp_snap **out)
{
	struct ctl_req req = {.magic = CTL_MAGIC,
			      .version = CTL_VERSION,
			      .op = CTL_STATS,
			      .flags = q->limit,
			      .a = q->view,
			      .b = (int64_t)q->block};
	struct ctl_rep rep;
	void *buf = NULL;
	size_t len = 0;
	int r;

	r = ctl_call_payload(fd, &req, &rep, &buf, &len, PAYLOAD_MAX);
	if (r < 0)
		return r;
	if (rep.err) {
		free(buf);
		return -rep.err;
	}
	r = inspect_decode(buf, len, out);
	free(buf);
	return r;
}

const char *inspect_view_name(uint32_t view)
{
	static const char *const names[] = {"summary", "blocks", "groups",
					    "patches", "why",	 "graph"};

	return view < INSP_VIEW_MAX ? names[view] : "unknown";
}

const char *inspect_why_name(uint32_t end)
{
	static const char *const names[] = {"clean", "ready", "inflight", "held",
					    "write", "depth", "lost"};

	return end < INSP_WHY_MAX ? names[end] : "unknown";
}
