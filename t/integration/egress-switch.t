#!/bin/bash
# test: any stack, slow
# PUT /sandboxes/{id}/egress switches a running sandbox between all three
# modes without restarting it (its sentry keeps its pid), and the new policy
# is in force when the answer arrives: a probe right after the answer sees
# it. A long-lived TCP connection made under open stays open across the
# switches: its data passes under restricted (its host allowed), stops under
# deny_all and flows again (the same connection, retransmitted) under open.
# Malformed policies are 400s, an unknown sandbox 404; a switch the node
# cannot apply (its nft transaction really fails) answers 503 and leaves the
# old policy in force and shown. Test world: egresslib.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/egresslib.sh"

plan 41

eg_world || bail "cannot build the test namespaces"
# the long-lived connection's server: what arrives is appended to a file
nsenter --net="/run/netns/$EPUB" -- socat -u TCP-LISTEN:9000,reuseaddr,fork "OPEN:$T_TMP/ll.log,creat,append" > /dev/null 2>&1 &
EG_PIDS+=($!)
eg_use_world; r=$?; ok $r "the node agent runs its network in the test uplink $EUP"; [ $r = 0 ] || bail "the node agent did not come up in the test uplink"
eg_org it-egress-switch

eg_new '{"mode":"open"}'
S=$SB_ID
is "$STATUS $(j .data.egress.mode)" "201 open" "an open sandbox"
pid0=$(sb_runsc state "$(sb_place "$S")" | jq -r .pid)

# put MODE_JSON: PUT the policy; STATUS/BODY as req sets them.
put() { req nginx PUT "/sandboxes/$S/egress" "$1"; }
# send LINE: the sandbox's client writes LINE on its open connection.
send() { sb_exec "$S" "echo $1 > /dev/shm/ll.fifo"; }
arrived() { grep -qx "$1" "$T_TMP/ll.log" 2> /dev/null; }

sb_exec "$S" "mkfifo /dev/shm/ll.fifo"
client='import socket
s = socket.create_connection(("192.0.2.10", 9000), timeout=5)
s.settimeout(None)
while True:
    for line in open("/dev/shm/ll.fifo"):
        s.sendall(line.encode())'
req nginx POST "/sandboxes/$S/exec" "$(jq -nc --arg c "python3 -c '$client'" '{cmd:$c, background:true}')"
is "$STATUS" 200 "a long-lived client runs in the background (TCP to 192.0.2.10:9000)"
wait_until 10 bash -c "nsenter --net=/run/netns/$EPUB -- ss -tnH state established '( sport = :9000 )' | grep -q ."
ok $? "...its connection is established"
send m1
wait_until 10 arrived m1; ok $? "open: a line sent on it arrives"

# ---- open -> restricted (its host allowed)
put '{"mode":"restricted","allow":["192.0.2.10"]}'
is "$STATUS $(j .data.egress.mode) $(j -c .data.egress.allow) $(j .data.network_updated)" \
	'200 restricted ["192.0.2.10"] true' "open -> restricted: 200, shown, network_updated"
is "$(tcp "$S" 198.51.100.20 8080)" fail "...a host not allowed fails at once"
is "$(tcp "$S" 192.0.2.10 8080)" web "...the allowed host answers"
send m2
wait_until 10 arrived m2; ok $? "...the long-lived connection still carries data"

# ---- restricted -> deny_all
put '{"mode":"deny_all"}'
is "$STATUS $(j .data.egress.mode) $(j .data.block_outbound)" "200 deny_all true" "restricted -> deny_all: 200, block_outbound true"
is "$(tcp "$S" 192.0.2.10 8080)" fail "...the host allowed before fails at once"
is "$(udp "$S" 192.0.2.10 5353)" fail "...UDP fails"
send m3
sleep 3
! arrived m3; ok $? "...a line sent on the long-lived connection does not arrive (3 s)"

# ---- deny_all -> open
put '{"mode":"open"}'
is "$STATUS $(j .data.egress.mode) $(j .data.block_outbound)" "200 open false" "deny_all -> open: 200"
is "$(tcp "$S" 198.51.100.20 8080)" web "...a public host answers"
wait_until 30 arrived m3; ok $? "...the held-back line arrives on the same connection"
is "$(tcp "$S" 169.254.169.254 80)" fail "...the metadata address still fails"

# ---- open -> deny_all -> restricted -> open
put '{"mode":"deny_all"}'
is "$STATUS $(tcp "$S" 198.51.100.20 8080)" "200 fail" "open -> deny_all: a public host fails"
put '{"mode":"restricted","allow":["198.51.100.0/24"]}'
is "$STATUS $(tcp "$S" 198.51.100.20 8080) $(tcp "$S" 192.0.2.10 8080)" "200 web fail" \
	"deny_all -> restricted: the allowed CIDR answers, another host fails"
put '{"mode":"open"}'
is "$STATUS $(tcp "$S" 192.0.2.10 8080)" "200 web" "restricted -> open: a public host answers"
is "$(sb_runsc state "$(sb_place "$S")" | jq -r .pid)" "$pid0" "the sandbox was never restarted (same sentry pid)"
is "$(in_epub ss -tnH state established '( sport = :9000 )' | wc -l)" 1 "one connection carried every line: the long-lived one, never re-made"

# ---- refused
put '{"mode":"restricted"}'
is "$STATUS" 400 "restricted without allow: 400"
put '{"mode":"open","allow":["192.0.2.10"]}'
is "$STATUS" 400 "open with an allow list: 400"
put '{"mode":"sideways"}'
is "$STATUS" 400 "an unknown mode: 400"
put '{"mode":"restricted","allow":["192.0.2.10/8"]}'
is "$STATUS" 400 "a CIDR with host bits set: 400"
put '{"mode":"open","extra":1}'
is "$STATUS" 400 "an unknown field: 400"
req nginx PUT "/sandboxes/$(random_id)/egress" '{"mode":"open"}'
is "$STATUS" 404 "an unknown sandbox: 404"
req nginx GET "/sandboxes/$S"
is "$(j .data.egress.mode)" open "after the refused switches the sandbox still shows open"

# ---- a switch the node applies after the API gave up waiting: the node
# agent is stopped (SIGSTOP) while the PUT waits, so the API answers 503
# and keeps the record; once the agent runs again it applies the switch
# it was sent, and its next pass puts the record's policy back in force
put '{"mode":"deny_all"}'
is "$STATUS $(j .data.egress.mode)" "200 deny_all" "a deny_all sandbox"
NODE_PID=$(worker_pid node)
mark=$(log_mark)
kill -STOP "$NODE_PID"
put '{"mode":"open"}'
kill -CONT "$NODE_PID"
is "$STATUS $(j .code)" "503 egress_unconfirmed" "a switch to open the node does not confirm in time: 503 egress_unconfirmed"
req nginx GET "/sandboxes/$S"
is "$(j .data.egress.mode)" deny_all "...the sandbox still shows deny_all"
reconciled() { log_since "$mark" | grep -q "sandbox $(sb_place "$S"): egress open in force, its record says deny_all"; }
wait_until 40 reconciled
ok $? "...the node applied open late, saw that the record says deny_all and put deny_all back in force"
is "$(tcp "$S" 192.0.2.10 8080)" fail "...deny_all is in force: a public test host fails"
put '{"mode":"open"}'
is "$STATUS $(j .data.egress.mode)" "200 open" "...a switch to open afterwards works"

# ---- a switch the node cannot apply
eg_break_nft
ok $? "the uplink's NAT set is removed: the node's next transaction fails"
put '{"mode":"restricted","allow":["192.0.2.10"]}'
is "$STATUS" 503 "a switch that cannot be applied: 503"
error_shape "egress|previous" "...saying the previous policy stays"
req nginx GET "/sandboxes/$S"
is "$(j .data.egress.mode) $(j .data.block_outbound)" "open false" "...the sandbox still shows open"
is "$(tcp "$S" 198.51.100.20 8080)" web "...and open is still in force (a host the new list lacks answers)"

# ---- destroy: nothing left in the uplink's table
SIP=$(sb_ip "$S")
req nginx DELETE "/sandboxes/$S" > /dev/null
wait_until 30 sb_gone "$S"
is "$(eg_nft_of "$S" "$SIP")" "" "after destroy nothing of it is left (nft list table, ip link, /run/netns)"

finish
