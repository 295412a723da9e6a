/* atomicfile: a file written whole, then renamed over its name, so a
 * reader sees the old file or the new one (timeline, pidfile, report -o);
 * the directory is opened with safefile.h's rules. */
#ifndef TTS_ATOMICFILE_H
#define TTS_ATOMICFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* The temp file is ".NAME.XXXXXX" in the same directory, created
 * O_EXCL|O_NOFOLLOW with mode 0600, given its mode and owner by
 * fchmod/fchown before the rename. An existing target that is a character
 * device or FIFO (-o /dev/null) is written in place instead; a directory,
 * a link that is not root's, or another special file is refused. */
struct atomic_file {
	int fd;	   /* write here (also the target itself when in_place) */
	int dirfd; /* the directory */
	char *tmp; /* temp name in dirfd; NULL when in_place */
	char *base;
	char *path; /* as given, for messages */
	bool in_place;
	bool no_sync; /* atomic_commit renames without the fsyncs (atomic_write_volatile) */
};
#define ATOMIC_FILE_INIT                                                                           \
	{                                                                                          \
		.fd = -1, .dirfd = -1                                                              \
	}

int atomic_begin(struct atomic_file *a, const char *path, char *err, size_t errlen);
/* fchmod(mode), fchown(uid, gid) unless uid == (uid_t)-1, fsync, renameat,
 * fsync of the directory (neither fsync with no_sync). Closes everything;
 * on failure removes the temp file and says why. */
int atomic_commit(struct atomic_file *a, mode_t mode, uid_t uid, gid_t gid, char *err,
		  size_t errlen);
/* A stdio stream over a dup of a->fd, with a 64 KiB buffer (fclose it,
 * checking for errors, before atomic_commit); NULL on failure. */
FILE *atomic_stream(struct atomic_file *a);
/* Remove the temp file and close (safe on ATOMIC_FILE_INIT, a failed
 * atomic_begin or a finished struct). */
void atomic_abort(struct atomic_file *a);

/* Write a whole buffer to path atomically (begin + write + commit). */
int atomic_write(const char *path, const void *buf, size_t len, mode_t mode, uid_t uid, gid_t gid,
		 char *err, size_t errlen);
/* The same without the fsyncs, for a file that means nothing after a
 * reboot (the pidfile): its readers need the rename's atomicity only, and
 * where /run is on a disk the two fsyncs took 1-4 ms before the exec. */
int atomic_write_volatile(const char *path, const void *buf, size_t len, mode_t mode, uid_t uid,
			  gid_t gid, char *err, size_t errlen);

#endif
