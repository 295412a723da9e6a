/* test_peers: launcher/peers.c on hand-made bytes: the TLS ClientHello and
 * DNS answer parsers (whole, cut at every length, malformed), the names
 * table's choice of a name, and peer roles. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "peers.h"

/* A ClientHello record for host (NULL: without server_name), with another
 * extension before it as real clients send. Returns its length. */
static size_t hello(uint8_t *b, const char *host)
{
	size_t n = 0, hl = host ? strlen(host) : 0, ext_at, hs_at, body_at;

	b[n++] = 22; /* handshake */
	b[n++] = 3;
	b[n++] = 1;
	n += 2; /* record length, below */
	hs_at = n;
	b[n++] = 1; /* client_hello */
	n += 3;	    /* handshake length */
	body_at = n;
	b[n++] = 3;
	b[n++] = 3;
	memset(b + n, 0xab, 32); /* random */
	n += 32;
	b[n++] = 32; /* session id */
	memset(b + n, 0xcd, 32);
	n += 32;
	b[n++] = 0; /* 2 cipher suites */
	b[n++] = 4;
	b[n++] = 0x13;
	b[n++] = 0x01;
	b[n++] = 0x13;
	b[n++] = 0x02;
	b[n++] = 1; /* compression: null */
	b[n++] = 0;
	ext_at = n;
	n += 2;
	/* ec_point_formats first */
	b[n++] = 0;
	b[n++] = 11;
	b[n++] = 0;
	b[n++] = 2;
	b[n++] = 1;
	b[n++] = 0;
	if (host) {
		b[n++] = 0; /* server_name */
		b[n++] = 0;
		b[n++] = (uint8_t)((hl + 5) >> 8);
		b[n++] = (uint8_t)(hl + 5);
		b[n++] = (uint8_t)((hl + 3) >> 8);
		b[n++] = (uint8_t)(hl + 3);
		b[n++] = 0; /* host_name */
		b[n++] = (uint8_t)(hl >> 8);
		b[n++] = (uint8_t)hl;
		memcpy(b + n, host, hl);
		n += hl;
	}
	b[ext_at] = (uint8_t)((n - ext_at - 2) >> 8);
	b[ext_at + 1] = (uint8_t)(n - ext_at - 2);
	b[3] = (uint8_t)((n - hs_at) >> 8);
	b[4] = (uint8_t)(n - hs_at);
	b[hs_at + 1] = 0;
	b[hs_at + 2] = (uint8_t)((n - body_at) >> 8);
	b[hs_at + 3] = (uint8_t)(n - body_at);
	return n;
}

static void test_client_hello(void **state)
{
	uint8_t b[600];
	char host[PEER_HOST_MAX];
	size_t n = hello(b, "cas-bridge.xethub.hf.co");

	(void)state;
	assert_int_equal(peers_parse_client_hello(b, n, host, sizeof(host)), 0);
	assert_string_equal(host, "cas-bridge.xethub.hf.co");
	/* cut anywhere before the name's end: no name, never a read past n */
	for (size_t k = 0; k < n; k++)
		assert_int_equal(peers_parse_client_hello(b, k, host, sizeof(host)), -1);
	/* no server_name; not a handshake; a name that does not fit */
	n = hello(b, NULL);
	assert_int_equal(peers_parse_client_hello(b, n, host, sizeof(host)), -1);
	n = hello(b, "huggingface.co");
	b[0] = 23;
	assert_int_equal(peers_parse_client_hello(b, n, host, sizeof(host)), -1);
	b[0] = 22;
	assert_int_equal(peers_parse_client_hello(b, n, host, 8), -1);
	/* a name length pointing past the end */
	n = hello(b, "huggingface.co");
	b[n - 14 - 2] = 0x01;
	assert_int_equal(peers_parse_client_hello(b, n, host, sizeof(host)), -1);
}

/* A response to "name A" with a CNAME, then an A record (via pointers) */
static size_t dns_answer(uint8_t *b, unsigned flags)
{
	static const uint8_t q[] = {3,	 'c', 'd', 'n', 7,   'e', 'x', 'a', 'm', 'p', 'l',
				    'e', 3,   'c', 'o', 'm', 0,	  0,   1,   0,	 1};
	size_t n = 0;

	b[n++] = 0x12;
	b[n++] = 0x34;
	b[n++] = (uint8_t)(flags >> 8);
	b[n++] = (uint8_t)flags;
	b[n++] = 0; /* qd 1, an 3, ns 0, ar 0 */
	b[n++] = 1;
	b[n++] = 0;
	b[n++] = 3;
	memset(b + n, 0, 4);
	n += 4;
	memcpy(b + n, q, sizeof(q));
	n += sizeof(q);
	/* CNAME: cdn.example.com -> edge.example.com */
	b[n++] = 0xc0;
	b[n++] = 12;
	b[n++] = 0;
	b[n++] = 5;
	b[n++] = 0;
	b[n++] = 1;
	memset(b + n, 0, 4);
	n += 4;
	b[n++] = 0;
	b[n++] = 7;
	b[n++] = 4;
	memcpy(b + n, "edge", 4);
	n += 4;
	b[n++] = 0xc0;
	b[n++] = 16; /* example.com */
	/* A for edge.example.com (pointer to the CNAME's target at 12+21+12) */
	b[n++] = 0xc0;
	b[n++] = 12 + 21 + 12;
	b[n++] = 0;
	b[n++] = 1;
	b[n++] = 0;
	b[n++] = 1;
	memset(b + n, 0, 4);
	n += 4;
	b[n++] = 0;
	b[n++] = 4;
	b[n++] = 127;
	b[n++] = 0;
	b[n++] = 0;
	b[n++] = 3;
	/* AAAA */
	b[n++] = 0xc0;
	b[n++] = 12;
	b[n++] = 0;
	b[n++] = 28;
	b[n++] = 0;
	b[n++] = 1;
	memset(b + n, 0, 4);
	n += 4;
	b[n++] = 0;
	b[n++] = 16;
	memset(b + n, 0, 15);
	b[n + 15] = 1;
	n += 16;
	return n;
}

static void test_dns_answer(void **state)
{
	uint8_t b[300];
	char q[PEER_HOST_MAX];
	struct peer_addr a[8];
	size_t k, n = dns_answer(b, 0x8180);
	int rcode = -1;

	(void)state;
	assert_int_equal(peers_parse_dns(b, n, q, sizeof(q), &rcode, a, 8, &k), 0);
	assert_string_equal(q, "cdn.example.com");
	assert_int_equal(rcode, 0);
	assert_int_equal(k, 2);
	assert_int_equal(a[0].family, AF_INET);
	assert_memory_equal(a[0].addr, ((uint8_t[]){127, 0, 0, 3}), 4);
	assert_int_equal(a[1].family, AF_INET6);
	assert_int_equal(a[1].addr[15], 1);
	/* a copy cut short keeps the answers it holds */
	for (size_t cut = 0; cut < n; cut++) {
		int r = peers_parse_dns(b, cut, q, sizeof(q), &rcode, a, 8, &k);

		assert_true(r == -1 || k <= 2);
	}
	/* a query, not a response */
	n = dns_answer(b, 0x0100);
	assert_int_equal(peers_parse_dns(b, n, q, sizeof(q), &rcode, a, 8, &k), -1);
	/* NXDOMAIN */
	n = dns_answer(b, 0x8183);
	assert_int_equal(peers_parse_dns(b, n, q, sizeof(q), &rcode, a, 8, &k), 0);
	assert_int_equal(rcode, 3);
	/* a pointer loop ends */
	n = dns_answer(b, 0x8180);
	b[12] = 0xc0;
	b[13] = 12;
	assert_int_equal(peers_parse_dns(b, n, q, sizeof(q), &rcode, a, 8, &k), -1);
}

static void test_names_table(void **state)
{
	struct peer_names p = {0};
	struct peer_addr a = {.family = AF_INET};
	const struct peer_name *n;

	(void)state;
	inet_pton(AF_INET, "127.0.0.3", a.addr);
	assert_int_equal(peers_add(&p, &a, 0, "127.0.0.3", PEER_SRC_GETADDRINFO, 1), -1);
	assert_int_equal(peers_add(&p, &a, 0, "bad name", PEER_SRC_GETADDRINFO, 1), -1);
	assert_int_equal(peers_add(&p, &a, 0, "Transfer.XetHub.hf.co.", PEER_SRC_DNS, 1), 0);
	n = peers_lookup(&p, &a, 443);
	assert_non_null(n);
	assert_string_equal(n->host, "transfer.xethub.hf.co");
	/* getaddrinfo beats DNS, the earliest first */
	peers_add(&p, &a, 0, "transfer.xethub.hf.co", PEER_SRC_GETADDRINFO, 5);
	peers_add(&p, &a, 0, "cas-bridge.xethub.hf.co", PEER_SRC_GETADDRINFO, 3);
	assert_string_equal(peers_lookup(&p, &a, 443)->host, "cas-bridge.xethub.hf.co");
	assert_int_equal(peers_lookup(&p, &a, 443)->source, PEER_SRC_GETADDRINFO);
	/* a TLS name holds for its port only, and beats the rest there */
	peers_add(&p, &a, 8443, "other.example", PEER_SRC_SNI, 9);
	assert_string_equal(peers_lookup(&p, &a, 8443)->host, "other.example");
	assert_string_equal(peers_lookup(&p, &a, 443)->host, "cas-bridge.xethub.hf.co");
	a.addr[3] = 9;
	assert_null(peers_lookup(&p, &a, 443));
	peers_free(&p);
}

static void test_roles(void **state)
{
	char h[64];

	(void)state;
	assert_string_equal(peers_role("huggingface.co", 443, false, NULL), "hub");
	assert_string_equal(peers_role("cas-bridge.xethub.hf.co", 443, false, NULL), "cas");
	assert_string_equal(peers_role("cdn-lfs-us-1.hf.co", 443, false, NULL), "cas");
	assert_string_equal(peers_role("modelscope.cn", 443, false, NULL), "modelscope");
	assert_string_equal(peers_role("www.modelscope.cn", 443, false, NULL), "modelscope");
	assert_string_equal(peers_role("hf-mirror.com", 443, false, NULL), "mirror");
	assert_string_equal(peers_role("hf.example.org", 443, false, "https://hf.example.org"),
			    "mirror");
	assert_string_equal(peers_role("api.gradio.app", 443, false, NULL), "other");
	assert_string_equal(peers_role("notmodelscope.cn", 443, false, NULL), "other");
	assert_string_equal(peers_role(NULL, 53, false, NULL), "dns");
	assert_string_equal(peers_role("huggingface.co", 443, true, NULL), "client");
	assert_string_equal(peers_role(NULL, 9, false, NULL), "other");
	assert_true(peers_url_host("https://HF-Mirror.com:8443/x", h, sizeof(h)));
	assert_string_equal(h, "hf-mirror.com");
	assert_true(peers_url_host("http://[::1]:80", h, sizeof(h)));
	assert_string_equal(h, "::1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_client_hello),
	    cmocka_unit_test(test_dns_answer),
	    cmocka_unit_test(test_names_table),
	    cmocka_unit_test(test_roles),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
