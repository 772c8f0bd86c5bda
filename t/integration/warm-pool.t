#!/bin/bash
# test: any stack, heavy
# The warm pool (issue 10, workers/pool.c): the node keeps warm_pool_size
# sandboxes of each template started ahead with the default specs, listed
# in the warm_pool table; no record points at them. On a stack without a
# pool (scripts/test's extra stacks) it sets warm_pool_size = 2 for its
# length (SIGHUP), and takes it away again at the end.
#  - a create that matches (default template and specs) is handed a member:
#    its record points at a placement that existed before the create, and
#    that member leaves the pool; the pool refills;
#  - a create that does not match (other specs) takes the cold path;
#  - a handed-out sandbox works through the API (exec with the create's env,
#    files) and no two creates ever get the same placement;
#  - destroy leaves nothing of it (independent listing), and the pool lives;
#  - a member whose sentry dies is removed and replaced (never handed out);
#  - a reload (SIGHUP) hands the waiting members to the next node agent:
#    the same placements stay members, none is started or removed, a create
#    is handed one and it works; a sandbox handed out before the reload is
#    no member again;
#  - a drain that comes after a node agent left its members to a successor
#    (the master stopped in between: deterministic) leaves none running: the
#    master starts that successor anyway, stopping, and it removes them;
#  - a node agent killed with -9: the members of its life are removed by
#    the next one, which fills a pool of its own.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, kill -9 of the node agent" runsc jq
rt_begin
rt_setup it-warm

TMPL=debian-12
pool() { psql_q "SELECT placement_id FROM warm_pool WHERE template = '$TMPL' ORDER BY placement_id"; }

# The worker's master is never left stopped (the drain below), and a pool
# size this file set is taken away again, its members gone, whatever happens.
wp_cont() { [ -z "${master:-}" ] || kill -CONT "$master" 2> /dev/null || true; }
wp_restore() {
	local left p mark
	[ "${CONF_TOUCHED:-0}" = 1 ] || return 0
	left=$(pool)
	mark=$(log_mark)
	conf_unmark "$CONF_MARK"
	sed -i "s/^$WP_OFF//" "$SBX_CONF"
	CONF_TOUCHED=0
	kill -HUP "$(worker_master)" 2> /dev/null
	wait_until 30 node_agent_ready_since "$mark"
	wp_left_gone() { for p in $left; do sb_gone "$p" || return 1; done; }
	wait_until 60 wp_left_gone
}
# (a setting given twice is refused: the stack's own line is commented out
# for the file's length, as egresslib.sh does with net_uplink_netns)
WP_OFF="#warm-pool-test-off# "
CONF_MARK="# added by t/integration/warm-pool.t (removed by its clean-up)"
CONF_TOUCHED=0
t_on_exit wp_cont rt_kill_bg sb_cleanup wp_restore

SIZE=$(conf_get warm_pool_size)
: "${SIZE:=2}"
if [ "$SIZE" -lt 2 ]; then
	# scripts/test's extra stacks run without a pool (SBX_WARM_POOL_SIZE=0)
	mark=$(log_mark)
	sed -i "s/^\([[:space:]]*warm_pool_size[[:space:]]*=\)/$WP_OFF\1/" "$SBX_CONF"
	printf '%s\nwarm_pool_size = 2\n' "$CONF_MARK" >> "$SBX_CONF"
	CONF_TOUCHED=1
	kill -HUP "$(worker_master)"
	wait_until 60 node_agent_ready_since "$mark" || bail "warm_pool_size = 2: the node agent did not come back"
	SIZE=2
fi

pool_n() { psql_q "SELECT count(*) FROM warm_pool WHERE template = '$TMPL'"; }
pool_full() { [ "$(pool_n)" -ge "$SIZE" ]; }
in_list() { [[ $'\n'$2$'\n' == *$'\n'$1$'\n'* ]]; }
PLACES=()

# ---- the pool is there, with nobody's records -----------------------------
wait_until 120 pool_full
ok $? "the node's warm pool of $TMPL fills to warm_pool_size $SIZE (warm_pool table)"
before=$(pool)
p1=$(head -n1 <<< "$before")
is "$(sb_runsc_state "$p1")" running "a member runs (runsc state of its placement)"
is "$(psql_q "SELECT count(*) FROM sandboxes WHERE placement_id IN (SELECT placement_id FROM warm_pool)")" 0 \
	"no record points at a pool member"
# idle members are frozen (idle.c) and thawed at their hand-over
all_frozen() { local p; for p in $(pool); do [ "$(sb_freezer "$p")" = FROZEN ] || return 1; done; }
wait_until 60 all_frozen
ok $? "the waiting members are frozen: their sentries use no CPU (cgroup freezer on the host)"

# ---- a matching create is handed a member --------------------------------
mark=$(log_mark)
sb_create nginx '{"name":"it-warm-1","env":{"WARM_VAR":"warm value"},"metadata":{"k":"v1"}}'
W1=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "a create with the default template and specs: 201 ready"
P1=$(sb_place "$W1")
PLACES+=("$P1")
ok "in_list '$P1' '$before'" "it was served from the pool: its placement $P1 existed before the create"
isnt "$P1" "$W1" "the placement is not the sandbox id"
is "$(psql_q "SELECT count(*) FROM warm_pool WHERE placement_id = '$P1'")" 0 "the member left the pool"
# by the node agent's log, not the freezer's state now: the idle pass may
# freeze it again idle_freeze_ms after the hand-over (2 s by default)
log_since "$mark" | grep -q "sandbox $P1: thawed ([0-9]* ms, placement $P1)"
ok $? "the member was thawed before the create's answer (the node agent logged its thaw)"
is "$(j '.data.metadata.k') $(j '.data.specs.memory')" "v1 512" "the record is the create's own (metadata, default specs)"

# ---- it works ---------------------------------------------------------------
is "$(rt_sh "$W1" 'printf "%s" "$WARM_VAR"; echo; hostname >/dev/null && echo up')" "warm value"$'\n'"up" \
	"exec through the API sees the create's env"
req nginx PUT "/sandboxes/$W1/files/tmp/warm.txt" "warm file" -H 'Content-Type: application/octet-stream'
is "$STATUS" 204 "a file upload works"
req nginx GET "/sandboxes/$W1/files/tmp/warm.txt"
is "$STATUS $BODY" "200 warm file" "and reads back"

# ---- the pool refills ---------------------------------------------------
wait_until 120 pool_full
ok $? "the pool refills to $SIZE"
ok "! in_list '$P1' '$(pool)'" "the handed-out member is not back in the pool (never reused)"

# ---- a create that does not match takes the cold path ---------------------
before=$(pool)
sb_create nginx '{"name":"it-warm-cold","specs":{"memory":256}}'
C1=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "a create with other specs: 201 ready"
PC=$(sb_place "$C1")
PLACES+=("$PC")
ok "! in_list '$PC' '$before'" "it was started cold: its placement was no pool member"
is "$(rt_sh "$C1" 'echo cold')" cold "the cold one works too"

# ---- two at once never share a placement ----------------------------------
wait_until 120 pool_full
for i in 1 2 3; do
	curl -sS --cacert "$SBX_CACERT" --max-time 90 -H "$(rt_auth)" -H 'Content-Type: application/json' \
		-d "{\"name\":\"it-warm-par-$i\"}" "$SBX_URL/sandboxes" > "$T_TMP/par.$i" 2> /dev/null &
done
wait
par=()
for i in 1 2 3; do
	id=$(jq -r '.data.id // empty' "$T_TMP/par.$i")
	sb_track "$id"
	[ -n "$id" ] && par+=("$id") && PLACES+=("$(sb_place "$id")")
done
is "${#par[@]}" 3 "three creates at once: all created"
is "$(printf '%s\n' "${PLACES[@]}" | sort -u | wc -l)" "${#PLACES[@]}" \
	"no two sandboxes share a placement (${#PLACES[@]} placements)"
is "$(psql_q "SELECT count(*) FROM (SELECT placement_id FROM sandboxes GROUP BY placement_id HAVING count(*) > 1) d")" 0 \
	"no placement is pointed at by two records"
for id in "${par[@]}"; do
	is "$(rt_sh "$id" 'test -e /tmp/warm.txt && echo seen || echo fresh')" fresh \
		"sandbox $id sees nothing of another tenant's (no /tmp/warm.txt)"
done

# ---- destroy leaves nothing ----------------------------------------------
for id in "$W1" "$C1" "${par[@]}"; do req nginx DELETE "/sandboxes/$id" > /dev/null; done
wait_until 30 sb_gone "$W1" "$C1" "${par[@]}"
is "$(sb_leftovers "$W1" "$C1" "${par[@]}")" "" \
	"DELETE: nothing of them is left (runsc, mounts, loops, netns, veth, nft, dir, cgroups, processes)"
wait_until 120 pool_full
ok $? "the pool is full again afterwards"
for p in $(pool); do
	[ "$(sb_runsc_state "$p")" = running ] || diag "member $p: not running"
done
is "$(for p in $(pool); do sb_runsc_state "$p"; done | sort -u | tr '\n' ' ')" "running " "every member runs"

# ---- a member that dies is removed and replaced ---------------------------
# while it waits frozen: the freezer (cgroup v1) holds the SIGKILL until a
# thaw, so the sentry is still there, but the node must see it as dead
DEAD=$(pool | head -n1)
frozen_p() { [ "$(sb_freezer "$1")" = FROZEN ]; }
wait_until 60 frozen_p "$DEAD"
ok $? "member $DEAD is frozen"
spid=$(cat "$SB_STATE/sandboxes/$DEAD/sandbox.pid" 2> /dev/null)
mark=$(log_mark)
ok "[ -n '$spid' ] && kill -9 '$spid'" "kill -9 of member $DEAD's sentry (pid $spid)"
# a frozen sandbox is looked at every tenth liveness pass (20 s, node_health.c),
# then torn down: 60 s is that with room for a loaded machine
wait_until 60 sb_gone "$DEAD"
is "$(sb_leftovers "$DEAD")" "" "the dead member is removed from the node" ||
	diag "$(log_since "$mark" | grep -e "$DEAD" -e "liveness pass" -e "node pass" | tail -n 5 | cut -c1-300)"
ok "! in_list '$DEAD' '$(pool)'" "and from the pool listing"
wait_until 120 pool_full
ok $? "a new member replaces it"

# ---- a reload hands the members to the next node agent -------------------
wait_until 120 pool_full
sb_create nginx '{"name":"it-warm-before-hup"}'
H1=$SB_ID
HP=$(sb_place "$H1")
is "$STATUS $(j .data.status)" "201 ready" "a create before the reload: 201 ready"
wait_until 120 pool_full
old=$(pool)
ok "! in_list '$HP' '$old'" "its placement $HP is no member"
node=$(worker_pid node)
mark=$(log_mark)
ok "kill -HUP '$(worker_master)'" "SIGHUP to the worker's master (a reload, settings unchanged)"
new_node() { local p; p=$(worker_pid node) && [ "$p" != "$node" ] && node_consuming_since "$mark"; }
wait_until 60 new_node
ok $? "a new node agent runs and consumes (pid $(worker_pid node), was $node)"
is "$(log_since "$mark" | grep -c 'warm pool: [0-9]* members\? left running for the next node agent')" 1 \
	"the old agent left its members running for the next one"
like "$(log_since "$mark" | grep 'taken over from the node agent before')" "warm pool: $SIZE members taken over" \
	"the new agent took all $SIZE over"
is "$(pool)" "$old" "the pool lists the same placements"
is "$(log_since "$mark" | grep -c 'warm pool: starting placement\|warm pool: removing placement')" 0 \
	"no member was started or removed for the reload"
is "$(for p in $old; do sb_runsc_state "$p"; done | sort -u | tr '\n' ' ')" "running " "the members still run"
is "$(for p in $old; do [ -e "$SB_STATE/sandboxes/$p/pool-handover" ] && echo "$p"; done)" "" \
	"the hand-over marks are consumed"
ok "! in_list '$HP' '$(pool)'" "the sandbox handed out before the reload is no member now"
is "$(rt_sh "$H1" 'echo still mine')" "still mine" "and it still answers its own record's exec"
sb_create nginx '{"name":"it-warm-after-hup","env":{"AFTER":"hup"}}'
A1=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "a create after the reload: 201 ready"
ok "in_list '$(sb_place "$A1")' '$old'" "it was handed a member taken over"
is "$(rt_sh "$A1" 'printf "%s" "$AFTER"')" hup "exec works in it, with the create's env"
for id in "$H1" "$A1"; do req nginx DELETE "/sandboxes/$id" > /dev/null; done
wait_until 30 sb_gone "$H1" "$A1"
is "$(sb_leftovers "$H1" "$A1")" "" "both destroyed: nothing of them is left"

# ---- a drain after the members were left to a successor ------------------
# The master is stopped while the node agent hands over (SIGUSR1 is what a
# reload sends it), so the drain comes before any successor ran.
wait_until 120 pool_full
old=$(pool)
master=$(worker_master)
node=$(worker_pid node)
mark=$(log_mark)
ok "[ -n '$master' ] && [ -n '$node' ] && kill -STOP '$master'" "the worker's master is stopped (SIGSTOP)"
ok "kill -USR1 '$node'" "the node agent is told a reload replaces it (SIGUSR1)"
wait_until 60 dead "$node"
ok $? "it exits"
is "$(for p in $old; do [ -e "$SB_STATE/sandboxes/$p/pool-handover" ] && echo "$p"; done | sort | tr '\n' ' ')" \
	"$(sort <<< "$old" | tr '\n' ' ')" "it marked every member as left for its successor"
kill -TERM "$master"
kill -CONT "$master"
wait_until 90 dead "$master"
ok $? "SIGTERM (a drain), then SIGCONT: the master drains and exits"
dead "$master" && master="" # its pid may name another process later
like "$(log_since "$mark" | grep 'started node #0')" 'stopping at once' \
	"the master started a successor in the drain, stopping at once"
old_gone() { local p; for p in $old; do sb_gone "$p" || return 1; done; }
wait_until 30 old_gone
is "$(for p in $old; do sb_leftovers "$p"; done | tr -s ' \n' ' ' | sed 's/ $//')" "" \
	"the members it was left are removed: nothing of them runs (independent listing)"
is "$(psql_q "SELECT count(*) FROM warm_pool")" 0 "and none is listed"
ok "sbx_worker_start > '$T_TMP/worker-start.log' 2>&1" "the worker starts again"
wait_until 120 pool_full
ok $? "and fills a pool"

# ---- a killed node agent's members do not outlive it --------------------
old=$(pool)
node=$(worker_pid node)
mark=$(log_mark)
ok "[ -n '$node' ] && kill -9 '$node'" "kill -9 of the node agent (pid $node)"
wait_until 60 node_consuming_since "$mark"
ok $? "the master restarted it and it consumes again"
old_gone() { local p; for p in $old; do sb_gone "$p" || return 1; done; }
wait_until 60 old_gone
is "$(for p in $old; do sb_leftovers "$p"; done | tr -s ' \n' ' ' | sed 's/ $//')" "" \
	"the members of its previous life are removed (independent listing)"
wait_until 120 pool_full
ok $? "the new agent fills a pool of its own"
ok "! in_list '$(pool | head -n1)' '$old'" "with new members"

finish
