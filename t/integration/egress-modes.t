#!/bin/bash
# test: any stack
# Egress modes at create, through the public API, with real traffic from
# inside gVisor sandboxes to test hosts in network namespaces (egresslib.sh:
# nothing can leave the machine):
#  - deny_all (explicit, by blockOutbound, and the shipped default): TCP and
#    UDP to a public test host fail; block_outbound is true;
#  - open: public hosts answer (TCP and UDP); metadata, an internal range
#    (RFC 1918), CGNAT, the node (gateway and uplink address) and another
#    sandbox do not; block_outbound false;
#  - restricted: an allowed address on its allowed port and a host in an
#    allowed CIDR answer; another port of the allowed host, a host outside
#    the list, and an internal range or the metadata address even when listed
#    do not;
#  - malformed policies are 400s; every probe that must fail is also checked
#    at the test host (it logged no connection at that address);
#  - after destroy, nothing of the sandboxes is left in the uplink's nft
#    table (independent listing);
#  - a create whose rules cannot be installed (the nft transaction really
#    fails: the NAT set it adds to is gone) answers 503, its record is failed
#    and nothing of it is left.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/egresslib.sh"

plan 47

eg_world || bail "cannot build the test namespaces"
eg_use_world; r=$?; ok $r "the node agent runs its network in the test uplink $EUP"; [ $r = 0 ] || bail "the node agent did not come up in the test uplink"
eg_org it-egress

# ---- deny_all ----------------------------------------------------------------
eg_new '{"mode":"deny_all"}'
D=$SB_ID
is "$STATUS $(j .data.egress.mode) $(j .data.block_outbound)" "201 deny_all true" "deny_all: 201, shown as deny_all, block_outbound true"
probes "$D" tcp:192.0.2.10:8080 udp:192.0.2.10:5353 tcp:169.254.169.254:80 "tcp:$GW:8080"
is "${PROBE[tcp:192.0.2.10:8080]}" fail "deny_all: TCP to a public test host fails"
is "${PROBE[udp:192.0.2.10:5353]}" fail "deny_all: UDP to a public test host fails"
is "${PROBE[tcp:169.254.169.254:80]}" fail "deny_all: the metadata address fails"
is "${PROBE[tcp:$GW:8080]}" fail "deny_all: the node (gateway) fails"

eg_new ''
is "$STATUS $(j .data.egress.mode) $(j .data.block_outbound)" "201 deny_all true" "no egress: the shipped default deny_all"
req nginx DELETE "/sandboxes/$SB_ID" > /dev/null
sb_create nginx '{"specs":{"memory":256},"blockOutbound":true}'
is "$STATUS $(j .data.egress.mode) $(j .data.block_outbound)" "201 deny_all true" "blockOutbound true: deny_all"
req nginx DELETE "/sandboxes/$SB_ID" > /dev/null

# ---- open --------------------------------------------------------------------
eg_new '{"mode":"open"}'
O=$SB_ID
is "$STATUS $(j .data.egress.mode) $(j .data.block_outbound)" "201 open false" "open: 201, shown as open, block_outbound false"
probes "$O" tcp:192.0.2.10:8080 tcp:198.51.100.20:8080 udp:192.0.2.10:5353 tcp:169.254.169.254:80 \
	tcp:10.99.0.10:8080 tcp:100.64.0.10:8080 "tcp:$GW:8080" tcp:192.0.2.1:8080
is "${PROBE[tcp:192.0.2.10:8080]}" web "open: TCP to a public test host answers"
is "${PROBE[tcp:198.51.100.20:8080]}" web "open: another public test host answers"
is "${PROBE[udp:192.0.2.10:5353]}" udp "open: UDP to a public test host answers"
is "${PROBE[tcp:169.254.169.254:80]}" fail "open: the metadata address fails"
is "${PROBE[tcp:10.99.0.10:8080]}" fail "open: an internal range (10.0.0.0/8) fails"
is "${PROBE[tcp:100.64.0.10:8080]}" fail "open: CGNAT (100.64.0.0/10) fails"
is "${PROBE[tcp:$GW:8080]}" fail "open: the node's gateway address fails"
is "${PROBE[tcp:192.0.2.1:8080]}" fail "open: the node's uplink address fails"
is "$(reached 169.254.169.254)$(reached 10.99.0.10)$(reached 100.64.0.10)$(reached "$GW")$(reached 192.0.2.1)" 00000 \
	"open: no test host (nor the node) logged a connection at a blocked address"
ok '[ "$(reached 192.0.2.10)" -ge 1 ] && [ "$(reached 198.51.100.20)" -ge 1 ]' "open: the public test hosts logged the connections"

# another sandbox, listening: reachable from itself, not from the open one
req nginx POST "/sandboxes/$D/exec" '{"cmd":"python3 -m http.server 8080","background":true}'
is "$STATUS" 200 "a listener in the deny_all sandbox (background exec)"
DIP=$(sb_ip "$D")
like "$DIP" '^10\.213\.' "the deny_all sandbox's address ($DIP)"
self_http() { [ "$(SB_EXEC_TIMEOUT=10 sb_exec "$D" "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8080/', timeout=2).status)\" 2>/dev/null")" = 200 ]; }
wait_until 15 self_http
ok $? "...which answers inside its own sandbox"
is "$(sb_exec "$O" "python3 -c \"import socket; socket.create_connection(('$DIP', 8080), timeout=3); print('connected')\" 2>/dev/null || echo fail")" fail \
	"open: another sandbox ($DIP) cannot be reached"

# ---- restricted --------------------------------------------------------------
eg_new '{"mode":"restricted","allow":["192.0.2.10:8080","198.51.100.0/24","10.99.0.10","169.254.169.254"]}'
R=$SB_ID
is "$STATUS $(j .data.egress.mode) $(j -c .data.egress.allow) $(j .data.block_outbound)" \
	'201 restricted ["192.0.2.10:8080","198.51.100.0/24","10.99.0.10","169.254.169.254"] false' \
	"restricted: 201, shown with its allow list"
probes "$R" tcp:192.0.2.10:8080 tcp:192.0.2.10:8081 tcp:198.51.100.20:8080 tcp:203.0.113.30:8080 \
	udp:192.0.2.10:5353 tcp:10.99.0.10:8080 tcp:169.254.169.254:80 "tcp:$GW:8080"
is "${PROBE[tcp:192.0.2.10:8080]}" web "restricted: the allowed address on its allowed port answers"
is "${PROBE[tcp:192.0.2.10:8081]}" fail "restricted: another port of the allowed host fails"
is "${PROBE[tcp:198.51.100.20:8080]}" web "restricted: a host in the allowed CIDR answers"
is "${PROBE[tcp:203.0.113.30:8080]}" fail "restricted: a host outside the list fails"
is "${PROBE[udp:192.0.2.10:5353]}" fail "restricted: UDP to another port of the allowed host fails"
is "${PROBE[tcp:10.99.0.10:8080]}" fail "restricted: an internal range fails even when listed"
is "${PROBE[tcp:169.254.169.254:80]}" fail "restricted: the metadata address fails even when listed"
is "${PROBE[tcp:$GW:8080]}" fail "restricted: the node fails"
is "$(grep -c '^other-port ' "$EG_LOG")$(reached 203.0.113.30)$(reached 10.99.0.10)$(reached 169.254.169.254)" 0000 \
	"restricted: the test hosts logged nothing at a denied port or address"

# ---- malformed or unsupported policies -----------------------------------------
bad() {
	local before
	before=$(psql_q "SELECT count(*) FROM sandboxes WHERE status <> 'destroyed'")
	sb_create nginx "$1"
	is "$STATUS $(psql_q "SELECT count(*) FROM sandboxes WHERE status <> 'destroyed'")" "400 $before" "$2: 400, no record"
}
bad '{"egress":{"mode":"restricted"}}' "restricted without allow"
bad '{"egress":{"mode":"open","allow":["192.0.2.10"]}}' "open with an allow list"
bad '{"egress":{"mode":"restricted","allow":["192.0.2.10/24"]}}' "a CIDR with host bits set"
bad "{\"egress\":{\"mode\":\"restricted\",\"allow\":$(jq -nc '[range(51) | "192.0.2.\(.)"]')}}" "51 entries"
bad '{"egress":{"mode":"restricted","allow":["192.0.2.10:99999"]}}' "a port over 65535"

# ---- destroy leaves nothing ----------------------------------------------------
OIP=$(sb_ip "$O")
RIP=$(sb_ip "$R")
for id in "$D" "$O" "$R"; do req nginx DELETE "/sandboxes/$id" > /dev/null; done
wait_until 30 sb_gone "$D" "$O" "$R"
is "$(eg_nft_of "$D" "$DIP")$(eg_nft_of "$O" "$OIP")$(eg_nft_of "$R" "$RIP")" "$(printf '\n\n\n')" \
	"after destroy: no chain, map element, NAT membership, veth or netns of the three (nft list, ip link, /run/netns)"
is "$(in_eup nft list set inet sbx nat4 | grep -c elements)" 0 "the NAT set is empty"

# ---- a create whose rules cannot be installed -----------------------------------
# The NAT set an open sandbox joins is removed (the rule using it first), so
# the node's nft transaction for the new sandbox really fails.
eg_break_nft
ok $? "the uplink's NAT set is removed"
eg_new '{"mode":"open"}'
F=$SB_ID
is "$STATUS" 503 "open create while its rules cannot be installed: 503"
error_shape "." "...with an error message"
is "$(sb_db "$F" status)" failed "...its record is failed"
like "$(sb_db "$F" failure_reason)" "egress|nft" "...with the reason ($(sb_db "$F" failure_reason | head -c 120))"
wait_until 20 sb_gone "$F"
is "$(sb_leftovers "$F")" "" "...nothing of it is left on the node (runsc, mounts, dir, processes)"
is "$(eg_nft_of "$F")" "" "...nor in the uplink's nft table, links or netns"

finish
