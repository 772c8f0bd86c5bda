#!/bin/bash
# test: any stack
# Limits, made to bite for real:
#  - a memory bomb in a 256 MB sandbox: the process is killed (or the
#    sandbox dies), the record then says so (failed with a reason about
#    memory, or oom_kills >= 1), and a second sandbox made before it still
#    runs commands;
#  - disk: writing 2 GB into a 1 GB sandbox fails with ENOSPC inside, and
#    what the sandbox holds on the host grows by less than ~1.2 GB;
#  - an organisation's limits (sbx-admin org limits): the third concurrent
#    sandbox and a sandbox over the memory limit answer 403 naming the limit,
#    and write nothing;
#  - a node without room (node_max_sandboxes, reloaded with SIGHUP) answers
#    503 "no capacity" and keeps the record as failed. The setting is
#    removed and the worker reloaded again at the end, whatever happens.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, the stack's config and worker" runsc jq du
require_stack

CONF_MARK="# added by t/integration/sandbox-limits.t (removed by its clean-up)"
CONF_TOUCHED=0
t_on_exit sb_cleanup restore_conf


fresh_org it-limits
count_org() { psql_q "SELECT count(*) FROM sandboxes WHERE org_id = '$ORG'"; }

# ---- memory bomb -------------------------------------------------------------
T_SECTION=memory
sb_create nginx '{"name":"it-bomb-a","specs":{"memory":256,"disk":1}}'
A=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "sandbox A (256 MB): 201 ready"
sb_create nginx '{"name":"it-bomb-b","specs":{"memory":256,"disk":1}}'
B=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "sandbox B (256 MB), made before the bomb: 201 ready"
is "$(sb_exec "$B" 'echo before')" before "B runs a command before the bomb"

t0=$SECONDS
out=$(SB_EXEC_TIMEOUT=60 sb_exec "$A" 'python3 -c "$(printf "b=[]\nwhile True: b.append(bytearray(50*2**20))")"; echo "exit=$?"')
rc=$?
diag "bomb: runsc exec exit $rc after $((SECONDS - t0)) s; output: $(tail -c 300 <<< "$out")"
ok "[ $rc != 124 ] && [ $rc != 137 ]" "the bomb does not run forever: runsc exec ends (exit $rc), not by the 60 s timeout"
alive=$(sb_runsc_state "$A")
if [ "$alive" = running ] && [[ $out =~ exit=([0-9]+) ]]; then
	like "${BASH_REMATCH[1]}" '^(137|9|1)$' "inside, python3 was killed (exit ${BASH_REMATCH[1]}: 137 = SIGKILL)"
else
	ok 0 "(the sandbox itself died: runsc state '${alive:-unknown}')"
fi
# What the owner sees: failed with a reason about memory, or oom_kills >= 1.
sb_says_oom() {
	req nginx GET "/sandboxes/$A"
	[[ $(j .data.oom_kills) =~ ^[1-9][0-9]*$ ]] ||
		{ [ "$(j .data.status)" = failed ] && [[ $(j .data.failure_reason) =~ [Mm]emory ]]; }
}
wait_until 20 sb_says_oom
req nginx GET "/sandboxes/$A"
diag "A: status $(j .data.status), oom_kills $(j .data.oom_kills), failure_reason $(j .data.failure_reason)"
ok sb_says_oom "GET A reports it: oom_kills >= 1, or failed with a reason about memory (within 20 s)"
is "$(sb_exec "$B" 'echo still here')" "still here" "B still runs commands after A's bomb"
req nginx GET "/sandboxes/$B"
is "$(j .data.status) $(j .data.oom_kills)" "ready 0" "B: still ready, no OOM kill counted against it"

# ---- disk --------------------------------------------------------------------
T_SECTION=disk
sb_create nginx '{"name":"it-disk","specs":{"memory":512,"disk":1}}'
C=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "sandbox with specs.disk 1: 201 ready"
# what the sandbox holds on the host, all of it (its directory: disk image,
# rootfs, logs; -x: the disk image once, not again through its mount), not
# the free space of the filesystem (df), which the other stacks' files and
# the parallel files change at the same time (a CI run saw it drop by
# 1417 MB while this sandbox held 1 GiB)
held_kb() { dir_kb "$SB_STATE/sandboxes/$(sb_place "$C")"; }
held_before=$(held_kb)
out=$(SB_EXEC_TIMEOUT=240 sb_exec "$C" 'dd if=/dev/zero of=/big bs=1M count=2048 2>&1; echo "exit=$?"; sync; ls -l /big')
held_after=$(held_kb)
diag "dd: $(tr '\n' '|' <<< "$out" | tail -c 400)"
like "$out" 'No space left on device' "writing 2 GB into 1 GB: 'No space left on device' inside"
like "$out" 'exit=[1-9]' "dd fails"
img_kb=$(du -k "$SB_STATE/sandboxes/$(sb_place "$C")/disk.img" 2> /dev/null | awk '{print $1}')
ok "[ -n '$img_kb' ] && [ '$img_kb' -le $((1024 * 1024 * 105 / 100)) ]" \
	"the sandbox's disk image holds at most its 1 GiB on the host (du: ${img_kb:-?} kB)"
grew=$(((${held_after:-9999999} - ${held_before:-0}) / 1024))
ok "[ -n '$held_after' ] && [ $grew -lt 1230 ]" "the sandbox's files on the host (du of its directory) grew by less than 1.2 GB ($grew MB)"
is "$(sb_exec "$C" 'echo ok')" ok "the full sandbox still runs commands"
req nginx DELETE "/sandboxes/$C"
is "$STATUS $(sb_leftovers "$C")" "204 " "its DELETE leaves nothing (the disk image is gone)"
for x in "$A" "$B"; do req nginx DELETE "/sandboxes/$x" > /dev/null; done

# ---- organisation limits -------------------------------------------------------
T_SECTION=org
admin org limits "$ORG" --max-sandboxes 2 > "$T_TMP/admin.out" 2>&1
ok $? "sbx-admin org limits --max-sandboxes 2"
sb_create nginx '{"name":"it-lim-1","specs":{"memory":256}}'
L1=$SB_ID
st1=$STATUS
sb_create nginx '{"name":"it-lim-2","specs":{"memory":256}}'
L2=$SB_ID
is "$st1 $STATUS" "201 201" "two concurrent sandboxes: 201 201"
before=$(count_org)
runsc_before=$(sb_runsc list -quiet)
req nginx POST /sandboxes '{"name":"it-lim-3","specs":{"memory":256}}'
is "$STATUS" 403 "the third concurrent create: 403"
error_shape '[Ll]imit.*\b2\b' "the third concurrent create names the limit (2)"
is "$(count_org)" "$before" "the third create wrote no record"
is "$(sb_new_of_org "$runsc_before" "$ORG")" "" "the third create made no container (runsc list)"
req nginx DELETE "/sandboxes/$L1"
req nginx POST /sandboxes '{"name":"it-lim-3b","specs":{"memory":256}}'
sb_track "$(j '.data.id // empty')"
is "$STATUS" 201 "after one DELETE there is room again: 201"
L3=$(j .data.id)
for x in "$L2" "$L3"; do req nginx DELETE "/sandboxes/$x" > /dev/null; done

admin org limits "$ORG" --max-sandboxes 10 --max-memory-mb 300 > "$T_TMP/admin.out" 2>&1
ok $? "sbx-admin org limits --max-memory-mb 300"
before=$(count_org)
req nginx POST /sandboxes '{"name":"it-lim-mem","specs":{"memory":512}}'
is "$STATUS" 403 "specs.memory 512 over a 300 MB limit: 403"
error_shape '[Mm]emory.*300' "the memory refusal names the limit (300 MB)"
is "$(count_org)" "$before" "and writes no record"
sb_create nginx '{"name":"it-lim-mem-ok","specs":{"memory":300}}'
is "$STATUS" 201 "specs.memory 300 at the limit: 201"
req nginx DELETE "/sandboxes/$SB_ID" > /dev/null

# ---- a node without room --------------------------------------------------------
T_SECTION=node
# Sandboxes other tests keep (live records of this node) count too: the
# node gets room for exactly one more.
NODE=$(psql_q "SELECT id FROM nodes ORDER BY heartbeat_at DESC LIMIT 1")
wait_until 20 sb_gone "$SB_ID"
K=$(psql_q "SELECT count(*) FROM sandboxes WHERE node_id = '$NODE' AND status IN ('ready', 'pausing', 'paused', 'resuming', 'starting')")
diag "node $NODE runs $K sandboxes of other tests; node_max_sandboxes = $((K + 1))"
mark=$(log_mark)
old_node=$(worker_pid node)
cp -p "$SBX_CONF" "$T_TMP/conf.orig"
printf '%s\nnode_max_sandboxes = %d\n' "$CONF_MARK" $((K + 1)) >> "$SBX_CONF"
CONF_TOUCHED=1
kill -HUP "$(worker_master)"
wait_until 30 node_agent_ready_since "$mark"
ok $? "SIGHUP: the master replaced the node agent (pid $old_node -> $(worker_pid node)) and it consumes (log)"
sb_create nginx '{"name":"it-room-1","specs":{"memory":256}}'
N1=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "with room for one: the first create is 201 ready"
sb_create nginx '{"name":"it-room-2","specs":{"memory":256}}'
N2=$(j '.data.id // empty')
sb_track "$N2"
is "$STATUS" 503 "the node is full: the second create answers 503"
error_shape '[Nn]o capacity' "the 503 says the node has no capacity"
is "$(sb_db "$N2" "status || ' ' || (failure_reason ~* 'capacity')::text")" "failed true" \
	"its record is failed, with the reason"
is "$(sb_leftovers "$N2")" "" "nothing of the refused sandbox on the node"
is "$(sb_exec "$N1" 'echo fine')" fine "the sandbox that fits still runs"
req nginx DELETE "/sandboxes/$N1" > /dev/null

restore_conf
cmp -s "$SBX_CONF" "$T_TMP/conf.orig"
ok $? "the config file is back as it was"
sb_create nginx '{"name":"it-room-3","specs":{"memory":256}}'
is "$STATUS $(j .data.status)" "201 ready" "after restoring the config (SIGHUP) creates work again"
req nginx DELETE "/sandboxes/$SB_ID" > /dev/null

finish
