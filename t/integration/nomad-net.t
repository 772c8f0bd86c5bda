#!/bin/bash
# test: any stack, heavy
# Sandboxes placed by the Nomad driver get the sbx network with the same
# egress policy as local ones (issue 14). The stack's worker is pointed at
# the Nomad contract server (t/nomad-contract/server.py, NOT Nomad), which
# runs the task through the test's dockerd with runsc (nomadlib.sh) and
# plays the client's CNI networking as Nomad documents it: a pause
# container per allocation, the plugins of the network "sbx" from the
# test's cni_config_dir run with ADD against its netns, the task joining it.
# The network's plugin is sbx-cni (workers/sbx-cni.c), which asks this
# node's agent (nomad_cni_socket) to wire the namespace as it wires a local
# sandbox's. The agent's network lives in the egress tests' private
# "internet" of network namespaces (egresslib.sh): nothing leaves the
# machine. Proves, with real traffic from inside gVisor, through the API:
#  - deny_all: the task has eth0 with an address of the node's pool, its
#    veth on the node's bridge, its nft chain; a public test host, the
#    metadata address and the node are not reached;
#  - restricted: the allowed host:port answers, a host outside the list
#    does not (and logged nothing);
#  - open: a public test host answers; metadata and the node do not;
#  - PUT /sandboxes/ID/egress switches a Nomad sandbox deny_all -> open ->
#    deny_all, each in force when the answer arrives;
#  - destroy: no veth, netns name, nft chain or map element, CNI note,
#    pause container or task container is left;
#  - a create whose rules cannot be put in force (the uplink's NAT set is
#    gone: the open policy's nft transaction really fails) is a 503, its
#    record failed, its network and containers gone.
#  - the node's network moved back to the host (net_uplink_netns) while a
#    Nomad sandbox runs: its destroy takes its network down in the test
#    uplink it was made in (the agent's CNI note records it).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/egresslib.sh"
. "$(dirname "$0")/nomadlib.sh"

t_require --root "dockerd, runsc and the stack's worker config" python3 jq curl runsc
[ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ] || { echo "1..0 # SKIP docker.io is not installed"; exit 0; }

plan 44

NODE=$(conf_get node_id)
[ -n "$NODE" ] || NODE=$(hostname)
NC_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
NC_PID=""
NC_PORT=""
NM_CONF_MARK="# added by t/integration/nomad-net.t (removed by its clean-up)"
NM_CONF_TOUCHED=0
STATE=$(conf_get state_dir)
: "${STATE:=$SBX_STACK_DIR/worker}"
CNI_SOCK=$SBX_STACK_DIR/nomad-cni.sock

nc_start() {
	printf '%s\n' "$NC_TOKEN" > "$T_TMP/nomad-token"
	chmod 600 "$T_TMP/nomad-token"
	mkdir -p "$T_TMP/cni"
	# the operator's network "sbx" (doc/nomad.md), its plugin sbx-cni
	printf '{"cniVersion": "1.0.0", "name": "sbx", "plugins": [{"type": "sbx-cni", "socket": "%s"}]}\n' \
		"$CNI_SOCK" > "$T_TMP/cni/sbx.conflist"
	python3 "$SBX_REPO/t/nomad-contract/server.py" --port-file "$T_TMP/nc.port" --token-file "$T_TMP/nomad-token" \
		--node-name "$NODE" --volumes-enabled --docker-host "unix://$ND_DIR/docker.sock" \
		--alloc-dir "$ND_DIR/alloc" --cni-path "$SBX_BUILD/workers" --cni-config-dir "$T_TMP/cni" \
		2> "$T_TMP/nc.log" &
	NC_PID=$!
	nc_wait_port
}

t_on_exit nm_restore eg_restore

# ntcp ID IP PORT: from inside the Nomad sandbox (exec through the API),
# connects (1.5 s at most) and prints what the server answered, or "fail".
ntcp() {
	local out
	out=$(rt_sh "$1" "python3 -c \"import socket; s=socket.create_connection(('$2', $3), timeout=3); print(s.recv(100).decode().strip())\" 2>/dev/null || echo fail" 20)
	echo "${out:-fail}"
}
# nput ID POLICY_JSON: PUT the sandbox's egress; STATUS/BODY.
nput() { req nginx PUT "/sandboxes/$1/egress" "$2" -H 'Content-Type: application/json'; }
# nnew EGRESS_JSON: a sandbox through Nomad with that egress; SB_ID.
nnew() { sb_create nginx "{\"specs\":{\"memory\":256,\"disk\":1},\"egress\":$1}"; }
# nleft ID: what is left of a Nomad sandbox's network and containers
# (independent listings: the uplink's nft table and links, /run/netns, the
# agent's CNI notes, Docker's containers); empty: nothing.
nleft() {
	local id=$1 alloc=$2 out=""
	out+=$(eg_nft_of "$id" "${3:-}")
	[ -e "$STATE/nomad-net/$id" ] && out+="cni-note "
	[ -n "$alloc" ] && [ -n "$(dk ps -aq --filter "name=^(sandbox|nomad_init)[-_]$alloc\$")" ] && out+="containers "
	echo "$out"
}

# ---- set-up ------------------------------------------------------------------
T_SECTION=setup
eg_world || bail "cannot build the test namespaces"
eg_use_world; r=$?; ok $r "the node agent runs its network in the test uplink $EUP"; [ $r = 0 ] || bail "the node agent did not come up in the test uplink"
eg_org it-nomad-net
nd_start
ok $? "the test's dockerd runs (runsc registered as a runtime)" || bail "dockerd did not start: $(tail -n 5 "$ND_DIR/dockerd.log")"
REGISTRY=$(conf_get registry_url)
nd_pull "${REGISTRY#*://}/sbx/templates/debian-12:latest" || bail "the test's dockerd could not pull the debian-12 template"
nc_start
ok $? "the contract server listens, its client runs CNI from $SBX_BUILD/workers with the network sbx" ||
	bail "no contract server: $NC_WHY"
for kv in "driver = nomad" "nomad_addr = http://127.0.0.1:$NC_PORT" "nomad_token_file = $T_TMP/nomad-token" \
	"nomad_init_path = $SBX_BUILD/src/init/sbx-init" "nomad_alloc_dir = $ND_DIR/alloc" \
	"nomad_cni_socket = $CNI_SOCK"; do
	printf '%s\n%s\n' "$NM_CONF_MARK" "$kv" >> "$SBX_CONF"
done
NM_CONF_TOUCHED=1
nm_reload
ok $? "the worker reloaded with driver = nomad" || bail "the worker did not reload"
is "$(stat -c '%a %U' "$CNI_SOCK" 2> /dev/null)" "600 root" "the node agent serves the CNI socket, root only"

# ---- deny_all ----------------------------------------------------------------------
T_SECTION=deny_all
nnew '{"mode":"deny_all"}'
D=$SB_ID
is "$STATUS $(j .data.egress.mode) $(sb_db "$D" "nomad_job_id")" "201 deny_all sbx-$D" "deny_all through Nomad: 201"
DA=$(sb_db "$D" nomad_alloc_id)
is "$(dk inspect -f '{{.HostConfig.NetworkMode}} {{.HostConfig.Runtime}}' "sandbox-$DA" 2> /dev/null)" \
	"container:$(dk inspect -f '{{.Id}}' "nomad_init_$DA" 2> /dev/null) runsc" \
	"the task (runsc) joined the allocation's pause container's network namespace"
DIP=$(rt_sh "$D" "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('$GW', 9)); print(s.getsockname()[0])\"")
like "$DIP" '^10\.213\.0\.[0-9]+$' "inside, eth0 has an address of the node's pool ($DIP)"
like "$(ip -n "$EUP" -o link show master sbx0 2> /dev/null)" "sbxh${D:0:9}" "its veth is on the node's bridge (in the uplink)"
ok "$(in_eup nft list chain inet sbx "allow_$D" > /dev/null 2>&1 && in_eup nft list chain inet sbx "in_$D" > /dev/null 2>&1; echo $?)" \
	"its nft chains are in the node's table"
ok "$([ -e "/run/netns/sbx-$D" ] && [ "$(head -n1 "$STATE/nomad-net/$D" 2> /dev/null)" = "$DA" ]; echo $?)" \
	"its namespace is named sbx-ID; the agent noted the allocation it wired"
is "$(sed -n 2p "$STATE/nomad-net/$D" 2> /dev/null)" "uplink $EUP" "...and the uplink it wired it in"
like "$(rt_sh "$D" 'cat /etc/resolv.conf')" "^nameserver $GW" \
	"its resolver is the node's forwarder on the gateway (the DNS of sbx-cni's result)"
is "$(ntcp "$D" 192.0.2.10 8080)" fail "deny_all: a public test host is not reached"
is "$(ntcp "$D" 169.254.169.254 80)" fail "deny_all: the metadata address is not reached"
is "$(ntcp "$D" "$GW" 8080)" fail "deny_all: the node (gateway) is not reached"
is "$(reached 192.0.2.10)$(reached 169.254.169.254)$(reached "$GW")" 000 "deny_all: no test host logged a connection"

# ---- restricted ---------------------------------------------------------------------
T_SECTION=restricted
nnew '{"mode":"restricted","allow":["192.0.2.10:8080"]}'
R=$SB_ID
RA=$(sb_db "$R" nomad_alloc_id)
is "$STATUS $(j .data.egress.mode)" "201 restricted" "restricted through Nomad: 201"
is "$(ntcp "$R" 192.0.2.10 8080)" web "restricted: the allowed host:port answers"
is "$(ntcp "$R" 203.0.113.30 8080)" fail "restricted: a host outside the list is not reached"
is "$(ntcp "$R" 192.0.2.10 8081)" fail "restricted: another port of the allowed host is not reached"
is "$(reached 203.0.113.30)$(grep -c '^other-port ' "$EG_LOG")" 00 "restricted: the denied host and port logged nothing"

# ---- open -----------------------------------------------------------------------------
T_SECTION=open
nnew '{"mode":"open"}'
O=$SB_ID
OA=$(sb_db "$O" nomad_alloc_id)
is "$STATUS $(j .data.egress.mode)" "201 open" "open through Nomad: 201"
is "$(ntcp "$O" 198.51.100.20 8080)" web "open: a public test host answers"
is "$(ntcp "$O" 169.254.169.254 80)" fail "open: the metadata address is not reached"
is "$(ntcp "$O" "$GW" 8080)" fail "open: the node is not reached"

# ---- switching ---------------------------------------------------------------------------
T_SECTION=switch
nput "$D" '{"mode":"open"}'
is "$STATUS $(j .data.egress.mode)" "200 open" "PUT egress open on the Nomad sandbox: 200"
is "$(ntcp "$D" 192.0.2.10 8080)" web "...a public test host answers at once"
nput "$D" '{"mode":"deny_all"}'
is "$STATUS" 200 "PUT egress deny_all: 200"
is "$(ntcp "$D" 192.0.2.10 8080)" fail "...and it is not reached any more"
is "$(sb_db "$D" egress_mode)" deny_all "the record shows the policy in force"

# ---- destroy -----------------------------------------------------------------------------
T_SECTION=destroy
RIP=$(rt_sh "$R" "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('$GW', 9)); print(s.getsockname()[0])\"")
for id in "$D" "$R" "$O"; do req nginx DELETE "/sandboxes/$id" > /dev/null; done
all_left() { echo "$(nleft "$D" "$DA" "$DIP")$(nleft "$R" "$RA" "$RIP")$(nleft "$O" "$OA")"; }
nothing_left() { [ -z "$(all_left)" ]; }
wait_until 40 nothing_left
is "$(all_left)" "" "after destroy: no veth, netns, nft chain or map element, CNI note or container of the three"
ok "$(! ls "$STATE/nomad-net/" 2> /dev/null | grep -q .; echo $?)" "the agent's CNI notes are all gone"
unlike "$(cat "$T_TMP/nc.log")" "CNI DEL for" "every DEL the client ran succeeded (the agent had removed the network first)"

# ---- the node's network moved before the destroy -----------------------------------------
# An operator moves the node agent's network (net_uplink_netns) while a Nomad
# sandbox runs: its network is taken down where it was made, as a local
# sandbox's is (egress-uplink-change.t), not in the node's new uplink.
T_SECTION=uplink
nnew '{"mode":"deny_all"}'
U=$SB_ID
UA=$(sb_db "$U" nomad_alloc_id)
is "$STATUS" 201 "a Nomad sandbox wired in the test uplink"
UIP=$(rt_sh "$U" "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('$GW', 9)); print(s.getsockname()[0])\"")
like "$(eg_nft_of "$U" "$UIP")" "chain-or-element" "...its rules are in the test uplink's table ($UIP)"
eg_leave_world; r=$?; ok $r "the node agent is back on the host"
req nginx DELETE "/sandboxes/$U" > /dev/null
# (a sandbox that was never made would leave nothing either: UIP says it was)
u_left() { if [[ $UIP =~ ^10\. ]]; then nleft "$U" "$UA" "$UIP"; else echo "never made"; fi; }
u_gone() { [ -z "$(u_left)" ]; }
wait_until 40 u_gone
is "$(u_left)" "" "destroyed from the host: nothing of it is left in the test uplink (table, links, netns, note, containers)"
eg_use_world; r=$?; ok $r "the node agent runs its network in the test uplink again"; [ $r = 0 ] || bail "the node agent did not come back to the test uplink"

# ---- a create whose rules cannot be put in force ---------------------------------------
T_SECTION=failure
eg_break_nft
ok $? "the uplink's NAT set is removed (an open policy's transaction fails)"
nnew '{"mode":"open"}'
F=$SB_ID
is "$STATUS" 503 "open create through Nomad while its rules cannot be installed: 503"
is "$(sb_db "$F" status)" failed "...its record is failed"
like "$(sb_db "$F" failure_reason)" "egress|nft" "...with the reason ($(sb_db "$F" failure_reason | head -c 120))"
FA=$(sb_db "$F" nomad_alloc_id)
f_gone() { [ -z "$(nleft "$F" "$FA")" ]; }
wait_until 40 f_gone
is "$(nleft "$F" "$FA")" "" "...nothing of its network or containers is left"

finish
