/* render_prom: a timeline's figures in the Prometheus text exposition format
 * (version 0.0.4), without timestamps, so node_exporter's textfile collector
 * accepts the file as it is. Metric names: docs/views.md. */
#ifndef TTS_RENDER_PROM_H
#define TTS_RENDER_PROM_H

#include <stddef.h>
#include <stdio.h>

#include "timeline.h"

/* 0, or -1 when writing failed. */
int render_prom(const struct timeline *tl, FILE *out);

/* The buckets of indextts2_request_duration_seconds (upper bounds, seconds;
 * +Inf is implied). */
extern const double prom_request_buckets[];
extern const size_t prom_n_request_buckets;

/* Helpers shared with the live /metrics endpoint (launcher/metrics.c). */
void prom_header(FILE *out, const char *name, const char *type, const char *help);
/* A label value with \, " and newline escaped. */
void prom_label_value(FILE *out, const char *s);
/* A sample value: integers without a fraction, NaN and infinities as
 * Prometheus spells them. */
void prom_value(FILE *out, double v);

#endif
