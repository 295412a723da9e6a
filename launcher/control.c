#include "control.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "instance.h"
#include "interp.h"
#include "pidfile.h"
#include "procfs.h"
#include "redact.h"
#include "timeline.h"
#include "timeline_internal.h"
#include "util.h"

/* A process's command line as status and stop print it: secrets redacted
 * (redact.h), control characters escaped for the terminal (util.h). */
static char *shown_cmdline(pid_t pid)
{
	char *cmd = proc_cmdline(pid), *r = cmd ? redact_text(cmd) : NULL, *out;
	size_t len;

	free(cmd);
	if (!r)
		return NULL;
	len = strlen(r) * 4 + 1;
	out = malloc(len);
	if (out && text_esc(r, out, len) == r)
		memcpy(out, r, strlen(r) + 1); /* nothing to escape */
	free(r);
	return out;
}

/* How the last run ended, from the timeline it wrote ([trace] timeline):
 * the exit code or signal, when, and the explanation of a failed start. */
static void last_run(const struct config *c)
{
	char *path = c->timeline && *c->timeline ? config_path(c, c->timeline) : NULL;
	char err[256], when[64] = "?";
	struct timeline *tl = path && *path ? timeline_load(path, err, sizeof(err)) : NULL;
	json_t *root, *proc, *ex, *f;
	double epoch, ms;
	size_t i;

	if (!tl) {
		free(path);
		return;
	}
	root = timeline_json(tl);
	proc = json_object_get(root, "process");
	ex = json_object_get(proc, "exit");
	if (json_is_object(ex)) {
		json_t *code = json_object_get(ex, "code"), *sig = json_object_get(ex, "signal");
		time_t t;
		struct tm tm;

		epoch = json_number_value(json_object_get(
		    json_object_get(json_object_get(root, "launcher"), "start"), "wall_epoch"));
		ms = json_number_value(json_object_get(ex, "ms"));
		t = (time_t)(epoch + ms / 1000);
		if (epoch > 0 && localtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		if (json_is_integer(sig))
			printf(
			    "last run: pid %lld was killed by SIG%s at %s, %.1fs after launch%s\n",
			    (long long)json_integer_value(json_object_get(proc, "pid")),
			    sigabbrev_np((int)json_integer_value(sig)) ?: "?", when, ms / 1000,
			    json_is_true(json_object_get(ex, "stop_requested")) ? " (stopped)"
										: "");
		else
			printf("last run: pid %lld exited with status %lld at %s, %.1fs after "
			       "launch%s\n",
			       (long long)json_integer_value(json_object_get(proc, "pid")),
			       (long long)json_integer_value(code), when, ms / 1000,
			       json_is_true(json_object_get(ex, "stop_requested")) ? " (stopped)"
										   : "");
	}
	json_array_foreach (json_object_get(root, "findings"), i, f) {
		const char *id = json_string_value(json_object_get(f, "id"));
		char *r;

		if (!id || strcmp(id, "start-failed"))
			continue;
		r = redact_text(json_string_value(json_object_get(f, "message")) ?: "");
		if (r) {
			char e[8192];

			printf("why: %s\n", text_esc(r, e, sizeof(e)));
		}
		free(r);
	}
	printf("timeline: %s (tts-launch diagnose %s)\n", path, path);
	timeline_free(tl);
	free(path);
}

/* A log line, without its newline, escaped for the terminal. */
static void print_line(const char *label, const char *l, size_t skip)
{
	char line[1024], esc[4096];

	snprintf(line, sizeof(line), "%.*s", (int)strcspn(l + skip, "\r\n"), l + skip);
	printf("%s: %s\n", label, text_esc(line, esc, sizeof(esc)));
}

/* What a live start-up is doing, from the lines tts-launch wrote to the log
 * since it started svc ("tts-launch: started pid SVC:"), cheaply, without
 * asking the supervisor: the phase it is in (the supervisor logs each
 * change, supervise.c), until ready the latest download progress
 * (progress.c's lines), and the last line it said. */
static void last_said(const struct config *c, pid_t svc)
{
	char *path = c->log_file && *c->log_file ? config_path(c, c->log_file) : NULL;
	char buf[65536], started[64];
	const char *best = NULL, *phase = NULL, *dl = NULL, *ready = NULL;
	FILE *f = path && *path ? fopen(path, "re") : NULL;
	size_t n;

	free(path);
	if (!f)
		return;
	if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > (long)sizeof(buf) - 1)
		fseek(f, -(long)(sizeof(buf) - 1), SEEK_END);
	else
		rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	snprintf(started, sizeof(started), "tts-launch: started pid %d:", (int)svc);
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, "tts-launch: ", 12))
			continue;
		if (!strncmp(l, started, strlen(started)))
			phase = dl = ready = NULL; /* this run's lines from here on */
		else if (!strncmp(l, "tts-launch: phase: ", 19))
			phase = l;
		else if (!strncmp(l, "tts-launch: download", 20) ||
			 !strncmp(l, "tts-launch: migrat", 18) ||
			 !strncmp(l, "tts-launch: copying ", 20))
			dl = l;
		else if (!strncmp(l, "tts-launch: ready", 17))
			ready = l;
		if (strncmp(l, "tts-launch: phase: ", 19))
			best = l;
	}
	if (ready)
		printf("phase: ready\n");
	else if (phase)
		print_line("phase", phase, 19);
	if (dl && !ready)
		print_line("download", dl, 12);
	if (best)
		print_line("last said", best, 0);
}

/* Exit code when the pidfile or the lock cannot be trusted (README). */
#define UNTRUSTED 4

/* Is pid the process the pidfile recorded (same start time)? */
static bool is_live(int pid, unsigned long long start)
{
	return pid > 0 && start && proc_start_ticks(pid) == start && !instance_dead(pid);
}

/* No supervisor holds the lock: the pidfile alone proves nothing. A pidfile
 * naming nothing alive is stale; one naming a live process is refused (it
 * may have been written by anyone who can write there). Returns the exit
 * code (stale: stop 0, status 1). */
static int no_holder(const struct instance *in, const char *why, bool stop)
{
	struct pidfile_info pi;
	int r = pidfile_read(in->pidfile, &pi);
	int pid;
	char *cmd;

	if (r == -1) {
		printf("%snot running (no pidfile %s)\n", stop ? "tts-launch: " : "", in->pidfile);
		return stop ? 0 : 3;
	}
	if (r < 0) {
		printf(
		    "%snot trusted: %s is not a pidfile tts-launch wrote (%s); nothing signalled "
		    "(remove it)\n",
		    stop ? "tts-launch: " : "", in->pidfile, why);
		return UNTRUSTED;
	}
	pid = is_live(pi.service_pid, pi.service_start)		? pi.service_pid
	      : is_live(pi.supervisor_pid, pi.supervisor_start) ? pi.supervisor_pid
								: 0;
	if (!pid) {
		if (stop) {
			pidfile_remove_if(in->pidfile, pi.supervisor_pid);
			printf("tts-launch: not running (stale pidfile %s removed)\n", in->pidfile);
			return 0;
		}
		printf(
		    "dead: pid %d from %s is gone (remove the pidfile or run `tts-launch stop`)\n",
		    pi.service_pid, in->pidfile);
		return 1;
	}
	cmd = shown_cmdline(pid);
	printf("%snot trusted: %s names pid %d (%s), but no tts-launch supervisor holds its lock "
	       "(%s): nothing signalled. If it is a service whose supervisor died, end it by hand; "
	       "otherwise remove the pidfile\n",
	       stop ? "tts-launch: " : "", in->pidfile, pid, cmd ? cmd : "?", why);
	free(cmd);
	return UNTRUSTED;
}

/* Open the lock and find its holder. Returns the holder (> 0), or 0 with
 * *rc set to the verb's exit code when there is none to act on. */
static pid_t find_holder(const struct config *c, struct instance *in, bool stop, int *rc)
{
	char err[1024];
	pid_t holder;

	instance_locate(c, in);
	if (!in->system && *in->pidfile && access(in->lock, F_OK) < 0) {
		/* Not root: the instance may be one root started. */
		struct instance root = INSTANCE_INIT;

		instance_locate_as(c, &root, true);
		if (access(root.lock, F_OK) == 0) {
			instance_close(in);
			*in = root;
		} else {
			instance_close(&root);
		}
	}
	if (!*in->pidfile) {
		fprintf(stderr,
			"tts-launch: error: %s: [service] pidfile is empty, so no instance can be "
			"found: set it (the default is tts-launch.pid)\n",
			c->source);
		*rc = UNTRUSTED;
		return 0;
	}
	if (instance_open(in, false, err, sizeof(err)) < 0) {
		if (errno == ENOENT) {
			*rc = no_holder(in, err, stop);
			return 0;
		}
		fprintf(stderr, "tts-launch: error: %s; nothing signalled\n", err);
		*rc = UNTRUSTED;
		return 0;
	}
	holder = instance_holder(in);
	if (holder < 0) {
		fprintf(
		    stderr,
		    "tts-launch: error: the lock %s is held, but not by a tts-launch supervisor: "
		    "not trusted, nothing signalled\n",
		    in->lock);
		*rc = UNTRUSTED;
		return 0;
	}
	if (holder == 0) {
		snprintf(err, sizeof(err), "%s is not locked", in->lock);
		*rc = no_holder(in, err, stop);
	}
	return holder;
}

int control_stop(const struct config *c)
{
	struct instance in = INSTANCE_INIT;
	pid_t holder, svc;
	bool ok;
	int hfd, rc = 0;

	holder = find_holder(c, &in, true, &rc);
	if (!holder)
		goto out;
	hfd = instance_hold(&in, holder);
	if (hfd < 0) {
		printf("tts-launch: not running (its supervisor pid %d exited just now)\n", holder);
		goto out;
	}
	svc = instance_service(&in, holder, &ok);
	if (!ok && svc)
		printf("tts-launch: warning: %s does not name this instance's service (pid %d): "
		       "ignored\n",
		       in.pidfile, svc);
	rc = instance_end(hfd, holder, svc, c->stop_grace, "tts-launch: stopped ", stdout) < 0;
	close(hfd);
	/* A supervisor SIGKILLed could not remove its pidfile. (Not under the
	 * lock: a start meeting us as the lock's holder would end us.) */
	if (!rc)
		pidfile_remove_if(in.pidfile, holder);
out:
	instance_close(&in);
	return rc;
}

/* The TCP ports the tree under root listens on: the sockets in LISTEN
 * state (/proc/net/tcp*) that its processes hold open. */
struct listen_sock {
	unsigned long inode;
	int port;
};

static size_t listening(struct listen_sock *v, size_t max)
{
	static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	size_t n = 0;

	for (size_t t = 0; t < 2; t++) {
		FILE *f = fopen(tables[t], "re");
		char line[512];

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f) && n < max) {
			char local[128];
			unsigned st, port;
			unsigned long inode;

			/* sl local rem st tx:rx tr:when retr uid timeout inode */
			if (sscanf(line, " %*s %127s %*s %x %*s %*s %*s %*s %*s %lu", local, &st,
				   &inode) != 3 ||
			    st != 0x0A || !strchr(local, ':'))
				continue;
			if (sscanf(strrchr(local, ':') + 1, "%x", &port) != 1)
				continue;
			v[n].inode = inode;
			v[n].port = (int)port;
			n++;
		}
		fclose(f);
	}
	return n;
}

static bool in_tree(pid_t pid, pid_t root)
{
	for (int depth = 0; pid > 1 && depth < 64; depth++, pid = proc_ppid(pid))
		if (pid == root)
			return true;
	return false;
}

static int tree_ports(pid_t root, int *ports, int max)
{
	struct listen_sock socks[256];
	size_t ns = listening(socks, 256);
	struct dirent *de;
	int n = 0;
	DIR *proc;

	if (!ns || !(proc = opendir("/proc")))
		return 0;
	while ((de = readdir(proc)) && n < max) {
		char path[64];
		struct dirent *fe;
		pid_t pid;
		DIR *fds;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (!in_tree(pid, root))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
		fds = opendir(path);
		if (!fds)
			continue;
		while ((fe = readdir(fds)) && n < max) {
			char link[PATH_MAX], target[64];
			unsigned long inode;
			ssize_t len;

			snprintf(link, sizeof(link), "/proc/%d/fd/%s", (int)pid, fe->d_name);
			len = readlink(link, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = 0;
			if (sscanf(target, "socket:[%lu]", &inode) != 1)
				continue;
			for (size_t i = 0; i < ns; i++) {
				bool seen = false;

				if (socks[i].inode != inode)
					continue;
				for (int k = 0; k < n; k++)
					seen |= ports[k] == socks[i].port;
				if (!seen)
					ports[n++] = socks[i].port;
			}
		}
		closedir(fds);
	}
	closedir(proc);
	return n;
}

int control_status(const struct config *c)
{
	struct instance in = INSTANCE_INIT;
	pid_t holder, svc;
	int rc = 0, ports[16], np;
	char *cmd, exe[PATH_MAX];
	pid_t ipid;
	bool ok;

	holder = find_holder(c, &in, false, &rc);
	if (!holder) {
		if (rc == 1 || rc == 3) /* dead or not running: how the last run ended */
			last_run(c);
		goto out;
	}
	svc = instance_service(&in, holder, &ok);
	if (!svc) {
		struct pidfile_info pi;

		/* Its pidfile names the service it had: that one has exited,
		 * and the supervisor is finishing (the timeline). */
		if (pidfile_read(in.pidfile, &pi) == 0 && pi.supervisor_pid == holder &&
		    pi.supervisor_start == proc_start_ticks(holder)) {
			printf("dead: service pid %d has exited (its supervisor pid %d is "
			       "finishing)\n",
			       pi.service_pid, holder);
			rc = 1;
		} else {
			printf(
			    "starting: supervisor pid %d holds %s and has not started the service "
			    "yet\n",
			    holder, in.lock);
		}
		goto out;
	}
	if (instance_dead(svc)) {
		printf("dead: service pid %d has exited (its supervisor pid %d is finishing)\n",
		       svc, holder);
		rc = 1;
		goto out;
	}
	cmd = shown_cmdline(svc);
	printf("running: pid %d, up %.0fs: %s\n", svc, proc_age_seconds(proc_start_ticks(svc)),
	       cmd ? cmd : "?");
	free(cmd);
	ipid = interp_live(svc, exe, sizeof(exe)); /* uv run: python is its child */
	if (ipid > 0)
		printf("interpreter: pid %d (%s), started by pid %d\n", ipid, exe, svc);
	printf("supervisor: pid %d (holds the lock %s)\n", holder, in.lock);
	printf("pidfile: %s%s\n", in.pidfile,
	       ok ? "" : " (does not name this service: not trusted, ignored)");
	/* The port the service really listens on, which the config given to
	 * `status` may not know. */
	np = tree_ports(svc, ports, 16);
	for (int i = 0; i < np; i++)
		printf("port %d: listening (ready)%s\n", ports[i],
		       c->port > 0 && ports[i] != c->port ? " (not the configured port)" : "");
	if (!np) {
		if (c->port > 0)
			printf("port %d: not listening yet\n", c->port);
		else
			printf("port: none listening yet\n");
	}
	last_said(c, svc);
out:
	instance_close(&in);
	return rc;
}
