/* Two fields of /proc/PID/status and the system call of /proc/PID/syscall
 * (proc(5)), read from their text: what the mount daemon needs to judge a
 * caller as Linux's ext2 does. */
#ifndef FSTITCH_PROCSTATUS_H
#define FSTITCH_PROCSTATUS_H

#include <stdbool.h>
#include <sys/types.h>

/* Whether the "CapEff:" line of status holds capability cap (0..63). */
bool proc_status_has_cap(const char *status, int cap);
/* Whether gid is on the "Groups:" line (the supplementary groups). */
bool proc_status_in_groups(const char *status, gid_t gid);
/* What the text of /proc/PID/syscall says the thread is doing: 1 inside
 * chown(2), fchown, lchown or fchownat with -1 for both the owner and the
 * group, 0 inside any other call (another chown included), -1 when it
 * names no call ("running": the thread has not gone to sleep yet; "-1":
 * it sleeps outside a call).  An i386 caller on x86-64 shows its own
 * numbers, which this reads as other calls. */
int proc_syscall_chown_none(const char *text);

#endif
