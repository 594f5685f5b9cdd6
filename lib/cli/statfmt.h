/* Rendering an engine snapshot (inspect.h) for fstitch-stat: aligned text
 * tables, JSON with a stable schema (documented in fstitch-stat(8)), and
 * Graphviz dot.  Everything writes to a FILE * the caller gives; nothing
 * here prints on its own.
 *
 * Each function returns 0, or -EIO if writing to f failed.
 */
#ifndef FSTITCH_STATFMT_H
#define FSTITCH_STATFMT_H

#include <stdio.h>
#include "inspect/inspect.h"

/* The version of the JSON schema ("schema" member): bumped only when a
 * member changes meaning or goes away; new members may be added. */
#define STATFMT_SCHEMA "fstitch-stat/1"

/* Human tables: the summary for INSP_SUMMARY, else the snapshot's view. */
int statfmt_text(FILE *f, const struct insp_snap *s);
/* One JSON object (and a newline): the summary plus the view's list. */
int statfmt_json(FILE *f, const struct insp_snap *s);
/* A Graphviz digraph of the snapshot's patches and edges: blocks are
 * clusters, patches are nodes, an edge goes from a patch to the one it
 * waits for.  Held patches are drawn red. */
int statfmt_dot(FILE *f, const struct insp_snap *s);

/* The live view (--watch, "fstitch-stat 1 5"): a header line, then one
 * line per interval with current levels and the rates between two
 * snapshots taken secs apart (prev NULL: rates since the mount). */
int statfmt_rates_header(FILE *f);
int statfmt_rates_line(FILE *f, const struct insp_snap *prev, const struct insp_snap *cur,
		       double secs);
/* The same as one JSON object per line. */
int statfmt_rates_json(FILE *f, const struct insp_snap *prev, const struct insp_snap *cur,
		       double secs);

/* "12.0 KiB" style: buf gets at most size bytes.  Returns buf. */
const char *statfmt_bytes(char *buf, size_t size, uint64_t bytes);
/* "850ms", "12.3s", "4m05s", "2h03m".  Returns buf. */
const char *statfmt_age(char *buf, size_t size, uint64_t ms);

#endif
