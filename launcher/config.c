/* config: defaults, INI file (iniparser), --set overrides, cross checks.
 * One table lists every key with its type and range; unknown sections and
 * keys are errors that suggest the nearest valid name. */
#include "config.h"
#include "classify.h"
#include "config_file.h"
#include "envcheck.h"
#include "metrics.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iniparser.h>
#include <jansson.h>

enum key_type { T_STR, T_INT, T_BOOL, T_SECONDS, T_SIZE, T_ENUM };

struct key_def {
	const char *section;
	const char *key;
	enum key_type type;
	size_t offset;
	double min, max;	  /* T_INT, T_SECONDS, T_SIZE */
	const char *const *names; /* T_ENUM: NULL-terminated, index = value */
};

static const char *const mode_names[] = {"foreground", "daemon", NULL};
static const char *const policy_names[] = {"kill", "fail", "ignore", NULL};
static const char *const scope_names[] = {"app", "any", NULL};
static const char *const mlock_names[] = {"off", "all", "models", "onfault", NULL};
static const char *const trigger_names[] = {"listen", "signal", "delay", "callable", NULL};
static const char *const mlock_signal_names[] = {"SIGUSR2", "SIGUSR1", NULL};
static const char *const progress_names[] = {"auto", "tty", "log", "off", NULL};
static const char *const syscalls_names[] = {"exact", "cheap", NULL};

#define OFF(f) offsetof(struct config, f)
static const struct key_def keys[] = {
    {"app", "dir", T_STR, OFF(app_dir), 0, 0, NULL},
    {"app", "python", T_STR, OFF(python), 0, 0, NULL},
    {"app", "script", T_STR, OFF(script), 0, 0, NULL},
    {"app", "args", T_STR, OFF(args), 0, 0, NULL},
    {"app", "host", T_STR, OFF(host), 0, 0, NULL},
    {"app", "port", T_INT, OFF(port), 0, 65535, NULL},
    {"app", "model_dir", T_STR, OFF(model_dir), 0, 0, NULL},
    {"env", "pythonpath", T_STR, OFF(pythonpath), 0, 0, NULL},
    {"stale", "match", T_STR, OFF(stale_match), 0, 0, NULL},
    {"stale", "policy", T_ENUM, OFF(stale_policy), 0, 0, policy_names},
    {"stale", "scope", T_ENUM, OFF(stale_scope), 0, 0, scope_names},
    {"stale", "grace", T_SECONDS, OFF(stale_grace), 0, 3600, NULL},
    {"log", "file", T_STR, OFF(log_file), 0, 0, NULL},
    {"log", "max_size", T_SIZE, OFF(log_max_size), 0, 1e15, NULL},
    {"log", "backups", T_INT, OFF(log_backups), 0, 100, NULL},
    {"service", "user", T_STR, OFF(user), 0, 0, NULL},
    {"service", "group", T_STR, OFF(group), 0, 0, NULL},
    {"service", "mode", T_ENUM, OFF(mode), 0, 0, mode_names},
    {"service", "pidfile", T_STR, OFF(pidfile), 0, 0, NULL},
    {"service", "ready_timeout", T_SECONDS, OFF(ready_timeout), 0, 86400 * 7, NULL},
    {"service", "stop_grace", T_SECONDS, OFF(stop_grace), 0, 3600, NULL},
    {"trace", "enabled", T_BOOL, OFF(trace), 0, 0, NULL},
    {"trace", "timeline", T_STR, OFF(timeline), 0, 0, NULL},
    {"trace", "settle", T_SECONDS, OFF(settle), 0, 3600, NULL},
    {"trace", "requests_window", T_SECONDS, OFF(requests_window), 0, 86400 * 7, NULL},
    {"trace", "python_usdt", T_BOOL, OFF(python_usdt), 0, 0, NULL},
    {"trace", "keep_loaded", T_BOOL, OFF(keep_loaded), 0, 0, NULL},
    {"trace", "stall", T_SECONDS, OFF(stall), 0, 86400, NULL},
    {"trace", "progress", T_ENUM, OFF(progress), 0, 0, progress_names},
    {"trace", "syscalls", T_ENUM, OFF(syscalls), 0, 0, syscalls_names},
    {"mlock", "mode", T_ENUM, OFF(mlock), 0, 0, mlock_names},
    {"mlock", "trigger", T_ENUM, OFF(mlock_trigger), 0, 0, trigger_names},
    {"mlock", "callable", T_STR, OFF(mlock_callable), 0, 0, NULL},
    {"mlock", "delay", T_SECONDS, OFF(mlock_delay), 0, 86400, NULL},
    {"mlock", "signal", T_ENUM, OFF(mlock_signal), 0, 0, mlock_signal_names},
    {"mlock", "patterns", T_STR, OFF(mlock_patterns), 0, 0, NULL},
    {"mlock", "limit", T_SIZE, OFF(mlock_limit), 0, 1e15, NULL},
    {"mlock", "max_percent", T_INT, OFF(mlock_max_percent), 1, 100, NULL},
    {"mlock", "blocking", T_BOOL, OFF(mlock_blocking), 0, 0, NULL},
    {"metrics", "listen", T_STR, OFF(metrics_listen), 0, 0, NULL},
};
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

static const char *const sections[] = {"app",	  "env",   "stale", "log",
				       "service", "trace", "mlock", "metrics"};
#define N_SECTIONS (sizeof(sections) / sizeof(sections[0]))

static void set_err(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s ? s : "");

	if (!d) {
		perror("tts-launch: out of memory");
		exit(1);
	}
	return d;
}

static void replace_str(char **dst, const char *v)
{
	free(*dst);
	*dst = xstrdup(v);
}

void config_defaults(struct config *c)
{
	char globs[512];

	memset(c, 0, sizeof(*c));
	c->source = xstrdup("(built-in defaults)");
	c->app_dir = xstrdup(".");
	c->python = xstrdup("/usr/bin/python3");
	c->script = xstrdup("webui.py");
	c->args = xstrdup("");
	c->host = xstrdup("0.0.0.0");
	c->port = 7860;
	c->model_dir = xstrdup("./checkpoints");
	c->pythonpath = xstrdup("");
	c->stale_match = xstrdup("");
	c->stale_policy = STALE_KILL;
	c->stale_scope = SCOPE_APP;
	c->stale_grace = 10;
	c->log_file = xstrdup("webui.log");
	c->log_max_size = 10ll * 1024 * 1024;
	c->log_backups = 3;
	c->user = xstrdup("");
	c->group = xstrdup("");
	c->mode = MODE_FOREGROUND;
	c->pidfile = xstrdup("tts-launch.pid");
	c->ready_timeout = 600;
	c->stop_grace = 10;
	c->trace = true;
	c->timeline = xstrdup("tts-launch-timeline.json");
	c->settle = 1;
	c->requests_window = 60;
	c->syscalls = SYSCALLS_CHEAP; /* exact: docs/timeline.md, "Syscalls: exact or cheap" */
	c->python_usdt = true;
	c->keep_loaded = true;
	c->stall = 30;
	c->progress = PROGRESS_AUTO;
	c->mlock = MLOCK_OFF;
	c->mlock_trigger = MLOCK_AT_LISTEN;
	c->mlock_callable = xstrdup("indextts.infer_v2:IndexTTS2.__init__");
	c->mlock_delay = 60;
	c->mlock_signal = MLOCK_SIGUSR2;
	/* the model-file suffixes of classify.c's one table, as globs */
	classify_model_globs(globs, sizeof(globs));
	c->mlock_patterns = xstrdup(globs);
	c->mlock_limit = 0;
	c->mlock_max_percent = 50;
	c->mlock_blocking = false;
	c->metrics_listen = xstrdup("");
	c->euid = geteuid();
}

void config_free(struct config *c)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if (keys[i].type == T_STR)
			free(*(char **)((char *)c + keys[i].offset));
	for (size_t i = 0; i < c->n_env; i++) {
		free(c->env[i].name);
		free(c->env[i].value);
	}
	free(c->env);
	free(c->source);
	free(c->notice);
	memset(c, 0, sizeof(*c));
}

/* Levenshtein distance, for "did you mean". */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];

	if (lb >= sizeof(row) / sizeof(row[0]))
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* " (did you mean 'x'?)" when a name is close, else "". */
static void suggest(char *buf, size_t len, const char *name, const char *const *cands, size_t n)
{
	size_t best = (size_t)-1;
	const char *pick = NULL;

	for (size_t i = 0; i < n; i++) {
		size_t d = edit_distance(name, cands[i]);

		if (d < best) {
			best = d;
			pick = cands[i];
		}
	}
	if (pick && best <= 3 && best < strlen(name))
		snprintf(buf, len, " (did you mean '%s'?)", pick);
	else
		buf[0] = '\0';
}

/* "app, env, ...": the known sections, for messages. */
const char *config_sections(void)
{
	static char buf[256];

	if (!buf[0])
		for (size_t i = 0, off = 0; i < N_SECTIONS && off < sizeof(buf); i++)
			off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s", i ? ", " : "",
						sections[i]);
	return buf;
}

static const struct key_def *find_key(const char *section, const char *key)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if (!strcmp(keys[i].section, section) && !strcmp(keys[i].key, key))
			return &keys[i];
	return NULL;
}

static bool known_section(const char *s)
{
	for (size_t i = 0; i < N_SECTIONS; i++)
		if (!strcmp(sections[i], s))
			return true;
	return false;
}

/* A finite number followed by optional spaces; *rest is the unit. */
static int parse_number(const char *v, double *x, const char **rest)
{
	char *end;

	errno = 0;
	*x = strtod(v, &end);
	if (end == v || errno || !isfinite(*x))
		return -1;
	while (isspace((unsigned char)*end))
		end++;
	*rest = end;
	return 0;
}

/* "5", "1.5", "500ms", "10s", "2m", "1h" -> seconds. */
static int parse_seconds(const char *v, double *out)
{
	static const struct {
		const char *unit;
		double factor;
	} units[] = {{"", 1}, {"s", 1}, {"ms", 0.001}, {"m", 60}, {"min", 60}, {"h", 3600}};
	const char *unit;
	double x;

	if (parse_number(v, &x, &unit))
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (!strcmp(unit, units[i].unit)) {
			*out = x * units[i].factor;
			return 0;
		}
	}
	return -1;
}

/* "1048576", "512K", "10M", "1G", "10MiB", "10MB" (powers of 1024) -> bytes:
 * a number, then nothing, "B", or K/M/G/T alone or followed by "B" or
 * "iB" (any case). Anything else ("10MiBB", "10 MMB") is an error. */
static int parse_size(const char *v, double *out)
{
	static const char scale[] = "KMGT";
	const char *unit, *p;
	double x;

	if (parse_number(v, &x, &unit))
		return -1;
	p = *unit ? strchr(scale, toupper((unsigned char)*unit)) : NULL;
	if (p) {
		x *= pow(1024, (double)(p - scale + 1));
		unit++;
		if (tolower((unsigned char)*unit) == 'i' && tolower((unsigned char)unit[1]) == 'b')
			unit += 2;
		else if (tolower((unsigned char)*unit) == 'b')
			unit++;
	} else if (tolower((unsigned char)*unit) == 'b') {
		unit++;
	}
	if (*unit)
		return -1;
	*out = x;
	return 0;
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off"};

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(v, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

static void join_names(char *buf, size_t len, const char *const *names)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; names[i] && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%s", i ? ", " : "", names[i]);
}

/* Store one value; where names the origin ("FILE [sec] key" or "--set"). */
static int apply(struct config *c, const struct key_def *k, const char *v, const char *where,
		 char *err, size_t errlen)
{
	void *p = (char *)c + k->offset;
	char names[256];
	double x;
	bool b;

	switch (k->type) {
	case T_STR:
		replace_str((char **)p, v);
		return 0;
	case T_INT: {
		char *end;
		long n;

		errno = 0;
		n = strtol(v, &end, 10);
		if (end == v || *end || errno || n < k->min || n > k->max) {
			set_err(err, errlen,
				"%s: '%s' is not valid: expected a whole number from %.0f to %.0f",
				where, v, k->min, k->max);
			return -1;
		}
		*(int *)p = (int)n;
		return 0;
	}
	case T_BOOL:
		if (parse_bool(v, &b)) {
			set_err(err, errlen,
				"%s: '%s' is not valid: expected true or false (also yes/no, "
				"on/off, 1/0)",
				where, v);
			return -1;
		}
		*(bool *)p = b;
		return 0;
	case T_SECONDS:
		if (parse_seconds(v, &x) || x < k->min || x > k->max) {
			set_err(err, errlen,
				"%s: '%s' is not valid: expected a duration from %.0f to %.0f "
				"seconds (e.g. 10, 1.5s, 500ms, 2m)",
				where, v, k->min, k->max);
			return -1;
		}
		*(double *)p = x;
		return 0;
	case T_SIZE:
		if (parse_size(v, &x) || x < k->min || x > k->max) {
			set_err(err, errlen,
				"%s: '%s' is not valid: expected a size in bytes (e.g. 1048576, "
				"512K, 10M, 1G)",
				where, v);
			return -1;
		}
		*(long long *)p = (long long)x;
		return 0;
	case T_ENUM:
		for (int i = 0; k->names[i]; i++) {
			if (!strcasecmp(v, k->names[i])) {
				*(int *)p = i;
				return 0;
			}
		}
		join_names(names, sizeof(names), k->names);
		set_err(err, errlen, "%s: '%s' is not valid: expected one of: %s", where, v, names);
		return -1;
	}
	return -1;
}

static bool valid_env_name(const char *n)
{
	if (!*n || isdigit((unsigned char)*n))
		return false;
	for (; *n; n++)
		if (!isalnum((unsigned char)*n) && *n != '_')
			return false;
	return true;
}

static int set_env(struct config *c, const char *name, const char *value, const char *where,
		   char *err, size_t errlen)
{
	struct env_var *e;

	if (!valid_env_name(name)) {
		set_err(err, errlen,
			"%s: '%s' is not a valid environment variable name: use letters, digits "
			"and '_'",
			where, name);
		return -1;
	}
	for (size_t i = 0; i < c->n_env; i++) {
		if (!strcmp(c->env[i].name, name)) {
			replace_str(&c->env[i].value, value);
			return 0;
		}
	}
	e = realloc(c->env, (c->n_env + 1) * sizeof(*e));
	if (!e) {
		set_err(err, errlen, "out of memory");
		return -1;
	}
	c->env = e;
	if (envcheck_suggest(name)) /* a typo the library would silently ignore */
		fprintf(stderr,
			"tts-launch: warning: %s: %s is not a variable that Hugging Face, "
			"IndexTTS2 or PyTorch read: did you mean %s?\n",
			where, name, envcheck_suggest(name));
	c->env[c->n_env].name = xstrdup(name);
	c->env[c->n_env].value = xstrdup(value);
	c->n_env++;
	return 0;
}

/* Apply section.key=value from any origin; unknown names get a suggestion. */
static int apply_named(struct config *c, const char *section, const char *key, const char *value,
		       const char *origin, char *err, size_t errlen)
{
	char where[512], hint[128];
	const struct key_def *k;

	snprintf(where, sizeof(where), "%s: [%s] %s", origin, section, key);
	if (!known_section(section)) {
		suggest(hint, sizeof(hint), section, sections, N_SECTIONS);
		set_err(err, errlen, "%s: unknown section [%s]%s; sections are: %s", origin,
			section, hint, config_sections());
		return -1;
	}
	k = find_key(section, key);
	if (k && k->offset == OFF(python))
		c->python_set = true;
	if (k)
		return apply(c, k, value, where, err, errlen);
	if (!strcmp(section, "env")) {
		/* iniparser folds keys to lower case; environment variables
		 * written in an INI file are upper-cased back (documented). */
		char name[256];
		size_t i;

		for (i = 0; key[i] && i < sizeof(name) - 1; i++)
			name[i] = (char)toupper((unsigned char)key[i]);
		name[i] = '\0';
		return set_env(c, name, value, where, err, errlen);
	} else {
		const char *cands[N_KEYS];
		size_t n = 0;

		for (size_t i = 0; i < N_KEYS; i++)
			if (!strcmp(keys[i].section, section))
				cands[n++] = keys[i].key;
		suggest(hint, sizeof(hint), key, cands, n);
		set_err(err, errlen, "%s: unknown key '%s' in section [%s]%s", origin, key, section,
			hint);
		return -1;
	}
}

int config_load_file(struct config *c, const char *file, char *err, size_t errlen)
{
	dictionary *d;
	char *buf;
	size_t len;
	int rc = 0;

	buf = config_file_read(file, c->euid == 0, &len, err, errlen);
	if (!buf)
		return -1;
	d = config_file_parse(file, buf, len, err, errlen);
	free(buf);
	if (!d)
		return -1;
	replace_str(&c->source, file);
	/* Walk the raw dictionary: entries are "section" (no value) and
	 * "section:key"; a key outside any section has no ':'. */
	for (ssize_t i = 0; i < d->size && rc == 0; i++) {
		const char *k = d->key[i], *colon;
		char section[128];

		if (!k)
			continue;
		colon = strchr(k, ':');
		if (!*k)
			continue; /* iniparser's section for keys before any [section] */
		if (colon == k) {
			set_err(
			    err, errlen,
			    "%s: key '%s' is outside any section: put it under [app], [env], ...",
			    file, k + 1);
			rc = -1;
			continue;
		}
		if (!colon) {
			if (d->val[i] == NULL) {
				if (!known_section(k)) {
					char hint[128];

					suggest(hint, sizeof(hint), k, sections, N_SECTIONS);
					set_err(err, errlen,
						"%s: unknown section [%s]%s; sections are: %s",
						file, k, hint, config_sections());
					rc = -1;
				}
				continue;
			}
			set_err(
			    err, errlen,
			    "%s: key '%s' is outside any section: put it under [app], [env], ...",
			    file, k);
			rc = -1;
			continue;
		}
		snprintf(section, sizeof(section), "%.*s", (int)(colon - k), k);
		rc = apply_named(c, section, colon + 1, d->val[i] ? d->val[i] : "", file, err,
				 errlen);
	}
	iniparser_freedict(d);
	return rc;
}

int config_set(struct config *c, const char *assignment, char *err, size_t errlen)
{
	const char *dot = strchr(assignment, '.'), *eq = strchr(assignment, '=');
	char section[128], key[256], origin[600];

	if (!dot || !eq || dot > eq || dot == assignment || eq == dot + 1) {
		set_err(err, errlen,
			"--set '%s': expected SECTION.KEY=VALUE (e.g. --set app.port=7861)",
			assignment);
		return -1;
	}
	if (dot - assignment > CONFIG_MAX_NAME || eq - dot - 1 > CONFIG_MAX_NAME) {
		set_err(err, errlen,
			"--set '%.40s...': a section or key name is at most %d characters",
			assignment, CONFIG_MAX_NAME);
		return -1;
	}
	if (strlen(eq + 1) > CONFIG_MAX_SET) {
		set_err(err, errlen, "--set %.*s: the value is longer than %d characters",
			(int)(eq - assignment), assignment, CONFIG_MAX_SET);
		return -1;
	}
	snprintf(section, sizeof(section), "%.*s", (int)(dot - assignment), assignment);
	snprintf(key, sizeof(key), "%.*s", (int)(eq - dot - 1), dot + 1);
	snprintf(origin, sizeof(origin), "--set %s", assignment);
	for (char *p = section; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	{
		char lower[256];
		size_t i;

		for (i = 0; key[i]; i++)
			lower[i] = (char)tolower((unsigned char)key[i]);
		lower[i] = '\0';
		if (!strcmp(section, "env") && !find_key(section, lower))
			/* Unlike the INI file, --set keeps the variable's case. */
			return set_env(c, key, eq + 1, origin, err, errlen);
		return apply_named(c, section, lower, eq + 1, "--set", err, errlen);
	}
}

const char *config_locate(const char *explicit_file)
{
	if (explicit_file)
		return explicit_file;
	if (access("tts-launch.ini", F_OK) == 0)
		return "tts-launch.ini";
	if (access("/etc/tts-launch.ini", F_OK) == 0)
		return "/etc/tts-launch.ini";
	return NULL;
}

char *config_path(const struct config *c, const char *p)
{
	char *out;

	if (!p || !*p)
		return xstrdup("");
	if (p[0] == '/')
		return xstrdup(p);
	if (asprintf(&out, "%s/%s", c->app_dir, p) < 0) {
		perror("tts-launch: out of memory");
		exit(1);
	}
	/* "dir/../x.log" reads better as the real directory, when it exists. */
	if (strstr(p, "..")) {
		char *slash = strrchr(out, '/'), *dir, *clean;

		*slash = '\0';
		dir = realpath(out, NULL);
		*slash = '/';
		if (dir && asprintf(&clean, "%s/%s", dir, slash + 1) >= 0) {
			free(out);
			out = clean;
		}
		free(dir);
	}
	return out;
}

/* Does s hold a word (something other than spaces and tabs)? */
static bool has_word(const char *s) { return s && s[strspn(s, " \t")]; }

/* As root: who runs the service. [service] user unset: the owner of [app]
 * dir, unless that is root (root runs only what root chose: the checkout's
 * webui.py, indextts/ and .venv are its owner's code). An explicit user
 * that is root opts out, with a notice. */
static int decide_user(struct config *c, const struct stat *dir, char *err, size_t errlen)
{
	struct passwd *pw;

	if (c->euid != 0)
		return 0;
	if (*c->user) {
		pw = getpwnam(c->user);
		if (pw && pw->pw_uid == 0 && dir->st_uid != 0 &&
		    asprintf(&c->notice,
			     "[service] user = %s: the service runs as root, although [app] "
			     "dir %s belongs to uid %u (remove the setting to run it as that user)",
			     c->user, c->app_dir, (unsigned)dir->st_uid) < 0)
			c->notice = NULL;
		return 0;
	}
	if (dir->st_uid == 0)
		return 0;
	pw = getpwuid(dir->st_uid);
	if (!pw) {
		set_err(err, errlen,
			"%s: [app] dir %s belongs to uid %u, which has no user account: as root, "
			"the service runs as the directory's owner; set [service] user "
			"(service.user = root "
			"to run it as root)",
			c->source, c->app_dir, (unsigned)dir->st_uid);
		return -1;
	}
	replace_str(&c->user, pw->pw_name);
	c->user_from_app_dir = true;
	return 0;
}

int config_finish(struct config *c, char *err, size_t errlen)
{
	struct stat st;
	char *real;

	if (!*c->app_dir) {
		set_err(err, errlen, "%s: [app] dir is empty: give the IndexTTS2 directory",
			c->source);
		return -1;
	}
	real = realpath(c->app_dir, NULL);
	if (!real) {
		set_err(err, errlen, "%s: [app] dir '%s': %s (set it to the IndexTTS2 directory)",
			c->source, c->app_dir, strerror(errno));
		return -1;
	}
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		set_err(err, errlen,
			"%s: [app] dir '%s' is a file, not a directory: set it to the IndexTTS2 "
			"directory (the one that holds %s)",
			c->source, c->app_dir, has_word(c->script) ? c->script : "webui.py");
		free(real);
		return -1;
	}
	free(c->app_dir);
	c->app_dir = real;
	if (*c->metrics_listen) {
		char why[200];
		unsigned addr;
		unsigned short port;

		if (metrics_parse_listen(c->metrics_listen, &addr, &port, why, sizeof(why)) < 0) {
			set_err(err, errlen, "%s: %s", c->source, why);
			return -1;
		}
	}
	if (!c->python_set && !c->n_command) {
		/* uv's layout: the app's own .venv, when it has one */
		char *venv = config_venv_python(c->app_dir);

		if (venv) {
			free(c->python);
			c->python = venv;
			c->python_venv = true;
		}
	}
	if (!c->n_command) {
		if (!has_word(c->python)) {
			set_err(err, errlen,
				"%s: [app] python is empty: give an interpreter such as "
				"/usr/bin/python3 or 'uv run'",
				c->source);
			return -1;
		}
		if (!has_word(c->script)) {
			set_err(
			    err, errlen,
			    "%s: [app] script is empty: give the script to start, e.g. webui.py",
			    c->source);
			return -1;
		}
	}
	if (!*c->stale_match)
		replace_str(&c->stale_match, c->n_command ? "" : c->script);
	if (*c->user && !getpwnam(c->user)) {
		set_err(err, errlen,
			"%s: [service] user '%s' does not exist: create it or fix the name",
			c->source, c->user);
		return -1;
	}
	if (*c->group && !getgrnam(c->group)) {
		set_err(err, errlen,
			"%s: [service] group '%s' does not exist: create it or fix the name",
			c->source, c->group);
		return -1;
	}
	if ((*c->group) && !*c->user) {
		set_err(err, errlen,
			"%s: [service] group is set without user: set user too, or remove group",
			c->source);
		return -1;
	}
	if (decide_user(c, &st, err, errlen) < 0)
		return -1;
	if (c->mlock_trigger == MLOCK_AT_CALLABLE && !strchr(c->mlock_callable, ':')) {
		set_err(err, errlen,
			"%s: [mlock] callable '%s' is not valid: expected module:qualname, "
			"e.g. indextts.infer_v2:IndexTTS2.__init__",
			c->source, c->mlock_callable);
		return -1;
	}
	if (c->mode == MODE_DAEMON && !*c->pidfile) {
		set_err(err, errlen, "%s: [service] mode = daemon needs a pidfile", c->source);
		return -1;
	}
	if (c->log_max_size > 0 && c->log_max_size < 4096) {
		set_err(
		    err, errlen,
		    "%s: [log] max_size %lld is too small: use at least 4K (or 0 to never rotate)",
		    c->source, c->log_max_size);
		return -1;
	}
	return 0;
}

const char *config_mlock_name(enum mlock_mode m) { return mlock_names[m]; }

json_t *config_to_json(const struct config *c)
{
	json_t *root = json_object(), *vars = json_object(), *cmd = json_null();

	json_object_set_new(root, "source", json_text(c->source ? c->source : ""));
	/* every key of the table, under its section: the effective config */
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct key_def *k = &keys[i];
		const void *p = (const char *)c + k->offset;
		json_t *sec = json_object_get(root, k->section), *v = NULL;

		if (!sec) {
			sec = json_object();
			json_object_set_new(root, k->section, sec);
		}
		switch (k->type) {
		case T_STR:
			v = json_text(*(char *const *)p ? *(char *const *)p : "");
			break;
		case T_INT:
			v = json_integer(*(const int *)p);
			break;
		case T_BOOL:
			v = json_boolean(*(const bool *)p);
			break;
		case T_SECONDS:
			v = json_real(*(const double *)p);
			break;
		case T_SIZE:
			v = json_integer(*(const long long *)p);
			break;
		case T_ENUM:
			v = json_string(k->names[*(const int *)p]);
			break;
		}
		json_object_set_new(sec, k->key, v);
	}
	for (size_t i = 0; i < c->n_env; i++)
		json_object_set_new(vars, c->env[i].name, json_text(c->env[i].value));
	json_object_set_new(json_object_get(root, "env"), "vars", vars);
	if (c->n_command > 0) {
		cmd = json_array();
		for (int i = 0; i < c->n_command; i++)
			json_array_append_new(cmd, json_text(c->command[i]));
	}
	json_object_set_new(root, "command", cmd);
	return root;
}

const char *config_env(const void *cfg, const char *name)
{
	const struct config *c = cfg;

	for (size_t i = 0; c && i < c->n_env; i++)
		if (!strcmp(c->env[i].name, name))
			return c->env[i].value;
	return NULL;
}

const char *config_service_env(const void *cfg, const char *name)
{
	const char *v = config_env(cfg, name);

	return v ? v : getenv(name);
}
