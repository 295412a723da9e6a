/* tphold: tracefs events by id, as perf events: a program's (the BPF
 * link owns it) or a holder (disabled, program-less, of the calling
 * process: it counts nothing and runs nothing, but keeps its tracepoint
 * registered, so the next attach there is cheaper: tphold.c says how). */
#ifndef TTS_TPHOLD_H
#define TTS_TPHOLD_H

#include <stdbool.h>

/* The id of tracefs event system/event, -1 when this kernel lacks it. */
long tphold_id(const char *system, const char *event);

/* A perf event on tracefs event id: host-wide on this CPU, for a program;
 * or (hold) a holder. -1 with errno. */
int tphold_open(long id, bool hold);

/* A holder on each of the tracefs events named events[0..n) (their
 * systems looked up in available_events; one this kernel lacks is
 * skipped), into fds[0..max): how many. */
int tphold_events(const char *const *events, int n, int *fds, int max);

/* A raw tracepoint link of a program that does nothing (it returns at
 * once) on each of the tracepoints named events[0..n), into fds[0..max):
 * how many. With a holder (tphold_events) beside it, a tracepoint has two
 * registrations, and the next attach there patches no text at all; for
 * events rare on a host (a fork, a block request), not for every context
 * switch or page fault. */
int tphold_programs(const char *const *events, int n, int *fds, int max);

#endif
