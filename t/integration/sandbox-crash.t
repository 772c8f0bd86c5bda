#!/bin/bash
# test: any stack, slow
# A worker killed with SIGKILL in the middle of a create leaves no
# 'starting' record and, after a reaper pass, nothing on the node (checked
# by an independent listing: runsc list, mountinfo, loop devices, netns,
# veth, nft, the state directory, cgroups, processes). Five points:
#  a) the node agent, as soon as the sandbox's directory appears (before
#     runsc runs);
#  b) the node agent, as soon as runsc knows the container (its state file,
#     which is what `runsc list` reads), before the API answered;
#  c) the provisioner, while the create is in flight on the node;
#  d) the node agent's short-lived start process (its child), as soon as the
#     directory appears, and e) as soon as runsc runs the container: there
#     the start process stops itself at an armed fault point (setting
#     fault_points, doc/testing.md) and is killed, so the kill never races
#     the create.
# Then f) the API child dies while a start is held, g) a destroy asked
# twice, h) a provisioner held before it records ready.
# The create answers 503 with the record failed (with a reason), or 201 with
# a ready, usable sandbox when the kill came after the work was done; never
# a 'starting' record. For a worker role the master restarts the killed
# child (new pid, log line); for a start process the node agent lives on.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, kill of the stack's worker" runsc nft ip jq
require_stack
t_on_exit sb_cleanup

RPC_TIMEOUT=$(conf_get rpc_timeout)
: "${RPC_TIMEOUT:=60}"
REAPER_INTERVAL=$(conf_get reaper_interval)
: "${REAPER_INTERVAL:=10}"
SBDIR=$SB_STATE/sandboxes

fresh_org it-crash
[ -n "$(worker_pid node)" ] && [ -n "$(worker_pid provisioner)" ] ||
	bail "cannot find the worker's node agent and provisioner pids in $(api_log)"

# dirs_now / runsc_now: the ids there now, one per line (bash only, no fork
# for the directory: the loop below must be quick).
dirs_now() {
	local d
	for d in "$SBDIR"/*; do [ -d "$d" ] && echo "${d##*/}"; done
}
runsc_now() { sb_runsc list -quiet 2> /dev/null; }
# sb_of_place P: the sandbox whose record points at placement P (listings
# show placements; "" when none).
sb_of_place() { psql_q "SELECT id FROM sandboxes WHERE placement_id = '${1//[^0-9a-f]/}'" 2> /dev/null; }

# new_one LISTER BEFORE: an id LISTER shows that BEFORE did not.
new_one() {
	local x
	while IFS= read -r x; do
		[ -n "$x" ] || continue
		[[ $'\n'$2$'\n' == *$'\n'$x$'\n'* ]] || { echo "$x"; return 0; }
	done <<< "$($1)"
	return 1
}

# state_files: the containers runsc knows (the files `runsc list` reads),
# without a fork.
state_files() {
	local f
	for f in "$SB_RUNSC_ROOT"/*.state; do
		[ -e "$f" ] || continue
		f=${f##*/}
		echo "${f%%_sandbox:*}"
	done
}

# crash POINT ROLE LISTER: starts a create in the background; as soon as
# LISTER shows a new sandbox, SIGKILLs the worker's ROLE (node, provisioner,
# or start: the node agent's start process); then checks.
crash() {
	local point=$1 role=$2 lister=$3 rid before old new id="" code body st reason deadline seen="" seenp="" sid mark m node0 fault=""
	T_SECTION=$point
	rid="it-crash-$point-$RANDOM$RANDOM"
	# The start process's points are armed (fault_points, doc/testing.md): it
	# stops itself there and the test kills it at exactly that point.
	if [ "$role" = start ]; then
		fault=${point#?-} # d-start-dir -> start-dir
		mkdir -p "$SB_STATE/faults"
		rm -f "$SB_STATE/faults/$fault".*
		touch "$SB_STATE/faults/$fault.armed"
	fi
	before=$($lister)
	node0=$(worker_pid node)
	old=$(worker_pid "$role")
	m=$(worker_master)
	mark=$(log_mark)
	curl -sS --cacert "$SBX_CACERT" --max-time $((RPC_TIMEOUT + 30)) -H "$REQ_AUTH" \
		-H 'Content-Type: application/json' -H "X-Request-Id: $rid" \
		-d "{\"name\":\"it-crash-$point\",\"specs\":{\"memory\":256,\"disk\":1}}" \
		-o "$T_TMP/body.$point" -w '%{http_code}' "$SBX_URL/sandboxes" > "$T_TMP/code.$point" 2> "$T_TMP/curl.$point" &
	local cpid=$! t_start=$SECONDS
	deadline=$((SECONDS + 15))
	# Other tests may create sandboxes meanwhile: a new one is ours when the
	# API logged it for our request id (it does so before the node hears).
	local x f
	if [ -n "$fault" ]; then
		# the start process stopped itself at the point and named itself
		while [ $SECONDS -lt $deadline ] && [ -z "$seen" ]; do
			for f in "$SB_STATE/faults/$fault".*.pid; do
				[ -s "$f" ] || continue
				seen=${f##*/"$fault".}
				seen=${seen%.pid}
				seen=$(sb_of_place "$seen") # the start names its placement
				old=$(cat "$f")
				break
			done
			[ -n "$seen" ] || sleep 0.05
		done
		rm -f "$SB_STATE/faults/$fault".*
	fi
	while [ -z "$fault" ] && [ $SECONDS -lt $deadline ]; do
		x=$(new_one "$lister" "$before") || continue
		# listings show placements: the record pointing at it is the sandbox
		sid=$(sb_of_place "$x")
		if [ -n "$sid" ] && log_since "$mark" | grep -qF "req=$rid: sandbox $sid: starting"; then
			seen=$sid
			seenp=$x
			break
		fi
		before+=$'\n'$x
	done
	local killed=0 was=""
	if [ -n "$seen" ] && [ -n "$old" ]; then
		[ "$role" = start ] && was="; the start process still ran: $([ -d "/proc/$old" ] && echo yes || echo no)"
		kill -KILL "$old" && killed=1
		diag "SIGKILLed $role (pid $old) when $lister showed $seen; runsc list had it then: $(runsc_now | grep -qx "${seenp:-$(sb_place "$seen")}" && echo yes || echo no)$was"
	fi
	ok "[ -n '$seen' ] && [ $killed = 1 ]" "a create reached the point ($lister shows a new sandbox within 15 s) and $role pid $old was SIGKILLed"
	id=$(psql_q "SELECT id FROM sandboxes WHERE request_id = '$rid'")
	sb_track "$id"
	is "$id" "${seen:-$id}" "the sandbox seen is this create's record (request id $rid)"

	wait "$cpid"
	local answered=$((SECONDS - t_start))
	code=$(cat "$T_TMP/code.$point")
	body=$(cat "$T_TMP/body.$point")
	st=$(sb_db "$id" status)
	# After the kill only two outcomes are consistent: 503 + failed, or 201 + ready.
	if [ "$code" = 201 ]; then
		diag "the create completed: 201"
		is "$(jq -r '.data.id + " " + .data.status' <<< "$body" 2> /dev/null)" "$id ready" "201: the answer is this sandbox, ready"
	else
		like "$code $(jq -r '.data.id + " " + .data.status' <<< "$body" 2> /dev/null)" "^503 $id failed\$" \
			"the create answers 503 naming this record as failed (got $code: $(head -c 300 <<< "$body"))"
	fi
	deadline=$((SECONDS + RPC_TIMEOUT + 10))
	while [ "$(sb_db "$id" status)" = starting ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
	st=$(sb_db "$id" status)
	reason=$(sb_db "$id" "coalesce(failure_reason, '')")
	if [ "$code" = 201 ]; then
		is "$st" ready "the record is ready, as the 201 said"
	else
		is "$st" failed "the record ends failed, never starting (within rpc_timeout + 10 s)"
	fi
	[ "$st" = failed ] && diag "failure_reason: $reason"
	ok "[ '$st' != failed ] || [ -n '$reason' ]" "a failed record has a failure_reason"

	if [ "$role" = start ]; then
		is "$(worker_pid node)" "$node0" "the node agent itself lives on (pid $node0)"
		like "$(log_since "$mark" | grep -F "sbx-worker-node[$node0]" | grep -F "sandbox $id: start failed" | head -n1)" \
			'start failed: .*(died|signal|killed)' "the node agent logged the start process's death"
		ok "[ '$code' = 201 ] || [ $answered -lt $((RPC_TIMEOUT - 5)) ]" \
			"the create was answered without waiting for the RPC deadline (${answered} s)"
	else
	# The master restarts what was killed.
	wait_until 15 eval '[ -n "$(worker_pid '"$role"')" ] && [ "$(worker_pid '"$role"')" != "'"$old"'" ]'
	new=$(worker_pid "$role")
	ok "[ -n '$new' ] && [ '$new' != '$old' ]" "the master restarted the $role (pid $old -> ${new:-none})"
	like "$(log_since "$mark" | grep -F "sbx-worker[$m]" | grep -F "(pid $old)" | head -n1)" \
		"$role #0 \\(pid $old\\) died of signal 9" "the master logged the $role's death by SIGKILL"
	fi

	if [ "$st" = ready ]; then
		out=$(sb_exec "$id" 'echo usable')
		is "$out" usable "the ready sandbox is usable (runsc exec)"
		req nginx DELETE "/sandboxes/$id"
		is "$STATUS" 204 "and DELETE removes it"
	fi
	# Within two reaper passes nothing is left of it on the node.
	wait_until $((2 * REAPER_INTERVAL + 5)) sb_gone "$id"
	is "$(sb_leftovers "$id")" "" "within two reaper intervals nothing is left (runsc, mounts, loops, netns, veth, nft, dir, cgroups, processes)"
	ok "[ -z \"\$(psql_q \"SELECT id FROM sandboxes WHERE status = 'starting' AND request_id = '$rid'\")\" ]" \
		"no 'starting' record is left for this create"
	# The restarted child serves again before the next point.
	if [ "$role" = node ]; then
		wait_until 20 node_consuming_since "$mark"
	elif [ "$role" = provisioner ]; then
		wait_until 20 eval 'log_since "$mark" | grep -qF "sbx-worker-$role[$new] info: consuming"'
	fi
}

crash a-dir node dirs_now
crash b-runsc node state_files
crash c-provisioner provisioner dirs_now
crash d-start-dir start dirs_now
crash e-start-runsc start state_files

# f) The API child serving the create dies while the node's start process
# is held at a fault point (nothing else can end the create then): its
# database session ends, and with it the create's lease, so the next reaper
# pass fails the record as abandoned, long before the grace a slow create
# gets (rpc_timeout + start_timeout + 30 s).
T_SECTION=f-api-child
rid="it-crash-f-$RANDOM$RANDOM"
mkdir -p "$SB_STATE/faults"
rm -f "$SB_STATE/faults/start-dir".*
touch "$SB_STATE/faults/start-dir.armed"
mark=$(log_mark)
curl -sS --cacert "$SBX_CACERT" --max-time $((RPC_TIMEOUT + 30)) -H "$REQ_AUTH" \
	-H 'Content-Type: application/json' -H "X-Request-Id: $rid" \
	-d '{"name":"it-crash-f","specs":{"memory":256,"disk":1}}' \
	-o "$T_TMP/body.f" -w '%{http_code}' "$SBX_URL/sandboxes" > "$T_TMP/code.f" 2> /dev/null &
cpid=$!
held() { compgen -G "$SB_STATE/faults/start-dir.*.pid" > /dev/null; }
wait_until 15 held
ok $? "the node's start process stopped at the start-dir point"
startpid=$(cat "$SB_STATE"/faults/start-dir.*.pid 2> /dev/null | head -n1)
rm -f "$SB_STATE/faults/start-dir.armed"
api_line=$(log_since "$mark" | grep -F "req=$rid: sandbox " | grep -F ': starting (' | head -n1)
fid=$(sed -n 's/.*req=[^:]*: sandbox \([0-9a-f]*\): starting.*/\1/p' <<< "$api_line")
apipid=$(sed -n 's/.*sbx-api-child\[\([0-9]*\)\].*/\1/p' <<< "$api_line")
sb_track "$fid"
like "$fid $apipid" '^[0-9a-f]{24} [0-9]+$' "the API child serving the create is known (pid $apipid, sandbox $fid)"
kill -KILL "$apipid" 2> /dev/null
ok $? "the API child was SIGKILLed"
wait "$cpid"
diag "the client got HTTP $(cat "$T_TMP/code.f") (nginx answers for a child that died)"
t0=$SECONDS
gone_start() { [ "$(sb_db "$fid" status)" != starting ]; }
wait_until $((2 * REAPER_INTERVAL + 5)) gone_start
is "$(sb_db "$fid" status)" failed "within two reaper passes ($((SECONDS - t0)) s) the record is failed"
like "$(sb_db "$fid" failure_reason)" 'abandoned' "...as abandoned (its lease was let go), not by a deadline"
ok "[ -d /proc/$startpid ]" "...while the start process was still held (nothing else ended the create)"
kill -KILL "$startpid" 2> /dev/null
rm -f "$SB_STATE/faults/start-dir".*
wait_until $((2 * REAPER_INTERVAL + 5)) sb_gone "$fid"
is "$(sb_leftovers "$fid")" "" "within two reaper intervals nothing of it is left on the node"

# g) A destroy asked while another of the same sandbox is under way (the
# reaper retries every pending destroy each pass, beside the API's DELETE)
# is answered by the one under way, when it ends: the node never says
# "destroyed" while the sandbox is still there. The destroy process is held
# at its first step (fault point destroy-begin) for longer than two reaper
# passes; before, the reaper's retry got an OK at once and the record said
# destroyed while everything of it was still on the node.
T_SECTION=g-destroy-twice
sb_create nginx '{"name":"it-crash-g","specs":{"memory":256,"disk":1}}'
gid=$SB_ID
gplace=$(sb_place "$gid")
is "$STATUS $(j .data.status)" "201 ready" "a sandbox to destroy"
rm -f "$SB_STATE/faults/destroy-begin".*
touch "$SB_STATE/faults/destroy-begin.armed"
curl -sS --cacert "$SBX_CACERT" --max-time $((RPC_TIMEOUT + 30)) -H "$REQ_AUTH" -X DELETE \
	-o /dev/null -w '%{http_code}' "$SBX_URL/sandboxes/$gid" > "$T_TMP/code.g" 2> /dev/null &
dpid=$!
dheld() { [ -e "$SB_STATE/faults/destroy-begin.$gplace.pid" ]; }
wait_until 15 dheld
ok $? "the node's destroy process stopped at the destroy-begin point"
rm -f "$SB_STATE/faults/destroy-begin.armed"
destpid=$(cat "$SB_STATE/faults/destroy-begin.$gplace.pid" 2> /dev/null)
sleep $((2 * REAPER_INTERVAL + 1))
isnt "$(sb_db "$gid" status)" destroyed "two reaper passes later the record does not say destroyed (the destroy is held)"
ok "[ -z \"\$(cat '$T_TMP/code.g')\" ] && kill -0 $dpid 2> /dev/null" "...and the DELETE is still waiting for it"
kill -CONT "$destpid" 2> /dev/null
ok $? "the destroy process goes on"
wait "$dpid"
is "$(cat "$T_TMP/code.g") $(sb_db "$gid" status)" "204 destroyed" "the DELETE answers 204 once it is done, and the record is destroyed"
is "$(sb_leftovers "$gid")" "" "...with nothing of it left on the node"
for f in "$SB_STATE/faults/destroy-begin".*.pid; do
	[ -e "$f" ] && kill -CONT "$(cat "$f")" 2> /dev/null # anything else it held
done
rm -f "$SB_STATE/faults/destroy-begin".*

# h) A provisioner held between the node's answer (the sandbox runs, its
# record names the placement and still says starting) and its UPDATE to
# ready (fault point provision-ready), for longer than two of the node's
# orphan passes (reaper_interval): the node keeps the sandbox, and once the
# provisioner goes on the create answers 201 and the sandbox runs commands.
# Before (CI at f4c6932), an orphan pass in that gap removed the sandbox and
# the record then said ready: its execs failed.
# held_create POINT TAG: a create (in the background, pid cpid; its answer
# in $T_TMP/code.TAG and body.TAG) that a provisioner stops at POINT (armed,
# then disarmed once it is held): one point, "a provisioner stopped at the
# POINT point"; HID is the sandbox, PROVPID the stopped provisioner.
held_create() {
	local point=$1 tag=$2 pfile
	rm -f "$SB_STATE/faults/$point".*
	touch "$SB_STATE/faults/$point.armed"
	curl -sS --cacert "$SBX_CACERT" --max-time $((RPC_TIMEOUT + 30)) -H "$REQ_AUTH" \
		-H 'Content-Type: application/json' \
		-d "{\"name\":\"it-crash-$tag\",\"specs\":{\"memory\":256,\"disk\":1}}" \
		-o "$T_TMP/body.$tag" -w '%{http_code}' "$SBX_URL/sandboxes" > "$T_TMP/code.$tag" 2> /dev/null &
	cpid=$!
	wait_until $((RPC_TIMEOUT - 4)) compgen -G "$SB_STATE/faults/$point.*.pid" > /dev/null
	ok $? "a provisioner stopped at the $point point" ||
		diag "the create so far: $(cat "$T_TMP/code.$tag" 2> /dev/null) $(head -c 300 "$T_TMP/body.$tag" 2> /dev/null)"
	rm -f "$SB_STATE/faults/$point.armed"
	pfile=$(compgen -G "$SB_STATE/faults/$point.*.pid" | head -n1)
	HID=${pfile##*/"$point".}
	HID=${HID%.pid}
	PROVPID=$(cat "$pfile" 2> /dev/null)
	sb_track "$HID"
}

T_SECTION=h-provision-ready
held_create provision-ready h
hid=$HID
provpid=$PROVPID
hplace=$(sb_db "$hid" placement_id)
is "$(sb_db "$hid" status)" starting "...its record still says starting"
like "$hplace" '^[0-9a-f]{24}$' "...and names the placement the node started ($hplace)"
is "$(sb_missing "$hid")" "" "...which runs, complete, on the node"
# the hold must end before the API gives up on the provisioner (rpc_timeout)
sleep $((2 * REAPER_INTERVAL + 1))
is "$(sb_missing "$hid")" "" "two orphan passes later nothing of it is missing"
kill -CONT "$provpid" 2> /dev/null
ok $? "the provisioner goes on"
wait "$cpid"
is "$(cat "$T_TMP/code.h") $(jq -r '.data.status // empty' "$T_TMP/body.h" 2> /dev/null) $(sb_db "$hid" status)" \
	"201 ready ready" "the create answers 201 ready, and the record says ready"
is "$(rt_sh "$hid" 'echo alive')" alive "...and the sandbox runs a command"
req nginx DELETE "/sandboxes/$hid"
is "$STATUS $(sb_leftovers "$hid")" "204 " "its DELETE leaves nothing"
for f in "$SB_STATE/faults/provision-ready".*.pid; do
	[ -e "$f" ] && kill -CONT "$(cat "$f")" 2> /dev/null # anything else it held
done
rm -f "$SB_STATE/faults/provision-ready".*

# i) The provisioner dies after it recorded the sandbox ready, before it
# answered (held at provision-answer, then SIGKILLed): RabbitMQ gives the
# message to the restarted provisioner, which finds the record no longer
# starting and says so. The create still answers 201 with the ready
# sandbox, as the record says, not a 503 for a sandbox that runs (seen in
# run 4 of a 5-run repeat, when c-provisioner's kill came just after the
# ready).
T_SECTION=i-provision-answer
held_create provision-answer i
iid=$HID
provpid=$PROVPID
is "$(sb_db "$iid" status)" ready "...its record says ready"
kill -KILL "$provpid" 2> /dev/null
ok $? "the provisioner (pid $provpid) is SIGKILLed before it answered"
wait "$cpid"
is "$(cat "$T_TMP/code.i") $(jq -r '(.data.id // empty) + " " + (.data.status // empty)' "$T_TMP/body.i" 2> /dev/null) $(sb_db "$iid" status)" \
	"201 $iid ready ready" "the create answers 201 with the ready sandbox, and the record says ready" ||
	diag "body: $(head -c 300 "$T_TMP/body.i")"
is "$(rt_sh "$iid" 'echo alive')" alive "...and the sandbox runs a command"
req nginx DELETE "/sandboxes/$iid"
is "$STATUS $(sb_leftovers "$iid")" "204 " "its DELETE leaves nothing"
rm -f "$SB_STATE/faults/provision-answer".*
wait_until 15 eval '[ -n "$(worker_pid provisioner)" ] && [ "$(worker_pid provisioner)" != "'"$provpid"'" ]'

# After all of them: a create works again end to end.
T_SECTION=after
sb_create nginx '{"name":"it-crash-after","specs":{"memory":256,"disk":1}}'
is "$STATUS $(j .data.status)" "201 ready" "after the crashes a create works (201 ready)"
req nginx DELETE "/sandboxes/$SB_ID"
is "$STATUS $(sb_leftovers "$SB_ID")" "204 " "and its DELETE leaves nothing"

finish
