#!/bin/bash
# test: parallel
# Node setup is idempotent; destroy leaves nothing (checked by an independent
# listing: ip netns, ip link, nft list table, ip neigh) and can be repeated; a
# create that fails half-way (a real collision, a real nft failure) undoes
# what it made and nothing else; 20 concurrent creates get distinct
# addresses; net_list finds partial leftovers. All in test namespaces
# (t/net/net-lib.sh).
. "$(dirname "$0")/lib.sh"
. "$SBX_REPO/t/net/net-lib.sh"

plan 32

net_world || bail "cannot build the test namespaces"

# ---- idempotent node setup
netctl setup; ok $? "first node setup"
A=$(tid 1)
read -r _ VA IPA _ <<< "$(netctl create "$A")"
ok '[ -n "$IPA" ]' "a sandbox exists before the second setup ($IPA)"
before=$(in_up nft -s list table inet sbx)
netctl setup; ok $? "second node setup"
netctl setup; ok $? "third node setup"
after=$(in_up nft -s list table inet sbx)
is "$after" "$before" "the table is the same after setting up again (sandbox state kept)"
is "$(ip -n "$UP" -o -4 addr show dev "$BR" | awk '{print $4}')" "$GW/16" "the bridge has the gateway address once"
is "$(in_up nft list tables | grep -c 'inet sbx')" 1 "one sbx table"

# ---- destroy
netctl destroy "$A"; ok $? "destroy A"
is "$(leftovers "$A")" "" "no netns, veth, nft chain or element, neighbour entry of A is left"
netctl destroy "$A"; ok $? "destroying A again succeeds (idempotent)"
is "$(netlist)" "" "net_list finds nothing"
like "$(in_up nft list chain inet sbx forward)" "vmap @sandboxes" "the node's base chains are untouched"

# ---- destroy told the address (a node's destroy reads it from net-ip):
# nothing is listed, and a wrong address never touches another sandbox
A2=$(tid 11)
B2=$(tid 12)
X2=$(tid 13)
read -r _ _ IPA2 _ <<< "$(netctl create "$A2")"
read -r _ _ IPB2 _ <<< "$(netctl create "$B2")"
read -r _ _ IPX2 _ <<< "$(netctl create "$X2")"
netctl apply "$B2" open > /dev/null # B2 in the NAT set too
b2_before=$(leftovers "$B2")
# the commands it runs (strace): no `nft list`, no `ip neigh show`
lists() { grep -cE 'execve\("[^"]*/(nft|ip)", \[[^]]*"(list|show)"' "$1"; }
# LeakSanitizer cannot run under ptrace (an SBX_ASAN build): not for these two
traced_asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
out=$(ASAN_OPTIONS=$traced_asan strace -f -qq -e trace=execve -s 64 -o "$T_TMP/st-a2" "$NETCTL_BIN" -u "$UP" -b "$BR" -s "$SUBNET" \
	destroy-at "$A2" "$IPA2" 2>&1); rc=$?
is "$rc|$(leftovers "$A2")|$out|$(lists "$T_TMP/st-a2")" "0|||0" \
	"destroy with its address: nothing of it is left, and nothing was listed"
out=$(ASAN_OPTIONS=$traced_asan strace -f -qq -e trace=execve -s 64 -o "$T_TMP/st-x2" "$NETCTL_BIN" -u "$UP" -b "$BR" -s "$SUBNET" \
	destroy-at "$X2" "$IPB2" 2>&1); rc=$?
is "$rc|$(leftovers "$X2")" "0|" "destroy told another sandbox's address still removes all of its own"
ok '[ "$(lists "$T_TMP/st-x2")" -gt 0 ]' "...by listing the table (the check of the address is seen failing)"
like "$out" "listing instead" "...having found out from the table that the address was not its"
is "$(leftovers "$B2")" "$b2_before" "...and the other sandbox keeps its element, chains and neighbour entry"
like "$(in_up nft list set inet sbx nat4)" "$IPB2" "...and its NAT membership"
C2=$(tid 14)
read -r _ _ IPC2 _ <<< "$(netctl create "$C2")"
out=$(netctl destroy-at "$C2" "$IPA2" 2>&1); rc=$?
is "$rc|$(leftovers "$C2")" "0|" "destroy told a free address (not its own) removes all of its own too"
netctl destroy "$B2"
is "$(leftovers "$B2")" "" "the other sandbox is destroyed normally after"

# ---- failure in the middle undoes, and only what it made
C=$(tid 3)
ip -n "$UP" link add "sbxh${C:0:9}" type veth peer name sbxtcoll # the veth's name is taken
out=$(netctl create "$C" 2>&1); rc=$?
ok '[ $rc != 0 ]' "create fails on a taken veth name: ${out:0:160}"
is "$(leftovers "$C")" "veth " "...its netns, nft chain and element are gone; the link it did not make stays"
ip -n "$UP" link del "sbxh${C:0:9}"

D=$(tid 4)
ip netns add "sbx-$D" # the netns already exists
out=$(netctl create "$D" 2>&1); rc=$?
ok '[ $rc != 0 ]' "create fails on an existing netns: ${out:0:160}"
is "$(leftovers "$D")" "netns ip-netns " "...nft state is gone; the netns it did not make stays"
ip netns del "sbx-$D"

E=$(tid 5)
in_up nft add chain inet sbx "in_$E" # nft will refuse to create the veth's chain
out=$(netctl create "$E" 2>&1); rc=$?
ok '[ $rc != 0 ] && [[ $out == *nft* ]]' "create fails when nft fails (after netns and veth exist): ${out:0:160}"
is "$(leftovers "$E")" "nft " "...no netns, veth or neighbour entry is left; of nft, only the chain it did not make"
in_up nft delete chain inet sbx "in_$E"

F=$(tid 6)
read -r _ _ IPF _ <<< "$(netctl create "$F")"
is "$IPF" 10.213.0.2 "the failed creates released their addresses"
netctl destroy "$F"

# ---- 20 concurrent creates: the lock gives distinct addresses
ids=()
for i in $(seq 10 29); do ids+=("$(tid "$i")"); done
for id in "${ids[@]}"; do netctl create "$id" > "$T_TMP/c.$id" 2>&1 & done
wait
ips=$(for id in "${ids[@]}"; do awk '{print $3}' "$T_TMP/c.$id"; done | grep -E '^10\.213\.' | sort -u | wc -l)
is "$ips" 20 "20 concurrent creates got 20 distinct addresses"
is "$(netlist | wc -l)" 20 "net_list lists the 20"
for id in "${ids[@]}"; do netctl destroy "$id" & done
wait
left=""
for id in "${ids[@]}"; do left+=$(leftovers "$id"); done
is "$left$(netlist)" "" "after 20 destroys nothing is left (independent listing and net_list)"

# ---- net_list finds partial leftovers, destroy removes them
G=$(tid 7)
H=$(tid 8)
netctl create "$G" > /dev/null && ip netns del "sbx-$G" # only veth + nft remain
in_up nft add chain inet sbx "allow_$H"                  # only a chain remains
is "$(netlist | tr '\n' ' ')" "$(printf '%s\n' "$G" "$H" | sort | tr '\n' ' ')" "net_list finds a netns-less sandbox and a lone chain"
netctl destroy "$G" && netctl destroy "$H"
is "$(leftovers "$G")$(leftovers "$H")$(netlist)" "" "destroy removes partial leftovers"

finish
