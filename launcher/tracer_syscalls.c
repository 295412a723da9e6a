/* tracer_syscalls: [trace] syscalls = cheap's tracepoints and the drain of
 * the syscall exit program (tracer_syscalls.h).
 *
 * Raw sys_enter/sys_exit run a program for every syscall of every process
 * of the host (BENCHMARKS.md, "Neighbours"). The per-syscall tracepoints
 * run one only for the calls listed here: the rare ones whose records the
 * timeline keeps (bpf/syscalls.bpf.c says what each handler takes); the
 * kernel tests one bit per syscall for the others. read and write are not
 * among them: libc's calls give their figures (tracer_libcio.c), and where
 * those are not probed (a static binary), close does (sx_close), marked
 * approximate. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tphold.h"
#include "tracer_syscalls.h"

/* how long the exit program may wait for those calls (a lock wait) after the window */
#define DRAIN_MAX_MS 10000.0

enum { AT_ENTER = 1, AT_EXIT = 2, AT_PATHS = 4 };

/* Which probe each call needs: its exit (arguments from the registers
 * there), and its entry too when its record needs its start (a duration,
 * the arguments as they were: syscalls.bpf.c's entry_args). close: at its
 * entry only, the file still open. The legacy calls x86-64 still has
 * (open, newstat...) are skipped where they do not exist. AT_PATHS: the
 * exit goes to the path lookups' program (syscall_exit_paths), the others'
 * to syscall_exit. */
static const struct {
	const char *name;
	int at;
} calls[] = {
    {"open", AT_EXIT | AT_PATHS},
    {"openat", AT_EXIT | AT_PATHS},
    {"openat2", AT_EXIT | AT_PATHS},
    {"newstat", AT_EXIT | AT_PATHS},
    {"newlstat", AT_EXIT | AT_PATHS},
    {"access", AT_EXIT | AT_PATHS},
    {"readlink", AT_EXIT | AT_PATHS},
    {"newfstatat", AT_EXIT | AT_PATHS},
    {"statx", AT_EXIT | AT_PATHS},
    {"faccessat", AT_EXIT | AT_PATHS},
    {"faccessat2", AT_EXIT | AT_PATHS},
    {"readlinkat", AT_EXIT | AT_PATHS},
    {"chdir", AT_EXIT},
    {"fchdir", AT_EXIT},
    {"mkdir", AT_EXIT | AT_PATHS},
    {"rmdir", AT_EXIT | AT_PATHS},
    {"unlink", AT_EXIT | AT_PATHS},
    {"mkdirat", AT_EXIT | AT_PATHS},
    {"unlinkat", AT_EXIT | AT_PATHS},
    {"sendto", AT_EXIT},
    {"recvfrom", AT_EXIT},
    {"sendmsg", AT_EXIT},
    {"recvmsg", AT_EXIT},
    {"sendmmsg", AT_EXIT},
    {"recvmmsg", AT_EXIT},
    {"accept", AT_EXIT},
    {"accept4", AT_EXIT},
    {"listen", AT_EXIT},
    {"sendfile64", AT_EXIT},
    {"copy_file_range", AT_EXIT},
    {"mmap", AT_EXIT},
    {"rename", AT_ENTER | AT_EXIT},
    {"symlink", AT_ENTER | AT_EXIT},
    {"renameat", AT_ENTER | AT_EXIT},
    {"renameat2", AT_ENTER | AT_EXIT},
    {"symlinkat", AT_ENTER | AT_EXIT},
    {"flock", AT_ENTER | AT_EXIT},
    {"fcntl", AT_ENTER | AT_EXIT},
    {"connect", AT_ENTER | AT_EXIT},
    {"mlock", AT_ENTER | AT_EXIT},
    {"mlock2", AT_ENTER | AT_EXIT},
    {"mlockall", AT_ENTER | AT_EXIT},
    {"close", AT_ENTER},
};

const char *const tracer_syscalls_approximate[] = {
    "files.bytes_read",	     /* a read-only open's position at close */
    "files.bytes_written",   /* a written open's position (or growth) at close */
    "files.reads",	     /* one per close, not per call */
    "files.writes",	     /* one per close, not per call */
    "files.last_ms",	     /* a read or written file's: its close */
    "files.write_errors",    /* not seen: no write is traced */
    "downloads.bytes",	     /* the ranges are the written opens' at close */
    "downloads.first_ms",    /* the open, not the first write */
    "network.bytes_in",	     /* TCP: the connection's counters at its end; UDP exact */
    "network.bytes_out",     /* TCP: the connection's counters at its end; UDP exact */
    "network.sends",	     /* TCP: one per connection */
    "network.recvs",	     /* TCP: one per connection */
    "peers.tls_name",	     /* no first write seen: no ClientHello read */
    "connections.reply_max", /* no write seen: no reply sizes */
    "requests.bytes_in",     /* the connection's counters at close */
    "requests.bytes_out",    /* the connection's counters at close */
    "requests.end_ms",	     /* the close, not the last write */
    NULL,
};

/* With libc's read/write family probed for the tree (tracer_libcio.c):
 * none of those figures is left approximate */
const char *const tracer_libcio_approximate[] = {
    NULL,
};

static int add(struct bpf_link ***links, size_t *n, struct bpf_link *l)
{
	struct bpf_link **nl = realloc(*links, (*n + 1) * sizeof(*nl));

	if (!nl) {
		bpf_link__destroy(l);
		return -1;
	}
	*links = nl;
	nl[(*n)++] = l;
	return 0;
}

/* The name of entry i of calls at at, into tp */
static void tp_name(char *tp, size_t len, size_t i, int at)
{
	snprintf(tp, len, "sys_%s_%s", at == AT_ENTER ? "enter" : "exit", calls[i].name);
}

int tracer_syscalls_attach(struct bpf_program *enter, struct bpf_program *exit,
			   struct bpf_program *exit_paths, struct bpf_link ***links, size_t *n,
			   tracer_syscalls_fail fail, void *ctx)
{
	int exits = 0;

	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		for (int at = AT_ENTER; at <= AT_EXIT; at++) {
			char tp[64];
			struct bpf_link *l;
			long id;
			int pfd;

			if (!(calls[i].at & at))
				continue;
			tp_name(tp, sizeof(tp), i, at);
			if ((id = tphold_id("syscalls", tp)) < 0)
				continue;
			/* the id read once (bpf_program__attach_tracepoint reads
			 * it again): ~45 opens fewer before the release */
			if ((pfd = tphold_open(id, false)) < 0) {
				fail(ctx, tp, errno);
				continue;
			}
			l = bpf_program__attach_perf_event(at == AT_ENTER	    ? enter
							   : calls[i].at & AT_PATHS ? exit_paths
										    : exit,
							   pfd);
			if (!l) {
				int err = errno;

				close(pfd);
				fail(ctx, tp, err);
				continue;
			}
			if (!add(links, n, l) && at == AT_EXIT)
				exits++;
		}
	return exits;
}

int tracer_syscalls_hold(int *fds, int max)
{
	int n = 0;

	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		for (int at = AT_ENTER; at <= AT_EXIT && n < max; at++) {
			char tp[64];
			long id;
			int fd;

			if (!(calls[i].at & at))
				continue;
			tp_name(tp, sizeof(tp), i, at);
			if ((id = tphold_id("syscalls", tp)) < 0)
				continue;
			fd = tphold_open(id, true);
			if (fd >= 0)
				fds[n++] = fd;
		}
	return n;
}

void tracer_drain_add(struct tracer_drain *d, struct bpf_link *l) { add(&d->links, &d->n, l); }

/* Does the in-flight syscall map still hold a call of a live thread?
 * Entries of threads gone (killed inside a call) are dropped. */
static bool calls_in_flight(struct bpf_map *im)
{
	__u32 tid, next, walked = 0;
	bool live = false;
	int more;

	for (more = bpf_map__get_next_key(im, NULL, &next, sizeof(next));
	     !more && walked++ < bpf_map__max_entries(im);
	     more = bpf_map__get_next_key(im, &tid, &next, sizeof(next))) {
		char path[32];

		tid = next;
		snprintf(path, sizeof(path), "/proc/%u", tid);
		if (access(path, F_OK) == 0)
			live = true;
		else
			bpf_map__delete_elem(im, &tid, sizeof(tid), 0);
	}
	return live;
}

bool tracer_drain_done(struct tracer_drain *d, struct bpf_map *inflight, double now_ms)
{
	bool late = now_ms >= d->since_ms + DRAIN_MAX_MS;
	__u32 tid;

	if (!d->n || (!late && calls_in_flight(inflight)))
		return false;
	for (size_t i = 0; i < d->n; i++)
		bpf_link__destroy(d->links[i]);
	free(d->links);
	d->links = NULL;
	d->n = 0;
	while (late && !bpf_map__get_next_key(inflight, NULL, &tid, sizeof(tid)) &&
	       !bpf_map__delete_elem(inflight, &tid, sizeof(tid), 0))
		;
	return true;
}
