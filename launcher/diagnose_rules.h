/* diagnose_rules: what the diagnose engine (diagnose.c) shares with its
 * rule groups (diagnose_io.c, diagnose_download.c, diagnose_memory.c,
 * diagnose_net.c, diagnose_gpu.c, diagnose_exit.c); internal to those
 * files. Rules read the model through c->view only. A rule is a row {id, fn} in its
 * group's table (the group gives its check); the engine runs the rows of the selected checks in
 * table order and fn adds findings through diag_add, which takes the id and check from the row.
 * Rules read only the context and the model: never the machine diagnose runs on (docs/diagnose.md).
 */
#ifndef TTS_DIAGNOSE_RULES_H
#define TTS_DIAGNOSE_RULES_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "diagnose.h"
#include "timeline_view.h"

#define DIAG_MAX_CACHES 4

struct diag_rule;

/* A download of the run (diag_find_downloads): the named ones of
 * downloads[], an older timeline's *.incomplete files, other files
 * written inside a models--* folder. */
struct diag_dl {
	char *path;		   /* absolute */
	char *final;		   /* absolute, NULL: not known */
	const char *name, *writer; /* NULL: not named (an older timeline, a file) */
	double bytes, first_ms, last_ms, threads, expected_size; /* 0: none */
	bool complete;
};

/* A sorted index of n string keys, key(i, arg) (NULL: not indexed), for
 * look-ups in O(log n). */
struct diag_index {
	size_t *order, n;
	const char *(*key)(size_t i, const void *arg);
	const void *arg;
};

/* What every rule needs, decoded once from the model by the engine. */
struct diag_ctx {
	const struct tl_view *view; /* the model's typed views, decoded once */
	json_t *findings;
	const struct diag_rule *rule; /* the row running: its id goes into findings */
	enum diag_check check;	      /* its group's check, which goes there too */
	char app_dir[PATH_MAX];
	char caches[DIAG_MAX_CACHES][PATH_MAX]; /* where downloads are expected */
	int n_caches;
	char hf_home[PATH_MAX];
	const char *endpoint; /* HF_ENDPOINT, or NULL */
	char ep_peer[300];    /* "host:port" of the endpoint */
	double ready;	      /* ms, <0: never ready */
	double end;	      /* ms: exit, or the last thing seen */
	bool failed;	      /* exited non-zero or by a signal before ready */
	const char *mlock;    /* configured mlock mode */
	struct diag_dl *dls;  /* the downloads (diag_find_downloads) */
	size_t n_dls;
};

struct diag_rule {
	const char *id; /* the finding's id (docs/diagnose.md) */
	void (*fn)(struct diag_ctx *c);
};

/* Each group's rows, ended by a row with a NULL id. */
extern const struct diag_rule diag_io_rules[];
extern const struct diag_rule diag_download_rules[];
extern const struct diag_rule diag_net_rules[]; /* diagnose_net.c: also --check-download */
extern const struct diag_rule diag_memory_rules[];
extern const struct diag_rule diag_gpu_rules[];	 /* diagnose_gpu.c: --check-memory */
extern const struct diag_rule diag_http_rules[]; /* diagnose_exit.c: download group */
extern const struct diag_rule diag_exit_rules[]; /* diagnose_exit.c: last, always run */

/* Adds one finding of the running rule; evidence is stolen. seconds_lost < 0:
 * unknown (null). */
void diag_add(struct diag_ctx *c, int severity, const char *title, json_t *evidence,
	      double seconds_lost, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

double diag_round3(double v);

/* ix over n keys; false when out of memory (ix is then empty). */
bool diag_index_build(struct diag_index *ix, size_t n, const char *(*key)(size_t, const void *),
		      const void *arg);
/* The position of the first (last: the last) key equal to the len bytes
 * at k, or -1. */
long diag_index_find(const struct diag_index *ix, const char *k, size_t len, bool last);
/* Where those keys are in ix->order: [*lo, *hi), in the keys' order. */
void diag_index_range(const struct diag_index *ix, const char *k, size_t len, size_t *lo,
		      size_t *hi);
void diag_index_free(struct diag_index *ix);
int diag_cmp_double(const void *x, const void *y);

/* c->dls: the run's downloads (diagnose_download.c); the engine calls it
 * once before the rules. */
void diag_find_downloads(struct diag_ctx *c);
void diag_free_downloads(struct diag_ctx *c);

#endif
