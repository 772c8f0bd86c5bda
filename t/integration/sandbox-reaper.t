#!/bin/bash
# test: parallel, slow
# The reaper and the node agent clean up by themselves:
#  - idle: a sandbox whose last activity is older than its idle timeout is
#    destroyed (destroy_reason idle_ttl), and nothing is left on the node;
#  - lifetime: past expires_at -> destroyed (max_lifetime);
#  - a record stuck in 'starting' (created an hour ago) becomes failed with a
#    reason;
#  - orphans: a running sandbox whose record vanished, and a half-made
#    leftover (a directory with a loop-mounted disk, no record, no container),
#    are removed within two reaper intervals (independent listing);
#  - a sentry killed from outside (kill -9): the record becomes failed with a
#    reason, its remains go, and another sandbox is unaffected.
# Records are aged with psql: the reaper is tested on the real clock.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, mount, losetup" runsc jq losetup mkfs.ext4 mount
require_stack

REAPER_INTERVAL=$(conf_get reaper_interval)
: "${REAPER_INTERVAL:=10}"
# Two passes of the reaper (or of the node agent's orphan pass), plus the
# destroy itself.
LIMIT=$((2 * REAPER_INTERVAL + 10))

STRAY=""
cleanup_stray() {
	[ -n "$STRAY" ] || return 0
	local d=$SB_STATE/sandboxes/$STRAY l
	mountpoint -q "$d/disk" 2> /dev/null && umount -l "$d/disk"
	for l in $(sb_loops_of "$d/"); do losetup -d "/dev/$l" 2> /dev/null; done
	[ -d "$d" ] && rm -rf --one-file-system "$d"
}
t_on_exit sb_cleanup cleanup_stray

fresh_org it-reaper

# expired ID REASON WHAT: after the record was aged, the reaper destroys it.
expired() {
	local id=$1 why=$2 what=$3 t0=$SECONDS
	wait_until $LIMIT sb_status_is "$id" destroyed
	is "$(sb_db "$id" "status || ' ' || coalesce(destroy_reason, '-') || ' ' || (destroyed_at IS NOT NULL)::text")" \
		"destroyed $why true" "$what: the reaper destroyed it within $LIMIT s ($((SECONDS - t0)) s), reason $why, destroyed_at set"
	wait_until 15 sb_gone "$id"
	is "$(sb_leftovers "$id")" "" "$what: nothing left on the node (independent listing)"
	req nginx GET "/sandboxes/$id"
	is "$STATUS $(j .data.status) $(j .data.destroy_reason)" "200 destroyed $why" "$what: GET shows destroyed, $why"
}

# ---- idle ----------------------------------------------------------------------
T_SECTION=idle
sb_create nginx '{"name":"it-reap-idle","specs":{"memory":256,"disk":1}}'
ID1=$SB_ID
is "$STATUS $(j .data.status) $(j .data.idle_timeout)" "201 ready 1800" "create: ready, idle timeout 1800 s"
psql_q "UPDATE sandboxes SET last_activity_at = now() - interval '2 hours' WHERE id = '$ID1'" > /dev/null
expired "$ID1" idle_ttl "idle 2 h"

# ---- lifetime ------------------------------------------------------------------
T_SECTION=lifetime
sb_create nginx '{"name":"it-reap-life","specs":{"memory":256,"disk":1}}'
ID2=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "create: ready"
psql_q "UPDATE sandboxes SET expires_at = now() - interval '1 minute' WHERE id = '$ID2'" > /dev/null
expired "$ID2" max_lifetime "past expires_at"

# ---- stuck in starting ---------------------------------------------------------
T_SECTION=stuck
ID3=$(random_id)
# (its status read back by the INSERT itself: the reaper, every 2 s on the
# test stack, may fail it before a second query could look)
st3=$(psql_q "INSERT INTO sandboxes (id, org_id, name, template, region, cpu, memory_mb, disk_gb, idle_timeout_s,
	expires_at, created_at, request_id) VALUES ('$ID3', '$ORG', 'it-reap-stuck', 'debian-12', 'local', 1000, 256, 1,
	1800, now() + interval '1 day', now() - interval '1 hour', 'it-reap-stuck') RETURNING status" | head -n1)
is "$st3" starting "a record inserted as starting, created an hour ago"
sb_track "$ID3"
wait_until $LIMIT sb_status_is "$ID3" failed
is "$(sb_db "$ID3" status)" failed "the reaper marks it failed within $LIMIT s"
like "$(sb_db "$ID3" "coalesce(failure_reason, '')")" '.' "with a failure_reason ($(sb_db "$ID3" failure_reason))"
is "$(sb_leftovers "$ID3")" "" "nothing of it on the node"

# ---- orphans: a running sandbox without a record ---------------------------------
T_SECTION=orphan
sb_create nginx '{"name":"it-reap-orphan","specs":{"memory":256,"disk":1}}'
ID4=$SB_ID
is "$STATUS $(sb_missing "$ID4")" "201 " "create: 201, complete on the node"
psql_q "DELETE FROM sandboxes WHERE id = '$ID4'" > /dev/null
is "$(psql_q "SELECT count(*) FROM sandboxes WHERE id = '$ID4'")" 0 "its record is deleted behind the product's back"
t0=$SECONDS
wait_until $LIMIT sb_gone "$ID4"
is "$(sb_leftovers "$ID4")" "" "the node removes the sandbox no record owns within $LIMIT s ($((SECONDS - t0)) s)"

# ---- orphans: half-made leftovers, no record, no container -------------------------
# Made beside the sandboxes' directory and moved in whole: the node's orphan
# pass (every 2 s here) may run while it is being made, and would remove a
# half-made one before the test looked at it.
STRAY=$(random_id)
mk=$SB_STATE/.it-stray-$STRAY
d=$SB_STATE/sandboxes/$STRAY
mkdir -p "$mk/disk" && truncate -s 64M "$mk/disk.img" && mkfs.ext4 -q -F "$mk/disk.img" &&
	mount -o loop,nosuid,nodev "$mk/disk.img" "$mk/disk"
ok "[ -n \"\$(sb_loops_of '$mk/')\" ] && mountpoint -q '$mk/disk' && mv '$mk' '$d'" \
	"a stray directory with a loop-mounted disk image and no record (like a crash between mount and runsc)"
t0=$SECONDS
wait_until $LIMIT sb_gone "$STRAY"
is "$(sb_leftovers "$STRAY")" "" "the node removes it (mount, loop device, directory) within $LIMIT s ($((SECONDS - t0)) s)"

# ---- a sentry killed from outside -----------------------------------------------
T_SECTION=sentry
sb_create nginx '{"name":"it-reap-victim","specs":{"memory":256,"disk":1}}'
ID5=$SB_ID
st5=$STATUS
sb_create nginx '{"name":"it-reap-neighbour","specs":{"memory":256,"disk":1}}'
ID6=$SB_ID
is "$st5 $STATUS" "201 201" "two sandboxes: a victim and a neighbour"
pid=$(sb_runsc state "$(sb_place "$ID5")" | jq -r '.pid // empty')
like "$pid $(tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null | cut -c1-13)" '^[0-9]+ runsc-sandbox$' \
	"runsc state gives the victim's sentry pid ($pid)"
kill -KILL "$pid"
t0=$SECONDS
wait_until 20 sb_status_is "$ID5" failed
is "$(sb_db "$ID5" status)" failed "the record becomes failed ($((SECONDS - t0)) s)"
like "$(sb_db "$ID5" "coalesce(failure_reason, '')")" '.' "with a failure_reason ($(sb_db "$ID5" failure_reason))"
wait_until $LIMIT sb_gone "$ID5"
is "$(sb_leftovers "$ID5")" "" "the dead sandbox's remains are removed (independent listing)"
is "$(sb_exec "$ID6" 'echo unaffected')" unaffected "the neighbour still runs commands"
req nginx GET "/sandboxes/$ID6"
is "$STATUS $(j .data.status)" "200 ready" "the neighbour is still ready"
req nginx DELETE "/sandboxes/$ID5"
is "$STATUS $(sb_db "$ID5" status)" "204 destroyed" "DELETE of the failed one: 204, destroyed"

finish
