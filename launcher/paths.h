/* paths: relative paths the kernel reported made absolute. The kernel side
 * gives a relative path with the dev/ino of the directory it started from
 * (a cwd or an *at dirfd); this keeps the directories seen, by identity,
 * and resolves against them. No JSON, no model. */
#ifndef TTS_PATHS_H
#define TTS_PATHS_H

#include <linux/types.h>
#include <stddef.h>
#include <sys/types.h>

struct path_dir {
	__u64 dev, ino; /* dev as the kernel encodes it (MKDEV: major << 20 | minor) */
	char *path;	/* absolute, owned */
};

/* A process's cwd by identity, as last seen (the base of a relative chdir
 * the launcher read too late in /proc: the process gone) */
struct path_cwd {
	pid_t pid;
	__u64 dev, ino;
};

struct path_dirs {
	struct path_dir *d;
	size_t n, cap;
	struct path_cwd *cwd;
	size_t n_cwd, cap_cwd;
};

/* The kernel's encoding of a user-space dev_t. */
__u64 paths_kernel_dev(dev_t d);
/* Adds an absolute directory unless one of that identity is known. */
void paths_dir_add(struct path_dirs *t, __u64 dev, __u64 ino, const char *path);
/* Appends, known or not (a table of every base seen, first one wins). */
void paths_dir_push(struct path_dirs *t, __u64 dev, __u64 ino, const char *path);
/* A directory by its path (stat); dev and ino, when given, get its identity. */
void paths_dir_add_path(struct path_dirs *t, const char *path, __u64 *dev, __u64 *ino);
/* The cwd of a live process (when it is still the one the kernel reported:
 * want_dev/want_ino, or any when 0), else the chdir argument if absolute,
 * else that argument resolved against the process's cwd as last seen
 * (paths_cwd_set, paths_cwd_fork); the process's cwd is then the one the
 * kernel reported. */
void paths_dir_add_cwd(struct path_dirs *t, pid_t pid, __u64 want_dev, __u64 want_ino,
		       const char *arg);
/* pid's cwd is the directory dev/ino (the root's: [app] dir, where it starts) */
void paths_cwd_set(struct path_dirs *t, pid_t pid, __u64 dev, __u64 ino);
/* pid was forked by ppid: it starts in ppid's cwd */
void paths_cwd_fork(struct path_dirs *t, pid_t ppid, pid_t pid);
/* The path of a directory by identity, or NULL. */
const char *paths_dir_find(const struct path_dirs *t, __u64 dev, __u64 ino);
/* The absolute form of a traced path ("." and "x/.." folded); unchanged when
 * it is relative to a directory not known (or dev and ino are 0). */
void paths_abs(const struct path_dirs *t, const char *path, __u64 dev, __u64 ino, char *out,
	       size_t len);
void paths_dirs_free(struct path_dirs *t);

#endif
