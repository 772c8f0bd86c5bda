#!/bin/bash
# test: any stack, slow
# Volumes (API.md "Volumes", issue 12):
#  - POST/GET/DELETE /volumes with the shapes the official SDKs read, field
#    by field (size, attached_sandbox_id, the region object, csi_volume_id);
#    validation (name, size range, region, duplicate name: 400);
#  - the image is a sparse file on the node (independent look: the state
#    directory), a real ext4 with a hard size: ENOSPC inside past it, and the
#    host pays only what was written;
#  - attached with volumeId at mountPath: data written there survives the
#    sandbox's destroy and is there in the next sandbox that attaches it; a
#    volume is attached to one sandbox at a time (a second create: 400), and
#    delete is refused while attached (400, the contract's message);
#  - persistent: true makes a fresh volume for the sandbox, shown on the
#    Sandbox (persistent, persistent_disk_gb, volume_id, mount_path) and in
#    GET /volumes; it outlives the sandbox;
#  - the node admits volumes only within its disk budget (503 with the reason);
#  - a worker killed in the middle of an attach (the node agent, while its
#    start process is stopped at the armed fault point start-volume): the
#    create fails, the record is failed, the volume is detached, nothing of
#    the sandbox is left on the node (independent listing) and no loop device
#    holds the image; the volume attaches again with its data;
#  - a young .img.tmp (an image a persistent sandbox's start is making in
#    its own process: a CI run's create failed when the node's volume pass
#    removed it mid-make) is left alone by the node's volume passes; an old
#    one (an interrupted create) is removed.
. "$(dirname "$0")/lib.sh"

t_require --root "mount, losetup, runsc" runsc jq losetup mkfs.ext4
require_stack

RPC_TIMEOUT=$(conf_get rpc_timeout)
: "${RPC_TIMEOUT:=60}"
REAPER_INTERVAL=$(conf_get reaper_interval)
: "${REAPER_INTERVAL:=10}"
VOLDIR=$SB_STATE/volumes
REGION=$(conf_get region_id)
: "${REGION:=000000000000000000000001}"
VMIN=$(conf_get volume_min_gb)
: "${VMIN:=10}"
VMAX=$(conf_get volume_max_gb)
: "${VMAX:=50}"

t_on_exit sb_cleanup vol_cleanup
rm -f "$SB_STATE/faults/start-volume".*

fresh_org it-volumes
# room for the budget test: the plan's volume limits are not what is tested here
psql_q "UPDATE orgs SET max_volumes = 100, max_volume_gb = 100000, max_sandboxes = 20 WHERE id = '$ORG'" > /dev/null

# vexec ID CMD: lib's sexec (OUT and CODE), and ERR.
vexec() {
	sexec "$1" "$2"
	ERR=$(j .data.stderr)
}
RFC3339='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$'
img_of() { echo "$VOLDIR/$1.img"; }

# ---- create: the shape ---------------------------------------------------------
T_SECTION=create
req nginx POST /volumes "{\"name\":\"it-vol-a\",\"sizeGB\":$VMIN,\"region\":\"$REGION\",\"type\":\"sandbox\",\"teamId\":null}"
V1=$(j '.data.id // empty')
[ -n "$V1" ] && VOLS+=("$V1")
is "$STATUS $(j .message | grep -c .)" "201 1" "POST /volumes: 201 with a message"
like "$V1" '^[0-9a-f]{24}$' "id: 24 lowercase hex"
is "$(j .data.name) $(j .data.type) $(j .data.size)" "it-vol-a sandbox $VMIN" "name, type, size (GB)"
is "$(j -c '.data.region | [.id, .type, .enabled, (has("name") and has("country") and has("continent"))]')" \
	"[\"$REGION\",\"sandbox\",true,true]" "region: the region object (as GET /sandboxes/regions shows it)"
is "$(j .data.team)" "$ORG" "team: the organisation"
is "$(j -c '[.data.mount_path, .data.attached_sandbox_id, .data.attached_project_id, .data.last_attached_at]')" \
	"[null,null,null,null]" "mount_path, attached_sandbox_id, attached_project_id, last_attached_at: null"
like "$(j .data.volume_handle)" '.' "volume_handle: a handle"
is "$(j .data.csi_volume_id)" "$(j .data.volume_handle)" "csi_volume_id: the same handle (the SDKs read it)"
like "$(j .data.created_at)" "$RFC3339" "created_at: RFC 3339"
like "$(j .data.updated_at)" "$RFC3339" "updated_at: RFC 3339"
is "$(j -c '.data | keys')" \
	'["attached_project_id","attached_sandbox_id","created_at","csi_volume_id","id","last_attached_at","mount_path","name","region","size","team","type","updated_at","volume_handle"]' \
	"exactly the contract's fields"
ok "[ -f '$(img_of "$V1")' ]" "the node holds the image (state_dir/volumes/ID.img)"
is "$(stat -c %s "$(img_of "$V1")")" "$((VMIN << 30))" "its size is ${VMIN} GiB"
ok "[ $(du -k "$(img_of "$V1")" | cut -f1) -lt 65536 ]" \
	"sparse: the host pays $(du -k "$(img_of "$V1")" | cut -f1) KiB, not ${VMIN} GiB"
is "$(blkid -o value -s TYPE "$(img_of "$V1")" 2> /dev/null)" ext4 "the image is ext4"

req nginx POST /volumes '{"name":"it-vol-b","sizeGB":'"$VMIN"'}'
V2=$(j '.data.id // empty')
[ -n "$V2" ] && VOLS+=("$V2")
is "$STATUS $(j .data.type)" "201 web" "type defaults to web; region and teamId may be left out"

# ---- validation ----------------------------------------------------------------
T_SECTION=validation
bad_vol() {
	local st=$1 re=$2 body=$3 what=$4 before
	before=$(psql_q "SELECT count(*) FROM volumes WHERE org_id = '$ORG'")
	req nginx POST /volumes "$body"
	is "$STATUS" "$st" "$what: $st"
	like "$(j .message)" "$re" "$what: the message says why ($(j .message))"
	is "$(psql_q "SELECT count(*) FROM volumes WHERE org_id = '$ORG'")" "$before" "$what: nothing written"
}
bad_vol 400 'already exists' '{"name":"it-vol-a","sizeGB":'"$VMIN"'}' "duplicate name"
bad_vol 400 'sizeGB' '{"name":"it-vol-c","sizeGB":'"$((VMAX + 1))"'}' "sizeGB over the range"
bad_vol 400 'sizeGB' '{"name":"it-vol-c","sizeGB":0}' "sizeGB 0"
bad_vol 400 'name' '{"name":"Bad_Name","sizeGB":'"$VMIN"'}' "name with capitals"
bad_vol 400 'sizeGB' '{"name":"it-vol-c"}' "no sizeGB"
bad_vol 400 '[Rr]egion' '{"name":"it-vol-c","sizeGB":'"$VMIN"',"region":"mars"}' "region that is not an id"
bad_vol 400 '[Rr]egion' '{"name":"it-vol-c","sizeGB":'"$VMIN"',"region":"'"$(random_id)"'"}' "unknown region"
bad_vol 400 'type' '{"name":"it-vol-c","sizeGB":'"$VMIN"',"type":"disk"}' "type disk"
bad_vol 400 '[Uu]nknown field' '{"name":"it-vol-c","sizeGB":'"$VMIN"',"bogus":1}' "unknown field"
bad_vol 404 'Team not found' '{"name":"it-vol-c","sizeGB":'"$VMIN"',"teamId":"'"$(random_id)"'"}' "another organisation's team"

# ---- list and get ----------------------------------------------------------------
T_SECTION=list
req nginx GET '/volumes?limit=1'
is "$STATUS $(j -c '.data | [.totalCount, .currentPage, .totalPages, .limit, (.data | length)]')" "200 [2,1,2,1,1]" \
	"GET /volumes?limit=1: paginated (totalCount 2, 2 pages, one item)"
is "$(j '.data.data[0].id')" "$V2" "newest first"
req fcgi GET "/v1/volumes/$V1"
is "$STATUS $(j .data.id) $(j .data.size)" "200 $V1 $VMIN" "GET /v1/volumes/ID (FastCGI direct)"
req nginx GET /volumes/not-an-id
is "$STATUS" 400 "GET /volumes/not-an-id: 400"
req nginx GET "/volumes/$(random_id)"
is "$STATUS" 404 "GET of an id that does not exist: 404"
SAVED_AUTH=$REQ_AUTH
OTHER_ORG=$(new_org it-volumes-other)
OTHER_KEY=$(new_key "$OTHER_ORG")
REQ_AUTH="Authorization: Bearer $OTHER_KEY"
req nginx GET "/volumes/$V1"
is "$STATUS" 404 "another organisation's volume: 404"
req nginx DELETE "/volumes/$V1"
is "$STATUS" 404 "another organisation cannot delete it: 404"
sb_create nginx "{\"name\":\"it-vol-thief\",\"volumeId\":\"$V1\",\"specs\":{\"memory\":256,\"disk\":1}}"
is "$STATUS" 404 "another organisation cannot attach it: 404"
REQ_AUTH=$SAVED_AUTH

# ---- attach, data, ENOSPC ----------------------------------------------------------
T_SECTION=attach
sb_create nginx "{\"name\":\"it-vol-sb1\",\"volumeId\":\"$V1\",\"mountPath\":\"/data\",\"specs\":{\"memory\":256,\"disk\":1}}"
S1=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "a sandbox with volumeId and mountPath /data: 201 ready"
is "$(j -c '[.data.persistent, .data.persistent_disk_gb, .data.volume_id, .data.mount_path]')" \
	"[true,$VMIN,\"$V1\",\"/data\"]" "the Sandbox shows persistent, persistent_disk_gb, volume_id, mount_path"
req nginx GET "/volumes/$V1"
is "$(j .data.attached_sandbox_id) $(j .data.mount_path)" "$S1 /data" "the volume shows attached_sandbox_id and mount_path"
like "$(j .data.last_attached_at)" "$RFC3339" "last_attached_at is set"
vexec "$S1" 'df -k /data | tail -n1; echo hello-from-sb1 > /data/keep.txt && mkdir -p /data/dir && echo x > /data/dir/y && sync && cat /data/keep.txt'
is "$CODE $(tail -n1 <<< "$OUT")" "0 hello-from-sb1" "files written in /data"
kb=$(head -n1 <<< "$OUT" | awk '{print $2}')
ok "[ -n '$kb' ] && [ '$kb' -gt $((VMIN * 1024 * 1024 * 9 / 10)) ] && [ '$kb' -le $((VMIN * 1024 * 1024)) ]" \
	"df inside: /data is the ${VMIN} GB volume ($kb KiB)"
vexec "$S1" "dd if=/dev/zero of=/data/big bs=1M count=$((VMIN * 1024 + 100)) 2>&1; echo rc=\$?"
like "$OUT" 'No space left on device' "writing past ${VMIN} GB fails inside with ENOSPC"
like "$OUT" 'rc=[1-9]' "dd exits non-zero"
used_kb=$(du -k "$(img_of "$V1")" | cut -f1)
ok "[ $used_kb -le $((VMIN * 1024 * 1024 + 1024)) ]" "the host paid at most the volume's size ($used_kb KiB)"
vexec "$S1" 'rm -f /data/big && sync && echo ok'
is "$OUT" ok "the big file removed again"

T_SECTION=exclusive
sb_create nginx "{\"name\":\"it-vol-sb2\",\"volumeId\":\"$V1\",\"specs\":{\"memory\":256,\"disk\":1}}"
is "$STATUS" 400 "a second sandbox with the same volume while attached: 400"
like "$(j .message)" 'attached' "the message says it is attached ($(j .message))"
req nginx DELETE "/volumes/$V1"
is "$STATUS $(j .message)" "400 Volume is attached; detach it before deleting" "DELETE while attached: 400 with the contract's message"
ok "[ -f '$(img_of "$V1")' ]" "the image is still there"

T_SECTION=survives
req nginx DELETE "/sandboxes/$S1"
is "$STATUS" 204 "the sandbox is destroyed"
wait_until 30 sb_gone "$S1"
is "$(sb_leftovers "$S1")" "" "nothing of the sandbox is left (independent listing)"
is "$(sb_loops_of "$(img_of "$V1")")" "" "no loop device holds the volume's image"
ok "[ -f '$(img_of "$V1")' ]" "the image outlives the sandbox"
req nginx GET "/volumes/$V1"
is "$(j .data.attached_sandbox_id)" null "the volume is detached"
sb_create nginx "{\"name\":\"it-vol-sb3\",\"volumeId\":\"$V1\",\"specs\":{\"memory\":256,\"disk\":1}}"
S3=$SB_ID
is "$STATUS $(j .data.mount_path)" "201 /workspace" "attached to a new sandbox (mountPath defaults to /workspace)"
vexec "$S3" 'cat /workspace/keep.txt /workspace/dir/y; ls /workspace | tr "\n" " "'
is "$OUT" "hello-from-sb1
x
dir keep.txt lost+found " "the data written by the first sandbox is there, and nothing else"
req nginx DELETE "/sandboxes/$S3"
is "$STATUS" 204 "destroyed again"
wait_until 30 sb_gone "$S3"

# ---- persistent: true ----------------------------------------------------------------
T_SECTION=persistent
sb_create nginx "{\"name\":\"it-vol-pers\",\"persistent\":true,\"persistentDiskGB\":$VMIN,\"specs\":{\"memory\":256,\"disk\":1}}"
S4=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "persistent: true: 201 ready"
V4=$(j '.data.volume_id // empty')
[ -n "$V4" ] && VOLS+=("$V4")
is "$(j -c '[.data.persistent, .data.persistent_disk_gb, .data.mount_path]')" "[true,$VMIN,\"/workspace\"]" \
	"persistent, persistent_disk_gb, mount_path /workspace"
like "$V4" '^[0-9a-f]{24}$' "volume_id: a fresh volume"
req nginx GET "/volumes/$V4"
is "$STATUS $(j .data.type) $(j .data.size) $(j .data.attached_sandbox_id)" "200 sandbox $VMIN $S4" \
	"the fresh volume is listed, attached to the sandbox"
vexec "$S4" 'echo persisted > /workspace/p.txt && sync && echo ok'
is "$OUT" ok "a file written in /workspace"
req nginx DELETE "/sandboxes/$S4"
wait_until 30 sb_gone "$S4"
req nginx GET "/volumes/$V4"
is "$STATUS $(j .data.attached_sandbox_id)" "200 null" "the volume outlives its sandbox, detached"
sb_create nginx "{\"name\":\"it-vol-pers2\",\"volumeId\":\"$V4\",\"mountPath\":\"/srv/w\",\"specs\":{\"memory\":256,\"disk\":1}}"
S5=$SB_ID
vexec "$S5" 'cat /srv/w/p.txt'
is "$STATUS $OUT" "200 persisted" "attached elsewhere (/srv/w), its data is there"
req nginx DELETE "/sandboxes/$S5"
wait_until 30 sb_gone "$S5"

# ---- the node's disk budget ---------------------------------------------------------
T_SECTION=budget
free_gb=$(($(stat -f -c '%a * %S' "$SB_STATE") / 1073741824))
got503="" made=()
for i in $(seq 1 $((free_gb / VMAX + 3))); do
	req nginx POST /volumes "{\"name\":\"it-vol-big-$i\",\"sizeGB\":$VMAX}"
	if [ "$STATUS" = 201 ]; then
		made+=("$(j .data.id)")
		VOLS+=("$(j .data.id)")
	else
		got503="$STATUS $(j .message)"
		break
	fi
done
like "$got503" '^503 .*capacity' "${VMAX} GB volumes past the node's free disk (${free_gb} GB): 503 naming the reason (after ${#made[@]} made)"
is "$(psql_q "SELECT count(*) FROM volumes WHERE org_id = '$ORG' AND name = 'it-vol-big-$((${#made[@]} + 1))'")" 0 \
	"the refused volume has no record"
for v in "${made[@]}"; do
	req nginx DELETE "/volumes/$v"
done
is "$(for v in "${made[@]}"; do [ -e "$(img_of "$v")" ] && echo "$v"; done)" "" "their images are removed by DELETE"

# ---- a worker killed in the middle of an attach --------------------------------------
T_SECTION=crash-attach
mkdir -p "$SB_STATE/faults"
rm -f "$SB_STATE/faults/start-volume".*
touch "$SB_STATE/faults/start-volume.armed"
rid="it-vol-crash-$RANDOM$RANDOM"
curl -sS --cacert "$SBX_CACERT" --max-time $((RPC_TIMEOUT + 30)) -H "$REQ_AUTH" -H 'Content-Type: application/json' \
	-H "X-Request-Id: $rid" -d "{\"name\":\"it-vol-crash\",\"volumeId\":\"$V1\",\"specs\":{\"memory\":256,\"disk\":1}}" \
	-o "$T_TMP/crash.body" -w '%{http_code}' "$SBX_URL/sandboxes" > "$T_TMP/crash.code" 2> /dev/null &
cpid=$!
pidf=""
wait_until 20 compgen -G "$SB_STATE/faults/start-volume.*.pid" > /dev/null && pidf=$(compgen -G "$SB_STATE/faults/start-volume.*.pid" | head -n1)
rm -f "$SB_STATE/faults/start-volume.armed"
PID_PLACE=${pidf##*/start-volume.}
PID_PLACE=${PID_PLACE%.pid}
# the node names the start by its placement; the record is found by it
CID=$(psql_q "SELECT id FROM sandboxes WHERE placement_id = '$PID_PLACE'")
sb_track "$CID"
ok "[ -n '$pidf' ] && [ -n \"\$(sb_mounts_of '$SB_STATE/sandboxes/$PID_PLACE/volume')\" ]" \
	"the start process stopped at start-volume with the volume mounted on the host"
node_old=$(worker_pid node)
mark=$(log_mark)
kill -KILL "$node_old" 2> /dev/null
ok "[ -n '$node_old' ]" "the node agent (pid $node_old) is SIGKILLed there (its start process dies with it)"
wait "$cpid"
is "$(cat "$T_TMP/crash.code")" 503 "the create answers 503"
wait_until $((2 * REAPER_INTERVAL + 20)) sb_status_is "$CID" failed
is "$(sb_db "$CID" status)" failed "the record ends failed"
is "$(psql_q "SELECT coalesce(attached_sandbox_id, 'none') FROM volumes WHERE id = '$V1'")" none "the volume is detached"
wait_until $((2 * REAPER_INTERVAL + 20)) sb_gone "$CID"
is "$(sb_leftovers "$CID")" "" "the restarted node agent removed the half-made sandbox (independent listing)"
wait_until 15 eval '[ -z "$(sb_loops_of "$(img_of "$V1")")" ]'
is "$(sb_loops_of "$(img_of "$V1")")" "" "no loop device holds the volume's image"
wait_until 30 node_consuming_since "$mark"
sb_create nginx "{\"name\":\"it-vol-after\",\"volumeId\":\"$V1\",\"specs\":{\"memory\":256,\"disk\":1}}"
S6=$SB_ID
vexec "$S6" 'cat /workspace/keep.txt'
is "$OUT" hello-from-sb1 "the volume attaches again with its data intact"
req nginx DELETE "/sandboxes/$S6"
wait_until 30 sb_gone "$S6"

# ---- delete -----------------------------------------------------------------------
T_SECTION=delete
req nginx DELETE "/volumes/$V1"
is "$STATUS" 204 "DELETE of a detached volume: 204"
ok "[ ! -e '$(img_of "$V1")' ]" "its image is gone from the node"
req nginx GET "/volumes/$V1"
is "$STATUS" 404 "GET after delete: 404"
req nginx DELETE "/volumes/$V1"
is "$STATUS" 404 "DELETE again: 404"
sb_create nginx "{\"name\":\"it-vol-gone\",\"volumeId\":\"$V1\",\"specs\":{\"memory\":256,\"disk\":1}}"
is "$STATUS" 404 "a create with the deleted volume: 404"

# ---- images being made -------------------------------------------------------------
T_SECTION=tmp
TV=$(random_id)
truncate -s 1M "$VOLDIR/$TV.img.tmp"
sleep $((2 * REAPER_INTERVAL + 1)) # two of the node's volume passes
ok "[ -e '$VOLDIR/$TV.img.tmp' ]" "a young .img.tmp (an image being made) outlives two volume passes"
touch -d '-10 minutes' "$VOLDIR/$TV.img.tmp"
tmp_gone() { [ ! -e "$VOLDIR/$TV.img.tmp" ]; }
wait_until $((2 * REAPER_INTERVAL + 20)) tmp_gone
ok $? "an old one (an interrupted create) is removed"
rm -f "$VOLDIR/$TV.img.tmp"

finish
