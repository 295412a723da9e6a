/* metrics: /metrics over HTTP with libmicrohttpd in external-epoll mode
 * (MHD_USE_EPOLL without an internal thread: the supervisor polls the
 * daemon's epoll fd and calls MHD_run, see libmicrohttpd's manual, "epoll").
 *
 * Bounded for clients that misbehave (docs/views.md): an idle connection is
 * closed after METRICS_IDLE_S, at most METRICS_MAX_CONNS are open and
 * METRICS_MAX_PER_IP from one address (more are closed at once, so a few
 * idle clients cannot queue a scrape behind them), and the snapshot of the
 * model plus its rendering is taken at most once per METRICS_CACHE_MS: a
 * flood of scrapes costs the supervisor's thread one snapshot a second.
 *
 * libmicrohttpd is opened with dlopen when an endpoint starts, not linked:
 * it brings gnutls and eight more libraries (~2.4 MiB of tts-launch's RSS,
 * BENCHMARKS.md) that a run without [metrics] listen never needs. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "metrics.h"
#include "render_prom.h"

#define METRICS_IDLE_S	   5
#define METRICS_MAX_CONNS  256
#define METRICS_MAX_PER_IP 32
#define METRICS_CACHE_MS   1000

/* The library's soname (Debian 12: package libmicrohttpd12). */
#define METRICS_MHD_LIB "libmicrohttpd.so.12"

/* The functions used, resolved once from METRICS_MHD_LIB. */
static struct {
	void *lib;
	__typeof__(MHD_start_daemon) *start_daemon;
	__typeof__(MHD_stop_daemon) *stop_daemon;
	__typeof__(MHD_run) *run;
	__typeof__(MHD_get_daemon_info) *get_daemon_info;
	__typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
	__typeof__(MHD_add_response_header) *add_response_header;
	__typeof__(MHD_queue_response) *queue_response;
	__typeof__(MHD_destroy_response) *destroy_response;
} mhd;

/* 0, or -1 with the library and what is missing in err. */
static int mhd_open(char *err, size_t errlen)
{
	struct {
		const char *name;
		void **fn;
	} const fns[] = {
	    {"MHD_start_daemon", (void **)&mhd.start_daemon},
	    {"MHD_stop_daemon", (void **)&mhd.stop_daemon},
	    {"MHD_run", (void **)&mhd.run},
	    {"MHD_get_daemon_info", (void **)&mhd.get_daemon_info},
	    {"MHD_create_response_from_buffer", (void **)&mhd.create_response_from_buffer},
	    {"MHD_add_response_header", (void **)&mhd.add_response_header},
	    {"MHD_queue_response", (void **)&mhd.queue_response},
	    {"MHD_destroy_response", (void **)&mhd.destroy_response},
	};
	void *lib;

	if (mhd.lib)
		return 0;
	lib = dlopen(METRICS_MHD_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(err, errlen,
			 "[metrics] listen needs %s: %s (install Debian's libmicrohttpd12, or "
			 "leave [metrics] listen empty)",
			 METRICS_MHD_LIB, dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		*fns[i].fn = dlsym(lib, fns[i].name);
		if (!*fns[i].fn) {
			snprintf(err, errlen,
				 "[metrics] listen: %s has no %s (install Debian 12's "
				 "libmicrohttpd12)",
				 METRICS_MHD_LIB, fns[i].name);
			dlclose(lib);
			return -1;
		}
	}
	mhd.lib = lib;
	return 0;
}

struct metrics {
	struct MHD_Daemon *d;
	const struct timeline *tl;
	metrics_refresh_fn refresh;
	void *arg;
	bool running;
	unsigned long scrapes, snapshots;
	/* render_prom of the last snapshot, and when it was taken */
	char *cached;
	size_t cached_len;
	double cached_at_ms;
};

/* A new snapshot and its rendering when the cached one is a second old (or
 * there is none); 0, or -1 when out of memory. */
static int snapshot(struct metrics *m)
{
	double t = clock_ms();
	char *body = NULL;
	size_t len = 0;
	FILE *out;

	if (m->cached && t - m->cached_at_ms < METRICS_CACHE_MS)
		return 0;
	out = open_memstream(&body, &len);
	if (!out)
		return -1;
	if (m->refresh)
		m->refresh(m->arg);
	m->snapshots++;
	render_prom(m->tl, out);
	if (fclose(out) != 0) {
		free(body);
		return -1;
	}
	free(m->cached);
	m->cached = body;
	m->cached_len = len;
	m->cached_at_ms = t;
	return 0;
}

int metrics_parse_listen(const char *listen, unsigned *addr_be, unsigned short *port, char *err,
			 size_t errlen)
{
	const char *colon = listen ? strrchr(listen, ':') : NULL;
	char host[64];
	char *end;
	long p;
	struct in_addr a;

	if (!colon) {
		snprintf(err, errlen,
			 "[metrics] listen '%s': expected HOST:PORT, e.g. 127.0.0.1:9435",
			 listen ? listen : "");
		return -1;
	}
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || p < 1 || p > 65535) {
		snprintf(err, errlen, "[metrics] listen '%s': port must be 1-65535", listen);
		return -1;
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - listen), listen);
	if (!*host || !strcmp(host, "*")) {
		a.s_addr = htonl(INADDR_ANY);
	} else if (!strcmp(host, "localhost")) {
		a.s_addr = htonl(INADDR_LOOPBACK);
	} else if (inet_pton(AF_INET, host, &a) != 1) {
		snprintf(err, errlen, "[metrics] listen '%s': '%s' is not an IPv4 address", listen,
			 host);
		return -1;
	}
	*addr_be = a.s_addr;
	*port = (unsigned short)p;
	return 0;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
			     char *body, size_t len)
{
	struct MHD_Response *r = mhd.create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (!r) {
		free(body);
		return MHD_NO;
	}
	mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ret = mhd.queue_response(c, status, r);
	mhd.destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	struct metrics *m = cls;
	char *body = NULL;
	size_t len = 0;
	FILE *out;

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con_cls;
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", strdup("GET only\n"), 9);
	if (strcmp(url, "/metrics")) {
		static const char msg[] = "tts-launch: the metrics are at /metrics\n";

		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", strdup(msg), sizeof(msg) - 1);
	}
	if (snapshot(m) < 0)
		return MHD_NO;
	out = open_memstream(&body, &len);
	if (!out)
		return MHD_NO;
	m->scrapes++;
	prom_header(out, "indextts2_running", "gauge",
		    "1 while the service process supervised by tts-launch runs.");
	fprintf(out, "indextts2_running %d\n", m->running ? 1 : 0);
	prom_header(out, "tts_launch_scrapes_total", "counter",
		    "Scrapes of this endpoint since tts-launch started, this one included.");
	fprintf(out, "tts_launch_scrapes_total %lu\n", m->scrapes);
	prom_header(out, "tts_launch_metrics_snapshots_total", "counter",
		    "Snapshots of the trace taken for scrapes: at most one a second, scrapes in "
		    "between get the last one.");
	fprintf(out, "tts_launch_metrics_snapshots_total %lu\n", m->snapshots);
	fwrite(m->cached, 1, m->cached_len, out);
	if (fclose(out) != 0) {
		free(body);
		return MHD_NO;
	}
	return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len);
}

struct metrics *metrics_start(const char *listen, const struct timeline *tl,
			      metrics_refresh_fn refresh, void *arg, char *err, size_t errlen)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct metrics *m;
	unsigned short port;
	unsigned addr;

	if (metrics_parse_listen(listen, &addr, &port, err, errlen) < 0)
		return NULL;
	if (mhd_open(err, errlen) < 0)
		return NULL;
	sa.sin_addr.s_addr = addr;
	sa.sin_port = htons(port);
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	*m = (struct metrics){.tl = tl, .refresh = refresh, .arg = arg, .running = true};
	/* no MHD_USE_INTERNAL_POLLING_THREAD: requests run inside metrics_run,
	 * on the supervisor's thread */
	m->d = mhd.start_daemon(MHD_USE_EPOLL, port, NULL, NULL, handle, m, MHD_OPTION_SOCK_ADDR,
				(const struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned)METRICS_IDLE_S, MHD_OPTION_CONNECTION_LIMIT,
				(unsigned)METRICS_MAX_CONNS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				(unsigned)METRICS_MAX_PER_IP, MHD_OPTION_END);
	if (!m->d) {
		snprintf(err, errlen, "failed to serve /metrics on %s: %s", listen,
			 errno ? strerror(errno) : "libmicrohttpd could not start");
		free(m);
		return NULL;
	}
	return m;
}

int metrics_fd(const struct metrics *m)
{
	const union MHD_DaemonInfo *i;

	if (!m)
		return -1;
	i = mhd.get_daemon_info(m->d, MHD_DAEMON_INFO_EPOLL_FD);
	return i ? i->epoll_fd : -1;
}

void metrics_run(struct metrics *m)
{
	if (m)
		mhd.run(m->d);
}

void metrics_set_running(struct metrics *m, bool running)
{
	if (m)
		m->running = running;
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	mhd.stop_daemon(m->d);
	free(m->cached);
	free(m);
}
