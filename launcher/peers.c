/* peers: the names table, the ClientHello and DNS parsers, peer roles and
 * doctor's name check; see peers.h. */
#include "peers.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *peer_source_name(enum peer_source s)
{
	switch (s) {
	case PEER_SRC_GETADDRINFO:
		return "getaddrinfo";
	case PEER_SRC_SNI:
		return "sni";
	case PEER_SRC_DNS:
		return "dns";
	default:
		return NULL;
	}
}

void peers_free(struct peer_names *p)
{
	if (!p)
		return;
	free(p->v);
	free(p->look);
	memset(p, 0, sizeof(*p));
}

/* A host name as DNS allows it (letters, digits, '-', '_', dots between
 * labels of 1-63), lowercased into out; an address literal is not a name. */
static bool clean_host(const char *in, char *out, size_t len)
{
	size_t n = strnlen(in, PEER_HOST_MAX), label = 0;
	uint8_t tmp[16];

	if (!n || n > 253 || n >= len)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)in[i];

		if (ch == '.') {
			if (!label)
				return false;
			label = 0;
		} else if (isalnum(ch) || ch == '-' || ch == '_') {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
		out[i] = (char)tolower(ch);
	}
	out[n] = 0;
	if (out[n - 1] == '.') /* the root's dot */
		out[n - 1] = 0;
	return *out && inet_pton(AF_INET, out, tmp) != 1 && inet_pton(AF_INET6, out, tmp) != 1;
}

static bool same_addr(const struct peer_addr *a, const struct peer_addr *b)
{
	return a->family == b->family &&
	       !memcmp(a->addr, b->addr, a->family == AF_INET ? 4 : sizeof(a->addr));
}

int peers_add(struct peer_names *p, const struct peer_addr *a, int port, const char *host,
	      enum peer_source src, double ms)
{
	char h[PEER_HOST_MAX];
	struct peer_name *n;

	if (!p || !a || !host || (a->family != AF_INET && a->family != AF_INET6) ||
	    !clean_host(host, h, sizeof(h)))
		return -1;
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].source == src && p->v[i].port == port && same_addr(&p->v[i].a, a) &&
		    !strcmp(p->v[i].host, h))
			return 0;
	if (p->n >= PEER_NAMES_MAX) {
		p->dropped++;
		return -1;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;

		n = realloc(p->v, cap * sizeof(*n));
		if (!n)
			return -1;
		p->v = n;
		p->cap = cap;
	}
	n = &p->v[p->n++];
	memset(n, 0, sizeof(*n));
	n->a = *a;
	if (a->family == AF_INET)
		memset(n->a.addr + 4, 0, sizeof(n->a.addr) - 4);
	n->port = port;
	snprintf(n->host, sizeof(n->host), "%s", h);
	n->source = src;
	n->ms = ms;
	return 0;
}

const struct peer_name *peers_lookup(const struct peer_names *p, const struct peer_addr *a,
				     int port)
{
	static const enum peer_source order[] = {PEER_SRC_SNI, PEER_SRC_GETADDRINFO, PEER_SRC_DNS};

	if (!p || !a)
		return NULL;
	for (size_t o = 0; o < sizeof(order) / sizeof(order[0]); o++) {
		const struct peer_name *best = NULL;

		for (size_t i = 0; i < p->n; i++) {
			const struct peer_name *n = &p->v[i];

			if (n->source != order[o] || !same_addr(&n->a, a) ||
			    (n->source == PEER_SRC_SNI && n->port != port))
				continue;
			if (!best || n->ms < best->ms)
				best = n;
		}
		if (best)
			return best;
	}
	return NULL;
}

/* A look-up of the service, for the timeline's names section: its distinct
 * addresses (a result list repeats each per socket type). */
static struct peer_lookup *lookup_new(struct peer_names *p, const char *host, enum peer_source s,
				      int ret, double ms, double dur_ms, int pid)
{
	struct peer_lookup *l;

	if (p->n_look >= PEER_LOOKUPS_MAX) {
		p->dropped++;
		return NULL;
	}
	if (p->n_look == p->cap_look) {
		size_t cap = p->cap_look ? p->cap_look * 2 : 16;

		l = realloc(p->look, cap * sizeof(*l));
		if (!l)
			return NULL;
		p->look = l;
		p->cap_look = cap;
	}
	l = &p->look[p->n_look++];
	memset(l, 0, sizeof(*l));
	snprintf(l->host, sizeof(l->host), "%s", host);
	l->source = s;
	l->ret = ret;
	l->ms = ms;
	l->dur_ms = dur_ms;
	l->pid = pid;
	return l;
}

static void lookup_addr(struct peer_lookup *l, const struct peer_addr *a)
{
	for (size_t i = 0; i < l->n_addrs; i++)
		if (same_addr(&l->addrs[i], a))
			return;
	if (l->n_addrs < TRACE_NAME_ADDRS)
		l->addrs[l->n_addrs++] = *a;
}

void peers_on_name(struct peer_names *p, const struct tl_name_event *e, double ms)
{
	char name[TRACE_HOST_MAX + 1], h[PEER_HOST_MAX];
	struct peer_lookup *l;
	size_t n;

	if (!p || !e)
		return;
	memcpy(name, e->name, TRACE_HOST_MAX);
	name[TRACE_HOST_MAX] = 0;
	/* "127.0.0.1", "localhost.": only real names are worth a row */
	if (!clean_host(name, h, sizeof(h)))
		return;
	l = lookup_new(p, h, PEER_SRC_GETADDRINFO, e->ret, ms, (double)e->dur_ns / 1e6,
		       (int)e->pid);
	n = e->n_addrs < TRACE_NAME_ADDRS ? e->n_addrs : TRACE_NAME_ADDRS;
	for (size_t i = 0; e->ret == 0 && i < n; i++) {
		struct peer_addr a = {.family = e->addrs[i].family};

		if (a.family != AF_INET && a.family != AF_INET6)
			continue;
		memcpy(a.addr, e->addrs[i].addr, a.family == AF_INET ? 4 : 16);
		if (l)
			lookup_addr(l, &a);
		peers_add(p, &a, 0, h, PEER_SRC_GETADDRINFO, ms);
	}
}

void peers_on_payload(struct peer_names *p, const struct tl_payload_event *e, double ms)
{
	size_t n;
	char host[PEER_HOST_MAX];

	if (!p || !e)
		return;
	n = e->len < TRACE_PAYLOAD_MAX ? e->len : TRACE_PAYLOAD_MAX;
	if (e->kind == PAYLOAD_TLS_HELLO) {
		struct peer_addr a = {.family = e->family};

		memcpy(a.addr, e->addr, sizeof(a.addr));
		if (!peers_parse_client_hello((const uint8_t *)e->data, n, host, sizeof(host)))
			peers_add(p, &a, e->port, host, PEER_SRC_SNI, ms);
	} else if (e->kind == PAYLOAD_DNS_ANSWER) {
		struct peer_addr out[TRACE_NAME_ADDRS];
		size_t k = 0;
		int rcode = 0;
		struct peer_lookup *l;
		char h[PEER_HOST_MAX];

		if (peers_parse_dns((const uint8_t *)e->data, n, host, sizeof(host), &rcode, out,
				    TRACE_NAME_ADDRS, &k) ||
		    !clean_host(host, h, sizeof(h)) || (!rcode && !k))
			return; /* not an answer, or one without an address (an AAAA NODATA) */
		l = lookup_new(p, h, PEER_SRC_DNS, rcode, ms, 0, (int)e->pid);
		for (size_t i = 0; i < k; i++) {
			if (l)
				lookup_addr(l, &out[i]);
			peers_add(p, &out[i], 0, h, PEER_SRC_DNS, ms);
		}
	}
}

/* ---- parsers: every read checked against n ---- */

static unsigned be16(const uint8_t *b) { return (unsigned)b[0] << 8 | b[1]; }

int peers_parse_client_hello(const uint8_t *buf, size_t n, char *host, size_t hostlen)
{
	size_t end, at, ext_end;

	if (!buf || !host || !hostlen)
		return -1;
	*host = 0;
	/* record: type 22 (handshake), version 3.x, length */
	if (n < 9 || buf[0] != 22 || buf[1] != 3)
		return -1;
	end = 5 + be16(buf + 3);
	if (end > n)
		end = n; /* a bounded copy: the hello's start is enough */
	/* handshake: type 1 (client_hello), 24-bit length */
	if (buf[5] != 1)
		return -1;
	at = 9 + 2 + 32; /* client version, random */
	if (at + 1 > end)
		return -1;
	at += 1 + buf[at]; /* session id */
	if (at + 2 > end)
		return -1;
	at += 2 + be16(buf + at); /* cipher suites */
	if (at + 1 > end)
		return -1;
	at += 1 + buf[at]; /* compression methods */
	if (at + 2 > end)
		return -1;
	ext_end = at + 2 + be16(buf + at);
	at += 2;
	if (ext_end > end)
		ext_end = end;
	while (at + 4 <= ext_end) {
		unsigned type = be16(buf + at), len = be16(buf + at + 2);
		size_t data = at + 4, list_end;

		at = data + len;
		if (type != 0) /* server_name (RFC 6066) */
			continue;
		if (data + 2 > ext_end)
			return -1;
		list_end = data + 2 + be16(buf + data);
		if (list_end > ext_end)
			list_end = ext_end;
		for (size_t q = data + 2; q + 3 <= list_end;) {
			unsigned nt = buf[q], nl = be16(buf + q + 1);

			if (q + 3 + nl > list_end)
				return -1;
			if (nt == 0 && nl > 0 && nl < hostlen) { /* host_name */
				memcpy(host, buf + q + 3, nl);
				host[nl] = 0;
				if (memchr(host, 0, nl))
					return -1;
				return 0;
			}
			q += 3 + nl;
		}
		return -1;
	}
	return -1;
}

/* The name at *at (labels, compression pointers followed a bounded number
 * of times) into out (may be NULL: skipped); *at moves past it. */
static int dns_name(const uint8_t *buf, size_t n, size_t *at, char *out, size_t outlen)
{
	size_t p = *at, o = 0;
	bool jumped = false;

	for (int hops = 0; hops < 64; hops++) {
		unsigned len;

		if (p >= n)
			return -1;
		len = buf[p];
		if (len == 0) {
			if (!jumped)
				*at = p + 1;
			if (out) {
				if (o)
					o--; /* the last label's dot */
				if (o >= outlen)
					return -1;
				out[o] = 0;
			}
			return 0;
		}
		if ((len & 0xc0) == 0xc0) {
			if (p + 2 > n)
				return -1;
			if (!jumped)
				*at = p + 2;
			jumped = true;
			p = (len & 0x3f) << 8 | buf[p + 1];
			continue;
		}
		if (len > 63 || p + 1 + len > n)
			return -1;
		if (out) {
			if (o + len + 1 >= outlen)
				return -1;
			memcpy(out + o, buf + p + 1, len);
			o += len;
			out[o++] = '.';
		}
		p += 1 + len;
	}
	return -1;
}

int peers_parse_dns(const uint8_t *buf, size_t n, char *qname, size_t qlen, int *rcode,
		    struct peer_addr *out, size_t max, size_t *n_out)
{
	unsigned flags, qd, an;
	size_t at = 12;

	if (n_out)
		*n_out = 0;
	if (!buf || !qname || !qlen || n < 12)
		return -1;
	flags = be16(buf + 2);
	qd = be16(buf + 4);
	an = be16(buf + 6);
	if (!(flags & 0x8000) || qd != 1) /* a response to one question */
		return -1;
	if (rcode)
		*rcode = (int)(flags & 0xf);
	if (dns_name(buf, n, &at, qname, qlen) || at + 4 > n)
		return -1;
	at += 4; /* qtype, qclass */
	for (unsigned i = 0; i < an && i < 64; i++) {
		unsigned type, klass, rdlen;

		if (dns_name(buf, n, &at, NULL, 0) || at + 10 > n)
			break; /* a cut copy: the answers so far count */
		type = be16(buf + at);
		klass = be16(buf + at + 2);
		rdlen = be16(buf + at + 8);
		at += 10;
		if (at + rdlen > n)
			break;
		if (klass == 1 && out && n_out && *n_out < max &&
		    ((type == 1 && rdlen == 4) || (type == 28 && rdlen == 16))) {
			struct peer_addr *a = &out[(*n_out)++];

			memset(a, 0, sizeof(*a));
			a->family = type == 1 ? AF_INET : AF_INET6;
			memcpy(a->addr, buf + at, rdlen);
		}
		at += rdlen;
	}
	return 0;
}

/* ---- roles ---- */

static bool ends_with_label(const char *host, const char *domain)
{
	size_t h = strlen(host), d = strlen(domain);

	return h == d ? !strcmp(host, domain)
		      : h > d && host[h - d - 1] == '.' && !strcmp(host + h - d, domain);
}

bool peers_url_host(const char *url, char *out, size_t len)
{
	const char *h, *e;
	size_t n;

	if (!url || !out || !len)
		return false;
	h = strstr(url, "://");
	h = h ? h + 3 : url;
	if (*h == '[') { /* [v6]:port */
		e = strchr(h, ']');
		if (!e)
			return false;
		h++;
	} else {
		e = h + strcspn(h, ":/?#");
	}
	n = (size_t)(e - h);
	if (!n || n >= len)
		return false;
	for (size_t i = 0; i < n; i++)
		out[i] = (char)tolower((unsigned char)h[i]);
	out[n] = 0;
	return true;
}

const char *peers_role(const char *host, int port, bool inbound, const char *endpoint)
{
	char ep[PEER_HOST_MAX] = "";

	if (inbound)
		return "client";
	if (port == 53)
		return "dns";
	if (!host)
		return "other";
	if (endpoint)
		peers_url_host(endpoint, ep, sizeof(ep));
	if (!strcmp(host, "huggingface.co"))
		return "hub";
	if (ends_with_label(host, "xethub.hf.co") ||
	    (!strncmp(host, "cdn-lfs", 7) &&
	     (ends_with_label(host, "hf.co") || ends_with_label(host, "huggingface.co"))))
		return "cas";
	if (ends_with_label(host, "modelscope.cn"))
		return "modelscope";
	if (!strcmp(host, "hf-mirror.com") || (*ep && !strcmp(host, ep)))
		return "mirror";
	return "other";
}

/* ---- doctor ---- */

static double mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* One look-up in the child: "OK ADDR" or "ERR MESSAGE", a line per name */
static void resolve_one(int fd, const char *name)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	char addr[INET6_ADDRSTRLEN] = "?", line[300];
	int err = getaddrinfo(name, NULL, &hints, &ai);

	if (!err && ai && ai->ai_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ai->ai_addr)->sin_addr, addr,
			  sizeof(addr));
	else if (!err && ai && ai->ai_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, addr,
			  sizeof(addr));
	snprintf(line, sizeof(line), "%s %s\n", err ? "ERR" : "OK", err ? gai_strerror(err) : addr);
	if (ai)
		freeaddrinfo(ai);
	if (write(fd, line, strlen(line)) < 0)
		_exit(1);
}

int peers_doctor_resolve(FILE *out, const char *endpoint, int timeout_ms)
{
	const char *roles[4] = {"hub name", "CAS name", "ModelScope name", "HF_ENDPOINT name"};
	const char *names[4];
	char ep[PEER_HOST_MAX], buf[4 * 320] = "", *lines[4] = {0};
	double deadline = mono_ms() + timeout_ms;
	size_t n = 0, got = 0;
	int bad = 0, p[2];
	pid_t pid;

	names[n++] = "huggingface.co";
	names[n++] = "cas-bridge.xethub.hf.co";
	names[n++] = "modelscope.cn";
	if (endpoint && peers_url_host(endpoint, ep, sizeof(ep)) && strcmp(ep, names[0]))
		names[n++] = ep;
	/* The look-ups run in a child process, bounded by one deadline: an
	 * unreachable name server costs timeout_ms, and a look-up still
	 * running when we give up dies with the child (no resolver thread
	 * left behind in the doctor). */
	fflush(out);
	if (pipe2(p, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		fprintf(out, "%-4s  %-22s %s\n", "WARN", "hub names",
			"could not start name look-ups");
		return (int)n;
	}
	if (pid == 0) {
		close(p[0]);
		for (size_t i = 0; i < n; i++)
			resolve_one(p[1], names[i]);
		_exit(0);
	}
	close(p[1]);
	for (;;) {
		double left = deadline - mono_ms();
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		ssize_t r;

		if (left <= 0 || poll(&pf, 1, (int)left + 1) <= 0)
			break;
		r = read(p[0], buf + got, sizeof(buf) - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got >= sizeof(buf) - 1)
			break;
	}
	buf[got] = 0;
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(p[0]);
	/* complete lines only, in the order asked */
	for (size_t i = 0, k = 0; i < n && buf[k]; i++) {
		char *nl = strchr(buf + k, '\n');

		if (!nl)
			break;
		*nl = 0;
		lines[i] = buf + k;
		k = (size_t)(nl - buf) + 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (lines[i] && !strncmp(lines[i], "OK ", 3)) {
			fprintf(out, "%-4s  %-22s %s resolves to %s\n", "OK", roles[i], names[i],
				lines[i] + 3);
			continue;
		}
		bad++;
		fprintf(out,
			"%-4s  %-22s %s does not resolve (%s): downloads from it will fail "
			"(with every model present, HF_HUB_OFFLINE=1; else fix the resolver or "
			"set HF_ENDPOINT to a mirror)\n",
			"WARN", roles[i], names[i],
			lines[i] && !strncmp(lines[i], "ERR ", 4) ? lines[i] + 4
								  : "no answer in time");
	}
	return bad;
}
