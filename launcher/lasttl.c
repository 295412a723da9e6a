/* lasttl: RUN_DIR/last-timeline, written whole (a temp file renamed over
 * it) by the supervisor each time it writes its timeline, read by
 * `diagnose` without arguments (main.c). */
#include "lasttl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "instance.h"

#define LASTTL_BYTES (LASTTL_MAX * 3 * 4096 + 64)

/* The file's text (at most LASTTL_BYTES - 1), or -1 when there is none to
 * trust: a regular file with one link, owned by uid, not writable by
 * others. */
static ssize_t read_all(int dfd, unsigned uid, char *buf)
{
	struct stat st;
	ssize_t n = 0, r;
	int fd = openat(dfd, LASTTL_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != uid ||
	    (st.st_mode & (S_IWGRP | S_IWOTH))) {
		close(fd);
		return -1;
	}
	while (n < LASTTL_BYTES - 1 && (r = read(fd, buf + n, LASTTL_BYTES - 1 - n)) > 0)
		n += r;
	close(fd);
	buf[n] = '\0';
	return n;
}

static bool plain(const char *s) { return s && !strpbrk(s, "\t\n"); }

/* Is line (up to its newline) the entry of cwd? */
static bool entry_of(const char *line, const char *cwd)
{
	size_t k = strlen(cwd);

	return !strncmp(line, cwd, k) && line[k] == '\t';
}

void lasttl_note_in(const char *dir, unsigned uid, const char *cwd, const char *timeline,
		    const char *config)
{
	char err[512], tmp[64], *old, *out;
	int dfd, fd, kept = 1;
	size_t len;
	bool ok;

	if (!plain(cwd) || !plain(timeline) || timeline[0] != '/' || (config && !plain(config)))
		return;
	dfd = instance_dir_open(dir, (uid_t)uid, err, sizeof(err));
	if (dfd < 0)
		return;
	old = calloc(1, LASTTL_BYTES);
	out = malloc(2 * LASTTL_BYTES);
	if (!old || !out) {
		free(old);
		free(out);
		close(dfd);
		return;
	}
	read_all(dfd, uid, old);
	len = (size_t)snprintf(out, 2 * LASTTL_BYTES, "%s\t%s\t%s\n", cwd, timeline,
			       config ? config : "");
	/* the other directories' entries after it, the oldest dropped */
	for (char *l = old; *l && kept < LASTTL_MAX;) {
		char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) + 1 : strlen(l);

		if (nl && !entry_of(l, cwd) && len + n < 2 * LASTTL_BYTES) {
			memcpy(out + len, l, n);
			len += n;
			kept++;
		}
		l += n;
	}
	snprintf(tmp, sizeof(tmp), ".%s.%d", LASTTL_FILE, (int)getpid());
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0) {
		ok = write(fd, out, len) == (ssize_t)len && fchmod(fd, 0644) == 0;
		ok = close(fd) == 0 && ok;
		if (!ok || renameat(dfd, tmp, dfd, LASTTL_FILE) < 0)
			unlinkat(dfd, tmp, 0);
	}
	free(old);
	free(out);
	close(dfd);
}

void lasttl_note(const char *cwd, const char *timeline, const char *config)
{
	if (geteuid() == 0)
		lasttl_note_in(INSTANCE_RUN_DIR, 0, cwd, timeline, config);
}

/* Copy the field that starts at p (up to a tab or newline) to out. */
static const char *copy_field(const char *p, char *out, size_t len)
{
	size_t n = strcspn(p, "\t\n");

	if (n >= len)
		return NULL;
	memcpy(out, p, n);
	out[n] = '\0';
	return p[n] == '\t' ? p + n + 1 : p + n;
}

int lasttl_read_in(const char *dir, unsigned uid, const char *cwd, char *timeline, size_t tlen,
		   char *config, size_t clen)
{
	struct stat st;
	char *buf;
	int dfd, rc = -1;

	if (!plain(cwd))
		return -1;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	/* written only where no one else may write, by its owner */
	buf = malloc(LASTTL_BYTES);
	if (!buf || fstat(dfd, &st) < 0 || st.st_uid != uid || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
	    read_all(dfd, uid, buf) <= 0) {
		free(buf);
		close(dfd);
		return -1;
	}
	close(dfd);
	for (const char *l = buf; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
		const char *p;

		if (!entry_of(l, cwd))
			continue;
		p = copy_field(l + strlen(cwd) + 1, timeline, tlen);
		if (p && timeline[0] == '/' && copy_field(p, config, clen))
			rc = 0;
		break;
	}
	free(buf);
	return rc;
}

int lasttl_read(const char *cwd, char *timeline, size_t tlen, char *config, size_t clen)
{
	return lasttl_read_in(INSTANCE_RUN_DIR, 0, cwd, timeline, tlen, config, clen);
}
