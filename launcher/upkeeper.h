/* upkeeper: the uprobe keeper (tts-launch-upr). Removing a uprobe waits for
 * an RCU grace period, paid by whoever drops its link's last reference: a
 * keeper process holds those references from the attach on and drops them
 * after tts-launch has exited, however it ends. */
#ifndef TTS_UPKEEPER_H
#define TTS_UPKEEPER_H

#include <stdbool.h>

#define UPKEEPER_PROGS_MAX 8

/* Hand the links of these programs (their fds; -1: not loaded) that this
 * process holds to a keeper; true when one holds them (the caller then
 * disconnects its own links: bpf_link__disconnect). */
bool upkeeper_start(const int *prog_fds, int n_progs);

#endif
