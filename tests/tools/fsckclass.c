/* fsckclass: judge an e2fsck transcript for the bats tests (fsck_run in
 * tests/common.bash), with the rules the C tests use
 * (tests/support/fsckclass.h).
 *
 *	fsckclass <TRANSCRIPT
 *
 * Prints the class ("clean", "benign" or "dangerous") on the first line
 * and, for a dangerous one, why, a reason a line.  Exit status 0 clean,
 * 1 benign, 2 dangerous; 64 for a usage error, 65 for input that is not
 * a transcript, 70 when out of memory or stdin cannot be read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/fsckclass.h"

int main(int argc, char **argv)
{
	struct fsck_verdict v;
	char err[256], *text = NULL, *why;
	size_t len = 0, cap = 0;
	int ret;

	if (argc != 1) {
		fprintf(stderr, "usage: fsckclass <TRANSCRIPT\n");
		return 64;
	}
	for (;;) {
		ssize_t n;

		if (cap - len < 4096) {
			char *t = realloc(text, cap ? cap * 2 : 65536);

			if (!t) {
				fprintf(stderr, "fsckclass: out of memory\n");
				return 70;
			}
			text = t;
			cap = cap ? cap * 2 : 65536;
		}
		n = read(0, text + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "fsckclass: reading stdin: %s\n", strerror(errno));
			return 70;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	ret = fsck_judge(text, len, &v, err, sizeof(err));
	free(text);
	if (ret == -EINVAL) {
		fprintf(stderr, "fsckclass: not an e2fsck transcript: %s\n", err);
		return 65;
	}
	if (ret) {
		fprintf(stderr, "fsckclass: %s\n", strerror(-ret));
		return 70;
	}
	why = fsck_why(&v);
	if (!why) {
		fprintf(stderr, "fsckclass: out of memory\n");
		return 70;
	}
	printf("%s\n%s", fsck_class_name(v.class), why);
	free(why);
	ret = v.class;
	fsck_verdict_free(&v);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "fsckclass: writing stdout: %s\n", strerror(errno));
		return 70;
	}
	return ret;
}
