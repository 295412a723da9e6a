/* supervise: `tts-launch run`: stale kill, spawn under tracing, relay the
 * logs, detect readiness, forward signals, write the timeline, and exit
 * with the service's code. */
#ifndef TTS_SUPERVISE_H
#define TTS_SUPERVISE_H

#include "config.h"

/* Returns the process exit code (see the contract in README.md). */
int supervise_run(struct config *c, int argc, char **argv);

/* Pidfile: "SERVICE_PID START_TICKS\nSUPERVISOR_PID START_TICKS\n". */
struct pidfile_info {
	int service_pid;
	unsigned long long service_start;
	int supervisor_pid;
	unsigned long long supervisor_start;
};
int pidfile_read(const char *path, struct pidfile_info *pi);

#endif
