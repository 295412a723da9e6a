/* stall: what a start-up that stopped progressing waits on (stall.h),
 * read from the timeline model alone, through its typed views: a connect still pending, a lock, a
 * peer that does not answer or stopped sending, a missing path tried again.
 * The live display (progress.c) decides when the start is stalled and says
 * this; the kinds and messages are documented in docs/diagnose.md ("While
 * it starts"). */
#include "stall.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "diagnose.h"
#include "hfcache.h"
#include "util.h"

#define WAIT_MIN_MS 1000.0 /* a connect or request younger than this is not "waiting" */

static void waiting_add(json_t *list, json_t *item, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void waiting_add(json_t *list, json_t *item, const char *fmt, ...)
{
	char buf[1536];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_object_set_new(item, "message", json_text(buf)); /* a cut character kept escaped */
	json_array_append_new(list, item);
}

json_t *stall_waiting_on(const struct tl_view *v, const json_t *peers,
			 const struct stall_download *dl, double since_ms, double now_ms)
{
	json_t *list = json_array(), *own = NULL, *pending = json_object(), *h;
	const char *key;
	size_t i;

	/* 1. connects still in progress: a pending (EINPROGRESS) record with no
	 * completion record for the same process and port after it */
	for (i = 0; i < v->n_connects; i++) {
		const struct tl_connect *e = &v->connects[i];
		char k[256];

		if (!e->peer || tl_or0(e->port) == 0)
			continue;
		/* by process and port: a completion record may not carry the
		 * address (only the socket's port is certain there) */
		snprintf(k, sizeof(k), "%d %d", (int)tl_or0(e->pid), (int)tl_or0(e->port));
		if (e->pending)
			json_object_set_new(pending, k, json_integer((json_int_t)i));
		else
			json_object_del(pending, k);
	}
	json_object_foreach (pending, key, h) {
		const struct tl_connect *c = &v->connects[json_integer_value(h)];
		double age = now_ms - tl_or0(c->start_ms);

		if (age < WAIT_MIN_MS)
			continue;
		waiting_add(list,
			    json_pack("{s:s, s:s, s:i, s:f}", "kind", "connect", "peer", c->peer,
				      "pid", (int)tl_or0(c->pid), "seconds", age / 1000),
			    "blocked in a connect to %s for %.0f s (no answer to the connection "
			    "request: a firewall dropping packets, or a host that is down)",
			    c->peer, age / 1000);
	}
	json_decref(pending);

	/* 2. a blocking flock/fcntl lock still waiting (locks[], when the
	 * tracer records them); else a .lock file opened when progress stopped */
	for (i = 0; i < v->n_locks; i++) {
		const struct tl_lock *e = &v->locks[i];

		if (!e->waiting || !e->path)
			continue;
		waiting_add(
		    list,
		    json_pack("{s:s, s:s, s:f, s:b}", "kind", "lock", "path", e->path, "seconds",
			      tl_or0(e->waiting_ms) / 1000, "blocked", 1),
		    "waiting for the lock %s for %.0f s: another process holds it (fuser -v %s "
		    "shows which)",
		    e->path, tl_or0(e->waiting_ms) / 1000, e->path);
	}
	for (i = 0; i < v->n_files && !v->n_locks; i++) {
		const char *path = v->files[i].path;
		double t = tl_or0(v->files[i].last_ms);

		if (!path || !hf_lock_file(path) || t < since_ms - 1500)
			continue;
		waiting_add(list,
			    json_pack("{s:s, s:s, s:f}", "kind", "lock", "path", path, "seconds",
				      (now_ms - t) / 1000),
			    "waiting for the lock %s, opened %.0f s ago: another process holds it "
			    "(fuser -v %s shows which)",
			    path, (now_ms - t) / 1000, path);
	}

	/* 3. a peer that was sent something and has not answered, or a download
	 * whose data stopped coming */
	if (!peers) {
		own = json_object();
		for (i = 0; i < v->n_network; i++) {
			const struct tl_peer *e = &v->network[i];
			double in = tl_or0(e->bytes_in), last = tl_or0(e->last_ms);

			if (!e->peer || e->dns || !strncmp(e->peer, "unix:", 5))
				continue;
			json_object_set_new(
			    own, e->peer,
			    json_pack("{s:f, s:f, s:f, s:f}", "in", in, "out", tl_or0(e->bytes_out),
				      "t_in", in > 0 ? last : -1.0, "t_out", in > 0 ? -1.0 : last));
		}
		peers = own;
	}
	json_object_foreach ((json_t *)peers, key, h) {
		double t_in = jnum(h, "t_in"), t_out = jnum(h, "t_out");
		char b[32];

		/* sent last and nothing back since, however long ago: other work
		 * (page faults, a thread) may have moved after the send */
		if (jnum(h, "out") > 0 && t_out > t_in && now_ms - t_out >= WAIT_MIN_MS) {
			waiting_add(
			    list,
			    json_pack("{s:s, s:s, s:f, s:f, s:f}", "kind", "peer-silent", "peer",
				      key, "bytes_out", jnum(h, "out"), "bytes_in", jnum(h, "in"),
				      "seconds", (now_ms - t_out) / 1000),
			    "waiting for an answer from %s: a request was sent %.0f s ago and "
			    "nothing came back (a hub or proxy that accepts connections but does "
			    "not answer; each request waits for HF_HUB_ETAG_TIMEOUT)",
			    key, (now_ms - t_out) / 1000);
		} else if (dl && dl->path && jnum(h, "in") > 0 && t_in >= 0 &&
			   t_in <= since_ms + 1500 && now_ms - t_in >= WAIT_MIN_MS &&
			   t_in >= dl->first_ms - 1500) {
			fmt_bytes(b, sizeof(b), jnum(h, "in"));
			waiting_add(
			    list,
			    json_pack("{s:s, s:s, s:s, s:f, s:f}", "kind", "download-stalled",
				      "peer", key, "path", dl->path, "bytes_in", jnum(h, "in"),
				      "seconds", (now_ms - t_in) / 1000),
			    "reading from %s, which has sent nothing for %.0f s, while "
			    "downloading %s (%s received from it in all; HF_HUB_DOWNLOAD_TIMEOUT "
			    "ends the wait)",
			    key, (now_ms - t_in) / 1000, dl->name ? dl->name : base_name(dl->path),
			    b);
		}
	}
	json_decref(own);

	/* 4. the same missing path tried again while nothing else moved */
	for (i = 0; i < v->n_missing; i++) {
		const struct tl_missing *e = &v->missing[i];
		double attempts = tl_or0(e->attempts), first = tl_or0(e->first_ms),
		       last = tl_or0(e->last_ms);

		if (!e->path || diagnose_benign_missing(e->path, e->class) || attempts < 2 ||
		    last < since_ms)
			continue;
		waiting_add(list,
			    json_pack("{s:s, s:s, s:f, s:s?, s:f}", "kind", "missing-path", "path",
				      e->path, "attempts", attempts, "errno", e->errno_name,
				      "seconds", (last - first) / 1000),
			    "sleeping between retries of the missing path %s: %.0f attempts over "
			    "%.0f s (%s), the last %.0f s ago",
			    e->path, attempts, (last - first) / 1000,
			    e->errno_name ? e->errno_name : "failed", (now_ms - last) / 1000);
	}
	if (!json_array_size(list))
		waiting_add(
		    list, json_pack("{s:s}", "kind", "unknown"),
		    "nothing the trace sees is moving (no file I/O, network data, new files "
		    "or processes): busy computing, or waiting on something not traced");
	return list;
}
