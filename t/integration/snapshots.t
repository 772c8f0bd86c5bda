#!/bin/bash
# test: any stack, heavy
# Snapshots (API.md "Snapshots", issue 12):
#  - POST /sandboxes/{id}/snapshots answers 202 with the Snapshot object
#    (creating), field by field; the sandbox stays usable; the snapshot
#    becomes ready with a digest and a size, and the registry serves its
#    manifest (independent look: the registry's own HTTP API); no
#    intermediate file is left on the node (the state directory);
#  - POST /sandboxes {fromSnapshot} starts a sandbox whose filesystem is the
#    snapshot's exactly: added, changed and deleted files (and a directory
#    replaced by another), modes, a symlink, a 3 MiB file by checksum;
#    nothing written after the snapshot; the node pulled the image it
#    lacked (the state directory had no copy before the create);
#  - lists: GET /sandboxes/{id}/snapshots and GET /sandboxes/snapshots are
#    paginated like every list (the shape the SDKs read), newest first;
#  - DELETE /sandboxes/snapshots/{id}: 204, and the registry no longer
#    serves the manifest; then 404;
#  - errors: bad ids 400, unknown sandbox 404, bad name 400, unknown field
#    400, another organisation's sandbox or snapshot 404 (list, snapshot,
#    delete, fromSnapshot), a snapshot while another is in flight 409, delete
#    while creating 409, a pause while a snapshot is in flight 409, a
#    destroyed sandbox 400 naming its state;
#  - snapshotMode automatic with a 5-field cron: the node computes the next
#    time from the schedule; each time it is due (the test makes it due) an
#    automatic snapshot is taken, and past snapshot_auto_keep the oldest goes,
#    record and image (the registry no longer serves it);
#  - the snapshot process killed mid-way (stopped at the armed fault point
#    snapshot-copy, then SIGKILLed): the snapshot ends failed with a reason,
#    the sandbox is ready and runs commands, nothing is left on the node;
#  - the node agent SIGKILLed while the snapshot process holds the sandbox
#    frozen (fault point snapshot-frozen): the restarted agent fails the
#    snapshot, the sandbox runs commands again, nothing is left.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, the state directory" runsc jq curl
require_stack

: "${SBX_REGISTRY:=$(conf_get registry_url | sed 's|^http://||; s|/$||')}"
REG="http://$SBX_REGISTRY"
SNAPWORK=$SB_STATE/snapshots/work
SNAPIMG=$SB_STATE/snapshots/images
RFC3339='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$'

SNAPS=()
snap_cleanup() {
	local s
	rm -f "$SB_STATE/faults/snapshot-copy".* "$SB_STATE/faults/snapshot-frozen".*
	for s in "${SNAPS[@]}"; do
		curl -sS -o /dev/null --cacert "$SBX_CACERT" --max-time 40 -X DELETE -H "$REQ_AUTH" \
			"$SBX_URL/sandboxes/snapshots/$s" 2> /dev/null
	done
}
t_on_exit snap_cleanup sb_cleanup
mkdir -p "$SB_STATE/faults"
rm -f "$SB_STATE/faults/snapshot-copy".* "$SB_STATE/faults/snapshot-frozen".*

fresh_org it-snapshots

manifest_code() {
	curl -sS --noproxy '*' -o /dev/null -w '%{http_code}' -I \
		-H 'Accept: application/vnd.oci.image.manifest.v1+json' "$REG/v2/$1/manifests/$2" 2> /dev/null
}

# What a sandbox's files are: names, types, modes, sizes, link targets and
# contents' checksums of everything the test touched.
FINGERPRINT='cd / && for p in root/work root/work/new.txt root/work/exec.sh root/work/blob root/link etc/issue \
	etc/apt/apt.conf.d etc/apt/apt.conf.d/only etc/debian_version etc/skel root/work/after.txt; do
	if [ -L "$p" ]; then echo "$p L $(readlink "$p")";
	elif [ -d "$p" ]; then echo "$p D $(stat -c %a "$p") $(ls -A "$p" | tr "\n" " ")";
	elif [ -f "$p" ]; then echo "$p F $(stat -c %a "$p") $(sha256sum < "$p" | cut -c1-16)";
	else echo "$p -"; fi; done'

# ---- a sandbox with added, changed and deleted files -----------------------------
T_SECTION=setup
sb_create nginx '{"name":"it-snap-a","specs":{"memory":256,"disk":1}}'
A=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "sandbox A is ready"
TEMPLATE=$(j .data.template)
sexec "$A" 'set -e; test -f /etc/debian_version; test -d /etc/skel; test -d /etc/apt/apt.conf.d
	mkdir -p /root/work
	echo hello > /root/work/new.txt
	printf "#!/bin/sh\necho hi\n" > /root/work/exec.sh; chmod 750 /root/work/exec.sh
	head -c 3145728 /dev/urandom > /root/work/blob
	ln -s /root/work/new.txt /root/link
	printf "changed\n" > /etc/issue
	rm /etc/debian_version
	rm -rf /etc/skel
	rm -rf /etc/apt/apt.conf.d; mkdir /etc/apt/apt.conf.d; echo x > /etc/apt/apt.conf.d/only'
is "$CODE" 0 "files added, changed, deleted; a directory replaced by another"
sexec "$A" "$FINGERPRINT"
FP_A=$OUT
like "$FP_A" 'etc/debian_version -' "A: the fingerprint sees the deletion"

# ---- create a snapshot -------------------------------------------------------------
T_SECTION=create
req nginx POST "/sandboxes/$A/snapshots" '{"name":"it-snap-1"}'
S1=$(j '.data.id // empty')
[ -n "$S1" ] && SNAPS+=("$S1")
is "$STATUS" 202 "POST /sandboxes/A/snapshots: 202"
like "$S1" '^[0-9a-f]{24}$' "id: 24 lowercase hex"
is "$(j -c '.data | keys')" \
	'["created_at","failure_reason","id","image_tag","name","sandbox_id","size_bytes","source_template","status"]' \
	"exactly the contract's fields"
is "$(j -c '.data | [.sandbox_id, .name, .source_template, .status, .failure_reason]')" \
	"[\"$A\",\"it-snap-1\",\"$TEMPLATE\",\"creating\",null]" "sandbox_id, name, source_template, status creating"
like "$(j .data.created_at)" "$RFC3339" "created_at: RFC 3339"
sexec "$A" 'echo still here'
is "$CODE $OUT" "0 still here" "the sandbox runs commands while its snapshot is made"
wait_until 180 snap_settled "$A" "$S1"
req nginx GET "/sandboxes/$A/snapshots"
is "$(j -r --arg id "$S1" '.data.data[] | select(.id == $id) | .status')" ready "the snapshot becomes ready"
SIZE=$(j -r --arg id "$S1" '.data.data[] | select(.id == $id) | .size_bytes')
TAG=$(j -r --arg id "$S1" '.data.data[] | select(.id == $id) | .image_tag')
ok "[ '${SIZE:-0}' -gt 0 ] 2> /dev/null" "size_bytes: the layer's size ($SIZE)"
like "$TAG" "^sbx/snapshots/$S1@sha256:[0-9a-f]{64}\$" "image_tag: the image in the registry, by digest"
DIGEST=${TAG#*@}
is "$(manifest_code "sbx/snapshots/$S1" "$DIGEST")" 200 "the registry serves the manifest"
is "$(curl -sS --noproxy '*' -H 'Accept: application/vnd.oci.image.manifest.v1+json' "$REG/v2/sbx/snapshots/$S1/manifests/$DIGEST" |
	jq -r '.layers | length > 1')" true "its layers: the template's and one more"
is "$(ls -A "$SNAPWORK" 2> /dev/null | tr '\n' ' ')" "" "no intermediate file left on the node ($SNAPWORK)"
is "$(sb_freezer "$A" 2> /dev/null | grep -c FREEZING)" 0 "the sandbox is not left half-frozen"

sexec "$A" 'echo later > /root/work/after.txt'
is "$CODE" 0 "A writes a file after the snapshot"

# ---- restore ---------------------------------------------------------------------
T_SECTION=restore
ok "[ ! -e '$SNAPIMG/$S1' ]" "the node has no copy of the snapshot's image yet"
sb_create nginx "{\"name\":\"it-snap-b\",\"fromSnapshot\":\"$S1\",\"specs\":{\"memory\":256,\"disk\":1}}"
B=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "POST /sandboxes {fromSnapshot}: 201 ready"
req nginx GET "/sandboxes/$B"
is "$(j -c '[.data.from_snapshot, .data.template]')" "[\"$S1\",\"$TEMPLATE\"]" \
	"from_snapshot and the snapshot's template on the Sandbox object"
ok "[ -d '$SNAPIMG/$S1/layer' ]" "the node pulled the snapshot's layer from the registry"
sexec "$B" "$FINGERPRINT"
FP_B=$OUT
is "$FP_B" "$FP_A" "B's files are A's at the snapshot: added, changed, deleted, modes, link, contents"
like "$FP_B" 'etc/debian_version -' "a deleted file stays deleted"
like "$FP_B" 'etc/skel -' "a deleted directory stays deleted"
is "$(grep '^etc/apt/apt.conf.d D' <<< "$FP_B" | cut -d' ' -f4-)" "only " "a replaced directory holds only its new content"
like "$FP_B" 'root/work/after.txt -' "what A wrote after the snapshot is not there"
sexec "$B" '/root/work/exec.sh && echo more > /root/work/new.txt && cat /root/work/new.txt'
is "$CODE $OUT" "0 hi
more" "B runs the restored script and writes over a restored file"
sexec "$A" 'cat /root/work/new.txt'
is "$OUT" hello "A is untouched by B's writes"

# ---- errors ----------------------------------------------------------------------
T_SECTION=errors
req nginx POST "/sandboxes/$(random_id)/snapshots" '{"name":"x"}'
is "$STATUS" 404 "a sandbox that does not exist: 404"
req nginx POST /sandboxes/nothex/snapshots '{"name":"x"}'
is "$STATUS" 400 "a sandbox id that is not an id: 400"
req nginx POST "/sandboxes/$A/snapshots" '{"name":"Bad Name"}'
is "$STATUS" 400 "a name outside ^[a-z0-9-]{1,40}\$: 400"
req nginx POST "/sandboxes/$A/snapshots" '{"name":"ok","bogus":1}'
is "$STATUS" 400 "an unknown field: 400"
req nginx DELETE "/sandboxes/snapshots/$(random_id)"
is "$STATUS" 404 "DELETE of a snapshot that does not exist: 404"
req nginx POST /sandboxes "{\"fromSnapshot\":\"$(random_id)\"}"
is "$STATUS" 404 "fromSnapshot that does not exist: 404"
SAVED_AUTH=$REQ_AUTH
OTHER_ORG=$(new_org it-snapshots-other)
OTHER_KEY=$(new_key "$OTHER_ORG")
REQ_AUTH="Authorization: Bearer $OTHER_KEY"
req nginx GET "/sandboxes/$A/snapshots"
is "$STATUS" 404 "another organisation: the sandbox's list is 404"
req nginx POST "/sandboxes/$A/snapshots" '{"name":"steal"}'
is "$STATUS" 404 "another organisation cannot snapshot it: 404"
req nginx GET /sandboxes/snapshots
is "$STATUS $(j .data.totalCount)" "200 0" "another organisation's list does not show it"
req nginx DELETE "/sandboxes/snapshots/$S1"
is "$STATUS" 404 "another organisation cannot delete it: 404"
req nginx POST /sandboxes "{\"fromSnapshot\":\"$S1\",\"specs\":{\"memory\":256,\"disk\":1}}"
is "$STATUS" 404 "another organisation cannot restore it: 404"
sb_track "$(j '.data.id // empty')"
REQ_AUTH=$SAVED_AUTH

# ---- the snapshot process killed mid-way -----------------------------------------------
T_SECTION=killed
touch "$SB_STATE/faults/snapshot-copy.armed"
req nginx POST "/sandboxes/$A/snapshots" '{"name":"it-snap-killed"}'
S2=$(j '.data.id // empty')
[ -n "$S2" ] && SNAPS+=("$S2")
is "$STATUS" 202 "a second snapshot: 202"
PA=$(sb_place "$A")
pidf=""
wait_until 30 test -f "$SB_STATE/faults/snapshot-copy.$PA.pid" && pidf=$SB_STATE/faults/snapshot-copy.$PA.pid
rm -f "$SB_STATE/faults/snapshot-copy.armed"
ok "[ -n '$pidf' ]" "its process stopped at the fault point snapshot-copy"
req nginx POST "/sandboxes/$A/snapshots" '{"name":"it-snap-3"}'
is "$STATUS" 409 "another snapshot while one is in flight: 409"
[ "$STATUS" = 202 ] && SNAPS+=("$(j .data.id)")
req nginx DELETE "/sandboxes/snapshots/$S2"
is "$STATUS" 409 "DELETE while creating: 409"
req nginx POST "/sandboxes/$A/pause"
is "$STATUS" 409 "a pause while the snapshot is in flight: 409"
is "$(sb_db "$A" status)" ready "and the sandbox stays ready"
kill -KILL "$(cat "$pidf" 2> /dev/null)" 2> /dev/null
wait_until 60 snap_settled "$A" "$S2"
req nginx GET "/sandboxes/$A/snapshots?limit=100"
is "$(j -r --arg id "$S2" '.data.data[] | select(.id == $id) | .status')" failed "the killed snapshot ends failed"
REASON=$(j -r --arg id "$S2" '.data.data[] | select(.id == $id) | .failure_reason')
like "$REASON" 'snapshot process died' "with the reason ($REASON)"
sexec "$A" 'echo alive'
is "$CODE $OUT" "0 alive" "the sandbox still runs commands"
is "$(sb_db "$A" status)" ready "and its record is ready"
wait_until 20 eval '[ -z "$(ls -A "$SNAPWORK" 2> /dev/null)" ]'
is "$(ls -A "$SNAPWORK" 2> /dev/null | tr '\n' ' ')" "" "nothing of it is left on the node"
rm -f "$SB_STATE/faults/snapshot-copy".*

# ---- the node agent killed while the sandbox is frozen for the copy -------------------
T_SECTION=agent-killed
rm -f "$SB_STATE/faults/snapshot-frozen".*
touch "$SB_STATE/faults/snapshot-frozen.armed"
req nginx POST "/sandboxes/$A/snapshots" '{"name":"it-snap-agent"}'
S4=$(j '.data.id // empty')
[ -n "$S4" ] && SNAPS+=("$S4")
is "$STATUS" 202 "a snapshot: 202"
pidf=""
wait_until 30 test -f "$SB_STATE/faults/snapshot-frozen.$PA.pid" && pidf=$SB_STATE/faults/snapshot-frozen.$PA.pid
rm -f "$SB_STATE/faults/snapshot-frozen.armed"
ok "[ -n '$pidf' ]" "its process stopped at snapshot-frozen"
is "$(sb_freezer "$A")" FROZEN "the sandbox is frozen there (its cgroup's freezer)"
node_old=$(worker_pid node)
mark=$(log_mark)
kill -KILL "$node_old" 2> /dev/null
ok "[ -n '$node_old' ]" "the node agent (pid $node_old) is SIGKILLed there (its snapshot process dies with it)"
wait_until 60 node_consuming_since "$mark"
wait_until 60 snap_settled "$A" "$S4"
req nginx GET "/sandboxes/$A/snapshots?limit=100"
is "$(j -r --arg id "$S4" '.data.data[] | select(.id == $id) | .status')" failed "the restarted agent fails the snapshot"
REASON=$(j -r --arg id "$S4" '.data.data[] | select(.id == $id) | .failure_reason')
like "$REASON" 'restart' "with the reason ($REASON)"
sexec "$A" 'cat /root/work/new.txt'
is "$CODE $OUT" "0 hello" "the sandbox runs commands again, its files intact"
is "$(sb_db "$A" status)" ready "and its record is ready"
wait_until 20 eval '[ -z "$(ls -A "$SNAPWORK" 2> /dev/null)" ]'
is "$(ls -A "$SNAPWORK" 2> /dev/null | tr '\n' ' ')" "" "nothing of the snapshot is left on the node"
req nginx DELETE "/sandboxes/snapshots/$S4"
is "$STATUS" 204 "the failed snapshot is deleted"
rm -f "$SB_STATE/faults/snapshot-frozen".*

# ---- lists ------------------------------------------------------------------------
T_SECTION=list
req nginx GET '/sandboxes/snapshots?limit=1'
is "$STATUS $(j -c '.data | [.totalCount, .currentPage, .totalPages, .limit, (.data | length)]')" "200 [2,1,2,1,1]" \
	"GET /sandboxes/snapshots?limit=1: paginated (totalCount 2, 2 pages, one item)"
is "$(j '.data.data[0].id')" "$S2" "newest first"
req fcgi GET "/v1/sandboxes/$A/snapshots?page=2&limit=1"
is "$STATUS $(j -c '.data | [.totalCount, .currentPage, .totalPages, .limit]') $(j '.data.data[0].id')" \
	"200 [2,2,2,1] $S1" "GET /v1/sandboxes/A/snapshots?page=2 (FastCGI direct): the older one"
req nginx GET "/sandboxes/$B/snapshots"
is "$STATUS $(j -c '.data | [.totalCount, (.data | length)]')" "200 [0,0]" "B has no snapshots of its own"

# ---- delete -----------------------------------------------------------------------
T_SECTION=delete
req nginx DELETE "/sandboxes/snapshots/$S1"
is "$STATUS" 204 "DELETE /sandboxes/snapshots/ID: 204"
is "$(manifest_code "sbx/snapshots/$S1" "$DIGEST")" 404 "the registry no longer serves its manifest"
req nginx DELETE "/sandboxes/snapshots/$S1"
is "$STATUS" 404 "a second DELETE: 404"
req nginx DELETE "/sandboxes/snapshots/$S2"
is "$STATUS" 204 "a failed snapshot is deleted too"
req nginx GET /sandboxes/snapshots
is "$(j .data.totalCount)" 0 "the list is empty"
req nginx POST /sandboxes "{\"fromSnapshot\":\"$S1\",\"specs\":{\"memory\":256,\"disk\":1}}"
is "$STATUS" 404 "fromSnapshot of a deleted snapshot: 404"
sb_track "$(j '.data.id // empty')"
SNAPS=()

# ---- automatic snapshots -------------------------------------------------------------
T_SECTION=automatic
KEEP=$(conf_get snapshot_auto_keep)
: "${KEEP:=5}"
sb_create nginx '{"name":"it-snap-auto","snapshotMode":"automatic","snapshotFrequency":"0 0 1 1 *","specs":{"memory":256,"disk":1}}'
C=$SB_ID
is "$STATUS $(j -c '[.data.status]')" '201 ["ready"]' "snapshotMode automatic with a valid 5-field cron: 201"
req nginx GET "/sandboxes/$C"
is "$(j -c '[.data.snapshot_mode, .data.snapshot_frequency]')" '["automatic","0 0 1 1 *"]' \
	"the Sandbox shows snapshot_mode automatic and its schedule"
next_at() { psql_q "SELECT coalesce(to_char(next_snapshot_at AT TIME ZONE 'UTC', 'MM-DD HH24:MI'), '') FROM sandboxes WHERE id = '$C'"; }
wait_until 30 eval '[ -n "$(next_at)" ]'
is "$(next_at)" "01-01 00:00" "its node computed the next time from the schedule (January 1st, 00:00 UTC)"
# the node took the due snapshot (its next time moved on) and it has ended
auto_taken() {
	[ "$(psql_q "SELECT next_snapshot_at > now() AND NOT EXISTS (SELECT 1 FROM snapshots
		WHERE sandbox_id = '$C' AND status = 'creating') FROM sandboxes WHERE id = '$C'")" = t ]
}
AUTO_IDS=()
for round in $(seq 1 $((KEEP + 1))); do
	psql_q "UPDATE sandboxes SET next_snapshot_at = now() WHERE id = '$C'" > /dev/null
	wait_until 180 auto_taken
	AUTO_IDS+=("$(psql_q "SELECT id FROM snapshots WHERE sandbox_id = '$C' AND automatic ORDER BY created_at DESC LIMIT 1")")
	[ "$round" = 1 ] && FIRST_DIGEST=$(psql_q "SELECT coalesce(image_digest, '') FROM snapshots WHERE id = '${AUTO_IDS[0]}'")
done
like "$FIRST_DIGEST" '^sha256:' "the first automatic snapshot became ready (${AUTO_IDS[0]})"
# the node prunes after it recorded the new one ready (never before, so
# that a failed snapshot costs no kept one): for a moment there are KEEP + 1
auto_pruned() {
	[ "$(psql_q "SELECT count(*) FROM snapshots WHERE sandbox_id = '$C' AND automatic")" -le "$KEEP" ]
}
wait_until 30 auto_pruned
req nginx GET "/sandboxes/$C/snapshots?limit=100"
is "$(j '.data.totalCount')" "$KEEP" "$((KEEP + 1)) automatic snapshots taken, $KEEP kept (snapshot_auto_keep)"
is "$(j -r '[.data.data[].status] | unique | join(",")')" ready "the kept ones are ready"
like "$(j -r '.data.data[0].name')" '^auto-[0-9]{8}-[0-9]{4}$' "named auto-YYYYMMDD-HHMM ($(j -r '.data.data[0].name'))"
is "$(j -r --arg id "${AUTO_IDS[0]}" '[.data.data[].id] | index($id)')" null "the oldest went"
is "$(manifest_code "sbx/snapshots/${AUTO_IDS[0]}" "$FIRST_DIGEST")" 404 "and its image is gone from the registry"
is "$(next_at)" "01-01 00:00" "the next time is the schedule's again"
for s in $(psql_q "SELECT id FROM snapshots WHERE sandbox_id = '$C'"); do SNAPS+=("$s"); done

# ---- a sandbox that is not ready -----------------------------------------------------
T_SECTION=state
req nginx DELETE "/sandboxes/$B"
is "$STATUS" 204 "B destroyed"
req nginx POST "/sandboxes/$B/snapshots" '{"name":"late"}'
is "$STATUS" 400 "a snapshot of a destroyed sandbox: 400"
like "$(j .message)" destroyed "the message names the state ($(j .message))"
req nginx GET "/sandboxes/$B/snapshots"
is "$STATUS" 200 "a destroyed sandbox's list still answers"

finish
