#!/bin/bash
# test: parallel
# Auto-destroy (API.md "Sandboxes", issue 12), on the real clock of the
# reaper with records aged by psql:
#  - autoDestroy + destroyTimeout: expires_at is that long after the create
#    (auto_destroy, destroy_timeout shown); past it the reaper destroys the
#    sandbox (max_lifetime); destroyTimeout without autoDestroy is ignored;
#  - oneShot: once a command run in the foreground has ended, the sandbox is
#    destroyed (one_shot_stopped), and nothing is left on the node; a
#    background command does not count;
#  - timeout (idle): shown as idle_timeout; past it: idle_ttl;
#  - POST /sandboxes/{id}/timeout: keep-alive, the idle timeout becomes the
#    given seconds from now (answers the Sandbox object); an aged record
#    that the old timeout would have ended lives on; validation and state
#    (400), another organisation's sandbox (404).
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq
require_stack
t_on_exit sb_cleanup

REAPER_INTERVAL=$(conf_get reaper_interval)
: "${REAPER_INTERVAL:=10}"
LIMIT=$((2 * REAPER_INTERVAL + 15))
MAXLIFE=$(conf_get max_lifetime)
: "${MAXLIFE:=86400}"

fresh_org it-autodestroy
secs_between() { psql_q "SELECT round(extract(epoch FROM (expires_at - created_at))) FROM sandboxes WHERE id = '$1'"; }

# ---- autoDestroy + destroyTimeout ---------------------------------------------------
T_SECTION=autoDestroy
sb_create nginx '{"name":"it-ad-30m","autoDestroy":true,"destroyTimeout":"30m","specs":{"memory":256,"disk":1}}'
A=$SB_ID
is "$STATUS $(j .data.auto_destroy) $(j .data.destroy_timeout)" "201 true 30m" "autoDestroy 30m: shown"
is "$(secs_between "$A")" 1800 "expires_at is 30 minutes after the create"
psql_q "UPDATE sandboxes SET expires_at = now() - interval '1 second' WHERE id = '$A'" > /dev/null
wait_until $LIMIT sb_status_is "$A" destroyed
is "$(sb_db "$A" "status || ' ' || coalesce(destroy_reason, '-')")" "destroyed max_lifetime" \
	"past it, the reaper destroys it (max_lifetime)"
wait_until 30 sb_gone "$A"
is "$(sb_leftovers "$A")" "" "nothing left on the node"
sb_create nginx '{"name":"it-ad-ignored","destroyTimeout":"1h","specs":{"memory":256,"disk":1}}'
B=$SB_ID
is "$STATUS $(j .data.auto_destroy) $(j .data.destroy_timeout)" "201 false null" \
	"destroyTimeout without autoDestroy: ignored (as the hosted reference says)"
is "$(secs_between "$B")" "$MAXLIFE" "expires_at is the maximum lifetime"
req nginx DELETE "/sandboxes/$B"

# ---- oneShot ----------------------------------------------------------------------------
T_SECTION=oneShot
sb_create nginx '{"name":"it-ad-oneshot","oneShot":true,"specs":{"memory":256,"disk":1}}'
O=$SB_ID
is "$STATUS $(j .data.one_shot)" "201 true" "oneShot: shown"
req nginx POST "/sandboxes/$O/exec" '{"cmd":"sleep 30","background":true}'
is "$STATUS" 200 "a background command"
is "$(sb_db "$O" "coalesce(destroy_reason, '-')")" "-" "does not end a one-shot sandbox"
sexec "$O" 'echo main'
is "$STATUS $OUT" "200 main" "its main command runs and answers"
wait_until $LIMIT sb_status_is "$O" destroyed
is "$(sb_db "$O" "status || ' ' || coalesce(destroy_reason, '-')")" "destroyed one_shot_stopped" \
	"once it has ended, the sandbox is destroyed: one_shot_stopped"
wait_until 30 sb_gone "$O"
is "$(sb_leftovers "$O")" "" "nothing left on the node"
req nginx GET "/sandboxes/$O"
is "$(j .data.status) $(j .data.destroy_reason)" "destroyed one_shot_stopped" "GET shows it"
sb_create nginx '{"name":"it-ad-normal","specs":{"memory":256,"disk":1}}'
N=$SB_ID
sexec "$N" 'echo x'
is "$(sb_db "$N" "coalesce(destroy_requested_at::text, '-')")" "-" "a sandbox without oneShot lives on after a command"

# ---- idle timeout and keep-alive ---------------------------------------------------------
T_SECTION=timeout
sb_create nginx '{"name":"it-ad-idle","timeout":120,"specs":{"memory":256,"disk":1}}'
I=$SB_ID
is "$STATUS $(j .data.idle_timeout)" "201 120" "timeout 120: idle_timeout 120"
req nginx POST "/sandboxes/$N/timeout" '{"timeout":3600}'
is "$STATUS $(j .data.id) $(j .data.idle_timeout) $(j .data.status)" "200 $N 3600 ready" \
	"POST /timeout {3600}: 200, the Sandbox object with idle_timeout 3600"
is "$(sb_db "$N" "(last_activity_at > now() - interval '1 minute')::text")" true "last_activity_at is now"
for b in '{"timeout":59}' '{"timeout":86401}' '{}' '{"timeout":"1h"}' '{"timeout":600,"x":1}'; do
	req nginx POST "/sandboxes/$N/timeout" "$b"
	is "$STATUS" 400 "POST /timeout $b: 400"
done
req fcgi POST "/v1/sandboxes/$(random_id)/timeout" '{"timeout":600}'
is "$STATUS" 404 "an unknown sandbox: 404"
# aged past the default idle timeout (30 min) but within the new one (60 min)
psql_q "UPDATE sandboxes SET last_activity_at = now() - interval '40 minutes' WHERE id = '$N'" > /dev/null
psql_q "UPDATE sandboxes SET last_activity_at = now() - interval '3 minutes' WHERE id = '$I'" > /dev/null
wait_until $LIMIT sb_status_is "$I" destroyed
is "$(sb_db "$I" "status || ' ' || coalesce(destroy_reason, '-')")" "destroyed idle_ttl" \
	"idle past its timeout: destroyed, idle_ttl"
is "$(sb_db "$N" "status || ' ' || coalesce(destroy_reason, '-')")" "ready -" \
	"in the same reaper passes, the kept-alive one (40 min idle, 60 min allowed) lives on"
req nginx POST "/sandboxes/$I/timeout" '{"timeout":600}'
is "$STATUS" 400 "POST /timeout of a destroyed sandbox: 400"
like "$(j .message)" destroyed "naming the state ($(j .message))"

finish
