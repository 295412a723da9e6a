/* mlock: inject hooks/mlock_shim.c into the service and collect its reports
 * (docs/mlock.md has the report format and the fixes). */
#include "mlock.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "interp.h"
#include "timeline_internal.h"
#include "util.h"

#include "../hooks/mlock_proto.h"

#define OOM()                                                                                      \
	do {                                                                                       \
		perror("tts-launch: out of memory");                                               \
		exit(1);                                                                           \
	} while (0)

static const char *const trigger_names[] = MLOCK_TRIGGER_NAMES;
static const char *const mode_names[] = MLOCK_MODE_NAMES;
static const char *const event_names[] = MLOCK_EVENT_NAMES;

/* [mlock] trigger's values index the protocol's trigger names */
_Static_assert((int)MLOCK_AT_LISTEN == (int)MLOCK_TRIG_LISTEN &&
		   (int)MLOCK_AT_SIGNAL == (int)MLOCK_TRIG_SIGNAL &&
		   (int)MLOCK_AT_DELAY == (int)MLOCK_TRIG_DELAY &&
		   (int)MLOCK_AT_CALLABLE == (int)MLOCK_TRIG_CALLABLE,
	       "enum mlock_trigger and the protocol's trigger order differ");

#define SIZE_CAP (1LL << 50) /* 1 PiB: beyond any machine's memory */
#define TEXT_CAP 256	     /* bytes of a report's "error" text kept */

/* The shim next to the binary: build/hooks/ in the build tree, or
 * PREFIX/lib/tts-launch/ once installed (Makefile's install). */
static char *find_shim(char *tried, size_t len)
{
	static const char *const rel[] = {"hooks/" MLOCK_SHIM_NAME,
					  "../lib/tts-launch/" MLOCK_SHIM_NAME};
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t off = 0;

	tried[0] = '\0';
	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	dirname(exe);
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char path[PATH_MAX + 64], *real;

		snprintf(path, sizeof(path), "%s/%s", exe, rel[i]);
		real = realpath(path, NULL);
		if (real && access(real, R_OK) == 0)
			return real;
		free(real);
		off += (size_t)snprintf(tried + off, off < len ? len - off : 0, "%s%s",
					i ? ", " : "", path);
		if (off >= len)
			off = len;
	}
	return NULL;
}

static void env_set(char ***envp, const char *name, const char *value)
{
	size_t n = 0, len = strlen(name);
	char *kv;

	if (asprintf(&kv, "%s=%s", name, value) < 0)
		OOM();
	for (; (*envp)[n]; n++) {
		if (!strncmp((*envp)[n], name, len) && (*envp)[n][len] == '=') {
			free((*envp)[n]);
			(*envp)[n] = kv;
			return;
		}
	}
	*envp = realloc(*envp, (n + 2) * sizeof(char *));
	if (!*envp)
		OOM();
	(*envp)[n] = kv;
	(*envp)[n + 1] = NULL;
}

static const char *env_get(char **envp, const char *name)
{
	size_t len = strlen(name);

	for (; *envp; envp++)
		if (!strncmp(*envp, name, len) && (*envp)[len] == '=')
			return *envp + len + 1;
	return NULL;
}

static void env_setf(char ***envp, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void env_setf(char ***envp, const char *name, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	env_set(envp, name, buf);
}

int mlock_prepare(struct mlock_ctl *m, const struct config *c, char ***envp, char *msg, size_t len)
{
	char tried[2 * PATH_MAX];
	const char *lp;
	int sv[2];

	m->mode = c->mlock;
	m->user_switch = c->user && *c->user;
	if (c->mlock == MLOCK_OFF)
		return 0;
	m->state = json_pack("{s:s, s:s, s:n, s:b, s:s, s:[]}", "mode", config_mlock_name(c->mlock),
			     "trigger", trigger_names[c->mlock_trigger], "shim", "loaded", 0,
			     "status", "pending", "events");
	m->shim = find_shim(tried, sizeof(tried));
	if (!m->shim) {
		json_object_set_new(m->state, "status", json_string("not_injected"));
		snprintf(msg, len,
			 "mlock: the shim %s was not found (looked for %s): the service starts "
			 "without it",
			 MLOCK_SHIM_NAME, tried);
		return -1;
	}
	json_object_set_new(m->state, "shim", json_string(m->shim));
	/* A datagram socket: one report per message, and the shim's send()
	 * can use MSG_NOSIGNAL (no SIGPIPE in the service once we are gone). */
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0) {
		json_object_set_new(m->state, "status", json_string("not_injected"));
		snprintf(msg, len,
			 "mlock: failed to create the report socket: %s: the service starts "
			 "without the shim",
			 strerror(errno));
		return -1;
	}
	m->fd = sv[0];
	m->child_fd = sv[1];
	fcntl(m->fd, F_SETFL, O_NONBLOCK);
	/* The service's end survives exec; the shim marks it CLOEXEC at once so
	 * that the service's own children do not get it. */
	fcntl(m->child_fd, F_SETFD, 0);

	/* Prepended: a preload the user configured keeps working. */
	lp = env_get(*envp, "LD_PRELOAD");
	if (lp && *lp)
		env_setf(envp, "LD_PRELOAD", "%s:%s", m->shim, lp);
	else
		env_set(envp, "LD_PRELOAD", m->shim);
	env_setf(envp, MLOCK_ENV_FD, "%d", m->child_fd);
	env_set(envp, MLOCK_ENV_MODE, config_mlock_name(c->mlock));
	env_set(envp, MLOCK_ENV_TRIGGER, trigger_names[c->mlock_trigger]);
	env_set(envp, MLOCK_ENV_CALLABLE, c->mlock_callable);
	env_setf(envp, MLOCK_ENV_DELAY, "%g", c->mlock_delay);
	env_setf(envp, MLOCK_ENV_SIGNAL, "%d",
		 c->mlock_signal == MLOCK_SIGUSR1 ? SIGUSR1 : SIGUSR2);
	env_set(envp, MLOCK_ENV_PATTERNS, c->mlock_patterns);
	env_setf(envp, MLOCK_ENV_LIMIT, "%lld", c->mlock_limit);
	env_setf(envp, MLOCK_ENV_MAX_PERCENT, "%d", c->mlock_max_percent);
	env_set(envp, MLOCK_ENV_BLOCKING, c->mlock_blocking ? "1" : "0");
	env_setf(envp, MLOCK_ENV_PORT, "%d", c->port);
	/* Which process arms: webui.py's interpreter, even behind a runner
	 * such as `uv run` (the shim stays inert and in the environment until
	 * a python starts); a -- COMMAND: the command itself. */
	env_set(envp, MLOCK_ENV_EXE, interp_exe_glob(c));
	return 0;
}

bool mlock_wants_ipc_lock(const struct mlock_ctl *m)
{
	return m->mode != MLOCK_OFF && m->child_fd >= 0;
}

void mlock_spawned(struct mlock_ctl *m)
{
	if (m->child_fd >= 0)
		close(m->child_fd);
	m->child_fd = -1;
}

int mlock_fd(const struct mlock_ctl *m) { return m->fd; }

char *mlock_fix(const json_t *ev, bool user_switch)
{
	const char *event = jstr(ev, MLOCK_F_EVENT), *e = jstr(ev, MLOCK_F_ERRNO);
	bool cap = json_is_true(json_object_get(ev, MLOCK_F_CAP_IPC_LOCK));
	char a[32], *out = NULL;
	int r = -1;

	if (event && !strcmp(event, MLOCK_EV_REFUSED)) {
		r = asprintf(&out,
			     "raise [mlock] limit (or max_percent, the share of MemAvailable at "
			     "start used when limit is 0), or lock less with mode = models");
	} else if (!e || !event || strcmp(event, MLOCK_EV_FAILED)) {
		return NULL;
	} else if (!strcmp(e, "EPERM")) {
		r = asprintf(
		    &out,
		    "run the service as root, or with CAP_IPC_LOCK (%s), or raise its "
		    "RLIMIT_MEMLOCK (ulimit -l, LimitMEMLOCK= in systemd)",
		    user_switch
			? "tts-launch grants it to [service] user: check that nothing drops it"
			: "setcap/ambient capability, or set [service] user: tts-launch grants it");
	} else if (!strcmp(e, "ENOMEM") && !cap) {
		double rl = jnum(ev, MLOCK_F_RLIMIT_MEMLOCK);

		fmt_bytes(a, sizeof(a), rl);
		r = asprintf(
		    &out,
		    "without CAP_IPC_LOCK only RLIMIT_MEMLOCK (%s) can be locked: run the "
		    "service as root or with CAP_IPC_LOCK, raise RLIMIT_MEMLOCK (ulimit -l), "
		    "or lock less with mode = models",
		    rl < 0 ? "unlimited" : a);
	} else if (!strcmp(e, "ENOMEM") || !strcmp(e, "EAGAIN")) {
		r = asprintf(&out,
			     "not enough memory could be locked: lock less (mode = models, [mlock] "
			     "patterns, mode = onfault) or free memory");
	} else {
		r = asprintf(&out, "see docs/mlock.md");
	}
	return r < 0 ? NULL : out;
}

char *mlock_describe(const json_t *ev, const char *fix)
{
	const char *event = jstr(ev, MLOCK_F_EVENT);
	char a[32], b[32], *out = NULL, head[128];
	int r = -1;

	snprintf(head, sizeof(head), "tts-launch: mlock (%s, at %s)", jstr(ev, MLOCK_F_MODE) ?: "?",
		 jstr(ev, MLOCK_F_TRIGGER) ?: "?");
	if (!event)
		return NULL;
	if (!strcmp(event, MLOCK_EV_LOCKED)) {
		fmt_bytes(a, sizeof(a), jnum(ev, MLOCK_F_VMLCK));
		if (!strcmp(jstr(ev, MLOCK_F_MODE) ?: "", mode_names[MLOCK_MODE_MODELS]))
			snprintf(b, sizeof(b), " (%lld model mapping%s)",
				 (long long)jnum(ev, MLOCK_F_MAPPINGS),
				 jnum(ev, MLOCK_F_MAPPINGS) == 1 ? "" : "s");
		else
			b[0] = '\0';
		r = asprintf(&out, "%s: locked %s%s in %.2f s\n", head, a, b,
			     jnum(ev, MLOCK_F_DUR_NS) / 1e9);
	} else if (!strcmp(event, MLOCK_EV_REFUSED)) {
		fmt_bytes(a, sizeof(a), jnum(ev, MLOCK_F_BYTES_TO_LOCK));
		fmt_bytes(b, sizeof(b), jnum(ev, MLOCK_F_LIMIT));
		r = asprintf(&out,
			     "%s refused: %s to lock, above the limit of %s; fix: %s; the service "
			     "keeps running\n",
			     head, a, b, fix ?: "see docs/mlock.md");
	} else if (!strcmp(event, MLOCK_EV_FAILED)) {
		r = asprintf(&out, "%s failed: %s: %s; fix: %s; the service keeps running\n", head,
			     jstr(ev, MLOCK_F_ERRNO) ?: "?", jstr(ev, MLOCK_F_ERROR) ?: "",
			     fix ?: "see docs/mlock.md");
	}
	return r < 0 ? NULL : out;
}

static void append(char **buf, size_t *len, const char *s)
{
	size_t n = strlen(s);
	char *p = realloc(*buf, *len + n + 1);

	if (!p)
		OOM();
	memcpy(p + *len, s, n + 1);
	*buf = p;
	*len += n;
}

static bool one_of(const char *v, const char *const *names, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		if (!strcmp(v, names[i]))
			return true;
	return false;
}

#define ONE_OF(v, names) one_of(v, names, sizeof(names) / sizeof(names[0]))

/* A number field within [lo, hi]: absent is fine, a wrong type or a value
 * below lo rejects the report (why), above hi is clamped (counted). */
static bool num_field(json_t *out, const json_t *in, const char *k, double lo, double hi,
		      bool integer, unsigned long long *clamped, char *why, size_t len)
{
	const json_t *v = json_object_get(in, k);
	double x;

	if (!v)
		return true;
	if (!json_is_number(v) || (integer && !json_is_integer(v))) {
		snprintf(why, len, "%s is not a%s number", k, integer ? "n integer" : "");
		return false;
	}
	x = json_number_value(v);
	if (!(x >= lo)) {
		snprintf(why, len, "%s = %g is below %g", k, x, lo);
		return false;
	}
	if (x > hi) {
		x = hi;
		(*clamped)++;
	}
	json_object_set_new(out, k, integer ? json_integer((json_int_t)x) : json_real(x));
	return true;
}

static bool bool_field(json_t *out, const json_t *in, const char *k, char *why, size_t len)
{
	const json_t *v = json_object_get(in, k);

	if (!v)
		return true;
	if (!json_is_boolean(v)) {
		snprintf(why, len, "%s is not true or false", k);
		return false;
	}
	json_object_set(out, k, (json_t *)v);
	return true;
}

/* errno: a name such as ENOMEM; error: strerror text, cut at TEXT_CAP bytes
 * (at a character boundary). */
static bool text_fields(json_t *out, const json_t *in, unsigned long long *clamped, char *why,
			size_t len)
{
	const char *e = jstr(in, MLOCK_F_ERRNO), *t = jstr(in, MLOCK_F_ERROR);

	if (json_object_get(in, MLOCK_F_ERRNO)) {
		size_t n = e ? strlen(e) : 0;
		bool ok = n >= 2 && n <= 32 && e[0] == 'E';

		for (size_t i = 1; ok && i < n; i++)
			ok = (e[i] >= 'A' && e[i] <= 'Z') || (e[i] >= '0' && e[i] <= '9');
		if (!ok) {
			snprintf(why, len, "errno is not an error name");
			return false;
		}
		json_object_set_new(out, MLOCK_F_ERRNO, json_string(e));
	}
	if (json_object_get(in, MLOCK_F_ERROR)) {
		size_t n;

		if (!t) {
			snprintf(why, len, "error is not a string");
			return false;
		}
		n = strlen(t);
		if (n > TEXT_CAP) {
			n = utf8_prefix_len(t, TEXT_CAP); /* not inside a character */
			(*clamped)++;
		}
		json_object_set_new(out, MLOCK_F_ERROR, json_stringn(t, n));
	}
	return true;
}

/* A report as the service sent it, checked: the known fields only, each of
 * its type and range. NULL (with why) when rejected. */
static json_t *checked_report(const json_t *in, unsigned long long *clamped, char *why, size_t len)
{
	static const char *const sizes[] = {
	    MLOCK_F_LIMIT, MLOCK_F_BYTES_TO_LOCK, MLOCK_F_RESIDENT,	  MLOCK_F_VMLCK_BEFORE,
	    MLOCK_F_VMLCK, MLOCK_F_MAPPINGS,	  MLOCK_F_FAILED_MAPPINGS};
	json_t *out = json_object();
	double now = (double)clock_t0_ns() + clock_ms() * 1e6, start;
	bool ok;

	if (!out)
		OOM();
	if (!ONE_OF(jstr(in, MLOCK_F_EVENT), event_names) ||
	    !ONE_OF(jstr(in, MLOCK_F_TRIGGER), trigger_names) ||
	    !ONE_OF(jstr(in, MLOCK_F_MODE), mode_names)) {
		snprintf(why, len, "event, trigger or mode missing or unknown");
		json_decref(out);
		return NULL;
	}
	json_object_set_new(out, MLOCK_F_EVENT, json_string(jstr(in, MLOCK_F_EVENT)));
	json_object_set_new(out, MLOCK_F_TRIGGER, json_string(jstr(in, MLOCK_F_TRIGGER)));
	json_object_set_new(out, MLOCK_F_MODE, json_string(jstr(in, MLOCK_F_MODE)));
	ok = json_is_integer(json_object_get(in, MLOCK_F_PID)) &&
	     num_field(out, in, MLOCK_F_PID, 1, 4194304, true, clamped, why, len);
	if (!ok && !*why)
		snprintf(why, len, "pid missing or not an integer");
	/* Times on the monotonic clock, never after now; a duration never
	 * reaches beyond now either. */
	ok = ok && num_field(out, in, MLOCK_F_START_NS, 0, now, true, clamped, why, len);
	start = json_number_value(json_object_get(out, MLOCK_F_START_NS));
	ok = ok && num_field(out, in, MLOCK_F_DUR_NS, 0,
			     json_object_get(out, MLOCK_F_START_NS) ? now - start : now, true,
			     clamped, why, len);
	for (size_t i = 0; ok && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const json_t *v = json_object_get(in, sizes[i]);

		/* VmLck the shim could not read (mlock_proto.h: -1): unknown, left out */
		if (!strncmp(sizes[i], MLOCK_F_VMLCK, strlen(MLOCK_F_VMLCK)) &&
		    json_is_integer(v) && json_integer_value(v) == -1)
			continue;
		ok = num_field(out, in, sizes[i], 0, (double)SIZE_CAP, true, clamped, why, len);
	}
	ok = ok && num_field(out, in, MLOCK_F_RLIMIT_MEMLOCK, -1, (double)SIZE_CAP, true, clamped,
			     why, len);
	ok = ok && num_field(out, in, MLOCK_F_PORT, 0, 65535, true, clamped, why, len);
	ok = ok && num_field(out, in, MLOCK_F_SIGNAL, 0, 64, true, clamped, why, len);
	ok = ok && num_field(out, in, MLOCK_F_UID, 0, 4294967295.0, true, clamped, why, len);
	ok = ok && num_field(out, in, MLOCK_F_DELAY, 0, 1e9, false, clamped, why, len);
	ok = ok && bool_field(out, in, MLOCK_F_BLOCKING, why, len) &&
	     bool_field(out, in, MLOCK_F_CAP_IPC_LOCK, why, len);
	ok = ok && text_fields(out, in, clamped, why, len);
	if (!ok) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* One report: into the events, the top-level outcome, and a line to say. */
static char *take(struct mlock_ctl *m, json_t *ev, struct timeline *tl)
{
	const char *event = jstr(ev, MLOCK_F_EVENT);
	double start = json_is_number(json_object_get(ev, MLOCK_F_START_NS))
			   ? clock_ns_to_ms((uint64_t)jnum(ev, MLOCK_F_START_NS))
			   : clock_ms();
	char *fix = NULL, *line = NULL;

	json_object_set_new(ev, "start_ms", json_real(start));
	json_object_set_new(ev, "dur_ms", json_real(jnum(ev, MLOCK_F_DUR_NS) / 1e6));
	json_array_append(json_object_get(m->state, "events"), ev);
	if (!event)
		return NULL;
	if (!strcmp(event, MLOCK_EV_ARMED)) {
		json_object_set_new(m->state, "loaded", json_true());
		json_object_set_new(m->state, "status", json_string("armed"));
		json_object_set(m->state, "pid", json_object_get(ev, MLOCK_F_PID));
		json_object_set(m->state, "cap_ipc_lock",
				json_object_get(ev, MLOCK_F_CAP_IPC_LOCK));
		json_object_set(m->state, "limit", json_object_get(ev, MLOCK_F_LIMIT));
		return NULL;
	}
	fix = mlock_fix(ev, m->user_switch);
	/* The latest outcome, at the top. */
	json_object_set_new(m->state, "status", json_string(event));
	json_object_set(m->state, "trigger", json_object_get(ev, MLOCK_F_TRIGGER));
	json_object_set_new(m->state, "bytes_to_lock",
			    json_integer((json_int_t)jnum(ev, MLOCK_F_BYTES_TO_LOCK)));
	json_object_set_new(m->state, "bytes_locked",
			    json_object_get(ev, MLOCK_F_VMLCK)
				? json_integer((json_int_t)jnum(ev, MLOCK_F_VMLCK))
				: json_null());
	json_object_set_new(m->state, "resident_before",
			    json_integer((json_int_t)jnum(ev, MLOCK_F_RESIDENT)));
	json_object_set_new(m->state, "mappings",
			    json_integer((json_int_t)jnum(ev, MLOCK_F_MAPPINGS)));
	json_object_set_new(m->state, "start_ms", json_real(start));
	json_object_set_new(m->state, "dur_ms", json_real(jnum(ev, MLOCK_F_DUR_NS) / 1e6));
	json_object_set(m->state, "errno", json_object_get(ev, MLOCK_F_ERRNO) ?: json_null());
	json_object_set(m->state, "error", json_object_get(ev, MLOCK_F_ERROR) ?: json_null());
	json_object_set_new(m->state, "fix", fix ? json_string(fix) : json_null());
	if (tl && !strcmp(event, MLOCK_EV_LOCKED))
		timeline_phase(tl, "mlock", start, start + jnum(ev, MLOCK_F_DUR_NS) / 1e6);
	line = mlock_describe(ev, fix);
	free(fix);
	return line;
}

char *mlock_poll(struct mlock_ctl *m, struct timeline *tl)
{
	char buf[4096], *out = NULL;
	size_t len = 0;
	ssize_t n;

	if (m->fd < 0)
		return NULL;
	for (int i = 0; i < MLOCK_POLL_MAX; i++) {
		char why[160] = "", *line;
		json_error_t jerr;
		json_t *raw, *ev;

		/* MSG_TRUNC: the datagram's real length, even beyond buf */
		n = recv(m->fd, buf, sizeof(buf) - 1, MSG_DONTWAIT | MSG_TRUNC);
		if (n <= 0)
			break;
		m->received++;
		if (m->kept + m->rejected >= MLOCK_KEEP_EVENTS ||
		    m->read_bytes + (size_t)n > MLOCK_KEEP_BYTES) {
			/* Beyond the cap: counted only. */
			m->dropped++;
			m->dropped_bytes += (unsigned long long)n;
			if (!m->said_dropped) {
				m->said_dropped = true;
				char line[200];

				snprintf(line, sizeof(line),
					 "tts-launch: warning: mlock: the service sent more "
					 "reports than kept (%d, %d KiB): the rest are counted, "
					 "not read (memory.mlock.reports)\n",
					 MLOCK_KEEP_EVENTS, MLOCK_KEEP_BYTES / 1024);
				append(&out, &len, line);
			}
			continue;
		}
		m->read_bytes += (size_t)(n < (ssize_t)sizeof(buf) ? n : (ssize_t)sizeof(buf));
		raw = NULL;
		ev = NULL;
		if (n >= (ssize_t)sizeof(buf)) {
			snprintf(why, sizeof(why), "%zd bytes, above %zu", n, sizeof(buf) - 1);
		} else {
			buf[n] = '\0';
			raw =
			    json_loads(buf, JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &jerr);
			if (!json_is_object(raw))
				snprintf(why, sizeof(why), "not a JSON object");
			else
				ev = checked_report(raw, &m->clamped, why, sizeof(why));
		}
		json_decref(raw);
		if (!ev) {
			m->rejected++;
			if (!m->said_rejected) {
				m->said_rejected = true;
				line = NULL;
				if (asprintf(
					&line,
					"tts-launch: warning: mlock: a report from the service "
					"was rejected (%s); further ones are only counted "
					"(memory.mlock.reports)\n",
					why) >= 0) {
					append(&out, &len, line);
					free(line);
				}
			}
			continue;
		}
		m->kept++;
		line = take(m, ev, tl);
		json_decref(ev);
		if (line) {
			append(&out, &len, line);
			free(line);
		}
	}
	if (tl)
		mlock_timeline(m, tl);
	return out;
}

char *mlock_check_loaded(struct mlock_ctl *m)
{
	char *out = NULL;

	if (m->checked || m->fd < 0 || json_is_true(json_object_get(m->state, "loaded")))
		return NULL;
	m->checked = true;
	json_object_set_new(m->state, "status", json_string("not_loaded"));
	if (asprintf(
		&out,
		"tts-launch: warning: mlock: the shim did not load in the service (a static "
		"binary, a setuid program, or a wrapper that clears LD_PRELOAD?): nothing will "
		"be locked; see docs/mlock.md\n") < 0)
		return NULL;
	return out;
}

void mlock_timeline(struct mlock_ctl *m, struct timeline *tl)
{
	json_t *mem, *copy;

	if (!tl || !timeline_json(tl))
		return;
	mem = json_object_get(timeline_json(tl), "memory");
	if (!json_is_object(mem))
		return;
	/* memory.mlock: what the shim reported, null when it was not used
	 * (the traced calls are memory.mlock_calls; docs/mlock.md) */
	if (!m->state) {
		json_object_set_new(mem, "mlock", json_null());
		return;
	}
	copy = json_deep_copy(m->state);
	if (!copy)
		OOM();
	/* The outcome is the service's word, not something tts-launch saw:
	 * "service-report" once a report was taken, else tts-launch's own
	 * verdict (pending, not_injected, not_loaded). */
	json_object_set_new(copy, "source", json_string(m->kept ? "service-report" : "tts-launch"));
	json_object_set_new(copy, "reports",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "received",
				      (json_int_t)m->received, "kept", (json_int_t)m->kept,
				      "rejected", (json_int_t)m->rejected, "clamped",
				      (json_int_t)m->clamped, "dropped", (json_int_t)m->dropped,
				      "dropped_bytes", (json_int_t)m->dropped_bytes));
	json_object_set_new(mem, "mlock", copy);
}

void mlock_free(struct mlock_ctl *m)
{
	if (m->fd >= 0)
		close(m->fd);
	if (m->child_fd >= 0)
		close(m->child_fd);
	free(m->shim);
	json_decref(m->state);
	m->fd = m->child_fd = -1;
	m->shim = NULL;
	m->state = NULL;
}
