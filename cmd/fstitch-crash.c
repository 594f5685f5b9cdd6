/* fstitch-crash: run a command on a recorded fstitch mount, then check
 * another command against every crash state of that run
 * (lib/crash/crashrun.c, lib/crash/crashplan.c). */
#include <argp.h>
#include <errno.h>
#include <sched.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>
#include "cli/cliopt.h"
#include "crash/crashplan.h"
#include "crash/crashrun.h"
#include "util/mountinfo.h"
#include "util/size.h"

#define EXIT_RUN_FAIL 125

enum {
	KEY_IMAGE = 0x200,
	KEY_SIZE,
	KEY_SETUP,
	KEY_REC,
	KEY_JOBS,
	KEY_SEED,
	KEY_MAX,
	KEY_EXHAUSTIVE,
	KEY_SAMPLES,
	KEY_FSCK,
	KEY_NO_MOUNT,
	KEY_LIST,
	KEY_SHOW,
	KEY_RW,
	KEY_FAIL_FAST,
};

enum sub { SUB_NONE, SUB_RUN, SUB_STATES, SUB_CHECK, SUB_IMAGE };

static struct {
	enum sub sub;
	const char *opts, *image, *size, *setup, *rec;
	const char *pos[3];
	int npos;
	char **cmd;
	unsigned jobs;
	struct crash_plan_opts plan;
	enum crash_fsck fsck;
	bool no_mount, list, rw, fail_fast;
	size_t show;
} A = {.jobs = 1, .plan = {.seed = 1}, .show = 5};

static const struct argp_option options[] = {
    {NULL, 0, NULL, 0, "run:", 1},
    {"options", 'o', "OPTS", 0, "fstitch-mount options for both mounts (e.g. consistency=none)", 1},
    {"image", KEY_IMAGE, "IMG", 0, "Start from a copy of IMG (IMG itself is not changed)", 1},
    {"size", KEY_SIZE, "SIZE", 0, "Start from a new file system of SIZE (default 8M)", 1},
    {"setup", KEY_SETUP, "CMD", 0, "Run sh -c CMD on a plain mount before recording", 1},
    {"rec", KEY_REC, "DIR", 0, "Keep the log and the image in DIR (required)", 1},
    {NULL, 0, NULL, 0, "states, check and image (the same values give the same states):", 2},
    {"seed", KEY_SEED, "S", 0, "Seed for sampled states (default 1)", 2},
    {"max", KEY_MAX, "N", 0, "Take at most N states (default: every one)", 2},
    {"exhaustive", KEY_EXHAUSTIVE, "N", 0,
     "Every subset of a round of at most N writes (default 4, at most 20)", 2},
    {"samples", KEY_SAMPLES, "N", 0, "Subsets drawn from a larger round (default 16)", 2},
    {"list", KEY_LIST, NULL, 0, "states: list each state", 2},
    {NULL, 0, NULL, 0, "check:", 3},
    {"jobs", 'j', "N", 0, "Check N states at once (default 1)", 3},
    {"fsck", KEY_FSCK, "HOW", 0,
     "repair (e2fsck -fy, the default), preen (e2fsck -p must be enough) or none", 3},
    {"no-mount", KEY_NO_MOUNT, NULL, 0, "Give CHECK only the image, in $FSTITCH_IMAGE", 3},
    {"rw", KEY_RW, NULL, 0,
     "Mount each state read-write, for a check that must write (its changes are thrown away)", 3},
    {"show", KEY_SHOW, "N", 0, "Describe the first N failed states (default 5)", 3},
    {"fail-fast", KEY_FAIL_FAST, NULL, 0,
     "Stop at the first state that fails (the states are taken in order)", 3},
    {0}};

static const struct argp_child children[] = {{&cliopt_json_argp, 0, NULL, 4}, {0}};

static int parse_num(const char *s, uint64_t max, uint64_t *out)
{
	return num_parse(s, 0, max, out) < 0 ? -EINVAL : 0;
}

static const char *const sub_names[] = {NULL, "run", "states", "check", "image"};
static const int sub_npos[] = {0, 0, 1, 1, 3};

static error_t parse(int key, char *arg, struct argp_state *state)
{
	uint64_t v;

	switch (key) {
	case 'o':
		A.opts = arg;
		return 0;
	case KEY_IMAGE:
		A.image = arg;
		return 0;
	case KEY_SIZE:
		A.size = arg;
		return 0;
	case KEY_SETUP:
		A.setup = arg;
		return 0;
	case KEY_REC:
		A.rec = arg;
		return 0;
	case 'j':
		if (parse_num(arg, 1024, &v) || !v)
			argp_error(state, "--jobs takes a number from 1 to 1024, not '%s'", arg);
		A.jobs = (unsigned)v;
		return 0;
	case KEY_SEED:
		if (parse_num(arg, UINT64_MAX, &v))
			argp_error(state, "--seed takes a number, not '%s'", arg);
		A.plan.seed = v;
		return 0;
	case KEY_MAX:
		if (parse_num(arg, SIZE_MAX, &v) || !v)
			argp_error(state, "--max takes a positive number, not '%s'", arg);
		A.plan.max = (size_t)v;
		return 0;
	case KEY_EXHAUSTIVE:
		if (parse_num(arg, 20, &v) || !v)
			argp_error(state, "--exhaustive takes a number from 1 to 20, not '%s'",
				   arg);
		A.plan.exhaustive = (unsigned)v;
		return 0;
	case KEY_SAMPLES:
		if (parse_num(arg, 1 << 20, &v) || !v)
			argp_error(state, "--samples takes a positive number, not '%s'", arg);
		A.plan.samples = (unsigned)v;
		return 0;
	case KEY_LIST:
		A.list = true;
		return 0;
	case KEY_FSCK:
		if (!strcmp(arg, "repair"))
			A.fsck = CRASH_FSCK_REPAIR;
		else if (!strcmp(arg, "preen"))
			A.fsck = CRASH_FSCK_PREEN;
		else if (!strcmp(arg, "none"))
			A.fsck = CRASH_FSCK_NONE;
		else
			argp_error(state, "--fsck takes 'repair', 'preen' or 'none', not '%s'",
				   arg);
		return 0;
	case KEY_NO_MOUNT:
		A.no_mount = true;
		return 0;
	case KEY_RW:
		A.rw = true;
		return 0;
	case KEY_FAIL_FAST:
		A.fail_fast = true;
		return 0;
	case KEY_SHOW:
		if (parse_num(arg, SIZE_MAX, &v))
			argp_error(state, "--show takes a number, not '%s'", arg);
		A.show = (size_t)v;
		return 0;
	case ARGP_KEY_ARG:
		if (A.sub == SUB_NONE) {
			for (int i = SUB_RUN; i <= SUB_IMAGE; i++)
				if (!strcmp(arg, sub_names[i]))
					A.sub = (enum sub)i;
			if (A.sub == SUB_NONE)
				argp_error(state, "unknown command '%s'", arg);
			return 0;
		}
		if (A.npos < sub_npos[A.sub]) {
			A.pos[A.npos++] = arg;
			return 0;
		}
		if (A.sub != SUB_RUN && A.sub != SUB_CHECK)
			argp_error(state, "too many arguments: '%s'", arg);
		/* Everything from COMMAND on belongs to COMMAND. */
		A.cmd = &state->argv[state->next - 1];
		state->next = state->argc;
		return 0;
	case ARGP_KEY_END:
		if (A.sub == SUB_NONE)
			argp_error(state, "no command given (run, states, check or image)");
		if (A.npos < sub_npos[A.sub])
			argp_error(state, "%s needs %s", sub_names[A.sub],
				   A.sub == SUB_IMAGE ? "DIR N OUT" : "DIR");
		if ((A.sub == SUB_RUN || A.sub == SUB_CHECK) && !A.cmd)
			argp_error(state, "%s needs a command after --", sub_names[A.sub]);
		if (A.sub == SUB_RUN && !A.rec)
			argp_error(state, "run needs --rec DIR");
		if (A.rw && A.no_mount)
			argp_error(state, "--rw and --no-mount cannot be used together");
		if (A.image && A.size)
			argp_error(state, "--image and --size cannot be used together");
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

CLI_VERSION("fstitch-crash");

static const struct argp argp = {
    options,
    parse,
    "run [-o OPTS] [--image IMG | --size SIZE] [--setup CMD] --rec DIR -- COMMAND...\n"
    "states [--seed S] [--max N] [--list] DIR\n"
    "check [--jobs N] [--seed S] [--max N] [--fsck HOW] [--no-mount | --rw] [--fail-fast] DIR -- "
    "CHECK...\n"
    "image [--seed S] DIR N OUT",
    "Crash-test a command: record its run on an fstitch mount, then check "
    "every disk state a power failure during that run could leave.\v"
    "Exit status: run: COMMAND's own (125 when fstitch-crash fails); check: "
    "0 when every state passed, 1 when a state failed or on an error; "
    "states and image: 0, or 1 on an error; 64 for a usage error.",
    children,
    NULL,
    NULL};

/* ---- helpers ----------------------------------------------------------- */

static char self_dir[PATH_MAX];

/* A sibling of this program (the same install or build), else PATH. */
static const char *tool(const char *name)
{
	static char buf[5][PATH_MAX];
	static int k;
	char *p;

	if (!self_dir[0]) {
		ssize_t n = readlink("/proc/self/exe", self_dir, sizeof(self_dir) - 1);

		self_dir[n > 0 ? n : 0] = 0;
		p = strrchr(self_dir, '/');
		if (p)
			*p = 0;
		else
			strcpy(self_dir, ".");
	}
	if (k < 5 && snprintf(buf[k], PATH_MAX, "%s/%s", self_dir, name) < PATH_MAX &&
	    access(buf[k], X_OK) == 0)
		return buf[k++];
	return name;
}

/* e2fsprogs live in /sbin, which a user's PATH may lack. */
static const char *sbin(const char *name)
{
	static const char *const dirs[] = {"/usr/sbin", "/sbin"};
	static char buf[2][64];
	static int k;

	for (size_t i = 0; i < 2 && k < 2; i++) {
		snprintf(buf[k], sizeof(buf[k]), "%s/%s", dirs[i], name);
		if (access(buf[k], X_OK) == 0)
			return buf[k++];
	}
	return name;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void report_err(int r, const struct crash_err *e)
{
	char what[PATH_MAX + 128];

	if (!e->what) {
		cli_error_errno(r, "%s failed", sub_names[A.sub]);
		return;
	}
	if (e->arg)
		snprintf(what, sizeof(what), "%s '%s'", e->what, e->arg);
	else
		snprintf(what, sizeof(what), "%s", e->what);
	if (e->status > 0)
		cli_error("%s: exit status %d", what, e->status);
	else
		cli_error_errno(r, "%s", what);
}

static char *log_path(const char *dir)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, CRASH_LOG) < 0)
		return NULL;
	return p;
}

static int open_plan(const char *dir, struct crash_plan **plan)
{
	char *log = log_path(dir);
	int r;

	if (!log) {
		cli_error_errno(ENOMEM, "cannot load '%s'", dir);
		return -1;
	}
	r = crash_plan_open(log, &A.plan, plan);
	if (r == -EPROTO)
		cli_error("cannot load '%s': not an fstitch-crash log", log);
	else if (r)
		cli_error_errno(r, "cannot load '%s'", log);
	free(log);
	return r ? -1 : 0;
}

/* ---- run --------------------------------------------------------------- */

static struct crash_tools tools;

static int do_run(void)
{
	struct crash_run_opts o = {
	    .tools = &tools,
	    .dir = A.rec,
	    .image = A.image,
	    .size = A.size,
	    .mount_opts = A.opts,
	    .setup = A.setup,
	    .argv = A.cmd,
	};
	struct crash_err e;
	char *abs = NULL, cwd[PATH_MAX];
	int st = 0, r;

	/* COMMAND sees the mount by an absolute path, whatever DIR was. */
	if (A.rec[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, A.rec) < 0) {
			cli_error_errno(errno, "cannot find the current directory");
			return EXIT_RUN_FAIL;
		}
		o.dir = abs;
	}
	fflush(stdout);
	r = crash_run(&o, &st, &e);
	free(abs);
	if (r) {
		report_err(r, &e);
		return EXIT_RUN_FAIL;
	}
	return st;
}

/* ---- states ------------------------------------------------------------ */

static int do_states(void)
{
	struct crash_plan *p;
	struct crash_plan_opts po;
	struct crash_plan_state s;
	size_t i, n;

	if (open_plan(A.pos[0], &p))
		return CLI_EXIT_FAILURE;
	po = crash_plan_options(p);
	n = crash_plan_count(p);
	if (cliopt.json) {
		printf("{\"states\": %zu, \"selected\": %zu, \"rounds\": %zu, \"barriers\": %zu, "
		       "\"writes\": %zu, \"image_bytes\": %" PRIu64 ", \"seed\": %" PRIu64
		       ", \"exhaustive\": %u, \"samples\": %u",
		       crash_plan_total(p), n, crash_plan_rounds(p), crash_plan_barriers(p),
		       crash_plan_writes(p), crash_plan_image_bytes(p), po.seed, po.exhaustive,
		       po.samples);
		if (A.list) {
			printf(", \"list\": [");
			for (i = 0; i < n; i++) {
				crash_plan_selected(p, i, &s);
				printf("%s{\"state\": %zu, \"round\": %zu, \"applied\": %zu, "
				       "\"writes\": %zu, \"boundary\": %s}",
				       i ? ", " : "", s.state, s.round, s.napplied, s.nround,
				       s.boundary ? "true" : "false");
			}
			printf("]");
		}
		printf("}\n");
	} else {
		printf("states %zu\nselected %zu\nrounds %zu\nbarriers %zu\nwrites %zu\n"
		       "seed %" PRIu64 "\nexhaustive %u\nsamples %u\n",
		       crash_plan_total(p), n, crash_plan_rounds(p), crash_plan_barriers(p),
		       crash_plan_writes(p), po.seed, po.exhaustive, po.samples);
		for (i = 0; A.list && i < n; i++) {
			crash_plan_selected(p, i, &s);
			printf("state %zu round %zu applied %zu of %zu%s\n", s.state, s.round,
			       s.napplied, s.nround, s.boundary ? " boundary" : "");
		}
	}
	crash_plan_free(p);
	return fflush(stdout) == EOF ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* ---- image ------------------------------------------------------------- */

static int do_image(void)
{
	struct crash_plan *p;
	uint64_t n;
	int r;

	if (parse_num(A.pos[1], SIZE_MAX, &n)) {
		cli_error("bad state number '%s'", A.pos[1]);
		return CLI_EXIT_USAGE;
	}
	if (open_plan(A.pos[0], &p))
		return CLI_EXIT_FAILURE;
	r = crash_write_state(p, (size_t)n, A.pos[2]);
	if (r == -ERANGE)
		cli_error("no crash state %" PRIu64 ": '%s' has %zu (0 to %zu)", n, A.pos[0],
			  crash_plan_total(p), crash_plan_total(p) - 1);
	else if (r)
		cli_error_errno(r, "cannot write '%s'", A.pos[2]);
	crash_plan_free(p);
	return r ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* ---- check ------------------------------------------------------------- */

static size_t total_sel;

static void progress(size_t done, size_t failed, void *arg)
{
	fprintf(stderr, "\rfstitch-crash: %zu/%zu states checked, %zu failed", done, total_sel,
		failed);
	if (done == total_sel)
		fputs("\n", stderr);
	fflush(stderr);
}

static const char *why_name(enum crash_why w)
{
	switch (w) {
	case CRASH_FAIL_FSCK:
		return "fsck";
	case CRASH_FAIL_MOUNT:
		return "mount";
	case CRASH_FAIL_CHECK:
		return "check";
	default:
		return "ok";
	}
}

/* e2fsck's findings: its output without the progress lines. */
static void print_findings(const char *out, const char *indent)
{
	const char *line = out, *nl;

	for (; line && *line; line = nl ? nl + 1 : NULL) {
		int len;

		nl = strchr(line, '\n');
		len = nl ? (int)(nl - line) : (int)strlen(line);
		if (len == 0 || !strncmp(line, "Pass ", 5) || !strncmp(line, "e2fsck ", 7) ||
		    memmem(line, (size_t)len, " files (", 8) ||
		    memmem(line, (size_t)len, "FILE SYSTEM WAS MODIFIED", 24))
			continue;
		printf("%s%.*s\n", indent, len, line);
	}
}

static void print_text(const struct crash_plan *p, const struct crash_result *res, size_t n,
		       size_t failed, const struct crash_check_stats *st, double secs)
{
	size_t i, shown = 0;
	const char *fsck = A.fsck == CRASH_FSCK_PREEN ? "e2fsck -fp" : "e2fsck -fy";

	for (i = 0; i < n && shown < A.show; i++) {
		const struct crash_result *r = &res[i];

		if (r->why == CRASH_OK)
			continue;
		shown++;
		printf("state %zu (round %zu, %zu of %zu writes): ", r->st.state, r->st.round,
		       r->st.napplied, r->st.nround);
		if (r->why == CRASH_FAIL_FSCK)
			printf("%s left errors (exit status %d)\n", fsck, r->fsck_status);
		else if (r->why == CRASH_FAIL_MOUNT)
			printf("the repaired image does not mount\n");
		else
			printf("check failed (exit status %d)\n", r->check_status);
		if (r->fsck_status > 0) {
			printf("  %s (exit status %d) found:\n", fsck, r->fsck_status);
			print_findings(r->fsck_out, "    ");
		}
		if (r->check_out && *r->check_out) {
			printf("  %s:\n",
			       r->why == CRASH_FAIL_MOUNT ? "fstitch-mount said" : "output");
			print_findings(r->check_out, "    ");
		}
	}
	if (failed) {
		printf("failed states:");
		for (i = 0; i < n; i++)
			if (res[i].why != CRASH_OK)
				printf(" %zu", res[i].st.state);
		printf("\n");
	}
	printf("%zu of %zu states checked (seed %" PRIu64 "), %zu failed, %zu repaired by "
	       "e2fsck; %.1f states/s%s\n",
	       n, crash_plan_total(p), crash_plan_options(p).seed, failed, st->repaired,
	       secs > 0 ? (double)n / secs : 0.0,
	       n < crash_plan_count(p) ? "; stopped at the first failure (--fail-fast)" : "");
}

static void print_json(const struct crash_plan *p, const struct crash_result *res, size_t n,
		       size_t failed, const struct crash_check_stats *st, double secs)
{
	size_t i, k = 0;

	printf("{\"states\": %zu, \"checked\": %zu, \"failed\": %zu, \"repaired\": %zu, "
	       "\"seed\": %" PRIu64 ", \"jobs\": %u, \"seconds\": %.3f, "
	       "\"states_per_second\": %.2f, \"blocks_written\": %" PRIu64
	       ", \"full_writes\": %" PRIu64 ", \"stopped_early\": %s, \"failures\": [",
	       crash_plan_total(p), n, failed, st->repaired, crash_plan_options(p).seed, A.jobs,
	       secs, secs > 0 ? (double)n / secs : 0.0, st->blocks_written, st->full_writes,
	       n < crash_plan_count(p) ? "true" : "false");
	for (i = 0; i < n; i++) {
		const struct crash_result *r = &res[i];

		if (r->why == CRASH_OK)
			continue;
		printf("%s{\"state\": %zu, \"round\": %zu, \"applied\": %zu, \"writes\": %zu, "
		       "\"reason\": \"%s\", \"fsck_status\": %d, \"check_status\": %d, \"fsck\": ",
		       k++ ? ", " : "", r->st.state, r->st.round, r->st.napplied, r->st.nround,
		       why_name(r->why), r->fsck_status, r->check_status);
		json_str(stdout, r->fsck_out);
		printf(", \"output\": ");
		json_str(stdout, r->check_out);
		printf("}");
	}
	printf("]}\n");
}

static int do_check(void)
{
	struct crash_check_opts o = {
	    .tools = &tools,
	    .jobs = A.jobs,
	    .fsck = A.fsck,
	    .no_mount = A.no_mount,
	    .rw = A.rw,
	    .fail_fast = A.fail_fast,
	    .argv = A.cmd,
	};
	struct crash_check_stats st = {0};
	struct crash_result *res = NULL;
	struct crash_plan *p;
	struct crash_err e;
	struct timespec t0, t1;
	char work[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	size_t failed = 0, n;
	double secs;
	int r;

	if (open_plan(A.pos[0], &p))
		return CLI_EXIT_FAILURE;
	n = total_sel = crash_plan_count(p);
	snprintf(work, sizeof(work), "%s/fstitch-crash.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(work)) {
		cli_error_errno(errno, "cannot make a scratch directory '%s'", work);
		crash_plan_free(p);
		return CLI_EXIT_FAILURE;
	}
	o.workdir = work;
	if (isatty(2) && !cliopt.json)
		o.progress = progress;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = crash_check(p, &o, &res, &failed, &st, &e);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	rmdir(work);
	if (r) {
		if (o.progress)
			fputs("\n", stderr);
		report_err(r, &e);
		crash_plan_free(p);
		return CLI_EXIT_FAILURE;
	}
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (cliopt.json)
		print_json(p, res, st.checked, failed, &st, secs);
	else
		print_text(p, res, st.checked, failed, &st, secs);
	crash_results_free(res, n);
	crash_plan_free(p);
	if (fflush(stdout) == EOF)
		return CLI_EXIT_FAILURE;
	return failed ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* The paths this program works in, resolved once: the current
 * directory, the recording (--rec, or DIR), the image, and every
 * absolute path the command is given.  A copy of a mount that holds one of
 * them is kept (drop_fuse_copies()). */
struct held {
	char *path[64];
	size_t n;
};

static void hold(struct held *h, const char *path)
{
	char real[PATH_MAX];

	if (path && h->n < sizeof(h->path) / sizeof(h->path[0]) && realpath(path, real) &&
	    (h->path[h->n] = strdup(real)))
		h->n++;
}

/* A FUSE mount (e->target) that holds none of the paths in arg: pushed
 * on the list of copies to detach. */
struct fuse_copies {
	const struct held *held;
	char *target[256];
	size_t n;
};

static int note_fuse_copy(const struct mountinfo_ent *e, void *arg)
{
	struct fuse_copies *c = arg;
	size_t len = strlen(e->target), i;

	if (strncmp(e->fstype, "fuse", 4) != 0 || c->n == sizeof(c->target) / sizeof(c->target[0]))
		return 0;
	for (i = 0; i < c->held->n; i++) {
		const char *p = c->held->path[i];

		if (len == 1 || (strncmp(p, e->target, len) == 0 && (p[len] == '/' || !p[len])))
			return 0; /* "/" or a prefix of p */
	}
	if ((c->target[c->n] = strdup(e->target)))
		c->n++;
	return 0;
}

/* The new namespace starts with a copy of every mount, and a copy of a
 * FUSE mount keeps its file system alive after its owner unmounts it: no
 * final flush, the daemon serving on, until this program ends.  Another
 * user's "umount /mnt && e2fsck -fn disk.img" would then check an image
 * that is not yet written.  So the copies of FUSE mounts are detached
 * here, newest first, except one that holds a path this program works in
 * (struct held). */
static void drop_fuse_copies(void)
{
	struct held h = {.n = 0};
	struct fuse_copies c = {.held = &h, .n = 0};
	size_t i;

	hold(&h, ".");
	hold(&h, A.rec);
	hold(&h, A.image);
	hold(&h, A.pos[0]);
	for (i = 0; A.cmd && A.cmd[i]; i++)
		if (A.cmd[i][0] == '/')
			hold(&h, A.cmd[i]);
	(void)mountinfo_each(NULL, note_fuse_copy, &c);
	while (c.n > 0) {
		c.n--;
		(void)umount2(c.target[c.n], MNT_DETACH);
		free(c.target[c.n]);
	}
	for (i = 0; i < h.n; i++)
		free(h.path[i]);
}

/* As root, the mounts of the recording and of each state are made in a
 * mount namespace of this process's own.  A namespace made elsewhere while
 * one of them is mounted (a service's private /tmp, unshare -m) would hold
 * a copy of it, and a copy keeps the file system alive after the
 * unmount: its daemon would not exit.  Without the privilege, or where
 * namespaces are not available, the mounts go where they would anyway. */
static void own_mount_namespace(void)
{
	if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0)
		return;
	/* Nothing made here propagates back to the namespace we came from;
	 * if that cannot be had, mounts propagate as they did before. */
	(void)mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	drop_fuse_copies();
}

int main(int argc, char **argv)
{
	argp_err_exit_status = CLI_EXIT_USAGE;
	argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, NULL);
	tools.mount = tool("fstitch-mount");
	tools.mkfs = tool("fstitch-mkfs");
	tools.fusermount = "fusermount3";
	tools.e2fsck = sbin("e2fsck");
	if (A.sub == SUB_RUN || A.sub == SUB_CHECK)
		own_mount_namespace();
	switch (A.sub) {
	case SUB_RUN:
		return do_run();
	case SUB_STATES:
		return do_states();
	case SUB_CHECK:
		return do_check();
	default:
		return do_image();
	}
}
