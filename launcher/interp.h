/* interp: which process of the service is its Python interpreter. `uv run`
 * does not exec python: it spawns it as a child and waits for it
 * (astral-sh/uv#3095), so the service's main process is the runner and the
 * interpreter is its child. Read from the process records (struct
 * interp_proc: the collector's, collector_interp_procs; or the timeline's
 * `processes` array) or, for `status`, from /proc. */
#ifndef TTS_INTERP_H
#define TTS_INTERP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A runner that starts python as its child: uv, uvx (by base name). */
bool interp_is_runner(const char *path);
/* python, python3, python3.11, ... (by base name). */
bool interp_is_python(const char *path);

/* The mlock shim's TTS_LAUNCH_MLOCK_EXE glob: which program of the service
 * arms. A -- COMMAND: the first ("*"), unless it is a runner; the app:
 * python*; behind a runner, "python" exactly: uv runs the project's
 * .venv/bin/python, and a runner that is itself a Python program (a
 * stand-in, pipx-installed tools) is python3.x, which must stay inert. */
struct config;
const char *interp_exe_glob(const struct config *c);

/* A process record as interp reads it (from the timeline's processes[]
 * or the collector's records): numbers 0 for null. */
struct interp_proc {
	int pid, ppid;
	const char *command, *comm; /* NULL: none */
	double exec_ms, exit_ms;
	bool exited; /* an exit record: code, signal */
	double code, signal;
};

/* The interpreter's record among procs (an object keyed by pid or an
 * array): main itself when it runs python, else the python child of a
 * runner main that still runs (else the one that ended last: uv may first
 * run one to query the interpreter); NULL if none. */
json_t *interp_find(json_t *procs, pid_t main);

/* python.interpreter of the timeline: {pid, command, exec_ms, exit_ms,
 * exit, runner: null | {pid, command}}, or JSON null when there is none. */
json_t *interp_json(json_t *procs, pid_t main);

/* When main is a runner whose interpreter has exited by a signal or with a
 * non-zero status: a line saying how
 * ("the interpreter /x/.venv/bin/python (pid 12) was killed by SIGKILL;
 * uv passed it on as exit 137"). 0 with the line, -1 when there is none. */
int interp_exit_line(json_t *procs, pid_t main, int main_code, char *buf, size_t len);
/* The same over n records (the collector's: collector_interp_procs). */
int interp_exit_line_of(const struct interp_proc *procs, size_t n, pid_t main, int main_code,
			char *buf, size_t len);

/* A live runner's interpreter (`status`): svc's child running python, its
 * pid and executable in exe; 0 when svc is no runner or has none yet. */
pid_t interp_live(pid_t svc, char *exe, size_t len);

#endif
