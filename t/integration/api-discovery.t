#!/bin/bash
# test: parallel
# Discovery and listing: templates, regions, healthz, GET /sandboxes
# (empty, paginated, filters, parameter errors).
. "$(dirname "$0")/lib.sh"
require_stack

# A fresh organisation: its list starts empty whatever other tests did.
fresh_org it-disc x-api-key

for mode in $MODES; do
	T_SECTION=$mode

	req $mode GET /sandbox/templates
	is "$STATUS" 200 "templates: 200"
	is "$(j '.data | keys | join(",")'):$(j '.data.templates | type')" templates:array \
		"templates: data is {templates: [...]}"
	is "$(j '[.data.templates[] | select(.name == "debian-12")] | length')" 1 "templates: debian-12 is listed"
	is "$(j '[.data.templates[] | (keys | sort | join(","))] | unique | join(";")')" \
		"description,display_name,name" "templates: each has name, display_name, description"

	req $mode GET /sandboxes/regions
	is "$STATUS" 200 "regions: 200"
	is "$(j '.data.regions | length')" 1 "regions: one region"
	like "$(j '.data.regions[0] | [.id, .type, .enabled] | map(tostring) | join(",")')" '^[0-9a-f]{24},sandbox,true$' \
		"regions: a 24-hex id, type sandbox, enabled"
	is "$(j '.data.regions[0] | has("name") and has("country") and has("continent")')" true \
		"regions: name, country, continent present"

	REQ_AUTH= req $mode GET /healthz
	is "$STATUS" 200 "healthz: 200"
	is "$(j -c '[.message, .data.postgres, .data.rabbitmq]')" '["ok","ok","ok"]' "healthz: message ok, postgres ok, rabbitmq ok"

	req $mode GET /sandboxes
	is "$STATUS" 200 "empty list: 200"
	is "$(j -c '.data | [(.data|length), .totalCount, .currentPage, .totalPages, .limit]')" '[0,0,1,0,15]' \
		"empty list: data [], totalCount 0, currentPage 1, totalPages 0, limit 15" ||
		diag "(totalPages of an empty list may be 0 or 1 by taste; say which in API.md)"
	req $mode GET '/sandboxes?page=3&limit=7'
	is "$(j -c '.data | [.currentPage, .limit]')" '[3,7]' "page=3&limit=7 echoed in currentPage/limit"
	req $mode GET '/sandboxes?limit=100'
	is "$STATUS" 200 "limit=100: 200"
	req $mode GET '/sandboxes?limit=1'
	is "$STATUS" 200 "limit=1: 200"

	for q in page=0 page=-1 page=abc page= page=1.5 limit=0 limit=101 limit=-5 limit=abc \
		limit=99999999999999999999 page=99999999999999999999 'limit=1%00' status=bogus status= \
		status=READY; do
		req $mode GET "/sandboxes?$q"
		is "$STATUS" 400 "GET /sandboxes?$q: 400"
		error_shape '.' "?$q"
	done
	for st in starting ready pausing paused resuming failed destroyed; do
		req $mode GET "/sandboxes?status=$st"
		is "$STATUS" 200 "status=$st: 200"
	done
	req $mode GET '/sandboxes?metadata.team=x'
	is "$STATUS" 200 "metadata.team=x filter: 200"
done

# The list with records: only the caller's, newest first, paginated, filters.
T_SECTION=""
ids=()
for i in 1 2 3; do
	id=$(random_id)
	ids+=("$id")
	psql_q "INSERT INTO sandboxes (id, org_id, name, template, status, region, cpu, memory_mb, disk_gb,
		idle_timeout_s, expires_at, created_at, metadata)
		VALUES ('$id', '$ORG', 'it-disc-$i', 'debian-12', '$([ $i = 2 ] && echo failed || echo destroyed)',
		'local', 1000, 512, 1, 1800, now() + interval '1 hour', now() - interval '$((10 - i)) minutes',
		'{\"n\": \"$i\"}')" > /dev/null
done
for mode in $MODES; do
	T_SECTION=$mode
	req $mode GET '/sandboxes?limit=2'
	is "$(j -c '.data | [.totalCount, .totalPages, .currentPage, (.data | length)]')" '[3,2,1,2]' \
		"3 records, limit=2: totalCount 3, totalPages 2, page 1 has 2"
	is "$(j -r '[.data.data[].id] | join(",")')" "${ids[2]},${ids[1]}" "newest first"
	req $mode GET '/sandboxes?limit=2&page=2'
	is "$(j -r '[.data.data[].id] | join(",")')" "${ids[0]}" "page 2 has the oldest"
	req $mode GET '/sandboxes?page=5'
	is "$(j '.data.data | length')" 0 "a page past the end is empty"
	req $mode GET '/sandboxes?status=failed'
	is "$(j -r '[.data.data[].id] | join(",")')" "${ids[1]}" "status=failed filters"
	req $mode GET '/sandboxes?metadata.n=3'
	is "$(j -r '[.data.data[].id] | join(",")')" "${ids[2]}" "metadata.n=3 filters"
	req $mode GET '/sandboxes?metadata.n=nope'
	is "$(j '.data.totalCount')" 0 "metadata filter without match: 0"
done
psql_q "DELETE FROM sandboxes WHERE org_id = '$ORG'" > /dev/null
finish
