#!/bin/bash
# test: any stack, slow
# The node agent's runtime relay against the running stack, driven over
# RabbitMQ by t/relay/relayctl exactly as the API would (hop 1 of
# doc/internal-protocol.md), into real runsc sandboxes made through the API:
# byte-exact binary output, stderr apart, exit codes, timeout 124 with the
# partial output, stdin (in the request and streamed past the window),
# env/cwd, cwd_missing, streaming without buffering (causal), 20 concurrent
# execs across 3 sandboxes beside a stream that is never credited (causal:
# they finish while it is stuck), 200 MB through a slow reader with the
# node agent's VmRSS bounded, files, background processes, the exec record
# and last_activity_at, a node agent restart (new execs work, a background
# process is still listed and replayable), and a sentry killed from outside
# (the in-flight exec ends with sandbox_dead, the record is failed).
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq sha256sum
require_stack
[ -n "${SBX_AMQP_URL:-}" ] || bail "SBX_AMQP_URL is not set (scripts/stack-env)"

# The build's (scripts/test makes the check programs); made here by the
# build's own rules when the source is newer (a developer's run).
R=$SBX_BUILD/t/relay/relayctl
make -s -C "$SBX_BUILD" t/relay/relayctl >&2 || bail "cannot build t/relay/relayctl"

t_on_exit kill_bgpids sb_cleanup
plan 60

T=$T_TMP
mk() {
	sb_create nginx "{\"name\":\"it-relay-$1\",\"specs\":{\"cpu\":500,\"memory\":256,\"disk\":1}}"
	[ "$STATUS" = 201 ] || bail "cannot create a sandbox: $STATUS $BODY"
	echo "$SB_ID" > "$T/id-$1"
}
mk a
A=$(cat "$T/id-a")
mk b
B=$(cat "$T/id-b")
mk c
C=$(cat "$T/id-c")
mk d
D=$(cat "$T/id-d")
export SBX_NODE
SBX_NODE=$(psql_q "SELECT node_id FROM sandboxes WHERE id = '$A'")
[ -n "$SBX_NODE" ] || bail "sandbox $A has no node"
# relayctl names the sandbox's placement as the API does (its first id argument's)
rx_place() { local a; for a in "$@"; do [[ $a =~ ^[0-9a-f]{24}$ ]] && { sb_place "$a"; return; }; done; }
rx() { RELAY_PLACEMENT=$(rx_place "$@") timeout -k 5 150 "$R" "$@"; }
# node agent: the worker master's child with a signalfd (it reaps runsc's processes)
node_pid() {
	local p
	for p in $(ps -o pid= --ppid "$(worker_master)"); do
		ls -l "/proc/$p/fd" 2> /dev/null | grep -q signalfd && { echo "$p"; return 0; }
	done
}
vmrss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2> /dev/null; }

# ---- activity first: the first op on a sandbox's channel updates it ----
# (10 minutes back, inside the idle timeout of 30: an hour back made the
# reaper's next pass destroy the sandbox as idle before the exec)
psql_q "UPDATE sandboxes SET last_activity_at = now() - interval '10 minutes' WHERE id = '$C'" > /dev/null
# The node writes it off its loop (workers/execlog.c), so soon after the op
# began rather than before the exec's answer: looked for up to 15 s.
rx exec "$C" -- true
act_age() { age=$(psql_q "SELECT extract(epoch FROM now() - last_activity_at)::int FROM sandboxes WHERE id = '$C'"); }
act_recent() { act_age; [ -n "$age" ] && [ "$age" -lt 60 ]; }
wait_until 15 act_recent
ok $? "an exec updates last_activity_at (age ${age}s, was 10 min)"

# ---- basics ----
rx exec "$A" -- sh -c 'printf "out\n"; printf "err\n" >&2; exit 3' > "$T/o" 2> "$T/e"
rc=$?
is "$rc $(cat "$T/o") $(cat "$T/e")" "3 out err" "exit code 3, stdout and stderr apart"
rx exec "$A" -- sh -c 'printf "\000\377\376a\000"' > "$T/o"
is "$(od -An -tx1 "$T/o" | tr -d ' \n')" "00fffe6100" "NUL and invalid UTF-8 bytes exact"
rx exec "$A" -- sh -c 'head -c 3000000 /dev/urandom > /tmp/r.bin; cat /tmp/r.bin' > "$T/o"
want=$(rx exec "$A" -- sha256sum /tmp/r.bin | cut -d' ' -f1)
is "$(sha256sum < "$T/o" | cut -d' ' -f1) $(stat -c %s "$T/o")" "$want 3000000" "3 MB of random bytes byte-exact"
rx -j "$T/j" exec -t 700 "$A" -- sh -c 'echo partial; echo perr >&2; sleep 30' > "$T/o" 2> "$T/e"
rc=$?
is "$rc $(cat "$T/o") $(cat "$T/e")" "124 partial perr" "timeout: 124, output before it kept"
is "$(sed 's/^exit //' "$T/j" | jq -r '"\(.timed_out) \(.signal)"')" "true 9" "timeout: exit event timed_out, signal 9"
ms=$(sed 's/^exit //' "$T/j" | jq -r .duration_ms)
ok "[ '$ms' -ge 650 ] && [ '$ms' -lt 10000 ]" "timeout: duration_ms measured on the node ($ms)"
head -c 200000 /dev/urandom > "$T/in"
rx exec -i "$A" -- cat < "$T/in" > "$T/o"
is "$(sha256sum < "$T/o" | cut -d' ' -f1)" "$(sha256sum < "$T/in" | cut -d' ' -f1)" "stdin in the request: binary, exact"
head -c 3500000 /dev/urandom > "$T/in3"
out=$(rx exec -I "$A" -- sh -c 'cat | sha256sum' < "$T/in3")
is "${out%% *}" "$(sha256sum < "$T/in3" | cut -d' ' -f1)" "stdin streamed past the 1 MiB window, exact"
is "$(rx exec -e FOO='a b=c' -w /tmp "$A" -- sh -c 'printf "%s|" "$FOO"; pwd')" "a b=c|/tmp" "env and cwd"
rx exec -w /nonexistent "$A" -- true 2> "$T/e"
rc=$?
like "$rc $(cat "$T/e")" "^250 .*error cwd_missing" "cwd missing: error cwd_missing"
rx exec "$A" -- /no/such/cmd 2> "$T/e"
like "$? $(cat "$T/e")" "^250 .*error exec_failed" "unknown command: error exec_failed"
rx exec -- 000000000000000000000000 true 2> "$T/e"
like "$? $(cat "$T/e")" "^250 .*error not_ready" "a sandbox not on this node: error not_ready"

# ---- records ----
# (written after the answer, off the node agent's loop: soon, not at once)
recorded() { [ "$(psql_q "SELECT count(*) FROM execs WHERE sandbox_id = '$A' AND (timed_out OR cmd LIKE 'sh -c printf \"out%')")" -ge 2 ]; }
wait_until 15 recorded
n=$(psql_q "SELECT count(*) FROM execs WHERE sandbox_id = '$A' AND cmd LIKE 'sh -c printf \"out%' AND exit_code = 3 AND stdout_bytes = 4 AND stderr_bytes = 4 AND org_id = (SELECT org_id FROM sandboxes WHERE id = '$A')")
is "$n" 1 "the exec is recorded (cmd, exit code, bytes, org)"
n=$(psql_q "SELECT count(*) FROM execs WHERE sandbox_id = '$A' AND timed_out AND exit_code = 124 AND duration_ms >= 650")
is "$n" 1 "the timed-out exec is recorded as such"

# ---- streaming is not buffered (causal) ----
rm -f "$T/s"
rx exec "$B" -- sh -c 'echo A; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo B' > "$T/s" &
sp=$!
BGPIDS+=($sp)
wait_until 20 grep -q A "$T/s"
ok $? "streaming: A arrives while the command waits"
rx exec "$B" -- touch /tmp/go
wait $sp
is "$? $(tr '\n' ' ' < "$T/s")" "0 A B " "streaming: B after the go, then exit 0"

# ---- one never-credited stream does not delay the others ----
rx exec -N -c 65536 -t 60000 "$A" -- sh -c 'yes stuck; ' > "$T/stuck" 2> /dev/null &
stuckp=$!
BGPIDS+=($stuckp)
wait_until 20 test -s "$T/stuck"
sleep 0.5
s1=$(stat -c %s "$T/stuck")
pids=()
for i in $(seq 1 20); do
	case $((i % 3)) in 0) sb=$A ;; 1) sb=$B ;; *) sb=$C ;; esac
	rx exec -c 65536 "$sb" -- sh -c "head -c 300000 /dev/zero | tr '\\0' x; echo $i" > "$T/c$i" &
	pids+=($!)
done
fails=0
for i in $(seq 1 20); do
	wait "${pids[$((i - 1))]}" || fails=$((fails + 1))
	[ "$(stat -c %s "$T/c$i")" = $((300000 + ${#i} + 1)) ] || fails=$((fails + 1))
done
s2=$(stat -c %s "$T/stuck")
is "$fails" 0 "20 concurrent execs across 3 sandboxes (300 kB each, over their credit) all complete"
ok "kill -0 $stuckp 2>/dev/null && [ '$s1' = '$s2' ] && [ '$s1' -le $((65536 + 1048576)) ]" \
	"...while the never-credited stream is still stuck at its credit (${s1} bytes, still running)"
kill $stuckp 2> /dev/null
wait $stuckp 2> /dev/null

# ---- 200 MB through a slow reader: the node agent's memory stays flat ----
np=$(node_pid)
ok "[ -n '$np' ] && [ -r /proc/$np/status ]" "the node agent is found (pid $np)"
rss0=$(vmrss "$np")
rx -T 300 exec -c 262144 -s 1 "$B" -- head -c 200000000 /dev/zero | wc -c > "$T/big" &
bp=$!
BGPIDS+=($bp)
max=0
while kill -0 $bp 2> /dev/null; do
	v=$(vmrss "$np")
	[ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v
	sleep 0.2
done
wait $bp
is "$(cat "$T/big")" 200000000 "200 MB through a slow reader: every byte arrives"
ok "[ $max -lt $((rss0 + 40000)) ]" "node agent VmRSS stayed bounded (${rss0} kB before, max ${max} kB)"

# ---- files ----
head -c 3000000 /dev/urandom > "$T/f"
rx put -p "$A" /tmp/d1/d2/f.bin < "$T/f"
ok $? "file.write (3 MB, parents made)"
rx get "$A" /tmp/d1/d2/f.bin > "$T/g"
is "$(sha256sum < "$T/g" | cut -d' ' -f1)" "$(sha256sum < "$T/f" | cut -d' ' -f1)" "file.read gives back the same bytes"
is "$(rx exec "$A" -- sha256sum /tmp/d1/d2/f.bin | cut -d' ' -f1)" "$(sha256sum < "$T/f" | cut -d' ' -f1)" \
	"...and so does the file inside"
is "$(rx ls "$A" /tmp/d1/d2 | jq -r '.entries[] | "\(.name) \(.type) \(.size)"')" "f.bin file 3000000" "file.list"
rx get "$A" /tmp/nope 2> "$T/e"
like "$? $(cat "$T/e")" "^250 .*error not_found" "file.read of a missing file: not_found"
rx mkdir "$A" /tmp/d1 2> "$T/e"
like "$? $(cat "$T/e")" "^250 .*error exists" "file.mkdir of an existing dir: exists"
rx ls "$A" /tmp/d1/d2/f.bin 2> "$T/e"
like "$? $(cat "$T/e")" "^250 .*error not_a_directory" "file.list of a file: not_a_directory"
rx rm "$A" /tmp/d1 2> "$T/e"
like "$? $(cat "$T/e")" "^250 .*error not_empty" "file.delete of a non-empty dir without recursive: not_empty"
rx rm -r "$A" /tmp/d1
ok $? "file.delete recursive"
rx exec "$A" -- test -e /tmp/d1
is "$?" 1 "...and it is gone inside"

# ---- background processes ----
bgpid=$(rx bg "$C" -- sh -c 'echo one; echo two >&2; sleep 1; echo three; sleep 600')
like "$bgpid" '^[0-9]+$' "background exec answers with its pid ($bgpid)"
wait_until 10 sh -c "RELAY_PLACEMENT=$(sb_place "$C") '$R' attach '$C' '$bgpid' 2>/dev/null | grep -q three"
is "$(rx procs "$C" | jq -r ".processes[] | select(.pid == $bgpid) | .state")" running "proc.list: running"
is "$(rx attach "$C" "$bgpid" 2> "$T/e"; cat "$T/e")" "one
three
two" "proc.attach replays stdout and stderr from the start"
is "$(rx attach -o 4 "$C" "$bgpid" 2> /dev/null)" "three" "proc.attach from an offset"

# ---- node agent restart ----
np=$(node_pid)
kill -9 "$np"
new_node() { np2=$(node_pid); [ -n "$np2" ] && [ "$np2" != "$np" ]; }
wait_until 30 new_node
ok "[ -n '$np' ] && [ -n '$np2' ] && [ '$np2' != '$np' ] && ! kill -0 $np 2>/dev/null" \
	"the node agent was killed and the master started a new one ($np -> $np2)"
wait_until 30 sh -c "RELAY_PLACEMENT=$(sb_place "$A") '$R' -T 5 exec '$A' -- true 2>/dev/null"

# ---- a hostile sbx-init: its malformed frame closes the channel, nothing else ----
# (D's channel is opened for the first time by the new agent: a fake stands
# in for its socket. One without D's key fails the handshake; one with it
# (a compromised sbx-init knows its own key) answers the EXEC with an empty
# STDOUT, a malformed frame)
sock=$SB_STATE/sandboxes/$(sb_place "$D")/disk/chan/channel.sock
mv "$sock" "$sock.real"
# fake_init KEY: a stand-in sbx-init on D's socket that proves KEY, then
# answers one EXEC with a malformed frame (a PING or the idle pass's STATUS
# the node sends before it is answered as sbx-init would: serve_until_exec).
fake_init() {
	# the handshake names what the node knows D by: its placement
	python3 - "$sock" "$1" "$(sb_place "$D")" "$(dirname "$0")" > /dev/null 2>&1 << 'EOF_PY' &
import socket, struct, sys, time
sys.path.insert(0, sys.argv[4])
from chanlib import serve_handshake, serve_until_exec
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)
while True:
    c, _ = s.accept()
    try:
        serve_handshake(c, sys.argv[2], sys.argv[3])
    except Exception:
        c.close()
        continue
    stream, p = serve_until_exec(c)
    c.sendall(struct.pack(">IBI", 5, 0x83, stream))
    time.sleep(5)
    break
EOF_PY
	fp=$!
	BGPIDS+=($fp)
	wait_until 10 test -S "$sock"
}
fake_init "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
rx -T 20 exec "$D" -- echo nokey 2> "$T/e"
like "$? $(cat "$T/e")" "^250 .*error.*(prove|handshake|closed)" "a stand-in without the sandbox's key fails the handshake: the op ends with an error"
kill $fp 2> /dev/null
wait $fp 2> /dev/null
rm -f "$sock"
fake_init "$(cat "$SB_STATE/sandboxes/$(sb_place "$D")/chan.key")"
rx -T 20 exec "$D" -- echo hi 2> "$T/e"
like "$? $(cat "$T/e")" "^250 .*error internal: .*malformed" "a malformed frame from inside: the op ends with error internal"
ok "kill -0 $np2" "...and the node agent lives on"
kill $fp 2> /dev/null
wait $fp 2> /dev/null
rm -f "$sock"

# ---- a lost connection's verdict waits in the loop's ticks, not in the loop ----
# (a stand-in proves D's key, takes the EXEC (answering what the node asks
# on its own before it: serve_until_exec), then closes the connection and
# goes with its socket: the node sees EOF from a sandbox whose sentry runs,
# and cannot dial it again. It used to wait for that in the loop, up to 2 s,
# with every other sandbox's frames unread; now the loop's ticks look every
# 10 ms, and chan-wait-hold keeps the wait open past its 2 s, so that what
# the loop does meanwhile is seen in order, not timed)
FAULTS=$SB_STATE/faults
mkdir -p "$FAULTS"
touch "$FAULTS/chan-wait-hold.armed"
hold_release() { rm -f "$FAULTS/chan-wait-hold.armed"; }
t_on_exit kill_bgpids sb_cleanup hold_release
python3 - "$sock" "$(cat "$SB_STATE/sandboxes/$(sb_place "$D")/chan.key")" "$(sb_place "$D")" "$(dirname "$0")" \
	> /dev/null 2>&1 << 'EOF_PY' &
import os, socket, sys
sys.path.insert(0, sys.argv[4])
from chanlib import serve_handshake, serve_until_exec
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)
c, _ = s.accept()
serve_handshake(c, sys.argv[2], sys.argv[3])
serve_until_exec(c)
s.close(); os.unlink(sys.argv[1]); c.close()
EOF_PY
fp=$!
BGPIDS+=($fp)
wait_until 10 test -S "$sock"
# d_bg WORD: `echo WORD` on D in the background (its pid: BGP; its output
# and errors: $T/WORD.o, $T/WORD.e); d_logged TEXT: the node logged TEXT of
# D since mark
d_bg() { rx -T 60 exec "$D" -- echo "$1" > "$T/$1.o" 2> "$T/$1.e" & BGP=$!; BGPIDS+=($BGP); }
d_logged() { log_since "$mark" | grep -qF "sandbox $(sb_place "$D"): $1"; }
mark=$(log_mark)
d_bg lost
lp=$BGP
wait_until 30 d_logged "channel closed: sbx-init closed the channel"
ok $? "the stand-in closed D's connection under an exec (the node logged it)"
is "$(rx -T 30 exec "$A" -- echo during)" during "another sandbox's exec is served while D's verdict waits"
ok "kill -0 $lp 2> /dev/null" "...and D's exec is still waiting for it (its connection lost, the sentry alive, no socket)"
# an exec begun now finds no socket to dial: it waits, queued, in the ticks too
d_bg queued
qp=$BGP
wait_until 30 d_logged "sbx-init's socket cannot be dialled yet"
ok $? "a second exec on D finds no socket: it waits for one (the node logged it)"
is "$(rx -T 30 exec "$A" -- echo during)" during "another sandbox's exec is served meanwhile"
ok "kill -0 $lp 2> /dev/null && kill -0 $qp 2> /dev/null" "...and both of D's execs still wait"
mv "$sock.real" "$sock"
rm -f "$FAULTS/chan-wait-hold.armed"
wait $lp
like "$? $(cat "$T/lost.e")" "^250 .*error internal: sbx-init closed the channel" \
	"sbx-init back: D's lost exec ends with error internal (the connection, not the sandbox), not sandbox_dead"
wait $qp
is "$? $(cat "$T/queued.o")" "0 queued" "...and the exec that waited for the socket runs on the new connection (exit 0, its output)"
wait $fp 2> /dev/null
is "$(rx exec "$D" -- echo fine)" fine "...and the next op reconnects to the real sbx-init"
is "$(rx exec "$A" -- echo after)" after "after the restart new execs work"
is "$(rx procs "$C" | jq -r ".processes[] | select(.pid == $bgpid) | .state")" running \
	"after the restart the background process is still listed"
is "$(rx attach "$C" "$bgpid" 2> /dev/null | tr '\n' ' ')" "one three " "...and replayable"
echo hi | rx pstdin "$C" 999999 2> "$T/e"
like "$? $(cat "$T/e")" "^250 .*error not_found" "proc.stdin to an unknown pid: not_found"
rx pkill "$C" "$bgpid" KILL
ok $? "proc.signal KILL"
wait_until 10 sh -c "RELAY_PLACEMENT=$(sb_place "$C") '$R' procs '$C' | jq -e '.processes[] | select(.pid == $bgpid and .state == \"exited\")' >/dev/null"
ok $? "...and it is listed as exited"

# ---- the sentry dies under a running exec ----
rm -f "$T/k"
rx -j "$T/kj" exec "$B" -- sh -c 'echo A; sleep 60' > "$T/k" 2> "$T/ke" &
kp=$!
BGPIDS+=($kp)
wait_until 20 grep -q A "$T/k"
kill -9 "$(cat "$SB_STATE/sandboxes/$(sb_place "$B")/sandbox.pid")"
t0=$SECONDS
wait $kp
rc=$?
like "$rc $(cat "$T/ke")" "^250 .*error sandbox_dead" "a sentry killed from outside: the in-flight exec ends with sandbox_dead"
ok "[ $((SECONDS - t0)) -lt 15 ]" "...promptly ($((SECONDS - t0)) s)"
wait_until 20 sb_status_is "$B" failed
is "$(sb_db "$B" status)" failed "...and the record is failed"
rx exec "$B" -- true 2> "$T/e"
like "$? $(cat "$T/e")" "^250 .*error (not_ready|sandbox_dead)" "a new exec on it is refused"
dead_recorded() { [ "$(psql_q "SELECT count(*) FROM execs WHERE sandbox_id = '$B' AND error = 'sandbox_dead'")" -ge 1 ]; }
wait_until 15 dead_recorded # recorded off the node's loop, after the answer
n=$(psql_q "SELECT count(*) FROM execs WHERE sandbox_id = '$B' AND error = 'sandbox_dead'")
is "$n" 1 "the interrupted exec is recorded with its error"

finish
