/* pgrun: run a command, and everything it starts, inside a patchgroup. */
#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli/cliopt.h"
#include "cli/pgcli.h"
#include "util/size.h"

/* pgrun's own failures: the status env(1) and timeout(1) use, so that a
 * script can tell them from the command's. */
#define PGRUN_EXIT_FAIL	    125
#define PGRUN_EXIT_NOEXEC   126
#define PGRUN_EXIT_NOTFOUND 127

extern char **environ;

enum { KEY_ID_FILE = 0x100, KEY_ID_FD, KEY_FSYNC, KEY_ORDER };

static struct {
	pg_t group;
	pg_t after[PGCLI_AFTER_MAX];
	int nafter;
	int print_id;
	const char *id_file;
	int id_fd;
	int sync;
	int fsync_order; /* -1: leave as inherited */
	int group_order; /* -1: leave as inherited */
	char **cmd;
} o = {.id_fd = -1, .fsync_order = -1, .group_order = -1};

static volatile pid_t child; /* read by the signal handler */

static const struct argp_option options[] = {
    {NULL, 0, NULL, 0, "Group:", 1},
    {"group", 'g', "ID", 0, "Engage the existing group ID instead of creating one", 1},
    {"after", 'a', "ID", 0,
     "The new group's changes reach disk after those of group ID (repeatable)", 1},
    {"sync", 's', NULL, 0, "Wait until the group's changes are durable before exiting", 1},
    {"fsync", KEY_FSYNC, "order|keep", 0,
     "order: an fsync inside COMMAND returns at once and orders later changes "
     "after earlier ones; keep: fsync is a real fsync (default)",
     1},
    {"order", KEY_ORDER, "groups|mount", 0,
     "groups: a rename, link or longer size inside COMMAND waits only for its "
     "file's own data and the groups; mount: as the mount's rename_order says (default)",
     1},
    {NULL, 0, NULL, 0, "Group id output:", 2},
    {"print-id", 'p', NULL, 0, "Print the group id on standard output before running COMMAND", 2},
    {"id-file", KEY_ID_FILE, "FILE", 0, "Write the group id to FILE", 2},
    {"id-fd", KEY_ID_FD, "N", 0, "Write the group id to file descriptor N and close it", 2},
    {0}};

/* The value of an option that takes one of two words: 1 for yes, 0 for
 * no; anything else is a usage error. */
static int two_way(struct argp_state *state, const char *opt, const char *arg, const char *yes,
		   const char *no)
{
	if (!strcmp(arg, yes))
		return 1;
	if (strcmp(arg, no))
		argp_error(state, "%s takes '%s' or '%s', not '%s'", opt, yes, no, arg);
	return 0;
}

static error_t parse(int key, char *arg, struct argp_state *state)
{
	pg_t id;
	uint64_t v;

	switch (key) {
	case 'g':
		pgcli_argp_id(state, arg, &o.group);
		return 0;
	case 'a':
		pgcli_argp_id(state, arg, &id);
		if (o.nafter == PGCLI_AFTER_MAX)
			argp_error(state, "too many --after options (at most %d)", PGCLI_AFTER_MAX);
		o.after[o.nafter++] = id;
		return 0;
	case 's':
		o.sync = 1;
		return 0;
	case KEY_FSYNC:
		o.fsync_order = two_way(state, "--fsync", arg, "order", "keep");
		return 0;
	case KEY_ORDER:
		o.group_order = two_way(state, "--order", arg, "groups", "mount");
		return 0;
	case 'p':
		o.print_id = 1;
		return 0;
	case KEY_ID_FILE:
		o.id_file = arg;
		return 0;
	case KEY_ID_FD:
		if (num_parse(arg, 0, 1 << 20, &v) < 0)
			argp_error(state, "invalid file descriptor '%s'", arg);
		o.id_fd = (int)v;
		return 0;
	case ARGP_KEY_ARG:
		/* Everything from COMMAND on belongs to COMMAND. */
		o.cmd = &state->argv[state->next - 1];
		state->next = state->argc;
		return 0;
	case ARGP_KEY_END:
		if (!o.cmd)
			argp_error(state, "no COMMAND given");
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

CLI_VERSION("pgrun");

static const struct argp argp = {
    options,
    parse,
    "[--] COMMAND [ARG...]",
    "Run COMMAND, and every process it starts, inside a patchgroup on an "
    "fstitch mount: their changes reach disk after those of every --after "
    "group, and before those of any group that later names this one as a "
    "before.\v"
    "Exit status: COMMAND's own (128+N when it was killed by signal N); "
    "125 when pgrun itself fails, 126 when COMMAND cannot be run, 127 when "
    "it is not found, 64 for a usage error.  With --print-id the id is the "
    "first line of standard output, before anything COMMAND prints.",
    pgcli_children,
    NULL,
    NULL};

/* A signal meant to end or poke the job goes to the command, and pgrun
 * lives on to wait for every descendant, so that the group holds all
 * their changes: had pgrun died of it, the command would run on outside
 * the group.  SIGINT and SIGQUIT from the terminal (sent by the kernel)
 * reach the command directly, with its whole process group: passed on
 * only when another process sent them to pgrun. */
static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM};

static void forward(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	if ((sig == SIGINT || sig == SIGQUIT) && si->si_code > 0)
		return;
	if (child > 0)
		kill(child, sig);
}

/* The id as one line in one write(2): stdio would first fstat(2) the
 * descriptor to choose a buffer for it.  0, or -1 with errno set. */
static int write_id(int fd, pg_t id)
{
	char line[24];
	int n = snprintf(line, sizeof(line), "%lld\n", (long long)id);
	ssize_t w = write(fd, line, (size_t)n);

	if (w == n)
		return 0;
	if (w >= 0)
		errno = EIO; /* a short write: the disk is full */
	return -1;
}

/* The id to each place the options name.  0, or -1 (message printed). */
static int write_ids(pg_t id)
{
	int fd;

	if (o.print_id && write_id(STDOUT_FILENO, id) < 0) {
		cli_error_errno(errno, "cannot print the group id");
		return -1;
	}
	if (o.id_file) {
		fd = open(o.id_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0 || write_id(fd, id) < 0 || close(fd) < 0) {
			cli_error_errno(errno, "cannot write the group id to '%s'", o.id_file);
			return -1;
		}
	}
	if (o.id_fd >= 0) {
		/* Closed so that a reader of a pipe sees the end; a close
		 * that fails may have lost the line. */
		if (write_id(o.id_fd, id) < 0 || (close(o.id_fd) < 0 && errno != EINTR)) {
			cli_error_errno(errno, "cannot write the group id to fd %d", o.id_fd);
			return -1;
		}
	}
	return 0;
}

/* write_ids with SIGPIPE ignored, so that a reader that has gone makes
 * the write fail (EPIPE) and pgrun say so and close the group, instead of
 * killing pgrun before the command has run.  The disposition pgrun was
 * started with is put back before the command starts: an ignored signal
 * would stay ignored across exec. */
static int tell_id(pg_t id)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	int r;

	if (!o.print_id && !o.id_file && o.id_fd < 0)
		return 0;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGPIPE, &ign, &old);
	r = write_ids(id);
	sigaction(SIGPIPE, &old, NULL);
	return r;
}

/* Start the command: vfork and execvp.  The child runs in pgrun's memory
 * until it execs, so nothing of pgrun's address space is copied and no
 * page of it faults in again.  posix_spawnp would do the same, but its
 * child first resets the disposition of every signal, two system calls
 * each (128 in all) while pgrun waits, and pgrun has set no handler yet
 * that would need it.  execvp runs an executable without "#!" with
 * /bin/sh, as a shell does.  Returns the child's pid, or minus the status
 * pgrun exits with when the command cannot be run (message printed). */
static pid_t start(void)
{
	/* Written by the child before it exits: with vfork it shares this
	 * frame, and the parent runs again only after the exec or exit. */
	volatile int err = 0;
	pid_t pid;

	pid = vfork();
	if (pid == 0) {
		execvp(o.cmd[0], o.cmd);
		err = errno;
		_exit(err == ENOENT ? PGRUN_EXIT_NOTFOUND : PGRUN_EXIT_NOEXEC);
	}
	if (pid < 0) {
		cli_error_errno(errno, "cannot start '%s'", o.cmd[0]);
		return -PGRUN_EXIT_FAIL;
	}
	if (err) {
		waitpid(pid, NULL, 0);
		cli_error_errno(err, "cannot run '%s'", o.cmd[0]);
		return err == ENOENT ? -PGRUN_EXIT_NOTFOUND : -PGRUN_EXIT_NOEXEC;
	}
	return pid;
}

/* Run the command as a child and reap every descendant (pgrun is their
 * subreaper).  Returns the exit status pgrun should pass on. */
static int run(void)
{
	struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
	int st = 0, cst = -1;
	pid_t pid;
	size_t i;

	pid = start();
	if (pid < 0)
		return -pid;
	child = pid;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaction(forwarded[i], &sa, NULL);
	for (;;) {
		pid = waitpid(-1, &st, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break; /* ECHILD: every descendant is gone */
		}
		if (pid == child) {
			cst = st;
			child = 0;
		}
	}
	if (WIFSIGNALED(cst))
		return 128 + WTERMSIG(cst);
	return WEXITSTATUS(cst);
}

/* Create (unless --group), depend, set the policy and engage, one request
 * each.  Returns 0 with *id and *created set, or -1 (message printed). */
static int engage_slow(pg_t *id, bool *created)
{
	if (o.group) {
		*id = o.group;
	} else {
		*id = pgcli_create();
		if (*id < 0)
			return -1;
		*created = true;
	}
	if (pgcli_depend_all(o.after, o.nafter, *id) < 0)
		goto fail;
	if (o.fsync_order >= 0 &&
	    pg_fsync_policy(o.fsync_order ? PG_FSYNC_ORDER : PG_FSYNC_KEEP) < 0) {
		pgcli_error(errno, *id, "cannot set the fsync policy");
		goto fail;
	}
	if (pg_engage(*id) < 0) {
		pgcli_error(errno, *id, "cannot engage group %lld", (long long)*id);
		goto fail;
	}
	return 0;
fail:
	if (*created)
		pg_close(*id);
	*created = false;
	return -1;
}

int main(int argc, char **argv)
{
	pg_t id = 0;
	int status;
	bool created = false, autoclose = false;

	if (pgcli_start(&argp, argc, argv, ARGP_IN_ORDER) < 0)
		return PGRUN_EXIT_FAIL;
	/* --id-fd must name an open descriptor before the library opens its
	 * socket: a closed one would be free for the socket to take, and the
	 * id would go to the daemon. */
	if (o.id_fd >= 0 && fcntl(o.id_fd, F_GETFD) < 0) {
		cli_error_errno(errno, "cannot write the group id to fd %d", o.id_fd);
		return PGRUN_EXIT_FAIL;
	}
	/* The common case (a new group, at most one --after) in one request;
	 * if it is refused, the calls one by one say why.  Without --sync
	 * that request is all: the group is closed when pgrun exits, after
	 * its last descendant (design.md §5). */
	if (!o.group && o.nafter <= 1 && o.fsync_order != 0) {
		id = pg_switch(0, o.nafter ? o.after[0] : 0,
			       PG_SWITCH_ENGAGE | PG_SWITCH_AUTOCLOSE |
				   (o.fsync_order > 0 ? PG_SWITCH_FSYNC_ORDER : 0));
		created = autoclose = id > 0;
	}
	if (!created && engage_slow(&id, &created) < 0)
		return PGRUN_EXIT_FAIL;
	if (o.group_order >= 0 &&
	    pg_order_policy(o.group_order ? PG_ORDER_GROUPS : PG_ORDER_MOUNT) < 0) {
		pgcli_error(errno, id, "cannot set the order policy");
		goto fail;
	}
	if (tell_id(id) < 0)
		goto fail;
	/* Children that daemonise are reparented to us, not to init: they
	 * stay in the group's process tree and we wait for them too. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		cli_error_errno(errno, "cannot become a subreaper (daemons may escape)");
	status = run();
	/* pgrun's exit ends its engagement, which closes a group made with
	 * autoclose: a request here would only say so earlier. */
	if ((autoclose || !created) && !o.sync)
		return status;
	/* With autoclose the disengage below closes the group too. */
	if (created && !autoclose && !o.sync) {
		if (pg_leave(id) == 0)
			return status;
		if (errno != ENOTCONN) {
			pgcli_error(errno, id, "cannot disengage group %lld", (long long)id);
			status = PGRUN_EXIT_FAIL;
		}
	} else if (pg_disengage(id) < 0 && errno != ENOTCONN) {
		pgcli_error(errno, id, "cannot disengage group %lld", (long long)id);
		status = PGRUN_EXIT_FAIL;
	}
	if (o.sync && pgcli_sync(id) < 0)
		status = PGRUN_EXIT_FAIL;
	if (created && !autoclose && pgcli_close(id) < 0)
		status = PGRUN_EXIT_FAIL;
	return status;
fail:
	if (created)
		pg_close(id);
	return PGRUN_EXIT_FAIL;
}
