/* pgclose: drop patchgroup handles; their ordering stays. */
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

const char *argp_program_version = "pgclose (fstitch) " FSTITCH_VERSION;

static const struct argp argp = {
	NULL, parse, "ID...",
	"Close each patchgroup ID: it can no longer be engaged or gain "
	"befores.  Its changes keep their ordering, and its id may still be "
	"named as a before (pgrun --after) and synced.\v"
	"Exit status: 0 done, 1 a group was refused, 64 usage error.",
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
		if (pg_close(ids[i]) < 0) {
			cli_error("cannot close group %lld: %s", (long long)ids[i],
				  pgcli_why(why, sizeof(why), errno, ids[i]));
			status = CLI_EXIT_FAILURE;
		}
	}
	free(ids);
	return status;
}
