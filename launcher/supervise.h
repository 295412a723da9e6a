/* supervise: `tts-launch run`: stale kill, spawn under tracing, relay the
 * logs, detect readiness, forward signals, write the timeline, and exit
 * with the service's code. */
#ifndef TTS_SUPERVISE_H
#define TTS_SUPERVISE_H

#include "config.h"

/* Returns the process exit code (see the contract in README.md). */
int supervise_run(struct config *c, int argc, char **argv);

#endif
