/* metrics: the live /metrics endpoint ([metrics] listen), served with
 * libmicrohttpd from the supervisor's own event loop (no extra thread: the
 * timeline model is only ever touched by one thread). Each scrape refreshes
 * the model from the probes that stay attached and renders it with
 * render_prom, plus a few live-only figures. */
#ifndef TTS_METRICS_H
#define TTS_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "timeline.h"

struct metrics;

/* Called before each scrape to bring the model up to date. */
typedef void (*metrics_refresh_fn)(void *arg);

/* listen: "HOST:PORT" (IPv4 address or "localhost"; ":PORT" for every
 * address). NULL with a message in err on a bad address or a failed bind. */
struct metrics *metrics_start(const char *listen, const struct timeline *tl,
			      metrics_refresh_fn refresh, void *arg, char *err, size_t errlen);
/* An fd for epoll, readable when connections wait; call metrics_run then. */
int metrics_fd(const struct metrics *m);
void metrics_run(struct metrics *m);
/* Whether the service process is still running (indextts2_running). */
void metrics_set_running(struct metrics *m, bool running);
void metrics_stop(struct metrics *m);

/* Parse "HOST:PORT" into an IPv4 address and port; 0, or -1 with err. */
int metrics_parse_listen(const char *listen, unsigned *addr_be, unsigned short *port, char *err,
			 size_t errlen);

#endif
