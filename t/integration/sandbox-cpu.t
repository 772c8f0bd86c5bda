#!/bin/bash
# test: parallel
# specs.cpu (MHz shares, 1000 = one core; API.md allows 1..2000) on the host:
#  - the smallest, cpu 1, makes a sandbox that is ready and runs commands
#    (before, runsc was given a CFS quota of 100 us, under the kernel's 1 ms
#    floor: EINVAL, and every create under 10 MHz failed; under ~100 MHz
#    gVisor's boot did not finish within start_timeout);
#  - its cgroup has the weight asked (cpu.shares, the kernel's floor of 2)
#    and the cap's floor, 100 MHz = 10 % of a core (workers/oci.c);
#  - cpu 2000 is two cores' cap and weight;
#  - the cap bites: a busy loop for 3 s in the cpu-1 sandbox is given at
#    most 10 % of a core by the kernel (its cgroup's CPU time grows by well
#    under a second; without a cap it takes a whole core);
#  - a cgroup still busy when its sandbox is destroyed (a task in it not yet
#    gone: seen with a sentry held to a 1 % quota, here a host process the
#    test puts in it) is not left behind for good: the destroy answers, the
#    sandbox's directory stays while the cgroup is busy, and once it is free
#    the orphan pass removes both (before, the directory went, the cgroup
#    stayed, and nothing ever came back for it).
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, the sandboxes' cgroups" runsc jq curl
rt_begin
rt_setup it-cpu

# cg_read PLACE v1-controller v1-file v2-file: one cgroup file of the sandbox
cg_read() {
	local f=/sys/fs/cgroup/$2/sbx/$1/$3
	[ -r "$f" ] || f=/sys/fs/cgroup/sbx/$1/$4
	cat "$f" 2> /dev/null
}
# the cap as "quota period" in microseconds
cg_cap() {
	local q p
	q=$(cg_read "$1" cpu cpu.cfs_quota_us cpu.max)
	if [[ $q == *" "* ]]; then echo "$q"; return; fi
	p=$(cg_read "$1" cpu cpu.cfs_period_us none)
	echo "$q $p"
}
# the weight: cpu.shares (v1), or cpu.weight (v2, converted by runsc)
cg_weight() { cg_read "$1" cpu cpu.shares cpu.weight; }
# CPU time used so far, in microseconds
cg_usage() {
	local f=/sys/fs/cgroup/cpuacct/sbx/$1/cpuacct.usage
	if [ -r "$f" ]; then echo $(($(cat "$f") / 1000)); return; fi
	awk '$1 == "usage_usec" { print $2 }' "/sys/fs/cgroup/sbx/$1/cpu.stat" 2> /dev/null
}
v1() { [ -d /sys/fs/cgroup/cpu/sbx ]; }

# made_with CPU QUOTA SHARES WHAT: a sandbox of specs.cpu CPU is ready, runs a
# command, and its cgroup has the cap QUOTA us per 100 ms and the weight
# SHARES (cpu.shares on v1; v2's cpu.weight is runsc's conversion, only
# checked to be set). MADE is its id, PLACE its placement.
made_with() {
	sb_create nginx "{\"name\":\"it-cpu-$1\",\"specs\":{\"cpu\":$1,\"memory\":256,\"disk\":1}}"
	MADE=$SB_ID
	is "$STATUS $(j .data.status) $(j .data.specs.cpu)" "201 ready $1" "cpu $1: 201 ready, specs.cpu echoed ($(j .message))"
	is "$(rt_sh "$MADE" 'echo alive')" alive "it runs a command"
	PLACE=$(sb_place "$MADE")
	is "$(cg_cap "$PLACE")" "$2 100000" "its cap is $4: $2 us per 100 ms period"
	if v1; then
		is "$(cg_weight "$PLACE")" "$3" "its weight: cpu.shares $3"
	else
		like "$(cg_weight "$PLACE")" '^[0-9]+$' "its weight is set (cpu.weight $(cg_weight "$PLACE"))"
	fi
}

# ---- cpu 1: the smallest the API takes -------------------------------------------
T_SECTION=cpu-1
# (shares 2: the kernel's floor)
made_with 1 10000 2 "the floor (100 MHz)"
A=$MADE
PA=$PLACE

# ---- cpu 2000: two cores ------------------------------------------------------------
T_SECTION=cpu-2000
made_with 2000 200000 2048 "two cores"

# ---- the cap bites --------------------------------------------------------------------
T_SECTION=cap
u0=$(cg_usage "$PA")
like "$u0" '^[0-9]+$' "the cpu-1 sandbox's cgroup counts its CPU time ($u0 us)"
t0=$(date +%s%N)
out=$(rt_sh "$A" 'timeout 3 sh -c "while :; do :; done"; echo done' 60)
t1=$(date +%s%N)
u1=$(cg_usage "$PA")
wall=$(((t1 - t0) / 1000))
used=$((u1 - u0))
diag "busy loop: ${used} us of CPU in ${wall} us of wall time"
is "$out" done "the busy loop ran and ended"
# the kernel gives the cgroup at most 10 ms per 100 ms period (plus one
# period's slack): a quarter of the wall time is far above that, and far
# below the whole core an uncapped loop takes
ok "[ $used -le $((wall / 4 + 100000)) ]" "it was held to its cap: ${used} us of CPU in ${wall} us (<= a quarter)"

# ---- a cgroup busy at destroy ---------------------------------------------------------
T_SECTION=busy-cgroup
REAPER_INTERVAL=$(conf_get reaper_interval)
: "${REAPER_INTERVAL:=10}"
rt_new it-cpu-busy
C=$RT_ID
PC=$(sb_place "$C")
sleep 300 &
hold=$!
kill_hold() { kill "$hold" 2> /dev/null; return 0; }
t_on_exit rt_kill_bg sb_cleanup kill_hold
# The holder goes into the cpu hierarchy only (cgroup v1): a teardown kills
# the tasks of the first of pids, freezer, memory it finds (runsc.c
# cgroup_tasks), so a holder in the memory cgroup was killed by the first
# orphan pass after the destroy (every 2 s here), and whether that came
# before the two points below was a race (lost in run 3 of a 5-run
# repeat, 2026-12-04). In the cpu cgroup it holds until the test kills it,
# whatever the passes do. Under cgroup v2 there is one hierarchy, which
# teardown kills from: there the points below hold only until the next pass.
moved=0
for f in /sys/fs/cgroup/cpu/sbx/$PC/cgroup.procs /sys/fs/cgroup/sbx/$PC/cgroup.procs; do
	[ -w "$f" ] && echo "$hold" > "$f" && moved=$((moved + 1)) && break
done
ok "[ $moved -gt 0 ]" "a host process is in the sandbox's cgroup"
req nginx DELETE "/sandboxes/$C"
is "$STATUS" 204 "the destroy answers 204"
gone_rec() { req nginx GET "/sandboxes/$C"; [ "$(j .data.status)" = destroyed ]; }
wait_until 60 gone_rec
ok $? "the sandbox is destroyed for its owner (GET: $STATUS $(j .data.status))"
has_cg() { compgen -G "/sys/fs/cgroup/*/sbx/$PC" > /dev/null; }
ok has_cg "while the process holds it, the cgroup is still there"
ok "[ -d '$SB_STATE/sandboxes/$PC' ]" "...and so is the sandbox's directory, for the orphan pass to find"
kill "$hold" 2> /dev/null
wait "$hold" 2> /dev/null
nothing_left() { [ -z "$(sb_leftovers "$PC")" ]; }
wait_until $((3 * REAPER_INTERVAL + 30)) nothing_left
is "$(sb_leftovers "$PC")" "" "once the cgroup is free, the orphan pass removes it and the directory"

finish
