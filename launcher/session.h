/* session: what one run of the supervisor holds (supervise.c), and the
 * lines tts-launch itself says during it (session_out.c): on the terminal in
 * the foreground, in the log always, secrets redacted. */
#ifndef TTS_SESSION_H
#define TTS_SESSION_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "instance.h"
#include "logfile.h"
#include "metrics.h"
#include "mlock.h"
#include "notify.h"
#include "progress.h"
#include "spawn.h"
#include "timeline.h"
#include "tracer.h"

/* Everything one run holds; released in one place (session_free). */
struct session {
	struct config *cfg;
	struct timeline *tl;
	struct tracer *tracer;
	struct logfile log;
	struct log_tail tail; /* the service's last output (process.output_tail) */
	struct notify sd;     /* systemd's NOTIFY_SOCKET (notify.h) */
	char phase_said[128]; /* the phase last sent as STATUS= */
	struct child child;
	struct guard guard;		  /* ends the group if we die (spawn.h) */
	pid_t pgid;			  /* the service's process group */
	struct mlock_ctl mlock;		  /* the mlock shim's reports (mlock.h) */
	struct metrics *metrics;	  /* [metrics] listen: /metrics, NULL when off */
	struct progress *progress;	  /* live download progress, stalls; NULL when off */
	double next_progress;		  /* ms of the next progress sample */
	double last_progress_ms;	  /* ms of the last one */
	unsigned long long last_activity; /* tracer_activity() then */
	char **argv;
	char **envp;
	char *timeline_path;
	struct instance inst; /* the app's lock (held for the whole run) and pidfile */
	int out_rd;	      /* service output, read end; -1 when inherited */
	int sfd;	      /* signalfd */
	int tfd;	      /* timerfd, 100 ms ticks */
	int epfd;
	int notify_fd; /* daemon: tells the waiting parent how the start went */
	bool foreground;
	bool ready;
	bool heap_reserved; /* heapreserve.h: once, while the service starts */
	double ready_ms;
	bool warned_timeout;
	bool settled;
	bool window_done; /* [trace] requests_window over: timeline written again */
	bool summary_printed;
	bool log_warned;       /* the first lost log output was said */
	bool timeline_written; /* the last write_timeline() succeeded */
	uid_t timeline_uid;    /* the timeline's owner: the app dir's */
	gid_t timeline_gid;
	json_t *said;	      /* findings printed so far: {"id|message": true} */
	int stop_sig;	      /* signal forwarded, 0 if none */
	double kill_deadline; /* ms; 0 = none */
	bool main_exited;     /* reaped; the rest of its group is being ended */
	int exit_code;	      /* the main process's, once reaped */
	const char *code_of;  /* whose code exit_code is (session_record_exit) */
	double gone_deadline; /* ms: after the group's SIGKILL, how long to wait */
	bool group_done;      /* nothing of the group is left (or we gave up) */
	sigset_t old_mask;
};

/* Into the log: the first loss is said once on stderr, the total at the end. */
void session_log(struct session *s, const char *buf, size_t len);
/* A line (or lines) of tts-launch's own, redacted: terminal (foreground) and log. */
void session_say(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void session_say_block(struct session *s, const char *text, size_t len);
/* progress.h's emit callback (arg: the session). */
void session_progress_emit(void *arg, const char *line, bool terminal);
/* The findings not said yet, each once. */
void session_print_new_findings(struct session *s);
/* The end-of-start-up summary, the findings, and where the timeline is. */
void session_print_summary(struct session *s);
/* STATUS=starting: PHASE when the phase the start-up is in changed. */
void session_notify_phase(struct session *s);
/* rc is tts-launch's own exit code (the service never ran): say what it
 * means (DESIGN.md's contract), on stderr and in the log. */
void session_say_own_exit(struct session *s, int rc);
/* Daemon mode (supervise_daemon.c): fork; the parent waits for the
 * supervisor's report and returns its exit code, the supervisor gets -1. */
int session_daemonize(struct session *s, const char *logpath);
/* The report to the waiting parent (code 0: started), once. */
void session_notify_parent(struct session *s, int code);
/* How the service ended, into the model's process: whose exit code it is
 * (code_of: "service", "signal", "exec"), whether tts-launch asked it to
 * stop, and its last lines of output (redacted), which the exit finding
 * quotes (diagnose_exit.c); error: why tts-launch could not exec it, or NULL. */
void session_record_exit(struct session *s, const char *code_of, const char *error);

#endif
