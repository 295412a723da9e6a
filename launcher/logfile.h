/* logfile: the service's output, with size-based rotation
 * (FILE -> FILE.1 -> ... -> FILE.N, the oldest dropped). The file is opened
 * and rotated through its directory's descriptor with safefile.h's rules:
 * no link followed that root does not own, a regular file with one link
 * and an allowed owner, else no log (docs/security.md). */
#ifndef TTS_LOGFILE_H
#define TTS_LOGFILE_H

#include <stddef.h>

#include "safefile.h"

struct logfile {
	char *path; /* NULL: no file */
	char *base; /* its name in dirfd */
	int dirfd;
	int fd; /* -1: closed, after a refused reopen */
	long long size;
	long long max_size; /* 0: never rotate */
	int backups;
	struct safe_owners owners;
	unsigned long long lost; /* bytes of output that could not be written */
	char error[512];	 /* the first reason output was lost, "" */
	/* tests only: called between a rotation's renames and the reopen */
	void (*after_rename)(void *arg);
	void *hook_arg;
};

/* Open (create) path for appending; o: who may own it (NULL: anyone). */
int logfile_open(struct logfile *l, const char *path, const struct safe_owners *o,
		 long long max_size, int backups, char *err, size_t errlen);
/* Append, rotating first when the file would pass max_size. -1 when some
 * of buf could not be written (counted in lost, reason in error). */
int logfile_write(struct logfile *l, const char *buf, size_t len);
void logfile_close(struct logfile *l);

/* The last bytes of the service's output, kept while it runs so that a
 * failed start can quote its last lines (process.output_tail, the exit
 * finding): a fixed ring, whatever the service prints. */
#define LOG_TAIL_BYTES 8192
struct log_tail {
	char buf[LOG_TAIL_BYTES];
	size_t start, len; /* the kept bytes: buf[start..] then buf[..] */
};
void log_tail_push(struct log_tail *t, const char *data, size_t n);
/* Its last max_lines non-empty lines (the last one may be unfinished), each
 * cut to max_len bytes at a character boundary, oldest first: a malloc'd
 * array of malloc'd strings ended by NULL (free with log_tail_free); NULL
 * when nothing was kept or out of memory. */
char **log_tail_lines(const struct log_tail *t, int max_lines, size_t max_len);
void log_tail_free(char **lines);

#endif
