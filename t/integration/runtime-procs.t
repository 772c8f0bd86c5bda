#!/bin/bash
# test: any stack
# Background processes through the public API (issue 4, extension of
# API.md): `background: true` answers {pid} at once (causal: the process
# cannot end before the test lets it); list; state and exit code; output
# replayed from the start by two readers, and followed (causal: readers
# attached before the process prints the rest); stdin with ?close=1 to a
# background `cat`; signals by name and by number; output still replayable
# after the node agent is killed and restarted by the master; they die with
# their sandbox (an independent listing finds nothing left).
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, kill of the node agent" runsc jq python3
rt_begin
T=$T_TMP

rt_setup it-rt-procs
rt_new it-rt-procs-a
A=$RT_ID
P=/sandboxes/$A/processes

gone() { ! kill -0 "$1" 2> /dev/null; }

# bg_start CMD: starts a background process; PID is its pid.
bg_start() {
	exec_post "$A" "$1" '"background":true'
	PID=$(j '.data.pid // empty')
}

# output_now PID FILE: the replay of PID's output (no follow) as frames.
output_now() {
	curl -sS --cacert "$SBX_CACERT" --max-time 60 -H "$(rt_auth)" "$SBX_URL$P/$1/output" > "$2.raw" 2> /dev/null
	rt_frames "$2.raw" sse > "$2" 2> "$2.err"
}
# out_has PID REGEX: the replay's stdout matches (for wait_until).
out_has() {
	output_now "$1" "$T/oh"
	[[ $(rt_collect "$T/oh" stdout 2> /dev/null) =~ $2 ]]
}
state_is() {
	req nginx GET "$P/$1"
	[ "$(j .data.state)" = "$2" ]
}

# --- start, list, state
tag=$RANDOM
bg_start "echo bg-start-$tag; echo bg-err >&2; while [ ! -e /tmp/go-$tag ]; do sleep 0.1; done; echo bg-end-$tag; exit 4"
is "$STATUS" 200 "background exec: 200"
like "$PID" '^[0-9]+$' "background exec answers data.pid at once (the process waits for the test, so the answer did not wait for it)"
is "$(j '.data | keys | join(",")')" "pid" "data is {pid}"
req nginx GET "$P"
is "$STATUS" 200 "GET processes: 200"
is "$(j "[.data[] | select(.pid == $PID)] | length")" 1 "the list shows it"
is "$(j ".data[] | select(.pid == $PID) | .state")" running "listed as running"
like "$(j ".data[] | select(.pid == $PID) | .cmd")" "bg-start-$tag" "listed with its command"
req nginx GET "$P/$PID"
is "$STATUS|$(j .data.state)|$(j .data.exit_code)" "200|running|null" "GET processes/{pid}: running, no exit code yet"
req nginx GET "$P/999999"
is "$STATUS" 404 "an unknown pid: 404"

# --- replay by two readers, then follow (causal)
wait_until 20 out_has "$PID" "bg-start-$tag"
ok $? "the output is replayable while it runs"
output_now "$PID" "$T/r1"
output_now "$PID" "$T/r2"
is "$(rt_collect "$T/r1" stdout)|$(rt_collect "$T/r1" stderr)" "bg-start-$tag|bg-err" "reader 1 gets it from the start (stdout and stderr)"
is "$(rt_collect "$T/r2" stdout)|$(rt_collect "$T/r2" stderr)" "bg-start-$tag|bg-err" "reader 2 gets the same from the start"
rt_get_start "$T/f1" "$P/$PID/output?follow=1"
f1=$RT_PID
rt_get_start "$T/f2" "$P/$PID/output?follow=1"
f2=$RT_PID
wait_until 20 rt_has "$T/f1" "bg-start-$tag"
ok $? "follower 1 attached and got the replay"
wait_until 20 rt_has "$T/f2" "bg-start-$tag"
ok $? "follower 2 attached and got the replay"
! rt_has "$T/f1" "bg-end|\"done\"" && ! gone "$f1"
ok $? "the followers wait (the process has not printed the rest)"
rt_sh "$A" "touch /tmp/go-$tag" > /dev/null
wait_until 30 gone "$f1"
ok $? "follower 1's stream ends when the process ends"
wait_until 30 gone "$f2"
ok $? "follower 2's stream ends too"
for f in f1 f2; do
	rt_frames "$T/$f" sse > "$T/$f.frames" 2> "$T/$f.err"
	is "$(rt_collect "$T/$f.frames" stdout | tr '\n' ' ')|$(tail -n1 "$T/$f.frames" | jq -r '.type + "," + (.exit_code|tostring)')" \
		"bg-start-$tag bg-end-$tag |done,4" "$f: the whole output, live, then done with exit code 4"
done
wait_until 10 state_is "$PID" exited
ok $? "the process is exited"
is "$(j .data.exit_code)" 4 "with its exit code 4"
output_now "$PID" "$T/r3"
is "$(rt_collect "$T/r3" stdout | tr '\n' ' ')" "bg-start-$tag bg-end-$tag " "after it ended, the output is still replayable from the start"

# --- stdin with close
bg_start "cat; echo cat-done"
cpid=$PID
like "$cpid" '^[0-9]+$' "a background cat"
req nginx POST "$P/$cpid/stdin" "hello-stdin" -H 'Content-Type: application/octet-stream'
is "$STATUS" 204 "stdin: 204"
req nginx POST "$P/$cpid/stdin?close=1" $'-more\n' -H 'Content-Type: application/octet-stream'
is "$STATUS" 204 "stdin with ?close=1: 204"
wait_until 20 state_is "$cpid" exited
ok $? "closing stdin lets cat end"
is "$(j .data.exit_code)" 0 "cat exited 0"
output_now "$cpid" "$T/cat"
is "$(rt_collect "$T/cat" stdout)" $'hello-stdin-more\ncat-done' "cat printed what it was sent, in order"

# --- signals, by name and by number
bg_start "trap 'echo got-usr1' USR1; trap 'echo got-term; exit 9' TERM; echo sig-ready; while :; do sleep 0.1; done"
spid=$PID
wait_until 20 out_has "$spid" sig-ready
ok $? "a process that traps signals is ready"
req nginx POST "$P/$spid/signal" '{"signal":"SIGUSR1"}'
is "$STATUS" 200 "signal by name (SIGUSR1): 200"
wait_until 20 out_has "$spid" got-usr1
ok $? "the process got SIGUSR1"
req nginx POST "$P/$spid/signal" '{"signal":15}'
is "$STATUS" 200 "signal by number (15): 200"
wait_until 20 state_is "$spid" exited
ok $? "SIGTERM ended it"
is "$(j .data.exit_code)" 9 "its TERM trap ran (exit code 9)"
bg_start "sleep 1004"
kpid=$PID
req nginx POST "$P/$kpid/signal" '{"signal":"KILL"}'
is "$STATUS" 200 "signal by short name (KILL): 200"
wait_until 20 state_is "$kpid" exited
ok $? "SIGKILL ended it"
is "$(j '[.data.exit_code, .data.signal] | map(tostring) | join(",")')" "137,9" "killed by signal 9 (exit code 137)"
req nginx POST "$P/$kpid/signal" '{"signal":"NOPE"}'
is "$STATUS" 400 "an unknown signal name: 400"

# --- after the node agent restarts
tag=$RANDOM
bg_start "echo before-restart-$tag; while [ ! -e /tmp/go-$tag ]; do sleep 0.1; done; echo after-restart-$tag"
rpid=$PID
wait_until 20 out_has "$rpid" "before-restart-$tag"
ok $? "a background process has printed"
node=$(worker_pid node)
like "$node" '^[0-9]+$' "the node agent's pid ($node)"
mark=$(log_mark)
kill -9 "$node"
wait_until 60 node_consuming_since "$mark"
ok $? "the master restarted the node agent (\"node agent consuming\")"
wait_until 30 out_has "$rpid" "before-restart-$tag"
ok $? "after the restart the output is replayable from the start"
req nginx GET "$P/$rpid"
is "$(j .data.state)" running "the process still runs and is listed"
rt_get_start "$T/fr" "$P/$rpid/output?follow=1"
fr=$RT_PID
wait_until 20 rt_has "$T/fr" "before-restart-$tag"
ok $? "a follower attached after the restart got the replay"
rt_sh "$A" "touch /tmp/go-$tag" > /dev/null
wait_until 30 gone "$fr"
rt_frames "$T/fr" sse > "$T/fr.frames" 2> /dev/null
is "$(rt_collect "$T/fr.frames" stdout | tr '\n' ' ')|$(tail -n1 "$T/fr.frames" | jq -r .type)" \
	"before-restart-$tag after-restart-$tag |done" "and followed it to its end"

# --- they die with their sandbox
rt_new it-rt-procs-b
B=$RT_ID
req nginx POST "/sandboxes/$B/exec" '{"cmd":"sleep 1005","background":true}'
like "$(j .data.pid)" '^[0-9]+$' "a background process in a second sandbox"
is "$(SB_EXEC_TIMEOUT=30 sb_exec "$B" "ps -eo args | grep -c '^sleep 1005\$'")" 1 "runsc exec sees it running"
req nginx DELETE "/sandboxes/$B"
is "$STATUS" 204 "the sandbox is destroyed"
wait_until 30 sb_gone "$B"
ok $? "nothing of it is left on the node (runsc list, mounts, processes...: $(sb_leftovers "$B"))"
ok "! ps -eo args | grep -q '[r]unsc.*$B'" "no runsc process of it on the host"
req nginx GET "/sandboxes/$B/processes"
is "$STATUS" 400 "its processes cannot be asked for (400)"
like "$(j .message)" destroyed "the message says it is destroyed"

rt_note_restarts "$RT_MARK"
finish
