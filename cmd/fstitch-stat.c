/* fstitch-stat: inspect a running fstitch mount (patch graph, ready lists,
 * undo memory, patchgroups, I/O).  The daemon takes the snapshot
 * (lib/inspect/inspect.c); this file asks for it and renders it (lib/inspect/statfmt.c).
 */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli/cliopt.h"
#include "proto/ctl.h"
#include "inspect/inspect.h"
#include "cli/pgcli.h"
#include "cli/statfmt.h"
#include "util/size.h"

enum {
	KEY_BLOCKS = 0x200,
	KEY_GROUPS,
	KEY_PATCHES,
	KEY_WHY,
	KEY_DOT,
	KEY_LIMIT,
	KEY_WATCH,
};

static struct {
	const char *where; /* MOUNTPOINT */
	uint32_t view;
	uint64_t block;
	uint32_t limit;
	bool dot;
	double interval;     /* 0: one snapshot */
	unsigned long count; /* 0: until interrupted */
	int nviews;
	int nnum;      /* numbers given as arguments */
	int watch_opt; /* --watch gave the interval */
} A;

static const struct argp_option options[] = {
    {NULL, 0, NULL, 0, "Views (default: a summary of the engine):", 1},
    {"blocks", KEY_BLOCKS, NULL, 0,
     "Dirty blocks, oldest first: patches, ready patches, undo bytes, age", 1},
    {"groups", KEY_GROUPS, NULL, 0,
     "Patchgroups: id, owner, state, befores/afters, pending changes", 1},
    {"patches", KEY_PATCHES, "BLOCK", 0, "The unwritten patches of BLOCK and what each waits for",
     1},
    {"why", KEY_WHY, "BLOCK", 0, "The chain of dependencies keeping BLOCK from being written", 1},
    {NULL, 0, NULL, 0, "Output:", 2},
    {"dot", KEY_DOT, NULL, 0,
     "Graphviz dot: blocks as clusters, patches as nodes, dependencies as edges", 2},
    {"limit", KEY_LIMIT, "N", 0,
     "At most N entries per list, patches in a graph, steps of a chain (default 64)", 2},
    {"watch", KEY_WATCH, "SECONDS", 0,
     "Print levels and rates every SECONDS until interrupted (or COUNT lines)", 2},
    {0}};

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	return num_parse(s, 0, max, out) < 0 ? -EINVAL : 0;
}

static int parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < 0.01 || v > 86400)
		return -EINVAL;
	*out = v;
	return 0;
}

static void set_view(struct argp_state *state, uint32_t view, const char *block)
{
	if (block && parse_u64(block, UINT64_MAX - 1, &A.block) < 0)
		argp_error(state, "invalid block number '%s'", block);
	A.view = view;
	A.nviews++;
}

/* --watch=SECONDS, or the INTERVAL operand, that parse_seconds() refused. */
#define BAD_INTERVAL "invalid interval '%s' (seconds, 0.01 to 86400)"

static error_t parse(int key, char *arg, struct argp_state *state)
{
	uint64_t v;

	switch (key) {
	case KEY_BLOCKS:
		set_view(state, INSP_BLOCKS, NULL);
		return 0;
	case KEY_GROUPS:
		set_view(state, INSP_GROUPS, NULL);
		return 0;
	case KEY_PATCHES:
		set_view(state, INSP_PATCHES, arg);
		return 0;
	case KEY_WHY:
		set_view(state, INSP_WHY, arg);
		return 0;
	case KEY_DOT:
		A.dot = true;
		return 0;
	case KEY_LIMIT:
		if (parse_u64(arg, INSP_LIMIT_MAX, &v) < 0 || v == 0)
			argp_error(state, "invalid limit '%s' (1 to %d)", arg, INSP_LIMIT_MAX);
		A.limit = (uint32_t)v;
		return 0;
	case KEY_WATCH:
		if (parse_seconds(arg, &A.interval) < 0)
			argp_error(state, BAD_INTERVAL, arg);
		A.watch_opt = 1;
		return 0;
	case ARGP_KEY_ARG:
		/* [MOUNTPOINT] [INTERVAL [COUNT]], as vmstat: a number is an
		 * interval or a count (name a directory called "1" as ./1).
		 * After --watch=SECONDS the interval is known, so a number is
		 * the count.  (argp hands over options before operands.) */
		if ((arg[0] >= '0' && arg[0] <= '9') || arg[0] == '.') {
			int slot = A.nnum + A.watch_opt; /* 0 interval, 1 count */

			if (slot == 0 && parse_seconds(arg, &A.interval) == 0) {
				A.nnum++;
				return 0;
			}
			if (slot == 1 && parse_u64(arg, ULONG_MAX, &v) == 0 && v > 0) {
				A.count = (unsigned long)v;
				A.nnum++;
				return 0;
			}
			if (slot > 0)
				argp_error(state, "invalid %s '%s'",
					   slot == 1 ? "count" : "argument", arg);
			/* after the mount point a number can only be the
			 * interval */
			if (A.where)
				argp_error(state, BAD_INTERVAL, arg);
		}
		if (A.where || A.nnum)
			argp_error(state, "unexpected argument '%s'", arg);
		A.where = arg;
		return 0;
	case ARGP_KEY_END:
		if (A.nviews > 1)
			argp_error(state, "--blocks, --groups, --patches and --why are exclusive");
		if (A.where && cliopt.dir)
			argp_error(state, "give either MOUNTPOINT or -C DIR, not both");
		if (A.dot && cliopt.json)
			argp_error(state, "--dot and --json are exclusive");
		if (A.dot && A.interval > 0)
			argp_error(state, "--dot cannot be used with an interval");
		if (cliopt.verbosity < 0 && A.interval > 0)
			argp_error(state, "-q cannot be used with an interval");
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

static const struct argp_child children[] = {{&cliopt_dir_argp, 0, NULL, 0},
					     {&cliopt_json_argp, 0, NULL, 0},
					     {&cliopt_verbosity_argp, 0, NULL, 0},
					     {0}};

CLI_VERSION("fstitch-stat");

static const struct argp argp = {
    options,
    parse,
    "[MOUNTPOINT] [INTERVAL [COUNT]]",
    "Show what the patch engine of a running fstitch mount is doing: blocks "
    "cached, dirty and being written, patches and their undo memory, ready "
    "lists, write rounds and rollbacks, patchgroups, and why a block is not "
    "written yet.  MOUNTPOINT is any path inside the mount (default: the "
    "current directory).  With INTERVAL (or --watch), print one line of "
    "levels and rates every INTERVAL seconds, COUNT times.  With -q, print "
    "nothing: the exit status says whether the path is in a live fstitch "
    "mount.  With -v, the summary also explains the oldest dirty block.  "
    "As in vmstat, the first line comes at once with rates since the mount "
    "started; after --watch, a number is COUNT.\v"
    "Exit status: 0 done, 1 failed (not an fstitch mount, daemon unreachable), "
    "64 usage error.",
    children,
    NULL,
    NULL};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int fetch(int fd, uint32_t view, struct insp_snap **out)
{
	struct insp_query q = {.view = view, .limit = A.limit, .block = A.block};

	return inspect_fetch(fd, &q, out);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap(double secs)
{
	struct timespec ts = {.tv_sec = (time_t)secs,
			      .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9)};

	/* A signal ends the wait early; the loop then sees `stop`. */
	nanosleep(&ts, NULL);
}

static const char *fetch_why(int err)
{
	switch (-err) {
	case EOPNOTSUPP:
		return "the daemon does not serve statistics (too old)";
	case EPROTO:
		return "the daemon sent a reply this fstitch-stat does not understand";
	default:
		return strerror(-err);
	}
}

/* "cannot get statistics", or for a daemon that died meanwhile the
 * message every command gives for a dead mount. */
static void fetch_error(const char *where, int err)
{
	if (err == -ECONNRESET || err == -EPIPE)
		pgcli_gone(where);
	else if (err == -ENXIO && (A.view == INSP_WHY || A.view == INSP_PATCHES))
		cli_error("no such block %" PRIu64 ": past the end of the file system", A.block);
	else
		cli_error("cannot get statistics from '%s': %s", where, fetch_why(err));
}

static int render(const struct insp_snap *s)
{
	if (A.dot)
		return statfmt_dot(stdout, s);
	if (cliopt.json)
		return statfmt_json(stdout, s);
	return statfmt_text(stdout, s);
}

/* The live view, as vmstat(8) runs: the first line at once, with the
 * rates averaged since the mount started, then one line (or JSON object)
 * every interval with the rates over it, COUNT lines in all.  Other
 * views are printed whole each time. */
static int watch(int fd, const char *where)
{
	struct insp_snap *prev = NULL, *cur = NULL;
	unsigned long n = 0;
	double start, t0 = 0, t1, secs;
	int r, lines = 0;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	r = fetch(fd, A.view, &cur);
	start = t1 = now_s();
	while (r == 0) {
		secs = prev ? t1 - t0 : (double)cur->sum.age_ms / 1000.0;
		if (A.view != INSP_SUMMARY) {
			if (!cliopt.json)
				printf("%s-- at %.1fs\n", n ? "\n" : "", t1 - start);
			r = render(cur);
		} else if (cliopt.json) {
			r = statfmt_rates_json(stdout, prev, cur, secs);
		} else {
			if (lines++ % 20 == 0)
				statfmt_rates_header(stdout);
			r = statfmt_rates_line(stdout, prev, cur, secs);
		}
		fflush(stdout);
		inspect_free(prev);
		prev = cur;
		cur = NULL;
		t0 = t1;
		n++;
		if (r) {
			cli_error_errno(r, "cannot write the output");
			inspect_free(prev);
			return CLI_EXIT_FAILURE;
		}
		if (A.count && n >= A.count)
			break;
		nap(A.interval);
		if (stop)
			break;
		r = fetch(fd, A.view, &cur);
		t1 = now_s();
	}
	inspect_free(prev);
	if (r) {
		fetch_error(where, r);
		return CLI_EXIT_FAILURE;
	}
	return CLI_EXIT_OK;
}

/* -v: after the summary, why the oldest dirty block is still dirty. */
static int explain_oldest(int fd, const char *where)
{
	struct insp_query q = {.view = INSP_BLOCKS, .limit = 1};
	struct insp_snap *s = NULL;
	int r;

	r = inspect_fetch(fd, &q, &s);
	if (r == 0 && s->nblocks) {
		q.view = INSP_WHY;
		q.block = s->blocks[0].blkno;
		q.limit = A.limit;
		inspect_free(s);
		s = NULL;
		printf("\noldest dirty block:\n");
		r = inspect_fetch(fd, &q, &s);
		if (r == 0)
			statfmt_text(stdout, s);
	}
	inspect_free(s);
	if (r < 0) {
		fetch_error(where, r);
		return r;
	}
	if (fflush(stdout) == EOF || ferror(stdout)) {
		cli_error_errno(EIO, "cannot write the output");
		return -EIO;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct insp_snap *s = NULL;
	const char *where;
	char sock[PATH_MAX];
	int r, fd = -1, status = CLI_EXIT_FAILURE;

	/* getopt names the program by argv[0] in its messages. */
	argv[0] = program_invocation_short_name;
	argp_parse(&argp, argc, argv, 0, NULL, NULL);
	if (A.dot && A.view == INSP_SUMMARY)
		A.view = INSP_GRAPH;
	where = A.where ? A.where : cliopt.dir;
	if (!where)
		where = getenv("FSTITCH_CONTROL");
	if (!where || !*where)
		where = ".";
	r = ctl_find_socket(where, sock, sizeof(sock));
	if (r == -ENXIO) {
		cli_error("'%s' is not inside an fstitch mount", where);
		return CLI_EXIT_FAILURE;
	}
	if (r == -ECONNRESET) {
		pgcli_gone(where);
		return CLI_EXIT_FAILURE;
	}
	if (r < 0) {
		cli_error_errno(r, "cannot use '%s'", where);
		return CLI_EXIT_FAILURE;
	}
	r = ctl_connect(sock, &fd);
	if (r == -ECONNREFUSED) {
		/* The socket file outlived its (killed) daemon. */
		pgcli_gone(where);
		return CLI_EXIT_FAILURE;
	}
	if (r < 0) {
		cli_error_errno(r, "cannot reach the daemon of '%s' at '%s'", where, sock);
		return CLI_EXIT_FAILURE;
	}
	if (A.interval > 0) {
		status = watch(fd, where);
		goto out;
	}
	r = fetch(fd, A.view, &s);
	if (r < 0) {
		fetch_error(where, r);
		goto out;
	}
	if (cliopt.verbosity < 0)
		goto ok;
	r = render(s);
	if (r == 0 && fflush(stdout) == EOF)
		r = -errno;
	if (r < 0) {
		cli_error_errno(r, "cannot write the output");
		goto out;
	}
	if (A.view == INSP_SUMMARY && !cliopt.json && cliopt.verbosity > 0 &&
	    explain_oldest(fd, where) < 0)
		goto out;
ok:
	status = CLI_EXIT_OK;
out:
	inspect_free(s);
	if (fd >= 0)
		close(fd);
	return status;
}
