#!/bin/bash
# test: parallel
# Volumes in the plan and on the bill (issue 15):
#  - plan limits, crossed: with --max-volumes 1 a second volume is 403
#    limit_volumes, and with --max-volume-gb below what two would take, 403
#    limit_volume_gb; each message names the limit;
#  - GB-hours: a volume made through the API and dated back 48 hours (the
#    only thing written behind the API's back: its created_at) counts in
#    GET /usage for a 24-hour window as exactly size x 24 GB-hours, priced
#    at price_volume_gb_hour_millicents (default 14); sbx-admin usage says
#    the same; once deleted (its row goes) it still counts for its life, up
#    to the delete and no further;
#  - the spending limit counts volumes: an organisation whose only cost is a
#    volume that has existed all month is refused creates (403
#    limit_spending) once that cost reaches its limit.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, the node's volumes" runsc jq
rt_begin
T=$T_TMP
VMIN=$(conf_get volume_min_gb)
: "${VMIN:=10}"
PRICE=$(conf_get price_volume_gb_hour_millicents)
: "${PRICE:=14}"

t_on_exit rt_kill_bg sb_cleanup vol_cleanup
# new_vol NAME SIZE: POST /volumes; VID is its id (tracked for the clean-up).
new_vol() {
	req nginx POST /volumes "{\"name\":\"$1\",\"sizeGB\":$2}"
	VID=$(j '.data.id // empty')
	if [ -n "$VID" ]; then
		VOLS+=("$VID")
		VOL_AUTHS+=("$REQ_AUTH")
	fi
}
# num X: a decimal without trailing zeros (240.000000 -> 240, 3.3600 -> 3.36)
num() {
	case $1 in
	*.*) printf '%s' "$1" | sed 's/0*$//; s/\.$//' ;;
	*) printf '%s' "$1" ;;
	esac
}

# ---- plan limits ------------------------------------------------------------------
fresh_org it-vol-plan
admin org limits "$ORG" --max-volumes 1 --max-volume-gb 1000
ok $? "sbx-admin org limits --max-volumes 1"
new_vol it-vu-a "$VMIN"
is "$STATUS" 201 "the first volume: 201"
V1=$VID
new_vol it-vu-b "$VMIN"
is "$STATUS $(j .code)" "403 limit_volumes" "a second one with --max-volumes 1: 403 limit_volumes"
like "$(j .message)" 'allows 1 volumes' "... naming the limit"
admin org limits "$ORG" --max-volumes 5 --max-volume-gb $((2 * VMIN - 1))
new_vol it-vu-b "$VMIN"
is "$STATUS $(j .code)" "403 limit_volume_gb" "two of $VMIN GB with --max-volume-gb $((2 * VMIN - 1)): 403 limit_volume_gb"
like "$(j .message)" "allows $((2 * VMIN - 1)) GB.*$VMIN GB in use" "... naming the limit and the use"
admin org limits "$ORG" --max-volume-gb $((2 * VMIN))
new_vol it-vu-b "$VMIN"
is "$STATUS" 201 "within the raised limit: 201"
V2=$VID
# give the node's disk budget back for what follows
req nginx DELETE "/volumes/$V1"
req nginx DELETE "/volumes/$V2"
is "$STATUS" 204 "the plan's volumes are deleted"

# ---- GB-hours ----------------------------------------------------------------------
# an organisation of its own: its only volume is V1
fresh_org it-vol-bill
BILL_ORG=$ORG
new_vol it-vu-bill "$VMIN"
is "$STATUS" 201 "a volume of $VMIN GB"
V1=$VID
psql_q "UPDATE volumes SET created_at = date_trunc('second', now()) - interval '48 hours' WHERE id = '$V1'" > /dev/null
from=$(psql_q "SELECT sbx_time(created_at) FROM volumes WHERE id = '$V1'")
to=$(psql_q "SELECT sbx_time(created_at + interval '24 hours') FROM volumes WHERE id = '$V1'")
req nginx GET "/usage?from=$from&to=$to"
is "$STATUS $(j .data.volumes.count) $(num "$(j .data.volumes.gb_hours)")" "200 1 $((VMIN * 24))" \
	"GET /usage, 24 hours of a $VMIN GB volume: 1 volume, $((VMIN * 24)) GB-hours"
is "$(j .data.prices_millicents_per_hour.volume_gb)" "$PRICE" "... the price per GB-hour is the setting's ($PRICE m¢)"
cost=$(awk -v g=$((VMIN * 24)) -v p="$PRICE" 'BEGIN {printf "%.4f", g * p / 1000}')
is "$(num "$(j .data.cost_cents)")" "$(num "$cost")" "... and costs $cost ¢"
adm=$(admin usage "$BILL_ORG" --from "$from" --to "$to" 2> "$T/aerr")
is "$(jq -r .volumes.count <<< "$adm" 2> /dev/null) $(num "$(jq -r .volumes.gb_hours <<< "$adm" 2> /dev/null)")" \
	"1 $((VMIN * 24))" "sbx-admin usage says the same"

c=$(psql_q "SELECT extract(epoch FROM created_at) FROM volumes WHERE id = '$V1'")
t0=$(psql_q "SELECT extract(epoch FROM now()) - $c")
req nginx DELETE "/volumes/$V1"
t1=$(psql_q "SELECT extract(epoch FROM now()) - $c")
is "$STATUS $(psql_q "SELECT count(*) FROM volumes WHERE id = '$V1'")" "204 0" "DELETE: 204 and its row is gone"
sleep 1
to=$(psql_q "SELECT sbx_time(now() + interval '1 hour')")
req nginx GET "/usage?from=$from&to=$to"
gbh=$(j '.data.volumes.gb_hours')
lo=$(awk -v a="$t0" -v g="$VMIN" 'BEGIN {printf "%.6f", a * g / 3600 - 0.000001}')
hi=$(awk -v a="$t1" -v g="$VMIN" 'BEGIN {printf "%.6f", a * g / 3600 + 0.000001}')
ok "awk -v x='$gbh' -v l='$lo' -v h='$hi' 'BEGIN {exit !(x != \"\" && x + 0 >= l + 0 && x + 0 <= h + 0)}'" \
	"deleted, it still counts for its life up to the delete: $gbh GB-hours (between $lo and $hi)"
is "$(j .data.volumes.count)" 1 "... as one volume"

# ---- the spending limit --------------------------------------------------------------
fresh_org it-vol-spend
new_vol it-vu-spend "$VMIN"
is "$STATUS" 201 "a volume of $VMIN GB"
V3=$VID
psql_q "UPDATE volumes SET created_at = now() - interval '40 days' WHERE id = '$V3'" > /dev/null
req nginx GET /usage
month=$(j .data.cost_cents)
limit=$(awk -v c="$month" 'BEGIN {printf "%d", c}')
if [ "$limit" -lt 1 ]; then
	skip 2 "the month is too young for a volume to have cost a cent ($month ¢ so far)"
else
	admin org limits "$ORG" --monthly-spend-limit-cents "$limit" --max-sandboxes 5
	sb_create nginx '{"name":"it-vu-spend","specs":{"memory":256,"disk":1}}'
	is "$STATUS $(j .code)" "403 limit_spending" \
		"the month's volume cost ($month ¢) reaches the limit ($limit ¢): a create is refused, 403 limit_spending"
	admin org limits "$ORG" --monthly-spend-limit-cents $((limit + 1000))
	sb_create nginx '{"name":"it-vu-spend","specs":{"memory":256,"disk":1}}'
	is "$STATUS" 201 "under a higher limit the create works"
fi

finish
