/* config_file: the config file's bytes, read once and checked before
 * iniparser sees them (config.h: what a valid file is; docs/security.md: why
 * root reads only root's). */
#include "config_file.h"
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static char ini_error[512];

/* iniparser reports syntax errors through this callback. */
static int ini_errback(const char *fmt, ...)
{
	va_list ap;
	size_t off = strlen(ini_error);

	if (off >= sizeof(ini_error) - 1)
		return 0;
	va_start(ap, fmt);
	vsnprintf(ini_error + off, sizeof(ini_error) - off, fmt, ap);
	va_end(ap);
	return 0;
}

/* Open and read FILE whole (at most CONFIG_MAX_BYTES): a regular file, and
 * as root one that root owns and only root can write (root runs only what
 * root chose: a config can set [env] LD_PRELOAD or [log] file). O_NONBLOCK:
 * a FIFO or device must not hang the open. Returns a malloc'd, NUL-terminated
 * buffer (*len bytes) or NULL with the message in err. */
char *config_file_read(const char *file, bool as_root, size_t *len, char *err, size_t errlen)
{
	struct stat st, lst;
	char *buf = NULL;
	size_t n = 0;
	int fd;

	fd = open(file, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen,
			 "%s: cannot read config file: %s (give an existing file with -c, or none "
			 "for the defaults)",
			 file, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: cannot read config file: %s", file, strerror(errno));
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(
		    err, errlen,
		    "%s: is a directory, not a config file: give the INI file with -c (e.g. -c "
		    "%s/tts-launch.ini)",
		    file, file);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen,
			 "%s: is not a regular file (a device, FIFO or socket): give the INI file "
			 "with -c",
			 file);
		goto fail;
	}
	if (as_root) {
		/* the link itself too: a link another user planted names any file */
		if (lstat(file, &lst) == 0 && S_ISLNK(lst.st_mode) && lst.st_uid != 0) {
			snprintf(err, errlen,
				 "%s: is a symbolic link owned by uid %u, not root: as root, "
				 "tts-launch reads only "
				 "a config that root chose (replace the link with the file, owned "
				 "by root)",
				 file, (unsigned)lst.st_uid);
			goto fail;
		}
		if (st.st_uid != 0) {
			struct passwd *pw = getpwuid(st.st_uid);

			snprintf(err, errlen,
				 "%s: is owned by uid %u (%s), not root: as root, tts-launch reads "
				 "only a config "
				 "root owns, since it decides what root runs (chown root:root %s, "
				 "or run tts-launch as that user)",
				 file, (unsigned)st.st_uid, pw ? pw->pw_name : "no such user",
				 file);
			goto fail;
		}
		if (st.st_mode & (S_IWGRP | S_IWOTH)) {
			snprintf(
			    err, errlen,
			    "%s: is writable by %s (mode %04o): as root, tts-launch reads only "
			    "a config no "
			    "other user can change (chmod go-w %s)",
			    file, (st.st_mode & S_IWOTH) ? "others" : "its group",
			    (unsigned)(st.st_mode & 07777), file);
			goto fail;
		}
	}
	if (st.st_size > CONFIG_MAX_BYTES) {
		snprintf(err, errlen,
			 "%s: is %lld bytes: a config file is at most %d bytes (is this the right "
			 "file?)",
			 file, (long long)st.st_size, CONFIG_MAX_BYTES);
		goto fail;
	}
	/* one byte more than the limit: a file that grows meanwhile is caught */
	buf = malloc(CONFIG_MAX_BYTES + 2);
	if (!buf) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, CONFIG_MAX_BYTES + 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "%s: cannot read config file: %s", file,
				 strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > CONFIG_MAX_BYTES) {
			snprintf(
			    err, errlen,
			    "%s: is more than %d bytes: a config file is at most that (is this "
			    "the right file?)",
			    file, CONFIG_MAX_BYTES);
			goto fail;
		}
	}
	close(fd);
	buf[n] = '\0';
	*len = n;
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

/* Text only: UTF-8, no NUL and no control characters but tab, CR, LF. */
static int check_text(const char *file, const char *buf, size_t len, char *err, size_t errlen)
{
	const unsigned char *p = (const unsigned char *)buf;
	int line = 1;

	for (size_t i = 0; i < len;) {
		size_t l = utf8_char_len((const char *)p + i, len - i);

		if (p[i] == '\0') {
			snprintf(err, errlen,
				 "%s: line %d: contains a NUL byte: a config file is text (is this "
				 "the right file?)",
				 file, line);
			return -1;
		}
		if (!l) {
			snprintf(err, errlen,
				 "%s: line %d: byte 0x%02x is not UTF-8 text: save the file as "
				 "UTF-8 (is this the right file?)",
				 file, line, p[i]);
			return -1;
		}
		if (l == 1 && (p[i] < 0x20 || p[i] == 0x7f) && p[i] != '\t' && p[i] != '\r' &&
		    p[i] != '\n') {
			snprintf(err, errlen,
				 "%s: line %d: control character 0x%02x: a config file is text "
				 "(remove it)",
				 file, line, p[i]);
			return -1;
		}
		if (p[i] == '\n')
			line++;
		i += l;
	}
	return 0;
}

struct seen_key {
	char section[CONFIG_MAX_NAME + 1];
	char key[CONFIG_MAX_NAME + 1];
	int line;
};

static void lower_copy(char *dst, const char *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = (char)tolower((unsigned char)src[i]);
	dst[n] = '\0';
}

static void trim(const char **b, const char **e)
{
	while (*b < *e && isspace((unsigned char)**b))
		(*b)++;
	while (*e > *b && isspace((unsigned char)(*e)[-1]))
		(*e)--;
}

/* What iniparser 4.1 would silently get wrong, found before it parses:
 * duplicate keys (it keeps the last), section names with ':' (its
 * "section:key" dictionary reads "[env:NAME]" as NAME = ""), unbalanced
 * quotes, over-long names and lines. Lines as iniparser sees them: a line
 * ending in '\' continues on the next; '#' and ';' start comments; lines it
 * cannot read are left to its own syntax error. */
static int prescan(const char *file, const char *buf, char *err, size_t errlen)
{
	struct seen_key *seen = NULL;
	size_t n_seen = 0;
	char section[CONFIG_MAX_NAME + 1] = "";
	const char *p = buf;
	int lineno = 0, rc = -1;
	char *logical = NULL;

	seen = calloc(CONFIG_MAX_KEYS, sizeof(*seen));
	logical = malloc(strlen(buf) + 1);
	if (!seen || !logical) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	while (*p) {
		const char *b, *e, *eq;
		size_t ll = 0;
		int first = lineno + 1;

		/* one logical line, continuation lines joined */
		for (;;) {
			const char *nl = strchr(p, '\n');
			const char *le = nl ? nl : p + strlen(p);

			lineno++;
			if (le - p > CONFIG_MAX_LINE) {
				snprintf(err, errlen,
					 "%s: line %d is longer than %d characters: shorten it",
					 file, lineno, CONFIG_MAX_LINE);
				goto out;
			}
			b = p;
			e = le;
			trim(&b, &e);
			p = nl ? nl + 1 : le;
			if (e > b && e[-1] == '\\' && *p) {
				memcpy(logical + ll, b, (size_t)(e - b - 1));
				ll += (size_t)(e - b - 1);
				continue;
			}
			memcpy(logical + ll, b, (size_t)(e - b));
			ll += (size_t)(e - b);
			break;
		}
		logical[ll] = '\0';
		if (ll > CONFIG_MAX_LINE) {
			snprintf(err, errlen,
				 "%s: line %d: the value continued over several lines is longer "
				 "than %d characters",
				 file, first, CONFIG_MAX_LINE);
			goto out;
		}
		b = logical;
		e = logical + ll;
		if (b == e || *b == '#' || *b == ';')
			continue;
		if (*b == '[' && e[-1] == ']') {
			const char *sb = b + 1, *se = e - 1, *colon;

			trim(&sb, &se);
			colon = memchr(sb, ':', (size_t)(se - sb));
			if (colon && colon - sb == 3 && !strncasecmp(sb, "env", 3)) {
				snprintf(err, errlen,
					 "%s: line %d: [%.*s] is not a section: set a variable as "
					 "%.*s = VALUE under [env]",
					 file, first, (int)(se - sb), sb, (int)(se - colon - 1),
					 colon + 1);
				goto out;
			}
			if (colon) {
				snprintf(
				    err, errlen,
				    "%s: line %d: [%.*s] is not a valid section name (no ':' in "
				    "section names); sections are: %s",
				    file, first, (int)(se - sb), sb, config_sections());
				goto out;
			}
			if (se - sb > CONFIG_MAX_NAME) {
				snprintf(err, errlen,
					 "%s: line %d: section name longer than %d characters",
					 file, first, CONFIG_MAX_NAME);
				goto out;
			}
			lower_copy(section, sb, (size_t)(se - sb));
			continue;
		}
		eq = memchr(b, '=', (size_t)(e - b));
		if (!eq || eq == b)
			continue; /* iniparser's syntax error */
		{
			const char *kb = b, *ke = eq, *vb = eq + 1, *ve = e;
			char key[CONFIG_MAX_NAME + 1];

			trim(&kb, &ke);
			trim(&vb, &ve);
			if (ke - kb > CONFIG_MAX_NAME) {
				snprintf(err, errlen,
					 "%s: line %d: key '%.20s...' is longer than %d characters",
					 file, first, kb, CONFIG_MAX_NAME);
				goto out;
			}
			lower_copy(key, kb, (size_t)(ke - kb));
			if (vb < ve && (*vb == '"' || *vb == '\'')) {
				const char *close = memchr(vb + 1, *vb, (size_t)(ve - vb - 1)),
					   *after;

				if (!close) {
					snprintf(err, errlen,
						 "%s: line %d: [%s] %s: the value opens a quote "
						 "(%c) that is "
						 "never closed: close it or remove it",
						 file, first, section, key, *vb);
					goto out;
				}
				after = close + 1;
				while (after < ve && isspace((unsigned char)*after))
					after++;
				if (after < ve && *after != ';' && *after != '#') {
					snprintf(
					    err, errlen,
					    "%s: line %d: [%s] %s: text after the closing quote: "
					    "quote the whole value",
					    file, first, section, key);
					goto out;
				}
			} else {
				size_t quotes = 0;

				for (const char *q = vb; q < ve && *q != ';' && *q != '#'; q++)
					quotes += *q == '"';
				if (quotes % 2) {
					snprintf(err, errlen,
						 "%s: line %d: [%s] %s: unbalanced quote (\") in "
						 "the value: "
						 "close it or remove it",
						 file, first, section, key);
					goto out;
				}
			}
			for (size_t i = 0; i < n_seen; i++) {
				if (!strcmp(seen[i].section, section) &&
				    !strcmp(seen[i].key, key)) {
					snprintf(
					    err, errlen,
					    "%s: [%s] %s is set twice (lines %d and %d): keep one",
					    file, section, key, seen[i].line, first);
					goto out;
				}
			}
			if (n_seen == CONFIG_MAX_KEYS) {
				snprintf(err, errlen,
					 "%s: line %d: more than %d keys: is this the right file?",
					 file, first, CONFIG_MAX_KEYS);
				goto out;
			}
			strcpy(seen[n_seen].section, section);
			strcpy(seen[n_seen].key, key);
			seen[n_seen++].line = first;
		}
	}
	rc = 0;
out:
	free(seen);
	free(logical);
	return rc;
}

/* iniparser reads the bytes checked above, not the file again (which may
 * have changed): a memfd, opened by its /proc/self/fd name. */
static dictionary *parse_checked(const char *file, const char *buf, size_t len)
{
	char name[64];
	dictionary *d;
	int fd = memfd_create("tts-launch.ini", MFD_CLOEXEC);

	if (fd < 0) {
		snprintf(ini_error, sizeof(ini_error), "cannot create a memfd: %s",
			 strerror(errno));
		return NULL;
	}
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, buf + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(ini_error, sizeof(ini_error), "cannot write a memfd: %s",
				 strerror(errno));
			close(fd);
			return NULL;
		}
		off += (size_t)w;
	}
	snprintf(name, sizeof(name), "/proc/self/fd/%d", fd);
	d = iniparser_load(name);
	close(fd);
	/* its messages name the file the user gave */
	{
		char out[sizeof(ini_error)];
		size_t o = 0, nlen = strlen(name);

		for (const char *q = ini_error; *q && o < sizeof(out) - 1;) {
			if (!strncmp(q, name, nlen)) {
				o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", file);
				if (o > sizeof(out) - 1)
					o = sizeof(out) - 1;
				q += nlen;
			} else {
				out[o++] = *q++;
			}
		}
		out[o] = '\0';
		memcpy(ini_error, out, o + 1);
	}
	return d;
}

dictionary *config_file_parse(const char *file, const char *buf, size_t len, char *err,
			      size_t errlen)
{
	/* a UTF-8 byte order mark (Windows editors) is not part of the first line */
	size_t skip = len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3) ? 3 : 0;
	dictionary *d;

	if (check_text(file, buf, len, err, errlen) < 0 ||
	    prescan(file, buf + skip, err, errlen) < 0)
		return NULL;
	ini_error[0] = '\0';
	iniparser_set_error_callback(ini_errback);
	d = parse_checked(file, buf + skip, len - skip);
	if (!d || ini_error[0]) {
		char *nl;

		while ((nl = strchr(ini_error, '\n')))
			*nl = ' ';
		snprintf(err, errlen, "%s: not a valid INI file: %s", file,
			 ini_error[0] ? ini_error : "parse failed");
		if (d)
			iniparser_freedict(d);
		return NULL;
	}
	return d;
}
