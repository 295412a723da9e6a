/* upkeeper: the uprobe keeper, see upkeeper.h. */
#include <bpf/bpf.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "upkeeper.h"

static int int_cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Removing a uprobe waits for an RCU grace period (~100-140 ms per probe
 * here, measured with strace -tt -y: each close(<bpf_link>) of a USDT link at
 * exit), paid by whoever drops the last reference to its link. So the main
 * process never drops one: right after the attach, a keeper process (a
 * grandchild, re-parented away from us so the supervisor never counts it
 * with the service's processes) holds a copy of every uprobe link fd and
 * nothing else; tts-launch disconnects its own links and lets its exit drop
 * references that are not the last. The keeper waits on a pidfd of
 * tts-launch: when tts-launch exits, however it ends (SIGKILL included), the
 * keeper closes the links (paying the grace periods where no caller waits)
 * and exits; its life is tts-launch's plus that detach. */

/* The fds of this process's bpf_links of the uprobe programs (USDT: libbpf
 * keeps a USDT link's per-site uprobe links to itself; getaddrinfo's pair):
 * from /proc/self/fdinfo. */
static int uprobe_link_fds(const int *prog_fds, int n_progs, int *fds, int max)
{
	__u32 ids[UPKEEPER_PROGS_MAX] = {0};
	struct dirent *d;
	int n = 0;
	DIR *dir;

	for (int i = 0; i < n_progs && i < UPKEEPER_PROGS_MAX; i++) {
		struct bpf_prog_info pi;
		__u32 len = sizeof(pi);

		memset(&pi, 0, sizeof(pi));
		if (prog_fds[i] >= 0 && !bpf_obj_get_info_by_fd(prog_fds[i], &pi, &len))
			ids[i] = pi.id;
	}
	dir = opendir("/proc/self/fdinfo");
	while (dir && (d = readdir(dir)) && n < max) {
		char path[300], line[128];
		bool perf = false;
		__u32 prog = 0;
		FILE *f;

		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%s", d->d_name);
		f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f)) {
			perf |= !strncmp(line, "link_type:", 10) && strstr(line, "perf");
			if (!strncmp(line, "prog_id:", 8))
				prog = (__u32)strtoul(line + 8, NULL, 10);
		}
		if (f)
			fclose(f);
		for (int i = 0; perf && prog && i < UPKEEPER_PROGS_MAX; i++)
			if (prog == ids[i]) {
				fds[n++] = atoi(d->d_name);
				break;
			}
	}
	if (dir)
		closedir(dir);
	return n;
}

/* The keeper: only the link fds and the pidfd stay open; out of the
 * terminal's process group (a Ctrl-C is tts-launch's to handle). */
static void keeper_main(int pidfd, int *fds, int n) __attribute__((noreturn));
static void keeper_main(int pidfd, int *fds, int n)
{
	struct pollfd pf = {.fd = pidfd, .events = POLLIN};
	int keep[66], m = 0;
	unsigned int from = 0;

	for (int i = 0; i < n; i++)
		keep[m++] = fds[i];
	keep[m++] = pidfd;
	qsort(keep, (size_t)m, sizeof(keep[0]), int_cmp);
	for (int i = 0; i < m; i++) {
		if ((unsigned int)keep[i] > from)
			syscall(SYS_close_range, from, (unsigned int)keep[i] - 1, 0);
		from = (unsigned int)keep[i] + 1;
	}
	syscall(SYS_close_range, from, ~0u, 0);
	setsid();
	prctl(PR_SET_NAME, "tts-launch-upr", 0, 0, 0);
	for (int sig = 1; sig < 32; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_IGN);
	/* tts-launch's death, however it comes */
	while (poll(&pf, 1, -1) < 0 && errno == EINTR)
		;
	for (int i = 0; i < n; i++)
		close(fds[i]);
	_exit(0);
}

bool upkeeper_start(const int *prog_fds, int n_progs)
{
	int fds[64], n = uprobe_link_fds(prog_fds, n_progs, fds, 64), pidfd, reaper = 0, st;
	pid_t p;

	if (!n || (pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0)) < 0)
		return false;
	/* re-parented past us: the supervisor adopts the service's orphans
	 * (spawn.c), and the keeper is none of them. The service has not
	 * exec'd yet, so nothing else can be orphaned meanwhile. */
	prctl(PR_GET_CHILD_SUBREAPER, &reaper, 0, 0, 0);
	if (reaper)
		prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
	p = fork();
	if (p == 0) {
		pid_t k = fork();

		if (k == 0)
			keeper_main(pidfd, fds, n);
		_exit(k > 0 ? 0 : 1);
	}
	while (p > 0 && waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
	if (reaper)
		prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	close(pidfd);
	return p > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
