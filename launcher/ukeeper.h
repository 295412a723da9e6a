/* ukeeper: the process that holds the last references of tts-launch's
 * BPF links (uprobes, tracepoints, raw tracepoints, perf events), so that
 * removing them (an RCU grace period, or a patch of the kernel's text,
 * each) is never paid by tts-launch: at its exit, or when it asks (ukeeper_release, the
 * requests window's end). ukeeper.c says how. */
#ifndef TTS_UKEEPER_H
#define TTS_UKEEPER_H

#include <stdbool.h>

/* the most link fds the keeper takes at its start (per-CPU perf events:
 * two per CPU) */
#define UKEEPER_MAX_FDS 512

/* Starts the keeper with a copy of fds[0..n) (n may be 0: links come later
 * through *sock, as CUDA's at a mapping) (call it before the service
 * execs: it briefly stops being the child subreaper). true when it runs;
 * *sock is then where later link fds go (SCM_RIGHTS, one byte of data, at
 * most 64 fds a message), else -1. prog_of[i] (prog_of NULL, or 0: the
 * link's own, from fdinfo) is the program whose release closes fds[i]: a
 * perf event without a program of its own (tracer_libcio.c's followers)
 * goes with the links of the program it serves. */
/* hold (or NULL): open (or NULL) is what the keeper opens itself once
 * started, off the service's start (tracer_syscalls_hold): perf events
 * without a program that keep tracepoints up, closed with the links of
 * program prog at a release, and after UKEEPER_LINGER_S at the end, as
 * the followers. */
/* tracepoints[0..n_tracepoints): raw tracepoints of the run (rare ones;
 * UKEEPER_MAX_TRACEPOINTS at most) the keeper holds, those it still has a
 * link on (not released at the window's end), from just before the links'
 * close to the linger's end,
 * each with a holder (tphold_events) and a link of a program that does
 * nothing (tphold_programs), so that a run meanwhile attaches there
 * without patching the kernel's text. */
#define UKEEPER_MAX_TRACEPOINTS 32
struct ukeeper_hold {
	int (*open)(int *fds, int max);
	unsigned int prog;
	const char *const *tracepoints;
	int n_tracepoints;
};
/* done (or NULL): run by the keeper once tts-launch has exited and every
 * link it held is closed (no program of the run can run any more), before
 * the linger; its fd[0..2) (-1: none) stay open in the keeper until then
 * (progcache_reset: the run's kept maps emptied, its entry's lock let go). */
struct ukeeper_done {
	void (*fn)(int fd0, int fd1);
	int fd[2];
};
bool ukeeper_start(int *fds, const unsigned int *prog_of, int n, const struct ukeeper_hold *hold,
		   const struct ukeeper_done *done, int *sock);
/* how long, after tts-launch's exit and the links' closes, the keeper
 * still holds the perf events given with a prog_of and those of hold, and
 * the raw tracepoints' holders (ukeeper.c says why) */
#define UKEEPER_LINGER_S 10
/* The fds of this process's BPF links (raw tracepoints, perf events,
 * uprobes, USDT sites: libbpf keeps a USDT link's per-site links to
 * itself) whose program id is
 * one of ids[0..n_ids), from /proc/self/fdinfo, into fds[0..max): how many. */
int ukeeper_link_fds(const unsigned int *ids, int n_ids, int *fds, int max);
/* Asks the keeper on sock to close its copies of the links of programs
 * ids[0..n) now (after this process closed its own: the detach, a grace
 * period per tracepoint or uprobe, is paid by the keeper). */
/* A run's attach and the keepers' slow detaches (the held tracepoints'
 * last closes, the libc definitions' removal: each holds the kernel's
 * event_mutex through grace periods) take turns: the run holds the attach
 * lock (a directory only root can open, in INSTANCE_RUN_DIR) shared from
 * its load to the end of its attach (ukeeper_attach_lock: the fd, closed
 * to let go; -1: none to be had, not root, or not within 3 s), a keeper
 * takes it alone for each detach, so a run waits for one detach at most,
 * not for all of them. */
int ukeeper_attach_lock(void);
#define UKEEPER_RELEASE_MAX 16
bool ukeeper_release(int sock, const unsigned int *ids, int n);

#endif
