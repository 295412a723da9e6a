/* hub_blobs: the mlock shim's look-up of a Hugging Face hub cache blob's
 * names (hooks/mlock_shim.c includes it once: each .c in hooks/ is a library
 * of its own, so the shim stays one translation unit; docs/mlock.md, mode
 * models). Static functions and buffers, no malloc. */
#ifndef TTS_HUB_BLOBS_H
#define TTS_HUB_BLOBS_H

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Hugging Face's hub cache keeps a file's content once, as REPO/blobs/HASH
 * (no extension), and names it in each snapshot by a relative symlink,
 * REPO/snapshots/COMMIT/[SUB/]NAME -> ../../[../]blobs/HASH. The service
 * opens the snapshot name; the kernel maps the blob, so smaps shows
 * REPO/blobs/HASH. Such a mapping is concerned when a link in REPO/snapshots/
 * that points at it has a name the patterns match (its file name, or its
 * whole path for a pattern with a '/'). No malloc (the shim's locker thread
 * must not get a malloc arena): getdents64 into the stack, static path
 * buffers; one caller at a time (the shim's S.lock). */

#define SNAP_DEPTH 8 /* COMMIT/ and up to 7 levels of subfolders below it */

static char snap_path[4096], snap_target[4096];

/* The blobs seen in this pass: their verdicts, by device and inode as smaps
 * gives them (a blob mapped in many pieces is looked up once). */
static struct blob_seen {
	unsigned maj, min;
	unsigned long ino;
	bool match;
} blobs_seen[64];
static size_t n_blobs_seen, next_blob_seen;

/* target (a link's contents) names blobs/hash: its last two components. */
static bool points_at(const char *target, const char *hash)
{
	size_t t = strlen(target), h = strlen(hash);

	if (t < h + 6 || strcmp(target + t - h, hash))
		return false;
	t -= h;
	if (target[t - 1] != '/' || strncmp(target + t - 6, "blobs/", 6))
		return false;
	return t == 6 || target[t - 7] == '/';
}

/* Walk the directory dfd, snap_path[0..len) its path, for a link to
 * blobs/hash whose name matches; depth: levels below snapshots/. */
static bool snap_walk(int dfd, size_t len, const char *hash, int depth,
		      bool (*matches)(const char *))
{
	char buf[2048] __attribute__((aligned(8)));
	bool hit = false;
	ssize_t n;

	while (!hit && (n = getdents64(dfd, buf, sizeof(buf))) > 0) {
		for (ssize_t o = 0; !hit && o < n;) {
			struct dirent64 *d = (struct dirent64 *)(buf + o);
			const char *name = d->d_name;
			size_t nl = strlen(name);
			unsigned char type = d->d_type;

			o += d->d_reclen;
			if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
				continue;
			if (len + 1 + nl >= sizeof(snap_path))
				continue;
			snap_path[len] = '/';
			memcpy(snap_path + len + 1, name, nl + 1);
			if (type == DT_UNKNOWN) { /* file systems without d_type */
				struct stat st;

				if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
					continue;
				type = S_ISLNK(st.st_mode)   ? DT_LNK
				       : S_ISDIR(st.st_mode) ? DT_DIR
							     : DT_REG;
			}
			if (type == DT_LNK) {
				ssize_t k =
				    readlinkat(dfd, name, snap_target, sizeof(snap_target) - 1);

				if (k > 0) {
					snap_target[k] = '\0';
					hit = points_at(snap_target, hash) && matches(snap_path);
				}
			} else if (type == DT_DIR && depth < SNAP_DEPTH) {
				int sub = openat(dfd, name,
						 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

				if (sub >= 0) {
					hit =
					    snap_walk(sub, len + 1 + nl, hash, depth + 1, matches);
					close(sub);
				}
			}
		}
	}
	snap_path[len] = '\0';
	return hit;
}

/* path is REPO/blobs/HASH and a snapshot names it so that matches() says
 * yes; maj:min and ino: the mapped file's, from smaps. */
static bool blob_matches(const char *path, unsigned maj, unsigned min, unsigned long ino,
			 bool (*matches)(const char *))
{
	const char *hash = strrchr(path, '/') + 1;
	size_t repo = (size_t)(hash - path) - 1, len;
	bool match = false;
	int dfd;

	if (repo < 7 || strncmp(path + repo - 6, "/blobs", 6) || !*hash)
		return false;
	repo -= 6;
	for (size_t i = 0; i < n_blobs_seen; i++)
		if (blobs_seen[i].ino == ino && blobs_seen[i].maj == maj &&
		    blobs_seen[i].min == min)
			return blobs_seen[i].match;
	len = (size_t)snprintf(snap_path, sizeof(snap_path), "%.*s/snapshots", (int)repo, path);
	if (len < sizeof(snap_path) &&
	    (dfd = open(snap_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		match = snap_walk(dfd, len, hash, 0, matches);
		close(dfd);
	}
	blobs_seen[next_blob_seen] = (struct blob_seen){maj, min, ino, match};
	next_blob_seen = (next_blob_seen + 1) % (sizeof(blobs_seen) / sizeof(blobs_seen[0]));
	if (n_blobs_seen < sizeof(blobs_seen) / sizeof(blobs_seen[0]))
		n_blobs_seen++;
	return match;
}

/* A new pass: forget the verdicts (snapshots may have changed since). */
static void blobs_forget(void) { n_blobs_seen = next_blob_seen = 0; }

#endif
