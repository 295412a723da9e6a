// SPDX-License-Identifier: GPL-2.0
/* names: the host names behind the tree's peers (launcher/peers.c turns
 * them into the timeline's `host`): a uprobe on libc's getaddrinfo (entry:
 * the node name; return: the addresses of the result list), and a bounded
 * copy of the messages that carry a name in the clear, handed to user space
 * to parse: the first write on an outbound TCP connection when it is a TLS
 * handshake record (the ClientHello's server_name), and datagrams received
 * from port 53 (DNS answers). The copies are taken in the existing send and
 * receive path (net.bpf.c calls names_payload); the uprobe runs only in
 * processes that call getaddrinfo, and returns at once outside the tree. */
#include "common.bpf.h"

#define IPPROTO_TCP_ 6

/* getaddrinfo in flight, per thread: its node name and result pointer;
 * at the return, the walk of its result list is kept here too (map memory:
 * the verifier tracks none of its values, so bpf_loop's step is checked a
 * few times, not once per address count as with the walk on the stack) */
struct gai_call {
	__u64 ts;
	__u64 node; /* const char * */
	__u64 res;  /* struct addrinfo ** */
	__u64 ai;   /* the walk: the entry to read next; 0: the end */
	__u32 n;    /* addresses seen (may exceed TRACE_NAME_ADDRS) */
	__u32 pad;
	struct tl_name_addr addrs[TRACE_NAME_ADDRS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tid */
	__type(value, struct gai_call);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} gai_calls SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(gai_enter, const char *node, const char *service, const void *hints, void **res)
{
	__u32 tgid, tid = (__u32)bpf_get_current_pid_tgid();
	struct gai_call g = {};

	if (!traced_now(&tgid) || !node)
		return 0;
	g.ts = bpf_ktime_get_ns();
	g.node = (__u64)node;
	g.res = (__u64)res;
	bpf_map_update_elem(&gai_calls, &tid, &g, BPF_ANY);
	return 0;
}

/* struct addrinfo (glibc, LP64): ai_family at 4, ai_addr at 24, ai_next at 40 */
#define AI_FAMILY 4
#define AI_ADDR	  24
#define AI_NEXT	  40

/* bpf_loop's context: the call whose result list is walked (a pointer to
 * map memory, one entry per bpf_loop step) */
struct gai_walk {
	struct gai_call *g;
};

static long gai_step(__u64 i, void *ctx)
{
	struct gai_call *w = ((struct gai_walk *)ctx)->g;
	__u32 fam = 0;
	__u64 sa = 0, ai;
	__u16 sfam = 0;

	(void)i;
	if (!w || !(ai = w->ai))
		return 1;
	bpf_probe_read_user(&fam, sizeof(fam), (void *)(ai + AI_FAMILY));
	bpf_probe_read_user(&sa, sizeof(sa), (void *)(ai + AI_ADDR));
	if (sa && (fam == AF_INET_ || fam == AF_INET6_) &&
	    !bpf_probe_read_user(&sfam, sizeof(sfam), (void *)sa) && sfam == fam) {
		__u32 n = w->n;

		if (n < TRACE_NAME_ADDRS) {
			struct tl_name_addr *a = &w->addrs[n];

			a->family = fam;
			if (fam == AF_INET_)
				bpf_probe_read_user(a->addr, 4, (void *)(sa + 4));
			else
				bpf_probe_read_user(a->addr, 16, (void *)(sa + 8));
		}
		w->n = n + 1;
	}
	if (bpf_probe_read_user(&w->ai, sizeof(w->ai), (void *)(ai + AI_NEXT)))
		return 1;
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(gai_exit, int ret)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, tid = (__u32)bpf_get_current_pid_tgid();
	struct gai_call *g = bpf_map_lookup_elem(&gai_calls, &tid);
	struct gai_walk w = {.g = g};
	struct tl_name_event *e;

	if (!g)
		return 0;
	e = ev_head(sizeof(*e), EV_NAME, tgid);
	if (!e) {
		bpf_map_delete_elem(&gai_calls, &tid);
		return 0;
	}
	e->ts_ns = g->ts;
	e->dur_ns = bpf_ktime_get_ns() - g->ts;
	e->ret = ret;
	e->pad = 0;
	if (bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)g->node) < 0)
		e->name[0] = 0;
	/* the walk's fields: zero since gai_enter made the entry */
	if (ret == 0 && g->res)
		bpf_probe_read_user(&g->ai, sizeof(g->ai), (void *)g->res);
	bpf_loop(2 * TRACE_NAME_ADDRS, gai_step, &w, 0);
	e->n_addrs = g->n;
	__builtin_memcpy(e->addrs, g->addrs, sizeof(e->addrs));
	/* the entry's memory may be reused at once once deleted: last */
	bpf_map_delete_elem(&gai_calls, &tid);
	ev_submit_lazy(e);
	return 0;
}

/* A message that may name the peer k (socket sk): buf, len bytes moved. A
 * TLS hello is kept only when it starts like a handshake record (type 22,
 * version 3.x). Global: verified once for its callers in net.bpf.c. */
int names_payload(const struct peer_key *k, __u64 sk, __u64 buf, __u64 len, __u32 kind)
{
	struct tl_payload_event *e;
	__u8 head[2] = {};

	if (!k || !buf || !len)
		return 0;
	if (kind == PAYLOAD_TLS_HELLO) {
		if (k->proto != IPPROTO_TCP_ || len < 6 ||
		    bpf_probe_read_user(head, sizeof(head), (void *)buf) || head[0] != 22 ||
		    head[1] != 3)
			return 0;
	}
	e = ev_head(sizeof(*e), EV_PAYLOAD, bpf_get_current_pid_tgid() >> 32);
	if (!e)
		return 0;
	e->kind = kind;
	e->len = len > 0xffffffffull ? 0xffffffffu : (__u32)len;
	e->family = k->family;
	e->port = k->port;
	__builtin_memcpy(e->addr, k->addr, sizeof(e->addr));
	e->cookie = sk;
	/* the whole window when readable; near the end of a mapping only what
	 * was moved */
	if (bpf_probe_read_user(e->data, sizeof(e->data), (void *)buf)) {
		__u32 n = len < TRACE_PAYLOAD_MAX ? (__u32)len : TRACE_PAYLOAD_MAX;

		__builtin_memset(e->data, 0, sizeof(e->data));
		bpf_probe_read_user(e->data, n & (TRACE_PAYLOAD_MAX - 1), (void *)buf);
	}
	ev_submit_lazy(e);
	return 0;
}
