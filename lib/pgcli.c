/* Shared pieces of the patchgroup commands; see pgcli.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pgcli.h"

int pgcli_parse_id(const char *s, pg_t *id)
{
	char *end;
	long long v;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v <= 0)
		return -EINVAL;
	*id = v;
	return 0;
}

int pgcli_use_dir(const char *dir)
{
	if (!dir)
		return 0;
	return pg_set_control(dir) < 0 ? -errno : 0;
}

const char *pgcli_why(char *buf, size_t size, int err, pg_t id)
{
	long long n = id;

	switch (abs(err)) {
	case EINVAL:
		snprintf(buf, size, "invalid group id %lld", n);
		break;
	case ENOENT:
		snprintf(buf, size, "group %lld does not exist or is closed", n);
		break;
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
	case ECONNRESET:
	case EPIPE:
		snprintf(buf, size, "the fstitch daemon went away");
		break;
	case EPROTO:
		snprintf(buf, size, "the fstitch daemon speaks another protocol version");
		break;
	default:
		snprintf(buf, size, "%s", strerror(abs(err)));
		break;
	}
	return buf;
}

pg_t pgcli_depend_culprit(int err, pg_t before, pg_t after)
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
