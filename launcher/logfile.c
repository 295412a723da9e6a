#include "logfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int open_log(struct logfile *l)
{
	struct stat st;

	l->fd = open(l->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (l->fd < 0)
		return -1;
	l->size = fstat(l->fd, &st) == 0 ? st.st_size : 0;
	return 0;
}

int logfile_open(struct logfile *l, const char *path, long long max_size, int backups, char *err,
		 size_t errlen)
{
	memset(l, 0, sizeof(*l));
	l->fd = -1;
	l->max_size = max_size;
	l->backups = backups;
	if (!path || !*path)
		return 0;
	l->path = strdup(path);
	if (!l->path || open_log(l) < 0) {
		snprintf(err, errlen, "failed to open log file %s: %s ([log] file)", path, strerror(errno));
		free(l->path);
		l->path = NULL;
		return -1;
	}
	return 0;
}

static void rotate(struct logfile *l)
{
	size_t len = strlen(l->path) + 16;
	char *from = malloc(len), *to = malloc(len);

	if (!from || !to)
		goto out;
	close(l->fd);
	l->fd = -1;
	if (l->backups == 0) {
		unlink(l->path);
	} else {
		for (int i = l->backups - 1; i >= 1; i--) {
			snprintf(from, len, "%s.%d", l->path, i);
			snprintf(to, len, "%s.%d", l->path, i + 1);
			rename(from, to); /* a missing backup is fine */
		}
		snprintf(to, len, "%s.1", l->path);
		rename(l->path, to);
	}
	open_log(l);
out:
	free(from);
	free(to);
}

static int write_all(struct logfile *l, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(l->fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
		l->size += n;
	}
	return 0;
}

/* How much of buf goes into the current file before a rotation: up to the
 * last line end that fits, else (a fresh file, one huge line) what fits. */
static size_t fitting(const struct logfile *l, const char *buf, size_t len)
{
	size_t room = l->size < l->max_size ? (size_t)(l->max_size - l->size) : 0;

	if (len <= room)
		return len;
	for (size_t i = room; i > 0; i--)
		if (buf[i - 1] == '\n')
			return i;
	return l->size == 0 ? room : 0;
}

int logfile_write(struct logfile *l, const char *buf, size_t len)
{
	if (!l->path)
		return 0;
	while (len) {
		size_t n = l->max_size > 0 ? fitting(l, buf, len) : len;

		if (l->fd < 0)
			return -1;
		if (n && write_all(l, buf, n) < 0)
			return -1;
		buf += n;
		len -= n;
		if (len)
			rotate(l);
	}
	return 0;
}

void logfile_close(struct logfile *l)
{
	if (l->fd >= 0)
		close(l->fd);
	free(l->path);
	l->path = NULL;
	l->fd = -1;
}
