/* Command-line pieces that several fstitch commands share: the options
 * -C DIR, --json, -q and -v, defined once here and plugged into a command's
 * argp as children (the way elfutils shares its standard options), the
 * "prog: what failed: why" message helper, and the exit status table.
 *
 * This is command-line support, linked into the commands only: unlike the
 * rest of lib/ it does print (to stderr) and argp may exit on bad usage.
 */
#ifndef FSTITCH_CLIOPT_H
#define FSTITCH_CLIOPT_H

#include <argp.h>
#include <stdbool.h>

/* The --version line, one format for every command: "NAME (fstitch)
 * VERSION", as coreutils prints it, whatever name the command was run
 * under (mkfs.fstitch prints fstitch-mkfs).  Write once at file scope:
 *	CLI_VERSION("pgsync");
 * FSTITCH_VERSION comes from the Makefile. */
#define CLI_VERSION(name) const char *argp_program_version = name " (fstitch) " FSTITCH_VERSION

/* Exit statuses of every command except fstitch-mkfs (which uses the mkfs
 * family's 0/8/16) and pgrun (which passes its command's status on). */
enum cli_exit {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAILURE = 1,
	CLI_EXIT_USAGE = 64,
};

/* What the shared options set.  Defaults: dir NULL (the current
 * directory), json false, verbosity 0; -q sets -1, each -v adds one. */
struct cliopt {
	const char *dir;
	bool json;
	int verbosity;
};
extern struct cliopt cliopt;

/* Children to list in a command's struct argp_child array, each on its own
 * so that a command offers only the options that mean something to it:
 *   cliopt_verbosity_argp  -q/--quiet, -v/--verbose
 *   cliopt_dir_argp        -C DIR/--directory=DIR (the mount to talk to)
 *   cliopt_json_argp       --json (machine-readable output)
 * Example:
 *	static const struct argp_child children[] = {
 *		{ &cliopt_verbosity_argp, 0, NULL, 0 },
 *		{ 0 }
 *	};
 */
extern const struct argp cliopt_verbosity_argp;
extern const struct argp cliopt_dir_argp;
extern const struct argp cliopt_json_argp;

/* Print "prog: message\n" to stderr, prog being the name the command was
 * run as (so mkfs.fstitch reports as itself).  fmt is printf-like. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The same, ending with ": strerror(errnum)" (errnum positive or
 * negative, as lib/ returns it). */
void cli_error_errno(int errnum, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
