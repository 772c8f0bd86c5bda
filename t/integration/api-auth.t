#!/bin/bash
# test: parallel
# Authentication: the three headers, missing/malformed/unknown/revoked keys,
# rotation, and that another organisation's ids look exactly like unknown ids.
. "$(dirname "$0")/lib.sh"
require_stack

# Two fresh organisations with a key each (independent of the stack's demo org).
ORG_A=$(new_org it-auth-a)
ORG_B=$(new_org it-auth-b)
KEY_A=$(new_key "$ORG_A")
KEY_B=$(new_key "$ORG_B")
like "$KEY_A" '^sbx_[0-9a-f]{64}$' "sbx-admin issued a key for org A"
like "$KEY_B" '^sbx_[0-9a-f]{64}$' "sbx-admin issued a key for org B"

# A sandbox record of org A, written straight into the database (creating
# one through the API cannot succeed before the sandbox issue; the failed
# record it leaves would do too, but this does not depend on the worker).
SBX_A=$(random_id)
psql_q "INSERT INTO sandboxes (id, org_id, name, template, status, region, cpu, memory_mb, disk_gb,
	idle_timeout_s, expires_at, failure_reason)
	VALUES ('$SBX_A', '$ORG_A', 'it-auth', 'debian-12', 'failed', 'local', 1000, 512, 1, 1800,
	now() + interval '1 hour', 'inserted by api-auth.t')" > /dev/null
ok $? "a sandbox record of org A exists (inserted by the test)"

for mode in $MODES; do
	T_SECTION=$mode

	REQ_AUTH="Authorization: Bearer $KEY_A" req $mode GET /sandboxes
	is "$STATUS" 200 "Authorization: Bearer KEY: 200"
	REQ_AUTH="authorization: bearer $KEY_A" req $mode GET /sandboxes
	is "$STATUS" 200 "lower-case 'authorization: bearer KEY': 200"
	REQ_AUTH="x-api-key: $KEY_A" req $mode GET /sandboxes
	is "$STATUS" 200 "x-api-key: 200"
	REQ_AUTH="x-brimble-key: $KEY_A" req $mode GET /sandboxes
	is "$STATUS" 200 "x-brimble-key: 200"
	REQ_AUTH="X-Brimble-Key: $KEY_A" req $mode GET /sandbox/templates
	is "$STATUS" 200 "X-Brimble-Key on templates: 200"

	REQ_AUTH= req $mode GET /sandboxes
	is "$STATUS" 401 "no key: 401"
	error_shape '^Missing API key$' "no key"
	like "$(hdr Content-Type)" '^application/json' "401 is JSON"
	REQ_AUTH= req $mode GET /sandbox/templates
	is "$STATUS" 401 "no key on templates: 401"
	REQ_AUTH= req $mode GET /sandboxes/regions
	is "$STATUS" 401 "no key on regions: 401"
	REQ_AUTH= req $mode POST /sandboxes '{}'
	is "$STATUS" 401 "no key on create: 401"
	REQ_AUTH= req $mode GET "/sandboxes/$SBX_A"
	is "$STATUS" 401 "no key on a sandbox: 401"
	REQ_AUTH= req $mode GET /healthz
	is "$STATUS" 200 "healthz needs no key"
	# Every route but /healthz needs a key, whatever else is wrong with the
	# request: an anonymous caller learns nothing about ids or bodies.
	REQ_AUTH= req $mode POST /sandboxes '{bad'
	is "$STATUS" 401 "no key + malformed body: 401 first"
	REQ_AUTH= req $mode GET '/sandboxes?page=0'
	is "$STATUS" 401 "no key + bad page: 401 first"
	REQ_AUTH= req $mode GET /sandboxes/not-an-id
	is "$STATUS" 401 "no key + malformed sandbox id: 401 first"
	REQ_AUTH="x-api-key: nope" req $mode DELETE /volumes/not-an-id
	is "$STATUS" 401 "bad key + malformed volume id: 401 first"

	for bad in "Authorization: Bearer " "Authorization: Bearer sbx_" "Authorization: Basic $KEY_A" \
		"Authorization: Bearer ${KEY_A}0" "Authorization: Bearer ${KEY_A%?}" \
		"Authorization: Bearer sbx_$(printf '0%.0s' {1..64})" "x-api-key: nope" \
		"x-api-key: ${KEY_A^^}" "x-brimble-key: $(printf 'k%.0s' {1..600})"; do
		REQ_AUTH=$bad req $mode GET /sandboxes
		like "$STATUS" '^401$' "bad key '${bad:0:40}': 401"
		error_shape '^(Invalid|Missing) API key$' "bad key '${bad:0:40}'"
	done
	REQ_AUTH="x-api-key: $(printf 'sbx_%064d' 7)" req $mode GET /sandboxes
	error_shape '^Invalid API key$' "well-formed unknown key"

	# Cross-organisation: org B sees org A's sandbox exactly as an unknown id.
	REQ_AUTH="x-api-key: $KEY_A" req $mode GET "/sandboxes/$SBX_A"
	is "$STATUS" 200 "org A reads its own sandbox"
	is "$(j .data.id)" "$SBX_A" "org A gets the right record"
	REQ_AUTH="x-api-key: $KEY_B" req $mode GET "/sandboxes/$SBX_A"
	s1=$STATUS b1=$(j 'del(.request_id)' -c)
	REQ_AUTH="x-api-key: $KEY_B" req $mode GET "/sandboxes/$(random_id)"
	s2=$STATUS b2=$(j 'del(.request_id)' -c)
	is "$s1" 404 "org B: org A's sandbox is 404"
	is "$s1 $b1" "$s2 $b2" "org B: org A's id answers exactly like an unknown id"
	REQ_AUTH="x-api-key: $KEY_B" req $mode DELETE "/sandboxes/$SBX_A"
	is "$STATUS" 404 "org B cannot delete org A's sandbox (404)"
	REQ_AUTH="x-api-key: $KEY_B" req $mode GET /sandboxes
	is "$(j "[.data.data[].id] | index(\"$SBX_A\")")" null "org B's list does not show org A's sandbox"
	REQ_AUTH="x-api-key: $KEY_A" req $mode GET /sandboxes
	is "$(j "[.data.data[].id] | index(\"$SBX_A\") != null")" true "org A's list shows it"
done
T_SECTION=""
is "$(psql_q "SELECT status FROM sandboxes WHERE id = '$SBX_A'")" failed "org B's DELETE left org A's record alone"

# Revoke: the key stops working at once.
KEY_R=$(new_key "$ORG_A")
KID_R=$(key_id_of_token "$ORG_A" "$KEY_R")
like "$KID_R" '^[0-9a-f]{24}$' "key list shows the new key's id"
REQ_AUTH="x-api-key: $KEY_R" req fcgi GET /sandboxes
is "$STATUS" 200 "the key works before revoke"
admin key revoke "$KID_R" > /dev/null 2>&1
ok $? "sbx-admin key revoke"
for mode in $MODES; do
	REQ_AUTH="x-api-key: $KEY_R" req $mode GET /sandboxes
	is "$STATUS" 401 "[$mode] revoked key: 401"
	error_shape '^Invalid API key$' "[$mode] revoked key"
done

# Rotate: a new token, the old one stops working.
KEY_O=$(new_key "$ORG_A")
KID_O=$(key_id_of_token "$ORG_A" "$KEY_O")
KEY_N=$(admin key rotate "$KID_O" 2> /dev/null | tr -d ' \n')
like "$KEY_N" '^sbx_[0-9a-f]{64}$' "rotate prints a new token"
isnt "$KEY_N" "$KEY_O" "the rotated token is new"
for mode in $MODES; do
	REQ_AUTH="x-api-key: $KEY_O" req $mode GET /sandboxes
	is "$STATUS" 401 "[$mode] old key after rotate: 401"
	REQ_AUTH="x-api-key: $KEY_N" req $mode GET /sandboxes
	is "$STATUS" 200 "[$mode] new key after rotate: 200"
done

# Revoking org B's key does not affect org A's.
admin key revoke "$(key_id_of_token "$ORG_B" "$KEY_B")" > /dev/null 2>&1
REQ_AUTH="x-api-key: $KEY_B" req fcgi GET /sandboxes
is "$STATUS" 401 "org B's revoked key: 401"
REQ_AUTH="x-api-key: $KEY_A" req fcgi GET /sandboxes
is "$STATUS" 200 "org A's key still works"

psql_q "DELETE FROM sandboxes WHERE id = '$SBX_A'" > /dev/null
finish
