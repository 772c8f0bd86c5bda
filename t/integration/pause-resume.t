#!/bin/bash
# test: any stack
# Pause and resume (API.md "Sandboxes", issue 12). Measured on this machine
# (workers/pause.c): runsc checkpoint/restore works with the sandbox's own
# network namespace, so a pause keeps memory and processes (pause_kind
# "memory"):
#  - POST /pause and /resume answer {message} and nothing else; the status
#    goes pausing -> paused and resuming -> ready, and /wait follows;
#  - a background process keeps a random token and a counter in memory and
#    writes them to a file every 100 ms: after the resume the token is the
#    same and the counter goes on from where it was (fails for a pause that
#    keeps only the filesystem: the process would be gone);
#  - files written before the pause are there after it;
#  - while paused: no container runs (runsc's own view), the checkpoint is
#    on the node's disk, exec and files answer 400 naming the state, a
#    second pause 400; resume of a ready sandbox 400;
#  - the node agent killed in the middle of a pause (its pause process
#    stopped at the armed fault point pause-checkpoint: the channel closed,
#    the checkpoint not begun): the restarted agent settles the record to
#    ready, the channel works again, the process never stopped, and the next
#    pause works; and in the middle of a resume (stopped at resume-restore):
#    the record goes back to paused, the checkpoint kept, and the next
#    resume brings the same process back; killed after the restore, before
#    the channel reopens (resume-restored): settled to ready, since the
#    restored container has run since (its disk moved on from the
#    checkpoint, which is removed), its channel open again; killed
#    after the checkpoint is complete, before the record (pause-saved):
#    settled to paused, and it resumes;
#  - a sandbox paused longer than paused_limit is destroyed by the reaper
#    with destroy_reason paused_too_long, and nothing is left on the node.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq
require_stack
t_on_exit sb_cleanup
rm -f "$SB_STATE/faults/pause-checkpoint".* "$SB_STATE/faults/resume-restore".* \
	"$SB_STATE/faults/pause-saved".* "$SB_STATE/faults/resume-restored".*

REAPER_INTERVAL=$(conf_get reaper_interval)
: "${REAPER_INTERVAL:=10}"
RFC3339='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$'

fresh_org it-pause

# counter ID: "TOKEN COUNT" as the background process last wrote it
counter() { sexec "$1" 'cat /root/counter' 60; echo "$OUT"; }
wait_status() { # ID STATUS: /wait, then the status it settled at
	req nginx GET "/sandboxes/$1/wait?timeout=60"
	[ "$(j .data.status)" = "$2" ]
}

sb_create nginx '{"name":"it-pause","specs":{"memory":256,"disk":1}}'
ID=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "a sandbox"
req nginx PUT "/sandboxes/$ID/files/root/count.py" 'import os, random, time
tok = random.getrandbits(64)
n = 0
while True:
    n += 1
    with open("/root/counter.tmp", "w") as f:
        f.write("%x %d" % (tok, n))
    os.rename("/root/counter.tmp", "/root/counter")
    time.sleep(0.1)
'
is "$STATUS" 204 "a counting program written"
req nginx POST "/sandboxes/$ID/exec" '{"background":true,"cmd":"exec python3 /root/count.py"}'
is "$STATUS" 200 "a background process counting in memory"
wait_until 10 eval '[ -n "$(counter "$ID")" ]'
sexec "$ID" 'echo kept > /root/before.txt && echo ok' 60
is "$OUT" ok "a file written before the pause"
c0=$(counter "$ID")
like "$c0" '^[0-9a-f]+ [0-9]+$' "the counter runs ($c0)"

# ---- pause ----------------------------------------------------------------------
T_SECTION=pause
req nginx POST "/sandboxes/$ID/pause"
is "$STATUS" 200 "POST /pause: 200"
is "$(j -c 'keys')" '["message"]' "the answer is {message} and nothing else ($(j .message))"
ok 'wait_status "$ID" paused' "/wait follows to paused"
is "$(j .data.status) $(j .data.pause_kind)" "paused memory" "the Sandbox says paused, pause_kind memory"
like "$(j .data.paused_at)" "$RFC3339" "paused_at is set"
is "$(sb_runsc_state "$ID")" "" "no container runs (runsc's own list)"
is "$(sb_procs_of "$ID")" "" "no sentry or gofer process"
ck=$SB_STATE/sandboxes/$(sb_place "$ID")/checkpoint
ok "[ -d '$ck' ] && [ -n \"\$(ls '$ck')\" ]" "the checkpoint is on the node's disk ($(du -sh "$ck" 2> /dev/null | cut -f1))"
req nginx POST "/sandboxes/$ID/exec" '{"cmd":"true"}'
is "$STATUS" 400 "exec on a paused sandbox: 400"
like "$(j .message)" 'paused' "naming the state ($(j .message))"
req nginx GET "/sandboxes/$ID/files/root/before.txt"
is "$STATUS" 400 "a file read on a paused sandbox: 400"
like "$(j .message)" 'paused' "naming the state"
req nginx POST "/sandboxes/$ID/pause"
is "$STATUS" 400 "pause again: 400"
like "$(j .message)" 'paused' "naming the state ($(j .message))"

# ---- resume -----------------------------------------------------------------------
T_SECTION=resume
sleep 1 # time passes while paused: the counter must not
req nginx POST "/sandboxes/$ID/resume"
is "$STATUS $(j -c 'keys')" '200 ["message"]' "POST /resume: 200 {message} ($(j .message))"
ok 'wait_status "$ID" ready' "/wait follows to ready"
is "$(j .data.paused_at)" null "paused_at is cleared"
c1=$(counter "$ID")
sleep 0.5
c2=$(counter "$ID")
tok0=${c0%% *} n0=${c0##* } tok1=${c1%% *} n1=${c1##* } n2=${c2##* }
is "$tok1" "$tok0" "the same process: its in-memory token survived ($tok0)"
ok "[ '${n1:-0}' -ge '$n0' ] && [ '${n2:-0}' -gt '${n1:-0}' ]" \
	"its in-memory counter goes on after the resume ($n0 before, $n1 then $n2 after)"
sexec "$ID" 'cat /root/before.txt' 60
is "$OUT" kept "the file written before the pause is there"
sexec "$ID" 'echo after > /root/after.txt && cat /root/after.txt' 60
is "$CODE $OUT" "0 after" "commands and writes work after the resume"
req nginx POST "/sandboxes/$ID/resume"
is "$STATUS" 400 "resume of a ready sandbox: 400"
like "$(j .message)" 'ready' "naming the state ($(j .message))"

# ---- the node agent killed in the middle of a pause ---------------------------------
T_SECTION=crash-pause
mkdir -p "$SB_STATE/faults"
rm -f "$SB_STATE/faults/pause-checkpoint".*
touch "$SB_STATE/faults/pause-checkpoint.armed"
req nginx POST "/sandboxes/$ID/pause"
is "$STATUS" 200 "a pause is taken on"
pidf=""
P=$(sb_place "$ID")
wait_until 20 test -s "$SB_STATE/faults/pause-checkpoint.$P.pid" && pidf=$SB_STATE/faults/pause-checkpoint.$P.pid
rm -f "$SB_STATE/faults/pause-checkpoint.armed"
ok "[ -n '$pidf' ] && [ ! -e '$SB_STATE/sandboxes/$P/disk/chan/channel.sock' ]" \
	"its process stopped at pause-checkpoint, with the channel closed"
is "$(sb_db "$ID" status)" pausing "the record says pausing"
# A /wait begun now: the change the restarted agent makes wakes it. A
# change is announced only while a waiter holds the sandbox's key
# (sql/019); without that it would answer at its timeout (120 s).
curl -s --cacert "$SBX_CACERT" --max-time 130 -H "$REQ_AUTH" -o "$T_TMP/wait.json" -w '%{http_code}' \
	"$SBX_URL/sandboxes/$ID/wait?timeout=120" > "$T_TMP/wait.code" 2> /dev/null &
wjob=$!
waiting() {
	[ "$(psql_q "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 21315 AND objsubid = 2
		AND objid::bigint = (hashtext('$ID')::bigint + 4294967296) % 4294967296 AND mode = 'ShareLock' AND granted")" = 1 ]
}
ok 'wait_until 30 waiting' "a GET /wait waits, holding the sandbox's waiter key"
node_old=$(worker_pid node)
mark=$(log_mark)
kill -KILL "$node_old" 2> /dev/null
ok "[ -n '$node_old' ]" "the node agent (pid $node_old) is SIGKILLed there"
rm -f "$SB_STATE/faults/pause-checkpoint".*
wait_until 60 sb_status_is "$ID" ready
is "$(sb_db "$ID" status)" ready "the restarted node agent settles it to ready (the checkpoint never began)"
ok 'wait_until 20 eval "! kill -0 $wjob 2> /dev/null"' "the /wait begun while it was pausing answers once it settles, not at its timeout"
wait "$wjob"
is "$(cat "$T_TMP/wait.code") $(jq -r .data.status "$T_TMP/wait.json" 2> /dev/null)" "200 ready" "it answers 200 ready"
wait_until 30 node_consuming_since "$mark"
c3=$(counter "$ID")
is "${c3%% *}" "$tok0" "the channel works again, and the process is the same"
ok "[ '${c3##* }' -gt '${n2:-0}' ]" "and still counting (${c3##* })"
req nginx POST "/sandboxes/$ID/pause"
is "$STATUS" 200 "the next pause is taken on"
ok 'wait_status "$ID" paused' "and done"

# ---- the node agent killed in the middle of a resume --------------------------------
T_SECTION=crash-resume
rm -f "$SB_STATE/faults/resume-restore".*
touch "$SB_STATE/faults/resume-restore.armed"
req nginx POST "/sandboxes/$ID/resume"
is "$STATUS" 200 "a resume is taken on"
pidf=""
P=$(sb_place "$ID")
wait_until 20 test -s "$SB_STATE/faults/resume-restore.$P.pid" && pidf=$SB_STATE/faults/resume-restore.$P.pid
rm -f "$SB_STATE/faults/resume-restore.armed"
ok "[ -n '$pidf' ]" "its process stopped at resume-restore (before the restore)"
is "$(sb_db "$ID" status)" resuming "the record says resuming"
node_old=$(worker_pid node)
mark=$(log_mark)
kill -KILL "$node_old" 2> /dev/null
ok "[ -n '$node_old' ]" "the node agent (pid $node_old) is SIGKILLed there"
rm -f "$SB_STATE/faults/resume-restore".*
wait_until 60 sb_status_is "$ID" paused
is "$(sb_db "$ID" status)" paused "the restarted node agent settles it back to paused (the checkpoint is kept)"
wait_until 30 node_consuming_since "$mark"
req nginx POST "/sandboxes/$ID/resume"
is "$STATUS" 200 "the next resume is taken on"
ok 'wait_status "$ID" ready' "and done"
c4=$(counter "$ID")
is "${c4%% *}" "$tok0" "the same process, from the checkpoint"
req nginx POST "/sandboxes/$ID/pause"
ok 'wait_status "$ID" paused' "paused again"

# stopped_at POINT: waits for the pause or resume process of ID to stop at
# the armed fault point POINT (and disarms it).
stopped_at() {
	local P
	P=$(sb_place "$ID")
	wait_until 60 test -s "$SB_STATE/faults/$1.$P.pid"
	rm -f "$SB_STATE/faults/$1.armed"
	test -s "$SB_STATE/faults/$1.$P.pid"
}
# kill_node: SIGKILLs the node agent (the stopped process dies with it).
kill_node() {
	node_old=$(worker_pid node)
	mark=$(log_mark)
	[ -n "$node_old" ] && kill -KILL "$node_old" 2> /dev/null
}

# ---- the node agent killed after the restore, before the channel reopens -------------
T_SECTION=crash-resume-restored
rm -f "$SB_STATE/faults/resume-restored".*
touch "$SB_STATE/faults/resume-restored.armed"
req nginx POST "/sandboxes/$ID/resume"
is "$STATUS" 200 "a resume is taken on"
ok 'stopped_at resume-restored' "its process stopped at resume-restored"
is "$(sb_runsc_state "$ID") $(sb_db "$ID" status)" "running resuming" \
	"the sandbox restored (running) beside its checkpoint, the record resuming"
kill_node
ok "[ -n '$node_old' ]" "the node agent (pid $node_old) is SIGKILLed there"
rm -f "$SB_STATE/faults/resume-restored".*
# The restored container has run since its restore (the counter wrote its
# file), so the checkpoint no longer matches the disk: settled to paused,
# the next resume restored old memory over a newer disk, and failed
# outright ("restoring container: no such file or directory") when a file
# the checkpoint had open was gone (seen in CI at ebc7038).
wait_until 60 sb_status_is "$ID" ready
is "$(sb_db "$ID" status)" ready "the restarted node agent settles it to ready (the restored sandbox is the truth: it has run since)"
P=$(sb_place "$ID")
ok "[ ! -e '$SB_STATE/sandboxes/$P/checkpoint' ] && [ '$(sb_runsc_state "$ID")' = running ]" \
	"its checkpoint is removed and the restored container runs (one copy of the sandbox)"
wait_until 30 node_consuming_since "$mark"
sexec "$ID" 'cat /root/counter' 60
c5=$OUT
is "$CODE ${c5%% *}" "0 $tok0" "its channel is open again: exec answers, the same process, from the checkpoint"
sleep 0.5
c5b=$(counter "$ID")
ok "[ '${c5b##* }' -gt '${c5##* }' ] 2> /dev/null" "still counting (${c5##* } -> ${c5b##* })"
ok "! log_since '$mark' | grep -q 'sandbox $P: resume failed'" "and no resume failed meanwhile"

# ---- the node agent killed after the checkpoint, before the record ------------------
T_SECTION=crash-pause-saved
rm -f "$SB_STATE/faults/pause-saved".*
touch "$SB_STATE/faults/pause-saved.armed"
req nginx POST "/sandboxes/$ID/pause"
is "$STATUS" 200 "a pause is taken on"
ok 'stopped_at pause-saved' "its process stopped at pause-saved"
ok "[ -d '$SB_STATE/sandboxes/$(sb_place "$ID")/checkpoint' ] && [ '$(sb_db "$ID" status)' = pausing ]" \
	"the checkpoint complete, the record pausing"
kill_node
ok "[ -n '$node_old' ]" "the node agent (pid $node_old) is SIGKILLed there"
rm -f "$SB_STATE/faults/pause-saved".*
wait_until 60 sb_status_is "$ID" paused
is "$(sb_db "$ID" status)" paused "the restarted node agent settles it to paused"
wait_until 30 node_consuming_since "$mark"
req nginx POST "/sandboxes/$ID/resume"
is "$STATUS" 200 "a resume is taken on"
ok 'wait_status "$ID" ready' "and done (the stopped container runsc still knew is no obstacle)"
c6=$(counter "$ID")
is "${c6%% *}" "$tok0" "the same process"
ok "[ '${c6##* }' -gt '${c5##* }' ] 2> /dev/null" "still counting (${c6##* })"
req nginx POST "/sandboxes/$ID/pause"
ok 'wait_status "$ID" paused' "paused again"

# ---- paused too long ---------------------------------------------------------------------
T_SECTION=paused-too-long
psql_q "UPDATE sandboxes SET paused_at = now() - interval '30 days' WHERE id = '$ID'" > /dev/null
wait_until $((2 * REAPER_INTERVAL + 20)) sb_status_is "$ID" destroyed
is "$(sb_db "$ID" "status || ' ' || coalesce(destroy_reason, '-')")" "destroyed paused_too_long" \
	"a sandbox paused past the limit is destroyed: paused_too_long"
wait_until 30 sb_gone "$ID"
is "$(sb_leftovers "$ID")" "" "nothing of it is left on the node (independent listing)"

finish
