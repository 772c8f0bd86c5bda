# Shared helpers of scripts/stack-up, stack-down and test. Sourced by bash
# scripts that run with `set -euo pipefail`; not meant for interactive shells
# (those source scripts/stack-env instead).

# Debian's programs first: what the stack and its tests run is what
# install-deps installed. A machine whose PATH begins with a version
# manager's shims (pyenv: each `python3` a bash script and a dozen more
# processes, ~0.5 s of CPU on a loaded 2-vCPU machine against ~50 ms for
# /usr/bin/python3) or its own builds of docker or postgres would otherwise
# run those; whatever only they have is still found after these.
case $PATH in
/usr/sbin:/usr/bin:/sbin:/bin | /usr/sbin:/usr/bin:/sbin:/bin:*) ;;
*) PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH ;;
esac
export PATH

SBX_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${SBX_STACK_DIR:=$SBX_REPO/.stack}"
: "${SBX_BUILD:=$SBX_REPO/build}"
S=$SBX_STACK_DIR

# Loopback ports of the private stack (the stack contract fixes them). A
# second, independent stack (another state dir) may shift them all by
# SBX_PORT_SHIFT; the shift is remembered in the state dir.
if [ -z "${SBX_PORT_SHIFT:-}" ] && [ -s "$S/port-shift" ]; then
	SBX_PORT_SHIFT=$(cat "$S/port-shift")
fi
SBX_PORT_SHIFT=${SBX_PORT_SHIFT:-0}
[[ $SBX_PORT_SHIFT =~ ^[0-9]+$ ]] || { echo "SBX_PORT_SHIFT must be a number" >&2; exit 1; }
# Below the kernel's ephemeral range (32768-60999): a client reconnecting while
# a service restarts could otherwise be given the service's port (and even
# connect to itself), and the service could not listen again.
PG_PORT=$((25432 + SBX_PORT_SHIFT))
AMQP_PORT=$((25672 + SBX_PORT_SHIFT))
MQ_DIST_PORT=$((25673 + SBX_PORT_SHIFT))
EPMD_PORT=$((25369 + SBX_PORT_SHIFT))
REGISTRY_PORT=$((25000 + SBX_PORT_SHIFT))
HTTPS_PORT=$((8443 + SBX_PORT_SHIFT))
MQ_NODE=sbx@localhost

# A second stack on this machine keeps its sandboxes' network (the bridge,
# the host ends of the veths, the sbx nft table and the DNS forwarder) in a
# network namespace of its own, SBX_NET_UPLINK (net_uplink_netns; made by
# stack-up, remembered in the state dir): in the host's it would share the
# first stack's table, whose node setup rewrites the table's fixed sets.
# Empty (the default): the host's network namespace.
if [ -z "${SBX_NET_UPLINK:-}" ] && [ -s "$S/net-uplink" ]; then
	SBX_NET_UPLINK=$(cat "$S/net-uplink")
fi
SBX_NET_UPLINK=${SBX_NET_UPLINK:-}
[[ -z $SBX_NET_UPLINK || $SBX_NET_UPLINK =~ ^[a-z][a-z0-9]{0,14}$ ]] ||
	{ echo "SBX_NET_UPLINK must be a short lowercase name (letters and digits)" >&2; exit 1; }

PGBIN=/usr/lib/postgresql/15/bin
MQBIN=/usr/lib/rabbitmq/bin

SBX_CONF=$S/sbx.conf
SBX_ADMIN=$SBX_BUILD/src/cli/sbx-admin
SBX_API_BIN=$SBX_BUILD/src/api/sbx-api
SBX_WORKER_BIN=$SBX_BUILD/workers/sbx-worker

say() { printf 'stack: %s\n' "$*"; }
warn() { printf 'stack: warning: %s\n' "$*" >&2; }
die() { printf 'stack: error: %s\n' "$*" >&2; exit 1; }

need_root() {
	[ "$(id -u)" = 0 ] || die "run as root (Postgres runs as the postgres user, sbx-worker needs root)"
}

# pid_alive PID PATTERN: the process exists and its command line contains
# PATTERN (so a recycled pid is never mistaken for ours).
pid_alive() {
	local pid=$1 pat=$2 cmd
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[ -r "/proc/$pid/cmdline" ] || return 1
	cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) || return 1
	[ -n "$cmd" ] || return 1 # zombie
	[[ $cmd == *"$pat"* ]]
}

pidfile_pid() {
	local f=$1
	[ -s "$f" ] || return 1
	head -n1 "$f" | tr -dc 0-9
}

# running NAME PATTERN: $S/run/NAME.pid names a live process matching PATTERN.
running() {
	local pid
	pid=$(pidfile_pid "$S/run/$1.pid") || return 1
	pid_alive "$pid" "$2"
}

# wait_for SECONDS WHAT LOG CMD...: polls CMD until it succeeds; on timeout
# fails naming the part and the log to read.
wait_for() {
	local secs=$1 what=$2 log=$3
	shift 3
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $deadline ]; then
			printf 'stack: error: %s not ready after %ss; read %s\n' "$what" "$secs" "$log" >&2
			[ -f "$log" ] && tail -n 15 "$log" | sed 's/^/    /' >&2
			return 1
		fi
		sleep 0.2
	done
}

# stop_pid NAME PID PATTERN SIGNAL SECS: signal a process we started and wait
# for it to exit; after SECS the same signal once more (a daemon's second
# SIGTERM means "exit now"), 5 s later SIGKILL.
stop_pid() {
	local name=$1 pid=$2 pat=$3 sig=$4 secs=$5
	pid_alive "$pid" "$pat" || return 0
	say "stopping $name (pid $pid)"
	kill "-$sig" "$pid" 2>/dev/null || true
	wait_exit "$pid" "$pat" "$secs" && return 0
	warn "$name (pid $pid) still running after ${secs}s: SIG$sig again"
	kill "-$sig" "$pid" 2>/dev/null || true
	wait_exit "$pid" "$pat" 5 && return 0
	warn "$name (pid $pid) did not exit: SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	wait_exit "$pid" "$pat" 10
}

wait_exit() {
	local pid=$1 pat=$2 deadline=$((SECONDS + $3))
	while pid_alive "$pid" "$pat"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.1
	done
}

# stop_pidfile NAME PATTERN SIGNAL SECS
stop_pidfile() {
	local pid
	if pid=$(pidfile_pid "$S/run/$1.pid"); then
		stop_pid "$1" "$pid" "$2" "$3" "$4"
	fi
	rm -f "$S/run/$1.pid"
}

# loops_under DIR: the loop devices (loopN) whose backing file is under DIR/.
loops_under() {
	local x
	for x in /sys/block/loop*/loop/backing_file; do
		[ -r "$x" ] && [[ $(cat "$x" 2>/dev/null) == "$1/"* ]] || continue
		x=${x#/sys/block/}
		echo "${x%%/*}"
	done
}

# port_busy PORT: something listens on 127.0.0.1:PORT (or the wildcard).
port_busy() {
	[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
}

check_port_free() {
	if port_busy "$1"; then
		die "port $1 ($2) is already in use by a process this stack did not start: $(ss -Hltnp "sport = :$1" | head -1)"
	fi
}

# Launch CMD detached from our terminal and process group; output to LOG.
# setsid does not fork here (a background job of a script is no group
# leader), so $! is the daemon's own pid.
# LAUNCH_PART=NAME: the daemon counts in the stack's part NAME (stack_part);
# the subshell execs setsid, so $! is still the daemon's pid.
launch() {
	local log=$1
	shift
	(stack_part "${LAUNCH_PART:-}"; exec setsid "$@") </dev/null >>"$log" 2>&1 &
	LAUNCHED_PID=$!
}

# cpu_part NAME: this shell, and what it starts from now on, count in the
# cpuacct cgroup NAME under $SBX_CPU_PARTS (scripts/test makes that
# directory for a run, cgroup v1; unset: nothing happens). A cgroup's
# cpuacct.usage is every nanosecond the scheduler gave its tasks, kernel
# work (fork, exec, page faults, exit) and short-lived processes included,
# whether or not they are still there to be asked.
cpu_part() {
	[ -n "${SBX_CPU_PARTS:-}" ] || return 0
	mkdir -p "$SBX_CPU_PARTS/$1" 2> /dev/null &&
		echo "$BASHPID" > "$SBX_CPU_PARTS/$1/cgroup.procs" 2> /dev/null || :
}

# stack_part NAME: this shell counts in the part $SBX_CPU_STACK/NAME (a
# stack's daemon: scripts/test names each stack's part); nothing without a
# NAME or a stack part.
stack_part() {
	[ -z "$1" ] || [ -z "${SBX_CPU_STACK:-}" ] || cpu_part "$SBX_CPU_STACK/$1"
}

# in_part NAME CMD...: CMD (a daemon's start) in a subshell that counts in
# the stack's part NAME (stack_part).
in_part() {
	local n=$1
	shift
	(stack_part "$n"; exec "$@")
}

secret() {
	# secret FILE BYTES: a hex secret generated once, kept mode 600.
	local f=$1 n=$2
	if [ ! -s "$f" ]; then
		(umask 077 && od -An -tx1 -N"$n" /dev/urandom | tr -d ' \n' > "$f.tmp" && mv "$f.tmp" "$f")
	fi
	cat "$f"
}

# Environment of every RabbitMQ command (server and CLI): private node,
# ports, directories and cookie (HOME). The server gets "-start_epmd false"
# because stack-up runs (and records) its epmd itself.
MQ_ENV=(HOME="$S/rabbitmq/home"
	RABBITMQ_NODENAME="$MQ_NODE"
	RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
	RABBITMQ_NODE_PORT=$AMQP_PORT
	RABBITMQ_DIST_PORT=$MQ_DIST_PORT
	ERL_EPMD_PORT=$EPMD_PORT
	ERL_EPMD_ADDRESS=127.0.0.1
	RABBITMQ_MNESIA_BASE="$S/rabbitmq/mnesia"
	RABBITMQ_LOG_BASE="$S/logs/rabbitmq"
	RABBITMQ_LOGS="$S/logs/rabbitmq/$MQ_NODE.log"
	RABBITMQ_CONFIG_FILE="$S/rabbitmq/rabbitmq.conf"
	RABBITMQ_ADVANCED_CONFIG_FILE="$S/rabbitmq/advanced.config"
	RABBITMQ_CONF_ENV_FILE="$S/rabbitmq/rabbitmq-env.conf"
	RABBITMQ_ENABLED_PLUGINS_FILE="$S/rabbitmq/enabled_plugins"
	RABBITMQ_PLUGINS_EXPAND_DIR="$S/rabbitmq/plugins-expand"
	RABBITMQ_PID_FILE="$S/run/rabbitmq-beam.pid"
	RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}")

mqctl() {
	env "${MQ_ENV[@]}" "$MQBIN/rabbitmqctl" -n "$MQ_NODE" "$@"
}

pg_psql() {
	"$PGBIN/psql" -X -q -h "$S/pg/run" -p $PG_PORT -U postgres -v ON_ERROR_STOP=1 "$@"
}

# build_tree [asan|plain]: autotools build in $SBX_BUILD (configured with
# --enable-werror when it has no Makefile yet). With an argument, configures
# again when the existing build's --enable-asan differs from the one wanted.
build_tree() {
	local want=${1:-} flags="--enable-werror" have=""
	[ "$want" = asan ] && flags="$flags --enable-asan"
	if ! { [ -x "$SBX_REPO/configure" ] && [ "$SBX_REPO/configure" -nt "$SBX_REPO/configure.ac" ]; }; then
		(cd "$SBX_REPO" && ./autogen.sh) || { echo "autogen.sh failed" >&2; return 1; }
	fi
	mkdir -p "$SBX_BUILD"
	[ -f "$SBX_BUILD/config.status" ] && have=$(cd "$SBX_BUILD" && ./config.status --config)
	if [ ! -f "$SBX_BUILD/Makefile" ] ||
	   { [ "$want" = asan ] && [[ $have != *--enable-asan* ]]; } ||
	   { [ "$want" = plain ] && [[ $have == *--enable-asan* ]]; }; then
		echo "configure $flags"
		# objects made with the other flags are not out of date to make:
		# ASan objects linked without -fsanitize fail, and the reverse hides
		# code from the sanitizers
		[ -f "$SBX_BUILD/Makefile" ] && make -C "$SBX_BUILD" clean > /dev/null
		(cd "$SBX_BUILD" && "$SBX_REPO/configure" $flags) || { echo "configure failed" >&2; return 1; }
	fi
	make -C "$SBX_BUILD" -j"$(nproc)"
}
