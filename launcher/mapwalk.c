/* mapwalk: the batched walk of mapwalk.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "mapwalk.h"

int map_walk_begin(struct map_walk *w, int fd, size_t key_sz, size_t val_sz, bool force_entry)
{
	/* the kernel's batch position is a bucket index for hash maps; room
	 * for a key in case a map type keeps a key there */
	size_t pos = key_sz > 8 ? key_sz : 8;
	struct bpf_map_info info = {0};
	__u32 len = sizeof(info);

	memset(w, 0, sizeof(*w));
	/* the kernel writes the map's own sizes: buffers of other sizes
	 * would overflow (libbpf's per-entry calls checked this) */
	if (bpf_obj_get_info_by_fd(fd, &info, &len) || info.key_size != key_sz ||
	    info.value_size != val_sz) {
		w->failed = true;
		errno = EINVAL;
		return -1;
	}
	w->max = info.max_entries;
	w->fd = fd;
	w->key_sz = key_sz;
	w->val_sz = val_sz;
	w->by_entry = force_entry;
	w->cap = MAPWALK_BATCH;
	w->keys = malloc(key_sz * w->cap);
	w->vals = malloc(val_sz * w->cap);
	w->batch = calloc(1, pos);
	w->prev = calloc(1, pos);
	if (!w->keys || !w->vals || !w->batch || !w->prev) {
		map_walk_end(w);
		w->failed = true;
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* the next batch into keys/vals: false when there is none */
static bool read_batch(struct map_walk *w)
{
	while (!w->last) {
		__u32 n = w->cap;
		int err = bpf_map_lookup_batch(w->fd, w->started ? w->batch : NULL, w->batch,
					       w->keys, w->vals, &n, NULL);

		err = err ? errno : 0;
		w->started = true;
		if (err == ENOENT) /* these are the last ones */
			w->last = true;
		else if (err == ENOSPC && n == 0) {
			/* one bucket holds more entries than the buffers:
			 * twice the room, the same position again */
			unsigned cap = w->cap * 2;
			char *k = cap <= w->max ? realloc(w->keys, w->key_sz * cap) : NULL, *v;

			if (k)
				w->keys = k;
			v = k ? realloc(w->vals, w->val_sz * cap) : NULL;
			if (v)
				w->vals = v;
			if (!k || !v) {
				w->failed = true;
				return false;
			}
			w->cap = cap;
			continue;
		} else if (err) {
			/* no batch read here (EINVAL, ENOTSUPP on a kernel or map
			 * type without it; a security module refusing the
			 * command): entry by entry, which map_walk_next allows
			 * only while nothing was given */
			w->by_entry = true;
			return false;
		}
		w->n = n;
		w->i = 0;
		if (n)
			return true;
	}
	return false;
}

/* entry i of the buffers to the caller */
static void give(const struct map_walk *w, unsigned i, void *key, void *val)
{
	if (key)
		memcpy(key, w->keys + w->key_sz * i, w->key_sz);
	if (val)
		memcpy(val, w->vals + w->val_sz * i, w->val_sz);
}

static bool next_entry(struct map_walk *w, void *key, void *val)
{
	/* a deleted key makes get_next_key start over: at most the map's
	 * size of steps, so a walk of a map emptied and refilled meanwhile
	 * ends */
	for (;;) {
		if (w->steps++ >= w->max ||
		    bpf_map_get_next_key(w->fd, w->started ? w->prev : NULL, w->keys))
			return false;
		w->started = true;
		memcpy(w->prev, w->keys, w->key_sz);
		/* deleted between the two calls: the one after it */
		if (bpf_map_lookup_elem(w->fd, w->keys, w->vals))
			continue;
		give(w, 0, key, val);
		return true;
	}
}

bool map_walk_next(struct map_walk *w, void *key, void *val)
{
	if (w->failed)
		return false;
	if (!w->by_entry && w->i == w->n && !read_batch(w)) {
		if (!w->by_entry)
			return false;
		/* no batch read: entry by entry from the first, unless
		 * entries were given already (they would be given again) */
		if (w->given) {
			w->failed = true;
			return false;
		}
		w->started = false;
	}
	if (w->by_entry) {
		if (!next_entry(w, key, val))
			return false;
		w->given++;
		return true;
	}
	w->given++;
	give(w, w->i++, key, val);
	return true;
}

void map_walk_end(struct map_walk *w)
{
	free(w->keys);
	free(w->vals);
	free(w->batch);
	free(w->prev);
	w->keys = w->vals = w->batch = w->prev = NULL;
}
