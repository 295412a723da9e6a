/* pyframes: which Python interpreter the kernel side can read frames of
 * (bpf/attrib.bpf.c), found at attach time from the interpreter's own ELF
 * symbols: CPython 3.11 (its Py_Version) built as a fixed-address
 * executable with _PyRuntime in it (Debian's /usr/bin/python3.11). Other
 * builds (a libpython3.x.so, a position-independent executable, another
 * version) are not read yet: the reason goes to tracing.fallbacks. */
#ifndef TTS_PYFRAMES_H
#define TTS_PYFRAMES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pyframes_target {
	uint64_t runtime;  /* address of _PyRuntime in every process running it */
	uint64_t dev, ino; /* the executable (kernel dev_t, as the kernel side reads it) */
	char path[PATH_MAX];
};

/* The first of paths (real files) whose frames can be read; false with the
 * reason (for the last candidate tried) in why. */
bool pyframes_find(char paths[][PATH_MAX], int n, struct pyframes_target *out, char *why,
		   size_t whylen);

#endif
