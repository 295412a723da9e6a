/* control: `tts-launch stop` and `tts-launch status`, from another shell,
 * through the pidfile a run writes. */
#ifndef TTS_CONTROL_H
#define TTS_CONTROL_H

#include "config.h"

/* 0 stopped (or was not running), 1 failed. */
int control_stop(const struct config *c);
/* LSB codes: 0 running, 1 dead but pidfile left, 3 not running. */
int control_status(const struct config *c);

#endif
