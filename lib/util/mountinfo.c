/* Reading /proc/self/mountinfo (see mountinfo.h). */
#include "mountinfo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

/* Undo the kernel's octal escapes in place (space, tab, newline and
 * backslash are written as \ooo). */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* Split one line into its fields: "ID PARENT MAJ:MIN ROOT TARGET OPTS
 * [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS".  0, or -1 if malformed. */
static int parse_line(char *line, struct mountinfo_ent *e)
{
	char *f[6], *save = NULL, *tok;
	unsigned maj, min;
	int n = 0;

	for (tok = line; n < 6; tok = NULL) {
		f[n] = strtok_r(tok, " \n", &save);
		if (!f[n++])
			return -1;
	}
	/* the optional fields end at a lone "-" */
	while ((tok = strtok_r(NULL, " \n", &save)) && strcmp(tok, "-") != 0)
		;
	if (!tok)
		return -1;
	e->fstype = strtok_r(NULL, " \n", &save);
	e->source = strtok_r(NULL, " \n", &save);
	if (!e->fstype || !e->source || sscanf(f[2], "%u:%u", &maj, &min) != 2)
		return -1;
	e->dev = makedev(maj, min);
	unescape(f[3]);
	unescape(f[4]);
	unescape((char *)e->fstype);
	unescape((char *)e->source);
	e->root = f[3];
	e->target = f[4];
	return 0;
}

int mountinfo_each(const char *path, int (*fn)(const struct mountinfo_ent *e, void *arg), void *arg)
{
	FILE *f = fopen(path ? path : "/proc/self/mountinfo", "re");
	struct mountinfo_ent e;
	char *line = NULL;
	size_t cap = 0;
	int r = 0;

	if (!f)
		return -errno;
	errno = 0;
	while (getline(&line, &cap, f) >= 0) {
		if (parse_line(line, &e) < 0)
			continue;
		r = fn(&e, arg);
		if (r)
			break;
	}
	if (!r && errno == ENOMEM)
		r = -ENOMEM;
	free(line);
	fclose(f);
	return r;
}

struct find {
	const char *target;
	char *fstype, *source;
	size_t fstype_len, source_len;
	bool found;
};

static void copy(char *dst, size_t len, const char *src)
{
	if (dst && len)
		snprintf(dst, len, "%s", src);
}

static int find_cb(const struct mountinfo_ent *e, void *arg)
{
	struct find *q = arg;

	/* keep going: a later line is mounted on top of an earlier one */
	if (strcmp(e->target, q->target) == 0) {
		q->found = true;
		copy(q->fstype, q->fstype_len, e->fstype);
		copy(q->source, q->source_len, e->source);
	}
	return 0;
}

int mountinfo_find(const char *path, const char *target, char *fstype, size_t fstype_len,
		   char *source, size_t source_len)
{
	struct find q = {.target = target,
			 .fstype = fstype,
			 .fstype_len = fstype_len,
			 .source = source,
			 .source_len = source_len};
	int r = mountinfo_each(path, find_cb, &q);

	if (r < 0)
		return r;
	return q.found;
}

static int dev_cb(const struct mountinfo_ent *e, void *arg)
{
	return e->dev == *(const dev_t *)arg;
}

int mountinfo_dev_mounted(const char *path, dev_t dev)
{
	return mountinfo_each(path, dev_cb, &dev);
}
