/* peers: who the service's network peers are. A names table (address ->
 * host name, and where the name came from: the service's getaddrinfo call,
 * the TLS server name it sent, a DNS answer it read), filled from the
 * kernel side's EV_NAME and EV_PAYLOAD records (bpf/names.bpf.c); the
 * parsers of a TLS ClientHello and a DNS answer (pure functions over
 * bytes, unit-tested and fuzzed); the role of a peer (hub, cas, modelscope,
 * mirror, dns, client, other); and doctor's check that the hub's names
 * resolve. No JSON here: timeline_net.c writes what it finds. */
#ifndef TTS_PEERS_H
#define TTS_PEERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trace.h"

#define PEER_HOST_MAX 256 /* a DNS name is at most 253 characters */

enum peer_source {
	PEER_SRC_NONE = 0,
	PEER_SRC_GETADDRINFO, /* the name the service asked libc for */
	PEER_SRC_SNI,	      /* the server name of its TLS ClientHello */
	PEER_SRC_DNS,	      /* an A/AAAA answer it received */
};

/* "getaddrinfo", "sni", "dns" (the timeline's host_source), NULL for none */
const char *peer_source_name(enum peer_source s);

struct peer_addr {
	int family; /* AF_INET, AF_INET6 */
	uint8_t addr[16];
};

/* One (address, name) pair seen; port: the connection's for a TLS name,
 * 0 for names that hold for any port. */
struct peer_name {
	struct peer_addr a;
	int port;
	char host[PEER_HOST_MAX];
	enum peer_source source;
	double ms;
};

/* One name look-up of the service (getaddrinfo, or a DNS answer read) */
struct peer_lookup {
	char host[PEER_HOST_MAX];
	enum peer_source source;
	int ret; /* getaddrinfo's (0 or EAI_*); DNS: the answer's rcode */
	double ms, dur_ms;
	int pid;
	size_t n_addrs; /* distinct addresses (at most TRACE_NAME_ADDRS kept) */
	struct peer_addr addrs[TRACE_NAME_ADDRS];
};

struct peer_names {
	struct peer_name *v;
	size_t n, cap;
	struct peer_lookup *look;
	size_t n_look, cap_look;
	unsigned long long dropped; /* past the caps below */
};

#define PEER_NAMES_MAX	 4096
#define PEER_LOOKUPS_MAX 4096

void peers_free(struct peer_names *p);

/* The kernel side's records (collector.c): a getaddrinfo call that
 * returned; a TLS hello or a DNS answer. ms: the record's time. */
void peers_on_name(struct peer_names *p, const struct tl_name_event *e, double ms);
void peers_on_payload(struct peer_names *p, const struct tl_payload_event *e, double ms);

/* Adds (a, port, host) unless already there; host is checked (a DNS name,
 * not an address literal) and lowercased. 0, or -1 when refused. */
int peers_add(struct peer_names *p, const struct peer_addr *a, int port, const char *host,
	      enum peer_source src, double ms);

/* The name of peer a:port: the TLS name sent on a connection to that
 * address and port, else the first name the service looked up for the
 * address, else the first DNS answer naming it; NULL when none. */
const struct peer_name *peers_lookup(const struct peer_names *p, const struct peer_addr *a,
				     int port);

/* The server_name of a TLS ClientHello record (the first bytes written
 * on a connection: record header, handshake header, hello). 0 with host
 * set, -1 when buf is not a hello or has no server name in its n bytes. */
int peers_parse_client_hello(const uint8_t *buf, size_t n, char *host, size_t hostlen);

/* A DNS response: its question name into qname, its rcode into *rcode,
 * its A/AAAA answers (any owner name: a CNAME chain's end belongs to the
 * question) into out[0..max), their count into *n_out. 0, or -1 when buf is
 * not a response. */
int peers_parse_dns(const uint8_t *buf, size_t n, char *qname, size_t qlen, int *rcode,
		    struct peer_addr *out, size_t max, size_t *n_out);

/* The role of a peer (docs/timeline.md): "client" (inbound), "dns" (port
 * 53), "hub" (huggingface.co, or HF_ENDPOINT's host when that is it), "cas"
 * (*.xethub.hf.co, cdn-lfs*.hf.co), "modelscope" (modelscope.cn and its
 * subdomains), "mirror" (hf-mirror.com, or an HF_ENDPOINT host that is not
 * huggingface.co), else "other". endpoint: HF_ENDPOINT or NULL. */
const char *peers_role(const char *host, int port, bool inbound, const char *endpoint);

/* The host of a URL ("https://hf-mirror.com:443/x" -> "hf-mirror.com"),
 * lowercased, into out; false when there is none. */
bool peers_url_host(const char *url, char *out, size_t len);

/* doctor: whether each name of the hub, the CAS and ModelScope (and
 * HF_ENDPOINT's host) resolves here, each within timeout_ms; one line per
 * name on out. The number that did not resolve. */
int peers_doctor_resolve(FILE *out, const char *endpoint, int timeout_ms);

#endif
