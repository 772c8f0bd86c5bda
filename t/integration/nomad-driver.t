#!/bin/bash
# The Nomad driver (issue 14, doc/nomad.md) against the Nomad contract
# server (t/nomad-contract/server.py: answers as Nomad's documented HTTP API
# does and checks every job against Nomad's job specification; it is not
# Nomad and does not run the task). For the length of the test the stack's
# worker is pointed at it (settings after a marker line, SIGHUP; restored
# and reloaded at the end). Proves:
#  - the job the driver registers: type service, namespace sandboxes, node
#    pool sandbox, count 1, restart attempts 0 mode fail, reschedule 0,
#    network cni/sbx, docker + runsc, the template's image from the stack's
#    registry, sbx-init as the command (bound read-only), pids_limit,
#    cap_drop/cap_add ALL, CPU/MemoryMB/MemoryMaxMB from the specs, sent with
#    the ACL token from nomad_token_file;
#  - a create reaches ready on the allocation's node, with the job and
#    allocation ids on the record; destroy deregisters the job with purge;
#  - a placement failure fails the create (503) with Nomad's reason and the
#    job is purged; a task that dies on the client likewise;
#  - 403 (policy denies; wrong token) -> 503 with the reason;
#  - a Nomad slower than nomad_timeout_ms -> 503 saying so (bounded), and
#    the job it registered late is removed by the reaper;
#  - the reaper deregisters a stray sbx- job no record owns (and leaves
#    someone else's job alone), and fails a ready record whose allocation
#    Nomad lost;
#  - Nomad unreachable -> 503 with the reason.
. "$(dirname "$0")/lib.sh"

t_require --root "the stack's worker config and SIGHUP" python3 jq curl
require_stack

REAPER_INTERVAL=$(conf_get reaper_interval)
: "${REAPER_INTERVAL:=10}"
LIMIT=$((3 * REAPER_INTERVAL + 10))
NC_NODE=nomad-contract-client
NC_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
NC_PID=""
NC_PORT=""
NM_CONF_MARK="# added by t/integration/nomad-driver.t (removed by its clean-up)"
NM_CONF_TOUCHED=0
REGISTRY=$(conf_get registry_url)
REGISTRY=${REGISTRY#*://}

nc_start() {
	printf '%s\n' "$NC_TOKEN" > "$T_TMP/nomad-token"
	chmod 600 "$T_TMP/nomad-token"
	python3 "$SBX_REPO/t/nomad-contract/server.py" --port-file "$T_TMP/nc.port" --token-file "$T_TMP/nomad-token" \
		--node-name "$NC_NODE" --volumes-enabled 2> "$T_TMP/nc.log" &
	NC_PID=$!
	wait_until 10 test -s "$T_TMP/nc.port" || return 1
	NC_PORT=$(cat "$T_TMP/nc.port")
}

nc_stop() {
	[ -n "$NC_PID" ] || return 0
	kill "$NC_PID" 2> /dev/null
	wait "$NC_PID" 2> /dev/null
	NC_PID=""
}

# nc METHOD PATH [BODY]: a request to the contract server (NC_BODY)
nc() {
	NC_BODY=$(curl -sS --max-time 10 -X "$1" -H "X-Nomad-Token: $NC_TOKEN" ${3:+--data "$3"} \
		"http://127.0.0.1:$NC_PORT$2" 2> /dev/null)
}
nc_mode() { nc POST /_contract/mode "$1"; }
nc_jobs() { nc GET /_contract/state && jq -r '.jobs[]' <<< "$NC_BODY"; }
nc_has_job() { nc_jobs | grep -qxF "sandboxes/$1"; }
nc_no_job() { ! nc_has_job "$1"; }

# the provisioner and the reaper run again, with the config now on disk
both_gone() { ! kill -0 "${1:-0}" 2> /dev/null && ! kill -0 "${2:-0}" 2> /dev/null; }
prov_consuming_since() { log_since "$1" | grep -q 'sbx-worker-provisioner\[[0-9]*\] info: consuming sbx.provision'; }
nm_reload() {
	local mark old_p old_r
	mark=$(log_mark)
	old_p=$(worker_pid provisioner)
	old_r=$(worker_pid reaper)
	kill -HUP "$(worker_master)" || return 1
	# an old provisioner still consuming would place a create with the old driver
	wait_until 40 both_gone "$old_p" "$old_r" || return 1
	wait_until 40 prov_consuming_since "$mark" || return 1
	# the node agent restarts too; later tests want it back
	wait_until 40 node_consuming_since "$mark"
}

nm_restore() {
	sb_cleanup
	if [ $NM_CONF_TOUCHED = 1 ]; then
		awk -v m="$NM_CONF_MARK" 'skip {skip--; next} $0 == m {skip = 4; next} {print}' "$SBX_CONF" > "$T_TMP/conf.new" &&
			cat "$T_TMP/conf.new" > "$SBX_CONF"
		nm_reload || echo "# the worker did not come back after restoring its config" >&2
		NM_CONF_TOUCHED=0
	fi
	nc_stop
	return 0
}
t_on_exit nm_restore

fresh_org it-nomad
admin org limits "$ORG" --max-sandboxes 20 > /dev/null 2>&1

# ---- set-up ------------------------------------------------------------------
T_SECTION=setup
nc_start
[ -n "$NC_PORT" ]
ok $? "the contract server listens on 127.0.0.1:$NC_PORT"
nc GET /v1/jobs?namespace=sandboxes
is "$NC_BODY" "[]" "it answers Nomad's job list, empty"
NC_BODY=$(curl -sS --max-time 5 "http://127.0.0.1:$NC_PORT/v1/jobs" 2> /dev/null)
is "$NC_BODY" "ACL token not found" "without the token it refuses (403)"

printf '%s\n%s\n%s\n%s\n%s\n' "$NM_CONF_MARK" "driver = nomad" "nomad_addr = http://127.0.0.1:$NC_PORT" \
	"nomad_token_file = $T_TMP/nomad-token" "nomad_timeout_ms = 1500" >> "$SBX_CONF"
NM_CONF_TOUCHED=1
nm_reload
ok $? "the worker reloaded with driver = nomad"

# ---- a create reaches ready; the job's shape ---------------------------------------
T_SECTION=create
sb_create nginx '{"name":"it-nomad-ok","specs":{"memory":256,"disk":1}}'
ID=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "create through Nomad: ready"
is "$(sb_db "$ID" "node_id || ' ' || nomad_job_id")" "$NC_NODE sbx-$ID" \
	"the record names the allocation's node and the job (sbx-<id>)"
nc GET "/v1/job/sbx-$ID/allocations?namespace=sandboxes"
ALLOC=$(jq -r '.[0].ID' <<< "$NC_BODY")
is "$(sb_db "$ID" "nomad_alloc_id || ' ' || container_id")" "$ALLOC $ALLOC" "and the allocation's id"
is "$(jq -r '.[0].ClientStatus + " " + .[0].TaskStates.sandbox.State' <<< "$NC_BODY")" "running running" \
	"Nomad's allocation and task are running"

nc GET /_contract/jobs
JOB=$(jq -c --arg id "sbx-$ID" '[.registered[] | select(.body.Job.ID == $id)] | last' <<< "$NC_BODY")
jf() { jq -r "$1" <<< "$JOB"; }
is "$(jf .token)" "$NC_TOKEN" "the job was sent with the token from nomad_token_file"
is "$(jf '.query.namespace + " " + .body.Job.Namespace')" "sandboxes sandboxes" "namespace sandboxes"
is "$(jf '.body.Job.Type + " " + .body.Job.NodePool')" "service sandbox" "type service, node pool sandbox"
G='.body.Job.TaskGroups'
is "$(jf "($G | length | tostring) + \" \" + ($G[0].Count | tostring)")" "1 1" "one group, count 1"
is "$(jf "$G[0].RestartPolicy | \"\\(.Attempts) \\(.Mode)\"")" "0 fail" "restart: attempts 0, mode fail"
is "$(jf "$G[0].ReschedulePolicy | \"\\(.Attempts) \\(.Unlimited)\"")" "0 false" "reschedule: attempts 0"
is "$(jf "$G[0].Networks[0].Mode")" "cni/sbx" "network mode cni/sbx"
T="$G[0].Tasks[0]"
is "$(jf "$G[0].Tasks | length")" 1 "one task"
is "$(jf "$T.Driver + \" \" + $T.Config.runtime")" "docker runsc" "docker driver, runtime runsc"
is "$(jf "$T.Config.image")" "$REGISTRY/sbx/templates/debian-12:latest" "the template's image from the stack's registry"
is "$(jf "$T.Config.command + \" \" + $T.Config.mount[0].target + \" \" + ($T.Config.mount[0].readonly | tostring)")" \
	"/.sbx/sbx-init /.sbx/sbx-init true" "sbx-init is the command, bound read-only"
PIDS=$(conf_get sandbox_pids_max)
is "$(jf "$T.Config.pids_limit")" "${PIDS:-16384}" "pids_limit is sandbox_pids_max"
is "$(jf "$T.Config | \"\\(.cap_drop) \\(.cap_add)\"" | tr -d ' ')" '["ALL"]["ALL"]' "cap_drop ALL, cap_add ALL"
is "$(jf "$T.Resources | \"\\(.CPU) \\(.MemoryMB) \\(.MemoryMaxMB)\"")" "$(j .data.specs.cpu) 256 256" \
	"resources: CPU, MemoryMB and MemoryMaxMB from the specs"

# ---- destroy ------------------------------------------------------------------------
T_SECTION=destroy
req nginx DELETE "/sandboxes/$ID"
is "$STATUS" 204 "destroy: 204"
nc_no_job "sbx-$ID"
ok $? "the job is gone from Nomad"
nc GET /_contract/jobs
is "$(jq -r --arg id "sbx-$ID" '[.deregistered[] | select(.ID == $id)] | last | .purge' <<< "$NC_BODY")" true \
	"it was deregistered with purge"
is "$(sb_db "$ID" status)" destroyed "the record is destroyed"

# ---- placement failure ----------------------------------------------------------------
T_SECTION=placement
nc_mode '{"node_memory_mb": 128}'
sb_create nginx '{"name":"it-nomad-nocap","specs":{"memory":256,"disk":1}}'
ID=$SB_ID
is "$STATUS $(j .code)" "503 provisioning_failed" "no node with the memory: 503"
like "$(j .message)" "no node could place it.*exhausted \(memory\)" "the message gives Nomad's placement failure"
like "$(sb_db "$ID" "status || ' ' || failure_reason")" "^failed .*no node could place it" "the record failed with the reason"
nc_no_job "sbx-$ID"
ok $? "the job was purged"
nc_mode '{"node_memory_mb": 8192}'

# ---- a task that dies on the client ------------------------------------------------------
T_SECTION=task-dies
nc_mode '{"task_fail": "Failed to pull `127.0.0.1/x`: manifest unknown"}'
sb_create nginx '{"name":"it-nomad-dead","specs":{"memory":256,"disk":1}}'
ID=$SB_ID
is "$STATUS $(j .code)" "503 provisioning_failed" "the task died: 503"
like "$(j .message)" "did not start: Driver Failure: Failed to pull" "with the task's last event"
nc_no_job "sbx-$ID"
ok $? "the job was purged"
nc_mode '{"task_fail": ""}'

# ---- ACL: 403 ----------------------------------------------------------------------------
T_SECTION=acl
nc_mode '{"deny": true}'
sb_create nginx '{"name":"it-nomad-403","specs":{"memory":256,"disk":1}}'
is "$STATUS $(j .code)" "503 provisioning_failed" "a policy that denies: 503"
like "$(j .message)" "permission denied \(403: Permission denied\)" "saying Nomad denied it (403)"
nc_mode '{"deny": false}'
printf 'not-the-token\n' > "$T_TMP/nomad-token"
sb_create nginx '{"name":"it-nomad-badtoken","specs":{"memory":256,"disk":1}}'
is "$STATUS" 503 "a wrong token: 503"
like "$(j .message)" "403: ACL token not found" "saying the token was not found"
printf '%s\n' "$NC_TOKEN" > "$T_TMP/nomad-token"

# ---- a slow Nomad -------------------------------------------------------------------------
T_SECTION=slow
nc_mode '{"slow_register_ms": 4000}'
sb_create nginx '{"name":"it-nomad-slow","specs":{"memory":256,"disk":1}}'
ID=$SB_ID
is "$STATUS $(j .code)" "503 provisioning_failed" "Nomad slower than nomad_timeout_ms: 503, not a hang"
like "$(j .message)" "did not answer POST /v1/jobs.* within 1500 ms" "saying Nomad did not answer in time"
nc_mode '{"slow_register_ms": 0}'
# The register lands after the driver gave up (its own deregister found
# nothing yet): a job with no live record, which the reaper removes.
late_removed() {
	nc GET /_contract/jobs &&
		jq -e --arg id "sbx-$1" '[.deregistered[] | select(.ID == $id and .found and .purge)] | length > 0' \
			<<< "$NC_BODY" > /dev/null
}
wait_until $LIMIT late_removed "$ID"
ok $? "the reaper deregisters (purge) the job Nomad registered too late"
nc_no_job "sbx-$ID"
ok $? "it is gone from Nomad"

# ---- the reaper: a stray job, someone else's job, a lost allocation --------------------------
T_SECTION=reaper
STRAY=$(random_id)
nc POST "/v1/jobs?namespace=sandboxes" "$(jq -c --arg id "sbx-$STRAY" '.body | .Job.ID = $id | .Job.Name = $id' <<< "$JOB")"
like "$NC_BODY" '"EvalID"' "a stray sbx- job with no record registered behind sbx's back"
nc POST "/v1/jobs?namespace=sandboxes" "$(jq -c '.body | .Job.ID = "web" | .Job.Name = "web"' <<< "$JOB")"
nc_has_job web
ok $? "and someone else's job 'web'"
wait_until $LIMIT nc_no_job "sbx-$STRAY"
ok $? "the reaper deregisters the stray job"
nc_has_job web
ok $? "and leaves 'web' alone"
nc DELETE "/v1/job/web?purge=true&namespace=sandboxes"

sb_create nginx '{"name":"it-nomad-lost","specs":{"memory":256,"disk":1}}'
ID=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "another create: ready"
nc POST "/_contract/alloc-lost/sbx-$ID"
wait_until $LIMIT sb_status_is "$ID" failed
like "$(sb_db "$ID" "status || ' ' || failure_reason")" "^failed .*Nomad allocation .* died: alloc is lost" \
	"the reaper fails the record whose allocation Nomad lost, with the reason"
wait_until $LIMIT nc_no_job "sbx-$ID"
ok $? "and then deregisters its job"

# ---- Nomad unreachable -------------------------------------------------------------------------
T_SECTION=refused
nc_stop
sb_create nginx '{"name":"it-nomad-down","specs":{"memory":256,"disk":1}}'
is "$STATUS $(j .code)" "503 provisioning_failed" "Nomad down: 503"
like "$(j .message)" "Nomad at http://127.0.0.1:$NC_PORT is unavailable" "saying Nomad is unavailable"

# ---- back to the local driver -------------------------------------------------------------------
T_SECTION=restore
nm_restore
sb_create nginx '{"name":"it-nomad-local","specs":{"memory":256,"disk":1}}'
is "$STATUS $(j .data.status)" "201 ready" "with the config restored, a create runs on the local node again"
is "$(sb_db "$SB_ID" "coalesce(nomad_job_id, 'none')")" none "with no Nomad job"
sb_cleanup

finish
