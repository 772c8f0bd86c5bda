/* libFuzzer target: the parsers of outside input that egress adds. Byte 0
 * picks one:
 *  - an egress allow entry (API body) through sbx_egress_entry_parse:
 *    accepted entries are an address/CIDR with host bits clear and len
 *    0..32, or a lowercase hostname; ports 0 (none) or 1..65535; errors 400;
 *  - a DNS query from a sandbox through dns_parse_query and, when it
 *    parses, dns_build_answer (the forwarder's path): the name is a C string
 *    that fits, the answer fits its buffer and echoes the question;
 *  - (byte 0 == 2 mod 4) an answer from the resolver through
 *    dns_parse_answer for the name it asked (the node's re-resolution):
 *    at most DNS_MAX_ADDRS addresses, sorted without duplicates, the TTL
 *    clamped. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "dns.h"
#include "egress_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1) {
		sbx_err err = SBX_ERR_INIT;
		struct sbx_egress_entry e;
		char *s = malloc(size);
		if (!s)
			return 0;
		memcpy(s, data + 1, size - 1);
		s[size - 1] = 0;
		if (sbx_egress_entry_parse(s, &e, &err) == 0) {
			require(e.port >= 0 && e.port <= 65535);
			if (e.host[0]) {
				require(strlen(e.host) <= 253);
				for (const char *p = e.host; *p; p++)
					require(!(*p >= 'A' && *p <= 'Z'));
			} else {
				require(e.len >= 0 && e.len <= 32);
				require(e.len == 32 || (e.net & ~(e.len ? 0xffffffffu << (32 - e.len) : 0u)) == 0);
			}
		} else {
			require(err.http == 400 && err.msg[0]);
		}
		free(s);
	} else if ((data[0] & 3) == 2) {
		struct dns_addrs a;
		static const char *const names[] = { "api.example.test", "a.b", "x" };
		if (dns_parse_answer(data + 1, size - 1, names[(data[0] >> 2) % 3], &a) == 0) {
			require(a.n <= DNS_MAX_ADDRS && a.ttl >= DNS_TTL_MIN && a.ttl <= DNS_TTL_MAX);
			for (size_t i = 1; i < a.n; i++)
				require(a.a[i - 1] < a.a[i]);
		}
	} else {
		char name[256];
		uint16_t qtype;
		size_t qend;
		uint8_t out[1500];
		struct dns_addrs a = { .n = DNS_MAX_ADDRS, .ttl = 5 };
		if (dns_parse_query(data + 1, size - 1, name, sizeof(name), &qtype, &qend) == 0) {
			int n;
			require(strlen(name) < sizeof(name) && qend <= size - 1);
			n = dns_build_answer(data + 1, qend, 0, &a, qtype, out, sizeof(out));
			require(n < 0 || ((size_t)n >= qend && (size_t)n <= sizeof(out) && !memcmp(out + 12, data + 13, qend - 12)));
		}
	}
	return 0;
}
