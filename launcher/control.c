#include "control.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procfs.h"
#include "stale.h"
#include "supervise.h"

/* A pidfd for pid, if it is still the process that started at start
 * (a reused pid has another start time). */
static int hold(int pid, unsigned long long start)
{
	int fd;

	if (pid <= 0)
		return -1;
	fd = proc_pidfd(pid);
	if (fd < 0)
		return -1;
	if (proc_start_ticks(pid) != start) {
		close(fd);
		return -1;
	}
	return fd;
}

int control_stop(const struct config *c)
{
	char *path = config_path(c, c->pidfile);
	struct pidfile_info pi;
	int sup, svc, rc = 0;
	char how[160];

	if (pidfile_read(path, &pi) < 0) {
		printf("tts-launch: not running (no pidfile %s)\n", path);
		free(path);
		return 0;
	}
	svc = hold(pi.service_pid, pi.service_start);
	sup = hold(pi.supervisor_pid, pi.supervisor_start);
	if (sup >= 0) {
		/* The supervisor forwards SIGTERM to the service's group,
		 * SIGKILLs it after its grace, writes the timeline and exits. */
		if (stale_end_pidfd(sup, SIGTERM, c->stop_grace + 10, how, sizeof(how)) < 0)
			rc = 1;
		printf("tts-launch: stopped supervisor pid %d: %s\n", pi.supervisor_pid, how);
	}
	if (svc >= 0) {
		struct pollfd p = {.fd = svc, .events = POLLIN};

		if (poll(&p, 1, 0) == 0) {
			/* Still alive without its supervisor: end it directly. */
			if (stale_end_pidfd(svc, SIGTERM, c->stop_grace, how, sizeof(how)) < 0)
				rc = 1;
			printf("tts-launch: stopped service pid %d: %s\n", pi.service_pid, how);
		} else if (sup < 0) {
			printf("tts-launch: service pid %d already gone\n", pi.service_pid);
		}
		close(svc);
	}
	if (sup < 0 && svc < 0)
		printf("tts-launch: not running (stale pidfile %s removed)\n", path);
	if (sup >= 0)
		close(sup);
	if (rc == 0)
		unlink(path);
	free(path);
	return rc;
}

int control_status(const struct config *c)
{
	char *path = config_path(c, c->pidfile);
	struct pidfile_info pi;
	int svc, rc;

	if (pidfile_read(path, &pi) < 0) {
		printf("not running (no pidfile %s)\n", path);
		free(path);
		return 3;
	}
	svc = hold(pi.service_pid, pi.service_start);
	if (svc < 0) {
		printf("dead: pid %d from %s is gone (remove the pidfile or run `tts-launch stop`)\n",
		       pi.service_pid, path);
		rc = 1;
	} else {
		char *cmd = proc_cmdline(pi.service_pid);
		double age = proc_age_seconds(pi.service_start);
		bool sup = proc_start_ticks(pi.supervisor_pid) == pi.supervisor_start;

		printf("running: pid %d, up %.0fs: %s\n", pi.service_pid, age, cmd ? cmd : "?");
		printf("supervisor: pid %d%s\n", pi.supervisor_pid, sup ? "" : " (gone)");
		if (c->port > 0)
			printf("port %d: %s\n", c->port,
			       proc_port_listening(c->port) ? "listening (ready)" : "not listening yet");
		free(cmd);
		close(svc);
		rc = 0;
	}
	free(path);
	return rc;
}
