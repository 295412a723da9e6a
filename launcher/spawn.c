#include "spawn.h"
#include "procfs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OOM()                                                                                      \
	do {                                                                                       \
		perror("tts-launch: out of memory");                                               \
		exit(1);                                                                           \
	} while (0)

static void env_put(char ***envp, size_t *n, const char *name, const char *value)
{
	size_t len = strlen(name);
	char *kv;

	if (asprintf(&kv, "%s=%s", name, value) < 0)
		OOM();
	for (size_t i = 0; i < *n; i++) {
		if (!strncmp((*envp)[i], name, len) && (*envp)[i][len] == '=') {
			free((*envp)[i]);
			(*envp)[i] = kv;
			return;
		}
	}
	*envp = realloc(*envp, (*n + 2) * sizeof(char *));
	if (!*envp)
		OOM();
	(*envp)[(*n)++] = kv;
	(*envp)[*n] = NULL;
}

char **spawn_build_env(const struct config *c, char *const *base)
{
	char **envp = calloc(1, sizeof(char *));
	size_t n = 0;
	const char *inherited = NULL;
	char *pp, *add, *tok, *save = NULL;
	size_t cap;

	if (!envp)
		OOM();
	for (size_t i = 0; base && base[i]; i++) {
		if (!strncmp(base[i], "PYTHONPATH=", 11)) {
			inherited = base[i] + 11;
			continue;
		}
		envp = realloc(envp, (n + 2) * sizeof(char *));
		if (!envp)
			OOM();
		envp[n] = strdup(base[i]);
		if (!envp[n])
			OOM();
		envp[++n] = NULL;
	}
	/* PYTHONPATH: app dir first (start_app.sh's `export PYTHONPATH=$PWD`),
	 * then the configured additions, then whatever was inherited. */
	cap = strlen(c->app_dir) + strlen(c->pythonpath) * 2 + strlen(c->app_dir) * 8 +
	      (inherited ? strlen(inherited) : 0) + 16;
	pp = malloc(cap);
	add = strdup(c->pythonpath);
	if (!pp || !add)
		OOM();
	strcpy(pp, c->app_dir);
	for (tok = strtok_r(add, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
		char *abs = config_path(c, tok);
		size_t need = strlen(pp) + strlen(abs) + 2;

		if (need > cap) {
			cap = need * 2;
			pp = realloc(pp, cap);
			if (!pp)
				OOM();
		}
		strcat(pp, ":");
		strcat(pp, abs);
		free(abs);
	}
	free(add);
	if (inherited && *inherited) {
		pp = realloc(pp, strlen(pp) + strlen(inherited) + 2);
		if (!pp)
			OOM();
		strcat(pp, ":");
		strcat(pp, inherited);
	}
	env_put(&envp, &n, "PYTHONPATH", pp);
	free(pp);
	for (size_t i = 0; i < c->n_env; i++)
		env_put(&envp, &n, c->env[i].name, c->env[i].value);
	return envp;
}

void spawn_env_free(char **envp)
{
	if (!envp)
		return;
	for (char **p = envp; *p; p++)
		free(*p);
	free(envp);
}

/* What the child tells the parent when it cannot exec. */
struct child_failure {
	int stage; /* 0 wait, 1 chdir, 2 user, 3 caps, 4 exec, 5 restrict */
	int err;
};

static void child_fail(int fd, int stage, int err)
{
	struct child_failure f = {stage, err};
	ssize_t r = write(fd, &f, sizeof(f));

	(void)r;
	_exit(err == ENOENT && stage == 4 ? 127 : 126);
}

/* The service must not regain privileges through a setuid program: empty
 * the bounding set (but for keep, -1: none), then (after setuid) every
 * capability set. */
static int drop_bounding_set(int keep)
{
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (cap != keep && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -1;
	return 0;
}

static int clear_caps(void)
{
	cap_t none = cap_init();
	int rc;

	if (!none)
		return -1;
	rc = cap_set_proc(none);
	cap_free(none);
	if (rc == 0)
		rc = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	return rc;
}

/* After setuid with PR_SET_KEEPCAPS: keep only CAP_IPC_LOCK, in permitted,
 * inheritable and effective, and raise it as the one ambient capability so
 * it survives exec of an ordinary program (capabilities(7), "Ambient
 * capability set"; the mlock shim needs it to lock beyond RLIMIT_MEMLOCK). */
static int keep_only_ipc_lock(void)
{
	cap_value_t v = CAP_IPC_LOCK;
	cap_t one = cap_init();
	int rc = -1;

	if (!one)
		return -1;
	if (cap_set_flag(one, CAP_PERMITTED, 1, &v, CAP_SET) == 0 &&
	    cap_set_flag(one, CAP_INHERITABLE, 1, &v, CAP_SET) == 0 &&
	    cap_set_flag(one, CAP_EFFECTIVE, 1, &v, CAP_SET) == 0 && cap_set_proc(one) == 0 &&
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == 0 &&
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_IPC_LOCK, 0, 0) == 0)
		rc = 0;
	cap_free(one);
	return rc;
}

/* Descriptors from `from` up: FD_CLOEXEC (cloexec) or closed. close_range(2)
 * does it in one call (Linux 5.11 for CLOSE_RANGE_CLOEXEC); before that,
 * each possible descriptor in turn. */
static void fds_from(int from, bool cloexec)
{
	long max;

	if (syscall(SYS_close_range, (unsigned)from, ~0U, cloexec ? CLOSE_RANGE_CLOEXEC : 0) == 0)
		return;
	max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > 1 << 20)
		max = 1 << 20;
	for (int fd = from; fd < max; fd++) {
		if (cloexec)
			fcntl(fd, F_SETFD, FD_CLOEXEC);
		else
			close(fd);
	}
}

/* Only 0-2 and the descriptors passed on purpose survive exec: anything
 * the caller of tts-launch left open (a file, a socket), and everything
 * tts-launch holds (BPF objects, the log, pidfile locks), stays out of the
 * service. Marked CLOEXEC rather than closed: the error pipe must work
 * until exec itself. */
static int only_kept_fds(const int *keep, int n)
{
	fds_from(3, true);
	for (int i = 0; i < n; i++)
		if (keep[i] > 2 && fcntl(keep[i], F_SETFD, 0) < 0)
			return -1;
	return 0;
}

int spawn_prepare(struct child *ch, const struct spawn_spec *s, char *err, size_t errlen)
{
	int go[2] = {-1, -1}, ep[2] = {-1, -1};
	uid_t uid = 0;
	gid_t gid = 0;
	bool switch_user = s->user && *s->user;
	const char *uname = NULL;
	pid_t pid, parent = getpid();

	memset(ch, 0, sizeof(*ch));
	ch->pidfd = ch->go_fd = ch->err_fd = -1;
	if (switch_user) {
		struct passwd *pw = getpwnam(s->user);

		if (!pw) {
			snprintf(err, errlen,
				 "[service] user '%s' does not exist: create it or fix the name",
				 s->user);
			return -1;
		}
		uid = pw->pw_uid;
		gid = pw->pw_gid;
		uname = s->user;
		if (s->group && *s->group) {
			struct group *gr = getgrnam(s->group);

			if (!gr) {
				snprintf(err, errlen,
					 "[service] group '%s' does not exist: create it or fix "
					 "the name",
					 s->group);
				return -1;
			}
			gid = gr->gr_gid;
		}
	}
	/* The supervisor adopts what the service's processes leave behind when
	 * they exit (a worker that left the group with setsid included), so
	 * it can end them with the rest (prctl(2) PR_SET_CHILD_SUBREAPER); it
	 * reaps them (spawn_reap_orphans). */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "failed to create pipe: %s", strerror(errno));
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "failed to fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		char b;

		/* Child: own process group, so signals reach the whole tree. */
		setpgid(0, 0);
		close(go[1]);
		close(ep[0]);
		if (read(go[0], &b, 1) != 1)
			_exit(1); /* the launcher gave up before release */
		close(go[0]);
		if (s->stdin_fd >= 0)
			dup2(s->stdin_fd, 0);
		if (s->out_fd >= 0) {
			dup2(s->out_fd, 1);
			dup2(s->out_fd, 2);
		}
		if (s->cwd && chdir(s->cwd) < 0)
			child_fail(ep[1], 1, errno);
		if (switch_user) {
			/* The bounding set can only be dropped while we still
			 * hold CAP_SETPCAP, i.e. before setuid. */
			if (drop_bounding_set(s->keep_ipc_lock ? CAP_IPC_LOCK : -1) < 0)
				child_fail(ep[1], 3, errno);
			/* mlock on: keep the permitted set across setuid so
			 * that CAP_IPC_LOCK can be kept (and nothing else). */
			if (s->keep_ipc_lock && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
				child_fail(ep[1], 3, errno);
			if (initgroups(uname, gid) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
				child_fail(ep[1], 2, errno);
			if ((s->keep_ipc_lock ? keep_only_ipc_lock() : clear_caps()) < 0)
				child_fail(ep[1], 3, errno);
			/* No setuid or file-capability program gives the
			 * service back what it just dropped (an empty bounding
			 * set alone still lets a setuid-root binary run with
			 * euid 0): prctl(2) PR_SET_NO_NEW_PRIVS, kept across
			 * exec and fork. Ambient CAP_IPC_LOCK still passes. */
			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
				child_fail(ep[1], 5, errno);
		}
		/* If the supervisor dies, the service hears of it: SIGTERM, as
		 * a stop sends (the guard, spawn_guard_start, covers the rest
		 * of the group and the SIGKILL). Set after the user switch,
		 * which clears it (prctl(2): a change of credentials resets
		 * the parent-death signal), then the classic race: had the
		 * supervisor died before this call, no signal would ever come. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0)
			child_fail(ep[1], 5, errno);
		if (getppid() != parent)
			_exit(1);
		if (only_kept_fds(s->keep_fds, s->n_keep_fds) < 0)
			child_fail(ep[1], 5, errno);
		for (int sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		if (s->mask)
			sigprocmask(SIG_SETMASK, s->mask, NULL);
		execvpe(s->argv[0], s->argv, s->envp);
		child_fail(ep[1], 4, errno);
	}
	/* The group exists when fork returns, whichever of us runs first (the
	 * child waits before exec, so this cannot fail with EACCES). */
	setpgid(pid, pid);
	close(go[0]);
	close(ep[1]);
	ch->pid = pid;
	ch->go_fd = go[1];
	ch->err_fd = ep[0];
	ch->pidfd = proc_pidfd(pid);
	if (ch->pidfd < 0) {
		snprintf(err, errlen, "failed to open pidfd for pid %d: %s (needs Linux 5.3)", pid,
			 strerror(errno));
		spawn_abort(ch);
		return -1;
	}
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (ep[i] >= 0)
			close(ep[i]);
	}
	return -1;
}

int spawn_release(struct child *ch, char *err, size_t errlen)
{
	static const char *const stages[] = {
	    "wait",
	    "change to the app directory",
	    "switch to the service user",
	    "drop capabilities",
	    "execute",
	    "restrict the service (no_new_privs, parent-death signal, descriptors)"};
	struct child_failure f;
	ssize_t n;

	if (write(ch->go_fd, "g", 1) != 1) {
		snprintf(err, errlen, "failed to release the service: %s", strerror(errno));
		return 126;
	}
	close(ch->go_fd);
	ch->go_fd = -1;
	do
		n = read(ch->err_fd, &f, sizeof(f));
	while (n < 0 && errno == EINTR);
	close(ch->err_fd);
	ch->err_fd = -1;
	if (n != (ssize_t)sizeof(f))
		return 0; /* EOF: exec closed the CLOEXEC pipe */
	snprintf(err, errlen, "cannot %s: %s", stages[f.stage >= 0 && f.stage < 6 ? f.stage : 4],
		 strerror(f.err));
	return f.stage == 4 && f.err == ENOENT ? 127 : 126;
}

void spawn_abort(struct child *ch)
{
	if (ch->go_fd >= 0)
		close(ch->go_fd); /* the child reads EOF and exits */
	if (ch->err_fd >= 0)
		close(ch->err_fd);
	if (ch->pid > 0)
		waitpid(ch->pid, NULL, 0);
	if (ch->pidfd >= 0)
		close(ch->pidfd);
	ch->go_fd = ch->err_fd = ch->pidfd = -1;
	ch->pid = 0;
}

enum scan_what {
	SCAN_GROUP,   /* live members of the process group */
	SCAN_ORPHANS, /* our live children outside it: the tree's orphans */
	SCAN_ZOMBIES, /* our children that exited, to reap */
};

struct scan {
	enum scan_what what;
	pid_t pgid, ex1, ex2, self;
	pid_t *pids;
	int max, n;
};

/* pid into sc's count (and list) when it is what sc looks for */
static void scan_one(struct scan *sc, pid_t pid)
{
	char path[64], buf[512], *rp, state;
	long ppid, grp;
	bool dead, want;
	ssize_t len;
	int fd;

	if (pid <= 0 || pid == sc->ex1 || pid == sc->ex2)
		return;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* gone */
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return;
	buf[len] = '\0';
	/* pid (comm) state ppid pgrp ...: comm may hold anything, so from
	 * the last ')' (proc_pid_stat(5)) */
	rp = strrchr(buf, ')');
	if (!rp || sscanf(rp + 1, " %c %ld %ld", &state, &ppid, &grp) != 3)
		return;
	dead = state == 'Z' || state == 'X';
	if (sc->what == SCAN_GROUP)
		want = grp == sc->pgid && !dead;
	else if (sc->what == SCAN_ORPHANS)
		want = ppid == sc->self && grp != sc->pgid && !dead;
	else
		want = ppid == sc->self && dead;
	if (!want)
		return;
	if (sc->pids && sc->n < sc->max)
		sc->pids[sc->n] = pid;
	sc->n++;
}

/* Our children (orphans and zombies are only ever ours), from the
 * children files of our threads (CONFIG_PROC_CHILDREN; an orphan is
 * re-parented to any thread of the subreaper): a read per thread and a
 * stat per child, where a walk of /proc reads every process's stat (0.6 ms
 * for 76 processes here, three walks at the service's exit). false when
 * this kernel has no such file, or one could not be read. A thread that
 * exits during the scan hands its children to another thread, whose file
 * may have been read already: they are missed until the next scan (the
 * supervisor's threads, the load's, are all joined before the service
 * runs). */
static bool scan_children(struct scan *sc)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	bool ok = d != NULL;

	while (ok && (de = readdir(d))) {
		char path[300], buf[4096];
		long pid = 0;
		bool in = false;
		ssize_t len;
		int fd;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			int e = errno;

			snprintf(path, sizeof(path), "/proc/self/task/%s", de->d_name);
			if (e != ENOENT || access(path, F_OK) == 0)
				ok = false; /* no children file here: walk /proc */
			continue;	    /* else a thread that ended meanwhile */
		}
		/* "pid pid ... ": a number may span two reads */
		while (ok && (len = read(fd, buf, sizeof(buf))) != 0) {
			if (len < 0) {
				ok = false; /* the rest unread: walk /proc */
				break;
			}
			for (ssize_t i = 0; i < len; i++) {
				if (isdigit((unsigned char)buf[i])) {
					pid = pid * 10 + (buf[i] - '0');
					in = true;
				} else if (in) {
					scan_one(sc, (pid_t)pid);
					pid = 0;
					in = false;
				}
			}
		}
		if (ok && in)
			scan_one(sc, (pid_t)pid);
		close(fd);
	}
	if (d)
		closedir(d);
	return ok;
}

bool spawn_scan_walk_proc;
unsigned long spawn_scan_walks;

static int scan_proc(enum scan_what what, pid_t pgid, pid_t ex1, pid_t ex2, pid_t *pids, int max)
{
	struct scan sc = {what, pgid, ex1, ex2, getpid(), pids, max, 0};
	struct dirent *de;
	DIR *d;

	if (what != SCAN_GROUP && !spawn_scan_walk_proc && scan_children(&sc))
		return sc.n;
	sc.n = 0;
	spawn_scan_walks++;
	if (!(d = opendir("/proc")))
		return -1;
	while ((de = readdir(d)))
		if (isdigit((unsigned char)de->d_name[0]))
			scan_one(&sc, (pid_t)atoi(de->d_name));
	closedir(d);
	return sc.n;
}

int spawn_group_members(pid_t pgid, pid_t exclude, pid_t *pids, int max)
{
	return scan_proc(SCAN_GROUP, pgid, exclude, exclude, pids, max);
}

int spawn_orphans(pid_t pgid, pid_t exclude, pid_t *pids, int max)
{
	return scan_proc(SCAN_ORPHANS, pgid, exclude, exclude, pids, max);
}

void spawn_reap_orphans(pid_t keep1, pid_t keep2)
{
	pid_t z[64];
	int n = scan_proc(SCAN_ZOMBIES, 0, keep1, keep2, z, 64);

	for (int i = 0; i < n && i < 64; i++)
		waitpid(z[i], NULL, WNOHANG);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The guard's life: wait for the supervisor's word or its death. */
static void guard_main(int rd, pid_t pgid, double grace, bool tell) __attribute__((noreturn));
static void guard_main(int rd, pid_t pgid, double grace, bool tell)
{
	static const int ignored[] = {SIGINT,  SIGTERM, SIGHUP,	 SIGQUIT, SIGPIPE,
				      SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU};
	struct timespec tick = {0, 50 * 1000 * 1000};
	double end;
	ssize_t n;
	char b;
	int null;

	/* A stop signals the whole group, the guard included: only SIGKILL
	 * ends it early, and that only once the group is being killed. */
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		signal(ignored[i], SIG_IGN);
	prctl(PR_SET_NAME, "tts-launch-grd", 0, 0, 0);
	if (setpgid(0, pgid) < 0)
		_exit(0); /* the group is gone already */
	/* Nothing of the supervisor's: not the BPF links (their last close
	 * detaches the probes), not the child's release pipe (its EOF is how
	 * an aborted start ends the child), not the log. stderr stays when
	 * told to (tell), for the one line said if the supervisor dies. */
	if (rd != 3) {
		if (dup2(rd, 3) < 0)
			_exit(1);
		rd = 3;
	}
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		if (!tell)
			dup2(null, 2);
	}
	fds_from(4, false);
	do
		n = read(rd, &b, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1)
		_exit(0); /* the supervisor is done with the group */
	/* EOF: the supervisor died without a word (SIGKILL, a crash). */
	if (spawn_group_members(pgid, getpid(), NULL, 0) <= 0)
		_exit(0);
	dprintf(2,
		"tts-launch: the supervisor died: SIGTERM to the service's process group %d, "
		"SIGKILL after %gs\n",
		(int)pgid, grace);
	kill(-pgid, SIGTERM);
	end = mono_s() + grace;
	while (mono_s() < end) {
		if (spawn_group_members(pgid, getpid(), NULL, 0) == 0)
			_exit(0);
		nanosleep(&tick, NULL);
	}
	dprintf(2, "tts-launch: the service's process group %d outlived its %gs grace: SIGKILL\n",
		(int)pgid, grace);
	kill(-pgid, SIGKILL); /* the guard with it */
	_exit(0);
}

int spawn_guard_start(struct guard *g, pid_t pgid, double grace, bool tell, char *err,
		      size_t errlen)
{
	int p[2];
	pid_t pid;

	g->pid = 0;
	g->fd = -1;
	/* A socket pair rather than a pipe: the supervisor's word can be sent
	 * with MSG_NOSIGNAL, no SIGPIPE when the guard is gone already (the
	 * group's SIGKILL ends it too). */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0) {
		snprintf(err, errlen, "failed to create the guard's socket: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "failed to fork the guard: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[1]);
		guard_main(p[0], pgid, grace, tell);
	}
	close(p[0]);
	/* In the group before the service can run (the guard does the same:
	 * whichever comes first). */
	if (setpgid(pid, pgid) < 0 && errno != EACCES) {
		snprintf(err, errlen, "failed to put the guard in the service's process group: %s",
			 strerror(errno));
		close(p[1]); /* EOF: the guard finds an empty group, or goes */
		waitpid(pid, NULL, 0);
		return -1;
	}
	g->pid = pid;
	g->fd = p[1];
	return 0;
}

void spawn_guard_release(struct guard *g)
{
	if (g->fd >= 0) {
		ssize_t r = send(g->fd, "x", 1, MSG_NOSIGNAL);

		(void)r; /* EPIPE: the guard is gone already */
		close(g->fd);
	}
	if (g->pid > 0)
		while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
			;
	g->fd = -1;
	g->pid = 0;
}
