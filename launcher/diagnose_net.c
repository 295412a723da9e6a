/* diagnose_net: the network rules of --check-download (docs/diagnose.md):
 * name resolution, a download server that cannot be reached (only peers
 * whose role is hub, cas, modelscope or mirror: timeline_net.c gives each
 * peer its role), IndexTTS2's reachability probe that sent it to ModelScope,
 * a Xet transfer that hangs, a mirror in HF_ENDPOINT that Xet goes around,
 * and ModelScope or hf-mirror downloads that fail. Peers are named by host
 * when the trace saw the name. Rows at the end; the engine is diagnose.c. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose_rules.h"
#include "hfcache.h"
#include "stall.h"
#include "util.h"

/* Thresholds (docs/diagnose.md explains each). */
#define DROP_MIN_GAP_MS 500.0
#define XET_IDLE_MS	5000.0 /* a CAS peer silent this long with a download unfinished */
#define SLOW_PEER_BPS	(256.0 * 1024.0) /* ModelScope/hf-mirror below this: slow */
#define SLOW_PEER_MS	5000.0		 /* ... over at least this long */
/* ---- peers: roles and names ---- */

/* The peer a download server: hub, cas, modelscope, mirror. A timeline
 * older than roles (no role) counts every peer, as it did. */
static bool server_role(const char *role)
{
	return !role || !strcmp(role, "hub") || !strcmp(role, "cas") ||
	       !strcmp(role, "modelscope") || !strcmp(role, "mirror");
}

static bool role_is(const struct tl_peer *net, const char *role)
{
	return net && net->role && !strcmp(net->role, role);
}

/* A figure of a peer (NULL: none): 0 when absent. */
#define NET(net, field) ((net) ? tl_or0((net)->field) : 0)

/* "host:port" when the trace saw the peer's name, else its address */
static const char *peer_label(const struct tl_peer *net, const char *peer, char *buf, size_t len)
{
	if (!net || !net->host || !tl_has(net->port))
		return peer;
	snprintf(buf, len, "%s:%lld", net->host, (long long)net->port);
	return buf;
}

/* Bytes the peers of one role received from (in) the service's side. */
static double role_bytes_in(const struct diag_ctx *c, const char *role)
{
	double in = 0;

	for (size_t i = 0; i < c->view->n_network; i++)
		if (role_is(&c->view->network[i], role))
			in += tl_or0(c->view->network[i].bytes_in);
	return in;
}

/* Every needed file came from the cache: nothing downloaded, snapshots read. */
static bool all_cached(struct diag_ctx *c)
{
	int snaps = 0;

	for (size_t i = 0; i < c->view->n_files; i++) {
		const struct tl_file *f = &c->view->files[i];

		if (!f->path)
			continue;
		if (c->n_dls)
			return false;
		if (hf_in_snapshots(f->path) && tl_or0(f->opens) > 0)
			snaps++;
	}
	return snaps > 0 && c->ready >= 0;
}

/* [env] NAME of the run (as recorded), or NULL */
static const char *run_env(const struct diag_ctx *c, const char *name)
{
	return tl_view_env(c->view, name);
}

/* A connect's ret (0 when absent) and result. */
static long long connect_ret(const struct tl_connect *e) { return (long long)tl_or0(e->ret); }

static bool result_is(const struct tl_connect *e, const char *result)
{
	return e->result && !strcmp(e->result, result);
}

static bool peer_is(const struct tl_connect *e, const char *peer)
{
	return e->peer && !strcmp(e->peer, peer);
}

/* A connect that failed: refused, timed out, unreachable (a connect the
 * caller gave up on, closed while the handshake waited, is one too). */
static bool connect_failed(const struct tl_connect *e)
{
	long long ret = connect_ret(e);

	if (result_is(e, "closed-by-caller"))
		return true;
	return ret < 0 && ret != -EINPROGRESS;
}

static const char *connect_error(const struct tl_connect *e)
{
	long long ret = connect_ret(e);
	const char *n = ret < 0 ? strerrorname_np((int)-ret) : NULL;

	if (!n && result_is(e, "closed-by-caller"))
		return "ETIMEDOUT"; /* the caller's timeout ran out first */
	return n ? n : "?";
}

/* ---- IndexTTS2's reachability probe ---- */

/* need_proxy() (INDEXTTS2.md): a bare connect to huggingface.co:443 and
 * modelscope.cn:443, closed at once, 0 bytes, by design; a hub probe that
 * failed while ModelScope then carried the downloads is the switch. true
 * when that happened (report: as a finding of the running rule);
 * hub-unreachable leaves the hub to it. */
static bool hub_probe_failed(struct diag_ctx *c, bool report)
{
	const struct tl_peer *net;
	size_t i;
	int fails = 0;
	const char *peer = NULL, *err = NULL;
	double ms_in = role_bytes_in(c, "modelscope"), wait = 0;
	char buf[300];

	for (i = 0; i < c->view->n_connects; i++) {
		const struct tl_connect *e = &c->view->connects[i];

		net = tl_view_peer(c->view, e->peer ?: "");
		if (!role_is(net, "hub"))
			continue;
		if (!connect_failed(e))
			return false; /* the hub was reached */
		fails++;
		peer = e->peer;
		err = connect_error(e);
		wait += tl_or0(e->ms_to_result) > 0 ? e->ms_to_result : tl_or0(e->dur_ms);
	}
	if (!fails || ms_in <= 0 || run_env(c, "USE_MODELSCOPE"))
		return false;
	if (!report)
		return true;
	net = tl_view_peer(c->view, peer);
	peer_label(net, peer, buf, sizeof(buf));
	diag_add(c, DIAG_WARNING, "hub unreachable: switched to ModelScope",
		 json_pack("{s:s, s:s?, s:i, s:s, s:f, s:f}", "peer", peer, "host",
			   net ? net->host : NULL, "attempts", fails, "error", err, "wait_ms",
			   diag_round3(wait), "modelscope_bytes_in", ms_in),
		 wait / 1000,
		 "if huggingface.co is blocked here for good, set USE_MODELSCOPE=true ([env] "
		 "USE_MODELSCOPE = true in tts-launch.ini): IndexTTS2 then skips the 3 s probe; "
		 "else make it reachable (firewall, proxy: HTTPS_PROXY)",
		 "%s unreachable (%s): IndexTTS2 switched to ModelScope; USE_MODELSCOPE=true skips "
		 "the 3 s probe",
		 (net ? net->host : NULL) ?: buf, err);
	return true;
}

static void rule_hub_probe(struct diag_ctx *c) { hub_probe_failed(c, true); }

/* ---- hub-unreachable ---- */

/* The peer answered: a TLS connection to it (the hello seen) replied more
 * than its handshake's tickets to one request (stall_conn_answered), or a
 * plain one sent a byte; a timeline without per-connection replies (older,
 * or only failed connects): any byte from the peer. TLS connections that
 * asked nothing (handshake, close) are counted in *asked_nothing and
 * judged neither way; a peer with only those is not unreachable. */
static bool peer_answered(const struct diag_ctx *c, const char *peer, const struct tl_peer *net,
			  int *asked_nothing)
{
	bool known = false;

	for (size_t i = 0; i < c->view->n_connects; i++) {
		const struct tl_connect *e = &c->view->connects[i];

		if (!peer_is(e, peer) || !tl_has(e->reply_max))
			continue;
		/* a TLS handshake and no request (hello, finished): asked nothing */
		if (e->tls && tl_has(e->writes) && e->writes <= 2) {
			*asked_nothing += 1;
			continue;
		}
		known = true;
		if (stall_conn_answered(e))
			return true;
	}
	return !known && (*asked_nothing > 0 || NET(net, bytes_in) > 0);
}

static bool xet_stalled(const struct diag_ctx *c, const struct tl_peer *net, double *idle,
			int *inflight);
static int unfinished(const struct diag_ctx *c, double *idle);

/* The connects of one peer, in the model's order; groups in the order
 * their peers first appear. */
struct attempts {
	const char *peer;
	const size_t *idx; /* indices into connects[] */
	size_t n;
};

static int by_peer(const void *a, const void *b, void *arg)
{
	const struct tl_connect *cs = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int r = strcmp(cs[x].peer, cs[y].peer);

	return r ? r : (x > y) - (x < y);
}

static int by_first(const void *a, const void *b)
{
	const struct attempts *x = a, *y = b;

	return (x->idx[0] > y->idx[0]) - (x->idx[0] < y->idx[0]);
}

/* idx[m]: connects with a peer; sorted in place, and cut into *out (to
 * free); how many groups, -1 when out of memory. Sorting: linear-log on
 * any input, not a scan per peer. */
static ssize_t group_attempts(const struct tl_view *v, size_t *idx, size_t m, struct attempts **out)
{
	struct attempts *g = calloc(m ? m : 1, sizeof(*g));
	size_t n = 0;

	*out = g;
	if (!g)
		return -1;
	qsort_r(idx, m, sizeof(*idx), by_peer, (void *)v->connects);
	for (size_t k = 0; k < m; k++) {
		if (!n || strcmp(g[n - 1].peer, v->connects[idx[k]].peer))
			g[n++] = (struct attempts){v->connects[idx[k]].peer, &idx[k], 0};
		g[n - 1].n++;
	}
	qsort(g, n, sizeof(*g), by_first);
	return (ssize_t)n;
}

/* the start time of the k-th attempt of group g */
#define START(k) tl_or0(c->view->connects[g->idx[k]].start_ms)

static void rule_hub_unreachable(struct diag_ctx *c)
{
	struct attempts *groups = NULL;
	size_t *idx = calloc(c->view->n_connects ? c->view->n_connects : 1, sizeof(*idx)), m = 0;
	ssize_t n_groups;
	bool cached = all_cached(c), switched = hub_probe_failed(c, false);
	const char *off = run_env(c, "HF_HUB_DISABLE_XET");
	bool xet = !(off && strcmp(off, "0") && strcasecmp(off, "false"));
	double idle;
	/* a download was under way (a file being written, or resumed): its
	 * GET waits HF_HUB_DOWNLOAD_TIMEOUT, not the metadata's ETag timeout */
	bool downloading = c->n_dls > 0 || unfinished(c, &idle) > 0;
	size_t i;

	if (!idx)
		return;
	/* connection attempts by peer (TCP/UDP over IP, not DNS), download
	 * servers only: an analytics host or a discard port is not the hub */
	for (i = 0; i < c->view->n_connects; i++) {
		const struct tl_connect *e = &c->view->connects[i];
		int port = tl_small(tl_or0(e->port), 65535);
		int fam = tl_small(tl_or0(e->family), 255);
		const char *p = e->peer;
		const struct tl_peer *net;

		if (!p || port == 0 || port == 53 || fam == 1)
			continue;
		net = tl_view_peer(c->view, p);
		if (!server_role(net ? net->role : NULL) || (switched && role_is(net, "hub")))
			continue;
		idx[m++] = i;
	}
	n_groups = group_attempts(c->view, idx, m, &groups);
	for (ssize_t gi = 0; gi < n_groups; gi++) {
		const struct attempts *g = &groups[gi];
		const char *peer = g->peer, *first_error = NULL;
		const struct tl_peer *net;
		size_t cnt = g->n, nerr = 0, connected = 0;
		double in = 0, out = 0, lost = -1, median = 0, *gaps;
		json_t *errors;
		const char *how, *why, *role, *name;
		bool how_tls = false;
		bool hub = c->ep_peer[0] && !strcmp(peer, c->ep_peer);
		char fix[1024], label[400], lost_txt[64] = "", nb[300];
		int sev;

		for (size_t k = 0; k < cnt; k++) {
			const struct tl_connect *e = &c->view->connects[g->idx[k]];

			if (connect_failed(e)) {
				if (!nerr++)
					first_error = connect_error(e);
			} else if (connect_ret(e) == 0 || result_is(e, "connected")) {
				connected++;
			}
		}
		net = tl_view_peer(c->view, peer);
		in = NET(net, bytes_in);
		out = NET(net, bytes_out);
		role = net ? net->role : NULL;
		name = peer_label(net, peer, nb, sizeof(nb));
		{
			int asked_nothing = 0;

			if (peer_answered(c, peer, net, &asked_nothing))
				continue;
		}
		{
			double idle;
			int inflight;

			if (net && xet_stalled(c, net, &idle, &inflight))
				continue; /* a Xet hang: xet-stalled says it */
		}
		/* every connect succeeded and nothing was sent: a reachability
		 * probe (connect, close), by design, not a failure */
		if (!nerr && out <= 0 && connected > 0)
			continue;
		/* its only bytes: TLS handshakes */
		if (in > 0 && !nerr)
			how_tls = true;

		/* each attempt waits until the next one starts: the gaps are the
		 * time lost; the last attempt's wait is taken as the median */
		gaps = calloc(cnt ? cnt : 1, sizeof(*gaps));
		if (!gaps)
			continue;
		for (size_t k = 1; k < cnt; k++)
			gaps[k - 1] = START(k) - START(k - 1);
		if (cnt >= 2) {
			double sum = 0;

			for (size_t k = 0; k + 1 < cnt; k++)
				sum += gaps[k];
			qsort(gaps, cnt - 1, sizeof(*gaps), diag_cmp_double);
			median = gaps[(cnt - 1) / 2];
			lost = (sum + median) / 1000;
		} else if (cnt == 1 && c->ready < 0) {
			lost = (c->end - START(0)) / 1000;
		}
		free(gaps);

		if (nerr) {
			how = first_error;
			why = "connect failed";
		} else if (out <= 0) {
			how = "no connection";
			why = "no connection was established (refused or unreachable)";
		} else if (median >= DROP_MIN_GAP_MS || cnt == 1) {
			how = "silently dropped";
			why = how_tls
				  ? "the TLS handshake completed, requests were sent and no answer "
				    "came back: each one waited for its timeout"
				  : "requests were sent but nothing came back: each one waited for "
				    "its "
				    "timeout";
		} else {
			how = "reset";
			why = "requests were sent and the connection was closed without an answer";
		}
		snprintf(label, sizeof(label), "%s%s%s%s", hub ? "the model hub " : "", name,
			 hub ? " (HF_ENDPOINT=" : "", hub ? c->endpoint : "");
		if (hub)
			strcat(label, ")");
		if (cached)
			snprintf(
			    fix, sizeof(fix),
			    "every file the service needed was already in the cache: start with "
			    "HF_HUB_OFFLINE=1 ([env] HF_HUB_OFFLINE = 1 in tts-launch.ini) so it "
			    "does not ask the hub; or set HF_ENDPOINT to a reachable mirror");
		else if (role && !strcmp(role, "cas") && xet)
			snprintf(fix, sizeof(fix),
				 "make %s reachable (firewall, proxy: HTTPS_PROXY); Xet transfers "
				 "have no timeout: HF_HUB_DISABLE_XET=1 downloads over plain HTTP "
				 "from the hub instead",
				 name);
		else if (role && !strcmp(role, "modelscope"))
			snprintf(fix, sizeof(fix),
				 "make %s reachable (firewall, proxy: HTTPS_PROXY), or set "
				 "USE_MODELSCOPE=false so IndexTTS2 downloads from huggingface.co",
				 name);
		else
			snprintf(
			    fix, sizeof(fix),
			    "make %s reachable (firewall, proxy: HTTPS_PROXY), or set HF_ENDPOINT "
			    "to a reachable mirror; with every model already downloaded, "
			    "HF_HUB_OFFLINE=1 skips the hub; %s",
			    name,
			    downloading
				? "a download (a resumed one too) waits "
				  "HF_HUB_DOWNLOAD_TIMEOUT for each answer: a lower one fails "
				  "sooner"
				: "a lower HF_HUB_ETAG_TIMEOUT shortens each wait");
		if (lost >= 0)
			snprintf(lost_txt, sizeof(lost_txt), "; about %.1f s lost", lost);
		sev = c->failed || c->ready < 0 ? DIAG_ERROR : DIAG_WARNING;
		errors = json_array();
		for (size_t k = 0; k < cnt; k++)
			if (connect_failed(&c->view->connects[g->idx[k]]))
				json_array_append_new(errors, json_string(connect_error(
								  &c->view->connects[g->idx[k]])));
		diag_add(
		    c, sev, "model hub unreachable",
		    json_pack("{s:s, s:s?, s:s?, s:b, s:s?, s:i, s:s, s:o, s:f, s:f, s:f, s:b}",
			      "peer", peer, "host", net ? net->host : NULL, "role", role, "hub",
			      hub, "endpoint", c->endpoint, "attempts", (int)cnt, "outcome", how,
			      "errors", errors, "bytes_out", out, "bytes_in", in,
			      "seconds_per_attempt", diag_round3(median / 1000), "all_cached",
			      cached),
		    lost, fix, "%s: %zu connection attempt%s, %s (%s)%s", label, cnt,
		    cnt == 1 ? "" : "s", how, why, lost_txt);
	}
	free(groups);
	free(idx);
}

/* ---- name resolution ---- */

/* The endpoint's host is a name (not an IPv4/IPv6 literal). */
static bool endpoint_is_name(const struct diag_ctx *c, char *host, size_t len)
{
	const char *colon = strrchr(c->ep_peer, ':');
	size_t n = colon ? (size_t)(colon - c->ep_peer) : strlen(c->ep_peer);

	snprintf(host, len, "%.*s", (int)n, c->ep_peer);
	return *host && host[0] != '[' && strspn(host, "0123456789.") != strlen(host);
}

static void rule_dns(struct diag_ctx *c)
{
	json_t *servers = json_array(), *seen = json_object(); /* seen: a set, linear */
	size_t i;
	int queries = 0, fails = 0, ep_port = 0, ep_connects = 0;
	double a = -1, b = -1;
	char host[300];
	bool name = c->ep_peer[0] && endpoint_is_name(c, host, sizeof(host));

	if (name)
		ep_port = atoi(strrchr(c->ep_peer, ':') + 1);
	for (i = 0; i < c->view->n_connects; i++) {
		const struct tl_connect *e = &c->view->connects[i];
		long long ret = connect_ret(e);
		int port = tl_small(tl_or0(e->port), 65535);
		int fam = tl_small(tl_or0(e->family), 255);

		if (port == ep_port && fam != 1)
			ep_connects++;
		if (port != 53)
			continue;
		queries++;
		if (ret < 0 && ret != -EINPROGRESS)
			fails++;
		if (a < 0)
			a = tl_or0(e->start_ms);
		b = tl_or0(e->start_ms);
		if (!e->peer)
			continue; /* a hand-edited or foreign timeline */
		if (!json_object_get(seen, e->peer)) {
			json_object_set_new(seen, e->peer, json_true());
			json_array_append_new(servers, json_pack("s", e->peer));
		}
	}
	json_decref(seen);
	/* a name server that cannot be reached, or a hub name that was looked
	 * up and never connected to: the look-up failed */
	if (!fails && !(name && queries && !ep_connects)) {
		json_decref(servers);
		return;
	}
	diag_add(c, c->failed || c->ready < 0 ? DIAG_ERROR : DIAG_WARNING, "name resolution failed",
		 json_pack("{s:o, s:i, s:i, s:f, s:f, s:s?, s:s?}", "servers", servers, "queries",
			   queries, "failed_connects", fails, "first_ms", a, "last_ms", b,
			   "endpoint", c->endpoint, "host", name ? host : NULL),
		 b > a ? (b - a) / 1000 : -1,
		 "check the resolver (/etc/resolv.conf, the container's DNS settings) and the "
		 "name in HF_ENDPOINT; put the hub's address in /etc/hosts or use an address in "
		 "HF_ENDPOINT; with every model cached, HF_HUB_OFFLINE=1 needs no look-up",
		 "%s%s%s: %d DNS quer%s to %s%s, no connection to the hub followed",
		 name ? "the hub's name " : "", name ? host : "name server",
		 name ? " could not be resolved" : " unreachable", queries,
		 queries == 1 ? "y" : "ies", json_string_value(json_array_get(servers, 0)) ?: "?",
		 fails ? " failed" : "");
}

/* ---- Xet ---- */

/* Open connections to peer at the end (established, never closed). */
static int open_connects(const struct diag_ctx *c, const char *peer)
{
	int n = 0;

	for (size_t i = 0; i < c->view->n_connects; i++) {
		const struct tl_connect *e = &c->view->connects[i];

		if (peer_is(e, peer) && connect_ret(e) == 0 && result_is(e, "connected") &&
		    !tl_has(e->closed_ms))
			n++;
	}
	return n;
}

/* Downloads unfinished at the end (*.incomplete opened, never renamed),
 * and how long since the last of them moved. */
static int unfinished(const struct diag_ctx *c, double *idle)
{
	int n = 0;
	double last = -1;

	for (size_t i = 0; i < c->view->n_files; i++) {
		const struct tl_file *f = &c->view->files[i];
		const char *path = f->path;

		if (!path || *path != '/' || !hf_hub_temp(path) || tl_or0(f->opens) <= 0 ||
		    tl_view_renamed(c->view, path))
			continue;
		n++;
		if (tl_or0(f->last_ms) > last)
			last = tl_or0(f->last_ms);
	}
	*idle = n ? c->end - last : 0;
	return n;
}

/* A CAS peer the service sent requests to, Xet not switched off, and its
 * downloads unfinished with nothing written for XET_IDLE_MS at the end:
 * xet-core has no read timeout, so nothing ends the wait (its retries of
 * other ranges keep the connections busy, the files do not move). */
static bool xet_stalled(const struct diag_ctx *c, const struct tl_peer *net, double *idle,
			int *inflight)
{
	const char *off = run_env(c, "HF_HUB_DISABLE_XET");

	*inflight = unfinished(c, idle);
	if (!role_is(net, "cas") || (off && strcmp(off, "0") && strcasecmp(off, "false")))
		return false;
	return NET(net, bytes_out) > 0 && *inflight > 0 && *idle >= XET_IDLE_MS;
}

static void rule_xet_stalled(struct diag_ctx *c)
{
	for (size_t i = 0; i < c->view->n_network; i++) {
		const struct tl_peer *net = &c->view->network[i];
		const char *peer = net->peer;
		char buf[300];
		double idle;
		int inflight, open;

		if (!peer || !xet_stalled(c, net, &idle, &inflight))
			continue;
		open = open_connects(c, peer);
		diag_add(
		    c, c->ready < 0 ? DIAG_ERROR : DIAG_WARNING, "Xet transfer stalled",
		    json_pack("{s:s, s:s?, s:f, s:i, s:i, s:f, s:f}", "peer", peer, "host",
			      net->host, "idle_s", diag_round3(idle / 1000), "downloads_in_flight",
			      inflight, "open_connections", open, "bytes_in", tl_or0(net->bytes_in),
			      "bytes_out", tl_or0(net->bytes_out)),
		    idle / 1000,
		    "set HF_HUB_DISABLE_XET=1 ([env] HF_HUB_DISABLE_XET = 1 in tts-launch.ini): "
		    "huggingface_hub then downloads over plain HTTP, which times out "
		    "(HF_HUB_DOWNLOAD_TIMEOUT) and resumes",
		    "Xet transfer from %s stalled: no download moved for %.1f s, %d download%s "
		    "unfinished%s; Xet has no read timeout, so no timeout will end it",
		    peer_label(net, peer, buf, sizeof(buf)), idle / 1000, inflight,
		    inflight == 1 ? "" : "s", open ? ", its connections still open" : "");
	}
}

/* HF_ENDPOINT names a mirror, yet Xet bytes came from the hub's CAS: Xet
 * asks the CAS the hub's answer names (xet-core #470), not the mirror. */
static void rule_mirror_bypassed(struct diag_ctx *c)
{
	const struct tl_peer *cas = NULL;
	char host[300];
	const char *h, *e;
	double in = 0;
	size_t i;

	const char *off = run_env(c, "HF_HUB_DISABLE_XET");

	/* without Xet, CAS bytes are the hub's or mirror's own redirects */
	if (!c->endpoint || (off && strcmp(off, "0") && strcasecmp(off, "false")))
		return;
	h = strstr(c->endpoint, "://");
	h = h ? h + 3 : c->endpoint;
	e = h + strcspn(h, ":/");
	snprintf(host, sizeof(host), "%.*s", (int)(e - h), h);
	if (!*host || !strcasecmp(host, "huggingface.co"))
		return;
	for (i = 0; i < c->view->n_network; i++) {
		const struct tl_peer *net = &c->view->network[i];
		int asked_nothing = 0;

		/* bytes of an answer, not of a TLS handshake */
		if (role_is(net, "cas") && net->peer &&
		    peer_answered(c, net->peer, net, &asked_nothing) && tl_or0(net->bytes_in) > 0) {
			in += net->bytes_in;
			if (!cas || net->bytes_in > cas->bytes_in)
				cas = net;
		}
	}
	if (!cas)
		return;
	{
		char buf[300];
		const char *label = peer_label(cas, cas->peer ?: "?", buf, sizeof(buf));

		diag_add(
		    c, DIAG_WARNING, "mirror bypassed by Xet",
		    json_pack("{s:s, s:s, s:s?, s:f}", "endpoint", c->endpoint, "cas_peer",
			      cas->peer ?: "?", "cas_host", cas->host, "cas_bytes_in", in),
		    -1,
		    "set HF_HUB_DISABLE_XET=1 ([env] HF_HUB_DISABLE_XET = 1) so every download "
		    "goes through the mirror; or let the machine reach the CAS hosts "
		    "(*.xethub.hf.co)",
		    "HF_ENDPOINT=%s is a mirror, but %.1f MiB of Xet downloads came from %s: Xet "
		    "fetches from the CAS the hub names, not through the mirror",
		    c->endpoint, in / 1048576.0, label);
	}
}

/* ---- ModelScope and hf-mirror ---- */

/* Downloads of writer (downloads[].writer): some, and every one complete. */
static bool writer_all_done(const struct diag_ctx *c, const char *writer)
{
	int done = 0;

	for (size_t i = 0; i < c->view->n_downloads; i++) {
		const struct tl_download *d = &c->view->downloads[i];

		if (!d->writer || strcmp(d->writer, writer))
			continue;
		if (!d->complete)
			return false;
		done++;
	}
	return done > 0;
}

/* The fallbacks IndexTTS2 downloads from: failing (the start failed after
 * their answers, and a download of their writer did not finish) or slow. */
static void rule_fallback_download(struct diag_ctx *c)
{
	for (size_t i = 0; i < c->view->n_network; i++) {
		const struct tl_peer *net = &c->view->network[i];
		const char *peer = net->peer, *role = net->role;
		double in = tl_or0(net->bytes_in),
		       span = tl_or0(net->last_ms) - tl_or0(net->first_ms);
		bool ms = role_is(net, "modelscope");
		char buf[300];
		const char *label;

		if (!peer || !(ms || role_is(net, "mirror")) || in <= 0)
			continue;
		/* its downloads (by writer) all finished: not what failed (the
		 * examples from hf-mirror.com, ModelScope's snapshot failing) */
		if (c->failed && writer_all_done(c, ms ? "modelscope" : "mirror"))
			continue;
		label = peer_label(net, peer, buf, sizeof(buf));
		if (c->failed) {
			diag_add(
			    c, DIAG_ERROR,
			    ms ? "ModelScope download failed" : "mirror download failed",
			    json_pack("{s:s, s:s?, s:s, s:f, s:f, s:f}", "peer", peer, "host",
				      net->host, "role", role, "bytes_in", in, "connects",
				      tl_or0(net->connects), "span_ms", span),
			    -1,
			    ms ? "see the service's log for the ModelScope error; set "
				 "USE_MODELSCOPE=false to download from huggingface.co, or retry "
				 "later (ModelScope resumes from ._____temp/)"
			       : "see the service's log for the HTTP error; the mirror is a "
				 "fallback: make huggingface.co or modelscope.cn reachable, or "
				 "retry later",
			    "the start failed after downloads from %s (%s, %.1f KiB over %lld "
			    "connections): %s answered, but not with the files",
			    label, role, in / 1024, (long long)tl_or0(net->connects), label);
			continue;
		}
		if (span >= SLOW_PEER_MS && in / (span / 1000) < SLOW_PEER_BPS)
			diag_add(c, DIAG_WARNING,
				 ms ? "ModelScope download slow" : "mirror download slow",
				 json_pack("{s:s, s:s?, s:s, s:f, s:f}", "peer", peer, "host",
					   net->host, "role", role, "bytes_in", in, "span_ms",
					   span),
				 span / 1000,
				 "a closer or faster source: USE_MODELSCOPE=false (huggingface.co) "
				 "or HF_ENDPOINT to a mirror near you",
				 "downloads from %s were slow: %.1f KiB/s over %.1f s", label,
				 in / 1024 / (span / 1000), span / 1000);
	}
}

const struct diag_rule diag_net_rules[] = {
    {"dns-failure", rule_dns},
    {"hub-probe-failed", rule_hub_probe},
    {"hub-unreachable", rule_hub_unreachable},
    {"xet-stalled", rule_xet_stalled},
    {"mirror-bypassed", rule_mirror_bypassed},
    {"fallback-download", rule_fallback_download},
    {NULL, NULL},
};
