/* config: one struct with defaults, filled from the INI file, then the
 * command line. Every key is listed in config.c's table and documented in
 * conf/tts-launch.ini. */
#ifndef TTS_CONFIG_H
#define TTS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum run_mode { MODE_FOREGROUND, MODE_DAEMON };
enum stale_policy { STALE_KILL, STALE_FAIL, STALE_IGNORE };
enum stale_scope { SCOPE_APP, SCOPE_ANY };
enum mlock_mode { MLOCK_OFF, MLOCK_ALL, MLOCK_MODELS, MLOCK_ONFAULT };
enum mlock_trigger { MLOCK_AT_LISTEN, MLOCK_AT_SIGNAL, MLOCK_AT_DELAY, MLOCK_AT_CALLABLE };
enum mlock_signal { MLOCK_SIGUSR2, MLOCK_SIGUSR1 };
enum progress_mode { PROGRESS_AUTO, PROGRESS_TTY, PROGRESS_LOG, PROGRESS_OFF };
/* [trace] syscalls: every syscall of the host (raw sys_enter/sys_exit:
 * exact counts) or per-syscall tracepoints on the rare calls and libc's
 * read/write family in the tree (cheap; exact is the default: docs/timeline.md,
 * "Syscalls: exact or cheap") */
enum trace_syscalls { SYSCALLS_EXACT, SYSCALLS_CHEAP };

struct env_var {
	char *name;
	char *value;
};

struct config {
	char *source; /* file the settings came from, or "(built-in defaults)" */

	/* [app] */
	char *app_dir;	  /* absolute after config_finish() */
	char *python;	  /* interpreter or runner, split on spaces ("uv run") */
	bool python_set;  /* [app] python given (file or --set) */
	bool python_venv; /* unset, and the app's .venv/bin/python is used */
	char *script;	  /* webui.py */
	char *args;	  /* extra arguments, split on spaces */
	char *host;
	int port; /* 0: no port (a -- COMMAND without one) */
	char *model_dir;

	/* [env] */
	char *pythonpath; /* additions, ':'-separated, relative to app_dir */
	struct env_var *env;
	size_t n_env;

	/* [stale] */
	char *stale_match; /* substring of the command line; default: script */
	enum stale_policy stale_policy;
	enum stale_scope stale_scope;
	double stale_grace; /* seconds */

	/* [log] */
	char *log_file;		/* relative to app_dir; "" = no log file */
	long long log_max_size; /* bytes, 0 = never rotate */
	int log_backups;

	/* [service] */
	char *user;
	char *group;
	enum run_mode mode;
	char *pidfile;	      /* relative to app_dir */
	double ready_timeout; /* seconds; only warns */
	double stop_grace;    /* seconds between SIGTERM and SIGKILL */

	/* [trace] */
	bool trace;
	char *timeline;		/* relative to app_dir */
	double settle;		/* seconds after ready before the timeline is written */
	double requests_window; /* seconds after ready during which requests are recorded */
	bool python_usdt;
	bool keep_loaded; /* [trace] keep_loaded: programs kept loaded between runs (progcache.h) */
	double stall;	  /* seconds without progress before saying what it waits on; 0: off */
	enum progress_mode progress; /* live download progress (progress.h) */
	enum trace_syscalls syscalls;

	/* [mlock] (docs/mlock.md) */
	enum mlock_mode mlock;
	enum mlock_trigger mlock_trigger;
	char *mlock_callable;		/* "module:qualname" for trigger = callable */
	double mlock_delay;		/* seconds after exec (trigger = delay) */
	enum mlock_signal mlock_signal; /* trigger = signal */
	char *mlock_patterns;		/* model file globs (mode = models) */
	long long mlock_limit;		/* bytes; 0: mlock_max_percent of MemAvailable */
	int mlock_max_percent;
	bool mlock_blocking;  /* lock inside listen() instead of a thread */
	char *metrics_listen; /* [metrics] listen: HOST:PORT of /metrics; "" = off */

	/* decided by config_finish() */
	uid_t euid;		/* who tts-launch runs as (geteuid(); tests set it) */
	bool user_from_app_dir; /* root, user unset: [service] user = the owner of [app] dir */
	char *notice;		/* a warning for `run` to print (service.user = root), or NULL */

	/* command line only */
	char **command; /* -- COMMAND ARG...: replaces python+script+args */
	int n_command;
	bool print_env;
	int verbose;
};

#define CONFIG_ERR_MAX 1024

/* Limits on a config file (docs in conf/tts-launch.ini): bigger is an error. */
#define CONFIG_MAX_BYTES (1024 * 1024)
#define CONFIG_MAX_LINE	 1000 /* characters per line (iniparser's own limit is 1024) */
#define CONFIG_MAX_NAME	 64   /* characters in a section or key name */
#define CONFIG_MAX_KEYS	 1000 /* keys in one file */
#define CONFIG_MAX_SET	 4096 /* characters in one --set value */

/* Defaults: start webui.py in the current directory the way IndexTTS2's
 * README does. */
void config_defaults(struct config *c);

/* Load FILE into c. Returns 0, or -1 with a message in err naming the file,
 * section and key and what is expected. FILE must be a regular text file of
 * at most CONFIG_MAX_BYTES, without duplicate keys; as root (c->euid == 0)
 * it must be owned by root and not writable by group or others. */
int config_load_file(struct config *c, const char *file, char *err, size_t errlen);

/* "app, env, ...": the sections, for messages. */
const char *config_sections(void);

/* Apply one "section.key=value" override (--set). */
int config_set(struct config *c, const char *assignment, char *err, size_t errlen);

/* Find the file to use: explicit, ./tts-launch.ini, /etc/tts-launch.ini or
 * NULL for built-in defaults. Returns a pointer to a static or given string. */
const char *config_locate(const char *explicit_file);

/* Cross-option checks, path resolution against app_dir. As root with
 * [service] user unset, the user becomes the owner of [app] dir (when that
 * is not root): root runs only what root chose. */
int config_finish(struct config *c, char *err, size_t errlen);

/* uv's layout: the interpreter of the app's own virtual environment. */
#define CONFIG_VENV_PYTHON ".venv/bin/python"

/* app_dir/.venv/bin/python (malloc'd) when it is an executable file, else
 * NULL. config_finish() uses it when [app] python is unset. */
char *config_venv_python(const char *app_dir);

/* The interpreter's file as exec finds it (the first word of [app] python:
 * on the service's PATH without a '/', else relative to app_dir) in out;
 * -1 with the message `run` and `doctor` both give. */
int config_app_interpreter(const struct config *c, char *out, size_t outlen, char *err,
			   size_t errlen);
/* The script (first word of [app] script) in app_dir, or "-m" as is. */
int config_app_script(const struct config *c, char *out, size_t outlen, char *err, size_t errlen);

/* The configured app can start: the interpreter (first word of [app]
 * python) is an executable file (found on the service's PATH when it has no
 * '/', else relative to app_dir) and the script (first word of [app]
 * script, unless it is an option such as -m) exists in app_dir. Checked by
 * `run` before anything is killed (exit 2, DESIGN.md); not for a --
 * COMMAND, whose failed exec is 126/127. */
int config_check_app(const struct config *c, char *err, size_t errlen);

/* Build the service's argv (NULL-terminated, malloc'd) from the config. */
char **config_service_argv(const struct config *c);

/* Resolve a path relative to app_dir (malloc'd). */
char *config_path(const struct config *c, const char *p);

/* [env] name's value, or NULL. run copies the client settings it inherits
 * into [env] (envcheck_client_setting), so for those this is what the
 * service sees and what the timeline records. cfg is a struct config (void
 * for hfcache's env callbacks). */
const char *config_env(const void *cfg, const char *name);

/* What the service will see for name: [env], else the launcher's own
 * environment, which the service inherits (spawn_build_env). */
const char *config_service_env(const void *cfg, const char *name);

const char *config_mlock_name(enum mlock_mode m);

/* The effective config as JSON: {source, SECTION: {KEY: value...}, env.vars,
 * command}, every key of the table (the timeline's launcher.config). */
typedef struct json_t json_t;
json_t *config_to_json(const struct config *c);

void config_free(struct config *c);

#endif
