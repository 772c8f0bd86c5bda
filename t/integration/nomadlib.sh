# The client side of the Nomad contract server (t/nomad-contract/server.py
# --docker-host): Debian's Docker engine (docker.io) with runsc registered as
# a runtime through nomad/runsc-docker, as doc/nomad.md configures a Nomad
# client. The test starts its own dockerd: its data, exec root, socket and
# the allocation directories live under the stack's directory; it does not
# touch the host's firewall (--iptables=false, no bridge) and its containers
# are removed, and it is stopped, by nd_stop (t_on_exit).

ND_DIR=""
ND_PID=""
# its containers' cgroup parent, the stack's own (a Nomad file runs on any
# of scripts/test's stacks, beside another stack's Nomad file)
ND_CG=sbx-nomad-test-${SBX_PORT_SHIFT:-0}

# dk ARGS...: the test's Docker engine.
dk() { /usr/bin/docker -H "unix://$ND_DIR/docker.sock" "$@"; }

# Its data root (images, layers, containerd's metadata) is a tmpfs: on disk,
# every docker run waits for fsyncs, and behind a template build's writes
# (run 1 of a CI run builds the other templates in the background) those
# took so long that the first create through Nomad failed with "allocation
# pending" after start_timeout (run 1 of a 5-run repeat on a fresh machine),
# which says nothing of the driver. nd_stop unmounts it.
nd_start() {
	ND_DIR=$SBX_STACK_DIR/nomad-docker
	mkdir -p "$ND_DIR/alloc" "$ND_DIR/data" || return 1
	mountpoint -q "$ND_DIR/data" ||
		mount -t tmpfs -o size=6g,mode=0711 sbx-nomad-docker "$ND_DIR/data" || return 1
	cat > "$ND_DIR/daemon.json" << EOF2
{"runtimes": {"runsc": {"path": "$SBX_REPO/nomad/runsc-docker",
                        "runtimeArgs": ["--platform=systrap", "--host-uds=create", "--overlay2=none"]}}}
EOF2
	setsid /usr/sbin/dockerd --config-file "$ND_DIR/daemon.json" --data-root "$ND_DIR/data" \
		--exec-root "$ND_DIR/exec" --pidfile "$ND_DIR/dockerd.pid" -H "unix://$ND_DIR/docker.sock" \
		--iptables=false --ip-forward=false --ip-masq=false --bridge=none --cgroup-parent="/$ND_CG" \
		--containerd-namespace sbx-nomad-test --containerd-plugins-namespace sbx-nomad-test-plugins \
		> "$ND_DIR/dockerd.log" 2>&1 < /dev/null &
	ND_PID=$!
	wait_until 60 dk info > /dev/null 2>&1
}

# nd_pull IMAGE: the image in the test's engine before the first create, as
# on a Nomad client that ran it before. The engine is new in every run (its
# data dir goes with nd_stop), and a cold pull of a template under load took
# more than start_timeout: the create failed with "allocation pending" (run
# 1 of a 3-run repeat), which said nothing of the driver. A cold pull's own
# failure is tested by the contract server's task_fail mode.
nd_pull() {
	timeout 180 /usr/bin/docker -H "unix://$ND_DIR/docker.sock" pull -q "$1" > /dev/null 2>&1
}

nd_leftovers() {
	[ -n "$ND_DIR" ] || return 0
	dk ps -aq --filter label=sbx-nomad-contract=1 2> /dev/null
}

nd_stop() {
	local ids i cpid
	[ -n "$ND_PID" ] || return 0
	cpid=$(cat "$ND_DIR/exec/containerd/containerd.pid" 2> /dev/null)
	ids=$(nd_leftovers)
	[ -n "$ids" ] && dk rm -f $ids > /dev/null 2>&1
	kill "$ND_PID" 2> /dev/null
	for i in $(seq 1 200); do kill -0 "$ND_PID" 2> /dev/null || break; sleep 0.1; done
	kill -9 "$ND_PID" 2> /dev/null
	wait "$ND_PID" 2> /dev/null
	ND_PID=""
	# the containerd it started (it stops it too, unless killed)
	[ -n "$cpid" ] && grep -q containerd "/proc/$cpid/cmdline" 2> /dev/null && kill "$cpid" 2> /dev/null
	# whatever the engine left mounted (it unmounts its layers when it stops)
	awk -v p="$ND_DIR/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -l "$m" 2> /dev/null; done
	rm -rf "$ND_DIR"
	# the (empty) cgroups of --cgroup-parent
	rmdir /sys/fs/cgroup/*/"$ND_CG" "/sys/fs/cgroup/$ND_CG" 2> /dev/null
	return 0
}

# The stack's worker, reloaded with the config on disk (HUP to the master):
# the provisioner and the reaper run again (an old provisioner still
# consuming would place a create with the old driver), and so does the node
# agent (later tests want it back).
both_gone() { ! kill -0 "${1:-0}" 2> /dev/null && ! kill -0 "${2:-0}" 2> /dev/null; }
prov_consuming_since() { log_since "$1" | grep -q 'sbx-worker-provisioner\[[0-9]*\] info: consuming sbx.provision'; }
nm_reload() {
	local mark old_p old_r
	mark=$(log_mark)
	old_p=$(worker_pid provisioner)
	old_r=$(worker_pid reaper)
	kill -HUP "$(worker_master)" || return 1
	wait_until 40 both_gone "$old_p" "$old_r" || return 1
	wait_until 40 prov_consuming_since "$mark" || return 1
	wait_until 40 node_consuming_since "$mark"
}

# nm_restore: the test's clean-up: its background clients and sandboxes, the
# worker's config as it was (the lines between NM_CONF_MARK, when
# NM_CONF_TOUCHED is 1) and a reload, the contract server (nc_stop, the
# test's) and the test's dockerd.
nm_restore() {
	rt_kill_bg
	sb_cleanup
	if [ "${NM_CONF_TOUCHED:-0}" = 1 ]; then
		conf_unmark "$NM_CONF_MARK"
		nm_reload || echo "# the worker did not come back after restoring its config" >&2
		NM_CONF_TOUCHED=0
	fi
	nc_stop
	nd_stop
	return 0
}

# nc_wait_port: the contract server the test just started (NC_PID, its
# stderr in T_TMP/nc.log) wrote its port to T_TMP/nc.port: NC_PORT. Fails at
# once when it died, after 60 s when it still has not (a loaded machine
# took longer than the 10 s this waited before: run 1 of a 5-run repeat),
# and says which, with the end of its log, in NC_WHY.
nc_alive() { kill -0 "$NC_PID" 2> /dev/null; }
nc_port_or_dead() { test -s "$T_TMP/nc.port" || ! nc_alive; }
nc_wait_port() {
	NC_WHY=""
	wait_until 60 nc_port_or_dead
	if test -s "$T_TMP/nc.port"; then
		NC_PORT=$(cat "$T_TMP/nc.port")
		return 0
	fi
	if nc_alive; then NC_WHY="no port after 60 s"; else NC_WHY="it exited"; fi
	NC_WHY+=": $(tail -n 5 "$T_TMP/nc.log" 2> /dev/null | tr '\n' ' ')"
	return 1
}

# nc_stop: the contract server the test started (NC_PID), stopped.
nc_stop() {
	[ -n "$NC_PID" ] || return 0
	kill "$NC_PID" 2> /dev/null
	wait "$NC_PID" 2> /dev/null
	NC_PID=""
}
