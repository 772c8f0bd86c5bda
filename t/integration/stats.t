#!/bin/bash
# test: parallel
# GET /sandboxes/{id}/stats (API.md "Sandboxes", issue 15): a sandbox's
# resource use, in the compatible shape ({average:{memory, cpu, network},
# replicaCount:1, results:[{date, memory, cpu, network}], responseTime:null})
# plus the extension `current` (now, in bytes, with the limits). What a
# user sees:
#  - the limits are the create's specs (memory 512 MB, disk 2 GB, cpu 1000 =
#    one core);
#  - memory in use rises by about 100 MB while a process inside holds 100 MB;
#  - CPU time rises after a 5 s busy loop, and a point of the series shows
#    the sandbox busy;
#  - disk in use rises by about 200 MB after a 200 MB file is written;
#  - results are RFC 3339 dates in order, at most about 250 of them;
#    hoursAgo other than an integer 1..720 is a 400;
#  - another organisation's sandbox, or an unknown one, is a 404; a paused
#    sandbox is a 400 naming its state, and after the resume its stats are
#    there again;
#  - the samples are kept in Postgres (sandbox_stats): the node agent writes
#    them (that the series survives a restart of the agent is relay-restart.t's:
#    this file runs beside others, so it kills no daemon);
#  - hoursAgo reads Postgres: samples moved 3 hours back (behind the API's
#    back: their time only) are in hoursAgo=4's series, not in hoursAgo=1's;
#  - retention: a sample older than stats_retention_hours is deleted by the
#    reaper, the younger ones stay.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq
require_stack
t_on_exit sb_cleanup

RFC3339='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$'
MB=1048576

fresh_org it-stats
OTHER_AUTH="Authorization: Bearer $(new_key "$(new_org it-stats-other)")"

stats() { req nginx GET "/sandboxes/$1/stats${2:-}"; }
cur() { j ".data.current.$1"; }
# mem_above ID BYTES: the memory in use exceeds BYTES (for wait_until)
mem_above() { stats "$1" && [ "$STATUS" = 200 ] && [ "$(cur memUsed)" -gt "$2" ]; }
disk_above() { stats "$1" && [ "$STATUS" = 200 ] && [ "$(cur diskUsed)" -gt "$2" ]; }

sb_create nginx '{"name":"it-stats","specs":{"cpu":1000,"memory":512,"disk":2}}'
ID=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "a sandbox of 1 core, 512 MB, 2 GB"

# ---- the shape ----------------------------------------------------------------------
T_SECTION=shape
stats "$ID"
is "$STATUS" 200 "GET /sandboxes/{id}/stats: 200"
is "$(j -c '.data | [.replicaCount, .responseTime, (.results | type)]')" '[1,null,"array"]' \
	"replicaCount 1, responseTime null, results an array"
is "$(j -c '.data.average | [(.memory.totalInPercentage, .memory.size, .cpu.totalInPercentage, .cpu.size, .network.bytesPerSecond) | type] | unique')" \
	'["number"]' "average.memory/cpu {totalInPercentage, size} and network.bytesPerSecond are numbers"
is "$(cur memTotal) $(cur diskTotal) $(cur cpuCount)" "$((512 * MB)) $((2 * 1024 * MB)) 1" \
	"the limits are the specs: memory 512 MB, disk 2 GB, one core"
like "$(cur memUsed)" '^[0-9]+$' "memory in use: $(($(cur memUsed) / MB)) MB"
ok "[ $(j '.data.results | length') -ge 1 ]" "asked at once after the create: a point already (the mean since the start)"
like "$(cur diskUsed)" '^[0-9]+$' "disk in use: $(($(cur diskUsed) / MB)) MB"
like "$(cur pids) $(cur timestamp)" "^[0-9]+ [0-9T:.-]+Z$" "host tasks ($(cur pids)) and the time of the reading"

# ---- memory ---------------------------------------------------------------------------
T_SECTION=memory
mem0=$(cur memUsed)
hold='exec python3 -c '"'"'import time; b = b"x" * (100 << 20); open("/tmp/held", "w").close(); time.sleep(600)'"'"
exec_post "$ID" "$hold" '"background":true'
is "$STATUS" 200 "a process that holds 100 MB"
PID=$(j .data.pid)
wait_until 60 test -e "$SB_STATE/sandboxes/$(sb_place "$ID")/disk/tmp/held"
wait_until 30 mem_above "$ID" $((mem0 + 90 * MB))
ok $? "memory in use rises by 100 MB ($((mem0 / MB)) -> $(($(cur memUsed) / MB)) MB)"
last=$(j '.data.results[-1].memory')
ok "[ \"\$(jq -n '$last > $((mem0 / MB)) + 90')\" = true ]" "the last point, the reading now, says so too ($last MB)"
like "$(j .data.average.memory.totalInPercentage)" '^[0-9.]+$' "average memory: $(j .data.average.memory.size) MB, $(j .data.average.memory.totalInPercentage) %"
req nginx POST "/sandboxes/$ID/processes/$PID/signal" '{"signal":"KILL"}'

# ---- CPU ------------------------------------------------------------------------------
T_SECTION=cpu
stats "$ID"
cpu0=$(cur cpuSeconds)
sexec "$ID" 'timeout 5 sh -c "while :; do :; done"; echo done'
is "$OUT" done "a 5 s busy loop"
stats "$ID"
cpu1=$(cur cpuSeconds)
ok "[ \"\$(jq -n '$cpu1 - $cpu0 >= 1')\" = true ]" "CPU time used rises by more than a second ($cpu0 -> $cpu1 s)"
peak=$(j '[.data.results[].cpu] | max')
ok "[ \"\$(jq -n '$peak >= 10')\" = true ]" "a point of the series shows it busy (peak $peak % of its core)"
ok "[ \"\$(jq -n '$(j .data.average.cpu.totalInPercentage) > 0')\" = true ]" \
	"the average CPU is above 0 ($(j .data.average.cpu.totalInPercentage) %, $(j .data.average.cpu.size) cores)"

# ---- disk -----------------------------------------------------------------------------
T_SECTION=disk
d0=$(cur diskUsed)
sexec "$ID" 'dd if=/dev/urandom of=/root/big bs=1M count=200 2>/dev/null && sync && echo written'
is "$OUT" written "a 200 MB file written"
wait_until 30 disk_above "$ID" $((d0 + 190 * MB))
ok $? "disk in use rises by 200 MB ($((d0 / MB)) -> $(($(cur diskUsed) / MB)) MB of $(($(cur diskTotal) / MB)))"

# ---- the series and the window --------------------------------------------------------------
T_SECTION=series
stats "$ID" "?hoursAgo=24"
is "$STATUS" 200 "hoursAgo=24: 200"
n=$(j '.data.results | length')
ok "[ $n -ge 1 ] && [ $n -le 250 ]" "between 1 and 250 points ($n)"
is "$(j --arg re "$RFC3339" '[.data.results[].date | test($re)] | all')" true "each point's date is RFC 3339 UTC"
is "$(j -r '[.data.results[].date] | . == sort')" true "in order"
for q in 0 721 abc -1 1.5; do
	stats "$ID" "?hoursAgo=$q"
	is "$STATUS" 400 "hoursAgo=$q: 400 ($(j .message))"
done

# ---- who may ask ----------------------------------------------------------------------------
T_SECTION=access
REQ_AUTH=$OTHER_AUTH stats "$ID"
is "$STATUS" 404 "another organisation's sandbox: 404"
stats "$(random_id)"
is "$STATUS" 404 "an unknown sandbox: 404"
stats 0123
is "$STATUS" 400 "a malformed id: 400"

# ---- paused ---------------------------------------------------------------------------------
T_SECTION=paused
req nginx POST "/sandboxes/$ID/pause"
is "$STATUS" 200 "pause"
req nginx GET "/sandboxes/$ID/wait?timeout=60"
is "$(j .data.status)" paused "paused"
stats "$ID"
is "$STATUS" 400 "stats of a paused sandbox: 400"
like "$(j .message)" paused "naming its state ($(j .message))"
req nginx POST "/sandboxes/$ID/resume"
req nginx GET "/sandboxes/$ID/wait?timeout=60"
is "$(j .data.status)" ready "resumed"
stats "$ID"
is "$STATUS $(cur memTotal)" "200 $((512 * MB))" "stats again after the resume, the same limits"
ok "[ $(j '[.data.results[] | select(.cpu >= 0 and .memory > 0)] | length') -ge 2 ]" \
	"the series goes on across the pause: points from before it and after ($(j '.data.results | length'))"

# ---- kept in Postgres -----------------------------------------------------------------------
T_SECTION=postgres
rows() { psql_q "SELECT count(*) FROM sandbox_stats WHERE sandbox_id = '$ID' $1"; }
rows_at_least() { [ "$(rows "$2")" -ge "$1" ]; }
wait_until 60 rows_at_least 3
ok $? "the node agent's samples are in Postgres ($(rows) rows in sandbox_stats)"
# one query: the node agent may insert a sample between two
is "$(psql_q "SELECT count(*) FILTER (WHERE NOT (mem_bytes > 0 AND cpu_usec >= 0)) || ' of ' || (count(*) > 0)::text
	FROM sandbox_stats WHERE sandbox_id = '$ID'")" "0 of true" "each with its memory and CPU time"

# ---- hoursAgo reads Postgres ---------------------------------------------------------------
T_SECTION=window
psql_q "UPDATE sandbox_stats SET t = t - interval '3 hours' WHERE sandbox_id = '$ID' AND t IN
	(SELECT t FROM sandbox_stats WHERE sandbox_id = '$ID' ORDER BY t LIMIT 3)" > /dev/null
cut2=$(date -u -d '-2 hours' +%Y-%m-%dT%H:%M:%S.000Z)
stats "$ID" "?hoursAgo=1"
is "$STATUS $(j --arg c "$cut2" '[.data.results[] | select(.date < $c)] | length')" "200 0" \
	"hoursAgo=1: no point from 3 hours ago"
stats "$ID" "?hoursAgo=4"
n3=$(j --arg c "$cut2" '[.data.results[] | select(.date < $c)] | length')
ok "[ '${n3:-0}' -ge 2 ]" "hoursAgo=4: the samples of 3 hours ago are there ($n3 points; the first is their baseline)"
is "$(j -r '[.data.results[].date] | . == sort')" true "in order"

# ---- retention -----------------------------------------------------------------------------------
T_SECTION=retention
RET=$(conf_get stats_retention_hours)
: "${RET:=168}"
# (the UPDATE itself says what it moved: the reaper, every 2 s on the test
# stack, may delete the sample before another query could look)
moved=$(psql_q "UPDATE sandbox_stats SET t = t - make_interval(hours => $RET) WHERE sandbox_id = '$ID' AND t IN
	(SELECT t FROM sandbox_stats WHERE sandbox_id = '$ID' ORDER BY t LIMIT 1)
	RETURNING t < now() - make_interval(hours => $RET)" | head -n1)
old_gone() { [ "$(rows "AND t < now() - make_interval(hours => $RET)")" = 0 ]; }
is "$moved" t "a sample dated past stats_retention_hours ($RET h)"
wait_until 60 old_gone
ok $? "the reaper deletes it"
ok "[ $(rows "AND t < now() - interval '2 hours'") -ge 2 ]" "the younger ones stay ($(rows) rows)"

finish
