/* attrib_samples: the critical path's CPU samples; see attrib_samples.h. */
#include "attrib_samples.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "timeline_internal.h"
#include "util.h"

bool attr_samples_room(struct attr_samples *s)
{
	if (s->n < ATTR_MAX_SAMPLES)
		return true;
	s->dropped++;
	return false;
}

static uint64_t hash_name(const char *p)
{
	uint64_t h = 1469598103934665603ull;

	for (; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return h;
}

/* the index's slot for name: its frame's, or the empty one it would take */
static size_t slot(const struct attr_samples *s, const char *name)
{
	size_t i = hash_name(name) & (s->index_cap - 1);

	while (s->index[i] && strcmp(s->frames[s->index[i] - 1], name))
		i = (i + 1) & (s->index_cap - 1);
	return i;
}

/* the index kept at most half full: rebuilt twice as large */
static bool index_grow(struct attr_samples *s)
{
	size_t cap = s->index_cap ? s->index_cap * 2 : 256;
	unsigned *old = s->index, *ix = calloc(cap, sizeof(*ix));

	if (!ix)
		return false;
	s->index = ix;
	s->index_cap = cap;
	for (size_t f = 0; f < s->n_frames; f++)
		s->index[slot(s, s->frames[f])] = (unsigned)f + 1;
	free(old);
	return true;
}

/* frame's index, added when new; -1 when out of memory */
static long frame_of(struct attr_samples *s, const char *frame)
{
	size_t i;
	char *copy;

	if ((s->n_frames + 1) * 2 > s->index_cap && !index_grow(s))
		return -1;
	i = slot(s, frame);
	if (s->index[i])
		return (long)s->index[i] - 1;
	if (s->n_frames == s->cap_frames) {
		size_t cap = s->cap_frames ? s->cap_frames * 2 : 64;
		char **v = realloc(s->frames, cap * sizeof(*v));

		if (!v)
			return -1;
		s->frames = v;
		s->cap_frames = cap;
	}
	copy = strndup(frame, ATTR_SAMPLE_FRAME_MAX - 1);
	if (!copy)
		return -1;
	s->frames[s->n_frames] = copy;
	s->index[i] = (unsigned)++s->n_frames;
	return (long)s->n_frames - 1;
}

/* thread (pid, tid)'s index, added when new; -1 when there are too many */
static long thread_of(struct attr_samples *s, int pid, int tid)
{
	size_t k;

	/* the last sample's thread first: samples come in runs of one */
	if (s->n && s->threads[s->v[s->n - 1].thread].tid == tid &&
	    s->threads[s->v[s->n - 1].thread].pid == pid)
		return s->v[s->n - 1].thread;
	for (k = 0; k < s->n_threads; k++)
		if (s->threads[k].tid == tid && s->threads[k].pid == pid)
			return (long)k;
	if (k == ATTR_MAX_SAMPLE_THREADS)
		return -1;
	if (!s->threads) {
		s->threads = calloc(ATTR_MAX_SAMPLE_THREADS, sizeof(*s->threads));
		if (!s->threads)
			return -1;
	}
	s->threads[s->n_threads] = (struct attr_sthread){pid, tid};
	return (long)s->n_threads++;
}

void attr_samples_add(struct attr_samples *s, double t, int pid, int tid, const char *frame)
{
	long th, fr;

	if (s->n >= ATTR_MAX_SAMPLES) {
		s->dropped++;
		return;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct attr_psample *v = realloc(s->v, cap * sizeof(*v));

		if (!v) {
			s->dropped++;
			return;
		}
		s->v = v;
		s->cap = cap;
	}
	th = thread_of(s, pid, tid);
	fr = th < 0 ? -1 : frame_of(s, frame && *frame ? frame : "?");
	if (fr < 0) {
		s->dropped++;
		return;
	}
	s->v[s->n++] = (struct attr_psample){t, (unsigned)th, (unsigned)fr};
}

void attr_samples_free(struct attr_samples *s)
{
	for (size_t i = 0; i < s->n_frames; i++)
		free(s->frames[i]);
	free(s->frames);
	free(s->threads);
	free(s->index);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* ---- in the model ---- */

/* ms to the microsecond, as the model's times (coll_ms) */
static json_t *ms(double t) { return json_real(t < 0 ? 0 : (double)llround(t * 1000) / 1000); }

void attr_samples_write(struct timeline *tl, const struct attr_samples *s)
{
	json_t *a = json_object_get(timeline_json(tl), "attribution");
	json_t *frames = json_array(), *threads = json_array(), *t = json_array(),
	       *thread = json_array(), *frame = json_array();

	if (!json_is_object(a) || !frames || !threads || !t || !thread || !frame) {
		json_decref(frames);
		json_decref(threads);
		json_decref(t);
		json_decref(thread);
		json_decref(frame);
		return;
	}
	for (size_t i = 0; i < s->n_frames; i++)
		json_array_append_new(frames, json_text(s->frames[i]));
	for (size_t i = 0; i < s->n_threads; i++)
		json_array_append_new(threads, json_pack("{s:i, s:i}", "pid", s->threads[i].pid,
							 "tid", s->threads[i].tid));
	for (size_t i = 0; i < s->n; i++) {
		json_array_append_new(t, ms(s->v[i].t));
		json_array_append_new(thread, json_integer(s->v[i].thread));
		json_array_append_new(frame, json_integer(s->v[i].frame));
	}
	json_object_set_new(a, "cpu_samples",
			    json_pack("{s:o, s:o, s:o, s:o, s:o}", "frames", frames, "threads",
				      threads, "t_ms", t, "thread", thread, "frame", frame));
	json_object_set_new(a, "samples_dropped", json_integer((json_int_t)s->dropped));
}

/* a[i] as an index below n, or -1 */
static long index_at(json_t *a, size_t i, size_t n)
{
	json_t *v = json_array_get(a, i);

	if (!json_is_integer(v) || json_integer_value(v) < 0 || (size_t)json_integer_value(v) >= n)
		return -1;
	return (long)json_integer_value(v);
}

bool attr_samples_decode(const struct timeline *tl, struct attr_samples *s)
{
	json_t *a = json_object_get(timeline_json(tl), "attribution");
	json_t *cs = json_object_get(a, "cpu_samples"), *frames = json_object_get(cs, "frames"),
	       *threads = json_object_get(cs, "threads"), *t = json_object_get(cs, "t_ms"),
	       *thread = json_object_get(cs, "thread"), *frame = json_object_get(cs, "frame"), *v;
	size_t i, n;

	memset(s, 0, sizeof(*s));
	if (!json_is_array(frames) || !json_is_array(threads) || !json_is_array(t) ||
	    !json_is_array(thread) || !json_is_array(frame))
		return false;
	n = json_array_size(t);
	if (json_array_size(thread) != n || json_array_size(frame) != n ||
	    json_array_size(frames) > ATTR_MAX_SAMPLES ||
	    json_array_size(threads) > ATTR_MAX_SAMPLE_THREADS)
		return false;
	s->frames = calloc(json_array_size(frames) + 1, sizeof(*s->frames));
	s->threads = calloc(json_array_size(threads) + 1, sizeof(*s->threads));
	s->v = calloc((n < ATTR_MAX_SAMPLES ? n : ATTR_MAX_SAMPLES) + 1, sizeof(*s->v));
	if (!s->frames || !s->threads || !s->v)
		goto bad;
	json_array_foreach (frames, i, v) {
		if (!json_is_string(v) || !(s->frames[i] = strdup(json_string_value(v))))
			goto bad;
		s->n_frames++;
	}
	json_array_foreach (threads, i, v) {
		json_t *p = json_object_get(v, "pid"), *k = json_object_get(v, "tid");

		if (!json_is_integer(p) || !json_is_integer(k))
			goto bad;
		s->threads[s->n_threads++] =
		    (struct attr_sthread){(int)json_integer_value(p), (int)json_integer_value(k)};
	}
	/* entries that are not a time, a thread and a frame are left out */
	for (i = 0; i < n && s->n < ATTR_MAX_SAMPLES; i++) {
		double ti = json_number_value(json_array_get(t, i));
		long th = index_at(thread, i, s->n_threads), fr = index_at(frame, i, s->n_frames);

		if (!json_is_number(json_array_get(t, i)) || !isfinite(ti) || ti < 0 || th < 0 ||
		    fr < 0)
			continue;
		s->v[s->n++] = (struct attr_psample){ti, (unsigned)th, (unsigned)fr};
	}
	s->dropped = n - s->n;
	v = json_object_get(a, "samples_dropped");
	if (json_is_integer(v) && json_integer_value(v) > 0)
		s->dropped += (unsigned long long)json_integer_value(v);
	return true;
bad:
	attr_samples_free(s);
	return false;
}
