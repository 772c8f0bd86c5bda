#!/bin/bash
# Runs last (alphabetically): after the whole suite, nothing of any sandbox
# is left on this node unless a live record owns it. Independent listings
# only: runsc list, /run/netns, the loop devices' backing files,
# /proc/self/mountinfo, the state directory, the nft table, host veths,
# cgroups, processes; and no record stuck in 'starting'. What is found is
# given a bounded time to go (a reaper pass may be finishing a destroy).
# What another stack on this machine owns (sb_foreign: scripts/test's second
# stack) is not counted; that stack's own run of this file checks it.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, nft, losetup" runsc nft ip jq
require_stack

REAPER_INTERVAL=$(conf_get reaper_interval)
: "${REAPER_INTERVAL:=10}"
WORKER=$SBX_STACK_DIR/worker
NODE=$(psql_q "SELECT id FROM nodes ORDER BY heartbeat_at DESC LIMIT 1")

# The ids live records own (a create in flight counts as live: it finishes
# or is undone; the last check says none is old).
# the placements of live records and of warm pool members: what names
# everything of theirs on the node
live_ids() {
	psql_q "SELECT placement_id FROM sandboxes WHERE status IN ('starting', 'ready', 'pausing', 'paused', 'resuming')
		UNION SELECT placement_id FROM warm_pool" | sort
}

# stray KIND: one line per thing of KIND no live record owns ("" = none).
stray() {
	local live x id
	live=$'\n'$(live_ids)$'\n'
	owned() { [[ $live == *$'\n'$1$'\n'* ]]; }
	case $1 in
	runsc)
		for id in $(sb_runsc list -quiet 2> /dev/null); do owned "$id" || echo "$id"; done ;;
	netns)
		for x in /run/netns/sbx-*; do
			[ -e "$x" ] || continue
			id=${x#/run/netns/sbx-}
			owned "$id" || sb_foreign "$id" || net_files_own "$id" || echo "$x"
		done ;;
	loop)
		for x in /sys/block/loop*/loop/backing_file; do
			[ -r "$x" ] || continue
			local b
			b=$(cat "$x" 2> /dev/null)
			[[ $b == "$WORKER/"* ]] || continue
			id=${b#"$WORKER/sandboxes/"}
			id=${id%%/*}
			[[ $b == "$WORKER/sandboxes/$id/disk.img" ]] && owned "$id" || echo "${x#/sys/block/} $b"
		done ;;
	mount)
		while IFS= read -r x; do
			id=${x#"$WORKER/sandboxes/"}
			id=${id%%/*}
			[[ $x == "$WORKER/sandboxes/$id/"* ]] && owned "$id" || echo "$x"
		done < <(sb_mounts_of "$WORKER/") ;;
	dir)
		for x in "$WORKER"/sandboxes/*; do
			[ -e "$x" ] || continue
			owned "${x##*/}" || echo "$x"
		done ;;
	nft)
		# per-sandbox chains (allow_ID, in_ID) and the map's "jump allow_ID"
		for id in $(sb_up nft list table inet sbx 2> /dev/null | grep -oE '(allow|in)_[0-9a-f]{24}' | sed 's/^[a-z]*_//' | sort -u); do
			owned "$id" || echo "nft:$id"
		done ;;
	veth)
		local pre
		pre=$(live_ids | cut -c1-9)
		for x in $(sb_up ip -o link show 2> /dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^sbxh[0-9a-f]{9}$'); do
			grep -qx "${x#sbxh}" <<< "$pre" || echo "$x"
		done ;;
	cgroup)
		for x in /sys/fs/cgroup/*/sbx/*; do
			[ -d "$x" ] || continue
			id=${x##*/}
			[[ $id =~ ^[0-9a-f]{24}$ ]] || continue
			owned "$id" || sb_foreign "$id" || echo "$x"
		done ;;
	procs)
		local all line
		all=$(ps -eo pid=,args=)
		while IFS= read -r line; do
			[[ $line == *runsc* && $line == *"$WORKER/sandboxes/"* ]] || continue
			id=${line#*"$WORKER/sandboxes/"}
			id=${id:0:24}
			owned "$id" || echo "${line:0:160}"
		done <<< "$all" ;;
	esac
}

# net_files_own ID: on a stack other than the first, ID is one of the
# net-*.t files' own (t/net/net-lib.sh's tid: 7e57...). Those run on the
# first stack, whose zz-leftovers comes after them; with --repeat another
# stack's comes whenever its own files of the run are done, which may be
# while they run (run 4 of a 5-run repeat counted two as left over).
net_files_own() {
	[ "${SBX_CPU_STACK:-stack-1}" != stack-1 ] && [[ $1 == 7e57* ]]
}

# A warm pool member is listed once it has started (pool.c): one whose start
# is under way at the first look is listed, or gone, at a second look 3 s
# later. What is stray at both looks is left over.
stray_twice() {
	local a b
	a=$(stray "$1")
	[ -n "$a" ] || return 0
	sleep 3
	b=$(stray "$1")
	comm -12 <(sort <<< "$a") <(sort <<< "$b")
}

KINDS="runsc netns loop mount dir nft veth cgroup procs"
all_clean() {
	local k
	for k in $KINDS; do [ -z "$(stray $k)" ] || return 1; done
}

plan 12
diag "live records: $(live_ids | wc -l); node $NODE"
# A destroy may still be on its way: give it two reaper passes.
wait_until $((2 * REAPER_INTERVAL + 10)) all_clean
is "$(stray_twice runsc | tr '\n' ' ')" "" "runsc list: every container has a live record"
is "$(stray_twice netns | tr '\n' ' ')" "" "/run/netns: no sbx-* netns without a live record"
is "$(stray_twice loop | tr '\n' ' ')" "" "no loop device backed by a file under $WORKER, except live sandboxes' disk.img"
is "$(stray_twice mount | tr '\n' ' ')" "" "/proc/self/mountinfo: no mount under $WORKER except live sandboxes'"
is "$(stray_twice dir | tr '\n' ' ')" "" "the state directory: no sandbox directory without a live record"
is "$(stray_twice nft | tr '\n' ' ')" "" "nft table inet sbx: no chain or map element of a sandbox without a live record"
is "$(stray_twice veth | tr '\n' ' ')" "" "no host veth sbxh* of a sandbox without a live record"
is "$(stray_twice cgroup | tr '\n' ' ')" "" "no sbx cgroup of a sandbox without a live record"
is "$(stray_twice procs | tr '\n' ' ')" "" "no runsc process (sentry, gofer) of a sandbox without a live record"

# The other way round: a record this node says is ready (and nobody asked
# to destroy) really runs here.
lying() {
	local id
	for id in $(psql_q "SELECT id FROM sandboxes WHERE status = 'ready' AND node_id = '$NODE' AND destroy_requested_at IS NULL"); do
		[ "$(sb_runsc_state "$id")" = running ] || echo "$id"
	done
}
wait_until 15 eval '[ -z "$(lying)" ]'
is "$(lying | tr '\n' ' ')" "" "every ready record of node $NODE has a running container (runsc state)"
is "$(psql_q "SELECT string_agg(id || ' (' || name || ')', ' ') FROM sandboxes WHERE status = 'starting' AND created_at < now() - interval '2 minutes'")" \
	"" "no record stuck in 'starting' for more than 2 minutes"
is "$(psql_q "SELECT string_agg(id, ' ') FROM sandboxes WHERE destroy_requested_at IS NOT NULL AND status NOT IN ('destroyed') AND destroy_requested_at < now() - interval '2 minutes'")" \
	"" "no destroy asked for more than 2 minutes ago and still not done"

finish
