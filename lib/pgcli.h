/* Pieces the patchgroup commands (pgrun, pgdepend, pgcreate, pgsync,
 * pgclose) share: parsing group ids, choosing the mount, and turning the
 * API's errno values into the words of a one-line message.  Command-line
 * support only, like cliopt.h; nothing here prints.
 */
#ifndef FSTITCH_PGCLI_H
#define FSTITCH_PGCLI_H

#include <stddef.h>
#include "fstitch/patchgroup.h"

/* A group id as the shell writes it: a positive decimal integer.  0 or
 * -EINVAL. */
int pgcli_parse_id(const char *s, pg_t *id);
/* The control socket for where: where itself if it is a socket, else the
 * one named by the user.fstitch.control attribute of where (any path in an
 * fstitch mount).  buf gets the path.  0, -ENXIO if where is in no fstitch
 * mount, or -errno (e.g. -ENOENT). */
int pgcli_socket(const char *where, char *buf, size_t size);
/* Point the API at dir (from -C), or leave the default when dir is NULL.
 * 0 or -errno. */
int pgcli_use_dir(const char *dir);
/* Why a call naming group id failed with errno err, e.g. "group 9 is
 * engaged".  Returns buf. */
const char *pgcli_why(char *buf, size_t size, int err, pg_t id);
/* For a refused pg_depend(before, after): the group the refusal is about. */
pg_t pgcli_depend_culprit(int err, pg_t before, pg_t after);

#endif
