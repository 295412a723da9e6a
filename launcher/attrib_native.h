/* attrib_native: the native library a sampled user ip is in, for cpu with
 * no Python frame (issue 15: "the native library when no Python frame
 * applies"): "libtorch_cpu.so" rather than the process's name. The
 * mappings of each process are read from /proc/PID/maps when a sample
 * arrives (the process is alive then), kept, and read again when an ip
 * falls outside them (a library loaded since), at most once a second per
 * process. */
#ifndef TTS_ATTRIB_NATIVE_H
#define TTS_ATTRIB_NATIVE_H

#include <linux/types.h>

struct attr_natives;

/* NULL when out of memory. */
struct attr_natives *natives_new(void);
void natives_free(struct attr_natives *n);

/* The name of the file mapped at ip in pid (its base name: "libc.so.6",
 * "python3.11"; "[vdso]"; "anonymous memory" for a mapping of no file): an
 * index for natives_name, or -1 when unknown. */
int natives_lookup(struct attr_natives *n, int pid, __u64 ip);
const char *natives_name(const struct attr_natives *n, int idx);

/* Parse one line of /proc/PID/maps: the range and the name it is given
 * (as natives_lookup names it) into name; false for a line that is not one.
 * Exposed for the unit tests. */
#include <stdbool.h>
#include <stddef.h>
bool natives_parse_line(const char *line, __u64 *lo, __u64 *hi, bool *exec, char *name, size_t len);

#endif
