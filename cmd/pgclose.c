/* pgclose: drop patchgroup handles; their ordering stays. */
#include "cli/cliopt.h"
#include "cli/pgcli.h"

CLI_VERSION("pgclose");

static const struct argp argp = {
    NULL,
    pgcli_parse_ids,
    "ID...",
    "Close each patchgroup ID: it can no longer be engaged or gain "
    "befores.  Its changes keep their ordering, and its id may still be "
    "named as a before (pgrun --after) and synced.\v"
    "Exit status: 0 done, 1 a group was refused, 64 usage error.",
    pgcli_children,
    NULL,
    NULL};

int main(int argc, char **argv)
{
	if (pgcli_start(&argp, argc, argv, 0) < 0)
		return CLI_EXIT_FAILURE;
	/* Every group is tried, whatever happened to the ones before it. */
	return pgcli_for_each_id(pgcli_close) < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
