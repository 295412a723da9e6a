/* logfile: the service's output, with size-based rotation
 * (FILE -> FILE.1 -> ... -> FILE.N, the oldest dropped). */
#ifndef TTS_LOGFILE_H
#define TTS_LOGFILE_H

#include <stddef.h>

struct logfile {
	char *path; /* NULL: no file */
	int fd;
	long long size;
	long long max_size; /* 0: never rotate */
	int backups;
};

int logfile_open(struct logfile *l, const char *path, long long max_size, int backups, char *err,
		 size_t errlen);
/* Append, rotating first when the file would pass max_size. */
int logfile_write(struct logfile *l, const char *buf, size_t len);
void logfile_close(struct logfile *l);

#endif
