#!/bin/bash
# test: parallel
# Usage metering and the monthly spending limit (issue 15): GET /usage counts
# an organisation's sandbox time (exactly its life inside the window), by
# size, its execs, the cost at the operator's prices; never another
# organisation's; windows are checked; sbx-admin usage says the same; a
# spending limit that is reached stops new creates with a 403 naming it while
# what runs keeps running.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq
rt_begin
T=$T_TMP

rt_setup it-usage
ORG1=$RT_ORG
plan 17

req nginx GET /usage
is "$STATUS|$(j .data.sandboxes.count)|$(j .data.execs.count)|$(j .data.cost_cents)" "200|0|0|0" \
	"a new organisation has used nothing (200)"
like "$(j .data.from)" "^$(date -u +%Y-%m)-01T00:00:00.000Z$" "the default window starts at this month's start (UTC)"

rt_new it-usage-a
A=$RT_ID
rt_sh "$A" true > /dev/null
rt_sh "$A" "echo hi" > /dev/null
# The node agent writes an exec's record after it answered (execlog.c, off
# its loop): what is guaranteed is that both are counted soon, not at once.
counted() { req nginx GET /usage && [ "$(j .data.sandboxes.count)|$(j .data.execs.count)" = "1|2" ]; }
wait_until 15 counted
is "$(j .data.sandboxes.count)|$(j .data.execs.count)" "1|2" "one sandbox, two execs are counted"
cpu=$(sb_db "$A" cpu)
is "$(j '.data.sandboxes.by_size | map("\(.cpu)/\(.memory_mb)/\(.sandboxes)") | join(",")')" "$cpu/256/1" \
	"by size: the sandbox's cpu and 256 MB"
ok "[ \"\$(jq -r '.data.sandboxes.seconds > 0 and .data.cost_cents > 0' <<< '$BODY')\" = true ]" \
	"its time so far is counted and costs something"

# Another organisation's sandbox is never in this one's usage.
KEY1=$REQ_AUTH
rt_setup it-usage-other
rt_new it-usage-b
B=$RT_ID
export REQ_AUTH=$KEY1
req nginx GET /usage
is "$(j .data.sandboxes.count)" 1 "another organisation's sandbox is not counted"

# Exactly the sandbox's life once it is destroyed: creation to destruction.
req nginx DELETE "/sandboxes/$A"
wait_until 30 sb_status_is "$A" destroyed
life=$(psql_q "SELECT round(extract(epoch FROM destroyed_at - created_at)::numeric, 3) FROM sandboxes WHERE id = '$A'")
to=$(psql_q "SELECT sbx_time(destroyed_at + interval '1 hour') FROM sandboxes WHERE id = '$A'")
req nginx GET "/usage?to=$to"
is "$(j .data.sandboxes.seconds)" "$(printf '%s' "$life" | sed 's/0*$//; s/\.$//')" \
	"after destroy: exactly its life (${life}s), nothing after it"
expect=$(psql_q "SELECT round(((e * $cpu / 1000.0 * 5040 + e * 256 / 1024.0 * 1620) / 3600.0 / 1000.0)::numeric, 4)
	FROM (SELECT extract(epoch FROM destroyed_at - created_at)::float8 e FROM sandboxes WHERE id = '$A') x")
is "$(j .data.cost_cents)" "$(printf '%s' "$expect" | sed 's/0*$//; s/\.$//')" \
	"...priced at the default prices (5040 m¢/core-hour, 1620 m¢/GiB-hour): $expect ¢"
req nginx GET "/usage?from=2000-01-01&to=2000-02-01T00:00:00Z"
is "$STATUS|$(j .data.sandboxes.count)|$(j .data.execs.count)" "200|0|0" "a window before the organisation existed: nothing"
req nginx GET "/usage?from=2026-02-01&to=2026-01-01"
is "$STATUS|$(j .message)" "400|from is after to" "from after to: 400"
req nginx GET "/usage?from=last-week"
is "$STATUS|$(j .code)" "400|invalid_query" "a from that is not a time: 400 invalid_query"

adm=$(admin usage "$ORG1" --to "$to" 2> "$T/aerr")
is "$(jq -r '"\(.sandboxes.count) \(.execs.count) \(.sandboxes.seconds)"' <<< "$adm" 2> /dev/null)" \
	"1 2 $(printf '%s' "$life" | sed 's/0*$//; s/\.$//')" "sbx-admin usage says the same as GET /usage"

# The spending limit: reached, creates stop; what runs keeps running.
rt_new it-usage-c
C=$RT_ID
admin org limits "$ORG1" --monthly-spend-limit-cents 0 > /dev/null 2>&1
sb_create nginx '{"name":"it-usage-d","specs":{"memory":256,"disk":1}}'
is "$STATUS|$(j .code)" "403|limit_spending" "with the month's spending limit reached, a create is refused: 403 limit_spending"
like "$(j .message)" 'Monthly spending limit reached: \$[0-9.]+ used of your plan.s \$0.00' "...and the message names the limit"
is "$(rt_sh "$C" 'echo still-here')" still-here "...while a running sandbox keeps running"
req nginx GET /usage
is "$(j .data.monthly_spend_limit_cents)" 0 "GET /usage shows the limit"
admin org limits "$ORG1" --monthly-spend-limit-cents none > /dev/null 2>&1
sb_create nginx '{"name":"it-usage-e","specs":{"memory":256,"disk":1}}'
is "$STATUS" 201 "with the limit lifted, creates work again"
