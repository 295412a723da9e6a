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

static const char *proc_command(const struct interp_proc *p)
{
	return p->command ? p->command : p->comm;
}

/* The record of pid among procs, or -1 */
static long proc_get(const struct interp_proc *procs, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (procs[i].pid == pid)
			return (long)i;
	return -1;
}

/* The runner's python children: uv may first run one to query the
 * interpreter (uv caches the answer), which exits at once. The service's
 * interpreter is the one still running, else the one that ended last;
 * between two running, the first started. */
static void consider(const struct interp_proc *p, pid_t main, const struct interp_proc **best)
{
	double ex = p->exec_ms;
	const struct interp_proc *b = *best;

	if (p->pid == main || p->ppid != main || !interp_is_python(p->command) || !(ex >= 0))
		return;
	if (!b || (!p->exited && b->exited) || (!p->exited && !b->exited && ex < b->exec_ms) ||
	    (p->exited && b->exited && p->exit_ms > b->exit_ms))
		*best = p;
}

/* The interpreter's position among procs, or -1; *m: main's */
static long find(const struct interp_proc *procs, size_t n, pid_t main, long *m)
{
	const struct interp_proc *best = NULL;

	*m = proc_get(procs, n, main);
	if (*m < 0)
		return -1;
	if (!interp_is_runner(proc_command(&procs[*m])))
		return interp_is_python(procs[*m].command) ? *m : -1;
	for (size_t i = 0; i < n; i++)
		consider(&procs[i], main, &best);
	return best ? best - procs : -1;
}

static struct interp_proc rec_of(const json_t *p)
{
	const json_t *x = json_object_get(p, "exit");

	return (struct interp_proc){(int)jnum(p, "pid"),   (int)jnum(p, "ppid"), jstr(p, "command"),
				    jstr(p, "comm"),	   jnum(p, "exec_ms"),	 jnum(p, "exit_ms"),
				    x && !json_is_null(x), jnum(x, "code"),	 jnum(x, "signal")};
}

/* procs (an object keyed by pid, or an array) as records, in order;
 * *elems: the objects they come from. NULL when none or out of memory. */
static struct interp_proc *from_json(json_t *procs, json_t ***elems, size_t *n)
{
	size_t cap = json_is_object(procs)  ? json_object_size(procs)
		     : json_is_array(procs) ? json_array_size(procs)
					    : 0;
	struct interp_proc *out = calloc(cap + 1, sizeof(*out));
	const char *key;
	json_t *p;
	size_t i;

	*n = 0;
	*elems = calloc(cap + 1, sizeof(**elems));
	if (!out || !*elems) {
		free(out);
		free(*elems);
		*elems = NULL;
		return NULL;
	}
	if (json_is_object(procs)) {
		json_object_foreach (procs, key, p) {
			(*elems)[*n] = p;
			out[(*n)++] = rec_of(p);
		}
	} else {
		json_array_foreach (procs, i, p) {
			(*elems)[*n] = p;
			out[(*n)++] = rec_of(p);
		}
	}
	return out;
}

json_t *interp_find(json_t *procs, pid_t main)
{
	json_t **elems, *found = NULL;
	size_t n;
	struct interp_proc *r = from_json(procs, &elems, &n);
	long m, k = r ? find(r, n, main, &m) : -1;

	if (k >= 0)
		found = elems[k];
	free(r);
	free(elems);
	return found;
}

static json_t *copy_or_null(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return v ? json_deep_copy(v) : json_null();
}

json_t *interp_json(json_t *procs, pid_t main)
{
	json_t **elems, *ip, *m, *out;
	size_t n;
	struct interp_proc *r = from_json(procs, &elems, &n);
	long mi, k = r ? find(r, n, main, &mi) : -1;

	if (k < 0) {
		free(r);
		free(elems);
		return json_null();
	}
	ip = elems[k];
	m = elems[mi];
	out = json_pack("{s:i, s:o, s:o, s:o, s:o}", "pid", r[k].pid, "command",
			copy_or_null(ip, "command"), "exec_ms", copy_or_null(ip, "exec_ms"),
			"exit_ms", copy_or_null(ip, "exit_ms"), "exit", copy_or_null(ip, "exit"));
	json_object_set_new(out, "runner",
			    ip == m ? json_null()
				    : json_pack("{s:i, s:o}", "pid", (int)main, "command",
						copy_or_null(m, "command")));
	free(r);
	free(elems);
	return out;
}

int interp_exit_line_of(const struct interp_proc *procs, size_t n, pid_t main, int main_code,
			char *buf, size_t len)
{
	long mi, k = find(procs, n, main, &mi);
	const struct interp_proc *ip;
	const char *runner;

	if (k < 0 || k == mi || !procs[k].exited)
		return -1;
	ip = &procs[k];
	runner = base_name(proc_command(&procs[mi]));
	if (!(ip->signal > 0) && ip->code == 0)
		return -1; /* a clean end needs no words */
	if (ip->signal > 0)
		snprintf(buf, len,
			 "the interpreter %s (pid %d, started by %s) was killed by SIG%s; %s "
			 "passed it on as exit %d",
			 ip->command, ip->pid, runner,
			 sigabbrev_np((int)ip->signal) ? sigabbrev_np((int)ip->signal) : "?",
			 runner, main_code);
	else
		snprintf(buf, len,
			 "the interpreter %s (pid %d, started by %s) exited with status %d; %s "
			 "exited with %d",
			 ip->command, ip->pid, runner, (int)ip->code, runner, main_code);
	return 0;
}

int interp_exit_line(json_t *procs, pid_t main, int main_code, char *buf, size_t len)
{
	json_t **elems;
	size_t n;
	struct interp_proc *r = from_json(procs, &elems, &n);
	int ret = r ? interp_exit_line_of(r, n, main, main_code, buf, len) : -1;

	free(r);
	free(elems);
	return ret;
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
