/* pg_fork ID: engagement reaches children started after pg_engage() and
 * not children already running.  Run inside an fstitch mount: forks an
 * "early" child, engages group ID, forks a "late" child that writes the
 * file "late", then lets the early child write the file "early".  Prints
 * the group's change count before the late child, after it, and after the
 * early child: "C0 C1 C2".  The early child is started 50 ms before the
 * engagement, more than the clock tick that start times are kept in.
 * Exit status: 0, 1 a call failed (message on stderr), 64 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fstitch/patchgroup.h>

static int put(const char *name)
{
	FILE *f = fopen(name, "w");

	if (!f || fputs(name, f) == EOF || fclose(f) == EOF)
		return 1;
	return 0;
}

static long long changes(pg_t g)
{
	struct pg_status st;

	if (pg_status(g, &st) < 0) {
		fprintf(stderr, "pg_fork: pg_status: %s\n", strerror(errno));
		exit(1);
	}
	return (long long)st.nchanges;
}

int main(int argc, char **argv)
{
	long long c0, c1, c2;
	int fds[2], st;
	pid_t early, late;
	pg_t g;
	char c;

	if (argc != 2) {
		fprintf(stderr, "usage: pg_fork ID\n");
		return 64;
	}
	g = atoll(argv[1]);
	if (pipe(fds) < 0)
		return 1;
	early = fork();
	if (early < 0)
		return 1;
	if (early == 0) {
		close(fds[1]);
		if (read(fds[0], &c, 1) != 1)
			_exit(1);
		_exit(put("early"));
	}
	close(fds[0]);
	/* Start times have clock-tick resolution (10 ms): a child started in
	 * the same tick as the engagement counts as started after it. */
	usleep(50000);
	if (pg_engage(g) < 0) {
		fprintf(stderr, "pg_fork: pg_engage: %s\n", strerror(errno));
		return 1;
	}
	c0 = changes(g);
	late = fork();
	if (late < 0)
		return 1;
	if (late == 0)
		_exit(put("late"));
	if (waitpid(late, &st, 0) < 0 || st != 0)
		return 1;
	c1 = changes(g);
	if (write(fds[1], "x", 1) != 1 || waitpid(early, &st, 0) < 0 || st != 0)
		return 1;
	c2 = changes(g);
	printf("%lld %lld %lld\n", c0, c1, c2);
	return 0;
}
