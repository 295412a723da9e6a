/* timeline_files_int.h: what timeline_files.c (files, paths, locks) and
 * timeline_downloads.c (downloads, copies, Xet's caches) share while they
 * build the file sections; nothing outside them includes it. */
#ifndef TTS_TIMELINE_FILES_INT_H
#define TTS_TIMELINE_FILES_INT_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>

#include "collector.h"
#include "trace.h"

struct io_ent {
	struct file_key k;
	struct file_val v;
	bool claimed;  /* reads, maps, faults (and writes unless wclaimed) given to a path */
	bool wclaimed; /* writes given to a download (*.incomplete) path */
};

/* One path of the paths map, made absolute; relative and absolute spellings
 * of one file are merged. */
struct pent {
	char *path; /* malloc'd: thousands of entries, most paths short */
	struct path_val pv;
	__u64 base_dev, base_ino; /* a relative path's directory */
	bool rel;
	const char *cls;
	struct io_ent *ie;  /* the inode it opened, if its I/O was seen */
	struct file_val fv; /* the I/O given to this path */
};

struct wr_ent {
	struct wr_key k;
	struct wr_val v;
};

/* What the download and copy entries need besides the paths */
struct dl_ctx {
	struct wr_ent *wr; /* wranges, sorted by inode */
	size_t n_wr;
	char model_dir[PATH_MAX]; /* absolute, "" when unset */
	const char *app_dir;
};

/* The wranges map read once per snapshot; model_dir/app_dir for names */
void dl_ctx_init(struct dl_ctx *dx, struct collector *t);

/* downloads[] entry for pe[j] (a download temp), given the renames and
 * symlinks as absolute paths (r2, the collector's path2 order) */
json_t *download_json(const struct dl_ctx *dx, const struct pent *pe, size_t n_pe, size_t j,
		      char (*r2)[2][PATH_MAX], const struct collector *t, __u64 first, __u64 last);

/* copies[] (the copies map) */
void snap_copies(const struct dl_ctx *dx, struct collector *t, const struct pent *pe, size_t n_pe,
		 json_t *root);

/* xet: the Xet transfer's own files (of files[], n records), as a whole */
struct tl_file;
void snap_xet(struct collector *t, const struct tl_file *files, size_t n, json_t *root);

#endif
