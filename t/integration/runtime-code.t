#!/bin/bash
# test: parallel
# POST /sandboxes/{id}/code (issue 4): python and node, JSON and streamed
# (SSE, NDJSON), the same shapes as exec; env and cwd; a syntax error is a
# non-zero exit with the interpreter's message on stderr; a timeout is 124
# with timed_out and the output printed before it; streaming is causal (the
# code prints A, waits for a file the test creates after A arrived, prints B).
# Through nginx and straight to the FastCGI program.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq python3
rt_begin
T=$T_TMP

rt_setup it-rt-code
rt_new it-rt-code '"env":{"SBENV":"from-sandbox"}'
A=$RT_ID

# code_body LANG CODE [EXTRA_JQ]: a /code body.
code_body() { jq -nc --arg l "$1" --arg c "$2" "{language:\$l, code:\$c} ${3:+| $3}"; }

declare -A OK_CODE=(
	[python]='import sys, os
print("py-out", 6 * 7)
print("py-err", file=sys.stderr)
print(os.environ.get("SBENV"), os.environ.get("CALLENV"), os.getcwd())
sys.exit(3)'
	[node]='console.log("js-out", 6 * 7);
console.error("js-err");
console.log(process.env.SBENV, process.env.CALLENV, process.cwd());
process.exit(3);'
)
declare -A WANT_OUT=([python]=$'py-out 42\nfrom-sandbox call /tmp' [node]=$'js-out 42\nfrom-sandbox call /tmp')
declare -A WANT_ERR=([python]="py-err" [node]="js-err")
declare -A BAD_CODE=([python]='print("x"' [node]='console.log("x"')
declare -A BAD_MSG=([python]='SyntaxError' [node]='SyntaxError')
declare -A SLOW_CODE=(
	[python]='import time, sys
print("before", flush=True)
time.sleep(1000)'
	[node]='console.log("before"); setTimeout(() => {}, 1000000);'
)
declare -A WAIT_CODE=(
	[python]='import os, time, sys
print("A-%s" % sys.argv[0][:0], flush=True)
while not os.path.exists("/tmp/go-TAG"):
    time.sleep(0.1)
print("B-TAG", flush=True)'
	[node]='const fs = require("fs");
console.log("A-");
const t = setInterval(() => { if (fs.existsSync("/tmp/go-TAG")) { console.log("B-TAG"); clearInterval(t); } }, 100);'
)

for M in $MODES; do
	for L in python node; do
		T_SECTION="$M $L"
		req $M POST "/sandboxes/$A/code" "$(code_body $L "${OK_CODE[$L]}" '.env = {CALLENV:"call"} | .cwd = "/tmp"')"
		is "$STATUS" 200 "JSON: 200"
		is "$(j '.data | keys | join(",")')" "duration_ms,exit_code,stderr,stdout" "JSON: data is {stdout, stderr, exit_code, duration_ms}"
		is "$(j .data.stdout)|$(j .data.stderr)|$(j .data.exit_code)" "${WANT_OUT[$L]}|${WANT_ERR[$L]}|3" \
			"JSON: stdout, stderr, exit code; sandbox env + call env; cwd"

		req $M POST "/sandboxes/$A/code" "$(code_body $L "${OK_CODE[$L]}" '.env = {CALLENV:"call"} | .cwd = "/tmp" | .stream = true')"
		like "$STATUS $(hdr content-type)" '^200 text/event-stream' "SSE: 200 text/event-stream"
		rt_body $M
		rt_frames "$T/body" sse > "$T/frames" 2> "$T/frames.err"
		ok $? "SSE: framing ($(cat "$T/frames.err"))"
		rt_frames_ok "$T/frames"
		ok $? "SSE: exactly one final frame"
		is "$(rt_collect "$T/frames" stdout)|$(rt_collect "$T/frames" stderr)|$(tail -n1 "$T/frames" | jq -r '.type + "," + (.exit_code|tostring)')" \
			"${WANT_OUT[$L]}|${WANT_ERR[$L]}|done,3" "SSE: the same output and exit code"

		req $M POST "/sandboxes/$A/code" "$(code_body $L "${OK_CODE[$L]}" '.stream = true')" -H 'Accept: application/x-ndjson'
		like "$STATUS $(hdr content-type)" '^200 application/x-ndjson' "NDJSON: 200 application/x-ndjson"
		rt_body $M
		rt_frames "$T/body" ndjson > "$T/frames" 2> "$T/frames.err"
		ok $? "NDJSON: framing ($(cat "$T/frames.err"))"
		is "$(tail -n1 "$T/frames" | jq -r '.type + "," + (.exit_code|tostring)')" "done,3" "NDJSON: ends with done, 3"

		req $M POST "/sandboxes/$A/code" "$(code_body $L "${BAD_CODE[$L]}")"
		is "$STATUS" 200 "syntax error: the answer is 200 (the code ran, it failed)"
		isnt "$(j .data.exit_code)" 0 "syntax error: non-zero exit ($(j .data.exit_code))"
		like "$(j .data.stderr)" "${BAD_MSG[$L]}" "syntax error: the interpreter's message is on stderr"

		req $M POST "/sandboxes/$A/code" "$(code_body $L "${SLOW_CODE[$L]}" '.timeout_seconds = 2')"
		is "$(j .data.exit_code):$(j .data.timed_out)" "124:true" "timeout: exit 124, timed_out"
		is "$(j .data.stdout)" "before" "timeout: output before it is kept"
	done
done
T_SECTION=""

for L in python node; do
	T_SECTION="$L"
	is "$(rt_sh "$A" "ps -eo args | grep -cE '^(python3|node) /tmp/sbx-code'")" 0 "no interpreter left behind by the timeouts"
	tag=$L$RANDOM
	code=${WAIT_CODE[$L]//TAG/$tag}
	rt_stream_start "$T/w-$tag" "/sandboxes/$A/code" "$(code_body $L "$code" '.stream = true | .timeout_seconds = 60')"
	p=$RT_PID
	wait_until 30 rt_has "$T/w-$tag" '"A-'
	ok $? "streamed code: A arrives while the code waits"
	! rt_has "$T/w-$tag" "B-$tag|\"done\""
	ok $? "streamed code: B not yet"
	rt_sh "$A" "touch /tmp/go-$tag" > /dev/null
	wait_until 30 rt_has "$T/w-$tag" '"done"'
	ok $? "streamed code: after the test released it, the stream ends"
	rt_has "$T/w-$tag" "B-$tag"
	ok $? "streamed code: B arrived"
done
T_SECTION=""

req nginx POST "/sandboxes/$A/code" '{"language":"cobol","code":"x"}'
is "$STATUS" 400 "an unknown language: 400"
req nginx POST "/sandboxes/$A/code" '{"language":"python"}'
is "$STATUS" 400 "code is required: 400"

rt_note_restarts "$RT_MARK"
finish
