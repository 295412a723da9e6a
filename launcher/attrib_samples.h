/* attrib_samples: the critical path's CPU samples, kept for the timeline
 * (`attribution.cpu_samples`, docs/timeline.md): each sample's time, its
 * thread and what it was in: the cause its instant counts for in the
 * breakdown (a Python function `QUALNAME (file:line)`, `import X`, a
 * native library), the names once each in a table of frames. At most
 * ATTR_MAX_SAMPLES, the first in time order; later ones are only counted
 * (`samples_dropped`). attr_breakdown fills it; attr_samples_write puts it
 * into a model, attr_samples_decode reads it back for the renderers (this
 * header has no jansson: render_perfetto.c includes it). */
#ifndef TTS_ATTRIB_SAMPLES_H
#define TTS_ATTRIB_SAMPLES_H

#include <stdbool.h>
#include <stddef.h>

#define ATTR_MAX_SAMPLES	20000
#define ATTR_MAX_SAMPLE_THREADS 1024 /* threads samples are kept for */
#define ATTR_SAMPLE_FRAME_MAX	96   /* a frame's name, NUL included (attr_cause.what) */

struct attr_psample {
	double t;	 /* ms */
	unsigned thread; /* into threads */
	unsigned frame;	 /* into frames */
};

struct attr_sthread {
	int pid, tid;
};

struct attr_samples {
	struct attr_psample *v; /* time order */
	size_t n, cap;
	char **frames;
	size_t n_frames, cap_frames;
	struct attr_sthread *threads;
	size_t n_threads;
	unsigned *index; /* open addressing over frames: frame + 1, 0 empty */
	size_t index_cap;
	unsigned long long dropped; /* not kept: over the bound (or out of memory) */
};

/* Whether one more sample would be kept; when not, it is counted dropped. */
bool attr_samples_room(struct attr_samples *s);
/* Keep a sample of thread tid of pid at t (ms) in frame (copied). */
void attr_samples_add(struct attr_samples *s, double t, int pid, int tid, const char *frame);
void attr_samples_free(struct attr_samples *s);

struct timeline;
/* Sets `cpu_samples` and `samples_dropped` on tl's `attribution` (if any). */
void attr_samples_write(struct timeline *tl, const struct attr_samples *s);
/* tl's samples (a saved timeline too); false when it has none (an older
 * timeline, an untraced run) or they are malformed. Free with
 * attr_samples_free. */
bool attr_samples_decode(const struct timeline *tl, struct attr_samples *s);

#endif
