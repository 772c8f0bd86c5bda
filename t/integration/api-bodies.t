#!/bin/bash
# test: parallel, slow
# POST /sandboxes body validation: every bad body answers 4xx and writes
# nothing (checked by an independent count in Postgres); a valid body leaves
# a failed record (no provisioner can run sandboxes yet); org limits -> 403.
. "$(dirname "$0")/lib.sh"
require_stack

fresh_org it-body x-api-key

count() { psql_q "SELECT count(*) FROM sandboxes WHERE org_id = '$ORG'"; }

# bad MODE STATUS_RE MSG_RE BODY DESC: one bad create, then the DB checks:
# the organisation's count is unchanged, and no row of any organisation
# carries this request's id (the API stores it in sandboxes.request_id).
# One psql a bad body (three before: 148 of them made this file the
# parallel group's longest on a slow machine): both counts in one query, and
# the count before is the one the last bad read after its request when no
# point was written since (nothing else ran in between). A write in between
# without a point would make the next bad fail, never pass.
BAD_COUNT="" BAD_N=""
bad() {
	local mode=$1 st=$2 re=$3 body=$4 desc=$5 before rid after n
	if [ -n "$BAD_COUNT" ] && [ "$BAD_N" = "$T_N" ]; then before=$BAD_COUNT; else before=$(count); fi
	rid="it-body-$RANDOM$RANDOM$RANDOM"
	req $mode POST /sandboxes "$body" -H "X-Request-Id: $rid"
	like "$STATUS" "^($st)\$" "$desc: $st"
	error_shape "$re" "$desc"
	IFS='|' read -r after n <<< "$(psql_q "SELECT (SELECT count(*) FROM sandboxes WHERE org_id = '$ORG'),
		(SELECT count(*) FROM sandboxes WHERE request_id = '$rid')")"
	is "$after $n" "$before 0" "$desc: nothing written (SELECT count(*) FROM sandboxes)"
	BAD_COUNT=$after BAD_N=$T_N
}

deep_arr=$(printf '[%.0s' {1..10000})$(printf ']%.0s' {1..10000})
deep_obj='{"metadata":'$(printf '{"a":%.0s' {1..10000})1$(printf '}%.0s' {1..10000})'}'
deep33='{"metadata":'$(printf '[%.0s' {1..40})$(printf ']%.0s' {1..40})'}'
name65=$(printf 'n%.0s' {1..65})
name65u=$(printf 'é%.0s' {1..65})
name64u=$(printf 'é%.0s' {1..64})
# 2 MiB: over api_max_json_body (1 MiB) and over nginx's client_max_body_size.
big=$T_TMP/big.json
{ printf '{"name":"'; head -c $((2 * 1024 * 1024)) /dev/zero | tr '\0' a; printf '"}'; } > "$big"
# Just under 1 MiB: must reach validation (400 for the name), not 413.
under=$T_TMP/under.json
{ printf '{"name":"'; head -c 1000000 /dev/zero | tr '\0' a; printf '"}'; } > "$under"

for mode in $MODES; do
	T_SECTION=$mode

	bad $mode 400 '.' '{"name":' "truncated JSON"
	bad $mode 400 '.' '{name: "x"}' "unquoted key"
	bad $mode 400 '.' '{"name":"x"} trailing' "trailing garbage"
	bad $mode 400 '.' "{\"name\":\"a$(printf '\xff')b\"}" "invalid UTF-8"
	bad $mode 400 '.' '[]' "array body"
	bad $mode 400 '.' '[{"name":"x"}]' "array of objects"
	bad $mode 400 '.' '"sandbox"' "string body"
	bad $mode 400 '.' '42' "number body"
	bad $mode 400 '.' 'null' "null body"
	bad $mode 400 'name' '{"name":5}' "name: number"
	bad $mode 400 'specs\.memory' '{"specs":{"memory":"512"}}' "specs.memory: string"
	bad $mode 400 'specs\.cpu' '{"specs":{"cpu":1.5}}' "specs.cpu: float"
	bad $mode 400 'specs' '{"specs":[1]}' "specs: array"
	bad $mode 400 'env' '{"env":{"A":1}}' "env value: number"
	bad $mode 400 'metadata' '{"metadata":"x"}' "metadata: string"
	bad $mode 400 'autoDestroy' '{"autoDestroy":"yes"}' "autoDestroy: string"
	bad $mode 400 'timeout' '{"timeout":"60"}' "timeout: string"
	bad $mode 400 '[Dd]uplicate|name' '{"name":"a","name":"b"}' "duplicate key"
	bad $mode 400 '.' '{"specs":{"cpu":100,"cpu":200}}' "duplicate nested key"
	bad $mode 400 '.' "$deep_arr" "10000-deep array"
	bad $mode 400 '.' "$deep_obj" "10000-deep objects in metadata"
	bad $mode 400 '.' "$deep33" "40-deep (over 32) in metadata"
	bad $mode 400 '^Unknown field: bogus$' '{"bogus":1}' "unknown field"
	bad $mode 400 'Unknown field: (specs\.)?gpu' '{"specs":{"gpu":1}}' "unknown nested field"
	bad $mode 400 '.' '{"name":""}' "empty name"
	bad $mode 400 '.' "{\"name\":\"$name65\"}" "65-character name"
	bad $mode 400 '.' "{\"name\":\"$name65u\"}" "65-character name of 2-byte characters"
	bad $mode 400 'debian-12' '{"template":"nope"}' "unknown template (lists debian-12)"
	bad $mode 400 'allow' '{"egress":{"mode":"open","allow":["192.0.2.1"]}}' "egress open with an allow list"
	bad $mode 400 'restricted|allow' '{"egress":{"mode":"restricted"}}' "egress restricted without allow"
	bad $mode 400 '.' '{"egress":{"mode":"sideways"}}' "egress mode unknown"
	bad $mode 400 'blockOutbound|egress' '{"egress":{"mode":"deny_all"},"blockOutbound":true}' "egress + blockOutbound"
	bad $mode 400 'cpu' '{"specs":{"cpu":0}}' "cpu 0"
	bad $mode 400 'cpu' '{"specs":{"cpu":2001}}' "cpu 2001"
	bad $mode 400 'memory' '{"specs":{"memory":0}}' "memory 0"
	bad $mode '400|403' '[Mm]emory' '{"specs":{"memory":4096}}' "memory 4096"
	bad $mode 400 'disk' '{"specs":{"disk":6}}' "disk 6"
	bad $mode 400 'destroyTimeout' '{"autoDestroy":true,"destroyTimeout":"2h"}' "destroyTimeout 2h"
	bad $mode 400 'timeout' '{"timeout":59}' "timeout 59"
	bad $mode 400 'timeout' '{"timeout":86401}' "timeout 86401"
	bad $mode 400 'persistentDiskGB' '{"persistent":true,"persistentDiskGB":100000}' "persistentDiskGB over the range"
	bad $mode 400 'persistentDiskGB' '{"persistentDiskGB":10}' "persistentDiskGB without persistent"
	bad $mode 400 'mountPath' '{"persistent":true,"mountPath":"/"}' "mountPath /"
	bad $mode 400 'mountPath' '{"persistent":true,"mountPath":"/proc/x"}' "mountPath under /proc"
	bad $mode 400 'mountPath' '{"persistent":true,"mountPath":"/a/../b"}' "mountPath with .."
	bad $mode 400 'mountPath' '{"mountPath":"/data"}' "mountPath without a volume"
	bad $mode 400 'volumeId|[Vv]olume id' '{"volumeId":"vol-1"}' "volumeId that is not an id"
	bad $mode 404 'Volume not found' "{\"volumeId\":\"$(random_id)\"}" "volumeId that does not exist"
	bad $mode 400 'fromSnapshot' '{"fromSnapshot":"snap-1"}' "fromSnapshot that is not an id"
	bad $mode 404 'Snapshot not found' "{\"fromSnapshot\":\"$(random_id)\"}" "fromSnapshot that does not exist"
	bad $mode 400 'snapshotFrequency' '{"snapshotMode":"automatic"}' "snapshotMode automatic without snapshotFrequency"
	bad $mode 400 'minute' '{"snapshotMode":"automatic","snapshotFrequency":"61 * * * *"}' "snapshotFrequency minute 61"
	bad $mode 400 'never fires' '{"snapshotMode":"automatic","snapshotFrequency":"0 0 30 2 *"}' "snapshotFrequency that never fires"
	bad $mode 400 'snapshotFrequency' '{"snapshotFrequency":"0 * * * *"}' "snapshotFrequency without automatic"
	bad $mode 400 '24 lowercase hex' '{"teamId":"team-1"}' "teamId that is not an id"
	bad $mode 404 'Team not found' "{\"teamId\":\"$(random_id)\"}" "teamId of another organisation"
	bad $mode 400 '[Rr]egion' '{"region":"mars"}' "unknown region"
	bad $mode 400 'name' "@$under" "1 MB name (under the body limit: validation, not 413)"
	bad $mode 413 '.' "@$big" "2 MiB body"
	like "$(hdr X-Request-Id)" '.' "2 MiB body: X-Request-Id on the 413"
	ok is_json "2 MiB body: the 413 is JSON"

	# The API is still healthy after all that.
	REQ_AUTH= req $mode GET /healthz
	is "$STATUS" 200 "healthz 200 after the bad bodies"
done

# FastCGI only: the declared length decides before anything is read.
T_SECTION=fcgi
FCGI_EXTRA=(-p CONTENT_LENGTH=5000000)
bad fcgi 413 '.' '{"name":"x"}' "CONTENT_LENGTH 5000000 with a small body"
FCGI_EXTRA=(-p CONTENT_LENGTH=abc)
bad fcgi '400|411|413' '.' '{"name":"x"}' "CONTENT_LENGTH abc"
FCGI_EXTRA=(-p CONTENT_LENGTH=-1)
bad fcgi '400|411|413' '.' '{"name":"x"}' "CONTENT_LENGTH -1"
FCGI_EXTRA=(-p CONTENT_LENGTH=100)
bad fcgi 400 '.' '{"name":"x"}' "CONTENT_LENGTH longer than the body"
FCGI_EXTRA=()

# A valid create: 201 with a ready sandbox that GET and the list show;
# DELETE is 204, twice, and the record stays as destroyed.
for mode in $MODES; do
	T_SECTION=$mode
	tag="t$RANDOM$RANDOM"
	before=$(count)
	req $mode POST /sandboxes "{\"name\":\"it-ok-$mode\",\"metadata\":{\"tag\":\"$tag\"},\"specs\":{\"cpu\":500,\"memory\":256,\"disk\":1}}" \
		-H "X-Request-Id: it-ok-$tag"
	is "$STATUS" 201 "valid create: 201"
	is "$(j -r .data.status)" ready "valid create: the sandbox is ready"
	is "$(count)" "$((before + 1))" "valid create: one record written"
	id=$(psql_q "SELECT id FROM sandboxes WHERE org_id = '$ORG' AND metadata->>'tag' = '$tag'")
	like "$id" '^[0-9a-f]{24}$' "the record is in the database"
	is "$(j -r .data.id)" "$id" "the answer names it"
	is "$(psql_q "SELECT request_id FROM sandboxes WHERE id = '$id'")" "it-ok-$tag" "it records the request id"
	req $mode GET "/sandboxes?metadata.tag=$tag"
	is "$(j -r '[.data.data[].id] | join(",")')" "$id" "the list finds it by metadata"
	req $mode GET "/sandboxes/$id"
	is "$STATUS" 200 "GET the sandbox: 200"
	is "$(j -r .data.status)" ready "GET: status ready"
	is "$(j -r '.data.failure_reason')" null "GET: no failure_reason"
	is "$(j -r .data.name)" "it-ok-$mode" "GET: name"
	is "$(j -cS .data.specs)" '{"cpu":500,"disk":1,"memory":256}' "GET: specs"
	is "$(j -c .data.metadata)" "{\"tag\":\"$tag\"}" "GET: metadata"
	req $mode DELETE "/sandboxes/$id"
	is "$STATUS" 204 "DELETE: 204"
	is "$BODY" "" "DELETE: no body"
	req $mode DELETE "/sandboxes/$id"
	is "$STATUS" 204 "DELETE again: 204"
	is "$(psql_q "SELECT status || ' ' || destroy_reason FROM sandboxes WHERE id = '$id'")" "destroyed user" \
		"the record stays, destroyed by its user"
	req $mode DELETE "/sandboxes/$(random_id)"
	is "$STATUS" 404 "DELETE unknown id: 404"

	# "1..64 chars" are characters, not bytes: 64 two-byte characters are a valid name.
	before=$(count)
	req $mode POST /sandboxes "{\"name\":\"$name64u\"}"
	is "$STATUS" 201 "name of 64 two-byte characters (128 bytes) is valid: 201"
	is "$(count)" "$((before + 1))" "... and its record was written"
	req $mode DELETE "/sandboxes/$(j -r .data.id)"
	is "$STATUS" 204 "... and it is destroyed"
done

# A create that fails on the node (a template a node claims but cannot run):
# 503, and the record stays as failed with the reason; DELETE is 204.
T_SECTION=""
psql_q "INSERT INTO templates (name, display_name) VALUES ('it-missing', 'missing') ON CONFLICT DO NOTHING;
	INSERT INTO nodes (id, templates) VALUES ('it-fake-node', '{it-missing}')
	ON CONFLICT (id) DO UPDATE SET templates = '{it-missing}', heartbeat_at = now()" > /dev/null
before=$(count)
req fcgi POST /sandboxes '{"name":"it-fails","template":"it-missing"}'
is "$STATUS" 503 "a create the node cannot do: 503"
error_shape '.' "failed create"
id=$(j -r .data.id)
like "$id" '^[0-9a-f]{24}$' "the error names the failed record"
is "$(count)" "$((before + 1))" "its record was written"
req fcgi GET "/sandboxes/$id"
is "$(j -r .data.status)" failed "GET: status failed"
like "$(j -r '.data.failure_reason // ""')" 'template' "GET: failure_reason says why (the template)"
req fcgi DELETE "/sandboxes/$id"
is "$STATUS" 204 "DELETE the failed record: 204"
psql_q "DELETE FROM nodes WHERE id = 'it-fake-node'; DELETE FROM templates WHERE name = 'it-missing'" > /dev/null

# Org limits: 403 naming the limit, nothing written.
T_SECTION=""
admin org limits "$ORG" --max-sandboxes 0 > /dev/null 2>&1
ok $? "sbx-admin org limits --max-sandboxes 0"
for mode in $MODES; do
	bad $mode 403 '[Ss]andbox limit|max_sandboxes|concurrent' '{"name":"x"}' "[$mode] max_sandboxes 0"
done
# Failed and destroyed records count against no quota: with max 1 and only those, a create works.
admin org limits "$ORG" --max-sandboxes 1 > /dev/null 2>&1
req fcgi POST /sandboxes '{"name":"it-quota"}'
is "$STATUS" 201 "max_sandboxes 1 with only failed/destroyed records: created"
req fcgi DELETE "/sandboxes/$(j -r .data.id)"
live=$(random_id)
psql_q "INSERT INTO sandboxes (id, org_id, name, template, status, region, cpu, memory_mb, disk_gb,
	idle_timeout_s, expires_at) VALUES ('$live', '$ORG', 'it-live', 'debian-12', 'ready', 'local',
	1000, 512, 1, 1800, now() + interval '1 hour')" > /dev/null
for mode in $MODES; do
	bad $mode 403 '[Ss]andbox limit|max_sandboxes|concurrent' '{"name":"x"}' "[$mode] one ready sandbox, max 1"
done
psql_q "UPDATE sandboxes SET status = 'destroyed', destroyed_at = now() WHERE id = '$live'" > /dev/null
admin org limits "$ORG" --max-sandboxes 10 --max-memory-mb 256 > /dev/null 2>&1
ok $? "sbx-admin org limits --max-memory-mb 256"
for mode in $MODES; do
	bad $mode 403 '[Mm]emory' '{"specs":{"memory":512}}' "[$mode] memory 512 over max_memory_mb 256"
done
req fcgi POST /sandboxes '{"specs":{"memory":256}}'
is "$STATUS" 201 "memory 256 at max_memory_mb 256: allowed"
req fcgi DELETE "/sandboxes/$(j -r .data.id)"

psql_q "DELETE FROM sandboxes WHERE org_id = '$ORG'" > /dev/null
finish
