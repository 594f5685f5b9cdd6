/* pgstatus ID: print a patchgroup's status as one line of key=value pairs
 * (for the bats suites, until fstitch-stat shows groups):
 *   id=5 owner=0 engaged=1 befores=0 afters=0 changes=12 state=released,closed (or open)
 * pgstatus --summary: the daemon's patchgroup counters, the same way:
 *   groups=3 closed=1 sealed=0 engaged=1 scopes=2 last_id=7 fsync_ordered=0 requests=12
 * where requests counts the requests the daemon answered before this one
 * (so a test can count a client's round trips).
 * The mount is found like the API finds it: FSTITCH_CONTROL or ".".
 * Exit status: 0, 1 the call failed (message on stderr), 64 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <fstitch/patchgroup.h>
#include "proto/ctl.h"
#include "pg/pgsrv.h"

static int summary(void)
{
	const char *where = getenv("FSTITCH_CONTROL");
	struct ctl_req req = { .magic = CTL_MAGIC, .version = CTL_VERSION, .op = CTL_SUMMARY };
	struct ctl_rep rep;
	char path[256];
	struct stat st;
	ssize_t n;
	int fd, r;

	if (!where || !*where)
		where = ".";
	if (stat(where, &st) == 0 && S_ISSOCK(st.st_mode)) {
		snprintf(path, sizeof(path), "%s", where);
	} else {
		n = getxattr(where, PGSRV_XATTR, path, sizeof(path) - 1);
		if (n < 0) {
			fprintf(stderr, "pgstatus: no fstitch mount at '%s'\n", where);
			return 1;
		}
		path[n] = '\0';
	}
	r = ctl_connect(path, &fd);
	if (r == 0)
		r = ctl_call(fd, &req, &rep);
	if (r == 0)
		r = -rep.err;
	if (r < 0) {
		fprintf(stderr, "pgstatus: summary: %s\n", strerror(-r));
		return 1;
	}
	printf("groups=%llu closed=%llu sealed=%llu engaged=%llu scopes=%llu last_id=%lld "
	       "fsync_ordered=%llu requests=%llu\n",
	       (unsigned long long)rep.summary.groups, (unsigned long long)rep.summary.closed,
	       (unsigned long long)rep.summary.sealed, (unsigned long long)rep.summary.engaged,
	       (unsigned long long)rep.summary.scopes, (long long)rep.summary.last_id,
	       (unsigned long long)rep.summary.fsync_ordered,
	       (unsigned long long)rep.summary.requests);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct pg_status st;
	char *end;
	long long id;
	char state[64];

	if (argc != 2) {
		fprintf(stderr, "usage: pgstatus ID | --summary\n");
		return 64;
	}
	if (!strcmp(argv[1], "--summary"))
		return summary();
	id = strtoll(argv[1], &end, 10);
	if (*end || end == argv[1]) {
		fprintf(stderr, "pgstatus: invalid group id '%s'\n", argv[1]);
		return 64;
	}
	if (pg_status(id, &st) < 0) {
		fprintf(stderr, "pgstatus: group %lld: %s\n", id, strerror(errno));
		return 1;
	}
	state[0] = '\0';
	if (st.state & PG_STATUS_RELEASED)
		strcat(state, ",released");
	if (st.state & PG_STATUS_SEALED)
		strcat(state, ",sealed");
	if (st.state & PG_STATUS_CLOSED)
		strcat(state, ",closed");
	if (st.state & PG_STATUS_RETIRED)
		strcat(state, ",retired");
	printf("id=%lld owner=%u engaged=%u befores=%u afters=%u changes=%llu state=%s\n",
	       (long long)st.id, st.owner, st.engaged, st.nbefores, st.nafters,
	       (unsigned long long)st.nchanges, state[0] ? state + 1 : "open");
	return 0;
}
