#!/bin/bash
# nginx in front of the API: its own errors are JSON with a request id (413,
# 404, 414, 502 with the API gone), and path tricks (`..`, `//`, `%2F`)
# reach the API raw, exactly as they do over FastCGI directly.
. "$(dirname "$0")/lib.sh"
require_stack

not_html() {
	unlike "$BODY" '<(html|HTML|center|body)' "$1: not HTML"
	ok is_json "$1: a JSON body"
	like "$(hdr Content-Type)" '^application/json' "$1: Content-Type application/json"
	like "$(hdr X-Request-Id)" '^[A-Za-z0-9._-]{1,64}$' "$1: X-Request-Id"
	is "$(grep -ci '^x-request-id:' <<< "$HDRS")" 1 "$1: exactly one X-Request-Id"
}

T_SECTION=nginx

# 413 from nginx itself (client_max_body_size), before the API.
big=$T_TMP/big.json
{ printf '{"name":"'; head -c $((3 * 1024 * 1024)) /dev/zero | tr '\0' a; printf '"}'; } > "$big"
req nginx POST /sandboxes "@$big"
is "$STATUS" 413 "3 MiB body: 413"
error_shape '.' "3 MiB body"
not_html "nginx 413"
req nginx POST /sandboxes "@$big" -H 'X-Request-Id: it-nginx-413'
is "$(hdr X-Request-Id)" it-nginx-413 "nginx 413 echoes the client's request id"

# Unknown paths answer the JSON 404 (from the API; nginx serves no files).
for p in /favicon.ico /index.html /nope /.env /sandboxes/x/y/z/w; do
	req nginx GET "$p"
	like "$STATUS" '^(400|404)$' "GET $p: 404 (400 for a bad id)"
	not_html "GET $p"
done

# Too long a URI: nginx's own 414/400, JSON. nginx answers with part of the
# request unread; `lingering_close always` makes it read the rest before it
# closes, so the answer always arrives (without it the kernel's reset lost
# it in about one try of five). One try: a lost answer is a failure.
req nginx GET "/sandboxes?$(printf 'q%.0s' {1..40000})"
like "$STATUS" '^(400|414)$' "40 kB URI: 400/414"
not_html "long URI"

# Path tricks: what the API sees through nginx is the raw path, so the answer
# equals the one over FastCGI; and nothing is served as the normalised path.
for auth in yes no; do
	for p in /sandboxes/../healthz /v1/../healthz /sandboxes/./../healthz //healthz /./healthz \
		/sandbox%2Ftemplates /sandboxes/%2E%2E/healthz /sandboxes/..%2Fhealthz \
		"/sandboxes/$(random_id)/../../healthz" /sandbox//templates /sandboxes/regions/.. \
		/sandboxes/%2e%2e /healthz/.. /healthz/../sandboxes; do
		if [ $auth = no ]; then
			REQ_AUTH= req nginx GET "$p"
		else
			req nginx GET "$p"
		fi
		sn=$STATUS mn=$(j -r .message)
		isnt "$mn" ok "[key:$auth] GET $p through nginx is not served as /healthz"
		if [ $auth = no ]; then
			REQ_AUTH= req fcgi GET "$p"
		else
			req fcgi GET "$p"
		fi
		is "$sn $mn" "$STATUS $(j -r .message)" "[key:$auth] GET $p: nginx and FastCGI answer alike ($sn)"
	done
done
REQ_AUTH= req nginx GET /sandbox%2Ftemplates
isnt "$STATUS" 200 "/sandbox%2Ftemplates is not the templates route"
req nginx GET /sandbox//templates
isnt "$(j -r '.data.templates | type' 2> /dev/null)" array "/sandbox//templates is not the templates route"

# 502 with the API gone: stop sbx-api by its pidfile's pid, then start it
# again the way the stack does.
pidfile=${SBX_API_PIDFILE:-$SBX_STACK_DIR/run/sbx-api.pid}
pid=$(head -n1 "$pidfile" 2> /dev/null | tr -dc 0-9)
like "$pid" '^[0-9]+$' "sbx-api pidfile names a pid"
api_restarted=0
restart_api() {
	[ $api_restarted = 1 ] && return 0
	api_restarted=1
	if declare -F sbx_api_start > /dev/null; then
		sbx_api_start > "$T_TMP/api-start.log" 2>&1
	else
		"$SBX_API_BIN" -c "$SBX_CONF" -d > "$T_TMP/api-start.log" 2>&1
	fi
}
# Whatever happens below, the shared stack gets its API back.
t_on_exit restart_api
if [ -n "$pid" ] && kill -TERM "$pid" 2> /dev/null; then
	wait_until 60 eval '! kill -0 $pid 2> /dev/null'
	ok $? "sbx-api (pid $pid) exited after SIGTERM"
	req nginx GET /sandboxes -H 'X-Request-Id: it-nginx-502'
	is "$STATUS" 502 "API gone: 502"
	error_shape '.' "502"
	not_html "nginx 502"
	is "$(hdr X-Request-Id)" it-nginx-502 "502 echoes the client's request id"
	REQ_AUTH= req nginx GET /healthz
	is "$STATUS" 502 "healthz with the API gone: 502"
else
	skip 10 "could not signal sbx-api"
fi
restart_api
ok $? "sbx-api started again (sbx_api_start)"
wait_until 30 test -S "$SBX_API_SOCKET"
wait_until 30 eval 'REQ_AUTH= req nginx GET /healthz; [ "$STATUS" = 200 ]'
ok $? "through nginx, healthz is 200 again"
req nginx GET /sandboxes
is "$STATUS" 200 "an authenticated request works again"
newpid=$(head -n1 "$pidfile" 2> /dev/null | tr -dc 0-9)
isnt "$newpid" "$pid" "a new sbx-api master runs"

finish
