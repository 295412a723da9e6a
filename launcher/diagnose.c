/* diagnose: the engine. It decodes what every rule needs from the model
 * once (struct diag_ctx: the app dir, the caches, the hub endpoint, ready
 * and exit), runs the rule table's rows of the selected checks (the rows
 * live with their rules in diagnose_io.c, diagnose_download.c,
 * diagnose_memory.c) and stores their findings in the model. Rules read only
 * the model; what they need from the machine is recorded into it when the
 * timeline is written (the pipeline's cache_fs stage, from hostprobe), so
 * `diagnose` on a saved timeline answers the same anywhere. Nothing here
 * probes the machine. Rules and thresholds: docs/diagnose.md. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "diagnose_rules.h"
#include "hfcache.h"
#include "timeline_internal.h"
#include "util.h"

/* The rule table: each group's rows, in this order (findings come out in
 * it). A new rule is a row in its group's table, nothing here. */
static const struct {
	enum diag_check check;
	const struct diag_rule *rows;
} groups[] = {
    /* first: a cache that refuses writes is the root of what the download
     * rules then see, and the exit rule names its first cause's fix */
    {DIAG_IO, diag_io_rules},
    {DIAG_DOWNLOAD, diag_net_rules},
    {DIAG_DOWNLOAD, diag_download_rules},
    {DIAG_DOWNLOAD, diag_http_rules},
    {DIAG_MEMORY, diag_memory_rules},
    {DIAG_MEMORY, diag_gpu_rules}, /* the service runs on CPU (issue 18) */
    {DIAG_EXIT, diag_exit_rules},  /* last: it names the errors found as the cause */
};

/* Findings that are the consequence of another one found in the same run,
 * dropped before the exit rule names the causes: a cache that refused every
 * write makes any download fail after the server answered, which the
 * network rules would otherwise blame on the server. `unless`: an evidence
 * key that, when set, keeps the finding (the client printed an HTTP status:
 * the server's own words). */
static const struct {
	const char *id, *by, *unless;
} explained[] = {
    {"hub-http-error", "cache-write-refused", "status"},
    {"fallback-download", "cache-write-refused", NULL},
};

/* ---- small helpers ---- */

double diag_round3(double v) { return round(v * 1000.0) / 1000.0; }

int diag_cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static int index_cmp(const void *a, const void *b, void *arg)
{
	const struct diag_index *ix = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int r = strcmp(ix->key(x, ix->arg), ix->key(y, ix->arg));

	return r ? r : (x > y) - (x < y);
}

bool diag_index_build(struct diag_index *ix, size_t n, const char *(*key)(size_t, const void *),
		      const void *arg)
{
	*ix = (struct diag_index){calloc(n + 1, sizeof(size_t)), 0, key, arg};
	if (!ix->order)
		return false;
	for (size_t i = 0; i < n; i++)
		if (key(i, arg))
			ix->order[ix->n++] = i;
	qsort_r(ix->order, ix->n, sizeof(size_t), index_cmp, ix);
	return true;
}

/* <0, 0, >0: s before, equal to, after the len bytes at k */
static int key_cmp(const char *s, const char *k, size_t len)
{
	int r = strncmp(s, k, len); /* 0: s starts with them */

	return r ? r : s[len] != 0;
}

/* The first position in ix->order whose key is not before k (after:
 * after k) */
static size_t index_bound(const struct diag_index *ix, const char *k, size_t len, bool after)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = key_cmp(ix->key(ix->order[mid], ix->arg), k, len);

		if (r < 0 || (after && !r))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void diag_index_range(const struct diag_index *ix, const char *k, size_t len, size_t *lo,
		      size_t *hi)
{
	*lo = *hi = 0;
	if (!k || !ix->n)
		return;
	*lo = index_bound(ix, k, len, false);
	*hi = index_bound(ix, k, len, true);
}

long diag_index_find(const struct diag_index *ix, const char *k, size_t len, bool last)
{
	size_t lo, hi;

	diag_index_range(ix, k, len, &lo, &hi);
	return lo < hi ? (long)ix->order[last ? hi - 1 : lo] : -1;
}

void diag_index_free(struct diag_index *ix)
{
	free(ix->order);
	*ix = (struct diag_index){0};
}

static const char *severity_name(int s)
{
	return s == DIAG_ERROR ? "error" : s == DIAG_INFO ? "info" : "warning";
}

static const char *check_name(enum diag_check k)
{
	return k == DIAG_IO	    ? "io"
	       : k == DIAG_DOWNLOAD ? "download"
	       : k == DIAG_EXIT	    ? "exit"
				    : "memory";
}

void diag_add(struct diag_ctx *c, int severity, const char *title, json_t *evidence,
	      double seconds_lost, const char *fix, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_array_append_new(
	    c->findings,
	    /* message and fix quote paths, cut to fit their buffers: json_text
	     * keeps a finding whose text was cut inside a character */
	    json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "id", c->rule->id, "severity",
		      severity_name(severity), "check", check_name(c->check), "title", title,
		      "message", json_text(msg), "evidence", evidence ? evidence : json_object(),
		      "seconds_lost",
		      seconds_lost >= 0 ? json_real(diag_round3(seconds_lost)) : json_null(), "fix",
		      json_text(fix)));
}

bool diagnose_benign_missing(const char *path, const char *cls)
{
	const char *b = base_name(path);

	/* the interpreter's and libc's own search paths, and requests' netrc
	 * look-up (once per HTTP request): probing them is normal */
	if (cls && (!strcmp(cls, "system") || !strcmp(cls, "python") || !strcmp(cls, "library")))
		return true;
	return !strcmp(b, ".netrc") || !strcmp(b, "_netrc");
}

/* hfcache's view of the service's environment: the one recorded. run
 * records HOME in it whenever the launcher had one (main.c inherit_hf_env),
 * so an unrecorded HOME means none, the default cache under /root (as
 * hf_home() falls back): never the HOME of the shell running diagnose,
 * which would make a saved timeline's answer depend on who reads it. */
static const char *timeline_env(const void *view, const char *name)
{
	const char *v = tl_view_env(view, name);

	if (!v && !strcmp(name, "HOME"))
		return "/root";
	return v;
}

static void ctx_init(struct diag_ctx *c, struct timeline *tl)
{
	const struct tl_view *v;
	const struct tl_exit *x;

	memset(c, 0, sizeof(*c));
	c->findings = json_array();
	if (!(c->view = v = tl_view_decode(tl)))
		return;
	snprintf(c->app_dir, sizeof(c->app_dir), "%s", v->config_app_dir ? v->config_app_dir : "/");
	c->mlock = v->config_mlock_mode;

	/* the caches IndexTTS2 is meant to use: HF_HUB_CACHE when the service's
	 * environment sets it, and <model_dir>/hf_cache (its own layout) */
	{
		struct hf_cache_dir d[HF_MAX_CACHE_DIRS];
		int n = diagnose_cache_dirs_view(v, d, HF_MAX_CACHE_DIRS, false);

		for (int k = 0; k < n && c->n_caches < DIAG_MAX_CACHES; k++)
			if (strcmp(d[k].role, "HF_HOME/hub"))
				snprintf(c->caches[c->n_caches++], sizeof(c->caches[0]), "%.*s",
					 PATH_MAX - 1, d[k].path);
	}
	hf_home(c->app_dir, timeline_env, v, c->hf_home, sizeof(c->hf_home));

	c->endpoint = tl_view_env(v, "HF_ENDPOINT");
	if (c->endpoint) {
		const char *h = strstr(c->endpoint, "://");
		bool tls = !strncmp(c->endpoint, "https", 5);
		size_t hl;

		h = h ? h + 3 : c->endpoint;
		hl = strcspn(h, "/");
		if (memchr(h, ':', hl))
			snprintf(c->ep_peer, sizeof(c->ep_peer), "%.*s", (int)hl, h);
		else
			snprintf(c->ep_peer, sizeof(c->ep_peer), "%.*s:%d", (int)hl, h,
				 tls ? 443 : 80);
	}

	c->ready = timeline_mark_ms(tl, "ready");
	c->end = -1;
	for (size_t i = 0; i < v->n_marks; i++)
		if (v->marks[i].ms > c->end)
			c->end = v->marks[i].ms;
	for (size_t i = 0; i < v->n_files; i++)
		if (tl_or0(v->files[i].last_ms) > c->end)
			c->end = tl_or0(v->files[i].last_ms);
	x = &v->process.exit;
	if (tl_or0(x->ms) > c->end) /* a timeline without the exit mark */
		c->end = tl_or0(x->ms);
	if (x->has)
		c->failed = (tl_has(x->code) && x->code != 0) || (!tl_has(x->code) && c->ready < 0);
}

/* ---- the caches' file systems ---- */

int diagnose_cache_dirs_view(const struct tl_view *v, struct hf_cache_dir *out, int max,
			     bool with_model_dir)
{
	return hf_cache_dirs(v->config_app_dir ? v->config_app_dir : "/", v->config_model_dir,
			     timeline_env, v, with_model_dir, out, max);
}

int diagnose_cache_dirs(const json_t *root, struct hf_cache_dir *out, int max, bool with_model_dir)
{
	struct tl_view *v = tl_view_decode_config(root);
	int n = v ? diagnose_cache_dirs_view(v, out, max, with_model_dir) : 0;

	tl_view_free(v);
	return n;
}

/* ---- entry points ---- */

static int level_of(json_t *findings)
{
	json_t *f;
	size_t i;
	int lvl = DIAG_CLEAN;

	json_array_foreach (findings, i, f) {
		const char *s = jstr(f, "severity");

		if (s && !strcmp(s, "error"))
			lvl = DIAG_ERROR;
		else if (s && !strcmp(s, "info"))
			continue; /* a fact, not a problem here */
		else if (lvl < DIAG_WARNING)
			lvl = DIAG_WARNING;
	}
	return lvl;
}

static bool has_finding(json_t *findings, const char *id)
{
	json_t *f;
	size_t i;

	json_array_foreach (findings, i, f)
		if (!strcmp(jstr(f, "id") ?: "", id))
			return true;
	return false;
}

/* Drops the findings another finding explains (explained[] above). */
static void drop_explained(json_t *findings)
{
	for (size_t k = 0; k < sizeof(explained) / sizeof(explained[0]); k++) {
		if (!has_finding(findings, explained[k].by))
			continue;
		for (size_t i = json_array_size(findings); i-- > 0;) {
			json_t *f = json_array_get(findings, i);
			json_t *keep = explained[k].unless
					   ? json_object_get(json_object_get(f, "evidence"),
							     explained[k].unless)
					   : NULL;

			if (!strcmp(jstr(f, "id") ?: "", explained[k].id) &&
			    (!keep || json_is_null(keep)))
				json_array_remove(findings, i);
		}
	}
}

int diagnose_run(struct timeline *tl, unsigned checks)
{
	struct diag_ctx c;

	if (!tl || !timeline_json(tl))
		return DIAG_CLEAN;
	ctx_init(&c, tl);
	if (!c.view) {
		json_decref(c.findings);
		return DIAG_CLEAN; /* out of memory: nothing said rather than half */
	}
	diag_find_downloads(&c);
	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
		if (!(checks & groups[g].check))
			continue;
		c.check = groups[g].check;
		if (c.check == DIAG_EXIT)
			drop_explained(c.findings);
		for (c.rule = groups[g].rows; c.rule->id; c.rule++)
			c.rule->fn(&c);
	}
	drop_explained(c.findings); /* also when the exit rule did not run */
	json_object_set_new(timeline_json(tl), "findings", c.findings);
	diag_free_downloads(&c);
	tl_view_free((struct tl_view *)c.view);
	return level_of(c.findings);
}

int diagnose_level(const struct timeline *tl)
{
	return tl ? level_of(json_object_get(timeline_json(tl), "findings")) : DIAG_CLEAN;
}

void diagnose_print(const struct timeline *tl, FILE *out)
{
	diagnose_print_findings(tl ? json_object_get(timeline_json(tl), "findings") : NULL, out);
}

void diagnose_print_findings(const json_t *findings, FILE *out)
{
	json_t *f;
	size_t i;

	if (!json_array_size(findings))
		return;
	fprintf(out, "tts-launch: diagnosis: %zu finding%s\n", json_array_size(findings),
		json_array_size(findings) == 1 ? "" : "s");
	json_array_foreach (findings, i, f) {
		json_t *lost = json_object_get(f, "seconds_lost");

		/* paths in messages come from the trace: escaped for the terminal */
		fputs("  ", out);
		fput_esc(jstr(f, "severity"), out);
		fputc('[', out);
		fput_esc(jstr(f, "id"), out);
		fputs("] ", out);
		fput_esc(jstr(f, "title"), out);
		fputs(": ", out);
		fput_esc(jstr(f, "message"), out);
		fputc('\n', out);
		if (json_is_number(lost) && json_number_value(lost) >= 0.1)
			fprintf(out, "      time lost: %.1f s\n", json_number_value(lost));
		fputs("      fix: ", out);
		fput_esc(jstr(f, "fix"), out);
		fputc('\n', out);
	}
}

int diagnose_command(const char *path, unsigned checks, const char *format)
{
	char err[1024];
	struct timeline *tl = timeline_load(path, err, sizeof(err));
	int lvl;

	if (!tl) {
		fprintf(stderr, "tts-launch: diagnose: %s\n", err);
		return 2;
	}
	lvl = diagnose_run(tl, checks ? checks : DIAG_ALL);
	if (!strcmp(format, "json")) {
		json_t *o = json_pack("{s:s, s:s, s:O}", "timeline", path, "result",
				      lvl == DIAG_ERROR ? "error"
				      : lvl		? "warning"
							: "clean",
				      "findings", json_object_get(timeline_json(tl), "findings"));

		json_dumpf(o, stdout,
			   JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
		fputc('\n', stdout);
		json_decref(o);
	} else if (!json_array_size(json_object_get(timeline_json(tl), "findings"))) {
		printf("tts-launch: diagnosis of %s: no findings\n", path);
	} else {
		diagnose_print(tl, stdout);
	}
	timeline_free(tl);
	return lvl;
}
