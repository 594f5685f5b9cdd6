/* pgcreate: make a new, unengaged patchgroup and print its id. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include "cli/cliopt.h"
#include "cli/pgcli.h"

static pg_t after[PGCLI_AFTER_MAX];
static int nafter;

static const struct argp_option options[] = {
    {"after", 'a', "ID", 0,
     "The new group's changes reach disk after those of group ID (repeatable)", 0},
    {0}};

static error_t parse(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case 'a':
		if (nafter == PGCLI_AFTER_MAX)
			argp_error(state, "too many --after options (at most %d)", PGCLI_AFTER_MAX);
		pgcli_argp_id(state, arg, &after[nafter]);
		nafter++;
		return 0;
	case ARGP_KEY_ARG:
		argp_error(state, "unexpected argument '%s'", arg);
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

CLI_VERSION("pgcreate");

static const struct argp argp = {
    options,
    parse,
    NULL,
    "Create a new patchgroup on an fstitch mount, engaged by nobody, and "
    "print its id.  Use it to build a graph of groups with pgdepend before "
    "running commands in them with pgrun --group; close it with pgclose.\v"
    "Exit status: 0 done, 1 failed, 64 usage error.",
    pgcli_children,
    NULL,
    NULL};

int main(int argc, char **argv)
{
	pg_t id;

	/* A reader that has gone must make the print fail (EPIPE), so that
	 * the group is closed again, not kill pgcreate and leave it open. */
	signal(SIGPIPE, SIG_IGN);
	if (pgcli_start(&argp, argc, argv, 0) < 0)
		return CLI_EXIT_FAILURE;
	id = pgcli_create();
	if (id < 0)
		return CLI_EXIT_FAILURE;
	if (pgcli_depend_all(after, nafter, id) < 0)
		goto fail;
	if (printf("%lld\n", (long long)id) < 0 || fflush(stdout) == EOF) {
		cli_error_errno(errno, "cannot print the group id");
		goto fail;
	}
	return CLI_EXIT_OK;
fail:
	/* A group nobody knows the id of would only wait to be forgotten. */
	pg_close(id);
	return CLI_EXIT_FAILURE;
}
