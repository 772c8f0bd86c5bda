#!/bin/bash
# sbx-worker's master against the stack's RabbitMQ: crash restart with
# back-off, the exclusive pidfile (running and stale), the ping round trip
# with its request id in the worker's log, a provisioner that outlives a
# missing broker, SIGTERM drain, drain timeout, and a second SIGTERM.
# Runs its own masters with their own config, pidfile and log.
set -u

. "$(dirname "$0")/lib.sh"

# ---- the stack (only its RabbitMQ is used) ----
require_amqp
BIN=$SBX_WORKER_BIN
PING=$SBX_BUILD/workers/sbx-worker-ping
for b in "$BIN" "$PING"; do
	[ -x "$b" ] || bail "$b is not built"
done

# ---- bookkeeping: every pid we start is killed at exit, by pid ----
T=$T_TMP
PIDS=()
kill_ours() { kill_tree "${PIDS[@]}"; }
t_on_exit kill_ours

in_log() { grep -q -- "$2" "$1"; }
pidfile_is() { [ "$(cat "$1" 2>/dev/null)" = "$2" ]; }
# pid of the latest "started ROLE #0 (pid N)" line
started_pid() { sed -n "s/.*started $2 #0 (pid \\([0-9]*\\)).*/\\1/p" "$1" | tail -n 1; }

write_conf() { # NAME [extra lines...]
	local f=$T/$1.conf
	shift
	{
		echo "amqp_url = $SBX_TEST_AMQP_URL"
		echo "worker_pidfile = $T/$NAME.pid"
		echo "log_file = $T/$NAME.log"
		echo "node_id = test-$NAME-$$"
		printf '%s\n' "$@"
	} >"$f"
	echo "$f"
}
# start_master NAME: runs in the foreground under this shell, so `wait`
# gives its exit status
start_master() {
	"$BIN" -c "$T/$1.conf" 2>>"$T/$1.stderr" &
	MASTER=$!
	PIDS+=("$MASTER")
}

plan 17

# ---- A: a master with its three children ----
NAME=a
write_conf a "drain_timeout = 30" >/dev/null
start_master a
A=$MASTER
wait_until 10 pidfile_is "$T/a.pid" "$A" && wait_until 10 nchildren_is "$A" 3
ok $? "master writes its pidfile (pid $A) and pre-forks provisioner, node and reaper"

# ---- a SIGKILLed child is restarted ----
OLD=$(started_pid "$T/a.log" node)
kill -KILL "$OLD"
restarted() { local p; p=$(started_pid "$T/a.log" node); [ -n "$p" ] && [ "$p" != "$OLD" ] && alive "$p"; }
wait_until 10 restarted && in_log "$T/a.log" "node #0 (pid $OLD) died of signal 9"
ok $? "a SIGKILLed child is logged and replaced by a new process"

# ---- a child that keeps dying backs off ----
for i in 1 2 3; do
	OLD=$(started_pid "$T/a.log" node)
	kill -KILL "$OLD"
	wait_until 15 restarted
done
mapfile -t DELAYS < <(sed -n 's/.*restarting node #0 in \([0-9]*\) ms.*/\1/p' "$T/a.log")
increasing=0
[ "${#DELAYS[@]}" -ge 4 ] || increasing=1
for ((i = 1; i < ${#DELAYS[@]}; i++)); do
	[ "${DELAYS[i]}" -gt "${DELAYS[i - 1]}" ] || increasing=1
done
ok $increasing "restart delays of a slot that keeps dying grow: ${DELAYS[*]} ms"
nchildren_is "$A" 3
ok $? "after the restarts the master again has exactly 3 children"

# ---- the pidfile is exclusive ----
"$BIN" -c "$T/a.conf" >"$T/second.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "already running (pid $A" "$T/second.out" && pidfile_is "$T/a.pid" "$A"
ok $? "a second start (foreground) with the same pidfile fails with 'already running' (rc $rc)"
"$BIN" -c "$T/a.conf" -d >"$T/second-d.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "already running" "$T/second-d.out" && pidfile_is "$T/a.pid" "$A"
ok $? "a second start with -d fails with 'already running' before detaching (rc $rc)"

# ---- ping round trip; the stack's own worker may share the queue, so ask
# until our provisioner is the one that answers ----
PROV=$(started_pid "$T/a.log" provisioner)
wait_until 15 in_log "$T/a.log" "consuming sbx.provision"
ok $? "the provisioner consumes sbx.provision"
mine=""
for i in $(seq 1 12); do
	RID="wm-$$-$i"
	if out=$("$PING" -c "$T/a.conf" -r "$RID" -t 5000 2>&1); then
		if echo "$out" | grep -q "\"node\":\"test-a-$$\""; then mine=$RID; break; fi
	else
		diag "$out"
	fi
done
[ -n "$mine" ] && echo "$out" | grep -q '^type=pong$' &&
	echo "$out" | grep -q "{\"ok\":true,\"role\":\"provisioner\",\"pid\":$PROV,\"node\":\"test-a-$$\"}"
ok $? "a ping with request id ${mine:-?} gets a pong from our provisioner (pid $PROV)"
[ -n "$mine" ] && wait_until 5 in_log "$T/a.log" "sbx-worker-provisioner\\[$PROV\\] info req=$mine: ping answered"
ok $? "the worker's log line for that ping carries req=$mine"
# a bad body is rejected and does not kill the provisioner (again: ask until
# ours is the one that gets it)
bad=""
for i in $(seq 1 8); do
	"$PING" -c "$T/a.conf" -r "wm-bad-$$-$i" -b '{"x":1}' -t 1000 >/dev/null 2>&1
	if in_log "$T/a.log" "req=wm-bad-$$-$i: rejecting message of type 'ping'"; then bad=$i; break; fi
done
[ -n "$bad" ] && alive "$PROV" && ! in_log "$T/a.log" "req=wm-bad-$$-$bad: ping answered"
ok $? "a ping whose body is not {} is not answered and the provisioner lives on"

# ---- SIGTERM drains ----
KIDS=$(children "$A")
kill -TERM "$A"
wait_until 15 dead "$A"
wait "$A"
rc=$?
gone=0
for k in $KIDS; do alive "$k" && gone=1; done
[ $rc -eq 0 ] && [ $gone -eq 0 ] && in_log "$T/a.log" "drained" && [ ! -e "$T/a.pid" ]
ok $? "SIGTERM drains: children ($(echo $KIDS)) exit, master exits 0 (rc $rc) and removes its pidfile"

# ---- a stale pidfile is replaced ----
NAME=b
write_conf b "drain_timeout = 30" >/dev/null
sleep 0 &
DEADPID=$!
wait $DEADPID
echo "$DEADPID" >"$T/b.pid"
start_master b
B=$MASTER
wait_until 10 pidfile_is "$T/b.pid" "$B" && in_log "$T/b.log" "removing stale pidfile $T/b.pid (pid $DEADPID is gone)"
ok $? "a stale pidfile (dead pid $DEADPID) is replaced by the new master's pid"

# ---- a second SIGTERM during a drain exits at once ----
wait_until 10 nchildren_is "$B" 3
STUCK=$(started_pid "$T/b.log" reaper)
kill -STOP "$STUCK" # it cannot finish, so the drain waits
kill -TERM "$B"
wait_until 10 in_log "$T/b.log" "draining: asking"
wait_until 5 dead "$(started_pid "$T/b.log" node)"
alive "$B"
ok $? "while a child cannot finish, the draining master waits"
kill -TERM "$B"
wait_until 3 dead "$B"
wait "$B"
rc=$?
[ $rc -ne 0 ] && in_log "$T/b.log" "second stop signal: exiting now" && wait_until 3 dead "$STUCK"
ok $? "a second SIGTERM exits at once (rc $rc) and kills the stuck child"

# ---- drain timeout ----
NAME=c
write_conf c "drain_timeout = 1" >/dev/null
start_master c
C=$MASTER
wait_until 10 nchildren_is "$C" 3
STUCK=$(started_pid "$T/c.log" reaper)
kill -STOP "$STUCK"
kill -TERM "$C"
wait_until 10 dead "$C"
wait "$C"
rc=$?
# "killing N children": the stuck reaper, and any other child not done
# draining within the 1 s on a busy machine (the likely cause of a failure
# in run 3 of a 5-run repeat, three stacks busy: the master exited 0 and
# removed its pidfile, so the count is what can have differed; the diag
# shows the log now). The stuck one must be among them, dead after.
in_log "$T/c.log" "drain timeout: killing [1-3] children" && dead "$STUCK" && [ ! -e "$T/c.pid" ]
ok $? "past drain_timeout the master kills what is left and exits (rc $rc)" ||
	diag "$(grep -E 'drain|died|killing' "$T/c.log" | tail -n 8)"

# ---- the provisioner outlives a missing broker ----
NAME=d
write_conf d >/dev/null
# port 1 on loopback: nothing listens there
sed -i 's|^amqp_url = .*|amqp_url = amqp://guest:guest@127.0.0.1:1/|' "$T/d.conf"
start_master d
D=$MASTER
wait_until 10 nchildren_is "$D" 3
PROV=$(started_pid "$T/d.log" provisioner)
retries() { [ "$(grep -c "sbx-worker-provisioner\\[$PROV\\] warn: rabbitmq unreachable.*retrying in" "$T/d.log")" -ge 3 ]; }
wait_until 10 retries && alive "$PROV" && ! in_log "$T/d.log" "provisioner #0 (pid $PROV) exited"
ok $? "with the broker down the provisioner (pid $PROV) retries with back-off instead of exiting"
kill -TERM "$D"
wait_until 10 dead "$D"
wait "$D"
ok $? "and it still drains promptly on SIGTERM"

finish
