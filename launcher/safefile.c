#include "safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_LINKS 40 /* as the kernel's own resolution (MAXSYMLINKS) */

void safe_owners_init(struct safe_owners *o, uid_t service_uid, const char *app_dir)
{
	struct stat st;

	memset(o, 0, sizeof(*o));
	if (geteuid() != 0)
		return; /* not root: nothing to protect beyond the kernel's checks */
	o->uid[o->n++] = 0;
	if (service_uid != (uid_t)-1 && service_uid != 0)
		o->uid[o->n++] = service_uid;
	if (app_dir && stat(app_dir, &st) == 0 && st.st_uid != 0 && st.st_uid != service_uid)
		o->uid[o->n++] = st.st_uid;
}

static bool owner_ok(const struct safe_owners *o, uid_t uid)
{
	if (!o || o->n == 0)
		return true;
	for (int i = 0; i < o->n; i++)
		if (o->uid[i] == uid)
			return true;
	return false;
}

/* openat2(2) has no glibc wrapper in Debian 12. */
static int openat2_dir(int at, const char *path)
{
	struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};

	return (int)syscall(SYS_openat2, at, path, &how, sizeof(how));
}

/* Resolve dir (relative to at) component by component: a directory is
 * entered with O_NOFOLLOW|O_DIRECTORY (a link swapped in after the check
 * fails instead of being followed), a symbolic link only when root owns
 * it (its target is then walked the same way). Returns an O_PATH
 * descriptor of the directory, or -1 with err set. */
static int walk_dir(int at, const char *dir, const char *shown, char *err, size_t errlen)
{
	char pending[PATH_MAX * 2], target[PATH_MAX], name[NAME_MAX + 1];
	size_t pos = 0;
	int links = 0, fd, nfd;

	if (strlen(dir) >= sizeof(pending)) {
		snprintf(err, errlen, "%s: path too long", shown);
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(pending, dir);
	fd = openat(pending[0] == '/' ? AT_FDCWD : at, pending[0] == '/' ? "/" : ".",
		    O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		goto fail_errno;
	for (;;) {
		struct stat st;
		size_t len;

		while (pending[pos] == '/')
			pos++;
		if (!pending[pos])
			break;
		len = strcspn(pending + pos, "/");
		if (len > NAME_MAX) {
			errno = ENAMETOOLONG;
			goto fail_errno;
		}
		memcpy(name, pending + pos, len);
		name[len] = '\0';
		pos += len;
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			goto fail_errno;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n;

			if (st.st_uid != 0) {
				snprintf(err, errlen,
					 "%s: '%s' is a symbolic link owned by uid %u, not root: "
					 "refusing to "
					 "follow it (replace it with a directory)",
					 shown, name, (unsigned)st.st_uid);
				errno = ELOOP;
				close(fd);
				return -1;
			}
			if (++links > MAX_LINKS) {
				errno = ELOOP;
				goto fail_errno;
			}
			n = readlinkat(fd, name, target, sizeof(target) - 1);
			if (n < 0)
				goto fail_errno;
			target[n] = '\0';
			/* the rest of the path now follows the link's target */
			if ((size_t)n + 1 + strlen(pending + pos) >= sizeof(pending)) {
				errno = ENAMETOOLONG;
				goto fail_errno;
			}
			{
				size_t rl = strlen(pending + pos);

				memmove(pending + n + 1, pending + pos, rl + 1);
				memcpy(pending, target, (size_t)n);
				pending[n] = '/';
			}
			pos = 0;
			if (target[0] == '/') {
				close(fd);
				fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
				if (fd < 0)
					goto fail_errno;
			}
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			errno = ENOTDIR;
			goto fail_errno;
		}
		nfd = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0)
			goto fail_errno;
		close(fd);
		fd = nfd;
	}
	return fd;
fail_errno : {
	int e = errno;

	snprintf(err, errlen, "%s: %s", shown, strerror(e));
	if (fd >= 0)
		close(fd);
	errno = e;
	return -1;
}
}

/* The directory part of path (".", "/" or the prefix) into buf; *base set
 * to the last component. -1 when path names no file. */
static int split(const char *path, char *buf, size_t len, const char **base)
{
	const char *slash = strrchr(path, '/');

	*base = slash ? slash + 1 : path;
	if (!**base || !strcmp(*base, ".") || !strcmp(*base, ".."))
		return -1;
	if (!slash)
		snprintf(buf, len, ".");
	else if (slash == path)
		snprintf(buf, len, "/");
	else if ((size_t)(slash - path) >= len)
		return -1;
	else
		snprintf(buf, len, "%.*s", (int)(slash - path), path);
	return 0;
}

int safe_dir_openat(int at, const char *path, const char **base, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	int fd, pfd;

	if (!path || split(path, dir, sizeof(dir), base) < 0) {
		snprintf(err, errlen, "%s: not a file name", path ? path : "(null)");
		errno = EINVAL;
		return -1;
	}
	/* the common case, one syscall: no link anywhere on the way */
	fd = openat2_dir(at, dir);
	if (fd >= 0)
		return fd;
	if (errno != ELOOP && errno != ENOSYS && errno != EPERM && errno != E2BIG &&
	    errno != EXDEV) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	pfd = walk_dir(at, dir, path, err, errlen);
	if (pfd < 0)
		return -1;
	fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
	close(pfd);
	return fd;
}

int safe_dir_open(const char *path, const char **base, char *err, size_t errlen)
{
	return safe_dir_openat(AT_FDCWD, path, base, err, errlen);
}

bool safe_root_link(int dirfd, const char *name, char *target, size_t len, uid_t *owner)
{
	struct stat st;
	ssize_t n;

	*owner = (uid_t)-1;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
		return false;
	*owner = st.st_uid;
	if (st.st_uid != 0)
		return false;
	n = readlinkat(dirfd, name, target, len - 1);
	if (n < 0)
		return false;
	target[n] = '\0';
	return true;
}

static int check_written(int fd, const char *shown, const struct safe_owners *o, char *err,
			 size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", shown, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is not a regular file: refusing to write into it", shown);
		errno = EINVAL;
		return -1;
	}
	if (st.st_nlink != 1) {
		snprintf(
		    err, errlen,
		    "%s has %lu hard links: refusing to write into it (it may be another file; "
		    "remove it)",
		    shown, (unsigned long)st.st_nlink);
		errno = EMLINK;
		return -1;
	}
	if (!owner_ok(o, st.st_uid)) {
		snprintf(err, errlen,
			 "%s is owned by uid %u, not by root, the service user or the app "
			 "directory's owner: refusing to write into it (remove it)",
			 shown, (unsigned)st.st_uid);
		errno = EPERM;
		return -1;
	}
	return 0;
}

static int openat_append(int dirfd, const char *name, const char *shown,
			 const struct safe_owners *o, mode_t mode, int depth, char *err,
			 size_t errlen)
{
	char target[PATH_MAX];
	uid_t owner;
	int fd, flags;

	/* O_NONBLOCK: a FIFO planted here must not hang the open */
	fd = openat(dirfd, name,
		    O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
		    mode);
	if (fd < 0 && errno == ELOOP) {
		if (safe_root_link(dirfd, name, target, sizeof(target), &owner) && depth < 8) {
			const char *base;
			int tfd = safe_dir_openat(dirfd, target, &base, err, errlen);

			if (tfd < 0)
				return -1;
			fd = openat_append(tfd, base, shown, o, mode, depth + 1, err, errlen);
			close(tfd);
			return fd;
		}
		snprintf(err, errlen,
			 "%s is a symbolic link owned by uid %u, not root: refusing to follow it "
			 "(remove it)",
			 shown, (unsigned)owner);
		errno = ELOOP;
		return -1;
	}
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", shown, strerror(errno));
		return -1;
	}
	if (check_written(fd, shown, o, err, errlen) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags >= 0)
		fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	return fd;
}

int safe_openat_append(int dirfd, const char *name, const char *shown, const struct safe_owners *o,
		       mode_t mode, char *err, size_t errlen)
{
	return openat_append(dirfd, name, shown, o, mode, 0, err, errlen);
}

int safe_open_append(const char *path, const struct safe_owners *o, mode_t mode, int *dirfd,
		     char *err, size_t errlen)
{
	const char *base;
	int dfd = safe_dir_open(path, &base, err, errlen), fd;

	if (dfd < 0)
		return -1;
	fd = openat_append(dfd, base, path, o, mode, 0, err, errlen);
	if (fd < 0 || !dirfd) {
		int e = errno;

		close(dfd);
		errno = e;
	} else {
		*dirfd = dfd;
	}
	return fd;
}
