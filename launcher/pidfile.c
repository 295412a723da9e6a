#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomicfile.h"
#include "safefile.h"

int pidfile_write(const char *path, const struct pidfile_info *pi, char *err, size_t errlen)
{
	char body[128];
	int n;

	n = snprintf(body, sizeof(body), "%d %llu\n%d %llu\n", pi->service_pid, pi->service_start,
		     pi->supervisor_pid, pi->supervisor_start);
	return atomic_write_volatile(path, body, (size_t)n, 0644, (uid_t)-1, (gid_t)-1, err,
				     errlen);
}

/* The pidfile's directory and the file itself, opened without following a
 * link that is not root's (safe_dir_open) nor one at the last component. */
static int open_pidfile(const char *path, int *dirfd, const char **base)
{
	char err[512];
	int fd;

	*dirfd = safe_dir_open(path, base, err, sizeof(err));
	if (*dirfd < 0)
		return -1;
	fd = openat(*dirfd, *base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		close(*dirfd);
		*dirfd = -1;
		errno = e;
	}
	return fd;
}

static int parse(int fd, struct pidfile_info *pi)
{
	char buf[256];
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return -2;
	if (st.st_size == 0) {
		errno = ENOENT; /* names nothing: as if missing */
		return -1;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -2;
	buf[n] = 0;
	if (sscanf(buf, "%d %llu %d %llu", &pi->service_pid, &pi->service_start,
		   &pi->supervisor_pid, &pi->supervisor_start) != 4 ||
	    pi->service_pid <= 0 || pi->supervisor_pid <= 0) {
		memset(pi, 0, sizeof(*pi));
		return -2;
	}
	return 0;
}

int pidfile_read(const char *path, struct pidfile_info *pi)
{
	const char *base;
	int dirfd, fd, rc;

	memset(pi, 0, sizeof(*pi));
	if (!path || !*path) {
		errno = ENOENT;
		return -1;
	}
	fd = open_pidfile(path, &dirfd, &base);
	if (fd < 0)
		return errno == ELOOP ? -2 : -1;
	rc = parse(fd, pi);
	close(fd);
	close(dirfd);
	return rc;
}

int pidfile_remove_if(const char *path, int supervisor_pid)
{
	struct pidfile_info pi;
	const char *base;
	int dirfd, fd, rc = 0;

	if (!path || !*path)
		return 0;
	fd = open_pidfile(path, &dirfd, &base);
	if (fd < 0)
		return 0;
	if (parse(fd, &pi) == 0 && pi.supervisor_pid == supervisor_pid)
		rc = unlinkat(dirfd, base, 0) == 0;
	close(fd);
	close(dirfd);
	return rc;
}
