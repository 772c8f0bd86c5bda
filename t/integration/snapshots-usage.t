#!/bin/bash
# test: parallel
# Snapshot storage on the bill (issue 15): GET /usage and sbx-admin usage
# report snapshots: {count, gb_hours}, a snapshot's size_bytes (GiB) times the
# hours it existed in the window, priced at price_snapshot_gb_hour_millicents
# (default 7) and part of cost_cents:
#  - a snapshot made through the API and dated back 48 hours (the only thing
#    written behind the API's back: its created_at) counts in a 24-hour
#    window as exactly size x 24 GiB-hours; sbx-admin usage says the same;
#  - once deleted (its row goes) it still counts for its life, up to the
#    delete and no further, as one snapshot.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, snapshots" runsc jq curl
require_stack
PRICE=$(conf_get price_snapshot_gb_hour_millicents)
: "${PRICE:=7}"

t_on_exit snap_cleanup sb_cleanup
# num X: a decimal without trailing zeros (240.000000 -> 240, 3.3600 -> 3.36)
num() {
	case $1 in
	*.*) printf '%s' "$1" | sed 's/0*$//; s/\.$//' ;;
	*) printf '%s' "$1" ;;
	esac
}
# within X LO HI: LO <= X <= HI (decimals)
within() { awk -v x="$1" -v l="$2" -v h="$3" 'BEGIN {exit !(x != "" && x + 0 >= l + 0 && x + 0 <= h + 0)}'; }
snap_status() {
	req nginx GET "/sandboxes/$1/snapshots?limit=100" > /dev/null
	j -r --arg id "$2" '.data.data[] | select(.id == $id) | .status'
}
snap_settled() { [[ $(snap_status "$1" "$2") =~ ^(ready|failed)$ ]]; }

fresh_org it-snap-bill
BILL_ORG=$ORG
sb_create nginx '{"name":"it-snap-bill","specs":{"memory":256,"disk":1}}'
A=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "a sandbox"
req nginx POST "/sandboxes/$A/exec" '{"cmd":"head -c 20971520 /dev/urandom > /root/blob && sync && echo ok","timeout_seconds":60}'
is "$(j .data.stdout)" ok "it writes 20 MB that do not compress"

req nginx GET /usage
is "$STATUS $(j .data.snapshots.count) $(num "$(j .data.snapshots.gb_hours)")" "200 0 0" \
	"GET /usage before any snapshot: snapshots {count 0, gb_hours 0}"
is "$(j .data.prices_millicents_per_hour.snapshot_gb)" "$PRICE" "... the price per GiB-hour is the setting's ($PRICE m¢)"

req nginx POST "/sandboxes/$A/snapshots" '{"name":"it-snap-bill"}'
S1=$(j '.data.id // empty')
[ -n "$S1" ] && SNAPS+=("$S1")
is "$STATUS" 202 "a snapshot of it"
wait_until 180 snap_settled "$A" "$S1"
is "$(snap_status "$A" "$S1")" ready "... ready"
SIZE=$(psql_q "SELECT size_bytes FROM snapshots WHERE id = '$S1'")
ok "[ '${SIZE:-0}' -gt 20000000 ] 2> /dev/null" "its size_bytes: $SIZE"

psql_q "UPDATE snapshots SET created_at = date_trunc('second', now()) - interval '48 hours' WHERE id = '$S1'" > /dev/null
from=$(psql_q "SELECT sbx_time(created_at) FROM snapshots WHERE id = '$S1'")
to=$(psql_q "SELECT sbx_time(created_at + interval '24 hours') FROM snapshots WHERE id = '$S1'")
want=$(awk -v s="$SIZE" 'BEGIN {printf "%.6f", s / 1073741824 * 24}')
req nginx GET "/usage?from=$from&to=$to"
is "$STATUS $(j .data.snapshots.count)" "200 1" "GET /usage, 24 hours of a snapshot dated back 48 hours: 1 snapshot"
ok "within '$(j .data.snapshots.gb_hours)' $(awk -v w="$want" 'BEGIN {printf "%.6f %.6f", w - 0.000002, w + 0.000002}')" \
	"... $(j .data.snapshots.gb_hours) GiB-hours: its size x 24 ($want)"
cost=$(awk -v g="$want" -v p="$PRICE" 'BEGIN {printf "%.4f", g * p / 1000}')
ok "within '$(j .data.cost_cents)' $(awk -v c="$cost" 'BEGIN {printf "%.4f %.4f", c - 0.0001, c + 0.0001}')" \
	"... and costs $(j .data.cost_cents) ¢ (the window holds nothing else: $cost ¢)"
adm=$(admin usage "$BILL_ORG" --from "$from" --to "$to" 2> /dev/null)
is "$(jq -r .snapshots.count <<< "$adm" 2> /dev/null) $(jq -r .snapshots.gb_hours <<< "$adm" 2> /dev/null)" \
	"1 $(j .data.snapshots.gb_hours)" "sbx-admin usage says the same"

c=$(psql_q "SELECT extract(epoch FROM created_at) FROM snapshots WHERE id = '$S1'")
t0=$(psql_q "SELECT extract(epoch FROM now()) - $c")
req nginx DELETE "/sandboxes/snapshots/$S1"
t1=$(psql_q "SELECT extract(epoch FROM now()) - $c")
is "$STATUS $(psql_q "SELECT count(*) FROM snapshots WHERE id = '$S1'")" "204 0" "DELETE: 204 and its row is gone"
sleep 1
to=$(psql_q "SELECT sbx_time(now() + interval '1 hour')")
req nginx GET "/usage?from=$from&to=$to"
gbh=$(j '.data.snapshots.gb_hours')
lo=$(awk -v a="$t0" -v s="$SIZE" 'BEGIN {printf "%.6f", a * s / 1073741824 / 3600 - 0.000002}')
hi=$(awk -v a="$t1" -v s="$SIZE" 'BEGIN {printf "%.6f", a * s / 1073741824 / 3600 + 0.000002}')
ok "within '$gbh' '$lo' '$hi'" "deleted, it still counts for its life up to the delete: $gbh GiB-hours (between $lo and $hi)"
is "$(j .data.snapshots.count)" 1 "... as one snapshot"

finish
