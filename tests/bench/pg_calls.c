/* pg_calls DIR N [PGRUN]: the cost of the patchgroup control path, with no
 * file-system work, on the mount holding DIR.  Prints one line per case:
 *   NAME us_per_op=U calls=C
 * where C is the control requests one operation makes:
 *   create+close      pg_create, pg_close
 *   engage+disengage  pg_engage, pg_disengage of one group
 *   replace-calls     the nine calls of an atomic replace with the
 *                     article's API (create, engage, disengage, create,
 *                     depend, engage, disengage, close, close)
 *   replace-switch    the same groups with pg_switch twice per update
 *   spawn-true        posix_spawn of /bin/true and its wait (no group)
 *   pgrun-true        PGRUN -- /bin/true (its own group), then the wait;
 *                     pgrun's requests are its own (2 since pg_switch)
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

static void show(const char *name, double t0, long n, int calls)
{
	if (calls < 0)
		printf("%s us_per_op=%.2f calls=n/a\n", name, (now_us() - t0) / (double)n);
	else
		printf("%s us_per_op=%.2f calls=%d\n", name, (now_us() - t0) / (double)n, calls);
	fflush(stdout);
}

static int spawn_wait(char **argv)
{
	pid_t pid;
	int st;

	if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		return -1;
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
	/* the connection is made by the first call: not timed */
	g = pg_create();
	if (g < 0)
		return fail("pg_create");

	t0 = now_us();
	for (i = 0; i < n; i++) {
		a = pg_create();
		if (a < 0 || pg_close(a) < 0)
			return fail("create+close");
	}
	show("create+close", t0, n, 2);

	t0 = now_us();
	for (i = 0; i < n; i++)
		if (pg_engage(g) < 0 || pg_disengage(g) < 0)
			return fail("engage+disengage");
	show("engage+disengage", t0, n, 2);
	pg_close(g);

	t0 = now_us();
	for (i = 0; i < n; i++) {
		a = pg_create();
		if (a < 0 || pg_engage(a) < 0 || pg_disengage(a) < 0)
			return fail("replace-calls a");
		b = pg_create();
		if (b < 0 || pg_depend(a, b) < 0 || pg_engage(b) < 0 || pg_disengage(b) < 0 ||
		    pg_close(a) < 0 || pg_close(b) < 0)
			return fail("replace-calls b");
	}
	show("replace-calls", t0, n, 9);

	t0 = now_us();
	for (i = 0; i < n; i++) {
		a = pg_switch(prev, 0, PG_SWITCH_ENGAGE);
		if (a < 0)
			return fail("replace-switch a");
		prev = pg_switch(a, a, PG_SWITCH_ENGAGE);
		if (prev < 0)
			return fail("replace-switch b");
	}
	if (pg_leave(prev) < 0)
		return fail("pg_leave");
	show("replace-switch", t0, n, 2);

	if (argc == 4) {
		char *tv[] = { "/bin/true", NULL };
		char *pv[] = { argv[3], "--", "/bin/true", NULL };
		long m = n < 200 ? n : 200;

		if (chdir(argv[1]) < 0)
			return fail("chdir");
		t0 = now_us();
		for (i = 0; i < m; i++)
			if (spawn_wait(tv) < 0)
				return fail("spawn /bin/true");
		show("spawn-true", t0, m, 0);
		t0 = now_us();
		for (i = 0; i < m; i++)
			if (spawn_wait(pv) < 0)
				return fail("spawn pgrun");
		show("pgrun-true", t0, m, -1);
	}
	return 0;
}
