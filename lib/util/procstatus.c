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

bool proc_syscall_is_chown(const char *text)
{
	static const long calls[] = {
#ifdef SYS_chown
	    SYS_chown,
#endif
#ifdef SYS_lchown
	    SYS_lchown,
#endif
	    SYS_fchown,
	    SYS_fchownat,
	};
	const char *p = text;
	unsigned long long nr;

	if (!number(&p, 10, &nr) || (*p && *p != ' ' && *p != '\n'))
		return false;
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (nr == (unsigned long long)calls[i])
			return true;
	return false;
}
