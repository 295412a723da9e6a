/* spawn: the service's environment, and a fork whose child waits on a pipe
 * before exec, so the tracer can attach before its first instruction. */
#ifndef TTS_SPAWN_H
#define TTS_SPAWN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"

struct spawn_spec {
	char **argv;
	char **envp;
	const char *cwd;
	const char *user;  /* "" or NULL: stay as we are */
	const char *group; /* "" or NULL: the user's primary group */
	int stdin_fd;      /* -1: inherit */
	int out_fd;        /* stdout and stderr; -1: inherit */
	const sigset_t *mask; /* signal mask the child restores before exec */
	bool keep_ipc_lock;   /* with user: keep exactly CAP_IPC_LOCK, as an ambient
			       * capability, for the mlock shim (mlock.h) */
};

struct child {
	pid_t pid;
	int pidfd;
	int go_fd;  /* write end: one byte releases the child */
	int err_fd; /* read end (CLOEXEC in the child): EOF = exec succeeded */
};

/* Fork; the child becomes a process-group leader and blocks. Returns 0, or
 * -1 with a message (unknown user, fork failure). */
int spawn_prepare(struct child *ch, const struct spawn_spec *s, char *err, size_t errlen);

/* Release the child and learn whether exec worked. Returns 0, or the exit
 * code to use (126/127) with the reason in err. */
int spawn_release(struct child *ch, char *err, size_t errlen);

/* Abort a prepared child that was never released. */
void spawn_abort(struct child *ch);

/* The service's environment: base (our environ) + PYTHONPATH = app dir,
 * configured additions, inherited; then the [env] variables. NULL-terminated,
 * malloc'd; free with spawn_env_free. */
char **spawn_build_env(const struct config *c, char *const *base);
void spawn_env_free(char **envp);

#endif
