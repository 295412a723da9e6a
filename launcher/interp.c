/* interp: the service's Python interpreter, when a runner (uv run) starts it
 * as a child instead of exec'ing it (astral-sh/uv#3095). */
#include "interp.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "procfs.h"
#include "util.h"

bool interp_is_runner(const char *path)
{
	const char *b = path ? base_name(path) : "";

	return !strcmp(b, "uv") || !strcmp(b, "uvx");
}

bool interp_is_python(const char *path) { return path && !strncmp(base_name(path), "python", 6); }

const char *interp_exe_glob(const struct config *c)
{
	char first[PATH_MAX];

	if (c->n_command)
		return interp_is_runner(c->command[0]) ? "python" : "*";
	snprintf(first, sizeof(first), "%.*s", (int)strcspn(c->python, " \t"), c->python);
	return interp_is_runner(first) ? "python" : "python*";
}

static const char *proc_command(const json_t *p)
{
	const char *cmd = jstr(p, "command");

	return cmd ? cmd : jstr(p, "comm");
}

static pid_t proc_pid_of(const json_t *p) { return (pid_t)jnum(p, "pid"); }

/* The record of pid among procs (object keyed by pid, or array). */
static json_t *proc_get(json_t *procs, pid_t pid)
{
	char k[16];
	json_t *p;
	size_t i;

	if (json_is_object(procs)) {
		snprintf(k, sizeof(k), "%d", (int)pid);
		return json_object_get(procs, k);
	}
	json_array_foreach (procs, i, p)
		if (proc_pid_of(p) == pid)
			return p;
	return NULL;
}

/* Has the process exited (an exit record)? */
static bool exited(const json_t *p)
{
	const json_t *e = json_object_get(p, "exit");

	return e && !json_is_null(e);
}

/* The runner's python children: uv may first run one to query the
 * interpreter (uv caches the answer), which exits at once. The service's
 * interpreter is the one still running, else the one that ended last;
 * between two running, the first started. */
static void consider(json_t *p, pid_t main, json_t **best)
{
	double ex = jnum(p, "exec_ms");
	json_t *b = *best;

	if (proc_pid_of(p) == main || (pid_t)jnum(p, "ppid") != main ||
	    !interp_is_python(jstr(p, "command")) || !(ex >= 0))
		return;
	if (!b || (!exited(p) && exited(b)) ||
	    (!exited(p) && !exited(b) && ex < jnum(b, "exec_ms")) ||
	    (exited(p) && exited(b) && jnum(p, "exit_ms") > jnum(b, "exit_ms")))
		*best = p;
}

json_t *interp_find(json_t *procs, pid_t main)
{
	json_t *m = proc_get(procs, main), *best = NULL, *p;
	const char *key;
	size_t i;

	if (!m)
		return NULL;
	if (!interp_is_runner(proc_command(m)))
		return interp_is_python(jstr(m, "command")) ? m : NULL;
	if (json_is_object(procs)) {
		json_object_foreach (procs, key, p)
			consider(p, main, &best);
	} else {
		json_array_foreach (procs, i, p)
			consider(p, main, &best);
	}
	return best;
}

static json_t *copy_or_null(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return v ? json_deep_copy(v) : json_null();
}

json_t *interp_json(json_t *procs, pid_t main)
{
	json_t *ip = interp_find(procs, main), *m = proc_get(procs, main), *out;

	if (!ip)
		return json_null();
	out = json_pack("{s:i, s:o, s:o, s:o, s:o}", "pid", (int)proc_pid_of(ip), "command",
			copy_or_null(ip, "command"), "exec_ms", copy_or_null(ip, "exec_ms"),
			"exit_ms", copy_or_null(ip, "exit_ms"), "exit", copy_or_null(ip, "exit"));
	json_object_set_new(out, "runner",
			    ip == m ? json_null()
				    : json_pack("{s:i, s:o}", "pid", (int)main, "command",
						copy_or_null(m, "command")));
	return out;
}

int interp_exit_line(json_t *procs, pid_t main, int main_code, char *buf, size_t len)
{
	json_t *ip = interp_find(procs, main), *m = proc_get(procs, main), *ex;
	const char *runner;
	double sig, code;

	if (!ip || ip == m || !(ex = json_object_get(ip, "exit")) || json_is_null(ex))
		return -1;
	runner = base_name(proc_command(m));
	sig = jnum(ex, "signal");
	code = jnum(ex, "code");
	if (!(sig > 0) && code == 0)
		return -1; /* a clean end needs no words */
	if (sig > 0)
		snprintf(buf, len,
			 "the interpreter %s (pid %d, started by %s) was killed by SIG%s; %s "
			 "passed it on as exit %d",
			 jstr(ip, "command"), (int)proc_pid_of(ip), runner,
			 sigabbrev_np((int)sig) ? sigabbrev_np((int)sig) : "?", runner, main_code);
	else
		snprintf(buf, len,
			 "the interpreter %s (pid %d, started by %s) exited with status %d; %s "
			 "exited with %d",
			 jstr(ip, "command"), (int)proc_pid_of(ip), runner, (int)code, runner,
			 main_code);
	return 0;
}

/* The executable's path of a live pid (its /proc exe link), "" if unknown. */
static void exe_of(pid_t pid, char *out, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	n = readlink(link, out, len - 1);
	out[n > 0 ? n : 0] = '\0';
}

pid_t interp_live(pid_t svc, char *exe, size_t len)
{
	char **argv = proc_argv(svc), path[PATH_MAX];
	bool runner = false;
	pid_t found = 0;
	struct dirent *d;
	DIR *proc;

	/* the runner is argv[0], or the script of an interpreter (a stand-in) */
	for (int i = 0; argv && argv[i] && i < 2; i++)
		runner |= interp_is_runner(argv[i]);
	proc_argv_free(argv);
	if (!runner || !(proc = opendir("/proc")))
		return 0;
	while (!found && (d = readdir(proc))) {
		pid_t pid = (pid_t)atoi(d->d_name);

		if (pid <= 0 || proc_ppid(pid) != svc)
			continue;
		exe_of(pid, path, sizeof(path));
		if (interp_is_python(path)) {
			char **a = proc_argv(pid);

			found = pid;
			/* as started (.venv/bin/python), not the file it links to */
			snprintf(exe, len, "%s", a && a[0] && a[0][0] == '/' ? a[0] : path);
			proc_argv_free(a);
		}
	}
	closedir(proc);
	return found;
}
