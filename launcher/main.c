/* tts-launch: command line. Parses the subcommand and options, builds the
 * config (defaults < INI file < --set < flags), and dispatches. */
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "compare.h"
#include "config.h"
#include "control.h"
#include "diagnose.h"
#include "doctor.h"
#include "mlock.h"
#include "redact.h"
#include "spawn.h"
#include "supervise.h"
#include "render_perfetto.h"
#include "render_prom.h"
#include "render_svg.h"
#include "atomicfile.h"
#include "timeline.h"

extern char **environ;

#define EXIT_USAGE 2

static const char usage_text[] =
	"Usage:\n"
	"  tts-launch [run] [-c FILE] [--set SECTION.KEY=VALUE]... [--timeline PATH]\n"
	"             [--mlock[=all|models|onfault|off]] [--no-trace] [--foreground|--daemon]\n"
	"             [--print-env] [-v] [-- COMMAND [ARG...]]\n"
	"  tts-launch stop|status [-c FILE] [--set SECTION.KEY=VALUE]...\n"
	"  tts-launch doctor [-c FILE]\n"
	"  tts-launch report TIMELINE.json [--format text|json|perfetto|svg|html|prom] [-o FILE]\n"
	"  tts-launch diagnose [TIMELINE.json] [--check-io] [--check-download] [--check-memory]\n"
	"             [--format text|json] [-c FILE]\n"
	"  tts-launch compare BEFORE.json AFTER.json [--format text|json]\n"
	"\n"
	"Starts IndexTTS2's webui.py the way start_app.sh did (ends the stale instance,\n"
	"sets PYTHONPATH, starts it with its output in a log file) under eBPF tracing\n"
	"from its first instruction, and writes a startup timeline.\n"
	"\n"
	"Commands:\n"
	"  run       (default) start the service and supervise it until it exits\n"
	"  stop      stop the service started by `run` (SIGTERM, grace, SIGKILL)\n"
	"  status    is it running? (exit 0 running, 1 dead, 3 not running, 4 not trusted)\n"
	"  doctor    can this machine trace, and can the app start? (exit 1 on FAIL)\n"
	"  report    a saved timeline as: text (the summary), json, perfetto (Chrome\n"
	"            trace-event JSON for ui.perfetto.dev), svg (a plot), html (the plot\n"
	"            with tables of files and findings), prom (Prometheus text format);\n"
	"            -o FILE writes FILE atomically instead of stdout\n"
	"  diagnose  findings over a timeline (default: the last one written, [trace]\n"
	"            timeline of the config), each with its evidence and the fix;\n"
	"            --check-io|download|memory select rules (default: all); exit 0 clean,\n"
	"            1 warnings, 2 errors or an unreadable timeline (docs/diagnose.md)\n"
	"  compare   two saved timelines side by side: phases, start-up, page faults,\n"
	"            request latency p50/p99 and spread, mlock outcome (docs/compare.md)\n"
	"\n"
	"Options:\n"
	"  -c, --config FILE    INI file (default: ./tts-launch.ini, else\n"
	"                       /etc/tts-launch.ini, else built-in defaults)\n"
	"      --set S.K=V      override one key, e.g. --set app.port=7861 (repeatable)\n"
	"      --timeline PATH  where to write the timeline JSON ('' for none)\n"
	"      --mlock[=MODE]   lock model pages once loaded: all (default), models, onfault, off\n"
	"      --no-trace       start without eBPF tracing\n"
	"      --foreground     stay attached; output also on the terminal (default)\n"
	"      --daemon         detach; `tts-launch stop|status` work from another shell\n"
	"      --print-env      print the command, directory and environment the service\n"
	"                       would get, then exit\n"
	"  -v, --verbose        more detail (libbpf's own messages)\n"
	"  -h, --help           this text;  --version  the version\n"
	"  -- COMMAND [ARG...]  run COMMAND instead of the configured app (no port is\n"
	"                       watched unless --set app.port=N: ready = its first listen)\n"
	"\n"
	"Exit codes: the service's own code when it exits (128+N when killed by signal N);\n"
	"126/127 when it cannot be executed; 2 bad usage or config (nothing killed or\n"
	"started); 3 the port is held by a process that is not a stale instance.\n"
	"Every config key is documented in conf/tts-launch.ini and README.md.\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "tts-launch: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'tts-launch --help'.\n");
	return EXIT_USAGE;
}

enum { OPT_SET = 256, OPT_TIMELINE, OPT_MLOCK, OPT_NO_TRACE, OPT_FG, OPT_DAEMON, OPT_PRINT_ENV,
       OPT_VERSION, OPT_FORMAT, OPT_CHECK_IO, OPT_CHECK_DOWNLOAD, OPT_CHECK_MEMORY };

static const struct option long_opts[] = {
	{"config", required_argument, NULL, 'c'},
	{"set", required_argument, NULL, OPT_SET},
	{"timeline", required_argument, NULL, OPT_TIMELINE},
	{"mlock", optional_argument, NULL, OPT_MLOCK},
	{"no-trace", no_argument, NULL, OPT_NO_TRACE},
	{"foreground", no_argument, NULL, OPT_FG},
	{"daemon", no_argument, NULL, OPT_DAEMON},
	{"print-env", no_argument, NULL, OPT_PRINT_ENV},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{"format", required_argument, NULL, OPT_FORMAT},
	{"output", required_argument, NULL, 'o'},
	{"check-io", no_argument, NULL, OPT_CHECK_IO},
	{"check-download", no_argument, NULL, OPT_CHECK_DOWNLOAD},
	{"check-memory", no_argument, NULL, OPT_CHECK_MEMORY},
	{NULL, 0, NULL, 0},
};

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
	static const char *const names[] = {"HF_HOME", "HF_HUB_CACHE", "HF_ENDPOINT",
					    "HF_HUB_OFFLINE", "HOME"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (getenv(names[i]))
			env_default(c, names[i], getenv(names[i]));
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

/* secrets: print the values redact.h would hide (the service gets them
 * either way); the flag that asks for it is the option parser's. */
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

/* report formats; text and json come with the timeline model */
static int render_text(const struct timeline *tl, FILE *out)
{
	timeline_print_summary(tl, out);
	return ferror(out) ? -1 : 0;
}

static int render_json(const struct timeline *tl, FILE *out)
{
	if (json_dumpf(tl->root, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
		return -1;
	return fputc('\n', out) == EOF ? -1 : 0;
}

static const struct {
	const char *name;
	int (*render)(const struct timeline *tl, FILE *out);
} report_formats[] = {
	{"text", render_text},		{"json", render_json}, {"perfetto", render_perfetto},
	{"svg", render_svg},		{"html", render_html}, {"prom", render_prom},
};

/* -o FILE: a temp file in the same directory, renamed over FILE once
 * complete, so a reader (node_exporter's textfile collector) never sees
 * half a file; a device or FIFO there is written in place (safefile.h). */
static int report(const char *path, const char *format, const char *output)
{
	struct atomic_file a = ATOMIC_FILE_INIT;
	char err[512];
	struct timeline *tl;
	FILE *out = stdout;
	size_t f;
	int rc = 0;

	if (!path)
		return usage_error("%s", "report needs a TIMELINE.json");
	for (f = 0; f < sizeof(report_formats) / sizeof(report_formats[0]); f++)
		if (!strcmp(format, report_formats[f].name))
			break;
	if (f == sizeof(report_formats) / sizeof(report_formats[0]))
		return usage_error("unknown --format '%s': expected text, json, perfetto, svg, html or prom",
				   format);
	tl = timeline_load(path, err, sizeof(err));
	if (!tl) {
		fprintf(stderr, "tts-launch: %s\n", err);
		return EXIT_USAGE;
	}
	if (output && (atomic_begin(&a, output, err, sizeof(err)) < 0 || !(out = atomic_stream(&a)))) {
		fprintf(stderr, "tts-launch: cannot write the report: %s\n",
			a.path ? strerror(errno) : err);
		atomic_abort(&a); /* nothing half-written stays behind */
		timeline_free(tl);
		return 1;
	}
	errno = 0;
	if (report_formats[f].render(tl, out) < 0 || fflush(out) == EOF || ferror(out)) {
		fprintf(stderr, "tts-launch: failed to write the %s report to %s: %s\n", format,
			output ? output : "stdout", strerror(errno ? errno : EIO));
		rc = 1;
	}
	if (output) {
		if (fclose(out) == EOF && !rc) {
			fprintf(stderr, "tts-launch: failed to write %s: %s\n", output, strerror(errno));
			rc = 1;
		}
		/* node_exporter reads textfiles as its own user: 0644 like any
		 * report, set on the open descriptor */
		if (!rc && atomic_commit(&a, 0644, (uid_t)-1, (gid_t)-1, err, sizeof(err)) < 0) {
			fprintf(stderr, "tts-launch: %s\n", err);
			rc = 1;
		}
		atomic_abort(&a);
	}
	timeline_free(tl);
	return rc;
}

/* getopt_long, but the TIMELINE of diagnose and report may come before or among
 * their options. */
static int next_opt(int argc, char **argv, const char *cmd, const char **positional)
{
	int opt;

	while ((opt = getopt_long(argc, argv, "+c:o:vh", long_opts, NULL)) == -1 &&
	       (!strcmp(cmd, "diagnose") || !strcmp(cmd, "report")) && !*positional && optind < argc &&
	       strcmp(argv[optind - 1], "--"))
		*positional = argv[optind++];
	return opt;
}

int main(int argc, char **argv)
{
	static const char *const cmds[] = {"run", "stop", "status", "doctor", "report",
					    "diagnose"};
	const char *cmd = "run", *file = NULL, *format = "text", *output = NULL;
	char **sets = calloc((size_t)argc, sizeof(char *));
	int nsets = 0, opt, rc;
	int mode = -1, no_trace = 0, print = 0, verbose = 0, mlock = -1;
	unsigned checks = 0;
	const char *positional = NULL;
	const char *timeline = NULL;
	struct config c;
	char err[CONFIG_ERR_MAX];
	int first = 1;

	clock_init();
	if (!sets)
		return 1;
	if (argc > 1 && !strcmp(argv[1], "compare"))
		return compare_command(argc - 1, argv + 1);
	if (argc > 1 && argv[1][0] != '-') {
		size_t i;

		for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
			if (!strcmp(argv[1], cmds[i]))
				break;
		if (i == sizeof(cmds) / sizeof(cmds[0]))
			return usage_error("unknown command '%s': expected run, stop, status, doctor, report, diagnose or compare",
					   argv[1]);
		cmd = argv[1];
		first = 2;
	}
	optind = first;
	/* '+': stop at "--" and at the first word, so COMMAND keeps its own
	 * options. */
	while ((opt = next_opt(argc, argv, cmd, &positional)) != -1) {
		switch (opt) {
		case 'c':
			file = optarg;
			break;
		case OPT_SET:
			sets[nsets++] = optarg;
			break;
		case OPT_TIMELINE:
			timeline = optarg;
			break;
		case OPT_MLOCK:
			if (!optarg || !strcmp(optarg, "all"))
				mlock = MLOCK_ALL;
			else if (!strcmp(optarg, "models"))
				mlock = MLOCK_MODELS;
			else if (!strcmp(optarg, "onfault"))
				mlock = MLOCK_ONFAULT;
			else if (!strcmp(optarg, "off"))
				mlock = MLOCK_OFF;
			else
				return usage_error("unknown --mlock mode '%s': expected all, models, onfault or off",
						   optarg);
			break;
		case OPT_NO_TRACE:
			no_trace = 1;
			break;
		case OPT_FG:
			mode = MODE_FOREGROUND;
			break;
		case OPT_DAEMON:
			mode = MODE_DAEMON;
			break;
		case OPT_PRINT_ENV:
			print = 1;
			break;
		case OPT_FORMAT:
			format = optarg;
			break;
		case 'o':
			output = optarg;
			break;
		case OPT_CHECK_IO:
			checks |= DIAG_IO;
			break;
		case OPT_CHECK_DOWNLOAD:
			checks |= DIAG_DOWNLOAD;
			break;
		case OPT_CHECK_MEMORY:
			checks |= DIAG_MEMORY;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case OPT_VERSION:
			printf("tts-launch %s\n", TTS_LAUNCH_VERSION);
			return 0;
		default:
			fprintf(stderr, "Try 'tts-launch --help'.\n");
			return EXIT_USAGE;
		}
	}

	if (!strcmp(cmd, "report")) {
		if (positional && optind < argc)
			return usage_error("unexpected argument '%s': report takes one TIMELINE.json",
					   argv[optind]);
		return report(positional ? positional : optind < argc ? argv[optind] : NULL, format, output);
	}
	if (!strcmp(cmd, "diagnose") && strcmp(format, "text") && strcmp(format, "json"))
		return usage_error("unknown --format '%s': expected text or json", format);
	if (!strcmp(cmd, "diagnose") && optind < argc)
		return usage_error("unexpected argument '%s' (diagnose takes one TIMELINE.json)",
				   argv[optind]);
	if (!strcmp(cmd, "diagnose") && positional)
		return diagnose_command(positional, checks, format);

	config_defaults(&c);
	file = config_locate(file);
	if (file && config_load_file(&c, file, err, sizeof(err)) < 0) {
		fprintf(stderr, "tts-launch: error: %s\n", err);
		return EXIT_USAGE;
	}
	/* A command after "--" replaces the configured app. */
	if (optind < argc && !strcmp(argv[optind - 1], "--")) {
		c.command = &argv[optind];
		c.n_command = argc - optind;
		c.port = 0; /* unless --set app.port below */
	} else if (optind < argc) {
		return usage_error("unexpected argument '%s' (a command to run goes after --)",
				   argv[optind]);
	}
	for (int i = 0; i < nsets; i++) {
		if (config_set(&c, sets[i], err, sizeof(err)) < 0) {
			fprintf(stderr, "tts-launch: error: %s\n", err);
			return EXIT_USAGE;
		}
	}
	if (timeline) {
		free(c.timeline);
		c.timeline = strdup(timeline);
	}
	if (no_trace)
		c.trace = false;
	if (mode >= 0)
		c.mode = (enum run_mode)mode;
	if (mlock >= 0)
		c.mlock = (enum mlock_mode)mlock;
	c.verbose = verbose;
	c.print_env = print;
	if (config_finish(&c, err, sizeof(err)) < 0) {
		fprintf(stderr, "tts-launch: error: %s\n", err);
		return EXIT_USAGE;
	}

	if (!strcmp(cmd, "stop"))
		rc = control_stop(&c);
	else if (!strcmp(cmd, "status"))
		rc = control_status(&c);
	else if (!strcmp(cmd, "doctor"))
		rc = doctor_run(&c);
	else if (!strcmp(cmd, "diagnose")) {
		/* the last timeline `run` wrote with this config */
		char *tp = c.timeline && *c.timeline ? config_path(&c, c.timeline) : NULL;

		if (tp)
			rc = diagnose_command(tp, checks, format);
		else
			rc = usage_error("%s", "diagnose needs a TIMELINE.json ([trace] timeline is empty)");
		free(tp);
	}
	else if (print)
		rc = print_env(user_env(&c), false);
	else
		rc = supervise_run(inherit_hf_env(user_env(&c)), argc, argv);
	c.command = NULL;
	config_free(&c);
	free(sets);
	return rc;
}
