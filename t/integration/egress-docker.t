#!/bin/bash
# test: any stack
# A host that also runs the Docker engine sets iptables' FORWARD policy to
# DROP. In the test uplink (egresslib.sh) the test sets exactly that (with
# iptables, in that namespace only): an open sandbox's traffic is then
# dropped by iptables' chain until the node agent notices (at its next
# pass) and lets the bridge through that chain; then the open sandbox
# reaches a public test host again, while sbx's own drops still hold (a
# deny_all sandbox reaches nothing; the open one still not the metadata
# address, an internal range or the node).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/egresslib.sh"
t_require --root "iptables" iptables

plan 11

eg_world || bail "cannot build the test namespaces"
eg_use_world; r=$?; ok $r "the node agent runs its network in the test uplink $EUP"; [ $r = 0 ] || bail "the node agent did not come up in the test uplink"
eg_org it-egress-docker

eg_new '{"mode":"open"}'
O=$SB_ID
eg_new '{"mode":"deny_all"}'
D=$SB_ID
is "$(tcp "$O" 192.0.2.10 8080)" web "before: the open sandbox reaches a public test host"

in_eup iptables -w 5 -P FORWARD DROP
is "$(in_eup iptables -S FORWARD | head -n1)" "-P FORWARD DROP" "iptables' FORWARD policy is DROP in the uplink (as Docker sets it)"
open_works() { [ "$(tcp "$O" 192.0.2.10 8080)" = web ]; }
wait_until 40 open_works; ok $? "the open sandbox reaches the public host again (the node agent's next pass)"
like "$(in_eup iptables -S FORWARD)" "-A FORWARD -i sbx0 -j ACCEPT" "...iptables' chain now lets the bridge through"
is "$(in_eup iptables -S FORWARD | head -n1)" "-P FORWARD DROP" "...and its policy stays DROP"
is "$(tcp "$D" 192.0.2.10 8080)" fail "sbx's default drop holds: the deny_all sandbox reaches nothing"
is "$(tcp "$O" 169.254.169.254 80)" fail "...the open one not the metadata address"
is "$(tcp "$O" 10.99.0.10 8080)" fail "...nor an internal range"
is "$(tcp "$O" "$GW" 8080)" fail "...nor the node"
is "$(reached 169.254.169.254)$(reached 10.99.0.10)$(reached "$GW")" 000 "...and no test host logged a connection at those"

finish
