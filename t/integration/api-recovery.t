#!/bin/bash
# test: any stack
# Postgres and RabbitMQ restarted under the running API: /healthz names the
# missing part (503) while it is down, and every API child reconnects after.
. "$(dirname "$0")/lib.sh"
require_stack

for f in sbx_pg_stop sbx_pg_start sbx_mq_stop sbx_mq_start; do
	declare -F $f > /dev/null || bail "scripts/stack-env does not define $f"
done

# Whatever happens, the shared stack gets its parts back.
pg_down=0 mq_down=0
restore() {
	[ $pg_down = 1 ] && { sbx_pg_start > /dev/null 2>&1; pg_down=0; }
	[ $mq_down = 1 ] && { sbx_mq_start > /dev/null 2>&1; mq_down=0; }
}
t_on_exit restore

children=$(conf_get api_children)
[[ $children =~ ^[0-9]+$ ]] || children=8
# More requests than children: each child must have reconnected on its own.
nreq=$((children * 3))

healthy() { REQ_AUTH= req fcgi GET /healthz; [ "$STATUS" = 200 ]; }
down_named() { REQ_AUTH= req fcgi GET /healthz; [ "$STATUS" = 503 ] && [ "$(j -r ".data.$1")" = down ]; }

# all_ok MODE PATH: nreq requests, every one 200, 20 at a time (one by one,
# five bursts took most of this file's time in starting client processes;
# the API answered each in about 2 ms). One client process for the burst:
# curl --parallel, fcgi-req -n (a shell, fcgi-req and head a request cost
# 6.1 CPU-s a burst of 240, fcgi-req -n 0.24).
all_ok() {
	local mode=$1 path=$2 auth=${REQ_AUTH-"Authorization: Bearer $SBX_KEY"} i codes
	local -a h=()
	[ -n "$auth" ] && h=(-H "$auth")
	if [ "$mode" = nginx ]; then
		: > "$T_TMP/urls"
		for ((i = 0; i < nreq; i++)); do
			printf 'url = "%s"\noutput = "/dev/null"\n' "$SBX_URL$path" >> "$T_TMP/urls"
		done
		codes=$(curl -sS --parallel --parallel-max 20 --cacert "$SBX_CACERT" --max-time 60 "${h[@]}" \
			-w '%{http_code}\n' -K "$T_TMP/urls" 2> "$T_TMP/err")
	else
		# one status line an answer
		codes=$("$FCGI_REQ" -t 60 -n "$nreq" -P 20 -s "$SBX_API_SOCKET" -m GET -u "$path" "${h[@]}" \
			2> "$T_TMP/err" | tr -d '\r' | awk '{print $2}')
	fi
	[ "$(printf '%s\n' "$codes" | grep -c '^200$')" = "$nreq" ] && return 0
	diag "$mode $path: $(printf '%s\n' "$codes" | grep -c '^200$') of $nreq answered 200; the others: $(printf '%s\n' "$codes" | grep -v '^200$' | sort | uniq -c | tr '\n' ' ') $(head -c 300 "$T_TMP/err" 2> /dev/null)"
	return 1
}

ok healthy "healthz 200 before"

# named: the API children's open Postgres sessions (their TCP connections,
# listed by ss) and how many of them say application_name sbx-api, which
# only a child's warm-up of a new session sets (src/api/warm.c), as "N/M"
named() {
	local ports
	ports=$(ss -tnpH state established "( dport = :$SBX_PG_PORT )" 2> /dev/null | grep '"sbx-api"' |
		awk '{ n = split($3, a, ":"); print a[n] }' | paste -sd, -)
	[ -n "$ports" ] || { echo "0/0"; return; }
	echo "$(psql_q "SELECT count(*) FROM pg_stat_activity WHERE client_port IN ($ports) AND application_name = 'sbx-api'")/$(tr ',' '\n' <<< "$ports" | wc -l)"
}
whole() { [ "${1#*/}" -gt 0 ] && [ "${1%/*}" = "${1#*/}" ]; } # N/M: all of at least one
warm_mark=$(log_mark)
sessions=$(named)
ok "whole '$sessions'" "every API child's session was warmed when it opened: $sessions named sbx-api"

for part in postgres rabbitmq; do
	T_SECTION=$part
	if [ $part = postgres ]; then
		pg_down=1
		sbx_pg_stop > "$T_TMP/stop.log" 2>&1
	else
		mq_down=1
		sbx_mq_stop > "$T_TMP/stop.log" 2>&1
	fi
	ok $? "$part stopped" || diag "$(tail -n 5 "$T_TMP/stop.log")"

	# The API notices (bounded: a child may first have to see its connection fail).
	wait_until 30 down_named $part
	ok $? "healthz reports $part down within 30 s"
	for mode in $MODES; do
		REQ_AUTH= req $mode GET /healthz
		is "$STATUS" 503 "[$mode] healthz 503 while $part is down"
		like "$(j -r .message)" "$part" "[$mode] healthz message names $part"
		is "$(j -r ".data.$part")" down "[$mode] healthz data.$part is down"
		like "$(hdr X-Request-Id)" '.' "[$mode] the 503 has an X-Request-Id"
	done
	other=$([ $part = postgres ] && echo rabbitmq || echo postgres)
	is "$(j -r ".data.$other")" ok "healthz data.$other still ok"
	if [ $part = postgres ]; then
		# Auth needs the database: an error answer, never a hang or a crash.
		req fcgi GET /sandboxes
		like "$STATUS" '^(500|503)$' "an authenticated request while Postgres is down: 5xx"
		ok is_json "... with a JSON body"
	fi

	t0=$SECONDS
	if [ $part = postgres ]; then
		sbx_pg_start > "$T_TMP/start.log" 2>&1
	else
		sbx_mq_start > "$T_TMP/start.log" 2>&1
	fi
	rc=$?
	ok $rc "$part started again" || diag "$(tail -n 5 "$T_TMP/start.log")"
	[ $part = postgres ] && pg_down=0 || mq_down=0

	wait_until 60 healthy
	ok $? "healthz 200 again within 60 s (took $((SECONDS - t0)) s)"
	for mode in $MODES; do
		all_ok $mode /sandboxes
		ok $? "[$mode] $nreq authenticated requests after $part came back: all 200"
	done
	if [ $part = postgres ]; then
		# a child that reconnected warms the new session after its answer
		sessions=$(named)
		ok "whole '$sessions'" "the sessions the children opened again are warmed too: $sessions named sbx-api"
	fi
	if [ $part = rabbitmq ]; then
		# Request/reply over RabbitMQ works again from every child (and the worker).
		wait_until 60 eval 'REQ_AUTH= req fcgi GET "/healthz?workers=1"; [ "$STATUS" = 200 ]'
		ok $? "healthz?workers=1 200 again within 60 s"
		REQ_AUTH= all_ok fcgi '/healthz?workers=1'
		ok $? "$nreq healthz?workers=1 after rabbitmq came back: all 200"
	fi
done
T_SECTION=
is "$(log_since "$warm_mark" | grep -c 'warming the Postgres session')" 0 \
	"no warm-up of a session failed (a statement of src/api/sql.h the server refused)"

finish
