#include "doctor.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "hfcache.h"
#include "hostprobe.h"
#include "interp.h"
#include "peers.h"
#include "procfs.h"
#include "progcache.h"
#include "tracer.h"
#include "util.h"

static int fails;

static void line(const char *status, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void line(const char *status, const char *what, const char *fmt, ...)
{
	va_list ap;

	if (!strcmp(status, "FAIL"))
		fails++;
	printf("%-4s  %-22s ", status, what);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void check_kernel(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	uname(&u);
	sscanf(u.release, "%d.%d", &major, &minor);
	if (major > 5 || (major == 5 && minor >= 8))
		line("OK", "kernel", "%s (ring buffer, pidfd: yes)", u.release);
	else
		line("FAIL", "kernel",
		     "%s is older than 5.8 (no BPF ring buffer): upgrade the kernel", u.release);
}

static void check_btf(void)
{
	if (hostprobe_btf() == 0)
		line("OK", "BTF", "/sys/kernel/btf/vmlinux present");
	else
		line("FAIL", "BTF",
		     "/sys/kernel/btf/vmlinux missing: use a kernel built with "
		     "CONFIG_DEBUG_INFO_BTF=y; the service would start untraced");
}

static void check_tracefs(void)
{
	/* The tracer attaches raw tracepoints (the bpf/ domain files), which need no
	 * tracefs; libbpf's legacy uprobe attach does, and tts-launch mounts it
	 * when it starts tracing (hostprobe_tracefs_ensure). */
	if (hostprobe_tracefs())
		line("OK", "tracefs", "mounted at /sys/kernel/tracing");
	else
		line("OK", "tracefs",
		     "not mounted: tts-launch mounts it when it starts tracing "
		     "(needs CAP_SYS_ADMIN; by hand: mount -t tracefs tracefs "
		     "/sys/kernel/tracing)");
}

static void check_caps(void)
{
	bool bpf = hostprobe_has_cap(CAP_BPF) || hostprobe_has_cap(CAP_SYS_ADMIN);
	bool perf = hostprobe_has_cap(CAP_PERFMON) || hostprobe_has_cap(CAP_SYS_ADMIN);

	if (bpf && perf)
		line("OK", "BPF capabilities", "CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) held");
	else
		line("FAIL", "BPF capabilities",
		     "missing %s%s: run tts-launch as root (the service "
		     "can still run as [service] user)",
		     bpf ? "" : "CAP_BPF ", perf ? "" : "CAP_PERFMON");
}

static void check_unpriv(void)
{
	char v[32];

	if (hostprobe_unpriv_bpf(v, sizeof(v)) < 0)
		line("WARN", "unprivileged BPF",
		     "cannot read /proc/sys/kernel/unprivileged_bpf_disabled");
	else
		line("OK", "unprivileged BPF", "unprivileged_bpf_disabled = %s (%s)", v,
		     strcmp(v, "0") ? "only privileged users can trace, as expected"
				    : "any user may load BPF");
}

static void check_lockdown(void)
{
	char v[128];

	if (hostprobe_lockdown_line(v, sizeof(v)) < 0) {
		line("OK", "lockdown", "no lockdown LSM interface (not locked down)");
		return;
	}
	if (strstr(v, "[confidentiality]"))
		line("FAIL", "lockdown",
		     "%s: kernel memory reads by BPF are refused; boot with "
		     "lockdown=none or integrity",
		     v);
	else
		line("OK", "lockdown", "%s", v);
}

static void check_memlock(void)
{
	struct rlimit r;

	if (hostprobe_memlock(&r)) {
		line("WARN", "RLIMIT_MEMLOCK", "getrlimit: %s", strerror(errno));
		return;
	}
	if (r.rlim_cur == RLIM_INFINITY)
		line("OK", "RLIMIT_MEMLOCK", "unlimited");
	else
		/* Since 5.11 BPF memory is charged to the memory cgroup, not
		 * RLIMIT_MEMLOCK (kernel commit 97306be45fbe). */
		line("OK", "RLIMIT_MEMLOCK",
		     "%llu KiB (hard %llu KiB); BPF maps are charged to the "
		     "memory cgroup on 5.11+, mlock of the service needs "
		     "CAP_IPC_LOCK or root",
		     (unsigned long long)r.rlim_cur / 1024, (unsigned long long)r.rlim_max / 1024);
}

static void check_nofile(void)
{
	struct rlimit r;
	char why[256];

	if (hostprobe_nofile(false, &r)) {
		hostprobe_nofile_why(&r, why, sizeof(why));
		line("FAIL", "RLIMIT_NOFILE", "%s; the service would start untraced", why);
	} else if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < HOSTPROBE_TRACE_FDS)
		line("OK", "RLIMIT_NOFILE",
		     "ulimit -n is %llu, below the ~%d descriptors tracing holds: run raises its "
		     "own within the hard limit (%llu), the service keeps this one",
		     (unsigned long long)r.rlim_cur, HOSTPROBE_TRACE_FDS,
		     (unsigned long long)r.rlim_max);
	else
		line("OK", "RLIMIT_NOFILE", "ulimit -n allows the ~%d descriptors tracing holds",
		     HOSTPROBE_TRACE_FDS);
}

static void check_bpf_load(void)
{
	char why[512];

	/* the object tts-launch traces with, opened and loaded (every program
	 * the kernel offers the hooks for), then freed: nothing is attached */
	if (tracer_test_load(why, sizeof(why)) == 0)
		line("OK", "BPF program load", "%s", why);
	else
		line("FAIL", "BPF program load", "%s; the service would start untraced", why);
}

/* [trace] keep_loaded: what earlier runs left loaded for the next one */
static void check_kept(const struct config *c)
{
	struct progcache_info v[8];
	char why[300], list[600] = "";
	int n = progcache_list(v, 8, why, sizeof(why));
	unsigned long long mem = 0;
	size_t at = 0;

	if (n < 0) {
		/* none mounted: a run mounts it (progcache_init) */
		line(errno == ENODEV && c->keep_loaded ? "OK" : "WARN", "kept programs", "%s", why);
		return;
	}
	for (int i = 0; i < n && i < 8; i++) {
		int w =
		    snprintf(list + at, sizeof(list) - at,
			     "%s%s (%s, idle %.0fs, %d programs, %d maps, %.1f MiB)", i ? "; " : "",
			     v[i].key, v[i].clean ? "clean" : "in use or being reset", v[i].idle_s,
			     v[i].programs, v[i].maps, (double)v[i].memlock / (1 << 20));

		if (w > 0 && (size_t)w < sizeof(list) - at)
			at += (size_t)w;
		mem += v[i].memlock;
	}
	if (!c->keep_loaded)
		line("OK", "kept programs",
		     "off ([trace] keep_loaded = false); %d entr%s left in " PROGCACHE_ROOT
		     " (the next run removes them)%s%s",
		     n, n == 1 ? "y" : "ies", n ? ": " : "", list);
	else if (!n)
		line("OK", "kept programs",
		     "none yet: the first run verifies its programs and keeps them "
		     "in " PROGCACHE_ROOT " for the next (at most %d sets)",
		     PROGCACHE_KEEP);
	else
		line("OK", "kept programs",
		     "%d entr%s in " PROGCACHE_ROOT
		     ", %.1f MiB of kernel memory in all (at most %d "
		     "settings kept; [trace] keep_loaded = false frees them): %s",
		     n, n == 1 ? "y" : "ies", (double)mem / (1 << 20), PROGCACHE_KEEP, list);
}

static bool in_path(const char *prog, char *found, size_t len)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save = NULL;
	bool ok = false;

	if (strchr(prog, '/')) {
		snprintf(found, len, "%s", prog);
		return access(prog, X_OK) == 0;
	}
	copy = strdup(path ? path : "/usr/bin:/bin");
	for (dir = strtok_r(copy, ":", &save); dir && !ok; dir = strtok_r(NULL, ":", &save)) {
		snprintf(found, len, "%s/%s", dir, prog);
		ok = access(found, X_OK) == 0;
	}
	free(copy);
	return ok;
}

/* The same resolution and messages as `run`'s check (config_app.c): what
 * doctor passes, `run` starts; what it fails, `run` refuses with exit 2. */
static void check_app(const struct config *c)
{
	char found[4096], err[CONFIG_ERR_MAX];

	if (c->n_command) {
		if (in_path(c->command[0], found, sizeof(found)))
			line("OK", "command", "%s", found);
		else
			line("FAIL", "command", "%s not found or not executable", c->command[0]);
		return;
	}
	if (config_app_interpreter(c, found, sizeof(found), err, sizeof(err)) < 0)
		line("FAIL", "interpreter", "%s", err);
	else if (interp_is_runner(found))
		line("OK", "interpreter",
		     "%s (a runner: it starts the app's " CONFIG_VENV_PYTHON
		     " as its child, which tts-launch follows)",
		     found);
	else if (c->python_venv)
		line("OK", "interpreter",
		     "%s (the app's " CONFIG_VENV_PYTHON ": [app] python unset)", found);
	else
		line("OK", "interpreter", "%s", found);
	if (config_app_script(c, found, sizeof(found), err, sizeof(err)) < 0)
		line("FAIL", "script", "%s", err);
	else
		line("OK", "script", "%s", found);
}

static void check_port(const struct config *c)
{
	pid_t pids[4];
	int n;

	if (c->port <= 0) {
		line("OK", "port", "none configured (ready = first TCP listen)");
		return;
	}
	n = proc_port_listeners(c->port, pids, 4);
	if (n > 0) {
		char *cmd = proc_cmdline(pids[0]);

		line("WARN", "port",
		     "%d is held by pid %d (%s): a stale instance is ended by `run`, "
		     "anything else makes it exit 3",
		     c->port, pids[0], cmd ? cmd : "?");
		free(cmd);
	} else {
		line("OK", "port", "%d is free", c->port);
	}
}

/* The log file ([log] file: run refuses to start without it, exit 2) and
 * the timeline ([trace] timeline: lost, with a warning, when it cannot be
 * written): the file writable, or its directory there and writable. */
static void check_writable(const struct config *c, const char *what, const char *key,
			   const char *rel, const char *bad)
{
	char *path = config_path(c, rel), *slash;
	char dir[4096];

	if (!*path) {
		line("OK", what, "none (%s is empty)", key);
		free(path);
		return;
	}
	if (access(path, F_OK) == 0) {
		if (access(path, W_OK) == 0)
			line("OK", what, "%s is writable", path);
		else
			line(bad, what, "%s: %s: fix its owner or mount, or change %s", path,
			     strerror(errno), key);
		free(path);
		return;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	if (access(dir, W_OK) == 0)
		line("OK", what, "%s can be created", path);
	else
		line(bad, what,
		     "%s cannot be created: %s: %s: create the directory, fix its owner "
		     "or mount, or change %s",
		     path, dir, strerror(errno), key);
	free(path);
}

/* ---- downloads: the settings the clients read, the caches' disks ---- */

/* One directory's file system: WARN when writes there do not last */
static void check_dir_fs(const char *what, const char *dir)
{
	struct hostprobe_fs fs;
	struct statvfs sv;
	char free_s[32] = "?";

	if (hostprobe_fs(dir, &fs) < 0) {
		line("WARN", what, "%s: %s", dir, strerror(errno));
		return;
	}
	if (statvfs(fs.statfs_path, &sv) == 0)
		fmt_bytes(free_s, sizeof(free_s), (double)sv.f_bavail * sv.f_frsize);
	if (fs.lost)
		line("WARN", what,
		     "%s is on %s (%s): put it on a disk, or every start downloads again", dir,
		     fs.type ? fs.type : "?", fs.lost);
	else if (fs.read_only)
		line("WARN", what, "%s is on a read-only file system (%s)", dir,
		     fs.type ? fs.type : "?");
	else
		line("OK", what, "%s (%s, %s free)%s", dir, fs.type ? fs.type : "?", free_s,
		     fs.exists ? "" : ", not made yet");
}

static void check_downloads(const struct config *c)
{
	struct hf_cache_dir d[HF_MAX_CACHE_DIRS];
	const char *app = c->app_dir ? c->app_dir : "/";
	const char *xet_off = config_service_env(c, "HF_HUB_DISABLE_XET"),
		   *ms = config_service_env(c, "USE_MODELSCOPE");
	char md[PATH_MAX] = "", xet[PATH_MAX], need_s[32], free_s[32];
	long long need = 0;
	struct hostprobe_fs fs;
	struct statvfs sv;
	int n;

	line("INFO", "HF_HUB_DISABLE_XET", "%s",
	     xet_off && *xet_off ? xet_off
				 : "unset: Xet-backed repos (IndexTTS2's) download through Xet, "
				   "which has no read timeout");
	line("INFO", "USE_MODELSCOPE", "%s",
	     ms && *ms ? ms
		       : "unset: every start probes huggingface.co and modelscope.cn (3 s "
			 "timeout each) to choose");
	n = hf_cache_dirs(app, c->model_dir, config_service_env, c, false, d, HF_MAX_CACHE_DIRS);
	for (int i = 0; i < n; i++) {
		char what[40];

		snprintf(what, sizeof(what), "cache %s", d[i].role);
		check_dir_fs(what, d[i].path);
	}
	hf_xet_dir(app, config_service_env, c, xet, sizeof(xet));
	if (!xet_off || !*xet_off || !strcmp(xet_off, "0"))
		check_dir_fs("xet chunk-cache", xet);
	/* the known model files the 2026 layout still lacks, against the
	 * space where they go (Xet writes each byte again into its cache) */
	if (!c->model_dir || !*c->model_dir)
		return;
	path_resolve(app, c->model_dir, md, sizeof(md));
	for (const struct hf_known_file *k = hf_known_files; k->suffix; k++) {
		char p[PATH_MAX];

		snprintf(p, sizeof(p), "%.*s/%s", PATH_MAX - 200, md, k->flat);
		if (access(p, F_OK) != 0)
			need += k->bytes;
	}
	if (!need) {
		line("OK", "model files", "every known IndexTTS2 model file is in %s", md);
		return;
	}
	fmt_bytes(need_s, sizeof(need_s), (double)need);
	if (hostprobe_fs(md, &fs) < 0 || statvfs(fs.statfs_path, &sv) < 0) {
		line("WARN", "free space", "%s: %s", md, strerror(errno));
		return;
	}
	fmt_bytes(free_s, sizeof(free_s), (double)sv.f_bavail * sv.f_frsize);
	if ((double)sv.f_bavail * sv.f_frsize < (double)need)
		line("WARN", "free space",
		     "%s has %s free, the model files still missing need about %s: free space "
		     "or point [app] model_dir at a larger disk",
		     md, free_s, need_s);
	else
		line("OK", "free space", "%s has %s free; the missing model files need about %s",
		     md, free_s, need_s);
}

int doctor_run(const struct config *c)
{
	fails = 0;
	printf("tts-launch doctor (config: %s)\n", c->source);
	check_kernel();
	check_btf();
	check_tracefs();
	check_caps();
	check_unpriv();
	check_lockdown();
	check_memlock();
	check_nofile();
	check_bpf_load();
	check_kept(c);
	check_app(c);
	check_port(c);
	check_writable(c, "log file", "[log] file", c->log_file, "FAIL");
	check_writable(c, "timeline", "[trace] timeline", c->timeline, "WARN");
	/* names only warn: an offline machine with every model cached is fine */
	peers_doctor_resolve(stdout, config_service_env(c, "HF_ENDPOINT"), 2000);
	check_downloads(c);
	printf("%s\n", fails ? "some checks failed: see the fixes above" : "all checks passed");
	return fails ? 1 : 0;
}
