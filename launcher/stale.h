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
};

struct stale_list {
	struct stale_proc *v;
	size_t n;
};

/* Does a process with this argv and working directory run the configured
 * app? Pure: no /proc access, unit-tested. */
bool stale_matches(const struct config *c, char *const *argv, const char *cwd);

/* Scan /proc for matching processes, excluding ourselves and our ancestors. */
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

#endif
