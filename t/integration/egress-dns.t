#!/bin/bash
# test: any stack
# Hostnames in a restricted allow list: the node resolves them (at the
# resolver the test runs on its test host, net_resolver) and allows exactly
# those addresses; GET shows them (egress.resolved). Inside the sandbox,
# /etc/resolv.conf names the gateway, whose forwarder answers an allowed
# name with those addresses and refuses any other name (never asking
# upstream for it); the allowed name works by name, a non-allowed name's
# address does not. When the record changes, the node follows within its
# TTL: the new address is allowed, the old one no longer is, and GET shows
# it. An open sandbox resolves any name through the forwarder; a deny_all
# sandbox resolves nothing. A switch to restricted with a hostname works on
# a running sandbox too. Test world: egresslib.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/egresslib.sh"

plan 36

eg_world || bail "cannot build the test namespaces"
ZONE=$T_TMP/zone.json
QLOG=$T_TMP/queries.log
: > "$QLOG"
echo '{"api.egress.test": ["198.51.100.20"], "other.egress.test": ["203.0.113.30"]}' > "$ZONE"
nsenter --net="/run/netns/$EPUB" -- python3 "$SBX_REPO/t/integration/dnsserver.py" 192.0.2.10 53 "$ZONE" "$QLOG" > /dev/null 2>&1 &
EG_PIDS+=($!)
wait_until 30 bash -c "nsenter --net=/run/netns/$EPUB -- ss -lunH | grep -q '192.0.2.10:53 '"
ok $? "the test's DNS server answers on 192.0.2.10:53"
eg_use_world; r=$?; ok $r "the node agent runs its network in the test uplink $EUP, resolver 192.0.2.10"; [ $r = 0 ] || bail "the node agent did not come up in the test uplink"
eg_org it-egress-dns

# resolve ID NAME: what the sandbox's resolver says (getent), or "fail".
resolve() {
	local out
	out=$(sb_exec "$1" "getent ahostsv4 $2 | awk '{print \$1; exit}'")
	echo "${out:-fail}"
}
# byname ID NAME PORT: connects by name; the server's answer or "fail".
byname() {
	local out
	out=$(sb_exec "$1" "python3 -c \"import socket; s=socket.create_connection(('$2', $3), timeout=3); print(s.recv(100).decode().strip())\" 2>/dev/null || echo fail")
	echo "${out:-fail}"
}
resolved_of() { req nginx GET "/sandboxes/$1" > /dev/null; j -c '.data.egress.resolved'; }
# tcpdns ID NAME: the same question over TCP (tcpdns.py, uploaded first):
# "RCODE [ADDRESS]", or "fail" when nothing answers.
tcpdns() {
	req nginx PUT "/sandboxes/$1/files/tmp/tcpdns.py" "$(cat "$SBX_REPO/t/integration/tcpdns.py")" \
		-H 'Content-Type: application/octet-stream' > /dev/null
	local out
	out=$(sb_exec "$1" "python3 /tmp/tcpdns.py $2")
	echo "${out:-fail}"
}

eg_new '{"mode":"restricted","allow":["api.egress.test:8080"]}'
R=$SB_ID
is "$STATUS $(j -c .data.egress.allow)" '201 ["api.egress.test:8080"]' "restricted with a hostname: 201"
is "$(resolved_of "$R")" '{"api.egress.test":["198.51.100.20"]}' "GET shows the address the node resolved"
# a resolver that answers late: the 201 still comes after the record has
# them (without that order, a GET right after it showed {} while the node
# asked again: CI saw it once)
echo '{"api.egress.test": ["198.51.100.20"], "slow.egress.test": ["198.51.100.21"], "other.egress.test": ["203.0.113.30"], "_slow": {"slow.egress.test": 400}}' > "$ZONE"
: > "$QLOG"
eg_new '{"mode":"restricted","allow":["slow.egress.test"]}'
S=$SB_ID
is "$STATUS $(resolved_of "$S")" '201 {"slow.egress.test":["198.51.100.21"]}' \
	"a name its resolver answers 400 ms late: GET right after the 201 shows it"
is "$(grep -c '^slow' "$QLOG")" 1 "...asked once: the node took what its start resolved (egress-resolved)"
echo '{"api.egress.test": ["198.51.100.20"], "other.egress.test": ["203.0.113.30"]}' > "$ZONE"
req nginx DELETE "/sandboxes/$S" > /dev/null
is "$(resolve "$R" api.egress.test)" 198.51.100.20 "inside, the allowed name resolves (the gateway's forwarder)"
is "$(byname "$R" api.egress.test 8080)" web "...and is reachable by name"
is "$(tcp "$R" 198.51.100.20 8081)" fail "...but not on another port"
: > "$QLOG"
is "$(resolve "$R" other.egress.test)" fail "a name not allowed does not resolve"
is "$(grep -c '^other' "$QLOG")" 0 "...and was never asked upstream"
is "$(tcp "$R" 203.0.113.30 8080)" fail "that name's address is not reachable"
is "$(tcpdns "$R" api.egress.test)" "0 198.51.100.20" "over TCP (what a resolver retries with): the allowed name resolves"
is "$(tcpdns "$R" other.egress.test)" 5 "...a name not allowed is REFUSED (rcode 5)"
is "$(grep -c '^other' "$QLOG")" 0 "...and was never asked upstream"

# the record changes: the node follows within its TTL
echo '{"api.egress.test": ["203.0.113.30"], "other.egress.test": ["203.0.113.30"]}' > "$ZONE"
wait_until 40 bash -c "[ \"\$(curl -sS --cacert '$SBX_CACERT' -H '$REQ_AUTH' '$SBX_URL/sandboxes/$R' | jq -c .data.egress.resolved)\" = '{\"api.egress.test\":[\"203.0.113.30\"]}' ]"
ok $? "the record changed: GET shows the new address"
is "$(tcp "$R" 203.0.113.30 8080)" web "...the new address is reachable"
is "$(tcp "$R" 198.51.100.20 8080)" fail "...the old one no longer is"
is "$(resolve "$R" api.egress.test)" 203.0.113.30 "...and the name resolves to it inside"

# open and deny_all
eg_new '{"mode":"open"}'
O=$SB_ID
is "$(resolve "$O" other.egress.test)" 203.0.113.30 "open: any name resolves (forwarded)"
is "$(resolve "$O" nope.egress.test)" fail "open: a name that does not exist does not"
is "$(tcpdns "$O" other.egress.test)" "0 203.0.113.30" "open, over TCP: forwarded and answered"
eg_new '{"mode":"deny_all"}'
D=$SB_ID
is "$(resolve "$D" api.egress.test)" fail "deny_all: nothing resolves"
is "$(resolve "$D" deny-$$.egress.test) $(grep -c "^deny-$$" "$QLOG")" "fail 0" \
	"...not even a name of its own, which was never asked upstream"
is "$(tcpdns "$D" api.egress.test)" fail "deny_all: no DNS over TCP either (the node's input drops it)"

# a switch to a hostname on a running sandbox
req nginx PUT "/sandboxes/$O/egress" '{"mode":"restricted","allow":["other.egress.test"]}'
is "$STATUS $(j -c .data.egress.resolved)" '200 {"other.egress.test":["203.0.113.30"]}' \
	"open -> restricted with a hostname: 200, resolved shown"
is "$(tcp "$O" 203.0.113.30 8081) $(tcp "$O" 198.51.100.20 8080)" "other-port fail" \
	"...its address (any port) answers, others do not"

# a switch whose name its resolver answers late (1.5 s): the node answers
# other requests meanwhile, and the switch once the name is in
echo '{"api.egress.test": ["203.0.113.30"], "other.egress.test": ["203.0.113.30"], "late.egress.test": ["198.51.100.20"], "_slow": {"late.egress.test": 1500}}' > "$ZONE"
: > "$QLOG"
curl -sS --cacert "$SBX_CACERT" -H "$REQ_AUTH" -H 'Content-Type: application/json' -X PUT \
	-d '{"mode":"restricted","allow":["late.egress.test"]}' -o "$T_TMP/sw.json" -w '%{http_code}' \
	"$SBX_URL/sandboxes/$O/egress" > "$T_TMP/sw.code" 2> /dev/null &
SWPID=$!
grep -qm1 '^late\.egress\.test$' < <(timeout 20 tail -n +1 -F "$QLOG" 2> /dev/null)
is "$(rt_sh "$D" 'echo alive')" alive "while a switch waits for its resolver, another sandbox's exec is answered"
is "$(cat "$T_TMP/sw.code")" "" "...before the switch is answered"
wait "$SWPID"
is "$(cat "$T_TMP/sw.code") $(jq -c .data.egress.resolved "$T_TMP/sw.json")" '200 {"late.egress.test":["198.51.100.20"]}' \
	"...which then answers 200, the late name resolved"
is "$(tcp "$O" 198.51.100.20 8080) $(tcp "$O" 203.0.113.30 8081)" "web fail" "...and in force: its address answers, the one before does not"
echo '{"api.egress.test": ["203.0.113.30"], "other.egress.test": ["203.0.113.30"]}' > "$ZONE"

# a resolver that does not answer in time: the node's loop goes on while
# it asks again (R's TTL runs out every 5 s): another sandbox's exec is
# answered while the node still waits, before it gives up (2 s) and keeps
# R's addresses (waiting in the loop held everything up to 2 s)
echo '{"api.egress.test": ["203.0.113.30"], "other.egress.test": ["203.0.113.30"], "_slow": {"api.egress.test": 4000}}' > "$ZONE"
: > "$QLOG"
grep -qm1 '^api\.egress\.test$' < <(timeout 20 tail -n +1 -F "$QLOG" 2> /dev/null)
mark=$(log_mark)
RPL=$(sb_place "$R")
is "$(rt_sh "$O" 'echo alive')" alive "while the node waits for R's resolver, another sandbox's exec (through the API and the node's relay) is answered"
is "$(log_since "$mark" | grep -c "sandbox $RPL: .* no answer from the resolver")" 0 \
	"...before the node gave up on that resolver"
wait_until 15 bash -c "tail -c +$((mark + 1)) '$(api_log)' | grep -q 'sandbox $RPL: 1 of its hostnames had no answer from the resolver'"
ok $? "...which it then does"
is "$(tcp "$R" 203.0.113.30 8080)" web "...keeping R's addresses in force"
echo '{"api.egress.test": ["203.0.113.30"], "other.egress.test": ["203.0.113.30"]}' > "$ZONE"

# destroy: nothing left
for id in "$R" "$O" "$D"; do req nginx DELETE "/sandboxes/$id" > /dev/null; done
wait_until 30 sb_gone "$R" "$O" "$D" "$S"
is "$(eg_nft_of "$R")$(eg_nft_of "$O")$(eg_nft_of "$D")$(eg_nft_of "$S")" "$(printf '\n\n\n\n')" "after destroy nothing of them is left in the uplink"

finish
