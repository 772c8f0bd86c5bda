#!/bin/bash
# test: any stack
# GET /metrics (issue 15) through nginx: the Prometheus text format, request
# counters per route, method and status class that count exactly the requests
# made (across every API child: they share one mapping), latency histograms
# that add up, sandboxes by state equal to the records, nodes with their live
# sandboxes and heartbeat, the provisioners' queue with its consumers, execs;
# and who may read it (local, or an operator key: metrics name every
# organisation).
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq
rt_begin
T=$T_TMP

rt_setup it-metrics
rt_new it-metrics
A=$RT_ID

plan 16

mget() { curl -sS --cacert "$SBX_CACERT" -D "$T/mh" "$@" "$SBX_URL/metrics" > "$T/m"; }
# metric NAME{LABELS}: its value in the last scrape (0 when absent)
metric() { awk -v k="$1" '$1 == k {print $2; f=1} END {if (!f) print 0}' "$T/m"; }

mget
is "$(sed -n 's/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$T/mh" | tail -n1)" 200 "GET /metrics from this machine, without a key: 200"
like "$(grep -i '^content-type:' "$T/mh")" "text/plain; version=0.0.4" "...in the Prometheus text format (version 0.0.4)"
bad=$(grep -vE '^(# (HELP|TYPE) [a-z_]+ .+|[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9.e+]+)$' "$T/m" | head -3)
is "$bad" "" "every line is a HELP/TYPE comment or a sample NAME{LABELS} VALUE"

K='sbx_http_requests_total{route="sandbox",method="GET",code="2xx"}'
K4='sbx_http_requests_total{route="sandbox",method="GET",code="4xx"}'
c0=$(metric "$K")
c40=$(metric "$K4")
for i in 1 2 3; do req nginx GET "/sandboxes/$A"; done
req nginx GET "/sandboxes/$(random_id)"
is "$STATUS" 404 "(a GET of an unknown sandbox: 404)"
mget
is "$(metric "$K")" $((c0 + 3)) "three GETs of a sandbox: its 2xx counter grew by exactly 3"
is "$(metric "$K4")" $((c40 + 1)) "one GET of an unknown sandbox: the 4xx counter grew by exactly 1"

L='route="sandbox",method="GET"'
inf=$(metric "sbx_http_request_duration_seconds_bucket{$L,le=\"+Inf\"}")
cnt=$(metric "sbx_http_request_duration_seconds_count{$L}")
is "$inf" "$cnt" "the histogram's +Inf bucket equals its count"
ok '[ "$cnt" -ge $((c0 + c40 + 4)) ]' "...which covers every request of the route ($cnt)"
mono=$(grep -F "sbx_http_request_duration_seconds_bucket{$L," "$T/m" | awk '{ if ($2 < p) bad=1; p=$2 } END {print bad ? "no" : "yes"}')
is "$mono" yes "...and its buckets never decrease"
sum=$(metric "sbx_http_request_duration_seconds_sum{$L}")
ok "awk -v s='$sum' 'BEGIN {exit !(s > 0)}'" "...and it has a positive _sum ($sum s)"

ready=$(psql_q "SELECT count(*) FROM sandboxes WHERE status = 'ready'")
is "$(metric 'sbx_sandboxes{status="ready"}')" "$ready" "sbx_sandboxes{status=\"ready\"} equals the ready records ($ready)"
node=$(sb_db "$A" node_id)
ok '[ "$(metric "sbx_node_sandboxes{node=\"$node\"}")" -ge 1 ]' "the sandbox's node shows live sandboxes"
ok "awk -v k='sbx_node_heartbeat_age_seconds{node=\"$node\"}' '\$1 == k && \$2 < 120 {f=1} END {exit !f}' '$T/m'" \
	"...and a recent heartbeat"
ok '[ "$(metric "sbx_queue_consumers{queue=\"sbx.provision\"}")" -ge 1 ]' "the provisioners' queue has a consumer"

# The node records an exec off its loop (workers/execlog.c), after the
# answer: the counter grows soon, not necessarily by the next scrape.
e0=$(metric sbx_execs_total)
rt_sh "$A" true > /dev/null
counted() { mget && [ "$(metric sbx_execs_total)" -gt "$e0" ]; }
wait_until 15 counted
ok '[ "$(metric sbx_execs_total)" -gt "$e0" ]' "an exec is counted in sbx_execs_total"

# Seen as not local (a proxy's X-Forwarded-For): an organisation's key is
# not enough, an operator key is.
mget -H 'X-Forwarded-For: 192.0.2.1' -H "Authorization: Bearer $RT_KEY"
s1=$(sed -n 's/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$T/mh" | tail -n1)
OPK=$(admin key issue "$RT_ORG" --admin 2> /dev/null | tr -d ' \n')
mget -H 'X-Forwarded-For: 192.0.2.1' -H "Authorization: Bearer $OPK"
s2=$(sed -n 's/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$T/mh" | tail -n1)
is "$s1|$s2" "403|200" "not local: an organisation's key gets 403, an operator key 200"
