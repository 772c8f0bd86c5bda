#!/bin/bash
# test: any stack
# After a restart, the node agent puts every ready sandbox's egress policy
# in force again from its record, several sandboxes to one nft transaction
# (one each held its loop ~13 ms a sandbox, 13 s with a thousand): the
# rules a test flushed in the kernel come back for an open sandbox, a
# restricted one by address and one by hostname (the addresses its record
# shows, before they are asked again); a deny_all sandbox stays shut. One
# sandbox whose rules cannot be put (its network half gone in the kernel,
# so nft refuses the batch) does not keep the others' out of force: the
# batch is retried one by one, and only that one fails. Test world:
# egresslib.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/egresslib.sh"

plan 16

eg_world || bail "cannot build the test namespaces"
ZONE=$T_TMP/zone.json
echo '{"api.egress.test": ["198.51.100.20"]}' > "$ZONE"
nsenter --net="/run/netns/$EPUB" -- python3 "$SBX_REPO/t/integration/dnsserver.py" 192.0.2.10 53 "$ZONE" /dev/null > /dev/null 2>&1 &
EG_PIDS+=($!)
wait_until 30 bash -c "nsenter --net=/run/netns/$EPUB -- ss -lunH | grep -q '192.0.2.10:53 '"
eg_use_world; r=$?; ok $r "the node agent runs its network in the test uplink $EUP"; [ $r = 0 ] || bail "the node agent did not come up in the test uplink"
eg_org it-egress-resync

eg_new '{"mode":"open"}'
O=$SB_ID
eg_new '{"mode":"restricted","allow":["198.51.100.20:8080"]}'
R=$SB_ID
eg_new '{"mode":"restricted","allow":["api.egress.test:8080"]}'
H=$SB_ID
eg_new '{"mode":"deny_all"}'
D=$SB_ID
eg_new '{"mode":"open"}'
X=$SB_ID
is "$(tcp "$O" 198.51.100.20 8080) $(tcp "$R" 198.51.100.20 8080) $(tcp "$H" 198.51.100.20 8080) $(tcp "$D" 198.51.100.20 8080)" \
	"web web web fail" "open, restricted by address and by name reach the test host; deny_all does not"

# the kernel loses their rules (an allow chain flushed is deny_all for it)
for id in "$O" "$R" "$H"; do in_eup nft flush chain inet sbx "allow_$(sb_place "$id")"; done
is "$(tcp "$O" 198.51.100.20 8080) $(tcp "$R" 198.51.100.20 8080) $(tcp "$H" 198.51.100.20 8080)" "fail fail fail" \
	"their allow chains flushed in the kernel: nothing reaches the test host"

# X's network half gone (its map element and allow chain deleted in the
# kernel): its rules cannot be put, and nft refuses a batch with them
XPL=$(sb_place "$X")
XIP=$(sb_ip "$X")
in_eup nft delete element inet sbx sandboxes "{ $XIP }" &&
	in_eup nft flush chain inet sbx "allow_$XPL" &&
	in_eup nft delete chain inet sbx "allow_$XPL"
ok $? "X's map element and allow chain are deleted in the kernel"

# the resolver no longer answers in time: H's rules can only come from its record
echo '{"api.egress.test": ["198.51.100.20"], "_slow": {"api.egress.test": 30000}}' > "$ZONE"

mark=$(log_mark)
eg_reload
ok $? "the node agent restarted"
synced() { log_since "$mark" | grep -q "sandbox $XPL: egress open: the rules could not be installed"; }
wait_until 30 synced
ok $? "...its first pass tried X's policy, which failed"
is "$(log_since "$mark" | grep -c 'sandboxes from their records: .*each on its own')" 1 \
	"...the batch with X in it was refused as a whole, and retried one by one"
is "$(log_since "$mark" | grep -c "sandbox $(sb_place "$O"): egress open in force")" 1 "...O's policy went in force on its own"
is "$(tcp "$O" 198.51.100.20 8080)" web "open is back in force"
is "$(tcp "$R" 198.51.100.20 8080) $(tcp "$R" 198.51.100.20 8081)" "web fail" "restricted by address: its address and port again, no other port"
is "$(tcp "$H" 198.51.100.20 8080)" web "restricted by name: the address its record showed (its resolver does not answer)"
is "$(tcp "$D" 198.51.100.20 8080)" fail "deny_all stays shut"

# X destroyed: the next restart puts the others in one transaction
req nginx DELETE "/sandboxes/$X" > /dev/null
wait_until 30 sb_gone "$X"
ok $? "X (half gone) is destroyed"
mark=$(log_mark)
eg_reload
onebatch() { log_since "$mark" | grep -q 'egress of [0-9]* sandboxes put in force from their records (one transaction'; }
wait_until 30 onebatch
ok $? "...then a restart puts the others' policies in force in one transaction"
is "$(tcp "$O" 198.51.100.20 8080) $(tcp "$D" 198.51.100.20 8080)" "web fail" "...O open and D shut among them"

for id in "$O" "$R" "$H" "$D"; do req nginx DELETE "/sandboxes/$id" > /dev/null; done
wait_until 30 sb_gone "$O" "$R" "$H" "$D"
is "$(eg_nft_of "$O")$(eg_nft_of "$R")$(eg_nft_of "$H")$(eg_nft_of "$D")$(eg_nft_of "$X")" "$(printf '\n\n\n\n\n')" \
	"after destroy nothing of them is left in the uplink"

finish
