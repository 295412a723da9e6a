/* progcache: the tracer's programs and maps kept loaded between runs.
 *
 * An entry is a directory PROGCACHE_ROOT/<key> of the BPF filesystem
 * holding each program pinned as "p_<name>", each map as "m_<name>", and
 * "state", a one-element array: whether the maps were reset after the
 * entry's last run (clean) and when it was last used. The key is a hash of
 * everything a load depends on (progcache_key), so an entry's programs are
 * exactly what a fresh load of the same object would give.
 *
 * A run takes its entry with flock(LOCK_EX) on the entry's directory and
 * keeps it locked until the maps are reset: the lock goes with the
 * directory's open file, which the uprobe keeper inherits. The keeper, once
 * tts-launch has exited and every link of the run is closed (no kept
 * program can run any more), empties the maps, marks the entry clean and
 * lets the lock go (progcache_reset). A run that finds its entry locked
 * (another run, or a reset not yet done: ~50 ms after a run's exit) tries
 * the key's next slot (PROGCACHE_SLOTS), and loads afresh and stores the
 * load there when that slot is not made yet; with every slot locked it
 * loads afresh and keeps nothing. One that finds its entry not clean (a
 * reset that never happened: the keeper killed) removes it.
 *
 * How the programs get into libbpf's object without a load: libbpf loads
 * each program with bpf_prog_load(), and libbpf is linked in with that
 * symbol wrapped (the Makefile: ld's --wrap), so its calls come to
 * __wrap_bpf_prog_load (below). While an entry is being taken (armed) it
 * answers a program of the entry by name with the pinned program's fd,
 * which libbpf then owns as if it had loaded it; every other call goes on
 * to libbpf's own (__real_bpf_prog_load). Were libbpf linked another way,
 * the load would simply verify as before, and progcache_loaded says so.
 * The maps come in through bpf_map__reuse_fd, libbpf's own way. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "hostprobe.h"
#include "progcache.h"
#include "trace.minbtf.h"
#include "util.h"

/* "state": clean after a reset, and when it was last taken (ns, realtime) */
struct entry_state {
	uint64_t clean;
	uint64_t used;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the programs handed to libbpf's load ---- */

#define ARMED_MAX 64

static struct armed {
	char name[64];
	int fd; /* -1 once handed over */
} armed[ARMED_MAX];
static int n_armed, n_served, n_passed;
static bool arming;

/* libbpf's own, and this file's wrapper of it (ld --wrap=bpf_prog_load) */
int __real_bpf_prog_load(enum bpf_prog_type type, const char *name, const char *license,
			 const struct bpf_insn *insns, size_t insn_cnt,
			 const struct bpf_prog_load_opts *o);
int __wrap_bpf_prog_load(enum bpf_prog_type type, const char *name, const char *license,
			 const struct bpf_insn *insns, size_t insn_cnt,
			 const struct bpf_prog_load_opts *o);

int __wrap_bpf_prog_load(enum bpf_prog_type type, const char *name, const char *license,
			 const struct bpf_insn *insns, size_t insn_cnt,
			 const struct bpf_prog_load_opts *o)
{
	if (arming && name) {
		int fd;

		for (int i = 0; i < n_armed; i++) {
			struct bpf_prog_info info = {0};
			__u32 len = sizeof(info);

			if (armed[i].fd < 0 || strcmp(armed[i].name, name))
				continue;
			/* the kind libbpf asks for, or no program of the entry */
			if (bpf_obj_get_info_by_fd(armed[i].fd, &info, &len) || info.type != type)
				break;
			fd = armed[i].fd;
			armed[i].fd = -1;
			n_served++;
			return fd;
		}
		n_passed++;
	}
	return __real_bpf_prog_load(type, name, license, insns, insn_cnt, o);
}

/* the writable globals' (.bss, .data) initial images, for after the load */
#define IMAGES_MAX 8
static struct image {
	struct bpf_map *map;
	void *data;
	size_t size;
} images[IMAGES_MAX];
static int n_images;

static void images_free(void)
{
	for (int i = 0; i < n_images; i++)
		free(images[i].data);
	n_images = 0;
}

/* the programs not handed over closed, the images freed */
static void disarm(void)
{
	for (int i = 0; i < n_armed; i++)
		if (armed[i].fd >= 0)
			close(armed[i].fd);
	n_armed = 0;
	arming = false;
	images_free();
}

/* obj's writable globals' images copied (false: too many, or no memory) */
static bool images_save(struct bpf_object *obj)
{
	struct bpf_map *m;

	bpf_object__for_each_map (m, obj) {
		size_t sz = 0;
		const void *v;

		if (!bpf_map__is_internal(m) || strstr(bpf_map__name(m), ".rodata") ||
		    strstr(bpf_map__name(m), ".kconfig") || !(v = bpf_map__initial_value(m, &sz)))
			continue;
		if (n_images == IMAGES_MAX || !(images[n_images].data = malloc(sz)))
			return false;
		memcpy(images[n_images].data, v, sz);
		images[n_images].size = sz;
		images[n_images++].map = m;
	}
	return true;
}

/* ---- the root and the entries ---- */

/* A BPF filesystem mounted on /sys/fs/bpf (*mounted set, when mounted is
 * not NULL) unless one is there by now: under a lock on the directory, so
 * that two runs started at once do not mount two, one hiding the other's
 * entries for good. false with errno when none could be. */
static bool bpffs_mount(bool *mounted)
{
	int fd = open("/sys/fs/bpf", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct statfs sf;
	bool ok = false;
	int err = 0;

	if (fd < 0)
		return false;
	if (flock(fd, LOCK_EX)) {
		err = errno;
	} else if (!statfs("/sys/fs/bpf", &sf) && sf.f_type == BPF_FS_MAGIC) {
		ok = true; /* another run's, meanwhile */
	} else if (!mount("bpf", "/sys/fs/bpf", "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  "mode=0700")) {
		ok = true;
		if (mounted)
			*mounted = true;
	} else {
		err = errno;
	}
	close(fd);
	errno = err;
	return ok;
}

/* PROGCACHE_ROOT opened and checked: a directory of a BPF filesystem, this
 * user's, closed to others (made first when make, and the BPF filesystem
 * mounted then when there is none: *mounted set); -1 with why, errno
 * ENOENT when it does not exist and make is false, ENODEV without a BPF
 * filesystem */
static int root_open(bool make, bool *mounted, char *why, size_t whylen)
{
	struct statfs sf;
	struct stat st;
	int fd;

	if (statfs("/sys/fs/bpf", &sf) || sf.f_type != BPF_FS_MAGIC) {
		/* as a boot without systemd leaves it (a container, a small VM):
		 * mounted for a run, as tracefs is (hostprobe.c); closed to
		 * others, as systemd mounts it */
		if (!make || !bpffs_mount(mounted)) {
			if (make)
				snprintf(
				    why, whylen,
				    "no BPF filesystem on /sys/fs/bpf, and mounting one failed: "
				    "%s (mount -t bpf bpf /sys/fs/bpf)",
				    strerror(errno));
			else
				snprintf(why, whylen,
					 "no BPF filesystem on /sys/fs/bpf yet: a run mounts one");
			errno = ENODEV;
			return -1;
		}
	}
	if (make && mkdir(PROGCACHE_ROOT, 0700) && errno != EEXIST) {
		snprintf(why, whylen, "cannot make " PROGCACHE_ROOT ": %s", strerror(errno));
		return -1;
	}
	fd = open(PROGCACHE_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		int err = errno;

		snprintf(why, whylen, "cannot open " PROGCACHE_ROOT ": %s", strerror(err));
		if (fd >= 0)
			close(fd);
		errno = err;
		return -1;
	}
	/* another user's directory, or one others may write in, could hold
	 * programs that are not ours: never used */
	if (st.st_uid != geteuid() || (st.st_mode & 077)) {
		snprintf(why, whylen,
			 PROGCACHE_ROOT " is owned by uid %u or open to others (mode %03o): not "
					"used; remove it (rm -r " PROGCACHE_ROOT ")",
			 (unsigned int)st.st_uid, (unsigned int)(st.st_mode & 0777));
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

bool progcache_init(struct progcache *c)
{
	c->dirfd = -1;
	c->hit = false;
	c->key[0] = c->why[0] = '\0';
	c->mounted = false;
	c->rootfd = root_open(true, &c->mounted, c->why, sizeof(c->why));
	return c->rootfd >= 0;
}

void progcache_key(struct progcache *c, const struct bpf_object *obj, bool min_btf)
{
	uint64_t h = FNV1A_START;
	char kid[512] = "";
	Dl_info dl;
	struct stat lib;
	struct bpf_program *p;
	struct bpf_map *m;

	h = fnv1a(h, trace_obj_hash, sizeof(trace_obj_hash));
	hostprobe_kernel_id(kid, sizeof(kid));
	h = fnv1a(h, kid, strlen(kid) + 1);
	h = fnv1a(h, &min_btf, sizeof(min_btf));
	/* the library that relocated them (its version says v1.1 for every
	 * 1.1.x: the file itself, as this process mapped it; linked in, so
	 * this executable) */
	h = fnv1a(h, libbpf_version_string(), strlen(libbpf_version_string()) + 1);
	if (dladdr((void *)libbpf_version_string, &dl) && dl.dli_fname &&
	    !stat(dl.dli_fname, &lib)) {
		uint64_t id[4] = {(uint64_t)lib.st_dev, (uint64_t)lib.st_ino, (uint64_t)lib.st_size,
				  (uint64_t)lib.st_mtime};

		h = fnv1a(h, id, sizeof(id));
	}
	bpf_object__for_each_program (p, obj) {
		bool on = bpf_program__autoload(p);

		h = fnv1a(h, bpf_program__name(p), strlen(bpf_program__name(p)) + 1);
		h = fnv1a(h, &on, sizeof(on));
	}
	bpf_object__for_each_map (m, obj) {
		size_t sz = 0;
		const void *v;

		h = fnv1a(h, bpf_map__name(m), strlen(bpf_map__name(m)) + 1);
		/* the read-only globals are the settings the verifier saw */
		if (bpf_map__is_internal(m) && strstr(bpf_map__name(m), ".rodata") &&
		    (v = bpf_map__initial_value(m, &sz)))
			h = fnv1a(h, v, sz);
	}
	snprintf(c->key, sizeof(c->key), "%016llx", (unsigned long long)h);
}

/* name in the directory open as dirfd: every path goes through the
 * directory already opened and checked */
static void in_dir(char *path, size_t len, int dirfd, const char *prefix, const char *name)
{
	int n = snprintf(path, len, "/proc/self/fd/%d/%s", dirfd, prefix);

	/* the BPF filesystem refuses names with a dot (reserved): libbpf's
	 * ".rodata" and ".bss" maps are pinned as "-rodata", "-bss" */
	for (; n >= 0 && (size_t)n + 1 < len && *name; name++)
		path[n++] = *name == '.' ? '-' : *name;
	if (n >= 0 && (size_t)n < len)
		path[n] = '\0';
}

/* an entry's pinned object prefix+name, opened (-1: none) */
static int entry_get(int dirfd, const char *prefix, const char *name)
{
	char path[PATH_MAX];

	in_dir(path, sizeof(path), dirfd, prefix, name);
	return bpf_obj_get(path);
}

static int state_get(int dirfd, struct entry_state *s)
{
	int fd = entry_get(dirfd, "", "state");
	__u32 k = 0;

	if (fd < 0)
		return -1;
	if (bpf_map_lookup_elem(fd, &k, s)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* dirfd (locked) is still the directory named name: the lock goes with
 * the open directory, not with its name, so one taken just after another
 * run removed it would be a lock on nothing */
static bool still_named(int rootfd, int dirfd, const char *name)
{
	struct stat a, b;

	return !fstat(dirfd, &a) && !fstatat(rootfd, name, &b, AT_SYMLINK_NOFOLLOW) &&
	       a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

static void entry_remove(int rootfd, const char *dir)
{
	int dfd = openat(rootfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *e;

	if (!d) {
		if (dfd >= 0)
			close(dfd);
	} else {
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	unlinkat(rootfd, dir, AT_REMOVEDIR);
}

/* c->key (16 hex digits) names slot slot: "<key>", "<key>-2", ... */
_Static_assert(PROGCACHE_SLOTS >= 1 && PROGCACHE_SLOTS <= 9, "a slot is one digit");
static void slot_name(struct progcache *c, int slot)
{
	c->key[16] = slot > 1 ? '-' : '\0';
	c->key[17] = (char)('0' + slot);
	c->key[18] = '\0';
}

bool progcache_take(struct progcache *c, struct bpf_object *obj)
{
	struct entry_state s;
	struct bpf_program *p;
	struct bpf_map *m;
	int sfd, free_slot = 0;
	bool held = false;
	__u32 k = 0;

	if (c->rootfd < 0)
		return false;
	c->dirfd = -1;
	/* the first slot no other run holds; else the first not made yet,
	 * for the store */
	for (int slot = 1; slot <= PROGCACHE_SLOTS && c->dirfd < 0; slot++) {
		slot_name(c, slot);
		c->dirfd =
		    openat(c->rootfd, c->key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (c->dirfd < 0) {
			if (!free_slot)
				free_slot = slot;
			continue;
		}
		if (flock(c->dirfd, LOCK_EX | LOCK_NB)) {
			close(c->dirfd);
			c->dirfd = -1;
			held = true;
		}
	}
	if (c->dirfd < 0) {
		if (!free_slot) {
			snprintf(c->why, sizeof(c->why),
				 "all %d kept are in use by other runs, or their resets after the "
				 "last runs not done yet",
				 PROGCACHE_SLOTS);
			c->key[0] = '\0'; /* they stay: nothing to store */
			return false;
		}
		slot_name(c, free_slot); /* the store makes it */
		snprintf(c->why, sizeof(c->why), "%s",
			 held ? "the one kept is in use by another run, or its reset after the "
				"last run not done yet"
			      : "none kept for these settings yet");
		return false;
	}
	if (!still_named(c->rootfd, c->dirfd, c->key)) {
		snprintf(c->why, sizeof(c->why), "removed by another run meanwhile");
		close(c->dirfd);
		c->dirfd = -1;
		c->key[0] = '\0';
		return false;
	}
	sfd = state_get(c->dirfd, &s);
	if (sfd < 0 || !s.clean) {
		snprintf(c->why, sizeof(c->why), "%s: removed, loaded afresh",
			 sfd < 0 ? "incomplete" : "not reset after its last run");
		if (sfd >= 0)
			close(sfd);
		progcache_drop(c);
		return false;
	}
	s.clean = 0;
	s.used = now_ns();
	bpf_map_update_elem(sfd, &k, &s, 0);
	close(sfd);

	bpf_object__for_each_map (m, obj) {
		int fd = entry_get(c->dirfd, "m_", bpf_map__name(m));
		int err = fd < 0 ? -errno : bpf_map__reuse_fd(m, fd);

		if (fd >= 0)
			close(fd);
		if (err) {
			snprintf(c->why, sizeof(c->why), "map %s: %s: removed, loaded afresh",
				 bpf_map__name(m), strerror(-err));
			progcache_drop(c);
			return false;
		}
	}
	n_armed = n_served = n_passed = 0;
	if (!images_save(obj)) {
		snprintf(c->why, sizeof(c->why), "no memory for its globals: loaded afresh");
		progcache_drop(c); /* taken, so not clean any more */
		c->key[0] = '\0';
		return false;
	}
	bpf_object__for_each_program (p, obj) {
		int fd;

		if (!bpf_program__autoload(p))
			continue;
		fd = entry_get(c->dirfd, "p_", bpf_program__name(p));
		if (fd < 0 || n_armed == ARMED_MAX) {
			snprintf(c->why, sizeof(c->why), "program %s: %s: removed, loaded afresh",
				 bpf_program__name(p), fd < 0 ? strerror(errno) : "too many");
			if (fd >= 0)
				close(fd);
			disarm();
			progcache_drop(c);
			return false;
		}
		snprintf(armed[n_armed].name, sizeof(armed[n_armed].name), "%s",
			 bpf_program__name(p));
		armed[n_armed++].fd = fd;
	}
	arming = true;
	return true;
}

bool progcache_loaded(struct progcache *c)
{
	bool all = n_served == n_armed && !n_passed;

	if (!all) {
		snprintf(c->why, sizeof(c->why),
			 "%d of %d programs taken from it, %d verified (libbpf's load not "
			 "interposed): removed, none kept",
			 n_served, n_armed, n_passed);
		disarm();
		/* nothing to gain from keeping them in this process */
		progcache_drop(c);
		c->key[0] = '\0';
		return false;
	}
	/* the writable globals: what a fresh load starts from (libbpf does
	 * not fill a map it reuses), through the skeleton's mapping */
	for (int i = 0; i < n_images; i++) {
		size_t sz = 0;
		void *live = (void *)bpf_map__initial_value(images[i].map, &sz);

		if (!live || sz != images[i].size) {
			snprintf(c->why, sizeof(c->why),
				 "its globals %s could not be set: removed, loaded afresh",
				 bpf_map__name(images[i].map));
			disarm();
			return false;
		}
		memcpy(live, images[i].data, sz);
	}
	disarm();
	c->hit = true;
	return true;
}

void progcache_drop(struct progcache *c)
{
	disarm();
	if (c->dirfd < 0)
		return;
	entry_remove(c->rootfd, c->key);
	close(c->dirfd);
	c->dirfd = -1;
}

/* ---- a fresh load pinned ---- */

static bool pin_at(int dirfd, const char *prefix, const char *name, int fd)
{
	char path[PATH_MAX];

	in_dir(path, sizeof(path), dirfd, prefix, name);
	return bpf_obj_pin(fd, path) == 0;
}

static __u32 map_id(int fd)
{
	struct bpf_map_info info = {0};
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

bool progcache_store(struct progcache *c, struct bpf_object *const *objs, int n)
{
	char tmp[32];
	struct entry_state s = {0, now_ns()};
	struct bpf_program *p;
	struct bpf_map *m;
	int sfd = -1;
	__u32 k = 0;

	if (c->rootfd < 0 || !c->key[0] || c->dirfd >= 0)
		return false;
	/* the copies must share every map, or one entry would not be
	 * what they were */
	for (int i = 1; i < n; i++) {
		bpf_object__for_each_map (m, objs[i]) {
			struct bpf_map *m0 =
			    bpf_object__find_map_by_name(objs[0], bpf_map__name(m));

			if (bpf_map__fd(m) >= 0 &&
			    (!m0 || map_id(bpf_map__fd(m)) != map_id(bpf_map__fd(m0)))) {
				snprintf(c->why, sizeof(c->why), "map %s is not shared: not kept",
					 bpf_map__name(m));
				return false;
			}
		}
	}
	snprintf(tmp, sizeof(tmp), "new-%d", (int)getpid());
	entry_remove(c->rootfd, tmp);
	if (mkdirat(c->rootfd, tmp, 0700))
		goto fail;
	c->dirfd = openat(c->rootfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c->dirfd < 0 || flock(c->dirfd, LOCK_EX | LOCK_NB))
		goto fail;
	for (int i = 0; i < n; i++)
		bpf_object__for_each_program (p, objs[i])
			if (bpf_program__fd(p) >= 0 &&
			    !pin_at(c->dirfd, "p_", bpf_program__name(p), bpf_program__fd(p)))
				goto fail;
	bpf_object__for_each_map (m, objs[0])
		if (bpf_map__fd(m) >= 0 &&
		    !pin_at(c->dirfd, "m_", bpf_map__name(m), bpf_map__fd(m)))
			goto fail;
	sfd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "tl_cache_state", sizeof(k), sizeof(s), 1, NULL);
	if (sfd < 0 || bpf_map_update_elem(sfd, &k, &s, 0) || !pin_at(c->dirfd, "", "state", sfd))
		goto fail;
	close(sfd);
	sfd = -1;
	/* the entry appears whole or not at all; one made meanwhile by
	 * another run of the same settings stays */
	if (renameat2(c->rootfd, tmp, c->rootfd, c->key, RENAME_NOREPLACE))
		goto fail;
	return true;
fail:
	if (errno == EEXIST || errno == ENOTEMPTY)
		snprintf(c->why, sizeof(c->why), "another run of these settings kept them first");
	else
		snprintf(c->why, sizeof(c->why), "could not be kept: %s", strerror(errno));
	if (sfd >= 0)
		close(sfd);
	entry_remove(c->rootfd, tmp);
	if (c->dirfd >= 0)
		close(c->dirfd);
	c->dirfd = -1;
	return false;
}

/* ---- the reset, on the keeper ---- */

static int ncpus(void)
{
	static int n;

	if (!n)
		n = libbpf_num_possible_cpus();
	return n > 0 ? n : 1;
}

/* every element deleted (hash maps): the keys gathered in one walk, then
 * deleted in batches (one by one where a batch is refused) */
static int map_empty(int fd, const struct bpf_map_info *info)
{
	size_t ks = info->key_size, cap = info->max_entries, n = 0;
	unsigned char *keys = malloc(ks * (cap + 1));
	int err = 0;

	if (!keys)
		return -1;
	for (void *prev = NULL; n < cap; prev = keys + ks * n++)
		if (bpf_map_get_next_key(fd, prev, keys + ks * n))
			break;
	for (size_t at = 0; at < n && !err;) {
		__u32 cnt = (__u32)(n - at < 4096 ? n - at : 4096);

		if (bpf_map_delete_batch(fd, keys + ks * at, &cnt, NULL)) {
			cnt = (__u32)(n - at < 4096 ? n - at : 4096);
			for (__u32 i = 0; i < cnt; i++)
				if (bpf_map_delete_elem(fd, keys + ks * (at + i)) &&
				    errno != ENOENT)
					err = -1;
		}
		at += cnt;
	}
	/* an element the walk missed (it restarts when the element it was at
	 * goes; nothing deletes here meanwhile): the map must be empty now */
	if (!err && !bpf_map_get_next_key(fd, NULL, keys))
		err = -1;
	free(keys);
	return err;
}

/* every element zeroed (arrays): in batches, one element at a time where
 * batches are not supported */
static int array_zero(int fd, const struct bpf_map_info *info, bool percpu)
{
	size_t vsz = percpu ? ((info->value_size + 7) / 8 * 8) * (size_t)ncpus() : info->value_size;
	__u32 n = info->max_entries, batch = n < 4096 ? n : 4096;
	__u32 *keys = malloc(sizeof(*keys) * batch);
	void *zero = calloc(batch, vsz);
	int err = 0;

	if (!keys || !zero) {
		free(keys);
		free(zero);
		return -1;
	}
	for (__u32 at = 0; at < n && !err; at += batch) {
		__u32 cnt = n - at < batch ? n - at : batch;

		for (__u32 i = 0; i < cnt; i++)
			keys[i] = at + i;
		if (bpf_map_update_batch(fd, keys, zero, &cnt, NULL)) {
			for (__u32 i = 0; i < (n - at < batch ? n - at : batch) && !err; i++)
				err = bpf_map_update_elem(fd, &keys[i], zero, 0);
		}
	}
	free(keys);
	free(zero);
	return err ? -1 : 0;
}

/* what the programs produced and nobody consumed: skipped */
static int ring_skip(int fd)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long *cons, *prod;
	int err = -1;

	cons = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (cons == MAP_FAILED)
		return -1;
	prod = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, page);
	if (prod != MAP_FAILED) {
		__atomic_store_n(cons, __atomic_load_n(prod, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
		munmap(prod, (size_t)page);
		err = 0;
	}
	munmap(cons, (size_t)page);
	return err;
}

static int map_reset(int fd)
{
	struct bpf_map_info info = {0};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -1;
	switch (info.type) {
	case BPF_MAP_TYPE_HASH:
	case BPF_MAP_TYPE_PERCPU_HASH:
	case BPF_MAP_TYPE_LRU_HASH:
	case BPF_MAP_TYPE_LRU_PERCPU_HASH:
		return map_empty(fd, &info);
	case BPF_MAP_TYPE_ARRAY:
	case BPF_MAP_TYPE_PERCPU_ARRAY:
		/* the read-only globals stay as loaded (frozen: not writable) */
		if (info.map_flags & BPF_F_RDONLY_PROG)
			return 0;
		return array_zero(fd, &info, info.type == BPF_MAP_TYPE_PERCPU_ARRAY);
	case BPF_MAP_TYPE_RINGBUF:
		return ring_skip(fd);
	default:
		return -1; /* a kind this reset does not know: never reused */
	}
}

/* is name a key's second (or later) slot, "<key>-N" */
static bool later_slot(const char *name) { return strlen(name) > 16 && name[16] == '-'; }

struct old_entry {
	char name[NAME_MAX + 1];
	uint64_t used;
};

static int by_use_desc(const void *a, const void *b)
{
	uint64_t x = ((const struct old_entry *)a)->used, y = ((const struct old_entry *)b)->used;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* the entry name removed unless a run holds it (or it was renamed) */
static void remove_unheld(int rootfd, const char *name)
{
	int fd = openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return;
	if (!flock(fd, LOCK_EX | LOCK_NB) && still_named(rootfd, fd, name))
		entry_remove(rootfd, name);
	close(fd); /* after the removal: nobody takes it meanwhile */
}

/* Entries of the settings beyond keep (the least recently used settings
 * first, every slot of theirs), later slots idle for PROGCACHE_SLOT_IDLE_S
 * (runs that overlapped made them; one slot a setting is what a run
 * needs), and pins a store left half-made, removed (those in use stay) */
static void evict(int rootfd, int keep)
{
	struct old_entry e[32];
	char kept[32][17];
	int n = 0, n_kept = 0, dfd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	uint64_t now = now_ns();

	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		struct entry_state s = {0, 0};
		int fd, sfd = -1;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		fd = openat(rootfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) || !still_named(rootfd, fd, de->d_name)) {
			close(fd);
			continue;
		}
		if (!strncmp(de->d_name, "new-", 4) || (sfd = state_get(fd, &s)) < 0 || !keep ||
		    n == 32 ||
		    (later_slot(de->d_name) && now > s.used &&
		     now - s.used > PROGCACHE_SLOT_IDLE_S * 1000000000ull)) {
			entry_remove(rootfd, de->d_name);
		} else {
			snprintf(e[n].name, sizeof(e[n].name), "%s", de->d_name);
			e[n++].used = s.used;
		}
		if (sfd >= 0)
			close(sfd);
		close(fd); /* after the removal: nobody takes it meanwhile */
	}
	closedir(d);
	/* the entries of the keep settings used last stay (a setting's last
	 * use is its latest entry's), every other one goes */
	qsort(e, (size_t)n, sizeof(e[0]), by_use_desc);
	for (int i = 0; i < n; i++) {
		bool stays = false;

		for (int j = 0; j < n_kept && !stays; j++)
			stays = !strncmp(kept[j], e[i].name, 16);
		if (!stays && n_kept < keep && n_kept < 32) {
			snprintf(kept[n_kept++], sizeof(kept[0]), "%.16s", e[i].name);
			stays = true;
		}
		if (!stays)
			remove_unheld(rootfd, e[i].name);
	}
}

void progcache_reset(int rootfd, int dirfd)
{
	int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;

	if (!d) {
		if (dfd >= 0)
			close(dfd);
		err = -1;
	} else {
		while ((de = readdir(d))) {
			int fd;

			if (strncmp(de->d_name, "m_", 2))
				continue;
			fd = entry_get(dirfd, "", de->d_name);
			if (fd < 0 || map_reset(fd))
				err = -1;
			if (fd >= 0)
				close(fd);
		}
		closedir(d);
	}
	if (!err) {
		struct entry_state s;
		int sfd = state_get(dirfd, &s);
		__u32 k = 0;

		if (sfd >= 0) {
			s.clean = 1;
			bpf_map_update_elem(sfd, &k, &s, 0);
			close(sfd);
		}
	}
	close(dirfd); /* the lock goes: the next run may take it */
	if (rootfd >= 0)
		evict(rootfd, PROGCACHE_KEEP);
}

void progcache_forget(void)
{
	char why[200];
	int fd = root_open(false, NULL, why, sizeof(why));

	if (fd < 0)
		return;
	evict(fd, 0);
	close(fd);
}

/* ---- what is kept, for doctor ---- */

/* the memlock line of an fd's fdinfo (maps and programs have one) */
static unsigned long long fd_memlock(int fd)
{
	char path[64], buf[512];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "memlock: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

static void entry_info(int dirfd, struct progcache_info *in)
{
	int dfd = dup(dirfd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct entry_state s;
	struct dirent *de;
	int sfd = state_get(dirfd, &s);
	uint64_t now = now_ns();

	if (sfd >= 0) {
		in->clean = s.clean != 0;
		in->idle_s = s.used && now > s.used ? (double)(now - s.used) / 1e9 : 0;
		close(sfd);
	}
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		bool prog = !strncmp(de->d_name, "p_", 2), map = !strncmp(de->d_name, "m_", 2);
		int fd;

		if (!prog && !map)
			continue;
		fd = entry_get(dirfd, "", de->d_name); /* a pinned name: no dot to change */
		if (fd < 0)
			continue;
		in->programs += prog;
		in->maps += map;
		in->memlock += fd_memlock(fd);
		close(fd);
	}
	closedir(d);
}

int progcache_list(struct progcache_info *v, int max, char *why, size_t whylen)
{
	struct dirent *de;
	DIR *d;
	int rootfd = root_open(false, NULL, why, whylen), n = 0;

	if (rootfd < 0)
		return errno == ENOENT ? 0 : -1;
	d = fdopendir(rootfd);
	if (!d) {
		snprintf(why, whylen, "cannot read " PROGCACHE_ROOT ": %s", strerror(errno));
		close(rootfd);
		return -1;
	}
	while ((de = readdir(d))) {
		int fd;

		if (de->d_name[0] == '.' || !strncmp(de->d_name, "new-", 4))
			continue;
		if (n < max) {
			fd = openat(dirfd(d), de->d_name,
				    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				continue;
			memset(&v[n], 0, sizeof(v[n]));
			snprintf(v[n].key, sizeof(v[n].key), "%.23s", de->d_name);
			entry_info(fd, &v[n]);
			close(fd);
		}
		n++;
	}
	closedir(d);
	return n;
}
