/* timeline_internal: raw access to the model's JSON tree, for the modules
 * that build or patch the tree: timeline_build.c, timeline_files.c,
 * timeline_net.c, timeline_downloads.c (the trace sections), pipeline.c
 * (cache_fs), attrib_build.c (the attribution section; it still reads
 * network[] and downloads[] of the tree it writes into), phases.c, mlock.c
 * (memory.mlock), diagnose.c (it stores the findings; its rules read only
 * the views: the rule context has no tree), supervise.c and session_out.c
 * (progress, the findings said so far), progress.c (it decodes the views of
 * the tree it samples and stores its "progress" key; it reads no section
 * key itself), control.c, and timeline_view*.c (the decoders themselves).
 * files[], missing_paths[] and python.imports[] are not in the tree but
 * records (timeline_sections.h, timeline_sections() below): imports.c,
 * phases.c, gpu_snap.c, timeline_build.c and timeline_files.c read them
 * there. Renderers, compare and the objects in the Makefile's NO_JANSSON
 * list cannot include this. */
#ifndef TTS_TIMELINE_INTERNAL_H
#define TTS_TIMELINE_INTERNAL_H

#include <jansson.h>

#include "timeline.h"

/* The tree itself (borrowed: owned by tl); NULL for NULL. */
json_t *timeline_json(const struct timeline *tl);
/* A model around root, which it takes over (one reference); NULL when out
 * of memory (root is then released). No check: for trees built here. */
struct timeline *timeline_wrap(json_t *root);

/* The model's files[], missing_paths[] and python.imports[] as records
 * (timeline_sections.h), brought up to date with the tree first; NULL for
 * NULL. Every reader of those lists reads these: the tree holds
 * placeholders (empty arrays) where they go. */
struct tl_sections *timeline_sections(const struct timeline *tl);
/* The same for the model whose tree root is; NULL when root is no model's
 * (a raw tree: tl_sections_decode reads its lists). */
struct tl_sections *timeline_sections_of(const json_t *root);

/* The checks of timeline_load on a parsed tree (name: for messages); 0, or
 * -1 with err. */
int timeline_validate(const json_t *root, const char *name, char *err, size_t errlen);

/* The typed views (timeline_view.h) of a raw tree, for a module that holds
 * only the tree (the live display samples it); tl_view_decode is this on
 * the model's own tree. */
struct tl_view *tl_view_decode_tree(const json_t *root);

/* A view of root's launcher.config only (config_*, env), for a module
 * that needs the run's settings of a tree it does not decode (the
 * pipeline's cache_fs stage); free with tl_view_free. */
struct tl_view *tl_view_decode_config(const json_t *root);

/* Sort an array of objects by a numeric member (stable). */
void timeline_sort_by(json_t *array, const char *key);

#endif
