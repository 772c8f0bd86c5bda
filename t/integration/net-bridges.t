#!/bin/bash
# test: parallel
# More sandboxes than a bridge has ports (a Linux bridge holds 1,024): the
# subnet is cut into blocks of 1,024 addresses, one bridge each, and a
# sandbox past the first block is a port of the overflow bridge <bridge>-1,
# with the same address prefix, gateway and rules as any other: it reaches
# nothing (not the gateway, not a public host, not a sandbox on the other
# bridge) unless a rule says so, open egress gets it out, and destroy leaves
# nothing. The first block is filled with placeholder map elements (they
# reserve addresses as a half-made sandbox's element does), so one real
# sandbox lands in block 1 without a thousand others. Everything runs in
# namespaces this test makes (t/net/net-lib.sh): no packet leaves the machine.
. "$(dirname "$0")/lib.sh"
. "$SBX_REPO/t/net/net-lib.sh"

plan 20

net_world || bail "cannot build the test namespaces"
netctl setup; ok $? "node setup in the uplink namespace"
BR1=$BR-1

A=$(tid 1)
read -r _ VA IPA _ <<< "$(netctl create "$A")"
is "$IPA" 10.213.0.2 "sandbox A gets the first address, on $BR"
[ -n "$IPA" ] || bail "cannot create sandbox A"

# The rest of block 0 (10.213.0.0/22), taken.
{
	echo "add chain inet sbx placeholder"
	for i in $(seq 3 1023); do
		echo "add element inet sbx sandboxes { 10.213.$((i / 256)).$((i % 256)) : jump placeholder }"
	done
} | in_up nft -f -
ok $? "the rest of the first block is taken (1,021 placeholder elements)"

B=$(tid 2)
read -r _ VB IPB _ <<< "$(netctl create "$B")"
is "$IPB" 10.213.4.2 "sandbox B gets the first address of the second block"
[ -n "$IPB" ] || bail "cannot create sandbox B"
like "$(ip -n "$UP" -d link show dev "$VB")" "master $BR1 .*isolated on" "B's veth is an isolated port of the overflow bridge $BR1"
is "$(ip -n "$UP" -o -4 addr show dev "$BR1" | awk '{print $4}')" "$GW/32" "$BR1 holds the gateway's address"
like "$(ip -n "$UP" route show 10.213.4.0/22)" "dev $BR1" "the node routes the block to $BR1"
is "$(in_sbx "$B" ip -o -4 addr show dev eth0 | awk '{print $4}')" "$IPB/16" "B's eth0 has its address in the same /16"
like "$(in_sbx "$B" ip route show default)" "^default via $GW dev eth0" "B's default route is the gateway"
like "$(in_up nft list set inet sbx bridges)" "\"$BR1\"" "$BR1 is one of the bridges the base chains judge"

listen "$UP"
listen "$PUB"
listen "sbx-$A"
listen "sbx-$B"

# The gateway: input hook, as on the first bridge.
! probe "sbx-$B" "$GW"; ok $? "B cannot reach the gateway $GW"
h=$(nft_rule input iifname "$BR1" accept)
probe "sbx-$B" "$GW"; ok $? "...and does with an input allow rule (the gateway answers on $BR1)"
nft_unrule input "$h"

# A public host: forward hook, B's allow chain; replies routed back to $BR1.
! probe "sbx-$B" 192.0.2.10; ok $? "B cannot reach the public test host"
h=$(nft_rule "allow_$B" ct original ip daddr 192.0.2.10 accept)
probe "sbx-$B" 192.0.2.10; ok $? "...and does with an allow rule in allow_<id>"
nft_unrule "allow_$B" "$h"

# Across the two bridges: each sees the other on its /16, and asks for it on
# its own bridge, where nothing answers; the veths' chains and forward drop
# it too. Both listeners answer the node (their routes work) once its input
# chain lets their replies in.
r1=0; probe "sbx-$A" "$IPB" && r1=1
r2=0; probe "sbx-$B" "$IPA" && r2=1
h=$(nft_rule input accept)
r3=0; probe "$UP" "$IPA" && probe "$UP" "$IPB" && r3=1
nft_unrule input "$h"
ok '[ $r1 = 0 ] && [ $r2 = 0 ] && [ $r3 = 1 ]' \
	"A and B (two bridges) cannot reach each other (A->B $r1, B->A $r2); the node reaches both listeners ($r3)"

# Egress policy: open gets out (masqueraded), deny_all again does not.
netctl apply "$B" open && probe "sbx-$B" 192.0.2.10; ok $? "B with open egress reaches the public host"
netctl apply "$B" deny_all && ! probe "sbx-$B" 192.0.2.10; ok $? "...and not after deny_all"

# Setup again keeps the overflow bridge judged.
netctl setup && in_up nft list set inet sbx bridges | grep -q "\"$BR1\""; ok $? "node setup again keeps $BR1 in the bridges set"

netctl destroy "$B"; ok $? "destroy B"
is "$(leftovers "$B")" "" "no netns, veth, nft chain or element, neighbour entry of B is left"

finish
