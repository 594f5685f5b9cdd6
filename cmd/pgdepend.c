/* pgdepend: make one patchgroup's changes reach disk after another's. */
#include "cli/cliopt.h"
#include "cli/pgcli.h"

/* Operands are group ids, exactly two of them. */
static error_t parse(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case ARGP_KEY_ARG:
		if (pgcli_ids.n == 2)
			argp_error(state, "too many arguments");
		return pgcli_parse_ids(key, arg, state);
	case ARGP_KEY_END:
		if (pgcli_ids.n != 2)
			argp_error(state, "need BEFORE and AFTER");
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

CLI_VERSION("pgdepend");

static const struct argp argp = {
    NULL,
    parse,
    "BEFORE AFTER",
    "Make every change of patchgroup AFTER reach disk only after every "
    "change of patchgroup BEFORE.\v"
    "AFTER must be open, have no changes yet and no afters of its own; "
    "BEFORE must not be engaged by any process, and is sealed from then on. "
    "A closed BEFORE whose changes are all on disk is accepted and ignored.  "
    "Exit status: 0 done, 1 refused or failed, 64 usage error.",
    pgcli_children,
    NULL,
    NULL};

int main(int argc, char **argv)
{
	if (pgcli_start(&argp, argc, argv, 0) < 0)
		return CLI_EXIT_FAILURE;
	if (pgcli_depend(pgcli_ids.v[0], pgcli_ids.v[1]) < 0)
		return CLI_EXIT_FAILURE;
	return CLI_EXIT_OK;
}
