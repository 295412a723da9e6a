/* tracer_load: opens, configures and loads the tracer's BPF object
 * (tracer_load.c). */
#ifndef TTS_TRACER_LOAD_H
#define TTS_TRACER_LOAD_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>

struct trace_bpf;
struct pyframes_target;
struct progcache;

/* tracer_open_load's hook (or NULL): heavy_loaded runs on the heavy
 * copy's thread as soon as that copy has loaded, while the calling thread
 * still loads the rest: the heavy programs' attach overlaps the other
 * programs' verification (tracer.c: the syscall tracepoints). When the
 * load fails after it ran, undo runs (on the calling thread) before the
 * copies go; a load made without the split runs neither. */
struct tracer_load_hook {
	void (*heavy_loaded)(struct trace_bpf *heavy, void *arg);
	void (*undo)(void *arg);
	void *arg;
};

/* open -> configure (rodata) -> load. usdt false: the Python import
 * programs are not loaded; syscalls: which syscall pair is (SYSCALLS_EXACT:
 * raw sys_enter/sys_exit, SYSCALLS_CHEAP: the per-syscall tracepoints'
 * pair, -1: both, for the doctor); py: the interpreter whose frames the
 * attribution reads, or NULL; stats: print each program's verification time
 * on stderr (-v). With one pair, the pair's exit program is verified on
 * another thread meanwhile, in a copy of the object on the same maps:
 * *heavy (else NULL; tracer_load_prog finds a program in either); with
 * cheap's pair, its entry program too; hook: above. cache (or NULL;
 * progcache_init'd): with one pair, the programs and maps kept by an
 * earlier run of the same settings when they can be taken (then one copy,
 * *heavy NULL and the hook not run), else its key set for
 * progcache_store. NULL with the reason in why. */
struct trace_bpf *tracer_open_load(bool usdt, int syscalls, __u32 ready_port,
				   const struct pyframes_target *py, bool stats,
				   const struct tracer_load_hook *hook, struct progcache *cache,
				   struct trace_bpf **heavy, char *why, size_t whylen);

/* The loaded program named name, in skel or heavy (NULL: none loaded) */
struct bpf_program *tracer_load_prog(struct trace_bpf *skel, struct trace_bpf *heavy,
				     const char *name);

/* A warning libbpf printed (its print callback hands each to this): a
 * program the kernel's verifier rejected is noted with the log's last line,
 * so that a failed load says which program and why, not "not permitted". */
void tracer_load_note(const char *msg);
/* The rejection noted last, as the reason a load failed (false: none) */
bool tracer_load_rejection(char *why, size_t whylen);

#endif
