#!/bin/bash
# test: parallel, slow
# POST /sandboxes/{id}/exec through the public API (issue 4), through nginx
# and straight to the FastCGI program: the JSON answer's shape, SSE and
# NDJSON framing (exactly one final done/error), `command` for `cmd`, stdin
# (text and base64), env layered over the sandbox's for one call only, cwd
# that must exist, exit codes, timeout (124, timed_out, output kept, the
# whole process group killed), byte-exact output (NUL, invalid UTF-8 as
# base64, a UTF-8 character split across writes still text), the 16 MiB JSON
# cap (truncated, command killed), a sandbox that is not ready (400 naming
# its state), a sandbox whose sentry was killed (the answer says so, the
# sandbox becomes failed), and the exec record + last_activity_at.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq python3 sha256sum base64
rt_begin

rt_setup it-rt-exec
rt_new it-rt-exec-a '"env":{"SBENV":"base","OVER":"sandbox"}'
A=$RT_ID
T=$T_TMP

# exec_req MODE JSON [-H ...]: POST .../exec.
exec_req() {
	local mode=$1 body=$2
	shift 2
	req "$mode" POST "/sandboxes/$A/exec" "$body" "$@"
}

for M in $MODES; do
	T_SECTION=$M
	# --- JSON shape
	exec_req $M '{"cmd":"echo out; echo err >&2; exit 3"}'
	is "$STATUS" 200 "JSON exec answers 200"
	is "$(j '.data | keys | join(",")')" "duration_ms,exit_code,stderr,stdout" "data is exactly {stdout, stderr, exit_code, duration_ms}"
	is "$(j '[.data.stdout, .data.stderr, (.data.exit_code|tostring), (.data.duration_ms|type)] | join("|")')" \
		$'out\n|err\n|3|number' "stdout, stderr apart, exit code 3, duration a number"
	is "$(j '.message | type')" string "the answer is in the envelope {message, data}"

	# --- SSE
	exec_req $M '{"cmd":"echo one; echo two >&2; echo three; exit 5","stream":true}'
	is "$STATUS" 200 "streamed exec answers 200"
	like "$(hdr content-type)" '^text/event-stream' "Content-Type: text/event-stream"
	rt_body $M
	rt_frames "$T/body" sse > "$T/frames" 2> "$T/frames.err"
	ok $? "SSE: every event is one 'data: {json}' line and a blank line ($(cat "$T/frames.err"))"
	rt_frames_ok "$T/frames"
	ok $? "SSE: exactly one final frame, and it is the last"
	is "$(rt_collect "$T/frames" stdout)" $'one\nthree' "SSE: stdout frames carry stdout"
	is "$(rt_collect "$T/frames" stderr)" "two" "SSE: stderr frames carry stderr"
	is "$(tail -n1 "$T/frames" | jq -r '[.type, .exit_code, (.duration_ms|type)] | join("|")')" "done|5|number" \
		"SSE: done frame with exit_code and duration_ms"

	# --- NDJSON
	exec_req $M '{"cmd":"echo one; echo two >&2; exit 6","stream":true}' -H 'Accept: application/x-ndjson'
	is "$STATUS" 200 "NDJSON exec answers 200"
	like "$(hdr content-type)" '^application/x-ndjson' "Content-Type: application/x-ndjson"
	rt_body $M
	rt_frames "$T/body" ndjson > "$T/frames" 2> "$T/frames.err"
	ok $? "NDJSON: one JSON frame per line ($(cat "$T/frames.err"))"
	rt_frames_ok "$T/frames"
	ok $? "NDJSON: exactly one final frame, last"
	is "$(rt_collect "$T/frames" stdout)|$(rt_collect "$T/frames" stderr)|$(tail -n1 "$T/frames" | jq -r .exit_code)" \
		"one|two|6" "NDJSON: stdout, stderr and exit code"

	# --- command, stdin
	exec_req $M '{"command":"echo via-command"}'
	is "$STATUS:$(j .data.stdout)" $'200:via-command' "'command' is accepted for 'cmd'"
	exec_req $M '{"cmd":"cat; echo; echo end","stdin":"hello\nworld"}'
	is "$(j .data.stdout)" $'hello\nworld\nend' "stdin as text reaches the command, then EOF"
	exec_req $M "{\"cmd\":\"od -An -tx1 | tr -s ' '\",\"stdin\":\"$(printf 'a\0\377\n' | base64)\",\"stdin_encoding\":\"base64\"}"
	is "$(j .data.stdout | tr -d '\n')" " 61 00 ff 0a" "stdin with stdin_encoding base64 arrives byte-exact (NUL, 0xff)"
	exec_req $M '{"cmd":"cat","stdin":"!!!","stdin_encoding":"base64"}'
	is "$STATUS" 400 "stdin that is not base64 is refused (400)"

	# --- env
	exec_req $M '{"cmd":"echo \"$SBENV|$OVER|$CALLONLY\"","env":{"OVER":"call","CALLONLY":"x"}}'
	is "$(j .data.stdout)" "base|call|x" "env is layered over the sandbox's env (sandbox's kept, call's wins)"
	exec_req $M '{"cmd":"echo \"$SBENV|$OVER|$CALLONLY\""}'
	is "$(j .data.stdout)" "base|sandbox|" "the next exec sees the sandbox's env only (the call's env was for that call)"

	# --- cwd
	exec_req $M '{"cmd":"pwd","cwd":"/tmp"}'
	is "$(j .data.stdout)" "/tmp" "cwd sets the working directory"
	exec_req $M '{"cmd":"pwd","cwd":"/no/such/dir"}'
	is "$STATUS" 400 "a cwd that does not exist: 400"
	error_shape '.' "missing cwd"
	like "$(j .message)" "/no/such/dir|[Dd]irectory|cwd" "the message says what is wrong with cwd"

	# --- exit codes
	for c in "exit 0:0" "false:1" "exit 255:255" 'kill -9 $$:137' "no-such-command-xyz:127"; do
		exec_body_v body "${c%:*}"
		exec_req $M "$body"
		is "$STATUS:$(j .data.exit_code)" "200:${c##*:}" "exit code of '${c%:*}' is ${c##*:}"
	done
done
T_SECTION=""

# --- timeout: 124, timed_out, output kept, whole group killed
for M in $MODES; do
	T_SECTION=$M
	exec_req $M '{"cmd":"echo before-timeout; echo to-stderr >&2; sleep 1000 & sleep 999; echo never","timeout_seconds":2}'
	is "$STATUS:$(j .data.exit_code):$(j .data.timed_out)" "200:124:true" "timeout: exit_code 124 and timed_out true"
	is "$(j .data.stdout)|$(j .data.stderr)" "before-timeout|to-stderr" "timeout: output printed before it is kept"
	left=$(rt_sh "$A" "ps -eo args | grep -E '^sleep (1000|999)\$' || true")
	is "$left" "" "timeout: the whole process group is killed (no 'sleep 1000' child, no 'sleep 999' left)"
done
T_SECTION=""
exec_req nginx '{"cmd":"echo partial; sleep 999","timeout_seconds":1,"stream":true}'
rt_body nginx
rt_frames "$T/body" sse > "$T/frames" 2> "$T/frames.err"
is "$(rt_collect "$T/frames" stdout)|$(tail -n1 "$T/frames" | jq -r '[.type, .exit_code, .timed_out] | join(",")')" \
	"partial|done,124,true" "streamed timeout: output kept, final done frame with 124 and timed_out"

# --- byte-exact output
for M in $MODES; do
	T_SECTION=$M
	exec_req $M "{\"cmd\":\"printf 'a\\\\000b\\\\000'\"}"
	is "$(rt_jhex stdout)" "61006200" "JSON: NUL bytes round-trip byte-exact (as \\u0000 text or base64)"
	exec_req $M "{\"cmd\":\"printf 'ok\\\\377\\\\376' >&2; echo plain\"}"
	is "$(j .data.stderr_encoding)|$(j .data.stderr | base64 -d 2> /dev/null | od -An -tx1 | tr -d ' \n')|$(j '.data.stdout_encoding // "none"')|$(j .data.stdout)" \
		"base64|6f6bfffe|none|plain" "JSON: invalid UTF-8 on stderr is base64 (stderr_encoding), stdout stays text"
	exec_req $M "{\"cmd\":\"printf 'x\\\\000y\\\\377'\",\"stream\":true}"
	rt_body $M
	rt_frames "$T/body" sse > "$T/frames" 2> /dev/null
	is "$(grep '"stdout"' "$T/frames" | jq -r '.encoding // "none"' | sort -u | tr '\n' ' ')|$(rt_collect "$T/frames" stdout | od -An -tx1 | tr -d ' \n')" \
		"base64 |780079ff" "SSE: binary output comes in frames with encoding base64, byte-exact"
	# a character (EURO SIGN, e2 82 ac) split across two writes
	exec_req $M "{\"cmd\":\"printf '\\\\342\\\\202'; sleep 0.5; printf '\\\\254\\\\n'\",\"stream\":true}"
	rt_body $M
	rt_frames "$T/body" sse > "$T/frames" 2> /dev/null
	is "$(grep -c '"encoding"' "$T/frames")|$(rt_collect "$T/frames" stdout)" "0|€" \
		"SSE: a UTF-8 character split across two writes still arrives as text"
	exec_req $M "{\"cmd\":\"printf 'x\\\\342\\\\202'; sleep 0.5; printf '\\\\254\\\\n'\",\"stream\":true}"
	rt_body $M
	rt_frames "$T/body" sse > "$T/frames" 2> /dev/null
	is "$(grep -c '"encoding"' "$T/frames")|$(rt_collect "$T/frames" stdout)" "0|x€" \
		"SSE: the same after an ASCII byte in the first write"
	exec_req $M "{\"cmd\":\"printf '\\\\342\\\\202'; sleep 0.5; printf '\\\\254\\\\n'\"}"
	is "$(j '.data.stdout_encoding // "none"')|$(j .data.stdout)" "none|€" "JSON: the split character is text"
done
T_SECTION=""
# 1 MiB of random bytes, both ways of answering, against the sandbox's own sha256
sum_in=$(rt_sh "$A" "head -c 1048576 /dev/urandom > /tmp/rnd && sha256sum < /tmp/rnd | cut -d' ' -f1")
like "$sum_in" '^[0-9a-f]{64}$' "a random 1 MiB file made inside"
exec_req nginx '{"cmd":"cat /tmp/rnd"}'
is "$(j .data.stdout | base64 -d 2> /dev/null | sha256sum | cut -d' ' -f1)" "$sum_in" "JSON: 1 MiB of random bytes byte-exact"
exec_req nginx '{"cmd":"cat /tmp/rnd","stream":true}'
rt_body nginx
rt_frames "$T/body" sse > "$T/frames" 2> /dev/null
is "$(rt_collect "$T/frames" stdout | sha256sum | cut -d' ' -f1)" "$sum_in" "SSE: 1 MiB of random bytes byte-exact"
# 0.7 MB of random text: every ASCII byte (controls, '"' and '\\' among
# them: each escaped in the frame) and two- to four-byte characters, at any
# offset; a stream's text frames are written without jansson (h_exec.c)
sum_txt=$(rt_sh "$A" "python3 -c \"import random, sys; r = random.Random(7); a = [chr(c) for c in range(128)] + ['\\u00e9', '\\u20ac', '\\U0001F600']; sys.stdout.write(''.join(r.choice(a) for _ in range(700000)))\" > /tmp/txt && sha256sum < /tmp/txt | cut -d' ' -f1")
like "$sum_txt" '^[0-9a-f]{64}$' "a random text file made inside"
for fmt in sse ndjson; do
	if [ $fmt = ndjson ]; then
		exec_req nginx '{"cmd":"cat /tmp/txt","stream":true}' -H 'Accept: application/x-ndjson'
	else
		exec_req nginx '{"cmd":"cat /tmp/txt","stream":true}'
	fi
	rt_body nginx
	rt_frames "$T/body" $fmt > "$T/frames" 2> /dev/null
	is "$(grep -c '"encoding"' "$T/frames")|$(rt_collect "$T/frames" stdout | sha256sum | cut -d' ' -f1)" "0|$sum_txt" \
		"$fmt: random text with every ASCII control, quote and backslash arrives as text, byte-exact"
done
exec_req nginx '{"cmd":"cat /tmp/txt"}'
is "$(python3 -c 'import base64, json, sys; d = json.load(sys.stdin)["data"]; o = d["stdout"]
sys.stdout.buffer.write(base64.b64decode(o) if d.get("stdout_encoding") == "base64" else o.encode())' <<< "$BODY" |
	sha256sum | cut -d' ' -f1)" "$sum_txt" "JSON: the same text, byte-exact"

# --- the JSON cap: 16 MiB per stream, truncated, the command killed
# 40 MB: more than the credit granted before the kill (the cap + the 4 MiB
# window, h_exec.c) and the pipes hold, so the command cannot finish before
# the kill: later credit follows the kill on the same ordered path (20 MB
# fit: run 1 of a 5-run saw touch run)
exec_req nginx '{"cmd":"head -c 40000000 /dev/zero | tr \"\\000\" a; touch /tmp/not-killed; sleep 200","timeout_seconds":120}'
is "$STATUS" 200 "40 MB to a JSON exec answers 200"
is "$(j .data.truncated)" true "JSON answer over the cap says truncated: true"
is "$(j '.data.stdout | length')" 16777216 "stdout is cut at exactly 16 MiB"
is "$(j '.data.timed_out // false')" false "it ended before its timeout: the command was killed at the cap"
is "$(rt_sh "$A" "test -e /tmp/not-killed && echo survived; ps -eo args | grep -E '^(sleep 200|head -c 40000000)' || true")" "" \
	"the command (and its group) is gone, it never got past its output"

# --- not ready: 400 naming the state
rt_new it-rt-exec-gone
G=$RT_ID
req nginx DELETE "/sandboxes/$G"
is "$STATUS" 204 "a sandbox destroyed"
for M in $MODES; do
	T_SECTION=$M
	req $M POST "/sandboxes/$G/exec" '{"cmd":"true"}'
	is "$STATUS" 400 "exec on a destroyed sandbox: 400"
	like "$(j .message)" "destroyed" "the message names its state (destroyed)"
done
T_SECTION=""

# --- a sandbox whose sentry died: the answer says so, the sandbox is failed
rt_new it-rt-exec-dead
D=$RT_ID
exec_req_d() { req nginx POST "/sandboxes/$D/exec" "$1"; }
exec_req_d '{"cmd":"echo alive"}'
is "$(j .data.stdout)" alive "the sandbox to kill runs commands"
spid=$(sb_runsc state "$(sb_place "$D")" 2> /dev/null | jq -r '.pid // empty')
like "$spid" '^[0-9]+$' "runsc state gives the sandbox's (sentry's) pid"
# one exec in flight when the sentry dies: its stream must end saying so
rt_stream_start "$T/dead" "/sandboxes/$D/exec" "$(rt_json "echo started; sleep 1000" 120 true)"
dp=$RT_PID
wait_until 30 rt_has "$T/dead" started
ok $? "an exec streams in the sandbox about to die"
[ -n "$spid" ] && kill -9 "$spid"
wait_until 60 bash -c "! kill -0 $dp 2> /dev/null"
ok $? "the in-flight stream ends once the sentry is dead"
rt_frames "$T/dead" sse > "$T/dead.frames" 2> /dev/null
is "$(tail -n1 "$T/dead.frames" | jq -r .type)" error "it ends with one error frame"
like "$(tail -n1 "$T/dead.frames" | jq -r .message)" "([Dd]ied|[Dd]ead)" "the error frame says the sandbox died ($(tail -n1 "$T/dead.frames" | jq -r .message))"
exec_req_d '{"cmd":"echo after"}'
diag "exec after the kill: $STATUS $BODY"
isnt "$STATUS" 200 "exec after the sentry was killed does not succeed"
like "$(j .message)" "([Dd]ied|[Dd]ead|failed|sentry|not running)" "the answer says the sandbox died / failed"
wait_until 30 sb_status_is "$D" failed
ok $? "the sandbox becomes failed (record: $(sb_db "$D" status))"
req nginx GET "/sandboxes/$D"
is "$(j .data.status)" failed "GET shows status failed"
req nginx POST "/sandboxes/$D/exec" '{"cmd":"true"}'
is "$STATUS" 503 "exec on the failed sandbox: 503 (it cannot serve; issue 8: was 400)"
like "$(j .message)" "failed" "the message names the state (failed)"

# --- the exec record and last_activity_at
# (10 minutes back, inside the 30-minute idle timeout: further back, the
# reaper's next pass may destroy the sandbox as idle before the exec)
psql_q "UPDATE sandboxes SET last_activity_at = now() - interval '10 minutes' WHERE id = '$A'" > /dev/null
marker="rec-$RANDOM$RANDOM"
exec_req nginx "{\"cmd\":\"echo $marker; printf xyz >&2; exit 7\"}"
is "$(j .data.exit_code)" 7 "an exec to be recorded"
is "$(psql_q "SELECT last_activity_at > now() - interval '1 minute' FROM sandboxes WHERE id = '$A'")" t \
	"the exec updated last_activity_at"
rec_of() { psql_q "SELECT exit_code, duration_ms >= 0, stdout_bytes, stderr_bytes, sandbox_id = '$A', org_id = '$RT_ORG' FROM execs WHERE cmd LIKE '%$marker%'" 2> /dev/null; }
wait_until 15 bash -c "[ -n \"\$(PGCONNECT_TIMEOUT=5 '$T_PSQL' -X -q -A -t '$(conf_get db_url)' -c \"SELECT 1 FROM execs WHERE cmd LIKE '%$marker%'\")\" ]"
is "$(rec_of)" "7|t|$((${#marker} + 1))|3|t|t" "a row in execs: command, exit code, duration, stdout/stderr bytes, sandbox, org"
n1=$(psql_q "SELECT count(*) FROM execs WHERE sandbox_id = '$A'")
exec_req nginx '{"cmd":"true"}'
wait_until 15 bash -c "[ \"\$(PGCONNECT_TIMEOUT=5 '$T_PSQL' -X -q -A -t '$(conf_get db_url)' -c \"SELECT count(*) FROM execs WHERE sandbox_id = '$A'\")\" -gt $n1 ]"
ok $? "each exec adds a row"

rt_note_restarts "$RT_MARK"
finish
