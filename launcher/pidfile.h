/* pidfile: the file a supervisor writes while it runs, naming its service
 * and itself with their start times (a reused pid has another start time).
 * It is a hint for `stop` and `status`, never proof: instance.h's lock is. */
#ifndef TTS_PIDFILE_H
#define TTS_PIDFILE_H

#include <stddef.h>

/* "SERVICE_PID START_TICKS\nSUPERVISOR_PID START_TICKS\n" */
struct pidfile_info {
	int service_pid;
	unsigned long long service_start;
	int supervisor_pid;
	unsigned long long supervisor_start;
};

/* Written atomically (safefile.h: O_EXCL temp name, no link followed),
 * mode 0644. -1 with the reason in err. */
int pidfile_write(const char *path, const struct pidfile_info *pi, char *err, size_t errlen);

/* 0, -1 when missing or unreadable (errno) or an empty regular file (written
 * without fsync: what a crash before it reached the disk leaves; it names
 * nothing), -2 when it is not a pidfile (malformed, not a regular file, a
 * link that is not root's). Read without following a link another user
 * planted and without blocking on a FIFO. */
int pidfile_read(const char *path, struct pidfile_info *pi);

/* Remove path only if it still names supervisor_pid (a newer run may own
 * it). Returns true when removed. */
int pidfile_remove_if(const char *path, int supervisor_pid);

#endif
