/* timeline: the jansson model of one start-up, its atomic writer and loader,
 * the phase inference and the end-of-start-up summary. Format:
 * docs/timeline.md; schema: tests/schema/timeline.schema.json. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomicfile.h"
#include "clock.h"
#include "hostprobe.h"
#include "redact.h"
#include "timeline.h"
#include "timeline_internal.h"
#include "timeline_sections.h"
#include "util.h"

#ifndef TTS_LAUNCH_VERSION
#define TTS_LAUNCH_VERSION "0.1"
#endif

/* ms rounded to the microsecond: the JSON stays readable and stable */
static json_t *ms_real(double ms) { return json_real(round(ms * 1000.0) / 1000.0); }

static json_t *str_or_null(const char *s) { return s ? json_text(s) : json_null(); }

static json_t *config_json(const struct config *c) { return c ? config_to_json(c) : json_object(); }

/* The tree, and its big lists as records (timeline_sections.h) */
struct timeline {
	json_t *root;
	struct tl_sections sec;
	struct timeline *next; /* the models alive, for timeline_sections_of */
};

static struct timeline *alive;

json_t *timeline_json(const struct timeline *tl) { return tl ? tl->root : NULL; }

struct tl_sections *timeline_sections(const struct timeline *tl)
{
	struct timeline *m = (struct timeline *)tl; /* the records follow the tree */

	if (!m)
		return NULL;
	tl_sections_sync(&m->sec, m->root);
	return &m->sec;
}

struct tl_sections *timeline_sections_of(const json_t *root)
{
	for (struct timeline *t = alive; root && t; t = t->next)
		if (t->root == root)
			return timeline_sections(t);
	return NULL;
}

struct timeline *timeline_wrap(json_t *root)
{
	struct timeline *tl = root ? calloc(1, sizeof(*tl)) : NULL;

	if (!tl || tl_sections_init(&tl->sec, true) < 0) {
		free(tl);
		json_decref(root);
		return NULL;
	}
	tl->root = root;
	tl->next = alive;
	alive = tl;
	return tl;
}

struct timeline *timeline_new(const struct config *c, int argc, char **argv)
{
	struct timespec w = clock_t0_wall();
	json_t *av = json_array(), *root;
	struct timeline *tl;
	char iso[64];
	struct tm tm;

	for (int i = 0; i < argc && argv; i++)
		json_array_append_new(av, json_text(argv[i]));
	gmtime_r(&w.tv_sec, &tm);
	strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(iso + strlen(iso), sizeof(iso) - strlen(iso), ".%03ldZ", w.tv_nsec / 1000000);
	root = json_pack(
	    "{s:s, s:{s:s, s:o, s:o, s:{s:s, s:f, s:I}}, s:o, "
	    "s:{s:b, s:n, s:[], s:[], s:i}, s:{s:n, s:[], s:n}, s:{}, s:[], s:[], s:[], s:[], "
	    "s:[], s:{s:i, s:i, s:i, s:{s:i, s:[]}, s:[], s:i, s:[]}, "
	    "s:{s:f, s:f, s:f, s:[]}, s:{s:i, s:i, s:[]}, s:{s:b, s:[]}, s:[], s:[], s:[], s:[], "
	    "s:[]}",
	    "schema", TIMELINE_SCHEMA, "launcher", "version", TTS_LAUNCH_VERSION, "argv", av,
	    "config", config_json(c), "start", "wall", iso, "wall_epoch",
	    (double)w.tv_sec + (double)(w.tv_nsec / 1000000) / 1e3, "monotonic_ns",
	    (json_int_t)clock_t0_ns(), "host", hostprobe_host_json(), "tracing", "enabled", 0,
	    "reason", "probes", "fallbacks", "events_lost", 0, "process", "pid", "command", "exit",
	    "marks", "phases", "files", "missing_paths", "network", "downloads", "memory",
	    "page_faults", 0, "major_faults", 0, "minor_faults", 0, "fault_rate", "bucket_ms", 100,
	    "counts", "per_process", "model_file_faults", 0, "mlock_calls", "sched", "io_wait_ms",
	    0.0, "sleep_ms", 0.0, "runqueue_ms", 0.0, "processes", "block", "requests", 0, "bytes",
	    0, "latency_hist", "python", "usdt", 0, "imports", "processes", "connects", "listens",
	    "requests", "findings");
	if (!root || !(tl = timeline_wrap(root)))
		return NULL;
	for (int i = 0; i < TLS_N; i++) /* the big lists are records from the start */
		tl_sections_place(&tl->sec, (enum tl_sec_id)i, tl->root);
	/* added in place (docs/timeline.md): failed writes/mkdirs, lock waits */
	json_object_set_new(tl->root, "failed_ops", json_array());
	json_object_set_new(tl->root, "locks", json_array());
	/* the mlock shim's outcome (launcher/mlock.c); null when it was not used */
	json_object_set_new(json_object_get(tl->root, "memory"), "mlock", json_null());
	/* the launcher's argv (--set env.X=...) and the effective config ([env],
	 * [app] args, the -- command) hold secrets: never in the model */
	redact_timeline(tl->root);
	return tl;
}

void timeline_free(struct timeline *tl)
{
	if (!tl)
		return;
	for (struct timeline **p = &alive; *p; p = &(*p)->next)
		if (*p == tl) {
			*p = tl->next;
			break;
		}
	/* a tree someone else holds too gets its lists back as JSON */
	if (tl->root && tl->root->refcount > 1) {
		tl_sections_sync(&tl->sec, tl->root);
		tl_sections_unplace(&tl->sec, tl->root);
	}
	tl_sections_free(&tl->sec);
	json_decref(tl->root);
	free(tl);
}

void timeline_mark(struct timeline *tl, const char *name, double ms)
{
	if (tl)
		json_object_set_new(json_object_get(tl->root, "marks"), name, ms_real(ms));
}

double timeline_mark_ms(const struct timeline *tl, const char *name)
{
	json_t *m = tl ? json_object_get(json_object_get(tl->root, "marks"), name) : NULL;

	return json_is_number(m) ? json_number_value(m) : -1;
}

static void phase_set(struct timeline *tl, const char *name, double start, double end,
		      const char *source)
{
	json_t *phases = json_object_get(tl->root, "phases"), *p;
	size_t i;

	if (end < start)
		end = start;
	json_array_foreach (phases, i, p) {
		if (!strcmp(json_string_value(json_object_get(p, "name")), name)) {
			json_array_remove(phases, i);
			break;
		}
	}
	json_array_append_new(phases, json_pack("{s:s, s:o, s:o, s:o, s:s}", "name", name,
						"start_ms", ms_real(start), "end_ms", ms_real(end),
						"dur_ms", ms_real(end - start), "source", source));
}

void timeline_phase(struct timeline *tl, const char *name, double start_ms, double end_ms)
{
	if (tl)
		phase_set(tl, name, start_ms, end_ms, "launcher");
}

void timeline_phase_from(struct timeline *tl, const char *name, double start_ms, double end_ms,
			 const char *source)
{
	if (tl)
		phase_set(tl, name, start_ms, end_ms, source);
}

void timeline_set_process(struct timeline *tl, pid_t pid, char *const *argv)
{
	json_t *p, *cmd = json_array();

	if (!tl)
		return;
	p = json_object_get(tl->root, "process");
	for (int i = 0; argv && argv[i]; i++)
		json_array_append_new(cmd, json_text(argv[i]));
	redact_json(cmd); /* --token abc, --hf-token=xyz */
	json_object_set_new(p, "pid", json_integer(pid));
	json_object_set_new(p, "command", cmd);
}

void timeline_set_exit(struct timeline *tl, int code, int sig, double ms)
{
	if (!tl)
		return;
	json_object_set_new(
	    json_object_get(tl->root, "process"), "exit",
	    json_pack("{s:o, s:o, s:o}", "code", code >= 0 ? json_integer(code) : json_null(),
		      "signal", sig > 0 ? json_integer(sig) : json_null(), "ms", ms_real(ms)));
	timeline_mark(tl, "exit", ms);
}

void timeline_set_tracing(struct timeline *tl, bool enabled, const char *reason)
{
	json_t *t;

	if (!tl)
		return;
	t = json_object_get(tl->root, "tracing");
	json_object_set_new(t, "enabled", json_boolean(enabled));
	json_object_set_new(t, "reason", str_or_null(reason));
}

int timeline_write(const struct timeline *tl, const char *path, uid_t uid, gid_t gid, char *err,
		   size_t errlen)
{
	struct atomic_file a;
	char why[512];
	FILE *f;

	if (!tl || !path) {
		snprintf(err, errlen, "failed to write timeline: nothing to write");
		return -1;
	}
	/* a temp file beside it, renamed over it: readers see the old file or
	 * the new one, never half of one (safefile.h: no link followed) */
	if (atomic_begin(&a, path, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "failed to write timeline: %s", why);
		return -1;
	}
	f = atomic_stream(&a);
	errno = 0;
	/* json_dumpf(JSON_INDENT(1) | JSON_REAL_PRECISION(15)) of the tree the
	 * records were */
	if (!f || tl_json_write(tl->root, timeline_sections(tl), f, 1, 15) < 0 ||
	    fputc('\n', f) == EOF || fflush(f) == EOF || ferror(f)) {
		snprintf(err, errlen, "failed to write timeline %s: %s", path,
			 strerror(errno ? errno : EIO));
		if (f)
			fclose(f);
		atomic_abort(&a);
		return -1;
	}
	if (fclose(f) == EOF) {
		snprintf(err, errlen, "failed to write timeline %s: %s", path, strerror(errno));
		atomic_abort(&a);
		return -1;
	}
	if (atomic_commit(&a, 0640, uid, gid, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "failed to write timeline: %s", why);
		return -1;
	}
	return 0;
}

int timeline_dump(const struct timeline *tl, FILE *out)
{
	/* json_dumpf(JSON_INDENT(2)) of the tree the records were */
	if (tl_json_write(tl->root, timeline_sections(tl), out, 2, 0) < 0)
		return -1;
	return fputc('\n', out) == EOF ? -1 : 0;
}

/* ---- loading: bounded, validated ---- */

/* Read at most max bytes of path; more is an error. */
static char *read_bounded(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0, cap = 0;
	char *buf = NULL;
	struct stat st;

	if (fd < 0) {
		snprintf(err, errlen, "failed to load timeline %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "failed to load timeline %s: it is a directory, not a file",
			 path);
		close(fd);
		return NULL;
	}
	/* a regular file's size says it at once; pipes and devices are read no
	 * further than the cap */
	if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size > max)
		goto too_large;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			/* the file's size when it has one, else grow; one more byte
			 * than max tells "too large" apart */
			size_t want = 65536;
			char *nb;

			if (cap)
				want = cap * 2;
			else if (S_ISREG(st.st_mode) && st.st_size > 0 && (size_t)st.st_size < max)
				want = (size_t)st.st_size + 1;

			if (want > max + 1)
				want = max + 1;
			if (want <= cap)
				goto too_large;
			nb = realloc(buf, want);
			if (!nb) {
				snprintf(err, errlen, "failed to load timeline %s: %s", path,
					 strerror(ENOMEM));
				goto fail;
			}
			buf = nb;
			cap = want;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "failed to load timeline %s: %s", path,
				 strerror(errno));
			goto fail;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	close(fd);
	*len = n;
	return buf;
too_large:
	snprintf(err, errlen,
		 "failed to load timeline %s: larger than %u MiB, the most tts-launch loads (a "
		 "timeline it writes is far smaller)",
		 path, TIMELINE_MAX_FILE >> 20);
fail:
	close(fd);
	free(buf);
	return NULL;
}

/* The versions a saved timeline may carry, newest first: the current one,
 * then every earlier one this build still reads (docs/timeline.md,
 * "Versions"). A change to a section bumps TIMELINE_SCHEMA and adds the old
 * string here, with what reading it takes, so `compare before.json
 * after.json` works across an upgrade. */
const char *const timeline_schemas[] = {
    TIMELINE_SCHEMA, /* "tts-launch.timeline/2" */
    /* the first: every section of /2 that it lacks reads as missing
     * (timeline_view.h's rule), nothing to convert */
    "tts-launch.timeline/1",
};
const size_t timeline_n_schemas = sizeof(timeline_schemas) / sizeof(timeline_schemas[0]);

bool timeline_schema_loadable(const char *schema)
{
	for (size_t i = 0; schema && i < timeline_n_schemas; i++)
		if (!strcmp(schema, timeline_schemas[i]))
			return true;
	return false;
}

void timeline_schema_list(char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = 0;
	for (size_t i = 0; i < timeline_n_schemas && used < len; i++) {
		int n =
		    snprintf(buf + used, len - used, "%s%s", i ? " or " : "", timeline_schemas[i]);

		if (n < 0)
			break;
		used += (size_t)n;
	}
}

enum vkind { V_NUM, V_TIME, V_SIZE };

/* How a member is checked, by its name (docs/timeline.md, "Limits"). */
static enum vkind kind_of(const char *key, bool in_marks)
{
	size_t l = key ? strlen(key) : 0;

	if (in_marks || (key && !strcmp(key, "ms")) || (l > 3 && !strcmp(key + l - 3, "_ms")))
		return V_TIME;
	if (key && (!strcmp(key, "bytes") || !strcmp(key, "size") || !strcmp(key, "len") ||
		    !strncmp(key, "bytes_", 6) || (l > 6 && !strcmp(key + l - 6, "_bytes"))))
		return V_SIZE;
	return V_NUM;
}

struct vctx {
	char path[512];
	char *err;
	size_t errlen;
	const char *name;
};

/* path[0..at) + ".key" or "[i]"; returns the new length (the path is cut,
 * never overrun: it only names the field in a message) */
static size_t vpath_add(struct vctx *c, size_t at, const char *key, size_t idx)
{
	int w;

	if (at >= sizeof(c->path))
		return at;
	if (key)
		w = snprintf(c->path + at, sizeof(c->path) - at, "%s%.*s", at ? "." : "", 64, key);
	else
		w = snprintf(c->path + at, sizeof(c->path) - at, "[%zu]", idx);
	if (w < 0)
		return at;
	at += (size_t)w;
	if (at >= sizeof(c->path))
		at = sizeof(c->path) - 1;
	utf8_trim(c->path);
	return strlen(c->path);
}

static int vfail(struct vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int vfail(struct vctx *c, const char *fmt, ...)
{
	char what[256], esc[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen,
		 "timeline %s: %s %s; not a timeline as tts-launch writes it (docs/timeline.md, "
		 "\"Limits\"): write it again with `tts-launch run`",
		 c->name, text_esc(c->path, esc, sizeof(esc)), what);
	return -1;
}

static int check_num(struct vctx *c, const json_t *v, enum vkind k)
{
	double x = json_number_value(v);

	if (json_is_null(v) || (json_is_string(v) && k == V_NUM))
		return 0;
	if (!json_is_number(v)) {
		if (k == V_TIME)
			return vfail(c, "is not a time (a number of ms, or null)");
		if (k == V_SIZE)
			return vfail(c, "is not a size (a number of bytes, or null)");
		return 0; /* other members: their readers take a wrong type as missing */
	}
	if (k == V_TIME && !(x >= 0 && x <= TIMELINE_MAX_MS))
		return vfail(c, "= %g is not a time (0 .. %g ms)", x, TIMELINE_MAX_MS);
	if (k == V_SIZE && !(x >= 0 && x <= TIMELINE_MAX_SIZE))
		return vfail(c, "= %g is not a size (0 .. %g bytes)", x, TIMELINE_MAX_SIZE);
	if (!(fabs(x) <= TIMELINE_MAX_NUM))
		return vfail(c, "= %g is out of range (-%g .. %g)", x, TIMELINE_MAX_NUM,
			     TIMELINE_MAX_NUM);
	return 0;
}

static int vwalk(struct vctx *c, const json_t *v, size_t at, const char *key, bool in_marks,
		 int depth)
{
	const char *k;
	json_t *m;
	size_t i, n;

	if (depth > TIMELINE_MAX_DEPTH)
		return vfail(c, "is nested deeper than %d levels", TIMELINE_MAX_DEPTH);
	if (json_is_object(v)) {
		/* the members of the top-level marks are times, whatever their names */
		bool marks = depth == 1 && key && !strcmp(key, "marks");

		json_object_foreach ((json_t *)v, k, m) {
			n = vpath_add(c, at, k, 0);
			if (vwalk(c, m, n, k, marks, depth + 1) < 0)
				return -1;
			c->path[at] = 0;
		}
		return 0;
	}
	if (json_is_array(v)) {
		json_array_foreach (v, i, m) {
			n = vpath_add(c, at, NULL, i);
			/* elements are checked as their array's name: counts[3] */
			if (vwalk(c, m, n, key, false, depth + 1) < 0)
				return -1;
			c->path[at] = 0;
		}
		return 0;
	}
	return check_num(c, v, kind_of(key, in_marks));
}

/* The lists renderers walk: arrays of objects, with the members they key
 * on (names, paths, peers) strings. */
static const struct {
	const char *list, *str;
} list_shapes[] = {
    {"phases", "name"},	  {"files", "path"},  {"missing_paths", "path"}, {"downloads", "path"},
    {"network", "peer"},  {"connects", NULL}, {"requests", NULL},	 {"findings", NULL},
    {"failed_ops", NULL}, {"locks", NULL},    {"renames", NULL},	 {"symlinks", NULL},
    {"processes", NULL},  {"listens", NULL},
};

int timeline_validate(const json_t *root, const char *name, char *err, size_t errlen)
{
	struct vctx c = {.err = err, .errlen = errlen, .name = name ? name : "?"};
	const char *schema = json_string_value(json_object_get(root, "schema"));
	char esc[128];

	if (!json_is_object(root)) {
		snprintf(err, errlen, "failed to load timeline %s: not a JSON object", c.name);
		return -1;
	}
	if (!timeline_schema_loadable(schema)) {
		char want[256];

		timeline_schema_list(want, sizeof(want));
		snprintf(err, errlen, "failed to load timeline %s: schema is %s, expected %s",
			 c.name, schema ? text_esc(schema, esc, sizeof(esc)) : "(missing)", want);
		return -1;
	}
	for (size_t s = 0; s < sizeof(list_shapes) / sizeof(list_shapes[0]); s++) {
		json_t *l = json_object_get(root, list_shapes[s].list), *e;
		size_t i;

		if (!l || json_is_null(l))
			continue;
		snprintf(c.path, sizeof(c.path), "%s", list_shapes[s].list);
		if (!json_is_array(l))
			return vfail(&c, "is not a list");
		json_array_foreach (l, i, e) {
			snprintf(c.path, sizeof(c.path), "%s[%zu]", list_shapes[s].list, i);
			if (!json_is_object(e))
				return vfail(&c, "is not an object");
			if (list_shapes[s].str &&
			    !json_is_string(json_object_get(e, list_shapes[s].str))) {
				snprintf(c.path, sizeof(c.path), "%s[%zu].%s", list_shapes[s].list,
					 i, list_shapes[s].str);
				return vfail(&c, "is missing or not a string");
			}
		}
	}
	if (json_object_get(root, "marks") && !json_is_object(json_object_get(root, "marks"))) {
		snprintf(c.path, sizeof(c.path), "marks");
		return vfail(&c, "is not an object");
	}
	c.path[0] = 0;
	return vwalk(&c, root, 0, NULL, false, 0);
}

struct timeline *timeline_load(const char *path, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root;
	struct timeline *tl;
	size_t len = 0;
	char *buf = read_bounded(path, TIMELINE_MAX_FILE, &len, err, errlen);

	if (!buf)
		return NULL;
	/* jansson itself refuses numbers beyond a double (1e400: "real number
	 * overflow"), invalid UTF-8, \u0000 and nesting past 2048 */
	root = json_loadb(buf, len, 0, &je);
	free(buf);
	if (!root) {
		snprintf(err, errlen, "failed to load timeline %s: line %d: %s", path, je.line,
			 je.text);
		return NULL;
	}
	if (timeline_validate(root, path, err, errlen) < 0) {
		json_decref(root);
		return NULL;
	}
	redact_timeline(root); /* a file written before redaction */
	tl = timeline_wrap(root);
	if (!tl)
		snprintf(err, errlen, "failed to load timeline %s: %s", path, strerror(ENOMEM));
	else
		timeline_sections(tl); /* the big lists as records now, out of the tree */
	return tl;
}

static const char *sort_key;

struct sort_item {
	json_t *v;
	size_t idx;
};

static int by_key(const void *a, const void *b)
{
	const struct sort_item *x = a, *y = b;
	double p = json_number_value(json_object_get(x->v, sort_key));
	double q = json_number_value(json_object_get(y->v, sort_key));

	if (p != q)
		return p < q ? -1 : 1;
	/* qsort is not stable: ties keep their order */
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void timeline_sort_by(json_t *array, const char *key)
{
	size_t n = json_array_size(array);
	struct sort_item *v;

	if (n < 2)
		return;
	v = malloc(n * sizeof(*v));
	if (!v)
		return;
	for (size_t i = 0; i < n; i++) {
		v[i].v = json_incref(json_array_get(array, i));
		v[i].idx = i;
	}
	sort_key = key;
	qsort(v, n, sizeof(*v), by_key);
	json_array_clear(array);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(array, v[i].v);
	free(v);
}
