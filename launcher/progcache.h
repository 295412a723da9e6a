/* progcache: the tracer's BPF programs and maps kept loaded between runs
 * ([trace] keep_loaded), pinned in a directory of the BPF filesystem that
 * only tts-launch's user can open, so that a run whose object, kernel and
 * settings are those of an earlier run skips the programs' verification
 * and the maps' creation (most of launch -> exec, BENCHMARKS.md). Nothing
 * kept is attached: between runs the programs cost no CPU, only the maps'
 * kernel memory. progcache.c says how an entry is made, reused, reset and
 * evicted. */
#ifndef TTS_PROGCACHE_H
#define TTS_PROGCACHE_H

#include <stdbool.h>
#include <stddef.h>

struct bpf_object;

/* where entries live: one directory per key */
#define PROGCACHE_ROOT "/sys/fs/bpf/tts-launch"
/* how many settings (keys) are kept (the least recently used go first,
 * with every entry of theirs) */
#define PROGCACHE_KEEP 2
/* entries of one key: a run that finds the first in use (another run, or
 * the reset after the last run, ~50 ms after its exit) takes the second,
 * or makes it; so runs one right after another, or two at once, each take
 * one. The second is named "<key>-2", and removed once idle
 * PROGCACHE_SLOT_IDLE_S (a run needs one). */
#define PROGCACHE_SLOTS	      2
#define PROGCACHE_SLOT_IDLE_S 60

struct progcache {
	int rootfd;    /* PROGCACHE_ROOT, checked; -1: no cache */
	int dirfd;     /* this run's entry, locked (flock LOCK_EX) until its reset; -1 */
	bool hit;      /* the programs came from the entry */
	bool mounted;  /* progcache_init mounted the BPF filesystem (there was none) */
	char key[24];  /* the entry's name: what the programs are, and its slot */
	char why[200]; /* -v: why the entry was not reused (empty: it was, or none asked) */
};

/* Ready to ask (rootfd open and checked: a directory of a BPF filesystem,
 * owned by this user, closed to others; a BPF filesystem mounted on
 * /sys/fs/bpf first when there is none: c->mounted); false with why set. */
bool progcache_init(struct progcache *c);

/* The key of an opened, configured object (its bytes, its settings'
 * read-only data, which programs load, the kernel, the BTF it relocates
 * with, libbpf's version) into c->key. */
void progcache_key(struct progcache *c, const struct bpf_object *obj, bool min_btf);

/* An entry of c->key (its first slot no other run holds), taken for this
 * run when it exists and is clean (reset after its last run); c->key then
 * names the slot (also when it does not exist yet: a store makes it), and
 * its maps replace
 * obj's (obj opened, not loaded), and its programs are what obj's load
 * gets (progcache_loaded says whether each did). false: load afresh (why
 * says why). */
bool progcache_take(struct progcache *c, struct bpf_object *obj);
/* After the object's load: true when every program came from the entry;
 * the entry's writable globals (.bss, .data) are then back to the object's
 * initial images. */
bool progcache_loaded(struct progcache *c);
/* The entry taken could not be used: removed (this run loads afresh). */
void progcache_drop(struct progcache *c);

/* After a fresh load: the programs of objs[0..n) (every copy of the
 * object) and the maps of objs[0] pinned as c->key's entry, taken for this
 * run. false (why set) when it could not be made. */
bool progcache_store(struct progcache *c, struct bpf_object *const *objs, int n);

/* The entry's maps emptied, the entry marked clean for the next run and
 * its lock let go (dirfd closed), and entries beyond PROGCACHE_KEEP
 * removed. Called by the uprobe keeper once every link of the run is
 * closed (ukeeper.c). */
void progcache_reset(int rootfd, int dirfd);

/* [trace] keep_loaded = false: every entry not in use removed. */
void progcache_forget(void);

/* doctor: what is kept now. */
struct progcache_info {
	char key[24];		    /* with its slot */
	bool clean;		    /* reset after its last run: the next run may take it */
	double idle_s;		    /* since it was last taken */
	int programs, maps;	    /* pinned */
	unsigned long long memlock; /* kernel memory its maps and programs hold (bytes) */
};
/* Up to max entries into v (a store's unfinished directory not counted);
 * how many there are, 0 when nothing was ever kept, -1 with why when the
 * BPF filesystem or PROGCACHE_ROOT cannot be used (the fix said; errno
 * ENODEV: no BPF filesystem, which a run mounts). Reads only: takes no
 * entry, mounts nothing. */
int progcache_list(struct progcache_info *v, int max, char *why, size_t whylen);

#endif
