#!/bin/bash
# The private stack: every process it started is alive under its pidfile,
# listens on loopback only, and the secrets it made are private.
. "$(dirname "$0")/lib.sh"
require_stack

# pid -> is a descendant of (or is) one of the stack's recorded processes.
declare -A ours=()
for f in "$SBX_STACK_DIR"/run/*.pid; do
	[ -s "$f" ] || continue
	pid=$(head -n1 "$f" | tr -dc 0-9)
	name=$(basename "$f" .pid)
	ok "[ -n '$pid' ] && kill -0 '$pid' 2> /dev/null" "$name: the pidfile's process $pid is alive"
	[ -n "$pid" ] && ours[$pid]=1
done
ok '[ ${#ours[@]} -ge 5 ]' "at least 5 pidfiles (pg, rabbitmq, registry, api, nginx, ...): ${#ours[@]}"

in_stack() {
	local p=$1 n=0
	while [ -n "$p" ] && [ "$p" -gt 1 ] && [ $n -lt 64 ]; do
		[ -n "${ours[$p]:-}" ] && return 0
		p=$(awk '/^PPid:/ {print $2}' "/proc/$p/status" 2> /dev/null)
		n=$((n + 1))
	done
	return 1
}

# Every listening TCP/UDP socket of those process trees is on loopback,
# but the node agent's DNS forwarder for sandboxes (egress, dns.c): port 53
# on the sandbox bridge's gateway address, which only sandboxes reach (the
# node's input chain lets only open and restricted ones through to it).
GW=$(python3 -c 'import ipaddress, sys; print(ipaddress.ip_network(sys.argv[1]).network_address + 1)' \
	"$(conf_get net_subnet | grep . || echo 10.213.0.0/16)")
nlisten=0
bad=""
while read -r line; do
	local_addr=$(awk '{print $5}' <<< "$line")
	for pid in $(grep -o 'pid=[0-9]*' <<< "$line" | cut -d= -f2 | sort -u); do
		in_stack "$pid" || continue
		nlisten=$((nlisten + 1))
		case $local_addr in
		127.*:* | \[::1\]:* | ::1:* | "$GW:53") ;;
		*) bad+=" $local_addr(pid $pid)" ;;
		esac
		break
	done
done < <(ss -Hlntup 2> /dev/null)
ok '[ $nlisten -ge 5 ]' "the stack's processes listen on $nlisten sockets"
is "$bad" "" "every one of them is on loopback"

for port in $SBX_PG_PORT $SBX_AMQP_PORT ${SBX_REGISTRY##*:} $SBX_HTTPS_PORT; do
	ok "ss -Hltn 'sport = :$port' | grep -q ." "something listens on port $port"
	is "$(ss -Hltn "sport = :$port" | awk '{print $4}' | grep -Ev '^(127\.[0-9.]+|\[::1\]):' | head -n1)" "" \
		"port $port is bound to loopback only"
done

is "$(stat -c %a "$SBX_STACK_DIR/api-key")" 600 "api-key is mode 600"
is "$(( 0$(stat -c %a "$SBX_CONF") & 07 ))" 0 "sbx.conf (holds auth_secret) is not readable by others"
like "$(conf_get auth_secret)" '^[0-9a-f]{64}$' "auth_secret is 64 hex digits"

finish
