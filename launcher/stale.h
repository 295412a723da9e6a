/* stale: find earlier instances of the configured app, check who holds the
 * port, and end the stale ones safely (pidfd, identity re-check, SIGTERM,
 * grace, SIGKILL). */
#ifndef TTS_STALE_H
#define TTS_STALE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "config.h"

struct stale_proc {
	pid_t pid;
	uint64_t start_ticks;
	char *cmdline;
	uid_t uid; /* real uid */
};

struct stale_list {
	struct stale_proc *v;
	size_t n;
	/* Look-alikes of other users: not instances, never signalled (said) */
	struct stale_proc *foreign;
	size_t n_foreign;
};

/* Whose processes can be an instance: root, [service] user, the owner of
 * [app] dir (the usual owner of a start_app.sh instance) and tts-launch's
 * own user. Anyone else's `exec -a python3 tail -f webui.py` in the app
 * directory is a look-alike: killing it, or refusing to start because of
 * it, would let any user stop the service. */
struct stale_owners {
	uid_t uid[4];
	int n;
};

void stale_owners_init(const struct config *c, struct stale_owners *o);

/* Pure: both the real and the effective uid must be one of the owners (a
 * setuid-root program started by another user is still theirs). */
bool stale_owner_counts(const struct stale_owners *o, uid_t ruid, uid_t euid);

/* Does a process with this argv and working directory run the configured
 * app? Pure: no /proc access, unit-tested. */
bool stale_matches(const struct config *c, char *const *argv, const char *cwd);

/* Scan /proc for matching processes, excluding ourselves and our ancestors;
 * matches of other users go to out->foreign. */
int stale_find(const struct config *c, struct stale_list *out);

/* The port must be free or held only by stale instances (or their
 * children). Returns 0, or 3 with a message in err naming the holder. */
int stale_check_port(const struct config *c, const struct stale_list *l, char *err, size_t errlen);

/* End each instance per [stale] policy; one report line each on out.
 * Returns 0, or 3 when policy = fail and an instance runs. */
int stale_kill(const struct config *c, const struct stale_list *l, FILE *out);

/* Signal a process we hold a pidfd for, wait up to grace seconds, then
 * SIGKILL. Writes how it ended into how. Returns 0 when it is gone. */
int stale_end_pidfd(int pidfd, int sig, double grace, char *how, size_t howlen);

void stale_list_free(struct stale_list *l);
/* Count pid (a running supervisor) among the stale instances, for
 * stale_check_port: its service's port is not a foreign holder's. */
void stale_list_add(struct stale_list *l, pid_t pid);

#endif
