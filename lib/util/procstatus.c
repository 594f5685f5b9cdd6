#include "procstatus.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

/* The text after "\nNAME" (NAME with its colon), or NULL. */
static const char *field(const char *status, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = status; p; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (!strncmp(p, name, n))
			return p + n;
	}
	return NULL;
}

/* The first number on the rest of this line, in base, after its blanks:
 * false if there is none (strtoull alone would look past the newline). */
static bool number(const char **p, int base, unsigned long long *v)
{
	char *end;

	while (**p == ' ' || **p == '\t')
		(*p)++;
	if (!isxdigit((unsigned char)**p) || (base == 10 && !isdigit((unsigned char)**p)))
		return false;
	*v = strtoull(*p, &end, base);
	*p = end;
	return true;
}

bool proc_status_has_cap(const char *status, int cap)
{
	const char *p = field(status, "CapEff:");
	unsigned long long caps;

	if (!p || cap < 0 || cap > 63 || !number(&p, 16, &caps))
		return false;
	return caps >> cap & 1;
}

bool proc_status_in_groups(const char *status, gid_t gid)
{
	const char *p = field(status, "Groups:");
	unsigned long long g;

	while (p && number(&p, 10, &g))
		if (g == gid)
			return true;
	return false;
}

int proc_syscall_chown_none(const char *text)
{
	/* each call, and which of its arguments are the uid and the gid */
	static const struct {
		long nr;
		int uid;
	} calls[] = {
#ifdef SYS_chown
	    {SYS_chown, 1},
#endif
#ifdef SYS_lchown
	    {SYS_lchown, 1},
#endif
	    {SYS_fchown, 1},
	    {SYS_fchownat, 2},
	};
	unsigned long long nr, arg[4];
	const char *p = text;
	size_t i;

	if (!number(&p, 10, &nr) || (*p && *p != ' ' && *p != '\n'))
		return -1;
	for (i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (nr == (unsigned long long)calls[i].nr)
			break;
	if (i == sizeof(calls) / sizeof(calls[0]))
		return 0;
	for (int a = 0; a < 4; a++) {
		while (*p == ' ')
			p++;
		if (strncmp(p, "0x", 2) != 0)
			return 0;
		p += 2;
		if (!number(&p, 16, &arg[a]))
			return 0;
	}
	/* -1 as a uid_t, whether or not the caller widened it with its sign */
	return (arg[calls[i].uid] & 0xffffffffu) == 0xffffffffu &&
	       (arg[calls[i].uid + 1] & 0xffffffffu) == 0xffffffffu;
}
