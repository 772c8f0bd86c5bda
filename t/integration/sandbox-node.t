#!/bin/bash
# test: parallel, slow
# One node's sandboxes (workers/sandbox.c through t/sandbox/sandboxctl):
# start, run commands, disk and memory limits, destroy without a trace, and
# failed starts (a real step failing, the driver killed with SIGKILL) that
# leave nothing. Root only. Sandboxes live in a state directory of this test;
# the template comes from the stack's node state (templates/unpack). The
# bridge and the sandboxes' network live in a private uplink namespace, so the
# host's network is untouched and nothing can leave the machine.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, ip, nft, losetup" runsc ip nft losetup mkfs.ext4 cc

: "${SBX_REGISTRY:=127.0.0.1:25000}"
TEMPLATES=$SBX_STACK_DIR/worker/templates
if [ ! -e "$TEMPLATES/debian-12/current" ]; then
	"$SBX_REPO/templates/build" --registry "$SBX_REGISTRY" > "$T_TMP/tmpl.log" 2>&1 &&
	"$SBX_REPO/templates/unpack" --registry "$SBX_REGISTRY" --state "$SBX_STACK_DIR/worker" debian-12 \
		>> "$T_TMP/tmpl.log" 2>&1 ||
		bail "no debian-12 template in $TEMPLATES and build/unpack failed: $(tail -3 "$T_TMP/tmpl.log")"
fi

# The driver: the build's (scripts/test makes it), made again by the build's
# own rules when a source is newer (a developer's run).
ctl_bin() {
	make -s -C "$SBX_BUILD" t/sandbox/sandboxctl >&2 || return 1
	echo "$SBX_BUILD/t/sandbox/sandboxctl"
}
# sbx-init: the build's, else compiled static here; without it the stand-in
# PID 1 (sleep infinity) and runsc exec.
init_bin() {
	local b=$SBX_BUILD/src/init/sbx-init own=$T_TMP/sbx-init
	[ -x "$b" ] && { echo "$b"; return 0; }
	[ -f "$SBX_REPO/src/init/main.c" ] || return 0
	cc -O2 -static -I"$SBX_BUILD" -I"$SBX_REPO/src/lib" -o "$own" "$SBX_REPO"/src/init/*.c \
		"$SBX_REPO/src/lib/frame.c" "$SBX_REPO/src/lib/err.c" >&2 2> /dev/null && echo "$own"
}
CTL=$(ctl_bin) || bail "cannot build t/sandbox/sandboxctl"
INIT=$(init_bin)

# Our own state directory; the node's templates through a symlink (read-only
# use: the overlay's lower layer).
STATE=$(t_node_state)
ln -s "$TEMPLATES" "$STATE/templates"
UP=sbxt-sbup-$$
BR=sbxs$(( $$ % 100000 ))
IDS=$T_TMP/ids
: > "$IDS"
ctl() { "$CTL" --state "$STATE" --uplink "$UP" --bridge "$BR" --subnet 10.214.0.0/16 ${INIT:+--init "$INIT"} "$@"; }
newid() { local id; id=$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n'); echo "$id" >> "$IDS"; echo "$id"; }
# through sbx-init (or runsc exec), never into a regular file: runsc exec
# overwrites a non-append stdout file (doc/runsc-notes.md)
sx() { ctl exec "$@" 2>&1 | cat; return "${PIPESTATUS[0]}"; }

cleanup() {
	local id m
	while read -r id; do [ -n "$id" ] && ctl destroy "$id" > /dev/null 2>&1; done < "$IDS"
	# Anything still mounted under the state dir (a failed test): unmount
	# before removing, never remove through a mount.
	for m in $(awk -v s="$STATE/" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2> /dev/null
	done
	rm -rf --one-file-system "$STATE"
	ip netns del "$UP" 2> /dev/null
}
t_on_exit cleanup

# leftovers ID...: what an independent listing still finds of these ids
# (empty = nothing): runsc's containers, mounts, loop devices, netns, nft
# chains and map elements, directories, cgroups.
leftovers() {
	local id out=""
	for id in "$@"; do
		runsc --root "$STATE/runsc" list -quiet 2> /dev/null | grep -qx "$id" && out+=" runsc:$id"
		grep -q "$STATE/sandboxes/$id" /proc/self/mountinfo && out+=" mount:$id"
		losetup -a | grep -q "$STATE/sandboxes/$id" && out+=" loop:$id"
		ip netns list | grep -q "sbx-$id" && out+=" netns:$id"
		nsenter --net="/run/netns/$UP" -- nft list table inet sbx 2> /dev/null | grep -q "${id:0:9}" && out+=" nft:$id"
		[ -e "$STATE/sandboxes/$id" ] && out+=" dir:$id"
		[ -e "/sys/fs/cgroup/memory/sbx/$id" ] && out+=" cgroup:$id"
		ps -eo args | grep -v grep | grep -q "runsc-sandbox.* $id\$" && out+=" sentry:$id"
	done
	echo "${out# }"
}

plan 35

ip netns add "$UP" || bail "cannot make netns $UP"
ctl net-setup 2> "$T_TMP/err" || bail "net-setup: $(cat "$T_TMP/err")"
diag "driver $CTL; init ${INIT:-stand-in (sleep infinity)}; state $STATE"

# ---- start and run -----------------------------------------------------------
A=$(newid)
ctl start "$A" --memory 256 --disk 1 2> "$T_TMP/err"
ok $? "start: a sandbox with 256 MB and 1 GB starts ($(head -c 300 "$T_TMP/err"))"
is "$(ctl alive "$A")" alive "alive: its sentry runs"
out=$(sx "$A" -- sh -c 'python3 -c "print(6*7)"; node -e "console.log(\"node ok\")"; git --version')
like "$out" '^42.*node ok.*git version [0-9]' "python3, node and git run inside"
out=$(sx "$A" -- sh -c 'cat /proc/net/dev; hostname; id -u')
like "$out" "eth0:.*sbx-${A:0:12}.*0" "it has its own eth0 (veth), hostname sbx-<id> and runs as root inside"
out=$(sx "$A" -- cat /proc/meminfo)
like "$out" 'MemTotal: +262144 kB' "the memory limit is what the sandbox sees (256 MiB)"

# ---- disk: ENOSPC inside, the host bounded by the image ----------------------
# What the sandbox holds on the host (its directory: disk image, rootfs,
# logs), not the filesystem's free space (a CI run saw that fall by
# 1,383 MiB while this sandbox held 1 GiB: a template build beside it).
held0=$(dir_kb "$STATE/sandboxes/$A")
# the disk is a copy of the node's empty 1 GB image (workers/disk.c): the
# copy kept its holes, and nothing half-made is left beside the image
img0=$(du -k "$STATE/sandboxes/$A/disk.img" | cut -f1)
ok "[ -f '$STATE/disk-templates/ext4-v1-1g.img' ] && [ ${img0:-99999} -lt 16384 ] && [ -z \"\$(ls '$STATE/disk-templates' | grep -v '^ext4-v1-[0-9]*g\.img\$')\" ]" \
	"the disk is a sparse copy of the node's 1 GB image (${img0} KiB used; templates: $(ls "$STATE/disk-templates" 2>&1 | tr '\n' ' '))"
out=$(sx "$A" -- sh -c 'dd if=/dev/zero of=/fill bs=1M count=1500 2>&1; sync; df -k / | tail -1')
like "$out" 'No space left on device' "writing 1.5 GB into a 1 GB disk ends with ENOSPC inside"
used=$(du -k "$STATE/sandboxes/$A/disk.img" | cut -f1)
held1=$(dir_kb "$STATE/sandboxes/$A")
ok "[ -n '$held1' ] && [ $used -le 1048576 ] && [ $(( ${held1:-9999999} - ${held0:-0} )) -lt 1153434 ]" \
	"the host paid at most the disk size (image uses ${used} KiB; the sandbox's directory grew $(( (${held1:-0} - ${held0:-0}) / 1024 )) MiB)"
out=$(sx "$A" -- sh -c 'rm -f /fill && echo removed')
like "$out" removed "the filled disk can be freed inside"

# ---- memory bomb: killed process or dead sandbox; the neighbour lives ----------
B=$(newid)
ctl start "$B" --memory 256 --disk 1 2> "$T_TMP/err"
ok $? "a second sandbox starts before the bomb ($(head -c 300 "$T_TMP/err"))"
oom0=$(ctl oom "$A")
out=$(sx "$A" -- python3 -c '
b = []
for i in range(64):
    b.append(bytearray(8 << 20))
print("survived", len(b) * 8, "MiB")')
brc=$?
sleep 1
alive=$(ctl alive "$A")
oom1=$(ctl oom "$A")
unlike "$out" survived "a python allocating 512 MiB (2x the limit) does not survive (exit $brc)"
if [[ $alive == alive ]]; then
	ok "[ $oom1 -gt $oom0 ]" "the sandbox survived with the process OOM-killed (oom_kill $oom0 -> $oom1)"
	out=$(sx "$A" -- echo still-usable)
	like "$out" still-usable "and the sandbox still runs commands"
else
	like "$alive" 'dead: killed: out of memory' "the sandbox died and alive says why: $alive"
	ok 0 "(sandbox dead: nothing more to run in it)"
fi
is "$(ctl alive "$B")" alive "the neighbour sandbox is still alive"
out=$(sx "$B" -- echo neighbour-ok)
like "$out" neighbour-ok "and runs commands"

# ---- destroy leaves nothing --------------------------------------------------------
# A mount no start makes (a tmpfs in B's directory, as an operator's by
# hand): destroy unmounts the start's own without reading mountinfo, and
# finds this one by the scan when the directory will not go.
mkdir "$STATE/sandboxes/$B/extra" && mount -t tmpfs -o size=1m sbx-extra "$STATE/sandboxes/$B/extra" &&
	echo kept > "$STATE/sandboxes/$B/extra/f"
ok $? "a tmpfs mounted in B's directory by hand"
ctl destroy "$A" 2> "$T_TMP/err" && ctl destroy "$B" 2>> "$T_TMP/err"
ok $? "destroy both, B with the tmpfs ($(head -c 300 "$T_TMP/err"))"
is "$(leftovers "$A" "$B")" "" "nothing left: runsc list, mountinfo, losetup, ip netns, nft, state dir, cgroups, processes"
is "$(ctl list)" "" "sandbox_list finds nothing either"
ctl destroy "$A" 2> "$T_TMP/err"
ok $? "destroy is idempotent ($(head -c 200 "$T_TMP/err"))"

# ---- failed starts leave nothing ------------------------------------------------------
C=$(newid)
ctl start "$C" --memory 256 --disk 100000 > /dev/null 2> "$T_TMP/err"
rc=$?
like "$rc $(cat "$T_TMP/err")" '^1 .*step disk' "a disk of 100000 GB fails at the disk step: $(head -c 200 "$T_TMP/err")"
is "$(leftovers "$C")" "" "and leaves nothing"
D=$(newid)
ctl start "$D" --template no-such-template > /dev/null 2> "$T_TMP/err"
like "$? $(cat "$T_TMP/err")" "^1 .*no-such-template.*not on this node" "a missing template is refused"
is "$(leftovers "$D")" "" "and leaves nothing"
E=$(newid)
"$CTL" --state "$STATE" --uplink "$UP" --bridge "$BR" --subnet 10.214.0.0/16 --runsc /bin/false \
	start "$E" > /dev/null 2> "$T_TMP/err"
like "$? $(cat "$T_TMP/err")" '^1 .*step runsc' "a runsc that fails fails the last step (everything else made)"
is "$(leftovers "$E")" "" "and everything made before is undone"

# SIGKILL of the driver at several points of a start, then destroy.
left=""
for delay in 0.01 0.03 0.06 0.1 0.15 0.2 0.3 0.45; do
	K=$(newid)
	# the driver itself, not a subshell around it: the kill must reach it
	"$CTL" --state "$STATE" --uplink "$UP" --bridge "$BR" --subnet 10.214.0.0/16 ${INIT:+--init "$INIT"} \
		start "$K" --memory 256 --disk 1 > /dev/null 2>&1 &
	pid=$!
	sleep $delay
	kill -9 $pid 2> /dev/null
	wait $pid 2> /dev/null
	ctl destroy "$K" 2> "$T_TMP/err" || left+=" destroy($delay):$(head -c 200 "$T_TMP/err")"
	l=$(leftovers "$K")
	[ -n "$l" ] && left+=" after $delay s: $l"
done
is "$left" "" "a driver killed with SIGKILL mid-start (8 points from 10 to 450 ms), then destroy: nothing left"

# ---- ten at once ----------------------------------------------------------------------------
ten=()
failed=""
for i in $(seq 10); do
	id=$(newid)
	ten+=("$id")
	ctl start "$id" --memory 128 --disk 1 2> "$T_TMP/err" || failed+=" $i:$(head -c 200 "$T_TMP/err")"
done
is "$failed" "" "10 sandboxes start"
n=0
for id in "${ten[@]}"; do [ "$(ctl alive "$id")" = alive ] && n=$((n + 1)); done
is "$n" 10 "all 10 are alive at once"
is "$(ctl list)" "$(printf '%s\n' "${ten[@]}" | sort)" "sandbox_list lists exactly those 10"
failed=""
for id in "${ten[@]}"; do ctl destroy "$id" 2> "$T_TMP/err" || failed+=" $(head -c 200 "$T_TMP/err")"; done
is "$failed" "" "all 10 are destroyed"
is "$(leftovers "${ten[@]}")" "" "and nothing of them is left"

# ---- a node agent's process: subreaper, fast destroy ------------------------------------------
out=$(SBX_CYCLE_IDS=$IDS ctl cycle 3 --memory 128 --disk 1 2> "$T_TMP/err")
ok $? "start+destroy x3 in one process ($(head -c 200 "$T_TMP/err"))"
slow=$(awk '$2 > 1500' <<< "$out")
is "$slow" "" "destroy under a reaping subreaper takes well under the 1.6 s of an orphaned sentry ($(tr '\n' ';' <<< "$out"))"

is "$(ls -A "$STATE/sandboxes" 2> /dev/null)" "" "the state dir holds no sandbox at the end"
finish
