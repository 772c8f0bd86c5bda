#!/bin/bash
# test: parallel
# The envelope, errors, id validation, the /v1 prefix and the request id,
# each through nginx and straight to the FastCGI program.
. "$(dirname "$0")/lib.sh"
require_stack

json_ctype() {
	like "$(hdr Content-Type)" '^application/json' "$1: Content-Type is application/json"
}
rid_present() {
	like "$(hdr X-Request-Id)" '^[A-Za-z0-9._-]{1,64}$' "$1: X-Request-Id present"
}

# An organisation of this file's own for the /v1 comparison below: the stack
# key's list changes whenever a file running beside this one creates a
# sandbox between the two requests (seen: openapi-contract.t's).
OWN_ORG=$(new_org it-env)
OWN_KEY=$(new_key "$OWN_ORG")
like "$OWN_KEY" '^sbx_[0-9a-f]{64}$' "an organisation of its own for the /v1 comparison"

for mode in $MODES; do
	T_SECTION=$mode

	# Success envelope.
	req $mode GET /sandbox/templates
	is "$STATUS" 200 "GET /sandbox/templates: 200"
	json_ctype "templates"
	is "$(j 'keys_unsorted | sort | join(",")')" "data,message" "success envelope has exactly message and data"
	is "$(j '.message | type')" string "message is a string"
	rid_present "200"

	# Unknown path.
	req $mode GET /no/such/thing
	is "$STATUS" 404 "unknown path: 404"
	json_ctype "404"
	error_shape '^Not found$' "unknown path"
	is "$(j 'has("data")')" false "error envelope has no data"
	rid_present "404"
	req $mode GET /sandboxesx
	is "$STATUS" 404 "/sandboxesx (prefix of a route): 404"

	# Known path, wrong method: 405 with Allow.
	req $mode PUT /sandboxes '{}'
	is "$STATUS" 405 "PUT /sandboxes: 405"
	like "$(hdr Allow)" 'GET' "PUT /sandboxes: Allow names GET"
	like "$(hdr Allow)" 'POST' "PUT /sandboxes: Allow names POST"
	error_shape '.' "405"
	rid_present "405"
	req $mode DELETE /sandbox/templates
	is "$STATUS" 405 "DELETE /sandbox/templates: 405"
	like "$(hdr Allow)" '^GET' "DELETE /sandbox/templates: Allow: GET"

	# Bad ids: 400 before any lookup, whatever the method.
	for bad in abc 0123456789abcdef0123456 0123456789abcdef012345678 0123456789ABCDEF01234567 \
		'0123456789abcdef0123456g' '%30123456789abcdef0123456'; do
		req $mode GET "/sandboxes/$bad"
		is "$STATUS" 400 "GET /sandboxes/$bad: 400"
		error_shape '^Invalid sandbox id$' "GET /sandboxes/$bad"
	done
	req $mode DELETE /sandboxes/nothex
	is "$STATUS" 400 "DELETE /sandboxes/nothex: 400"
	error_shape '^Invalid sandbox id$' "DELETE bad id"
	req $mode POST /sandboxes/nothex/pause '{}'
	is "$STATUS" 400 "POST /sandboxes/nothex/pause: 400"
	error_shape '^Invalid sandbox id$' "pause bad id"
	req $mode DELETE /sandboxes/snapshots/nothex
	is "$STATUS" 400 "DELETE /sandboxes/snapshots/nothex: 400"
	error_shape '^Invalid snapshot id$' "bad snapshot id"
	req $mode GET /volumes/nothex
	is "$STATUS" 400 "GET /volumes/nothex: 400"
	error_shape '^Invalid volume id$' "bad volume id"
	req $mode DELETE /volumes/0123456789abcdef0123456Z
	is "$STATUS" 400 "DELETE /volumes/<24 chars, not hex>: 400"
	error_shape '^Invalid volume id$' "bad volume id (24 chars)"

	# A well-formed unknown id.
	req $mode GET "/sandboxes/$(random_id)"
	is "$STATUS" 404 "unknown sandbox id: 404"
	error_shape '^Sandbox not found$' "unknown sandbox id"

	# Not implemented yet: 501, still the envelope.
	req $mode POST "/sandboxes/$(random_id)/exec" '{"cmd":"true"}'
	like "$STATUS" '^(404|501)$' "exec on an unknown sandbox: 404 or 501"
	error_shape '.' "exec"

	# /v1 equals the root, byte for byte (the message does not depend on it).
	for p in /sandbox/templates /sandboxes/regions /sandboxes /sandboxes/nothex /no/such "/sandboxes/$(random_id)"; do
		REQ_AUTH="Authorization: Bearer $OWN_KEY" req $mode GET "$p"
		s1=$STATUS b1=$BODY
		REQ_AUTH="Authorization: Bearer $OWN_KEY" req $mode GET "/v1$p"
		is "$STATUS $BODY" "$s1 $b1" "GET /v1$p answers as GET $p ($s1)"
	done
	req $mode GET /v1/healthz
	is "$STATUS" 200 "GET /v1/healthz: 200"
	req $mode GET /v2/sandboxes
	is "$STATUS" 404 "GET /v2/sandboxes: 404"
	req $mode GET /v1
	is "$STATUS" 404 "GET /v1 alone: 404"

	# Request ids: the client's when sane, else a generated one.
	rid="it-env.${mode}_$RANDOM-$$"
	req $mode GET /sandboxes -H "X-Request-Id: $rid"
	is "$(hdr X-Request-Id)" "$rid" "a sane client X-Request-Id is echoed"
	is "$(grep -ci '^x-request-id:' <<< "$HDRS")" 1 "exactly one X-Request-Id header"
	rid64=$(printf 'R%.0s' {1..63})9
	req $mode GET /sandboxes -H "X-Request-Id: $rid64"
	is "$(hdr X-Request-Id)" "$rid64" "a 64-character client id is echoed"
	for badrid in 'has space' 'semi;colon' "$(printf 'a%.0s' {1..65})" '<script>' ''; do
		req $mode GET /sandboxes -H "X-Request-Id: $badrid"
		got=$(hdr X-Request-Id)
		like "$got" '^[A-Za-z0-9._-]{1,64}$' "bad client id '${badrid:0:12}': a sane id instead"
		isnt "$got" "$badrid" "bad client id '${badrid:0:12}' is not echoed"
	done
	req $mode GET /sandboxes
	a=$(hdr X-Request-Id)
	req $mode GET /sandboxes
	isnt "$(hdr X-Request-Id)" "$a" "generated request ids differ between requests"

	# 401s carry one too.
	REQ_AUTH= req $mode GET /sandboxes
	is "$STATUS" 401 "no key: 401"
	rid_present "401"

	# The request id reaches the API's log.
	log=$(api_log)
	rid="it-log-$mode-$RANDOM$RANDOM"
	req $mode GET "/sandboxes/$(random_id)" -H "X-Request-Id: $rid"
	wait_until 10 grep -Eq " sbx-api[a-z-]*\[[0-9]+\] [a-z]+ req=$rid:" "$log"
	ok $? "the API log ($log) has lines with req=$rid"
	# A generated id: the one the client got is the one in the log.
	req $mode GET "/sandboxes/$(random_id)"
	rid=$(hdr X-Request-Id)
	wait_until 10 grep -Eq " sbx-api[a-z-]*\[[0-9]+\] [a-z]+ req=$rid:" "$log"
	ok $? "a generated request id ($rid) is the one in the API log"

	# ... and the worker's, for work the request caused.
	rid="it-wlog-$mode-$RANDOM$RANDOM"
	req $mode GET '/healthz?workers=1' -H "X-Request-Id: $rid"
	is "$STATUS" 200 "GET /healthz?workers=1: 200"
	is "$(j .data.workers)" ok "healthz?workers=1: data.workers ok"
	is "$(hdr X-Request-Id)" "$rid" "healthz?workers=1 echoes the request id"
	wlog=$(worker_log)
	wait_until 10 eval 'grep -Eq " sbx-worker[a-z-]*\[[0-9]+\] [a-z]+ req=$rid:" "$wlog"'
	ok $? "a worker log line ($wlog) carries req=$rid"
done

# nginx's own errors carry a request id and the envelope (nginx only).
T_SECTION=nginx
for try in 1 2 3; do # a reset before the answer is read is retried (see api-nginx.t)
	req nginx GET "/$(printf 'x%.0s' {1..20000})"
	[ "$STATUS" != 000 ] && break
done
like "$STATUS" '^(400|414)$' "20 kB URI: nginx refuses (400/414)"
rid_present "nginx's own error"
ok 'is_json' "nginx's own error is JSON"

finish
