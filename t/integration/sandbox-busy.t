#!/bin/bash
# test: parallel
# A busy sandbox is not a dead one (node_health.c check_init). The node
# agent pings every sandbox's sbx-init each liveness pass; a ping left
# unanswered twice used to fail the sandbox ("sbx-init stopped answering")
# and destroy it. But a sandbox at its CPU limit can leave sbx-init
# unscheduled for seconds (16 shell loops in one core on a slow host did),
# and its owner was only using it. What a user sees now:
#  - a sandbox whose own process keeps stopping sbx-init for 12 s while it
#    burns CPU (`kill -STOP 1` in a loop: the worst case of a starved
#    sbx-init) stays ready the whole time, looked at every second;
#  - the node agent says in its log that sbx-init is late but the sandbox
#    runs (so the case was really met, not dodged). Two missed pings in a
#    row are chance with the loop alone (sbx-init may answer between the
#    node's SIGCONT and the loop's next stop: CI, 2026-12-04), so the test
#    arms the node's fault point ping-deaf for this sandbox during the
#    loop: its answers count as missed, its CPU time is its own;
#  - an exec sent during it is late but waits and answers 200 (its op is
#    not failed with 503 sandbox_unresponsive while the sandbox runs);
#  - once the loop ends, sbx-init answers again and an exec works.
# A sentry stopped from the host uses no CPU and is still failed at the
# second miss: relay-restart.t c.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq curl
require_stack
t_on_exit sb_cleanup

rt_setup it-sandbox-busy
mark=$(log_mark)
rt_new it-sandbox-busy
ID=$RT_ID
is "$(rt_sh "$ID" "echo up")" up "a sandbox answers (its channel is open)"

req nginx POST "/sandboxes/$ID/exec" \
	"$(jq -nc '{cmd:"timeout 12 sh -c \"while :; do kill -STOP 1; done\"", background:true}')"
like "$(j .data.pid)" '^[0-9]+$' "a background loop keeps stopping sbx-init for 12 s ($STATUS)"
disarm() { rm -f "$SB_STATE/faults/ping-deaf.$ID.armed"; }
t_on_exit disarm sb_cleanup
mkdir -p "$SB_STATE/faults" && touch "$SB_STATE/faults/ping-deaf.$ID.armed"

# An exec sent while sbx-init is starved: its answer is late, but the
# sandbox runs, so the op waits for it (relay.c op_late) instead of failing
# with 503 sandbox_unresponsive after init_answer_ms.
sleep 2
curl -sS --cacert "$SBX_CACERT" --max-time 90 -H "$(rt_auth)" -H 'Content-Type: application/json' \
	-w '\n%{http_code}\n' -d "$(rt_json "echo through-the-starving" 60)" "$SBX_URL/sandboxes/$ID/exec" \
	> "$T_TMP/late" 2>&1 &
latepid=$!
states=""
for _ in $(seq 16); do
	sleep 1
	states="$states $(sb_db "$ID" status)"
done
diag "status each second:$states"
unlike "$states" 'failed|destroyed' "the sandbox stays ready while its sbx-init is starved"
is "$(echo $states | tr ' ' '\n' | sort -u | tr '\n' ' ')" "ready " "...ready at every look"
wait $latepid
is "$(tail -n1 "$T_TMP/late") $(head -n1 "$T_TMP/late" | jq -r .data.stdout 2> /dev/null)" "200 through-the-starving" \
	"an exec sent while sbx-init was starved waits for it and answers 200 with its output" ||
	diag "$(cat "$T_TMP/late")"
# (Whether its answer was late is chance: sbx-init runs between a SIGCONT
# and the loop's next SIGSTOP. Late, it was 503 before relay.c op_late;
# the log says which case this run met.)
oplate() { log_since "$mark" | grep -q "sandbox $ID: op [0-9a-f]*: sbx-init has not answered in [0-9]* ms, but the sandbox runs"; }
if oplate; then diag "its answer was late and it waited (op_late)"; else diag "its answer came within init_answer_ms this time"; fi
late() { log_since "$mark" | grep -q "sandbox $ID: sbx-init has not answered for [0-9]* ms, but the sandbox runs"; }
ok late "the node agent logged that sbx-init is late but the sandbox runs" ||
	diag "$(log_since "$mark" | grep "sandbox $ID" | head -n 10)"
disarm
answers() { [ "$(rt_sh "$ID" "echo alive" 10)" = alive ]; }
wait_until 30 answers
ok $? "after the loop, sbx-init answers again: an exec works"
is "$(sb_db "$ID" status)" ready "the sandbox is ready"
is "$(sb_db "$ID" "coalesce(failure_reason, '')")" "" "...with no failure recorded"
finish
