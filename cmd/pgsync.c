/* pgsync: wait until patchgroups' changes, and their befores', are on disk. */
#include "cli/cliopt.h"
#include "cli/pgcli.h"

CLI_VERSION("pgsync");

static const struct argp argp = {
    NULL,
    pgcli_parse_ids,
    "ID...",
    "Wait until every change made so far in each patchgroup ID, and in all "
    "its befores, is durable.  Other data is not flushed: this is not "
    "sync(1).  A closed group may be named; one already on disk returns at "
    "once.\v"
    "Exit status: 0 done, 1 a group was refused or its data could not be "
    "written, 64 usage error.",
    pgcli_children,
    NULL,
    NULL};

int main(int argc, char **argv)
{
	if (pgcli_start(&argp, argc, argv, 0) < 0)
		return CLI_EXIT_FAILURE;
	return pgcli_for_each_id(pgcli_sync) < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
