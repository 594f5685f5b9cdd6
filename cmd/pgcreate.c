/* pgcreate: make a new, unengaged patchgroup and print its id. */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include "cliopt.h"
#include "pgcli.h"

#define AFTER_MAX 64

static pg_t after[AFTER_MAX];
static int nafter;

static const struct argp_option options[] = {
	{ "after", 'a', "ID", 0,
	  "The new group's changes reach disk after those of group ID (repeatable)", 0 },
	{ 0 }
};

static error_t parse(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case 'a':
		if (nafter == AFTER_MAX)
			argp_error(state, "too many --after options (at most %d)", AFTER_MAX);
		if (pgcli_parse_id(arg, &after[nafter]) < 0)
			argp_error(state, "invalid group id '%s'", arg);
		nafter++;
		return 0;
	case ARGP_KEY_ARG:
		argp_error(state, "unexpected argument '%s'", arg);
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

static const struct argp_child children[] = {
	{ &cliopt_dir_argp, 0, NULL, 0 },
	{ 0 }
};

const char *argp_program_version = "pgcreate (fstitch) " FSTITCH_VERSION;

static const struct argp argp = {
	options, parse, NULL,
	"Create a new patchgroup on an fstitch mount, engaged by nobody, and "
	"print its id.  Use it to build a graph of groups with pgdepend before "
	"running commands in them with pgrun --group; close it with pgclose.\v"
	"Exit status: 0 done, 1 failed, 64 usage error.",
	children, NULL, NULL
};

int main(int argc, char **argv)
{
	char why[160];
	pg_t id;
	int i, r;

	argp_parse(&argp, argc, argv, 0, NULL, NULL);
	r = pgcli_use_dir(cliopt.dir);
	if (r < 0) {
		cli_error_errno(r, "cannot use '%s'", cliopt.dir);
		return CLI_EXIT_FAILURE;
	}
	id = pg_create();
	if (id < 0) {
		cli_error("cannot create a group: %s", pgcli_why(why, sizeof(why), errno, 0));
		return CLI_EXIT_FAILURE;
	}
	for (i = 0; i < nafter; i++) {
		if (pg_depend(after[i], id) < 0) {
			r = errno;
			cli_error("cannot add dependency %lld -> %lld: %s", (long long)after[i],
				  (long long)id,
				  pgcli_why(why, sizeof(why), r,
					    pgcli_depend_culprit(r, after[i], id)));
			pg_close(id);
			return CLI_EXIT_FAILURE;
		}
	}
	if (printf("%lld\n", (long long)id) < 0 || fflush(stdout) == EOF) {
		cli_error_errno(errno, "cannot print the group id");
		pg_close(id);
		return CLI_EXIT_FAILURE;
	}
	return CLI_EXIT_OK;
}
