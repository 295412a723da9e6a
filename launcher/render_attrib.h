/* render_attrib: the attribution section's views (render_attrib.c). */
#ifndef TTS_RENDER_ATTRIB_H
#define TTS_RENDER_ATTRIB_H

#include <stdio.h>

#include "timeline.h"

/* "where the time went": the summary's first lines; nothing without the section. */
void attribution_print(const struct timeline *tl, FILE *out);
/* `report --format folded`: "kind;what microseconds" per cause. */
int render_folded(const struct timeline *tl, FILE *out);

#endif
