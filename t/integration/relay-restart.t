#!/bin/bash
# test: any stack
# What a node agent restart, a stopped sbx-init and an aborted upload cost
# (issue 8, points 4 and 5):
#  a) the node agent is killed (SIGKILL) under a streamed exec (it printed A
#     and waits for a file, as DESIGN's causal tests do) and a JSON exec:
#     both end within 5 s of the kill with an error naming the restart
#     (the stream's last frame is {"type":"error"}; the JSON one is 503
#     node_restarted), a background process started before lives on, and
#     the next exec right after works; the sandbox's stats series (GET
#     /sandboxes/{id}/stats, kept in Postgres) still has its points from
#     before the restart (an agent that kept them in memory would lose them).
#  b) `kill -STOP 1` inside a sandbox: the next exec is answered within
#     10 s, not at its 30 s timeout (sbx-init's answers are due in 4 s):
#     503 sandbox_unresponsive, or its output when the liveness pass's
#     SIGCONT came first; after the liveness pass sbx-init answers again
#     (SIGCONT through runsc kill).
#  c) the sentry itself stopped from the host (SIGSTOP): the SIGCONT to PID 1
#     cannot help. An exec fails within 10 s (503 sandbox_unresponsive) and
#     the sandbox ends failed, its reason visible in GET /sandboxes/{id}.
#  e) an sbx-init stopped when the node agent opens its channel (after an
#     agent restart): the exec to it ends 503 sandbox_unresponsive after its
#     handshake's init_answer_ms, and an exec to another sandbox sent
#     meanwhile is answered first (the handshake runs in the loop).
#  d) an upload aborted mid-body (its client killed while sending) leaves no
#     .sbx-upload-* file in the target directory.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, kill of the node agent" runsc jq python3 curl
require_stack
RT_MARK=$(log_mark)
SPID=""
E_SKIP=""
trap 'rc=$?; [ -n "$SPID" ] && kill -CONT "$SPID" 2> /dev/null; [ -n "$E_SKIP" ] && rm -f "$E_SKIP"; rt_kill_bg; sb_cleanup; t_end $rc' EXIT
T=$T_TMP

ms() { echo $(($(date +%s%N) / 1000000)); }
gone() { ! kill -0 "$1" 2> /dev/null; }

rt_setup it-relay-restart

# ---- a) the node agent restarts under running commands ----
T_SECTION="restart"
rt_new it-relay-restart-a
A=$RT_ID
req nginx POST "/sandboxes/$A/exec" '{"cmd":"sleep 1006","background":true}'
bgpid=$(j .data.pid)
like "$bgpid" '^[0-9]+$' "a background process started before the restart ($bgpid)"
tag=$RANDOM
# the JSON exec: says it started in a file, then waits
curl -sS --cacert "$SBX_CACERT" --max-time 120 -H "$(rt_auth)" -H 'Content-Type: application/json' \
	-o "$T/json" -w '%{http_code}' -d "$(rt_json "touch /tmp/json-$tag; sleep 100" 60)" \
	"$SBX_URL/sandboxes/$A/exec" > "$T/json.status" 2> "$T/json.err" &
jp=$!
RT_BG+=("$jp")
rt_stream_start "$T/s" "/sandboxes/$A/exec" \
	"$(rt_json "echo A-$tag; while [ ! -e /tmp/go-$tag ]; do sleep 0.1; done; echo B-$tag" 60 true)"
sp=$RT_PID
wait_until 30 rt_has "$T/s" "A-$tag"
ok $? "the streamed exec printed A and waits"
json_started() { [ "$(rt_sh "$A" "test -e /tmp/json-$tag && echo y")" = y ]; }
wait_until 30 json_started
ok $? "the JSON exec runs"
stats_rows() { psql_q "SELECT count(*) FROM sandbox_stats WHERE sandbox_id = '$A'"; }
# three: the first sample of a series is only the next one's baseline
# (src/api/h_stats.c), so two rows gave one point before the restart, and
# once (run 1 of 5 on the second stack) none
two_rows() { [ "$(stats_rows)" -ge 3 ]; }
wait_until 30 two_rows
ok $? "the sandbox's stats samples are in Postgres ($(stats_rows) rows; stats_sample_interval 3 s here)"
stats_before=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
node=$(worker_pid node)
like "$node" '^[0-9]+$' "the node agent's pid ($node)"
mark=$(log_mark)
t0=$(ms)
kill -9 "$node"
ts="" tj=""
while [ $(($(ms) - t0)) -lt 15000 ] && { [ -z "$ts" ] || [ -z "$tj" ]; }; do
	[ -z "$ts" ] && { rt_has "$T/s" '"type":"error"' || gone "$sp"; } && ts=$(($(ms) - t0))
	[ -z "$tj" ] && gone "$jp" && tj=$(($(ms) - t0))
	sleep 0.05
done
diag "kill -> stream error: ${ts:-none} ms; kill -> JSON answer: ${tj:-none} ms"
ok "[ -n '$ts' ] && [ '$ts' -lt 5000 ]" "the stream ends within 5 s of the kill (${ts:-never} ms)" ||
	diag "stream: $(tail -c 300 "$T/s"); log: $(log_since "$mark" | grep -E 'node|restart' | head -n 20)"
wait_until 10 gone "$sp"
rt_frames "$T/s" sse > "$T/s.frames" 2> "$T/s.err"
ok $? "the stream's framing is right ($(cat "$T/s.err"))"
rt_frames_ok "$T/s.frames"
ok $? "exactly one final frame"
is "$(tail -n1 "$T/s.frames" | jq -r .type)" error "the last frame is an error"
like "$(tail -n1 "$T/s.frames" | jq -r .message)" "node agent restarted" "...naming the restart"
ok "[ -n '$tj' ] && [ '$tj' -lt 5000 ]" "the JSON exec is answered within 5 s of the kill (${tj:-never} ms)"
wait "$jp" 2> /dev/null
is "$(cat "$T/json.status")" 503 "...with 503"
is "$(jq -r .code "$T/json" 2> /dev/null)" node_restarted "...code node_restarted"
like "$(jq -r .message "$T/json" 2> /dev/null)" "restarted.*background processes keep running" "...and a message that says what was lost"
node2=$(worker_pid node)
ok "[ -n '$node2' ] && [ '$node2' != '$node' ]" "the master started a new node agent ($node -> ${node2:-none})"
t1=$(ms)
is "$(rt_sh "$A" "echo next-$tag")" "next-$tag" "the next exec right after works"
diag "the next exec took $(($(ms) - t1)) ms"
req nginx GET "/sandboxes/$A/processes/$bgpid"
is "$STATUS|$(j .data.state)" "200|running" "the background process lives on"
is "$(rt_sh "$A" "ps -eo args | grep -c '^sleep 1006\$'")" 1 "...and runs inside"
stats_ok() { req nginx GET "/sandboxes/$A/stats" && [ "$STATUS" = 200 ]; }
wait_until 30 stats_ok
is "$STATUS" 200 "stats after the restart: 200"
n_old=$(j --arg b "$stats_before" '[.data.results[] | select(.date < $b)] | length')
ok "[ '${n_old:-0}' -ge 1 ]" "the stats series still has its points from before the restart ($n_old of $(j '.data.results | length') before $stats_before)"

# ---- d) an aborted upload leaves nothing behind ----
T_SECTION="upload"
rt_sh "$A" "mkdir -p /tmp/up-$tag" > /dev/null
python3 -u - "$SBX_URL" "$SBX_CACERT" "$(rt_auth)" "/sandboxes/$A/files/tmp/up-$tag/f" > "$T/up" 2> "$T/up.err" << 'PY' &
import socket, ssl, sys, time, urllib.parse
url, cacert, auth, path = sys.argv[1:5]
u = urllib.parse.urlparse(url)
ctx = ssl.create_default_context(cafile=cacert)
s = ctx.wrap_socket(socket.create_connection((u.hostname, u.port)), server_hostname=u.hostname)
s.sendall(("PUT %s HTTP/1.1\r\nHost: %s\r\n%s\r\nContent-Type: application/octet-stream\r\n"
           "Content-Length: 4000000\r\n\r\n" % (path, u.netloc, auth)).encode())
s.sendall(b"x" * 300000)
print("sent", flush=True)
time.sleep(300)
PY
up=$!
RT_BG+=("$up")
uploads() { rt_sh "$A" "ls -a /tmp/up-$tag | grep -c '^\.sbx-upload-'"; }
has_upload() { [ "$(uploads)" = 1 ]; }
wait_until 30 has_upload
ok $? "while the body comes, sbx-init writes a temp file (.sbx-upload-*)"
kill -9 "$up"
no_upload() { [ "$(uploads)" = 0 ]; }
wait_until 15 no_upload
ok $? "the client killed mid-body: no .sbx-upload-* file is left ($(rt_sh "$A" "ls -a /tmp/up-$tag" | tr '\n' ' '))"
is "$(rt_sh "$A" "ls /tmp/up-$tag | wc -l")" 0 "...and no file f either"
req nginx PUT "/sandboxes/$A/files/tmp/up-$tag/g" hello -H 'Content-Type: application/octet-stream'
is "$STATUS" 204 "an upload after it works"

# ---- b) kill -STOP 1 inside: the liveness pass sends SIGCONT ----
T_SECTION="stopped init"
rt_new it-relay-restart-b
B=$RT_ID
is "$(rt_sh "$B" "echo up")" up "a second sandbox answers (its channel is open)"
init_state() { SB_EXEC_TIMEOUT=10 sb_exec "$B" "sed -n 's/^State:[[:space:]]*//p' /proc/1/status" | cut -c1; }
mark=$(log_mark)
req nginx POST "/sandboxes/$B/exec" '{"cmd":"sleep 0.3; kill -STOP 1","background":true}'
like "$(j .data.pid)" '^[0-9]+$' "a background process stops PID 1 (sbx-init)"
init_stopped() { [ "$(init_state)" = T ]; }
wait_until 20 init_stopped
ok $? "sbx-init is stopped (State T, seen with runsc exec)"
t0=$(ms)
req nginx POST "/sandboxes/$B/exec" "$(rt_json "echo after-stop" 30)"
dt=$(($(ms) - t0))
diag "exec to a stopped sbx-init: $STATUS $(j .code) in $dt ms"
ok "[ $dt -lt 10000 ]" "an exec is answered within 10 s, not at its 30 s timeout ($dt ms)"
ok "[ '$STATUS|$(j .code)' = '503|sandbox_unresponsive' ] || [ '$STATUS|$(j .data.stdout)' = '200|after-stop' ]" \
	"...with 503 sandbox_unresponsive or, after the SIGCONT, its output ($STATUS $(j .code))"
answers() { [ "$(rt_sh "$B" "echo alive" 10)" = alive ]; }
wait_until 15 answers
ok $? "after the liveness pass sbx-init answers again"
isnt "$(init_state)" T "...it runs (not State T)"
like "$(log_since "$mark" | grep -c "sandbox $B: sbx-init did not answer a ping.*SIGCONT")" '^[1-9]' \
	"the node agent sent it SIGCONT (log)"
is "$(sb_db "$B" status)" ready "the sandbox stays ready"

# ---- c) the sentry stopped from the host: nothing inside can help ----
T_SECTION="stopped sentry"
rt_new it-relay-restart-c
C=$RT_ID
is "$(rt_sh "$C" "echo up")" up "a third sandbox answers (its channel is open)"
SPID=$(cat "$SB_STATE/sandboxes/$(sb_place "$C")/sandbox.pid" 2> /dev/null)
like "$SPID" '^[0-9]+$' "its sentry's pid ($SPID)"
kill -STOP "$SPID"
t0=$(ms)
req nginx POST "/sandboxes/$C/exec" "$(rt_json "echo never" 30)"
dt=$(($(ms) - t0))
diag "exec to a stopped sentry: $STATUS $(j .code) in $dt ms"
is "$STATUS|$(j .code)" "503|sandbox_unresponsive" "an exec fails with 503 sandbox_unresponsive"
ok "[ $dt -lt 10000 ]" "...within 10 s, not at its 30 s timeout ($dt ms)"
wait_until 30 sb_status_is "$C" failed
ok $? "the liveness pass marks the sandbox failed"
req nginx GET "/sandboxes/$C"
is "$(j .data.status)|$(j .data.failure_reason)" "failed|sbx-init stopped answering" \
	"GET /sandboxes/{id} shows it failed, with the reason"
wait_until 60 sb_gone "$C"
ok $? "and the node destroyed it (nothing left: $(sb_leftovers "$C"))"
SPID=""
T_SECTION=""
# ---- e) an sbx-init slow to answer a new channel holds up no other ----
# The node agent opens a channel on the first op after its start; the
# handshake (HELLO, AUTH, AUTH_OK) runs in its loop, so a stopped sbx-init
# costs its own op init_answer_ms (4 s here), not every other sandbox's
# requests meanwhile (the connect once waited 2 s in the loop).
# The node's fault point ping-skip keeps its liveness pass away from E (no
# ping, no SIGCONT) while the section runs: a pass between the stop and the
# kill of the agent resumed sbx-init by chance on a loaded machine, and the
# exec then got 200 (CI, 2026-12-04). The restarted agent has no channel to
# E before the exec (a handshake in progress is not pinged either).
T_SECTION="slow handshake"
rt_new it-relay-restart-e
E=$RT_ID
E_SKIP=$SB_STATE/faults/ping-skip.$E.armed
mkdir -p "$SB_STATE/faults" && touch "$E_SKIP"
is "$(rt_sh "$E" "echo up")" up "a fourth sandbox answers"
req nginx POST "/sandboxes/$E/exec" '{"cmd":"sleep 0.3; kill -STOP 1","background":true}'
e_state() { SB_EXEC_TIMEOUT=10 sb_exec "$E" "sed -n 's/^State:[[:space:]]*//p' /proc/1/status" | cut -c1; }
e_stopped() { [ "$(e_state)" = T ]; }
wait_until 20 e_stopped
ok $? "its sbx-init is stopped (State T)"
node=$(worker_pid node)
mark=$(log_mark)
kill -9 "$node"
wait_until 30 node_consuming_since "$mark"
ok $? "the node agent was killed and restarted: every channel opens anew"
curl -sS --cacert "$SBX_CACERT" --max-time 60 -H "$(rt_auth)" -H 'Content-Type: application/json' \
	-o "$T/e.json" -w '%{http_code}' -d "$(rt_json "echo from-e" 30)" \
	"$SBX_URL/sandboxes/$E/exec" > "$T/e.status" 2> "$T/e.err" &
ep=$!
RT_BG+=("$ep")
# (one grep of the log a look, polled every 0.05 s: the handshake gives the
# other exec 4 s from here, and a slower look left it 1.5 s, CI 2026-12-04;
# the line names E's id and the command, so no mark is needed)
e_log=$(api_log)
e_sent() { grep -qF "sandbox $E: exec /bin/sh -c echo from-e" "$e_log"; }
for _ in $(seq 400); do e_sent && break; sleep 0.05; done
e_sent
ok $? "an exec to the stopped sbx-init reached the node agent"
t1=$(ms)
is "$(rt_sh "$A" "echo other-$tag")" "other-$tag" "meanwhile an exec in another sandbox is answered"
dt=$(($(ms) - t1))
ok "! gone $ep" "...while the first still waits for its handshake: the loop is not held up (other exec: $dt ms)"
wait "$ep"
is "$(cat "$T/e.status")|$(jq -r .code "$T/e.json" 2> /dev/null)" "503|sandbox_unresponsive" \
	"the exec to the stopped sbx-init ends 503 sandbox_unresponsive"
like "$(jq -r .message "$T/e.json" 2> /dev/null)" "handshake" "...its message says the handshake got no answer"
like "$(log_since "$mark" | grep -c "sandbox $(sb_place "$A"): channel to sbx-init open ([0-9]* ms, in the loop)")" '^[1-9]' \
	"the other sandbox's channel was opened in the loop (log)"
rm -f "$E_SKIP"
T_SECTION=""
rt_note_restarts "$RT_MARK"
finish
