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
/* Whether the text of /proc/PID/syscall names chown(2), fchown, lchown or
 * fchownat as the call the thread is in (false for "running", for "-1",
 * a thread outside any call, and for every other call). */
bool proc_syscall_is_chown(const char *text);

#endif
