/* timeline_view_int: what the decoders of timeline_view.h share; internal
 * to timeline_view.c (the engine: the decoder table, the marks, the run's
 * process, memory and GPU sections, the config) and its section files,
 * timeline_view_files.c (files, downloads, locks, the cache's file systems)
 * and timeline_view_net.c (network, connects, requests). The missing-field
 * rule (timeline_view.h) lives in num(), str(), flag() and tri(). */
#ifndef TTS_TIMELINE_VIEW_INT_H
#define TTS_TIMELINE_VIEW_INT_H

#include <jansson.h>
#include <stdlib.h>

#include "timeline_view.h"

/* the one rule (timeline_view.h): absent, null or mistyped is "none" */
static inline double num(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : TL_NONE;
}

static inline const char *str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static inline bool flag(const json_t *o, const char *key)
{
	return json_is_true(json_object_get(o, key));
}

/* 1, 0; -1: not a flag */
static inline int tri(const json_t *o, const char *key)
{
	const json_t *b = json_object_get(o, key);

	return json_is_boolean(b) ? json_is_true(b) : -1;
}

/* An array of n elements of size sz for the list arr (NULL for none);
 * *n is set to its length. */
static inline void *list_alloc(const json_t *arr, size_t sz, size_t *n)
{
	*n = json_is_array(arr) ? json_array_size(arr) : 0;
	return *n ? calloc(*n, sz) : NULL;
}

#define LIST(arr, ptr, n) ((ptr) = list_alloc((arr), sizeof(*(ptr)), &(n)), !(n) || (ptr) ? 0 : -1)

/* The section decoders: 0, or -1 when out of memory. */
int tlv_decode_downloads(const json_t *root, struct tl_view *v);
int tlv_decode_copies(const json_t *root, struct tl_view *v);
int tlv_decode_renames(const json_t *root, struct tl_view *v);
int tlv_decode_symlinks(const json_t *root, struct tl_view *v);
int tlv_decode_locks(const json_t *root, struct tl_view *v);
int tlv_decode_failed_ops(const json_t *root, struct tl_view *v);
int tlv_decode_cache_fs(const json_t *root, struct tl_view *v);
int tlv_decode_xet(const json_t *root, struct tl_view *v);
int tlv_decode_network(const json_t *root, struct tl_view *v);
int tlv_decode_connects(const json_t *root, struct tl_view *v);
int tlv_decode_requests(const json_t *root, struct tl_view *v);

#endif
