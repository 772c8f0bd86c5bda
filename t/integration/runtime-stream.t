#!/bin/bash
# test: any stack, heavy
# Streamed exec, tested causally (DESIGN.md "Tests and network safety"):
#  - a command prints A, then waits for a file only the test creates (with a
#    second exec) after it has received A; then prints B. Any buffering on
#    the path (API, RabbitMQ, node agent, nginx) deadlocks and fails this.
#    Through nginx (SSE and NDJSON) and straight to the FastCGI socket with a
#    streaming FastCGI client (t/fcgi/fcgi-req collects the whole answer
#    before printing, so it cannot show streaming).
#  - a client that goes away kills the command (through nginx and FastCGI).
#  - 64 concurrent streams on 4 sandboxes, one never read: the 63 others all
#    start, then all finish, while the unread one is still running.
#  - flow control: 2 GB to a stopped reader: the command blocks (its output
#    stops growing) and the node agent's, the API's and RabbitMQ's memory
#    stay flat; killing the reader kills the command.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq python3 curl
rt_begin
T=$T_TMP

rt_setup it-rt-stream
rt_new it-rt-stream-1
S1=$RT_ID
rt_new it-rt-stream-2
S2=$RT_ID
rt_new it-rt-stream-3
S3=$RT_ID
rt_new it-rt-stream-4
S4=$RT_ID
SBS=("$S1" "$S2" "$S3" "$S4")

# wait_cmd TAG: the command printing A, waiting for /tmp/go-TAG, printing B.
wait_cmd() { echo "echo A-$1; while [ ! -e /tmp/go-$1 ]; do sleep 0.1; done; echo B-$1"; }

# curl_done PID: the background reader has exited.
gone() { ! kill -0 "$1" 2> /dev/null; }

# --- causal streaming through nginx: SSE and NDJSON
for fmt in sse ndjson; do
	T_SECTION="nginx $fmt"
	tag=ng$fmt$RANDOM
	hdr=()
	[ $fmt = ndjson ] && hdr=(-H 'Accept: application/x-ndjson')
	rt_stream_start "$T/s-$tag" "/sandboxes/$S1/exec" "$(rt_json "$(wait_cmd $tag)" 60 true)" "${hdr[@]}"
	p=$RT_PID
	wait_until 30 rt_has "$T/s-$tag" "A-$tag"
	ok $? "the first output (A) arrives while the command is still running"
	! rt_has "$T/s-$tag" "B-$tag|\"done\""
	ok $? "B and done have not arrived (the command waits for the test)"
	rt_sh "$S1" "touch /tmp/go-$tag" > /dev/null
	wait_until 30 rt_has "$T/s-$tag" "B-$tag"
	ok $? "after the test released it, B arrives"
	wait_until 30 gone "$p"
	ok $? "the stream ends"
	rt_frames "$T/s-$tag" $fmt > "$T/f-$tag" 2> "$T/f-$tag.err"
	ok $? "the stream's framing is right ($(cat "$T/f-$tag.err"))"
	rt_frames_ok "$T/f-$tag"
	ok $? "exactly one final frame"
	is "$(tail -n1 "$T/f-$tag" | jq -r '.type + "," + (.exit_code|tostring)')" "done,0" "it ends with done, exit_code 0"
done

# --- the same straight to the FastCGI socket
T_SECTION="fcgi sse"
tag=fc$RANDOM
rt_fcgi_stream "/sandboxes/$S1/exec" "$(rt_json "$(wait_cmd $tag)" 60 true)" "$(rt_auth)" > "$T/s-$tag" 2> "$T/s-$tag.err" &
p=$!
RT_BG+=("$p")
wait_until 30 rt_has "$T/s-$tag" "A-$tag"
ok $? "FastCGI: the first output (A) arrives while the command is still running"
! rt_has "$T/s-$tag" "B-$tag|\"done\""
ok $? "FastCGI: B and done have not arrived yet"
rt_sh "$S1" "touch /tmp/go-$tag" > /dev/null
wait_until 30 rt_has "$T/s-$tag" "B-$tag"
ok $? "FastCGI: after the test released it, B arrives"
wait_until 30 gone "$p"
ok $? "FastCGI: the answer ends (END_REQUEST)"
python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); i=d.find(b"\r\n\r\n"); sys.stdout.buffer.write(d[i+4:])' "$T/s-$tag" > "$T/b-$tag"
rt_frames "$T/b-$tag" sse > "$T/f-$tag" 2> "$T/f-$tag.err"
ok $? "FastCGI: framing ($(cat "$T/f-$tag.err"))"
rt_frames_ok "$T/f-$tag" && [ "$(tail -n1 "$T/f-$tag" | jq -r .type)" = done ]
ok $? "FastCGI: exactly one final frame, done"

# --- a client that goes away kills the command
# sleeps_of ID N: how many `sleep N` run in the sandbox.
sleeps_of() { rt_sh "$1" "ps -eo args | grep -c '^sleep $2\$'"; }
no_sleep() { [ "$(sleeps_of "$1" "$2")" = 0 ]; }
T_SECTION="nginx"
rt_stream_start "$T/dc1" "/sandboxes/$S1/exec" "$(rt_json "echo started; sleep 1001" 300 true)"
p=$RT_PID
wait_until 30 rt_has "$T/dc1" started
ok $? "disconnect: the command started and said so"
one_sleep() { [ "$(sleeps_of "$1" "$2")" = 1 ]; }
wait_until 15 one_sleep "$S1" 1001
ok $? "disconnect: its sleep runs inside"
kill "$p"
wait_until 30 no_sleep "$S1" 1001
ok $? "disconnect: after the client went away the command is killed (no 'sleep 1001' left)"
T_SECTION="fcgi"
rt_fcgi_stream "/sandboxes/$S1/exec" "$(rt_json "echo started; sleep 1002" 300 true)" "$(rt_auth)" > "$T/dc2" 2> /dev/null &
p=$!
RT_BG+=("$p")
wait_until 30 rt_has "$T/dc2" started
ok $? "disconnect (FastCGI): started"
kill $(ps -o pid= --ppid "$p") "$p" # the python client, not only the subshell running it
wait_until 30 no_sleep "$S1" 1002
ok $? "disconnect (FastCGI): the command is killed when the connection closes"
T_SECTION=""

# --- 64 concurrent streams on 4 sandboxes, one never read
# The unread one: endless output, its reader stopped after the first bytes.
# Its reader takes 256 KB/s (curl --limit-rate): it never keeps up with
# `yes`, yet it frees a loopback segment's worth of its socket buffer every
# quarter second, so nginx's send_timeout (30 s without a write) does not
# drop it while the 63 others run. (At 1 KB/s a 64 KB segment took a
# minute to free: nginx dropped the stream after 30 s on a slow machine.)
rt_stream_start "$T/stuck" "/sandboxes/$S1/exec" "$(rt_json "yes stuck-stream-output | head -c 2000000000; echo stuck-end" 300 true)" \
	--limit-rate 256k
stuck=$RT_PID
wait_until 30 rt_has "$T/stuck" stuck-stream-output
ok $? "the stream that will not be read has begun"
cmark=$(log_mark)
tag=cc$RANDOM
pids=()
# The 63 commands wait without polling: c1..c4 (one a sandbox) each hold an
# exclusive flock on /tmp/lk-$tag while their `sleep 601` runs, and the
# other 59 ask for a shared one after their first line; the test kills the
# four sleeps. A command that asks after the release passes at once, so no
# order of events can hang it. (Before, each of the 63 ran a `sleep 0.2`
# loop: a process start in gVisor is ~20 ms of CPU on a slow 2-core
# machine, so the loops took ~6 CPU-seconds a second; the file took 166 s
# to see them all start, and every file beside it waited for the CPU.)
# started N...: streams cN have printed start-N (one awk for them all: a
# grep a stream a look was 63 processes every 0.2 s)
started() {
	local i f=()
	for i in "$@"; do f+=("$T/c$i"); done
	awk 'FNR == 1 { n = FILENAME; sub(/.*\/c/, "", n) }
		index($0, "start-" n) { seen[n] = 1 }
		END { for (i = 1; i < ARGC; i++) { n = ARGV[i]; sub(/.*\/c/, "", n); if (!(n in seen)) exit 1 } }' "${f[@]}"
}
for i in $(seq 1 63); do
	sb=${SBS[$((i % 4))]}
	if [ "$i" -le 4 ]; then
		cmd="flock /tmp/lk-$tag sh -c 'echo start-$i; sleep 601'; echo end-$i"
	else
		cmd="echo start-$i; flock -s /tmp/lk-$tag true; echo end-$i"
	fi
	rt_stream_start "$T/c$i" "/sandboxes/$sb/exec" "$(rt_json "$cmd" 300 true)"
	pids+=("$RT_PID")
	# the others start once the four hold their locks
	[ "$i" = 4 ] && { wait_until 60 started 1 2 3 4 || diag "the four lock holders did not all start"; }
done
wait_until 90 started $(seq 1 63)
ok $? "all 63 other streams run at the same time and deliver their first output"
for sb in "${SBS[@]}"; do rt_sh "$sb" "pkill -f '^sleep 601\$'" > /dev/null; done
all_gone() {
	local p
	for p in "${pids[@]}"; do gone "$p" || return 1; done
}
wait_until 90 all_gone
ok $? "all 63 streams end"
ok '! gone "$stuck" && ! rt_has "$T/stuck" stuck-end' "meanwhile the unread stream is still open, its command unfinished"
is "$(rt_sh "$S1" "ps -eo args | grep -c '^head -c 2000000000\$'")" 1 "and its command still runs (blocked, not killed)" ||
	diag "unread stream: $(head -c 100 "$T/stuck") ... $(wc -c < "$T/stuck") bytes; in S1: $(rt_sh "$S1" "ps -eo pid,stat,args")"
# the 63 answers checked in one process (rt_frames and rt_frames_ok each
# (four processes) took 37 s for 63 streams on a loaded CI machine): SSE
# framing, every frame a JSON object with a type, exactly one final frame
# (done or error), last, and it is done; end-N in a stdout frame.
streams_ok() {
	python3 -c "$RT_FRAMES_PY
import base64, sys
d, n = sys.argv[1], int(sys.argv[2])
good, shown = 0, 0
for i in range(1, n + 1):
    try:
        fs = frames('%s/c%d' % (d, i), 'sse')
        finals = [f for f in fs if f['type'] in ('done', 'error')]
        if len(finals) != 1 or fs[-1]['type'] != 'done':
            raise ValueError('%d final frames, the last is %s' % (len(finals), fs[-1]['type']))
        out = ''.join(base64.b64decode(f['data']).decode('utf-8', 'replace') if f.get('encoding') == 'base64'
                      else f.get('data', '') for f in fs if f['type'] == 'stdout')
        if 'end-%d' % i not in out:
            raise ValueError('no end-%d in its stdout' % i)
        good += 1
    except (OSError, ValueError) as e:
        shown += 1
        if shown <= 3:
            print('stream %d: %s' % (i, str(e)[:300]))
print(good)" "$T" 63
}
res=$(streams_ok)
is "${res##*$'\n'}" 63 "all 63 printed their end and a final done frame" ||
	while read -r line; do diag "$line"; done <<< "${res%$'\n'*}"
log_since "$cmark" | grep -q 'warn: node #0 .* died' &&
	diag "the node agent was killed (by another test) during the 64 streams: in-flight ops were lost, which fails the checks above"
kill -9 "$stuck"; wait "$stuck" 2> /dev/null
wait_until 30 bash -c "[ \"\$(curl -sS --cacert '$SBX_CACERT' -H '$(rt_auth)' -H 'Content-Type: application/json' \
	-d '{\"cmd\":\"ps -eo args | grep -c ^head\"}' '$SBX_URL/sandboxes/$S1/exec' | jq -r .data.stdout)\" = 0 ]"
ok $? "killing the unread stream's client kills its command"

# --- flow control: gigabytes to a stopped reader
node=$(worker_pid node)
beam=$(cat "$SBX_STACK_DIR/run/rabbitmq-beam.pid" 2> /dev/null)
like "$node|$beam" '^[0-9]+\|[0-9]+$' "the node agent's and RabbitMQ's pids (log line, beam pidfile)"
node0=$(rt_vmrss "$node")
beam0=$(rt_vmrss "$beam")
api0=$(rt_api_rss_max)
rt_stream_start "$T/fc" "/sandboxes/$S2/exec" "$(rt_json "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 2000000000; echo fc-end" 300 true)"
rd=$RT_PID
big() { [ "$(stat -c %s "$T/fc")" -gt 1000000 ]; }
wait_until 60 big
ok $? "the reader gets output (1 MB)"
kill -STOP "$rd"
head_pid() { rt_sh "$S2" "ps -eo pid=,args= | awk '\$2 == \"head\" {print \$1}'"; }
hp=$(head_pid)
like "$hp" '^[0-9]+$' "the command's 'head' runs inside (pid $hp)"
wchar() { rt_sh "$S2" "awk '/^wchar/ {print \$2}' /proc/$hp/io"; }
sleep 3 # the pipes fill: what flowed past the reader stops here
w1=$(wchar)
sleep 3
w2=$(wchar)
like "$w1" '^[0-9]+$' "the command's written byte count is readable ($w1)"
is "$w2" "$w1" "with the reader stopped the command is blocked: it wrote nothing more in 3 s ($w1 bytes of 2 GB)"
ok "[ \"${w1:-0}\" -lt 200000000 ]" "it is held back early: less than 200 MB written of 2 GB"
node1=$(rt_vmrss "$node")
beam1=$(rt_vmrss "$beam")
api1=$(rt_api_rss_max)
diag "VmRSS kB before/after: node agent $node0/$node1, RabbitMQ $beam0/$beam1, largest API child $api0/$api1"
# Bound: the window is 256 KiB per op and 1 frame per hop; 100 MB (50 MB for
# the node agent, ~12 MB at rest) is far above that and far below what
# piling up even a few seconds of a `yes` (hundreds of MB/s) would take.
ok "[ $((node1 - node0)) -lt 51200 ]" "the node agent's VmRSS stays flat (+$(((node1 - node0) / 1024)) MB < 50 MB)"
ok "[ $((api1 - api0)) -lt 102400 ]" "the API children's VmRSS stays flat (+$(((api1 - api0) / 1024)) MB < 100 MB)"
ok "[ $((beam1 - beam0)) -lt 102400 ]" "RabbitMQ's VmRSS stays flat (+$(((beam1 - beam0) / 1024)) MB < 100 MB)"
kill -9 "$rd"; wait "$rd" 2> /dev/null
no_head() { [ -z "$(head_pid)" ]; }
wait_until 30 no_head
ok $? "killing the stopped reader kills the command"

rt_note_restarts "$RT_MARK"
finish
