/* hostprobe: kernel and filesystem facts, read from /sys, /proc and the
 * system calls that report them; see hostprobe.h. */
#include "hostprobe.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "hfcache.h"
#include "util.h"

#define TRACEFS_MAGIC_ 0x74726163

static int first_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

int hostprobe_btf(void) { return access(HOSTPROBE_BTF, R_OK) ? errno : 0; }

int hostprobe_kernel_id(char *buf, size_t len)
{
	struct utsname u;
	struct stat st;

	if (uname(&u) || stat(HOSTPROBE_BTF, &st))
		return -1;
	snprintf(buf, len, "%s|%s|%lld", u.release, u.version, (long long)st.st_size);
	return 0;
}

int hostprobe_lockdown_line(char *buf, size_t len)
{
	return first_line("/sys/kernel/security/lockdown", buf, len);
}

const char *hostprobe_lockdown(char *buf, size_t len)
{
	char *l, *r;

	if (hostprobe_lockdown_line(buf, len))
		return NULL;
	l = strchr(buf, '[');
	r = l ? strchr(l, ']') : NULL;
	if (!r)
		return NULL;
	*r = 0;
	return strcmp(l + 1, "none") ? l + 1 : NULL;
}

bool hostprobe_tracefs(void)
{
	struct statfs sf;

	return statfs(HOSTPROBE_TRACEFS, &sf) == 0 && sf.f_type == TRACEFS_MAGIC_;
}

/* The raw tracepoints need no tracefs, but the probes bound to the tree
 * (libc's sites, getaddrinfo, Python's import probes: tracer_libcio.c)
 * are tracefs uprobe definitions, and perf and bpftrace want it: mount it
 * when it is missing,
 * as a fresh boot leaves it. Never fatal. */
void hostprobe_tracefs_ensure(char *out, size_t len)
{
	if (hostprobe_tracefs()) {
		snprintf(out, len, "present");
		return;
	}
	if (mount("tracefs", HOSTPROBE_TRACEFS, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL) == 0) {
		snprintf(out, len, "mounted");
		return;
	}
	snprintf(out, len, "unavailable: mounting tracefs on " HOSTPROBE_TRACEFS " failed: %s",
		 strerror(errno));
}

bool hostprobe_has_cap(int cap)
{
	cap_t caps = cap_get_proc();
	cap_flag_value_t f = CAP_CLEAR;

	if (caps) {
		cap_get_flag(caps, (cap_value_t)cap, CAP_EFFECTIVE, &f);
		cap_free(caps);
	}
	return f == CAP_SET;
}

int hostprobe_unpriv_bpf(char *buf, size_t len)
{
	return first_line("/proc/sys/kernel/unprivileged_bpf_disabled", buf, len);
}

int hostprobe_memlock(struct rlimit *r) { return getrlimit(RLIMIT_MEMLOCK, r); }

int hostprobe_nofile(bool raise, struct rlimit *r)
{
	struct rlimit up;

	if (getrlimit(RLIMIT_NOFILE, r)) {
		r->rlim_cur = r->rlim_max = RLIM_INFINITY;
		return 0;
	}
	if (r->rlim_cur == RLIM_INFINITY || r->rlim_cur >= HOSTPROBE_TRACE_FDS)
		return 0;
	if (r->rlim_max != RLIM_INFINITY && r->rlim_max < HOSTPROBE_TRACE_FDS)
		return -1;
	if (!raise)
		return 0;
	up.rlim_max = r->rlim_max;
	up.rlim_cur = r->rlim_max == RLIM_INFINITY || r->rlim_max > HOSTPROBE_NOFILE_RAISE
			  ? HOSTPROBE_NOFILE_RAISE
			  : r->rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &up))
		return -1;
	r->rlim_cur = up.rlim_cur;
	return 0;
}

void hostprobe_nofile_why(const struct rlimit *r, char *buf, size_t len)
{
	snprintf(buf, len,
		 "ulimit -n is %llu, hard limit %llu: tracing holds about %d descriptors (BPF "
		 "maps, programs, probes); raise the limit (ulimit -n 1024, or LimitNOFILE=1024 "
		 "in a systemd unit)",
		 (unsigned long long)r->rlim_cur, (unsigned long long)r->rlim_max,
		 HOSTPROBE_TRACE_FDS);
}

/* statfs(2) f_type values (linux/magic.h) and whether what is written
 * there survives a reboot or the container */
static const struct {
	unsigned long magic;
	const char *name;
	const char *lost; /* NULL: persistent */
} fs_types[] = {
    {0x01021994, "tmpfs", "memory: emptied at every reboot"},
    {0x858458f6, "ramfs", "memory: emptied at every reboot"},
    {0x794c7630, "overlay", "a container's writable layer: gone when the container is removed"},
    {0x61756673, "aufs", "a container's writable layer: gone when the container is removed"},
    {0xef53, "ext4", NULL},
    {0x58465342, "xfs", NULL},
    {0x9123683e, "btrfs", NULL},
    {0x2fc12fc1, "zfs", NULL},
    {0x6969, "nfs", NULL},
    {0xff534d42, "cifs", NULL},
    {0xfe534d42, "smb2", NULL},
    {0x65735546, "fuse", NULL},
    {0x01021997, "9p", NULL},
    {0x6a656a63, "virtiofs", NULL},
    {0x73717368, "squashfs", NULL},
    {0x00c36400, "ceph", NULL},
    {0x4d44, "vfat", NULL},
    {0x5346544e, "ntfs", NULL},
    {0xf2f52010, "f2fs", NULL},
};

int hostprobe_fs(const char *dir, struct hostprobe_fs *out)
{
	char *at = out->statfs_path;
	struct statfs sf;
	struct statvfs sv;

	memset(out, 0, sizeof(*out));
	snprintf(at, sizeof(out->statfs_path), "%s", dir);
	out->exists = access(at, F_OK) == 0;
	/* a directory not created yet will be created on its nearest parent */
	while (access(at, F_OK) && strcmp(at, "/")) {
		char *sl = strrchr(at, '/');

		if (sl == at)
			sl[1] = 0;
		else if (sl)
			*sl = 0;
		else
			break;
	}
	if (statfs(at, &sf) < 0 || statvfs(at, &sv) < 0)
		return -1;
	out->magic = (unsigned long)sf.f_type;
	for (size_t k = 0; k < sizeof(fs_types) / sizeof(fs_types[0]); k++)
		if (out->magic == fs_types[k].magic) {
			out->type = fs_types[k].name;
			out->lost = fs_types[k].lost;
		}
	out->read_only = (sv.f_flag & ST_RDONLY) != 0;
	return 0;
}

json_t *hostprobe_host_json(void)
{
	struct utsname u;
	json_t *caps = json_array();
	cap_t cp = cap_get_proc();

	for (cap_value_t v = 0; cp && v <= CAP_LAST_CAP; v++) {
		cap_flag_value_t on = CAP_CLEAR;
		char *name;

		if (cap_get_flag(cp, v, CAP_EFFECTIVE, &on) || on != CAP_SET)
			continue;
		name = cap_to_name(v);
		if (name)
			json_array_append_new(caps, json_string(name));
		cap_free(name);
	}
	if (cp)
		cap_free(cp);
	if (uname(&u))
		memset(&u, 0, sizeof(u));
	return json_pack("{s:s, s:s, s:b, s:i, s:o}", "kernel", u.release, "machine", u.machine,
			 "btf", hostprobe_btf() == 0, "uid", (int)geteuid(), "capabilities", caps);
}

/* The *.incomplete files among paths under dirs[i] (and under no cache
 * before it) that are on disk now, with their size. */
static json_t *incomplete_on_disk(const struct hf_cache_dir *dirs, int i, const char *app_dir,
				  const char *const *paths, size_t n_paths)
{
	json_t *list = json_array();

	for (size_t k = 0; list && k < n_paths; k++) {
		const char *path = paths[k];
		char abs[PATH_MAX];
		struct stat st;
		bool earlier = false;

		if (!path || !strncmp(path, "[fd] ", 5) || !hf_hub_temp(path))
			continue;
		path_resolve(app_dir ? app_dir : "/", path, abs, sizeof(abs));
		for (int j = 0; j < i; j++)
			earlier |= path_under(abs, dirs[j].path);
		if (earlier || !path_under(abs, dirs[i].path) || lstat(abs, &st) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		json_array_append_new(list, json_pack("{s:o, s:I}", "path", json_text(abs), "size",
						      (json_int_t)st.st_size));
	}
	return list;
}

json_t *hostprobe_cache_fs(const struct hf_cache_dir *dirs, int n, const char *app_dir,
			   const char *const *paths, size_t n_paths)
{
	json_t *list = json_array();

	for (int i = 0; list && i < n; i++) {
		struct hostprobe_fs fs; /* a cache not made yet: its nearest parent */
		char magic[32];

		if (hostprobe_fs(dirs[i].path, &fs) < 0)
			continue;
		snprintf(magic, sizeof(magic), "0x%lx", fs.magic);
		json_array_append_new(
		    list,
		    json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:b, s:b, s:s?, s:o}", "dir",
			      dirs[i].path, "role", dirs[i].role, "exists", fs.exists,
			      "statfs_path", fs.statfs_path, "fs_type", fs.type ? fs.type : magic,
			      "fs_magic", magic, "read_only", fs.read_only, "persistent",
			      fs.lost == NULL, "lost", fs.lost, "incomplete",
			      incomplete_on_disk(dirs, i, app_dir, paths, n_paths)));
	}
	return list;
}

bool hostprobe_hub_blob(const struct hf_cache_dir *dirs, int n, const char *etag, char *out,
			size_t len)
{
	if (len)
		out[0] = 0;
	for (int i = 0; i < n && len && !*out; i++) {
		DIR *dir = opendir(dirs[i].path);
		struct dirent *e;

		while (dir && !*out && (e = readdir(dir))) {
			char p[PATH_MAX];
			struct stat st;

			if (strncmp(e->d_name, HF_REPO_PREFIX, strlen(HF_REPO_PREFIX)))
				continue;
			snprintf(p, sizeof(p), "%.*s/%.255s/blobs/%s", PATH_MAX - 400, dirs[i].path,
				 e->d_name, etag);
			if (!stat(p, &st) && S_ISREG(st.st_mode))
				snprintf(out, len, "%s", p);
		}
		if (dir)
			closedir(dir);
	}
	return len && *out;
}
