/* ukeeper: the process that holds the last references of tts-launch's
 * uprobe links, so that removing them (an RCU grace period each) is never
 * paid by tts-launch (ukeeper.c says how). */
#ifndef TTS_UKEEPER_H
#define TTS_UKEEPER_H

#include <stdbool.h>

/* Starts the keeper with a copy of fds[0..n) (call it before the service
 * execs: it briefly stops being the child subreaper). true when it runs;
 * *sock is then where later link fds go (SCM_RIGHTS, one byte of data, at
 * most 64 fds a message), else -1. */
bool ukeeper_start(int *fds, int n, int *sock);

#endif
