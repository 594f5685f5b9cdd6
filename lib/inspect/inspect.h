/* Engine snapshots over the control socket, for fstitch-stat: the wire
 * form of a struct insp_snap (engine/snapshot.h), the daemon's CTL_STATS
 * handler and the client's request.
 *
 * Return values: 0 or -errno; outputs written only on success.
 */
#ifndef FSTITCH_INSPECT_H
#define FSTITCH_INSPECT_H

#include <stddef.h>
#include <stdint.h>
#include "engine/snapshot.h"

struct ctl_req;
struct ctl_rep;
struct ctl_payload;

/* The wire form: a header giving the record sizes and counts, then the
 * arrays.  encode gives a malloc'd buffer (the caller frees it); decode
 * checks every size and count against len and gives -EPROTO for anything
 * that does not fit. */
int inspect_encode(const struct insp_snap *s, void **buf, size_t *len);
int inspect_decode(const void *buf, size_t len, struct insp_snap **out);

/* Daemon side of CTL_STATS (req->a: view, req->b: block, req->flags:
 * limit): take the snapshot and attach it as the reply's payload.  Returns
 * 0 or -errno for the reply's err. */
int inspect_serve(struct cache *c, struct pgeng *e, const struct ctl_req *req, struct ctl_rep *rep,
		  struct ctl_payload *pl);
/* Client side: ask the daemon on fd for a snapshot.  -EOPNOTSUPP from a
 * daemon that does not know CTL_STATS, -EPROTO for a bad reply, the
 * daemon's refusal, or the transport's -errno. */
int inspect_fetch(int fd, const struct insp_query *q, struct insp_snap **out);

/* Names for the enums above (never NULL). */
const char *inspect_view_name(uint32_t view);
const char *inspect_why_name(uint32_t end);

#endif
