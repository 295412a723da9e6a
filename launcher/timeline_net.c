/* timeline_net: the network sections of the model (network, connects,
 * listens) from the collector's connect records and the peers and conns
 * maps; called by timeline_build. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>

#include "clock.h"
#include "collector.h"
#include "timeline_internal.h"
#include "timeline_parts.h"
#include "trace.skel.h"

void snap_network(struct collector *t, json_t *root)
{
	struct bpf_map *m = t->skel->maps.peers;
	json_t *net = json_object(), *list = json_array(), *c, *e;
	struct peer_key k, next;
	struct peer_val v;
	const char *key;
	size_t i;
	int more;

	/* connections still open: what moved so far */
	{
		struct bpf_map *cm = t->skel->maps.conns;
		__u64 ck, cnext;
		struct conn_val pc;
		double nowms = clock_ms();
		__u32 walked;

		/* capped: closed connections are deleted meanwhile (see snap_locks) */
		for (more = bpf_map__get_next_key(cm, NULL, &cnext, sizeof(cnext)), walked = 0;
		     !more && walked++ < bpf_map__max_entries(cm);
		     more = bpf_map__get_next_key(cm, &ck, &cnext, sizeof(cnext))) {
			ck = cnext;
			if (bpf_map__lookup_elem(cm, &ck, sizeof(ck), &pc, sizeof(pc), 0) ||
			    !pc.done || pc.closed || pc.ret)
				continue;
			c = collector_connect(t, ck);
			if (!c || !json_is_null(json_object_get(c, "closed_ms")))
				continue;
			json_object_set_new(c, "bytes_in", json_integer((json_int_t)pc.bytes_in));
			json_object_set_new(c, "bytes_out", json_integer((json_int_t)pc.bytes_out));
			json_object_set_new(c, "open_ms",
					    ms_json(nowms - clock_ns_to_ms(pc.done_ns)));
		}
	}
	/* connect attempts, by peer */
	json_array_foreach (t->connects, i, c) {
		const char *peer = json_string_value(json_object_get(c, "peer"));
		int ret = (int)json_integer_value(json_object_get(c, "ret"));
		bool pending = json_is_true(json_object_get(c, "pending"));
		e = json_object_get(net, peer);
		if (!e) {
			e = json_pack(
			    "{s:s, s:i, s:i, s:i, s:n, s:I, s:I, s:f, s:f, s:O, s:f}", "peer", peer,
			    "port", (int)json_integer_value(json_object_get(c, "port")), "connects",
			    0, "failures", 0, "errno", "bytes_in", (json_int_t)0, "bytes_out",
			    (json_int_t)0, "connect_ms", 0.0, "connect_max_ms", 0.0, "first_ms",
			    json_object_get(c, "start_ms"), "last_ms", 0.0);
			json_object_set_new(net, peer, e);
		}
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
			json_t *r = json_object_get(c, "ms_to_result");
			double d =
			    json_real_value(json_is_real(r) ? r : json_object_get(c, "dur_ms"));
			double end = json_real_value(json_object_get(c, "start_ms")) + d;

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
	for (more = bpf_map__get_next_key(m, NULL, &next, sizeof(next)); !more;
	     more = bpf_map__get_next_key(m, &k, &next, sizeof(next))) {
		char peer[160];
		double f, l;

		k = next;
		if (bpf_map__lookup_elem(m, &k, sizeof(k), &v, sizeof(v), 0))
			continue;
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
	json_object_foreach (net, key, e) {
		if (!json_object_get(e, "bytes_in")) {
			/* connected, but nothing moved (or not over an inet socket) */
			json_object_set_new(e, "bytes_in", json_integer(0));
			json_object_set_new(e, "bytes_out", json_integer(0));
			json_object_set_new(e, "proto", json_null());
		}
		json_object_set_new(
		    e, "dns", json_boolean(json_integer_value(json_object_get(e, "port")) == 53));
		json_array_append(list, e);
	}
	json_decref(net);
	timeline_sort_by(list, "first_ms");
	json_object_set_new(root, "network", list);
	json_object_set_new(root, "connects", json_deep_copy(t->connects));
	json_object_set_new(root, "listens", json_deep_copy(t->listens));
}
