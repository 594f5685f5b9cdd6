/* Two fields of /proc/PID/status (proc(5)), read from its text: what the
 * mount daemon needs to judge a caller as Linux's ext2 does. */
#ifndef FSTITCH_PROCSTATUS_H
#define FSTITCH_PROCSTATUS_H

#include <stdbool.h>
#include <sys/types.h>

/* Whether the "CapEff:" line of status holds capability cap (0..63). */
bool proc_status_has_cap(const char *status, int cap);
/* Whether gid is on the "Groups:" line (the supplementary groups). */
bool proc_status_in_groups(const char *status, gid_t gid);

#endif
