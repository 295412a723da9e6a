#include "atomicfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safefile.h"

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
	int dfd = safe_dir_openat(at, path, &base, err, errlen);

	if (dfd < 0)
		return -1;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			uid_t owner;
			int rc;

			if (!safe_root_link(dfd, base, target, sizeof(target), &owner) ||
			    depth >= 8) {
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
	if ((!a->no_sync && fsync(a->fd) < 0) || close(a->fd) < 0) {
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
	a->tmp = NULL; /* renamed: nothing to remove */
	if (!a->no_sync)
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
	/* whole files of up to a few MiB: written 64 KiB a call, not 4 */
	if (f)
		setvbuf(f, NULL, _IOFBF, 1 << 16);
	return f;
}

static int write_commit(const char *path, const void *buf, size_t len, mode_t mode, uid_t uid,
			gid_t gid, bool no_sync, char *err, size_t errlen)
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
	a.no_sync = no_sync;
	return atomic_commit(&a, mode, uid, gid, err, errlen);
}

int atomic_write(const char *path, const void *buf, size_t len, mode_t mode, uid_t uid, gid_t gid,
		 char *err, size_t errlen)
{
	return write_commit(path, buf, len, mode, uid, gid, false, err, errlen);
}

int atomic_write_volatile(const char *path, const void *buf, size_t len, mode_t mode, uid_t uid,
			  gid_t gid, char *err, size_t errlen)
{
	return write_commit(path, buf, len, mode, uid, gid, true, err, errlen);
}
