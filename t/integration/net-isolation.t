#!/bin/bash
# test: parallel, slow
# A sandbox's network reaches nothing (deny_all): not the gateway, not the
# node's other addresses, not a public host, not the metadata address (routed
# to a test host first), not another sandbox; and it cannot send from an
# address that is not its own. Each denied probe is shown to succeed when an
# allow rule is inserted for a moment, so a probe that cannot connect for
# another reason would fail the test. Everything runs in namespaces this test
# makes (t/net/net-lib.sh): no packet can leave the machine.
. "$(dirname "$0")/lib.sh"
. "$SBX_REPO/t/net/net-lib.sh"

plan 24

net_world || bail "cannot build the test namespaces"
netctl setup; ok $? "node setup in the uplink namespace"

A=$(tid 1)
B=$(tid 2)
read -r _ VA IPA _ <<< "$(netctl create "$A")"
ok '[ -n "$IPA" ]' "sandbox A created ($IPA on $VA)"
read -r _ VB IPB _ <<< "$(netctl create "$B")"
ok '[ -n "$IPB" ] && [ "$IPB" != "$IPA" ]' "sandbox B created with another address ($IPB)"
[ -n "$IPA" ] && [ -n "$IPB" ] || bail "cannot create the two sandboxes"

is "$(in_sbx "$A" ip -o -4 addr show dev eth0 | awk '{print $4}')" "$IPA/16" "A's eth0 has its address"
like "$(in_sbx "$A" ip route show default)" "^default via $GW dev eth0" "A's default route is the gateway"
like "$(ip -n "$UP" -d link show dev "$VA")" "master $BR .*isolated on" "A's veth is an isolated port of the bridge"

listen "$PUB"; ok $? "listener on the public test host"
listen "$UP"; ok $? "listener on the node (uplink namespace)"
listen "sbx-$B"; ok $? "listener inside sandbox B"

# Gateway and the node's other address: input hook.
! probe "sbx-$A" "$GW"; ok $? "A cannot reach the gateway $GW"
! probe "sbx-$A" 192.0.2.1; ok $? "A cannot reach the node's address 192.0.2.1"
h=$(nft_rule input iifname "$BR" accept)
probe "sbx-$A" "$GW" && probe "sbx-$A" 192.0.2.1; ok $? "...and both succeed with an input allow rule"
nft_unrule input "$h"

# A public host: forward hook, per-sandbox allow chain.
! probe "sbx-$A" 192.0.2.10; ok $? "A cannot reach the public test host"
h=$(nft_rule "allow_$A" ct original ip daddr 192.0.2.10 accept) # both ways: replies go through it too
probe "sbx-$A" 192.0.2.10; ok $? "...and succeeds with an allow rule in allow_<id>"
! probe "sbx-$B" 192.0.2.10; ok $? "A's allow rule does not open B"

# Anti-spoofing, with A's allow rule still there: a source that is not A's.
in_sbx "$A" ip addr add 10.213.0.250/16 dev eth0
spoof() { nsenter --net="/run/netns/sbx-$A" -- timeout 3 socat -u OPEN:/dev/null "TCP:192.0.2.10:$PORT,bind=10.213.0.250,connect-timeout=2" 2> /dev/null; }
! spoof; ok $? "A cannot send from 10.213.0.250 (not its address)"
like "$(in_up nft list chain inet sbx "in_$A" | grep 'ip saddr !=')" "packets [1-9]" "...dropped by the veth's source check"
h1=$(nft_rule "in_$A" ip saddr 10.213.0.250 accept)
h2=$(nft_rule forward ct original ip saddr 10.213.0.250 accept)
spoof; ok $? "...and the same connect succeeds when the source checks are bypassed"
nft_unrule "in_$A" "$h1"; nft_unrule forward "$h2"
in_sbx "$A" ip addr del 10.213.0.250/16 dev eth0
nft_unrule "allow_$A" "$h"

# Spoofing B's address would give A B's allow rules (forward picks the chain
# by source address): the veth's check must stop it. A's connect cannot
# succeed either way (replies go to B), so count at the public host.
hb=$(nft_rule "allow_$B" ip daddr 192.0.2.10 accept)
in_pub nft -f - <<< "table ip sbxtest { chain c { type filter hook input priority 0; ip saddr $IPB tcp dport $PORT counter; }; }"
seen() { in_pub nft list chain ip sbxtest c | sed -n 's/.*packets \([0-9]*\).*/\1/p'; }
in_sbx "$A" ip addr add "$IPB/32" dev eth0
spoof_b() { nsenter --net="/run/netns/sbx-$A" -- timeout 2 socat -u OPEN:/dev/null "TCP:192.0.2.10:$PORT,bind=$IPB,connect-timeout=1" 2> /dev/null; }
spoof_b
is "$(seen)" 0 "A sending as B (B may reach the public host) gets nothing out"
h1=$(nft_rule "in_$A" ip saddr "$IPB" accept)
spoof_b
like "$(seen)" "^[1-9]" "...and its packets do get out when the veth's check is bypassed"
nft_unrule "in_$A" "$h1"
in_sbx "$A" ip addr del "$IPB/32" dev eth0
nft_unrule "allow_$B" "$hb"

# Metadata: routed to the test host, always blocked in forward.
! probe "sbx-$A" 169.254.169.254; ok $? "A cannot reach 169.254.169.254 (routed to the test host)"
h=$(nft_rule forward ct original ip daddr 169.254.169.254 accept)
probe "sbx-$A" 169.254.169.254; ok $? "...and succeeds with a forward allow rule"
nft_unrule forward "$h"

# Another sandbox: bridged, so blocked on the veths (nft) and by port isolation.
! probe "sbx-$A" "$IPB"; ok $? "A cannot reach sandbox B"
# Each layer alone blocks: with isolation off the nft rules do, with the
# rules bypassed isolation does; with both out of the way A connects. (The
# forward bypass matters where br_netfilter sends bridged frames through it.)
ip -n "$UP" link set dev "$VA" type bridge_slave isolated off
ip -n "$UP" link set dev "$VB" type bridge_slave isolated off
r1=0; probe "sbx-$A" "$IPB" && r1=1
ha=$(nft_rule "in_$A" accept)
hb=$(nft_rule "in_$B" accept)
hf=$(nft_rule forward ip saddr "{ $IPA, $IPB }" ip daddr "{ $IPA, $IPB }" accept)
r2=0; probe "sbx-$A" "$IPB" && r2=1
ip -n "$UP" link set dev "$VA" type bridge_slave isolated on
ip -n "$UP" link set dev "$VB" type bridge_slave isolated on
r3=0; probe "sbx-$A" "$IPB" && r3=1
ok '[ $r1 = 0 ] && [ $r2 = 1 ] && [ $r3 = 0 ]' \
	"...nft alone blocks A->B (got $r1), port isolation alone blocks it (got $r3), without both it connects (got $r2)"
nft_unrule "in_$A" "$ha"; nft_unrule "in_$B" "$hb"; nft_unrule forward "$hf"

finish
