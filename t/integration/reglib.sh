# shellcheck shell=bash
# A registry of a test's own (bash; sourced, never run): Debian's
# docker-registry on a loopback address, its storage under a directory of
# the test's, stopped by pid.
#
# reg_start ADDR DIR [STORAGE]: serves on ADDR (127.0.0.1:PORT) from
# STORAGE (default DIR/storage), config and log in DIR; REG_PID is its pid.
# Fails when it does not answer within 10 s.
REG_PID=
reg_start() {
	mkdir -p "$2"
	cat >"$2/config.yml" <<EOC
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: ${3:-$2/storage}
http:
  addr: $1
EOC
	docker-registry serve "$2/config.yml" >"$2/log" 2>&1 </dev/null &
	REG_PID=$!
	for _ in $(seq 100); do
		curl -sf --noproxy '*' -o /dev/null "http://$1/v2/" && return 0
		sleep 0.1
	done
	return 1
}
# reg_stop: the registry reg_start started, if any
reg_stop() {
	[ -n "$REG_PID" ] || return 0
	kill "$REG_PID" 2>/dev/null
	wait "$REG_PID" 2>/dev/null
	REG_PID=
}
