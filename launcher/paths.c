/* paths: the directory table (dev/ino -> path) and resolution against it;
 * see paths.h. */
#include "paths.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util.h"

__u64 paths_kernel_dev(dev_t d) { return ((__u64)major(d) << 20) | minor(d); }

void paths_dir_push(struct path_dirs *t, __u64 dev, __u64 ino, const char *path)
{
	char *p;

	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct path_dir *n = realloc(t->d, cap * sizeof(*n));

		if (!n)
			return;
		t->d = n;
		t->cap = cap;
	}
	p = strdup(path);
	if (!p)
		return;
	t->d[t->n].dev = dev;
	t->d[t->n].ino = ino;
	t->d[t->n++].path = p;
}

void paths_dir_add(struct path_dirs *t, __u64 dev, __u64 ino, const char *path)
{
	if (!path || path[0] != '/' || paths_dir_find(t, dev, ino))
		return;
	paths_dir_push(t, dev, ino, path);
}

void paths_dir_add_path(struct path_dirs *t, const char *path, __u64 *dev, __u64 *ino)
{
	struct stat st;

	if (!path || stat(path, &st) || !S_ISDIR(st.st_mode))
		return;
	paths_dir_add(t, paths_kernel_dev(st.st_dev), st.st_ino, path);
	if (dev)
		*dev = paths_kernel_dev(st.st_dev);
	if (ino)
		*ino = st.st_ino;
}

static struct path_cwd *cwd_of(struct path_dirs *t, pid_t pid, bool add)
{
	for (size_t i = 0; i < t->n_cwd; i++)
		if (t->cwd[i].pid == pid)
			return &t->cwd[i];
	if (!add)
		return NULL;
	if (t->n_cwd == t->cap_cwd) {
		size_t cap = t->cap_cwd ? t->cap_cwd * 2 : 16;
		struct path_cwd *n = realloc(t->cwd, cap * sizeof(*n));

		if (!n)
			return NULL;
		t->cwd = n;
		t->cap_cwd = cap;
	}
	t->cwd[t->n_cwd] = (struct path_cwd){.pid = pid};
	return &t->cwd[t->n_cwd++];
}

void paths_cwd_set(struct path_dirs *t, pid_t pid, __u64 dev, __u64 ino)
{
	struct path_cwd *c = cwd_of(t, pid, true);

	if (c) {
		c->dev = dev;
		c->ino = ino;
	}
}

void paths_cwd_fork(struct path_dirs *t, pid_t ppid, pid_t pid)
{
	struct path_cwd *p = cwd_of(t, ppid, false);

	if (p)
		paths_cwd_set(t, pid, p->dev, p->ino);
}

void paths_dir_add_cwd(struct path_dirs *t, pid_t pid, __u64 want_dev, __u64 want_ino,
		       const char *arg)
{
	char link[64], path[PATH_MAX], rel[PATH_MAX];
	const struct path_cwd *c;
	const char *base;
	bool moved;
	__u64 dev = 0, ino = 0;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
	n = readlink(link, path, sizeof(path) - 1);
	if (n > 0) {
		path[n] = 0;
		paths_dir_add_path(t, path, &dev, &ino);
	}
	/* /proc says another directory than the chdir made */
	moved = want_ino && (dev != want_dev || ino != want_ino) && arg && arg[0];
	if (moved && arg[0] == '/') {
		paths_dir_add(t, want_dev, want_ino, arg);
	} else if (moved && (c = cwd_of(t, pid, false)) &&
		   (base = paths_dir_find(t, c->dev, c->ino))) {
		/* gone (or moved on) before we read /proc: a relative chdir
		 * from the cwd it had */
		path_resolve(base, arg, rel, sizeof(rel));
		paths_dir_add(t, want_dev, want_ino, rel);
	}
	if (want_ino)
		paths_cwd_set(t, pid, want_dev, want_ino);
	else if (ino)
		paths_cwd_set(t, pid, dev, ino);
}

const char *paths_dir_find(const struct path_dirs *t, __u64 dev, __u64 ino)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->d[i].dev == dev && t->d[i].ino == ino)
			return t->d[i].path;
	return NULL;
}

void paths_abs(const struct path_dirs *t, const char *path, __u64 dev, __u64 ino, char *out,
	       size_t len)
{
	const char *base = path[0] == '/' || (!dev && !ino) ? NULL : paths_dir_find(t, dev, ino);

	if (path[0] == '/' || base)
		path_resolve(base ? base : "", path, out, len);
	else
		snprintf(out, len, "%s", path);
}

void paths_dirs_free(struct path_dirs *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->d[i].path);
	free(t->d);
	free(t->cwd);
	memset(t, 0, sizeof(*t));
}
