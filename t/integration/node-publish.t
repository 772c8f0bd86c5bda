#!/bin/bash
# test: any stack
# The node agent's loop never waits for the broker (issue 10, "nothing may
# block the loop"; doc/node-relay.md "Publishing"). Everything the node
# publishes (answers, exec output) goes through a queue that a thread of
# its own empties (src/lib/outbox.c). The fault point publish-hold stops
# that thread as a broker that stops reading a publishing connection (a
# memory or disk alarm) stops a write; while it holds:
#  - the answers wait: a JSON exec and a streamed exec get nothing;
#  - the loop goes on: it keeps sampling the sandbox's stats into Postgres
#    (a pass of the loop's timer every stats_sample_interval), and the
#    streamed command runs to its end (its mark on the sandbox's disk, read
#    on the host);
# once released, nothing is lost and the order holds: the JSON exec gets
# its stdout and exit code, the stream all 20000 lines in order and one
# final frame, and a new exec answers as before.
# The hold is this stack's alone while it lasts: the file runs on a stack by
# itself (`any stack`), never beside others.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, the stack's state dir" runsc jq
rt_begin
HOLD="$SB_STATE/faults/publish-hold.armed"
t_on_exit release

plan 12

release() { rm -f "$HOLD"; }
stats_rows() { psql_q "SELECT count(*) FROM sandbox_stats WHERE sandbox_id = '$1'" 2> /dev/null; }
rows_above() { [ "$(stats_rows "$1")" -gt "$2" ] 2> /dev/null; }
gone() { ! kill -0 "$1" 2> /dev/null; }
host_file() { cat "$SB_STATE/sandboxes/$(sb_place "$1")/disk/tmp/$2" 2> /dev/null; }
stream_done() { [ "$(host_file "$ID" stream-done)" = end ]; }

rt_setup it-publish
rt_new it-publish
ID=$RT_ID
sexec "$ID" "echo warm"
is "$STATUS $OUT" "200 warm" "a sandbox answers an exec"
# a series of this sandbox exists before the hold (its first sample is a baseline)
wait_until 30 rows_above "$ID" 0
ok $? "its stats are sampled into Postgres"

mkdir -p "$SB_STATE/faults"
touch "$HOLD"
T=$T_TMP
# JSON exec, its answer held
curl -sS --cacert "$SBX_CACERT" --max-time 120 -H "$(rt_auth)" -H 'Content-Type: application/json' \
	-d "$(rt_json 'echo held-1; echo held-2; exit 7' 60)" -o "$T/json" "$SBX_URL/sandboxes/$ID/exec" 2> "$T/json.err" &
jpid=$!
RT_BG+=("$jpid")
# a stream whose command also leaves a mark on the sandbox's disk when it ends
rt_stream_start "$T/s" "/sandboxes/$ID/exec" "$(rt_json 'seq 1 20000; echo end > /tmp/stream-done' 60 true)"
spid=$RT_PID
rows0=$(stats_rows "$ID")

wait_until 30 stream_done
ok $? "while publishing is held, the streamed command runs to its end"
wait_until 30 rows_above "$ID" "$((rows0 + 1))"
ok $? "while publishing is held, the loop keeps sampling stats into Postgres (rows $rows0 -> $(stats_rows "$ID"))"
! gone "$jpid" && [ ! -s "$T/json" ]
ok $? "while publishing is held, the JSON exec has no answer"
! rt_has "$T/s" '"done"'
ok $? "while publishing is held, the stream has no final frame"

release
wait_until 30 gone "$jpid"
ok $? "released: the JSON exec answers"
is "$(jq -r '[.data.stdout, .data.exit_code] | @json' "$T/json" 2> /dev/null)" '["held-1\nheld-2\n",7]' \
	"its stdout and exit code are whole"
wait_until 30 gone "$spid"
ok $? "released: the stream ends"
rt_frames "$T/s" sse > "$T/f" 2> "$T/f.err" && rt_frames_ok "$T/f"
ok $? "the stream's framing is right, one final frame ($(cat "$T/f.err"))"
rt_collect "$T/f" stdout > "$T/out"
seq 1 20000 > "$T/want"
cmp -s "$T/out" "$T/want"
ok $? "all 20000 lines arrived, in order ($(wc -l < "$T/out") lines)"
sexec "$ID" "echo after"
is "$STATUS $OUT" "200 after" "a new exec answers as before"
