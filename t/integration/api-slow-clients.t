#!/bin/bash
# test: any stack
# Slow clients and one tenant's share of the API children (issue 8):
#  (a) an upload whose body stops (one byte, then silence) is cut off by
#      nginx's client_body_timeout (10 s), and one that trickles a byte every
#      2 s (never silent long enough for nginx) is cut off by sbx-api's
#      api_body_min_rate once api_body_grace (10 s) has passed, with a JSON
#      408. Each time sbx-api's own log line shows how long the child was
#      held, and Postgres (pg_locks) shows the organisation's slots given back.
#  (b) organisation A at its concurrent-request limit (3: two streams and a
#      request stuck on the FastCGI socket): its next request is 429 with
#      Retry-After, naming the limit, through nginx and over FastCGI, while
#      organisation B's requests and execs succeed at the same moment.
#  (c) A at its stream limit (2 execs held open): its next exec, streamed or
#      not, is 429; its short requests still work; B streams meanwhile.
# A's limits are per-organisation overrides (sbx-admin org limits); B keeps
# the stack's settings. Slots are advisory locks on the API children's
# Postgres sessions (src/api/limits.c): key1 = the org id's first 32 bits,
# key2 = its next 16 bits << 16 | kind (0 request, 1 stream) << 15 | slot.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq python3 curl psql
require_stack
RT_MARK=$(log_mark)
HOLD_PID=""
stop_hold() {
	[ -n "$HOLD_PID" ] && kill "$HOLD_PID" 2> /dev/null
	[ -n "$HOLD_PID" ] && wait "$HOLD_PID" 2> /dev/null
	HOLD_PID=""
}
trap 'rc=$?; stop_hold; rt_kill_bg; sb_cleanup; t_end $rc' EXIT
T=$T_TMP
PORT=${SBX_URL##*:}
PORT=${PORT%%/*}

ORG_A=$(new_org it-slow-a)
KEY_A=$(new_key "$ORG_A")
ORG_B=$(new_org it-slow-b)
KEY_B=$(new_key "$ORG_B")
[[ $KEY_A =~ ^sbx_[0-9a-f]{64}$ && $KEY_B =~ ^sbx_[0-9a-f]{64}$ ]] ||
	bail "cannot make two organisations and keys: $(cat "$T_TMP/admin.err")"
AUTH_A="Authorization: Bearer $KEY_A"
AUTH_B="Authorization: Bearer $KEY_B"

# org_locks ORG [KIND]: advisory locks held now for ORG's slots (KIND 0
# requests, 1 streams; both when omitted), from pg_locks.
org_locks() {
	local k1=$((16#${1:0:8})) k16=$((16#${1:8:4})) kind=""
	[ -n "${2:-}" ] && kind="AND (objid::bigint >> 15) & 1 = $2"
	psql_q "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted
		AND classid::bigint = $k1 AND objid::bigint >> 16 = $k16 $kind"
}
locks_are() { [ "$(org_locks "$1" "${3:-}")" = "$2" ]; }

# api_line PATTERN: sbx-api's log line for the request whose URI has PATTERN
# (logged when the child is done with it), after RT_MARK.
api_line() { log_since "$RT_MARK" | grep -E 'sbx-api(-child)?\[' | grep -F " $1 " | tail -n1; }
# held_secs LINE: how long the child held that request, in seconds.
held_secs() { sed -n 's/.* [0-9][0-9][0-9] \([0-9]*\)us.*/\1/p' <<< "$1" | awk '{printf "%.1f", $1 / 1e6}'; }

export REQ_AUTH=$AUTH_A
rt_new it-slow-a
SA=$RT_ID
export REQ_AUTH=$AUTH_B
rt_new it-slow-b
SB=$RT_ID
export REQ_AUTH=$AUTH_A

# ---- (a) slow bodies ---------------------------------------------------------
# slow_put PATH MODE: a PUT of 1000 bytes over HTTPS that sends one byte and
# then (MODE stall) nothing, or (MODE trickle) one byte every 2 s; reads
# the answer all along. Prints "STATUS SECONDS" (STATUS is the HTTP status,
# or closed/reset) with the seconds since the headers were sent. Bounded: 60 s.
slow_put() {
	python3 - "$PORT" "$SBX_CACERT" "$1" "$KEY_A" "$2" << 'PY'
import socket, ssl, sys, time
port, ca, path, key, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=ca)
t = ctx.wrap_socket(socket.create_connection(('127.0.0.1', port), timeout=10), server_hostname='127.0.0.1')
t.sendall(('PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n'
           'Content-Type: application/octet-stream\r\nContent-Length: 1000\r\nConnection: close\r\n\r\nx'
           % (path, key)).encode())
t0 = time.monotonic()
t.settimeout(0.2)
buf, last, status = b'', t0, None
while time.monotonic() - t0 < 60:
    if mode == 'trickle' and time.monotonic() - last >= 2:
        try:
            t.sendall(b'x')
        except OSError:
            pass
        last = time.monotonic()
    try:
        d = t.recv(4096)
    except (socket.timeout, ssl.SSLWantReadError):
        continue
    except OSError:
        status = status or 'reset'
        break
    if not d:
        break
    buf += d
if status is None:
    status = buf.split(b' ')[1].decode() if buf.startswith(b'HTTP/1.1 ') else 'closed'
print(status, '%.1f' % (time.monotonic() - t0))
sys.stderr.write(buf.decode('utf-8', 'replace')[-400:])
PY
}

T_SECTION=stall
stall_path="/sandboxes/$SA/files/tmp/slow-stall-$$"
slow_put "$stall_path" stall > "$T/stall" 2> "$T/stall.body" &
sp=$!
wait_until 10 locks_are "$ORG_A" 1 1
ok $? "while the body is in flight the upload holds one of A's stream slots (pg_locks)"
wait "$sp"
read -r st secs < "$T/stall"
diag "stalled upload: the client saw '$st' after $secs s"
like "$st" '^(408|closed|reset)$' "a body that stops is cut off (408 or the connection closed)"
ok "awk 'BEGIN {exit !($secs >= 8 && $secs <= 20)}'" "... after about nginx's 10 s client_body_timeout ($secs s)"
wait_until 10 eval '[ -n "$(api_line "$stall_path")" ]'
line=$(api_line "$stall_path")
held=$(held_secs "$line")
diag "sbx-api: ${line#*req=*: }"
ok "awk 'BEGIN {exit !(\"$held\" != \"\" && $held <= 15)}'" "the API child was free again after ${held:-?} s (its log line)"
wait_until 10 locks_are "$ORG_A" 0
ok $? "A's slots are all given back (pg_locks)"

T_SECTION=trickle
trickle_path="/sandboxes/$SA/files/tmp/slow-trickle-$$"
slow_put "$trickle_path" trickle > "$T/trickle" 2> "$T/trickle.body"
read -r st secs < "$T/trickle"
diag "trickled upload (a byte every 2 s): the client saw '$st' after $secs s; body: $(head -c 300 "$T/trickle.body" | tr '\r\n' '  ' | sed 's/.*  //')"
like "$st" '^(408|closed|reset)$' "a body trickling a byte every 2 s is cut off (408 or the connection closed)"
ok "awk 'BEGIN {exit !($secs >= 8 && $secs <= 25)}'" "... after api_body_grace (10 s) and a gap ($secs s)"
[ "$st" = 408 ] && like "$(cat "$T/trickle.body")" '"code":"body_too_slow"' "the 408 is sbx-api's JSON, code body_too_slow"
[ "$st" = 408 ] || skip 1 "the client saw no answer ($st)"
wait_until 10 eval '[ -n "$(api_line "$trickle_path")" ]'
line=$(api_line "$trickle_path")
held=$(held_secs "$line")
diag "sbx-api: ${line#*req=*: }"
like "$line" " 408 " "sbx-api answered 408 itself (nginx's body timeout never fired)"
ok "awk 'BEGIN {exit !(\"$held\" != \"\" && $held <= 20)}'" "the API child was free again after ${held:-?} s (its log line)"
wait_until 10 locks_are "$ORG_A" 0
ok $? "A's slots are all given back (pg_locks)"
req nginx GET "/sandboxes/$SA/files/tmp/slow-trickle-$$"
is "$STATUS" 404 "no file was made from the cut-off upload"

# ---- (c) the stream limit ------------------------------------------------------
T_SECTION=streams
admin org limits "$ORG_A" --max-concurrent-requests 3 --max-concurrent-streams 2 > "$T/admin.out" 2>&1
ok $? "sbx-admin org limits A --max-concurrent-requests 3 --max-concurrent-streams 2"
like "$(admin org list 2> /dev/null | grep "^$ORG_A")" 'concurrent_requests=3 concurrent_streams=2' "org list shows A's limits"
like "$(admin org list 2> /dev/null | grep "^$ORG_B")" 'concurrent_requests=default concurrent_streams=default' \
	"org list shows B on the settings"
admin org limits "$ORG_A" --max-concurrent-streams 0 > "$T/admin.out" 2>&1
isnt $? 0 "a limit of 0 is refused ($(head -c 100 "$T/admin.out"))"

tag=go$RANDOM
for i in 1 2; do
	rt_stream_start "$T/held$i" "/sandboxes/$SA/exec" \
		"$(rt_json "echo held-$i; while [ ! -e /tmp/$tag ]; do sleep 0.2; done; echo end-$i" 120 true)"
	eval "held_pid$i=\$RT_PID"
done
both_held() { rt_has "$T/held1" held-1 && rt_has "$T/held2" held-2; }
wait_until 30 both_held
ok $? "A holds two streamed execs open (both printed their first line)"
is "$(org_locks "$ORG_A" 0) $(org_locks "$ORG_A" 1)" "2 2" "they hold two request and two stream slots (pg_locks)"

req nginx POST "/sandboxes/$SA/exec" "$(rt_json "echo third" 30 true)"
is "$STATUS" 429 "A's third stream: 429"
is "$(j .code)" org_stream_limit "... code org_stream_limit"
like "$(j .message)" 'long-running.*at most 2' "... the message names the limit (2)"
like "$(hdr Retry-After)" '^[0-9]+$' "... with Retry-After ($(hdr Retry-After))"
req nginx POST "/sandboxes/$SA/exec" "$(rt_json "echo third" 30 false)"
is "$STATUS $(j .code)" "429 org_stream_limit" "a JSON exec counts as long-running too: 429"
req fcgi POST "/sandboxes/$SA/exec" "$(rt_json "echo third" 30 false)"
is "$STATUS $(j .code)" "429 org_stream_limit" "over FastCGI directly: 429 as well"
like "$(hdr Retry-After)" '^[0-9]+$' "... with Retry-After"
req nginx GET "/sandboxes/$SA"
is "$STATUS" 200 "A's short requests still work (a request slot is free)"

REQ_AUTH=$AUTH_B rt_stream_start "$T/b-stream" "/sandboxes/$SB/exec" "$(rt_json "echo b-streams" 30 true)"
bp=$RT_PID
wait_until 30 eval '! kill -0 $bp 2> /dev/null'
rt_frames "$T/b-stream" sse > "$T/b-frames" 2> /dev/null
ok '[ "$(head -n1 "$T/b-stream.hdr" | cut -d" " -f2)" = 200 ] && rt_has "$T/b-stream" b-streams && rt_frames_ok "$T/b-frames"' \
	"meanwhile B streams an exec to its end (200, output, done frame)"
ok both_held "... and A's two streams are still open"
is "$(org_locks "$ORG_A")" 4 "A still holds exactly its 2 + 2 slots"

# ---- (b) the request limit -----------------------------------------------------
# The third request: a create whose body never comes, sent straight to the
# FastCGI socket (nginx would buffer it and never let it reach a child).
T_SECTION=requests
python3 - "$SBX_API_SOCKET" "$KEY_A" > "$T/hold.out" 2>&1 << 'PY' &
import socket, struct, sys, time
def rec(t, c):
    pad = (8 - len(c) % 8) % 8
    return struct.pack('>BBHHBx', 1, t, 1, len(c), pad) + c + b'\0' * pad
def nv(n, v):
    l = lambda x: bytes([len(x)]) if len(x) < 128 else struct.pack('>I', len(x) | 0x80000000)
    return l(n) + l(v) + n + v
p = {'REQUEST_METHOD': 'POST', 'REQUEST_URI': '/sandboxes', 'SCRIPT_NAME': '', 'QUERY_STRING': '',
     'SERVER_PROTOCOL': 'HTTP/1.1', 'GATEWAY_INTERFACE': 'CGI/1.1', 'REMOTE_ADDR': '127.0.0.1',
     'REMOTE_PORT': '40000', 'SERVER_NAME': '127.0.0.1', 'SERVER_PORT': '443',
     'CONTENT_TYPE': 'application/json', 'CONTENT_LENGTH': '100',
     'HTTP_AUTHORIZATION': 'Bearer ' + sys.argv[2], 'HTTP_X_REQUEST_ID': 'it-slow-hold'}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
params = b''.join(nv(k.encode(), v.encode()) for k, v in p.items())
s.sendall(rec(1, struct.pack('>HB5x', 1, 0)) + rec(4, params) + rec(4, b''))
s.settimeout(60)  # bounded: the test kills it long before
try:
    print('answer:', s.recv(4096)[:200])
except OSError as e:
    print('no answer:', e)
PY
HOLD_PID=$!
wait_until 20 locks_are "$ORG_A" 3 0
ok $? "a request stuck on the FastCGI socket takes A's third request slot (pg_locks)"

req nginx GET /sandboxes
is "$STATUS" 429 "A at 3 requests in flight: its next request is 429"
is "$(j .code)" org_request_limit "... code org_request_limit"
like "$(j .message)" 'concurrent requests.*at most 3' "... the message names the limit (3)"
like "$(hdr Retry-After)" '^[0-9]+$' "... with Retry-After ($(hdr Retry-After))"
like "$(hdr Content-Type)" '^application/json' "... as JSON"
req fcgi GET "/sandboxes/$SA"
is "$STATUS $(j .code)" "429 org_request_limit" "over FastCGI directly: 429 as well"
REQ_AUTH=$AUTH_B req nginx GET /sandboxes
is "$STATUS" 200 "at the same moment B lists its sandboxes (200)"
REQ_AUTH=$AUTH_B req nginx POST "/sandboxes/$SB/exec" "$(rt_json "echo b-ok" 30 false)"
is "$STATUS $(j -r .data.stdout)" "200 b-ok" "... and runs an exec (200)"
REQ_AUTH=$AUTH_B req fcgi GET "/sandboxes/$SB"
is "$STATUS" 200 "... and over FastCGI too"
REQ_AUTH= req nginx GET /healthz
is "$STATUS" 200 "public routes are not counted against anyone"

stop_hold
wait_until 20 locks_are "$ORG_A" 2 0
ok $? "the stuck request's slot comes back when its connection closes (pg_locks)"
req nginx GET "/sandboxes/$SA"
is "$STATUS" 200 "A's short requests work again"

# Back to the settings (the change applies to the next request); the go
# file ends A's streams.
admin org limits "$ORG_A" --max-concurrent-requests default --max-concurrent-streams default > "$T/admin.out" 2>&1
ok $? "sbx-admin org limits A ... default"
like "$(admin org list 2> /dev/null | grep "^$ORG_A")" 'concurrent_requests=default concurrent_streams=default' \
	"org list shows A back on the settings"
rt_sh "$SA" "touch /tmp/$tag" > /dev/null
streams_done() { ! kill -0 "$held_pid1" 2> /dev/null && ! kill -0 "$held_pid2" 2> /dev/null; }
wait_until 30 streams_done
ok $? "with the limit back at the setting, A's exec ends the two held streams"
ok 'rt_has "$T/held1" end-1 && rt_has "$T/held2" end-2' "both held streams ran to their end"
wait_until 10 locks_are "$ORG_A" 0
ok $? "every slot of A is given back (pg_locks)"
wait_until 10 locks_are "$ORG_B" 0
ok $? "every slot of B is given back (pg_locks)"
rt_note_restarts "$RT_MARK"

finish
