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
	const char *user;     /* "" or NULL: stay as we are */
	const char *group;    /* "" or NULL: the user's primary group */
	int stdin_fd;	      /* -1: inherit */
	int out_fd;	      /* stdout and stderr; -1: inherit */
	const sigset_t *mask; /* signal mask the child restores before exec */
	bool keep_ipc_lock;   /* with user: keep exactly CAP_IPC_LOCK, as an ambient
			       * capability, for the mlock shim (mlock.h) */
	/* The descriptors passed on purpose (the mlock report socket): every
	 * other one but 0-2 is closed at exec, whatever the caller left open. */
	const int *keep_fds;
	int n_keep_fds;
};

struct child {
	pid_t pid;
	int pidfd;
	int go_fd;  /* write end: one byte releases the child */
	int err_fd; /* read end (CLOEXEC in the child): EOF = exec succeeded */
};

/* Fork; the child becomes a process-group leader and blocks. Before exec
 * it drops to [service] user (then PR_SET_NO_NEW_PRIVS: a setuid program
 * cannot give root back), sets PR_SET_PDEATHSIG = SIGTERM after the drop
 * (which clears it) and closes every descriptor but 0-2 and keep_fds. Returns 0, or
 * -1 with a message (unknown user, fork failure). */
int spawn_prepare(struct child *ch, const struct spawn_spec *s, char *err, size_t errlen);

/* Release the child and learn whether exec worked. Returns 0, or the exit
 * code to use (126/127) with the reason in err. */
int spawn_release(struct child *ch, char *err, size_t errlen);

/* Abort a prepared child that was never released. */
void spawn_abort(struct child *ch);

/* The guard: a process forked by the supervisor that joins the service's
 * process group (so the group's id cannot be reused while it waits) and
 * holds one end of a socket pair whose other end only the supervisor has. If
 * the supervisor dies (SIGKILL, a crash), the guard reads EOF: it sends
 * SIGTERM to the group, SIGKILL after grace seconds to what is left, and
 * exits. It ignores the signals a stop sends the group (all but SIGKILL). */
struct guard {
	pid_t pid; /* 0: none */
	int fd;	   /* write end; -1: none */
};

#define GUARD_INIT                                                                                 \
	{                                                                                          \
		.pid = 0, .fd = -1                                                                 \
	}

/* Start the guard for the group pgid (the prepared child). tell: the guard
 * keeps stderr, for its one line if the supervisor dies (foreground: the
 * terminal); else it holds nothing of the caller's (a daemon's caller waits
 * for EOF on its stderr). Returns 0, or -1 with a message. */
int spawn_guard_start(struct guard *g, pid_t pgid, double grace, bool tell, char *err,
		      size_t errlen);

/* The supervisor is done with the group: the guard exits without a signal. */
void spawn_guard_release(struct guard *g);

/* Live processes (zombies not counted) whose process group is pgid, but
 * for exclude (the guard). At most max pids are stored in pids (may be
 * NULL). Returns the count, or -1 when /proc cannot be read. */
int spawn_group_members(pid_t pgid, pid_t exclude, pid_t *pids, int max);

/* spawn_prepare makes the caller a child subreaper: processes of the
 * service's tree whose parent exits become its children. Those still alive
 * and outside the group pgid (a worker that called setsid), but for
 * exclude; counted and stored like spawn_group_members. Our own unreaped
 * children: their pids cannot be reused, so signalling them is safe. */
int spawn_orphans(pid_t pgid, pid_t exclude, pid_t *pids, int max);

/* Reap the adopted children that exited, but keep1 and keep2 (the main
 * process, whose status is collected with waitid, and the guard). */
void spawn_reap_orphans(pid_t keep1, pid_t keep2);

/* spawn_orphans and spawn_reap_orphans read our children from the
 * children files of our threads, a walk of /proc where the kernel has none
 * (CONFIG_PROC_CHILDREN); true: always the walk (tests/unit/test_spawn_scan.c) */
extern bool spawn_scan_walk_proc;
/* how many walks of /proc the scans made (tests: the children files read) */
extern unsigned long spawn_scan_walks;

/* The service's environment: base (our environ) + PYTHONPATH = app dir,
 * configured additions, inherited; then the [env] variables. NULL-terminated,
 * malloc'd; free with spawn_env_free. */
char **spawn_build_env(const struct config *c, char *const *base);
void spawn_env_free(char **envp);

#endif
