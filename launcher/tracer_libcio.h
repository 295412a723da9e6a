/* tracer_libcio: [trace] syscalls = cheap's exact read/write figures from
 * libc (bpf/libcio.bpf.c): uprobes after the syscall instructions of libc's
 * read/write family, as perf events bound to the traced tree, so that no
 * other process of the host gets a breakpoint. tracer_libcio.c says how. */
#ifndef TTS_TRACER_LIBCIO_H
#define TTS_TRACER_LIBCIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bpf_program;
struct bpf_link;

/* The libc the service runs with (the launcher's own: the ld.so cache's
 * libc.so.6), resolved; false when not found. */
bool tracer_libcio_libc(char *path, size_t len);

/* A site attached, for the tracer's uprobe links (the keeper's): the
 * anchor (its link) and the follower (a perf event fd, no program), to be
 * closed together. */
typedef void (*tracer_libcio_add)(void *ctx, struct bpf_link *anchor, int follower,
				  const struct bpf_program *prog);

/* prog after each syscall site of libc's functions, for the tree of pid
 * (held, not yet released): how many functions got all their sites; why
 * says what failed when not all (the first failure). */
int tracer_libcio_attach(struct bpf_program *prog, pid_t pid, const char *libc,
			 tracer_libcio_add add, void *ctx, char *why, size_t whylen);
/* enter on fn's entry and exit on its return in libc, as perf events
 * bound to the tree of pid like the sites above (shared definitions,
 * anchors and followers): 0, or -1 with why said (no tracefs, no such
 * function). */
int tracer_libcio_bind(struct bpf_program *enter, struct bpf_program *exit, pid_t pid,
		       const char *libc, const char *fn, tracer_libcio_add add, void *ctx,
		       char *why, size_t whylen);
/* progs[0] and progs[1] each on a uprobe at file offset off[i] of file
 * (ref_ctr[i]: the file offset of a USDT probe's semaphore, 0: none), with
 * cookie[i], bound to the tree of pid like the sites above; tags[i] starts
 * its shared definition's name. Both or neither: 0, or -1 with why said
 * and nothing attached. */
int tracer_libcio_bind_at(struct bpf_program *const *progs, pid_t pid, const char *file,
			  const char *const *tags, const uint64_t *off, const uint64_t *ref_ctr,
			  const uint64_t *cookie, tracer_libcio_add add, void *ctx, char *why,
			  size_t whylen);
/* Did a process that is gone estimate a close (est: libc_est) without ever
 * being reached by the probes (procs: libc_procs)? Entries of processes
 * gone and reached are dropped; live ones are decided later. */
struct bpf_map;
bool tracer_libcio_missed(struct bpf_map *est, struct bpf_map *procs);
/* tracer_libcio_attach on the launcher's libc: true when every function
 * got all its sites; probe: its tracing.probes name ("" when none was), why: a
 * fallback's reason ("" when none) */
bool tracer_libcio_start(struct bpf_program *prog, pid_t pid, tracer_libcio_add add, void *ctx,
			 char *probe, size_t plen, char *why, size_t whylen);
/* The tracefs definitions of the libc probes that no run holds, removed
 * (the keeper, once it closed its links and followers). */
void tracer_libcio_forget(void);
/* the fallback when tracer_libcio_missed */
extern const char tracer_libcio_missed_why[];

#endif
