/* procfs: what /proc says about a process and about listening sockets. */
#ifndef TTS_PROCFS_H
#define TTS_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Command line with NULs turned into spaces; malloc'd, NULL if gone. */
char *proc_cmdline(pid_t pid);
/* argv as a NULL-terminated malloc'd vector (free with proc_argv_free). */
char **proc_argv(pid_t pid);
void proc_argv_free(char **argv);
/* Start time in clock ticks since boot (stat field 22); 0 if gone. */
uint64_t proc_start_ticks(pid_t pid);
/* Parent pid (stat field 4); 0 if gone. */
pid_t proc_ppid(pid_t pid);
/* minflt and majflt (stat fields 10 and 12): the faults of every thread of
 * a live process. false if gone. */
bool proc_faults(pid_t pid, unsigned long long *minflt, unsigned long long *majflt);
/* pidfd_open(2): a descriptor that keeps naming this process; -1 (errno). */
int proc_pidfd(pid_t pid);
/* Age in seconds, from the start time. */
double proc_age_seconds(uint64_t start_ticks);
/* Working directory (malloc'd) or NULL. */
char *proc_cwd(pid_t pid);

/* Pids holding a TCP socket listening on port (IPv4 or IPv6). Returns the
 * count (up to max) or -1. */
int proc_port_listeners(int port, pid_t *pids, int max);
/* Is anything listening on TCP port? */
bool proc_port_listening(int port);

#endif
