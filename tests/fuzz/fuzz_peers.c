/* fuzz_peers: the two parsers of bytes from the wire in launcher/peers.c,
 * a TLS ClientHello (the first write of a connection) and a DNS answer (a
 * datagram from port 53), on the same input, at the kernel side's bound
 * (TRACE_PAYLOAD_MAX) and beyond; then the names table with what they gave. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "peers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char host[PEER_HOST_MAX], q[PEER_HOST_MAX];
	struct peer_addr a[TRACE_NAME_ADDRS];
	struct peer_names p = {0};
	size_t k = 0;
	int rcode;

	if (!peers_parse_client_hello(data, size, host, sizeof(host))) {
		struct peer_addr any = {.family = 2, .addr = {127, 0, 0, 1}};

		peers_add(&p, &any, 443, host, PEER_SRC_SNI, 0);
	}
	if (!peers_parse_dns(data, size, q, sizeof(q), &rcode, a, TRACE_NAME_ADDRS, &k))
		for (size_t i = 0; i < k; i++) {
			peers_add(&p, &a[i], 0, q, PEER_SRC_DNS, 1);
			peers_lookup(&p, &a[i], 443);
		}
	/* a host buffer of every small size */
	for (size_t len = 1; len < 8 && size; len++)
		peers_parse_client_hello(data, size, host, len);
	peers_free(&p);
	return 0;
}
