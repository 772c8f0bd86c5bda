#!/bin/bash
# test: parallel
# lib.sh's HTTPS session (t/http/hsess, hs_req): the requests `req nginx`
# sends through it are the ones curl sent, and nginx answers them alike;
# it keeps one connection for them; a request it cannot take (a subshell's)
# still gets its answer through a curl of its own.
. "$(dirname "$0")/lib.sh"
require_stack

[ -n "$T_HSESS" ] || bail "t/http/hsess could not be built"

OWN_ORG=$(new_org it-hs)
OWN_KEY=$(new_key "$OWN_ORG")
AUTH="Authorization: Bearer $OWN_KEY"

# (no request here makes a sandbox: each is one the API refuses, or reads)

# what a response shows the client, less what differs from one request to
# the next (the date, the request id)
shown() {
	printf '%s\n%s\n%s' "$STATUS" "$(grep -viE '^(date|x-request-id):' <<< "$HDRS")" "$BODY"
}

# both METHOD PATH [BODY] [-H H]...: the same request through the session
# and through curl, compared
both() {
	local a b what="$*"
	what=${what:0:80}
	req nginx "$@" -H "$AUTH"
	a=$(shown)
	is "$HS_RC" 0 "$what: through the session"
	T_HS_OFF=1 req nginx "$@" -H "$AUTH"
	b=$(shown)
	is "$a" "$b" "$what: the same answer as curl's"
}

REQ_AUTH=""
HS_RC=x
both GET /sandboxes
both GET /sandbox/templates
both GET '/sandboxes?limit=1&state=running'
both POST /sandboxes '{"template":"no-such-template"}'
both POST /sandboxes '{"template":'
both POST /sandboxes/0123456789abcdef01234567/exec ''
both POST /sandboxes '{"template":"no-such-template"}' -H 'Content-Type: text/plain'
both DELETE /sandboxes/0123456789abcdef01234567
both DELETE /sandboxes/0123456789abcdef01234567 '{"x":1}'
both PUT /sandboxes
both GET /sandboxes/../sandboxes
both GET //sandboxes
both GET /no/such/path
both GET /sandboxes -H 'Accept:'
printf '{"template":"%0512d"}' 0 > "$T_TMP/big.json"
both POST /sandboxes "@$T_TMP/big.json"
REQ_AUTH="Authorization: Bearer sbx_$(printf '%064d' 0)"
req nginx GET /sandboxes
a=$(shown)
T_HS_OFF=1 req nginx GET /sandboxes
is "$a" "$(shown)" "a wrong key: the same 401 through both"
is "$STATUS" 401 "(a wrong key: 401)"
REQ_AUTH=""

# one connection for all of them: hsess holds exactly one TCP connection
# to nginx's port
port=${SBX_URL##*:}
port=${port%%/*}
conns=$(ss -Htnp state established "( dport = :$port )" 2> /dev/null | grep -c "pid=$T_HS_PID," || true)
is "$conns" 1 "the session keeps one connection to nginx (port $port) for its requests"

# a subshell's request goes through curl, and is answered
out=$(HS_RC=x; req nginx GET /sandboxes -H "$AUTH"; echo "$STATUS $HS_RC")
is "$out" "200 x" "a subshell's request: 200, through curl (the session untouched)"

# a session that is gone is started again at the next request
old=$T_HS_PID
kill "$old"
wait_until 10 eval '! hs_alive'
req nginx GET /sandboxes -H "$AUTH"
is "$STATUS $HS_RC" "200 0" "after the session ended: the next request starts another, 200"
isnt "$T_HS_PID" "$old" "(a new session process)"

finish
