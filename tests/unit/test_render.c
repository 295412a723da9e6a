/* The renderers (perfetto, prom, svg, html) on small hand-built models: the
 * lane assignment of complete events, the trace-event structure, the
 * Prometheus exposition (names, escaping, families, histogram), the SVG's
 * bars, escaping and well-formedness, and the HTML tables. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "render.h"
#include "render_perfetto.h"
#include "render_prom.h"
#include "render_svg.h"
#include "timeline.h"
#include "timeline_internal.h"

#define LANE_TID (1 << 22)

/* ---- helpers ------------------------------------------------------------ */

static json_t *parse(const char *text)
{
	json_error_t e;
	json_t *root = json_loads(text, 0, &e);

	if (!root)
		fail_msg("bad model: %s (line %d)", e.text, e.line);
	return root;
}

typedef int (*render_fn)(const struct timeline *, FILE *);

/* The renderer's output for root, NUL-terminated (caller frees). */
static char *render(render_fn fn, json_t *root)
{
	struct timeline *tl = timeline_wrap(json_incref(root));
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(tl);
	assert_non_null(out);
	assert_int_equal(fn(tl, out), 0);
	assert_int_equal(fclose(out), 0);
	assert_non_null(buf);
	timeline_free(tl);
	return buf;
}

static size_t count_str(const char *hay, const char *needle)
{
	size_t n = 0, l = strlen(needle);

	for (const char *p = strstr(hay, needle); p; p = strstr(p + l, needle))
		n++;
	return n;
}

/* Every byte sequence is well-formed UTF-8 (no overlongs, no surrogates). */
static int valid_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		int n;
		unsigned cp;

		if (*p < 0x80) {
			p++;
			continue;
		} else if ((*p & 0xe0) == 0xc0) {
			n = 1;
			cp = *p & 0x1f;
		} else if ((*p & 0xf0) == 0xe0) {
			n = 2;
			cp = *p & 0x0f;
		} else if ((*p & 0xf8) == 0xf0) {
			n = 3;
			cp = *p & 0x07;
		} else {
			return 0;
		}
		for (int i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		p += n + 1;
	}
	return 1;
}

/* ---- perfetto: lanes ------------------------------------------------------ */

static int pair_nests(double s1, double e1, double s2, double e2)
{
	return e1 <= s2 || e2 <= s1 ||	 /* one after the other */
	       (s1 <= s2 && e2 <= e1) || /* 1 contains 2 */
	       (s2 <= s1 && e1 <= e2);	 /* 2 contains 1 */
}

static void test_lanes_nested_spans_share_one_lane(void **state)
{
	/* a parent, a child, a grandchild, a second child, and a span that
	 * starts exactly where the parent ends */
	double s[] = {0, 1, 2, 6, 10}, e[] = {10, 5, 3, 9, 12};
	int lane[5] = {-1, -1, -1, -1, -1};

	(void)state;
	assert_int_equal(perfetto_assign_lanes(s, e, 5, lane), 1);
	for (int i = 0; i < 5; i++)
		assert_int_equal(lane[i], 0);
}

static void test_lanes_partial_overlaps_go_to_separate_lanes(void **state)
{
	/* b starts inside a and ends after it; c starts inside b and ends
	 * after it too: three lanes. d nests in a (lane 0 is the lowest it
	 * fits, though b on lane 1 also contains it). */
	double s[] = {0, 5, 7, 6}, e[] = {10, 15, 20, 8};
	int lane[4];

	(void)state;
	assert_int_equal(perfetto_assign_lanes(s, e, 4, lane), 3);
	assert_int_equal(lane[0], 0);
	assert_int_equal(lane[1], 1);
	assert_int_equal(lane[2], 2);
	assert_int_equal(lane[3], 0);
}

static void test_lanes_equal_starts_put_the_longer_span_first(void **state)
{
	/* listed shorter first: the longer one is still the parent, so both
	 * share lane 0; identical spans nest too */
	double s[] = {0, 0, 3, 3}, e[] = {5, 10, 4, 4};
	int lane[4];

	(void)state;
	assert_int_equal(perfetto_assign_lanes(s, e, 4, lane), 1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(lane[i], 0);
}

/* Bounded work on any input: a staircase of spans that each overlap the
 * previous one only partly would need one lane each; past
 * PERFETTO_MAX_LANES they share the last. */
static void test_lanes_are_capped(void **state)
{
	enum { N = 1000 };
	double *s = calloc(N, sizeof(*s)), *e = calloc(N, sizeof(*e));
	int *lane = calloc(N, sizeof(*lane));

	(void)state;
	assert_non_null(s);
	assert_non_null(e);
	assert_non_null(lane);
	for (int i = 0; i < N; i++) {
		s[i] = i;
		e[i] = i + N;
	}
	assert_int_equal(perfetto_assign_lanes(s, e, N, lane), PERFETTO_MAX_LANES);
	for (int i = 0; i < N; i++)
		assert_int_equal(lane[i], i < PERFETTO_MAX_LANES ? i : PERFETTO_MAX_LANES - 1);
	free(s);
	free(e);
	free(lane);
}

static void test_lanes_empty_input(void **state)
{
	int lane[1] = {-7};

	(void)state;
	assert_int_equal(perfetto_assign_lanes(NULL, NULL, 0, lane), 0);
	assert_int_equal(lane[0], -7);
}

/* next permutation of idx[0..n) in lexicographic order; 0 after the last */
static int next_perm(int *idx, int n)
{
	int i = n - 2, j = n - 1, t;

	while (i >= 0 && idx[i] >= idx[i + 1])
		i--;
	if (i < 0)
		return 0;
	while (idx[j] <= idx[i])
		j--;
	t = idx[i], idx[i] = idx[j], idx[j] = t;
	for (int a = i + 1, b = n - 1; a < b; a++, b--)
		t = idx[a], idx[a] = idx[b], idx[b] = t;
	return 1;
}

static void test_lanes_do_not_depend_on_input_order(void **state)
{
	/* overlapping in several ways, with ties on starts and ends */
	static const double S[] = {0, 2, 2, 4, 8, 9}, E[] = {10, 12, 6, 5, 11, 12};
	enum { N = 6 };
	int want[N], idx[N], perms = 0, lanes0;

	(void)state;
	lanes0 = perfetto_assign_lanes(S, E, N, want);
	assert_true(lanes0 > 1);
	for (int i = 0; i < N; i++)
		idx[i] = i;
	do {
		double s[N], e[N];
		int lane[N];

		for (int i = 0; i < N; i++)
			s[i] = S[idx[i]], e[i] = E[idx[i]];
		assert_int_equal(perfetto_assign_lanes(s, e, N, lane), lanes0);
		for (int i = 0; i < N; i++)
			assert_int_equal(lane[i], want[idx[i]]);
		perms++;
	} while (next_perm(idx, N));
	assert_int_equal(perms, 720);
}

/* Random spans on a coarse grid (many ties): every lane nests, and each
 * span went to the lowest lane it fits in, taken in order of start (longer
 * first). Checked against the definition, not the implementation. */
static void test_lanes_random_spans_nest_in_the_lowest_lane(void **state)
{
	unsigned x = 12345;

	(void)state;
	for (int round = 0; round < 300; round++) {
		enum { MAXN = 40 };
		double s[MAXN], e[MAXN];
		int lane[MAXN], n = 1 + round % MAXN, lanes, maxlane = -1;

		for (int i = 0; i < n; i++) {
			x = x * 1103515245u + 12345u;
			s[i] = (x >> 16) % 30;
			x = x * 1103515245u + 12345u;
			e[i] = s[i] + (x >> 16) % 12; /* zero-length ones too */
		}
		lanes = perfetto_assign_lanes(s, e, (size_t)n, lane);
		for (int i = 0; i < n; i++) {
			assert_true(lane[i] >= 0 && lane[i] < lanes);
			if (lane[i] > maxlane)
				maxlane = lane[i];
			for (int j = 0; j < n; j++)
				if (i != j && lane[i] == lane[j] &&
				    !pair_nests(s[i], e[i], s[j], e[j]))
					fail_msg("round %d: [%g,%g] and [%g,%g] share lane %d",
						 round, s[i], e[i], s[j], e[j], lane[i]);
		}
		assert_int_equal(lanes, maxlane + 1);
		/* lowest lane: every lower lane holds an earlier span that is still
		 * open at i's start and ends inside i */
		for (int i = 0; i < n; i++)
			for (int k = 0; k < lane[i]; k++) {
				int blocked = 0;

				for (int j = 0; j < n && !blocked; j++) {
					int earlier = s[j] < s[i] ||
						      (s[j] == s[i] && e[j] > e[i]) ||
						      (s[j] == s[i] && e[j] == e[i] && j < i);

					blocked = j != i && lane[j] == k && earlier &&
						  s[i] < e[j] && e[j] < e[i];
				}
				if (!blocked)
					fail_msg("round %d: [%g,%g] on lane %d fits lane %d", round,
						 s[i], e[i], lane[i], k);
			}
	}
}

/* ---- perfetto: events ----------------------------------------------------- */

static const char *PERFETTO_MODEL =
    "{\"schema\": \"tts-launch.timeline/1\","
    " \"process\": {\"pid\": 200},"
    " \"processes\": [{\"pid\": 200, \"ppid\": 100, \"command\": \"/usr/bin/python3\","
    "   \"exec_ms\": 1.0, \"exit_ms\": 50.0}],"
    " \"marks\": {\"launch\": 0, \"exec\": 1.0, \"ready\": 40.5},"
    " \"phases\": ["
    "   {\"name\": \"a\", \"start_ms\": 0, \"end_ms\": 10.0, \"source\": \"trace\"},"
    "   {\"name\": \"b\", \"start_ms\": 2.0, \"end_ms\": 4.0006, \"source\": \"trace\"},"
    "   {\"name\": \"c\", \"start_ms\": 5.0, \"end_ms\": 20.0, \"source\": \"launcher\"}],"
    " \"python\": {\"imports\": [{\"name\": \"torch\", \"pid\": 200, \"start_ms\": 2.0,"
    "   \"end_ms\": 30.0}, {\"name\": \"other\", \"pid\": 999, \"start_ms\": 2.0,"
    "   \"end_ms\": 3.0}]},"
    " \"downloads\": [{\"path\": \"/c/models--org--repo/blobs/abcdef0123456789.incomplete\","
    "   \"bytes\": 2000000, \"first_ms\": 10.0, \"last_ms\": 30.0, \"rate_mb_s\": 100}],"
    " \"requests\": [{\"method\": \"POST\", \"path\": \"/tts\", \"start_ms\": 41.0,"
    "   \"end_ms\": 43.25}],"
    " \"memory\": {\"fault_rate\": {\"bucket_ms\": 10, \"counts\": [5, 0, 20]},"
    "   \"mlock_calls\": [{\"call\": \"mlockall\", \"pid\": 200, \"start_ms\": 12.5, \"result\": "
    "0}]},"
    " \"sched\": {\"processes\": [{\"pid\": 200, \"io_wait_ms\": 1.5, \"sleep_ms\": 2,"
    "   \"runqueue_ms\": 3}]}}";

static json_t *perfetto_events(const char *model, json_t **doc_out)
{
	json_t *root = parse(model), *doc;
	char *out = render(render_perfetto, root);
	json_error_t e;

	doc = json_loads(out, 0, &e);
	if (!doc)
		fail_msg("perfetto output is not JSON: %s", e.text);
	free(out);
	json_decref(root);
	*doc_out = doc;
	assert_true(json_is_array(json_object_get(doc, "traceEvents")));
	return json_object_get(doc, "traceEvents");
}

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static json_int_t integer(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v))
		fail_msg("%s is not an integer", k);
	return json_integer_value(v);
}

static double arg(const json_t *ev, const char *k)
{
	json_t *v = json_object_get(json_object_get(ev, "args"), k);

	if (!json_is_number(v))
		fail_msg("args.%s is not a number", k);
	return json_number_value(v);
}

/* The only event with this phase and name (and cat, when not NULL). */
static json_t *one(json_t *evs, const char *ph, const char *cat, const char *name)
{
	json_t *v, *found = NULL;
	size_t i;

	json_array_foreach (evs, i, v)
		if (!strcmp(str(v, "ph"), ph) && !strcmp(str(v, "name"), name) &&
		    (!cat || (str(v, "cat") && !strcmp(str(v, "cat"), cat)))) {
			if (found)
				fail_msg("two %s events named %s", ph, name);
			found = v;
		}
	if (!found)
		fail_msg("no %s event named %s", ph, name);
	return found;
}

static size_t count_ph(json_t *evs, const char *ph, const char *name)
{
	json_t *v;
	size_t i, n = 0;

	json_array_foreach (evs, i, v)
		if (!strcmp(str(v, "ph"), ph) && (!name || !strcmp(str(v, "name"), name)))
			n++;
	return n;
}

static void assert_x(json_t *ev, const char *cat, json_int_t ts, json_int_t dur, int pid, int tid)
{
	assert_string_equal(str(ev, "cat"), cat);
	assert_int_equal(integer(ev, "ts"), ts);
	assert_int_equal(integer(ev, "dur"), dur);
	assert_int_equal(integer(ev, "pid"), pid);
	assert_int_equal(integer(ev, "tid"), tid);
}

/* The metadata event of this kind for (pid, tid): its args value. */
static json_t *meta_arg(json_t *evs, const char *what, int pid, int tid)
{
	json_t *v;
	size_t i;

	json_array_foreach (evs, i, v)
		if (!strcmp(str(v, "ph"), "M") && !strcmp(str(v, "name"), what) &&
		    integer(v, "pid") == pid && integer(v, "tid") == tid) {
			json_t *args = json_object_get(v, "args");

			assert_int_equal(json_object_size(args), 1);
			return json_object_iter_value(json_object_iter(args));
		}
	fail_msg("no %s for %d/%d", what, pid, tid);
	return NULL;
}

static void test_perfetto_phases_are_complete_events_in_lanes(void **state)
{
	json_t *doc, *evs = perfetto_events(PERFETTO_MODEL, &doc);

	(void)state;
	assert_string_equal(str(doc, "displayTimeUnit"), "ms");
	assert_int_equal(count_ph(evs, "X", NULL), 5); /* 3 phases, 1 process, 1 import */
	/* microseconds, rounded: 4.0006 ms is 4001 µs */
	assert_x(one(evs, "X", "phase", "a"), "phase", 0, 10000, 100, 100);
	assert_x(one(evs, "X", "phase", "b"), "phase", 2000, 2001, 100, 100);
	/* c overlaps a partially: the second lane, a thread of its own */
	assert_x(one(evs, "X", "phase", "c"), "phase", 5000, 15000, 100, LANE_TID);
	assert_string_equal(json_string_value(meta_arg(evs, "thread_name", 100, LANE_TID)),
			    "phases (2)");
	assert_string_equal(json_string_value(meta_arg(evs, "thread_name", 100, 100)), "phases");
	assert_string_equal(json_string_value(meta_arg(evs, "process_name", 100, 100)),
			    "tts-launch");
	assert_string_equal(str(json_object_get(one(evs, "X", "phase", "c"), "args"), "source"),
			    "launcher");
	/* the traced process: its life and its own imports only */
	assert_string_equal(json_string_value(meta_arg(evs, "process_name", 200, 200)),
			    "python3 (200)");
	assert_x(one(evs, "X", "process", "python3"), "process", 1000, 49000, 200, 200);
	assert_x(one(evs, "X", "import", "torch"), "import", 2000, 28000, 200, 200);
	assert_int_equal(count_ph(evs, "X", "other"), 0);
	json_decref(doc);
}

static void test_perfetto_marks_are_global_instants(void **state)
{
	json_t *doc, *evs = perfetto_events(PERFETTO_MODEL, &doc), *ev;
	const char *names[] = {"launch", "exec", "ready"};
	json_int_t ts[] = {0, 1000, 40500};

	(void)state;
	for (int i = 0; i < 3; i++) {
		ev = one(evs, "i", "mark", names[i]);
		assert_string_equal(str(ev, "s"), "g");
		assert_int_equal(integer(ev, "ts"), ts[i]);
		assert_int_equal(integer(ev, "pid"), 100);
	}
	/* the mlock call: an instant on its process */
	ev = one(evs, "i", "mlock", "mlockall");
	assert_string_equal(str(ev, "s"), "p");
	assert_int_equal(integer(ev, "ts"), 12500);
	assert_int_equal(integer(ev, "pid"), 200);
	assert_int_equal(count_ph(evs, "i", NULL), 4);
	json_decref(doc);
}

static void test_perfetto_downloads_and_requests_are_async_pairs(void **state)
{
	json_t *doc, *evs = perfetto_events(PERFETTO_MODEL, &doc), *b, *e;

	(void)state;
	assert_int_equal(count_ph(evs, "b", NULL), 2);
	assert_int_equal(count_ph(evs, "e", NULL), 2);
	b = one(evs, "b", "download", "org/repo abcdef01");
	e = one(evs, "e", "download", "org/repo abcdef01");
	assert_non_null(str(b, "id"));
	assert_string_equal(str(b, "id"), str(e, "id"));
	assert_int_equal(integer(b, "ts"), 10000);
	assert_int_equal(integer(e, "ts"), 30000);
	assert_int_equal(integer(b, "pid"), 200);
	assert_int_equal(integer(e, "pid"), 200);
	assert_string_equal(str(json_object_get(b, "args"), "path"),
			    "/c/models--org--repo/blobs/abcdef0123456789.incomplete");

	b = one(evs, "b", "request", "POST /tts");
	e = one(evs, "e", "request", "POST /tts");
	assert_non_null(str(b, "id"));
	assert_string_equal(str(b, "id"), str(e, "id"));
	assert_string_not_equal(str(b, "id"),
				str(one(evs, "b", "download", "org/repo abcdef01"), "id"));
	assert_int_equal(integer(b, "ts"), 41000);
	assert_int_equal(integer(e, "ts"), 43250);
	json_decref(doc);
}

/* The points of counter name in file order: ts and one arg. */
static size_t counter_points(json_t *evs, const char *name, const char *key, json_int_t *ts,
			     double *val, size_t max)
{
	json_t *v;
	size_t i, n = 0;

	json_array_foreach (evs, i, v)
		if (!strcmp(str(v, "ph"), "C") && !strcmp(str(v, "name"), name)) {
			assert_true(n < max);
			ts[n] = integer(v, "ts");
			val[n++] = arg(v, key);
		}
	return n;
}

static void test_perfetto_counters(void **state)
{
	json_t *doc, *evs = perfetto_events(PERFETTO_MODEL, &doc), *v;
	json_int_t ts[8];
	double val[8];
	size_t i, n;

	(void)state;
	/* faults per second: 5 faults in 10 ms is 500/s; a closing zero */
	n = counter_points(evs, "page faults/s", "faults/s", ts, val, 8);
	assert_int_equal(n, 4);
	assert_int_equal(ts[0], 0);
	assert_int_equal(ts[1], 10000);
	assert_int_equal(ts[2], 20000);
	assert_int_equal(ts[3], 30000);
	assert_float_equal(val[0], 500, 1e-9);
	assert_float_equal(val[1], 0, 1e-9);
	assert_float_equal(val[2], 2000, 1e-9);
	assert_float_equal(val[3], 0, 1e-9);
	/* 2 MB in 20 ms: 100 MB/s from the start, 0 from the end */
	n = counter_points(evs, "download MB/s", "MB/s", ts, val, 8);
	assert_int_equal(n, 2);
	assert_int_equal(ts[0], 10000);
	assert_float_equal(val[0], 100, 1e-9);
	assert_int_equal(ts[1], 30000);
	assert_float_equal(val[1], 0, 1e-9);
	/* off-CPU: 0 at exec, the totals at exit */
	n = counter_points(evs, "off-CPU ms", "io_wait", ts, val, 8);
	assert_int_equal(n, 2);
	assert_int_equal(ts[0], 1000);
	assert_float_equal(val[0], 0, 1e-9);
	assert_int_equal(ts[1], 50000);
	assert_float_equal(val[1], 1.5, 1e-9);
	json_array_foreach (evs, i, v)
		if (!strcmp(str(v, "ph"), "C") && !strcmp(str(v, "name"), "off-CPU ms") &&
		    integer(v, "ts") == 50000) {
			assert_float_equal(arg(v, "sleep"), 2, 1e-9);
			assert_float_equal(arg(v, "runqueue"), 3, 1e-9);
			assert_int_equal(integer(v, "pid"), 200);
		}
	json_decref(doc);
}

static void test_perfetto_events_are_sorted_and_deterministic(void **state)
{
	json_t *root = parse(PERFETTO_MODEL), *doc, *v;
	char *a = render(render_perfetto, root), *b = render(render_perfetto, root);
	json_int_t last = -1;
	int seen_timed = 0;
	size_t i;

	(void)state;
	assert_string_equal(a, b);
	doc = json_loads(a, 0, NULL);
	assert_non_null(doc);
	json_array_foreach (json_object_get(doc, "traceEvents"), i, v) {
		if (!strcmp(str(v, "ph"), "M")) {
			assert_false(seen_timed); /* metadata first */
			continue;
		}
		seen_timed = 1;
		assert_true(integer(v, "ts") >= last);
		last = integer(v, "ts");
	}
	assert_true(seen_timed);
	json_decref(doc);
	json_decref(root);
	free(a);
	free(b);
}

static void test_perfetto_empty_model(void **state)
{
	json_t *doc, *evs = perfetto_events("{}", &doc);

	(void)state;
	assert_int_equal(count_ph(evs, "X", NULL), 0);
	assert_int_equal(count_ph(evs, "b", NULL), 0);
	assert_int_equal(count_ph(evs, "i", NULL), 0);
	assert_int_equal(count_ph(evs, "C", NULL), 0);
	json_decref(doc);
}

/* ---- prom ----------------------------------------------------------------- */

/* Downloads named by the file they become (downloads[].name) in every
 * renderer: a local_dir temp file and a hub cache blob, the temp name and
 * the hashes nowhere. */
static const char *NAMED_MODEL =
    "{\"marks\": {\"launch\": 0, \"exec\": 1, \"ready\": 90}, \"tracing\": {\"enabled\": true},"
    " \"phases\": [{\"name\": \"download:hf_cache/w2v-bert-2.0/model.safetensors\","
    "   \"start_ms\": 10, \"end_ms\": 40, \"source\": \"trace\"},"
    "  {\"name\": \"download:facebook/w2v-bert-2.0:config.json\", \"start_ms\": 12,"
    "   \"end_ms\": 20, \"source\": \"trace\"}],"
    " \"files\": [{\"path\": \"/m/hf_cache/w2v-bert-2.0/.cache/huggingface/download/"
    "xGOK=.4f1ad95a60af58e2e3a451a88064a1fa0e04f7e39e9c58227480247c72a6a304.incomplete\","
    "   \"class\": \"download\", \"bytes_written\": 3000, \"first_ms\": 10, \"last_ms\": 40}],"
    " \"missing_paths\": [{\"path\": \"/c/models--facebook--w2v-bert-2.0/blobs/"
    "90532cc6163a37fb31c2c4259059b297b54dc5e8\", \"attempts\": 1, \"class\": \"hf_cache\","
    "   \"first_ms\": 11, \"last_ms\": 11}],"
    " \"downloads\": [{\"path\": \"/m/hf_cache/w2v-bert-2.0/.cache/huggingface/download/"
    "xGOK=.4f1ad95a60af58e2e3a451a88064a1fa0e04f7e39e9c58227480247c72a6a304.incomplete\","
    "   \"name\": \"hf_cache/w2v-bert-2.0/model.safetensors\", \"bytes\": 3000,"
    "   \"first_ms\": 10, \"last_ms\": 40, \"rate_mb_s\": 0.1, \"completed\": true,"
    "   \"complete\": true, \"final_path\": \"/m/hf_cache/w2v-bert-2.0/model.safetensors\"},"
    "  {\"path\": \"/c/models--facebook--w2v-bert-2.0/blobs/"
    "90532cc6163a37fb31c2c4259059b297b54dc5e8.incomplete\","
    "   \"name\": \"facebook/w2v-bert-2.0:config.json\", \"bytes\": 162, \"first_ms\": 12,"
    "   \"last_ms\": 20, \"completed\": true, \"complete\": true,"
    "   \"final_path\": \"/c/models--facebook--w2v-bert-2.0/blobs/"
    "90532cc6163a37fb31c2c4259059b297b54dc5e8\","
    "   \"link\": \"/c/models--facebook--w2v-bert-2.0/snapshots/main/config.json\"}],"
    " \"copies\": [{\"path\": \"/m/hf_cache/c.bin\", \"name\": \"hf_cache/c.bin\","
    "   \"source\": \"/o/c.bin\", \"bytes\": 5, \"first_ms\": 50, \"last_ms\": 51}]}";

static void test_downloads_named_in_every_renderer(void **state)
{
	render_fn fns[] = {render_text, render_svg, render_html, render_perfetto, render_prom};
	json_t *root = parse(NAMED_MODEL);

	(void)state;
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		char *out = render(fns[i], root);

		assert_null(strstr(out, ".incomplete"));
		assert_null(strstr(out, "4f1ad95a60af"));
		assert_null(strstr(out, "90532cc6163a"));
		assert_non_null(strstr(out, "hf_cache/w2v-bert-2.0/model.safetensors"));
		assert_non_null(strstr(out, "facebook/w2v-bert-2.0:config.json"));
		if (fns[i] == render_prom)
			assert_non_null(
			    strstr(out, "{file=\"facebook/w2v-bert-2.0:config.json\"}"));
		if (fns[i] == render_svg)
			assert_non_null(
			    strstr(out, "download hf_cache/w2v-bert-2.0/model.safetensors ("));
		if (fns[i] == render_text)
			assert_non_null(strstr(out, "hf_cache/c.bin"));
		free(out);
	}
	json_decref(root);
}

static const char *PROM_MODEL =
    "{\"schema\": \"tts-launch.timeline/1\","
    " \"tracing\": {\"enabled\": true, \"events_lost\": 7},"
    " \"marks\": {\"launch\": 0, \"ready\": 1500.5},"
    " \"phases\": ["
    "   {\"name\": \"imports\", \"start_ms\": 100, \"end_ms\": 600},"
    "   {\"name\": \"say \\\"hi\\\"\", \"start_ms\": 0, \"end_ms\": 250},"
    "   {\"name\": \"imports\", \"start_ms\": 700, \"end_ms\": 950}],"
    " \"memory\": {\"page_faults\": 123456, \"major_faults\": 78, \"model_file_faults\": 9,"
    "   \"mlock_calls\": [{\"call\": \"mlock\", \"result\": 0}, {\"call\": \"mlockall\","
    "   \"result\": -1}, {\"call\": \"mlock\", \"result\": -1}]},"
    " \"missing_paths\": [{\"path\": \"/x\", \"attempts\": 4}, {\"path\": \"/y\", \"attempts\": "
    "6}],"
    " \"files\": [{\"path\": \"/a\", \"bytes_read\": 1000}, {\"path\": \"/b\", \"bytes_read\": "
    "24}],"
    " \"network\": [{\"peer\": \"1.2.3.4:443\", \"failures\": 2}],"
    " \"downloads\": ["
    "   {\"path\": \"/m/a\\\"b\\\\c\\nd.bin.incomplete\", \"bytes\": 1234,"
    "    \"first_ms\": 10, \"last_ms\": 2010},"
    "   {\"path\": \"/m/plain.bin\", \"bytes\": 5, \"first_ms\": 0, \"last_ms\": 1}],"
    " \"sched\": {\"io_wait_ms\": 1500, \"sleep_ms\": 250, \"runqueue_ms\": 2},"
    " \"requests\": ["
    "   {\"start_ms\": 2000, \"end_ms\": 2003, \"dur_ms\": 3, \"page_faults\": 10,"
    "    \"major_faults\": 1},"
    "   {\"start_ms\": 2100, \"end_ms\": 2110, \"page_faults\": 20},"
    "   {\"start_ms\": 2200, \"dur_ms\": 700},"
    "   {\"start_ms\": 3000, \"dur_ms\": 90000, \"major_faults\": 2}],"
    " \"findings\": [{\"rule\": \"r1\"}, {\"rule\": \"r2\"}]}";

/* The value of the sample whose line starts with "key " (exactly one). */
static double prom_get(const char *text, const char *key)
{
	size_t l = strlen(key);
	const char *found = NULL;

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');

		if (!strncmp(p, key, l) && p[l] == ' ') {
			if (found)
				fail_msg("sample %s twice", key);
			found = p + l + 1;
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	if (!found)
		fail_msg("no sample %s", key);
	if (!strncmp(found, "+Inf", 4))
		return INFINITY;
	return strtod(found, NULL);
}

static int has_line(const char *text, const char *line)
{
	size_t l = strlen(line);

	for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, line, l) && (p[l] == '\n' || !p[l]))
			return 1;
	return 0;
}

/* Families: one HELP then one TYPE, before all of its samples, which come
 * together; each sample's name belongs to a declared family (histograms:
 * _bucket, _sum, _count). Metric names match [a-zA-Z_:][a-zA-Z0-9_:]*. */
static void check_families(const char *text)
{
	enum { MAXF = 64 };
	char fam[MAXF][96], type[MAXF][16], cur[96] = "";
	int nf = 0, samples[MAXF] = {0}, closed[MAXF] = {0};
	const char *p = text;

	assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n');
	while (*p) {
		const char *nl = strchr(p, '\n');
		char line[8192], name[96];
		size_t l = (size_t)(nl - p), nlen;

		assert_non_null(nl);
		assert_true(l < sizeof(line));
		memcpy(line, p, l);
		line[l] = 0;
		p = nl + 1;
		if (!strncmp(line, "# HELP ", 7)) {
			sscanf(line + 7, "%95s", name);
			for (int i = 0; i < nf; i++)
				if (!strcmp(fam[i], name))
					fail_msg("HELP twice for %s", name);
			for (int i = 0; i < nf; i++)
				if (!strcmp(fam[i], cur))
					closed[i] = 1;
			assert_true(nf < MAXF);
			strcpy(fam[nf], name);
			type[nf][0] = 0;
			strcpy(cur, name);
			nf++;
			continue;
		}
		if (!strncmp(line, "# TYPE ", 7)) {
			char t[16];

			assert_int_equal(sscanf(line + 7, "%95s %15s", name, t), 2);
			/* right after its HELP, once */
			assert_string_equal(name, cur);
			assert_string_equal(type[nf - 1], "");
			assert_true(!strcmp(t, "gauge") || !strcmp(t, "counter") ||
				    !strcmp(t, "histogram"));
			strcpy(type[nf - 1], t);
			continue;
		}
		assert_true(line[0] != '#' && line[0] != 0);
		nlen = strspn(line,
			      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:0123456789");
		assert_true(nlen > 0 && nlen < sizeof(name));
		assert_true(!(line[0] >= '0' && line[0] <= '9'));
		assert_true(line[nlen] == '{' || line[nlen] == ' ');
		memcpy(name, line, nlen);
		name[nlen] = 0;
		{
			int f = -1;

			for (int i = 0; i < nf; i++) {
				size_t fl = strlen(fam[i]);

				if (!strcmp(fam[i], name) ||
				    (!strcmp(type[i], "histogram") && !strncmp(name, fam[i], fl) &&
				     (!strcmp(name + fl, "_bucket") || !strcmp(name + fl, "_sum") ||
				      !strcmp(name + fl, "_count"))))
					f = i;
			}
			if (f < 0)
				fail_msg("sample %s before its HELP/TYPE", name);
			if (strcmp(fam[f], cur) || closed[f])
				fail_msg("sample %s away from its family", name);
			assert_string_not_equal(type[f], "");
			samples[f]++;
		}
		/* no timestamp: the value is the last field */
		{
			const char *sp = strrchr(line, ' ');
			char *end;

			assert_non_null(sp);
			if (strcmp(sp + 1, "+Inf") && strcmp(sp + 1, "-Inf") &&
			    strcmp(sp + 1, "NaN")) {
				strtod(sp + 1, &end);
				assert_true(end != sp + 1 && *end == 0);
			}
		}
	}
	assert_true(nf > 10);
}

static void test_prom_families_and_names(void **state)
{
	json_t *root = parse(PROM_MODEL);
	char *out = render(render_prom, root);

	(void)state;
	check_families(out);
	/* the families of docs/views.md, each declared once */
	const char *fams[] = {"indextts2_ready gauge",
			      "indextts2_startup_seconds gauge",
			      "indextts2_mark_seconds gauge",
			      "indextts2_phase_seconds gauge",
			      "indextts2_page_faults_total counter",
			      "indextts2_major_page_faults_total counter",
			      "indextts2_model_file_page_faults_total counter",
			      "indextts2_mlock_calls_total counter",
			      "indextts2_mlock_locked gauge",
			      "indextts2_missing_path_attempts_total counter",
			      "indextts2_missing_paths gauge",
			      "indextts2_files gauge",
			      "indextts2_file_read_bytes_total counter",
			      "indextts2_connect_failures_total counter",
			      "indextts2_download_bytes_total counter",
			      "indextts2_download_seconds gauge",
			      "indextts2_offcpu_seconds_total counter",
			      "indextts2_request_duration_seconds histogram",
			      "indextts2_request_page_faults_total counter",
			      "indextts2_request_major_page_faults_total counter",
			      "tts_launch_tracing_enabled gauge",
			      "tts_launch_events_lost_total counter",
			      "tts_launch_findings gauge"};
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		char want[128], help[128];

		snprintf(want, sizeof(want), "# TYPE %s", fams[i]);
		snprintf(help, sizeof(help), "# HELP %.*s ", (int)strcspn(fams[i], " "), fams[i]);
		if (count_str(out, want) != 1 || count_str(out, help) != 1)
			fail_msg("%s: not declared exactly once", fams[i]);
	}
	/* no shim in the model: no shim families */
	assert_null(strstr(out, "indextts2_mlock_shim_status"));
	json_decref(root);
	free(out);
}

static void test_prom_values_equal_the_model(void **state)
{
	json_t *root = parse(PROM_MODEL);
	char *out = render(render_prom, root);

	(void)state;
	assert_float_equal(prom_get(out, "indextts2_ready"), 1, 0);
	assert_float_equal(prom_get(out, "indextts2_startup_seconds"), 1.5005, 1e-12);
	assert_float_equal(prom_get(out, "indextts2_mark_seconds{mark=\"ready\"}"), 1.5005, 1e-12);
	assert_float_equal(prom_get(out, "indextts2_mark_seconds{mark=\"launch\"}"), 0, 0);
	/* a repeated phase name is summed: 0.5 + 0.25 */
	assert_float_equal(prom_get(out, "indextts2_phase_seconds{phase=\"imports\"}"), 0.75,
			   1e-12);
	assert_float_equal(prom_get(out, "indextts2_phase_seconds{phase=\"say \\\"hi\\\"\"}"), 0.25,
			   1e-12);
	assert_true(has_line(out, "indextts2_page_faults_total 123456"));
	assert_float_equal(prom_get(out, "indextts2_major_page_faults_total"), 78, 0);
	assert_float_equal(prom_get(out, "indextts2_model_file_page_faults_total"), 9, 0);
	assert_float_equal(prom_get(out, "indextts2_mlock_calls_total{result=\"ok\"}"), 1, 0);
	assert_float_equal(prom_get(out, "indextts2_mlock_calls_total{result=\"failed\"}"), 2, 0);
	/* an mlock that worked is some library's page, the mlockall failed: not locked */
	assert_float_equal(prom_get(out, "indextts2_mlock_locked"), 0, 0);
	assert_float_equal(prom_get(out, "indextts2_missing_path_attempts_total"), 10, 0);
	assert_float_equal(prom_get(out, "indextts2_missing_paths"), 2, 0);
	assert_float_equal(prom_get(out, "indextts2_files"), 2, 0);
	assert_float_equal(prom_get(out, "indextts2_file_read_bytes_total"), 1024, 0);
	assert_float_equal(prom_get(out, "indextts2_connect_failures_total"), 2, 0);
	assert_float_equal(prom_get(out, "indextts2_download_bytes_total{file=\"/m/plain.bin\"}"),
			   5, 0);
	assert_float_equal(prom_get(out, "indextts2_download_seconds{file=\"/m/plain.bin\"}"),
			   0.001, 1e-12);
	assert_float_equal(prom_get(out, "indextts2_offcpu_seconds_total{reason=\"io_wait\"}"), 1.5,
			   1e-12);
	assert_float_equal(prom_get(out, "indextts2_offcpu_seconds_total{reason=\"sleep\"}"), 0.25,
			   1e-12);
	assert_float_equal(prom_get(out, "indextts2_offcpu_seconds_total{reason=\"runqueue\"}"),
			   0.002, 1e-12);
	assert_float_equal(prom_get(out, "indextts2_request_page_faults_total"), 30, 0);
	assert_float_equal(prom_get(out, "indextts2_request_major_page_faults_total"), 3, 0);
	assert_float_equal(prom_get(out, "tts_launch_tracing_enabled"), 1, 0);
	assert_float_equal(prom_get(out, "tts_launch_events_lost_total"), 7, 0);
	assert_float_equal(prom_get(out, "tts_launch_findings"), 2, 0);
	json_decref(root);
	free(out);
}

static void test_prom_escapes_label_values(void **state)
{
	json_t *root = parse(PROM_MODEL);
	char *out = render(render_prom, root);

	(void)state;
	/* the path a"b\c<newline>d.bin, without ".incomplete" */
	assert_true(
	    has_line(out, "indextts2_download_bytes_total{file=\"/m/a\\\"b\\\\c\\nd.bin\"} 1234"));
	assert_true(has_line(out, "indextts2_download_seconds{file=\"/m/a\\\"b\\\\c\\nd.bin\"} 2"));
	assert_null(strstr(out, ".incomplete"));
	json_decref(root);
	free(out);
}

static void test_prom_request_histogram_is_cumulative(void **state)
{
	json_t *root = parse(PROM_MODEL);
	char *out = render(render_prom, root);
	double prev = 0, inf, count;

	(void)state;
	/* 3 ms, 10 ms (on the 0.01 bound: counted there), 700 ms, 90 s */
	for (size_t b = 0; b < prom_n_request_buckets; b++) {
		char key[96];
		double le = prom_request_buckets[b], v, want;

		snprintf(key, sizeof(key), "indextts2_request_duration_seconds_bucket{le=\"%g\"}",
			 le);
		v = prom_get(out, key);
		want = (le >= 0.003) + (le >= 0.01) + (le >= 0.7) + (le >= 90);
		if (v != want)
			fail_msg("bucket le=%g: %g, want %g", le, v, want);
		assert_true(v >= prev);
		prev = v;
		if (b)
			assert_true(le > prom_request_buckets[b - 1]);
	}
	assert_float_equal(prom_request_buckets[0], 0.005, 0);
	assert_float_equal(prom_request_buckets[prom_n_request_buckets - 1], 60, 0);
	inf = prom_get(out, "indextts2_request_duration_seconds_bucket{le=\"+Inf\"}");
	count = prom_get(out, "indextts2_request_duration_seconds_count");
	assert_float_equal(inf, 4, 0);
	assert_float_equal(count, inf, 0);
	assert_float_equal(prom_get(out, "indextts2_request_duration_seconds_sum"),
			   0.003 + 0.010 + 0.7 + 90, 1e-9);
	json_decref(root);
	free(out);
}

static void test_prom_untraced_model(void **state)
{
	json_t *root = parse("{\"tracing\": {\"enabled\": false}, \"marks\": {\"launch\": 0}}");
	char *out = render(render_prom, root);

	(void)state;
	check_families(out);
	assert_float_equal(prom_get(out, "indextts2_ready"), 0, 0);
	assert_null(strstr(out, "indextts2_startup_seconds"));
	assert_float_equal(prom_get(out, "tts_launch_tracing_enabled"), 0, 0);
	assert_float_equal(prom_get(out, "indextts2_mlock_locked"), 0, 0);
	assert_float_equal(prom_get(out, "indextts2_request_duration_seconds_bucket{le=\"+Inf\"}"),
			   0, 0);
	assert_float_equal(prom_get(out, "indextts2_request_duration_seconds_count"), 0, 0);
	json_decref(root);
	free(out);
}

static char *capture(void (*fn)(FILE *, const char *), const char *arg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	fn(out, arg);
	assert_int_equal(fclose(out), 0);
	return buf;
}

static void header_with_help(FILE *out, const char *help) { prom_header(out, "m", "gauge", help); }

static void value_of(FILE *out, const char *v) { prom_value(out, strtod(v, NULL)); }

static void test_prom_helpers(void **state)
{
	char *s;

	(void)state;
	s = capture(prom_label_value, "C:\\dir\n\"x\"");
	assert_string_equal(s, "\"C:\\\\dir\\n\\\"x\\\"\"");
	free(s);
	s = capture(prom_label_value, NULL);
	assert_string_equal(s, "\"\"");
	free(s);
	/* a control character becomes the text \x1b (escaped backslash) */
	s = capture(prom_label_value, "a\033[2Jb\a");
	assert_string_equal(s, "\"a\\\\x1b[2Jb\\\\x07\"");
	free(s);
	/* HELP escapes \ and newline only */
	s = capture(header_with_help, "a\\b\nc \"d\"");
	assert_string_equal(s, "# HELP m a\\\\b\\nc \"d\"\n# TYPE m gauge\n");
	free(s);
	s = capture(value_of, "42");
	assert_string_equal(s, "42");
	free(s);
	s = capture(value_of, "0.125");
	assert_string_equal(s, "0.125");
	free(s);
	s = capture(value_of, "nan");
	assert_string_equal(s, "NaN");
	free(s);
	s = capture(value_of, "inf");
	assert_string_equal(s, "+Inf");
	free(s);
	s = capture(value_of, "-inf");
	assert_string_equal(s, "-Inf");
	free(s);
}

/* ---- svg ------------------------------------------------------------------ */

/* A small XML well-formedness check: one root element, tags balanced,
 * attribute values quoted, '<' never in text or attributes, every '&' a known
 * entity, and the whole text valid UTF-8. Enough for what render_svg writes
 * (no CDATA, no DTD). */
static const char *xml_error(const char *s)
{
	const char *stack[256];
	size_t depth = 0, lens[256];
	int roots = 0;

	if (!valid_utf8(s))
		return "invalid UTF-8";
	while (*s) {
		if (*s == '&') {
			static const char *ent[] = {"&amp;",  "&lt;",	"&gt;",
						    "&quot;", "&apos;", "&#"};
			int ok = 0;

			for (size_t i = 0; i < 6; i++)
				ok |= !strncmp(s, ent[i], strlen(ent[i]));
			if (!ok)
				return "bare &";
			s++;
			continue;
		}
		if (*s != '<') {
			if (!depth && *s != ' ' && *s != '\n' && *s != '\t' && *s != '\r')
				return "text outside the root";
			s++;
			continue;
		}
		if (!strncmp(s, "<!--", 4)) {
			s = strstr(s, "-->");
			if (!s)
				return "unterminated comment";
			s += 3;
			continue;
		}
		if (!strncmp(s, "<?", 2)) {
			s = strstr(s, "?>");
			if (!s)
				return "unterminated PI";
			s += 2;
			continue;
		}
		if (s[1] == '/') {
			size_t l = strcspn(s + 2, " \t\n>");

			if (!depth || l != lens[depth - 1] || strncmp(s + 2, stack[depth - 1], l))
				return "mismatched end tag";
			s += 2 + l;
			s += strspn(s, " \t\n");
			if (*s != '>')
				return "bad end tag";
			depth--;
			s++;
			continue;
		}
		/* a start tag */
		{
			size_t l = strcspn(s + 1, " \t\n/>");

			if (!l)
				return "empty tag name";
			if (!depth && roots++)
				return "two root elements";
			if (depth == 256)
				return "too deep";
			stack[depth] = s + 1;
			lens[depth] = l;
			s += 1 + l;
			for (;;) {
				size_t an;

				s += strspn(s, " \t\n");
				if (*s == '>') {
					depth++;
					s++;
					break;
				}
				if (s[0] == '/' && s[1] == '>') {
					s += 2;
					break;
				}
				an =
				    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					      "0123456789_:-.");
				if (!an || s[an] != '=' || s[an + 1] != '"')
					return "bad attribute";
				s += an + 2;
				while (*s && *s != '"') {
					if (*s == '<')
						return "< in an attribute";
					if (*s == '&') {
						if (strncmp(s, "&amp;", 5) &&
						    strncmp(s, "&lt;", 4) &&
						    strncmp(s, "&gt;", 4) &&
						    strncmp(s, "&quot;", 6) && strncmp(s, "&#", 2))
							return "bare & in an attribute";
					}
					s++;
				}
				if (!*s)
					return "unterminated attribute";
				s++;
			}
		}
	}
	if (depth)
		return "unclosed element";
	if (roots != 1)
		return "no root element";
	return NULL;
}

static void assert_xml(const char *doc)
{
	const char *err = xml_error(doc);

	if (err)
		fail_msg("not well-formed: %s", err);
}

static void test_xml_checker_rejects_broken_documents(void **state)
{
	(void)state;
	/* the checker the SVG tests rely on catches what they must */
	assert_null(xml_error("<svg a=\"1\"><text>a &amp; b</text><rect/></svg>\n"));
	assert_non_null(xml_error("<svg><text>a & b</text></svg>"));
	assert_non_null(xml_error("<svg><text>a < b</text></svg>"));
	assert_non_null(xml_error("<svg><rect a=\"<\"/></svg>"));
	assert_non_null(xml_error("<svg><rect a=\"x&y\"/></svg>"));
	assert_non_null(xml_error("<svg><text></svg>"));
	assert_non_null(xml_error("<svg></svg><svg></svg>"));
	assert_non_null(xml_error("<svg>\xe6\x97</svg>"));
	assert_non_null(xml_error(""));
}

static const char *SVG_MODEL =
    "{\"schema\": \"tts-launch.timeline/1\","
    " \"process\": {\"command\": [\"/usr/bin/python3\", \"webui.py\", \"--x=<&>\"]},"
    " \"tracing\": {\"enabled\": true},"
    " \"marks\": {\"launch\": 0, \"exec\": 20, \"ready\": 900, \"a&b<c\": 30},"
    " \"phases\": ["
    "   {\"name\": \"launch\", \"start_ms\": 0, \"end_ms\": 20},"
    "   {\"name\": \"imports\", \"start_ms\": 20, \"end_ms\": 500},"
    "   {\"name\": \"R&D <fast> \\\"q\\\" 'a'\", \"start_ms\": 30, \"end_ms\": 40},"
    "   {\"name\": \"download:blob.incomplete\", \"start_ms\": 100, \"end_ms\": 300},"
    "   {\"name\": \"zero\", \"start_ms\": 400, \"end_ms\": 400}],"
    " \"downloads\": [{\"path\": \"/hub/models--org--repo/blobs/blob.incomplete\","
    "   \"bytes\": 1048576, \"first_ms\": 100, \"last_ms\": 300, \"rate_mb_s\": 5.2}],"
    " \"memory\": {\"page_faults\": 10, \"major_faults\": 1,"
    "   \"fault_rate\": {\"bucket_ms\": 100, \"counts\": [1, 5, 2]}}}";

static void test_svg_one_rect_per_phase(void **state)
{
	json_t *root = parse(SVG_MODEL);
	char *out = render(render_svg, root);

	(void)state;
	assert_xml(out);
	assert_int_equal(count_str(out, "<rect class=\"phase"), 5);
	assert_int_equal(count_str(out, "<rect class=\"phase download\""), 1);
	assert_int_equal(count_str(out, "data-phase=\"launch\""), 1);
	assert_int_equal(count_str(out, "data-phase=\"imports\""), 1);
	assert_int_equal(count_str(out, "data-phase=\"zero\""), 1);
	assert_int_equal(count_str(out, "data-phase=\"download:blob.incomplete\""), 1);
	/* the download's row names its repo, size and rate */
	assert_non_null(strstr(out, "download org/repo blob.incompl"));
	assert_non_null(strstr(out, "1.0 MiB, 5.2 MB/s"));
	/* the ready line, the fault curve */
	assert_int_equal(count_str(out, "<line class=\"ready\""), 1);
	assert_int_equal(count_str(out, "<path class=\"faults\""), 1);
	/* a zero-length phase is still visible */
	{
		const char *r = strstr(out, "data-phase=\"zero\"");
		const char *w = r ? strstr(r, "width=\"") : NULL;

		assert_non_null(w);
		assert_true(strtod(w + 7, NULL) >= 1);
	}
	json_decref(root);
	free(out);
}

static void test_svg_escapes_labels(void **state)
{
	json_t *root = parse(SVG_MODEL);
	char *out = render(render_svg, root);

	(void)state;
	assert_xml(out);
	assert_int_equal(
	    count_str(out, "data-phase=\"R&amp;D &lt;fast&gt; &quot;q&quot; &#39;a&#39;\""), 1);
	/* in the label and the tooltip */
	assert_int_equal(count_str(out, "R&amp;D &lt;fast&gt; &quot;q&quot; &#39;a&#39;  10 ms"),
			 2);
	assert_null(strstr(out, "R&D"));
	assert_null(strstr(out, "<fast>"));
	/* the command in the title, a mark's name */
	assert_non_null(strstr(out, "--x=&lt;&amp;&gt;"));
	assert_non_null(strstr(out, "a&amp;b&lt;c 30 ms"));
	assert_null(strstr(out, "a&b"));
	json_decref(root);
	free(out);
}

static void test_svg_escape_helper(void **state)
{
	char *s;

	(void)state;
	s = capture(svg_escape, "<a href='x'>&\"\x01\tz</a>");
	assert_string_equal(s, "&lt;a href=&#39;x&#39;&gt;&amp;&quot;?\tz&lt;/a&gt;");
	free(s);
	s = capture(svg_escape, NULL);
	assert_string_equal(s, "");
	free(s);
	/* not XML characters: bytes that are not UTF-8 (a cut label) and
	 * U+FFFE become U+FFFD, C1 controls and DEL '?'; the rest is kept */
	s = capture(svg_escape, "a\xe6\x97|\xef\xbf\xbe|\xc2\x9b|\x7f|\xe6\x97\xa5");
	assert_string_equal(s, "a\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd|?|?|\xe6\x97\xa5");
	free(s);
}

static void test_svg_empty_model_is_a_valid_document(void **state)
{
	const char *models[] = {
	    "{}", "{\"phases\": [], \"marks\": {}, \"downloads\": [],"
		  " \"memory\": {\"fault_rate\": {\"bucket_ms\": 10, \"counts\": []}}}"};

	(void)state;
	for (size_t m = 0; m < 2; m++) {
		json_t *root = parse(models[m]);
		char *out = render(render_svg, root);

		assert_xml(out);
		assert_int_equal(strncmp(out, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39), 0);
		assert_int_equal(count_str(out, "</svg>\n"), 1);
		assert_int_equal(strcmp(out + strlen(out) - 7, "</svg>\n"), 0);
		assert_int_equal(count_str(out, "class=\"phase"), 0);
		assert_null(strstr(out, "class=\"ready\""));
		assert_null(strstr(out, "nan"));
		assert_null(strstr(out, "inf"));
		assert_non_null(strstr(out, "ready not reached"));
		json_decref(root);
		free(out);
	}
}

static void test_svg_long_and_multibyte_names_stay_utf8(void **state)
{
	/* a download that is not a hub blob: its name is cut for the label
	 * at 12 bytes, inside an "é"; a phase name cut at 400 bytes and a
	 * command cut at 508, both inside a character too */
	char model[8192], name[1600] = "x", cmd[1600] = "";
	json_t *root;
	char *out;

	(void)state;
	for (int i = 0; i < 500; i++)
		strcat(name, "\xc3\xa9");
	for (int i = 0; i < 400; i++)
		strcat(cmd, "\xe2\x82\xac");
	snprintf(
	    model, sizeof(model),
	    "{\"process\": {\"command\": [\"%s\"]},"
	    " \"phases\": [{\"name\": \"download:a\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	    "\xc3\xa9.bin.incomplete\", \"start_ms\": 0, \"end_ms\": 10},"
	    "  {\"name\": \"%s\", \"start_ms\": 0, \"end_ms\": 5}],"
	    " \"downloads\": [{\"path\": \"/d/a\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	    "\xc3\xa9.bin.incomplete\", \"bytes\": 10, \"first_ms\": 0, \"last_ms\": 10,"
	    " \"rate_mb_s\": 1}]}",
	    cmd, name);
	root = parse(model);
	out = render(render_svg, root);
	assert_xml(out);
	assert_int_equal(count_str(out, "<rect class=\"phase download\""), 1);
	json_decref(root);
	free(out);
}

/* ---- html ----------------------------------------------------------------- */

/* Rows of <table class="cls">, header included; -1 when there is no such table. */
static int table_rows(const char *html, const char *cls)
{
	char open[64];
	const char *t, *end;
	int n = 0;

	snprintf(open, sizeof(open), "<table class=\"%s\">", cls);
	t = strstr(html, open);
	if (!t)
		return -1;
	assert_null(strstr(t + 1, open));
	end = strstr(t, "</table>");
	assert_non_null(end);
	for (const char *p = strstr(t, "<tr>"); p && p < end; p = strstr(p + 4, "<tr>"))
		n++;
	return n;
}

static const char *HTML_MODEL =
    "{\"phases\": [{\"name\": \"imports\", \"start_ms\": 0, \"end_ms\": 100},"
    "   {\"name\": \"model_load\", \"start_ms\": 50, \"end_ms\": 90}],"
    " \"files\": [{\"path\": \"/small\", \"class\": \"other\", \"bytes_read\": 10},"
    "   {\"path\": \"/m/<big>&.pth\", \"class\": \"model\", \"bytes_read\": 5000,"
    "    \"mmap_bytes\": 100000},"
    "   {\"path\": \"/mid\", \"class\": \"config\", \"bytes_read\": 300}],"
    " \"missing_paths\": [{\"path\": \"/nope\", \"attempts\": 1, \"errno\": \"ENOENT\"},"
    "   {\"path\": \"/gone\", \"attempts\": 9, \"errno\": \"ENOENT\"}],"
    " \"downloads\": [{\"path\": \"/d/x.incomplete\", \"bytes\": 10, \"rate_mb_s\": 1,"
    "   \"completed\": true}],"
    " \"findings\": [{\"severity\": \"warning\", \"rule\": \"r1\", \"message\": \"m <1>\","
    "   \"fix\": \"f1\"}, {\"severity\": \"info\", \"id\": \"r2\", \"title\": \"t2\"}]}";

static void test_html_one_row_per_file_and_finding(void **state)
{
	json_t *root = parse(HTML_MODEL);
	char *out = render(render_html, root);

	(void)state;
	assert_int_equal(strncmp(out, "<!DOCTYPE html>", 15), 0);
	assert_int_equal(count_str(out, "<svg "), 1);
	assert_int_equal(table_rows(out, "findings"), 1 + 2);
	assert_int_equal(table_rows(out, "files"), 1 + 3);
	assert_int_equal(table_rows(out, "missing"), 1 + 2);
	assert_int_equal(table_rows(out, "phases"), 1 + 2);
	assert_int_equal(table_rows(out, "downloads"), 1 + 1);
	/* files by bytes, most first; missing paths by attempts */
	{
		const char *big = strstr(out, "<td>/m/&lt;big&gt;&amp;.pth</td>");
		const char *mid = strstr(out, "<td>/mid</td>"),
			   *small = strstr(out, "<td>/small</td>");

		assert_non_null(big);
		assert_non_null(mid);
		assert_non_null(small);
		assert_true(big < mid && mid < small);
		assert_true(strstr(out, "<td>/gone</td>") < strstr(out, "<td>/nope</td>"));
	}
	/* findings escaped, with the fallbacks for id and title */
	assert_non_null(strstr(out, "<td>m &lt;1&gt;</td>"));
	assert_non_null(strstr(out, "<td>r2</td><td>t2</td>"));
	json_decref(root);
	free(out);
}

static void test_html_caps_tables_at_200_rows(void **state)
{
	json_t *root = parse("{\"findings\": []}"), *files = json_array(), *missing = json_array();
	char *out;

	(void)state;
	for (int i = 0; i < 250; i++) {
		char p[32];

		snprintf(p, sizeof(p), "/f%d", i);
		json_array_append_new(files, json_pack("{s:s, s:i}", "path", p, "bytes_read", i));
		json_array_append_new(missing, json_pack("{s:s, s:i}", "path", p, "attempts", i));
	}
	json_object_set_new(root, "files", files);
	json_object_set_new(root, "missing_paths", missing);
	out = render(render_html, root);
	assert_int_equal(table_rows(out, "files"), 1 + 200);
	assert_int_equal(table_rows(out, "missing"), 1 + 200);
	assert_int_equal(table_rows(out, "findings"), -1); /* none: a note instead */
	assert_non_null(strstr(out, "Files (250; the 200 with the most bytes)"));
	/* the largest kept, the smallest dropped */
	assert_non_null(strstr(out, "<td>/f249</td>"));
	assert_null(strstr(out, "<td>/f49</td>"));
	assert_non_null(strstr(out, "<td>/f50</td>"));
	json_decref(root);
	free(out);
}

/* The renderer table: every format once, found by name; the synopsis and
 * the message choices are made from it. */
static void test_renderer_table(void **state)
{
	char choices[256];

	(void)state;
	assert_string_equal(RENDER_FORMATS, "text|json|perfetto|svg|html|prom|folded|flamegraph");
	assert_int_equal(n_renderers, 8);
	for (size_t i = 0; i < n_renderers; i++) {
		assert_ptr_equal(render_find(renderers[i].name), &renderers[i]);
		assert_non_null(renderers[i].render);
	}
	assert_null(render_find("pdf"));
	assert_null(render_find(NULL));
	assert_ptr_equal(render_find("prom")->render, render_prom);
	render_format_choices(choices, sizeof(choices));
	assert_string_equal(choices, "text, json, perfetto, svg, html, prom, folded or flamegraph");
	render_format_choices(choices, 8); /* cut, still terminated */
	assert_true(strlen(choices) < 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lanes_nested_spans_share_one_lane),
	    cmocka_unit_test(test_lanes_partial_overlaps_go_to_separate_lanes),
	    cmocka_unit_test(test_lanes_equal_starts_put_the_longer_span_first),
	    cmocka_unit_test(test_lanes_empty_input),
	    cmocka_unit_test(test_lanes_do_not_depend_on_input_order),
	    cmocka_unit_test(test_lanes_random_spans_nest_in_the_lowest_lane),
	    cmocka_unit_test(test_perfetto_phases_are_complete_events_in_lanes),
	    cmocka_unit_test(test_perfetto_marks_are_global_instants),
	    cmocka_unit_test(test_perfetto_downloads_and_requests_are_async_pairs),
	    cmocka_unit_test(test_perfetto_counters),
	    cmocka_unit_test(test_perfetto_events_are_sorted_and_deterministic),
	    cmocka_unit_test(test_perfetto_empty_model),
	    cmocka_unit_test(test_prom_families_and_names),
	    cmocka_unit_test(test_downloads_named_in_every_renderer),
	    cmocka_unit_test(test_prom_values_equal_the_model),
	    cmocka_unit_test(test_prom_escapes_label_values),
	    cmocka_unit_test(test_prom_request_histogram_is_cumulative),
	    cmocka_unit_test(test_prom_untraced_model),
	    cmocka_unit_test(test_prom_helpers),
	    cmocka_unit_test(test_xml_checker_rejects_broken_documents),
	    cmocka_unit_test(test_svg_one_rect_per_phase),
	    cmocka_unit_test(test_svg_escapes_labels),
	    cmocka_unit_test(test_svg_escape_helper),
	    cmocka_unit_test(test_lanes_are_capped),
	    cmocka_unit_test(test_svg_empty_model_is_a_valid_document),
	    cmocka_unit_test(test_svg_long_and_multibyte_names_stay_utf8),
	    cmocka_unit_test(test_html_one_row_per_file_and_finding),
	    cmocka_unit_test(test_html_caps_tables_at_200_rows),
	    cmocka_unit_test(test_renderer_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
