#!/bin/bash
# test: templates
# Disk pressure on a node (issue 15, workers/node_disk.c). The disk is never
# filled: the floor is raised instead (node_disk_min_free_pct = 99 in
# sbx.conf, SIGHUP; restored at the end whatever happens), so the free space
# the node has now is "too low". Then:
#  - a create, a volume create and a snapshot are refused with 503 and a
#    reason that says the node's disk is nearly full; a running sandbox goes
#    on running commands;
#  - the node frees what no sandbox on it uses: the snapshot layer unpacked
#    for a restore whose sandbox is gone, and a template version that is not
#    `current` (a copy of the current one's metadata put there by the test)
#    are removed, while the layer a live restored sandbox stands on and the
#    current template version stay (and that sandbox runs commands);
#  - with the floor back, a create works again.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, the stack's config and worker, the state directory" runsc jq curl
rt_begin
VMIN=$(conf_get volume_min_gb)
: "${VMIN:=10}"
SNAPIMG=$SB_STATE/snapshots/images

CONF_MARK="# added by t/integration/disk-pressure.t (removed by its clean-up)"
CONF_TOUCHED=0
FAKE=""
fake_cleanup() { [ -z "$FAKE" ] || rm -rf --one-file-system "$FAKE"; }
t_on_exit rt_kill_bg sb_cleanup snap_cleanup fake_cleanup restore_conf

# snapshot ID NAME: a ready snapshot of ID (SNAP)
snapshot() {
	req nginx POST "/sandboxes/$1/snapshots" "{\"name\":\"$2\"}"
	SNAP=$(j '.data.id // empty')
	[ -n "$SNAP" ] && SNAPS+=("$SNAP")
	wait_until 180 snap_settled "$1" "$SNAP"
	[ "$(snap_status "$1" "$SNAP")" = ready ]
}

# ---- what a node has: two restores' layers, a stale template version ----------------
T_SECTION=setup
rt_setup it-disk
sb_create nginx '{"name":"it-disk-a","specs":{"memory":256,"disk":1}}'
A=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "sandbox A"
TEMPLATE=$(j .data.template)
sexec "$A" 'echo kept > /root/mark && sync && cat /root/mark' 60
is "$OUT" kept "A writes a file"
snapshot "$A" it-disk-1
ok $? "snapshot S1 of A"
S1=$SNAP
snapshot "$A" it-disk-2
ok $? "snapshot S2 of A"
S2=$SNAP
sb_create nginx "{\"name\":\"it-disk-b\",\"fromSnapshot\":\"$S1\",\"specs\":{\"memory\":256,\"disk\":1}}"
B=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "sandbox B restored from S1"
sb_create nginx "{\"name\":\"it-disk-c\",\"fromSnapshot\":\"$S2\",\"specs\":{\"memory\":256,\"disk\":1}}"
C=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "sandbox C restored from S2"
ok "[ -d '$SNAPIMG/$S1/layer' ] && [ -d '$SNAPIMG/$S2/layer' ]" "the node unpacked both layers ($SNAPIMG)"
req nginx DELETE "/sandboxes/$C"
wait_until 60 sb_status_is "$C" destroyed
wait_until 60 sb_gone "$C"
ok $? "C is destroyed and gone from the node: S2's layer is used by no sandbox"
TDIR=$SB_STATE/templates/$TEMPLATE
CUR=$(readlink "$TDIR/current")
like "$CUR" '^[0-9a-f]{64}$' "the current version of $TEMPLATE: ${CUR:0:12}..."
# a version `current` no longer points at, and no sandbox uses
FAKE=$TDIR/$(head -c 32 /dev/urandom | sha256sum | cut -c1-64)
mkdir -p "$FAKE/rootfs/etc" && cp "$TDIR/$CUR/image.json" "$FAKE/" && echo old > "$FAKE/rootfs/etc/version"
touch -d '-1 day' "$FAKE"
ok "[ -f '$FAKE/image.json' ]" "an old version of $TEMPLATE that no sandbox uses (${FAKE##*/})"

# ---- the floor raised above what is free -----------------------------------------------
T_SECTION=refused
mark=$(log_mark)
conf_override node_disk_min_free_pct 99
kill -HUP "$(worker_master)"
wait_until 30 node_agent_ready_since "$mark"
ok $? "node_disk_min_free_pct = 99: the node agent was restarted with it (SIGHUP) and consumes"
REASON='disk is nearly full'
sb_create nginx '{"name":"it-disk-d","specs":{"memory":256,"disk":1}}'
is "$STATUS" 503 "a create: 503"
like "$(j .message)" "$REASON" "... saying why ($(j .message))"
req nginx POST /volumes "{\"name\":\"it-disk-v\",\"sizeGB\":$VMIN}"
is "$STATUS" 503 "a volume create: 503"
like "$(j .message)" "$REASON" "... saying why ($(j .message))"
[ "$STATUS" = 201 ] && req nginx DELETE "/volumes/$(j .data.id)"
req nginx POST "/sandboxes/$A/snapshots" '{"name":"it-disk-3"}'
is "$STATUS" 503 "a snapshot: 503"
like "$(j .message)" "$REASON" "... saying why ($(j .message))"
[ "$STATUS" = 202 ] && SNAPS+=("$(j .data.id)")
sexec "$A" 'cat /root/mark' 60
is "$OUT" kept "a running sandbox goes on running commands"

# ---- what is unused goes, what is used stays ---------------------------------------------
T_SECTION=freed
s2_gone() { [ ! -e "$SNAPIMG/$S2" ]; }
fake_gone() { [ ! -e "$FAKE" ]; }
wait_until 60 s2_gone
ok $? "S2's layer, which no sandbox uses, is removed"
wait_until 30 fake_gone
ok $? "the old template version no sandbox uses is removed"
ok "[ -d '$SNAPIMG/$S1/layer' ]" "S1's layer, which B stands on, stays"
ok "[ -d '$TDIR/$CUR/rootfs' ] && [ \"\$(readlink '$TDIR/current')\" = '$CUR' ]" "the current template version stays"
sexec "$B" 'cat /root/mark' 60
is "$OUT" kept "B runs commands and sees its snapshot's file"
like "$(log_since "$mark" | grep -F 'disk pressure: removed' | head -n1)" "removed the unused" "the node logs what it removed"

# ---- the floor back ---------------------------------------------------------------------------
T_SECTION=restored
restore_conf
ok "[ $CONF_TOUCHED = 0 ]" "the floor back to its setting (SIGHUP)"
sb_create nginx '{"name":"it-disk-e","specs":{"memory":256,"disk":1}}'
is "$STATUS $(j .data.status)" "201 ready" "a create works again"

finish
