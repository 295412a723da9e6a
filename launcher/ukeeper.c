/* ukeeper: the uprobe keeper (moved out of tracer.c for issue 18, which
 * hands it links attached after the start too).
 *
 * Removing a uprobe waits for an RCU grace period (~100-140 ms per probe
 * here, measured with strace -tt -y: each close(<bpf_link>) of a USDT link at
 * exit), paid by whoever drops the last reference to its link. So the main
 * process never drops one: right after the attach, a keeper process (a
 * grandchild, re-parented away from us so the supervisor never counts it
 * with the service's processes) holds a copy of every uprobe link fd and
 * nothing else; tts-launch disconnects its own links and lets its exit drop
 * references that are not the last. The keeper waits on a pidfd of
 * tts-launch: when tts-launch exits, however it ends (SIGKILL included), the
 * keeper closes the links (paying the grace periods where no caller waits),
 * resets the run's kept maps (progcache.h: done) and exits; its life is tts-launch's plus that
 * detach, plus UKEEPER_LINGER_S while it holds the raw tracepoints' holders (tphold.c) and, in
 * [trace] syscalls = cheap, the libc sites' followers and the syscall tracepoints' holders
 * (keeper_close). */

#include <bpf/bpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "gpu.h"
#include "instance.h"
#include "tphold.h"
#include "tracer_libcio.h"
#include "ukeeper.h"

static int int_cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The BPF program id behind link fd, from /proc/self/fdinfo (0: none). */
static unsigned int fd_prog_id(int fd)
{
	char path[64], line[128];
	unsigned int prog = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "prog_id:", 8))
			prog = (unsigned int)strtoul(line + 8, NULL, 10);
	if (f)
		fclose(f);
	return prog;
}

/* The keeper's fds, each with the program whose release closes it (0:
 * none does); hold: kept past the links at the end (keeper_close): a perf
 * event without a program of its own that serves prog (a libc site's
 * follower, a syscall tracepoint's holder), or a raw tracepoint's holder
 * (tphold.c: a perf event, a link of a program that does nothing; prog 0) */
struct kept {
	int *fd;
	unsigned int *prog;
	bool *hold;
	int n, cap;
};

static bool kept_add(struct kept *k, int fd, unsigned int prog, bool hold)
{
	if (k->n == k->cap) {
		int cap = k->cap ? 2 * k->cap : 2 * UKEEPER_MAX_FDS;
		int *nf = realloc(k->fd, (size_t)cap * sizeof(int));
		unsigned int *np = nf ? realloc(k->prog, (size_t)cap * sizeof(unsigned int)) : NULL;
		bool *nh = np ? realloc(k->hold, (size_t)cap * sizeof(bool)) : NULL;

		if (nf)
			k->fd = nf;
		if (np)
			k->prog = np;
		if (!nh)
			return false;
		k->hold = nh;
		k->cap = cap;
	}
	k->fd[k->n] = fd;
	k->hold[k->n] = hold;
	k->prog[k->n++] = (prog || hold) ? prog : fd_prog_id(fd);
	return true;
}

/* A release message ('D', then program ids): the links of those programs
 * are closed now, their detach paid here (ukeeper_release). */
static void keeper_release(const unsigned char *msg, size_t len, struct kept *k)
{
	unsigned int ids[UKEEPER_RELEASE_MAX];
	size_t n_ids = (len - 1) / sizeof(ids[0]);
	int kept = 0;

	if (n_ids > UKEEPER_RELEASE_MAX)
		n_ids = UKEEPER_RELEASE_MAX;
	memcpy(ids, msg + 1, n_ids * sizeof(ids[0]));
	for (int i = 0; i < k->n; i++) {
		bool drop = false;

		for (size_t j = 0; k->prog[i] && j < n_ids && !drop; j++)
			drop = k->prog[i] == ids[j];
		if (drop) {
			close(k->fd[i]);
			continue;
		}
		k->fd[kept] = k->fd[i];
		k->hold[kept] = k->hold[i];
		k->prog[kept++] = k->prog[i];
	}
	k->n = kept;
}

/* gpu.c's gpuseen map (one fd sent with the byte 'h'), kept apart from the
 * links: when tts-launch dies with a process of the tree held at its
 * mapping of a CUDA library, the keeper continues it (issue 18). */
static int held_map = -1;

static bool keeper_held_map(char byte, int fd)
{
	if (byte != 'h' || held_map >= 0)
		return false;
	held_map = fd;
	return true;
}

/* Later links (a CUDA library dlopen'd by the tree, gpu.c) come on sock:
 * their fds in SCM_RIGHTS messages, kept with the others; a release
 * message closes some of them now. */
static int keeper_take(int sock, struct kept *k)
{
	unsigned char msg[1 + UKEEPER_RELEASE_MAX * sizeof(unsigned int)];
	char cbuf[CMSG_SPACE(64 * sizeof(int))];
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg)};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);

	if (r <= 0)
		return r < 0 && errno == EINTR ? 0 : -1;
	if (msg[0] == 'D') {
		keeper_release(msg, (size_t)r, k);
		return 0;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int got[64];

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || n > 64)
			continue;
		memcpy(got, CMSG_DATA(c), n * sizeof(int));
		if (n == 1 && keeper_held_map((char)msg[0], got[0]))
			continue;
		for (size_t i = 0; i < n; i++)
			if (!kept_add(k, got[i], 0, false))
				close(got[i]); /* paid here instead */
	}
	return 0;
}

/* The end: the links, then (after UKEEPER_LINGER_S) the followers and the
 * holders. A libc site's tracefs definition is shared by every run
 * (tracer_libcio.c), and the close of its last perf event removes the
 * uprobe, waiting for two grace periods (~130 ms here) under the kernel's
 * event_mutex, which every perf_event_open of a tracepoint takes too: a run
 * started meanwhile waited for each of the last run's 20 sites in its
 * attach (0.5-1 s, a loop of runs 2x slower: BENCHMARKS.md). A syscall
 * tracepoint's last event does the same (~25 ms each, ~55 of them). Closed
 * while another run holds the same definitions and tracepoints, the
 * followers and holders take nothing down; held a while after the links,
 * they let the next run of a loop come before the last close. By then the
 * followers' task (the tree's root) is gone: they follow no process, and
 * no breakpoint is left anywhere; no program runs on any of them. */
/* The links' closes, each on a thread of its own (CLOSERS_MAX at most):
 * each close of a perf event's link waits for a grace period of RCU
 * tasks-trace (perf_event_detach_bpf_prog, ~28 ms here, outside any lock)
 * and a raw tracepoint's for its text patch, and waits begun together end
 * in the same grace period, so the run's links are gone in about the time
 * of one or two (~50 ms for ~85 links here; ~300 ms on 8 threads, ~1.5 s
 * one after another: BENCHMARKS.md, "The keeper's closes"), which is when a
 * kept load's maps are reset and the next run may take them
 * (progcache.h). Each thread is a task of the keeper's cgroup for those
 * ~50 ms: a pids limit (TasksMax) that refuses one leaves its links to
 * this thread. */
#define CLOSERS_MAX 96
/* a closer's stack: it only calls close() */
#define CLOSER_STACK (64 * 1024)

struct closer {
	const int *fd;
	int n, from, step;
};

static void *close_some(void *arg)
{
	const struct closer *c = arg;

	for (int i = c->from; i < c->n; i += c->step)
		close(c->fd[i]);
	return NULL;
}

/* the links (not what is held past them), on up to CLOSERS_MAX threads (on
 * this one where no thread starts, or no memory for the list) */
static void close_links(const struct kept *k)
{
	struct closer c[CLOSERS_MAX];
	pthread_t th[CLOSERS_MAX];
	bool started[CLOSERS_MAX] = {false};
	int *fd = malloc((k->n > 0 ? (size_t)k->n : 1) * sizeof(int));
	pthread_attr_t attr;
	bool small;
	int n = 0, nt;

	if (!fd) {
		for (int i = 0; i < k->n; i++)
			if (!k->hold[i])
				close(k->fd[i]);
		return;
	}
	for (int i = 0; i < k->n; i++)
		if (!k->hold[i])
			fd[n++] = k->fd[i];
	nt = n < CLOSERS_MAX ? n : CLOSERS_MAX;
	small = !pthread_attr_init(&attr);
	if (small && pthread_attr_setstacksize(&attr, CLOSER_STACK)) {
		pthread_attr_destroy(&attr);
		small = false;
	}
	for (int j = 0; j < nt; j++) {
		c[j] = (struct closer){.fd = fd, .n = n, .from = j, .step = nt};
		if (j > 0)
			started[j] =
			    !pthread_create(&th[j], small ? &attr : NULL, close_some, &c[j]);
	}
	for (int j = 0; j < nt; j++)
		if (!started[j])
			close_some(&c[j]);
	for (int j = 1; j < nt; j++)
		if (started[j])
			pthread_join(th[j], NULL);
	if (small)
		pthread_attr_destroy(&attr);
	free(fd);
}

/* The attach lock (ukeeper.h): the directory ATTACH_LOCK_DIR, root's and
 * closed to everyone else, so that no other user can open it, let alone
 * lock it (INSTANCE_RUN_DIR itself is open to all: a user's flock there
 * would have held every start); made by a run as root (create), -1 when
 * it is not that (nothing waits then) */
#define ATTACH_LOCK_DIR INSTANCE_RUN_DIR "/attach-lock"

static int attach_lock_open(bool create)
{
	int fd;
	struct stat st;

	if (geteuid() != 0)
		return -1;
	if (create && mkdir(ATTACH_LOCK_DIR, 0700) && errno != EEXIST)
		return -1;
	fd = open(ATTACH_LOCK_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) || st.st_uid != 0 || (st.st_mode & 077))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int ukeeper_attach_lock(void)
{
	struct timespec ts = {0, 1000 * 1000};
	int fd = attach_lock_open(true);
	double end = clock_ms() + 3000;

	/* a keeper holds it for one detach (~0.1 s), then leaves a gap
	 * (DETACH_GAP_NS) for the runs that wait; 3 s at most, then on
	 * without it (a keeper stopped mid-detach does not hold a start) */
	while (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || clock_ms() > end) {
			close(fd);
			return -1;
		}
		nanosleep(&ts, NULL);
	}
	return fd;
}

/* the lock alone, for one slow detach: waited for up to 2 s (a run that
 * hangs while it attaches does not keep the keeper forever) */
/* after each detach, the lock is left alone this long: a run polls for
 * it every 1 ms (ukeeper_attach_lock), and a keeper that took it again at
 * once would keep it from every run until its last detach */
#define DETACH_GAP_NS (5 * 1000 * 1000)

/* the lock alone, for one slow detach, until the clock (clock_ms) passes
 * deadline: the keeper's waits share one (2 s: a run stopped while it
 * attaches, or runs one after another, do not keep the keeper), then the
 * rest without it */
static void detach_lock(int fd, double deadline)
{
	struct timespec ts = {0, 1000 * 1000};

	while (fd >= 0 && clock_ms() < deadline && flock(fd, LOCK_EX | LOCK_NB) < 0)
		nanosleep(&ts, NULL);
}

static void detach_unlock(int fd)
{
	struct timespec gap = {0, DETACH_GAP_NS};

	if (fd >= 0 && !flock(fd, LOCK_UN))
		nanosleep(&gap, NULL);
}

/* Of tps[0..n), those a link the keeper still holds is on (not those
 * released when the requests window ended), into out: how many. */
static int still_linked(const struct kept *k, const char *const *tps, int n, const char **out)
{
	bool on[UKEEPER_MAX_TRACEPOINTS] = {false};
	int m = 0;

	for (int i = 0; i < k->n; i++) {
		char path[64], line[128];
		FILE *f;

		if (k->hold[i])
			continue;
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", k->fd[i]);
		f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "tp_name:", 8)) {
				char *name = line + 8 + strspn(line + 8, " \t");

				name[strcspn(name, "\n")] = 0;
				for (int j = 0; j < n && j < UKEEPER_MAX_TRACEPOINTS; j++)
					on[j] = on[j] || !strcmp(name, tps[j]);
			}
		if (f)
			fclose(f);
	}
	for (int j = 0; j < n && j < UKEEPER_MAX_TRACEPOINTS; j++)
		if (on[j])
			out[m++] = tps[j];
	return m;
}

static void keeper_close(struct kept *k, const struct ukeeper_hold *hold,
			 const struct ukeeper_done *done)
{
	bool held = false;

	/* the run's rare raw tracepoints still linked stay registered while
	 * the links go and the linger lasts: a run started meanwhile attaches
	 * beside two registrations, without a text patch (tphold.c) */
	if (hold && hold->n_tracepoints > 0) {
		const char *tps[UKEEPER_MAX_TRACEPOINTS];
		int hf[UKEEPER_MAX_FDS],
		    n = still_linked(k, hold->tracepoints, hold->n_tracepoints, tps),
		    m = tphold_events(tps, n, hf, UKEEPER_MAX_FDS);

		m += tphold_programs(tps, n, hf + m, UKEEPER_MAX_FDS - m);
		for (int i = 0; i < m; i++)
			if (!kept_add(k, hf[i], 0, true))
				close(hf[i]);
	}
	for (int i = 0; i < k->n; i++)
		held |= k->hold[i];
	close_links(k);
	if (done && done->fn) {
		/* tts-launch's own links went with its exit, the keeper's
		 * copies just now; a program that started before still runs
		 * under RCU: one grace period (MEMBARRIER_CMD_GLOBAL) and none
		 * of the run's programs can run any more */
		if (syscall(SYS_membarrier, 1 /* MEMBARRIER_CMD_GLOBAL */, 0, 0) == 0) {
			done->fn(done->fd[0], done->fd[1]);
		} else { /* no grace period to be had: not done (the entry
			  * stays not reset, and the next run remakes it) */
			for (int i = 0; i < 2; i++)
				if (done->fd[i] >= 0)
					close(done->fd[i]);
		}
	}
	if (held) {
		struct timespec ts = {.tv_sec = UKEEPER_LINGER_S};

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		/* one at a time, each under the attach lock alone: each
		 * close holds the kernel's event_mutex through its grace
		 * periods, and a run that attached meanwhile waited for them
		 * all, 0.4-1.4 s (on eight threads, 1.0-1.4 s); now for one at
		 * most (BENCHMARKS.md, "Programs kept loaded") */
		int lk = attach_lock_open(false);
		double deadline = clock_ms() + 2000;

		for (int i = 0; i < k->n; i++)
			if (k->hold[i]) {
				detach_lock(lk, deadline);
				close(k->fd[i]);
				detach_unlock(lk);
			}
		if (lk >= 0)
			close(lk);
	}
}

/* The keeper: only the link fds, the pidfd and sock stay open; out of the
 * terminal's process group (a Ctrl-C is tts-launch's to handle). */
static void keeper_main(int pidfd, int sock, int *fds, const unsigned int *prog_of, int n,
			const struct ukeeper_hold *hold, const struct ukeeper_done *done)
    __attribute__((noreturn));
static void keeper_main(int pidfd, int sock, int *fds, const unsigned int *prog_of, int n,
			const struct ukeeper_hold *hold, const struct ukeeper_done *done)
{
	struct pollfd pf[2] = {{.fd = pidfd, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
	int keep[UKEEPER_MAX_FDS + 5], m = 0;
	struct kept k = {0};
	unsigned int from = 0;

	for (int i = 0; i < n; i++)
		keep[m++] = fds[i];
	keep[m++] = pidfd;
	if (sock >= 0)
		keep[m++] = sock;
	for (int i = 0; done && done->fn && i < 2; i++)
		if (done->fd[i] >= 0)
			keep[m++] = done->fd[i];
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
	for (int i = 0; i < n; i++)
		if (!kept_add(&k, fds[i], prog_of ? prog_of[i] : 0, prog_of && prog_of[i]))
			_exit(1);
	if (hold && hold->open && hold->prog) {
		int hf[UKEEPER_MAX_FDS], m = hold->open(hf, UKEEPER_MAX_FDS);

		for (int i = 0; i < m; i++)
			if (!kept_add(&k, hf[i], hold->prog, true))
				close(hf[i]);
	}
	/* tts-launch's death, however it comes */
	for (;;) {
		int r = poll(pf, pf[1].fd >= 0 ? 2 : 1, -1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || pf[0].revents)
			break;
		if (pf[1].revents && keeper_take(sock, &k) < 0)
			pf[1].fd = -1; /* tts-launch closed its end: no more links */
	}
	/* what was still queued when tts-launch died (the held map, links),
	 * then the held processes continued, before the links' slow closes */
	while (pf[1].fd >= 0 && poll(&pf[1], 1, 0) == 1 && keeper_take(sock, &k) == 0)
		;
	if (held_map >= 0)
		gpu_continue_held(held_map);
	keeper_close(&k, hold, done);
	/* the tracefs definitions of libc probes no run holds now (their
	 * removal takes event_mutex too: under the attach lock) */
	{
		int lk = attach_lock_open(false);

		detach_lock(lk, clock_ms() + 2000);
		tracer_libcio_forget();
		if (lk >= 0)
			close(lk);
	}
	_exit(0);
}

bool ukeeper_start(int *fds, const unsigned int *prog_of, int n, const struct ukeeper_hold *hold,
		   const struct ukeeper_done *done, int *sock)
{
	int pidfd, reaper = 0, st, sp[2] = {-1, -1};
	bool kept;
	pid_t p;

	*sock = -1;
	if (n < 0 || n > UKEEPER_MAX_FDS || (pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0)) < 0)
		return false;
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sp))
		sp[0] = sp[1] = -1;
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
			keeper_main(pidfd, sp[1], fds, prog_of, n, hold, done);
		_exit(k > 0 ? 0 : 1);
	}
	while (p > 0 && waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
	if (reaper)
		prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	close(pidfd);
	if (sp[1] >= 0)
		close(sp[1]);
	kept = p > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (kept)
		*sock = sp[0];
	else if (sp[0] >= 0)
		close(sp[0]);
	return kept;
}

int ukeeper_link_fds(const unsigned int *ids, int n_ids, int *fds, int max)
{
	struct dirent *d;
	int n = 0;
	DIR *dir = opendir("/proc/self/fd");

	/* one readlink per fd, and the link's info for the links only (an
	 * fdinfo read of each of ~330 fds took ~10 ms at the release) */
	while (dir && (d = readdir(dir)) && n < max) {
		char path[300], target[64];
		struct bpf_link_info li;
		__u32 len = sizeof(li);
		ssize_t tl;
		int fd;

		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		tl = readlink(path, target, sizeof(target) - 1);
		if (tl <= 0)
			continue;
		target[tl] = '\0';
		if (strcmp(target, "anon_inode:bpf_link"))
			continue; /* a link, not a program's or a map's fd */
		fd = atoi(d->d_name);
		memset(&li, 0, sizeof(li));
		if (bpf_obj_get_info_by_fd(fd, &li, &len) || !li.prog_id)
			continue;
		for (int i = 0; i < n_ids; i++)
			if (li.prog_id == ids[i]) {
				fds[n++] = fd;
				break;
			}
	}
	if (dir)
		closedir(dir);
	return n;
}

bool ukeeper_release(int sock, const unsigned int *ids, int n)
{
	unsigned char msg[1 + UKEEPER_RELEASE_MAX * sizeof(unsigned int)];

	if (sock < 0 || n <= 0 || n > UKEEPER_RELEASE_MAX)
		return false;
	msg[0] = 'D';
	memcpy(msg + 1, ids, (size_t)n * sizeof(ids[0]));
	return send(sock, msg, 1 + (size_t)n * sizeof(ids[0]), MSG_NOSIGNAL) > 0;
}
