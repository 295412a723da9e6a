/* stall: what a start-up that stopped progressing waits on (stall.h),
 * read from the timeline model alone, through its typed views: a connect still pending, a lock, a
 * peer that does not answer or stopped sending, a missing path tried again.
 * The live display (progress.c) decides when the start is stalled and says
 * this; the kinds and messages are documented in docs/diagnose.md ("While
 * it starts"). */
#include "stall.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "attrib_live.h"
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

/* ---- connections waiting for an answer ---- */

/* a TLS connection that read no more than this after its first request read
 * its handshake's session tickets, no answer (TLS 1.3: up to ~600 bytes) */
#define TLS_UNASKED_MAX 640.0

bool stall_conn_answered(const struct tl_connect *c)
{
	return c->tls ? tl_or0(c->reply_max) > TLS_UNASKED_MAX : tl_or0(c->bytes_in) > 0;
}

static bool counted(const struct tl_connect *c)
{
	return tl_has(c->bytes_out) && tl_has(c->bytes_in) && tl_has(c->established_ms);
}

/* it asked something: a plain connection wrote, a TLS one wrote more than
 * its hello and finished */
static bool asked(const struct tl_connect *c)
{
	double w = tl_has(c->writes) ? c->writes : (c->bytes_out > 0 ? 1 : 0);

	return counted(c) && (c->tls ? w >= 3 : w >= 1);
}

int stall_conn_unanswered(const struct tl_connect *c)
{
	double w;

	if (!asked(c))
		return -1;
	w = tl_has(c->writes) ? c->writes : 1;
	if (c->tls) {
		/* reply_max: the most read after one write, from the second
		 * write on; with one request, the answer to it so far */
		if (w == 3)
			return stall_conn_answered(c) ? 0 : 1;
		return -1;
	}
	if (w <= 1)
		return c->bytes_in > 0 ? 0 : 1;
	/* nothing read after any write from the second on: the last too */
	return tl_or0(c->reply_max) == 0 ? 1 : -1;
}

double stall_conn_answer_bytes(const struct tl_connect *c)
{
	if (!counted(c))
		return 0;
	if (c->tls && (!asked(c) || !stall_conn_answered(c)))
		return 0;
	return c->bytes_in;
}

void stall_conn_key(const struct tl_connect *c, char *out, size_t len)
{
	snprintf(out, len, "%d %.3f %s", (int)tl_or0(c->pid), tl_or0(c->start_ms),
		 c->peer ? c->peer : "?");
}

/* a peer with per-connection counts in the model */
static bool conn_counted(const struct tl_view *v, const char *peer)
{
	for (size_t i = 0; i < v->n_connects; i++)
		if (v->connects[i].peer && !strcmp(v->connects[i].peer, peer) &&
		    counted(&v->connects[i]))
			return true;
	return false;
}

/* "huggingface.co:443" when the name is known, else the address */
static const char *peer_label(const struct tl_view *v, const char *peer)
{
	for (size_t i = 0; i < v->n_network; i++)
		if (v->network[i].peer && !strcmp(v->network[i].peer, peer) &&
		    v->network[i].label[0])
			return v->network[i].label;
	return peer;
}

static const char *peer_role(const struct tl_view *v, const char *peer)
{
	for (size_t i = 0; i < v->n_network; i++)
		if (v->network[i].peer && !strcmp(v->network[i].peer, peer))
			return v->network[i].role;
	return NULL;
}

/* what ends each attempt's wait, for the client the peer serves */
static const char *timeout_hint(const struct tl_view *v, const char *peer,
				const struct stall_download *dl)
{
	const char *role = peer_role(v, peer);

	if (role && !strcmp(role, "cas"))
		return "it accepted the connection and sent nothing back; xet-core has no read "
		       "timeout: HF_HUB_DISABLE_XET=1 downloads over plain HTTP, which times out";
	if (dl && dl->path)
		return "it accepted the connection and sent nothing back; each attempt waits "
		       "HF_HUB_DOWNLOAD_TIMEOUT";
	return "it accepted the connection and sent nothing back; each metadata request waits "
	       "HF_HUB_ETAG_TIMEOUT";
}

static const char *ordinal(int n)
{
	int t = n % 100;

	if (t >= 11 && t <= 13)
		return "th";
	return n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
}

/* Attempts on peer up to connection last (its index): the connections to it
 * that asked and got no answer, counted back to one that was answered;
 * connections that asked nothing (a reachability probe, a bare handshake)
 * neither count nor end the count. *first: the index of the first. */
static int attempts(const struct tl_view *v, size_t last, size_t *first)
{
	const char *peer = v->connects[last].peer;
	int n = 1;

	*first = last;
	for (size_t i = last; i-- > 0;) {
		const struct tl_connect *c = &v->connects[i];

		if (!c->peer || strcmp(c->peer, peer) || !asked(c))
			continue;
		if (stall_conn_unanswered(c) != 1)
			break;
		n++;
		*first = i;
		/* a reused connection whose first request was answered */
		if (!c->tls && tl_or0(c->writes) >= 2 && c->bytes_in > 0)
			break;
	}
	return n;
}

/* when the request on c was last written: when a sample saw its bytes out
 * grow, else (one request, seen at once) when the connection was made */
static double asked_at(const struct tl_connect *c, const json_t *conns)
{
	char k[320];
	const json_t *seen;
	double t;

	stall_conn_key(c, k, sizeof(k));
	seen = conns ? json_object_get(conns, k) : NULL;
	t = seen && jnum(seen, "t_out") >= 0 ? jnum(seen, "t_out") : c->established_ms;
	return t < c->established_ms ? c->established_ms : t;
}

/* Peers whose newest connection asked and has no answer: still open (the
 * service blocked in recv), or closed unanswered since the last progress
 * (between two attempts of a retry loop), for WAIT_MIN_MS or more since
 * the first unanswered attempt. One message per peer: the wait since that
 * attempt and the attempts so far. Returns the peers said, {PEER: true}.
 * conns: {KEY: {in, out, t_in, t_out}} from earlier samples (progress.c),
 * which tell a reused connection's new request. */
static json_t *waiting_connections(const struct tl_view *v, const json_t *conns,
				   const struct stall_download *dl, json_t *list, double since_ms,
				   double now_ms)
{
	json_t *said = json_object(), *newest = json_object(), *h;
	const char *key;

	for (size_t i = 0; i < v->n_connects; i++)
		if (v->connects[i].peer && asked(&v->connects[i]))
			json_object_set_new(newest, v->connects[i].peer,
					    json_integer((json_int_t)i));
	json_object_foreach (newest, key, h) {
		size_t i = (size_t)json_integer_value(h), first;
		const struct tl_connect *c = &v->connects[i];
		int u = stall_conn_unanswered(c), n;
		const json_t *seen = NULL;
		const char *label;
		char k[320];
		double s;
		bool open = !tl_has(c->closed_ms);

		stall_conn_key(c, k, sizeof(k));
		if (conns)
			seen = json_object_get(conns, k);
		if (open &&
		    !(u == 1 || (u == -1 && seen && jnum(seen, "t_out") > jnum(seen, "t_in"))))
			continue;
		if (!open && (u != 1 || c->closed_ms < since_ms - 1500))
			continue;
		n = attempts(v, i, &first);
		s = (now_ms - asked_at(&v->connects[first], conns)) / 1000;
		if (s * 1000 < WAIT_MIN_MS)
			continue;
		label = peer_label(v, key);
		waiting_add(
		    list,
		    json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:i, s:b, s:f, s:f, s:i}", "kind",
			      "peer-silent", "peer", key, "label", label, "host", c->host, "role",
			      peer_role(v, key), "attempt", n, "open", open, "seconds", s,
			      "bytes_out", tl_or0(c->bytes_out), "pid", (int)tl_or0(c->pid)),
		    "waiting %.0f s for an answer from %s, %d%s attempt%s (%s)", s, label, n,
		    ordinal(n), open ? "" : " (it closed the last one unanswered: retrying)",
		    timeout_hint(v, key, dl));
		json_object_set_new(said, key, json_true());
	}
	json_decref(newest);
	return said;
}

/* ---- the critical thread, from the attribution's live model ---- */

/* The newest connection to peer that asked something, and the attempts on
 * it so far (attempts()); 0 when the model has none. */
static int peer_attempts(const struct tl_view *v, const char *peer)
{
	size_t first;

	for (size_t i = v->n_connects; peer[0] && i-- > 0;)
		if (v->connects[i].peer && !strcmp(v->connects[i].peer, peer) &&
		    asked(&v->connects[i]))
			return stall_conn_unanswered(&v->connects[i]) == 1 ? attempts(v, i, &first)
									   : 0;
	return 0;
}

/* what the chain's last thread is doing, into buf: "blocked for 32 s in
 * poll on hf.co:443 (the 2nd attempt on it)" */
static void live_state(const struct tl_view *v, const struct attr_live_hop *h, double s,
		       int *attempt, char *buf, size_t len)
{
	const char *call = h->call[0] ? h->call : "a wait";
	/* a peer by the name the other stall lines use */
	const char *what = h->peer[0] ? peer_label(v, h->peer) : h->what;
	char py[128] = "";

	if (h->py[0] && strcmp(h->py, h->what))
		snprintf(py, sizeof(py), ", in %s", h->py);
	*attempt = 0;
	if (h->state == LIVE_CPU) {
		snprintf(buf, len,
			 "on a CPU for %.0f s without waiting for anything%s%s: busy computing", s,
			 h->what[0] ? ", in " : "", h->what);
		return;
	}
	if (h->state == LIVE_RUNNABLE) {
		snprintf(buf, len, "runnable for %.0f s but waiting for a CPU (CPU contention)", s);
		return;
	}
	switch (h->kind) {
	case AK_NET:
		*attempt = peer_attempts(v, h->peer);
		if (*attempt)
			snprintf(buf, len,
				 "blocked for %.0f s in %s on %s (the %d%s attempt on it)%s", s,
				 call, what, *attempt, ordinal(*attempt), py);
		else
			snprintf(buf, len, "blocked for %.0f s in %s on %s%s", s, call, what, py);
		break;
	case AK_DISK:
		snprintf(buf, len, "blocked for %.0f s in %s on %s (disk I/O)%s", s, call, h->what,
			 py);
		break;
	case AK_FAULT:
		snprintf(buf, len, "blocked for %.0f s in a page fault on %s (disk I/O)%s", s,
			 h->what, py);
		break;
	case AK_SLEEP:
		snprintf(buf, len, "sleeping for %.0f s in %s", s, h->py[0] ? h->py : call);
		break;
	case AK_LOCK:
		if (!strcmp(h->what, "futex"))
			snprintf(
			    buf, len,
			    "waiting for %.0f s on a futex (a lock, a join or a queue of another "
			    "thread)%s",
			    s, py);
		else
			snprintf(
			    buf, len,
			    "waiting for %.0f s in %s for the lock %s: another process holds it%s",
			    s, call, h->what, py);
		break;
	default:
		snprintf(buf, len, "blocked for %.0f s in %s (%s)%s", s, call, h->what, py);
	}
}

/* a state that says on what the thread waits (a socket, a file, a lock
 * file, a child); the others (on CPU, runnable, a sleep, a futex no thread
 * of its process explains) only when nothing else is known: a retry
 * back-off's sleep comes between the attempts the other lines count */
static bool live_says(const struct attr_live *l)
{
	const struct attr_live_hop *h = &l->hop[l->n_hops - 1];

	for (int i = 0; i + 1 < l->n_hops; i++)
		if (l->hop[i].kind == AK_CHILD)
			return true; /* waiting for a child: what the child does */
	return h->state == LIVE_BLOCKED && !(h->kind == AK_LOCK && !strcmp(h->what, "futex")) &&
	       h->kind != AK_OTHER && h->kind != AK_SLEEP;
}

/* the peer-silent line said of peer, or NULL */
static json_t *said_of(json_t *list, const char *peer)
{
	size_t i;
	json_t *w;

	json_array_foreach (list, i, w)
		if (!strcmp(jstr(w, "kind") ?: "", "peer-silent") &&
		    !strcmp(jstr(w, "peer") ?: "", peer))
			return w;
	return NULL;
}

/* What the critical thread (the root's main thread, through the children
 * it waits for, and the thread of its own it waits on) is doing now, when
 * it has for WAIT_MIN_MS (attrib_live.h): said first when it says on what
 * it waits (live_says), else (last_resort) only in place of "unknown".
 * Nothing without a fresh live model. */
static void critical_wait(const struct tl_view *v, json_t *list, double now_ms, bool last_resort)
{
	json_t *item, *said;
	const struct attr_live *l = attr_live_now();
	const struct attr_live_hop *h;
	char chain[640], state[640];
	size_t off;
	double s;
	int attempt;

	if (!l->valid || l->n_hops < 1 || fabs(now_ms - l->at_ms) > 10000)
		return;
	h = &l->hop[l->n_hops - 1];
	s = (now_ms - h->since_ms) / 1000;
	if (s * 1000 < WAIT_MIN_MS || live_says(l) == last_resort)
		return;
	off = (size_t)snprintf(chain, sizeof(chain), "the main thread of %s (pid %d)",
			       l->hop[0].comm, l->hop[0].pid);
	for (int i = 1; i < l->n_hops && off < sizeof(chain); i++) {
		const struct attr_live_hop *g = &l->hop[i];

		if (g->pid == l->hop[i - 1].pid)
			off += (size_t)snprintf(chain + off, sizeof(chain) - off,
						" waits on its thread %d, which", g->tid);
		else
			off += (size_t)snprintf(chain + off, sizeof(chain) - off,
						" waits for its child %s (pid %d), whose main "
						"thread",
						g->comm, g->pid);
	}
	live_state(v, h, s, &attempt, state, sizeof(state));
	item = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:f, s:s?, s:s?, s:i}", "kind",
			 "blocked", "state",
			 h->state == LIVE_CPU	     ? "cpu"
			 : h->state == LIVE_RUNNABLE ? "runqueue"
						     : attr_kind_name(h->kind),
			 "what", h->what, "comm", h->comm, "pid", h->pid, "tid", h->tid, "call",
			 h->call, "seconds", s, "peer", h->peer[0] ? h->peer : NULL, "label",
			 h->peer[0] ? peer_label(v, h->peer) : NULL, "attempt", attempt);
	/* a peer another line says (its attempts, what ends them): one line,
	 * that one, saying that the critical thread is blocked on it */
	said = h->peer[0] && h->state == LIVE_BLOCKED ? said_of(list, h->peer) : NULL;
	if (said) {
		char msg[1536];

		snprintf(msg, sizeof(msg), "%s; %s is blocked in %s on it for %.0f s%s%s",
			 jstr(said, "message") ?: "", chain, h->call[0] ? h->call : "a wait", s,
			 h->py[0] ? ", in " : "", h->py);
		json_object_set_new(said, "message", json_text(msg));
		json_object_set_new(said, "blocked", item);
		return;
	}
	waiting_add(list, item, "%s is %s", chain, state);
	/* first: the critical thread's own wait */
	if (!last_resort && json_array_size(list) > 1) {
		json_t *w = json_incref(json_array_get(list, json_array_size(list) - 1));

		json_array_remove(list, json_array_size(list) - 1);
		json_array_insert_new(list, 0, w);
	}
}

json_t *stall_waiting_on(const struct tl_view *v, const json_t *peers, const json_t *conns,
			 const struct stall_download *dl, double since_ms, double now_ms)
{
	json_t *list = json_array(), *own = NULL, *pending = json_object(), *h, *silent;
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
		snprintf(k, sizeof(k), "%d %d", (int)tl_or0(e->pid),
			 tl_small(tl_or0(e->port), 65535));
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

	/* 3. a connection whose last request has no answer (the service
	 * blocked in recv on it), with the attempts made on that peer; else a
	 * peer that was sent something and has not answered, or a download
	 * whose data stopped coming */
	silent = waiting_connections(v, conns, dl, list, since_ms, now_ms);
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

		/* said above, from its connection */
		if (json_object_get(silent, key))
			continue;
		/* sent last and nothing back since, however long ago: other work
		 * (page faults, a thread) may have moved after the send; only
		 * where the model has no per-connection counts (UDP, older
		 * timelines): a TLS handshake would pass for an answer */
		if (jnum(h, "out") > 0 && t_out > t_in && now_ms - t_out >= WAIT_MIN_MS &&
		    !conn_counted(v, key)) {
			waiting_add(
			    list,
			    json_pack("{s:s, s:s, s:s, s:i, s:f, s:f, s:f}", "kind", "peer-silent",
				      "peer", key, "label", peer_label(v, key), "attempt", 1,
				      "bytes_out", jnum(h, "out"), "bytes_in", jnum(h, "in"),
				      "seconds", (now_ms - t_out) / 1000),
			    "waiting %.0f s for an answer from %s, 1st attempt (%s)",
			    (now_ms - t_out) / 1000, peer_label(v, key), timeout_hint(v, key, dl));
		} else if (dl && dl->path && jnum(h, "in") > 0 && t_in >= 0 &&
			   t_in <= since_ms + 1500 && now_ms - t_in >= WAIT_MIN_MS &&
			   t_in >= dl->first_ms - 1500) {
			fmt_bytes(b, sizeof(b), jnum(h, "in"));
			waiting_add(
			    list,
			    json_pack("{s:s, s:s, s:s, s:s, s:f, s:f}", "kind", "download-stalled",
				      "peer", key, "label", peer_label(v, key), "path", dl->path,
				      "bytes_in", jnum(h, "in"), "seconds", (now_ms - t_in) / 1000),
			    "reading from %s, which has sent nothing for %.0f s, while "
			    "downloading %s (%s received from it in all; HF_HUB_DOWNLOAD_TIMEOUT "
			    "ends the wait)",
			    peer_label(v, key), (now_ms - t_in) / 1000,
			    dl->name ? dl->name : base_name(dl->path), b);
		}
	}
	json_decref(own);
	json_decref(silent);
	/* the critical thread's own wait, from the attribution's model: first */
	critical_wait(v, list, now_ms, false);

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
		critical_wait(v, list, now_ms, true);
	if (!json_array_size(list))
		waiting_add(
		    list, json_pack("{s:s}", "kind", "unknown"),
		    "nothing the trace sees is moving (no file I/O, network data, new files "
		    "or processes): busy computing, or waiting on something not traced");
	return list;
}
