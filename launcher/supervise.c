#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "collector.h"
#include "diagnose.h"
#include "heapreserve.h"
#include "instance.h"
#include "interp.h"
#include "lasttl.h"
#include "logfile.h"
#include "metrics.h"
#include "mlock.h"
#include "pidfile.h"
#include "pipeline.h"
#include "procfs.h"
#include "progress.h"
#include "redact.h"
#include "session.h"
#include "spawn.h"
#include "stale.h"
#include "timeline.h"
#include "timeline_internal.h"
#include "tracer.h"
#include "util.h"

extern char **environ;

/* The one caller of the pipeline: the model brought up to date, up to a
 * stage (progress sampling, a /metrics scrape, the final write). */
static int refresh_model(struct session *s, enum pipeline_upto upto, char *err, size_t errlen)
{
	struct pipeline_in in = {.tracer = s->tracer,
				 .mlock = &s->mlock,
				 .progress = s->progress,
				 .path = s->timeline_path,
				 .uid = s->timeline_uid,
				 .gid = s->timeline_gid};

	return pipeline_run(&in, s->tl, upto, err, errlen);
}

/* The phase the start-up is in (the one that started last), into the log
 * when it changes: `status` reads the log to say what a daemon is doing
 * now (control.c), as systemd's STATUS= says it (session_notify_phase). */
static void log_phase(struct session *s)
{
	static char logged[128];
	const json_t *ph, *cur = NULL;
	char line[300], *r;
	size_t i;

	json_array_foreach (json_object_get(timeline_json(s->tl), "phases"), i, ph)
		if (!cur || jnum(ph, "start_ms") >= jnum(cur, "start_ms"))
			cur = ph;
	if (!jstr(cur, "name") || !strcmp(logged, jstr(cur, "name")))
		return;
	snprintf(logged, sizeof(logged), "%s", jstr(cur, "name"));
	snprintf(line, sizeof(line), "tts-launch: phase: %s, from %.1f s after launch\n", logged,
		 jnum(cur, "start_ms") / 1000);
	r = redact_text(line);
	if (r)
		session_log(s, r, strlen(r));
	free(r);
}

/* About once a second until ready (+ settle): what the trace saw so far,
 * for download progress and stall detection. */
static void progress_tick(struct session *s, double now)
{
	unsigned long long act;
	double t;

	if (!s->progress || !s->tracer || s->settled || now < s->next_progress)
		return;
	/* Snapshot while downloads move; otherwise only often enough to tell
	 * a stall (half the stall period): a torch import needs none. */
	act = tracer_activity(s->tracer);
	if (act == s->last_activity &&
	    (s->cfg->stall <= 0 || now < s->last_progress_ms + s->cfg->stall * 500))
		return;
	s->last_activity = act;
	s->last_progress_ms = now;
	t = clock_ms();
	refresh_model(s, PIPE_TRACE, NULL, 0);
	t = clock_ms() - t;
	progress_snapshot_cost(s->progress, t);
	/* a snapshot reads every BPF map (in batches, mapwalk.h: a few ms
	 * with thousands of paths): keep it under 5% of the supervisor's
	 * time, but sample at least every 3 s while a download moves */
	s->next_progress = now + (t * 20 < 1000 ? 1000 : t * 20 > 3000 ? 3000 : t * 20);
	if (!s->ready) {
		session_notify_phase(s);
		log_phase(s);
		progress_sample(s->progress, timeline_json(s->tl), clock_ms());
	}
}

static int write_pidfile(struct session *s, char *err, size_t errlen)
{
	struct pidfile_info pi = {.service_pid = s->child.pid,
				  .service_start = proc_start_ticks(s->child.pid),
				  .supervisor_pid = getpid(),
				  .supervisor_start = proc_start_ticks(getpid())};

	return pidfile_write(s->inst.pidfile, &pi, err, errlen);
}

static void write_timeline(struct session *s)
{
	char err[512];
	int rc = refresh_model(s, PIPE_WRITE, err, sizeof(err));

	if (!*s->timeline_path)
		return;
	s->timeline_written = rc == 0;
	if (!s->timeline_written) {
		session_say(s, "tts-launch: warning: %s\n", err);
	} else {
		/* for `diagnose` without arguments (lasttl.h): absolute names */
		char *tl = realpath(s->timeline_path, NULL);
		char *conf = s->cfg->source && *s->cfg->source != '('
				 ? realpath(s->cfg->source, NULL)
				 : NULL;

		char cwd[4096];

		if (getcwd(cwd, sizeof(cwd)))
			lasttl_note(cwd, tl, conf ? conf : s->cfg->source);
		free(tl);
		free(conf);
	}
}

/* Relay what the service printed; returns false at EOF. */
static bool relay_output(struct session *s)
{
	char buf[65536];
	ssize_t n;

	errno = 0;
	n = read(s->out_rd, buf, sizeof(buf));
	if (n <= 0)
		return n < 0 && (errno == EAGAIN || errno == EINTR);
	log_tail_push(&s->tail, buf, (size_t)n);
	session_log(s, buf, (size_t)n);
	if (s->foreground) {
		ssize_t off = 0;

		progress_clear(s->progress);

		while (off < n) {
			ssize_t w = write(STDOUT_FILENO, buf + off, (size_t)(n - off));

			if (w <= 0)
				break;
			off += w;
		}
	}
	return true;
}

/* Reports from the mlock shim: one line each on the terminal and in the log. */
static void read_mlock(struct session *s)
{
	char *text = mlock_poll(&s->mlock, s->tl);

	if (text)
		session_say_block(s, text, strlen(text));
	free(text);
}

/* Signals for the whole process group (uvicorn workers, helper processes),
 * by the group's id: the main process may be reaped already, and the guard,
 * a member, keeps the id from being reused while we wait. */
static void signal_group(struct session *s, int sig)
{
	pid_t o[64];
	int n;

	/* Without a guard (it could not start), an empty group's id may be
	 * reused once the main process is reaped: look before signalling. */
	if (s->pgid > 0 &&
	    (!s->main_exited || s->guard.pid > 0 || spawn_group_members(s->pgid, 0, NULL, 0) > 0))
		kill(-s->pgid, sig);
	/* and the tree's orphans we adopted outside the group (spawn.h) */
	n = spawn_orphans(s->pgid, s->guard.pid, o, 64);
	for (int i = 0; i < n && i < 64; i++)
		kill(o[i], sig);
}

static void forward_signal(struct session *s, int sig)
{
	if (s->stop_sig) {
		/* A second interrupt means "now". */
		session_say(s, "tts-launch: SIG%s again: killing the service\n", sigabbrev_np(sig));
		signal_group(s, SIGKILL);
		s->kill_deadline = 0;
		s->gone_deadline = clock_ms() + 5000;
		return;
	}
	s->stop_sig = sig;
	notify_send(&s->sd, "STOPPING=1\nSTATUS=stopping the service");
	s->kill_deadline = clock_ms() + s->cfg->stop_grace * 1000;
	session_say(s, "tts-launch: SIG%s: stopping the service (SIGKILL in %.0fs)\n",
		    sigabbrev_np(sig), s->cfg->stop_grace);
	signal_group(s, sig == SIGHUP || sig == SIGQUIT ? SIGTERM : sig);
}

/* The group's members but the guard, and the orphans we adopted, listed
 * for a message. */
static int group_members(struct session *s, char *list, size_t len)
{
	pid_t pids[8];
	int n = spawn_group_members(s->pgid, s->guard.pid, pids, 8), m;
	size_t off = 0;

	if (n < 0)
		n = 0;
	m = spawn_orphans(s->pgid, s->guard.pid, pids + (n < 8 ? n : 8), n < 8 ? 8 - n : 0);
	if (m > 0)
		n += m;

	if (list && len)
		list[0] = '\0';
	for (int i = 0; list && i < n && i < 8 && off < len; i++)
		off += (size_t)snprintf(list + off, len - off, "%s%d", i ? ", " : "", pids[i]);
	if (list && n > 8 && off < len)
		snprintf(list + off, len - off, ", ...");
	return n;
}

/* After the main process is gone: is the rest of the group gone too? With
 * a SIGKILL sent, a process in uninterruptible sleep is waited for 5 s at
 * most, then left (said). */
static void check_group(struct session *s, double now)
{
	char list[160];
	int n = group_members(s, list, sizeof(list));

	if (n <= 0) {
		s->group_done = true;
		return;
	}
	if (s->gone_deadline > 0 && now >= s->gone_deadline) {
		session_say(
		    s,
		    "tts-launch: warning: process%s %s of the service's group survived SIGKILL for "
		    "5s "
		    "(uninterruptible sleep?): left behind\n",
		    n == 1 ? "" : "es", list);
		s->group_done = true;
	}
}

static void on_tick(struct session *s)
{
	double now = clock_ms();
	double ms;

	/* Frequent trace events do not wake us (bpf/common.bpf.h): drain them. */
	if (s->tracer)
		tracer_poll(s->tracer);
	if (s->main_exited) {
		/* Only the rest of the group is left to end. */
		if (s->kill_deadline > 0 && now >= s->kill_deadline) {
			session_say(
			    s,
			    "tts-launch: the service's group outlived its %.0fs grace: SIGKILL\n",
			    s->cfg->stop_grace);
			signal_group(s, SIGKILL);
			s->kill_deadline = 0;
			s->gone_deadline = now + 5000;
		}
		check_group(s, now);
		return;
	}
	if (s->tracer && !s->heap_reserved) {
		/* on the first tick, while the service starts: the heap the
		 * timeline at its exit will need, faulted in now (heapreserve.h) */
		size_t pages = heap_reserve(HEAP_RESERVE_BYTES);

		s->heap_reserved = true;
		if (s->cfg->verbose)
			fprintf(stderr, "tts-launch: heap reserve: %zu KiB in %.1f ms\n",
				pages * (size_t)sysconf(_SC_PAGESIZE) / 1024, clock_ms() - now);
	}
	if (!s->ready) {
		if (s->tracer && tracer_ready(s->tracer, &ms)) {
			s->ready = true;
			s->ready_ms = ms;
		} else if (s->cfg->port > 0 && proc_port_listening(s->cfg->port)) {
			s->ready = true;
			s->ready_ms = now;
		}
		if (s->ready) {
			char *warn;

			/* a last look before ready stops the samples: a download
			 * renamed since the last one is said (downloaded NAME), in
			 * its place before the ready line */
			if (s->progress && s->tracer) {
				refresh_model(s, PIPE_TRACE, NULL, 0);
				progress_sample(s->progress, timeline_json(s->tl), clock_ms());
			}
			timeline_mark(s->tl, "ready", s->ready_ms);
			/* The shim reports when it loads, at exec: by now it has. */
			read_mlock(s);
			warn = mlock_check_loaded(&s->mlock);
			if (warn)
				session_say_block(s, warn, strlen(warn));
			free(warn);
			if (s->cfg->port > 0)
				session_say(
				    s,
				    "tts-launch: ready: listening on %s:%d, %.2fs after launch\n",
				    s->cfg->host, s->cfg->port, s->ready_ms / 1000);
			else
				session_say(
				    s, "tts-launch: ready: first TCP listen, %.2fs after launch\n",
				    s->ready_ms / 1000);
			notify_send(&s->sd, "READY=1");
			notify_status(&s->sd, "ready: listening");
		} else if (!s->warned_timeout && s->cfg->ready_timeout > 0 &&
			   now > s->cfg->ready_timeout * 1000) {
			s->warned_timeout = true;
			session_say(
			    s,
			    "tts-launch: warning: not ready after %gs (still waiting; a first run "
			    "may "
			    "download gigabytes: see the log, or raise [service] ready_timeout)\n",
			    s->cfg->ready_timeout);
		}
	}
	progress_tick(s, now);
	if (s->ready && !s->settled && now >= s->ready_ms + s->cfg->settle * 1000) {
		s->settled = true;
		write_timeline(s);
		session_print_summary(s);
	}
	/* requests are traced for [trace] requests_window after ready (a
	 * command after -- for as long as it runs): write them when it ends */
	if (s->settled && !s->window_done && s->tracer && s->cfg->n_command == 0 &&
	    now >= s->ready_ms + s->cfg->requests_window * 1000) {
		s->window_done = true;
		tracer_poll(s->tracer); /* what the heavy probes sent before they go */
		tracer_lighten_now(s->tracer);
		write_timeline(s);
		session_print_new_findings(s); /* from the requests */
	}
	if (s->kill_deadline > 0 && now >= s->kill_deadline) {
		session_say(s, "tts-launch: the service outlived its %.0fs grace: SIGKILL\n",
			    s->cfg->stop_grace);
		signal_group(s, SIGKILL);
		s->kill_deadline = 0;
		s->gone_deadline = now + 5000;
	}
}

/* Whatever is still buffered in the service's pipe. */
static void drain_output(struct session *s)
{
	if (s->out_rd >= 0) {
		/* Non-blocking: a grandchild may still hold the pipe open. */
		fcntl(s->out_rd, F_SETFL, O_NONBLOCK);
		while (relay_output(s) && errno != EAGAIN)
			;
	}
}

/* The service's main process exited: collect its status, then end the rest
 * of its process group the way a stop does (SIGTERM, SIGKILL after
 * [service] stop_grace): a forked worker left behind keeps the port, and
 * the next start would find it held. */
static void on_exit_status(struct session *s)
{
	char list[160];
	siginfo_t si;
	int code, left;

	memset(&si, 0, sizeof(si));
	while (waitid(P_PID, (id_t)s->child.pid, &si, WEXITED) < 0 && errno == EINTR)
		;
	s->child.pid = -s->child.pid; /* reaped: never signal that pid again */
	s->main_exited = true;
	drain_output(s);
	read_mlock(s);
	/* whose code tts-launch exits with: the service's own, or 128+N */
	if (si.si_code == CLD_EXITED) {
		code = si.si_status;
		timeline_set_exit(s->tl, code, 0, clock_ms());
		session_say(s, "tts-launch: service exited with status %d%s%s\n", code,
			    s->ready || s->stop_sig ? "" : " before it was ready",
			    code ? " (the service's own exit code, which tts-launch exits with)"
				 : "");
		s->code_of = "service";
	} else {
		code = 128 + si.si_status;
		timeline_set_exit(s->tl, -1, si.si_status, clock_ms());
		session_say(s,
			    "tts-launch: service killed by SIG%s%s (exit %d: 128 + the signal)\n",
			    sigabbrev_np(si.si_status),
			    s->ready || s->stop_sig ? "" : " before it was ready", code);
		s->code_of = "signal";
	}
	if (s->tracer) {
		/* uv run: how its python child ended (its exit record came first) */
		char line[PATH_MAX + 160];
		struct interp_proc *procs;
		size_t n;

		tracer_poll(s->tracer);
		procs = collector_interp_procs(tracer_collector(s->tracer), &n);
		if (interp_exit_line_of(procs, n, -s->child.pid, code, line, sizeof(line)) == 0)
			session_say(s, "tts-launch: %s\n", line);
		free(procs);
	}
	s->exit_code = code;
	notify_send(&s->sd, "STOPPING=1");
	snprintf(list, sizeof(list), "the service exited (exit %d)", code);
	notify_status(&s->sd, list);
	metrics_set_running(s->metrics, false); /* a scrape racing the exit */
	left = group_members(s, list, sizeof(list));
	if (left <= 0) {
		s->group_done = true;
	} else if (!s->stop_sig && s->kill_deadline <= 0 && s->gone_deadline <= 0) {
		session_say(s,
			    "tts-launch: %d process%s of the service's group still run%s (pid %s): "
			    "SIGTERM, "
			    "SIGKILL in %.0fs\n",
			    left, left == 1 ? "" : "es", left == 1 ? "s" : "", list,
			    s->cfg->stop_grace);
		signal_group(s, SIGTERM);
		s->kill_deadline = clock_ms() + s->cfg->stop_grace * 1000;
	}
}

/* The service and its group are gone: the timeline and the summary. */
static int finish(struct session *s)
{
	drain_output(s);
	read_mlock(s);
	session_record_exit(s, s->code_of ? s->code_of : "service", NULL);
	write_timeline(s);
	if (!s->summary_printed)
		session_print_summary(s);
	else
		session_print_new_findings(s); /* what requests or the exit showed */
	return s->exit_code;
}

static int add_fd(int epfd, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* Before each scrape of /metrics: what the probes saw so far. */
static void refresh_for_metrics(void *arg)
{
	struct session *s = arg;

	refresh_model(s, PIPE_MEMORY, NULL, 0);
}

static int loop(struct session *s)
{
	struct itimerspec its = {{0, 100000000}, {0, 100000000}};
	bool out_open = s->out_rd >= 0;

	s->pgid = s->child.pid;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->epfd < 0 || s->tfd < 0 || timerfd_settime(s->tfd, 0, &its, NULL) < 0) {
		session_say(s, "tts-launch: failed to set up the event loop: %s\n",
			    strerror(errno));
		return 1;
	}
	add_fd(s->epfd, s->sfd);
	add_fd(s->epfd, s->child.pidfd);
	add_fd(s->epfd, s->tfd);
	if (out_open)
		add_fd(s->epfd, s->out_rd);
	if (s->tracer && tracer_fd(s->tracer) >= 0)
		add_fd(s->epfd, tracer_fd(s->tracer));
	if (mlock_fd(&s->mlock) >= 0)
		add_fd(s->epfd, mlock_fd(&s->mlock));
	if (*s->cfg->metrics_listen) {
		char err[256];

		/* a metrics endpoint that cannot start never stops the service */
		s->metrics = metrics_start(s->cfg->metrics_listen, s->tl, refresh_for_metrics, s,
					   err, sizeof(err));
		if (!s->metrics)
			session_say(s, "tts-launch: warning: %s\n", err);
		else if (add_fd(s->epfd, metrics_fd(s->metrics)) < 0)
			session_say(s, "tts-launch: warning: /metrics: epoll: %s\n",
				    strerror(errno));
		else
			session_say(s, "tts-launch: metrics: http://%s/metrics\n",
				    s->cfg->metrics_listen);
	}
	for (;;) {
		struct epoll_event evs[8];
		int n = epoll_wait(s->epfd, evs, 8, -1);

		if (n < 0 && errno != EINTR) {
			session_say(s, "tts-launch: epoll_wait failed: %s\n", strerror(errno));
			return 1;
		}
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == s->sfd) {
				struct signalfd_siginfo si;

				while (read(s->sfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo == SIGCHLD)
						/* adopted orphans that exited */
						spawn_reap_orphans(s->child.pid, s->guard.pid);
					else if (si.ssi_signo != SIGPIPE)
						forward_signal(s, (int)si.ssi_signo);
				}
			} else if (fd == s->tfd) {
				uint64_t ticks;

				if (read(s->tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
					return 1;
				on_tick(s);
				metrics_run(s->metrics); /* connection timeouts */
			} else if (fd == s->out_rd) {
				if (!relay_output(s)) {
					epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->out_rd, NULL);
					out_open = false;
				}
			} else if (fd == s->child.pidfd) {
				/* readable for ever once exited: out of the set */
				epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->child.pidfd, NULL);
				on_exit_status(s);
			} else if (s->tracer && fd == tracer_fd(s->tracer)) {
				tracer_poll(s->tracer);
			} else if (fd == mlock_fd(&s->mlock)) {
				read_mlock(s);
			} else if (s->metrics && fd == metrics_fd(s->metrics)) {
				metrics_run(s->metrics);
			}
		}
		if (s->main_exited && s->group_done)
			return finish(s);
	}
}

/* What the run holds, let go. The BPF objects and the model are left to
 * the process's exit, which follows (main.c): their ~300 descriptors
 * closed and mappings unmapped one call each, and the model's thousands of
 * blocks freed, were ~3.6 ms of the command's end; the exit takes them
 * back at once. No probe is detached by either: the uprobe keeper holds
 * every link's last reference (tracer.c). */
static void session_free(struct session *s)
{
	spawn_guard_release(&s->guard);
	if (s->log.lost)
		fprintf(
		    stderr,
		    "tts-launch: warning: %llu bytes of output were not written to the log (%s)\n",
		    s->log.lost, s->log.error);
	metrics_stop(s->metrics);
	json_decref(s->said);
	progress_free(s->progress);
	if (s->child.pidfd >= 0)
		close(s->child.pidfd);
	if (s->out_rd >= 0)
		close(s->out_rd);
	if (s->sfd >= 0)
		close(s->sfd);
	if (s->tfd >= 0)
		close(s->tfd);
	if (s->epfd >= 0)
		close(s->epfd);
	logfile_close(&s->log);
	notify_close(&s->sd);
	mlock_free(&s->mlock);
	spawn_env_free(s->argv);
	spawn_env_free(s->envp);
	free(s->timeline_path);
	instance_close(&s->inst); /* lets go of the lock */
}

/* A stopping signal waiting in the (blocked) mask: 128 + its number, after
 * taking it; else 0. */
static int stopped_before_start(void)
{
	static const int stops[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
	sigset_t pending;

	if (sigpending(&pending) < 0)
		return 0;
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {
		sigset_t one;
		int sig;

		if (!sigismember(&pending, stops[i]))
			continue;
		sigemptyset(&one);
		sigaddset(&one, stops[i]);
		sigwait(&one, &sig);
		fprintf(stderr, "tts-launch: SIG%s before the service started: not starting it\n",
			sigabbrev_np(sig));
		return 128 + sig;
	}
	return 0;
}

/* -v: the CPU this process used up to the service's release, every thread
 * (the load's too): on these 2-core machines the launch -> exec cannot be
 * shorter than about half of it (BENCHMARKS.md) */
static void say_cpu_before_exec(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return;
	fprintf(stderr, "tts-launch: CPU before the exec: %.1f ms (user %.1f, system %.1f)\n",
		(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
		    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3,
		ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3,
		ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3);
}

int supervise_run(struct config *c, int argc, char **argv)
{
	struct session s = {.cfg = c,
			    .inst = INSTANCE_INIT,
			    .log = {.fd = -1, .dirfd = -1},
			    .out_rd = -1,
			    .sfd = -1,
			    .tfd = -1,
			    .epfd = -1,
			    .notify_fd = -1,
			    .child = {.pidfd = -1, .go_fd = -1, .err_fd = -1},
			    .guard = GUARD_INIT,
			    .mlock = MLOCK_CTL_INIT,
			    .sd = NOTIFY_INIT};
	struct stale_list stale = {0};
	struct safe_owners owners;
	char err[1024], why[512] = "";
	char *logpath = NULL;
	int out[2] = {-1, -1};
	pid_t holder = 0;
	sigset_t mask;
	double t;
	int rc = 1;

	s.foreground = c->mode == MODE_FOREGROUND;
	/* systemd's socket: ours, not the service's (taken out of environ) */
	if (notify_open(&s.sd, err, sizeof(err)) < 0)
		fprintf(stderr, "tts-launch: warning: %s\n", err);
	s.tl = timeline_new(c, argc, argv);
	timeline_mark(s.tl, "launch", 0);
	s.timeline_path = config_path(c, c->timeline);
	instance_locate(c, &s.inst);
	logpath = config_path(c, c->log_file);

	/* Daemon: detach first, so that the process that takes the lock below
	 * is the supervisor that holds it for the whole run (a fcntl lock is
	 * not inherited across fork). */
	if (c->mode == MODE_DAEMON) {
		int prc = session_daemonize(&s, logpath);

		if (prc >= 0) {
			rc = prc;
			goto out_parent;
		}
	}

	/* Signals arrive through the signalfd; the child restores the mask.
	 * Blocked from here, so that a stop (or a newer start, policy kill)
	 * that SIGTERMs us before the service runs is seen before the spawn. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGPIPE);
	sigprocmask(SIG_BLOCK, &mask, &s.old_mask);
	s.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	/* The app's lock: from here to the exit, no other supervisor of this
	 * app kills, spawns or writes the pidfile (instance.h). */
	t = clock_ms();
	rc = instance_lock_start(&s.inst, &holder);
	if (rc)
		goto out;

	/* Stale instances: find, check the port, end them. */
	if (stale_find(c, &stale) < 0) {
		fprintf(stderr, "tts-launch: failed to scan /proc: %s\n", strerror(errno));
		rc = 1;
		goto out;
	}
	/* The running supervisor's tree counts as stale for the port check:
	 * it is ended below, not a foreign holder. */
	if (holder > 0)
		stale_list_add(&stale, holder);
	rc = stale_check_port(c, &stale, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "tts-launch: error: %s\n", err);
		goto out;
	}
	/* The log file before anything is killed: a bad [log] file is a config
	 * error (exit 2), and exit 2 promises nothing was killed. */
	{
		struct passwd *pw = c->user && *c->user ? getpwnam(c->user) : NULL;
		struct stat st;

		safe_owners_init(&owners, pw ? pw->pw_uid : (uid_t)-1, c->app_dir);
		/* the timeline belongs to whoever owns the checkout, so the
		 * person who runs `diagnose` can read it (secrets are redacted) */
		s.timeline_uid = stat(c->app_dir, &st) == 0 ? st.st_uid : (uid_t)-1;
		s.timeline_gid = s.timeline_uid != (uid_t)-1 ? st.st_gid : (gid_t)-1;
	}
	if (logfile_open(&s.log, logpath, &owners, c->log_max_size, c->log_backups, err,
			 sizeof(err)) < 0) {
		fprintf(stderr, "tts-launch: error: %s\n", err);
		rc = 2;
		goto out;
	}
	if (holder > 0) {
		/* Another supervisor runs this app: end it or refuse (exit 3),
		 * then look again at what is left. */
		rc = instance_replace(&s.inst, c, holder);
		if (rc)
			goto out;
		stale_list_free(&stale);
		if (stale_find(c, &stale) < 0) {
			fprintf(stderr, "tts-launch: failed to scan /proc: %s\n", strerror(errno));
			rc = 1;
			goto out;
		}
		rc = stale_check_port(c, &stale, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "tts-launch: error: %s\n", err);
			goto out;
		}
	}
	rc = stale_kill(c, &stale, stderr);
	if (rc)
		goto out;
	timeline_phase(s.tl, "stale_kill", t, clock_ms());
	rc = 1;

	/* The pipe the service writes into. */
	if (s.log.path || !s.foreground) {
		if (pipe2(out, O_CLOEXEC) < 0) {
			perror("tts-launch: failed to create pipe");
			goto out;
		}
		s.out_rd = out[0];
	}

	/* A stop, or a newer start ending us, came while we were getting
	 * here: do not start the service only to stop it. */
	rc = stopped_before_start();
	if (rc)
		goto out;
	s.argv = config_service_argv(c);
	s.envp = spawn_build_env(c, environ);
	/* mlock on: LD_PRELOAD the shim, with its report socket (mlock.h). */
	if (mlock_prepare(&s.mlock, c, &s.envp, err, sizeof(err)) < 0)
		session_say(&s, "tts-launch: warning: %s\n", err);
	{
		int null = s.foreground ? -1 : open("/dev/null", O_RDONLY | O_CLOEXEC);
		int keep = s.mlock.child_fd; /* the report socket, passed on purpose */
		struct spawn_spec spec = {.argv = s.argv,
					  .envp = s.envp,
					  .cwd = c->app_dir,
					  .user = c->user,
					  .group = c->group,
					  .stdin_fd = null,
					  .out_fd = out[1],
					  .mask = &s.old_mask,
					  .keep_ipc_lock = mlock_wants_ipc_lock(&s.mlock),
					  .keep_fds = &keep,
					  .n_keep_fds = keep >= 0};

		rc = spawn_prepare(&s.child, &spec, err, sizeof(err));
		mlock_spawned(&s.mlock); /* the service holds its end now */
		if (null >= 0)
			close(null);
	}
	if (out[1] >= 0)
		close(out[1]);
	if (rc < 0) {
		/* fork, pipe or pidfd failed: the system's fault, not the config's */
		session_say(&s, "tts-launch: error: %s\n", err);
		rc = 1;
		session_notify_parent(&s, rc);
		goto out;
	}
	timeline_mark(s.tl, "spawn", clock_ms());
	timeline_set_process(s.tl, s.child.pid, s.argv);
	/* If we are killed, the guard ends the service's group (spawn.h). */
	if (spawn_guard_start(&s.guard, s.child.pid, c->stop_grace, s.foreground, err,
			      sizeof(err)) < 0)
		session_say(
		    &s,
		    "tts-launch: warning: %s: if tts-launch is killed, only the service's main "
		    "process is told (SIGTERM)\n",
		    err);

	/* Tracing attaches now, while the child waits before exec. */
	if (c->trace) {
		struct tracer_opts o = {.root_pid = s.child.pid,
					.listen_port = c->port,
					.cfg = c,
					.verbose = c->verbose};

		s.tracer = tracer_start(&o, why, sizeof(why));
		if (!s.tracer)
			session_say(&s,
				    "tts-launch: warning: tracing disabled: %s; the service starts "
				    "untraced\n",
				    why);
	} else {
		snprintf(why, sizeof(why), "disabled by --no-trace or [trace] enabled = false");
	}
	timeline_set_tracing(s.tl, s.tracer != NULL, s.tracer ? NULL : why);
	if (s.tracer) {
		/* auto: a live line on a terminal we run in front of, else log lines */
		bool tty = s.foreground && isatty(STDERR_FILENO);
		struct progress_opts po = {.mode = c->progress,
					   .stall_s = c->stall,
					   .log_every_s = 5,
					   .tty = stderr,
					   .emit = session_progress_emit,
					   .arg = &s};

		if (po.mode == PROGRESS_AUTO)
			po.mode = tty ? PROGRESS_TTY : PROGRESS_LOG;
		if (po.mode == PROGRESS_TTY && !s.foreground)
			po.mode = PROGRESS_LOG;
		s.progress = progress_new(&po);
	}

	/* The pidfile names the service before it runs: a `status` or `stop`
	 * that sees it listening finds it named (written after the exec, a
	 * busy machine let the service bind its port first) */
	if (*s.inst.pidfile && write_pidfile(&s, err, sizeof(err)) < 0)
		session_say(&s, "tts-launch: warning: failed to write the pidfile: %s\n", err);
	rc = spawn_release(&s.child, err, sizeof(err));
	if (rc) {
		pidfile_remove_if(s.inst.pidfile, getpid());
		session_say(&s, "tts-launch: error: %s: %s\n", s.argv[0], err);
		while (waitpid(s.child.pid, NULL, 0) < 0 && errno == EINTR)
			;
		s.child.pid = 0;
		timeline_set_exit(s.tl, rc, 0, clock_ms());
		session_record_exit(&s, "exec", err);
		write_timeline(&s);
		session_notify_parent(&s, rc);
		goto out;
	}
	if (!s.tracer)
		timeline_mark(s.tl, "exec", clock_ms());
	if (c->verbose)
		say_cpu_before_exec();
	tracer_released(s.tracer);
	session_say(&s, "tts-launch: started pid %d: %s (in %s)\n", s.child.pid, s.argv[0],
		    c->app_dir);
	snprintf(err, sizeof(err), "MAINPID=%d\nSTATUS=starting: pid %d", (int)getpid(),
		 s.child.pid);
	notify_send(&s.sd, err);
	session_notify_parent(&s, 0);

	rc = loop(&s);
	/* Only our own pidfile: under the lock no newer run has written it. */
	pidfile_remove_if(s.inst.pidfile, getpid());
out:
	if (s.child.pid == 0) /* the service never ran: the code is ours */
		session_say_own_exit(&s, rc);
	session_notify_parent(&s, rc); /* a daemon that failed before the start said so */
	sigprocmask(SIG_SETMASK, &s.old_mask, NULL);
out_parent:
	stale_list_free(&stale);
	free(logpath);
	session_free(&s);
	return rc;
}
