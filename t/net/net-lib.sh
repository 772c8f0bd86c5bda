# Shared by t/integration/net-*.t (sourced after t/integration/lib.sh).
#
# Builds a private world in network namespaces, so no packet can leave the
# machine: an uplink namespace holding the sbx bridge and table (the node's
# side), and a "public" test host routed only inside it. Everything made is
# removed by net_cleanup (called from the EXIT trap).
#
#   uplink  $UP:  bridge $BR with 10.213.0.1/16; up-pub 192.0.2.1/24;
#                 ip_forward on (in this namespace only); a route for
#                 169.254.169.254 to the test host.
#   public  $PUB: eth0 192.0.2.10/24 and 169.254.169.254/32, default via
#                 192.0.2.1; a TCP listener on port 8080.
#   Sandbox namespaces sbx-<id> are made by netctl and live in /run/netns.

NET_SALT=$(( ($$ * 7 + RANDOM) % 4096 ))
UP=sbxt-up-$$
PUB=sbxt-pub-$$
BR=sbxt0
SUBNET=10.213.0.0/16
GW=10.213.0.1
PORT=8080
NET_PIDS=()

[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP needs root"; exit 0; }
for p in ip nft socat timeout; do
	command -v $p > /dev/null || { echo "1..0 # SKIP $p is missing"; exit 0; }
done

# The driver: the build's (scripts/test makes it), made again by the build's
# own rules when a source is newer (a developer's run).
netctl_bin() {
	make -s -C "$SBX_BUILD" t/net/netctl >&2 || return 1
	echo "$SBX_BUILD/t/net/netctl"
}
NETCTL_BIN=$(netctl_bin) || bail "cannot build t/net/netctl"
netctl() { "$NETCTL_BIN" -u "$UP" -b "$BR" -s "$SUBNET" "$@"; }
# net_list, this run's ids only: sandbox netns live in the shared /run/netns,
# so other runs' (and a real node's) sandboxes show up there too.
netlist() { netctl list | grep "^7e57$(printf %03x "$NET_SALT")"; }

# tid N: a sandbox id for this run; the first 9 hex (the veth name) differ per N.
tid() {
	local id
	id=$(printf '7e57%03x%02x' "$NET_SALT" "$1")$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')$(printf '%07x' $RANDOM)
	id=${id:0:24}
	echo "$id" >> "$T_TMP/net-ids" # tid runs in $(...): an array would not survive
	echo "$id"
}

in_up() { nsenter --net="/run/netns/$UP" -- "$@"; }
in_pub() { nsenter --net="/run/netns/$PUB" -- "$@"; }
in_sbx() { local id=$1; shift; nsenter --net="/run/netns/sbx-$id" -- "$@"; }

# probe NETNS IP [PORT]: a bounded TCP connect from inside NETNS.
probe() { nsenter --net="/run/netns/$1" -- timeout 2 bash -c "</dev/tcp/$2/${3:-$PORT}" 2> /dev/null; }

# listen NETNS: a TCP listener on 0.0.0.0:$PORT inside NETNS (killed by pid).
listen() {
	nsenter --net="/run/netns/$1" -- socat TCP-LISTEN:$PORT,reuseaddr,fork EXEC:/bin/true > /dev/null 2>&1 &
	NET_PIDS+=($!)
	wait_until 5 bash -c "nsenter --net='/run/netns/$1' -- ss -ltnH 2>/dev/null | grep -q ':$PORT '"
}

net_world() {
	ip netns add "$UP" || return 1
	ip netns add "$PUB" || return 1
	ip -n "$UP" link set lo up &&
	ip -n "$PUB" link set lo up &&
	in_up sysctl -qw net.ipv4.ip_forward=1 &&
	ip -n "$UP" link add up-pub type veth peer name eth0 netns "$PUB" &&
	ip -n "$UP" addr add 192.0.2.1/24 dev up-pub &&
	ip -n "$UP" link set up-pub up &&
	ip -n "$PUB" addr add 192.0.2.10/24 dev eth0 &&
	ip -n "$PUB" addr add 169.254.169.254/32 dev eth0 &&
	ip -n "$PUB" link set eth0 up &&
	ip -n "$PUB" route add default via 192.0.2.1 &&
	ip -n "$UP" route add 169.254.169.254/32 via 192.0.2.10
}

# nft_rule CHAIN RULE...: inserts a rule at the head of CHAIN; prints its handle.
nft_rule() {
	local chain=$1
	shift
	in_up nft --echo --handle insert rule inet sbx "$chain" "$@" | sed -n 's/.*# handle \([0-9]*\).*/\1/p' | tail -n1
}
nft_unrule() { in_up nft delete rule inet sbx "$1" handle "$2"; }

# leftovers ID: what an independent listing still finds of one sandbox.
leftovers() {
	local id=$1 veth=sbxh${1:0:9} out=""
	[ -e "/run/netns/sbx-$id" ] && out+="netns "
	ip netns list | grep -q "^sbx-$id\b" && out+="ip-netns "
	ip -n "$UP" -o link show | grep -q "$veth[@:]" && out+="veth "
	in_up nft list table inet sbx 2> /dev/null | grep -q "$id" && out+="nft "
	ip -n "$UP" neigh show | grep -qi "02:${id:0:2}:${id:2:2}:${id:4:2}:${id:6:2}:${id:8:2}" && out+="neigh "
	echo "$out"
}

net_cleanup() {
	local p id
	for p in "${NET_PIDS[@]}"; do kill "$p" 2> /dev/null; done
	for p in "${NET_PIDS[@]}"; do wait "$p" 2> /dev/null; done
	if [ -f "$T_TMP/net-ids" ]; then
		while read -r id; do
			[ -e "/run/netns/sbx-$id" ] && ip netns del "sbx-$id"
		done < "$T_TMP/net-ids"
	fi
	# The bridge, veths, table and routes all live in these two.
	ip netns del "$PUB" 2> /dev/null
	ip netns del "$UP" 2> /dev/null
	rm -f "/run/lock/sbx-net.$UP.$BR.lock"
}
trap 'T_RC=$?; net_cleanup; (exit $T_RC); t_end' EXIT
