/* hostprobe: the one module that asks the running kernel what it offers for
 * tracing (BTF, lockdown, tracefs, capabilities, unprivileged BPF,
 * RLIMIT_MEMLOCK, the kernel's identity for the minimal BTF) and a
 * filesystem's type and space, and what is on disk in the caches. Used by
 * doctor, the tracer and the pipeline, which stores its answers in the
 * model (host, tracing.tracefs, cache_fs), so readers of a saved timeline
 * never probe the machine they run on. */
#ifndef TTS_HOSTPROBE_H
#define TTS_HOSTPROBE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>

#define HOSTPROBE_BTF	  "/sys/kernel/btf/vmlinux"
#define HOSTPROBE_TRACEFS "/sys/kernel/tracing"

/* 0 when the kernel's BTF is readable, else the errno of access(2). */
int hostprobe_btf(void);
/* "release|version|BTF size": what the Makefile's minimal BTF records of the
 * kernel it was generated on. 0, or -1 when uname or the BTF is missing. */
int hostprobe_kernel_id(char *buf, size_t len);
/* The lockdown LSM's line ("none [integrity] confidentiality"); -1 when the
 * kernel has no lockdown interface. */
int hostprobe_lockdown_line(char *buf, size_t len);
/* The active lockdown mode when it is not "none", else NULL (in buf). */
const char *hostprobe_lockdown(char *buf, size_t len);
/* tracefs mounted on HOSTPROBE_TRACEFS. */
bool hostprobe_tracefs(void);
/* tracefs present, else mounted there: "present", "mounted", or
 * "unavailable: why" in out. The one probe that changes the host (as a
 * fresh boot leaves tracefs unmounted). */
void hostprobe_tracefs_ensure(char *out, size_t len);
/* The effective set holds capability cap (CAP_*). */
bool hostprobe_has_cap(int cap);
/* /proc/sys/kernel/unprivileged_bpf_disabled, or -1 when unreadable. */
int hostprobe_unpriv_bpf(char *buf, size_t len);
/* RLIMIT_MEMLOCK; 0, or -1. */
int hostprobe_memlock(struct rlimit *r);
/* Descriptors a traced run holds at once (BPF maps, programs, links, perf
 * events: ~320 for a Python service in `cheap`, more with CUDA libraries),
 * with room for the launcher's own (log, pidfile, timeline, /proc); and the
 * soft limit tracing raises itself to when below that (within the hard). */
#define HOSTPROBE_TRACE_FDS    512
#define HOSTPROBE_NOFILE_RAISE 4096
/* RLIMIT_NOFILE: 0 when HOSTPROBE_TRACE_FDS fit under the soft limit, or
 * under the hard one (raise: the soft limit is raised to
 * HOSTPROBE_NOFILE_RAISE within it, for this process only: a child forked
 * before keeps its own); -1 with the limits in *r when they cannot. An
 * unreadable limit is 0: not a reason to give up. */
int hostprobe_nofile(bool raise, struct rlimit *r);
/* Why the limits r (hostprobe_nofile's -1) cannot hold tracing, with the
 * fix: the one wording of run's warning and doctor's line. */
void hostprobe_nofile_why(const struct rlimit *r, char *buf, size_t len);

/* The filesystem a directory is (or, not created yet, will be) on: what
 * the model's cache_fs records (statfs + statvfs of the nearest existing
 * ancestor). */
struct hostprobe_fs {
	char statfs_path[4096]; /* the directory, or its nearest existing ancestor */
	bool exists;		/* the directory itself exists */
	unsigned long magic;	/* statfs f_type */
	const char *type;	/* "ext4", "tmpfs"...; NULL when unknown */
	const char *lost;	/* why writes there do not last; NULL: persistent */
	bool read_only;
};
/* 0, or -1 with errno. */
int hostprobe_fs(const char *dir, struct hostprobe_fs *out);

/* The model's "cache_fs" section: for each of the n caches (hfcache.h's
 * struct hf_cache_dir), hostprobe_fs of its directory, and the *.incomplete
 * files among the traced paths (absolute, as the view's files[] resolved
 * against app_dir) that are on disk under it now, with their size; a path
 * under an earlier cache counts there only. What the rules read back
 * instead of probing whatever machine runs diagnose later. NULL when out of
 * memory. */
struct hf_cache_dir;
json_t *hostprobe_cache_fs(const struct hf_cache_dir *dirs, int n, const char *app_dir,
			   const char *const *paths, size_t n_paths);

/* A hub cache blob with this etag on disk now: the first regular file
 * DIR/models--ORG--NAME/blobs/ETAG among the n caches, into out. false
 * (out "") when none has it. */
bool hostprobe_hub_blob(const struct hf_cache_dir *dirs, int n, const char *etag, char *out,
			size_t len);

/* The model's "host" section: kernel, machine, btf, uid, capabilities. */
json_t *hostprobe_host_json(void);

#endif
