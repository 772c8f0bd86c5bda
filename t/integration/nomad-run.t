#!/bin/bash
# test: any stack, heavy
# A sandbox placed by the Nomad driver really runs (issue 14): the stack's
# worker is pointed at the Nomad contract server (t/nomad-contract/server.py,
# which is NOT Nomad: it answers Nomad's HTTP API and, with --docker-host,
# starts the task the way Nomad's docker driver would), and the contract
# server runs the task through the test's own Debian dockerd with runsc
# registered as a runtime (t/integration/nomadlib.sh, nomad/runsc-docker).
# This node's agent adopts the allocation: it connects to the sbx-init that
# Docker started, in the allocation's directory, with the channel key the
# job gave the task. Proves, through the public API:
#  - a create reaches ready; the record names this node, the job and the
#    allocation; Docker runs the task's container with runtime runsc, the
#    template's image from the stack's registry, sbx-init as its command;
#  - the channel key reached sbx-init through the job's Nomad Variable and
#    its template (the job's Env has no key; the variable holds the very key
#    the node agent uses), and the rendered file is gone from /secrets
#    before any command runs; destroy deletes the variable;
#  - exec (JSON: output and exit code; streamed: output arrives while the
#    command runs, then done with its exit code) runs inside gVisor;
#  - a file uploaded is read back byte-exact, inside and through the API;
#  - stats: the sandbox's use is read from its container's own cgroup (the
#    one Docker had runsc make; the node notes it in state_dir/nomad/ID):
#    the memory limit is the job's MemoryMaxMB, memory, host tasks and CPU
#    time are there, CPU time rises after a busy loop; no disk of ours
#    (null);
#  - pause freezes the task's container in place (Docker's pause, through
#    nomad_docker_host): the record is paused (pause_kind memory), the
#    allocation runs on, exec is refused; a restarted node agent adopts the
#    paused sandbox again (its state in state_dir/nomad) and resumes it: the
#    container thawed, a process started before the pause lives on with its
#    memory, exec works;
#  - a snapshot copies the task's writable layer while Docker holds the
#    container paused, and the sandbox runs on; a sandbox created from it
#    runs the snapshot's image through Nomad: a file written before is
#    there, a file deleted stays deleted;
#  - volumes: persistent: true through Nomad makes the volume on its node,
#    which mounts it on the host; the job is pinned to that node and binds
#    the mount at /workspace (ext4 inside); destroy unmounts it and keeps
#    the image; a create whose task dies undoes the mount (the volume free
#    and detached); a second sandbox with volumeId reads the first's file;
#  - destroy (of the paused sandbox): the container is gone, the job purged, the allocation's
#    directory and the node's adoption removed; the sandbox answers 404.
# Not covered: networking and egress (this test runs the contract server
# without CNI, so the task has loopback only; nomad-net.t runs it with the
# sbx network).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nomadlib.sh"

t_require --root "dockerd, runsc and the stack's worker config" python3 jq curl runsc sha256sum
[ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ] || { echo "1..0 # SKIP docker.io is not installed"; exit 0; }
require_stack

plan 75

NODE=$(conf_get node_id)
[ -n "$NODE" ] || NODE=$(hostname)
NC_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
NC_PID=""
NC_PORT=""
NM_CONF_MARK="# added by t/integration/nomad-run.t (removed by its clean-up)"
NM_CONF_TOUCHED=0
REGISTRY=$(conf_get registry_url)
REGISTRY=${REGISTRY#*://}
STATE=$(conf_get state_dir)
: "${STATE:=$SBX_STACK_DIR/worker}"

nc_start() {
	printf '%s\n' "$NC_TOKEN" > "$T_TMP/nomad-token"
	chmod 600 "$T_TMP/nomad-token"
	python3 "$SBX_REPO/t/nomad-contract/server.py" --port-file "$T_TMP/nc.port" --token-file "$T_TMP/nomad-token" \
		--node-name "$NODE" --volumes-enabled --docker-host "unix://$ND_DIR/docker.sock" \
		--alloc-dir "$ND_DIR/alloc" 2> "$T_TMP/nc.log" &
	NC_PID=$!
	nc_wait_port
}
nc() {
	NC_BODY=$(curl -sS --max-time 10 -X "$1" -H "X-Nomad-Token: $NC_TOKEN" ${3:+--data "$3"} \
		"http://127.0.0.1:$NC_PORT$2" 2> /dev/null)
}
nc_jobs() { nc GET /_contract/state && jq -r '.jobs[]' <<< "$NC_BODY"; }
nc_no_job() { ! nc_jobs | grep -qxF "sandboxes/$1"; }

S1=""
snap_delete() {
	[ -n "$S1" ] && curl -sS -o /dev/null --cacert "$SBX_CACERT" --max-time 40 -X DELETE -H "$REQ_AUTH" \
		"$SBX_URL/sandboxes/snapshots/$S1" 2> /dev/null
	return 0
}
# (nomad-run.t's adopt-ticks section holds adoptions; released whatever happens)
adopt_release() { rm -f "$STATE/faults/adopt-hold.armed"; }
t_on_exit snap_delete adopt_release nm_restore

rt_setup it-nomad-run
RT_MARK=$(log_mark)

# ---- set-up ------------------------------------------------------------------
T_SECTION=setup
nd_start
ok $? "the test's dockerd runs (runsc registered as a runtime)" || bail "dockerd did not start: $(tail -n 5 "$ND_DIR/dockerd.log")"
nd_pull "$REGISTRY/sbx/templates/debian-12:latest" || bail "the test's dockerd could not pull the debian-12 template"
nc_start
ok $? "the contract server listens on 127.0.0.1:$NC_PORT, its client runs tasks through that dockerd" ||
	bail "no contract server: $NC_WHY"
for kv in "driver = nomad" "nomad_addr = http://127.0.0.1:$NC_PORT" "nomad_token_file = $T_TMP/nomad-token" \
	"nomad_init_path = $SBX_BUILD/src/init/sbx-init" "nomad_alloc_dir = $ND_DIR/alloc" \
	"nomad_docker_host = unix://$ND_DIR/docker.sock"; do
	printf '%s\n%s\n' "$NM_CONF_MARK" "$kv" >> "$SBX_CONF"
done
NM_CONF_TOUCHED=1
nm_reload
ok $? "the worker reloaded with driver = nomad" || bail "the worker did not reload"

# ---- create ------------------------------------------------------------------------
T_SECTION=create
rt_new it-nomad-run
A=$RT_ID
is "$(j .data.status)" ready "create through Nomad: ready (after this node's agent reached sbx-init)"
is "$(sb_db "$A" "node_id || ' ' || nomad_job_id")" "$NODE sbx-$A" "the record names this node and the job"
ALLOC=$(sb_db "$A" nomad_alloc_id)
C=sandbox-$ALLOC
is "$(dk inspect -f '{{.HostConfig.Runtime}} {{.State.Running}} {{.Config.Image}}' "$C" 2> /dev/null)" \
	"runsc true $REGISTRY/sbx/templates/debian-12:latest" \
	"Docker runs the allocation's container with runtime runsc and the template's image"
is "$(dk inspect -f '{{index .Config.Cmd 0}}' "$C" 2> /dev/null)" /.sbx/sbx-init "sbx-init is its command"
ok "$([ -S "$ND_DIR/alloc/$ALLOC/alloc/sbx-init.sock" ] && [ -f "$STATE/nomad/$A/chan.key" ]; echo $?)" \
	"sbx-init listens in the allocation's directory; the node keeps the channel key on the host"
KEY=$(cat "$STATE/nomad/$A/chan.key" 2> /dev/null)
like "$(dk inspect -f '{{json .Config.Env}}' "$C")" "\"SBX_CHANNEL_KEY=${KEY:-none}\"" \
	"the key the node holds is the one the task got"
nc GET /_contract/jobs
is "$(jq -r --arg id "sbx-$A" '[.registered[] | select(.body.Job.ID == $id)] | last
	| .body.Job.TaskGroups[0].Tasks[0] | "\(.Env | has("SBX_CHANNEL_KEY")) \(.Templates | length)"' <<< "$NC_BODY")" \
	"false 1" "the job has no key in its Env, a template instead"
nc GET "/v1/var/nomad/jobs/sbx-$A?namespace=sandboxes"
is "$(jq -r .Items.chan_key <<< "$NC_BODY" 2> /dev/null)" "${KEY:-none}" \
	"the job's variable nomad/jobs/sbx-<id> holds that key: the template gave it to sbx-init"
ok "$([ ! -e "$ND_DIR/alloc/$ALLOC/sandbox/secrets/sbx-channel.env" ] && [ -d "$ND_DIR/alloc/$ALLOC/sandbox/secrets" ]; echo $?)" \
	"sbx-init removed the rendered file from the task's secrets directory"

# ---- exec -------------------------------------------------------------------------
T_SECTION=exec
req nginx POST "/sandboxes/$A/exec" "$(rt_json 'echo out-$((6*7)); echo err >&2; exit 3')" -H 'Content-Type: application/json'
is "$STATUS $(j .data.exit_code)" "200 3" "exec: 200 with the command's exit code"
is "$(j '.data.stdout + "|" + .data.stderr')" "out-42
|err" "its stdout and stderr"
like "$(rt_sh "$A" 'dmesg 2>/dev/null | head -n 3; uname -v')" "gVisor|Jan 10 15:06:54 PST 2016" \
	"the command runs inside gVisor"
like "$(rt_sh "$A" 'cat /proc/1/cmdline | tr "\0" " "')" "^/.sbx/sbx-init --channel /alloc/sbx-init.sock " \
	"PID 1 is sbx-init, on the allocation's channel"
unlike "$(rt_sh "$A" 'env; cat /proc/1/environ | tr "\0" "\n"; ls -a /secrets; cat /secrets/* 2>&1')" "${KEY:-the key}" \
	"the channel key is not visible inside (sbx-init cleared it, the rendered file in /secrets too)"
is "$(rt_sh "$A" "sed -n '3,\$p' /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' '")" "lo " \
	"no network interface but loopback: no route out (this run has no CNI; nomad-net.t has)"

tag=nr$RANDOM
rt_stream_start "$T_TMP/s" "/sandboxes/$A/exec" \
	"$(rt_json "echo A-$tag; while [ ! -e /tmp/go-$tag ]; do sleep 0.1; done; echo B-$tag; exit 5" 60 true)" \
	-H 'Accept: application/x-ndjson'
p=$RT_PID
wait_until 30 rt_has "$T_TMP/s" "A-$tag"
ok $? "streamed exec: the first output arrives while the command still runs"
! rt_has "$T_TMP/s" "B-$tag|\"done\""
ok $? "...and nothing more yet"
rt_sh "$A" "touch /tmp/go-$tag" > /dev/null
wait_until 30 rt_has "$T_TMP/s" '"done"'
rt_frames "$T_TMP/s" ndjson > "$T_TMP/f" 2> "$T_TMP/f.err"
is "$(rt_collect "$T_TMP/f" stdout)" "A-$tag
B-$tag" "...then the rest"
is "$(tail -n1 "$T_TMP/f" | jq -r '.type + "," + (.exit_code|tostring)')" "done,5" "...and done with its exit code"

# ---- files ------------------------------------------------------------------------
T_SECTION=files
head -c 3000000 /dev/urandom > "$T_TMP/r3"
R3=$(sha256sum < "$T_TMP/r3" | cut -d' ' -f1)
req nginx PUT "/sandboxes/$A/files/tmp/r3.bin" "@$T_TMP/r3" -H 'Content-Type: application/octet-stream'
is "$STATUS" 204 "upload of 3 MB: 204"
is "$(rt_sh "$A" "sha256sum < /tmp/r3.bin | cut -d' ' -f1")" "$R3" "inside, the file is byte-exact"
req nginx GET "/sandboxes/$A/files/tmp/r3.bin"
rt_body nginx
is "$STATUS $(sha256sum < "$T_TMP/body" | cut -d' ' -f1)" "200 $R3" "download gives back the same bytes"

# ---- stats ---------------------------------------------------------------------------
T_SECTION=stats
nc GET /_contract/jobs
MAXMB=$(jq -r --arg id "sbx-$A" '[.registered[] | select(.body.Job.ID == $id)] | last
	| .body.Job.TaskGroups[0].Tasks[0].Resources.MemoryMaxMB' <<< "$NC_BODY")
req nginx GET "/sandboxes/$A/stats"
is "$STATUS $(j .data.replicaCount)" "200 1" "GET /sandboxes/{id}/stats of the Nomad sandbox: 200"
is "$(j .data.current.memTotal)" "$((${MAXMB:-0} * 1048576))" \
	"memTotal is the job's hard limit (MemoryMaxMB $MAXMB), the container's cgroup's"
ok "$(j '.data.current | [.memUsed > 0, .cpuSeconds > 0, .pids > 0] | all' | grep -qx true; echo $?)" \
	"memory in use, CPU time and host tasks are read ($(j -c '.data.current | [.memUsed, .cpuSeconds, .pids]'))"
is "$(j -c '.data.current | [.diskUsed, .diskTotal, (.networkRxBytes | type)]')" '[null,null,"number"]' \
	"no disk of ours (null), the network counters a number"
CID=$(dk inspect -f '{{.Id}}' "$C" 2> /dev/null)
like "$(cut -d' ' -f2 "$STATE/nomad/$A/cgroup" 2> /dev/null)" "${CID:-no-container-id}" \
	"read from the container's own cgroup (Docker's, noted in state_dir/nomad/ID/cgroup)"
cpu0=$(j .data.current.cpuSeconds)
rt_sh "$A" 'timeout 3 sh -c "while :; do :; done"; echo spun' > /dev/null
req nginx GET "/sandboxes/$A/stats"
ok "$(jq -n "$(j .data.current.cpuSeconds) - ${cpu0:-0} >= 1" | grep -qx true; echo $?)" \
	"CPU time rises after a 3 s busy loop ($cpu0 -> $(j .data.current.cpuSeconds) s)"

# ---- pause ---------------------------------------------------------------------------
# Nomad's task is Docker's container: paused by freezing it in place (docker
# pause through nomad_docker_host), so the allocation runs on and memory and
# processes are kept.
T_SECTION=pause
req nginx POST "/sandboxes/$A/exec" '{"background":true,"cmd":"exec sh -c \"echo $$ $(od -An -tx8 -N8 /dev/urandom) > /tmp/me; exec sleep 100000\""}'
is "$STATUS" 200 "a background process before the pause"
wait_until 10 eval '[ -n "$(rt_sh "$A" "cat /tmp/me")" ]'
ME=$(rt_sh "$A" 'cat /tmp/me')
alive_me() { rt_sh "$A" 'read p t < /tmp/me; kill -0 $p && echo "$p $t"'; }
like "$ME" '^[0-9]+ +[0-9a-f]+$' "it runs ($ME)"
req nginx POST "/sandboxes/$A/pause"
is "$STATUS $(j -c 'keys')" '200 ["message"]' "POST /pause: 200 {message}"
wait_until 60 sb_status_is "$A" paused
req nginx GET "/sandboxes/$A"
is "$(j .data.status) $(j .data.pause_kind)" "paused memory" "the Sandbox says paused, pause_kind memory"
is "$(dk inspect -f '{{.State.Status}}' "$C" 2> /dev/null)" paused "Docker froze the task's container"
nc GET "/v1/allocation/$ALLOC?namespace=sandboxes"
is "$(jq -r .ClientStatus <<< "$NC_BODY")" running "Nomad's allocation still runs (nothing for it to replace)"
req nginx POST "/sandboxes/$A/exec" '{"cmd":"true"}'
is "$STATUS" 400 "exec on the paused sandbox: 400 ($(j .message))"

# ---- the node agent restarts -------------------------------------------------------------
T_SECTION=restart
nm_reload
ok $? "the worker restarted (its node agent too) while the sandbox was paused"
wait_until 10 sb_status_is "$A" paused
is "$(sb_db "$A" status) $(dk inspect -f '{{.State.Status}}' "$C" 2> /dev/null)" "paused paused" \
	"the new node agent keeps it paused, the container frozen"
req nginx POST "/sandboxes/$A/resume"
is "$STATUS" 200 "POST /resume: 200"
req nginx GET "/sandboxes/$A/wait?timeout=60"
is "$(j .data.status) $(j .data.paused_at)" "ready null" "/wait follows to ready, paused_at cleared"
is "$(dk inspect -f '{{.State.Status}}' "$C" 2> /dev/null)" running "Docker thawed the container"
is "$(alive_me)" "$ME" "the process started before the pause lives on, its memory kept"
is "$(rt_sh "$A" "sha256sum < /tmp/r3.bin | cut -d' ' -f1")" "$R3" \
	"the new node agent serves the resumed sandbox: exec works, the file is there"

# ---- snapshot ----------------------------------------------------------------------------
# The writable layer of the task's container (Docker's overlay2 upper
# directory; runsc runs with --overlay2=none), copied while Docker holds it
# paused, pushed on top of the template's image; a sandbox from it runs that
# image through Nomad.
T_SECTION=snapshot
tag=ns$RANDOM
is "$(rt_sh "$A" "mkdir -p /root/work && echo kept-$tag > /root/work/s.txt && rm /etc/debian_version && echo ok")" ok \
	"a file written, one of the image's deleted"
req nginx POST "/sandboxes/$A/snapshots" '{"name":"it-nomad-snap"}'
S1=$(j '.data.id // empty')
is "$STATUS" 202 "POST /sandboxes/A/snapshots of the Nomad sandbox: 202"
snap_settled() { [[ $(psql_q "SELECT status FROM snapshots WHERE id = '$S1'") =~ ^(ready|failed)$ ]]; }
wait_until 180 snap_settled
is "$(psql_q "SELECT status || ' ' || coalesce(failure_reason, '-') FROM snapshots WHERE id = '$S1'")" "ready -" \
	"the snapshot becomes ready"
is "$(dk inspect -f '{{.State.Status}}' "$C" 2> /dev/null) $(rt_sh "$A" 'echo still here')" "running still here" \
	"the container runs on (thawed after the copy) and serves commands"
# (rt_new retries a 503: a create through Nomad under a loaded machine's
# load may pass start_timeout, which is not what this tests)
rt_new it-nomad-from "\"fromSnapshot\":\"$S1\""
F=$RT_ID
is "$STATUS $(j .data.status) $(j .data.from_snapshot)" "201 ready $S1" \
	"POST /sandboxes {fromSnapshot} through Nomad: 201 ready, from_snapshot on the Sandbox"
FC=sandbox-$(sb_db "$F" nomad_alloc_id)
like "$(dk inspect -f '{{.Config.Image}}' "$FC" 2> /dev/null)" "/sbx/snapshots/$S1@sha256:[0-9a-f]{64}\$" \
	"its task runs the snapshot's image, by digest"
is "$(rt_sh "$F" 'cat /root/work/s.txt; [ -e /etc/debian_version ] && echo present || echo deleted')" "kept-$tag
deleted" "inside: the file written before the snapshot is there, the deleted one is still deleted"
req nginx DELETE "/sandboxes/$F"
f_gone() { [ -z "$(dk ps -aq --filter "name=^$FC\$")" ]; }
wait_until 30 f_gone
ok $? "that sandbox destroyed: its container is gone"

# ---- volume ------------------------------------------------------------------------
# A volume is its node's image, as with the local driver: the volume's node
# mounts it on the host (state_dir/nomad-volumes/ID), the job is pinned to
# that node and its task binds the mount.
T_SECTION=volume
VMIN=$(conf_get volume_min_gb)
: "${VMIN:=1}"
nc_mode() { nc POST /_contract/mode "$1"; }
vol_mounted() { grep -qF " $STATE/nomad-volumes/$1 " /proc/self/mountinfo; }
rt_new it-nomad-vol "\"persistent\":true,\"persistentDiskGB\":$VMIN"
P=$RT_ID
V=$(j '.data.volume_id // empty')
is "$STATUS $(j .data.status) $(j .data.mount_path)" "201 ready /workspace" \
	"persistent: true through Nomad: 201 ready, its volume at /workspace"
nc GET /_contract/jobs
is "$(jq -r --arg id "sbx-$P" '[.registered[] | select(.body.Job.ID == $id)] | last | .body.Job.TaskGroups[0]
	| "\(.Constraints[0].LTarget) \(.Constraints[0].Operand) \(.Constraints[0].RTarget) \(.Tasks[0].Config.mount[1].source) \(.Tasks[0].Config.mount[1].target)"' <<< "$NC_BODY")" \
	"\${node.unique.name} = $NODE $STATE/nomad-volumes/$P /workspace" \
	"the job is pinned to the volume's node, its task binds the node's mount of the volume"
ok "$([ -f "$STATE/volumes/$V.img" ] && vol_mounted "$P"; echo $?)" \
	"the node made the volume's image and mounted it for the task"
tag=nv$RANDOM
rt_sh "$P" "echo kept-$tag > /workspace/v.txt && sync" > /dev/null
is "$(cat "$STATE/nomad-volumes/$P/v.txt" 2> /dev/null) $(stat -f -c %T "$STATE/nomad-volumes/$P")" "kept-$tag ext2/ext3" \
	"a file written inside at /workspace is on the volume's ext4 (the node's mount of it)"
PC=sandbox-$(sb_db "$P" nomad_alloc_id)
req nginx DELETE "/sandboxes/$P"
p_gone() { [ -z "$(dk ps -aq --filter "name=^$PC\$")" ]; }
wait_until 30 p_gone
ok "$(! vol_mounted "$P" && [ ! -e "$STATE/nomad-volumes/$P" ] && [ -f "$STATE/volumes/$V.img" ]; echo $?)" \
	"destroyed: the node's mount is gone, the volume's image stays"
# a task that dies after the mount: the create fails and the mount is undone
nc_mode '{"task_fail": "Failed to pull `x`: manifest unknown"}'
sb_create nginx "{\"name\":\"it-nomad-vol-fail\",\"volumeId\":\"$V\",\"specs\":{\"memory\":256,\"disk\":1}}"
nc_mode '{"task_fail": ""}'
is "$STATUS $(j .code)" "503 provisioning_failed" "a create with the volume whose task dies: 503"
X=$(psql_q "SELECT id FROM sandboxes WHERE name = 'it-nomad-vol-fail' ORDER BY created_at DESC LIMIT 1")
: "${X:=none}"
vol_free() { ! vol_mounted "$X" && [ ! -e "$STATE/nomad-volumes/$X" ] && ! losetup -j "$STATE/volumes/$V.img" | grep -q .; }
wait_until 30 vol_free
ok $? "...fails, and its volume is unmounted and free again (no loop device holds it)"
is "$(psql_q "SELECT coalesce(attached_sandbox_id, '-') FROM volumes WHERE id = '$V'")" - "...and detached"
rt_new it-nomad-vol2 "\"volumeId\":\"$V\""
Q=$RT_ID
is "$(rt_sh "$Q" 'cat /workspace/v.txt')" "kept-$tag" \
	"a new sandbox through Nomad with volumeId: the file written by the first is there"
req nginx DELETE "/sandboxes/$Q"
q_unmounted() { ! vol_mounted "$Q" && [ ! -e "$STATE/nomad-volumes/$Q" ]; }
wait_until 30 q_unmounted
ok $? "destroyed: its mount is gone too"

# ---- an adoption waits for its sbx-init in the loop's ticks -------------------------
# Nomad says the task runs once its container started; sbx-init listens a
# moment later. The node dials it and runs the handshake from its loop's
# ticks, not in the loop (it waited there up to 3 s, every other sandbox's
# frames unread). adopt-hold keeps the node from dialling the new task, so
# that what the loop does meanwhile is seen in order, not timed.
T_SECTION=adopt-ticks
mkdir -p "$STATE/faults"
touch "$STATE/faults/adopt-hold.armed"
mark=$(log_mark)
curl -sS --cacert "$SBX_CACERT" --max-time 60 -H "$REQ_AUTH" -H 'Content-Type: application/json' \
	-d '{"name":"it-nomad-held","specs":{"memory":256,"disk":1}}' \
	-o "$T_TMP/held.body" -w '%{http_code}' "$SBX_URL/sandboxes" > "$T_TMP/held.code" 2> /dev/null &
hp=$!
adopt_waits() { log_since "$mark" | grep -q 'adopting Nomad allocation [^ ]*: waiting for its sbx-init'; }
wait_until 60 adopt_waits
ok $? "a create through Nomad: the node waits for its task's sbx-init (logged)"
is "$(rt_sh "$A" 'echo during')" during "another sandbox's exec is served meanwhile"
ok "kill -0 $hp 2> /dev/null" "...and the create still waits for its adoption"
adopt_release
wait $hp
G=$(jq -r '.data.id // empty' "$T_TMP/held.body" 2> /dev/null)
is "$(cat "$T_TMP/held.code") $(jq -r '.data.status // empty' "$T_TMP/held.body" 2> /dev/null)" "201 ready" \
	"released: the node adopts it and the create answers 201 ready"
is "$(rt_sh "$G" 'echo adopted')" adopted "...and the sandbox runs commands"
[ -n "$G" ] && req nginx DELETE "/sandboxes/$G"

# ---- destroy ------------------------------------------------------------------------
# while paused: the agent thaws the container, so Nomad's stop reaches it
T_SECTION=destroy
req nginx POST "/sandboxes/$A/pause"
wait_until 60 sb_status_is "$A" paused
ok $? "paused again, to be destroyed while paused"
req nginx DELETE "/sandboxes/$A"
like "$STATUS" "^20[04]$" "DELETE: $STATUS"
c_gone() { [ -z "$(dk ps -aq --filter "name=^$C\$")" ]; }
wait_until 30 c_gone
ok $? "the container is gone"
wait_until 10 nc_no_job "sbx-$A"
ok $? "the job is purged"
ok "$([ ! -e "$ND_DIR/alloc/$ALLOC" ] && [ ! -e "$STATE/nomad/$A" ]; echo $?)" \
	"the allocation's directory and the node's adoption are gone"
nc GET "/v1/var/nomad/jobs/sbx-$A?namespace=sandboxes"
is "$NC_BODY" "variable not found" "the channel key's variable is deleted"
req nginx POST "/sandboxes/$A/exec" "$(rt_json 'echo x')" -H 'Content-Type: application/json'
isnt "$STATUS" 200 "exec after destroy fails ($STATUS)"

finish
