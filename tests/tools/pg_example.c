/* The atomic-update example of the patchgroup article, compiled as written
 * against <fstitch/patchgroup.h>; only the elided parts (writing the
 * temporary file, the command line, reporting errors) are filled in.
 *
 *   pg_example FILE CONTENT   replace FILE's contents with CONTENT so that
 *                             after a crash FILE holds the old or the new
 *                             contents, never a mix or nothing
 * Prints the two group ids ("tmp ID" and "final ID") on stdout.
 * Exit status: 0 done, 1 a call failed (message on stderr), 64 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fstitch/patchgroup.h>

static int die(const char *what)
{
	fprintf(stderr, "pg_example: %s: %s\n", what, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	char tmp[4096];
	const char *file, *data;
	size_t len;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: pg_example FILE CONTENT\n");
		return 64;
	}
	file = argv[1];
	data = argv[2];
	len = strlen(data);
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);

	/* The new contents go to a temporary file in one group ... */
	pg_t tmpg = pg_create();
	if (tmpg < 0)
		return die("pg_create");
	if (pg_engage(tmpg) < 0)
		return die("pg_engage");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
	if (fd < 0)
		return die("open");
	if (write(fd, data, len) != (ssize_t)len)
		return die("write");
	if (close(fd) < 0)
		return die("close");
	if (pg_disengage(tmpg) < 0)
		return die("pg_disengage");

	/* ... and the rename, in a second group, reaches disk only after
	 * them: no fsync, and nobody waits. */
	pg_t fing = pg_create();
	if (fing < 0)
		return die("pg_create");
	if (pg_depend(tmpg, fing) < 0)
		return die("pg_depend");
	if (pg_engage(fing) < 0)
		return die("pg_engage");
	if (rename(tmp, file) < 0)
		return die("rename");
	if (pg_disengage(fing) < 0)
		return die("pg_disengage");

	pg_close(tmpg);
	pg_close(fing);
	printf("tmp %lld\nfinal %lld\n", (long long)tmpg, (long long)fing);
	return 0;
}
