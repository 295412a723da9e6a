/* tracer_libcio: libc's read/write family for [trace] syscalls = cheap
 * (tracer_libcio.h; the programs are bpf/libcio.bpf.c).
 *
 * Each function gets a uprobe on the jump that tests each of its syscalls'
 * result (the kernel's result in rax, the arguments still in their
 * registers: one emulated trap per call, where an entry uprobe and a
 * uretprobe take two), defined in tracefs (uprobe_events, group ttsio, events
 * NAME_DEV_INO_OFFSET: one per file and site, shared by every run, see
 * below) and opened as a
 * tracepoint perf event with pid = the root child, cpu = -1 and inherit:
 * the kernel installs the breakpoints only in the memory of the tasks such
 * an event follows (the uprobe's perf filter), the root and, inherited at
 * clone, its threads and children, across exec. Measured on 6.18: the
 * uprobe PMU (perf_event_open of /sys/bus/event_source/devices/uprobe)
 * cannot be inherited with a BPF program: a child's copy is a new probe
 * without the program, and a child that forks after an exec fails to fork
 * (the copy re-reads the path from a user address of the forking process);
 * a tracefs event's copies share the program.
 *
 * But not with the program attached to the inherited event itself: each
 * copy then holds the program too, and a copy's end (the child's exit)
 * takes it out of the definition's program array, shared by every event
 * of the definition, for the whole tree: after the first child of the
 * tree exited, nothing was counted any more (seen on 6.18: 0 bytes of a
 * 1 MB file the root read after `subprocess.run(["true"])`). That removal
 * also waits for a tasks-trace grace period per event (perf_event_detach_
 * bpf_prog; ~50 ms each, ~1 s per exiting child, in the child's exit). So
 * each site gets two events on the root: the anchor, not inherited, that
 * the program is attached to (the definition's array runs it for every
 * process the definition's filter lets in), and the follower, inherited,
 * without a program: its copies only extend the filter to the tree's
 * children, and a child's exit takes nothing out.
 *
 * The perf events of a uprobe wait for a grace period when their last
 * reference goes: their links (the anchors) are the tracer's uprobe links
 * (add), the followers kept with them, whose last references the keeper
 * holds (ukeeper.c). The last event of a definition takes the uprobe down,
 * under the kernel's event_mutex, which the next run's attach needs: so the
 * definitions are shared by the runs, the keeper holds the followers a while
 * after the links (keeper_close), and the next run of a loop finds them up;
 * the keeper then removes the definitions that no run holds
 * (tracer_libcio_forget: EBUSY for the others). A run's define-and-open
 * tries again when another keeper removed a definition in between. */
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "elfsym.h"
#include "tracer_libcio.h"

#define TRACEFS "/sys/kernel/tracing"
/* every run's definitions (define_site), and those of a run before 2026-12
 * (ttsio_PID, removed by stale_groups) */
#define GROUP	     "ttsio"
#define GROUP_PREFIX "ttsio_"
/* a run's define-and-open of a site, when another keeper removed the
 * definition in between (tracer_libcio_forget) */
#define DEFINE_TRIES 3
/* syscall instructions per function: glibc 2.36 has two (with and without
 * the cancellation point) */
#define MAX_SITES 4

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
    "a process of the tree not reached by the libc probes (a static binary, direct syscalls, "
    "io_uring): its read/write figures from close";

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

/* The events of group, removed (a group left by a run that died; the
 * shared group's definitions that no run holds: EBUSY for the others) */
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

/* The tracepoint id of the shared group's definition name, or -errno
 * (-ENOENT: none of that name yet) */
static long probe_id(const char *name)
{
	char path[PATH_MAX], idbuf[32];
	int fd, n;

	snprintf(path, sizeof(path), TRACEFS "/events/" GROUP "/%s/id", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = (int)read(fd, idbuf, sizeof(idbuf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	idbuf[n] = 0;
	return (long)strtoul(idbuf, NULL, 10);
}

/* One tracefs uprobe (ret: uretprobe) at libc:off, named name in the shared
 * group: its tracepoint id, or -errno. The name says the file and the
 * offset, so a definition of that name is this one: one made by a run
 * before or beside this one is taken as it is (its id read first: a
 * definition written again costs its parse under the kernel's event mutex,
 * ~20-40 us a site, to be told EEXIST). */
static long probe_define(const char *name, const char *libc, uint64_t off, uint64_t ref_ctr,
			 bool ret)
{
	char cmd[PATH_MAX + 160], rc[32] = "";
	long id = probe_id(name);
	int err;

	if (id >= 0)
		return id;
	/* a USDT probe's semaphore: the kernel counts it up in each process
	 * the probe is installed in (CPython tests it before it calls the probe) */
	if (ref_ctr)
		snprintf(rc, sizeof(rc), "(0x%llx)", (unsigned long long)ref_ctr);
	snprintf(cmd, sizeof(cmd), "%c:" GROUP "/%s %s:0x%llx%s\n", ret ? 'r' : 'p', name, libc,
		 (unsigned long long)off, rc);
	err = write_str(TRACEFS "/uprobe_events", cmd);
	if (err && err != EEXIST)
		return -err;
	return probe_id(name);
}

/* A perf event of tracepoint id bound to pid (inherit: and, copied at
 * clone, to its threads and children, across exec): the fd, or -errno */
static int probe_open(long id, pid_t pid, bool inherit)
{
	struct perf_event_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_TRACEPOINT;
	a.config = (__u64)id;
	a.sample_period = 1;
	a.inherit = inherit;
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

/* The syscall sites of function sym (syscall number nr) in libc's code,
 * into at[0..max): for each `syscall` that glibc's wrappers precede with
 * `mov $nr,%eax` (or `xor %eax,%eax` for 0) and follow with `cmp
 * $-4096,%rax; ja`, the file offset of that ja (x86-64 only): a
 * conditional jump the kernel emulates, where a probe on the cmp would be
 * single-stepped (two exceptions a call instead of one). How many. */
static int syscall_sites(int fd, const struct elfsym_sym *sym, unsigned int nr, uint64_t *at,
			 int max)
{
	unsigned char code[1024];
	size_t len = sym->size < sizeof(code) ? (size_t)sym->size : sizeof(code);
	int n = 0;

	if (!sym->offset || pread(fd, code, len, (off_t)sym->offset) != (ssize_t)len)
		return 0;
	for (size_t i = 2; i + 10 <= len && n < max; i++) {
		uint32_t imm;

		if (code[i] != 0x0f || code[i + 1] != 0x05 ||
		    memcmp(code + i + 2, "\x48\x3d\x00\xf0\xff\xff", 6) ||
		    (code[i + 8] != 0x77 && (code[i + 8] != 0x0f || code[i + 9] != 0x87)))
			continue;
		if (i >= 5 && code[i - 5] == 0xb8)
			memcpy(&imm, code + i - 4, sizeof(imm));
		else if (code[i - 2] == 0x31 && code[i - 1] == 0xc0)
			imm = 0;
		else
			continue;
		if (imm == nr)
			at[n++] = sym->offset + i + 8;
	}
	return n;
}

/* prog on a uprobe (ret: a uretprobe) at libc:off bound to the tree of
 * pid: the shared definition NAME_DEV_INO_OFF (prefix name, ret: NAME_r)
 * made or found, the anchor opened and prog attached to it, the follower
 * opened; *follow its fd. The link, or NULL with -errno in *err. */
static struct bpf_link *bind_site(struct bpf_program *prog, pid_t pid, const char *libc,
				  const struct stat *st, const char *fn, uint64_t off,
				  uint64_t ref_ctr, bool ret, uint64_t cookie, int *follow,
				  int *err)
{
	char name[64];
	struct bpf_link *l;
	long id = -EINVAL;
	int pfd = -EINVAL;

	/* one definition per file and site, shared by every run (the file's
	 * device and inode, the site's offset: a definition of this name is
	 * this site's) */
	snprintf(name, sizeof(name), "%s%s_%llx_%llx_%llx", fn, ret ? "_r" : "",
		 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
		 (unsigned long long)off);
	*follow = -1;
	for (int try = 0; try < DEFINE_TRIES; try++) {
		id = probe_define(name, libc, off, ref_ctr, ret);
		pfd = id < 0 ? (int)id : probe_open(id, pid, false);
		if (pfd >= 0 && (*follow = probe_open(id, pid, true)) < 0) {
			close(pfd);
			pfd = *follow;
		}
		/* removed by a keeper between the two: again */
		if (pfd != -ENOENT && pfd != -EINVAL)
			break;
	}
	l = pfd < 0 ? NULL : attach(prog, pfd, cookie);
	if (!l) {
		*err = pfd < 0 ? pfd : -errno;
		if (*follow >= 0)
			close(*follow);
		*follow = -1;
	}
	return l;
}

int tracer_libcio_attach(struct bpf_program *prog, pid_t pid, const char *libc,
			 tracer_libcio_add add, void *ctx, char *why, size_t whylen)
{
	const char *names[N_FNS];
	struct elfsym_sym syms[N_FNS];
	uint64_t sites[N_FNS][MAX_SITES];
	int n_sites[N_FNS] = {0}, done = 0;
	struct stat st;
	struct elfsym *e;

	*why = 0;
	if (stat(libc, &st)) {
		snprintf(why, whylen, "%s: %s", libc, strerror(errno));
		return 0;
	}
	e = elfsym_open(libc, why, whylen);
	if (!e)
		return 0;
	for (size_t i = 0; i < N_FNS; i++)
		names[i] = fns[i].name;
	elfsym_lookup(e, names, N_FNS, true, syms);
	for (size_t i = 0; i < N_FNS; i++)
		if (syms[i].found && elfsym_machine(e) == 62 /* EM_X86_64 */)
			n_sites[i] =
			    syscall_sites(elfsym_fd(e), &syms[i], fns[i].nr, sites[i], MAX_SITES);
	elfsym_close(e);
	stale_groups();
	for (size_t i = 0; i < N_FNS; i++) {
		int ok = 0;

		if (!n_sites[i] && !*why)
			snprintf(why, whylen, "%s: no syscall site recognised in %s", libc,
				 fns[i].name);
		for (int j = 0; j < n_sites[i]; j++) {
			int follow, err;
			struct bpf_link *l =
			    bind_site(prog, pid, libc, &st, fns[i].name, sites[i][j], 0, false,
				      fns[i].nr, &follow, &err);

			if (!l) {
				if (!*why)
					snprintf(why, whylen, "uprobe on %s: %s", fns[i].name,
						 strerror(-err));
				continue;
			}
			add(ctx, l, follow, prog);
			ok++;
		}
		done += n_sites[i] && ok == n_sites[i];
	}
	return done;
}

/* The two probes of a pair (an entry and its return, a USDT pair) bound
 * as bind_site binds one, both or neither: 0 with both added, or -errno
 * with nothing attached. */
static int bind_pair(struct bpf_program *const *progs, pid_t pid, const char *file,
		     const struct stat *st, const char *const *tags, const uint64_t *off,
		     const uint64_t *ref_ctr, const bool *ret, const uint64_t *cookie,
		     tracer_libcio_add add, void *ctx)
{
	struct bpf_link *l[2] = {NULL, NULL};
	int follow[2] = {-1, -1}, err = 0;

	stale_groups();
	for (int i = 0; i < 2; i++) {
		l[i] = bind_site(progs[i], pid, file, st, tags[i], off[i], ref_ctr[i], ret[i],
				 cookie[i], &follow[i], &err);
		if (!l[i]) {
			while (i-- > 0) {
				bpf_link__destroy(l[i]);
				close(follow[i]);
			}
			return err;
		}
	}
	for (int i = 0; i < 2; i++)
		add(ctx, l[i], follow[i], progs[i]);
	return 0;
}

int tracer_libcio_bind(struct bpf_program *enter, struct bpf_program *exit, pid_t pid,
		       const char *libc, const char *fn, tracer_libcio_add add, void *ctx,
		       char *why, size_t whylen)
{
	struct bpf_program *progs[2] = {enter, exit};
	const char *tags[2] = {fn, fn};
	const bool ret[2] = {false, true};
	const uint64_t none[2] = {0, 0};
	struct elfsym_sym sym = {0};
	uint64_t off[2];
	struct stat st;
	struct elfsym *e;
	int err;

	if (stat(libc, &st)) {
		snprintf(why, whylen, "%s: %s", libc, strerror(errno));
		return -1;
	}
	e = elfsym_open(libc, why, whylen);
	if (!e)
		return -1;
	if (!elfsym_find(e, fn, &sym) || !sym.func || !sym.offset) {
		snprintf(why, whylen, "%s: no function %s", libc, fn);
		elfsym_close(e);
		return -1;
	}
	elfsym_close(e);
	off[0] = off[1] = sym.offset;
	if ((err = bind_pair(progs, pid, libc, &st, tags, off, none, ret, none, add, ctx))) {
		snprintf(why, whylen, "uprobe on %s in %s: %s", fn, libc, strerror(-err));
		return -1;
	}
	return 0;
}

int tracer_libcio_bind_at(struct bpf_program *const *progs, pid_t pid, const char *file,
			  const char *const *tags, const uint64_t *off, const uint64_t *ref_ctr,
			  const uint64_t *cookie, tracer_libcio_add add, void *ctx, char *why,
			  size_t whylen)
{
	const bool ret[2] = {false, false};
	struct stat st;
	int err;

	if (stat(file, &st)) {
		snprintf(why, whylen, "%s: %s", file, strerror(errno));
		return -1;
	}
	if ((err = bind_pair(progs, pid, file, &st, tags, off, ref_ctr, ret, cookie, add, ctx))) {
		snprintf(why, whylen, "uprobes at 0x%llx and 0x%llx in %s: %s",
			 (unsigned long long)off[0], (unsigned long long)off[1], file,
			 strerror(-err));
		return -1;
	}
	return 0;
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

bool tracer_libcio_start(struct bpf_program *prog, pid_t pid, tracer_libcio_add add, void *ctx,
			 char *probe, size_t plen, char *why, size_t whylen)
{
	char libc[PATH_MAX], first[PATH_MAX + 64];
	int n;

	*probe = *why = 0;
	if (!tracer_libcio_libc(libc, sizeof(libc))) {
		snprintf(why, whylen, "libc not found: read/write figures approximate");
		return false;
	}
	n = tracer_libcio_attach(prog, pid, libc, add, ctx, first, sizeof(first));
	if (n < (int)N_FNS)
		snprintf(why, whylen,
			 "%d of %d functions of %s probed (%s): read/write figures "
			 "approximate",
			 n, (int)N_FNS, libc, first);
	if (n)
		snprintf(probe, plen, "libc_io:%s", libc);
	return n == (int)N_FNS;
}

void tracer_libcio_forget(void) { remove_group(GROUP); }
