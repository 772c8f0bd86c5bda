#!/bin/bash
# test: parallel
# The sandbox lifecycle over HTTPS (nginx) and straight to FastCGI: a create
# really makes a runsc sandbox (checked by independent listings: runsc, its
# directory, loop device, overlay mount, netns, nft chain), GET/list/wait
# report it, env and memory reach inside, DELETE leaves nothing (runsc list,
# mountinfo, loop devices, netns, veth, nft, state dir, cgroups, processes)
# and is idempotent; another organisation's key sees 404 exactly like an
# unknown id and cannot touch it; egress policies that cannot be enforced
# (restricted without allow, open with one) are refused with
# nothing made; the template list names debian-12.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, nft, losetup" runsc nft ip jq
require_stack
t_on_exit sb_cleanup

ORG=$(new_org it-sbapi)
KEY=$(new_key "$ORG")
ORG2=$(new_org it-sbapi-other)
KEY2=$(new_key "$ORG2")
AUTH1="Authorization: Bearer $KEY"
AUTH2="Authorization: Bearer $KEY2"
like "$KEY $KEY2" '^sbx_[0-9a-f]{64} sbx_[0-9a-f]{64}$' "two fresh organisations with a key each"
export REQ_AUTH=$AUTH1

DB_URL=${SBX_DB_URL:-$(conf_get db_url)}
count_org() { psql_q "SELECT count(*) FROM sandboxes WHERE org_id = '$ORG'"; }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

for mode in $MODES; do
	T_SECTION=$mode
	tag="t$RANDOM$RANDOM"
	REQ_AUTH=$AUTH1

	# ---- create ----
	t0=$(date +%s%N)
	sb_create $mode "{\"name\":\"it-api-$mode\",\"env\":{\"SBX_T_VAR\":\"hello world $tag\"},\"specs\":{\"cpu\":500,\"memory\":300,\"disk\":1},\"metadata\":{\"tag\":\"$tag\"}}"
	ms=$(ms_since "$t0")
	id=$SB_ID
	is "$STATUS" 201 "create: 201 (${ms} ms)"
	is "$(j .data.status)" ready "create: the answer says ready"
	like "$id" '^[0-9a-f]{24}$' "create: a 24-hex id"
	is "$(j '.data.specs | "\(.cpu) \(.memory) \(.disk)"')" "500 300 1" "create: specs echoed"
	like "$(sb_db "$id" "status || ' node=' || coalesce(node_id, '') || ' container=' || coalesce(container_id, '')")" \
		'^ready node=[^ ]+ container=[^ ]+$' "record: ready with node and container ids (psql)"
	is "$(sb_missing "$id")" "" "on the node: runsc running, dir, loop device on disk.img, rootfs mount, netns, nft chain"

	# ---- read ----
	req $mode GET "/sandboxes/$id"
	is "$STATUS $(j .data.id) $(j .data.status)" "200 $id ready" "GET: 200, the same id, ready"
	is "$(j '.data.env | join(",")')" "SBX_T_VAR" "GET: env names only, never values"
	req $mode GET "/sandboxes?metadata.tag=$tag"
	is "$STATUS $(j '[.data.data[].id] | join(",")')" "200 $id" "list (metadata filter): exactly this sandbox"
	req $mode GET "/sandboxes?status=ready&limit=100"
	like "$STATUS $(j '[.data.data[].id] | join(",")')" "^200 .*$id" "list ?status=ready: contains it"
	req $mode GET "/sandboxes?status=failed&limit=100"
	unlike "$STATUS $(j '[.data.data[].id] | join(",")')" "$id|^[^2]" "list ?status=failed: 200 without it"
	t0=$(date +%s%N)
	req $mode GET "/sandboxes/$id/wait?timeout=30"
	ms=$(ms_since "$t0")
	is "$STATUS $(j .data.status)" "200 ready" "wait: 200 ready"
	# at once: not after its timeout (30 s); half of it is the bound, not a
	# time a loaded machine may miss
	ok "[ $ms -lt 15000 ]" "wait: a ready sandbox answers at once, without waiting out its timeout (${ms} ms)"

	# ---- inside ----
	out=$(sb_exec "$id" 'printf "%s" "$SBX_T_VAR"')
	is "$out" "hello world $tag" "env given at create is visible inside (runsc exec)"
	memkb=$(sb_exec "$id" "awk '/^MemTotal:/ {print \$2}' /proc/meminfo")
	ok "[[ '$memkb' =~ ^[0-9]+\$ ]] && [ '$memkb' -ge $((300 * 1024 * 95 / 100)) ] && [ '$memkb' -le $((300 * 1024 * 105 / 100)) ]" \
		"specs.memory: MemTotal inside is ~300 MB ($memkb kB)"

	# ---- another organisation ----
	REQ_AUTH=$AUTH2
	rid=$(random_id)
	for what in "GET /sandboxes/ID" "DELETE /sandboxes/ID" "GET /sandboxes/ID/wait?timeout=1"; do
		meth=${what%% *}
		path=${what#* }
		req $mode "$meth" "${path/ID/$rid}"
		st_rand=$STATUS
		body_rand=$BODY
		req $mode "$meth" "${path/ID/$id}"
		is "$STATUS $BODY" "$st_rand $body_rand" "other org: $meth ${path/ID/\{id\}} answers exactly like an unknown id"
		is "$STATUS" 404 "other org: $meth ${path/ID/\{id\}} is 404"
	done
	req $mode GET "/sandboxes?limit=100"
	unlike "$STATUS $(j '[.data.data[].id] | join(",")')" "$id|^[^2]" "other org: its list does not show it"
	REQ_AUTH=$AUTH1
	is "$(sb_missing "$id")" "" "other org's DELETE: the sandbox still runs (independent listing)"
	req $mode GET "/sandboxes/$id"
	is "$STATUS $(j .data.status)" "200 ready" "other org's DELETE: the owner still sees it ready"

	# ---- destroy ----
	# Its status change is announced only to a waiter (sql/019): Postgres
	# wakes every listening session at each NOTIFY, and every API child
	# listens (sbx_auth). A session that only listens hears nothing of it
	# (pause-resume.t has a waiter woken).
	app=it-notify-$mode-$RANDOM
	PGAPPNAME=$app "$T_PSQL" -X -q "$DB_URL" -c 'LISTEN sbx_sandbox_status' -c 'SELECT pg_sleep(120)' -c 'SELECT 1' \
		> "$T_TMP/notify-idle" 2>&1 &
	ipid=$!
	asleep() { [ "$(psql_q "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$app' AND query = 'SELECT pg_sleep(120)' AND state = 'active'")" = 1 ]; }
	ok 'wait_until 30 asleep' "a session listens on sbx_sandbox_status"
	t0=$(date +%s%N)
	req $mode DELETE "/sandboxes/$id"
	ms=$(ms_since "$t0")
	is "$STATUS" 204 "DELETE: 204 (${ms} ms)"
	is "$(sb_db "$id" status)" destroyed "the record says destroyed"
	psql_q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = '$app'" > /dev/null
	wait "$ipid"
	like "$(cat "$T_TMP/notify-idle")" 'canceling statement' "the listening session was cancelled after the change"
	unlike "$(cat "$T_TMP/notify-idle")" "payload \"$id\"" \
		"and heard nothing of it: no waiter held its key (no wake-up of every API child)"
	left=$(sb_leftovers "$id")
	is "$left" "" "DELETE: nothing left at once (runsc list, mountinfo, loop devices, netns, veth, nft, dir, cgroups, processes)"
	[ -n "$left" ] && wait_until 20 sb_gone "$id" && diag "(gone a little later)"
	req $mode GET "/sandboxes/$id"
	is "$STATUS $(j .data.status) $(j .data.destroy_reason)" "200 destroyed user" "GET after DELETE: destroyed, reason user"
	like "$(j .data.destroyed_at)" '^20[0-9]{2}-' "GET after DELETE: destroyed_at set"
	req $mode DELETE "/sandboxes/$id"
	is "$STATUS" 204 "DELETE again: 204"
	is "$(sb_db "$id" "status || ' ' || destroy_reason")" "destroyed user" "DELETE again: the record is unchanged"

	# ---- egress policies that cannot be enforced: refused, nothing made ----
	for eg in '{"mode":"open","allow":["192.0.2.1"]}' '{"mode":"restricted"}'; do
		before=$(count_org)
		runsc_before=$(sb_runsc list -quiet)
		reqid="it-sbapi-$RANDOM$RANDOM"
		req $mode POST /sandboxes "{\"egress\":$eg}" -H "X-Request-Id: $reqid"
		egm=$(${T_JGET:-jq} -r .mode <<< "$eg")
		is "$STATUS" 400 "egress $egm: 400"
		error_shape "egress" "egress $egm"
		is "$(count_org) $(psql_q "SELECT count(*) FROM sandboxes WHERE request_id = '$reqid'")" "$before 0" \
			"egress $egm: no record written"
		is "$(sb_new_of_org "$runsc_before" "$ORG")" "" "egress $egm: no container made (runsc list)"
	done

	req $mode GET /sandbox/templates
	is "$STATUS $(j '[.data.templates[].name] | index("debian-12") != null')" "200 true" "GET /sandbox/templates lists debian-12"
done

# The sandbox view (sbx_sandbox_json) is inlined into the query that uses
# it (sql/018): a sub-SELECT in its body stops that, and Postgres then
# parses and plans the body on every row of every GET and list (half the
# database's CPU on a GET, bench/api-get).
plan=$(psql_q "EXPLAIN VERBOSE SELECT sbx_sandbox_json(s) FROM sandboxes s WHERE s.id = '$(random_id)'")
unlike "$plan" 'sbx_sandbox_json' "the sandbox view is inlined into the query (no call per row)"
like "$plan" 'jsonb_build_object' "its expression is in the query's plan"
# ... and so are its timestamps (sql/020): sbx_time declared IMMUTABLE over
# a STABLE to_char was not, and its body was parsed on every request
unlike "$plan" 'sbx_time' "the view's timestamps (sbx_time) are inlined too"
like "$(psql_q "SELECT sbx_time('2026-01-02 03:04:05.678+02')")" '^2026-01-02T01:04:05\.678Z$' \
	"sbx_time: RFC 3339 UTC with milliseconds"
is "$(psql_q "SELECT sbx_json_keys('{\"b\":1,\"a\":2,\"ccc\":3}')::text || sbx_json_keys('{}')::text")" '["a", "b", "ccc"][]' \
	"env keys: sorted, [] for none"

finish
