#!/bin/bash
# test: parallel
# Background processes in sbx-init (protocol 2), sbx-init run as a normal
# process and driven by t/init/initctl: the starting stream ends with
# STARTED and a detached EXIT; PROCS lists them; their output goes to
# <procs-dir>/<pid>.log and any number of ATTACH streams replay it from an
# offset and follow it, each with its own credit; a client that goes away
# (node agent restart) leaves the process running and a new connection
# replays from 0; stdin through PSTDIN with close; PSIGNAL; exit codes,
# timeouts and signals recorded; the 16 MiB output cap; finished entries
# bounded; unknown pids.
set -u
. "$(dirname "$0")/lib.sh"

sbxinit_bins

plan 42

T=$T_TMP
P=$T/procs # sbx-init's --procs-dir
sbxinit_start

c() { "$CTL" "$SOCK" "$@"; }
proc_line() { c procs | awk -F'\t' -v p="$1" '$1 == p'; }
proc_field() { proc_line "$1" | cut -f"$2"; }

# ---- start, list, replay -----------------------------------------------------
T_SECTION=start
pid=$(c bg --cwd "$T" -- sh -c 'i=0; while [ $i -lt 2000 ]; do echo line-$i; i=$((i+1)); done; echo oops >&2; while [ ! -e go ]; do sleep 0.05; done; echo after; exit 3')
rc=$?
like "$rc|$pid" '^0\|[0-9]+$' "a background EXEC answers STARTED(pid) and a detached EXIT at once"
ok "kill -0 $pid" "... and the process runs"
ok '[ -f "$P/$pid.log" ]' "its output is recorded in <procs-dir>/<pid>.log"
like "$(proc_line "$pid")" "^$pid	running	0	0	0	[0-9]{13}	0	[0-9]+	sh -c i=0; while" \
	"PROCS lists it: running, no status yet, start in ms, the command"

# two attachments that follow, at the same time
c attach "$pid" --follow --credit 4096 --status "$T/st1" > "$T/a1.out" 2> "$T/a1.err" &
a1=$!
c attach "$pid" --follow --status "$T/st2" > "$T/a2.out" 2> "$T/a2.err" &
a2=$!
BGPIDS+=("$a1" "$a2")
both_caught_up() { grep -q line-1999 "$T/a1.out" && grep -q line-1999 "$T/a2.out"; }
wait_until 10 both_caught_up
ok $? "two followers both replay the output produced so far"
ok "kill -0 $pid && kill -0 $a1 && kill -0 $a2" "... and keep following while the process runs"
touch "$T/go"
wait $a1
rc1=$?
wait $a2
rc2=$?
BGPIDS=()
{ seq 0 1999 | sed 's/^/line-/'; echo after; } > "$T/expect"
is "$rc1|$rc2" "3|3" "both end with the process's exit code"
cmp -s "$T/expect" "$T/a1.out" && cmp -s "$T/expect" "$T/a2.out"
ok $? "... each got all of stdout exactly, live part included (one with a 4 KiB credit window)"
is "$(cat "$T/a1.err")|$(cat "$T/a2.err")" "oops|oops" "... and stderr apart"
is "$(cat "$T/st1")" "exit=3 signal=0 flags=0" "EXIT carries the code"
like "$(proc_line "$pid")" "^$pid	exited	3	0	0	[0-9]{13}	[0-9]{13}	$(($(stat -c %s "$T/expect") + 5))	" \
	"PROCS: exited, code 3, end time, output bytes (stdout + stderr)"

c attach "$pid" > "$T/again" 2> /dev/null
is "$?|$(cmp -s "$T/expect" "$T/again" && echo same)" "3|same" "a finished process is replayed whole, any time later"
c attach "$pid" --offset 13000 > "$T/tail" 2> /dev/null
# the offset counts stdout and stderr bytes together, in order
all_bytes=$( { seq 0 1999 | sed 's/^/line-/'; echo oops; echo after; } | tail -c +13001)
is "$(cat "$T/tail")" "$(printf '%s\n' "$all_bytes" | grep -v oops)" "--offset replays from that output byte on"
c attach "$pid" --offset 999999999 > "$T/none"
is "$?|$(stat -c %s "$T/none")" "3|0" "an offset past the end gives nothing but the EXIT"

# ---- not following, reconnecting --------------------------------------------
T_SECTION=reconnect
pid=$(c bg -- sh -c 'echo first; while :; do sleep 0.1; done')
BGPIDS+=("$pid")
wait_until 5 sh -c "[ \"\$('$CTL' '$SOCK' procs | awk -F'\t' '\$1 == $pid {print \$8}')\" = 6 ]"
c attach "$pid" --status "$T/st" > "$T/o"
is "$?|$(cat "$T/o")|$(cat "$T/st")" "0|first|exit=0 signal=0 flags=4" \
	"without follow ATTACH ends at the end of the log with a detached EXIT"
# a follower that goes away (the node agent dies) ...
c attach "$pid" --follow > "$T/o" &
fpid=$!
wait_until 5 test -s "$T/o"
{
	kill -9 $fpid
	wait $fpid
} 2> /dev/null
ok "kill -0 $pid" "a follower killed mid-stream leaves the process running"
out=$(c attach "$pid" --offset 0)
is "$out" first "... and a new connection replays its output from 0"
c attach "$pid" --follow --quit-after 3 > /dev/null
out=$(c attach "$pid" --offset 0)
is "$out" first "... also after a follower that dropped its connection while holding no credit"
c psignal "$pid" 9
is $? 0 "PSIGNAL answers 0 for a running process"
c attach "$pid" --follow --status "$T/st" > /dev/null
is "$?|$(cat "$T/st")" "137|exit=137 signal=9 flags=0" "... the signal reaches it and its EXIT says so"
c psignal "$pid" 15 2> "$T/err"
like "$(cat "$T/err")" 'errno=3 ' "PSIGNAL to a finished process is ESRCH"
BGPIDS=()

# ---- stdin -------------------------------------------------------------------
T_SECTION=stdin
pid=$(c bg --keep-stdin -- cat)
c pstdin "$pid" 'hello '
r1=$?
c pstdin "$pid" 'world'
r2=$?
c pstdin "$pid" --close
r3=$?
is "$r1$r2$r3" 000 "PSTDIN answers 0 once the bytes are in the pipe, and once stdin is closed"
out=$(c attach "$pid" --follow)
is "$?|$out" "0|hello world" "a background cat got its stdin and ended at the close"
c pstdin "$pid" more 2> "$T/err"
like "$(cat "$T/err")" 'errno=(32|3) ' "PSTDIN after the end is refused"
pid=$(c bg -- sh -c 'sleep 5')
c pstdin "$pid" 'x' 2> "$T/err"
like "$(cat "$T/err")" 'errno=32 ' "PSTDIN to a process started without stdin is EPIPE"
c psignal "$pid" 9
pid=$(c bg --keep-stdin -- sh -c 'exec 0<&-; sleep 5')
sleep 0.3
c pstdin "$pid" 'y' 2> "$T/err"
like "$(cat "$T/err")" 'errno=32 ' "PSTDIN to a process that closed its stdin is EPIPE"
c psignal "$pid" 9

# ---- timeout, cap, binary ------------------------------------------------------
T_SECTION=output
pid=$(c bg --timeout-ms 300 -- sh -c 'echo t; sleep 60')
c attach "$pid" --follow --status "$T/st" > "$T/o"
is "$?|$(cat "$T/o")|$(cat "$T/st")" "124|t|exit=124 signal=9 flags=1" "a background timeout kills it: 124, timed out, output kept"
like "$(proc_line "$pid" | cut -f2-5)" '^exited	124	9	1$' "... and PROCS records it"

head -c 1000000 /dev/urandom > "$T/rand"
pid=$(c bg -- cat "$T/rand")
c attach "$pid" --follow --credit 65536 > "$T/rand.got"
cmp -s "$T/rand" "$T/rand.got"
ok $? "1 MB of random bytes replay exactly"

head -c 20000000 /dev/urandom > "$T/r20"
pid=$(c bg -- cat "$T/r20")
c attach "$pid" --follow --status "$T/st" > "$T/r20.got"
is "$?|$(cat "$T/st")" "0|exit=0 signal=0 flags=8" "20 MB of output: EXIT has the truncated flag"
is "$(stat -c %s "$T/r20.got")" 16777216 "... exactly the first 16 MiB are kept"
cmp -s "$T/r20.got" <(head -c 16777216 "$T/r20")
ok $? "... byte for byte"
like "$(proc_line "$pid" | cut -f5,8)" '^8	20000000$' "PROCS: truncated flag, all 20000000 bytes counted"
ok "[ $(stat -c %s "$P/$pid.log") -lt 17000000 ]" "the log on disk stays near the cap"
rm -f "$T/r20" "$T/r20.got"

# ---- bookkeeping ---------------------------------------------------------------
T_SECTION=limits
c attach 999999 2> "$T/err"
like "$(cat "$T/err")" 'errno=3 ' "ATTACH to an unknown pid is ESRCH"
c pstdin 999999 x 2> "$T/err"
like "$(cat "$T/err")" 'errno=3 ' "PSTDIN to an unknown pid is ESRCH"
c psignal 999999 9 2> "$T/err"
like "$(cat "$T/err")" 'errno=3 ' "PSIGNAL to an unknown pid is ESRCH"
fpid=$(c procs | awk -F'\t' '$2 == "exited" {print $1}' | tail -1)
for i in $(seq 1 260); do c bg -- true > /dev/null; done
wait_until 10 sh -c "[ \$('$CTL' '$SOCK' procs | grep -c running) = 0 ]"
is "$(c procs | grep -c '	exited	')" 256 "at most 256 finished processes are remembered"
c attach "$fpid" 2> "$T/err" > /dev/null
like "$(cat "$T/err")" 'errno=3 ' "... the oldest are forgotten"
ok '[ ! -e "$P/$fpid.log" ] && [ "$(ls "$P" | wc -l)" -le 257 ]' "... and their logs removed"

python3 - "$SOCK" "$(dirname "$0")" << 'PY'
import struct, sys; sys.path.insert(0, sys.argv[2])
from chanlib import connect
s = connect(sys.argv[1])
p = struct.pack(">IQII", 1, 0, 2, 0)   # unknown ATTACH flag
s.sendall(struct.pack(">IBI", len(p) + 5, 7, 1) + p)
sys.exit(0 if s.recv(100) == b"" else 1)
PY
ok $? "an ATTACH with unknown flags closes the connection"

pid=$(c bg -- sleep 60)
kill -TERM $INITPID
wait $INITPID
wait_until 5 sh -c "! kill -0 $pid 2>/dev/null"
ok $? "background processes end with sbx-init (their sandbox)"

finish
