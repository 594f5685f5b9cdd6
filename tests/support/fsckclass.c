/* The crash model's judge of an e2fsck transcript (see fsckclass.h). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsckclass.h"

static const char *const step_name[FSCK_NSTEPS] = {
    [FSCK_CHECK] = "e2fsck -fn",
    [FSCK_REPAIR] = "e2fsck -fy",
    [FSCK_AFTER] = "e2fsck -fn after -fy",
};

/* e2fsck -fy's exit status 4 and above: errors left (or it failed). */
static bool repair_failed(int status)
{
	return status >= 4;
}

enum fsck_step fsck_next_step(enum fsck_step done, int status)
{
	if (done == FSCK_CHECK && status > 0 && status < 8)
		return FSCK_REPAIR;
	if (done == FSCK_REPAIR && status >= 0 && !repair_failed(status))
		return FSCK_AFTER;
	return FSCK_NSTEPS;
}

int fsck_header(char *buf, size_t len, enum fsck_step step, int status)
{
	return snprintf(buf, len, "--- %s: exit %d\n", step_name[step], status);
}

const char *fsck_class_name(enum fsck_class c)
{
	switch (c) {
	case FSCK_CLEAN:
		return "clean";
	case FSCK_BENIGN:
		return "benign";
	default:
		return "dangerous";
	}
}

/* ---- findings -------------------------------------------------------- */

/* The growing list of findings; false once out of memory. */
struct list {
	char *s;
	size_t len, cap;
	bool failed;
};

/* Append a line: "K: text", or the text alone when kind is 0. */
static void list_add(struct list *l, char kind, const char *text, size_t n)
{
	if (l->failed)
		return;
	if (l->len + n + 5 > l->cap) {
		size_t cap = (l->cap ? l->cap : 256);
		char *s;

		while (l->len + n + 5 > cap)
			cap *= 2;
		s = realloc(l->s, cap);
		if (!s) {
			l->failed = true;
			return;
		}
		l->s = s;
		l->cap = cap;
	}
	if (kind) {
		l->s[l->len++] = kind;
		l->s[l->len++] = ':';
		l->s[l->len++] = ' ';
	}
	memcpy(l->s + l->len, text, n);
	l->len += n;
	l->s[l->len++] = '\n';
	l->s[l->len] = 0;
}

static void add(struct fsck_verdict *v, struct list *l, char kind, const char *text, size_t n)
{
	if (kind == 'B')
		v->nbenign++;
	else if (kind == 'D')
		v->ndangerous++;
	else
		v->nrepair++;
	list_add(l, kind, text, n);
}

static void addf(struct fsck_verdict *v, struct list *l, char kind, const char *fmt, ...)
{
	char buf[160];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	add(v, l, kind, buf, n < 0 ? 0 : (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* Whether line (n bytes) starts with, or holds, a string. */
static bool starts(const char *l, size_t n, const char *s)
{
	size_t k = strlen(s);

	return n >= k && !memcmp(l, s, k);
}

static bool holds(const char *l, size_t n, const char *s)
{
	size_t k = strlen(s);

	for (size_t i = 0; i + k <= n; i++)
		if (!memcmp(l + i, s, k))
			return true;
	return false;
}

/* e2fsck's own progress and summary lines: never findings. */
static bool chatter(const char *l, size_t n)
{
	return starts(l, n, "e2fsck ") || starts(l, n, "Pass ") || holds(l, n, "**********") ||
	       holds(l, n, "non-contiguous)") || holds(l, n, "UNEXPECTED INCONSISTENCY") ||
	       holds(l, n, "(i.e., without -a or -p");
}

/* e2fsck's questions are words, spaces, "/" and "+" ("Fix", "Clear
 * inode", "Connect to /lost+found"). */
static bool prompt_char(char c)
{
	return isalpha((unsigned char)c) || c == ' ' || c == '/' || c == '+';
}

/* A line may end with e2fsck's question and the answer ("...  Fix? no"):
 * the length of what comes before the question, trailing spaces cut (0 for
 * a line that is only a question), or n for a line with none.  The
 * question is the longest run of question characters before the "?" that
 * begins with a capital, at the start of the line or after a space. */
static size_t before_question(const char *l, size_t n)
{
	size_t end, i, start = n;

	if (n >= 4 && !memcmp(l + n - 4, "? no", 4))
		end = n - 4;
	else if (n >= 5 && !memcmp(l + n - 5, "? yes", 5))
		end = n - 5;
	else
		return n;
	for (i = end; i > 0 && prompt_char(l[i - 1]); i--)
		if (isupper((unsigned char)l[i - 1]) && (i == 1 || l[i - 2] == ' '))
			start = i - 1;
	if (start == n)
		return n;
	while (start > 0 && l[start - 1] == ' ')
		start--;
	return start;
}

/* Compare two runs of decimal digits as numbers, of any length: <0, 0, >0. */
static int numcmp(const char *a, size_t an, const char *b, size_t bn)
{
	while (an > 1 && *a == '0')
		a++, an--;
	while (bn > 1 && *b == '0')
		b++, bn--;
	if (an != bn)
		return an < bn ? -1 : 1;
	return memcmp(a, b, an);
}

/* Match line (n bytes) against pat, where each '#' stands for a run of
 * digits; the text after the pattern is not looked at.  On a match, the
 * second and third numbers' places in *a, *an, *b, *bn. */
static bool match_counts(const char *l, size_t n, const char *pat, const char **a, size_t *an,
			 const char **b, size_t *bn)
{
	size_t i = 0, k = 0;

	for (; *pat; pat++) {
		if (*pat != '#') {
			if (i >= n || l[i] != *pat)
				return false;
			i++;
			continue;
		}
		size_t s = i;

		while (i < n && isdigit((unsigned char)l[i]))
			i++;
		if (i == s)
			return false;
		if (k == 1) {
			*a = l + s;
			*an = i - s;
		} else if (k == 2) {
			*b = l + s;
			*bn = i - s;
		}
		k++;
	}
	return k == 3;
}

/* Whether a finding of e2fsck -fn (its question cut) is one soft updates
 * promise never to leave (fsckclass.h). */
static bool forbidden(const char *l, size_t n)
{
	static const char *const counts[] = {
	    "Inode # ref count is #, should be #.",
	    "Inode #, i_blocks is #, should be #.",
	    "Extended attribute block # has reference count #, should be #.",
	};
	const char *a, *b;
	size_t an, bn;

	/* "Entry 'x' in /d (12) has deleted/unused inode 13.", "Directory
	 * inode 12, block #0, offset 0: directory corrupted", a block with
	 * two owners ("Multiply-claimed block(s) in inode 12: 5") or none
	 * that can be ("Inode 12 has illegal block(s).") */
	if (holds(l, n, " has deleted/unused inode ") || holds(l, n, "directory corrupted") ||
	    starts(l, n, "Multiply-claimed block") || holds(l, n, "illegal block") ||
	    holds(l, n, "Duplicate or bad block"))
		return true;
	if (starts(l, n, "Block bitmap differences:") ||
	    starts(l, n, "Inode bitmap differences:")) {
		const char *p = l + 25, *e = l + n;

		/* only "-N" and "-(N--M)" leaks: a "+" anywhere, or a word
		 * not starting with "-", is something else */
		if (memchr(p, '+', e - p))
			return true;
		while (p < e) {
			while (p < e && isspace((unsigned char)*p))
				p++;
			if (p < e && *p != '-')
				return true;
			while (p < e && !isspace((unsigned char)*p))
				p++;
		}
		return false;
	}
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		if (match_counts(l, n, counts[i], &a, &an, &b, &bn))
			return numcmp(a, an, b, bn) < 0;
	return false;
}

/* One line of e2fsck -fn on the image (repair false: judged allowed or
 * forbidden), or of e2fsck -fy on the copy when it left errors. */
static void finding_line(struct fsck_verdict *v, struct list *l, const char *line, size_t n,
			 bool repair)
{
	if (chatter(line, n))
		return;
	n = before_question(line, n);
	if (n)
		add(v, l, repair ? 'P' : forbidden(line, n) ? 'D' : 'B', line, n);
}

/* ---- the transcript -------------------------------------------------- */

struct section {
	bool seen;
	int status;
	const char *body;
	size_t len;
};

/* finding_line() on each line of body with trailing blanks cut, skipping
 * blank lines. */
static void each_line(struct fsck_verdict *v, struct list *l, const struct section *s, bool repair)
{
	const char *p = s->body, *e = s->body + s->len;

	while (p < e) {
		const char *nl = memchr(p, '\n', e - p);
		size_t n = (nl ? nl : e) - p;

		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
			n--;
		if (n)
			finding_line(v, l, p, n, repair);
		p = nl ? nl + 1 : e;
	}
}

/* If line is a step's header, that step and its status; -1 if it is not
 * a header, -2 if it looks like one but is not well formed. */
static int parse_header(const char *l, size_t n, int *status)
{
	for (int s = 0; s < FSCK_NSTEPS; s++) {
		size_t k = strlen(step_name[s]);
		const char *p;
		int st = 0;

		if (n < 4 + k || memcmp(l, "--- ", 4) || memcmp(l + 4, step_name[s], k))
			continue;
		p = l + 4 + k;
		if (!starts(p, l + n - p, ": exit "))
			continue; /* perhaps a longer name */
		p += 7;
		if (p == l + n)
			return -2;
		for (; p < l + n; p++) {
			if (!isdigit((unsigned char)*p) || st > 255)
				return -2;
			st = st * 10 + (*p - '0');
		}
		if (st > 255)
			return -2;
		*status = st;
		return s;
	}
	return starts(l, n, "--- e2fsck") ? -2 : -1;
}

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Split the transcript into its steps, checking their order. */
static int split(const char *text, size_t len, struct section sec[FSCK_NSTEPS], char *err,
		 size_t errlen)
{
	const char *p = text, *e = text + len;
	enum fsck_step want = FSCK_CHECK;
	struct section *cur = NULL;
	unsigned lineno = 0;

	memset(sec, 0, FSCK_NSTEPS * sizeof(*sec));
	if (memchr(text, 0, len))
		return bad(err, errlen, "a NUL byte in the transcript");
	while (p < e) {
		const char *nl = memchr(p, '\n', e - p);
		size_t n = (nl ? nl : e) - p;
		int st, s;

		lineno++;
		s = parse_header(p, n, &st);
		if (s == -2)
			return bad(err, errlen, "line %u: a header that is not well formed: %.*s",
				   lineno, (int)(n > 80 ? 80 : n), p);
		if (s >= 0) {
			if (want == FSCK_NSTEPS || (enum fsck_step)s != want)
				return bad(err, errlen, "line %u: %s where %s%s was due", lineno,
					   step_name[s], want == FSCK_NSTEPS ? "the end" : "",
					   want == FSCK_NSTEPS ? "" : step_name[want]);
			cur = &sec[s];
			cur->seen = true;
			cur->status = st;
			cur->body = nl ? nl + 1 : e;
			want = fsck_next_step(s, st);
		} else if (!cur) {
			if (n)
				return bad(
				    err, errlen,
				    "line %u: text before the first header (\"--- %s: exit N\")",
				    lineno, step_name[FSCK_CHECK]);
		} else {
			cur->len = (nl ? nl + 1 : e) - cur->body;
		}
		p = nl ? nl + 1 : e;
	}
	if (want != FSCK_NSTEPS)
		return bad(err, errlen, "the transcript ends before its %s step", step_name[want]);
	return 0;
}

int fsck_judge(const char *text, size_t len, struct fsck_verdict *v, char *err, size_t errlen)
{
	struct section sec[FSCK_NSTEPS];
	struct list l = {0};
	int ret;

	memset(v, 0, sizeof(*v));
	if (err && errlen)
		err[0] = 0;
	ret = split(text ? text : "", text ? len : 0, sec, err, errlen);
	if (ret)
		return ret;
	for (int s = 0; s < FSCK_NSTEPS; s++)
		v->status[s] = sec[s].seen ? sec[s].status : -1;

	/* e2fsck -fn on the image: its findings, unless it found nothing */
	if (sec[FSCK_CHECK].status != 0)
		each_line(v, &l, &sec[FSCK_CHECK], false);
	if (sec[FSCK_CHECK].status >= 8)
		addf(v, &l, 'D', "e2fsck exit status %d", sec[FSCK_CHECK].status);
	else if (sec[FSCK_CHECK].status != 0 && !v->nbenign && !v->ndangerous)
		addf(v, &l, 'D', "e2fsck exit status %d without any finding",
		     sec[FSCK_CHECK].status);

	/* e2fsck -fy: what it left */
	if (sec[FSCK_REPAIR].seen && repair_failed(sec[FSCK_REPAIR].status)) {
		unsigned before = v->nrepair;

		each_line(v, &l, &sec[FSCK_REPAIR], true);
		if (v->nrepair == before)
			add(v, &l, 'P', "e2fsck -fy failed without a finding", 35);
	}
	if (sec[FSCK_AFTER].seen && sec[FSCK_AFTER].status != 0)
		addf(v, &l, 'P', "e2fsck -fn finds errors (exit status %d) after e2fsck -fy",
		     sec[FSCK_AFTER].status);

	if (l.failed) {
		free(l.s);
		memset(v, 0, sizeof(*v));
		return -ENOMEM;
	}
	v->findings = l.s ? l.s : strdup("");
	if (!v->findings)
		return -ENOMEM;
	if (v->ndangerous || v->nrepair)
		v->class = FSCK_DANGEROUS;
	else if (sec[FSCK_CHECK].status != 0)
		v->class = FSCK_BENIGN;
	else
		v->class = FSCK_CLEAN;
	return 0;
}

char *fsck_why(const struct fsck_verdict *v)
{
	struct list l = {0};
	const char *p = v->findings ? v->findings : "";

	if (v->class == FSCK_DANGEROUS) {
		/* the forbidden findings, then what e2fsck -fy left */
		for (int pass = 0; pass < 2; pass++) {
			char want = pass ? 'P' : 'D';

			if (pass && repair_failed(v->status[FSCK_REPAIR])) {
				char head[64];
				int n =
				    snprintf(head, sizeof(head),
					     "e2fsck -fy exit status %d:", v->status[FSCK_REPAIR]);

				list_add(&l, 0, head, (size_t)n);
			}
			for (const char *q = p; *q;) {
				const char *nl = strchr(q, '\n');
				size_t n = nl ? (size_t)(nl - q) : strlen(q);

				if (n >= 3 && q[0] == want)
					list_add(&l, 0, q + 3, n - 3);
				q += n + (nl ? 1 : 0);
			}
		}
	}
	if (l.failed) {
		free(l.s);
		return NULL;
	}
	return l.s ? l.s : strdup("");
}

void fsck_verdict_free(struct fsck_verdict *v)
{
	free(v->findings);
	v->findings = NULL;
}
