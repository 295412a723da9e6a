/* pyframes: which Python interpreter the kernel side can read frames of
 * (bpf/attrib.bpf.c), found at attach time from the interpreter's own ELF
 * symbols: CPython 3.10, 3.11 or 3.12 (Py_Version, else the name of the
 * executable or its libpython), x86_64, with _PyRuntime among the dynamic
 * symbols of the executable (Debian's /usr/bin/python3.11: a fixed address)
 * or of the libpython3.x.so it needs (pyenv, uv: a position-independent
 * build, where _PyRuntime moves per process). The struct offsets of each
 * version come from its headers (pyframes.c). Another interpreter is a
 * fallback whose reason goes to tracing.fallbacks.
 *
 * When _PyRuntime moves, the launcher finds it per process (pyframes_note,
 * called with each process's first records): the mapping of the file that
 * holds it in /proc/PID/maps, written to the kernel's pyrt map with the
 * process's start_code (so a later exec does not reuse it). */
#ifndef TTS_PYFRAMES_H
#define TTS_PYFRAMES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the offsets the kernel side reads with (bpf/attrib.bpf.c's targ_py_*) */
struct pyframes_layout {
	uint32_t rt_interp_head, is_threads_head, ts_next, ts_tid, tid_pthread, ts_frame, no_cframe,
	    cframe_current, frame_code, frame_previous, frame_owner, owner_cstack, code_firstlineno,
	    code_filename, code_name, str_state, str_ascii_data, str_utf8;
};

struct pyframes_target {
	int minor;	   /* 3.minor */
	uint64_t runtime;  /* address of _PyRuntime in every process; 0: it moves */
	uint64_t rt_value; /* _PyRuntime's symbol value in the file holding it */
	uint64_t rt_base;  /* the vaddr of that file's segment at file offset 0 */
	uint64_t dev, ino; /* the executable (kernel dev_t, as the kernel side reads it) */
	char path[PATH_MAX];
	char rt_path[PATH_MAX]; /* the file holding _PyRuntime (the executable or libpython) */
	struct pyframes_layout lay;
};

/* The first of paths (real files) whose frames can be read; false with the
 * reason (for the last candidate tried) in why. */
bool pyframes_find(char paths[][PATH_MAX], int n, struct pyframes_target *out, char *why,
		   size_t whylen);

struct trace_bpf;
/* The kernel side's rodata for target py (before the load). */
void pyframes_configure(struct trace_bpf *skel, const struct pyframes_target *py);

/* _PyRuntime's address in process pid (running py's executable) from its
 * /proc/PID/maps, and its start_code; false when not mapped (yet). */
bool pyframes_runtime_of(const struct pyframes_target *py, int pid, uint64_t *runtime,
			 uint64_t *start_code);

/* Per-process resolution for a moving _PyRuntime: a state for map fd
 * pyrt_fd, fed each record's pid (pyframes_note), freed with pyframes_free. */
struct pyframes_live;
struct pyframes_live *pyframes_live_new(const struct pyframes_target *py, int pyrt_fd);
void pyframes_note(void *live, int pid);
void pyframes_free(void *live);

#endif
