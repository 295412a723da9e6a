/* doctor: can this machine trace, and can the configured app start? One
 * line per check: OK, WARN or FAIL, with the fix. */
#ifndef TTS_DOCTOR_H
#define TTS_DOCTOR_H

#include "config.h"

/* 0 when nothing failed, 1 otherwise. */
int doctor_run(const struct config *c);

#endif
