/* safefile: the one way tts-launch opens and creates the files it writes
 * (log, pidfile, lock; atomicfile.h replaces whole files through it). tts-launch runs as root
 * in directories other users may write (docs/security.md): no symbolic link
 * is followed unless root owns it, in any component of the path; an existing
 * file is written only when it is a regular file with one link, owned by an
 * allowed owner; new files get O_EXCL names and their mode and owner through
 * the open descriptor, never by path. */
#ifndef TTS_SAFEFILE_H
#define TTS_SAFEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Who may own an existing file that root writes into: root, the service
 * user, the owner of [app] dir. n == 0: any owner (a non-root run). */
struct safe_owners {
	uid_t uid[4];
	int n;
};

/* owners for this run: root, the service user (if any: -1 for none) and the
 * app directory's owner (if app_dir is not NULL and exists). When the
 * caller is not root, n = 0: the kernel's own checks are the only ones. */
void safe_owners_init(struct safe_owners *o, uid_t service_uid, const char *app_dir);

/* Open the directory that holds path (the path minus its last component),
 * resolving every component without following a link that root does not
 * own (openat2 RESOLVE_NO_SYMLINKS where the walk meets no link, else
 * component by component). Returns an O_DIRECTORY descriptor (O_RDONLY, so
 * it can be fsync'd) and sets *base to the last component inside path
 * (not a copy). -1 with a message naming the path and the reason. */
int safe_dir_open(const char *path, const char **base, char *err, size_t errlen);

/* The same with a relative path resolved from the directory at. */
int safe_dir_openat(int at, const char *path, const char **base, char *err, size_t errlen);

/* Is name in dirfd a symbolic link that root owns? Then its text is in
 * target; *owner is the link's owner ((uid_t)-1: not a link). */
bool safe_root_link(int dirfd, const char *name, char *target, size_t len, uid_t *owner);

/* Open path for appending, creating it (mode, before umask) when missing:
 * O_NOFOLLOW on the last component, then fstat: a regular file with one
 * link and an owner in o, else -1 with the reason ("is a symbolic link",
 * "has 2 hard links", "is owned by uid 1002, not root, the service user or
 * the app directory's owner"). Also returns the directory descriptor in
 * *dirfd when dirfd is not NULL (for renameat-based rotation). */
int safe_open_append(const char *path, const struct safe_owners *o, mode_t mode, int *dirfd,
		     char *err, size_t errlen);

/* The same relative to an open directory (rotation reopens through it). */
int safe_openat_append(int dirfd, const char *name, const char *shown, const struct safe_owners *o,
		       mode_t mode, char *err, size_t errlen);

#endif
