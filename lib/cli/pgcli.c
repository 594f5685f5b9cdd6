/* Shared pieces of the patchgroup commands; see pgcli.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cliopt.h"
#include "pgcli.h"
#include "util/size.h"

struct pgcli_ids pgcli_ids;

const struct argp_child pgcli_children[] = {{&cliopt_dir_argp, 0, NULL, 0}, {0}};

int pgcli_parse_id(const char *s, pg_t *id)
{
	uint64_t v;

	if (num_parse(s, 1, INT64_MAX, &v) < 0)
		return -EINVAL;
	*id = (pg_t)v;
	return 0;
}

void pgcli_argp_id(struct argp_state *state, const char *arg, pg_t *id)
{
	if (pgcli_parse_id(arg, id) < 0)
		argp_error(state, "invalid group id '%s'", arg);
}

error_t pgcli_parse_ids(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case ARGP_KEY_ARG:
		/* There are never more operands than arguments. */
		if (!pgcli_ids.v)
			pgcli_ids.v = calloc(state->argc, sizeof(*pgcli_ids.v));
		if (!pgcli_ids.v)
			argp_failure(state, 1, ENOMEM, "cannot parse arguments");
		pgcli_argp_id(state, arg, &pgcli_ids.v[pgcli_ids.n]);
		pgcli_ids.n++;
		return 0;
	case ARGP_KEY_END:
		if (!pgcli_ids.n)
			argp_error(state, "no group id given");
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

int pgcli_start(const struct argp *argp, int argc, char **argv, unsigned flags)
{
	argp_parse(argp, argc, argv, flags, NULL, NULL);
	if (cliopt.dir && pg_set_control(cliopt.dir) < 0) {
		int r = -errno;

		cli_error_errno(r, "cannot use '%s'", cliopt.dir);
		return r;
	}
	return 0;
}

/* Why a call naming group id failed with errno err, in words. */
static const char *why(char *buf, size_t size, int err, pg_t id)
{
	long long n = id;

	switch (abs(err)) {
	case EINVAL:
		snprintf(buf, size, "invalid group id %lld", n);
		break;
	case ENOENT: {
		/* Say which: a closed group may still be synced or named as a
		 * before, so "or is closed" would mislead there. */
		struct pg_status st;

		if (pg_status(id, &st) == 0 && (st.state & PG_STATUS_CLOSED))
			snprintf(buf, size, "group %lld is closed", n);
		else
			snprintf(buf, size, "group %lld does not exist", n);
		break;
	}
	case EPERM:
		snprintf(buf, size, "group %lld belongs to another user", n);
		break;
	case EBUSY:
		snprintf(buf, size, "group %lld is engaged", n);
		break;
	case EROFS:
		snprintf(buf, size, "group %lld is sealed: it has afters", n);
		break;
	case EALREADY:
		snprintf(buf, size, "group %lld already has changes", n);
		break;
	case ELOOP:
		snprintf(buf, size, "a group cannot depend on itself");
		break;
	case ENOTCONN:
		snprintf(buf, size, "group %lld is not engaged by this process", n);
		break;
	case EMLINK:
		snprintf(buf, size, "too many groups engaged by this process");
		break;
	case EDQUOT:
		snprintf(buf, size, "too many groups not yet on disk for this user");
		break;
	case ENXIO:
		snprintf(buf, size, "not inside an fstitch mount (use -C DIR or FSTITCH_CONTROL)");
		break;
	case EPROTO:
		snprintf(buf, size, "the fstitch daemon speaks another protocol version");
		break;
	case EACCES:
		snprintf(buf, size, "%s: the mount is private to its owner (see allow_other)",
			 strerror(EACCES));
		break;
	default:
		snprintf(buf, size, "%s", strerror(abs(err)));
		break;
	}
	return buf;
}

const char *pgcli_where(void)
{
	const char *where = cliopt.dir;

	if (!where)
		where = getenv("FSTITCH_CONTROL");
	return where && *where ? where : ".";
}

void pgcli_gone(const char *where)
{
	cli_error("cannot use '%s': its fstitch daemon is gone (the mount is dead)", where);
}

/* Whether a call failed with err because the path the mount is looked up
 * by cannot be used, e.g. -C names a directory that does not exist (the
 * API says ENXIO, no mount found); if so, print "cannot use 'where': why",
 * as fstitch-stat does, and return true.  The errors a path lookup shares
 * with the daemon's refusals (ELOOP, EACCES) are the path's only if it
 * cannot be looked up now.  Asked only after a failure, so that a call
 * that succeeds costs no system call more. */
static bool where_failed(int err)
{
	const char *where = pgcli_where();
	struct stat st;

	switch (abs(err)) {
	case ENXIO:
	case ENOTDIR:
	case ELOOP:
	case EACCES:
	case ENAMETOOLONG:
		break;
	default:
		return false;
	}
	if (stat(where, &st) == 0)
		return false;
	cli_error_errno(errno, "cannot use '%s'", where);
	return true;
}

void pgcli_error(int err, pg_t id, const char *fmt, ...)
{
	char what[160], because[160];
	va_list ap;

	if (abs(err) == ECONNRESET) {
		/* Whatever was asked, the one thing to say is that the mount
		 * is dead, in the words fstitch-stat uses. */
		pgcli_gone(pgcli_where());
		return;
	}
	if (where_failed(err))
		return;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	cli_error("%s: %s", what, why(because, sizeof(because), err, id));
}

pg_t pgcli_create(void)
{
	pg_t id = pg_create();

	if (id < 0) {
		id = -errno;
		pgcli_error(id, 0, "cannot create a group");
	}
	return id;
}

/* For a refused pg_depend(before, after): the group the refusal is about,
 * so that the message names the one the user must look at. */
static pg_t depend_culprit(int err, pg_t before, pg_t after)
{
	struct pg_status st;

	switch (abs(err)) {
	case EBUSY:
		return before;
	case ENOENT:
		/* The after must be open; the before need only have existed. */
		if (pg_status(before, &st) < 0)
			return before;
		return after;
	case EPERM:
		if (pg_status(before, &st) == 0 && !(st.state & PG_STATUS_RETIRED) &&
		    st.owner != (unsigned)getuid())
			return before;
		return after;
	default:
		return after;
	}
}

int pgcli_depend(pg_t before, pg_t after)
{
	int r;

	if (pg_depend(before, after) == 0)
		return 0;
	r = -errno;
	pgcli_error(r, depend_culprit(r, before, after), "cannot add dependency %lld -> %lld",
		    (long long)before, (long long)after);
	return r;
}

int pgcli_depend_all(const pg_t *befores, int n, pg_t after)
{
	int i, r;

	for (i = 0; i < n; i++) {
		r = pgcli_depend(befores[i], after);
		if (r < 0)
			return r;
	}
	return 0;
}

int pgcli_sync(pg_t id)
{
	int r;

	if (pg_sync(id) == 0)
		return 0;
	r = -errno;
	pgcli_error(r, id, "cannot sync group %lld", (long long)id);
	return r;
}

int pgcli_close(pg_t id)
{
	int r;

	if (pg_close(id) == 0)
		return 0;
	r = -errno;
	pgcli_error(r, id, "cannot close group %lld", (long long)id);
	return r;
}

int pgcli_for_each_id(int (*fn)(pg_t id))
{
	int i, r, status = 0;

	for (i = 0; i < pgcli_ids.n; i++) {
		r = fn(pgcli_ids.v[i]);
		if (r < 0)
			status = r;
	}
	return status;
}
