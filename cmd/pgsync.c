/* pgsync: wait until patchgroups' changes, and their befores', are on disk. */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "cliopt.h"
#include "pgcli.h"

static pg_t *ids;
static int nids;

static error_t parse(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case ARGP_KEY_ARG:
		if (!ids)
			ids = calloc(state->argc, sizeof(*ids));
		if (!ids)
			argp_failure(state, 1, ENOMEM, "cannot parse arguments");
		if (pgcli_parse_id(arg, &ids[nids]) < 0)
			argp_error(state, "invalid group id '%s'", arg);
		nids++;
		return 0;
	case ARGP_KEY_END:
		if (!nids)
			argp_error(state, "no group id given");
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

static const struct argp_child children[] = {
	{ &cliopt_dir_argp, 0, NULL, 0 },
	{ 0 }
};

const char *argp_program_version = "pgsync (fstitch) " FSTITCH_VERSION;

static const struct argp argp = {
	NULL, parse, "ID...",
	"Wait until every change made so far in each patchgroup ID, and in all "
	"its befores, is durable.  Other data is not flushed: this is not "
	"sync(1).  A closed group may be named; one already on disk returns at "
	"once.\v"
	"Exit status: 0 done, 1 a group was refused or its data could not be "
	"written, 64 usage error.",
	children, NULL, NULL
};

int main(int argc, char **argv)
{
	char why[160];
	int i, r, status = CLI_EXIT_OK;

	argp_parse(&argp, argc, argv, 0, NULL, NULL);
	r = pgcli_use_dir(cliopt.dir);
	if (r < 0) {
		cli_error_errno(r, "cannot use '%s'", cliopt.dir);
		return CLI_EXIT_FAILURE;
	}
	for (i = 0; i < nids; i++) {
		if (pg_sync(ids[i]) < 0) {
			cli_error("cannot sync group %lld: %s", (long long)ids[i],
				  pgcli_why(why, sizeof(why), errno, ids[i]));
			status = CLI_EXIT_FAILURE;
		}
	}
	free(ids);
	return status;
}
