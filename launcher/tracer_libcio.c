/* tracer_libcio: libc's read/write family for [trace] syscalls = cheap
 * (tracer_libcio.h; the programs are bpf/libcio.bpf.c).
 *
 * Each function gets an entry and a return uprobe defined in tracefs
 * (uprobe_events, group ttsio_PID, events e_NAME_PID and r_NAME_PID: PID is
 * this launcher's) and opened as a
 * tracepoint perf event with pid = the root child, cpu = -1 and inherit:
 * the kernel installs the breakpoints only in the memory of the tasks such
 * an event follows (the uprobe's perf filter), the root and, inherited at
 * clone, its threads and children, across exec. Measured on 6.18: the
 * uprobe PMU (perf_event_open of /sys/bus/event_source/devices/uprobe)
 * cannot be inherited with a BPF program: a child's copy is a new probe
 * without the program, and a child that forks after an exec fails to fork
 * (the copy re-reads the path from a user address of the forking process);
 * a tracefs event's copies share the program. A child forked after an
 * earlier sibling of it exited may still get no breakpoint (seen on 6.18):
 * its figures then come from close, as without these probes (sx_close).
 *
 * The perf events of a uprobe wait for a grace period when their last
 * reference goes: their links are the tracer's uprobe links (add), whose
 * last references the keeper holds (ukeeper.c). The tracefs definitions
 * outlive them (inert: no perf event, no breakpoint) and are removed by the
 * next run (stale_groups). */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "elfsym.h"
#include "tracer_libcio.h"

#define TRACEFS	     "/sys/kernel/tracing"
#define GROUP_PREFIX "ttsio_"

/* libc's functions and the syscall each does (what sx_io dispatches on);
 * aliases (preadv64, pwrite, __write) share these addresses */
static const struct {
	const char *name;
	unsigned int nr;
} fns[] = {
    {"read", SYS_read},		{"write", SYS_write},	  {"pread64", SYS_pread64},
    {"pwrite64", SYS_pwrite64}, {"readv", SYS_readv},	  {"writev", SYS_writev},
    {"preadv", SYS_preadv},	{"pwritev", SYS_pwritev}, {"preadv2", SYS_preadv2},
    {"pwritev2", SYS_pwritev2},
};
#define N_FNS (sizeof(fns) / sizeof(fns[0]))

const char tracer_libcio_missed_why[] =
    "a process of the tree not reached by the libc probes (a static binary, or a child the "
    "kernel's inherited uprobe events missed): its read/write figures from close";

bool tracer_libcio_libc(char *path, size_t len)
{
	Dl_info di;
	char real[PATH_MAX];

	if (!dladdr((void *)write, &di) || !di.dli_fname || !realpath(di.dli_fname, real) ||
	    strlen(real) >= len)
		return false;
	strcpy(path, real);
	return true;
}

uint64_t tracer_libcio_errno_got(const char *libc)
{
	char why[256];
	struct elfsym *e = elfsym_open(libc, why, sizeof(why));
	struct elfsym_sym s;
	unsigned char code[16];
	uint64_t got = 0;
	size_t at = 0;

	if (!e)
		return 0;
	if (elfsym_machine(e) == 62 /* EM_X86_64 */ && elfsym_find(e, "__errno_location", &s) &&
	    s.offset &&
	    pread(elfsym_fd(e), code, sizeof(code), (off_t)s.offset) == (ssize_t)sizeof(code)) {
		int32_t disp;

		if (!memcmp(code, "\xf3\x0f\x1e\xfa", 4)) /* endbr64 */
			at = 4;
		/* mov disp32(%rip),%rax; then add %fs:0,%rax */
		if (!memcmp(code + at, "\x48\x8b\x05", 3) &&
		    !memcmp(code + at + 7, "\x64\x48\x03\x04\x25", 5)) {
			memcpy(&disp, code + at + 3, sizeof(disp));
			got = s.value + at + 7 + (int64_t)disp;
		}
	}
	elfsym_close(e);
	return got;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC), err = 0;
	ssize_t n = (ssize_t)strlen(s);

	if (fd < 0)
		return errno;
	if (write(fd, s, (size_t)n) != n)
		err = errno ? errno : EIO;
	close(fd);
	return err;
}

/* The events of group, removed (a group left by a run that died; EBUSY
 * while a keeper of it still holds them) */
static void remove_group(const char *group)
{
	char dir[PATH_MAX], cmd[600];
	struct dirent *d;
	DIR *dp;

	snprintf(dir, sizeof(dir), TRACEFS "/events/%s", group);
	dp = opendir(dir);
	if (!dp)
		return;
	while ((d = readdir(dp)))
		if (d->d_name[0] != '.' && strcmp(d->d_name, "enable") &&
		    strcmp(d->d_name, "filter")) {
			snprintf(cmd, sizeof(cmd), "-:%s/%s\n", group, d->d_name);
			write_str(TRACEFS "/uprobe_events", cmd);
		}
	closedir(dp);
}

/* ttsio_PID groups whose launcher is gone */
static void stale_groups(void)
{
	DIR *dp = opendir(TRACEFS "/events");
	struct dirent *d;

	if (!dp)
		return;
	while ((d = readdir(dp))) {
		char *end;
		long pid;

		if (strncmp(d->d_name, GROUP_PREFIX, strlen(GROUP_PREFIX)))
			continue;
		pid = strtol(d->d_name + strlen(GROUP_PREFIX), &end, 10);
		if (*end || pid <= 0 || (kill((pid_t)pid, 0) && errno == ESRCH) || pid == getpid())
			remove_group(d->d_name);
	}
	closedir(dp);
}

/* One tracefs uprobe (ret: a uretprobe) at libc:off, its perf event for
 * pid's tree: the fd, or -errno */
static int probe_event(const char *group, const char *name, bool ret, const char *libc,
		       uint64_t off, pid_t pid)
{
	char cmd[PATH_MAX + 128], path[PATH_MAX], idbuf[32];
	struct perf_event_attr a;
	int fd, err, n;

	snprintf(cmd, sizeof(cmd), "%c:%s/%s %s:0x%llx\n", ret ? 'r' : 'p', group, name, libc,
		 (unsigned long long)off);
	err = write_str(TRACEFS "/uprobe_events", cmd);
	if (err)
		return -err;
	snprintf(path, sizeof(path), TRACEFS "/events/%s/%s/id", group, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = (int)read(fd, idbuf, sizeof(idbuf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	idbuf[n] = 0;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_TRACEPOINT;
	a.config = strtoull(idbuf, NULL, 10);
	a.sample_period = 1;
	a.inherit = 1; /* the root's threads and children, across exec */
	fd = (int)syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static struct bpf_link *attach(struct bpf_program *prog, int pfd, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_perf_event_opts, po, .bpf_cookie = cookie);
	struct bpf_link *l = bpf_program__attach_perf_event_opts(prog, pfd, &po);

	if (!l)
		close(pfd);
	return l;
}

int tracer_libcio_attach(struct bpf_program *enter, struct bpf_program *exit, pid_t pid,
			 const char *libc, tracer_libcio_add add, void *ctx, char *why,
			 size_t whylen)
{
	const char *names[N_FNS];
	struct elfsym_sym syms[N_FNS];
	char group[32];
	struct elfsym *e;
	int done = 0;

	*why = 0;
	e = elfsym_open(libc, why, whylen);
	if (!e)
		return 0;
	for (size_t i = 0; i < N_FNS; i++)
		names[i] = fns[i].name;
	elfsym_lookup(e, names, N_FNS, true, syms);
	elfsym_close(e);
	stale_groups();
	snprintf(group, sizeof(group), GROUP_PREFIX "%d", (int)getpid());
	for (size_t i = 0; i < N_FNS; i++) {
		char en[48], xn[48];
		uint64_t cookie = (syms[i].value << 16) | fns[i].nr;
		struct bpf_link *le, *lx;
		int pe, px;

		if (!syms[i].found || !syms[i].offset) {
			if (!*why)
				snprintf(why, whylen, "%s: no %s", libc, fns[i].name);
			continue;
		}
		/* the pid in the names too: uprobe_profile lists names only */
		snprintf(en, sizeof(en), "e_%s_%d", fns[i].name, (int)getpid());
		snprintf(xn, sizeof(xn), "r_%s_%d", fns[i].name, (int)getpid());
		pe = probe_event(group, en, false, libc, syms[i].offset, pid);
		px = pe < 0 ? pe : probe_event(group, xn, true, libc, syms[i].offset, pid);
		if (pe < 0 || px < 0) {
			if (!*why)
				snprintf(why, whylen, "uprobe on %s: %s", fns[i].name,
					 strerror(-(pe < 0 ? pe : px)));
			if (pe >= 0)
				close(pe);
			continue;
		}
		/* the return first: an entry without its return is never saved */
		lx = attach(exit, px, cookie);
		le = lx ? attach(enter, pe, cookie) : (close(pe), NULL);
		if (!lx || !le) {
			if (!*why)
				snprintf(why, whylen, "BPF on the uprobe of %s: %s", fns[i].name,
					 strerror(errno));
			if (lx)
				add(ctx, lx, exit);
			continue;
		}
		add(ctx, lx, exit);
		add(ctx, le, enter);
		done++;
	}
	return done;
}

bool tracer_libcio_missed(struct bpf_map *est, struct bpf_map *procs)
{
	__u32 tgid, next, walked = 0;
	bool missed = false, more;
	__u64 mm;

	for (more = !bpf_map__get_next_key(est, NULL, &next, sizeof(next));
	     more && walked++ < bpf_map__max_entries(est);
	     more = !bpf_map__get_next_key(est, &tgid, &next, sizeof(next))) {
		tgid = next;
		if (!kill((pid_t)tgid, 0) || errno != ESRCH)
			continue; /* alive: it may still be reached */
		if (bpf_map__lookup_elem(procs, &tgid, sizeof(tgid), &mm, sizeof(mm), 0))
			missed = true;
		else
			bpf_map__delete_elem(est, &tgid, sizeof(tgid), 0);
	}
	return missed;
}

bool tracer_libcio_start(struct bpf_program *enter, struct bpf_program *exit, pid_t pid,
			 tracer_libcio_add add, void *ctx, char *probe, size_t plen, char *why,
			 size_t whylen)
{
	char libc[PATH_MAX], first[PATH_MAX + 64];
	int n;

	*probe = *why = 0;
	if (!tracer_libcio_libc(libc, sizeof(libc))) {
		snprintf(why, whylen, "libc not found: read/write figures approximate");
		return false;
	}
	n = tracer_libcio_attach(enter, exit, pid, libc, add, ctx, first, sizeof(first));
	if (n < (int)N_FNS)
		snprintf(why, whylen,
			 "%d of %d functions of %s probed (%s): read/write figures "
			 "approximate",
			 n, (int)N_FNS, libc, first);
	if (n)
		snprintf(probe, plen, "libc_io:%s", libc);
	return n == (int)N_FNS;
}
