/* timeline_view_net: the decoders of timeline_view.h's network sections
 * (network, connects, requests) and the peer look-up. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "timeline_view_int.h"

/* "host:port" for a named peer, else its address */
static void peer_label(struct tl_peer *p)
{
	if (p->host && tl_has(p->port) && fabs(p->port) < 1e6)
		snprintf(p->label, sizeof(p->label), "%s:%lld", p->host, (long long)p->port);
	else
		snprintf(p->label, sizeof(p->label), "%s", p->peer ? p->peer : "");
}

/* network[] by peer (then by position: the last of equals is the one a
 * lookup gives), for tl_view_peer */
static int peer_cmp(const void *a, const void *b, void *arg)
{
	const struct tl_peer *net = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	const char *p = net[x].peer, *q = net[y].peer;
	int r = strcmp(p ? p : "", q ? q : "");

	return r ? r : (x > y) - (x < y);
}

static int peer_index(struct tl_view *v)
{
	size_t *order;

	if (!v->n_network)
		return 0;
	if (!(order = calloc(v->n_network, sizeof(*order))))
		return -1;
	for (size_t i = 0; i < v->n_network; i++)
		order[i] = i;
	qsort_r(order, v->n_network, sizeof(*order), peer_cmp, (void *)v->network);
	v->peer_order = order;
	return 0;
}

int tlv_decode_network(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "network"), *e;
	struct tl_peer *out;
	size_t i;

	if (LIST(arr, out, v->n_network) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_peer){
		    .peer = str(e, "peer"),
		    .errno_name = str(e, "errno"),
		    .connects = num(e, "connects"),
		    .failures = num(e, "failures"),
		    .bytes_in = num(e, "bytes_in"),
		    .bytes_out = num(e, "bytes_out"),
		    .connect_ms = num(e, "connect_ms"),
		    .host = str(e, "host"),
		    .role = str(e, "role"),
		    .port = num(e, "port"),
		    .inbound =
			flag(e, "inbound") || (str(e, "role") && !strcmp(str(e, "role"), "client")),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .dns = flag(e, "dns"),
		};
	for (i = 0; i < v->n_network; i++)
		peer_label(&out[i]);
	v->network = out;
	return peer_index(v);
}

int tlv_decode_connects(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "connects"), *e;
	struct tl_connect *out;
	size_t i;

	if (LIST(arr, out, v->n_connects) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_connect){
		    .peer = str(e, "peer"),
		    .port = num(e, "port"),
		    .pid = num(e, "pid"),
		    .start_ms = num(e, "start_ms"),
		    .pending = flag(e, "pending"),
		    .host = str(e, "host"),
		    .established_ms = num(e, "established_ms"),
		    .closed_ms = num(e, "closed_ms"),
		    .bytes_in = num(e, "bytes_in"),
		    .bytes_out = num(e, "bytes_out"),
		    .writes = num(e, "writes"),
		    .reply_max = num(e, "reply_max"),
		    .tls = flag(e, "tls"),
		    .ret = num(e, "ret"),
		    .family = num(e, "family"),
		    .ms_to_result = num(e, "ms_to_result"),
		    .dur_ms = num(e, "dur_ms"),
		    .result = str(e, "result"),
		};
	v->connects = out;
	return 0;
}

int tlv_decode_requests(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "requests"), *e;
	struct tl_request *out;
	size_t i;

	if (LIST(arr, out, v->n_requests) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_request){
		    .start_ms = num(e, "start_ms"),
		    .end_ms = num(e, "end_ms"),
		    .dur_ms = num(e, "dur_ms"),
		    .latency_ms = num(e, "latency_ms"),
		    .close_ms = num(e, "close_ms"),
		    .faults = num(e, "faults"),
		    .page_faults = num(e, "page_faults"),
		    .major_faults = num(e, "major_faults"),
		    .model_faults = num(e, "model_faults"),
		    .model_major_faults = num(e, "model_major_faults"),
		    .bytes_out = num(e, "bytes_out"),
		    .bytes_in = num(e, "bytes_in"),
		    .writes = num(e, "writes"),
		    .pid = num(e, "pid"),
		    .tid = num(e, "tid"),
		    .port = num(e, "port"),
		    .method = str(e, "method"),
		    .path = str(e, "path"),
		};
	/* the aliases resolved here, one way for every reader: latency_ms is
	 * dur_ms (older name), else end - start; faults is page_faults */
	for (i = 0; i < v->n_requests; i++) {
		struct tl_request *r = &out[i];

		if (!tl_has(r->latency_ms))
			r->latency_ms = tl_has(r->dur_ms) ? r->dur_ms : r->end_ms - r->start_ms;
		if (!tl_has(r->dur_ms))
			r->dur_ms = r->latency_ms;
		if (!tl_has(r->faults))
			r->faults = r->page_faults;
		if (!tl_has(r->page_faults))
			r->page_faults = r->faults;
	}
	v->requests = out;
	v->has_requests = json_is_array(arr);
	return 0;
}

const struct tl_peer *tl_view_peer(const struct tl_view *v, const char *peer)
{
	size_t lo = 0, hi, found = (size_t)-1;

	if (!v || !peer || !v->peer_order)
		return NULL;
	/* the last of the equal names: the rightmost match */
	hi = v->n_network;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *p = v->network[v->peer_order[mid]].peer;
		int r = strcmp(p ? p : "", peer);

		if (r <= 0) {
			if (!r)
				found = mid;
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	if (found == (size_t)-1 || !v->network[v->peer_order[found]].peer)
		return NULL;
	return &v->network[v->peer_order[found]];
}
