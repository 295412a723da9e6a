#include "logfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static void take_size(struct logfile *l)
{
	struct stat st;

	l->size = fstat(l->fd, &st) == 0 ? st.st_size : 0;
}

/* The reopen after a rotation, through the directory we hold. */
static int reopen_log(struct logfile *l, char *err, size_t errlen)
{
	l->fd = safe_openat_append(l->dirfd, l->base, l->path, &l->owners, 0644, err, errlen);
	if (l->fd < 0)
		return -1;
	take_size(l);
	return 0;
}

int logfile_open(struct logfile *l, const char *path, const struct safe_owners *o,
		 long long max_size, int backups, char *err, size_t errlen)
{
	char why[512];

	memset(l, 0, sizeof(*l));
	l->fd = l->dirfd = -1;
	l->max_size = max_size;
	l->backups = backups;
	if (o)
		l->owners = *o;
	if (!path || !*path)
		return 0;
	l->path = strdup(path);
	l->base = l->path ? strdup(base_name(path)) : NULL;
	if (!l->base)
		goto fail_errno;
	l->fd = safe_open_append(l->path, &l->owners, 0644, &l->dirfd, why, sizeof(why));
	if (l->fd < 0)
		goto fail;
	take_size(l);
	return 0;
fail_errno:
	snprintf(why, sizeof(why), "%s: %s", path, strerror(errno));
fail:
	snprintf(err, errlen, "failed to open log file %s ([log] file)", why);
	logfile_close(l);
	return -1;
}

static void lose(struct logfile *l, size_t n, const char *why)
{
	l->lost += n;
	if (!l->error[0])
		snprintf(l->error, sizeof(l->error), "%s: %s", l->path, why);
}

/* Renames only move names inside the directory we hold: whatever sits at
 * a name (a planted link included) is moved, never followed. The new file
 * is opened like the first one, so a link planted between the rename and
 * the reopen is refused, not written through. */
static void rotate(struct logfile *l)
{
	char from[300], to[300], why[512];

	close(l->fd);
	l->fd = -1;
	if (l->backups == 0) {
		unlinkat(l->dirfd, l->base, 0);
	} else {
		for (int i = l->backups - 1; i >= 1; i--) {
			snprintf(from, sizeof(from), "%.280s.%d", l->base, i);
			snprintf(to, sizeof(to), "%.280s.%d", l->base, i + 1);
			renameat(l->dirfd, from, l->dirfd, to); /* a missing backup is fine */
		}
		snprintf(to, sizeof(to), "%.280s.1", l->base);
		renameat(l->dirfd, l->base, l->dirfd, to);
	}
	if (l->after_rename)
		l->after_rename(l->hook_arg);
	if (reopen_log(l, why, sizeof(why)) < 0 && !l->error[0])
		snprintf(l->error, sizeof(l->error), "rotation refused to reopen %.400s", why);
}

static int write_all(struct logfile *l, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(l->fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			lose(l, len, strerror(errno));
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
	int rc = 0;

	if (!l->path)
		return 0;
	while (len) {
		size_t n = l->max_size > 0 ? fitting(l, buf, len) : len;

		if (l->fd < 0) {
			lose(l, len, "not open");
			return -1;
		}
		if (n && write_all(l, buf, n) < 0)
			rc = -1; /* counted; the rest may still fit (space freed) */
		buf += n;
		len -= n;
		if (len)
			rotate(l);
	}
	return rc;
}

void logfile_close(struct logfile *l)
{
	if (l->fd >= 0)
		close(l->fd);
	if (l->dirfd >= 0)
		close(l->dirfd);
	free(l->path);
	free(l->base);
	l->path = l->base = NULL;
	l->fd = l->dirfd = -1;
}

/* ---- the output's tail ---- */

void log_tail_push(struct log_tail *t, const char *data, size_t n)
{
	if (n >= LOG_TAIL_BYTES) {
		/* only the end fits */
		memcpy(t->buf, data + n - LOG_TAIL_BYTES, LOG_TAIL_BYTES);
		t->start = 0;
		t->len = LOG_TAIL_BYTES;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		size_t end = (t->start + t->len) % LOG_TAIL_BYTES;

		t->buf[end] = data[i];
		if (t->len < LOG_TAIL_BYTES)
			t->len++;
		else
			t->start = (t->start + 1) % LOG_TAIL_BYTES;
	}
}

void log_tail_free(char **lines)
{
	for (char **l = lines; l && *l; l++)
		free(*l);
	free(lines);
}

char **log_tail_lines(const struct log_tail *t, int max_lines, size_t max_len)
{
	char *flat, **out;
	int n = 0;
	size_t end;

	if (!t->len || max_lines <= 0)
		return NULL;
	flat = malloc(t->len + 1);
	out = calloc((size_t)max_lines + 1, sizeof(*out));
	if (!flat || !out) {
		free(flat);
		free(out);
		return NULL;
	}
	for (size_t i = 0; i < t->len; i++)
		flat[i] = t->buf[(t->start + i) % LOG_TAIL_BYTES];
	flat[t->len] = '\0';
	/* from the end backwards, one line at a time; a progress bar's \r
	 * ends a line too (its last state is what counts) */
	end = t->len;
	while (end > 0 && n < max_lines) {
		size_t ls = end, b, e;

		while (ls > 0 && flat[ls - 1] != '\n')
			ls--;
		b = ls;
		e = end;
		while (e > b && (flat[e - 1] == '\r' || flat[e - 1] == ' ' || flat[e - 1] == '\t'))
			e--;
		for (size_t k = e; k > b; k--)
			if (flat[k - 1] == '\r') {
				b = k;
				break;
			}
		/* the oldest kept line may start mid-line: dropped unless alone */
		if (e > b && (ls > 0 || t->len < LOG_TAIL_BYTES || n == 0)) {
			size_t len = utf8_prefix_len(flat + b, e - b < max_len ? e - b : max_len);
			char *line = strndup(flat + b, len);

			if (!line)
				break;
			if (!*line) { /* a NUL byte's "line" */
				free(line);
				end = ls > 0 ? ls - 1 : 0;
				continue;
			}
			memmove(out + 1, out, (size_t)n * sizeof(*out));
			out[0] = line;
			n++;
		}
		end = ls > 0 ? ls - 1 : 0;
	}
	free(flat);
	if (!n) {
		free(out);
		return NULL;
	}
	return out;
}
