#!/bin/bash
# test: any stack
# An operator moves the node's network (net_uplink_netns, and a SIGHUP) while
# sandboxes run: each sandbox's network stays where it was made, and its
# destroy takes it down there (sandbox.json records the uplink), not in the
# node's new uplink, where it never was:
#  - made on the host, destroyed while the node uses the test uplink: no
#    chain, map element, veth or netns of it is left in the host's table;
#  - made in the test uplink, destroyed after the node is back on the host:
#    nothing of it is left in the test uplink's table;
#  - made in the test uplink, destroyed after that uplink namespace is gone
#    (it took the bridge, veths and table along): the destroy succeeds and
#    the sandbox's own namespace goes.
# Traffic: none leaves the machine (egresslib.sh); these sandboxes are
# deny_all and nothing is probed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/egresslib.sh"

plan 14

# host_nft_of ID: what the host's sbx table, links and netns hold of it (on
# a stack whose network has a namespace of its own, that namespace's: sb_up)
host_nft_of() {
	local id
	id=$(sb_place "$1")
	sb_up nft list table inet sbx 2> /dev/null | grep -q "$id" && echo -n "chain-or-element "
	sb_up ip -o link show | grep -q "sbxh${id:0:9}" && echo -n "veth "
	[ -e "/run/netns/sbx-$id" ] && echo -n "netns "
	echo
}
destroyed() { [ "$(sb_db "$1" status)" = destroyed ]; }

eg_world || bail "cannot build the test namespaces"
eg_org it-uplink

eg_new '{"mode":"deny_all"}'
H=$SB_ID
is "$STATUS" 201 "a sandbox made while the node's network is on the host"
like "$(host_nft_of "$H")" "chain-or-element" "...its rules are in the host's table"

eg_use_world; r=$?; ok $r "the node agent moves its network to the test uplink $EUP"; [ $r = 0 ] || bail "the node agent did not come up in the test uplink"
eg_new '{"mode":"deny_all"}'
U=$SB_ID
is "$STATUS" 201 "a sandbox made in the test uplink"
like "$(eg_nft_of "$U")" "chain-or-element" "...its rules are in the test uplink's table"
eg_new '{"mode":"deny_all"}'
G=$SB_ID
is "$STATUS" 201 "another one there"

req nginx DELETE "/sandboxes/$H" > /dev/null
is "$STATUS" 204 "the host's sandbox is destroyed while the node is in the test uplink"
wait_until 30 destroyed "$H"
is "$(sb_db "$H" status)" destroyed "...its record is destroyed"
is "$(host_nft_of "$H")" "" "...nothing of it is left in the host's table, links or netns"

eg_leave_world; r=$?; ok $r "the node agent is back on the host"
req nginx DELETE "/sandboxes/$U" > /dev/null
wait_until 30 destroyed "$U"
is "$(sb_db "$U" status)" destroyed "the test uplink's sandbox is destroyed from the host"
is "$(eg_nft_of "$U")" "" "...nothing of it is left in the test uplink's table, links or netns"

ip netns del "$EUP"
req nginx DELETE "/sandboxes/$G" > /dev/null
wait_until 30 destroyed "$G"
is "$(sb_db "$G" status)" destroyed "a sandbox whose uplink namespace is gone is destroyed"
ok '[ ! -e "/run/netns/sbx-$(sb_place "$G")" ]' "...and its own network namespace is gone"

finish
