/* Replay a fuzz target's corpus without libFuzzer: each file named on the
 * command line (a directory stands for the files in it, sorted) is given
 * to LLVMFuzzerTestOneInput once.  Output is TAP, one test per file, so
 * tests/run.sh counts them; a crash or sanitizer report ends the run,
 * which the runner counts as a failure.  Built with the ordinary compiler
 * so that make check needs no clang.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static unsigned ntests;

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;
	int ok = 0;

	if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		/* One byte more so that an empty file has a buffer too. */
		buf = malloc((size_t)len + 1);
		if (buf && fread(buf, 1, (size_t)len, f) == (size_t)len) {
			printf("# %s\n", path);
			fflush(stdout);
			LLVMFuzzerTestOneInput(buf, (size_t)len);
			ok = 1;
		}
	}
	if (f)
		fclose(f);
	free(buf);
	printf("%sok %u - %s\n", ok ? "" : "not ", ++ntests, path);
	fflush(stdout);
	return ok ? 0 : 1;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path)
{
	struct stat st;
	struct dirent *d;
	char **v = NULL, *p;
	size_t n = 0, i;
	int bad = 0;
	DIR *dp;

	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return run_file(path);
	dp = opendir(path);
	if (!dp)
		return run_file(path);
	while ((d = readdir(dp))) {
		if (d->d_name[0] == '.')
			continue;
		p = malloc(strlen(path) + strlen(d->d_name) + 2);
		v = realloc(v, (n + 1) * sizeof(*v));
		if (!p || !v) {
			fprintf(stderr, "replay: out of memory\n");
			exit(1);
		}
		sprintf(p, "%s/%s", path, d->d_name);
		v[n++] = p;
	}
	closedir(dp);
	qsort(v, n, sizeof(*v), cmp);
	for (i = 0; i < n; i++) {
		bad |= run_file(v[i]);
		free(v[i]);
	}
	free(v);
	return bad;
}

int main(int argc, char **argv)
{
	int bad = 0;

	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++)
		bad |= run_path(argv[i]);
	printf("1..%u\n", ntests);
	return bad;
}
