# Shared by t/integration/egress-*.t (sourced after lib.sh): the stack's node
# agent is moved, for the length of the test, onto a private "internet" made
# of network namespaces on this machine, so no packet a sandbox sends can
# leave it (DESIGN.md, Tests and network safety):
#
#   uplink $EUP (net_uplink_netns of the worker while the test runs): the
#       bridge sbx0 and the sbx table; up-pub 192.0.2.1/24; a default route
#       to the test host, so whatever a broken rule lets out lands there.
#   test host $EPUB: eth0 192.0.2.10/24 plus 198.51.100.20, 203.0.113.30
#       ("public"), 10.99.0.10 (an internal range, RFC 1918), 100.64.0.10
#       (CGNAT) and 169.254.169.254 (a fake metadata server); servers log
#       every connection with the address it reached ($EG_LOG).
#
# The worker's config gets two settings (net_uplink_netns, and net_resolver
# for the test's DNS server, each after a marker line) and a SIGHUP;
# eg_restore takes them out again and reloads, after the test's sandboxes
# are gone.

t_require --root "network namespaces, nft and the stack's worker" ip nft socat jq python3
require_stack

EUP=sbxe-up-$$
EPUB=sbxe-pub-$$
EG_LOG=$T_TMP/pub.log
EG_PIDS=()
EG_CONF_MARK="# added by t/integration/egress-*.t (removed by its clean-up)"
EG_CONF_TOUCHED=0
GW=10.213.0.1

in_eup() { in_netns "$EUP" "$@"; }
in_epub() { in_netns "$EPUB" "$@"; }

# eg_serve NAME PORT [tcp|udp] [BIND]: a server on the test host that logs
# "NAME <address it was reached at>" for each connection and answers NAME.
eg_serve() {
	local name=$1 port=$2 proto=${3:-tcp} l
	if [ "$proto" = udp ]; then
		l="UDP-RECVFROM:$port,reuseaddr,fork"
	else
		l="TCP-LISTEN:$port,reuseaddr,fork"
	fi
	[ -n "${4:-}" ] && l+=",bind=$4"
	nsenter --net="/run/netns/$EPUB" -- socat "$l" SYSTEM:"echo $name \$SOCAT_SOCKADDR >> $EG_LOG; echo $name" > /dev/null 2>&1 &
	EG_PIDS+=($!)
}

eg_world() {
	: > "$EG_LOG"
	chmod 666 "$EG_LOG"
	ip netns add "$EUP" && ip netns add "$EPUB" || return 1
	ip -n "$EUP" link set lo up &&
	ip -n "$EPUB" link set lo up &&
	ip -n "$EUP" link add up-pub type veth peer name eth0 netns "$EPUB" &&
	ip -n "$EUP" addr add 192.0.2.1/24 dev up-pub &&
	ip -n "$EUP" link set up-pub up &&
	ip -n "$EPUB" addr add 192.0.2.10/24 dev eth0 &&
	for a in 198.51.100.20 203.0.113.30 10.99.0.10 100.64.0.10 169.254.169.254; do
		ip -n "$EPUB" addr add "$a/32" dev eth0 || return 1
	done &&
	ip -n "$EPUB" link set eth0 up &&
	ip -n "$EPUB" route add default via 192.0.2.1 &&
	ip -n "$EUP" route add default via 192.0.2.10 || return 1
	# test hosts: public 8080 and 8081 (every address), UDP 5353, metadata on 80
	eg_serve web 8080
	eg_serve other-port 8081
	eg_serve udp 5353 udp
	eg_serve metadata 80 tcp 169.254.169.254
	# the node itself (gateway and uplink address)
	nsenter --net="/run/netns/$EUP" -- socat TCP-LISTEN:8080,reuseaddr,fork SYSTEM:"echo node \$SOCAT_SOCKADDR >> $EG_LOG; echo node" \
		> /dev/null 2>&1 &
	EG_PIDS+=($!)
	wait_until 30 bash -c "nsenter --net=/run/netns/$EPUB -- ss -ltnH | grep -q ':8081 ' && nsenter --net=/run/netns/$EUP -- ss -ltnH | grep -q ':8080 '"
}


eg_reload() {
	local mark
	mark=$(log_mark)
	kill -HUP "$(worker_master)" || return 1
	wait_until 40 node_agent_ready_since "$mark"
}

# eg_use_world: the worker's node agent builds its network in $EUP (the
# agent that stops takes its warm pool members down in its own network).
# On a stack whose network has a namespace of its own already (scripts/test's
# other stacks: net_uplink_netns = sbxstackK), that line is commented out
# for the length of the test (a setting given twice is refused) and
# eg_leave_world puts it back: "the host" below is then that namespace.
EG_UPLINK_OFF="#egress-test-off# "
eg_use_world() {
	cp -p "$SBX_CONF" "$T_TMP/conf.orig"
	sed -i "s/^\([[:space:]]*net_uplink_netns[[:space:]]*=\)/$EG_UPLINK_OFF\1/" "$SBX_CONF"
	printf '%s\nnet_uplink_netns = %s\n%s\nnet_resolver = 192.0.2.10\n' "$EG_CONF_MARK" "$EUP" "$EG_CONF_MARK" \
		>> "$SBX_CONF"
	EG_CONF_TOUCHED=1
	eg_reload && in_eup nft list chain inet sbx postrouting > /dev/null 2>&1
}

# eg_leave_world: the worker's config as it was, and a reload (the node
# agent builds its network on the host, or in its stack's own namespace,
# again).
eg_leave_world() {
	[ $EG_CONF_TOUCHED = 1 ] || return 0
	conf_unmark "$EG_CONF_MARK"
	sed -i "s/^$EG_UPLINK_OFF//" "$SBX_CONF"
	EG_CONF_TOUCHED=0
	eg_reload
}

eg_restore() {
	local p
	sb_cleanup
	eg_leave_world || echo "# the worker did not come back after restoring its config" >&2
	# socat ... fork: each connection has a child of its own (the long-lived
	# one outlives its listener): children first
	for p in "${EG_PIDS[@]}"; do pkill -P "$p" 2> /dev/null; kill "$p" 2> /dev/null; done
	for p in "${EG_PIDS[@]}"; do wait "$p" 2> /dev/null; done
	ip netns del "$EPUB" 2> /dev/null
	ip netns del "$EUP" 2> /dev/null
	rm -f "/run/lock/sbx-net.$EUP.sbx0.lock"
	return 0
}
t_on_exit eg_restore

# eg_org: an organisation and key for this test (REQ_AUTH).
eg_org() {
	local org key
	org=$(new_org "$1")
	key=$(new_key "$org")
	[[ $key =~ ^sbx_[0-9a-f]{64}$ ]] || bail "cannot make an organisation and key"
	admin org limits "$org" --max-sandboxes 20 > /dev/null 2>&1
	export REQ_AUTH="Authorization: Bearer $key"
}

# eg_new EGRESS_JSON: creates a sandbox with that egress ("" = none); SB_ID.
eg_new() {
	sb_create nginx "{\"specs\":{\"memory\":256,\"disk\":1}${1:+,\"egress\":$1}}"
}

# tcp ID IP PORT: from inside the sandbox, connects (3 s at most: a host of
# the test answers within milliseconds on an idle machine, not on a loaded
# one; a dropped SYN waits it out) and prints what the server answered, or
# "fail" (no-probe when the probe never ran).
# udp ID IP PORT: a datagram every 0.3 s until one is answered (3 s), the
# same way: UDP promises no delivery, so one lost datagram (or its answer)
# must not read as "blocked" (egress-modes.t's open-mode UDP check failed
# so once in CI).
# Both are one probe of probes (below); they reset PROBE.
tcp() { probes "$1" "tcp:$2:$3" && echo "${PROBE[tcp:$2:$3]}"; }
udp() { probes "$1" "udp:$2:$3" && echo "${PROBE[udp:$2:$3]}"; }

# probes ID SPEC...: each SPEC (tcp:IP:PORT or udp:IP:PORT) tried side by
# side in one process inside the sandbox (a probe that must fail waits out
# its 3 s, and one by one a file spent most of its time waiting);
# PROBE[SPEC] is the first line the server answered, "fail", or no-probe
# when the probe did not run at all (so a check for "fail" cannot pass on
# a probe that never ran).
declare -A PROBE
PROBE_PY='
import socket, sys, threading, time
res = {}
def one(spec):
    kind, ip, port = spec.split(":")
    end = time.monotonic() + 3
    try:
        if kind == "tcp":
            s = socket.create_connection((ip, int(port)), timeout=3)
            s.settimeout(max(0.1, end - time.monotonic()))
            res[spec] = s.recv(100).decode().strip() or "fail"
            return
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        while time.monotonic() < end:
            s.sendto(b"x", (ip, int(port)))
            s.settimeout(min(0.3, max(0.01, end - time.monotonic())))
            try:
                res[spec] = s.recv(100).decode().strip() or "fail"
                return
            except socket.timeout:
                pass
        res[spec] = "fail"
    except Exception:
        res[spec] = "fail"
ts = [threading.Thread(target=one, args=(a,)) for a in sys.argv[1:]]
for t in ts: t.start()
for t in ts: t.join()
for a in sys.argv[1:]: print(a, res.get(a, "fail"))
'
probes() {
	local id=$1 spec got line
	shift
	PROBE=()
	for spec in "$@"; do
		[[ $spec =~ ^(tcp|udp):[0-9.]+:[0-9]+$ ]] || { echo "probes: bad spec $spec" >&2; return 2; }
		PROBE[$spec]=no-probe
	done
	got=$(sb_exec "$id" "python3 -c '$PROBE_PY' $*" 2> /dev/null)
	while read -r spec line; do
		[ -n "${PROBE[$spec]+x}" ] && [ -n "$line" ] && PROBE[$spec]=$line
	done <<< "$got"
	return 0
}

# sb_ip ID: the sandbox's address (no packet is sent to learn it).
sb_ip() {
	sb_exec "$1" "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('$GW', 9)); print(s.getsockname()[0])\""
}

# reached ADDR: how many connections the test hosts logged at ADDR.
reached() { grep -c " $1\$" "$EG_LOG"; }

# eg_break_nft: the uplink's NAT set is removed (the rules using it first),
# so the node's next egress transaction really fails.
eg_break_nft() {
	in_eup nft flush chain inet sbx postrouting && in_eup nft flush chain inet sbx node_allow &&
		in_eup nft delete set inet sbx nat4
}

# eg_nft_of ID: what the uplink's sbx table still holds of a sandbox (its
# chains, map element, NAT membership), by an independent listing.
eg_nft_of() {
	local id ip=${2:-} t
	id=$(sb_place "$1")
	t=$(in_eup nft list table inet sbx 2> /dev/null)
	[[ $t == *"$id"* ]] && echo -n "chain-or-element "
	if [ -n "$ip" ]; then
		in_eup nft list set inet sbx nat4 2> /dev/null | grep -qw "$ip" && echo -n "nat4 "
		in_eup nft list map inet sbx sandboxes 2> /dev/null | grep -qw "$ip" && echo -n "map "
	fi
	ip -n "$EUP" -o link show | grep -q "sbxh${id:0:9}" && echo -n "veth "
	[ -e "/run/netns/sbx-$id" ] && echo -n "netns "
	echo
}
