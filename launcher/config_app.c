/* config_app: the configured app as the service will start it: which
 * interpreter (the app's .venv when [app] python is unset), where exec finds
 * it and the script, and the argv. One resolution for `run` (exit 2 before
 * anything is killed) and `doctor` (the same message as a FAIL line). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void oom(void)
{
	perror("tts-launch: out of memory");
	exit(1);
}

/* The first word of s (malloc'd), or NULL. */
static char *first_word(const char *s)
{
	s += strspn(s, " \t");
	return *s ? strndup(s, strcspn(s, " \t")) : NULL;
}

static bool has_word(const char *s) { return s && s[strspn(s, " \t")]; }

/* An executable regular file? */
static bool is_executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

char *config_venv_python(const char *app_dir)
{
	char *p;

	if (!app_dir || asprintf(&p, "%s/" CONFIG_VENV_PYTHON, app_dir) < 0)
		return NULL;
	if (is_executable(p))
		return p;
	free(p);
	return NULL;
}

/* execvpe's search of the service's PATH ([env] PATH, else ours) for prog
 * (no '/'): the first executable file, malloc'd, or NULL. */
static char *search_path(const struct config *c, const char *prog)
{
	const char *search = config_service_env(c, "PATH");
	char *path = NULL;

	if (!search)
		search = "/usr/local/bin:/usr/bin:/bin";
	for (const char *d = search;;) {
		size_t len = strcspn(d, ":");

		if (asprintf(&path, "%.*s/%s", (int)len, len ? d : ".", prog) < 0)
			return NULL;
		if (is_executable(path))
			return path;
		free(path);
		if (!d[len])
			return NULL;
		d += len + 1;
	}
}

int config_app_interpreter(const struct config *c, char *out, size_t outlen, char *err,
			   size_t errlen)
{
	char *prog = first_word(c->python ? c->python : ""), *path;

	if (!prog) {
		snprintf(err, errlen,
			 "%s: [app] python is empty: give an interpreter such as "
			 "/usr/bin/python3 or 'uv run'",
			 c->source);
		return -1;
	}
	path = strchr(prog, '/') ? config_path(c, prog) : search_path(c, prog);
	if (!path || !is_executable(path)) {
		snprintf(err, errlen,
			 "%s: [app] python '%s': %s (set [app] python to the interpreter, e.g. "
			 "/usr/bin/python3, .venv/bin/python or 'uv run')",
			 c->source, prog,
			 strchr(prog, '/') ? "no executable file there" : "not found on PATH");
		free(prog);
		free(path);
		return -1;
	}
	snprintf(out, outlen, "%s", path);
	free(prog);
	free(path);
	return 0;
}

int config_app_script(const struct config *c, char *out, size_t outlen, char *err, size_t errlen)
{
	char *script = first_word(c->script ? c->script : ""), *path;
	struct stat st;
	int rc = 0;

	if (!script) {
		snprintf(err, errlen,
			 "%s: [app] script is empty: give the script to start, e.g. webui.py",
			 c->source);
		return -1;
	}
	if (script[0] == '-') { /* -m module: nothing to look for */
		snprintf(out, outlen, "%s", script);
		free(script);
		return 0;
	}
	path = config_path(c, script);
	if (stat(path, &st) < 0) {
		snprintf(err, errlen,
			 "%s: [app] script '%s': %s: %s (set [app] dir to the IndexTTS2 "
			 "directory, or [app] script to the script to start)",
			 c->source, script, path, strerror(errno));
		rc = -1;
	} else {
		snprintf(out, outlen, "%s", path);
	}
	free(script);
	free(path);
	return rc;
}

int config_check_app(const struct config *c, char *err, size_t errlen)
{
	char path[4096];

	if (c->n_command)
		return 0;
	if (config_app_interpreter(c, path, sizeof(path), err, errlen) < 0 ||
	    config_app_script(c, path, sizeof(path), err, errlen) < 0)
		return -1;
	return 0;
}

/* Split s on spaces and tabs, appending to argv. */
static void split_words(const char *s, char ***argv, size_t *n)
{
	const char *p = s ? s : "";

	while (*p) {
		size_t len;

		while (*p == ' ' || *p == '\t')
			p++;
		len = strcspn(p, " \t");
		if (!len)
			break;
		*argv = realloc(*argv, (*n + 2) * sizeof(char *));
		if (!*argv)
			oom();
		(*argv)[(*n)++] = strndup(p, len);
		p += len;
	}
}

char **config_service_argv(const struct config *c)
{
	char **argv;
	size_t n = 0;
	char port[16];

	if (c->n_command) {
		argv = calloc((size_t)c->n_command + 1, sizeof(char *));
		if (!argv)
			oom();
		for (int i = 0; i < c->n_command; i++)
			if (!(argv[i] = strdup(c->command[i])))
				oom();
		return argv;
	}
	argv = calloc(1, sizeof(char *));
	if (!argv)
		oom();
	split_words(c->python, &argv, &n);
	split_words(c->script, &argv, &n);
	/* webui.py takes --host/--port/--model_dir; pass what is configured
	 * unless the args already say it. */
	if (!strstr(c->args, "--port") && c->port) {
		snprintf(port, sizeof(port), "%d", c->port);
		split_words("--port", &argv, &n);
		split_words(port, &argv, &n);
	}
	if (!strstr(c->args, "--host") && has_word(c->host)) {
		split_words("--host", &argv, &n);
		split_words(c->host, &argv, &n);
	}
	if (!strstr(c->args, "--model_dir") && has_word(c->model_dir)) {
		split_words("--model_dir", &argv, &n);
		split_words(c->model_dir, &argv, &n);
	}
	split_words(c->args, &argv, &n);
	argv[n] = NULL;
	return argv;
}
