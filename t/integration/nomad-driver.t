#!/bin/bash
# test: any stack, heavy
# The Nomad driver (issue 14, doc/nomad.md) against the Nomad contract
# server (t/nomad-contract/server.py: answers as Nomad's documented HTTP API
# does and checks every job against Nomad's job specification; it is not
# Nomad; its client side runs the task through the test's own dockerd with
# runsc, and this node's agent adopts it: nomadlib.sh). For the length of the test the stack's
# worker is pointed at it (settings after a marker line, SIGHUP; restored
# and reloaded at the end). The contract server speaks HTTPS and requires a
# client certificate, so every request below also proves the driver's TLS
# settings (nomad_ca_file, nomad_client_cert/key). Proves:
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
#  - 403 (policy denies; wrong token) and 500 -> 503 with the reason;
#  - the contract server itself refuses a job that breaks Nomad's job
#    specification (400), so the job above passing it means something;
#  - a Nomad slower than nomad_timeout_ms -> 503 saying so (bounded), and
#    the job it registered late is removed by the reaper;
#  - the reaper deregisters a stray sbx- job no record owns (and leaves
#    someone else's job alone), and fails a ready record whose allocation
#    Nomad lost;
#  - Nomad unreachable -> 503 with the reason;
#  - the channel key: never in the job's Env; the task's template renders
#    it from the Nomad Variable nomad/jobs/<job id>, which holds it while
#    the sandbox lives and is gone after destroy, after every failed create
#    (placement, dead task, a Variables API failing, a slow register) and,
#    for a variable no live record owns, after the reaper's pass (someone
#    else's variable and a live sandbox's are left alone); the contract
#    server fails a task whose template names a missing variable.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nomadlib.sh"

t_require --root "the stack's worker config and SIGHUP" python3 jq curl
[ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ] || { echo "1..0 # SKIP docker.io is not installed"; exit 0; }
require_stack

REAPER_INTERVAL=$(conf_get reaper_interval)
: "${REAPER_INTERVAL:=10}"
LIMIT=$((3 * REAPER_INTERVAL + 10))
# the contract server's client is this machine: its node agent adopts the
# allocations (a create is ready once it reached sbx-init), and the tasks run
# through the test's own dockerd (nomadlib.sh; t/integration/nomad-run.t
# runs commands in them)
NC_NODE=$(conf_get node_id)
[ -n "$NC_NODE" ] || NC_NODE=$(hostname)
NC_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
NC_PID=""
NC_PORT=""
NM_CONF_MARK="# added by t/integration/nomad-driver.t (removed by its clean-up)"
NM_CONF_TOUCHED=0
REGISTRY=$(conf_get registry_url)
REGISTRY=${REGISTRY#*://}

# a private CA, the server's certificate (127.0.0.1) and sbx's client certificate
nc_tls() {
	local t=$T_TMP/tls
	mkdir -p "$t" && (
		cd "$t" || exit 1
		openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 2 -keyout ca.key -out ca.crt \
			-subj "/CN=nomad contract CA" -addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign" &&
			openssl req -new -nodes -newkey rsa:2048 -keyout server.key -out server.csr -subj "/CN=localhost" &&
			printf '%s\n' "subjectAltName=IP:127.0.0.1" "extendedKeyUsage=serverAuth" > server.ext &&
			openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -sha256 \
				-extfile server.ext -out server.crt &&
			openssl req -new -nodes -newkey rsa:2048 -keyout client.key -out client.csr -subj "/CN=sbx" &&
			printf '%s\n' "extendedKeyUsage=clientAuth" > client.ext &&
			openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -sha256 \
				-extfile client.ext -out client.crt
	) > "$T_TMP/tls.log" 2>&1
}

nc_start() {
	printf '%s\n' "$NC_TOKEN" > "$T_TMP/nomad-token"
	chmod 600 "$T_TMP/nomad-token"
	python3 "$SBX_REPO/t/nomad-contract/server.py" --port-file "$T_TMP/nc.port" --token-file "$T_TMP/nomad-token" \
		--node-name "$NC_NODE" --volumes-enabled --docker-host "unix://$ND_DIR/docker.sock" \
		--alloc-dir "$ND_DIR/alloc" --tls-cert "$T_TMP/tls/server.crt" --tls-key "$T_TMP/tls/server.key" \
		--tls-client-ca "$T_TMP/tls/ca.crt" 2> "$T_TMP/nc.log" &
	NC_PID=$!
	nc_wait_port
}


# nc METHOD PATH [BODY]: a request to the contract server (NC_BODY)
nc() {
	NC_BODY=$(curl -sS --max-time 10 --cacert "$T_TMP/tls/ca.crt" --cert "$T_TMP/tls/client.crt" \
		--key "$T_TMP/tls/client.key" -X "$1" -H "X-Nomad-Token: $NC_TOKEN" ${3:+--data "$3"} \
		"https://127.0.0.1:$NC_PORT$2" 2> /dev/null)
}
nc_mode() { nc POST /_contract/mode "$1"; }
nc_jobs() { nc GET /_contract/state && jq -r '.jobs[]' <<< "$NC_BODY"; }
nc_has_job() { nc_jobs | grep -qxF "sandboxes/$1"; }
nc_no_job() { ! nc_has_job "$1"; }
# nc_var PATH: the variable's Items (NC_BODY: its body, or Nomad's 404 text)
nc_var() { nc GET "/v1/var/$1?namespace=sandboxes" && jq -c .Items <<< "$NC_BODY" 2> /dev/null; }
nc_no_var() { nc GET "/v1/var/$1?namespace=sandboxes" && [ "$NC_BODY" = "variable not found" ]; }

t_on_exit nm_restore

fresh_org it-nomad
admin org limits "$ORG" --max-sandboxes 20 > /dev/null 2>&1

# ---- set-up ------------------------------------------------------------------
T_SECTION=setup
nc_tls
ok $? "a private CA, a server and a client certificate"
nd_start || bail "the test's dockerd did not start: $(tail -n 5 "$ND_DIR/dockerd.log")"
nd_pull "$REGISTRY/sbx/templates/debian-12:latest" || bail "the test's dockerd could not pull the debian-12 template"
nc_start
ok $? "the contract server listens on 127.0.0.1:$NC_PORT" || diag "$NC_WHY"
nc GET /v1/jobs?namespace=sandboxes
is "$NC_BODY" "[]" "it answers Nomad's job list, empty"
NC_BODY=$(curl -sS --max-time 5 --cacert "$T_TMP/tls/ca.crt" --cert "$T_TMP/tls/client.crt" \
	--key "$T_TMP/tls/client.key" "https://127.0.0.1:$NC_PORT/v1/jobs" 2> /dev/null)
is "$NC_BODY" "ACL token not found" "without the token it refuses (403)"
curl -sS --max-time 5 --cacert "$T_TMP/tls/ca.crt" "https://127.0.0.1:$NC_PORT/v1/jobs" > /dev/null 2>&1
isnt $? 0 "without a client certificate the TLS handshake fails"

for kv in "driver = nomad" "nomad_addr = https://127.0.0.1:$NC_PORT" "nomad_token_file = $T_TMP/nomad-token" \
	"nomad_timeout_ms = 1500" "nomad_ca_file = $T_TMP/tls/ca.crt" "nomad_client_cert = $T_TMP/tls/client.crt" \
	"nomad_client_key = $T_TMP/tls/client.key" "nomad_init_path = $SBX_BUILD/src/init/sbx-init" \
	"nomad_alloc_dir = $ND_DIR/alloc"; do
	printf '%s\n%s\n' "$NM_CONF_MARK" "$kv" >> "$SBX_CONF"
done
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
# the channel key: in a Nomad Variable the task's template reads, never in the job
is "$(jf "$T.Env | has(\"SBX_CHANNEL_KEY\")")" false "the job's Env does not carry the channel key"
is "$(jf "$T.Templates | length")" 1 "the task has one template"
is "$(jf "$T.Templates[0].EmbeddedTmpl")" \
	"{{ with nomadVar \"nomad/jobs/sbx-$ID\" }}SBX_CHANNEL_KEY={{ .chan_key }}{{ end }}" \
	"it renders SBX_CHANNEL_KEY from the job's variable nomad/jobs/sbx-<id>"
is "$(jf "$T.Templates[0] | \"\\(.DestPath) \\(.Envvars) \\(.ChangeMode)\"")" "secrets/sbx-channel.env true noop" \
	"into the task's secrets, read back as its environment, no restart on change"
nc GET "/v1/var/nomad/jobs/sbx-$ID?namespace=sandboxes"
like "$(jq -c .Items <<< "$NC_BODY" 2> /dev/null)" '^\{"chan_key":"[0-9a-f]{64}"\}$' \
	"while the sandbox lives, the variable holds the key (its one item)"
KEYV=$(jq -r .Items.chan_key <<< "$NC_BODY" 2> /dev/null)
nc GET /_contract/jobs
ok "$([[ $KEYV =~ ^[0-9a-f]{64}$ ]] && ! grep -qF "$KEYV" <<< "$NC_BODY"; echo $?)" "the key is in no job Nomad received"

# the contract server checks jobs against Nomad's specification: a broken
# copy of the job above is refused
BROKEN=$(jq -c '.body | .Job.ID = "sbx-broken" | .Job.TaskGroups[0].Count = "1"
	| .Job.TaskGroups[0].RestartPolicy.Mode = "never" | .Job.TaskGroups[0].Tasks[0].Config.runtme = "runsc"' <<< "$JOB")
NC_CODE=$(curl -sS --max-time 10 --cacert "$T_TMP/tls/ca.crt" --cert "$T_TMP/tls/client.crt" --key "$T_TMP/tls/client.key" \
	-H "X-Nomad-Token: $NC_TOKEN" -o "$T_TMP/broken.out" -w '%{http_code}' --data "$BROKEN" \
	"https://127.0.0.1:$NC_PORT/v1/jobs?namespace=sandboxes" 2> /dev/null)
is "$NC_CODE $(head -c 60 "$T_TMP/broken.out")" "400 Job.TaskGroups[0].Count: expected int, got str" \
	"the contract server refuses a job with a wrongly typed field (400)"
BROKEN=$(jq -c '.Job.TaskGroups[0].Count = 1' <<< "$BROKEN")
nc POST "/v1/jobs?namespace=sandboxes" "$BROKEN"
like "$NC_BODY" "unknown field 'runtme'" "... a misspelt docker option"
BROKEN=$(jq -c 'del(.Job.TaskGroups[0].Tasks[0].Config.runtme)' <<< "$BROKEN")
nc POST "/v1/jobs?namespace=sandboxes" "$BROKEN"
like "$NC_BODY" "Unsupported restart mode: 'never'" "... a restart mode Nomad does not have"

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
nc_no_var "nomad/jobs/sbx-$ID"
ok $? "the channel key's variable is gone"

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
nc_no_var "nomad/jobs/sbx-$ID"
ok $? "its variable deleted"
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
nc_no_var "nomad/jobs/sbx-$ID"
ok $? "its variable deleted"
nc_mode '{"task_fail": ""}'

# ---- the Variables API failing; a template whose variable is missing --------------------------
T_SECTION=variables
nc_mode '{"var_error_500": true}'
sb_create nginx '{"name":"it-nomad-var500","specs":{"memory":256,"disk":1}}'
ID=$SB_ID
is "$STATUS $(j .code)" "503 provisioning_failed" "the Variables API failing: 503"
like "$(j .message)" "Nomad failed to store the sandbox's channel key in a Nomad variable \(500: rpc error: variables" \
	"saying Nomad failed to store the key, with Nomad's text"
nc GET /_contract/jobs
is "$(jq --arg id "sbx-$ID" '[.registered[] | select(.body.Job.ID == $id)] | length' <<< "$NC_BODY")" 0 \
	"no job was registered without its variable"
nc_mode '{"var_error_500": false}'
nc_no_var "nomad/jobs/sbx-$ID"
ok $? "and no variable is left"
# the contract server's template runner: the job above with a variable that
# does not exist. Not an sbx- job: the reaper removes an sbx- job that no
# record owns at its next pass, and leaves someone else's alone.
MISSING=it-missing-$(random_id)
nc POST "/v1/jobs?namespace=sandboxes" "$(jq -c --arg id "$MISSING" '.body | .Job.ID = $id | .Job.Name = $id
	| .Job.TaskGroups[0].Tasks[0].Templates[0].EmbeddedTmpl |= sub("nomad/jobs/[^\"]*"; "nomad/jobs/" + $id)' <<< "$JOB")"
tmpl_dead() {
	nc GET "/v1/job/$MISSING/allocations?namespace=sandboxes" &&
		jq -e '.[0].ClientStatus == "failed"' <<< "$NC_BODY" > /dev/null
}
wait_until 20 tmpl_dead
like "$(jq -r '.[0].TaskStates.sandbox.Events[-1].DisplayMessage' <<< "$NC_BODY")" \
	"^Template failed: Missing: nomadVar.block\(nomad/jobs/$MISSING@sandboxes" \
	"a task whose template names a missing variable does not start (the contract server)"
nc DELETE "/v1/job/$MISSING?purge=true&namespace=sandboxes"

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

# ---- Nomad failing: 500 ----------------------------------------------------------------------
T_SECTION=5xx
nc_mode '{"error_500": true}'
sb_create nginx '{"name":"it-nomad-500","specs":{"memory":256,"disk":1}}'
is "$STATUS $(j .code)" "503 provisioning_failed" "Nomad answers 500: 503"
like "$(j .message)" "Nomad failed to store the sandbox's channel key in a Nomad variable \(500: rpc error: No cluster leader\)" \
	"with Nomad's text (its first request, the variable, failed)"
nc_mode '{"error_500": false}'

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
nc_no_var "nomad/jobs/sbx-$ID"
ok $? "its variable was deleted"

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
# a channel key variable no record owns (a create that died between writing
# it and its undo), and someone else's variables
VSTRAY=$(random_id)
PUTS=""
for v in "nomad/jobs/sbx-$VSTRAY" nomad/jobs/web "nomad/jobs/sbx-$VSTRAY/sandbox"; do
	nc PUT "/v1/var/$v?namespace=sandboxes" "$(jq -nc --arg p "$v" '{Namespace: "sandboxes", Path: $p, Items: {chan_key: "00"}}')"
	PUTS="$PUTS$(jq -r .Path <<< "$NC_BODY" 2> /dev/null) "
done
is "$PUTS" "nomad/jobs/sbx-$VSTRAY nomad/jobs/web nomad/jobs/sbx-$VSTRAY/sandbox " \
	"a stray channel key variable and two others written behind sbx's back"
wait_until $LIMIT nc_no_var "nomad/jobs/sbx-$VSTRAY"
ok $? "the reaper deletes the channel key variable no live record owns"
ok "$(nc_var nomad/jobs/web > /dev/null && nc_var "nomad/jobs/sbx-$VSTRAY/sandbox" > /dev/null &&
	! nc_no_var nomad/jobs/web && ! nc_no_var "nomad/jobs/sbx-$VSTRAY/sandbox"; echo $?)" \
	"and leaves other variables alone (another job's, one below a sandbox's path)"
like "$(nc_var "nomad/jobs/sbx-$ID")" '"chan_key":"[0-9a-f]{64}"' "and the live sandbox's"
nc DELETE "/v1/var/nomad/jobs/web?namespace=sandboxes"
nc DELETE "/v1/var/nomad/jobs/sbx-$VSTRAY/sandbox?namespace=sandboxes"
nc POST "/_contract/alloc-lost/sbx-$ID"
wait_until $LIMIT sb_status_is "$ID" failed
like "$(sb_db "$ID" "status || ' ' || failure_reason")" "^failed .*Nomad allocation .* died: alloc is lost" \
	"the reaper fails the record whose allocation Nomad lost, with the reason"
wait_until $LIMIT nc_no_job "sbx-$ID"
ok $? "and then deregisters its job"
wait_until $LIMIT nc_no_var "nomad/jobs/sbx-$ID"
ok $? "and deletes its variable"

# ---- Nomad unreachable -------------------------------------------------------------------------
T_SECTION=refused
nc_stop
sb_create nginx '{"name":"it-nomad-down","specs":{"memory":256,"disk":1}}'
is "$STATUS $(j .code)" "503 provisioning_failed" "Nomad down: 503"
like "$(j .message)" "Nomad at https://127.0.0.1:$NC_PORT is unavailable" "saying Nomad is unavailable"

# ---- back to the local driver -------------------------------------------------------------------
T_SECTION=restore
nm_restore
sb_create nginx '{"name":"it-nomad-local","specs":{"memory":256,"disk":1}}'
is "$STATUS $(j .data.status)" "201 ready" "with the config restored, a create runs on the local node again"
is "$(sb_db "$SB_ID" "coalesce(nomad_job_id, 'none')")" none "with no Nomad job"
sb_cleanup

finish
