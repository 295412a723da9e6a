/* diagnose_exit: why a start failed (docs/diagnose.md). The exit rule
 * (its own group, run last and with every --check: a failed start is
 * always explained) says what ended the service, whose exit code that is,
 * quotes its last lines of output (process.output_tail, recorded redacted
 * by the supervisor) and names the findings that caused it; the HTTP rule
 * (a download group row) says when the hub answered with an error and no
 * download started. Rows at the end; the engine is diagnose.c. */
#include <ctype.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose_rules.h"
#include "util.h"

/* How many of the service's last lines the finding quotes. */
#define EXIT_TAIL_LINES 8

/* A figure of the model as evidence: null for none, an integer when it is
 * one (codes, counts), else a real. */
static json_t *evidence_num(double v)
{
	if (!tl_has(v))
		return json_null();
	if (v == (double)(long long)v && fabs(v) < 9007199254740992.0)
		return json_integer((json_int_t)v);
	return json_real(v);
}

/* The last line of the output that reads as the error (Python's
 * "SomeError: ...", "error: ..."), or NULL. */
static const char *error_line(const struct diag_ctx *c)
{
	const struct tl_process *p = &c->view->process;

	for (size_t i = p->n_output_tail; i-- > 0;) {
		const char *l = p->output_tail[i];
		const char *colon = l ? strstr(l, ": ") : NULL;
		size_t w = 0;

		if (!colon)
			continue;
		/* a dotted name ending in Error/Exception/Exit, or "error" */
		while (l + w < colon &&
		       (isalnum((unsigned char)l[w]) || l[w] == '_' || l[w] == '.'))
			w++;
		if (l + w != colon || !w)
			continue;
		if ((w >= 5 && !strncmp(colon - 5, "Error", 5)) ||
		    (w >= 9 && !strncmp(colon - 9, "Exception", 9)) ||
		    (w >= 4 && !strncmp(colon - 4, "Exit", 4)) ||
		    (w == 5 && !strncmp(l, "error", 5)))
			return l;
	}
	return NULL;
}

/* An HTTP error the client printed: "500 Internal Server Error for url:
 * URL" (requests, huggingface_hub). The status, and in *line the line. */
static int http_status(const struct diag_ctx *c, const char **line)
{
	const struct tl_process *pr = &c->view->process;

	for (size_t i = pr->n_output_tail; i-- > 0;) {
		const char *l = pr->output_tail[i];
		const char *u = l ? strstr(l, " for url: ") : NULL;

		for (const char *p = l; u && p + 4 <= u; p++) {
			if ((p == l || !isalnum((unsigned char)p[-1])) &&
			    (p[0] == '4' || p[0] == '5') && isdigit((unsigned char)p[1]) &&
			    isdigit((unsigned char)p[2]) && p[3] == ' ') {
				*line = l;
				return atoi(p);
			}
		}
	}
	*line = NULL;
	return 0;
}

/* A stop tts-launch asked for, and the service ended the way a stop ends. */
static bool stopped_on_request(const struct tl_exit *ex)
{
	int n = tl_has(ex->signal) ? (int)ex->signal : 0;

	if (!ex->stop_requested)
		return false;
	if (!n && tl_has(ex->code) && ex->code > 128)
		n = (int)(ex->code - 128);
	return n == SIGTERM || n == SIGINT || n == SIGKILL || n == SIGHUP || n == SIGQUIT ||
	       (tl_has(ex->code) && ex->code == 0);
}

static void rule_start_failed(struct diag_ctx *c)
{
	const struct tl_exit *ex = &c->view->process.exit;
	const struct tl_process *pr = &c->view->process;
	json_t *causes, *f, *quoted;
	bool expected, nonzero, before_ready = c->ready < 0;
	const char *whose, *err, *l;
	char what[160], cause[600] = "", fix[900];
	size_t i, n;
	long long code;
	int sig;

	if (!ex->has || stopped_on_request(ex))
		return;
	/* a configured app is expected to listen; a command after -- only
	 * with a port given */
	expected = tl_or0(c->view->config_app_port) > 0 || c->view->config_command_null;
	code = tl_has(ex->code) ? (long long)ex->code : 0;
	sig = tl_has(ex->signal) ? (int)ex->signal : 0;
	nonzero = sig > 0 || code != 0;
	if (!nonzero && !(expected && before_ready))
		return;

	whose = ex->code_of;
	if (!whose)
		whose = sig > 0 ? "signal" : "service";
	if (!strcmp(whose, "exec"))
		snprintf(what, sizeof(what),
			 "tts-launch could not execute the service (exit %lld: %s)", code,
			 code == 127 ? "not found" : "not executable");
	else if (sig > 0)
		snprintf(what, sizeof(what),
			 "the service was killed by SIG%s (exit %d: 128 + the signal)",
			 sigabbrev_np(sig) ?: "?", 128 + sig);
	else
		snprintf(what, sizeof(what),
			 "the service exited with status %lld (its own exit code)", code);
	if (expected && before_ready)
		strncat(what, " before it was ready", sizeof(what) - strlen(what) - 1);

	/* the cause: the errors the other rules found in this run */
	causes = json_array();
	json_array_foreach (c->findings, i, f) {
		const char *sev = jstr(f, "severity"), *id = jstr(f, "id");

		if (!sev || strcmp(sev, "error") || !id)
			continue;
		json_array_append_new(causes, json_string(id));
		n = strlen(cause);
		snprintf(cause + n, sizeof(cause) - n, "%s%s", n ? ", " : "; the cause: ", id);
	}
	if (json_array_size(causes))
		strncat(cause, " (above)", sizeof(cause) - strlen(cause) - 1);
	err = error_line(c);

	quoted = json_array();
	n = pr->n_output_tail;
	for (i = n > EXIT_TAIL_LINES ? n - EXIT_TAIL_LINES : 0; i < n; i++)
		json_array_append_new(quoted, pr->output_tail[i] ? json_string(pr->output_tail[i])
								 : json_null());

	if (json_array_size(causes))
		snprintf(fix, sizeof(fix), "fix the cause above (%s), then start again",
			 json_string_value(json_array_get(causes, 0)));
	else if (!strcmp(whose, "exec"))
		snprintf(fix, sizeof(fix),
			 "check [app] python and [app] script (or the command after --): the file "
			 "must exist and be executable by the service's user; `tts-launch doctor` "
			 "checks them");
	else if (sig == SIGKILL)
		snprintf(
		    fix, sizeof(fix),
		    "a SIGKILL nobody asked for is most often the kernel's out-of-memory "
		    "killer: look at `dmesg | grep -i oom` or `journalctl -k`; give the service "
		    "more memory or lower what it loads");
	else
		snprintf(
		    fix, sizeof(fix),
		    "read the service's last lines (evidence.output_tail, the full output in "
		    "[log] file) and fix what they report; `tts-launch run --foreground` shows "
		    "them as they come");
	l = n ? pr->output_tail[n - 1] : NULL;
	diag_add(c, DIAG_ERROR,
		 expected && before_ready ? "the service exited before it was ready"
					  : "the service exited with an error",
		 json_pack("{s:o, s:o, s:s, s:b, s:b, s:o, s:s?, s:o, s:o}", "code",
			   evidence_num(ex->code), "signal", evidence_num(ex->signal), "code_of",
			   whose, "ready", !before_ready, "expected_ready", expected, "ms",
			   tl_has(ex->ms) ? json_real(ex->ms) : json_null(), "error_line", err,
			   "causes", causes, "output_tail", quoted),
		 -1, fix, "%s%s%s%s%s%s", what, cause,
		 err ? "; its last error: "
		 : l ? "; its last line: "
		     : "",
		 err ? err
		 : l ? l
		     : "",
		 ex->error ? "; " : "", ex->error ?: "");
}

/* The hub answered, no download started, and the client printed an HTTP
 * error (or the start failed): the hub refused what it was asked for. */
static void rule_http_error(struct diag_ctx *c)
{
	const char *line, *fix;
	int status = http_status(c, &line);
	const struct tl_peer *peer = NULL;
	size_t i;
	char in[32], what[600];

	if (c->n_dls || (!status && !c->failed && c->ready >= 0))
		return;
	for (i = 0; i < c->view->n_network; i++) {
		const struct tl_peer *p = &c->view->network[i];
		const char *name = p->peer, *host = p->host;
		bool is_hub = name && *c->ep_peer &&
			      (!strcmp(name, c->ep_peer) ||
			       (host && !strncmp(c->ep_peer, host, strlen(host)) &&
				c->ep_peer[strlen(host)] == ':' &&
				tl_or0(p->port) == atof(c->ep_peer + strlen(host) + 1)));

		if (!is_hub &&
		    !(!*c->ep_peer && status && name && strncmp(name, "unix:", 5) && !p->dns))
			continue;
		if (tl_or0(p->bytes_in) <= 0 || tl_or0(p->connects) <= 0)
			continue;
		if (!peer || tl_or0(p->bytes_in) > tl_or0(peer->bytes_in))
			peer = p;
	}
	/* without the client's own words, an answer alone is no proof of an
	 * error: only a failed start whose hub answered and sent no file */
	if (!peer || (!status && !c->failed))
		return;
	fmt_bytes(in, sizeof(in), tl_or0(peer->bytes_in));
	if (status)
		snprintf(what, sizeof(what), "; the client got HTTP %d: %s", status, line);
	else
		snprintf(what, sizeof(what), " (the client's error is not in the output kept)");
	fix = status == 401 || status == 403
		  ? "a gated or private repository: accept its terms on the hub and set HF_TOKEN "
		    "in [env] (or log in with `hf auth login` as the service's user)"
	      : status == 404
		  ? "the repository, revision or file does not exist on this hub: check the "
		    "model name and revision, and HF_ENDPOINT (a mirror may lack it)"
	      : status == 429 ? "rate-limited by the hub: set HF_TOKEN, or wait and start again"
	      : status >= 500
		  ? "the hub failed on its side: start again later, or set HF_ENDPOINT to a "
		    "mirror; with every file already cached, HF_HUB_OFFLINE=1 skips the hub"
		  : "the hub answered but no download started: read the service's last lines "
		    "(the exit finding) and check HF_ENDPOINT";
	diag_add(c, c->failed || c->ready < 0 ? DIAG_ERROR : DIAG_WARNING,
		 "the model hub answered with an error",
		 json_pack("{s:s, s:s?, s:o, s:o, s:o, s:o, s:s?}", "peer", peer->peer, "hub",
			   c->endpoint, "connects", evidence_num(peer->connects), "bytes_in",
			   evidence_num(peer->bytes_in), "bytes_out", evidence_num(peer->bytes_out),
			   "status", status ? json_integer(status) : json_null(), "line", line),
		 -1, fix, "%s answered (%s over %lld connection%s) but no download started%s",
		 peer->peer, in, (long long)peer->connects, peer->connects == 1 ? "" : "s", what);
}

const struct diag_rule diag_exit_rules[] = {
    {"start-failed", rule_start_failed},
    {NULL, NULL},
};

const struct diag_rule diag_http_rules[] = {
    {"hub-http-error", rule_http_error},
    {NULL, NULL},
};
