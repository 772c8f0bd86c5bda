#!/bin/bash
# test: any stack
# Idle sandboxes are frozen (issue 10, doc/idle.md), and nothing a user sees
# changes but latency. With idle_freeze_ms lowered to 1000 (sbx.conf, SIGHUP;
# restored at the end whatever happens):
#  - a sandbox left alone is frozen: its cgroup's freezer says FROZEN on the
#    host, and its record stays ready (liveness does not take a frozen
#    sbx-init for a dead one);
#  - an exec, a file write and a file read of a frozen sandbox work and
#    answer exactly what they would have;
#  - a background process the user started keeps its sandbox running:
#    after a whole idle period of another sandbox (that one got frozen, so
#    the node agent did look), the sandbox with the process is not frozen
#    and the process's counter (read from the host, not through the
#    sandbox) went on; the same for a daemon a command left behind; once
#    nothing runs inside any more, it is frozen again;
#  - destroying a frozen sandbox leaves nothing (independent listing, and
#    no cgroup of it).
# States only: every wait is for a state, never a duration.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, the stack's config and worker, the host's cgroups" runsc jq
rt_begin

CONF_MARK="# added by t/integration/idle-freeze.t (removed by its clean-up)"
CONF_TOUCHED=0
t_on_exit rt_kill_bg sb_cleanup restore_conf

plan 24

mark=$(log_mark)
printf '%s\nidle_freeze_ms = 1000\n' "$CONF_MARK" >> "$SBX_CONF"
CONF_TOUCHED=1
kill -HUP "$(worker_master)"
wait_until 30 node_agent_ready_since "$mark"
ok $? "idle_freeze_ms = 1000: the node agent was restarted with it (SIGHUP) and consumes"

rt_setup it-idle
rt_new it-idle-a
A=$RT_ID
rt_new it-idle-b
B=$RT_ID
tag=$RANDOM

frozen() { [ "$(sb_freezer "$1")" = FROZEN ]; }
node_agent_log_has() { log_since "$RT_MARK" | grep -qF "$1"; }
# host_counter ID FILE: a file of the sandbox's /tmp, read on the host (its
# /tmp lives on the sandbox's disk), so reading it does not touch the sandbox.
host_counter() { cat "$SB_STATE/sandboxes/$(sb_place "$1")/disk/tmp/$2" 2> /dev/null; }
# exec_json ID CMD: a JSON exec through nginx (STATUS, BODY).
exec_json() { exec_post "$1" "$2" '"timeout_seconds":30'; }
# idle_period: the node agent has seen B idle for a whole period since now:
# B is thawed by an exec, then found frozen again.
idle_period() {
	exec_json "$B" true
	[ "$STATUS" = 200 ] || return 1
	wait_until 60 frozen "$B"
}

# ---- frozen when idle --------------------------------------------------------
T_SECTION=idle
wait_until 60 frozen "$A"
ok $? "a sandbox left alone is frozen (freezer.state on the host: $(sb_freezer "$A"))"
wait_until 30 node_agent_log_has "sandbox $A: idle: frozen"
ok $? "the node agent says so in its log"
# its stats go on while it is frozen (a sample every stats_sample_interval,
# 3 s on the test stacks; the node repeats the one it read after the freeze
# instead of reading the files again): new points, the last with no CPU
# (nothing runs). Not the memory of two points: the series the API shows
# may average samples into a point, one read before the freeze among them
# (a CI-mode run saw the last two differ)
npoints() { req nginx GET "/sandboxes/$A/stats" > /dev/null && j '.data.results | length'; }
wait_until 30 bash -c "[ \"\$(curl -sS --cacert '$SBX_CACERT' -H '$REQ_AUTH' '$SBX_URL/sandboxes/$A/stats' | jq '.data.results | length')\" -gt 0 ]"
n0=$(npoints)
more_points() { [ "$(npoints)" -ge $((n0 + 2)) ]; }
wait_until 30 more_points
ok $? "a frozen sandbox's stats go on: $(npoints) points after $n0 (two more while it is frozen)"
req nginx GET "/sandboxes/$A/stats" > /dev/null
is "$(j -c '.data.results[-1].cpu') $(sb_freezer "$A")" "0 FROZEN" \
	"...the last with no CPU used (nothing runs), still frozen"

# ---- requests to a frozen sandbox --------------------------------------------
T_SECTION=requests
exec_json "$A" "echo hi-$tag; expr 6 \\* 7; echo err-$tag >&2; exit 3"
is "$STATUS" 200 "exec on a frozen sandbox: 200"
is "$(j .data.stdout)|$(j .data.stderr)|$(j .data.exit_code)" "hi-$tag
42|err-$tag|3" "its stdout, stderr and exit code are the command's"
wait_until 60 frozen "$A"
ok $? "frozen again once idle"
printf 'file-%s\n' "$tag" > "$T_TMP/f"
req nginx PUT "/sandboxes/$A/files/tmp/it-idle-$tag.txt" "@$T_TMP/f" -H 'Content-Type: application/octet-stream'
is "$STATUS" 204 "file write to a frozen sandbox: 204"
wait_until 60 frozen "$A"
ok $? "frozen again after the write"
req nginx GET "/sandboxes/$A/files/tmp/it-idle-$tag.txt"
is "$STATUS|$BODY" "200|file-$tag" "file read of a frozen sandbox gives back what was written"
is "$(sb_db "$A" status)" ready "a frozen sandbox's record stays ready (liveness knows it is frozen)"

# ---- work inside keeps a sandbox running -------------------------------------
T_SECTION=background
wait_until 60 frozen "$A"
req nginx POST "/sandboxes/$A/exec" \
	"$(jq -nc '{cmd:"n=0; while :; do n=$((n+1)); echo $n > /tmp/counter.tmp; mv /tmp/counter.tmp /tmp/counter; sleep 0.2; done", background:true}')"
PID=$(j '.data.pid // empty')
like "$STATUS $PID" '^200 [0-9]+$' "a background counter starts (pid $PID)"
wait_until 30 test -s "$SB_STATE/sandboxes/$(sb_place "$A")/disk/tmp/counter"
c1=$(host_counter "$A" counter)
idle_period
ok $? "another sandbox went through a whole idle period meanwhile (frozen again)"
is "$(sb_freezer "$A")" THAWED "the sandbox running the user's background process is not frozen"
c2=$(host_counter "$A" counter)
ok "[ '${c2:-0}' -gt '${c1:-0}' ]" "its process went on (counter $c1 -> $c2, read on the host)"
req nginx POST "/sandboxes/$A/processes/$PID/signal" '{"signal":"SIGKILL"}'
like "$STATUS" '^20[04]$' "the background process is killed: $STATUS"
wait_until 60 frozen "$A"
ok $? "with nothing running inside any more, it is frozen again"

# a daemon a foreground command left behind (not a background exec)
exec_json "$A" 'setsid sh -c '\''echo $$ > /tmp/dpid; n=0; while :; do n=$((n+1)); echo $n > /tmp/d.tmp; mv /tmp/d.tmp /tmp/d; sleep 0.2; done'\'' < /dev/null > /dev/null 2>&1 &'
is "$STATUS|$(j .data.exit_code)" "200|0" "a command leaves a daemon behind and ends"
wait_until 30 test -s "$SB_STATE/sandboxes/$(sb_place "$A")/disk/tmp/d"
d1=$(host_counter "$A" d)
idle_period
d2=$(host_counter "$A" d)
ok "[ '$(sb_freezer "$A")' = THAWED ] && [ '${d2:-0}' -gt '${d1:-0}' ]" \
	"after another idle period the sandbox with the daemon is not frozen and the daemon went on ($d1 -> $d2)"
exec_json "$A" 'kill -9 $(cat /tmp/dpid)'
wait_until 60 frozen "$A"
ok $? "the daemon killed: frozen again"

# ---- destroy of a frozen sandbox ---------------------------------------------
T_SECTION=destroy
req nginx DELETE "/sandboxes/$A"
like "$STATUS" '^20[04]$' "DELETE of a frozen sandbox: $STATUS"
wait_until 60 sb_gone "$A"
is "$(sb_leftovers "$A")" "" "nothing of it is left (runsc, mounts, loops, netns, nft, state dir)"
PA=$(sb_place "$A")
ok "[ ! -e /sys/fs/cgroup/freezer/sbx/$PA ] && [ ! -e /sys/fs/cgroup/sbx/$PA ]" "and no cgroup of it"

finish
