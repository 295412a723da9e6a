/* tracer_syscalls: the per-syscall tracepoints of [trace] syscalls = cheap
 * (which calls, attached how), and the drain of a syscall exit program
 * after the requests window (tracer.c's lighten): the exit program stays
 * until the calls its entry program saved before the window ended are
 * done. */
#ifndef TTS_TRACER_SYSCALLS_H
#define TTS_TRACER_SYSCALLS_H

#include <stdbool.h>
#include <stddef.h>

struct bpf_program;
struct bpf_link;
struct bpf_map;

/* The timeline's figures that cheap mode gives approximately
 * (tracing.approximate, docs/timeline.md), NULL-terminated. */
extern const char *const tracer_syscalls_approximate[];
/* Those left when libc's read/write family is probed (tracer_libcio.c). */
extern const char *const tracer_libcio_approximate[];

/* A tracepoint that exists but failed to attach: its name, the errno. */
typedef void (*tracer_syscalls_fail)(void *ctx, const char *tracepoint, int err);

/* enter on syscalls/sys_enter_NAME, exit on syscalls/sys_exit_NAME for the
 * calls the timeline needs (a call this architecture lacks is skipped),
 * the links appended to (*links)[0..*n); a path lookup's exit (open,
 * stat...) on exit_paths. The number of exit links attached (0: the mode
 * cannot work here). */
int tracer_syscalls_attach(struct bpf_program *enter, struct bpf_program *exit,
			   struct bpf_program *exit_paths, struct bpf_link ***links, size_t *n,
			   tracer_syscalls_fail fail, void *ctx);

/* The keeper's holders (ukeeper.c, keeper_close): a disabled perf event
 * without a program, of the calling process, on each of those tracepoints
 * (it counts nothing and runs nothing, but keeps the tracepoint up), into
 * fds[0..max): how many. */
int tracer_syscalls_hold(int *fds, int max);

struct tracer_drain {
	struct bpf_link **links; /* of the exit program, still attached */
	size_t n;
	double since_ms;     /* the window's end */
	const char *program; /* its name in tracing.light.detached, once done */
	unsigned int prog_id;
};

/* l (an exit program's link) stays until the drain is done. */
void tracer_drain_add(struct tracer_drain *d, struct bpf_link *l);
static inline bool tracer_draining(const struct tracer_drain *d) { return d->n > 0; }
/* Detaches the drain's links once inflight holds no call of a live thread,
 * or when the drain has lasted too long (what is still in flight then is
 * dropped): true when it did now. */
bool tracer_drain_done(struct tracer_drain *d, struct bpf_map *inflight, double now_ms);

#endif
