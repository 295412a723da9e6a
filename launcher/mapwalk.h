/* mapwalk: every entry of a BPF hash map, read a batch at a time.
 *
 * A walk by BPF_MAP_GET_NEXT_KEY and BPF_MAP_LOOKUP_ELEM makes two system
 * calls an entry; the timeline built at a service's exit walked ~4000
 * entries of the paths and files maps that way (~9000 calls, 20 ms on
 * this VM). BPF_MAP_LOOKUP_BATCH copies up to MAPWALK_BATCH entries a
 * call. Where the first batch read fails (EINVAL or ENOTSUPP: a kernel or
 * map type without it; a security module refusing the command), the walk
 * goes entry by entry, as before.
 *
 * Entries added or deleted during the walk may be seen or not; none is
 * seen twice by a batch walk (the entry-by-entry one starts over when the
 * key it stood on was deleted, as get_next_key does, so it takes at most
 * the map's size of steps). Keys and values must be the map's own sizes
 * (checked; not per-CPU maps). */
#ifndef TTS_MAPWALK_H
#define TTS_MAPWALK_H

#include <stdbool.h>
#include <stddef.h>

#define MAPWALK_BATCH 256

struct map_walk {
	int fd;
	size_t key_sz, val_sz;
	char *keys, *vals; /* the batch read: n entries */
	unsigned n, i;	   /* entries in the batch, the next one to give */
	unsigned cap;	   /* entries the buffers hold */
	size_t given;	   /* entries given so far */
	size_t max;	   /* the map's size: entry by entry, at most this many steps */
	size_t steps;	   /* entry by entry: get_next_key calls made */
	char *batch;	   /* the kernel's position between batches */
	char *prev;	   /* entry by entry: the key given last */
	bool started, last, by_entry, failed;
};

/* fd: a hash or LRU hash map with these key and value sizes. force_entry:
 * entry by entry (tests). -1 when fd is no map of these sizes or on
 * allocation failure, and the walk is then empty and failed
 * (map_walk_next false, map_walk_end safe). */
int map_walk_begin(struct map_walk *w, int fd, size_t key_sz, size_t val_sz, bool force_entry);
/* The next entry copied to key and val (either may be NULL): false at the
 * end, or on a read error (w->failed). So a walk reads:
 *	map_walk_begin(&w, fd, sizeof(k), sizeof(v), false);
 *	while (map_walk_next(&w, &k, &v))
 *		...
 *	map_walk_end(&w); */
bool map_walk_next(struct map_walk *w, void *key, void *val);
void map_walk_end(struct map_walk *w);

#endif
