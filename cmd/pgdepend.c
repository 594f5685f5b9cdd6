/* pgdepend: make one patchgroup's changes reach disk after another's. */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include "cliopt.h"
#include "pgcli.h"

static pg_t ids[2];
static int nids;

static error_t parse(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case ARGP_KEY_ARG:
		if (nids == 2)
			argp_error(state, "too many arguments");
		if (pgcli_parse_id(arg, &ids[nids]) < 0)
			argp_error(state, "invalid group id '%s'", arg);
		nids++;
		return 0;
	case ARGP_KEY_END:
		if (nids != 2)
			argp_error(state, "need BEFORE and AFTER");
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

static const struct argp_child children[] = {
	{ &cliopt_dir_argp, 0, NULL, 0 },
	{ 0 }
};

const char *argp_program_version = "pgdepend (fstitch) " FSTITCH_VERSION;

static const struct argp argp = {
	NULL, parse, "BEFORE AFTER",
	"Make every change of patchgroup AFTER reach disk only after every "
	"change of patchgroup BEFORE.\v"
	"AFTER must be open, have no changes yet and no afters of its own; "
	"BEFORE must not be engaged by any process, and is sealed from then on. "
	"A closed BEFORE whose changes are all on disk is accepted and ignored.  "
	"Exit status: 0 done, 1 refused or failed, 64 usage error.",
	children, NULL, NULL
};

int main(int argc, char **argv)
{
	char why[160];
	int r;

	argp_parse(&argp, argc, argv, 0, NULL, NULL);
	r = pgcli_use_dir(cliopt.dir);
	if (r < 0) {
		cli_error_errno(r, "cannot use '%s'", cliopt.dir);
		return CLI_EXIT_FAILURE;
	}
	if (pg_depend(ids[0], ids[1]) < 0) {
		r = errno;
		cli_error("cannot add dependency %lld -> %lld: %s", (long long)ids[0],
			  (long long)ids[1],
			  pgcli_why(why, sizeof(why), r, pgcli_depend_culprit(r, ids[0], ids[1])));
		return CLI_EXIT_FAILURE;
	}
	return CLI_EXIT_OK;
}
