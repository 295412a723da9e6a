/* stall: what a start-up that stopped progressing waits on (stall.h),
 * read from the timeline model alone: a connect still pending, a lock, a
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
#include "progress.h"
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

json_t *stall_waiting_on(const json_t *root, const json_t *peers, double since_ms, double now_ms)
{
	json_t *list = json_array(), *own = NULL, *pending = json_object(), *c, *h;
	const json_t *dl, *e;
	const char *key;
	size_t i;

	diagnose_downloads_in_flight(root, &dl);
	/* 1. connects still in progress: a pending (EINPROGRESS) record with no
	 * completion record for the same process and peer after it */
	json_array_foreach (json_object_get(root, "connects"), i, e) {
		char k[256];

		if (!jstr(e, "peer") || jnum(e, "port") == 0)
			continue;
		/* by process and port: a completion record may not carry the
		 * address (only the socket's port is certain there) */
		snprintf(k, sizeof(k), "%d %d", (int)jnum(e, "pid"), (int)jnum(e, "port"));
		if (json_is_true(json_object_get(e, "pending")))
			json_object_set(pending, k, (json_t *)e);
		else
			json_object_del(pending, k);
	}
	json_object_foreach (pending, key, c) {
		double age = now_ms - jnum(c, "start_ms");

		if (age < WAIT_MIN_MS)
			continue;
		waiting_add(list,
			    json_pack("{s:s, s:s, s:i, s:f}", "kind", "connect", "peer",
				      jstr(c, "peer"), "pid", (int)jnum(c, "pid"), "seconds",
				      age / 1000),
			    "blocked in a connect to %s for %.0f s (no answer to the connection "
			    "request: a firewall dropping packets, or a host that is down)",
			    jstr(c, "peer"), age / 1000);
	}
	json_decref(pending);

	/* 2. a blocking flock/fcntl lock still waiting (locks[], when the
	 * tracer records them); else a .lock file opened when progress stopped */
	json_array_foreach (json_object_get(root, "locks"), i, e) {
		if (!json_is_true(json_object_get(e, "waiting")) || !jstr(e, "path"))
			continue;
		waiting_add(
		    list,
		    json_pack("{s:s, s:s, s:f, s:b}", "kind", "lock", "path", jstr(e, "path"),
			      "seconds", jnum(e, "waiting_ms") / 1000, "blocked", 1),
		    "waiting for the lock %s for %.0f s: another process holds it (fuser -v %s "
		    "shows which)",
		    jstr(e, "path"), jnum(e, "waiting_ms") / 1000, jstr(e, "path"));
	}
	json_array_foreach (json_object_get(root, "files"), i, e) {
		const char *path = jstr(e, "path");
		double t = jnum(e, "last_ms");

		if (!path || !hf_lock_file(path) || t < since_ms - 1500 ||
		    json_array_size(json_object_get(root, "locks")))
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
		json_array_foreach (json_object_get(root, "network"), i, e) {
			if (!jstr(e, "peer") || json_is_true(json_object_get(e, "dns")) ||
			    !strncmp(jstr(e, "peer"), "unix:", 5))
				continue;
			json_object_set_new(
			    own, jstr(e, "peer"),
			    json_pack("{s:f, s:f, s:f, s:f}", "in", jnum(e, "bytes_in"), "out",
				      jnum(e, "bytes_out"), "t_in",
				      jnum(e, "bytes_in") > 0 ? jnum(e, "last_ms") : -1.0, "t_out",
				      jnum(e, "bytes_in") > 0 ? -1.0 : jnum(e, "last_ms")));
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
		} else if (dl && jnum(h, "in") > 0 && t_in >= 0 && t_in <= since_ms + 1500 &&
			   now_ms - t_in >= WAIT_MIN_MS && t_in >= jnum(dl, "first_ms") - 1500) {
			char name[300];

			progress_download_name(root, jstr(dl, "path"), jnum(dl, "first_ms"), name,
					       sizeof(name));
			fmt_bytes(b, sizeof(b), jnum(h, "in"));
			waiting_add(
			    list,
			    json_pack("{s:s, s:s, s:s, s:f, s:f}", "kind", "download-stalled",
				      "peer", key, "path", jstr(dl, "path"), "bytes_in",
				      jnum(h, "in"), "seconds", (now_ms - t_in) / 1000),
			    "reading from %s, which has sent nothing for %.0f s, while "
			    "downloading %s (%s received from it in all; HF_HUB_DOWNLOAD_TIMEOUT "
			    "ends the wait)",
			    key, (now_ms - t_in) / 1000, name, b);
		}
	}
	json_decref(own);

	/* 4. the same missing path tried again while nothing else moved */
	json_array_foreach (json_object_get(root, "missing_paths"), i, e) {
		const char *path = jstr(e, "path");
		double attempts = jnum(e, "attempts");

		if (!path || diagnose_benign_missing(path, jstr(e, "class")) || attempts < 2 ||
		    jnum(e, "last_ms") < since_ms)
			continue;
		waiting_add(
		    list,
		    json_pack("{s:s, s:s, s:f, s:s?, s:f}", "kind", "missing-path", "path", path,
			      "attempts", attempts, "errno", jstr(e, "errno"), "seconds",
			      (jnum(e, "last_ms") - jnum(e, "first_ms")) / 1000),
		    "sleeping between retries of the missing path %s: %.0f attempts over %.0f s "
		    "(%s), the last %.0f s ago",
		    path, attempts, (jnum(e, "last_ms") - jnum(e, "first_ms")) / 1000,
		    jstr(e, "errno") ? jstr(e, "errno") : "failed",
		    (now_ms - jnum(e, "last_ms")) / 1000);
	}
	if (!json_array_size(list))
		waiting_add(
		    list, json_pack("{s:s}", "kind", "unknown"),
		    "nothing the trace sees is moving (no file I/O, network data, new files "
		    "or processes): busy computing, or waiting on something not traced");
	return list;
}
