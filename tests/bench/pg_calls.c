/* pg_calls DIR N [PGRUN]: the cost of the patchgroup control path, with no
 * file-system work, on the mount holding DIR.  Prints one line per case:
 *   NAME us_per_op=U calls=C
 * where C is the control requests one operation made, as the daemon
 * counted them (pgstatus's summary, requests=; pg_calls must be the only
 * client):
 *   create+close      pg_create, pg_close
 *   engage+disengage  pg_engage, pg_disengage of one group
 *   replace-calls     the nine calls of an atomic replace with the
 *                     article's API (create, engage, disengage, create,
 *                     depend, engage, disengage, close, close)
 *   replace-switch    the same groups with pg_switch twice per update
 *                     (the second group left by the next update's first)
 *   spawn-true        posix_spawn of /bin/true and its wait (no group)
 *   pgrun-true        PGRUN -- /bin/true (its own group), then the wait
 *   pgrun-after-true  PGRUN --after G -- /bin/true, G the previous
 *                     pgrun's group (read from --id-fd): a chain
 * Run by make bench (tests/bench/run.sh, section pgapi); never a timed
 * assertion.  Exit status: 0, 1 a call failed, 64 usage. */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "fstitch/patchgroup.h"
#include "proto/ctl.h"

extern char **environ;

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int fail(const char *what)
{
	fprintf(stderr, "pg_calls: %s: %s\n", what, strerror(errno));
	return 1;
}

static int ctl_fd = -1;

/* The daemon's count of requests answered so far (not this one), or -1. */
static long long requests(void)
{
	struct ctl_req req = { .magic = CTL_MAGIC, .version = CTL_VERSION, .op = CTL_SUMMARY };
	struct ctl_rep rep;

	if (ctl_call(ctl_fd, &req, &rep) < 0 || rep.err)
		return -1;
	return (long long)rep.summary.requests;
}

static long long r0;

/* Start timing a case: returns the start time, and notes the count. */
static double start(void)
{
	r0 = requests();
	return now_us();
}

static void show(const char *name, double t0, long n)
{
	double us = (now_us() - t0) / (double)n;
	long long r1 = requests();

	/* less the summary request that read r0 */
	printf("%s us_per_op=%.2f calls=%.2f\n", name, us, (double)(r1 - r0 - 1) / (double)n);
	fflush(stdout);
}

/* Run argv and wait for it; with fd >= 0, read the line it writes there
 * (pgrun --id-fd) into *id. */
static int spawn_wait(char **argv, int fd, pg_t *id)
{
	char buf[32];
	ssize_t n;
	pid_t pid;
	int st;

	if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		return -1;
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n <= 0)
			return -1;
		buf[n] = '\0';
		*id = atoll(buf);
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	long n, i;
	double t0;
	pg_t g, a, b, prev = 0;

	if (argc < 3 || argc > 4 || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: pg_calls DIR N [PGRUN]\n");
		return 64;
	}
	if (pg_set_control(argv[1]) < 0)
		return fail("pg_set_control");
	{
		char sock[256];
		int r = ctl_find_socket(argv[1], sock, sizeof(sock));

		if (r == 0)
			r = ctl_connect(sock, &ctl_fd);
		if (r < 0) {
			errno = -r;
			return fail("the control socket");
		}
	}
	/* the connection is made by the first call: not timed */
	g = pg_create();
	if (g < 0)
		return fail("pg_create");

	t0 = start();
	for (i = 0; i < n; i++) {
		a = pg_create();
		if (a < 0 || pg_close(a) < 0)
			return fail("create+close");
	}
	show("create+close", t0, n);

	t0 = start();
	for (i = 0; i < n; i++)
		if (pg_engage(g) < 0 || pg_disengage(g) < 0)
			return fail("engage+disengage");
	show("engage+disengage", t0, n);
	pg_close(g);

	t0 = start();
	for (i = 0; i < n; i++) {
		a = pg_create();
		if (a < 0 || pg_engage(a) < 0 || pg_disengage(a) < 0)
			return fail("replace-calls a");
		b = pg_create();
		if (b < 0 || pg_depend(a, b) < 0 || pg_engage(b) < 0 || pg_disengage(b) < 0 ||
		    pg_close(a) < 0 || pg_close(b) < 0)
			return fail("replace-calls b");
	}
	show("replace-calls", t0, n);

	t0 = start();
	for (i = 0; i < n; i++) {
		a = pg_switch(prev, 0, PG_SWITCH_ENGAGE);
		if (a < 0)
			return fail("replace-switch a");
		prev = pg_switch(a, a, PG_SWITCH_ENGAGE);
		if (prev < 0)
			return fail("replace-switch b");
	}
	show("replace-switch", t0, n);
	if (pg_leave(prev) < 0)
		return fail("pg_leave");

	if (argc == 4) {
		char *tv[] = { "/bin/true", NULL };
		char *pv[] = { argv[3], "--", "/bin/true", NULL };
		char after[32], idfd[32];
		char *av[] = { argv[3], "--after", after, "--id-fd", idfd, "--", "/bin/true", NULL };
		long m = n < 200 ? n : 200;
		int fds[2];
		pg_t id = 0;

		if (chdir(argv[1]) < 0)
			return fail("chdir");
		t0 = start();
		for (i = 0; i < m; i++)
			if (spawn_wait(tv, -1, NULL) < 0)
				return fail("spawn /bin/true");
		show("spawn-true", t0, m);
		t0 = start();
		for (i = 0; i < m; i++)
			if (spawn_wait(pv, -1, NULL) < 0)
				return fail("spawn pgrun");
		show("pgrun-true", t0, m);
		if (pipe(fds) < 0)
			return fail("pipe");
		snprintf(idfd, sizeof(idfd), "%d", fds[1]);
		/* the chain's first link: after nothing (0 is refused) */
		id = pg_create();
		if (id < 0 || pg_close(id) < 0)
			return fail("pg_create");
		t0 = start();
		for (i = 0; i < m; i++) {
			snprintf(after, sizeof(after), "%lld", (long long)id);
			if (spawn_wait(av, fds[0], &id) < 0)
				return fail("spawn pgrun --after");
		}
		show("pgrun-after-true", t0, m);
	}
	return 0;
}
