#include "stale.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "procfs.h"
#include "util.h"

/* Interpreters and runners that start a script given as an argument. */
static bool is_runner(const struct config *c, const char *argv0)
{
	const char *b = base_name(argv0);
	size_t len = strcspn(c->python, " \t");
	char first[PATH_MAX];

	if (!strncmp(b, "python", 6) || !strcmp(b, "uv") || !strcmp(b, "uvx"))
		return true;
	snprintf(first, sizeof(first), "%.*s", (int)len, c->python);
	return len && !strcmp(b, base_name(first));
}

/* The path with its directory resolved but not its last component: two
 * checkouts whose webui.py link to the same file are still two apps. */
static char *canon_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir, *out = NULL;
	char buf[PATH_MAX];

	if (!slash)
		return NULL;
	snprintf(buf, sizeof(buf), "%.*s", (int)(slash - path), path);
	dir = realpath(buf[0] ? buf : "/", NULL);
	if (dir && asprintf(&out, "%s/%s", dir, slash + 1) < 0)
		out = NULL;
	free(dir);
	return out;
}

/* Is the word `arg` (relative to cwd) the configured script? */
static bool is_script(const struct config *c, const char *arg, const char *cwd)
{
	const char *want = c->stale_match;
	char path[PATH_MAX * 2], wanted[PATH_MAX * 2];

	if (strcmp(base_name(arg), base_name(want)))
		return false;
	if (c->stale_scope == SCOPE_ANY)
		return true;
	/* Same app: the script, resolved against the process's directory,
	 * is the one in our app directory. */
	if (!cwd)
		return false;
	if (arg[0] == '/')
		snprintf(path, sizeof(path), "%s", arg);
	else
		snprintf(path, sizeof(path), "%s/%s", cwd, arg);
	if (want[0] == '/')
		snprintf(wanted, sizeof(wanted), "%s", want);
	else
		snprintf(wanted, sizeof(wanted), "%s/%s", c->app_dir, want);
	{
		char *a = canon_dir(path), *b = canon_dir(wanted);
		bool same;

		/* The directory may be gone (deleted checkout): compare the text. */
		same = (a && b) ? !strcmp(a, b) : !strcmp(path, wanted);
		free(a);
		free(b);
		return same;
	}
}

bool stale_matches(const struct config *c, char *const *argv, const char *cwd)
{
	if (!argv || !argv[0] || !*c->stale_match)
		return false;
	/* Executed directly: ./webui.py */
	if (is_script(c, argv[0], cwd))
		return true;
	if (!is_runner(c, argv[0]))
		return false;
	/* The script is the first word that is not an option (a runner's
	 * "run" subcommand skipped): `python -u webui.py`, `uv run webui.py`.
	 * Never any later argument, so `python edit.py webui.py` is safe. */
	for (int i = 1; argv[i]; i++) {
		if (argv[i][0] == '-') {
			/* python -X opt / -W arg take a value */
			if (!strcmp(argv[i], "-X") || !strcmp(argv[i], "-W"))
				i += argv[i + 1] ? 1 : 0;
			continue;
		}
		if (!strcmp(argv[i], "run"))
			continue;
		return is_script(c, argv[i], cwd);
	}
	return false;
}

static void owner_add(struct stale_owners *o, uid_t uid)
{
	for (int i = 0; i < o->n; i++)
		if (o->uid[i] == uid)
			return;
	if (o->n < (int)(sizeof(o->uid) / sizeof(o->uid[0])))
		o->uid[o->n++] = uid;
}

void stale_owners_init(const struct config *c, struct stale_owners *o)
{
	struct stat st;

	o->n = 0;
	owner_add(o, 0);
	owner_add(o, getuid());
	if (c->user && *c->user) {
		struct passwd *pw = getpwnam(c->user);

		if (pw)
			owner_add(o, pw->pw_uid);
	}
	if (c->app_dir && stat(c->app_dir, &st) == 0)
		owner_add(o, st.st_uid);
}

bool stale_owner_counts(const struct stale_owners *o, uid_t ruid, uid_t euid)
{
	bool r = false, e = false;

	for (int i = 0; i < o->n; i++) {
		r = r || o->uid[i] == ruid;
		e = e || o->uid[i] == euid;
	}
	return r && e;
}

/* The real and effective uid from /proc/PID/status ("Uid:\tR E S F"). */
static bool proc_uids(pid_t pid, uid_t *ruid, uid_t *euid)
{
	char path[64], line[256];
	bool ok = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long r, e;

		if (!strncmp(line, "Uid:", 4)) {
			ok = sscanf(line + 4, "%lu %lu", &r, &e) == 2;
			*ruid = (uid_t)r;
			*euid = (uid_t)e;
			break;
		}
	}
	fclose(f);
	return ok;
}

static void list_add(struct stale_proc **v, size_t *n, pid_t pid, uid_t uid)
{
	struct stale_proc *nv = realloc(*v, (*n + 1) * sizeof(**v));

	if (!nv)
		return;
	*v = nv;
	nv[*n].pid = pid;
	nv[*n].uid = uid;
	nv[*n].start_ticks = proc_start_ticks(pid);
	nv[*n].cmdline = proc_cmdline(pid);
	if (nv[*n].start_ticks && nv[*n].cmdline)
		(*n)++;
	else
		free(nv[*n].cmdline);
}

/* Ourselves and our ancestors (a shell running `tts-launch ... webui.py`
 * must not match), collected once per scan. */
struct lineage {
	pid_t pid[64];
	int n;
};

static void lineage_init(struct lineage *l)
{
	l->n = 0;
	for (pid_t p = getpid(); p > 1 && l->n < 64; p = proc_ppid(p))
		l->pid[l->n++] = p;
}

static bool in_lineage(const struct lineage *l, pid_t pid)
{
	for (int i = 0; i < l->n; i++)
		if (l->pid[i] == pid)
			return true;
	return false;
}

/* The scan's work on each process (reading its command line, ~10-15 us a
 * process here: the largest part of the start on a host with hundreds of
 * processes, BENCHMARKS.md) in parts, each on a thread of its own, when
 * the host has more than SCAN_SPLIT processes a part: up to one part a
 * CPU this process may run on, SCAN_PARTS at most. The parts are runs of
 * /proc's order, their lists joined in it. The threads may run on any of
 * those CPUs but this thread's: a new thread starts beside its creator,
 * and the scan (a few ms) ends before the scheduler would move it (on 2
 * CPUs, half the runs took as long as one pass). */
#define SCAN_SPLIT 128
#define SCAN_PARTS 4

struct scan_part {
	const struct config *c;
	const struct stale_owners *owners;
	const struct lineage *self;
	const pid_t *pid;
	size_t n;
	struct stale_list out;
};

static void *scan_part(void *arg)
{
	struct scan_part *sp = arg;
	const char *want = base_name(sp->c->stale_match);

	for (size_t i = 0; i < sp->n; i++) {
		pid_t pid = sp->pid[i];
		char **argv, *cwd = NULL;
		bool match = false, named = false;

		if (in_lineage(sp->self, pid))
			continue;
		argv = proc_argv(pid);
		if (!argv)
			continue; /* kernel thread or gone */
		/* the working directory only for command lines naming the script:
		 * this scan runs before every start, over every process */
		for (char **a = argv; *a && !named; a++)
			named = !strcmp(base_name(*a), want);
		if (named) {
			cwd = proc_cwd(pid);
			match = stale_matches(sp->c, argv, cwd);
		}
		proc_argv_free(argv);
		free(cwd);
		if (match) {
			uid_t ruid, euid;

			if (!proc_uids(pid, &ruid, &euid))
				continue; /* gone */
			if (stale_owner_counts(sp->owners, ruid, euid))
				list_add(&sp->out.v, &sp->out.n, pid, ruid);
			else
				list_add(&sp->out.foreign, &sp->out.n_foreign, pid, ruid);
		}
	}
	return NULL;
}

/* src's entries moved to the end of dst (false: no memory, src kept) */
static bool list_join(struct stale_proc **dst, size_t *dn, struct stale_proc **src, size_t *sn)
{
	struct stale_proc *nv;

	if (!*sn)
		return true;
	nv = realloc(*dst, (*dn + *sn) * sizeof(**dst));
	if (!nv)
		return false;
	memcpy(nv + *dn, *src, *sn * sizeof(**src));
	*dst = nv;
	*dn += *sn;
	free(*src);
	*src = NULL;
	*sn = 0;
	return true;
}

/* Every process of /proc, in its order, into *pid (freed by the caller),
 * *n of them; -1 with errno */
static int pid_list(pid_t **pid, size_t *n)
{
	DIR *proc = opendir("/proc");
	struct dirent *de;
	size_t cap = 0;

	*pid = NULL;
	*n = 0;
	if (!proc)
		return -1;
	while ((de = readdir(proc))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		if (*n == cap) {
			pid_t *np = realloc(*pid, (cap = cap ? 2 * cap : 512) * sizeof(**pid));

			if (!np) {
				int err = errno;

				closedir(proc);
				free(*pid);
				*pid = NULL;
				errno = err;
				return -1;
			}
			*pid = np;
		}
		(*pid)[(*n)++] = (pid_t)atoi(de->d_name);
	}
	closedir(proc);
	return 0;
}

int stale_find(const struct config *c, struct stale_list *out)
{
	struct scan_part part[SCAN_PARTS];
	pthread_t th[SCAN_PARTS];
	bool started[SCAN_PARTS] = {false};
	struct stale_owners owners;
	struct lineage self;
	pid_t *pid = NULL;
	size_t n = 0, per;
	pthread_attr_t attr;
	cpu_set_t cpus;
	bool away = false;
	int parts, err = 0;

	memset(out, 0, sizeof(*out));
	if (pid_list(&pid, &n) < 0)
		return -1;
	lineage_init(&self);
	stale_owners_init(c, &owners);
	parts = (int)(n / SCAN_SPLIT);
	if (parts > SCAN_PARTS)
		parts = SCAN_PARTS;
	if (parts > 1 && !sched_getaffinity(0, sizeof(cpus), &cpus)) {
		int me = sched_getcpu();

		if (parts > CPU_COUNT(&cpus))
			parts = CPU_COUNT(&cpus);
		if (me >= 0 && me < CPU_SETSIZE && CPU_ISSET(me, &cpus) && CPU_COUNT(&cpus) > 1 &&
		    !pthread_attr_init(&attr)) {
			CPU_CLR(me, &cpus);
			away = !pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
			if (!away)
				pthread_attr_destroy(&attr);
		}
	}
	if (parts < 1)
		parts = 1;
	per = (n + (size_t)parts - 1) / (size_t)parts;
	for (int j = 0; j < parts; j++) {
		size_t from = per * (size_t)j < n ? per * (size_t)j : n;

		part[j] = (struct scan_part){.c = c,
					     .owners = &owners,
					     .self = &self,
					     .pid = pid ? pid + from : NULL,
					     .n = n - from < per ? n - from : per};
		if (j > 0)
			started[j] =
			    !pthread_create(&th[j], away ? &attr : NULL, scan_part, &part[j]);
	}
	if (away)
		pthread_attr_destroy(&attr);
	for (int j = 0; j < parts; j++)
		if (!started[j])
			scan_part(&part[j]);
	for (int j = 0; j < parts; j++) {
		if (started[j])
			pthread_join(th[j], NULL);
		if (!list_join(&out->v, &out->n, &part[j].out.v, &part[j].out.n) ||
		    !list_join(&out->foreign, &out->n_foreign, &part[j].out.foreign,
			       &part[j].out.n_foreign))
			err = ENOMEM;
		stale_list_free(&part[j].out);
	}
	free(pid);
	if (err) {
		stale_list_free(out);
		errno = err;
		return -1;
	}
	return 0;
}

/* Is pid one of the stale instances or a descendant of one? */
static bool in_stale_tree(const struct stale_list *l, pid_t pid)
{
	for (pid_t p = pid; p > 1; p = proc_ppid(p))
		for (size_t i = 0; i < l->n; i++)
			if (l->v[i].pid == p)
				return true;
	return false;
}

int stale_check_port(const struct config *c, const struct stale_list *l, char *err, size_t errlen)
{
	pid_t pids[16];
	int n;

	if (c->port <= 0)
		return 0;
	n = proc_port_listeners(c->port, pids, 16);
	for (int i = 0; i < n; i++) {
		char *cmd;

		/* A stale instance holding the port: with policy kill it is ended
		 * next; with fail or ignore, stale_kill says so and exits 3. */
		if (in_stale_tree(l, pids[i]))
			continue;
		cmd = proc_cmdline(pids[i]);
		snprintf(err, errlen,
			 "port %d is held by pid %d (%s), which is not a stale instance of %s: "
			 "stop it or choose another port ([app] port / --set app.port=N); nothing "
			 "was killed",
			 c->port, pids[i], cmd ? cmd : "?", c->script);
		free(cmd);
		return 3;
	}
	if (n == 0 && proc_port_listening(c->port)) {
		/* Listening, but in another network namespace's view or a
		 * process we may not inspect. */
		snprintf(err, errlen,
			 "port %d is held by a process tts-launch cannot see: "
			 "choose another port ([app] port); nothing was killed",
			 c->port);
		return 3;
	}
	return 0;
}

static int pidfd_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* Wait until the pidfd is readable (process exited) or timeout. */
static bool wait_pidfd(int pidfd, double seconds)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	double end = clock_ms() + seconds * 1000;

	for (;;) {
		double left = end - clock_ms();
		int r;

		if (left < 0)
			left = 0;
		r = poll(&p, 1, (int)left);
		if (r > 0)
			return true;
		if (r == 0)
			return false;
		if (errno != EINTR)
			return false;
	}
}

int stale_end_pidfd(int pidfd, int sig, double grace, char *how, size_t howlen)
{
	double t0 = clock_ms();

	if (pidfd_signal(pidfd, sig) < 0) {
		if (errno == ESRCH) {
			snprintf(how, howlen, "already gone");
			return 0;
		}
		snprintf(how, howlen, "failed to signal: %s", strerror(errno));
		return -1;
	}
	if (wait_pidfd(pidfd, grace)) {
		snprintf(how, howlen, "ended on SIG%s after %.1fs", sigabbrev_np(sig),
			 (clock_ms() - t0) / 1000);
		return 0;
	}
	if (pidfd_signal(pidfd, SIGKILL) < 0 && errno != ESRCH) {
		snprintf(how, howlen, "failed to SIGKILL: %s", strerror(errno));
		return -1;
	}
	if (wait_pidfd(pidfd, 5)) {
		snprintf(how, howlen, "ignored SIG%s for %.0fs, killed with SIGKILL",
			 sigabbrev_np(sig), grace);
		return 0;
	}
	snprintf(how, howlen, "still alive 5s after SIGKILL (uninterruptible sleep?)");
	return -1;
}

static void format_age(char *buf, size_t len, double s)
{
	if (s < 60)
		snprintf(buf, len, "%.0fs", s);
	else if (s < 3600)
		snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
	else
		snprintf(buf, len, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

/* Does the stale instance pid (or one of its descendants) listen on port? */
static bool holds_port(pid_t pid, int port)
{
	struct stale_proc sp = {.pid = pid};
	struct stale_list one = {.v = &sp, .n = 1};
	pid_t pids[16];
	int n = proc_port_listeners(port, pids, 16);

	for (int i = 0; i < n; i++)
		if (in_stale_tree(&one, pids[i]))
			return true;
	return false;
}

int stale_kill(const struct config *c, const struct stale_list *l, FILE *out)
{
	int rc = 0;

	for (size_t i = 0; i < l->n_foreign; i++) {
		struct passwd *pw = getpwuid(l->foreign[i].uid);

		fprintf(
		    out,
		    "tts-launch: pid %d runs like an instance (%s) but belongs to %s (uid %u), "
		    "neither root, [service] user nor the app directory's owner: not an instance, "
		    "left alone\n",
		    l->foreign[i].pid, l->foreign[i].cmdline, pw ? pw->pw_name : "?",
		    (unsigned)l->foreign[i].uid);
	}

	for (size_t i = 0; i < l->n; i++) {
		const struct stale_proc *p = &l->v[i];
		char age[32], how[160];
		char *cmd;
		int pidfd;

		format_age(age, sizeof(age), proc_age_seconds(p->start_ticks));
		if (c->stale_policy == STALE_IGNORE) {
			fprintf(out,
				"tts-launch: stale instance pid %d (up %s) left running ([stale] "
				"policy = ignore): %s\n",
				p->pid, age, p->cmdline);
			if (c->port > 0 && holds_port(p->pid, c->port)) {
				fprintf(out,
					"tts-launch: error: it holds port %d: stop it, choose "
					"another port, "
					"or set [stale] policy = kill; nothing was killed\n",
					c->port);
				rc = 3;
			}
			continue;
		}
		if (c->stale_policy == STALE_FAIL) {
			fprintf(out,
				"tts-launch: error: stale instance pid %d (up %s) is running: %s; "
				"stop it first or set [stale] policy = kill\n",
				p->pid, age, p->cmdline);
			rc = 3;
			continue;
		}
		/* Hold the process by pidfd, then re-check it is the one we
		 * matched: a reused pid has another start time. */
		pidfd = proc_pidfd(p->pid);
		if (pidfd < 0) {
			fprintf(out, "tts-launch: stale instance pid %d: already gone\n", p->pid);
			continue;
		}
		cmd = proc_cmdline(p->pid);
		if (proc_start_ticks(p->pid) != p->start_ticks || !cmd || strcmp(cmd, p->cmdline)) {
			fprintf(out,
				"tts-launch: stale instance pid %d: no longer the process matched "
				"(pid reused?); not signalled\n",
				p->pid);
			free(cmd);
			close(pidfd);
			continue;
		}
		free(cmd);
		if (stale_end_pidfd(pidfd, SIGTERM, c->stale_grace, how, sizeof(how)) < 0) {
			fprintf(out,
				"tts-launch: error: stale instance pid %d (up %s): %s: %s; "
				"end it by hand (its port and files stay busy)\n",
				p->pid, age, p->cmdline, how);
			rc = 3;
		} else {
			fprintf(out, "tts-launch: stale instance pid %d (up %s): %s: %s\n", p->pid,
				age, p->cmdline, how);
		}
		close(pidfd);
	}
	return rc;
}

void stale_list_free(struct stale_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].cmdline);
	for (size_t i = 0; i < l->n_foreign; i++)
		free(l->foreign[i].cmdline);
	free(l->v);
	free(l->foreign);
	memset(l, 0, sizeof(*l));
}

/* Count the supervisor pid among the stale instances (for
 * stale_check_port: its service's port is not a foreign holder's). */
void stale_list_add(struct stale_list *l, pid_t pid) { list_add(&l->v, &l->n, pid, 0); }
