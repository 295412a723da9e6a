#include "safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
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

static int dir_open_at(int at, const char *path, const char **base, char *err, size_t errlen)
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
	return dir_open_at(AT_FDCWD, path, base, err, errlen);
}

/* Is the existing name a link root owns? Then *target gets its text. */
static bool root_link(int dirfd, const char *name, char *target, size_t len, uid_t *owner)
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
		if (root_link(dirfd, name, target, sizeof(target), &owner) && depth < 8) {
			const char *base;
			int tfd = dir_open_at(dirfd, target, &base, err, errlen);

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

/* ---- atomic replacement ---- */

static void atomic_reset(struct atomic_file *a)
{
	memset(a, 0, sizeof(*a));
	a->fd = a->dirfd = -1;
}

void atomic_abort(struct atomic_file *a)
{
	if (a->tmp && a->dirfd >= 0)
		unlinkat(a->dirfd, a->tmp, 0);
	if (a->fd >= 0)
		close(a->fd);
	if (a->dirfd >= 0)
		close(a->dirfd);
	free(a->tmp);
	free(a->base);
	free(a->path);
	atomic_reset(a);
}

static int create_temp(struct atomic_file *a, char *err, size_t errlen)
{
	static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";

	for (int attempt = 0; attempt < 100; attempt++) {
		unsigned char r[6];
		char suffix[7];

		if (getrandom(r, sizeof(r), 0) != sizeof(r))
			for (size_t i = 0; i < sizeof(r); i++)
				r[i] = (unsigned char)(rand() ^ attempt);
		for (size_t i = 0; i < sizeof(r); i++)
			suffix[i] = digits[r[i] % (sizeof(digits) - 1)];
		suffix[6] = '\0';
		free(a->tmp);
		if (asprintf(&a->tmp, ".%.200s.%s", a->base, suffix) < 0) {
			a->tmp = NULL;
			break;
		}
		a->fd =
		    openat(a->dirfd, a->tmp,
			   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
		if (a->fd >= 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	snprintf(err, errlen, "failed to create a temporary file beside %s: %s", a->path,
		 strerror(errno));
	free(a->tmp);
	a->tmp = NULL;
	return -1;
}

static int begin_at(struct atomic_file *a, int at, const char *path, const char *shown, int depth,
		    char *err, size_t errlen)
{
	const char *base;
	struct stat st;
	int dfd = dir_open_at(at, path, &base, err, errlen);

	if (dfd < 0)
		return -1;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			uid_t owner;
			int rc;

			if (!root_link(dfd, base, target, sizeof(target), &owner) || depth >= 8) {
				snprintf(
				    err, errlen,
				    "%s is a symbolic link owned by uid %u, not root: refusing to "
				    "write through it (remove it)",
				    shown, (unsigned)st.st_uid);
				close(dfd);
				errno = ELOOP;
				return -1;
			}
			rc = begin_at(a, dfd, target, shown, depth + 1, err, errlen);
			close(dfd);
			return rc;
		}
		if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
			/* -o /dev/null: the node stays, its reader gets the bytes */
			a->fd = openat(dfd, base,
				       O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
			if (a->fd < 0) {
				snprintf(err, errlen, "failed to open %s: %s", shown,
					 strerror(errno));
				close(dfd);
				return -1;
			}
			fcntl(a->fd, F_SETFL, fcntl(a->fd, F_GETFL) & ~O_NONBLOCK);
			a->in_place = true;
			a->dirfd = dfd;
			return 0;
		}
		if (!S_ISREG(st.st_mode)) {
			snprintf(err, errlen,
				 "%s is %s: refusing to replace it (name a regular file)", shown,
				 S_ISDIR(st.st_mode) ? "a directory" : "a special file");
			close(dfd);
			errno = EINVAL;
			return -1;
		}
	}
	a->dirfd = dfd;
	a->base = strdup(base);
	if (!a->base) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return create_temp(a, err, errlen);
}

int atomic_begin(struct atomic_file *a, const char *path, char *err, size_t errlen)
{
	atomic_reset(a);
	a->path = strdup(path ? path : "");
	if (!a->path || begin_at(a, AT_FDCWD, a->path, a->path, 0, err, errlen) < 0) {
		int e = errno;

		atomic_abort(a);
		errno = e;
		return -1;
	}
	return 0;
}

int atomic_commit(struct atomic_file *a, mode_t mode, uid_t uid, gid_t gid, char *err,
		  size_t errlen)
{
	int rc = -1;

	if (a->fd < 0) {
		snprintf(err, errlen, "failed to write %s: not open", a->path ? a->path : "?");
		atomic_abort(a);
		return -1;
	}
	if (a->in_place) {
		if (close(a->fd) < 0)
			snprintf(err, errlen, "failed to write %s: %s", a->path, strerror(errno));
		else
			rc = 0;
		a->fd = -1;
		atomic_abort(a);
		return rc;
	}
	if (fchmod(a->fd, mode) < 0 ||
	    (uid != (uid_t)-1 && geteuid() == 0 && fchown(a->fd, uid, gid) < 0)) {
		snprintf(err, errlen, "failed to set the mode or owner of %s: %s", a->path,
			 strerror(errno));
		goto out;
	}
	if (fsync(a->fd) < 0 || close(a->fd) < 0) {
		a->fd = -1;
		snprintf(err, errlen, "failed to write %s: %s", a->path, strerror(errno));
		goto out;
	}
	a->fd = -1;
	if (renameat(a->dirfd, a->tmp, a->dirfd, a->base) < 0) {
		snprintf(err, errlen, "failed to rename the temporary file to %s: %s", a->path,
			 strerror(errno));
		goto out;
	}
	free(a->tmp);
	a->tmp = NULL;	 /* renamed: nothing to remove */
	fsync(a->dirfd); /* the rename is durable once the directory is */
	rc = 0;
out:
	atomic_abort(a);
	return rc;
}

FILE *atomic_stream(struct atomic_file *a)
{
	int fd = a->fd >= 0 ? dup(a->fd) : -1;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	if (!f && fd >= 0)
		close(fd);
	return f;
}

int atomic_write(const char *path, const void *buf, size_t len, mode_t mode, uid_t uid, gid_t gid,
		 char *err, size_t errlen)
{
	struct atomic_file a;
	const char *p = buf;

	if (atomic_begin(&a, path, err, errlen) < 0)
		return -1;
	while (len) {
		ssize_t n = write(a.fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "failed to write %s: %s", path,
				 strerror(n < 0 ? errno : EIO));
			atomic_abort(&a);
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return atomic_commit(&a, mode, uid, gid, err, errlen);
}
