/* A sandbox's egress policy: its mode and allow list, parsed from what the
 * API stored ({mode, allow:[...]}) by both sbx-api (validation, 400 with the
 * entry named) and the node agent (which re-checks every queue message).
 * doc/network.md says how a policy becomes nftables rules. */
#ifndef SBX_EGRESS_POLICY_H
#define SBX_EGRESS_POLICY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "err.h"

#define SBX_EGRESS_MAX_ALLOW 50

enum sbx_egress_mode { SBX_EGRESS_DENY_ALL = 0, SBX_EGRESS_OPEN, SBX_EGRESS_RESTRICTED };

/* One allow entry: "A.B.C.D", "A.B.C.D/LEN" or a hostname, each optionally
 * followed by ":PORT" (extension: TCP and UDP to that port only). */
struct sbx_egress_entry {
	uint32_t net;  /* host order; masked to len (0 for a hostname) */
	int len;       /* prefix length 0..32 (32 for an address) */
	int port;      /* 1..65535, 0: every port */
	char host[254]; /* lowercase hostname without a trailing dot; "" for an address */
};

struct sbx_egress {
	enum sbx_egress_mode mode;
	size_t n;
	struct sbx_egress_entry allow[SBX_EGRESS_MAX_ALLOW];
};

/* "deny_all" | "open" | "restricted" -> the mode; -1 for anything else. */
int sbx_egress_mode_parse(const char *s);
const char *sbx_egress_mode_name(enum sbx_egress_mode m);

/* One entry; 400 "invalid_field" naming it (a CIDR with host bits set, a
 * prefix over 32, a port of 0 or over 65535, a malformed name). */
int sbx_egress_entry_parse(const char *s, struct sbx_egress_entry *e, sbx_err *err);

/* mode + allow (a JSON array of strings, or NULL): restricted needs 1..50
 * entries, the other modes none. 400 "invalid_field" otherwise. */
int sbx_egress_parse(const char *mode, const json_t *allow, struct sbx_egress *out, sbx_err *err);

#endif
