/* Shared command-line options and messages; see cliopt.h. */
#include "cliopt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cliopt cliopt;

enum {
	KEY_JSON = 0x100,
};

static error_t verbosity_parse(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case 'q':
		cliopt.verbosity = -1;
		return 0;
	case 'v':
		/* -q then -v: the last word wins, as in most tools. */
		cliopt.verbosity = cliopt.verbosity < 0 ? 1 : cliopt.verbosity + 1;
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

static const struct argp_option verbosity_options[] = {
    {"quiet", 'q', NULL, 0, "Print nothing but errors", 0},
    {"verbose", 'v', NULL, 0, "Say more (repeat for even more)", 0},
    {0}};

const struct argp cliopt_verbosity_argp = {
    .options = verbosity_options,
    .parser = verbosity_parse,
};

static error_t dir_parse(int key, char *arg, struct argp_state *state)
{
	if (key != 'C')
		return ARGP_ERR_UNKNOWN;
	if (!*arg)
		argp_error(state, "-C needs a directory, not an empty string");
	cliopt.dir = arg;
	return 0;
}

static const struct argp_option dir_options[] = {
    {"directory", 'C', "DIR", 0,
     "Talk to the fstitch mount that holds DIR (default: the current directory)", 0},
    {0}};

const struct argp cliopt_dir_argp = {
    .options = dir_options,
    .parser = dir_parse,
};

static error_t json_parse(int key, char *arg, struct argp_state *state)
{
	if (key != KEY_JSON)
		return ARGP_ERR_UNKNOWN;
	cliopt.json = true;
	return 0;
}

static const struct argp_option json_options[] = {
    {"json", KEY_JSON, NULL, 0, "Print JSON instead of text", 0}, {0}};

const struct argp cliopt_json_argp = {
    .options = json_options,
    .parser = json_parse,
};

static void vmessage(int errnum, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", program_invocation_short_name);
	vfprintf(stderr, fmt, ap);
	if (errnum)
		fprintf(stderr, ": %s", strerror(abs(errnum)));
	fputc('\n', stderr);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(0, fmt, ap);
	va_end(ap);
}

void cli_error_errno(int errnum, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(errnum, fmt, ap);
	va_end(ap);
}
