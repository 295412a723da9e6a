/* instance: the identity of the running instance of an app. The supervisor
 * holds a write lock (a classic fcntl record lock, so F_GETLK names the
 * holder's pid) on a lock file for its whole run: the lock is the proof
 * that `stop` and `status` trust, and the one guard that lets only one
 * supervisor of an app kill, spawn and write its pidfile at a time.
 *
 * As root both files live in RUN_DIR (root's, 0755), named after the app:
 * nobody else can write them. Otherwise the lock is PIDFILE.lock next to
 * [service] pidfile. An empty pidfile turns both off. */
#ifndef TTS_INSTANCE_H
#define TTS_INSTANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "config.h"

#define INSTANCE_RUN_DIR "/run/tts-launch"

struct instance {
	char *pidfile; /* where the pidfile is; "" = none */
	char *lock;    /* where the lock file is; "" = none */
	bool system;   /* under INSTANCE_RUN_DIR (root) */
	int fd;	       /* the open lock file, -1 */
	int dirfd;     /* its directory, -1 */
	bool locked;   /* we hold the lock */
};

#define INSTANCE_INIT                                                                              \
	{                                                                                          \
		.fd = -1, .dirfd = -1                                                              \
	}

/* Where this app's pidfile and lock are; touches no file. */
void instance_locate(const struct config *c, struct instance *in);
/* The same for a root run (system) or another user's, whoever we are. */
void instance_locate_as(const struct config *c, struct instance *in, bool system);

/* Open (create: also make RUN_DIR and the lock file) the lock file. The
 * directory must be a directory of ours (root's as root) that no one else
 * may write; the file a regular file of ours with one link. -1 with the
 * reason in err; errno ENOENT when !create and there is none. */
int instance_open(struct instance *in, bool create, char *err, size_t errlen);

/* Take the lock: 0 taken (held until instance_close, which removes the
 * file first, or the exit), 1 held by
 * another process (*holder: its pid; -1 when that is not a supervisor's
 * lock), -1 on error (errno). */
int instance_try_lock(struct instance *in, pid_t *holder);

/* The supervisor holding the lock now: its pid, 0 when none, -1 when the
 * lock is held by something that is not a supervisor (an OFD lock). */
pid_t instance_holder(const struct instance *in);

/* A pidfd for holder, checked to still hold the lock after it was taken
 * (a pid freed and reused between the query and the pidfd is caught). */
int instance_hold(const struct instance *in, pid_t holder);

/* The holder's service: the pid in the pidfile when it is a child of
 * holder with the start time recorded, else holder's oldest child. 0 when
 * it has none (starting, or the service has exited). */
pid_t instance_service(const struct instance *in, pid_t holder, bool *pidfile_ok);

/* End the instance whose supervisor is holder (held by holder_fd):
 * SIGTERM it (it stops its service's group: TERM, grace, KILL), wait
 * stop_grace + 10 s, then SIGKILL; a service that outlives it is ended
 * directly. One line per process on out, each starting with prefix.
 * 0 when both are gone. */
int instance_end(int holder_fd, pid_t holder, pid_t service, double stop_grace, const char *prefix,
		 FILE *out);

/* Is the process a zombie (exited, not yet reaped) or gone? */
bool instance_dead(pid_t pid);

/* Open dir (creating it 0755 when missing) as a trusted directory: a real
 * directory owned by uid that no one else may write. -1 with the reason. */
int instance_dir_open(const char *dir, uid_t uid, char *err, size_t errlen);

/* The file name an app gets in RUN_DIR, without its suffix: the app dir's
 * last component (made safe) and a hash of the canonical pidfile path. */
char *instance_key(const char *app_dir, const char *pidfile);

void instance_close(struct instance *in);

/* At a start: take the app's lock (created if missing). Returns 0: taken,
 * or no pidfile so no lock, or another supervisor holds it (*holder > 0);
 * else the exit code to use (2 an untrusted lock directory as root, 3 a
 * lock held by a process that is not a supervisor), said on stderr. */
int instance_lock_start(struct instance *inst, pid_t *holder);
/* Another supervisor (holder) runs this app. [stale] policy = kill: end
 * it, then take the lock (as start_app.sh did); else refuse with exit 3.
 * 0 when the lock is ours. */
int instance_replace(struct instance *inst, const struct config *c, pid_t holder);

#endif
