#!/bin/bash
# test: parallel
# Requests per second per API key (issue 15; src/api/ratelimit.c): crossed.
#  - organisation A gets --key-rate 1 --key-burst 3 with sbx-admin: a run
#    of 20 requests with A's key as fast as the test can send them (well
#    under the 17 s they would need at 1/s) meets 429 key_rate_limit, with a
#    whole-seconds Retry-After and a message naming the limit, over FastCGI
#    and through nginx;
#  - the bucket is shared by all API children: 24 requests sent 8 at a time
#    (so over several children) get at most 3 + 1 per second elapsed (+1)
#    answers that are not 429; a bucket per child would let through
#    about 3 per child;
#  - another key of A has a bucket of its own; organisation B (the stack's
#    settings: api_key_rate_per_s 0, no limit) is not limited;
#  - back to the settings (--key-rate default), A's key is not limited.
# The stack's api_key_rate_per_s is 0, so these limits are A's overrides.
. "$(dirname "$0")/lib.sh"
require_stack

ORG_A=$(new_org it-rate-a)
KEY_A=$(new_key "$ORG_A")
KEY_A2=$(new_key "$ORG_A")
ORG_B=$(new_org it-rate-b)
KEY_B=$(new_key "$ORG_B")
[[ $KEY_A =~ ^sbx_[0-9a-f]{64}$ && $KEY_A2 =~ ^sbx_[0-9a-f]{64}$ && $KEY_B =~ ^sbx_[0-9a-f]{64}$ ]] ||
	bail "cannot make the organisations and keys: $(cat "$T_TMP/admin.err")"

admin org limits "$ORG_A" --key-rate 1 --key-burst 3
ok $? "sbx-admin org limits --key-rate 1 --key-burst 3"
like "$(admin org list 2> /dev/null | grep "^$ORG_A")" 'key_rate=1 key_burst=3' "org list shows A's rate"
admin org limits "$ORG_A" --key-rate x 2> /dev/null
is "$?" 2 "--key-rate takes a whole number"

# burst KEY MODE N: N requests with KEY one after the other; leaves the
# first 429 in STATUS/BODY/HDRS (or the last answer); prints the count of
# answers that were not 429.
burst() {
	local key=$1 mode=$2 n=$3 i passed=0 s429="" b429="" h429=""
	for ((i = 0; i < n; i++)); do
		REQ_AUTH="Authorization: Bearer $key" req "$mode" GET /sandboxes
		if [ "$STATUS" = 429 ]; then
			[ -z "$s429" ] && s429=$STATUS b429=$BODY h429=$HDRS
		else
			passed=$((passed + 1))
		fi
	done
	if [ -n "$s429" ]; then STATUS=$s429 BODY=$b429 HDRS=$h429; fi
	echo "$passed" > "$T_TMP/passed"
}

for mode in fcgi nginx; do
	T_SECTION=$mode
	# let A's bucket fill again (a burst of 3 at 1/s: 3 s)
	sleep 4
	burst "$KEY_A" $mode 20
	is "$STATUS" 429 "20 quick requests with A's key: 429"
	is "$(j .code)" key_rate_limit "... code key_rate_limit"
	error_shape 'at most 1 per second' "... naming the limit"
	like "$(hdr Retry-After)" '^[1-9][0-9]*$' "... Retry-After in whole seconds"
	passed=$(cat "$T_TMP/passed")
	ok "$([ "$passed" -ge 3 ] && [ "$passed" -lt 20 ] && echo 0 || echo 1)" \
		"... the burst of 3 went through, not all 20 (got $passed)"
done
T_SECTION=""

# One bucket for all children: 24 requests, 8 at a time.
sleep 4
t0=$SECONDS
for ((i = 0; i < 24; i++)); do
	"$FCGI_REQ" -t 30 -s "$SBX_API_SOCKET" -m GET -u /sandboxes -H "Authorization: Bearer $KEY_A" \
		2> /dev/null | head -n1 > "$T_TMP/par.$i" &
	[ $((i % 8)) = 7 ] && wait
done
wait
elapsed=$((SECONDS - t0))
passed=$(cat "$T_TMP"/par.* | grep -vc ' 429')
ok "$([ "$passed" -le $((3 + elapsed + 1)) ] && echo 0 || echo 1)" \
	"24 requests 8 at a time: $passed not 429 in ${elapsed}s (at most $((3 + elapsed + 1))): one bucket for all children"

# A's other key and organisation B are not held back by A's key.
REQ_AUTH="Authorization: Bearer $KEY_A2" req fcgi GET /sandboxes
is "$STATUS" 200 "A's other key: its own bucket"
burst "$KEY_B" fcgi 20
is "$(cat "$T_TMP/passed")" 20 "B on the settings (no limit): 20 of 20 quick requests answered"

# Back to the settings: no limit for A either (the API's caches are emptied
# through LISTEN sbx_auth; allow the notification a moment).
admin org limits "$ORG_A" --key-rate default --key-burst default
ok $? "sbx-admin org limits --key-rate default"
unlimited() {
	burst "$KEY_A" fcgi 10
	[ "$(cat "$T_TMP/passed")" = 10 ]
}
wait_until 10 unlimited
ok $? "A back on the settings: 10 of 10 quick requests answered"

finish
