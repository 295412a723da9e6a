/* timeline_net: the network sections of the model (network, connects,
 * listens, names) from the collector's connect records, its names table
 * (peers.c) and the peers and conns maps; called by timeline_build. Each
 * peer gets the host name the service used for it (host, host_source) and
 * its role (peers_role); a peer that connected to the service is a client
 * (inbound), not a peer it contacted. */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "collector.h"
#include "mapwalk.h"
#include "peers.h"
#include "timeline_internal.h"
#include "timeline_parts.h"
#include "trace.skel.h"
#include "util.h"

/* "a.b.c.d:port" or "[v6]:port" (collector_peer_string) back into its parts */
static bool peer_parse(const char *peer, struct peer_addr *a, int *port)
{
	char buf[64];
	const char *colon = peer ? strrchr(peer, ':') : NULL;
	size_t n;

	memset(a, 0, sizeof(*a));
	if (!colon)
		return false;
	n = (size_t)(colon - peer);
	if (n >= sizeof(buf))
		return false;
	memcpy(buf, peer, n);
	buf[n] = 0;
	*port = atoi(colon + 1);
	if (buf[0] == '[' && n > 2 && buf[n - 1] == ']') {
		buf[n - 1] = 0;
		a->family = AF_INET6;
		return inet_pton(AF_INET6, buf + 1, a->addr) == 1;
	}
	a->family = AF_INET;
	return inet_pton(AF_INET, buf, a->addr) == 1;
}

/* HF_ENDPOINT given as an address ("http://127.0.0.1:8999"): the peer at
 * that address and port is the endpoint, a mirror (not huggingface.co) */
static bool endpoint_peer(const char *endpoint, const struct peer_addr *a, int port)
{
	char host[PEER_HOST_MAX];
	struct peer_addr ea = {0};
	const char *h, *colon;
	int eport;

	if (!endpoint || !peers_url_host(endpoint, host, sizeof(host)))
		return false;
	ea.family = strchr(host, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(ea.family, host, ea.addr) != 1 || ea.family != a->family ||
	    memcmp(ea.addr, a->addr, sizeof(ea.addr)))
		return false;
	eport = !strncmp(endpoint, "https", 5) ? 443 : 80;
	h = strstr(endpoint, "://");
	h = h ? h + 3 : endpoint;
	if (*h == '[')
		h = strchr(h, ']') ?: h;
	colon = strchr(h, ':');
	if (colon && (!strchr(h, '/') || colon < strchr(h, '/')))
		eport = atoi(colon + 1);
	return eport == port;
}

/* host, host_source (null when no name was seen) and role of peer e */
static void name_peer(const struct collector *t, json_t *e, const char *endpoint)
{
	const char *peer = json_string_value(json_object_get(e, "peer"));
	const struct peer_name *n = NULL;
	struct peer_addr a;
	int port = 0;

	if (peer_parse(peer, &a, &port))
		n = peers_lookup(&t->names, &a, port);
	json_object_set_new(e, "host", n ? json_string(n->host) : json_null());
	json_object_set_new(e, "host_source",
			    n ? json_string(peer_source_name(n->source)) : json_null());
	json_object_set_new(
	    e, "role",
	    json_string(endpoint_peer(endpoint, &a, port) &&
				!json_is_true(json_object_get(e, "inbound"))
			    ? "mirror"
			    : peers_role(n ? n->host : NULL, port,
					 json_is_true(json_object_get(e, "inbound")), endpoint)));
}

/* names: the service's look-ups, with what they gave */
static json_t *names_json(const struct peer_names *p)
{
	json_t *list = json_array();

	for (size_t i = 0; i < p->n_look; i++) {
		const struct peer_lookup *l = &p->look[i];
		json_t *addrs = json_array(), *o;
		const char *err = NULL;

		for (size_t k = 0; k < l->n_addrs; k++) {
			char s[INET6_ADDRSTRLEN] = "?";

			inet_ntop(l->addrs[k].family, l->addrs[k].addr, s, sizeof(s));
			json_array_append_new(addrs, json_string(s));
		}
		if (l->ret && l->source == PEER_SRC_GETADDRINFO)
			err = gai_strerror(l->ret);
		else if (l->ret)
			err = l->ret == 3 ? "NXDOMAIN" : l->ret == 2 ? "SERVFAIL" : "error";
		o = json_pack("{s:s, s:s, s:b, s:s?, s:o, s:o, s:o, s:i}", "host", l->host,
			      "source", peer_source_name(l->source), "ok", !l->ret, "error", err,
			      "addresses", addrs, "ms", ms_json(l->ms), "dur_ms",
			      ms_json(l->dur_ms), "pid", l->pid);
		if (!l->ret && !l->n_addrs)
			json_object_set_new(o, "ok", json_false()); /* NODATA: no address */
		json_array_append_new(list, o);
	}
	timeline_sort_by(list, "ms"); /* the ring's lazy records come in any order */
	return list;
}

static json_t *ms_or_null(bool has, double ms) { return has ? ms_json(ms) : json_null(); }

/* connects[] entry of a connect record (without host: snap_network's) */
static json_t *connect_json(const struct coll_connect *c)
{
	json_t *o = json_pack(
	    "{s:o, s:i, s:i, s:i, s:o, s:o, s:i, s:i, s:b, s:s, s:o, s:o, s:o, s:o, s:o, s:o, "
	    "s:o}",
	    "peer", json_text(c->peer), "family", c->family, "port", c->port, "pid", c->pid,
	    "start_ms", ms_json(c->start_ms), "dur_ms", ms_json(c->dur_ms), "ret", c->ret,
	    "syscall_ret", c->syscall_ret, "pending", c->pending, "result", c->result, "errno",
	    c->errno_name ? json_string(c->errno_name) : json_null(), "ms_to_result",
	    ms_or_null(c->has_ms_to_result, c->ms_to_result), "bytes_in",
	    c->has_bytes ? json_integer((json_int_t)c->bytes_in) : json_null(), "bytes_out",
	    c->has_bytes ? json_integer((json_int_t)c->bytes_out) : json_null(), "established_ms",
	    ms_or_null(c->has_established, c->established_ms), "closed_ms",
	    ms_or_null(c->has_closed, c->closed_ms), "open_ms",
	    ms_or_null(c->has_open, c->open_ms));

	if (c->ended_by)
		json_object_set_new(o, "ended_by", json_string(c->ended_by));
	if (c->has_counts) {
		json_object_set_new(o, "reply_max", json_integer((json_int_t)c->reply_max));
		json_object_set_new(o, "writes", json_integer((json_int_t)c->writes));
	}
	if (c->tls)
		json_object_set_new(o, "tls", json_true());
	return o;
}

void snap_network(struct collector *t, json_t *root)
{
	const char *endpoint = config_env(t->cfg, "HF_ENDPOINT");
	struct bpf_map *m = t->skel->maps.peers;
	json_t *net = json_object(), *list = json_array(), *e;
	struct peer_key k;
	struct peer_val v;
	struct map_walk mw, mw2;
	const char *key;
	size_t i;

	/* connections still open: what moved so far */
	{
		struct bpf_map *cm = t->skel->maps.conns;
		__u64 ck;
		struct conn_val pc;
		double nowms = clock_ms();

		/* closed connections are deleted meanwhile: seen or not */
		map_walk_begin(&mw, bpf_map__fd(cm), sizeof(ck), sizeof(pc), false);
		while (map_walk_next(&mw, &ck, &pc)) {
			if (!pc.done || pc.closed || pc.ret)
				continue;
			struct coll_connect *c = collector_connect(t, ck);
			/* the answer still being read counts (tl_conn_event) */
			__u64 run = pc.bytes_in - pc.in_at_out;

			if (!c || c->has_closed)
				continue;
			c->has_bytes = c->has_counts = c->has_open = true;
			c->bytes_in = pc.bytes_in;
			c->bytes_out = pc.bytes_out;
			c->writes = pc.writes;
			c->reply_max = pc.writes >= 2 && run > pc.reply_max ? run : pc.reply_max;
			c->open_ms = coll_ms(nowms - clock_ns_to_ms(pc.done_ns));
		}
		map_walk_end(&mw);
	}
	/* connect attempts, by peer */
	for (i = 0; i < t->n_connects; i++) {
		const struct coll_connect *c = &t->connects[i];
		json_t *pj = json_text(c->peer); /* the peer as the model writes it */
		const char *peer = json_string_value(pj);
		int ret = c->ret;
		bool pending = c->pending;

		e = peer ? json_object_get(net, peer) : NULL;
		if (peer && !e) {
			e = json_pack("{s:s, s:i, s:i, s:i, s:n, s:I, s:I, s:f, s:f, s:o, s:f}",
				      "peer", peer, "port", c->port, "connects", 0, "failures", 0,
				      "errno", "bytes_in", (json_int_t)0, "bytes_out",
				      (json_int_t)0, "connect_ms", 0.0, "connect_max_ms", 0.0,
				      "first_ms", ms_json(c->start_ms), "last_ms", 0.0);
			json_object_set_new(net, peer, e);
		}
		json_decref(pj);
		if (!e)
			continue;
		json_object_set_new(
		    e, "connects",
		    json_integer(json_integer_value(json_object_get(e, "connects")) + 1));
		if (ret < 0 && !pending) {
			json_object_set_new(
			    e, "failures",
			    json_integer(json_integer_value(json_object_get(e, "failures")) + 1));
			json_object_set_new(e, "errno", errno_json(-ret));
		}
		{
			double d = c->has_ms_to_result ? c->ms_to_result : c->dur_ms;
			double end = c->start_ms + d;

			json_object_set_new(
			    e, "connect_ms",
			    ms_json(json_real_value(json_object_get(e, "connect_ms")) + d));
			if (d > json_real_value(json_object_get(e, "connect_max_ms")))
				json_object_set_new(e, "connect_max_ms", ms_json(d));
			if (end > json_real_value(json_object_get(e, "last_ms")))
				json_object_set_new(e, "last_ms", ms_json(end));
		}
	}
	/* bytes, by peer */
	map_walk_begin(&mw2, bpf_map__fd(m), sizeof(k), sizeof(v), false);
	while (map_walk_next(&mw2, &k, &v)) {
		char peer[160];
		double f, l;

		collector_peer_string(k.family, k.addr, k.port, peer, sizeof(peer));
		f = clock_ns_to_ms(v.first_ns);
		l = clock_ns_to_ms(v.last_ns);
		e = json_object_get(net, peer);
		if (!e) {
			e = json_pack("{s:s, s:i, s:i, s:i, s:n, s:f, s:f, s:o, s:o}", "peer", peer,
				      "port", k.port, "connects", 0, "failures", 0, "errno",
				      "connect_ms", 0.0, "connect_max_ms", 0.0, "first_ms",
				      ms_json(f), "last_ms", ms_json(l));
			json_object_set_new(net, peer, e);
		}
		json_object_set_new(e, "bytes_in", json_integer((json_int_t)v.bytes_in));
		json_object_set_new(e, "bytes_out", json_integer((json_int_t)v.bytes_out));
		json_object_set_new(e, "proto",
				    json_string(k.proto == IPPROTO_UDP ? "udp" : "tcp"));
		json_object_set_new(e, "sends", json_integer((json_int_t)v.sends));
		json_object_set_new(e, "recvs", json_integer((json_int_t)v.recvs));
		json_object_set_new(e, "io_errors", json_integer((json_int_t)v.errors));
		json_object_set_new(e, "io_errno", errno_json(v.errors ? v.err : 0));
		json_object_set_new(e, "inbound", json_boolean(v.flags & PEER_INBOUND));
		if (k.port == 53) {
			/* a query per datagram sent, an answer per one received;
			 * failures: failed sends/receives (ECONNREFUSED: nothing
			 * listens there) */
			json_object_set_new(e, "dns_queries", json_integer((json_int_t)v.sends));
			json_object_set_new(e, "dns_answers", json_integer((json_int_t)v.recvs));
			json_object_set_new(e, "dns_failures", json_integer((json_int_t)v.errors));
			json_object_set_new(
			    e, "dns_unanswered",
			    json_integer(v.sends > v.recvs ? (json_int_t)(v.sends - v.recvs) : 0));
		}
		if (f < json_real_value(json_object_get(e, "first_ms")))
			json_object_set_new(e, "first_ms", ms_json(f));
		if (l > json_real_value(json_object_get(e, "last_ms")))
			json_object_set_new(e, "last_ms", ms_json(l));
	}
	map_walk_end(&mw2);
	json_object_foreach (net, key, e) {
		if (!json_object_get(e, "bytes_in")) {
			/* connected, but nothing moved (or not over an inet socket) */
			json_object_set_new(e, "bytes_in", json_integer(0));
			json_object_set_new(e, "bytes_out", json_integer(0));
			json_object_set_new(e, "proto", json_null());
		}
		json_object_set_new(
		    e, "dns", json_boolean(json_integer_value(json_object_get(e, "port")) == 53));
		if (!json_object_get(e, "inbound"))
			json_object_set_new(e, "inbound", json_false());
		name_peer(t, e, endpoint);
		json_array_append(list, e);
	}
	json_decref(net);
	timeline_sort_by(list, "first_ms");
	json_object_set_new(root, "network", list);
	{
		json_t *conns = json_array(), *listens = json_array();

		for (i = 0; i < t->n_connects; i++) {
			json_t *c = connect_json(&t->connects[i]);
			struct peer_addr a;
			int port = 0;
			const struct peer_name *n =
			    peer_parse(json_string_value(json_object_get(c, "peer")), &a, &port)
				? peers_lookup(&t->names, &a, port)
				: NULL;

			json_object_set_new(c, "host", n ? json_string(n->host) : json_null());
			json_array_append_new(conns, c);
		}
		json_object_set_new(root, "connects", conns);
		json_object_set_new(root, "names", names_json(&t->names));
		for (i = 0; i < t->n_listens; i++)
			json_array_append_new(listens,
					      json_pack("{s:i, s:i, s:o}", "pid", t->listens[i].pid,
							"port", t->listens[i].port, "ms",
							ms_json(t->listens[i].ms)));
		json_object_set_new(root, "listens", listens);
	}
}
