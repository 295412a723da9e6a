/* mlock_shim: the LD_PRELOAD library tts-launch injects into the service
 * when [mlock] mode is not off (docs/mlock.md).
 *
 * At load (a constructor, before the program's main) it reads its settings
 * from TTS_LAUNCH_MLOCK_* and removes them, and itself from LD_PRELOAD, from
 * the environment, so the service's own children never inherit it. Then it
 * waits for its trigger:
 *   listen  the first successful listen() on a TCP socket (on
 *           TTS_LAUNCH_MLOCK_PORT when given): IndexTTS2 binds its port only
 *           once every model is loaded;
 *   signal  each TTS_LAUNCH_MLOCK_SIGNAL (SIGUSR2 by default);
 *   delay   TTS_LAUNCH_MLOCK_DELAY seconds after exec;
 *   callable when the Python callable TTS_LAUNCH_MLOCK_CALLABLE
 *           ("module:qualname", e.g. indextts.infer_v2:IndexTTS2.__init__)
 *           returns: built with Python's headers (HAVE_PYTHON), the shim
 *           installs a profile function in the interpreter's main thread
 *           once it is initialised (Py_AddPendingCall) and removes it at
 *           that return. The C API is looked up with dlsym in the running
 *           interpreter, so the shim has no link dependency on libpython.
 * It arms only in the program TTS_LAUNCH_MLOCK_EXE names (python*: a runner
 * such as `uv run` passes it on untouched).
 * and locks: all = mlockall(MCL_CURRENT), onfault = mlockall(MCL_CURRENT |
 * MCL_ONFAULT), models = mlock() of the file mappings whose path matches
 * TTS_LAUNCH_MLOCK_PATTERNS (a hub cache blob: by its snapshot names).
 * Before locking, it sums from /proc/self/smaps what would be locked and
 * refuses above the limit. The lock runs in a thread of its own (off the
 * request path) unless TTS_LAUNCH_MLOCK_BLOCKING=1 (listen trigger only:
 * listen() returns once locked).
 *
 * Each event is one JSON line sent over the inherited datagram socket
 * TTS_LAUNCH_MLOCK_FD (MSG_DONTWAIT | MSG_NOSIGNAL: the service never blocks
 * on tts-launch and never gets SIGPIPE when it is gone). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hub_blobs.h"
#include "mlock_proto.h"

#ifdef HAVE_PYTHON
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#endif

#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4 /* Linux 4.4 */
#endif

static const char *const mode_names[] = MLOCK_MODE_NAMES;
static const char *const trigger_names[] = MLOCK_TRIGGER_NAMES;

/* each "key": and its head: event, pid, then "trigger": */
#define K(f)	     MLOCK_KEY(MLOCK_F_##f)
#define HEAD(ev)     "{" K(EVENT) "\"" ev "\"," K(PID) "%d," K(TRIGGER)
#define LOCKER_STACK (256 * 1024) /* mlockall would pin a default 8 MiB stack */

static struct {
	bool active;
	pid_t pid; /* the exec'd service; a forked child never locks */
	int fd;	   /* report socket, -1: none */
	int mode;
	int trigger;
	double delay;
	int sig;
	char patterns[1024];
	unsigned long long limit; /* bytes */
	int max_percent;
	bool blocking;
	int port;			 /* 0: any TCP listen */
	int wake[2];			 /* signal handler or profile function -> locker thread */
	char module[256], qualname[256]; /* the callable trigger's target */
	uint64_t t_load;		 /* monotonic ns at load */
	atomic_int fired;
	pthread_mutex_t lock; /* one lock pass at a time */
} S = {.fd = -1, .wake = {-1, -1}, .lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One report line; dropped silently when tts-launch is gone or not reading. */
static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	int n;

	if (S.fd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (send(S.fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
		S.fd = -1; /* tts-launch is gone: stop trying */
}

/* The locker thread reads /proc without malloc: its first malloc would give
 * it a malloc arena, whose 64 MiB PROT_NONE reservation mlockall counts in
 * VmLck. A line reader over read(2) into a static buffer (S.lock held, or
 * the single-threaded constructor). */
struct lines {
	int fd;
	size_t len, off;
	char buf[64 * 1024];
};

static struct lines L;

static int lines_open(struct lines *l, const char *path)
{
	l->len = l->off = 0;
	l->fd = open(path, O_RDONLY | O_CLOEXEC);
	return l->fd;
}

/* The next line, NUL-terminated without its '\n'; NULL at the end. */
static char *lines_next(struct lines *l)
{
	for (;;) {
		char *start = l->buf + l->off, *nl = memchr(start, '\n', l->len - l->off);
		ssize_t n;

		if (nl) {
			*nl = '\0';
			l->off = (size_t)(nl - l->buf) + 1;
			return start;
		}
		memmove(l->buf, start, l->len - l->off);
		l->len -= l->off;
		l->off = 0;
		if (l->len >= sizeof(l->buf) - 1)
			l->len = 0; /* an absurdly long line: drop it */
		do
			n = read(l->fd, l->buf + l->len, sizeof(l->buf) - 1 - l->len);
		while (n < 0 && errno == EINTR);
		if (n <= 0) {
			if (l->len) { /* a last line without '\n' */
				l->buf[l->len] = '\0';
				l->len = 0;
				return l->buf;
			}
			return NULL;
		}
		l->len += (size_t)n;
	}
}

static void lines_close(struct lines *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

/* The number after "Name:" in a /proc file; base 10 or 16. -1 if absent. */
static long long proc_field(const char *path, const char *name, int base)
{
	size_t len = strlen(name);
	long long v = -1;
	char *line;

	if (lines_open(&L, path) < 0)
		return -1;
	while ((line = lines_next(&L)))
		if (!strncmp(line, name, len) && line[len] == ':') {
			v = (long long)strtoull(line + len + 1, NULL, base);
			break;
		}
	lines_close(&L);
	return v;
}

/* VmLck (kB in /proc/self/status) in bytes. */
static long long vmlck(void)
{
	long long kb = proc_field("/proc/self/status", "VmLck", 10);

	return kb < 0 ? -1 : kb * 1024;
}

static bool has_cap_ipc_lock(void)
{
	long long eff = proc_field("/proc/self/status", "CapEff", 16);

	return eff > 0 && ((eff >> 14) & 1); /* CAP_IPC_LOCK = 14 */
}

/* RLIMIT_MEMLOCK's soft limit in bytes; -1: unlimited. */
static long long memlock_rlimit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return -1;
	return (long long)rl.rlim_cur;
}

/* ---- what would be locked: /proc/self/smaps ---- */

struct range {
	unsigned long start, end;
};

struct plan {
	unsigned long long size;    /* bytes of the mappings concerned */
	unsigned long long rss;	    /* of which resident now */
	unsigned long long to_lock; /* what the lock will pin: size, or rss for onfault */
	size_t n;		    /* mappings concerned */
	size_t nr;		    /* models: ranges[] used */
};

/* models: what to mlock(), grown as needed (S.lock held). Anonymous
 * pages, not malloc: the locker thread must not get a malloc arena (above). */
static struct range *ranges;
static size_t cap_ranges;

static int add_range(struct plan *p, unsigned long a, unsigned long b)
{
	if (p->nr == cap_ranges) {
		size_t cap = cap_ranges ? cap_ranges * 2 : 4096 / sizeof(*ranges);
		void *n = ranges ? mremap(ranges, cap_ranges * sizeof(*ranges),
					  cap * sizeof(*ranges), MREMAP_MAYMOVE)
				 : mmap(NULL, cap * sizeof(*ranges), PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (n == MAP_FAILED)
			return -1;
		ranges = n;
		cap_ranges = cap;
	}
	ranges[p->nr++] = (struct range){a, b};
	return 0;
}

static bool matches(const char *path)
{
	char pats[sizeof(S.patterns)], *tok, *save = NULL;
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	snprintf(pats, sizeof(pats), "%s", S.patterns);
	for (tok = strtok_r(pats, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save))
		/* a pattern with a '/' matches the whole path, else the file name */
		if (!fnmatch(tok, strchr(tok, '/') ? path : base, 0))
			return true;
	return false;
}

/* Is this mapping concerned by the mode? perms "rwxp"; path may be "";
 * maj:min and ino: the mapped file's device and inode. */
static bool concerned(const char *perms, const char *path, unsigned maj, unsigned min,
		      unsigned long ino)
{
	if (!strncmp(perms, "---", 3))
		return false; /* guard pages and reservations: never populated */
	if (!strcmp(path, "[vsyscall]") || !strncmp(path, "[vvar", 5))
		return false; /* special mappings mlock skips */
	if (S.mode != MLOCK_MODE_MODELS)
		return true;
	return path[0] == '/' && perms[0] == 'r' &&
	       (matches(path) || blob_matches(path, maj, min, ino, matches));
}

static int plan_scan(struct plan *p)
{
	bool cur = false;
	char *line;

	memset(p, 0, sizeof(*p));
	blobs_forget();
	if (lines_open(&L, "/proc/self/smaps") < 0)
		return -1;
	while ((line = lines_next(&L))) {
		char perms[8] = "";
		unsigned long a, b, ino = 0;
		unsigned long long kb;
		unsigned maj = 0, min = 0;
		int off = 0;

		if (sscanf(line, "%lx-%lx %7s %*s %x:%x %lu %n", &a, &b, perms, &maj, &min, &ino,
			   &off) >= 6 &&
		    off > 0) {
			/* a mapping header: "start-end perms offset dev inode [path]" */
			cur = concerned(perms, line + off, maj, min, ino);
			if (!cur)
				continue;
			if (S.mode == MLOCK_MODE_MODELS && add_range(p, a, b) < 0) {
				lines_close(&L);
				return -1; /* ENOMEM: reported as failed, nothing locked */
			}
			p->size += b - a;
			p->n++;
		} else if (cur && sscanf(line, "Rss: %llu kB", &kb) == 1) {
			p->rss += kb * 1024;
		}
	}
	lines_close(&L);
	p->to_lock = S.mode == MLOCK_MODE_ONFAULT ? p->rss : p->size;
	return 0;
}

/* ---- the lock ---- */

static void do_lock(const char *trigger)
{
	struct plan p;
	uint64_t t0, t1;
	long long lck0, lck1;
	int rc = 0, err = 0;
	size_t failed = 0;

	pthread_mutex_lock(&S.lock);
	t0 = now_ns();
	lck0 = vmlck();
	if (plan_scan(&p) < 0) {
		err = errno;
		/* clang-format off */
		report(HEAD(MLOCK_EV_FAILED) "\"%s\"," K(MODE) "\"%s\"," K(START_NS) "%llu,"
		       K(DUR_NS) "0," K(ERRNO) "\"%s\","
		       K(ERROR) "\"cannot list the mappings to lock (/proc/self/smaps): %s\"}",
		       (int)getpid(), trigger, mode_names[S.mode], (unsigned long long)t0,
		       strerrorname_np(err) ?: "?", strerror(err));
		/* clang-format on */
		pthread_mutex_unlock(&S.lock);
		return;
	}
	/* The guard: never pin more than the limit. */
	if (S.limit && p.to_lock > S.limit) {
		/* clang-format off */
		report(HEAD(MLOCK_EV_REFUSED) "\"%s\"," K(MODE) "\"%s\"," K(BYTES_TO_LOCK) "%llu,"
		       K(RESIDENT) "%llu," K(MAPPINGS) "%zu," K(LIMIT) "%llu," K(START_NS) "%llu,"
		       K(DUR_NS) "%llu," K(VMLCK) "%lld}",
		       (int)getpid(), trigger, mode_names[S.mode], p.to_lock, p.rss, p.n, S.limit,
		       (unsigned long long)t0, (unsigned long long)(now_ns() - t0), lck0);
		/* clang-format on */
		pthread_mutex_unlock(&S.lock);
		return;
	}
	switch (S.mode) {
	case MLOCK_MODE_ALL:
		rc = mlockall(MCL_CURRENT);
		err = rc ? errno : 0;
		break;
	case MLOCK_MODE_ONFAULT:
		rc = mlockall(MCL_CURRENT | MCL_ONFAULT);
		err = rc ? errno : 0;
		break;
	case MLOCK_MODE_MODELS:
		for (size_t i = 0; i < p.nr; i++) {
			if (mlock((void *)ranges[i].start, ranges[i].end - ranges[i].start) < 0) {
				if (!err)
					err = errno;
				failed++;
			}
		}
		rc = err ? -1 : 0;
		break;
	}
	t1 = now_ns();
	lck1 = vmlck();
	if (rc == 0) {
		/* clang-format off */
		report(HEAD(MLOCK_EV_LOCKED) "\"%s\"," K(MODE) "\"%s\"," K(BYTES_TO_LOCK) "%llu,"
		       K(RESIDENT) "%llu," K(MAPPINGS) "%zu," K(LIMIT) "%llu," K(START_NS) "%llu,"
		       K(DUR_NS) "%llu," K(VMLCK_BEFORE) "%lld," K(VMLCK) "%lld}",
		       (int)getpid(), trigger, mode_names[S.mode], p.to_lock, p.rss, p.n, S.limit,
		       (unsigned long long)t0, (unsigned long long)(t1 - t0), lck0, lck1);
		/* clang-format on */
	} else {
		/* clang-format off */
		report(HEAD(MLOCK_EV_FAILED) "\"%s\"," K(MODE) "\"%s\"," K(BYTES_TO_LOCK) "%llu,"
		       K(RESIDENT) "%llu," K(MAPPINGS) "%zu," K(FAILED_MAPPINGS) "%zu," K(LIMIT) "%llu,"
		       K(START_NS) "%llu," K(DUR_NS) "%llu," K(VMLCK_BEFORE) "%lld," K(VMLCK) "%lld,"
		       K(ERRNO) "\"%s\"," K(ERROR) "\"%s\"," K(CAP_IPC_LOCK) "%s,"
		       K(RLIMIT_MEMLOCK) "%lld}",
		       (int)getpid(), trigger, mode_names[S.mode], p.to_lock, p.rss, p.n, failed,
		       S.limit, (unsigned long long)t0, (unsigned long long)(t1 - t0), lck0, lck1,
		       strerrorname_np(err) ?: "?", strerror(err),
		       has_cap_ipc_lock() ? "true" : "false", memlock_rlimit());
		/* clang-format on */
	}
	pthread_mutex_unlock(&S.lock);
}

/* ---- the callable trigger ---- */

#if defined(HAVE_PYTHON) && PY_VERSION_HEX >= 0x030B0000
/* The C API, from the interpreter that loaded us (RTLD_DEFAULT). */
static struct {
	int (*is_initialized)(void);
	int (*add_pending_call)(int (*)(void *), void *);
	void (*set_profile)(Py_tracefunc, PyObject *);
	PyCodeObject *(*frame_code)(PyFrameObject *);
	PyObject *(*frame_globals)(PyFrameObject *);
	PyObject *(*dict_get)(PyObject *, const char *);
	int (*str_eq)(PyObject *, const char *);
	void (*decref)(PyObject *);
} py;

/* Called in the main thread for every call and return until the target
 * returns: cheap checks first (the event, the name), the module last. */
static int on_py_event(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
	PyCodeObject *code;
	bool hit = false;

	(void)obj;
	(void)arg;
	if (what != PyTrace_RETURN)
		return 0;
	code = py.frame_code(frame);
	if (code && py.str_eq(code->co_qualname, S.qualname) == 0) {
		PyObject *g = py.frame_globals(frame);
		PyObject *name = g ? py.dict_get(g, "__name__") : NULL;

		hit = name && py.str_eq(name, S.module) == 0;
		if (g)
			py.decref(g);
	}
	if (code)
		py.decref((PyObject *)code);
	if (hit) {
		char b = 'c';
		ssize_t r;

		py.set_profile(NULL, NULL);
		r = write(S.wake[1], &b, 1);
		(void)r;
	}
	return 0;
}

/* Runs in the main thread, holding the GIL (Py_AddPendingCall). */
static int install_profile(void *arg)
{
	(void)arg;
	py.set_profile(on_py_event, NULL);
	return 0;
}

/* In the locker thread: wait for the interpreter, then have its main
 * thread install the profile function. */
static int arm_callable(void)
{
#define PY_SYM(field, name) (*(void **)&py.field = dlsym(RTLD_DEFAULT, name))
	if (!PY_SYM(is_initialized, "Py_IsInitialized") ||
	    !PY_SYM(add_pending_call, "Py_AddPendingCall") ||
	    !PY_SYM(set_profile, "PyEval_SetProfile") || !PY_SYM(frame_code, "PyFrame_GetCode") ||
	    !PY_SYM(frame_globals, "PyFrame_GetGlobals") ||
	    !PY_SYM(dict_get, "PyDict_GetItemString") ||
	    !PY_SYM(str_eq, "PyUnicode_CompareWithASCIIString") || !PY_SYM(decref, "Py_DecRef")) {
		/* clang-format off */
		report(HEAD(MLOCK_EV_FAILED) "\"callable\"," K(MODE) "\"%s\"," K(START_NS) "%llu,"
		       K(DUR_NS) "0," K(ERRNO) "\"ENOSYS\","
		       K(ERROR) "\"not a Python 3.11+ interpreter: its C API is not there\"}",
		       (int)S.pid, mode_names[S.mode], (unsigned long long)S.t_load);
		/* clang-format on */
		return -1;
	}
#undef PY_SYM
	while (!py.is_initialized())
		usleep(10000);
	while (py.add_pending_call(install_profile, NULL) < 0)
		usleep(10000); /* the queue is full: retry */
	return 0;
}
#else
static int arm_callable(void)
{
	/* clang-format off */
	report(HEAD(MLOCK_EV_FAILED) "\"callable\"," K(MODE) "\"%s\"," K(START_NS) "%llu,"
	       K(DUR_NS) "0," K(ERRNO) "\"ENOSYS\","
	       K(ERROR) "\"this shim was built without Python 3.11+ headers "
	       "(install python3-dev and rebuild)\"}",
	       (int)S.pid, mode_names[S.mode], (unsigned long long)S.t_load);
	/* clang-format on */
	return -1;
}
#endif

/* ---- the locker thread ---- */

static void *locker(void *arg)
{
	(void)arg;
	if (S.trigger == MLOCK_TRIG_DELAY) {
		uint64_t at = S.t_load + (uint64_t)(S.delay * 1e9);
		struct timespec ts = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		do_lock("delay");
	} else if (S.trigger == MLOCK_TRIG_SIGNAL) {
		char b;

		/* Every signal locks again: MCL_CURRENT then covers what was
		 * mapped since the last one. */
		for (;;) {
			ssize_t n = read(S.wake[0], &b, 1);

			if (n == 1)
				do_lock("signal");
			else if (n == 0 || errno != EINTR)
				break;
		}
	} else if (S.trigger == MLOCK_TRIG_CALLABLE) {
		char b;

		if (arm_callable() == 0) {
			while (read(S.wake[0], &b, 1) < 0 && errno == EINTR)
				;
			do_lock("callable");
		}
	} else {
		do_lock(trigger_names[S.trigger]);
	}
	return NULL;
}

/* Start the locker with every signal blocked (they belong to the program)
 * and a small stack (mlockall would pin all of a default one). */
static int start_locker(void)
{
	sigset_t all, old;
	pthread_attr_t at;
	pthread_t th;
	int rc;

	sigfillset(&all);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, LOCKER_STACK);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&th, &at, locker, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	return rc;
}

/* Async-signal-safe: only wakes the locker. A forked child shares the
 * pipe but not the thread: its signals must not lock the parent. */
static void on_signal(int sig)
{
	int saved = errno;
	char b = (char)sig;
	ssize_t r;

	if (getpid() != S.pid)
		return;
	r = write(S.wake[1], &b, 1);
	(void)r;
	errno = saved;
}

/* ---- the listen trigger ---- */

static bool is_service_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int port;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return false;
	if (ss.ss_family == AF_INET)
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else if (ss.ss_family == AF_INET6)
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else
		return false; /* a unix socket is not the service's port */
	return S.port == 0 || port == S.port;
}

int listen(int fd, int backlog)
{
	static int (*real_listen)(int, int);
	int rc;

	if (!real_listen)
		real_listen = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
	if (!real_listen) {
		errno = ENOSYS;
		return -1;
	}
	rc = real_listen(fd, backlog);
	if (rc == 0 && S.active && S.trigger == MLOCK_TRIG_LISTEN && getpid() == S.pid &&
	    is_service_port(fd) && !atomic_exchange(&S.fired, 1)) {
		int saved = errno;

		if (S.blocking || start_locker() != 0)
			do_lock("listen"); /* configured to block, or no thread */
		errno = saved;
	}
	return rc;
}

/* ---- load: settings, environment, arming ---- */

/* Remove this library from LD_PRELOAD (entries are separated by spaces or
 * colons, ld.so(8)) and every TTS_LAUNCH_MLOCK_* variable. */
static void clean_environment(void)
{
	extern char **environ;
	const char *lp = getenv("LD_PRELOAD");
	char names[32][64];
	size_t n = 0;
	Dl_info self;
	const char *me = dladdr((void *)clean_environment, &self) ? self.dli_fname : NULL;

	if (lp) {
		char *copy = strdup(lp), *out = calloc(1, strlen(lp) + 1), *tok, *save = NULL;

		if (copy && out) {
			for (tok = strtok_r(copy, " :", &save); tok;
			     tok = strtok_r(NULL, " :", &save)) {
				const char *base = strrchr(tok, '/');

				if ((me && !strcmp(tok, me)) ||
				    !strcmp(base ? base + 1 : tok, MLOCK_SHIM_NAME))
					continue;
				if (*out)
					strcat(out, ":");
				strcat(out, tok);
			}
			if (*out)
				setenv("LD_PRELOAD", out, 1);
			else
				unsetenv("LD_PRELOAD");
		}
		free(copy);
		free(out);
	}
	for (char **e = environ; e && *e && n < 32; e++) {
		size_t len = strcspn(*e, "=");

		if (!strncmp(*e, MLOCK_ENV_PREFIX, strlen(MLOCK_ENV_PREFIX)) &&
		    len < sizeof(names[0]))
			snprintf(names[n++], sizeof(names[0]), "%.*s", (int)len, *e);
	}
	for (size_t i = 0; i < n; i++)
		unsetenv(names[i]);
}

static int pick(const char *v, const char *const *names, int count, int dflt)
{
	for (int i = 0; v && i < count; i++)
		if (!strcmp(v, names[i]))
			return i;
	return dflt;
}

/* TTS_LAUNCH_MLOCK_EXE: a glob for the program to arm in (its executable's
 * or argv[0]'s base name); unset or "*": the first program. */
static bool target_process(void)
{
	extern char *program_invocation_short_name;
	const char *glob = getenv(MLOCK_ENV_EXE);
	char exe[4096];
	ssize_t n;

	if (!glob || !strcmp(glob, "*"))
		return true;
	if (!fnmatch(glob, program_invocation_short_name, 0))
		return true;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	return !fnmatch(glob, strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe, 0);
}

/* A trigger that could not be armed: reported, and the shim stays out. */
static void arm_failed(const char *trigger, const char *err_name, const char *why)
{
	/* clang-format off */
	report(HEAD(MLOCK_EV_FAILED) "\"%s\"," K(MODE) "\"%s\"," K(START_NS) "%llu," K(DUR_NS) "0,"
	       K(ERRNO) "\"%s\"," K(ERROR) "\"%s\"}",
	       (int)S.pid, trigger, mode_names[S.mode], (unsigned long long)S.t_load, err_name,
	       why);
	/* clang-format on */
	S.active = false;
}

__attribute__((constructor)) static void shim_load(void)
{
	const char *mode = getenv(MLOCK_ENV_MODE), *v;
	struct stat st;
	long long avail;

	if (!mode)
		return; /* not injected by tts-launch: stay inert */
	if (!target_process())
		return; /* a runner (uv run, a shell): stay inert, leave the environment
			 * to the program it starts */
	S.t_load = now_ns();
	S.pid = getpid();
	S.mode = pick(mode, mode_names, MLOCK_N_MODES, MLOCK_MODE_ALL);
	S.trigger =
	    pick(getenv(MLOCK_ENV_TRIGGER), trigger_names, MLOCK_N_TRIGGERS, MLOCK_TRIG_LISTEN);
	v = getenv(MLOCK_ENV_CALLABLE);
	if (v && strchr(v, ':'))
		sscanf(v, "%255[^:]:%255s", S.module, S.qualname);
	v = getenv(MLOCK_ENV_FD);
	S.fd = v ? atoi(v) : -1;
	/* Only a socket we were given; then keep it from the service's children. */
	if (S.fd >= 0 && (fstat(S.fd, &st) < 0 || !S_ISSOCK(st.st_mode)))
		S.fd = -1;
	if (S.fd >= 0)
		fcntl(S.fd, F_SETFD, FD_CLOEXEC);
	v = getenv(MLOCK_ENV_DELAY);
	S.delay = v ? strtod(v, NULL) : 0;
	v = getenv(MLOCK_ENV_SIGNAL);
	S.sig = v ? atoi(v) : SIGUSR2;
	v = getenv(MLOCK_ENV_PATTERNS);
	/* tts-launch always sets it (classify.c's model suffixes by default) */
	snprintf(S.patterns, sizeof(S.patterns), "%s", v ? v : "");
	v = getenv(MLOCK_ENV_PORT);
	S.port = v ? atoi(v) : 0;
	v = getenv(MLOCK_ENV_BLOCKING);
	S.blocking = v && !strcmp(v, "1");
	v = getenv(MLOCK_ENV_MAX_PERCENT);
	S.max_percent = v ? atoi(v) : 50;
	v = getenv(MLOCK_ENV_LIMIT);
	S.limit = v ? strtoull(v, NULL, 10) : 0;
	/* Default limit: a share of what was available when the service started
	 * (before its models took any of it). */
	avail = proc_field("/proc/meminfo", "MemAvailable", 10) * 1024;
	if (!S.limit && avail > 0)
		S.limit = (unsigned long long)avail / 100 * (unsigned long long)S.max_percent;
	clean_environment();
	S.active = true;

	if (S.trigger == MLOCK_TRIG_SIGNAL) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (pipe2(S.wake, O_CLOEXEC) < 0 || fcntl(S.wake[1], F_SETFL, O_NONBLOCK) < 0 ||
		    sigaction(S.sig, &sa, NULL) < 0 || start_locker() != 0) {
			char why[160];

			snprintf(why, sizeof(why), "cannot arm the signal trigger: %s",
				 strerror(errno));
			arm_failed("signal", strerrorname_np(errno) ?: "?", why);
			return;
		}
	} else if (S.trigger == MLOCK_TRIG_CALLABLE &&
		   (!S.module[0] || pipe2(S.wake, O_CLOEXEC) < 0 || start_locker() != 0)) {
		arm_failed("callable", "EINVAL",
			   "cannot arm the callable trigger (TTS_LAUNCH_MLOCK_CALLABLE = "
			   "module:qualname)");
		return;
	} else if (S.trigger == MLOCK_TRIG_DELAY && start_locker() != 0) {
		arm_failed("delay", "EAGAIN", "cannot start the locker thread");
		return;
	}
	/* clang-format off */
	report(HEAD(MLOCK_EV_ARMED) "\"%s\"," K(MODE) "\"%s\"," K(LIMIT) "%llu," K(PORT) "%d,"
	       K(SIGNAL) "%d," K(DELAY) "%g," K(BLOCKING) "%s," K(UID) "%d," K(CAP_IPC_LOCK) "%s,"
	       K(START_NS) "%llu}",
	       (int)S.pid, trigger_names[S.trigger], mode_names[S.mode], S.limit, S.port, S.sig,
	       S.delay, S.blocking ? "true" : "false", (int)getuid(),
	       has_cap_ipc_lock() ? "true" : "false", (unsigned long long)S.t_load);
	/* clang-format on */
}
