/* tts-launch: command line. A table of verbs, each with the options it
 * accepts (systemd's analyze.c style); usage and errors come from the
 * tables. Builds the config (defaults < INI file < --set < flags) and
 * dispatches. */
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomicfile.h"
#include "clock.h"
#include "compare.h"
#include "config.h"
#include "control.h"
#include "diagnose.h"
#include "doctor.h"
#include "envcheck.h"
#include "lasttl.h"
#include "mlock.h"
#include "redact.h"
#include "render.h"
#include "report.h"
#include "spawn.h"
#include "supervise.h"
#include "timeline.h"

extern char **environ;

#define EXIT_USAGE 2

enum opt_id {
	OPT_CONFIG = 'c',
	OPT_OUTPUT = 'o',
	OPT_VERBOSE = 'v',
	OPT_HELP = 'h',
	OPT_SET = 256,
	OPT_TIMELINE,
	OPT_MLOCK,
	OPT_NO_TRACE,
	OPT_FG,
	OPT_DAEMON,
	OPT_PRINT_ENV,
	OPT_VERSION,
	OPT_FORMAT,
	OPT_CHECK_IO,
	OPT_CHECK_DOWNLOAD,
	OPT_CHECK_MEMORY,
};

/* Every option of every verb: the getopt table and the help are built
 * from it. arg: the value's name (NULL: none); a verb may show --format's
 * choices instead. */
static const struct opt_def {
	enum opt_id id;
	const char *name;
	int has_arg;
	const char *arg;
	const char *help;
} opt_defs[] = {
    {OPT_CONFIG, "config", required_argument, "FILE",
     "INI file (default: ./tts-launch.ini, else\n"
     "/etc/tts-launch.ini, else built-in defaults);\n"
     "as root: root's own, not writable by others"},
    {OPT_SET, "set", required_argument, "SECTION.KEY=VALUE",
     "override one key, e.g. --set app.port=7861\n(repeatable)"},
    {OPT_TIMELINE, "timeline", required_argument, "PATH",
     "where to write the timeline JSON ('' for none)"},
    {OPT_MLOCK, "mlock", optional_argument, "all|models|onfault|off",
     "lock model pages once loaded: all (the\ndefault), models, onfault, off"},
    {OPT_NO_TRACE, "no-trace", no_argument, NULL, "start without eBPF tracing"},
    {OPT_FG, "foreground", no_argument, NULL,
     "stay attached; output also on the terminal (default)"},
    {OPT_DAEMON, "daemon", no_argument, NULL,
     "detach; `tts-launch stop|status` work from\nanother shell"},
    {OPT_PRINT_ENV, "print-env", optional_argument, "secrets",
     "print the command, directory and environment\nthe service would get, then exit "
     "(secret\nvalues as ***, unless --print-env=secrets)"},
    {OPT_VERBOSE, "verbose", no_argument, NULL, "timings, BPF verification, libbpf's messages"},
    {OPT_FORMAT, "format", required_argument, "FORMAT",
     "the output format: one of those in the\ncommand's synopsis above"},
    {OPT_OUTPUT, "output", required_argument, "FILE", "write FILE atomically instead of stdout"},
    {OPT_CHECK_IO, "check-io", no_argument, NULL, "only the file and disk rules"},
    {OPT_CHECK_DOWNLOAD, "check-download", no_argument, NULL, "only the download rules"},
    {OPT_CHECK_MEMORY, "check-memory", no_argument, NULL, "only the memory rules"},
    {OPT_HELP, "help", no_argument, NULL, "this text"},
    {OPT_VERSION, "version", no_argument, NULL, "the version"},
};
#define N_OPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))

/* What the command line said, for the verb's handler. */
struct cmdline {
	const struct verb *verb;
	int argc;
	char **argv;
	const char *file, *format, *output, *timeline;
	const char **sets;
	int nsets;
	int mode, no_trace, print, verbose, mlock;
	unsigned checks;
	const char *args[2]; /* positional arguments */
	int nargs;
	char **command; /* after "--" */
	int n_command;
};

static int verb_run(struct cmdline *cl);
static int verb_config(struct cmdline *cl);
static int verb_report(struct cmdline *cl);
static int verb_diagnose(struct cmdline *cl);

/* The verbs. opts: what each accepts (0-terminated); min/max_args: its
 * positional arguments, shown as args; formats: --format's choices;
 * raw: parses its own command line (argv from the verb on). */
static const struct verb {
	const char *name;
	const char *args;
	int min_args, max_args;
	bool dashdash; /* takes -- COMMAND [ARG...] */
	const char *formats;
	const enum opt_id opts[12];
	const char *summary;
	int (*run)(struct cmdline *cl);
	int (*raw)(int argc, char **argv);
} verbs[] = {
    {"run",
     NULL,
     0,
     0,
     true,
     NULL,
     {OPT_CONFIG, OPT_SET, OPT_TIMELINE, OPT_MLOCK, OPT_NO_TRACE, OPT_FG, OPT_DAEMON, OPT_PRINT_ENV,
      OPT_VERBOSE, OPT_HELP},
     "(default) start the service and supervise it until it exits;\n"
     "-- COMMAND [ARG...] runs COMMAND instead of the configured app\n"
     "(no port is watched unless --set app.port=N: ready = its first\n"
     "listen)",
     verb_run,
     NULL},
    {"stop",
     NULL,
     0,
     0,
     false,
     NULL,
     {OPT_CONFIG, OPT_SET, OPT_HELP},
     "stop the service started by `run` (SIGTERM, grace, SIGKILL)",
     verb_config,
     NULL},
    {"status",
     NULL,
     0,
     0,
     false,
     NULL,
     {OPT_CONFIG, OPT_SET, OPT_HELP},
     "is it running? (exit 0 running, 1 dead, 3 not running, 4 not trusted)",
     verb_config,
     NULL},
    {"doctor",
     NULL,
     0,
     0,
     false,
     NULL,
     {OPT_CONFIG, OPT_SET, OPT_HELP},
     "can this machine trace, and can the app start? (exit 1 on FAIL)",
     verb_config,
     NULL},
    {"report",
     "TIMELINE.json",
     1,
     1,
     false,
     RENDER_FORMATS,
     {OPT_FORMAT, OPT_OUTPUT, OPT_HELP},
     "a saved timeline as: text (the summary), json, perfetto (Chrome\n"
     "trace-event JSON for ui.perfetto.dev), svg (a plot), html (the plot\n"
     "with tables of files and findings), prom (Prometheus text format);\n"
     "-o FILE writes FILE atomically instead of stdout",
     verb_report,
     NULL},
    {"diagnose",
     "[TIMELINE.json]",
     0,
     1,
     false,
     "text|json",
     {OPT_CHECK_IO, OPT_CHECK_DOWNLOAD, OPT_CHECK_MEMORY, OPT_FORMAT, OPT_CONFIG, OPT_SET,
      OPT_HELP},
     "findings over a timeline (default: the last one written, [trace]\n"
     "timeline of the config), each with its evidence and the fix;\n"
     "--check-io|download|memory select rules (default: all);\n"
     "exit 0 clean, 1 warnings, 2 errors or an unreadable timeline\n"
     "(docs/diagnose.md)",
     verb_diagnose,
     NULL},
    {"compare",
     "BEFORE.json AFTER.json",
     2,
     2,
     false,
     "text|json",
     {OPT_FORMAT, OPT_HELP},
     "two saved timelines side by side: phases, start-up, page faults,\n"
     "request latency p50/p99 and spread, mlock outcome (docs/compare.md)",
     NULL,
     compare_command},
};
#define N_VERBS (sizeof(verbs) / sizeof(verbs[0]))

static const char about_text[] =
    "Starts IndexTTS2's webui.py the way start_app.sh did (ends the stale instance,\n"
    "sets PYTHONPATH, starts it with its output in a log file) under eBPF tracing\n"
    "from its first instruction, and writes a startup timeline.\n";

static const char exit_text[] =
    "Exit codes: the service's own code when it exits (128+N when killed by\n"
    "signal N); 126/127 when it cannot be executed; 2 bad usage or config\n"
    "(nothing killed or started); 3 the port is held by a process that is not\n"
    "a stale instance.\n"
    "As root with [service] user unset, the service runs as the owner of [app] dir.\n"
    "Every config key is documented in conf/tts-launch.ini and README.md.\n";

static const struct opt_def *opt_def(enum opt_id id)
{
	for (size_t i = 0; i < N_OPTS; i++)
		if (opt_defs[i].id == id)
			return &opt_defs[i];
	return NULL;
}

static bool verb_takes(const struct verb *v, enum opt_id id)
{
	for (size_t i = 0; i < sizeof(v->opts) / sizeof(v->opts[0]) && v->opts[i]; i++)
		if (v->opts[i] == id)
			return true;
	return false;
}

static const struct verb *find_verb(const char *name)
{
	for (size_t i = 0; i < N_VERBS; i++)
		if (!strcmp(verbs[i].name, name))
			return &verbs[i];
	return NULL;
}

/* "-c FILE", "--set SECTION.KEY=VALUE", "--mlock[=MODE]", "--format text|json" */
static void opt_synopsis(char *buf, size_t len, const struct opt_def *o, const struct verb *v)
{
	const char *arg = o->id == OPT_FORMAT && v && v->formats ? v->formats : o->arg;

	if (o->id < 256)
		snprintf(buf, len, "-%c%s%s", (char)o->id, arg ? " " : "", arg ? arg : "");
	else if (o->has_arg == optional_argument)
		snprintf(buf, len, "--%s[=%s]", o->name, arg);
	else
		snprintf(buf, len, "--%s%s%s", o->name, arg ? " " : "", arg ? arg : "");
}

/* "  tts-launch report TIMELINE.json [--format ...] [-o FILE]", wrapped. */
static void print_synopsis(FILE *f, const struct verb *v, bool optional_name)
{
	char word[160], item[170];
	int col;

	col = fprintf(f, "  tts-launch %s%s%s", optional_name ? "[" : "", v->name,
		      optional_name ? "]" : "");
	if (v->args)
		col += fprintf(f, " %s", v->args);
	for (size_t i = 0; i < sizeof(v->opts) / sizeof(v->opts[0]) && v->opts[i]; i++) {
		const struct opt_def *o = opt_def(v->opts[i]);

		if (o->id == OPT_HELP)
			continue;
		opt_synopsis(word, sizeof(word), o, v);
		snprintf(item, sizeof(item), "[%s]%s", word, o->id == OPT_SET ? "..." : "");
		if (col + 1 + (int)strlen(item) > 80) {
			fprintf(f, "\n            ");
			col = 12;
		}
		col += fprintf(f, " %s", item);
	}
	if (v->dashdash) {
		if (col + 23 > 80)
			fprintf(f, "\n            ");
		fprintf(f, " [-- COMMAND [ARG...]]");
	}
	fputc('\n', f);
}

/* text's lines, each but the first after an indent of width spaces (the
 * first line's column is the caller's). */
static void print_lines(FILE *f, const char *text, int width)
{
	for (;;) {
		size_t n = strcspn(text, "\n");

		fprintf(f, "%.*s\n", (int)n, text);
		if (!text[n])
			break;
		text += n + 1;
		fprintf(f, "%*s", width, "");
	}
}

/* One option's help: "  -c, --config FILE    text", continuation lines indented. */
static void print_opt_help(FILE *f, const struct opt_def *o, const struct verb *v)
{
	char syn[160], head[200];

	opt_synopsis(syn, sizeof(syn), o, v);
	if (o->id < 256)
		snprintf(head, sizeof(head), "  -%c, --%s%s%s", (char)o->id, o->name,
			 o->arg ? " " : "", o->arg ? o->arg : "");
	else
		snprintf(head, sizeof(head), "      %s", syn);
	fprintf(f, "%-24s", head);
	if (strlen(head) >= 24)
		fprintf(f, "\n%-24s", "");
	print_lines(f, o->help, 24);
}

/* tts-launch --help: every verb and every option. */
static void usage_all(FILE *f)
{
	fputs("Usage:\n", f);
	for (size_t i = 0; i < N_VERBS; i++)
		print_synopsis(f, &verbs[i], i == 0);
	fprintf(f, "\n%s\nCommands:\n", about_text);
	for (size_t i = 0; i < N_VERBS; i++) {
		fprintf(f, "  %-10s", verbs[i].name);
		print_lines(f, verbs[i].summary, 12);
	}
	fputs("\nOptions (`tts-launch COMMAND --help` lists each command's own):\n", f);
	for (size_t i = 0; i < N_OPTS; i++)
		print_opt_help(f, &opt_defs[i], NULL);
	fprintf(f, "\n%s", exit_text);
}

/* tts-launch VERB --help: its synopsis, what it does, its options. */
static void usage_verb(FILE *f, const struct verb *v)
{
	fputs("Usage:\n", f);
	print_synopsis(f, v, !strcmp(v->name, "run"));
	fputc('\n', f);
	print_lines(f, v->summary, 0);
	fputs("\nOptions:\n", f);
	for (size_t i = 0; i < sizeof(v->opts) / sizeof(v->opts[0]) && v->opts[i]; i++)
		print_opt_help(f, opt_def(v->opts[i]), v);
	if (!strcmp(v->name, "run"))
		fprintf(f, "\n%s", exit_text);
}

/* the verb being parsed, for the hint after a usage error */
static const struct verb *current_verb;

/* A config error may quote a --set value or an [env] line: redacted like
 * everything else tts-launch prints (redact.h). */
static void config_error(const char *err)
{
	char *r = redact_text(err);

	fprintf(stderr, "tts-launch: error: %s\n",
		r ? r : "(bad config; the message held a secret)");
	free(r);
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "tts-launch: ");
	fprintf(stderr, fmt, arg);
	if (current_verb)
		fprintf(stderr, "\nTry 'tts-launch %s --help'.\n", current_verb->name);
	else
		fprintf(stderr, "\nTry 'tts-launch --help'.\n");
	return EXIT_USAGE;
}

/* [env] name = value, unless [env] already sets name. */
static void env_default(struct config *c, const char *name, const char *value)
{
	char err[CONFIG_ERR_MAX], set[4200];

	for (size_t k = 0; k < c->n_env; k++)
		if (!strcmp(c->env[k].name, name))
			return;
	snprintf(set, sizeof(set), "env.%s=%s", name, value);
	if (config_set(c, set, err, sizeof(err)) < 0)
		fprintf(stderr, "tts-launch: warning: %s\n", err);
}

/* The service inherits our environment: the Hugging Face settings (and
 * HOME, the default cache's root) it will see go into [env] too, so that the
 * timeline's effective config, the tracer's cache classes and diagnose all
 * reason about the caches the service really uses. */
static struct config *inherit_hf_env(struct config *c)
{
	const char *name;

	for (size_t i = 0; (name = envcheck_client_setting(i)); i++)
		if (getenv(name))
			env_default(c, name, getenv(name));
	if (getenv("HOME"))
		env_default(c, "HOME", getenv("HOME"));
	return c;
}

/* With [service] user, the service gets that user's HOME, USER and
 * LOGNAME (as `runuser -l` or systemd's User= give), not ours: its caches
 * default under its own home. [env] settings win. */
static struct config *user_env(struct config *c)
{
	struct passwd *pw;

	if (!c->user || !*c->user || !(pw = getpwnam(c->user)))
		return c; /* a missing user is reported when the service is spawned */
	env_default(c, "HOME", pw->pw_dir);
	env_default(c, "USER", pw->pw_name);
	env_default(c, "LOGNAME", pw->pw_name);
	return c;
}

static int print_env(const struct config *c, bool secrets)
{
	char **argv = config_service_argv(c);
	char **envp = spawn_build_env(c, environ);
	char **shown = secrets ? NULL : redact_argv(argv, -1);
	struct mlock_ctl m = MLOCK_CTL_INIT;
	char err[512];

	/* with mlock on, the shim's LD_PRELOAD and settings, as run adds them */
	if (mlock_prepare(&m, c, &envp, err, sizeof(err)) < 0)
		fprintf(stderr, "tts-launch: warning: %s\n", err);
	mlock_free(&m);
	if (!secrets && !shown) {
		fprintf(stderr, "tts-launch: error: out of memory\n");
		spawn_env_free(argv);
		spawn_env_free(envp);
		return 1;
	}

	printf("# command:");
	for (char **a = secrets ? argv : shown; *a; a++)
		printf(" %s", *a);
	printf("\n# directory: %s\n", c->app_dir);
	for (char **e = envp; *e; e++) {
		char *r = secrets ? NULL : redact_env_entry(*e);

		printf("%s\n", secrets ? *e : r ? r : REDACTED);
		free(r);
	}
	redact_argv_free(shown);
	spawn_env_free(argv);
	spawn_env_free(envp);
	return 0;
}

/* The config for verbs that need one: defaults < file < --set < flags,
 * fully validated (exit 2 before anything is killed or started). */
static int build_config(struct cmdline *cl, struct config *c)
{
	char err[CONFIG_ERR_MAX];
	const char *file;

	config_defaults(c);
	file = config_locate(cl->file);
	if (file && config_load_file(c, file, err, sizeof(err)) < 0)
		goto fail;
	if (cl->n_command) {
		/* A command after "--" replaces the configured app. */
		c->command = cl->command;
		c->n_command = cl->n_command;
		c->port = 0; /* unless --set app.port below */
	}
	for (int i = 0; i < cl->nsets; i++)
		if (config_set(c, cl->sets[i], err, sizeof(err)) < 0)
			goto fail;
	if (cl->timeline) {
		free(c->timeline);
		c->timeline = strdup(cl->timeline);
	}
	if (cl->no_trace)
		c->trace = false;
	if (cl->mode >= 0)
		c->mode = (enum run_mode)cl->mode;
	if (cl->mlock >= 0)
		c->mlock = (enum mlock_mode)cl->mlock;
	c->verbose = cl->verbose;
	c->print_env = cl->print;
	if (config_finish(c, err, sizeof(err)) < 0)
		goto fail;
	return 0;
fail:
	config_error(err);
	c->command = NULL;
	config_free(c);
	return -1;
}

static void done_config(struct config *c)
{
	c->command = NULL; /* argv's, not ours */
	config_free(c);
}

static int verb_run(struct cmdline *cl)
{
	char err[CONFIG_ERR_MAX];
	struct config c;
	int rc;

	if (build_config(cl, &c) < 0)
		return EXIT_USAGE;
	if (c.notice)
		fprintf(stderr, "tts-launch: warning: %s\n", c.notice);
	/* a missing script or interpreter is a config error: nothing killed */
	if (!cl->print && config_check_app(&c, err, sizeof(err)) < 0) {
		config_error(err);
		done_config(&c);
		return EXIT_USAGE;
	}
	if (cl->print)
		rc = print_env(user_env(&c), cl->print == 2);
	else
		rc = supervise_run(inherit_hf_env(user_env(&c)), cl->argc, cl->argv);
	done_config(&c);
	return rc;
}

/* stop, status, doctor: the config, then the verb. */
static int verb_config(struct cmdline *cl)
{
	struct config c;
	int rc;

	if (build_config(cl, &c) < 0)
		return EXIT_USAGE;
	if (!strcmp(cl->verb->name, "stop"))
		rc = control_stop(&c);
	else if (!strcmp(cl->verb->name, "status"))
		rc = control_status(&c);
	else
		rc = doctor_run(&c);
	done_config(&c);
	return rc;
}

static int verb_report(struct cmdline *cl)
{
	const char *format = cl->format ? cl->format : "text";
	const struct renderer *r = render_find(format);
	char choices[256], msg[320];

	if (!r) {
		render_format_choices(choices, sizeof(choices));
		snprintf(msg, sizeof(msg), "unknown --format '%%s': expected %s", choices);
		return usage_error(msg, format);
	}
	return report_write(cl->args[0], r, cl->output);
}

static int verb_diagnose(struct cmdline *cl)
{
	const char *format = cl->format ? cl->format : "text";
	struct config c;
	char *tp;
	int rc;

	if (strcmp(format, "text") && strcmp(format, "json"))
		return usage_error("unknown --format '%s': expected text or json", format);
	if (cl->nargs)
		return diagnose_command(cl->args[0], cl->checks, format);
	/* the last timeline `run` wrote with this config */
	if (build_config(cl, &c) < 0)
		return EXIT_USAGE;
	tp = c.timeline && *c.timeline ? config_path(&c, c.timeline) : NULL;
	if (!c.source || *c.source == '(') {
		/* no config here or in /etc: the last timeline a run of this
		 * machine wrote (lasttl.h; after `make demo`, the demo's), said */
		char last[4096], conf[4096], cwd[4096];

		if ((!tp || access(tp, F_OK) < 0) && getcwd(cwd, sizeof(cwd)) &&
		    lasttl_read(cwd, last, sizeof(last), conf, sizeof(conf)) == 0 &&
		    access(last, F_OK) == 0) {
			fprintf(stderr,
				"tts-launch: diagnose: no config file here or in /etc: the last "
				"timeline a run started here wrote, %s (config %s)\n",
				last, *conf ? conf : "none");
			free(tp);
			rc = diagnose_command(last, cl->checks, format);
			done_config(&c);
			return rc;
		}
	}
	if (tp && access(tp, F_OK) < 0 && errno == ENOENT) {
		/* say which config named it, and how to name another */
		fprintf(stderr,
			"tts-launch: diagnose: no timeline at %s ([trace] timeline of %s): no run "
			"has written one there yet; give TIMELINE.json, or the config the run used "
			"(-c FILE; the demo's: tts-launch diagnose -c conf/demo.ini)\n",
			tp, c.source);
		rc = 2;
	} else if (tp)
		rc = diagnose_command(tp, cl->checks, format);
	else
		rc =
		    usage_error("%s", "diagnose needs a TIMELINE.json ([trace] timeline is empty)");
	free(tp);
	done_config(&c);
	return rc;
}

/* "--format" or "-o/--output", as the user may have written it */
static void opt_name(char *buf, size_t len, const struct opt_def *o)
{
	if (o->id < 256)
		snprintf(buf, len, "-%c/--%s", (char)o->id, o->name);
	else
		snprintf(buf, len, "--%s", o->name);
}

/* An option that is not the verb's: say whose it is. */
static int not_this_verbs(const struct verb *v, const struct opt_def *o)
{
	char name[64], owners[128] = "";
	size_t off = 0;

	opt_name(name, sizeof(name), o);
	for (size_t i = 0; i < N_VERBS; i++)
		if (verb_takes(&verbs[i], o->id) && off < sizeof(owners))
			off += (size_t)snprintf(owners + off, sizeof(owners) - off, "%s%s",
						off ? ", " : "", verbs[i].name);
	fprintf(stderr, "tts-launch: option %s is not valid for '%s'", name, v->name);
	if (*owners)
		fprintf(stderr, " (it is an option of: %s)", owners);
	fprintf(stderr, "\nTry 'tts-launch %s --help'.\n", v->name);
	return EXIT_USAGE;
}

/* Parse argv[first..] for verb v into cl. Returns -1 to go on, else the
 * exit code (--help, a usage error). */
static int parse_options(const struct verb *v, int argc, char **argv, int first, bool named,
			 struct cmdline *cl)
{
	struct option long_opts[N_OPTS + 1];
	const char *shorts = "+:c:o:vh";

	for (size_t i = 0; i < N_OPTS; i++)
		long_opts[i] = (struct option){opt_defs[i].name, opt_defs[i].has_arg, NULL,
					       (int)opt_defs[i].id};
	long_opts[N_OPTS] = (struct option){NULL, 0, NULL, 0};
	opterr = 0;
	optind = first;
	for (;;) {
		int prev = optind, opt;
		const struct opt_def *o;

		opt = getopt_long(argc, argv, shorts, long_opts, NULL);
		if (opt == -1) {
			if (optind >= argc && !(optind == prev + 1 && !strcmp(argv[prev], "--")))
				break;
			if (optind == prev + 1 && !strcmp(argv[prev], "--")) {
				/* "--": a COMMAND for run, else the rest are arguments */
				if (v->dashdash) {
					if (optind >= argc)
						return usage_error(
						    "%s",
						    "-- needs a COMMAND to run: "
						    "tts-launch run [OPTIONS] -- COMMAND [ARG...]");
					cl->command = &argv[optind];
					cl->n_command = argc - optind;
					break;
				}
				for (; optind < argc; optind++) {
					if (cl->nargs == v->max_args)
						goto extra;
					cl->args[cl->nargs++] = argv[optind];
				}
				break;
			}
			/* a word among the options */
			if (cl->nargs == v->max_args)
				goto extra;
			cl->args[cl->nargs++] = argv[optind++];
			continue;
		}
		if (opt == '?') {
			char shown[3] = {'-', (char)optopt, '\0'};

			return usage_error("unknown option '%s'",
					   optopt > 0 && optopt < 256 ? shown : argv[optind - 1]);
		}
		if (opt == ':')
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		o = opt_def((enum opt_id)opt);
		if (!o)
			return usage_error("unknown option '%s'", argv[optind - 1]);
		if (o->id == OPT_VERSION) {
			if (named)
				return usage_error("%s",
						   "--version goes alone: tts-launch --version");
			printf("tts-launch %s\n", TTS_LAUNCH_VERSION);
			return 0;
		}
		if (o->id == OPT_HELP) {
			if (named)
				usage_verb(stdout, v);
			else
				usage_all(stdout);
			return 0;
		}
		if (!verb_takes(v, o->id))
			return not_this_verbs(v, o);
		switch (o->id) {
		case OPT_CONFIG:
			cl->file = optarg;
			break;
		case OPT_SET:
			cl->sets[cl->nsets++] = optarg;
			break;
		case OPT_TIMELINE:
			cl->timeline = optarg;
			break;
		case OPT_MLOCK:
			if (!optarg || !strcmp(optarg, "all"))
				cl->mlock = MLOCK_ALL;
			else if (!strcmp(optarg, "models"))
				cl->mlock = MLOCK_MODELS;
			else if (!strcmp(optarg, "onfault"))
				cl->mlock = MLOCK_ONFAULT;
			else if (!strcmp(optarg, "off"))
				cl->mlock = MLOCK_OFF;
			else
				return usage_error("unknown --mlock mode '%s': expected all, "
						   "models, onfault or off",
						   optarg);
			break;
		case OPT_NO_TRACE:
			cl->no_trace = 1;
			break;
		case OPT_FG:
			cl->mode = MODE_FOREGROUND;
			break;
		case OPT_DAEMON:
			cl->mode = MODE_DAEMON;
			break;
		case OPT_PRINT_ENV:
			if (optarg && strcmp(optarg, "secrets"))
				return usage_error(
				    "unknown --print-env value '%s': expected secrets (or none)",
				    optarg);
			cl->print = optarg ? 2 : 1;
			break;
		case OPT_FORMAT:
			cl->format = optarg;
			break;
		case OPT_OUTPUT:
			cl->output = optarg;
			break;
		case OPT_CHECK_IO:
			cl->checks |= DIAG_IO;
			break;
		case OPT_CHECK_DOWNLOAD:
			cl->checks |= DIAG_DOWNLOAD;
			break;
		case OPT_CHECK_MEMORY:
			cl->checks |= DIAG_MEMORY;
			break;
		case OPT_VERBOSE:
			cl->verbose++;
			break;
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (cl->nargs < v->min_args) {
		fprintf(stderr, "tts-launch: %s needs %s%s\n", v->name,
			v->min_args == 1 ? "a " : "", v->args);
		fprintf(stderr, "Try 'tts-launch %s --help'.\n", v->name);
		return EXIT_USAGE;
	}
	return -1;
extra:
	if (v->dashdash)
		return usage_error("unexpected argument '%s' (a command to run goes after --)",
				   argv[optind]);
	fprintf(stderr, "tts-launch: unexpected argument '%s': %s takes %s%s\n", argv[optind],
		v->name, v->max_args ? "" : "no arguments", v->max_args ? v->args : "");
	fprintf(stderr, "Try 'tts-launch %s --help'.\n", v->name);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	struct cmdline cl = {.argc = argc, .argv = argv, .mode = -1, .mlock = -1};
	const struct verb *v = &verbs[0];
	bool named = false;
	int rc;

	clock_init();
	if (argc > 1 && argv[1][0] != '-') {
		v = find_verb(argv[1]);
		if (!v) {
			char names[160];
			size_t off = 0;

			for (size_t i = 0; i < N_VERBS; i++)
				off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s",
							i ? (i + 1 == N_VERBS ? " or " : ", ") : "",
							verbs[i].name);
			fprintf(stderr, "tts-launch: unknown command '%s': expected %s\n", argv[1],
				names);
			fprintf(stderr, "Try 'tts-launch --help'.\n");
			return EXIT_USAGE;
		}
		named = true;
	}
	if (v->raw)
		return v->raw(argc - 1, argv + 1);
	current_verb = named ? v : NULL;
	cl.verb = v;
	cl.sets = calloc((size_t)argc, sizeof(char *));
	if (!cl.sets)
		return 1;
	rc = parse_options(v, argc, argv, named ? 2 : 1, named, &cl);
	if (rc < 0)
		rc = v->run(&cl);
	free(cl.sets);
	return rc;
}
