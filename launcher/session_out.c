#include "session.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "redact.h"
#include "timeline_internal.h"
#include "util.h"

/* Everything for the log goes through here: the first loss is said once
 * on stderr (the log itself cannot carry it), the total at the end. */
void session_log(struct session *s, const char *buf, size_t len)
{
	if (logfile_write(&s->log, buf, len) < 0 && !s->log_warned) {
		s->log_warned = true;
		fprintf(stderr,
			"tts-launch: warning: cannot write the log: %s; output is lost from "
			"here (the bytes are counted)\n",
			s->log.error);
	}
}

/* Launcher messages go to the terminal (foreground) and to the log file,
 * so a daemon's history is in its log. */
void session_say(struct session *s, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	session_say_block(s, buf, (size_t)n);
}

/* tts-launch's own lines, in the log (readable by the service user) and on
 * the terminal when terminal is set: secrets redacted (redact.h). */
static void emit(struct session *s, const char *text, size_t len, bool terminal)
{
	char *copy = strndup(text, len), *r = copy ? redact_text(copy) : NULL;

	free(copy);
	if (!r)
		return; /* out of memory: better no line than a secret */
	len = strlen(r);
	if (terminal) {
		progress_clear(s->progress);
		fwrite(r, 1, len, stderr);
	}
	session_log(s, r, len);
	free(r);
}

void session_say_block(struct session *s, const char *text, size_t len)
{
	emit(s, text, len, s->foreground);
}

/* progress.h's lines: on the terminal (foreground) and in the log, or the
 * log only (the terminal has the live line). */
void session_progress_emit(void *arg, const char *line, bool terminal)
{
	struct session *s = arg;

	if (terminal)
		session_say(s, "%s", line);
	else
		emit(s, line, strlen(line), false);
	notify_status(&s->sd, line); /* systemctl status shows the progress */
}

/* The findings not said yet (those from requests come after the summary),
 * for diagnose_print_findings; each is said once. NULL when out of memory. */
static json_t *new_findings(struct session *s)
{
	json_t *fresh = json_array(), *f;
	size_t i;

	if (!s->said)
		s->said = json_object();
	json_array_foreach (json_object_get(timeline_json(s->tl), "findings"), i, f) {
		char key[1024];

		snprintf(key, sizeof(key), "%s|%s",
			 json_string_value(json_object_get(f, "id")) ?: "",
			 json_string_value(json_object_get(f, "message")) ?: "");
		if (json_object_get(s->said, key))
			continue;
		json_object_set_new(s->said, key, json_true());
		json_array_append(fresh, f);
	}
	return fresh;
}

void session_print_new_findings(struct session *s)
{
	json_t *fresh = new_findings(s);
	char *buf = NULL;
	size_t len = 0;
	FILE *m;

	if (!fresh)
		return;
	m = open_memstream(&buf, &len);
	if (m) {
		diagnose_print_findings(fresh, m);
		fclose(m);
		session_say_block(s, buf, len);
		free(buf);
	}
	json_decref(fresh);
}

void session_print_summary(struct session *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	json_t *fresh;

	if (!m)
		return;
	timeline_print_summary(s->tl, m);
	fresh = new_findings(s);
	diagnose_print_findings(fresh, m);
	json_decref(fresh);
	fclose(m);
	session_say_block(s, buf, len);
	if (*s->timeline_path)
		session_say(s, "tts-launch: timeline: %s%s\n", s->timeline_path,
			    s->timeline_written ? "" : " NOT written (see the warning above)");
	free(buf);
	s->summary_printed = true;
}

/* The service's last lines: at most this many, each cut to this length. */
#define TAIL_LINES    20
#define TAIL_LINE_MAX 400

void session_record_exit(struct session *s, const char *code_of, const char *error)
{
	json_t *proc = json_object_get(timeline_json(s->tl), "process");
	json_t *ex = json_object_get(proc, "exit"), *tail = json_array();
	char **lines = log_tail_lines(&s->tail, TAIL_LINES, TAIL_LINE_MAX);

	if (!json_is_object(proc))
		return;
	if (json_is_object(ex)) {
		json_object_set_new(ex, "code_of", json_string(code_of));
		json_object_set_new(ex, "stop_requested", json_boolean(s->stop_sig != 0));
		if (error) {
			char *r = redact_text(error);

			json_object_set_new(ex, "error", r ? json_text(r) : json_null());
			free(r);
		}
	}
	for (char **l = lines; l && *l; l++) {
		char *r = redact_text(*l);

		if (r)
			json_array_append_new(tail, json_text(r));
		free(r);
	}
	log_tail_free(lines);
	json_object_set_new(proc, "output_tail", tail);
}

void session_say_own_exit(struct session *s, int rc)
{
	const char *why = rc == 2     ? "bad usage or config: nothing was killed or started"
			  : rc == 3   ? "the port is held by a process that is not a stale "
					"instance: nothing was killed"
			  : rc == 4   ? "the app's lock or pidfile cannot be trusted"
			  : rc == 126 ? "the service's program could not be executed"
			  : rc == 127 ? "the service's program was not found"
			  : rc > 128  ? "a stop came before the service started (128 + the signal)"
				      : "a system error, said above";
	char line[300];
	int n;

	if (!rc)
		return;
	n = snprintf(line, sizeof(line), "tts-launch: exit %d is tts-launch's own: %s\n", rc, why);
	/* on the caller's terminal (a daemon has not let go of it yet) and in the log */
	fputs(line, stderr);
	if (n > 0)
		session_log(s, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

void session_notify_phase(struct session *s)
{
	json_t *ph, *cur = NULL;
	const char *name;
	char line[160];
	size_t i;

	if (!notify_on(&s->sd))
		return;
	/* the phase that started last is what the start-up is doing now */
	json_array_foreach (json_object_get(timeline_json(s->tl), "phases"), i, ph)
		if (!cur || jnum(ph, "start_ms") >= jnum(cur, "start_ms"))
			cur = ph;
	name = jstr(cur, "name");
	if (!name || !strcmp(s->phase_said, name))
		return;
	snprintf(s->phase_said, sizeof(s->phase_said), "%s", name);
	snprintf(line, sizeof(line), "starting: %s", name);
	notify_status(&s->sd, line);
}
