/* supervise_daemon: daemon mode's detach (the parent waits for the
 * supervisor's report of the start, then returns) and that report. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "session.h"

void session_notify_parent(struct session *s, int code)
{
	int msg[2] = {code, s->child.pid};

	if (s->notify_fd < 0)
		return;
	if (write(s->notify_fd, msg, sizeof(msg)) < 0)
		perror("tts-launch: notify");
	close(s->notify_fd);
	s->notify_fd = -1;
	/* The start is reported: the daemon lets go of the caller's terminal. */
	{
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (null >= 0) {
			dup2(null, STDERR_FILENO);
			close(null);
		}
	}
}

/* Daemon mode: the parent waits until the service has been exec'd, reports,
 * and returns; the child (the supervisor) detaches and carries on. Returns
 * -1 in the supervisor, or the parent's exit code. */
int session_daemonize(struct session *s, const char *logpath)
{
	int p[2], msg[2], sfd;
	sigset_t stops, old;
	pid_t pid;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0) {
		perror("tts-launch: failed to create pipe");
		return 1;
	}
	/* The daemon does the stale kill and the start: until it reports, a
	 * Ctrl-C or SIGTERM to the caller is passed on to it (it then does
	 * not start the service, or stops it). */
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	sigaddset(&stops, SIGQUIT);
	sigprocmask(SIG_BLOCK, &stops, &old);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("tts-launch: failed to fork");
		sigprocmask(SIG_SETMASK, &old, NULL);
		return 1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		sigprocmask(SIG_SETMASK, &old, NULL);
		close(p[0]);
		s->notify_fd = p[1];
		setsid();
		/* stderr stays the caller's until notify_parent(): what the
		 * start says before the service runs (stale instances, errors)
		 * reaches the terminal. */
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			close(null);
		}
		s->foreground = false;
		return -1;
	}
	close(p[1]);
	sfd = signalfd(-1, &stops, SFD_CLOEXEC | SFD_NONBLOCK);
	for (;;) {
		struct pollfd pf[2] = {{.fd = p[0], .events = POLLIN},
				       {.fd = sfd, .events = POLLIN}};
		struct signalfd_siginfo si;

		if (poll(pf, sfd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[0].revents)
			break;
		if (read(sfd, &si, sizeof(si)) == sizeof(si))
			kill(pid, (int)si.ssi_signo);
	}
	do
		n = read(p[0], msg, sizeof(msg));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (n != (ssize_t)sizeof(msg)) {
		fprintf(stderr,
			"tts-launch: the daemon failed before starting the service; see %s\n",
			*logpath ? logpath : "its log");
		return 1;
	}
	if (msg[0] != 0)
		return msg[0];
	/* under systemd (Type=notify), the supervisor is the main process now:
	 * its READY=1 is accepted from it (NotifyAccess=main) */
	if (notify_on(&s->sd)) {
		char mainpid[32];

		snprintf(mainpid, sizeof(mainpid), "MAINPID=%d", (int)pid);
		notify_send(&s->sd, mainpid);
	}
	fprintf(
	    stderr,
	    "tts-launch: started pid %d in the background (log: %s; stop: tts-launch stop%s%s)\n",
	    msg[1], *logpath ? logpath : "none",
	    strcmp(s->cfg->source, "(built-in defaults)") ? " -c " : "",
	    strcmp(s->cfg->source, "(built-in defaults)") ? s->cfg->source : "");
	return 0;
}
