# The client side of the Nomad contract server (t/nomad-contract/server.py
# --docker-host): Debian's Docker engine (docker.io) with runsc registered as
# a runtime through nomad/runsc-docker, as doc/nomad.md configures a Nomad
# client. The test starts its own dockerd: its data, exec root, socket and
# the allocation directories live under the stack's directory; it does not
# touch the host's firewall (--iptables=false, no bridge) and its containers
# are removed, and it is stopped, by nd_stop (t_on_exit).

ND_DIR=""
ND_PID=""

# dk ARGS...: the test's Docker engine.
dk() { /usr/bin/docker -H "unix://$ND_DIR/docker.sock" "$@"; }

nd_start() {
	ND_DIR=$SBX_STACK_DIR/nomad-docker
	mkdir -p "$ND_DIR/alloc" || return 1
	cat > "$ND_DIR/daemon.json" << EOF2
{"runtimes": {"runsc": {"path": "$SBX_REPO/nomad/runsc-docker",
                        "runtimeArgs": ["--platform=systrap", "--host-uds=create", "--overlay2=none"]}}}
EOF2
	setsid /usr/sbin/dockerd --config-file "$ND_DIR/daemon.json" --data-root "$ND_DIR/data" \
		--exec-root "$ND_DIR/exec" --pidfile "$ND_DIR/dockerd.pid" -H "unix://$ND_DIR/docker.sock" \
		--iptables=false --ip-forward=false --ip-masq=false --bridge=none --cgroup-parent=/sbx-nomad-test \
		--containerd-namespace sbx-nomad-test --containerd-plugins-namespace sbx-nomad-test-plugins \
		> "$ND_DIR/dockerd.log" 2>&1 < /dev/null &
	ND_PID=$!
	wait_until 60 dk info > /dev/null 2>&1
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
	rmdir /sys/fs/cgroup/*/sbx-nomad-test /sys/fs/cgroup/sbx-nomad-test 2> /dev/null
	return 0
}
