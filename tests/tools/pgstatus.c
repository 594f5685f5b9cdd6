/* pgstatus ID: print a patchgroup's status as one line of key=value pairs
 * (for the bats suites, until fstitch-stat shows groups):
 *   id=5 owner=0 engaged=1 befores=0 afters=0 changes=12 state=released,closed (or open)
 * Exit status: 0, 1 the call failed (message on stderr), 64 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fstitch/patchgroup.h>

int main(int argc, char **argv)
{
	struct pg_status st;
	char *end;
	long long id;
	char state[64];

	if (argc != 2) {
		fprintf(stderr, "usage: pgstatus ID\n");
		return 64;
	}
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
