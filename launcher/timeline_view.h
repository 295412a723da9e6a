/* timeline_view: typed views of the model's sections, decoded once from
 * the tree (systemd's analyze-time-data.h idea). Renderers and compare read
 * these, never JSON keys; they are compiled without jansson.
 *
 * One rule for a missing field: a number that is absent, null or not a
 * number reads as TL_NONE (NaN; tl_has() tells, tl_or0() gives 0), a string
 * as NULL, a flag as false, a list as empty. Strings are borrowed from the
 * model: valid while the timeline lives.
 *
 * The view owns the fallbacks between names, so no reader repeats them
 * (and the writer could drop its aliases): a phase's dur_ms is end - start
 * when absent; a request's latency_ms and dur_ms are the same figure (the
 * one present, else end - start), and so are faults and page_faults. */
#ifndef TTS_TIMELINE_VIEW_H
#define TTS_TIMELINE_VIEW_H

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "timeline.h"

#define TL_NONE NAN

static inline bool tl_has(double v) { return !isnan(v); }

static inline double tl_or0(double v) { return isnan(v) ? 0 : v; }
/* A small integer field (a port, a family) of a timeline that may say
 * anything: -1 when missing or outside [0, max] (no cast out of range) */
static inline int tl_small(double v, int max) { return v >= 0 && v <= max ? (int)v : -1; }

/* A pid or tid as an int: 0 when absent, or outside 1..INT_MAX (a hostile
 * timeline's 1.9e18: converting that to int is undefined) */
static inline int tl_id(double v) { return v >= 1 && v <= INT_MAX ? (int)v : 0; }

struct tl_mark {
	const char *name;
	double ms;
};

struct tl_phase {
	const char *name;
	double start_ms, end_ms, dur_ms; /* dur_ms: else end - start */
	const char *source;		 /* "launcher", "trace" */
};

/* files[], missing_paths[] and python.imports[] are the model's own
 * records (timeline_sections.h), not decoded copies: a view points into
 * them. kind_ and raw_ are private to timeline_sections.c (each key's JSON
 * type; the entry as loaded when its fields cannot write it back). */
#define TL_FILE_KEYS	22
#define TL_MISSING_KEYS 7
#define TL_IMPORT_KEYS	8

struct tl_file {
	const char *path, *class, *errno_name;
	double opens, bytes_read, bytes_written, mmap_bytes, faults;
	double first_ms, last_ms;
	double size, mmaps; /* its size when known, the mappings made of it */
	double reads, writes, failed_opens, write_errors;
	const char *write_errno; /* the first failed write's errno name */
	double major_faults;
	double pid;			      /* the first opener (TL_NONE: an inherited fd) */
	double faults_after_ready;	      /* of faults, those after ready */
	double first_fault_ms, last_fault_ms; /* TL_NONE: none */
	unsigned char kind_[TL_FILE_KEYS];
	const void *raw_;
};

struct tl_missing {
	const char *path, *errno_name;
	double attempts, first_ms, last_ms;
	const char *class; /* the path's file class */
	double pid;
	unsigned char kind_[TL_MISSING_KEYS];
	const void *raw_;
};

struct tl_download {
	const char *path;  /* the temp file written (*.incomplete, NAME.tmp...) */
	const char *name;  /* the file it becomes (ORG/NAME:FILE, or relative to
			    * model_dir); NULL in a timeline older than names */
	const char *label; /* what outputs call it: name, else the base name of
			    * path (phases_download_label); never NULL */
	double bytes, first_ms, last_ms, rate_mb_s;
	bool completed;
	bool complete;			      /* renamed to its final name while traced */
	bool completed_known, complete_known; /* those two are flags (else false) */
	const char *final_path, *link;	      /* where it ended, the snapshot link to it */
	const char *writer;		      /* hub_cache, local_dir, modelscope, mirror, ... */
	double expected_size;		      /* the size it will have, when known */
	const char *expected_from;	      /* where that size came from ("known": a table) */
	double bytes_written;		      /* all writes (bytes: the distinct ones) */
	double size, dur_ms, rename_ms, percent, threads, resumed_from;
	const char *kind;
	const char *also_in; /* the same blob in another cache, or NULL */
};

/* copies[]: sendfile/copy_file_range copies (copy2, a migrated cache) */
struct tl_copy {
	const char *path, *source;
	const char *name, *label; /* as a download's: label is never NULL */
	double bytes, size, first_ms, last_ms;
	bool from_cache; /* from a hub cache (models--ORG--NAME) */
};

struct tl_peer {
	const char *peer, *errno_name;
	double connects, failures, bytes_in, bytes_out, connect_ms;
	const char *host; /* the name the service used for it (NULL: none seen) */
	char label[300];  /* "host:port" when host is known, else peer ("" for none) */
	const char *role; /* hub, cas, modelscope, mirror, dns, client, other; NULL: older */
	double port;
	bool inbound; /* a client of the service, not a peer it contacted */
	double first_ms, last_ms;
	bool dns; /* a name server */
};

/* connects[]: each connect(2) the tree made */
struct tl_connect {
	const char *peer;
	double port, pid, start_ms;
	bool pending; /* EINPROGRESS: its outcome is another record */
	/* established TCP connections (TL_NONE otherwise): what moved on it */
	const char *host; /* the peer's name, as network[].host */
	double established_ms, closed_ms, bytes_in, bytes_out, writes, reply_max;
	bool tls; /* the first write was a TLS ClientHello */
	/* its outcome: ret (0, -errno, -EINPROGRESS), result ("connected",
	 * "closed-by-caller", ...), how long it took; family 1 is AF_UNIX */
	double ret, family, ms_to_result, dur_ms;
	const char *result;
};

/* renames[]: rename(2) calls (a download's temp file becoming its blob) */
struct tl_rename {
	const char *old, *new;
	double result; /* 0: done */
};

/* symlinks[]: symlink(2) calls (a snapshot's link to its blob) */
struct tl_symlink {
	const char *path, *resolved; /* the link, the absolute path it names */
	double result;		     /* 0: made */
};

/* locks[]: the cache's lock files */
struct tl_lock {
	const char *path;
	bool waiting; /* a blocking lock call still waiting */
	double waiting_ms;
	double calls, blocking_calls, failures, wait_ms, max_wait_ms;
	double contended_ms, acquired_ms, first_ms, last_ms;
	bool acquired_null;	    /* acquired_ms is null: not acquired (absent: false) */
	double holder_pid;	    /* who held it when it was contended */
	const char *holder_command; /* ... and its command, NULL: unknown */
	const char *errno_name;
};

/* failed_ops[]: mkdir, rename, unlink, ... calls that failed */
struct tl_failed_op {
	const char *op, *path, *old, *errno_name;
	double count, first_ms, last_ms, pid;
};

/* cache_fs[].incomplete[]: a temp file on disk when the timeline was written */
struct tl_on_disk {
	const char *path;
	double size; /* TL_NONE: null */
};

/* cache_fs[]: what the pipeline recorded of each cache's file system */
struct tl_cache_fs {
	const char *dir, *role, *statfs_path, *fs_type, *fs_magic;
	const char *lost;		   /* how it is lost (tmpfs: at reboot); NULL: persistent */
	int exists, read_only, persistent; /* 1, 0; -1: not a flag */
	const struct tl_on_disk *incomplete;
	size_t n_incomplete;
	bool has_incomplete; /* incomplete is a list (it was looked at) */
};

struct tl_request {
	double start_ms, end_ms, dur_ms, latency_ms, close_ms;
	double faults, page_faults, major_faults, model_faults, model_major_faults;
	double bytes_out, bytes_in, writes, pid, tid, port;
	const char *method, *path; /* hand-made timelines only */
};

/* process.exit, processes[].exit: code or signal (TL_NONE: null) */
struct tl_exit {
	bool has; /* an object (null or absent: false) */
	double code, signal, ms;
	const char *code_of; /* whose code it is: "service", "exec", "signal" */
	const char *error;   /* what the launcher said went wrong, or NULL */
	bool stop_requested; /* tts-launch asked the service to stop */
};

/* processes[]: each traced process */
struct tl_proc {
	double pid, ppid;
	const char *command;
	const char *const *argv; /* NULL for a word that is not a string */
	size_t n_argv;
	bool has_argv; /* argv is a list */
	double fork_ms, exec_ms, exit_ms;
	struct tl_exit exit;
};

/* python.imports[] */
struct tl_import {
	const char *name;
	double pid, start_ms, end_ms;
	int found; /* 1, 0, or -1 when not a flag */
	double dur_ms, depth;
	int derived; /* 1: derived from module files (-1: absent) */
	unsigned char kind_[TL_IMPORT_KEYS];
	const void *raw_;
};

/* sched.processes[] */
struct tl_sched_proc {
	double pid, io_wait_ms, sleep_ms, runqueue_ms;
};

struct tl_mlock_call {
	const char *call, *errno_name;
	bool ok;     /* result is the integer 0 */
	bool failed; /* result is a negative integer */
	double pid, len, flags, result, start_ms, dur_ms;
};

/* memory.fault_rate: page faults per bucket_ms from time 0 */
struct tl_series {
	double bucket_ms;
	const double *counts;
	size_t n;
};

struct tl_memory {
	double page_faults, major_faults, model_file_faults;
	struct tl_series fault_rate;
	const struct tl_mlock_call *mlock_calls;
	size_t n_mlock_calls;
	bool has_mlock_calls;	  /* mlock_calls is a list (a traced run) */
	bool has_mlock;		  /* memory.mlock: the shim's outcome is there */
	const char *mlock_mode;	  /* its mode */
	const char *mlock_status; /* the shim's word (docs/mlock.md), NULL without one */
	const char *mlock_trigger, *mlock_fix;
	double mlock_bytes_locked, mlock_dur_ms, mlock_start_ms;
};

/* xet: Xet's chunk cache, as recorded when the timeline was written */
struct tl_xet {
	bool present; /* an object */
	const char *dir, *write_errno, *fs_type, *lost;
	double bytes_written, write_errors, files;
	int persistent; /* 1, 0; -1: not a flag */
};

/* attribution.strip[]: the critical thread's runs of one kind */
struct tl_strip_seg {
	double start_ms, end_ms;
	const char *kind; /* "sleep", "lock", "cpu", ... */
};

/* attribution: what the rules need of it (render and compare decode the
 * whole section with attr_view_decode, attrib_build.h) */
struct tl_attr {
	double window_ms;
	const struct tl_strip_seg *strip;
	size_t n_strip;
	bool has_strip; /* strip is a list */
	bool strip_cut;
};

struct tl_sched {
	double io_wait_ms, sleep_ms, runqueue_ms;
	const struct tl_sched_proc *processes;
	size_t n_processes;
};

struct tl_process {
	const char *const *command; /* its words; NULL for one that is not a string */
	size_t n_command;
	double pid;
	struct tl_exit exit;
	const char *const *output_tail; /* its last lines (NULL: not a string) */
	size_t n_output_tail;
};

/* launcher.config.env.vars: the [env] the run recorded */
struct tl_env {
	const char *name, *value; /* value NULL: not a string */
};

struct tl_tracing {
	bool enabled;
	const char *reason; /* why not, when not */
	double events_lost;
};

struct tl_finding {
	const char *id, *severity, *title, *message, *fix;
	const char *rule; /* hand-made timelines: the rule's name instead of id */
};

/* gpu (issue 18, docs/gpu.md): the figures readers need, summed over the
 * processes; present false for a timeline without the section. */
struct tl_gpu {
	bool present, tried;
	int usable;			  /* 1, 0; -1: null (CUDA never tried) */
	const char *reason_code, *reason; /* cpu_reason; NULL: none */
	size_t n_libraries;
	const char *library; /* the first library mapped, else the first probed */
	double calls_total, init_ms, memory_peak_bytes, memory_at_ready_bytes; /* TL_NONE: none */
	double h2d_bytes, h2d_ms;
	const char *error, *error_call; /* the first failed call's error name and call */
	double error_ret;		/* its code, TL_NONE: none failed */
	size_t n_device_nodes;
	const char *cuda_visible_devices;
	bool torch_imported;
	const char *torch_lib;
	int torch_cuda_build; /* 1, 0; -1: unknown */
	/* low_vram: IndexTTS2's VRAM threshold decision; device: the GPU */
	bool low_vram_below, low_vram_qwen_opened;
	double low_vram_total_bytes, low_vram_threshold_bytes;
	const char *device_name;
};

/* Every section a reader needs, decoded from one timeline. */
struct tl_view {
	const char *schema;	     /* the version string it was written with */
	const struct tl_mark *marks; /* numeric marks, in the model's order */
	size_t n_marks;
	const struct tl_phase *phases;
	size_t n_phases;
	const struct tl_file *files;
	size_t n_files;
	const struct tl_missing *missing;
	size_t n_missing;
	const struct tl_download *downloads;
	size_t n_downloads;
	const struct tl_copy *copies;
	size_t n_copies;
	const struct tl_peer *network;
	size_t n_network;
	const struct tl_connect *connects;
	size_t n_connects;
	const struct tl_lock *locks;
	size_t n_locks;
	const struct tl_request *requests;
	size_t n_requests;
	bool has_requests; /* requests is a list (maybe empty) */
	const struct tl_finding *findings;
	size_t n_findings;
	struct tl_memory memory;
	struct tl_sched sched;
	struct tl_tracing tracing;
	struct tl_process process;
	const struct tl_proc *procs; /* processes[] */
	size_t n_procs;
	const struct tl_import *imports; /* python.imports[] */
	size_t n_imports;
	struct tl_gpu gpu;
	const char *config_mlock_mode; /* launcher.config.mlock.mode */
	const char *config_app_dir;    /* launcher.config.app.dir */
	double config_app_port;	       /* launcher.config.app.port */
	bool config_command_null;      /* launcher.config.command is null: the app */
	const struct tl_env *env;      /* launcher.config.env.vars */
	size_t n_env;
	const struct tl_rename *renames;
	size_t n_renames;
	const struct tl_symlink *symlinks;
	size_t n_symlinks;
	const char *config_model_dir; /* launcher.config.app.model_dir */
	const struct tl_failed_op *failed_ops;
	size_t n_failed_ops;
	const struct tl_cache_fs *cache_fs;
	size_t n_cache_fs;
	struct tl_xet xet;
	struct tl_attr attribution;
	const size_t *peer_order; /* private: network[] sorted by peer (tl_view_peer) */
	struct tl_sections *own_; /* private: the records of a raw tree, decoded for this view */
};

/* The views of tl; NULL when out of memory. Free with tl_view_free. */
struct tl_view *tl_view_decode(const struct timeline *tl);
void tl_view_free(struct tl_view *v);

/* The named download whose temp file is path, or with blobs also the one
 * whose final file is path when that is a hub cache blob (a download with a
 * snapshot link); NULL for none (and in a timeline older than names). One
 * scan of downloads[]. */
const struct tl_download *tl_view_download_at(const struct tl_view *v, const char *path,
					      bool blobs);

/* ms of the mark called name, or TL_NONE. */
double tl_view_mark(const struct tl_view *v, const char *name);

/* The network[] entry of peer, the last when several; NULL for none.
 * O(log n): rules look a peer up for each connect. */
const struct tl_peer *tl_view_peer(const struct tl_view *v, const char *peer);

/* The recorded file system of the cache holding abs (the deepest dir
 * containing it), or NULL. */
const struct tl_cache_fs *tl_view_cache_fs_of(const struct tl_view *v, const char *abs);

/* The run's [env] NAME as recorded in launcher.config, or NULL. */
const char *tl_view_env(const struct tl_view *v, const char *name);

/* The trace saw path (a download's temp file) renamed: downloaded. */
bool tl_view_renamed(const struct tl_view *v, const char *path);

/* Downloads in flight: absolute temp files of a download (class
 * "download", or an older timeline's *.incomplete) opened and not renamed
 * yet; how many, and in *last the one opened last (NULL when none). */
int tl_view_downloads_in_flight(const struct tl_view *v, const struct tl_file **last);

#endif
