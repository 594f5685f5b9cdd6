/* Pieces the patchgroup commands (pgrun, pgdepend, pgcreate, pgsync,
 * pgclose) share: parsing group ids, choosing the mount, and calling the
 * API with each refusal turned into one "prog: what failed: why" line.
 *
 * Command-line support linked into the commands, like cliopt.h: unlike the
 * rest of lib/, the functions below that say so print to stderr, and the
 * argp pieces may exit on bad usage.
 */
#ifndef FSTITCH_PGCLI_H
#define FSTITCH_PGCLI_H

#include <argp.h>
#include <stddef.h>
#include "fstitch/patchgroup.h"

/* How many --after options pgrun and pgcreate take. */
#define PGCLI_AFTER_MAX 64

/* A group id as the shell writes it: a positive decimal integer.  0 or
 * -EINVAL. */
int pgcli_parse_id(const char *s, pg_t *id);

/* Where the API looks for the mount: -C DIR, else $FSTITCH_CONTROL, else
 * "." (never NULL). */
const char *pgcli_where(void);
/* Print "prog: cannot use 'where': its fstitch daemon is gone (the mount
 * is dead)", the one message every command gives for a dead daemon. */
void pgcli_gone(const char *where);

/* The argp children every patchgroup command lists: -C DIR. */
extern const struct argp_child pgcli_children[];

/* Parse arg, a group id given on the command line, into *id; if it is not
 * one, end with the usage error "invalid group id 'arg'" (exit 64). */
void pgcli_argp_id(struct argp_state *state, const char *arg, pg_t *id);

/* The group ids pgcli_parse_ids collected, in order.  v stays allocated
 * until the process exits. */
struct pgcli_ids {
	pg_t *v;
	int n;
};
extern struct pgcli_ids pgcli_ids;

/* An argp parser for commands whose operands are all group ids ("ID..."):
 * ARGP_KEY_ARG adds one to pgcli_ids, ARGP_KEY_END insists on at least one
 * ("no group id given"); other keys are ARGP_ERR_UNKNOWN.  A command with
 * other rules handles those keys first and passes ARGP_KEY_ARG on. */
error_t pgcli_parse_ids(int key, char *arg, struct argp_state *state);

/* argp_parse(argp, argc, argv, flags), then point the API at -C DIR if it
 * was given.  0, or -errno after printing "cannot use 'DIR': why". */
int pgcli_start(const struct argp *argp, int argc, char **argv, unsigned flags);

/* Print "prog: <fmt...>: <why>", why being what the API's errno err (plus
 * or minus) means for group id, e.g. "group 9 is engaged".  For
 * ECONNRESET (the daemon is gone) it prints pgcli_gone(pgcli_where())
 * instead, and when pgcli_where() cannot be looked up (it does not exist,
 * say) "prog: cannot use 'where': <strerror>". */
void pgcli_error(int err, pg_t id, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The API calls, each printing why it failed:
 *   pgcli_create  a new group's id (> 0), or -errno
 *   pgcli_depend  pg_depend(before, after); the message names the group
 *                 the refusal is about
 *   pgcli_depend_all  pgcli_depend(befores[i], after) for i < n, stopping
 *                 at the first refusal
 *   pgcli_sync, pgcli_close  pg_sync(id), pg_close(id)
 * Each returns 0 (or the id) or -errno. */
pg_t pgcli_create(void);
int pgcli_depend(pg_t before, pg_t after);
int pgcli_depend_all(const pg_t *befores, int n, pg_t after);
int pgcli_sync(pg_t id);
int pgcli_close(pg_t id);

/* fn(id) for every id in pgcli_ids, going on after a failure so that one
 * bad id does not stop the rest.  0, or the last failure's -errno. */
int pgcli_for_each_id(int (*fn)(pg_t id));

#endif
