/* control: `tts-launch stop` and `tts-launch status`, from another shell.
 * They act only on the supervisor holding the app's lock (instance.h) and
 * on its child; the pidfile is a hint that is cross-checked, never trusted. */
#ifndef TTS_CONTROL_H
#define TTS_CONTROL_H

#include "config.h"

/* 0 stopped (or was not running), 1 failed, 4 the pidfile or the lock
 * cannot be trusted (nothing signalled). */
int control_stop(const struct config *c);
/* LSB codes: 0 running, 1 dead but pidfile left, 3 not running, 4 the
 * pidfile or the lock cannot be trusted. */
int control_status(const struct config *c);

#endif
