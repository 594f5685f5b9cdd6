/* Scratch files of the C tests and of the bats suites' tools
 * (scratch.h). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scratch.h"

const char *e2t_tmpdir(void)
{
	const char *d = getenv("E2T_TMPDIR");
	struct stat st;

	if (d && *d)
		return d;
	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
		return "/dev/shm";
	d = getenv("TMPDIR");
	if (d && *d)
		return d;
	return "/tmp";
}

char *e2t_tmpfile(const char *tag)
{
	char *p;
	int fd;

	if (asprintf(&p, "%s/e2t-%s-XXXXXX", e2t_tmpdir(), tag) < 0)
		return NULL;
	fd = mkstemp(p);
	if (fd < 0) {
		free(p);
		return NULL;
	}
	close(fd);
	return p;
}

char *e2t_tmpdir_new(const char *tag)
{
	char *p;

	if (asprintf(&p, "%s/e2t-%s-XXXXXX", e2t_tmpdir(), tag) < 0)
		return NULL;
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	return p;
}
