/* mlock: the launcher side of the mlock shim (hooks/mlock_shim.c,
 * docs/mlock.md). Decides whether to inject the shim, adds it and its
 * settings to the service's environment with a report socket, reads the
 * shim's reports, keeps them under memory.mlock in the timeline and says
 * one line per outcome (with the fix when it failed). */
#ifndef TTS_MLOCK_H
#define TTS_MLOCK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "timeline.h"

struct mlock_ctl {
	enum mlock_mode mode;
	bool user_switch; /* the service runs as [service] user */
	int fd;		  /* our end of the report socket; -1: no shim */
	int child_fd;	  /* the service's end, until it is spawned */
	char *shim;	  /* the library injected */
	json_t *state;	  /* what goes to memory.mlock */
	bool checked;	  /* the "did the shim load" check was done */
	/* The reports come from the service, which may be hostile or broken:
	 * at most MLOCK_KEEP_EVENTS (and MLOCK_KEEP_BYTES) are read and
	 * checked, the rest only counted; memory.mlock.reports. */
	unsigned long long received, kept, rejected, clamped, dropped, dropped_bytes;
	size_t read_bytes; /* of the kept and rejected ones */
	bool said_dropped, said_rejected;
};

#define MLOCK_KEEP_EVENTS 64
#define MLOCK_KEEP_BYTES  (64 * 1024)
#define MLOCK_POLL_MAX	  1024 /* datagrams read per mlock_poll: the loop stays responsive */

#define MLOCK_CTL_INIT                                                                             \
	{                                                                                          \
		.fd = -1, .child_fd = -1                                                           \
	}

/* Mode off: nothing (0). Otherwise find the shim, create the report socket
 * and add LD_PRELOAD and TTS_LAUNCH_MLOCK_* to *envp (a spawn_build_env
 * array). Returns 0, or -1 with a warning in msg: the service then starts
 * without the shim. */
int mlock_prepare(struct mlock_ctl *m, const struct config *c, char ***envp, char *msg, size_t len);

/* The service must keep exactly CAP_IPC_LOCK (ambient) across its user
 * switch: mlock is on and the shim is injected. */
bool mlock_wants_ipc_lock(const struct mlock_ctl *m);

/* After the fork: the launcher closes the service's end of the socket. */
void mlock_spawned(struct mlock_ctl *m);

/* The socket to watch for reports, or -1. */
int mlock_fd(const struct mlock_ctl *m);

/* Read the pending reports (MLOCK_POLL_MAX at most) into the model (and tl,
 * when given): each checked field by field (known fields only, times within
 * [0, now], sizes within [0, 1 PiB], clamped and counted when beyond, the
 * report rejected when of the wrong type or negative). Returns the lines to
 * print (malloc'd), or NULL when there is nothing to say. */
char *mlock_poll(struct mlock_ctl *m, struct timeline *tl);

/* At ready: a warning when the shim never reported that it loaded. */
char *mlock_check_loaded(struct mlock_ctl *m);

/* Store the shim's outcome as memory.mlock in tl (null when the shim was not
 * used; the tracer's calls are memory.mlock_calls). */
void mlock_timeline(struct mlock_ctl *m, struct timeline *tl);

/* The summary line for one report (a memory.mlock.events entry), for the
 * tests and `report`; malloc'd. */
char *mlock_describe(const json_t *ev, const char *fix);

/* The fix to suggest for a failed or refused lock (malloc'd), or NULL. */
char *mlock_fix(const json_t *ev, bool user_switch);

void mlock_free(struct mlock_ctl *m);

#endif
