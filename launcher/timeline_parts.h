/* timeline_parts: what timeline_build.c shares with the files that build
 * one group of its sections (timeline_net.c: network, connects, listens).
 * Internal to those files. */
#ifndef TTS_TIMELINE_PARTS_H
#define TTS_TIMELINE_PARTS_H

#include <jansson.h>

#include "collector.h"

/* An errno as its name ("ECONNREFUSED"), null for 0 or an unknown one. */
json_t *errno_json(int e);

/* network, connects and listens (timeline_net.c) */
void snap_network(struct collector *t, json_t *root);

#endif
