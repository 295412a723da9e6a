// SPDX-License-Identifier: GPL-2.0
/* net: the tree's network: bytes per peer and per file descriptor
 * (regular files by inode, inet sockets by peer), outbound connections and
 * their outcome, the ports it listens on and the requests served there.
 * sx_bytes and sx_net are called from sys_exit (syscalls.bpf.c). */
#include "common.bpf.h"

/* Peer of a connected inet socket; false for anything else. */
static __always_inline bool sock_peer(struct sock *sk, struct peer_key *k)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	__builtin_memset(k, 0, sizeof(*k));
	if (family != AF_INET_ && family != AF_INET6_)
		return false;
	k->family = family;
	k->proto = BPF_CORE_READ(sk, sk_protocol);
	k->port = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (family == AF_INET_) {
		__u32 a = BPF_CORE_READ(sk, __sk_common.skc_daddr);

		__builtin_memcpy(k->addr, &a, 4);
	} else {
		BPF_CORE_READ_INTO(&k->addr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	}
	return true;
}

/* The peer of an unconnected socket (UDP sendto/recvfrom): the sockaddr
 * the caller passed, or the kernel filled in. uaddr: a struct sockaddr *,
 * or (indirect) a struct msghdr * whose msg_name is one. */
static __always_inline bool addr_peer(__u64 uaddr, bool indirect, struct peer_key *k)
{
	struct {
		__u16 family;
		__u16 port;
		__u32 v4;
	} sa = {};

	if (indirect && uaddr && bpf_probe_read_user(&uaddr, sizeof(uaddr), (void *)uaddr))
		return false;
	if (!uaddr || bpf_probe_read_user(&sa, sizeof(sa), (void *)uaddr))
		return false;
	if (sa.family != k->family || !sa.port)
		return false;
	k->port = __builtin_bswap16(sa.port);
	if (sa.family == AF_INET_)
		__builtin_memcpy(k->addr, &sa.v4, 4);
	else if (bpf_probe_read_user(k->addr, sizeof(k->addr), (void *)(uaddr + 8)))
		return false;
	return true;
}

/* n > 0: bytes moved in msgs messages; n < 0: a failed call (-errno).
 * The peer into k; false when the socket has none. */
static __always_inline bool peer_bytes(struct sock *sk, long n, bool out, __u64 now, __u64 msgs,
				       __u64 uaddr, bool indirect, struct peer_key *k)
{
	struct peer_val *v, init = {};

	if (!sock_peer(sk, k))
		return false;
	if (!k->port && !addr_peer(uaddr, indirect, k))
		return false;
	v = bpf_map_lookup_elem(&peers, k);
	if (!v) {
		__u16 lport = BPF_CORE_READ(sk, __sk_common.skc_num);

		init.first_ns = now;
		/* a connection accepted on a port the tree listens on: a client */
		if (bpf_map_lookup_elem(&listen_ports, &lport) &&
		    BPF_CORE_READ(sk, sk_protocol) == IPPROTO_TCP)
			init.flags = PEER_INBOUND;
		v = map_add(&peers, k, &init, CNT_PEERS_FULL);
		if (!v)
			return true;
	}
	v->last_ns = now;
	if (n < 0) {
		__sync_fetch_and_add(&v->errors, 1);
		v->err = -n;
	} else if (out) {
		__sync_fetch_and_add(&v->bytes_out, n);
		__sync_fetch_and_add(&v->sends, msgs);
	} else {
		__sync_fetch_and_add(&v->bytes_in, n);
		__sync_fetch_and_add(&v->recvs, msgs);
		if (n > 0)
			__sync_fetch_and_add(&dl_activity, n);
	}
	return true;
}

/* An outbound TCP connection of the tree: what moved once it was
 * established. Its first write (buf, buflen bytes readable) goes to
 * names_payload: a TLS ClientHello names the server. */
static __always_inline void conn_bytes(struct sock *sk, long n, bool out, const struct peer_key *k,
				       __u64 buf, __u64 buflen)
{
	__u64 key = (__u64)sk;
	struct conn_val *p = bpf_map_lookup_elem(&conns, &key);

	if (!p || !p->done || p->closed)
		return;
	if (out && !p->bytes_out && k)
		names_payload(k, key, buf, buflen, PAYLOAD_TLS_HELLO);
	if (out) {
		/* what was read since the last write answered it; from here on
		 * what is read answers this one */
		if (p->writes >= 2 && p->bytes_in - p->in_at_out > p->reply_max)
			p->reply_max = p->bytes_in - p->in_at_out;
		p->in_at_out = p->bytes_in;
		p->writes++;
	}
	if (out)
		__sync_fetch_and_add(&p->bytes_out, n);
	else
		__sync_fetch_and_add(&p->bytes_in, n);
}

/* The fault counters of process tgid now, into f (kept if it has none). */
static __always_inline void req_faults_now(struct req_faults *f, __u32 tgid)
{
	struct proc_stat *s = bpf_map_lookup_elem(&procstat, &tgid);

	if (!s)
		return;
	f->faults = s->faults;
	f->major = s->major_faults;
	f->model = s->model_faults;
	f->model_major = s->model_major_faults;
}

/* A connection accepted on a listened port: count what moves, and sample
 * the process's fault counters at each write (the last one ends the request). */
static __always_inline void req_bytes(struct sock *sk, long n, bool out, __u64 now)
{
	__u64 key = (__u64)sk;
	struct req_state *r = bpf_map_lookup_elem(&reqs, &key);

	if (!r)
		return;
	if (!out) {
		__sync_fetch_and_add(&r->bytes_in, n);
		return;
	}
	__sync_fetch_and_add(&r->bytes_out, n);
	__sync_fetch_and_add(&r->writes, 1);
	r->last_out_ns = now;
	/* in the writer's syscall: its own faults counted up to now */
	flt_sync_current(bpf_get_current_pid_tgid() >> 32, now);
	req_faults_now(&r->at_write, r->tgid);
}

/* Bytes moved through fd: regular files by inode, inet sockets by peer.
 * n < 0 (a failed call): socket errors go to the peer, write errors to the
 * file; EAGAIN and EINTR are not failures. msgs: messages moved (sockets);
 * uaddr/indirect: the address argument, for unconnected sockets; buf: the
 * (first) buffer, buflen of its bytes moved, 0 when not known. */
struct fd_io {
	long fd, n;
	__u64 now, msgs, uaddr, buf, buflen;
	bool out, indirect;
};

/* A global function: sx_bytes' switch fills io for each kind of call, and
 * the verifier checks what follows once, for any values, not once for each
 * kind's constants (that was half of sys_exit's verification). */
__attribute__((noinline)) int fd_bytes(struct fd_io *io)
{
	struct file *f;
	struct file_key k;
	struct file_val *v;
	__u64 now;
	__u32 mode;
	bool out;
	long n;

	if (!io)
		return 0;
	n = io->n;
	out = io->out;
	now = io->now;
	if (!n || n == -EAGAIN_ || n == -EINTR_)
		return 0;
	f = fd_file(io->fd);
	if (!f)
		return 0;
	file_id(f, &k, &mode);
	if ((mode & S_IFMT_) == S_IFSOCK_) {
		struct sock *sk = file_sock(f);

		/* cheap: a TCP socket's bytes come from its counters at close,
		 * unless libc's calls are seen (libcio.bpf.c) */
		if (sk && targ_cheap && BPF_CORE_READ(sk, sk_protocol) == IPPROTO_TCP &&
		    !libcio_seen())
			return 0;
		if (sk) {
			struct peer_key pk;
			bool have =
			    peer_bytes(sk, n, out, now, io->msgs, io->uaddr, io->indirect, &pk);

			if (n > 0) {
				req_bytes(sk, n, out, now);
				conn_bytes(sk, n, out, have ? &pk : NULL, io->buf, io->buflen);
				/* a DNS answer names the addresses it gives */
				if (have && !out && pk.port == 53 && pk.proto == IPPROTO_UDP)
					names_payload(&pk, (__u64)sk, io->buf, io->buflen,
						      PAYLOAD_DNS_ANSWER);
			}
		}
		return 0;
	}
	if ((mode & S_IFMT_) != S_IFREG_ || (n < 0 && !out))
		return 0;
	v = file_entry(f, &k, now);
	if (!v)
		return 0;
	if (n < 0) {
		/* ENOSPC, EDQUOT, EIO, EFBIG...: the write failed */
		__sync_fetch_and_add(&v->write_errors, 1);
		v->write_errno = -n;
		return 0;
	}
	v->last_ns = now;
	if (out) {
		__sync_fetch_and_add(&dl_activity, n);
		__sync_fetch_and_add(&v->bytes_written, n);
		__sync_fetch_and_add(&v->writes, 1);
		if (!v->first_write_ns)
			v->first_write_ns = now;
		v->last_write_ns = now;
	} else {
		__sync_fetch_and_add(&v->bytes_read, n);
		__sync_fetch_and_add(&v->reads, 1);
	}
	return 0;
}

/* sendmmsg/recvmmsg: ret messages; their lengths (msg_len, set by the
 * kernel) of the first MMSG_MAX are added up */
static __always_inline __u64 mmsg_bytes(long ret, __u64 vec)
{
	__u64 bytes = 0;

	for (int i = 0; i < MMSG_MAX; i++) {
		__u32 len = 0;

		if (i >= ret)
			break;
		/* struct mmsghdr: a struct msghdr (56 bytes), then unsigned int msg_len */
		bpf_probe_read_user(&len, sizeof(len), (void *)(vec + i * 64 + 56));
		bytes += len;
	}
	return bytes;
}

/* The outcome of a TCP handshake that connect(2) did not wait for. */
static __always_inline void conn_done(struct conn_val *p, const struct sock *sk)
{
	struct tl_event *e = ring_reserve(sizeof(*e));
	struct peer_key pk;

	if (!e)
		return;
	__builtin_memset(e, 0, sizeof(*e));
	e->type = EV_CONNECT_DONE;
	e->ts_ns = p->ts;
	e->dur_ns = p->done_ns - p->ts;
	e->pid = p->tgid;
	e->tid = p->tid;
	e->ret = p->ret;
	e->flags = p->closed ? CONN_CLOSED : 0;
	e->arg2 = (__u64)sk;
	if (sock_peer((struct sock *)sk, &pk)) {
		/* the peer moves to arg/aux; the family is in flags' upper half */
		e->flags |= (__u32)pk.family << CONN_FAMILY_SHIFT;
		e->arg = pk.port;
		__builtin_memcpy(e->aux, pk.addr, sizeof(pk.addr));
	}
	ev_submit_urgent(e);
}

static __always_inline void on_connect(struct inflight *in, long ret, __u32 tgid, __u64 now)
{
	struct conn_val *p = NULL;
	struct sock *sk = NULL;
	struct tl_event *e;
	struct file *f;
	__u64 len = in->a2, key = 0;

	/* A TCP handshake is followed from SYN_SENT (inet_sock_set_state). It
	 * may end before connect(2) returns, even a non-blocking one (loopback:
	 * the SYN-ACK or RST is processed at release_sock) */
	f = fd_file(in->a0);
	if (f && (BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT_) == S_IFSOCK_)
		sk = file_sock(f);
	key = (__u64)sk;
	if (sk)
		p = bpf_map_lookup_elem(&conns, &key);
	e = ev_reserve(EV_CONNECT, tgid);
	if (e) {
		e->ts_ns = in->ts;
		e->dur_ns = now - in->ts;
		e->ret = ret;
		e->arg = len;
		e->arg2 = key;
		/* the outcome follows in an EV_CONNECT_DONE */
		e->flags = p && ret < 0 ? CONNECT_FOLLOWS : 0;
		/* the whole buffer covers sockaddr_un; near the end of a page only
		 * the inet part may be readable */
		if (bpf_probe_read_user(e->aux, sizeof(e->aux), (void *)in->a1))
			bpf_probe_read_user(e->aux, 28, (void *)in->a1);
		ev_submit_lazy(e);
	}
	if (!p)
		return;
	if (ret == 0)
		return; /* established: followed until it ends (EV_CONN_END) */
	p->async = 1;
	if (!p->done)
		return; /* inet_sock_set_state reports the outcome */
	conn_done(p, sk);
	if (p->closed)
		bpf_map_delete_elem(&conns, &key);
}

static __always_inline void on_listen(struct inflight *in, long ret, __u32 tgid)
{
	struct file *f = fd_file(in->a0);
	struct tl_event *e;
	struct sock *sk;
	__u16 family;

	if (ret < 0 || !f)
		return;
	if ((BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT_) != S_IFSOCK_)
		return;
	sk = file_sock(f);
	if (!sk)
		return;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != AF_INET_ && family != AF_INET6_)
		return;
	{
		__u16 port = BPF_CORE_READ(sk, __sk_common.skc_num);
		__u8 one = 1;

		bpf_map_update_elem(&listen_ports, &port, &one, BPF_ANY);
		/* the launcher's ready mark: faults after it are request-time */
		if (!ready_ns && (!targ_ready_port || port == targ_ready_port))
			ready_ns = bpf_ktime_get_ns();
	}
	e = ev_reserve(EV_LISTEN, tgid);
	if (!e)
		return;
	e->arg = BPF_CORE_READ(sk, __sk_common.skc_num);
	e->arg2 = family;
	e->ret = ret;
	ev_submit_urgent(e);
}

/* accept(2) returned a connection on a port the tree listens on: a request */
static __always_inline void on_accept(long fd, __u32 tgid, __u64 now)
{
	struct file *f = fd_file(fd);
	struct req_state r = {};
	struct sock *sk;
	__u16 port;
	__u64 key;

	if (!f || (BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT_) != S_IFSOCK_)
		return;
	sk = file_sock(f);
	if (!sk)
		return;
	port = BPF_CORE_READ(sk, __sk_common.skc_num);
	if (!bpf_map_lookup_elem(&listen_ports, &port))
		return;
	r.start_ns = now;
	r.tgid = tgid;
	r.tid = (__u32)bpf_get_current_pid_tgid();
	r.port = port;
	flt_sync_current(tgid, now);
	req_faults_now(&r.at_accept, tgid);
	r.at_write = r.at_accept;
	key = (__u64)sk;
	bpf_map_update_elem(&reqs, &key, &r, BPF_ANY);
}

/* The first iovec of vec: its base into *buf, and n capped at its length. */
static __always_inline void first_iov(__u64 vec, long n, __u64 *buf, __u64 *len)
{
	struct {
		__u64 base, len;
	} iov = {};

	if (!vec || bpf_probe_read_user(&iov, sizeof(iov), (void *)vec))
		return;
	*buf = iov.base;
	*len = n < 0 ? 0 : (__u64)n < iov.len ? (__u64)n : iov.len;
}

SYS_HANDLER(sx_bytes)
{
	struct fd_io io = {.msgs = 1};
	long n;

	if (!c)
		return 0;
	n = c->ret;
	io.fd = c->in.a0;
	io.now = c->now;
	switch (c->in.nr) {
	case __NR_sendto:
		io.out = true;
		/* fallthrough */
	case __NR_recvfrom:
		io.uaddr = c->in.a1;
		io.buf = c->in.a2;
		io.buflen = n > 0 ? n : 0;
		break;
	case __NR_sendmsg:
		io.out = true;
		/* fallthrough */
	case __NR_recvmsg:
		io.uaddr = c->in.a1;
		io.indirect = true;
		/* struct msghdr: msg_iov at 16 */
		if (n > 0 && c->in.a1) {
			__u64 vec = 0;

			bpf_probe_read_user(&vec, sizeof(vec), (void *)(c->in.a1 + 16));
			first_iov(vec, n, &io.buf, &io.buflen);
		}
		break;
	case __NR_sendmmsg:
		io.out = true;
		/* fallthrough */
	case __NR_recvmmsg:
		if (n > 0) {
			io.msgs = n;
			n = mmsg_bytes(n, c->in.a1);
			io.uaddr = c->in.a1;
			io.indirect = true;
		} else {
			io.msgs = 0;
		}
		break;
	case __NR_write:
	case __NR_pwrite64:
		io.out = true;
		io.buf = c->in.a1;
		io.buflen = n > 0 ? n : 0;
		break;
	case __NR_writev:
	case __NR_pwritev:
	case __NR_pwritev2:
		io.out = true;
		if (n > 0)
			first_iov(c->in.a1, n, &io.buf, &io.buflen);
		break;
	}
	io.n = n;
	return fd_bytes(&io);
}

/* connections: accept, connect, listen */
SYS_HANDLER(sx_net)
{
	if (!c)
		return 0;
	switch (c->in.nr) {
	case __NR_accept:
	case __NR_accept4:
		on_accept(c->ret, c->tgid, c->now);
		break;
	case __NR_connect:
		on_connect(&c->in, c->ret, c->tgid, c->now);
		break;
	default: /* listen */
		on_listen(&c->in, c->ret, c->tgid);
	}
	return 0;
}

/* ---- TCP connect outcome, end of served connections ---- */

static __always_inline void req_end(struct req_state *r, __u64 now)
{
	struct tl_req_event *e = ring_reserve(sizeof(*e));

	if (!e)
		return;
	if (!r->bytes_out) /* nothing written: the request lasted until the close */
		req_faults_now(&r->at_write, r->tgid);
	e->ts_ns = r->start_ns;
	e->dur_ns = (r->bytes_out ? r->last_out_ns : now) - r->start_ns;
	e->type = EV_REQUEST;
	e->pid = r->tgid;
	e->tid = r->tid;
	e->port = r->port;
	e->close_ns = now;
	e->bytes_in = r->bytes_in;
	e->bytes_out = r->bytes_out;
	e->writes = r->writes;
	e->faults = r->at_write.faults - r->at_accept.faults;
	e->major_faults = r->at_write.major - r->at_accept.major;
	e->model_faults = r->at_write.model - r->at_accept.model;
	e->model_major_faults = r->at_write.model_major - r->at_accept.model_major;
	ev_submit_lazy(e);
}

/* struct sock before 6.x kept its flags itself (now sock_common's) */
struct sock___flags_own {
	unsigned long sk_flags;
} __attribute__((preserve_access_index));

/* The data a TCP socket moved, from its counters: what the application
 * wrote and what it was sent. The kernel's counters are not quite that:
 * bytes_received steps with rcv_nxt, which the peer's FIN moves by one
 * (then the socket is SOCK_DONE), and bytes_sent counts every copy sent,
 * retransmissions (bytes_retrans) included: a loaded machine retransmits
 * even over loopback. */
static __always_inline void tcp_data_bytes(const struct sock *sk, __u64 *rx, __u64 *tx)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	unsigned long flags;
	__u64 retrans = 0;

	*rx = BPF_CORE_READ(tp, bytes_received);
	*tx = BPF_CORE_READ(tp, bytes_sent);
	if (bpf_core_field_exists(tp->bytes_retrans))
		retrans = BPF_CORE_READ(tp, bytes_retrans);
	*tx = *tx > retrans ? *tx - retrans : 0;
	if (bpf_core_field_exists(sk->__sk_common.skc_flags))
		flags = BPF_CORE_READ(sk, __sk_common.skc_flags);
	else
		flags = BPF_CORE_READ((struct sock___flags_own *)sk, sk_flags);
	if (*rx && (flags & (1ul << bpf_core_enum_value(enum sock_flags, SOCK_DONE))))
		*rx -= 1;
}

/* [trace] syscalls = cheap: no read or write of a TCP socket is seen; when
 * a connection of the tree (accepted: r, or connected: p) ends, its
 * counters of bytes received and sent go where they would have been
 * counted, all at once (no TLS name from a first write, no reply sizes;
 * the request's end is the close). In the context of whoever closes it. */
static __always_inline void cheap_end(const struct sock *sk, struct req_state *r,
				      struct conn_val *p, __u64 now)
{
	__u64 rx, tx;
	struct peer_key pk;

	/* counted call by call already (libc's, libcio.bpf.c) */
	if ((r && (r->bytes_in || r->bytes_out || r->writes)) ||
	    (p && (p->bytes_in || p->bytes_out || p->writes)))
		return;
	tcp_data_bytes(sk, &rx, &tx);
	if (rx)
		peer_bytes((struct sock *)sk, rx, false, now, 1, 0, false, &pk);
	if (tx)
		peer_bytes((struct sock *)sk, tx, true, now, 1, 0, false, &pk);
	if (r) {
		r->bytes_in = rx;
		if (tx) {
			/* the closing thread's own faults, counted up to now */
			if ((bpf_get_current_pid_tgid() >> 32) == r->tgid)
				flt_sync_current(r->tgid, now);
			req_faults_now(&r->at_write, r->tgid);
			r->bytes_out = tx;
			r->writes = 1;
			r->last_out_ns = now;
		}
	}
	if (p) {
		p->bytes_in = rx;
		p->bytes_out = tx;
		p->writes = tx ? 1 : 0;
	}
}

SEC("raw_tp/inet_sock_set_state")
int BPF_PROG(inet_sock_set_state, const struct sock *sk, const int oldstate, const int newstate)
{
	__u64 key = (__u64)sk;
	struct conn_val *p;

	/* the server closed an accepted connection (or it was reset): the
	 * request is over */
	if (newstate == TL_TCP_FIN_WAIT1 || newstate == TL_TCP_LAST_ACK ||
	    newstate == TL_TCP_CLOSE) {
		struct req_state *r = bpf_map_lookup_elem(&reqs, &key);

		if (r) {
			if (targ_cheap)
				cheap_end(sk, r, NULL, bpf_ktime_get_ns());
			req_end(r, bpf_ktime_get_ns());
			bpf_map_delete_elem(&reqs, &key);
			return 0;
		}
	}
	if (newstate == TL_TCP_SYN_SENT) {
		/* connect(2) runs in the caller's context */
		__u32 tgid;
		struct conn_val init = {};

		if (!traced_now(&tgid))
			return 0;
		init.ts = bpf_ktime_get_ns();
		init.tgid = tgid;
		init.tid = (__u32)bpf_get_current_pid_tgid();
		bpf_map_update_elem(&conns, &key, &init, BPF_ANY);
		return 0;
	}
	/* the handshake ends in softirq context: not the caller's */
	p = bpf_map_lookup_elem(&conns, &key);
	if (!p)
		return 0;
	if (oldstate == TL_TCP_SYN_SENT) {
		p->done = 1;
		p->done_ns = bpf_ktime_get_ns();
		if (newstate == TL_TCP_ESTABLISHED) {
			p->ret = 0;
		} else {
			/* tcp_reset/tcp_write_err set sk_err before tcp_done: a
			 * refusal (RST), a timeout, ICMP unreachable; 0 when the
			 * caller closed the socket while it waited */
			p->closed = 1;
			p->ret = -BPF_CORE_READ(sk, sk_err);
		}
		/* not yet returned from connect(2): it reports the outcome */
		if (!p->async)
			return 0;
		conn_done(p, sk);
		if (p->closed)
			bpf_map_delete_elem(&conns, &key);
		return 0;
	}
	if (p->done && !p->closed &&
	    (newstate == TL_TCP_FIN_WAIT1 || newstate == TL_TCP_LAST_ACK ||
	     newstate == TL_TCP_CLOSE)) {
		struct tl_conn_event *c;

		if (targ_cheap)
			cheap_end(sk, NULL, p, bpf_ktime_get_ns());
		c = ring_reserve(sizeof(*c));
		if (c) {
			c->ts_ns = p->done_ns;
			c->dur_ns = bpf_ktime_get_ns() - p->done_ns;
			c->type = EV_CONN_END;
			c->pid = p->tgid;
			c->cookie = key;
			c->bytes_in = p->bytes_in;
			c->bytes_out = p->bytes_out;
			c->ended_by = newstate;
			c->pad = 0;
			c->reply_max = p->reply_max;
			c->writes = p->writes;
			if (p->writes >= 2 && p->bytes_in - p->in_at_out > c->reply_max)
				c->reply_max = p->bytes_in - p->in_at_out;
			ev_submit_urgent(c);
		}
		bpf_map_delete_elem(&conns, &key);
	}
	return 0;
}
