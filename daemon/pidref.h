/* SPDX-License-Identifier: MIT */
#pragma once

/* A process named for its whole life: a pid alone may be another process's by the time it is used (the
 * peer that connected exited, and the number went to someone else). With its start time (/proc/PID/stat,
 * field 22, clock ticks since boot) the pair names one process; a /proc/PID directory opened and checked
 * against it refers to that process alone: reads through it fail once the process is gone, whoever has
 * the number then. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct pidref {
        pid_t pid;
        uint64_t start; /* 0: unknown (the process was gone when asked) */
};

/* The start time field of a /proc/PID/stat text. -EINVAL when it is malformed. */
int pidref_parse_stat(const char *text, uint64_t *ret);

/* Name the process with this pid now. -ESRCH when there is none. */
int pidref_set(struct pidref *p, pid_t pid);

/* /proc/PID as an O_DIRECTORY descriptor, if it is still the process named: -ESRCH otherwise. */
int pidref_open_proc(const struct pidref *p);

/* /proc/PID as a descriptor, if that process belongs to uid (the owner of its /proc directory, its
 * effective uid): -ESRCH otherwise. For a pid someone else vouched for without a start time (the bus). */
int pidref_open_proc_of_uid(pid_t pid, uid_t uid);

/* A pidfd for pid (pidfd_open(2)), or a negative errno. */
int pidfd_open(pid_t pid);

/* The real, effective, saved and filesystem uids of a /proc/PID/status text. -EINVAL when it has none. */
int proc_status_parse_uids(const char *text, uid_t ret[4]);
/* A pidfd for a process uid may act for: any, for root; otherwise one whose every uid is uid (so no
 * set-user-ID program another user started, nor anyone else's), as kill(2) would allow and no more.
 * -ESRCH: no such process, or it exited while looked at; -EPERM: not uid's. */
int pidfd_open_for_uid(pid_t pid, uid_t uid, int *ret_pidfd);
/* The same check for a process already pinned: 0 while every uid of the pidfd's process (pid) is uid
 * (or uid is root); -EPERM once it is not (it ran a set-user-ID program); -ESRCH once it is gone. */
int pidfd_check_uid(int pidfd, pid_t pid, uid_t uid);
/* A pidfd turns readable when its process exits. Not signal 0: sending it to another user's process
 * needs CAP_KILL, which the service's capability bounding set leaves out (every unprivileged client was
 * refused under systemd). */
bool pidfd_alive(int pidfd);

/* /proc/PID as a descriptor, if the process the pidfd names (SO_PEERPIDFD: the one that connected) is
 * alive and has that pid: -ESRCH otherwise. Exact where start times (in clock ticks) are not. */
int pidref_open_proc_pidfd(int pidfd, pid_t pid);
