#include "instance.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pidfile.h"
#include "procfs.h"
#include "safefile.h"
#include "stale.h"
#include "util.h"

/* config.c's default: as root, only an explicitly chosen pidfile is kept
 * where the config says; the default one moves to RUN_DIR. */
#define DEFAULT_PIDFILE "tts-launch.pid"

static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0) {
		perror("tts-launch: out of memory");
		exit(1);
	}
	return s;
}

char *instance_key(const char *app_dir, const char *pidfile)
{
	char name[49], canon[PATH_MAX * 2], dir[PATH_MAX];
	const char *slash = strrchr(pidfile, '/');
	const char *b;
	char *real = NULL, *rdir;
	size_t i;

	/* The pidfile's path with its directory resolved (the same app seen
	 * through a link, or as "x/../app", is one app). */
	if (slash) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - pidfile), pidfile);
		real = realpath(dir[0] ? dir : "/", NULL);
	}
	if (real)
		snprintf(canon, sizeof(canon), "%s/%s", real, slash + 1);
	else
		snprintf(canon, sizeof(canon), "%s", pidfile);
	free(real);
	/* A readable part: the app directory's last component. */
	rdir = realpath(app_dir, NULL);
	b = base_name(rdir ? rdir : app_dir);
	for (i = 0; b[i] && i < sizeof(name) - 1; i++)
		name[i] = isalnum((unsigned char)b[i]) || b[i] == '-' || b[i] == '_' ? b[i] : '_';
	name[i] = 0;
	free(rdir);
	return dup_printf("%s-%016llx", i && strcmp(name, "_") ? name : "root",
			  (unsigned long long)fnv1a(FNV1A_START, canon, strlen(canon)));
}

void instance_locate(const struct config *c, struct instance *in)
{
	instance_locate_as(c, in, geteuid() == 0);
}

void instance_locate_as(const struct config *c, struct instance *in, bool system)
{
	char *p = config_path(c, c->pidfile);

	in->fd = -1;
	in->dirfd = -1;
	in->locked = false;
	in->system = false;
	if (!*p) {
		in->pidfile = p;
		in->lock = dup_printf("%s", "");
		return;
	}
	if (system) {
		char *key = instance_key(c->app_dir, p);

		in->system = true;
		in->lock = dup_printf(INSTANCE_RUN_DIR "/%s.lock", key);
		if (!strcmp(c->pidfile, DEFAULT_PIDFILE)) {
			free(p);
			p = dup_printf(INSTANCE_RUN_DIR "/%s.pid", key);
		}
		free(key);
		in->pidfile = p;
		return;
	}
	in->pidfile = p;
	in->lock = dup_printf("%s.lock", p);
}

int instance_dir_open(const char *dir, uid_t uid, char *err, size_t errlen)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	bool created = false;
	struct stat st;
	int fd;

	fd = open(dir, flags);
	if (fd < 0 && errno == ENOENT) {
		if (mkdir(dir, 0755) == 0)
			created = true;
		else if (errno != EEXIST) {
			snprintf(err, errlen, "failed to create %s: %s", dir, strerror(errno));
			return -1;
		}
		fd = open(dir, flags);
	}
	if (fd < 0) {
		int e = errno;

		snprintf(err, errlen, "failed to open %s: %s", dir,
			 e == ELOOP || e == ENOTDIR
			     ? "it is a symbolic link or not a directory (remove it)"
			     : strerror(e));
		errno = e;
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "failed to stat %s: %s", dir, strerror(errno));
		close(fd);
		return -1;
	}
	if (st.st_uid != uid) {
		snprintf(err, errlen,
			 "%s is owned by uid %u, not uid %u: refusing to keep the pidfile and lock "
			 "there (remove it; tts-launch creates it)",
			 dir, (unsigned)st.st_uid, (unsigned)uid);
		close(fd);
		errno = EPERM;
		return -1;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(
		    err, errlen,
		    "%s is writable by others (mode %04o): refusing to keep the pidfile and lock "
		    "there (chmod 0755 it, or remove it)",
		    dir, (unsigned)(st.st_mode & 07777));
		close(fd);
		errno = EPERM;
		return -1;
	}
	/* mkdir's mode went through the umask: make it what stop/status of
	 * other users expect to read (the lock itself stays 0600). */
	if (created && (st.st_mode & 07777) != 0755)
		(void)fchmod(fd, 0755);
	return fd;
}

/* Open the lock file in the open directory: O_NOFOLLOW, then a regular
 * file of ours with one link, else refused. */
static int open_lock(struct instance *in, bool create, char *err, size_t errlen)
{
	const char *base = base_name(in->lock);
	struct stat st;
	uid_t me = in->system ? 0 : geteuid();
	int fd, e;

	fd = openat(in->dirfd, base,
		    O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (create ? O_CREAT : 0),
		    in->system ? 0600 : 0644);
	if (fd < 0 && !create && errno == EACCES)
		fd = openat(in->dirfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		if (e == ENOENT)
			snprintf(err, errlen, "no lock file %s", in->lock);
		else if (e == EACCES && in->system)
			snprintf(err, errlen,
				 "cannot open the lock %s: %s (the instance is root's: run this as "
				 "root)",
				 in->lock, strerror(e));
		else
			snprintf(err, errlen, "cannot open the lock %s: %s", in->lock,
				 e == ELOOP ? "it is a symbolic link (remove it)" : strerror(e));
		errno = e;
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != me) {
		snprintf(err, errlen,
			 "the lock %s is not a regular file of uid %u with one link: not trusted "
			 "(remove it)",
			 in->lock, (unsigned)me);
		close(fd);
		errno = EPERM;
		return -1;
	}
	in->fd = fd;
	return 0;
}

int instance_open(struct instance *in, bool create, char *err, size_t errlen)
{
	const char *base;

	if (!*in->lock) {
		snprintf(err, errlen, "no pidfile is configured ([service] pidfile is empty)");
		errno = ENOENT;
		return -1;
	}
	if (in->system) {
		if (!create && access(INSTANCE_RUN_DIR, F_OK) < 0 && errno == ENOENT) {
			snprintf(err, errlen, "%s does not exist", INSTANCE_RUN_DIR);
			return -1;
		}
		in->dirfd = instance_dir_open(INSTANCE_RUN_DIR, 0, err, errlen);
	} else {
		in->dirfd = safe_dir_open(in->lock, &base, err, errlen);
	}
	if (in->dirfd < 0)
		return -1;
	if (open_lock(in, create, err, errlen) < 0) {
		int e = errno;

		close(in->dirfd);
		in->dirfd = -1;
		errno = e;
		return -1;
	}
	return 0;
}

static int query(int fd, pid_t *pid)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};

	if (fcntl(fd, F_GETLK, &fl) < 0)
		return -1;
	/* An OFD lock (F_OFD_SETLK) reports l_pid -1: not a supervisor's. */
	*pid = fl.l_type == F_UNLCK ? 0 : fl.l_pid > 0 ? fl.l_pid : -1;
	return 0;
}

/* Is the locked file still the one at the lock's name? Its holder
 * removes it before letting go, so a waiter may lock a removed file. */
static bool still_named(const struct instance *in)
{
	struct stat a, b;

	return fstat(in->fd, &a) == 0 &&
	       fstatat(in->dirfd, base_name(in->lock), &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int instance_try_lock(struct instance *in, pid_t *holder)
{
	/* The holder may let go between a failed F_SETLK and F_GETLK, or
	 * remove the file we waited on. */
	for (int i = 0; i < 100; i++) {
		struct flock fl = {
		    .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
		char err[512];

		if (fcntl(in->fd, F_SETLK, &fl) == 0) {
			if (still_named(in)) {
				in->locked = true;
				return 0;
			}
			close(in->fd);
			in->fd = -1;
			if (open_lock(in, true, err, sizeof(err)) < 0)
				return -1;
			continue;
		}
		if (errno != EAGAIN && errno != EACCES)
			return -1;
		if (query(in->fd, holder) < 0)
			return -1;
		if (*holder)
			return 1;
	}
	errno = EAGAIN;
	return -1;
}

pid_t instance_holder(const struct instance *in)
{
	pid_t pid;

	if (in->fd < 0 || query(in->fd, &pid) < 0)
		return -1;
	return pid;
}

int instance_hold(const struct instance *in, pid_t holder)
{
	int fd = proc_pidfd(holder);

	if (fd >= 0 && instance_holder(in) != holder) {
		close(fd);
		errno = ESRCH;
		return -1;
	}
	return fd;
}

pid_t instance_service(const struct instance *in, pid_t holder, bool *pidfile_ok)
{
	struct pidfile_info pi;
	uint64_t best_start = 0;
	pid_t best = 0;
	struct dirent *de;
	DIR *d;

	*pidfile_ok = false;
	if (pidfile_read(in->pidfile, &pi) == 0 && pi.supervisor_pid == holder &&
	    proc_start_ticks(holder) == pi.supervisor_start &&
	    proc_ppid(pi.service_pid) == holder &&
	    proc_start_ticks(pi.service_pid) == pi.service_start) {
		*pidfile_ok = true;
		return pi.service_pid;
	}
	/* Not what the pidfile says: the holder's oldest child is its service
	 * (workers it reaps as a subreaper came later). */
	d = opendir("/proc");
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		pid_t pid;
		uint64_t start;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (proc_ppid(pid) != holder)
			continue;
		start = proc_start_ticks(pid);
		if (start && (!best || start < best_start)) {
			best = pid;
			best_start = start;
		}
	}
	closedir(d);
	return best;
}

bool instance_dead(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X' || p[2] == 'x';
}

static bool pidfd_alive(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 0;
}

int instance_end(int holder_fd, pid_t holder, pid_t service, double stop_grace, const char *prefix,
		 FILE *out)
{
	char how[160];
	int svc = -1, rc = 0;

	/* Hold the service before its supervisor goes: once reparented it
	 * is no longer recognisable as the holder's child. */
	if (service > 0) {
		svc = proc_pidfd(service);
		if (svc >= 0 && proc_ppid(service) != holder) {
			close(svc);
			svc = -1;
		}
	}
	if (stale_end_pidfd(holder_fd, SIGTERM, stop_grace + 10, how, sizeof(how)) < 0)
		rc = -1;
	fprintf(out, "%ssupervisor pid %d: %s\n", prefix, (int)holder, how);
	if (svc >= 0) {
		if (pidfd_alive(svc)) {
			/* Still alive without its supervisor: end it directly. */
			if (stale_end_pidfd(svc, SIGTERM, stop_grace, how, sizeof(how)) < 0)
				rc = -1;
			fprintf(out, "%sservice pid %d: %s\n", prefix, (int)service, how);
		}
		close(svc);
	}
	fflush(out);
	return rc;
}

void instance_close(struct instance *in)
{
	/* Removed while still held (see still_named): a stale lock file
	 * never outlives a run that ended normally. */
	if (in->locked && in->dirfd >= 0)
		unlinkat(in->dirfd, base_name(in->lock), 0);
	in->locked = false;
	if (in->fd >= 0)
		close(in->fd);
	in->fd = -1;
	if (in->dirfd >= 0)
		close(in->dirfd);
	in->dirfd = -1;
	free(in->pidfile);
	free(in->lock);
	in->pidfile = NULL;
	in->lock = NULL;
}

/* Take the app's lock. Returns 0: taken (or no pidfile, so no lock), or
 * another supervisor holds it (*holder > 0); else the exit code. */
int instance_lock_start(struct instance *inst, pid_t *holder)
{
	char err[1024];
	int r;

	*holder = 0;
	if (!*inst->lock)
		return 0;
	if (instance_open(inst, true, err, sizeof(err)) < 0) {
		if (inst->system) {
			fprintf(stderr, "tts-launch: error: %s; nothing was killed or started\n",
				err);
			return 2;
		}
		/* Not root: nothing to protect but this user's own run. */
		fprintf(stderr,
			"tts-launch: warning: %s: `tts-launch stop` and `status` will not find "
			"this run, and a second start is not kept out\n",
			err);
		return 0;
	}
	r = instance_try_lock(inst, holder);
	if (r < 0) {
		fprintf(stderr, "tts-launch: error: failed to lock %s: %s\n", inst->lock,
			strerror(errno));
		*holder = 0;
		return 1;
	}
	if (r == 1 && *holder < 0) {
		fprintf(stderr,
			"tts-launch: error: the lock %s is held by a process that is not a "
			"tts-launch supervisor: nothing was killed or started\n",
			inst->lock);
		return 3;
	}
	if (r == 0)
		*holder = 0;
	return 0;
}

/* Another supervisor (holder) runs this app. [stale] policy = kill: end
 * it, then start (as start_app.sh did); else refuse with exit 3. 0 when
 * the lock is ours. */
int instance_replace(struct instance *inst, const struct config *c, pid_t holder)
{
	/* a third start may take the lock between the end and our retry */
	for (int round = 0; round < 5; round++) {
		bool ok;
		pid_t svc = instance_service(inst, holder, &ok);
		char *cmd = proc_cmdline(svc > 0 ? svc : holder);
		char what[64] = "no service yet";
		int hfd, r;

		if (svc > 0)
			snprintf(what, sizeof(what), "service pid %d", (int)svc);

		/* Ending an ancestor would end ourselves (a service that runs
		 * tts-launch for its own app). */
		for (pid_t p = getppid(); p > 1; p = proc_ppid(p))
			if (p == holder) {
				fprintf(stderr,
					"tts-launch: error: this runs inside the instance of %s it "
					"would "
					"replace (supervisor pid %d): use another [service] "
					"pidfile, or "
					"an empty one; nothing was killed\n",
					c->app_dir, (int)holder);
				free(cmd);
				return 3;
			}
		if (c->stale_policy != STALE_KILL) {
			fprintf(
			    stderr,
			    "tts-launch: error: %s already runs under tts-launch: supervisor pid "
			    "%d, %s (%s); stop it first (tts-launch stop) or set [stale] policy "
			    "= kill; nothing was killed\n",
			    c->app_dir, (int)holder, what, cmd ? cmd : "?");
			free(cmd);
			return 3;
		}
		fprintf(stderr,
			"tts-launch: ending the running instance: supervisor pid %d, %s (%s)\n",
			(int)holder, what, cmd ? cmd : "?");
		free(cmd);
		hfd = instance_hold(inst, holder);
		if (hfd >= 0) {
			r = instance_end(hfd, holder, svc, c->stop_grace,
					 "tts-launch: running instance: ", stderr);
			close(hfd);
			if (r < 0) {
				fprintf(stderr,
					"tts-launch: error: the running instance did not end: "
					"end it by hand; nothing was started\n");
				return 3;
			}
		}
		r = instance_try_lock(inst, &holder);
		if (r == 0)
			return 0;
		if (r < 0 || holder < 0) {
			fprintf(stderr, "tts-launch: error: failed to lock %s: %s\n", inst->lock,
				r < 0 ? strerror(errno)
				      : "held by a process that is not a supervisor");
			return r < 0 ? 1 : 3;
		}
	}
	fprintf(stderr,
		"tts-launch: error: other starts of %s keep taking its lock %s: nothing "
		"was started\n",
		c->app_dir, inst->lock);
	return 3;
}
